/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_report.c - gpumem snapshot report FILE... -o report.html: one self-contained
 * HTML file (no request to any other host or file), written atomically.  Several files are
 * the ranks of one job, read and analysed at the same time and shown side by side in one
 * page; with -o naming a folder, each file gets a page of its own there instead. */
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"

#include "gpumem/account.h"
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
    const char **outs; /* per file: the HTML to write (NULL: one page of all ranks) */
    const char *title;
    bool force, no_analysis;
    struct gm_report_page *ranks; /* the page of all ranks, when -o is no folder */
    struct gm_analysis_opts ao;
    struct gm_report_opts ro;
    struct gm_analysis **ans;
    struct gm_error *warn;      /* per file: why there is no analysis (code GM_OK: none) */
    struct gm_digest **digests; /* the page of all ranks: per file, a rank read from its digest */
};

/* In the thread that read the file: its analysis (the timeline, the peak and the segments
 * do not need it, so a memory limit only leaves it out, with a warning).  A file whose events
 * were consumed while loading is read again with them when the page would read them (no
 * analysis, or one without the totals it draws): the failure says so. */
static enum gm_status analyse(void *ctx, size_t i, struct gm_snapshot *snap, struct gm_error *err)
{
    struct report_job *j = ctx;
    struct gm_error e;
    gm_error_clear(&j->warn[i]);
    if (j->no_analysis)
        return GM_OK;
    gm_error_clear(&e);
    if (gm_analysis_run(snap, &j->ao, &j->ans[i], &e) != GM_OK) {
        j->ans[i] = NULL;
        if ((e.code != GM_ERR_LIMIT && e.code != GM_ERR_NOMEM) || snap->events_consumed) {
            *err = e;
            return e.code;
        }
        j->warn[i] = e;
    } else if (snap->events_consumed && gm_analysis_reads_trace(j->ans[i])) {
        gm_analysis_free(j->ans[i]);
        j->ans[i] = NULL;
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "the page reads the events");
    }
    return GM_OK;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* In this thread, in argument order: write the file's page, or add it to the ranks' page. */
static int write_page(void *ctx, size_t i, struct gm_snapshot *snap)
{
    struct report_job *j = ctx;
    struct gm_report_opts ro = j->ro;
    struct gm_output o;
    struct gm_error err;
    int rc = 0;
    if (j->warn[i].code != GM_OK)
        cli_errorf(j->cmd, "warning: %s: no categories, phases or leaks in the report: %s",
                   base_name(j->paths[i]), j->warn[i].msg);
    if (j->ranks && j->digests[i]) {
        if (gm_report_page_add_digest(j->ranks, j->digests[i], base_name(j->paths[i]), &err) !=
            GM_OK)
            rc = cli_fail(j->cmd, &err);
        gm_digest_free(j->digests[i]);
        j->digests[i] = NULL;
    } else if (j->ranks) {
        if (gm_report_page_add(j->ranks, snap, j->ans[i], base_name(j->paths[i]), &err) != GM_OK)
            rc = cli_fail(j->cmd, &err);
    } else {
        if (!j->title)
            ro.title = base_name(j->paths[i]);
        rc = cli_output_open(&o, j->cmd, j->outs[i], j->force);
        if (rc == 0) {
            if (gm_report_html(o.f, snap, j->ans[i], &ro, &err) != GM_OK)
                rc = cli_output_fail(&o, j->cmd, &err);
            else
                rc = cli_output_commit(&o, j->cmd);
        }
    }
    gm_analysis_free(j->ans[i]);
    j->ans[i] = NULL;
    return rc;
}

/* The page of all ranks, once every file is in it. */
static int write_ranks(struct report_job *j, const char *out)
{
    struct gm_output o;
    struct gm_error err;
    int rc = cli_output_open(&o, j->cmd, out, j->force);
    if (rc)
        return rc;
    if (gm_report_page_write(j->ranks, o.f, &err) != GM_OK)
        return cli_output_fail(&o, j->cmd, &err);
    return cli_output_commit(&o, j->cmd);
}

/* Where the pages go: -o itself for one input or for the page of all ranks (*folder
 * false), else DIR/<name>.html for each input of several when -o names a folder (two
 * inputs of one name are refused).  0 or an exit code. */
static int output_names(const char *cmd, char *const *paths, int n, const char *out, bool force,
                        const char **outs, bool *folder)
{
    struct stat st;
    *folder = n > 1 && stat(out, &st) == 0 && S_ISDIR(st.st_mode);
    if (!*folder)
        /* refuse early, before the (possibly long) load */
        return cli_output_check(cmd, out, force);
    for (int i = 0; i < n; i++) {
        const char *name = base_name(paths[i]);
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
    const char *out = NULL, *title = NULL, *account_file = NULL;
    struct gm_account *account = NULL;
    bool force = false, no_analysis = false;
    uint64_t bands = 400, moments = 12, points = 8000, mem_limit = 0, budget = (uint64_t)4 << 20;
    int n_pos = 0, rc;
    bool folder = false;
    struct report_job j;
    const char *rules_path = NULL;
    struct gm_category_rules *rules = NULL;
    const struct opt opts[] = {
        OPT_STRING("output", 'o', &out, "FILE",
                   "HTML file to write (required); several files (ranks) make one page, unless "
                   "FILE is a folder: then each file's page is written there as NAME.html"),
        OPT_FLAG("force", 0, &force, "replace FILE if it exists"),
        OPT_STRING("title", 0, &title, "TEXT", "title of the report (default: the file name)"),
        OPT_U64("bands", 0, &bands, "N",
                "allocations drawn one by one in the timeline (default 400)", NULL),
        OPT_U64("moments", 0, &moments, "N",
                "moments named in the allocator state's list (default 12)", NULL),
        OPT_SIZE("state-budget", 0, &budget, "SIZE",
                 "page data for each device's allocator state (default 4MiB): within it the "
                 "state at every event, beyond it windows around the peak and the OOMs",
                 NULL),
        OPT_U64("points", 0, &points, "N", "points of the categories series (default 8000)", NULL),
        OPT_FLAG("no-analysis", 0, &no_analysis,
                 "leave out categories, phases, leaks and fragmentation"),
        SNAPCLI_OPT_CATEGORIES(&rules_path),
        OPT_STRING("account", 0, &account_file, "FILE",
                   "the account of the same run (gpumem account --output, or its folder of "
                   "files): each process's whole device drawn beside the snapshot"),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot report FILE... -o report.html [--force] [--title TEXT]",
        "Write a self-contained HTML report of a PyTorch memory snapshot: the active memory "
        "timeline (largest allocations as bands, reserved line, peak, out-of-memory events), "
        "categories over time with forward/backward/step phases and your own gpumem.torch "
        "phases, the segment timeline, what is alive at the peak (a table and an icicle graph "
        "by stack), the allocator's segments and blocks at any event, and the findings (leaks, "
        "out-of-memory, fragmentation, metadata). It opens on the device of an out-of-memory "
        "event when there is one. The page makes no request to any other host or file and "
        "works offline from file://. Several files are the ranks of one job, whatever their "
        "device index: read at the same time and shown side by side in one page with their "
        "imbalance, or, when -o names a folder, each written there as FILE.html. With --account "
        "(gpumem account of the same run) the page also shows each process's whole device: the "
        "allocator's memory as the driver saw it beside everything else on the device. Exit 73 "
        "if an output exists and --force is not given.",
        "gpumem snapshot report profile.pickle -o report.html\n"
        "gpumem snapshot example -o train.pickle && gpumem snapshot report train.pickle -o r.html\n"
        "gpumem snapshot report rank*.pickle -o job.html\n"
        "gpumem snapshot report rank*.pickle -o reports/\n"
        "gpumem snapshot report run.pickle --account run.account.jsonl -o run.html"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos < 1)
        return cli_usage(argv[0], "missing snapshot FILE");
    if (!out)
        return cli_usage(argv[0], "missing -o FILE");
    if (bands > 100000 || moments > 64 || points > 1000000 || budget < 65536 ||
        budget > ((uint64_t)1 << 30))
        return cli_usage(argv[0], "--bands at most 100000, --moments at most 64, --points at "
                                  "most 1000000, --state-budget from 64KiB to 1GiB");
    if ((rc = snapcli_rules_load(argv[0], rules_path, &rules)) != 0)
        return rc;
    struct snapcli_rank_args ra = {0};
    {
        int arc = snapcli_rank_argv(&argv, &n_pos, &ra);
        if (arc) {
            gm_category_rules_free(rules);
            return arc;
        }
    }
    if (account_file) {
        struct gm_error err;
        if (gm_account_new(&account, &err) != GM_OK ||
            gm_account_add_file(account, account_file, &err) != GM_OK) {
            gm_account_free(account);
            snapcli_rank_argv_release(&ra);
            gm_category_rules_free(rules);
            return cli_fail(argv[0], &err);
        }
    }
    memset(&j, 0, sizeof(j));
    j.cmd = argv[0];
    j.ro.account = account;
    j.paths = argv + 1;
    j.title = title;
    j.force = force;
    j.no_analysis = no_analysis;
    j.ao.max_points = (uint32_t)points;
    j.ao.rules = rules;
    j.ao.totals = true; /* the page draws them: from the analysis' pass, not a walk of its own */
    j.ro.title = title;
    j.ro.max_bands = (uint32_t)bands;
    j.ro.max_moments = (uint32_t)moments;
    j.ro.state_budget = budget;
    j.outs = gm_calloc((size_t)n_pos, sizeof(*j.outs));
    j.ans = gm_calloc((size_t)n_pos, sizeof(*j.ans));
    j.warn = gm_calloc((size_t)n_pos, sizeof(*j.warn));
    j.digests = gm_calloc((size_t)n_pos, sizeof(*j.digests));
    if (!j.outs || !j.ans || !j.warn || !j.digests) {
        rc = GM_EXIT_SOFTWARE;
    } else if ((rc = output_names(argv[0], argv + 1, n_pos, out, force, j.outs, &folder)) == 0) {
        /* the page reads no event that the analysis does not keep: none kept (read again if
         * it does) */
        struct snapcli_load_opts lo = {.memory_limit = mem_limit,
                                       .consumer = gm_analysis_first_pass_consumer(),
                                       .consume_events = !no_analysis};
        struct gm_error err;
        char all[160];
        if (!folder && n_pos > 1 && !title) {
            /* the page's title: its ranks' files */
            snprintf(all, sizeof(all), "%d ranks: %s%s%s", n_pos, base_name(argv[1]),
                     n_pos > 2 ? " ... " : ", ", base_name(argv[n_pos]));
            j.ro.title = all;
        }
        if (folder && title) {
            rc = cli_usage(argv[0], "--title names one page, not the pages of a folder");
        } else if (!folder && n_pos > 1 && gm_report_page_new(&j.ro, &j.ranks, &err) != GM_OK) {
            rc = cli_fail(argv[0], &err);
        } else {
            if (!folder)
                j.outs[0] = out;
            if (j.ranks)
                lo.digests = j.digests; /* a rank's digest only goes into the page of all */
            rc = snapcli_load_each(argv[0], argv + 1, (size_t)n_pos, &lo, analyse, write_page, &j);
            if (rc == 0 && j.ranks)
                rc = write_ranks(&j, out);
        }
        gm_report_page_free(j.ranks);
        j.ranks = NULL;
    }
    for (int i = 0; j.ans && i < n_pos; i++)
        gm_analysis_free(j.ans[i]);
    for (int i = 0; folder && j.outs && i < n_pos; i++)
        gm_free((void *)(uintptr_t)j.outs[i]);
    gm_free(j.outs);
    gm_free(j.ans);
    gm_free(j.warn);
    for (int i = 0; j.digests && i < n_pos; i++)
        gm_digest_free(j.digests[i]); /* read before a failure stopped the rest */
    gm_free(j.digests);
    gm_account_free(account);
    gm_category_rules_free(rules);
    snapcli_rank_argv_release(&ra);
    return rc;
}
