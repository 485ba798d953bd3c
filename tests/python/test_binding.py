# SPDX-License-Identifier: MIT
"""The Python binding as safe as the command line:

- report() writes through the library's own output writer, the command's: never over a
  file without overwrite=True (a dangling symbolic link included), never over a FIFO, a
  device, a directory or a symbolic link even with it, with the permissions of the file it
  replaces (never its setuid/setgid bits) or 0666 less the umask, and no temporary file left
  when a write fails;
- Snapshot.__init__ is claimed under the GIL: two threads initialising one object never
  both succeed;
- values are converted strictly and without running the value's own code: a negative int,
  an int of 2^64 or more, a bool where a number is wanted, a float device, a NUL inside a
  string are TypeError / ValueError / OverflowError, never wrapped, cut or accepted (an
  exception raised by the value's own __fspath__ is the caller's and goes through);
- exceptions have the right types and texts: a path that is no UTF-8 is named (not a
  UnicodeDecodeError), a directory is an IsADirectoryError, no message gives the command
  line's advice ("'-' for standard input"), report('') is a ValueError;
- and a randomized conversion test: thousands of calls with values of every kind (ints of
  every size, floats, NaN, strings with NUL or surrogates, bytes, containers, objects whose
  __str__, __index__ or __fspath__ misbehave) must raise only those exception types (or
  succeed), never crash or raise anything else.  It stands in for a libFuzzer target: the
  conversion code is CPython API calls on live Python objects, which only run inside an
  interpreter, and an interpreter inside libFuzzer's process (its own allocator, the
  garbage collector, ASan's preload) would make for few and noisy executions; here the
  suite's ASan build runs it with the extension under the sanitizers."""
import errno
import os
import random
import resource
import stat
import threading
import unittest

from common import TempDir, example_snapshot

import gpumem

ALLOWED = (TypeError, ValueError, OverflowError, OSError, gpumem.Error, MemoryError)


class Report(TempDir):
    def setUp(self):
        super().setUp()
        self.snap = gpumem.Snapshot(example_snapshot(self.path("ex.pickle"), "--iterations", "1"))

    def leftovers(self):
        return [n for n in os.listdir(self.tmp) if n.startswith(".gpumem-tmp-")]

    def test_never_over_what_it_must_not_replace(self):
        dangling = self.path("dangling.html")
        os.symlink(self.path("nowhere"), dangling)
        with self.assertRaises(FileExistsError):
            self.snap.report(dangling)
        self.assertTrue(os.path.islink(dangling))
        self.assertFalse(os.path.exists(self.path("nowhere")))
        fifo = self.path("fifo")
        os.mkfifo(fifo)
        link = self.path("link.html")
        os.symlink(self.path("ex.pickle"), link)
        os.mkdir(self.path("dir"))
        for target in (fifo, link, self.path("dir"), dangling):
            with self.subTest(target=os.path.basename(target)):
                with self.assertRaises(FileExistsError) as cm:
                    self.snap.report(target, overwrite=True)
                self.assertEqual(cm.exception.filename, target)
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
        self.assertTrue(os.path.islink(link))
        self.assertEqual(self.leftovers(), [])

    def test_permissions(self):
        old = os.umask(0o027)
        try:
            self.snap.report(self.path("new.html"))
        finally:
            os.umask(old)
        self.assertEqual(stat.S_IMODE(os.stat(self.path("new.html")).st_mode), 0o640)
        for mode in (0o600, 0o6755):
            target = self.path("old%o.html" % mode)
            with open(target, "w") as f:
                f.write("old")
            os.chmod(target, mode)
            self.snap.report(target, overwrite=True)
            self.assertEqual(stat.S_IMODE(os.stat(target).st_mode), mode & 0o777)
            with open(target) as f:
                self.assertTrue(f.read().startswith("<!DOCTYPE html>"))

    def test_a_failed_write_names_the_file_and_leaves_nothing(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))  # Python ignores SIGXFSZ
        try:
            with self.assertRaises(OSError) as cm:
                self.snap.report(self.path("big.html"))
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        self.assertIn("writing '%s' failed: File too large (EFBIG)" % self.path("big.html"),
                      str(cm.exception))
        self.assertFalse(os.path.exists(self.path("big.html")))
        self.assertEqual(self.leftovers(), [])

    def test_empty_name(self):
        with self.assertRaises(ValueError) as cm:
            self.snap.report("")
        self.assertIn("the output file name is empty", str(cm.exception))


class Init(TempDir):
    def test_diff_with_an_unloaded_snapshot_raises(self):
        # a Snapshot made by __new__ alone has no path: the diff says it was not loaded
        # (it read the missing path first and crashed)
        path = example_snapshot(self.path("ex.pickle"), "--iterations", "1")
        s = gpumem.Snapshot(path)
        u = gpumem.Snapshot.__new__(gpumem.Snapshot)
        for a, b in ((s, u), (u, s)):
            with self.assertRaises(gpumem.Error) as cm:
                a._diff_json(b)
            self.assertIn("not loaded", str(cm.exception))

    def test_two_threads_never_both_load_one_object(self):
        path = example_snapshot(self.path("ex.pickle"), "--iterations", "1")
        both = 0
        for _ in range(300):
            s = gpumem.Snapshot.__new__(gpumem.Snapshot)
            ok = []
            barrier = threading.Barrier(2)

            def init():
                barrier.wait()
                try:
                    s.__init__(path)
                    ok.append(True)
                except TypeError:
                    pass

            threads = [threading.Thread(target=init) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertGreaterEqual(len(ok), 1)
            both += len(ok) == 2
        self.assertEqual(both, 0, "both threads loaded one Snapshot")


class Conversion(TempDir):
    def setUp(self):
        super().setUp()
        self.ex = example_snapshot(self.path("ex.pickle"), "--iterations", "1")
        self.snap = gpumem.Snapshot(self.ex)

    def test_values_never_wrap(self):
        cases = [
            (lambda: gpumem.Snapshot(self.ex, memory_limit=-1), ValueError),
            (lambda: gpumem.Snapshot(self.ex, memory_limit=2**64 + 5), OverflowError),
            (lambda: gpumem.Snapshot(self.ex, memory_limit=True), TypeError),
            (lambda: gpumem.Snapshot(self.ex, memory_limit=1.5e9), TypeError),
            (lambda: self.snap.stack_frames(2**64 + 1), OverflowError),
            (lambda: self.snap.stack_frames(-1), ValueError),
            (lambda: self.snap.stack_frames(True), TypeError),
            (lambda: self.snap.peak(device=True), TypeError),
            (lambda: self.snap.peak(device=0.0), TypeError),
            (lambda: self.snap.peak(device=2**70), OverflowError),
            (lambda: gpumem.estimate(parameters="7B\0junk"), ValueError),
            (lambda: gpumem.estimate("gpt2", train=True, batch=-1), ValueError),
            (lambda: gpumem.estimate("gpt2", train=True, batch=2**64), OverflowError),
            (lambda: gpumem.estimate("gpt2", train=True, batch=True), TypeError),
            (lambda: gpumem.calibrate(self.ex, "gpt2", device=0.9), TypeError),
            (lambda: gpumem.calibrate(self.ex, "gpt2", device=True), TypeError),
            (lambda: gpumem.calibrate(self.ex, "gpt2", device=-1), ValueError),
            (lambda: gpumem.calibrate(self.ex, "gpt2", predict="batch=8\0"), ValueError),
            (lambda: gpumem.calibrate(self.ex, "gpt2", predict=b"batch=8"), TypeError),
        ]
        for i, (call, want) in enumerate(cases):
            with self.subTest(case=i):
                with self.assertRaises(want):
                    call()
        with self.assertRaises(TypeError) as cm:
            gpumem.calibrate(self.ex, "gpt2", predict=b"batch=8")
        self.assertIn("not bytes", str(cm.exception))
        # what a huge int is, exactly: no wrap to a small one
        self.assertEqual(gpumem.estimate("gpt2", train=True, batch=4)["inputs"]["batch"], 4)

    def test_no_code_of_a_value_runs_while_settings_are_read(self):
        settings = {}

        class Sly(int):
            def __str__(self):
                settings.clear()  # freed the other values once, read after this call
                return "4"

            __repr__ = __str__

        settings.update(train=True, seq=Sly(512), batch=Sly(4), precision="bf16")
        doc = gpumem.estimate("gpt2", **settings)
        self.assertEqual(doc["inputs"]["batch"], 4)
        self.assertEqual(doc["inputs"]["seq"], 512)

    def test_exception_types_and_texts(self):
        bad = os.fsencode(self.tmp) + b"/caf\xe9.pickle"  # latin-1, no UTF-8
        with self.assertRaises(FileNotFoundError) as cm:
            gpumem.Snapshot(bad)
        self.assertIn("caf", str(cm.exception))
        with self.assertRaises(IsADirectoryError):
            gpumem.Snapshot(self.tmp)
        with self.assertRaises(IsADirectoryError):
            gpumem.calibrate(self.tmp, "gpt2")
        fifo = self.path("fifo")
        os.mkfifo(fifo)
        with self.assertRaises(OSError) as cm:
            gpumem.Snapshot(fifo)
        self.assertIn("FIFO", str(cm.exception))
        self.assertNotIn("'-'", str(cm.exception))
        self.assertNotIn("standard input", str(cm.exception))


def weird_values(rng):
    """Values of every kind a caller could pass, some hostile."""
    class BadStr(int):
        def __str__(self):
            raise RuntimeError("__str__ must not be called")

    class BadIndex:
        def __index__(self):
            raise RuntimeError("__index__ must not be called")

    class BadPath:
        def __fspath__(self):
            return 42

    return [
        None, True, False, 0, 1, -1, 7, 2**31, 2**32 - 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64,
        2**64 + 5, -2**63, -2**64, 10**30, rng.randrange(-2**70, 2**70), 0.0, -0.0, 0.5, 1e300,
        -1e300, float("nan"), float("inf"), float("-inf"), "", "0", "7B", "24GiB", "bf16",
        "a\0b", "\udcff", "é", "x" * 5000, b"", b"x", b"\xff", bytearray(b"a"), [], [1], (),
        {}, {"a": 1}, object(), BadStr(3), BadIndex(), BadPath(), 1 + 2j,
    ]


class RandomizedConversion(TempDir):
    def test_every_value_into_every_argument(self):
        ex = example_snapshot(self.path("ex.pickle"), "--iterations", "1")
        snap = gpumem.Snapshot(ex)
        # report(v) with a str v writes a file named v: in the test's folder, never the source tree
        here = os.getcwd()
        os.chdir(self.tmp)
        self.addCleanup(os.chdir, here)
        settings = [s["keyword"] for s in gpumem.estimate_settings()]
        rng = random.Random(29)
        values = weird_values(rng)
        calls = [
            lambda v: gpumem.Snapshot(v),
            lambda v: gpumem.Snapshot(ex, memory_limit=v),
            lambda v: snap.peak(device=v),
            lambda v: snap.categories(v),
            lambda v: snap.leaks(device=v),
            lambda v: snap.ooms(v),
            lambda v: snap._events(v),
            lambda v: snap.stack_frames(v),
            lambda v: snap.report(v),
            lambda v: snap.report(self.path("r.html"), v, overwrite=True),
            lambda v: gpumem.estimate(v, parameters="1B"),
            lambda v: gpumem.calibrate(ex, "gpt2", device=v),
            lambda v: gpumem.calibrate(ex, "gpt2", predict=v),
            lambda v: gpumem.calibrate(v, "gpt2"),
        ]
        n = 0
        for call in calls:
            for v in values:
                n += 1
                try:
                    call(v)
                except ALLOWED:
                    pass
        for _ in range(1500):
            kw = {rng.choice(settings): rng.choice(values) for _ in range(rng.randint(1, 4))}
            n += 1
            try:
                gpumem.estimate("gpt2", **kw)
            except ALLOWED:
                pass
        self.assertGreater(n, 2000)
        leftovers = [x for x in os.listdir(self.tmp) if x.startswith(".gpumem-tmp-")]
        self.assertEqual(leftovers, [])


if __name__ == "__main__":
    unittest.main()
