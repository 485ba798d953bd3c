#!/bin/sh
# SPDX-License-Identifier: MIT
# install_test.sh BUILD PYTHON - every way of installing the Python package gives a gpumem
# that imports (without PyTorch), reads a snapshot as the command does, and estimates:
#   1. `cmake --install` of BUILD (what `make install` runs) into a staging folder, for PYTHON;
#   2. `pip install .` offline (PIP_NO_INDEX) into a virtual environment made from the python3
#      on PATH WITHOUT the system's site packages (a pyenv, conda or python.org Python has no
#      `wheel` package there): the build backend python/gpumem_build.py needs nothing but the
#      standard library.  The source is the sdist (`make dist`'s tarball) unpacked, so the
#      tarball is shown to build and nothing is written into the checkout;
#   3. `pip wheel .` from the same tree: a valid wheel (METADATA, WHEEL, RECORD whose sha256 and
#      sizes match every file), installed into a second environment, gpumem command included;
#   4. `pip install -e .` into a third: gpumem comes from the tree's python/gpumem.
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
assert gpumem.estimate("gpt2", train=True, batch=2, seq=512)["parameters"] == 124439808
print(gpumem.Snapshot(sys.argv[1]).peak()["peak_bytes"])'
# check PYTHON WHERE LABEL: the package imports from WHERE, reads the snapshot and estimates
check() {
    out=$(cd "$work" && env -u PYTHONPATH ${4:+PYTHONPATH="$4"} "$1" -c "$check" "$work/ex.pickle" 2>&1) ||
        { fail "$3: $out"; return; }
    case $out in "$2"*) ;; *) fail "$3: imported the wrong gpumem: $out" ;; esac
    [ "$(echo "$out" | tail -1)" = "$want" ] || fail "$3: peak '$(echo "$out" | tail -1)', expected $want"
}

# 1. make install (cmake --install) into a staging folder
DESTDIR="$work/stage" cmake --install "$BUILD" >"$work/install.log" 2>&1 || {
    cat "$work/install.log"
    fail "cmake --install failed"
}
site="$work/stage$GM_INSTALL_PREFIX/$GM_PYTHON_SITEDIR"
[ -f "$site/gpumem/__init__.py" ] && [ -f "$site/gpumem/torch.py" ] || fail "no package in $site"
ls "$site"/gpumem/_core*.so >/dev/null 2>&1 || fail "no extension in $site/gpumem"
check "$PY" "$site/gpumem/__init__.py" "make install" "$site"

# 2. pip install . from the unpacked sdist, offline, in a venv of the python3 on PATH
pathpy=$(command -v python3)
echo "python3 on PATH: $pathpy ($("$pathpy" -c 'import sys; print(sys.version.split()[0])'))"
sdist=$(python3 "$GM_SOURCE_DIR/python/gpumem_build.py" sdist "$work" 2>"$work/sdist.log") ||
    { cat "$work/sdist.log"; fail "the sdist failed"; }
tar xzf "$sdist" -C "$work"
src=$(echo "$work"/gpumem-*/)
[ -f "$src/PKG-INFO" ] || fail "the sdist has no PKG-INFO"
"$pathpy" -m venv "$work/venv" || fail "python3 -m venv failed (Debian: python3-venv)"
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
if [ -x "$work/venv/bin/pip" ]; then
    if "$work/venv/bin/python" -c 'import wheel' 2>/dev/null; then
        echo "note: this environment has the wheel package; the backend does not use it"
    fi
    (cd "$work" && env -u PYTHONPATH "$work/venv/bin/pip" install --no-deps "$src") >"$work/pip.log" 2>&1 || {
        tail -30 "$work/pip.log"
        fail "pip install . failed"
    }
    check "$work/venv/bin/python" "$work/venv/" "pip install ."
    "$work/venv/bin/gpumem" --version >/dev/null || fail "pip install . gave no gpumem command"
    # gpumem account finds its interposer at ../lib/gpumem from the command's folder
    [ -f "$work/venv/lib/gpumem/libgpumem-account.so" ] ||
        fail "pip install . installed no libgpumem-account.so in lib/gpumem"

    # 3. pip wheel . (the build is reused), checked, and installed elsewhere
    (cd "$work" && env -u PYTHONPATH "$work/venv/bin/pip" wheel --no-deps -w "$work/wheels" "$src") \
        >"$work/wheel.log" 2>&1 || { tail -30 "$work/wheel.log"; fail "pip wheel . failed"; }
    whl=$(echo "$work"/wheels/gpumem-*.whl)
    "$pathpy" - "$whl" <<'PY' || fail "the wheel is not valid"
import base64, csv, hashlib, io, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = set(z.namelist())
di = [n.split("/")[0] for n in names if n.endswith(".dist-info/RECORD")]
assert len(di) == 1, names
for f in ("METADATA", "WHEEL", "RECORD"):
    assert di[0] + "/" + f in names, f
rows = [r for r in csv.reader(io.StringIO(z.read(di[0] + "/RECORD").decode())) if r]
listed = {r[0] for r in rows}
assert listed == names, (listed ^ names)
for path, digest, size in rows:
    if path.endswith("/RECORD"):
        continue
    data = z.read(path)
    want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert digest == want and int(size) == len(data), path
assert any(n.startswith("gpumem/_core") and n.endswith(".so") for n in names), names
assert "Root-Is-Purelib: false" in z.read(di[0] + "/WHEEL").decode()
print("wheel ok: %s, %d files" % (sys.argv[1].split("/")[-1], len(names)))
PY
    "$pathpy" -m venv "$work/venv2"
    env -u PYTHONPATH "$work/venv2/bin/pip" install --no-deps "$whl" >"$work/pip2.log" 2>&1 ||
        { tail -20 "$work/pip2.log"; fail "installing the wheel failed"; }
    check "$work/venv2/bin/python" "$work/venv2/" "the wheel"
    "$work/venv2/bin/gpumem" snapshot peak "$work/ex.pickle" >/dev/null || fail "the wheel's gpumem command"

    # 4. pip install -e .
    "$pathpy" -m venv "$work/venv3"
    (cd "$work" && env -u PYTHONPATH "$work/venv3/bin/pip" install --no-deps -e "$src") >"$work/pip3.log" 2>&1 ||
        { tail -20 "$work/pip3.log"; fail "pip install -e . failed"; }
    check "$work/venv3/bin/python" "${src}python/gpumem/__init__.py" "pip install -e ."
fi

[ "$fails" -eq 0 ] && echo "install: ok (make install; pip install ., pip wheel . and pip install -e . offline)"
exit "$fails"
