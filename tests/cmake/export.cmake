# SPDX-License-Identifier: MIT
# snapshot export: each format checked against its specification and against gpumem's own
# figures (tests/export/check_export.py) on the example snapshot and, as a test of its own, on
# every real file.  Without libsqlite3 the SQLite tests skip with the reason.
find_program(GM_PYTHON3 python3)
if(GM_PYTHON3)
  foreach(fmt perfetto speedscope pprof sqlite)
    set(cmd ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/export/check_export.py ${fmt})
    if(fmt STREQUAL "sqlite" AND NOT GM_SQLITE_LIBS)
      set(cmd sh -c "echo 'SKIPPED: built without libsqlite3 (scripts/install-deps.sh installs libsqlite3-dev)'; exit 77")
      add_test(NAME export/${fmt} COMMAND ${cmd})
      set_tests_properties(export/${fmt} PROPERTIES SKIP_RETURN_CODE 77)
      continue()
    endif()
    add_test(NAME export/${fmt} COMMAND ${cmd} example)
    gm_add_test(NAME export/${fmt}/third-party-data NEEDS third-party-data
      COMMAND ${cmd} --third-party-data)
    set_tests_properties(export/${fmt} export/${fmt}/third-party-data PROPERTIES
      ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 300)
  endforeach()
endif()

# snapshot redact: the copy gives the original's figures and hides its texts
# (tests/export/check_redact.py), on the example and on every real file.
if(GM_PYTHON3)
  set(cmd ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/export/check_redact.py)
  add_test(NAME export/redact COMMAND ${cmd} example)
  gm_add_test(NAME export/redact/third-party-data NEEDS third-party-data
    COMMAND ${cmd} --third-party-data)
  set_tests_properties(export/redact export/redact/third-party-data PROPERTIES
    ENVIRONMENT "${GM_TEST_ENV}" TIMEOUT 300)
endif()
