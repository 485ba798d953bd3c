#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Standard input and gzip'd snapshots are copied into a temporary file (the spool) before
they are read; what arrives is checked as it arrives, so that a stream that is no pickle
costs no more than its first bytes:

1. 1 GiB of zeros on standard input: refused with exit 65 "unknown opcode 0x00" after
   reading at most 4 MiB of it (the writer counts what gpumem took before it exited).
2. 4 GiB of zeros gzip'd (a 4 MB file of concatenated gzip members) through a pipe and as a
   file: exit 65 after taking at most 4 MiB of the compressed stream, within 10 s.
3. JSON on standard input: named as JSON at once, exit 65.
4. A real pickle on standard input, plain and gzip'd: read (exit 0).
5. --memory-limit bounds the copy: a 1 MiB pickle on standard input under a 256 KiB limit
   is refused with exit 65 naming the memory limit.

usage: spool.py GPUMEM
"""
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
import zlib

GPUMEM = os.path.abspath(sys.argv[1])
MiB = 1 << 20
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL " + msg)


def feed(args, chunks, total):
    """Run gpumem ARGS with 'total' bytes of chunks() written to its standard input; returns
    (exit status, stderr, bytes it took before it stopped reading, seconds)."""
    p = subprocess.Popen([GPUMEM, *args], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    taken = [0]
    err = []
    t = threading.Thread(target=lambda: err.append(p.stderr.read()))
    t.start()
    start = time.monotonic()
    try:
        for c in chunks():
            for i in range(0, len(c), 65536):  # pipe-sized writes: 'taken' is exact to 64 KiB
                p.stdin.write(c[i:i + 65536])
                taken[0] += len(c[i:i + 65536])
            if taken[0] >= total:
                break
        p.stdin.close()
    except BrokenPipeError:
        pass
    rc = p.wait(timeout=120)
    t.join()
    return rc, err[0].decode(errors="replace"), taken[0], time.monotonic() - start


def gzip_member(data):
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    return c.compress(data) + c.flush()


def main():
    zeros = bytes(MiB)

    def zero_chunks():
        while True:
            yield zeros

    rc, err, taken, secs = feed(["snapshot", "info", "-"], zero_chunks, 1 << 30)
    if rc != 65 or "unknown opcode 0x00" not in err or taken > 4 * MiB:
        fail("1 GiB of zeros on stdin: exit %d, took %d bytes (at most %d): %r"
             % (rc, taken, 4 * MiB, err.strip()))
    else:
        print("ok 1 GiB of zeros on stdin: exit 65 after %d bytes, %.2f s" % (taken, secs))

    member = gzip_member(bytes(16 * MiB))  # about 16 kB for 16 MiB of zeros
    bomb = member * 256                     # 4 GiB of zeros
    rc, err, taken, secs = feed(["snapshot", "info", "-"], lambda: iter([bomb]), len(bomb))
    with tempfile.TemporaryDirectory(prefix="gpumem-spool-") as tmp:
        path = os.path.join(tmp, "zeros.pickle.gz")
        with open(path, "wb") as f:
            f.write(bomb)
        t0 = time.monotonic()
        p = subprocess.run([GPUMEM, "snapshot", "info", path], capture_output=True, timeout=120)
        fsecs = time.monotonic() - t0
        ferr = p.stderr.decode(errors="replace")
        if rc != 65 or "unknown opcode 0x00" not in err or secs > 10:
            fail("4 GiB of gzip'd zeros on stdin: exit %d in %.1f s: %r" % (rc, secs, err.strip()))
        elif p.returncode != 65 or "unknown opcode 0x00" not in ferr or fsecs > 10:
            fail("4 GiB of gzip'd zeros in a file: exit %d in %.1f s: %r"
                 % (p.returncode, fsecs, ferr.strip()))
        else:
            print("ok 4 GiB of gzip'd zeros (%d bytes): exit 65 in %.2f s (pipe, %d bytes taken), "
                  "%.2f s (file)" % (len(bomb), secs, taken, fsecs))
        if taken > 4 * MiB and taken < len(bomb):
            fail("gzip'd zeros on stdin: took %d bytes" % taken)

        rc, err, _, _ = feed(["snapshot", "info", "-"], lambda: iter([b'{"segments": []}\n']), 1)
        if rc != 65 or "JSON document" not in err:
            fail("JSON on stdin: exit %d: %r" % (rc, err.strip()))
        else:
            print("ok JSON on stdin: exit 65, named as JSON")

        snap = {"segments": [], "device_traces": [[{"action": "alloc", "addr": 4096 * (i + 1),
                                                    "size": 512, "stream": 0, "frames": []}
                                                   for i in range(20000)]]}
        data = pickle.dumps(snap, protocol=4)
        for name, blob in (("plain", data), ("gzip'd", gzip_member(data))):
            rc, err, _, _ = feed(["snapshot", "info", "-"], lambda: iter([blob]), len(blob))
            if rc != 0:
                fail("a %s pickle on stdin: exit %d: %r" % (name, rc, err.strip()))
            else:
                print("ok a %s pickle on stdin: read" % name)
        big = data * (MiB // len(data) + 1)
        rc, err, _, _ = feed(["snapshot", "info", "--memory-limit", "256KiB", "-"],
                             lambda: iter([big]), len(big))
        if rc != 65 or "over the memory limit" not in err:
            fail("--memory-limit 256KiB on a 1 MiB stream: exit %d: %r" % (rc, err.strip()))
        else:
            print("ok --memory-limit 256KiB on a 1 MiB stream: exit 65")
    print("%d failures" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
