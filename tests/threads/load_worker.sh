#!/bin/sh
# SPDX-License-Identifier: MIT
# load_worker.sh GPUMEM - a load whose consumers (the timeline's fold, the analysis's first
# pass) run on a worker thread beside the reader (src/snapshot/pipe.c: a file of 8 MiB or
# more, two CPUs or more): run under ThreadSanitizer by `make tsan` (ctest -L threads),
# where a data race fails the command; in any build, its output must be the bytes of the
# same command pinned to one CPU, whose load runs the consumers inline.
set -eu
gpumem=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
# about 10 MB of pickle: over the size below which a load keeps to one thread
"$gpumem" snapshot example -o big.pickle --iterations 150 > /dev/null
[ "$(wc -c < big.pickle)" -gt $((8 << 20)) ] || { echo "the example is too small" >&2; exit 1; }
one_cpu=
if command -v taskset > /dev/null && taskset -c 0 true 2> /dev/null; then
    one_cpu="taskset -c 0"
fi
for cmd in peak categories oom; do
    "$gpumem" snapshot "$cmd" --json big.pickle > "$cmd.worker.json"
    [ -z "$one_cpu" ] || $one_cpu "$gpumem" snapshot "$cmd" --json big.pickle > "$cmd.inline.json"
    [ -z "$one_cpu" ] || cmp "$cmd.worker.json" "$cmd.inline.json"
done
"$gpumem" snapshot report big.pickle -o worker.html
[ -z "$one_cpu" ] || { $one_cpu "$gpumem" snapshot report big.pickle -o inline.html && cmp worker.html inline.html; }
echo "worker: ok"
