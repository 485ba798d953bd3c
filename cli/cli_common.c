/* SPDX-License-Identifier: MIT */
/* cli_common.c - shared CLI helpers (see cli.h). */
#include "cli.h"

#include "gpumem/text.h"
#include "gpumem/version.h"

#include <errno.h>
#include <inttypes.h>
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
    return isatty(fileno(f)) == 1;
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
    gm_json_end_object(w);
    if (!gm_json_finish(w)) {
        cli_errorf(cmd, "writing JSON failed");
        return GM_EXIT_IOERR;
    }
    return 0;
}

int cli_dispatch(const struct cli_command *table, const char *prefix, int argc, char **argv)
{
    static char name[256];
    const char *want = argc > 1 ? argv[1] : NULL;

    if (want && strcmp(want, "--help") && strcmp(want, "-h") && strcmp(want, "help")) {
        for (const struct cli_command *c = table; c->name; c++) {
            if (!strcmp(c->name, want)) {
                snprintf(name, sizeof(name), "%s %s", prefix, c->name);
                argv[1] = name;
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
            fprintf(f, "%s: '%s' is not a command\n\n", prefix,
                    gm_text_escape(safe, sizeof(safe), want));
        }
        fprintf(f, "usage: %s COMMAND [OPTIONS] [ARGS]\n\ncommands:\n", prefix);
        for (const struct cli_command *c = table; c->name; c++)
            fprintf(f, "  %-12s  %s\n", c->name, c->summary);
        fprintf(f, "\n'%s COMMAND --help' describes one command.\n", prefix);
        return (want && !unknown) ? 0 : GM_EXIT_USAGE;
    }
}

int cli_output_open(struct cli_output *o, const char *cmd, const char *path, bool force)
{
    struct stat st;
    int fd;
    const char *slash;
    size_t dirlen;

    memset(o, 0, sizeof(*o));
    o->force = force;
    if (strlen(path) >= sizeof(o->path) - 32)
        return cli_usage(cmd, "output path too long");
    snprintf(o->path, sizeof(o->path), "%s", path);
    if (!force && stat(path, &st) == 0) {
        cli_errorf(cmd, "'%s' exists: refusing to overwrite it (use --force)", path);
        return GM_EXIT_CANTCREAT;
    }
    slash = strrchr(path, '/');
    dirlen = slash ? (size_t)(slash - path + 1) : 0;
    snprintf(o->tmp, sizeof(o->tmp), "%.*s.gpumem-tmp-XXXXXX", (int)dirlen, path);
    fd = mkstemp(o->tmp);
    if (fd < 0) {
        cli_errorf(cmd, "cannot create a file beside '%s': %s", path, strerror(errno));
        return errno == ENOENT ? GM_EXIT_NOINPUT : GM_EXIT_CANTCREAT;
    }
    o->f = fdopen(fd, "wb");
    if (!o->f) {
        close(fd);
        unlink(o->tmp);
        cli_errorf(cmd, "cannot open '%s': %s", o->tmp, strerror(errno));
        return GM_EXIT_IOERR;
    }
    return 0;
}

int cli_output_commit(struct cli_output *o, const char *cmd)
{
    int bad = ferror(o->f);
    if (fflush(o->f) != 0)
        bad = 1;
    if (fsync(fileno(o->f)) != 0 && errno != EINVAL)
        bad = 1;
    if (fclose(o->f) != 0)
        bad = 1;
    o->f = NULL;
    if (bad) {
        unlink(o->tmp);
        cli_errorf(cmd, "writing '%s' failed", o->path);
        return GM_EXIT_IOERR;
    }
    (void)chmod(o->tmp, 0644);
    if (o->force) {
        if (rename(o->tmp, o->path) != 0) {
            cli_errorf(cmd, "cannot write '%s': %s", o->path, strerror(errno));
            unlink(o->tmp);
            return GM_EXIT_CANTCREAT;
        }
        return 0;
    }
    /* link() fails if the target exists, so a file created meanwhile is never replaced. */
    if (link(o->tmp, o->path) != 0) {
        int e = errno;
        unlink(o->tmp);
        if (e == EEXIST) {
            cli_errorf(cmd, "'%s' exists: refusing to overwrite it (use --force)", o->path);
            return GM_EXIT_CANTCREAT;
        }
        cli_errorf(cmd, "cannot write '%s': %s", o->path, strerror(e));
        return GM_EXIT_CANTCREAT;
    }
    unlink(o->tmp);
    return 0;
}

void cli_output_abort(struct cli_output *o)
{
    if (o->f)
        fclose(o->f);
    o->f = NULL;
    if (o->tmp[0])
        unlink(o->tmp);
}
