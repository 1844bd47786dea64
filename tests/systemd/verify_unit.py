#!/usr/bin/env python3
"""Checks the corrald unit as meson builds and installs it, for a fresh install:

  1. systemd-analyze verify on a copy whose ExecStart runs the built corrald: exit 0 and
     not one warning (verify exits 0 on unknown keys or bad paths; it only warns);
  2. every path the unit names is installed by this build (ExecStart's binary,
     Documentation= files), read from `meson introspect --installed`;
  3. no ReadWritePaths= / ReadOnlyPaths= / ... entry that may be missing on a fresh
     machine without a "-" prefix (systemd then refuses to start: 226/NAMESPACE), unless
     the unit itself makes it (StateDirectory= etc.) or it is an API file system;
  4. ExecStart's command line, run with the built corrald, gets past its option and config
     file handling where no config file exists (the default one is optional).

Skips (exit 77, meson's code) with the reason when systemd-analyze is not installed.
Arguments: UNIT CORRALD BUILD_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def unit_entries(text):
    """(section, key, value) for every assignment, continuation lines joined."""
    out, section, pending = [], "", ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        key, _, value = line.partition("=")
        out.append((section, key.strip(), value.strip()))
    return out


def main():
    if len(sys.argv) != 4:
        fail("usage: verify_unit.py UNIT CORRALD BUILD_DIR")
    unit, corrald, build = (os.path.abspath(a) for a in sys.argv[1:])
    analyze = shutil.which("systemd-analyze")
    if not analyze:
        print("SKIP: systemd-analyze is not installed here (package systemd); the unit is not checked")
        return SKIP

    text = open(unit).read()
    entries = unit_entries(text)
    get = lambda k: [v for (_, key, v) in entries if key == k]

    # 2. What the unit names is what this build installs.
    inst = json.loads(subprocess.run(["meson", "introspect", "--installed", build], check=True,
                                     capture_output=True, text=True).stdout)
    installed = set(inst.values())
    execs = get("ExecStart")
    if len(execs) != 1:
        fail("expected one ExecStart=, got %d" % len(execs))
    argv = execs[0].split()
    binary = argv[0].lstrip("-@:+!")
    if binary not in installed:
        fail("ExecStart runs %s, which this build does not install (installs: %s)" %
             (binary, ", ".join(sorted(p for p in installed if p.endswith("corrald")))))
    docs = [d for v in get("Documentation") for d in v.split()]
    if not docs:
        fail("no Documentation=")
    for d in docs:
        if d.startswith("file:") and d[5:] not in installed:
            fail("Documentation=%s is not installed by this build" % d)
    if not any(p.endswith("/systemd/system/corrald.service") for p in installed):
        fail("the unit itself is not installed")

    # 3. Paths that must exist when the namespace is set up.
    made = set()
    for key, root in (("StateDirectory", "/var/lib/"), ("RuntimeDirectory", "/run/"),
                      ("CacheDirectory", "/var/cache/"), ("LogsDirectory", "/var/log/"),
                      ("ConfigurationDirectory", "/etc/")):
        for v in get(key):
            made.update(root + d.split(":")[0] for d in v.split())
    for key in ("ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths", "ExecPaths", "NoExecPaths",
                "BindPaths", "BindReadOnlyPaths"):
        for v in get(key):
            for p in v.split():
                if p.startswith("-"):
                    continue
                p = p.lstrip("+").split(":")[0]
                if p in made or any(p == a or p.startswith(a + "/") for a in ("/sys", "/proc", "/dev")):
                    continue
                fail("%s=%s: not made by the unit and not prefixed with '-': systemd refuses to start "
                     "(226/NAMESPACE) where it does not exist yet" % (key, p))

    tmp = tempfile.mkdtemp(prefix="corral-unit-")
    try:
        # 4. ExecStart's options, with no config file anywhere (as on a fresh machine): corrald must
        # not stop at option or config handling. --export-topology ends it right after them.
        run = [corrald] + argv[1:] + ["--export-topology", os.path.join(tmp, "topo.xml")]
        if os.path.exists("/etc/corral/corrald.conf"):
            print("note: /etc/corral/corrald.conf exists here: it is read as on a configured node")
        r = subprocess.run(run, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            fail("ExecStart's command line fails before serving: %s\n%s" % (" ".join(run), r.stderr))

        # 1. systemd-analyze verify on a copy that runs the built corrald.
        copy = os.path.join(tmp, "corrald.service")
        with open(copy, "w") as f:
            f.write(text.replace("ExecStart=" + execs[0], "ExecStart=" + " ".join([corrald] + argv[1:]), 1))
        r = subprocess.run([analyze, "verify", copy], capture_output=True, text=True, timeout=120)
        out = (r.stdout + r.stderr).strip()
        print("systemd-analyze verify: exit %d%s" % (r.returncode, (":\n" + out) if out else ", no output"))
        if r.returncode != 0 or out:
            fail("systemd-analyze verify is not clean")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("ok: %s (ExecStart %s, %d doc file(s))" % (unit, binary, len(docs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
