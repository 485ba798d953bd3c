# SPDX-License-Identifier: MIT
# gpumem account's interposer, libgpumem-account.so (preload/): loaded with LD_PRELOAD into
# the processes of a job.  It is not the library: its own sources, the one shared
# classification table (src/account/classify.c), the C library and nothing else (no
# jansson), every symbol hidden but the driver entry points it wraps and dlsym.  Built beside
# the gpumem executable, which finds it there (gm_account_preload_path()), and installed in
# <libdir>/gpumem/.  A source tree without preload/ (the copy the Python package is built
# from) builds the library and the CLI without it.

# Where an installed gpumem looks for it (relative to the executable).
file(RELATIVE_PATH GM_PRELOAD_FROM_BIN ${CMAKE_INSTALL_FULL_BINDIR}
  ${CMAKE_INSTALL_FULL_LIBDIR}/gpumem)
target_compile_definitions(gpumem_obj PRIVATE GM_PRELOAD_FROM_BIN="${GM_PRELOAD_FROM_BIN}")
if(NOT EXISTS ${PROJECT_SOURCE_DIR}/preload/output.c)
  message(STATUS "gpumem: no preload/ in this source tree: libgpumem-account.so is not built")
  return()
endif()

enable_language(ASM)
file(GLOB GM_PRELOAD_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/preload/*.c)
set(GM_PRELOAD_ENTRY)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|aarch64|arm64")
  set(GM_PRELOAD_ENTRY ${PROJECT_SOURCE_DIR}/preload/dlsym_entry.S)
endif()
add_library(gpumem_account_preload SHARED ${GM_PRELOAD_SOURCES} ${GM_PRELOAD_ENTRY}
  ${PROJECT_SOURCE_DIR}/src/account/classify.c)
set_target_properties(gpumem_account_preload PROPERTIES
  OUTPUT_NAME gpumem-account
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}
  C_VISIBILITY_PRESET hidden
  NO_SONAME ON)
# src/ for the driver's types (device/cuda_abi.h) and the classification table's header only
target_include_directories(gpumem_account_preload PRIVATE ${PROJECT_SOURCE_DIR}/include
  ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/preload)
target_compile_definitions(gpumem_account_preload PRIVATE
  GM_VERSION_STRING="${PROJECT_VERSION}")
# The wrappers are exported under the driver's names: no prototypes of ours to see.
target_compile_options(gpumem_account_preload PRIVATE
  $<$<COMPILE_LANGUAGE:C>:${GM_WARNINGS} -Wno-missing-prototypes>)
target_link_options(gpumem_account_preload PRIVATE -Wl,--no-undefined)
target_link_libraries(gpumem_account_preload PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
install(TARGETS gpumem_account_preload LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/gpumem)
