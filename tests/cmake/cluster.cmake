# SPDX-License-Identifier: MIT
# A job of many ranks, simulated: 256 synthetic rank files (../shared/tools/synth-snapshot),
# generated at test time into the build tree, digested and read back by the job's commands.
if(GM_PYTHON3)
  gm_add_test(NAME cluster/ranks-256 NEEDS shared-tools
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/cluster/scale.py $<TARGET_FILE:gpumem>
      ${CMAKE_CURRENT_BINARY_DIR}/cluster-ranks)
  set_tests_properties(cluster/ranks-256 PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 600)
endif()
