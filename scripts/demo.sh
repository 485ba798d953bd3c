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

# --- snapshot: what happened? (our own example snapshot: a simulated training loop with a leak) ---
OUT=${GPUMEM_DEMO_DIR:-$(dirname "$GPUMEM")/demo}
mkdir -p "$OUT"
section "write gpumem's example snapshot (GPT + AdamW, 5 iterations, an evaluation leak)" \
    "gpumem snapshot example --force -o $OUT/train_leak.pickle"
"$GPUMEM" snapshot example --force -o "$OUT/train_leak.pickle"

section "where is the peak and what is alive at it" "gpumem snapshot peak --top 5 $OUT/train_leak.pickle"
"$GPUMEM" snapshot peak --top 5 "$OUT/train_leak.pickle"

section "which category dominates the peak" "gpumem snapshot categories $OUT/train_leak.pickle"
"$GPUMEM" snapshot categories "$OUT/train_leak.pickle"

section "memory that grows from iteration to iteration" "gpumem snapshot leaks $OUT/train_leak.pickle"
"$GPUMEM" snapshot leaks "$OUT/train_leak.pickle"

section "allocated and reserved over time" "gpumem snapshot plot --width 100 --height 12 $OUT/train_leak.pickle"
"$GPUMEM" snapshot plot --width 100 --height 12 "$OUT/train_leak.pickle"

section "an offline, single-file HTML report" "gpumem snapshot report --force -o $OUT/report.html $OUT/train_leak.pickle"
"$GPUMEM" snapshot report --force -o "$OUT/report.html" "$OUT/train_leak.pickle"
echo "open $OUT/report.html in a browser (it makes no network request)"
