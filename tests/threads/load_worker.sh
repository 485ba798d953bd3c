#!/bin/sh
# SPDX-License-Identifier: MIT
# load_worker.sh GPUMEM - a load whose consumers (the analysis's first pass beside the
# timeline's fold) run on a worker thread beside the reader (src/snapshot/pipe.c: a file of
# 8 MiB or more, two CPUs or more): run under ThreadSanitizer by `make tsan` (ctest -L
# threads), where a data race fails the command; in any build, its output must be the bytes
# of the same command pinned to one CPU, whose load runs the consumers inline.  Skipped
# (77) where that comparison cannot be made: no taskset, or fewer than two usable CPUs.
set -eu
gpumem=$1
if ! command -v taskset > /dev/null || ! taskset -c 0 true 2> /dev/null; then
    echo "SKIP: no taskset to pin a load to one CPU" >&2
    exit 77
fi
if [ "$(nproc)" -lt 2 ]; then
    echo "SKIP: one usable CPU, every load runs inline" >&2
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
# about 10 MB of pickle: over the size below which a load keeps to one thread
"$gpumem" snapshot example -o big.pickle --iterations 150 > /dev/null
[ "$(wc -c < big.pickle)" -gt $((8 << 20)) ] || { echo "the example is too small" >&2; exit 1; }
# (peak has the fold alone, which stays inline: it checks that the rule keeps both alike)
for cmd in peak categories oom; do
    "$gpumem" snapshot "$cmd" --json big.pickle > "$cmd.worker.json"
    taskset -c 0 "$gpumem" snapshot "$cmd" --json big.pickle > "$cmd.inline.json"
    cmp "$cmd.worker.json" "$cmd.inline.json"
done
"$gpumem" snapshot report big.pickle -o worker.html
taskset -c 0 "$gpumem" snapshot report big.pickle -o inline.html
cmp worker.html inline.html
echo "worker: ok"
