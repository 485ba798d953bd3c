# SPDX-License-Identifier: MIT
"""torch.version of the fake."""
cuda = "12.4"
hip = None
git_version = "0123456789abcdef0123456789abcdef01234567"
debug = False
