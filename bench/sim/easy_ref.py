#!/usr/bin/env python3
"""Straightforward textbook EASY backfilling replay of an SWF trace.

The reference that bench/sim/sim_speed is compared with: the same algorithm
implemented straightforwardly, with plain lists and heapq, no numpy, no
incremental tricks. SWF convention (bench/sim/RESULTS.md):
procs = field 8 if > 0 else field 5; run = field 4; skip run <= 0, procs <= 0,
procs > MaxProcs (else MaxNodes), submit < 0; estimate = field 9 if > 0 else
run; run capped by estimate; queue order submit then id; at one instant:
completions, then arrivals, then one scheduling pass.

Usage: easy_ref.py TRACE.swf[.gz] [--runs N]
Prints {"jobs", "mean_wait", "mean_bsld", "seconds"}; seconds is the replay
only (parsing excluded), best of --runs (default 1), like sim_speed.
"""
import gzip
import heapq
import json
import sys
import time


def llround(x):
    # C's llround (half away from zero), as the C++ parser
    return int(x + 0.5) if x >= 0 else -int(-x + 0.5)


def parse(path):
    opener = gzip.open if path.endswith(".gz") else open
    max_procs = max_nodes = 0
    rows = []
    with opener(path, "rt") as f:
        for line in f:
            s = line.strip()
            if not s:
                continue
            if s.startswith(";"):
                body = s[1:].strip()
                for key in ("MaxProcs", "MaxNodes"):
                    if body.startswith(key + ":"):
                        tok = body[len(key) + 1:].split()
                        try:
                            v = int(tok[0]) if tok else 0
                        except ValueError:
                            v = 0
                        if v > 0 and key == "MaxProcs" and not max_procs:
                            max_procs = v
                        if v > 0 and key == "MaxNodes" and not max_nodes:
                            max_nodes = v
                continue
            try:
                fld = [llround(float(x)) for x in s.split()]
            except ValueError:
                continue  # garbled line: skipped (sim counts it as bad)
            if len(fld) < 5 or fld[0] < 0:
                continue
            get = lambda k: fld[k - 1] if k <= len(fld) else -1
            jid, submit, run = get(1), get(2), get(4)
            procs = get(8) if get(8) > 0 else get(5)
            est = get(9) if get(9) > 0 else run
            rows.append((jid, submit, run, procs, est))
    machine = max_procs if max_procs > 0 else max_nodes
    if machine <= 0:
        sys.exit("error: the trace has no '; MaxProcs:' or '; MaxNodes:' header")
    jobs = []
    for jid, submit, run, procs, est in rows:
        if run <= 0 or procs <= 0 or procs > machine or submit < 0:
            continue
        jobs.append((submit, jid, min(run, est), procs, est))
    jobs.sort()
    return machine, jobs


def replay(machine, jobs):
    """Returns the start time of each job (index into jobs)."""
    n = len(jobs)
    start = [-1] * n
    free = machine
    running = []      # list of (estimated end, procs) of running jobs
    ends = []         # heap of (actual end, index)
    queue = []        # pending job indices in submit, id order
    nxt = 0
    while nxt < n or ends:
        t = jobs[nxt][0] if nxt < n else ends[0][0]
        if ends and ends[0][0] < t:
            t = ends[0][0]
        # completions
        while ends and ends[0][0] == t:
            _, i = heapq.heappop(ends)
            free += jobs[i][3]
            running.remove((start[i] + jobs[i][4], jobs[i][3]))
        # arrivals
        while nxt < n and jobs[nxt][0] == t:
            queue.append(nxt)
            nxt += 1
        # one scheduling pass
        def launch(i):
            nonlocal free
            start[i] = t
            free -= jobs[i][3]
            running.append((t + jobs[i][4], jobs[i][3]))
            heapq.heappush(ends, (t + jobs[i][2], i))

        k = 0
        while k < len(queue) and jobs[queue[k]][3] <= free:
            launch(queue[k])
            k += 1
        rest = []
        if k < len(queue):
            head = queue[k]
            need = jobs[head][3]
            # shadow time: earliest estimated end with enough processors
            avail = free
            shadow = None
            for est_end, p in sorted(running):
                avail += p
                if avail >= need:
                    shadow = est_end
                    break
            # extra: processors free at the shadow time beyond the head's
            avail = free
            for est_end, p in running:
                if est_end <= shadow:
                    avail += p
            extra = avail - need
            rest.append(head)
            for i in queue[k + 1:]:
                p = jobs[i][3]
                if p <= free:
                    if t + jobs[i][4] <= shadow:
                        launch(i)
                        continue
                    if p <= extra:
                        extra -= p
                        launch(i)
                        continue
                rest.append(i)
        queue = rest
    return start


def main():
    args = sys.argv[1:]
    runs = 1
    if "--runs" in args:
        k = args.index("--runs")
        runs = int(args[k + 1])
        del args[k:k + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    machine, jobs = parse(args[0])
    best = None
    for _ in range(max(1, runs)):
        t0 = time.perf_counter()
        start = replay(machine, jobs)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    wsum = bsum = 0.0
    for (submit, _, run, _, _), s in zip(jobs, start):
        wsum += s - submit
        bsum += max(1.0, (s + run - submit) / max(run, 10))
    n = len(jobs)
    print(json.dumps({"jobs": n, "mean_wait": round(wsum / n, 4) if n else 0,
                      "mean_bsld": round(bsum / n, 4) if n else 0,
                      "seconds": round(best, 4), "runs": max(1, runs)}))


if __name__ == "__main__":
    main()
