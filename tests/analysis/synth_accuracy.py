#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""synth_accuracy.py GPUMEM OUTDIR [--table]

Generates small synthetic snapshots with $GM_SYNTH (../shared/tools/synth-snapshot, set by
tests/needs.sh; several model shapes, frame modes and options, leaks included), runs `gpumem snapshot categories --json`
and `gpumem snapshot leaks --json` on each, and compares with the ground-truth JSON:

  * peak_bytes and peak_event_index equal;
  * every category at the peak within 5% of the truth (a category whose truth is below
    0.1% of the peak may be off by at most 0.1% of the peak: 5% of a few bytes is not a
    meaningful bound);
  * with --leak: exactly one leak per device with the truth's bytes_per_iteration and
    total_bytes, whose frames contain the truth's innermost Python frame; without: none.

Exit 0 when every check passes; prints one table row per file (--table: Markdown)."""
import json
import os
import subprocess
import sys

CATS = ('parameter', 'input', 'activation', 'gradient', 'optimizer_state', 'optimizer_temp',
        'other')

# name, synth options. Sizes are small so that the whole run takes a few seconds.
CASES = [
    ('small-step-peak', ['--layers', '2', '--hidden', '256', '--batch', '2', '--seq', '64',
                         '--vocab', '1000', '--iterations', '3']),
    ('large-batch', ['--layers', '2', '--hidden', '128', '--batch', '16', '--seq', '128',
                     '--vocab', '2000', '--iterations', '3']),
    ('stacks-all', ['--layers', '2', '--hidden', '128', '--batch', '8', '--seq', '64',
                    '--vocab', '1000', '--iterations', '3', '--stacks', 'all']),
    ('bwd-python-bf16', ['--layers', '3', '--hidden', '192', '--batch', '4', '--seq', '96',
                         '--vocab', '1500', '--iterations', '4', '--backward-frames', 'python',
                         '--dtype', 'bf16']),
    ('no-inputs-no-clip', ['--layers', '2', '--hidden', '128', '--batch', '8', '--seq', '64',
                           '--vocab', '1000', '--iterations', '3', '--no-inputs', '--no-clip']),
    ('leak-loss', ['--layers', '2', '--hidden', '128', '--batch', '4', '--seq', '64',
                   '--vocab', '1000', '--iterations', '6', '--leak']),
    ('leak-1MiB-all', ['--layers', '2', '--hidden', '128', '--batch', '4', '--seq', '64',
                       '--vocab', '1000', '--iterations', '6', '--leak', '--leak-size', '1MiB',
                       '--stacks', 'all']),
    ('empty-cache-2dev', ['--layers', '2', '--hidden', '128', '--batch', '8', '--seq', '64',
                          '--vocab', '1000', '--iterations', '4', '--empty-cache-every', '2',
                          '--devices', '2', '--protocol', '2']),
    ('deep-fp16-proto5', ['--layers', '6', '--hidden', '128', '--batch', '6', '--seq', '128',
                          '--vocab', '3000', '--iterations', '3', '--dtype', 'fp16',
                          '--protocol', '5']),
]


def run_json(cmd):
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout
    return json.loads(out)


def within(ours, truth, peak):
    diff = abs(ours - truth)
    if diff <= 0.05 * truth:
        return True
    return truth < 0.001 * peak and diff <= 0.001 * peak


def main():
    gpumem, outdir = sys.argv[1:3]
    synth = os.environ['GM_SYNTH']
    table = '--table' in sys.argv
    os.makedirs(outdir, exist_ok=True)
    failures = []
    rows = []
    for seed, (name, args) in enumerate(CASES, start=1):
        pk = os.path.join(outdir, name + '.pickle')
        tj = os.path.join(outdir, name + '.truth.json')
        for p in (pk, tj):
            if os.path.exists(p):
                os.remove(p)
        subprocess.run([sys.executable, synth, '--quiet', '--seed', str(seed), '--output', pk,
                        '--truth', tj] + args, check=True)
        truth = json.load(open(tj))
        cats = run_json([gpumem, 'snapshot', 'categories', '--json', pk])
        leaks = run_json([gpumem, 'snapshot', 'leaks', '--json', pk])
        for tdev in truth['devices']:
            d = tdev['device']
            cdev = next(x for x in cats['devices'] if x['device'] == d)
            ldev = next(x for x in leaks['devices'] if x['device'] == d)
            peak = tdev['peak_bytes']
            tag = '%s dev%d' % (name, d)
            if cdev['peak_bytes'] != peak or cdev['peak_event_index'] != tdev['peak_event_index']:
                failures.append('%s: peak %d@%d, truth %d@%d' % (
                    tag, cdev['peak_bytes'], cdev['peak_event_index'], peak,
                    tdev['peak_event_index']))
            errs = []
            for c in CATS:
                ours, want = cdev['at_peak'][c], tdev['at_peak'][c]
                errs.append(0.0 if ours == want else
                            (100.0 * (ours - want) / want if want else float('inf')))
                if not within(ours, want, peak):
                    failures.append('%s: %s %d, truth %d' % (tag, c, ours, want))
            tl = tdev['leaks']
            ol = ldev['leaks']
            leak_ok = True
            if tl:
                t = tl[0]
                match = [l for l in ol if l['bytes_per_iteration'] == t['bytes_per_iteration']
                         and l['total_bytes'] == t['total_bytes']]
                want_fr = [f for f in t['frames'] if f['filename'].endswith('.py')][:1]
                if len(ol) != 1 or not match:
                    leak_ok = False
                elif want_fr and not any(f['filename'] == want_fr[0]['filename'] and
                                         f['line'] == want_fr[0]['line'] and
                                         f['name'] == want_fr[0]['name']
                                         for f in match[0]['frames']):
                    leak_ok = False
                if not leak_ok:
                    failures.append('%s: leaks %s, truth %s' % (
                        tag, [(l['bytes_per_iteration'], l['total_bytes']) for l in ol],
                        (t['bytes_per_iteration'], t['total_bytes'])))
            elif ol:
                leak_ok = False
                failures.append('%s: %d leaks found, none in truth' % (tag, len(ol)))
            rows.append((tag, peak, cdev['peak_phase'], errs,
                         ('%d B/it' % tl[0]['bytes_per_iteration']) if tl else 'none',
                         'ok' if leak_ok else 'WRONG'))
    if table:
        print('| file | peak bytes | peak phase | ' + ' | '.join(CATS) + ' | leak (truth) | leak found |')
        print('|' + '---|' * (len(CATS) + 5))
        for tag, peak, ph, errs, tleak, lk in rows:
            print('| %s | %d | %s | %s | %s | %s |' % (
                tag, peak, ph, ' | '.join('%+.2f%%' % e if e != float('inf') else 'inf'
                                          for e in errs), tleak, lk))
    else:
        for tag, peak, ph, errs, tleak, lk in rows:
            print('%-22s peak %10d %-15s max category error %.3f%%  leak %s %s' % (
                tag, peak, ph, max(abs(e) for e in errs), tleak, lk))
    for f in failures:
        print('FAIL ' + f)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
