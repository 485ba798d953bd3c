/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_diff.c - gpumem snapshot diff A B: two runs (before/after a change) or two
 * ranks: the peak, the category split at the peak, and the allocation sites that differ
 * most in bytes alive at the peak, with new and vanished sites. */
#include "analysis_common.h"
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"

#include <inttypes.h>
#include <string.h>

/* " peak A -> B (change), at the peak: phase -> phase" and the categories at the peaks. */
static void print_peaks(const uint64_t peak[2], const uint8_t phase[2],
                        const uint64_t at_peak[2][GM_CATEGORY_COUNT])
{
    char b1[64], b2[64], b3[64];
    double pct = peak[0] ? 100.0 * ((double)peak[1] - (double)peak[0]) / (double)peak[0] : 0.0;
    printf(" peak %s -> %s (%s, %+.1f%%), at the peak: %s -> %s\n",
           ana_cli_short(b1, sizeof(b1), peak[0]), ana_cli_short(b2, sizeof(b2), peak[1]),
           ana_cli_delta(b3, sizeof(b3), peak[0], peak[1]), pct,
           gm_phase_name((enum gm_phase)phase[0]), gm_phase_name((enum gm_phase)phase[1]));
    printf("  %-16s %14s %14s %14s\n", "category", "A", "B", "change");
    for (int c = 0; c < GM_CATEGORY_COUNT; c++)
        printf("  %-16s %14s %14s %14s\n", gm_category_name((enum gm_category)c),
               ana_cli_short(b1, sizeof(b1), at_peak[0][c]),
               ana_cli_short(b2, sizeof(b2), at_peak[1][c]),
               ana_cli_delta(b3, sizeof(b3), at_peak[0][c], at_peak[1][c]));
}

/* One side of a diff that involves a digest: its rank, from the digest or the snapshot. */
static int side_rank(const char *cmd, char *path, uint64_t mem_limit, struct gm_rank *r,
                     const char **what)
{
    bool has = false;
    int rc = 0;
    if (gm_digest_is_file(path)) {
        struct gm_digest *d;
        struct gm_error err;
        if (gm_digest_load(path, &d, &err) != GM_OK)
            return cli_fail(cmd, &err);
        gm_digest_rank(d, 0, path, r, &has);
        gm_digest_free(d);
        *what = "a digest";
    } else {
        struct gm_snapshot *snap;
        struct gm_analysis *an;
        struct gm_error err;
        struct snapcli_load_opts lo = {.memory_limit = mem_limit};
        if ((rc = ana_cli_open(cmd, path, &lo, &snap, &an)) != 0)
            return rc;
        if (gm_analysis_rank(an, 0, path, r, &has, &err) != GM_OK)
            rc = cli_fail(cmd, &err);
        ana_cli_close(snap, an);
        *what = "a snapshot";
    }
    if (rc == 0 && !has) {
        cli_errorf(cmd, "'%s' has no device with a trace or segments", path);
        rc = GM_EXIT_DATAERR;
    }
    return rc;
}

/* Two ranks, one of them (or both) read from its digest: the peaks and the categories at
 * them (a digest keeps no allocation sites). */
static int diff_ranks(const char *cmd, char **paths, uint64_t mem_limit)
{
    struct gm_rank r[2];
    const char *what[2];
    uint64_t peak[2], at_peak[2][GM_CATEGORY_COUNT];
    uint8_t phase[2];
    int rc;
    for (int i = 0; i < 2; i++) {
        if ((rc = side_rank(cmd, paths[i], mem_limit, &r[i], &what[i])) != 0)
            return rc;
        peak[i] = r[i].value[GM_RANK_PEAK];
        phase[i] = r[i].peak_phase;
        memcpy(at_peak[i], r[i].at_peak, sizeof(at_peak[i]));
    }
    printf("A: %s (%s)\nB: %s (%s)\n\n", paths[0], what[0], paths[1], what[1]);
    printf("the rank of A (cuda:%d) against the rank of B (cuda:%d):", (int)r[0].device,
           (int)r[1].device);
    print_peaks(peak, phase, (const uint64_t(*)[GM_CATEGORY_COUNT])at_peak);
    printf("  (a digest keeps no allocation sites: diff the two snapshots to see them)\n");
    return 0;
}

static void print_device(const struct gm_analysis_diff_device *d, const struct gm_snapshot *sa,
                         const struct gm_snapshot *sb, uint64_t top)
{
    char b1[64], b2[64], b3[64], line[512];
    if (d->devices[0] != d->devices[1])
        printf("device %d of A against device %d of B (two ranks):", (int)d->devices[0],
               (int)d->devices[1]);
    else
        printf("device %d:", (int)d->device);
    if (!d->present[0] || !d->present[1]) {
        printf(" only in %s\n", d->present[0] ? "A" : "B");
    }
    print_peaks(d->peak_bytes, d->peak_phase, d->at_peak);
    printf("  allocation sites, bytes alive at the peak, largest change first (%zu sites):\n",
           d->n_sites);
    printf("  %12s %12s %12s  %-8s %s\n", "change", "A", "B", "status", "site");
    size_t shown = 0;
    for (size_t i = 0; i < d->n_sites && (!top || shown < top); i++) {
        const struct gm_analysis_diff_site *s = &d->sites[i];
        if (!s->bytes[0] && !s->bytes[1] && s->total[0] == s->total[1])
            continue;
        uint32_t stack;
        const struct gm_snapshot *snap = gm_analysis_diff_site_stack(s, sa, sb, &stack);
        snapcli_stack_line(line, sizeof(line), snap, stack, s->apart);
        printf(
            "  %12s %12s %12s  %-8s %s\n", ana_cli_delta(b3, sizeof(b3), s->bytes[0], s->bytes[1]),
            ana_cli_short(b1, sizeof(b1), s->bytes[0]), ana_cli_short(b2, sizeof(b2), s->bytes[1]),
            gm_diff_status_name((enum gm_diff_status)s->status), line);
        shown++;
    }
    printf("\n");
}

int cmd_snapshot_diff(int argc, char **argv)
{
    bool json = false;
    uint64_t top = gm_analysis_doc_top(GM_DOC_DIFF), mem_limit = 0;
    int n_pos = 0;
    const char *rules_path = NULL;
    struct gm_category_rules *rules = NULL;
    const struct opt opts[] = {
        OPT_JSON(&json, "gpumem.snapshot.diff/1"),
        OPT_U64("top", 'n', &top, "N", "at most N sites per device (20; 0: all)", NULL),
        SNAPCLI_OPT_CATEGORIES(&rules_path),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot diff [--json] [--top N] A B",
        "Compare two PyTorch memory snapshots (before/after a change, or two ranks): the "
        "peak of each device, the category split at the peak, and the allocation sites "
        "(Python frames; only the innermost line counts) whose bytes alive at the peak changed "
        "most, with new and vanished sites. Two files with one device each are compared "
        "whatever the devices' indexes (rank 1 on cuda:1 against rank 0 on cuda:0); else the "
        "devices are paired by index. With a rank's digest (snapshot digest) for A or B, the "
        "peaks and the categories at them are compared (a digest keeps no sites).",
        "gpumem snapshot diff before.pickle after.pickle\n"
        "gpumem snapshot diff --json rank0.pickle rank1.pickle"};
    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos != 2)
        return cli_usage(argv[0], "expected two snapshot files");
    if (gm_digest_is_file(argv[1]) || gm_digest_is_file(argv[2])) {
        if (json)
            return cli_usage(argv[0], "--json compares two snapshots' sites, which a digest does "
                                      "not keep: `snapshot categories --json A B` compares the "
                                      "ranks");
        return diff_ranks(argv[0], argv + 1, mem_limit);
    }
    struct gm_snapshot *snaps[2], *sa, *sb;
    struct gm_analysis *ans[2], *aa, *ab;
    /* both read at the same time, the same rules applied to both */
    int rc = snapcli_rules_load(argv[0], rules_path, &rules);
    if (rc)
        return rc;
    /* the analysis for the diff reads no event after the load: none kept (read again if it
     * does; with rules, whose annotations would read the times that a diff does not keep,
     * they are kept) */
    struct snapcli_load_opts lo = {
        .memory_limit = mem_limit, .rules = rules, .consume_events = rules == NULL};
    rc = ana_cli_open_diff(argv[0], argv + 1, &lo, snaps, ans);
    gm_category_rules_free(rules); /* the analyses are made */
    if (rc)
        return rc;
    sa = snaps[0];
    sb = snaps[1];
    aa = ans[0];
    ab = ans[1];
    struct gm_analysis_diff *d = NULL;
    struct gm_error err = {0};
    if (gm_analysis_diff(aa, ab, &d, &err) != GM_OK) {
        rc = cli_fail(argv[0], &err);
        goto out;
    }
    if (json) {
        struct gm_analysis_doc_file files[2] = {{.path = argv[1], .an = aa},
                                                {.path = argv[2], .an = ab}};
        struct gm_analysis_doc doc = {
            .kind = GM_DOC_DIFF, .files = files, .n_files = 2, .diff = d, .top = top};
        rc = cli_json_status(argv[0], gm_analysis_json(stdout, &doc, &err), &err);
    } else {
        printf("A: %s\nB: %s\n\n", argv[1], argv[2]);
        for (size_t i = 0; i < d->n_devices; i++)
            print_device(&d->devices[i], sa, sb, top);
    }
out:
    gm_analysis_diff_free(d);
    ana_cli_close(sa, aa);
    ana_cli_close(sb, ab);
    return rc;
}
