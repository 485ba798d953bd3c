# SPDX-License-Identifier: MIT
# scripts/fetch-testdata.sh and tests/needs.sh, offline (file:// mirrors): on files made by the
# test, and on the real files of scripts/testdata.manifest where they are present.
gm_add_test(NAME testdata/fetch
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/testdata/fetch_test.sh)
gm_add_test(NAME testdata/fetch/third-party-data NEEDS third-party-data
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/testdata/fetch_test.sh --third-party-data)
