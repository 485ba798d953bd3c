# SPDX-License-Identifier: MIT
# `make deb`: a Debian package made by CPack from the install rules (the command, libgpumem.so
# and .a, the headers, gpumem.pc, the man page, the bash and zsh completions; the Python
# package is installed by pip or make install, not packaged here: its install() rules are
# the component "python").  The dependencies come from dpkg-shlibdeps.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpumem)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "the gpumem developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "GPU memory of deep-learning jobs: estimate, explain PyTorch memory snapshots, measure")
set(CPACK_PACKAGE_DESCRIPTION
  "gpumem predicts the peak GPU memory of training and inference jobs, reads PyTorch CUDA memory snapshots without executing them (peak, categories, leaks, OOMs, an offline HTML report, allocator replay) and reports what the NVIDIA driver says; with its C library, headers and pkg-config file.")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "bash-completion")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_CMAKE_PROJECTS "${PROJECT_BINARY_DIR};${PROJECT_NAME};Unspecified;/")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/package)
include(CPack)
