# SPDX-License-Identifier: MIT
add_test(NAME lint/house-rules COMMAND sh ${PROJECT_SOURCE_DIR}/scripts/lint.sh)

# Static analysis of the library and CLI (cppcheck 2.10 in Debian 12): warnings, performance
# and portability findings fail the suite.  Style-level findings are not enforced.
find_program(GM_CPPCHECK cppcheck)
if(GM_CPPCHECK)
  add_test(NAME lint/cppcheck
    COMMAND ${GM_CPPCHECK} --enable=warning,performance,portability --error-exitcode=1 --quiet
      -I${PROJECT_SOURCE_DIR}/include -I${PROJECT_SOURCE_DIR}/src --suppress=missingIncludeSystem
      --inline-suppr -j2 ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/cli)
  set_tests_properties(lint/cppcheck PROPERTIES LABELS no-asan TIMEOUT 300)
endif()
