#!/bin/sh
# Replays traces with two corral binaries and compares their output byte for
# byte: the JSON summary (without its wall-clock sim_seconds, and only the
# keys both binaries print, so a newly added figure is no difference) and
# the --starts file of each run. For checking that a change meant to keep
# behaviour (a refactoring) keeps it.
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
# common_keys OLD NEW OLD_OUT NEW_OUT: each summary with only the keys both
# have, sim_seconds dropped; output that is not JSON is copied as it is.
common_keys() {
  python3 - "$@" <<'PY'
import json, sys
old, new, old_out, new_out = sys.argv[1:]
try:
    a, b = json.load(open(old)), json.load(open(new))
except ValueError:
    open(old_out, "w").write(open(old).read())
    open(new_out, "w").write(open(new).read())
    sys.exit(0)
keys = [k for k in a if k in b and k != "sim_seconds"]
json.dump({k: a[k] for k in keys}, open(old_out, "w"), sort_keys=True)
json.dump({k: b[k] for k in keys}, open(new_out, "w"), sort_keys=True)
PY
}
# run NAME TRACE ARGS...: one replay with each binary.
run() {
  name=$1 trace=$2
  shift 2
  for side in old new; do
    eval bin=\$$side
    "$bin" sim "$trace" --starts "$work/$side.starts" "$@" >"$work/$side.out" 2>"$work/$side.err" ||
      echo "exit $?" >>"$work/$side.err"
  done
  common_keys "$work/old.out" "$work/new.out" "$work/old.json" "$work/new.json"
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
