# SPDX-License-Identifier: MIT
"""torch.distributed of the fake (see torch/__init__.py): a process group of several real
processes of the test, over a folder (init_method="file:///folder"), with just the calls
gpumem.torch makes.  all_gather_object is a real collective: each rank writes its object
into the folder under the call's sequence number, then waits (10 s at most) for every
other rank's, so ranks that do not call it in the same order hang and fail as they would.
The default backend is the one given to init_process_group ("nccl" as on a GPU job);
new_group(backend="gloo") gives a group of that backend, recorded in calls."""
import os
import pickle
import time

_state = {"rank": None, "world": None, "dir": None, "backend": None, "seq": 0}
calls = []  # (name, backend) of every collective and group made


class ProcessGroup:
    def __init__(self, backend):
        self.backend = backend


def is_available():
    return True


def is_initialized():
    return _state["rank"] is not None


def init_process_group(backend="nccl", init_method=None, rank=None, world_size=None):
    if not init_method or not init_method.startswith("file://"):
        raise ValueError("the fake needs init_method='file:///folder'")
    _state.update(rank=int(rank), world=int(world_size), dir=init_method[len("file://"):],
                  backend=backend, seq=0)
    os.makedirs(_state["dir"], exist_ok=True)


def destroy_process_group():
    _state.update(rank=None, world=None, dir=None, backend=None, seq=0)


def _need():
    if not is_initialized():
        raise RuntimeError("Default process group has not been initialized")


def get_rank(group=None):
    _need()
    return _state["rank"]


def get_world_size(group=None):
    _need()
    return _state["world"]


def get_backend(group=None):
    _need()
    return group.backend if group is not None else _state["backend"]


def new_group(ranks=None, backend=None):
    _need()
    calls.append(("new_group", backend))
    return ProcessGroup(backend or _state["backend"])


def all_gather_object(object_list, obj, group=None):
    _need()
    backend = get_backend(group)
    calls.append(("all_gather_object", backend))
    if backend == "nccl":
        # as PyTorch: objects through NCCL need the current CUDA device set, which gpumem
        # must not rely on; the fake refuses, so that a gloo group is used
        raise RuntimeError("fake: all_gather_object on an NCCL group")
    seq = _state["seq"]
    _state["seq"] += 1
    d, world = _state["dir"], _state["world"]
    path = os.path.join(d, "gather.%d.%d" % (seq, _state["rank"]))
    with open(path + ".tmp", "wb") as f:
        pickle.dump(obj, f)
    os.replace(path + ".tmp", path)
    deadline = time.monotonic() + 60  # the ranks start as slowly as the machine lets them
    for r in range(world):
        p = os.path.join(d, "gather.%d.%d" % (seq, r))
        while not os.path.exists(p):
            if time.monotonic() > deadline:
                raise RuntimeError("fake: rank %d never joined all_gather_object %d" % (r, seq))
            time.sleep(0.005)
        with open(p, "rb") as f:
            object_list[r] = pickle.load(f)
