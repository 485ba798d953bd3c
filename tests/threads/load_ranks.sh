#!/bin/sh
# SPDX-License-Identifier: MIT
# load_ranks.sh GPUMEM - the commands that read several snapshot files at once, one thread
# per file (cli/snapshot_cli.c), on the example job's ranks: run under ThreadSanitizer by
# `make tsan` (ctest -L threads), where a data race fails the command; in any build, their
# figures must not depend on the order the threads finish in.
set -eu
gpumem=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
for r in 0 1 2 3; do
    "$gpumem" snapshot example -o "r$r.pickle" --device "$r" --batch $((4 + 2 * r)) --iterations 3 > /dev/null
done
for cmd in peak stats categories; do
    "$gpumem" snapshot "$cmd" --json r0.pickle r1.pickle r2.pickle r3.pickle > "$cmd.a.json"
    # the same files in another order finish in another order: the ranks are the same
    "$gpumem" snapshot "$cmd" --json r3.pickle r2.pickle r1.pickle r0.pickle > "$cmd.b.json"
    python3 - "$cmd.a.json" "$cmd.b.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
rows = lambda doc: sorted((dict(r, rank=None) for r in doc["ranks"]), key=lambda r: r["file"])
assert len(a["ranks"]) == 4 and rows(a) == rows(b), "the ranks depend on the order of the files"
PY
done
"$gpumem" snapshot diff --json r0.pickle r1.pickle > /dev/null
"$gpumem" snapshot report r0.pickle r1.pickle r2.pickle -o ranks.html
echo "threads: ok"
