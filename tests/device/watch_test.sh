#!/bin/sh
# SPDX-License-Identifier: MIT
# watch_test.sh GPUMEM - `gpumem watch` end to end against the fake drivers.
#
# A workload program allocates and frees through the fake libcuda; the fake NVML in the
# watching gpumem sees it through a shared state file.  Each scenario checks exact byte
# figures: the fake charges allocations in 2 MiB granules plus 300 MiB per context, so
# "alloc 256 MiB + alloc 1024 MiB" peaks at (256 + 1024 + 300) MiB = 1656750080 bytes.
# The workload's "seen" step waits until the watcher has read the process list after the
# steps before, and "await:FILE" until the test says go on: no scenario counts on a reading
# or an event coming within a fixed time, however slow the machine (ASan, load).
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
    sh -c "'$WORKLOAD' sleep:150 alloc:256 sleep:400 alloc:1024 seen sleep:500 free sleep:300 exit:3; exit \$?" \
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
    "$WORKLOAD" alloc:256 sleep:400 alloc:1024 seen sleep:500 2>"$work/b.err"
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
#    samples collected so far are still written, exit 130.  The signal comes once the
#    workload's line says that the watch has read the process list at the plateau.
"$GPUMEM" watch --interval 50 --process-interval 100 --output "$work/d.csv" -- \
    "$WORKLOAD" alloc:512 seen info sleep:20000 >"$work/d.out" 2>"$work/d.err" &
gp=$!
i=0
while [ ! -s "$work/d.out" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
kill -INT "$gp"
wait "$gp"
rc=$?
[ "$rc" = 130 ] || fail "SIGINT: exit $rc, expected 130"
[ -s "$work/d.csv" ] || fail "SIGINT: no samples written"
[ "$(csv_peak "$work/d.csv")" = $(((512 + 300) * 1048576)) ] || fail "SIGINT: CSV peak $(csv_peak "$work/d.csv")"
grep -q 'interrupted' "$work/d.err" || fail "SIGINT: report does not say interrupted"

# 4. --pid: attach to a running process until it exits.
"$WORKLOAD" sleep:300 alloc:1024 seen sleep:300 &
wp=$!
"$GPUMEM" watch --pid "$wp" --interval 50 --process-interval 100 --output "$work/e.json" 2>"$work/e.err"
rc=$?
wait "$wp"
[ "$rc" = 0 ] || fail "--pid: exit $rc"
grep -q "\"peak_bytes\":$(((1024 + 300) * 1048576))," "$work/e.json" || fail "--pid: peak"

# 5. A PID namespace: NVML reports PIDs this process cannot see; new GPU processes are
#    attributed to the command, and the report says how.
GPUMEM_FAKE_PID_OFFSET=3000000 "$GPUMEM" watch --interval 50 --process-interval 100 \
    --output "$work/f.json" -- "$WORKLOAD" alloc:256 sleep:400 alloc:1024 seen sleep:500 2>"$work/f.err"
grep -q '"attribution":"new_pid"' "$work/f.json" || fail "PID namespace: attribution is not new_pid"
grep -q "\"peak_bytes\":$PEAK," "$work/f.json" || fail "PID namespace: peak"
grep -q 'not visible here' "$work/f.err" || fail "PID namespace: report does not say so"

# 6. A driver without the v1 process list, writing 32-byte _v3 entries (drivers 535.43-85):
#    the stride probe must still read exact figures.  And NVML memory v1 fallback.
GPUMEM_NVML_LIBRARY=$GM_FAKE_DIR/nov1/libnvidia-ml.so.1 GPUMEM_FAKE_STRIDE_BUG=1 GPUMEM_FAKE_NO_MEMORY_V2=1 \
    "$GPUMEM" watch --interval 50 --process-interval 100 --output "$work/g.json" -- \
    "$WORKLOAD" alloc:256 sleep:400 alloc:1024 seen sleep:500 2>"$work/g.err"
grep -q "\"peak_bytes\":$PEAK," "$work/g.json" || fail "stride probe: peak"
grep -q '"memory_source":"nvml_v1"' "$work/g.json" || fail "memory v1 fallback not reported"

# 6b. --json: JSON Lines on stdout (start, samples, end); the command's stdout goes to
#     stderr so that stdout stays parseable.
"$GPUMEM" watch --json --interval 50 --process-interval 100 -- \
    "$WORKLOAD" alloc:256 info sleep:400 alloc:1024 seen sleep:500 >"$work/l.jsonl" 2>"$work/l.err"
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


# 10. A 6 GiB plateau between two scheduled process readings is the command's peak: device
#     readings count while no other process uses the GPU, and a device-level change asks for
#     a process reading at once (not 2.29 GiB, the last process reading).  The scheduled
#     readings are a minute apart, so that every other one is asked for by a change however
#     slow the machine (where each round of readings took longer than the process interval,
#     every reading was a scheduled one), and the plateau holds until one was read.
"$GPUMEM" watch --interval 50 --process-interval 60000 --output "$work/m.json" -- \
    "$WORKLOAD" sleep:200 alloc:2048 sleep:400 alloc:4096 seen:1 sleep:300 free sleep:200 2>"$work/m.err"
grep -q "\"peak_bytes\":$(((2048 + 4096 + 300) * 1048576))," "$work/m.json" || fail "plateau: JSON peak is not 6444 MiB"
grep -q 'peak of the command: 6.29 GiB' "$work/m.err" || fail "plateau: report peak is not 6.29 GiB"
grep -q 'at once after a device-level change' "$work/m.err" || fail "plateau: no process reading after the change"

# 11. A device that rose more than the command's readings explain is reported: another
#     process starts on the GPU meanwhile, which also ends the device credits.  It starts
#     once the watch has seen the command's allocation (so after the watch's baseline), and
#     the command ends once the watch has seen the other's.
"$GPUMEM" watch --interval 50 --output "$work/n.json" -- \
    "$WORKLOAD" alloc:256 seen info "await:$work/n.other" sleep:100 >"$work/n.out" 2>"$work/n.err" &
gp=$!
i=0
while ! grep -q '^free=' "$work/n.out" 2>/dev/null && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
"$WORKLOAD" alloc:2048 seen info sleep:1500 >"$work/n.other" &
other=$!
wait "$gp"
wait "$other"
grep -q 'note: cuda:0 rose .* more than the command.*other processes used the device too' "$work/n.err" ||
    fail "unexplained device peak not reported"
grep -q '"other_processes_seen":true' "$work/n.json" || fail "other process not recorded"
grep -q "\"peak_bytes\":$(((256 + 300) * 1048576))," "$work/n.json" || fail "another process counted as the command's"

# 12. No cap on the processes NVML lists (before: 128 per poll): 150 processes of 10 MiB,
#     each holding its memory until all have allocated (each says its pid once it has) and a
#     process list has been read since.
GPUMEM_FAKE_CONTEXT_BYTES=8MiB GPUMEM_FAKE_STATE="$work/state150" "$GPUMEM" watch \
    --output "$work/o.json" -- sh -c ": >'$work/o.pids'; for i in \$(seq 150); do '$WORKLOAD' alloc:2 pid 'await:$work/o.go' seen >>'$work/o.pids' & done
        i=0
        while [ \$(wc -l <'$work/o.pids') -lt 150 ] && [ \$i -lt 1200 ]; do sleep 0.1; i=\$((i + 1)); done
        echo go >'$work/o.go'; wait" \
    2>"$work/o.err"
[ "$(grep -o '"pid":[0-9]*,"device":"cuda:0","name"' "$work/o.json" | sort -u | wc -l)" = 150 ] ||
    fail "150 processes: $(grep -o '"pid":[0-9]*,"device":"cuda:0","name"' "$work/o.json" | sort -u | wc -l) in the process table"
grep -q "\"peak_bytes\":$((150 * 10 * 1048576))," "$work/o.json" || fail "150 processes: peak is not 1500 MiB"

# 13. A child that still holds GPU memory when the command exits is reported.  The command
#     exits once the watch has seen the child's allocation; the child, once the watch ended.
"$GPUMEM" watch --output "$work/p.json" -- sh -c "'$WORKLOAD' alloc:256 seen pid 'await:$work/p.done' >'$work/p.pid' &
    i=0; while [ ! -s '$work/p.pid' ] && [ \$i -lt 1200 ]; do sleep 0.05; i=\$((i + 1)); done; exit 0" 2>"$work/p.err"
grep -q 'warning: 1 process of the command still holds GPU memory after it exited' "$work/p.err" || fail "leftover child not reported"
grep -q '"n_after_exit":1,' "$work/p.json" || fail "leftover child not in the JSON"
grep -q '"after_exit":true' "$work/p.json" || fail "leftover process not marked"
echo done >"$work/p.done"
# the child ends before the next scenario (gone, or a zombie that init has not reaped yet)
child=$(sed -n 's/^pid=//p' "$work/p.pid")
i=0
while [ -n "$child" ] && [ $i -lt 1200 ]; do
    state=$(cut -d' ' -f3 "/proc/$child/stat" 2>/dev/null || echo gone)
    [ "$state" = gone ] || [ "$state" = Z ] && break
    sleep 0.05
    i=$((i + 1))
done

# 14. Samples beyond --max-samples are reported in the summary, the CSV and the JSON.
# (three "seen": six process readings, so more than 5 samples however slow the machine)
"$GPUMEM" watch --interval 50 --max-samples 5 --output "$work/q.csv" -- "$WORKLOAD" alloc:64 seen seen seen sleep:400 2>"$work/q.err"
tail -1 "$work/q.csv" | grep -q '^[0-9]*,,,,,samples_dropped$' || fail "CSV does not say samples were dropped"
grep -q 'samples: 5 stored; [0-9]* later ones' "$work/q.err" || fail "summary does not say samples were dropped"
"$GPUMEM" watch --interval 50 --max-samples 5 --output "$work/q.json" -- "$WORKLOAD" alloc:64 seen seen seen sleep:400 2>/dev/null
grep -q '"samples_dropped":true,"n_samples_stored":5,"n_samples_dropped":[1-9]' "$work/q.json" || fail "JSON drop counts"

# 15. Two runs writing the same --output: the later one to finish keeps its samples beside
#     the file (before: "exists: refusing", exit 73, samples deleted).  The first run's
#     command ends once the second run has ended and its own watch has read it since.
"$GPUMEM" watch --output "$work/same.csv" -- "$WORKLOAD" alloc:64 "await:$work/r2.done" seen 2>"$work/r1.err" &
r1=$!
"$GPUMEM" watch --output "$work/same.csv" -- "$WORKLOAD" alloc:64 sleep:200 2>"$work/r2.err"
rc2=$?
echo done >"$work/r2.done"
wait "$r1"
rc1=$?
[ "$rc1" = 0 ] && [ "$rc2" = 0 ] || fail "same output: exit $rc1 and $rc2, expected 0 and 0"
grep -q "wrote '$work/same-1.csv' instead" "$work/r1.err" || fail "same output: the later run did not say where"
if grep -q 'refusing' "$work/r1.err"; then fail "same output: the later run says it refuses"; fi
[ "$(grep -c ',pid_tree$' "$work/same-1.csv")" -gt 0 ] || fail "same output: samples lost"

# 16. The command does not inherit the open temporary output file.
"$GPUMEM" watch --output "$work/s.csv" -- sh -c "ls -l /proc/\$\$/fd/ > '$work/fds.txt'" 2>/dev/null
if grep -q 'gpumem-tmp' "$work/fds.txt"; then fail "the command inherited the temporary output file"; fi

# 17. A signal death is named, and is the exit status.
"$GPUMEM" watch --output "$work/t.json" -- sh -c 'kill -SEGV $$' 2>"$work/t.err"
rc=$?
[ "$rc" = 139 ] || fail "SIGSEGV: exit $rc, expected 139"
grep -q 'was killed by SIGSEGV (status 139)' "$work/t.err" || fail "SIGSEGV not named"
grep -q '"signal":"SIGSEGV"' "$work/t.json" || fail "SIGSEGV not in the JSON"

# 18. The second interrupt kills the command's whole tree, also a child that ignores the
#     signal (before: only the shell was killed, the sleep kept running).  The second comes
#     once gpumem says it waits for the command after the first (two signals sent before it
#     handled the first would be one).
"$GPUMEM" watch -- sh -c "trap '' TERM; sleep 60 & echo \$! > '$work/sleep.pid'; wait; wait" 2>"$work/u.err" &
gp=$!
i=0
while [ ! -s "$work/sleep.pid" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
kill -TERM "$gp"
i=0
while ! grep -q 'interrupt again to kill' "$work/u.err" && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
kill -TERM "$gp"
wait "$gp"
rc=$?
[ "$rc" = 137 ] || fail "second interrupt: exit $rc, expected 137"
sp=$(cat "$work/sleep.pid")
# killed means gone or a zombie that init has not reaped yet (the SIGKILL is sent; wait
# for it to take effect, well before the sleep's own 60 s)
i=0
while [ $i -lt 400 ]; do
    state=$(cut -d' ' -f3 "/proc/$sp/stat" 2>/dev/null || echo gone)
    [ "$state" = gone ] || [ "$state" = Z ] && break
    sleep 0.05
    i=$((i + 1))
done
if [ "$state" != gone ] && [ "$state" != Z ]; then
    fail "second interrupt: the child sleep $sp is still running ($state)"
    kill -9 "$sp" 2>/dev/null
fi

# 19. --pid of a zombie is refused at once; a watched process that becomes a zombie ends
#     the watch (before: it ran until the parent reaped it).
sh -c "sleep 0.1 & echo \$! > '$work/z.pid'; exec sleep 60" &
zp=$!
# until the child is a zombie (its parent, now `sleep 60`, never reaps it)
i=0
while [ $i -lt 1200 ]; do
    state=$(cut -d' ' -f3 "/proc/$(cat "$work/z.pid" 2>/dev/null)/stat" 2>/dev/null)
    [ "$state" = Z ] && break
    sleep 0.05
    i=$((i + 1))
done
"$GPUMEM" watch --pid "$(cat "$work/z.pid")" 2>"$work/v.err"
rc=$?
[ "$rc" = 64 ] || fail "zombie --pid: exit $rc, expected 64"
grep -q 'has exited (a zombie' "$work/v.err" || fail "zombie --pid: message"
# (the parent lives 60 s: a watch that waited for the reaping would last that long; one
# that ends with the process takes its 2 s and gpumem's start, 30 s at most on a slow machine)
sh -c "sleep 2 & echo \$! > '$work/z2.pid'; exec sleep 60" &
zp2=$!
i=0
while [ ! -s "$work/z2.pid" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i + 1)); done
s0=$(date +%s)
"$GPUMEM" watch --pid "$(cat "$work/z2.pid")" 2>/dev/null
[ $(($(date +%s) - s0)) -le 30 ] || fail "zombie --pid: the watch did not end when the process exited"
kill "$zp" "$zp2" 2>/dev/null

# 20. A process name with a terminal escape is shown escaped.
ln -s "$WORKLOAD" "$work/$(printf 'gm\033[31mx')"
"$GPUMEM" watch -- "$work/$(printf 'gm\033[31mx')" alloc:64 seen sleep:600 2>"$work/w.err"
if LC_ALL=C grep -q "$(printf '\033')" "$work/w.err"; then fail "a raw escape reached the report"; fi
grep -q 'gm\\x1b\[31mx' "$work/w.err" || fail "escaped process name missing"

# 21. --json read by a reader that goes away: SIGPIPE does not kill gpumem; the command is
#     interrupted, the samples are written to --output, exit 74 naming EPIPE.  The reader
#     quits at the first process line (not after a byte count: the start line alone is longer
#     than 100 bytes, so on a slow machine `head -c 100` left before any process reading).
#     (The command's sleep is this script's own, so that it tells its command from another
#     run's.)
long=sleep:$((20000 + $$ % 10000))
( "$GPUMEM" watch --json -i 20 --process-interval 20 -o "$work/p.csv" -- \
    "$WORKLOAD" alloc:64 "$long" 2>"$work/p.err"; echo $? >"$work/p.rc" ) |
    sed -n '/"type":"process"/q' >/dev/null
[ "$(cat "$work/p.rc")" = 74 ] || fail "closed --json reader: exit $(cat "$work/p.rc"), expected 74"
grep -q 'writing to standard output failed: Broken pipe (EPIPE)' "$work/p.err" ||
    fail "closed --json reader: no EPIPE message"
grep -q ',pid_tree$' "$work/p.csv" 2>/dev/null || fail "closed --json reader: no samples in --output"
if ls "$work"/.gpumem-tmp-* >/dev/null 2>&1; then fail "closed --json reader: a temporary file left"; fi
if pgrep -f "$long\$" >/dev/null; then
    fail "closed --json reader: the command still runs"
    pkill -KILL -f "$long\$"
fi

# Prometheus: --prometheus keeps a file in the text exposition format, rewritten while the
# command runs (renamed into place whole) and at the end: DCGM exporter's FB_USED/FREE in
# MiB with the gpu/UUID/Hostname labels, the command's exact peak, the job's labels from
# the launcher's environment.  The checker itself must refuse broken files.
check=$(dirname "$0")/prom_check.py
if command -v python3 >/dev/null 2>&1; then
    printf 'a{b="x} 1\n' >"$work/bad1.prom"
    printf '# TYPE a gauge\na 1\nb 2\na 3\n' >"$work/bad2.prom"
    printf 'a{b="1",b="2"} 1\n' >"$work/bad3.prom"
    printf '# TYPE a gauge\na one\n' >"$work/bad4.prom"
    for b in 1 2 3 4; do
        if python3 "$check" "$work/bad$b.prom" >/dev/null; then fail "prom_check.py accepts bad$b.prom"; fi
    done
    SLURM_JOB_ID=4242 SLURM_PROCID=3 SLURMD_NODENAME='node"7' "$GPUMEM" watch --interval 50 \
        --process-interval 100 --prometheus "$work/m.prom" -- \
        "$WORKLOAD" alloc:256 sleep:400 alloc:1024 seen "await:$work/m.go" 2>"$work/prom.err" &
    wpid=$!
    # while it runs: both allocations held (the file is rewritten each second: wait for it,
    # at most about half a minute, however loaded the machine; the command then ends)
    tries=0
    until [ -f "$work/m.prom" ] && python3 "$check" "$work/m.prom" DCGM_FI_DEV_FB_USED=1580 \
        --label job_id=4242 --label rank=3 --label 'Hostname=node"7' >"$work/m1.out"; do
        tries=$((tries + 1))
        if [ $tries -ge 300 ]; then
            fail "metrics while running: $(cat "$work/m1.out" 2>/dev/null || echo no file)"
            break
        fi
        sleep 0.1
    done
    echo go >"$work/m.go"
    wait $wpid || fail "--prometheus run exit $?"
    python3 "$check" "$work/m.prom" gpumem_command_memory_peak_bytes=$PEAK \
        gpumem_device_memory_used_peak_bytes=$PEAK DCGM_FI_DEV_FB_USED=0 --label job_id=4242 \
        --label rank=3 >"$work/m2.out" || fail "metrics at the end: $(cat "$work/m2.out")"
    grep -q '^DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-[0-9a-f-]*",device="nvidia0",' "$work/m.prom" ||
        fail "DCGM_FI_DEV_FB_USED lacks DCGM exporter's labels"
    if grep -q '^gpumem_process_memory_bytes' "$work/m.prom"; then fail "an exited process is still in the metrics"; fi
    if ls "$work"/.gpumem-tmp-* >/dev/null 2>&1; then fail "--prometheus: a temporary file left"; fi

    # --listen: the same metrics served at /metrics while the command runs (port 0: any,
    # said on stderr), 404 elsewhere
    RANK=5 "$GPUMEM" watch --interval 50 --process-interval 100 --listen 127.0.0.1:0 -- \
        "$WORKLOAD" alloc:256 seen "await:$work/l.go" 2>"$work/listen.err" &
    wpid=$!
    # the port, said on stderr, then the allocation seen (at most about half a minute each,
    # however loaded the machine; the command then ends)
    tries=0
    port=
    while [ -z "$port" ] && [ $tries -lt 300 ]; do
        sleep 0.1
        tries=$((tries + 1))
        port=$(sed -n 's|.*serving the metrics at http://127.0.0.1:\([0-9]*\)/metrics$|\1|p' "$work/listen.err")
    done
    if [ -z "$port" ]; then
        fail "--listen does not say where it serves"
    else
        python3 - "$port" "$work/l.prom" >"$work/l.out" 2>&1 <<'PY' || fail "--listen: $(cat "$work/l.out")"
import sys, urllib.error, urllib.request
base = "http://127.0.0.1:%s" % sys.argv[1]
r = urllib.request.urlopen(base + "/metrics", timeout=5)
assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4"), r.headers["Content-Type"]
open(sys.argv[2], "wb").write(r.read())
try:
    urllib.request.urlopen(base + "/other", timeout=5)
    sys.exit("/other answered")
except urllib.error.HTTPError as e:
    assert e.code == 404, e.code
PY
        # scraped until the allocation shows
        tries=0
        until python3 "$check" "$work/l.prom" DCGM_FI_DEV_FB_USED=556 --label rank=5 >"$work/l2.out"; do
            tries=$((tries + 1))
            if [ $tries -ge 300 ]; then
                fail "--listen metrics: $(cat "$work/l2.out")"
                break
            fi
            sleep 0.1
            python3 -c 'import sys, urllib.request; open(sys.argv[2], "wb").write(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read())' "$port" "$work/l.prom"
        done
    fi
    echo go >"$work/l.go"
    wait $wpid || fail "--listen run exit $?"
fi

if [ "$fails" -ne 0 ]; then
    for f in "$work"/*.err; do
        echo "--- $f"
        head -30 "$f"
    done
    exit 1
fi
echo "watch: all scenarios passed"
