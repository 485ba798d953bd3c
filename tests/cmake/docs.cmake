# SPDX-License-Identifier: MIT
# The committed man page must be what scripts/gen-man.sh makes from the current --help texts.
add_test(NAME docs/man-page
  COMMAND sh -c "sh '${PROJECT_SOURCE_DIR}/scripts/gen-man.sh' '$<TARGET_FILE:gpumem>' | diff -u '${PROJECT_SOURCE_DIR}/docs/gpumem.1' - >&2 || { echo 'docs/gpumem.1 is stale: run sh scripts/gen-man.sh build/gpumem > docs/gpumem.1' >&2; exit 1; }")
