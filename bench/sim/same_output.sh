#!/bin/sh
# Replays traces with two corral binaries and compares their output byte for
# byte: the JSON summary (without its wall-clock sim_seconds) and the
# --starts file of each run. For checking that
# a change meant to keep behaviour (a refactoring) keeps it.
#
#   bench/sim/same_output.sh OLD_CORRAL NEW_CORRAL [TRACE_DIR]
#
# Exit status 0 when every run is identical; the differing runs are listed.
set -eu
old=$1
new=$2
traces=${3:-../shared/traces}
plan=$(dirname "$0")/../projects/kth.plan
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

runs=0
bad=0
# run NAME TRACE ARGS...: one replay with each binary.
run() {
  name=$1 trace=$2
  shift 2
  for side in old new; do
    eval bin=\$$side
    "$bin" sim "$trace" --starts "$work/$side.starts" "$@" >"$work/$side.out" 2>"$work/$side.err" ||
      echo "exit $?" >>"$work/$side.err"
    sed 's/"sim_seconds": *[0-9.e+-]*//' "$work/$side.out" >"$work/$side.json"
  done
  runs=$((runs + 1))
  if cmp -s "$work/old.json" "$work/new.json" && cmp -s "$work/old.starts" "$work/new.starts" &&
     cmp -s "$work/old.err" "$work/new.err"; then
    printf 'same    %s (%s lines of starts)\n' "$name" "$(wc -l <"$work/new.starts")"
  else
    printf 'DIFFER  %s\n' "$name"
    bad=$((bad + 1))
  fi
}

for t in KTH-SP2-1996-2.1-cln.swf CTC-SP2-1996-3.1-cln.swf.gz SDSC-SP2-1998-4.2-cln.swf.gz; do
  trace=$traces/$t
  short=${t%%-*}
  run "$short default" "$trace"
  for p in easy conservative checkpoint fcfs reserve; do
    run "$short --policy $p" "$trace" --policy "$p"
  done
  run "$short --projects" "$trace" --projects "$plan"
  run "$short --projects --nci" "$trace" --projects "$plan" --nci
done
echo "$runs runs, $bad differ"
[ "$bad" -eq 0 ]
