# SPDX-License-Identifier: MIT
# Estimator checks over test data: the weight bytes of public checkpoints (weight formats,
# GGUF types per tensor) within 2% of their published sizes.
add_test(NAME estimate/checkpoint_sizes
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/estimate/checkpoint_sizes.sh $<TARGET_FILE:gpumem>
    $<TARGET_FILE:gm_mkmodelfile> ${CMAKE_CURRENT_SOURCE_DIR}/data/estimate/checkpoint_sizes.csv
    ${CMAKE_CURRENT_BINARY_DIR}/estimate-checkpoints)
set_tests_properties(estimate/checkpoint_sizes PROPERTIES ENVIRONMENT "${GM_TEST_ENV}")
