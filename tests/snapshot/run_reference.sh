#!/bin/sh
# SPDX-License-Identifier: MIT
# run_reference.sh GPUMEM - compare every figure of `gpumem snapshot stats|peak --json` with
# the independent Python reference, on every real file in $GM_SHARED/testdata/snapshots and
# on the synthetic files of tests/reference/make_synthetic.py (written to a temporary folder).
set -eu
GPUMEM=$1
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 "$here/reference/make_synthetic.py" "$tmp"
set -- "$GM_SHARED"/testdata/snapshots/*.pkl "$GM_SHARED"/testdata/snapshots/*.pickle "$tmp"/*.pickle
python3 "$here/reference/compare.py" "$GPUMEM" "$@"
