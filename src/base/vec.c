/* SPDX-License-Identifier: MIT */
/* vec.c - the library's one growable array (see vec.h). */
#include "base/vec.h"

#include "base/big.h"

#include "gpumem/arena.h"

#include <stdint.h>

/* gm_vec_grow() with the first capacity 'first' (elements). */
static void *grow(void *p, size_t *cap, size_t need, size_t elem, unsigned flags,
                  struct gm_budget *budget, size_t first)
{
    size_t ncap = *cap ? *cap : first;
    void *n;
    if (need <= *cap)
        return p;
    if (!elem)
        return p;
    if (ncap < 1)
        ncap = 1;
    if ((flags & GM_VEC_BIG) && *cap * elem >= GM_BIG_MIN) {
        /* a mapped array: every byte of its capacity is written into memory at once
         * (big.h), so it grows by a quarter, not double */
        while (ncap < need) {
            if (ncap > (SIZE_MAX - ncap / 4) / elem)
                return p;
            ncap += ncap / 4;
        }
    }
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / elem)
            return p;
        ncap *= 2;
    }
    if (ncap > SIZE_MAX / elem)
        return p;
    if (!gm_budget_take(budget, (uint64_t)(ncap - *cap) * elem))
        return p;
    n = flags & GM_VEC_BIG ? gm_big_realloc(p, *cap * elem, ncap * elem)
                           : gm_realloc(p, ncap * elem);
    if (!n) {
        gm_budget_give(budget, (uint64_t)(ncap - *cap) * elem);
        return p;
    }
    *cap = ncap;
    return n;
}

void *gm_vec_grow(void *p, size_t *cap, size_t need, size_t elem, unsigned flags,
                  struct gm_budget *budget)
{
    return grow(p, cap, need, elem, flags, budget, GM_VEC_FIRST);
}

bool gm_big_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
    *p = grow(*p, cap, need, elem, GM_VEC_BIG, NULL, first);
    return need <= *cap;
}
