# SPDX-License-Identifier: MIT
"""torch.backends of the fake."""
from . import cudnn  # noqa: F401
