# SPDX-License-Identifier: MIT
# The fake driver libraries (tests/fake/), the workload program that allocates through the
# fake CUDA, and the end-to-end tests of `gpumem environment` and `gpumem watch`.
# The fakes live only in the build tree and are never installed.
set(GM_FAKE_DIR ${PROJECT_BINARY_DIR}/tests/fake)

function(gm_fake_library target soname dir)
  add_library(${target} SHARED ${ARGN} ${CMAKE_CURRENT_SOURCE_DIR}/fake/fake_common.c)
  # SUFFIX ".so.1" and an explicit SONAME: the file is exactly what the real driver ships,
  # with no unversioned "libcuda.so" symlink beside it.
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME ${soname} SUFFIX "" NO_SONAME ON
    LIBRARY_OUTPUT_DIRECTORY ${dir}
    C_VISIBILITY_PRESET hidden)
  # The exported entry points have no header of ours: no prototypes to see.
  target_compile_options(${target} PRIVATE ${GM_WARNINGS} -Wno-missing-prototypes)
  # -Bsymbolic-functions: the library's calls and function addresses stay its own, as in the
  # real driver, so an interposer of the same names never sees the driver calling itself.
  target_link_options(${target} PRIVATE -Wl,-soname,${soname} -Wl,--no-undefined
    -Wl,-Bsymbolic-functions)
  target_link_libraries(${target} PRIVATE Threads::Threads)
  # the driver's types as gpumem declares them (src/device/cuda_abi.h)
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src)
endfunction()

find_package(Threads REQUIRED)
# The full fake: also what gpumem account's interposer hooks (contexts, cuGetProcAddress, every
# kind of memory, libraries, graphs).
gm_fake_library(gm_fake_cuda libcuda.so.1 ${GM_FAKE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/fake/fake_cuda.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fake/fake_cuda_proc.c ${CMAKE_CURRENT_SOURCE_DIR}/fake/fake_cuda_mem.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fake/fake_cuda_graph.c)
gm_fake_library(gm_fake_nvml libnvidia-ml.so.1 ${GM_FAKE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/fake/fake_nvml.c)
# A variant with only the names of drivers before CUDA 11: exercises the fallback names.
gm_fake_library(gm_fake_cuda_pre11 libcuda.so.1 ${GM_FAKE_DIR}/pre11
  ${CMAKE_CURRENT_SOURCE_DIR}/fake/fake_cuda.c)
target_compile_definitions(gm_fake_cuda_pre11 PRIVATE FAKE_CUDA_PRE_11=1)
# A variant without the unversioned (v1) process list: exercises _v3/_v2 and the stride probe.
gm_fake_library(gm_fake_nvml_nov1 libnvidia-ml.so.1 ${GM_FAKE_DIR}/nov1
  ${CMAKE_CURRENT_SOURCE_DIR}/fake/fake_nvml.c)
target_compile_definitions(gm_fake_nvml_nov1 PRIVATE FAKE_NVML_NO_V1_PROCESSES=1)
# AMD SMI as ROCm ships it (SONAME libamd_smi.so.<library major>); the ABI generation it
# mimics is chosen at run time by GPUMEM_FAKE_AMD_VERSION.
gm_fake_library(gm_fake_amdsmi libamd_smi.so.26 ${GM_FAKE_DIR} ${CMAKE_CURRENT_SOURCE_DIR}/fake/fake_amdsmi.c)

# A program that allocates and frees through the device API (and so the fake CUDA) on a
# script of steps, for `watch` to follow.
# Its "seen" step reads the fake NVML's count of the process lists it handed out from the
# state file (fake_common.c).
add_executable(gm_workload ${CMAKE_CURRENT_SOURCE_DIR}/device/workload.c
  ${CMAKE_CURRENT_SOURCE_DIR}/fake/fake_common.c)
target_compile_options(gm_workload PRIVATE ${GM_WARNINGS})
target_include_directories(gm_workload PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/fake)
target_link_libraries(gm_workload PRIVATE gpumem_static)
set_target_properties(gm_workload PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${GM_FAKE_DIR})

set(GM_DEVICE_TEST_ENV ${GM_TEST_ENV}
  "GM_FAKE_DIR=${GM_FAKE_DIR}"
  "GPUMEM_CUDA_LIBRARY=${GM_FAKE_DIR}/libcuda.so.1"
  "GPUMEM_NVML_LIBRARY=${GM_FAKE_DIR}/libnvidia-ml.so.1"
  "GPUMEM_AMDSMI_LIBRARY=/nonexistent/libamd_smi.so")

if(TARGET test_device)
  add_dependencies(test_device gm_fake_cuda gm_fake_cuda_pre11 gm_fake_nvml gm_fake_nvml_nov1
    gm_fake_amdsmi gm_workload)
  set_tests_properties(unit/test_device PROPERTIES ENVIRONMENT "${GM_DEVICE_TEST_ENV}")
endif()

# (the timeouts are for a hang: the scripts wait for events, however slow an ASan build on a
# loaded machine makes them)
add_test(NAME device/watch
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/device/watch_test.sh $<TARGET_FILE:gpumem>)
set_tests_properties(device/watch PROPERTIES ENVIRONMENT "${GM_DEVICE_TEST_ENV}" TIMEOUT 600)

# scripts/gpu-check.sh against the fakes and a stand-in nvidia-smi (its logic, not the GPU).
add_test(NAME device/gpu-check-dryrun
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/device/gpu_check_dryrun.sh $<TARGET_FILE:gpumem>)
set_tests_properties(device/gpu-check-dryrun PROPERTIES ENVIRONMENT "${GM_DEVICE_TEST_ENV}" TIMEOUT 600)
