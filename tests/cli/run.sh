#!/bin/sh
# SPDX-License-Identifier: MIT
# run.sh CASE_DIR GPUMEM_BINARY - one CLI golden test.
#
# CASE_DIR/cmd     shell lines run with `gpumem` bound to the binary under test, in a fresh
#                  temporary folder ($CASE the case folder; $GM_TESTDATA the third-party
#                  files, for a cmd that names it: tests/needs.sh)
# CASE_DIR/stdout  expected standard output, byte for byte (absent: not compared)
# CASE_DIR/stderr  expected standard error, byte for byte (absent: not compared)
# CASE_DIR/exit    expected exit status (absent: 0)
# GM_UPDATE_GOLDEN=1 rewrites stdout, exit (and stderr when it exists) from the actual run
# (`make golden` does it for every case).
set -u
CASE=$(cd "$1" && pwd)
GPUMEM_BIN=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
export CASE GPUMEM_BIN
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

gpumem() { "$GPUMEM_BIN" "$@"; }
( . "$CASE/cmd" ) >"$work/.stdout" 2>"$work/.stderr"
status=$?

if [ "${GM_UPDATE_GOLDEN:-0}" = 1 ]; then
    cp "$work/.stdout" "$CASE/stdout"
    [ -f "$CASE/stderr" ] && cp "$work/.stderr" "$CASE/stderr"
    if [ "$status" -ne 0 ]; then echo "$status" >"$CASE/exit"; else rm -f "$CASE/exit"; fi
    echo "updated $CASE"
    exit 0
fi

fail=0
want=0
[ -f "$CASE/exit" ] && want=$(cat "$CASE/exit")
if [ "$status" -ne "$want" ]; then
    echo "exit status $status, expected $want"
    fail=1
fi
if [ -f "$CASE/stdout" ] && ! cmp -s "$CASE/stdout" "$work/.stdout"; then
    echo "stdout differs:"
    diff -u "$CASE/stdout" "$work/.stdout" | head -60
    fail=1
fi
if [ -f "$CASE/stderr" ] && ! cmp -s "$CASE/stderr" "$work/.stderr"; then
    echo "stderr differs:"
    diff -u "$CASE/stderr" "$work/.stderr" | head -30
    fail=1
fi
if [ "$fail" -ne 0 ]; then
    echo "--- stderr of the run:"
    head -20 "$work/.stderr"
fi
exit $fail
