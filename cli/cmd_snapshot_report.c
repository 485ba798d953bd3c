/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_report.c - gpumem snapshot report FILE... -o report.html: one self-contained
 * HTML file per snapshot (no request to any other host or file), written atomically.
 * Several files (ranks) are read and analysed at the same time and written one by one into
 * the folder -o names, each report as it would be alone. */
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"

#include "gpumem/analysis.h"
#include "gpumem/arena.h"
#include "gpumem/report.h"
#include "gpumem/snapshot.h"
#include "gpumem/units.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

struct report_job {
    const char *cmd;
    char *const *paths;
    const char **outs; /* per file: the HTML to write */
    const char *title;
    bool force, no_analysis;
    struct gm_analysis_opts ao;
    struct gm_report_opts ro;
    struct gm_analysis **ans;
    struct gm_error *warn; /* per file: why there is no analysis (code GM_OK: none) */
};

/* In the thread that read the file: its analysis (the timeline, the peak and the segments
 * do not need it, so a memory limit only leaves it out, with a warning). */
static enum gm_status analyse(void *ctx, size_t i, struct gm_snapshot *snap, struct gm_error *err)
{
    struct report_job *j = ctx;
    struct gm_error e;
    if (j->no_analysis)
        return GM_OK;
    gm_error_clear(&e);
    if (gm_analysis_run(snap, &j->ao, &j->ans[i], &e) != GM_OK) {
        j->ans[i] = NULL;
        if (e.code != GM_ERR_LIMIT && e.code != GM_ERR_NOMEM) {
            *err = e;
            return e.code;
        }
        j->warn[i] = e;
    }
    return GM_OK;
}

/* In this thread, in argument order: write the page. */
static int write_page(void *ctx, size_t i, struct gm_snapshot *snap)
{
    struct report_job *j = ctx;
    struct gm_report_opts ro = j->ro;
    struct cli_output o;
    struct gm_error err;
    int rc;
    if (j->warn[i].code != GM_OK)
        cli_errorf(j->cmd, "warning: no categories, phases or leaks in the report: %s",
                   j->warn[i].msg);
    if (!j->title) {
        const char *slash = strrchr(j->paths[i], '/');
        ro.title = slash ? slash + 1 : j->paths[i];
    }
    rc = cli_output_open(&o, j->cmd, j->outs[i], j->force);
    if (rc == 0) {
        if (gm_report_html(o.f, snap, j->ans[i], &ro, &err) != GM_OK) {
            rc = cli_output_fail(&o, j->cmd, &err);
        } else {
            rc = cli_output_commit(&o, j->cmd);
        }
    }
    gm_analysis_free(j->ans[i]);
    j->ans[i] = NULL;
    return rc;
}

/* The HTML file of each input: -o itself for one input, else DIR/<name>.html (two inputs
 * of one name are refused).  0 or an exit code. */
static int output_names(const char *cmd, char *const *paths, int n, const char *out, bool force,
                        const char **outs)
{
    struct stat st;
    if (n == 1) {
        outs[0] = out;
        /* refuse early, before the (possibly long) load */
        return cli_output_check(cmd, out, force);
    }
    if (stat(out, &st) != 0 || !S_ISDIR(st.st_mode))
        return cli_usage(cmd,
                         "with several files, -o names the folder the reports go to ('%s' "
                         "is no folder)",
                         out);
    for (int i = 0; i < n; i++) {
        const char *slash = strrchr(paths[i], '/'), *name = slash ? slash + 1 : paths[i];
        size_t len = strlen(out) + strlen(name) + 8;
        char *o = gm_malloc(len);
        if (!o)
            return GM_EXIT_SOFTWARE;
        snprintf(o, len, "%s/%s.html", out, name);
        outs[i] = o;
        for (int k = 0; k < i; k++)
            if (!strcmp(outs[k], outs[i]))
                return cli_usage(cmd, "'%s' and '%s' would both be written to '%s'", paths[k],
                                 paths[i], outs[i]);
        int rc = cli_output_check(cmd, outs[i], force);
        if (rc)
            return rc;
    }
    return 0;
}

int cmd_snapshot_report(int argc, char **argv)
{
    const char *out = NULL, *title = NULL;
    bool force = false, no_analysis = false;
    uint64_t bands = 400, moments = 12, points = 8000, mem_limit = 0;
    int n_pos = 0, rc;
    struct report_job j;
    const struct opt opts[] = {
        OPT_STRING("output", 'o', &out, "FILE",
                   "HTML file to write (required); with several files, the folder to write "
                   "FILE.html into"),
        OPT_FLAG("force", 0, &force, "replace FILE if it exists"),
        OPT_STRING("title", 0, &title, "TEXT", "title of the report (default: the file name)"),
        OPT_U64("bands", 0, &bands, "N",
                "allocations drawn one by one in the timeline (default 400)", NULL),
        OPT_U64("moments", 0, &moments, "N",
                "allocator states offered in the segments view (default 12)", NULL),
        OPT_U64("points", 0, &points, "N", "points of the categories series (default 8000)", NULL),
        OPT_FLAG("no-analysis", 0, &no_analysis,
                 "leave out categories, phases, leaks and fragmentation"),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot report FILE... -o report.html [--force] [--title TEXT]",
        "Write a self-contained HTML report of a PyTorch memory snapshot: the active memory "
        "timeline (largest allocations as bands, reserved line, peak), categories over time "
        "with forward/backward/step phases, what is alive at the peak, the allocator's segments "
        "at chosen moments, and the findings (leaks, out-of-memory, fragmentation, metadata). "
        "The page makes no request to any other host or file and works offline from file://. "
        "Several files (ranks) are read at the same time and each report written to "
        "DIR/FILE.html, DIR the folder -o names. Exit 73 if an output exists and --force is not "
        "given.",
        "gpumem snapshot report profile.pickle -o report.html\n"
        "gpumem snapshot example -o train.pickle && gpumem snapshot report train.pickle -o r.html\n"
        "gpumem snapshot report rank*.pickle -o reports/"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos < 1)
        return cli_usage(argv[0], "missing snapshot FILE");
    if (!out)
        return cli_usage(argv[0], "missing -o FILE");
    if (bands > 100000 || moments > 64 || points > 1000000)
        return cli_usage(argv[0], "--bands at most 100000, --moments at most 64, --points at "
                                  "most 1000000");
    if (title && n_pos > 1)
        return cli_usage(argv[0], "--title names the report of one file");
    memset(&j, 0, sizeof(j));
    j.cmd = argv[0];
    j.paths = argv + 1;
    j.title = title;
    j.force = force;
    j.no_analysis = no_analysis;
    j.ao.max_points = (uint32_t)points;
    j.ro.title = title;
    j.ro.max_bands = (uint32_t)bands;
    j.ro.max_moments = (uint32_t)moments;
    j.outs = gm_calloc((size_t)n_pos, sizeof(*j.outs));
    j.ans = gm_calloc((size_t)n_pos, sizeof(*j.ans));
    j.warn = gm_calloc((size_t)n_pos, sizeof(*j.warn));
    if (!j.outs || !j.ans || !j.warn) {
        rc = GM_EXIT_SOFTWARE;
    } else if ((rc = output_names(argv[0], argv + 1, n_pos, out, force, j.outs)) == 0) {
        struct snapcli_load_opts lo = {mem_limit, false};
        rc = snapcli_load_each(argv[0], argv + 1, (size_t)n_pos, &lo, analyse, write_page, &j);
    }
    for (int i = 0; j.ans && i < n_pos; i++)
        gm_analysis_free(j.ans[i]);
    for (int i = 0; n_pos > 1 && j.outs && i < n_pos; i++)
        gm_free((void *)(uintptr_t)j.outs[i]);
    gm_free(j.outs);
    gm_free(j.ans);
    gm_free(j.warn);
    return rc;
}
