/* SPDX-License-Identifier: MIT */
/* stats.c - figures of the segment/block state at snapshot time, per device and pool.
 *
 * Everything is summed from the blocks, not from the segments' own allocated_size etc.
 * fields (those are derived data; in every real file they agree). */
#include "snapshot/snapshot_int.h"

#include "gpumem/arena.h"

#include <string.h>

static void add_segment(struct gm_snapshot_figures *f, const struct gm_snapshot_segment *seg)
{
    f->reserved_bytes += seg->total_size;
    f->n_segments++;
    for (size_t i = 0; i < seg->n_blocks; i++) {
        const struct gm_snapshot_block *b = &seg->blocks[i];
        f->n_blocks++;
        switch (b->state) {
        case GM_BLOCK_ACTIVE_ALLOCATED:
            f->allocated_bytes += b->size;
            f->active_bytes += b->size;
            f->requested_bytes += b->requested_size;
            /* rounding waste; a requested size above the block (never in real files)
             * counts as no waste rather than wrapping */
            if (b->size > b->requested_size)
                f->internal_free_bytes += b->size - b->requested_size;
            f->n_active_blocks++;
            break;
        case GM_BLOCK_ACTIVE_PENDING_FREE:
            f->active_bytes += b->size;
            f->n_pending_free_blocks++;
            break;
        case GM_BLOCK_INACTIVE:
            f->external_free_bytes += b->size;
            if (b->size > f->largest_free_block_bytes)
                f->largest_free_block_bytes = b->size;
            f->n_inactive_blocks++;
            break;
        default:
            break;
        }
    }
}

static bool same_pool(const struct gm_snapshot_pool_stats *p, const struct gm_snapshot_segment *s)
{
    int64_t a = s->has_pool_id ? s->pool_id[0] : 0, b = s->has_pool_id ? s->pool_id[1] : 0;
    return p->is_small == s->is_small && p->pool_id[0] == a && p->pool_id[1] == b;
}

static int pool_rank(const struct gm_snapshot_pool_stats *p)
{
    bool def = p->pool_id[0] == 0 && p->pool_id[1] == 0;
    return (def ? 0 : 2) + (p->is_small ? 1 : 0);
}

bool gm_snapshot_private_pool_figures(const struct gm_snapshot *snap, int32_t device,
                                      struct gm_snapshot_figures *out)
{
    const struct gm_snapshot_device *d = gm_snapshot_device_by_index(snap, device);
    memset(out, 0, sizeof(*out));
    for (size_t si = 0; d && si < d->n_segments; si++) {
        const struct gm_snapshot_segment *seg = &snap->segments[d->first_segment + si];
        if (seg->has_pool_id && (seg->pool_id[0] || seg->pool_id[1]))
            add_segment(out, seg);
    }
    return out->n_segments != 0;
}

void gm_snapshot_host_figures(const struct gm_snapshot *snap, struct gm_snapshot_figures *out)
{
    memset(out, 0, sizeof(*out));
    for (size_t si = 0; si < snap->n_host_segments; si++)
        add_segment(out, &snap->host_segments[si]);
}

enum gm_status gm_snapshot_stats(const struct gm_snapshot *snap, struct gm_snapshot_stats *out,
                                 struct gm_error *err)
{
    memset(out, 0, sizeof(*out));
    out->has_host = snap->has_host_data;
    gm_snapshot_host_figures(snap, &out->host);
    if (!snap->n_devices)
        return GM_OK;
    out->devices = gm_calloc(snap->n_devices, sizeof(*out->devices));
    if (!out->devices)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "stats: out of memory");
    out->n_devices = snap->n_devices;
    for (size_t di = 0; di < snap->n_devices; di++) {
        const struct gm_snapshot_device *d = &snap->devices[di];
        struct gm_snapshot_device_stats *ds = &out->devices[di];
        ds->device = d->index;
        /* at most 64 histogram buckets (powers of two) */
        ds->hist = gm_calloc(64, sizeof(*ds->hist));
        if (!ds->hist)
            goto out_nomem;
        for (size_t si = d->first_segment; si < d->first_segment + d->n_segments; si++) {
            const struct gm_snapshot_segment *seg = &snap->segments[si];
            struct gm_snapshot_pool_stats *p = NULL;
            unsigned k = 0;
            add_segment(&ds->fig, seg);
            for (size_t pi = 0; pi < ds->n_pools; pi++)
                if (same_pool(&ds->pools[pi], seg))
                    p = &ds->pools[pi];
            if (!p) {
                struct gm_snapshot_pool_stats *np =
                    gm_realloc(ds->pools, (ds->n_pools + 1) * sizeof(*np));
                if (!np)
                    goto out_nomem;
                ds->pools = np;
                p = &np[ds->n_pools++];
                memset(p, 0, sizeof(*p));
                p->is_small = seg->is_small;
                p->pool_id[0] = seg->has_pool_id ? seg->pool_id[0] : 0;
                p->pool_id[1] = seg->has_pool_id ? seg->pool_id[1] : 0;
                p->is_expandable = true;
            }
            if (!seg->is_expandable)
                p->is_expandable = false;
            add_segment(&p->fig, seg);
            while (k < 63 && (seg->total_size >> (k + 1)) != 0)
                k++;
            ds->hist[k].lo = (uint64_t)1 << k;
            ds->hist[k].hi = k < 63 ? (uint64_t)1 << (k + 1) : UINT64_MAX;
            if (seg->total_size == 0) {
                ds->hist[k].lo = 0;
            }
            ds->hist[k].n_segments++;
            ds->hist[k].bytes += seg->total_size;
        }
        /* keep only non-empty buckets, ascending */
        {
            size_t n = 0;
            for (size_t k = 0; k < 64; k++)
                if (ds->hist[k].n_segments)
                    ds->hist[n++] = ds->hist[k];
            ds->n_hist = n;
        }
        /* pools: default large, default small, then private pools in first-seen order */
        for (size_t i = 1; i < ds->n_pools; i++) {
            struct gm_snapshot_pool_stats t = ds->pools[i];
            size_t j = i;
            while (j > 0 && pool_rank(&ds->pools[j - 1]) > pool_rank(&t)) {
                ds->pools[j] = ds->pools[j - 1];
                j--;
            }
            ds->pools[j] = t;
        }
    }
    return GM_OK;

out_nomem:
    gm_snapshot_stats_release(out);
    return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "stats: out of memory");
}

void gm_snapshot_stats_release(struct gm_snapshot_stats *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->n_devices; i++) {
        gm_free(st->devices[i].pools);
        gm_free(st->devices[i].hist);
    }
    gm_free(st->devices);
    memset(st, 0, sizeof(*st));
}

uint64_t gm_snapshot_action_count(const struct gm_snapshot *snap, enum gm_snapshot_action a)
{
    uint64_t n = 0;
    for (size_t d = 0; d < snap->n_devices; d++)
        n += snap->devices[d].n_actions[a];
    return n;
}
