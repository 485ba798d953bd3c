#!/bin/sh
# SPDX-License-Identifier: MIT
# deb_test.sh BUILD - the Debian package of this build (cpack -G DEB, the rules of `make deb`)
# unpacked into a scratch root with dpkg -x: its control fields (version, the libraries it
# depends on), every file it must hold (the command, libgpumem.so and .a, the headers,
# gpumem.pc, the man page, the bash and zsh completions, no Python package), the command run
# from there (version, an example snapshot read back, an estimate), and a program built
# against the package's headers and library through its gpumem.pc.
set -u
BUILD=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

(cd "$BUILD" && cpack -G DEB -B "$work/out") >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; exit 1; }
deb=$(ls "$work"/out/gpumem_*.deb 2>/dev/null | head -1)
[ -f "$deb" ] || { cat "$work/cpack.log"; echo "FAIL no .deb"; exit 1; }
version=$("$GPUMEM" --version | awk 'NR==1{print $2}')
[ "$(dpkg-deb -f "$deb" Package)" = gpumem ] || fail "Package is not gpumem"
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "Version $(dpkg-deb -f "$deb" Version), the binary says $version"
case $(dpkg-deb -f "$deb" Depends) in *libjansson*zlib1g* | *zlib1g*libjansson*) ;;
*) fail "Depends lacks jansson or zlib: $(dpkg-deb -f "$deb" Depends)" ;; esac

root=$work/root
dpkg -x "$deb" "$root" || fail "dpkg -x failed"
for f in usr/bin/gpumem usr/include/gpumem/gpumem.h usr/share/man/man1/gpumem.1 \
    usr/share/bash-completion/completions/gpumem; do
    [ -f "$root/$f" ] || fail "no $f in the package"
done
lib=$(dirname "$(find "$root/usr/lib" -name 'libgpumem.so.*' | head -1)")
[ -f "$lib/libgpumem.a" ] && [ -f "$lib/pkgconfig/gpumem.pc" ] || fail "no libgpumem.a or gpumem.pc beside libgpumem.so in $lib"
ls "$root"/usr/share/zsh/*/_gpumem >/dev/null 2>&1 || fail "no zsh completion"
find "$root" -name '_core*.so' | grep -q . && fail "the Python package is in the .deb"

g=$root/usr/bin/gpumem
[ "$("$g" --version | awk 'NR==1{print $2}')" = "$version" ] || fail "the packaged gpumem --version"
(cd "$work" && "$g" snapshot example -o ex.pickle && "$g" snapshot peak ex.pickle >peak.txt) ||
    fail "the packaged gpumem cannot write and read an example snapshot"
grep -q '^device 0: peak' "$work/peak.txt" || fail "snapshot peak said: $(head -2 "$work/peak.txt")"
"$g" estimate --parameters 7B --bits 16 | grep -qx 'parameters: 7000000000' || fail "the packaged gpumem estimate"

cat >"$work/use.c" <<'C'
#include <gpumem/gpumem.h>
#include <stdio.h>
int main(void)
{
    const struct gm_model *m = gm_model_catalog_find("gpt2");
    printf("%s %s %llu\n", GM_VERSION_STRING, m ? m->name : "-", m ? (unsigned long long)m->n_layers : 0ULL);
    return m ? 0 : 1;
}
C
export PKG_CONFIG_PATH="$lib/pkgconfig"
if cc -o "$work/use" "$work/use.c" $(pkg-config --cflags --libs gpumem) 2>"$work/cc.log"; then
    out=$(LD_LIBRARY_PATH="$lib" "$work/use") || fail "the program built against the package failed: $out"
    [ "$out" = "$version gpt2 12" ] || fail "the program built against the package said: $out"
else
    fail "cannot build against the package's headers and gpumem.pc: $(cat "$work/cc.log")"
fi

[ $fails = 0 ] && echo "ok: $(basename "$deb"): fields, files, command and library work from a dpkg -x root"
exit $((fails > 0))
