/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_diff.c - gpumem snapshot diff A B: two runs (before/after a change) or two
 * ranks: the peak, the category split at the peak, and the allocation sites that differ
 * most in bytes alive at the peak, with new and vanished sites. */
#include "analysis_common.h"
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include <inttypes.h>

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
    double pct = d->peak_bytes[0] ? 100.0 * ((double)d->peak_bytes[1] - (double)d->peak_bytes[0]) /
                                        (double)d->peak_bytes[0]
                                  : 0.0;
    printf(" peak %s -> %s (%s, %+.1f%%), at the peak: %s -> %s\n",
           ana_cli_short(b1, sizeof(b1), d->peak_bytes[0]),
           ana_cli_short(b2, sizeof(b2), d->peak_bytes[1]),
           ana_cli_delta(b3, sizeof(b3), d->peak_bytes[0], d->peak_bytes[1]), pct,
           gm_phase_name((enum gm_phase)d->peak_phase[0]),
           gm_phase_name((enum gm_phase)d->peak_phase[1]));
    printf("  %-16s %14s %14s %14s\n", "category", "A", "B", "change");
    for (int c = 0; c < GM_CATEGORY_COUNT; c++)
        printf("  %-16s %14s %14s %14s\n", gm_category_name((enum gm_category)c),
               ana_cli_short(b1, sizeof(b1), d->at_peak[0][c]),
               ana_cli_short(b2, sizeof(b2), d->at_peak[1][c]),
               ana_cli_delta(b3, sizeof(b3), d->at_peak[0][c], d->at_peak[1][c]));
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
    const struct opt opts[] = {
        OPT_JSON(&json, "gpumem.snapshot.diff/1"),
        OPT_U64("top", 'n', &top, "N", "at most N sites per device (20; 0: all)", NULL),
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
        "devices are paired by index.",
        "gpumem snapshot diff before.pickle after.pickle\n"
        "gpumem snapshot diff --json rank0.pickle rank1.pickle"};
    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos != 2)
        return cli_usage(argv[0], "expected two snapshot files");
    struct gm_snapshot *snaps[2], *sa, *sb;
    struct gm_analysis *ans[2], *aa, *ab;
    struct snapcli_load_opts lo = {mem_limit, false, NULL};
    /* both read at the same time */
    int rc = ana_cli_open_many(argv[0], argv + 1, 2, &lo, snaps, ans);
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
