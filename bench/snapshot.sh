#!/bin/sh
# SPDX-License-Identifier: MIT
# snapshot.sh GPUMEM BENCH_DIR [SIZE...] - every gpumem snapshot command, the two floors and
# Python's pickle.load on synthetic snapshots generated at bench time (default 100M and 1G;
# Python then needs about 30 s and 8.5 GB per GB of file).  See snapshot_bench.py.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
gpumem=${1:-$here/../build/gpumem}
bench=${2:-$here/../build/bench}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- 100M 1G
exec python3 "$here/snapshot_bench.py" "$gpumem" "$bench" "$@"
