/* SPDX-License-Identifier: MIT */
/* cli.h - what every command shares: the command table type, error reporting with exit
 * codes, colour, JSON document headers and safe output files. */
#ifndef GM_CLI_CLI_H
#define GM_CLI_CLI_H

#include "gpumem/error.h"
#include "gpumem/json.h"

#include <stdbool.h>
#include <stdio.h>

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

/* "<cmd>: <message>" on stderr. */
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

/* An output file written atomically: to a temporary file beside 'path', renamed into
 * place by cli_output_commit().  Refuses to replace an existing file unless 'force'. */
struct cli_output {
    FILE *f;
    char path[4096];
    char tmp[4096];
    bool force;
};

/* 0, or an exit code after printing the reason (73 when the file exists). */
int cli_output_open(struct cli_output *o, const char *cmd, const char *path, bool force);
/* Close and move into place; 0 or an exit code (73 if the file appeared meanwhile). */
int cli_output_commit(struct cli_output *o, const char *cmd);
/* Close and delete the temporary file. */
void cli_output_abort(struct cli_output *o);

#define OPT_JSON(dest, schema)                                                                     \
    OPT_FLAG("json", 0, dest, "machine-readable JSON (schema " schema ")")
#define OPT_COLOR(dest)                                                                            \
    OPT_CHOICE("color", 0, dest, cli_color_choices,                                                \
               "colour: auto (terminal, no NO_COLOR), always, never", NULL)

#endif
