/* SPDX-License-Identifier: MIT */
/* fuzz_analysis.c - the snapshot analysis (categories, phases, iterations, leaks,
 * fragmentation, diff and the analysis for it, peaks, the trace written as text and NDJSON) on
 * whatever snapshot arbitrary bytes load into.  The corpus in corpus/analysis/ is written by
 * tests/analysis/make_corpus.py, its fmt2026_* files by tests/reference/make_2026_format.py. */
#include "gpumem/gpumem.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gm_snapshot *s;
    struct gm_snapshot_opts o;
    struct gm_error err;
    struct gm_analysis *an = NULL;
    struct gm_analysis_opts ao = {.max_points = 7};
    memset(&o, 0, sizeof o);
    o.memory_limit = 64u << 20;
    /* the first analysis takes the first pass made while loading, the later ones walk */
    o.consumer = gm_analysis_first_pass_consumer();
    if (gm_snapshot_load_mem(data, size, &o, &s, &err) != GM_OK)
        return 0;
    if (gm_analysis_run(s, &ao, &an, &err) == GM_OK) {
        struct gm_analysis_diff *d = NULL;
        struct gm_analysis *again = NULL;
        /* the walk finds what the first pass found */
        if (gm_analysis_run(s, &ao, &again, &err) == GM_OK) {
            for (size_t i = 0; i < an->n_devices; i++) {
                const struct gm_analysis_device *x = &an->devices[i], *y = &again->devices[i];
                if (x->peak_bytes != y->peak_bytes || x->peak_phase != y->peak_phase ||
                    x->n_allocs != y->n_allocs || x->n_phases != y->n_phases ||
                    memcmp(x->at_peak, y->at_peak, sizeof(x->at_peak)) ||
                    (x->n_allocs && memcmp(x->allocs, y->allocs, x->n_allocs * sizeof(*x->allocs))))
                    __builtin_trap();
            }
            gm_analysis_free(again);
        }
        for (size_t i = 0; i < an->n_devices; i++) {
            const struct gm_analysis_device *dev = &an->devices[i];
            uint64_t sum = 0;
            for (int c = 0; c < GM_CATEGORY_COUNT; c++)
                sum += dev->at_peak[c];
            /* the split always adds up to the timeline's peak */
            if (sum != dev->peak_bytes)
                __builtin_trap();
            /* the allocations are in alloc order (alloc_event never decreases, those from the
             * start, -1, first): the order analysis/made_by.h halves, which live.c, peaks.c
             * and the report's state rows rely on */
            for (size_t a = 1; a < dev->n_allocs; a++)
                if (dev->allocs[a].alloc_event < dev->allocs[a - 1].alloc_event)
                    __builtin_trap();
            for (int64_t k = -1; k <= (int64_t)dev->n_events; k++)
                (void)gm_analysis_phase_at(dev, k);
            for (size_t l = 0; l < dev->n_leaks; l++) {
                uint32_t ids[8];
                (void)gm_snapshot_stack_frames(s, dev->leaks[l].stack, ids, 8);
            }
            /* regions never peak above the device, and the whole trace's window finds its
             * peak */
            for (int kind = GM_REGION_ANNOTATION; kind <= GM_REGION_COMPILE; kind++) {
                struct gm_analysis_regions r;
                if (gm_analysis_regions(an, dev, (enum gm_region_kind)kind, &r, &err) != GM_OK)
                    continue;
                for (size_t g = 0; g < r.n; g++)
                    if (r.v[g].peak_bytes > dev->peak_bytes)
                        __builtin_trap();
                gm_analysis_regions_release(&r);
            }
            if (dev->n_events) {
                struct gm_analysis_window win = {false, 0, (int64_t)dev->n_events - 1};
                struct gm_analysis_region w;
                if (gm_analysis_window_region(an, dev, &win, &w, &err) == GM_OK &&
                    dev->peak_event >= 0 && w.peak_bytes != dev->peak_bytes)
                    __builtin_trap();
            }
        }
        if (gm_analysis_diff(an, an, &d, &err) == GM_OK)
            gm_analysis_diff_free(d);
        {
            /* the analysis for a diff finds the same peaks, phases and splits */
            struct gm_analysis *part = NULL;
            if (gm_analysis_diff_prepare(s, &ao, &part, &err) == GM_OK) {
                for (size_t i = 0; i < an->n_devices; i++) {
                    const struct gm_analysis_device *x = &an->devices[i], *y = &part->devices[i];
                    if (x->peak_bytes != y->peak_bytes || x->peak_phase != y->peak_phase ||
                        memcmp(x->at_peak, y->at_peak, sizeof(x->at_peak)))
                        __builtin_trap();
                }
                if (gm_analysis_diff(part, an, &d, &err) == GM_OK)
                    gm_analysis_diff_free(d);
                gm_analysis_free(part);
            }
        }
        {
            /* the peaks, with what the alloc events say beside their stacks */
            struct gm_analysis_peaks pk;
            if (gm_analysis_peaks(s, an, NULL, &pk, &err) == GM_OK)
                gm_analysis_peaks_release(&pk);
        }
        gm_analysis_free(an);
    }
    {
        /* the trace writer's kept texts and fixed-size copies take lengths from the file: both
         * formats, the whole trace and a window of one device, written where nothing reads */
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            struct gm_analysis_trace_opts to[] = {{-1, 0, UINT64_MAX, GM_TRACE_TEXT},
                                                  {-1, 0, UINT64_MAX, GM_TRACE_NDJSON},
                                                  {0, 1, 5, GM_TRACE_NDJSON}};
            for (size_t i = 0; i < sizeof(to) / sizeof(to[0]); i++)
                (void)gm_analysis_trace(null, s, &to[i], &err);
            fclose(null);
        }
    }
    gm_snapshot_free(s);
    return 0;
}
