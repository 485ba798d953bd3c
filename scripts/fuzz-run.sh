#!/bin/sh
# SPDX-License-Identifier: MIT
# fuzz-run.sh [SECONDS] [TARGET...] - run every libFuzzer target (tests/fuzz/fuzz_*.c, built
# by `make fuzz` into build-fuzz/tests/) for SECONDS each (default $FUZZ_SECONDS, else 30),
# starting from its corpus in tests/fuzz/corpus/<target>/, and print each target's exec
# count.  The corpus in the tree is never changed: new inputs go to a temporary folder, and
# a crash leaves its input in build-fuzz/fuzz-artifacts/ (exit 1).  `make fuzz-run` calls
# this; CI runs the corpora on every build (ctest fuzz/*) and this on a schedule.
#
# Needs clang with libFuzzer (-fsanitize=fuzzer): without it the run is skipped, saying
# why, with exit 0 (77 with FUZZ_REQUIRED=1), so that a machine without clang still passes.
set -u
cd "$(dirname "$0")/.."
secs=${1:-${FUZZ_SECONDS:-30}}
[ $# -gt 0 ] && shift
skip() {
    echo "fuzz-run: skipped: $*"
    [ "${FUZZ_REQUIRED:-0}" = 1 ] && exit 77
    exit 0
}

command -v clang >/dev/null 2>&1 || skip "no clang on PATH (libFuzzer comes with clang)"
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
clang -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" >/dev/null 2>&1 ||
    skip "clang cannot link -fsanitize=fuzzer (libFuzzer is not installed)"

make fuzz JOBS="${JOBS:-2}" >"$probe/build.log" 2>&1 || {
    tail -30 "$probe/build.log"
    echo "fuzz-run: building the fuzzers failed"
    exit 1
}

targets=${*:-$(ls tests/fuzz/fuzz_*.c | sed 's|.*/fuzz_||; s|\.c$||')}
mkdir -p build-fuzz/fuzz-artifacts
fail=0
printf '%-14s %12s %10s  %s\n' target execs exec/s result
for t in $targets; do
    bin=build-fuzz/tests/fuzz_$t
    work="$probe/corpus-$t"
    mkdir -p "$work"
    [ -x "$bin" ] || {
        echo "fuzz-run: $bin was not built"
        fail=1
        continue
    }
    "$bin" "$work" "tests/fuzz/corpus/$t" -max_total_time="$secs" -rss_limit_mb=2048 \
        -timeout=25 -print_final_stats=1 -artifact_prefix="build-fuzz/fuzz-artifacts/$t-" \
        >"$probe/$t.log" 2>&1
    rc=$?
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$probe/$t.log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$probe/$t.log" | tail -1)
    if [ "$rc" -eq 0 ]; then
        printf '%-14s %12s %10s  %s\n' "$t" "${runs:-?}" "${rate:-?}" ok
    else
        printf '%-14s %12s %10s  %s\n' "$t" "${runs:-?}" "${rate:-?}" "FAILED (exit $rc)"
        grep -E 'ERROR|SUMMARY|==[0-9]+==|Test unit written' "$probe/$t.log" | head -10
        fail=1
    fi
done
exit $fail
