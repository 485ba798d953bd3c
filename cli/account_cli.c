/* SPDX-License-Identifier: MIT */
/* account_cli.c - running a command under gpumem account's interposer, and the report
 * (see account_cli.h). */
#include "account_cli.h"
#include "cli.h"

#include "gpumem/arena.h"
#include "gpumem/text.h"
#include "gpumem/units.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

int account_cli_begin(const char *cmd, struct account_cli *ac, const char *dir, bool keep,
                      uint64_t interval_ms, uint64_t stacks)
{
    char preload[PATH_MAX];
    struct gm_error err;
    struct gm_account_env_opts o;
    memset(ac, 0, sizeof(*ac));
    ac->keep = keep;
    /* $GPUMEM_ACCOUNT_LIBRARY: an interposer of the user's choice (docs/account.md) */
    if (gm_account_preload_path(getenv("GPUMEM_ACCOUNT_LIBRARY"), preload, sizeof(preload), &err) !=
        GM_OK) {
        cli_errorf(cmd, "%s%s", err.msg,
                   getenv("GPUMEM_ACCOUNT_LIBRARY") ? " ($GPUMEM_ACCOUNT_LIBRARY)"
                                                    : ": set GPUMEM_ACCOUNT_LIBRARY to its path");
        return GM_EXIT_SOFTWARE;
    }
    if (dir) {
        struct stat st;
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
            cli_errorf(cmd, "cannot make the folder '%s': %s", dir, strerror(errno));
            return GM_EXIT_CANTCREAT;
        }
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            cli_errorf(cmd, "'%s' is not a folder", dir);
            return GM_EXIT_CANTCREAT;
        }
        snprintf(ac->dir, sizeof(ac->dir), "%s", dir);
    } else {
        const char *tmp = getenv("TMPDIR");
        snprintf(ac->dir, sizeof(ac->dir), "%s/gpumem-account-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        if (!mkdtemp(ac->dir)) {
            cli_errorf(cmd, "cannot make a temporary folder in %s: %s", tmp && *tmp ? tmp : "/tmp",
                       strerror(errno));
            return GM_EXIT_CANTCREAT;
        }
        ac->temporary = true;
    }
    o.preload = preload;
    o.dir = ac->dir;
    o.interval_ms = interval_ms;
    o.stacks = stacks;
    if (gm_account_env(environ, &o, &ac->env, &err) != GM_OK)
        return cli_fail(cmd, &err);
    return 0;
}

int account_cli_read(const char *cmd, struct account_cli *ac, struct gm_account **out)
{
    struct gm_error err;
    *out = NULL;
    if (gm_account_new(out, &err) != GM_OK)
        return cli_fail(cmd, &err);
    if (gm_account_add_file(*out, ac->dir, &err) != GM_OK) {
        gm_account_free(*out);
        *out = NULL;
        if (err.code == GM_ERR_NOENT) {
            cli_errorf(cmd, "no process of the command used the GPU: no account file");
            return GM_EXIT_FAILURE;
        }
        return cli_fail(cmd, &err);
    }
    return 0;
}

int account_cli_merge(const char *cmd, struct account_cli *ac, const char *output, bool force)
{
    struct gm_output o;
    struct gm_error err;
    const char *paths[1] = {ac->dir};
    int rc = cli_output_open(&o, cmd, output, force);
    if (rc)
        return rc;
    if (gm_account_merge(o.f, paths, 1, &err) != GM_OK)
        return cli_output_fail(&o, cmd, &err);
    return cli_output_commit(&o, cmd);
}

void account_cli_end(const char *cmd, struct account_cli *ac)
{
    gm_free(ac->env);
    ac->env = NULL;
    if (!ac->dir[0])
        return;
    if (!ac->temporary || ac->keep) {
        cli_errorf(cmd, "the account files are in %s", ac->dir);
        return;
    }
    {
        DIR *d = opendir(ac->dir);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            char path[PATH_MAX + 256];
            if (!strncmp(e->d_name, "account-", 8)) {
                snprintf(path, sizeof(path), "%s/%s", ac->dir, e->d_name);
                unlink(path);
            }
        }
        if (d)
            closedir(d);
        if (rmdir(ac->dir) != 0)
            cli_errorf(cmd, "the account files are in %s (not removed: %s)", ac->dir,
                       strerror(errno));
    }
}

/* ---- the report ---- */

/* Text from a file (names, commands, frames): escaped before it reaches a terminal. */
static void esc(FILE *f, const char *s)
{
    gm_text_write_escaped(f, s);
}

static const char *mib(char *buf, size_t n, int64_t bytes)
{
    if (bytes < 0 && n > 1) {
        buf[0] = '-';
        gm_format_fixed(buf + 1, n - 1, (uint64_t) - (bytes + 1) + 1, GM_MIB, "MiB");
        return buf;
    }
    return gm_format_fixed(buf, n, (uint64_t)bytes, GM_MIB, "MiB");
}

static const char *reading_name(enum gm_account_reading r)
{
    switch (r) {
    case GM_ACCOUNT_READING_NVML_PROCESS:
        return "NVML, this process";
    case GM_ACCOUNT_READING_NVML_DEVICE:
        return "NVML, the device less what was used before";
    case GM_ACCOUNT_READING_MEM_GET_INFO:
        return "cuMemGetInfo, the whole device";
    default:
        return "not read";
    }
}

static double secs(uint64_t t, uint64_t t0)
{
    return t > t0 ? (double)(t - t0) / 1e9 : 0.0;
}

static void equation(FILE *f, const struct gm_account_balance *b, const char *what, uint64_t t0)
{
    char a[32], s[300];
    fprintf(f, "  %s, %.2f s:", what, secs(b->t_ns, t0));
    if (b->at == GM_ACCOUNT_AT_SIGNAL && b->used_valid && b->used_t_ns != b->t_ns)
        fprintf(f, " (device used read %.2f s earlier%s)", secs(b->t_ns, b->used_t_ns),
                b->consistent ? ", nothing tracked changed since" : "");
    else if (b->used_valid && !b->consistent)
        fprintf(f, " (calls ran while device used was read: the terms may lag)");
    fputc('\n', f);
    /* the one-line equation */
    if (b->used_valid)
        fprintf(f, "    device used (NVML) %s =", mib(a, sizeof(a), (int64_t)b->used));
    else
        fprintf(f, "    device used (not read) =");
    for (size_t i = 0; i < b->n_terms; i++) {
        fprintf(f, "%s ", i ? " +" : "");
        esc(f, gm_account_term_title(&b->terms[i]));
        fprintf(f, " %s", mib(a, sizeof(a), b->terms[i].bytes));
    }
    fputc('\n', f);
    /* each term with its exact bytes and its source */
    if (b->used_valid)
        fprintf(f, "      %-28s %14" PRIu64 "  %s\n", "device used", b->used,
                reading_name(b->used_source));
    for (size_t i = 0; i < b->n_terms; i++) {
        const struct gm_account_term *t = &b->terms[i];
        char title[32];
        gm_account_term_source(t, b, s, sizeof(s));
        gm_text_escape(title, sizeof(title), gm_account_term_title(t));
        fprintf(f, "    %c %-28s %14" PRId64 "  ", i == 0 && b->used_valid ? '=' : '+', title,
                t->bytes);
        esc(f, s);
        fputc('\n', f);
    }
}

static void process_report(FILE *f, const struct gm_account_process *p, uint64_t t0, bool stacks)
{
    char a[32], b[32], c[32];
    fprintf(f, "process %" PRIu32, p->pid);
    if (p->rank >= 0)
        fprintf(f, " rank %" PRId32, p->rank);
    if (p->local_rank >= 0)
        fprintf(f, " local rank %" PRId32, p->local_rank);
    fprintf(f, " (");
    esc(f, p->command);
    fprintf(f, "), %.2f s to %.2f s, ", secs(p->t_start_ns, t0), secs(p->t_end_ns, t0));
    if (p->end == GM_ACCOUNT_END_EXIT)
        fprintf(f, "exited\n");
    else if (p->end == GM_ACCOUNT_END_SIGNAL)
        fprintf(f, "ended by signal %d\n", p->signal);
    else
        fprintf(f, "left no end: killed (SIGKILL, the OOM killer) or _exit(); its last sample "
                   "stands for the end\n");
    if (p->disabled) {
        fprintf(f, "  accounting stopped at %.2f s (", secs(p->disabled_t_ns, t0));
        esc(f, p->disabled_reason);
        fprintf(f, "): every call passed through after it; the figures after that moment are "
                   "incomplete\n");
    }
    for (size_t i = 0; i < p->n_devices; i++) {
        const struct gm_account_device *d = &p->devices[i];
        fprintf(f, " cuda:%" PRId32 " ", d->cuda);
        esc(f, d->name);
        fprintf(f, "%s", d->uuid[0] ? " " : "");
        esc(f, d->uuid);
        fputc('\n', f);
        if (d->peak.valid)
            equation(f, &d->peak, "at its peak", t0);
        if (d->end.valid)
            equation(f, &d->end,
                     d->end.at == GM_ACCOUNT_AT_EXIT     ? "at exit"
                     : d->end.at == GM_ACCOUNT_AT_SIGNAL ? "at the signal"
                                                         : "at its last sample",
                     t0);
        if (d->peak.managed || d->peak.virtual_reserved)
            fprintf(f,
                    "  beside it, at the peak: managed %s (resident where used), address "
                    "space reserved %s (no memory)\n",
                    mib(a, sizeof(a), (int64_t)d->peak.managed),
                    mib(b, sizeof(b), (int64_t)d->peak.virtual_reserved));
    }
    if (p->host_peak)
        fprintf(f, " pinned host memory, at most %s (of it registered %s), not on the device\n",
                mib(a, sizeof(a), (int64_t)p->host_peak),
                mib(c, sizeof(c), (int64_t)p->host_registered_peak));
    if (p->n_dropped)
        fprintf(f,
                " note: %" PRIu64 " events not written (the queue was full; the figures are "
                "counters and stay exact)\n",
                p->n_dropped);
    if (p->n_unhooked)
        fprintf(f,
                " note: %" PRIu64 " entry points handed out unwrapped (cuGetProcAddress gave "
                "functions it could not match): their calls are in \"not seen\"\n",
                p->n_unhooked);
    if (stacks && p->n_largest) {
        fprintf(f, " largest allocations:\n");
        for (size_t i = 0; i < p->n_largest && i < 5; i++) {
            const struct gm_account_alloc *x = &p->largest[i];
            fprintf(f, "  %s ", mib(a, sizeof(a), (int64_t)x->bytes));
            esc(f, x->api);
            fprintf(f, " by ");
            esc(f, x->object[0] ? x->object : "an unknown caller");
            if (x->lib != GM_ACCOUNT_LIB_OTHER && x->lib != GM_ACCOUNT_LIB_UNKNOWN)
                fprintf(f, " (%s)", gm_account_lib_title(x->lib));
            fprintf(f, ", %s memory, %.2f s\n", gm_account_kind_key(x->kind), secs(x->t_ns, t0));
            for (size_t k = 0; k < x->n_frames && k < 6; k++) {
                fprintf(f, "      ");
                esc(f, x->frames[k]);
                fputc('\n', f);
            }
        }
    }
}

void account_report(FILE *f, const struct gm_account *a, bool stacks)
{
    size_t n = gm_account_n_processes(a);
    uint64_t t0 = n ? gm_account_process(a, 0)->t_start_ns : 0;
    for (size_t i = 1; i < n; i++)
        if (gm_account_process(a, i)->t_start_ns < t0)
            t0 = gm_account_process(a, i)->t_start_ns;
    fprintf(f,
            "gpumem account: %zu process%s used the GPU (times from the first one's start; "
            "MiB = 2^20 bytes)\n",
            n, n == 1 ? "" : "es");
    for (size_t i = 0; i < n; i++) {
        fputc('\n', f);
        process_report(f, gm_account_process(a, i), t0, stacks);
    }
}
