/* SPDX-License-Identifier: MIT */
/* outbuf.h - a buffered text writer (library-internal) with its own number formatting, for output
 * of millions of lines (a snapshot trace): printf's formatting costs more than everything else of
 * such a line.  Numbers are written exactly as the printf formats named beside each function would
 * write them, and gm_fmt_iec() exactly as gm_format_bytes() (units.h) does.
 *
 * A line is made in place: reserve room for it, write with the gm_fmt_* functions (each
 * returns the end of what it wrote), commit:
 *
 *   struct gm_outbuf *o = gm_malloc(sizeof(*o)); (GM_OUTBUF_SIZE, 256 KiB: not on a stack)
 *   gm_outbuf_init(o, stdout);
 *   char *p = gm_outbuf_reserve(o, 64);
 *   p = gm_fmt_u64(p, 42, 7);
 *   p = gm_fmt_lit(p, " events\n");
 *   gm_outbuf_commit(o, p);
 *   if (!gm_outbuf_flush(o)) ... write error (errno) ...
 *   gm_free(o);
 *
 * Write errors are sticky: gm_outbuf_flush() then returns false. */
#ifndef GM_BASE_OUTBUF_H
#define GM_BASE_OUTBUF_H

#include "base/hint.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define GM_OUTBUF_SIZE (1u << 18)

struct gm_outbuf {
    FILE *f;
    size_t n;
    bool failed;
    char buf[GM_OUTBUF_SIZE];
};

void gm_outbuf_init(struct gm_outbuf *o, FILE *f);
/* Write what is buffered; false after any write error. */
bool gm_outbuf_flush(struct gm_outbuf *o);

/* Room for 'n' bytes (n <= GM_OUTBUF_SIZE / 2): where to write them. */
static inline char *gm_outbuf_reserve(struct gm_outbuf *o, size_t n)
{
    if (GM_OUTBUF_SIZE - o->n < n)
        gm_outbuf_flush(o);
    return o->buf + o->n;
}

/* What was written up to 'end' (inside the reserved room) is part of the output. */
static inline void gm_outbuf_commit(struct gm_outbuf *o, char *end)
{
    o->n = (size_t)(end - o->buf);
}

/* Any length of 's' (several reservations). */
void gm_outbuf_put(struct gm_outbuf *o, const char *s, size_t n);

/* ---- formatting into a reserved room; each returns the end ---- */

static inline char *gm_fmt_str(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

/* A string literal (its length known at compile time). */
#define gm_fmt_lit(p, s) gm_fmt_str((p), (s), sizeof(s) - 1)

/* 's' padded with spaces to 'width' columns, left-aligned ("%-*s"); the padding is written
 * eight spaces at a time, so up to seven bytes past the end are room (overwritten). */
char *gm_fmt_left(char *p, const char *s, size_t n, unsigned width);
/* "%*llu" (width 0: none) where the padding and GM_FMT_ROOM bytes past it are room: the
 * digits are gm_fmt_u64_room()'s, so what lies past the number up to there is
 * overwritten. */
char *gm_fmt_u64(char *p, uint64_t v, unsigned width);
/* "%lld" where GM_FMT_ROOM + 1 bytes of room are at p (gm_fmt_i64_room()). */
char *gm_fmt_i64(char *p, int64_t v);

/* x < 10^8 as its eight decimal digits (leading zeros kept), each a byte of value 0-9, the
 * first digit in the lowest byte.  All lanes of one 64-bit word are split at once, by
 * multiplications with reciprocals that are exact over these ranges: x into its two
 * four-digit halves (32-bit lanes), each half into two-digit quarters (16-bit lanes), each
 * quarter into its two digits (bytes); the halves and quarters come out low part first, so
 * a byte swap puts the first digit lowest.  No division and no table: a trace writes
 * millions of numbers. */
static inline uint64_t gm_digits8(uint32_t x)
{
    uint64_t v = x;
    v += ((UINT64_C(1) << 32) - 10000) * ((v * UINT64_C(109951163)) >> 40);
    v += (UINT64_C(0x10000) - 100) * (((v * 10486) >> 20) & UINT64_C(0x0000007F0000007F));
    v += (UINT64_C(0x100) - 10) * (((v * 103) >> 10) & UINT64_C(0x000F000F000F000F));
    return __builtin_bswap64(v);
}

/* The 8 bytes of v at p, lowest first. */
static inline void gm_store64(char *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

/* The 8 bytes at p, the first lowest (gm_store64()'s inverse). */
static inline uint64_t gm_load64(const char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

#define GM_ASCII_ZEROS UINT64_C(0x3030303030303030)

/* "%llu" where GM_FMT_ROOM bytes of room are at p: what lies past the number up to there is
 * overwritten (left undefined); returns the end of the number.  Eight digits a word
 * (gm_digits8), the leading zeros of the first word shifted out: no loop and no table, for
 * the millions of numbers of a report's page data. */
#define GM_FMT_ROOM 20
static GM_INLINE_ALWAYS char *gm_fmt_u64_room(char *p, uint64_t v)
{
    uint64_t lead = v, rest = 0, d;
    unsigned n_rest = 0, z;
    if (v < 10) {
        *p = (char)('0' + v); /* a category, a flag, an index: one digit costs no more */
        return p + 1;
    }
    if (v >= 100000000u) {
        /* the last eight or sixteen digits, in whole words, after the leading ones */
        if (v >= UINT64_C(10000000000000000)) {
            lead = v / UINT64_C(10000000000000000); /* below 1845 */
            rest = v % UINT64_C(10000000000000000);
            n_rest = 16;
        } else {
            lead = v / 100000000u;
            rest = v % 100000000u;
            n_rest = 8;
        }
    }
    d = gm_digits8((uint32_t)lead);
    z = lead ? (unsigned)__builtin_ctzll(d) >> 3 : 7; /* leading zero digits */
    gm_store64(p, (d | GM_ASCII_ZEROS) >> (8 * z));
    p += 8 - z;
    if (n_rest == 16) {
        gm_store64(p, gm_digits8((uint32_t)(rest / 100000000u)) | GM_ASCII_ZEROS);
        rest %= 100000000u;
        p += 8;
    }
    if (n_rest) {
        gm_store64(p, gm_digits8((uint32_t)rest) | GM_ASCII_ZEROS);
        p += 8;
    }
    return p;
}

/* "%lld" where GM_FMT_ROOM + 1 bytes of room are at p (gm_fmt_u64_room() after a sign). */
static GM_INLINE_ALWAYS char *gm_fmt_i64_room(char *p, int64_t v)
{
    *p = '-';
    return gm_fmt_u64_room(p + (v < 0), v < 0 ? 0 - (uint64_t)v : (uint64_t)v);
}

/* A key and the "%llu" of one field of many lines (",\"size\":12582912"), remembering the
 * digits it wrote last, so that a value close to the last one costs one copy of the key and
 * the digits together and the few digits that changed:
 *   - the same value, or one more with no carry past the tens (an event index): nothing
 *     made but that digit;
 *   - a value that keeps the digits above its last eight (a trace's times): those eight;
 *   - a value that keeps the digits above its last nine or ten (a trace's addresses and
 *     totals, for which the last eight change too often): those nine or ten (ten for a
 *     number of eleven digits or more, nine for ten, when its digits were last all made);
 *   - else all the digits (gm_fmt_memo_slow()).
 * Writes GM_FMT_MEMO_ROOM bytes at p whatever the value's length (the room must be there);
 * returns the end of the number.  A memo starts with gm_fmt_memo_init() and its key, of
 * GM_FMT_KEY_MIN to GM_FMT_KEY_MAX bytes (so that the text is at least eight bytes).
 *
 * The last eight bytes of the text (digits, or the key's end before a shorter number) are
 * kept apart, in 'last8', and the routes above change only them: the text is copied out
 * of s[], which they never write, and 'last8' is stored over its end.  A copy that read
 * bytes just changed in s[] by a narrower store (a digit, one word of eight) would wait
 * for that store to reach the cache, the processor being unable to forward a store into a
 * wider load it covers only in part (perf put 37 % of the NDJSON writer's samples on the
 * two copies after such stores, of the index and of the time; the writing of the 1 GB
 * synthetic file's trace took 4-5 % less CPU without them). */
#define GM_FMT_KEY_MIN   7
#define GM_FMT_KEY_MAX   24
#define GM_FMT_MEMO_END  (GM_FMT_KEY_MAX + 24) /* where the digits end in s[] */
#define GM_FMT_MEMO_ROOM (GM_FMT_KEY_MAX + 24)
struct gm_fmt_memo {
    uint64_t v;               /* the value last written */
    uint64_t base;            /* v less its last eight digits (when 'block') */
    uint64_t wide_base;       /* v less its last nine or ten digits (when wide_span) */
    uint64_t wide_span;       /* 10^9 or 10^10: [wide_base, wide_base + wide_span) keeps the
                                 digits above (all of it below 2^64); 0: none */
    uint64_t last8;           /* the text's last eight bytes (gm_load64() of the eight before
                                 s + GM_FMT_MEMO_END): those bytes of s[] may be stale */
    bool block;               /* v >= 10^8, and all of [base, base + 10^8) is below 2^64 */
    uint8_t n;                /* bytes of the key and the digits of v */
    uint8_t off;              /* where the key starts in s[]: GM_FMT_MEMO_END - n */
    uint8_t n_key;            /* bytes of the key */
    char key[GM_FMT_KEY_MAX]; /* the key at its end, copied whole before the digits */
    /* v's digits end at s + GM_FMT_MEMO_END, each 8-digit group (leading zeros kept) in its
     * place, the last eight just before the end, the key just before the first digit; what
     * follows is room for the copy */
    char s[GM_FMT_MEMO_END + GM_FMT_MEMO_ROOM];
};

/* An empty memo (it holds 0) with its key, of GM_FMT_KEY_MIN to GM_FMT_KEY_MAX bytes.
 * False, 'm' untouched, for a key shorter or longer: a shorter one would put the text's
 * last eight bytes (last8) before its start, in the bytes written before it. */
bool gm_fmt_memo_init(struct gm_fmt_memo *m, const char *key);

/* gm_fmt_u64_memo() when v is not the last value, one more, or in its last block of 10^8:
 * the wide span, else all the digits anew. */
char *gm_fmt_memo_slow(char *p, uint64_t v, struct gm_fmt_memo *m);

/* The text of 'm' (its key and the digits of m->v, at least eight bytes) at p in a move of
 * 'copy' bytes (at least the key and twenty digits) and a store of eight; returns its end. */
static GM_INLINE_ALWAYS char *gm_fmt_memo_put(char *p, const struct gm_fmt_memo *m, size_t copy)
{
    char *end = p + m->n;
    memcpy(p, m->s + m->off, copy);
    gm_store64(end - 8, m->last8);
    return end;
}

/* gm_fmt_u64_memo() with the made text copied in a move of 'copy' bytes (a constant, at
 * least the key and twenty digits; the slow route moves GM_FMT_MEMO_ROOM all the same). */
static GM_INLINE_ALWAYS char *gm_fmt_u64_memo_copy(char *p, uint64_t v, struct gm_fmt_memo *m,
                                                   size_t copy)
{
    if (v != m->v) {
        uint64_t last = m->last8;
        if (v - m->base < 100000000u && m->block) {
            /* the leading digits stand: the last eight anew */
            m->last8 = gm_digits8((uint32_t)(v - m->base)) | GM_ASCII_ZEROS;
        } else if (v - m->v == 1 && v && (uint8_t)(last >> 56) != '9') {
            m->last8 = last + (UINT64_C(1) << 56); /* an index counting up: no carry */
        } else if (v - m->v == 1 && v && (uint8_t)(last >> 48) != '9' && m->n - m->n_key > 1) {
            /* ...a carry into the tens: the last digit '9' becomes '0', the tens one more */
            m->last8 = last + (UINT64_C(1) << 48) - (UINT64_C(9) << 56);
        } else {
            return gm_fmt_memo_slow(p, v, m);
        }
        m->v = v;
    }
    return gm_fmt_memo_put(p, m, copy);
}

static GM_INLINE_ALWAYS char *gm_fmt_u64_memo(char *p, uint64_t v, struct gm_fmt_memo *m)
{
    return gm_fmt_u64_memo_copy(p, v, m, GM_FMT_MEMO_ROOM);
}

/* gm_fmt_u64_memo() of a memo whose key is at most GM_FMT_SHORT_KEY bytes: its key and
 * digits fit GM_FMT_SHORT_ROOM bytes, copied in one move of that many (the room at p is
 * GM_FMT_MEMO_ROOM all the same). */
#define GM_FMT_SHORT_KEY  12
#define GM_FMT_SHORT_ROOM (GM_FMT_SHORT_KEY + 20)
static GM_INLINE_ALWAYS char *gm_fmt_u64_memo_short(char *p, uint64_t v, struct gm_fmt_memo *m)
{
    return gm_fmt_u64_memo_copy(p, v, m, GM_FMT_SHORT_ROOM);
}

/* gm_fmt_u64_memo() for a field that counts up by one (an index): that route first; the
 * text moved in one copy of 'copy' bytes (gm_fmt_u64_memo_copy()). */
static GM_INLINE_ALWAYS char *gm_fmt_u64_memo_next_copy(char *p, uint64_t v, struct gm_fmt_memo *m,
                                                        size_t copy)
{
    if (v - m->v == 1 && v && (uint8_t)(m->last8 >> 56) != '9') {
        m->last8 += UINT64_C(1) << 56;
        m->v = v;
        return gm_fmt_memo_put(p, m, copy);
    }
    return gm_fmt_u64_memo_copy(p, v, m, copy);
}

static GM_INLINE_ALWAYS char *gm_fmt_u64_memo_next(char *p, uint64_t v, struct gm_fmt_memo *m)
{
    return gm_fmt_u64_memo_next_copy(p, v, m, GM_FMT_MEMO_ROOM);
}

/* The key-and-digits text of many values of one field (gm_fmt_u64_memo()'s), each kept in
 * the slot its value hashes to (a multiplicative hash), for a field whose values come round
 * again: the addresses of a caching allocator's blocks, reused iteration after iteration,
 * and the totals of a training loop in its steady state.  A value found in its slot is one
 * copy; another is made by the field's memo and kept in the slot in place of the one
 * there.  Every slot holds a value's text at all times (0's, from gm_fmt_slots_init()), so a
 * value that matches its slot's is the text to copy. */
struct gm_fmt_slot {
    uint64_t v;
    uint64_t n;               /* bytes of s */
    char s[GM_FMT_MEMO_ROOM]; /* the key and v's digits, then room for the copy */
};

/* n_slots slots holding 0 with the key of 'm' (a memo fresh from gm_fmt_memo_init(), which
 * holds 0 too). */
void gm_fmt_slots_init(struct gm_fmt_slot *slots, size_t n_slots, const struct gm_fmt_memo *m);

/* gm_fmt_u64_memo(p, v, m) by way of the slot of v among 2^bits, its text moved in one copy
 * of 'copy' bytes (a constant: GM_FMT_MEMO_ROOM, or GM_FMT_SHORT_ROOM for a key of at most
 * GM_FMT_SHORT_KEY bytes); GM_FMT_MEMO_ROOM bytes of room at p; returns the end of the
 * number. */
static GM_INLINE_ALWAYS char *gm_fmt_u64_slot_copy(char *p, uint64_t v, struct gm_fmt_slot *slots,
                                                   unsigned bits, struct gm_fmt_memo *m,
                                                   size_t copy)
{
    struct gm_fmt_slot *t = &slots[(v * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - bits)];
    char *end;
    if (GM_LIKELY(t->v == v)) {
        memcpy(p, t->s, copy);
        return p + t->n;
    }
    end = gm_fmt_u64_memo(p, v, m);
    t->v = v;
    t->n = (uint64_t)(end - p);
    (void)gm_fmt_memo_put(t->s, m, copy); /* from the memo: the line's bytes were just stored */
    return end;
}

static GM_INLINE_ALWAYS char *gm_fmt_u64_slot(char *p, uint64_t v, struct gm_fmt_slot *slots,
                                              unsigned bits, struct gm_fmt_memo *m)
{
    return gm_fmt_u64_slot_copy(p, v, slots, bits, m, GM_FMT_MEMO_ROOM);
}

static GM_INLINE_ALWAYS char *gm_fmt_u64_slot_short(char *p, uint64_t v, struct gm_fmt_slot *slots,
                                                    unsigned bits, struct gm_fmt_memo *m)
{
    return gm_fmt_u64_slot_copy(p, v, slots, bits, m, GM_FMT_SHORT_ROOM);
}

/* "%0*llx": lowercase hex, zero-padded to 'width' digits, eight digits a word: up to seven
 * bytes past the end are room (overwritten). */
char *gm_fmt_hex(char *p, uint64_t v, unsigned width);
/* "%+*.6f" of us / 1e6: seconds from microseconds, right-aligned in 'width'; GM_FMT_ROOM
 * bytes past the end are room (overwritten). */
char *gm_fmt_seconds(char *p, int64_t us, unsigned width);
/* gm_format_bytes(bytes, GM_UNITS_IEC) right-aligned in 'width' (at most 16 + width
 * bytes). */
char *gm_fmt_iec(char *p, uint64_t bytes, unsigned width);

#endif
