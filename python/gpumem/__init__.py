# SPDX-License-Identifier: MIT
"""gpumem: GPU memory questions of deep-learning jobs, from Python.

    import gpumem
    s = gpumem.Snapshot("profile.pkl")      # read by gpumem's C reader, never by pickle
    s.peak(), s.categories(), s.leaks(), s.ooms()
    s.json("stats")                         # what `gpumem snapshot stats --json` prints
    s.events()                              # a NumPy structured array (a memoryview without NumPy)
    s.report("report.html")

    gpumem.estimate("llama-3-8b", train=True, batch=4, seq=2048, gpu="H100")
    gpumem.calibrate("run.pickle", "config.json", batch=4, seq=1024, predict={"batch": [8, 16]})

    import gpumem.torch                     # PyTorch only when used: phase(), Measure, record()

Importing gpumem needs neither PyTorch nor NumPy.  The C extension (gpumem._core) is a thin
layer over the gpumem C library; everything it computes is computed there, the same way the
`gpumem` command computes it, and its results arrive as the library's JSON documents, the
ones the commands print with --json.
"""
import json as _json
import socket as _socket

from . import _core
from ._core import Error, FormatError, NoDeviceError, UsageError

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
    "SNAPSHOT_DOCUMENTS",
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


#: The snapshot documents of Snapshot.json(), as `gpumem snapshot COMMAND --json` names them.
SNAPSHOT_DOCUMENTS = ("info", "stats", "peak", "categories", "leaks", "oom")


class Snapshot(_core.Snapshot):
    """Snapshot(path, *, memory_limit=0, categories=None): a torch.cuda.memory._dump_snapshot()
    pickle.  categories: the path of your category rules (a JSON file of regular expressions
    on frames or annotations, docs/analysis.md), tried before the built-in rules by every
    document that shows categories, as the commands' --categories RULES.json.

    Read by gpumem's own reader: nothing in the file is executed and no Python object is made
    per event.  The results are the library's JSON documents, parsed: json(command) is what
    `gpumem snapshot COMMAND --json FILE` prints for the file, and the methods below read one
    device's part of them.  They take device=None for the only device, or the one with the
    largest peak when the file has several:

      peak()        the device's entry of `gpumem snapshot peak --json`: peak_bytes,
                    peak_event_index, peak_time_us, the reserved figures, first_oom and
                    live_at_peak (what is alive there, grouped by stack, with its frames);
                    the peak alone, unless phase=True (its phase and iteration too)
      categories()  {'parameter': bytes, 'activation': bytes, ...} alive at the peak (the
                    at_peak of `categories --json`, whose entry also has peak_phase and
                    peak_iteration: json("categories"))
      components(memory_stats)  torch's component tracking (a memory_stats() JSON dump)
                    beside the categories at the end, with the difference
      leaks()       the device's leaks of `gpumem snapshot leaks --json`, all of them
      ooms()        the device's ooms of `gpumem snapshot oom --json`, each with its verdict
      diff(other)   `gpumem snapshot diff --json SELF OTHER`
      digest(path)  `gpumem snapshot digest FILE -o path`: the rank summed up for the job's
                    commands (without path: the document as a dict)
      events()      the device's trace as records (see events())
      report(path)  the offline HTML report (refuses to replace a file unless overwrite=True)
      annotations   record_function ranges (gpumem.torch marks its phases there), or None
      info()        `gpumem snapshot info --json`: what the file is and holds
      stats()       the device's entry of `gpumem snapshot stats --json` (segments, pools)
      regions()     `gpumem snapshot regions --json`: the memory of each record_function
                    range (compile=True: of each torch.compile context's runs)
      window(a, b)  `gpumem snapshot window --json`: the peak inside events (or seconds) a
                    to b and what is alive there; window(at_alloc=ADDR, nth=N) the moment
                    an allocation was made
      files()       `gpumem snapshot files --json`: memory by source file, or by function
                    of one file (file=SUFFIX), or two snapshots' compared (other=)
      replay(...)   `gpumem snapshot replay --json`: the trace through the allocator model,
                    under the recorded settings or others (alloc_conf=), on a device of
                    gpu_memory bytes
      from_dict(d)  (a class method) the dict torch.cuda.memory._snapshot() returns, read
                    in memory: no pickle on disk
    Iterations are numbered from 1, as the commands say them.  In Jupyter a Snapshot shows
    as its HTML report (self-contained: no network).
    """

    def json(self, command, device=None, top=None):
        """The document `gpumem snapshot COMMAND --json FILE` prints for this file, as a dict:
        COMMAND one of SNAPSHOT_DOCUMENTS; device (peak, categories) as --device; top as
        --top (None: the command's default)."""
        return _json.loads(self._json(command, device, top))

    def digest(self, path=None, *, host=None, overwrite=False):
        """The rank's digest `gpumem snapshot digest FILE -o OUT --host HOST` writes
        (gpumem.snapshot.digest/1; "file" is this Snapshot's path as given): a dict, or, with
        'path', the file written as the command writes it (whole or not at all, never over an
        existing file unless overwrite=True) and None returned.  host=None: this machine's
        name, as the command's default."""
        host = _socket.gethostname() if host is None else host
        if path is None:
            return _json.loads(self._json("digest", host=host))
        self._json("digest", host=host, path=path, overwrite=overwrite)
        return None

    def diff(self, other, top=None):
        """`gpumem snapshot diff --json SELF OTHER` as a dict (other: a Snapshot)."""
        return _json.loads(self._diff_json(other, top))

    def _entry(self, command, device, top=None):
        index = self._device(device)
        for d in self.json(command, index if command in ("peak", "categories") else None, top)["devices"]:
            if d["device"] == index:
                return d
        raise ValueError("the snapshot has no device %d" % index)

    def peak(self, device=None, *, phase=False):
        """The peak of one device: its entry of `gpumem snapshot peak --json`, computed alone
        (no analysis is run for it: the timeline folded while the file was read, or the
        analysis when one already ran).  phase=True adds the phase and iteration the peak
        falls in, 'peak_phase' and 'peak_iteration' of json("categories"), which runs the
        analysis (kept with the object, as categories() runs it)."""
        entry = self._entry("peak", device)
        if phase:  # the device just resolved, not resolved again after the analysis ran
            cats = self._entry("categories", entry["device"])
            entry["peak_phase"] = cats["peak_phase"]
            entry["peak_iteration"] = cats["peak_iteration"]
        return entry

    def categories(self, device=None):
        """Bytes alive at the peak per category (gpumem.CATEGORIES order)."""
        return self._entry("categories", device)["at_peak"]

    def components(self, memory_stats, device=None):
        """torch's component tracking beside the categories at the end of the trace, as
        `gpumem snapshot categories --json --memory-stats FILE` gives them: memory_stats is
        the path of a JSON dump of torch.accelerator.memory.memory_stats() taken with the
        snapshot; {'<category>': {'torch_bytes', 'gpumem_bytes', 'difference_bytes'}, ...,
        'unmapped_bytes'}."""
        index = self._device(device)
        doc = _json.loads(self._json("categories", index, memory_stats=memory_stats))
        for d in doc["devices"]:
            if d["device"] == index:
                return d["components"]
        raise ValueError("the snapshot has no device %d" % index)

    def leaks(self, device=None):
        """Every leak of one device, as `gpumem snapshot leaks --json --top 0` lists them."""
        return self._entry("leaks", device, 0)["leaks"]

    def ooms(self, device=None):
        """Every out-of-memory event of one device with its verdict (`snapshot oom --json`)."""
        return self._entry("oom", device)["ooms"]

    def stack_frames(self, stack):
        """The frames worth showing of a stack id (the library's rule), innermost first, as
        [{'filename', 'line', 'name'}]."""
        return _json.loads(self._stack_json(stack))

    @property
    def annotations(self):
        """record_function ranges (external_annotations, torch >= 2.4) as dicts (name,
        stage, device, time_us), in file order; None when the file has none."""
        return self.json("info")["annotations"]

    @classmethod
    def from_dict(cls, snapshot, *, memory_limit=0, categories=None):
        """The snapshot of torch.cuda.memory._snapshot()'s dict, read by the same reader as a
        file (in memory: nothing is written to disk).  Takes the plain types a snapshot holds
        (dict, list, tuple, str, int, float, bool, None); TypeError for anything else,
        gpumem.FormatError when the dict is no memory snapshot.  categories: as Snapshot()'s."""
        s = cls.__new__(cls)
        if categories is None:
            s._load_object(snapshot, memory_limit)
        else:
            s._load_object(snapshot, memory_limit, categories)
        return s

    def info(self):
        """What the file is and holds: `gpumem snapshot info --json FILE` as a dict."""
        return self.json("info")

    def stats(self, device=None):
        """The segments and blocks of one device when the snapshot was taken: its entry of
        `gpumem snapshot stats --json` (reserved, allocated, active, free figures, pools,
        segment sizes)."""
        return self._entry("stats", device)

    def replay(self, alloc_conf=None, *, gpu_memory=None, memory_fraction=None, compare=False):
        """The trace replayed through gpumem's model of the caching allocator:
        `gpumem snapshot replay --json FILE` as a dict.  alloc_conf: settings as
        PYTORCH_CUDA_ALLOC_CONF writes them ("expandable_segments:True"), None for the
        recorded ones; gpu_memory: the device's bytes (an int, or a string "24GiB"; None:
        unlimited); memory_fraction: torch.cuda.set_per_process_memory_fraction's;
        compare=True ranks the common settings (alloc_conf then left out)."""
        if compare and alloc_conf is not None:
            raise UsageError("compare tries the common settings itself: leave out alloc_conf")
        if memory_fraction is not None and gpu_memory is None:
            raise UsageError("memory_fraction needs gpu_memory")
        return _json.loads(self._replay_json(alloc_conf, gpu_memory, float(memory_fraction or 0),
                                             bool(compare)))

    def regions(self, compile=False, *, device=None):
        """The memory of every record_function range (compile=True: of every run of trace
        entries under one torch.compile context): `gpumem snapshot regions [--compile] --json
        FILE` as a dict, every device, or only 'device'."""
        if not isinstance(compile, bool):
            raise TypeError("compile: True or False, not %s" % type(compile).__name__)
        return _json.loads(self._regions_json(compile, device))

    def window(self, start=None, end=None, *, by="event", at_alloc=None, nth=1, device=None,
               top=10):
        """The peak inside a window of the trace and the stacks alive there, or the memory
        when one allocation was made: `gpumem snapshot window --json FILE` as a dict.
        start, end: the window's first and last events (by="event": event indexes, ints), or
        (by="time") seconds since the trace's first event, as --from/--to 1.5s; or
        at_alloc=ADDRESS (an int) and nth (which allocation made at that address, from 1),
        as --at-alloc ADDRESS#NTH.  device: as --device (None: the first with a trace); top:
        the stacks listed (0: all)."""
        if by not in ("event", "time"):
            raise ValueError("by: 'event' or 'time', not %r" % (by,))
        if isinstance(nth, bool) or not isinstance(nth, int):
            raise TypeError("nth: an int, not %s" % type(nth).__name__)
        if isinstance(top, bool) or not isinstance(top, int):
            raise TypeError("top: an int, not %s" % type(top).__name__)
        if at_alloc is not None:
            if start is not None or end is not None:
                raise ValueError("at_alloc or start/end: choose one")
            if by != "event":
                raise ValueError("by goes with start/end, not at_alloc")
            if isinstance(at_alloc, bool) or not isinstance(at_alloc, int):
                raise TypeError("at_alloc: an address (int), not %s" % type(at_alloc).__name__)
            if at_alloc < 0:
                raise ValueError("at_alloc: an address is not negative")
            if not 1 <= nth <= 0xFFFFFFFF:
                raise ValueError("nth: the first allocation at the address is 1")
            return _json.loads(self._window_json(False, 0, 0, at_alloc, nth, device, top))
        if nth != 1:
            raise ValueError("nth goes with at_alloc")
        if start is None or end is None:
            raise ValueError("give start and end, or at_alloc")
        bounds = []
        for name, v in (("start", start), ("end", end)):
            if by == "event":
                if isinstance(v, bool) or not isinstance(v, int):
                    raise TypeError("%s: an event index (int), not %s" % (name, type(v).__name__))
                if not 0 <= v < 9 * 10**15:
                    raise ValueError("%s: an event index from 0" % name)
                bounds.append(v)
            else:
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise TypeError("%s: seconds (a number), not %s" % (name, type(v).__name__))
                if not 0 <= v * 1e6 < 9e15:
                    raise ValueError("%s: seconds since the trace's first event, from 0" % name)
                bounds.append(int(round(v * 1e6)))
        return _json.loads(self._window_json(by == "time", bounds[0], bounds[1], None, 1, device,
                                             top))

    def files(self, other=None, *, file=None, lines=False, device=None):
        """The memory by source file (each allocation's user frame), or with file=SUFFIX by
        function of the files whose path ends with SUFFIX (lines=True: by line), at the peak
        and over the trace; with other (a Snapshot) the rows of both compared: `gpumem
        snapshot files [--file SUFFIX [--lines]] --json SELF [OTHER]` as a dict."""
        if other is not None and not isinstance(other, _core.Snapshot):
            raise TypeError("other: a gpumem.Snapshot, not %s" % type(other).__name__)
        if file is not None and not isinstance(file, str):
            raise TypeError("file: the end of a path (str), not %s" % type(file).__name__)
        if file == "":
            raise ValueError("file: give the end of a path")
        if not isinstance(lines, bool):
            raise TypeError("lines: True or False, not %s" % type(lines).__name__)
        if lines and file is None:
            raise ValueError("lines goes with file")
        return _json.loads(self._files_json(other, file, lines, device))

    def _repr_html_(self):
        """Jupyter: the snapshot's HTML report, inline (self-contained, no network)."""
        return self._report_html(None)

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
    return [
        {"name": name, "keyword": name.replace("-", "_"), "type": type_, "argname": argname,
         "help": help_, "choices": choices, "modes": modes, "engine": engine}
        for name, type_, argname, help_, choices, modes, engine in _core._estimate_settings()
    ]


class Devices(_core.Devices):
    """Devices(): the driver's view of the GPUs (NVML, CUDA), opened once.

      unavailable()         None when a GPU is usable, else why not (one sentence)
      memory(cuda_index)    {'total_bytes', 'free_bytes', 'used_bytes', 'reserved_bytes'}:
                            None where the driver does not say (never 0)
      environment_json(i)   the members of `gpumem environment --json` as JSON text
    """

    def memory(self, cuda_index):
        """Memory of CUDA device cuda_index, in bytes; None where unknown."""
        total, free, used, reserved = self._memory(cuda_index)
        return {"total_bytes": total, "free_bytes": free, "used_bytes": used, "reserved_bytes": reserved}


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
