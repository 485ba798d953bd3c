# SPDX-License-Identifier: MIT
# The commands that read several snapshot files at once, one thread per file, and a load
# whose consumers run on a worker thread: under ThreadSanitizer with `make tsan` (ctest -L
# threads), and in every build.  The unit tests of the loader and of the analysis run under
# it too: their worker cases reach what the commands cannot choose (a consumer abandoned
# mid-trace, several devices, the events kept aside, a parse failing with jobs in flight).
foreach(t unit/test_snapshot unit/test_snapshot/third-party-data unit/test_analysis
    unit/test_analysis/third-party-data)
  if(TEST ${t})
    set_property(TEST ${t} APPEND PROPERTY LABELS threads)
  endif()
endforeach()
find_program(GM_PYTHON3 python3)
if(GM_PYTHON3)
  add_test(NAME threads/load-ranks
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/threads/load_ranks.sh $<TARGET_FILE:gpumem>)
  set_tests_properties(threads/load-ranks PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" LABELS threads
    TIMEOUT 300)
  add_test(NAME threads/load-worker
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/threads/load_worker.sh $<TARGET_FILE:gpumem>)
  set_tests_properties(threads/load-worker PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" LABELS threads
    TIMEOUT 300 SKIP_RETURN_CODE 77)
endif()
