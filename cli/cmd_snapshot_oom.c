/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_oom.c - gpumem snapshot oom FILE: fragmentation (reserved but unallocated
 * memory, largest free block per pool and stream) at the peak and at every out-of-memory
 * event, with the verdict (true shortage or fragmentation) and the allocator settings
 * that help. */
#include "analysis_common.h"
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include <inttypes.h>

static void print_frag(const struct gm_analysis_frag *f)
{
    char b1[64];
    printf("    reserved                  %s\n", ana_cli_bytes(b1, sizeof(b1), f->reserved));
    printf("    allocated (512 B rounded) %s\n", ana_cli_bytes(b1, sizeof(b1), f->allocated));
    printf("    reserved but unallocated  %s",
           ana_cli_bytes(b1, sizeof(b1), f->reserved_unallocated));
    if (f->reserved)
        printf(" (%.1f%% of reserved)",
               100.0 * (double)f->reserved_unallocated / (double)f->reserved);
    printf("\n    largest free block        %s\n", ana_cli_bytes(b1, sizeof(b1), f->largest_free));
    for (size_t i = 0; i < f->n_pools; i++) {
        const struct gm_analysis_pool_free *p = &f->pools[i];
        char b2[64], b3[64];
        printf("      stream %-14" PRIu64 " %-5s pool: %u segment%s, reserved %s, free %s, "
               "largest free %s\n",
               p->stream, p->is_small ? "small" : "large", p->n_segments,
               p->n_segments == 1 ? "" : "s", ana_cli_short(b1, sizeof(b1), p->reserved),
               ana_cli_short(b2, sizeof(b2), p->free),
               ana_cli_short(b3, sizeof(b3), p->largest_free));
    }
}

/* Reserved minus allocated over the trace, from the analysis series: the largest gap. */
static const struct gm_analysis_point *max_gap(const struct gm_analysis_device *dev)
{
    const struct gm_analysis_point *best = NULL;
    for (size_t i = 0; i < dev->n_points; i++) {
        const struct gm_analysis_point *p = &dev->points[i];
        uint64_t gap = p->reserved > p->total ? p->reserved - p->total : 0;
        if (!best || gap > (best->reserved > best->total ? best->reserved - best->total : 0))
            best = p;
    }
    return best;
}

static void print_device(const struct gm_analysis *an, const struct gm_analysis_device *dev)
{
    char b1[64];
    printf("device %d: ", (int)dev->device);
    if (!dev->peak_frag.reserved && !dev->n_ooms) {
        printf("no segments\n\n");
        return;
    }
    printf("at the allocated peak (%s, ", ana_cli_short(b1, sizeof(b1), dev->peak_bytes));
    if (dev->peak_event < 0)
        printf("initial state):\n");
    else
        printf("after event %" PRId64 ", %s):\n", dev->peak_event,
               gm_phase_name((enum gm_phase)dev->peak_phase));
    print_frag(&dev->peak_frag);
    const struct gm_analysis_point *g = max_gap(dev);
    if (g && dev->n_events) {
        char b2[64];
        printf("  reserved minus allocated over the trace: largest %s after event %" PRId64
               " (%s; reserved %s)\n",
               ana_cli_short(b1, sizeof(b1), g->reserved > g->total ? g->reserved - g->total : 0),
               g->event, gm_phase_name((enum gm_phase)g->phase),
               ana_cli_short(b2, sizeof(b2), g->reserved));
    }
    if (!dev->n_ooms)
        printf("  no out-of-memory event in the trace\n");
    for (size_t i = 0; i < dev->n_ooms; i++) {
        const struct gm_analysis_frag *f = &dev->ooms[i];
        printf("  out of memory at event %" PRId64 " (%s):\n", f->event,
               gm_phase_name((enum gm_phase)f->phase));
        printf("    requested                 %s\n", ana_cli_bytes(b1, sizeof(b1), f->requested));
        printf("    free in CUDA              %s\n", ana_cli_bytes(b1, sizeof(b1), f->device_free));
        print_frag(f);
        printf("    allocated by: ");
        snapcli_print_stack(stdout, an->snap, f->stack, 3, -1, 6);
        printf("    verdict: %s\n", gm_oom_verdict_name((enum gm_oom_verdict)f->verdict));
        printf("    %s\n", gm_oom_verdict_advice((enum gm_oom_verdict)f->verdict));
    }
    printf("\n");
}

struct oom_job {
    const char *cmd;
    bool json, series;
    uint64_t mem_limit;
    const struct gm_category_rules *rules;
};

static void oom_text(const void *ctx, const struct gm_analysis *an)
{
    (void)ctx;
    printf("allocator settings: expandable_segments %s, max_split_size %s, "
           "garbage_collection_threshold %g\n\n",
           an->expandable_segments ? "on" : "off", an->max_split_size < 0 ? "unlimited" : "set",
           an->gc_threshold);
    for (size_t d = 0; d < an->n_devices; d++)
        print_device(an, &an->devices[d]);
}

static int oom_one(void *ctx, char *path)
{
    const struct oom_job *j = ctx;
    struct gm_analysis_doc doc = {.kind = GM_DOC_OOM, .series = j->series};
    /* the analysis reads no event after the load: none kept (read again if it does) */
    struct snapcli_load_opts lo = {
        .memory_limit = j->mem_limit, .rules = j->rules, .consume_events = true};
    /* the text shows the largest gap along the series; the JSON only with --series */
    return ana_cli_show(j->cmd, path, &lo, j->json && !j->series, j->json, &doc, oom_text, j);
}

int cmd_snapshot_oom(int argc, char **argv)
{
    bool json = false, series = false;
    uint64_t mem_limit = 0;
    int n_pos = 0;
    const char *rules_path = NULL;
    const struct opt opts[] = {
        OPT_JSON(&json, "gpumem.snapshot.oom/1"),
        OPT_FLAG("series", 0, &series,
                 "with --json: reserved and allocated bytes over the trace (else [])"),
        SNAPCLI_OPT_CATEGORIES(&rules_path),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot oom [--json [--series]] FILE...",
        "Fragmentation of each device at its peak and at every out-of-memory event of a "
        "PyTorch memory snapshot: reserved, allocated, reserved but unallocated, the largest "
        "free block per pool and stream; for an oom, the requested bytes, the bytes CUDA "
        "reported free, the verdict (shortage, fragmentation, limit) and the "
        "PYTORCH_CUDA_ALLOC_CONF settings that help. Several files, or a folder of rank files, "
        "are read one after the other in rank order (see snapshot info).",
        "gpumem snapshot oom oom_snapshot.pickle"};
    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos < 1)
        return cli_usage(argv[0], "missing snapshot FILE");
    struct gm_category_rules *rules;
    int rc = snapcli_rules_load(argv[0], rules_path, &rules);
    if (rc)
        return rc;
    struct oom_job j = {argv[0], json, series, mem_limit, rules};
    rc = snapcli_each_rank_file(argv[0], argv + 1, (size_t)n_pos, json, oom_one, &j);
    gm_category_rules_free(rules);
    return rc;
}
