/* SPDX-License-Identifier: MIT */
/* ranks.c - a job's ranks side by side: what one rank's file says at its peak, and how
 * unequal the ranks are (the rank with the highest and the lowest peak, and the category
 * that makes the difference).
 *
 * A rank is a file, whatever its device index: torchrun gives rank N cuda:N (or cuda:0
 * with CUDA_VISIBLE_DEVICES), and its snapshot names every visible device with an empty
 * trace for the others.  The rank's device is the one with the most trace events (the
 * highest peak when none has a trace, the first one on a tie). */
#include "analysis/analysis_int.h"

#include <string.h>

bool gm_analysis_rank_summary(const struct gm_analysis *an, struct gm_rank_summary *out)
{
    const struct gm_analysis_device *best = NULL;
    memset(out, 0, sizeof(*out));
    out->device = -1;
    out->peak_event = -1;
    for (size_t d = 0; an && d < an->n_devices; d++) {
        const struct gm_analysis_device *dev = &an->devices[d];
        if (!best || dev->n_events > best->n_events ||
            (dev->n_events == best->n_events && dev->peak_bytes > best->peak_bytes))
            best = dev;
    }
    if (!best)
        return false;
    out->device = best->device;
    out->has_trace = best->has_trace;
    out->peak_bytes = best->peak_bytes;
    out->peak_event = best->peak_event;
    out->peak_phase = best->peak_phase;
    out->reserved_at_peak_bytes = best->peak_frag.reserved;
    memcpy(out->at_peak, best->at_peak, sizeof(out->at_peak));
    return true;
}

void gm_analysis_imbalance(const struct gm_rank_summary *r, size_t n, struct gm_rank_imbalance *out)
{
    memset(out, 0, sizeof(*out));
    out->n_ranks = n;
    out->category = GM_CATEGORY_OTHER;
    if (!n)
        return;
    for (size_t i = 1; i < n; i++) {
        if (r[i].peak_bytes > r[out->max_rank].peak_bytes)
            out->max_rank = i;
        if (r[i].peak_bytes < r[out->min_rank].peak_bytes)
            out->min_rank = i;
    }
    out->max_peak = r[out->max_rank].peak_bytes;
    out->min_peak = r[out->min_rank].peak_bytes;
    out->spread = out->max_peak - out->min_peak;
    out->ratio = out->min_peak ? (double)out->max_peak / (double)out->min_peak : 0.0;
    /* the category where the highest rank holds the most more than the lowest one */
    for (int c = 0; c < GM_CATEGORY_COUNT; c++) {
        int64_t d = (int64_t)r[out->max_rank].at_peak[c] - (int64_t)r[out->min_rank].at_peak[c];
        if (c == 0 || d > out->category_diff) {
            out->category_diff = d;
            out->category = (uint8_t)c;
        }
    }
}
