// placeholder: replaced by the sim part
