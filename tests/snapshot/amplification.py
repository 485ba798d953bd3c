#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Work in proportion to the input: small files whose memo references make them describe
far more than their size (one object shared by every trace entry) must cost every command
CPU time linear in the file's size, never in what the references describe.

The shapes, each generated with Python's own pickle (protocol 4, which memoizes every
shared object):
  shared_list   one frames list of F frame dicts in every one of E trace entries (each
                entry a memo reference to it); with a tuple in each entry ("pool_id") the
                flat reader gives the batch up and the general reader reads it
  long_names    F distinct frames whose file and function names are one shared string of L
                bytes (memory_viz's noise filter, the user-frame rule and the analysis'
                classification look at each distinct text once, and a frame keeps at most
                GM_SNAPSHOT_TEXT_MAX bytes of it)
  long_context  one compile_context string of L bytes shared by E entries
  block_frames  one frames list of F frames shared by the blocks of the segments
  history       2.0's block history entries sharing one frames list
The two repros of the issue that found the problem run at their full size (a 7.5 MB file of
10^5 frames x 8 x 10^4 entries that took 136 s; a 2.3 MB file of 2 MB names in 2 x 10^4
frames that took 17 s), then 8 random shapes drawn from these families (seeded; sizes up to a
few MB).

Every command (info, stats, peak, categories, leaks, oom, replay, plot, trace, trace --json,
report, diff) must finish with exit 0 (or 65 with its reason: the memory limit, or no trace
to replay or plot in a file of segments alone) within a CPU time
(user + system of the child) of 1 s + 1 us per byte of input: on the 2-core build machine
the slowest shape and command measured 0.85 us per byte (trace --json of long_names, which
writes each of its 2 x 10^4 frames with names of 4 KiB), most below 0.1 us per byte; before,
the first repro took 18 us per byte and its full size 136 s.

usage: amplification.py GPUMEM
"""
import os
import pickle
import random
import resource
import subprocess
import sys
import tempfile
import time

GPUMEM = os.path.abspath(sys.argv[1])
BASE_S = 1.0
PER_BYTE_S = 1e-6
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL " + msg)


def entry(i, frames, extra=None):
    e = {"action": "alloc", "addr": 4096 + 512 * i, "size": 512, "stream": 0, "time_us": i,
         "frames": frames}
    if extra:
        e.update(extra)
    return e


def shared_list(n_frames, n_entries, general):
    fr = [{"filename": "/x/f%d.py" % i, "line": i, "name": "fn%d" % i} for i in range(n_frames)]
    ev = [entry(i, fr, {"pool_id": (0, i)} if general else None) for i in range(n_entries)]
    return {"segments": [], "device_traces": [ev], "allocator_settings": {}}


def long_names(length, n_frames):
    s = "N" * length
    fr = [{"filename": s, "line": i, "name": s} for i in range(n_frames)]
    return {"segments": [], "device_traces": [[entry(0, fr)]], "allocator_settings": {}}


def long_context(length, n_entries):
    s = "C" * length
    ev = [entry(i, [], {"compile_context": s}) for i in range(n_entries)]
    return {"segments": [], "device_traces": [ev], "allocator_settings": {}}


def block_frames(n_frames, n_blocks, history):
    fr = [{"filename": "/x/b%d.py" % i, "line": i, "name": "g%d" % i} for i in range(n_frames)]
    blocks = []
    for i in range(n_blocks):
        b = {"size": 512, "requested_size": 512, "state": "active_allocated",
             "address": 1 << 30 | (512 * i)}
        if history:
            b["history"] = [{"addr": b["address"], "real_size": 512, "frames": fr}]
        else:
            b["frames"] = fr
        blocks.append(b)
    seg = {"device": 0, "address": 1 << 30, "total_size": 512 * n_blocks, "stream": 0,
           "segment_type": "large", "allocated_size": 512 * n_blocks,
           "active_size": 512 * n_blocks, "blocks": blocks}
    return {"segments": [seg], "device_traces": [[]], "allocator_settings": {}}


def random_shape(rng):
    kind = rng.choice(["shared_list", "long_names", "long_context", "block_frames", "history"])
    if kind == "shared_list":
        f, e, g = rng.randint(2000, 40000), rng.randint(2000, 30000), rng.random() < 0.5
        return "shared_list(frames=%d, entries=%d, general=%s)" % (f, e, g), shared_list(f, e, g)
    if kind == "long_names":
        n, f = rng.randint(10000, 1000000), rng.randint(100, 20000)
        return "long_names(length=%d, frames=%d)" % (n, f), long_names(n, f)
    if kind == "long_context":
        n, e = rng.randint(10000, 1000000), rng.randint(1000, 50000)
        return "long_context(length=%d, entries=%d)" % (n, e), long_context(n, e)
    f, b = rng.randint(1000, 30000), rng.randint(1000, 20000)
    return ("%s(frames=%d, blocks=%d)" % (kind, f, b),
            block_frames(f, b, kind == "history"))


def cpu_run(args, tmp):
    """Exit status, CPU seconds (user + system) and stderr of `gpumem ARGS`."""
    err = os.path.join(tmp, "err")
    with open(err, "wb") as e:
        p = subprocess.Popen([GPUMEM, *args], stdout=subprocess.DEVNULL, stderr=e)
        deadline = time.monotonic() + 600
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                p.kill()
                pid, status, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.01)
    with open(err, "rb") as e:
        text = e.read().decode(errors="replace")
    return os.waitstatus_to_exitcode(status), ru.ru_utime + ru.ru_stime, text


def check(name, data, tmp):
    path = os.path.join(tmp, "shape.pickle")
    with open(path, "wb") as f:
        pickle.dump(data, f, protocol=4)
    size = os.path.getsize(path)
    bound = BASE_S + PER_BYTE_S * size
    html = os.path.join(tmp, "r.html")
    commands = [["snapshot", "info", path], ["snapshot", "stats", path],
                ["snapshot", "peak", path], ["snapshot", "categories", path],
                ["snapshot", "leaks", path], ["snapshot", "oom", path],
                ["snapshot", "replay", path], ["snapshot", "plot", path],
                ["snapshot", "trace", "--to", "1000", path], ["snapshot", "trace", "--json", path],
                ["snapshot", "report", path, "-o", html, "--force"],
                ["snapshot", "diff", path, path]]
    worst = (0.0, "")
    for args in commands:
        rc, secs, err = cpu_run(args, tmp)
        what = " ".join(a for a in args[1:] if a not in (path, html))
        if rc not in (0, 65) or (rc == 65 and not err.strip()):
            fail("%s: %s: exit %d: %s" % (name, what, rc, err.strip()[-300:]))
        elif secs > bound:
            fail("%s: %s: %.2f s of CPU for %d bytes, above %.2f s (%.0f ns per byte)"
                 % (name, what, secs, size, bound, 1e9 * secs / size))
        if secs > worst[0]:
            worst = (secs, what)
    print("ok %s: %d bytes, slowest %s %.3f s (%.0f ns per byte; bound %.2f s)"
          % (name, size, worst[1], worst[0], 1e9 * worst[0] / size, bound))


def main():
    # the children's CPU time is measured; a core dump of a crash would only slow the run
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with tempfile.TemporaryDirectory(prefix="gpumem-amplification-") as tmp:
        check("shared_list, the first repro (10^5 frames x 8 x 10^4 entries, general reader)",
              shared_list(100000, 80000, True), tmp)
        check("long_names, the second repro (2 MB names, 2 x 10^4 frames)",
              long_names(2000000, 20000), tmp)
        rng = random.Random(29)
        for _ in range(8):
            name, data = random_shape(rng)
            check(name, data, tmp)
    print("%d failures" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
