# SPDX-License-Identifier: MIT
# The Python package's tests (tests/python, unittest): the extension against the CLI and an
# independent reader, gpumem.torch against the suite's own fake torch, and the ways to install
# it (make install; pip install ., pip wheel . and pip install -e . offline, from the sdist).
#
# Under GM_SANITIZE the extension is built with ASan and UBSan, and the interpreter (which
# is not) must load the ASan runtime first: LD_PRELOAD of the compiler's shared libasan.
# Leak detection stays off there, because CPython keeps its own objects alive at exit by
# design; tests/python/test_snapshot.py checks the extension's own memory with a loop (and
# a small quarantine keeps ASan's own hold on freed memory out of that measure).
if(NOT TARGET gpumem_python)
  return()
endif()

set(GM_PYTHON_TEST_ENV ${GM_TEST_ENV}
  "PYTHONPATH=${PROJECT_BINARY_DIR}/python"
  "PYTHONDONTWRITEBYTECODE=1"
  "GPUMEM_CUDA_LIBRARY=${PROJECT_BINARY_DIR}/tests/fake/libcuda.so.1"
  "GPUMEM_NVML_LIBRARY=${PROJECT_BINARY_DIR}/tests/fake/libnvidia-ml.so.1"
  "GM_FAKE_DIR=${PROJECT_BINARY_DIR}/tests/fake"
  "GM_PYTHON_SITEDIR=${GM_PYTHON_SITEDIR}"
  "GM_INSTALL_PREFIX=${CMAKE_INSTALL_PREFIX}")
set(GM_PYTHON_SANITIZED OFF)
if(GM_SANITIZE)
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE GM_LIBASAN OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(IS_ABSOLUTE "${GM_LIBASAN}" AND EXISTS "${GM_LIBASAN}")
    list(APPEND GM_PYTHON_TEST_ENV "LD_PRELOAD=${GM_LIBASAN}"
      "ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:quarantine_size_mb=8"
      "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
    set(GM_PYTHON_SANITIZED ON)
  else()
    message(STATUS "gpumem: ${CMAKE_C_COMPILER} has no shared ASan runtime to preload: the Python tests are not run in this sanitizer build")
  endif()
endif()

# Each suite runs through tests/python/run.py: its tests marked @needs(...) (common.py) run
# as python/<suite>/<need>, skipped with the reason when those files are absent.
if(NOT GM_SANITIZE OR GM_PYTHON_SANITIZED)
  foreach(suite snapshot snapshot_api snapshot_documents torch sweep watch_phases estimate calibrate binding)
    set(dir ${CMAKE_CURRENT_SOURCE_DIR}/python)
    add_test(NAME python/${suite}
      COMMAND ${Python3_EXECUTABLE} ${dir}/run.py test_${suite} WORKING_DIRECTORY ${dir})
    set_tests_properties(python/${suite} PROPERTIES ENVIRONMENT "${GM_PYTHON_TEST_ENV}" TIMEOUT 300)
    if(suite STREQUAL "sweep")
      # (its runs wait for events, as long as a slow ASan build on a loaded machine needs:
      # the timeout is for a hang)
      set_tests_properties(python/${suite} PROPERTIES TIMEOUT 600)
    endif()
    foreach(need third-party-data shared-tools)
      file(STRINGS ${dir}/test_${suite}.py marked REGEX "@needs\\(\"${need}\"\\)")
      if(marked)
        gm_add_test(NAME python/${suite}/${need} NEEDS ${need} WORKING_DIRECTORY ${dir}
          COMMAND ${Python3_EXECUTABLE} ${dir}/run.py test_${suite} ${need})
        set_tests_properties(python/${suite}/${need} PROPERTIES ENVIRONMENT "${GM_PYTHON_TEST_ENV}"
          TIMEOUT 300)
      endif()
    endforeach()
  endforeach()
endif()

# Installing (tests/python/install_test.sh): `make install` into a staging folder, and pip
# (offline) into virtual environments of the python3 on PATH; each must give `import gpumem`.
# Not under the sanitizers: they build and test the same sources as the plain build.
if(NOT GM_SANITIZE)
  add_test(NAME python/install
    COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/python/install_test.sh ${PROJECT_BINARY_DIR} ${Python3_EXECUTABLE})
  set_tests_properties(python/install PROPERTIES ENVIRONMENT "${GM_PYTHON_TEST_ENV}" TIMEOUT 900
    LABELS no-asan)
endif()

# The package's Python: it compiles, pyflakes finds nothing (unused names, undefined names,
# shadowed imports), and pycodestyle's conventions hold (Debian's pyflakes3 and pycodestyle,
# scripts/install-deps.sh).
find_program(GM_PYFLAKES pyflakes3)
find_program(GM_PYCODESTYLE pycodestyle)
if(GM_PYFLAKES AND GM_PYCODESTYLE)
  add_test(NAME lint/python
    COMMAND sh -c "cd '${PROJECT_SOURCE_DIR}' && PYTHONPYCACHEPREFIX='${PROJECT_BINARY_DIR}/pycache' python3 -m py_compile python/gpumem/*.py python/gpumem_build.py && '${GM_PYFLAKES}' python/gpumem python/gpumem_build.py && '${GM_PYCODESTYLE}' --max-line-length=130 python/gpumem python/gpumem_build.py")
  set_tests_properties(lint/python PROPERTIES LABELS no-asan)
endif()

# The extension's C source follows the house format too (lint/format covers src cli include tests).
if(GM_CLANG_FORMAT)
  add_test(NAME lint/format-python
    COMMAND ${GM_CLANG_FORMAT} --dry-run -Werror ${PROJECT_SOURCE_DIR}/python/_core.c)
  set_tests_properties(lint/format-python PROPERTIES LABELS no-asan)
endif()
