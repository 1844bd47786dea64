#!/bin/bash
# a comment
#CORRAL -q express -P chip:synthesis -R y

make
#CORRAL -N late
