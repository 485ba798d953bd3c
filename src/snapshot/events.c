/* SPDX-License-Identifier: MIT */
/* events.c - device traces packed in a few bytes per event, and the cursors that read them
 * (snapshot.h, "reading a trace").
 *
 * A 40-byte struct gm_snapshot_event per trace entry made the events the largest part of a
 * loaded snapshot (half a gigabyte for a 1 GB file) and the kernel's zeroing of their fresh
 * pages a third of the time of reading it.  Consecutive events share most of their fields,
 * so each is written as its differences from the event before.  Layout of one event:
 *
 *   byte  h: bits 0-3 the action (0-14; 15: a byte follows with the action in bits 0-3 and
 *            new flags in bits 4-7, else the flags are those of the event before);
 *            bit 4 addr follows, bit 5 size follows, bit 6 stack follows, bit 7 extra
 *            follows (a field that does not follow is the one of the event before)
 *   [time]   when flags has GM_EVENT_HAS_TIME: time_us minus the last time written
 *   [addr]   addr minus the addr of the event before (modulo 2^64)
 *   [size]   size; [stack], [extra]: the values
 *
 * Differences are zigzag-coded (small negative and positive values alike small), all
 * numbers are LEB128 varints (7 bits a byte).  A training trace takes about 9 bytes an
 * event.  Every GM_SNAPSHOT_CHECKPOINT events a checkpoint keeps the byte position and the
 * decoder's state, so that a cursor can start anywhere after decoding at most that many
 * events.  The bytes are written by the loader only (never from the file directly), so
 * the decoder trusts them. */
#include "snapshot/snapshot_int.h"

#include "base/big.h"
#include "base/hint.h"

#include <string.h>

#define ESCAPE      15u
#define H_ADDR      (1u << 4)
#define H_SIZE      (1u << 5)
#define H_STACK     (1u << 6)
#define H_EXTRA     (1u << 7)
#define MAX_EVENT   48 /* bytes one event can take: 2 + 4 varints of <= 10 + 2 of <= 5 */
#define FIRST_BYTES ((size_t)1 << 16)

static inline uint64_t zigzag(uint64_t d)
{
    return (d << 1) ^ (0 - (d >> 63));
}

static inline uint64_t unzigzag(uint64_t z)
{
    return (z >> 1) ^ (0 - (z & 1));
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* The decoder reads 8 bytes at a time: the writer keeps SLACK bytes after the last event. */
#define SLACK 16

static inline uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static uint64_t get_varint_slow(const uint8_t **pp)
{
    const uint8_t *p = *pp;
    uint64_t v = *p++, b;
    unsigned sh = 7;
    if (v < 0x80) {
        *pp = p;
        return v;
    }
    v &= 0x7f;
    do {
        b = *p++;
        v |= (b & 0x7f) << sh;
        sh += 7;
    } while (b >= 0x80);
    *pp = p;
    return v;
}

/* A varint: one or two bytes (most sizes and deltas) tested first; up to eight (address
 * deltas take four or five) read from one word without a loop: the stop bit of the last
 * byte is the lowest clear high bit, the bits below it are the number's bytes, and their
 * 7-bit groups are packed by three shift-and-mask steps, lanes of two, four, then eight
 * bytes. */
static inline uint64_t get_varint(const uint8_t **pp)
{
    const uint8_t *p = *pp;
    uint64_t w = load64(p), stop, x;
    if (!(w & 0x80)) {
        *pp = p + 1;
        return w & 0x7f;
    }
    if (!(w & 0x8000)) {
        *pp = p + 2;
        return (w & 0x7f) | ((w >> 1) & 0x3f80);
    }
    stop = ~w & UINT64_C(0x8080808080808080);
    if (!stop)
        return get_varint_slow(pp); /* nine or ten bytes */
    *pp = p + ((unsigned)__builtin_ctzll(stop) >> 3) + 1;
    x = w & (stop ^ (stop - 1)) & UINT64_C(0x7f7f7f7f7f7f7f7f);
    x = (x & UINT64_C(0x007f007f007f007f)) | ((x >> 1) & UINT64_C(0x3f803f803f803f80));
    x = (x & UINT64_C(0x00003fff00003fff)) | ((x >> 2) & UINT64_C(0x0fffc0000fffc000));
    return (x & UINT64_C(0x000000000fffffff)) | ((x >> 4) & UINT64_C(0x00fffffff0000000));
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
    uint8_t *h = p++;
    unsigned hb = a;
    if ((e->flags & 15u) != s->flags) {
        s->flags = e->flags & 15u;
        *p++ = (uint8_t)(a | (unsigned)s->flags << 4);
        hb = ESCAPE;
    }
    if (e->flags & GM_EVENT_HAS_TIME) {
        p = put_varint(p, zigzag((uint64_t)e->time_us - (uint64_t)s->time));
        s->time = e->time_us;
    }
    if (e->addr != s->addr) {
        hb |= H_ADDR;
        p = put_varint(p, zigzag(e->addr - s->addr));
        s->addr = e->addr;
    }
    if (e->size != s->size) {
        hb |= H_SIZE;
        p = put_varint(p, e->size);
        s->size = e->size;
    }
    if (e->stack != s->stack) {
        hb |= H_STACK;
        p = put_varint(p, e->stack);
        s->stack = e->stack;
    }
    if (e->extra != s->extra) {
        hb |= H_EXTRA;
        p = put_varint(p, e->extra);
        s->extra = e->extra;
    }
    *h = (uint8_t)hb;
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
        /* the sums in the same loop (with the packing below, a loop of their own costs less:
         * the encoder keeps its state in registers) */
        for (size_t i = 0; i < n; i++) {
            w->n_actions[ev[i].action < GM_ACTION_COUNT ? ev[i].action : GM_ACTION_OTHER]++;
            snap_ev_sums_add_one(sums, &ev[i]);
        }
        w->pk.n_events += n;
        return;
    }
    for (size_t i = 0; i < n; i++)
        snap_ev_sums_add_one(sums, &ev[i]);
    {
        struct ev_state st = w->st;
        uint8_t *p = w->pk.bytes + w->pk.n_bytes;
        size_t k = w->pk.n_events;
        for (size_t i = 0; i < n; i++, k++) {
            /* the loader makes no action above ESCAPE */
            unsigned a = ev[i].action < ESCAPE ? ev[i].action : GM_ACTION_OTHER;
            if ((k & (GM_SNAPSHOT_CHECKPOINT - 1)) == 0) {
                struct ev_checkpoint *cp = &w->pk.cps[w->pk.n_cps++];
                cp->pos = (size_t)(p - w->pk.bytes);
                cp->st = st;
            }
            p = encode(p, &st, &ev[i], a);
            w->n_actions[a < GM_ACTION_COUNT ? a : GM_ACTION_OTHER]++;
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
    uint64_t addr, size, time;
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
    o = c->buf_;
    for (size_t i = 0; i < m; i++, o++) {
        unsigned h = *in++, a = h & 15u;
        if (a == ESCAPE) {
            unsigned x = *in++;
            a = x & 15u;
            flags = x >> 4;
        }
        o->action = (uint8_t)a;
        o->flags = (uint8_t)flags;
        if (flags & GM_EVENT_HAS_TIME) {
            time += unzigzag(get_varint(&in));
            o->time_us = (int64_t)time;
        } else {
            o->time_us = 0;
        }
        if (h & H_ADDR)
            addr += unzigzag(get_varint(&in));
        if (h & H_SIZE)
            size = get_varint(&in);
        if (h & H_STACK)
            stack = (uint32_t)get_varint(&in);
        if (h & H_EXTRA)
            extra = (uint32_t)get_varint(&in);
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
