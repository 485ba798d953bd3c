# SPDX-License-Identifier: MIT
"""gpumem calibrate (and gpumem.calibrate) on snapshots whose truth is known.

synth-snapshot (../shared/tools) simulates a GPT training job through a model of the CUDA
caching allocator and writes, with --truth, the ground truth of its peak: the allocated peak
in requested bytes (`peak_bytes`, what the estimate predicts) and the peak reserved.  Its job:
a nanoGPT-style GPT (learned positions, LayerNorm and biases, fused qkv, GELU 4h MLP, an
untied head, eager attention with the scores kept for backward, a causal-mask buffer per
layer), everything in fp32, AdamW (foreach) with gradient clipping, zero_grad(set_to_none).
To `gpumem estimate` that is a GPT-2 config of the same shape (a fixture written here) with
--precision fp32 --attention eager.

The test calibrates on one size (batch 4 x 256 tokens) and predicts the others, along each
dimension (batch 1..16, seq 128..1024), then holds every prediction against that size's
truth.  synth-snapshot builds its model for the sequence it runs (nanoGPT's block_size =
--seq): the position table has seq rows and each layer's causal-mask buffer seq x seq fp32
entries, so at seq 1024 the model itself holds 18 MB more parameter-sized memory than at 256
(parameters, buffers and Adam moments; 1.5% of that peak).  Nothing in the job calibrate is
given (a GPT-2 config of 1024 positions, another --seq) or in a snapshot at seq 256 says so:
the seq predictions are held against the truth less that growth of the model, which the
truth gives (at_peak parameter + optimizer_state, against the calibration size's).

The bounds: the calibrated peak allocated within 1% of the truth at every size (the fit is
within 0.3%; one that scales the s x s attention scores with the per-token tensors is 1.4%
off at seq 1024), and at most half the error of the estimate alone (which is 3.5 to 7% off
here: it keeps activations the script frees and misses what the script keeps); the
calibrated peak reserved within 10% (the caching allocator's segments make the reserved
excess jump from size to size).  A fit that got the fixed part, the per-token part or the
scores wrong, or the optimizer step's own peak at batch 1, breaks the first bound.

Also: the measured side is what `gpumem snapshot categories` says; gpumem.calibrate() returns
what the command prints, from a path and from a gpumem.Snapshot; errors are typed."""
import json
import os
import unittest

from common import GPUMEM, SYNTH, TempDir, example_snapshot, gpumem_json, needs, run

import gpumem

LAYERS, HIDDEN, VOCAB = 4, 256, 8192
BASE = {"batch": 4, "seq": 256}
SIZES = [("batch", b) for b in (1, 2, 8, 16)] + [("seq", s) for s in (128, 512, 1024)]
# The synthetic job (synth-snapshot) allocates no cuBLAS workspace through the caching
# allocator, as PyTorch did before 1.13 (PR #83461): the estimate is told that torch, so that
# both sides hold the same tensors.  With 1.13 or later the estimate's two workspaces (16.25
# MiB, about 8 % of this small job's batch-1 peak) are memory the snapshot lacks, and the
# calibrated predictions miss the truth by 3 to 5 % (docs/calibrate.md).
SETTINGS = {"precision": "fp32", "attention": "eager", "torch-version": "1.12"}
ALLOCATED_BOUND = 0.01
RESERVED_BOUND = 0.10


def model_bytes(truth):
    """Parameter-sized memory of the truth's model at its peak: parameters, buffers, moments."""
    return truth["at_peak"]["parameter"] + truth["at_peak"]["optimizer_state"]


def gpt2_config(path):
    with open(path, "w") as f:
        json.dump({"model_type": "gpt2", "n_embd": HIDDEN, "n_layer": LAYERS, "n_head": HIDDEN // 64,
                   "n_positions": 1024, "vocab_size": VOCAB, "tie_word_embeddings": False,
                   "torch_dtype": "float32"}, f)
    return path


@needs("shared-tools")
class SynthTruth(unittest.TestCase):
    """Snapshots of the synthetic job at several sizes, made once."""

    @classmethod
    def setUpClass(cls):
        import tempfile
        cls.tmp = tempfile.mkdtemp(prefix="gpumem-calibrate-")
        cls.config = gpt2_config(os.path.join(cls.tmp, "gpt.json"))
        cls.truth, cls.truth_model = {}, {}
        for dim, value in [("batch", BASE["batch"])] + SIZES:
            size = dict(BASE, **{dim: value})
            name = "b%d_s%d" % (size["batch"], size["seq"])
            pickle = os.path.join(cls.tmp, name + ".pickle")
            truth = os.path.join(cls.tmp, name + ".json")
            run(SYNTH, "--layers", str(LAYERS), "--hidden", str(HIDDEN), "--vocab", str(VOCAB),
                "--batch", str(size["batch"]), "--seq", str(size["seq"]), "--iterations", "3",
                "--output", pickle, "--truth", truth, "--quiet")
            with open(truth) as f:
                doc = json.load(f)
            cls.truth[(size["batch"], size["seq"])] = (pickle, doc["devices"][0])
            cls.truth_model[(size["batch"], size["seq"])] = doc["model"]

    @classmethod
    def tearDownClass(cls):
        import shutil
        shutil.rmtree(cls.tmp, True)

    def calibrate_cli(self, *extra):
        pickle, _ = self.truth[(BASE["batch"], BASE["seq"])]
        args = ["calibrate", pickle, self.config, "--batch", str(BASE["batch"]), "--seq", str(BASE["seq"])]
        for k, v in SETTINGS.items():
            args += ["--" + k, v]
        return gpumem_json(*args, *extra, "--json")

    def test_predictions_hold_against_the_truth(self):
        predict = []
        for dim in ("batch", "seq"):
            predict += ["--predict", "%s=%s" % (dim, ",".join(str(v) for d, v in SIZES if d == dim))]
        c = self.calibrate_cli(*predict)
        base = self.truth[(BASE["batch"], BASE["seq"])][1]
        self.assertEqual(len(c["predictions"]), len(SIZES))
        for p, (dim, value) in zip(c["predictions"], SIZES):
            with self.subTest(**{dim: value}):
                self.assertEqual(p["setting"], dim)
                self.assertIsNone(p["error"])
                size = dict(BASE, **{dim: value})
                truth = self.truth[(size["batch"], size["seq"])][1]
                growth = model_bytes(truth) - model_bytes(base)
                if dim == "batch":
                    self.assertEqual(growth, 0)
                peak = truth["peak_bytes"] - growth
                reserved = truth["peak_reserved_bytes"] - growth
                self.assertEqual(p["tokens"], size["batch"] * size["seq"])
                got = p["calibrated"]["allocated_bytes"]
                raw = p["estimate"]["allocated_bytes"]
                err = abs(got - peak) / peak
                raw_err = abs(raw - peak) / peak
                self.assertLess(err, ALLOCATED_BOUND, "calibrated %d, truth %d less %d" % (got, truth["peak_bytes"], growth))
                self.assertLess(err, raw_err / 2, "no better than the estimate alone (%d)" % raw)
                res = p["calibrated"]["reserved_bytes"]
                self.assertLess(abs(res - reserved) / reserved, RESERVED_BOUND,
                                "reserved %d, truth %d less %d" % (res, truth["peak_reserved_bytes"], growth))
        # at batch 1 the optimizer step peaks (parameters, gradients, both moments and the
        # foreach temporaries outweigh one sequence's activations): the calibrated figure must
        # find that span, not the forward/backward one
        first = c["predictions"][0]
        self.assertEqual(first["calibrated"]["peak_span"], "optimizer_step")
        self.assertEqual(self.truth[(1, 256)][1]["at_peak"]["optimizer_temp"] > 0, True)

    def test_measured_side_is_the_snapshot_analysis(self):
        pickle, truth = self.truth[(BASE["batch"], BASE["seq"])]
        c = self.calibrate_cli()
        cats = gpumem_json("snapshot", "categories", "--json", pickle)["devices"][0]
        fb = c["spans"][0]
        self.assertEqual(fb["span"], "forward_backward")
        self.assertEqual(c["peak_span"], "forward_backward")
        self.assertEqual(fb["measured_bytes"], truth["peak_bytes"])
        self.assertEqual(c["snapshot"]["peak_bytes"], truth["peak_bytes"])
        self.assertEqual(c["snapshot"]["peak_reserved_bytes"], truth["peak_reserved_bytes"])
        self.assertEqual({k: v["measured_bytes"] for k, v in fb["categories"].items()}, cats["at_peak"])
        # parameter memory without a gradient: the causal-mask buffers (4 x 256 x 256 fp32)
        model = self.truth_model[(BASE["batch"], BASE["seq"])]
        self.assertEqual(c["snapshot"]["buffer_bytes"], truth["at_peak"]["parameter"] - model["parameter_bytes"])
        self.assertEqual(c["snapshot"]["buffer_bytes"], LAYERS * BASE["seq"] ** 2 * 4)
        est = gpumem.estimate(self.config, train=True, **BASE, **SETTINGS)
        self.assertEqual(fb["predicted_bytes"], est["phases"]["forward_backward_bytes"])
        self.assertEqual(c["spans"][1]["predicted_bytes"], est["phases"]["optimizer_step_bytes"])
        self.assertEqual(c["estimate"]["allocated_bytes"], est["peak"]["allocated_bytes"])

    def test_python_returns_what_the_command_prints(self):
        pickle, _ = self.truth[(BASE["batch"], BASE["seq"])]
        want = self.calibrate_cli("--predict", "batch=8,16")
        got = gpumem.calibrate(pickle, self.config, predict={"batch": [8, 16]}, **BASE, **SETTINGS)
        self.assertEqual(got, want)
        snap = gpumem.Snapshot(pickle)
        self.assertEqual(gpumem.calibrate(snap, self.config, predict="batch=8,16", device=0, **BASE, **SETTINGS), want)


class CalibrateErrors(TempDir):
    def test_errors_are_typed(self):
        ex = example_snapshot(self.path("ex.pickle"), "--no-leak")
        with self.assertRaises(gpumem.UsageError):
            gpumem.calibrate(ex, "gpt2", predict="batch")
        with self.assertRaises(gpumem.UsageError):
            gpumem.calibrate(ex, "gpt2", device=3)
        with self.assertRaises(gpumem.UsageError):
            gpumem.calibrate(ex, "gpt2", infer=True, seq=512)
        with self.assertRaises(FileNotFoundError):
            gpumem.calibrate(self.path("none.pickle"), "gpt2")
        with self.assertRaises(FileNotFoundError):
            gpumem.calibrate(ex, self.path("none.json"))
        with open(self.path("bad.pickle"), "wb") as f:
            f.write(b"\x80\x04not a pickle")
        with self.assertRaises(gpumem.FormatError):
            gpumem.calibrate(self.path("bad.pickle"), "gpt2")
        with self.assertRaises(TypeError):
            gpumem.calibrate(ex, "gpt2", predict=[8])
        p = run(GPUMEM, "calibrate", ex, "gpt2", "--predict", "batch", check=False)
        self.assertEqual(p.returncode, 64)

    def test_no_allocations_is_a_format_error(self):
        """A device with no allocations has nothing to calibrate against: an error, never a
        'correction' of the whole estimate."""
        import pickle
        empty = self.path("empty.pickle")
        with open(empty, "wb") as f:
            pickle.dump({"segments": [], "device_traces": [[], []]}, f, protocol=4)
        for kw in ({}, {"device": 1}):
            with self.assertRaises(gpumem.FormatError) as cm:
                gpumem.calibrate(empty, "gpt2", batch=8, predict="batch=64", **kw)
            self.assertIn("no allocations to calibrate against", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
