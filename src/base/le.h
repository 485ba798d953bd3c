/* SPDX-License-Identifier: MIT */
/* le.h - little-endian words at any address (library-internal).
 *
 * The packed event stream, the number formatter and the pickle reader load and store whole
 * words at unaligned addresses, the first byte lowest whatever the machine's order: memcpy()
 * (one load or store on the machines we build for) and a byte swap on a big-endian one. */
#ifndef GM_BASE_LE_H
#define GM_BASE_LE_H

#include <stdint.h>
#include <string.h>

/* The 8 bytes at p, the first lowest. */
static inline uint64_t gm_load64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

/* The 2 bytes at p, the first lowest. */
static inline unsigned gm_load16(const void *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap16(v);
#endif
    return v;
}

/* The 8 bytes of v at p, lowest first (gm_load64()'s inverse). */
static inline void gm_store64(void *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

#endif
