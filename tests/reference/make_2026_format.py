#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Write small snapshots in the shapes that 2026 PyTorch writes and no public real file shows
yet (docs/snapshot.md, "File format"), into DIR:

  pinned_host.pickle         host_segments / host_traces (pinned CPU memory) beside a device
  pinned_host_nested.pickle  the same, host_traces as a list of per-device lists
  private_pools.pickle       segment_pool_id of a CUDA graph pool and of a MemPool, trace
                             entries with pool_id
  metadata.pickle            user_metadata (plain text, JSON, text to escape) and
                             internal_metadata on trace entries
  forward_frames.pickle      a backward allocation whose trace entry carries forward_frames,
                             and a compiled graph's whose frame has the fx_* fields of
                             _augment_frames
  xpu_writer_c.pickle        an XPU snapshot as torch::xpu::_memory_snapshot_pickled writes it
  memory_stats.json          torch.accelerator.memory.memory_stats() of the same moment as
                             forward_frames.pickle, with component_bytes.* counters

Where each shape comes from (read, never copied):
- host data: PR pytorch/pytorch#182407 ("Support memory snapshot for CPU pinned memory",
  2026-05): _record_memory_history(record_host=True) puts the CachingHostAllocator's
  getSegments()/getTraces() into the 'host_segments' and 'host_traces' keys, built like
  'segments' and 'device_traces'.  The writer itself was not available to read: the segment
  and trace-entry dicts below are the device ones; both nestings of host_traces are written.
- pool_id: PR pytorch/pytorch#177717 (2026-03) adds the entry's mempool_ as a (int, int)
  tuple "in both serialization paths", as segment_pool_id on segments.  (n, 0) is the pool
  a graph capture makes itself, (0, n) one the user made (graph_pool_handle(), MemPool).
- user_metadata: PR pytorch/pytorch#165490 (2025-10), a string set with
  torch.cuda.memory._set_memory_metadata, "" by default, on every trace entry
  (pytorch/pytorch@0902ce1f5816088b02b5aeb196c0c8dacf16bf35:torch/csrc/xpu/memory_snapshot.cpp
  inserts compile_context and user_metadata on every entry); JSON text after
  PR pytorch/pytorch#193432 (2026-08), which also adds 'internal_metadata', written only when
  non-empty.
- forward_frames: a list of traceback strings of the autograd node's forward pass
  (traceback.format_stack() lines: '  File "f", line N, in name' and the source line);
  fx_node_op/fx_node_name/fx_node_target/fx_original_trace on frames come from
  torch/_utils.py's _augment_frames (_dump_snapshot(augment_with_fx_traces=True)); its
  _Frame TypedDict documents fx_original_trace as the "Original model source code stack
  trace", and PyTorch's own test finds the model's source line ("a = self.net1(x)") in it.
- XPU: pytorch/pytorch@0902ce1f:torch/csrc/xpu/memory_snapshot.cpp _memory_snapshot_pickled():
  the TorchScript pickler (protocol 2), segments and trace entries as the CUDA writer's,
  allocator_settings {PYTORCH_ALLOC_CONF, max_split_size, garbage_collection_threshold,
  expandable_segments, roundup_power2_divisions} (no CUDA-only keys), then
  external_annotations.
- component_bytes: PR pytorch/pytorch#182387 (2026-05, "Allocator-level memory attribution
  primitives"): with component_tracking enabled, memory_stats() has
  'component_bytes.<component>.current' (parameter, gradient, activation, optimizer_state,
  ...) beside the allocator's counters.

usage: make_2026_format.py DIR
"""
import json
import os
import pickle
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_synthetic import WriterC  # noqa: E402  (the protocol-2 TorchScript encoding)

MiB = 1 << 20
T0 = 1_780_000_000_000_000
USER_TRAIN = "/home/u/train.py"
USER_MODEL = "/home/u/model.py"
TORCH = "/usr/lib/python3.12/site-packages/torch"


def frame(fn, line, name, **fx):
    d = {"name": name, "filename": fn, "line": line}
    d.update(fx)
    return d


def block(addr, size, state, frames, requested=None):
    return {"address": addr, "size": size,
            "requested_size": size if requested is None else requested,
            "state": state, "frames": frames}


def segment(device, addr, blocks, stream=0, pool=(0, 0), small=False, frames=None):
    total = sum(b["size"] for b in blocks)
    alloc = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    active = sum(b["size"] for b in blocks if b["state"] != "inactive")
    req = sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated")
    return {"device": device, "address": addr, "total_size": total, "allocated_size": alloc,
            "active_size": active, "requested_size": req, "stream": stream,
            "segment_type": "small" if small else "large", "segment_pool_id": pool,
            "is_expandable": False, "frames": frames or [], "blocks": blocks}


def entry(i, action, addr, size, frames=None, stream=0, **extra):
    """A trace entry in the writers' key order: action, addr, size, stream, compile_context,
    user_metadata, frames, time_us; the 2026 keys after."""
    e = {"action": action, "addr": addr, "size": size, "stream": stream,
         "compile_context": "N/A", "user_metadata": extra.pop("user_metadata", "")}
    if frames is not None:
        e["frames"] = frames
    e["time_us"] = T0 + 1000 * i
    e.update(extra)
    return e


def settings():
    return {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1,
            "garbage_collection_threshold": 0.0, "expandable_segments": False,
            "pinned_num_register_threads": 1, "release_lock_on_cudamalloc": False,
            "pinned_use_cuda_host_register": False, "graph_capture_record_stream_reuse": False,
            "roundup_power2_divisions": {str(1 << k): 0 for k in range(16)}}


FR_LOAD = [frame(TORCH + "/nn/modules/module.py", 1340, "_apply"),
           frame(USER_TRAIN, 20, "main")]
FR_FWD = [frame(TORCH + "/nn/functional.py", 2200, "linear"),
          frame(USER_MODEL, 12, "forward"), frame(USER_TRAIN, 40, "main")]


def device_part():
    """One device: a 20 MiB segment holding 8 MiB of weights and 4 MiB of activations."""
    base = 0x7f4000000000
    seg = segment(0, base, [block(base, 8 * MiB, "active_allocated", FR_LOAD),
                            block(base + 8 * MiB, 4 * MiB, "active_allocated", FR_FWD),
                            block(base + 12 * MiB, 8 * MiB, "inactive", [])], frames=FR_LOAD)
    trace = [entry(0, "segment_alloc", base, 20 * MiB, FR_LOAD),
             entry(1, "alloc", base, 8 * MiB, FR_LOAD),
             entry(2, "alloc", base + 8 * MiB, 4 * MiB, FR_FWD)]
    return seg, trace


def pinned_host(nested):
    seg, trace = device_part()
    hbase = 0x7f9a00000000
    fr_pin = [frame(TORCH + "/utils/data/_utils/pin_memory.py", 18, "pin_memory"),
              frame(USER_TRAIN, 33, "main")]
    hseg = segment(-1, hbase, [block(hbase, 2 * MiB, "active_allocated", fr_pin),
                               block(hbase + 2 * MiB, 2 * MiB, "inactive", [])], frames=fr_pin)
    htrace = [entry(0, "segment_alloc", hbase, 4 * MiB, fr_pin),
              entry(1, "alloc", hbase, 2 * MiB, fr_pin),
              entry(2, "alloc", hbase + 2 * MiB, 2 * MiB, fr_pin),
              entry(3, "free_requested", hbase + 2 * MiB, 2 * MiB, fr_pin),
              entry(4, "free_completed", hbase + 2 * MiB, 2 * MiB, fr_pin)]
    return {"segments": [seg], "device_traces": [trace], "allocator_settings": settings(),
            "external_annotations": [], "host_segments": [hseg],
            "host_traces": [htrace] if nested else htrace}


def private_pools():
    seg, trace = device_part()
    g, m = 0x7f5000000000, 0x7f6000000000
    fr_graph = [frame(TORCH + "/cuda/graphs.py", 180, "capture_begin"),
                frame(USER_TRAIN, 60, "capture")]
    fr_pool = [frame(USER_TRAIN, 70, "with_pool")]
    gseg = segment(0, g, [block(g, 2 * MiB, "active_allocated", fr_graph)], pool=(1, 0))
    mseg = segment(0, m, [block(m, 2 * MiB, "active_allocated", fr_pool)], pool=(0, 1))
    for e in trace:
        e["pool_id"] = (0, 0)
    trace += [entry(3, "segment_alloc", g, 2 * MiB, fr_graph, pool_id=(1, 0)),
              entry(4, "alloc", g, 2 * MiB, fr_graph, pool_id=(1, 0)),
              entry(5, "segment_alloc", m, 2 * MiB, fr_pool, pool_id=(0, 1)),
              entry(6, "alloc", m, 2 * MiB, fr_pool, pool_id=(0, 1))]
    return {"segments": [seg, gseg, mseg], "device_traces": [trace],
            "allocator_settings": settings(), "external_annotations": []}


def metadata():
    seg, trace = device_part()
    base = seg["address"]
    trace[1]["user_metadata"] = "loading weights"
    trace[2]["user_metadata"] = json.dumps({"phase": "forward", "step": 3, "note": "a \"b\""})
    trace.append(entry(3, "alloc", base + 12 * MiB, 1 * MiB, FR_FWD,
                       user_metadata="tab\there\nnewline \x1b[31mred",
                       internal_metadata="mallocWithAddress"))
    trace.append(entry(4, "free_requested", base + 12 * MiB, 1 * MiB, FR_FWD))
    trace.append(entry(5, "free_completed", base + 12 * MiB, 1 * MiB, FR_FWD))
    return {"segments": [seg], "device_traces": [trace], "allocator_settings": settings(),
            "external_annotations": []}


def forward_frames():
    seg, trace = device_part()
    base = seg["address"]
    # The backward pass as the autograd engine runs it: torch frames under loss.backward().
    fr_bwd = [frame(TORCH + "/autograd/graph.py", 825, "_engine_run_backward"),
              frame(TORCH + "/autograd/__init__.py", 347, "backward"),
              frame(TORCH + "/_tensor.py", 626, "backward"),
              frame(USER_TRAIN, 44, "main")]
    fwd = ['  File "%s", line 40, in main\n    out = model(x)\n' % USER_TRAIN,
           '  File "%s", line 1773, in _call_impl\n    return forward_call(*args)\n'
           % (TORCH + "/nn/modules/module.py"),
           '  File "%s", line 15, in forward\n    h = torch.relu(self.fc2(h))\n' % USER_MODEL]
    # A compiled graph's allocation: the generated code's frame (under the inductor cache,
    # not the user's code) carries the FX node it runs and that node's source stack
    # (node.stack_trace, as traceback.format_stack() writes it).
    fx = [frame("/tmp/torchinductor_u/ab/cabx2k.py", 120, "call",
                fx_node_op="call_function", fx_node_name="relu",
                fx_node_target="aten.relu.default",
                fx_original_trace='  File "%s", line 15, in forward\n'
                                  '    h = torch.relu(self.fc2(h))\n' % USER_MODEL),
          frame(TORCH + "/_inductor/output_code.py", 600, "call"),
          frame(TORCH + "/_dynamo/eval_frame.py", 745, "_fn"),
          frame(USER_TRAIN, 41, "main")]
    trace.append(entry(3, "alloc", base + 12 * MiB, 2 * MiB, fr_bwd, forward_frames=fwd))
    trace.append(entry(4, "alloc", base + 14 * MiB, 1 * MiB, fx))
    seg["blocks"][2:] = [block(base + 12 * MiB, 2 * MiB, "active_allocated", fr_bwd),
                         block(base + 14 * MiB, 1 * MiB, "active_allocated", fx),
                         block(base + 15 * MiB, 5 * MiB, "inactive", [])]
    seg.update(segment(0, base, seg["blocks"], frames=FR_LOAD))
    return {"segments": [seg], "device_traces": [trace], "allocator_settings": settings(),
            "external_annotations": []}


def memory_stats():
    """memory_stats() at the moment forward_frames.pickle was taken: 8 MiB of weights, 4 MiB
    of activations, 3 MiB allocated in the backward pass (a gradient, an activation of the
    compiled graph), as the component tracker stamped them."""
    return {"allocated_bytes.all.current": 15 * MiB, "reserved_bytes.all.current": 20 * MiB,
            "component_bytes.parameter.current": 8 * MiB,
            "component_bytes.parameter.peak": 8 * MiB,
            "component_bytes.activation.current": 5 * MiB,
            "component_bytes.gradient.current": 2 * MiB,
            "component_bytes.optimizer_state.current": 0,
            "component_bytes.other.current": 0}


def xpu():
    seg, trace = device_part()
    return {"segments": [seg], "device_traces": [trace],
            "allocator_settings": {"PYTORCH_ALLOC_CONF": "", "max_split_size": -1,
                                   "garbage_collection_threshold": 0.0,
                                   "expandable_segments": False,
                                   "roundup_power2_divisions": {str(1 << k): 0
                                                                for k in range(16)}},
            "external_annotations": []}


def main(argv):
    if len(argv) != 2:
        sys.exit("usage: make_2026_format.py DIR")
    d = argv[1]
    os.makedirs(d, exist_ok=True)

    def w(name, data):
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)

    w("pinned_host.pickle", pickle.dumps(pinned_host(False), protocol=4))
    w("pinned_host_nested.pickle", pickle.dumps(pinned_host(True), protocol=4))
    w("private_pools.pickle", pickle.dumps(private_pools(), protocol=4))
    w("metadata.pickle", pickle.dumps(metadata(), protocol=4))
    w("forward_frames.pickle", pickle.dumps(forward_frames(), protocol=4))
    w("xpu_writer_c.pickle", WriterC().dump(xpu()))
    w("memory_stats.json", json.dumps(memory_stats(), indent=1).encode())


if __name__ == "__main__":
    main(sys.argv)
