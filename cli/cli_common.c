/* SPDX-License-Identifier: MIT */
/* cli_common.c - shared CLI helpers (see cli.h). */
#define _GNU_SOURCE /* fopencookie(): a FILE that keeps the errno of a failed write */
#include "cli.h"
#include "opts.h"

#include "gpumem/file.h"
#include "gpumem/text.h"
#include "gpumem/version.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const cli_color_choices[] = {"auto", "always", "never", NULL};

/* "<cmd>: <message><tail>" on stderr, the message escaped: it quotes paths, names from
 * files and values from the environment, which must not reach a terminal raw. */
static void report(const char *cmd, const char *msg, const char *tail)
{
    fprintf(stderr, "%s: ", cmd);
    gm_text_write_escaped(stderr, msg);
    fprintf(stderr, "%s\n", tail);
}

static void vreport(const char *cmd, const char *tail, const char *fmt, va_list ap)
{
    char msg[8192];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    report(cmd, msg, tail);
}

void cli_errorf(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vreport(cmd, "", fmt, ap);
    va_end(ap);
}

int cli_fail(const char *cmd, const struct gm_error *err)
{
    char tail[64] = "";
    if (err->offset != GM_NO_OFFSET)
        snprintf(tail, sizeof(tail), " (at byte %" PRIu64 ")", err->offset);
    report(cmd, err->msg[0] ? err->msg : gm_status_name(err->code), tail);
    return gm_status_exit_code(err->code);
}

int cli_usage(const char *cmd, const char *fmt, ...)
{
    char tail[300];
    va_list ap;
    snprintf(tail, sizeof(tail), " (see '%s --help')", cmd);
    va_start(ap, fmt);
    vreport(cmd, tail, fmt, ap);
    va_end(ap);
    return GM_EXIT_USAGE;
}

bool cli_use_color(enum cli_color mode, FILE *f)
{
    const char *nc, *term;
    if (mode == CLI_COLOR_ALWAYS)
        return true;
    if (mode == CLI_COLOR_NEVER)
        return false;
    nc = getenv("NO_COLOR");
    if (nc && *nc)
        return false;
    term = getenv("TERM");
    if (term && !strcmp(term, "dumb"))
        return false;
    return isatty(cli_fileno(f)) == 1;
}

bool cli_stderr_is_tty(void)
{
    return isatty(2) == 1;
}

void cli_json_begin(struct gm_json *w, FILE *f, const char *schema)
{
    char s[128];
    snprintf(s, sizeof(s), "gpumem.%s/1", schema);
    gm_json_init(w, f, GM_JSON_PRETTY);
    gm_json_begin_object(w);
    gm_json_kv_str(w, "schema", s);
    gm_json_kv_str(w, "gpumem_version", gm_version());
}

int cli_json_end(struct gm_json *w, const char *cmd)
{
    FILE *f = w->f;
    gm_json_end_object(w);
    if (!gm_json_finish(w)) {
        /* a failed write to stdout is reported once, with its errno, by cli_stdout_end() */
        if (f != stdout || !ferror(f))
            cli_errorf(cmd, "writing JSON failed");
        return GM_EXIT_IOERR;
    }
    return 0;
}

/* The command running, for the messages of cli_stdout_end(). */
static const char *current_cmd = "gpumem";

int cli_dispatch(const struct cli_command *table, const char *prefix, int argc, char **argv)
{
    static char name[256];
    const char *want = argc > 1 ? argv[1] : NULL;

    if (want && strcmp(want, "--help") && strcmp(want, "-h") && strcmp(want, "help")) {
        for (const struct cli_command *c = table; c->name; c++) {
            if (!strcmp(c->name, want)) {
                snprintf(name, sizeof(name), "%s %s", prefix, c->name);
                argv[1] = name;
                current_cmd = name;
                return c->fn(argc - 1, argv + 1);
            }
        }
    }
    if (want && !strcmp(want, "help") && argc > 2) {
        /* "gpumem help estimate" is "gpumem estimate --help" */
        for (const struct cli_command *c = table; c->name; c++) {
            if (!strcmp(c->name, argv[2])) {
                static char help[] = "--help";
                char *args[3];
                snprintf(name, sizeof(name), "%s %s", prefix, c->name);
                args[0] = name;
                args[1] = help;
                args[2] = NULL;
                return c->fn(2, args);
            }
        }
    }
    {
        FILE *f = want ? stdout : stderr;
        bool unknown = want && strcmp(want, "--help") && strcmp(want, "-h") &&
                       !(strcmp(want, "help") == 0 && argc == 2);
        if (unknown)
            f = stderr;
        if (unknown) {
            char safe[256];
            const char *names[64], *near;
            size_t n = 0;
            for (const struct cli_command *c = table; c->name && n < 64; c++)
                names[n++] = c->name;
            near = gm_text_closest(want, strlen(want), names, n, false);
            fprintf(f, "%s: '%s' is not a command", prefix,
                    gm_text_escape(safe, sizeof(safe), want));
            if (near)
                fprintf(f, ": did you mean '%s %s'?", prefix, near);
            fprintf(f, "\n\n");
        }
        fprintf(f, "usage: %s COMMAND [OPTIONS] [ARGS]\n\ncommands:\n", prefix);
        for (const struct cli_command *c = table; c->name; c++)
            fprintf(f, "  %-12s  %s\n", c->name, c->summary);
        fprintf(f, "\n'%s COMMAND --help' describes one command.\n", prefix);
        return (want && !unknown) ? 0 : GM_EXIT_USAGE;
    }
}

/* ---- writes that are checked: stdout and output files ---- */

/* A FILE whose bytes go to 'fd' through write(2), keeping the errno of the first failed
 * write: ferror() alone cannot say that the disk is full. */
static ssize_t sink_write(void *cookie, const char *buf, size_t n)
{
    struct cli_sink *s = cookie;
    size_t done = 0;
    while (done < n) {
        ssize_t k = write(s->fd, buf + done, n - done);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            if (!s->err)
                s->err = k < 0 ? errno : EIO;
            return done ? (ssize_t)done : -1;
        }
        done += (size_t)k;
    }
    return (ssize_t)n;
}

/* The descriptor stays open: its owner closes it (stdout never, an output at commit). */
static FILE *sink_open(struct cli_sink *s, int fd)
{
    cookie_io_functions_t io = {NULL, sink_write, NULL, NULL};
    s->fd = fd;
    s->err = 0;
    return fopencookie(s, "w", io);
}

const char *cli_errno_text(char *buf, size_t n, int e)
{
    static const struct {
        int e;
        const char *name;
    } names[] = {
        {ENOSPC, "ENOSPC"}, {EDQUOT, "EDQUOT"}, {EFBIG, "EFBIG"},   {EIO, "EIO"},
        {EPIPE, "EPIPE"},   {EROFS, "EROFS"},   {EACCES, "EACCES"}, {EBADF, "EBADF"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (names[i].e == e) {
            snprintf(buf, n, "%s (%s)", strerror(e), names[i].name);
            return buf;
        }
    snprintf(buf, n, "%s", strerror(e));
    return buf;
}

static struct cli_sink stdout_sink;

void cli_stdout_begin(void)
{
    FILE *f;
    fflush(stdout);
    f = sink_open(&stdout_sink, 1);
    if (!f)
        return; /* keep the plain stdout: only the errno of a failure would be lost */
    setvbuf(f, NULL, isatty(1) == 1 ? _IOLBF : _IOFBF, BUFSIZ);
    stdout = f; /* glibc: stdout is a variable meant to be assignable */
}

int cli_stdout_end(const char *cmd, int rc)
{
    char why[128];
    int e;
    if (fflush(stdout) != 0 && !stdout_sink.err)
        stdout_sink.err = errno ? errno : EIO;
    e = stdout_sink.err;
    if (!e && ferror(stdout))
        e = EIO;
    if (!e)
        return rc;
    cli_errorf(cmd ? cmd : current_cmd, "writing to standard output failed: %s",
               cli_errno_text(why, sizeof(why), e));
    return rc ? rc : GM_EXIT_IOERR;
}

int cli_fileno(FILE *f)
{
    if (f == stdout)
        return 1;
    if (f == stderr)
        return 2;
    return fileno(f);
}

/* Temporary files to remove when SIGINT, SIGTERM or SIGHUP ends the process: a report
 * interrupted halfway leaves nothing beside its target.  The handler only unlinks (which
 * is async-signal-safe) and dies of the same signal. */
#define MAX_PENDING 4
static char *volatile pending[MAX_PENDING];
static volatile sig_atomic_t cleanup_installed;

static void cleanup_on_signal(int sig)
{
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending[i])
            unlink(pending[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void pending_add(struct cli_output *o)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    o->slot = -1;
    for (int i = 0; i < MAX_PENDING; i++)
        if (!pending[i]) {
            pending[i] = o->tmp;
            o->slot = i;
            break;
        }
    if (cleanup_installed)
        return;
    cleanup_installed = 1;
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct sigaction sa, old;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = cleanup_on_signal;
        sigemptyset(&sa.sa_mask);
        /* leave alone a signal the caller ignores (nohup) or already handles */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL)
            sigaction(sigs[i], &sa, NULL);
    }
}

static void pending_remove(struct cli_output *o)
{
    if (o->slot >= 0 && o->slot < MAX_PENDING)
        pending[o->slot] = NULL;
    o->slot = -1;
}

static mode_t current_umask(void)
{
    mode_t u = umask(022);
    umask(u);
    return u;
}

/* Folder part of 'path' into out[n] ("." when there is none). */
static void folder_of(const char *path, char *out, size_t n)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(out, n, ".");
    else if (slash == path)
        snprintf(out, n, "/");
    else
        snprintf(out, n, "%.*s", (int)(slash - path), path);
}

/* 0 when an existing 'path' may be replaced (a regular file, with --force); otherwise the
 * exit code after saying why not. */
static int refuse_existing(const char *cmd, const char *path, const struct stat *st, bool force)
{
    if (S_ISDIR(st->st_mode)) {
        cli_errorf(cmd, "'%s' is a directory: give the name of a file to write", path);
        return GM_EXIT_CANTCREAT;
    }
    if (!force) {
        cli_errorf(cmd, "'%s' exists: refusing to overwrite it (use --force)", path);
        return GM_EXIT_CANTCREAT;
    }
    if (!S_ISREG(st->st_mode)) {
        cli_errorf(cmd, "'%s' is %s: --force replaces only regular files", path,
                   gm_file_kind(st->st_mode));
        return GM_EXIT_CANTCREAT;
    }
    return 0;
}

int cli_output_check(const char *cmd, const char *path, bool force)
{
    struct stat st;
    char dir[4096];
    const char *base = strrchr(path, '/');
    size_t len = strlen(path);
    long name_max;

    base = base ? base + 1 : path;
    if (len == 0)
        return cli_usage(cmd, "the output file name is empty");
    if (len >= sizeof(((struct cli_output *)NULL)->path) - 32)
        return cli_usage(cmd, "output path too long: %zu bytes (at most %zu)", len,
                         sizeof(((struct cli_output *)NULL)->path) - 33);
    if (!*base)
        return cli_usage(cmd, "'%s' names a folder: give the name of a file to write", path);
    folder_of(path, dir, sizeof(dir));
    name_max = pathconf(dir, _PC_NAME_MAX);
    if (name_max <= 0)
        name_max = 255;
    if (strlen(base) > (size_t)name_max)
        return cli_usage(cmd, "output file name too long: %zu bytes (at most %ld)", strlen(base),
                         name_max);
    if (lstat(path, &st) == 0)
        return refuse_existing(cmd, path, &st, force);
    if (stat(dir, &st) != 0) {
        int e = errno;
        if (e == ENOENT || e == ENOTDIR) {
            /* the output cannot be created (73), which is not an input missing (66) */
            cli_errorf(cmd, "folder '%s' does not exist (for the output '%s')", dir, path);
            return GM_EXIT_CANTCREAT;
        }
        cli_errorf(cmd, "folder '%s': %s", dir, strerror(e));
        return GM_EXIT_CANTCREAT;
    }
    if (!S_ISDIR(st.st_mode)) {
        cli_errorf(cmd, "'%s' is not a folder (for the output '%s')", dir, path);
        return GM_EXIT_CANTCREAT;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        cli_errorf(cmd, "cannot create files in folder '%s': %s", dir, strerror(errno));
        return GM_EXIT_CANTCREAT;
    }
    return 0;
}

int cli_output_open(struct cli_output *o, const char *cmd, const char *path, bool force)
{
    char dir[sizeof(o->path) - 32]; /* cli_output_check(): the path is shorter */
    int fd, rc;

    memset(o, 0, sizeof(*o));
    o->fd = -1;
    o->slot = -1;
    o->force = force;
    rc = cli_output_check(cmd, path, force);
    if (rc)
        return rc;
    snprintf(o->path, sizeof(o->path), "%s", path);
    snprintf(o->written, sizeof(o->written), "%s", path);
    o->mode = 0666 & ~current_umask();
    folder_of(path, dir, sizeof(dir));
    snprintf(o->tmp, sizeof(o->tmp), "%s/.gpumem-tmp-XXXXXX", dir);
    /* registered before it exists: a signal right after the file is made still removes it */
    pending_add(o);
    fd = mkstemp(o->tmp); /* 0600 while it is written */
    if (fd < 0) {
        int e = errno;
        cli_errorf(cmd, "cannot create a file beside '%s': %s", path, strerror(e));
        pending_remove(o);
        o->tmp[0] = '\0';
        return GM_EXIT_CANTCREAT;
    }
    /* a command that gpumem runs (watch) must not inherit it */
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    o->fd = fd;
    o->f = sink_open(&o->sink, fd);
    if (!o->f) {
        cli_errorf(cmd, "cannot open '%s': %s", o->tmp, strerror(errno));
        cli_output_abort(o);
        return GM_EXIT_IOERR;
    }
    return 0;
}

/* "name-1.csv" for "name.csv": a name beside 'path' with 'k' before the extension. */
static void beside_name(char *out, size_t n, const char *path, unsigned k)
{
    const char *slash = strrchr(path, '/'), *dot = strrchr(path, '.');
    if (!dot || (slash && dot < slash) || dot == (slash ? slash + 1 : path))
        dot = path + strlen(path);
    snprintf(out, n, "%.*s-%u%s", (int)(dot - path), path, k, dot);
}

/* Move the finished temporary file to a free name beside o->path (o->beside). */
static int commit_beside(struct cli_output *o, const char *cmd)
{
    for (unsigned k = 1; k < 1000; k++) {
        beside_name(o->written, sizeof(o->written), o->path, k);
        if (link(o->tmp, o->written) == 0) {
            unlink(o->tmp);
            pending_remove(o);
            cli_errorf(cmd,
                       "'%s' appeared while gpumem ran (another run writing it?): wrote '%s' "
                       "instead",
                       o->path, o->written);
            return 0;
        }
        if (errno != EEXIST)
            break;
    }
    cli_errorf(cmd, "cannot write '%s' or a name beside it: %s; the data is in '%s'", o->path,
               strerror(errno), o->tmp);
    pending_remove(o); /* keep what was written */
    return GM_EXIT_CANTCREAT;
}

int cli_output_commit(struct cli_output *o, const char *cmd)
{
    char why[128];
    struct stat st;
    mode_t mode = (mode_t)o->mode;
    int e = 0;

    if (fflush(o->f) != 0 && !o->sink.err)
        o->sink.err = errno ? errno : EIO;
    if (!o->sink.err && ferror(o->f))
        o->sink.err = EIO;
    if (!o->sink.err && fsync(o->fd) != 0 && errno != EINVAL && errno != EROFS)
        o->sink.err = errno;
    e = o->sink.err;
    fclose(o->f);
    o->f = NULL;
    if (e) {
        cli_errorf(cmd, "writing '%s' failed: %s", o->path, cli_errno_text(why, sizeof(why), e));
        cli_output_abort(o);
        return GM_EXIT_IOERR;
    }
    /* --force keeps the mode of the file it replaces; a new file gets 0666 less the umask */
    if (lstat(o->path, &st) == 0) {
        int rc;
        if (o->beside && !(o->force && S_ISREG(st.st_mode))) {
            (void)fchmod(o->fd, mode);
            close(o->fd);
            o->fd = -1;
            return commit_beside(o, cmd);
        }
        rc = refuse_existing(cmd, o->path, &st, o->force);
        if (rc) {
            cli_output_abort(o);
            return rc;
        }
        mode = st.st_mode & 07777;
    }
    (void)fchmod(o->fd, mode);
    close(o->fd);
    o->fd = -1;
    if (o->force) {
        if (rename(o->tmp, o->path) != 0) {
            cli_errorf(cmd, "cannot write '%s': %s", o->path, strerror(errno));
            cli_output_abort(o);
            return GM_EXIT_CANTCREAT;
        }
        pending_remove(o);
        return 0;
    }
    /* link() fails if the target exists, so a file created meanwhile is never replaced. */
    if (link(o->tmp, o->path) != 0) {
        e = errno;
        if (e == EEXIST && o->beside)
            return commit_beside(o, cmd);
        if (e == EEXIST)
            cli_errorf(cmd, "'%s' exists: refusing to overwrite it (use --force)", o->path);
        else
            cli_errorf(cmd, "cannot write '%s': %s", o->path, strerror(e));
        cli_output_abort(o);
        return GM_EXIT_CANTCREAT;
    }
    unlink(o->tmp);
    pending_remove(o);
    return 0;
}

void cli_output_abort(struct cli_output *o)
{
    if (o->f)
        fclose(o->f);
    o->f = NULL;
    if (o->fd >= 0)
        close(o->fd);
    o->fd = -1;
    if (o->tmp[0])
        unlink(o->tmp);
    pending_remove(o);
    o->tmp[0] = '\0';
}

int cli_output_fail(struct cli_output *o, const char *cmd, const struct gm_error *err)
{
    char why[128];
    int rc;
    if (o->f)
        fflush(o->f);
    if (o->sink.err) {
        cli_errorf(cmd, "writing '%s' failed: %s", o->path,
                   cli_errno_text(why, sizeof(why), o->sink.err));
        rc = GM_EXIT_IOERR;
    } else {
        rc = cli_fail(cmd, err);
    }
    cli_output_abort(o);
    return rc;
}
