#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Memory in proportion to the input, measured as peak RSS over the input's size (a ratio,
never a timing):

1. A synthetic 200 MB snapshot (../shared/tools/synth-snapshot): `info`, `stats` and `peak`
   stay at or below 0.25 x the file, every other command at or below 0.6 x what it reads
   (diff reads the file twice), counting what the process holds before it reads anything
   (the program and its libraries, measured with a tiny snapshot) apart.
2. A 40 MB pickle holding one trace entry referenced 2*10^7 times through the memo (two
   bytes a reference, 20 million events): every command, under a virtual-memory limit of
   2 GiB (ulimit -v), either succeeds or stops with exit 65 naming the memory limit, never
   exit 70 (out of memory) or a signal, and its peak RSS stays below 256 MiB + 4 x the file
   (the default limit) plus what the process holds before it reads anything.
3. --memory-limit is obeyed: a limit below what the 200 MB file needs is an error.
4. Output in proportion to the input: a 2.4 MB pickle of 10,000 events that share one list of
   10^6 frames gives `trace --json` output of one line of those frames and 10,000 event lines
   (trace/2 names the stack), not 10,000 copies of the list (400 GB): the output is read
   through a pipe and the command stopped once it passes that bound.
5. The memory limit bounds everything a load holds (the parse's nodes and arrays, the
   snapshot, the packed trace and the interner's tables together): a 26 MB file of 10^6
   distinct frames under --memory-limit 64MiB, and 40 MB of memo entries under the default
   limit (4 x the file + 256 MiB), stop with exit 65 at a peak RSS within 6 MiB of the limit
   beyond what the process holds before it reads anything.
6. What an analysis keeps while the file is read (its first pass, the timeline's fold) is
   held under the same limit, all devices together: an 8-device file of 10^5 allocations a
   trace under --memory-limit 64MiB, `categories`, `leaks --json` and `oom --json` peak
   within 6 MiB of the limit and `diff` of the file with itself within 6 MiB of twice the
   limit, beyond what the process holds before it reads anything.

RSS is measured by bench/measure (a small process of its own starts the command, so the
figure is the command's, not Python's).

usage: memory_bound.py GPUMEM MEASURE      ($GM_SYNTH: ../shared/tools/synth-snapshot, set by tests/needs.sh)
"""
import os
import pickle
import resource
import shutil
import subprocess
import sys
import tempfile

GPUMEM = os.path.abspath(sys.argv[1])
MEASURE = os.path.abspath(sys.argv[2])
SYNTH = os.environ["GM_SYNTH"]
MiB = 1 << 20
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL " + msg)


def measure(args, tmp, limit_as=None):
    """exit status, peak RSS bytes and stderr of `gpumem snapshot ARGS`."""
    res = os.path.join(tmp, "res")

    def set_limit():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    p = subprocess.run([MEASURE, res, GPUMEM, "snapshot", *args], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, preexec_fn=set_limit, timeout=600)
    _, _, rss, code = open(res).read().split()
    return int(code), int(rss), p.stderr


def bounded_output(cmd, bound):
    """Bytes `cmd` writes to stdout and its exit status (None when it was stopped after
    writing more than 'bound' bytes)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    got = 0
    while True:
        chunk = p.stdout.read(1 << 20)
        if not chunk:
            break
        got += len(chunk)
        if got > bound:
            p.kill()
            p.wait()
            return got, None
    return got, p.wait()


def main():
    tmp = tempfile.mkdtemp(prefix="gpumem-memory-")
    try:
        big = os.path.join(tmp, "s200.pickle")
        subprocess.run([SYNTH, "-o", big, "--target-size", "200M", "--seed", "2", "--quiet"],
                       check=True)
        size = os.path.getsize(big)
        html = os.path.join(tmp, "r.html")
        tiny = os.path.join(tmp, "tiny.pickle")
        with open(tiny, "wb") as f:
            pickle.dump({"segments": [], "device_traces": [[]]}, f, protocol=4)
        _, base_rss, _ = measure(["info", tiny], tmp)
        lean = 0.25
        rest = 0.6
        cases = [(["info", big], lean, size), (["stats", big], lean, size),
                 (["peak", big], lean, size), (["trace", big], rest, size),
                 (["trace", "--json", big], rest, size), (["categories", big], rest, size),
                 (["leaks", big], rest, size), (["oom", big], rest, size),
                 (["replay", big], rest, size), (["plot", big], rest, size),
                 (["report", big, "-o", html, "--force"], rest, size),
                 (["diff", big, big], rest, 2 * size)]
        for args, ratio, read in cases:
            code, rss, err = measure(args, tmp)
            got = (rss - base_rss) / read
            if code != 0:
                fail("%s: exit %d: %r" % (args[0], code, err[-300:]))
            elif got > ratio:
                fail("%s: peak RSS %.1f MiB (%.1f MiB before reading) is %.3f x the %.1f MiB it "
                     "reads, above %.2f" % (" ".join(args[:2]), rss / MiB, base_rss / MiB, got,
                                            read / MiB, ratio))
            else:
                print("ok %-12s RSS %7.1f MiB = %.3f x the input (at most %.2f)"
                      % (args[0] if args[1] != "--json" else "trace --json", rss / MiB, got,
                         ratio))

        code, rss, err = measure(["peak", "--memory-limit", "16MiB", big], tmp)
        if code != 65 or b"memory" not in err:
            fail("--memory-limit 16MiB: exit %d, expected 65 naming the limit: %r"
                 % (code, err[-300:]))

        # one entry, 2*10^7 references to it
        bomb = os.path.join(tmp, "bomb.pickle")
        entry = {"action": "alloc", "addr": 0x7f0000000000, "size": 1 << 20, "stream": 0,
                 "time_us": 1700000000000000, "frames": []}
        with open(bomb, "wb") as f:
            pickle.dump({"segments": [], "device_traces": [[entry] * 20000000]}, f, protocol=4)
        bsize = os.path.getsize(bomb)
        bound = 256 * MiB + 4 * bsize + base_rss + 32 * MiB
        for args in (["info", bomb], ["stats", bomb], ["peak", bomb], ["trace", "--to", "5", bomb],
                     ["categories", bomb], ["leaks", bomb], ["oom", bomb], ["replay", bomb],
                     ["plot", bomb], ["report", bomb, "-o", html, "--force"],
                     ["diff", bomb, bomb]):
            code, rss, err = measure(args, tmp, limit_as=2 << 30)
            inputs = args.count(bomb)
            if code not in (0, 65) or (code == 65 and b"memory" not in err):
                fail("memo bomb %s: exit %d, expected 0 or 65 naming the memory limit: %r"
                     % (args[0], code, err[-300:]))
            elif rss > inputs * bound:
                fail("memo bomb %s: peak RSS %.1f MiB above %.1f MiB (%.1f MiB file)"
                     % (args[0], rss / MiB, inputs * bound / MiB, bsize / MiB))
            else:
                print("ok memo bomb %-10s exit %d, RSS %7.1f MiB (at most %.1f)"
                      % (args[0], code, rss / MiB, inputs * bound / MiB))

        # one frames list of 10^6 frames shared by 10,000 events
        shared = os.path.join(tmp, "shared_frames.pickle")
        frame = {"filename": "train.py", "line": 7, "name": "step"}
        frames = [frame] * 1000000
        events = [{"action": "alloc", "addr": 0x7f0000000000 + 512 * i, "size": 512, "stream": 0,
                   "time_us": 1700000000000000 + i, "frames": frames} for i in range(10000)]
        with open(shared, "wb") as f:
            pickle.dump({"segments": [], "device_traces": [events]}, f, protocol=4)
        one = len('{"filename":"train.py","line":7,"name":"step"},')
        bound = one * len(frames) + 400 * len(events) + 4096
        got, code = bounded_output([GPUMEM, "snapshot", "trace", "--json", shared], bound)
        if code != 0 or got > bound:
            fail("trace --json of a shared 10^6-frame list: %s%d bytes of output, at most %d "
                 "expected" % ("exit %s, " % code if code else "", got, bound))
        else:
            print("ok trace --json of a shared 10^6-frame list: %d bytes (at most %d)"
                  % (got, bound))

        # the limit bounds the sum of what the load holds
        frames = os.path.join(tmp, "frames.pickle")
        events = [{"action": "alloc", "addr": 4096 + 512 * i, "size": 512, "stream": 0,
                   "frames": [{"filename": "a.py", "line": 4 * i + j, "name": "f"}
                              for j in range(4)]} for i in range(250000)]
        with open(frames, "wb") as f:
            pickle.dump({"segments": [], "device_traces": [events]}, f, protocol=4)
        del events
        memo = os.path.join(tmp, "memo.pickle")
        with open(memo, "wb") as f:
            f.write(b"\x80\x04" + b"]\x94" * 20000000 + b".")
        for name, path, args, limit in (
                ("10^6 distinct frames", frames, ["--memory-limit", "64MiB"], 64 * MiB),
                ("2*10^7 memo entries", memo, [],
                 256 * MiB + 4 * os.path.getsize(memo))):
            code, rss, err = measure(["info", *args, path], tmp)
            if rss - base_rss > limit + 6 * MiB:
                fail("%s: peak RSS %.1f MiB (%.1f MiB before reading), over the limit of %.1f "
                     "MiB by more than 6 MiB" % (name, rss / MiB, base_rss / MiB, limit / MiB))
            elif code != 65 or b"over the memory limit" not in err:
                fail("%s: exit %d, expected 65 naming the memory limit: %r"
                     % (name, code, err[-300:]))
            else:
                print("ok %s: exit 65, peak RSS %.1f MiB - %.1f MiB before reading, limit %.1f "
                      "MiB" % (name, rss / MiB, base_rss / MiB, limit / MiB))

        # what the analyses keep while loading, every device's under the one limit
        devices = os.path.join(tmp, "devices.pickle")
        with open(devices, "wb") as f:
            pickle.dump({"segments": [], "device_traces": [
                [{"action": "alloc", "addr": 0x7f0000000000 + (d << 32) + 512 * i, "size": 512,
                  "stream": 0, "time_us": 1700000000000000 + i, "frames": []}
                 for i in range(100000)] for d in range(8)]}, f, protocol=4)
        limit = 64 * MiB
        for args, inputs in ((["categories"], 1), (["leaks", "--json"], 1),
                             (["oom", "--json"], 1), (["diff", devices], 2)):
            code, rss, err = measure([args[0], "--memory-limit", "64MiB", *args[1:], devices],
                                     tmp)
            if code != 0:
                fail("8 devices %s: exit %d: %r" % (args[0], code, err[-300:]))
            elif rss - base_rss > inputs * limit + 6 * MiB:
                fail("8 devices %s: peak RSS %.1f MiB (%.1f MiB before reading), over %d x the "
                     "limit of %.1f MiB by more than 6 MiB"
                     % (args[0], rss / MiB, base_rss / MiB, inputs, limit / MiB))
            else:
                print("ok 8 devices %-10s peak RSS %.1f MiB - %.1f MiB before reading, limit %d "
                      "x %.1f MiB" % (args[0], rss / MiB, base_rss / MiB, inputs, limit / MiB))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failures" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
