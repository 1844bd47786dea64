#!/bin/sh
# Regenerates the figures of bench/projects/RESULTS.md: the KTH-SP2 trace
# replayed without allocations, with the project plan (PBA; also with PBA's
# requeue bound at 4), with the plan plus the NCI stage, and with NCI's start
# window as a time bound (1 day; its quantum 1 day and resume window 3 days by
# default; also with PBA's requeue bound at 4, and 2 days). Run from the
# repository root:
#   CORRAL=build/tools/corral bench/projects/run.sh
# Prints a Markdown table; the raw JSON goes to $OUT (default /tmp/corral-projects).
set -eu
CORRAL=${CORRAL:-build/tools/corral}
TRACE=${TRACE:-../shared/traces/KTH-SP2-1996-2.1-cln.swf}
PLAN=${PLAN:-bench/projects/kth.plan}
OUT=${OUT:-/tmp/corral-projects}
mkdir -p "$OUT"
"$CORRAL" sim "$TRACE" > "$OUT/base.json"
"$CORRAL" sim "$TRACE" --projects "$PLAN" > "$OUT/pba.json"
"$CORRAL" sim "$TRACE" --projects "$PLAN" --pba-max-requeues 4 > "$OUT/pba4.json"
"$CORRAL" sim "$TRACE" --projects "$PLAN" --nci > "$OUT/nci.json"
"$CORRAL" sim "$TRACE" --projects "$PLAN" --nci --start-window 1d > "$OUT/nciw.json"
"$CORRAL" sim "$TRACE" --projects "$PLAN" --nci --start-window 1d --pba-max-requeues 4 > "$OUT/nciw4.json"
"$CORRAL" sim "$TRACE" --projects "$PLAN" --nci --start-window 2d > "$OUT/nciw2.json"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
runs = [("no allocations", "base"), ("--projects (PBA)", "pba"), ("--projects --pba-max-requeues 4", "pba4"),
        ("--projects --nci", "nci"), ("--projects --nci --start-window 1d", "nciw"),
        ("--projects --nci --start-window 1d --pba-max-requeues 4", "nciw4"),
        ("--projects --nci --start-window 2d", "nciw2")]
d = {k: json.load(open(f"{out}/{k}.json")) for _, k in runs}
print("| run | utilization | mean wait (s) | max wait (s) | makespan (s) | preemptions | max wait past threshold (s), per project | start window: bound (s), jobs past it, longest past (s); the same for jobs beside the allocations | longest suspension (s) |")
print("|---|---|---|---|---|---|---|---|---|")
for name, k in runs:
    r = d[k]
    past = " / ".join(str(v["max_wait_past_threshold"]) for p, v in r.get("projects", {}).items() if p != "(none)") or "-"
    win = (f"{r['window_bound']}, {r['jobs_past_window']}, {r['max_wait_past_window']}; "
           f"<= {r['window_narrow_procs']} procs: {r['narrow_jobs_past_window']}, {r['max_wait_past_window_narrow']}"
           if "window_bound" in r else "-")
    susp = r.get("max_suspension", "-")
    print(f"| {name} | {r['utilization']:.4f} | {r['mean_wait']:.0f} | {r['max_wait']} | {r['makespan']} | {r['preemptions']} | {past} | {win} | {susp} |")
for name, k in runs[1:]:
    r = d[k]
    print()
    print(f"{name}, pending threshold {r['pending_threshold']} s:")
    print()
    print("| project | allocated slots | mean slots used | jobs | jobs within allocation | mean wait (s) | max wait (s) | max wait past threshold (s) | SU charged | grant left | preemptions suffered | caused |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p, v in r["projects"].items():
        g = "-" if v["grant_left"] is None else f"{v['grant_left']:.0f}"
        print(f"| {p} | {v['allocated_slots']:.1f} | {v['mean_slots_used']:.2f} | {v['jobs']} | {v['allocated_jobs']} | "
              f"{v['mean_wait']:.0f} | {v['max_wait']} | {v['max_wait_past_threshold']} | {v['su_charged']:.0f} | {g} | "
              f"{v['preemptions_suffered']} | {v['preemptions_caused']} |")
PY
