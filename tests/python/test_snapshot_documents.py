# SPDX-License-Identifier: MIT
"""Snapshot.regions(), window() and files(), and a Snapshot made with your category rules
(categories=RULES.json), return what `gpumem snapshot regions|window|files|categories|peak|
leaks|oom --json` print for the same file and options: on gpumem's example and on real files;
their arguments are checked strictly (TypeError for a wrong type, ValueError for a wrong
value, a bad rules file refused as the commands refuse it)."""
import json
import os
import struct
import unittest

from common import SNAPSHOTS, TempDir, example_snapshot, gpumem_json, needs

from test_snapshot_api import plain_load  # the pickle read with every class refused

import gpumem

RULES = {"rules": [
    {"name": "logits", "category": "activation", "function": "^cross_entropy$"},
    {"name": "adamw step", "category": "optimizer_state", "annotation": "^Optimizer\\.step#"},
]}


def reused_address(s, device):
    """An address the trace allocates at least twice, and how many times."""
    fields = gpumem.EVENT_FIELDS
    action, addr = fields.index("action"), fields.index("addr")
    seen = {}
    for e in struct.iter_unpack(gpumem.EVENT_FORMAT, s._events(device)):
        if e[action] == gpumem.ACTIONS.index("alloc"):
            seen[e[addr]] = seen.get(e[addr], 0) + 1
    return max(seen.items(), key=lambda kv: (kv[1], kv[0]))


class AsTheCommands(TempDir):
    """One file's regions, windows and files as the commands print them."""

    def check_file(self, path, device):
        s = gpumem.Snapshot(path)
        with self.subTest(file=os.path.basename(path), what="regions"):
            self.assertEqual(s.regions(), gpumem_json("snapshot", "regions", "--json", path))
            self.assertEqual(s.regions(compile=True),
                             gpumem_json("snapshot", "regions", "--compile", "--json", path))
            self.assertEqual(s.regions(device=device),
                             gpumem_json("snapshot", "regions", "--json", "--device", str(device),
                                         path))
        n = len(list(struct.iter_unpack(gpumem.EVENT_FORMAT, s._events(device))))
        lo, hi = n // 4, n // 2
        with self.subTest(file=os.path.basename(path), what="window by event"):
            self.assertEqual(s.window(lo, hi, device=device),
                             gpumem_json("snapshot", "window", "--json", "--device", str(device),
                                         "--from", str(lo), "--to", str(hi), path))
            self.assertEqual(s.window(lo, hi, device=device, top=0),
                             gpumem_json("snapshot", "window", "--json", "--device", str(device),
                                         "--top", "0", "--from", str(lo), "--to", str(hi), path))
        with self.subTest(file=os.path.basename(path), what="window by time"):
            self.assertEqual(s.window(0.25, 0.5, by="time", device=device),
                             gpumem_json("snapshot", "window", "--json", "--device", str(device),
                                         "--from", "250ms", "--to", "0.5s", path))
        addr, times = reused_address(s, device)
        self.assertGreaterEqual(times, 2)
        with self.subTest(file=os.path.basename(path), what="window at an allocation"):
            doc = s.window(at_alloc=addr, nth=2, device=device)
            self.assertEqual(doc, gpumem_json("snapshot", "window", "--json", "--device",
                                              str(device), "--at-alloc", "%#x#2" % addr, path))
            self.assertEqual(doc["allocation"]["address"], addr)
            self.assertEqual(s.window(at_alloc=addr, device=device),
                             gpumem_json("snapshot", "window", "--json", "--device", str(device),
                                         "--at-alloc", "%#x" % addr, path))
        with self.subTest(file=os.path.basename(path), what="files"):
            self.assertEqual(s.files(), gpumem_json("snapshot", "files", "--json", path))
            self.assertEqual(s.files(file="py", lines=True, device=device),
                             gpumem_json("snapshot", "files", "--json", "--device", str(device),
                                         "--file", "py", "--lines", path))
        return s

    def test_the_example(self):
        a = self.check_file(example_snapshot(self.path("ex.pickle"), "--phases"), 0)
        b_path = example_snapshot(self.path("nl.pickle"), "--no-leak")
        b = gpumem.Snapshot(b_path)
        self.assertEqual(a.files(b, file="model.py"),
                         gpumem_json("snapshot", "files", "--json", "--file", "model.py", a.path,
                                     b_path))
        self.assertEqual(a.files(b), gpumem_json("snapshot", "files", "--json", a.path, b_path))
        self.assertTrue(a.regions()["devices"][0]["regions"])  # the example has ranges

    @needs("third-party-data")
    def test_real_files(self):
        # record_function ranges and a stream's reused blocks; four devices, one without a trace
        self.check_file(os.path.join(SNAPSHOTS, "g7_record_stream_reuse_pyframes.pickle"), 0)
        self.check_file(os.path.join(SNAPSHOTS, "g6_compile_ctx_3dev_expandable_oom.pickle"), 1)


class CategoryRules(TempDir):
    def setUp(self):
        super().setUp()
        self.file = example_snapshot(self.path("ex.pickle"))
        self.rules = self.path("rules.json")
        with open(self.rules, "w") as f:
            json.dump(RULES, f)

    def test_every_document_applies_them_as_the_commands(self):
        s = gpumem.Snapshot(self.file, categories=self.rules)
        for command in ("categories", "peak", "leaks", "oom"):
            with self.subTest(command=command):
                self.assertEqual(s.json(command), gpumem_json(
                    "snapshot", command, "--json", "--categories", self.rules, self.file))
        plain = gpumem.Snapshot(self.file).json("categories")["devices"][0]
        ruled = s.json("categories")["devices"][0]
        self.assertNotEqual(plain["at_peak"], ruled["at_peak"])  # the logits moved
        self.assertEqual(sum(ruled["at_peak"].values()), ruled["peak_bytes"])

    def test_from_dict_takes_them_too(self):
        s = gpumem.Snapshot.from_dict(plain_load(self.file), categories=self.rules)
        self.assertEqual(s.categories(), gpumem.Snapshot(self.file, categories=self.rules)
                         .categories())

    def test_a_bad_rules_file_is_refused(self):
        bad = self.path("bad.json")
        with open(bad, "w") as f:
            f.write('{"rules": [{"category": "no_such_category", "function": "x"}]}')
        with self.assertRaises(gpumem.FormatError):
            gpumem.Snapshot(self.file, categories=bad)
        with self.assertRaises(FileNotFoundError):
            gpumem.Snapshot(self.file, categories=self.path("absent.json"))
        with self.assertRaises(IsADirectoryError):
            gpumem.Snapshot(self.file, categories=self.tmp)
        with self.assertRaises(TypeError):
            gpumem.Snapshot(self.file, categories=3)
        with self.assertRaises(gpumem.FormatError):
            gpumem.Snapshot.from_dict({}, categories=bad)


class StrictArguments(TempDir):
    def setUp(self):
        super().setUp()
        self.s = gpumem.Snapshot(example_snapshot(self.path("ex.pickle")))

    def test_regions(self):
        with self.assertRaises(TypeError):
            self.s.regions(1)
        with self.assertRaises(TypeError):
            self.s.regions(device="0")
        with self.assertRaises(ValueError):
            self.s.regions(device=5)

    def test_window(self):
        bad = [
            (TypeError, (1.0, 2), {}),                         # events are ints
            (TypeError, (True, 2), {}),
            (TypeError, ("1", 2), {"by": "time"}),
            (ValueError, (-1, 2), {}),
            (ValueError, (1, 2), {"by": "events"}),
            (ValueError, (1,), {}),                            # no end
            (ValueError, (1, 2), {"at_alloc": 1}),             # one or the other
            (ValueError, (), {}),
            (TypeError, (), {"at_alloc": "0x10"}),
            (ValueError, (), {"at_alloc": 1, "nth": 0}),
            (ValueError, (1, 2), {"nth": 2}),                  # nth names an allocation
            (ValueError, (), {"at_alloc": 1, "by": "time"}),
            (TypeError, (1, 2), {"top": 1.5}),
            (ValueError, (1, 2), {"top": -1}),
            (gpumem.UsageError, (20, 10), {}),                 # from after to
            (gpumem.UsageError, (0, 10 ** 9), {}),             # beyond the trace
            (gpumem.UsageError, (), {"at_alloc": 16}),         # no allocation there
            (ValueError, (0, 10), {"device": 3}),
        ]
        for exc, args, kwargs in bad:
            with self.subTest(args=args, kwargs=kwargs):
                with self.assertRaises(exc):
                    self.s.window(*args, **kwargs)

    def test_files(self):
        with self.assertRaises(TypeError):
            self.s.files("other.pickle")
        with self.assertRaises(TypeError):
            self.s.files(file=b"model.py")
        with self.assertRaises(ValueError):
            self.s.files(file="")
        with self.assertRaises(ValueError):
            self.s.files(lines=True)
        with self.assertRaises(TypeError):
            self.s.files(file="model.py", lines=1)
        with self.assertRaises(ValueError):
            self.s.files(device=7)


if __name__ == "__main__":
    unittest.main()
