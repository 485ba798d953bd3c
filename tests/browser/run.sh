#!/bin/sh
# SPDX-License-Identifier: MIT
# run.sh GPUMEM LAYOUT_HELPER SOURCE_DIR WORK_DIR [--third-party-data] [report.test.js options...]
# The browser test's inputs, made at test time into WORK_DIR (never committed), then
# report.test.js on them.  By default gpumem's own files: the example job, two rank files of it
# (rank 0 on cuda:0 with batch 8, rank 1 on cuda:1 with batch 12, as torchrun's ranks write
# them: `gpumem snapshot example --device 1`), the example marked with gpumem.torch user
# phases (--phases), the example of 1000 iterations (--bands: the timeline's bands over a long
# trace), 16 ranks of one job as snapshots and digests mixed, then as digests only
# (--many-ranks), and the corpus files.  With --third-party-data (run through
# tests/needs.sh, which sets GM_TESTDATA and GM_SYNTH): the real files and a 100 MB synthetic
# snapshot (../shared/tools/synth-snapshot --target-size 100M --seed 1); the timeline's bands
# of the 2.1-era file, of the one with 12.55 GiB of weights alive before its trace, and of one
# that loads its weights during the trace.  Exit 77 (skipped)
# as the test.
set -eu
gpumem=$1 layout=$2 src=$3 work=$4
shift 4
mkdir -p "$work"
cd "$work"
corpus=$src/tests/fuzz/corpus/report
if [ "${1:-}" = --third-party-data ]; then
    shift
    [ -f s100.pickle ] || "$GM_SYNTH" --target-size 100M --seed 1 --quiet -o s100.pickle
    snaps=$GM_TESTDATA/snapshots
    exec node "$src/tests/browser/report.test.js" --gpumem "$gpumem" --layout "$layout" \
        --snapshot "$snaps/g6_compile_ctx_3dev_expandable_oom.pickle" \
        --snapshot "$snaps/g2_cpp_frames_no_time.pickle" \
        --snapshot s100.pickle \
        --quick "$snaps/g0_list_segments_only_dev1.pkl" \
        --quick "$snaps/g5_empty_no_segments_4dev.pickle" \
        --bands "$snaps/g2_cpp_frames_no_time.pickle" \
        --bands "$snaps/g4_allocator_settings_pyframes.pickle" \
        --bands "$snaps/g7_record_stream_reuse_pyframes.pickle" "$@"
fi
"$gpumem" snapshot example --force -o rank0.pickle >/dev/null
"$gpumem" snapshot example --force --device 1 --batch 12 -o rank1.pickle >/dev/null
"$gpumem" snapshot example --force -o example.pickle >/dev/null
"$gpumem" snapshot example --force --iterations 40 -o example40.pickle >/dev/null
"$gpumem" snapshot example --force --phases -o phases.pickle >/dev/null
"$gpumem" snapshot example --force --iterations 1000 -o example1000.pickle >/dev/null
# 16 ranks of one job, one of them (rank 11) with three times the batch; odd ranks as digests
mkdir -p many
for r in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
    batch=8
    [ "$r" = 11 ] && batch=24
    "$gpumem" snapshot example --force --iterations 2 --batch $batch -o many/rank$r.pickle >/dev/null
    if [ $((r % 2)) = 1 ]; then
        "$gpumem" snapshot digest --force many/rank$r.pickle -o many/rank$r.digest --host node$((r / 8))
        rm many/rank$r.pickle
    fi
done
# the same job from its digests only: a page without the views of a device
mkdir -p many-digests
for r in 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do
    if [ -f many/rank$r.pickle ]; then
        "$gpumem" snapshot digest --force many/rank$r.pickle -o many-digests/rank$r.digest
    else
        cp many/rank$r.digest many-digests/
    fi
done
exec node "$src/tests/browser/report.test.js" --gpumem "$gpumem" --layout "$layout" \
    --snapshot example.pickle \
    --quick example40.pickle \
    --bands example1000.pickle \
    --quick "$corpus/oom_two_devices.pickle" \
    --quick "$corpus/no_time_orphans.pickle" \
    --quick "$corpus/expandable.pickle" \
    --ranks rank0.pickle,rank1.pickle \
    --many-ranks many --many-ranks many-digests \
    --phases phases.pickle \
    --account "$src/docs/examples/account/fake-job.account.jsonl" \
    --also-no-analysis "$@"
