/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_report.c - gpumem snapshot report FILE -o report.html: one self-contained
 * HTML file (no request to any other host or file), written atomically. */
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"

#include "gpumem/analysis.h"
#include "gpumem/report.h"
#include "gpumem/snapshot.h"
#include "gpumem/units.h"

#include <string.h>

int cmd_snapshot_report(int argc, char **argv)
{
    const char *out = NULL, *title = NULL;
    bool force = false, no_analysis = false;
    uint64_t bands = 400, moments = 12, points = 8000;
    int n_pos = 0, rc;
    struct gm_snapshot *snap = NULL;
    struct gm_analysis *an = NULL;
    struct gm_analysis_opts ao = {0};
    struct gm_report_opts ro;
    struct gm_error err;
    struct cli_output o;
    const struct opt opts[] = {
        OPT_STRING("output", 'o', &out, "FILE", "HTML file to write (required)"),
        OPT_FLAG("force", 0, &force, "replace FILE if it exists"),
        OPT_STRING("title", 0, &title, "TEXT", "title of the report (default: the file name)"),
        OPT_U64("bands", 0, &bands, "N",
                "allocations drawn one by one in the timeline (default 400)", NULL),
        OPT_U64("moments", 0, &moments, "N",
                "allocator states offered in the segments view (default 12)", NULL),
        OPT_U64("points", 0, &points, "N", "points of the categories series (default 8000)", NULL),
        OPT_FLAG("no-analysis", 0, &no_analysis,
                 "leave out categories, phases, leaks and fragmentation"),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot report FILE -o report.html [--force] [--title TEXT]",
        "Write a self-contained HTML report of a PyTorch memory snapshot: the active memory "
        "timeline (largest allocations as bands, reserved line, peak), categories over time "
        "with forward/backward/step phases, what is alive at the peak, the allocator's segments "
        "at chosen moments, and the findings (leaks, out-of-memory, fragmentation, metadata). "
        "The page makes no request to any other host or file and works offline from file://. "
        "Exit 73 if FILE exists and --force is not given.",
        "gpumem snapshot report profile.pickle -o report.html\n"
        "gpumem snapshot example -o train.pickle && gpumem snapshot report train.pickle -o r.html"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos != 1)
        return cli_usage(argv[0], n_pos ? "give one snapshot file" : "missing snapshot FILE");
    if (!out)
        return cli_usage(argv[0], "missing -o FILE");
    if (bands > 100000 || moments > 64 || points > 1000000)
        return cli_usage(argv[0], "--bands at most 100000, --moments at most 64, --points at "
                                  "most 1000000");
    /* refuse early, before the (possibly long) load */
    rc = cli_output_check(argv[0], out, force);
    if (rc)
        return rc;
    rc = snapcli_load(argv[0], argv[1], &snap);
    if (rc)
        return rc;
    if (!no_analysis) {
        ao.max_points = (uint32_t)points;
        if (gm_analysis_run(snap, &ao, &an, &err) != GM_OK) {
            /* the timeline, the peak and the segments do not need the analysis */
            if (err.code != GM_ERR_LIMIT && err.code != GM_ERR_NOMEM) {
                gm_snapshot_free(snap);
                return cli_fail(argv[0], &err);
            }
            cli_errorf(argv[0], "warning: no categories, phases or leaks in the report: %s",
                       err.msg);
            an = NULL;
        }
    }
    memset(&ro, 0, sizeof(ro));
    if (!title) {
        const char *slash = strrchr(argv[1], '/');
        title = slash ? slash + 1 : argv[1];
    }
    ro.title = title;
    ro.max_bands = (uint32_t)bands;
    ro.max_moments = (uint32_t)moments;
    rc = cli_output_open(&o, argv[0], out, force);
    if (rc == 0) {
        if (gm_report_html(o.f, snap, an, &ro, &err) != GM_OK) {
            rc = cli_output_fail(&o, argv[0], &err);
        } else {
            rc = cli_output_commit(&o, argv[0]);
        }
    }
    gm_analysis_free(an);
    gm_snapshot_free(snap);
    return rc;
}
