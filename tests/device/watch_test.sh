#!/bin/sh
# SPDX-License-Identifier: MIT
# watch_test.sh GPUMEM - `gpumem watch` end to end against the fake drivers.
#
# A workload program allocates and frees through the fake libcuda; the fake NVML in the
# watching gpumem sees it through a shared state file.  Each scenario checks exact byte
# figures: the fake charges allocations in 2 MiB granules plus 300 MiB per context, so
# "alloc 256 MiB + alloc 1024 MiB" peaks at (256 + 1024 + 300) MiB = 1656750080 bytes.
# Environment (set by ctest): GM_FAKE_DIR, GPUMEM_CUDA_LIBRARY, GPUMEM_NVML_LIBRARY.
set -u
GPUMEM=$1
WORKLOAD=$GM_FAKE_DIR/gm_workload
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GPUMEM_FAKE_STATE="$work/state"
PEAK=1656750080
fails=0

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# The largest used_bytes of the process rows of a CSV written by --output.
csv_peak() {
    awk -F, 'NR > 1 && $3 != "" && $4 > m { m = $4 } END { print m + 0 }' "$1"
}

# 1. Command with a child (sh -> workload): exit status passed through, exact peak in the
#    CSV and in the report, attribution by process tree.
"$GPUMEM" watch --interval 50 --process-interval 100 --output "$work/a.csv" -- \
    sh -c "'$WORKLOAD' sleep:150 alloc:256 sleep:400 alloc:1024 sleep:500 free sleep:300 exit:3; exit \$?" \
    2>"$work/a.err"
rc=$?
[ "$rc" = 3 ] || fail "exit status $rc, expected the command's 3"
[ "$(csv_peak "$work/a.csv")" = "$PEAK" ] || fail "CSV peak $(csv_peak "$work/a.csv"), expected $PEAK"
grep -q 'exited with status 3' "$work/a.err" || fail "report does not give the exit status"
grep -q 'peak of the command: 1.54 GiB' "$work/a.err" || fail "report peak is not 1.54 GiB"
grep -q 'NVML PIDs of the command and its children' "$work/a.err" || fail "attribution not by process tree"
grep -q 'gm_workload' "$work/a.err" || fail "process name missing from the report"
grep -q '^time_ms,device,pid,used_bytes,free_bytes,attribution$' "$work/a.csv" || fail "CSV header"
grep -q ',pid_tree$' "$work/a.csv" || fail "no process rows attributed in the CSV"
if grep -q 'legacy symbol' "$work/a.err"; then fail "a legacy (32-bit ABI) symbol was called"; fi

# 2. JSON output, and the output file is refused when it exists (before the command runs).
"$GPUMEM" watch --interval 50 --process-interval 100 --output "$work/b.json" -- \
    "$WORKLOAD" alloc:256 sleep:400 alloc:1024 sleep:500 2>"$work/b.err"
rc=$?
[ "$rc" = 0 ] || fail "JSON run exit $rc"
grep -q '"schema":"gpumem.watch/1"' "$work/b.json" || fail "JSON schema missing"
grep -q "\"peak_bytes\":$PEAK," "$work/b.json" || fail "JSON peak_bytes is not $PEAK"
grep -q '"attribution":"pid_tree"' "$work/b.json" || fail "JSON attribution"
grep -q '"memory_source":"nvml_v2"' "$work/b.json" || fail "JSON memory source is not NVML v2"
"$GPUMEM" watch --output "$work/b.json" -- sh -c "touch '$work/ran'" 2>"$work/c.err"
rc=$?
[ "$rc" = 73 ] || fail "overwrite: exit $rc, expected 73"
[ ! -e "$work/ran" ] || fail "overwrite: the command ran although the output was refused"

# 3. Ctrl-C (SIGINT sent to gpumem by another process): forwarded to the command, the
#    samples collected so far are still written, exit 130.
"$GPUMEM" watch --interval 50 --process-interval 100 --output "$work/d.csv" -- \
    "$WORKLOAD" alloc:512 info sleep:20000 >"$work/d.out" 2>"$work/d.err" &
gp=$!
i=0
while [ ! -s "$work/d.out" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i + 1)); done
sleep 0.5 # a few process readings at the plateau
kill -INT "$gp"
wait "$gp"
rc=$?
[ "$rc" = 130 ] || fail "SIGINT: exit $rc, expected 130"
[ -s "$work/d.csv" ] || fail "SIGINT: no samples written"
[ "$(csv_peak "$work/d.csv")" = $(((512 + 300) * 1048576)) ] || fail "SIGINT: CSV peak $(csv_peak "$work/d.csv")"
grep -q 'interrupted' "$work/d.err" || fail "SIGINT: report does not say interrupted"

# 4. --pid: attach to a running process until it exits.
"$WORKLOAD" sleep:300 alloc:1024 sleep:1500 &
wp=$!
"$GPUMEM" watch --pid "$wp" --interval 50 --process-interval 100 --output "$work/e.json" 2>"$work/e.err"
rc=$?
wait "$wp"
[ "$rc" = 0 ] || fail "--pid: exit $rc"
grep -q "\"peak_bytes\":$(((1024 + 300) * 1048576))," "$work/e.json" || fail "--pid: peak"

# 5. A PID namespace: NVML reports PIDs this process cannot see; new GPU processes are
#    attributed to the command, and the report says how.
GPUMEM_FAKE_PID_OFFSET=3000000 "$GPUMEM" watch --interval 50 --process-interval 100 \
    --output "$work/f.json" -- "$WORKLOAD" alloc:256 sleep:400 alloc:1024 sleep:500 2>"$work/f.err"
grep -q '"attribution":"new_pid"' "$work/f.json" || fail "PID namespace: attribution is not new_pid"
grep -q "\"peak_bytes\":$PEAK," "$work/f.json" || fail "PID namespace: peak"
grep -q 'not visible here' "$work/f.err" || fail "PID namespace: report does not say so"

# 6. A driver without the v1 process list, writing 32-byte _v3 entries (drivers 535.43-85):
#    the stride probe must still read exact figures.  And NVML memory v1 fallback.
GPUMEM_NVML_LIBRARY=$GM_FAKE_DIR/nov1/libnvidia-ml.so.1 GPUMEM_FAKE_STRIDE_BUG=1 GPUMEM_FAKE_NO_MEMORY_V2=1 \
    "$GPUMEM" watch --interval 50 --process-interval 100 --output "$work/g.json" -- \
    "$WORKLOAD" alloc:256 sleep:400 alloc:1024 sleep:500 2>"$work/g.err"
grep -q "\"peak_bytes\":$PEAK," "$work/g.json" || fail "stride probe: peak"
grep -q '"memory_source":"nvml_v1"' "$work/g.json" || fail "memory v1 fallback not reported"

# 6b. --json: JSON Lines on stdout (start, samples, end); the command's stdout goes to
#     stderr so that stdout stays parseable.
"$GPUMEM" watch --json --interval 50 --process-interval 100 -- \
    "$WORKLOAD" alloc:256 info sleep:400 alloc:1024 sleep:500 >"$work/l.jsonl" 2>"$work/l.err"
rc=$?
[ "$rc" = 0 ] || fail "--json: exit $rc"
head -1 "$work/l.jsonl" | grep -q '"schema":"gpumem.watch.stream/1".*"type":"start"' || fail "--json: no start line"
tail -1 "$work/l.jsonl" | grep -q "\"type\":\"end\".*\"peak_bytes\":$PEAK," || fail "--json: end line peak"
grep -q '"type":"process".*"attribution":"pid_tree"' "$work/l.jsonl" || fail "--json: no process lines"
if grep -v '^{.*}$' "$work/l.jsonl" | grep -q .; then fail "--json: stdout has a line that is not a JSON object"; fi
grep -q '^free=' "$work/l.err" || fail "--json: the command's stdout did not go to stderr"

# 7. No driver: exit 2, one sentence, and the command is not run.
GPUMEM_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 GPUMEM_CUDA_LIBRARY=/nonexistent/libcuda.so.1 \
    "$GPUMEM" watch -- sh -c "touch '$work/ran2'" 2>"$work/h.err"
rc=$?
[ "$rc" = 2 ] || fail "no driver: exit $rc, expected 2"
[ ! -e "$work/ran2" ] || fail "no driver: the command ran"
grep -q 'no NVIDIA driver' "$work/h.err" || fail "no driver: message"

# 7b. CUDA works but NVML cannot be loaded: nothing to watch, exit 2, the command does not run.
GPUMEM_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1 "$GPUMEM" watch -- sh -c "touch '$work/ran3'" 2>"$work/h2.err"
rc=$?
[ "$rc" = 2 ] || fail "no NVML: exit $rc, expected 2"
[ ! -e "$work/ran3" ] || fail "no NVML: the command ran"

# 8. A command that cannot be run: 127, like a shell.
"$GPUMEM" watch -- "$work/does-not-exist" 2>"$work/i.err"
rc=$?
[ "$rc" = 127 ] || fail "missing command: exit $rc, expected 127"

# 9. A driver older than CUDA 11 (no cuDeviceGetUuid_v2, no cuDevicePrimaryCtxRelease_v2):
#    the fallback names give the same UUID (so CUDA and NVML still join) and a clean exit.
GPUMEM_CUDA_LIBRARY=$GM_FAKE_DIR/pre11/libcuda.so.1 "$GPUMEM" environment --json >"$work/j.json" 2>"$work/j.err"
rc=$?
[ "$rc" = 0 ] || fail "pre-11 driver: environment exit $rc"
grep -q '"nvml_index": 0,' "$work/j.json" || fail "pre-11 driver: CUDA device not joined to NVML by UUID"
GPUMEM_CUDA_LIBRARY=$GM_FAKE_DIR/pre11/libcuda.so.1 "$WORKLOAD" alloc:64 info >"$work/k.out" 2>"$work/k.err"
rc=$?
[ "$rc" = 0 ] || fail "pre-11 driver: workload exit $rc"
if nm -D "$GM_FAKE_DIR/pre11/libcuda.so.1" 2>/dev/null | grep -q 'cuDevicePrimaryCtxRelease_v2'; then
    fail "pre-11 fake exports cuDevicePrimaryCtxRelease_v2"
fi

if [ "$fails" -ne 0 ]; then
    for f in "$work"/*.err; do
        echo "--- $f"
        head -30 "$f"
    done
    exit 1
fi
echo "watch: all scenarios passed"
