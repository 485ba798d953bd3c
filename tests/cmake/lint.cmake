# SPDX-License-Identifier: MIT
add_test(NAME lint/house-rules COMMAND sh ${PROJECT_SOURCE_DIR}/scripts/lint.sh)

# Symbol hygiene (nm): module-prefixed globals, and libgpumem.so exporting the public API only.
find_program(GM_NM nm)
if(GM_NM)
  add_test(NAME lint/symbols
    COMMAND sh ${PROJECT_SOURCE_DIR}/scripts/symbols.sh $<TARGET_FILE:gpumem_static>
      $<TARGET_FILE:gpumem_shared>)
  # the sanitizer build adds symbols of its own
  set_tests_properties(lint/symbols PROPERTIES LABELS no-asan)
endif()

# Static analysis of the library and CLI (cppcheck 2.10 in Debian 12): warnings, performance
# and portability findings fail the suite.  Style-level findings are not enforced.
find_program(GM_CPPCHECK cppcheck)
if(GM_CPPCHECK)
  add_test(NAME lint/cppcheck
    COMMAND ${GM_CPPCHECK} --enable=warning,performance,portability --error-exitcode=1 --quiet
      -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR}/src --suppress=missingIncludeSystem
      --inline-suppr -j2 ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/cli)
  # (the timeout is for a hang: on a loaded 2-core machine the analysis itself ran past 300 s)
  set_tests_properties(lint/cppcheck PROPERTIES LABELS no-asan TIMEOUT 900)
endif()

# Formatting (.clang-format, clang-format 14): `make format` fixes what this reports.
find_program(GM_CLANG_FORMAT clang-format)
if(GM_CLANG_FORMAT)
  add_test(NAME lint/format
    COMMAND sh -c "cd '${PROJECT_SOURCE_DIR}' && find src cli include tests -name '*.[ch]' -not -path '*/corpus/*' -not -path '*/node_modules/*' | sort | xargs '${GM_CLANG_FORMAT}' --dry-run -Werror")
  set_tests_properties(lint/format PROPERTIES LABELS no-asan)
endif()
