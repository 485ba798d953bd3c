#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""run_examples.py --build DIR [--third-party-data] [--update] FILE.md...: run the code blocks of
the documentation against a build, so that every command in README.md and docs/*.md runs as
written and shows the output it really gives (ctest docs/examples).

The convention, for whoever writes a block:

  ```console   a terminal session: lines starting with "$ " are commands (a line ending in
               "\\" continues on the next), the lines up to the next command are the output
               the command prints (stdout and stderr, as a terminal shows them), compared
               exactly after trailing blank lines are dropped.  An output line "..." alone
               stands for any number of lines.  A command without output lines is only run.
  ```sh        a script: run with bash -e; it must succeed, its output is not compared.
  ```python    ">>>" examples are checked as Python's doctest does (ELLIPSIS and
               NORMALIZE_WHITESPACE on); a block without ">>>" is run as a script and must
               not raise.  The Python blocks of one file share their names, in order.
  other/none   not run (output listings, synopses, JSON, C).  An untagged block with "$ "
               lines is an error: tag it console.

A block that cannot run here says so in an HTML comment, the last non-blank line above it:
  <!-- doctest: skip (needs a GPU) -->            never run; the reason is reported
  <!-- doctest: needs third-party-data -->        run only with --third-party-data: the real
                                                  snapshots and configs of
                                                  scripts/testdata.manifest are in the
                                                  working folder (ctest
                                                  docs/examples/third-party-data)

The blocks of one file run in order in one fresh working folder holding links to docs/ and
tests/ of the source tree (so `docs/examples/...` resolves as in a checkout) and build/ (DIR); `gpumem` is DIR/gpumem first on PATH, `import gpumem` imports
DIR/python.  Files a block needs are made by earlier blocks (`gpumem snapshot example`) or
shipped under docs/examples/ (made by the project, never third-party files).

--update rewrites the expected output of console blocks that differ from what runs (never of
a block that uses "..."), for review with git diff (`make golden` runs it).
Exit 0 when no block failed, 1 otherwise, 64 usage.
"""
import argparse
import doctest
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback

FENCE = re.compile(r"^(\s*)```\s*([A-Za-z0-9_+-]*)\s*$")
MARK = re.compile(r"^<!--\s*doctest:\s*(skip|needs)\s*(.*?)\s*-->\s*$")
END = "@@gpumem-doctest-end@@"  # the line after each command's output, with its exit status


class Block:
    def __init__(self, path, line, lang, lines, indent, end):
        self.path, self.line, self.lang, self.lines, self.indent = path, line, lang, lines, indent
        self.end = end  # index of the closing fence
        self.skip = self.needs = None

    def where(self):
        return "%s:%d" % (self.path, self.line)


def blocks_of(path, text):
    lines = text.split("\n")
    out = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not re.match(r"^\s*```\s*$", lines[j]):
            j += 1
        indent = len(m.group(1))
        body = [l[indent:] if l[:indent].strip() == "" else l for l in lines[i + 1:j]]
        b = Block(path, i + 1, m.group(2), body, indent, j)
        k = i - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        mark = MARK.match(lines[k].strip()) if k >= 0 else None
        if mark and mark.group(1) == "skip":
            b.skip = mark.group(2).strip("() ") or "marked skip"
        elif mark:
            b.needs = mark.group(2)
        out.append(b)
        i = j + 1
    return out


def commands_of(block):
    """[(command, [expected output lines], index of the first output line)] of a console block."""
    cmds = []
    lines = block.lines
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            if lines[i].strip():
                raise ValueError("%s: line %d is output before any command"
                                 % (block.where(), block.line + 1 + i))
            i += 1
            continue
        cmd = lines[i][2:]
        while cmd.endswith("\\") and i + 1 < len(lines):
            i += 1
            nxt = lines[i]
            cmd += "\n" + (nxt[2:] if nxt.startswith("> ") else nxt)
        i += 1
        start = i
        while i < len(lines) and not lines[i].startswith("$ "):
            i += 1
        cmds.append((cmd, lines[start:i], start))
    return cmds


def trim(lines):
    lines = list(lines)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def matches(want, got):
    """Exact line match, where a line "..." alone matches any number of lines."""
    if not want:
        return not got
    if want[0].strip() == "...":
        return any(matches(want[1:], got[k:]) for k in range(len(got) + 1))
    return bool(got) and want[0] == got[0] and matches(want[1:], got[1:])


class Runner:
    def __init__(self, args):
        self.args = args
        self.build = os.path.abspath(args.build)
        self.source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.failed = []
        self.skipped = []
        self.ran = 0
        self.updates = {}
        self.env = dict(os.environ)
        self.env["PATH"] = self.build + os.pathsep + self.env.get("PATH", "")
        self.env["PYTHONPATH"] = os.path.join(self.build, "python")
        self.env["NO_COLOR"] = "1"
        self.env.pop("GPUMEM_CUDA_LIBRARY", None)
        self.env.pop("GPUMEM_NVML_LIBRARY", None)

    def fail(self, block, msg):
        self.failed.append(block.where())
        print("FAIL %s\n%s" % (block.where(), msg))

    def workdir(self):
        d = tempfile.mkdtemp(prefix="gpumem-doctest-")
        for name in ("docs", "tests"):
            os.symlink(os.path.join(self.source, name), os.path.join(d, name))
        os.symlink(self.build, os.path.join(d, "build"))
        if self.args.third_party_data:
            data = os.environ["GM_TESTDATA"]
            for kind in ("snapshots", "configs"):
                for name in sorted(os.listdir(os.path.join(data, kind))):
                    if not os.path.exists(os.path.join(d, name)):
                        os.symlink(os.path.join(data, kind, name), os.path.join(d, name))
        return d

    def run_file(self, path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        rel = os.path.relpath(path, self.source)
        work = self.workdir()
        globs = {"__name__": "__doc__"}
        old_cwd = os.getcwd()
        try:
            os.chdir(work)
            for b in blocks_of(rel, text):
                self.run_block(b, work, globs)
        finally:
            os.chdir(old_cwd)
            shutil.rmtree(work, ignore_errors=True)

    def run_block(self, b, work, globs):
        lang = b.lang
        runnable = lang in ("console", "sh", "python")
        if not runnable:
            if lang == "" and any(l.startswith("$ ") for l in b.lines):
                self.fail(b, "  an untagged block with \"$ \" commands: tag it ```console")
            return
        if b.skip:
            self.skipped.append((b.where(), b.skip))
            return
        if b.needs:
            if b.needs != "third-party-data":
                self.fail(b, "  unknown need %r (third-party-data is the one there is)" % b.needs)
                return
            if not self.args.third_party_data:
                self.skipped.append((b.where(), "needs third-party-data"))
                return
        self.ran += 1
        try:
            getattr(self, "run_" + lang)(b, work, globs)
        except ValueError as e:
            self.fail(b, "  " + str(e))

    def shell(self, cmd, work):
        p = subprocess.run(["bash", "-c", cmd], cwd=work, env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=120)
        return p.returncode, p.stdout.decode("utf-8", "replace")

    def run_console(self, b, work, globs):
        """The commands of a block run in one shell, as typed in one terminal ($?, cd and
        variables carry over); a marker line after each one carries its exit status."""
        cmds = commands_of(b)
        script = []
        for cmd, _, _ in cmds:
            script += [cmd, '__gm=$?; printf "\\n' + END + ' %d\\n" "$__gm"; (exit $__gm)']
        _, out = self.shell("\n".join(script), work)
        parts = re.split(r"^%s (\d+)$" % re.escape(END), out, flags=re.M)
        for i, (cmd, want, first) in enumerate(cmds):
            if 2 * i + 1 >= len(parts):
                self.fail(b, "  $ %s\n  did not run (the shell ended before it)" % cmd)
                return
            text = parts[2 * i][1:] if i and parts[2 * i].startswith("\n") else parts[2 * i]
            got = trim(text.split("\n"))
            rc = int(parts[2 * i + 1])
            want_t = trim(want)
            if not want_t:
                if rc != 0:
                    self.fail(b, "  $ %s\n  exit %d:\n%s" % (cmd, rc, indent(got)))
                continue
            if matches(want_t, got):
                continue
            if self.args.update and not any(l.strip() == "..." for l in want_t):
                self.updates.setdefault(b.path, []).append((b, first, len(want_t), got))
                print("updated %s ($ %s)" % (b.where(), cmd.split("\n")[0]))
                continue
            diff = "\n".join(difflines(want_t, got))
            self.fail(b, "  $ %s\n  output differs (exit %d):\n%s" % (cmd, rc, diff))

    def run_sh(self, b, work, globs):
        rc, out = self.shell("set -e\n" + "\n".join(b.lines), work)
        if rc != 0:
            self.fail(b, "  exit %d:\n%s" % (rc, indent(trim(out.split("\n"))[-20:])))

    def run_python(self, b, work, globs):
        sys.path.insert(0, os.path.join(self.build, "python"))
        source = "\n".join(b.lines) + "\n"
        saved = dict(os.environ)
        os.environ.update(self.env)
        try:
            if ">>>" in source:
                test = doctest.DocTestParser().get_doctest(source, globs, b.where(), b.path, b.line)
                out = io.StringIO()
                runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
                runner.run(test, out=out.write, clear_globs=False)
                globs.update(test.globs)  # DocTest runs on a copy: later blocks see the names
                if runner.failures:
                    self.fail(b, out.getvalue())
            else:
                try:
                    exec(compile(source, b.where(), "exec"), globs)
                except BaseException:  # a doc example must not raise (SystemExit included)
                    self.fail(b, traceback.format_exc())
        finally:
            os.environ.clear()
            os.environ.update(saved)
            sys.path.remove(os.path.join(self.build, "python"))

    def write_updates(self):
        for rel, items in self.updates.items():
            path = os.path.join(self.source, rel)
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")
            # from the end, so that earlier line numbers stay valid
            for b, first, n, got in sorted(items, key=lambda t: (t[0].line, t[1]), reverse=True):
                at = b.line + first  # the first expected line (b.line is the fence, 1-based)
                pad = " " * b.indent
                lines[at:at + n] = [pad + l if l else l for l in got]
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(lines))


def indent(lines):
    return "\n".join("    " + l for l in lines)


def difflines(want, got):
    import difflib
    return ["    " + l for l in difflib.unified_diff(want, got, "documented", "actual", lineterm="", n=2)]


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("\n")[0])
    ap.add_argument("--build", required=True)
    ap.add_argument("--third-party-data", action="store_true")
    ap.add_argument("--update", action="store_true")
    ap.add_argument("files", nargs="+")
    try:
        args = ap.parse_args()
    except SystemExit as e:
        return 64 if e.code else 0
    r = Runner(args)
    for f in args.files:
        r.run_file(os.path.abspath(f))
    if args.update:
        r.write_updates()
    reasons = {}
    for where, why in r.skipped:
        reasons.setdefault(why, []).append(where)
    print("%d blocks run, %d skipped, %d failed" % (r.ran, len(r.skipped), len(r.failed)))
    for why, wheres in sorted(reasons.items()):
        print("  skipped (%s): %s" % (why, " ".join(wheres)))
    return 1 if r.failed else 0


if __name__ == "__main__":
    sys.exit(main())
