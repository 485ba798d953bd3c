/* SPDX-License-Identifier: MIT */
/* cmd_sheet.c - gpumem sheet: the one-page record of a memory investigation (sheet.h) from
 * gpumem's JSON documents, as Markdown on stdout or as an HTML page. */
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include "gpumem/sheet.h"

#include <stdio.h>
#include <string.h>

int cmd_sheet(int argc, char **argv)
{
    const char *output = NULL;
    bool html = false, force = false;
    uint64_t memory_limit = 0;
    int n_pos = 0, rc = 0;
    struct gm_sheet *sh = NULL;
    struct gm_error err;
    struct gm_output out;
    const struct opt opts[] = {
        OPT_FLAG("html", 0, &html,
                 "an HTML page (the snapshot report's style) instead of Markdown"),
        OPT_STRING("output", 'o', &output, "FILE",
                   "write to FILE (never replaced unless --force); HTML when it ends in .html"),
        OPT_FLAG("force", 'f', &force, "replace --output if it exists"),
        OPT_SIZE("memory-limit", 0, &memory_limit, "SIZE",
                 "memory reading one file may take, its text and parsed JSON together (default: "
                 "64 MiB + 24 x its size, at most 64 MiB of text)",
                 NULL),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem sheet [--html] [--output FILE [--force]] FILE...",
        "Make the one-page record of a GPU memory investigation from gpumem's JSON files: "
        "gpumem estimate --json (what was computed), gpumem measure --output or a gpumem.torch "
        "series, gpumem sweep --json and gpumem account --output (what was observed: where each "
        "process's device memory went), gpumem environment --json. The "
        "page gives the weights estimate, the largest load tested, the phases that succeeded or "
        "failed with the four allocator counters, the environment and the settings chosen, and "
        "keeps what was computed, what was observed and what is still assumed apart. Each "
        "file's kind is its \"schema\" member.",
        "gpumem sheet estimate.json series.json sweep.json\n"
        "gpumem sheet --output sheet.html estimate.json series.json env.json"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos == 0)
        return cli_usage(argv[0], "no file: give the JSON files of the investigation");
    if (output) {
        size_t n = strlen(output);
        html = html || (n > 5 && !strcmp(output + n - 5, ".html"));
    }
    if (gm_sheet_new(&sh, &err) != GM_OK)
        return cli_fail(argv[0], &err);
    gm_sheet_set_memory_limit(sh, memory_limit);
    for (int i = 1; i <= n_pos; i++)
        if (gm_sheet_add_file(sh, argv[i], &err) != GM_OK) {
            rc = cli_fail(argv[0], &err);
            goto out_free;
        }
    if (output && (rc = cli_output_open(&out, argv[0], output, force)) != 0)
        goto out_free;
    if (gm_sheet_write(sh, html ? GM_SHEET_HTML : GM_SHEET_MARKDOWN, output ? out.f : stdout,
                       &err) != GM_OK) {
        /* a write error is named with the file and its errno: by cli_output_fail(), or
         * for standard output by cli_stdout_end() */
        if (output)
            rc = cli_output_fail(&out, argv[0], &err);
        else
            rc = err.code == GM_ERR_IO ? GM_EXIT_IOERR : cli_fail(argv[0], &err);
        goto out_free;
    }
    if (output) {
        rc = cli_output_commit(&out, argv[0]);
        if (!rc)
            fprintf(stderr, "wrote %s\n", output);
    }
out_free:
    gm_sheet_free(sh);
    return rc;
}
