#!/bin/sh
# SPDX-License-Identifier: MIT
# House-rule checks that a compiler does not make (run by ctest as lint/house-rules):
#  - banned C functions anywhere in src/, cli/ (strcpy strcat sprintf vsprintf strtok atoi atol gets);
#  - the library never exits, aborts or prints to stdout/stderr by itself;
#  - the CLI includes only public headers.
set -u
cd "$(dirname "$0")/.."
fail=0

banned='(^|[^_[:alnum:]])(strcpy|strcat|sprintf|vsprintf|strtok|atoi|atol|gets)[[:space:]]*\('
if grep -rnE "$banned" src cli --include='*.c' --include='*.h' | grep -v 'snprintf\|vsnprintf'; then
    echo "lint: banned function used (see docs/style.md section 9)"
    fail=1
fi

noexit='(^|[^_[:alnum:]])(exit|_exit|abort|printf|puts|perror)[[:space:]]*\('
if grep -rnE "$noexit" src --include='*.c' --include='*.h' | grep -vE '^\S+:[0-9]+:\s*(/\*|\*|//)'; then
    echo "lint: library code must not exit, abort or print (return a gm_status instead)"
    fail=1
fi
if grep -rnE 'f?printf[[:space:]]*\([[:space:]]*std(out|err)' src --include='*.c'; then
    echo "lint: library code must not write to stdout/stderr"
    fail=1
fi

if grep -rnE '#include[[:space:]]+"(base|pickle|snapshot|model|estimate|alloc|device|report|analysis)/' cli; then
    echo "lint: the CLI may include only public headers (gpumem/*.h)"
    fail=1
fi

[ "$fail" -eq 0 ] && echo "lint: ok"
exit $fail
