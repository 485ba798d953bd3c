# SPDX-License-Identifier: MIT
# gpumem measure against the fake driver: the fake libcuda.so.1 gets the CPU versions of
# the measure kernels (tests/fake/fake_measure_kernels.c), and the whole command runs in
# tests/measure/measure_test.sh.
# Every fake libcuda built from fake_cuda.c needs them (it looks kernels up by name there).
foreach(t gm_fake_cuda gm_fake_cuda_pre11)
  if(TARGET ${t})
    target_sources(${t} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/fake/fake_measure_kernels.c)
    target_link_libraries(${t} PRIVATE m)
  endif()
endforeach()

# tests/measure/<case>/{cmd,stdout,exit[,stderr]}: golden tests run by tests/cli/run.sh with
# the fake drivers (timings are masked in the cmd files).
set(GM_MEASURE_TEST_ENV ${GM_TEST_ENV}
  "GPUMEM_CUDA_LIBRARY=${PROJECT_BINARY_DIR}/tests/fake/libcuda.so.1"
  "GPUMEM_NVML_LIBRARY=${PROJECT_BINARY_DIR}/tests/fake/libnvidia-ml.so.1"
  "GPUMEM_AMDSMI_LIBRARY=/nonexistent/libamd_smi.so")
file(GLOB GM_MEASURE_CASES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/measure/*/cmd)
foreach(cmdfile ${GM_MEASURE_CASES})
  get_filename_component(dir ${cmdfile} DIRECTORY)
  get_filename_component(case ${dir} NAME)
  add_test(NAME measure/${case}
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/cli/run.sh ${dir} $<TARGET_FILE:gpumem>)
  set_tests_properties(measure/${case} PROPERTIES ENVIRONMENT "${GM_MEASURE_TEST_ENV}")
endforeach()
if(TARGET gm_fake_cuda)
  add_custom_target(gm_measure_fakes ALL DEPENDS gm_fake_cuda gm_fake_nvml)
endif()

# Where a CUDA toolkit is installed (not in CI), ptxas checks the shipped PTX for every
# architecture from Turing to Blackwell.
find_program(GM_PTXAS ptxas PATHS /usr/local/cuda/bin NO_CACHE)
if(GM_PTXAS)
  foreach(arch sm_75 sm_80 sm_90 sm_100 sm_120)
    add_test(NAME measure/ptxas_${arch}
      COMMAND ${GM_PTXAS} -arch=${arch} ${PROJECT_SOURCE_DIR}/src/measure/kernels.ptx
              -o ${PROJECT_BINARY_DIR}/measure_${arch}.cubin)
  endforeach()
endif()
