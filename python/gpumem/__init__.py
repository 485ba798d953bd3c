# SPDX-License-Identifier: MIT
"""gpumem: GPU memory questions of deep-learning jobs, from Python.

    import gpumem
    s = gpumem.Snapshot("profile.pkl")      # read by gpumem's C reader, never by pickle
    s.peak(), s.categories(), s.leaks(), s.ooms()
    s.events()                              # a NumPy structured array (a memoryview without NumPy)
    s.report("report.html")

    import gpumem.torch                     # PyTorch only when used: phase(), Measure, record()

Importing gpumem needs neither PyTorch nor NumPy.  The C extension (gpumem._core) is a thin
layer over the gpumem C library; everything it computes is computed there, the same way the
`gpumem` command computes it.
"""
from . import _core
from ._core import Devices, Error, FormatError, NoDeviceError

__all__ = [
    "ACTIONS",
    "CATEGORIES",
    "Devices",
    "EVENT_FORMAT",
    "EVENT_HAS_ADDR",
    "EVENT_HAS_FRAMES",
    "EVENT_HAS_TIME",
    "Error",
    "FormatError",
    "NoDeviceError",
    "Snapshot",
    "event_dtype",
]

__version__ = _core.version()

# gpumem.estimate(**settings) and gpumem.calibrate(...) belong here, bound to the estimator's
# job description and settings table once it has been rebuilt; until then use the command:
# `gpumem estimate ... --json`.

#: Trace actions, indexed by an event's 'action' field ("alloc", "free_requested", ...).
ACTIONS = _core.ACTIONS
#: Allocation categories of Snapshot.categories(), in the library's order.
CATEGORIES = _core.CATEGORIES
#: Bits of an event's 'flags' field.
EVENT_HAS_TIME = _core.EVENT_HAS_TIME
EVENT_HAS_ADDR = _core.EVENT_HAS_ADDR
EVENT_HAS_FRAMES = _core.EVENT_HAS_FRAMES

_FIELDS = _core.event_fields()  # [(name, offset, numpy type, struct code)]


def _struct_format():
    import struct

    fmt, at = "<", 0
    for _name, offset, _np, code in _FIELDS:
        fmt += "%dx" % (offset - at) if offset > at else ""
        fmt += code
        at = offset + struct.calcsize("<" + code)
    return fmt + ("%dx" % (_core.EVENT_SIZE - at) if _core.EVENT_SIZE > at else "")


#: struct-module format of one event record: struct.iter_unpack(EVENT_FORMAT, view).
EVENT_FORMAT = _struct_format()
#: Field names of one event record, in EVENT_FORMAT order.
EVENT_FIELDS = tuple(f[0] for f in _FIELDS)


def _numpy():
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def event_dtype():
    """The NumPy dtype of Snapshot.events() (NumPy needed)."""
    np = _numpy()
    if np is None:
        raise ImportError("event_dtype() needs NumPy (Debian: python3-numpy)")
    return np.dtype(
        {
            "names": [f[0] for f in _FIELDS],
            "formats": [f[2] for f in _FIELDS],
            "offsets": [f[1] for f in _FIELDS],
            "itemsize": _core.EVENT_SIZE,
        }
    )


class Snapshot(_core.Snapshot):
    """Snapshot(path, *, max_memory=0): a torch.cuda.memory._dump_snapshot() pickle.

    Read by gpumem's own reader: nothing in the file is executed and no Python object is made
    per event.  Methods take device=None for the only device, or the one with the largest
    peak when the file has several:

      peak()        {'device', 'peak_bytes', 'peak_event_index', 'peak_time_us',
                     'peak_reserved_bytes', 'reserved_at_peak_bytes', 'initial_bytes',
                     'final_bytes', 'trace_events', 'peak_phase', 'peak_iteration'}: the
                     keys of `gpumem snapshot peak --json`
      categories()  {'parameter': bytes, 'activation': bytes, ...} alive at the peak
      leaks()       [{'kind', 'category', 'bytes_per_iteration', 'total_bytes', 'count',
                      'n_iterations', 'frames', 'advice'}]
      ooms()        [{'event_index', 'phase', 'requested_bytes', 'device_free_bytes',
                      'verdict', 'advice', 'at_event', 'frames', ...}]
      (the keys of `gpumem snapshot peak|categories|leaks|oom --json`)
      events()      the device's trace as records (see events())
      report(path)  the offline HTML report (refuses to replace a file unless overwrite=True)
      annotations   record_function ranges (gpumem.torch marks its phases there), or None
    """

    def events(self, device=None):
        """The trace of one device, oldest first: a NumPy structured array (fields time_us,
        addr, size, stream, stack, action, flags; see event_dtype()) when NumPy is installed,
        else a memoryview of the same records (struct.iter_unpack(EVENT_FORMAT, view)).
        ACTIONS[action] names the action; time_us is valid where flags & EVENT_HAS_TIME; for
        an 'oom' event addr holds the bytes CUDA reported free."""
        raw = self._events(device)
        np = _numpy()
        if np is None:
            return memoryview(raw)
        return np.frombuffer(raw, dtype=event_dtype())
