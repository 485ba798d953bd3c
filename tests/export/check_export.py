#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_export.py FORMAT SNAPSHOT...: run `gpumem snapshot export --FORMAT` on each SNAPSHOT
(a file; a folder: its *.pickle and *.pkl files; "example": `gpumem snapshot example` output,
3 iterations, with phases; --third-party-data: the real files of $GM_TESTDATA/snapshots) and
check the output against its format's specification and against gpumem's own figures
(`snapshot peak --json`, `snapshot info --json`), with the standard library alone:

  perfetto    the Trace Event Format (JSON Object Format): every event's phase and required
              fields, complete slices nested per thread, counters numeric; the largest
              allocated counter (the sum of its categories) is each device's peak
  speedscope  the file format schema (https://www.speedscope.app/file-format-schema.json):
              $schema, shared.frames with names, sampled profiles with unit, start/end values,
              samples of valid frame indexes as long as weights; weights sum to the peak
  pprof       gunzip, then decode profile.proto with the small decoder below (wire types 0
              and 2): string_table[0] == "", sample types objects/count and space/bytes,
              every location and function id resolves; the space values sum to the peak
  sqlite      the tables and their joins (blocks and trace events to segments by id and
              address), one trace row per event, categories at the peak sum to the peak

GPUMEM names the gpumem binary.  Exit 0 when every check holds, 1 with the first failure."""
import gzip
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

from snapshots import snapshot_files

GPUMEM = os.environ.get("GPUMEM", "gpumem")


def gpumem_json(*args):
    return json.loads(subprocess.run([GPUMEM, *args], check=True, stdout=subprocess.PIPE).stdout)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def expect(cond, msg):
    if not cond:
        fail(msg)


def processes(peaks):
    """(pid, process name, peak) of each device, in file order: 'peaks' maps a device to its
    peak, or (several files, the ranks of a job) a file name to such a map."""
    if all(isinstance(k, int) for k in peaks):
        return [(dev + 1, "cuda:%d" % dev, peak) for dev, peak in sorted(peaks.items())]
    return [(1000 * i + dev + 1, "%s cuda:%d" % (name, dev), peak)
            for i, (name, devs) in enumerate(peaks.items()) for dev, peak in sorted(devs.items())]


# ---- perfetto / Chrome trace events ----

def check_perfetto(path, peaks):
    doc = json.load(open(path, encoding="utf-8"))
    expect(isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list),
           "a JSON object with a traceEvents array")
    expect(doc.get("displayTimeUnit") in ("ms", "ns"), "displayTimeUnit is ms or ns")
    names = {}
    allocated = {}
    slices = {}
    for e in doc["traceEvents"]:
        ph = e.get("ph")
        expect(ph in ("M", "C", "X", "i"), "unknown phase %r" % ph)
        expect(isinstance(e.get("name"), str), "every event has a name")
        expect(isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int), "pid and tid")
        if ph == "M":
            expect(e["name"] in ("process_name", "thread_name") and
                   isinstance(e["args"]["name"], str), "metadata names a process or thread")
            if e["name"] == "process_name":
                names[e["pid"]] = e["args"]["name"]
            continue
        expect(isinstance(e.get("ts"), (int, float)) and e["ts"] >= 0, "ts >= 0")
        if ph == "C":
            expect(e["args"] and all(isinstance(v, int) and v >= 0 for v in e["args"].values()),
                   "counter values are byte counts")
            if e["name"] == "allocated":
                allocated[e["pid"]] = max(allocated.get(e["pid"], 0), sum(e["args"].values()))
        elif ph == "X":
            expect(isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0, "dur >= 0")
            slices.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
        elif ph == "i":
            expect(e.get("s") in ("g", "p", "t"), "an instant's scope")
    for (pid, tid), spans in slices.items():
        if tid == 3:
            continue  # annotations: the program's own ranges, nested as it nested them
        spans.sort()
        for a, b in zip(spans, spans[1:]):
            expect(b[0] >= a[1] or b[1] <= a[1], "slices of pid %d tid %d overlap" % (pid, tid))
    for pid, name, peak in processes(peaks):
        expect(names.get(pid) == name, "process %d is named %r" % (pid, name))
        expect(allocated.get(pid) == peak,
               "%s: the largest allocated counter %s is the peak %d" %
               (name, allocated.get(pid), peak))
    return "%d events, %d processes" % (len(doc["traceEvents"]), len(names))


# ---- speedscope ----

def check_speedscope(path, peaks):
    doc = json.load(open(path, encoding="utf-8"))
    expect(doc.get("$schema") == "https://www.speedscope.app/file-format-schema.json", "$schema")
    frames = doc["shared"]["frames"]
    expect(all(isinstance(f.get("name"), str) for f in frames), "every frame has a name")
    expect(all(isinstance(f.get("line", 1), int) and isinstance(f.get("file", ""), str)
               for f in frames), "frame line and file types")
    expect(isinstance(doc.get("activeProfileIndex", 0), int), "activeProfileIndex")
    profiles = doc["profiles"]
    expect(len(profiles) == len(processes(peaks)), "one profile per device")
    for p, (_, name, peak) in zip(profiles, processes(peaks)):
        dev = int(name.rsplit(":", 1)[1])
        expect(p["type"] == "sampled" and p["unit"] == "bytes", "sampled profiles in bytes")
        expect(p["name"].startswith(name + " "), "profile %r is %s" % (p["name"], name))
        expect(len(p["samples"]) == len(p["weights"]), "a weight per sample")
        expect(all(s and all(0 <= i < len(frames) for i in s) for s in p["samples"]),
               "samples index shared.frames")
        expect(p["startValue"] == 0 and p["endValue"] == sum(p["weights"]), "start/end values")
        expect(sum(p["weights"]) == peak, "cuda:%d: weights %d == peak %d" %
               (dev, sum(p["weights"]), peak))
    return "%d profiles, %d frames" % (len(profiles), len(frames))


# ---- pprof: a protobuf decoder of our own ----

def varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return v, i


def fields(buf):
    """(field number, wire type, value) of a message: an int or bytes."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 2:
            n, i = varint(buf, i)
            v = buf[i:i + n]
            expect(len(v) == n, "a length-delimited field runs past its message")
            i += n
        else:
            fail("wire type %d not expected in a profile" % wt)
        yield num, wt, v


def packed(v):
    if isinstance(v, int):
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def msg(buf):
    d = {}
    for num, _, v in fields(buf):
        d.setdefault(num, []).append(v)
    return d


def check_pprof(path, peaks):
    raw = open(path, "rb").read()
    expect(raw[:2] == b"\x1f\x8b", "gzip magic")
    prof = msg(gzip.decompress(raw))
    strings = [s.decode("utf-8") for s in prof.get(6, [])]
    expect(strings and strings[0] == "", "string_table[0] is empty")
    types = [(strings[msg(t)[1][0]], strings[msg(t)[2][0]]) for t in prof[1]]
    expect(types == [("objects", "count"), ("space", "bytes")], "sample types %r" % types)
    expect(strings[prof[14][0]] == "space", "default sample type space")
    funcs = {msg(f)[1][0]: msg(f) for f in prof.get(5, [])}
    locs = {}
    for loc in prof.get(4, []):
        m = msg(loc)
        for line in m.get(4, []):
            expect(msg(line)[1][0] in funcs, "a line's function id resolves")
        locs[m[1][0]] = m
    for f in funcs.values():
        expect(0 < f[2][0] < len(strings), "a function's name is a string of the table")
    space = {}
    for s in prof.get(2, []):
        m = msg(s)
        ids = [x for v in m[1] for x in packed(v)]
        expect(ids and all(i in locs for i in ids), "a sample's location ids resolve")
        vals = [x for v in m[2] for x in packed(v)]
        expect(len(vals) == 2 and vals[0] >= 1, "two values per sample, a count >= 1")
        label = msg(m[3][0])
        expect(strings[label[1][0]] == "device", "a device label")
        dev = label[3][0]
        space[dev] = space.get(dev, 0) + vals[1]
    for dev, peak in peaks.items():
        expect(space.get(dev, 0) == peak, "cuda:%d: space %s == peak %d" %
               (dev, space.get(dev), peak))
    return "%d samples, %d locations, %d strings" % (len(prof.get(2, [])), len(locs), len(strings))


# ---- sqlite ----

def check_sqlite(path, peaks, info):
    db = sqlite3.connect(path)

    def q(sql):
        return db.execute(sql).fetchall()
    tables = {r[0] for r in q("SELECT name FROM sqlite_master WHERE type = 'table'")}
    want = {"meta", "segments", "blocks", "device_traces", "frames", "stack_frames",
            "allocations", "categories", "phases", "iterations"}
    expect(want <= tables, "tables %s" % sorted(want - tables))
    expect(q("SELECT count(*) FROM device_traces")[0][0] == info["trace_events"],
           "one device_traces row per event")
    expect(q("SELECT count(*) FROM segments")[0][0] == info["segments"], "a row per segment")
    expect(q("SELECT count(*) FROM blocks")[0][0] == info["blocks"], "a row per block")
    expect(q("SELECT count(*) FROM blocks b LEFT JOIN segments s USING (segment_id) "
             "WHERE s.segment_id IS NULL OR b.address < s.address OR "
             "b.address + b.size > s.address + s.total_size")[0][0] == 0,
           "every block lies in its segment")
    expect(q("SELECT count(*) FROM device_traces t JOIN segments s USING (segment_id) "
             "WHERE t.address < s.address OR t.address >= s.address + s.total_size "
             "OR t.device != s.device")[0][0] == 0, "a trace event's segment holds its address")
    expect(q("SELECT count(*) FROM stack_frames sf LEFT JOIN frames f USING (frame_id) "
             "WHERE f.frame_id IS NULL")[0][0] == 0, "stack frames resolve")
    for dev, peak in peaks.items():
        got = q("SELECT sum(at_peak_bytes) FROM categories WHERE device = %d" % dev)[0][0]
        expect(got == peak, "cuda:%d: categories at the peak %s == peak %d" % (dev, got, peak))
    joined = q("SELECT count(*) FROM device_traces WHERE segment_id IS NOT NULL")[0][0]
    return "%d events (%d in a snapshot segment), %d allocations" % (
        info["trace_events"], joined, q("SELECT count(*) FROM allocations")[0][0])


def check(fmt, snapshot, tmp):
    peaks = {d["device"]: d["peak_bytes"] for d in gpumem_json("snapshot", "peak", "--json",
                                                               "--top", "1", snapshot)["devices"]}
    out = os.path.join(tmp, "out." + fmt)
    subprocess.run([GPUMEM, "snapshot", "export", "--" + fmt, snapshot, "-o", out, "--force"],
                   check=True)
    if fmt == "perfetto":
        what = check_perfetto(out, peaks)
    elif fmt == "speedscope":
        what = check_speedscope(out, peaks)
    elif fmt == "pprof":
        what = check_pprof(out, peaks)
    else:
        what = check_sqlite(out, peaks, gpumem_json("snapshot", "info", "--json", snapshot))
    print("ok: %s %s: %s" % (fmt, os.path.basename(snapshot), what))


def check_ranks(fmt, tmp):
    """Two ranks of one job (devices 0 and 1, batch 8 and 12) in one file; the ranks taken as
    every multi-file command takes them: the files given in the shell's other order, or their
    folder, give the same bytes."""
    tmp = os.path.join(tmp, "job")
    os.makedirs(tmp, exist_ok=True)
    files = [os.path.join(tmp, "rank%d.pickle" % r) for r in (0, 1)]
    for r, f in enumerate(files):
        subprocess.run([GPUMEM, "snapshot", "example", "-o", f, "--iterations", "2", "--device",
                        str(r), "--batch", str(8 + 4 * r), "--force"], check=True,
                       stdout=subprocess.DEVNULL)
    peaks = {}
    for f in files:
        doc = gpumem_json("snapshot", "peak", "--json", "--top", "1", f)
        peaks[f] = {d["device"]: d["peak_bytes"] for d in doc["devices"]}
    out = os.path.join(tmp, "ranks." + fmt)
    subprocess.run([GPUMEM, "snapshot", "export", "--" + fmt, *files, "-o", out, "--force"],
                   check=True)
    what = (check_perfetto if fmt == "perfetto" else check_speedscope)(out, peaks)
    with open(out, "rb") as f:
        want = f.read()
    for args in (files[::-1], [tmp]):
        other = os.path.join(os.path.dirname(tmp), "ranks-other." + fmt)
        subprocess.run([GPUMEM, "snapshot", "export", "--" + fmt, *args, "-o", other, "--force"],
                       check=True)
        with open(other, "rb") as f:
            if f.read() != want:
                raise SystemExit("FAIL: %s of %s differs from the ranks in order" % (fmt, args))
    print("ok: %s of two ranks: %s (same from the other order and from the folder)" % (fmt, what))


def main():
    fmt = sys.argv[1]
    expect(fmt in ("perfetto", "speedscope", "pprof", "sqlite"), "unknown format %r" % fmt)
    with tempfile.TemporaryDirectory() as tmp:
        files = snapshot_files(sys.argv[2:], tmp)
        expect(files, "no snapshot to check")
        for f in files:
            check(fmt, f, tmp)
        if "example" in sys.argv[2:] and fmt in ("perfetto", "speedscope"):
            check_ranks(fmt, tmp)


if __name__ == "__main__":
    main()
