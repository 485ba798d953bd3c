# SPDX-License-Identifier: MIT
# gpumem measure: embed the PTX generated from src/measure/kernels.cu into the library as
# the C string gm_measure_ptx (scripts/regen-ptx.sh makes it; driver-abi.md section 2.4).
set(GM_MEASURE_PTX ${PROJECT_SOURCE_DIR}/src/measure/kernels.ptx)
set(GM_MEASURE_PTX_C ${PROJECT_BINARY_DIR}/generated/measure_ptx.c)
add_custom_command(
  OUTPUT ${GM_MEASURE_PTX_C}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/generated
  COMMAND ${CMAKE_COMMAND} -DIN=${GM_MEASURE_PTX} -DOUT=${GM_MEASURE_PTX_C}
          -DNAME=gm_measure_ptx -P ${PROJECT_SOURCE_DIR}/cmake/scripts/embed_text.cmake
  DEPENDS ${GM_MEASURE_PTX} ${PROJECT_SOURCE_DIR}/cmake/scripts/embed_text.cmake
  COMMENT "Embedding src/measure/kernels.ptx"
  VERBATIM)
target_sources(gpumem_obj PRIVATE ${GM_MEASURE_PTX_C})
