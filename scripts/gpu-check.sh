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
#      at the same plateau, and cuMemGetInfo's delta with the 4 GiB asked for;
#   4. prints a table of agreement and leaves every raw output in GPU_CHECK_OUT
#      (default ./gpu-check-out).
# Exit status: 0 all agree, 1 some check disagrees or failed, 2 no GPU/driver here.
# Dependencies: a C compiler, cmake, pkg-config, jansson and zlib development files
# (cmocka is optional: without it the test suite is not built, only what this needs).
# Uses device 0 (CUDA numbering) unless GPU_CHECK_DEVICE=N is set.  Nothing is installed.
set -u
cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
BUILD=${1:-build-gpucheck}
OUT=${GPU_CHECK_OUT:-$ROOT/gpu-check-out}
DEV=${GPU_CHECK_DEVICE:-0}
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

if ! command -v nvidia-smi >/dev/null 2>&1; then
    say "nvidia-smi not found: this is not a machine with an NVIDIA driver; nothing to check"
    exit 2
fi
nvidia-smi -L >"$OUT/nvidia-smi-L.txt" 2>&1 || {
    say "nvidia-smi fails (see $OUT/nvidia-smi-L.txt): no usable GPU"
    exit 2
}

# ---- 1. build ---------------------------------------------------------------------------
for tool in cc cmake pkg-config; do
    command -v "$tool" >/dev/null 2>&1 || { say "missing '$tool' (install build-essential cmake pkg-config)"; exit 1; }
done
pkg-config --exists jansson || { say "missing jansson development files (libjansson-dev)"; exit 1; }
tests=OFF
pkg-config --exists cmocka && tests=ON
say "building in $BUILD (tests: $tests)"
if ! { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGM_BUILD_TESTS=$tests &&
       cmake --build "$BUILD" -j "$(nproc 2>/dev/null || echo 2)"; } >"$OUT/build.log" 2>&1; then
    say "build failed, see $OUT/build.log"
    tail -20 "$OUT/build.log"
    exit 1
fi
GPUMEM=$ROOT/$BUILD/gpumem
WORKLOAD=$ROOT/$BUILD/tests/fake/gm_workload
if [ ! -x "$WORKLOAD" ]; then
    WORKLOAD=$ROOT/$BUILD/gm_workload
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

q=uuid,name,pci.bus_id,compute_cap,driver_version,memory.total,memory.reserved,memory.used,memory.free
if ! nvidia-smi --query-gpu=$q --format=csv,noheader,nounits >"$OUT/nvidia-smi.csv" 2>"$OUT/nvidia-smi.err"; then
    # Older nvidia-smi: no memory.reserved.
    q=uuid,name,pci.bus_id,compute_cap,driver_version,memory.total,memory.used,memory.free
    nvidia-smi --query-gpu=$q --format=csv,noheader,nounits >"$OUT/nvidia-smi.csv" 2>>"$OUT/nvidia-smi.err"
fi
line=$(grep -F "$g_uuid" "$OUT/nvidia-smi.csv" | head -1)
field() { # n-th comma-separated field of the nvidia-smi line, trimmed
    echo "$line" | awk -F', *' -v n="$1" '{ gsub(/^ +| +$/, "", $n); print $n }'
}
mib() { # bytes -> MiB with one decimal
    awk -v b="$1" 'BEGIN { if (b == "" || b == "null") print "unknown"; else printf "%.1f", b / 1048576 }'
}
near() { # |a - b| <= tol (numbers; "unknown" never agrees)
    awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "unknown" && b != "" && d <= t) }'
}
same() { if [ "$1" = "$2" ]; then echo yes; else echo no; fi; }

if [ -z "$line" ]; then
    row "uuid found by nvidia-smi" "$g_uuid" "(not listed)" no
else
    s_name=$(field 2)
    s_pci=$(field 3)
    s_cc=$(field 4)
    s_driver=$(field 5)
    s_total=$(field 6)
    case $q in
    *reserved*) s_reserved=$(field 7); s_used=$(field 8) ;;
    *) s_reserved=""; s_used=$(field 7) ;;
    esac
    row "driver version" "$g_driver" "$s_driver" "$(same "$g_driver" "$s_driver")"
    row "cuda:$DEV name" "$g_name" "$s_name" "$(same "$g_name" "$s_name")"
    row "cuda:$DEV uuid (CUDA joined to NVML)" "$g_uuid" "$(field 1)" "$(same "$g_uuid" "$(field 1)")"
    row "cuda:$DEV pci bus id" "$g_pci" "$s_pci" "$(same "$g_pci" "$s_pci")"
    row "cuda:$DEV compute capability" "$g_cc" "$s_cc" "$(same "$g_cc" "$s_cc")"
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
# info (baseline) | 1 GiB | info | 4 GiB more | info | plateau 3 s | free all | 0.5 s
"$GPUMEM" watch --interval 50 --process-interval 200 --output "$OUT/watch.csv" --force -- \
    "$WORKLOAD" --device "$DEV" pid info alloc:1024 touch info sleep:1500 alloc:4096 touch info \
    fill sleep:3000 freeall sleep:500 >"$OUT/workload.out" 2>"$OUT/watch.err" &
wpid=$!
# At the 5 GiB plateau (third "free=" line), take nvidia-smi's view of the same process.
i=0
while [ "$(grep -c '^free=' "$OUT/workload.out" 2>/dev/null)" -lt 3 ] && [ $i -lt 600 ]; do
    sleep 0.05
    i=$((i + 1))
done
sleep 0.5
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits >"$OUT/compute-apps.csv" 2>&1
wait "$wpid"
wrc=$?
row "watch: exit status (command's own)" "$wrc" "0" "$(same "$wrc" 0)"
wl_pid=$(sed -n 's/^pid=//p' "$OUT/workload.out")
grep -q '^fill ok' "$OUT/workload.out" && fill=ok || fill=failed
row "PTX .version 7.0/sm_70 JIT + kernel" "$fill" "ok" "$(same "$fill" ok)"
# cuMemGetInfo: free before/after the 4 GiB allocation.
f2=$(sed -n 's/^free=\([0-9]*\).*/\1/p' "$OUT/workload.out" | sed -n 2p)
f3=$(sed -n 's/^free=\([0-9]*\).*/\1/p' "$OUT/workload.out" | sed -n 3p)
if [ -n "$f2" ] && [ -n "$f3" ]; then
    dd=$(awk -v a="$f2" -v b="$f3" 'BEGIN { printf "%.1f", (a - b) / 1048576 }')
    if near "$dd" 4096 2; then a=yes; else a=no; fi
    row "cuMemGetInfo delta for 4096 MiB" "$dd" "4096 (+-2)" "$a"
else
    row "cuMemGetInfo delta for 4096 MiB" "missing" "4096" no
fi
# The watch peak of the workload's PID, and nvidia-smi at the plateau.
peak=$(awk -F, -v p="$wl_pid" 'NR > 1 && $3 == p && $4 > m { m = $4 } END { print m + 0 }' "$OUT/watch.csv")
attr=$(awk -F, -v p="$wl_pid" 'NR > 1 && $3 == p { a = $6 } END { print a }' "$OUT/watch.csv")
s_app=$(awk -F', *' -v p="$wl_pid" '$1 == p { print $2 }' "$OUT/compute-apps.csv")
pk=$(mib "$peak")
if [ -n "$s_app" ] && near "$pk" "$s_app" 2; then a=yes; else a=no; fi
row "watch peak of the workload (MiB)" "$pk" "${s_app:-not listed} (nvidia-smi)" "$a"
row "watch attribution" "${attr:-none}" "pid_tree (host) or new_pid" "$( [ -n "$attr" ] && echo yes || echo no)"
ctx=$(awk -v p="$pk" 'BEGIN { printf "%.1f", p - 5120 }')
if awk -v c="$ctx" 'BEGIN { exit !(c > 0 && c < 2048) }'; then a=yes; else a=no; fi
row "context + overhead = peak - 5120 (MiB)" "$ctx" "0 .. 2048" "$a"

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
