/* SPDX-License-Identifier: MIT */
/* trace.c - trace entries (device_traces[i][k]) into packed events (load_int.h).
 *
 * The trace lists are streamed while the pickle is parsed (pickle.h, "streaming records"):
 * each entry arrives as a record, becomes an event of its device's packed trace
 * (events.c), and is forgotten, so that a trace of millions of entries never exists as a
 * graph.  An entry is read by one of two readers with the same result: read_event() takes
 * any entry field by field; flat_event() takes, in straight-line code, the usual one: keys
 * those of the record before in the writers' order, values of the usual types (the known
 * action names, small non-negative ints, the compile_context string of the entry before,
 * frames a list or a name given to one).  Events of a batch stay provisional until the
 * batch ends (pickle.h: a batch may be dropped and delivered again). */
#include "snapshot/load_int.h"

#include "base/hint.h"

#include <string.h>

void snap_ev_sums_add(struct ev_sums *s, const struct gm_snapshot_event *e)
{
    snap_ev_sums_add_n(s, e, 1);
}

void snap_ev_sums_merge(struct ev_sums *s, const struct ev_sums *o)
{
    if (o->has_time) {
        if (!s->has_time || o->t_min < s->t_min)
            s->t_min = o->t_min;
        if (!s->has_time || o->t_max > s->t_max)
            s->t_max = o->t_max;
        s->has_time = true;
    }
    s->size_sum = snap_sat_add(s->size_sum, o->size_sum);
}

/* What trace 'w' grew by counted against the memory cap the events share with the
 * snapshot's arena, its capacity having been 'before': false past the cap. */
static bool charge_growth(struct builder *b, const struct ev_writer *w, size_t before)
{
    size_t grew = snap_ev_writer_capacity(w) - before;
    if (!grew)
        return true; /* the common case: nothing more held */
    b->ev_bytes += grew;
    *b->held += grew;
    if (b->arena->cap && *b->held > b->arena->cap) {
        b->arena->limit_hit = true;
        return false;
    }
    return true;
}

/* Add event 'e' to trace 'w', within the memory cap. */
static bool append_event(struct builder *b, struct ev_writer *w, const struct gm_snapshot_event *e)
{
    size_t before = snap_ev_writer_capacity(w);
    return snap_ev_writer_append(w, e) && charge_growth(b, w, before);
}

/* ---- the general reader ---- */

/* What read_event() gathers over the fields of one trace entry. */
struct entry_state {
    struct gm_snapshot_event_extra x;
    const struct pk_record *rec; /* the record it comes in, to name its frames list */
    size_t ei;
    uint64_t device_free;
    bool has_extra, has_action, has_device_free;
};

/* A trace entry's frames list: its stack, and its name in the parser when the parser may
 * recycle it (its mark then goes with the node, pk_mark()). */
static enum gm_status read_frames(struct builder *b, const struct pk_record *r, pk_val val,
                                  uint32_t *stack)
{
    bool nameable = r && pk_record_can_name(r, val);
    enum gm_status st = snap_intern_stack(b, val, stack);
    if (st == GM_OK && nameable)
        (void)pk_record_name(r, val, *stack);
    return st;
}

/* One field of a trace entry.  Always inlined: read_event() calls it with a constant word
 * for the common key layouts, which folds the switch away. */
static GM_INLINE_ALWAYS enum gm_status read_field(struct builder *b, enum word w, pk_val val,
                                                  struct gm_snapshot_event *e,
                                                  struct entry_state *s)
{
    enum gm_status st = GM_OK;
    switch (w) {
    case W_ACTION: {
        enum word a = snap_word_of(b, val);
        s->has_action = true;
        if (a >= W_A_ALLOC && a <= W_A_OOM) {
            e->action = (uint8_t)(GM_ACTION_ALLOC + (a - W_A_ALLOC));
        } else {
            e->action = GM_ACTION_OTHER;
            if (pk_is_str(val))
                st = snap_intern_str(b, val, "action", &s->x.action_name);
            s->has_extra = true;
        }
        break;
    }
    case W_ADDR:
        st = get_u64(b, "trace entry", s->ei, w, val, &e->addr);
        e->flags |= GM_EVENT_HAS_ADDR;
        break;
    case W_DEVICE_FREE:
        st = get_size(b, "trace entry", s->ei, w, val, &s->device_free);
        s->has_device_free = true;
        break;
    case W_SIZE:
        st = get_size(b, "trace entry", s->ei, w, val, &e->size);
        break;
    case W_STREAM:
        st = get_u64(b, "trace entry", s->ei, w, val, &s->x.stream);
        s->has_extra |= s->x.stream != 0;
        break;
    case W_TIME_US:
        st = get_i64(b, "trace entry", s->ei, w, val, &e->time_us);
        e->flags |= GM_EVENT_HAS_TIME;
        b->any_time = true;
        break;
    case W_FRAMES:
        st = read_frames(b, s->rec, val, &e->stack);
        e->flags |= GM_EVENT_HAS_FRAMES;
        break;
    case W_COMPILE_CONTEXT:
        b->any_compile_ctx = true;
        if (pk_is_str(val)) {
            st = snap_intern_str(b, val, "compile_context", &s->x.compile_context);
            s->has_extra = true;
        }
        break;
    case W_USER_METADATA:
        b->any_user_meta = true;
        if (pk_is_str(val)) {
            st = snap_intern_str(b, val, "user_metadata", &s->x.user_metadata);
            s->has_extra = true;
        }
        break;
    case W_POOL_ID:
        b->any_g9 = true;
        st = snap_get_pair(b, "trace entry", s->ei, w, val, s->x.pool_id);
        e->flags |= GM_EVENT_HAS_POOL_ID;
        s->has_extra = true;
        break;
    case W_FORWARD_FRAMES:
        b->any_g9 = true;
        st = snap_intern_forward_stack(b, val, &s->x.forward_stack);
        s->has_extra |= s->x.forward_stack != 0;
        break;
    case W_INTERNAL_METADATA:
        b->any_g9 = true;
        if (pk_is_str(val)) {
            st = snap_intern_str(b, val, "internal_metadata", &s->x.internal_metadata);
            s->has_extra = true;
        }
        break;
    default:
        break;
    }
    return st;
}

/* The key order of every known writer's trace entries; an entry whose keys are a
 * subsequence of it (each at most once) is read field by field in straight-line code. */
static const uint8_t canon_words[] = {
    W_ACTION, W_ADDR, W_SIZE, W_STREAM, W_TIME_US, W_COMPILE_CONTEXT, W_USER_METADATA, W_FRAMES};
#define N_CANON (sizeof(canon_words) / sizeof(canon_words[0]))

/* The positions (shape_pos) of the keys PyTorch's writer gives every trace entry: all the
 * canonical ones but user_metadata.  flat_event() reads them at constant positions. */
static const int8_t usual_pos[N_CANON] = {0, 1, 2, 3, 4, 5, -1, 6};

/* Fills tr->shape_pos from tr->shape_words (see struct trace_reader). */
static void shape_canon(struct trace_reader *tr)
{
    size_t c = 0;
    tr->shape_canon = true;
    tr->shape_usual = false;
    for (size_t j = 0; j < N_CANON; j++)
        tr->shape_pos[j] = -1;
    for (uint32_t i = 0; i < tr->shape_n; i++) {
        while (c < N_CANON && canon_words[c] != tr->shape_words[i])
            c++;
        if (c == N_CANON) {
            tr->shape_canon = false;
            return;
        }
        tr->shape_pos[c++] = (int8_t)i;
    }
    tr->shape_usual = memcmp(tr->shape_pos, usual_pos, sizeof(usual_pos)) == 0;
}

static enum gm_status read_event(struct builder *b, const struct pk_record *r, size_t ei,
                                 struct gm_snapshot_event *e, size_t *n_unknown)
{
    struct trace_reader *tr = &b->tr;
    const pk_val *it = r->pairs;
    struct entry_state s;
    const uint8_t *shape;
    enum gm_status st = GM_OK;

    tr->flat_shape = false;
    if (!r->is_dict)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: trace entry %zu is a %s, expected a dict", ei,
                       pk_type_name(r->item));
    memset(e, 0, sizeof(*e));
    memset(&s, 0, sizeof(s));
    s.ei = ei;
    s.rec = r;
    {
        bool same = r->n == tr->shape_n;
        for (uint32_t i = 0; same && i < r->n; i++)
            same = it[2 * i] == tr->shape_keys[i];
        if (!same && r->n <= 16) {
            for (uint32_t i = 0; i < r->n; i++) {
                tr->shape_keys[i] = it[2 * i];
                tr->shape_words[i] = (uint8_t)snap_word_of(b, it[2 * i]);
            }
            tr->shape_n = r->n;
            shape_canon(tr);
            same = true;
        }
        if (!same)
            tr->shape_n = 0;
        shape = same ? tr->shape_words : NULL;
    }
    if (shape && tr->shape_canon) {
#define CANON_FIELD(j)                                                                             \
    if (st == GM_OK && tr->shape_pos[j] >= 0)                                                      \
        st = read_field(b, (enum word)canon_words[j], it[2 * (uint32_t)tr->shape_pos[j] + 1], e,   \
                        &s);
        CANON_FIELD(0)
        CANON_FIELD(1)
        CANON_FIELD(2)
        CANON_FIELD(3)
        CANON_FIELD(4)
        CANON_FIELD(5)
        CANON_FIELD(6)
        CANON_FIELD(7)
#undef CANON_FIELD
    } else {
        for (uint32_t i = 0; i < r->n && st == GM_OK; i++) {
            pk_val k = it[2 * i];
            st = read_field(b, shape ? (enum word)shape[i] : snap_word_of(b, k), it[2 * i + 1], e,
                            &s);
        }
    }
    if (st != GM_OK)
        return st;
    if (!s.has_action) {
        e->action = GM_ACTION_OTHER;
        s.has_extra = true;
    }
    if (e->action == GM_ACTION_OTHER)
        (*n_unknown)++;
    if (e->action == GM_ACTION_OOM && s.has_device_free)
        e->addr = s.device_free;
    if (s.has_extra)
        return snap_intern_extra(b, &s.x, &e->extra);
    return GM_OK;
}

/* ---- the straight-line reader ---- */

/* flat_event() for an entry whose keys are those of the entry before (the parser says
 * so) in the canonical order, at positions 'pos' (tr->shape_pos), with values of the usual
 * types.  It fills *e exactly as read_event() would and returns true; false (having changed
 * nothing but *e and caches) for anything else, which read_event() then reads.  Always
 * inlined: flat_event() calls it with the usual positions as constants, which folds the
 * tests of which keys there are away.  The generation evidence of the keys (any_time,
 * any_compile_ctx) is read_event()'s: it read the first entry with these keys. */
static GM_INLINE_ALWAYS bool flat_event_at(struct builder *b, const struct pk_record *r,
                                           struct gm_snapshot_event *e, const int8_t *pos)
{
    struct trace_reader *tr = &b->tr;
    const pk_val *it = r->pairs;
    uint64_t stream = 0;
    const char *cc = NULL; /* compile_context */
    bool has_extra = false;
    enum word a;
    pk_val v;
    size_t ai;

    /* no action, or user_metadata: the general reader */
    if (pos[0] < 0 || pos[6] >= 0)
        return false;
    memset(e, 0, sizeof(*e)); /* padding too, as read_event() leaves it */
    /* the action: a few values (alloc, free_requested, free_completed, ...) in turn, each
     * remembered by its value */
    v = it[2 * pos[0] + 1];
    ai = (size_t)((v * 0x9e3779b97f4a7c15ULL) >> (64 - FLAT_ACT_BITS));
    if (GM_LIKELY(v == tr->flat_act_val[ai] && v)) {
        e->action = tr->flat_act[ai];
    } else {
        a = snap_word_of(b, v);
        if (a < W_A_ALLOC || a > W_A_OOM)
            return false;
        e->action = (uint8_t)(GM_ACTION_ALLOC + (a - W_A_ALLOC));
        tr->flat_act_val[ai] = v;
        tr->flat_act[ai] = e->action;
    }
    if (pos[1] >= 0) {
        if (!pk_small_u64(it[2 * pos[1] + 1], &e->addr))
            return false;
        e->flags |= GM_EVENT_HAS_ADDR;
    }
    if (pos[2] >= 0 && !pk_small_u64(it[2 * pos[2] + 1], &e->size))
        return false;
    if (pos[3] >= 0 && !pk_small_u64(it[2 * pos[3] + 1], &stream))
        return false;
    has_extra = stream != 0;
    if (pos[4] >= 0) {
        if (!pk_small_i64(it[2 * pos[4] + 1], &e->time_us))
            return false;
        e->flags |= GM_EVENT_HAS_TIME;
    }
    if (pos[5] >= 0) {
        const char *p;
        size_t n;
        v = it[2 * pos[5] + 1];
        if (GM_LIKELY(tr->flat_cc_word && pk_short_str_is_word(b->doc, v, tr->flat_cc_word))) {
            /* "N/A" again: the string of the entry before */
            cc = tr->flat_cc;
            has_extra = true;
        } else if (pk_str_view(b->doc, v, &p, &n)) {
            /* "N/A" on every entry, a new literal each time: the bytes of the last one (a
             * long string, shared through the memo, is known by its value instead: never
             * compared byte by byte on every entry) */
            if (tr->flat_cc && n == tr->flat_cc_n && n <= LONG_STR &&
                short_eq(p, tr->flat_cc_p, n)) {
                cc = tr->flat_cc;
            } else {
                if (snap_intern_str(b, v, "compile_context", &cc) != GM_OK)
                    return false;
                tr->flat_cc = cc;
                tr->flat_cc_p = cc; /* the interned copy has the same bytes */
                tr->flat_cc_n = n;
            }
            tr->flat_cc_word = pk_short_str_word(b->doc, v);
            has_extra = true;
        }
    }
    if (pos[7] >= 0) {
        const pk_val *items;
        uint32_t n;
        v = it[2 * pos[7] + 1];
        if (GM_LIKELY(pk_is_token(v) && pk_token_id(v) < b->in.n_stacks)) {
            e->stack = pk_token_id(v);
        } else if (pk_is_transient(v) && pk_list_items(v, &items, &n) && n) {
            /* a new frames list: most repeat one read before (snap_intern_stack()'s first cache) */
            if (!snap_stack_seen(b, items, n, &e->stack) &&
                snap_intern_stack(b, v, &e->stack) != GM_OK)
                return false;
            (void)pk_record_name(r, v, e->stack);
        } else if (pk_list_items(v, &items, &n)) {
            if (read_frames(b, r, v, &e->stack) != GM_OK)
                return false;
        } else {
            return false;
        }
        e->flags |= GM_EVENT_HAS_FRAMES;
    }
    if (has_extra) {
        /* the extra of the entry before, when stream and compile_context are its */
        if (GM_LIKELY(tr->flat_x_id && stream == tr->flat_x_stream && cc == tr->flat_x_cc)) {
            e->extra = tr->flat_x_id;
        } else {
            struct gm_snapshot_event_extra x;
            memset(&x, 0, sizeof(x));
            x.stream = stream;
            x.compile_context = cc;
            if (snap_intern_extra(b, &x, &e->extra) != GM_OK)
                return false;
            tr->flat_x_stream = stream;
            tr->flat_x_cc = cc;
            tr->flat_x_id = e->extra;
        }
    }
    return true;
}

static inline bool flat_event(struct builder *b, const struct pk_record *r,
                              struct gm_snapshot_event *e)
{
    if (b->tr.shape_usual)
        return flat_event_at(b, r, e, usual_pos);
    return flat_event_at(b, r, e, b->tr.shape_pos);
}

/* ---- the records of device_traces (pickle.h: struct pk_stream) ---- */

/* The events of a batch wait in the stream's buffer (struct stream) until the batch is
 * committed, then go to the packed trace, the sums and the trace's consumers (the
 * timeline's fold among them; snapshot_int.h) in one loop each, the consumers' through
 * pipe.c (inline, or on a worker thread that takes the buffer with it).  A writer's batches hold
 * 1000 entries; a longer one (a list of shared memo references, say) is written out
 * provisionally every FOLD_BATCH_MAX events, and the consumers are abandoned: their work
 * is done from the stored trace after the load.  The consumers of all traces together may
 * hold at most this share of the snapshot's memory limit (a file can describe huge numbers
 * of allocations cheaply), beside what the load holds; past it a consumer gives up and its
 * work is done from the stored trace, within the limit, as without it. */
#define FOLD_BATCH_MAX 4096
#define FOLD_SHARE     8

void snap_trace_consumers_init(struct builder *b, const struct gm_snapshot_consumer *caller)
{
    b->n_consumers = 0;
    b->impl->consumers = gm_budget_make(b->arena->cap / FOLD_SHARE, 0);
    if (!b->drop_events || b->fold_only)
        b->consumers[b->n_consumers++] = (struct gm_snapshot_consumer){&snap_fold_consumer, NULL};
    if (caller && !b->drop_events)
        b->consumers[b->n_consumers++] = *caller;
}

static struct stream *stream_of(struct builder *b, uint32_t index)
{
    struct stream **sp = &b->tr.streams[index];
    if (!*sp && (*sp = gm_calloc(1, sizeof(**sp))) != NULL) {
        struct stream *str = *sp;
        snap_ev_writer_init(&str->w);
        /* consume_events: the consumers take the events, a few are kept aside (side.c) */
        str->w.count_only = b->drop_events || b->consume;
        str->side.budget.shared = &b->impl->consumers;
        snap_pipe_open(b, str, index);
    }
    return *sp;
}

/* The buffered events of the open batch into the packed trace (room made by on_record())
 * and the batch's sums. */
static void write_buffered(struct stream *str)
{
    snap_ev_writer_append_n(&str->w, str->prov_ev, str->prov, &str->prov_sums);
}

/* One trace entry of device_traces[index], kept provisionally until the batch ends. */
static enum gm_status on_record(void *ctx, uint32_t index, const struct pk_record *r,
                                struct gm_error *err)
{
    struct builder *b = ctx;
    struct stream *str = stream_of(b, index);
    struct gm_snapshot_event *e;
    size_t at;
    enum gm_status st;
    (void)err;
    if (!str)
        return snap_nomem(b);
    if (str->prov == FOLD_BATCH_MAX) {
        /* a long batch: written out, to be taken back if the batch is dropped */
        if (!str->flushed)
            snap_ev_writer_mark(&str->w, &str->mark);
        write_buffered(str);
        str->flushed += str->prov;
        str->prov = 0;
        snap_pipe_abandon(b, str); /* the trace is kept instead */
    }
    if (str->prov == str->cap_prov_ev &&
        !GM_VEC_RESERVE(str->prov_ev, str->cap_prov_ev, str->prov + 1, NULL))
        return snap_nomem(b);
    /* the packed trace has room for the buffered events and this one */
    at = str->w.pk.n_events + str->prov;
    if (at >= str->room_end) {
        size_t before = snap_ev_writer_capacity(&str->w);
        size_t room = snap_ev_writer_reserve(&str->w, str->prov + 1);
        if (!room || !charge_growth(b, &str->w, before))
            return snap_nomem(b);
        str->room_end = room == SIZE_MAX ? SIZE_MAX : str->w.pk.n_events + room;
    }
    e = &str->prov_ev[str->prov];
    if (GM_UNLIKELY(!b->tr.flat_shape || !r->same_keys || !flat_event(b, r, e))) {
        st = read_event(b, r, at, e, &str->prov_unknown);
        if (st != GM_OK) {
            b->err->offset = r->offset;
            return gm_error_prefix(b->err, "device %u", (unsigned)index);
        }
        /* the shape read_event() kept is this entry's: the next may take flat_event() */
        b->tr.flat_shape = b->tr.shape_canon && b->tr.shape_n == r->n && r->n;
    }
    str->prov++;
    return GM_OK;
}

static void on_batch_end(void *ctx, uint32_t index, bool commit)
{
    struct builder *b = ctx;
    struct stream *str = b->tr.streams[index];
    if (!str)
        return; /* no record got this far */
    if (commit) {
        uint64_t ooms = str->w.n_actions[GM_ACTION_OOM];
        write_buffered(str);
        snap_pipe_events(b, str, str->w.n_actions[GM_ACTION_OOM] != ooms);
        str->unknown += str->prov_unknown;
        snap_ev_sums_merge(&str->sums, &str->prov_sums);
    } else if (str->flushed) {
        snap_ev_writer_rewind(&str->w, &str->mark);
        /* room_end counted the events taken back at the widest an event can be; they took
         * less, so the bytes freed may not hold that many widest events: reserve again */
        str->room_end = 0;
    }
    str->prov = 0;
    str->flushed = 0;
    str->prov_unknown = 0;
    memset(&str->prov_sums, 0, sizeof(str->prov_sums));
}

/* A frames list is named by its stack, which its items alone decide (no other list is named). */
const struct pk_stream snap_trace_stream_ops = {"device_traces", MAX_DEVICES, on_record,
                                                on_batch_end,    NULL,        true};

void snap_trace_reader_release(struct trace_reader *tr)
{
    for (size_t i = 0; i < MAX_DEVICES; i++) {
        if (tr->streams[i]) {
            snap_ev_writer_release(&tr->streams[i]->w);
            gm_free(tr->streams[i]->prov_ev);
            snap_side_release(&tr->streams[i]->side);
            gm_free(tr->streams[i]);
            tr->streams[i] = NULL;
        }
    }
}

enum gm_status snap_read_trace(struct builder *b, int32_t i, pk_val v, struct ev_writer *w,
                               size_t *unknown, struct ev_sums *sums)
{
    const struct pk_node *l = snap_as_list(v);
    uint32_t index;
    enum gm_status st;
    if (!l)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: device_traces[%d] is a %s, expected a list", i, pk_type_name(v));
    if (pk_list_streamed(v, &index)) {
        struct stream *str = b->tr.streams[index < MAX_DEVICES ? index : 0];
        if (index != (uint32_t)i || (str && str->taken))
            return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                           "snapshot: device_traces[%d] is a trace list read for another device "
                           "(shared between devices?)",
                           i);
        if (!str) /* streamed, but no record came */
            return GM_OK;
        /* the snapshot owns the events now */
        *w = str->w;
        snap_ev_writer_init(&str->w);
        str->taken = true;
        /* no side records (out of memory, a long batch): the load reads the input again */
        if (b->consume && w->pk.n_events)
            (void)snap_side_finish(&str->side, b->arena, &w->pk);
        *unknown = str->unknown;
        *sums = str->sums;
        return GM_OK;
    }
    /* a list the parser built (a writer that wrote the trace some other way) */
    w->count_only = b->drop_events;
    for (uint32_t k = 0; k < l->len; k++) {
        struct gm_snapshot_event e;
        struct pk_record r;
        pk_record_of(b->doc, l->items[k], &r);
        if ((st = read_event(b, &r, k, &e, unknown)) != GM_OK)
            return gm_error_prefix(b->err, "device %d", i);
        if (!append_event(b, w, &e))
            return snap_nomem(b);
        snap_ev_sums_add(sums, &e);
    }
    return GM_OK;
}
