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

struct site_row {
    uint8_t category;
    uint8_t rule;
    uint32_t stack;
    uint64_t bytes;
    uint64_t count;
};

static int cmp_key(const void *pa, const void *pb)
{
    const struct site_row *a = pa, *b = pb;
    if (a->category != b->category)
        return a->category < b->category ? -1 : 1;
    if (a->stack != b->stack)
        return a->stack < b->stack ? -1 : 1;
    return (a->rule > b->rule) - (a->rule < b->rule);
}

static int cmp_bytes(const void *pa, const void *pb)
{
    const struct site_row *a = pa, *b = pb;
    if (a->category != b->category)
        return a->category < b->category ? -1 : 1;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    return a->stack < b->stack ? -1 : a->stack > b->stack;
}

/* The allocations alive at the peak, grouped by category and stack, largest first within
 * each category; returns the number of rows (0 on allocation failure). */
static size_t sites_at_peak(const struct gm_analysis_device *dev, struct site_row **out)
{
    size_t n = 0;
    int64_t k = dev->peak_event;
    struct site_row *v = gm_malloc((dev->n_allocs ? dev->n_allocs : 1) * sizeof(*v));
    *out = v;
    if (!v)
        return 0;
    for (size_t i = 0; i < dev->n_allocs; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        if (a->alloc_event <= k && (a->free_event < 0 || a->free_event > k)) {
            v[n].category = a->category;
            v[n].rule = a->rule;
            v[n].stack = a->stack;
            v[n].bytes = a->bytes;
            v[n].count = 1;
            n++;
        }
    }
    qsort(v, n, sizeof(*v), cmp_key);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && v[m - 1].category == v[i].category && v[m - 1].stack == v[i].stack &&
            v[m - 1].rule == v[i].rule) {
            v[m - 1].bytes += v[i].bytes;
            v[m - 1].count++;
        } else {
            v[m++] = v[i];
        }
    }
    qsort(v, m, sizeof(*v), cmp_bytes);
    return m;
}

static void print_sites(const struct gm_snapshot *snap, const struct gm_analysis_device *dev,
                        uint64_t top)
{
    struct site_row *v;
    size_t n = sites_at_peak(dev, &v);
    char b1[64], line[512];
    struct gm_snapshot_stack_ref *refs = gm_malloc((n ? n : 1) * sizeof(*refs));
    long *apart = gm_malloc((n ? n : 1) * sizeof(*apart));
    size_t m = 0;
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

static void rules_at(const struct gm_analysis_device *dev, int64_t k, uint64_t *rules)
{
    memset(rules, 0, GM_RULE_COUNT * sizeof(uint64_t));
    for (size_t i = 0; i < dev->n_allocs; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        if (a->alloc_event <= k && (a->free_event < 0 || a->free_event > k))
            rules[a->rule] += a->bytes;
    }
}

static void json_cats(struct gm_json *w, const char *key, const uint64_t *b)
{
    gm_json_key(w, key);
    gm_json_begin_object(w);
    for (int c = 0; c < GM_CATEGORY_COUNT; c++)
        gm_json_kv_u64(w, gm_category_name((enum gm_category)c), b[c]);
    gm_json_end_object(w);
}

/* The category with the most bytes at the peak (GM_CATEGORY_COUNT when the peak is 0). */
static int dominant(const struct gm_analysis_device *dev)
{
    int best = GM_CATEGORY_COUNT;
    uint64_t b = 0;
    for (int c = 0; c < GM_CATEGORY_COUNT; c++)
        if (dev->at_peak[c] > b) {
            b = dev->at_peak[c];
            best = c;
        }
    return best;
}

static void json_device(struct gm_json *w, const struct gm_analysis *an,
                        const struct gm_analysis_device *dev, bool series)
{
    uint64_t rules[GM_RULE_COUNT];
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "device", dev->device);
    gm_json_kv_u64(w, "peak_bytes", dev->peak_bytes);
    gm_json_kv_i64(w, "peak_event_index", dev->peak_event);
    if (dev->peak_has_time)
        gm_json_kv_i64(w, "peak_time_us", dev->peak_time_us);
    else
        gm_json_kv_null(w, "peak_time_us");
    gm_json_kv_str(w, "peak_phase", gm_phase_name((enum gm_phase)dev->peak_phase));
    gm_json_kv_i64(w, "peak_iteration", dev->peak_iteration);
    json_cats(w, "at_peak", dev->at_peak);
    int dom = dominant(dev);
    if (dom < GM_CATEGORY_COUNT) {
        gm_json_kv_str(w, "dominant", gm_category_name((enum gm_category)dom));
        gm_json_kv_str(w, "advice", gm_category_advice((enum gm_category)dom));
    } else {
        gm_json_kv_null(w, "dominant");
        gm_json_kv_null(w, "advice");
    }
    gm_json_kv_u64(w, "unexplained_bytes", dev->at_peak_unexplained);
    gm_json_kv_u64(w, "lifetime_only_bytes", dev->at_peak_lifetime_only);
    rules_at(dev, dev->peak_event, rules);
    gm_json_key(w, "rules_at_peak");
    gm_json_begin_object(w);
    for (int r = 0; r < GM_RULE_COUNT; r++)
        if (rules[r])
            gm_json_kv_u64(w, gm_rule_name((enum gm_rule)r), rules[r]);
    gm_json_end_object(w);
    json_cats(w, "at_end", dev->at_end);
    gm_json_kv_u64(w, "events", dev->n_events);
    gm_json_key(w, "phase_events");
    gm_json_begin_object(w);
    for (int p = 0; p < GM_PHASE_COUNT; p++)
        gm_json_kv_u64(w, gm_phase_name((enum gm_phase)p), dev->phase_events[p]);
    gm_json_end_object(w);
    gm_json_kv_u64(w, "iterations", dev->n_iterations);
    gm_json_key(w, "iteration_peaks");
    gm_json_begin_array(w);
    for (size_t i = 0; i < dev->n_iterations; i++) {
        const struct gm_analysis_iteration *it = &dev->iterations[i];
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "iteration", i + 1);
        gm_json_kv_u64(w, "peak_bytes", it->peak_bytes);
        gm_json_kv_i64(w, "peak_event_index", it->peak_event);
        gm_json_kv_str(w, "peak_phase", gm_phase_name((enum gm_phase)it->peak_phase));
        json_cats(w, "at_peak", it->at_peak);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "user_phases");
    gm_json_begin_array(w);
    for (size_t i = 0; i < dev->n_user_phases; i++) {
        const struct gm_analysis_user_phase *u = &dev->user_phases[i];
        gm_json_begin_object(w);
        gm_json_kv_str(w, "name", u->name);
        gm_json_kv_u64(w, "ranges", u->n_ranges);
        gm_json_kv_u64(w, "events", u->n_events);
        gm_json_kv_u64(w, "allocated_bytes", u->allocated_bytes);
        gm_json_kv_u64(w, "peak_bytes", u->peak_bytes);
        gm_json_kv_i64(w, "peak_event_index", u->peak_event);
        json_cats(w, "at_peak", u->at_peak);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    if (dev->peak_user_phase >= 0)
        gm_json_kv_str(w, "peak_user_phase", dev->user_phases[dev->peak_user_phase].name);
    else
        gm_json_kv_null(w, "peak_user_phase");
    if (series) {
        gm_json_key(w, "user_ranges");
        gm_json_begin_array(w);
        for (size_t i = 0; i < dev->n_user_ranges; i++) {
            const struct gm_analysis_user_range *r = &dev->user_ranges[i];
            gm_json_begin_object(w);
            gm_json_kv_str(w, "phase", dev->user_phases[r->phase].name);
            gm_json_kv_i64(w, "first_event", r->first_event);
            gm_json_kv_i64(w, "last_event", r->last_event);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
        gm_json_key(w, "phases");
        gm_json_begin_array(w);
        for (size_t i = 0; i < dev->n_phases; i++) {
            const struct gm_analysis_phase_run *r = &dev->phases[i];
            gm_json_begin_object(w);
            gm_json_kv_i64(w, "first_event", r->first_event);
            gm_json_kv_i64(w, "last_event", r->last_event);
            gm_json_kv_str(w, "phase", gm_phase_name((enum gm_phase)r->phase));
            gm_json_kv_i64(w, "iteration", r->iteration);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
        gm_json_key(w, "series");
        gm_json_begin_array(w);
        for (size_t i = 0; i < dev->n_points; i++) {
            const struct gm_analysis_point *p = &dev->points[i];
            gm_json_begin_object(w);
            gm_json_kv_i64(w, "event", p->event);
            if (p->has_time)
                gm_json_kv_i64(w, "time_us", p->time_us);
            else
                gm_json_kv_null(w, "time_us");
            gm_json_kv_str(w, "phase", gm_phase_name((enum gm_phase)p->phase));
            gm_json_kv_u64(w, "total", p->total);
            gm_json_kv_u64(w, "reserved", p->reserved);
            json_cats(w, "bytes", p->bytes);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
    }
    (void)an;
    gm_json_end_object(w);
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

static void print_device(const struct gm_analysis *an, const struct gm_analysis_device *dev,
                         uint64_t top)
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
    rules_at(dev, dev->peak_event, rules);
    printf("  how the bytes at the peak were classified:\n");
    for (int r = 0; r < GM_RULE_COUNT; r++)
        if (rules[r])
            printf("    %-14s %12s  %s\n", gm_rule_name((enum gm_rule)r),
                   ana_cli_short(b1, sizeof(b1), rules[r]), gm_rule_text((enum gm_rule)r));
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
    if (!dev->has_frames)
        printf("  no stack frames recorded: categories come from lifetimes only\n");
    if (dev->n_user_phases)
        print_user_phases(dev);
    int dom = dominant(dev);
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

static void json_file(struct gm_json *w, const struct gm_analysis *an, bool device_set, int device,
                      bool series)
{
    gm_json_key(w, "devices");
    gm_json_begin_array(w);
    for (size_t d = 0; d < an->n_devices; d++)
        if (!device_set || an->devices[d].device == device)
            json_device(w, an, &an->devices[d], series);
    gm_json_end_array(w);
}

int cmd_snapshot_categories(int argc, char **argv)
{
    bool json = false, series = false;
    uint64_t top = 0, mem_limit = 0;
    int device = -1;
    bool device_set = false;
    int n_pos = 0;
    const struct opt opts[] = {
        OPT_JSON(&json, "gpumem.snapshot.categories/1"),
        OPT_INT("device", 'd', &device, "N", "only this CUDA device", &device_set),
        OPT_FLAG("series", 0, &series,
                 "with --json: also the per-category series and the phase runs"),
        OPT_U64("top", 'n', &top, "N", "also list the N largest allocation sites per category",
                NULL),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot categories [--json] [--device N] [--series] [--top N] FILE...",
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
    struct gm_snapshot **snaps = gm_calloc((size_t)n_pos, sizeof(*snaps));
    struct gm_analysis **ans = gm_calloc((size_t)n_pos, sizeof(*ans));
    struct snapcli_load_opts lo = {mem_limit, false};
    struct rank_list ranks = {0};
    int rc = snaps && ans ? ana_cli_open_many(argv[0], argv + 1, (size_t)n_pos, &lo, snaps, ans)
                          : GM_EXIT_SOFTWARE;
    for (int f = 0; f < n_pos && rc == 0; f++)
        if (device_set && !gm_analysis_device_by_index(ans[f], device))
            rc = cli_usage(argv[0], "%s has no device %d", n_pos > 1 ? argv[f + 1] : "the file",
                           device);
    for (int f = 0; f < n_pos && rc == 0 && n_pos > 1; f++)
        rc = ranks_add(&ranks, argv[0], ans[f], (size_t)f);
    if (rc == 0 && json) {
        struct gm_json w;
        cli_json_begin(&w, stdout, "snapshot.categories");
        if (n_pos == 1) {
            json_file(&w, ans[0], device_set, device, series);
        } else {
            gm_json_key(&w, "files");
            gm_json_begin_array(&w);
            for (int f = 0; f < n_pos; f++) {
                gm_json_begin_object(&w);
                gm_json_kv_str(&w, "file", argv[f + 1]);
                json_file(&w, ans[f], device_set, device, series);
                gm_json_end_object(&w);
            }
            gm_json_end_array(&w);
            ranks_json(&w, &ranks, argv + 1);
        }
        rc = cli_json_end(&w, argv[0]);
    } else if (rc == 0) {
        for (int f = 0; f < n_pos; f++) {
            const struct gm_analysis *an = ans[f];
            if (n_pos > 1)
                printf("==> %s <==\n", argv[f + 1]);
            for (size_t d = 0; d < an->n_devices; d++)
                if (!device_set || an->devices[d].device == device)
                    print_device(an, &an->devices[d], top);
        }
        if (n_pos > 1)
            ranks_print(stdout, &ranks, argv + 1);
        printf("(sizes are requested bytes from the trace, below what max_memory_allocated "
               "counts after rounding)\n");
    }
    ranks_release(&ranks);
    if (snaps && ans)
        ana_cli_close_many(snaps, ans, (size_t)n_pos);
    gm_free(snaps);
    gm_free(ans);
    return rc;
}
