# SPDX-License-Identifier: MIT
"""gpumem sweep end to end with the fake drivers: a workload that allocates through the fake
CUDA (tests/device/workload.c) and fails above a size known from the fake's constants, and a
training script on the fake torch that writes its gpumem.torch series (tests/python/
workloads/train_fake.py).  Checks the runs, the bisection's exact boundary, the failures kept
as observations with their phase and error, no bisection for a failure that is not an OOM,
the timeout, the refusal to overwrite, and the JSON read back by gpumem sheet.  And what a
sweep never does: leave a run's processes behind (or measure the next run with them), die of
SIGHUP without its record, write a log through a symbolic link or over a file, pass a
command's terminal escapes to the terminal, or leave a temporary file when its output cannot
be written."""
import json
import os
import resource
import signal
import subprocess
import sys
import time
import unittest

from common import FAKE_TORCH, GPUMEM, HERE, TempDir, python_env, run

MIB = 1 << 20
TRAIN = os.path.join(HERE, "workloads", "train_fake.py")


def running_with(marker):
    """PIDs of the processes (zombies left out) whose command line holds 'marker'."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read()
            with open("/proc/%s/stat" % d) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and state not in "ZXx":
            pids.append(int(d))
    return pids


def wait_running(marker, sweep):
    """Until a process other than the sweep (Popen 'sweep', whose own command line may hold
    'marker' too) whose command line holds 'marker' runs (at most a minute)."""
    deadline = time.monotonic() + 60
    while not set(running_with(marker)) - {sweep.pid} and time.monotonic() < deadline:
        time.sleep(0.05)


class Sweep(TempDir):
    def setUp(self):
        super().setUp()
        fake = os.environ.get("GM_FAKE_DIR")
        if not fake or not os.path.exists(os.path.join(fake, "gm_workload")):
            self.skipTest("no fake drivers in this build")
        self.workload = os.path.join(fake, "gm_workload")
        self.env = python_env([FAKE_TORCH])
        # 4 GiB device, 512 MiB kept by the "driver" and 300 MiB per context, charged in
        # 2 MiB granules: a process can allocate at most 4096 - 512 - 300 = 3284 MiB.
        self.env.update(GPUMEM_FAKE_MEMORY="4GiB", GPUMEM_FAKE_STATE=self.path("fake.state"))
        for k in ("PYTORCH_CUDA_ALLOC_CONF", "CUDA_VISIBLE_DEVICES", "GPUMEM_TORCH_OUTPUT"):
            self.env.pop(k, None)

    def sweep(self, *args, check=True):
        return run(GPUMEM, "sweep", *args, env=self.env, cwd=self.tmp, check=check)

    def test_boundary_of_a_workload_on_the_fake_driver(self):
        # "seen": each run holds its allocation until the sweep's watch has read it
        p = self.sweep("--param", "mib=1024,2048,4096,8192", "--interval", "20", "--process-interval", "20",
                       "--json", "--", self.workload, "alloc:{mib}", "seen", "sleep:150")
        doc = json.loads(p.stdout)
        self.assertEqual(doc["schema"], "gpumem.sweep/1")
        self.assertEqual(doc["boundary"], {"end": "boundary", "fits": 3284, "fails": 3285, "exact": True})
        runs = doc["runs"]
        self.assertEqual([r["value"] for r in runs[:3]], [1024, 2048, 4096])
        self.assertEqual([r["bisection"] for r in runs[:4]], [False, False, False, True])
        self.assertEqual(doc["not_run"], [8192], "values above the first failure are not run")
        for r in runs:
            fits = r["value"] <= 3284
            self.assertEqual(r["outcome"], "ok" if fits else "failed", r)
            if fits:
                # device used as watch sees it: the allocation and the 300 MiB context
                self.assertEqual(r["device"]["peak_bytes"], (r["value"] + 300) * MIB, r)
                self.assertEqual(r["command_peak_bytes"], (r["value"] + 300) * MIB, r)
                self.assertIsNone(r["error"])
            else:
                self.assertEqual(r["exit_status"], 1)
                self.assertIn("out of device memory", r["error"], "the failure is kept with its error")
            self.assertIsNone(r["series"], "gm_workload writes no series")
        # each value ran once, in a fresh process
        self.assertEqual(len({r["value"] for r in runs}), len(runs))

    def test_training_script_with_gpumem_torch(self):
        out = self.path("sweep.json")
        p = self.sweep("--param", "batch=8,16,32,64", "--output", out, "--logs", self.path("logs"), "--",
                       sys.executable, TRAIN, "--batch", "{batch}")
        with open(out) as f:
            doc = json.load(f)
        b = doc["boundary"]
        self.assertEqual((b["end"], b["exact"]), ("boundary", True))
        self.assertEqual(b["fails"], b["fits"] + 1)
        failed = [r for r in doc["runs"] if r["outcome"] != "ok"]
        self.assertTrue(failed)
        for r in failed:
            s = r["series"]
            self.assertTrue(s["oom"], r)
            self.assertIn(s["phase"], ("forward", "optimizer_step"))
            self.assertIn(s["requested_bytes"], (64 * MIB, 512 * MIB))
            self.assertIn("OutOfMemoryError", r["error"])
        for r in doc["runs"]:
            if r["outcome"] == "ok":
                self.assertEqual(r["series"]["phases"], 7)
                self.assertEqual(r["series"]["phases_failed"], 0)
        # the boundary agrees with running the script by hand at both values
        for batch, ok in ((b["fits"], True), (b["fails"], False)):
            q = run(sys.executable, TRAIN, "--batch", str(batch), env=self.env, cwd=self.tmp, check=False)
            self.assertEqual(q.returncode == 0, ok, q.stderr)
        self.assertIn("boundary: batch=%d fits, batch=%d fails (out of memory in phase" % (b["fits"], b["fails"]),
                      p.stdout)
        # --logs keeps every run's output and series
        logs = sorted(os.listdir(self.path("logs")))
        self.assertIn("run-1.log", logs)
        self.assertIn("run-1.json", logs)
        with open(self.path("logs/run-1.json")) as f:
            self.assertEqual(json.load(f)["dimensions"]["batch"], 8)
        # the sheet reads the sweep back
        sheet = run(GPUMEM, "sheet", out, env=self.env).stdout
        self.assertIn("batch=%d fits, batch=%d fails" % (b["fits"], b["fails"]), sheet)

    def test_a_failure_that_is_not_an_oom_is_not_bisected(self):
        p = self.sweep("--param", "batch=8,16,32,64", "--json", "--", sys.executable, TRAIN, "--batch", "{batch}",
                       "--bug-at", "20")
        doc = json.loads(p.stdout)
        self.assertEqual(doc["boundary"]["end"], "not_oom")
        self.assertEqual([r["value"] for r in doc["runs"]], [8, 16, 32])
        bug = doc["runs"][-1]
        self.assertFalse(bug["series"]["oom"])
        self.assertEqual(bug["series"]["phase"], "forward")
        self.assertIn("ValueError: shapes do not match", bug["error"])

    def test_timeout(self):
        # a run of 0.1 s ends well inside 5 s however slow the machine; one of 60 s is stopped
        # (no bisection: its runs between the two would take up to 5 s each)
        p = self.sweep("--param", "ms=100,60000", "--timeout", "5", "--no-bisect", "--json", "--", self.workload,
                       "alloc:16", "sleep:{ms}")
        doc = json.loads(p.stdout)
        self.assertEqual([r["outcome"] for r in doc["runs"]][:2], ["ok", "timeout"])
        self.assertIn("timed out after 5000 ms", doc["runs"][1]["error"])

    def test_interrupt_stops_the_run_and_keeps_the_record(self):
        out = self.path("sweep.json")
        ms = 30000 + os.getpid() % 10000  # a command line found only here
        marker = "sleep:%d" % ms
        self.addCleanup(lambda: [os.kill(p, signal.SIGKILL) for p in running_with(marker)])
        p = subprocess.Popen([GPUMEM, "sweep", "--param", "ms=%d,%d" % (ms, 2 * ms), "--output", out, "--",
                              self.workload, "alloc:16", "sleep:{ms}"],
                             env=self.env, cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # the interrupt comes while the first run runs, however slowly it started
        wait_running(marker, p)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 130, err)
        with open(out) as f:
            doc = json.load(f)
        self.assertEqual(doc["boundary"]["end"], "interrupted")
        self.assertEqual([r["outcome"] for r in doc["runs"]], ["interrupted"])
        # the run would take 30 s and more: stopped, not waited for (20 s: a slow machine's start)
        self.assertLess(doc["runs"][0]["seconds"], 20, "the run was stopped, not waited for")

    def test_refuses_to_overwrite_before_running(self):
        out = self.path("sweep.json")
        with open(out, "w") as f:
            f.write("earlier\n")
        p = self.sweep("--param", "n=1,2", "--output", out, "--", "sh", "-c", "touch ran-{n}", check=False)
        self.assertEqual(p.returncode, 73)
        self.assertFalse(os.path.exists(self.path("ran-1")), "nothing ran")
        with open(out) as f:
            self.assertEqual(f.read(), "earlier\n")

    def test_a_command_that_cannot_start(self):
        p = self.sweep("--param", "n=1,2", "--json", "--", self.path("no-such-program"), "{n}", check=False)
        self.assertEqual(p.returncode, 1)
        doc = json.loads(p.stdout)
        self.assertEqual(doc["runs"][0]["outcome"], "not_started")
        self.assertEqual(doc["boundary"]["end"], "first_fails")

    def test_processes_left_by_a_run_are_ended_and_named(self):
        """A run that leaves a process running in its group (a background server): the
        process is named in the run and ended before the next run, which is measured alone;
        nothing outlives the sweep."""
        marker = "sleep:6%04d" % (os.getpid() % 10000)  # a command line found only here
        self.addCleanup(lambda: [os.kill(p, signal.SIGKILL) for p in running_with(marker)])
        # the run's own allocation waits until the background one is made (its "free=" line),
        # and the run ends once the sweep's watch has read both ("seen")
        script = ("'%s' alloc:2048 info %s >bg{b} & "
                  "i=0; until grep -q free= bg{b} 2>/dev/null || [ $i -ge 1200 ]; do sleep 0.05; i=$((i + 1)); done; "
                  "'%s' alloc:{b}00 seen sleep:600; exit 0") % (self.workload, marker, self.workload)
        p = self.sweep("-p", "b=1,2,3", "-i", "50", "--process-interval", "50", "--json", "--",
                       "sh", "-c", script)
        doc = json.loads(p.stdout)
        # each run: the background 2048 MiB and b x 100 MiB, two contexts of 300 MiB
        self.assertEqual([r["device"]["peak_bytes"] for r in doc["runs"]],
                         [(2048 + 100 * b + 600) * MIB for b in (1, 2, 3)])
        for r in doc["runs"]:
            self.assertEqual(r["left_running"], 1, r)
            self.assertIn("gm_workload (pid ", r["left"])
        self.assertEqual(p.stderr.count("left 1 process running in its group (gm_workload"), 3,
                         p.stderr)
        self.assertEqual(running_with(marker), [], "nothing outlives the sweep")

    def test_sighup_ends_the_run_and_keeps_the_record(self):
        os.mkdir(self.path("t"))
        self.env["TMPDIR"] = self.path("t")
        out = self.path("sweep.json")
        marker = "sleep:3%04d" % (os.getpid() % 10000)
        self.addCleanup(lambda: [os.kill(p, signal.SIGKILL) for p in running_with(marker)])
        p = subprocess.Popen([GPUMEM, "sweep", "--param", "n=1,2", "--output", out, "--",
                              self.workload, "alloc:{n}", marker],
                             env=self.env, cwd=self.tmp, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        # the run's process, not the sweep's own command line (which holds the marker too):
        # a signal before the sweep's handlers are in place would kill it
        wait_running(marker, p)
        p.send_signal(signal.SIGHUP)
        _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 128 + signal.SIGHUP, err)
        with open(out) as f:
            doc = json.load(f)
        self.assertEqual(doc["boundary"]["end"], "interrupted")
        self.assertEqual(running_with(marker), [], "the run was ended")
        self.assertEqual(os.listdir(self.path("t")), [], "the runs' folder is removed")

    def test_logs_are_never_written_through_a_link_or_over_a_file(self):
        logs = self.path("L")
        victim = self.path("v")
        os.mkdir(logs)
        with open(victim, "w") as f:
            f.write("PRECIOUS\n")
        os.symlink(victim, os.path.join(logs, "run-2.log"))
        os.symlink(self.path("nx"), os.path.join(logs, "run-1.log"))
        p = self.sweep("--no-bisect", "-p", "b=1,2", "--logs", logs, "--", "sh", "-c",
                       "echo run {b}", check=False)
        self.assertEqual(p.returncode, 73, p.stderr)
        self.assertIn("holds an earlier sweep's files", p.stderr)
        # a link that appears during the sweep (made here by the first run itself)
        logs2 = self.path("L2")
        p = self.sweep("--no-bisect", "-p", "b=1,2", "--logs", logs2, "--", "sh", "-c",
                       "[ {b} = 1 ] && ln -s '%s' '%s/run-2.log'; echo run {b}" % (victim, logs2),
                       check=False)
        self.assertEqual(p.returncode, 73, p.stderr)
        self.assertIn("run-2.log' exists: refusing to write a run's output over it", p.stderr)
        with open(victim) as f:
            self.assertEqual(f.read(), "PRECIOUS\n")
        self.assertFalse(os.path.exists(self.path("nx")))

    def test_terminal_escapes_of_a_run_are_escaped(self):
        p = self.sweep("--no-bisect", "-p", "b=1,2", "--", "sh", "-c",
                       "printf '\\033]0;PWNED\\007 failed {b}\\n'; exit 1")
        for text in (p.stdout, p.stderr):
            self.assertNotIn("\x1b", text)
            self.assertNotIn("\x07", text)
        self.assertIn("\\x1b]0;PWNED\\x07 failed 1", p.stdout)

    def test_output_that_cannot_be_written(self):
        """The output cannot be written (a file-size limit, as a full disk): exit 74 naming the
        file and the reason, and no temporary file left beside it."""
        out = self.path("sweep.json")

        def limit():
            resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))

        p = subprocess.run([GPUMEM, "sweep", "--param", "n=1,2", "--output", out, "--",
                            self.workload, "alloc:{n}"], env=self.env, cwd=self.tmp,
                           capture_output=True, text=True, preexec_fn=limit)
        self.assertEqual(p.returncode, 74, p.stderr)
        self.assertIn("writing '%s' failed: File too large (EFBIG)" % out, p.stderr)
        self.assertEqual(sorted(os.listdir(self.tmp)), ["fake.state"])

    def test_no_leftover_files(self):
        os.mkdir(self.path("t"))
        self.env["TMPDIR"] = self.path("t")
        self.sweep("--param", "mib=16,32", "--json", "--", self.workload, "alloc:{mib}")
        self.assertEqual(os.listdir(self.path("t")), [], "the runs' folder is removed")
        self.assertEqual(sorted(os.listdir(self.tmp)), ["fake.state", "t"])


if __name__ == "__main__":
    unittest.main()
