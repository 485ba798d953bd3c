/* SPDX-License-Identifier: MIT */
/* outbuf.h - a buffered text writer (library-internal) with its own number formatting, for output
 * of millions of lines (a snapshot trace): printf's formatting costs more than everything else of
 * such a line.  Numbers are written exactly as the printf formats named beside each function would
 * write them, and gm_fmt_iec() exactly as gm_format_bytes() (units.h) does.
 *
 * A line is made in place: reserve room for it, write with the gm_fmt_* functions (each
 * returns the end of what it wrote), commit:
 *
 *   struct gm_outbuf o;
 *   gm_outbuf_init(&o, stdout);
 *   char *p = gm_outbuf_reserve(&o, 64);
 *   p = gm_fmt_u64(p, 42, 7);
 *   p = gm_fmt_lit(p, " events\n");
 *   gm_outbuf_commit(&o, p);
 *   if (!gm_outbuf_flush(&o)) ... write error (errno) ...
 *
 * Write errors are sticky: gm_outbuf_flush() then returns false. */
#ifndef GM_BASE_OUTBUF_H
#define GM_BASE_OUTBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define GM_OUTBUF_SIZE (1u << 16)

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

/* 's' padded with spaces to 'width' columns, left-aligned ("%-*s"). */
char *gm_fmt_left(char *p, const char *s, size_t n, unsigned width);
/* "%*s": right-aligned. */
char *gm_fmt_right(char *p, const char *s, size_t n, unsigned width);
/* "%*llu" (width 0: none). */
char *gm_fmt_u64(char *p, uint64_t v, unsigned width);
/* "%lld". */
char *gm_fmt_i64(char *p, int64_t v);
/* "%0*llx": lowercase hex, zero-padded to 'width' digits. */
char *gm_fmt_hex(char *p, uint64_t v, unsigned width);
/* "%+*.6f" of us / 1e6: seconds from microseconds, right-aligned in 'width'. */
char *gm_fmt_seconds(char *p, int64_t us, unsigned width);
/* gm_format_bytes(bytes, GM_UNITS_IEC) right-aligned in 'width' (at most 16 + width
 * bytes). */
char *gm_fmt_iec(char *p, uint64_t bytes, unsigned width);

#endif
