/* SPDX-License-Identifier: MIT */
/* map.c - the library's one hash map (see map.h): growth, deletion, the index form. */
#include "base/map.h"

#include "gpumem/arena.h"

#include <string.h>

/* In an index the hash 0 stands for this one (entries are told apart by 'eq' anyway). */
#define ZERO_HASH 0x9E3779B97F4A7C15ULL

#define FIRST_SLOTS 16

void gm_map_init(struct gm_map *m, struct gm_budget *budget)
{
    memset(m, 0, sizeof(*m));
    m->budget = budget;
}

static uint64_t slot_bytes(size_t n_slots)
{
    return (uint64_t)n_slots * sizeof(struct gm_map_slot);
}

void gm_map_release(struct gm_map *m)
{
    struct gm_budget *b = m->budget;
    if (m->slots)
        gm_budget_give(b, slot_bytes(m->mask + 1));
    gm_free(m->slots);
    gm_map_init(m, b);
}

void gm_map_clear(struct gm_map *m)
{
    if (m->n)
        memset(m->slots, 0, (m->mask + 1) * sizeof(*m->slots));
    m->n = 0;
    m->has_zero = false;
}

/* Move every entry into a table of 'n_slots' slots (a power of two). */
static bool rehash(struct gm_map *m, size_t n_slots)
{
    struct gm_map_slot *s;
    size_t mask = n_slots - 1, old = m->slots ? m->mask + 1 : 0;
    unsigned shift = 64;
    if (n_slots > SIZE_MAX / sizeof(*s))
        return false;
    for (size_t k = n_slots; k > 1; k >>= 1)
        shift--;
    if (!gm_budget_take(m->budget, slot_bytes(n_slots)))
        return false;
    if (!(s = gm_calloc(n_slots, sizeof(*s)))) {
        gm_budget_give(m->budget, slot_bytes(n_slots));
        return false;
    }
    for (size_t j = 0; j < old; j++) {
        size_t i;
        uint64_t k = m->slots[j].key;
        if (!k)
            continue;
        for (i = (size_t)((k * 0x9E3779B97F4A7C15ULL) >> shift); s[i].key; i = (i + 1) & mask)
            ;
        s[i] = m->slots[j];
    }
    if (m->slots)
        gm_budget_give(m->budget, slot_bytes(old));
    gm_free(m->slots);
    m->slots = s;
    m->mask = mask;
    m->shift = shift;
    m->room = n_slots / 2;
    return true;
}

bool gm_map_reserve(struct gm_map *m, size_t n)
{
    size_t slots = m->slots ? m->mask + 1 : FIRST_SLOTS;
    if (n > SIZE_MAX / 2)
        return false;
    while (slots < 2 * n)
        slots *= 2;
    return (m->slots && slots == m->mask + 1) || rehash(m, slots);
}

bool gm_map_grow_(struct gm_map *m)
{
    if (!m->slots)
        return rehash(m, FIRST_SLOTS);
    if (m->mask + 1 > SIZE_MAX / 2)
        return false;
    return rehash(m, (m->mask + 1) * 2);
}

bool gm_map_next(const struct gm_map *m, size_t *pos, uint64_t *key, uint64_t *val)
{
    size_t n_slots = m->slots ? m->mask + 1 : 0;
    /* position 0 is the entry of key 0, position i + 1 the slot i */
    if (*pos == 0) {
        *pos = 1;
        if (m->has_zero) {
            *key = 0;
            *val = m->zero_val;
            return true;
        }
    }
    for (; *pos - 1 < n_slots; (*pos)++) {
        const struct gm_map_slot *s = &m->slots[*pos - 1];
        if (s->key) {
            *key = s->key;
            *val = s->val;
            (*pos)++;
            return true;
        }
    }
    return false;
}

bool gm_map_add(struct gm_map *m, uint64_t hash, uint64_t val)
{
    size_t i;
    if (!hash)
        hash = ZERO_HASH;
    if (m->n >= m->room && !gm_map_grow_(m))
        return false;
    for (i = gm_map_home_(m, hash); m->slots[i].key; i = (i + 1) & m->mask)
        ;
    m->slots[i].key = hash;
    m->slots[i].val = val;
    m->n++;
    return true;
}

bool gm_map_find(const struct gm_map *m, uint64_t hash, bool (*eq)(void *ctx, uint64_t val),
                 void *ctx, uint64_t *val)
{
    if (!hash)
        hash = ZERO_HASH;
    if (!m->slots)
        return false;
    for (size_t i = gm_map_home_(m, hash); m->slots[i].key; i = (i + 1) & m->mask)
        if (m->slots[i].key == hash && (!eq || eq(ctx, m->slots[i].val))) {
            *val = m->slots[i].val;
            return true;
        }
    return false;
}

uint64_t gm_hash_bytes(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *s = p;
    uint64_t h = 0xcbf29ce484222325ULL ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 0x100000001b3ULL;
    }
    return gm_hash_mix(h ^ n);
}
