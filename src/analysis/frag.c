/* SPDX-License-Identifier: MIT */
/* frag.c - free memory inside the reserved segments at a given moment, per pool and
 * stream, and the verdict of an out-of-memory event (shortage or fragmentation).
 *
 * The segments and the blocks at the moment are the library's layout (layout.c: the
 * segment events replayed, expandable segments with their mapped pages, live allocations
 * placed as blocks).  Inside each segment the free ranges are the gaps between blocks
 * within one run of mapped pages: a block never spans two segments, so two adjacent
 * cudaMalloc segments give two free ranges, and the unmapped part of an expandable segment
 * is not free memory.  Approximation: a block freed before the end is its requested bytes
 * rounded to 512; the allocator may have kept a larger unsplit tail, counted as free here. */
#include "analysis/analysis_int.h"

#include "gpumem/arena.h"
#include "gpumem/units.h"

#include <stdlib.h>
#include <string.h>

#define SMALL_SEGMENT ((uint64_t)2 << 20)
#define SMALL_REQUEST ((uint64_t)1 << 20)

static uint64_t round512(uint64_t b)
{
    if (b == 0)
        return 0;
    return b < 512 ? 512 : ((b + 511) / 512) * 512;
}

static struct gm_analysis_pool_free *pool_of(struct gm_analysis_pool_free *pools, size_t *n,
                                             uint64_t stream, bool small)
{
    for (size_t i = 0; i < *n; i++)
        if (pools[i].stream == stream && pools[i].is_small == small)
            return &pools[i];
    struct gm_analysis_pool_free *p = &pools[(*n)++];
    memset(p, 0, sizeof(*p));
    p->stream = stream;
    p->is_small = small;
    return p;
}

static enum gm_oom_verdict verdict_of(const struct gm_analysis_frag *f, uint64_t stream)
{
    uint64_t r = f->requested;
    bool small = r <= SMALL_REQUEST;
    uint64_t need; /* what a new cudaMalloc for this request would ask for */
    if (small)
        need = SMALL_SEGMENT;
    else if (r < ((uint64_t)10 << 20))
        need = (uint64_t)20 << 20;
    else
        need = (r + SMALL_SEGMENT - 1) / SMALL_SEGMENT * SMALL_SEGMENT;
    uint64_t largest = 0;
    for (size_t i = 0; i < f->n_pools; i++)
        if (f->pools[i].is_small == small && f->pools[i].stream == stream &&
            f->pools[i].largest_free > largest)
            largest = f->pools[i].largest_free;
    if (round512(r) <= largest || need <= f->device_free)
        return GM_VERDICT_LIMIT;
    if (r <= gm_add_sat(f->device_free, f->reserved_unallocated))
        return GM_VERDICT_FRAGMENTATION;
    return GM_VERDICT_SHORTAGE;
}

/* The figures at the moment of layout 'l'. */
static enum gm_status compute_at(const struct gm_snapshot *snap,
                                 const struct gm_snapshot_device *sd,
                                 const struct gm_analysis_device *dev, struct gm_arena *arena,
                                 const struct gm_layout *l, struct gm_analysis_frag *f,
                                 struct gm_error *err)
{
    struct gm_snapshot_event ev;
    int64_t k = l->event;
    memset(f, 0, sizeof(*f));
    f->event = k;
    f->phase = (uint8_t)gm_analysis_phase_at(dev, k);
    for (size_t i = 0; i < l->n_live; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[l->live[i]];
        f->at_event[a->category] += a->bytes;
    }
    f->allocated = l->allocated;
    f->pools = gm_arena_calloc(arena, l->n_segments ? l->n_segments : 1, sizeof(*f->pools));
    if (!f->pools)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for pools");
    for (size_t s = 0; s < l->n_segments; s++) {
        const struct gm_layout_segment *g = &l->segments[s];
        struct gm_analysis_pool_free *p = pool_of(f->pools, &f->n_pools, g->stream, g->is_small);
        size_t bi = g->first_block, be = g->first_block + g->n_blocks;
        p->reserved += g->mapped;
        p->n_segments++;
        f->reserved += g->mapped;
        for (size_t r = 0; r < g->n_ranges; r++) {
            const struct gm_layout_range *x = &l->ranges[g->first_range + r];
            uint64_t pos = x->addr, end = x->addr + x->size, used = 0;
            while (bi < be && l->blocks[bi].addr < x->addr)
                bi++;
            for (; bi < be && l->blocks[bi].addr < end; bi++) {
                uint64_t a = l->blocks[bi].addr, e = a + l->blocks[bi].size;
                if (a > pos && a - pos > p->largest_free)
                    p->largest_free = a - pos;
                if (e > pos) {
                    used += e - (a > pos ? a : pos);
                    pos = e;
                }
            }
            if (end > pos && end - pos > p->largest_free)
                p->largest_free = end - pos;
            p->free += x->size - used;
        }
        if (p->largest_free > f->largest_free)
            f->largest_free = p->largest_free;
    }
    f->reserved_unallocated = f->reserved > f->allocated ? f->reserved - f->allocated : 0;
    if (k >= 0 && gm_snapshot_event_kept(sd, (size_t)k, &ev) && ev.action == GM_ACTION_OOM) {
        f->is_oom = true;
        f->requested = ev.size;
        f->device_free = gm_snapshot_event_device_free(&ev);
        f->stack = ev.stack;
        f->verdict = (uint8_t)verdict_of(f, gm_snapshot_event_stream(snap, &ev));
    }
    return GM_OK;
}

/* The state of the pass that computes every target. */
struct frag_pass {
    const struct gm_snapshot *snap;
    const struct gm_snapshot_device *sd;
    const struct gm_analysis_device *dev;
    struct gm_arena *arena;
    const struct ana_frag_target *targets;
};

static enum gm_status at_target(void *ctx, size_t t, const struct gm_layout *l,
                                struct gm_error *err)
{
    struct frag_pass *fp = ctx;
    return compute_at(fp->snap, fp->sd, fp->dev, fp->arena, l, fp->targets[t].out, err);
}

enum gm_status ana_frag_compute(const struct gm_snapshot *snap, const struct gm_snapshot_device *sd,
                                const struct gm_analysis *an, const struct gm_analysis_device *dev,
                                struct gm_arena *arena, const struct ana_frag_target *targets,
                                size_t n_targets, struct gm_error *err)
{
    struct frag_pass fp = {snap, sd, dev, arena, targets};
    int64_t *ks = gm_malloc((n_targets ? n_targets : 1) * sizeof(*ks));
    enum gm_status st;
    if (!ks)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for segments");
    for (size_t t = 0; t < n_targets; t++)
        ks[t] = targets[t].event;
    st = gm_layout_at(an, dev, NULL, ks, n_targets, at_target, &fp, err);
    gm_free(ks);
    return st;
}
