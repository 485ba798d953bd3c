# SPDX-License-Identifier: MIT
"""gpumem.Snapshot beyond the documents: from_dict() (the dict torch.cuda.memory._snapshot()
returns, read in memory) gives the snapshot its pickle gives, document for document, on the
example and on every real file; info(), stats() and replay() are what the commands print;
iterations are numbered from 1 as the commands say them; the notebook view is the report the
command writes, with nothing fetched from the network."""
import glob
import io
import os
import pickle
import re
import unittest

from common import (GPUMEM, SNAPSHOTS, TempDir, example_snapshot, gpumem_json, needs, run)

import gpumem


class PlainUnpickler(pickle.Unpickler):
    """Python's unpickler with every class refused: a snapshot is plain data."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError("a snapshot holds no %s.%s" % (module, name))


def plain_load(path):
    with open(path, "rb") as f:
        return PlainUnpickler(io.BytesIO(f.read())).load()


def without_file(doc):
    """A document less what names the file it was read from, its size and how its bytes were
    read (the pickle protocol, the reader's batches)."""
    if isinstance(doc, dict):
        return {k: without_file(v) for k, v in doc.items()
                if k not in ("file", "file_bytes", "pickle_bytes", "pickle_protocol", "flat_batches")}
    if isinstance(doc, list):
        return [without_file(v) for v in doc]
    return doc


class FromDict(TempDir):
    def assert_same_snapshot(self, path):
        a = gpumem.Snapshot(path)
        b = gpumem.Snapshot.from_dict(plain_load(path))
        self.assertEqual(b.path, "<dict>")
        self.assertEqual((a.generation, a.devices, a.n_events), (b.generation, b.devices, b.n_events))
        for command in gpumem.SNAPSHOT_DOCUMENTS:
            with self.subTest(file=os.path.basename(path), command=command):
                self.assertEqual(without_file(a.json(command)), without_file(b.json(command)))

    def test_the_example(self):
        self.assert_same_snapshot(example_snapshot(self.path("ex.pickle"), "--phases"))

    @needs("third-party-data")
    def test_every_real_file(self):
        files = sorted(glob.glob(os.path.join(SNAPSHOTS, "*.pickle")) +
                       glob.glob(os.path.join(SNAPSHOTS, "*.pkl")))
        self.assertTrue(files)
        for path in files:
            self.assert_same_snapshot(path)

    def test_only_plain_data(self):
        d = plain_load(example_snapshot(self.path("ex.pickle"), "--iterations", "1"))
        d["segments"][0]["frames"] = [object()]
        with self.assertRaisesRegex(TypeError, "object, which no memory snapshot holds"):
            gpumem.Snapshot.from_dict(d)
        with self.assertRaises(TypeError):
            gpumem.Snapshot.from_dict("not a dict")
        deep = []
        for _ in range(300):
            deep = [deep]
        with self.assertRaisesRegex(ValueError, "nested more than 200 deep"):
            gpumem.Snapshot.from_dict({"segments": deep})
        with self.assertRaisesRegex(gpumem.FormatError, "no 'segments' key"):
            gpumem.Snapshot.from_dict({"device_traces": []})

    def test_a_dict_is_loaded_once(self):
        s = gpumem.Snapshot.from_dict(plain_load(example_snapshot(self.path("ex.pickle"))))
        with self.assertRaises(TypeError):
            s._load_object({"segments": []}, 0)


class Commands(TempDir):
    def setUp(self):
        super().setUp()
        self.file = example_snapshot(self.path("ex.pickle"), "--phases")
        self.s = gpumem.Snapshot(self.file)

    def test_info_and_stats_are_the_commands(self):
        self.assertEqual(self.s.info(), gpumem_json("snapshot", "info", "--json", self.file))
        stats = gpumem_json("snapshot", "stats", "--json", self.file)["devices"][0]
        self.assertEqual(self.s.stats(), stats)
        self.assertEqual(self.s.stats(0), stats)

    def test_replay_is_the_command(self):
        self.assertEqual(self.s.replay(), gpumem_json("snapshot", "replay", "--json", self.file))
        self.assertEqual(
            self.s.replay("expandable_segments:True", gpu_memory="24GiB"),
            gpumem_json("snapshot", "replay", "--json", "--alloc-conf", "expandable_segments:True",
                        "--gpu-memory", "24GiB", self.file))
        self.assertEqual(
            self.s.replay(compare=True, gpu_memory=24 << 30),
            gpumem_json("snapshot", "replay", "--json", "--compare", "--gpu-memory", "24GiB",
                        self.file))
        with self.assertRaises(gpumem.UsageError):
            self.s.replay("expandable_segments:True", compare=True)
        with self.assertRaises(ValueError):
            self.s.replay("no_such_setting:1")

    def test_iterations_are_numbered_as_the_cli_says(self):
        text = run(GPUMEM, "snapshot", "categories", self.file).stdout
        said = int(re.search(r"\(iteration (\d+) of (\d+)\)", text).group(1))
        doc = self.s.json("categories")["devices"][0]
        self.assertEqual(doc["peak_iteration"], said)
        self.assertEqual([p["iteration"] for p in doc["iteration_peaks"]],
                         list(range(1, len(doc["iteration_peaks"]) + 1)))
        phases = gpumem_json("snapshot", "categories", "--json", "--series", self.file)
        runs = phases["devices"][0]["phases"]
        self.assertTrue(all(r["iteration"] is None or r["iteration"] >= 1 for r in runs))
        self.assertEqual(max(r["iteration"] or 0 for r in runs), len(doc["iteration_peaks"]))

    def test_notebook_view_is_the_report(self):
        html = self.s._repr_html_()
        out = self.path("r.html")
        run(GPUMEM, "snapshot", "report", self.file, "-o", out, "--title", self.file)
        with open(out, encoding="utf-8") as f:
            self.assertEqual(html, f.read())
        self.assertIsNone(re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html))


class FormatContent(TempDir):
    """The 2026 format content through the package: components() is what `categories --json
    --memory-stats` gives, info()/stats() show pinned host memory apart, and from_dict() of
    such a file reads as its pickle does."""

    def setUp(self):
        super().setUp()
        here = os.path.dirname(os.path.abspath(__file__))
        run("python3", os.path.join(here, "..", "reference", "make_2026_format.py"), self.tmp)

    def test_components_as_the_command(self):
        snap = self.path("forward_frames.pickle")
        stats = self.path("memory_stats.json")
        cli = gpumem_json("snapshot", "categories", "--json", "--memory-stats", stats, snap)
        s = gpumem.Snapshot(snap)
        self.assertEqual(s.components(stats), cli["devices"][0]["components"])
        self.assertEqual(s.components(stats)["parameter"]["difference_bytes"], 0)
        with self.assertRaises(FileNotFoundError):
            s.components(self.path("missing.json"))

    def test_host_memory_apart(self):
        s = gpumem.Snapshot(self.path("pinned_host.pickle"))
        self.assertEqual(s.info()["host"]["trace_events"], 5)
        self.assertEqual(s.json("stats")["host"]["reserved_bytes"], 4 << 20)
        self.assertEqual(s.stats()["reserved_bytes"], 20 << 20)
        d = gpumem.Snapshot.from_dict(plain_load(self.path("pinned_host.pickle")))
        self.assertEqual(without_file(d.info()), without_file(s.info()))
        self.assertEqual(without_file(d.json("stats")), without_file(s.json("stats")))


if __name__ == "__main__":
    unittest.main()
