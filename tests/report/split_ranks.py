#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""split_ranks.py SNAPSHOT DEVICE OUT - the file rank DEVICE of a torchrun job would write
from a multi-device snapshot (synth-snapshot --devices N): the same list of device traces,
every one emptied but DEVICE's, and only DEVICE's segments.  Read with class lookup
disabled (plain data only), written with pickle protocol 4."""
import pickle
import sys


class Plain(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError('refusing %s.%s' % (module, name))


def main():
    src, dev, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    with open(src, 'rb') as f:
        snap = Plain(f).load()
    snap['segments'] = [s for s in snap['segments'] if s.get('device') == dev]
    snap['device_traces'] = [t if i == dev else [] for i, t in enumerate(snap['device_traces'])]
    with open(out, 'xb') as f:
        pickle.dump(snap, f, protocol=4)


if __name__ == '__main__':
    main()
