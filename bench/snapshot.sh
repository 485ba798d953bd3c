#!/bin/sh
# SPDX-License-Identifier: MIT
# snapshot.sh GPUMEM BENCH_DIR [SIZE...] - every gpumem snapshot command, the two floors,
# gpumem's Python package and Python's pickle.load on synthetic snapshots generated at bench
# time (default 100M and 1G; pickle.load and the reference then need about 30 to 60 s and
# 6 to 8.5 GB each per GB of file).  See snapshot_bench.py.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
gpumem=${1:-$here/../build/gpumem}
bench=${2:-$here/../build/bench}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && shift
[ $# -gt 0 ] || set -- 100M 1G
exec python3 "$here/snapshot_bench.py" "$gpumem" "$bench" "$@"
