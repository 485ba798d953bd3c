/* SPDX-License-Identifier: MIT */
/* live.c - what is alive at chosen moments of a trace, in one pass (gm_analysis_live_at()).
 *
 * The allocations alive after event k are those alive from the start plus every alloc up to
 * k, minus every allocation a free_completed up to k ended: the analysis numbers the trace's
 * allocations in alloc order and keeps, per free_completed, the allocation it ends, so one
 * pass over the trace keeps the live set (a hash set of allocation indexes, as large as
 * what is alive at one time) and hands it out, sorted, at each moment.  Fragmentation at
 * the peak and the ooms (frag.c) and the report's moments use it. */
#include "analysis/analysis_int.h"

#include "base/budget.h"

#include "gpumem/arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EMPTY UINT32_MAX

struct live_set {
    uint32_t *s;
    size_t mask; /* slots - 1, a power of two */
    size_t n;
    uint64_t limit, used;
    bool over;
};

static inline size_t home(const struct live_set *l, uint32_t v)
{
    return (size_t)(((uint64_t)v * 0x9e3779b97f4a7c15ULL) >> 32) & l->mask;
}

static bool grow(struct live_set *l)
{
    size_t ncap = l->s ? (l->mask + 1) * 2 : 1024, nmask = ncap - 1;
    uint32_t *ns;
    if (!gm_budget_fits(l->limit, l->used, (uint64_t)ncap * sizeof(*ns))) {
        l->over = true;
        return false;
    }
    if (ncap > SIZE_MAX / sizeof(*ns) || !(ns = gm_malloc(ncap * sizeof(*ns))))
        return false;
    memset(ns, 0xff, ncap * sizeof(*ns));
    for (size_t j = 0; l->s && j <= l->mask; j++) {
        size_t i;
        if (l->s[j] == EMPTY)
            continue;
        for (i = (size_t)(((uint64_t)l->s[j] * 0x9e3779b97f4a7c15ULL) >> 32) & nmask;
             ns[i] != EMPTY; i = (i + 1) & nmask)
            ;
        ns[i] = l->s[j];
    }
    gm_free(l->s);
    l->s = ns;
    l->mask = nmask;
    return true;
}

static bool add(struct live_set *l, uint32_t v)
{
    size_t i;
    if ((!l->s || (l->n + 1) * 2 > l->mask + 1) && !grow(l))
        return false;
    for (i = home(l, v); l->s[i] != EMPTY; i = (i + 1) & l->mask)
        if (l->s[i] == v)
            return true;
    l->s[i] = v;
    l->n++;
    return true;
}

static void del(struct live_set *l, uint32_t v)
{
    size_t i, j;
    if (!l->s)
        return;
    for (i = home(l, v); l->s[i] != v; i = (i + 1) & l->mask)
        if (l->s[i] == EMPTY)
            return;
    /* backward-shift the rest of the cluster into the hole */
    for (j = (i + 1) & l->mask; l->s[j] != EMPTY; j = (j + 1) & l->mask) {
        size_t h = home(l, l->s[j]);
        if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
            l->s[i] = l->s[j];
            i = j;
        }
    }
    l->s[i] = EMPTY;
    l->n--;
}

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
    struct live_set l;
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
    memset(&l, 0, sizeof(l));
    l.limit = snap->memory_limit;
    l.used = snap->memory_bytes + (priv ? priv->held : 0);
    for (; ai < dev->n_allocs && dev->allocs[ai].alloc_event < 0; ai++)
        if (!add(&l, (uint32_t)ai))
            goto fail;
    gm_snapshot_cursor_init(&c, sd, 0);
    for (size_t t = 0; t < n; t++) {
        /* apply the events up to and including ks[t] */
        while ((int64_t)(c.index + 1) <= ks[t] && (e = gm_snapshot_cursor_next(&c)) != NULL) {
            if (e->action == GM_ACTION_ALLOC && ai < dev->n_allocs &&
                dev->allocs[ai].alloc_event == (int32_t)c.index) {
                if (!add(&l, (uint32_t)ai++))
                    goto fail;
            } else if (e->action == GM_ACTION_FREE_COMPLETED && dp && fi < dp->n_free_of) {
                del(&l, dp->free_of[fi++]);
            }
        }
        if (l.n > cap_out) {
            uint32_t *v;
            if (!gm_budget_fits(l.limit, l.used + (uint64_t)(l.mask + 1) * 4, (uint64_t)l.n * 4)) {
                l.over = true;
                goto fail;
            }
            if (!(v = gm_realloc(out, l.n * sizeof(*v))))
                goto fail;
            out = v;
            cap_out = l.n;
        }
        {
            size_t m = 0;
            for (size_t i = 0; l.s && i <= l.mask; i++)
                if (l.s[i] != EMPTY)
                    out[m++] = l.s[i];
            if (m > 1)
                qsort(out, m, sizeof(*out), cmp_u32);
            if ((st = fn(ctx, t, out, m, err)) != GM_OK)
                goto done;
        }
    }
    goto done;
fail:
    if (l.over) {
        char what[64];
        snprintf(what, sizeof(what), "the allocations alive on device %d", (int)dev->device);
        st = gm_budget_fail(err, what, UINT64_MAX, l.limit);
    } else {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
    }
done:
    gm_free(l.s);
    gm_free(out);
    return st;
}

/* ---- what is alive at one event, by stack ---- */

struct group_ctx {
    const struct gm_analysis_device *dev;
    struct gm_snapshot_live_group *g;
    size_t n;
};

static int cmp_group(const void *a, const void *b)
{
    const struct gm_snapshot_live_group *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static enum gm_status group_live(void *ctx, size_t i, const uint32_t *live, size_t n_live,
                                 struct gm_error *err)
{
    struct group_ctx *c = ctx;
    struct ana_map by_stack;
    enum gm_status st;
    (void)i;
    c->g = gm_malloc((n_live ? n_live : 1) * sizeof(*c->g));
    if (!c->g)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
    if ((st = ana_map_init(&by_stack, 256, err)) != GM_OK)
        return st;
    for (size_t k = 0; k < n_live; k++) {
        const struct gm_analysis_alloc *a = &c->dev->allocs[live[k]];
        uint32_t gi = ana_map_get(&by_stack, a->stack);
        if (gi == UINT32_MAX) {
            gi = (uint32_t)c->n++;
            c->g[gi].stack = a->stack;
            c->g[gi].bytes = 0;
            c->g[gi].count = 0;
            if ((st = ana_map_put(&by_stack, a->stack, gi, err)) != GM_OK) {
                ana_map_release(&by_stack);
                return st;
            }
        }
        c->g[gi].bytes += a->bytes;
        c->g[gi].count++;
    }
    ana_map_release(&by_stack);
    qsort(c->g, c->n, sizeof(*c->g), cmp_group);
    return GM_OK;
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
