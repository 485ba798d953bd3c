# SPDX-License-Identifier: MIT
"""gpumem.estimate and gpumem.estimate_settings: the estimator from Python.

Checks that estimate() returns what `gpumem estimate --json` prints for the same job, key for
key, for the kinds of jobs people bring (full training on a GPU that is too small, with its
suggestions; LoRA; vLLM serving with tensor parallelism, which does not start; llama.cpp on a
GGUF file; a config.json and a parameter count alone); that the keywords are the settings
table's (every CLI option is one, with '_' or '-'); that Python values are converted by the
setting's type (ints, floats, bools, strings, None); and that errors say what kind they are:
a bad setting (gpumem.UsageError), a missing file (FileNotFoundError), a damaged file
(gpumem.FormatError), a wrong Python type (TypeError)."""
import os
import re
import subprocess
import unittest

from common import BINARY, CONFIGS, GPUMEM, SOURCE, TempDir, gpumem_json, needs, run

import gpumem

MKMODELFILE = os.path.join(BINARY, "tests", "gm_mkmodelfile")


def cli_args(model, settings):
    """The command line of a job given as estimate() keywords."""
    args = [model] if model else []
    for key, value in settings.items():
        opt = "--" + key.replace("_", "-")
        if value is True:
            args.append(opt)
        elif value not in (None, False):
            args += [opt, str(value)]
    return args


class EstimateAgreesWithCli(TempDir):
    def same(self, model, **settings):
        want = gpumem_json("estimate", *cli_args(model, settings), "--json")
        got = gpumem.estimate(model, **settings)
        self.assertEqual(got, want)
        return got

    def test_training_that_does_not_fit_with_its_suggestions(self):
        d = self.same("llama-3-8b", train=True, batch=4, seq=2048, gpu="H100", gpus=8)
        self.assertFalse(d["fit"]["fits"])
        self.assertEqual(d["fit"]["reason"], "device_over")
        self.assertTrue(any(s["fits"] for s in d["suggestions"]))

    def test_lora(self):
        d = self.same("llama-3-8b", train=True, lora=True, lora_rank=32, batch=2, gpu="A100-80GB")
        self.assertIn("lora", d)
        self.assertTrue(d["fit"]["fits"])

    def test_vllm_serving_that_would_not_start(self):
        d = self.same("llama-3.1-70b", infer=True, engine="vllm", tp=2, gpu="NVIDIA H100 80GB HBM3")
        self.assertEqual(d["fit"]["reason"], "engine_would_not_start")
        self.assertEqual(d["serving"]["engine"], "vllm")
        self.assertTrue(any(s["fits"] for s in d["suggestions"]))

    def test_gguf_with_llamacpp(self):
        path = self.path("l3.gguf")
        run(MKMODELFILE, "gguf-llama", path, "32", "4096", "32", "8", "14336", "128256", "8192")
        d = self.same(path, infer=True, engine="llama.cpp", context=8192, kv_dtype="int8",
                      flash_attn=True, gpu="RTX-4090")
        self.assertEqual(d["model_file"]["format"], "gguf")

    @needs("third-party-data")
    def test_safetensors_shards_and_a_folder(self):
        """Qwen2.5-0.5B as two safetensors shards beside its config (the golden test
        estimate_safetensors_dir builds the same), then the folder with the config alone."""
        cfg = os.path.join(CONFIGS, "Qwen2.5-0.5B.json")
        folder = self.path("m")
        os.mkdir(folder)
        with open(cfg) as f, open(os.path.join(folder, "config.json"), "w") as g:
            g.write(f.read())

        def layer(i):
            p = "model.layers.%d." % i
            return [p + "self_attn.q_proj.weight:BF16:896x896", p + "self_attn.q_proj.bias:BF16:896",
                    p + "self_attn.k_proj.weight:BF16:128x896", p + "self_attn.k_proj.bias:BF16:128",
                    p + "self_attn.v_proj.weight:BF16:128x896", p + "self_attn.v_proj.bias:BF16:128",
                    p + "self_attn.o_proj.weight:BF16:896x896", p + "mlp.gate_proj.weight:BF16:4864x896",
                    p + "mlp.up_proj.weight:BF16:4864x896", p + "mlp.down_proj.weight:BF16:896x4864",
                    p + "input_layernorm.weight:BF16:896", p + "post_attention_layernorm.weight:BF16:896"]

        first = ["model.embed_tokens.weight:BF16:151936x896"] + sum((layer(i) for i in range(12)), [])
        second = sum((layer(i) for i in range(12, 24)), []) + ["model.norm.weight:F32:896"]
        run(MKMODELFILE, "safetensors", os.path.join(folder, "model-00001-of-00002.safetensors"), *first)
        run(MKMODELFILE, "safetensors", os.path.join(folder, "model-00002-of-00002.safetensors"), *second)
        d = self.same(folder, infer=True, context=4096, batch=4)
        self.assertEqual(d["model_file"]["format"], "safetensors")
        self.assertEqual(d["model_file"]["files"], 2)
        for name in os.listdir(folder):
            if name.endswith(".safetensors"):
                os.unlink(os.path.join(folder, name))
        self.assertNotIn("model_file", self.same(folder, infer=True, context=4096, batch=4))

    @needs("third-party-data")
    def test_config_json(self):
        cfg = os.path.join(CONFIGS, "Qwen2.5-0.5B.json")
        self.same(cfg, train=True, precision="fp32", batch=16, seq=256, method="blog")

    def test_parameters_alone(self):
        d = self.same(None, parameters="7B", bits=4.5, reserve_gib=2)
        self.assertEqual(d["parameters"], 7000000000)

    def test_search(self):
        d = self.same("mistral-7b", infer=True, max_context=True, gpu="RTX-4090")
        self.assertIn("search", d)


class Settings(unittest.TestCase):
    def test_every_cli_option_is_a_setting(self):
        """The settings are the library's table, which the CLI's options come from too: every
        job option of `gpumem estimate --help` is listed, with its help line."""
        help_text = run(GPUMEM, "estimate", "--help").stdout
        options = set(re.findall(r"^\s+--([a-z0-9.-]+)", help_text, re.M))
        own = {"list-models", "list-gpus", "list-archs", "replay-segments", "json", "color", "help",
               "from", "check", "brief", "all-suggestions"}
        names = [s["name"] for s in gpumem.estimate_settings()]
        self.assertEqual(set(names), options - own)
        self.assertEqual(len(names), len(set(names)))
        for s in gpumem.estimate_settings():
            self.assertEqual(s["keyword"], s["name"].replace("-", "_"))
            self.assertIn(s["type"], ("flag", "int", "count", "size", "float", "choice", "text"))
            self.assertIn(s["help"], help_text)
            self.assertEqual(s["choices"] is not None, s["type"] == "choice")
            self.assertTrue(set(s["modes"]) <= {"weights", "train", "infer"})
        by_name = {s["name"]: s for s in gpumem.estimate_settings()}
        self.assertEqual(by_name["max-model-len"]["engine"], "vllm")
        self.assertEqual(by_name["train"]["type"], "flag")
        self.assertEqual(by_name["parameters"]["type"], "count")

    def test_every_setting_reaches_the_library(self):
        """Each keyword, given a value of its type, is taken by the library (which then may
        refuse the combination, as the CLI does: a UsageError naming the setting), never
        refused by the binding."""
        samples = {"flag": True, "int": 2, "count": 1000, "size": 1 << 20, "float": 0.5, "text": "H100"}
        special = {"lora_targets": "q,v", "gpu_memory": 24, "bits": 8, "lora_dropout": 0.1}
        for s in gpumem.estimate_settings():
            value = special.get(s["keyword"], s["choices"][1] if s["choices"] else samples[s["type"]])
            with self.subTest(setting=s["keyword"], value=value):
                try:
                    gpumem.estimate("llama-3-8b", **{s["keyword"]: value})
                except gpumem.UsageError as e:
                    self.assertIn("--", str(e))

    def test_dashes_and_underscores(self):
        a = gpumem.estimate("llama-3.1-70b", infer=True, engine="vllm", max_model_len=4096, gpu="H100")
        b = gpumem.estimate("llama-3.1-70b", **{"infer": True, "engine": "vllm", "max-model-len": 4096, "gpu": "H100"})
        self.assertEqual(a, b)
        self.assertEqual(a["serving"]["max_model_len"], 4096)
        with self.assertRaises(gpumem.UsageError) as cm:
            gpumem.estimate("llama-3-8b", **{"max_model_len": 1, "max-model-len": 2})
        self.assertIn("same setting", str(cm.exception))

    def test_python_values(self):
        base = gpumem.estimate(parameters=1500000000, bits=16)
        self.assertEqual(gpumem.estimate(parameters=1.5e9, bits=16), base)
        self.assertEqual(gpumem.estimate(parameters="1.5B", bits=16.0), base)
        self.assertEqual(base["parameters"], 1500000000)
        # a size: an int is bytes, a string has its unit; --gpu-memory's bare number is GiB, as on the CLI
        self.assertEqual(gpumem.estimate("llama-3-8b", cuda_context=300 << 20)["inputs"]["cuda_context_bytes"], 300 << 20)
        self.assertEqual(gpumem.estimate("llama-3-8b", cuda_context="300MiB")["inputs"]["cuda_context_bytes"], 300 << 20)
        self.assertEqual(gpumem.estimate("llama-3-8b", gpu_memory=24)["fit"]["capacity_bytes"], 24 << 30)
        # False and None leave a setting unset
        self.assertEqual(gpumem.estimate("llama-3-8b", train=False, batch=None), gpumem.estimate("llama-3-8b"))
        self.assertEqual(gpumem.estimate("llama-3-8b", train=True, zero=3, gpus=8)["setup"]["sharding"], "zero-3")
        self.assertEqual(gpumem.estimate("llama-3-8b", train=True, fragmentation=0.5)["inputs"]["fragmentation"], 0.5)


class Errors(TempDir):
    def test_usage(self):
        cases = [
            (dict(train=True, batch="x"), "--batch: 'x'"),
            (dict(nosuch=1), "unknown setting 'nosuch'"),
            # a mistyped keyword gets the setting it is likely a slip for
            (dict(bach=4), "unknown setting 'bach' (did you mean 'batch'?)"),
            (dict(max_model_lenn=4096), "(did you mean 'max_model_len'?)"),
            (dict(train=True, infer=True), "--train"),
            (dict(infer=True, seq=512), "--seq applies to --train"),
            (dict(parameters=1.5), "--parameters"),
            (dict(gpu="A100"), "A100-40GB"),
        ]
        for settings, text in cases:
            with self.subTest(settings=settings):
                with self.assertRaises(gpumem.UsageError) as cm:
                    gpumem.estimate("llama-3-8b", **settings)
                self.assertIn(text, str(cm.exception))
                self.assertIsInstance(cm.exception, ValueError)
                self.assertIsInstance(cm.exception, gpumem.Error)
                if set(settings) & {"nosuch", "bach", "max_model_lenn"}:
                    continue  # the command's own option parser refuses it first
                # the message is the library's, as the command prints it
                args = cli_args("llama-3-8b", settings)
                p = subprocess.run([GPUMEM, "estimate", *args], capture_output=True, text=True)
                self.assertEqual(p.returncode, 64)
                self.assertIn(str(cm.exception), p.stderr)
        with self.assertRaises(gpumem.UsageError):
            gpumem.estimate()

    def test_missing_and_damaged_files(self):
        with self.assertRaises(FileNotFoundError):
            gpumem.estimate("no/such/config.json")
        with self.assertRaises(gpumem.FormatError) as cm:
            gpumem.estimate(os.path.join(SOURCE, "tests", "data", "configs", "truncated.json"))
        self.assertIn("invalid JSON", str(cm.exception))
        bad = self.path("bad.safetensors")
        with open(bad, "wb") as f:
            f.write(b"\xff" * 16)
        with self.assertRaises(gpumem.FormatError):
            gpumem.estimate(bad)

    def test_types(self):
        for settings in (dict(train=1), dict(train=True, batch=4.0), dict(train=True, batch=[4]), dict(gpu=3.5j)):
            with self.subTest(settings=settings):
                with self.assertRaises(TypeError):
                    gpumem.estimate("llama-3-8b", **settings)


if __name__ == "__main__":
    unittest.main()
