/* SPDX-License-Identifier: MIT */
/* opts.h - one option table drives both parsing and --help.
 *
 * A command declares its options once:
 *   static const struct opt opts[] = {
 *       OPT_SIZE("gpu-memory", 0, &gpu_mem, "SIZE", "memory of the GPU (e.g. 80GB, 24GiB)"),
 *       OPT_FLAG("json", 0, &json, "machine-readable output (schema gpumem.estimate/1)"),
 *       OPT_END,
 *   };
 * and calls opts_parse(); --help, -h and usage errors are handled there.  --list-options
 * (not in --help) prints the table as tab-separated lines, from which
 * scripts/gen-completions.py writes the shell completions. */
#ifndef GM_CLI_OPTS_H
#define GM_CLI_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cli.h"

enum opt_type {
    OPT_T_END = 0,
    OPT_T_FLAG,   /* bool, no argument */
    OPT_T_STRING, /* const char * (borrowed from argv) */
    OPT_T_U64,    /* uint64_t, whole number */
    OPT_T_INT,    /* int, may be negative */
    OPT_T_SIZE,   /* uint64_t bytes, "24GiB" / "80GB" / bare bytes */
    OPT_T_DOUBLE, /* double */
    OPT_T_CHOICE, /* int index into a NULL-terminated list of names */
    OPT_T_LIST    /* appends const char * to a struct opt_list */
};

struct opt_list {
    const char *items[64];
    int n;
};

struct opt {
    const char *name; /* long name without "--" */
    char short_name;  /* 0 for none */
    enum opt_type type;
    void *dest;                 /* typed destination, see enum opt_type */
    const char *argname;        /* shown in help ("N", "FILE"); NULL for flags */
    const char *help;           /* one line */
    const char *const *choices; /* OPT_T_CHOICE: NULL-terminated names */
    bool *seen;                 /* optional: set when the option was given */
};

#define OPT_FLAG(n, s, d, h)                                                                       \
    {                                                                                              \
        n, s, OPT_T_FLAG, d, NULL, h, NULL, NULL                                                   \
    }
#define OPT_STRING(n, s, d, a, h)                                                                  \
    {                                                                                              \
        n, s, OPT_T_STRING, d, a, h, NULL, NULL                                                    \
    }
#define OPT_U64(n, s, d, a, h, seen)                                                               \
    {                                                                                              \
        n, s, OPT_T_U64, d, a, h, NULL, seen                                                       \
    }
#define OPT_INT(n, s, d, a, h, seen)                                                               \
    {                                                                                              \
        n, s, OPT_T_INT, d, a, h, NULL, seen                                                       \
    }
#define OPT_SIZE(n, s, d, a, h, seen)                                                              \
    {                                                                                              \
        n, s, OPT_T_SIZE, d, a, h, NULL, seen                                                      \
    }
#define OPT_DOUBLE(n, s, d, a, h, seen)                                                            \
    {                                                                                              \
        n, s, OPT_T_DOUBLE, d, a, h, NULL, seen                                                    \
    }
#define OPT_CHOICE(n, s, d, c, h, seen)                                                            \
    {                                                                                              \
        n, s, OPT_T_CHOICE, d, NULL, h, c, seen                                                    \
    }
#define OPT_LIST(n, s, d, a, h)                                                                    \
    {                                                                                              \
        n, s, OPT_T_LIST, d, a, h, NULL, NULL                                                      \
    }
#define OPT_END                                                                                    \
    {                                                                                              \
        NULL, 0, OPT_T_END, NULL, NULL, NULL, NULL, NULL                                           \
    }

struct opt_usage {
    const char *synopsis;    /* "gpumem estimate [OPTIONS] [MODEL]" (may hold several lines) */
    const char *description; /* a paragraph, may be NULL */
    const char *examples;    /* lines of examples, may be NULL */
};

enum opts_result {
    OPTS_OK = 0,
    OPTS_HELP, /* --help was printed; exit 0 */
    OPTS_ERROR /* a usage error was printed on stderr; exit 64 */
};

/* Parse argv[1..argc) (argv[0] is the command name, used in messages).  Options may come
 * anywhere; "--" ends them, and everything after it is positional.  Positional arguments
 * are moved, in order, to argv[1..1+*n_pos).  With stop_at_positional, parsing stops at
 * the first positional argument (for commands that run a child: watch -- CMD). */
enum opts_result opts_parse(int argc, char **argv, const struct opt *opts,
                            const struct opt_usage *usage, bool stop_at_positional, int *n_pos);

/* opts_parse() for a command's entry point: returns -1 to go on, or the exit code the
 * command returns at once (0 after --help, 64 after a usage error):
 *   int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
 *   if (prc >= 0)
 *       return prc; */
int opts_parse_cmd(int argc, char **argv, const struct opt *opts, const struct opt_usage *usage,
                   bool stop_at_positional, int *n_pos);

/* --color as given to a command whose table does not name it (every command takes it:
 * opts.c's common options); CLI_COLOR_AUTO when not given. */
enum cli_color opts_color(void);

/* Print the help generated from the table to stdout. */
void opts_print_help(const struct opt *opts, const struct opt_usage *usage);

#endif
