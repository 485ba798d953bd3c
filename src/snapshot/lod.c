/* SPDX-License-Identifier: MIT */
/* lod.c - the x axis of a device's trace and level-of-detail series that keep each
 * bucket's exact minimum and maximum (the rule is stated in gpumem/lod.h).
 *
 * A point's position on the axis is t = (x - x0) / (x1 - x0), then t * n: computed in that
 * order, a level with 2^j times the buckets of another puts every point in a sub-bucket of
 * the coarse bucket it falls in (multiplying by a power of two is exact), so a coarsened
 * level equals the level built directly at that resolution. */
#include "gpumem/lod.h"

#include "base/big.h"
#include "snapshot/snapshot_int.h"

#include "gpumem/arena.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the axis ---- */

void gm_lod_axis_init_counted(struct gm_lod_axis *a, const struct gm_snapshot_device *dev,
                              size_t n_timed)
{
    struct gm_snapshot_event e;
    memset(a, 0, sizeof(*a));
    a->dev = dev;
    a->n_events = dev->n_events;
    a->time = dev->n_events > 0 && n_timed == dev->n_events;
    if (a->time && gm_snapshot_event_kept(dev, 0, &e))
        a->t0_us = e.time_us;
    else
        a->time = false;
    {
        double x = gm_lod_axis_x(a, (int64_t)a->n_events - 1);
        /* an empty range would divide by zero when drawn; without time the state after
         * the last event holds for one event's width */
        a->x_end = a->time && x > 0 ? x : x + 1.0;
    }
}

void gm_lod_axis_init(struct gm_lod_axis *a, const struct gm_snapshot_device *dev)
{
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    size_t n_timed = 0;
    gm_snapshot_cursor_init(&c, dev, 0);
    while ((e = gm_snapshot_cursor_next(&c)) != NULL) {
        if (!(e->flags & GM_EVENT_HAS_TIME))
            break;
        n_timed++;
    }
    gm_lod_axis_init_counted(a, dev, n_timed);
}

void gm_lod_axis_release(struct gm_lod_axis *a)
{
    if (!a)
        return;
    gm_big_free(a->x32_, a->n_events * sizeof(*a->x32_));
    gm_big_free(a->x64_, a->n_events * sizeof(*a->x64_));
    a->x32_ = NULL;
    a->x64_ = NULL;
}

double gm_lod_axis_x(const struct gm_lod_axis *a, int64_t k)
{
    struct gm_snapshot_event e;
    if (a->n_events == 0 || k < 0)
        return 0.0;
    if ((size_t)k >= a->n_events)
        k = (int64_t)a->n_events - 1;
    if (gm_lod_axis_keeps_x(a))
        return gm_lod_axis_kept_x(a, (size_t)k);
    if (a->time && gm_snapshot_event_kept(a->dev, (size_t)k, &e))
        return gm_lod_axis_x_of_time(a, e.time_us);
    return (double)k;
}

struct axis_query {
    int64_t k; /* the event, clamped to the trace */
    size_t i;  /* where its x goes */
};

static int cmp_query(const void *pa, const void *pb)
{
    const struct axis_query *p = pa, *q = pb;
    return p->k < q->k ? -1 : p->k > q->k;
}

enum gm_status gm_lod_axis_xs(const struct gm_lod_axis *a, const int64_t *ks, double *xs, size_t n,
                              struct gm_error *err)
{
    struct axis_query *q;
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e = NULL;
    size_t m = 0;
    /* a random access decodes about half a checkpoint's worth of events and a batch; below
     * that many events per question, questions one by one cost less than the walk */
    if (!a->time || a->n_events == 0 || n * GM_SNAPSHOT_CHECKPOINT < a->n_events ||
        gm_lod_axis_keeps_x(a)) {
        for (size_t i = 0; i < n; i++)
            xs[i] = gm_lod_axis_x(a, ks[i]);
        return GM_OK;
    }
    q = gm_malloc((n ? n : 1) * sizeof(*q));
    if (!q)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "level of detail: out of memory");
    for (size_t i = 0; i < n; i++) {
        if (ks[i] < 0) {
            xs[i] = 0.0;
            continue;
        }
        q[m].k = (size_t)ks[i] >= a->n_events ? (int64_t)a->n_events - 1 : ks[i];
        q[m++].i = i;
    }
    qsort(q, m, sizeof(*q), cmp_query);
    gm_snapshot_cursor_init(&c, a->dev, 0);
    for (size_t j = 0; j < m; j++) {
        while ((e == NULL || (int64_t)c.index < q[j].k) &&
               (e = gm_snapshot_cursor_next(&c)) != NULL)
            ;
        /* a trace that ends early (it cannot: n_events are there) reads as gm_lod_axis_x()'s
         * fallback, the index */
        xs[q[j].i] =
            e && (int64_t)c.index == q[j].k ? gm_lod_axis_x_of(a, q[j].k, e) : (double)q[j].k;
    }
    gm_free(q);
    return GM_OK;
}

/* ---- buckets ---- */

enum gm_status gm_lod_init(struct gm_lod *l, double x0, double x1, unsigned n, struct gm_error *err)
{
    memset(l, 0, sizeof(*l));
    if (n == 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "level of detail: no bucket");
    /* the finest level of a long trace is megabytes (the report's totals: two of 65536
     * buckets, 3.7 MB each): made by base/big.h, a mapping populated at once, rather than
     * fresh pages faulted in one by one as the points fill them */
    l->b = gm_big_zalloc((size_t)n * sizeof(*l->b));
    if (!l->b)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "level of detail: out of memory");
    l->x0 = x0;
    l->x1 = x1;
    l->n = n;
    l->cur_b_ = l->b;
    return GM_OK;
}

/* The position of x in buckets (bucket b covers [b, b+1)); never NaN. */
static double position(const struct gm_lod *l, double x)
{
    double t = l->x1 > l->x0 ? (x - l->x0) / (l->x1 - l->x0) : 0.0;
    double p = t * l->n;
    return p > 0 ? p : 0.0; /* also NaN -> 0 */
}

static unsigned bucket_at(const struct gm_lod *l, double p)
{
    return p >= l->n ? l->n - 1 : (unsigned)p;
}

unsigned gm_lod_bucket_of(const struct gm_lod *l, double x)
{
    return bucket_at(l, position(l, x));
}

unsigned gm_lod_peek(const struct gm_lod *l, double x)
{
    unsigned b = gm_lod_bucket_of(l, x);
    return l->any_ && b < l->cur_ ? l->cur_ : b;
}

double gm_lod_bucket_end(const struct gm_lod *l, unsigned b, double x)
{
    const double whole = 9007199254740992.0; /* 2^53 */
    double c;
    if (b + 1 >= l->n)
        return INFINITY; /* every later point counts in the last bucket */
    if (!(l->x1 > l->x0) || !(l->x0 > -whole) || !(l->x1 < whole) || !(x < whole))
        return -1;
    /* where bucket b + 1 starts, then the whole x's beside it: the rounding of position()
     * moves the border by a step at most */
    c = ceil(l->x0 + (l->x1 - l->x0) * ((double)(b + 1) / l->n));
    for (int i = 0; gm_lod_bucket_of(l, c) <= b; i++, c += 1)
        if (i == 8)
            return -1;
    for (int i = 0; c - 1 > x && gm_lod_bucket_of(l, c - 1) > b; i++, c -= 1)
        if (i == 8)
            return -1;
    return c;
}

/* A bucket holding only the value carried from 'p' (its n and zero_ 0, as in the buckets
 * gm_lod_init() makes: they are copied whole, and compared whole by the tests). */
static struct gm_lod_bucket carried(const struct gm_lod_bucket *p)
{
    struct gm_lod_bucket c = {.min = p->last,
                              .max = p->last,
                              .last = p->last,
                              .kmin = p->klast,
                              .kmax = p->klast,
                              .klast = p->klast};
    return c;
}

_Static_assert(sizeof(struct gm_lod_bucket) == 6 * 8 + 2 * 4, "a bucket has no padding");

unsigned gm_lod_add(struct gm_lod *l, double x, int64_t k, uint64_t v)
{
    double p = position(l, x);
    unsigned bi = bucket_at(l, p);
    struct gm_lod_bucket *b;

    /* the bucket of the point before, or time going backwards: the point counts where the
     * trace is */
    if (l->any_ && bi <= l->cur_)
        return gm_lod_add_here(l, k, v);
    if (l->any_) {
        const struct gm_lod_bucket *prev = &l->b[l->cur_];
        /* (made once and copied whole: at the finest level a point often skips buckets) */
        const struct gm_lod_bucket c = carried(prev);
        for (unsigned u = l->cur_ + 1; u < bi; u++)
            l->b[u] = c;
        /* the value before this point holds at the bucket's start unless the point is
         * exactly there */
        if (p > (double)bi) {
            l->b[bi] = c;
            l->cur_ = bi;
            l->cur_b_ = &l->b[bi];
            return GM_LOD_NEW | gm_lod_add_here(l, k, v);
        }
    }
    l->cur_ = bi;
    l->cur_b_ = &l->b[bi];
    l->any_ = true;
    b = &l->b[bi];
    b->min = b->max = b->last = v;
    b->kmin = b->kmax = b->klast = k;
    b->n = 1;
    return GM_LOD_NEW | GM_LOD_MIN | GM_LOD_MAX;
}

void gm_lod_finish(struct gm_lod *l)
{
    if (!l->b)
        return;
    if (!l->any_) {
        for (unsigned u = 0; u < l->n; u++) {
            memset(&l->b[u], 0, sizeof(l->b[u]));
            l->b[u].kmin = l->b[u].kmax = l->b[u].klast = -1;
        }
        return;
    }
    {
        const struct gm_lod_bucket c = carried(&l->b[l->cur_]);
        for (unsigned u = l->cur_ + 1; u < l->n; u++)
            l->b[u] = c;
    }
}

enum gm_status gm_lod_coarsen(struct gm_lod *dst, const struct gm_lod *src, unsigned factor,
                              struct gm_error *err)
{
    enum gm_status st;
    if (factor == 0 || src->n % factor != 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "level of detail: %u buckets do not split by %u", src->n, factor);
    if ((st = gm_lod_init(dst, src->x0, src->x1, src->n / factor, err)) != GM_OK)
        return st;
    for (unsigned j = 0; j < dst->n; j++) {
        struct gm_lod_bucket *d = &dst->b[j];
        *d = src->b[j * factor];
        for (unsigned i = 1; i < factor; i++) {
            const struct gm_lod_bucket *s = &src->b[j * factor + i];
            if (s->min < d->min) {
                d->min = s->min;
                d->kmin = s->kmin;
            }
            if (s->max > d->max) {
                d->max = s->max;
                d->kmax = s->kmax;
            }
            d->last = s->last;
            d->klast = s->klast;
            d->n += s->n;
        }
    }
    dst->cur_ = src->cur_ / factor;
    dst->cur_b_ = &dst->b[dst->cur_];
    dst->any_ = src->any_;
    return GM_OK;
}

void gm_lod_release(struct gm_lod *l)
{
    if (!l)
        return;
    gm_big_free(l->b, (size_t)l->n * sizeof(*l->b));
    memset(l, 0, sizeof(*l));
}

/* ---- the allocated and reserved bytes of a device ---- */

/* The point after event k into the allocated and reserved series, which share their buckets
 * (one axis range, one count) and their points: while the points stay in the bucket of the
 * point before (several events a bucket at the finest level the page keeps), one comparison
 * with its end (*x_next, gm_lod_bucket_end()) and no lookup. */
static inline void add_both(struct gm_lod *alloc, struct gm_lod *res, double x, int64_t k,
                            uint64_t allocated, uint64_t reserved, double *x_next)
{
    if (x < *x_next) {
        gm_lod_add_here(alloc, k, allocated);
        gm_lod_add_here(res, k, reserved);
        return;
    }
    gm_lod_add(alloc, x, k, allocated);
    gm_lod_add(res, x, k, reserved);
    *x_next = gm_lod_bucket_end(alloc, alloc->cur_, x);
}

enum gm_status gm_lod_timeline(const struct gm_snapshot *snap, const struct gm_snapshot_device *dev,
                               const struct gm_snapshot_timeline *tl, const struct gm_lod_axis *a,
                               unsigned n, struct gm_lod *alloc, struct gm_lod *res,
                               struct gm_error *err)
{
    struct gm_snapshot_walk w;
    const struct gm_snapshot_event *e;
    enum gm_status st;
    double x_next = -1; /* the end of the bucket of the point before (add_both()) */

    memset(res, 0, sizeof(*res));
    if ((st = gm_lod_init(alloc, 0.0, a->x_end, n, err)) != GM_OK)
        return st;
    if ((st = gm_lod_init(res, 0.0, a->x_end, n, err)) != GM_OK ||
        (st = gm_snapshot_walk_init(&w, snap, dev, tl, err)) != GM_OK) {
        gm_lod_release(alloc);
        gm_lod_release(res);
        return st;
    }
    gm_lod_add(alloc, 0.0, -1, w.allocated);
    gm_lod_add(res, 0.0, -1, w.reserved);
    while ((e = gm_snapshot_walk_next(&w)) != NULL) {
        int64_t k = (int64_t)w.cur.index;
        double x = gm_lod_axis_x_of(a, k, e);
        add_both(alloc, res, x, k, w.allocated, w.reserved, &x_next);
    }
    gm_snapshot_walk_release(&w);
    gm_lod_finish(alloc);
    gm_lod_finish(res);
    return GM_OK;
}

/* ---- the axis that keeps every x, and the timeline, in one walk ---- */

/* x 'v' of event k into the kept x's: 32 bits while every x fits, else all of them moved to
 * 64.  False when out of memory. */
static bool keep_x(struct gm_lod_axis *a, size_t k, int64_t v)
{
    if (a->x32_ && (v < 0 || v > (int64_t)UINT32_MAX)) {
        a->x64_ = gm_big_realloc(NULL, 0, a->n_events * sizeof(*a->x64_));
        if (!a->x64_)
            return false;
        for (size_t i = 0; i < k; i++)
            a->x64_[i] = a->x32_[i];
        gm_big_free(a->x32_, a->n_events * sizeof(*a->x32_));
        a->x32_ = NULL;
    }
    if (a->x32_)
        a->x32_[k] = (uint32_t)v;
    else
        a->x64_[k] = v;
    return true;
}

/* ---- the timeline from a pass that has the totals at hand ---- */

unsigned gm_lod_finest_buckets(size_t n_events)
{
    unsigned nb = 1024;
    while (nb < 65536u && (size_t)nb < 2 * (n_events + 1))
        nb *= 2;
    return nb;
}

enum gm_status gm_lod_totals_begin(struct gm_lod_totals *t, const struct gm_snapshot_device *dev,
                                   size_t n_timed, unsigned n, uint64_t allocated,
                                   uint64_t reserved, struct gm_error *err)
{
    return snap_lod_totals_begin_in(t, dev, n_timed, n, allocated, reserved, NULL, 0, err);
}

enum gm_status snap_lod_totals_begin_in(struct gm_lod_totals *t,
                                        const struct gm_snapshot_device *dev, size_t n_timed,
                                        unsigned n, uint64_t allocated, uint64_t reserved,
                                        void *mem, size_t mem_bytes, struct gm_error *err)
{
    enum gm_status st;
    memset(t, 0, sizeof(*t));
    gm_lod_axis_init_counted(&t->axis, dev, n_timed);
    /* without room for the x's the axis keeps none and reads them from the trace (an array
     * of 4 bytes an event: a mapping of its own, populated at once, base/big.h; made in 'mem'
     * when given, whose pages were written before: a page's first write is what costs, big.h) */
    if (t->axis.time) {
        t->axis.x32_ = gm_big_realloc(mem, mem_bytes, t->axis.n_events * sizeof(*t->axis.x32_));
        if (t->axis.x32_)
            mem = NULL;
    }
    gm_big_free(mem, mem_bytes);
    if ((st = gm_lod_init(&t->alloc, 0.0, t->axis.x_end, n, err)) != GM_OK ||
        (st = gm_lod_init(&t->res, 0.0, t->axis.x_end, n, err)) != GM_OK) {
        gm_lod_totals_release(t);
        return st;
    }
    t->x_next_ = -1;
    gm_lod_add(&t->alloc, 0.0, -1, allocated);
    gm_lod_add(&t->res, 0.0, -1, reserved);
    return GM_OK;
}

/* gm_lod_totals_add()'s bound (gm_lod_totals.next_u_): a whole v >= 0 is below x_next_
 * exactly when it is below ceil(x_next_), and below 2^32 when it fits the 32-bit x's. */
static uint64_t next_bound(const struct gm_lod_totals *t)
{
    if (!t->axis.x32_ || !(t->x_next_ > 0))
        return 0;
    if (t->x_next_ >= 4294967296.0)
        return UINT64_C(4294967296);
    return (uint64_t)ceil(t->x_next_);
}

/* The reserved series' current bucket as gm_lod_add_here() would have left it for the
 * points gm_lod_totals_add() passed over (their value its last): the count and the last
 * point of the allocated series' bucket, which had every point. */
static void res_catch_up(struct gm_lod_totals *t)
{
    t->res.cur_b_->klast = t->alloc.cur_b_->klast;
    t->res.cur_b_->n = t->alloc.cur_b_->n;
}

void gm_lod_totals_step(struct gm_lod_totals *t, int64_t k, const struct gm_snapshot_event *e,
                        uint64_t allocated, uint64_t reserved)
{
    struct gm_lod_axis *a = &t->axis;
    res_catch_up(t);
    if (gm_lod_axis_keeps_x(a)) {
        int64_t v;
        if (gm_snapshot_span_us(e->time_us, a->t0_us, &v) && keep_x(a, (size_t)k, v)) {
            add_both(&t->alloc, &t->res, (double)v, k, allocated, reserved, &t->x_next_);
            t->next_u_ = next_bound(t);
            return;
        }
        /* the x's kept are exact int64 differences: a span beyond int64 (or no memory for
         * them) and the axis keeps none; its x's are then read from the trace, the same
         * values */
        gm_lod_axis_release(a);
    }
    add_both(&t->alloc, &t->res, gm_lod_axis_x_of(a, k, e), k, allocated, reserved, &t->x_next_);
    t->next_u_ = next_bound(t);
}

void gm_lod_totals_end(struct gm_lod_totals *t)
{
    if (t->res.b)
        res_catch_up(t);
    gm_lod_finish(&t->alloc);
    gm_lod_finish(&t->res);
}

void gm_lod_totals_release(struct gm_lod_totals *t)
{
    if (!t)
        return;
    gm_lod_axis_release(&t->axis);
    gm_lod_release(&t->alloc);
    gm_lod_release(&t->res);
}

/* gm_lod_axis_timeline() on a time axis: the walk's totals into gm_lod_totals; *timed false
 * when an event has no time after all, or the trace ends early (nothing kept then). */
static enum gm_status timed_walk(struct gm_lod_axis *a, const struct gm_snapshot *snap,
                                 const struct gm_snapshot_device *dev,
                                 const struct gm_snapshot_timeline *tl, unsigned n,
                                 struct gm_lod *alloc, struct gm_lod *res, bool *timed,
                                 struct gm_error *err)
{
    struct gm_lod_totals t;
    struct gm_snapshot_walk w;
    const struct gm_snapshot_event *e;
    enum gm_status st;
    size_t seen = 0;

    if ((st = gm_snapshot_walk_init(&w, snap, dev, tl, err)) != GM_OK)
        return st;
    if ((st = gm_lod_totals_begin(&t, dev, dev->n_events, n, w.allocated, w.reserved, err)) !=
        GM_OK) {
        gm_snapshot_walk_release(&w);
        return st;
    }
    while (seen < dev->n_events && (e = gm_snapshot_walk_next(&w)) != NULL) {
        if (!(e->flags & GM_EVENT_HAS_TIME))
            break;
        gm_lod_totals_add(&t, (int64_t)w.cur.index, e, w.allocated, w.reserved);
        seen++;
    }
    gm_snapshot_walk_release(&w);
    *timed = seen == dev->n_events;
    if (!*timed) {
        gm_lod_totals_release(&t);
        return GM_OK;
    }
    gm_lod_totals_end(&t);
    *a = t.axis;
    *alloc = t.alloc;
    *res = t.res;
    return GM_OK;
}

enum gm_status gm_lod_axis_timeline(struct gm_lod_axis *a, const struct gm_snapshot *snap,
                                    const struct gm_snapshot_device *dev,
                                    const struct gm_snapshot_timeline *tl, unsigned n,
                                    struct gm_lod *alloc, struct gm_lod *res, struct gm_error *err)
{
    struct gm_snapshot_event first, last;
    /* a time axis when the first and the last event have a time and the walk finds no
     * event without */
    if (dev->n_events > 0 && gm_snapshot_event_kept(dev, 0, &first) &&
        (first.flags & GM_EVENT_HAS_TIME) &&
        gm_snapshot_event_kept(dev, dev->n_events - 1, &last) && (last.flags & GM_EVENT_HAS_TIME)) {
        bool timed = false;
        enum gm_status st = timed_walk(a, snap, dev, tl, n, alloc, res, &timed, err);
        if (st != GM_OK || timed)
            return st;
    }
    gm_lod_axis_init(a, dev);
    return gm_lod_timeline(snap, dev, tl, a, n, alloc, res, err);
}
