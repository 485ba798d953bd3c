/* SPDX-License-Identifier: MIT */
/* sweep.c - gpumem sweep: plan the values (the given list up to the first failure, then a
 * bisection between the last success and the first failure), run each value as a fresh
 * process followed by the watch API, read its gpumem.torch series, and write / read the
 * result (schema gpumem.sweep/1).  See sweep.h.
 *
 * A run: the command's arguments with "{param}" replaced, started by the watch API's
 * gm_watch_spawn() with its stdout and stderr sent to <work_dir>/run-N.log, the caller's
 * environment plus GPUMEM_TORCH_OUTPUT=<work_dir>/run-N.json, in its own process group (so
 * that a timeout or an interruption ends the whole tree).  While it runs it is sampled on
 * the watch API's clock exactly as `gpumem watch` samples (gm_watch_tick: devices every
 * interval, process lists every process interval and after a device-level change).  The
 * run ends when the process does; its outcome comes from the wait status, its phase and
 * error from the series when the command wrote one, else its error is the last line of its
 * output. */
#include "gpumem/sweep.h"

#include "gpumem/arena.h"
#include "gpumem/json.h"
#include "gpumem/measure.h"
#include "gpumem/units.h"
#include "gpumem/version.h"
#include "gpumem/watch.h"

#include "base/buf.h"
#include "base/json_in.h"
#include "base/json_load.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define KILL_GRACE_MS 2000 /* SIGTERM, then SIGKILL after this */
#define MAX_ARGS      256

static const char *const outcome_names[] = {"ok",      "failed",      "signaled",
                                            "timeout", "not_started", "interrupted"};
static const char *const end_names[] = {"all_fit",      "boundary", "first_fails", "not_oom",
                                        "no_bisection", "max_runs", "interrupted"};

const char *gm_sweep_outcome_name(enum gm_sweep_outcome o)
{
    return (unsigned)o < sizeof(outcome_names) / sizeof(outcome_names[0]) ? outcome_names[o]
                                                                          : "unknown";
}

const char *gm_sweep_end_name(enum gm_sweep_end e)
{
    return (unsigned)e < sizeof(end_names) / sizeof(end_names[0]) ? end_names[e] : "unknown";
}

void gm_sweep_describe_run(const struct gm_sweep_run *r, char *out, size_t n)
{
    char req[32];
    switch (r->outcome) {
    case GM_SWEEP_RUN_OK:
        snprintf(out, n, "fits");
        return;
    case GM_SWEEP_RUN_TIMEOUT:
    case GM_SWEEP_RUN_NOT_STARTED:
    case GM_SWEEP_RUN_INTERRUPTED:
        snprintf(out, n, "%s: %s", gm_sweep_outcome_name(r->outcome), r->error);
        return;
    case GM_SWEEP_RUN_FAILED:
    case GM_SWEEP_RUN_SIGNALED:
        break;
    }
    if (r->requested.valid)
        gm_format_bytes(req, sizeof req, r->requested.value, GM_UNITS_IEC);
    if (r->has_series && r->oom)
        snprintf(out, n, "out of memory in phase '%s'%s%s%s", r->phase,
                 r->requested.valid ? " (tried " : "", r->requested.valid ? req : "",
                 r->requested.valid ? ")" : "");
    else if (r->has_series && r->n_phases_failed)
        snprintf(out, n, "phase '%s' failed: %s", r->phase, r->error);
    else if (r->outcome == GM_SWEEP_RUN_SIGNALED)
        snprintf(out, n, "killed by signal %d%s%s", r->exit_status - 128, r->error[0] ? ": " : "",
                 r->error);
    else
        snprintf(out, n, "exit %d%s%s", r->exit_status, r->error[0] ? ": " : "", r->error);
}

/* ------------------------------------------------------------------------------------ */
/* Planning */

enum gm_status gm_sweep_parse_param(struct gm_sweep *s, const char *spec, struct gm_error *err)
{
    const char *eq = strchr(spec, '=');
    size_t nlen = eq ? (size_t)(eq - spec) : 0;
    const char *p;

    memset(s, 0, sizeof(*s));
    s->bisect = true;
    if (!eq || nlen == 0 || nlen >= sizeof(s->param))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "'%s': expected NAME=V1,V2,... (for example batch=1,2,4,8)", spec);
    for (size_t i = 0; i < nlen; i++)
        if (!(spec[i] == '_' || spec[i] == '-' || (spec[i] >= 'a' && spec[i] <= 'z') ||
              (spec[i] >= 'A' && spec[i] <= 'Z') || (i > 0 && spec[i] >= '0' && spec[i] <= '9')))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "'%.*s': a parameter name is letters, digits, '_' and '-'", (int)nlen,
                           spec);
    memcpy(s->param, spec, nlen);
    for (p = eq + 1;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char num[32];
        uint64_t v;
        if (len == 0 || len >= sizeof(num))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': an empty or too long value",
                           spec);
        memcpy(num, p, len);
        num[len] = '\0';
        if (gm_parse_u64(num, &v, err) != GM_OK) {
            if (err)
                gm_error_prefix(err, "%s", s->param);
            return GM_ERR_INVALID;
        }
        /* the record's JSON must read back (gm_sweep_load_mem: JSON integers are int64) */
        if (v > (uint64_t)INT64_MAX)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "%s: %s is too large (at most %" PRId64 ")", s->param, num, INT64_MAX);
        if (s->n_values == GM_SWEEP_MAX_VALUES)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "more than %d values",
                           GM_SWEEP_MAX_VALUES);
        if (s->n_values && v <= s->values[s->n_values - 1])
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "values must increase: %" PRIu64 " after %" PRIu64, v,
                           s->values[s->n_values - 1]);
        s->values[s->n_values++] = v;
        if (!comma)
            break;
        p = comma + 1;
    }
    return GM_OK;
}

static uint32_t max_runs(const struct gm_sweep *s)
{
    return s->max_runs && s->max_runs < GM_SWEEP_MAX_RUNS ? s->max_runs : GM_SWEEP_MAX_RUNS;
}

bool gm_sweep_next(const struct gm_sweep *s, uint64_t *value, bool *bisection)
{
    if (s->interrupted || s->n_runs >= max_runs(s))
        return false;
    if (!s->has_fail) {
        if (s->n_listed_run >= s->n_values)
            return false;
        *value = s->values[s->n_listed_run];
        *bisection = false;
        return true;
    }
    if (!s->bisect || !s->has_fit || s->first_failure_not_oom || s->fail - s->fit <= 1)
        return false;
    *value = s->fit + (s->fail - s->fit) / 2;
    *bisection = true;
    return true;
}

void gm_sweep_record(struct gm_sweep *s, const struct gm_sweep_run *r)
{
    if (s->n_runs >= GM_SWEEP_MAX_RUNS)
        return;
    s->runs[s->n_runs++] = *r;
    if (!r->bisection && s->n_listed_run < s->n_values)
        s->n_listed_run++;
    if (r->outcome == GM_SWEEP_RUN_INTERRUPTED) {
        s->interrupted = true;
        return;
    }
    if (r->outcome == GM_SWEEP_RUN_OK) {
        if ((!s->has_fail || r->value < s->fail) && (!s->has_fit || r->value > s->fit)) {
            s->has_fit = true;
            s->fit = r->value;
        }
        return;
    }
    if (!s->has_fail) {
        /* The series says what the first failure was: only an out-of-memory error makes a
         * memory boundary worth bisecting. */
        s->first_failure_not_oom = r->has_series && r->n_phases_failed > 0 && !r->oom;
        s->has_fail = true;
        s->fail = r->value;
    } else if (r->value < s->fail) {
        s->fail = r->value;
    }
}

const struct gm_sweep_run *gm_sweep_failed_run(const struct gm_sweep *s)
{
    for (size_t i = 0; s->has_fail && i < s->n_runs; i++)
        if (s->runs[i].value == s->fail && s->runs[i].outcome != GM_SWEEP_RUN_OK)
            return &s->runs[i];
    return NULL;
}

enum gm_sweep_end gm_sweep_end(const struct gm_sweep *s)
{
    if (s->interrupted)
        return GM_SWEEP_END_INTERRUPTED;
    if (!s->has_fail)
        return s->n_listed_run < s->n_values ? GM_SWEEP_END_MAX_RUNS : GM_SWEEP_END_ALL_FIT;
    if (!s->has_fit)
        return GM_SWEEP_END_FIRST_FAILS;
    if (s->fail - s->fit <= 1)
        return GM_SWEEP_END_BOUNDARY;
    if (s->first_failure_not_oom)
        return GM_SWEEP_END_NOT_OOM;
    if (!s->bisect)
        return GM_SWEEP_END_NO_BISECTION;
    return GM_SWEEP_END_MAX_RUNS;
}

/* ------------------------------------------------------------------------------------ */
/* Running */

static char placeholder(const struct gm_sweep *s, char *out, size_t n)
{
    return snprintf(out, n, "{%s}", s->param) < (int)n;
}

bool gm_sweep_command_uses(const struct gm_sweep *s, char *const *argv)
{
    char ph[80];
    if (!placeholder(s, ph, sizeof(ph)))
        return false;
    for (size_t i = 0; argv && argv[i]; i++)
        if (strstr(argv[i], ph))
            return true;
    return false;
}

/* argv with every "{param}" replaced by 'value', into args[] (each a gm_malloc'ed string,
 * released by free_args()). */
static enum gm_status expand(const struct gm_sweep *s, char *const *argv, uint64_t value,
                             char **args, struct gm_error *err)
{
    char ph[80], num[32];
    size_t i, phlen, numlen;
    placeholder(s, ph, sizeof(ph));
    snprintf(num, sizeof(num), "%" PRIu64, value);
    phlen = strlen(ph);
    numlen = strlen(num);
    for (i = 0; argv[i]; i++) {
        const char *in = argv[i], *hit;
        size_t n = 0, len, at = 0;
        char *out;
        if (i + 1 >= MAX_ARGS)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "more than %d arguments",
                           MAX_ARGS - 1);
        for (hit = strstr(in, ph); hit; hit = strstr(hit + phlen, ph))
            n++;
        len = strlen(in) - n * phlen + n * numlen; /* the number is shorter than 2^63 bytes */
        out = gm_malloc(len + 1);
        if (!out)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory for the command");
        while ((hit = strstr(in, ph)) != NULL) {
            memcpy(out + at, in, (size_t)(hit - in));
            at += (size_t)(hit - in);
            memcpy(out + at, num, numlen);
            at += numlen;
            in = hit + phlen;
        }
        memcpy(out + at, in, strlen(in) + 1);
        args[i] = out;
        args[i + 1] = NULL;
    }
    args[i] = NULL;
    return GM_OK;
}

static void free_args(char **args)
{
    for (size_t i = 0; args[i]; i++)
        gm_free(args[i]);
}

/* The last non-empty line of 'path' (at most the last 4 KiB are read). */
static void last_line(const char *path, char *out, size_t n)
{
    char buf[4096];
    FILE *f = fopen(path, "rb");
    size_t got, end, start;
    long size;
    out[0] = '\0';
    if (!f)
        return;
    if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > (long)sizeof(buf) - 1)
        fseek(f, size - (long)sizeof(buf) + 1, SEEK_SET);
    else
        fseek(f, 0, SEEK_SET);
    got = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    end = got;
    while (end > 0 && (buf[end - 1] == '\n' || buf[end - 1] == '\r' || buf[end - 1] == ' '))
        end--;
    start = end;
    while (start > 0 && buf[start - 1] != '\n')
        start--;
    snprintf(out, n, "%.*s", (int)(end - start), buf + start);
}

/* What the run's gpumem.torch series says (if it wrote one). */
static void read_series(const char *path, struct gm_sweep_run *r)
{
    struct gm_measure_series *ms;
    const struct gm_measure_series_phase *failed = NULL;
    if (access(path, F_OK) != 0 || gm_measure_series_load(path, &ms, NULL) != GM_OK)
        return;
    r->has_series = true;
    r->n_phases = (uint32_t)ms->n_phases;
    for (size_t i = 0; i < ms->n_phases; i++)
        if (ms->phases[i].ran && !ms->phases[i].ok) {
            r->n_phases_failed++;
            if (!failed)
                failed = &ms->phases[i];
        }
    if (failed) {
        snprintf(r->phase, sizeof(r->phase), "%s", failed->name);
        r->oom = failed->oom;
        r->requested = failed->requested;
        if (failed->error)
            snprintf(r->error, sizeof(r->error), "%s", failed->error);
    } else if (ms->n_phases) {
        snprintf(r->phase, sizeof(r->phase), "%s", ms->phases[ms->n_phases - 1].name);
    }
    r->peak_allocated = ms->peak_allocated;
    r->peak_reserved = ms->peak_reserved;
    gm_measure_series_free(ms);
}

/* The watched device whose used memory rose the most. */
static void take_watch(const struct gm_watch *w, struct gm_sweep_run *r)
{
    int best = -1;
    uint64_t best_rise = 0;
    for (uint32_t k = 0; k < w->n_dev; k++) {
        const struct gm_watch_device *d = &w->dev[k];
        uint64_t rise = d->peak.valid && d->baseline.valid && d->peak.value > d->baseline.value
                            ? d->peak.value - d->baseline.value
                            : 0;
        if (best < 0 || rise > best_rise) {
            best = (int)k;
            best_rise = rise;
        }
    }
    if (best >= 0) {
        const struct gm_watch_device *d = &w->dev[best];
        snprintf(r->device, sizeof(r->device), "%s", d->label);
        r->baseline = d->baseline;
        r->device_peak = d->peak;
        r->total = d->total;
        if (d->peak.valid && d->baseline.valid)
            r->rise = (struct gm_reading){best_rise, true};
    }
    r->command_peak = w->cmd_seen ? (struct gm_reading){w->cmd_peak, true} : GM_READING_NONE;
}

bool gm_sweep_dir_has_runs(const char *dir, char *found, size_t n)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    bool has = false;
    if (!d)
        return false;
    while (!has && (de = readdir(d))) {
        const char *p = de->d_name;
        size_t digits = 0;
        if (strncmp(p, "run-", 4) != 0)
            continue;
        for (p += 4; *p >= '0' && *p <= '9'; p++)
            digits++;
        if (digits && (!strcmp(p, ".log") || !strcmp(p, ".json"))) {
            snprintf(found, n, "%s", de->d_name);
            has = true;
        }
    }
    closedir(d);
    return has;
}

/* The group's processes that became ours (the caller made itself a child subreaper, so
 * orphans of the run are reparented to it), reaped: a zombie still counts as a process. */
static void reap_group(pid_t pgid)
{
    while (waitpid(-pgid, NULL, WNOHANG) > 0)
        ;
}

/* After the run's command exited: the processes it left running in its process group are
 * named in the run, then ended (SIGTERM, SIGKILL after the grace), so that the next run is
 * measured alone and nothing outlives the sweep.  A process that left the group (setsid)
 * is beyond reach. */
static void end_group(pid_t pgid, struct gm_sweep_run *r)
{
    uint32_t left[8];
    size_t n, at = 0;
    reap_group(pgid);
    n = gm_proc_group((uint32_t)pgid, left, 8);
    if (!n)
        return;
    r->n_left = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    for (size_t i = 0; i < n && i < 8; i++) {
        char name[64];
        int w;
        gm_proc_name(left[i], name, sizeof(name));
        w = snprintf(r->left + at, sizeof(r->left) - at, "%s%s (pid %u)", i ? ", " : "",
                     name[0] ? name : "?", (unsigned)left[i]);
        if (w < 0 || (size_t)w >= sizeof(r->left) - at)
            break;
        at += (size_t)w;
    }
    killpg(pgid, SIGTERM);
    for (uint64_t waited = 0; (reap_group(pgid), gm_proc_group((uint32_t)pgid, NULL, 0));
         waited += 20) {
        if (waited == KILL_GRACE_MS)
            killpg(pgid, SIGKILL);
        if (waited > KILL_GRACE_MS + 5000)
            break; /* unkillable (a process stuck in the kernel): not waited for */
        gm_watch_sleep_ms(20);
    }
    reap_group(pgid);
}

static void run_paths(const struct gm_sweep_opts *o, size_t k, char *log, char *series, size_t n)
{
    snprintf(log, n, "%s/run-%zu.log", o->work_dir, k + 1);
    snprintf(series, n, "%s/run-%zu.json", o->work_dir, k + 1);
}

/* Start 'args' (searched on PATH) in its own process group, stdout and stderr to 'log',
 * with the environment 'envp' plus GPUMEM_TORCH_OUTPUT='series'.  An exec failure is
 * *exec_errno (a GM_SWEEP_RUN_NOT_STARTED run), not an error of the sweep. */
static enum gm_status spawn(char **args, char *const *envp, const char *log, const char *series,
                            pid_t *pid, int *exec_errno, struct gm_error *err)
{
    struct gm_watch_command c = {args, NULL, log, false, true};
    char **env;
    enum gm_status st;

    *exec_errno = 0;
    if ((st = gm_watch_env_with(envp, GM_SWEEP_SERIES_ENV, series, &env, err)) != GM_OK)
        return st;
    c.envp = env;
    st = gm_watch_spawn(&c, pid, exec_errno, err);
    gm_free(env);
    return st;
}

static enum gm_status run_one(struct gm_sweep *s, struct gm_devices *d,
                              const struct gm_sweep_opts *o, uint64_t value, bool bisection,
                              struct gm_sweep_run *r, struct gm_error *err)
{
    char *args[MAX_ARGS] = {NULL};
    char log[4096], series[4096];
    struct gm_watch w;
    struct gm_watch_clock clk;
    enum gm_status st;
    uint64_t killed_at = 0, t;
    bool killed = false;
    pid_t pid = 0;
    int exec_errno, wst = 0;
    bool timed_out = false, stopped = false;

    memset(r, 0, sizeof(*r));
    r->value = value;
    r->bisection = bisection;
    r->exit_status = -1;
    st = expand(s, o->argv, value, args, err);
    if (st != GM_OK) {
        free_args(args);
        return st;
    }
    run_paths(o, s->n_runs, log, series, sizeof(log));
    unlink(series);
    gm_watch_init(&w, 1); /* only the peaks matter: no sample is kept */
    st = gm_watch_setup(&w, d, o->only_cuda, err);
    if (st != GM_OK)
        goto out_release;
    gm_watch_clock_start(&clk, o->interval_ms, o->process_interval_ms);
    st = spawn(args, o->envp, log, series, &pid, &exec_errno, err);
    if (st != GM_OK)
        goto out_release;
    if (exec_errno) {
        r->outcome = GM_SWEEP_RUN_NOT_STARTED;
        r->exit_status = exec_errno == ENOENT ? 127 : 126;
        snprintf(r->error, sizeof(r->error), "cannot run '%s': %s", args[0], strerror(exec_errno));
        goto out_release;
    }
    for (;;) {
        t = gm_watch_tick(&w, d, &clk, (uint32_t)pid, false);
        if (waitpid(pid, &wst, WNOHANG) == pid)
            break;
        if (!killed && ((o->stop && *o->stop) || (o->timeout_ms && t >= o->timeout_ms))) {
            stopped = o->stop && *o->stop;
            timed_out = !stopped;
            kill(-pid, SIGTERM);
            killed_at = t;
            killed = true;
        } else if (killed && t >= killed_at + KILL_GRACE_MS) {
            kill(-pid, SIGKILL);
        }
        gm_watch_wait(&clk, t);
    }
    r->wall_ms = gm_watch_clock_ms(&clk);
    end_group(pid, r);
    r->exit_status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
    r->outcome = stopped          ? GM_SWEEP_RUN_INTERRUPTED
                 : timed_out      ? GM_SWEEP_RUN_TIMEOUT
                 : WIFEXITED(wst) ? (WEXITSTATUS(wst) == 0 ? GM_SWEEP_RUN_OK : GM_SWEEP_RUN_FAILED)
                                  : GM_SWEEP_RUN_SIGNALED;
    take_watch(&w, r);
    read_series(series, r);
    if (r->outcome != GM_SWEEP_RUN_OK && !r->error[0]) {
        if (timed_out)
            snprintf(r->error, sizeof(r->error), "timed out after %" PRIu64 " ms", o->timeout_ms);
        else
            last_line(log, r->error, sizeof(r->error));
    }
out_release:
    gm_watch_release(&w);
    free_args(args);
    if (!o->keep_files) {
        unlink(log);
        unlink(series);
    }
    return st;
}

enum gm_status gm_sweep_run(struct gm_sweep *s, struct gm_devices *d, const struct gm_sweep_opts *o,
                            struct gm_error *err)
{
    struct stat st_dir;
    uint64_t value;
    bool bisection;

    if (!o->argv || !o->argv[0])
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "no command to run");
    if (!gm_sweep_command_uses(s, o->argv))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "the command never uses {%s}: every run would be the same", s->param);
    if (o->interval_ms == 0 || o->process_interval_ms == 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "intervals must not be 0");
    if (!o->work_dir || stat(o->work_dir, &st_dir) != 0 || !S_ISDIR(st_dir.st_mode))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "no folder '%s' for the runs' files",
                       o->work_dir ? o->work_dir : "");
    {
        size_t at = 0;
        s->command[0] = '\0';
        for (size_t i = 0; o->argv[i] && at < sizeof(s->command); i++) {
            int w = snprintf(s->command + at, sizeof(s->command) - at, "%s%s", i ? " " : "",
                             o->argv[i]);
            at = w < 0 ? sizeof(s->command) : at + (size_t)w;
        }
    }
    while (gm_sweep_next(s, &value, &bisection)) {
        struct gm_sweep_run r;
        enum gm_status st = run_one(s, d, o, value, bisection, &r, err);
        if (st != GM_OK)
            return st;
        gm_sweep_record(s, &r);
        if (o->on_run)
            o->on_run(s, &s->runs[s->n_runs - 1], o->ctx);
    }
    return GM_OK;
}

/* ------------------------------------------------------------------------------------ */
/* gpumem.sweep/1 */

static void kv_reading(struct gm_json *w, const char *key, struct gm_reading r)
{
    if (r.valid)
        gm_json_kv_u64(w, key, r.value);
    else
        gm_json_kv_null(w, key);
}

enum gm_status gm_sweep_json(FILE *f, const struct gm_sweep *s, const struct gm_sweep_opts *o,
                             struct gm_error *err)
{
    struct gm_json w;
    enum gm_sweep_end end = gm_sweep_end(s);
    gm_json_init(&w, f, GM_JSON_PRETTY);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "schema", "gpumem.sweep/1");
    gm_json_kv_str(&w, "gpumem_version", gm_version());
    gm_json_kv_str(&w, "parameter", s->param);
    gm_json_key(&w, "values");
    gm_json_begin_array(&w);
    for (size_t i = 0; i < s->n_values; i++)
        gm_json_u64(&w, s->values[i]);
    gm_json_end_array(&w);
    gm_json_kv_str(&w, "command", s->command);
    gm_json_key(&w, "settings");
    gm_json_begin_object(&w);
    gm_json_kv_bool(&w, "bisect", s->bisect);
    gm_json_kv_u64(&w, "max_runs", max_runs(s));
    if (o) {
        gm_json_kv_u64(&w, "interval_ms", o->interval_ms);
        gm_json_kv_u64(&w, "process_interval_ms", o->process_interval_ms);
        if (o->timeout_ms)
            gm_json_kv_u64(&w, "timeout_ms", o->timeout_ms);
        else
            gm_json_kv_null(&w, "timeout_ms");
        gm_json_kv_bool(&w, "fresh_process_per_run", true);
    }
    gm_json_end_object(&w);
    gm_json_key(&w, "runs");
    gm_json_begin_array(&w);
    for (size_t i = 0; i < s->n_runs; i++) {
        const struct gm_sweep_run *r = &s->runs[i];
        gm_json_begin_object(&w);
        gm_json_kv_u64(&w, "value", r->value);
        gm_json_kv_bool(&w, "bisection", r->bisection);
        gm_json_kv_str(&w, "outcome", gm_sweep_outcome_name(r->outcome));
        gm_json_kv_i64(&w, "exit_status", r->exit_status);
        gm_json_kv_double(&w, "seconds", (double)r->wall_ms / 1000.0);
        gm_json_key(&w, "device");
        gm_json_begin_object(&w);
        gm_json_kv_str(&w, "label", r->device[0] ? r->device : NULL);
        kv_reading(&w, "baseline_bytes", r->baseline);
        kv_reading(&w, "peak_bytes", r->device_peak);
        kv_reading(&w, "rise_bytes", r->rise);
        kv_reading(&w, "total_bytes", r->total);
        gm_json_end_object(&w);
        kv_reading(&w, "command_peak_bytes", r->command_peak);
        gm_json_key(&w, "series");
        if (r->has_series) {
            gm_json_begin_object(&w);
            gm_json_kv_u64(&w, "phases", r->n_phases);
            gm_json_kv_u64(&w, "phases_failed", r->n_phases_failed);
            gm_json_kv_str(&w, "phase", r->phase[0] ? r->phase : NULL);
            gm_json_kv_bool(&w, "oom", r->oom);
            kv_reading(&w, "requested_bytes", r->requested);
            kv_reading(&w, "peak_allocated_bytes", r->peak_allocated);
            kv_reading(&w, "peak_reserved_bytes", r->peak_reserved);
            gm_json_end_object(&w);
        } else {
            gm_json_null(&w);
        }
        gm_json_kv_str(&w, "error", r->error[0] ? r->error : NULL);
        gm_json_kv_u64(&w, "left_running", r->n_left);
        gm_json_kv_str(&w, "left", r->n_left ? r->left : NULL);
        gm_json_end_object(&w);
    }
    gm_json_end_array(&w);
    gm_json_key(&w, "boundary");
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "end", gm_sweep_end_name(end));
    if (s->has_fit)
        gm_json_kv_u64(&w, "fits", s->fit);
    else
        gm_json_kv_null(&w, "fits");
    if (s->has_fail)
        gm_json_kv_u64(&w, "fails", s->fail);
    else
        gm_json_kv_null(&w, "fails");
    gm_json_kv_bool(&w, "exact", end == GM_SWEEP_END_BOUNDARY);
    gm_json_end_object(&w);
    gm_json_key(&w, "not_run");
    gm_json_begin_array(&w);
    for (size_t i = s->n_listed_run; i < s->n_values; i++)
        gm_json_u64(&w, s->values[i]);
    gm_json_end_array(&w);
    gm_json_end_object(&w);
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the sweep document failed");
    return GM_OK;
}

static int index_of(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; s && i < n; i++)
        if (!strcmp(names[i], s))
            return (int)i;
    return -1;
}

static void copy_str(char *out, size_t n, const char *s)
{
    snprintf(out, n, "%s", s ? s : "");
}

static enum gm_status load_run(const json_t *j, struct gm_sweep_run *r, size_t i,
                               struct gm_error *err)
{
    const json_t *dev = gm_jin_object(j, "device"), *ser = gm_jin_object(j, "series");
    const json_t *value = json_object_get(j, "value"), *status = json_object_get(j, "exit_status");
    const json_t *secs = json_object_get(j, "seconds");
    int outcome = index_of(outcome_names, sizeof(outcome_names) / sizeof(outcome_names[0]),
                           gm_jin_str(j, "outcome"));
    memset(r, 0, sizeof(*r));
    if (!json_is_integer(value) || json_integer_value(value) < 0 || outcome < 0)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "sweep: run %zu has no value or outcome",
                       i);
    r->value = (uint64_t)json_integer_value(value);
    r->bisection = gm_jin_bool(j, "bisection", false);
    r->outcome = (enum gm_sweep_outcome)outcome;
    r->exit_status = json_is_integer(status) && json_integer_value(status) >= -1 &&
                             json_integer_value(status) < 1024
                         ? (int)json_integer_value(status)
                         : -1;
    if (json_is_number(secs) && json_number_value(secs) >= 0 && json_number_value(secs) < 1e12)
        r->wall_ms = (uint64_t)(json_number_value(secs) * 1000.0 + 0.5);
    copy_str(r->device, sizeof(r->device), gm_jin_str(dev, "label"));
    r->baseline = gm_jin_reading(dev, "baseline_bytes");
    r->device_peak = gm_jin_reading(dev, "peak_bytes");
    r->rise = gm_jin_reading(dev, "rise_bytes");
    r->total = gm_jin_reading(dev, "total_bytes");
    r->command_peak = gm_jin_reading(j, "command_peak_bytes");
    if (ser) {
        struct gm_reading n = gm_jin_reading(ser, "phases"),
                          nf = gm_jin_reading(ser, "phases_failed");
        r->has_series = true;
        r->n_phases = n.valid && n.value < UINT32_MAX ? (uint32_t)n.value : 0;
        r->n_phases_failed = nf.valid && nf.value < UINT32_MAX ? (uint32_t)nf.value : 0;
        copy_str(r->phase, sizeof(r->phase), gm_jin_str(ser, "phase"));
        r->oom = gm_jin_bool(ser, "oom", false);
        r->requested = gm_jin_reading(ser, "requested_bytes");
        r->peak_allocated = gm_jin_reading(ser, "peak_allocated_bytes");
        r->peak_reserved = gm_jin_reading(ser, "peak_reserved_bytes");
    }
    copy_str(r->error, sizeof(r->error), gm_jin_str(j, "error"));
    {
        struct gm_reading left = gm_jin_reading(j, "left_running");
        r->n_left = left.valid && left.value <= UINT32_MAX ? (uint32_t)left.value : 0;
        copy_str(r->left, sizeof(r->left), gm_jin_str(j, "left"));
    }
    return GM_OK;
}

enum gm_status gm_sweep_load_mem(struct gm_sweep *s, const void *data, size_t len,
                                 uint64_t memory_limit, struct gm_error *err)
{
    json_t *root;
    const json_t *values, *runs, *settings;
    const char *schema;
    enum gm_status st;

    memset(s, 0, sizeof(*s));
    if ((st = gm_json_load_limit(data, len, 0, memory_limit, &root, err)) != GM_OK)
        return st;
    schema = gm_jin_str(root, "schema");
    values = gm_jin_array(root, "values");
    runs = gm_jin_array(root, "runs");
    settings = gm_jin_object(root, "settings");
    if (!schema || strcmp(schema, "gpumem.sweep/1") != 0 || !values || !runs ||
        !gm_jin_str(root, "parameter")) {
        st = gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "not a gpumem.sweep/1 document");
        goto out;
    }
    if (json_array_size(values) > GM_SWEEP_MAX_VALUES ||
        json_array_size(runs) > GM_SWEEP_MAX_RUNS) {
        st = gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "sweep: more than %d values or %d runs",
                     GM_SWEEP_MAX_VALUES, GM_SWEEP_MAX_RUNS);
        goto out;
    }
    copy_str(s->param, sizeof(s->param), gm_jin_str(root, "parameter"));
    copy_str(s->command, sizeof(s->command), gm_jin_str(root, "command"));
    s->bisect = gm_jin_bool(settings, "bisect", true);
    for (size_t i = 0; i < json_array_size(values); i++) {
        const json_t *v = json_array_get(values, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            st = gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "sweep: value %zu is not a number", i);
            goto out;
        }
        s->values[s->n_values++] = (uint64_t)json_integer_value(v);
    }
    /* Replaying the runs rebuilds the boundary by the same rule that made it. */
    for (size_t i = 0; i < json_array_size(runs); i++) {
        struct gm_sweep_run r;
        st = load_run(json_array_get(runs, i), &r, i, err);
        if (st != GM_OK)
            goto out;
        gm_sweep_record(s, &r);
    }
out:
    json_decref(root);
    return st;
}
