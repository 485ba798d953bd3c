#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The CLI and the HTML report name the same user frame for every stack and count the same
stacks: both take them from the library's one rule (gm_snapshot_frame_is_user), where they
used to have a rule each (and the report counted the empty stack: 43/267/206 stacks against
info's 42/266/205).

For gpumem's example and its two-rank files (with --third-party-data: the real files, which
tests/needs.sh finds and names in $GM_TESTDATA): the report's data
(the JSON in <script id="gm-data">) is read back; for every stack listed alive at the peak
and every leak site, the report's first frame marked as user code must be the "user_frame"
that `snapshot peak --json` and `snapshot leaks --json` give for that stack, the report's
stack count must be info's unique_stacks, and its leak verdict of each device the CLI's (g6's
cuda:0, 2 iterations: too few to judge, where the page said "No leak").

usage: cli_html_agree.py GPUMEM [--third-party-data]
"""
import json
import os
import re
import subprocess
import sys
import tempfile

GPUMEM = os.path.abspath(sys.argv[1])
THIRD_PARTY = "--third-party-data" in sys.argv[2:]
FILES = ["g3_time_us_snapshot_actions.pickle", "g6_compile_ctx_3dev_expandable_oom.pickle",
         "g7_record_stream_reuse_pyframes.pickle", "g2_cpp_frames_no_time.pickle"]
failures = 0


def fail(msg):
    global failures
    failures += 1
    print("FAIL " + msg)


def run(*args):
    p = subprocess.run([GPUMEM] + list(args), capture_output=True, text=True)
    if p.returncode:
        raise SystemExit("gpumem %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr))
    return p.stdout


def report_data(path, tmp):
    out = os.path.join(tmp, os.path.basename(path) + ".html")
    run("snapshot", "report", path, "-o", out, "--force")
    html = open(out, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="gm-data">(.*?)</script>', html, re.S)
    if not m:
        raise SystemExit("%s: no report data in the page" % path)
    # one file makes a page of one rank: its meta, devices, stacks and frames (gpumem.report/2)
    return json.loads(m.group(1).replace("<\\/", "</"))["ranks"][0]


def frame_key(f):
    return None if f is None else (f["filename"], f["line"], f["name"])


def html_user_frame(data, stack):
    for i in data["stacks"].get(str(stack), []):
        fr = data["frames"][i]
        if fr[3]:
            return (fr[0], fr[2], fr[1])
    return None


def check(path, tmp):
    name = os.path.basename(path)
    data = report_data(path, tmp)
    info = json.loads(run("snapshot", "info", "--json", path))
    if data["meta"]["stacks"] != info["unique_stacks"]:
        fail("%s: the report counts %d stacks, info %d"
             % (name, data["meta"]["stacks"], info["unique_stacks"]))
    peak = json.loads(run("snapshot", "peak", "--json", path))
    leaks = json.loads(run("snapshot", "leaks", "--json", path))
    cli = {}
    for dev in peak["devices"]:
        for g in dev["live_at_peak"]:
            cli[g["stack"]] = frame_key(g["user_frame"])
    n_leak_sites = 0
    for dev in leaks["devices"]:
        for lk in dev["leaks"]:
            for s in lk["sites"]:
                n_leak_sites += 1
                # a leak site's stack: match it to the report's by its frames
                key = tuple((f["filename"], f["line"], f["name"]) for f in s["frames"])
                cli.setdefault(("leak",) + key, frame_key(s["user_frame"]))
    # the leak verdict (before: the page said "No leak" after 2 iterations, where the CLI
    # said too few to judge)
    verdicts = {d["device"]: d["verdict"] for d in leaks["devices"]}
    for dev in data["devices"]:
        if dev.get("leak_verdict") != verdicts.get(dev["device"]):
            fail("%s: device %s: the report's leak verdict %r, the CLI's %r"
                 % (name, dev["device"], dev.get("leak_verdict"), verdicts.get(dev["device"])))
    compared = 0
    for dev in data["devices"]:
        for row in dev.get("at_peak", []):
            stack = row[2]  # [bytes, count, stack, bytes by category]
            if stack in cli:
                compared += 1
                if html_user_frame(data, stack) != cli[stack]:
                    fail("%s: stack %d: the report's user frame %r, the CLI's %r"
                         % (name, stack, html_user_frame(data, stack), cli[stack]))
        for lk in dev.get("leaks", []):
            for site in lk.get("sites", []):
                stack = site[4]
                frames = tuple((data["frames"][i][0], data["frames"][i][2], data["frames"][i][1])
                               for i in data["stacks"].get(str(stack), []))
                want = cli.get(("leak",) + frames, "missing")
                compared += 1
                if want == "missing":
                    fail("%s: leak site stack %d is not among the CLI's leak sites" % (name, stack))
                elif html_user_frame(data, stack) != want:
                    fail("%s: leak site stack %d: the report's user frame %r, the CLI's %r"
                         % (name, stack, html_user_frame(data, stack), want))
    if not compared:
        fail("%s: no stack to compare" % name)
    print("%s: %d stacks compared, %d leak sites, %d stacks counted" %
          (name, compared, n_leak_sites, info["unique_stacks"]))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        if THIRD_PARTY:
            paths = [os.path.join(os.environ["GM_TESTDATA"], "snapshots", f) for f in FILES]
        else:
            paths = [os.path.join(tmp, "example.pickle"), os.path.join(tmp, "rank1.pickle")]
            run("snapshot", "example", "-o", paths[0])
            run("snapshot", "example", "-o", paths[1], "--device", "1", "--batch", "12", "--phases")
        for p in paths:
            check(p, tmp)
    if failures:
        print("%d failures" % failures)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
