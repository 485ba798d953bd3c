#!/bin/sh
# SPDX-License-Identifier: MIT
# account.sh BUILD - what gpumem account's interposer costs (make bench).
#
# 1. Per intercepted call: cuMemAlloc_v2 + cuMemFree_v2 pairs against a driver that does
#    nothing (bench/null_cuda.c), the calling threads' CPU time per call, without and with
#    libgpumem-account.so preloaded: called by the program itself (the fast path: the return
#    address is resolved once, then cached) and through a runtime library (libcudart, passed
#    through: the stack is unwound to its caller), with 1 and 2 threads.  Goal: under 1 µs.
# 2. The whole job: the test workload (tests/account/job.c: threads, forks, modules, graphs,
#    every kind of memory, against the fake driver) run ROUNDS times (default 10) without
#    and with the interposer; the mean wall time of each and the slowdown.
# Numbers depend on the machine: run it where you want to know them.
set -u
BUILD=${1:-build}
PAIRS=${ACCOUNT_BENCH_PAIRS:-400000}
ROUNDS=${ACCOUNT_BENCH_ROUNDS:-10}
CALLS=$BUILD/bench/account_calls
PRELOAD=$(cd "$BUILD" && pwd)/libgpumem-account.so
FAKE=$(cd "$BUILD" && pwd)/tests/fake
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for f in "$CALLS" "$PRELOAD"; do
    [ -e "$f" ] || { echo "account.sh: $f is missing: build first (make)"; exit 1; }
done

echo "gpumem account: interposer cost per call (CPU ns per call of the calling threads, best of 5)"
printf '  %-34s %8s %12s %10s\n' "path" "threads" "interposed" "overhead"
for path in direct cudart; do
    for t in 1 2; do
        plain=$("$CALLS" "$path" "$PAIRS" "$t")
        mkdir -p "$work/calls"
        with=$(GPUMEM_ACCOUNT_DIR="$work/calls" LD_PRELOAD="$PRELOAD" "$CALLS" "$path" "$PAIRS" "$t")
        rm -f "$work/calls"/*
        what="the program itself"
        [ "$path" = cudart ] && what="through libcudart (stack unwound)"
        awk -v w="$what" -v t="$t" -v a="$plain" -v b="$with" \
            'BEGIN { printf "  %-34s %8d %9.1f ns %7.1f ns\n", w, t, b, b - a }'
    done
done

JOB=$FAKE/account/account_job
if [ ! -x "$JOB" ]; then
    echo "account.sh: $JOB is missing (the test build makes it): no whole-job figure"
    exit 0
fi
export GPUMEM_NVML_LIBRARY="$FAKE/libnvidia-ml.so.1" GPUMEM_FAKE_STATE="$work/state"
export GPUMEM_FAKE_MODULE_BYTES=4194304 GPUMEM_FAKE_GRAPH_BYTES=6291456 ACCOUNT_JOB_HOLD_MS=0
# wall seconds of ROUNDS runs of the job
run() {
    t0=$(date +%s.%N)
    i=0
    while [ $i -lt "$ROUNDS" ]; do
        "$@" >/dev/null 2>"$work/job.err" || { echo "account.sh: the job failed: $(head -3 "$work/job.err")" >&2; return 1; }
        i=$((i + 1))
    done
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" -v n="$ROUNDS" 'BEGIN { printf "%.4f", (b - a) / n }'
}
mkdir -p "$work/job"
plain=$(run "$JOB" exit) || exit 1
with=$(run env GPUMEM_ACCOUNT_DIR="$work/job" LD_PRELOAD="$PRELOAD" "$JOB" exit) || exit 1
echo "gpumem account: the test job (threads, forks, modules, graphs, 40 tracked calls), mean of $ROUNDS runs"
awk -v a="$plain" -v b="$with" 'BEGIN { printf "  alone %.1f ms, accounted %.1f ms: %+.1f ms (%+.1f%%)\n", a * 1e3, b * 1e3, (b - a) * 1e3, (b / a - 1) * 100 }'
