#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CPU time of `gpumem estimate` on the jobs people ask about, against the goal of 50 ms each.

usage: estimate_bench.py GPUMEM BENCH_DIR     (BENCH_DIR holds bench/measure.c's 'measure')

Each job runs BENCH_REPEAT times (default 9), one process each, through bench/measure.c:
CPU time (user + system) of the whole command, suggestions included (a job that does not fit
asks for them).  Printed per job: the least and the median CPU time.  The goal is the least
of the runs, what the work costs without what a busy machine adds to it; exits 1 when a
job's least CPU time is above the goal.
"""
import os
import subprocess
import sys
import tempfile

GOAL_S = 0.050
JOBS = [
    ["llama-3.1-70b", "--train", "--gpu", "H100"],
    ["llama-3.1-8b", "--train", "--gpu", "H100"],
    ["llama-3.1-8b", "--train", "--gpu", "A100-40GB", "--batch", "8"],
    ["llama-3.1-70b", "--infer", "--gpu", "H100", "--engine", "vllm"],
]


def cpu_of(measure, cmd):
    with tempfile.NamedTemporaryFile() as res:
        p = subprocess.run([measure, res.name, *cmd], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
        # 'estimate' exits 1 when the job does not fit: still a complete answer
        if p.returncode not in (0, 1):
            sys.exit("failed (exit %d): %s\n%s" % (p.returncode, " ".join(cmd),
                                                   p.stderr.decode(errors="replace")[-2000:]))
        return float(open(res.name).read().split()[1])


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    gpumem, measure = sys.argv[1], os.path.join(sys.argv[2], "measure")
    repeat = int(os.environ.get("BENCH_REPEAT", "9"))
    status = 0
    print("gpumem estimate: CPU time per job, %d runs each; goal %.0f ms (least of the runs)"
          % (repeat, GOAL_S * 1e3))
    print("  %-58s %9s %9s  %s" % ("job", "least ms", "median ms", "goal"))
    for job in JOBS:
        cpu = sorted(cpu_of(measure, [gpumem, "estimate", *job]) for _ in range(repeat))
        ok = cpu[0] <= GOAL_S
        status |= 0 if ok else 1
        print("  %-58s %9.1f %9.1f  %s" % (" ".join(job), cpu[0] * 1e3, cpu[len(cpu) // 2] * 1e3,
                                          "met" if ok else "ABOVE"))
    return status


if __name__ == "__main__":
    sys.exit(main())
