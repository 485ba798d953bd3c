#!/bin/sh
# SPDX-License-Identifier: MIT
# ranks.sh GPUMEM [RANKS] - a job of RANKS ranks (default 1024), read by the job's commands
# from one digest a rank against one snapshot a rank (make bench).
#
# SEEDS (default 64) synthetic rank snapshots (../shared/tools/synth-snapshot, one seed
# each; rank 137 with four times the batch) are digested with `gpumem snapshot digest`, then
# copied to RANKS rank names (rankR.digest, rankR_memory_snapshot.pickle: a rank's number is
# its file name's).  Then `snapshot stats` and `snapshot report` over the folder of digests
# and over the folder of snapshots, each timed with its peak RSS (/usr/bin/time), and the
# ratios.  Goal: the report over 1,024 digests in under 5 s and 1 GiB.
# Numbers depend on the machine: run it where you want to know them.
set -u
GPUMEM=$1
RANKS=${2:-1024}
SEEDS=${RANKS_BENCH_SEEDS:-64}
SKEWED=137
SYNTH=${GM_SYNTH:-$(dirname "$0")/../../shared/tools/synth-snapshot}
[ -x "$SYNTH" ] || { echo "ranks.sh: $SYNTH is missing: skipped"; exit 0; }
[ -x /usr/bin/time ] || { echo "ranks.sh: /usr/bin/time is missing: skipped"; exit 0; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/seeds" "$work/digests" "$work/snapshots"

s=0
while [ $s -lt $SEEDS ]; do
    "$SYNTH" -o "$work/seeds/s$s.pickle" --layers 2 --hidden 128 --seq 64 --vocab 1000 \
        --iterations 2 --batch 2 --seed $((s + 1)) --quiet &
    s=$((s + 1))
    [ $((s % 2)) = 0 ] && wait
done
"$SYNTH" -o "$work/seeds/skewed.pickle" --layers 2 --hidden 128 --seq 64 --vocab 1000 \
    --iterations 2 --batch 8 --seed 999 --quiet
wait
for f in "$work"/seeds/*.pickle; do
    "$GPUMEM" snapshot digest "$f" -o "${f%.pickle}.digest" --host bench || exit 1
done
r=0
while [ $r -lt "$RANKS" ]; do
    src=$work/seeds/s$((r % SEEDS))
    [ $r = $SKEWED ] && src=$work/seeds/skewed
    cp "$src.digest" "$work/digests/rank$r.digest"
    cp "$src.pickle" "$work/snapshots/rank${r}_memory_snapshot.pickle"
    r=$((r + 1))
done

measure() { # LABEL COMMAND...: prints "LABEL seconds maxrss_kib"
    label=$1
    shift
    /usr/bin/time -f "%e %M" -o "$work/time" "$@" >/dev/null 2>"$work/err" ||
        { cat "$work/err"; exit 1; }
    echo "$label $(cat "$work/time")"
}

echo "a job of $RANKS ranks ($SEEDS seeds, rank $SKEWED skewed): digests $(du -sk "$work/digests" | cut -f1) KiB, snapshots $(du -sk "$work/snapshots" | cut -f1) KiB"
{
    measure "stats-digests" "$GPUMEM" snapshot stats "$work/digests"
    measure "stats-snapshots" "$GPUMEM" snapshot stats "$work/snapshots"
    measure "report-digests" "$GPUMEM" snapshot report "$work/digests" -o "$work/d.html"
    measure "report-snapshots" "$GPUMEM" snapshot report "$work/snapshots" -o "$work/s.html"
} >"$work/results" || exit 1
awk -v ranks="$RANKS" '
    { t[$1] = $2; m[$1] = $3 }
    END {
        printf "  %-10s %22s %22s %8s\n", "command", "digests", "snapshots", "ratio"
        split("stats report", cmds, " ")
        for (i = 1; i <= 2; i++) {
            c = cmds[i]; d = c "-digests"; s = c "-snapshots"
            printf "  %-10s %8.2f s %8.1f MiB %8.2f s %8.1f MiB %7.1fx\n", c, t[d], m[d] / 1024,
                t[s], m[s] / 1024, (t[d] > 0 ? t[s] / t[d] : 0)
        }
        ok = t["report-digests"] < 5 && m["report-digests"] < 1024 * 1024
        printf "  goal: the report over %d digests in under 5 s and 1 GiB: %s\n", ranks, ok ? "met" : "NOT MET"
        exit ok ? 0 : 1
    }' "$work/results"
