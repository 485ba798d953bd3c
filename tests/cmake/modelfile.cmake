# SPDX-License-Identifier: MIT
# mkmodelfile: writes sparse safetensors / GGUF files for the estimate_* CLI golden tests
# (run as "$GM_BINARY_DIR/tests/gm_mkmodelfile").
add_executable(gm_mkmodelfile ${CMAKE_CURRENT_SOURCE_DIR}/tools/mkmodelfile.c)
target_include_directories(gm_mkmodelfile PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
target_compile_options(gm_mkmodelfile PRIVATE ${GM_WARNINGS} -Wno-missing-prototypes)

# JSON inputs parsed within a memory budget: hostile safetensors headers, index.json,
# config.json and the documents of `gpumem sheet` (and its --memory-limit) under an
# address-space limit, with the peak RSS held against the file size.
find_program(GM_PYTHON3 python3)
if(GM_PYTHON3)
  add_test(NAME model/json_memory
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/model/json_memory.py
      $<TARGET_FILE:gpumem> ${CMAKE_CURRENT_BINARY_DIR}/json-memory)
  # an address-space limit cannot hold under ASan's shadow memory
  set_tests_properties(model/json_memory PROPERTIES ENVIRONMENT "${GM_TEST_ENV}" LABELS no-asan
    TIMEOUT 120)
endif()
