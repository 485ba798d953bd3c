#!/bin/sh
# SPDX-License-Identifier: MIT
# account_test.sh GPUMEM - gpumem account end to end against the fake driver (no GPU).
#
# The job (tests/account/job.c) reaches the fake driver directly, through cuGetProcAddress
# and through a dlopen'd handle, from four threads and two forked children, through fake
# libraries named like the real ones; it prints what it allocated through each
# ("expect ..." lines) and check_account.py holds the account against that, to the byte.
# The fake charges known amounts: a context 300 MiB, a module or library 4 MiB, a graph
# 6 MiB, allocations in 2 MiB granules, and the heap limit the job sets, which no allocation
# call shows ("not seen").  Scenarios: run to the end; SIGTERM at the end state; SIGKILL
# (as the OOM killer would); an internal failure of the interposer (it must stop accounting
# and pass every call through).  In each the job's results and return codes must be those
# it gives alone.
# Environment (set by ctest): GM_FAKE_DIR, GPUMEM_CUDA_LIBRARY, GPUMEM_NVML_LIBRARY; under
# ASan GM_ASAN_PRELOAD, the sanitizer's runtime, which must come first in LD_PRELOAD.
set -u
GPUMEM=$1
HERE=$(cd "$(dirname "$0")" && pwd)
JOB=$GM_FAKE_DIR/account/account_job
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GPUMEM_FAKE_STATE="$work/state"
export GPUMEM_FAKE_CONTEXT_BYTES=314572800 GPUMEM_FAKE_MODULE_BYTES=4194304
export GPUMEM_FAKE_GRAPH_BYTES=6291456 GPUMEM_FAKE_GRANULE=2097152 ACCOUNT_JOB_HOLD_MS=400
# The job finds its libraries by its RUNPATH; under ASan, whose dlopen interceptor calls
# dlopen from the sanitizer's runtime, a name is no longer searched there: say where.
export LD_LIBRARY_PATH="$GM_FAKE_DIR/account:$GM_FAKE_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fails=0

# gpumem and the job, with the sanitizer's runtime preloaded under ASan (only them: it
# would report the leaks of python3, grep, ... too).
gpumem() {
    if [ -n "${GM_ASAN_PRELOAD:-}" ]; then
        LD_PRELOAD="$GM_ASAN_PRELOAD" "$GPUMEM" "$@"
    else
        "$GPUMEM" "$@"
    fi
}
job() {
    if [ -n "${GM_ASAN_PRELOAD:-}" ]; then
        LD_PRELOAD="$GM_ASAN_PRELOAD" "$JOB" "$@"
    else
        "$JOB" "$@"
    fi
}

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

check() { # SUMMARY OUTPUT END_AT [--disabled]
    python3 "$HERE/check_account.py" "$@"
}

# The lines of a job's output that must not change under the interposer.
results() {
    grep -E '^(result|codes) ' "$1"
}

# The job's main process: the one that allocated through PyTorch.
main_pid() {
    awk '$1 == "expect" && $3 == "end" && $7 != "torch=0" { print $2; exit }' "$1"
}

# Wait until FILE has a line "ready" (at most 2 minutes, however slow the machine).
wait_ready() {
    i=0
    while ! grep -q '^ready$' "$1" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 1200 ] && return 1
        sleep 0.1
    done
    return 0
}

# 0. The job alone: its results, its return codes.
if ! job exit >"$work/plain.out" 2>"$work/plain.err"; then
    fail "the job alone failed: $(head -3 "$work/plain.err")"
fi
results "$work/plain.out" >"$work/plain.res"

# 1. To the end: every byte credited, the equation exact at the peak and at exit; one file
#    per process that used the GPU (not the worker forked after, which never did); the
#    merged timeline reads back the same; the job's results unchanged.
(
    export RANK=3 LOCAL_RANK=1 # as a launcher sets them: in the files' names and the account
    gpumem account --json --interval 50 --dir "$work/d1" -o "$work/merged.jsonl" -- "$JOB" exit
) >"$work/s1.json" 2>"$work/s1.err"
rc=$?
[ "$rc" = 0 ] || fail "to the end: exit status $rc: $(grep -v '^expect\|^result\|^codes' "$work/s1.err" | head -5)"
check "$work/s1.json" "$work/s1.err" exit || fail "to the end: the account disagrees with the job"
results "$work/s1.err" >"$work/s1.res"
cmp -s "$work/plain.res" "$work/s1.res" || fail "to the end: the job's results or return codes changed under the interposer"
n=0
for f in "$work/d1"/account-rank3-local1-*.jsonl; do
    [ -f "$f" ] && n=$((n + 1))
done
[ "$n" = 2 ] || fail "to the end: $n account files named by rank, expected 2 (the main process and its first child)"
grep -q '"rank": 3,' "$work/s1.json" || fail "to the end: the account does not give the rank"
gpumem account --input "$work/merged.jsonl" --json >"$work/m1.json" 2>"$work/m1.err" ||
    fail "the merged timeline does not read back: $(cat "$work/m1.err")"
check "$work/m1.json" "$work/s1.err" exit || fail "the merged timeline disagrees with the job"
gpumem account --input "$work/d1" >"$work/report.txt" 2>&1 || fail "the text report failed"
grep -q '^    device used (NVML) [0-9.]* MiB = context .* + modules .* + graphs .* + PyTorch reserved .* + NCCL .* + cuBLAS .* + rounding .* + not seen by the driver API' "$work/report.txt" ||
    fail "the report has no equation line"
grep -q 'measured: NVML usedGpuMemory of the process around each creation (1 context)' "$work/report.txt" ||
    fail "the report does not give the context's source"
grep -q 'libcudart.so.12+0x[0-9a-f]* (cudaMalloc)' "$work/report.txt" ||
    fail "the report has no native stack of the largest allocations"

# A run ended by a signal at the job's end state: SIG, the name of the scenario, the exit
# status gpumem must give, the end the account must name.
signalled() { # SIG DIR STATUS END_AT
    gpumem account --json --interval 50 --dir "$work/$2" -- "$JOB" "$2" \
        >"$work/$2.json" 2>"$work/$2.err" &
    gp=$!
    if wait_ready "$work/$2.err"; then
        sleep 0.3 # a sample after the last change
        kill "-$1" "$(main_pid "$work/$2.err")"
    else
        fail "$1: the job never got ready"
        kill -KILL $gp
    fi
    wait $gp
    rc=$?
    [ "$rc" = "$3" ] || fail "$1: exit status $rc, expected $3"
    check "$work/$2.json" "$work/$2.err" "$4" || fail "$1: the account disagrees with the job"
}

# 2. SIGTERM at the end state: the interposer writes the counters and dies of the signal;
#    gpumem reports it and exits 128 + 15.
signalled TERM term 143 signal
grep -q '"end": "signal"' "$work/term.json" || fail "SIGTERM: the process's end is not the signal"

# 3. SIGKILL (the OOM killer): nothing runs in the job; its samples are the account.
signalled KILL kill 137 "last sample"
grep -q 'killed by SIGKILL' "$work/kill.err" || fail "SIGKILL: gpumem does not say the command was killed"

# 4. An internal failure (the 20th table insertion fails, as if memory ran out): the
#    interposer stops accounting, says so in its file, and the job runs on unchanged.
(
    export GPUMEM_ACCOUNT_FAIL_AT=20
    gpumem account --json --dir "$work/d4" -- "$JOB" exit
) >"$work/s4.json" 2>"$work/s4.err"
rc=$?
[ "$rc" = 0 ] || fail "internal failure: exit status $rc"
results "$work/s4.err" >"$work/s4.res"
cmp -s "$work/plain.res" "$work/s4.res" || fail "internal failure: the job's results changed"
check "$work/s4.json" "$work/s4.err" exit --disabled || fail "internal failure: not reported"

# 5. gpumem watch --account: the watch report, then the account of each process.
gpumem watch --account --no-chart --interval 50 -- "$JOB" exit >"$work/w5.out" 2>"$work/w5.err"
rc=$?
[ "$rc" = 0 ] || fail "watch --account: exit status $rc"
grep -q 'peak of the command' "$work/w5.err" || fail "watch --account: no watch report"
grep -q '^gpumem account: 2 processes used the GPU' "$work/w5.err" || fail "watch --account: no account"
grep -q '^    device used (NVML) .* = context ' "$work/w5.err" || fail "watch --account: no equation"
results "$work/w5.out" >"$work/w5.res"
cmp -s "$work/plain.res" "$work/w5.res" || fail "watch --account: the job's results changed"

# 5b. gpumem watch --account --prometheus: every term of each process's equations in the
#     metrics, valid exposition format, to the byte what the job allocated.
(
    export SLURM_JOB_ID=77
    gpumem watch --account --no-chart --interval 50 --prometheus "$work/w5.prom" -- "$JOB" exit
) >"$work/w5b.out" 2>"$work/w5b.err"
rc=$?
[ "$rc" = 0 ] || fail "watch --account --prometheus: exit status $rc"
python3 "$HERE/../device/prom_check.py" "$work/w5.prom" --label job_id=77 >"$work/w5p.out" ||
    fail "watch --account --prometheus: $(cat "$work/w5p.out")"
python3 "$HERE/check_account.py" --prometheus "$work/w5.prom" "$work/w5b.out" >"$work/w5c.out" ||
    fail "watch --account --prometheus: the metrics disagree with the job: $(cat "$work/w5c.out")"
grep -q '^gpumem_account_term_bytes{pid="[0-9]*",process="account_job",cuda="0",.*at="peak",.*term="library",lib="torch"} ' "$work/w5.prom" ||
    fail "watch --account --prometheus: no PyTorch term labelled by pid, process, device and kind"

# 5c. The same while the command runs: the interposer's files are read again as the metrics
#     are rewritten, so the running process's equation (its latest sample) is there before
#     it ends.
gpumem watch --account --no-chart --interval 50 --prometheus "$work/w5m.prom" -- "$JOB" term \
    >"$work/w5m.out" 2>"$work/w5m.err" &
gp=$!
if wait_ready "$work/w5m.out"; then
    tries=0
    until python3 "$HERE/check_account.py" --prometheus "$work/w5m.prom" "$work/w5m.out" >"$work/w5n.out" 2>&1; do
        tries=$((tries + 1))
        if [ $tries -ge 300 ]; then
            fail "watch --account --prometheus while running: $(cat "$work/w5n.out")"
            break
        fi
        sleep 0.1
    done
    kill -TERM "$(main_pid "$work/w5m.out")"
else
    fail "watch --account --prometheus while running: the job never got ready"
    kill -KILL $gp
fi
wait $gp

# 6. A driver whose cuGetProcAddress hands out functions that are no export (the VMM names):
#    they cannot be wrapped; the pages mapped through them are "not seen", exactly, the
#    report says how many entry points went out unwrapped, and the job runs unchanged.
(
    export GPUMEM_FAKE_PROC_PRIVATE=1
    gpumem account --json --interval 50 --dir "$work/d6" -- "$JOB" exit
) >"$work/s6.json" 2>"$work/s6.err"
rc=$?
[ "$rc" = 0 ] || fail "unwrapped entry points: exit status $rc"
check "$work/s6.json" "$work/s6.err" exit --unhooked || fail "unwrapped entry points: the account disagrees"
results "$work/s6.err" >"$work/s6.res"
cmp -s "$work/plain.res" "$work/s6.res" || fail "unwrapped entry points: the job's results changed"
gpumem account --input "$work/d6" 2>&1 | grep -q 'entry points handed out unwrapped' ||
    fail "unwrapped entry points: the report does not say so"

[ "$fails" -eq 0 ] && echo "account: all scenarios passed"
exit $((fails > 0))
