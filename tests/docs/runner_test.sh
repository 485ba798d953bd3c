#!/bin/sh
# SPDX-License-Identifier: MIT
# runner_test.sh PYTHON BUILD - tests/docs/run_examples.py on the documents of
# tests/docs/fixtures/: one whose blocks run as written passes (a skip marker and a
# needs-third-party-data marker reported as skipped, "..." and $? honoured, Python names shared
# between blocks); a stale console block, a stale Python example and an untagged session each
# fail naming the file and line; --update rewrites the stale output so that it passes.
set -u
PY=$1 BUILD=$2
here=$(cd "$(dirname "$0")" && pwd)
run="$PY $here/run_examples.py --build $BUILD"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

$run "$here/fixtures/good.md" >"$work/out" 2>&1 || fail "good.md: $(cat "$work/out")"
grep -q '^5 blocks run, 2 skipped, 0 failed$' "$work/out" || fail "good.md summary: $(cat "$work/out")"
grep -q 'skipped (shows the skip marker: never run): tests/docs/fixtures/good.md:4' "$work/out" ||
    fail "good.md: the skip reason is not reported: $(cat "$work/out")"
grep -q 'skipped (needs third-party-data): tests/docs/fixtures/good.md:' "$work/out" ||
    fail "good.md: the third-party block is not reported skipped: $(cat "$work/out")"
for f in stale stale_python untagged; do
    $run "$here/fixtures/$f.md" >"$work/out" 2>&1
    rc=$?
    [ $rc = 1 ] || fail "$f.md: exit $rc, expected 1"
    grep -q "^FAIL tests/docs/fixtures/$f.md:3" "$work/out" || fail "$f.md: no FAIL naming the block: $(cat "$work/out")"
done
grep -q 'tag it ```console' "$work/out" || fail "untagged.md: no hint to tag it"

# --update on a copy: the stale output is rewritten and then passes
mkdir -p "$work/src/tests/docs" && cp "$here/run_examples.py" "$work/src/tests/docs/"
mkdir -p "$work/src/docs" "$work/src/tests/docs/fixtures"
cp "$here/fixtures/stale.md" "$work/src/docs/stale.md"
"$PY" "$work/src/tests/docs/run_examples.py" --build "$BUILD" --update "$work/src/docs/stale.md" >"$work/out" 2>&1 ||
    fail "--update: $(cat "$work/out")"
grep -q '^parameters: 7000000000$' "$work/src/docs/stale.md" || fail "--update did not rewrite: $(cat "$work/src/docs/stale.md")"
"$PY" "$work/src/tests/docs/run_examples.py" --build "$BUILD" "$work/src/docs/stale.md" >"$work/out" 2>&1 ||
    fail "after --update: $(cat "$work/out")"

[ $fails = 0 ] && echo "ok: the runner passes what runs, fails what is stale or untagged, and --update mends"
exit $((fails > 0))
