#!/bin/sh
# SPDX-License-Identifier: MIT
# symbols.sh STATIC_LIB SHARED_LIB - the library's symbol hygiene (run by ctest as
# lint/symbols):
#  - every global symbol of the static library is gm_<...> or carries its module's prefix
#    (acc_ alloc_ ana_ est_ export_ pk_ snap_), so that linking libgpumem.a never clashes with a
#    program's own names (nomem, read_trace, ...);
#  - libgpumem.so exports gm_ names only, and only those a public header declares
#    (include/gpumem/*.h; the library is built with -fvisibility=hidden, see gpumem.h).
set -u
cd "$(dirname "$0")/.."
lib=$1
so=$2
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

nm -g --defined-only "$lib" | awk 'NF == 3 { print $3 }' | sort -u > "$tmp/global"
nm -D --defined-only "$so" | awk 'NF == 3 { print $3 }' | sort -u > "$tmp/exported"
if [ ! -s "$tmp/global" ] || [ ! -s "$tmp/exported" ]; then
    echo "symbols: no symbols read from $lib or $so"
    exit 1
fi

if grep -vE '^(gm|acc|alloc|ana|est|export|pk|snap)_' "$tmp/global" > "$tmp/bad"; then
    echo "symbols: global symbols of $lib without the gm_ or a module prefix (make them static,"
    echo "or name them <module>_...):"
    sed 's/^/  /' "$tmp/bad"
    fail=1
fi

if grep -v '^gm_' "$tmp/exported" > "$tmp/bad"; then
    echo "symbols: $so exports names without gm_:"
    sed 's/^/  /' "$tmp/bad"
    fail=1
fi

# what the public headers declare (functions and data, by name)
cat include/gpumem/*.h | grep -oE '\bgm_[A-Za-z0-9_]+' | sort -u > "$tmp/public"
if comm -23 "$tmp/exported" "$tmp/public" > "$tmp/bad" && [ -s "$tmp/bad" ]; then
    echo "symbols: $so exports names no public header declares (internal ones must stay hidden):"
    sed 's/^/  /' "$tmp/bad"
    fail=1
fi

[ "$fail" -eq 0 ] && echo "symbols: ok ($(wc -l < "$tmp/exported") exported, $(wc -l < "$tmp/global") global)"
exit $fail
