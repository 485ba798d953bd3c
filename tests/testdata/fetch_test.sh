#!/bin/sh
# SPDX-License-Identifier: MIT
# fetch_test.sh [--third-party-data] - scripts/fetch-testdata.sh and tests/needs.sh, offline.
#
# By default, on files made here: a manifest of two "GitHub" files and one "Hugging Face"
# file served from a file:// mirror, and a derived variant.  The fetch writes and checks
# them; a second fetch keeps them; a file whose bytes differ from its sha256 fails the fetch
# (exit 1, naming the file) and is not left in place; a missing source fails it; usage errors
# are 64.  needs.sh, copied into a tree without ../shared: no data skips (77) with the reason;
# $GPUMEM_TESTDATA, then build/testdata are found and exported as GM_TESTDATA.
#
# With --third-party-data (through tests/needs.sh, $GM_TESTDATA): every real file of
# scripts/testdata.manifest served from a file:// mirror laid out as GitHub and the Hub lay
# them out: the real manifest's sources, paths and sha256 fetch all of them.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
fetch=$src/scripts/fetch-testdata.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
sha() { sha256sum "$1" | cut -d' ' -f1; }

if [ "${1:-}" = --third-party-data ]; then
    m=$work/mirror
    grep -v '^#' "$src/scripts/testdata.manifest" | while read -r file _ kind a b c; do
        case $kind in
        github) to=$m/gh/$a/$b/$c ;;
        huggingface) to=$m/hf/$a/resolve/$b/$c ;;
        *) continue ;;
        esac
        mkdir -p "$(dirname "$to")" && cp "$GM_TESTDATA/$file" "$to"
    done
    if sh "$fetch" -o "$work/got" --github-url "file://$m/gh" --hf-url "file://$m/hf" >"$work/out" 2>&1; then
        n=$(grep -c '^ok ' "$work/out")
        want=$(grep -cv '^#' "$src/scripts/testdata.manifest")
        [ "$n" = "$want" ] || fail "fetched $n files, the manifest lists $want"
        for f in $(grep -v '^#' "$src/scripts/testdata.manifest" | cut -d' ' -f1); do
            cmp -s "$work/got/$f" "$GM_TESTDATA/$f" || fail "$f differs from $GM_TESTDATA/$f"
        done
    else
        fail "fetch of the real files: $(cat "$work/out")"
    fi
    [ $fails = 0 ] && echo "ok: every file of scripts/testdata.manifest fetched and checked"
    exit $((fails > 0))
fi

# files made here, and a mirror of them
m=$work/mirror
mkdir -p "$m/gh/owner/repo/0123abcd/dir" "$m/hf/org/model/resolve/main"
printf 'first snapshot bytes\n' >"$m/gh/owner/repo/0123abcd/dir/a.pickle"
python3 -c 'import pickle, sys; sys.stdout.buffer.write(pickle.dumps({"segments": [], "n": [1, 2]}, protocol=4))' \
    >"$m/gh/owner/repo/0123abcd/b.pickle"
printf '{"model_type": "gpt2"}\n' >"$m/hf/org/model/resolve/main/config.json"
python3 -c 'import sys; d = bytearray(open(sys.argv[1], "rb").read()); d[1] = 5; sys.stdout.buffer.write(bytes(d))' \
    "$m/gh/owner/repo/0123abcd/b.pickle" >"$work/b5"
cat >"$work/manifest" <<EOM
# made by fetch_test.sh
snapshots/a.pickle $(sha "$m/gh/owner/repo/0123abcd/dir/a.pickle") github owner/repo 0123abcd dir/a.pickle
snapshots/b.pickle $(sha "$m/gh/owner/repo/0123abcd/b.pickle") github owner/repo 0123abcd b.pickle
snapshots/b5.pickle $(sha "$work/b5") derive proto-byte-5 snapshots/b.pickle
configs/m.json $(sha "$m/hf/org/model/resolve/main/config.json") huggingface org/model main config.json
EOM
f() { sh "$fetch" --manifest "$work/manifest" --github-url "file://$m/gh" --hf-url "file://$m/hf" "$@"; }

f -o "$work/d1" >"$work/out" 2>&1 || fail "first fetch: $(cat "$work/out")"
grep -q '4 fetched, 0 already present, 0 failed' "$work/out" || fail "first fetch said: $(cat "$work/out")"
cmp -s "$work/d1/snapshots/b5.pickle" "$work/b5" || fail "the derived file differs"
f -o "$work/d1" >"$work/out" 2>&1 || fail "second fetch: $(cat "$work/out")"
grep -q '0 fetched, 4 already present, 0 failed' "$work/out" || fail "second fetch said: $(cat "$work/out")"

# the mirror's file no longer has the manifest's bytes: exit 1, named, not kept
printf 'other bytes\n' >"$m/gh/owner/repo/0123abcd/dir/a.pickle"
f -o "$work/d2" >"$work/out" 2>&1
rc=$?
[ $rc = 1 ] || fail "a wrong sha256 gave exit $rc, expected 1"
grep -q '^FAILED snapshots/a.pickle: sha256 ' "$work/out" || fail "a wrong sha256 is not named: $(cat "$work/out")"
[ ! -e "$work/d2/snapshots/a.pickle" ] || fail "a file with a wrong sha256 was kept"
[ -z "$(ls -A "$work/d2" | grep -v '^snapshots$\|^configs$')" ] || fail "temporary files left: $(ls -A "$work/d2")"
grep -q '3 fetched, 0 already present, 1 failed' "$work/out" || fail "after a wrong sha256: $(cat "$work/out")"
rm "$m/hf/org/model/resolve/main/config.json"
f -o "$work/d3" >"$work/out" 2>&1
[ $? = 1 ] && grep -q '^FAILED configs/m.json: could not get file://' "$work/out" ||
    fail "a missing source: $(cat "$work/out")"
sh "$fetch" --no-such-option >/dev/null 2>&1
[ $? = 64 ] || fail "an unknown option is not a usage error (64)"

# needs.sh in a tree with no ../shared beside it
t=$work/x/clone
mkdir -p "$t/tests" "$t/scripts"
cp "$src/tests/needs.sh" "$t/tests/"
cp "$src/scripts/testdata.manifest" "$t/scripts/"
show='echo "GM_TESTDATA=$GM_TESTDATA"'
out=$(env -u GPUMEM_TESTDATA sh "$t/tests/needs.sh" third-party-data sh -c "$show")
rc=$?
[ $rc = 77 ] || fail "needs.sh without the files: exit $rc, expected 77"
case $out in "SKIPPED: real snapshot files not found: run scripts/fetch-testdata.sh"*) ;;
*) fail "needs.sh without the files said: $out" ;; esac
full=$work/full
for file in $(grep -v '^#' "$src/scripts/testdata.manifest" | cut -d' ' -f1); do
    mkdir -p "$full/$(dirname "$file")" && : >"$full/$file"
done
out=$(GPUMEM_TESTDATA=$full sh "$t/tests/needs.sh" third-party-data sh -c "$show")
[ "$out" = "GM_TESTDATA=$full" ] || fail "needs.sh with GPUMEM_TESTDATA: $out"
rm "$full/configs/gpt2.json"
out=$(GPUMEM_TESTDATA=$full sh "$t/tests/needs.sh" third-party-data true)
[ $? = 77 ] || fail "needs.sh with one file missing did not skip: $out"
mkdir -p "$t/build" && cp -r "$full" "$t/build/testdata" && : >"$t/build/testdata/configs/gpt2.json"
out=$(env -u GPUMEM_TESTDATA sh "$t/tests/needs.sh" third-party-data sh -c "$show")
[ "$out" = "GM_TESTDATA=$t/build/testdata" ] || fail "needs.sh with build/testdata: $out"
out=$(sh "$t/tests/needs.sh" shared-tools true)
[ $? = 77 ] || fail "needs.sh shared-tools without ../shared did not skip: $out"

[ $fails = 0 ] && echo "ok: fetch, check, keep, refuse a wrong sha256; needs.sh finds or skips"
exit $((fails > 0))
