/* SPDX-License-Identifier: MIT */
/* made_by.h - the allocations made by an event, the one rule that live.c, peaks.c and the
 * report's state rows (src/report/html_state.c) find them by. */
#ifndef GM_ANALYSIS_MADE_BY_H
#define GM_ANALYSIS_MADE_BY_H

#include "gpumem/analysis.h"

#include <stddef.h>
#include <stdint.h>

/* The first allocation from 'from' on made after event k: the allocations of 'ad' are in
 * alloc order, alloc_event never decreasing along them (those from the start, -1, first;
 * include/gpumem/analysis.h, and tests/fuzz/fuzz_analysis.c asserts it), so those made by k
 * are a prefix, found by halving [from, n_allocs). */
static inline size_t gm_analysis_made_by(const struct gm_analysis_device *ad, size_t from,
                                         int64_t k)
{
    size_t lo = from, hi = ad->n_allocs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ad->allocs[mid].alloc_event <= k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#endif
