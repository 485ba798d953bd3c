# SPDX-License-Identifier: MIT
# Snapshot reader: exact agreement with an independent Python reference on the synthetic test
# files and every real one, hostile inputs (exit 65, never a crash), the fast reader against the
# general one, and the CLI and the HTML report naming the same user frame for every stack and
# counting the same stacks (one rule in the library).  Each script reads the real files alone
# with --third-party-data, as a test of its own.
find_program(GM_PYTHON3 python3)
if(GM_PYTHON3)
  foreach(t reference hostile fast-path cli-html-agree)
    string(REPLACE "-" "_" script ${t})
    if(t STREQUAL "reference")
      set(cmd sh ${CMAKE_CURRENT_SOURCE_DIR}/snapshot/run_reference.sh)
    else()
      set(cmd ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/snapshot/${script}.py)
    endif()
    add_test(NAME snapshot/${t} COMMAND ${cmd} $<TARGET_FILE:gpumem>)
    gm_add_test(NAME snapshot/${t}/third-party-data NEEDS third-party-data
      COMMAND ${cmd} $<TARGET_FILE:gpumem> --third-party-data)
    set_tests_properties(snapshot/${t} snapshot/${t}/third-party-data PROPERTIES
      ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 300)
  endforeach()
endif()
if(GM_PYTHON3)
  # files that change while they are read, and FIFOs given as snapshots
  gm_add_test(NAME snapshot/changing-input NEEDS shared-tools
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/snapshot/changing_input.py $<TARGET_FILE:gpumem>)
  set_tests_properties(snapshot/changing-input PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 300)
endif()
if(GM_PYTHON3)
  # peak RSS as a ratio of the input: a generated 200 MB snapshot, a memo bomb under
  # ulimit -v, --memory-limit (bench/measure reports each command's own RSS)
  gm_add_test(NAME snapshot/memory-bound NEEDS shared-tools
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/snapshot/memory_bound.py
      $<TARGET_FILE:gpumem> $<TARGET_FILE:bench_measure>)
  set_tests_properties(snapshot/memory-bound PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 900)
  set_property(TEST snapshot/memory-bound APPEND PROPERTY LABELS no-asan)
endif()
if(GM_PYTHON3)
  # standard input and gzip'd files: their first bytes checked as they arrive, the spool
  # bounded (a stream of zeros costs its first bytes, not a copy of it)
  add_test(NAME snapshot/spool
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/snapshot/spool.py $<TARGET_FILE:gpumem>)
  set_tests_properties(snapshot/spool PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 300)
endif()
if(GM_PYTHON3)
  # small files that describe far more than their size through memo references: every
  # command's CPU time within 1 s + 1 us per input byte (CPU-time bounds are the optimized
  # build's: ASan's runtime multiplies them)
  add_test(NAME snapshot/amplification
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/snapshot/amplification.py
      $<TARGET_FILE:gpumem>)
  set_tests_properties(snapshot/amplification PROPERTIES ENVIRONMENT "${GM_TEST_ENV}"
    TIMEOUT 600 LABELS no-asan)
endif()
