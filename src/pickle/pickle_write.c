/* SPDX-License-Identifier: MIT */
/* pickle_write.c - streaming pickle writer matching CPython's C pickler (see pickle_write.h).
 *
 * Output layout (protocol 4/5): PROTO n, then frames "FRAME u64-LE-len | opcodes", the last
 * one ending with STOP.  A frame is built in 'buf' with 9 bytes reserved for its header; it is
 * committed (header filled in, written out) at the start of a value once it holds at least
 * FRAME_TARGET bytes, and at the end.  A frame of fewer than 4 bytes gets no header, and a
 * str payload of FRAME_TARGET bytes or more is written outside any frame, as CPython does.
 * Protocols 2 and 3 have no frames and memoize with BINPUT / LONG_BINPUT. */
#include "gpumem/pickle_write.h"

#include "base/vec.h"
#include "gpumem/arena.h"

#include <string.h>

#define FRAME_TARGET (64u * 1024u)
#define FRAME_HEADER 9u
#define BATCH        1000u
#define MAX_DEPTH    64

enum kind { K_LIST, K_DICT, K_TUPLE };

struct level {
    enum kind kind;
    size_t n;        /* elements announced (dict: pairs) */
    size_t done;     /* values written (dict: keys and values) */
    size_t in_batch; /* items of the current batch (list and dict) */
};

struct gm_pickle_writer {
    FILE *f;
    int proto;
    unsigned char *buf; /* pending bytes: the current frame, header space first */
    size_t len;
    size_t cap;
    bool in_frame; /* buf starts with a reserved frame header */
    uint32_t n_memo;
    uint64_t written; /* bytes handed to f */
    struct level stack[MAX_DEPTH];
    int depth;
    bool nomem;
    bool misuse;
    bool io;
};

static void put(struct gm_pickle_writer *w, const void *p, size_t n)
{
    if (w->nomem)
        return;
    if (w->proto >= 4 && !w->in_frame && w->len == 0 && w->written >= 2) {
        /* the first byte after PROTO (or after a commit) opens a frame */
        memset(w->buf, 0, FRAME_HEADER);
        w->len = FRAME_HEADER;
        w->in_frame = true;
    }
    if (!GM_VEC_RESERVE(w->buf, w->cap, w->len + n, NULL)) {
        w->nomem = true;
        return;
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void put1(struct gm_pickle_writer *w, unsigned char op)
{
    put(w, &op, 1);
}

static void flush_raw(struct gm_pickle_writer *w, const void *p, size_t n)
{
    if (n && fwrite(p, 1, n, w->f) != n)
        w->io = true;
    w->written += n;
}

/* Write the pending bytes out, closing the frame if one is open. */
static void commit(struct gm_pickle_writer *w)
{
    if (w->nomem)
        return;
    if (w->in_frame) {
        size_t body = w->len - FRAME_HEADER;
        if (body >= 4) {
            uint64_t v = body;
            w->buf[0] = 0x95;
            for (int i = 0; i < 8; i++)
                w->buf[1 + i] = (unsigned char)(v >> (8 * i));
            flush_raw(w, w->buf, w->len);
        } else {
            flush_raw(w, w->buf + FRAME_HEADER, body);
        }
        w->in_frame = false;
    } else {
        flush_raw(w, w->buf, w->len);
    }
    w->len = 0;
}

static void memoize(struct gm_pickle_writer *w)
{
    if (w->proto >= 4) {
        put1(w, 0x94);
    } else if (w->n_memo < 256) {
        unsigned char b[2] = {'q', (unsigned char)w->n_memo};
        put(w, b, 2);
    } else {
        unsigned char b[5] = {'r', (unsigned char)w->n_memo, (unsigned char)(w->n_memo >> 8),
                              (unsigned char)(w->n_memo >> 16), (unsigned char)(w->n_memo >> 24)};
        put(w, b, 5);
    }
    w->n_memo++;
}

/* Before any value: open a batch of the enclosing list/dict with MARK, then close the frame
 * if it is full (CPython checks at the start of save()). */
static void pre_value(struct gm_pickle_writer *w)
{
    if (w->depth > 0) {
        struct level *l = &w->stack[w->depth - 1];
        size_t per = l->kind == K_DICT ? 2 : 1;
        size_t limit = l->kind == K_TUPLE ? l->n : l->n * per;
        if (l->done >= limit) {
            w->misuse = true;
        } else if (l->kind != K_TUPLE && l->n > 1 && l->in_batch == 0 && l->done % per == 0) {
            put1(w, '(');
        }
    }
    if (w->in_frame && w->len - FRAME_HEADER >= FRAME_TARGET)
        commit(w);
    else if (w->proto < 4 && w->len >= FRAME_TARGET)
        commit(w); /* no frames: just keep the buffer small */
}

/* After a complete value: count it, and end the batch when it is full or the last one. */
static void post_value(struct gm_pickle_writer *w)
{
    if (w->depth == 0)
        return;
    struct level *l = &w->stack[w->depth - 1];
    l->done++;
    if (l->kind == K_TUPLE)
        return;
    if (l->kind == K_DICT && l->done % 2 != 0)
        return;
    l->in_batch++;
    size_t items = l->kind == K_DICT ? l->done / 2 : l->done;
    if (l->n == 1) {
        put1(w, l->kind == K_DICT ? 's' : 'a');
        l->in_batch = 0;
    } else if (l->in_batch == BATCH || items == l->n) {
        put1(w, l->kind == K_DICT ? 'u' : 'e');
        l->in_batch = 0;
    }
}

enum gm_status gm_pickle_writer_new(FILE *f, int protocol, struct gm_pickle_writer **out,
                                    struct gm_error *err)
{
    struct gm_pickle_writer *w;
    *out = NULL;
    if (protocol < 2 || protocol > 5)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "pickle protocol %d: only protocols 2 to 5 are written", protocol);
    w = gm_calloc(1, sizeof(*w));
    if (!w)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "pickle writer: out of memory");
    w->f = f;
    w->proto = protocol;
    {
        unsigned char b[2] = {0x80, (unsigned char)protocol};
        put(w, b, 2);
        commit(w);
    }
    *out = w;
    return GM_OK;
}

void gm_pickle_writer_free(struct gm_pickle_writer *w)
{
    if (!w)
        return;
    gm_free(w->buf);
    gm_free(w);
}

uint64_t gm_pickle_writer_bytes(const struct gm_pickle_writer *w)
{
    return w->written;
}

enum gm_status gm_pickle_writer_finish(struct gm_pickle_writer *w, struct gm_error *err)
{
    enum gm_status st = GM_OK;
    if (w->depth != 0)
        w->misuse = true;
    put1(w, '.');
    commit(w);
    if (fflush(w->f) != 0)
        w->io = true;
    if (w->nomem)
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "pickle writer: out of memory");
    else if (w->misuse)
        st = gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                     "pickle writer: containers not closed with the announced counts");
    else if (w->io || ferror(w->f))
        st = gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "pickle writer: write error");
    gm_pickle_writer_free(w);
    return st;
}

void gm_pickle_none(struct gm_pickle_writer *w)
{
    pre_value(w);
    put1(w, 'N');
    post_value(w);
}

void gm_pickle_bool(struct gm_pickle_writer *w, bool v)
{
    pre_value(w);
    put1(w, v ? 0x88 : 0x89);
    post_value(w);
}

void gm_pickle_int(struct gm_pickle_writer *w, int64_t v)
{
    unsigned char b[10];
    pre_value(w);
    if (v >= 0 && v <= 0xff) {
        b[0] = 'K';
        b[1] = (unsigned char)v;
        put(w, b, 2);
    } else if (v >= 0 && v <= 0xffff) {
        b[0] = 'M';
        b[1] = (unsigned char)v;
        b[2] = (unsigned char)(v >> 8);
        put(w, b, 3);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        uint32_t u = (uint32_t)v;
        b[0] = 'J';
        for (int i = 0; i < 4; i++)
            b[1 + i] = (unsigned char)(u >> (8 * i));
        put(w, b, 5);
    } else {
        /* LONG1: the shortest little-endian two's complement that holds v */
        uint64_t u = (uint64_t)v;
        int n = 8;
        while (n > 1) {
            int64_t lo = -((int64_t)1 << (8 * (n - 1) - 1));
            int64_t hi = ((int64_t)1 << (8 * (n - 1) - 1)) - 1;
            if (v < lo || v > hi)
                break;
            n--;
        }
        b[0] = 0x8a;
        b[1] = (unsigned char)n;
        for (int i = 0; i < n; i++)
            b[2 + i] = (unsigned char)(u >> (8 * i));
        put(w, b, (size_t)n + 2);
    }
    post_value(w);
}

void gm_pickle_uint(struct gm_pickle_writer *w, uint64_t v)
{
    if (v <= INT64_MAX) {
        gm_pickle_int(w, (int64_t)v);
        return;
    }
    /* 2^63 and above need 9 bytes, the last one zero */
    unsigned char b[11];
    pre_value(w);
    b[0] = 0x8a;
    b[1] = 9;
    for (int i = 0; i < 8; i++)
        b[2 + i] = (unsigned char)(v >> (8 * i));
    b[10] = 0;
    put(w, b, sizeof(b));
    post_value(w);
}

void gm_pickle_float(struct gm_pickle_writer *w, double v)
{
    unsigned char b[9];
    uint64_t u;
    memcpy(&u, &v, sizeof(u));
    pre_value(w);
    b[0] = 'G';
    for (int i = 0; i < 8; i++)
        b[1 + i] = (unsigned char)(u >> (56 - 8 * i));
    put(w, b, sizeof(b));
    post_value(w);
}

uint32_t gm_pickle_strn(struct gm_pickle_writer *w, const char *s, size_t n)
{
    unsigned char b[9];
    size_t hl;
    pre_value(w);
    if (w->proto >= 4 && n < 256) {
        b[0] = 0x8c;
        b[1] = (unsigned char)n;
        hl = 2;
    } else if ((uint64_t)n <= UINT32_MAX) {
        b[0] = 'X';
        for (int i = 0; i < 4; i++)
            b[1 + i] = (unsigned char)((uint64_t)n >> (8 * i));
        hl = 5;
    } else if (w->proto >= 4) {
        b[0] = 0x8d;
        for (int i = 0; i < 8; i++)
            b[1 + i] = (unsigned char)((uint64_t)n >> (8 * i));
        hl = 9;
    } else {
        w->misuse = true;
        return GM_PICKLE_NO_MEMO;
    }
    if (w->proto >= 4 && n >= FRAME_TARGET) {
        /* large payloads bypass the frame: close it, then write header and payload directly */
        commit(w);
        flush_raw(w, b, hl);
        flush_raw(w, s, n);
    } else {
        put(w, b, hl);
        put(w, s, n);
    }
    uint32_t idx = w->n_memo;
    memoize(w);
    post_value(w);
    return idx;
}

uint32_t gm_pickle_str(struct gm_pickle_writer *w, const char *s)
{
    return gm_pickle_strn(w, s, strlen(s));
}

void gm_pickle_str_shared(struct gm_pickle_writer *w, const char *s, uint32_t *slot)
{
    if (*slot != GM_PICKLE_NO_MEMO)
        gm_pickle_get(w, *slot);
    else
        *slot = gm_pickle_str(w, s);
}

void gm_pickle_get(struct gm_pickle_writer *w, uint32_t memo)
{
    unsigned char b[5];
    if (memo >= w->n_memo) {
        w->misuse = true;
        return;
    }
    pre_value(w);
    if (memo < 256) {
        b[0] = 'h';
        b[1] = (unsigned char)memo;
        put(w, b, 2);
    } else {
        b[0] = 'j';
        for (int i = 0; i < 4; i++)
            b[1 + i] = (unsigned char)(memo >> (8 * i));
        put(w, b, 5);
    }
    post_value(w);
}

static uint32_t open_level(struct gm_pickle_writer *w, enum kind k, size_t n, unsigned char op)
{
    uint32_t idx = GM_PICKLE_NO_MEMO;
    pre_value(w);
    if (w->depth >= MAX_DEPTH) {
        w->misuse = true;
        return idx;
    }
    if (k != K_TUPLE) {
        put1(w, op);
        idx = w->n_memo;
        memoize(w);
    } else if (n > 3) {
        put1(w, '(');
    }
    w->stack[w->depth].kind = k;
    w->stack[w->depth].n = n;
    w->stack[w->depth].done = 0;
    w->stack[w->depth].in_batch = 0;
    w->depth++;
    return idx;
}

static bool close_level(struct gm_pickle_writer *w, enum kind k)
{
    if (w->depth == 0 || w->stack[w->depth - 1].kind != k) {
        w->misuse = true;
        return false;
    }
    struct level *l = &w->stack[w->depth - 1];
    if (l->done != (k == K_DICT ? 2 * l->n : l->n))
        w->misuse = true;
    w->depth--;
    return true;
}

uint32_t gm_pickle_list_begin(struct gm_pickle_writer *w, size_t n)
{
    return open_level(w, K_LIST, n, ']');
}

void gm_pickle_list_end(struct gm_pickle_writer *w)
{
    if (close_level(w, K_LIST))
        post_value(w);
}

uint32_t gm_pickle_dict_begin(struct gm_pickle_writer *w, size_t n)
{
    return open_level(w, K_DICT, n, '}');
}

void gm_pickle_dict_end(struct gm_pickle_writer *w)
{
    if (close_level(w, K_DICT))
        post_value(w);
}

void gm_pickle_tuple_begin(struct gm_pickle_writer *w, size_t n)
{
    (void)open_level(w, K_TUPLE, n, 0);
}

uint32_t gm_pickle_tuple_end(struct gm_pickle_writer *w)
{
    static const unsigned char ops[4] = {')', 0x85, 0x86, 0x87};
    uint32_t idx = GM_PICKLE_NO_MEMO;
    size_t n;
    if (w->depth == 0 || w->stack[w->depth - 1].kind != K_TUPLE) {
        w->misuse = true;
        return idx;
    }
    n = w->stack[w->depth - 1].n;
    if (!close_level(w, K_TUPLE))
        return idx;
    put1(w, n <= 3 ? ops[n] : 't');
    if (n > 0) {
        idx = w->n_memo;
        memoize(w);
    }
    post_value(w);
    return idx;
}
