#!/bin/sh
# SPDX-License-Identifier: MIT
# gpu-check.sh - check gpumem's device layer against a real NVIDIA GPU and driver.
#
# Run from anywhere on a machine with an NVIDIA driver (nvidia-smi on PATH):
#     sh scripts/gpu-check.sh [BUILD_DIR]
# It
#   1. builds gpumem (BUILD_DIR, default build-gpucheck) and the workload program;
#   2. runs `gpumem environment --json` and compares driver version, name, UUID, PCI bus id,
#      compute capability and memory (total, reserved, used) with
#      `nvidia-smi --query-gpu=... --format=csv`;
#   3. runs `gpumem watch` on a program that allocates known amounts through the CUDA
#      driver API (1 GiB, then 4 GiB more) and runs a PTX kernel (.version 7.0 / sm_70)
#      checked on the host; it compares the peak with nvidia-smi's per-process figure taken
#      at the same plateau, and cuMemGetInfo's delta with the 4 GiB asked for (the delta
#      also shows the driver's allocation granularity);
#   3b. runs `gpumem measure --train` (the measure kernels, PTX made by nvcc, checked against
#      a CPU computation of the same network; result in GPU_CHECK_OUT/measure.json);
#   3d. gpumem account on a small PyTorch job that uses NCCL (world size 1), cuBLAS and a CUDA
#      graph (where a Python with PyTorch and CUDA is found): its equation at the peak printed
#      next to nvidia-smi's figure for the process and torch.cuda.max_memory_reserved(), and
#      the estimator's context, workspace and NCCL components held against it (gpumem
#      calibrate --account); with GPU_CHECK_USE_FAKES=1, the test suite's fake job instead;
#   3c. where a Python with PyTorch and CUDA is found (GPU_CHECK_PYTHON, else python3): the
#      Python package on real PyTorch: a tiny model trained under gpumem.torch (one Measure
#      series: model_load, inputs, forward, backward, optimizer_step, three steps) inside
#      gpumem.torch.record(), then the series checked (every phase ok, the four counters,
#      the weights exactly in model_load) and the recorded snapshot read back by
#      `gpumem snapshot categories` and gpumem.Snapshot (the phase marks in it); skipped,
#      and said so, without PyTorch;
#   4. prints a table of agreement and leaves every raw output in GPU_CHECK_OUT
#      (default ./gpu-check-out).
# Exit status: 0 all agree, 1 some check disagrees or failed, 2 no GPU/driver here.
# Dependencies: a C compiler, cmake, pkg-config, jansson and zlib development files
# (cmocka is optional: without it the test suite is not built, only what this needs).
# Uses device 0 (CUDA numbering) unless GPU_CHECK_DEVICE=N is set; the allocation sizes are
# GPU_CHECK_ALLOC_A / GPU_CHECK_ALLOC_B (MiB, default 1024 and 4096), the hold time
# GPU_CHECK_HOLD_MS (1500).  Nothing is installed.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
BUILD=${1:-build-gpucheck}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
OUT=${GPU_CHECK_OUT:-$ROOT/gpu-check-out}
DEV=${GPU_CHECK_DEVICE:-0}
A_MIB=${GPU_CHECK_ALLOC_A:-1024} # first allocation
B_MIB=${GPU_CHECK_ALLOC_B:-4096} # second allocation
HOLD_MS=${GPU_CHECK_HOLD_MS:-1500} # time at the first level; the peak is held twice as long
mkdir -p "$OUT" || exit 1
# The real driver, never the test fakes (GPU_CHECK_USE_FAKES=1 keeps them: only for
# testing this script itself, with a stand-in nvidia-smi on PATH).
[ "${GPU_CHECK_USE_FAKES:-0}" = 1 ] || unset GPUMEM_CUDA_LIBRARY GPUMEM_NVML_LIBRARY GPUMEM_FAKE_STATE

rows="$OUT/table.txt"
: >"$rows"
bad=0
row() { # check, gpumem, reference, agree(yes/no/info)
    printf '%-40s %-26s %-26s %s\n' "$1" "$2" "$3" "$4" >>"$rows"
    [ "$4" = no ] && bad=$((bad + 1))
    return 0
}
say() { echo "gpu-check: $*"; }
mib() { # bytes -> MiB with one decimal
    awk -v b="$1" 'BEGIN { if (b == "" || b == "null") print "unknown"; else printf "%.1f", b / 1048576 }'
}
near() { # |a - b| <= tol (numbers; "unknown" never agrees)
    awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "unknown" && b != "" && d <= t) }'
}
same() { if [ "$1" = "$2" ]; then echo yes; else echo no; fi; }

if ! command -v nvidia-smi >/dev/null 2>&1; then
    say "nvidia-smi not found: this is not a machine with an NVIDIA driver; nothing to check"
    exit 2
fi
nvidia-smi -L >"$OUT/nvidia-smi-L.txt" 2>&1 || {
    say "nvidia-smi fails (see $OUT/nvidia-smi-L.txt): no usable GPU"
    exit 2
}

# A Python with PyTorch and a GPU for step 3c: the package is built for that interpreter.
TORCH_PY=""
for py in ${GPU_CHECK_PYTHON:-} python3 /usr/bin/python3; do
    if command -v "$py" >/dev/null 2>&1 &&
        "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
        TORCH_PY=$(command -v "$py")
        break
    fi
done

# ---- 1. build (GPU_CHECK_NO_BUILD=1: use what BUILD_DIR has) ------------------------------
if [ "${GPU_CHECK_NO_BUILD:-0}" != 1 ]; then
    for tool in cc cmake pkg-config; do
        command -v "$tool" >/dev/null 2>&1 || { say "missing '$tool' (install build-essential cmake pkg-config)"; exit 1; }
    done
    pkg-config --exists jansson || { say "missing jansson development files (libjansson-dev)"; exit 1; }
    tests=OFF
    pkg-config --exists cmocka && tests=ON
    say "building in $BUILD (tests: $tests)"
    if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGM_BUILD_TESTS=$tests \
               ${TORCH_PY:+-DPython3_EXECUTABLE="$TORCH_PY"} &&
           cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)"; } >"$OUT/build.log" 2>&1; then
        say "build failed, see $OUT/build.log"
        tail -20 "$OUT/build.log"
        exit 1
    fi
fi
GPUMEM=$BUILD/gpumem
WORKLOAD=$BUILD/tests/fake/gm_workload
[ -x "$GPUMEM" ] || { say "no $GPUMEM"; exit 1; }
if [ ! -x "$WORKLOAD" ]; then
    WORKLOAD=$BUILD/gm_workload
    # shellcheck disable=SC2046
    cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Iinclude \
        tests/device/workload.c "$BUILD/libgpumem.a" $(pkg-config --libs jansson) -lz -ldl -lm \
        -o "$WORKLOAD" >>"$OUT/build.log" 2>&1 || { say "building the workload failed, see $OUT/build.log"; exit 1; }
fi

# ---- 2. environment vs nvidia-smi ---------------------------------------------------------
"$GPUMEM" environment --json --device "cuda:$DEV" >"$OUT/environment.json" 2>"$OUT/environment.err"
rc=$?
"$GPUMEM" environment >"$OUT/environment.txt" 2>&1
if [ "$rc" -ne 0 ]; then
    say "gpumem environment failed with exit $rc:"
    cat "$OUT/environment.err"
    row "gpumem environment exit status" "$rc" "0" no
    cat "$rows"
    exit 1
fi

# One "key<TAB>value" line per scalar of the device entry (the JSON is pretty-printed, one
# member per line; only the first device entry is read: --device selects it).
json_get() {
    awk -v want="$1" '
        /"devices": \[/ { indev = 1 }
        /"host": \{/ { indev = 0 }
        {
            line = $0
            if (line !~ /^[ ]*"[a-z_]+": /) next
            key = line; sub(/^[ ]*"/, "", key); sub(/".*/, "", key)
            val = line; sub(/^[ ]*"[a-z_]+": /, "", val); sub(/,$/, "", val); gsub(/"/, "", val)
            if (key == want && (indev || key == "version") && !(key in seen)) { seen[key] = 1; print val }
        }' "$OUT/environment.json"
}
g_uuid=$(json_get uuid)
g_name=$(json_get name)
g_pci=$(json_get pci_bus_id)
g_cc=$(json_get compute_capability)
g_total=$(json_get total_bytes)
g_used=$(json_get used_bytes)
g_reserved=$(json_get reserved_bytes)
g_driver=$(json_get version)
g_source=$(json_get source)

# One query with the fields every nvidia-smi has, then the newer fields one by one (an
# old nvidia-smi rejects the whole query when one field is unknown).
nvidia-smi --query-gpu=uuid,name,pci.bus_id,driver_version,memory.total,memory.used,memory.free \
    --format=csv,noheader,nounits >"$OUT/nvidia-smi.csv" 2>"$OUT/nvidia-smi.err"
line=$(grep -F "$g_uuid" "$OUT/nvidia-smi.csv" | head -1)
field() { # n-th comma-separated field of the nvidia-smi line, trimmed
    echo "$line" | awk -F', *' -v n="$1" '{ gsub(/^ +| +$/, "", $n); print $n }'
}
smi_one() { # one --query-gpu field of our device, empty when this nvidia-smi lacks it
    v=$(nvidia-smi --id="$g_uuid" --query-gpu="$1" --format=csv,noheader,nounits 2>/dev/null | head -1)
    case $v in *[Nn]ot*|*[Ee]rror*|*nvalid*|"") echo "" ;; *) echo "$v" | sed 's/^ *//; s/ *$//' ;; esac
}
if [ -z "$line" ]; then
    row "uuid found by nvidia-smi" "$g_uuid" "(not listed)" no
else
    s_name=$(field 2)
    s_pci=$(field 3)
    s_driver=$(field 4)
    s_total=$(field 5)
    s_used=$(field 6)
    s_cc=$(smi_one compute_cap)
    s_reserved=$(smi_one memory.reserved)
    row "driver version" "$g_driver" "$s_driver" "$(same "$g_driver" "$s_driver")"
    row "cuda:$DEV name" "$g_name" "$s_name" "$(same "$g_name" "$s_name")"
    row "cuda:$DEV uuid (CUDA joined to NVML)" "$g_uuid" "$(field 1)" "$(same "$g_uuid" "$(field 1)")"
    row "cuda:$DEV pci bus id" "$g_pci" "$s_pci" "$(same "$g_pci" "$s_pci")"
    if [ -n "$s_cc" ]; then
        row "cuda:$DEV compute capability" "$g_cc" "$s_cc" "$(same "$g_cc" "$s_cc")"
    else
        row "cuda:$DEV compute capability" "$g_cc" "(nvidia-smi too old)" info
    fi
    row "cuda:$DEV memory source" "$g_source" "nvml_v2 expected" "$(same "$g_source" nvml_v2)"
    t=$(mib "$g_total")
    if near "$t" "$s_total" 1; then a=yes; else a=no; fi
    row "cuda:$DEV total (MiB)" "$t" "$s_total" "$a"
    if [ -n "$s_reserved" ]; then
        r=$(mib "$g_reserved")
        if near "$r" "$s_reserved" 1; then a=yes; else a=no; fi
        row "cuda:$DEV reserved (MiB)" "$r" "$s_reserved" "$a"
    fi
    u=$(mib "$g_used")
    # Other processes may change the figure between the two readings: 64 MiB of slack.
    if near "$u" "$s_used" 64; then a=yes; else a=no; fi
    row "cuda:$DEV used (MiB, +-64)" "$u" "$s_used" "$a"
fi

# ---- 3. watch a known workload ---------------------------------------------------------------
# info (baseline) | A MiB | info | B MiB more | info | fill kernel | until nvidia-smi has
# looked (and, on the fake drivers, the watch has read the process list: "seen", nothing to
# wait for on a real driver) | plateau 3 s | free all
rm -f "$OUT/workload.out" "$OUT/smi.done" # a previous run's would end the waits below at once
"$GPUMEM" watch --interval 50 --process-interval 200 --output "$OUT/watch.csv" --force -- \
    "$WORKLOAD" --device "$DEV" pid info "alloc:$A_MIB" touch info "sleep:$HOLD_MS" "alloc:$B_MIB" touch \
    info fill seen "await:$OUT/smi.done" "sleep:$((HOLD_MS * 2))" freeall sleep:500 \
    >"$OUT/workload.out" 2>"$OUT/watch.err" &
wpid=$!
# At the A + B plateau (third "free=" line), take nvidia-smi's view of the same process.
i=0
while :; do
    n=$(grep -c '^free=' "$OUT/workload.out" 2>/dev/null)
    [ "${n:-0}" -ge 3 ] || [ $i -ge 600 ] && break
    sleep 0.05
    i=$((i + 1))
done
sleep 0.5
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits >"$OUT/compute-apps.csv" 2>&1
echo done >"$OUT/smi.done" # the workload holds the plateau until now
wait "$wpid"
wrc=$?
row "watch: exit status (command's own)" "$wrc" "0" "$(same "$wrc" 0)"
wl_pid=$(sed -n 's/^pid=//p' "$OUT/workload.out")
grep -q '^fill ok' "$OUT/workload.out" && fill=ok || fill=failed
row "PTX .version 7.0/sm_70 JIT + kernel" "$fill" "ok" "$(same "$fill" ok)"
# cuMemGetInfo: free before/after the second allocation.
f2=$(sed -n 's/^free=\([0-9]*\).*/\1/p' "$OUT/workload.out" | sed -n 2p)
f3=$(sed -n 's/^free=\([0-9]*\).*/\1/p' "$OUT/workload.out" | sed -n 3p)
if [ -n "$f2" ] && [ -n "$f3" ]; then
    dd=$(awk -v a="$f2" -v b="$f3" 'BEGIN { printf "%.1f", (a - b) / 1048576 }')
    if near "$dd" "$B_MIB" 2; then a=yes; else a=no; fi
    row "cuMemGetInfo delta for $B_MIB MiB" "$dd" "$B_MIB (+-2)" "$a"
else
    row "cuMemGetInfo delta for $B_MIB MiB" "missing" "$B_MIB" no
fi
# The watch peak of the workload.  NVML reports host PIDs, which differ from $wl_pid in a
# container with its own PID namespace: take the PID from watch's process rows (only the
# workload runs under watch) and look that one up in nvidia-smi's list.
nvml_pid=$(awk -F, 'NR > 1 && $3 != "" { p = $3 } END { print p }' "$OUT/watch.csv")
peak=$(awk -F, 'NR > 1 && $3 != "" && $4 > m { m = $4 } END { print m + 0 }' "$OUT/watch.csv")
attr=$(awk -F, 'NR > 1 && $3 != "" { a = $6 } END { print a }' "$OUT/watch.csv")
s_app=$(awk -F', *' -v p="$nvml_pid" '$1 == p { print $2 }' "$OUT/compute-apps.csv")
pk=$(mib "$peak")
if [ -n "$s_app" ] && near "$pk" "$s_app" 2; then a=yes; else a=no; fi
row "watch peak of the workload (MiB)" "$pk" "${s_app:-not listed} (nvidia-smi)" "$a"
row "workload PID here / in NVML" "$wl_pid" "${nvml_pid:-none}" info
row "watch attribution" "${attr:-none}" "pid_tree (host) or new_pid" "$( [ -n "$attr" ] && echo yes || echo no)"
ctx=$(awk -v p="$pk" -v a="$A_MIB" -v b="$B_MIB" 'BEGIN { printf "%.1f", p - a - b }')
if awk -v c="$ctx" 'BEGIN { exit !(c > 0 && c < 2048) }'; then a=yes; else a=no; fi
row "context + overhead = peak - A - B (MiB)" "$ctx" "0 .. 2048" "$a"

# ---- 3b. gpumem measure: the measure kernels (nvcc PTX of src/measure/kernels.cu)
# run on the GPU, phase by phase, every result compared with a CPU computation ------------
if [ "${GPU_CHECK_USE_FAKES:-0}" = 1 ]; then
    mdims="--width 64 --batch 2 --context 8" # the fake runs kernels on the CPU
else
    mdims="--width 1024 --batch 2 --context 128"
fi
# shellcheck disable=SC2086
"$GPUMEM" measure --device "cuda:$DEV" $mdims --layers 4 --warmup 3 --repeats 5 --train \
    --output "$OUT/measure.json" --force >"$OUT/measure.out" 2>&1
m_rc=$?
row "measure --train: phases ok, CPU checks" "exit $m_rc" "exit 0" "$(same "$m_rc" 0)"

# ---- 3c. gpumem.torch on real PyTorch: a tiny model, one series, one recorded snapshot ----
if [ -z "$TORCH_PY" ]; then
    row "gpumem.torch on PyTorch" "skipped" "(no Python with torch+CUDA)" info
else
    rm -f "$OUT/torch-series.json" "$OUT/torch-snapshot.pickle"
    PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" "$TORCH_PY" - "$OUT" "$DEV" >"$OUT/torch.out" 2>&1 <<'PYEOF'
# A 4 x Linear(1024, 1024) MLP trained with AdamW for three steps on CUDA device DEV, every
# phase measured by gpumem.torch, the whole run recorded; prints one JSON line of findings.
import json, sys
import torch
import gpumem
import gpumem.torch as gmt

out, dev = sys.argv[1], int(sys.argv[2])
torch.cuda.set_device(dev)
series, snap = out + "/torch-series.json", out + "/torch-snapshot.pickle"
m = gmt.Measure(series, model="4 x Linear(1024, 1024)", batch=64, dtype="float32")
with gmt.record(snap):
    with m.phase("model_load"):
        model = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(4)]).cuda()
        opt = torch.optim.AdamW(model.parameters())
    for step in range(3):
        with m.phase("inputs", step=step):
            x = torch.randn(64, 1024, device="cuda")
        with m.phase("forward", step=step):
            loss = model(x).square().mean()
        with m.phase("backward", step=step):
            loss.backward()
        with m.phase("optimizer_step", step=step):
            opt.step()
            opt.zero_grad(set_to_none=True)
doc = json.load(open(series))
counters = all(k in p[c] for p in doc["phases"] for c in ("allocated_bytes", "reserved_bytes")
               for k in ("begin", "end", "peak"))
weights = 4 * (1024 * 1024 + 1024) * 4  # float32 weights and biases, each a multiple of 512 B
s = gpumem.Snapshot(snap)
marks = [a for a in (s.annotations or []) if a["name"].startswith(gmt.MARK_PREFIX)]
print(json.dumps({
    "phases": len(doc["phases"]), "ok": doc["ok"], "counters": counters,
    "model_load_allocated": doc["phases"][0]["allocated_bytes"].get("end"), "weights": weights,
    "marks": len(marks), "annotations_in_file": s.annotations is not None,
    "torch": torch.__version__, "backend": doc["environment"]["torch"]["allocator_backend"],
    "snapshot_peak": s.peak()["peak_bytes"], "torch_peak": doc["measured"]["peak_allocated_bytes"],
}))
PYEOF
    t_rc=$?
    t_line=$(tail -1 "$OUT/torch.out")
    t_get() { echo "$t_line" | sed -n "s/.*\"$1\": \([^,}]*\).*/\1/p" | tr -d '"'; }
    row "gpumem.torch: series + record ran" "exit $t_rc (torch $(t_get torch))" "exit 0" "$(same "$t_rc" 0)"
    if [ "$t_rc" -eq 0 ]; then
        row "gpumem.torch: 13 phases, all ok" "$(t_get phases) phases, ok=$(t_get ok)" "13, ok=true" \
            "$( [ "$(t_get phases)" = 13 ] && [ "$(t_get ok)" = true ] && echo yes || echo no)"
        row "gpumem.torch: four counters per phase" "$(t_get counters)" "true" "$(same "$(t_get counters)" true)"
        row "model_load allocated = the weights (B)" "$(t_get model_load_allocated)" "$(t_get weights)" \
            "$(same "$(t_get model_load_allocated)" "$(t_get weights)")"
        if [ "$(t_get annotations_in_file)" = true ]; then
            row "phase marks in the snapshot (26)" "$(t_get marks)" "26" "$(same "$(t_get marks)" 26)"
        else
            row "phase marks in the snapshot" "none" "(torch < 2.4 writes no annotations)" info
        fi
        row "snapshot peak / torch peak alloc (B)" "$(t_get snapshot_peak)" "$(t_get torch_peak)" info
        "$GPUMEM" snapshot categories "$OUT/torch-snapshot.pickle" >"$OUT/torch-categories.txt" 2>&1
        c_rc=$?
        row "snapshot categories of the recording" "exit $c_rc" "exit 0" "$(same "$c_rc" 0)"
        "$GPUMEM" sheet "$OUT/torch-series.json" "$OUT/environment.json" >"$OUT/torch-sheet.md" 2>&1
        s_rc=$?
        row "sheet of the series" "exit $s_rc" "exit 0" "$(same "$s_rc" 0)"
    fi
fi

# ---- 3d. gpumem account: where the job's device memory went, next to nvidia-smi ------------
# The job holds its peak for a while and says so ("peak" on its stdout, with the bytes that
# torch.cuda.max_memory_reserved() gives); nvidia-smi's per-process figure is taken then.
ACCT_PY=${TORCH_PY:-$(command -v python3 || true)}
acct_job=""
if [ "${GPU_CHECK_USE_FAKES:-0}" = 1 ] && [ -x "$BUILD/tests/fake/account/account_job" ]; then
    acct_job="fake"
elif [ -n "$TORCH_PY" ]; then
    acct_job="torch"
    cat >"$OUT/account_job.py" <<'PYEOF'
# NCCL (a process group of one), cuBLAS (matmuls) and a CUDA graph on device DEV; prints
# "peak <max_memory_reserved>" and holds that state for 3 s, then ends cleanly.
import os, sys, time
import torch
import torch.distributed as dist

dev = int(sys.argv[1])
torch.cuda.set_device(dev)
os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1)
x = torch.randn(4096, 4096, device="cuda")
t = torch.ones(1 << 22, device="cuda")
dist.all_reduce(t)
y = x @ x
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    for _ in range(3):
        y = x @ x
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g):
    y = x @ x
g.replay()
torch.cuda.synchronize()
print("peak", torch.cuda.max_memory_reserved(dev), flush=True)
time.sleep(3)
dist.destroy_process_group()
PYEOF
fi
if [ -z "$acct_job" ]; then
    row "gpumem account on PyTorch" "skipped" "(no Python with torch+CUDA)" info
else
    rm -f "$OUT/account.err" "$OUT/account.jsonl"
    if [ "$acct_job" = fake ]; then
        # (the dry run under ASan preloads the sanitizer's runtime, which must come first)
        ACCOUNT_JOB_HOLD_MS=1500 LD_PRELOAD="${GPU_CHECK_PRELOAD:-}" "$GPUMEM" account --json \
            --interval 50 -o "$OUT/account.jsonl" --force -- \
            "$BUILD/tests/fake/account/account_job" exit >"$OUT/account.json" \
            2>"$OUT/account.err" &
    else
        RANK=0 LOCAL_RANK=0 WORLD_SIZE=1 "$GPUMEM" account --json --interval 50 \
            -o "$OUT/account.jsonl" --force -- "$TORCH_PY" "$OUT/account_job.py" "$DEV" \
            >"$OUT/account.json" 2>"$OUT/account.err" &
    fi
    apid=$!
    # the peak: the torch job's "peak" line, the fake job's "expect ... peak" of its main process
    i=0
    while ! grep -q '^peak \|^expect [0-9]* peak .* torch=[1-9]' "$OUT/account.err" 2>/dev/null; do
        [ $i -ge 1200 ] && break
        sleep 0.05
        i=$((i + 1))
    done
    sleep 0.3
    nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits \
        >"$OUT/account-apps.csv" 2>&1
    wait "$apid"
    a_rc=$?
    row "account: exit status (the job's own)" "$a_rc" "0" "$(same "$a_rc" 0)"
    reserved=$(sed -n 's/^peak \([0-9]*\)$/\1/p' "$OUT/account.err")
    [ -n "$reserved" ] ||
        reserved=$(awk '$1 == "expect" && $3 == "peak" { for (i = 4; i <= NF; i++) if ($i ~ /^torch=[1-9]/) { sub(/torch=/, "", $i); print $i } }' "$OUT/account.err")
    "$GPUMEM" account --input "$OUT/account.jsonl" >"$OUT/account.txt" 2>&1
    # The main process's equation at its peak (the one with PyTorch in it), one "key value"
    # line per figure.
    "$ACCT_PY" - "$OUT/account.json" >"$OUT/account-terms.txt" 2>&1 <<'PYEOF'
import json, sys
doc = json.load(open(sys.argv[1]))
best = None
for p in doc["processes"]:
    for d in p["devices"]:
        b = d["peak"]
        if b and any(t.get("lib") == "torch" for t in b["terms"]):
            if best is None or (b["used"] or 0) > (best[1]["used"] or 0):
                best = (p, b)
if best is None:
    sys.exit(1)
p, b = best
sums = {}
for t in b["terms"]:
    k = t.get("lib") if t["term"] in ("library", "others") else t["term"]
    sums[k] = sums.get(k, 0) + t["bytes"]
print("pid", p["pid"])
print("used", b["used"])
print("balance", sum(t["bytes"] for t in b["terms"]))
for k in ("context", "modules", "graphs", "torch", "nccl", "cublas", "cublaslt", "rounding", "not_seen"):
    print(k, sums.get(k, 0))
PYEOF
    at() { awk -v k="$1" '$1 == k { print $2 }' "$OUT/account-terms.txt"; }
    a_pid=$(at pid)
    a_used=$(at used)
    s_app=$(awk -F', *' -v p="$a_pid" '$1 == p { print $2 }' "$OUT/account-apps.csv")
    au=$(mib "$a_used")
    if [ -n "$s_app" ] && near "$au" "$s_app" 64; then a=yes; else a=no; fi
    row "account: device used at the peak (MiB)" "$au" "${s_app:-not listed} (nvidia-smi)" "$a"
    row "account: the equation balances (B)" "$(at balance)" "$a_used" "$(same "$(at balance)" "$a_used")"
    ar=$(mib "$(at torch)")
    rr=$(mib "$reserved")
    if [ -n "$reserved" ] && near "$ar" "$rr" 2; then a=yes; else a=no; fi
    row "account: PyTorch reserved (MiB)" "$ar" "$rr (max_memory_reserved)" "$a"
    for k in context modules graphs nccl cublas cublaslt rounding not_seen; do
        row "account: $k (MiB)" "$(mib "$(at "$k")")" "(measured)" info
    done
    if [ "$(at nccl)" -gt 0 ] 2>/dev/null; then a=yes; else a=no; fi
    row "account: NCCL credited" "$(mib "$(at nccl)") MiB" "> 0" "$a"
    # the estimator's components outside the allocator, held against the account
    "$GPUMEM" calibrate --account "$OUT/account.jsonl" gpt2 --batch 1 --seq 128 --gpus 2 \
        >"$OUT/calibrate-account.txt" 2>&1
    c_rc=$?
    row "calibrate --account" "exit $c_rc" "exit 0" "$(same "$c_rc" 0)"
    for comp in "CUDA context and modules" "library workspaces" "NCCL buffers"; do
        line=$(grep -F "  $comp " "$OUT/calibrate-account.txt" | head -1)
        # after the 2 + 26 columns of the name: predicted, measured (each "N.NN MiB" or "-")
        pred=$(echo "$line" | cut -c29- | awk '{ print ($1 == "-") ? "-" : $1 " " $2 }')
        meas=$(echo "$line" | cut -c29- | awk '{ i = ($1 == "-") ? 2 : 3; print $i " " $(i + 1) }')
        row "estimate vs account: $comp" "${pred:-?}" "${meas:-?} (measured)" info
    done
fi

# ---- 3e. gpumem.torch across ranks: two processes under torch.distributed on device DEV ----
# Two ranks (a gloo process group over a file, both on the one GPU: NCCL refuses two ranks on
# one device), each measured and recorded by gpumem.torch: every phase gathers both ranks'
# peaks, each rank writes rankR_ files and its digest; gpumem then reads the folder as the
# job's two ranks, numbered by file name, and the digests give the snapshots' peaks.
if [ -z "$TORCH_PY" ]; then
    row "gpumem.torch across ranks" "skipped" "(no Python with torch+CUDA)" info
else
    rm -rf "$OUT/ranks" && mkdir -p "$OUT/ranks"
    cat >"$OUT/ranks_job.py" <<'PYEOF'
import os, sys
import torch
import torch.distributed as dist
import gpumem.torch as gmt

rank, folder, dev = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
torch.cuda.set_device(dev)
dist.init_process_group("gloo", init_method="file://" + folder + "/store", rank=rank, world_size=2)
m = gmt.Measure(folder + "/series.json", batch=16 * (rank + 1))
with gmt.record(folder + "/profile.pickle"):
    with m.phase("model_load"):
        model = torch.nn.Linear(2048, 2048).cuda()
    with m.phase("forward"):
        y = model(torch.randn(16 * (rank + 1) * 64, 2048, device="cuda"))
    with m.phase("backward"):
        y.square().mean().backward()
dist.barrier()
dist.destroy_process_group()
PYEOF
    for r in 0 1; do
        PYTHONPATH="$BUILD/python${PYTHONPATH:+:$PYTHONPATH}" "$TORCH_PY" "$OUT/ranks_job.py" \
            "$r" "$OUT/ranks" "$DEV" >"$OUT/ranks-$r.out" 2>&1 &
    done
    wait
    "$TORCH_PY" - "$OUT/ranks" >"$OUT/ranks-series.txt" 2>&1 <<'PYEOF'
import glob, json, sys
folder = sys.argv[1]
docs = [json.load(open(f)) for f in sorted(glob.glob(folder + "/rank*_series.json"))]
ok = len(docs) == 2 and all(len(p.get("ranks", [])) == 2 and "imbalance" in p
                            for d in docs for p in d["phases"])
print("ok" if ok else "missing")
PYEOF
    row "gpumem.torch: every phase has both ranks" "$(cat "$OUT/ranks-series.txt")" "ok" \
        "$(same "$(cat "$OUT/ranks-series.txt")" ok)"
    n_dig=$(ls "$OUT"/ranks/rank*_profile.digest 2>/dev/null | wc -l)
    row "gpumem.torch: digests beside the snapshots" "$n_dig" "2" "$(same "$n_dig" 2)"
    "$GPUMEM" snapshot stats "$OUT/ranks" >"$OUT/ranks-stats.txt" 2>&1
    if grep -q 'numbered by file name' "$OUT/ranks-stats.txt"; then a=yes; else a=no; fi
    row "snapshot stats of the folder: ranks by file name" "$a" "yes" "$a"
    "$GPUMEM" snapshot peak --json "$OUT"/ranks/rank*_profile.pickle >"$OUT/ranks-peak-snap.json" 2>&1
    "$GPUMEM" snapshot peak --json "$OUT"/ranks/rank*_profile.digest >"$OUT/ranks-peak-dig.json" 2>&1
    "$TORCH_PY" - "$OUT/ranks-peak-snap.json" "$OUT/ranks-peak-dig.json" >"$OUT/ranks-peaks.txt" 2>&1 <<'PYEOF'
import json, sys
def peaks(path):
    return [r.get("peak_bytes") for r in json.load(open(path)).get("ranks", [])]
a, b = peaks(sys.argv[1]), peaks(sys.argv[2])
print("same" if a and a == b else "differ %s %s" % (a, b))
PYEOF
    row "rank peaks: digests vs snapshots" "$(cat "$OUT/ranks-peaks.txt")" "same" \
        "$(same "$(cat "$OUT/ranks-peaks.txt")" same)"
fi

# ---- 4. report --------------------------------------------------------------------------------
{
    echo
    echo "gpumem gpu-check on $(nvidia-smi --query-gpu=name --format=csv,noheader | sed -n "$((DEV + 1))p") ($(date -u +%Y-%m-%dT%H:%MZ))"
    printf '%-40s %-26s %-26s %s\n' check gpumem "nvidia-smi / expected" agree
    cat "$rows"
    echo
    echo "raw outputs in $OUT; watch report in $OUT/watch.err"
} | tee "$OUT/report.txt"
[ "$bad" -eq 0 ] || { say "$bad check(s) disagree"; exit 1; }
say "all checks agree"
exit 0
