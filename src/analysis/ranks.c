/* SPDX-License-Identifier: MIT */
/* ranks.c - several snapshots of one job as ranks (analysis.h, "ranks"): each file's device,
 * the spread of the peaks and reserved bytes over the files, and the imbalance (the largest
 * peak over the smallest, and the category that makes the difference). */
#include "analysis/analysis_int.h"

#include "gpumem/arena.h"

#include <stdlib.h>
#include <string.h>

const struct gm_analysis_device *gm_analysis_rank_device(const struct gm_analysis *an)
{
    int32_t index;
    struct gm_error err;
    const struct gm_snapshot_device *sd;
    /* the default device (with the analysis no timeline is computed: nothing else fails),
     * and nothing when that is an empty one (every device is) */
    if (!an || gm_default_device(an->snap, an, &index, &err) != GM_OK)
        return NULL;
    sd = gm_snapshot_device_by_index(an->snap, index);
    if (!sd || (!sd->n_events && !sd->n_segments))
        return NULL;
    return gm_analysis_device_by_index(an, index);
}

const char *gm_rank_metric_name(enum gm_rank_metric m)
{
    static const char *const names[GM_RANK_METRIC_COUNT] = {"peak_bytes", "peak_reserved_bytes",
                                                            "reserved_bytes", "allocated_bytes"};
    return (unsigned)m < GM_RANK_METRIC_COUNT ? names[m] : "?";
}

/* The figures of one rank: the analysis's peak and categories, the timeline's most reserved
 * bytes, the segments' state at snapshot time. */
static void fill_rank(const struct gm_analysis *an, const struct gm_analysis_device *dev,
                      size_t file, struct gm_rank *r)
{
    const struct gm_snapshot *snap = an->snap;
    const struct gm_snapshot_device *sd = gm_snapshot_device_by_index(snap, dev->device);
    memset(r, 0, sizeof(*r));
    r->file = file;
    r->device = dev->device;
    r->value[GM_RANK_PEAK] = dev->peak_bytes;
    r->peak_event = dev->peak_event;
    r->peak_phase = dev->peak_phase;
    memcpy(r->at_peak, dev->at_peak, sizeof(r->at_peak));
    r->value[GM_RANK_PEAK_RESERVED] = dev->timeline.peak_reserved_bytes;
    for (size_t i = 0; sd && i < sd->n_segments; i++) {
        const struct gm_snapshot_segment *seg = &snap->segments[sd->first_segment + i];
        r->value[GM_RANK_RESERVED] += seg->total_size;
        for (size_t b = 0; b < seg->n_blocks; b++)
            if (seg->blocks[b].state == GM_BLOCK_ACTIVE_ALLOCATED)
                r->value[GM_RANK_ALLOCATED] += seg->blocks[b].size;
    }
}

static void spread_of(const struct gm_ranks *rs, enum gm_rank_metric m, struct gm_rank_spread *s)
{
    double sum = 0.0;
    memset(s, 0, sizeof(*s));
    for (size_t i = 0; i < rs->n_ranks; i++) {
        uint64_t v = rs->ranks[i].value[m];
        if (!i || v < s->min) {
            s->min = v;
            s->min_rank = i;
        }
        if (!i || v > s->max) {
            s->max = v;
            s->max_rank = i;
        }
        sum += (double)v;
    }
    s->mean = rs->n_ranks ? sum / (double)rs->n_ranks : 0.0;
}

/* Which category makes the difference between the largest and the smallest peak. */
static void imbalance(struct gm_ranks *rs)
{
    const struct gm_rank_spread *p = &rs->spread[GM_RANK_PEAK];
    const struct gm_rank *hi = &rs->ranks[p->max_rank], *lo = &rs->ranks[p->min_rank];
    uint64_t best = 0;
    rs->peak_ratio = p->min ? (double)p->max / (double)p->min : 0.0;
    rs->category = GM_CATEGORY_OTHER;
    rs->category_bytes = 0;
    for (int c = 0; c < GM_CATEGORY_COUNT; c++) {
        uint64_t a = hi->at_peak[c], b = lo->at_peak[c], d = a > b ? a - b : b - a;
        if (d > best) {
            best = d;
            rs->category = (uint8_t)c;
            rs->category_bytes = a >= b ? (int64_t)d : -(int64_t)d;
        }
    }
}

enum gm_status gm_analysis_rank(const struct gm_analysis *an, size_t file, const char *name,
                                struct gm_rank *out, bool *has_device, struct gm_error *err)
{
    const struct gm_analysis_device *dev = gm_analysis_rank_device(an);
    (void)err; /* nothing can fail now that the timeline comes with the analysis */
    *has_device = dev != NULL;
    if (dev) {
        fill_rank(an, dev, file, out);
        out->has_name_rank = gm_rank_from_name(name, &out->name_rank);
    }
    return GM_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Whether n values hold no two alike ('scratch' has room for n). */
static bool distinct(uint64_t *scratch, size_t n)
{
    qsort(scratch, n, sizeof(*scratch), cmp_u64);
    for (size_t i = 1; i < n; i++)
        if (scratch[i] == scratch[i - 1])
            return false;
    return true;
}

static int cmp_rank_id(const void *a, const void *b)
{
    const struct gm_rank *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return x->file < y->file ? -1 : x->file > y->file;
}

/* One source for every rank's id: the names, else the devices, else the order. */
static enum gm_status identify(struct gm_ranks *rs, struct gm_error *err)
{
    size_t n = rs->n_ranks;
    uint64_t *v = gm_malloc((n ? n : 1) * sizeof(*v));
    bool named = true, by_dev;
    if (!v)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "ranks: out of memory");
    for (size_t i = 0; i < n; i++) {
        named = named && rs->ranks[i].has_name_rank;
        v[i] = rs->ranks[i].name_rank;
    }
    named = named && distinct(v, n);
    for (size_t i = 0; i < n; i++)
        v[i] = (uint64_t)(uint32_t)rs->ranks[i].device;
    by_dev = !named && n > 1 && distinct(v, n);
    gm_free(v);
    rs->source = named ? GM_RANK_BY_NAME : by_dev ? GM_RANK_BY_DEVICE : GM_RANK_BY_ORDER;
    for (size_t i = 0; i < n; i++) {
        struct gm_rank *r = &rs->ranks[i];
        r->id_source = rs->source;
        r->id = named ? r->name_rank : by_dev ? (uint64_t)r->device : i;
    }
    qsort(rs->ranks, n, sizeof(*rs->ranks), cmp_rank_id);
    return GM_OK;
}

enum gm_status gm_analysis_ranks(const struct gm_rank *ranks, size_t n, struct gm_ranks *out,
                                 struct gm_error *err)
{
    enum gm_status st;
    memset(out, 0, sizeof(*out));
    out->ranks = gm_calloc(n ? n : 1, sizeof(*out->ranks));
    if (!out->ranks)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "ranks: out of memory");
    if (n)
        memcpy(out->ranks, ranks, n * sizeof(*ranks));
    out->n_ranks = n;
    if ((st = identify(out, err)) != GM_OK) {
        gm_analysis_ranks_release(out);
        return st;
    }
    for (int m = 0; m < GM_RANK_METRIC_COUNT; m++)
        spread_of(out, (enum gm_rank_metric)m, &out->spread[m]);
    if (n >= 2)
        imbalance(out);
    return GM_OK;
}

void gm_analysis_ranks_release(struct gm_ranks *r)
{
    if (!r)
        return;
    gm_free(r->ranks);
    memset(r, 0, sizeof(*r));
}

/* The median of v[0..n) (sorted in place). */
static double median(uint64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_u64);
    return n % 2 ? (double)v[n / 2] : ((double)v[n / 2 - 1] + (double)v[n / 2]) / 2.0;
}

size_t gm_analysis_rank_outliers(const struct gm_ranks *rs, size_t *out)
{
    size_t n = rs->n_ranks, k = 0;
    uint64_t *v;
    double med, mad, lim;
    if (n < GM_RANK_OUTLIERS_MIN || !(v = gm_malloc(n * sizeof(*v))))
        return 0;
    for (size_t i = 0; i < n; i++)
        v[i] = rs->ranks[i].value[GM_RANK_PEAK];
    med = median(v, n);
    for (size_t i = 0; i < n; i++) {
        double d = (double)rs->ranks[i].value[GM_RANK_PEAK] - med;
        v[i] = (uint64_t)(d < 0 ? -d : d);
    }
    mad = median(v, n) * 1.4826;
    gm_free(v);
    lim = 3.0 * mad > 0.05 * med ? 3.0 * mad : 0.05 * med;
    for (size_t i = 0; i < n; i++) {
        double d = (double)rs->ranks[i].value[GM_RANK_PEAK] - med;
        if ((d < 0 ? -d : d) > lim)
            out[k++] = i;
    }
    return k;
}
