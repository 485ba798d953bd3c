# SPDX-License-Identifier: MIT
# Shell completions for bash and zsh, generated at build time by scripts/gen-completions.py
# from the binary itself (its command tables, each command's option table through
# --list-options, its model and GPU catalogs), so they cannot drift from --help; installed by
# `make install` and packaged in the .deb.
find_program(GM_COMPLETIONS_PYTHON NAMES python3)
if(NOT GM_COMPLETIONS_PYTHON)
  message(STATUS "gpumem: no python3: the shell completions are not generated")
  return()
endif()
set(GM_COMPLETIONS_DIR ${PROJECT_BINARY_DIR}/completions)
add_custom_command(
  OUTPUT ${GM_COMPLETIONS_DIR}/gpumem.bash ${GM_COMPLETIONS_DIR}/_gpumem
  COMMAND ${GM_COMPLETIONS_PYTHON} ${PROJECT_SOURCE_DIR}/scripts/gen-completions.py
    $<TARGET_FILE:gpumem> ${GM_COMPLETIONS_DIR}
  DEPENDS gpumem ${PROJECT_SOURCE_DIR}/scripts/gen-completions.py
  COMMENT "Generating the bash and zsh completions")
add_custom_target(gm_completions ALL
  DEPENDS ${GM_COMPLETIONS_DIR}/gpumem.bash ${GM_COMPLETIONS_DIR}/_gpumem)

# bash-completion loads completions/<command> on demand; zsh reads the folders on its fpath
# (Debian's zsh: vendor-completions for /usr, site-functions for /usr/local).
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(GM_ZSH_DIR_DEFAULT ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions)
else()
  set(GM_ZSH_DIR_DEFAULT ${CMAKE_INSTALL_DATADIR}/zsh/site-functions)
endif()
set(GM_ZSH_COMPLETION_DIR ${GM_ZSH_DIR_DEFAULT} CACHE STRING "zsh completion folder under the prefix")
install(FILES ${GM_COMPLETIONS_DIR}/gpumem.bash
  DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME gpumem)
install(FILES ${GM_COMPLETIONS_DIR}/_gpumem DESTINATION ${GM_ZSH_COMPLETION_DIR})
