/* SPDX-License-Identifier: MIT */
/* live.c - what is alive at chosen moments of a trace (gm_analysis_live_at()), without
 * reading the trace.
 *
 * The allocations alive after event k are those allocated at or before it (alloc_event;
 * -1 for those alive from the start) and not ended by then (free_event: the
 * free_completed that ends it, -1 for none).  The analysis keeps both for every
 * allocation, numbered in alloc order (those from the start first), so the answer at a
 * moment is what was alive at the moment before (when it is earlier) and is still, then
 * the allocations made since, in index order: it comes out sorted, and the moments in
 * order cost a pass over the allocations and what is alive at each.
 * This is the same set as replaying the trace's allocs and free_completed up to k, because
 * the analysis set alloc_event and free_event from that replay.  The report's moments and
 * gm_analysis_group_live_at() use it. */
#include "analysis/analysis_int.h"
#include "analysis/made_by.h"

#include "base/budget.h"
#include "base/vec.h"
#include "snapshot/snapshot_int.h"

#include "gpumem/arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether allocation 'a' is alive after event k (its alloc at or before k). */
static bool alive_after(const struct gm_analysis_alloc *a, int64_t k)
{
    return a->free_event < 0 || a->free_event > k;
}

enum gm_status gm_analysis_live_at(const struct gm_analysis *an,
                                   const struct gm_analysis_device *dev, const int64_t *ks,
                                   size_t n, gm_analysis_live_fn fn, void *ctx,
                                   struct gm_error *err)
{
    const struct gm_snapshot *snap = an->snap;
    const struct ana_priv *priv = an->priv_;
    struct gm_budget budget;
    uint32_t *out = NULL;
    size_t cap_out = 0, n_out = 0, end = 0;
    enum gm_status st = gm_analysis_require_whole(an, "live at", err);

    if (st != GM_OK || !n)
        return st;
    if (!gm_snapshot_device_by_index(snap, dev->device))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "the snapshot has no device %d",
                       (int)dev->device);
    budget = gm_budget_make(snap->memory_limit, snap_memory_held(snap) + (priv ? priv->held : 0));
    for (size_t t = 0; t < n; t++) {
        int64_t k = ks[t];
        size_t from = 0, m = 0;
        /* a later moment starts from the one before: what was alive then and is still,
         * then the allocations made since (larger indexes: the answer stays sorted) */
        if (t > 0 && k >= ks[t - 1]) {
            for (size_t j = 0; j < n_out; j++)
                if (alive_after(&dev->allocs[out[j]], k))
                    out[m++] = out[j];
            from = end;
        } else {
            end = 0;
        }
        /* the allocations made up to k: a prefix of the alloc order, found past the last one */
        end = gm_analysis_made_by(dev, end, k);
        if (!GM_VEC_RESERVE(out, cap_out, m + (end - from) + 1, &budget))
            goto fail;
        for (size_t i = from; i < end; i++)
            if (alive_after(&dev->allocs[i], k))
                out[m++] = (uint32_t)i;
        n_out = m;
        if ((st = fn(ctx, t, out, m, err)) != GM_OK)
            goto done;
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
        l[k].stream = gm_analysis_alloc_stream(c->dev, a);
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
    if ((st = gm_analysis_require_whole(an, "live at", err)) != GM_OK)
        return st;
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
