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

/* The figures at moment k: the live allocations (indexes into dev->allocs) laid into the
 * ranges. */
static enum gm_status compute_at(const struct gm_snapshot *snap,
                                 const struct gm_snapshot_device *sd,
                                 const struct gm_analysis_device *dev, struct gm_arena *arena,
                                 const struct ranges *rs, int64_t k, struct gm_analysis_frag *f,
                                 const uint32_t *live_idx, size_t n_live, struct live *buf,
                                 struct gm_error *err)
{
    struct gm_snapshot_event ev;
    memset(f, 0, sizeof(*f));
    f->event = k;
    f->phase = (uint8_t)gm_analysis_phase_at(dev, k);
    size_t nl = 0;
    for (size_t i = 0; i < n_live; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[live_idx[i]];
        f->at_event[a->category] += a->bytes;
        uint64_t sz = round512(a->bytes);
        if (!sz)
            continue;
        f->allocated += sz;
        buf[nl].addr = a->addr;
        buf[nl].size = sz;
        nl++;
    }
    if (nl > 1)
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
    if (k >= 0 && gm_snapshot_event_at(sd, (size_t)k, &ev) && ev.action == GM_ACTION_OOM) {
        f->is_oom = true;
        f->requested = ev.size;
        f->device_free = gm_snapshot_event_device_free(&ev);
        f->stack = ev.stack;
        f->verdict = (uint8_t)verdict_of(f, gm_snapshot_event_stream(snap, &ev));
    }
    return GM_OK;
}

/* A segment event of the device, and its index. */
struct segev {
    int64_t k;
    struct gm_snapshot_event e;
};

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

/* The state of the pass that computes every target (see gm_analysis_live_at()). */
struct frag_pass {
    const struct gm_snapshot *snap;
    const struct gm_snapshot_device *sd;
    const struct gm_analysis_device *dev;
    struct gm_arena *arena;
    const struct ana_frag_target *targets;
    struct ranges rs;
    const struct segev *segev;
    size_t n_segev, si;
    struct live *buf;
    size_t cap_buf;
};

static enum gm_status at_target(void *ctx, size_t t, const uint32_t *live, size_t n_live,
                                struct gm_error *err)
{
    struct frag_pass *fp = ctx;
    int64_t k = fp->targets[t].event;
    for (; fp->si < fp->n_segev && fp->segev[fp->si].k <= k; fp->si++)
        if (!apply_event(fp->snap, &fp->rs, &fp->segev[fp->si].e, true))
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for segments");
    if (n_live > fp->cap_buf) {
        struct live *v = gm_realloc(fp->buf, n_live * sizeof(*v));
        if (!v)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
        fp->buf = v;
        fp->cap_buf = n_live;
    }
    return compute_at(fp->snap, fp->sd, fp->dev, fp->arena, &fp->rs, k, fp->targets[t].out, live,
                      n_live, fp->buf, err);
}

enum gm_status ana_frag_compute(const struct gm_snapshot *snap, const struct gm_snapshot_device *sd,
                                const struct gm_analysis *an, const struct gm_analysis_device *dev,
                                struct gm_arena *arena, const struct ana_frag_target *targets,
                                size_t n_targets, struct gm_error *err)
{
    struct frag_pass fp;
    struct segev *segev = NULL;
    size_t n_segev = 0, cap_segev = 0;
    int64_t *ks = NULL;
    enum gm_status st = GM_OK;

    memset(&fp, 0, sizeof(fp));
    for (size_t s = 0; s < snap->n_segments; s++) {
        const struct gm_snapshot_segment *seg = &snap->segments[s];
        if (seg->device == sd->index &&
            !ranges_add(&fp.rs, seg->address, seg->total_size, seg->stream, seg->is_small))
            goto nomem;
    }
    /* the segment events, in one pass: undone from the end to get the layout at the start,
     * then redone up to each target */
    {
        struct gm_snapshot_cursor c;
        const struct gm_snapshot_event *e;
        gm_snapshot_cursor_init(&c, sd, 0);
        while ((e = gm_snapshot_cursor_next(&c)) != NULL) {
            if (e->action < GM_ACTION_SEGMENT_ALLOC || e->action > GM_ACTION_SEGMENT_UNMAP)
                continue;
            if (n_segev == cap_segev) {
                size_t ncap = cap_segev ? cap_segev * 2 : 64;
                struct segev *v = gm_realloc(segev, ncap * sizeof(*v));
                if (!v)
                    goto nomem;
                segev = v;
                cap_segev = ncap;
            }
            segev[n_segev].k = (int64_t)c.index;
            segev[n_segev++].e = *e;
        }
    }
    for (size_t i = n_segev; i-- > 0;)
        if (!apply_event(snap, &fp.rs, &segev[i].e, false))
            goto nomem;
    ks = gm_malloc((n_targets ? n_targets : 1) * sizeof(*ks));
    if (!ks)
        goto nomem;
    for (size_t t = 0; t < n_targets; t++)
        ks[t] = targets[t].event;
    fp.snap = snap;
    fp.sd = sd;
    fp.dev = dev;
    fp.arena = arena;
    fp.targets = targets;
    fp.segev = segev;
    fp.n_segev = n_segev;
    st = gm_analysis_live_at(an, dev, ks, n_targets, at_target, &fp, err);
    goto out;
nomem:
    st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for segments");
out:
    gm_free(fp.rs.v);
    gm_free(fp.buf);
    gm_free(segev);
    gm_free(ks);
    return st;
}
