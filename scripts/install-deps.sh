#!/bin/sh
# SPDX-License-Identifier: MIT
# Install what gpumem needs to build and test on Debian 12: the compiler tool chain, CMake,
# jansson, zlib, libsqlite3 (snapshot export --sqlite), cmocka, for the Python package
# Python's headers, NumPy, venv and pip (its build backend needs nothing else:
# python/gpumem_build.py), and for the browser
# tests of the HTML report Debian's Chromium and the npm package playwright-core (into
# tests/browser/node_modules; no browser download); curl for scripts/fetch-testdata.sh, zsh
# for the test of the zsh completion.
# Idempotent: installs only what is missing.
set -eu
cd "$(dirname "$0")/.."

pkgs="build-essential cmake pkg-config clang clang-format cppcheck libjansson-dev zlib1g-dev libsqlite3-dev libcmocka-dev python3 python3-dev python3-numpy python3-venv python3-pip pyflakes3 pycodestyle chromium curl zsh"
missing=""
for p in $pkgs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
# Node.js and npm may come from elsewhere than Debian (a newer node bundles its own npm, and
# Debian's npm package then conflicts with it): only ask Debian when the commands are missing.
command -v node >/dev/null 2>&1 || missing="$missing nodejs"
command -v npm >/dev/null 2>&1 || missing="$missing npm"
if [ -n "$missing" ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    echo "installing:$missing"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

if [ -f tests/browser/package.json ] && [ ! -d tests/browser/node_modules/playwright-core ]; then
    (cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --silent)
fi
echo "dependencies ok"
