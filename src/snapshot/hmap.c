/* SPDX-License-Identifier: MIT */
/* hmap.c - the snapshot module's open-addressing hash map (see snapshot_int.h).
 * Linear probing; deletion uses backward shifting, so there are no tombstones. */
#include "snapshot/snapshot_int.h"

#include "gpumem/arena.h"

#include <string.h>

static uint64_t fix(uint64_t key)
{
    return key ? key : 0x9e3779b97f4a7c15ULL;
}

void hmap_release(struct hmap *m)
{
    gm_free(m->keys);
    gm_free(m->vals);
    memset(m, 0, sizeof(*m));
}

uint32_t hmap_find(const struct hmap *m, uint64_t key, bool (*eq)(void *ctx, uint32_t val),
                   void *ctx)
{
    size_t mask, i;
    if (!m->cap)
        return HMAP_NONE;
    key = fix(key);
    mask = m->cap - 1;
    for (i = hmap_mix(key) & mask; m->keys[i]; i = (i + 1) & mask)
        if (m->keys[i] == key && (!eq || eq(ctx, m->vals[i])))
            return m->vals[i];
    return HMAP_NONE;
}

static bool rehash(struct hmap *m, size_t ncap)
{
    uint64_t *keys = gm_calloc(ncap, sizeof(uint64_t));
    uint32_t *vals = gm_malloc(ncap * sizeof(uint32_t));
    if (!keys || !vals) {
        gm_free(keys);
        gm_free(vals);
        return false;
    }
    for (size_t j = 0; j < m->cap; j++) {
        size_t i;
        if (!m->keys[j])
            continue;
        for (i = hmap_mix(m->keys[j]) & (ncap - 1); keys[i]; i = (i + 1) & (ncap - 1))
            ;
        keys[i] = m->keys[j];
        vals[i] = m->vals[j];
    }
    gm_free(m->keys);
    gm_free(m->vals);
    m->keys = keys;
    m->vals = vals;
    m->cap = ncap;
    return true;
}

bool hmap_put(struct hmap *m, uint64_t key, uint32_t val)
{
    size_t i, mask;
    if ((m->n + 1) * 4 > m->cap * 3) {
        size_t ncap = m->cap ? m->cap * 2 : 64;
        if (ncap > SIZE_MAX / sizeof(uint64_t) || !rehash(m, ncap))
            return false;
    }
    key = fix(key);
    mask = m->cap - 1;
    for (i = hmap_mix(key) & mask; m->keys[i]; i = (i + 1) & mask)
        ;
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    return true;
}

bool hmap_del(struct hmap *m, uint64_t key)
{
    size_t i, j, mask;
    if (!m->cap)
        return false;
    key = fix(key);
    mask = m->cap - 1;
    for (i = hmap_mix(key) & mask; m->keys[i]; i = (i + 1) & mask)
        if (m->keys[i] == key)
            break;
    if (!m->keys[i])
        return false;
    /* Backward-shift the following cluster into the hole. */
    j = i;
    for (;;) {
        size_t home;
        j = (j + 1) & mask;
        if (!m->keys[j])
            break;
        home = hmap_mix(m->keys[j]) & mask;
        /* Move j into i when its home is not in the cyclic range (i, j]. */
        if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            i = j;
        }
    }
    m->keys[i] = 0;
    m->n--;
    return true;
}

uint64_t hmap_hash_bytes(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ULL ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ULL;
    }
    return hmap_mix(h ^ n);
}

bool hmap_set(struct hmap *m, uint64_t key, uint32_t val)
{
    size_t i, mask;
    uint64_t k = fix(key);
    if (m->cap) {
        mask = m->cap - 1;
        for (i = hmap_mix(k) & mask; m->keys[i]; i = (i + 1) & mask)
            if (m->keys[i] == k) {
                m->vals[i] = val;
                return true;
            }
    }
    return hmap_put(m, key, val);
}
