/* SPDX-License-Identifier: MIT */
/* budget.h - the memory limit of the work on one input (library-internal).
 *
 * A loaded snapshot carries a memory limit (gm_snapshot.memory_limit: the caller's, or one
 * relative to the file size) and the bytes it holds itself.  Every analysis of it that
 * allocates in proportion to what the file describes (an array per allocation, a list of
 * the allocations alive at a moment) checks that it stays under the limit before it
 * allocates, so that a small file that describes a huge trace through shared memo
 * references gets a clear error instead of taking all the memory of the machine. */
#ifndef GM_BASE_BUDGET_H
#define GM_BASE_BUDGET_H

#include "gpumem/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether 'more' bytes fit beside the 'used' of a 'limit' (0: no limit). */
static inline bool gm_budget_fits(uint64_t limit, uint64_t used, uint64_t more)
{
    return limit == 0 || (used <= limit && more <= limit - used);
}

/* 'n' elements of 'elem' bytes, UINT64_MAX when that overflows. */
static inline uint64_t gm_budget_bytes(uint64_t n, uint64_t elem)
{
    return elem && n > UINT64_MAX / elem ? UINT64_MAX : n * elem;
}

/* A memory budget that containers charge as they grow (map.h, vec.h): the bytes they hold
 * together under one limit.  Growth that would pass the limit is refused and sets 'over',
 * so that the caller can tell a refusal (GM_ERR_LIMIT) from an allocation that failed.
 * A budget may draw on a shared one besides (several holders under one limit: the
 * consumers of a snapshot's load): growth must fit both, and is counted in both. */
struct gm_budget {
    uint64_t limit;           /* bytes; 0: no limit */
    uint64_t used;            /* bytes counted against it */
    bool over;                /* a growth was refused */
    struct gm_budget *shared; /* drawn on as well (its limit, its count), or NULL */
};

/* A budget of 'limit' bytes (0: none) of which 'used' are already taken. */
static inline struct gm_budget gm_budget_make(uint64_t limit, uint64_t used)
{
    struct gm_budget b = {limit, used, false, NULL};
    return b;
}

/* Count 'more' bytes against 'b' (NULL: no budget) and the budget it draws on: false, and
 * b->over set, when they do not fit. */
static inline bool gm_budget_take(struct gm_budget *b, uint64_t more)
{
    if (!b)
        return true;
    if (!gm_budget_fits(b->limit, b->used, more) ||
        (b->shared && !gm_budget_fits(b->shared->limit, b->shared->used, more))) {
        b->over = true;
        return false;
    }
    b->used += more;
    if (b->shared)
        b->shared->used += more;
    return true;
}

/* Give back 'less' bytes taken from 'b' (NULL: no budget) and from the budget it draws on. */
static inline void gm_budget_give(struct gm_budget *b, uint64_t less)
{
    if (!b)
        return;
    if (b->shared)
        b->shared->used = less < b->shared->used ? b->shared->used - less : 0;
    b->used = less < b->used ? b->used - less : 0;
}

/* The GM_ERR_LIMIT failure of 'what' ("the analysis of device 0") that would hold 'need'
 * bytes in all (UINT64_MAX: unknown, too many) under 'limit'. */
enum gm_status gm_budget_fail(struct gm_error *err, const char *what, uint64_t need,
                              uint64_t limit);

#endif
