#!/bin/sh
#CORRAL -N build -l walltime=1:00:00,ncpus=2,mem=4gb
#CORRAL -pe smp 2-4 -now y
#CORRAL --preempt suspend
echo hi
