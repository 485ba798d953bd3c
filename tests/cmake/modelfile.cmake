# SPDX-License-Identifier: MIT
# mkmodelfile: writes sparse safetensors / GGUF files for the estimate6_* CLI golden tests
# (run as "$GM_BINARY_DIR/tests/gm_mkmodelfile").
add_executable(gm_mkmodelfile ${CMAKE_CURRENT_SOURCE_DIR}/tools/mkmodelfile.c)
target_include_directories(gm_mkmodelfile PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/unit)
target_compile_options(gm_mkmodelfile PRIVATE ${GM_WARNINGS} -Wno-missing-prototypes)
