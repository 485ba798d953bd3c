/* SPDX-License-Identifier: MIT */
/* timeline.c - memory over a device's trace, as memory_viz's Active Memory Timeline
 * computes it (semantics in include/gpumem/snapshot.h, above gm_snapshot_timeline()).
 *
 * Every pass reads the trace in order with a cursor and pairs each alloc with the
 * free_completed at its address through an address map of the allocations pending a free
 * (memory_viz's addr_to_alloc); nothing is kept per event or per allocation.
 *
 *   pass 1  the bytes alive from the start (frees without an alloc before them, and the
 *           blocks allocated at snapshot time that no pending alloc explains), the reserved
 *           figures, and the first maximum of the allocated bytes: the allocated bytes after
 *           event k are the initial bytes (known only at the end) plus a running sum, and a
 *           constant offset does not move the first maximum.  That holds while no sum can
 *           saturate or wrap, which is when all sizes together stay below ONE_PASS_LIMIT;
 *           otherwise
 *   pass 2  replays the totals forward from the initial bytes (gm_snapshot_walk) and finds
 *           the first maximum there;
 *   pass 3  (GM_TIMELINE_LIVE) replays the map to the peak event and lists what is alive
 *           there: the pending allocations, those a second alloc at their address displaced
 *           (alive to the end), the frees without an alloc after the peak, and the blocks
 *           alive from the start. */
#include "snapshot/snapshot_int.h"

#include "base/big.h"
#include "base/budget.h"
#include "base/hint.h"
#include "base/vec.h"

#include "gpumem/arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The allocations pending a free, by address: the base map (address -> record index; a
 * trace of millions of events does one look-up each) and the records, reused once freed.
 * Training traces keep a few thousand allocations pending, so both stay in cache.  The
 * map, the records and any list made beside them are charged to one budget: the
 * snapshot's memory limit beside the memory the snapshot holds. */
struct pend {
    uint64_t addr;
    uint64_t bytes;
    int32_t ev; /* the alloc event; AM_EMPTY: a free record */
    uint32_t stack;
    uint32_t extra;
    union {
        uint32_t nth;       /* a pending allocation: its alloc's ordinal among the trace's */
        uint32_t next_free; /* a free record: the next free one, AM_NONE at the end */
    };
};

#define AM_EMPTY INT32_MIN
#define AM_NONE  UINT32_MAX

struct addr_map {
    struct gm_map map; /* address -> index in recs */
    struct pend *recs;
    size_t n_recs, cap_recs;
    uint32_t free_head; /* the first free record, AM_NONE when none */
    size_t n_max;       /* the most entries it held */
    struct gm_budget budget;
};

/* The memory a map may take beside the snapshot's own. */
static void am_init(struct addr_map *m, const struct gm_snapshot *snap)
{
    memset(m, 0, sizeof(*m));
    m->budget = gm_budget_make(snap->memory_limit, snap_memory_held(snap));
    gm_map_init(&m->map, &m->budget);
    m->free_head = AM_NONE;
}

static void am_release(struct addr_map *m)
{
    gm_map_release(&m->map);
    gm_free(m->recs);
    m->recs = NULL;
    m->n_recs = m->cap_recs = 0;
    m->free_head = AM_NONE;
}

/* Room for 'n' pending allocations, so that am_set() cannot fail below that many. */
static bool am_reserve(struct addr_map *m, size_t n)
{
    return gm_map_reserve(&m->map, n) && GM_VEC_RESERVE(m->recs, m->cap_recs, n, &m->budget);
}

/* addr -> the alloc event 'e' (index k, the trace's nth alloc); *displaced gets the pending
 * allocation it replaces, if any (its ev is AM_EMPTY otherwise). */
static GM_INLINE_ALWAYS bool am_set(struct addr_map *m, const struct gm_snapshot_event *e,
                                    int32_t k, uint32_t nth, struct pend *displaced)
{
    bool added;
    uint64_t *slot = gm_map_at(&m->map, e->addr, &added);
    struct pend *p;
    if (!slot)
        return false;
    if (added) {
        uint32_t i = m->free_head;
        if (i != AM_NONE) {
            m->free_head = m->recs[i].next_free;
        } else if (m->n_recs < UINT32_MAX &&
                   GM_VEC_RESERVE(m->recs, m->cap_recs, m->n_recs + 1, &m->budget)) {
            i = (uint32_t)m->n_recs++;
        } else {
            (void)gm_map_take(&m->map, e->addr, NULL);
            return false;
        }
        *slot = i;
        if (gm_map_count(&m->map) > m->n_max)
            m->n_max = gm_map_count(&m->map);
        if (displaced)
            displaced->ev = AM_EMPTY;
    } else if (displaced) {
        *displaced = m->recs[*slot];
    }
    p = &m->recs[*slot];
    p->addr = e->addr;
    p->bytes = e->size;
    p->ev = k;
    p->stack = e->stack;
    p->extra = e->extra;
    p->nth = nth;
    return true;
}

static inline bool am_has(const struct addr_map *m, uint64_t addr)
{
    return gm_map_get(&m->map, addr, NULL);
}

/* The pending allocation at 'addr', removed from the map; false when there is none. */
static inline bool am_take(struct addr_map *m, uint64_t addr, struct pend *out)
{
    uint64_t i;
    if (!gm_map_take(&m->map, addr, &i))
        return false;
    *out = m->recs[i];
    m->recs[i].ev = AM_EMPTY;
    m->recs[i].next_free = m->free_head;
    m->free_head = (uint32_t)i;
    return true;
}

static enum gm_status am_fail(const struct addr_map *m, int32_t index, struct gm_error *err)
{
    char what[64];
    if (m->budget.over) {
        snprintf(what, sizeof(what), "the timeline of device %d", (int)index);
        return gm_budget_fail(err, what, UINT64_MAX, m->budget.limit);
    }
    return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "timeline: out of memory");
}

static int cmp_live(const void *pa, const void *pb)
{
    const struct gm_snapshot_live *a = pa, *b = pb;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    if (a->addr != b->addr)
        return a->addr < b->addr ? -1 : 1;
    if (a->alloc_event != b->alloc_event)
        return a->alloc_event < b->alloc_event ? -1 : 1;
    if (a->stack != b->stack)
        return a->stack < b->stack ? -1 : 1;
    return a->stream < b->stream ? -1 : a->stream > b->stream;
}

/* Reserved bytes as an unsigned value interpreted as signed, clamped at 0. */
static uint64_t clamp_signed(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? 0 : v;
}

/* Sizes below this, summed over a whole trace, cannot overflow or go below zero in the
 * one-pass computation (see the top of the file). */
#define ONE_PASS_LIMIT ((uint64_t)1 << 62)

static void set_peak_time(const struct gm_snapshot_device *d, struct gm_snapshot_timeline *out)
{
    struct gm_snapshot_event e;
    if (out->peak_event_index >= 0 && gm_snapshot_event_at(d, (size_t)out->peak_event_index, &e) &&
        (e.flags & GM_EVENT_HAS_TIME)) {
        out->peak_time_valid = true;
        out->peak_time_us = e.time_us;
    }
}

/* Pass 3: the allocations alive after event 'peak' into out->live. */
static enum gm_status list_live(const struct gm_snapshot *snap, const struct gm_snapshot_device *d,
                                int64_t peak, struct gm_snapshot_timeline *out,
                                struct gm_error *err)
{
    struct addr_map m;
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    size_t cap = 0;
    enum gm_status st = GM_OK;

    am_init(&m, snap);
#define PUSH_LIVE(addr_, bytes_, stream_, stack_, ev_)                                             \
    do {                                                                                           \
        struct gm_snapshot_live *l_ = GM_VEC_PUSH(out->live, out->n_live, cap, &m.budget);         \
        if (!l_)                                                                                   \
            goto out_fail;                                                                         \
        l_->addr = (addr_);                                                                        \
        l_->bytes = (bytes_);                                                                      \
        l_->stream = (stream_);                                                                    \
        l_->stack = (stack_);                                                                      \
        l_->alloc_event = (ev_);                                                                   \
    } while (0)

    gm_snapshot_cursor_init(&c, d, 0);
    for (;;) {
        int64_t k = (int64_t)c.index; /* the event just applied (-1: none yet) */
        if (k == peak) {
            /* everything pending now is alive at the peak */
            for (size_t i = 0; i < m.n_recs; i++) {
                const struct pend *p = &m.recs[i];
                if (p->ev == AM_EMPTY)
                    continue;
                PUSH_LIVE(p->addr, p->bytes, gm_snapshot_extra_stream(snap, p->extra), p->stack,
                          p->ev);
            }
        }
        if (!(e = gm_snapshot_cursor_next(&c)))
            break;
        k = (int64_t)c.index;
        if (e->action == GM_ACTION_ALLOC) {
            struct pend old;
            if (!am_set(&m, e, (int32_t)k, 0, &old))
                goto out_fail;
            if (old.ev != AM_EMPTY && k <= peak) /* displaced: alive to the end */
                PUSH_LIVE(old.addr, old.bytes, gm_snapshot_extra_stream(snap, old.extra), old.stack,
                          old.ev);
        } else if (e->action == GM_ACTION_FREE_COMPLETED) {
            struct pend old;
            if (!am_take(&m, e->addr, &old) && k > peak) /* alive from the start */
                PUSH_LIVE(e->addr, e->size, gm_snapshot_event_stream(snap, e), e->stack, -1);
        }
    }
    /* blocks allocated at snapshot time that no pending alloc explains: from the start */
    for (size_t si = d->first_segment; si < d->first_segment + d->n_segments; si++) {
        const struct gm_snapshot_segment *seg = &snap->segments[si];
        for (size_t bi = 0; bi < seg->n_blocks; bi++) {
            const struct gm_snapshot_block *b = &seg->blocks[bi];
            if (b->state != GM_BLOCK_ACTIVE_ALLOCATED || am_has(&m, b->address))
                continue;
            PUSH_LIVE(b->address, b->requested_size, seg->stream, b->stack, -1);
        }
    }
#undef PUSH_LIVE
    if (out->n_live > 1)
        qsort(out->live, out->n_live, sizeof(*out->live), cmp_live);
    goto out_release;
out_fail:
    st = am_fail(&m, d->index, err);
out_release:
    am_release(&m);
    return st;
}

/* ---- pass 1 and the live list folded into loading ----
 *
 * The loader hands each committed batch of a trace's events to the fold (a consumer) while
 * it reads the file, so that pass 1 costs no walk of its own; and the list of what is
 * alive at the first maximum comes from the same walk instead of pass 3: at that moment
 * the map held exactly the allocations alive then.  What happens to them later is kept
 * beside the map, bounded by what was pending at the maximum:
 *
 *   gone       pending at the current maximum, freed after it (cleared at a new maximum);
 *   displaced  allocations a second alloc at their address displaced: alive to the end,
 *              so alive at the maximum when allocated at or before it;
 *   unmatched  frees without an alloc before them: alive from the start, so alive at the
 *              maximum when they come after it.
 *
 * After the load, snap_fold_finish() adds the snapshot state (segments, blocks that no
 * pending alloc explains) and keeps only the figures and the live list; snap_timeline()
 * then reads them.  Any case that pass 1 alone cannot settle (sums that may saturate, too
 * many events, memory) leaves the fold unusable, and the timeline walks the trace with the
 * same rule per event (fold_event(), without the lists beside the map) and passes 2 and 3:
 * both give the same answer (tests hold them against each other).
 *
 * The analysis's first pass reads the same events while loading and pairs them with
 * allocations by the same rule: rather than a second map over the same addresses, it asks
 * the fold (snap_fold_answer()), which then notes per batch the allocation each
 * free_requested and free_completed met (by its ordinal among the allocs) and, at the end,
 * which blocks no pending allocation explains.  A fold that gives up while loading stops
 * answering, and the first pass gives up with it (its work is then done from the stored
 * trace); a pass that gives up stops the fold answering.  One that gives up at its finish,
 * for the timeline's reasons alone, keeps the blocks' bits: the first pass stands. */
struct pend_at {
    struct pend p;
    int64_t k; /* the event that displaced or freed it */
};

struct snap_fold {
    bool usable;
    bool finished;
    bool keep_live; /* the lists beside the map kept (the fold made while loading) */
    struct addr_map m;
    uint64_t rel, best_rel, best_rr, rr_at_best, res_change, mag, initial;
    int64_t best_k, best_rr_k;
    bool mag_over, best_time_valid;
    bool sizes_agree; /* every free_completed that met its alloc had the alloc's size */
    int64_t best_time;
    uint64_t n_matched;
    size_t n_events;
    struct pend *gone;
    size_t n_gone, cap_gone;
    struct pend_at *displaced, *unmatched;
    size_t n_displaced, cap_displaced, n_unmatched, cap_unmatched;
    struct gm_snapshot_timeline tl; /* snap_fold_finish(): the figures and the live list */
    size_t cap_live;
    /* answers for another reader of the trace (snap_fold_answer()) */
    bool answer;
    bool answered_all;    /* it answered every event: from_start[] built (kept when the
                             fold gives up at its finish for its own reasons) */
    uint32_t n_allocs;    /* alloc events so far: the next one's ordinal */
    uint32_t *found;      /* per event of the last batch (free_requested, free_completed) */
    size_t cap_found;     /* entries of found[] */
    size_t batch_first;   /* the index of the last batch's first event */
    uint64_t *from_start; /* snap_fold_finish(): a bit per block of the device */
    size_t n_from_start;  /* words of from_start[] */
};

/* An empty fold whose map and lists are charged to 'budget'. */
static void fold_init(struct snap_fold *f, struct gm_budget budget, bool keep_live)
{
    memset(f, 0, sizeof(*f));
    f->usable = true;
    f->keep_live = keep_live;
    f->m.budget = budget;
    gm_map_init(&f->m.map, &f->m.budget);
    f->m.free_head = AM_NONE;
    f->best_k = -1;
    f->best_rr_k = -1;
    f->sizes_agree = true;
}

/* Everything but the live list freed, and its bytes given back. */
static void fold_drop(struct snap_fold *f)
{
    am_release(&f->m);
    gm_free(f->found);
    f->found = NULL;
    f->cap_found = 0;
    gm_free(f->gone);
    gm_big_free(f->displaced, f->cap_displaced * sizeof(*f->displaced));
    gm_free(f->unmatched);
    f->gone = NULL;
    f->displaced = f->unmatched = NULL;
    f->n_gone = f->cap_gone = f->n_displaced = f->cap_displaced = 0;
    f->n_unmatched = f->cap_unmatched = 0;
    uint64_t kept = gm_budget_bytes(f->cap_live, sizeof(*f->tl.live)) +
                    gm_budget_bytes(f->n_from_start, sizeof(*f->from_start));
    gm_budget_give(&f->m.budget, f->m.budget.used > kept ? f->m.budget.used - kept : 0);
}

void snap_fold_free(struct snap_fold *f)
{
    if (!f)
        return;
    fold_drop(f);
    gm_free(f->tl.live);
    gm_free(f->from_start);
    gm_free(f);
}

/* The answer buffer freed and its bytes given back. */
static void fold_drop_found(struct snap_fold *f)
{
    gm_free(f->found);
    gm_budget_give(&f->m.budget, gm_budget_bytes(f->cap_found, sizeof(*f->found)));
    f->found = NULL;
    f->cap_found = 0;
}

/* The fold unusable (its timeline walked); the blocks' bits kept where it answered every
 * event, which they then still say. */
static void fold_give_up(struct snap_fold *f)
{
    f->usable = false;
    gm_free(f->tl.live);
    f->tl.live = NULL;
    f->tl.n_live = f->cap_live = 0;
    if (!f->answered_all) {
        gm_free(f->from_start);
        f->from_start = NULL;
        f->n_from_start = 0;
    }
    fold_drop(f);
}

/* Event 'e' (index k) into the fold: pass 1's running sums (as signed) and their first
 * maxima; the allocated sum rises only at an alloc and the reserved one only at a segment
 * alloc or map, so their first maxima are looked for there alone.  With 'found' (not NULL
 * only where the fold answers), *found gets the ordinal of the allocation pending at a
 * free_requested's or free_completed's address (SNAP_NO_ALLOC: none).  False when the map
 * or a list cannot grow. */
static GM_INLINE_ALWAYS bool fold_event(struct snap_fold *f, const struct gm_snapshot_event *e,
                                        int64_t k, uint32_t *found)
{
    struct addr_map *m = &f->m;
    f->mag_over |= __builtin_add_overflow(f->mag, e->size, &f->mag);
    switch (e->action) {
    case GM_ACTION_ALLOC: {
        struct pend old;
        if (!am_set(m, e, (int32_t)k, f->n_allocs++, &old))
            return false;
        if (old.ev != AM_EMPTY && f->keep_live) {
            /* a big array (big.h): one entry per alloc at a pending address, tens of
             * megabytes on a file that reuses an address without freeing it.  From the heap,
             * such an array stayed resident after its free (glibc then serves and keeps
             * later arrays of up to its size from the heap, too): +26 MiB on the memo bomb
             * of tests/snapshot/memory_bound.py */
            if (!GM_VEC_RESERVE_BIG(f->displaced, f->cap_displaced, f->n_displaced + 1, &m->budget))
                return false;
            struct pend_at *d = &f->displaced[f->n_displaced++];
            d->p = old;
            d->k = k;
        }
        f->rel += e->size;
        if ((int64_t)f->rel > (int64_t)f->best_rel) {
            f->best_rel = f->rel;
            f->best_k = k;
            f->rr_at_best = f->res_change;
            f->best_time_valid = (e->flags & GM_EVENT_HAS_TIME) != 0;
            f->best_time = e->time_us;
            f->n_gone = 0; /* the map is what is alive now */
        }
        break;
    }
    case GM_ACTION_FREE_REQUESTED:
        if (found) {
            uint64_t i;
            *found = gm_map_get(&m->map, e->addr, &i) ? m->recs[i].nth : SNAP_NO_ALLOC;
        }
        break;
    case GM_ACTION_FREE_COMPLETED: {
        struct pend p;
        if (found)
            *found = SNAP_NO_ALLOC;
        if (am_take(m, e->addr, &p)) {
            if (found)
                *found = p.nth;
            f->n_matched++;
            f->rel -= p.bytes;
            f->sizes_agree &= p.bytes == e->size;
            if (p.ev <= f->best_k && f->keep_live) {
                struct pend *g = GM_VEC_PUSH(f->gone, f->n_gone, f->cap_gone, &m->budget);
                if (!g)
                    return false;
                *g = p;
            }
        } else {
            /* freed without an alloc in the trace: alive from the start */
            if (f->keep_live) {
                struct pend_at *u =
                    GM_VEC_PUSH(f->unmatched, f->n_unmatched, f->cap_unmatched, &m->budget);
                if (!u)
                    return false;
                u->p.addr = e->addr;
                u->p.bytes = e->size;
                u->p.ev = -1;
                u->p.stack = e->stack;
                u->p.extra = e->extra;
                u->k = k;
            }
            f->initial = snap_sat_add(f->initial, e->size);
            f->rel -= e->size;
        }
        break;
    }
    case GM_ACTION_SEGMENT_ALLOC:
    case GM_ACTION_SEGMENT_MAP:
        f->res_change += e->size;
        if ((int64_t)f->res_change > (int64_t)f->best_rr) {
            f->best_rr = f->res_change;
            f->best_rr_k = k;
        }
        break;
    case GM_ACTION_SEGMENT_FREE:
    case GM_ACTION_SEGMENT_UNMAP:
        f->res_change -= e->size;
        break;
    default:
        break;
    }
    return true;
}

static void *fold_open(void *ctx, uint32_t index, struct gm_budget *shared,
                       struct gm_snapshot_packed *pk)
{
    struct snap_fold *f = gm_malloc(sizeof(*f));
    (void)ctx;
    (void)index;
    if (f) {
        struct gm_budget own = gm_budget_make(0, 0);
        own.shared = shared;
        fold_init(f, own, true);
    }
    pk->fold = f;
    return f;
}

static void fold_events(void *state, const struct gm_snapshot_event *ev, size_t n)
{
    struct snap_fold *f = state;
    if (!f->usable)
        return;
    if (f->n_events + n >= (size_t)INT32_MAX - 1)
        goto give_up;
    if (f->answer) {
        /* the same rule, its answers kept: a loop of its own, so that the fold alone pays
         * nothing for them */
        if (!GM_VEC_RESERVE(f->found, f->cap_found, n, &f->m.budget))
            goto give_up;
        for (size_t i = 0; i < n; i++)
            if (!fold_event(f, &ev[i], (int64_t)(f->n_events + i), &f->found[i]))
                goto give_up;
    } else {
        for (size_t i = 0; i < n; i++)
            if (!fold_event(f, &ev[i], (int64_t)(f->n_events + i), NULL))
                goto give_up;
    }
    f->batch_first = f->n_events;
    f->n_events += n;
    return;
give_up:
    fold_give_up(f);
}

void snap_fold_answer(struct snap_fold *f, bool on)
{
    if (!f)
        return;
    f->answer = on;
    if (!on)
        fold_drop_found(f);
}

const uint32_t *snap_fold_answers(const struct snap_fold *f, size_t first, size_t n)
{
    if (!f || !f->usable || !f->answer || f->batch_first != first || f->n_events != first + n)
        return NULL;
    return f->found;
}

uint64_t *snap_fold_take_from_start(const struct gm_snapshot_device *d, uint64_t *bytes)
{
    /* the one taker of the device's consumed state (snap_consumed_take()) alone calls this */
    struct snap_fold *f = d->packed ? d->packed->fold : NULL;
    uint64_t *bits;
    *bytes = 0;
    if (!f || !f->answered_all || !f->from_start)
        return NULL;
    bits = f->from_start;
    *bytes = gm_budget_bytes(f->n_from_start, sizeof(*bits));
    f->from_start = NULL;
    f->n_from_start = 0;
    return bits;
}

static void fold_abandon(void *state)
{
    fold_give_up(state);
}

static void fold_release(void *state)
{
    snap_fold_free(state);
}

const struct snap_consumer_ops snap_fold_consumer = {fold_open, fold_events, fold_abandon,
                                                     fold_release, NULL};

/* One allocation alive at the peak into the fold's live list. */
static bool fold_live(struct snap_fold *f, const struct gm_snapshot *snap, const struct pend *p)
{
    struct gm_snapshot_live *l = GM_VEC_PUSH(f->tl.live, f->tl.n_live, f->cap_live, &f->m.budget);
    if (!l)
        return false;
    l->addr = p->addr;
    l->bytes = p->bytes;
    l->stream = gm_snapshot_extra_stream(snap, p->extra);
    l->stack = p->stack;
    l->alloc_event = p->ev;
    return true;
}

/* The snapshot state after the trace into the fold: *res_final gets the reserved bytes at
 * the end, *mag every size summed (UINT64_MAX past the top), and the blocks allocated at
 * snapshot time that no pending alloc explains count as alive from the start (into the
 * live list too when the fold keeps it).  False when that list cannot grow. */
/* Whether block b, allocated at snapshot time, is alive from the start: no allocation
 * pending at the end of the trace (the fold's final map) explains it. */
static inline bool fold_from_start(const struct snap_fold *f, const struct gm_snapshot_block *b)
{
    return b->state == GM_BLOCK_ACTIVE_ALLOCATED && !am_has(&f->m, b->address);
}

/* Where the fold answered every event: the blocks' bits (snap_fold_take_from_start()) from
 * its final map, made before anything else at the finish can make the fold give up, so that
 * its reader keeps them whatever the timeline does.  False when out of memory. */
static bool fold_block_bits(struct snap_fold *f, const struct gm_snapshot *snap,
                            const struct gm_snapshot_device *d)
{
    size_t n = 0, j = 0; /* j: the block's index among the device's */
    for (size_t si = d->first_segment; si < d->first_segment + d->n_segments; si++)
        n += snap->segments[si].n_blocks;
    n = n ? (n + 63) / 64 : 1; /* at least one word: NULL says "not answered" */
    if (!gm_budget_take(&f->m.budget, gm_budget_bytes(n, sizeof(uint64_t))))
        return false;
    if (!(f->from_start = gm_calloc(n, sizeof(uint64_t)))) {
        gm_budget_give(&f->m.budget, gm_budget_bytes(n, sizeof(uint64_t)));
        return false;
    }
    f->n_from_start = n;
    for (size_t si = d->first_segment; si < d->first_segment + d->n_segments; si++) {
        const struct gm_snapshot_segment *seg = &snap->segments[si];
        for (size_t bi = 0; bi < seg->n_blocks; bi++, j++)
            if (fold_from_start(f, &seg->blocks[bi]))
                f->from_start[j / 64] |= (uint64_t)1 << (j % 64);
    }
    f->answered_all = true;
    return true;
}

static bool fold_segments(struct snap_fold *f, const struct gm_snapshot *snap,
                          const struct gm_snapshot_device *d, uint64_t *mag, uint64_t *res_final)
{
    *mag = f->mag_over ? UINT64_MAX : f->mag;
    *res_final = 0;
    for (size_t si = d->first_segment; si < d->first_segment + d->n_segments; si++) {
        const struct gm_snapshot_segment *seg = &snap->segments[si];
        *res_final += seg->total_size;
        *mag = snap_sat_add(*mag, seg->total_size);
        for (size_t bi = 0; bi < seg->n_blocks; bi++) {
            const struct gm_snapshot_block *b = &seg->blocks[bi];
            struct pend p;
            if (!fold_from_start(f, b))
                continue;
            *mag = snap_sat_add(*mag, b->requested_size);
            f->initial = snap_sat_add(f->initial, b->requested_size);
            if (!f->keep_live)
                continue;
            p.addr = b->address;
            p.bytes = b->requested_size;
            p.ev = -1;
            p.stack = b->stack;
            p.extra = 0;
            if (!fold_live(f, snap, &p))
                return false;
            f->tl.live[f->tl.n_live - 1].stream = seg->stream;
        }
    }
    return true;
}

/* Pass 1's figures into *out from the fold's sums and the reserved bytes at the end: the
 * initial bytes are known only now, and a constant offset does not move a first maximum. */
static void fold_figures(const struct snap_fold *f, const struct gm_snapshot_device *d,
                         uint64_t res_final, struct gm_snapshot_timeline *out)
{
    uint64_t res = res_final - f->res_change; /* the initial reserved bytes (modular, read as
                                                 signed) */
    int64_t best = f->best_k;
    out->device = d->index;
    out->pending_max_ = f->m.n_max;
    out->n_allocs_matched = f->n_matched;
    out->initial_bytes = f->initial;
    out->reserved_start_raw = res;
    out->initial_reserved_bytes = clamp_signed(res);
    out->final_bytes = f->initial + f->rel;
    out->peak_bytes = best >= 0 ? f->initial + f->best_rel : f->initial;
    out->peak_event_index = best;
    out->reserved_at_peak_bytes = clamp_signed(best >= 0 ? res + f->rr_at_best : res);
    if (f->best_rr_k >= 0 && (int64_t)(res + f->best_rr) > 0) {
        out->peak_reserved_bytes = clamp_signed(res + f->best_rr);
        out->peak_reserved_event_index = f->best_rr_k;
    } else {
        out->peak_reserved_bytes = clamp_signed(res);
        out->peak_reserved_event_index = -1;
    }
}

void snap_fold_finish(struct snap_fold *f, const struct gm_snapshot *snap,
                      const struct gm_snapshot_device *d)
{
    struct gm_snapshot_timeline *out = &f->tl;
    uint64_t mag, res_final, bits;
    int64_t best = f->best_k;
    if (!f->usable || f->finished || f->n_events != d->n_events)
        goto give_up;
    f->finished = true;
    /* no batch comes after the load: the answers' buffer goes first, so that it weighs on
     * nothing below; the blocks' bits are made before any give-up of the timeline's own */
    fold_drop_found(f);
    if (f->answer && !fold_block_bits(f, snap, d))
        goto give_up;
    /* pass 3's list: what was pending at the peak and still is, what left the map after it,
     * what was displaced, the frees without an alloc after it */
    for (size_t i = 0; i < f->m.n_recs; i++)
        if (f->m.recs[i].ev != AM_EMPTY && f->m.recs[i].ev <= best &&
            !fold_live(f, snap, &f->m.recs[i]))
            goto give_up;
    for (size_t i = 0; i < f->n_gone; i++)
        if (!fold_live(f, snap, &f->gone[i]))
            goto give_up;
    for (size_t i = 0; i < f->n_displaced; i++)
        if (f->displaced[i].p.ev <= best && !fold_live(f, snap, &f->displaced[i].p))
            goto give_up;
    for (size_t i = 0; i < f->n_unmatched; i++)
        if (f->unmatched[i].k > best && !fold_live(f, snap, &f->unmatched[i].p))
            goto give_up;
    if (!fold_segments(f, snap, d, &mag, &res_final))
        goto give_up;
    /* the walks this replaces would have held as much beside the snapshot: past the
     * snapshot's limit they fail, and so the timeline is left to them (the blocks' bits are
     * their reader's, not the walks') */
    bits = gm_budget_bytes(f->n_from_start, sizeof(*f->from_start));
    if (mag >= ONE_PASS_LIMIT ||
        !gm_budget_fits(snap->memory_limit, snap->memory_bytes, 2 * (f->m.budget.used - bits)))
        goto give_up;
    fold_figures(f, d, res_final, out);
    out->peak_time_valid = best >= 0 && f->best_time_valid;
    out->peak_time_us = out->peak_time_valid ? f->best_time : 0;
    if (out->n_live > 1)
        qsort(out->live, out->n_live, sizeof(*out->live), cmp_live);
    fold_drop(f);
    return;
give_up:
    fold_give_up(f);
}

bool snap_fold_ready(const struct gm_snapshot_device *d)
{
    const struct snap_fold *f = d->packed ? d->packed->fold : NULL;
    return f && f->usable && f->finished;
}

/* The timeline the load folded, when it could: true with *out filled (its live list a
 * copy, with 'live'). */
static bool fold_timeline(const struct gm_snapshot_device *d, bool live,
                          struct gm_snapshot_timeline *out)
{
    const struct snap_fold *f = d->packed ? d->packed->fold : NULL;
    if (!snap_fold_ready(d))
        return false;
    *out = f->tl;
    out->live = NULL;
    out->n_live = 0;
    if (live && f->tl.n_live) {
        out->live = gm_malloc(f->tl.n_live * sizeof(*out->live));
        if (!out->live)
            return false;
        memcpy(out->live, f->tl.live, f->tl.n_live * sizeof(*out->live));
        out->n_live = f->tl.n_live;
    }
    return true;
}

enum gm_status snap_timeline(const struct gm_snapshot *snap, int32_t index, unsigned flags,
                             bool force_two_pass, struct gm_snapshot_timeline *out,
                             struct gm_error *err)
{
    const struct gm_snapshot_device *d = gm_snapshot_device_by_index(snap, index);
    struct snap_fold f;
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    uint64_t mag, res_final;
    enum gm_status st;

    memset(out, 0, sizeof(*out));
    if (!d)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "the snapshot has no device %d", index);
    /* without the events (dropped, or consumed while loading): the fold's answer, or none
     * to walk */
    if (!snap_events_stored(d) && !snap_fold_ready(d))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "timeline: the snapshot was loaded without its events");
    out->device = index;
    if (d->n_events >= (size_t)INT32_MAX - 1)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET,
                       "timeline: device %d has %zu events (at most %d supported)", index,
                       d->n_events, INT32_MAX - 2);
    if (!force_two_pass && fold_timeline(d, (flags & GM_TIMELINE_LIVE) != 0, out))
        return GM_OK;
    if (!snap_events_stored(d))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "timeline: out of memory");

    /* pass 1: the fold's rule over the trace, without the lists the live list needs (pass 3
     * makes that list), its map charged beside the memory the snapshot holds */
    fold_init(&f, gm_budget_make(snap->memory_limit, snap_memory_held(snap)), false);
    gm_snapshot_cursor_init(&c, d, 0);
    while ((e = gm_snapshot_cursor_next(&c)) != NULL)
        if (!fold_event(&f, e, (int64_t)c.index, NULL)) {
            st = am_fail(&f.m, index, err);
            fold_drop(&f);
            return st;
        }
    (void)fold_segments(&f, snap, d, &mag, &res_final); /* keeps no list: cannot fail */
    fold_figures(&f, d, res_final, out);
    fold_drop(&f);

    if (mag >= ONE_PASS_LIMIT || force_two_pass) {
        /* pass 2: forward from the initial state, with the walk's saturating sums */
        struct gm_snapshot_walk w;
        if ((st = gm_snapshot_walk_init(&w, snap, d, out, err)) != GM_OK)
            return st;
        out->peak_bytes = w.allocated;
        out->peak_event_index = -1;
        out->reserved_at_peak_bytes = w.reserved;
        out->peak_reserved_bytes = w.reserved;
        out->peak_reserved_event_index = -1;
        while ((e = gm_snapshot_walk_next(&w)) != NULL) {
            if (w.allocated > out->peak_bytes) {
                out->peak_bytes = w.allocated;
                out->peak_event_index = (int64_t)w.cur.index;
                out->reserved_at_peak_bytes = w.reserved;
            }
            if (w.reserved > out->peak_reserved_bytes) {
                out->peak_reserved_bytes = w.reserved;
                out->peak_reserved_event_index = (int64_t)w.cur.index;
            }
        }
        out->final_bytes = w.allocated;
        gm_snapshot_walk_release(&w);
    }
    set_peak_time(d, out);
    if (flags & GM_TIMELINE_LIVE) {
        st = list_live(snap, d, out->peak_event_index, out, err);
        if (st != GM_OK) {
            gm_snapshot_timeline_release(out);
            return st;
        }
    }
    return GM_OK;
}

enum gm_status gm_snapshot_timeline(const struct gm_snapshot *snap, int32_t index, unsigned flags,
                                    struct gm_snapshot_timeline *out, struct gm_error *err)
{
    return snap_timeline(snap, index, flags, false, out, err);
}

void gm_snapshot_timeline_release(struct gm_snapshot_timeline *tl)
{
    if (!tl)
        return;
    gm_free(tl->live);
    tl->live = NULL;
    tl->n_live = 0;
}

/* ---- the walk: the totals after each event ---- */

/* The map of a walk whose frees all free their alloc's size (the fold saw it): a free then
 * takes its own size off, as the map would have given, and the walk needs no map. */
static struct addr_map no_map; /* never written: only its address is used */

static bool walk_needs_map(const struct gm_snapshot_device *dev)
{
    return !snap_fold_ready(dev) || !dev->packed->fold->sizes_agree;
}

enum gm_status gm_snapshot_walk_init(struct gm_snapshot_walk *w, const struct gm_snapshot *snap,
                                     const struct gm_snapshot_device *dev,
                                     const struct gm_snapshot_timeline *tl, struct gm_error *err)
{
    struct addr_map *m;
    memset(w, 0, sizeof(*w));
    if (!walk_needs_map(dev)) {
        w->map_ = &no_map;
        w->allocated = tl->initial_bytes;
        w->res_ = tl->reserved_start_raw;
        w->reserved = clamp_signed(w->res_);
        gm_snapshot_cursor_init(&w->cur, dev, 0);
        return GM_OK;
    }
    m = gm_calloc(1, sizeof(*m));
    if (!m)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "timeline: out of memory");
    am_init(m, snap);
    /* room for the most allocations pass 1 had pending, so that the map never grows here
     * (and cannot fail half-way) */
    if (!am_reserve(m, tl->pending_max_ + 1)) {
        enum gm_status st = am_fail(m, dev->index, err);
        am_release(m);
        gm_free(m);
        return st;
    }
    w->map_ = m;
    w->allocated = tl->initial_bytes;
    w->res_ = tl->reserved_start_raw;
    w->reserved = clamp_signed(w->res_);
    gm_snapshot_cursor_init(&w->cur, dev, 0);
    return GM_OK;
}

/* A walk's totals: gm_snapshot_walk's allocated, reserved and res_, or a batch's copy of
 * them whose address no call takes (kept in registers while the totals after each event
 * are stored, which the compiler would otherwise have to assume write them). */
struct walk_sums {
    uint64_t *allocated, *reserved, *res;
};

/* The totals after event 'e' (event 'k'): the walk's one rule, for both ways of taking the
 * events (always inline: with m == &no_map the map's part goes). */
static GM_INLINE_ALWAYS void walk_step(struct walk_sums t, struct addr_map *m,
                                       const struct gm_snapshot_event *e, size_t k)
{
    switch (e->action) {
    case GM_ACTION_ALLOC:
        /* never grows the map: walk_init() made room for pass 1's most pending */
        if (m != &no_map)
            (void)am_set(m, e, (int32_t)k, 0, NULL);
        *t.allocated = snap_sat_add(*t.allocated, e->size);
        break;
    case GM_ACTION_FREE_COMPLETED: {
        struct pend p;
        uint64_t b = m != &no_map && am_take(m, e->addr, &p) ? p.bytes : e->size;
        *t.allocated = *t.allocated >= b ? *t.allocated - b : 0;
        break;
    }
    default:
        *t.reserved = gm_snapshot_reserved_step(t.res, e);
        break;
    }
}

const struct gm_snapshot_event *gm_snapshot_walk_next(struct gm_snapshot_walk *w)
{
    struct addr_map *m = w->map_;
    const struct gm_snapshot_event *e;
    if (!m || !(e = gm_snapshot_cursor_next(&w->cur)))
        return NULL;
    walk_step((struct walk_sums){&w->allocated, &w->reserved, &w->res_}, m, e, w->cur.index);
    return e;
}

size_t snap_walk_batch(struct gm_snapshot_walk *w, const struct gm_snapshot_event **events,
                       struct snap_walk_totals *after)
{
    struct addr_map *m = w->map_;
    struct gm_snapshot_cursor *c = &w->cur;
    const struct gm_snapshot_event *e;
    uint64_t allocated = w->allocated, reserved = w->reserved, res = w->res_;
    struct walk_sums t = {&allocated, &reserved, &res};
    size_t n, k;
    if (!m || (c->p == c->end && !gm_snapshot_cursor_fill(c)))
        return 0;
    /* a plain array is handed out whole by the cursor: a batch at a time here */
    n = (size_t)(c->end - c->p);
    if (n > GM_SNAPSHOT_CURSOR_BATCH)
        n = GM_SNAPSHOT_CURSOR_BATCH;
    e = c->p;
    k = c->index;
    if (m == &no_map) {
        for (size_t i = 0; i < n; i++) {
            walk_step(t, &no_map, &e[i], ++k);
            after[i].allocated = allocated;
            after[i].reserved = reserved;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            walk_step(t, m, &e[i], ++k);
            after[i].allocated = allocated;
            after[i].reserved = reserved;
        }
    }
    w->allocated = allocated;
    w->reserved = reserved;
    w->res_ = res;
    *events = e;
    c->p = e + n;
    c->index = k;
    return n;
}

void gm_snapshot_walk_release(struct gm_snapshot_walk *w)
{
    struct addr_map *m = w->map_;
    if (m && m != &no_map) {
        am_release(m);
        gm_free(m);
    }
    w->map_ = NULL;
}

/* ---- grouping by stack, and the user's frame ---- */

static int cmp_group(const void *pa, const void *pb)
{
    const struct gm_snapshot_live_group *a = pa, *b = pb;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return a->stack < b->stack ? -1 : a->stack > b->stack;
}

enum gm_status snap_group_live(const struct gm_snapshot_live *live, size_t n_live,
                               struct gm_snapshot_live_group **out, size_t *n_out,
                               struct gm_error *err)
{
    struct gm_map by_stack = GM_MAP_INIT; /* stack -> index in g */
    struct gm_snapshot_live_group *g = NULL;
    size_t n = 0;

    *out = NULL;
    *n_out = 0;
    if (!n_live)
        return GM_OK;
    g = gm_malloc(n_live * sizeof(*g));
    if (!g)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
    for (size_t i = 0; i < n_live; i++) {
        const struct gm_snapshot_live *l = &live[i];
        bool added;
        uint64_t *idx = gm_map_at(&by_stack, l->stack, &added);
        if (!idx) {
            gm_map_release(&by_stack);
            gm_free(g);
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
        }
        if (added) {
            *idx = n++;
            g[*idx].stack = l->stack;
            g[*idx].bytes = 0;
            g[*idx].count = 0;
        }
        g[*idx].bytes = snap_sat_add(g[*idx].bytes, l->bytes);
        g[*idx].count++;
    }
    gm_map_release(&by_stack);
    qsort(g, n, sizeof(*g), cmp_group);
    *out = g;
    *n_out = n;
    return GM_OK;
}

enum gm_status gm_snapshot_group_live(const struct gm_snapshot_timeline *tl,
                                      struct gm_snapshot_live_group **out, size_t *n_out,
                                      struct gm_error *err)
{
    return snap_group_live(tl->live, tl->n_live, out, n_out, err);
}

bool gm_snapshot_first_oom(const struct gm_snapshot *snap, const struct gm_snapshot_device *dev,
                           struct gm_snapshot_oom *out)
{
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    struct gm_snapshot_event kept;
    if (!dev->n_actions[GM_ACTION_OOM] && dev->packed)
        return false; /* the loader counted none */
    if (snap->events_dropped)
        return false;
    if (!snap_events_stored(dev)) {
        /* consumed while loading: the ooms were kept aside */
        if (!snap_side_first(dev, GM_ACTION_OOM, &c.index, &kept))
            return false;
        e = &kept;
    } else {
        gm_snapshot_cursor_init(&c, dev, 0);
        while ((e = gm_snapshot_cursor_next(&c)) != NULL && e->action != GM_ACTION_OOM)
            ;
        if (!e)
            return false;
    }
    out->event = c.index;
    out->requested = e->size;
    out->device_free = gm_snapshot_event_device_free(e);
    out->stream = gm_snapshot_event_stream(snap, e);
    return true;
}
