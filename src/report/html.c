/* SPDX-License-Identifier: MIT */
/* html.c - the self-contained HTML report (see report.h).
 *
 * Page layout: <style> (report.css) | the views' markup | <script type="application/json"
 * id="gm-data"> (the pre-aggregated model below, "</" escaped) | <script> (report.js).
 *
 * Data model "gpumem.report/1" (x is microseconds since the first event when every event of
 * the device has time_us, else the event index; "k" is an event index, -1 the initial state):
 *   {schema, title, meta{...}, settings[[key, value]], categories[], phases[],
 *    devices[{device, n_events, x_unit, x0, x1, peak{bytes, k, x, reserved, phase, iteration},
 *             lod[{n, amax[], kmax[], rmax[]}]  buckets uniform in x, finest last,
 *             bands[[k_alloc, k_free, x0, x1, bytes, cat, stack, addr, stream]], n_allocs,
 *             rbands[{x0, x1, b[band...]}]  more bands per window of events, for zoomed views,
 *             series{x[], k[], ph[], r[], c[7][]}, runs[[x0, x1, phase]],
 *             iterations[...], at_peak[[bytes, count, cat, stack]], moments[...],
 *             leaks[...], ooms[...], frag{...}}],
 *    frames[[filename, name, line, user]], stacks{id: [frame...]}} */
#include "gpumem/report.h"

#include "gpumem/arena.h"
#include "gpumem/json.h"
#include "gpumem/units.h"
#include "gpumem/version.h"

#include "report/report_int.h"
#include "report_assets.h"

#include <stdlib.h>
#include <string.h>

#define LOD_FINEST    65536u
#define LOD_COARSEST  1024u
#define MAX_AT_PEAK   300u
#define MAX_BLOCKS    20000u
#define MAX_SEG_SHOWN 4000u

#define MAX_MOMENTS 64

/* The allocations alive at the moments a device's page shows (the peak and the segments
 * view's), from one pass over the trace (gm_analysis_live_at()). */
struct live_cache {
    size_t n;
    int64_t ks[MAX_MOMENTS + 1];
    uint32_t *idx[MAX_MOMENTS + 1]; /* indexes into the device's allocs, ascending */
    size_t cnt[MAX_MOMENTS + 1];
};

struct ctx {
    const struct gm_snapshot *snap;
    const struct gm_analysis *an;
    struct gm_json *w;
    uint8_t *stack_used; /* per snapshot stack id */
    struct live_cache live;
    bool nomem;
};

static void use_stack(struct ctx *c, uint32_t id)
{
    if (id < c->snap->n_stacks)
        c->stack_used[id] = 1;
}

/* ---- x positions (report_int.h) ---- */

#define xmap      gm_report_xmap
#define xat       gm_report_x
#define xend      gm_report_xend
#define xmap_init gm_report_xmap_init

/* ---- JSON helpers ---- */

static void num(struct gm_json *w, double v)
{
    /* integers exactly, the rest with 4 significant decimals (x positions) */
    if (v == (double)(int64_t)v && v > -9e15 && v < 9e15)
        gm_json_i64(w, (int64_t)v);
    else
        gm_json_double(w, (double)(int64_t)(v * 1e3) / 1e3);
}

/* ---- level of detail pyramid ---- */

/* One level of the pyramid: per bucket the most allocated bytes (and the event where),
 * the most reserved, and the state at the bucket's last point. */
struct lod_level {
    unsigned nb;
    uint64_t *amax, *rmax, *alast, *rlast;
    int64_t *kmax, *klast;
    uint8_t *seen;
};

static void write_lod(struct ctx *c, const struct xmap *m, const struct gm_snapshot_device *sd,
                      const struct gm_snapshot_timeline *tl)
{
    struct gm_json *w = c->w;
    double x0 = 0.0, x1 = xend(m);
    struct lod_level lv[8];
    unsigned n_levels = 0;
    size_t np = sd->n_events + 1;
    struct gm_report_points pt;
    struct gm_error err;

    for (unsigned b = LOD_COARSEST; b <= LOD_FINEST && n_levels < 8; b *= 4) {
        struct lod_level *l = &lv[n_levels++];
        l->nb = b;
        l->amax = gm_calloc(b, sizeof(uint64_t));
        l->rmax = gm_calloc(b, sizeof(uint64_t));
        l->alast = gm_calloc(b, sizeof(uint64_t));
        l->rlast = gm_calloc(b, sizeof(uint64_t));
        l->kmax = gm_calloc(b, sizeof(int64_t));
        l->klast = gm_calloc(b, sizeof(int64_t));
        l->seen = gm_calloc(b, 1);
        if (!l->amax || !l->rmax || !l->alast || !l->rlast || !l->kmax || !l->klast || !l->seen)
            c->nomem = true;
        if (b >= np)
            break;
    }
    /* one walk over the trace fills every level */
    if (!c->nomem && gm_report_points_init(&pt, c->snap, sd, tl, m, &err) == GM_OK) {
        while (gm_report_points_next(&pt)) {
            for (unsigned li = 0; li < n_levels; li++) {
                struct lod_level *l = &lv[li];
                size_t b = gm_report_bucket(pt.x, x0, x1, l->nb);
                if (!l->seen[b] || pt.allocated > l->amax[b]) {
                    l->amax[b] = pt.allocated;
                    l->kmax[b] = pt.k;
                }
                if (!l->seen[b] || pt.reserved > l->rmax[b])
                    l->rmax[b] = pt.reserved;
                l->klast[b] = pt.k;
                l->alast[b] = pt.allocated;
                l->rlast[b] = pt.reserved;
                l->seen[b] = 1;
            }
        }
        gm_report_points_release(&pt);
    } else {
        c->nomem = true;
    }
    gm_json_key(w, "lod");
    gm_json_begin_array(w);
    for (unsigned li = 0; li < n_levels && !c->nomem; li++) {
        struct lod_level *l = &lv[li];
        unsigned nb = l->nb;
        /* an empty bucket holds the state after the last event before it */
        for (unsigned b = 1; b < nb; b++) {
            if (l->seen[b])
                continue;
            l->amax[b] = l->alast[b] = l->alast[b - 1];
            l->rmax[b] = l->rlast[b] = l->rlast[b - 1];
            l->kmax[b] = l->klast[b] = l->klast[b - 1];
            l->seen[b] = 1;
        }
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "n", nb);
        gm_json_key(w, "amax");
        gm_json_begin_array(w);
        for (unsigned b = 0; b < nb; b++)
            gm_json_u64(w, l->amax[b]);
        gm_json_end_array(w);
        gm_json_key(w, "kmax");
        gm_json_begin_array(w);
        for (unsigned b = 0; b < nb; b++)
            gm_json_i64(w, l->kmax[b]);
        gm_json_end_array(w);
        gm_json_key(w, "rmax");
        gm_json_begin_array(w);
        for (unsigned b = 0; b < nb; b++)
            gm_json_u64(w, l->rmax[b]);
        gm_json_end_array(w);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    for (unsigned li = 0; li < n_levels; li++) {
        gm_free(lv[li].amax);
        gm_free(lv[li].rmax);
        gm_free(lv[li].alast);
        gm_free(lv[li].rlast);
        gm_free(lv[li].kmax);
        gm_free(lv[li].klast);
        gm_free(lv[li].seen);
    }
}

/* ---- the largest allocations, drawn as bands ---- */

/* The largest first, then the oldest, then the first in the analysis' order: a total
 * order, so that which allocations are chosen never depends on the sort's algorithm. */
static int big_order(const struct gm_analysis_alloc *x, const struct gm_analysis_alloc *y)
{
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    if (x->alloc_event != y->alloc_event)
        return x->alloc_event < y->alloc_event ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Stacked in allocation order (then by address, then as chosen). */
static int cmp_alloc_time(const void *a, const void *b)
{
    const struct gm_analysis_alloc *x = *(const struct gm_analysis_alloc *const *)a;
    const struct gm_analysis_alloc *y = *(const struct gm_analysis_alloc *const *)b;
    if (x->alloc_event != y->alloc_event)
        return x->alloc_event < y->alloc_event ? -1 : 1;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return big_order(x, y);
}

/* The 'cap' largest allocations (big_order) of those offered, in a min-heap whose root is
 * the smallest kept: an allocation that does not beat it costs one comparison. */
struct top {
    const struct gm_analysis_alloc **v;
    size_t n, cap;
};

static void top_offer(struct top *t, const struct gm_analysis_alloc *a)
{
    size_t i;
    if (t->n < t->cap) {
        /* sift up */
        for (i = t->n++; i > 0 && big_order(a, t->v[(i - 1) / 2]) > 0; i = (i - 1) / 2)
            t->v[i] = t->v[(i - 1) / 2];
        t->v[i] = a;
        return;
    }
    if (!t->cap || big_order(a, t->v[0]) >= 0)
        return; /* not larger than the smallest kept */
    /* replace the root, sift down */
    for (i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct gm_analysis_alloc *mv = a;
        if (l < t->n && big_order(t->v[l], mv) > 0)
            m = l, mv = t->v[l];
        if (r < t->n && big_order(t->v[r], mv) > 0)
            m = r, mv = t->v[r];
        if (m == i)
            break;
        t->v[i] = t->v[m];
        i = m;
    }
    t->v[i] = a;
}

static void write_stream(struct gm_json *w, uint64_t stream)
{
    char b[24];
    snprintf(b, sizeof(b), "%llu", (unsigned long long)stream);
    gm_json_str(w, b);
}

static void write_band(struct ctx *c, const struct xmap *m, const struct gm_analysis_alloc *a)
{
    struct gm_json *w = c->w;
    gm_json_begin_array(w);
    gm_json_i64(w, a->alloc_event);
    gm_json_i64(w, a->free_event < 0 ? (int64_t)m->n : a->free_event);
    num(w, xat(m, a->alloc_event));
    num(w, a->free_event < 0 ? xend(m) : xat(m, a->free_event));
    gm_json_u64(w, a->bytes);
    gm_json_u64(w, a->category);
    gm_json_u64(w, a->stack);
    gm_json_u64(w, a->addr);
    write_stream(w, a->stream);
    gm_json_end_array(w);
    use_stack(c, a->stack);
}

/* The largest allocations of the whole trace ("bands"), and for each of RB_WINDOWS equal
 * windows of events the largest of those alive in it that are not bands already
 * ("rbands"): the page adds a window's bands when the view is zoomed into it, so zooming
 * shows more allocations one by one (level of detail for the bands). */
#define RB_WINDOWS 32u

static void write_bands(struct ctx *c, const struct xmap *m, const struct gm_analysis_device *ad,
                        uint32_t max_bands)
{
    struct gm_json *w = c->w;
    size_t n = ad ? ad->n_allocs : 0, keep = n < max_bands ? n : max_bands;
    uint32_t per_window = max_bands / 4 + 1;
    struct top all = {NULL, 0, 0}, win[RB_WINDOWS];
    uint8_t *chosen = NULL;
    const struct gm_analysis_alloc **pool = NULL;

    /* one pass for the largest of the whole trace, one for the largest of each window */
    memset(win, 0, sizeof(win));
    if (n) {
        all.v = gm_malloc((keep ? keep : 1) * sizeof(*all.v));
        chosen = gm_calloc(n, 1);
        pool = gm_malloc(RB_WINDOWS * per_window * sizeof(*pool));
        if (!all.v || !chosen || !pool) {
            c->nomem = true;
            n = keep = 0;
        }
        all.cap = keep;
    }
    for (size_t i = 0; i < n; i++)
        top_offer(&all, &ad->allocs[i]);
    for (size_t i = 0; i < all.n; i++)
        chosen[all.v[i] - ad->allocs] = 1;
    if (n > keep && m->n > 0) {
        for (uint32_t wi = 0; wi < RB_WINDOWS; wi++) {
            win[wi].v = pool + (size_t)wi * per_window;
            win[wi].cap = per_window;
        }
        for (size_t i = 0; i < n; i++) {
            const struct gm_analysis_alloc *a = &ad->allocs[i];
            int64_t end = a->free_event < 0 ? (int64_t)m->n : a->free_event;
            uint32_t wi;
            if (chosen[i])
                continue;
            /* the windows [k0, k1) it is alive in: from the first with alloc < k1, while
             * k0 < end */
            wi = a->alloc_event < 0 ? 0 : (uint32_t)((uint64_t)a->alloc_event * RB_WINDOWS / m->n);
            while (wi > 0 && (int64_t)(m->n * wi / RB_WINDOWS) > a->alloc_event)
                wi--;
            for (; wi < RB_WINDOWS; wi++) {
                int64_t k0 = (int64_t)(m->n * wi / RB_WINDOWS);
                int64_t k1 = (int64_t)(m->n * (wi + 1) / RB_WINDOWS);
                if (k1 <= k0 || a->alloc_event >= k1)
                    continue;
                if (end <= k0)
                    break; /* the later windows start later still */
                top_offer(&win[wi], a);
            }
        }
    }
    gm_json_key(w, "bands");
    gm_json_begin_array(w);
    /* stacked in allocation order, the oldest at the bottom, as memory_viz does */
    if (all.n)
        qsort(all.v, all.n, sizeof(*all.v), cmp_alloc_time);
    for (size_t i = 0; i < all.n; i++)
        write_band(c, m, all.v[i]);
    gm_json_end_array(w);
    gm_json_kv_u64(w, "n_allocs", n);

    gm_json_key(w, "rbands");
    gm_json_begin_array(w);
    for (uint32_t wi = 0; wi < RB_WINDOWS && n > keep && m->n > 0; wi++) {
        int64_t k0 = (int64_t)(m->n * wi / RB_WINDOWS);
        int64_t k1 = (int64_t)(m->n * (wi + 1) / RB_WINDOWS);
        if (k1 <= k0 || !win[wi].n)
            continue;
        qsort(win[wi].v, win[wi].n, sizeof(*win[wi].v), cmp_alloc_time);
        gm_json_begin_object(w);
        gm_json_key(w, "x0");
        num(w, xat(m, k0));
        gm_json_key(w, "x1");
        num(w, k1 >= (int64_t)m->n ? xend(m) : xat(m, k1));
        gm_json_key(w, "b");
        gm_json_begin_array(w);
        for (size_t i = 0; i < win[wi].n; i++)
            write_band(c, m, win[wi].v[i]);
        gm_json_end_array(w);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_free(all.v);
    gm_free(pool);
    gm_free(chosen);
}

/* ---- categories over time, phases, iterations ---- */

static void write_series(struct ctx *c, const struct xmap *m, const struct gm_analysis_device *ad)
{
    struct gm_json *w = c->w;
    gm_json_key(w, "series");
    gm_json_begin_object(w);
    gm_json_key(w, "x");
    gm_json_begin_array(w);
    for (size_t i = 0; i < ad->n_points; i++)
        num(w, xat(m, ad->points[i].event));
    gm_json_end_array(w);
    gm_json_key(w, "k");
    gm_json_begin_array(w);
    for (size_t i = 0; i < ad->n_points; i++)
        gm_json_i64(w, ad->points[i].event);
    gm_json_end_array(w);
    gm_json_key(w, "r");
    gm_json_begin_array(w);
    for (size_t i = 0; i < ad->n_points; i++)
        gm_json_u64(w, ad->points[i].reserved);
    gm_json_end_array(w);
    gm_json_key(w, "c");
    gm_json_begin_array(w);
    for (int cat = 0; cat < GM_CATEGORY_COUNT; cat++) {
        gm_json_begin_array(w);
        for (size_t i = 0; i < ad->n_points; i++)
            gm_json_u64(w, ad->points[i].bytes[cat]);
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);

    gm_json_key(w, "runs");
    gm_json_begin_array(w);
    for (size_t i = 0; i < ad->n_phases; i++) {
        const struct gm_analysis_phase_run *r = &ad->phases[i];
        if (r->phase == GM_PHASE_OTHER)
            continue;
        gm_json_begin_array(w);
        /* a phase ends at its last event: idle time after it is no phase */
        num(w, xat(m, r->first_event));
        num(w, m->time ? xat(m, r->last_event) : (double)r->last_event + 1.0);
        gm_json_u64(w, r->phase);
        gm_json_end_array(w);
    }
    gm_json_end_array(w);

    gm_json_key(w, "iterations");
    gm_json_begin_array(w);
    for (size_t i = 0; i < ad->n_iterations; i++) {
        const struct gm_analysis_iteration *it = &ad->iterations[i];
        gm_json_begin_object(w);
        gm_json_key(w, "x0");
        num(w, xat(m, it->first_event));
        gm_json_key(w, "x1");
        num(w, it->last_event + 1 >= (int64_t)m->n ? xend(m) : xat(m, it->last_event + 1));
        gm_json_kv_u64(w, "start", it->start_bytes);
        gm_json_kv_u64(w, "peak", it->peak_bytes);
        gm_json_kv_i64(w, "peak_k", it->peak_event);
        gm_json_key(w, "peak_x");
        num(w, xat(m, it->peak_event));
        gm_json_kv_str(w, "peak_phase", gm_phase_name((enum gm_phase)it->peak_phase));
        gm_json_kv_u64(w, "end", it->end_bytes);
        gm_json_key(w, "at_peak");
        gm_json_begin_array(w);
        for (int cat = 0; cat < GM_CATEGORY_COUNT; cat++)
            gm_json_u64(w, it->at_peak[cat]);
        gm_json_end_array(w);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
}

/* ---- what is alive at the peak, grouped by stack and category ---- */

struct group {
    uint32_t stack;
    uint8_t cat;
    uint64_t bytes;
    uint64_t count;
};

static int cmp_group_key(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    if (x->stack != y->stack)
        return x->stack < y->stack ? -1 : 1;
    return (int)x->cat - (int)y->cat;
}

static int cmp_group_bytes(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return cmp_group_key(a, b);
}

/* Category index the page shows as "unknown (no analysis)". */
#define CAT_UNKNOWN GM_CATEGORY_COUNT

struct live_item {
    uint64_t addr;
    uint64_t bytes;
    uint32_t stack;
    uint8_t cat;
};

/* The allocations alive after event k: from the analysis when there is one (k one of the
 * moments of c->live), else from the timeline's list at the peak (k must be the peak then;
 * other moments give none).  A caller-owned array (gm_free), NULL with *n == 0 when
 * empty. */
static struct live_item *live_at(struct ctx *c, const struct gm_analysis_device *ad,
                                 const struct gm_snapshot_timeline *tl, int64_t k, size_t *n)
{
    struct live_item *v = NULL;
    const uint32_t *idx = NULL;
    size_t cnt = 0;
    *n = 0;
    if (ad) {
        for (size_t i = 0; i < c->live.n; i++)
            if (c->live.ks[i] == k) {
                idx = c->live.idx[i];
                cnt = c->live.cnt[i];
                break;
            }
    } else if (k == tl->peak_event_index) {
        cnt = tl->n_live;
    }
    if (!cnt)
        return NULL;
    v = gm_malloc(cnt * sizeof(*v));
    if (!v) {
        c->nomem = true;
        return NULL;
    }
    if (ad) {
        for (size_t i = 0; i < cnt; i++) {
            const struct gm_analysis_alloc *a = &ad->allocs[idx[i]];
            v[(*n)++] = (struct live_item){a->addr, a->bytes, a->stack, a->category};
        }
    } else {
        for (size_t i = 0; i < tl->n_live; i++)
            v[(*n)++] = (struct live_item){tl->live[i].addr, tl->live[i].bytes, tl->live[i].stack,
                                           CAT_UNKNOWN};
    }
    return v;
}

static enum gm_status keep_live(void *ctx, size_t i, const uint32_t *live, size_t n,
                                struct gm_error *err)
{
    struct live_cache *lc = ctx;
    uint32_t *copy = n ? gm_malloc(n * sizeof(*copy)) : NULL;
    if (n && !copy)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
    if (n)
        memcpy(copy, live, n * sizeof(*copy));
    lc->idx[i] = copy;
    lc->cnt[i] = n;
    return GM_OK;
}

static size_t live_count(const struct live_cache *lc, int64_t k)
{
    for (size_t i = 0; i < lc->n; i++)
        if (lc->ks[i] == k)
            return lc->cnt[i];
    return 0;
}

static void live_cache_release(struct live_cache *lc)
{
    for (size_t i = 0; i < lc->n; i++)
        gm_free(lc->idx[i]);
    memset(lc, 0, sizeof(*lc));
}

static void write_at_peak(struct ctx *c, const struct gm_analysis_device *ad,
                          const struct gm_snapshot_timeline *tl)
{
    struct gm_json *w = c->w;
    size_t n = 0, ng = 0;
    struct live_item *live = live_at(c, ad, tl, tl->peak_event_index, &n);
    struct group *g = NULL;

    gm_json_key(w, "at_peak");
    gm_json_begin_array(w);
    if (n) {
        g = gm_malloc(n * sizeof(*g));
        if (!g) {
            c->nomem = true;
            n = 0;
        }
    }
    for (size_t i = 0; i < n; i++) {
        g[i].stack = live[i].stack;
        g[i].cat = live[i].cat;
        g[i].bytes = live[i].bytes;
        g[i].count = 1;
    }
    gm_free(live);
    if (n) {
        qsort(g, n, sizeof(*g), cmp_group_key);
        for (size_t i = 0; i < n; i++) {
            if (ng && g[ng - 1].stack == g[i].stack && g[ng - 1].cat == g[i].cat) {
                g[ng - 1].bytes += g[i].bytes;
                g[ng - 1].count++;
            } else {
                g[ng++] = g[i];
            }
        }
        qsort(g, ng, sizeof(*g), cmp_group_bytes);
    }
    for (size_t i = 0; i < ng && i < MAX_AT_PEAK; i++) {
        gm_json_begin_array(w);
        gm_json_u64(w, g[i].bytes);
        gm_json_u64(w, g[i].count);
        gm_json_u64(w, g[i].cat);
        gm_json_u64(w, g[i].stack);
        gm_json_end_array(w);
        use_stack(c, g[i].stack);
    }
    gm_json_end_array(w);
    {
        uint64_t rest = 0, rest_n = 0;
        for (size_t i = MAX_AT_PEAK; i < ng; i++) {
            rest += g[i].bytes;
            rest_n += g[i].count;
        }
        gm_json_kv_u64(w, "at_peak_rest_bytes", rest);
        gm_json_kv_u64(w, "at_peak_rest_count", rest_n);
        gm_json_kv_u64(w, "at_peak_groups", ng);
    }
    gm_free(g);
}

/* ---- allocator state at chosen moments ---- */

struct mseg {
    uint64_t addr;
    uint64_t size;
    uint64_t stream;
    bool small;
    bool expandable;
    size_t file_index; /* SIZE_MAX: rebuilt from a segment_free event */
};

struct mblock {
    uint64_t addr;
    uint64_t size;  /* bytes the block occupies (rounded) */
    uint64_t bytes; /* requested */
    uint32_t stack;
    uint8_t cat;
    uint8_t state; /* 0 allocated, 1 pending free */
    size_t seg;
    bool shown;
};

static int cmp_mseg(const void *a, const void *b)
{
    const struct mseg *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_mblock_addr(const void *a, const void *b)
{
    const struct mblock *x = a, *y = b;
    if (x->seg != y->seg)
        return x->seg < y->seg ? -1 : 1;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int cmp_u64_desc(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static size_t find_seg(const struct mseg *s, size_t n, uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0 || addr >= s[lo - 1].addr + s[lo - 1].size)
        return SIZE_MAX;
    return lo - 1;
}

/* The category and stack of the allocation alive at the end at 'addr'. */
static const struct gm_analysis_alloc *end_alloc(const struct gm_analysis_alloc **live, size_t n,
                                                 uint64_t addr)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (live[mid]->addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && live[lo]->addr == addr ? live[lo] : NULL;
}

static int cmp_alloc_addr(const void *a, const void *b)
{
    const struct gm_analysis_alloc *x = *(const struct gm_analysis_alloc *const *)a;
    const struct gm_analysis_alloc *y = *(const struct gm_analysis_alloc *const *)b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->alloc_event < y->alloc_event ? 1 : -1; /* the newest first */
}

/* A segment_alloc or segment_free event of the device, and its index. */
struct segev {
    int64_t k;
    struct gm_snapshot_event e;
};

/* The allocator state after event k: the snapshot's segments with the segment events after
 * k undone ('segev': the device's segment_alloc/segment_free events, ascending), and the
 * allocations alive at k placed in them. */
static void write_moment(struct ctx *c, const struct xmap *m, const struct gm_snapshot_device *sd,
                         const struct gm_analysis_device *ad, const struct gm_snapshot_timeline *tl,
                         int64_t k, const char *label, const struct segev *segev, size_t n_segev)
{
    const struct gm_snapshot *snap = c->snap;
    struct gm_json *w = c->w;
    bool at_end = k >= (int64_t)sd->n_events - 1;
    size_t ns = 0, cap = sd->n_segments + 16, nb = 0, bcap = 0;
    struct mseg *segs = gm_malloc(cap * sizeof(*segs));
    struct mblock *blocks = NULL;
    uint64_t reserved = 0, occupied = 0, requested = 0, threshold = 0;

    if (!segs) {
        c->nomem = true;
        return;
    }
    for (size_t i = 0; i < sd->n_segments; i++) {
        const struct gm_snapshot_segment *g = &snap->segments[sd->first_segment + i];
        segs[ns++] = (struct mseg){g->address,  g->total_size,    g->stream,
                                   g->is_small, g->is_expandable, sd->first_segment + i};
    }
    for (size_t si = n_segev; si-- > 0 && segev[si].k > k;) {
        const struct gm_snapshot_event *ev = &segev[si].e;
        if (ev->action == GM_ACTION_SEGMENT_ALLOC) {
            for (size_t i = 0; i < ns; i++) {
                if (segs[i].addr == ev->addr) {
                    segs[i] = segs[--ns];
                    break;
                }
            }
        } else if (ev->action == GM_ACTION_SEGMENT_FREE) {
            if (ns == cap) {
                struct mseg *nsg = gm_realloc(segs, 2 * cap * sizeof(*segs));
                if (!nsg) {
                    c->nomem = true;
                    gm_free(segs);
                    return;
                }
                segs = nsg;
                cap *= 2;
            }
            segs[ns++] = (struct mseg){
                ev->addr, ev->size, gm_snapshot_event_stream(snap, ev), ev->size <= (2u << 20),
                false,    SIZE_MAX};
        }
    }
    qsort(segs, ns, sizeof(*segs), cmp_mseg);
    for (size_t i = 0; i < ns; i++)
        reserved += segs[i].size;

    if (at_end) {
        /* the snapshot's own blocks */
        const struct gm_analysis_alloc **live = NULL;
        size_t nl = 0;
        for (size_t i = 0; ad && i < ad->n_allocs; i++)
            nl += ad->allocs[i].free_event < 0;
        if (nl && !(live = gm_malloc(nl * sizeof(*live))))
            c->nomem = true;
        nl = 0;
        for (size_t i = 0; live && i < ad->n_allocs; i++)
            if (ad->allocs[i].free_event < 0)
                live[nl++] = &ad->allocs[i];
        if (live)
            qsort(live, nl, sizeof(*live), cmp_alloc_addr);
        for (size_t i = 0; i < ns; i++) {
            const struct gm_snapshot_segment *g;
            if (segs[i].file_index == SIZE_MAX)
                continue;
            g = &snap->segments[segs[i].file_index];
            for (size_t b = 0; b < g->n_blocks; b++) {
                const struct gm_snapshot_block *bl = &g->blocks[b];
                const struct gm_analysis_alloc *a;
                if (bl->state != GM_BLOCK_ACTIVE_ALLOCATED &&
                    bl->state != GM_BLOCK_ACTIVE_PENDING_FREE)
                    continue;
                if (nb == bcap) {
                    size_t nc = bcap ? 2 * bcap : 256;
                    struct mblock *nbk = gm_realloc(blocks, nc * sizeof(*blocks));
                    if (!nbk) {
                        c->nomem = true;
                        break;
                    }
                    blocks = nbk;
                    bcap = nc;
                }
                a = live ? end_alloc(live, nl, bl->address) : NULL;
                blocks[nb++] =
                    (struct mblock){bl->address,
                                    bl->size,
                                    bl->requested_size,
                                    a ? a->stack : bl->stack,
                                    a ? a->category : (ad ? GM_CATEGORY_OTHER : CAT_UNKNOWN),
                                    bl->state == GM_BLOCK_ACTIVE_PENDING_FREE,
                                    i,
                                    false};
            }
        }
        gm_free(live);
    } else {
        size_t nl = 0;
        struct live_item *live = live_at(c, ad, tl, k, &nl);
        for (size_t i = 0; i < nl; i++) {
            const struct live_item *a = &live[i];
            size_t si = find_seg(segs, ns, a->addr);
            if (si == SIZE_MAX)
                continue;
            if (nb == bcap) {
                size_t nc = bcap ? 2 * bcap : 256;
                struct mblock *nbk = gm_realloc(blocks, nc * sizeof(*blocks));
                if (!nbk) {
                    c->nomem = true;
                    break;
                }
                blocks = nbk;
                bcap = nc;
            }
            blocks[nb++] =
                (struct mblock){a->addr,  a->bytes < 512 ? 512 : (a->bytes + 511) / 512 * 512,
                                a->bytes, a->stack,
                                a->cat,   0,
                                si,       false};
        }
        gm_free(live);
    }
    for (size_t i = 0; i < nb; i++) {
        occupied += blocks[i].size;
        requested += blocks[i].bytes;
    }
    if (nb > MAX_BLOCKS) {
        uint64_t *sz = gm_malloc(nb * sizeof(uint64_t));
        if (sz) {
            for (size_t i = 0; i < nb; i++)
                sz[i] = blocks[i].size;
            qsort(sz, nb, sizeof(uint64_t), cmp_u64_desc);
            threshold = sz[MAX_BLOCKS - 1] + 1;
            gm_free(sz);
        }
    }
    if (nb)
        qsort(blocks, nb, sizeof(*blocks), cmp_mblock_addr);

    gm_json_begin_object(w);
    gm_json_kv_str(w, "label", label);
    gm_json_kv_i64(w, "k", k);
    gm_json_key(w, "x");
    num(w, xat(m, k));
    gm_json_kv_bool(w, "snapshot", at_end);
    gm_json_kv_u64(w, "reserved", reserved);
    gm_json_kv_u64(w, "occupied", occupied);
    gm_json_kv_u64(w, "requested", requested);
    gm_json_key(w, "segments");
    gm_json_begin_array(w);
    for (size_t i = 0, b = 0; i < ns; i++) {
        uint64_t merged = 0, merged_n = 0;
        gm_json_begin_array(w);
        gm_json_u64(w, segs[i].addr);
        gm_json_u64(w, segs[i].size);
        write_stream(w, segs[i].stream);
        gm_json_u64(w, (segs[i].small ? 1u : 0u) | (segs[i].expandable ? 2u : 0u));
        gm_json_begin_array(w);
        for (; b < nb && blocks[b].seg == i; b++) {
            struct mblock *bl = &blocks[b];
            /* an inconsistent file can claim more than the segment holds: clip to it */
            uint64_t room = segs[i].addr + segs[i].size - bl->addr;
            if (bl->size > room)
                bl->size = room;
            if (bl->bytes > bl->size)
                bl->bytes = bl->size;
            if (threshold && bl->size < threshold) {
                merged += bl->size;
                merged_n++;
                continue;
            }
            gm_json_begin_array(w);
            gm_json_u64(w, bl->addr - segs[i].addr);
            gm_json_u64(w, bl->size);
            gm_json_u64(w, bl->bytes);
            gm_json_u64(w, bl->cat);
            gm_json_u64(w, bl->stack);
            gm_json_u64(w, bl->state);
            gm_json_end_array(w);
            use_stack(c, bl->stack);
        }
        gm_json_end_array(w);
        gm_json_u64(w, merged);
        gm_json_u64(w, merged_n);
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);
    gm_free(segs);
    gm_free(blocks);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The moments the segments view offers, ascending (duplicates possible): the end, the
 * peak, the ooms, the peaks of iterations spread over the trace. */
static size_t moment_ks(const struct gm_snapshot_device *sd, const struct gm_analysis_device *ad,
                        const struct gm_snapshot_timeline *tl, uint32_t max_moments,
                        int64_t ks[MAX_MOMENTS])
{
    size_t nk = 0;
    if (max_moments > MAX_MOMENTS)
        max_moments = MAX_MOMENTS;
    if (max_moments < 3)
        max_moments = 3;
    ks[nk++] = (int64_t)sd->n_events - 1;
    if (sd->n_events)
        ks[nk++] = tl->peak_event_index;
    for (size_t i = 0; ad && i < ad->n_ooms && nk < max_moments; i++)
        ks[nk++] = ad->ooms[i].event;
    if (ad && ad->n_iterations) {
        size_t room = max_moments - nk, n = ad->n_iterations;
        for (size_t i = 0; i < n && i < room; i++) {
            size_t it = room >= n ? i : i * n / room;
            ks[nk++] = ad->iterations[it].peak_event;
        }
    }
    qsort(ks, nk, sizeof(ks[0]), cmp_i64);
    return nk;
}

/* The pass that finds what is alive at the peak and at every moment of the view. */
static enum gm_status fill_live(struct ctx *c, const struct gm_snapshot_device *sd,
                                const struct gm_analysis_device *ad,
                                const struct gm_snapshot_timeline *tl, uint32_t max_moments,
                                struct gm_error *err)
{
    int64_t ks[MAX_MOMENTS + 1];
    size_t nk = moment_ks(sd, ad, tl, max_moments, ks), n = 0;
    struct live_cache *lc = &c->live;
    ks[nk++] = tl->peak_event_index;
    qsort(ks, nk, sizeof(ks[0]), cmp_i64);
    for (size_t i = 0; i < nk; i++)
        if (!n || ks[i] != lc->ks[n - 1])
            lc->ks[n++] = ks[i];
    lc->n = n;
    return gm_analysis_live_at(c->an, ad, lc->ks, n, keep_live, lc, err);
}

static void write_moments(struct ctx *c, const struct xmap *m, const struct gm_snapshot_device *sd,
                          const struct gm_analysis_device *ad,
                          const struct gm_snapshot_timeline *tl, uint32_t max_moments)
{
    struct gm_json *w = c->w;
    int64_t ks[MAX_MOMENTS];
    struct segev *segev = NULL;
    size_t nk = moment_ks(sd, ad, tl, max_moments, ks), n_segev = 0;
    int64_t end = (int64_t)sd->n_events - 1;

    {
        size_t n = sd->n_actions[GM_ACTION_SEGMENT_ALLOC] + sd->n_actions[GM_ACTION_SEGMENT_FREE];
        struct gm_snapshot_cursor cur;
        const struct gm_snapshot_event *e;
        if (!sd->packed) { /* a snapshot built by hand has no counts */
            n = 0;
            gm_snapshot_cursor_init(&cur, sd, 0);
            while ((e = gm_snapshot_cursor_next(&cur)) != NULL)
                n += e->action == GM_ACTION_SEGMENT_ALLOC || e->action == GM_ACTION_SEGMENT_FREE;
        }
        segev = gm_malloc((n + 1) * sizeof(*segev));
        if (!segev) {
            c->nomem = true;
            return;
        }
        gm_snapshot_cursor_init(&cur, sd, 0);
        while ((e = gm_snapshot_cursor_next(&cur)) != NULL && n_segev < n)
            if (e->action == GM_ACTION_SEGMENT_ALLOC || e->action == GM_ACTION_SEGMENT_FREE) {
                segev[n_segev].k = (int64_t)cur.index;
                segev[n_segev++].e = *e;
            }
    }
    gm_json_key(w, "moments");
    gm_json_begin_array(w);
    for (size_t i = 0; i < nk; i++) {
        char label[160];
        size_t len;
        if (i && ks[i] == ks[i - 1])
            continue;
        if (ks[i] == end)
            len = (size_t)snprintf(label, sizeof(label), "end of the trace (the snapshot)");
        else
            len = (size_t)snprintf(label, sizeof(label), "after event %lld", (long long)ks[i]);
        if (sd->n_events && ks[i] == tl->peak_event_index && len < sizeof(label))
            snprintf(label + len, sizeof(label) - len, ": the peak");
        for (size_t o = 0; ad && o < ad->n_ooms; o++)
            if (ad->ooms[o].event == ks[i] && len < sizeof(label))
                snprintf(label + len, sizeof(label) - len, ": out of memory");
        if (ad && ks[i] != tl->peak_event_index && ks[i] != end) {
            for (size_t it = 0; it < ad->n_iterations; it++)
                if (ad->iterations[it].peak_event == ks[i] && len < sizeof(label))
                    snprintf(label + len, sizeof(label) - len, ": peak of iteration %zu", it + 1);
        }
        write_moment(c, m, sd, ad, tl, ks[i], label, segev, n_segev);
    }
    gm_json_end_array(w);
    gm_free(segev);
}

/* ---- findings ---- */

static void write_frag(struct ctx *c, const struct xmap *m, const struct gm_analysis_frag *f)
{
    struct gm_json *w = c->w;
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "k", f->event);
    gm_json_key(w, "x");
    num(w, xat(m, f->event));
    gm_json_kv_bool(w, "is_oom", f->is_oom);
    gm_json_kv_u64(w, "requested", f->requested);
    gm_json_kv_u64(w, "device_free", f->device_free);
    gm_json_kv_u64(w, "reserved", f->reserved);
    gm_json_kv_u64(w, "allocated", f->allocated);
    gm_json_kv_u64(w, "reserved_unallocated", f->reserved_unallocated);
    gm_json_kv_u64(w, "largest_free", f->largest_free);
    gm_json_kv_str(w, "phase", gm_phase_name((enum gm_phase)f->phase));
    gm_json_kv_str(w, "verdict", gm_oom_verdict_name((enum gm_oom_verdict)f->verdict));
    gm_json_kv_str(w, "advice",
                   f->verdict ? gm_oom_verdict_advice((enum gm_oom_verdict)f->verdict) : "");
    gm_json_kv_u64(w, "stack", f->stack);
    use_stack(c, f->stack);
    gm_json_key(w, "pools");
    gm_json_begin_array(w);
    for (size_t i = 0; i < f->n_pools; i++) {
        const struct gm_analysis_pool_free *p = &f->pools[i];
        gm_json_begin_array(w);
        write_stream(w, p->stream);
        gm_json_u64(w, p->is_small);
        gm_json_u64(w, p->reserved);
        gm_json_u64(w, p->free);
        gm_json_u64(w, p->largest_free);
        gm_json_u64(w, p->n_segments);
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "at");
    gm_json_begin_array(w);
    for (int cat = 0; cat < GM_CATEGORY_COUNT; cat++)
        gm_json_u64(w, f->at_event[cat]);
    gm_json_end_array(w);
    gm_json_end_object(w);
}

static void write_findings(struct ctx *c, const struct xmap *m, const struct gm_analysis_device *ad)
{
    struct gm_json *w = c->w;
    gm_json_key(w, "leaks");
    gm_json_begin_array(w);
    for (size_t i = 0; i < ad->n_leaks; i++) {
        const struct gm_analysis_leak *l = &ad->leaks[i];
        gm_json_begin_object(w);
        gm_json_kv_str(w, "kind", gm_leak_kind_name((enum gm_leak_kind)l->kind));
        gm_json_kv_str(w, "advice", gm_leak_kind_advice((enum gm_leak_kind)l->kind));
        gm_json_kv_u64(w, "per_iteration", l->bytes_per_iteration);
        gm_json_kv_u64(w, "total", l->total_bytes);
        gm_json_kv_u64(w, "count", l->count);
        gm_json_kv_u64(w, "iterations", l->n_iterations);
        gm_json_kv_u64(w, "cat", l->category);
        gm_json_kv_u64(w, "stack", l->stack);
        gm_json_kv_i64(w, "first_iteration", l->first_iteration + 1);
        gm_json_kv_i64(w, "last_iteration", l->last_iteration + 1);
        /* the sites of the cause: [per_iteration, total, count, iterations, stack] */
        gm_json_key(w, "sites");
        gm_json_begin_array(w);
        for (size_t k = 0; k < l->n_sites; k++) {
            const struct gm_analysis_leak_site *si = &l->sites[k];
            gm_json_begin_array(w);
            gm_json_u64(w, si->bytes_per_iteration);
            gm_json_u64(w, si->total_bytes);
            gm_json_u64(w, si->count);
            gm_json_u64(w, si->n_iterations);
            gm_json_u64(w, si->stack);
            gm_json_end_array(w);
            use_stack(c, si->stack);
        }
        gm_json_end_array(w);
        gm_json_end_object(w);
        use_stack(c, l->stack);
    }
    gm_json_end_array(w);
    gm_json_kv_str(w, "leak_verdict", gm_leak_verdict_name(gm_analysis_leak_verdict(ad)));
    gm_json_kv_str(w, "leak_verdict_text", gm_leak_verdict_text(gm_analysis_leak_verdict(ad)));
    gm_json_key(w, "ooms");
    gm_json_begin_array(w);
    for (size_t i = 0; i < ad->n_ooms; i++)
        write_frag(c, m, &ad->ooms[i]);
    gm_json_end_array(w);
    gm_json_key(w, "frag");
    write_frag(c, m, &ad->peak_frag);
    gm_json_key(w, "at_peak_cat");
    gm_json_begin_array(w);
    for (int cat = 0; cat < GM_CATEGORY_COUNT; cat++)
        gm_json_u64(w, ad->at_peak[cat]);
    gm_json_end_array(w);
    gm_json_kv_u64(w, "at_peak_unexplained", ad->at_peak_unexplained);
    gm_json_kv_u64(w, "at_peak_lifetime_only", ad->at_peak_lifetime_only);
    gm_json_key(w, "phase_events");
    gm_json_begin_array(w);
    for (int p = 0; p < GM_PHASE_COUNT; p++)
        gm_json_u64(w, ad->phase_events[p]);
    gm_json_end_array(w);
}

/* ---- one device ---- */

static enum gm_status write_device(struct ctx *c, const struct gm_snapshot_device *sd,
                                   const struct gm_analysis_device *ad,
                                   const struct gm_report_opts *o, struct gm_error *err)
{
    struct gm_json *w = c->w;
    struct gm_snapshot_timeline tl;
    struct xmap m;
    /* with an analysis, what is alive comes from it (fill_live()) */
    enum gm_status st =
        gm_snapshot_timeline(c->snap, sd->index, ad ? 0 : GM_TIMELINE_LIVE, &tl, err);
    if (st != GM_OK)
        return st;
    if (ad &&
        (st = fill_live(c, sd, ad, &tl, o->max_moments ? o->max_moments : 12, err)) != GM_OK) {
        gm_snapshot_timeline_release(&tl);
        live_cache_release(&c->live);
        return st;
    }
    xmap_init(&m, sd);
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "device", sd->index);
    gm_json_kv_u64(w, "n_events", sd->n_events);
    gm_json_kv_u64(w, "n_segments", sd->n_segments);
    gm_json_kv_str(w, "x_unit", m.time ? "us" : "event");
    gm_json_kv_i64(w, "t0_us", m.t0);
    gm_json_kv_u64(w, "x0", 0);
    gm_json_key(w, "x1");
    num(w, xend(&m));
    gm_json_kv_u64(w, "initial", tl.initial_bytes);
    gm_json_kv_u64(w, "final", tl.final_bytes);
    gm_json_key(w, "peak");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "bytes", tl.peak_bytes);
    gm_json_kv_i64(w, "k", tl.peak_event_index);
    gm_json_key(w, "x");
    num(w, xat(&m, tl.peak_event_index));
    if (tl.peak_time_valid)
        gm_json_kv_i64(w, "time_us", tl.peak_time_us);
    else
        gm_json_kv_null(w, "time_us");
    gm_json_kv_u64(w, "reserved", tl.reserved_at_peak_bytes);
    gm_json_kv_u64(w, "max_reserved", tl.peak_reserved_bytes);
    gm_json_kv_u64(w, "n_live", ad ? live_count(&c->live, tl.peak_event_index) : tl.n_live);
    if (ad) {
        gm_json_kv_str(w, "phase", gm_phase_name((enum gm_phase)ad->peak_phase));
        gm_json_kv_i64(w, "iteration", ad->peak_iteration);
    }
    gm_json_end_object(w);
    write_lod(c, &m, sd, &tl);
    write_bands(c, &m, ad, o->max_bands ? o->max_bands : 400);
    if (ad) {
        write_series(c, &m, ad);
        write_findings(c, &m, ad);
    }
    write_at_peak(c, ad, &tl);
    write_moments(c, &m, sd, ad, &tl, o->max_moments ? o->max_moments : 12);
    gm_json_end_object(w);
    gm_snapshot_timeline_release(&tl);
    live_cache_release(&c->live);
    return c->nomem ? gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory") : GM_OK;
}

/* ---- frames and stacks that the page refers to ---- */

static void write_stacks(struct ctx *c)
{
    const struct gm_snapshot *snap = c->snap;
    struct gm_json *w = c->w;
    uint32_t *dense = gm_malloc((snap->n_frames + 1) * sizeof(uint32_t));
    uint32_t ids[256], n_dense = 0;

    if (!dense) {
        c->nomem = true;
        return;
    }
    for (size_t i = 0; i < snap->n_frames; i++)
        dense[i] = UINT32_MAX;
    gm_json_key(w, "stacks");
    gm_json_begin_object(w);
    for (size_t s = 1; s < snap->n_stacks; s++) {
        char key[24];
        size_t n;
        if (!c->stack_used[s])
            continue;
        n = gm_snapshot_stack_frames(snap, (uint32_t)s, ids, 256);
        if (n > 256)
            n = 256;
        snprintf(key, sizeof(key), "%zu", s);
        gm_json_key(w, key);
        gm_json_begin_array(w);
        for (size_t i = 0; i < n; i++) {
            if (dense[ids[i]] == UINT32_MAX)
                dense[ids[i]] = n_dense++;
            gm_json_u64(w, dense[ids[i]]);
        }
        gm_json_end_array(w);
    }
    gm_json_end_object(w);
    {
        /* frames in dense order */
        uint32_t *order = gm_malloc((n_dense + 1) * sizeof(uint32_t));
        if (!order) {
            c->nomem = true;
            gm_free(dense);
            return;
        }
        for (size_t i = 0; i < snap->n_frames; i++)
            if (dense[i] != UINT32_MAX)
                order[dense[i]] = (uint32_t)i;
        gm_json_key(w, "frames");
        gm_json_begin_array(w);
        for (uint32_t i = 0; i < n_dense; i++) {
            const struct gm_snapshot_frame *f = &snap->frames[order[i]];
            gm_json_begin_array(w);
            gm_json_str(w, f->filename);
            gm_json_str(w, f->name);
            gm_json_i64(w, f->line);
            gm_json_u64(w, gm_snapshot_frame_is_user(f));
            gm_json_end_array(w);
        }
        gm_json_end_array(w);
        gm_free(order);
    }
    gm_free(dense);
}

static void write_meta(struct ctx *c, const struct gm_report_opts *o)
{
    const struct gm_snapshot *snap = c->snap;
    struct gm_json *w = c->w;
    gm_json_kv_str(w, "title", o->title ? o->title : "snapshot");
    gm_json_kv_str(w, "gpumem_version", gm_version());
    gm_json_key(w, "meta");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "file_size", snap->file_size);
    gm_json_kv_str(w, "generation", gm_snapshot_gen_name(snap->gen));
    gm_json_kv_str(w, "torch", gm_snapshot_gen_torch(snap->gen));
    gm_json_kv_i64(w, "protocol", snap->protocol);
    gm_json_kv_bool(w, "is_list", snap->is_list);
    gm_json_kv_u64(w, "segments", snap->n_segments);
    gm_json_kv_u64(w, "blocks", snap->n_blocks);
    gm_json_kv_u64(w, "events", snap->n_events);
    gm_json_kv_u64(w, "frames", snap->n_frames);
    gm_json_kv_u64(w, "stacks", gm_snapshot_unique_stacks(snap));
    gm_json_kv_bool(w, "has_time", snap->has_time);
    if (snap->has_time) {
        gm_json_kv_i64(w, "time_first_us", snap->time_first_us);
        gm_json_kv_i64(w, "time_last_us", snap->time_last_us);
    }
    gm_json_kv_u64(w, "annotations", snap->n_annotations);
    gm_json_kv_u64(w, "unknown_actions", snap->n_unknown_actions);
    gm_json_kv_bool(w, "trace_overflowed", snap->trace_overflowed);
    gm_json_kv_bool(w, "host_data", snap->has_host_data);
    gm_json_kv_bool(w, "has_analysis", c->an != NULL);
    gm_json_end_object(w);
    gm_json_key(w, "settings");
    gm_json_begin_array(w);
    for (size_t i = 0; i < snap->n_settings; i++) {
        const struct gm_snapshot_setting *s = &snap->settings[i];
        char v[64];
        gm_json_begin_array(w);
        gm_json_str(w, s->key);
        switch (s->type) {
        case GM_SETTING_INT:
            snprintf(v, sizeof(v), "%lld", (long long)s->i);
            gm_json_str(w, v);
            break;
        case GM_SETTING_FLOAT:
            snprintf(v, sizeof(v), "%g", s->d);
            gm_json_str(w, v);
            break;
        case GM_SETTING_BOOL:
            gm_json_str(w, s->i ? "True" : "False");
            break;
        case GM_SETTING_NONE:
            gm_json_str(w, "None");
            break;
        case GM_SETTING_STR:
        case GM_SETTING_OTHER:
            gm_json_str(w, s->s ? s->s : "");
            break;
        }
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "categories");
    gm_json_begin_array(w);
    for (int cat = 0; cat < GM_CATEGORY_COUNT; cat++)
        gm_json_str(w, gm_category_name((enum gm_category)cat));
    gm_json_end_array(w);
    gm_json_key(w, "phases");
    gm_json_begin_array(w);
    for (int p = 0; p < GM_PHASE_COUNT; p++)
        gm_json_str(w, gm_phase_name((enum gm_phase)p));
    gm_json_end_array(w);
}

/* ---- the page ---- */

static void put_html_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

static void put_chunks(FILE *f, const char *const *chunks)
{
    for (; *chunks; chunks++)
        fputs(*chunks, f);
}

/* Copy JSON text into a <script> element: "</" becomes "<\/" so that no string in the
 * data can close the element (and "<!--" cannot open a comment). */
static void put_json_for_script(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '<' && i + 1 < n && (s[i + 1] == '/' || s[i + 1] == '!')) {
            fputs("\\u003c", f);
            continue;
        }
        fputc(s[i], f);
    }
}

enum gm_status gm_report_html(FILE *f, const struct gm_snapshot *snap, const struct gm_analysis *an,
                              const struct gm_report_opts *o, struct gm_error *err)
{
    struct gm_report_opts def = {NULL, 0, 0};
    struct gm_json w;
    struct ctx c;
    char *json = NULL;
    size_t json_len = 0;
    FILE *mem;
    enum gm_status st = GM_OK;

    if (!o)
        o = &def;
    memset(&c, 0, sizeof(c));
    c.snap = snap;
    c.an = an;
    c.w = &w;
    c.stack_used = gm_calloc(snap->n_stacks + 1, 1);
    if (!c.stack_used)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
    mem = open_memstream(&json, &json_len);
    if (!mem) {
        gm_free(c.stack_used);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
    }
    gm_json_init(&w, mem, 0);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "schema", "gpumem.report/1");
    write_meta(&c, o);
    gm_json_key(&w, "devices");
    gm_json_begin_array(&w);
    for (size_t d = 0; d < snap->n_devices && st == GM_OK; d++) {
        const struct gm_snapshot_device *sd = &snap->devices[d];
        const struct gm_analysis_device *ad =
            an ? gm_analysis_device_by_index(an, sd->index) : NULL;
        st = write_device(&c, sd, ad, o, err);
    }
    gm_json_end_array(&w);
    if (st == GM_OK) {
        write_stacks(&c);
        gm_json_end_object(&w);
        if (!gm_json_finish(&w) || c.nomem)
            st = gm_fail(err, c.nomem ? GM_ERR_NOMEM : GM_ERR_INTERNAL, GM_NO_OFFSET,
                         "report: building the page data failed");
    }
    fclose(mem);
    gm_free(c.stack_used);
    if (st != GM_OK) {
        free(json);
        return st;
    }

    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
          "<link rel=\"icon\" href=\"data:,\">\n<title>gpumem report: ",
          f);
    put_html_escaped(f, o->title ? o->title : "snapshot");
    fputs("</title>\n<style>\n", f);
    put_chunks(f, gm_report_css);
    fputs("</style>\n</head>\n<body>\n", f);
    put_chunks(f, gm_report_body);
    fputs("<script type=\"application/json\" id=\"gm-data\">", f);
    put_json_for_script(f, json, json_len);
    fputs("</script>\n<script>\n", f);
    put_chunks(f, gm_report_js);
    fputs("</script>\n</body>\n</html>\n", f);
    free(json);
    if (fflush(f) != 0 || ferror(f))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "report: write error");
    return GM_OK;
}
