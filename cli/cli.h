/* SPDX-License-Identifier: MIT */
/* cli.h - what every command shares: the command table type, error reporting with exit
 * codes, colour, JSON document headers and safe output files. */
#ifndef GM_CLI_CLI_H
#define GM_CLI_CLI_H

#include "gpumem/error.h"
#include "gpumem/json.h"
#include "gpumem/output.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

/* A command gets argv[0] = its full name ("gpumem estimate") and returns the exit code. */
typedef int (*cli_cmd_fn)(int argc, char **argv);

struct cli_command {
    const char *name;
    cli_cmd_fn fn;
    const char *summary;
};

/* Run the command named argv[1] from 'table' (NULL-terminated), or print the table.
 * 'prefix' is the caller's name ("gpumem", "gpumem snapshot"). */
int cli_dispatch(const struct cli_command *table, const char *prefix, int argc, char **argv);

/* "<cmd>: <message>" on stderr, the message escaped (gm_text_escape()). */
void cli_errorf(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Report 'err' on stderr ("<cmd>: <msg> (at byte N)") and return its exit code. */
int cli_fail(const char *cmd, const struct gm_error *err);

/* Usage error: print, return 64. */
int cli_usage(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* --color=auto|always|never */
enum cli_color { CLI_COLOR_AUTO = 0, CLI_COLOR_ALWAYS, CLI_COLOR_NEVER };
extern const char *const cli_color_choices[];

/* Whether to colour output on 'f': ALWAYS and NEVER win; AUTO colours only a terminal,
 * with TERM not "dumb" and NO_COLOR unset or empty. */
bool cli_use_color(enum cli_color mode, FILE *f);

/* Whether stderr is a terminal (for progress). */
bool cli_stderr_is_tty(void);

/* Begin a JSON document on stdout: {"schema": "gpumem.<schema>/1", "gpumem_version": ...
 * The caller adds fields and calls cli_json_end(). */
void cli_json_begin(struct gm_json *w, FILE *f, const char *schema);
/* Close the top-level object and finish; returns 0, or 74 on a write error. */
int cli_json_end(struct gm_json *w, const char *cmd);

/* main(): make stdout a FILE that keeps the errno of a failed write (gm_sink, output.h)
 * before the command runs, and after it flush it and, on a failed write, print "<cmd>:
 * writing to standard output failed: <reason>" and return 74 (or 'rc' when the command had
 * already failed).  'cmd' NULL: the command that cli_dispatch() ran.  Every command, text
 * or JSON, --help included, is checked here. */
void cli_stdout_begin(void);
int cli_stdout_end(const char *cmd, int rc);

/* The descriptor under 'f' (1 for stdout, 2 for stderr, whatever stdout has become). */
int cli_fileno(FILE *f);

/* Output files: the library's writer (gpumem/output.h), its failures said with the exit
 * codes of the command line (64 a bad name, 73 cannot be created or would replace what it
 * must not, with "(use --force)" where that is the remedy, 74 a failed write), and its
 * temporary file removed when a signal ends the process (SIGINT, SIGTERM, SIGHUP and every
 * other whose default is to terminate). */

/* The checks of gm_output_open() without creating anything: 0, or the exit code after
 * printing the reason. */
int cli_output_check(const char *cmd, const char *path, bool force);
/* 0, or an exit code after printing the reason. */
int cli_output_open(struct gm_output *o, const char *cmd, const char *path, bool force);
/* Flush, check every write, and move into place; 0 or an exit code.  With o->beside a file
 * that appeared at the target meanwhile is kept, the data written beside it and said so
 * (o->written has the name). */
int cli_output_commit(struct gm_output *o, const char *cmd);
/* Close and delete the temporary file. */
void cli_output_abort(struct gm_output *o);
/* A library call writing to o->f failed with 'err': report the write error with its errno
 * when there was one (else 'err'), abort the output and return the exit code. */
int cli_output_fail(struct gm_output *o, const char *cmd, const struct gm_error *err);

/* The signals of a command that runs a child (watch, account): SIGINT, SIGTERM and SIGHUP set
 * 'stop' and are passed on to the child when another process sent them (a terminal's Ctrl-C
 * reaches the child's process group already); a second one sets 'kill', for the command to
 * end the child.  Set 'child' once it runs. */
struct cli_child_signals {
    volatile sig_atomic_t stop;
    volatile sig_atomic_t kill;
    volatile sig_atomic_t signal; /* the last one received */
    volatile pid_t child;
};
extern struct cli_child_signals cli_child;
void cli_child_signals_install(void);

#define OPT_JSON(dest, schema)                                                                     \
    OPT_FLAG("json", 0, dest, "machine-readable JSON (schema " schema ")")
#define OPT_COLOR(dest)                                                                            \
    OPT_CHOICE("color", 0, dest, cli_color_choices,                                                \
               "colour: auto (terminal, no NO_COLOR), always, never", NULL)

#endif
