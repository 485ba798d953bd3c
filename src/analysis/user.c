/* SPDX-License-Identifier: MIT */
/* user.c - the phases a user marked with gpumem.torch.record() (gpumem.phase:<name>), put
 * on the events of a device: each range holds the events from its START to its END by
 * time, and an event belongs to the innermost range around it.  The figures of each phase
 * (its peak and the categories there, the bytes allocated inside it) are made by the
 * analysis's pass over the series (analysis.c), with ana_user_cursor. */
#include "analysis/analysis_int.h"
#include "snapshot/snapshot_int.h"

#include "gpumem/arena.h"

#include <string.h>

static uint32_t phase_of(struct gm_analysis_device *dev, const char *name)
{
    for (size_t i = 0; i < dev->n_user_phases; i++)
        if (!strcmp(dev->user_phases[i].name, name))
            return (uint32_t)i;
    return UINT32_MAX;
}

/* Event k (its time t) into the ranges open at it; next: the first range not opened yet. */
static void put_event(struct gm_analysis_device *dev, const struct gm_snapshot_user_range *r,
                      size_t n, int64_t k, int64_t t, size_t *open, size_t *n_open, size_t *next)
{
    while (*next < n && r[*next].start_us <= t)
        open[(*n_open)++] = (*next)++;
    for (size_t j = 0; j < *n_open;) {
        struct gm_analysis_user_range *u = &dev->user_ranges[open[j]];
        if (t > u->end_us) {
            open[j] = open[--*n_open]; /* closed before this event */
            continue;
        }
        if (u->first_event < 0)
            u->first_event = k;
        u->last_event = k;
        j++;
    }
}

enum gm_status ana_user_phases(const struct gm_snapshot *snap, const struct gm_snapshot_device *sd,
                               const struct ana_times *tm, struct gm_arena *arena,
                               struct gm_analysis_device *dev, struct gm_error *err)
{
    struct gm_snapshot_user_range *r = NULL;
    size_t n = 0, next = 0, n_open = 0;
    size_t *open = NULL;
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    enum gm_status st;

    dev->peak_user_phase = -1;
    if ((st = gm_snapshot_user_ranges(snap, sd->index, &r, &n, err)) != GM_OK || !n)
        return st;
    dev->user_ranges = gm_arena_calloc(arena, n, sizeof(*dev->user_ranges));
    dev->user_phases = gm_arena_calloc(arena, n, sizeof(*dev->user_phases));
    open = gm_malloc(n * sizeof(*open));
    if (!dev->user_ranges || !dev->user_phases || !open) {
        gm_free(r);
        gm_free(open);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for phases");
    }
    for (size_t i = 0; i < n; i++) {
        struct gm_analysis_user_range *u = &dev->user_ranges[i];
        uint32_t p = phase_of(dev, r[i].name);
        if (p == UINT32_MAX) {
            p = (uint32_t)dev->n_user_phases++;
            dev->user_phases[p].name = r[i].name;
            dev->user_phases[p].peak_event = -1;
        }
        dev->user_phases[p].n_ranges++;
        u->phase = p;
        u->start_us = r[i].start_us;
        u->end_us = r[i].end_us;
        u->first_event = -1;
        u->last_event = -2;
    }
    dev->n_user_ranges = n;
    /* one pass: the events inside each range (ranges sorted by start), by the times the scan
     * kept (every event has one there), else by those of the trace */
    if (tm) {
        struct ana_time_cursor tc;
        ana_time_cursor_init(&tc, tm);
        for (size_t k = 0; k < sd->n_events; k++)
            put_event(dev, r, n, (int64_t)k, ana_time_cursor_at(&tc, (int64_t)k), open, &n_open,
                      &next);
    } else if (!snap_events_stored(sd)) {
        gm_free(open);
        gm_free(r);
        return ana_events_missing(sd, err);
    } else {
        gm_snapshot_cursor_init(&c, sd, 0);
        while ((e = gm_snapshot_cursor_next(&c)) != NULL)
            if (e->flags & GM_EVENT_HAS_TIME)
                put_event(dev, r, n, (int64_t)c.index, e->time_us, open, &n_open, &next);
    }
    gm_free(open);
    gm_free(r);
    return GM_OK;
}

void ana_user_cursor_init(struct ana_user_cursor *c, const struct gm_analysis_device *dev)
{
    memset(c, 0, sizeof(*c));
    c->dev = dev;
}

uint32_t ana_user_cursor_at(struct ana_user_cursor *c, int64_t k)
{
    const struct gm_analysis_device *dev = c->dev;
    /* ranges sorted by start time are sorted by first event too (events are in time
     * order); a range with no event inside is passed over */
    while (c->next < dev->n_user_ranges &&
           (dev->user_ranges[c->next].first_event <= k ||
            dev->user_ranges[c->next].first_event > dev->user_ranges[c->next].last_event)) {
        const struct gm_analysis_user_range *u = &dev->user_ranges[c->next];
        if (u->first_event <= u->last_event && c->n_open < ANA_USER_OPEN)
            c->open[c->n_open++] = (uint32_t)c->next;
        c->next++;
    }
    /* the ranges that ended before k go (an inner one that ended leaves its outer one) */
    {
        size_t m = 0;
        for (size_t j = 0; j < c->n_open; j++)
            if (dev->user_ranges[c->open[j]].last_event >= k)
                c->open[m++] = c->open[j];
        c->n_open = m;
    }
    return c->n_open ? dev->user_ranges[c->open[c->n_open - 1]].phase : UINT32_MAX;
}
