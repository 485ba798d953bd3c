# SPDX-License-Identifier: MIT
# The Python package (python/): the C extension gpumem._core (python/_core.c, over the static
# library) and the pure-Python modules of python/gpumem/, assembled in the build tree as
# ${PROJECT_BINARY_DIR}/python/gpumem so that PYTHONPATH=build/python imports this build.
# `make install` (cmake --install) puts the package into the interpreter's site directory
# under the install prefix; `pip install .` builds the same target through the build backend
# python/gpumem_build.py.
#
# The interpreter: -DPython3_EXECUTABLE=..., else an active virtual environment, else
# Debian's own /usr/bin/python3 (python3-dev and python3-numpy are Debian packages; another
# python3 first on PATH, e.g. a pyenv build, may lack them), else whatever FindPython finds.
option(GM_PYTHON "Build the Python package gpumem (needs Python 3.9+ headers)" ON)
if(NOT GM_PYTHON)
  return()
endif()
if(NOT Python3_EXECUTABLE AND NOT DEFINED ENV{VIRTUAL_ENV} AND EXISTS /usr/bin/python3)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
set(Python3_FIND_VIRTUALENV FIRST)
find_package(Python3 3.9 COMPONENTS Interpreter Development.Module)
if(NOT Python3_Development.Module_FOUND)
  message(STATUS "gpumem: no Python 3.9+ development headers found: the Python package is not built (Debian: python3-dev)")
  return()
endif()

set(GM_PYTHON_DIR ${PROJECT_BINARY_DIR}/python)
Python3_add_library(gpumem_python MODULE WITH_SOABI ${PROJECT_SOURCE_DIR}/python/_core.c)
set_target_properties(gpumem_python PROPERTIES
  OUTPUT_NAME _core
  LIBRARY_OUTPUT_DIRECTORY ${GM_PYTHON_DIR}/gpumem
  C_VISIBILITY_PRESET hidden)
target_compile_options(gpumem_python PRIVATE ${GM_WARNINGS})
target_link_libraries(gpumem_python PRIVATE gpumem_static)

# The pure-Python modules, copied beside the extension.
file(GLOB GM_PYTHON_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/gpumem/*.py)
set(GM_PYTHON_COPIES)
foreach(src ${GM_PYTHON_SOURCES})
  get_filename_component(name ${src} NAME)
  add_custom_command(OUTPUT ${GM_PYTHON_DIR}/gpumem/${name}
    COMMAND ${CMAKE_COMMAND} -E copy_if_different ${src} ${GM_PYTHON_DIR}/gpumem/${name}
    DEPENDS ${src} VERBATIM)
  list(APPEND GM_PYTHON_COPIES ${GM_PYTHON_DIR}/gpumem/${name})
endforeach()
add_custom_target(gpumem_python_sources ALL DEPENDS ${GM_PYTHON_COPIES})
add_dependencies(gpumem_python gpumem_python_sources)

# The site directory under the install prefix: the interpreter's own platlib when it lies
# under the prefix (Debian: /usr/local/lib/python3.X/dist-packages), else the standard
# prefix layout lib/python3.X/site-packages.  -DGM_PYTHON_SITEDIR=... overrides it.
if(NOT GM_PYTHON_SITEDIR)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} -c
      "import sys, sysconfig, os.path as p; pre = p.normpath(sys.argv[1]); lib = sysconfig.get_path('platlib'); print(p.relpath(lib, pre) if lib.startswith(pre + '/') else sysconfig.get_path('platlib', 'posix_prefix', vars={'platbase': '', 'base': ''}).lstrip('/'))"
      ${CMAKE_INSTALL_PREFIX}
    OUTPUT_VARIABLE GM_PYTHON_SITEDIR OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()
install(TARGETS gpumem_python LIBRARY DESTINATION ${GM_PYTHON_SITEDIR}/gpumem COMPONENT python)
install(FILES ${GM_PYTHON_SOURCES} DESTINATION ${GM_PYTHON_SITEDIR}/gpumem COMPONENT python)
