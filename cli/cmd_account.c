/* SPDX-License-Identifier: MIT */
/* cmd_account.c - gpumem account -- COMMAND: run a command with the interposer
 * libgpumem-account.so preloaded into it and its children, then show where every byte of
 * device memory went, per process and device, at the peak and at the end:
 *   device used (NVML) = context + modules + graphs + PyTorch reserved + NCCL + cuBLAS + ...
 *                        + rounding + not seen by the driver API
 * The report goes to stderr (the command's stdout stays its own), --json prints the summary
 * on stdout, --output keeps the merged timeline.  gpumem account --input FILE... reads files
 * of an earlier run instead.  gpumem exits with the command's status. */
#include "account_cli.h"
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include "gpumem/account.h"
#include "gpumem/device.h"
#include "gpumem/watch.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int read_inputs(const char *cmd, const struct opt_list *inputs, bool json, bool stacks)
{
    struct gm_account *a = NULL;
    struct gm_error err;
    int rc = 0;
    if (gm_account_new(&a, &err) != GM_OK)
        return cli_fail(cmd, &err);
    for (int i = 0; i < inputs->n && rc == 0; i++)
        if (gm_account_add_file(a, inputs->items[i], &err) != GM_OK)
            rc = cli_fail(cmd, &err);
    if (rc == 0 && json)
        rc = gm_account_json(stdout, a, &err) == GM_OK ? 0 : cli_fail(cmd, &err);
    else if (rc == 0)
        account_report(stdout, a, stacks);
    gm_account_free(a);
    return rc;
}

/* The command's status as a shell shows it. */
static int run(const char *cmd, char **command, struct account_cli *ac, bool json)
{
    struct gm_watch_command wc = {command, ac->env, NULL, json, false};
    struct gm_error err;
    pid_t pid = 0, got;
    int exec_errno = 0, wst = 0;
    bool killed = false;
    /* the first SIGINT/SIGTERM sent by another process is passed on to the command; a second
     * one kills it */
    cli_child_signals_install();
    if (gm_watch_spawn(&wc, &pid, &exec_errno, &err) != GM_OK)
        return cli_fail(cmd, &err);
    if (exec_errno) {
        cli_errorf(cmd, "cannot run '%s': %s", command[0], strerror(exec_errno));
        return exec_errno == ENOENT ? 127 : 126;
    }
    cli_child.child = pid;
    while ((got = waitpid(pid, &wst, WNOHANG)) != pid) {
        if (got < 0 && errno != EINTR) {
            cli_errorf(cmd, "waiting for '%s' failed: %s", command[0], strerror(errno));
            return GM_EXIT_SOFTWARE;
        }
        if (cli_child.kill && !killed) {
            kill(pid, SIGKILL);
            killed = true;
        }
        gm_watch_sleep_ms(20);
    }
    cli_child.child = 0;
    if (WIFSIGNALED(wst)) {
        cli_errorf(cmd, "'%s' was killed by %s%s", command[0],
                   gm_signal_name(WTERMSIG(wst)) ? gm_signal_name(WTERMSIG(wst)) : "a signal",
                   WTERMSIG(wst) == SIGKILL
                       ? " (the OOM killer?): its figures are those of its last samples"
                       : "");
        return 128 + WTERMSIG(wst);
    }
    return WIFEXITED(wst) ? WEXITSTATUS(wst) : GM_EXIT_SOFTWARE;
}

int cmd_account(int argc, char **argv)
{
    const char *cmd = argv[0], *output = NULL, *dir = NULL;
    uint64_t interval = 100, stacks = 8;
    bool json = false, force = false, keep = false;
    struct opt_list inputs = {{NULL}, 0};
    int n_pos = 0, status, rc;
    struct account_cli ac;
    struct gm_account *a = NULL;
    struct gm_devices *devs = NULL;
    struct gm_error err;
    char **command;
    const struct opt opts[] = {
        OPT_STRING("output", 'o', &output, "FILE",
                   "keep the merged timeline of every process (JSON lines, gpumem.account/1)"),
        OPT_FLAG("force", 'f', &force, "replace --output if it exists"),
        OPT_STRING("dir", 0, &dir, "DIR",
                   "the folder each process writes its file into (default: a temporary one, "
                   "removed at the end)"),
        OPT_FLAG("keep", 0, &keep, "keep the temporary folder of files and say where"),
        OPT_U64("interval", 'i', &interval, "MS",
                "sample each process's device memory every MS milliseconds (100; 0: only at "
                "the end)",
                NULL),
        OPT_U64("stacks", 0, &stacks, "N",
                "keep the native stack of the N largest allocations of each process (8, at "
                "most 32)",
                NULL),
        OPT_LIST("input", 0, &inputs, "FILE",
                 "read account files (or a folder of them) of an earlier run instead of running "
                 "a command; repeatable"),
        OPT_JSON(&json, "gpumem.account.summary/1"),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem account [OPTIONS] -- COMMAND [ARGS...]\n"
        "       gpumem account [OPTIONS] --input FILE|DIR...",
        "Run COMMAND with gpumem's interposer (libgpumem-account.so) preloaded into it and "
        "every child it starts, and show where the GPU memory of each process went: the CUDA "
        "driver API's allocations credited to the library that asked for them (PyTorch's "
        "caching allocator, NCCL, cuBLAS, cuDNN, Triton, ...), contexts, modules and graphs "
        "measured around their creation, the driver's page rounding, and what no hooked call "
        "explains, against NVML's used memory of the process, at its peak and at its end. "
        "Every term says where its figure comes from (docs/account.md). The report goes to "
        "stderr; gpumem exits with the command's status. Needs the NVIDIA driver.",
        "gpumem account -- python train.py\n"
        "gpumem account --output run.account.jsonl -- torchrun --nproc-per-node 8 train.py\n"
        "gpumem account --input run.account.jsonl --json"};

    if ((rc = opts_parse_cmd(argc, argv, opts, &usage, true, &n_pos)) >= 0)
        return rc;
    if (inputs.n && n_pos)
        return cli_usage(cmd, "give either --input or a command, not both");
    if (!inputs.n && !n_pos)
        return cli_usage(cmd, "nothing to account for: give -- COMMAND or --input FILE");
    if (interval > 3600000 || stacks > 32)
        return cli_usage(cmd, "--interval: 0 to 3600000 ms; --stacks: 0 to 32");
    if (inputs.n)
        return read_inputs(cmd, &inputs, json, stacks > 0);
    if (output && (rc = cli_output_check(cmd, output, force)) != 0)
        return rc;
    /* a command that needs a GPU: say so before it runs when there is none (exit 2) */
    if (gm_devices_open(&devs, getenv, &err) != GM_OK)
        return cli_fail(cmd, &err);
    if (gm_devices_check(devs, &err) != GM_OK) {
        gm_devices_close(devs);
        return cli_fail(cmd, &err);
    }
    gm_devices_close(devs);

    if ((rc = account_cli_begin(cmd, &ac, dir, keep, interval, stacks)) != 0) {
        account_cli_end(cmd, &ac);
        return rc;
    }
    if (!(command = calloc((size_t)n_pos + 1, sizeof(*command)))) {
        account_cli_end(cmd, &ac);
        return GM_EXIT_SOFTWARE;
    }
    for (int k = 0; k < n_pos; k++)
        command[k] = argv[1 + k];
    status = run(cmd, command, &ac, json);
    free(command);
    rc = account_cli_read(cmd, &ac, &a);
    if (rc == 0 && json) {
        if (gm_account_json(stdout, a, &err) != GM_OK)
            rc = cli_fail(cmd, &err);
    } else if (rc == 0) {
        account_report(stderr, a, stacks > 0);
    }
    if (rc == 0 && output)
        rc = account_cli_merge(cmd, &ac, output, force);
    gm_account_free(a);
    account_cli_end(cmd, &ac);
    /* the command's status wins; ours only when the command succeeded */
    return status != 0 || rc == GM_EXIT_FAILURE ? status : rc;
}
