# SPDX-License-Identifier: MIT
"""What the Python tests share: paths given by ctest, the gpumem command, temporary folders."""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.environ.get("GM_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
BINARY = os.environ.get("GM_BINARY_DIR", os.path.join(SOURCE, "build"))
GPUMEM = os.environ.get("GPUMEM", os.path.join(BINARY, "gpumem"))
FAKE_TORCH = os.path.join(HERE, "fake_torch")
# Set by tests/needs.sh for the tests marked @needs(...) below (absent otherwise).
TESTDATA = os.environ.get("GM_TESTDATA", "")
SNAPSHOTS = os.path.join(TESTDATA, "snapshots")
CONFIGS = os.path.join(TESTDATA, "configs")
SYNTH = os.environ.get("GM_SYNTH", "")


def needs(what):
    """Mark a test method or class as needing files kept outside the repository:
    'third-party-data' (the real snapshots and configs, in SNAPSHOTS and CONFIGS) or
    'shared-tools' (the snapshot generator SYNTH).  tests/python/run.py runs such tests only
    in their own ctest (python/<suite>/<what>), which tests/needs.sh skips with the reason
    when the files are absent."""
    def mark(obj):
        obj.gm_needs = what
        return obj
    return mark


def run(*args, check=True, env=None, cwd=None):
    """Run a command; its CompletedProcess (text output)."""
    p = subprocess.run(list(args), capture_output=True, text=True, env=env, cwd=cwd)
    if check and p.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr))
    return p


def gpumem_json(*args):
    return json.loads(run(GPUMEM, *args).stdout)


def python_env(extra_path=()):
    """The environment for a child Python that imports this build's gpumem."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(list(extra_path) + [env.get("PYTHONPATH", "")])
    return env


class TempDir(unittest.TestCase):
    """A test case with a fresh temporary folder in self.tmp."""

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="gpumem-pytest-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def path(self, name):
        return os.path.join(self.tmp, name)


def example_snapshot(path, *extra):
    """gpumem's own example snapshot (a simulated training job with a leak)."""
    run(GPUMEM, "snapshot", "example", "-o", path, *extra)
    return path
