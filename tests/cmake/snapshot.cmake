# SPDX-License-Identifier: MIT
# Snapshot reader: exact agreement with an independent Python reference on every real test
# file and the synthetic ones, and hostile inputs (exit 65, never a crash).
find_program(GM_PYTHON3 python3)
if(GM_PYTHON3)
  add_test(NAME snapshot/reference
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/snapshot/run_reference.sh $<TARGET_FILE:gpumem>)
  set_tests_properties(snapshot/reference PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 300)
  add_test(NAME snapshot/hostile
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/snapshot/hostile.py $<TARGET_FILE:gpumem>)
  set_tests_properties(snapshot/hostile PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 300)
endif()
if(GM_PYTHON3)
  add_test(NAME snapshot/fast-path
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/snapshot/fast_path.py $<TARGET_FILE:gpumem>)
  set_tests_properties(snapshot/fast-path PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 300)
endif()
if(GM_PYTHON3)
  # files that change while they are read, and FIFOs given as snapshots
  add_test(NAME snapshot/changing-input
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/snapshot/changing_input.py $<TARGET_FILE:gpumem>)
  set_tests_properties(snapshot/changing-input PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 300)
endif()
if(GM_PYTHON3)
  # peak RSS as a ratio of the input: a generated 200 MB snapshot, a memo bomb under
  # ulimit -v, --memory-limit (bench/measure reports each command's own RSS)
  add_test(NAME snapshot/memory-bound
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/snapshot/memory_bound.py
      $<TARGET_FILE:gpumem> $<TARGET_FILE:bench_measure>)
  set_tests_properties(snapshot/memory-bound PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 900
    LABELS no-asan)
endif()
if(GM_PYTHON3)
  # the CLI and the HTML report name the same user frame for every stack, and count the
  # same stacks (one rule in the library)
  add_test(NAME snapshot/cli-html-agree
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/snapshot/cli_html_agree.py $<TARGET_FILE:gpumem>)
  set_tests_properties(snapshot/cli-html-agree PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 300)
endif()
