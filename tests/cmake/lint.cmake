# SPDX-License-Identifier: MIT
add_test(NAME lint/house-rules COMMAND sh ${PROJECT_SOURCE_DIR}/scripts/lint.sh)
