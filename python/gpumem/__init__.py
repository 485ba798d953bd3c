# SPDX-License-Identifier: MIT
"""gpumem: GPU memory questions of deep-learning jobs, from Python.

    import gpumem
    s = gpumem.Snapshot("profile.pkl")      # read by gpumem's C reader, never by pickle
    s.peak(), s.categories(), s.leaks(), s.ooms()
    s.events()                              # a NumPy structured array (a memoryview without NumPy)
    s.report("report.html")

    gpumem.estimate("llama-3-8b", train=True, batch=4, seq=2048, gpu="H100")
    gpumem.calibrate("run.pickle", "config.json", batch=4, seq=1024, predict={"batch": [8, 16]})

    import gpumem.torch                     # PyTorch only when used: phase(), Measure, record()

Importing gpumem needs neither PyTorch nor NumPy.  The C extension (gpumem._core) is a thin
layer over the gpumem C library; everything it computes is computed there, the same way the
`gpumem` command computes it.
"""
import json as _json

from . import _core
from ._core import Devices, Error, FormatError, NoDeviceError, UsageError

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
    "UsageError",
    "calibrate",
    "estimate",
    "estimate_settings",
    "event_dtype",
]

__version__ = _core.version()

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


def estimate(model=None, **settings):
    """Predict the GPU memory of a job: what `gpumem estimate MODEL --SETTING ... --json`
    prints, as a dict (schema gpumem.estimate/1), computed by the same library call.

    model: a built-in name (`gpumem estimate --list-models`), a config.json or a folder
    holding one, or weight files read from their headers (a .safetensors file, a folder of
    shards or its index, a .gguf file); None with parameters=.  settings: every setting of
    the command, by name with '_' for '-' (estimate_settings() lists them): flags take
    True/False (train=True, lora=True), numbers ints or floats (batch=4, parameters=8e9,
    fragmentation=0.3), sizes ints of bytes or strings ("24GiB"), choices strings
    (precision="bf16-mixed"); any valued setting also takes the string the command takes
    ("8B").  None leaves a setting unset.

    Errors: gpumem.UsageError (a bad setting or combination; also a ValueError),
    FileNotFoundError (MODEL names no file), gpumem.FormatError (a damaged or unknown
    model file), TypeError (a value of the wrong Python type)."""
    return _json.loads(_core.estimate_json(model, settings))


def estimate_settings():
    """The job settings of estimate() and calibrate(), in the command's --help order: dicts
    with 'name' (the option, "max-model-len"), 'keyword' ("max_model_len"), 'type' (flag,
    int, count, size, float, choice, text), 'argname', 'help', 'choices' (a tuple or None),
    'modes' (of "weights", "train", "infer") and 'engine' (None, or the engine it belongs
    to)."""
    return _core.estimate_settings()


_PREDICT_TYPES = "a dict {name: values}, a 'NAME=V1,V2' string or a list of them"


def _predict_specs(predict):
    if predict is None:
        return []
    if isinstance(predict, str):
        return [predict]
    if isinstance(predict, dict):
        out = []
        for name, values in predict.items():
            if isinstance(values, (str, int, float)) and not isinstance(values, bool):
                values = [values]
            if not isinstance(name, str) or isinstance(values, (bytes, bytearray, dict)):
                raise TypeError("predict: %s" % _PREDICT_TYPES)
            for v in values:
                if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                    raise TypeError("predict: %s: values are numbers or strings, not %s"
                                    % (name, type(v).__name__))
            out.append("%s=%s" % (name, ",".join(str(v) for v in values)))
        return out
    if not isinstance(predict, (list, tuple)):
        raise TypeError("predict: %s, not %s" % (_PREDICT_TYPES, type(predict).__name__))
    for p in predict:
        if not isinstance(p, str):
            raise TypeError("predict: %s, not a list of %s" % (_PREDICT_TYPES, type(p).__name__))
    return list(predict)


def calibrate(snapshot, model=None, *, predict=None, device=None, **settings):
    """Hold the estimate of a job against a memory snapshot of a real run of it, fit what the
    run tells and predict other sizes: what `gpumem calibrate SNAPSHOT MODEL ... --json`
    prints, as a dict (schema gpumem.calibrate/1).

    snapshot: a path, or a gpumem.Snapshot (its analysis is reused).  model and settings:
    as estimate(); the job is training unless infer=True.  predict: {"batch": [8, 16],
    "seq": [4096]}, or strings as the command takes them ("batch=8,16").  device: the CUDA
    index of the snapshot's device (None: the one with the largest peak).  Errors as
    estimate(), and those of reading the snapshot."""
    return _json.loads(
        _core.calibrate_json(snapshot, model, settings, _predict_specs(predict), device)
    )
