#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Benchmark `gpumem snapshot peak` against Python's pickle.load + the same peak computation.

usage: snapshot_bench.py GPUMEM SIZE [SIZE...]     (SIZE as synth-snapshot --target-size: 100M, 1G)

Wall-clock and CPU times are both printed: on a shared machine the CPU time (user + system)
is the steadier comparison.  For each size: writes a synthetic snapshot with ../shared/tools/synth-snapshot into a
temporary folder (deleted afterwards), runs gpumem under /usr/bin/time -v, then one Python
process that times pickle.load and the peak (tests/reference/snapshot_ref.py), also under
/usr/bin/time -v, checks both peaks agree and prints the ratios and peak RSS.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

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
    p = subprocess.run(["/usr/bin/time", "-v"] + cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stderr[-2000:]))
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr).group(1))
    m = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)",
                  p.stderr)
    wall = int(m.group(1) or 0) * 3600 + int(m.group(2)) * 60 + float(m.group(3))
    cpu = sum(float(re.search(r"%s time \(seconds\): ([\d.]+)" % k, p.stderr).group(1))
              for k in ("User", "System"))
    return p.stdout, wall, rss * 1024, cpu


def main():
    gpumem, sizes = os.path.abspath(sys.argv[1]), sys.argv[2:] or ["100M"]
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
            out, g_wall, g_rss, g_cpu = timed(
                [gpumem, "snapshot", "peak", "--json", "--top", "1", path])
            g_peaks = [d["peak_bytes"] for d in json.loads(out)["devices"]]
            out, p_wall, p_rss, _ = timed([sys.executable, "-c", PY, path])
            py = json.loads(out)
            agree = py["peaks"] == g_peaks
            print("file %s: %d bytes (%.1f MiB), peaks %s %s" % (
                size, fsize, fsize / 2**20, g_peaks, "agree" if agree else "DIFFER: %s" % py["peaks"]))
            print("  gpumem snapshot peak        %8.3f s wall %8.3f s CPU   peak RSS %7.1f MiB (%.2f x file)"
                  % (g_wall, g_cpu, g_rss / 2**20, g_rss / fsize))
            print("  python pickle.load          %8.3f s wall %8.3f s CPU" % (py["load_s"], py["load_cpu"]))
            print("  python pickle.load + peak   %8.3f s wall %8.3f s CPU   peak RSS %7.1f MiB (%.2f x file)"
                  % (py["load_s"] + py["peak_s"], py["load_cpu"] + py["peak_cpu"], p_rss / 2**20,
                     p_rss / fsize))
            print("  speed-up vs pickle.load alone: %.1fx wall, %.1fx CPU; vs load + peak: %.1fx wall, "
                  "%.1fx CPU" % (py["load_s"] / g_wall, py["load_cpu"] / g_cpu,
                                 (py["load_s"] + py["peak_s"]) / g_wall,
                                 (py["load_cpu"] + py["peak_cpu"]) / g_cpu))
            if not agree:
                return 1
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
