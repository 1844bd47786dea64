#!/usr/bin/env python3
"""One setting against issue 20's targets on every trace, at 30 % and 0 %
checkpointable jobs: a line per run (bsld / EASY's, `*` where a target is
missed; worst wait against EASY's in days) and a SUMMARY line (targets met,
worst waits over EASY's summed, geometric mean of the bsld ratios).

usage: bench/sim/summary.py CORRAL LABEL [-- corral sim OPTIONS]
       TRACES=DIR (default ../shared/traces), J=parallel runs (default 2)

In OPTIONS, {easy_starts} stands for the --starts file of the trace's EASY
run (e.g. --oracle-starts {easy_starts}).
"""
import glob
import json
import math
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

EASY = ['--policy', 'easy', '--order', 'fifo', '--aging', '0', '--no-predict']


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    corral, label = sys.argv[1], sys.argv[2]
    opts = sys.argv[3:]
    if opts and opts[0] == '--':
        opts = opts[1:]
    traces = sorted(glob.glob(os.path.join(os.environ.get('TRACES', '../shared/traces'), '*.swf*')))
    if not traces:
        sys.exit('summary.py: no traces (set TRACES=DIR)')

    def run(t, o):
        r = subprocess.run(['nice', '-n', '19', corral, 'sim', t] + o, capture_output=True, text=True, check=True)
        return json.loads(r.stdout)

    tmp = tempfile.TemporaryDirectory()
    starts = {t: os.path.join(tmp.name, f'{i}.csv') for i, t in enumerate(traces)}
    tasks = [(t, EASY + ['--starts', starts[t]]) for t in traces]
    tasks += [(t, [x.replace('{easy_starts}', starts[t]) for x in opts] + ['--checkpointable', c])
              for t in traces for c in ('0.3', '0')]
    with ThreadPoolExecutor(int(os.environ.get('J', '2'))) as ex:
        res = list(ex.map(lambda a: run(*a), tasks[:len(traces)]))  # EASY first: its starts are used
        res += list(ex.map(lambda a: run(*a), tasks[len(traces):]))
    easy = dict(zip(traces, res[:len(traces)]))
    met_b = met_w = 0
    excess = logs = 0.0
    for (t, o), d in zip(tasks[len(traces):], res[len(traces):]):
        e, c = easy[t], o[-1]
        name = os.path.basename(t).split('-cln')[0].replace('.swf', '')
        goal = 0.5 if c == '0.3' else 0.6
        r = d['mean_bsld'] / e['mean_bsld']
        idle = d['idle_core_seconds_waiting'] / e['idle_core_seconds_waiting']
        met_b += r <= goal
        met_w += d['max_wait'] <= e['max_wait']
        excess += max(0, d['max_wait'] - e['max_wait']) / 86400
        logs += math.log(r)
        print(f"{label} {name:18s} {float(c):.0%} bsld {r:.3f}{'*' if r > goal else ' '} "
              f"max wait {d['max_wait'] / 86400:5.2f}/{e['max_wait'] / 86400:5.2f}{'*' if d['max_wait'] > e['max_wait'] else ' '} "
              f"p99 {d['p99_wait'] / 86400:5.2f} util {100 * (d['utilization'] - e['utilization']):+.2f} % "
              f"idle {idle:.3f} checkpointed {100 * d['jobs_checkpointed'] / d['jobs']:.1f} %")
    n = len(tasks) - len(traces)
    print(f"SUMMARY {label}: bsld met {met_b}/{n}, max wait met {met_w}/{n}, "
          f"excess {excess:.2f} d, geo {math.exp(logs / n):.3f}", flush=True)


if __name__ == '__main__':
    main()
