#!/bin/sh
# SPDX-License-Identifier: MIT
# The README's demo: the main job on bundled data.  demo.sh GPUMEM_BINARY
# Each section is independent; later sections (snapshot report, ...) are appended below.
set -eu
GPUMEM=${1:-build/gpumem}
"$GPUMEM" --version

section() { printf '\n=== %s\n$ %s\n' "$1" "$2"; }

# --- estimate: will it fit? (built-in model catalog, no GPU needed) ---
section "weights of a 7B model at 16 bits, with a flat 4 GiB reserve" \
    "gpumem estimate --parameters 7000000000 --bits 16 --reserve-gib 4"
"$GPUMEM" estimate --parameters 7000000000 --bits 16 --reserve-gib 4

section "full fine-tune of Llama-3-8B on one H100: does it fit, and what to change" \
    "gpumem estimate llama-3-8b --train --batch 4 --seq 2048 --gpu H100"
"$GPUMEM" estimate llama-3-8b --train --batch 4 --seq 2048 --gpu H100

section "serving Mistral-7B: 8 sequences of 8k tokens, fp8 KV cache, on an L40S" \
    "gpumem estimate mistral-7b --infer --batch 8 --context 8192 --kv-dtype fp8 --gpu L40S"
"$GPUMEM" estimate mistral-7b --infer --batch 8 --context 8192 --kv-dtype fp8 --gpu L40S
