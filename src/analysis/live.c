/* SPDX-License-Identifier: MIT */
/* live.c - what is alive at chosen moments of a trace, in one pass (gm_analysis_live_at()).
 *
 * The allocations alive after event k are those alive from the start plus every alloc up to
 * k, minus every allocation a free_completed up to k ended: the analysis numbers the trace's
 * allocations in alloc order and keeps, per free_completed, the allocation it ends, so one
 * pass over the trace keeps the live set (the base map keyed by allocation index, as large
 * as what is alive at one time) and hands it out, sorted, at each moment.  Fragmentation at
 * the peak and the ooms (frag.c) and the report's moments use it. */
#include "analysis/analysis_int.h"

#include "base/budget.h"
#include "base/vec.h"
#include "snapshot/snapshot_int.h"

#include "gpumem/arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

enum gm_status gm_analysis_live_at(const struct gm_analysis *an,
                                   const struct gm_analysis_device *dev, const int64_t *ks,
                                   size_t n, gm_analysis_live_fn fn, void *ctx,
                                   struct gm_error *err)
{
    const struct gm_snapshot *snap = an->snap;
    const struct gm_snapshot_device *sd = gm_snapshot_device_by_index(snap, dev->device);
    const struct ana_device_priv *dp = dev->priv_;
    const struct ana_priv *priv = an->priv_;
    struct gm_budget budget;
    struct gm_map l; /* the allocations alive: index in dev->allocs -> nothing */
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e = NULL;
    uint32_t *out = NULL;
    size_t cap_out = 0, ai = 0, fi = 0;
    enum gm_status st = GM_OK;

    if (!n)
        return GM_OK;
    if (!sd)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "the snapshot has no device %d",
                       (int)dev->device);
    budget = gm_budget_make(snap->memory_limit, snap->memory_bytes + (priv ? priv->held : 0));
    gm_map_init(&l, &budget);
    for (; ai < dev->n_allocs && dev->allocs[ai].alloc_event < 0; ai++)
        if (!gm_map_put(&l, ai, 0))
            goto fail;
    gm_snapshot_cursor_init(&c, sd, 0);
    for (size_t t = 0; t < n; t++) {
        /* apply the events up to and including ks[t] */
        while ((int64_t)(c.index + 1) <= ks[t] && (e = gm_snapshot_cursor_next(&c)) != NULL) {
            if (e->action == GM_ACTION_ALLOC && ai < dev->n_allocs &&
                dev->allocs[ai].alloc_event == (int32_t)c.index) {
                if (!gm_map_put(&l, ai++, 0))
                    goto fail;
            } else if (e->action == GM_ACTION_FREE_COMPLETED && dp && fi < dp->n_free_of) {
                (void)gm_map_take(&l, dp->free_of[fi++], NULL);
            }
        }
        if (!GM_VEC_RESERVE(out, cap_out, gm_map_count(&l), &budget))
            goto fail;
        {
            size_t m = 0, pos = 0;
            uint64_t key, val;
            while (gm_map_next(&l, &pos, &key, &val))
                out[m++] = (uint32_t)key;
            if (m > 1)
                qsort(out, m, sizeof(*out), cmp_u32);
            if ((st = fn(ctx, t, out, m, err)) != GM_OK)
                goto done;
        }
    }
    goto done;
fail:
    if (budget.over) {
        char what[64];
        snprintf(what, sizeof(what), "the allocations alive on device %d", (int)dev->device);
        st = gm_budget_fail(err, what, UINT64_MAX, budget.limit);
    } else {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
    }
done:
    gm_map_release(&l);
    gm_free(out);
    return st;
}

/* ---- what is alive at one event, by stack ---- */

struct group_ctx {
    const struct gm_analysis_device *dev;
    struct gm_snapshot_live_group *g;
    size_t n;
};

/* What is alive, grouped as the timeline groups what is alive at its peak. */
static enum gm_status group_live(void *ctx, size_t i, const uint32_t *live, size_t n_live,
                                 struct gm_error *err)
{
    struct group_ctx *c = ctx;
    struct gm_snapshot_live *l = gm_malloc((n_live ? n_live : 1) * sizeof(*l));
    enum gm_status st;
    (void)i;
    if (!l)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
    for (size_t k = 0; k < n_live; k++) {
        const struct gm_analysis_alloc *a = &c->dev->allocs[live[k]];
        l[k].addr = a->addr;
        l[k].bytes = a->bytes;
        l[k].stream = a->stream;
        l[k].stack = a->stack;
        l[k].alloc_event = a->alloc_event;
    }
    st = snap_group_live(l, n_live, &c->g, &c->n, err);
    gm_free(l);
    return st;
}

enum gm_status gm_analysis_group_live_at(const struct gm_analysis *an,
                                         const struct gm_analysis_device *dev, int64_t event,
                                         struct gm_snapshot_live_group **out, size_t *n_out,
                                         struct gm_error *err)
{
    struct group_ctx c = {dev, NULL, 0};
    enum gm_status st;
    *out = NULL;
    *n_out = 0;
    if (event < -1 || (event >= 0 && (size_t)event >= dev->n_events))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "device %d: no event %lld (the trace has %zu: 0 to %zu, or -1 for the "
                       "state before it)",
                       (int)dev->device, (long long)event, dev->n_events,
                       dev->n_events ? dev->n_events - 1 : 0);
    st = gm_analysis_live_at(an, dev, &event, 1, group_live, &c, err);
    if (st != GM_OK) {
        gm_free(c.g);
        return st;
    }
    *out = c.g;
    *n_out = c.n;
    return GM_OK;
}
