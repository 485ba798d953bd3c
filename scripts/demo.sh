#!/bin/sh
# SPDX-License-Identifier: MIT
# The README's demo: the main job on bundled data.  demo.sh GPUMEM_BINARY
set -eu
GPUMEM=${1:-build/gpumem}
"$GPUMEM" --version
