#!/usr/bin/env python3
"""Runs one libFuzzer target briefly: its seed corpus first, then new inputs for SECONDS.

usage: run_fuzz.py TARGET SEED_DIR SECONDS ARTIFACT_DIR

New corpus entries and the script files of the targets go to a temporary directory that is
removed afterwards; a crashing input is kept in ARTIFACT_DIR and named in the output, so that it
can be added to the seeds and to a regression test."""
import os
import subprocess
import sys
import tempfile

target, seeds, seconds, artifacts = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
name = os.path.basename(target)
os.makedirs(artifacts, exist_ok=True)
with tempfile.TemporaryDirectory(prefix="corral-" + name + "-") as tmp:
    corpus = os.path.join(tmp, "corpus")
    os.mkdir(corpus)
    env = dict(os.environ, TMPDIR=tmp)
    cmd = [target, corpus, seeds,
           "-max_total_time=%d" % seconds, "-timeout=10", "-rss_limit_mb=1024", "-max_len=4096",
           "-print_final_stats=1", "-artifact_prefix=" + os.path.join(artifacts, name + "-")]
    print(" ".join(cmd), flush=True)
    rc = subprocess.call(cmd, env=env)
if rc != 0:
    print("%s: exit code %d; the input that failed is in %s" % (name, rc, artifacts), flush=True)
sys.exit(1 if rc != 0 else 0)
