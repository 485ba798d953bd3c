# SPDX-License-Identifier: MIT
"""gpumem.torch against the suite's own fake torch (tests/python/fake_torch): the order of
the protocol's calls, the JSON series (schema gpumem.measure/1), the refusal to overwrite,
OOM handling, first and warm passes, several GPUs, the cudaMallocAsync caveat, record() and
its phase marks read back by gpumem's reader and CLI.  The fake drivers of the build give the
NVML readings (ctest points GPUMEM_NVML_LIBRARY / GPUMEM_CUDA_LIBRARY at them)."""
import json
import os
import sys
import unittest
from unittest import mock

from common import FAKE_TORCH, GPUMEM, SOURCE, TempDir, gpumem_json, python_env, run

sys.path.insert(0, FAKE_TORCH)
sys.path.insert(0, os.path.join(SOURCE, "tests", "reference"))
import snapshot_ref  # noqa: E402
import torch  # noqa: E402  the fake

import gpumem  # noqa: E402
import gpumem.torch as gmt  # noqa: E402

MIB = 1 << 20
PROTOCOL = {"synchronize", "memory_allocated", "memory_reserved", "max_memory_allocated",
            "max_memory_reserved", "reset_peak_memory_stats", "alloc", "free"}


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def protocol_calls(names=PROTOCOL):
    return [c for c in torch.cuda.state.calls if c[0] in names]


class Protocol(TempDir):
    def setUp(self):
        super().setUp()
        torch.cuda.state.reset(devices=1, capacity=256 * MIB)

    def load(self, name="s.json"):
        return load_json(self.path(name))

    def test_order_of_operations(self):
        m = gmt.Measure(self.path("s.json"), batch=4)
        torch.cuda.state.calls.clear()
        with m.phase("forward", step=0):
            torch.cuda.alloc(3 * MIB)
        self.assertEqual(
            protocol_calls(),
            [
                ("synchronize", 0),
                ("memory_allocated", 0),
                ("memory_reserved", 0),
                ("reset_peak_memory_stats", 0),
                ("alloc", 0),
                ("synchronize", 0),
                ("max_memory_allocated", 0),
                ("max_memory_reserved", 0),
                ("memory_allocated", 0),
                ("memory_reserved", 0),
            ],
        )

    def test_json_series(self):
        m = gmt.Measure(self.path("s.json"), batch=4, seq=128, dtype="bf16")
        with m.phase("model_load"):
            w = torch.cuda.alloc(10 * MIB)
        with m.phase("forward", tokens=512):
            t = torch.cuda.alloc(3 * MIB)
            torch.cuda.free(t)
        doc = self.load()
        self.assertEqual(doc["schema"], "gpumem.measure/1")
        self.assertEqual(doc["source"], "gpumem.torch")
        self.assertEqual(doc["gpumem_version"], gpumem.__version__)
        self.assertEqual(doc["dimensions"], {"batch": 4, "seq": 128, "dtype": "bf16", "device": "cuda:0"})
        self.assertTrue(doc["settings"]["repeats_in_same_process"])
        self.assertEqual([p["name"] for p in doc["phases"]], ["model_load", "forward"])
        load, fwd = doc["phases"]
        self.assertEqual(load["allocated_bytes"], {"begin": 0, "end": 10 * MIB, "peak": 10 * MIB})
        self.assertEqual(load["reserved_bytes"], {"begin": 0, "end": 10 * MIB, "peak": 10 * MIB})
        self.assertEqual(fwd["allocated_bytes"], {"begin": 10 * MIB, "end": 10 * MIB, "peak": 13 * MIB})
        self.assertEqual(fwd["reserved_bytes"], {"begin": 10 * MIB, "end": 14 * MIB, "peak": 14 * MIB})
        self.assertEqual(fwd["dimensions"], {"tokens": 512})
        self.assertTrue(load["ok"] and fwd["ok"] and doc["ok"])
        self.assertEqual(doc["measured"], {"peak_allocated_bytes": 13 * MIB, "peak_reserved_bytes": 14 * MIB})
        # the driver's view through gpumem's NVML layer (the fake NVML here)
        self.assertEqual(set(fwd["device_bytes"]), {"free_begin", "free_end", "used_begin", "used_end"})
        env = doc["environment"]
        self.assertEqual(env["devices"][0]["name"], "NVIDIA Fake A100-SXM4-80GB")
        self.assertEqual(env["torch"]["version"], "2.9.0+fake")
        self.assertEqual(env["torch"]["cuda"], "12.4")
        self.assertEqual(env["torch"]["backend"], "cuda")
        self.assertEqual(env["torch"]["allocator_backend"], "native")
        self.assertEqual(env["torch"]["cudnn"], 90100)
        self.assertEqual(doc["caveats"], [])
        del w

    def test_hip_backend_and_its_allocator_settings(self):
        # A ROCm build of torch: torch.version.hip set, torch.version.cuda None.  Its allocator
        # reads PYTORCH_HIP_ALLOC_CONF when PYTORCH_CUDA_ALLOC_CONF is unset; a CUDA build never does.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTORCH_")}
        env["PYTORCH_HIP_ALLOC_CONF"] = "expandable_segments:True"
        with mock.patch.dict(os.environ, env, clear=True):
            with mock.patch.object(torch.version, "hip", "6.2.41133-dd7f95766"), \
                    mock.patch.object(torch.version, "cuda", None):
                m = gmt.Measure(self.path("hip.json"))
                with m.phase("forward"):
                    torch.cuda.alloc(MIB)
            doc = load_json(self.path("hip.json"))
            t = doc["environment"]["torch"]
            self.assertEqual(t["backend"], "hip")
            self.assertEqual(t["hip"], "6.2.41133-dd7f95766")
            self.assertIsNone(t["cuda"])
            self.assertEqual(t["alloc_conf"]["PYTORCH_HIP_ALLOC_CONF"], "expandable_segments:True")
            self.assertEqual(doc["settings"]["alloc_conf"], "expandable_segments:True")
            self.assertEqual(doc["environment"]["settings"]["PYTORCH_HIP_ALLOC_CONF"], "expandable_segments:True")

            m = gmt.Measure(self.path("cuda.json"))
            with m.phase("forward"):
                torch.cuda.alloc(MIB)
            doc = load_json(self.path("cuda.json"))
            self.assertEqual(doc["environment"]["torch"]["backend"], "cuda")
            self.assertEqual(doc["settings"]["alloc_conf"], "")  # the HIP variable means nothing here

            os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "max_split_size_mb:128"
            with mock.patch.object(torch.version, "hip", "6.2.41133-dd7f95766"):
                m = gmt.Measure(self.path("both.json"))
                with m.phase("forward"):
                    torch.cuda.alloc(MIB)
            self.assertEqual(load_json(self.path("both.json"))["settings"]["alloc_conf"], "max_split_size_mb:128")

    def test_the_file_is_rewritten_after_every_phase(self):
        m = gmt.Measure(self.path("s.json"))
        self.assertEqual(self.load()["phases"], [])
        with m.phase("a"):
            self.assertEqual(self.load()["phases"], [])
        self.assertEqual(len(self.load()["phases"]), 1)
        self.assertEqual(os.listdir(self.tmp), ["s.json"], "no temporary file left")
        umask = os.umask(0o022)
        os.umask(umask)
        self.assertEqual(os.stat(self.path("s.json")).st_mode & 0o777, 0o666 & ~umask,
                         "the permissions of a plain open(), not mkstemp's 0600")

    def test_refuses_to_overwrite(self):
        with open(self.path("s.json"), "w") as f:
            f.write("earlier series\n")
        with self.assertRaises(FileExistsError):
            gmt.Measure(self.path("s.json"))
        with open(self.path("s.json")) as f:
            self.assertEqual(f.read(), "earlier series\n")
        m = gmt.Measure(self.path("t.json"))
        with self.assertRaises(FileExistsError):
            m.save(self.path("s.json"))
        with self.assertRaises(FileExistsError):
            with gmt.record(self.path("s.json")):
                pass
        with open(self.path("s.json")) as f:
            self.assertEqual(f.read(), "earlier series\n")

    def test_oom_is_recorded_then_raised(self):
        m = gmt.Measure(self.path("s.json"))
        with m.phase("model_load"):
            torch.cuda.alloc(100 * MIB)
        with self.assertRaises(torch.cuda.OutOfMemoryError):
            with m.phase("forward", batch=64):
                torch.cuda.alloc(50 * MIB)
                torch.cuda.alloc(200 * MIB)
        doc = self.load()
        p = doc["phases"][-1]
        self.assertFalse(p["ok"])
        self.assertTrue(p["oom"])
        self.assertEqual(p["error_type"], "OutOfMemoryError")
        self.assertIn("CUDA out of memory", p["error"])
        self.assertEqual(p["requested_bytes"], 200 * MIB, "the allocation the allocator tried")
        self.assertEqual(p["oom_device"], "cuda:0")
        # the last readings it had: the 50 MiB allocated before the failure are in the peak
        self.assertEqual(p["allocated_bytes"], {"begin": 100 * MIB, "end": 150 * MIB, "peak": 150 * MIB})
        self.assertFalse(doc["ok"])
        with m.phase("after"):
            pass
        self.assertEqual([q["name"] for q in self.load()["phases"]], ["model_load", "forward", "after"])

    def test_other_errors_are_recorded_and_raised(self):
        m = gmt.Measure(self.path("s.json"))
        with self.assertRaises(KeyError):
            with m.phase("forward"):
                raise KeyError("x")
        p = self.load()["phases"][0]
        self.assertEqual((p["ok"], p["oom"], p["error_type"]), (False, False, "KeyError"))
        self.assertNotIn("requested_bytes", p)

    def test_a_missing_reading_is_absent_not_zero(self):
        m = gmt.Measure(self.path("s.json"))
        real = torch.cuda.max_memory_allocated

        def broken(device=None):
            raise RuntimeError("not available")

        torch.cuda.max_memory_allocated = broken
        try:
            with m.phase("forward"):
                torch.cuda.alloc(MIB)
        finally:
            torch.cuda.max_memory_allocated = real
        p = self.load()["phases"][0]
        self.assertEqual(p["allocated_bytes"], {"begin": 0, "end": MIB})
        self.assertNotIn("peak", p["allocated_bytes"])
        self.assertEqual(self.load()["measured"]["peak_allocated_bytes"], None)

    def test_failed_synchronize_is_said(self):
        m = gmt.Measure(self.path("s.json"))
        torch.cuda.state.fail_synchronize = True
        with m.phase("forward"):
            pass
        self.assertIs(self.load()["phases"][0]["synchronized"], False)

    def test_first_and_warm_passes_are_kept_apart(self):
        m = gmt.Measure(self.path("s.json"))
        for step, size in enumerate((8, 2, 4)):
            with m.phase("forward", step=step):
                torch.cuda.free(torch.cuda.alloc(size * MIB))
        doc = self.load()
        self.assertEqual([p["pass"] for p in doc["phases"]], ["first", "warm", "warm"])
        self.assertEqual([p["occurrence"] for p in doc["phases"]], [1, 2, 3])
        self.assertEqual(doc["passes"]["first_peak_allocated_bytes"], {"forward": 8 * MIB})
        self.assertEqual(doc["passes"]["warm_peak_allocated_bytes"], {"forward": 4 * MIB})

    def test_phases_do_not_nest(self):
        m = gmt.Measure(self.path("s.json"))
        with self.assertRaises(RuntimeError):
            with m.phase("outer"):
                with m.phase("inner"):
                    pass

    def test_cuda_malloc_async_caveat(self):
        torch.cuda.state.reset(backend="cudaMallocAsync")
        m = gmt.Measure(self.path("s.json"))
        with m.phase("forward"):
            torch.cuda.alloc(MIB)
        doc = self.load()
        self.assertEqual([c["id"] for c in doc["caveats"]], ["cuda_malloc_async_reserved"])
        self.assertEqual(doc["settings"]["allocator_backend"], "cudaMallocAsync")
        with self.assertRaises(RuntimeError):
            with gmt.record(self.path("p.pkl")):
                pass
        self.assertFalse(os.path.exists(self.path("p.pkl")))


class MultiGpu(TempDir):
    def setUp(self):
        super().setUp()
        torch.cuda.state.reset(devices=3, capacity=256 * MIB)

    def test_every_device_of_the_process(self):
        m = gmt.Measure(self.path("s.json"))
        torch.cuda.state.calls.clear()
        with m.phase("load"):
            torch.cuda.alloc(4 * MIB, device=0)
            torch.cuda.alloc(6 * MIB, device=1)
        first = list(torch.cuda.state.calls)
        torch.cuda.state.calls.clear()
        with m.phase("forward"):
            torch.cuda.alloc(2 * MIB, device=1)
        second = list(torch.cuda.state.calls)
        # a GPU the process does not use yet is not synchronized (that would make a context)
        self.assertNotIn(("synchronize", 1), first[: first.index(("alloc", 0))])
        self.assertNotIn(("synchronize", 2), first + second)
        self.assertIn(("synchronize", 1), first[first.index(("alloc", 1)):])
        self.assertIn(("synchronize", 1), second[: second.index(("alloc", 1))])
        # peaks are reset on every device, so that none carries an older peak
        for d in range(3):
            self.assertIn(("reset_peak_memory_stats", d), second)
        doc = load_json(self.path("s.json"))
        load, fwd = doc["phases"]
        self.assertEqual([d["device"] for d in load["devices"]], ["cuda:0", "cuda:1"])
        self.assertEqual(load["device"], "cuda:0")
        self.assertEqual(load["allocated_bytes"]["peak"], 4 * MIB)
        self.assertEqual(load["devices"][1]["allocated_bytes"], {"begin": 0, "end": 6 * MIB, "peak": 6 * MIB})
        self.assertEqual(fwd["devices"][1]["allocated_bytes"], {"begin": 6 * MIB, "end": 8 * MIB, "peak": 8 * MIB})

    def test_explicit_devices(self):
        m = gmt.Measure(self.path("s.json"), devices=[2])
        torch.cuda.state.calls.clear()
        with m.phase("load"):
            torch.cuda.alloc(MIB, device=2)
        self.assertEqual({c[1] for c in protocol_calls() if c[0] != "alloc"}, {2})


class Record(TempDir):
    def setUp(self):
        super().setUp()
        torch.cuda.state.reset(devices=1, capacity=64 * MIB)

    def test_phases_are_marked_in_the_snapshot(self):
        m = gmt.Measure(self.path("s.json"))
        with gmt.record(self.path("p.pkl")) as r:
            with m.phase("model_load"):
                w = torch.cuda.alloc(8 * MIB)
            with m.phase("forward"):
                torch.cuda.free(torch.cuda.alloc(4 * MIB))
        self.assertFalse(r.dumped_on_oom)
        s = gpumem.Snapshot(self.path("p.pkl"))
        marks = [(a["name"], a["stage"]) for a in s.annotations]
        self.assertEqual(
            marks,
            [
                ("gpumem.phase:model_load", "START"),
                ("gpumem.phase:model_load", "END"),
                ("gpumem.phase:forward", "START"),
                ("gpumem.phase:forward", "END"),
            ],
        )
        self.assertEqual(s.peak()["peak_bytes"], 12 * MIB)
        self.assertEqual(s.peak()["final_bytes"], 8 * MIB)
        # every allocator event inside a phase carries its mark as memory metadata
        raw = snapshot_ref.load(self.path("p.pkl"))
        self.assertEqual([e.get("user_metadata") for e in raw["device_traces"][0]],
                         ["gpumem.phase:model_load"] * 2 + ["gpumem.phase:forward"] * 4)
        self.assertEqual(torch.cuda.state.metadata, "", "the metadata before the phase is restored")
        info = run(GPUMEM, "snapshot", "info", self.path("p.pkl")).stdout
        self.assertIn("gpumem.phase:forward", info)
        run(GPUMEM, "snapshot", "categories", self.path("p.pkl"))
        calls = [c[0] if c[0] == "_dump_snapshot" else c for c in torch.cuda.state.calls
                 if c[0] in ("_record_memory_history", "_dump_snapshot")]
        self.assertEqual(calls, [("_record_memory_history", "all"), "_dump_snapshot", ("_record_memory_history", None)])
        del w

    def test_digest_written_beside_is_the_commands(self):
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.tmp)  # the digest names its snapshot as given: relative, as the command's
        with gmt.record("p.pkl") as r:
            w = torch.cuda.alloc(8 * MIB)
            torch.cuda.free(torch.cuda.alloc(4 * MIB))
        self.assertEqual(r.digest_path, "p.digest")
        run(GPUMEM, "snapshot", "digest", "p.pkl", "-o", "cli.digest")
        with open("p.digest", encoding="utf-8") as a, open("cli.digest", encoding="utf-8") as b:
            self.assertEqual(a.read(), b.read())
        self.assertEqual(gpumem.Snapshot("p.pkl").digest(), load_json("p.digest"))
        # the job's commands read it in the snapshot's place, with the same figures
        peak = gpumem_json("snapshot", "peak", "--json", "p.digest")["digest"]
        self.assertEqual((peak["snapshot"], peak["peak_bytes"]), ("p.pkl", 12 * MIB))
        del w

    def test_digest_name_claimed_at_the_start(self):
        with open(self.path("p.digest"), "w") as f:
            f.write("theirs")
        with self.assertRaises(FileExistsError):
            with gmt.record(self.path("p.pkl")):
                pass
        self.assertEqual(sorted(os.listdir(self.tmp)), ["p.digest"], "the snapshot's claim is undone")
        with open(self.path("p.digest")) as f:
            self.assertEqual(f.read(), "theirs")
        with gmt.record(self.path("q.pkl"), digest=False) as r:
            pass
        self.assertIsNone(r.digest_path)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["p.digest", "q.pkl"])

    def test_digest_failure_leaves_no_empty_digest(self):
        failing = mock.patch.object(gmt, "_Snapshot", side_effect=gpumem.Error("cannot read"))
        with failing, self.assertRaisesRegex(gpumem.Error, "cannot read"):
            with gmt.record(self.path("p.pkl")):
                pass
        self.assertEqual(sorted(os.listdir(self.tmp)), ["p.pkl"])
        # the block's own error wins; the digest's is kept beside it
        with failing, self.assertRaises(KeyError):
            with gmt.record(self.path("q.pkl")) as r:
                raise KeyError("the block's")
        self.assertIsInstance(r.digest_error, gpumem.Error)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["p.pkl", "q.pkl"])

    def test_snapshot_dumped_at_the_oom(self):
        m = gmt.Measure(self.path("s.json"))
        with self.assertRaises(torch.cuda.OutOfMemoryError):
            with gmt.record(self.path("p.pkl")) as r:
                with m.phase("forward"):
                    torch.cuda.alloc(16 * MIB)
                    torch.cuda.alloc(100 * MIB)
        self.assertTrue(r.dumped_on_oom)
        s = gpumem.Snapshot(self.path("p.pkl"))
        ooms = s.ooms()
        self.assertEqual(len(ooms), 1)
        self.assertEqual(ooms[0]["requested_bytes"], 100 * MIB)
        self.assertEqual(s.annotations, [a for a in s.annotations if a["stage"] == "START"])
        self.assertEqual(s.annotations[0]["name"], "gpumem.phase:forward")
        self.assertEqual(sorted(os.listdir(self.tmp)), ["p.digest", "p.pkl", "s.json"], "no temporary file left")
        # the digest, of the snapshot dumped at the failure
        digest = load_json(self.path("p.digest"))
        self.assertEqual(digest["schema"], "gpumem.snapshot.digest/1")
        self.assertEqual(len(digest["devices"][0]["ooms"]), 1)
        self.assertIsNone(r.digest_error)
        # recording stopped
        self.assertFalse(torch.cuda.state.recording)


class Process(TempDir):
    """What needs a fresh interpreter: the default series, $GPUMEM_TORCH_OUTPUT, the first
    series of a process, and gpumem.torch without any torch at all."""

    def child(self, code, extra_env=None, check=True):
        env = python_env([FAKE_TORCH])
        env.update(extra_env or {})
        return run(sys.executable, "-c", code, env=env, cwd=self.tmp, check=check)

    def test_default_series_writes_the_env_file(self):
        out = self.path("sweep-run.json")
        code = (
            "import torch, gpumem.torch as gmt\n"
            "gmt.series(batch=2, seq=64)\n"
            "with gmt.phase('forward', batch=2):\n"
            "    torch.cuda.alloc(1 << 20)\n"
            "m = gmt.Measure('own.json')\n"
            "with m.phase('second'):\n"
            "    pass\n"
        )
        self.child(code, {gmt.OUTPUT_ENV: out})
        doc = load_json(out)
        self.assertTrue(doc["series"]["first_in_process"])
        self.assertEqual([p["name"] for p in doc["phases"]], ["forward"])
        self.assertEqual(doc["dimensions"], {"batch": 2, "seq": 64, "device": "cuda:0"})
        own = load_json(self.path("own.json"))
        self.assertFalse(own["series"]["first_in_process"], "the second series of a process is not fresh")
        # a second process never replaces it
        p = self.child(code, {gmt.OUTPUT_ENV: out}, check=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("FileExistsError", p.stderr)
        self.assertEqual(load_json(out), doc)

    def test_explicit_series_answers_the_env_file_too(self):
        out = self.path("sweep-run.json")
        code = (
            "import torch, gpumem.torch as gmt\n"
            "m = gmt.Measure('mine.json', batch=3)\n"
            "with m.phase('forward'):\n"
            "    torch.cuda.alloc(1 << 20)\n"
        )
        self.child(code, {gmt.OUTPUT_ENV: out})
        self.assertEqual(load_json(out), load_json(self.path("mine.json")))

    def test_without_the_driver_readings_are_absent(self):
        code = (
            "import json, torch, gpumem.torch as gmt\n"
            "m = gmt.Measure('s.json')\n"
            "with m.phase('forward'):\n"
            "    torch.cuda.alloc(1 << 20)\n"
            "d = json.load(open('s.json'))\n"
            "print(json.dumps([d['phases'][0]['device_bytes'], d['series'].get('driver_unavailable')]))\n"
        )
        p = self.child(code, {"GPUMEM_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1",
                              "GPUMEM_CUDA_LIBRARY": "/nonexistent/libcuda.so.1"})
        device_bytes, why = json.loads(p.stdout)
        self.assertEqual(device_bytes, {})
        self.assertIn("no NVIDIA driver", why)

    def test_torch_is_imported_only_when_used(self):
        p = run(sys.executable, "-c",
                "import sys\nsys.modules['torch'] = None\nimport gpumem.torch as gmt\n"
                "try:\n    gmt.Measure()\nexcept ImportError:\n    print('needs torch')\n",
                env=python_env())
        self.assertEqual(p.stdout.strip(), "needs torch")


class Distributed(TempDir):
    """gpumem.torch in a job of several processes under torch.distributed (the fake's process
    group over a folder, NCCL by default): each rank's files named by its rank, every phase's
    peaks gathered on a gloo group with the job's collective, the imbalance, and an OOM on
    one rank seen from the others; the snapshots of record() read back as the job's ranks, and
    each rank's digest beside its snapshot, the one the command writes."""

    WORLD = 3
    CODE = (
        "import os, sys, torch, torch.distributed as dist, gpumem.torch as gmt\n"
        "rank = int(sys.argv[1])\n"
        "dist.init_process_group('nccl', init_method='file://' + sys.argv[2], rank=rank, world_size=%d)\n"
        "torch.cuda.state.reset(devices=1, capacity=64 << 20)\n"
        "m = gmt.Measure('series.json', batch=2)\n"
        "with gmt.record('profile.pickle'):\n"
        "    with m.phase('forward'):\n"
        "        h = torch.cuda.alloc((rank + 1) * (4 << 20))\n"
        "        torch.cuda.free(h)\n"
        "    try:\n"
        "        with m.phase('backward'):\n"
        "            torch.cuda.alloc((100 << 20) if rank == 1 else (8 << 20))\n"
        "    except torch.cuda.OutOfMemoryError:\n"
        "        pass\n"
        "print(' '.join(c[1] for c in dist.calls))\n"
    )

    def test_ranks_gathered_named_and_read_back(self):
        import subprocess

        env = python_env([FAKE_TORCH])
        store = self.path("store")
        procs = [subprocess.Popen([sys.executable, "-c", self.CODE % self.WORLD, str(r), store], cwd=self.tmp,
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for r in range(self.WORLD)]
        outs = [p.communicate(timeout=120) for p in procs]
        for p, (out, err) in zip(procs, outs):
            self.assertEqual(p.returncode, 0, err)
            # one gloo group made, every gather on it, none on the NCCL default group
            self.assertEqual(out.split(), ["gloo", "gloo", "gloo"])
        for r in range(self.WORLD):
            doc = load_json(self.path("rank%d_series.json" % r))
            self.assertEqual((doc["series"]["rank"], doc["series"]["world_size"]), (r, self.WORLD))
            fwd, bwd = doc["phases"]
            self.assertEqual([row["rank"] for row in fwd["ranks"]], list(range(self.WORLD)))
            # each rank's own peak, as every rank sees it
            for row in fwd["ranks"]:
                self.assertEqual(row["peak_allocated_bytes"], (row["rank"] + 1) * 4 * MIB)
            self.assertEqual((fwd["imbalance"]["max_rank"], fwd["imbalance"]["min_rank"]), (2, 0))
            self.assertAlmostEqual(fwd["imbalance"]["ratio"], 3.0)
            # rank 1 ran out of memory: every rank knows which, and what the others held
            self.assertEqual(bwd["imbalance"]["oom_ranks"], [1])
            self.assertTrue(bwd["ranks"][1]["oom"])
            self.assertEqual(bwd["ranks"][1]["requested_bytes"], 100 * MIB)
            self.assertEqual([bwd["ranks"][k]["peak_allocated_bytes"] for k in (0, 2)], [8 * MIB, 8 * MIB])
            self.assertTrue(os.path.exists(self.path("rank%d_profile.pickle" % r)))
        # the snapshots, numbered by their names, as the job's ranks
        st = gpumem_json("snapshot", "stats", "--json", *[self.path("rank%d_profile.pickle" % r) for r in (2, 0, 1)])
        self.assertEqual([(x["rank"], x["rank_from"]) for x in st["ranks"]], [(r, "file name") for r in range(self.WORLD)])
        # each rank's digest beside its snapshot, the one `gpumem snapshot digest` writes of it
        for r in range(self.WORLD):
            snap = "rank%d_profile.pickle" % r
            run(GPUMEM, "snapshot", "digest", snap, "-o", "cli%d.digest" % r, cwd=self.tmp)
            with open(self.path("rank%d_profile.digest" % r), encoding="utf-8") as a, \
                    open(self.path("cli%d.digest" % r), encoding="utf-8") as b:
                self.assertEqual(a.read(), b.read())
            digest = load_json(self.path("rank%d_profile.digest" % r))
            self.assertEqual((digest["rank"], len(digest["devices"][0]["ooms"])), (r, 1 if r == 1 else 0))
        # the digests in the snapshots' place: the same ranks and peaks
        peaks = gpumem_json("snapshot", "peak", "--json", *[self.path("rank%d_profile.digest" % r) for r in range(self.WORLD)])
        snaps = gpumem_json("snapshot", "peak", "--json", *[self.path("rank%d_profile.pickle" % r) for r in range(self.WORLD)])
        self.assertEqual([x["rank"] for x in peaks["ranks"]], list(range(self.WORLD)))
        self.assertEqual([x["peak_bytes"] for x in peaks["ranks"]], [x["peak_bytes"] for x in snaps["ranks"]])


if __name__ == "__main__":
    unittest.main()
