# SPDX-License-Identifier: MIT
# The example snapshot (generated at build time by the gpumem binary), its validation with
# Python's pickle, and the browser test of the HTML report (headless Debian Chromium through
# playwright-core; skipped with a message when they are not installed).
set(GM_EXAMPLE_PICKLE ${PROJECT_BINARY_DIR}/examples/train_leak.pickle)
add_custom_command(
  OUTPUT ${GM_EXAMPLE_PICKLE}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/examples
  COMMAND $<TARGET_FILE:gpumem> snapshot example --force -o ${GM_EXAMPLE_PICKLE}
  DEPENDS gpumem
  COMMENT "Writing the example snapshot examples/train_leak.pickle")
# 40 iterations: more than the report's findings list one by one
set(GM_EXAMPLE40_PICKLE ${PROJECT_BINARY_DIR}/examples/train_leak_40.pickle)
add_custom_command(
  OUTPUT ${GM_EXAMPLE40_PICKLE}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/examples
  COMMAND $<TARGET_FILE:gpumem> snapshot example --iterations 40 --force -o ${GM_EXAMPLE40_PICKLE}
  DEPENDS gpumem
  COMMENT "Writing the example snapshot examples/train_leak_40.pickle")
add_custom_target(gm_example ALL DEPENDS ${GM_EXAMPLE_PICKLE} ${GM_EXAMPLE40_PICKLE})

find_program(GM_PYTHON3 python3)
if(GM_PYTHON3)
  add_test(NAME report/example_pickle
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/report/check_example.py ${GM_EXAMPLE_PICKLE})
  set_tests_properties(report/example_pickle PROPERTIES ENVIRONMENT "${GM_TEST_ENV}")
endif()

find_program(GM_NODE node)
if(GM_NODE AND GM_PYTHON3)
  # inputs made at test time in the build folder (tests/browser/run.sh), then the checks of
  # tests/browser/report.test.js: gpumem's own files, then the real and large synthetic ones
  gm_add_test(NAME browser/report
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/browser/run.sh $<TARGET_FILE:gpumem>
      $<TARGET_FILE:gm_layout_at> ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/browser-inputs
      --screenshot ${PROJECT_BINARY_DIR}/artifacts --timing)
  gm_add_test(NAME browser/report/third-party-data NEEDS third-party-data shared-tools
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/browser/run.sh $<TARGET_FILE:gpumem>
      $<TARGET_FILE:gm_layout_at> ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/browser-inputs
      --third-party-data --timing)
  foreach(t browser/report browser/report/third-party-data)
    set_tests_properties(${t} PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" SKIP_RETURN_CODE 77 TIMEOUT 600)
    set_property(TEST ${t} APPEND PROPERTY LABELS no-asan)
  endforeach()
endif()

# gm_layout_at: the library's allocator layout at chosen events (the browser test compares the
# page's allocator state with it), and --check: at every event of a file the layout reserves
# what the timeline says and its blocks lie in their segments' pages.
add_executable(gm_layout_at ${CMAKE_CURRENT_SOURCE_DIR}/tools/layout_at.c)
target_compile_options(gm_layout_at PRIVATE ${GM_WARNINGS})
target_link_libraries(gm_layout_at PRIVATE gpumem_static)
foreach(f ${GM_EXAMPLE_PICKLE}
    ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/report/expandable.pickle
    ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/report/oom_two_devices.pickle)
  get_filename_component(name ${f} NAME_WE)
  add_test(NAME report/layout_${name} COMMAND gm_layout_at --check ${f})
  set_tests_properties(report/layout_${name} PROPERTIES ENVIRONMENT "${GM_TEST_ENV}")
endforeach()
# the real files ($GM_TESTDATA is set by tests/needs.sh)
foreach(name g6_compile_ctx_3dev_expandable_oom g5_tiny_2dev_expandable
    g7_record_stream_reuse_pyframes g3_time_us_snapshot_actions)
  gm_add_test(NAME report/layout_${name} NEEDS third-party-data
    COMMAND sh -c "exec \"$0\" --check \"$GM_TESTDATA/snapshots/$1.pickle\""
      $<TARGET_FILE:gm_layout_at> ${name})
  set_tests_properties(report/layout_${name} PROPERTIES ENVIRONMENT "${GM_TEST_ENV}")
endforeach()
