#CORRAL -l ncpus=2 -pe smp 2
true
