#!/bin/sh
# SPDX-License-Identifier: MIT
# checkpoint_sizes.sh GPUMEM MKMODELFILE CSV WORKDIR - the weight bytes gpumem predicts for
# every row of tests/data/estimate/checkpoint_sizes.csv (public checkpoints' sizes, with
# their sources) must be within 2% of the published size.
#
# A row's job is one of
#   args ARGS...            gpumem estimate ARGS (a catalog model, --quant ...)
#   config PATH             gpumem estimate tests/data/PATH (a config.json with its
#                           quantization_config)
#   gguf FTYPE L H NH KV FFN V [f16-emb]
#                           a GGUF header written with llama.cpp's tensor types for FTYPE
#                           (tests/tools/mkmodelfile.c gguf-quant), read back by gpumem
# The published sizes are whole files: tensor bytes plus a header (a few MB of GGUF
# metadata, tens of kB of safetensors JSON); gpumem predicts the tensor bytes.
set -u
GPUMEM=$1
MK=$2
CSV=$3
WORK=$4
DATA=$(dirname "$CSV")/..
mkdir -p "$WORK"
fail=0
rows=0
printf '%-24s %-44s %14s %14s %8s\n' model format published predicted error
tail -n +2 "$CSV" | while IFS=, read -r model format repo rev bytes kind src job; do
    set -- $job
    kind_of_job=$1
    shift
    case $kind_of_job in
    args) out=$("$GPUMEM" estimate "$@" --json) ;;
    config) out=$("$GPUMEM" estimate "$DATA/$1" --json) ;;
    gguf)
        f="$WORK/$1-$7${8:+-$8}.gguf"
        "$MK" gguf-quant "$f" "$1" "$2" "$3" "$4" "$5" "$6" "$7" 8192 ${8:-} || exit 1
        out=$("$GPUMEM" estimate "$f" --json)
        ;;
    *) echo "row '$model $format': unknown job '$job'"; exit 1 ;;
    esac
    pred=$(printf '%s\n' "$out" | sed -n 's/^  "weights_bytes": \([0-9]*\),$/\1/p')
    if [ -z "$pred" ]; then
        echo "row '$model $format': no weights_bytes from gpumem"
        exit 1
    fi
    err=$(awk -v p="$pred" -v b="$bytes" 'BEGIN { printf "%+.2f", (p - b) * 100 / b }')
    ok=$(awk -v p="$pred" -v b="$bytes" 'BEGIN { d = (p - b) / b; print (d <= 0.02 && d >= -0.02) ? "ok" : "FAIL" }')
    printf '%-24.24s %-44.44s %14s %14s %7s%% %s\n' "$model" "$format" "$bytes" "$pred" "$err" "$ok"
    [ "$ok" = ok ] || echo FAIL >>"$WORK/failed"
done || exit 1
if [ -f "$WORK/failed" ]; then
    echo "$(wc -l <"$WORK/failed") row(s) off by more than 2%"
    rm -f "$WORK/failed"
    exit 1
fi
echo "every row within 2%"
