#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_validate.py GPUMEM - validate.py --check fails on what it must not let pass: a row
skipped for a reason EXPECTED_SKIPS does not declare (a feature gpumem has gained, or a new
gap), a declared skip that no longer happens, a row gpumem refuses, an unknown counter, a
llama.cpp buffer more than 64 MiB off, a "# fit:" line naming no row; and
passes on a small table of good rows, and on one whose bad row is a fit row (judged apart).  --gaps pairs the allocated and device rows of one run; --beyond-replay measures a
device row against the replay's own figure in fp32 copies of the logits; --stream-floor holds a
reserved row against the sum of the replay's per-stream live peaks; --implied-non-torch reads
the non-torch figure a vLLM run's printed KV memory implies.
Works in a temporary folder."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
VALIDATE = os.path.join(HERE, "validate.py")
DATA = os.path.join(HERE, "..", "data", "validation")
GPUMEM = None
HEADER = "id,source_repo,source_path,commit,source_row,counter,measured,expect,needs,args\n"
# measured = close to what gpumem predicts for it (within a few %), so the table's median stays low
GOOD = ("r1,o/r,p,c,row 1,allocated,17000000000,value,,"
        "llama-2-7b --train --batch 1 --seq 512 --lora --gpu A100-80GB\n")


def run(files, skips=None, mode="--check", comment=""):
    """validate.py 'mode' (--check, --gaps, --beyond-replay, --stream-floor, --by-setup,
    --implied-non-torch) over a folder holding 'files'
    (name -> rows after the header, each table's comment lines followed by 'comment'), with
    EXPECTED_SKIPS replaced by 'skips' when given."""
    with tempfile.TemporaryDirectory() as d:
        for name, rows in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write("# a test table\n" + comment + HEADER + rows)
        if skips is None:
            cmd = [sys.executable, VALIDATE, mode, GPUMEM, d]
        else:
            code = ("import sys; sys.path.insert(0, %r); import validate; "
                    "validate.EXPECTED_SKIPS = %r; sys.exit(validate.main(%r))"
                    % (HERE, skips, [mode, GPUMEM, d]))
            cmd = [sys.executable, "-c", code]
        r = subprocess.run(cmd, capture_output=True, text=True)
        return r.returncode, r.stdout


class Check(unittest.TestCase):
    def test_good_rows_pass(self):
        rc, out = run({"t.csv": GOOD})
        self.assertEqual(rc, 0, out)

    def test_p90_of_the_errors(self):
        # ten rows that gpumem's figure is 1%, 2%, ..., 10% above: the median is 5.5%, the
        # 90th percentile 9.1% (between the ninth and the tenth, interpolated)
        args = GOOD.split(",value,,")[1].strip()
        out = subprocess.run([GPUMEM, "estimate"] + args.split() + ["--json"],
                             capture_output=True, text=True, check=True).stdout
        pred = json.loads(out)["peak"]["allocated_bytes"]
        rows = "".join("r%d,o/r,p,c,row %d,allocated,%d,value,,%s" %
                       (i, i, round(pred / (1 + i / 100.0)), args + "\n")
                       for i in range(1, 11))
        rc, out = run({"t.csv": rows})
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r"t +allocated +10 +5\.[45]% +[0-9.]+% within 10% +p90 9\.[01]%")

    def test_undeclared_skip_fails(self):
        rc, out = run({"t.csv": GOOD + GOOD.replace("r1,", "r2,").replace(",value,,", ",value,x,")})
        self.assertEqual(rc, 1, out)
        self.assertIn("skipped as needing 'x', 0 expected", out)

    def test_declared_skip_that_runs_fails(self):
        # a skip declared for a table whose rows all run: the feature has been gained
        rc, out = run({"t.csv": GOOD}, skips={("t", "x"): 1})
        self.assertEqual(rc, 1, out)
        self.assertIn("0 rows skipped", out)

    def test_declared_skip_passes(self):
        rc, out = run({"t.csv": GOOD + GOOD.replace("r1,", "r2,").replace(",value,,", ",value,x,")},
                      skips={("t", "x"): 1})
        self.assertEqual(rc, 0, out)

    def test_gaps_pair_the_counters_of_one_run(self):
        # one run measured on both counters (and a device row of another run, unpaired):
        # the gap line is device minus allocated, measured from the table, predicted from
        # gpumem's own figures
        args = "llama-2-7b --train --batch 1 --seq 512 --lora --gpu A100-80GB"
        out = subprocess.run([GPUMEM, "estimate"] + args.split() + ["--json"],
                             capture_output=True, text=True, check=True).stdout
        peak = json.loads(out)["peak"]
        rows = ("r1-alloc,o/r,p,c,row 1,allocated,17000000000,value,,%s\n"
                "r1-device,o/r,p,c,row 1,device,19147483648,value,,%s\n"
                "r2-device,o/r,p,c,row 2,device,19000000000,value,,%s\n" % (args, args, args))
        rc, out = run({"t.csv": rows}, mode="--gaps")
        self.assertEqual(rc, 0, out)
        lines = [l for l in out.splitlines() if "gap measured" in l]
        self.assertEqual(len(lines), 1, out)
        pred = (peak["device_bytes"] - peak["allocated_bytes"]) / float(1 << 30)
        self.assertIn("  r1 ", lines[0])
        self.assertIn("gap measured   2.00 predicted %6.2f GiB (%+.2f)" % (pred, pred - 2.0),
                      lines[0])
        self.assertIn("gap: 1 runs, median |error| %.2f GiB" % abs(pred - 2.0), out)

    def test_beyond_replay_in_logits_copies(self):
        # a device row measured exactly one fp32 copy of the logits above the replay's own
        # device figure (its reserved peak plus the same overheads), and an allocated row that
        # --beyond-replay leaves out
        args = "llama-2-7b --train --batch 1 --seq 512 --lora --gpu A100-80GB"
        doc = json.loads(subprocess.run([GPUMEM, "estimate"] + args.split() + ["--json"],
                                        capture_output=True, text=True, check=True).stdout)
        peak, replay = doc["peak"], doc["replay"]
        copy = 4 * 1 * 512 * doc["model"]["vocab_size"]
        replayed = peak["device_bytes"] - peak["reserved_bytes"] + replay["reserved_peak_bytes"]
        rows = ("r1-alloc,o/r,p,c,row 1,allocated,17000000000,value,,%s\n"
                "r1-device,o/r,p,c,row 1,device,%d,value,,%s\n" % (args, replayed + copy, args))
        rc, out = run({"t.csv": rows}, mode="--beyond-replay")
        self.assertEqual(rc, 0, out)
        lines = [l for l in out.splitlines() if "device beyond the replay" in l]
        self.assertEqual(len(lines), 1, out)
        self.assertIn("  r1-device ", lines[0])
        self.assertIn("%+7.2f GiB = +1.00 fp32 logits copies (loss %s, 1 GPU)" %
                      (copy / float(1 << 30), doc["inputs"]["loss"]), lines[0])
        self.assertIn("%-26s beyond replay      1  loss %s, 1 GPU: median +1.00 fp32 logits "
                      "copies (+1.00 to +1.00)" % ("t", doc["inputs"]["loss"]), out)

    def test_stream_floor_of_reserved_rows(self):
        # two reserved rows of one FSDP2 run with expandable segments, measured 1 GiB below
        # and 2 GiB above the sum of the replay's per-stream live peaks, and an allocated row
        # that --stream-floor leaves out
        args = ("llama-3.1-8b --train --precision bf16-mixed --fsdp --fsdp-version 2 "
                "--grad-checkpointing op --batch 1 --seq 8192 --gpus 8 --gpu H100 "
                "--alloc-conf expandable_segments:True")
        doc = json.loads(subprocess.run([GPUMEM, "estimate"] + args.split() + ["--json"],
                                        capture_output=True, text=True, check=True).stdout)
        replay = doc["replay"]
        floor = sum(replay["live_peak_by_stream_bytes"].values())
        above = (replay["reserved_peak_bytes"] - floor) / float(1 << 30)
        rows = ("r1-alloc,o/r,p,c,row 1,allocated,40000000000,value,,%s\n"
                "r1-low,o/r,p,c,row 1,reserved,%d,value,,%s\n"
                "r2-high,o/r,p,c,row 2,reserved,%d,value,,%s\n" %
                (args, floor - (1 << 30), args, floor + (2 << 30), args))
        rc, out = run({"t.csv": rows}, mode="--stream-floor")
        self.assertEqual(rc, 0, out)
        lines = [l for l in out.splitlines() if "stream floor" in l and l.startswith("  ")]
        self.assertEqual(len(lines), 2, out)
        self.assertIn("  r1-low ", lines[0])
        self.assertIn("stream floor %7.2f GiB: replay above it %+6.2f, measured  -1.00 "
                      "(expandable segments)" % (floor / float(1 << 30), above), lines[0])
        self.assertIn("measured  +2.00 (expandable segments)", lines[1])
        self.assertIn("%-26s stream floor      2  expandable segments: replay above it median "
                      "%+.2f GiB, measured median +0.50 GiB, below the floor in 1" % ("t", above),
                      out)

    def test_by_setup_sets_the_estimate_beside_the_replay_alone(self):
        # two device rows of one full fine-tuning setup, measured 5% and 25% below the
        # estimate, a LoRA row of another setup, and an allocated row --by-setup leaves out;
        # the replay alone is judged on the same rows with its own device figure
        full = "llama-3.2-1b --train --batch 1 --seq 512 --gpu A100-80GB"
        lora = full + " --lora"
        docs = {a: json.loads(subprocess.run([GPUMEM, "estimate"] + a.split() + ["--json"],
                                             capture_output=True, text=True,
                                             check=True).stdout) for a in (full, lora)}
        dev = docs[full]["peak"]["device_bytes"]
        rows = ("r1-alloc,o/r,p,c,row 1,allocated,17000000000,value,,%s\n"
                "r1-device,o/r,p,c,row 1,device,%d,value,,%s\n"
                "r2-device,o/r,p,c,row 2,device,%d,value,,%s\n"
                "r3-device,o/r,p,c,row 3,device,%d,value,,%s\n" %
                (full, round(dev / 1.05), full, round(dev / 1.25), full,
                 docs[lora]["peak"]["device_bytes"], lora))
        rc, out = run({"t.csv": rows}, mode="--by-setup")
        self.assertEqual(rc, 0, out)
        lines = [l for l in out.splitlines() if " by setup " in l]
        self.assertEqual(len(lines), 2, out)
        doc, peak = docs[full], docs[full]["peak"]
        replayed = (peak["device_bytes"] - peak["reserved_bytes"] +
                    doc["replay"]["reserved_peak_bytes"])
        alone = sorted([replayed / round(dev / 1.05) - 1, replayed / round(dev / 1.25) - 1])
        self.assertIn("%-26s by setup     2  full, loss %s, 1 GPU: median |error| 15.0%%, 50%% "
                      "within 10%%, median +15.0%%; replay alone median %+.1f%%; floor decides %d"
                      % ("t", doc["inputs"]["loss"], 100 * sum(alone) / 2,
                         2 * doc["replay"]["floor_decides"]), lines[0])
        self.assertIn("by setup     1  lora, loss %s, 1 GPU: median |error| 0.0%%, 100%% within "
                      "10%%, median +0.0%%" % docs[lora]["inputs"]["loss"], lines[1])

    def test_beyond_replay_copy_follows_tokens_target_and_vocab_shard(self):
        # the fp32 copy is the estimate's own loss tokens x vocabulary of one GPU: packed
        # tokens (not batch x seq), an encoder-decoder's target tokens, the vocabulary shard
        # of tensor parallelism; each device row is measured one such copy above the replay
        cases = [
            ("llama-2-7b --train --seq 512 --tokens-per-batch 1024 --lora "
             "--gpu A100-80GB", 1024, 32000),
            ("t5-large --train --batch 2 --seq 512 --target-seq 128 --gpu A100-80GB",
             256, 32128),
            ("llama-3-8b --train --batch 1 --seq 2048 --lora --tp 2 --gpus 2 --gpu H100",
             2048, 64128),
        ]
        rows = ""
        for i, (args, tokens, vocab) in enumerate(cases):
            doc = json.loads(subprocess.run([GPUMEM, "estimate"] + args.split() + ["--json"],
                                            capture_output=True, text=True, check=True).stdout)
            self.assertEqual((doc["phases"]["loss_tokens"], doc["phases"]["loss_vocab"]),
                             (tokens, vocab), args)
            self.assertIsNotNone(doc["replay"], args)
            peak, replay = doc["peak"], doc["replay"]
            replayed = (peak["device_bytes"] - peak["reserved_bytes"] +
                        replay["reserved_peak_bytes"])
            rows += "r%d,o/r,p,c,row %d,device,%d,value,,%s\n" % (
                i, i, replayed + 4 * tokens * vocab, args)
        rc, out = run({"t.csv": rows}, mode="--beyond-replay")
        self.assertEqual(rc, 0, out)
        lines = [l for l in out.splitlines() if "device beyond the replay" in l]
        self.assertEqual(len(lines), len(cases), out)
        for line in lines:
            self.assertIn("= +1.00 fp32 logits copies", line)

    def test_fit_rows_judge_nothing(self):
        # a good row and one measured at half of gpumem's figure (+100%): the median of the
        # two is far above 10%, so --check fails; named on a "# fit:" line, the second row is
        # the row a constant was set from: summarised apart, the judged median is the good
        # row's and --check passes; a fit line naming no row of the table fails
        args = GOOD.split(",value,,")[1].strip()
        out = subprocess.run([GPUMEM, "estimate"] + args.split() + ["--json"],
                             capture_output=True, text=True, check=True).stdout
        pred = json.loads(out)["peak"]["allocated_bytes"]
        rows = GOOD + "r2,o/r,p,c,row 2,allocated,%d,value,,%s\n" % (pred // 2, args)
        rc, out = run({"t.csv": rows})
        self.assertEqual(rc, 1, out)
        rc, out = run({"t.csv": rows}, comment="# fit: r2 -- a constant set from it\n")
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r"t +allocated +1 +[0-9.]+% .*\(judged: 1 fit row left out\)")
        rc, out = run({"t.csv": rows}, comment="# fit: r9 -- no such row\n")
        self.assertEqual(rc, 1, out)
        self.assertIn("fit row 'r9' is no row of the table", out)

    def test_refused_row_and_unknown_counter_fail(self):
        rc, out = run({"t.csv": GOOD.replace("--lora", "--lora --lora-rank 0")})
        self.assertEqual(rc, 1, out)
        rc, out = run({"t.csv": GOOD.replace(",allocated,", ",peak,")})
        self.assertEqual(rc, 1, out)
        self.assertIn("unknown expect", out)

    def test_engine_counters_read_the_serving_figures(self):
        # a vLLM start-up row per counter, each measured at gpumem's own figure but the
        # KV blocks, measured 5% below it: the blocks line shows 5%, the others 0, and the
        # byte counters their difference in MiB; an engine row whose estimate has no such
        # figure (a training job has no KV pool) fails
        args = "llama-3-8b --infer --engine vllm --gpu H100 --vllm-version 0.11"
        out = subprocess.run([GPUMEM, "estimate"] + args.split() + ["--json"],
                             capture_output=True, text=True, check=True).stdout
        sv = json.loads(out)["serving"]
        blocks = round(sv["kv_blocks"] / 1.05)
        # the concurrency as vLLM prints it, to two decimals, 10% above gpumem's figure
        conc = "%.2f" % (sv["max_concurrency"] * 1.1)
        rows = GOOD + ("e1,o/r,p,c,row 1,kv_cache,%d,value,,%s\n"
                       "e2,o/r,p,c,row 1,kv_blocks,%d,value,,%s\n"
                       "e3,o/r,p,c,row 1,kv_tokens,%d,value,,%s\n"
                       "e5,o/r,p,c,row 1,max_concurrency,%s,value,,%s\n" %
                       (sv["kv_pool_bytes"], args, blocks, args, sv["kv_tokens"], args, conc,
                        args))
        rc, out = run({"t.csv": rows})
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r"t +kv_blocks +1 +5\.0%")
        self.assertRegex(out, r"t +kv_cache +1 +0\.0% +100\.0% within 10% +0 MiB +100\.0% "
                              r"within 64 MiB")
        self.assertRegex(out, r"t +kv_tokens +1 +0\.0%")
        self.assertRegex(out, r"t +max_concurrency +1 +9\.[0-9]%")
        rc, out = run({"t.csv": GOOD + "e4,o/r,p,c,row 2,kv_blocks,100,value,,%s\n" %
                       GOOD.split(",value,,")[1].strip()})
        self.assertEqual(rc, 1, out)
        self.assertIn("e4: no figure for 'kv_blocks'", out)

    def test_implied_non_torch_from_the_printed_kv_memory(self):
        # one vLLM run printing its KV memory 50 MiB below gpumem's pool and its weights 10 MiB
        # above gpumem's: the KV memory implies 50 - 10 = 40 MiB more non-torch memory than
        # gpumem charges; a run given its pool (--kv-cache-memory-bytes) implies nothing
        args = "llama-3-8b --infer --engine vllm --gpu H100 --vllm-version 0.11"
        out = subprocess.run([GPUMEM, "estimate"] + args.split() + ["--json"],
                             capture_output=True, text=True, check=True).stdout
        doc = json.loads(out)
        sv = doc["serving"]
        w = [c["bytes"] for c in doc["components"] if c["kind"] == "weights"][0]
        given = args + " --kv-cache-memory-bytes 1000000000"
        mib = 1 << 20
        rows = GOOD + ("n1-kv-cache,o/r,p,c,row 1,kv_cache,%d,value,,%s\n"
                       "n1-weights,o/r,p,c,row 1,weights,%d,value,,%s\n"
                       "n1-non-torch,o/r,p,c,row 1,non_torch,%d,value,,%s\n"
                       "n2-kv-cache,o/r,p,c,row 2,kv_cache,1000000000,value,,%s\n" %
                       (sv["kv_pool_bytes"] - 50 * mib, args, w + 10 * mib, args,
                        sv["non_torch_logged_bytes"], args, given))
        rc, out = run({"t.csv": rows}, mode="--implied-non-torch")
        self.assertEqual(rc, 0, out)
        lines = [l for l in out.splitlines() if "non-torch charged" in l]
        self.assertEqual(len(lines), 1, out)
        pred = sv["non_torch_logged_bytes"] / float(mib)
        self.assertIn("  n1 ", lines[0])
        self.assertIn("V1 0.11+    tp 1", lines[0])
        self.assertIn("non-torch charged %7.0f implied %7.0f MiB (   +40)  printed %.0f" %
                      (pred, pred + 40, pred), lines[0])
        self.assertRegex(out, r"t +implied non-torch V1 0\.11\+ +tp 1 +1 runs, median implied - "
                              r"charged +\+40 MiB, charged too much in 0")

    def test_llamacpp_buffer_beyond_64_mib_fails(self):
        # a llama.cpp compute buffer measured at gpumem's figure passes; beside two exact ones
        # (the engine rows' median stays 0) one measured 63 MiB below it passes, one 65 MiB above
        # fails --check
        args = "llama-3-8b --infer --engine llama.cpp --context 512 --kv-dtype fp16"
        out = subprocess.run([GPUMEM, "estimate"] + args.split() + ["--json"],
                             capture_output=True, text=True, check=True).stdout
        pred = json.loads(out)["serving"]["compute_buffer_bytes"]
        row = "l1,o/r,p,c,row 1,compute_buffer,%d,value,,%s\n"
        good = GOOD + "".join("l%d,o/r,p,c,row %d,compute_buffer,%d,value,,%s\n" %
                              (i, i, pred, args) for i in (2, 3))
        rc, out = run({"t.csv": good + row % (pred, args)})
        self.assertEqual(rc, 0, out)
        rc, out = run({"t.csv": good + row % (pred - 63 * (1 << 20), args)})
        self.assertEqual(rc, 0, out)
        rc, out = run({"t.csv": good + row % (pred + 65 * (1 << 20), args)})
        self.assertEqual(rc, 1, out)
        self.assertIn("l1: llama.cpp compute_buffer -65.00 MiB off (the goal: within 64 MiB)", out)


if __name__ == "__main__":
    GPUMEM = sys.argv.pop(1)
    unittest.main(verbosity=2)
