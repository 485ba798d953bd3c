#!/bin/sh
# SPDX-License-Identifier: MIT
# regen-ptx.sh - regenerate src/measure/kernels.ptx from src/measure/kernels.cu.
#
# Uses nvcc when it is installed, else clang's NVPTX back end (no CUDA toolkit needed:
# -nocudainc -nocudalib with the few CUDA macros defined here).  Either way the header is
# rewritten to `.version 7.0` / `.target sm_70` (driver-abi.md section 2.2: R450+ drivers
# JIT it for Volta through Blackwell) and a comment names the generator and flags.
#     sh scripts/regen-ptx.sh            (CC_NVPTX=clang-14 to pick a clang)
set -eu
cd "$(dirname "$0")/.."
src=src/measure/kernels.cu
out=src/measure/kernels.ptx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if command -v nvcc >/dev/null 2>&1; then
    gen="nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'): nvcc -ptx -arch=compute_75"
    nvcc -ptx -arch=compute_75 -o "$tmp/raw.ptx" "$src"
else
    cc=${CC_NVPTX:-clang}
    flags="-x cuda --cuda-device-only --cuda-gpu-arch=sm_70 -nocudainc -nocudalib -O2 -S"
    gen="$($cc --version | sed -n 1p): $cc $flags"
    cat >"$tmp/wrap.cu" <<WRAP
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#include <__clang_cuda_builtin_vars.h>
#define fmaf __builtin_fmaf
#define __forceinline__ __attribute__((always_inline)) inline
#define __float_as_uint(x) __builtin_bit_cast(unsigned, x)
#define __uint_as_float(x) __builtin_bit_cast(float, x)
#include "$(pwd)/$src"
WRAP
    # shellcheck disable=SC2086
    $cc $flags -Wno-unknown-cuda-version "$tmp/wrap.cu" -o "$tmp/raw.ptx"
fi
{
    echo "//"
    echo "// kernels.ptx - generated from src/measure/kernels.cu by scripts/regen-ptx.sh; do not edit."
    echo "// Generator: $gen"
    echo "// Header rewritten to PTX ISA 7.0 / sm_70 (driver-abi.md section 2.2)."
    echo "//"
    sed -e '/^\/\//d' \
        -e 's/^\.version .*/.version 7.0/' \
        -e 's/^\.target .*/.target sm_70/' "$tmp/raw.ptx"
} >"$out"
grep -q '^\.version 7\.0$' "$out" && grep -q '^\.target sm_70$' "$out"
echo "wrote $out ($(grep -c '\.entry' "$out") kernels)"
