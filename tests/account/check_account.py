#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_account.py SUMMARY.json JOB_OUTPUT END_AT [--disabled]

Hold `gpumem account --json` (schema gpumem.account.summary/1) against what the test job
(tests/account/job.c) says it allocated: its lines "expect PID AT k=v ..." give every term of
the equation of each of its processes at the peak and at the end, in bytes.  Checks, for each
process and moment:
  - each term credited to the right library is exactly what the job allocated through it
    (torch, nccl, cublas, other), and context, modules, graphs, rounding, not seen are exact;
  - the equation balances to the byte: device used = the sum of the terms;
  - the readings were consistent, and the end is the expected kind (exit, signal, last
    sample);
  - pinned host memory and managed memory are reported apart, exactly;
  - no process left a file that the job did not announce (a child that never used the GPU).
With --disabled: the job's process stopped accounting; its summary must say so.
With --unhooked: the driver handed out the VMM entry points at addresses that are no export
(the fake's GPUMEM_FAKE_PROC_PRIVATE), so the pages PyTorch mapped through them (torch_vmm) are
not seen: they must move from PyTorch's term to "not seen", byte for byte, and the summary must
count the entry points handed out unwrapped.
Prints what disagrees and exits 1, or prints "ok" and exits 0.

check_account.py --prometheus METRICS JOB_OUTPUT: the same terms, to the byte, read from the
metrics `gpumem watch --account --prometheus METRICS` wrote (gpumem_account_term_bytes, a
series per term labelled pid, at, term, lib; gpumem_account_used_bytes the sum of them)."""
import json
import os
import sys

TERMS = ["context", "modules", "graphs", "torch", "nccl", "cublas", "other", "rounding",
         "not_seen"]


def term_bytes(balance):
    got = dict.fromkeys(TERMS, 0)
    for t in balance["terms"]:
        if t["term"] in ("context", "modules", "graphs", "rounding", "not_seen"):
            got[t["term"]] += t["bytes"]
        elif t["term"] == "others" or t.get("lib") == "other":
            got["other"] += t["bytes"]
        elif t.get("lib") in got:
            got[t["lib"]] += t["bytes"]
        else:
            got.setdefault(t.get("lib", t["term"]), 0)
            got[t.get("lib", t["term"])] += t["bytes"]
    return got


def equation_faults(where, b, want):
    """What disagrees between equation 'b' ({"used", "terms"}) and the job's 'want'."""
    bad, got = [], term_bytes(b)
    for k in TERMS:
        if got.get(k, 0) != want[k]:
            bad.append("%s: %s is %d, the job allocated %d" % (where, k, got.get(k, 0), want[k]))
    extra = set(got) - set(TERMS)
    if extra:
        bad.append("%s: terms credited to no expected library: %s" % (where, sorted(extra)))
    if b["used"] is None or b["used"] != sum(t["bytes"] for t in b["terms"]):
        bad.append("%s: device used %s is not the sum of the terms %d" %
                   (where, b["used"], sum(t["bytes"] for t in b["terms"])))
    return bad


def read_expect(output_path):
    expect = {}
    with open(output_path) as f:
        for line in f:
            words = line.split()
            if len(words) > 3 and words[0] == "expect":
                kv = dict(w.split("=", 1) for w in words[3:])
                expect[(int(words[1]), words[2])] = {k: int(v) for k, v in kv.items()}
    return expect


def check_prometheus(metrics_path, output_path):
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "device"))
    import prom_check

    with open(metrics_path, encoding="utf-8") as f:
        samples = prom_check.parse(f.read())
    expect = read_expect(output_path)
    balances, bad = {}, []
    for name, labels, value in samples:
        if name not in ("gpumem_account_term_bytes", "gpumem_account_used_bytes"):
            continue
        b = balances.setdefault((int(labels["pid"]), labels["at"]), {"used": None, "terms": []})
        if name == "gpumem_account_used_bytes":
            b["used"] = int(value)
        else:
            term = {"term": labels["term"], "bytes": int(value)}
            if "lib" in labels:
                term["lib"] = labels["lib"]
            b["terms"].append(term)
    if {pid for pid, _ in balances} != {pid for pid, _ in expect}:
        bad.append("processes %s in the metrics, the job announced %s" %
                   (sorted({pid for pid, _ in balances}), sorted({pid for pid, _ in expect})))
    for (pid, at), want in sorted(expect.items()):
        b = balances.get((pid, at))
        where = "pid %d %s" % (pid, at)
        if not b:
            bad.append("%s: no equation in the metrics" % where)
            continue
        bad += equation_faults(where, b, want)
    for line in bad:
        print("FAIL:", line)
    if not bad:
        print("ok")
    return 1 if bad else 0


def main():
    if sys.argv[1] == "--prometheus":
        return check_prometheus(sys.argv[2], sys.argv[3])
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    disabled = "--disabled" in sys.argv
    unhooked = "--unhooked" in sys.argv
    summary_path, output_path, end_at = args
    with open(summary_path) as f:
        summary = json.load(f)
    expect = read_expect(output_path)
    bad = []
    if summary.get("schema") != "gpumem.account.summary/1":
        bad.append("schema is %r" % summary.get("schema"))
    procs = {p["pid"]: p for p in summary["processes"]}
    pids = {pid for pid, _ in expect}
    # the job's main process: its parent is not in the account (the children's is)
    mains = [pid for pid in procs if procs[pid]["ppid"] not in procs]
    main_pid = mains[0] if len(mains) == 1 else None
    if main_pid is None:
        bad.append("no single main process: %s" % mains)
    if set(procs) != pids:
        bad.append("processes %s in the account, the job announced %s" %
                   (sorted(procs), sorted(pids)))
    for (pid, at), want in sorted(expect.items()):
        p = procs.get(pid)
        if not p:
            continue
        if disabled:
            continue
        if len(p["devices"]) != 1:
            bad.append("pid %d: %d devices" % (pid, len(p["devices"])))
            continue
        if unhooked:
            want = dict(want)
            want["torch"] -= want["torch_vmm"]
            want["not_seen"] += want["torch_vmm"]
        b = p["devices"][0]["peak" if at == "peak" else "end"]
        where = "pid %d %s" % (pid, at)
        if not b:
            bad.append("%s: no equation" % where)
            continue
        bad += equation_faults(where, b, want)
        if not b["consistent"]:
            bad.append("%s: the reading was not consistent" % where)
        if b["managed"] != want["managed"]:
            bad.append("%s: managed %d, expected %d" % (where, b["managed"], want["managed"]))
        if at == "end":
            # only the main process gets the signal: its child has exited by then
            want_at = end_at if pid == main_pid else "exit"
            if b["at"] != want_at:
                bad.append("%s: the end is '%s', expected '%s'" % (where, b["at"], want_at))
            if p["host"]["peak"] != want["host"]:
                bad.append("%s: pinned host memory %d, expected %d" %
                           (where, p["host"]["peak"], want["host"]))
    if unhooked and (main_pid not in procs or procs[main_pid]["unhooked"] < 1):
        bad.append("no entry point counted as handed out unwrapped")
    if disabled:
        p = procs.get(main_pid)
        if not p or not p["disabled"] or not p["disabled_reason"]:
            bad.append("pid %d: the summary does not say that accounting stopped" % main_pid)
    for line in bad:
        print("FAIL:", line)
    if not bad:
        print("ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
