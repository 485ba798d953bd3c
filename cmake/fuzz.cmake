# SPDX-License-Identifier: MIT
# With GM_FUZZ=ON (clang), instrument the library itself for coverage, so that libFuzzer
# sees the parsers' branches and not only the fuzz target's entry function.
if(GM_FUZZ)
  target_compile_options(gpumem_obj PRIVATE -fsanitize=fuzzer-no-link)
endif()
