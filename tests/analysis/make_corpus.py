#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""make_corpus.py OUTDIR - write the small snapshot pickles of tests/fuzz/corpus/analysis/:
odd traces that the analysis must survive (frees without allocs, an address allocated twice,
an oom, partial unmaps of expandable segments, engine events without frames, annotations,
two devices, a leak).  Plain dicts pickled by CPython; regenerate with this script."""
import os
import pickle
import sys

PY = '/e/lib/python3.11/site-packages/'
MOD = {'filename': PY + 'torch/nn/modules/module.py', 'line': 1520, 'name': '_call_impl'}
APPLY = {'filename': PY + 'torch/nn/modules/module.py', 'line': 930, 'name': '_apply'}
BWD = {'filename': PY + 'torch/autograd/__init__.py', 'line': 251, 'name': 'backward'}
STEP = {'filename': PY + 'torch/optim/adam.py', 'line': 111, 'name': '_init_group'}
ZG = {'filename': PY + 'torch/optim/optimizer.py', 'line': 820, 'name': 'zero_grad'}
USER = {'filename': 'C:\\u\\train.py', 'line': 40, 'name': 'main'}
ENGINE = {'filename': '??', 'line': 0,
          'name': 'torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&)'}
M = 1 << 20


def ev(action, addr, size, frames=None, t=None, **kw):
    e = {'action': action, 'addr': addr, 'size': size, 'stream': 0}
    if frames is not None:
        e['frames'] = frames
    if t is not None:
        e['time_us'] = t
    e.update(kw)
    return e


def training(iters, leak):
    tr, t = [], 1000
    tr.append(ev('segment_alloc', 0x1000000, 20 * M, [APPLY, USER], t))
    tr.append(ev('alloc', 0x1000000, 4 * M, [APPLY, USER], t + 1))
    for i in range(iters):
        t += 100
        tr.append(ev('alloc', 0x1400000, 1 * M, [USER], t))
        tr.append(ev('alloc', 0x1500000, 2 * M, [MOD, USER], t + 1))
        tr.append(ev('alloc', 0x1700000, 512, [BWD, USER], t + 2))
        tr.append(ev('alloc', 0x1800000, 4 * M, [], t + 3))
        tr.append(ev('free_requested', 0x1500000, 2 * M, [ENGINE], t + 4))
        tr.append(ev('free_completed', 0x1500000, 2 * M, [ENGINE], t + 4))
        if i == 0:
            tr.append(ev('alloc', 0x1c00000, 4 * M, [STEP, USER], t + 5))
        tr.append(ev('free_requested', 0x1800000, 4 * M, [ZG, USER], t + 6))
        tr.append(ev('free_completed', 0x1800000, 4 * M, [ZG, USER], t + 6))
        if leak:
            tr.append(ev('alloc', 0x2000000 + i * 4096, 4096, [dict(USER, line=99)], t + 7))
        tr.append(ev('free_requested', 0x1400000, 1 * M, [USER], t + 8))
        tr.append(ev('free_completed', 0x1400000, 1 * M, [USER], t + 8))
    return tr


def write(path, obj, proto=4):
    with open(path, 'wb') as f:
        pickle.dump(obj, f, protocol=proto)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    seg = {'device': 0, 'address': 0x1000000, 'total_size': 20 * M, 'allocated_size': 0,
           'active_size': 0, 'requested_size': 0, 'stream': 0, 'segment_type': 'large',
           'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': [],
           'blocks': [{'address': 0x1000000, 'size': 20 * M, 'requested_size': 0,
                       'state': 'inactive', 'frames': []}]}
    write(os.path.join(out, 'train_leak.pickle'),
          {'segments': [seg], 'device_traces': [training(4, True)],
           'external_annotations': [{'name': 'Optimizer.step#Adam.step', 'stage': 'START',
                                     'device': 0, 'time_us': 1100},
                                    {'name': 'Optimizer.step#Adam.step', 'stage': 'END',
                                     'device': 0, 'time_us': 1106}]})
    odd = [ev('free_completed', 0x500, 512, [USER]),            # free without alloc
           ev('alloc', 0x600, 100, [MOD]), ev('alloc', 0x600, 200, [MOD]),   # same address
           ev('segment_map', 0x7000000, 40 * M, []),
           ev('segment_unmap', 0x7000000 + 4 * M, 2 * M, []),   # partial unmap
           ev('oom', None, 64 * M, [MOD, USER], device_free=3 * M),
           ev('snapshot', 0, 0), ev('user_defined', 0, 0),
           ev('free_requested', 0x600, 200, []), ev('segment_free', 0x9000000, 2 * M, [])]
    del odd[5]['addr']
    write(os.path.join(out, 'odd_p2.pickle'),
          {'segments': [], 'device_traces': [odd, training(2, False)]}, proto=2)
    write(os.path.join(out, 'blocks_only.pickle'), [dict(seg, blocks=[
        {'address': 0x1000000, 'size': 8 * M, 'requested_size': 8 * M - 3,
         'state': 'active_allocated', 'frames': [MOD, USER]},
        {'address': 0x1800000, 'size': 12 * M, 'requested_size': 0, 'state': 'inactive',
         'frames': []}])])


if __name__ == '__main__':
    main()
