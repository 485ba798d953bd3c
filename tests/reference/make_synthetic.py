#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write small synthetic snapshots for the snapshot features that none of the real test
files shows (docs/snapshot.md lists which) into DIR:

  syn_g1_history_p{2,4,5}.pickle     2.0-era blocks with 'history', no frames/address
  syn_g8_streams_meta_p{2,4,5}.pickle non-zero streams, several streams, segment_alloc/free,
                                     user_metadata (with JSON), Windows paths, pending-free
                                     blocks, a private pool, oom, unknown action
  syn_g9_2026_p4.pickle              pool_id, forward_frames, internal_metadata, host data
  syn_writer_c.pickle                the TorchScript pickler's encoding (protocol 2, BINPUT
                                     by value, 8-byte LONG1, EMPTY_LIST MARK APPENDS)
  syn_u64_stream.pickle              a stream handle above 2^63 (9-byte LONG1)

usage: make_synthetic.py [--force] DIR
"""
import argparse
import os
import pickle
import struct
import sys

GiB = 1 << 30
MiB = 1 << 20


def frame(fn, line, name):
    return {"filename": fn, "line": line, "name": name}


def g1_history():
    fr_a = [frame("/home/u/train.py", 10, "step"), frame("/home/u/train.py", 50, "main")]
    fr_b = [frame("/home/u/model.py", 7, "forward"), frame("/home/u/train.py", 11, "step")]
    seg = {"device": 0, "address": 0x7f0000000000, "total_size": 20 * MiB,
           "allocated_size": 3 * MiB, "active_size": 3 * MiB, "requested_size": 3 * MiB - 100,
           "stream": 0, "segment_type": "large",
           "blocks": [
               {"size": 2 * MiB, "state": "active_allocated", "requested_size": 2 * MiB - 100,
                "history": [{"addr": 0x7f0000000000, "real_size": 2 * MiB - 100,
                             "frames": fr_a}]},
               {"size": 1 * MiB, "state": "active_allocated",
                "history": [{"addr": 0x7f0000200000, "real_size": MiB - 512,
                             "frames": fr_b}]},
               {"size": 17 * MiB, "state": "inactive", "history": []},
           ]}
    trace = [
        {"action": "segment_alloc", "addr": 0x7f0000000000, "size": 20 * MiB, "stream": 0,
         "frames": fr_a},
        {"action": "alloc", "addr": 0x7f0000000000, "size": 2 * MiB - 100, "stream": 0,
         "frames": fr_a},
        {"action": "alloc", "addr": 0x7f0000400000, "size": 4 * MiB, "stream": 0,
         "frames": fr_b},
        {"action": "free_requested", "addr": 0x7f0000400000, "size": 4 * MiB, "stream": 0},
        {"action": "free_completed", "addr": 0x7f0000400000, "size": 4 * MiB, "stream": 0},
    ]
    return {"segments": [seg], "device_traces": [trace]}


def g8_streams_meta():
    s1, s2 = 0x55d0c0ffee10, 0x55d0c0ffef20
    win = [frame("D:\\work\\train.py", 33, "step"), frame("D:\\work\\train.py", 90, "<module>")]
    cpp = [frame("??", 0, "torch::unwind::unwind()"),
           frame("/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py", 125, "forward"),
           frame("D:\\work\\model.py", 20, "forward")]
    segs = [
        {"device": 0, "address": 0x7f1000000000, "total_size": 40 * MiB, "allocated_size": 0,
         "active_size": 0, "requested_size": 0, "stream": s1, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": win,
         "blocks": [
             {"address": 0x7f1000000000, "size": 8 * MiB, "requested_size": 8 * MiB - 512,
              "state": "active_allocated", "frames": win},
             {"address": 0x7f1000800000, "size": 4 * MiB, "requested_size": 4 * MiB,
              "state": "active_pending_free", "frames": cpp},
             {"address": 0x7f1000c00000, "size": 28 * MiB, "requested_size": 0,
              "state": "inactive", "frames": []},
         ]},
        {"device": 0, "address": 0x7f2000000000, "total_size": 2 * MiB, "allocated_size": 0,
         "active_size": 0, "requested_size": 0, "stream": s2, "segment_type": "small",
         "segment_pool_id": (1, 7), "is_expandable": False, "frames": [],
         "blocks": [
             {"address": 0x7f2000000000, "size": 512, "requested_size": 300,
              "state": "active_allocated", "frames": cpp},
             {"address": 0x7f2000000200, "size": 2 * MiB - 512, "requested_size": 0,
              "state": "inactive", "frames": []},
         ]},
        {"device": 2, "address": 0x7f3000000000, "total_size": 20 * MiB, "allocated_size": 0,
         "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": True, "frames": [],
         "blocks": [{"address": 0x7f3000000000, "size": 20 * MiB, "requested_size": 0,
                     "state": "inactive", "frames": []}]},
    ]
    t0 = 1_750_000_000_000_000
    meta = '{"phase": "fwd", "step": 3}'

    def ev(i, action, addr, size, stream, frames=None, **kw):
        e = {"action": action, "addr": addr, "size": size, "stream": stream,
             "time_us": t0 + 10 * i, "compile_context": "N/A", "user_metadata": kw.pop("um", "")}
        if frames is not None:
            e["frames"] = frames
        e.update(kw)
        return e

    trace0 = [
        ev(0, "segment_alloc", 0x7f9000000000, 20 * MiB, s1, win),
        ev(1, "alloc", 0x7f9000000000, 6 * MiB, s1, win, um=meta),
        ev(2, "alloc", 0x7f9000600000, 6 * MiB, s2, cpp, um=meta),
        ev(3, "free_requested", 0x7f9000000000, 6 * MiB, s1, win),
        ev(4, "free_completed", 0x7f9000000000, 6 * MiB, s1, win),
        ev(5, "free_completed", 0x7f9000600000, 6 * MiB, s2, cpp),
        ev(6, "segment_free", 0x7f9000000000, 20 * MiB, s1, win),
        ev(7, "free_completed", 0x7f1000900000, 1 * MiB, s1, cpp),  # no alloc in trace
        ev(8, "alloc", 0x7f1000000000, 8 * MiB - 512, s1, win),
        ev(9, "user_defined", 0, 0, 0, [frame("ProfilerStep#1", 0, "START")]),
        ev(10, "snapshot", 0, 8 * MiB, 0),
    ]
    oom = {"action": "oom", "device_free": 123 * MiB, "size": 4 * GiB, "stream": s1,
           "time_us": t0 + 200, "compile_context": "N/A", "user_metadata": ""}
    trace0.append(oom)
    return {"segments": segs, "device_traces": [trace0, [], []],
            "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                                   "max_split_size": -1, "garbage_collection_threshold": 0.0,
                                   "expandable_segments": True,
                                   "graph_capture_record_stream_reuse": False,
                                   "roundup_power2_divisions": {"1": 0, "2": 4}},
            "external_annotations": [
                {"name": "ProfilerStep#1", "stage": "START", "device": 0, "time_us": t0},
                {"name": "ProfilerStep#1", "stage": "END", "device": 0, "time_us": t0 + 100}]}


def g9_2026():
    s = g8_streams_meta()
    for e in s["device_traces"][0]:
        e["pool_id"] = (0, 0)
        e["forward_frames"] = ["File \"x.py\", line 3"]
    s["device_traces"][0][1]["internal_metadata"] = "mallocWithAddress"
    s["host_segments"] = []
    s["host_traces"] = []
    s["allocator_settings"]["trace_alloc_overflowed"] = False
    return s


class WriterC:
    """The TorchScript pickler's encoding (protocol 2): strings memoized by value, ints as
    BININT1/BININT2/BININT or an 8-byte LONG1, lists as EMPTY_LIST MARK ... APPENDS."""

    def __init__(self):
        self.out = bytearray(b"\x80\x02")
        self.memo = {}

    def put(self):
        idx = len(self.memo)
        if idx < 256:
            self.out += b"q" + bytes([idx])
        else:
            self.out += b"r" + struct.pack("<I", idx)
        return idx

    def value(self, v):
        o = self.out
        if v is None:
            o += b"N"
        elif v is True:
            o += b"\x88"
        elif v is False:
            o += b"\x89"
        elif isinstance(v, int):
            if 0 <= v < 256:
                o += b"K" + bytes([v])
            elif 0 <= v < 65536:
                o += b"M" + struct.pack("<H", v)
            elif -2**31 <= v < 2**31:
                o += b"J" + struct.pack("<i", v)
            else:
                o += b"\x8a\x08" + struct.pack("<q", v)
        elif isinstance(v, float):
            o += b"G" + struct.pack(">d", v)
        elif isinstance(v, str):
            key = ("s", v)
            if key in self.memo:
                idx = self.memo[key]
                o += (b"h" + bytes([idx])) if idx < 256 else (b"j" + struct.pack("<I", idx))
                return
            b = v.encode()
            o += b"X" + struct.pack("<I", len(b)) + b
            self.memo[key] = self.put()
        elif isinstance(v, tuple):
            o += b"("
            for x in v:
                self.value(x)
            o += b"t"
        elif isinstance(v, list):
            o += b"]("
            for x in v:
                self.value(x)
            o += b"e"
        elif isinstance(v, dict):
            o += b"}("
            for k, x in v.items():
                self.value(k)
                self.value(x)
            o += b"u"
        else:
            raise TypeError(type(v))

    def dump(self, v):
        self.value(v)
        self.out += b"."
        return bytes(self.out)


NAMES = ["syn_g1_history_p%d.pickle" % p for p in (2, 4, 5)] + \
    ["syn_g8_streams_meta_p%d.pickle" % p for p in (2, 4, 5)] + \
    ["syn_g9_2026_p4.pickle", "syn_writer_c.pickle", "syn_u64_stream.pickle"]


def parse_args(argv):
    ap = argparse.ArgumentParser(
        description="Write the synthetic snapshots (" + ", ".join(NAMES) + ") into DIR.")
    ap.add_argument("dir", metavar="DIR", help="folder to write into (created if missing)")
    ap.add_argument("--force", action="store_true",
                    help="replace files of these names that are already in DIR")
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    d = args.dir
    os.makedirs(d, exist_ok=True)
    existing = [n for n in NAMES if os.path.exists(os.path.join(d, n))]
    if existing and not args.force:
        sys.exit("make_synthetic.py: %s already holds %s (give --force to replace)"
                 % (d, ", ".join(existing)))

    def w(name, data):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)

    for p in (2, 4, 5):
        w("syn_g1_history_p%d.pickle" % p, pickle.dumps(g1_history(), protocol=p))
        w("syn_g8_streams_meta_p%d.pickle" % p, pickle.dumps(g8_streams_meta(), protocol=p))
    w("syn_g9_2026_p4.pickle", pickle.dumps(g9_2026(), protocol=4))
    w("syn_writer_c.pickle", WriterC().dump(g8_streams_meta()))
    s = g8_streams_meta()
    for seg in s["segments"]:
        seg["stream"] = 2**63 + 12345
    w("syn_u64_stream.pickle", pickle.dumps(s, protocol=4))


if __name__ == "__main__":
    main()
