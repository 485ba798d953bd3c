#!/bin/sh
# SPDX-License-Identifier: MIT
# install_test.sh BUILD PYTHON - both ways of installing the Python package give a gpumem
# that imports (without PyTorch) and reads a snapshot as the command does:
#   1. `cmake --install` of BUILD (what `make install` runs) into a staging folder;
#   2. `pip install --no-build-isolation --no-index .` into a new virtual environment (with
#      the system's site packages for setuptools, wheel and NumPy), from a copy of the
#      source tree so that nothing is written into the checkout.
# Environment (ctest): GM_SOURCE_DIR, GPUMEM, GM_INSTALL_PREFIX, GM_PYTHON_SITEDIR.
set -eu
BUILD=$1
PY=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fails=0
fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

"$GPUMEM" snapshot example -o "$work/ex.pickle"
want=$("$GPUMEM" snapshot peak --json "$work/ex.pickle" | sed -n 's/^ *"peak_bytes": \([0-9]*\),$/\1/p')
[ -n "$want" ] || fail "no peak from gpumem snapshot peak --json"
check='import sys
sys.modules["torch"] = None
import gpumem, gpumem.torch
print(gpumem.__file__)
print(gpumem.Snapshot(sys.argv[1]).peak()["peak_bytes"])'

# 1. make install (cmake --install) into a staging folder
DESTDIR="$work/stage" cmake --install "$BUILD" >"$work/install.log" 2>&1 || {
    cat "$work/install.log"
    fail "cmake --install failed"
}
site="$work/stage$GM_INSTALL_PREFIX/$GM_PYTHON_SITEDIR"
[ -f "$site/gpumem/__init__.py" ] && [ -f "$site/gpumem/torch.py" ] || fail "no package in $site"
ls "$site"/gpumem/_core*.so >/dev/null 2>&1 || fail "no extension in $site/gpumem"
out=$(cd "$work" && env -u PYTHONPATH PYTHONPATH="$site" "$PY" -c "$check" "$work/ex.pickle" 2>&1) || fail "import after make install: $out"
case $out in "$site/gpumem/__init__.py"*) ;; *) fail "imported the wrong gpumem: $out" ;; esac
[ "$(echo "$out" | tail -1)" = "$want" ] || fail "make install: peak '$(echo "$out" | tail -1)', expected $want"

# 2. pip install . (offline, no build isolation) into a virtual environment
src="$work/src"
mkdir "$src"
(cd "$GM_SOURCE_DIR" && tar cf - CMakeLists.txt cmake cli include src python setup.py pyproject.toml \
    gpumem.pc.in LICENSE) | (cd "$src" && tar xf -)
rm -rf "$src/python/gpumem.egg-info"
"$PY" -m venv --system-site-packages "$work/venv" || fail "python3 -m venv failed (Debian: python3-venv)"
if [ -x "$work/venv/bin/pip" ]; then
    (cd "$work" && env -u PYTHONPATH "$work/venv/bin/pip" install --no-build-isolation --no-index --no-deps \
        --quiet "$src") >"$work/pip.log" 2>&1 || {
        tail -30 "$work/pip.log"
        fail "pip install failed"
    }
    out=$(cd "$work" && env -u PYTHONPATH "$work/venv/bin/python" -c "$check" "$work/ex.pickle" 2>&1) || fail "import after pip install: $out"
    case $out in "$work/venv/"*) ;; *) fail "pip: imported the wrong gpumem: $out" ;; esac
    [ "$(echo "$out" | tail -1)" = "$want" ] || fail "pip install: peak '$(echo "$out" | tail -1)', expected $want"
fi

[ "$fails" -eq 0 ] && echo "install: ok (make install and pip install . both import gpumem)"
exit "$fails"
