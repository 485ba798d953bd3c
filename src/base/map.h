/* SPDX-License-Identifier: MIT */
/* map.h - the library's one hash map: 64-bit keys to 64-bit values (library-internal).
 *
 * Open addressing with linear probing, at most half full, so that a look-up reads one or
 * two slots; deletion shifts the rest of a cluster back into the hole (no tombstones), so
 * a map that sees millions of inserts and deletes (the allocations of a trace) never
 * degrades.  A slot holds its key and value side by side (one cache line per probe).  The
 * home slot of a key is the high bits of key * 2^64/phi (Fibonacci hashing): device
 * addresses, aligned to 512 bytes, and small indexes spread as well as random keys.  The
 * key 0 marks a free slot, so the entry of key 0 is kept beside the slots.
 *
 * A map is used in one of two ways:
 *   by key    one entry per key: gm_map_get(), gm_map_at(), gm_map_put(), gm_map_take();
 *   as index  the key is a hash of something larger (a string, a frame) and several
 *             entries may share it: gm_map_add() adds one, gm_map_find() asks the caller's
 *             'eq' which of those with the hash is the one looked for.
 * Values are what the caller makes of 64 bits: an index, a pointer (uintptr_t), a size.
 *
 * Growth may be charged to a memory budget (budget.h); a refusal leaves budget->over set.
 * GM_MAP_INIT (or gm_map_init()) allocates nothing; gm_map_release() frees. */
#ifndef GM_BASE_MAP_H
#define GM_BASE_MAP_H

#include "base/budget.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gm_map_slot {
    uint64_t key; /* 0: a free slot */
    uint64_t val;
};

struct gm_map {
    struct gm_map_slot *slots; /* mask + 1 of them (a power of two); NULL before the first */
    size_t mask;
    unsigned shift; /* 64 - log2(mask + 1) */
    size_t n;       /* entries in the slots */
    size_t room;    /* entries the slots take before they grow: half of them (0: no slots) */
    bool has_zero;  /* the entry of key 0 (by key only), kept beside the slots */
    uint64_t zero_val;
    struct gm_budget *budget; /* charged for the slots; NULL: none */
};

#define GM_MAP_INIT                                                                                \
    {                                                                                              \
        NULL, 0, 0, 0, 0, false, 0, NULL                                                           \
    }

/* An empty map charging 'budget' (NULL: none) for its slots. */
void gm_map_init(struct gm_map *m, struct gm_budget *budget);

/* Free the slots (and give their bytes back to the budget); the map is empty and usable. */
void gm_map_release(struct gm_map *m);

/* Remove every entry, keeping the slots: O(slots) when the map holds any entry, O(1) when
 * it is empty (a map emptied again and again stays as large as it ever was). */
void gm_map_clear(struct gm_map *m);

/* Entries in the map. */
static inline size_t gm_map_count(const struct gm_map *m)
{
    return m->n + (m->has_zero ? 1 : 0);
}

/* Room for 'n' entries in all, so that inserts up to that count cannot fail.  false when
 * out of memory or refused by the budget. */
bool gm_map_reserve(struct gm_map *m, size_t n);

/* The home slot of 'key' (non-zero) in a map with slots. */
static inline size_t gm_map_home_(const struct gm_map *m, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> m->shift);
}

/* The slot holding 'key' (non-zero), or SIZE_MAX. */
static inline size_t gm_map_slot_of_(const struct gm_map *m, uint64_t key)
{
    if (!m->slots)
        return SIZE_MAX;
    for (size_t i = gm_map_home_(m, key);; i = (i + 1) & m->mask) {
        if (m->slots[i].key == key)
            return i;
        if (!m->slots[i].key)
            return SIZE_MAX;
    }
}

/* Whether 'key' is in the map; its value into *val (val may be NULL). */
static inline bool gm_map_get(const struct gm_map *m, uint64_t key, uint64_t *val)
{
    size_t i;
    if (!key) {
        if (m->has_zero && val)
            *val = m->zero_val;
        return m->has_zero;
    }
    if ((i = gm_map_slot_of_(m, key)) == SIZE_MAX)
        return false;
    if (val)
        *val = m->slots[i].val;
    return true;
}

/* Out of line: make room for one more entry. */
bool gm_map_grow_(struct gm_map *m);

/* The value of 'key', added (with value 0, *added true) when the map lacks it: a pointer
 * valid until the next change of the map, or NULL when out of memory or refused by the
 * budget.  'added' may be NULL. */
static inline uint64_t *gm_map_at(struct gm_map *m, uint64_t key, bool *added)
{
    size_t i;
    if (added)
        *added = false;
    if (!key) {
        if (!m->has_zero) {
            m->has_zero = true;
            m->zero_val = 0;
            if (added)
                *added = true;
        }
        return &m->zero_val;
    }
    if (m->n >= m->room && !gm_map_grow_(m))
        return NULL;
    for (i = gm_map_home_(m, key); m->slots[i].key; i = (i + 1) & m->mask)
        if (m->slots[i].key == key)
            return &m->slots[i].val;
    m->slots[i].key = key;
    m->slots[i].val = 0;
    m->n++;
    if (added)
        *added = true;
    return &m->slots[i].val;
}

/* Set key -> val, replacing the value of an existing entry.  false when out of memory or
 * refused by the budget. */
static inline bool gm_map_put(struct gm_map *m, uint64_t key, uint64_t val)
{
    uint64_t *v = gm_map_at(m, key, NULL);
    if (!v)
        return false;
    *v = val;
    return true;
}

/* Empty slot 'i' and shift the rest of its cluster back into the hole. */
static inline void gm_map_remove_at_(struct gm_map *m, size_t i)
{
    size_t j = i;
    m->n--;
    for (;;) {
        size_t home;
        j = (j + 1) & m->mask;
        if (!m->slots[j].key)
            break;
        home = gm_map_home_(m, m->slots[j].key);
        /* j moves back into the hole at i unless its home lies cyclically in (i, j] */
        if ((i <= j) ? (home <= i || home > j) : (home <= i && home > j)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i].key = 0;
}

/* Remove 'key'; its value into *val (val may be NULL).  false when it is not there. */
static inline bool gm_map_take(struct gm_map *m, uint64_t key, uint64_t *val)
{
    size_t i;
    if (!key) {
        if (!m->has_zero)
            return false;
        if (val)
            *val = m->zero_val;
        m->has_zero = false;
        return true;
    }
    if ((i = gm_map_slot_of_(m, key)) == SIZE_MAX)
        return false;
    if (val)
        *val = m->slots[i].val;
    gm_map_remove_at_(m, i);
    return true;
}

/* Each entry once, in no particular order: start with *pos = 0; false at the end.  The map
 * must not change during the walk. */
bool gm_map_next(const struct gm_map *m, size_t *pos, uint64_t *key, uint64_t *val);

/* ---- as an index: keys are hashes ---- */

/* Add hash -> val beside any entry of the same hash.  false when out of memory or refused
 * by the budget. */
bool gm_map_add(struct gm_map *m, uint64_t hash, uint64_t val);

/* The value of an entry of 'hash' for which eq(ctx, value) holds (eq NULL: any), into
 * *val; false when none. */
bool gm_map_find(const struct gm_map *m, uint64_t hash, bool (*eq)(void *ctx, uint64_t val),
                 void *ctx, uint64_t *val);

/* ---- hashing ---- */

/* A 64-bit finaliser (murmur3's fmix64): every bit of 'h' moves every bit of the result. */
static inline uint64_t gm_hash_mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* A hash of 'n' bytes at 'p' (FNV-1a, finalised), chained through 'seed'. */
uint64_t gm_hash_bytes(const void *p, size_t n, uint64_t seed);

#endif
