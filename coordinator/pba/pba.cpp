// placeholder: replaced by the pba part
