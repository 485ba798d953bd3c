#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hostile inputs for `gpumem snapshot`: each must give exit 65 (or, for byte flips, 0 or
65) with a one-line message, and never a crash, a hang or a sanitizer report.

usage: hostile.py GPUMEM [--third-party-data]
Hand-made inputs; with --third-party-data (tests/needs.sh sets $GM_TESTDATA), prefixes and
byte flips of real files instead.
"""
import os
import pickle
import random
import subprocess
import sys
import tempfile

GPUMEM = os.path.abspath(sys.argv[1])
THIRD_PARTY = "--third-party-data" in sys.argv[2:]
REAL = os.path.join(os.environ.get("GM_TESTDATA", ""), "snapshots")
fails = 0
runs = 0


def run(path, sub="peak", extra=()):
    global runs
    runs += 1
    p = subprocess.run([GPUMEM, "snapshot", sub, *extra, path], capture_output=True, timeout=60)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def check(name, path, want=(65,), must_say=None, sub="peak"):
    global fails
    rc, out, err = run(path, sub)
    bad = None
    if rc not in want:
        bad = "exit %d, expected %s" % (rc, "/".join(map(str, want)))
    elif "Sanitizer" in err or "runtime error" in err:
        bad = "sanitizer report"
    elif rc == 65 and (not err.strip() or err.count("\n") > 2):
        bad = "expected a short message, got %r" % err[:300]
    elif must_say and must_say not in err:
        bad = "message lacks %r: %r" % (must_say, err.strip())
    if bad:
        fails += 1
        print("FAIL %s: %s\n  stderr: %s" % (name, bad, err.strip()[:400]))
    return rc, err


class Evil:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def main():
    tmp = tempfile.mkdtemp()
    os.chdir(tmp)

    def w(name, data):
        p = os.path.join(tmp, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    if THIRD_PARTY:
        real_files(w)
    else:
        made_here(w, tmp)
    print("%d runs, %d failures" % (runs, fails))
    return 1 if fails else 0


def made_here(w, tmp):
    global fails
    # code execution attempts
    rc, err = check("GLOBAL os.system (protocol 0)",
                    w("global0.pickle", b"cos\nsystem\n(S'touch pwned'\ntR."), must_say="GLOBAL")
    if "os.system" not in err:
        fails += 1
        print("FAIL GLOBAL message does not name os.system: %r" % err)
    for proto in (2, 4, 5):
        check("REDUCE os.system protocol %d" % proto,
              w("reduce%d.pickle" % proto, pickle.dumps(Evil(), protocol=proto)),
              must_say="refusing")
    check("snapshot dict holding a REDUCE",
          w("nested_evil.pickle", pickle.dumps({"segments": [Evil()]}, protocol=4)),
          must_say="refusing")
    for op, name in ((b"b", "BUILD"), (b"R", "REDUCE"), (b"\x81", "NEWOBJ"), (b"o", "OBJ"),
                     (b"Q", "BINPERSID"), (b"\x92", "NEWOBJ_EX"), (b"\x97", "NEXT_BUFFER")):
        check("opcode %s" % name, w("op_%s.pickle" % name, b"\x80\x04N" + op + b"."),
              must_say=name)
    # messages that must be true: text strings are plain data, not code; an int
    # beyond 64 bits is named as such; a negative size is named as negative
    for name, data in (("STRING", b"\x80\x02S'abc'\n."), ("UNICODE", b"\x80\x02Vabc\n.")):
        rc, err = check("opcode %s (plain data)" % name, w("text_%s.pickle" % name, data),
                        must_say="plain data")
        if "import or call" in err:
            fails += 1
            print("FAIL opcode %s is called code: %r" % (name, err))
    def entry(**kw):
        e = {"action": "alloc", "addr": 0x7f0000000000, "size": 512, "stream": 0, "frames": []}
        e.update(kw)
        return {"segments": [], "device_traces": [[e]]}
    block = {"segments": [{"device": 0, "address": 4096, "total_size": 2**64 + 3,
                           "blocks": []}], "device_traces": []}
    for name, obj, say in (("size 2^64", entry(size=2**64), "does not fit 64 bits"),
                           ("size 2^70", entry(size=2**70), "does not fit 64 bits"),
                           ("segment total_size 2^64 + 3", block, "does not fit 64 bits"),
                           ("size -5", entry(size=-5), "must not be negative"),
                           ("device_free -1", entry(action="oom", device_free=-1),
                            "must not be negative")):
        rc, err = check(name, w("msg.pickle", pickle.dumps(obj, protocol=4)), must_say=say)
        if "a int" in err or "2^63" in err:
            fails += 1
            print("FAIL %s: untrue message %r" % (name, err))

    if os.path.exists(os.path.join(tmp, "pwned")):
        fails += 1
        print("FAIL a pickle ran code")

    # lying lengths
    check("BINUNICODE length 4 GiB", w("len1.pickle", b"\x80\x04X\xff\xff\xff\xffabc."))
    check("BINUNICODE8 length 2^63", w("len2.pickle", b"\x80\x04\x8d" + (2**63).to_bytes(8, "little") + b"ab."))
    check("FRAME past the end", w("len3.pickle", b"\x80\x04\x95" + (10**12).to_bytes(8, "little") + b"}."))
    check("LONG4 huge", w("len4.pickle", b"\x80\x04\x8b\xff\xff\xff\x7f\x00."))
    check("SHORT_BINUNICODE past end", w("len5.pickle", b"\x80\x04\x8c\xf0abc"))
    check("memo index far away", w("memo1.pickle", b"\x80\x02}r\xff\xff\xff\x7f."))
    check("BINGET of an empty slot", w("memo2.pickle", b"\x80\x04h\x05."))
    check("APPENDS without MARK", w("mark1.pickle", b"\x80\x04]e."))
    check("SETITEMS odd", w("odd.pickle", b"\x80\x04}(K\x01u."))
    check("APPEND to a dict", w("type1.pickle", b"\x80\x04}K\x01a."))
    check("STOP on empty stack", w("stop.pickle", b"\x80\x04."))
    check("no STOP", w("nostop.pickle", b"\x80\x04}"))
    check("empty file", w("empty.pickle", b""))
    check("unknown opcode", w("unk.pickle", b"\x80\x04\xff."))
    check("protocol 9", w("proto9.pickle", b"\x80\x09}."))

    # deep nesting and stack floods
    check("100k MARKs", w("marks.pickle", b"\x80\x04" + b"(" * 100000 + b"."), must_say="MARK")
    check("200k lists on the stack", w("lists.pickle", b"\x80\x04" + b"]" * 200000 + b"."))
    nest = b"\x80\x04" + b"]" * 3000 + b"a" * 2999 + b"."
    check("3000-deep nested list (not a snapshot)", w("nest.pickle", nest))
    self_ref = b"\x80\x04]\x94h\x00a."  # a list containing itself
    check("self-referencing list", w("selfref.pickle", self_ref))
    cyc = pickle.dumps({"segments": []}, protocol=4)
    # segments list that contains itself
    lst = []
    lst.append(lst)
    check("segments list containing itself",
          w("cyc.pickle", pickle.dumps({"segments": lst}, protocol=4)))
    fr = []
    fr.append(fr)
    seg = {"device": 0, "address": 0, "total_size": 512, "stream": 0, "segment_type": "large",
           "blocks": [{"size": 512, "state": "active_allocated", "frames": fr}]}
    check("frames list containing itself",
          w("cyc2.pickle", pickle.dumps({"segments": [seg], "device_traces": [[]]}, protocol=4)))

    # sizes that would saturate the sums: frees with no alloc before them count from the start
    big_frees = [{"action": "free_completed", "addr": 0x100 * (i + 1), "size": 1 << 63,
                  "stream": 0, "time_us": i, "frames": []} for i in range(2)]
    big_frees.append({"action": "alloc", "addr": 0x300, "size": 1, "stream": 0, "time_us": 3,
                      "frames": []})
    check("frees of 2^63 bytes", w("bigfree.pickle", pickle.dumps(
        {"segments": [], "device_traces": [big_frees]}, protocol=4)), must_say="2^63")
    seg = {"device": 0, "address": 0, "total_size": 512, "stream": 0, "segment_type": "large",
           "blocks": [{"size": 512, "requested_size": 1 << 63, "state": "active_allocated"}]}
    check("a block requesting 2^63 bytes", w("bigreq.pickle", pickle.dumps(
        {"segments": [seg], "device_traces": [[]]}, protocol=4)), must_say="2^63")

    # well-formed pickles that are not snapshots
    check("an int", w("int.pickle", pickle.dumps(5)), must_say="not a memory snapshot")
    check("a dict without segments", w("nodict.pickle", pickle.dumps({"a": 1})))
    check("segment with a str size", w("strsize.pickle", pickle.dumps(
        {"segments": [{"device": 0, "address": 0, "total_size": "big", "blocks": []}]})),
        must_say="total_size")
    check("device out of range", w("dev.pickle", pickle.dumps(
        {"segments": [{"device": 10**6, "address": 0, "total_size": 1, "blocks": []}]})))
    check("10000 device traces", w("devs.pickle", pickle.dumps(
        {"segments": [], "device_traces": [[] for _ in range(10000)]})))
    check("missing file", os.path.join(tmp, "does-not-exist.pickle"), want=(66,))

def real_files(w):
    # every 5th proper prefix of a tiny real file, every 199th of a small one (the unit test
    # test_snapshot reads every prefix in-process)
    for name, step in (("g5_tiny_2dev_expandable.pickle", 5), ("g5_annotations_small.pickle", 199)):
        with open(os.path.join(REAL, name), "rb") as f:
            data = f.read()
        for n in range(0, len(data), step):
            check("%s prefix %d" % (name, n), w("prefix.pickle", data[:n]))

    # random byte flips: a correct reading or exit 65
    rnd = random.Random(1234)
    with open(os.path.join(REAL, "g5_annotations_small.pickle"), "rb") as f:
        base = f.read()
    for i in range(60):
        b = bytearray(base)
        for _ in range(rnd.randint(1, 4)):
            b[rnd.randrange(len(b))] = rnd.randrange(256)
        check("flip %d" % i, w("flip.pickle", bytes(b)), want=(0, 65))


if __name__ == "__main__":
    sys.exit(main())
