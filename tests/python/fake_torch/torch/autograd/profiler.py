# SPDX-License-Identifier: MIT
"""torch.autograd.profiler of the fake: record_function ranges, which the memory history
keeps as external_annotations (START/END with the time) while it records."""
from .. import cuda as _cuda


class record_function:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        _cuda.state.calls.append(("record_function_enter", self.name))
        _cuda.state.annotate(self.name, "START")
        return self

    def __exit__(self, *exc):
        _cuda.state.calls.append(("record_function_exit", self.name))
        _cuda.state.annotate(self.name, "END")
        return False
