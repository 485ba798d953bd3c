#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compare `gpumem snapshot stats|peak --json FILE` with tests/reference/snapshot_ref.py.

usage: compare.py GPUMEM FILE...   exit 0 when every figure agrees exactly.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import snapshot_ref  # noqa: E402

STATS_KEYS = ("device", "reserved_bytes", "allocated_bytes", "active_bytes", "requested_bytes",
              "internal_free_bytes", "external_free_bytes", "largest_free_block_bytes",
              "segments", "blocks")
PEAK_KEYS = ("device", "peak_bytes", "peak_event_index", "peak_time_us", "peak_reserved_bytes",
             "reserved_at_peak_bytes", "initial_bytes", "final_bytes", "trace_events",
             "live_allocations", "live_groups")


def run(gpumem, sub, path):
    out = subprocess.run([gpumem, "snapshot", sub, "--json", path], check=True,
                         capture_output=True).stdout
    return json.loads(out)


def main():
    gpumem, files = sys.argv[1], sys.argv[2:]
    bad = 0
    checked = 0
    for path in files:
        name = os.path.basename(path)
        got, want = run(gpumem, "stats", path), snapshot_ref.stats(path)
        if got["schema"] != "gpumem.snapshot.stats/1":
            print("%s: stats schema %r" % (name, got["schema"]))
            bad += 1
        if len(got["devices"]) != len(want["devices"]):
            print("%s: stats: %d devices, reference %d" % (name, len(got["devices"]),
                                                           len(want["devices"])))
            bad += 1
        for g, w in zip(got["devices"], want["devices"]):
            for k in STATS_KEYS:
                checked += 1
                if g[k] != w[k]:
                    print("%s: stats device %s %s: gpumem %s, reference %s"
                          % (name, w["device"], k, g[k], w[k]))
                    bad += 1
        got, want = run(gpumem, "peak", path), snapshot_ref.peak(path)
        if got["schema"] != "gpumem.snapshot.peak/1":
            print("%s: peak schema %r" % (name, got["schema"]))
            bad += 1
        if len(got["devices"]) != len(want["devices"]):
            print("%s: peak: %d devices, reference %d" % (name, len(got["devices"]),
                                                          len(want["devices"])))
            bad += 1
        for g, w in zip(got["devices"], want["devices"]):
            for k in PEAK_KEYS:
                checked += 1
                if g[k] != w[k]:
                    print("%s: peak device %s %s: gpumem %s, reference %s"
                          % (name, w["device"], k, g[k], w[k]))
                    bad += 1
            # the figures the reference computes (gpumem adds the stack id and its user frame)
            gl = sorted(({k: x[k] for k in ("bytes", "count", "frames")} for x in g["live_at_peak"]),
                        key=lambda x: (-x["bytes"], -x["count"], json.dumps(x["frames"])))
            checked += 1
            if gl != w["live_at_peak"]:
                print("%s: peak device %s: live_at_peak groups differ (%d vs %d groups)"
                      % (name, w["device"], len(gl), len(w["live_at_peak"])))
                bad += 1
            # order: largest first
            sizes = [x["bytes"] for x in g["live_at_peak"]]
            if sizes != sorted(sizes, reverse=True):
                print("%s: peak device %s: live_at_peak not largest first" % (name, w["device"]))
                bad += 1
        print("%s: ok" % name if not bad else "%s: checked" % name)
    print("%d figures compared, %d differences" % (checked, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
