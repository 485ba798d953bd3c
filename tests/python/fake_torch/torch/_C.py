# SPDX-License-Identifier: MIT
"""torch._C of the fake: the out-of-memory observer hook."""
from . import cuda as _cuda


def _cuda_attach_out_of_memory_observer(observer):
    if _cuda.state.backend == "cudaMallocAsync":
        raise RuntimeError("cudaMallocAsync does not yet support attachOutOfMemoryObserver.")
    _cuda.state.observers.append(observer)
