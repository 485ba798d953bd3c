# SPDX-License-Identifier: MIT
"""torch.cuda.memory of the fake: the allocator backend, the memory history and the snapshot
it dumps, in PyTorch 2.9's layout (written with Python's pickle, as torch does)."""
import pickle


def _state():
    from . import state

    return state


def get_allocator_backend():
    return _state().backend


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=None, **kw):
    s = _state()
    s.calls.append(("_record_memory_history", enabled))
    if s.backend == "cudaMallocAsync":
        raise RuntimeError("cudaMallocAsync does not yet support recordHistory.")
    if enabled is None:
        s.recording = False
        return
    s.recording = True
    s.trace = {}
    s.annotations = []


def _set_memory_metadata(metadata):
    _state().metadata = metadata


def _get_memory_metadata():
    return _state().metadata


def _snapshot(device=None):
    s = _state()
    segments = []
    for dev in s.devices:
        for address, size, blocks in dev.segments:
            segments.append(
                {
                    "device": dev.index,
                    "address": address,
                    "total_size": size,
                    "allocated_size": sum(b[1] for b in blocks if b[3]),
                    "active_size": sum(b[1] for b in blocks if b[3]),
                    "requested_size": sum(b[2] for b in blocks if b[3]),
                    "stream": 0,
                    "segment_type": "small" if size <= (2 << 20) else "large",
                    "segment_pool_id": (0, 0),
                    "is_expandable": False,
                    "frames": [],
                    "blocks": [
                        {
                            "address": address + off,
                            "size": bsize,
                            "requested_size": req,
                            "state": "active_allocated" if used else "inactive",
                            "frames": [],
                        }
                        for off, bsize, req, used in blocks
                    ],
                }
            )
    return {
        "segments": segments,
        "device_traces": [list(s.trace.get(d.index, [])) for d in s.devices],
        "allocator_settings": {
            "PYTORCH_CUDA_ALLOC_CONF": "",
            "max_split_size": -1,
            "garbage_collection_threshold": 0.0,
            "expandable_segments": False,
            "pinned_num_register_threads": 1,
            "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False,
            "roundup_power2_divisions": {"1": 0, "2": 0},
            "graph_capture_record_stream_reuse": False,
        },
        "external_annotations": list(s.annotations),
    }


def _dump_snapshot(filename="dump_snapshot.pickle"):
    _state().calls.append(("_dump_snapshot", filename))
    with open(filename, "wb") as f:
        pickle.dump(_snapshot(), f)
