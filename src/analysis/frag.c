/* SPDX-License-Identifier: MIT */
/* frag.c - free memory inside the reserved segments at a given moment, per pool and
 * stream, and the verdict of an out-of-memory event (shortage or fragmentation).
 *
 * The segment layout is replayed: the ranges at the start of the trace are the snapshot's
 * final segments with every segment_alloc/segment_map undone and every segment_free/
 * segment_unmap redone, walking the trace backwards; the trace is then replayed forwards
 * to each target moment.  Live allocations at that moment (the analysis' allocation
 * intervals, sizes rounded up to 512 bytes as the caching allocator does) are laid into
 * the ranges, and the gaps between them are the free ranges.  Adjacent ranges of one
 * stream and pool are merged (expandable segments grow by adjacent mappings).
 * Approximation: a block that the allocator did not split keeps a tail larger than the
 * 512-byte rounding (up to 1 MiB in the large pool); that tail is counted as free here. */
#include "analysis/analysis_int.h"

#include "gpumem/arena.h"
#include "gpumem/units.h"

#include <stdlib.h>
#include <string.h>

#define SMALL_SEGMENT ((uint64_t)2 << 20)
#define SMALL_REQUEST ((uint64_t)1 << 20)

struct range {
    uint64_t addr;
    uint64_t size;
    uint64_t stream;
    bool small;
};

struct ranges {
    struct range *v;
    size_t n, cap;
};

static bool ranges_reserve(struct ranges *r, size_t extra)
{
    if (r->n + extra <= r->cap)
        return true;
    size_t cap = r->cap ? r->cap : 64;
    while (cap < r->n + extra)
        cap *= 2;
    struct range *v = gm_realloc(r->v, cap * sizeof(*v));
    if (!v)
        return false;
    r->v = v;
    r->cap = cap;
    return true;
}

/* Remove [addr, addr+size) from every range it overlaps (splitting as needed). */
static bool ranges_remove(struct ranges *r, uint64_t addr, uint64_t size)
{
    uint64_t end = addr + size;
    for (size_t i = 0; i < r->n; i++) {
        struct range *x = &r->v[i];
        uint64_t xe = x->addr + x->size;
        if (xe <= addr || x->addr >= end)
            continue;
        bool left = x->addr<addr, right = xe> end;
        if (left && right) {
            if (!ranges_reserve(r, 1))
                return false;
            x = &r->v[i];
            memmove(&r->v[i + 2], &r->v[i + 1], (r->n - i - 1) * sizeof(*x));
            r->v[i + 1] = *x;
            r->v[i + 1].addr = end;
            r->v[i + 1].size = xe - end;
            x->size = addr - x->addr;
            r->n++;
            i++;
        } else if (left) {
            x->size = addr - x->addr;
        } else if (right) {
            x->size = xe - end;
            x->addr = end;
        } else {
            memmove(&r->v[i], &r->v[i + 1], (r->n - i - 1) * sizeof(*x));
            r->n--;
            i--;
        }
    }
    return true;
}

/* Add [addr, addr+size) (after removing any overlap), keeping the array sorted. */
static bool ranges_add(struct ranges *r, uint64_t addr, uint64_t size, uint64_t stream, bool small)
{
    if (!size)
        return true;
    if (!ranges_remove(r, addr, size) || !ranges_reserve(r, 1))
        return false;
    size_t i = 0;
    while (i < r->n && r->v[i].addr < addr)
        i++;
    memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof(r->v[0]));
    r->v[i].addr = addr;
    r->v[i].size = size;
    r->v[i].stream = stream;
    r->v[i].small = small;
    r->n++;
    return true;
}

struct live {
    uint64_t addr;
    uint64_t size;
};

static int cmp_live(const void *a, const void *b)
{
    const struct live *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

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

static enum gm_status compute_at(const struct gm_snapshot *snap,
                                 const struct gm_snapshot_device *sd,
                                 const struct gm_analysis_device *dev, struct gm_arena *arena,
                                 const struct ranges *rs, int64_t k, struct gm_analysis_frag *f,
                                 struct live *buf, struct gm_error *err)
{
    memset(f, 0, sizeof(*f));
    f->event = k;
    f->phase = (uint8_t)gm_analysis_phase_at(dev, k);
    size_t nl = 0;
    for (size_t i = 0; i < dev->n_allocs; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        if (a->alloc_event > k || (a->free_event >= 0 && a->free_event <= k))
            continue;
        f->at_event[a->category] += a->bytes;
        uint64_t sz = round512(a->bytes);
        if (!sz)
            continue;
        f->allocated += sz;
        buf[nl].addr = a->addr;
        buf[nl].size = sz;
        nl++;
    }
    qsort(buf, nl, sizeof(*buf), cmp_live);

    f->pools = gm_arena_calloc(arena, rs->n ? rs->n : 1, sizeof(*f->pools));
    if (!f->pools)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for pools");
    size_t li = 0;
    for (size_t i = 0; i < rs->n;) {
        /* A region: adjacent ranges of one stream and pool. */
        const struct range *r0 = &rs->v[i];
        uint64_t start = r0->addr, end = r0->addr + r0->size;
        uint32_t nseg = 1;
        size_t j = i + 1;
        while (j < rs->n && rs->v[j].addr == end && rs->v[j].stream == r0->stream &&
               rs->v[j].small == r0->small) {
            end += rs->v[j].size;
            nseg++;
            j++;
        }
        struct gm_analysis_pool_free *p = pool_of(f->pools, &f->n_pools, r0->stream, r0->small);
        p->reserved += end - start;
        p->n_segments += nseg;
        f->reserved += end - start;
        while (li < nl && buf[li].addr < start)
            li++;
        uint64_t pos = start, used = 0;
        for (; li < nl && buf[li].addr < end; li++) {
            uint64_t a = buf[li].addr, e = a + buf[li].size;
            if (e > end)
                e = end;
            if (a > pos && a - pos > p->largest_free)
                p->largest_free = a - pos;
            if (e > pos) {
                used += e - (a > pos ? a : pos);
                pos = e;
            }
        }
        if (end > pos && end - pos > p->largest_free)
            p->largest_free = end - pos;
        p->free += (end - start) - used;
        if (p->largest_free > f->largest_free)
            f->largest_free = p->largest_free;
        i = j;
    }
    f->reserved_unallocated = f->reserved > f->allocated ? f->reserved - f->allocated : 0;
    if (k >= 0 && sd->events[k].action == GM_ACTION_OOM) {
        const struct gm_snapshot_event *e = &sd->events[k];
        f->is_oom = true;
        f->requested = e->size;
        f->device_free = gm_snapshot_event_device_free(e);
        f->stack = e->stack;
        f->verdict = (uint8_t)verdict_of(f, gm_snapshot_event_stream(snap, e));
    }
    return GM_OK;
}

static bool apply_event(const struct gm_snapshot *snap, struct ranges *rs,
                        const struct gm_snapshot_event *e, bool forward)
{
    bool add;
    switch (e->action) {
    case GM_ACTION_SEGMENT_ALLOC:
    case GM_ACTION_SEGMENT_MAP:
        add = forward;
        break;
    case GM_ACTION_SEGMENT_FREE:
    case GM_ACTION_SEGMENT_UNMAP:
        add = !forward;
        break;
    default:
        return true;
    }
    if (add)
        return ranges_add(rs, e->addr, e->size, gm_snapshot_event_stream(snap, e),
                          e->size == SMALL_SEGMENT);
    return ranges_remove(rs, e->addr, e->size);
}

enum gm_status ana_frag_compute(const struct gm_snapshot *snap, const struct gm_snapshot_device *sd,
                                const struct gm_analysis_device *dev, struct gm_arena *arena,
                                const struct ana_frag_target *targets, size_t n_targets,
                                struct gm_error *err)
{
    struct ranges rs = {0};
    enum gm_status st = GM_OK;
    struct live *buf = gm_malloc((dev->n_allocs ? dev->n_allocs : 1) * sizeof(*buf));
    if (!buf)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
    for (size_t s = 0; s < snap->n_segments; s++) {
        const struct gm_snapshot_segment *seg = &snap->segments[s];
        if (seg->device == sd->index &&
            !ranges_add(&rs, seg->address, seg->total_size, seg->stream, seg->is_small))
            goto nomem;
    }
    for (size_t k = sd->n_events; k-- > 0;)
        if (!apply_event(snap, &rs, &sd->events[k], false))
            goto nomem;
    size_t t = 0;
    for (int64_t k = -1; k < (int64_t)sd->n_events && t < n_targets; k++) {
        if (k >= 0 && !apply_event(snap, &rs, &sd->events[k], true))
            goto nomem;
        while (t < n_targets && targets[t].event <= k) {
            st = compute_at(snap, sd, dev, arena, &rs, k, targets[t].out, buf, err);
            if (st != GM_OK)
                goto out;
            t++;
        }
    }
    goto out;
nomem:
    st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for segments");
out:
    gm_free(rs.v);
    gm_free(buf);
    return st;
}
