/* SPDX-License-Identifier: MIT */
/* analysis.c - gm_analysis_run(): per device, match allocations to their frees, give every
 * event a phase, find the iterations, classify every allocation, build the per-category
 * series, find leaks and compute fragmentation at the peak and at each oom.
 *
 * Order of the work for one device (one pass reads the whole trace in order; the
 * per-event work is O(1): the run and iteration of an allocation by stepping forward, of
 * any other event through ana_index, never a search):
 *   1. one pass, on the events as the loader commits them when the load was given
 *      gm_analysis_first_pass_consumer(), else with a cursor over the stored trace ("step 1"
 * below): allocations (alloc -> free_completed by address, as gm_snapshot_timeline() does, with the
 * allocation each free_completed ends kept in trace order; while loading the timeline's fold
 * pairs them, its one map serving both: snap_fold_answers()), the raw phase of each event from its
 * stack (classify.c), the oom events, the segment events for the layout history (layout.c builds it
 * from them in step 6) and the reserved bytes, the time of each event (as the step from the one
 * before)
 *   2. unknown events smoothed from their neighbours (docs/analysis.md, "Phases"): over
 *      the raw phases of step 1, the trace read only around an unknown event between two
 *      forward ones (its stack and the callers either side)
 *   3. phase runs and iterations (a forward following a backward or a step starts one)
 *   4. category of each allocation from its alloc phase, stack and lifetime
 *   5. the series, the peak split and the iteration figures (and the totals the report
 *      draws, when gm_analysis_opts.totals asks), from what step 1 kept (the
 *      trace read again only when the times could not be kept)
 *   6. leaks (sites that keep memory from iteration to iteration), fragmentation at the
 *      peak and the ooms (gm_analysis_live_at(): from the allocations' alloc and free
 *      events, no trace read)
 * For a diff alone (gm_analysis_diff_prepare()): steps 1 to 4 without the free list and the
 * times, on lite allocations (struct ana_lite: 24 bytes, not 48), the category only of the
 * allocations the split at the peak counts, then that split and the sums per stack the diff
 * reads, made in the same pass over the allocations, which are then freed.
 * Everything that grows with the trace is checked against the snapshot's memory limit. */
#include "analysis/analysis_int.h"

#include "base/big.h"
#include "base/budget.h"
#include "base/hint.h"
#include "base/vec.h"
#include "snapshot/snapshot_int.h"

#include "gpumem/arena.h"
#include "gpumem/lod.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_ALLOC SNAP_NO_ALLOC /* no allocation: the fold's word for it is the scan's */
#define EARLY    0x80000000u   /* free_of[]: an index into the early allocations */

/* Event -> interval in O(1) amortised: for each block of IX_BLOCK events, the last
 * interval starting at or before the block's first event; a look-up steps forward from
 * there over the intervals that start inside the block. */
#define IX_SHIFT 8
struct ana_index {
    uint32_t *at;
    size_t n_blocks;
    const char *first; /* &interval[0].first_event */
    size_t stride;     /* bytes from one interval to the next */
    size_t n;          /* intervals */
};

static inline int64_t ix_first(const struct ana_index *x, size_t i)
{
    return *(const int64_t *)(const void *)(x->first + i * x->stride);
}

/* The last interval whose first event is <= k (0 when none is), n == 0: SIZE_MAX. */
static inline size_t ix_find(const struct ana_index *x, int64_t k)
{
    size_t i;
    if (!x->n)
        return SIZE_MAX;
    if (k < 0)
        return 0;
    i = (size_t)k >> IX_SHIFT < x->n_blocks ? x->at[(size_t)k >> IX_SHIFT] : x->n - 1;
    while (i + 1 < x->n && ix_first(x, i + 1) <= k)
        i++;
    return i;
}

static bool ix_build(struct ana_index *x, const void *first, size_t stride, size_t n,
                     size_t n_events)
{
    size_t i = 0;
    x->first = first;
    x->stride = stride;
    x->n = n;
    x->n_blocks = (n_events >> IX_SHIFT) + 1;
    x->at = gm_malloc(x->n_blocks * sizeof(uint32_t));
    if (!x->at)
        return false;
    for (size_t b = 0; b < x->n_blocks; b++) {
        int64_t k0 = (int64_t)(b << IX_SHIFT);
        while (n && i + 1 < n && ix_first(x, i + 1) <= k0)
            i++;
        x->at[b] = (uint32_t)i;
    }
    return true;
}

static void ix_release(struct ana_index *x)
{
    gm_free(x->at);
    x->at = NULL;
}

/* The times of a trace's events as steps: per event its time_us less the one before's (the
 * first: 0), two bytes an event; DT_WIDE (below): the step is the next of dt_wide[]. */
struct ana_time_block {
    int64_t time_us; /* of the block's first event */
    size_t n_wide;   /* steps in dt_wide[] up to it, its own included */
};
#define TB_SHIFT 8 /* events a block of ana_times.blocks covers: 2^TB_SHIFT */
struct ana_times {
    uint16_t *dt;
    size_t cap_dt;
    uint32_t *dt_wide; /* the steps of DT_WIDE or more, in event order */
    size_t n_dt_wide, cap_dt_wide;
    /* per block of 2^TB_SHIFT events, where its first event stands: a pass that passes over
     * events finds a time without adding up every step */
    struct ana_time_block *blocks;
    size_t cap_blocks;
};

/* Per event its stack and whether its action has a phase (stk_at()), as the loader's scan
 * keeps them: 16 bits an event while every stack id is below STK16_NO_PHASE (a training
 * trace has tens to a few thousand stacks: a 12-million-event trace keeps 24 MB where 32
 * bits would take 48), 32 bits from the first event whose stack is not ('wide').  v is a
 * GM_VEC_BIG array of 'cap' elements of stk_elem() bytes. */
struct ana_stacks {
    void *v;
    size_t cap;
    bool wide;
    /* the stacks the 16-bit form holds, those below it (STK16_NO_PHASE); 0 once wide: one
     * comparison per event tells the common case */
    uint32_t narrow_below;
};

struct work {
    const struct gm_snapshot *snap;
    const struct gm_snapshot_device *sd;
    struct gm_analysis_device *dev;
    struct ana_classifier *cls;
    struct gm_arena *arena;
    struct ana_priv *priv;
    const struct gm_analysis *an;
    uint8_t *phase;     /* per event: enum gm_phase (raw phase while smoothing) */
    size_t phase_bytes; /* of the mapping phase[] lives in (phase_alloc(), scan_trace()) */
    uint32_t *free_of;  /* per free_completed event, in trace order: the allocation it ends */
    size_t n_free_of, cap_free_of;
    int64_t *ooms; /* indexes of the oom events */
    size_t n_oom, cap_oom;
    bool has_backward;
    bool trace_has_frames;
    bool diff_only;                      /* ANA_PARTS_DIFF: only what gm_analysis_diff() reads
                                            (no free_of, no dt) */
    bool no_series;                      /* ANA_PARTS_FIGURES: no series points */
    size_t *next_fwd;                    /* per phase run: index of the next forward run */
    struct gm_map site_of;               /* stack -> index in sites[] */
    struct site_stat *sites;             /* per allocation stack seen in the trace */
    struct ana_index iters_ix;           /* event -> iteration */
    struct gm_lod_totals *totals;        /* gm_analysis_opts.totals: fed by build_series */
    struct ana_cats *totals_cats;        /* with them: gm_analysis_totals_cats() (NULL: none) */
    struct ana_layout_events seg_events; /* gathered by scan_trace: the layout history's
                                            events and the series' reserved bytes */
    struct ana_times tm;   /* per event its time's step, kept by scan_trace while every event
                              has a time and no step goes back or past 2^32 us; the series then
                              reads no trace (tm.dt NULL: it does) */
    struct ana_stacks stk; /* per event its stack when the loader's scan kept them, else
                              stk.v NULL: compute_phases reads them instead of the trace */
    uint64_t held;         /* bytes this device's analysis holds, against the memory limit */
    size_t n_timed;        /* events with a time_us */
    /* stk's array once compute_phases has read it, when the totals are asked for: their x's
     * are made in it (pages written once already, big.h), spare_bytes its capacity */
    void *spare;
    size_t spare_bytes;
    /* a diff's allocations (diff_only), in the order of dev->allocs, which it does not keep */
    struct ana_lite *lite;
    size_t n_lite, cap_lite;
};

/* What an allocation site (stack) does over the trace, for the input-batch rule. */
struct site_stat {
    uint32_t count;   /* trace allocations */
    uint32_t n_iters; /* distinct iterations (or the prelude) it allocates in */
    int32_t last_iter;
    int32_t first_kept; /* iteration of its first / last allocation never freed, -2: none */
    int32_t last_kept;
    uint32_t n_batches; /* allocations already classified as freed batches */
};

/* Whether 'more' bytes fit under the snapshot's memory limit beside what it and this
 * analysis hold; if so they are counted. */
static bool take(struct work *w, uint64_t more)
{
    if (!gm_budget_fits(w->snap->memory_limit, snap_memory_held(w->snap) + w->priv->held + w->held,
                        more))
        return false;
    w->held += more;
    return true;
}

static enum gm_status over_limit(struct work *w, struct gm_error *err)
{
    char what[64];
    snprintf(what, sizeof(what), "the analysis of device %d", (int)w->sd->index);
    return gm_budget_fail(err, what, UINT64_MAX, w->snap->memory_limit);
}

enum gm_status ana_events_missing(const struct gm_snapshot_device *sd, struct gm_error *err)
{
    return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                   "analysis: device %d: its events were consumed while loading "
                   "(gm_snapshot_opts.consume_events), and this analysis reads them: load the "
                   "file again keeping them",
                   (int)sd->index);
}

/* ---------------------------------------------------------------- allocations */

/* The size analysis.h promises: one of these per allocation is most of what an analysis
 * holds. */
_Static_assert(sizeof(struct gm_analysis_alloc) == 40, "gm_analysis_alloc grew");
_Static_assert(GM_ANALYSIS_STREAMS_MAX <= UINT16_MAX, "a stream's index is 16 bits");

static void alloc_init(struct gm_analysis_alloc *x)
{
    memset(x, 0, sizeof(*x));
    x->alloc_event = -1;
    x->free_event = -1;
    x->free_requested_event = -1;
}

/* An allocation as a diff's analysis keeps it (ANA_PARTS_DIFF): what its category and the
 * diff's sums read, half a gm_analysis_alloc (no address, stream or results; fresh memory
 * is most of what a scan of millions of allocations costs).  lite_get() makes the whole
 * record from it, for the one classification. */
struct ana_lite {
    uint64_t bytes;
    int32_t alloc_event, free_event, free_requested_event;
    uint32_t stack; /* | LITE_FREE_HAS_STACK */
};
#define LITE_FREE_HAS_STACK 0x80000000u /* (stacks stay below: scan_event()) */
_Static_assert(sizeof(struct ana_lite) <= sizeof(struct gm_analysis_alloc),
               "lite_of_allocs() converts in place, the bytes of the array kept");

/* The capacity in lite records of an array of 'cap' whole ones, converted in place
 * (lite_of_allocs()): the bytes past the last whole lite record stay unused, less than one
 * record (the array's mapping is whole 2 MiB units, big.c, and so stays the same; the heap
 * frees by address). */
static size_t lite_cap_of(size_t cap)
{
    return cap * sizeof(struct gm_analysis_alloc) / sizeof(struct ana_lite);
}

static void lite_init(struct ana_lite *x, uint64_t bytes)
{
    x->bytes = bytes;
    x->alloc_event = x->free_event = x->free_requested_event = -1;
    x->stack = 0;
}

static void lite_get(const struct ana_lite *l, struct gm_analysis_alloc *a)
{
    alloc_init(a);
    a->bytes = l->bytes;
    a->alloc_event = l->alloc_event;
    a->free_event = l->free_event;
    a->free_requested_event = l->free_requested_event;
    a->stack = l->stack & ~LITE_FREE_HAS_STACK;
    a->free_has_stack = (l->stack & LITE_FREE_HAS_STACK) != 0;
}

/* Allocations arr[0..n) made lite in place (the array's bytes unchanged: twice as many lite
 * ones); false when a stack does not fit the lite form. */
static bool lite_of_allocs(void *arr, size_t n)
{
    const struct gm_analysis_alloc *a = arr;
    struct ana_lite *l = arr;
    for (size_t i = 0; i < n; i++) {
        struct gm_analysis_alloc x = a[i]; /* (l[i] overlaps a[i / 2]: read first) */
        if (x.stack & LITE_FREE_HAS_STACK)
            return false;
        lite_init(&l[i], x.bytes);
        l[i].alloc_event = x.alloc_event;
        l[i].free_event = x.free_event;
        l[i].free_requested_event = x.free_requested_event;
        l[i].stack = x.stack | (x.free_has_stack ? LITE_FREE_HAS_STACK : 0);
    }
    return true;
}

/* record_function ranges "Optimizer.step#..." (2.4+ external_annotations) mark steps by
 * time: events inside one that the frames left unknown are step events.  The ranges of the
 * device, START to END in the order of the annotations, are applied in the pass over the
 * events (events are in time order): an event is held against the current range, which
 * starts at its first event at or after START and ends at the first one after END. */
struct step_ranges {
    int64_t *open, *close;
    size_t n, i;
    bool started;
};

static bool has_prefix(const char *s, const char *p)
{
    return s && strncmp(s, p, strlen(p)) == 0;
}

static bool step_ranges_init(struct step_ranges *r, const struct gm_snapshot *snap, int32_t device)
{
    int64_t open = -1;
    memset(r, 0, sizeof(*r));
    if (!snap->n_annotations || !snap->has_time)
        return true;
    r->open = gm_malloc(snap->n_annotations * sizeof(int64_t));
    r->close = gm_malloc(snap->n_annotations * sizeof(int64_t));
    if (!r->open || !r->close)
        return false;
    for (size_t i = 0; i < snap->n_annotations; i++) {
        const struct gm_snapshot_annotation *an = &snap->annotations[i];
        if (an->device != device || !has_prefix(an->name, "Optimizer.step#"))
            continue;
        if (an->is_start) {
            open = an->time_us;
            continue;
        }
        if (open < 0)
            continue;
        r->open[r->n] = open;
        r->close[r->n++] = an->time_us;
        open = -1;
    }
    return true;
}

/* Whether event 'e' lies in a step range (and the ranges advance past it). */
static inline bool in_step_range(struct step_ranges *r, const struct gm_snapshot_event *e)
{
    while (r->i < r->n) {
        if (!(e->flags & GM_EVENT_HAS_TIME))
            return false;
        if (!r->started) {
            if (e->time_us < r->open[r->i])
                return false;
            r->started = true;
        }
        if (e->time_us > r->close[r->i]) {
            r->i++;
            r->started = false;
            continue;
        }
        return true;
    }
    return false;
}

/* After in_step_range() answered at an event, the least time from which a later event (times
 * going forward) may get another answer or change its state: the current range's start
 * before it has started, the time past its end inside it (the end is in the range).  *never
 * when no later time does: past the last range, or inside one that ends at INT64_MAX. */
static inline int64_t step_ranges_next_change(const struct step_ranges *r, bool *never)
{
    *never = r->i >= r->n || (r->started && r->close[r->i] == INT64_MAX);
    return *never ? 0 : r->started ? r->close[r->i] + 1 : r->open[r->i];
}

/* A step of this many microseconds or more is kept in dt_wide[]: the steps between events
 * are mostly far shorter than 65 ms, so two bytes an event hold them. */
#define DT_WIDE UINT16_MAX

/* The microseconds from event k - 1 to event k as scan_trace kept them (w->tm.dt), the wide
 * ones the next of dt_wide[] (*wi, moved on). */
static inline uint32_t step_us(const uint16_t *dt, const uint32_t *dt_wide, int64_t k, size_t *wi)
{
    uint32_t d = dt[k];
    return d == DT_WIDE ? dt_wide[(*wi)++] : d;
}

/* The time of event j (0 <= j < the events) from the times' blocks: its block's first
 * event's, then the steps after it. */
static int64_t time_at(const struct ana_times *tm, int64_t j)
{
    const struct ana_time_block *b = &tm->blocks[(size_t)j >> TB_SHIFT];
    int64_t t = b->time_us;
    size_t wi = b->n_wide;
    for (int64_t i = (int64_t)(((size_t)j >> TB_SHIFT) << TB_SHIFT) + 1; i <= j; i++)
        t += (int64_t)step_us(tm->dt, tm->dt_wide, i, &wi);
    return t;
}

void ana_time_cursor_init(struct ana_time_cursor *c, const struct ana_times *tm)
{
    c->tm = tm;
    c->k = -1;
    c->t = 0;
    c->wi = 0;
}

int64_t ana_time_cursor_at(struct ana_time_cursor *c, int64_t k)
{
    const struct ana_times *tm = c->tm;
    if (k < c->k || c->k < 0 || (k >> TB_SHIFT) > (c->k >> TB_SHIFT)) {
        /* from the block of k, as time_at() */
        const struct ana_time_block *b = &tm->blocks[(size_t)k >> TB_SHIFT];
        c->k = (int64_t)(((size_t)k >> TB_SHIFT) << TB_SHIFT);
        c->t = b->time_us;
        c->wi = b->n_wide;
    }
    for (; c->k < k; c->k++)
        c->t += (int64_t)step_us(tm->dt, tm->dt_wide, c->k + 1, &c->wi);
    return c->t;
}

/* From event k (its time *t, *wi the wide steps up to it), forward to the event before
 * 'to', or with 'by_time' before the first event after k whose time reaches t_stop (times
 * never go back where they are kept): returns that event's index plus one, *t and *wi
 * those of the event before it.  Whole blocks are passed over by their first events. */
static int64_t times_forward(const struct ana_times *tm, int64_t k, int64_t to, bool by_time,
                             int64_t t_stop, int64_t *t, size_t *wi)
{
    const uint16_t *dt = tm->dt;
    const uint32_t *dt_wide = tm->dt_wide;
    int64_t j = k + 1, tt = *t;
    size_t w = *wi;
    /* the last block start in (k, to) whose time is below t_stop */
    for (size_t b = ((size_t)j + ((size_t)1 << TB_SHIFT) - 1) >> TB_SHIFT;
         (int64_t)(b << TB_SHIFT) < to && (!by_time || tm->blocks[b].time_us < t_stop); b++) {
        tt = tm->blocks[b].time_us;
        w = tm->blocks[b].n_wide;
        j = (int64_t)(b << TB_SHIFT) + 1;
    }
    for (; j < to; j++) {
        uint32_t d = dt[j];
        int64_t tj = tt + (int64_t)(d == DT_WIDE ? dt_wide[w] : d);
        if (by_time && tj >= t_stop)
            break;
        w += d == DT_WIDE;
        tt = tj;
    }
    *t = tt;
    *wi = w;
    return j;
}

/* Free the times (none kept after); the bytes they held. */
static uint64_t times_release(struct ana_times *t)
{
    uint64_t bytes = gm_budget_bytes(t->cap_dt, sizeof(uint16_t)) +
                     gm_budget_bytes(t->cap_dt_wide, sizeof(uint32_t)) +
                     gm_budget_bytes(t->cap_blocks, sizeof(*t->blocks));
    gm_big_free(t->dt, t->cap_dt * sizeof(uint16_t));
    gm_big_free(t->dt_wide, t->cap_dt_wide * sizeof(uint32_t));
    gm_big_free(t->blocks, t->cap_blocks * sizeof(*t->blocks));
    memset(t, 0, sizeof(*t));
    return bytes;
}

/* The series reads the trace after all (scan_trace found an event it cannot record). */
static void drop_times(struct work *w)
{
    if (w->tm.dt)
        w->held -= times_release(&w->tm);
}

/* Set in w->phase by scan_trace on an unknown event whose stack is empty (compute_phases
 * reads it instead of the event). */
#define RAW_NO_FRAMES 0x80
/* Not yet known (scan_trace's raw phase per stack). */
#define RAW_UNSET 0xff

/* ---------------------------------------------------------------- step 1
 *
 * Step 1's work per event (scan_event()): the time steps, the layout history's events, the
 * allocations matched to their frees by address, the oom events and each event's raw
 * phase.  It runs either on the events as the loader commits them (the analysis's consumer,
 * gm_analysis_first_pass_consumer(), which spares the analysis a decode of the stored trace) or
 * over the stored trace after the load (scan_walk()), when the consumer did not see the whole trace
 * or its holdings do not fit the analysis's budget: the same code either way, so the results do not
 * depend on which ran.  While loading there is no classifier and no annotation yet: each event's
 * stack is kept (stk[]) and its raw phase made after the load by the rule the walk applies at once
 * (raw_rule_phase()). */

/* stk[]: the event's action has no phase (snapshot, other); stacks stay below it.  In the
 * 16-bit form the bit is STK16_NO_PHASE; stk_at() answers in the 32-bit form either way. */
#define STK_NO_PHASE   0x80000000u
#define STK16_NO_PHASE 0x8000u

static inline size_t stk_elem(const struct ana_stacks *t)
{
    return t->wide ? sizeof(uint32_t) : sizeof(uint16_t);
}

/* Event k's word as stored, and a stored word in the 32-bit form: its stack, | STK_NO_PHASE
 * when its action has no phase (equal words: equal stacks and phase bits, in either form);
 * 'wide' is t->wide, a constant where a caller's loop is compiled for each form. */
static GM_INLINE_ALWAYS uint32_t stk_word_as(const struct ana_stacks *t, size_t k, bool wide)
{
    return wide ? ((const uint32_t *)t->v)[k] : ((const uint16_t *)t->v)[k];
}

static GM_INLINE_ALWAYS uint32_t stk_wide_as(uint32_t x, bool wide)
{
    return wide ? x : (x & ~STK16_NO_PHASE) | (x & STK16_NO_PHASE) << 16;
}

static inline uint32_t stk_at(const struct ana_stacks *t, size_t k)
{
    return stk_wide_as(stk_word_as(t, k, t->wide), t->wide);
}

static void stk_release(struct ana_stacks *t)
{
    gm_big_free(t->v, t->cap * stk_elem(t));
    memset(t, 0, sizeof(*t));
}

enum scan_stop { SCAN_OK = 0, SCAN_NOMEM, SCAN_OVER, SCAN_TOO_MANY, SCAN_STREAMS };

/* The streams of a scan's allocations: each record names its own by a 16-bit index into
 * key[] (gm_analysis_alloc.stream_index); a key is the event's extra id while loading (the
 * loader's streams are told only after the load) and the stream itself while walking;
 * scan_trace() makes the indexes those of the device's table of distinct streams.  At most
 * GM_ANALYSIS_STREAMS_MAX keys (under 2 MB with the map: outside the memory limit's count). */
struct stream_keys {
    struct gm_map idx; /* key -> its index */
    uint64_t *key;     /* by index */
    size_t n, cap;
    uint64_t last_key; /* the key asked last, and its index (n > 0): most allocations */
    uint16_t last_idx; /* have the stream of the one before */
};

struct scan {
    struct gm_budget budget; /* what it holds, counted within its limit */
    enum scan_stop stop;     /* why it stopped, SCAN_OK while it goes on */
    bool loading;            /* fed by the loader (stk[] kept, streams left as extras) */
    bool abandoned;          /* the loader gave up on it: the trace is walked instead */
    bool diff_only;          /* no times, free order or layout events (a diff's walk), and
                                the allocations lite: in lite_trace[] and lite_early[] */
    size_t n;                /* events seen */
    struct ana_stacks stk;   /* loading: per event, its stack */
    struct ana_times tm;     /* see struct work (tm.dt NULL: not kept) */
    int64_t last_t, t0;      /* the time of the last event, of the first */
    struct gm_analysis_alloc *trace, *early;
    struct stream_keys streams;               /* what trace[] and early[] name their streams by */
    struct ana_lite *lite_trace, *lite_early; /* diff_only: in their place */
    size_t n_trace, cap_trace, n_early, cap_early;
    /* the allocation at each address: while loading the trace's fold answers (its ordinal
     * among the allocs is its index in trace[]; snapshot_int.h), so that one map serves
     * both; a walk keeps its own, address -> index in trace[] */
    struct snap_fold *fold; /* (loading only: the fold goes before the scan) */
    struct gm_map map;
    uint64_t *from_start; /* taken: the fold's blocks' bits (snap_fold_take_from_start()) */
    uint64_t from_start_bytes;
    uint32_t *free_of; /* see struct work */
    size_t n_free_of, cap_free_of;
    int64_t *ooms;
    size_t n_oom, cap_oom;
    struct ana_layout_events seg_events;
    bool has_frames;
    size_t n_timed;
};

/* Grow a GM_VEC_BIG array within the scan's budget; false (s->budget.over: refused) when
 * it cannot, the scan going on (what the array holds is optional). */
static bool scan_grow_kept(struct scan *s, void **p, size_t *cap, size_t need, size_t elem)
{
    s->budget.over = false;
    *p = gm_vec_grow(*p, cap, need, elem, GM_VEC_BIG, &s->budget);
    return need <= *cap;
}

/* The same for what the scan needs: false (and why in s->stop) when it cannot grow. */
static bool scan_grow(struct scan *s, void **p, size_t *cap, size_t need, size_t elem)
{
    if (scan_grow_kept(s, p, cap, need, elem))
        return true;
    s->stop = s->budget.over ? SCAN_OVER : SCAN_NOMEM;
    return false;
}

/* No times kept after all (the series reads the trace for them). */
static void scan_drop_times(struct scan *s)
{
    if (s->tm.dt)
        gm_budget_give(&s->budget, times_release(&s->tm));
}

/* At the end of the scan (its last event's time in s->last_t): the times are dropped when
 * they went back, from INT64_MAX past INT64_MIN, so that no sum of kept times overflows.
 * Any other step back is one of 2^32 us or more, dropped by scan_wide_step(); so is a
 * wrap of 2^32 us or more.  A smaller one is found from the blocks: the steps of a block
 * add up to less than 2^40, so the times wrapped from one block's first event to the next
 * (scan_event()), or to the last event, exactly when the later time is below the earlier. */
static void scan_times_end(struct scan *s)
{
    if (s->tm.dt && s->n && s->last_t < s->tm.blocks[(s->n - 1) >> TB_SHIFT].time_us)
        scan_drop_times(s);
}

/* Keep the step 'd' (DT_WIDE or more) of event k in dt_wide[]; the times are dropped when
 * it cannot be kept (2^32 us or more, or beyond the budget). */
static void scan_wide_step(struct scan *s, size_t k, uint64_t d)
{
    if (d > UINT32_MAX) {
        scan_drop_times(s);
        return;
    }
    if (s->tm.n_dt_wide == s->tm.cap_dt_wide &&
        !scan_grow_kept(s, (void **)&s->tm.dt_wide, &s->tm.cap_dt_wide, s->tm.n_dt_wide + 1,
                        sizeof(uint32_t))) {
        scan_drop_times(s);
        return;
    }
    s->tm.dt[k] = DT_WIDE;
    s->tm.dt_wide[s->tm.n_dt_wide++] = (uint32_t)d;
}

/* The raw phase of an event: from its stack's frames (once per stack), else a step while
 * inside an "Optimizer.step#" range. */
struct raw_rule {
    struct ana_classifier *cls;
    uint8_t *raw_of; /* per stack id: its raw phase, RAW_UNSET until asked */
    size_t n_stacks;
    struct step_ranges steps;
};

static GM_INLINE_ALWAYS uint8_t raw_rule_stack(struct raw_rule *r, uint32_t stack, bool has_phase)
{
    uint8_t raw = RAW_UNKNOWN;
    if (has_phase) {
        if (stack >= r->n_stacks)
            raw = (uint8_t)ana_phase_of_flags(ana_stack_flags(r->cls, stack));
        else if ((raw = r->raw_of[stack]) == RAW_UNSET)
            raw = r->raw_of[stack] = (uint8_t)ana_phase_of_flags(ana_stack_flags(r->cls, stack));
    }
    return raw;
}

/* The raw phase of an event from its stack's ('raw', raw_rule_stack()) and whether it lies in
 * a step range. */
static inline uint8_t raw_rule_finish(uint8_t raw, bool in_step, uint32_t stack)
{
    if (in_step && raw == RAW_UNKNOWN)
        raw = RAW_STEP;
    if (raw == RAW_UNKNOWN && !stack)
        raw |= RAW_NO_FRAMES; /* what the smoothing asks of an unknown event's stack */
    return raw;
}

static GM_INLINE_ALWAYS uint8_t raw_rule_phase(struct raw_rule *r, uint32_t stack, bool has_phase,
                                               const struct gm_snapshot_event *timed)
{
    uint8_t raw = raw_rule_stack(r, stack, has_phase);
    return raw_rule_finish(raw, in_step_range(&r->steps, timed), stack);
}

/* A new allocation of event 'e' at the end of arr[0..*n) (the stream from 'snap', its extra
 * id while loading), or NULL when it cannot be kept (s->stop). */
/* A new slot of 'size' bytes at the end of *arr[0..*n), or NULL (s->stop): allocations are
 * counted in 31 bits (event indexes and the scan's map), so a trace holds fewer. */
static GM_INLINE_ALWAYS void *scan_slot(struct scan *s, void **arr, size_t *n, size_t *cap,
                                        size_t size)
{
    if (*n >= (size_t)0x7fffffff) {
        s->stop = SCAN_TOO_MANY;
        return NULL;
    }
    if (*n == *cap && !scan_grow(s, arr, cap, *n + 1, size))
        return NULL;
    return (char *)*arr + (*n)++ * size;
}

/* The index of 'key' among k's (a new one added); false when the scan stops (s->stop: out
 * of memory, or more than GM_ANALYSIS_STREAMS_MAX). */
static bool stream_key_add(struct scan *s, struct stream_keys *k, uint64_t key, uint16_t *idx)
{
    bool added;
    uint64_t *v = gm_map_at(&k->idx, key, &added);
    if (!v) {
        s->stop = SCAN_NOMEM;
        return false;
    }
    if (added) {
        if (k->n >= GM_ANALYSIS_STREAMS_MAX) {
            s->stop = SCAN_STREAMS;
            return false;
        }
        if (!GM_VEC_RESERVE(k->key, k->cap, k->n + 1, NULL)) {
            s->stop = SCAN_NOMEM;
            return false;
        }
        *v = k->n;
        k->key[k->n++] = key;
    }
    k->last_key = key;
    k->last_idx = *idx = (uint16_t)*v;
    return true;
}

static void stream_keys_release(struct stream_keys *k)
{
    gm_map_release(&k->idx);
    gm_free(k->key);
    memset(k, 0, sizeof(*k));
}

/* The same, most often the index asked for last. */
static GM_INLINE_ALWAYS bool stream_key_index(struct scan *s, struct stream_keys *k, uint64_t key,
                                              uint16_t *idx)
{
    if (GM_LIKELY(k->n && key == k->last_key)) {
        *idx = k->last_idx;
        return true;
    }
    return stream_key_add(s, k, key, idx);
}

static GM_INLINE_ALWAYS struct gm_analysis_alloc *
scan_push(struct scan *s, struct gm_analysis_alloc **arr, size_t *n, size_t *cap,
          const struct gm_snapshot_event *e, const struct gm_snapshot *snap)
{
    uint16_t stream;
    if (!stream_key_index(s, &s->streams, snap ? gm_snapshot_event_stream(snap, e) : e->extra,
                          &stream))
        return NULL;
    struct gm_analysis_alloc *a = scan_slot(s, (void **)arr, n, cap, sizeof(**arr));
    if (!a)
        return NULL;
    alloc_init(a);
    a->addr = e->addr;
    a->bytes = e->size;
    a->stream_index = stream;
    return a;
}

/* The same for a diff's scan (lite allocations). */
static GM_INLINE_ALWAYS struct ana_lite *scan_push_lite(struct scan *s, struct ana_lite **arr,
                                                        size_t *n, size_t *cap,
                                                        const struct gm_snapshot_event *e)
{
    struct ana_lite *a = scan_slot(s, (void **)arr, n, cap, sizeof(**arr));
    if (!a)
        return NULL;
    lite_init(a, e->size);
    return a;
}

/* Event k's stack into 32-bit stk[] (made so from the 16-bit one the first time: the earlier
 * events' stacks widened); false when it stops (s->stop). */
static bool scan_stack_wide(struct scan *s, size_t k, uint32_t stack, bool has_phase)
{
    if (stack & STK_NO_PHASE) {
        s->stop = SCAN_TOO_MANY;
        return false;
    }
    if (!s->stk.wide) {
        struct ana_stacks w = {NULL, 0, true, 0};
        if (!scan_grow(s, &w.v, &w.cap, s->stk.cap, sizeof(uint32_t)))
            return false;
        for (size_t i = 0; i < k; i++)
            ((uint32_t *)w.v)[i] = stk_wide_as(stk_word_as(&s->stk, i, false), false);
        gm_budget_give(&s->budget, (uint64_t)s->stk.cap * sizeof(uint16_t));
        stk_release(&s->stk);
        s->stk = w;
    }
    ((uint32_t *)s->stk.v)[k] = stack | (has_phase ? 0 : STK_NO_PHASE);
    return true;
}

/* An allocation the scan keeps: the analysis' record, or (a diff's scan, lite) its lite one. */
struct scan_rec {
    struct gm_analysis_alloc *a;
    struct ana_lite *l;
};

/* A new allocation of 'e' at the end of the trace's or (early) the early ones' array;
 * neither pointer set when it cannot be kept (s->stop). */
static GM_INLINE_ALWAYS struct scan_rec scan_rec_push(struct scan *s, bool early,
                                                      const struct gm_snapshot_event *e,
                                                      const struct gm_snapshot *snap, bool lite)
{
    struct scan_rec r = {NULL, NULL};
    if (!lite)
        r.a = early ? scan_push(s, &s->early, &s->n_early, &s->cap_early, e, snap)
                    : scan_push(s, &s->trace, &s->n_trace, &s->cap_trace, e, snap);
    else if (!early && (e->stack & LITE_FREE_HAS_STACK))
        s->stop = SCAN_TOO_MANY; /* (the flag bit is the stack's) */
    else
        r.l = early ? scan_push_lite(s, &s->lite_early, &s->n_early, &s->cap_early, e)
                    : scan_push_lite(s, &s->lite_trace, &s->n_trace, &s->cap_trace, e);
    return r;
}

static GM_INLINE_ALWAYS struct scan_rec scan_rec_at(const struct scan *s, uint32_t i, bool lite)
{
    struct scan_rec r = {NULL, NULL};
    if (lite)
        r.l = &s->lite_trace[i];
    else
        r.a = &s->trace[i];
    return r;
}

/* Whether its free_requested or free_completed has a stack: set ('or_in': added to). */
static GM_INLINE_ALWAYS void scan_rec_free_stack(struct scan_rec r, bool has, bool or_in)
{
    if (r.l)
        r.l->stack = (or_in ? r.l->stack : r.l->stack & ~LITE_FREE_HAS_STACK) |
                     (has ? LITE_FREE_HAS_STACK : 0);
    else
        r.a->free_has_stack = (uint8_t)((or_in && r.a->free_has_stack) || has);
}

/* Event k's allocation or free matched by address (the one rule of gm_snapshot_timeline()),
 * into the analysis' records or (lite: a diff's scan) its lite ones; a diff keeps no free
 * order and no oom (no matter of a diff's).  False when the scan stops. */
static GM_INLINE_ALWAYS bool scan_match(struct scan *s, size_t k, const struct gm_snapshot_event *e,
                                        const struct gm_snapshot *snap, const uint32_t *found,
                                        bool lite)
{
    switch (e->action) {
    case GM_ACTION_ALLOC: {
        struct scan_rec r = scan_rec_push(s, false, e, snap, lite);
        if (!r.a && !r.l)
            return false;
        if (lite) {
            r.l->alloc_event = (int32_t)k;
            r.l->stack = e->stack;
        } else {
            r.a->alloc_event = (int32_t)k;
            r.a->stack = e->stack;
        }
        if (!found && !gm_map_put(&s->map, e->addr, s->n_trace - 1)) {
            s->stop = SCAN_NOMEM;
            return false;
        }
        break;
    }
    case GM_ACTION_FREE_REQUESTED: {
        uint32_t i = found ? *found : ana_map_u32(&s->map, e->addr);
        if (i != NO_ALLOC) {
            struct scan_rec r = scan_rec_at(s, i, lite);
            int32_t *req = lite ? &r.l->free_requested_event : &r.a->free_requested_event;
            if (*req < 0) {
                *req = (int32_t)k;
                scan_rec_free_stack(r, e->stack != 0, false);
            }
        }
        break;
    }
    case GM_ACTION_FREE_COMPLETED: {
        uint64_t v;
        uint32_t i = found ? *found : gm_map_take(&s->map, e->addr, &v) ? (uint32_t)v : NO_ALLOC;
        struct scan_rec r;
        if (!lite && s->n_free_of == s->cap_free_of &&
            !scan_grow(s, (void **)&s->free_of, &s->cap_free_of, s->n_free_of + 1,
                       sizeof(uint32_t)))
            return false;
        if (i != NO_ALLOC) {
            r = scan_rec_at(s, i, lite);
            scan_rec_free_stack(r, e->stack != 0, true);
            if (!lite)
                s->free_of[s->n_free_of++] = i;
        } else {
            r = scan_rec_push(s, true, e, snap, lite);
            if (!r.a && !r.l)
                return false;
            scan_rec_free_stack(r, e->stack != 0, false);
            if (!lite)
                s->free_of[s->n_free_of++] = (uint32_t)(s->n_early - 1) | EARLY;
        }
        if (lite)
            r.l->free_event = (int32_t)k;
        else
            r.a->free_event = (int32_t)k;
        break;
    }
    case GM_ACTION_OOM:
        if (lite)
            break;
        if (s->n_oom == s->cap_oom &&
            !scan_grow(s, (void **)&s->ooms, &s->cap_oom, s->n_oom + 1, sizeof(int64_t)))
            return false;
        s->ooms[s->n_oom++] = (int64_t)k;
        break;
    default:
        break;
    }
    return true;
}

/* Event k into the scan.  'snap' and 'rule' while walking (the stream and the raw phase
 * made at once, into phase[]), NULL while loading (the extra id and the stack kept).
 * 'found': the fold's answer for the event while loading (snap_fold_answers()), NULL when
 * walking (the scan's own map answers).  False when it stops (s->stop). */
static GM_INLINE_ALWAYS bool scan_event(struct scan *s, size_t k, const struct gm_snapshot_event *e,
                                        const struct gm_snapshot *snap, struct raw_rule *rule,
                                        uint8_t *phase, const uint32_t *found)
{
    s->has_frames |= e->stack != 0;
    s->n_timed += (e->flags & GM_EVENT_HAS_TIME) != 0;
    if (!rule && k == 0) /* (the walk starts from the first event's time) */
        s->last_t = s->t0 = e->time_us;
    if (s->tm.dt) {
        /* (an event without a time drops them after the pass) */
        uint64_t d = (uint64_t)e->time_us - (uint64_t)s->last_t;
        s->last_t = e->time_us;
        if (!rule && k >= s->tm.cap_dt) { /* (the walk's has room for every event) */
            if (!scan_grow_kept(s, (void **)&s->tm.dt, &s->tm.cap_dt, k + 1, sizeof(uint16_t)))
                scan_drop_times(s);
        }
        if (!s->tm.dt)
            ;
        else if (d < DT_WIDE)
            s->tm.dt[k] = (uint16_t)d;
        else
            scan_wide_step(s, k, d);
        if (s->tm.dt && !(k & ((1u << TB_SHIFT) - 1))) {
            size_t b = k >> TB_SHIFT;
            if ((b > 0 && e->time_us < s->tm.blocks[b - 1].time_us) ||
                (b >= s->tm.cap_blocks &&
                 !scan_grow_kept(s, (void **)&s->tm.blocks, &s->tm.cap_blocks, b + 1,
                                 sizeof(*s->tm.blocks))))
                scan_drop_times(s); /* (a wrap: scan_times_end()) */
            else
                s->tm.blocks[b] = (struct ana_time_block){e->time_us, s->tm.n_dt_wide};
        }
    }
    bool has_phase = e->action != GM_ACTION_SNAPSHOT && e->action != GM_ACTION_OTHER;
    if (rule) {
        phase[k] = raw_rule_phase(rule, e->stack, has_phase, e);
    } else {
        if (k >= s->stk.cap && !scan_grow(s, &s->stk.v, &s->stk.cap, k + 1, stk_elem(&s->stk)))
            return false;
        if (GM_LIKELY(e->stack < s->stk.narrow_below))
            ((uint16_t *)s->stk.v)[k] = (uint16_t)(e->stack | (has_phase ? 0 : STK16_NO_PHASE));
        else if (!scan_stack_wide(s, k, e->stack, has_phase))
            return false;
    }
    if (!s->diff_only && !ana_layout_events_see(&s->seg_events, (int64_t)k, e)) {
        s->stop = SCAN_NOMEM;
        return false;
    }
    return s->diff_only ? scan_match(s, k, e, snap, found, true)
                        : scan_match(s, k, e, snap, found, false);
}

static void scan_release(struct scan *s)
{
    scan_drop_times(s);
    stk_release(&s->stk);
    gm_big_free(s->trace, s->cap_trace * sizeof(*s->trace));
    gm_big_free(s->early, s->cap_early * sizeof(*s->early));
    gm_big_free(s->lite_trace, s->cap_trace * sizeof(*s->lite_trace));
    gm_big_free(s->lite_early, s->cap_early * sizeof(*s->lite_early));
    gm_big_free(s->free_of, s->cap_free_of * sizeof(uint32_t));
    gm_big_free(s->ooms, s->cap_oom * sizeof(int64_t));
    gm_map_release(&s->map);
    stream_keys_release(&s->streams);
    gm_free(s->from_start);
    ana_layout_events_release(&s->seg_events);
    memset(s, 0, sizeof(*s));
}

/* ---- the scan as the loader's consumer (snapshot_int.h) ---- */

static const struct snap_consumer_ops pass_ops;

static void *pass_open(void *ctx, uint32_t index, struct gm_budget *shared,
                       struct gm_snapshot_packed *pk)
{
    struct scan *s;
    (void)index;
    if (!pk->fold || !(s = gm_calloc(1, sizeof(*s))))
        return NULL; /* (without the fold's map: done after the load) */
    s->budget = gm_budget_make(0, 0);
    s->budget.shared = shared;
    s->loading = true;
    /* a diff's (ctx: its parts) keeps no free order and no layout events */
    s->diff_only = ctx && *(const enum ana_parts *)ctx == ANA_PARTS_DIFF;
    s->stk.narrow_below = STK16_NO_PHASE; /* 16 bits an event to start with */
    /* the fold (opened first) keeps the map for both */
    s->fold = pk->fold;
    snap_fold_answer(pk->fold, true);
    /* the times while they can be kept (a diff ignores them) */
    s->tm.dt = gm_vec_grow(NULL, &s->tm.cap_dt, 1, sizeof(uint16_t), GM_VEC_BIG, &s->budget);
    pk->consumed = s;
    pk->consumed_ops = &pass_ops;
    return s;
}

/* What the scan holds freed and given back to the load's budget: the trace is walked. */
static void pass_give_up(struct scan *s)
{
    struct gm_budget *shared = s->budget.shared;
    uint64_t used = s->budget.used;
    s->budget.shared = NULL;
    scan_release(s);
    gm_budget_give(shared, used);
    s->abandoned = true;
}

static void pass_events(void *state, const struct gm_snapshot_event *ev, size_t n)
{
    struct scan *s = state;
    const uint32_t *found;
    if (s->abandoned || !n)
        return;
    if (!(found = snap_fold_answers(s->fold, s->n, n))) {
        pass_give_up(s); /* the fold gave up: no map to pair the frees with */
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (!scan_event(s, s->n + i, &ev[i], NULL, NULL, NULL, &found[i])) {
            /* what the walk would say is found by the walk, and the fold answers nobody */
            snap_fold_answer(s->fold, false);
            pass_give_up(s);
            return;
        }
    s->n += n;
}

/* (not from pass_release(): the fold is freed before the scan, events.c) */
static void pass_abandon(void *state)
{
    struct scan *s = state;
    snap_fold_answer(s->fold, false);
    pass_give_up(s);
}

static void pass_release(void *state)
{
    struct scan *s = state;
    if (!s)
        return;
    pass_give_up(s);
    gm_free(s);
}

/* Whether the scan's times are kept to its end (what scan_times_end() would leave). */
static bool scan_times_kept(const struct scan *s)
{
    return s->tm.dt && !(s->n && s->last_t < s->tm.blocks[(s->n - 1) >> TB_SHIFT].time_us);
}

/* After a load that kept no events (gm_snapshot_opts.consume_events): whether the analysis of
 * device d (the whole one, a report's included) reads its stored trace all the same, so that
 * the load reads the file again with them.  It does when the scan did not see every event
 * (scan_taken() refuses it); when some events have a time but the times are not kept to the
 * end (the series reads them from the trace: build_series(); the step ranges, the user's
 * phases and the rules by annotation read them: scan_taken(), ana_user_phases(),
 * ana_rules_device()); and when events carry notes (the groups alive at the peak read them,
 * peaks.c).  What scan_taken() checks against the memory limit cannot be told here: an
 * analysis that would read the trace fails on such a snapshot (ana_events_missing()), and its
 * caller loads again. */
static bool pass_needs_trace(const void *state, const struct gm_snapshot *snap,
                             const struct gm_snapshot_device *d)
{
    const struct scan *s = state;
    if (s->abandoned || s->stop != SCAN_OK || s->n != d->n_events)
        return true;
    if (s->n_timed && (s->n_timed != s->n || !scan_times_kept(s)))
        return true;
    return snap_has_event_notes(snap);
}

static const struct snap_consumer_ops pass_ops = {pass_open, pass_events, pass_abandon,
                                                  pass_release, pass_needs_trace};

static const struct gm_snapshot_consumer first_pass = {&pass_ops, NULL};

const struct gm_snapshot_consumer *gm_analysis_first_pass_consumer(void)
{
    return &first_pass;
}

static const enum ana_parts diff_parts = ANA_PARTS_DIFF;
static const struct gm_snapshot_consumer diff_first_pass = {&pass_ops,
                                                            (void *)(uintptr_t)&diff_parts};

const struct gm_snapshot_consumer *gm_analysis_diff_first_pass_consumer(void)
{
    return &diff_first_pass;
}

/* ---- step 1 after the load ---- */

/* The scan the loader made of w->sd's trace, when it saw the whole trace, the raw phases
 * can be made from what it kept (the times, where steps are marked by time) and it fits the
 * analysis's budget beside what the snapshot and the analysis hold; else NULL (freed).
 * Either way what it held is no longer the snapshot's (snap_memory_held()). */
static struct scan *scan_taken(struct work *w, const struct raw_rule *rule)
{
    struct scan *s = snap_consumed_take(w->sd, &pass_ops);
    if (!s)
        return NULL;
    s->budget.shared = NULL;
    s->fold = NULL; /* (freed with the snapshot's trace, maybe before the scan) */
    /* the fold's bits, where it answered for every event: which blocks are alive from the
     * start; their bytes the scan's from now on */
    if ((s->from_start = snap_fold_take_from_start(w->sd, &s->from_start_bytes)) != NULL)
        s->budget.used += s->from_start_bytes;
    snap_memory_moved(w->sd, s->budget.used);
    scan_times_end(s);
    if (s->abandoned || s->n != w->sd->n_events || !s->from_start ||
        (rule->steps.n && (!s->tm.dt || s->n_timed != s->n)) || (s->diff_only && !w->diff_only))
        goto out_release; /* (a diff's first pass: no free order or layout events) */
    if (w->diff_only && !s->diff_only) {
        /* a whole first pass, taken by a diff: its allocations made lite, in place */
        if (!lite_of_allocs(s->trace, s->n_trace) || !lite_of_allocs(s->early, s->n_early))
            goto out_release;
        s->lite_trace = (struct ana_lite *)(void *)s->trace;
        s->lite_early = (struct ana_lite *)(void *)s->early;
        s->trace = s->early = NULL;
        s->cap_trace = lite_cap_of(s->cap_trace);
        s->cap_early = lite_cap_of(s->cap_early);
        s->diff_only = true;
    }
    if (w->diff_only) {
        /* what a diff does not read (the times go once the phases are made) */
        gm_big_free(s->free_of, s->cap_free_of * sizeof(uint32_t));
        gm_budget_give(&s->budget, (uint64_t)s->cap_free_of * sizeof(uint32_t));
        s->free_of = NULL;
        s->n_free_of = s->cap_free_of = 0;
        ana_layout_events_release(&s->seg_events);
    }
    if (!gm_budget_fits(w->snap->memory_limit, snap_memory_held(w->snap) + w->priv->held + w->held,
                        s->budget.used))
        goto out_release;
    w->priv->n_first_pass_taken++;
    return s;
out_release:
    pass_release(s);
    return NULL;
}

/* The raw phases of the scan the loader made (its stacks, the times rebuilt from its steps
 * for the step ranges), by the rule the walk applies per event; 'wide' is s->stk.wide (a
 * constant in each of the two copies scan_phases() calls). */
static GM_INLINE_ALWAYS void scan_phases_as(const struct scan *s, const struct raw_rule *rule,
                                            uint8_t *phase, bool wide)
{
    /* a copy whose address no call takes: the byte stores to phase[] would otherwise make
     * the compiler read the rule again after each one */
    struct raw_rule r = *rule;
    const struct ana_stacks stk = s->stk;
    struct gm_snapshot_event t;
    uint64_t time = (uint64_t)s->t0;
    size_t wi = 0;
    memset(&t, 0, sizeof(t));
    t.flags = GM_EVENT_HAS_TIME;
    if (!r.steps.n) {
        /* no step ranges: an event's raw phase is its stack's, as the event before's when
         * the stack is the same */
        uint32_t last = 0;
        uint8_t last_raw = 0;
        for (size_t k = 0, n = s->n; k < n; k++) {
            uint32_t word = stk_word_as(&stk, k, wide);
            if (k == 0 || word != last) {
                uint32_t x = stk_wide_as(word, wide);
                last = word;
                last_raw = raw_rule_phase(&r, x & ~STK_NO_PHASE, !(x & STK_NO_PHASE), &t);
            }
            phase[k] = last_raw;
        }
        return;
    }
    /* with them (every event has a time here, scan_taken(), and times never go back where
     * they are kept): in_step_range() at an event, then the events after it for which it
     * answers the same without a change of its state (before the current range's start, or
     * up to its end), found by the times' blocks; each of those takes its stack's raw phase
     * as above, with that answer */
    size_t n = s->n, k = 0;
    t.time_us = (int64_t)time; /* event 0's (its step is 0) */
    while (k < n) {
        bool in = in_step_range(&r.steps, &t);
        bool to_end;
        int64_t stop = step_ranges_next_change(&r.steps, &to_end);
        int64_t tj = t.time_us;
        size_t j = n;
        if (!to_end)
            j = (size_t)times_forward(&s->tm, (int64_t)k, (int64_t)n, true, stop, &tj, &wi);
        uint32_t last = stk_word_as(&stk, k, wide), x = stk_wide_as(last, wide);
        uint8_t last_raw = raw_rule_finish(
            raw_rule_stack(&r, x & ~STK_NO_PHASE, !(x & STK_NO_PHASE)), in, x & ~STK_NO_PHASE);
        phase[k] = last_raw;
        for (size_t i = k + 1; i < j; i++) {
            uint32_t word = stk_word_as(&stk, i, wide);
            if (word != last) {
                last = word;
                x = stk_wide_as(word, wide);
                last_raw =
                    raw_rule_finish(raw_rule_stack(&r, x & ~STK_NO_PHASE, !(x & STK_NO_PHASE)), in,
                                    x & ~STK_NO_PHASE);
            }
            phase[i] = last_raw;
        }
        /* event j's time: the step after the event before it */
        if (j < n)
            t.time_us = tj + (int64_t)step_us(s->tm.dt, s->tm.dt_wide, (int64_t)j, &wi);
        k = j;
    }
}

static void scan_phases(const struct scan *s, const struct raw_rule *rule, uint8_t *phase)
{
    if (s->stk.wide)
        scan_phases_as(s, rule, phase, true);
    else
        scan_phases_as(s, rule, phase, false);
}

/* The scan's allocations trace[0..n) moved to trace[n_early..n_early + n), each with
 * remap[] of its scan's stream index (NULL: the same): one pass over an array of millions
 * (from the back: the two ranges overlap), where a pass for the streams and a memmove()
 * would read and write it twice. */
static void move_with_streams(struct gm_analysis_alloc *trace, size_t n, size_t n_early,
                              const uint16_t *remap)
{
    if (!n_early) {
        for (size_t i = 0; remap && i < n; i++)
            trace[i].stream_index = remap[trace[i].stream_index];
        return;
    }
    if (!remap) {
        memmove(trace + n_early, trace, n * sizeof(*trace));
        return;
    }
    for (size_t i = n; i-- > 0;) {
        /* (the whole record, padding included: analyses compare allocations bytewise) */
        uint16_t stream = remap[trace[i].stream_index];
        memcpy(&trace[i + n_early], &trace[i], sizeof(*trace));
        trace[i + n_early].stream_index = stream;
    }
}

/* The device's table of distinct streams (d, keyed by the stream) made from the scan's
 * stream keys (while 'loaded' the events' extra ids, else streams already): *remap (NULL
 * when every index stays the same) the device's index of each scan index; false when the
 * scan stops. */
static bool device_streams(struct scan *s, const struct gm_snapshot *snap, bool loaded,
                           struct stream_keys *d, uint16_t **remap)
{
    uint16_t *r = NULL;
    bool same = true;
    *remap = NULL;
    if (s->streams.n && !(r = gm_malloc(s->streams.n * sizeof(*r)))) {
        s->stop = SCAN_NOMEM;
        return false;
    }
    for (size_t i = 0; i < s->streams.n; i++) {
        uint64_t key = s->streams.key[i];
        if (!stream_key_add(s, d, loaded ? gm_snapshot_extra_stream(snap, key) : key, &r[i])) {
            gm_free(r);
            return false;
        }
        same &= r[i] == i;
    }
    if (same)
        gm_free(r);
    else
        *remap = r;
    return true;
}

/* The device's streams d->key[0..n) copied into the analysis' arena (*n their count). */
static const uint64_t *keep_streams(struct work *w, const struct stream_keys *d, size_t *n)
{
    uint64_t *v = gm_arena_calloc(w->arena, d->n ? d->n : 1, sizeof(*v));
    if (v && d->n)
        memcpy(v, d->key, d->n * sizeof(*v));
    *n = d->n;
    return v;
}

/* phase[] in a mapping of its own, w->phase_bytes (counted by analyse_device()); false on
 * NOMEM. */
static bool phase_alloc(struct work *w)
{
    return (w->phase = gm_big_realloc(NULL, 0, w->phase_bytes)) != NULL;
}

/* Step 1: the scan the loader made, or a walk of the trace; then what needs the whole
 * trace: the streams of the loader's allocations, the blocks alive at snapshot time, the
 * early allocations in front of the others. */
static enum gm_status scan_trace(struct work *w, struct gm_error *err)
{
    const struct gm_snapshot_device *sd = w->sd;
    const struct gm_snapshot *snap = w->snap;
    struct gm_analysis_device *dev = w->dev;
    struct scan s, *taken;
    struct stream_keys streams; /* the device's (device_streams()) */
    uint16_t *remap = NULL;     /* per stream index of the scan's: the device's */
    bool loaded = false;        /* the scan the loader made */
    struct raw_rule rule;
    enum gm_status st = GM_OK;
    uint64_t base;

    memset(&s, 0, sizeof(s));
    memset(&streams, 0, sizeof(streams));
    memset(&rule, 0, sizeof(rule));
    rule.cls = w->cls;
    rule.n_stacks = snap->n_stacks;
    if (!step_ranges_init(&rule.steps, snap, sd->index) ||
        !(rule.raw_of = gm_malloc(rule.n_stacks ? rule.n_stacks : 1))) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
        goto out;
    }
    memset(rule.raw_of, RAW_UNSET, rule.n_stacks);
    taken = scan_taken(w, &rule);
    base = snap_memory_held(snap) + w->priv->held + w->held;
    if (taken) {
        loaded = true;
        s = *taken;
        gm_free(taken);
        s.budget = gm_budget_make(snap->memory_limit, base + s.budget.used);
        /* a diff reads the times only here: its phases go in their memory, written already
         * (fresh memory is what costs), phase[i] over the step of event i / 2, which
         * scan_phases() has read (it reads steps only past the events it has written:
         * times_forward(), step_us()); then the rest of the times freed, the steps' bytes
         * counted as the phases' */
        bool in_times = w->diff_only && s.tm.dt && s.tm.cap_dt * sizeof(uint16_t) >= w->phase_bytes;
        if (in_times)
            w->phase = (uint8_t *)s.tm.dt;
        else if (!phase_alloc(w)) {
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
            goto out;
        }
        scan_phases(&s, &rule, w->phase);
        if (in_times) {
            uint64_t dt_bytes = (uint64_t)s.tm.cap_dt * sizeof(uint16_t);
            s.tm.dt = NULL;
            gm_budget_give(&s.budget, times_release(&s.tm) - dt_bytes + w->phase_bytes);
            w->phase_bytes = (size_t)dt_bytes;
            w->priv->n_phases_in_times++;
        }
        if (w->diff_only)
            scan_drop_times(&s);
    } else if (!snap_events_stored(sd)) {
        st = ana_events_missing(sd, err);
        goto out;
    } else {
        struct gm_snapshot_cursor c;
        const struct gm_snapshot_event *e;
        size_t n = sd->n_events;
        s.budget = gm_budget_make(snap->memory_limit, base);
        s.diff_only = w->diff_only;
        /* the times, for the series (within the memory limit, else it reads the trace
         * again); none for a diff, which builds no series */
        if (n && !s.diff_only && gm_budget_take(&s.budget, gm_budget_bytes(n, sizeof(uint16_t)))) {
            if ((s.tm.dt = gm_big_realloc(NULL, 0, n * sizeof(uint16_t))) != NULL)
                s.tm.cap_dt = n;
            else
                gm_budget_give(&s.budget, gm_budget_bytes(n, sizeof(uint16_t)));
        }
        /* the rule's position in the step ranges in a copy whose address no call takes:
         * kept in registers while phase[] is written */
        struct raw_rule walk_rule = rule;
        if (!phase_alloc(w)) {
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
            goto out;
        }
        uint8_t *phase = w->phase;
        struct gm_snapshot_event first;
        s.last_t = s.t0 = gm_snapshot_event_at(sd, 0, &first) ? first.time_us : 0;
        gm_snapshot_cursor_init(&c, sd, 0);
        while ((e = gm_snapshot_cursor_next(&c)) != NULL)
            if (!scan_event(&s, c.index, e, snap, &walk_rule, phase, NULL))
                goto stopped;
        s.n = n;
        scan_times_end(&s);
    }
    w->trace_has_frames = s.has_frames;
    w->n_timed = s.n_timed;
    /* the device's streams: the early allocations' indexes made its own here, the trace's
     * as they move behind the early ones (below) */
    if (!s.diff_only) {
        if (!device_streams(&s, snap, loaded, &streams, &remap))
            goto stopped;
        for (size_t i = 0; remap && i < s.n_early; i++)
            s.early[i].stream_index = remap[s.early[i].stream_index];
    }
    /* Blocks allocated at snapshot time with no alloc pending at the end: alive throughout
     * (the fold says which, where it kept the map) */
    const uint64_t *from_start = loaded ? s.from_start : NULL;
    size_t j = 0; /* the block's index among the device's */
    for (size_t si = 0; si < snap->n_segments; si++) {
        const struct gm_snapshot_segment *seg = &snap->segments[si];
        if (seg->device != sd->index)
            continue;
        for (size_t b = 0; b < seg->n_blocks; b++, j++) {
            const struct gm_snapshot_block *blk = &seg->blocks[b];
            struct gm_analysis_alloc *a;
            if (from_start ? !(from_start[j / 64] >> (j % 64) & 1)
                           : (blk->state != GM_BLOCK_ACTIVE_ALLOCATED ||
                              gm_map_get(&s.map, blk->address, NULL)))
                continue;
            if (s.n_early >= (size_t)0x7fffffff) {
                s.stop = SCAN_TOO_MANY;
                goto stopped;
            }
            if (s.diff_only) {
                struct gm_snapshot_event e = {.size = blk->requested_size};
                struct ana_lite *l;
                if (blk->stack & LITE_FREE_HAS_STACK)
                    s.stop = SCAN_TOO_MANY;
                if (s.stop ||
                    !(l = scan_push_lite(&s, &s.lite_early, &s.n_early, &s.cap_early, &e)))
                    goto stopped;
                l->stack = blk->stack;
                continue;
            }
            uint16_t stream;
            if (!stream_key_index(&s, &streams, seg->stream, &stream) ||
                (s.n_early == s.cap_early &&
                 !scan_grow(&s, (void **)&s.early, &s.cap_early, s.n_early + 1, sizeof(*s.early))))
                goto stopped;
            a = &s.early[s.n_early++];
            alloc_init(a);
            a->addr = blk->address;
            a->bytes = blk->requested_size;
            a->stream_index = stream;
            a->stack = blk->stack;
        }
    }
    /* the bits read: freed, and their bytes given back */
    gm_free(s.from_start);
    s.from_start = NULL;
    gm_budget_give(&s.budget, s.from_start_bytes);
    s.from_start_bytes = 0;
    if (s.n_early + s.n_trace >= (size_t)0x7fffffff) {
        s.stop = SCAN_TOO_MANY;
        goto stopped;
    }
    /* Those from the start first: the trace's array grows by the early ones and they go in
     * front (no second copy of millions of allocations). */
    dev->n_allocs = s.n_early + s.n_trace;
    if (dev->n_allocs && !(s.diff_only ? scan_grow(&s, (void **)&s.lite_trace, &s.cap_trace,
                                                   dev->n_allocs, sizeof(*s.lite_trace))
                                       : scan_grow(&s, (void **)&s.trace, &s.cap_trace,
                                                   dev->n_allocs, sizeof(*s.trace))))
        goto stopped;
    /* what the scan holds is the analysis's now */
    w->held += s.budget.used - base;
    w->tm = s.tm;
    w->stk = s.stk;
    w->free_of = s.free_of;
    w->n_free_of = s.n_free_of;
    w->cap_free_of = s.cap_free_of;
    w->ooms = s.ooms;
    w->n_oom = s.n_oom;
    w->cap_oom = s.cap_oom;
    w->seg_events = s.seg_events;
    memset(&s.tm, 0, sizeof(s.tm));
    memset(&s.stk, 0, sizeof(s.stk));
    s.free_of = NULL;
    s.ooms = NULL;
    memset(&s.seg_events, 0, sizeof(s.seg_events));
    s.cap_free_of = s.cap_oom = 0;
    if (w->n_timed != sd->n_events)
        drop_times(w);
    if (dev->n_allocs && s.diff_only) {
        /* a diff's: the analysis reads them once and keeps none (analyse_device()) */
        memmove(s.lite_trace + s.n_early, s.lite_trace, s.n_trace * sizeof(*s.lite_trace));
        if (s.n_early)
            memcpy(s.lite_trace, s.lite_early, s.n_early * sizeof(*s.lite_early));
        w->lite = s.lite_trace;
        w->cap_lite = s.cap_trace;
        dev->n_allocs = 0; /* (dev->allocs: none) */
        w->n_lite = s.n_early + s.n_trace;
        s.lite_trace = NULL;
        s.cap_trace = 0;
    } else if (dev->n_allocs) {
        move_with_streams(s.trace, s.n_trace, s.n_early, remap);
        if (s.n_early)
            memcpy(s.trace, s.early, s.n_early * sizeof(*s.early));
        /* the streams first: once ana_priv_keep() holds the records the analysis frees
         * them, so nothing may fail between it and the records leaving the scan */
        if (!(dev->streams = keep_streams(w, &streams, &dev->n_streams))) {
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
            goto out;
        }
        if (!ana_priv_keep(w->priv, s.trace, s.cap_trace * sizeof(*s.trace))) {
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
            goto out;
        }
        dev->allocs = s.trace;
        w->priv->held += (uint64_t)s.cap_trace * sizeof(*dev->allocs);
        w->held -= (uint64_t)s.cap_trace * sizeof(*dev->allocs);
        s.trace = NULL; /* owned by the analysis now */
        s.cap_trace = 0;
    }
    /* the free order's indexes made those of dev->allocs (the early ones now in front);
     * with no early allocation they are already */
    if (s.n_early) {
        uint32_t *fo = w->free_of;
        for (size_t i = 0, nf = w->n_free_of; i < nf; i++) {
            uint32_t v = fo[i];
            fo[i] = (v & EARLY) ? (v & ~EARLY) : (uint32_t)(v + s.n_early);
        }
    }
    goto out;
stopped:
    switch (s.stop) {
    case SCAN_OVER:
        st = over_limit(w, err);
        break;
    case SCAN_TOO_MANY:
        st = gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET,
                     "analysis: too many allocations on one device");
        break;
    case SCAN_STREAMS:
        st = gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET,
                     "analysis: allocations on more than %d streams on one device",
                     GM_ANALYSIS_STREAMS_MAX);
        break;
    default:
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
        break;
    }
out:
    stream_keys_release(&streams);
    gm_free(remap);
    scan_release(&s);
    gm_free(rule.steps.open);
    gm_free(rule.steps.close);
    gm_free(rule.raw_of);
    return st;
}

/* ---------------------------------------------------------------- phases */

static enum gm_phase phase_of_raw(uint8_t raw)
{
    switch (raw) {
    case RAW_FORWARD:
        return GM_PHASE_FORWARD;
    case RAW_BACKWARD:
        return GM_PHASE_BACKWARD;
    case RAW_STEP:
        return GM_PHASE_OPTIMIZER_STEP;
    default:
        return GM_PHASE_OTHER;
    }
}

/* The stack of event k: kept by the loader's scan, else read with a cursor that only moves
 * forward and starts again near k when it is far behind (the smoothing asks for few
 * events, in ascending order). */
static uint32_t stack_at(const struct work *w, struct gm_snapshot_cursor *c, size_t k)
{
    const struct gm_snapshot_device *sd = w->sd;
    const struct gm_snapshot_event *e;
    if (w->stk.v)
        return stk_at(&w->stk, k) & ~STK_NO_PHASE; /* kept by the loader's scan */
    if (c->index + 1 > k || c->index + 1 + GM_SNAPSHOT_CHECKPOINT < k)
        gm_snapshot_cursor_init(c, sd, k);
    while ((e = gm_snapshot_cursor_next(c)) != NULL)
        if (c->index == k)
            return e->stack;
    return 0;
}

/* Whether the eight bytes at p are all b. */
static inline bool same8(const uint8_t *p, uint8_t b)
{
    uint64_t x;
    memcpy(&x, p, sizeof(x));
    return x == b * UINT64_C(0x0101010101010101);
}

/* Whether the eight raw phases at p are all unknown (RAW_UNKNOWN is 0, with or without
 * RAW_NO_FRAMES). */
static inline bool unknown8(const uint8_t *p)
{
    uint64_t x;
    memcpy(&x, p, sizeof(x));
    return !(x & ~(RAW_NO_FRAMES * UINT64_C(0x0101010101010101)));
}

/* Whether the eight bytes at p are those at q. */
static inline bool same8_as(const uint8_t *p, const uint8_t *q)
{
    uint64_t x, y;
    memcpy(&x, p, sizeof(x));
    memcpy(&y, q, sizeof(y));
    return x == y;
}

/* How many events from k on (below 'end', k's own included) hold byte b, counted eight at a
 * time: the count may stop short of the run's end by fewer than eight. */
static inline size_t same_run(const uint8_t *phase, size_t k, size_t end, uint8_t b)
{
    size_t m = 1;
    while (k + m + 8 <= end && same8(phase + k + m, b))
        m += 8;
    return m;
}

/* Events k..k+m-1 take final phase 'fin' (counted, and a run started where it changes). */
static inline void set_phases(uint8_t *phase, size_t k, size_t m, uint8_t fin, uint64_t *per_phase,
                              size_t *n_runs)
{
    *n_runs += k == 0 || fin != phase[k - 1];
    if (m == 1)
        phase[k] = fin;
    else
        memset(phase + k, fin, m);
    per_phase[fin] += m;
}

/* Step 2: smoothing, then the runs.  The raw phases are in w->phase (an unknown event's
 * RAW_NO_FRAMES bit set by scan_trace when its stack is empty); only an unknown event
 * between two forward events needs stacks, read from the trace with two cursors. */
static enum gm_status compute_phases(struct work *w, struct gm_error *err)
{
    const struct gm_snapshot_device *sd = w->sd;
    struct gm_analysis_device *dev = w->dev;
    size_t n = sd->n_events;
    struct gm_snapshot_cursor c, ahead;
    size_t nk = SIZE_MAX;        /* the next event of known phase after the current one */
    size_t last_fwd = SIZE_MAX;  /* the last forward event before the current one */
    size_t caller_of = SIZE_MAX; /* the event prev_caller / next_caller were read at */
    size_t next_of = SIZE_MAX;
    uint32_t prev_caller = ANA_NO_FRAME, next_caller = ANA_NO_FRAME;
    uint8_t *phase = w->phase; /* a local: its byte stores would make *w be read again */
    uint64_t per_phase[GM_PHASE_COUNT] = {0};

    /* Smoothing: an unknown event takes the phase around it (see docs/analysis.md). */
    bool raw_backward = n && memchr(phase, RAW_BACKWARD, n) != NULL;
    uint8_t pk = RAW_UNKNOWN;
    size_t n_runs = 0; /* runs of one final phase, counted as the phases are made */
    gm_snapshot_cursor_init(&c, sd, 0);
    gm_snapshot_cursor_init(&ahead, sd, 0);
    for (size_t k = 0; k < n; k++) {
        uint8_t raw = phase[k];
        if ((raw & ~RAW_NO_FRAMES) != RAW_UNKNOWN) {
            /* the events of this known raw phase after it: each would do as the first */
            size_t m = same_run(phase, k, n, raw);
            pk = raw;
            if (raw == RAW_FORWARD)
                last_fwd = k + m - 1;
            set_phases(phase, k, m, (uint8_t)phase_of_raw(raw), per_phase, &n_runs);
            k += m - 1;
            continue;
        }
        if (nk == SIZE_MAX || nk <= k) {
            /* the next event after k whose raw phase is known (raw phases lie ahead of k:
             * only events up to k have their final phase yet) */
            for (nk = k + 1; nk + 8 <= n && unknown8(phase + nk); nk += 8)
                ;
            for (; nk < n && (phase[nk] & ~RAW_NO_FRAMES) == RAW_UNKNOWN; nk++)
                ;
            if (nk == n)
                nk = SIZE_MAX;
        }
        uint8_t p = pk, q = nk == SIZE_MAX ? (uint8_t)RAW_UNKNOWN : phase[nk];
        uint8_t out;
        bool empty = (raw & RAW_NO_FRAMES) != 0, alike = true;
        if (empty && w->trace_has_frames && (p == RAW_BACKWARD || q == RAW_BACKWARD)) {
            out = RAW_BACKWARD; /* the autograd engine thread records no Python frames */
        } else if (p == RAW_FORWARD && q == RAW_FORWARD) {
            /* Between two forward events: code of a training forward that runs outside any
             * module (in the function that calls the model), else code between two model
             * calls (a batch, an evaluation, logging).  The callers of the model in the
             * forward events either side. */
            if (caller_of != last_fwd) {
                prev_caller = ana_stack_caller(w->cls, stack_at(w, &c, last_fwd));
                caller_of = last_fwd;
            }
            uint32_t u = ana_stack_first_user(w->cls, stack_at(w, &c, k));
            if (next_of != nk) {
                next_caller = ana_stack_caller(w->cls, stack_at(w, &ahead, nk));
                next_of = nk;
            }
            bool same = u == ANA_NO_FRAME || ana_same_function(w->snap, u, prev_caller) ||
                        ana_same_function(w->snap, u, next_caller);
            out = raw_backward && same ? RAW_FORWARD : RAW_OTHER;
            alike = false; /* each event by its own stack */
        } else if (p == q && p != RAW_UNKNOWN) {
            out = p;
        } else if (p == RAW_FORWARD && q == RAW_BACKWARD) {
            out = RAW_FORWARD; /* the loss, computed outside any module */
        } else {
            out = RAW_OTHER;
        }
        /* the same byte up to the next known phase: the same answer */
        size_t m = alike ? same_run(phase, k, nk == SIZE_MAX ? n : nk, raw) : 1;
        set_phases(phase, k, m, (uint8_t)phase_of_raw(out), per_phase, &n_runs);
        k += m - 1;
    }
    /* Runs. */
    dev->phases = gm_arena_calloc(w->arena, n_runs ? n_runs : 1, sizeof(*dev->phases));
    if (!dev->phases)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for phases");
    size_t r = 0;
    memcpy(dev->phase_events, per_phase, sizeof(per_phase));
    for (size_t k = 0; k < n; k++) {
        if (k && k + 8 <= n && same8_as(phase + k, phase + k - 1)) {
            k += 7; /* no run starts at these eight */
            continue;
        }
        if (k == 0 || phase[k] != phase[k - 1]) {
            if (r)
                dev->phases[r - 1].last_event = (int64_t)k - 1;
            dev->phases[r].first_event = (int64_t)k;
            dev->phases[r].phase = phase[k];
            dev->phases[r].iteration = -1;
            r++;
        }
    }
    if (r)
        dev->phases[r - 1].last_event = (int64_t)n - 1;
    dev->n_phases = n_runs;
    w->has_backward = dev->phase_events[GM_PHASE_BACKWARD] > 0;
    return GM_OK;
}

/* The last of n > 0 intervals (phase runs, iterations: their first_event at 'first', one
 * interval 'stride' bytes after the other, ascending) that starts at or before 'event'; 0
 * when none does.  A search: for the few moments a caller asks of. */
static size_t last_starting_by(const int64_t *first, size_t stride, size_t n, int64_t event)
{
    const char *at = (const char *)first;
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (*(const int64_t *)(const void *)(at + mid * stride) <= event)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

enum gm_phase gm_analysis_phase_at(const struct gm_analysis_device *dev, int64_t event)
{
    if (!dev || event < 0 || (size_t)event >= dev->n_events || !dev->n_phases)
        return GM_PHASE_OTHER;
    size_t r =
        last_starting_by(&dev->phases[0].first_event, sizeof(dev->phases[0]), dev->n_phases, event);
    return (enum gm_phase)dev->phases[r].phase;
}

int32_t gm_analysis_iteration_at(const struct gm_analysis_device *dev, int64_t event)
{
    if (!dev || event < 0 || (size_t)event >= dev->n_events || !dev->n_iterations ||
        event < dev->iterations[0].first_event)
        return -1;
    return (int32_t)last_starting_by(&dev->iterations[0].first_event, sizeof(dev->iterations[0]),
                                     dev->n_iterations, event);
}

static int32_t iteration_of(const struct work *w, int64_t k)
{
    const struct gm_analysis_device *dev = w->dev;
    if (k < 0 || !dev->n_iterations || k < dev->iterations[0].first_event)
        return -1;
    return (int32_t)ix_find(&w->iters_ix, k);
}

static enum gm_status compute_iterations(struct work *w, struct gm_error *err)
{
    struct gm_analysis_device *dev = w->dev;
    size_t n_it = 0;
    /* Count, then fill: a forward run starts an iteration when a backward or a step ran
     * since the last start (training), or, with no backward anywhere, every forward run. */
    for (int pass = 0; pass < 2; pass++) {
        bool armed = true;
        size_t i = 0;
        for (size_t r = 0; r < dev->n_phases; r++) {
            const struct gm_analysis_phase_run *run = &dev->phases[r];
            if (run->phase == GM_PHASE_FORWARD && (armed || !w->has_backward)) {
                if (pass == 1) {
                    struct gm_analysis_iteration *it = &dev->iterations[i];
                    memset(it, 0, sizeof(*it));
                    it->first_event = run->first_event;
                    it->forward_event = run->first_event;
                    it->backward_event = -1;
                    it->step_event = -1;
                    it->peak_event = -1;
                    if (i > 0)
                        dev->iterations[i - 1].last_event = run->first_event - 1;
                }
                i++;
                armed = false;
            }
            if (run->phase == GM_PHASE_BACKWARD || run->phase == GM_PHASE_OPTIMIZER_STEP)
                armed = true;
        }
        if (pass == 0) {
            n_it = i;
            if (!n_it)
                return GM_OK;
            if (!take(w, gm_budget_bytes(n_it, sizeof(*dev->iterations))))
                return over_limit(w, err);
            dev->iterations = gm_arena_calloc(w->arena, n_it, sizeof(*dev->iterations));
            if (!dev->iterations)
                return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET,
                               "analysis: out of memory for iterations");
        }
    }
    dev->n_iterations = n_it;
    dev->iterations[n_it - 1].last_event = (int64_t)dev->n_events - 1;
    /* runs and iterations are both in event order: one walk assigns each run its
     * iteration (the last one starting at or before the run) */
    size_t it = 0;
    for (size_t r = 0; r < dev->n_phases; r++) {
        struct gm_analysis_phase_run *run = &dev->phases[r];
        while (it + 1 < n_it && dev->iterations[it + 1].first_event <= run->first_event)
            it++;
        run->iteration = run->first_event < dev->iterations[0].first_event ? -1 : (int32_t)it;
        if (run->iteration < 0)
            continue;
        struct gm_analysis_iteration *iv = &dev->iterations[run->iteration];
        if (run->phase == GM_PHASE_BACKWARD && iv->backward_event < 0)
            iv->backward_event = run->first_event;
        if (run->phase == GM_PHASE_OPTIMIZER_STEP && iv->step_event < 0)
            iv->step_event = run->first_event;
    }
    return GM_OK;
}

/* ---------------------------------------------------------------- categories */

static void set_cat(struct gm_analysis_alloc *a, enum gm_category c, enum gm_rule r)
{
    a->category = (uint8_t)c;
    a->rule = (uint8_t)r;
}

/* The first forward run after run 'run' (SIZE_MAX: from the start), or NULL
 * (w->next_fwd[r]: the first forward run at or after run r, n_phases when none). */
static const struct gm_analysis_phase_run *next_forward(const struct work *w, size_t run)
{
    const struct gm_analysis_device *dev = w->dev;
    size_t r = run + 1;
    if (r >= dev->n_phases || w->next_fwd[r] >= dev->n_phases)
        return NULL;
    return &dev->phases[w->next_fwd[r]];
}

/* 'a', of iteration 'a_it' (-1: none), born in phase run 'run' (SIZE_MAX: from the
 * start). */
static void classify_alloc(struct work *w, struct gm_analysis_alloc *a, int32_t a_it, size_t run)
{
    const struct gm_analysis_device *dev = w->dev;
    uint16_t fl = ana_stack_flags(w->cls, a->stack);
    int64_t freed = a->free_requested_event >= 0 ? a->free_requested_event : a->free_event;
    bool from_start = a->alloc_event < 0;

    if (from_start)
        a->phase = (uint8_t)phase_of_raw((uint8_t)ana_phase_of_flags(fl));
    else
        a->phase = w->phase[a->alloc_event];
    /* (the free's phase and iteration are looked up only by the rules below that read them:
     * most allocations are decided before, and a lookup is a random read of phase[] and a
     * search of the iterations) */
    enum gm_category user_cat;

    /* the user's rules first, in their order (none given: no call per allocation) */
    int user_rule = w->cls->rules->rules
                        ? ana_rules_match(w->cls->rules, a->stack, a->alloc_event, &user_cat)
                        : -1;
    a->user_rule = (uint8_t)(user_rule + 1);
    if (user_rule >= 0) {
        set_cat(a, user_cat, GM_RULE_CUSTOM);
        return;
    }

    /* End of the phase run the allocation was born in (from the start: none). */
    int64_t run_end = from_start ? -1 : dev->phases[run].last_event;
    bool freed_in_run = freed >= 0 && !from_start && a->free_event <= run_end;

    if ((fl & FR_PARAM_LOAD) && a->phase != GM_PHASE_BACKWARD &&
        a->phase != GM_PHASE_OPTIMIZER_STEP) {
        set_cat(a, GM_CATEGORY_PARAMETER, GM_RULE_PARAM_FRAMES);
        return;
    }
    /* Batches built by data-loading code, even inside a forward (PyG DataParallel collates
     * the batch in its forward). */
    if ((fl & FR_DATA) && a->phase != GM_PHASE_BACKWARD && a->phase != GM_PHASE_OPTIMIZER_STEP) {
        set_cat(a, GM_CATEGORY_INPUT, GM_RULE_INPUT_FRAMES);
        return;
    }
    if (from_start && a->stack == 0) {
        if (a->free_event < 0)
            set_cat(a, GM_CATEGORY_PARAMETER, GM_RULE_PARAM_LIFETIME);
        else
            set_cat(a, GM_CATEGORY_OTHER, GM_RULE_NONE);
        return;
    }
    switch (a->phase) {
    case GM_PHASE_OPTIMIZER_STEP:
        /* Temporaries die in the step (or at least before the next iteration starts). */
        if (freed >= 0 && (freed_in_run || (a_it >= 0 && iteration_of(w, freed) == a_it)))
            set_cat(a, GM_CATEGORY_OPTIMIZER_TEMP, GM_RULE_OPT_TEMP);
        else
            set_cat(a, GM_CATEGORY_OPTIMIZER_STATE, GM_RULE_OPT_STATE);
        return;
    case GM_PHASE_BACKWARD:
        if (freed_in_run)
            set_cat(a, GM_CATEGORY_OTHER, GM_RULE_TEMP_BACKWARD);
        else
            set_cat(a, GM_CATEGORY_GRADIENT, GM_RULE_GRAD);
        return;
    case GM_PHASE_FORWARD: {
        if (freed_in_run) {
            set_cat(a, GM_CATEGORY_OTHER, GM_RULE_TEMP_FORWARD);
            return;
        }
        int32_t free_it = iteration_of(w, freed);
        if (freed >= 0 && w->phase[freed] == GM_PHASE_BACKWARD && (from_start || free_it == a_it)) {
            set_cat(a, GM_CATEGORY_ACTIVATION, GM_RULE_ACT_SAVED);
        } else if (!w->has_backward) {
            set_cat(a, GM_CATEGORY_ACTIVATION, GM_RULE_ACT_HELD);
        } else if (freed >= 0 && !from_start && free_it == a_it) {
            set_cat(a, GM_CATEGORY_ACTIVATION, GM_RULE_ACT_HELD);
        } else if (freed < 0 && a_it >= 0 && (size_t)a_it + 1 == dev->n_iterations &&
                   dev->iterations[a_it].backward_event < a->alloc_event) {
            /* The trace ends before this iteration's backward: still a live activation. */
            set_cat(a, GM_CATEGORY_ACTIVATION, GM_RULE_ACT_HELD);
        } else {
            set_cat(a, GM_CATEGORY_OTHER, GM_RULE_KEPT_FORWARD);
        }
        return;
    }
    default:
        break;
    }
    /* Phase other: a batch, or user code. */
    if (!from_start) {
        const struct gm_analysis_phase_run *f = next_forward(w, run);
        if (f && (a->free_event < 0 || a->free_event > f->first_event)) {
            int32_t it = iteration_of(w, f->first_event);
            uint32_t si = ana_map_u32(&w->site_of, a->stack);
            struct site_stat *ss = si != NO_ALLOC ? &w->sites[si] : NULL;
            /* A batch is a few tensors per iteration (x, y, a mask, a dict of them), not
             * per-parameter work done in a loop. */
            bool few = ss && ss->count <= 8 * (ss->n_iters ? ss->n_iters : 1);
            bool batch;
            if (a->free_event < 0) {
                /* Kept to the end: the latest batch of a site whose earlier batches were
                 * freed, and which keeps nothing from other iterations (else a leak). */
                batch = it >= 0 && ss && ss->n_batches > 0 && ss->first_kept == a_it &&
                        ss->last_kept == a_it;
            } else {
                int32_t free_it = iteration_of(w, freed);
                batch = free_it >= 0 && free_it <= it + 1;
                /* the batch of an inference loop without iterations: used by one forward */
                if (it < 0)
                    batch = true;
            }
            if (batch && few) {
                if (a->free_event >= 0)
                    ss->n_batches++;
                set_cat(a, GM_CATEGORY_INPUT, GM_RULE_INPUT_BATCH);
                return;
            }
        }
    }
    if (a->stack || a->free_has_stack)
        set_cat(a, GM_CATEGORY_OTHER, GM_RULE_USER);
    else
        set_cat(a, GM_CATEGORY_OTHER, GM_RULE_NONE);
}

/* ---------------------------------------------------------------- series */

static void copy_bytes(uint64_t *dst, const uint64_t *src)
{
    memcpy(dst, src, GM_CATEGORY_COUNT * sizeof(uint64_t));
}

/* The state after event k (-1: the initial state) as a series point. */
static void set_point(struct gm_analysis_point *pt, int64_t k, const struct gm_snapshot_event *e,
                      uint8_t phase, uint64_t total, uint64_t reserved, const uint64_t *cur)
{
    pt->event = k;
    pt->has_time = k >= 0 && (e->flags & GM_EVENT_HAS_TIME);
    pt->time_us = pt->has_time ? e->time_us : 0;
    pt->phase = phase;
    pt->total = total;
    pt->reserved = reserved;
    copy_bytes(pt->bytes, cur);
}

/* The bytes of the series pass after allocation 'a' is made, or freed: those of its
 * category, all, those no rule explains and those whose category came from their lifetime
 * alone.  A free adds the bytes' two's complement (modulo 2^64 the same as taking them
 * off). */
static inline void count_alloc(const struct gm_analysis_alloc *a, bool freed, uint64_t *cur,
                               uint64_t *total, uint64_t *unexplained, uint64_t *lifetime)
{
    uint64_t d = freed ? 0 - a->bytes : a->bytes;
    cur[a->category] += d;
    *total += d;
    if (a->rule == GM_RULE_NONE)
        *unexplained += d;
    if (a->rule == GM_RULE_PARAM_LIFETIME)
        *lifetime += d;
}

/* The event of allocation ai, and of the free_completed that ends allocation free_of[fi]
 * (the series pass takes both in trace order); -2 past the last one. */
static inline int64_t alloc_event_of(const struct gm_analysis_device *dev, size_t ai)
{
    return ai < dev->n_allocs ? dev->allocs[ai].alloc_event : -2;
}
static inline int64_t free_event_of(const struct work *w, size_t fi)
{
    return fi < w->n_free_of ? w->dev->allocs[w->free_of[fi]].free_event : -2;
}

/* The series pass's next allocation (*ai) counted as made, or its next free (*fi) as freed;
 * *ai or *fi and *next_alloc or *next_free then name the one after. */
static GM_INLINE_ALWAYS const struct gm_analysis_alloc *
take_alloc(const struct gm_analysis_device *dev, size_t *ai, int64_t *next_alloc, uint64_t *cur,
           uint64_t *total, uint64_t *unexplained, uint64_t *lifetime)
{
    const struct gm_analysis_alloc *a = &dev->allocs[(*ai)++];
    *next_alloc = alloc_event_of(dev, *ai);
    count_alloc(a, false, cur, total, unexplained, lifetime);
    return a;
}
static GM_INLINE_ALWAYS void take_free(const struct work *w, size_t *fi, int64_t *next_free,
                                       uint64_t *cur, uint64_t *total, uint64_t *unexplained,
                                       uint64_t *lifetime)
{
    count_alloc(&w->dev->allocs[w->free_of[(*fi)++]], true, cur, total, unexplained, lifetime);
    *next_free = free_event_of(w, *fi);
}

/* Iteration iv's peak after event k of phase 'ph', when k's bytes are its first maximum. */
static inline void iteration_peak(struct gm_analysis_iteration *iv, int64_t k, uint8_t ph,
                                  uint64_t total, const uint64_t *cur)
{
    if (iv->peak_event < 0 || total > iv->peak_bytes) {
        iv->peak_bytes = total;
        iv->peak_event = k;
        iv->peak_phase = ph;
        copy_bytes(iv->at_peak, cur);
    }
}

/* The running state of the series pass that its allocations and frees change. */
struct changes {
    const struct work *w;
    size_t *ai, *fi;
    int64_t *next_alloc, *next_free;
    uint64_t *cur, *total, *unexplained, *lifetime;
};

/* The changes of event j, the one rule of every loop of the series pass: its allocation,
 * then its free (an event is one or the other; one that were both would have both taken, in
 * that order, and its bytes after both are the event's).  Returns the allocation, NULL when
 * none. */
static GM_INLINE_ALWAYS const struct gm_analysis_alloc *take_changes_at(const struct changes *c,
                                                                        int64_t j)
{
    const struct gm_analysis_alloc *a = NULL;
    if (j == *c->next_alloc)
        a = take_alloc(c->w->dev, c->ai, c->next_alloc, c->cur, c->total, c->unexplained,
                       c->lifetime);
    if (j == *c->next_free)
        take_free(c->w, c->fi, c->next_free, c->cur, c->total, c->unexplained, c->lifetime);
    return a;
}

/* The changes of the next event before j that has any (take_changes_at()), the allocations
 * and frees taken in trace order; with an allocation, the peak of iteration iv (NULL: none)
 * when the event is inside it.  Returns that event, -1 when none is before j. */
static GM_INLINE_ALWAYS int64_t take_changes_before(const struct changes *c, int64_t j,
                                                    struct gm_analysis_iteration *iv)
{
    /* (-2, none, is above every event; take_changes_at()'s rule, its tests in the order of
     * the likely) */
    uint64_t a = (uint64_t)*c->next_alloc, f = (uint64_t)*c->next_free;
    if (f < a) {
        if (f >= (uint64_t)j)
            return -1;
        take_free(c->w, c->fi, c->next_free, c->cur, c->total, c->unexplained, c->lifetime);
        return (int64_t)f;
    }
    if (a >= (uint64_t)j)
        return -1;
    take_alloc(c->w->dev, c->ai, c->next_alloc, c->cur, c->total, c->unexplained, c->lifetime);
    if (a == f)
        take_free(c->w, c->fi, c->next_free, c->cur, c->total, c->unexplained, c->lifetime);
    if (iv)
        iteration_peak(iv, (int64_t)a, c->w->phase[a], *c->total, c->cur);
    return (int64_t)a;
}

/* The flags gm_lod_add() or gm_lod_add_here() answered for event k: it is its bucket's
 * minimum (slot[0]) or maximum (slot[1]) point. */
static inline void set_min_max(struct gm_analysis_point *slot, unsigned fl, int64_t k,
                               const struct gm_snapshot_event *e, uint8_t ph, uint64_t total,
                               uint64_t reserved, const uint64_t *cur)
{
    if (fl & GM_LOD_MIN)
        set_point(&slot[0], k, e, ph, total, reserved, cur);
    if (fl & GM_LOD_MAX)
        set_point(&slot[1], k, e, ph, total, reserved, cur);
}

/* The series' rule for event k in the bucket of the event before ('here': that bucket,
 * gm_lod_here() or a copy of it; slot: its points): a total other than the one before
 * (prev_total) is offered to its minimum and maximum; the same total makes neither (that
 * value is in the bucket already). */
static GM_INLINE_ALWAYS void offer_total(struct gm_lod_bucket *here, struct gm_analysis_point *slot,
                                         uint64_t prev_total, int64_t k,
                                         const struct gm_snapshot_event *e, uint8_t ph,
                                         uint64_t total, uint64_t reserved, const uint64_t *cur)
{
    if (total != prev_total)
        set_min_max(slot, gm_lod_bucket_add(here, k, total), k, e, ph, total, reserved, cur);
}

/* The series pass's run of events each in turn for the totals (series_pass()): its state,
 * what the run reads, and where it writes back. */
struct totals_run {
    const struct changes *ch;
    struct gm_analysis_iteration *iv; /* the iteration the run is inside, or NULL */
    struct gm_lod *lod;               /* the series */
    struct gm_analysis_point *slot;   /* its current bucket's points */
    struct gm_lod_totals *lt;
    uint64_t walk_base, reserved;
    const uint8_t *phase;
    const uint16_t *dt; /* the times' steps (scan_trace()'s), NULL: no time */
    const uint32_t *dt_wide;
    size_t *wi;                   /* in and out: the next wide step */
    int64_t *t;                   /* in and out: the time of the event before */
    int64_t t_stop;               /* with by_time: the first time past the series' bucket */
    struct gm_snapshot_event *ej; /* the event as the series reads it (its time) */
    uint64_t *prev_total;         /* in and out: the total after the event before */
};

/* Events j up to 'to' (or, 'by_time', to the first whose time reaches r->t_stop), each in
 * turn: its changes taken, offered to the series' bucket and added to the totals; returns
 * where it stopped.  'timed': r->dt is there (else every time is r->t's); 'same_reserved':
 * the run's reserved bytes (one value: no segment event inside it) are already the totals'
 * last (gm_lod_totals_reserved_is()).  Compiled for each case, so that no case is tested
 * per event. */
static GM_INLINE_ALWAYS int64_t totals_run(const struct totals_run *r, int64_t j, int64_t to,
                                           const bool timed, const bool by_time,
                                           const bool same_reserved)
{
    const struct changes *ch = r->ch;
    int64_t t = *r->t;
    size_t wi = *r->wi;
    uint64_t prev_total = *r->prev_total;
    /* the series' bucket (the run stays in it) held here over the run, written back after
     * it */
    struct gm_lod_bucket here = *gm_lod_here(r->lod);
    if (!timed && by_time && t >= r->t_stop)
        to = j; /* (no step: the first event would stop it) */
    for (; j < to; j++) {
        if (timed) {
            uint32_t d = r->dt[j];
            int64_t tj;
            if (GM_LIKELY(d != DT_WIDE)) {
                tj = t + (int64_t)d;
                if (by_time && tj >= r->t_stop)
                    break;
            } else {
                tj = t + (int64_t)r->dt_wide[wi];
                if (by_time && tj >= r->t_stop)
                    break;
                wi++;
            }
            t = tj;
        }
        r->ej->time_us = t;
        /* (every change before j is taken: these are j's) */
        take_changes_before(ch, j + 1, r->iv);
        offer_total(&here, r->slot, prev_total, j, r->ej, r->phase[j], *ch->total, r->reserved,
                    ch->cur);
        prev_total = *ch->total;
        if (same_reserved)
            gm_lod_totals_add_same_reserved(r->lt, j, r->ej, *ch->total + r->walk_base,
                                            r->reserved);
        else
            gm_lod_totals_add(r->lt, j, r->ej, *ch->total + r->walk_base, r->reserved);
    }
    *gm_lod_here(r->lod) = here;
    *r->t = t;
    *r->wi = wi;
    *r->prev_total = prev_total;
    return j;
}

/* The first event after k that is the peak, an iteration's first or last event or the one
 * before its first (the last event when none is); *it: the first iteration that may hold
 * one, moved forward. */
static int64_t next_mark(const struct gm_analysis_device *dev, int64_t k, size_t *it)
{
    int64_t to = (int64_t)dev->n_events - 1;
    while (*it < dev->n_iterations && dev->iterations[*it].last_event <= k)
        ++*it;
    if (*it < dev->n_iterations) {
        const struct gm_analysis_iteration *iv = &dev->iterations[*it];
        to = iv->first_event - 1 > k ? iv->first_event - 1
             : iv->first_event > k   ? iv->first_event
             : iv->last_event < to   ? iv->last_event
                                     : to;
    }
    if (dev->peak_event > k && dev->peak_event < to)
        to = dev->peak_event;
    return to;
}

/* One pass: the per-category series, the split at the peak and the iteration figures.
 *
 * The series is a level-of-detail series of the allocated bytes (gpumem/lod.h) over the
 * device's axis (time when every event has one, else the event index): (max_points - 1) / 3
 * buckets, and of each bucket the points (real states after real events) where its total
 * is least and most and its last one, in trace order, after the initial state (every
 * point when the trace has no more than max_points).  Drawn as
 * steps through these points, a chart holds every bucket's exact minimum and maximum and
 * its value at the bucket's end, so an idle gap shows what memory held during it.
 *
 * What it needs of each event beyond the allocations is its time and, for the reserved
 * bytes, the segment events scan_trace kept: with the times scan_trace recorded (w->tm.dt),
 * or none when no event has one, the trace is not read again. */
static GM_INLINE_ALWAYS enum gm_status series_pass(struct work *w,
                                                   const struct gm_snapshot_timeline *tl,
                                                   uint32_t max_points, const bool series,
                                                   struct gm_error *err)
{
    const struct gm_snapshot_device *sd = w->sd;
    struct gm_analysis_device *dev = w->dev;
    size_t n = sd->n_events;
    size_t n_pts = n + 1;
    unsigned nb = max_points < 4 ? 1u : (max_points - 1) / 3;
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e = NULL, *prev_e = NULL;
    /* the event as far as the series reads it, when it does not read the trace */
    struct gm_snapshot_event known[2];
    static const struct gm_snapshot_event no_step = {0}; /* no segment event */
    const struct ana_layout_events *seg = &w->seg_events;
    size_t si = 0;
    bool read_trace;
    struct gm_analysis_point *slots; /* per bucket: least, most, last (event -2: unset) */
    struct gm_lod_axis ax;
    struct gm_lod lod;
    uint64_t res = tl->reserved_start_raw;
    enum gm_status st;
    unsigned cur_b = 0;
    uint8_t prev_ph = GM_PHASE_OTHER;
    uint64_t prev_total = 0, prev_reserved = 0;
    double x_next = -1; /* gm_lod_bucket_end() of cur_b */

    /* a trace with no more points than asked for is its own series */
    bool all = n_pts <= (max_points < 4 ? 4 : max_points);
    size_t cap_pts = all ? n_pts : (size_t)3 * nb + 1;
    /* without the series ('series' false, ANA_PARTS_FIGURES): no points, buckets or x's,
     * the figures alone */
    if (all)
        nb = 1;
    slots = NULL;
    memset(&lod, 0, sizeof(lod));
    if (series) {
        if (!take(w, gm_budget_bytes(cap_pts, sizeof(*dev->points))))
            return over_limit(w, err);
        dev->points = gm_arena_calloc(w->arena, cap_pts, sizeof(*dev->points));
        slots = gm_calloc((size_t)3 * nb, sizeof(*slots));
        if (!dev->points || !slots) {
            gm_free(slots);
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for series");
        }
        for (size_t i = 0; i < (size_t)3 * nb; i++)
            slots[i].event = -2;
    }
    gm_lod_axis_init_counted(&ax, sd, w->n_timed);
    read_trace = w->n_timed && !(w->tm.dt && ax.time);
    if (read_trace && !snap_events_stored(sd)) {
        gm_free(slots);
        return ana_events_missing(sd, err);
    }
    memset(known, 0, sizeof(known));
    known[0].time_us = known[1].time_us = ax.t0_us;
    known[0].flags = known[1].flags = w->n_timed ? GM_EVENT_HAS_TIME : 0;
    if (series && (st = gm_lod_init(&lod, 0.0, ax.x_end, nb, err)) != GM_OK) {
        gm_free(slots);
        return st;
    }

    uint64_t cur[GM_CATEGORY_COUNT] = {0};
    uint64_t total = 0; /* the sum of cur[], kept with it */
    uint64_t unexplained = 0, lifetime = 0, reserved = tl->initial_reserved_bytes;
    size_t ai = 0, fi = 0, wi = 0;
    const uint16_t *dt = w->tm.dt;
    const uint32_t *dt_wide = w->tm.dt_wide;
    /* Alive from the start. */
    for (; ai < dev->n_allocs && dev->allocs[ai].alloc_event < 0; ai++)
        count_alloc(&dev->allocs[ai], false, cur, &total, &unexplained, &lifetime);
    /* The totals for the report (gm_analysis_opts.totals) are gm_snapshot_walk's allocated
     * bytes: its initial bytes (the timeline's) plus what the allocations add and take off
     * since, as here (the same matching; sizes in a loaded file sum below 2^63, so its sums
     * neither saturate nor clamp) */
    struct gm_lod_totals *lt = w->totals;
    uint64_t walk_base = tl->initial_bytes - total;
    size_t it = 0, is = 0;
    int64_t is_first = dev->n_iterations ? dev->iterations[0].first_event : INT64_MAX;
    int64_t it_first = is_first;
    int64_t it_last = dev->n_iterations ? dev->iterations[0].last_event : INT64_MAX;
    /* the next allocation, free_completed (each ends the allocation free_of[] names, in
     * trace order) and segment event (-2: none) */
    int64_t next_alloc = alloc_event_of(dev, ai);
    int64_t next_free = free_event_of(w, fi);
    int64_t next_seg = si < seg->n ? seg->ev[si].k : -2;
    const struct changes ch = {w,   &ai,    &fi,          &next_alloc, &next_free,
                               cur, &total, &unexplained, &lifetime};
    struct ana_user_cursor uc;
    ana_user_cursor_init(&uc, dev);
    if (read_trace)
        gm_snapshot_cursor_init(&c, sd, 0);
    /* Without the totals and the user phases, the pass stops only at the peak and at an
     * iteration's first and last events and the one before its first: between two, the
     * bytes change only at allocations and frees, taken in trace order (an allocation may
     * make the iteration's peak), and the times of the events passed over are added up.
     * Without the series the reserved bytes are not kept there (the segment events passed
     * over are not applied): without the series and the totals nothing reads them.  With
     * the series (of fewer buckets than events: every point kept, it reads each event) it
     * stops also at the first event, at each segment event and at the first event of a later
     * bucket, and in between an allocation or a free that changes the total is offered to
     * its bucket's minimum and maximum as the pass over every event would offer it. */
    const bool skip_quiet =
        n && (!lt || series) && !dev->n_user_ranges && !read_trace && !(series && all);
    int64_t mark = -1; /* the next peak or iteration bound after the event (next_mark()) */
    size_t mark_it = 0;
    for (size_t p = 0; p < n_pts; p++) {
        int64_t k = (int64_t)p - 1;
        double x = 0.0;
        unsigned b;
        bool same_b; /* the point falls in the bucket of the point before */
        uint32_t up = k >= 0 && dev->n_user_ranges ? ana_user_cursor_at(&uc, k) : UINT32_MAX;
        if (k >= 0) {
            if (read_trace) {
                e = gm_snapshot_cursor_next(&c);
            } else {
                /* alternate two: prev_e stays the event before */
                struct gm_snapshot_event *ke = &known[p & 1];
                if (dt)
                    ke->time_us =
                        known[(p - 1) & 1].time_us + (int64_t)step_us(dt, dt_wide, k, &wi);
                e = ke;
            }
            if (series)
                x = gm_lod_axis_x_of(&ax, k, e);
        }
        /* a point in a later bucket completes the one before: its last point is the state
         * before this event (below x_next: the bucket of the point before) */
        if (!series) {
            b = 0;
            same_b = true;
        } else if (p > 0 && x < x_next) {
            b = cur_b;
            same_b = true;
        } else {
            b = gm_lod_peek(&lod, x);
            same_b = p > 0 && b == cur_b;
            if (p > 0 && !same_b)
                set_point(&slots[3 * (size_t)cur_b + 2], k - 1, prev_e, prev_ph, prev_total,
                          prev_reserved, cur);
            if (!same_b)
                x_next = gm_lod_bucket_end(&lod, b, x);
        }
        cur_b = b;
        if (k >= 0) {
            if (up != UINT32_MAX)
                dev->user_phases[up].n_events++;
            const struct gm_analysis_alloc *a = take_changes_at(&ch, k);
            if (a && up != UINT32_MAX)
                dev->user_phases[up].allocated_bytes += a->bytes;
            /* only a segment event changes it (the first event sets it from the raw start);
             * read by the series and the totals alone */
            if (series || lt) {
                if (k == next_seg) {
                    reserved = gm_snapshot_reserved_step(&res, &seg->ev[si++].e);
                    next_seg = si < seg->n ? seg->ev[si].k : -2;
                } else if (k == 0) {
                    reserved = gm_snapshot_reserved_step(&res, &no_step);
                }
            }
            if (lt)
                gm_lod_totals_add(lt, k, e, total + walk_base, reserved);
        }
        uint8_t ph = k >= 0 ? w->phase[k] : GM_PHASE_OTHER;
        if (k == dev->peak_event) {
            copy_bytes(dev->at_peak, cur);
            dev->at_peak_unexplained = unexplained;
            dev->at_peak_lifetime_only = lifetime;
            dev->peak_user_phase = up == UINT32_MAX ? -1 : (int32_t)up;
        }
        if (up != UINT32_MAX) {
            struct gm_analysis_user_phase *u = &dev->user_phases[up];
            if (u->peak_event < 0 || total > u->peak_bytes) {
                u->peak_bytes = total;
                u->peak_event = k;
                copy_bytes(u->at_peak, cur);
            }
        }
        /* Iteration figures (is_first: the first event of iteration is; it_first, it_last:
         * of iteration it; INT64_MAX past the last one). */
        if (k + 1 >= is_first) {
            while (is < dev->n_iterations && dev->iterations[is].first_event <= k + 1) {
                if (dev->iterations[is].first_event == k + 1)
                    dev->iterations[is].start_bytes = total; /* before its first event */
                is++;
            }
            is_first = is < dev->n_iterations ? dev->iterations[is].first_event : INT64_MAX;
        }
        if (k >= 0) {
            if (k > it_last) {
                while (it < dev->n_iterations && dev->iterations[it].last_event < k)
                    it++;
                it_first = it < dev->n_iterations ? dev->iterations[it].first_event : INT64_MAX;
                it_last = it < dev->n_iterations ? dev->iterations[it].last_event : INT64_MAX;
            }
            if (k >= it_first) {
                struct gm_analysis_iteration *iv = &dev->iterations[it];
                iteration_peak(iv, k, ph, total, cur);
                if (iv->last_event == k)
                    iv->end_bytes = total;
                /* its times: those of its first and last events */
                if (iv->first_event == k) {
                    iv->has_time = (e->flags & GM_EVENT_HAS_TIME) != 0;
                    iv->start_us = e->time_us;
                }
                if (iv->last_event == k) {
                    iv->has_time = iv->has_time && (e->flags & GM_EVENT_HAS_TIME);
                    iv->end_us = e->time_us;
                    if (!iv->has_time)
                        iv->start_us = iv->end_us = 0;
                }
            }
        }
        if (series) {
            /* a point of the value before in the same bucket makes no minimum or maximum
             * (that value is in the bucket already): it is left out */
            if (all)
                set_point(&dev->points[p], k, e, ph, total, reserved, cur);
            else if (k < 0)
                set_point(&dev->points[0], k, e, ph, total, reserved, cur);
            if (!same_b)
                set_min_max(&slots[3 * (size_t)b], gm_lod_add(&lod, x, k, total), k, e, ph, total,
                            reserved, cur);
            else
                offer_total(gm_lod_here(&lod), &slots[3 * (size_t)b], prev_total, k, e, ph, total,
                            reserved, cur);
        }
        prev_e = e;
        prev_ph = ph;
        prev_total = total;
        prev_reserved = reserved;
        if (skip_quiet) {
            if (k >= mark)
                mark = next_mark(dev, k, &mark_it);
            int64_t to = mark;
            /* the allocations and frees before it, in trace order (-2, none, is above every
             * event): inside iteration 'it' (whose bounds are marks) when k is, where an
             * allocation may make its peak */
            struct gm_analysis_iteration *iv =
                k >= it_first && k < it_last ? &dev->iterations[it] : NULL;
            if (series) {
                if ((uint64_t)next_seg < (uint64_t)to)
                    to = next_seg;
                if (k < 0 || !(x_next >= 0) || (!isinf(x_next) && x_next > 0x1p52))
                    to = k + 1; /* the first event; a bucket whose end is not known */
                /* the bucket's end: the event index, or the first time whose x reaches it
                 * (none: no time does, so no event leaves the bucket) */
                bool by_time = false;
                int64_t t_stop = 0;
                if (!isinf(x_next) && to > k + 1) {
                    if (!ax.time)
                        to = (int64_t)x_next < to ? (int64_t)x_next : to;
                    else
                        by_time = gm_lod_axis_first_time_at(&ax, x_next, &t_stop);
                }
                int64_t t = known[p & 1].time_us, j = k + 1;
                if (lt) {
                    /* the totals take every event: each in turn up to 'to' or the bucket's
                     * end, its time added up */
                    struct gm_snapshot_event ej = known[0];
                    struct totals_run r = {&ch,    iv,        &lod,       &slots[3 * (size_t)cur_b],
                                           lt,     walk_base, reserved,   w->phase,
                                           dt,     dt_wide,   &wi,        &t,
                                           t_stop, &ej,       &prev_total};
                    /* (compiled for each: no test of any per event.  The run's reserved
                     * bytes are the totals' last already, the main loop having added event
                     * k with them: the general case is kept for safety, not reached) */
                    if (!gm_lod_totals_reserved_is(lt, reserved))
                        j = totals_run(&r, j, to, dt != NULL, by_time, false);
                    else if (!dt)
                        j = totals_run(&r, j, to, false, by_time, true);
                    else if (by_time)
                        j = totals_run(&r, j, to, true, true, true);
                    else
                        j = totals_run(&r, j, to, true, false, true);
                    to = j;
                }
                /* the events' times up to 'to' or the bucket's end */
                if (lt)
                    ;
                else if (dt)
                    j = times_forward(&w->tm, k, to, by_time, t_stop, &t, &wi);
                else if (to > j)
                    j = to;
                /* the allocations and frees before j in trace order (the time of a point
                 * one of them makes is found once the points are chosen) */
                for (int64_t ka; (ka = take_changes_before(&ch, j, iv)) >= 0;) {
                    offer_total(gm_lod_here(&lod), &slots[3 * (size_t)cur_b], prev_total, ka,
                                &known[0], w->phase[ka], total, reserved, cur);
                    prev_total = total;
                }
                if (j > k + 1) {
                    /* known[j & 1] is read as event j - 1, the state before event j */
                    known[j & 1].time_us = t;
                    prev_e = &known[j & 1];
                    prev_ph = w->phase[j - 1];
                    p = (size_t)j; /* the next pass is event j */
                }
                continue;
            }
            while (take_changes_before(&ch, to, iv) >= 0)
                ;
            if (to > k + 1) {
                /* known[to & 1] is read as the time of event to - 1 */
                int64_t t = known[p & 1].time_us;
                if (dt)
                    times_forward(&w->tm, k, to, false, 0, &t, &wi);
                known[to & 1].time_us = t;
                p = (size_t)to; /* the next pass is event 'to' */
            }
        }
    }
    copy_bytes(dev->at_end, cur);
    if (lt)
        gm_lod_totals_end(lt);
    if (!series)
        return GM_OK;
    set_point(&slots[3 * (size_t)cur_b + 2], (int64_t)n - 1, prev_e, prev_ph, prev_total,
              prev_reserved, cur);
    /* the points in trace order, each once, after the initial state */
    dev->n_points = all ? n_pts : 1;
    for (unsigned bi = 0; bi < nb && !all; bi++) {
        struct gm_analysis_point *s = &slots[3 * (size_t)bi];
        for (int pass = 0; pass < 3; pass++) {
            /* the earliest of the bucket's unset-or-later points next */
            int best = -1;
            for (int j = 0; j < 3; j++)
                if (s[j].event > dev->points[dev->n_points - 1].event &&
                    (best < 0 || s[j].event < s[best].event))
                    best = j;
            if (best < 0)
                break;
            struct gm_analysis_point *pt = &dev->points[dev->n_points++];
            *pt = s[best];
            /* the time of a point the pass made between its stops (left 0 there) */
            if (skip_quiet && dt && pt->has_time)
                pt->time_us = time_at(&w->tm, pt->event);
        }
    }
    gm_free(slots);
    gm_lod_release(&lod);
    return GM_OK;
}

/* The bytes by category after the event of the most allocated (kmax) of the buckets of the
 * report's totals, a row for each run of buckets with one kmax (gm_analysis_totals_cats()),
 * once the series pass has made them: the allocations and frees taken in trace order, as
 * that pass takes them, up to each run's kmax in turn.  The kmax's never go back (a
 * bucket's own points come after the bucket before's last one, and a bucket that holds the
 * value carried in has that point), so this is one merge of the allocations and the frees
 * with the runs: no search and no pass over the events.  Into *out; false when out of
 * memory, or kmax goes back after all (nothing kept then). */
static bool totals_cats_build(const struct work *w, struct ana_cats *out)
{
    const struct gm_lod *al = &w->totals->alloc;
    const struct gm_analysis_device *dev = w->dev;
    const struct gm_analysis_alloc *allocs = dev->allocs;
    const struct gm_analysis_alloc *a = allocs, *a_end = allocs + dev->n_allocs;
    const uint32_t *f = w->free_of, *f_end = w->free_of + w->n_free_of;
    const struct gm_lod_bucket *bk = al->b;
    unsigned nb = al->n;
    /* room for a row a bucket, the rest given back once the rows are counted */
    uint64_t(*row)[GM_CATEGORY_COUNT] = gm_malloc((nb ? nb : 1) * sizeof(*row)),
    (*fit)[GM_CATEGORY_COUNT];
    uint64_t cur[GM_CATEGORY_COUNT] = {0};
    int64_t last = INT64_MIN;
    size_t n = 0;
    if (!row)
        return false;
    for (unsigned b = 0; b < nb; b++) {
        int64_t k = bk[b].kmax;
        if (k == last)
            continue;
        if (k < last) {
            gm_free(row);
            return false;
        }
        last = k;
        for (; a < a_end && a->alloc_event <= k; a++)
            cur[a->category] += a->bytes;
        for (const struct gm_analysis_alloc *g; f < f_end && (g = &allocs[*f])->free_event <= k;
             f++)
            cur[g->category] -= g->bytes;
        copy_bytes(row[n++], cur);
    }
    fit = gm_realloc(row, (n ? n : 1) * sizeof(*row));
    out->rows = (uint64_t *)(fit ? fit : row);
    out->n = n;
    return true;
}

/* The pass with the series and the one without (ANA_PARTS_FIGURES): one pass, compiled
 * for each, so that neither carries the other's per-event tests. */
static enum gm_status build_series(struct work *w, const struct gm_snapshot_timeline *tl,
                                   uint32_t max_points, struct gm_error *err)
{
    if (w->no_series)
        return series_pass(w, tl, max_points, false, err);
    return series_pass(w, tl, max_points, true, err);
}

/* ---------------------------------------------------------------- leaks */

struct site {
    uint32_t stack;
    uint32_t n_iters; /* distinct iterations (before the last) that kept memory */
    int32_t last_iter;
    uint64_t total;
    uint64_t count;
    uint8_t phase;
    uint8_t category;
    uint8_t rule;
};

struct kept_alloc {
    uint32_t site;
    int32_t iteration;
    uint64_t bytes;
};

static int cmp_kept(const void *a, const void *b)
{
    const struct kept_alloc *x = a, *y = b;
    if (x->site != y->site)
        return x->site < y->site ? -1 : 1;
    return (x->iteration > y->iteration) - (x->iteration < y->iteration);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_leak(const void *a, const void *b)
{
    const struct gm_analysis_leak *x = a, *y = b;
    if (x->total_bytes != y->total_bytes)
        return x->total_bytes > y->total_bytes ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static int cmp_leak_site(const void *a, const void *b)
{
    const struct gm_analysis_leak_site *x = a, *y = b;
    if (x->total_bytes != y->total_bytes)
        return x->total_bytes > y->total_bytes ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/* One leaking allocation site, before the sites are grouped by cause. */
struct site_leak {
    struct gm_analysis_leak_site site;
    uint8_t kind;                  /* enum gm_leak_kind */
    uint8_t category;              /* enum gm_category */
    int32_t first_iter, last_iter; /* the first and last iteration that kept memory */
    uint32_t frame;                /* the frame that names its cause (ANA_NO_FRAME: none) */
    uint32_t cause;                /* index of its cause */
};

/* The median of the bytes kept per iteration over kept[k..] of one site (or cause): the
 * run of equal .site from k; returns the index after the run.  'per_it' is scratch of at
 * least the iterations' count. */
static size_t median_run(const struct kept_alloc *kept, size_t n_kept, size_t k, uint64_t *per_it,
                         uint64_t *median, uint32_t *n_iterations)
{
    size_t nz = 0;
    uint32_t cur = kept[k].site;
    for (; k < n_kept && kept[k].site == cur; k++) {
        if (nz && kept[k - 1].iteration == kept[k].iteration && kept[k - 1].site == cur)
            per_it[nz - 1] += kept[k].bytes;
        else
            per_it[nz++] = kept[k].bytes;
    }
    qsort(per_it, nz, sizeof(uint64_t), cmp_u64);
    *median = nz ? per_it[nz / 2] : 0;
    *n_iterations = (uint32_t)nz;
    return k;
}

/* The order of leaking sites by cause: kind, naming frame, iteration pattern; sites that no
 * frame names stay causes of their own. */
static int cmp_cause(const void *a, const void *b)
{
    const struct site_leak *x = a, *y = b;
    if (x->kind != y->kind)
        return x->kind < y->kind ? -1 : 1;
    if (x->frame != y->frame)
        return x->frame < y->frame ? -1 : 1;
    if (x->first_iter != y->first_iter)
        return x->first_iter < y->first_iter ? -1 : 1;
    if (x->last_iter != y->last_iter)
        return x->last_iter < y->last_iter ? -1 : 1;
    if (x->site.n_iterations != y->site.n_iterations)
        return x->site.n_iterations < y->site.n_iterations ? -1 : 1;
    if (x->frame == ANA_NO_FRAME && x->site.stack != y->site.stack)
        return x->site.stack < y->site.stack ? -1 : 1;
    return 0;
}

/* One leak per cause: the sites that share the frame naming the cause and the iteration
 * pattern (the same iterations keep memory).  A forward result is named by the frame that
 * called the model (every activation of an evaluate() without no_grad is kept by
 * evaluate()), anything else by its first user frame.  The leaks go into the device's
 * arena, 'held' gets their bytes; kept[] (its .site the index into sl[]) is reordered. */
static enum gm_status leak_causes(struct work *w, struct site_leak *sl, size_t n_sl,
                                  struct kept_alloc *kept, size_t n_kept, uint64_t *per_it,
                                  uint64_t *held, struct gm_error *err)
{
    struct gm_analysis_device *dev = w->dev;
    struct gm_analysis_leak_site *all;
    uint32_t *cause_of;
    size_t n_causes = 0;
    for (size_t i = 0; i < n_sl; i++) {
        uint32_t f = ANA_NO_FRAME;
        if (sl[i].kind == GM_LEAK_FORWARD_OUTPUT || sl[i].kind == GM_LEAK_GRAPH_NO_GRAD)
            f = ana_stack_model_caller(w->cls, sl[i].site.stack);
        if (f == ANA_NO_FRAME)
            f = ana_stack_first_user(w->cls, sl[i].site.stack);
        sl[i].frame = f;
        sl[i].cause = (uint32_t)i; /* its own index until sorted */
    }
    cause_of = gm_malloc((n_sl ? n_sl : 1) * sizeof(*cause_of));
    if (!cause_of)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for leaks");
    qsort(sl, n_sl, sizeof(*sl), cmp_cause);
    for (size_t i = 0; i < n_sl; i++) {
        if (i == 0 || cmp_cause(&sl[i - 1], &sl[i]) != 0)
            n_causes++;
        cause_of[sl[i].cause] = (uint32_t)(n_causes - 1);
    }
    *held = gm_budget_bytes(n_causes, sizeof(*dev->leaks)) + gm_budget_bytes(n_sl, sizeof(*all));
    if (!take(w, *held)) {
        gm_free(cause_of);
        *held = 0;
        return over_limit(w, err);
    }
    dev->leaks = gm_arena_calloc(w->arena, n_causes ? n_causes : 1, sizeof(*dev->leaks));
    all = gm_arena_calloc(w->arena, n_sl ? n_sl : 1, sizeof(*all));
    if (!dev->leaks || !all) {
        gm_free(cause_of);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for leaks");
    }
    const struct gm_analysis_leak_site *best = NULL;
    for (size_t i = 0, c = SIZE_MAX; i < n_sl; i++) {
        struct gm_analysis_leak *lk;
        if (c == SIZE_MAX || cmp_cause(&sl[i - 1], &sl[i]) != 0) {
            best = NULL;
            lk = &dev->leaks[++c];
            lk->kind = sl[i].kind;
            lk->frame = sl[i].frame;
            lk->first_iteration = sl[i].first_iter;
            lk->last_iteration = sl[i].last_iter;
            lk->sites = &all[i];
        }
        lk = &dev->leaks[c];
        /* the category of its largest site (the order of the sites below) */
        if (!best || cmp_leak_site(&sl[i].site, best) < 0) {
            best = &sl[i].site;
            lk->category = sl[i].category;
        }
        lk->sites[lk->n_sites++] = sl[i].site;
        lk->total_bytes += sl[i].site.total_bytes;
        lk->count += sl[i].site.count;
    }
    /* A cause's bytes per iteration: the median of what all its sites kept together. */
    for (size_t k = 0; k < n_kept; k++)
        kept[k].site = cause_of[kept[k].site];
    qsort(kept, n_kept, sizeof(*kept), cmp_kept);
    for (size_t k = 0; k < n_kept;) {
        struct gm_analysis_leak *lk = &dev->leaks[kept[k].site];
        k = median_run(kept, n_kept, k, per_it, &lk->bytes_per_iteration, &lk->n_iterations);
    }
    for (size_t c = 0; c < n_causes; c++) {
        struct gm_analysis_leak *lk = &dev->leaks[c];
        qsort(lk->sites, lk->n_sites, sizeof(*lk->sites), cmp_leak_site);
        lk->stack = lk->sites[0].stack;
    }
    qsort(dev->leaks, n_causes, sizeof(*dev->leaks), cmp_leak);
    dev->n_leaks = n_causes;
    gm_free(cause_of);
    return GM_OK;
}

static enum gm_status find_leaks(struct work *w, struct gm_error *err)
{
    struct gm_analysis_device *dev = w->dev;
    size_t n_it = dev->n_iterations;
    if (n_it < ANA_MIN_LEAK_ITERATIONS)
        return GM_OK;
    enum gm_status st = GM_OK;
    struct gm_map map = GM_MAP_INIT; /* stack -> index in sites[] */
    struct site *sites = NULL;
    uint64_t *per_it = NULL;
    struct kept_alloc *kept = NULL;
    struct site_leak *sl = NULL;
    size_t n_sites = 0, cap = 0;
    uint64_t held = w->held;   /* the temporaries below are given back at the end */
    uint64_t n_leaks_kept = 0; /* bytes of the leaks kept in the arena */
    for (size_t i = 0; i < dev->n_allocs; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        int32_t a_it = a->free_event >= 0 ? -1 : iteration_of(w, a->alloc_event);
        if (a_it < 0)
            continue;
        uint32_t s = ana_map_u32(&map, a->stack);
        if (s == NO_ALLOC) {
            if (!GM_VEC_RESERVE(sites, cap, n_sites + 1, NULL))
                goto nomem;
            s = (uint32_t)n_sites++;
            memset(&sites[s], 0, sizeof(sites[s]));
            sites[s].stack = a->stack;
            sites[s].last_iter = -1;
            sites[s].phase = a->phase;
            sites[s].category = a->category;
            sites[s].rule = a->rule;
            if (!gm_map_put(&map, a->stack, s))
                goto nomem;
        }
        struct site *si = &sites[s];
        si->total += a->bytes;
        si->count++;
        if (a_it != si->last_iter && (size_t)a_it + 1 < n_it)
            si->n_iters++;
        si->last_iter = a_it;
    }
    /* A leak: kept memory in at least two iterations before the last one, and in at least
     * half of them. */
    size_t n_leaks = 0;
    uint32_t need = (uint32_t)((n_it - 1) / 2);
    if (need < 2)
        need = 2;
    for (size_t s = 0; s < n_sites; s++)
        if (sites[s].n_iters >= need)
            n_leaks++;
    if (!n_leaks)
        goto out;
    sl = gm_calloc(n_leaks, sizeof(*sl));
    per_it = gm_calloc(n_it, sizeof(uint64_t));
    size_t n_kept = 0;
    for (size_t i = 0; i < dev->n_allocs; i++)
        if (dev->allocs[i].free_event < 0 && iteration_of(w, dev->allocs[i].alloc_event) >= 0)
            n_kept++;
    if (!take(w, gm_budget_bytes(n_kept, sizeof(*kept)) + gm_budget_bytes(n_it, 8) +
                     gm_budget_bytes(n_leaks, sizeof(*sl))))
        goto over;
    kept = gm_malloc((n_kept ? n_kept : 1) * sizeof(*kept));
    if (!sl || !per_it || !kept)
        goto nomem;
    /* The kept allocations of leaking sites, grouped by site (then iteration: allocations
     * come in event order and qsort ties are broken by the iteration). */
    n_kept = 0;
    for (size_t i = 0; i < dev->n_allocs; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        int32_t a_it = a->free_event >= 0 ? -1 : iteration_of(w, a->alloc_event);
        if (a_it < 0)
            continue;
        uint32_t si = ana_map_u32(&map, a->stack);
        if (si == NO_ALLOC || sites[si].n_iters < need)
            continue;
        kept[n_kept].site = si;
        kept[n_kept].iteration = a_it;
        kept[n_kept].bytes = a->bytes;
        n_kept++;
    }
    qsort(kept, n_kept, sizeof(*kept), cmp_kept);
    size_t l = 0;
    for (size_t k = 0; k < n_kept;) {
        const struct site *si = &sites[kept[k].site];
        struct site_leak *lk = &sl[l];
        uint32_t cur = kept[k].site;
        lk->first_iter = kept[k].iteration;
        for (; k < n_kept && kept[k].site == cur; k++)
            kept[k].site = (uint32_t)l; /* from here on: the index of its leak site */
        lk->last_iter = kept[k - 1].iteration;
        lk->site.stack = si->stack;
        lk->site.total_bytes = si->total;
        lk->site.count = si->count;
        lk->category = si->category;
        if (si->phase == GM_PHASE_FORWARD)
            lk->kind = w->has_backward ? GM_LEAK_FORWARD_OUTPUT : GM_LEAK_GRAPH_NO_GRAD;
        else if (si->phase == GM_PHASE_OPTIMIZER_STEP)
            lk->kind = GM_LEAK_OPTIMIZER;
        else if (si->rule == GM_RULE_USER || si->rule == GM_RULE_INPUT_BATCH ||
                 si->rule == GM_RULE_NONE || si->rule == GM_RULE_INPUT_FRAMES)
            lk->kind = GM_LEAK_USER_TENSOR;
        else
            lk->kind = GM_LEAK_OTHER;
        l++;
    }
    n_leaks = l;
    /* Each site's bytes per iteration (the median over the iterations that kept memory). */
    for (size_t k = 0; k < n_kept;)
        k = median_run(kept, n_kept, k, per_it, &sl[kept[k].site].site.bytes_per_iteration,
                       &sl[kept[k].site].site.n_iterations);
    /* Several forward sites leaking together: a whole autograd graph (and the activations
     * it saved) is kept, not just one output tensor. */
    size_t n_fwd = 0;
    for (size_t i = 0; i < n_leaks; i++)
        if (sl[i].kind == GM_LEAK_FORWARD_OUTPUT || sl[i].kind == GM_LEAK_GRAPH_NO_GRAD)
            n_fwd++;
    if (n_fwd > 2)
        for (size_t i = 0; i < n_leaks; i++)
            if (sl[i].kind == GM_LEAK_FORWARD_OUTPUT)
                sl[i].kind = GM_LEAK_GRAPH_NO_GRAD;
    st = leak_causes(w, sl, n_leaks, kept, n_kept, per_it, &n_leaks_kept, err);
    if (st != GM_OK)
        goto out;
    st = GM_OK;
    goto out;
nomem:
    st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for leaks");
    goto out;
over:
    st = over_limit(w, err);
out:
    gm_free(per_it);
    gm_free(kept);
    gm_free(sl);
    gm_free(sites);
    gm_map_release(&map);
    w->held = held + n_leaks_kept;
    return st;
}

/* ---------------------------------------------------------------- driver */

/* A walk forward through runs that start in ascending order (the iterations, the phase
 * runs), for events asked in ascending order: 'n' runs start at or before the event asked
 * last, and 'next' is the start of the run after them (INT64_MAX: none), so that an event
 * in the same run as the one before costs one comparison. */
struct run_step {
    const int64_t *first; /* the first run's start; the others 'stride' bytes apart */
    size_t stride, n_runs;
    size_t n;
    int64_t next;
};

static inline int64_t run_start(const struct run_step *r, size_t i)
{
    return i < r->n_runs ? *(const int64_t *)(const void *)((const char *)r->first + i * r->stride)
                         : INT64_MAX;
}

static inline void run_step_init(struct run_step *r, const int64_t *first, size_t stride,
                                 size_t n_runs)
{
    r->first = first;
    r->stride = stride;
    r->n_runs = n_runs;
    r->n = 0;
    r->next = run_start(r, 0);
}

/* How many runs start at or before event k (an allocation's event: 32 bits, so below the
 * INT64_MAX that ends the walk). */
static GM_INLINE_ALWAYS size_t run_step(struct run_step *r, int32_t k)
{
    while (k >= r->next)
        r->next = run_start(r, ++r->n);
    return r->n;
}

/* The iterations of dev for iteration_step(). */
static inline void iteration_step_init(struct run_step *r, const struct gm_analysis_device *dev)
{
    run_step_init(r, dev->n_iterations ? &dev->iterations[0].first_event : NULL,
                  sizeof(dev->iterations[0]), dev->n_iterations);
}

/* The iteration of event k (iteration_of()) when events are asked in ascending order. */
static GM_INLINE_ALWAYS int32_t iteration_step(struct run_step *r, int32_t k)
{
    return (int32_t)run_step(r, k) - 1;
}

/* How many allocations the device has: dev->allocs, or a diff's lite ones. */
static inline size_t n_allocs(const struct work *w)
{
    return w->lite ? w->n_lite : w->dev->n_allocs;
}

/* Allocation i: &dev->allocs[i], or a diff's lite one made whole in *tmp. */
static inline struct gm_analysis_alloc *alloc_at(const struct work *w, size_t i,
                                                 struct gm_analysis_alloc *tmp)
{
    if (!w->lite)
        return &w->dev->allocs[i];
    lite_get(&w->lite[i], tmp);
    return tmp;
}

/* Per allocation stack: allocations, iterations, the never-freed ones (allocations come in
 * event order, so iterations are visited in order). */
static enum gm_status site_stats(struct work *w, struct gm_error *err)
{
    const struct gm_analysis_device *dev = w->dev;
    size_t n = 0, cap = 0;
    struct run_step iv;
    struct gm_analysis_alloc tmp;
    iteration_step_init(&iv, dev);
    gm_map_init(&w->site_of, NULL);
    for (size_t i = 0; i < n_allocs(w); i++) {
        const struct gm_analysis_alloc *a = alloc_at(w, i, &tmp);
        if (a->alloc_event < 0)
            continue;
        int32_t itv = iteration_step(&iv, a->alloc_event);
        uint32_t si = ana_map_u32(&w->site_of, a->stack);
        if (si == NO_ALLOC) {
            if (!GM_VEC_RESERVE(w->sites, cap, n + 1, NULL))
                return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
            si = (uint32_t)n++;
            memset(&w->sites[si], 0, sizeof(w->sites[si]));
            w->sites[si].last_iter = -2;
            w->sites[si].first_kept = w->sites[si].last_kept = -2;
            if (!gm_map_put(&w->site_of, a->stack, si))
                return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
        }
        struct site_stat *ss = &w->sites[si];
        ss->count++;
        if (itv != ss->last_iter)
            ss->n_iters++;
        ss->last_iter = itv;
        if (a->free_event < 0) {
            if (ss->first_kept == -2)
                ss->first_kept = itv;
            ss->last_kept = itv;
        }
    }
    return GM_OK;
}

/* The moments of one device where fragmentation is computed: the ooms and the peak. */
static enum gm_status frag_targets(struct work *w, struct gm_error *err)
{
    const struct gm_snapshot *snap = w->snap;
    struct gm_analysis_device *dev = w->dev;
    size_t n_oom = w->n_oom, t = 0, pos = 0;
    struct ana_frag_target *targets;
    enum gm_status st;
    if (n_oom) {
        if (!take(w, gm_budget_bytes(n_oom, sizeof(*dev->ooms))))
            return over_limit(w, err);
        dev->ooms = gm_arena_calloc(w->arena, n_oom, sizeof(*dev->ooms));
        if (!dev->ooms)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for ooms");
        dev->n_ooms = n_oom;
    }
    targets = gm_malloc((n_oom + 1) * sizeof(*targets));
    if (!targets)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
    for (size_t i = 0; i < n_oom; i++) {
        targets[t].event = w->ooms[i];
        targets[t].out = &dev->ooms[t];
        t++;
    }
    /* The peak, inserted where it belongs so that the targets stay sorted. */
    while (pos < t && targets[pos].event <= dev->peak_event)
        pos++;
    memmove(&targets[pos + 1], &targets[pos], (t - pos) * sizeof(*targets));
    targets[pos].event = dev->peak_event;
    targets[pos].out = &dev->peak_frag;
    t++;
    st = ana_frag_compute(snap, w->sd, w->an, dev, w->arena, targets, t, err);
    gm_free(targets);
    return st;
}

/* Whether allocation 'a' holds its bytes at event k (after that event's own alloc and free). */
static bool alive_at(const struct gm_analysis_alloc *a, int64_t k)
{
    return ana_alive_at(a->alloc_event, a->free_event, k);
}

/* ANA_PARTS_DIFF: whether the category of 'a' can count, in the category split at the peak
 * or through the freed batches of its site (the one thing one allocation's class passes on
 * to another's: only an allocation of phase other, freed, reaches that rule). */
static bool class_counts(const struct work *w, const struct gm_analysis_alloc *a)
{
    if (alive_at(a, w->dev->peak_event))
        return true;
    if (a->alloc_event < 0 || a->free_event < 0)
        return false;
    uint8_t ph = w->phase[a->alloc_event];
    return ph != GM_PHASE_FORWARD && ph != GM_PHASE_BACKWARD && ph != GM_PHASE_OPTIMIZER_STEP;
}

/* ANA_PARTS_DIFF: allocation 'a' (classified when alive at the peak) into the category split
 * at the peak, made of the allocations alive at the peak event alone (what build_series()
 * finds there on its walk of every event), and into the sums per stack. */
static bool diff_add(struct work *w, struct ana_stack_sums *sums, const struct gm_analysis_alloc *a)
{
    struct gm_analysis_device *dev = w->dev;
    /* (no point of the series is the peak: no split) */
    if (dev->peak_event >= -1 && dev->peak_event < (int64_t)dev->n_events &&
        alive_at(a, dev->peak_event)) {
        dev->at_peak[a->category] += a->bytes;
        if (a->rule == GM_RULE_NONE)
            dev->at_peak_unexplained += a->bytes;
        if (a->rule == GM_RULE_PARAM_LIFETIME)
            dev->at_peak_lifetime_only += a->bytes;
    }
    return ana_stack_sums_add(sums, a->stack, a->bytes, a->alloc_event, a->free_event,
                              dev->peak_event);
}

/* ANA_PARTS_DIFF: the sums made (ana_stack_sums_add()) kept in the arena, as the device's. */
static enum gm_status keep_sums(struct work *w, const struct ana_stack_sums *sums,
                                struct gm_error *err)
{
    struct ana_device_priv *dp = gm_arena_calloc(w->arena, 1, sizeof(*dp));
    struct ana_stack_sum *v = gm_arena_calloc(w->arena, sums->n ? sums->n : 1, sizeof(*sums->v));
    if (!dp || !v)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
    if (sums->n)
        memcpy(v, sums->v, sums->n * sizeof(*v));
    dp->sums = v;
    dp->n_sums = sums->n;
    w->dev->priv_ = dp;
    return GM_OK;
}

/* A diff's lite allocations, read: freed. */
static void release_lite(struct work *w)
{
    if (!w->lite)
        return;
    w->held -= (uint64_t)w->cap_lite * sizeof(*w->lite);
    gm_big_free(w->lite, w->cap_lite * sizeof(*w->lite));
    w->lite = NULL;
    w->n_lite = w->cap_lite = 0;
}

/* The bytes a layout history holds. */
static uint64_t layout_bytes(const struct gm_layout_history *h)
{
    return gm_budget_bytes(h->n_segments, sizeof(*h->segments)) +
           gm_budget_bytes(h->n_initial, sizeof(*h->initial)) +
           gm_budget_bytes(h->n_changes, sizeof(*h->changes)) +
           gm_budget_bytes(h->n_final_blocks, sizeof(*h->final_blocks));
}

/* The loader's stacks, read by compute_phases alone: freed, or kept as w->spare for the
 * totals' x's when they are asked for (the memory the totals hold is not counted). */
static void release_stacks(struct work *w)
{
    w->held -= (uint64_t)w->stk.cap * stk_elem(&w->stk);
    if (w->priv->totals && !w->diff_only && w->stk.v && !w->spare) {
        w->spare = w->stk.v;
        w->spare_bytes = w->stk.cap * stk_elem(&w->stk);
        memset(&w->stk, 0, sizeof(w->stk));
    }
    stk_release(&w->stk);
}

static enum gm_status analyse_device(const struct gm_analysis *an, size_t d,
                                     struct ana_classifier *cls, struct ana_priv *priv,
                                     uint32_t max_points, enum ana_parts parts,
                                     struct gm_analysis_device *dev, struct gm_error *err)
{
    const struct gm_snapshot *snap = an->snap;
    const struct gm_snapshot_device *sd = &snap->devices[d];
    struct gm_snapshot_timeline tl;
    struct ana_device_priv *dp;
    struct ana_stack_sums sums;
    struct work w;
    enum gm_status st;

    memset(&sums, 0, sizeof(sums));
    memset(&tl, 0, sizeof(tl));
    memset(&w, 0, sizeof(w));
    w.snap = snap;
    w.an = an;
    w.sd = sd;
    w.dev = dev;
    w.cls = cls;
    w.arena = &priv->arena;
    w.priv = priv;
    w.diff_only = parts == ANA_PARTS_DIFF;
    w.no_series = an->no_series;
    dev->device = sd->index;
    dev->n_events = sd->n_events;
    dev->has_trace = sd->n_events > 0;
    dev->peak_iteration = -1;
    dev->peak_user_phase = -1;
    st = gm_snapshot_timeline(snap, sd->index, 0, &tl, err);
    if (st != GM_OK)
        return st;
    dev->peak_bytes = tl.peak_bytes;
    dev->peak_event = tl.peak_event_index;
    dev->peak_has_time = tl.peak_time_valid;
    dev->peak_time_us = tl.peak_time_us;
    dev->timeline = tl; /* flags 0: no live array, a copy of scalars */

    size_t n = sd->n_events;
    if (!take(&w, n ? n : 1)) {
        st = over_limit(&w, err);
        goto out;
    }
    w.phase_bytes = n ? n : 1; /* (made by scan_trace) */

    if ((st = scan_trace(&w, err)) != GM_OK)
        goto out;
    if ((st = compute_phases(&w, err)) != GM_OK)
        goto out;
    release_stacks(&w);
    if ((st = compute_iterations(&w, err)) != GM_OK)
        goto out;
    if (!ix_build(&w.iters_ix, dev->n_iterations ? &dev->iterations[0].first_event : NULL,
                  sizeof(dev->iterations[0]), dev->n_iterations, n)) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for phases");
        goto out;
    }
    if ((st = site_stats(&w, err)) != GM_OK)
        goto out;
    w.next_fwd = gm_malloc((dev->n_phases ? dev->n_phases : 1) * sizeof(size_t));
    if (!w.next_fwd) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for phases");
        goto out;
    }
    for (size_t r = dev->n_phases, nf = dev->n_phases; r-- > 0;) {
        if (dev->phases[r].phase == GM_PHASE_FORWARD)
            nf = r;
        w.next_fwd[r] = nf;
    }
    if ((st = ana_rules_device(cls->rules, sd, w.tm.dt ? &w.tm : NULL, err)) != GM_OK)
        goto out;
    if (w.diff_only && !ana_stack_sums_init(&sums, snap->n_stacks)) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
        goto out;
    }
    struct run_step iv, runs;
    iteration_step_init(&iv, dev);
    /* the phase runs after the first: the run holding an event (runs cover the trace) is
     * how many of them start at or before it */
    run_step_init(&runs, dev->n_phases > 1 ? &dev->phases[1].first_event : NULL,
                  sizeof(dev->phases[0]), dev->n_phases ? dev->n_phases - 1 : 0);
    for (size_t i = 0; i < n_allocs(&w); i++) {
        struct gm_analysis_alloc tmp, *a = alloc_at(&w, i, &tmp);
        int32_t k = a->alloc_event;
        int32_t it = iteration_step(&iv, k);
        /* (found by stepping forward: allocations are in event order) */
        if (!w.diff_only || class_counts(&w, a))
            classify_alloc(&w, a, it, k < 0 ? SIZE_MAX : run_step(&runs, k));
        if (a->stack || a->free_has_stack)
            dev->has_frames = true;
        if (w.diff_only && !diff_add(&w, &sums, a)) {
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
            goto out;
        }
    }
    if (w.diff_only) {
        /* the peak's split and phase, the sums per stack and no allocation; no series,
         * iteration figures, leaks, layout or fragmentation */
        release_lite(&w);
        if ((st = keep_sums(&w, &sums, err)) != GM_OK)
            goto out;
        dev->peak_phase = (uint8_t)gm_analysis_phase_at(dev, dev->peak_event);
        dev->peak_iteration = iteration_of(&w, dev->peak_event);
        goto out;
    }
    if ((st = ana_user_phases(snap, sd, w.tm.dt ? &w.tm : NULL, w.arena, dev, err)) != GM_OK)
        goto out;
    /* the totals asked for, from the series' pass (none when out of memory: the report
     * walks the trace for them) */
    if (priv->totals && n) {
        if (snap_lod_totals_begin_in(&priv->totals[d], sd, w.n_timed, gm_lod_finest_buckets(n),
                                     tl.initial_bytes, tl.initial_reserved_bytes, w.spare,
                                     w.spare_bytes, NULL) == GM_OK)
            w.totals = &priv->totals[d];
        w.spare = NULL; /* (the totals' now, or freed) */
    }
    if ((st = build_series(&w, &tl, max_points, err)) != GM_OK)
        goto out;
    /* (none when out of memory: the report then sums them itself) */
    if (w.totals && priv->totals_cats && totals_cats_build(&w, &priv->totals_cats[d]))
        w.totals_cats = &priv->totals_cats[d];
    drop_times(&w);
    dev->peak_phase = (uint8_t)gm_analysis_phase_at(dev, dev->peak_event);
    dev->peak_iteration = iteration_of(&w, dev->peak_event);
    if ((st = find_leaks(&w, err)) != GM_OK)
        goto out;
    dp = gm_arena_calloc(w.arena, 1, sizeof(*dp));
    if (!dp) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
        goto out;
    }
    dev->priv_ = dp;
    dp->totals = w.totals;
    dp->totals_cats = w.totals_cats;
    /* the order of the frees, kept for the regions (the memory the scan filled: no new
     * array) */
    if (w.free_of) {
        if (!ana_priv_keep(priv, w.free_of, w.cap_free_of * sizeof(uint32_t))) {
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
            goto out;
        }
        dp->free_order = w.free_of;
        dp->n_free_order = w.n_free_of;
        priv->held += (uint64_t)w.cap_free_of * sizeof(uint32_t);
        w.free_of = NULL;
        w.cap_free_of = 0;
    }
    /* the per-event phases are not needed any more: give them back before the sweep */
    gm_big_free(w.phase, w.phase_bytes);
    w.phase = NULL;
    /* the segments' history, kept: the sweep below and the report's state read it (its
     * segment events gathered by scan_trace's walk) */
    if ((st = ana_layout_history_of(snap, sd, &w.seg_events, &priv->layouts[d], err)) != GM_OK)
        goto out;
    dp->layout = &priv->layouts[d];
    priv->held += layout_bytes(dp->layout);
    st = frag_targets(&w, err);
out:
    gm_map_release(&w.site_of);
    ana_layout_events_release(&w.seg_events);
    ix_release(&w.iters_ix);
    gm_free(w.sites);
    gm_free(w.next_fwd);
    gm_big_free(w.phase, w.phase_bytes);
    drop_times(&w);
    release_stacks(&w);
    gm_big_free(w.spare, w.spare_bytes);
    gm_big_free(w.free_of, w.cap_free_of * sizeof(uint32_t));
    gm_big_free(w.ooms, w.cap_oom * sizeof(int64_t));
    gm_snapshot_timeline_release(&tl);
    release_lite(&w);
    ana_stack_sums_release(&sums);
    return st;
}

static void read_settings(struct gm_analysis *an, const struct gm_snapshot *snap)
{
    an->max_split_size = -1;
    for (size_t i = 0; i < snap->n_settings; i++) {
        const struct gm_snapshot_setting *s = &snap->settings[i];
        if (!s->key)
            continue;
        if (!strcmp(s->key, "expandable_segments") &&
            (s->type == GM_SETTING_BOOL || s->type == GM_SETTING_INT))
            an->expandable_segments = s->i != 0;
        else if (!strcmp(s->key, "max_split_size") && s->type == GM_SETTING_INT)
            an->max_split_size = s->i;
        else if (!strcmp(s->key, "garbage_collection_threshold") &&
                 (s->type == GM_SETTING_FLOAT || s->type == GM_SETTING_INT))
            an->gc_threshold = s->d;
    }
}

enum gm_status gm_analysis_run(const struct gm_snapshot *snap, const struct gm_analysis_opts *opts,
                               struct gm_analysis **out, struct gm_error *err)
{
    return ana_run(snap, opts, ANA_PARTS_ALL, out, err);
}

enum gm_status gm_analysis_run_figures(const struct gm_snapshot *snap,
                                       const struct gm_analysis_opts *opts,
                                       struct gm_analysis **out, struct gm_error *err)
{
    return ana_run(snap, opts, ANA_PARTS_FIGURES, out, err);
}

enum gm_status ana_run(const struct gm_snapshot *snap, const struct gm_analysis_opts *opts,
                       enum ana_parts parts, struct gm_analysis **out, struct gm_error *err)
{
    *out = NULL;
    if (snap->events_dropped)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "analysis: the snapshot was loaded without its events");
    uint32_t max_points = opts && opts->max_points ? opts->max_points : 2000;
    struct gm_analysis *an = gm_calloc(1, sizeof(*an));
    struct ana_priv *priv = gm_calloc(1, sizeof(*priv));
    if (!an || !priv) {
        gm_free(an);
        gm_free(priv);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
    }
    gm_arena_init(&priv->arena, 0);
    an->priv_ = priv;
    an->snap = snap;
    an->diff_only = parts == ANA_PARTS_DIFF;
    an->no_series = parts == ANA_PARTS_FIGURES;
    read_settings(an, snap);

    struct ana_classifier cls;
    struct ana_rules rules;
    enum gm_status st = ana_classifier_init(&cls, snap, err);
    if (st != GM_OK) {
        gm_analysis_free(an);
        return st;
    }
    if ((st = ana_rules_init(&rules, opts ? opts->rules : NULL, snap, err)) != GM_OK) {
        ana_classifier_release(&cls);
        gm_analysis_free(an);
        return st;
    }
    cls.rules = &rules;
    if ((st = ana_rules_keep(an, &priv->arena, opts ? opts->rules : NULL, err)) != GM_OK)
        goto fail;
    an->n_devices = snap->n_devices;
    an->devices =
        gm_arena_calloc(&priv->arena, an->n_devices ? an->n_devices : 1, sizeof(*an->devices));
    priv->layouts = gm_calloc(an->n_devices ? an->n_devices : 1, sizeof(*priv->layouts));
    if (opts && opts->totals && parts == ANA_PARTS_ALL) {
        priv->totals = gm_calloc(an->n_devices ? an->n_devices : 1, sizeof(*priv->totals));
        priv->totals_cats =
            gm_calloc(an->n_devices ? an->n_devices : 1, sizeof(*priv->totals_cats));
    }
    if (!an->devices || !priv->layouts) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory");
        goto fail;
    }
    for (size_t d = 0; d < snap->n_devices; d++) {
        st = analyse_device(an, d, &cls, priv, max_points, parts, &an->devices[d], err);
        if (st != GM_OK)
            goto fail;
    }
    ana_classifier_release(&cls);
    ana_rules_release(&rules);
    *out = an;
    return GM_OK;
fail:
    ana_classifier_release(&cls);
    ana_rules_release(&rules);
    gm_analysis_free(an);
    return st;
}

/* ---------------------------------------------------------------- results */

bool ana_priv_keep(struct ana_priv *priv, void *p, size_t bytes)
{
    struct ana_kept *k = GM_VEC_PUSH(priv->kept, priv->n_kept, priv->cap_kept, NULL);
    if (!k)
        return false;
    k->p = p;
    k->bytes = bytes;
    return true;
}

enum gm_status gm_analysis_require_whole(const struct gm_analysis *an, const char *what,
                                         struct gm_error *err)
{
    if (an && an->diff_only)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "%s: the analysis was made for a diff alone (gm_analysis_diff_prepare())",
                       what);
    return GM_OK;
}

enum gm_status gm_analysis_require_series(const struct gm_analysis *an, const char *what,
                                          struct gm_error *err)
{
    enum gm_status st = gm_analysis_require_whole(an, what, err);
    if (st == GM_OK && an && an->no_series)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "%s: the analysis was made without its series (gm_analysis_run_figures())",
                       what);
    return st;
}

void gm_analysis_free(struct gm_analysis *an)
{
    if (!an)
        return;
    struct ana_priv *priv = an->priv_;
    if (priv) {
        for (size_t i = 0; i < priv->n_kept; i++)
            gm_big_free(priv->kept[i].p, priv->kept[i].bytes);
        gm_free(priv->kept);
        for (size_t d = 0; priv->layouts && d < an->n_devices; d++)
            gm_layout_history_release(&priv->layouts[d]);
        gm_free(priv->layouts);
        for (size_t d = 0; priv->totals && d < an->n_devices; d++)
            gm_lod_totals_release(&priv->totals[d]);
        gm_free(priv->totals);
        for (size_t d = 0; priv->totals_cats && d < an->n_devices; d++)
            gm_free(priv->totals_cats[d].rows);
        gm_free(priv->totals_cats);
        gm_arena_release(&priv->arena);
        gm_free(priv);
    }
    gm_free(an);
}

const struct gm_lod_totals *gm_analysis_totals(const struct gm_analysis_device *dev)
{
    return dev && dev->priv_ ? dev->priv_->totals : NULL;
}

bool gm_analysis_reads_trace(const struct gm_analysis *an)
{
    const struct gm_snapshot *snap = an->snap;
    for (size_t d = 0; d < snap->n_devices; d++) {
        const struct gm_snapshot_device *sd = &snap->devices[d];
        const struct gm_analysis_device *ad = gm_analysis_device_by_index(an, sd->index);
        const struct gm_lod_totals *lt = gm_analysis_totals(ad);
        if (snap_events_stored(sd))
            continue;
        /* the axis reads an event's time unless it keeps every x (html_device.c) */
        if (!lt || (lt->axis.time && !gm_lod_axis_keeps_x(&lt->axis)) ||
            !gm_analysis_layout_history(ad))
            return true;
    }
    return false;
}

const uint64_t *gm_analysis_totals_cats(const struct gm_analysis_device *dev, size_t *n_rows)
{
    const struct ana_cats *c =
        dev && dev->priv_ && dev->priv_->totals ? dev->priv_->totals_cats : NULL;
    *n_rows = c ? c->n : 0;
    return c ? c->rows : NULL;
}

const struct gm_analysis_device *gm_analysis_device_by_index(const struct gm_analysis *an,
                                                             int32_t index)
{
    for (size_t d = 0; an && d < an->n_devices; d++)
        if (an->devices[d].device == index)
            return &an->devices[d];
    return NULL;
}
