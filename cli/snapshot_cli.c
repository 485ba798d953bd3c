/* SPDX-License-Identifier: MIT */
/* snapshot_cli.c - helpers of the `gpumem snapshot` sub-commands (see snapshot_cli.h). */
#include "snapshot_cli.h"

#include "cli.h"
#include "opts.h"
#include "snapshot_ranks.h"

#include "gpumem/arena.h"
#include "gpumem/device.h"
#include "gpumem/text.h"
#include "gpumem/units.h"

#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct progress {
    const char *path;
    int shown;
};

static void on_progress(uint64_t done, uint64_t total, void *ctx)
{
    struct progress *p = ctx;
    unsigned pct = total ? (unsigned)(done * 100 / total) : 100;
    fprintf(stderr, "\rreading %s: %3u%%", p->path, pct);
    if (done >= total)
        fputc('\n', stderr);
    fflush(stderr);
    p->shown = 1;
}

/* The reader knob (docs/snapshot.md): 'general' loads with the general reader only, to hold
 * it against the flat one.  0, or the exit code of a bad value. */
static int reader_knob(const char *cmd, enum gm_snapshot_reader *reader)
{
    const char *rd = getenv("GPUMEM_SNAPSHOT_READER");
    *reader = GM_SNAPSHOT_READER_AUTO;
    if (rd && !strcmp(rd, "general"))
        *reader = GM_SNAPSHOT_READER_GENERAL;
    else if (rd && *rd && strcmp(rd, "auto"))
        return cli_usage(cmd, "GPUMEM_SNAPSHOT_READER is '%s': 'auto' or 'general'", rd);
    return 0;
}

static void load_opts(struct gm_snapshot_opts *opts, const struct snapcli_load_opts *o,
                      enum gm_snapshot_reader reader)
{
    memset(opts, 0, sizeof(*opts));
    opts->reader = reader;
    if (o) {
        opts->memory_limit = o->memory_limit;
        opts->drop_events = o->drop_events;
        opts->timeline_only = o->timeline_only;
        opts->consumer = o->consumer;
        opts->consume_events = o->consume_events;
    }
}

/* A path, or '-': standard input.  A path that names no regular file (a FIFO, a device,
 * a directory) gets the command line's way to read a stream added to its refusal. */
static enum gm_status load_path(const char *path, const struct gm_snapshot_opts *opts,
                                struct gm_snapshot **out, struct gm_error *err)
{
    struct stat st;
    enum gm_status rc;
    if (!strcmp(path, "-")) {
        /* standard input cannot be read a second time: keep the events, so that no work
         * needs the file read again with them (a load that consumed them, above) */
        struct gm_snapshot_opts keep = *opts;
        keep.consume_events = false;
        return gm_snapshot_load_fd(0, "standard input", &keep, out, err);
    }
    rc = gm_snapshot_load(path, opts, out, err);
    if (rc == GM_ERR_FORMAT && gm_digest_is_file(path))
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "'%s' is a digest, not a snapshot: this command needs the snapshot "
                       "(a digest keeps a rank's results, for stats, peak, categories, leaks, "
                       "oom, diff, info and report)",
                       path);
    if (rc != GM_OK && err && stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        size_t n = strlen(err->msg);
        if (S_ISDIR(st.st_mode))
            snprintf(err->msg + n, sizeof(err->msg) - n, ", or '-' for standard input");
        else
            snprintf(err->msg + n, sizeof(err->msg) - n,
                     ", or from standard input with '-' (gpumem snapshot ... - < '%s')", path);
    }
    return rc;
}

int snapcli_load(const char *cmd, const char *path, const struct snapcli_load_opts *o,
                 struct gm_snapshot **out)
{
    struct gm_error err;
    struct gm_snapshot_opts opts;
    struct progress pr = {path, 0};
    enum gm_snapshot_reader reader;
    enum gm_status st;
    int rc;

    if ((rc = reader_knob(cmd, &reader)) != 0)
        return rc;
    load_opts(&opts, o, reader);
    if (cli_stderr_is_tty()) {
        opts.progress = on_progress;
        opts.progress_ctx = &pr;
    }
    gm_error_clear(&err);
    st = load_path(path, &opts, out, &err);
    if (st != GM_OK) {
        if (pr.shown)
            fputc('\n', stderr);
        return cli_fail(cmd, &err);
    }
    return 0;
}

/* The shared state of snapcli_load_many()'s threads. */
struct many {
    char *const *paths;
    size_t n, next;
    struct gm_snapshot_opts opts;
    snapcli_work_fn work;
    void *ctx;
    struct gm_snapshot **out;
    struct gm_digest **digests; /* NULL, or digests read in place of snapshots */
    struct gm_error *errs;
    int *status;   /* per file: 0, or -1 when its error is in errs[] */
    uint8_t *done; /* per file: loaded and worked on (snapcli_load_each()) */
    bool keep;     /* snapcli_load_each(): a file's estimate counts until it is used */
    bool stop;     /* start no more files */
    size_t gate;   /* the next file allowed to start: files start in argument order */
    uint64_t *est;
    uint64_t limit, in_flight; /* bytes: the estimates of the files being read */
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

/* What a file may take while it is read and worked on (the library's estimate). */
static uint64_t estimate(const char *path)
{
    struct stat st;
    return gm_snapshot_memory_estimate(stat(path, &st) == 0 && st.st_size > 0 ? (uint64_t)st.st_size
                                                                              : 0);
}

static void *many_worker(void *arg)
{
    struct many *m = arg;
    for (;;) {
        size_t i;
        uint64_t est;
        struct gm_error *err;
        pthread_mutex_lock(&m->mu);
        if (m->next >= m->n || m->stop) {
            pthread_mutex_unlock(&m->mu);
            return NULL;
        }
        i = m->next++;
        est = estimate(m->paths[i]);
        /* in argument order, each once it fits beside the files being read (alone, it always
         * may): a later file never takes the memory an earlier one waits for */
        while (!m->stop && (m->gate != i || (m->in_flight && m->in_flight + est > m->limit)))
            pthread_cond_wait(&m->cv, &m->mu);
        if (m->stop) {
            m->done[i] = 1;
            pthread_cond_broadcast(&m->cv);
            pthread_mutex_unlock(&m->mu);
            return NULL;
        }
        m->gate++;
        m->in_flight += est;
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);

        err = &m->errs[i];
        gm_error_clear(err);
        if (m->digests && gm_digest_is_file(m->paths[i])) {
            if (gm_digest_load(m->paths[i], &m->digests[i], err) != GM_OK)
                m->status[i] = -1;
        } else if (load_path(m->paths[i], &m->opts, &m->out[i], err) != GM_OK) {
            m->status[i] = -1;
        } else if (m->work && m->work(m->ctx, i, m->out[i], err) != GM_OK) {
            m->status[i] = -1;
            if (m->out[i]->events_consumed) {
                /* the work needs the events after all: as the file read with them */
                struct gm_snapshot_opts again = m->opts;
                again.consume_events = false;
                gm_snapshot_free(m->out[i]);
                m->out[i] = NULL;
                gm_error_clear(err);
                m->status[i] = 0;
                if (load_path(m->paths[i], &again, &m->out[i], err) != GM_OK ||
                    m->work(m->ctx, i, m->out[i], err) != GM_OK)
                    m->status[i] = -1;
            }
        }

        pthread_mutex_lock(&m->mu);
        if (m->keep)
            m->est[i] = est; /* given back by the user of the file */
        else
            m->in_flight -= est;
        m->done[i] = 1;
        pthread_cond_broadcast(&m->cv);
        pthread_mutex_unlock(&m->mu);
    }
}

/* Set 'm' up for n files; 0 or an exit code. */
static int many_init(struct many *m, const char *cmd, char *const *paths, size_t n,
                     const struct snapcli_load_opts *o, snapcli_work_fn work, void *ctx,
                     struct gm_snapshot **out, bool keep)
{
    enum gm_snapshot_reader reader;
    int rc;
    memset(m, 0, sizeof(*m));
    memset(out, 0, n * sizeof(*out));
    if ((rc = reader_knob(cmd, &reader)) != 0)
        return rc;
    for (size_t i = 0, dash = 0; i < n; i++)
        if (!strcmp(paths[i], "-") && ++dash > 1)
            return cli_usage(cmd, "'-' (standard input) can be given once");
    m->paths = paths;
    m->n = n;
    m->work = work;
    m->ctx = ctx;
    m->out = out;
    m->keep = keep;
    m->digests = o ? o->digests : NULL;
    if (m->digests)
        memset(m->digests, 0, n * sizeof(*m->digests));
    load_opts(&m->opts, o, reader);
    /* several files load side by side, a thread a core: each load's consumers on its thread */
    if (n > 1)
        m->opts.threads = 1;
    if (n == 1 && cli_stderr_is_tty()) {
        /* progress only when one file is read */
        static struct progress pr;
        pr.path = paths[0];
        pr.shown = 0;
        m->opts.progress = on_progress;
        m->opts.progress_ctx = &pr;
    }
    if (o && o->memory_limit) {
        m->limit = o->memory_limit;
    } else {
        long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
        m->limit = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize / 2 : UINT64_MAX;
    }
    m->errs = gm_calloc(n ? n : 1, sizeof(*m->errs));
    m->status = gm_calloc(n ? n : 1, sizeof(*m->status));
    m->done = gm_calloc(n ? n : 1, 1);
    m->est = gm_calloc(n ? n : 1, sizeof(*m->est));
    if (!m->errs || !m->status || !m->done || !m->est) {
        gm_free(m->errs);
        gm_free(m->status);
        gm_free(m->done);
        gm_free(m->est);
        cli_errorf(cmd, "out of memory");
        return GM_EXIT_SOFTWARE;
    }
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    return 0;
}

static void many_release(struct many *m)
{
    pthread_cond_destroy(&m->cv);
    pthread_mutex_destroy(&m->mu);
    gm_free(m->errs);
    gm_free(m->status);
    gm_free(m->done);
    gm_free(m->est);
}

/* Start the worker threads (as many as cores, at most one per file); returns how many
 * started (0: the caller reads the files itself). */
static size_t many_start(struct many *m, pthread_t *th, size_t max)
{
    unsigned cores = gm_cpus_usable(); /* as a single load's worker: the affinity */
    size_t n_th = cores > 0 ? (size_t)cores : 1, started = 0;
    if (n_th > m->n)
        n_th = m->n;
    if (n_th > max)
        n_th = max;
    if (n_th <= 1)
        return 0;
    for (; started < n_th; started++)
        if (pthread_create(&th[started], NULL, many_worker, m) != 0)
            break;
    return started;
}

int snapcli_load_many(const char *cmd, char *const *paths, size_t n,
                      const struct snapcli_load_opts *o, snapcli_work_fn work, void *ctx,
                      struct gm_snapshot **out)
{
    struct many m;
    pthread_t th[64];
    size_t started;
    int rc = many_init(&m, cmd, paths, n, o, work, ctx, out, false);
    if (rc)
        return rc;
    started = many_start(&m, th, sizeof(th) / sizeof(th[0]));
    if (!started)
        many_worker(&m);
    for (size_t t = 0; t < started; t++)
        pthread_join(th[t], NULL);
    /* the first failure in argument order, as one at a time would have stopped there */
    for (size_t i = 0; i < n && rc == 0; i++)
        if (m.status[i])
            rc = cli_fail(cmd, &m.errs[i]);
    if (rc) {
        for (size_t i = 0; i < n; i++) {
            gm_snapshot_free(out[i]);
            out[i] = NULL;
            if (m.digests) {
                gm_digest_free(m.digests[i]);
                m.digests[i] = NULL;
            }
        }
    }
    many_release(&m);
    return rc;
}

int snapcli_load_each(const char *cmd, char *const *paths, size_t n,
                      const struct snapcli_load_opts *o, snapcli_work_fn work, snapcli_use_fn use,
                      void *ctx)
{
    struct many m;
    pthread_t th[64];
    size_t started;
    struct gm_snapshot **out = gm_calloc(n ? n : 1, sizeof(*out));
    int rc = out ? many_init(&m, cmd, paths, n, o, work, ctx, out, true) : GM_EXIT_SOFTWARE;
    if (rc) {
        gm_free(out);
        return rc;
    }
    started = many_start(&m, th, sizeof(th) / sizeof(th[0]));
    if (!started) {
        /* one at a time in this thread: each file used as soon as it is read */
        for (size_t i = 0; i < n && rc == 0; i++) {
            m.n = i + 1;
            many_worker(&m);
            rc = m.status[i] ? cli_fail(cmd, &m.errs[i]) : use(ctx, i, out[i]);
            gm_snapshot_free(out[i]);
            out[i] = NULL;
            m.in_flight -= m.est[i];
        }
        m.n = n;
    } else {
        for (size_t i = 0; i < n && rc == 0; i++) {
            pthread_mutex_lock(&m.mu);
            while (!m.done[i])
                pthread_cond_wait(&m.cv, &m.mu);
            pthread_mutex_unlock(&m.mu);
            rc = m.status[i] ? cli_fail(cmd, &m.errs[i]) : use(ctx, i, out[i]);
            gm_snapshot_free(out[i]);
            out[i] = NULL;
            pthread_mutex_lock(&m.mu);
            m.in_flight -= m.est[i];
            if (rc)
                m.stop = true; /* as one at a time: nothing after the failure */
            pthread_cond_broadcast(&m.cv);
            pthread_mutex_unlock(&m.mu);
        }
        for (size_t t = 0; t < started; t++)
            pthread_join(th[t], NULL);
        for (size_t i = 0; i < n; i++)
            gm_snapshot_free(out[i]); /* read before the failure stopped the rest */
    }
    many_release(&m);
    gm_free(out);
    return rc;
}

const char *snapcli_name(const char *path)
{
    return strcmp(path, "-") ? path : "standard input";
}

char *snapcli_safe(char *buf, size_t n, const char *s)
{
    return gm_text_escape(buf, n, s);
}

char *snapcli_time(char *buf, size_t n, int64_t time_us)
{
    time_t s = (time_t)(time_us / 1000000);
    long us = (long)(time_us % 1000000);
    struct tm tm;
    if (us < 0) {
        us += 1000000;
        s -= 1;
    }
    if (!gmtime_r(&s, &tm)) {
        snprintf(buf, n, "%" PRId64 " us", time_us);
        return buf;
    }
    snprintf(buf, n, "%04d-%02d-%02d %02d:%02d:%02d.%06ld UTC", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us);
    return buf;
}

const char *snapcli_short_path(const char *path)
{
    const char *p = strstr(path, "site-packages");
    const char *cut = path;
    int seps = 0;
    if (!p)
        p = strstr(path, "dist-packages");
    if (p) {
        p += strlen("site-packages");
        return *p == '/' || *p == '\\' ? p + 1 : p;
    }
    for (const char *q = path + strlen(path); q > path; q--) {
        if ((q[-1] == '/' || q[-1] == '\\') && ++seps == 3) {
            cut = q;
            break;
        }
    }
    return cut;
}

/* "file:line name" with the path shortened, or the C++ name cut at 60 characters (an
 * autograd node without its namespace); escaped into buf. */
static char *frame_short(char *buf, size_t n, const struct gm_snapshot_frame *f)
{
    static const char node_ns[] = "torch::autograd::generated::";
    char raw[512];
    if (f->is_python)
        snprintf(raw, sizeof(raw), "%s:%" PRId64 " %s", snapcli_short_path(f->filename), f->line,
                 f->name);
    else
        snprintf(raw, sizeof(raw), "%.60s",
                 f->name +
                     (strncmp(f->name, node_ns, sizeof(node_ns) - 1) ? 0 : sizeof(node_ns) - 1));
    return gm_text_escape(buf, n, raw);
}

static const struct gm_snapshot_frame *view_frame(const struct gm_snapshot *snap, uint32_t stack,
                                                  long i)
{
    const struct gm_snapshot_stack *s = &snap->stacks[stack];
    return i >= 0 && (uint32_t)i < s->n_frames && s->frames[i] < snap->n_frames
               ? &snap->frames[s->frames[i]]
               : NULL;
}

/* Whether frame index i is one the view shows with up to 'callers' callers. */
static bool in_view(const struct gm_snapshot_stack_view *v, size_t callers, long i)
{
    if (i == v->first || i == v->via)
        return true;
    for (size_t k = 0; k < v->n_callers && k < callers; k++)
        if (v->callers[k] == i)
            return true;
    return false;
}

void snapcli_print_stack(FILE *f, const struct gm_snapshot *snap, uint32_t stack, int callers,
                         long apart, int indent)
{
    struct gm_snapshot_stack_view v;
    const struct gm_snapshot_frame *fr;
    size_t shown = callers > 0 ? (size_t)callers : 0;
    uint32_t folded;
    char buf[512];
    gm_snapshot_stack_view(snap, stack, &v);
    if (v.first < 0 || !(fr = view_frame(snap, stack, v.first))) {
        fprintf(f, "(no stack recorded)\n");
        return;
    }
    if (shown > v.n_callers)
        shown = v.n_callers;
    fprintf(f, "%s\n", gm_snapshot_frame_text(buf, sizeof(buf), fr));
    for (size_t k = 0; k < shown; k++)
        fprintf(f, "%*s<- %s\n", indent, "",
                gm_snapshot_frame_text(buf, sizeof(buf), view_frame(snap, stack, v.callers[k])));
    folded = v.n_folded + (uint32_t)(v.n_callers - shown);
    if (apart >= 0 && !in_view(&v, shown, apart) && (fr = view_frame(snap, stack, apart))) {
        fprintf(f, "%*sfrom %s\n", indent, "", gm_snapshot_frame_text(buf, sizeof(buf), fr));
        folded = folded ? folded - 1 : 0;
    }
    if (v.via >= 0 && (fr = view_frame(snap, stack, v.via)))
        fprintf(f, "%*svia %s\n", indent, "", gm_snapshot_frame_text(buf, sizeof(buf), fr));
    if (folded)
        fprintf(f, "%*s(%u more frame%s folded: %s)\n", indent, "", folded, folded == 1 ? "" : "s",
                v.first_is_user ? "torch internals, C++ and library code"
                                : "no user frame; torch internals, C++ and library code");
}

void snapcli_stack_line(char *buf, size_t n, const struct gm_snapshot *snap, uint32_t stack,
                        long apart)
{
    struct gm_snapshot_stack_view v;
    const struct gm_snapshot_frame *fr;
    char a[512], b[512];
    size_t len;
    gm_snapshot_stack_view(snap, stack, &v);
    if (v.first < 0 || !(fr = view_frame(snap, stack, v.first))) {
        snprintf(buf, n, "(no stack recorded)");
        return;
    }
    frame_short(a, sizeof(a), fr);
    if (v.via >= 0 && (fr = view_frame(snap, stack, v.via)))
        snprintf(buf, n, "%s via %s", a, frame_short(b, sizeof(b), fr));
    else if (!v.first_is_user && v.n_callers && (fr = view_frame(snap, stack, v.callers[0])))
        snprintf(buf, n, "%s < %s", a, frame_short(b, sizeof(b), fr)); /* operator < node */
    else
        snprintf(buf, n, "%s", a);
    len = strlen(buf);
    if (apart >= 0 && apart != v.first && apart != v.via && (fr = view_frame(snap, stack, apart)) &&
        len < n)
        snprintf(buf + len, n - len, ", from %s", frame_short(b, sizeof(b), fr));
}

void snapcli_print_oom_banner(FILE *f, const struct gm_snapshot *snap, const char *path)
{
    const char *sep = "OUT OF MEMORY: ";
    char a[32], b[32], safe[512];
    for (size_t i = 0; i < snap->n_devices; i++) {
        const struct gm_snapshot_device *d = &snap->devices[i];
        struct gm_snapshot_oom o;
        uint64_t n = d->n_actions[GM_ACTION_OOM];
        if (gm_snapshot_first_oom(snap, d, &o))
            fprintf(f, "%sdevice %d could not allocate %s at event %zu (%s free in CUDA)%s", sep,
                    (int)d->index, gm_format_bytes(a, sizeof(a), o.requested, GM_UNITS_IEC),
                    o.event, gm_format_bytes(b, sizeof(b), o.device_free, GM_UNITS_IEC),
                    n > 1 ? ", and more after it" : "");
        else if (n)
            fprintf(f, "%sdevice %d has %" PRIu64 " out-of-memory event%s", sep, (int)d->index, n,
                    n == 1 ? "" : "s");
        else
            continue;
        sep = "; ";
    }
    if (strcmp(sep, "; "))
        return;
    fprintf(f, " (gpumem snapshot oom %s says why)\n", snapcli_safe(safe, sizeof(safe), path));
}

int snapcli_device_arg(const char *cmd, const char *s, int32_t *dev)
{
    uint64_t v;
    struct gm_error err;
    if (!s || !strcmp(s, "all")) {
        *dev = -1;
        return 0;
    }
    if (gm_parse_u64(s, &v, &err) != GM_OK || v > INT32_MAX)
        return cli_usage(cmd, "--device wants a device index or 'all', not '%s'", s);
    *dev = (int32_t)v;
    return 0;
}

int snapcli_rank_files(const char *cmd, char *const *args, size_t n, struct gm_rank_files *out)
{
    struct gm_error err;
    const char **a = gm_calloc(n ? n : 1, sizeof(*a));
    enum gm_status st;
    if (!a) {
        cli_errorf(cmd, "out of memory");
        return GM_EXIT_SOFTWARE;
    }
    for (size_t i = 0; i < n; i++)
        a[i] = args[i];
    st = gm_rank_files_list(a, n, out, &err);
    gm_free(a);
    return st == GM_OK ? 0 : cli_fail(cmd, &err);
}

/* A rank's digest where a command reads one file at a time: what it holds (its own JSON
 * document with --json). */
static int digest_one(const char *cmd, const char *path, bool json)
{
    struct gm_digest *d;
    struct gm_error err;
    int rc = 0;
    if (gm_digest_load(path, &d, &err) != GM_OK)
        return cli_fail(cmd, &err);
    if (!json) {
        ranks_print_digest(stdout, path, d);
    } else {
        /* the file was just read whole and checked: copy it */
        FILE *f = fopen(path, "rb");
        char buf[8192];
        size_t n;
        while (f && (n = fread(buf, 1, sizeof(buf), f)) > 0)
            if (fwrite(buf, 1, n, stdout) != n)
                rc = GM_EXIT_IOERR;
        if (!f || ferror(f) || putchar('\n') == EOF)
            rc = GM_EXIT_IOERR;
        if (f)
            fclose(f);
    }
    gm_digest_free(d);
    return rc;
}

int snapcli_each_rank_file(const char *cmd, char *const *args, size_t n, bool json,
                           snapcli_file_fn one, void *ctx)
{
    struct gm_rank_files rf;
    int rc = snapcli_rank_files(cmd, args, n, &rf);
    if (rc)
        return rc;
    if (json && rf.n > 1)
        printf("[\n");
    for (size_t i = 0; i < rf.n && rc == 0; i++) {
        uint64_t rank;
        bool named = gm_rank_from_name(rf.paths[i], &rank);
        if (json && i)
            printf(",\n");
        if (!json && (named || rf.n > 1))
            printf("%s==> %s <== rank %" PRIu64 " (by %s)\n", i ? "\n" : "",
                   snapcli_name(rf.paths[i]), named ? rank : (uint64_t)i,
                   gm_rank_source_name(named ? GM_RANK_BY_NAME : GM_RANK_BY_ORDER));
        fflush(stdout);
        rc = gm_digest_is_file(rf.paths[i]) ? digest_one(cmd, rf.paths[i], json)
                                            : one(ctx, rf.paths[i]);
    }
    if (json && rf.n > 1 && rc == 0)
        printf("]\n");
    gm_rank_files_release(&rf);
    return rc;
}

int snapcli_rank_argv(char ***argv, int *n_pos, struct snapcli_rank_args *ra)
{
    const char *cmd = (*argv)[0];
    int rc = snapcli_rank_files(cmd, *argv + 1, (size_t)*n_pos, &ra->files);
    if (rc)
        return rc;
    if (ra->files.n > (size_t)INT_MAX - 1 ||
        !(ra->argv = gm_calloc(ra->files.n + 2, sizeof(*ra->argv)))) {
        gm_rank_files_release(&ra->files);
        cli_errorf(cmd, "out of memory");
        return GM_EXIT_SOFTWARE;
    }
    ra->argv[0] = (*argv)[0];
    for (size_t i = 0; i < ra->files.n; i++)
        ra->argv[i + 1] = ra->files.paths[i];
    *argv = ra->argv;
    *n_pos = (int)ra->files.n;
    return 0;
}

void snapcli_rank_argv_release(struct snapcli_rank_args *ra)
{
    gm_free(ra->argv);
    gm_rank_files_release(&ra->files);
    memset(ra, 0, sizeof(*ra));
}

int snapcli_rules_load(const char *cmd, const char *path, struct gm_category_rules **out)
{
    struct gm_error err;
    *out = NULL;
    if (!path)
        return 0;
    if (gm_category_rules_load(path, out, &err) != GM_OK)
        return cli_fail(cmd, &err);
    return 0;
}
