#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Benchmark every `gpumem snapshot` command against two floors and Python's pickle.load.

usage: snapshot_bench.py GPUMEM BENCH_DIR SIZE [SIZE...]
       (SIZE as synth-snapshot --target-size: 100M, 1G; BENCH_DIR holds floor_bytes,
       floor_opcodes and measure, built from bench/*.c)

For each size a synthetic snapshot is written with ../shared/tools/synth-snapshot into a
temporary folder (deleted afterwards) and read once to warm the page cache.  Then, BENCH_REPEAT
times (default 3), every program runs once, in the same order each time, so that a slow
moment of a shared machine touches all of them alike (interleaved):

  floor-bytes     read(2) the whole file and sum its bytes
  floor-opcodes   step over every pickle opcode and its argument, building nothing
  gpumem info, stats, peak, trace (text, to /dev/null), trace --json, categories, leaks,
  oom, replay, plot, diff (the file with itself), report (-o into the temporary folder)
  pickle.load     Python's pickle.load of the file (tests/reference/snapshot_ref.py's safe
                  unpickler), the first BENCH_PY_REPEAT rounds only (default 3 below 300 MB,
                  else 1: it needs about 30 s and 8.5 GB per GB of file)

The targets, each a ratio of median wall times in the same run (never an absolute time):
peak at most 1.25x floor-opcodes; categories, oom, trace --json and report at most 1.5x
peak; diff (two loads) at most 1.5x peak with a peak RSS at most 0.6x the two files.  Each
is printed with its target, and the script exits 1 when one is beyond it.

Each run is a process of its own, started by bench/measure.c (a small process, so that the
peak RSS the kernel reports is the command's, not the Python driver's): wall time around it,
CPU time (user + system) and peak RSS from its own rusage (wait4).  Printed per program: median wall and CPU,
the largest RSS and its ratio to the file size, and the median wall time as a ratio to
`peak` and to the two floors.  The peaks of gpumem and Python must agree.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.environ.get("GM_SHARED", os.path.join(ROOT, "..", "shared"))
SYNTH = os.path.join(SHARED, "tools", "synth-snapshot")

PY = r'''
import json, sys, pickle
sys.path.insert(0, %r)
import snapshot_ref
with open(sys.argv[1], "rb") as f:
    data = snapshot_ref.SafeUnpickler(f).load()
s = snapshot_ref.normalise(data)
print(json.dumps([snapshot_ref.peak_of(s, d)["peak_bytes"] for d in snapshot_ref.devices_of(s)]))
''' % os.path.join(ROOT, "tests", "reference")


# (program, what it is compared with, the most it may take: a ratio of median wall times)
TARGETS = [
    ("peak", "floor-opcodes", 1.25),
    ("categories", "peak", 1.5),
    ("oom", "peak", 1.5),
    ("trace --json", "peak", 1.5),
    ("report", "peak", 1.5),
    ("diff", "peak", 1.5),
]
DIFF_RSS = 0.6  # diff's peak RSS, at most this times the two files it reads


def judge(med, rss, fsize):
    """Print each target's ratio beside its target; the number of them beyond it."""
    beyond = 0
    print("  targets (ratios of median wall times in this run):")
    for name, base, most in TARGETS:
        if name not in med or base not in med:
            continue
        ratio = med[name] / med[base]
        beyond += ratio > most
        print("    %-14s %5.2fx %-14s target <= %.2fx  %s" % (
            name, ratio, base, most, "met" if ratio <= most else "BEYOND"))
    if "diff" in rss:
        ratio = rss["diff"] / (2 * fsize)
        beyond += ratio > DIFF_RSS
        print("    %-14s %5.2fx %-14s target <= %.2fx  %s" % (
            "diff RSS", ratio, "two files", DIFF_RSS, "met" if ratio <= DIFF_RSS else "BEYOND"))
    return beyond


def timed(measure, cmd, stdout):
    """Run cmd through bench/measure.c with stdout to the file object 'stdout': its wall
    seconds, CPU seconds (user + system) and peak RSS bytes."""
    with tempfile.NamedTemporaryFile() as res, tempfile.TemporaryFile() as err:
        p = subprocess.run([measure, res.name, *cmd], stdout=stdout, stderr=err)
        if p.returncode:
            err.seek(0)
            sys.exit("failed (exit %d): %s\n%s" % (p.returncode, " ".join(cmd),
                                                   err.read().decode(errors="replace")[-2000:]))
        wall, cpu, rss, _ = open(res.name).read().split()
        return float(wall), float(cpu), int(rss)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def programs(gpumem, floors, path, tmp):
    report = os.path.join(tmp, "report.html")
    g = lambda *a: [gpumem, "snapshot", *a]
    return [
        ("floor-bytes", [os.path.join(floors, "floor_bytes"), path]),
        ("floor-opcodes", [os.path.join(floors, "floor_opcodes"), path]),
        ("info", g("info", path)),
        ("stats", g("stats", path)),
        ("peak", g("peak", "--json", "--top", "1", path)),
        ("trace", g("trace", path)),
        ("trace --json", g("trace", "--json", path)),
        ("categories", g("categories", path)),
        ("leaks", g("leaks", path)),
        ("oom", g("oom", path)),
        ("replay", g("replay", path)),
        ("plot", g("plot", "--width", "120", path)),
        ("diff", g("diff", path, path)),
        ("report", g("report", path, "-o", report, "--force")),
        ("pickle.load", [sys.executable, "-c", PY, path]),
    ]


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    gpumem, floors, sizes = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), sys.argv[3:]
    measure = os.path.join(floors, "measure")
    repeat = int(os.environ.get("BENCH_REPEAT", "3"))
    status = 0
    for size in sizes:
        tmp = tempfile.mkdtemp(prefix="gpumem-bench-", dir=os.environ.get("TMPDIR", "/tmp"))
        try:
            path = os.path.join(tmp, "snapshot.pickle")
            subprocess.run([SYNTH, "-o", path, "--target-size", size, "--seed", "1", "--quiet"],
                           check=True)
            fsize = os.path.getsize(path)
            with open(path, "rb") as f:
                while f.read(1 << 24):
                    pass
            progs = programs(gpumem, floors, path, tmp)
            py_repeat = int(os.environ.get("BENCH_PY_REPEAT", "3" if fsize < 300e6 else "1"))
            runs = {name: [] for name, _ in progs}
            peaks = {}
            for r in range(repeat):
                for name, cmd in progs:
                    if name == "pickle.load" and r >= py_repeat:
                        continue
                    keep = name in ("peak", "pickle.load")
                    with (tempfile.TemporaryFile() if keep else open(os.devnull, "wb")) as out:
                        runs[name].append(timed(measure, cmd, out))
                        if keep:
                            out.seek(0)
                            doc = json.loads(out.read().decode())
                            peaks[name] = ([d["peak_bytes"] for d in doc["devices"]]
                                           if name == "peak" else doc)
            agree = peaks.get("peak") == peaks.get("pickle.load")
            med = {n: median([x[0] for x in v]) for n, v in runs.items() if v}
            print("file %s: %d bytes (%.1f MiB); %d rounds; peaks %s %s" % (
                size, fsize, fsize / 2**20, repeat, peaks.get("peak"),
                "agree with Python" if agree else "DIFFER from Python's %s" % peaks.get("pickle.load")))
            print("  %-14s %4s %9s %9s %10s %6s %7s %8s %8s" % (
                "program", "runs", "wall s", "CPU s", "RSS MiB", "RSS/f", "x peak", "x bytes",
                "x opcodes"))
            for name, _ in progs:
                v = runs[name]
                if not v:
                    continue
                rss = max(x[2] for x in v)
                print("  %-14s %4d %9.3f %9.3f %10.1f %6.2f %7.2f %8.2f %8.2f" % (
                    name, len(v), med[name], median([x[1] for x in v]), rss / 2**20, rss / fsize,
                    med[name] / med["peak"], med[name] / med["floor-bytes"],
                    med[name] / med["floor-opcodes"]))
            if judge(med, {n: max(x[2] for x in v) for n, v in runs.items() if v}, fsize):
                status = 1
            sys.stdout.flush()
            if not agree:
                status = 1
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
