/* SPDX-License-Identifier: MIT */
/* frames.c - where on the x axis an event is drawn, and the points of the timeline (which
 * frames are the user's is the snapshot's rule: gm_snapshot_frame_is_user()). */
#include "report/report_int.h"

#include <string.h>

void gm_report_xmap_init(struct gm_report_xmap *m, const struct gm_snapshot_device *d)
{
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    m->dev = d;
    m->n = d->n_events;
    m->time = d->n_events > 0;
    m->t0 = 0;
    gm_snapshot_cursor_init(&c, d, 0);
    while (m->time && (e = gm_snapshot_cursor_next(&c)) != NULL) {
        if (!(e->flags & GM_EVENT_HAS_TIME))
            m->time = false;
        else if (c.index == 0)
            m->t0 = e->time_us;
    }
    if (!m->time)
        m->t0 = 0;
}

double gm_report_x(const struct gm_report_xmap *m, int64_t k)
{
    struct gm_snapshot_event e;
    if (m->n == 0)
        return 0.0;
    if (k < 0)
        k = 0;
    if ((size_t)k >= m->n)
        k = (int64_t)m->n - 1;
    if (m->time && gm_snapshot_event_at(m->dev, (size_t)k, &e))
        return (double)(e.time_us - m->t0);
    return (double)k;
}

enum gm_status gm_report_points_init(struct gm_report_points *p, const struct gm_snapshot *snap,
                                     const struct gm_snapshot_device *d,
                                     const struct gm_snapshot_timeline *tl,
                                     const struct gm_report_xmap *m, struct gm_error *err)
{
    memset(p, 0, sizeof(*p));
    p->m_ = m;
    return gm_snapshot_walk_init(&p->w_, snap, d, tl, err);
}

bool gm_report_points_next(struct gm_report_points *p)
{
    const struct gm_snapshot_event *e;
    if (!p->started_) {
        p->started_ = true;
        p->k = -1;
        p->x = 0.0;
    } else {
        if (!(e = gm_snapshot_walk_next(&p->w_)))
            return false;
        p->k = (int64_t)p->w_.cur.index;
        p->x = gm_report_x_of(p->m_, p->k, e);
    }
    p->allocated = p->w_.allocated;
    p->reserved = p->w_.reserved;
    return true;
}

void gm_report_points_release(struct gm_report_points *p)
{
    gm_snapshot_walk_release(&p->w_);
}

unsigned gm_report_bucket(double x, double x0, double x1, unsigned n)
{
    double b = x1 > x0 ? (x - x0) / (x1 - x0) * n : 0;
    if (n == 0 || !(b > 0))
        return 0;
    return b >= n ? n - 1 : (unsigned)b;
}

double gm_report_xend(const struct gm_report_xmap *m)
{
    double x = gm_report_x(m, (int64_t)m->n - 1);
    /* an empty range would divide by zero when drawn */
    return m->time && x > 0 ? x : x + 1.0;
}
