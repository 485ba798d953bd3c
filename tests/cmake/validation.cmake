# SPDX-License-Identifier: MIT
# Validation against public GPU-memory measurements (tests/data/validation/*.csv, each row
# with its source repository, path and commit): `gpumem estimate` for every row, the median
# |error| and the share within 10% per source and counter; fails when the median |error|
# over all measured rows is above 10%.  `make bench` prints the same table.
find_program(GM_PYTHON3 python3)
if(GM_PYTHON3)
  # Under the sanitizers every 8th distinct run, checked only for succeeding: the figures are
  # the plain build's, and the whole table there costs about 390 CPU seconds, more than a
  # third of `make check`.
  if(GM_SANITIZE)
    set(gm_validation_mode --sample=8)
  else()
    set(gm_validation_mode --check)
  endif()
  add_test(NAME validation/public_measurements
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/validation/validate.py ${gm_validation_mode}
      $<TARGET_FILE:gpumem> ${CMAKE_CURRENT_SOURCE_DIR}/data/validation)
  set_tests_properties(validation/public_measurements PROPERTIES ENVIRONMENT "${GM_TEST_ENV}"
    TIMEOUT 600)
  # validate.py's --check itself: undeclared skips, declared skips that no longer happen,
  # refused rows and unknown counters fail it
  add_test(NAME validation/check_rules
    COMMAND ${GM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/validation/test_validate.py
      $<TARGET_FILE:gpumem>)
  set_tests_properties(validation/check_rules PROPERTIES ENVIRONMENT "${GM_TEST_ENV}")
endif()
