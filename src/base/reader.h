/* SPDX-License-Identifier: MIT */
/* reader.h - bounds-checked cursor over an input byte range (library-internal).
 *
 * Every read checks the remaining length first and advances only on success, so a parser
 * built on it cannot read past the end whatever a file claims.  'base' is the file offset
 * of 'start', so that errors can name the byte offset in the file. */
#ifndef GM_BASE_READER_H
#define GM_BASE_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct gm_reader {
    const uint8_t *start;
    const uint8_t *p;
    const uint8_t *end;
    uint64_t base; /* file offset of 'start' */
};

static inline void gm_reader_init(struct gm_reader *r, const void *data, size_t len, uint64_t base)
{
    r->start = data;
    r->p = data;
    r->end = r->p + len;
    r->base = base;
}

static inline size_t gm_reader_left(const struct gm_reader *r)
{
    return (size_t)(r->end - r->p);
}

static inline uint64_t gm_reader_offset(const struct gm_reader *r)
{
    return r->base + (uint64_t)(r->p - r->start);
}

static inline bool gm_reader_u8(struct gm_reader *r, uint8_t *out)
{
    if (r->p >= r->end)
        return false;
    *out = *r->p++;
    return true;
}

/* Little-endian unsigned integer of 'n' bytes (1..8). */
static inline bool gm_reader_le(struct gm_reader *r, unsigned n, uint64_t *out)
{
    uint64_t v = 0;
    if (n > 8 || gm_reader_left(r) < n)
        return false;
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)r->p[i] << (8 * i);
    r->p += n;
    *out = v;
    return true;
}

/* Borrow 'n' bytes in place. */
static inline bool gm_reader_bytes(struct gm_reader *r, size_t n, const uint8_t **out)
{
    if (gm_reader_left(r) < n)
        return false;
    *out = r->p;
    r->p += n;
    return true;
}

static inline bool gm_reader_skip(struct gm_reader *r, size_t n)
{
    if (gm_reader_left(r) < n)
        return false;
    r->p += n;
    return true;
}

#endif
