// placeholder: replaced by the nci part
