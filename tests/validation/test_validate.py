#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_validate.py GPUMEM - validate.py --check fails on what it must not let pass: a row
skipped for a reason EXPECTED_SKIPS does not declare (a feature gpumem has gained, or a new
gap), a declared skip that no longer happens, a row gpumem refuses, an unknown counter; and
passes on a small table of good rows.  Works in a temporary folder."""

import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
VALIDATE = os.path.join(HERE, "validate.py")
DATA = os.path.join(HERE, "..", "data", "validation")
GPUMEM = None
HEADER = "id,source_repo,source_path,commit,source_row,counter,measured_bytes,expect,needs,args\n"
# measured = what gpumem predicts for it (17119064064 B), so the table's median stays low
GOOD = ("r1,o/r,p,c,row 1,allocated,17000000000,value,,"
        "llama-2-7b --train --batch 1 --seq 512 --lora --gpu A100-80GB\n")


def run(files):
    """validate.py --check over a folder holding 'files' (name -> rows after the header),
    plus the real torchtitan table (whose two skips EXPECTED_SKIPS declares) unless 'files'
    gives one."""
    with tempfile.TemporaryDirectory() as d:
        for name, rows in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write("# a test table\n" + HEADER + rows)
        if "torchtitan_llama3_h100.csv" not in files:
            with open(os.path.join(DATA, "torchtitan_llama3_h100.csv")) as src, \
                    open(os.path.join(d, "torchtitan_llama3_h100.csv"), "w") as dst:
                dst.write(src.read())
        r = subprocess.run([sys.executable, VALIDATE, "--check", GPUMEM, d],
                           capture_output=True, text=True)
        return r.returncode, r.stdout


class Check(unittest.TestCase):
    def test_good_rows_pass(self):
        rc, out = run({"t.csv": GOOD})
        self.assertEqual(rc, 0, out)

    def test_undeclared_skip_fails(self):
        rc, out = run({"t.csv": GOOD + GOOD.replace("r1,", "r2,").replace(",value,,", ",value,x,")})
        self.assertEqual(rc, 1, out)
        self.assertIn("skipped as needing 'x', 0 expected", out)

    def test_declared_skip_that_runs_fails(self):
        # the torchtitan table without its skipped rows: the declared skips no longer happen
        with open(os.path.join(DATA, "torchtitan_llama3_h100.csv")) as f:
            kept = "".join(l for l in f if "Float8" not in l or l.startswith("#"))
        rc, out = run({"t.csv": GOOD, "torchtitan_llama3_h100.csv": kept.split(HEADER, 1)[1]})
        self.assertEqual(rc, 1, out)
        self.assertIn("0 rows skipped", out)

    def test_refused_row_and_unknown_counter_fail(self):
        rc, out = run({"t.csv": GOOD.replace("--lora", "--lora --lora-rank 0")})
        self.assertEqual(rc, 1, out)
        rc, out = run({"t.csv": GOOD.replace(",allocated,", ",peak,")})
        self.assertEqual(rc, 1, out)
        self.assertIn("unknown expect", out)


if __name__ == "__main__":
    GPUMEM = sys.argv.pop(1)
    unittest.main(verbosity=2)
