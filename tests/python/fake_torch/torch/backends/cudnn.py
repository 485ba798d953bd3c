# SPDX-License-Identifier: MIT
"""torch.backends.cudnn of the fake."""


def version():
    return 90100
