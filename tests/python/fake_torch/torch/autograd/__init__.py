# SPDX-License-Identifier: MIT
"""torch.autograd of the fake."""
from . import profiler  # noqa: F401
