/* SPDX-License-Identifier: MIT */
/* main.c - the command table of the gpumem CLI. */
#include "cli.h"
#include "commands.h"

#include <signal.h>
#include <string.h>

static const struct cli_command commands[] = {
    {"estimate", cmd_estimate, "predict peak GPU memory of a training or inference job"},
    {"calibrate", cmd_calibrate,
     "hold an estimate against a snapshot of the job: fit it, predict other sizes"},
    {"snapshot", cmd_snapshot,
     "read PyTorch CUDA memory snapshots: peak, categories, leaks, OOM, report, replay"},
    {"environment", cmd_environment, "driver, GPUs, memory, processes, host and memory settings"},
    {"watch", cmd_watch, "run a command and follow its GPU memory (peaks, chart, samples)"},
    {"account", cmd_account,
     "run a command and show where every byte of its device memory went (driver level)"},
    {"measure", cmd_measure,
     "run a dense network on the GPU phase by phase: allocated, reserved, device"},
    {"sweep", cmd_sweep, "run a command per value of one parameter: the fit/OOM boundary"},
    {"sheet", cmd_sheet, "the one-page record from estimate, measure, sweep, environment JSON"},
    {"version", cmd_version, "print the version and compiled-in features"},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    int rc;
    /* A file-size limit (ulimit -f) makes a write fail with EFBIG, reported as any write
     * error ("File too large", exit 74, the temporary file removed), instead of SIGXFSZ
     * killing gpumem half-way through a file.  (The commands gpumem runs get it back.) */
    signal(SIGXFSZ, SIG_IGN);
    cli_stdout_begin();
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        /* "gpumem --version [--json]" is "gpumem version [--json]" */
        static char name[] = "gpumem version";
        argv[1] = name;
        rc = cmd_version(argc - 1, argv + 1);
    } else {
        rc = cli_dispatch(commands, "gpumem", argc, argv);
    }
    /* every command's stdout is checked here, once: a full disk is exit 74 with ENOSPC */
    return cli_stdout_end(NULL, rc);
}
