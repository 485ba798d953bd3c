/* SPDX-License-Identifier: MIT */
/* vec.h - the library's one growable array (library-internal).
 *
 * An array is a typed pointer, a count and a capacity in elements, kept wherever their
 * owner keeps them (the 'live' and 'n_live' of a public result as much as a local list),
 * as git's ALLOC_GROW keeps them.  Growth doubles the capacity (from GM_VEC_FIRST, or the
 * count asked for when that is more), checks every size for overflow, may charge a memory
 * budget (budget.h), and goes through the allocation-failure hook:
 *
 *     struct gm_snapshot_live *live = NULL, *l;
 *     size_t n = 0, cap = 0;
 *     if (!(l = GM_VEC_PUSH(live, n, cap, budget)))
 *         return budget->over ? GM_ERR_LIMIT : GM_ERR_NOMEM;
 *
 * On failure the array, its count and its capacity are unchanged, so the caller still
 * owns and releases what it had.  A GM_VEC_BIG array may move to a mapping of its own
 * (big.h) and is released with gm_big_free(p, cap * elem); any other with gm_free(). */
#ifndef GM_BASE_VEC_H
#define GM_BASE_VEC_H

#include "base/budget.h"

#include <stdbool.h>
#include <stddef.h>

#define GM_VEC_FIRST 16 /* elements of an array's first allocation */
#define GM_VEC_BIG   1u /* flag: arrays of many megabytes, through gm_big_realloc() */

/* The array 'p' of '*cap' elements of 'elem' bytes with room for 'need' elements: 'p'
 * itself when it has that room, else the grown array (the first *cap elements kept; *cap
 * updated).  When the array cannot grow (out of memory, a size that overflows, or
 * 'budget', NULL for none, refusing the bytes: budget->over) 'p' is returned and *cap is
 * unchanged: compare 'need' with *cap to know. */
void *gm_vec_grow(void *p, size_t *cap, size_t need, size_t elem, unsigned flags,
                  struct gm_budget *budget);

/* true when 'arr' (a typed pointer lvalue, capacity 'cap' a size_t lvalue) has room for
 * 'need' elements, growing it if needed. */
#define GM_VEC_RESERVE(arr, cap, need, budget)                                                     \
    ((size_t)(need) <= (cap) ||                                                                    \
     ((arr) = gm_vec_grow((arr), &(cap), (size_t)(need), sizeof(*(arr)), 0, (budget)),             \
      (size_t)(need) <= (cap)))

/* The same for a GM_VEC_BIG array. */
#define GM_VEC_RESERVE_BIG(arr, cap, need, budget)                                                 \
    ((size_t)(need) <= (cap) ||                                                                    \
     ((arr) = gm_vec_grow((arr), &(cap), (size_t)(need), sizeof(*(arr)), GM_VEC_BIG, (budget)),    \
      (size_t)(need) <= (cap)))

/* A pointer to a new last element of 'arr' (count 'n' incremented; the element is not
 * initialised), or NULL when the array cannot grow. */
#define GM_VEC_PUSH(arr, n, cap, budget)                                                           \
    (GM_VEC_RESERVE(arr, cap, (n) + 1, budget) ? &(arr)[(n)++] : NULL)

#endif
