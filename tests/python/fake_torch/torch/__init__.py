# SPDX-License-Identifier: MIT
"""A fake `torch` for the tests of gpumem.torch (the test suite's own, like the fake driver
libraries): just the calls gpumem.torch makes, over counters that behave like PyTorch's
caching allocator seen from outside.

- torch.cuda.alloc(nbytes, device=None) / free(handle) are test helpers: allocated grows by
  the request rounded to 512 bytes, reserved by whole 2 MiB segments when the cached free
  bytes do not suffice; past the device's capacity (set_capacity) the OOM observers are called
  with (device, allocation size, capacity, free) and OutOfMemoryError is raised, as the real
  allocator does.  Freed bytes stay reserved (cached).
- Every call gpumem.torch makes is appended to torch.cuda.calls as (name, device) so that a
  test can check the order of operations.
- memory._record_memory_history / _dump_snapshot record allocator events and the
  record_function ranges opened meanwhile, and write a real snapshot pickle in PyTorch's own
  layout (segments, device_traces, external_annotations, allocator_settings), which gpumem
  reads with its own reader.
"""
from . import _C, autograd, backends, cuda, distributed, version  # noqa: F401

__version__ = "2.9.0+fake"

OutOfMemoryError = cuda.OutOfMemoryError
