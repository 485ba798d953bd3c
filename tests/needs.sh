#!/bin/sh
# SPDX-License-Identifier: MIT
# needs.sh WHAT[,WHAT] COMMAND [ARG...] - run a test that needs files kept outside the
# repository, or skip it (exit 77, the tests' SKIP_RETURN_CODE) with the reason.
#
#   third-party-data  the real snapshots and config.json files of scripts/testdata.manifest,
#                     looked up in ../shared/testdata (beside the repository, as CI has it),
#                     then $GPUMEM_TESTDATA, then build/testdata (scripts/fetch-testdata.sh's
#                     default); the folder is exported as GM_TESTDATA
#   shared-tools      ../shared/tools/synth-snapshot, the independent snapshot generator kept
#                     beside the repository (not distributed with it); exported as GM_SYNTH
#
# ctest registers such tests with tests/CMakeLists.txt's gm_add_test(... NEEDS ...), which
# gives them the label of each WHAT.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
what=$1
shift

has_testdata() {
    while read -r file _; do
        case $file in '' | '#'*) continue ;; esac
        [ -f "$1/$file" ] || return 1
    done <"$root/scripts/testdata.manifest"
}

for need in $(echo "$what" | tr ',' ' '); do
    case $need in
    third-party-data)
        GM_TESTDATA=
        for dir in "$root/../shared/testdata" "${GPUMEM_TESTDATA:-}" "$root/build/testdata"; do
            if [ -n "$dir" ] && has_testdata "$dir"; then
                GM_TESTDATA=$(cd "$dir" && pwd)
                break
            fi
        done
        if [ -z "$GM_TESTDATA" ]; then
            echo "SKIPPED: real snapshot files not found: run scripts/fetch-testdata.sh"
            echo "(looked in ../shared/testdata, \$GPUMEM_TESTDATA and build/testdata)"
            exit 77
        fi
        export GM_TESTDATA
        ;;
    shared-tools)
        GM_SYNTH=$root/../shared/tools/synth-snapshot
        if [ ! -f "$GM_SYNTH" ]; then
            echo "SKIPPED: the snapshot generator ../shared/tools/synth-snapshot is not beside the repository"
            exit 77
        fi
        export GM_SYNTH
        ;;
    *)
        echo "needs.sh: unknown need '$need'" >&2
        exit 64
        ;;
    esac
done
exec "$@"
