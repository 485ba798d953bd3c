/* SPDX-License-Identifier: MIT */
/* frames.c - which frames of a stack the report shows, and which are the user's. */
#include "report/report_int.h"

#include <string.h>

bool gm_report_frame_is_user(const struct gm_snapshot_frame *f)
{
    static const char *const lib[] = {"site-packages", "dist-packages", "/torch/", "\\torch\\",
                                      "/lib/python3",  "\\Lib\\",       "<frozen", NULL};
    if (!f->is_python)
        return false;
    for (int i = 0; lib[i]; i++)
        if (strstr(f->filename, lib[i]))
            return false;
    return true;
}

size_t gm_report_stack_frames(const struct gm_snapshot *snap, uint32_t stack, uint32_t *ids,
                              size_t cap)
{
    const struct gm_snapshot_stack *st;
    size_t n_py = 0, n = 0;
    if (stack >= snap->n_stacks)
        return 0;
    st = &snap->stacks[stack];
    for (uint32_t i = 0; i < st->n_frames; i++)
        n_py += snap->frames[st->frames[i]].is_python;
    for (uint32_t i = 0; i < st->n_frames; i++) {
        const struct gm_snapshot_frame *f = &snap->frames[st->frames[i]];
        if (n_py ? !f->is_python : f->is_noise)
            continue;
        if (n < cap)
            ids[n] = st->frames[i];
        n++;
    }
    return n;
}

void gm_report_xmap_init(struct gm_report_xmap *m, const struct gm_snapshot_device *d)
{
    m->ev = d->events;
    m->n = d->n_events;
    m->time = d->n_events > 0;
    for (size_t i = 0; i < d->n_events && m->time; i++)
        if (!(d->events[i].flags & GM_EVENT_HAS_TIME))
            m->time = false;
    m->t0 = m->time ? d->events[0].time_us : 0;
}

double gm_report_x(const struct gm_report_xmap *m, int64_t k)
{
    if (m->n == 0)
        return 0.0;
    if (k < 0)
        k = 0;
    if ((size_t)k >= m->n)
        k = (int64_t)m->n - 1;
    if (m->time)
        return (double)(m->ev[k].time_us - m->t0);
    return (double)k;
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
