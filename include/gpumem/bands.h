/* SPDX-License-Identifier: MIT */
/* bands.h - which allocations a timeline of a device draws one by one ("bands"), and what
 * the rest, drawn merged, holds by category.
 *
 * A trace holds far more allocations than a picture can draw apart.  The ones that matter
 * are those that fill the picture: an allocation covers bytes x lifetime of it (its area,
 * lifetime on the device's axis, gpumem/lod.h).  The rule:
 *
 *   1. allocations alive at the start or at the end of the trace (weights, optimizer state,
 *      anything alive before the recording began, what is kept at the end) are drawn first,
 *      the largest areas first: they are bands from the edge of the picture.  They take the
 *      whole budget but a quarter kept for the others (less when there are fewer others),
 *      so that a trace that keeps thousands of allocations to its end (a leak) still shows
 *      its iterations;
 *   2. the rest of the budget goes to the largest areas among the others, at most an equal
 *      share in each of GM_BANDS_SPREAD equal slices of the axis (by the middle of the
 *      allocation's life), then what the slices left to the largest areas of the whole
 *      trace: bands cover the whole trace, not only its first iterations;
 *   3. for zoomed views, each of 'n_windows' windows of equal numbers of events gets the
 *      largest areas inside it of those not chosen already.
 * Ties go to the larger, then the older allocation, then the first in the analysis' order,
 * so the choice never depends on a sort's algorithm.  Every band keeps its category
 * (gm_analysis_alloc.category: the analysis' one rule); what is not a band is drawn merged
 * as a stack of categories (gm_bands_rest_at()), so that bands and the merged stack add up
 * to the allocated bytes after each event. */
#ifndef GPUMEM_BANDS_H
#define GPUMEM_BANDS_H

#include "gpumem/analysis.h"
#include "gpumem/error.h"
#include "gpumem/lod.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

#define GM_BANDS_DEFAULT 400u /* bands of the whole trace when none is asked for */
#define GM_BANDS_SPREAD  32u  /* slices of the axis the inner bands are spread over */

struct gm_bands_opts {
    uint32_t max_bands;  /* bands of the whole trace; 0: GM_BANDS_DEFAULT */
    uint32_t n_windows;  /* windows with bands of their own for zoomed views; 0: none */
    uint32_t per_window; /* most bands of one window */
};

/* A window of events [k0, k1) and its own bands. */
struct gm_bands_window {
    int64_t k0, k1;
    uint32_t *allocs; /* indexes into the device's allocs, in stacking order */
    size_t n;
};

struct gm_bands {
    uint32_t *allocs; /* indexes into the device's allocs, in stacking order: allocation
                       * order (those alive from the start first), then address */
    size_t n;
    size_t n_edge;                   /* of them, alive at the start or at the end of the trace */
    uint8_t *is_band;                /* per allocation of the device: 1 when among 'allocs' */
    struct gm_bands_window *windows; /* those with at least one band, in order */
    size_t n_windows;
};

/* Choose the bands of analysed device 'ad' on its axis 'ax' (with ax->time, one pass over
 * the trace for the x of each event).  'out' is owned by the caller: gm_bands_release().
 * Errors: GM_ERR_NOMEM. */
enum gm_status gm_bands_choose(const struct gm_analysis_device *ad, const struct gm_lod_axis *ax,
                               const struct gm_bands_opts *o, struct gm_bands *out,
                               struct gm_error *err);

/* The bytes by category of the allocations that are not bands of 'b', alive after each
 * event of 'ks' (any order; -1: the initial state): out[i][c] for ks[i].  Errors:
 * GM_ERR_NOMEM. */
enum gm_status gm_bands_rest_at(const struct gm_analysis_device *ad, const struct gm_bands *b,
                                const int64_t *ks, size_t n, uint64_t (*out)[GM_CATEGORY_COUNT],
                                struct gm_error *err);

/* gm_bands_rest_at() when the bytes by category of every allocation alive after each
 * event of 'ks' are known ('all': GM_CATEGORY_COUNT values a question, e.g.
 * gm_analysis_totals_cats()): the bands alive there are taken off, with no pass over the
 * other allocations.  'ks' in event order (non-decreasing; else the answer is
 * gm_bands_rest_at()'s, which does not read 'all').  Errors: GM_ERR_NOMEM. */
enum gm_status gm_bands_rest_from(const struct gm_analysis_device *ad, const struct gm_bands *b,
                                  const int64_t *ks, size_t n, const uint64_t *all,
                                  uint64_t (*out)[GM_CATEGORY_COUNT], struct gm_error *err);

/* NULL-safe; the struct may be chosen again. */
void gm_bands_release(struct gm_bands *b);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
