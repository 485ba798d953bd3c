# SPDX-License-Identifier: MIT
"""torch.cuda of the fake (see torch/__init__.py): per-device allocator counters, a call log,
OOM on demand, and the memory history of torch.cuda.memory."""
import sys

from . import memory  # noqa: F401  (torch.cuda.memory)

SMALL = 1 << 20
SEGMENT = 2 << 20


class OutOfMemoryError(RuntimeError):
    pass


class _Device:
    def __init__(self, index, capacity):
        self.index = index
        self.capacity = capacity
        self.segments = []  # [address, size, [[offset, size, requested, allocated], ...]]
        self.peak_allocated = 0
        self.peak_reserved = 0

    def allocated(self):
        return sum(b[1] for s in self.segments for b in s[2] if b[3])

    def reserved(self):
        return sum(s[1] for s in self.segments)


class _State:
    def __init__(self):
        self.observers = []  # process-wide: the real allocator cannot detach them either
        self.reset()

    def reset(self, devices=1, capacity=8 << 30, backend="native"):
        self.devices = [_Device(i, capacity) for i in range(devices)]
        self.current = 0
        self.backend = backend
        self.calls = []
        self.recording = False
        self.trace = {}  # device -> [entry]
        self.annotations = []
        self.metadata = ""
        self.clock_us = 1764000000000000
        self.next_address = 0x7F0000000000
        self.fail_synchronize = False

    def tick(self):
        self.clock_us += 10
        return self.clock_us

    def annotate(self, name, stage):
        if self.recording:
            self.annotations.append(
                {"name": name, "stage": stage, "device": self.current, "time_us": self.tick()}
            )

    def event(self, device, action, addr, size, frames):
        if not self.recording:
            return
        e = {"action": action}
        e["device_free" if action == "oom" else "addr"] = addr
        e.update({"size": size, "stream": 0, "compile_context": "N/A"})
        if self.metadata:
            e["user_metadata"] = self.metadata
        e["frames"] = frames
        e["time_us"] = self.tick()
        self.trace.setdefault(device, []).append(e)


state = _State()


def _dev(device):
    if device is None:
        return state.current
    if isinstance(device, str):
        return int(device.split(":")[1])
    return int(device)


def _frames():
    out = []
    f = sys._getframe(2)
    while f is not None and len(out) < 8:
        out.append({"filename": f.f_code.co_filename, "line": f.f_lineno, "name": f.f_code.co_name})
        f = f.f_back
    return out


def is_available():
    return True


def device_count():
    return len(state.devices)


def current_device():
    state.calls.append(("current_device", state.current))
    return state.current


def set_device(device):
    state.current = _dev(device)


def synchronize(device=None):
    d = _dev(device)
    state.calls.append(("synchronize", d))
    if state.fail_synchronize:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")


def memory_allocated(device=None):
    d = _dev(device)
    state.calls.append(("memory_allocated", d))
    return state.devices[d].allocated()


def memory_reserved(device=None):
    d = _dev(device)
    state.calls.append(("memory_reserved", d))
    return state.devices[d].reserved()


def max_memory_allocated(device=None):
    d = _dev(device)
    state.calls.append(("max_memory_allocated", d))
    return state.devices[d].peak_allocated


def max_memory_reserved(device=None):
    d = _dev(device)
    state.calls.append(("max_memory_reserved", d))
    return state.devices[d].peak_reserved


def reset_peak_memory_stats(device=None):
    d = _dev(device)
    state.calls.append(("reset_peak_memory_stats", d))
    dev = state.devices[d]
    dev.peak_allocated = dev.allocated()
    dev.peak_reserved = dev.reserved()


def get_device_name(device=None):
    return "Fake GPU %d" % _dev(device)


class _Properties:
    def __init__(self, d):
        self.name = get_device_name(d)
        self.total_memory = state.devices[d].capacity
        self.major, self.minor = 8, 0


def get_device_properties(device=None):
    return _Properties(_dev(device))


def alloc(nbytes, device=None):
    """Allocate like the caching allocator: a handle (device, segment address, offset)."""
    d = _dev(device)
    dev = state.devices[d]
    size = (nbytes + 511) // 512 * 512
    frames = _frames()
    state.calls.append(("alloc", d))
    for seg in dev.segments:
        blocks = seg[2]
        if len(blocks) == 1 and not blocks[0][3] and seg[1] >= size:
            blocks[:] = [[0, size, nbytes, True]] + ([[size, seg[1] - size, 0, False]] if seg[1] > size else [])
            break
    else:
        seg_size = SEGMENT if size <= SMALL else (size + SEGMENT - 1) // SEGMENT * SEGMENT
        if dev.reserved() + seg_size > dev.capacity:
            # As CUDACachingAllocator: the oom trace entry (the rounded request), then the
            # observers (device, allocation size tried, capacity or limit, device free).
            free = dev.capacity - dev.reserved()
            state.event(d, "oom", free, size, frames)
            for observer in list(state.observers):
                observer(d, seg_size, dev.capacity, free)
            raise OutOfMemoryError(
                "CUDA out of memory. Tried to allocate %d bytes. GPU %d has a total capacity of "
                "%d bytes of which %d bytes is free." % (seg_size, d, dev.capacity, free)
            )
        seg = [state.next_address, seg_size, [[0, size, nbytes, True]]]
        if seg_size > size:
            seg[2].append([size, seg_size - size, 0, False])
        state.next_address += seg_size
        dev.segments.append(seg)
        state.event(d, "segment_alloc", seg[0], seg_size, frames)
    state.event(d, "alloc", seg[0], nbytes, frames)
    dev.peak_allocated = max(dev.peak_allocated, dev.allocated())
    dev.peak_reserved = max(dev.peak_reserved, dev.reserved())
    return (d, seg[0])


def free(handle):
    d, address = handle
    dev = state.devices[d]
    state.calls.append(("free", d))
    frames = _frames()
    for seg in dev.segments:
        if seg[0] == address and seg[2][0][3]:
            requested = seg[2][0][2]
            seg[2][:] = [[0, seg[1], 0, False]]
            state.event(d, "free_requested", address, requested, frames)
            state.event(d, "free_completed", address, requested, frames)
            return
    raise ValueError("not allocated")
