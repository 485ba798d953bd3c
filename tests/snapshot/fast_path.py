#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The pickle reader's flat reader (batches of trace-entry dicts read without building
nodes) must give exactly what the general reader gives: the same output, exit code and
message for every command, on every real file, on the synthetic ones, on traces long enough
for many batches written with protocols 2 to 5, on files built to make the fast path give up
halfway (shared dicts, lists referenced again under other keys, tuples, big ints, long
stacks, a trace before the segments, keys and values that change from entry to entry), and on
prefixes and byte flips of such a file.
GPUMEM_SNAPSHOT_READER=general makes the CLI load with the general reader only (the
reader parameter of gm_snapshot_load(): GM_SNAPSHOT_READER_GENERAL); the first run of each
file checks that the two readers really differ in what they do, by the count of batches the
flat reader took (none with the general reader), so that the comparison cannot pass by
running one reader twice.  (The one-pass peak search of the timeline is held against the
forward replay by tests/unit/test_snapshot.c.)

usage: fast_path.py GPUMEM [--third-party-data]
Everything but the real files; with --third-party-data (tests/needs.sh sets $GM_TESTDATA), the
real files alone.
"""
import glob
import os
import pickle
import random
import re
import shutil
import subprocess
import sys
import tempfile

GPUMEM = os.path.abspath(sys.argv[1])
THIRD_PARTY = "--third-party-data" in sys.argv[2:]
REAL = os.path.join(os.environ.get("GM_TESTDATA", ""), "snapshots")
MiB = 1 << 20
fails = 0
compared = 0


def run(args, fast):
    env = dict(os.environ)
    env.pop("GPUMEM_SNAPSHOT_READER", None)
    if not fast:
        env["GPUMEM_SNAPSHOT_READER"] = "general"
    p = subprocess.run([GPUMEM, "snapshot", *args], capture_output=True, timeout=120, env=env)
    return p.returncode, p.stdout, p.stderr


def without_reader(out, sub):
    """info --json says how many batches the flat reader took: the one line that differs."""
    if not sub.startswith("info"):
        return out
    return re.sub(rb',\s*"flat_batches":\s*[0-9]+', b"", out)


def flat_batches(path, fast):
    rc, out, _ = run(["info", "--json", path], fast)
    m = re.search(rb'"flat_batches":\s*([0-9]+)', out)
    return int(m.group(1)) if rc == 0 and m else None


def same(name, path, subs=("trace --json", "peak --json", "stats --json", "info --json")):
    global fails, compared
    for sub in subs:
        args = sub.split() + [path]
        a, b = run(args, True), run(args, False)
        a = (a[0], without_reader(a[1], sub), a[2])
        b = (b[0], without_reader(b[1], sub), b[2])
        compared += 1
        if a != b:
            fails += 1
            print("FAIL %s: `gpumem snapshot %s` differs with the fast path: exit %d vs %d\n"
                  "  fast: %r\n  slow: %r" % (name, sub, a[0], b[0], (a[1] + a[2])[:300],
                                               (b[1] + b[2])[:300]))
            return False
        if b"Sanitizer" in a[2] or b"runtime error" in a[2]:
            fails += 1
            print("FAIL %s: sanitizer report: %s" % (name, a[2][:400]))
            return False
    return True


def frame(fn, line, name):
    return {"filename": fn, "line": line, "name": name}


def long_trace(n, variant):
    """A snapshot whose device 0 trace has n entries (many batches of 1000)."""
    frames = [frame("/w/train.py", i, "f%d" % i) for i in range(40)]
    stacks = [[frames[(i * 7 + k) % 40] for k in range(1 + i % 13)] for i in range(60)]
    trace = []
    live = {}
    addr = 0x7f0000000000
    for i in range(n):
        st = list(stacks[i % 60]) if i % 3 else stacks[i % 60]
        if i % 2 == 0 or not live:
            a = addr + (i % 500) * 0x100000
            e = {"action": "alloc", "addr": a, "size": 512 * (1 + i % 97), "stream": 0,
                 "time_us": 1700000000000000 + i, "compile_context": "N/A", "frames": st}
            live[a] = e
        else:
            a = next(iter(live))
            old = live.pop(a)
            e = {"action": "free_completed", "addr": a, "size": old["size"], "stream": 0,
                 "time_us": 1700000000000000 + i, "compile_context": "N/A",
                 "frames": old["frames"] if i % 4 == 1 else st}
        trace.append(e)
    if variant == "shared_dict":
        trace[2500] = trace[2499]                   # one dict twice in a batch
        trace[4100] = trace[1200]                   # a dict of an earlier batch again
    elif variant == "other_keys":
        trace[2300]["forward_frames"] = trace[2300]["frames"]  # one list under two keys
        trace[2301]["forward_frames"] = trace[2299]["frames"]
        trace[3300]["pool_id"] = (1, 2)             # a tuple value
        trace[3400]["stream"] = (1 << 63) + 5       # a 9-byte LONG1
        trace[3500]["stream"] = -(1 << 62)          # a negative that is no small int
        trace[3600]["frames"] = [frames[i % 40] for i in range(1500)]  # a long stack
        trace[3700]["frames"] = [frames[i % 40] for i in range(1001)]
        trace[3800]["frames"] = []
        trace[3900]["frames"] = [frame("/w/fresh.py", 1, "fresh")]     # a fresh frame dict
        trace[4000]["user_metadata"] = "{\"step\": 3}"
        trace[4001]["action"] = "user_defined"
        trace[4002]["size"] = True
        trace[4003]["extra"] = None
    elif variant == "timeline_edges":
        # reserved bytes below zero at the start (a segment mapped in the trace that the
        # segments do not hold), then above; the one-pass peak search must agree
        trace[10] = {"action": "segment_alloc", "addr": 0x7e0000000000, "size": 2048 * MiB,
                     "stream": 0, "time_us": 1700000000000010, "frames": []}
        trace[4000] = {"action": "segment_free", "addr": 0x7e0000000000, "size": 512 * MiB,
                       "stream": 0, "time_us": 1700000000004000, "frames": []}
    elif variant == "huge":
        # all sizes together reach 2^62 (the one-pass search gives way to the two-pass one),
        # yet stay below the 2^63 the loader refuses
        trace[20]["size"] = (1 << 61) + (1 << 59)
    elif variant == "mixed_keys":
        # what the fast path's key templates and straight-line reader must fall back from:
        # keys in another order, keys missing or new (fresh string objects: new literals, not
        # memo references), four actions, streams, other compile_context strings (short,
        # long), negative and wide ints
        for i in range(1000, 5200):
            e = trace[i]
            if i % 5 == 0:
                trace[i] = e = {k: e[k] for k in reversed(list(e))}
            if i % 7 == 0:
                e.pop("compile_context", None)
            if i % 11 == 0:
                e.pop("stream", None)
            if i % 13 == 0:
                e["".join(["ac", "tion"])] = e.pop("action")
            if i % 17 == 0:
                e["compile_context"] = ("N/A", "eager", "compiled_region_%d" % (i % 3))[i % 3]
            if i % 19 == 0:
                e["stream"] = 0x7f00deadbeef + i % 2
            if i % 23 == 0 and e.get("action") == "alloc":
                e["action"] = ("segment_map", "free_requested", "snapshot")[i % 3]
            if i % 29 == 0:
                e["time_us"] = -i
            if i % 31 == 0:
                e["size"] = -(1 << 40)
            if i % 37 == 0:
                e["size"] = (1 << 59) + i
    elif variant == "kept_list":
        # a list value that is no frames list is kept as a real list by the fast path; the
        # list in it, used as frames later by the general path, must stay counted as held
        # (a review found it recycled while still referenced: a made-up frame)
        held = []
        trace[100]["x"] = held
        outer = [held]
        trace[1100]["x"] = outer
        del trace[1100]["frames"]
        trace[2000]["bad"] = 1.5                    # the general path reads this batch
        trace[2999]["frames"] = held
        trace[3000]["bad"] = 1.5
        trace[3000]["frames"] = outer
    elif variant == "bad_value":
        trace[3000]["time_us"] = 1.5                # an error inside a fast batch
    segs = [{"device": 0, "address": 0x7f0000000000, "total_size": 512 * MiB,
             "allocated_size": 0, "active_size": 0, "requested_size": 0, "stream": 0,
             "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False,
             "frames": [],
             "blocks": [{"address": 0x7f0000000000, "size": 512 * MiB, "requested_size": 0,
                         "state": "inactive", "frames": trace[1500]["frames"]}]}]
    if variant == "trace_first":
        # the trace is read before the segments, whose blocks refer to recycled lists
        return {"device_traces": [trace, trace[:0]], "segments": segs,
                "allocator_settings": {}, "external_annotations": []}
    if variant == "consumed_later":
        return {"segments": segs, "device_traces": [trace],
                "external_annotations": [trace[2700]]}
    return {"segments": segs, "device_traces": [[dict(e) for e in trace[:1700]], trace],
            "allocator_settings": {"expandable_segments": False}, "external_annotations": []}


def real_files():
    files = sorted(glob.glob(os.path.join(REAL, "*.pickle")) + glob.glob(os.path.join(REAL, "*.pkl")))
    if not files:
        print("FAIL no real files in %s" % REAL)
        return 1
    for f in files:
        same(os.path.basename(f), f)
    print("%d comparisons, %d differences" % (compared, fails))
    return 1 if fails else 0


def main():
    global fails
    if THIRD_PARTY:
        return real_files()
    tmp = tempfile.mkdtemp()
    syn = os.path.join(tmp, "syn")
    os.mkdir(syn)
    subprocess.run([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                 "reference", "make_synthetic.py"), syn], check=True)
    files = sorted(glob.glob(os.path.join(syn, "*.pickle")))
    for f in files:
        same(os.path.basename(f), f)

    base = None
    for variant in ("plain", "shared_dict", "other_keys", "mixed_keys", "kept_list", "bad_value",
                    "trace_first", "consumed_later", "timeline_edges", "huge"):
        obj = long_trace(5200, variant)
        for proto in ((2, 3, 4, 5) if variant == "plain" else (2, 4)):
            path = os.path.join(tmp, "%s_p%d.pickle" % (variant, proto))
            data = pickle.dumps(obj, protocol=proto)
            with open(path, "wb") as f:
                f.write(data)
            same("%s protocol %d" % (variant, proto), path)
            if variant == "plain":
                # the two runs used the two readers: the flat one took most batches
                fb = (flat_batches(path, True), flat_batches(path, False))
                if not (fb[0] and fb[0] >= 4 and fb[1] == 0):
                    fails += 1
                    print("FAIL %s protocol %d: flat reader batches %s with the automatic and "
                          "the general reader, expected several and none" % (variant, proto, fb))
            if variant == "plain" and proto == 4:
                base = data

    # prefixes and byte flips inside the batches the fast path reads
    rnd = random.Random(7)
    lo, hi = len(base) // 3, len(base) - 100
    path = os.path.join(tmp, "cut.pickle")
    for i in range(12):
        cut = rnd.randrange(lo, hi)
        with open(path, "wb") as f:
            f.write(base[:cut])
        if not same("prefix of %d bytes" % cut, path, ("peak --json",)):
            break
    for i in range(60):
        data = bytearray(base)
        for _ in range(1 + i % 3):
            at = rnd.randrange(lo, hi)
            data[at] = rnd.randrange(256) if i % 2 else data[at] ^ (1 << rnd.randrange(8))
        with open(path, "wb") as f:
            f.write(data)
        if not same("byte flip %d" % i, path, ("trace --json", "peak --json")):
            break

    # the CLI reads the knob: a value it does not know is refused
    env = dict(os.environ, GPUMEM_SNAPSHOT_READER="fastest")
    p = subprocess.run([GPUMEM, "snapshot", "info", path], capture_output=True, env=env)
    if p.returncode != 64:
        fails += 1
        print("FAIL GPUMEM_SNAPSHOT_READER=fastest: exit %d, expected 64" % p.returncode)

    shutil.rmtree(tmp, ignore_errors=True)
    print("%d comparisons, %d differences" % (compared, fails))
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
