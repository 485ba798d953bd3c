#!/bin/sh
# SPDX-License-Identifier: MIT
# snapshot.sh [GPUMEM] [SIZE...] - gpumem snapshot peak vs python3 pickle.load on synthetic
# snapshots generated at bench time (default 100M; add 1G for the large one: Python then
# needs about 1 minute and 6 GB).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
gpumem=${1:-$here/../build/gpumem}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- 100M
exec python3 "$here/snapshot_bench.py" "$gpumem" "$@"
