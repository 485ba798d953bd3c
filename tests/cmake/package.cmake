# SPDX-License-Identifier: MIT
# Installing like real software: the source tarball of `make dist` builds on its own, the
# Debian package of `make deb` (cpack, this build's install rules) works from a dpkg -x root,
# and the generated bash and zsh completions complete what the option tables hold.  The first
# two build or package the plain build: not under the sanitizers.
if(NOT GM_SANITIZE)
  add_test(NAME package/dist COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/package/dist_test.sh)
  add_test(NAME package/deb
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/package/deb_test.sh ${PROJECT_BINARY_DIR})
  set_tests_properties(package/dist package/deb PROPERTIES ENVIRONMENT "${GM_TEST_ENV}"
    TIMEOUT 600 LABELS no-asan)
endif()
if(TARGET gm_completions)
  add_test(NAME package/completions
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/package/completion_test.sh ${PROJECT_BINARY_DIR})
  set_tests_properties(package/completions PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 300)
endif()
