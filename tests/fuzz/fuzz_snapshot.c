/* SPDX-License-Identifier: MIT */
/* fuzz_snapshot.c - snapshot loading, stats, timeline and grouping on arbitrary bytes, the
 * host trace and the events' forward stacks included; a cursor from the middle of each trace
 * and gm_snapshot_event_at() on its last event, which must read what the walk from the start
 * reads (a checkpoint's saved state); and a load with timeline_only, whose timelines must be
 * those of the full load. */
#include "gpumem/gpumem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool same_timeline(const struct gm_snapshot_timeline *a,
                          const struct gm_snapshot_timeline *b)
{
    if (a->peak_bytes != b->peak_bytes || a->peak_event_index != b->peak_event_index ||
        a->initial_bytes != b->initial_bytes || a->final_bytes != b->final_bytes ||
        a->peak_reserved_bytes != b->peak_reserved_bytes ||
        a->reserved_at_peak_bytes != b->reserved_at_peak_bytes ||
        a->peak_time_valid != b->peak_time_valid || a->peak_time_us != b->peak_time_us ||
        a->n_live != b->n_live)
        return false;
    for (size_t i = 0; i < a->n_live; i++)
        if (a->live[i].addr != b->live[i].addr || a->live[i].bytes != b->live[i].bytes ||
            a->live[i].alloc_event != b->live[i].alloc_event ||
            a->live[i].stack != b->live[i].stack)
            return false;
    return true;
}

static bool same_event(const struct gm_snapshot_event *a, const struct gm_snapshot_event *b)
{
    return a->addr == b->addr && a->size == b->size && a->time_us == b->time_us &&
           a->stack == b->stack && a->extra == b->extra && a->action == b->action &&
           a->flags == b->flags;
}

/* The walk over dev's trace from event 0 against a cursor from n_events / 2 and against
 * gm_snapshot_event_at(n_events - 1); aborts where they differ. */
static void check_starts(const struct gm_snapshot *s, const struct gm_snapshot_device *dev)
{
    struct gm_snapshot_cursor c, m;
    struct gm_snapshot_event last;
    const struct gm_snapshot_event *e, *f;
    size_t n = dev->n_events, k = 0;
    gm_snapshot_cursor_init(&c, dev, 0);
    gm_snapshot_cursor_init(&m, dev, n / 2);
    for (; (e = gm_snapshot_cursor_next(&c)) != NULL; k++) {
        (void)gm_snapshot_event_extra_of(s, e);
        (void)gm_snapshot_stack_user_frame(s, gm_snapshot_event_user_stack(s, e));
        if (k >= n / 2 && ((f = gm_snapshot_cursor_next(&m)) == NULL || !same_event(e, f)))
            abort();
        if (k + 1 == n && (!gm_snapshot_event_at(dev, k, &last) || !same_event(e, &last)))
            abort();
    }
    if (k != n || gm_snapshot_cursor_next(&m) != NULL)
        abort();
}

/* The timelines of a load with timeline_only against those of the full load 'full'. */
static void check_timeline_only(const uint8_t *data, size_t size, const struct gm_snapshot *full)
{
    struct gm_snapshot *s;
    struct gm_snapshot_opts o;
    struct gm_error err;
    memset(&o, 0, sizeof o);
    o.memory_limit = 64u << 20;
    o.timeline_only = true;
    if (gm_snapshot_load_mem(data, size, &o, &s, &err) != GM_OK)
        return;
    if (s->n_devices != full->n_devices)
        abort();
    for (size_t i = 0; i < s->n_devices; i++) {
        struct gm_snapshot_timeline a, b;
        int32_t d = full->devices[i].index;
        bool ok_a = gm_snapshot_timeline(full, d, GM_TIMELINE_LIVE, &a, &err) == GM_OK;
        bool ok_b = gm_snapshot_timeline(s, d, GM_TIMELINE_LIVE, &b, &err) == GM_OK;
        if (ok_a && ok_b && !same_timeline(&a, &b))
            abort();
        if (ok_a)
            gm_snapshot_timeline_release(&a);
        if (ok_b)
            gm_snapshot_timeline_release(&b);
    }
    gm_snapshot_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gm_snapshot *s;
    struct gm_snapshot_opts o;
    struct gm_error err;
    memset(&o, 0, sizeof o);
    o.memory_limit = 64u << 20;
    if (gm_snapshot_load_mem(data, size, &o, &s, &err) != GM_OK)
        return 0;
    {
        struct gm_snapshot_stats st;
        if (gm_snapshot_stats(s, &st, &err) == GM_OK)
            gm_snapshot_stats_release(&st);
    }
    for (size_t i = 0; i < s->n_devices; i++) {
        struct gm_snapshot_timeline tl;
        struct gm_snapshot_live_group *g;
        size_t ng;
        if (gm_snapshot_timeline(s, s->devices[i].index, GM_TIMELINE_LIVE, &tl, &err) != GM_OK)
            continue;
        if (gm_snapshot_group_live(&tl, &g, &ng, &err) == GM_OK) {
            for (size_t k = 0; k < ng; k++)
                (void)gm_snapshot_stack_user_frame(s, g[k].stack);
            gm_free(g);
        }
        gm_snapshot_timeline_release(&tl);
    }
    for (size_t i = 0; i <= s->n_devices; i++)
        check_starts(s, i < s->n_devices ? &s->devices[i] : &s->host); /* the host trace last */
    {
        struct gm_snapshot_figures f;
        gm_snapshot_host_figures(s, &f);
    }
    check_timeline_only(data, size, s);
    gm_snapshot_free(s);
    return 0;
}
