# SPDX-License-Identifier: MIT
# The committed man page must be what scripts/gen-man.sh makes from the current --help texts.
add_test(NAME docs/man-page
  COMMAND sh -c "sh '${PROJECT_SOURCE_DIR}/scripts/gen-man.sh' '$<TARGET_FILE:gpumem>' | diff -u '${PROJECT_SOURCE_DIR}/docs/gpumem.1' - >&2 || { echo 'docs/gpumem.1 is stale: run sh scripts/gen-man.sh build/gpumem > docs/gpumem.1' >&2; exit 1; }")

# Every code block of README.md and docs/*.md runs against this build as written
# (tests/docs/run_examples.py: the convention, and the markers of blocks that cannot run
# here); the blocks marked "needs third-party-data" run in a test of their own.  The runner
# itself: stale or untagged blocks fail it (tests/docs/runner_test.sh).  Python blocks need the
# package of this build, and the interpreter it was built for.
if(TARGET gpumem_python AND NOT GM_SANITIZE)
  file(GLOB GM_DOCS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
  set(GM_DOCS_RUN ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/docs/run_examples.py
    --build ${PROJECT_BINARY_DIR})
  add_test(NAME docs/examples
    COMMAND ${GM_DOCS_RUN} ${PROJECT_SOURCE_DIR}/README.md ${GM_DOCS})
  gm_add_test(NAME docs/examples/third-party-data NEEDS third-party-data
    COMMAND ${GM_DOCS_RUN} --third-party-data ${PROJECT_SOURCE_DIR}/README.md ${GM_DOCS})
  add_test(NAME docs/examples-runner
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/docs/runner_test.sh ${Python3_EXECUTABLE}
      ${PROJECT_BINARY_DIR})
  # `make golden`: the outputs shown rewritten from this build (with the third-party files
  # when they are found: needs.sh exits 77 without them, which is no failure here)
  add_custom_target(docs_golden
    COMMAND ${GM_DOCS_RUN} --update ${PROJECT_SOURCE_DIR}/README.md ${GM_DOCS}
    COMMAND sh -c "sh '${CMAKE_CURRENT_SOURCE_DIR}/needs.sh' third-party-data \"$@\"; [ $? -ne 1 ]"
      needs ${GM_DOCS_RUN} --third-party-data --update ${PROJECT_SOURCE_DIR}/README.md ${GM_DOCS}
    VERBATIM)
  foreach(t docs/examples docs/examples/third-party-data docs/examples-runner)
    set_tests_properties(${t} PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 300)
    set_property(TEST ${t} APPEND PROPERTY LABELS no-asan)
  endforeach()
endif()
