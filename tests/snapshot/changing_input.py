#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Inputs that change or block: every snapshot command reading a file that another process
truncates while it is read must stop with "the file changed while being read" and exit 74
(the read of the mapped file past its new end raised SIGBUS before); a FIFO given as a
snapshot must be refused at once, not block in open() waiting for a writer.

The truncation comes when the command has started reading: its stderr is a terminal (a
pty), where it reports progress, and the file is cut to 1 MiB at the first progress line;
and, for `info` and `peak`, to 1 MiB + 1000 bytes, inside a page: the rest of that page
then reads as zeros (no SIGBUS), which must be reported as the change too, never as the
"unknown opcode 0x00" the reader meets there.
A run that had read the whole file by the time the cut came (exit 0: a busy machine) is tried
again, up to 6 times. `diff` reads its two files at once and reports no progress: there the
cut comes once diff holds the file open (seen in /proc/PID/fd), a few milliseconds later on
each try, and a run that finished first, or was cut before it opened, is tried again.

usage: changing_input.py GPUMEM      ($GM_SYNTH: ../shared/tools/synth-snapshot, set by tests/needs.sh)
"""
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import time

GPUMEM = os.path.abspath(sys.argv[1])
SYNTH = os.environ["GM_SYNTH"]
MESSAGE = b"the file changed while being read"
fails = 0


def fail(msg):
    global fails
    fails += 1
    print("FAIL " + msg)


def run_cut_at_progress(args, victim, tmp, cut_to=1 << 20):
    """Run gpumem with stderr on a pty; truncate 'victim' to 'cut_to' bytes at the first
    progress output."""
    master, slave = pty.openpty()
    out = open(os.path.join(tmp, "out"), "wb")
    p = subprocess.Popen([GPUMEM, "snapshot", *args], stdout=out, stderr=slave,
                         stdin=subprocess.DEVNULL)
    os.close(slave)
    err = b""
    cut = False
    deadline = time.time() + 120
    while time.time() < deadline:
        r, _, _ = select.select([master], [], [], 0.5)
        if r:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                break
            err += chunk
            if not cut and b"reading" in err:
                os.truncate(victim, cut_to)
                cut = True
        elif p.poll() is not None:
            break
    rc = p.wait(timeout=120)
    os.close(master)
    out.close()
    return rc, err, cut


def wait_open(p, path, limit=30.0):
    """Wait until process 'p' has 'path' open (Linux: /proc/PID/fd) or has ended; where /proc
    cannot tell, wait 20 ms as a guess."""
    fds = "/proc/%d/fd" % p.pid
    if not os.path.isdir(fds):
        time.sleep(0.02)
        return
    target = os.path.realpath(path)
    deadline = time.time() + limit
    while time.time() < deadline and p.poll() is None:
        try:
            for fd in os.listdir(fds):
                if os.readlink(os.path.join(fds, fd)) == target:
                    return
        except OSError:
            pass
        time.sleep(0.0005)


def main():
    tmp = tempfile.mkdtemp(prefix="gpumem-changing-")
    try:
        big = os.path.join(tmp, "big.pickle")
        subprocess.run([SYNTH, "-o", big, "--target-size", "64M", "--seed", "3", "--quiet"],
                       check=True)
        victim = os.path.join(tmp, "victim.pickle")
        commands = [["info"], ["stats"], ["peak"], ["trace"], ["trace", "--json"], ["categories"],
                    ["leaks"], ["oom"], ["replay"], ["plot", "--width", "80"],
                    ["report", "-o", os.path.join(tmp, "r.html"), "--force"]]
        cases = [(cmd, 1 << 20) for cmd in commands] + [(["info"], (1 << 20) + 1000),
                                                         (["peak"], (1 << 20) + 1000)]
        for cmd, cut_to in cases:
            args = cmd[:1] + [victim] + cmd[1:]
            for attempt in range(6):
                shutil.copyfile(big, victim)
                rc, err, cut = run_cut_at_progress(args, victim, tmp, cut_to)
                # exit 0: the command had read the whole file when the cut came (a busy
                # machine let it run on before this process saw its progress): again
                if cut and rc == 0 and attempt < 5:
                    continue
                if not cut:
                    fail("%s: no progress line came, so nothing was cut (exit %d)" % (cmd[0], rc))
                elif rc != 74 or MESSAGE not in err:
                    fail("%s: exit %d after the file was cut to %d bytes, expected 74 and '%s'; "
                         "stderr: %r" % (" ".join(cmd), rc, cut_to, MESSAGE.decode(), err[-300:]))
                break
        # diff: two files at once, no progress: cut a moment after diff has the file open
        # (seen in /proc/PID/fd: a sanitizer build takes 100 ms and more to start, so a fixed
        # delay from the start cut before the open), try again when the cut still came before
        # the open (a short file: exit 65) or after the read (exit 0)
        hit = False
        for attempt in range(8):
            shutil.copyfile(big, victim)
            p = subprocess.Popen([GPUMEM, "snapshot", "diff", victim, big],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            wait_open(p, victim)
            time.sleep(0.002 * attempt)
            os.truncate(victim, 1 << 20)
            _, err = p.communicate(timeout=120)
            if p.returncode in (0, 65):
                continue
            if p.returncode != 74 or MESSAGE not in err:
                fail("diff: exit %d after the file was cut, expected 74 and '%s'; stderr: %r"
                     % (p.returncode, MESSAGE.decode(), err[-300:]))
            hit = True
            break
        if not hit and not fails:
            fail("diff: in 8 tries the cut never came while the file was read")
        # a FIFO: refused at once (a blocking open would wait for a writer forever)
        fifo = os.path.join(tmp, "pipe")
        os.mkfifo(fifo)
        for cmd in (["info"], ["peak"], ["diff", big]):
            try:
                p = subprocess.run([GPUMEM, "snapshot", cmd[0], fifo] + cmd[1:],
                                   capture_output=True, timeout=20)
            except subprocess.TimeoutExpired:
                fail("%s FIFO: still waiting after 20 s" % cmd[0])
                continue
            if p.returncode != 74 or b"FIFO" not in p.stderr:
                fail("%s FIFO: exit %d, expected 74 naming the FIFO; stderr: %r"
                     % (cmd[0], p.returncode, p.stderr[-300:]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d failures" % fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
