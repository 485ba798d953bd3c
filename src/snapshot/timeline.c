/* SPDX-License-Identifier: MIT */
/* timeline.c - memory over a device's trace, as memory_viz's Active Memory Timeline
 * computes it (semantics in include/gpumem/snapshot.h, above gm_snapshot_timeline()).
 *
 * Pass 1 pairs each alloc with the free_completed at its address (an address map, like
 * memory_viz's addr_to_alloc) and collects the allocations alive from the start.  Pass 2
 * runs the total forward from the initial bytes and finds the first maximum.  Reserved
 * bytes need no arrays: their total change over the trace is summed first, so the initial
 * value is the snapshot's segment total minus that change. */
#include "snapshot/snapshot_int.h"

#include "base/big.h"

#include "gpumem/arena.h"

#include <stdlib.h>
#include <string.h>

/* 16 bytes: a trace of millions of allocations is one such array.  The address and stack
 * are those of event alloc_ev (or, alive from the start, free_ev); the elements after the
 * trace's are the blocks alive at snapshot time (alloc_ev -1, free_ev NEVER), whose block
 * is in a side array (struct bref). */
struct elem {
    uint64_t bytes;
    int32_t alloc_ev; /* -1: alive from the start */
    int32_t free_ev;  /* NEVER: not freed in the trace */
};

/* A block alive at snapshot time. */
struct bref {
    uint32_t seg, blk;
};

#define NEVER INT32_MAX

struct elems {
    struct elem *v;
    size_t n, cap;
};

static bool push_elem(struct elems *e, const struct elem *x)
{
    if (e->n == e->cap && !gm_big_grow((void **)&e->v, &e->cap, e->n + 1, sizeof(*x), 256))
        return false;
    e->v[e->n++] = *x;
    return true;
}

/* The allocations pending a free, by address: an open-addressing map inlined into the
 * pass over the trace (a trace of millions of events does one look-up each), with slots
 * of key and value together, at most half full, linear probing and backward-shift
 * deletion.  Training traces keep a few thousand allocations pending, so the map stays in
 * cache. */
struct addr_slot {
    uint64_t addr;
    uint32_t val; /* AM_EMPTY: a free slot */
};

#define AM_EMPTY UINT32_MAX

struct addr_map {
    struct addr_slot *s;
    size_t mask; /* slots - 1; slots a power of two, 0 when none */
    size_t n;
};

static inline size_t am_home(const struct addr_map *m, uint64_t addr)
{
    return (size_t)((addr * 0x9e3779b97f4a7c15ULL) >> 32) & m->mask;
}

static bool am_grow(struct addr_map *m)
{
    size_t ncap = m->s ? (m->mask + 1) * 2 : 1024, nmask = ncap - 1;
    struct addr_slot *ns;
    if (ncap > SIZE_MAX / sizeof(*ns) || !(ns = gm_malloc(ncap * sizeof(*ns))))
        return false;
    for (size_t i = 0; i < ncap; i++)
        ns[i].val = AM_EMPTY;
    for (size_t j = 0; m->s && j <= m->mask; j++) {
        size_t i;
        if (m->s[j].val == AM_EMPTY)
            continue;
        for (i = (size_t)((m->s[j].addr * 0x9e3779b97f4a7c15ULL) >> 32) & nmask;
             ns[i].val != AM_EMPTY; i = (i + 1) & nmask)
            ;
        ns[i] = m->s[j];
    }
    gm_free(m->s);
    m->s = ns;
    m->mask = nmask;
    return true;
}

/* addr -> val, replacing the value of a pending allocation at the same address. */
static inline bool am_set(struct addr_map *m, uint64_t addr, uint32_t val)
{
    size_t i;
    if (!m->s || (m->n + 1) * 2 > m->mask + 1) {
        if (!am_grow(m))
            return false;
    }
    for (i = am_home(m, addr); m->s[i].val != AM_EMPTY; i = (i + 1) & m->mask) {
        if (m->s[i].addr == addr) {
            m->s[i].val = val;
            return true;
        }
    }
    m->s[i].addr = addr;
    m->s[i].val = val;
    m->n++;
    return true;
}

static inline size_t am_slot(const struct addr_map *m, uint64_t addr)
{
    if (!m->s)
        return SIZE_MAX;
    for (size_t i = am_home(m, addr); m->s[i].val != AM_EMPTY; i = (i + 1) & m->mask)
        if (m->s[i].addr == addr)
            return i;
    return SIZE_MAX;
}

/* The value at 'addr', removed from the map; AM_EMPTY when there is none. */
static inline uint32_t am_take(struct addr_map *m, uint64_t addr)
{
    size_t i = am_slot(m, addr), j;
    uint32_t val;
    if (i == SIZE_MAX)
        return AM_EMPTY;
    val = m->s[i].val;
    /* backward-shift the rest of the cluster into the hole */
    for (j = (i + 1) & m->mask; m->s[j].val != AM_EMPTY; j = (j + 1) & m->mask) {
        size_t home = am_home(m, m->s[j].addr);
        /* j moves into i unless its home lies cyclically in (i, j] */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            m->s[i] = m->s[j];
            i = j;
        }
    }
    m->s[i].val = AM_EMPTY;
    m->n--;
    return val;
}

static int cmp_live(const void *pa, const void *pb)
{
    const struct gm_snapshot_live *a = pa, *b = pb;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    if (a->addr != b->addr)
        return a->addr < b->addr ? -1 : 1;
    return a->alloc_event < b->alloc_event ? -1 : a->alloc_event > b->alloc_event;
}

/* Reserved bytes as an unsigned value interpreted as signed, clamped at 0. */
static uint64_t clamp_signed(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? 0 : v;
}

static int64_t reserved_delta_sign(uint8_t action)
{
    switch (action) {
    case GM_ACTION_SEGMENT_ALLOC:
    case GM_ACTION_SEGMENT_MAP:
        return 1;
    case GM_ACTION_SEGMENT_FREE:
    case GM_ACTION_SEGMENT_UNMAP:
        return -1;
    default:
        return 0;
    }
}

/* Sizes below this, summed over a whole trace, cannot overflow or go below zero in the
 * one-pass computation (see timeline()). */
#define ONE_PASS_LIMIT ((uint64_t)1 << 62)

/* one_pass (no per-event points wanted): the peaks are found during pass 1, with no
 * per-event array and no pass 2.  Allocated bytes after event k are the initial bytes
 * (known only after pass 1) plus a running sum 'rel'; reserved bytes likewise the initial
 * reserved bytes plus the change so far 'res_change'.  A constant offset does not move the first
 * maximum, so the first maximum of rel (when above 0) is the allocated peak, and that of res_change
 * the reserved one.  This equals pass 2's result when no sum can saturate or wrap, which holds when
 * all sizes together stay below ONE_PASS_LIMIT; otherwise *redo is set and nothing is returned, and
 * the caller runs the two-pass computation. */
static enum gm_status timeline(const struct gm_snapshot *snap, int32_t index, bool want_points,
                               bool one_pass, bool *redo, struct gm_snapshot_timeline *out,
                               struct gm_error *err)
{
    const struct gm_snapshot_device *d = gm_snapshot_device_by_index(snap, index);
    struct elems el = {NULL, 0, 0};
    struct addr_map pending = {NULL, 0, 0}; /* addr -> element index */
    int32_t *touch = NULL;                  /* per event: element index or -1 */
    uint64_t total, best, res, res_final = 0, res_change = 0;
    int64_t best_k = -1;
    size_t n;
    /* one_pass: running sums (as signed), their first maxima, all sizes summed */
    uint64_t rel = 0, best_rel = 0, best_rr = 0, rr_at_best = 0, mag = 0;
    bool mag_over = false;
    int64_t best_rr_k = -1;
    struct bref *brefs = NULL; /* the blocks among the elements, from first_block on */
    size_t first_block = 0;

    memset(out, 0, sizeof(*out));
    if (!d)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "the snapshot has no device %d", index);
    out->device = index;
    n = d->n_events;
    if (n >= (size_t)INT32_MAX - 1)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET,
                       "timeline: device %d has %zu events (at most %d supported)", index, n,
                       INT32_MAX - 2);
    out->n_points = n + 1;
    if (n && !one_pass) {
        touch = gm_malloc(n * sizeof(*touch));
        if (!touch)
            goto out_nomem;
    }

    /* pass 1: pair allocs with free_completed.  one_pass: the allocated sum rises only at an
     * alloc and the reserved one only at a segment alloc or map, so their first maxima are
     * looked for there alone. */
    for (size_t k = 0; k < n; k++) {
        const struct gm_snapshot_event *e = &d->events[k];
        int32_t t = -1;
        mag_over |= __builtin_add_overflow(mag, e->size, &mag);
        if (e->action == GM_ACTION_ALLOC) {
            struct elem x = {e->size, (int32_t)k, NEVER};
            if (el.n >= INT32_MAX - 1 || !push_elem(&el, &x))
                goto out_nomem;
            if (!am_set(&pending, e->addr, (uint32_t)(el.n - 1)))
                goto out_nomem;
            t = (int32_t)(el.n - 1);
            rel += e->size;
            if ((int64_t)rel > (int64_t)best_rel) {
                best_rel = rel;
                best_k = (int64_t)k;
                rr_at_best = res_change;
            }
        } else if (e->action == GM_ACTION_FREE_COMPLETED) {
            uint32_t idx = am_take(&pending, e->addr);
            if (idx != AM_EMPTY) {
                el.v[idx].free_ev = (int32_t)k;
                t = (int32_t)idx;
                out->n_allocs_matched++;
                rel -= el.v[idx].bytes;
            } else {
                /* freed without an alloc in the trace: alive from the start */
                struct elem x = {e->size, -1, (int32_t)k};
                if (el.n >= INT32_MAX - 1 || !push_elem(&el, &x))
                    goto out_nomem;
                t = (int32_t)(el.n - 1);
                rel -= e->size;
            }
        } else if (e->action == GM_ACTION_SEGMENT_ALLOC || e->action == GM_ACTION_SEGMENT_MAP) {
            res_change += e->size;
            if ((int64_t)res_change > (int64_t)best_rr) {
                best_rr = res_change;
                best_rr_k = (int64_t)k;
            }
        } else if (e->action == GM_ACTION_SEGMENT_FREE || e->action == GM_ACTION_SEGMENT_UNMAP) {
            res_change -= e->size;
        }
        if (touch)
            touch[k] = t;
    }
    if (mag_over)
        mag = UINT64_MAX;
    /* blocks allocated at snapshot time with no alloc pending at the end: from the start */
    first_block = el.n;
    {
        size_t nb = 0;
        for (size_t si = d->first_segment; si < d->first_segment + d->n_segments; si++)
            nb += snap->segments[si].n_blocks;
        if (nb && !(brefs = gm_malloc(nb * sizeof(*brefs))))
            goto out_nomem;
    }
    for (size_t si = d->first_segment; si < d->first_segment + d->n_segments; si++) {
        const struct gm_snapshot_segment *seg = &snap->segments[si];
        res_final += seg->total_size;
        mag = snap_sat_add(mag, seg->total_size);
        for (size_t bi = 0; bi < seg->n_blocks; bi++) {
            const struct gm_snapshot_block *b = &seg->blocks[bi];
            struct elem x;
            if (b->state != GM_BLOCK_ACTIVE_ALLOCATED || am_slot(&pending, b->address) != SIZE_MAX)
                continue;
            x.bytes = b->requested_size;
            mag = snap_sat_add(mag, b->requested_size);
            brefs[el.n - first_block].seg = (uint32_t)si;
            brefs[el.n - first_block].blk = (uint32_t)bi;
            x.alloc_ev = -1;
            x.free_ev = NEVER;
            if (el.n >= INT32_MAX - 1 || !push_elem(&el, &x))
                goto out_nomem;
        }
    }
    gm_free(pending.s);
    pending.s = NULL;

    total = 0;
    for (size_t i = 0; i < el.n; i++)
        if (el.v[i].alloc_ev < 0)
            total = snap_sat_add(total, el.v[i].bytes);
    out->initial_bytes = total;
    if (one_pass) {
        if (mag >= ONE_PASS_LIMIT) {
            *redo = true;
            goto out_release;
        }
        res = res_final - res_change; /* the initial reserved bytes, as in pass 2 */
        out->final_bytes = total + rel;
        best = best_k >= 0 ? total + best_rel : total;
        out->reserved_at_peak_bytes = clamp_signed(best_k >= 0 ? res + rr_at_best : res);
        if (best_rr_k >= 0 && (int64_t)(res + best_rr) > 0) {
            out->peak_reserved_bytes = clamp_signed(res + best_rr);
            out->peak_reserved_event_index = best_rr_k;
        } else {
            out->peak_reserved_bytes = clamp_signed(res);
            out->peak_reserved_event_index = -1;
        }
        goto peak_found;
    }
    if (want_points) {
        out->allocated = gm_malloc((n + 1) * sizeof(uint64_t));
        out->reserved = gm_malloc((n + 1) * sizeof(uint64_t));
        if (!out->allocated || !out->reserved)
            goto out_nomem;
    }

    /* pass 2: forward (pass 1 tracked maxima of its own, which do not count here) */
    res = res_final - res_change; /* modular; interpreted as signed */
    best = total;
    best_k = -1;
    out->peak_reserved_bytes = clamp_signed(res);
    out->peak_reserved_event_index = -1;
    out->reserved_at_peak_bytes = clamp_signed(res);
    if (want_points) {
        out->allocated[0] = total;
        out->reserved[0] = clamp_signed(res);
    }
    for (size_t k = 0; k < n; k++) {
        const struct gm_snapshot_event *e = &d->events[k];
        if (touch[k] >= 0) {
            const struct elem *x = &el.v[touch[k]];
            if (x->alloc_ev == (int32_t)k)
                total = snap_sat_add(total, x->bytes);
            else
                total = total >= x->bytes ? total - x->bytes : 0;
        }
        res += (uint64_t)reserved_delta_sign(e->action) * e->size;
        if (want_points) {
            out->allocated[k + 1] = total;
            out->reserved[k + 1] = clamp_signed(res);
        }
        if (total > best) {
            best = total;
            best_k = (int64_t)k;
            out->reserved_at_peak_bytes = clamp_signed(res);
        }
        if (clamp_signed(res) > out->peak_reserved_bytes) {
            out->peak_reserved_bytes = clamp_signed(res);
            out->peak_reserved_event_index = (int64_t)k;
        }
    }
    out->final_bytes = total;
peak_found:
    out->peak_bytes = best;
    out->peak_event_index = best_k;
    if (best_k >= 0 && (d->events[best_k].flags & GM_EVENT_HAS_TIME)) {
        out->peak_time_valid = true;
        out->peak_time_us = d->events[best_k].time_us;
    }

    /* live at the peak: allocated at or before it, freed after it */
    {
        size_t m = 0;
        for (size_t i = 0; i < el.n; i++)
            if (el.v[i].alloc_ev <= best_k && el.v[i].free_ev > best_k)
                m++;
        if (m) {
            out->live = gm_malloc(m * sizeof(*out->live));
            if (!out->live)
                goto out_nomem;
        }
        for (size_t i = 0; i < el.n; i++) {
            const struct elem *x = &el.v[i];
            if (x->alloc_ev <= best_k && x->free_ev > best_k) {
                struct gm_snapshot_live *l = &out->live[out->n_live++];
                l->bytes = x->bytes;
                if (i >= first_block) {
                    const struct bref *r = &brefs[i - first_block];
                    const struct gm_snapshot_segment *sg = &snap->segments[r->seg];
                    const struct gm_snapshot_block *b = &sg->blocks[r->blk];
                    l->addr = b->address;
                    l->stream = sg->stream;
                    l->stack = b->stack;
                } else {
                    const struct gm_snapshot_event *e =
                        &d->events[x->alloc_ev >= 0 ? x->alloc_ev : x->free_ev];
                    l->addr = e->addr;
                    l->stream = gm_snapshot_event_stream(snap, e);
                    l->stack = e->stack;
                }
                l->alloc_event = x->alloc_ev;
            }
        }
        if (out->n_live > 1)
            qsort(out->live, out->n_live, sizeof(*out->live), cmp_live);
    }
    gm_big_free(el.v, el.cap * sizeof(*el.v));
    gm_free(brefs);
    gm_free(touch);
    return GM_OK;

out_nomem:
    gm_free(pending.s);
    gm_big_free(el.v, el.cap * sizeof(*el.v));
    gm_free(brefs);
    gm_free(touch);
    gm_snapshot_timeline_release(out);
    return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "timeline: out of memory");
out_release:
    gm_big_free(el.v, el.cap * sizeof(*el.v));
    gm_free(brefs);
    gm_snapshot_timeline_release(out);
    return GM_OK;
}

enum gm_status gm_snapshot_timeline(const struct gm_snapshot *snap, int32_t index, bool want_points,
                                    struct gm_snapshot_timeline *out, struct gm_error *err)
{
    bool redo = false;
    enum gm_status st;
    if (!want_points && !getenv("GM_TIMELINE_TWO_PASS")) {
        st = timeline(snap, index, false, true, &redo, out, err);
        if (st != GM_OK || !redo)
            return st;
    }
    return timeline(snap, index, want_points, false, &redo, out, err);
}

void gm_snapshot_timeline_release(struct gm_snapshot_timeline *tl)
{
    if (!tl)
        return;
    gm_free(tl->allocated);
    gm_free(tl->reserved);
    gm_free(tl->live);
    tl->allocated = tl->reserved = NULL;
    tl->live = NULL;
    tl->n_live = 0;
}

static int cmp_group(const void *pa, const void *pb)
{
    const struct gm_snapshot_live_group *a = pa, *b = pb;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return a->stack < b->stack ? -1 : a->stack > b->stack;
}

enum gm_status gm_snapshot_group_live(const struct gm_snapshot_timeline *tl,
                                      struct gm_snapshot_live_group **out, size_t *n_out,
                                      struct gm_error *err)
{
    struct hmap by_stack = {NULL, NULL, 0, 0};
    struct gm_snapshot_live_group *g = NULL;
    size_t n = 0;

    *out = NULL;
    *n_out = 0;
    if (!tl->n_live)
        return GM_OK;
    g = gm_malloc(tl->n_live * sizeof(*g));
    if (!g)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    for (size_t i = 0; i < tl->n_live; i++) {
        const struct gm_snapshot_live *l = &tl->live[i];
        uint32_t idx = hmap_find(&by_stack, (uint64_t)l->stack + 1, NULL, NULL);
        if (idx == HMAP_NONE) {
            idx = (uint32_t)n++;
            g[idx].stack = l->stack;
            g[idx].bytes = 0;
            g[idx].count = 0;
            if (!hmap_put(&by_stack, (uint64_t)l->stack + 1, idx)) {
                hmap_release(&by_stack);
                gm_free(g);
                return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
            }
        }
        g[idx].bytes = snap_sat_add(g[idx].bytes, l->bytes);
        g[idx].count++;
    }
    hmap_release(&by_stack);
    qsort(g, n, sizeof(*g), cmp_group);
    *out = g;
    *n_out = n;
    return GM_OK;
}

static bool is_torch_internal(const char *filename)
{
    return strstr(filename, "/torch/") || strstr(filename, "\\torch\\") ||
           !strncmp(filename, "torch/", 6);
}

long gm_snapshot_stack_user_frame(const struct gm_snapshot *snap, uint32_t stack)
{
    const struct gm_snapshot_stack *s;
    long first_clean = -1;
    if (stack >= snap->n_stacks)
        return -1;
    s = &snap->stacks[stack];
    for (uint32_t i = 0; i < s->n_frames; i++) {
        const struct gm_snapshot_frame *f = &snap->frames[s->frames[i]];
        if (f->is_noise)
            continue;
        if (first_clean < 0)
            first_clean = (long)i;
        if (f->is_python && !is_torch_internal(f->filename))
            return (long)i;
    }
    return first_clean;
}
