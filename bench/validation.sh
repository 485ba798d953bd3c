#!/bin/sh
# SPDX-License-Identifier: MIT
# validation.sh [GPUMEM] - the estimator against the public measurements of
# tests/data/validation: median |error| and share within 10% per source and counter (the
# table the ctest validation/public_measurements checks).  Writes nothing.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
gpumem=${1:-$here/../build/gpumem}
exec python3 "$here/../tests/validation/validate.py" "$gpumem" "$here/../tests/data/validation"
