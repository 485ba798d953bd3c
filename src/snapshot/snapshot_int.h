/* SPDX-License-Identifier: MIT */
/* snapshot_int.h - internals shared by the snapshot module's files (library-internal). */
#ifndef GM_SNAPSHOT_SNAPSHOT_INT_H
#define GM_SNAPSHOT_SNAPSHOT_INT_H

#include "gpumem/snapshot.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Open-addressing map from a 64-bit key (0 is remapped, never stored) to a 32-bit value.
 * Several entries may share a key when the key is a hash: hmap_find() then asks 'eq'. */
struct hmap {
    uint64_t *keys;
    uint32_t *vals;
    size_t cap; /* power of two, 0 when empty */
    size_t n;
};

#define HMAP_NONE UINT32_MAX

void hmap_release(struct hmap *m);
/* The value for 'key' for which eq(ctx, value) holds (eq NULL: any), or HMAP_NONE. */
uint32_t hmap_find(const struct hmap *m, uint64_t key, bool (*eq)(void *ctx, uint32_t val),
                   void *ctx);
/* Add key -> val (no check for an existing key).  false when out of memory. */
bool hmap_put(struct hmap *m, uint64_t key, uint32_t val);
/* Remove the first entry with 'key' (eq NULL); returns whether one was removed. */
bool hmap_del(struct hmap *m, uint64_t key);
/* For maps with one entry per key: set key -> val, replacing the value of an existing entry
 * (one probe instead of hmap_del + hmap_put).  false when out of memory. */
bool hmap_set(struct hmap *m, uint64_t key, uint32_t val);

static inline uint64_t hmap_mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

uint64_t hmap_hash_bytes(const void *p, size_t n, uint64_t seed);

/* a + b, UINT64_MAX when that overflows (gm_add_sat(), inline for the per-event loops). */
static inline uint64_t snap_sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

#endif
