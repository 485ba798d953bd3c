#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_redact.py SNAPSHOT...: `gpumem snapshot redact` keeps every figure and hides the text.
SNAPSHOT as snapshots.py takes them (a file, a folder, "example", --third-party-data).

For each file:
  - redacted: `snapshot info` counts (segments, blocks, events, unique frames and stacks: the
    stacks keep their shape), `snapshot stats` and `snapshot replay` in every number, and
    each device's `snapshot peak` figures are the original's; no file path or function name of the original's peak
    listing is left in the bytes (but "??", "" and nn.Module's "forward"); two runs give the
    same bytes, another salt other bytes;
  - redacted with --keep-library-frames: stats, peak, categories, oom and leaks documents are
    the original's in every number (their texts aside).
GPUMEM names the gpumem binary.  Exit 0 when every check holds, 1 with the first failure."""
import json
import os
import subprocess
import sys
import tempfile

from snapshots import snapshot_files

GPUMEM = os.environ.get("GPUMEM", "gpumem")
PEAK_FIGURES = ("peak_bytes", "peak_event_index", "peak_reserved_bytes", "reserved_at_peak_bytes",
                "initial_bytes", "final_bytes", "trace_events", "live_allocations", "live_groups")
INFO_COUNTS = ("segments", "blocks", "trace_events", "unique_frames", "unique_stacks",
               "pickle_protocol", "generation", "annotations")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def doc(cmd, path):
    r = subprocess.run([GPUMEM, "snapshot", cmd, "--json", path], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL)
    return json.loads(r.stdout) if r.returncode == 0 else {"exit": r.returncode}


def numbers(v):
    """The document with every text blanked and the file's own name and sizes left out."""
    if isinstance(v, dict):
        return {k: numbers(x) for k, x in v.items()
                if k not in ("file", "file_bytes", "pickle_bytes", "gpumem_version")}
    if isinstance(v, list):
        return [numbers(x) for x in v]
    return "" if isinstance(v, str) else v


def texts(v, out):
    if isinstance(v, dict):
        for k, x in v.items():
            if k in ("filename", "name") and isinstance(x, str):
                out.add(x)
            texts(x, out)
    elif isinstance(v, list):
        for x in v:
            texts(x, out)
    return out


def redact(src, dst, *opts):
    subprocess.run([GPUMEM, "snapshot", "redact", *opts, src, "-o", dst, "--force"], check=True,
                   stdout=subprocess.DEVNULL)
    return open(dst, "rb").read()


def check(path, tmp):
    name = os.path.basename(path)
    red = os.path.join(tmp, "redacted.pickle")
    data = redact(path, red)
    info_a, info_b = doc("info", path), doc("info", red)
    for k in INFO_COUNTS:
        if numbers(info_a.get(k)) != numbers(info_b.get(k)):
            fail("%s: info %s differs" % (name, k))
    for cmd in ("stats", "replay"):
        if numbers(doc(cmd, path)) != numbers(doc(cmd, red)):
            fail("%s: %s differs" % (name, cmd))
    peak_a, peak_b = doc("peak", path), doc("peak", red)
    for a, b in zip(peak_a["devices"], peak_b["devices"]):
        for k in PEAK_FIGURES:
            if a.get(k) != b.get(k):
                fail("%s: cuda:%d %s %r != %r" % (name, a["device"], k, a.get(k), b.get(k)))
    left = [t for t in texts(peak_a, set()) - {"", "??", "forward"}
            if t.encode("utf-8") in data and len(t) > 3]
    if left:
        fail("%s: the redacted file still holds %r" % (name, sorted(left)[:3]))
    if redact(path, red) != data:
        fail("%s: two redactions differ" % name)
    if data and info_a.get("unique_frames") and redact(path, red, "--salt", "s3cret") == data:
        fail("%s: a salt changes nothing" % name)
    redact(path, red, "--keep-library-frames")
    for cmd in ("stats", "peak", "categories", "oom", "leaks"):
        if numbers(doc(cmd, path)) != numbers(doc(cmd, red)):
            fail("%s: --keep-library-frames: %s differs" % (name, cmd))
    print("ok: %s: %d frames, %d stacks, %d events; %d texts of the peak hidden" % (
        name, info_a.get("unique_frames", 0), info_a.get("unique_stacks", 0),
        info_a.get("trace_events", 0), len(texts(peak_a, set()) - {"", "??", "forward"})))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        files = snapshot_files(sys.argv[1:], tmp)
        if not files:
            fail("no snapshot to check")
        for f in files:
            check(f, tmp)


if __name__ == "__main__":
    main()
