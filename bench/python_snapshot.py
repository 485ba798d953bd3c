#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Benchmark gpumem.Snapshot(path) against pickle.load of the same file, side by side.

usage: python_snapshot.py BUILD [SIZE...]     (SIZE as synth-snapshot --target-size: 100M, 1G)

For each size: writes a synthetic snapshot with ../shared/tools/synth-snapshot into a
temporary folder (deleted afterwards), warms the page cache, then times in fresh processes of
the interpreter the build's package was made for (Python3_EXECUTABLE of BUILD/CMakeCache.txt)
BENCH_REPEAT (default 7) loads with gpumem.Snapshot and BENCH_PY_REPEAT (default 3 below
300 MB, else 1) pickle.load calls, each process timing its own load (wall and CPU).  Checks
that both saw the same number of trace events, prints best and median times and the ratios,
and exits 1 when gpumem is not at least 10x faster (best CPU time), the figure it promises,
or when loading and asking for the peak is not at least 25x faster.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SHARED = os.environ.get("GM_SHARED", os.path.join(ROOT, "..", "shared"))
SYNTH = os.path.join(SHARED, "tools", "synth-snapshot")
PROMISE = 10.0
PEAK_GOAL = 25.0  # pickle.load / (Snapshot + .peak()), best CPU: the peak without the rest

GPUMEM = r'''
import json, sys, time
import gpumem
t0, c0 = time.perf_counter(), time.process_time()
s = gpumem.Snapshot(sys.argv[1])
t1, c1 = time.perf_counter(), time.process_time()
s.peak()
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"load_s": t1 - t0, "load_cpu": c1 - c0, "peak_s": t2 - t1, "peak_cpu": c2 - c1,
                  "events": s.n_events}))
'''

PICKLE = r'''
import json, pickle, sys, time
t0, c0 = time.perf_counter(), time.process_time()
with open(sys.argv[1], "rb") as f:
    data = pickle.load(f)
t1, c1 = time.perf_counter(), time.process_time()
events = sum(len(t) for t in data.get("device_traces") or [])
print(json.dumps({"load_s": t1 - t0, "load_cpu": c1 - c0, "events": events}))
'''


def interpreter(build):
    """The Python the build's extension was compiled for."""
    try:
        with open(os.path.join(build, "CMakeCache.txt"), encoding="utf-8") as f:
            for line in f:  # FindPython keeps the interpreter it chose as _Python3_EXECUTABLE
                if line.startswith(("Python3_EXECUTABLE:", "_Python3_EXECUTABLE:")):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    return sys.executable


def child(py, code, path, env):
    p = subprocess.run([py, "-c", code, path], capture_output=True, text=True, env=env)
    if p.returncode:
        sys.exit("failed (%d): %s" % (p.returncode, p.stderr[-2000:]))
    return json.loads(p.stdout)


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build, sizes = os.path.abspath(sys.argv[1]), sys.argv[2:] or ["100M"]
    py = interpreter(build)
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    repeat = int(os.environ.get("BENCH_REPEAT", "7"))
    version = subprocess.run([py, "-c", "import sys; print(sys.version.split()[0])"],
                             capture_output=True, text=True).stdout.strip()
    status = 0
    for size in sizes:
        tmp = tempfile.mkdtemp(prefix="gpumem-bench-")
        try:
            path = os.path.join(tmp, "snapshot.pickle")
            subprocess.run([SYNTH, "-o", path, "--target-size", size, "--quiet"], check=True)
            fsize = os.path.getsize(path)
            with open(path, "rb") as f:  # warm the page cache equally for both
                while f.read(1 << 24):
                    pass
            g = [child(py, GPUMEM, path, env) for _ in range(repeat)]
            py_repeat = int(os.environ.get("BENCH_PY_REPEAT", "3" if fsize < 300e6 else "1"))
            p = [child(py, PICKLE, path, env) for _ in range(py_repeat)]
            same = g[0]["events"] == p[0]["events"]
            print("gpumem.Snapshot vs pickle.load: %s file, %d bytes (%.1f MiB), %d trace events %s, "
                  "Python %s" % (size, fsize, fsize / 2**20, g[0]["events"],
                                 "(both)" if same else "(pickle: %d: DIFFER)" % p[0]["events"], version))
            rows = (
                ("gpumem.Snapshot(path)", [r["load_s"] for r in g], [r["load_cpu"] for r in g]),
                ("pickle.load(f)", [r["load_s"] for r in p], [r["load_cpu"] for r in p]),
                ("  Snapshot + .peak()", [r["load_s"] + r["peak_s"] for r in g],
                 [r["load_cpu"] + r["peak_cpu"] for r in g]),
            )
            print("  %-24s %5s %12s %12s %12s %12s" % ("", "runs", "best wall", "best CPU", "median wall",
                                                       "median CPU"))
            for name, wall, cpu in rows:
                print("  %-24s %5d %10.3f s %10.3f s %10.3f s %10.3f s"
                      % (name, len(wall), min(wall), min(cpu), median(wall), median(cpu)))
            gw, gc = rows[0][1], rows[0][2]
            pw, pc = rows[1][1], rows[1][2]
            ratio = min(pc) / min(gc)
            print("  pickle.load / gpumem.Snapshot: best %.1fx wall, %.1fx CPU; median %.1fx wall, %.1fx CPU"
                  % (min(pw) / min(gw), ratio, median(pw) / median(gw), median(pc) / median(gc)))
            with_peak = min(pc) / min(rows[2][2])
            print("  pickle.load / (Snapshot + peak): best %.1fx CPU (goal %.0fx: %s)"
                  % (with_peak, PEAK_GOAL, "met" if with_peak >= PEAK_GOAL else "BELOW"))
            if with_peak < PEAK_GOAL:
                status = 1
            if ratio < PROMISE:
                print("  BELOW the promised %.0fx" % PROMISE)
                status = 1
            if not same:
                status = 1
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
