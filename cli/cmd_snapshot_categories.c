/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_categories.c - gpumem snapshot categories FILE: what the memory at the peak
 * is (parameters, activations, gradients, optimizer state, ...), the phase of the peak,
 * and how each figure was decided. */
#include "analysis_common.h"
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_ranks.h"

#include "gpumem/arena.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void print_sites(const struct gm_snapshot *snap, const struct gm_analysis_device *dev,
                        uint64_t top)
{
    struct gm_analysis_site *v = NULL;
    size_t n = 0, m = 0;
    char b1[64], line[512];
    struct gm_snapshot_stack_ref *refs;
    long *apart;
    if (gm_analysis_sites_at_peak(dev, &v, &n, NULL) != GM_OK)
        n = 0;
    refs = gm_malloc((n ? n : 1) * sizeof(*refs));
    apart = gm_malloc((n ? n : 1) * sizeof(*apart));
    /* the sites listed, told apart where they would read alike */
    for (size_t i = 0, shown = 0; refs && apart && i < n; i++) {
        if (i && v[i].category != v[i - 1].category)
            shown = 0;
        if (shown++ < top)
            refs[m++] = (struct gm_snapshot_stack_ref){snap, v[i].stack};
    }
    if (refs && apart)
        gm_snapshot_stacks_apart(refs, m, 0, apart);
    m = 0;
    printf("  largest allocation sites at the peak, per category:\n");
    for (size_t i = 0, shown = 0; i < n; i++) {
        if (i && v[i].category != v[i - 1].category)
            shown = 0;
        if (shown++ >= top)
            continue;
        snapcli_stack_line(line, sizeof(line), snap, v[i].stack, refs && apart ? apart[m++] : -1);
        printf("    %-16s %12s %6" PRIu64 "x  %-14s %s\n",
               gm_category_name((enum gm_category)v[i].category),
               ana_cli_short(b1, sizeof(b1), v[i].bytes), v[i].count,
               gm_rule_name((enum gm_rule)v[i].rule), line);
    }
    gm_free(refs);
    gm_free(apart);
    gm_free(v);
}

/* The phases marked with gpumem.torch.record(): the peak inside each, its largest
 * category, and what was allocated inside it. */
static void print_user_phases(const struct gm_analysis_device *dev)
{
    char b1[64], b2[64];
    printf("  your phases (gpumem.phase marks), the most allocated inside each:\n");
    printf("    %-16s %5s %14s %14s  %s\n", "phase", "runs", "peak", "allocated", "largest there");
    for (size_t i = 0; i < dev->n_user_phases; i++) {
        const struct gm_analysis_user_phase *u = &dev->user_phases[i];
        int best = 0;
        for (int c = 1; c < GM_CATEGORY_COUNT; c++)
            if (u->at_peak[c] > u->at_peak[best])
                best = c;
        printf("    %-16.16s %5zu %14s %14s  ", u->name, u->n_ranges,
               ana_cli_short(b1, sizeof(b1), u->peak_bytes),
               ana_cli_short(b2, sizeof(b2), u->allocated_bytes));
        if (u->peak_event < 0)
            printf("(no trace event inside it)\n");
        else
            printf("%s %s%s\n", gm_category_name((enum gm_category)best),
                   ana_cli_short(b1, sizeof(b1), u->at_peak[best]),
                   (int32_t)i == dev->peak_user_phase ? "  <- the peak" : "");
    }
}

/* torch's component bytes beside the categories at the end of the trace. */
static void print_components(const struct gm_analysis_device *dev, const struct gm_components *c)
{
    char b1[64], b2[64], b3[64];
    printf("  component tracking (torch memory_stats component_bytes, at the snapshot):\n");
    printf("    %-16s %14s %14s %14s\n", "category", "torch", "gpumem at end", "difference");
    for (int k = 0; k < GM_CATEGORY_COUNT; k++) {
        uint64_t ours = dev->at_end[k], theirs = c->bytes[k];
        if (!c->has[k])
            continue;
        snprintf(b3, sizeof(b3), "%s%s",
                 ours < theirs   ? "-"
                 : ours > theirs ? "+"
                                 : "",
                 ana_cli_short(b1, sizeof(b1), ours < theirs ? theirs - ours : ours - theirs));
        printf("    %-16s %14s %14s %14s\n", gm_category_name((enum gm_category)k),
               ana_cli_short(b1, sizeof(b1), theirs), ana_cli_short(b2, sizeof(b2), ours), b3);
    }
    if (c->unmapped_bytes)
        printf("    components that are none of the categories: %s\n",
               ana_cli_short(b1, sizeof(b1), c->unmapped_bytes));
}

static void print_device(const struct gm_analysis *an, const struct gm_analysis_device *dev,
                         uint64_t top, const struct gm_components *components)
{
    char b1[64], b2[64];
    uint64_t rules[GM_RULE_COUNT];
    printf("device %d: ", (int)dev->device);
    if (!dev->peak_bytes && !dev->n_events) {
        printf("no allocations\n\n");
        return;
    }
    printf("peak %s", ana_cli_bytes(b1, sizeof(b1), dev->peak_bytes));
    if (dev->peak_event < 0)
        printf(" in the initial state (before the first trace event)");
    else
        printf(" after event %" PRId64 ", in %s", dev->peak_event,
               gm_phase_name((enum gm_phase)dev->peak_phase));
    if (dev->peak_iteration >= 0)
        printf(" (iteration %d of %zu)", (int)dev->peak_iteration + 1, dev->n_iterations);
    if (dev->peak_user_phase >= 0)
        printf(", in your phase '%s'", dev->user_phases[dev->peak_user_phase].name);
    printf("\n");
    printf("  %-16s %14s %7s %14s\n", "category", "at peak", "share", "at end");
    for (int c = 0; c < GM_CATEGORY_COUNT; c++) {
        double share =
            dev->peak_bytes ? 100.0 * (double)dev->at_peak[c] / (double)dev->peak_bytes : 0.0;
        printf("  %-16s %14s %6.1f%% %14s\n", gm_category_name((enum gm_category)c),
               ana_cli_short(b1, sizeof(b1), dev->at_peak[c]), share,
               ana_cli_short(b2, sizeof(b2), dev->at_end[c]));
    }
    double unexp =
        dev->peak_bytes ? 100.0 * (double)dev->at_peak_unexplained / (double)dev->peak_bytes : 0.0;
    printf("  unexplained (no rule matched, counted in other): %s, %.1f%% of the peak\n",
           ana_cli_short(b1, sizeof(b1), dev->at_peak_unexplained), unexp);
    if (dev->at_peak_lifetime_only)
        printf("  decided from lifetime alone (no stack; counted as parameter): %s\n",
               ana_cli_short(b1, sizeof(b1), dev->at_peak_lifetime_only));
    gm_analysis_rules_at(dev, dev->peak_event, rules);
    printf("  how the bytes at the peak were classified:\n");
    for (int r = 0; r < GM_RULE_COUNT; r++)
        if (rules[r])
            printf("    %-14s %12s  %s\n", gm_rule_name((enum gm_rule)r),
                   ana_cli_short(b1, sizeof(b1), rules[r]), gm_rule_text((enum gm_rule)r));
    if (an->n_user_rules) {
        uint64_t b[GM_CATEGORY_RULES_MAX];
        size_t n =
            an->n_user_rules < GM_CATEGORY_RULES_MAX ? an->n_user_rules : GM_CATEGORY_RULES_MAX;
        char name[80];
        gm_analysis_user_rules_at(dev, dev->peak_event, b, n);
        printf("  your rules at the peak (--categories; the first match wins):\n");
        for (size_t i = 0; i < n; i++)
            printf("    %-24s %-16s %12s\n",
                   snapcli_safe(name, sizeof(name), an->user_rule_names[i]),
                   gm_category_name((enum gm_category)an->user_rule_categories[i]),
                   ana_cli_short(b1, sizeof(b1), b[i]));
    }
    if (dev->n_events) {
        printf("  phases (share of %zu trace events):", dev->n_events);
        for (int p = 1; p <= GM_PHASE_COUNT; p++) {
            int q = p % GM_PHASE_COUNT; /* forward, backward, step, other */
            printf(" %s %.1f%%%s", gm_phase_name((enum gm_phase)q),
                   100.0 * (double)dev->phase_events[q] / (double)dev->n_events,
                   p < GM_PHASE_COUNT ? "," : "\n");
        }
        printf("  iterations: %zu\n", dev->n_iterations);
    } else {
        printf("  no trace: the figures are the snapshot state only\n");
    }
    {
        struct gm_snapshot_figures pools;
        if (gm_snapshot_private_pool_figures(an->snap, dev->device, &pools))
            printf(
                "  in private pools (CUDA graphs, MemPool) at the snapshot: %s reserved in %" PRIu64
                " segments, %s allocated\n",
                ana_cli_short(b1, sizeof(b1), pools.reserved_bytes), pools.n_segments,
                ana_cli_short(b2, sizeof(b2), pools.allocated_bytes));
    }
    if (components)
        print_components(dev, components);
    if (!dev->has_frames)
        printf("  no stack frames recorded: categories come from lifetimes only\n");
    if (dev->n_user_phases)
        print_user_phases(dev);
    int dom = gm_analysis_dominant(dev);
    if (dom < GM_CATEGORY_COUNT) {
        printf("  largest at the peak: %s (%.1f%%). %s\n", gm_category_name((enum gm_category)dom),
               100.0 * (double)dev->at_peak[dom] / (double)dev->peak_bytes,
               gm_category_advice((enum gm_category)dom));
        if (rules[GM_RULE_KEPT_FORWARD] * 20 > dev->peak_bytes)
            printf("  %s of the peak are forward results kept from earlier iterations: "
                   "see gpumem snapshot leaks\n",
                   ana_cli_short(b1, sizeof(b1), rules[GM_RULE_KEPT_FORWARD]));
    }
    if (top)
        print_sites(an->snap, dev, top);
    printf("\n");
}

int cmd_snapshot_categories(int argc, char **argv)
{
    bool json = false, series = false;
    uint64_t top = 0, mem_limit = 0;
    const char *stats_path = NULL;
    struct gm_components components;
    int32_t components_device = -1;
    int device = -1;
    bool device_set = false;
    int n_pos = 0;
    const char *rules_path = NULL;
    struct gm_category_rules *rules = NULL;
    const struct opt opts[] = {
        OPT_JSON(&json, "gpumem.snapshot.categories/1"),
        OPT_INT("device", 'd', &device, "N", "only this CUDA device", &device_set),
        OPT_FLAG("series", 0, &series,
                 "with --json: also the per-category series and the phase runs"),
        OPT_U64("top", 'n', &top, "N", "also list the N largest allocation sites per category",
                NULL),
        OPT_STRING("memory-stats", 0, &stats_path, "FILE",
                   "compare with torch's component tracking: a JSON dump of "
                   "torch.accelerator.memory.memory_stats() taken with the snapshot (its "
                   "component_bytes.*.current), for the device of --device or the file's one "
                   "device"),
        SNAPCLI_OPT_CATEGORIES(&rules_path),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot categories [--json] [--device N] [--series] [--top N] "
        "[--memory-stats FILE] FILE...",
        "Classify every allocation of a PyTorch memory snapshot as parameter, input, "
        "activation, gradient, optimizer_state, optimizer_temp or other, from its stack "
        "frames and its lifetime, and show the split at the peak of each device. Sizes are "
        "the trace's requested bytes (as memory_viz draws them). The rules are in "
        "docs/analysis.md. Several files are read and analysed at the same time as the ranks "
        "of one job, each by its device whatever its index, and compared: the spread of "
        "their peaks and the imbalance (the largest peak over the smallest, and the category "
        "that makes the difference); --json then writes {\"files\": [{\"file\", "
        "\"devices\"}...], \"ranks\", \"spread\", \"imbalance\"}.",
        "gpumem snapshot categories snapshot.pickle\n"
        "gpumem snapshot categories --json --series snapshot.pickle"};
    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos < 1)
        return cli_usage(argv[0], "missing snapshot FILE");
    struct snapcli_rank_args ra = {0};
    {
        int arc = snapcli_rank_argv(&argv, &n_pos, &ra);
        if (arc)
            return arc;
    }
    struct gm_snapshot **snaps = gm_calloc((size_t)n_pos, sizeof(*snaps));
    struct gm_analysis **ans = gm_calloc((size_t)n_pos, sizeof(*ans));
    struct gm_digest **digests = gm_calloc((size_t)n_pos, sizeof(*digests));
    struct rank_list ranks = {0};
    int rc = snapcli_rules_load(argv[0], rules_path, &rules);
    /* the analysis reads no event after the load: none kept (read again if it does) */
    struct snapcli_load_opts lo = {
        .memory_limit = mem_limit, .digests = digests, .rules = rules, .consume_events = true};
    if (rc == 0)
        rc = snaps && ans && digests ? (series && json ? ana_cli_open_many : ana_cli_open_figures)(
                                           argv[0], argv + 1, (size_t)n_pos, &lo, snaps, ans)
                                     : GM_EXIT_SOFTWARE;
    gm_category_rules_free(rules); /* the analyses are made */
    for (int f = 0; f < n_pos && rc == 0; f++)
        if (device_set && (digests[f] ? digests[f]->figures.device != device
                                      : !gm_analysis_device_by_index(ans[f], device)))
            rc = cli_usage(argv[0], "%s has no device %d", n_pos > 1 ? argv[f + 1] : "the file",
                           device);
    if (rc == 0 && stats_path) {
        struct gm_error err;
        if (n_pos > 1)
            rc = cli_usage(argv[0], "--memory-stats compares one file");
        else if (!digests[0] && !device_set && ans[0]->n_devices != 1)
            rc = cli_usage(argv[0],
                           "--memory-stats: the file has %zu devices; say which with "
                           "--device",
                           ans[0]->n_devices);
        else if (digests[0])
            rc = cli_usage(argv[0], "--memory-stats needs a snapshot, not a digest");
        else if (gm_components_load(stats_path, &components, &err) != GM_OK)
            rc = cli_fail(argv[0], &err);
        else
            components_device = device_set ? device : ans[0]->devices[0].device;
    }
    for (int f = 0; f < n_pos && rc == 0 && n_pos > 1; f++)
        rc = digests[f] ? ranks_add_digest(&ranks, argv[0], digests[f], (size_t)f, argv[f + 1],
                                           (size_t)n_pos)
                        : ranks_add(&ranks, argv[0], ans[f], (size_t)f, argv[f + 1], (size_t)n_pos);
    if (rc == 0 && json) {
        struct gm_analysis_doc_file *df = gm_calloc((size_t)n_pos, sizeof(*df));
        struct gm_analysis_doc doc = {.kind = GM_DOC_CATEGORIES,
                                      .files = df,
                                      .n_files = (size_t)n_pos,
                                      .ranks = ranks.v,
                                      .n_ranks = ranks.n,
                                      .device = device_set ? device : -1,
                                      .series = series,
                                      .digests = (const struct gm_digest *const *)digests,
                                      .components = stats_path ? &components : NULL,
                                      .components_device = components_device};
        struct gm_error err;
        for (int f = 0; df && f < n_pos; f++)
            df[f] = (struct gm_analysis_doc_file){.path = argv[f + 1], .an = ans[f]};
        rc = df ? cli_json_status(argv[0], gm_analysis_json(stdout, &doc, &err), &err)
                : GM_EXIT_SOFTWARE;
        gm_free(df);
    } else if (rc == 0) {
        for (int f = 0; f < n_pos; f++) {
            const struct gm_analysis *an = ans[f];
            if (n_pos > 1)
                printf("==> %s <==\n", argv[f + 1]);
            if (digests[f]) {
                ranks_print_digest(stdout, argv[f + 1], digests[f]);
                printf("\n");
                continue;
            }
            for (size_t d = 0; d < an->n_devices; d++)
                if (!device_set || an->devices[d].device == device)
                    print_device(an, &an->devices[d], top,
                                 stats_path && an->devices[d].device == components_device
                                     ? &components
                                     : NULL);
        }
        if (n_pos > 1)
            ranks_print(stdout, &ranks, argv + 1);
        printf("(sizes are requested bytes from the trace, below what max_memory_allocated "
               "counts after rounding)\n");
    }
    ranks_release(&ranks);
    if (snaps && ans)
        ana_cli_close_many(snaps, ans, (size_t)n_pos);
    for (int f = 0; digests && f < n_pos; f++)
        gm_digest_free(digests[f]);
    gm_free(digests);
    gm_free(snaps);
    gm_free(ans);
    snapcli_rank_argv_release(&ra);
    return rc;
}
