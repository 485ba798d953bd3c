/* SPDX-License-Identifier: MIT */
/* bands.c - the allocations a timeline draws one by one, and the merged rest by category
 * (the rule is in gpumem/bands.h).
 *
 * An allocation's area is bytes x (x of its free, or the axis' end) - (x of its alloc, or
 * 0); on a time axis the x of each event is rounded to a float (areas are compared to
 * about one part in 10^7), read from the axis when it keeps every x, else kept here from
 * one walk of the trace (4 bytes an event).  Every choice keeps its best in bounded heaps (an
 * allocation that does not beat a full heap's smallest costs one comparison), so the memory
 * it needs is the budget's, not the trace's, besides a byte an allocation (is it a band).
 * One pass over the allocations offers each to the heaps of the whole trace and to those of
 * the windows it is alive in (the allocations are tens of bytes each, hundreds of megabytes in a
 * large trace: each pass over them costs as much as reading them).  The rest by
 * category is one pass over the allocations in alloc order, each adding at its alloc and
 * taking off at its free into the moment asked about at or after it, then a running sum over
 * the moments. */
#include "gpumem/bands.h"

#include "base/hint.h"
#include "gpumem/arena.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct cand {
    double area; /* bytes x lifetime on the axis (clipped to a window there) */
    uint64_t bytes;
    int32_t alloc_event;
    uint32_t i; /* index into the device's allocs */
};

/* > 0 when x comes before y: the larger area, then the larger, the older, the first. */
static inline int better(const struct cand *x, const struct cand *y)
{
    if (x->area != y->area)
        return x->area > y->area ? 1 : -1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? 1 : -1;
    if (x->alloc_event != y->alloc_event)
        return x->alloc_event < y->alloc_event ? 1 : -1;
    return x->i < y->i ? 1 : x->i > y->i ? -1 : 0;
}

static int cmp_cand(const void *a, const void *b)
{
    return -better(a, b);
}

/* The x of every event of the device (with a time axis that does not keep them; else x is
 * the event index, or the axis' own). */
static float *event_xs(const struct gm_lod_axis *ax)
{
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    float *xs;
    if (!ax->time || !ax->n_events || !ax->dev || gm_lod_axis_keeps_x(ax))
        return NULL;
    xs = gm_calloc(ax->n_events, sizeof(*xs)); /* zero where a damaged trace ends early */
    if (!xs)
        return NULL;
    gm_snapshot_cursor_init(&c, ax->dev, 0);
    while ((e = gm_snapshot_cursor_next(&c)) != NULL && c.index < ax->n_events)
        xs[c.index] = (float)gm_lod_axis_x_of(ax, (int64_t)c.index, e);
    return xs;
}

/* The x of event k (-1: 0; past the last: the axis's end) as the page draws it: from 'xs'
 * (event_xs()) when given, else as the axis keeps it (rounded to a float, as event_xs() keeps
 * it), else the index.  'kept32': the axis keeps 32-bit x's and xs is NULL, read with no test
 * but the ends (the passes over the allocations are compiled for both cases). */
static GM_INLINE_ALWAYS double x_of(const struct gm_lod_axis *ax, const float *xs, int64_t k,
                                    bool kept32)
{
    if (k < 0)
        return 0.0;
    if (k >= (int64_t)ax->n_events)
        return ax->x_end;
    if (kept32)
        return (double)(float)(double)gm_lod_axis_x32(ax)[k];
    if (xs)
        return (double)xs[k];
    if (gm_lod_axis_keeps_x(ax))
        return (double)(float)gm_lod_axis_kept_x(ax, (size_t)k);
    return (double)k;
}

static GM_INLINE_ALWAYS void life(const struct gm_lod_axis *ax, const float *xs,
                                  const struct gm_analysis_alloc *a, double *x0, double *x1,
                                  bool kept32)
{
    *x0 = x_of(ax, xs, a->alloc_event, kept32);
    *x1 = a->free_event < 0 ? ax->x_end : x_of(ax, xs, a->free_event, kept32);
    if (*x1 < *x0) /* time going back in a damaged file */
        *x1 = *x0;
}

/* ---- zoomed windows: a bounded heap of the best, the worst kept at the root ---- */

struct heap {
    struct cand *v;
    size_t n, cap;
    double thr; /* the root's area once full, else -inf: an area below it is not taken */
};

#define HEAP(v, cap) ((struct heap){(v), 0, (cap), -INFINITY})

/* 'a' into slot i of heap v[0..n), whose subtrees below i are heaps, sifted down to its
 * place ('a' is not in v). */
static void sift_down(struct cand *v, size_t n, size_t i, const struct cand *a)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const struct cand *mv = a;
        if (l < n && better(mv, &v[l]) > 0)
            m = l, mv = &v[l];
        if (r < n && better(mv, &v[r]) > 0)
            m = r, mv = &v[r];
        if (m == i)
            break;
        v[i] = v[m];
        i = m;
    }
    v[i] = *a;
}

/* Add 'a': into the room left, else in place of the worst kept (which it beats).  Until the
 * heap is full its items are in no order (none is turned away then), and are made a heap
 * once, when it fills: a heap of k costs O(k) to fill, not O(k log k). */
static void heap_insert(struct heap *h, const struct cand *a)
{
    if (h->n < h->cap) {
        h->v[h->n++] = *a;
        if (h->n < h->cap)
            return;
        for (size_t i = h->n / 2; i-- > 0;) {
            struct cand c = h->v[i];
            sift_down(h->v, h->n, i, &c);
        }
    } else {
        sift_down(h->v, h->n, 0, a);
    }
    h->thr = h->v[0].area;
}

/* Keep 'a' if the heap has room or it beats the worst kept; most candidates do not, and
 * cost one comparison here. */
static inline void heap_offer(struct heap *h, const struct cand *a)
{
    if (a->area < h->thr)
        return; /* below the root: one comparison */
    if (h->n < h->cap || (h->cap && better(a, &h->v[0]) > 0))
        heap_insert(h, a);
}

/* ---- stacking order ---- */

struct stacked {
    int32_t alloc_event;
    uint64_t addr;
    uint32_t i;
};

static int cmp_stack(const void *a, const void *b)
{
    const struct stacked *x = a, *y = b;
    if (x->alloc_event != y->alloc_event)
        return x->alloc_event < y->alloc_event ? -1 : 1;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* 'idx' (n indexes into ad->allocs) in stacking order: the oldest at the bottom. */
static bool stack_order(const struct gm_analysis_device *ad, uint32_t *idx, size_t n)
{
    struct stacked *t;
    if (n < 2)
        return true;
    t = gm_malloc(n * sizeof(*t));
    if (!t)
        return false;
    for (size_t j = 0; j < n; j++) {
        const struct gm_analysis_alloc *a = &ad->allocs[idx[j]];
        t[j] = (struct stacked){a->alloc_event, a->addr, idx[j]};
    }
    qsort(t, n, sizeof(*t), cmp_stack);
    for (size_t j = 0; j < n; j++)
        idx[j] = t[j].i;
    gm_free(t);
    return true;
}

/* ---- the choice ---- */

static bool is_edge(const struct gm_analysis_alloc *a)
{
    return a->alloc_event < 0 || a->free_event < 0;
}

/* Allocation i as a candidate, its life [x0, x1] on the axis (life()). */
static struct cand cand_of(const struct gm_analysis_device *ad, size_t i, double x0, double x1)
{
    const struct gm_analysis_alloc *a = &ad->allocs[i];
    return (struct cand){(double)a->bytes * (x1 - x0), a->bytes, a->alloc_event, (uint32_t)i};
}

static void take(struct gm_bands *out, uint32_t i)
{
    out->is_band[i] = 1;
    out->allocs[out->n++] = i;
}

/* ---- the windows: chosen in the same pass over the allocations ---- */

/* Window w is events [wk[w], wk[w + 1]), on the axis [wx[w], wx[w + 1]].  Its heap keeps
 * the best clipped areas of every allocation alive in it, bands or not: the bands are not
 * known until the pass is over, and they are at most 'max', so that the best per_window of
 * the others are among the best per_window + max of all (a heap keeps the best of a total
 * order, better()). */
struct windows {
    size_t W, ne;
    int64_t *wk;
    double *wx;
    struct heap *h;
    struct cand *pool;
};

static void windows_release(struct windows *ws)
{
    gm_free(ws->wk);
    gm_free(ws->wx);
    gm_free(ws->h);
    gm_free(ws->pool);
}

static bool windows_init(struct windows *ws, const struct gm_lod_axis *ax, const float *xs,
                         const struct gm_bands_opts *o, size_t max, size_t n)
{
    size_t W = o->n_windows, cap = (size_t)o->per_window + max;
    if (cap > n)
        cap = n;
    *ws = (struct windows){W, ax->n_events, NULL, NULL, NULL, NULL};
    ws->wk = gm_malloc((W + 1) * sizeof(*ws->wk));
    ws->wx = gm_malloc((W + 1) * sizeof(*ws->wx));
    ws->h = gm_calloc(W, sizeof(*ws->h));
    ws->pool = gm_malloc(W * cap * sizeof(*ws->pool));
    if (!ws->wk || !ws->wx || !ws->h || !ws->pool) {
        windows_release(ws);
        return false;
    }
    for (size_t w = 0; w < W; w++)
        ws->h[w] = HEAP(ws->pool + w * cap, cap);
    for (size_t w = 0; w <= W; w++) {
        ws->wk[w] = (int64_t)(ws->ne * w / W);
        ws->wx[w] = x_of(ax, xs, ws->wk[w], false);
    }
    return true;
}

/* Allocation i ('a', its life [x0, x1]) to the heap of each window its life overlaps, with
 * its area clipped to the window. */
static GM_INLINE_ALWAYS void offer_windows(struct windows *ws, const struct gm_analysis_alloc *a,
                                           uint32_t i, double x0, double x1)
{
    size_t W = ws->W;
    int64_t end = a->free_event < 0 ? (int64_t)ws->ne : a->free_event;
    /* a window at or before the one of its alloc (ne * w / W <= alloc_event for this w);
     * the loop passes over those that end at or before its alloc */
    size_t w = a->alloc_event < 0 ? 0 : (size_t)((uint64_t)a->alloc_event * W / ws->ne);
    for (; w < W; w++) {
        int64_t k0 = ws->wk[w], k1 = ws->wk[w + 1];
        double wx0 = ws->wx[w], wx1 = ws->wx[w + 1];
        struct cand cd;
        if (k1 <= k0 || a->alloc_event >= k1)
            continue;
        if (end <= k0)
            break; /* the later windows start later still */
        cd = (struct cand){(double)a->bytes * ((x1 < wx1 ? x1 : wx1) - (x0 > wx0 ? x0 : wx0)),
                           a->bytes, a->alloc_event, i};
        if (cd.area < 0)
            cd.area = 0;
        heap_offer(&ws->h[w], &cd);
        if (end <= k1)
            break; /* it ends in this window: no later one starts before its end */
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Whether i is in v[0..n) (increasing). */
static bool in_sorted(const uint32_t *v, size_t n, uint32_t i)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < i)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && v[lo] == i;
}

/* Each window's best per_window that are not bands, once these are chosen.  Which are is
 * asked of the bands' indexes sorted (a few hundred), not of is_band: read at random, its
 * pages (a byte an allocation, megabytes, written only at the bands) cost a fault each. */
static enum gm_status windows_take(struct windows *ws, const struct gm_analysis_device *ad,
                                   size_t per_window, struct gm_bands *out)
{
    uint32_t *bands;
    enum gm_status st = GM_OK;
    if (out->n == ad->n_allocs)
        return GM_OK; /* every allocation is a band */
    out->windows = gm_calloc(ws->W, sizeof(*out->windows));
    bands = gm_malloc((out->n ? out->n : 1) * sizeof(*bands));
    if (!out->windows || !bands) {
        gm_free(bands);
        return GM_ERR_NOMEM;
    }
    memcpy(bands, out->allocs, out->n * sizeof(*bands));
    qsort(bands, out->n, sizeof(*bands), cmp_u32);
    for (size_t w = 0; w < ws->W; w++) {
        struct gm_bands_window *bw = &out->windows[out->n_windows];
        struct heap *h = &ws->h[w], best;
        size_t m = 0;
        for (size_t j = 0; j < h->n; j++)
            if (!in_sorted(bands, out->n, h->v[j].i))
                h->v[m++] = h->v[j];
        if (!m)
            continue;
        /* the best per_window of them, into a heap over the front of the same array (it
         * never reaches past the one offered: copied first) */
        best = HEAP(h->v, per_window);
        for (size_t j = 0; j < m; j++) {
            struct cand c = h->v[j];
            heap_offer(&best, &c);
        }
        m = best.n;
        bw->k0 = ws->wk[w];
        bw->k1 = ws->wk[w + 1];
        bw->allocs = gm_malloc(m * sizeof(*bw->allocs));
        if (!bw->allocs) {
            st = GM_ERR_NOMEM;
            break;
        }
        for (size_t j = 0; j < m; j++)
            bw->allocs[j] = h->v[j].i;
        bw->n = m;
        out->n_windows++;
        if (!stack_order(ad, bw->allocs, bw->n)) {
            st = GM_ERR_NOMEM;
            break;
        }
    }
    gm_free(bands);
    return st;
}

/* ---- the bands of the whole trace ---- */

/* Every allocation to the heap of its kind: the edge ones, the others to their slice's and
 * to the heap of all the others; and to the heaps of the windows 'ws' (when given) it is
 * alive in.  Returns how many are edge ones. */
static GM_INLINE_ALWAYS size_t offer_whole(const struct gm_analysis_device *ad,
                                           const struct gm_lod_axis *ax, const float *xs,
                                           struct heap *edge, struct heap *all, struct heap *slice,
                                           struct windows *ws, bool kept32)
{
    size_t n_edge = 0;
    for (size_t i = 0; i < ad->n_allocs; i++) {
        const struct gm_analysis_alloc *a = &ad->allocs[i];
        double x0, x1, mid;
        struct cand c;
        unsigned s;
        life(ax, xs, a, &x0, &x1, kept32);
        c = cand_of(ad, i, x0, x1);
        if (ws)
            offer_windows(ws, a, (uint32_t)i, x0, x1);
        if (is_edge(a)) {
            n_edge++;
            heap_offer(edge, &c);
            continue;
        }
        mid = (x0 + x1) / 2 / ax->x_end * GM_BANDS_SPREAD;
        s = mid <= 0 ? 0 : mid >= GM_BANDS_SPREAD ? GM_BANDS_SPREAD - 1 : (unsigned)mid;
        heap_offer(&slice[s], &c);
        heap_offer(all, &c);
    }
    return n_edge;
}

/* The best of each kind in bounded heaps (memory as large as the budget, not the trace):
 * the edge ones, the best of each slice, and the best of all the others (the slices
 * leave at most the budget to them, so they are among these).  How many of each kind are
 * taken depends on how many allocations are edge ones, which the one pass over them counts:
 * each heap holds as many as any count could take (the budget; a slice its share of it),
 * and since a heap keeps the best of a total order (better()), the best k of a larger one
 * are those a heap of k would keep.  The same pass offers each allocation to the windows
 * 'ws' (when given). */
static enum gm_status choose_whole(const struct gm_analysis_device *ad,
                                   const struct gm_lod_axis *ax, const float *xs, size_t max,
                                   struct windows *ws, struct gm_bands *out)
{
    size_t n = ad->n_allocs, n_edge, n_inner, edge_take, inner, per_slice, n_pick = 0;
    size_t slice_cap = (max + GM_BANDS_SPREAD - 1) / GM_BANDS_SPREAD;
    struct heap edge = HEAP(NULL, 0), all = HEAP(NULL, 0), slice[GM_BANDS_SPREAD];
    struct cand *pool = NULL, *pick = NULL;
    enum gm_status st = GM_OK;

    pool = gm_malloc((2 * max + GM_BANDS_SPREAD * slice_cap + 1) * sizeof(*pool));
    pick = gm_malloc((GM_BANDS_SPREAD * slice_cap + 1) * sizeof(*pick));
    if (!pool || !pick) {
        st = GM_ERR_NOMEM;
        goto out_free;
    }
    edge = HEAP(pool, max);
    all = HEAP(pool + max, max);
    for (size_t s = 0; s < GM_BANDS_SPREAD; s++)
        slice[s] = HEAP(pool + 2 * max + s * slice_cap, slice_cap);
    /* compiled for each case: 32-bit x's kept or not, windows or none */
    if (gm_lod_axis_x32(ax))
        n_edge = ws ? offer_whole(ad, ax, xs, &edge, &all, slice, ws, true)
                    : offer_whole(ad, ax, xs, &edge, &all, slice, NULL, true);
    else
        n_edge = ws ? offer_whole(ad, ax, xs, &edge, &all, slice, ws, false)
                    : offer_whole(ad, ax, xs, &edge, &all, slice, NULL, false);
    n_inner = n - n_edge;
    /* a quarter of the budget stays for the others, when there are others */
    edge_take = max - (n_inner < max / 4 ? n_inner : max / 4);
    if (edge_take > n_edge)
        edge_take = n_edge;
    inner = max - edge_take < n_inner ? max - edge_take : n_inner;
    per_slice = (inner + GM_BANDS_SPREAD - 1) / GM_BANDS_SPREAD;
    qsort(edge.v, edge.n, sizeof(*edge.v), cmp_cand);
    for (size_t j = 0; j < edge.n && j < edge_take; j++)
        take(out, edge.v[j].i);
    out->n_edge = out->n;
    /* an equal share for each slice of the axis, the largest areas first ... */
    for (size_t s = 0; s < GM_BANDS_SPREAD; s++) {
        qsort(slice[s].v, slice[s].n, sizeof(*slice[s].v), cmp_cand);
        for (size_t j = 0; j < slice[s].n && j < per_slice; j++)
            pick[n_pick++] = slice[s].v[j];
    }
    qsort(pick, n_pick, sizeof(*pick), cmp_cand);
    for (size_t j = 0; j < n_pick && out->n < max; j++)
        take(out, pick[j].i);
    /* ... then what the slices left, to the largest areas of the others */
    qsort(all.v, all.n, sizeof(*all.v), cmp_cand);
    for (size_t j = 0; j < all.n && j < inner && out->n < max; j++)
        if (!out->is_band[all.v[j].i])
            take(out, all.v[j].i);
    if (!stack_order(ad, out->allocs, out->n))
        st = GM_ERR_NOMEM;
out_free:
    gm_free(pool);
    gm_free(pick);
    return st;
}

enum gm_status gm_bands_choose(const struct gm_analysis_device *ad, const struct gm_lod_axis *ax,
                               const struct gm_bands_opts *o, struct gm_bands *out,
                               struct gm_error *err)
{
    size_t n = ad ? ad->n_allocs : 0, max = o && o->max_bands ? o->max_bands : GM_BANDS_DEFAULT;
    bool windows = o && o->n_windows && o->per_window && ax->n_events;
    struct windows ws = {0, 0, NULL, NULL, NULL, NULL};
    float *xs = NULL;
    enum gm_status st;

    memset(out, 0, sizeof(*out));
    if (!n)
        return GM_OK;
    if (max > n)
        max = n;
    xs = event_xs(ax);
    out->allocs = gm_malloc(max * sizeof(*out->allocs));
    out->is_band = gm_calloc(n, 1);
    if ((ax->time && ax->n_events && ax->dev && !gm_lod_axis_keeps_x(ax) && !xs) || !out->allocs ||
        !out->is_band || (windows && !windows_init(&ws, ax, xs, o, max, n))) {
        st = GM_ERR_NOMEM;
        goto out_fail;
    }
    st = choose_whole(ad, ax, xs, max, windows ? &ws : NULL, out);
    if (st == GM_OK && windows)
        st = windows_take(&ws, ad, o->per_window, out);
    if (st != GM_OK)
        goto out_fail;
    windows_release(&ws);
    gm_free(xs);
    return GM_OK;
out_fail:
    windows_release(&ws);
    gm_free(xs);
    gm_bands_release(out);
    return gm_fail(err, st, GM_NO_OFFSET, "timeline bands: out of memory");
}

/* ---- what is not a band, by category ---- */

struct k_at {
    int64_t k;
    size_t i;
};

static int cmp_k_at(const void *a, const void *b)
{
    const struct k_at *x = a, *y = b;
    if (x->k != y->k)
        return x->k < y->k ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

/* alive after some event: a free after its alloc (a damaged file may say otherwise) */
static bool ever_alive(const struct gm_analysis_alloc *a)
{
    return a->free_event < 0 || a->free_event > a->alloc_event;
}

/* Where an event's first question at or after it is: for each block of 2^shift events
 * from event 0, the first question at or after the block's start; a look-up searches the
 * questions inside the block (blocks about as many as the questions, so about one). */
struct q_index {
    const struct k_at *q; /* in event order */
    size_t n;
    uint32_t *at;
    size_t n_blocks;
    unsigned shift;
};

static bool q_index_build(struct q_index *x, const struct k_at *q, size_t n)
{
    int64_t last = n ? q[n - 1].k : -1;
    size_t t = 0;
    x->q = q;
    x->n = n;
    x->shift = 0;
    while (last >= 0 && ((uint64_t)last >> x->shift) > n)
        x->shift++;
    x->n_blocks = last < 0 ? 0 : (size_t)((uint64_t)last >> x->shift) + 1;
    x->at = gm_malloc((x->n_blocks ? x->n_blocks : 1) * sizeof(*x->at));
    if (!x->at)
        return false;
    for (size_t b = 0; b < x->n_blocks; b++) {
        while (t < n && q[t].k < (int64_t)((uint64_t)b << x->shift))
            t++;
        x->at[b] = (uint32_t)t;
    }
    return true;
}

/* The first question at or after event k >= 0; n when none is. */
static size_t q_index_find(const struct q_index *x, int64_t k)
{
    size_t b = (size_t)((uint64_t)k >> x->shift), lo, hi;
    if (b >= x->n_blocks)
        return x->n; /* after the last question's block: after every question */
    /* between the first question of k's block and that of the next one (a block may hold
     * many questions at one event: a binary search) */
    lo = x->at[b];
    hi = b + 1 < x->n_blocks ? x->at[b + 1] : x->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (x->q[mid].k < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Each allocation that is not a band adds its bytes at the first question at or after its
 * alloc and takes them off at the first at or after its free; the running sum over the
 * questions in event order is then the rest at each.  The sums are modulo 2^64 in any
 * order, so this equals a sweep over the allocs and frees in event order without sorting
 * the frees. */
enum gm_status gm_bands_rest_at(const struct gm_analysis_device *ad, const struct gm_bands *b,
                                const int64_t *ks, size_t n, uint64_t (*out)[GM_CATEGORY_COUNT],
                                struct gm_error *err)
{
    size_t na = ad ? ad->n_allocs : 0, t = 0;
    struct k_at *q = gm_malloc((n ? n : 1) * sizeof(*q));
    uint64_t(*d)[GM_CATEGORY_COUNT] = gm_calloc(n ? n : 1, sizeof(*d)); /* per question */
    uint64_t cur[GM_CATEGORY_COUNT] = {0};
    struct q_index qx = {NULL, 0, NULL, 0, 0};
    bool sorted = true;

    for (size_t i = 0; q && i < n; i++) {
        q[i] = (struct k_at){ks[i], i};
        sorted = sorted && (i == 0 || ks[i - 1] <= ks[i]);
    }
    if (q && !sorted)
        qsort(q, n, sizeof(*q), cmp_k_at);
    if (!q || !d || !q_index_build(&qx, q, n)) {
        gm_free(q);
        gm_free(d);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "timeline bands: out of memory");
    }
    for (size_t i = 0; i < na && n; i++) {
        const struct gm_analysis_alloc *a = &ad->allocs[i];
        int cat = a->category < GM_CATEGORY_COUNT ? a->category : GM_CATEGORY_OTHER;
        size_t f;
        if (!ever_alive(a) || (b && b->is_band && b->is_band[i]))
            continue;
        /* the allocations are in alloc order (those from the start first) */
        while (t < n && q[t].k < a->alloc_event)
            t++;
        if (t == n)
            break;
        /* freed by the question its alloc adds at: never alive at a question (most
         * temporaries) */
        if (a->free_event >= 0 && a->free_event <= q[t].k)
            continue;
        d[t][cat] += a->bytes;
        if (a->free_event >= 0 && (f = q_index_find(&qx, a->free_event)) < n)
            d[f][cat] -= a->bytes;
    }
    for (size_t j = 0; j < n; j++) {
        uint64_t *o = out[q[j].i];
#pragma GCC unroll 8 /* a handful of categories, each sum kept in a register */
        for (int c = 0; c < GM_CATEGORY_COUNT; c++)
            o[c] = cur[c] += d[j][c];
    }
    gm_free(qx.at);
    gm_free(q);
    gm_free(d);
    return GM_OK;
}

/* The first of ks[0..n) (non-decreasing) at or after event k; n when none. */
static size_t first_at_or_after(const int64_t *ks, size_t n, int64_t k)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ks[mid] < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* A band is alive at the questions from the first at or after its alloc to the first at
 * or after its free (the questions in event order, a run of them): it is taken off that
 * run through a difference array, summed as the answers are written. */
enum gm_status gm_bands_rest_from(const struct gm_analysis_device *ad, const struct gm_bands *b,
                                  const int64_t *ks, size_t n, const uint64_t *all,
                                  uint64_t (*out)[GM_CATEGORY_COUNT], struct gm_error *err)
{
    uint64_t(*d)[GM_CATEGORY_COUNT];
    uint64_t cur[GM_CATEGORY_COUNT] = {0};
    for (size_t i = 1; i < n; i++)
        if (ks[i - 1] > ks[i])
            return gm_bands_rest_at(ad, b, ks, n, out, err);
    d = gm_calloc(n + 1, sizeof(*d)); /* per question, and past the last */
    if (!d)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "timeline bands: out of memory");
    for (size_t j = 0; b && ad && j < b->n; j++) {
        const struct gm_analysis_alloc *a = &ad->allocs[b->allocs[j]];
        int cat = a->category < GM_CATEGORY_COUNT ? a->category : GM_CATEGORY_OTHER;
        size_t lo, hi;
        if (!ever_alive(a))
            continue;
        lo = first_at_or_after(ks, n, a->alloc_event);
        hi = a->free_event < 0 ? n : first_at_or_after(ks, n, a->free_event);
        if (lo >= hi)
            continue;
        d[lo][cat] += a->bytes;
        d[hi][cat] -= a->bytes;
    }
    for (size_t q = 0; q < n; q++) {
        const uint64_t *v = all + q * GM_CATEGORY_COUNT;
#pragma GCC unroll 8 /* a handful of categories, each sum kept in a register */
        for (int c = 0; c < GM_CATEGORY_COUNT; c++)
            out[q][c] = v[c] - (cur[c] += d[q][c]);
    }
    gm_free(d);
    return GM_OK;
}

void gm_bands_release(struct gm_bands *b)
{
    if (!b)
        return;
    gm_free(b->allocs);
    gm_free(b->is_band);
    for (size_t w = 0; w < b->n_windows; w++)
        gm_free(b->windows[w].allocs);
    gm_free(b->windows);
    memset(b, 0, sizeof(*b));
}
