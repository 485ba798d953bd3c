/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_export.c - gpumem snapshot export --perfetto|--speedscope|--pprof|--sqlite
 * FILE -o OUT: a snapshot and its analysis in the formats other tools open (gpumem/export.h). */
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"

#include "gpumem/arena.h"
#include "gpumem/export.h"

#include <stdint.h>
#include <string.h>

int cmd_snapshot_export(int argc, char **argv)
{
    bool fmt[GM_EXPORT_FORMAT_COUNT] = {false}, force = false, at_seen = false;
    const char *out = NULL, *device = NULL;
    uint64_t mem_limit = 0, points = 20000;
    int at = -1, n_pos = 0, n_fmt = 0, rc;
    struct gm_export_opts eo = {0};
    struct gm_analysis_opts ao = {0};
    struct gm_export_input *in;
    struct gm_rank_files rf;
    struct gm_error err;
    struct gm_output o;
    const char *rules_path = NULL;
    struct gm_category_rules *rules = NULL;
    const struct opt opts[] = {
        OPT_FLAG("perfetto", 0, &fmt[GM_EXPORT_PERFETTO],
                 "Chrome trace-event JSON for ui.perfetto.dev and chrome://tracing: counters, "
                 "phases, iterations, annotations, OOMs"),
        OPT_FLAG("speedscope", 0, &fmt[GM_EXPORT_SPEEDSCOPE],
                 "speedscope JSON: the stacks alive at the peak (or --at), weighted by bytes"),
        OPT_FLAG("pprof", 0, &fmt[GM_EXPORT_PPROF],
                 "gzip'd pprof profile.proto of the same stacks (space/bytes, objects/count)"),
        OPT_FLAG("sqlite", 0, &fmt[GM_EXPORT_SQLITE],
                 "SQLite database: device_traces, segments, blocks, frames, allocations, "
                 "categories, phases, iterations"),
        OPT_STRING("output", 'o', &out, "OUT", "file to write (required)"),
        OPT_FLAG("force", 0, &force, "replace OUT if it exists"),
        OPT_STRING("device", 'd', &device, "N", "only this device (default: all)"),
        OPT_INT("at", 0, &at, "K",
                "--speedscope, --pprof: what is alive after event K instead of at the peak "
                "(-1: before the first)",
                &at_seen),
        OPT_U64("points", 0, &points, "N",
                "--perfetto: counter points per device, 4 to 4000000 (default 20000); every "
                "stretch's least, most and last figures stay exact",
                NULL),
        SNAPCLI_OPT_CATEGORIES(&rules_path),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot export --perfetto|--speedscope|--pprof|--sqlite FILE -o OUT [--force]\n"
        "       [--device N] [--at K] [--points N]\n"
        "       gpumem snapshot export --perfetto|--speedscope RANK_FILE... -o OUT",
        "Write a snapshot and gpumem's analysis of it for the tools people already use: "
        "--perfetto a Chrome trace-event JSON (one process per device; allocated bytes by "
        "category and reserved bytes as counters; phases, iterations and record_function "
        "annotations as slices; out-of-memory events as instants); --speedscope and --pprof "
        "the stacks alive at each device's peak (or after event --at K), as `snapshot peak "
        "--folded` lists them; --sqlite every trace event, segment, block, frame and "
        "allocation with its category and phase, as tables to query with SQL. Several files "
        "(--perfetto, --speedscope) are the ranks of one job: a process or profile per file "
        "and device, on one time axis. "
        "docs/export.md shows each.",
        "gpumem snapshot export --perfetto train.pickle -o train.trace.json\n"
        "gpumem snapshot export --speedscope train.pickle -o peak.speedscope.json\n"
        "gpumem snapshot export --pprof train.pickle -o peak.pb.gz   # go tool pprof -top peak.pb.gz\n"
        "gpumem snapshot export --sqlite train.pickle -o train.db"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    for (int i = 0; i < GM_EXPORT_FORMAT_COUNT; i++)
        if (fmt[i]) {
            eo.format = (enum gm_export_format)i;
            n_fmt++;
        }
    if (n_fmt != 1)
        return cli_usage(argv[0],
                         "choose one format: --perfetto, --speedscope, --pprof or --sqlite");
    if (n_pos < 1)
        return cli_usage(argv[0], "missing FILE");
    if (n_pos > 1 && eo.format != GM_EXPORT_PERFETTO && eo.format != GM_EXPORT_SPEEDSCOPE)
        return cli_usage(argv[0],
                         "--%s takes one FILE (--perfetto and --speedscope take the "
                         "ranks of a job)",
                         gm_export_format_name(eo.format));
    if (!out)
        return cli_usage(argv[0], "missing -o OUT");
    if (at_seen && eo.format != GM_EXPORT_SPEEDSCOPE && eo.format != GM_EXPORT_PPROF)
        return cli_usage(argv[0], "--at goes with --speedscope or --pprof");
    if (points < 4 || points > 4000000)
        return cli_usage(argv[0], "--points: choose 4 to 4000000");
    if ((rc = snapcli_device_arg(argv[0], device, &eo.device)) != 0)
        return rc;
    if (!gm_export_available(eo.format)) {
        cli_errorf(argv[0], "--%s: this gpumem was built without it (libsqlite3-dev missing)",
                   gm_export_format_name(eo.format));
        return GM_EXIT_FAILURE;
    }
    if ((rc = cli_output_check(argv[0], out, force)) != 0)
        return rc;
    /* the ranks of a job as every multi-file command takes them: in rank order by their
     * names, a folder for its rank files */
    if ((rc = snapcli_rank_files(argv[0], argv + 1, (size_t)n_pos, &rf)) != 0)
        return rc;
    if (rf.n > 1 && eo.format != GM_EXPORT_PERFETTO && eo.format != GM_EXPORT_SPEEDSCOPE) {
        size_t n = rf.n;
        gm_rank_files_release(&rf);
        return cli_usage(argv[0], "--%s takes one FILE, and '%s' holds %zu rank files",
                         gm_export_format_name(eo.format), argv[1], n);
    }
    eo.at_given = at_seen;
    eo.at = at;
    ao.max_points = (uint32_t)points;
    if ((rc = snapcli_rules_load(argv[0], rules_path, &rules)) != 0) {
        gm_rank_files_release(&rf);
        return rc;
    }
    ao.rules = rules;
    if (!(in = gm_calloc(rf.n, sizeof(*in)))) {
        gm_category_rules_free(rules);
        gm_rank_files_release(&rf);
        return GM_EXIT_SOFTWARE;
    }
    for (size_t f = 0; f < rf.n && rc == 0; f++) {
        struct snapcli_load_opts lo = {.memory_limit = mem_limit,
                                       .consumer = gm_analysis_first_pass_consumer()};
        struct gm_snapshot *snap = NULL;
        struct gm_analysis *an = NULL;
        if ((rc = snapcli_load(argv[0], rf.paths[f], &lo, &snap)) != 0)
            break;
        in[f] = (struct gm_export_input){snapcli_name(rf.paths[f]), snap, NULL};
        if (gm_analysis_run(snap, &ao, &an, &err) != GM_OK)
            rc = cli_fail(argv[0], &err);
        in[f].an = an;
    }
    gm_category_rules_free(rules); /* the analyses are made */
    if (rc == 0 && (rc = cli_output_open(&o, argv[0], out, force)) == 0) {
        if (gm_export_write(o.f, in, rf.n, &eo, &err) == GM_OK) {
            rc = cli_output_commit(&o, argv[0]);
        } else if (err.code == GM_ERR_INVALID) { /* no such device or event: the usage */
            cli_output_abort(&o);
            cli_errorf(argv[0], "%s", err.msg);
            rc = GM_EXIT_USAGE;
        } else {
            rc = cli_output_fail(&o, argv[0], &err);
        }
    }
    for (size_t f = 0; f < rf.n; f++) {
        gm_analysis_free((struct gm_analysis *)(uintptr_t)in[f].an);
        gm_snapshot_free((struct gm_snapshot *)(uintptr_t)in[f].snap);
    }
    gm_free(in);
    gm_rank_files_release(&rf);
    return rc;
}
