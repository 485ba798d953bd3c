#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""check_example.py FILE - the example snapshot is what PyTorch would write.

Loads it with Python's pickle (no class can be named in it: find_class is refused), and checks
that pickling the loaded object again gives the very same bytes (the writer shares objects and
frames the pickle exactly as CPython does), that it has the 2.9 layout, and that the trace
and the segments agree: replaying alloc/free_completed leaves exactly the active blocks, every
segment_alloc has its segment, blocks tile their segments, time never goes backwards, and the
training story is there (AdamW state, zero_grad, autograd frames, the leak)."""
import io
import pickle
import sys


class NoClasses(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError('class lookup %s.%s' % (module, name))


def fail(msg):
    print('FAIL: ' + msg)
    sys.exit(1)


def main():
    raw = open(sys.argv[1], 'rb').read()
    d = NoClasses(io.BytesIO(raw)).load()
    if pickle.dumps(d, protocol=raw[1]) != raw:
        fail('pickle.dumps(pickle.loads(file)) differs from the file')
    if list(d) != ['segments', 'device_traces', 'allocator_settings', 'external_annotations']:
        fail('top-level keys %r' % list(d))
    if 'graph_capture_record_stream_reuse' not in d['allocator_settings']:
        fail('not the 2.9 allocator_settings')
    trace = d['device_traces'][0]
    live, segs, last_t = {}, set(), 0
    for e in trace:
        if list(e) != ['action', 'addr', 'size', 'stream', 'time_us', 'compile_context', 'frames']:
            fail('trace entry keys %r' % list(e))
        if e['time_us'] < last_t:
            fail('time goes backwards')
        last_t = e['time_us']
        a = e['action']
        if a == 'segment_alloc':
            segs.add((e['addr'], e['size']))
        elif a == 'alloc':
            if e['addr'] in live:
                fail('alloc at a live address')
            live[e['addr']] = e['size']
        elif a == 'free_completed':
            if live.pop(e['addr'], None) != e['size']:
                fail('free of an unknown allocation')
    active = {}
    for s in d['segments']:
        if (s['address'], s['total_size']) not in segs:
            fail('segment without segment_alloc')
        pos, alloc, req = s['address'], 0, 0
        for b in s['blocks']:
            if b['address'] != pos:
                fail('blocks do not tile their segment')
            pos += b['size']
            if b['size'] % 512:
                fail('block size not a multiple of 512')
            if b['state'] == 'active_allocated':
                active[b['address']] = b['requested_size']
                alloc += b['size']
                req += b['requested_size']
        if pos != s['address'] + s['total_size'] or alloc != s['allocated_size'] or \
                req != s['requested_size']:
            fail('segment totals')
    if active != live:
        fail('live allocations after the trace (%d) != active blocks (%d)' % (len(live), len(active)))
    frames = {f['filename'].split('site-packages/')[-1] + ':' + f['name']
              for e in trace for f in e['frames']}
    for want in ['torch/optim/adamw.py:_init_group', 'torch/optim/adamw.py:_multi_tensor_adamw',
                 'torch/optim/optimizer.py:zero_grad', 'torch/autograd/graph.py:_engine_run_backward',
                 'torch/nn/modules/module.py:_call_impl', '/home/user/gpt/train.py:evaluate']:
        if want not in frames:
            fail('no frame ' + want)
    print('ok: %d bytes, %d segments, %d events, %d allocations alive at the end'
          % (len(raw), len(d['segments']), len(trace), len(live)))


main()
