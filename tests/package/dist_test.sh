#!/bin/sh
# SPDX-License-Identifier: MIT
# dist_test.sh - the source tarball of `make dist` (python/gpumem_build.py sdist) builds on its
# own: gpumem-VERSION/ holds every file of the checkout that git does not ignore (when the
# source is a git checkout) and PKG-INFO, no build output; unpacked in a temporary folder it
# configures and builds (the command, without the tests), and the command it builds runs
# (version, an example snapshot read back, an estimate).
set -u
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
src=$GM_SOURCE_DIR

tarball=$(python3 "$src/python/gpumem_build.py" sdist "$work" 2>"$work/sdist.log") || { cat "$work/sdist.log"; exit 1; }
version=$("$GPUMEM" --version | awk 'NR==1{print $2}')
[ "$(basename "$tarball")" = "gpumem-$version.tar.gz" ] || fail "the tarball is $(basename "$tarball"), expected gpumem-$version.tar.gz"
tar tzf "$tarball" | sed 's|^[^/]*/||' | sort >"$work/list"
[ "$(tar tzf "$tarball" | cut -d/ -f1 | sort -u)" = "gpumem-$version" ] || fail "not everything under gpumem-$version/"
grep -qx PKG-INFO "$work/list" || fail "no PKG-INFO"
grep -E '^(build|build-[^/]*|\.git)/' "$work/list" | head -3 | grep -q . && fail "build output or .git in the tarball"
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$src" ls-files --cached --others --exclude-standard | sort >"$work/git"
    missing=$(comm -23 "$work/git" "$work/list" | while read -r f; do [ -f "$src/$f" ] && echo "$f"; done | head -5)
    [ -z "$missing" ] || fail "files of the checkout missing from the tarball: $missing"
fi

tar xzf "$tarball" -C "$work"
tree=$work/gpumem-$version
if cmake -S "$tree" -B "$work/b" -DCMAKE_BUILD_TYPE=Release -DGM_BUILD_TESTS=OFF -DGM_PYTHON=OFF \
    >"$work/build.log" 2>&1 && cmake --build "$work/b" --target gpumem -j 2 >>"$work/build.log" 2>&1; then
    g=$work/b/gpumem
    [ "$("$g" --version | awk 'NR==1{print $2}')" = "$version" ] || fail "the built gpumem --version"
    (cd "$work" && "$g" snapshot example -o ex.pickle && "$g" snapshot peak ex.pickle | grep -q '^device 0: peak') ||
        fail "the built gpumem cannot write and read an example snapshot"
    "$g" estimate --parameters 7B --bits 16 | grep -qx 'parameters: 7000000000' || fail "the built gpumem estimate"
else
    tail -30 "$work/build.log"
    fail "the unpacked tarball does not build"
fi
[ $fails = 0 ] && echo "ok: $(basename "$tarball") builds on its own and its gpumem runs"
exit $((fails > 0))
