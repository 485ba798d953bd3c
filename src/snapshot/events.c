/* SPDX-License-Identifier: MIT */
/* events.c - device traces packed in a few bytes per event, and the cursors that read them
 * (snapshot.h, "reading a trace").
 *
 * A 40-byte struct gm_snapshot_event per trace entry made the events the largest part of a
 * loaded snapshot (half a gigabyte for a 1 GB file) and the kernel's zeroing of their fresh
 * pages a third of the time of reading it.  Consecutive events share most of their fields,
 * so each is written as its differences from the event before.  Layout of one event:
 *
 *   2 bytes h (little-endian):
 *            bits 0-3 the action (0-14; 15: a byte follows h with the action in bits 0-3
 *            and new flags in bits 4-7, else the flags are those of the event before);
 *            bits 4-7 the length of [addr] (0-8 bytes), bits 8-11 the length of [size]
 *            (0-8), bits 12-14 the length code of [time] (0-6 bytes, 7: 8 bytes),
 *            bit 15 a byte m follows [size]: bits 0-2 the length of [stack] (0-4),
 *            bits 3-5 the length of [extra] (0-4)
 *   [time]   time_us minus the last time written (nothing without GM_EVENT_HAS_TIME)
 *   [addr]   addr minus the addr of the event before (modulo 2^64)
 *   [size]   size XOR the size of the event before; [stack], [extra] likewise
 *
 * Each number takes the fewest whole bytes that hold it, little-endian, none when it is 0
 * (the field is the one of the event before); a difference takes the fewest that hold it
 * with its sign (read back with the sign bit of its top byte extended), so small negative
 * and positive differences alike are short.  The lengths in the header make both
 * directions straight-line code: the writer stores 8 bytes and moves on by the length, the
 * reader loads 8 bytes and masks them to it.  The 7-bit groups with a stop bit that this
 * replaced took a loop or a branch per byte: on the 30 MB synthetic file (364,566 events)
 * reading the events back took 78 instructions an event, now 52; the events take 6.5 bytes
 * each where they took 5.9.  Every GM_SNAPSHOT_CHECKPOINT events a checkpoint keeps the
 * byte position and the decoder's state, so that a cursor can start anywhere after
 * decoding at most that many events.  The bytes are written by the loader only (never from
 * the file directly), so the decoder trusts them. */
#include "snapshot/snapshot_int.h"

#include "base/big.h"
#include "base/hint.h"
#include "base/le.h"

#include <string.h>

#define ESCAPE      15u
#define H_MORE      (1u << 15)
#define MAX_EVENT   48 /* bytes reserved for one event (the assertion below) */
#define FIRST_BYTES ((size_t)1 << 16)

/* encode() writes at most 2 (header) + 1 (flags) + 3 numbers of 8 (time, address, size) + 1
 * (lengths) + 2 of 4 (stack, extra) = 36 bytes an event, but put_num() stores 8 bytes whatever
 * the length: the last store begins at 2 + 1 + 3 * 8 + 1 + 4 = 32, so the writer touches up to
 * 40 bytes past the event's start.  MAX_EVENT leaves room above that. */
_Static_assert(2 + 1 + 3 * 8 + 1 + 4 + 8 <= MAX_EVENT,
               "MAX_EVENT holds the last 8-byte store of the widest event (encode())");
_Static_assert(GM_ACTION_COUNT <= ESCAPE, "an action fits the header's 4 bits below ESCAPE");

static inline uint64_t zigzag(uint64_t d)
{
    return (d << 1) ^ (0 - (d >> 63));
}

/* The reader loads 8 bytes at a time, the writer stores 8: the writer keeps SLACK bytes
 * after the last event. */
#define SLACK 16

/* The bytes a number of n bytes keeps of a loaded word, n = 0..8. */
static const uint64_t LEN_MASK[9] = {0,
                                     UINT64_C(0xff),
                                     UINT64_C(0xffff),
                                     UINT64_C(0xffffff),
                                     UINT64_C(0xffffffff),
                                     UINT64_C(0xffffffffff),
                                     UINT64_C(0xffffffffffff),
                                     UINT64_C(0xffffffffffffff),
                                     UINT64_C(0xffffffffffffffff)};

/* The sign bit of a number of n bytes, n = 0..8. */
static const uint64_t LEN_SIGN[9] = {0,
                                     UINT64_C(0x80),
                                     UINT64_C(0x8000),
                                     UINT64_C(0x800000),
                                     UINT64_C(0x80000000),
                                     UINT64_C(0x8000000000),
                                     UINT64_C(0x800000000000),
                                     UINT64_C(0x80000000000000),
                                     UINT64_C(0x8000000000000000)};

/* The length of [time] by its code in h. */
static const uint8_t TIME_LEN[8] = {0, 1, 2, 3, 4, 5, 6, 8};

/* Bytes that hold v: 0 for 0. */
static inline unsigned byte_len(uint64_t v)
{
    /* 63 ^ clz is the index of the highest set bit (one instruction on x86) */
    return v ? ((unsigned)(63 ^ __builtin_clzll(v)) + 8) >> 3 : 0;
}

/* v's low bytes at p: the position after them (the 8 bytes stored are within the room
 * snap_ev_writer_reserve() made: MAX_EVENT counts every number at 8). */
static inline uint8_t *put_num(uint8_t *p, uint64_t v, unsigned len)
{
    gm_store64(p, v);
    return p + len;
}

/* The number of 'len' bytes at *pp, which moves past it. */
static inline uint64_t get_num(const uint8_t **pp, unsigned len)
{
    uint64_t v = gm_load64(*pp) & LEN_MASK[len];
    *pp += len;
    return v;
}

/* The same, a difference: its sign bit extended (the bytes are the difference's low ones). */
static inline uint64_t get_diff(const uint8_t **pp, unsigned len)
{
    uint64_t s = LEN_SIGN[len];
    return (get_num(pp, len) ^ s) - s;
}

/* ---- writing ---- */

void snap_ev_writer_init(struct ev_writer *w)
{
    memset(w, 0, sizeof(*w));
}

void snap_ev_writer_release(struct ev_writer *w)
{
    gm_big_free(w->pk.bytes, w->cap_bytes);
    gm_big_free(w->pk.cps, w->cap_cps * sizeof(struct ev_checkpoint));
    snap_fold_free(w->pk.fold);
    if (w->pk.consumed)
        w->pk.consumed_ops->release(w->pk.consumed);
    memset(w, 0, sizeof(*w));
}

void *snap_consumed_take(const struct gm_snapshot_device *d, const struct snap_consumer_ops *ops)
{
    /* the snapshot is shared read-only (several analyses of one snapshot, on threads): the
     * state goes to one taker alone */
    struct gm_snapshot_packed *pk = (struct gm_snapshot_packed *)(uintptr_t)d->packed;
    if (!pk || pk->consumed_ops != ops)
        return NULL;
    return __atomic_exchange_n(&pk->consumed, NULL, __ATOMIC_ACQ_REL);
}

void snap_memory_moved(const struct gm_snapshot_device *d, uint64_t bytes)
{
    struct gm_snapshot_packed *pk = (struct gm_snapshot_packed *)(uintptr_t)d->packed;
    /* one taker per state (above): no other writer */
    if (pk)
        __atomic_store_n(&pk->moved, bytes, __ATOMIC_RELAXED);
}

uint64_t snap_memory_held(const struct gm_snapshot *snap)
{
    uint64_t moved = 0;
    for (size_t i = 0; i < snap->n_devices; i++)
        if (snap->devices[i].packed)
            moved += __atomic_load_n(&snap->devices[i].packed->moved, __ATOMIC_RELAXED);
    return moved < snap->memory_bytes ? snap->memory_bytes - moved : 0;
}

/* Event 'e' written at p against state *s (updated): the position after it.  The caller
 * keeps the state and the position in locals, which stores through p cannot change. */
static GM_INLINE_ALWAYS uint8_t *encode(uint8_t *p, struct ev_state *s,
                                        const struct gm_snapshot_event *e, unsigned a)
{
    uint8_t *h = p;
    unsigned hb = a, lt = 0, la, ls;
    uint64_t dt = 0, da, xs;
    p += 2;
    if ((e->flags & 15u) != s->flags) {
        s->flags = e->flags & 15u;
        *p++ = (uint8_t)(a | (unsigned)s->flags << 4);
        hb = ESCAPE;
    }
    if (e->flags & GM_EVENT_HAS_TIME) {
        dt = (uint64_t)e->time_us - (uint64_t)s->time;
        s->time = e->time_us;
        lt = byte_len(zigzag(dt));
        if (lt > 6) {
            lt = 8;
            hb |= 7u << 12;
        } else {
            hb |= lt << 12;
        }
    }
    p = put_num(p, dt, lt);
    da = e->addr - s->addr;
    la = byte_len(zigzag(da));
    p = put_num(p, da, la);
    s->addr = e->addr;
    xs = e->size ^ s->size;
    ls = byte_len(xs);
    p = put_num(p, xs, ls);
    s->size = e->size;
    hb |= la << 4 | ls << 8;
    if (GM_UNLIKELY(e->stack != s->stack || e->extra != s->extra)) {
        uint32_t xk = e->stack ^ s->stack, xe = e->extra ^ s->extra;
        unsigned lk = byte_len(xk), le = byte_len(xe);
        hb |= H_MORE;
        *p++ = (uint8_t)(lk | le << 3);
        p = put_num(p, xk, lk);
        p = put_num(p, xe, le);
        s->stack = e->stack;
        s->extra = e->extra;
    }
    h[0] = (uint8_t)hb;
    h[1] = (uint8_t)(hb >> 8);
    return p;
}

size_t snap_ev_writer_reserve(struct ev_writer *w, size_t n)
{
    size_t room_bytes, room_cps;
    if (w->count_only)
        return SIZE_MAX;
    if (n > (SIZE_MAX - SLACK - w->pk.n_bytes) / MAX_EVENT ||
        n > SIZE_MAX - GM_SNAPSHOT_CHECKPOINT - w->pk.n_events)
        return 0;
    if (w->cap_bytes - w->pk.n_bytes < n * MAX_EVENT + SLACK) {
        void *b = w->pk.bytes;
        size_t cap = w->cap_bytes;
        if (!gm_big_grow(&b, &cap, w->pk.n_bytes + n * MAX_EVENT + SLACK, 1, FIRST_BYTES))
            return 0;
        w->pk.bytes = b;
        w->cap_bytes = cap;
    }
    /* a checkpoint before every GM_SNAPSHOT_CHECKPOINT-th event, so one for each started
     * group of GM_SNAPSHOT_CHECKPOINT among the n_events + n */
    if (w->cap_cps * GM_SNAPSHOT_CHECKPOINT < w->pk.n_events + n) {
        void *c = w->pk.cps;
        size_t cap = w->cap_cps;
        if (!gm_big_grow(&c, &cap,
                         (w->pk.n_events + n + GM_SNAPSHOT_CHECKPOINT - 1) / GM_SNAPSHOT_CHECKPOINT,
                         sizeof(struct ev_checkpoint), 64))
            return 0;
        w->pk.cps = c;
        w->cap_cps = cap;
    }
    room_bytes = (w->cap_bytes - w->pk.n_bytes - SLACK) / MAX_EVENT;
    room_cps = w->cap_cps * GM_SNAPSHOT_CHECKPOINT - w->pk.n_events;
    return room_bytes < room_cps ? room_bytes : room_cps;
}

bool snap_ev_writer_append(struct ev_writer *w, const struct gm_snapshot_event *e)
{
    struct ev_sums unused = {0, 0, 0, false};
    if (!snap_ev_writer_reserve(w, 1))
        return false;
    snap_ev_writer_append_n(w, e, 1, &unused);
    return true;
}

void snap_ev_writer_append_n(struct ev_writer *w, const struct gm_snapshot_event *ev, size_t n,
                             struct ev_sums *sums)
{
    if (w->count_only) {
        for (size_t i = 0; i < n; i++)
            w->n_actions[ev[i].action < GM_ACTION_COUNT ? ev[i].action : GM_ACTION_OTHER]++;
        snap_ev_sums_add_n(sums, ev, n);
        w->pk.n_events += n;
        return;
    }
    /* the sums in a loop of their own: with the packing below, that costs less (the
     * encoder keeps its state in registers) */
    snap_ev_sums_add_n(sums, ev, n);
    {
        struct ev_state st = w->st;
        uint8_t *p = w->pk.bytes + w->pk.n_bytes;
        size_t k = w->pk.n_events, i = 0;
        while (i < n) {
            /* up to the next checkpoint's event: no test per event */
            size_t left = GM_SNAPSHOT_CHECKPOINT - (k & (GM_SNAPSHOT_CHECKPOINT - 1));
            size_t stop = n - i < left ? n : i + left;
            if (left == GM_SNAPSHOT_CHECKPOINT) {
                struct ev_checkpoint *cp = &w->pk.cps[w->pk.n_cps++];
                cp->pos = (size_t)(p - w->pk.bytes);
                cp->st = st;
            }
            k += stop - i;
            for (; i < stop; i++) {
                /* the loader makes no action past GM_ACTION_OTHER; one clamp serves the
                 * count and the 4 bits of the header (GM_ACTION_COUNT <= ESCAPE) */
                unsigned a = ev[i].action < GM_ACTION_COUNT ? ev[i].action : GM_ACTION_OTHER;
                p = encode(p, &st, &ev[i], a);
                w->n_actions[a]++;
            }
        }
        w->st = st;
        w->pk.n_bytes = (size_t)(p - w->pk.bytes);
        w->pk.n_events = k;
    }
}

void snap_ev_writer_mark(const struct ev_writer *w, struct ev_mark *m)
{
    m->n_bytes = w->pk.n_bytes;
    m->n_events = w->pk.n_events;
    m->n_cps = w->pk.n_cps;
    m->st = w->st;
    memcpy(m->n_actions, w->n_actions, sizeof(m->n_actions));
}

void snap_ev_writer_rewind(struct ev_writer *w, const struct ev_mark *m)
{
    w->pk.n_bytes = m->n_bytes;
    w->pk.n_events = m->n_events;
    w->pk.n_cps = m->n_cps;
    w->st = m->st;
    memcpy(w->n_actions, m->n_actions, sizeof(w->n_actions));
}

void snap_ev_writer_shrink(struct ev_writer *w)
{
    if (w->pk.bytes && w->pk.n_bytes + SLACK < w->cap_bytes) {
        void *b = gm_big_realloc(w->pk.bytes, w->cap_bytes, w->pk.n_bytes + SLACK);
        if (b) {
            w->pk.bytes = b;
            w->cap_bytes = w->pk.n_bytes + SLACK;
        }
    }
    if (w->pk.bytes) /* what the decoder reads past the end is defined */
        memset(w->pk.bytes + w->pk.n_bytes, 0, SLACK);
    if (w->pk.n_cps < w->cap_cps) {
        size_t n = w->pk.n_cps ? w->pk.n_cps : 1;
        void *c = gm_big_realloc(w->pk.cps, w->cap_cps * sizeof(struct ev_checkpoint),
                                 n * sizeof(struct ev_checkpoint));
        if (c) {
            w->pk.cps = c;
            w->cap_cps = n;
        }
    }
}

/* ---- reading ---- */

void gm_snapshot_cursor_init(struct gm_snapshot_cursor *c, const struct gm_snapshot_device *dev,
                             size_t first)
{
    const struct gm_snapshot_packed *pk = dev->packed;
    size_t n = dev->n_events;
    c->dev_ = dev;
    c->p = c->end = c->buf_;
    memset(&c->last_, 0, sizeof(c->last_));
    c->pos_ = 0;
    if (first > n)
        first = n;
    c->index = first - 1; /* wraps for 0: the next event handed out is 'first' */
    if (dev->events || (pk && first == 0)) {
        c->next_ = first;
        return;
    }
    if (!pk || !pk->bytes || first == n) { /* no bytes: the events were not kept */
        c->next_ = n;
        return;
    }
    {
        /* from the checkpoint at or before 'first', then skip the events before it */
        size_t cp = first / GM_SNAPSHOT_CHECKPOINT;
        const struct ev_checkpoint *k = &pk->cps[cp];
        c->pos_ = k->pos;
        c->next_ = cp * GM_SNAPSHOT_CHECKPOINT;
        c->last_.addr = k->st.addr;
        c->last_.size = k->st.size;
        c->last_.time_us = k->st.time;
        c->last_.stack = k->st.stack;
        c->last_.extra = k->st.extra;
        c->last_.flags = k->st.flags;
        while (c->next_ <= first && gm_snapshot_cursor_fill(c)) {
            size_t batch_first = c->next_ - (size_t)(c->end - c->p);
            if (first < c->next_) {
                c->p += first - batch_first;
                break;
            }
            c->p = c->end;
        }
    }
}

bool gm_snapshot_cursor_fill(struct gm_snapshot_cursor *c)
{
    const struct gm_snapshot_device *dev = c->dev_;
    const struct gm_snapshot_packed *pk = dev->packed;
    size_t n = dev->n_events, m;
    const uint8_t *in;
    uint64_t addr, size, time, tmask;
    uint32_t stack, extra;
    unsigned flags;
    struct gm_snapshot_event *o;

    if (c->next_ >= n)
        return false;
    if (dev->events) {
        c->p = dev->events + c->next_;
        c->end = dev->events + n;
        c->next_ = n;
        return true;
    }
    if (!pk || !pk->bytes)
        return false;
    m = n - c->next_ < GM_SNAPSHOT_CURSOR_BATCH ? n - c->next_ : GM_SNAPSHOT_CURSOR_BATCH;
    in = pk->bytes + c->pos_;
    addr = c->last_.addr;
    size = c->last_.size;
    time = (uint64_t)c->last_.time_us;
    stack = c->last_.stack;
    extra = c->last_.extra;
    flags = c->last_.flags;
    tmask = flags & GM_EVENT_HAS_TIME ? UINT64_MAX : 0; /* time_us is 0 without the flag */
    o = c->buf_;
    for (size_t i = 0; i < m; i++, o++) {
        unsigned h = gm_load16(in), a = h & 15u;
        in += 2;
        if (GM_UNLIKELY(a == ESCAPE)) {
            unsigned x = *in++;
            a = x & 15u;
            flags = x >> 4;
            tmask = flags & GM_EVENT_HAS_TIME ? UINT64_MAX : 0;
        }
        o->action = (uint8_t)a;
        o->flags = (uint8_t)flags;
        time += get_diff(&in, TIME_LEN[(h >> 12) & 7u]);
        o->time_us = (int64_t)(time & tmask);
        addr += get_diff(&in, (h >> 4) & 15u);
        size ^= get_num(&in, (h >> 8) & 15u);
        if (GM_UNLIKELY(h & H_MORE)) {
            unsigned x = *in++;
            stack ^= (uint32_t)get_num(&in, x & 7u);
            extra ^= (uint32_t)get_num(&in, (x >> 3) & 7u);
        }
        o->addr = addr;
        o->size = size;
        o->stack = stack;
        o->extra = extra;
    }
    c->pos_ = (size_t)(in - pk->bytes);
    c->last_.addr = addr;
    c->last_.size = size;
    c->last_.time_us = (int64_t)time;
    c->last_.stack = stack;
    c->last_.extra = extra;
    c->last_.flags = (uint8_t)flags;
    c->next_ += m;
    c->p = c->buf_;
    c->end = c->buf_ + m;
    return true;
}

size_t gm_snapshot_events_read(const struct gm_snapshot_device *dev, size_t first,
                               struct gm_snapshot_event *out, size_t n)
{
    struct gm_snapshot_cursor c;
    size_t done = 0;
    if (first >= dev->n_events)
        return 0;
    if (n > dev->n_events - first)
        n = dev->n_events - first;
    gm_snapshot_cursor_init(&c, dev, first);
    while (done < n) {
        size_t k;
        if (c.p == c.end && !gm_snapshot_cursor_fill(&c))
            break;
        k = (size_t)(c.end - c.p);
        if (k > n - done)
            k = n - done;
        memcpy(out + done, c.p, k * sizeof(*out));
        c.p += k;
        done += k;
    }
    return done;
}

bool gm_snapshot_event_at(const struct gm_snapshot_device *dev, size_t k,
                          struct gm_snapshot_event *out)
{
    return gm_snapshot_events_read(dev, k, out, 1) == 1;
}

size_t gm_snapshot_packed_bytes(const struct gm_snapshot_device *dev)
{
    return dev->packed ? dev->packed->n_bytes + dev->packed->n_cps * sizeof(struct ev_checkpoint)
                       : 0;
}
