#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Independent reference for `gpumem snapshot stats --json` and `peak --json`.

Uses only the standard `pickle` module, with class lookup disabled (find_class raises), so
a hostile file cannot run code here either.  The peak follows memory_viz's
process_alloc_data(): elements are allocs, or frees without an earlier alloc; a
free_completed at an address with a pending alloc ends it; blocks active_allocated at
snapshot time whose address has no pending alloc at the end count from the start at their
requested_size.  Reserved bytes: the device's segment total at the end, replayed backwards
over segment_alloc/segment_map (+size) and segment_free/segment_unmap (-size).

usage: snapshot_ref.py stats|peak FILE   (prints JSON on stdout)
"""
import io
import json
import pickle
import sys

NOISE_NAMES = ("unwind::unwind", "CapturedTraceback::gather", "gather_with_cpp", "_start",
               "__libc_start_main", "PyEval_", "PyObject_", "PyFunction_")
NOISE_FILES = ("core/boxing", "/Register", "/Redispatch", "pythonrun.c", "Modules/main.c",
               "Objects/call.c", "Objects/methodobject.c", "pycore_ceval.h", "ceval.c",
               "cpython/abstract.h")


class SafeUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError("refusing global %s.%s" % (module, name))


def load(path):
    with open(path, "rb") as f:
        data = f.read()
    return SafeUnpickler(io.BytesIO(data)).load()


def normalise(snap):
    if isinstance(snap, list):
        return {"segments": snap, "device_traces": None}
    return {"segments": snap.get("segments", []), "device_traces": snap.get("device_traces")}


def block_views(seg):
    """(address, block dict, requested, frames) with memory_viz's legacy fallbacks."""
    out = []
    addr = seg["address"]
    for b in seg.get("blocks", []):
        a = b.get("address", addr)
        frames = b.get("frames")
        req = b.get("requested_size")
        if frames is None:
            hist = b.get("history")
            if hist:
                frames = hist[0].get("frames", [])
                if not req and "real_size" in hist[0]:
                    req = hist[0]["real_size"]
            else:
                frames = []
        if req is None:
            req = b["size"]
        out.append((a, b, req, frames))
        addr += b["size"]
    return out


def devices_of(s):
    devs = set()
    if s["device_traces"] is not None:
        devs.update(range(len(s["device_traces"])))
    for seg in s["segments"]:
        devs.add(seg["device"])
    return sorted(devs)


def stats(path):
    s = normalise(load(path))
    out = []
    for d in devices_of(s):
        r = dict(device=d, reserved_bytes=0, allocated_bytes=0, active_bytes=0,
                 requested_bytes=0, internal_free_bytes=0, external_free_bytes=0,
                 largest_free_block_bytes=0, segments=0, blocks=0)
        for seg in s["segments"]:
            if seg["device"] != d:
                continue
            r["segments"] += 1
            r["reserved_bytes"] += seg["total_size"]
            for (_, b, req, _) in block_views(seg):
                r["blocks"] += 1
                st = b["state"]
                if st == "active_allocated":
                    r["allocated_bytes"] += b["size"]
                    r["active_bytes"] += b["size"]
                    r["requested_bytes"] += req
                    r["internal_free_bytes"] += max(b["size"] - req, 0)
                elif st == "active_pending_free":
                    r["active_bytes"] += b["size"]
                elif st == "inactive":
                    r["external_free_bytes"] += b["size"]
                    r["largest_free_block_bytes"] = max(r["largest_free_block_bytes"], b["size"])
        out.append(r)
    return {"devices": out}


def clean_frames(frames):
    res = []
    for f in frames:
        fn, name = f.get("filename", ""), f.get("name", "")
        if any(n in name for n in NOISE_NAMES) or any(x in fn for x in NOISE_FILES):
            continue
        res.append({"filename": fn, "line": f.get("line", 0), "name": name})
    return res


def peak_of(s, d):
    traces = s["device_traces"]
    trace = traces[d] if traces is not None and d < len(traces) else []
    # memory_viz's elements / actions
    elements = []          # dicts: size, frames, initially (bool)
    actions = []           # (event index, element index)
    addr_to_alloc = {}
    for i, e in enumerate(trace):
        act = e.get("action")
        if act == "alloc":
            elements.append({"size": e["size"], "frames": e.get("frames", []), "initial": False})
            addr_to_alloc[e["addr"]] = len(elements) - 1
            actions.append((i, len(elements) - 1))
        elif act == "free_completed":
            if e["addr"] in addr_to_alloc:
                actions.append((i, addr_to_alloc.pop(e["addr"])))
            else:
                elements.append({"size": e["size"], "frames": e.get("frames", []),
                                 "initial": True})
                actions.append((i, len(elements) - 1))
    for seg in s["segments"]:
        if seg["device"] != d:
            continue
        for (a, b, req, frames) in block_views(seg):
            if b["state"] == "active_allocated" and a not in addr_to_alloc:
                elements.append({"size": req, "frames": frames, "initial": True})
    live = set(i for i, el in enumerate(elements) if el["initial"])
    total = sum(elements[i]["size"] for i in live)
    initial = total
    best, best_i, best_live = total, -1, set(live)
    for (i, el) in actions:
        if el in live:
            live.remove(el)
            total -= elements[el]["size"]
        else:
            live.add(el)
            total += elements[el]["size"]
            if total > best:
                best, best_i, best_live = total, i, set(live)
    # reserved, replayed backwards from the segments
    sign = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}
    final_res = sum(seg["total_size"] for seg in s["segments"] if seg["device"] == d)
    change = sum(sign.get(e.get("action"), 0) * e.get("size", 0) for e in trace)
    res = final_res - change
    res_series = [res]
    for e in trace:
        res += sign.get(e.get("action"), 0) * e.get("size", 0)
        res_series.append(res)
    res_series = [max(r, 0) for r in res_series]
    groups = {}
    for i in best_live:
        el = elements[i]
        key = json.dumps(el["frames"], sort_keys=True)
        g = groups.setdefault(key, {"bytes": 0, "count": 0, "frames": clean_frames(el["frames"])})
        g["bytes"] += el["size"]
        g["count"] += 1
    peak_time = None
    if best_i >= 0 and "time_us" in trace[best_i]:
        peak_time = trace[best_i]["time_us"]
    return {"device": d, "peak_bytes": best, "peak_event_index": best_i,
            "peak_time_us": peak_time, "peak_reserved_bytes": max(res_series),
            "reserved_at_peak_bytes": res_series[best_i + 1], "initial_bytes": initial,
            "final_bytes": total, "trace_events": len(trace), "live_allocations": len(best_live),
            "live_groups": len(groups),
            "live_at_peak": sorted(groups.values(),
                                   key=lambda g: (-g["bytes"], -g["count"],
                                                  json.dumps(g["frames"])))}


def peak(path):
    s = normalise(load(path))
    return {"devices": [peak_of(s, d) for d in devices_of(s)]}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("stats", "peak"):
        sys.exit(__doc__)
    res = stats(sys.argv[2]) if sys.argv[1] == "stats" else peak(sys.argv[2])
    json.dump(res, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
