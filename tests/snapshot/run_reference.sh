#!/bin/sh
# SPDX-License-Identifier: MIT
# run_reference.sh GPUMEM [--third-party-data] - compare every figure of
# `gpumem snapshot stats|peak --json` with the independent Python reference, on the synthetic
# files of tests/reference/make_synthetic.py (written to a temporary folder), or with
# --third-party-data on every real file in $GM_TESTDATA/snapshots (set by tests/needs.sh).
set -eu
GPUMEM=$1
here=$(cd "$(dirname "$0")/.." && pwd)
if [ "${2:-}" = --third-party-data ]; then
    set -- "$GM_TESTDATA"/snapshots/*.pkl "$GM_TESTDATA"/snapshots/*.pickle
else
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    python3 "$here/reference/make_synthetic.py" "$tmp"
    set -- "$tmp"/*.pickle
fi
python3 "$here/reference/compare.py" "$GPUMEM" "$@"
