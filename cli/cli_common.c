/* SPDX-License-Identifier: MIT */
/* cli_common.c - shared CLI helpers (see cli.h). */
#include "cli.h"
#include "opts.h"

#include "gpumem/internal/file.h"
#include "gpumem/output.h"
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

char *cli_setting_tail(char *buf, size_t n, const struct gm_error *err)
{
    char flag[64];
    buf[0] = '\0';
    if (!err->setting)
        return buf;
    /* the library names a setting ("memory_limit"); the CLI, its option */
    snprintf(flag, sizeof(flag), "%s", err->setting);
    for (char *p = flag; *p; p++)
        if (*p == '_')
            *p = '-';
    snprintf(buf, n, " (--%s)", flag);
    return buf;
}

int cli_fail(const char *cmd, const struct gm_error *err)
{
    char tail[128] = "", flag[80];
    if (err->offset != GM_NO_OFFSET)
        snprintf(tail, sizeof(tail), " (at byte %" PRIu64 ")", err->offset);
    snprintf(tail + strlen(tail), sizeof(tail) - strlen(tail), "%s",
             cli_setting_tail(flag, sizeof(flag), err));
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

int cli_json_status(const char *cmd, enum gm_status st, const struct gm_error *err)
{
    if (st == GM_OK)
        return 0;
    /* a failed write to stdout is reported once, with its errno, by cli_stdout_end() */
    if (st == GM_ERR_IO && ferror(stdout))
        return GM_EXIT_IOERR;
    return cli_fail(cmd, err);
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

static struct gm_sink stdout_sink;

void cli_stdout_begin(void)
{
    FILE *f;
    fflush(stdout);
    f = gm_sink_open(&stdout_sink, 1);
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
               gm_errno_text(why, sizeof(why), e));
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

/* Temporary files to remove when a signal ends the process (SIGINT, SIGTERM, SIGHUP, and
 * the others whose default is to terminate: SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2,
 * SIGVTALRM, SIGPROF, SIGXCPU): a report interrupted halfway leaves nothing beside its
 * target.  The list holds each output's o->tmp, registered before the file is made (an
 * empty name unlinks nothing).  The handler only unlinks (which is async-signal-safe) and
 * dies of the same signal. */
#define MAX_PENDING 4
static char *volatile pending[MAX_PENDING];
static volatile sig_atomic_t cleanup_installed;

static void cleanup_on_signal(int sig)
{
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending[i] && pending[i][0])
            unlink(pending[i]);
    signal(sig, SIG_DFL);
    raise(sig);
}

static void pending_add(struct gm_output *o)
{
    static const int sigs[] = {SIGINT,  SIGTERM, SIGHUP,    SIGQUIT, SIGPIPE, SIGALRM,
                               SIGUSR1, SIGUSR2, SIGVTALRM, SIGPROF, SIGXCPU};
    for (int i = 0; i < MAX_PENDING; i++)
        if (!pending[i]) {
            pending[i] = o->tmp;
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

static void pending_remove(struct gm_output *o)
{
    for (int i = 0; i < MAX_PENDING; i++)
        if (pending[i] == o->tmp)
            pending[i] = NULL;
}

/* The exit code and message of an output's failure 'err' (the library's words, and the
 * command's own option where that is the remedy). */
static int output_failed(const char *cmd, const char *path, bool force, const struct gm_error *err)
{
    struct stat st;
    switch (err->code) {
    case GM_ERR_INVALID:
        return cli_usage(cmd, "%s", err->msg);
    case GM_ERR_IO:
        cli_errorf(cmd, "%s", err->msg);
        return GM_EXIT_IOERR;
    case GM_ERR_NOMEM:
        cli_errorf(cmd, "%s", err->msg);
        return GM_EXIT_SOFTWARE;
    default:
        /* the output cannot be created (73), which is not an input missing (66) */
        if (err->code == GM_ERR_EXISTS && !force && lstat(path, &st) == 0 && !S_ISDIR(st.st_mode))
            cli_errorf(cmd, "%s (use --force)", err->msg);
        else
            cli_errorf(cmd, "%s", err->msg);
        return GM_EXIT_CANTCREAT;
    }
}

int cli_output_check(const char *cmd, const char *path, bool force)
{
    struct gm_error err;
    if (gm_output_check(path, force, &err) != GM_OK)
        return output_failed(cmd, path, force, &err);
    return 0;
}

int cli_output_open(struct gm_output *o, const char *cmd, const char *path, bool force)
{
    struct gm_error err;
    /* registered before the file exists: a signal right after it is made still removes it */
    o->tmp[0] = '\0';
    pending_add(o);
    if (gm_output_open(o, path, force, &err) != GM_OK) {
        pending_remove(o);
        return output_failed(cmd, path, force, &err);
    }
    return 0;
}

int cli_output_commit(struct gm_output *o, const char *cmd)
{
    struct gm_error err;
    enum gm_status st = gm_output_commit(o, &err);
    if (st != GM_OK) {
        /* a name beside the target could not be had: the data stays where it is */
        pending_remove(o);
        return output_failed(cmd, o->path, o->force, &err);
    }
    pending_remove(o);
    if (strcmp(o->written, o->path) != 0)
        cli_errorf(cmd,
                   "'%s' appeared while gpumem ran (another run writing it?): wrote '%s' "
                   "instead",
                   o->path, o->written);
    return 0;
}

void cli_output_abort(struct gm_output *o)
{
    gm_output_abort(o);
    pending_remove(o);
}

int cli_output_fail(struct gm_output *o, const char *cmd, const struct gm_error *err)
{
    char why[128];
    int rc;
    if (o->f)
        fflush(o->f);
    if (o->sink.err) {
        cli_errorf(cmd, "writing '%s' failed: %s", o->path,
                   gm_errno_text(why, sizeof(why), o->sink.err));
        rc = GM_EXIT_IOERR;
    } else {
        rc = cli_fail(cmd, err);
    }
    cli_output_abort(o);
    return rc;
}
