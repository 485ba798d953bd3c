# SPDX-License-Identifier: MIT
"""gpumem.Snapshot: the C extension over the snapshot reader and the analysis.

Checks that what Python gets is what the `gpumem snapshot ... --json` commands print for the
same file, document for document and key for key (every command, on every real file of many
PyTorch versions and on gpumem's example), that the methods read those documents, that
events agree one by one with an independent reading of the pickle
(tests/reference/snapshot_ref.py, Python's unpickler with classes refused), the NumPy and the
no-NumPy forms of events, the errors, the report and its refusal to overwrite, and that
loading again and again does not leak."""
import glob
import os
import resource
import struct
import subprocess
import sys
import unittest

from common import (GPUMEM, SNAPSHOTS, SOURCE, SYNTH, TempDir, example_snapshot, gpumem_json, needs,
                    python_env, run)

import gpumem

sys.path.insert(0, os.path.join(SOURCE, "tests", "reference"))
import snapshot_ref  # noqa: E402

def real_files():
    files = sorted(glob.glob(os.path.join(SNAPSHOTS, "*.pickle")) + glob.glob(os.path.join(SNAPSHOTS, "*.pkl")))
    if not files:
        raise AssertionError("no real snapshots in %s" % SNAPSHOTS)
    return files


class SnapshotAgreesWithCli(TempDir):
    def assert_documents_equal(self, path):
        s = gpumem.Snapshot(path)
        for command in gpumem.SNAPSHOT_DOCUMENTS:
            with self.subTest(file=os.path.basename(path), command=command):
                self.assertEqual(s.json(command), gpumem_json("snapshot", command, "--json", path))

    @needs("third-party-data")
    def test_every_document_of_every_real_file(self):
        for path in real_files():
            self.assert_documents_equal(path)

    def test_every_document_of_the_example(self):
        self.assert_documents_equal(example_snapshot(self.path("ex.pickle"), "--phases"))

    def test_options_are_the_commands(self):
        path = example_snapshot(self.path("ex.pickle"))
        s = gpumem.Snapshot(path)
        self.assertEqual(s.json("peak", top=3), gpumem_json("snapshot", "peak", "--json", "--top", "3", path))
        self.assertEqual(s.json("leaks", top=0), gpumem_json("snapshot", "leaks", "--json", "--top", "0", path))
        self.assertEqual(
            s.json("categories", device=0), gpumem_json("snapshot", "categories", "--json", "--device", "0", path)
        )
        with self.assertRaises(ValueError):
            s.json("report")
        with self.assertRaises(ValueError):
            s.json("peak", device=7)

    @needs("third-party-data")
    def test_diff_of_real_files(self):
        files = real_files()
        pairs = list(zip(files, files[1:] + files[:1]))
        for a, b in pairs:
            with self.subTest(a=os.path.basename(a), b=os.path.basename(b)):
                got = gpumem.Snapshot(a).diff(gpumem.Snapshot(b))
                self.assertEqual(got, gpumem_json("snapshot", "diff", "--json", a, b))

    @needs("shared-tools")
    def test_diff_reads_only_what_it_compares(self):
        # A diff analyses each file only for what the comparison reads, as `gpumem snapshot
        # diff` does: under the least memory limit at which it succeeds, the whole analysis
        # (categories()) does not fit, and the document is the command's.
        path = self.path("leak.pickle")
        run(SYNTH, "--target-size", "3M", "--seed", "2", "--leak", "-o", path, "--quiet")
        other = gpumem.Snapshot(example_snapshot(self.path("ex.pickle")))
        want = gpumem_json("snapshot", "diff", "--json", path, other.path)

        def diff_under(limit):
            try:
                return gpumem.Snapshot(path, memory_limit=limit).diff(other)
            except gpumem.FormatError as e:
                self.assertIn("limit", str(e))  # loading or analysing over the limit
                return None

        lo, hi = 64 << 10, 64 << 20  # diff fails at lo and succeeds at hi
        self.assertIsNone(diff_under(lo))
        self.assertEqual(diff_under(hi), want)
        while hi - lo > 16 << 10:
            mid = (lo + hi) // 2
            if diff_under(mid) is None:
                lo = mid
            else:
                hi = mid
        self.assertEqual(diff_under(hi), want)
        with self.assertRaises(gpumem.FormatError) as cm:
            gpumem.Snapshot(path, memory_limit=hi).categories()
        self.assertIn("the analysis of device 0", str(cm.exception))

    @needs("third-party-data")
    def test_the_default_device_is_the_largest_peak(self):
        # Without device=, the methods read the device with the largest allocated peak (the
        # first of equal ones), chosen from the devices' timelines; peak() is that device's
        # entry of `snapshot peak --json`, and peak(phase=True) adds the phase and iteration
        # of its entry of `snapshot categories --json`.
        for name in ("g5_tiny_2dev_expandable.pickle", "g6_compile_ctx_3dev_expandable_oom.pickle",
                     "g5_empty_no_segments_4dev.pickle"):
            path = os.path.join(SNAPSHOTS, name)
            with self.subTest(file=name):
                peaks = gpumem_json("snapshot", "peak", "--json", path)["devices"]
                want = max(peaks, key=lambda d: d["peak_bytes"])  # max() keeps the first of ties
                self.assertEqual(gpumem.Snapshot(path).peak(), want)
                cats = gpumem_json("snapshot", "categories", "--json", path)["devices"]
                cat = [d for d in cats if d["device"] == want["device"]][0]
                got = gpumem.Snapshot(path).peak(phase=True)
                self.assertEqual((got["peak_phase"], got["peak_iteration"]),
                                 (cat["peak_phase"], cat["peak_iteration"]))
                self.assertEqual({k: v for k, v in got.items() if k not in ("peak_phase", "peak_iteration")},
                                 want)

    def test_the_default_device_is_the_same_before_and_after_the_analysis(self):
        # On a file whose devices tie (device 0 empty, peaks 500, 1000, 1000), the default
        # device is the first of the tied largest peaks, device 2, whether it is read from the
        # timelines (a fresh object) or from the analysis that categories() ran first; and
        # peak(phase=True) takes the phase from that same device's categories.
        import pickle
        traces = [[]] + [[{"action": "alloc", "addr": 4096 * (d + 1), "size": size, "stream": 0,
                           "time_us": 1000}] for d, size in enumerate((500, 1000, 1000))]
        path = self.path("tie.pickle")
        with open(path, "wb") as f:
            pickle.dump({"segments": [], "device_traces": traces}, f, protocol=4)
        fresh = gpumem.Snapshot(path).peak()
        self.assertEqual((fresh["device"], fresh["peak_bytes"]), (2, 1000))
        s = gpumem.Snapshot(path)
        s.categories()
        self.assertEqual(s.peak(), fresh)
        got = s.peak(phase=True)
        cat = [d for d in s.json("categories")["devices"] if d["device"] == 2][0]
        self.assertEqual((got["peak_phase"], got["peak_iteration"]),
                         (cat["peak_phase"], cat["peak_iteration"]))
        self.assertEqual(gpumem.Snapshot(path).categories(), cat["at_peak"])

    @needs("shared-tools")
    def test_peak_alone_on_several_devices(self):
        # peak() of a file with several devices computes the peak alone, without the whole
        # analysis that categories() runs (to choose the device it used to run it): under the
        # least memory limit at which peak() succeeds, categories() does not fit.
        path = self.path("two.pickle")
        run(SYNTH, "--target-size", "3M", "--seed", "3", "--devices", "2", "-o", path, "--quiet")
        want = max(gpumem_json("snapshot", "peak", "--json", path)["devices"], key=lambda d: d["peak_bytes"])

        def peak_under(limit):
            try:
                return gpumem.Snapshot(path, memory_limit=limit).peak()
            except gpumem.FormatError as e:
                self.assertIn("limit", str(e))  # loading or analysing over the limit
                return None

        lo, hi = 64 << 10, 256 << 20  # peak() fails at lo and succeeds at hi
        self.assertIsNone(peak_under(lo))
        self.assertEqual(peak_under(hi), want)
        while hi - lo > 16 << 10:
            mid = (lo + hi) // 2
            if peak_under(mid) is None:
                lo = mid
            else:
                hi = mid
        self.assertEqual(peak_under(hi), want)
        with self.assertRaises(gpumem.FormatError) as cm:
            gpumem.Snapshot(path, memory_limit=hi).categories()
        self.assertIn("the analysis of device", str(cm.exception))

    def test_methods_read_the_documents(self):
        path = example_snapshot(self.path("ex.pickle"))
        s = gpumem.Snapshot(path)
        peak = gpumem_json("snapshot", "peak", "--json", path)["devices"][0]
        cats = gpumem_json("snapshot", "categories", "--json", path)["devices"][0]
        leaks = gpumem_json("snapshot", "leaks", "--json", "--top", "0", path)["devices"][0]["leaks"]
        self.assertEqual(s.peak(), peak)
        self.assertEqual(s.categories(), cats["at_peak"])
        self.assertEqual(list(s.categories()), list(gpumem.CATEGORIES))
        self.assertGreater(len(leaks), 0)
        self.assertEqual(s.leaks(), leaks)
        self.assertTrue(all("first_iteration" in l and "sites" in l for l in s.leaks()))
        self.assertEqual(s.ooms(), [])
        self.assertEqual(s.annotations, gpumem_json("snapshot", "info", "--json", path)["annotations"])
        group = peak["live_at_peak"][0]
        self.assertEqual(s.stack_frames(group["stack"])[0], group["frames"][0])

    @needs("third-party-data")
    def test_oom_verdicts(self):
        path = os.path.join(SNAPSHOTS, "g6_compile_ctx_3dev_expandable_oom.pickle")
        want = gpumem_json("snapshot", "oom", "--json", path)
        s = gpumem.Snapshot(path)
        n = 0
        for dev in want["devices"]:
            self.assertEqual(s.ooms(dev["device"]), dev["ooms"])
            n += len(dev["ooms"])
        self.assertGreater(n, 0, "the file has an OOM")

    @needs("third-party-data")
    def test_default_device_is_the_largest_peak(self):
        path = os.path.join(SNAPSHOTS, "g6_compile_ctx_3dev_expandable_oom.pickle")
        s = gpumem.Snapshot(path)
        peaks = {d: s.peak(d)["peak_bytes"] for d in s.devices}
        self.assertGreater(len(peaks), 1)
        self.assertEqual(s.peak()["device"], max(peaks, key=peaks.get))
        with self.assertRaises(ValueError):
            s.peak(99)


class Events(TempDir):
    def reference_trace(self, path, device):
        data = snapshot_ref.normalise(snapshot_ref.load(path))
        traces = data["device_traces"] or []
        return traces[device] if device < len(traces) else []

    def test_events_match_an_independent_reading(self):
        self.check_events([example_snapshot(self.path("ex.pickle"))])

    @needs("third-party-data")
    def test_events_of_real_files_match_an_independent_reading(self):
        self.check_events(real_files())

    def check_events(self, paths):
        np = gpumem._numpy()
        if np is None:
            self.skipTest("NumPy is not installed for this Python (Debian: python3-numpy)")
        for path in paths:
            s = gpumem.Snapshot(path)
            for d in s.devices:
                with self.subTest(file=os.path.basename(path), device=d):
                    ev = s.events(d)
                    self.assertIsInstance(ev, np.ndarray)
                    self.assertEqual(ev.dtype, gpumem.event_dtype())
                    ref = self.reference_trace(path, d)
                    self.assertEqual(len(ev), len(ref))
                    for e, r in zip(ev, ref):
                        name = gpumem.ACTIONS[e["action"]]
                        self.assertEqual(name, r["action"] if r["action"] in gpumem.ACTIONS else "other")
                        self.assertEqual(int(e["size"]), r.get("size", 0))
                        self.assertEqual(int(e["stream"]), r.get("stream", 0))
                        addr = r.get("device_free", 0) if name == "oom" else r.get("addr", 0)
                        self.assertEqual(int(e["addr"]), addr)
                        has_time = bool(e["flags"] & gpumem.EVENT_HAS_TIME)
                        self.assertEqual(has_time, "time_us" in r)
                        if has_time:
                            self.assertEqual(int(e["time_us"]), r["time_us"])
                        if e["stack"]:
                            self.assertTrue(s.stack_frames(int(e["stack"])))

    def test_without_numpy_events_are_a_memoryview(self):
        path = example_snapshot(self.path("ex.pickle"))
        code = (
            "import sys, struct\n"
            "sys.modules['numpy'] = None  # import numpy now raises ImportError\n"
            "import gpumem\n"
            "s = gpumem.Snapshot(sys.argv[1])\n"
            "v = s.events()\n"
            "assert isinstance(v, memoryview), type(v)\n"
            "rows = list(struct.iter_unpack(gpumem.EVENT_FORMAT, v))\n"
            "assert len(rows) == s.peak()['trace_events']\n"
            "first = dict(zip(gpumem.EVENT_FIELDS, rows[0]))\n"
            "print(len(rows), gpumem.ACTIONS[first['action']], first['size'])\n"
            "try:\n"
            "    gpumem.event_dtype()\n"
            "except ImportError:\n"
            "    print('no dtype')\n"
        )
        p = run(sys.executable, "-c", code, path, env=python_env())
        n, action, size, *_ = p.stdout.split()
        ref = self.reference_trace(path, 0)
        self.assertEqual(int(n), len(ref))
        self.assertEqual(action, ref[0]["action"])
        self.assertEqual(int(size), ref[0]["size"])
        self.assertIn("no dtype", p.stdout)

    def test_event_format_is_the_record_size(self):
        self.assertEqual(struct.calcsize(gpumem.EVENT_FORMAT), gpumem._core.EVENT_SIZE)
        self.assertEqual(gpumem.EVENT_FIELDS, ("time_us", "addr", "size", "stream", "stack", "action", "flags"))


class Errors(TempDir):
    def test_missing_file(self):
        with self.assertRaises(FileNotFoundError) as cm:
            gpumem.Snapshot(self.path("nope.pickle"))
        self.assertEqual(cm.exception.filename, self.path("nope.pickle"))

    def test_damaged_and_hostile_files_are_format_errors(self):
        cases = {
            "truncated.pickle": None,
            "global.pickle": b"\x80\x04\x95\x15\x00\x00\x00\x00\x00\x00\x00\x8c\x02os\x8c\x06system\x93\x94.",
            "garbage.pickle": b"\x80\x04not a snapshot",
            "list_of_ints.pickle": b"\x80\x04]\x94(K\x01K\x02e.",
        }
        with open(example_snapshot(self.path("ex.pickle")), "rb") as f:
            example = f.read()
        cases["truncated.pickle"] = example[: len(example) // 2]
        for name, data in cases.items():
            with self.subTest(case=name):
                with open(self.path(name), "wb") as f:
                    f.write(data)
                with self.assertRaises(gpumem.FormatError) as cm:
                    gpumem.Snapshot(self.path(name))
                self.assertIsInstance(cm.exception, ValueError)
                self.assertIsInstance(cm.exception, gpumem.Error)

    def test_shared_frames_list_costs_its_size(self):
        """One frames list of 2 x 10^4 frames referenced by each of 2 x 10^4 trace entries
        (a tuple in each, so that the general reader reads them): Snapshot() and calibrate()
        take time in proportion to the 1.6 MB file, not to the 4 x 10^8 frame references
        (before: 11 s for the load alone; now a few hundredths)."""
        import pickle
        fr = [{"filename": "/x/f%d.py" % i, "line": i, "name": "fn%d" % i} for i in range(20000)]
        # 16 KiB each, 312 MiB in all: more than half gpt2's weights, so that calibrate takes
        # it for a run of the job
        ev = [{"action": "alloc", "addr": 4096 + 16384 * i, "size": 16384, "stream": 0, "time_us": i,
               "frames": fr, "pool_id": (0, i)} for i in range(20000)]
        path = self.path("shared.pickle")
        with open(path, "wb") as f:
            pickle.dump({"segments": [], "device_traces": [ev], "allocator_settings": {}}, f,
                        protocol=4)
        t0 = resource.getrusage(resource.RUSAGE_SELF)
        snap = gpumem.Snapshot(path)
        gpumem.calibrate(snap, "gpt2", batch=1, seq=128)
        t1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (t1.ru_utime - t0.ru_utime) + (t1.ru_stime - t0.ru_stime)
        self.assertLess(cpu, 3.0, "%.2f s of CPU for a 1.6 MB file" % cpu)

    def test_memory_cap(self):
        path = example_snapshot(self.path("ex.pickle"))
        with self.assertRaises(gpumem.FormatError) as cm:
            gpumem.Snapshot(path, memory_limit=4096)
        self.assertIn("over the memory limit of 4.00 KiB", str(cm.exception))
        # the caller's own limit: no talk of a default or of what a larger file needs
        self.assertNotIn("default", str(cm.exception))
        self.assertNotIn("larger file", str(cm.exception))
        self.assertIn("(memory_limit=)", str(cm.exception), "the setting, by its Python name")
        with self.assertRaises(gpumem.FormatError):
            gpumem.Snapshot(path, max_memory=4096)  # the earlier name, still accepted

    def test_not_loaded_twice(self):
        s = gpumem.Snapshot(example_snapshot(self.path("ex.pickle")))
        with self.assertRaises(TypeError):
            s.__init__(s.path)


class Report(TempDir):
    def test_report_is_written_and_never_replaced(self):
        s = gpumem.Snapshot(example_snapshot(self.path("ex.pickle")))
        out = self.path("r.html")
        s.report(out, title="example run")
        with open(out, encoding="utf-8") as f:
            html = f.read()
        self.assertTrue(html.startswith("<!DOCTYPE html>") or html.lower().startswith("<!doctype html>"))
        self.assertIn("example run", html)
        before = os.stat(out).st_mtime_ns
        with self.assertRaises(FileExistsError):
            s.report(out)
        self.assertEqual(os.stat(out).st_mtime_ns, before)
        s.report(out, overwrite=True)
        self.assertNotEqual(os.stat(out).st_mtime_ns, before)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["ex.pickle", "r.html"], "no temporary file left")

    def test_report_matches_the_cli(self):
        path = example_snapshot(self.path("ex.pickle"))
        gpumem.Snapshot(path).report(self.path("py.html"))
        run(GPUMEM, "snapshot", "report", path, "-o", self.path("cli.html"))
        with open(self.path("py.html"), "rb") as a, open(self.path("cli.html"), "rb") as b:
            self.assertEqual(a.read(), b.read(), "the same page, title (the file name) included")


class NoLeak(TempDir):
    def test_loading_again_and_again_frees_everything(self):
        # The example snapshot costs several MiB in the reader's arena: a lost snapshot or
        # analysis per load shows up as hundreds of MiB after 150 loads.
        path = example_snapshot(self.path("ex.pickle"), "--iterations", "20")

        def rss_mib():
            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

        for _ in range(10):
            gpumem.Snapshot(path).categories()
        start = rss_mib()
        for _ in range(150):
            s = gpumem.Snapshot(path)
            s.categories()
            s.events()
            del s
        self.assertLess(rss_mib() - start, 64, "memory grows with every load")


class Import(unittest.TestCase):
    def test_import_needs_neither_torch_nor_numpy(self):
        code = (
            "import sys\n"
            "sys.modules['numpy'] = None\n"
            "sys.modules['torch'] = None\n"
            "import gpumem, gpumem.torch\n"
            "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
            "print(gpumem.__version__)\n"
        )
        p = run(sys.executable, "-c", code, env=python_env())
        self.assertEqual(p.stdout.strip(), run(GPUMEM, "version").stdout.split()[1])

    def test_devices_without_a_driver(self):
        env = python_env()
        env["GPUMEM_NVML_LIBRARY"] = "/nonexistent/libnvidia-ml.so.1"
        env["GPUMEM_CUDA_LIBRARY"] = "/nonexistent/libcuda.so.1"
        code = (
            "import gpumem\n"
            "d = gpumem.Devices()\n"
            "print(d.unavailable())\n"
            "try:\n"
            "    d.memory(0)\n"
            "except gpumem.NoDeviceError as e:\n"
            "    print('nodev', e)\n"
        )
        p = run(sys.executable, "-c", code, env=env)
        self.assertIn("nodev", p.stdout)
        self.assertNotEqual(p.stdout.splitlines()[0], "None")


if __name__ == "__main__":
    unittest.main()
