/* SPDX-License-Identifier: MIT */
/* layout.c - the caching allocator's segments and blocks at any moment of a trace: the one
 * place that rebuilds them (fragmentation, the report's allocator state and segment
 * timeline, the tests all read it).
 *
 * Segments.  The snapshot records the segments at its end; the trace records every
 * segment_alloc / segment_free (a cudaMalloc'ed segment appears or goes) and segment_map /
 * segment_unmap (pages of an expandable segment mapped or unmapped).  The history is built
 * by walking the segment events backwards from the final segments, undoing each one, which
 * also decides once where every event belongs:
 *   - a cudaMalloc'ed segment has an identity of its own: segment_alloc creates the one
 *     based at its address, segment_free ends one of its address and size;
 *   - the pages of expandable segments are kept per stream and pool, as one set of mapped
 *     ranges (a "space"): each maximal run of mapped pages is one segment, which is how the
 *     snapshot itself reports expandable segments (unmapping pages in the middle of one
 *     splits it in two), so the layout at the end is the file's own segments.  A map or
 *     unmap belongs to the space of its stream whose pages it touches (or, undone, holds),
 *     else to the space whose lowest page is the closest below it, else it starts one:
 *     small pool when it is less than the large pool's 20 MiB page (docs:
 *     allocator-model.md).
 * An event that fits no segment (an inconsistent file) changes nothing that exists.
 *
 * Blocks.  The allocations alive at the moment (gm_analysis_live_at()) are placed in the
 * segment holding their address.  A block's size is the snapshot's block size when the
 * allocation lives to the end of the trace (the file records its real block, with any tail
 * the allocator did not split), else the requested bytes rounded up to 512 as the
 * allocator rounds; it is clipped at the end of its mapped range (an inconsistent file can
 * claim more).  An allocation whose address lies in no mapped page is counted apart
 * (n_outside). */
#include "analysis/analysis_int.h"

#include "base/vec.h"
#include "gpumem/arena.h"

#include <stdlib.h>
#include <string.h>

#define LARGE_PAGE    ((uint64_t)20 << 20) /* kLargeBuffer: the large pool's page and segment */
#define SMALL_SEGMENT ((uint64_t)2 << 20)

/* ---- one segment's mapped ranges: sorted, disjoint, adjacent ones merged ---- */

struct seg_state {
    struct gm_layout_range *r;
    size_t n, cap;
};

static bool ranges_grow(struct seg_state *s, size_t extra)
{
    return GM_VEC_RESERVE(s->r, s->cap, s->n + extra, NULL);
}

/* Remove [a, a+n) from the ranges (splitting one when it falls inside). */
static bool ranges_sub(struct seg_state *s, uint64_t a, uint64_t n)
{
    uint64_t e = a + n;
    for (size_t i = 0; i < s->n; i++) {
        struct gm_layout_range *x = &s->r[i];
        uint64_t xe = x->addr + x->size;
        if (xe <= a || x->addr >= e)
            continue;
        if (x->addr < a && xe > e) {
            if (!ranges_grow(s, 1))
                return false;
            x = &s->r[i];
            memmove(&s->r[i + 2], &s->r[i + 1], (s->n - i - 1) * sizeof(*x));
            s->r[i + 1].addr = e;
            s->r[i + 1].size = xe - e;
            x->size = a - x->addr;
            s->n++;
            return true;
        }
        if (x->addr < a) {
            x->size = a - x->addr;
        } else if (xe > e) {
            x->size = xe - e;
            x->addr = e;
        } else {
            memmove(&s->r[i], &s->r[i + 1], (s->n - i - 1) * sizeof(*x));
            s->n--;
            i--;
        }
    }
    return true;
}

/* Add [a, a+n), merged with what it overlaps or touches. */
static bool ranges_add(struct seg_state *s, uint64_t a, uint64_t n)
{
    size_t i = 0, j;
    uint64_t e = a + n;
    if (!n)
        return true;
    while (i < s->n && s->r[i].addr + s->r[i].size < a)
        i++;
    /* ranges i .. j-1 overlap or touch [a, e) */
    for (j = i; j < s->n && s->r[j].addr <= e; j++) {
        if (s->r[j].addr < a)
            a = s->r[j].addr;
        if (s->r[j].addr + s->r[j].size > e)
            e = s->r[j].addr + s->r[j].size;
    }
    if (j == i) {
        if (!ranges_grow(s, 1))
            return false;
        memmove(&s->r[i + 1], &s->r[i], (s->n - i) * sizeof(s->r[0]));
        s->n++;
    } else if (j > i + 1) {
        memmove(&s->r[i + 1], &s->r[j], (s->n - j) * sizeof(s->r[0]));
        s->n -= j - i - 1;
    }
    s->r[i].addr = a;
    s->r[i].size = e - a;
    return true;
}

static uint64_t ranges_end(const struct seg_state *s)
{
    return s->n ? s->r[s->n - 1].addr + s->r[s->n - 1].size : 0;
}

/* ---- the history ---- */

struct hist {
    struct gm_layout_history *h;
    struct seg_state *st; /* per segment id: the ranges while walking */
    size_t cap_seg, cap_ch;
};

static bool new_segment(struct hist *b, uint64_t base, uint64_t stream, bool small, bool expandable,
                        uint32_t *id)
{
    struct gm_layout_history *h = b->h;
    if (h->n_segments == b->cap_seg) {
        /* two arrays of one capacity: each grows by the same rule from the same size */
        size_t cap_info = b->cap_seg, cap_st = b->cap_seg;
        if (!GM_VEC_RESERVE(h->segments, cap_info, h->n_segments + 1, NULL) ||
            !GM_VEC_RESERVE(b->st, cap_st, h->n_segments + 1, NULL))
            return false;
        b->cap_seg = cap_info < cap_st ? cap_info : cap_st;
    }
    if (h->n_segments >= UINT32_MAX)
        return false;
    *id = (uint32_t)h->n_segments;
    h->segments[*id] = (struct gm_layout_segment_info){base, stream, small, expandable, {0, 0}};
    memset(&b->st[*id], 0, sizeof(b->st[*id]));
    h->n_segments++;
    return true;
}

/* The alive cudaMalloc'ed segment based at 'addr' (segment_alloc). */
static uint32_t seg_based(const struct hist *b, uint64_t addr)
{
    for (size_t i = 0; i < b->h->n_segments; i++)
        if (!b->h->segments[i].is_expandable && b->st[i].n && b->h->segments[i].base == addr)
            return (uint32_t)i;
    return UINT32_MAX;
}

/* The space (expandable pages of one stream and pool) of 'stream' where [addr, addr+size)
 * belongs: one whose pages hold or touch it, else the one whose base is the closest below
 * it; UINT32_MAX when none. */
static uint32_t space_of(const struct hist *b, uint64_t stream, uint64_t addr, uint64_t size)
{
    uint32_t below = UINT32_MAX;
    for (size_t i = 0; i < b->h->n_segments; i++) {
        const struct gm_layout_segment_info *s = &b->h->segments[i];
        const struct seg_state *st = &b->st[i];
        if (!s->is_expandable || s->stream != stream)
            continue;
        for (size_t r = 0; r < st->n; r++)
            if (st->r[r].addr <= addr + size && addr <= st->r[r].addr + st->r[r].size)
                return (uint32_t)i;
        if (s->base <= addr && (below == UINT32_MAX || s->base > b->h->segments[below].base))
            below = (uint32_t)i;
    }
    return below;
}

/* The space of (stream, small), created when missing, its base lowered to 'addr'. */
static bool space_get(struct hist *b, uint64_t stream, bool small, uint64_t addr, uint32_t *id)
{
    for (size_t i = 0; i < b->h->n_segments; i++) {
        struct gm_layout_segment_info *s = &b->h->segments[i];
        if (s->is_expandable && s->stream == stream && s->is_small == small) {
            if (addr < s->base)
                s->base = addr;
            *id = (uint32_t)i;
            return true;
        }
    }
    return new_segment(b, addr, stream, small, true, id);
}

/* A segment's pool, from the first place that names a private one. */
static void set_pool(struct gm_layout_segment_info *s, const int64_t pool[2])
{
    if (!s->pool_id[0] && !s->pool_id[1]) {
        s->pool_id[0] = pool[0];
        s->pool_id[1] = pool[1];
    }
}

static int cmp_final(const void *a, const void *b)
{
    const struct gm_layout_range *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

uint64_t gm_layout_block_size(const struct gm_layout_history *h, const struct gm_analysis_alloc *a)
{
    if (a->free_event < 0 && h->n_final_blocks) {
        size_t lo = 0, hi = h->n_final_blocks;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (h->final_blocks[mid].addr < a->addr)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < h->n_final_blocks && h->final_blocks[lo].addr == a->addr &&
            h->final_blocks[lo].size >= a->bytes)
            return h->final_blocks[lo].size;
    }
    return a->bytes < 512 ? 512 : (a->bytes + 511) / 512 * 512;
}

bool ana_layout_events_keep(struct ana_layout_events *s, int64_t k,
                            const struct gm_snapshot_event *e)
{
    if (!GM_VEC_RESERVE(s->ev, s->cap, s->n + 1, NULL))
        return false;
    s->ev[s->n].k = k;
    s->ev[s->n++].e = *e;
    return true;
}

void ana_layout_events_release(struct ana_layout_events *s)
{
    gm_free(s->ev);
    memset(s, 0, sizeof(*s));
}

enum gm_status gm_layout_history_build(const struct gm_snapshot *snap,
                                       const struct gm_snapshot_device *dev,
                                       struct gm_layout_history *h, struct gm_error *err)
{
    struct ana_layout_events s = {0};
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;

    gm_snapshot_cursor_init(&c, dev, 0);
    while ((e = gm_snapshot_cursor_next(&c)) != NULL)
        if (!ana_layout_events_see(&s, (int64_t)c.index, e)) {
            ana_layout_events_release(&s);
            memset(h, 0, sizeof(*h));
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "layout: out of memory for segments");
        }
    return ana_layout_history_of(snap, dev, &s, h, err);
}

enum gm_status ana_layout_history_of(const struct gm_snapshot *snap,
                                     const struct gm_snapshot_device *dev,
                                     struct ana_layout_events *s, struct gm_layout_history *h,
                                     struct gm_error *err)
{
    struct hist b;
    struct gm_layout_change *ch = NULL;
    size_t n_ev = s->n;
    struct ana_layout_event *ev = s->ev;

    memset(s, 0, sizeof(*s)); /* its events are ours now */
    memset(h, 0, sizeof(*h));
    memset(&b, 0, sizeof(b));
    b.h = h;
    /* the segments at the end: the snapshot's own */
    for (size_t i = 0; i < dev->n_segments; i++) {
        const struct gm_snapshot_segment *g = &snap->segments[dev->first_segment + i];
        uint32_t id;
        bool ok = g->is_expandable
                      ? space_get(&b, g->stream, g->is_small, g->address, &id)
                      : new_segment(&b, g->address, g->stream, g->is_small, false, &id);
        if (!ok || !ranges_add(&b.st[id], g->address, g->total_size))
            goto nomem;
        if (g->has_pool_id)
            set_pool(&h->segments[id], g->pool_id);
    }
    /* the file's active blocks, for the sizes of the allocations that live to the end */
    {
        size_t nf = 0;
        for (size_t i = 0; i < dev->n_segments; i++)
            nf += snap->segments[dev->first_segment + i].n_blocks;
        if (nf && !(h->final_blocks = gm_malloc(nf * sizeof(*h->final_blocks))))
            goto nomem;
        for (size_t i = 0; i < dev->n_segments; i++) {
            const struct gm_snapshot_segment *g = &snap->segments[dev->first_segment + i];
            for (size_t k = 0; k < g->n_blocks; k++)
                if (g->blocks[k].state == GM_BLOCK_ACTIVE_ALLOCATED ||
                    g->blocks[k].state == GM_BLOCK_ACTIVE_PENDING_FREE)
                    h->final_blocks[h->n_final_blocks++] =
                        (struct gm_layout_range){g->blocks[k].address, g->blocks[k].size};
        }
        if (h->n_final_blocks > 1)
            qsort(h->final_blocks, h->n_final_blocks, sizeof(*h->final_blocks), cmp_final);
    }
    if (n_ev && !(ch = gm_malloc(n_ev * sizeof(*ch))))
        goto nomem;
    /* undone from the last to the first, each one's segment decided on the way */
    for (size_t i = n_ev; i-- > 0;) {
        const struct gm_snapshot_event *x = &ev[i].e;
        uint64_t stream = gm_snapshot_event_stream(snap, x);
        uint32_t id = UINT32_MAX;
        int8_t op = 1;
        switch (x->action) {
        case GM_ACTION_SEGMENT_ALLOC:
            id = seg_based(&b, x->addr);
            if (id == UINT32_MAX &&
                !new_segment(&b, x->addr, stream, x->size == SMALL_SEGMENT, false, &id))
                goto nomem;
            if (!ranges_sub(&b.st[id], x->addr, x->size))
                goto nomem;
            break;
        case GM_ACTION_SEGMENT_FREE:
            op = -1;
            if (!new_segment(&b, x->addr, stream, x->size == SMALL_SEGMENT, false, &id) ||
                !ranges_add(&b.st[id], x->addr, x->size))
                goto nomem;
            break;
        case GM_ACTION_SEGMENT_MAP:
        case GM_ACTION_SEGMENT_UNMAP:
            op = x->action == GM_ACTION_SEGMENT_MAP ? 1 : -1;
            id = space_of(&b, stream, x->addr, x->size);
            if (id == UINT32_MAX && !space_get(&b, stream, x->size < LARGE_PAGE, x->addr, &id))
                goto nomem;
            if (!(op > 0 ? ranges_sub(&b.st[id], x->addr, x->size)
                         : ranges_add(&b.st[id], x->addr, x->size)))
                goto nomem;
            if (x->addr < b.h->segments[id].base)
                b.h->segments[id].base = x->addr;
            break;
        default:
            break;
        }
        if (id != UINT32_MAX && (x->flags & GM_EVENT_HAS_POOL_ID) && x->extra &&
            x->extra <= snap->n_extras)
            set_pool(&b.h->segments[id], snap->extras[x->extra - 1].pool_id);
        ch[i] = (struct gm_layout_change){ev[i].k, id, op, x->addr, x->size};
    }
    h->changes = ch;
    h->n_changes = n_ev;
    ch = NULL;
    /* what the walk arrived at is the state before the first event */
    {
        size_t n0 = 0;
        for (size_t i = 0; i < h->n_segments; i++)
            n0 += b.st[i].n;
        h->initial = gm_malloc((n0 ? n0 : 1) * sizeof(*h->initial));
        if (!h->initial)
            goto nomem;
        for (size_t i = 0; i < h->n_segments; i++)
            for (size_t r = 0; r < b.st[i].n; r++)
                h->initial[h->n_initial++] = (struct gm_layout_change){
                    -1, (uint32_t)i, 1, b.st[i].r[r].addr, b.st[i].r[r].size};
    }
    for (size_t i = 0; i < h->n_segments; i++)
        gm_free(b.st[i].r);
    gm_free(b.st);
    gm_free(ev);
    return GM_OK;
nomem:
    for (size_t i = 0; b.st && i < h->n_segments; i++)
        gm_free(b.st[i].r);
    gm_free(b.st);
    gm_free(ev);
    gm_free(ch);
    gm_layout_history_release(h);
    return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "layout: out of memory for segments");
}

const struct gm_layout_history *gm_analysis_layout_history(const struct gm_analysis_device *dev)
{
    return dev && dev->priv_ ? dev->priv_->layout : NULL;
}

void gm_layout_history_release(struct gm_layout_history *h)
{
    if (!h)
        return;
    gm_free(h->segments);
    gm_free(h->final_blocks);
    gm_free(h->initial);
    gm_free(h->changes);
    memset(h, 0, sizeof(*h));
}

/* ---- the state at moments ---- */

static int cmp_seg_base(const void *a, const void *b)
{
    const struct gm_layout_segment *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Whether the segments are in order of base already (those listed by a snapshot, and
 * cudaMalloc handing out rising addresses, most often are): the sort is then no change. */
static bool segs_sorted(const struct gm_layout_segment *g, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (g[i].addr < g[i - 1].addr)
            return false;
    return true;
}

static int cmp_block_addr(const void *a, const void *b)
{
    const struct gm_layout_block *x = a, *y = b;
    if (x->addr != y->addr)
        return x->addr < y->addr ? -1 : 1;
    return x->alloc < y->alloc ? -1 : x->alloc > y->alloc;
}

struct walk {
    const struct gm_analysis *an;
    const struct gm_analysis_device *dev;
    const struct gm_layout_history *h;
    const int64_t *ks;
    gm_layout_fn fn;
    void *ctx;
    struct seg_state *st; /* per segment id, the current ranges */
    size_t next_change;
    /* the layout handed out, rebuilt at each moment */
    struct gm_layout out;
    struct gm_layout_segment *segs;
    struct gm_layout_range *ranges;
    struct gm_layout_block *blocks;
    size_t cap_segs, cap_ranges, cap_blocks;
    bool pages_only; /* gm_layout_pages_at(): no blocks */
};

static enum gm_status at_moment(void *ctx, size_t i, const uint32_t *live, size_t n_live,
                                struct gm_error *err)
{
    struct walk *w = ctx;
    const struct gm_layout_history *h = w->h;
    int64_t k = w->ks[i];
    size_t ns = 0, nr = 0, nb = 0;

    for (; w->next_change < h->n_changes && h->changes[w->next_change].event <= k;
         w->next_change++) {
        const struct gm_layout_change *c = &h->changes[w->next_change];
        bool ok = c->op > 0 ? ranges_add(&w->st[c->segment], c->addr, c->size)
                            : ranges_sub(&w->st[c->segment], c->addr, c->size);
        if (!ok)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "layout: out of memory");
    }
    /* the segments with pages: a cudaMalloc'ed one whole, an expandable space one
     * segment per run of mapped pages */
    for (size_t s = 0; s < h->n_segments; s++) {
        const struct seg_state *st = &w->st[s];
        const struct gm_layout_segment_info *si = &h->segments[s];
        size_t n_seg = si->is_expandable ? st->n : st->n ? 1 : 0;
        if (!st->n)
            continue;
        if (!GM_VEC_RESERVE(w->segs, w->cap_segs, ns + n_seg, NULL) ||
            !GM_VEC_RESERVE(w->ranges, w->cap_ranges, nr + st->n, NULL))
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "layout: out of memory");
        memcpy(&w->ranges[nr], st->r, st->n * sizeof(*st->r));
        for (size_t q = 0; q < n_seg; q++) {
            struct gm_layout_segment *g = &w->segs[ns++];
            memset(g, 0, sizeof(*g));
            g->id = (uint32_t)s;
            g->stream = si->stream;
            g->is_small = si->is_small;
            g->is_expandable = si->is_expandable;
            if (si->is_expandable) {
                g->addr = st->r[q].addr;
                g->size = g->mapped = st->r[q].size;
                g->first_range = nr + q;
                g->n_ranges = 1;
            } else {
                g->addr = si->base < st->r[0].addr ? si->base : st->r[0].addr;
                g->size = ranges_end(st) - g->addr;
                g->first_range = nr;
                g->n_ranges = st->n;
                for (size_t r = 0; r < st->n; r++)
                    g->mapped += st->r[r].size;
            }
        }
        nr += st->n;
    }
    if (ns > 1 && !segs_sorted(w->segs, ns)) {
        /* sort by base, keeping each segment's ranges with it */
        qsort(w->segs, ns, sizeof(*w->segs), cmp_seg_base);
    }
    memset(&w->out, 0, sizeof(w->out));
    w->out.event = k;
    if (w->pages_only) {
        for (size_t s = 0; s < ns; s++)
            w->out.reserved += w->segs[s].mapped;
        goto out_call;
    }
    /* the blocks, in the segment holding their address */
    if (!GM_VEC_RESERVE(w->blocks, w->cap_blocks, n_live ? n_live : 1, NULL))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "layout: out of memory");
    for (size_t j = 0; j < n_live; j++) {
        const struct gm_analysis_alloc *a = &w->dev->allocs[live[j]];
        struct gm_layout_block *bl;
        size_t lo = 0, hi = ns;
        const struct gm_layout_range *r = NULL;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (w->segs[mid].addr <= a->addr)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0) {
            const struct gm_layout_segment *g = &w->segs[lo - 1];
            for (size_t q = 0; q < g->n_ranges; q++) {
                const struct gm_layout_range *x = &w->ranges[g->first_range + q];
                if (a->addr >= x->addr && a->addr - x->addr < x->size) {
                    r = x;
                    break;
                }
            }
        }
        if (!r) {
            w->out.n_outside++;
            w->out.outside_bytes += a->bytes;
            continue;
        }
        bl = &w->blocks[nb++];
        bl->addr = a->addr;
        bl->size = gm_layout_block_size(h, a);
        if (bl->size > r->addr + r->size - a->addr)
            bl->size = r->addr + r->size - a->addr;
        bl->bytes = a->bytes < bl->size ? a->bytes : bl->size;
        bl->alloc = live[j];
        bl->stack = a->stack;
        bl->category = a->category;
        bl->pending_free = a->free_requested_event >= 0 && a->free_requested_event <= k;
    }
    if (nb > 1)
        qsort(w->blocks, nb, sizeof(*w->blocks), cmp_block_addr);
    /* each segment's blocks: a run of the address-sorted blocks */
    for (size_t s = 0, b = 0; s < ns; s++) {
        struct gm_layout_segment *g = &w->segs[s];
        uint64_t end = g->addr + g->size;
        while (b < nb && w->blocks[b].addr < g->addr)
            b++; /* cannot happen: every block is in a segment */
        g->first_block = b;
        while (b < nb && w->blocks[b].addr < end) {
            g->allocated += w->blocks[b].size;
            g->requested += w->blocks[b].bytes;
            b++;
        }
        g->n_blocks = b - g->first_block;
        w->out.reserved += g->mapped;
        w->out.allocated += g->allocated;
        w->out.requested += g->requested;
    }
    w->out.blocks = w->blocks;
    w->out.n_blocks = nb;
out_call:
    w->out.segments = w->segs;
    w->out.n_segments = ns;
    w->out.ranges = w->ranges;
    w->out.n_ranges = nr;
    w->out.live = live;
    w->out.n_live = n_live;
    return w->fn(w->ctx, i, &w->out, err);
}

static enum gm_status layout_at(const struct gm_analysis *an, const struct gm_analysis_device *dev,
                                const struct gm_layout_history *hist, const int64_t *ks, size_t n,
                                bool pages_only, gm_layout_fn fn, void *ctx, struct gm_error *err)
{
    const struct gm_snapshot *snap = an->snap;
    const struct gm_snapshot_device *sd = gm_snapshot_device_by_index(snap, dev->device);
    struct walk w;
    enum gm_status st = gm_analysis_require_whole(an, "layout", err);

    if (st != GM_OK)
        return st;
    if (!sd)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "the snapshot has no device %d",
                       (int)dev->device);
    if (!hist && !(hist = gm_analysis_layout_history(dev)))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "the analysis has no layout history of device %d", (int)dev->device);
    if (!n)
        return GM_OK;
    memset(&w, 0, sizeof(w));
    w.an = an;
    w.dev = dev;
    w.h = hist;
    w.ks = ks;
    w.fn = fn;
    w.ctx = ctx;
    w.pages_only = pages_only;
    w.st = gm_calloc(hist->n_segments ? hist->n_segments : 1, sizeof(*w.st));
    if (!w.st)
        goto nomem;
    for (size_t i = 0; i < hist->n_initial; i++) {
        const struct gm_layout_change *c = &hist->initial[i];
        if (!ranges_add(&w.st[c->segment], c->addr, c->size))
            goto nomem;
    }
    st = gm_analysis_live_at(an, dev, ks, n, at_moment, &w, err);
    goto out;
nomem:
    st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "layout: out of memory");
out:
    for (size_t i = 0; w.st && i < hist->n_segments; i++)
        gm_free(w.st[i].r);
    gm_free(w.st);
    gm_free(w.segs);
    gm_free(w.ranges);
    gm_free(w.blocks);
    return st;
}

enum gm_status gm_layout_at(const struct gm_analysis *an, const struct gm_analysis_device *dev,
                            const struct gm_layout_history *hist, const int64_t *ks, size_t n,
                            gm_layout_fn fn, void *ctx, struct gm_error *err)
{
    return layout_at(an, dev, hist, ks, n, false, fn, ctx, err);
}

enum gm_status gm_layout_pages_at(const struct gm_analysis *an,
                                  const struct gm_analysis_device *dev,
                                  const struct gm_layout_history *hist, const int64_t *ks, size_t n,
                                  gm_layout_fn fn, void *ctx, struct gm_error *err)
{
    return layout_at(an, dev, hist, ks, n, true, fn, ctx, err);
}
