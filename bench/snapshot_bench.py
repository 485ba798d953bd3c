#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Benchmark every `gpumem snapshot` command against two floors, and gpumem's Python package
against Python's pickle.load.

usage: snapshot_bench.py GPUMEM BENCH_DIR SIZE [SIZE...]
       (SIZE as synth-snapshot --target-size: 100M, 1G; BENCH_DIR holds floor_bytes,
       floor_opcodes and measure, built from bench/*.c; the Python rows use the package built
       beside GPUMEM, in python/, with the interpreter it was built for)

For each size a synthetic snapshot is written with ../shared/tools/synth-snapshot into a
temporary folder (deleted afterwards) and read once to warm the page cache.  Then, BENCH_REPEAT
times (default 3), every program runs once, in the same order each time, so that a slow
moment of a shared machine touches all of them alike (interleaved):

  floor-bytes     read(2) the whole file and sum its bytes
  floor-opcodes   step over every pickle opcode and its argument, building nothing
  gpumem info, stats, peak, trace (text, to /dev/null), trace --json, categories, leaks,
  oom, replay, plot, diff (the file with itself), report (-o into the temporary folder)
  python load, python load+peak
                  gpumem's Python package: s = gpumem.Snapshot(path), then s.peak() (one
                  process: the load, and the load with the peak)
  pickle.load     Python's own pickle.load(f) of the file (the C unpickler), as a caller
                  runs it: with the interpreter's cyclic garbage collector on (the judged row);
  pickle.load (gc off)
                  the same after gc.disable(): the unpickler alone, without the collections
                  the many dicts it makes set off (most of pickle.load's time in CPython 3.11,
                  and a policy that changes between versions: 3.14's GC is incremental);
                  printed, not judged, and
  python reference
                  tests/reference/snapshot_ref.py's safe unpickler, normalisation and peak
                  (whose peaks the others must agree with), these three the first
                  BENCH_PY_REPEAT rounds only (default 3 below 300 MB, else 1: each needs
                  about 30 s and 8.5 GB per GB of file)

The Python rows time the calls inside their process (the interpreter's start and the imports
left out, alike for all three: what a caller of pickle.load or gpumem.Snapshot waits for);
their RSS is the process's.

The targets, each a ratio of median wall times in the same run (never an absolute time):
peak at most 1.25x floor-opcodes; categories, oom, trace --json and report at most 1.5x
peak; diff (two loads) at most 1.5x peak with a peak RSS at most 0.6x the two files; python
load+peak at least 25x faster than pickle.load (gc on, as a caller waits for it; the ratio
to pickle.load (gc off) is printed beside it, not judged).  Each is printed with its target,
and the script exits 1 when one is beyond it.  The header names the Python that runs the
Python rows (the ratio to pickle.load moves with its version).

Each run is a process of its own, started by bench/measure.c (a small process, so that the
peak RSS the kernel reports is the command's, not the Python driver's): wall time around it,
CPU time (user + system) and peak RSS from its own rusage (wait4).  Printed per program: median wall and CPU,
the largest RSS and its ratio to the file size, and the median wall time as a ratio to
`peak` and to the two floors.  The peaks of the command, the package and the reference must
agree (the package's peak() the device of the largest, the first of equal ones), and the
package and pickle.load must see as many trace events.
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

# Each Python program prints one JSON object: its peaks (a list, per device in file order) or
# its trace events, and the seconds (wall, CPU) of the calls it times.
REFERENCE = r'''
import json, sys, time
sys.path.insert(0, %r)
import snapshot_ref
t0, c0 = time.perf_counter(), time.process_time()
with open(sys.argv[1], "rb") as f:
    data = snapshot_ref.SafeUnpickler(f).load()
s = snapshot_ref.normalise(data)
peaks = [snapshot_ref.peak_of(s, d)["peak_bytes"] for d in snapshot_ref.devices_of(s)]
print(json.dumps({"peaks": peaks, "s": time.perf_counter() - t0, "cpu": time.process_time() - c0}))
''' % os.path.join(ROOT, "tests", "reference")

PICKLE = r'''
import gc, json, pickle, sys, time
if sys.argv[2:] == ["gc-off"]:
    gc.disable()
t0, c0 = time.perf_counter(), time.process_time()
with open(sys.argv[1], "rb") as f:
    data = pickle.load(f)
t1, c1 = time.perf_counter(), time.process_time()
events = sum(len(t) for t in data.get("device_traces") or [])
print(json.dumps({"events": events, "s": t1 - t0, "cpu": c1 - c0}))
'''

GPUMEM = r'''
import json, sys, time
import gpumem
t0, c0 = time.perf_counter(), time.process_time()
s = gpumem.Snapshot(sys.argv[1])
t1, c1 = time.perf_counter(), time.process_time()
p = s.peak()
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"events": s.n_events, "device": p["device"], "peak": p["peak_bytes"], "load_s": t1 - t0,
                  "load_cpu": c1 - c0, "s": t2 - t0, "cpu": c2 - c0}))
'''


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
# (program, what it is compared with, the least speed-up: a ratio of median wall times)
SPEEDUPS = [
    ("python load+peak", "pickle.load", 25.0),
]
# (program, what it is compared with): speed-ups printed, not judged
SPEEDUPS_SHOWN = [
    ("python load+peak", "pickle.load (gc off)"),
]


def judge(med, cpu, rss, fsize):
    """Print each target's ratio beside its target; the number of them beyond it.  med and
    cpu: median wall and CPU seconds by program; rss: the largest peak RSS."""
    beyond = 0
    print("  targets (ratios of median wall times in this run):")
    for name, base, most in TARGETS:
        if name not in med or base not in med:
            continue
        ratio = med[name] / med[base]
        beyond += ratio > most
        print("    %-16s %5.2fx %-14s target <= %.2fx  %s" % (
            name, ratio, base, most, "met" if ratio <= most else "BEYOND"))
    if "diff" in rss:
        ratio = rss["diff"] / (2 * fsize)
        beyond += ratio > DIFF_RSS
        print("    %-16s %5.2fx %-14s target <= %.2fx  %s" % (
            "diff RSS", ratio, "two files", DIFF_RSS, "met" if ratio <= DIFF_RSS else "BEYOND"))
    for name, base, least in SPEEDUPS:
        if name not in med or base not in med:
            print("    %s: not measured (no Python package in the build)" % name)
            continue
        ratio = med[base] / med[name]
        beyond += ratio < least
        print("    %-16s %5.1fx faster than %-11s target >= %.0fx  %s (CPU: %.1fx)" % (
            name, ratio, base, least, "met" if ratio >= least else "BEYOND", cpu[base] / cpu[name]))
    for name, base in SPEEDUPS_SHOWN:
        if name in med and base in med:
            print("    %-16s %5.1fx faster than %-20s (not judged; CPU: %.1fx)" % (
                name, med[base] / med[name], base, cpu[base] / cpu[name]))
    return beyond


def timed(measure, cmd, stdout, env=None):
    """Run cmd through bench/measure.c with stdout to the file object 'stdout': its wall
    seconds, CPU seconds (user + system) and peak RSS bytes."""
    with tempfile.NamedTemporaryFile() as res, tempfile.TemporaryFile() as err:
        p = subprocess.run([measure, res.name, *cmd], stdout=stdout, stderr=err, env=env)
        if p.returncode:
            err.seek(0)
            sys.exit("failed (exit %d): %s\n%s" % (p.returncode, " ".join(cmd),
                                                   err.read().decode(errors="replace")[-2000:]))
        wall, cpu, rss, _ = open(res.name).read().split()
        return float(wall), float(cpu), int(rss)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def interpreter(build):
    """The Python the build's extension was compiled for (its CMake cache), else this one."""
    try:
        with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8") as f:
            for line in f:  # FindPython keeps the interpreter it chose as _Python3_EXECUTABLE
                if line.startswith(("Python3_EXECUTABLE:", "_Python3_EXECUTABLE:")):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return sys.executable


# The programs whose output is kept (JSON) and which run only the first BENCH_PY_REPEAT rounds.
KEPT = ("peak", "python load+peak", "pickle.load", "pickle.load (gc off)", "python reference")
PY_SLOW = ("pickle.load", "pickle.load (gc off)", "python reference")


def programs(gpumem, floors, path, tmp):
    report = os.path.join(tmp, "report.html")
    g = lambda *a: [gpumem, "snapshot", *a]
    progs = [
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
    ]
    build = os.path.dirname(gpumem)
    py = interpreter(build)
    if os.path.isdir(os.path.join(build, "python", "gpumem")):
        progs.append(("python load+peak", [py, "-c", GPUMEM, path]))
    progs.append(("pickle.load", [py, "-c", PICKLE, path]))
    progs.append(("pickle.load (gc off)", [py, "-c", PICKLE, path, "gc-off"]))
    progs.append(("python reference", [py, "-c", REFERENCE, path]))
    return progs, py


def python_version(py):
    """The version of the Python 'py' (its sys.version's first word)."""
    p = subprocess.run([py, "-c", "import sys; print(sys.version.split()[0])"],
                       stdout=subprocess.PIPE, check=True)
    return p.stdout.decode().strip()


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
            progs, py = programs(gpumem, floors, path, tmp)
            py_repeat = int(os.environ.get("BENCH_PY_REPEAT", "3" if fsize < 300e6 else "1"))
            env = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(gpumem), "python"))
            rows = [name for name, _ in progs]
            if "python load+peak" in rows:  # the load alone: the same process's first call
                rows.insert(rows.index("python load+peak"), "python load")
            runs = {name: [] for name in rows}
            docs = {}
            for r in range(repeat):
                for name, cmd in progs:
                    if name in PY_SLOW and r >= py_repeat:
                        continue
                    keep = name in KEPT
                    with (tempfile.TemporaryFile() if keep else open(os.devnull, "wb")) as out:
                        wall, cpu, rss = timed(measure, cmd, out, env)
                        if keep:
                            out.seek(0)
                            docs[name] = doc = json.loads(out.read().decode())
                        if name == "python load+peak":
                            runs["python load"].append((doc["load_s"], doc["load_cpu"], rss))
                        if name.startswith(("python", "pickle")):
                            wall, cpu = doc["s"], doc["cpu"]  # the calls, not the interpreter
                        runs[name].append((wall, cpu, rss))
            peaks = {"peak": [d["peak_bytes"] for d in docs["peak"]["devices"]]}
            # the package's peak() is the device with the largest peak (max(): the first of
            # equal ones; the bench's file has no empty device)
            top = max(docs["peak"]["devices"], key=lambda d: d["peak_bytes"])
            pkg = docs.get("python load+peak", {})
            agree = (docs["python reference"]["peaks"] == peaks["peak"] and
                     (pkg.get("device", top["device"]), pkg.get("peak", top["peak_bytes"])) ==
                     (top["device"], top["peak_bytes"]))
            same = ("python load+peak" not in docs or
                    docs["python load+peak"]["events"] == docs["pickle.load"]["events"] ==
                    docs["pickle.load (gc off)"]["events"])
            med = {n: median([x[0] for x in v]) for n, v in runs.items() if v}
            print("file %s: %d bytes (%.1f MiB); %d rounds; Python %s (%s); peaks %s %s; "
                  "%d trace events %s" % (
                size, fsize, fsize / 2**20, repeat, python_version(py), py, peaks["peak"],
                "agree (command, package, reference)" if agree else
                "DIFFER: reference %s, package device %s peak %s" % (
                    docs["python reference"]["peaks"], pkg.get("device"), pkg.get("peak")),
                docs["pickle.load"]["events"],
                "(pickle.load and the package)" if same else
                "(pickle.load; the package: %d: DIFFER)" % docs["python load+peak"]["events"]))
            print("  %-20s %4s %9s %9s %10s %6s %7s %8s %8s" % (
                "program", "runs", "wall s", "CPU s", "RSS MiB", "RSS/f", "x peak", "x bytes",
                "x opcodes"))
            for name in rows:
                v = runs[name]
                if not v:
                    continue
                rss = max(x[2] for x in v)
                print("  %-20s %4d %9.3f %9.3f %10.1f %6.2f %7.2f %8.2f %8.2f" % (
                    name, len(v), med[name], median([x[1] for x in v]), rss / 2**20, rss / fsize,
                    med[name] / med["peak"], med[name] / med["floor-bytes"],
                    med[name] / med["floor-opcodes"]))
            if judge(med, {n: median([x[1] for x in v]) for n, v in runs.items() if v},
                     {n: max(x[2] for x in v) for n, v in runs.items() if v}, fsize):
                status = 1
            sys.stdout.flush()
            if not agree or not same:
                status = 1
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
