/* SPDX-License-Identifier: MIT */
/* cmd_sweep.c - gpumem sweep: find the largest value of one integer parameter at which a
 * command still runs, one fresh process per value, device memory followed as `watch` does
 * (the sweep itself is gm_sweep_run(), sweep.h).  Progress goes to stderr, the result to
 * stdout (a table, or gpumem.sweep/1 JSON with --json). */
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include "gpumem/device.h"
#include "gpumem/sweep.h"
#include "gpumem/text.h"
#include "gpumem/units.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* The signal that stopped the sweep, 0 none.  Every signal that would end gpumem (a
 * closed terminal's SIGHUP as much as Ctrl-C) stops it the same way: the run's process
 * group ended, the record written, the temporary folder removed. */
static volatile sig_atomic_t g_stop;

static void on_signal(int sig)
{
    if (!g_stop)
        g_stop = sig;
}

static void catch_signals(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM, SIGUSR1, SIGUSR2};
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaction(sigs[i], &sa, NULL);
    /* a closed stdout is a write error (reported, exit 74), not a silent death that would
     * leave the run going */
    signal(SIGPIPE, SIG_IGN);
}

static const char *bytes(char *buf, size_t n, struct gm_reading r)
{
    if (!r.valid)
        return "-";
    return gm_format_bytes(buf, n, r.value, GM_UNITS_IEC);
}

#define ROW "  %-20s %-9s %11s %12s %11s %11s %7s  %s\n"

/* What a run did, in words, escaped: it quotes the command's own output and phase names. */
static const char *describe(const struct gm_sweep_run *r, char *out, size_t n)
{
    char what[400];
    gm_sweep_describe_run(r, what, sizeof what);
    return gm_text_escape(out, n, what);
}

static void print_run(FILE *f, const struct gm_sweep *s, const struct gm_sweep_run *r)
{
    char name[96], peak[32], rise[40] = "+", cmd[32], alloc[32], t[32], what[1600];
    snprintf(name, sizeof name, "%s=%" PRIu64, s->param, r->value);
    bytes(rise + 1, sizeof rise - 1, r->rise);
    snprintf(t, sizeof t, "%.1f s", (double)r->wall_ms / 1000.0);
    fprintf(f, ROW, name, r->bisection ? "bisection" : "", bytes(peak, sizeof peak, r->device_peak),
            r->rise.valid ? rise : "-", bytes(cmd, sizeof cmd, r->command_peak),
            bytes(alloc, sizeof alloc, r->peak_allocated), t, describe(r, what, sizeof what));
}

/* After each run: its row (not with --json), and a warning when it left processes
 * running. */
static void progress(const struct gm_sweep *s, const struct gm_sweep_run *r, void *ctx)
{
    const bool *json = ctx;
    if (!*json)
        print_run(stderr, s, r);
    if (r->n_left)
        cli_errorf("gpumem sweep",
                   "warning: the run %s=%" PRIu64 " left %u process%s running in its group "
                   "(%s): ended before the next run",
                   s->param, r->value, (unsigned)r->n_left, r->n_left == 1 ? "" : "es", r->left);
}

static void print_result(const struct gm_sweep *s)
{
    const struct gm_sweep_run *fail = gm_sweep_failed_run(s);
    char what[1600] = "";
    printf("gpumem sweep: %s over", s->param);
    for (size_t i = 0; i < s->n_values; i++)
        printf("%s %" PRIu64, i ? "," : "", s->values[i]);
    printf(" (%zu runs, each a fresh process)\n", s->n_runs);
    printf(ROW, "run", "", "device peak", "(rise)", "command", "torch alloc", "time", "result");
    for (size_t i = 0; i < s->n_runs; i++)
        print_run(stdout, s, &s->runs[i]);
    if (fail)
        describe(fail, what, sizeof what);
    switch (gm_sweep_end(s)) {
    case GM_SWEEP_END_BOUNDARY:
        printf("boundary: %s=%" PRIu64 " fits, %s=%" PRIu64 " fails (%s)\n", s->param, s->fit,
               s->param, s->fail, what);
        break;
    case GM_SWEEP_END_ALL_FIT:
        printf("every value fits: the boundary is above %s=%" PRIu64 "\n", s->param, s->fit);
        break;
    case GM_SWEEP_END_FIRST_FAILS:
        printf("the smallest value already fails: %s=%" PRIu64 " (%s)\n", s->param, s->fail, what);
        break;
    case GM_SWEEP_END_NOT_OOM:
        printf("%s=%" PRIu64 " fits, %s=%" PRIu64 " fails, but not for want of memory (%s): no "
               "bisection\n",
               s->param, s->fit, s->param, s->fail, what);
        break;
    case GM_SWEEP_END_NO_BISECTION:
    case GM_SWEEP_END_MAX_RUNS:
        printf("between: %s=%" PRIu64 " fits, %s=%" PRIu64 " fails (%s)\n", s->param, s->fit,
               s->param, s->fail,
               gm_sweep_end(s) == GM_SWEEP_END_MAX_RUNS ? "the run budget ended" : "no bisection");
        break;
    case GM_SWEEP_END_INTERRUPTED:
        printf("interrupted after %zu runs\n", s->n_runs);
        break;
    }
    if (s->n_listed_run < s->n_values) {
        printf("not run (above the first failure):");
        for (size_t i = s->n_listed_run; i < s->n_values; i++)
            printf(" %" PRIu64, s->values[i]);
        printf("\n");
    }
}

/* --logs DIR: made if missing; never holding an earlier sweep's run files (nor a symbolic
 * link of such a name: each log is created, never opened through a link). */
static int logs_dir(const char *cmd, const char *dir)
{
    char found[256];
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        cli_errorf(cmd, "cannot create '%s': %s", dir, strerror(errno));
        return GM_EXIT_CANTCREAT;
    }
    if (gm_sweep_dir_has_runs(dir, found, sizeof(found))) {
        cli_errorf(cmd, "'%s' holds an earlier sweep's files (%s): refusing to overwrite them", dir,
                   found);
        return GM_EXIT_CANTCREAT;
    }
    return 0;
}

int cmd_sweep(int argc, char **argv)
{
    const char *param = NULL, *output = NULL, *device = NULL, *logs = NULL;
    uint64_t interval = 100, proc_interval = 100, timeout_s = 0, runs = 32;
    bool no_bisect = false, json = false, force = false;
    int n_pos = 0, rc = 0;
    struct gm_sweep *s;
    struct gm_sweep_opts o;
    struct gm_devices *d = NULL;
    struct gm_error err;
    struct gm_output out;
    char tmp[4096] = "";
    const struct opt opts[] = {
        OPT_STRING("param", 'p', &param, "NAME=V1,V2,...",
                   "the parameter and its values, increasing (required); {NAME} in the command "
                   "is replaced"),
        OPT_FLAG("no-bisect", 0, &no_bisect,
                 "stop at the first failure (no bisection towards the boundary)"),
        OPT_U64("max-runs", 0, &runs, "N", "runs at most, bisection included (32)", NULL),
        OPT_U64("timeout", 't', &timeout_s, "SEC", "a run taking longer fails (0: none)", NULL),
        OPT_U64("interval", 'i', &interval, "MS", "device memory every MS milliseconds (100)",
                NULL),
        OPT_U64("process-interval", 0, &proc_interval, "MS",
                "process list every MS milliseconds (100)", NULL),
        OPT_STRING("device", 'd', &device, "cuda:N", "watch only this CUDA device"),
        OPT_STRING("logs", 0, &logs, "DIR",
                   "keep each run's output (run-N.log) and gpumem.torch series (run-N.json)"),
        OPT_STRING("output", 'o', &output, "FILE", "write the result as JSON to FILE"),
        OPT_FLAG("force", 'f', &force, "replace --output if it exists"),
        OPT_JSON(&json, "gpumem.sweep/1"),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem sweep --param NAME=V1,V2,... [OPTIONS] -- COMMAND [ARGS...]",
        "Run COMMAND once per value, each time as a fresh process with {NAME} replaced by the "
        "value, and follow the GPU memory as gpumem watch does, until the first run that fails; "
        "then bisect between the last value that fitted and the first that failed until they "
        "are adjacent: the fit/OOM boundary of that one dimension. A run fits when it exits "
        "with status 0. A script that uses gpumem.torch writes its phase series to the file "
        "$GPUMEM_TORCH_OUTPUT names: the sweep reads the phase that failed, its error, whether "
        "it ran out of memory and the bytes it asked for, and does not bisect a failure that is "
        "not for want of memory. Failures are kept as observations. Exit status: 0 when the "
        "sweep ran to its end, whatever the runs did; 1 when the command could not be started; "
        "130 when interrupted (the JSON is still written).",
        "gpumem sweep --param batch=1,2,4,8,16 -- python train.py --batch {batch}\n"
        "gpumem sweep -p seq=512,1024,2048,4096 --timeout 600 --output sweep.json -- ./run.sh "
        "{seq}\n"
        "gpumem sheet estimate.json sweep.json   # the boundary on the one-page record"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, true, &n_pos);
    if (prc >= 0)
        return prc;
    if (!param)
        return cli_usage(argv[0], "--param NAME=V1,V2,... is required");
    if (n_pos == 0)
        return cli_usage(argv[0], "nothing to run: give -- COMMAND");
    if (interval < 10 || interval > 3600000 || proc_interval < 10 || proc_interval > 3600000)
        return cli_usage(argv[0], "intervals must be between 10 ms and 1 hour");
    if (runs == 0 || runs > GM_SWEEP_MAX_RUNS)
        return cli_usage(argv[0], "--max-runs must be between 1 and %d", GM_SWEEP_MAX_RUNS);
    if (timeout_s > 30u * 24 * 3600)
        return cli_usage(argv[0], "--timeout is at most 30 days");
    s = calloc(1, sizeof(*s));
    if (!s)
        return GM_EXIT_SOFTWARE;
    memset(&o, 0, sizeof(o));
    o.only_cuda = -1;
    if (gm_sweep_parse_param(s, param, &err) != GM_OK) {
        rc = cli_usage(argv[0], "--param %s", err.msg);
        goto out_free;
    }
    if (device && gm_device_parse_spec(device, &o.only_cuda, &err)) {
        rc = cli_usage(argv[0], "%s", err.msg);
        goto out_free;
    }
    s->bisect = !no_bisect;
    s->max_runs = (uint32_t)runs;
    argv[1 + n_pos] = NULL; /* opts_parse moved the command to argv[1..n_pos] */
    o.argv = argv + 1;
    o.envp = environ; /* the runs get gpumem's own environment, plus their series file */
    if (!gm_sweep_command_uses(s, o.argv)) {
        rc = cli_usage(argv[0], "the command never uses {%s}: every run would be the same",
                       s->param);
        goto out_free;
    }
    o.interval_ms = interval;
    o.process_interval_ms = proc_interval;
    o.timeout_ms = timeout_s * 1000u;
    o.stop = &g_stop;
    o.on_run = progress;
    o.ctx = &json;
    if (logs) {
        rc = logs_dir(argv[0], logs);
        if (rc)
            goto out_free;
        o.work_dir = logs;
        o.keep_files = true;
    } else {
        const char *t = getenv("TMPDIR");
        snprintf(tmp, sizeof(tmp), "%s/gpumem-sweep-XXXXXX", t && *t ? t : "/tmp");
        if (!mkdtemp(tmp)) {
            cli_errorf(argv[0], "cannot create a folder in '%s': %s", t && *t ? t : "/tmp",
                       strerror(errno));
            rc = GM_EXIT_CANTCREAT;
            goto out_free;
        }
        o.work_dir = tmp;
    }
    /* The output file is claimed before the first run, so that no sweep is wasted. */
    if (output && (rc = cli_output_open(&out, argv[0], output, force)) != 0)
        goto out_rmdir;
    if (gm_devices_open(&d, getenv, &err) || gm_devices_check(d, &err)) {
        rc = cli_fail(argv[0], &err);
        goto out_abort;
    }
    catch_signals();
    /* the runs' orphans (a background process whose shell exited) become gpumem's children,
     * so that the sweep can end and reap them: a zombie reparented to an init that does not
     * reap would hold the run's process group, and a fake driver's memory, forever */
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1);
    if (!json)
        fprintf(stderr, "gpumem sweep: %s, one fresh process per value\n", param);
    if (gm_sweep_run(s, d, &o, &err) != GM_OK) {
        rc = cli_fail(argv[0], &err);
        if (err.code == GM_ERR_UNSUPPORTED)
            rc = GM_EXIT_NODEV; /* nothing to watch without NVML: no GPU, as watch says */
        goto out_abort;
    }
    if (json) {
        if (gm_sweep_json(stdout, s, &o, NULL) != GM_OK)
            rc = GM_EXIT_IOERR;
    } else {
        print_result(s);
    }
    if (output) {
        /* a failed write is reported by the commit, with the path and its errno */
        (void)gm_sweep_json(out.f, s, &o, NULL);
        rc = cli_output_commit(&out, argv[0]);
        if (!rc && !json)
            printf("wrote %s\n", output);
        output = NULL;
    }
    if (!rc && s->interrupted)
        rc = 128 + (g_stop ? (int)g_stop : SIGINT);
    else if (!rc && s->n_runs && s->runs[0].outcome == GM_SWEEP_RUN_NOT_STARTED)
        rc = GM_EXIT_FAILURE;
out_abort:
    if (output)
        cli_output_abort(&out);
out_rmdir:
    if (tmp[0])
        rmdir(tmp);
out_free:
    gm_devices_close(d);
    free(s);
    return rc;
}
