/* SPDX-License-Identifier: MIT */
/* opts.c - table-driven option parsing and help (see opts.h). */
#include "opts.h"

#include "cli.h"

#include "gpumem/text.h"
#include "gpumem/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Options every command takes, whether or not its table names them: --color (the
 * commands whose output has colour read it with opts_color(); for the others it changes
 * nothing, so that a script may give it to any command). */
static int common_color = CLI_COLOR_AUTO;
static const struct opt common_opts[] = {
    OPT_COLOR(&common_color),
    OPT_END,
};

enum cli_color opts_color(void)
{
    return (enum cli_color)common_color;
}

/* The option names of a table, for gm_text_closest(); up to 'cap'. */
static size_t long_names(const struct opt *opts, const char **names, size_t cap)
{
    size_t n = 0;
    for (const struct opt *o = opts; o->name && n < cap; o++)
        names[n++] = o->name;
    for (const struct opt *o = common_opts; o->name && n < cap; o++)
        names[n++] = o->name;
    if (n < cap)
        names[n++] = "help";
    return n;
}

static const struct opt *find_long(const struct opt *opts, const char *name, size_t len)
{
    for (const struct opt *o = opts; o->name; o++)
        if (strlen(o->name) == len && !strncmp(o->name, name, len))
            return o;
    return NULL;
}

static const struct opt *find_short(const struct opt *opts, char c)
{
    for (const struct opt *o = opts; o->name; o++)
        if (o->short_name == c)
            return o;
    return NULL;
}

/* One line per option of the table, then the common ones and --help, tab-separated:
 * long name, short name, "flag" / "value" / "choice", argument name, choices (space-separated),
 * the help line.
 * The shell completions are generated from these lines (scripts/gen-completions.py), as
 * --help is from the same table. */
static void print_table(const struct opt *opts)
{
    const struct opt *tables[2] = {opts, common_opts};
    for (int t = 0; t < 2; t++) {
        for (const struct opt *o = tables[t]; o->name; o++) {
            const char *kind = o->type == OPT_T_FLAG     ? "flag"
                               : o->type == OPT_T_CHOICE ? "choice"
                                                         : "value";
            if (t == 1 && find_long(opts, o->name, strlen(o->name)))
                continue;
            printf("--%s\t", o->name);
            if (o->short_name)
                printf("-%c", o->short_name);
            printf("\t%s\t%s\t", kind, o->argname ? o->argname : "");
            for (int j = 0; o->type == OPT_T_CHOICE && o->choices[j]; j++)
                printf("%s%s", j ? " " : "", o->choices[j]);
            printf("\t%s\n", o->help);
        }
    }
    printf("--help\t-h\tflag\t\t\tshow this help\n");
}

static bool set_value(const char *cmd, const struct opt *o, const char *val)
{
    struct gm_error err = {0};
    switch (o->type) {
    case OPT_T_STRING:
        *(const char **)o->dest = val;
        break;
    case OPT_T_U64:
        if (gm_parse_u64(val, (uint64_t *)o->dest, &err) != GM_OK)
            goto out_bad;
        break;
    case OPT_T_INT: {
        long long v = 0;
        char *end;
        v = strtoll(val, &end, 10);
        if (!*val || *end || v < -2147483647LL || v > 2147483647LL) {
            gm_fail(&err, GM_ERR_INVALID, GM_NO_OFFSET, "'%s': not a whole number", val);
            goto out_bad;
        }
        *(int *)o->dest = (int)v;
        break;
    }
    case OPT_T_SIZE:
        if (gm_parse_size(val, (uint64_t *)o->dest, &err) != GM_OK)
            goto out_bad;
        break;
    case OPT_T_DOUBLE:
        if (gm_parse_double(val, (double *)o->dest, &err) != GM_OK)
            goto out_bad;
        break;
    case OPT_T_CHOICE: {
        int i;
        for (i = 0; o->choices[i]; i++)
            if (!strcmp(o->choices[i], val))
                break;
        if (!o->choices[i]) {
            char list[512] = "";
            size_t n = 0;
            const char *near;
            for (int j = 0; o->choices[j]; j++) {
                if (j)
                    strncat(list, ", ", sizeof(list) - strlen(list) - 1);
                strncat(list, o->choices[j], sizeof(list) - strlen(list) - 1);
                n++;
            }
            near = gm_text_closest(val, strlen(val), o->choices, n, false);
            if (near)
                cli_errorf(cmd, "--%s: '%s' is not one of: %s (did you mean '%s'?)", o->name, val,
                           list, near);
            else
                cli_errorf(cmd, "--%s: '%s' is not one of: %s", o->name, val, list);
            return false;
        }
        *(int *)o->dest = i;
        break;
    }
    case OPT_T_LIST: {
        struct opt_list *l = o->dest;
        if (l->n >= (int)(sizeof(l->items) / sizeof(l->items[0]))) {
            cli_errorf(cmd, "--%s: given too many times", o->name);
            return false;
        }
        l->items[l->n++] = val;
        break;
    }
    case OPT_T_FLAG:
    case OPT_T_END:
        break;
    }
    if (o->seen)
        *o->seen = true;
    return true;
out_bad:
    cli_errorf(cmd, "--%s: %s", o->name, err.msg);
    return false;
}

enum opts_result opts_parse(int argc, char **argv, const struct opt *opts,
                            const struct opt_usage *usage, bool stop_at_positional, int *n_pos)
{
    const char *cmd = argv[0];
    int np = 0;
    int i;

    for (i = 1; i < argc; i++) {
        char *a = argv[i];
        const struct opt *o;
        const char *val = NULL;

        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if (a[0] != '-' || a[1] == '\0') {
            if (stop_at_positional)
                break;
            argv[1 + np++] = a;
            continue;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            opts_print_help(opts, usage);
            return OPTS_HELP;
        }
        if (!strcmp(a, "--list-options")) {
            print_table(opts);
            return OPTS_HELP;
        }
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq ? (size_t)(eq - name) : strlen(name);
            o = find_long(opts, name, len);
            if (!o)
                o = find_long(common_opts, name, len);
            if (!o && len == 4 && !strncmp(name, "json", 4)) {
                cli_errorf(cmd,
                           "unknown option '--json': this command writes no JSON document (the "
                           "commands that do are listed in 'man gpumem'; see '%s --help')",
                           cmd);
                return OPTS_ERROR;
            }
            if (!o) {
                const char *names[256];
                const char *near =
                    gm_text_closest(name, len, names, long_names(opts, names, 256), false);
                if (near)
                    cli_errorf(cmd,
                               "unknown option '--%.*s': did you mean '--%s'? (see '%s --help')",
                               (int)len, name, near, cmd);
                else
                    cli_errorf(cmd, "unknown option '--%.*s' (see '%s --help')", (int)len, name,
                               cmd);
                return OPTS_ERROR;
            }
            if (eq)
                val = eq + 1;
        } else {
            o = find_short(opts, a[1]);
            if (!o) {
                cli_errorf(cmd, "unknown option '-%c' (see '%s --help')", a[1], cmd);
                return OPTS_ERROR;
            }
            if (a[2])
                val = a + 2;
        }
        if (o->type == OPT_T_FLAG) {
            if (val) {
                cli_errorf(cmd, "--%s takes no value", o->name);
                return OPTS_ERROR;
            }
            *(bool *)o->dest = true;
            if (o->seen)
                *o->seen = true;
            continue;
        }
        if (!val) {
            if (i + 1 >= argc) {
                cli_errorf(cmd, "--%s needs a value (%s)", o->name,
                           o->argname ? o->argname : "see --help");
                return OPTS_ERROR;
            }
            val = argv[++i];
        }
        if (!set_value(cmd, o, val))
            return OPTS_ERROR;
    }
    for (; i < argc; i++)
        argv[1 + np++] = argv[i];
    *n_pos = np;
    return OPTS_OK;
}

/* Print 'text' wrapped at 'width' columns; explicit newlines are kept. */
static void print_wrapped(FILE *f, const char *text, int width)
{
    const char *p = text;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        while (len > (size_t)width) {
            size_t cut = (size_t)width;
            while (cut > 0 && p[cut] != ' ')
                cut--;
            if (cut == 0)
                break;
            fprintf(f, "%.*s\n", (int)cut, p);
            p += cut + 1;
            len -= cut + 1;
        }
        fprintf(f, "%.*s\n", (int)len, p);
        p += len;
        if (*p == '\n')
            p++;
    }
}

/* Print example lines, each indented by two spaces unless already indented. */
static void print_examples(FILE *f, const char *text)
{
    const char *p = text;
    while (*p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        fprintf(f, "%s%.*s\n", (len && p[0] != ' ') ? "  " : "", (int)len, p);
        p += len;
        if (*p == '\n')
            p++;
    }
}

int opts_parse_cmd(int argc, char **argv, const struct opt *opts, const struct opt_usage *usage,
                   bool stop_at_positional, int *n_pos)
{
    switch (opts_parse(argc, argv, opts, usage, stop_at_positional, n_pos)) {
    case OPTS_OK:
        return -1;
    case OPTS_HELP:
        return 0;
    case OPTS_ERROR:
        break;
    }
    return 64; /* EX_USAGE */
}

void opts_print_help(const struct opt *opts, const struct opt_usage *usage)
{
    FILE *f = stdout;
    fprintf(f, "usage: %s\n", usage->synopsis);
    if (usage->description) {
        fputc('\n', f);
        print_wrapped(f, usage->description, 78);
    }
    if (usage->examples) {
        fprintf(f, "\nexamples:\n");
        print_examples(f, usage->examples);
    }
    fprintf(f, "\noptions:\n");
    for (const struct opt *o = opts; o->name; o++) {
        char left[64];
        char arg[48] = "";
        if (o->type == OPT_T_CHOICE) {
            size_t used = 0;
            arg[0] = '\0';
            for (int j = 0; o->choices[j] && used + 2 < sizeof(arg); j++) {
                int n =
                    snprintf(arg + used, sizeof(arg) - used, "%s%s", j ? "|" : "", o->choices[j]);
                if (n < 0)
                    break;
                used += (size_t)n;
            }
            if (used >= sizeof(arg) - 1)
                snprintf(arg, sizeof(arg), "CHOICE");
        } else if (o->argname) {
            snprintf(arg, sizeof(arg), "%s", o->argname);
        }
        if (o->short_name)
            snprintf(left, sizeof(left), "-%c, --%s%s%s", o->short_name, o->name, arg[0] ? " " : "",
                     arg);
        else
            snprintf(left, sizeof(left), "    --%s%s%s", o->name, arg[0] ? " " : "", arg);
        if (strlen(left) > 30)
            fprintf(f, "  %s\n  %-30s  %s\n", left, "", o->help);
        else
            fprintf(f, "  %-30s  %s\n", left, o->help);
        if (o->type == OPT_T_CHOICE && !strcmp(arg, "CHOICE")) {
            fprintf(f, "  %-30s  one of:", "");
            for (int j = 0; o->choices[j]; j++)
                fprintf(f, " %s", o->choices[j]);
            fputc('\n', f);
        }
    }
    for (const struct opt *o = common_opts; o->name; o++)
        if (!find_long(opts, o->name, strlen(o->name)))
            fprintf(f, "  %-30s  %s\n", "    --color auto|always|never",
                    "colour where the output has any (auto: a terminal without NO_COLOR)");
    fprintf(f, "  %-30s  %s\n", "-h, --help", "show this help");
}
