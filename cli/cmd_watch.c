/* SPDX-License-Identifier: MIT */
/* cmd_watch.c - gpumem watch: run a command (or attach to a PID) and follow the GPU memory
 * of it and its children (NVML per-process usedGpuMemory) and of each device (NVML used),
 * then report peaks with their times and a terminal chart.  The report goes to stderr, as
 * time(1) does, so the command's own stdout stays clean.  gpumem exits with the command's
 * status (128 + signal when it was killed). */
#include "account_cli.h"
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "watch_metrics.h"
#include "watch_render.h"

#include "gpumem/arena.h"
#include "gpumem/device.h"
#include "gpumem/units.h"
#include "gpumem/watch.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Signals (cli_child): the handler only sets flags and forwards signals sent by another
 * process.  After the second signal the main loop kills the command's whole tree: not the
 * handler, since the tree must be listed while the command still holds it together (its
 * children are reparented the moment it dies). */
/* --json: standard output failed (its reader went away): the watch stops as on an
 * interrupt, the command is interrupted, the samples still go to --output, exit 74. */
static bool g_out_failed;

/* The second interrupt: SIGKILL to the command and its whole tree, and to the process group
 * it leads if it made one.  Every process is stopped first, so that none forks a child
 * between the listing and the kill, then the tree is listed again and killed. */
static void kill_tree(pid_t root)
{
    size_t n = 0;
    uint32_t *t = NULL;
    for (int pass = 0; pass < 2; pass++) {
        if (gm_proc_tree_list((uint32_t)root, &t, &n, NULL) == GM_OK)
            for (size_t k = 0; k < n; k++)
                kill((pid_t)t[k], SIGSTOP);
        gm_free(t);
    }
    if (gm_proc_tree_list((uint32_t)root, &t, &n, NULL) == GM_OK)
        for (size_t k = 0; k < n; k++)
            kill((pid_t)t[k], SIGKILL);
    gm_free(t);
    if (getpgid(root) == root)
        killpg(root, SIGKILL);
}

struct watch_state {
    struct gm_devices *d;
    struct gm_watch w;
    uint32_t root; /* the child or the attached PID */
    bool attached;
};

/* --json: every sample as a JSON line on stdout as it is taken. */
static void stream_sample(const struct gm_watch *w, const struct gm_watch_sample *smp, void *arg)
{
    (void)arg;
    if (!g_out_failed && gm_watch_jsonl_sample(stdout, w, smp, NULL) != GM_OK) {
        g_out_failed = true;
        cli_child.stop = 1;
    }
}

/* A wait status as a shell shows it, and the signal that ended the process (0 none). */
static int shell_status(int wst, int *sig)
{
    *sig = WIFSIGNALED(wst) ? WTERMSIG(wst) : 0;
    return WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
}

int cmd_watch(int argc, char **argv)
{
    uint64_t interval = 100, proc_interval = 500, attach_pid = 0, max_samples = 4194304;
    bool force = false, has_pid = false, no_chart = false, json = false, account = false;
    struct account_cli ac;
    const char *output = NULL, *device = NULL, *written = NULL, *prometheus = NULL;
    const char *listen_addr = NULL;
    struct watch_metrics metrics;
    int n_pos = 0, only_cuda = -1, rc, status = -1, term_signal = 0;
    struct watch_state s;
    struct gm_output out;
    struct gm_error err;
    struct gm_watch_run run;
    char **command = NULL;
    struct gm_watch_clock clk;
    size_t pos;
    const struct opt opts[] = {
        OPT_U64("interval", 'i', &interval, "MS", "device memory every MS milliseconds (100)",
                NULL),
        OPT_U64("process-interval", 0, &proc_interval, "MS",
                "process list every MS milliseconds (500; NVML process queries are slow), and "
                "at once after a device-level change of 64 MiB or more",
                NULL),
        OPT_STRING("output", 'o', &output, "FILE", "write the samples to FILE (.csv or .json)"),
        OPT_FLAG("force", 'f', &force, "overwrite --output if it exists (a regular file only)"),
        OPT_STRING("prometheus", 0, &prometheus, "FILE",
                   "keep FILE the latest metrics in Prometheus text format (DCGM exporter's "
                   "names where they overlap; for node_exporter's textfile collector)"),
        OPT_STRING("listen", 0, &listen_addr, "ADDR:PORT",
                   "serve the same metrics at http://ADDR:PORT/metrics while watching"),
        OPT_U64("pid", 'p', &attach_pid, "PID", "attach to a running process instead", &has_pid),
        OPT_STRING("device", 'd', &device, "cuda:N", "watch only this CUDA device"),
        OPT_U64("max-samples", 0, &max_samples, "N",
                "keep at most N samples for --output (4194304); later ones still count in the "
                "peaks, and every output says how many were left out",
                NULL),
        OPT_FLAG("no-chart", 0, &no_chart, "no terminal chart in the report"),
        OPT_FLAG("json", 0, &json,
                 "JSON Lines on stdout as samples are taken (schema gpumem.watch.stream/1); "
                 "the command's stdout goes to stderr"),
        OPT_FLAG("account", 0, &account,
                 "also run the command under gpumem account's interposer and add where each "
                 "process's device memory went to the report (see gpumem account), and "
                 "each term of its equation to --prometheus and --listen"),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem watch [OPTIONS] -- COMMAND [ARGS...]\n       gpumem watch [OPTIONS] --pid PID",
        "Run COMMAND and follow the GPU memory of it and its children (NVML usedGpuMemory per "
        "process) and of each device (NVML used). While no other process uses a device, its "
        "readings count as the command's too (used minus the baseline), so a peak between two "
        "process readings is not missed; the report says which readings each peak comes from "
        "and warns when a device rose more than the command's peak explains. At the end, report "
        "the peak per device and per process with the time it happened, the processes of the "
        "command still holding GPU memory after it exited, and a chart, on stderr. gpumem exits "
        "with the command's status (128 + the signal that killed it). --output is checked "
        "before the command runs; a file of that name written meanwhile by someone else is "
        "never replaced: the samples then go beside it, and the report says where. Ctrl-C stops "
        "sampling and waits for the command; a second Ctrl-C kills the command and every "
        "process of its tree. In a container with its own PID namespace NVML reports host "
        "PIDs: new GPU processes that appear after the start are then attributed to the "
        "command, and the report says so.",
        "gpumem watch -- python train.py\n"
        "gpumem watch --interval 50 --output run.csv -- ./bench --size 8G\n"
        "gpumem watch --pid 4242 --output attach.json\n"
        "gpumem watch --json -- ./train.sh | jq -c 'select(.type == \"process\")'"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, true, &n_pos);
    if (prc >= 0)
        return prc;
    if (has_pid == (n_pos > 0))
        return cli_usage(argv[0], has_pid ? "give either --pid or a command, not both"
                                          : "nothing to watch: give -- COMMAND or --pid PID");
    if (interval < 10 || interval > 3600000 || proc_interval < 10 || proc_interval > 3600000)
        return cli_usage(argv[0], "intervals must be between 10 ms and 1 hour");
    if (max_samples < 1 || max_samples > ((uint64_t)1 << 32))
        return cli_usage(argv[0], "--max-samples: choose 1 to 4294967296");
    if (has_pid &&
        (attach_pid == 0 || attach_pid > INT32_MAX || !gm_proc_exists((uint32_t)attach_pid)))
        return cli_usage(argv[0], "no process with PID %" PRIu64, attach_pid);
    if (has_pid && !gm_proc_running((uint32_t)attach_pid))
        return cli_usage(argv[0],
                         "process %" PRIu64 " has exited (a zombie its parent has not reaped)",
                         attach_pid);
    if (device && gm_device_parse_spec(device, &only_cuda, &err))
        return cli_usage(argv[0], "%s", err.msg);
    if (output && !watch_output_kind(output))
        return cli_usage(argv[0], "--output must end in .csv or .json");
    if (account && has_pid)
        return cli_usage(argv[0], "--account needs a command to run, not --pid");
    if (n_pos) {
        command = calloc((size_t)n_pos + 1, sizeof(*command));
        if (!command)
            return GM_EXIT_SOFTWARE;
        for (int k = 0; k < n_pos; k++)
            command[k] = argv[1 + k];
    }

    memset(&s, 0, sizeof(s));
    memset(&ac, 0, sizeof(ac));
    watch_metrics_init(&metrics, prometheus);
    if (listen_addr && (rc = watch_metrics_listen(&metrics, argv[0], listen_addr)) != 0)
        goto out_free;
    gm_watch_init(&s.w, (size_t)max_samples);
    s.w.attached = has_pid;
    rc = 0;
    if (gm_devices_open(&s.d, getenv, &err)) {
        rc = cli_fail(argv[0], &err);
        goto out_free;
    }
    if (gm_devices_check(s.d, &err) ||
        (only_cuda >= 0 && gm_devices_find_cuda(s.d, only_cuda, &pos, &err))) {
        rc = cli_fail(argv[0], &err);
        goto out_close;
    }
    if (gm_watch_setup(&s.w, s.d, only_cuda, &err)) {
        /* Without NVML there is nothing to watch: that is "no GPU" too (exit 2). */
        rc = cli_fail(argv[0], &err);
        if (err.code == GM_ERR_UNSUPPORTED)
            rc = GM_EXIT_NODEV;
        goto out_close;
    }
    if (s.w.n_dev == 0) {
        cli_errorf(argv[0], "no device to watch");
        rc = GM_EXIT_NODEV;
        goto out_close;
    }
    /* Open the output first: a refusal to overwrite must come before the command runs, and
     * a file that appears meanwhile must not cost the samples (they go beside it). */
    if (output) {
        rc = cli_output_open(&out, argv[0], output, force);
        if (rc)
            goto out_close;
        out.beside = true;
    }

    cli_child_signals_install();
    /* a reader of --json that goes away is a write error, seen by stream_sample(), not a
     * death that would leave the command running unobserved and no samples written */
    signal(SIGPIPE, SIG_IGN);
    gm_watch_clock_start(&clk, interval, proc_interval);
    if (account && (rc = account_cli_begin(argv[0], &ac, NULL, false, interval, 8)) != 0) {
        if (output)
            cli_output_abort(&out);
        goto out_close;
    }
    if (account)
        metrics.account_dir = ac.dir; /* the equations so far join the metrics */
    if (command) {
        /* with --json, stdout carries only gpumem's JSON lines */
        struct gm_watch_command wc = {command, NULL, NULL, json, false};
        char **env;
        pid_t pid = 0;
        int exec_errno = 0;
        /* the command's gpumem.torch phases join the metrics */
        if ((rc = watch_metrics_series_begin(&metrics, argv[0], account ? ac.env : environ,
                                             &env)) != 0) {
            if (output)
                cli_output_abort(&out);
            goto out_close;
        }
        wc.envp = env;
        if (gm_watch_spawn(&wc, &pid, &exec_errno, &err) != GM_OK || exec_errno) {
            if (exec_errno) {
                cli_errorf(argv[0], "cannot run '%s': %s", command[0], strerror(exec_errno));
                rc = exec_errno == ENOENT ? 127 : 126;
            } else {
                rc = cli_fail(argv[0], &err);
            }
            if (output)
                cli_output_abort(&out);
            goto out_close;
        }
        cli_child.child = pid;
        s.root = (uint32_t)pid;
    } else {
        s.root = (uint32_t)attach_pid;
        s.attached = true;
    }

    memset(&run, 0, sizeof(run));
    run.command = command;
    run.pid = s.root;
    run.interval_ms = interval;
    run.process_interval_ms = proc_interval;
    run.exit_status = -1;
    if (json) {
        if (gm_watch_jsonl_start(stdout, &s.w, &run, NULL) != GM_OK) {
            g_out_failed = true;
            cli_child.stop = 1;
        }
        s.w.on_sample = stream_sample;
    }

    for (;;) {
        uint64_t t = gm_watch_tick(&s.w, s.d, &clk, s.root, s.attached);
        int wst;
        if (watch_metrics_write(&metrics, argv[0], &s.w, s.d, t, false) != 0)
            metrics.path = NULL; /* said once; the watch goes on */
        watch_metrics_serve(&metrics, &s.w, s.d);
        if (command && waitpid(cli_child.child, &wst, WNOHANG) == cli_child.child) {
            status = shell_status(wst, &term_signal);
            break;
        }
        if (!command && !gm_proc_running(s.root))
            break;
        if (cli_child.stop)
            break;
        gm_watch_wait(&clk, t);
    }
    if (command && status < 0) {
        /* Interrupted: the command got the signal too; wait for it, sampling no more.  A
         * second signal kills it and its whole tree. */
        int wst = 0;
        pid_t got = 0;
        bool said = false, killed = false;
        /* no terminal sent it one: interrupted as Ctrl-C would */
        if (g_out_failed)
            kill(cli_child.child, SIGINT);
        for (uint64_t waited = 0; got == 0 || (got < 0 && errno == EINTR); waited += 50) {
            if ((cli_child.kill || (g_out_failed && waited >= 2000)) && !killed) {
                kill_tree(cli_child.child);
                killed = true;
            }
            got = waitpid(cli_child.child, &wst, WNOHANG);
            if (got == 0 && waited >= 1000 && !said) {
                cli_errorf(argv[0],
                           "stopped sampling; waiting for %s to exit (interrupt again to kill "
                           "it and its children)",
                           command[0]);
                said = true;
            }
            if (got == 0)
                gm_watch_sleep_ms(50);
        }
        if (got == cli_child.child)
            status = shell_status(wst, &term_signal);
    }
    {
        uint64_t t = gm_watch_clock_ms(&clk);
        /* The end state, and the processes of the command that outlive it. */
        if (command || !gm_proc_running(s.root)) {
            gm_watch_poll_devices(&s.w, s.d, t);
            gm_watch_poll_processes(&s.w, s.d, t, command ? 0 : s.root, s.attached);
        }
        if (t > s.w.end_t_ms)
            s.w.end_t_ms = t;
        if (watch_metrics_write(&metrics, argv[0], &s.w, s.d, t, true) != 0 && status == 0)
            status = GM_EXIT_IOERR;
    }

    run.exit_status = status;
    run.term_signal = term_signal;
    run.interrupted = cli_child.stop != 0;
    if (json && !g_out_failed)
        (void)gm_watch_jsonl_end(stdout, &s.w, &run, NULL);
    rc = g_out_failed     ? GM_EXIT_IOERR
         : status >= 0    ? status
         : cli_child.stop ? 128 + cli_child.signal
                          : 0;
    if (output) {
        int orc;
        /* a failed write is reported by the commit, with its errno */
        if (watch_output_kind(output) == 'c')
            (void)gm_watch_write_csv(&s.w, out.f);
        else
            (void)gm_watch_json(out.f, &s.w, &run, NULL);
        orc = cli_output_commit(&out, argv[0]);
        if (orc && rc == 0)
            rc = orc;
        if (!orc)
            written = out.written;
    }
    watch_report(stderr, &s.w, &run, !no_chart && !json, written);
    if (account) {
        struct gm_account *a = NULL;
        if (account_cli_read(argv[0], &ac, &a) == 0) {
            fputc('\n', stderr);
            account_report(stderr, a, true);
        }
        gm_account_free(a);
    }

out_close:
    if (account)
        account_cli_end(argv[0], &ac);
    gm_devices_close(s.d);
out_free:
    watch_metrics_close(&metrics);
    gm_watch_release(&s.w);
    free(command);
    return rc;
}
