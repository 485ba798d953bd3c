#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make_corpus.py DIR - small snapshots for the report fuzz target (tests/fuzz/fuzz_report.c):
odd shapes the report must draw without crashing. Standard library only; run once, commit
the files (each well under 4 KiB)."""
import os
import pickle
import sys

MiB = 1 << 20


def fr(name, filename='/home/u/train.py', line=1):
    return {'filename': filename, 'line': line, 'name': name}


def ev(action, addr, size, t=None, frames=None, stream=0):
    e = {'action': action, 'addr': addr, 'size': size, 'stream': stream}
    if t is not None:
        e['time_us'] = t
    if frames is not None:
        e['frames'] = frames
    return e


def seg(dev, addr, blocks, small=False, expandable=False, stream=0):
    total = sum(b[0] for b in blocks)
    out, a = [], addr
    for size, state, req in blocks:
        out.append({'address': a, 'size': size, 'requested_size': req, 'state': state,
                    'frames': [fr('keep')] if state != 'inactive' else []})
        a += size
    alloc = sum(b[0] for b in blocks if b[1] == 'active_allocated')
    return {'device': dev, 'address': addr, 'total_size': total, 'allocated_size': alloc,
            'active_size': alloc, 'requested_size': sum(b[2] for b in blocks if b[1] == 'active_allocated'),
            'stream': stream, 'segment_type': 'small' if small else 'large',
            'segment_pool_id': (0, 0), 'is_expandable': expandable, 'frames': [], 'blocks': blocks and out}


def main():
    d = sys.argv[1]
    os.makedirs(d, exist_ok=True)
    hostile = [fr('</script><script>alert(1)</script>', 'C:\\a\\<!--b.py', 7), fr('forward', '/x/torch/nn/modules/module.py', 9)]
    files = {
        # a training-like trace with time, an oom on device 1 and a segment freed by empty_cache
        'oom_two_devices.pickle': {
            'segments': [seg(0, 0x7f0000000000, [(20 * MiB, 'active_allocated', 20 * MiB - 100)]),
                         seg(1, 0x7f1000000000, [(2 * MiB, 'inactive', 0)], small=True)],
            'device_traces': [
                [ev('segment_alloc', 0x7f0000000000, 20 * MiB, 10, hostile),
                 ev('alloc', 0x7f0000000000, 20 * MiB - 100, 11, hostile),
                 ev('segment_alloc', 0x7f2000000000, 40 * MiB, 12, []),
                 ev('alloc', 0x7f2000000000, 40 * MiB, 13, []),
                 ev('free_requested', 0x7f2000000000, 40 * MiB, 14),
                 ev('free_completed', 0x7f2000000000, 40 * MiB, 15),
                 ev('segment_free', 0x7f2000000000, 40 * MiB, 16, [])],
                [ev('alloc', 0x7f1000000000, 4096, 20, [fr('step', '/x/torch/optim/adamw.py')]),
                 {'action': 'oom', 'device_free': 1 << 30, 'size': 8 << 30, 'stream': 0, 'time_us': 21},
                 ev('free_completed', 0x7f1000000000, 4096, 22)],
                []],
            'allocator_settings': {'expandable_segments': False, 'max_split_size': -1,
                                   'garbage_collection_threshold': 0.0, 'roundup_power2_divisions': {'1': 0}},
            'external_annotations': [{'name': 'ProfilerStep#1', 'stage': 'START', 'device': 0, 'time_us': 10}],
        },
        # no time_us (event index axis), events at addresses no segment holds, unknown actions
        'no_time_orphans.pickle': {
            'segments': [seg(0, 0x1000000, [(1 * MiB, 'active_allocated', 1 * MiB),
                                            (1 * MiB, 'active_pending_free', 1 * MiB)], small=False)],
            'device_traces': [[ev('free_completed', 0x9000000, 512), ev('alloc', 0x1000000, 1 * MiB),
                               ev('alloc', 0x1000000, 512), {'action': 'user_defined', 'addr': 0, 'size': 0, 'stream': 0},
                               ev('snapshot', 0, 0), ev('segment_map', 0x1000000, 2 * MiB),
                               ev('segment_unmap', 0x5000000, 2 * MiB)]],
        },
        # the segments of a 1.13-style list, no trace at all
        'list_only.pickle': [seg(3, 0x2000000, [(512, 'active_allocated', 100), (2 * MiB - 512, 'inactive', 0)], small=True)],
        # expandable segment with maps, one event with a huge size (2^61: the loader refuses sizes
        # that add up to 2^63) and stream
        'expandable.pickle': {
            'segments': [seg(0, 0x3000000000, [(20 * MiB, 'active_allocated', 20 * MiB), (4 * MiB, 'inactive', 0)], expandable=True,
                             stream=2 ** 63 + 5)],
            'device_traces': [[ev('segment_map', 0x3000000000, 20 * MiB, 1, [], 2 ** 63 + 5),
                               ev('alloc', 0x3000000000, 20 * MiB, 2, [fr('main')], 2 ** 63 + 5),
                               ev('segment_map', 0x3001400000, 4 * MiB, 3, [], 2 ** 63 + 5),
                               ev('alloc', 0x3001400000, 2 ** 61, 4, [fr('main')]),
                               ev('free_completed', 0x3001400000, 2 ** 61, 4)]],
        },
    }
    for name, obj in files.items():
        with open(os.path.join(d, name), 'wb') as f:
            pickle.dump(obj, f, protocol=4)


main()
