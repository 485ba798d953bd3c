#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Benchmark `gpumem snapshot peak` against Python's pickle.load + the same peak computation.

usage: snapshot_bench.py GPUMEM SIZE [SIZE...]     (SIZE as synth-snapshot --target-size: 100M, 1G)

Wall-clock and CPU times are both printed: on a shared machine the CPU time (user + system)
is the steadier comparison.  For each size: writes a synthetic snapshot with
../shared/tools/synth-snapshot into a temporary folder (deleted afterwards), runs gpumem
BENCH_REPEAT times (default 7), then Python BENCH_PY_REPEAT times (default 3 below 300 MB,
else 1), each a process that times pickle.load and then the peak
(tests/reference/snapshot_ref.py); checks the peaks agree and prints the best and median
times, the ratios and the peak RSS (each process's own, from wait4).
"""
import json
import os
import resource
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
import json, sys, time, pickle
sys.path.insert(0, %r)
import snapshot_ref
t0, c0 = time.perf_counter(), time.process_time()
with open(sys.argv[1], "rb") as f:
    data = snapshot_ref.SafeUnpickler(f).load()
t1, c1 = time.perf_counter(), time.process_time()
s = snapshot_ref.normalise(data)
peaks = [snapshot_ref.peak_of(s, d)["peak_bytes"] for d in snapshot_ref.devices_of(s)]
t2, c2 = time.perf_counter(), time.process_time()
print(json.dumps({"load_s": t1 - t0, "peak_s": t2 - t1, "load_cpu": c1 - c0,
                  "peak_cpu": c2 - c1, "peaks": peaks}))
''' % os.path.join(ROOT, "tests", "reference")


def timed(cmd):
    """Run cmd; its stdout, wall seconds, peak RSS bytes and CPU seconds (user + system, from
    the child's own rusage by wait4: microseconds, where /usr/bin/time rounds to 10 ms)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if p.returncode:
            sys.exit("failed: %s\n%s" % (" ".join(cmd), err.read().decode(errors="replace")[-2000:]))
        return out.read().decode(), wall, ru.ru_maxrss * 1024, ru.ru_utime + ru.ru_stime


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    gpumem, sizes = os.path.abspath(sys.argv[1]), sys.argv[2:] or ["100M"]
    repeat = int(os.environ.get("BENCH_REPEAT", "7"))
    for size in sizes:
        tmp = tempfile.mkdtemp(prefix="gpumem-bench-", dir="/tmp")
        try:
            path = os.path.join(tmp, "snapshot.pickle")
            subprocess.run([SYNTH, "-o", path, "--target-size", size, "--quiet"], check=True)
            fsize = os.path.getsize(path)
            # warm the page cache equally for both
            with open(path, "rb") as f:
                while f.read(1 << 24):
                    pass
            g = []
            for _ in range(repeat):
                out, wall, rss, cpu = timed(
                    [gpumem, "snapshot", "peak", "--json", "--top", "1", path])
                g.append((wall, cpu, rss))
            g_peaks = [d["peak_bytes"] for d in json.loads(out)["devices"]]
            # Python needs about 30 s and 8.5 GB per GB of file: fewer runs for large files
            py_repeat = int(os.environ.get("BENCH_PY_REPEAT", "3" if fsize < 300e6 else "1"))
            py = []
            for _ in range(py_repeat):
                out, p_wall, p_rss, _ = timed([sys.executable, "-c", PY, path])
                r = json.loads(out)
                r["rss"] = p_rss
                py.append(r)
            agree = all(r["peaks"] == g_peaks for r in py)
            print("file %s: %d bytes (%.1f MiB), peaks %s %s" % (
                size, fsize, fsize / 2**20, g_peaks,
                "agree" if agree else "DIFFER: %s" % py[0]["peaks"]))
            gw, gc = [x[0] for x in g], [x[1] for x in g]
            g_rss = max(x[2] for x in g)
            print("  gpumem snapshot peak (%d runs)    best %7.3f s wall %7.3f s CPU; median %7.3f s "
                  "wall %7.3f s CPU; peak RSS %7.1f MiB (%.2f x file)"
                  % (repeat, min(gw), min(gc), median(gw), median(gc), g_rss / 2**20, g_rss / fsize))
            lw, lc = [r["load_s"] for r in py], [r["load_cpu"] for r in py]
            tw = [r["load_s"] + r["peak_s"] for r in py]
            tc = [r["load_cpu"] + r["peak_cpu"] for r in py]
            print("  python pickle.load (%d runs)      best %7.3f s wall %7.3f s CPU; median %7.3f s "
                  "wall %7.3f s CPU" % (py_repeat, min(lw), min(lc), median(lw), median(lc)))
            print("  python pickle.load + peak         best %7.3f s wall %7.3f s CPU; "
                  "peak RSS %7.1f MiB (%.2f x file)"
                  % (min(tw), min(tc), max(r["rss"] for r in py) / 2**20,
                     max(r["rss"] for r in py) / fsize))
            print("  speed-up vs pickle.load alone: best %.1fx wall, %.1fx CPU; median %.1fx wall, "
                  "%.1fx CPU" % (min(lw) / min(gw), min(lc) / min(gc), median(lw) / median(gw),
                                 median(lc) / median(gc)))
            print("  speed-up vs pickle.load + peak: best %.1fx wall, %.1fx CPU"
                  % (min(tw) / min(gw), min(tc) / min(gc)))
            if not agree:
                return 1
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
