#!/bin/sh
# SPDX-License-Identifier: MIT
# gpu_check_dryrun.sh GPUMEM - run scripts/gpu-check.sh against the fake drivers with a
# stand-in nvidia-smi: every check must agree; then with a stand-in that reports another
# driver version, the script must notice (exit 1).  This tests the script's parsing and
# arithmetic; only a real GPU tests the driver.
set -u
GPUMEM=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin"
cp "$GM_SOURCE_DIR/tests/device/nvidia-smi-standin" "$work/bin/nvidia-smi"
chmod +x "$work/bin/nvidia-smi"
export PATH="$work/bin:$PATH" GPUMEM_BIN="$GPUMEM" GPU_CHECK_NO_BUILD=1 GPU_CHECK_USE_FAKES=1
export GPU_CHECK_ALLOC_A=64 GPU_CHECK_ALLOC_B=256 GPU_CHECK_HOLD_MS=500 GPUMEM_FAKE_STATE="$work/state"
# under ASan the account step's job needs the sanitizer's runtime first among its preloads
export GPU_CHECK_PRELOAD="${GM_ASAN_PRELOAD:-}"
# its libraries, found by RUNPATH, which ASan's dlopen interceptor does not search
LD_LIBRARY_PATH="$(dirname "$GPUMEM")/tests/fake/account${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
build=$(dirname "$GPUMEM")

GPU_CHECK_OUT="$work/out1" sh "$GM_SOURCE_DIR/scripts/gpu-check.sh" "$build" >"$work/run1.txt" 2>&1
rc=$?
if [ "$rc" -ne 0 ] || ! grep -q 'all checks agree' "$work/run1.txt"; then
    echo "dry run: expected every check to agree (exit $rc)"
    cat "$work/run1.txt"
    exit 1
fi
n=$(grep -c ' yes$' "$work/run1.txt")
if [ "$n" -lt 14 ]; then
    echo "dry run: only $n checks agreed"
    cat "$work/run1.txt"
    exit 1
fi
STANDIN_DRIVER=999.99 GPU_CHECK_OUT="$work/out2" sh "$GM_SOURCE_DIR/scripts/gpu-check.sh" "$build" >"$work/run2.txt" 2>&1
rc=$?
if [ "$rc" -ne 1 ] || ! grep -q '^driver version .* no$' "$work/run2.txt"; then
    echo "dry run: a different driver version was not reported as a disagreement (exit $rc)"
    cat "$work/run2.txt"
    exit 1
fi
echo "gpu-check dry run: $n checks agree; a wrong driver version is caught"
