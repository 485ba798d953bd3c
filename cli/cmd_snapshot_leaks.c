/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_leaks.c - gpumem snapshot leaks FILE: the training iterations of each
 * device (peak and bytes still alive at the end of each) and the allocation sites whose
 * memory grows from iteration to iteration, with the likely cause and the fix. */
#include "analysis_common.h"
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include "gpumem/arena.h"

#include <inttypes.h>
#include <stdbool.h>

/* Iterations listed one by one; more are summarised (the first and the last ones). */
#define ITER_ROWS 12

static void print_iteration(size_t i, const struct gm_analysis_iteration *it)
{
    char b1[64], b2[64], b3[64];
    printf("  %5zu %12" PRId64 " %14s %14s %-15s %14s\n", i + 1, it->first_event,
           ana_cli_short(b1, sizeof(b1), it->start_bytes),
           ana_cli_short(b2, sizeof(b2), it->peak_bytes),
           gm_phase_name((enum gm_phase)it->peak_phase),
           ana_cli_short(b3, sizeof(b3), it->end_bytes));
}

static void print_iterations(const struct gm_analysis_device *dev, bool all)
{
    char b1[64], b2[64], b4[64];
    size_t n = dev->n_iterations, head = all || n <= ITER_ROWS ? n : ITER_ROWS / 2;
    printf("  %5s %12s %14s %14s %-15s %14s\n", "iter", "first event", "start", "peak",
           "peak phase", "end");
    for (size_t i = 0; i < head; i++)
        print_iteration(i, &dev->iterations[i]);
    if (head < n) {
        printf("  %5s (%zu iterations not listed: --all-iterations, or --json)\n", "...",
               n - 2 * head);
        for (size_t i = n - head; i < n; i++)
            print_iteration(i, &dev->iterations[i]);
    }
    if (n >= 2) {
        const struct gm_analysis_iteration *a = &dev->iterations[0];
        const struct gm_analysis_iteration *b = &dev->iterations[n - 1];
        printf("  alive at the end of an iteration: %s after the first, %s after the last (%s)\n",
               ana_cli_short(b1, sizeof(b1), a->end_bytes),
               ana_cli_short(b2, sizeof(b2), b->end_bytes),
               ana_cli_delta(b4, sizeof(b4), a->end_bytes, b->end_bytes));
    }
}

static void print_leak(const struct gm_snapshot *snap, size_t i, const struct gm_analysis_leak *l,
                       bool advice, uint64_t max_sites)
{
    char b1[64], b2[64], fr[512], line[512];
    long *apart = NULL;
    struct gm_snapshot_stack_ref *refs = NULL;
    size_t shown = max_sites && max_sites < l->n_sites ? (size_t)max_sites : l->n_sites;
    printf("  leak %zu: %s per iteration, %s kept at the end (%" PRIu64
           " allocations from %zu site%s, kept in %u iterations: %d to %d), %s, %s\n",
           i + 1, ana_cli_short(b1, sizeof(b1), l->bytes_per_iteration),
           ana_cli_short(b2, sizeof(b2), l->total_bytes), l->count, l->n_sites,
           l->n_sites == 1 ? "" : "s", l->n_iterations, (int)l->first_iteration + 1,
           (int)l->last_iteration + 1, gm_category_name((enum gm_category)l->category),
           gm_leak_kind_name((enum gm_leak_kind)l->kind));
    /* the frame that names the cause, unless the one stack below shows it first */
    if (l->frame < snap->n_frames &&
        (l->kind == GM_LEAK_FORWARD_OUTPUT || l->kind == GM_LEAK_GRAPH_NO_GRAD))
        printf("    kept by the code that called the model: %s\n",
               gm_snapshot_frame_text(fr, sizeof(fr), &snap->frames[l->frame]));
    else if (l->frame < snap->n_frames && l->n_sites > 1)
        printf("    allocated by: %s\n",
               gm_snapshot_frame_text(fr, sizeof(fr), &snap->frames[l->frame]));
    if (advice)
        printf("    why and fix: %s\n", gm_leak_kind_advice((enum gm_leak_kind)l->kind));
    if (l->n_sites == 1) {
        printf("    allocated at: ");
        snapcli_print_stack(stdout, snap, l->stack, 3, -1, 8);
        return;
    }
    refs = gm_malloc(shown * sizeof(*refs));
    apart = gm_malloc(shown * sizeof(*apart));
    for (size_t k = 0; refs && apart && k < shown; k++)
        refs[k] = (struct gm_snapshot_stack_ref){snap, l->sites[k].stack};
    if (refs && apart)
        gm_snapshot_stacks_apart(refs, shown, 0, apart);
    printf("    its sites, largest first:\n");
    printf("    %14s %12s %6s  %s\n", "per iteration", "kept", "count", "where");
    for (size_t k = 0; k < shown; k++) {
        const struct gm_analysis_leak_site *si = &l->sites[k];
        snapcli_stack_line(line, sizeof(line), snap, si->stack, refs && apart ? apart[k] : -1);
        printf("    %14s %12s %6" PRIu64 "  %s\n",
               ana_cli_short(b1, sizeof(b1), si->bytes_per_iteration),
               ana_cli_short(b2, sizeof(b2), si->total_bytes), si->count, line);
    }
    if (shown < l->n_sites)
        printf("    ... %zu more sites (--sites N, or --json)\n", l->n_sites - shown);
    gm_free(refs);
    gm_free(apart);
}

static void print_device(const struct gm_snapshot *snap, const struct gm_analysis_device *dev,
                         uint64_t top, uint64_t max_sites, bool all_iterations)
{
    char b1[64], b2[64];
    enum gm_leak_verdict v = gm_analysis_leak_verdict(dev);
    printf("device %d: %zu iteration%s", (int)dev->device, dev->n_iterations,
           dev->n_iterations == 1 ? "" : "s");
    if (v == GM_LEAK_VERDICT_NO_TRACE) {
        printf(" (%s)\n\n", gm_leak_verdict_text(v));
        return;
    }
    printf("\n");
    if (dev->n_iterations)
        print_iterations(dev, all_iterations);
    if (v != GM_LEAK_VERDICT_FOUND) {
        printf("  %s\n\n", gm_leak_verdict_text(v));
        return;
    }
    uint64_t per_it = 0, kept = 0;
    size_t n_sites = 0;
    for (size_t i = 0; i < dev->n_leaks; i++) {
        per_it += dev->leaks[i].bytes_per_iteration;
        kept += dev->leaks[i].total_bytes;
        n_sites += dev->leaks[i].n_sites;
    }
    printf("  LEAK: %s: %s per iteration, %s kept at the end, %zu cause%s (%zu allocation "
           "site%s)\n",
           gm_leak_verdict_text(v), ana_cli_short(b1, sizeof(b1), per_it),
           ana_cli_short(b2, sizeof(b2), kept), dev->n_leaks, dev->n_leaks == 1 ? "" : "s", n_sites,
           n_sites == 1 ? "" : "s");
    if (!top)
        top = dev->n_leaks;
    for (size_t i = 0; i < dev->n_leaks && i < top; i++) {
        bool advice = true;
        for (size_t k = 0; k < i; k++)
            advice = advice && dev->leaks[k].kind != dev->leaks[i].kind;
        print_leak(snap, i, &dev->leaks[i], advice, max_sites);
    }
    if (dev->n_leaks > top)
        printf("  ... %zu more leaks (--top)\n", dev->n_leaks - (size_t)top);
    printf("\n");
}

struct leaks_job {
    const char *cmd;
    bool json, all_iterations;
    uint64_t top, sites, mem_limit;
    const struct gm_category_rules *rules;
};

static void leaks_text(const void *ctx, const struct gm_analysis *an)
{
    const struct leaks_job *j = ctx;
    for (size_t d = 0; d < an->n_devices; d++)
        print_device(an->snap, &an->devices[d], j->top, j->sites, j->all_iterations);
}

static int leaks_one(void *ctx, char *path)
{
    const struct leaks_job *j = ctx;
    struct gm_analysis_doc doc = {.kind = GM_DOC_LEAKS, .top = j->top};
    /* the analysis reads no event after the load: none kept (read again if it does) */
    struct snapcli_load_opts lo = {
        .memory_limit = j->mem_limit, .rules = j->rules, .consume_events = true};
    return ana_cli_show(j->cmd, path, &lo, true, j->json, &doc, leaks_text, j);
}

int cmd_snapshot_leaks(int argc, char **argv)
{
    bool json = false, all_iterations = false;
    uint64_t top = gm_analysis_doc_top(GM_DOC_LEAKS), sites = 5, mem_limit = 0;
    int n_pos = 0;
    const char *rules_path = NULL;
    const struct opt opts[] = {
        OPT_JSON(&json, "gpumem.snapshot.leaks/1"),
        OPT_U64("top", 'n', &top, "N", "show at most N leaks (causes) per device (10; 0: all)",
                NULL),
        OPT_U64("sites", 0, &sites, "N", "show at most N sites per leak (5; 0: all)", NULL),
        OPT_FLAG("all-iterations", 0, &all_iterations,
                 "list every iteration (more than 12 are summarised)"),
        SNAPCLI_OPT_CATEGORIES(&rules_path),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot leaks [--json] [--top N] FILE...",
        "Find the training iterations in a PyTorch memory snapshot (forward, backward, "
        "optimizer step) and the memory that grows from one iteration to the next, one leak "
        "per cause: the allocation sites that share the code keeping them (the function that "
        "called the model, for forward results; else the first user frame) and the "
        "iterations they leak in. For each: bytes per iteration, bytes kept, the sites, the "
        "likely cause (a loss accumulated without .detach()/.item(), evaluation without "
        "no_grad, a growing list) and the fix. A trace of fewer than 3 iterations is too "
        "short to judge. Several files, or a folder of rank files, are read one after the "
        "other in rank order (see snapshot info).",
        "gpumem snapshot leaks snapshot.pickle"};
    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos < 1)
        return cli_usage(argv[0], "missing snapshot FILE");
    struct gm_category_rules *rules;
    int rc = snapcli_rules_load(argv[0], rules_path, &rules);
    if (rc)
        return rc;
    struct leaks_job j = {argv[0], json, all_iterations, top, sites, mem_limit, rules};
    rc = snapcli_each_rank_file(argv[0], argv + 1, (size_t)n_pos, json, leaks_one, &j);
    gm_category_rules_free(rules);
    return rc;
}
