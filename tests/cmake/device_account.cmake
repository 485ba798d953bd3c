# SPDX-License-Identifier: MIT
# gpumem account end to end, without a GPU: fake libraries named like the real ones
# (libcudart.so.12, libc10_cuda.so, libnccl.so.2, libcublas.so.12) that reach the fake driver
# directly, through cuGetProcAddress and through a dlopen'd handle, the job program that
# drives them from threads and forks, and the scenarios of tests/account/account_test.sh.
set(GM_ACCOUNT_FAKE_DIR ${GM_FAKE_DIR}/account)

function(gm_account_test_lib target file soname)
  add_library(${target} SHARED ${CMAKE_CURRENT_SOURCE_DIR}/account/${file})
  set_target_properties(${target} PROPERTIES
    PREFIX "" OUTPUT_NAME ${soname} SUFFIX "" NO_SONAME ON
    LIBRARY_OUTPUT_DIRECTORY ${GM_ACCOUNT_FAKE_DIR}
    BUILD_RPATH "${GM_ACCOUNT_FAKE_DIR};${GM_FAKE_DIR}"
    C_VISIBILITY_PRESET hidden)
  target_compile_options(${target} PRIVATE ${GM_WARNINGS} -Wno-missing-prototypes)
  target_link_options(${target} PRIVATE -Wl,-soname,${soname} -Wl,--no-undefined)
  target_link_libraries(${target} PRIVATE ${ARGN})
endfunction()

gm_account_test_lib(gm_account_cudart fake_cudart.c libcudart.so.12 Threads::Threads ${CMAKE_DL_LIBS})
gm_account_test_lib(gm_account_c10 fake_c10_cuda.c libc10_cuda.so gm_account_cudart)
gm_account_test_lib(gm_account_nccl fake_nccl.c libnccl.so.2 gm_fake_cuda)
gm_account_test_lib(gm_account_cublas fake_cublas.c libcublas.so.12 ${CMAKE_DL_LIBS})

add_executable(gm_account_job ${CMAKE_CURRENT_SOURCE_DIR}/account/job.c)
target_compile_options(gm_account_job PRIVATE ${GM_WARNINGS} -Wno-missing-prototypes)
target_link_libraries(gm_account_job PRIVATE gm_account_c10 gm_account_cudart gm_account_nccl
  gm_fake_cuda Threads::Threads ${CMAKE_DL_LIBS})
set_target_properties(gm_account_job PROPERTIES OUTPUT_NAME account_job
  RUNTIME_OUTPUT_DIRECTORY ${GM_ACCOUNT_FAKE_DIR}
  BUILD_RPATH "${GM_ACCOUNT_FAKE_DIR};${GM_FAKE_DIR}")
add_dependencies(gm_account_job gm_account_cublas gm_fake_nvml gpumem_account_preload)

set(GM_ACCOUNT_TEST_ENV ${GM_DEVICE_TEST_ENV})
if(GM_SANITIZE)
  # The sanitizer's runtime must come first among the preloaded libraries of the job.
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE GM_ASAN_RUNTIME OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND GM_ACCOUNT_TEST_ENV "GM_ASAN_PRELOAD=${GM_ASAN_RUNTIME}")
  # the dry run of scripts/gpu-check.sh runs the account step on the fake job too
  set_tests_properties(device/gpu-check-dryrun PROPERTIES
    ENVIRONMENT "${GM_DEVICE_TEST_ENV};GM_ASAN_PRELOAD=${GM_ASAN_RUNTIME}")
endif()
add_test(NAME account/end_to_end
  COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/account/account_test.sh $<TARGET_FILE:gpumem>)
set_tests_properties(account/end_to_end PROPERTIES ENVIRONMENT "${GM_ACCOUNT_TEST_ENV}" TIMEOUT 600)
