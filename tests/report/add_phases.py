#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""add_phases.py SNAPSHOT OUT - the snapshot as gpumem.torch.record() would mark it: every
iteration's span cut into the user's phases "gpumem.phase:train_step" (from each iteration's
first event to just before the next) and, inside the third one, "gpumem.phase:backward_pass"
around its largest allocation, as external_annotations START/END pairs on device 0.  Prints
the phase that holds the trace's peak.  Read with class lookup disabled."""
import pickle
import sys


class Plain(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError('refusing %s.%s' % (module, name))


def main():
    src, out = sys.argv[1], sys.argv[2]
    with open(src, 'rb') as f:
        snap = Plain(f).load()
    trace = snap['device_traces'][0]
    times = [e['time_us'] for e in trace]
    # the peak, as memory_viz counts it (alloc to free_completed)
    live, total, peak, peak_t = {}, 0, -1, None
    for e in trace:
        if e['action'] == 'alloc':
            live[e['addr']] = e['size']
            total += e['size']
        elif e['action'] == 'free_completed' and e['addr'] in live:
            total -= live.pop(e['addr'])
        if total > peak:
            peak, peak_t = total, e['time_us']
    t0, t1 = times[0], times[-1]
    n = 5
    ann, holding = [], None
    for i in range(n):
        a = t0 + (t1 - t0) * i // n
        b = t0 + (t1 - t0) * (i + 1) // n - 1
        ann.append({'name': 'gpumem.phase:train_step', 'stage': 'START', 'device': 0, 'time_us': a})
        if i == 2:
            ann.append({'name': 'gpumem.phase:backward_pass', 'stage': 'START', 'device': 0, 'time_us': a + (b - a) // 3})
            ann.append({'name': 'gpumem.phase:backward_pass', 'stage': 'END', 'device': 0, 'time_us': a + 2 * (b - a) // 3})
            if a + (b - a) // 3 <= peak_t <= a + 2 * (b - a) // 3:
                holding = 'backward_pass'
        ann.append({'name': 'gpumem.phase:train_step', 'stage': 'END', 'device': 0, 'time_us': b})
        if holding is None and a <= peak_t <= b:
            holding = 'train_step'
    snap['external_annotations'] = ann
    with open(out, 'xb') as f:
        pickle.dump(snap, f, protocol=4)
    print(holding)


if __name__ == '__main__':
    main()
