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

/* The GM_ERR_LIMIT failure of 'what' ("the analysis of device 0") that would hold 'need'
 * bytes in all (UINT64_MAX: unknown, too many) under 'limit'. */
enum gm_status gm_budget_fail(struct gm_error *err, const char *what, uint64_t need,
                              uint64_t limit);

#endif
