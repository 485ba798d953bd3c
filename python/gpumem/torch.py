# SPDX-License-Identifier: MIT
"""gpumem.torch: measure the memory of your own PyTorch job, phase by phase.

    import gpumem.torch as gmt

    m = gmt.Measure("series.json", batch=8, seq=2048, dtype="bf16")
    with m.phase("model_load"):
        model = Model().cuda()
    for step in range(3):
        with m.phase("forward", step=step):
            loss = model(x).sum()
        with m.phase("backward", step=step):
            loss.backward()

    with gmt.record("profile.pkl"):          # a memory snapshot with the phases marked
        ...

PyTorch is imported only when one of these is used, so `import gpumem.torch` works without
it.  The protocol of every phase, on each device the process uses:

  1. name the phase and keep its dimensions;
  2. synchronize, read memory_allocated and memory_reserved, and the driver's used and free
     memory (NVML, through gpumem's device layer);
  3. reset_peak_memory_stats on the same devices;
  4. run the body of the `with` block;
  5. synchronize, read max_memory_allocated and max_memory_reserved, the two end levels and
     the driver again; record success or the error.  On an out-of-memory error the phase is
     recorded as failed with the size that was asked for and the readings it had, and the
     error is raised again.  A reading that could not be taken is absent, never 0.

The series is written after every phase to its JSON file (schema gpumem.measure/1, the
layout `gpumem measure --output` writes, docs/python.md), which the series claims when it
starts: an existing file is never replaced.  The first run of a phase name is kept apart
from the later ("warm") ones.  A series belongs to one process; a new series in the same
process is marked as not the first (its process is already warm).
"""
import contextlib
import datetime
import json
import os
import sys
import threading
import time

from . import Snapshot as _Snapshot
from . import _core


def _devices():
    """gpumem.Devices() (the package's, whose memory() names its figures)."""
    from . import Devices

    return Devices()


__all__ = ["Measure", "OUTPUT_ENV", "MARK_PREFIX", "phase", "record", "series", "environment"]

SCHEMA = "gpumem.measure/1"
#: Environment variable naming the file of the default series, which the first series of a
#: process also writes (gpumem sweep sets it for each run; the C library names it).
OUTPUT_ENV = _core.SERIES_ENV
#: Name prefix of the record_function range (and memory metadata) that marks a phase in a
#: snapshot recorded by record(): "gpumem.phase:forward".
MARK_PREFIX = "gpumem.phase:"

_ALLOC_CONF_VARS = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")


def _alloc_conf_in_effect(torch_env):
    """The allocator settings the caching allocator reads: the first set of
    PYTORCH_CUDA_ALLOC_CONF and PYTORCH_ALLOC_CONF; on a HIP (ROCm) build, PYTORCH_HIP_ALLOC_CONF
    when neither is set (c10's CUDAAllocatorConfig reads it only under USE_ROCM); "" none."""
    names = _ALLOC_CONF_VARS if torch_env.get("backend") == "hip" else _ALLOC_CONF_VARS[:2]
    return next((torch_env["alloc_conf"][k] for k in names if torch_env["alloc_conf"].get(k)), "")


_lock = threading.Lock()
_series_started = 0  # series begun in this process
_default = None  # the series of the module-level phase()
_recording = []  # active record() contexts, innermost last
_oom = {"last": None, "attached": False}  # what the allocator's OOM observer saw last
_mirror_claimed = False  # a series of this process writes $GPUMEM_TORCH_OUTPUT


def _torch():
    import torch  # noqa: only when gpumem.torch is used

    return torch


def _distributed(torch):
    """(rank, world_size) under an initialised torch.distributed process group, else None."""
    dist = getattr(torch, "distributed", None)
    try:
        if dist is None or not dist.is_available() or not dist.is_initialized():
            return None
        return dist.get_rank(), dist.get_world_size()
    except Exception:
        return None


def _rank_path(path, rank):
    """The file of rank 'rank' for 'path': "{rank}" in it replaced, else "rankR_" before its
    name (rank3_series.json, as torchtitan names its rank files, which gpumem's commands
    number by)."""
    if "{rank}" in path:
        return path.replace("{rank}", str(rank))
    head, tail = os.path.split(path)
    return os.path.join(head, "rank%d_%s" % (rank, tail))


def _digest_path(path):
    """The digest beside snapshot 'path': its name less the extension, plus ".digest"."""
    root, ext = os.path.splitext(path)
    return (root if ext and ext != ".digest" else path) + ".digest"


_gather_group = {}  # the gloo group of the default process group, made once (a collective)


def _gather(torch, row):
    """Every rank's 'row', gathered with the job's own collective (all_gather_object), on a
    gloo group when the default group is NCCL (Python objects go through the CPU)."""
    dist = torch.distributed
    group = None
    if dist.get_backend() == "nccl":
        if "gloo" not in _gather_group:
            _gather_group["gloo"] = dist.new_group(backend="gloo")
        group = _gather_group["gloo"]
    rows = [None] * dist.get_world_size()
    dist.all_gather_object(rows, row, group=group)
    return rows


def _ranks_summary(rows):
    """The imbalance of the ranks' peaks (allocated), and the ranks that ran out of memory."""
    peaks = [(r["peak_allocated_bytes"], r["rank"]) for r in rows if r.get("peak_allocated_bytes") is not None]
    out = {"oom_ranks": [r["rank"] for r in rows if r.get("oom")]}
    if len(peaks) >= 2:
        hi, lo = max(peaks), min(peaks)
        out.update(max_rank=hi[1], max_peak_allocated_bytes=hi[0], min_rank=lo[1],
                   min_peak_allocated_bytes=lo[0], ratio=(hi[0] / lo[0]) if lo[0] else None)
    return out


def _now_utc():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _claim(path):
    """Create 'path' exclusively (FileExistsError if it exists): the series owns it from now."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.close(fd)


def _temporary(path, suffix=""):
    """A new, empty file beside 'path' with the permissions a plain open() gives (the umask
    applies, unlike mkstemp's 0600): its name and descriptor."""
    d = os.path.dirname(os.path.abspath(path))
    for _ in range(100):
        tmp = os.path.join(d, ".gpumem-tmp-%d-%s%s" % (os.getpid(), os.urandom(4).hex(), suffix))
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
    raise FileExistsError("no free temporary name beside %r" % path)


def _replace(path, text):
    """Write 'text' to a temporary file beside 'path' and rename it over 'path'."""
    tmp, fd = _temporary(path)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _attach_oom_observer(torch):
    """Register once per process (the allocator cannot detach observers) a callback that
    keeps the exact size of a failed request and lets record() dump its snapshot."""
    attach = getattr(getattr(torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
    if attach is None:
        return

    def observer(device, alloc_size, limit, device_free):
        # CUDACachingAllocator calls it after the oom trace entry, before raising: the
        # allocation it tried (the request rounded up to a segment, as "Tried to allocate"
        # says), the device's capacity (or the set_per_process_memory_fraction limit) and
        # what CUDA reported free.
        _oom["last"] = {
            "device": int(device),
            "requested_bytes": int(alloc_size),
            "limit_bytes": int(limit),
            "device_free_bytes": int(device_free),
        }
        for r in list(_recording):
            try:
                r._dump_on_oom()
            except Exception as e:  # never raise into the allocator
                r.oom_dump_error = str(e)

    with _lock:
        if _oom["attached"]:
            return
        try:
            attach(observer)
            _oom["attached"] = True
        except RuntimeError:
            pass  # backend:cudaMallocAsync has no observers: the requested size stays unknown


def _oom_error_type(torch):
    return getattr(torch.cuda, "OutOfMemoryError", None) or getattr(torch, "OutOfMemoryError", None)


def _synchronize(cuda, device):
    """torch.cuda.synchronize(device); False when it fails."""
    try:
        cuda.synchronize(device)
        return True
    except Exception:
        return False


def _read(fn, *args):
    """One reading: an int, or None when the call fails (never a made-up 0)."""
    try:
        return int(fn(*args))
    except Exception:
        return None


def environment(device=None, devices=None):
    """The environment of a measurement: gpumem's device view (the members of `gpumem
    environment --json`: driver, backends, devices, host, settings) for the CUDA device
    'device' (the current one by default), and "torch": the PyTorch build, the CUDA or HIP
    backend, the allocator backend and the allocator settings in the environment."""
    torch = _torch()
    env = {}
    if device is None:
        device = _read(torch.cuda.current_device)
    try:
        drv = devices if devices is not None else _devices()
        env.update(json.loads(drv.environment_json(-1 if device is None else device)))
    except Exception as e:  # the device view is optional: say why it is missing
        env["devices_error"] = str(e)
    version = getattr(torch, "version", None)
    hip = getattr(version, "hip", None)
    t = {
        "version": str(getattr(torch, "__version__", "")) or None,
        "git_version": getattr(version, "git_version", None),
        "debug": getattr(version, "debug", None),
        "cuda": getattr(version, "cuda", None),
        "hip": hip,
        "backend": "hip" if hip else "cuda",
        "cudnn": None,
        "allocator_backend": _allocator_backend(torch),
        "alloc_conf": {k: os.environ.get(k) for k in _ALLOC_CONF_VARS},
        "devices": [],
    }
    cudnn = getattr(getattr(torch, "backends", None), "cudnn", None)
    if cudnn is not None:
        with contextlib.suppress(Exception):
            t["cudnn"] = cudnn.version()
    n = _read(torch.cuda.device_count) or 0
    for i in range(n):
        d = {"index": i, "name": None, "total_memory_bytes": None, "capability": None}
        with contextlib.suppress(Exception):
            d["name"] = torch.cuda.get_device_name(i)
        with contextlib.suppress(Exception):
            p = torch.cuda.get_device_properties(i)
            d["total_memory_bytes"] = int(p.total_memory)
            d["capability"] = "%d.%d" % (p.major, p.minor)
        t["devices"].append(d)
    env["torch"] = t
    env["python"] = sys.version.split()[0]
    return env


def _allocator_backend(torch):
    get = getattr(getattr(torch.cuda, "memory", None), "get_allocator_backend", None)
    if get is None:
        get = getattr(torch.cuda, "get_allocator_backend", None)
    if get is None:
        return None
    try:
        return str(get())
    except Exception:
        return None


def _caveats(env):
    out = []
    if env.get("torch", {}).get("allocator_backend") == "cudaMallocAsync":
        out.append(
            {
                "id": "cuda_malloc_async_reserved",
                "text": "backend:cudaMallocAsync: allocated and reserved are the CUDA default "
                "memory pool's own figures (cudaMemPoolAttrUsedMem / ReservedMem), not "
                "PyTorch's block accounting; max reserved combines two pools' high-water "
                "marks and is not comparable with the native allocator's peak reserved; "
                "most memory_stats() fields are zero, and snapshots and OOM observers are "
                "not supported",
            }
        )
    return out


def _jsonable(dims):
    """Dimensions as JSON values: numbers, strings, booleans and None as given, the rest as
    str() (a torch.dtype, a torch.Size)."""
    out = {}
    for k, v in dims.items():
        if v is None or isinstance(v, (bool, int, float, str)):
            out[k] = v
        else:
            out[k] = str(v)
    return out


class Measure:
    """A series of measured phases of one process, written to 'path' (JSON, schema
    gpumem.measure/1) after every phase.

    Measure(path=None, *, devices=None, **dimensions)

    path        the file; None: $GPUMEM_TORCH_OUTPUT, else kept in memory until save(path).
                An existing file is never replaced (FileExistsError at once).  When
                $GPUMEM_TORCH_OUTPUT names another file (gpumem sweep), the series is
                written there too; "{rank}" in it is the process's rank (of its process
                group, else $RANK, else 0: gpumem watch gives each process its file so).
    devices     CUDA device indexes to measure; None: every device of the process (the
                current one, and each other with memory reserved by PyTorch; only those
                are synchronized, so that no context is created on an unused GPU).
    dimensions  the inputs of the whole series (batch, seq, dtype, ...): recorded as given.

    Under an initialised torch.distributed process group each rank writes its own file
    ("{rank}" in 'path' replaced by the rank, else rankR_ before the name), and every phase
    gathers each rank's peaks with the job's collective (all_gather_object, on a gloo group
    when the default is NCCL): the phase's "ranks" rows and "imbalance" (the largest and
    smallest peak and their ranks, and the ranks that ran out of memory).
    """

    def __init__(self, path=None, *, devices=None, **dimensions):
        global _series_started, _mirror_claimed
        self._torch = _torch()
        self._dist = _distributed(self._torch)
        env_path = os.environ.get(OUTPUT_ENV) or None
        env_ranked = env_path is not None and "{rank}" in env_path
        if env_ranked:
            # one file per process (gpumem watch): the rank, from the process group, else
            # from the launcher's environment (torchrun's RANK, Slurm's SLURM_PROCID), else
            # "pid<N>": processes with no rank must never claim one file
            if self._dist is not None:
                rank = str(self._dist[0])
            else:
                rank = os.environ.get("RANK") or os.environ.get("SLURM_PROCID") or "pid%d" % os.getpid()
            env_path = env_path.replace("{rank}", rank)
        self.path = os.fspath(path) if path is not None else env_path
        if self.path is not None and self._dist is not None and (path is not None or not env_ranked):
            self.path = _rank_path(self.path, self._dist[0])
        self._mirror = None
        self.dimensions = _jsonable(dimensions)
        self.phases = []
        self._counts = {}
        self._open = None
        self._devices = None if devices is None else [int(d) for d in devices]
        self._drv = None
        self._drv_error = None
        self._saved_to = None
        if self.path is not None:
            _claim(self.path)
        with _lock:
            self._first_in_process = _series_started == 0
            _series_started += 1
            # The first series of the process also answers $GPUMEM_TORCH_OUTPUT (the file
            # gpumem sweep reads), whatever its own file is.
            if env_path is not None and not _mirror_claimed:
                _mirror_claimed = True
                if env_path != self.path:
                    self._mirror = env_path
        if self._mirror is not None:
            _claim(self._mirror)
        self.started_utc = _now_utc()
        torch = self._torch
        self._current = _read(torch.cuda.current_device)
        self.environment = environment(self._current, self._driver())
        self.caveats = _caveats(self.environment)
        _attach_oom_observer(torch)
        self._write()

    # -- the protocol -------------------------------------------------------------------

    def _driver(self):
        if self._drv is None and self._drv_error is None:
            try:
                self._drv = _devices()
                why = self._drv.unavailable()
                if why:
                    self._drv_error = why
            except Exception as e:
                self._drv_error = str(e)
        return self._drv

    def _driver_reading(self, device):
        drv = self._driver()
        if drv is None or self._drv_error:
            return {}
        try:
            m = drv.memory(device)
        except Exception:
            return {}
        return {"free": m.get("free_bytes"), "used": m.get("used_bytes"), "total": m.get("total_bytes")}

    def _device_list(self):
        """The devices to measure and, among them, those to synchronize."""
        torch = self._torch
        if self._devices is not None:
            return list(self._devices), list(self._devices)
        n = _read(torch.cuda.device_count) or 0
        cur = _read(torch.cuda.current_device)
        every = list(range(n)) if n else ([cur] if cur is not None else [])
        busy = [d for d in every if d == cur or (_read(torch.cuda.memory_reserved, d) or 0) > 0]
        return every, busy

    @contextlib.contextmanager
    def phase(self, name, **dimensions):
        """Measure the body of the `with` block as the phase 'name' (see the module's doc)."""
        if not isinstance(name, str) or not name:
            raise ValueError("a phase needs a name")
        if self._open is not None:
            raise RuntimeError("phase %r started inside phase %r: phases do not nest" % (name, self._open))
        torch = self._torch
        cuda = torch.cuda
        occurrence = self._counts.get(name, 0) + 1
        self._counts[name] = occurrence
        rec = {
            "name": name,
            "ran": True,
            "pass": "first" if occurrence == 1 else "warm",
            "occurrence": occurrence,
            "dimensions": _jsonable(dimensions),
        }
        every, busy = self._device_list()
        current = _read(cuda.current_device)
        begin = {}
        # 2. synchronize, read the start levels
        synced = all(_synchronize(cuda, d) for d in busy)
        for d in every:
            begin[d] = {
                "allocated": _read(cuda.memory_allocated, d),
                "reserved": _read(cuda.memory_reserved, d),
                "driver": self._driver_reading(d),
            }
        # 3. reset the peaks on the same devices
        for d in every:
            with contextlib.suppress(Exception):
                cuda.reset_peak_memory_stats(d)
        _oom["last"] = None
        self._open = name
        error = None
        t0 = time.perf_counter()
        try:
            with _marked(torch, name):
                yield rec  # 4. the user's code
        except BaseException as e:
            error = e
            raise
        finally:
            self._open = None
            # 5. synchronize (also a device the phase began to use), read the peaks and the
            # end levels
            busy_end = busy + [d for d in every if d not in busy and (_read(cuda.memory_reserved, d) or 0) > 0]
            synced = all([_synchronize(cuda, d) for d in busy_end]) and synced
            seconds = time.perf_counter() - t0
            per = []
            for d in every:
                b = begin[d]
                e_ = {
                    "peak_allocated": _read(cuda.max_memory_allocated, d),
                    "peak_reserved": _read(cuda.max_memory_reserved, d),
                    "allocated": _read(cuda.memory_allocated, d),
                    "reserved": _read(cuda.memory_reserved, d),
                    "driver": self._driver_reading(d),
                }
                used = any((x or 0) > 0 for x in (b["reserved"], e_["reserved"], e_["peak_reserved"]))
                if d == current or d in (self._devices or ()) or used:
                    per.append((d, _device_record(d, b, e_)))
            self._finish(rec, per, current, seconds, error, synced)

    def _finish(self, rec, per, current, seconds, error, synced):
        """Complete 'rec' from the per-device readings [(device, record)] and write."""
        torch = self._torch
        rec["seconds"] = seconds
        rec["ok"] = error is None
        if not synced:
            rec["synchronized"] = False  # a synchronize failed: readings may miss pending work
        main = next((r for d, r in per if d == current), per[0][1] if per else None)
        if main is not None:
            rec["device"] = main["device"]
            for k in ("allocated_bytes", "reserved_bytes", "device_bytes"):
                rec[k] = main[k]
        if len(per) > 1:
            rec["devices"] = [r for _, r in per]
        if error is not None:
            text = str(error).strip()
            first = text.splitlines()[0] if text else ""
            rec["error"] = "%s: %s" % (type(error).__name__, first) if first else type(error).__name__
            rec["error_type"] = type(error).__name__
            oom_type = _oom_error_type(torch)
            rec["oom"] = bool(oom_type is not None and isinstance(error, oom_type))
            last = _oom["last"]
            if rec["oom"] and last is not None:
                rec["requested_bytes"] = last["requested_bytes"]
                rec["oom_device"] = "cuda:%d" % last["device"]
                rec["oom_device_free_bytes"] = last["device_free_bytes"]
        if self._dist is not None:
            # every rank's phase, gathered: its peaks, and whether it ran out of memory
            peak = rec.get("allocated_bytes", {}).get("peak")
            row = {"rank": self._dist[0], "ok": rec["ok"], "oom": rec.get("oom", False),
                   "device": rec.get("device"), "peak_allocated_bytes": peak,
                   "peak_reserved_bytes": rec.get("reserved_bytes", {}).get("peak"),
                   "requested_bytes": rec.get("requested_bytes")}
            try:
                rec["ranks"] = _gather(torch, row)
                rec["imbalance"] = _ranks_summary(rec["ranks"])
            except Exception as e:  # the job's collective failed: this rank's row stands
                rec["ranks_error"] = "%s: %s" % (type(e).__name__, e)
        self.phases.append(rec)
        self._write()

    # -- the record ---------------------------------------------------------------------

    def to_dict(self):
        """The series as the JSON document it writes."""
        ok = all(p.get("ok") for p in self.phases)
        peaks = {"peak_allocated_bytes": None, "peak_reserved_bytes": None}
        for p in self.phases:
            for key, counter in (("peak_allocated_bytes", "allocated_bytes"), ("peak_reserved_bytes", "reserved_bytes")):
                v = p.get(counter, {}).get("peak")
                if v is not None and (peaks[key] is None or v > peaks[key]):
                    peaks[key] = v
        firsts = {}
        warm = {}
        for p in self.phases:
            v = p.get("allocated_bytes", {}).get("peak")
            if p["pass"] == "first":
                firsts[p["name"]] = v
            elif v is not None:
                warm[p["name"]] = max(v, warm.get(p["name"], v))
        doc = {
            "schema": SCHEMA,
            "gpumem_version": _core.version(),
            "source": "gpumem.torch",
            "series": {
                "started_utc": self.started_utc,
                "pid": os.getpid(),
                "argv": list(sys.argv),
                "first_in_process": self._first_in_process,
                "phases_recorded": len(self.phases),
            },
            "environment": self.environment,
            "dimensions": dict(self.dimensions, device=None if self._current is None else "cuda:%d" % self._current),
            "settings": {
                "repeats_in_same_process": True,
                "alloc_conf": _alloc_conf_in_effect(self.environment["torch"]),
                "allocator_backend": self.environment["torch"]["allocator_backend"],
                "devices": "every device of the process" if self._devices is None else ["cuda:%d" % d for d in self._devices],
            },
            "device": _device_summary(self.environment, self._current),
            "phases": self.phases,
            "passes": {
                "first_peak_allocated_bytes": firsts,
                "warm_peak_allocated_bytes": warm,
            },
            "measured": peaks,
            "caveats": self.caveats,
            "ok": ok,
        }
        if self._drv_error:
            doc["series"]["driver_unavailable"] = self._drv_error
        if self._dist is not None:
            doc["series"]["rank"], doc["series"]["world_size"] = self._dist
        return doc

    def _write(self):
        text = json.dumps(self.to_dict(), indent=2) + "\n"
        for p in (self.path, self._mirror, self._saved_to):
            if p is not None:
                _replace(p, text)

    def save(self, path):
        """Write the series to 'path' too (refusing an existing file), and after each later
        phase."""
        path = os.fspath(path)
        if path in (self.path, self._mirror, self._saved_to):
            return
        _claim(path)
        self._saved_to = path
        self._write()


def _device_record(device, b, e):
    def counter(begin, end, peak):
        out = {}
        for k, v in (("begin", begin), ("end", end), ("peak", peak)):
            if v is not None:
                out[k] = v
        return out

    dev = {}
    for k, v in (
        ("free_begin", b["driver"].get("free")),
        ("free_end", e["driver"].get("free")),
        ("used_begin", b["driver"].get("used")),
        ("used_end", e["driver"].get("used")),
    ):
        if v is not None:
            dev[k] = v
    return {
        "device": "cuda:%d" % device,
        "allocated_bytes": counter(b["allocated"], e["allocated"], e["peak_allocated"]),
        "reserved_bytes": counter(b["reserved"], e["reserved"], e["peak_reserved"]),
        "device_bytes": dev,
    }


def _device_summary(env, current):
    out = {"memory_source": "nvml"}
    for d in env.get("devices", []) or []:
        if d.get("cuda_index") == current:
            total = (d.get("memory") or {}).get("total_bytes")
            if total is not None:
                out["total_bytes"] = total
    return out


@contextlib.contextmanager
def _marked(torch, name):
    """Mark the phase in the memory history while record() is active: a record_function
    range (external_annotations, torch >= 2.4) and, where the allocator has it, the memory
    metadata of every trace entry (user_metadata, torch >= 2.10)."""
    if not _recording:
        yield
        return
    mark = MARK_PREFIX + name
    memory = getattr(torch.cuda, "memory", None)
    set_md = getattr(memory, "_set_memory_metadata", None)
    get_md = getattr(memory, "_get_memory_metadata", None)
    previous = None
    if set_md is not None:
        with contextlib.suppress(Exception):
            previous = get_md() if get_md is not None else ""
            set_md(mark)
    profiler = getattr(getattr(torch, "autograd", None), "profiler", None)
    rf = getattr(profiler, "record_function", None)
    try:
        if rf is None:
            yield
        else:
            with rf(mark):
                yield
    finally:
        if set_md is not None and previous is not None:
            with contextlib.suppress(Exception):
                set_md(previous)


def series(**dimensions):
    """The series of the module-level phase(): created on first use, written to
    $GPUMEM_TORCH_OUTPUT when set (else kept in memory: series().save(path)).  'dimensions'
    (batch=8, seq=2048, ...) are added to the series' own."""
    global _default
    with _lock:
        s = _default
    if s is None:
        s = Measure()
        with _lock:
            if _default is None:
                _default = s
            s = _default
    if dimensions:
        s.dimensions.update(_jsonable(dimensions))
        s._write()
    return s


def phase(name, **dimensions):
    """`with gpumem.torch.phase("forward", batch=8):` measures a phase of the default series."""
    return series().phase(name, **dimensions)


class record:
    """`with gpumem.torch.record("profile.pkl"):` records the memory history of the block
    (torch.cuda.memory._record_memory_history with stacks), marks every phase() run inside it,
    and writes the snapshot to 'path' at the end, or at once when the allocator runs out of
    memory (the state at the failure).  'path' is claimed at the start: an existing file is
    never replaced.  Read the result with `gpumem snapshot categories path` or
    gpumem.Snapshot(path).  Under a torch.distributed process group each rank writes its own
    file, named as Measure names them (rankR_profile.pkl), which gpumem's commands number by.

    With digest=True (the default) the snapshot's digest is written beside it at the end
    (rankR_profile.digest: its name less the extension, plus ".digest"), the file `gpumem
    snapshot digest` writes, so that only kilobytes need leave the node: the job's commands
    read it in the snapshot's place.  Its name is claimed at the start too.  A digest that
    cannot be written raises, unless the block is already raising (then digest_error says
    why)."""

    def __init__(self, path, *, max_entries=100000, stacks="all", digest=True):
        self.path = os.fspath(path)
        self.max_entries = int(max_entries)
        self.stacks = stacks
        self.digest_path = None
        self._digest = bool(digest)
        self._torch = None
        self.dumped_on_oom = False
        self.oom_dump_error = None
        self.digest_error = None

    def __enter__(self):
        torch = self._torch = _torch()
        dist = _distributed(torch)
        if dist is not None:
            self.path = _rank_path(self.path, dist[0])
        memory = torch.cuda.memory
        if not hasattr(memory, "_record_memory_history") or not hasattr(memory, "_dump_snapshot"):
            raise RuntimeError("this PyTorch cannot record memory history (torch >= 2.1 needed)")
        if _allocator_backend(torch) == "cudaMallocAsync":
            raise RuntimeError("backend:cudaMallocAsync does not record memory history: use the native allocator")
        _claim(self.path)
        claimed = [self.path]
        try:
            if self._digest:
                self.digest_path = _digest_path(self.path)
                _claim(self.digest_path)
                claimed.append(self.digest_path)
            memory._record_memory_history(enabled="all", context="all", stacks=self.stacks, max_entries=self.max_entries)
        except BaseException:
            for p in claimed:
                os.unlink(p)
            raise
        _attach_oom_observer(torch)
        _recording.append(self)
        return self

    def _dump(self):
        tmp, fd = _temporary(self.path, ".pickle")
        os.close(fd)
        try:
            self._torch.cuda.memory._dump_snapshot(tmp)
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def _dump_on_oom(self):
        # Called by the allocator's OOM observer, before the error is raised.
        self._dump()
        self.dumped_on_oom = True

    def __exit__(self, exc_type, exc, tb):
        torch = self._torch
        try:
            oom_type = _oom_error_type(torch)
            if not (self.dumped_on_oom and exc is not None and oom_type is not None and isinstance(exc, oom_type)):
                self._dump()
        except BaseException:
            self._drop_digest_claim()  # no snapshot, no digest
            raise
        finally:
            if self in _recording:
                _recording.remove(self)
            with contextlib.suppress(Exception):
                torch.cuda.memory._record_memory_history(enabled=None)
        if self.digest_path is not None:
            self._write_digest(exc is not None)
        return False

    def _drop_digest_claim(self):
        """Remove the digest's name claimed at the start while it is still empty."""
        with contextlib.suppress(OSError, TypeError):
            if os.path.getsize(self.digest_path) == 0:
                os.unlink(self.digest_path)

    def _write_digest(self, raising):
        """The digest of the snapshot just written, over the name claimed at the start; on a
        failure the claim is removed (no empty digest is left)."""
        try:
            _Snapshot(self.path).digest(self.digest_path, overwrite=True)
        except Exception as e:
            self._drop_digest_claim()
            if not raising:
                raise
            self.digest_error = e
