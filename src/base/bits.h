/* SPDX-License-Identifier: MIT */
/* bits.h - a set of indexes 0..n-1, a bit each (library-internal).
 *
 * For a mark per allocation of a device where few are marked: a byte each is megabytes of
 * fresh pages at millions of allocations, each page a fault when first written or read; a
 * bit each is an eighth of them, and the marked ones are found a 64-bit word at a time.  The
 * words are gm_calloc(gm_bits_words(n), sizeof(uint64_t)), freed with gm_free(). */
#ifndef GM_BASE_BITS_H
#define GM_BASE_BITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The words of a set of indexes below n. */
static inline size_t gm_bits_words(size_t n)
{
    return n / 64 + 1;
}

/* Marks i; whether it was marked already. */
static inline bool gm_bits_set(uint64_t *b, size_t i)
{
    uint64_t m = (uint64_t)1 << (i % 64);
    bool was = (b[i / 64] & m) != 0;
    b[i / 64] |= m;
    return was;
}

/* The first marked index in [i, n); n when none is. */
static inline size_t gm_bits_next(const uint64_t *b, size_t i, size_t n)
{
    while (i < n) {
        uint64_t w = b[i / 64] >> (i % 64);
        if (w) {
            i += (size_t)__builtin_ctzll(w);
            return i < n ? i : n;
        }
        i = (i | 63) + 1;
    }
    return n;
}

#endif
