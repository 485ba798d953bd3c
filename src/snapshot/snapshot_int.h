/* SPDX-License-Identifier: MIT */
/* snapshot_int.h - internals shared by the snapshot module's files (library-internal). */
#ifndef GM_SNAPSHOT_SNAPSHOT_INT_H
#define GM_SNAPSHOT_SNAPSHOT_INT_H

#include "base/hint.h"
#include "base/map.h"

#include "gpumem/arena.h"
#include "gpumem/snapshot.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Where a Python frame's file lies: inside the torch package; inside installed packages
 * (site-packages, dist-packages).  The rules behind gm_snapshot_frame_is_user(), also used
 * by the analysis' frame classes. */
bool gm_frame_path_in_torch(const char *fn);
bool gm_frame_path_in_packages(const char *fn);

/* The loader's indexes (intern.c) map a hash to a 32-bit id in the base map's index form
 * (base/map.h): the id of an entry of 'hash' for which eq(ctx, id) holds (eq NULL: any),
 * or SNAP_ID_NONE. */
#define SNAP_ID_NONE UINT32_MAX
static inline uint32_t snap_index_find(const struct gm_map *m, uint64_t hash,
                                       bool (*eq)(void *ctx, uint64_t id), void *ctx)
{
    uint64_t v;
    return gm_map_find(m, hash, eq, ctx, &v) ? (uint32_t)v : SNAP_ID_NONE;
}

/* a + b, UINT64_MAX when that overflows (gm_add_sat(), inline for the per-event loops). */
static inline uint64_t snap_sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* One 'File "f", line N, in name' line of a Python traceback (traceback.format_stack(), the
 * form of a trace entry's 'forward_frames' strings): where its parts are in the text (the
 * name runs to the end of the line; the line number stays at 2^40 however long).  False
 * when p[0..n) is not one. */
struct snap_tb_line {
    const char *file, *name;
    size_t file_len, name_len;
    int64_t line;
};
bool snap_traceback_line(const char *p, size_t n, struct snap_tb_line *out);

/* gm_snapshot_group_live() of any list of live allocations: the one grouping by stack
 * (the analysis groups what is alive at any moment with it). */
enum gm_status snap_group_live(const struct gm_snapshot_live *live, size_t n_live,
                               struct gm_snapshot_live_group **out, size_t *n_out,
                               struct gm_error *err);

/* gm_snapshot_timeline(); force_two_pass: find the peak by the forward replay even where
 * the one-pass search applies (tests compare the two). */
enum gm_status snap_timeline(const struct gm_snapshot *snap, int32_t index, unsigned flags,
                             bool force_two_pass, struct gm_snapshot_timeline *out,
                             struct gm_error *err);

/* gm_snapshot_walk a batch at a time, for a writer of millions of lines (no call per
 * event): the next events, at most GM_SNAPSHOT_CURSOR_BATCH.  *events points to them
 * (borrowed, valid until the next call on the walk), after[i] (room for
 * GM_SNAPSHOT_CURSOR_BATCH, the caller's) receives the totals after events[i], and
 * w->allocated, w->reserved and w->cur.index are those after the last one, as
 * gm_snapshot_walk_next() leaves them; event w->cur.index + 1 - n + i is events[i].  Returns
 * how many; 0 after the last event.  May be mixed with gm_snapshot_walk_next() on one walk. */
struct snap_walk_totals {
    uint64_t allocated; /* bytes */
    uint64_t reserved;  /* bytes */
};
size_t snap_walk_batch(struct gm_snapshot_walk *w, const struct gm_snapshot_event **events,
                       struct snap_walk_totals *after);

/* ---- consumers of a trace's events while it is loaded (trace.c) ----
 * While the file is read, the loader hands each committed batch of a device trace's events,
 * in order and each event once, to every consumer opened on that trace: the timeline's fold
 * (below) and what a caller supplied to the load.  A batch written out before it is
 * committed (a long one, which may still be dropped) ends every consumer of that trace
 * (abandon()), and a trace the parser built as a whole list gets none: the owner of a
 * consumer that did not see the whole trace reads it from the snapshot after the load
 * instead, with the same per-event code, so no result depends on which path ran.  Every
 * call of a consumer (open() included) comes from pipe.c: on the loader's thread, or, for a
 * large file with a consumer besides the fold where the process may use two CPUs
 * (gm_snapshot_opts.threads), in the same order on one worker thread beside the reader; a
 * consumer touches only its state, its batch and the budget 'shared' (which only consumers
 * and the kept-aside events charge), never the loader's, so it needs no lock.  open() may
 * set its own members of 'pk' (.fold, .consumed, .consumed_ops), which the loader reads
 * only after the load; it must not read the others (the loader writes them meanwhile) nor
 * keep 'pk'. */
struct gm_snapshot_packed;
struct snap_consumer_ops {
    /* The consumer of device 'index''s trace, whose events go to packed trace 'pk', or NULL
     * (none wanted; out of memory).  What it holds it charges to 'shared' (gm_budget.shared
     * of its own budgets): the load's one budget for every consumer of every trace, a share
     * of the snapshot's memory limit, whose bytes still held after the load count in
     * gm_snapshot.memory_bytes; it gives them back when it lets go of them (abandon()).
     * What it keeps for after the load it leaves in 'pk' (gm_snapshot_packed.fold for the
     * timeline's fold, .consumed for another), which gm_snapshot_free() releases. */
    void *(*open)(void *ctx, uint32_t index, struct gm_budget *shared,
                  struct gm_snapshot_packed *pk);
    /* The trace's next 'n' events. */
    void (*events)(void *state, const struct gm_snapshot_event *ev, size_t n);
    /* No more events come: the trace is to be read after the load instead. */
    void (*abandon)(void *state);
    /* Release the state (with its snapshot, unless taken before: snap_consumed_take()). */
    void (*release)(void *state);
    /* After a load with gm_snapshot_opts.consume_events, which kept no events: whether the
     * owner of 'state' (which followed device 'd''s trace whole) will read the stored trace
     * after all, so that the input is read again with its events.  NULL: it will. */
    bool (*needs_trace)(const void *state, const struct gm_snapshot *snap,
                        const struct gm_snapshot_device *d);
};

/* What gm_snapshot_opts.consumer points to. */
struct gm_snapshot_consumer {
    const struct snap_consumer_ops *ops;
    void *ctx;
};

/* Consumers a load may have: the timeline's fold and one the caller supplies. */
#define SNAP_MAX_CONSUMERS 2

/* The state a consumer of 'ops' left with device 'd''s trace, now the caller's (to
 * ops->release()), or NULL when none is there (none was made, or it was taken before). */
void *snap_consumed_take(const struct gm_snapshot_device *d, const struct snap_consumer_ops *ops);

/* The bytes 'snap' holds now: gm_snapshot.memory_bytes less those of the consumers' states
 * taken since the load (snap_consumed_take()), which their takers count instead. */
uint64_t snap_memory_held(const struct gm_snapshot *snap);
/* The state taken from 'd' held 'bytes' (counted in memory_bytes): its taker counts them. */
void snap_memory_moved(const struct gm_snapshot_device *d, uint64_t bytes);

/* ---- the timeline folded into loading (timeline.c) ----
 * A fold takes a trace's events as the loader commits them (a consumer, above), then the
 * snapshot state (snap_fold_finish(), once the snapshot is built); snap_timeline() then
 * answers from it without a walk of the trace.  A fold that cannot answer (abandoned,
 * memory, sums that may saturate) gives up quietly, and the timeline walks the trace
 * instead. */
struct snap_fold;
void snap_fold_free(struct snap_fold *f);
/* The fold as a consumer of the loaded events (past its limit it gives up); it keeps itself
 * in the packed trace (gm_snapshot_packed.fold). */
extern const struct snap_consumer_ops snap_fold_consumer;
void snap_fold_finish(struct snap_fold *f, const struct gm_snapshot *snap,
                      const struct gm_snapshot_device *d);
/* Whether the timeline of 'd' comes from its fold (no walk of the trace). */
bool snap_fold_ready(const struct gm_snapshot_device *d);

/* The fold's address map answers another consumer of the same trace, which then keeps no
 * map of its own: the one rule that pairs an event with the allocation its address holds
 * (an alloc makes its allocation the address's, displacing any before; a free_completed
 * ends the address's; a free_requested only reads it).  Allocations are named by their
 * ordinal, the nth alloc event of the trace counted from 0.  Ask for the answers in the
 * consumer's open(), where gm_snapshot_packed.fold is the fold of the same trace (the fold
 * is opened first and gets each batch first).  With 'on' false (the consumer gave up) it
 * stops answering and frees what it kept for that. */
#define SNAP_NO_ALLOC UINT32_MAX
void snap_fold_answer(struct snap_fold *f, bool on);
/* For the batch of events first..first+n-1 the fold took last: per event, for a
 * free_requested or free_completed the ordinal of the allocation pending at its address
 * before it (SNAP_NO_ALLOC: none), for any other event nothing (not to be read); borrowed
 * until the fold's next batch.  NULL when the fold gave up, did not answer or took
 * another batch last: the consumer then does its work after the load. */
const uint32_t *snap_fold_answers(const struct snap_fold *f, size_t first, size_t n);
/* Where the fold answered every event of the trace of 'd' (even if its timeline is then
 * walked): a bit per block of the device (counting the blocks of its segments in order, bit
 * j % 64 of word j / 64), set for a block allocated at snapshot time that no allocation
 * pending at the end of the trace explains (alive from the start), handed over with their
 * bytes in *bytes (the caller frees them, gm_free(), and counts those bytes from now on);
 * else NULL and 0, as for a second call.  Only the one taker of the device's consumed state
 * (snap_consumed_take()) may call this. */
uint64_t *snap_fold_take_from_start(const struct gm_snapshot_device *d, uint64_t *bytes);

/* ---- the totals' axis (lod.c) ---- */

struct gm_lod_totals;

/* gm_lod_totals_begin() whose kept x's, when the axis keeps them, are made in 'mem', an
 * array of 'mem_bytes' capacity from gm_big_realloc() (NULL with 0: a new one) that the
 * caller no longer reads: its pages, written before, are not faulted in again.  'mem' is
 * the totals' or freed, on failure too. */
enum gm_status snap_lod_totals_begin_in(struct gm_lod_totals *t,
                                        const struct gm_snapshot_device *dev, size_t n_timed,
                                        unsigned n, uint64_t allocated, uint64_t reserved,
                                        void *mem, size_t mem_bytes, struct gm_error *err);

/* ---- packed traces (events.c) ---- */

/* What an event is written against: the fields of the event before. */
struct ev_state {
    uint64_t addr;
    uint64_t size;
    int64_t time; /* the last time_us written */
    uint32_t stack;
    uint32_t extra;
    uint8_t flags;
};

/* The position and state before every GM_SNAPSHOT_CHECKPOINT-th event. */
struct ev_checkpoint {
    size_t pos; /* byte position of the event */
    struct ev_state st;
};

/* ---- the events a load that keeps none keeps aside (side.c) ----
 * A load with gm_snapshot_opts.consume_events keeps of each device trace only the events that
 * readers after the load ask for one by one: the first and the last (the axis of the series,
 * the report's) and the out-of-memory events (fragmentation at each, the first oom).  The
 * loader gathers them as it commits each batch (snap_side_add()), the one place they are
 * chosen; gm_snapshot_event_kept() reads them. */
struct snap_side_event {
    size_t k; /* its index in the trace */
    struct gm_snapshot_event e;
};
struct snap_side {
    struct snap_side_event *kept; /* ascending k: the first, the ooms, the last (once each) */
    size_t n_kept, cap_kept;
    size_t n_events; /* events seen */
    struct gm_snapshot_event last;
    bool broken; /* a batch was written out before its end, more than
                  * SNAP_SIDE_MAX events to keep, or memory ran out: the trace is
                  * kept instead */
    /* what kept[] holds, drawn on the load's budget of its consumers (.shared) */
    struct gm_budget budget;
};
/* The most events a trace keeps aside (a file of more out-of-memory events keeps its trace). */
#define SNAP_SIDE_MAX 4096
/* Batch ev[0..n) of the trace, committed after side->n_events earlier events; 'ooms': it holds
 * out-of-memory events (the packer counted them), else no event of it is looked at but the
 * first of the trace and the last. */
bool snap_side_add(struct snap_side *side, const struct gm_snapshot_event *ev, size_t n, bool ooms);
/* The records of 'side' (all its events seen) into 'arena' as pk->side; false when out of
 * memory. */
bool snap_side_finish(struct snap_side *side, struct gm_arena *arena,
                      struct gm_snapshot_packed *pk);
void snap_side_release(struct snap_side *side);
/* The first event of action 'a' that 'd' keeps aside (its index in *k); false when none is. */
bool snap_side_first(const struct gm_snapshot_device *d, uint8_t a, size_t *k,
                     struct gm_snapshot_event *out);

struct gm_snapshot_packed {
    uint8_t *bytes;
    size_t n_bytes;
    struct ev_checkpoint *cps; /* n_events / GM_SNAPSHOT_CHECKPOINT rounded up */
    size_t n_cps;
    size_t n_events;
    struct snap_fold *fold; /* the timeline folded while loading (timeline.c), or NULL */
    /* what the caller's consumer kept of this trace (snap_consumed_take()), or NULL */
    void *consumed;
    const struct snap_consumer_ops *consumed_ops;
    uint64_t moved; /* bytes of the consumed state, once taken (snap_memory_moved()) */
    /* the events kept aside when the load kept no bytes (events consumed), or NULL; in the
     * snapshot's arena */
    const struct snap_side_event *side;
    size_t n_side;
};

/* Whether any trace entry of 'snap' has a user_metadata or a forward_frames worth showing beside
 * its stack (the groups alive at a peak read them from the events). */
static inline bool snap_has_event_notes(const struct gm_snapshot *snap)
{
    for (size_t i = 0; i < snap->n_extras; i++)
        if ((snap->extras[i].user_metadata && *snap->extras[i].user_metadata) ||
            snap->extras[i].forward_stack)
            return true;
    return false;
}

/* Whether the events of 'd' are there to read (a trace with none counts as read): false for
 * a loaded trace whose events were consumed or dropped. */
static inline bool snap_events_stored(const struct gm_snapshot_device *d)
{
    return !d->n_events || d->events || (d->packed && d->packed->bytes);
}

/* Packs the events of one trace as they are made (a growing gm_big array). */
struct ev_writer {
    struct gm_snapshot_packed pk;
    bool count_only; /* keep no bytes: count the events only */
    size_t cap_bytes, cap_cps;
    struct ev_state st;
    uint64_t n_actions[GM_ACTION_COUNT];
};

/* Where a writer stood (snap_ev_writer_mark()), to drop what was written after it. */
struct ev_mark {
    size_t n_bytes, n_events, n_cps;
    struct ev_state st;
    uint64_t n_actions[GM_ACTION_COUNT];
};

/* What later checks need from a trace, summed while its events are written (no extra pass
 * over the trace). */
struct ev_sums {
    int64_t t_min, t_max; /* over the events with a time */
    uint64_t size_sum;    /* sizes of all the events, saturating */
    bool has_time;
};

/* ev[0..n) added to *s: the times of the events with GM_EVENT_HAS_TIME widen [t_min, t_max],
 * every size adds to size_sum (snap_sat_add()).  The one place of the rule, always inline and
 * its sums in locals: the packer calls it per batch, snap_ev_sums_add() per event. */
static GM_INLINE_ALWAYS void snap_ev_sums_add_n(struct ev_sums *s,
                                                const struct gm_snapshot_event *ev, size_t n)
{
    /* no time yet: lo > hi (any time makes lo <= hi) */
    int64_t lo = s->has_time ? s->t_min : INT64_MAX, hi = s->has_time ? s->t_max : INT64_MIN;
    uint64_t sum = s->size_sum;
    for (const struct gm_snapshot_event *e = ev, *end = ev + n; e < end; e++) {
        if (e->flags & GM_EVENT_HAS_TIME) {
            int64_t t = e->time_us;
            lo = t < lo ? t : lo;
            hi = t > hi ? t : hi;
        }
        sum = snap_sat_add(sum, e->size);
    }
    if (lo <= hi) {
        s->t_min = lo;
        s->t_max = hi;
        s->has_time = true;
    }
    s->size_sum = sum;
}

void snap_ev_writer_init(struct ev_writer *w);
void snap_ev_writer_release(struct ev_writer *w);
/* Append one event (time_us is kept only with GM_EVENT_HAS_TIME); false when out of
 * memory (nothing written). */
bool snap_ev_writer_append(struct ev_writer *w, const struct gm_snapshot_event *e);
/* Room for at least 'n' more events, made if need be: how many events the writer takes
 * now without growing (SIZE_MAX when it counts only), 0 when out of memory. */
size_t snap_ev_writer_reserve(struct ev_writer *w, size_t n);
/* Append ev[0..n), for which snap_ev_writer_reserve() made room, and add them to *sums: one
 * loop, no call per event. */
void snap_ev_writer_append_n(struct ev_writer *w, const struct gm_snapshot_event *ev, size_t n,
                             struct ev_sums *sums);
void snap_ev_writer_mark(const struct ev_writer *w, struct ev_mark *m);
void snap_ev_writer_rewind(struct ev_writer *w, const struct ev_mark *m);
/* Give back the unused capacity (keeps the larger arrays if that fails). */
void snap_ev_writer_shrink(struct ev_writer *w);
/* Bytes the writer holds (capacity); inline: the loader asks around every event. */
static inline size_t snap_ev_writer_capacity(const struct ev_writer *w)
{
    return w->cap_bytes + w->cap_cps * sizeof(struct ev_checkpoint);
}

#endif
