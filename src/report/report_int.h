/* SPDX-License-Identifier: MIT */
/* report_int.h - helpers shared by the report renderers (library-internal). */
#ifndef GM_REPORT_REPORT_INT_H
#define GM_REPORT_REPORT_INT_H

#include "gpumem/analysis.h"
#include "gpumem/json.h"
#include "gpumem/lod.h"
#include "gpumem/report.h"
#include "gpumem/snapshot.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* x positions of a device's events: microseconds since its first event when every event
 * has time_us, else the event index. */
struct gm_report_xmap {
    bool time;
    int64_t t0;
    const struct gm_snapshot_device *dev;
    size_t n;
};

/* One pass over the trace (whether every event has a time). */
void gm_report_xmap_init(struct gm_report_xmap *m, const struct gm_snapshot_device *d);
/* x of event k (-1: the initial state, at the first event); random access into the trace
 * (see gm_snapshot_event_at()), for the few moments a page names. */
double gm_report_x(const struct gm_report_xmap *m, int64_t k);
/* x of event k when the event is at hand (a pass over the trace). */
static inline double gm_report_x_of(const struct gm_report_xmap *m, int64_t k,
                                    const struct gm_snapshot_event *e)
{
    if (m->n == 0 || k < 0)
        return 0.0;
    return m->time ? (double)(e->time_us - m->t0) : (double)k;
}
/* x of the end of the trace. */
double gm_report_xend(const struct gm_report_xmap *m);
/* The bucket (0..n-1) of x on the axis [x0, x1] cut into n buckets.  time_us need not grow
 * monotonically in a damaged file, so x may fall outside the axis: it is clamped. */
unsigned gm_report_bucket(double x, double x0, double x1, unsigned n);

/* The points of a device's timeline in order, each with its x: point 0 is the initial
 * state (k -1, x 0), then one point after each event (gm_snapshot_walk underneath). */
struct gm_report_points {
    int64_t k;
    double x;
    uint64_t allocated, reserved;
    /* private */
    struct gm_snapshot_walk w_;
    const struct gm_report_xmap *m_;
    bool started_;
};

enum gm_status gm_report_points_init(struct gm_report_points *p, const struct gm_snapshot *snap,
                                     const struct gm_snapshot_device *d,
                                     const struct gm_snapshot_timeline *tl,
                                     const struct gm_report_xmap *m, struct gm_error *err);
/* The next point into *p; false after the last one. */
bool gm_report_points_next(struct gm_report_points *p);
void gm_report_points_release(struct gm_report_points *p);

/* ---- the HTML page (html.c, html_device.c, html_state.c) ---- */

/* What the renderers of one rank share. */
struct gm_report_ctx {
    const struct gm_snapshot *snap;
    const struct gm_analysis *an; /* may be NULL */
    const struct gm_report_opts *o;
    struct gm_json *w;
    uint8_t *stack_used; /* per snapshot stack id: the page names it */
    bool nomem;
};

static inline void gm_report_use_stack(struct gm_report_ctx *c, uint32_t id)
{
    if (id < c->snap->n_stacks)
        c->stack_used[id] = 1;
}

/* A number: integers exactly, the rest with 3 decimals (x positions). */
void gm_report_num(struct gm_json *w, double v);
/* A cudaStream_t as a decimal string (a JavaScript number would round it). */
void gm_report_stream(struct gm_json *w, uint64_t stream);

/* One device's object of the page data. */
enum gm_status gm_report_device(struct gm_report_ctx *c, const struct gm_snapshot_device *sd,
                                const struct gm_analysis_device *ad, struct gm_error *err);

/* The "segtl" (segment timeline), "marks" (moments named) and "state" (allocator state at
 * any event) keys of a device's object. */
enum gm_status gm_report_state(struct gm_report_ctx *c, const struct gm_snapshot_device *sd,
                               const struct gm_analysis_device *ad,
                               const struct gm_snapshot_timeline *tl, const struct gm_lod_axis *ax,
                               struct gm_error *err);

#endif
