// placeholder: replaced by the planner part
