# SPDX-License-Identifier: MIT
"""The snapshots the export checks read, named on their command line (shared by
check_export.py and check_redact.py)."""
import os
import subprocess

GPUMEM = os.environ.get("GPUMEM", "gpumem")


def snapshot_files(args, tmp):
    """The files 'args' name: a file; a folder (its *.pickle and *.pkl files); "example"
    (`gpumem snapshot example` output, 3 iterations, with phases, written into 'tmp');
    --third-party-data (the real files of $GM_TESTDATA/snapshots, which tests/needs.sh sets)."""
    files = []
    for arg in args:
        if arg == "--third-party-data":
            arg = os.path.join(os.environ["GM_TESTDATA"], "snapshots")
        if arg == "example":
            files.append(os.path.join(tmp, "example.pickle"))
            subprocess.run([GPUMEM, "snapshot", "example", "-o", files[-1], "--iterations", "3",
                            "--phases"], check=True, stdout=subprocess.DEVNULL)
        elif os.path.isdir(arg):
            files += sorted(os.path.join(arg, f) for f in os.listdir(arg)
                            if f.endswith((".pickle", ".pkl")))
        else:
            files.append(arg)
    return files
