/* SPDX-License-Identifier: MIT */
/* lod.h - pictures that cannot contradict the numbers: the x axis of a device's trace, and
 * level-of-detail series that keep, for every bucket of that axis, the exact minimum and
 * maximum of the step function they cover.
 *
 * A trace is a step function: the state after event k holds from the x of event k until
 * the x of the next event (x: microseconds since the first event when every event of the
 * device has time_us, else the event index; the initial state is at x 0).  A chart that
 * draws it in buckets (pixel columns, or the finest level the HTML page keeps) must never
 * draw a value that did not hold there, nor leave out one that did:
 *
 *   - a bucket covers [x0 + b*w, x0 + (b+1)*w), w = (x1 - x0) / n;
 *   - its values are those of the points (events) whose x falls in it, and the value
 *     carried in from the bucket before (the state after the last earlier point), which
 *     holds at the bucket's start unless a point falls exactly on it;
 *   - a bucket with no point holds the carried value alone: an idle gap is drawn at the
 *     level memory really had during it, never at a stale maximum;
 *   - points at one x (events in the same microsecond) all count, so a transient state is
 *     never lost: the maximum drawn over a range is the peak of that range at any width.
 *
 * Coarser levels are exact unions of finer ones (gm_lod_coarsen), so a pyramid and the
 * columns a page draws from it keep the same rule.  The HTML report's timeline, its
 * categories series (through the analysis' series, gm_analysis_device.points) and the
 * terminal plot are all built with these functions. */
#ifndef GPUMEM_LOD_H
#define GPUMEM_LOD_H

#include "gpumem/error.h"
#include "gpumem/snapshot.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

/* ---- the x axis of a device's trace ---- */

struct gm_lod_axis {
    bool time;       /* x is microseconds since t0_us (every event has time_us) */
    int64_t t0_us;   /* time_us of the first event when time, else 0 */
    size_t n_events; /* of the device */
    double x_end;    /* the end of the axis: after the last event, never equal to 0 */
    const struct gm_snapshot_device *dev; /* borrowed */
    /* private: with time, the x of every event when kept (gm_lod_axis_timeline()), owned:
     * 4 bytes an event while every x fits 32 bits, else 8 */
    uint32_t *x32_;
    int64_t *x64_;
};

/* The axis of 'dev': one pass over its trace (whether every event has a time). */
void gm_lod_axis_init(struct gm_lod_axis *a, const struct gm_snapshot_device *dev);

/* The same when the caller has counted, in a pass of its own, the events of 'dev' that
 * have a time ('n_timed'): no pass. */
void gm_lod_axis_init_counted(struct gm_lod_axis *a, const struct gm_snapshot_device *dev,
                              size_t n_timed);

/* NULL-safe: frees the x's gm_lod_axis_timeline() kept (an axis from gm_lod_axis_init()
 * keeps none and needs no release). */
void gm_lod_axis_release(struct gm_lod_axis *a);

/* Whether 'a' keeps the x of every event (then gm_lod_axis_x() reads no trace). */
static inline bool gm_lod_axis_keeps_x(const struct gm_lod_axis *a)
{
    return a->x32_ || a->x64_;
}

/* time_us - t0_us of event k (0 <= k < a->n_events) of an axis that keeps its x's. */
static inline int64_t gm_lod_axis_kept_us(const struct gm_lod_axis *a, size_t k)
{
    return a->x32_ ? (int64_t)a->x32_[k] : a->x64_[k];
}

/* The x's an axis keeps in 32 bits (time_us - t0_us of each event), else NULL: for loops
 * that read them with no test per event (gm_lod_axis_kept_x() reads either width). */
static inline const uint32_t *gm_lod_axis_x32(const struct gm_lod_axis *a)
{
    return a->x32_;
}

/* x of event k (0 <= k < a->n_events) of an axis that keeps them: gm_lod_axis_x() without
 * its checks, for loops over many events. */
static inline double gm_lod_axis_kept_x(const struct gm_lod_axis *a, size_t k)
{
    return a->x32_ ? (double)a->x32_[k] : (double)a->x64_[k];
}

/* x of event k (-1: the initial state, at x 0); random access into the trace (at most
 * GM_SNAPSHOT_CHECKPOINT events decoded) unless the axis keeps its x's, for the few
 * moments a caller names. */
double gm_lod_axis_x(const struct gm_lod_axis *a, int64_t k);

/* x of a time on a time axis: microseconds since its first event (gm_snapshot_span_us(); a
 * span beyond int64, which a file may hold, is taken in double rather than saturated). */
static inline double gm_lod_axis_x_of_time(const struct gm_lod_axis *a, int64_t time_us)
{
    int64_t v;
    if (!gm_snapshot_span_us(time_us, a->t0_us, &v))
        return (double)time_us - (double)a->t0_us;
    return (double)v;
}

/* The least time whose x on time axis 'a' (gm_lod_axis_x_of_time()) reaches x, into *t_us;
 * false when no time in int64 does, or x is outside [-2^52, 2^52] (where the x of a time,
 * a double, may round and no least time is told). */
static inline bool gm_lod_axis_first_time_at(const struct gm_lod_axis *a, double x, int64_t *t_us)
{
    /* here x_of_time(t) is t - t0 exactly: the least whole number of microseconds at or
     * above x, from t0 (only then x itself is read as a whole number) */
    if (!(x >= -4503599627370496.0 && x <= 4503599627370496.0)) /* 2^52 */
        return false;
    int64_t d = (int64_t)x;
    d += (double)d < x;
    if (d > 0 ? a->t0_us > INT64_MAX - d : a->t0_us < INT64_MIN - d)
        return false;
    *t_us = a->t0_us + d;
    return true;
}

/* x of each event ks[i] (any order; the values gm_lod_axis_x() takes) into xs[i], in one
 * walk of the trace up to the largest (none when the axis keeps its x's): for many
 * moments, where gm_lod_axis_x() would decode up to a checkpoint's worth of events for
 * each.  Returns GM_OK, or GM_ERR_NOMEM with 'err'
 * (may be NULL) filled in. */
enum gm_status gm_lod_axis_xs(const struct gm_lod_axis *a, const int64_t *ks, double *xs, size_t n,
                              struct gm_error *err);

/* x of event k when the event 'e' is at hand (a pass over the trace). */
static inline double gm_lod_axis_x_of(const struct gm_lod_axis *a, int64_t k,
                                      const struct gm_snapshot_event *e)
{
    if (a->n_events == 0 || k < 0)
        return 0.0;
    return a->time ? gm_lod_axis_x_of_time(a, e->time_us) : (double)k;
}

/* ---- level-of-detail series ---- */

struct gm_lod_bucket {
    uint64_t min;   /* the least value that holds in the bucket */
    uint64_t max;   /* the most */
    uint64_t last;  /* the value at the bucket's end (carried into the next one) */
    int64_t kmin;   /* the point where min first holds (-1: the initial state) */
    int64_t kmax;   /* the point where max first holds */
    int64_t klast;  /* the point whose value 'last' is */
    uint32_t n;     /* points whose x falls in the bucket (0: it holds the carried value) */
    uint32_t zero_; /* always 0: the bucket has no padding, so that a copy or a comparison of
                     * whole buckets covers defined bytes only */
};

struct gm_lod {
    double x0, x1; /* the axis range cut into n buckets */
    unsigned n;
    struct gm_lod_bucket *b; /* n buckets, owned */
    /* private */
    unsigned cur_;
    bool any_;
    struct gm_lod_bucket *cur_b_; /* &b[cur_] */
};

/* What gm_lod_add() made of a point. */
enum gm_lod_flags {
    GM_LOD_MIN = 1 << 0, /* the point is now its bucket's minimum (the first to reach it) */
    GM_LOD_MAX = 1 << 1, /* its maximum */
    GM_LOD_NEW = 1 << 2, /* the first point of its bucket: the bucket before it is complete */
};

/* Cut [x0, x1] into n >= 1 buckets, all empty.  Errors: GM_ERR_NOMEM, GM_ERR_INVALID
 * (n == 0). */
enum gm_status gm_lod_init(struct gm_lod *l, double x0, double x1, unsigned n,
                           struct gm_error *err);

/* The bucket of x; x outside [x0, x1] (time_us need not grow in a damaged file) is clamped
 * to the first or last bucket. */
unsigned gm_lod_bucket_of(const struct gm_lod *l, double x);

/* The end of bucket 'b' for points at whole x's (microseconds, event indexes) from x on,
 * x falling in b or before: the least whole x after which gm_lod_bucket_of() gives a later
 * bucket, so that every whole x below it falls in b or before (the bucket grows with x);
 * INFINITY when b is the last bucket, -1 when the axis is too long for whole doubles or
 * the border cannot be found (then every x is looked up). */
double gm_lod_bucket_end(const struct gm_lod *l, unsigned b, double x);

/* The bucket gm_lod_add() would put the next point at x into (gm_lod_bucket_of(), but
 * never before the bucket of the point before). */
unsigned gm_lod_peek(const struct gm_lod *l, double x);

/* Add the next point: value v holds from x on (until the next point), after event k.
 * Points come in the order of the trace; a point whose x falls before the bucket of the
 * point before it (a damaged file) counts in that bucket.  Returns enum gm_lod_flags. */
unsigned gm_lod_add(struct gm_lod *l, double x, int64_t k, uint64_t v);

/* gm_lod_add_here()'s rule on bucket 'b' itself (the series' current one, or a copy of it
 * the caller holds over a run of points and writes back). */
static inline unsigned gm_lod_bucket_add(struct gm_lod_bucket *b, int64_t k, uint64_t v)
{
    unsigned flags = 0;
    if (v < b->min) {
        b->min = v;
        b->kmin = k;
        flags |= GM_LOD_MIN;
    }
    if (v > b->max) {
        b->max = v;
        b->kmax = k;
        flags |= GM_LOD_MAX;
    }
    b->last = v;
    b->klast = k;
    b->n++;
    return flags;
}

/* gm_lod_add() of a point that falls in the bucket of the point before (gm_lod_peek() gave
 * that bucket; a point was added before): no lookup, for loops over many points. */
static inline unsigned gm_lod_add_here(struct gm_lod *l, int64_t k, uint64_t v)
{
    return gm_lod_bucket_add(l->cur_b_, k, v);
}

/* The bucket gm_lod_add_here() adds to (that of the last point added). */
static inline struct gm_lod_bucket *gm_lod_here(struct gm_lod *l)
{
    return l->cur_b_;
}

/* After the last point: the buckets after it hold its value.  A series with no point at
 * all has every bucket at 0 with k -1. */
void gm_lod_finish(struct gm_lod *l);

/* 'dst' (initialised here) with src->n / factor buckets, each the exact union of 'factor'
 * consecutive buckets of 'src' (finished); src->n must be a multiple of factor.  Errors:
 * GM_ERR_NOMEM, GM_ERR_INVALID. */
enum gm_status gm_lod_coarsen(struct gm_lod *dst, const struct gm_lod *src, unsigned factor,
                              struct gm_error *err);

/* NULL-safe; the struct may be initialised again. */
void gm_lod_release(struct gm_lod *l);

/* ---- the allocated and reserved bytes of a device ---- */

/* The timeline of device 'dev' (gm_snapshot_walk: the allocated and reserved bytes after
 * each event, the initial state first) in 'n' buckets over [0, a->x_end]: 'alloc' and
 * 'res' are initialised here, finished, and owned by the caller (gm_lod_release()).  'tl'
 * is the device's timeline, 'a' its axis.  Errors: GM_ERR_NOMEM, GM_ERR_LIMIT, GM_ERR_INVALID
 * (n == 0). */
enum gm_status gm_lod_timeline(const struct gm_snapshot *snap, const struct gm_snapshot_device *dev,
                               const struct gm_snapshot_timeline *tl, const struct gm_lod_axis *a,
                               unsigned n, struct gm_lod *alloc, struct gm_lod *res,
                               struct gm_error *err);

/* The axis of 'dev' (as gm_lod_axis_init()) that keeps the x of every event, so that
 * gm_lod_axis_x() and gm_lod_axis_xs() read no trace, and its timeline (as
 * gm_lod_timeline(): 'alloc' and 'res' in 'n' buckets), from one walk of the trace when
 * every event has a time (a trace without, from the two passes of gm_lod_axis_init() and
 * gm_lod_timeline(), keeping nothing: x is the index).  The caller releases 'a' with
 * gm_lod_axis_release() and the series with gm_lod_release().  Errors: GM_ERR_NOMEM,
 * GM_ERR_LIMIT, GM_ERR_INVALID (n == 0). */
enum gm_status gm_lod_axis_timeline(struct gm_lod_axis *a, const struct gm_snapshot *snap,
                                    const struct gm_snapshot_device *dev,
                                    const struct gm_snapshot_timeline *tl, unsigned n,
                                    struct gm_lod *alloc, struct gm_lod *res, struct gm_error *err);

/* The buckets of the finest level of detail a trace is drawn at (the HTML report's
 * timeline): two a point (events cluster in time), within 1024 and 65536. */
unsigned gm_lod_finest_buckets(size_t n_events);

/* ---- the same timeline from a pass that has the totals at hand ----
 *
 * What gm_lod_axis_timeline() makes (the axis keeping every x on a time axis, and the
 * allocated and reserved series), built by a pass over the trace of the caller's own that
 * already has the allocated and reserved bytes after each event (the analysis' series), so
 * that nothing walks the trace for them again:
 *
 *   gm_lod_totals_begin(&t, dev, n_timed, n, allocated0, reserved0, err);
 *   for every event k of dev, in order: gm_lod_totals_add(&t, k, e, allocated, reserved);
 *   gm_lod_totals_end(&t);  ...  gm_lod_totals_release(&t);
 *
 * The bytes are those of gm_snapshot_walk (its initial state first). */
struct gm_lod_totals {
    struct gm_lod_axis axis; /* keeps every x when the axis is time (unless out of memory) */
    struct gm_lod alloc;     /* allocated bytes, finished by gm_lod_totals_end() */
    struct gm_lod res;       /* reserved bytes */
    /* private */
    double x_next_;
    /* an event at a whole x below it (x kept in 32 bits) falls in the bucket of the one
     * before: ceil(x_next_) within [0, 2^32], 0 while the axis keeps no 32-bit x's */
    uint64_t next_u_;
};

/* Begin the totals of 'dev', whose events with a time the caller counted ('n_timed', as
 * gm_lod_axis_init_counted() takes it), in 'n' buckets, from the initial state.  Errors:
 * GM_ERR_NOMEM, GM_ERR_INVALID (n == 0); nothing to release then. */
enum gm_status gm_lod_totals_begin(struct gm_lod_totals *t, const struct gm_snapshot_device *dev,
                                   size_t n_timed, unsigned n, uint64_t allocated,
                                   uint64_t reserved, struct gm_error *err);

/* gm_lod_totals_add() in every case. */
void gm_lod_totals_step(struct gm_lod_totals *t, int64_t k, const struct gm_snapshot_event *e,
                        uint64_t allocated, uint64_t reserved);

/* The state after event k ('e', its time read; every event in trace order, from 0).  Most
 * events fall in the bucket of the one before with an x kept in 32 bits: no call then. */
static inline void gm_lod_totals_add(struct gm_lod_totals *t, int64_t k,
                                     const struct gm_snapshot_event *e, uint64_t allocated,
                                     uint64_t reserved)
{
    int64_t v;
    /* v < 0 is beyond every bound as unsigned */
    if (gm_snapshot_span_us(e->time_us, t->axis.t0_us, &v) && (uint64_t)v < t->next_u_) {
        t->axis.x32_[k] = (uint32_t)v;
        gm_lod_add_here(&t->alloc, k, allocated);
        /* the reserved bytes seldom change: an unchanged value moves only the bucket's
         * point count and last point, which are the allocated series' own (one point an
         * event in both) and copied from it before the bucket is left or read */
        if (reserved != t->res.cur_b_->last)
            gm_lod_add_here(&t->res, k, reserved);
        return;
    }
    gm_lod_totals_step(t, k, e, allocated, reserved);
}

/* Whether 'reserved' is the value of the reserved series' last point (the event before's). */
static inline bool gm_lod_totals_reserved_is(const struct gm_lod_totals *t, uint64_t reserved)
{
    return t->res.cur_b_->last == reserved;
}

/* gm_lod_totals_add() when gm_lod_totals_reserved_is(t, reserved): it then moves nothing of
 * the reserved series, and is not compared (a run of events that change only the allocated
 * bytes; after it, 'reserved' is still the last point's). */
static inline void gm_lod_totals_add_same_reserved(struct gm_lod_totals *t, int64_t k,
                                                   const struct gm_snapshot_event *e,
                                                   uint64_t allocated, uint64_t reserved)
{
    int64_t v;
    if (gm_snapshot_span_us(e->time_us, t->axis.t0_us, &v) && (uint64_t)v < t->next_u_) {
        t->axis.x32_[k] = (uint32_t)v;
        gm_lod_add_here(&t->alloc, k, allocated);
        return;
    }
    gm_lod_totals_step(t, k, e, allocated, reserved);
}

/* After the last event. */
void gm_lod_totals_end(struct gm_lod_totals *t);

/* NULL-safe; releases the axis and both series. */
void gm_lod_totals_release(struct gm_lod_totals *t);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
