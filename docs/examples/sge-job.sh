#!/bin/sh
#$ -N sge_sample
#$ -cwd
#$ -pe smp 1-2
#$ -l h_rt=0:05:00,h_vmem=256M
#$ -R y

# A Grid Engine job: `corral submit sge-job.sh` runs it unchanged. It gets 1 to 2 slots (as
# many as are free at its earliest start: NSLOTS says how many), 256 MiB a slot and 5 minutes,
# with a reservation should it have to wait.
echo "job $JOB_ID ($JOB_NAME) in $SGE_O_WORKDIR"
echo "slots $NSLOTS of pe $PE"
echo "cores $(nproc)"
