# SPDX-License-Identifier: MIT
# Snapshot analysis: categories at the peak and leaks against the ground truth of small
# synthetic snapshots generated at test time (../shared/tools/synth-snapshot, $GM_SYNTH) into
# the build folder.
find_program(GM_PYTHON3 python3)
if(GM_PYTHON3)
  gm_add_test(NAME analysis/synth_accuracy NEEDS shared-tools
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/analysis/synth_accuracy.py
      $<TARGET_FILE:gpumem> ${CMAKE_CURRENT_BINARY_DIR}/analysis-synth)
  set_tests_properties(analysis/synth_accuracy PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 120)
endif()
