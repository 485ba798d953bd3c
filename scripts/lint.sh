#!/bin/sh
# SPDX-License-Identifier: MIT
# House-rule checks that a compiler does not make (run by ctest as lint/house-rules), over
# every folder of src/ (each one a library module), cli/ and preload/ (the interposer):
#  - banned C functions (strcpy strcat sprintf vsprintf strtok atoi atol gets): they write
#    past buffers or cannot report errors; use snprintf, strtoull/gm_parse_u64 instead;
#  - the library never exits, aborts or prints to stdout/stderr by itself (it returns a
#    gm_status with a struct gm_error, and only cli/ maps it to an exit code);
#  - the library reads no environment variable itself (getenv): its caller passes a gm_env_fn;
#  - the CLI includes only public headers (gpumem/*.h) and the internal ones it shares with
#    the library (gpumem/internal/*.h), never a module's own header.
set -u
cd "$(dirname "$0")/.."
fail=0

banned='(^|[^_[:alnum:]])(strcpy|strcat|sprintf|vsprintf|strtok|atoi|atol|gets)[[:space:]]*\('
if grep -rnE "$banned" src cli preload --include='*.c' --include='*.h' --include='*.cu' | grep -v 'snprintf\|vsnprintf'; then
    echo "lint: banned function used (snprintf, strtoull or gm_parse_u64 instead)"
    fail=1
fi

noexit='(^|[^_[:alnum:]])(exit|_exit|abort|printf|puts|perror)[[:space:]]*\('
if grep -rnE "$noexit" src --include='*.c' --include='*.h' --include='*.cu' | grep -vE '^\S+:[0-9]+:\s*(/\*|\*|//)'; then
    echo "lint: library code must not exit, abort or print (return a gm_status instead)"
    fail=1
fi
# The library reads no environment variable itself: a caller's gm_env_fn does (env.h).
if grep -rnE '(^|[^_[:alnum:]])(secure_)?getenv[[:space:]]*\(' src --include='*.c' --include='*.h' | grep -vE '^\S+:[0-9]+:\s*(/\*|\*|//)'; then
    echo "lint: library code must not read the environment (take a gm_env_fn from the caller)"
    fail=1
fi
if grep -rnE 'f?printf[[:space:]]*\([[:space:]]*std(out|err)' src --include='*.c'; then
    echo "lint: library code must not write to stdout/stderr"
    fail=1
fi

# the modules are the folders of src/, whatever they are
modules=$(find src -mindepth 1 -maxdepth 1 -type d -exec basename {} \; | sort | paste -sd'|' -)
if [ -z "$modules" ]; then
    echo "lint: no modules found under src/"
    fail=1
elif grep -rnE "#include[[:space:]]+\"($modules)/" cli; then
    echo "lint: the CLI may include only public headers (gpumem/*.h, gpumem/internal/*.h)"
    fail=1
fi

[ "$fail" -eq 0 ] && echo "lint: ok"
exit $fail
