# SPDX-License-Identifier: MIT
"""gpumem watch --prometheus with a command measured by gpumem.torch, on the fake drivers and
the fake torch: two processes of the command (ranks 0 and 1, as torchrun gives them $RANK)
each write their series to their own file in watch's temporary folder, and the metrics carry
each rank's phases: gpumem_phase_peak_{allocated,reserved}_bytes, equal to the figures of the
latest pass of each phase in the series each process saved; under a process group (no $RANK)
the rank is the group's.  The folder is removed at the end, and without --prometheus the
command gets no GPUMEM_TORCH_OUTPUT."""
import glob
import json
import os
import sys
import unittest

from common import FAKE_TORCH, GPUMEM, HERE, SOURCE, TempDir, python_env, run

sys.path.insert(0, os.path.join(SOURCE, "tests", "device"))
from prom_check import parse  # noqa: E402

PHASES = os.path.join(HERE, "workloads", "phases_fake.py")


def latest_peaks(series):
    """{phase: (peak allocated, peak reserved)} of the latest pass of each phase."""
    out = {}
    for p in series["phases"]:
        out[p["name"]] = (p["allocated_bytes"]["peak"], p["reserved_bytes"]["peak"])
    return out


class WatchPhases(TempDir):
    def setUp(self):
        super().setUp()
        if not os.environ.get("GM_FAKE_DIR"):
            self.skipTest("no fake drivers in this build")
        self.env = python_env([FAKE_TORCH])
        self.env.update(GPUMEM_FAKE_MEMORY="16GiB", GPUMEM_FAKE_STATE=self.path("fake.state"),
                        TMPDIR=self.tmp)
        for k in ("GPUMEM_TORCH_OUTPUT", "RANK", "SLURM_PROCID", "SLURM_JOB_ID"):
            self.env.pop(k, None)

    def check_two_ranks(self, script):
        prom = self.path("metrics.prom")
        run(GPUMEM, "watch", "--prometheus", prom, "--interval", "50", "--no-chart", "--",
            "sh", "-c", script, env=self.env, cwd=self.tmp)
        with open(prom) as f:
            samples = parse(f.read())
        got = {}
        for name, labels, value in samples:
            if name.startswith("gpumem_phase_"):
                got[(name, labels["rank"], labels["phase"])] = value
        want = {}
        for rank in ("0", "1"):
            with open(self.path("r%s.json" % rank)) as f:
                for ph, (a, r) in latest_peaks(json.load(f)).items():
                    want[("gpumem_phase_peak_allocated_bytes", rank, ph)] = a
                    want[("gpumem_phase_peak_reserved_bytes", rank, ph)] = r
        self.assertEqual(got, want)
        # the two ranks differ (batch 2 and 5), and forward's latest pass is step 1's
        self.assertEqual(got[("gpumem_phase_peak_allocated_bytes", "1", "forward")],
                         (256 + 64 * 5 * 2) << 20)
        self.assertEqual(glob.glob(self.path("gpumem-watch-*")), [], "the series' folder is removed")

    def test_each_ranks_phases_are_exported_as_its_series_says(self):
        self.check_two_ranks("RANK=0 %s %s --batch 2 --copy %s & RANK=1 %s %s --batch 5 --copy %s; wait"
                             % (sys.executable, PHASES, self.path("r0.json"), sys.executable, PHASES,
                                self.path("r1.json")))

    def test_rank_of_the_process_group_names_the_file(self):
        store = self.path("store")
        self.check_two_ranks("%s %s --batch 2 --copy %s --store %s --rank 0 --world 2 & "
                             "%s %s --batch 5 --copy %s --store %s --rank 1 --world 2; wait"
                             % (sys.executable, PHASES, self.path("r0.json"), store, sys.executable,
                                PHASES, self.path("r1.json"), store))

    def test_processes_without_a_rank_never_share_a_file(self):
        # neither a process group nor $RANK/$SLURM_PROCID: each process's file is named by its
        # process id, so both run (a shared name would fail the second one's Measure())
        prom = self.path("metrics.prom")
        run(GPUMEM, "watch", "--prometheus", prom, "--interval", "50", "--no-chart", "--", "sh", "-c",
            "%s %s --batch 2 --copy %s & %s %s --batch 5 --copy %s; wait"
            % (sys.executable, PHASES, self.path("a.json"), sys.executable, PHASES, self.path("b.json")),
            env=self.env, cwd=self.tmp)
        with open(prom) as f:
            ranks = {labels["rank"] for name, labels, _ in parse(f.read()) if name.startswith("gpumem_phase_")}
        self.assertEqual(len(ranks), 2, ranks)
        self.assertTrue(all(r.startswith("pid") for r in ranks), ranks)
        for name in ("a.json", "b.json"):
            self.assertTrue(os.path.getsize(self.path(name)) > 0, name)

    def test_no_series_file_without_metrics(self):
        p = run(GPUMEM, "watch", "--interval", "50", "--no-chart", "--", "sh", "-c",
                'echo "output=${GPUMEM_TORCH_OUTPUT-unset}"', env=self.env, cwd=self.tmp)
        self.assertIn("output=unset", p.stdout)


if __name__ == "__main__":
    unittest.main()
