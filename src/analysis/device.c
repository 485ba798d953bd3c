/* SPDX-License-Identifier: MIT */
/* device.c - the device a reader means when it names none (analysis.h, gm_default_device):
 * the largest allocated peak, written once for the Python package, calibration and ranks. */
#include "analysis/analysis_int.h"

#include "gpumem/error.h"

/* A device with neither events nor segments: a rank file's other devices (torchrun gives
 * rank N the device N, and the file still lists cuda:0 with nothing on it). */
static bool device_empty(const struct gm_snapshot_device *sd)
{
    return !sd->n_events && !sd->n_segments;
}

enum gm_status gm_default_device(const struct gm_snapshot *snap, const struct gm_analysis *an,
                                 int32_t *out, struct gm_error *err)
{
    size_t best = SIZE_MAX;
    uint64_t best_peak = 0;
    if (!snap->n_devices)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "the snapshot names no device");
    if (snap->n_devices == 1) { /* the answer whatever its peak: no timeline for it */
        *out = snap->devices[0].index;
        return GM_OK;
    }
    for (size_t i = 0; i < snap->n_devices; i++) {
        uint64_t peak;
        if (device_empty(&snap->devices[i]))
            continue;
        if (an) {
            peak = an->devices[i].peak_bytes; /* the analysis's devices are the snapshot's */
        } else {
            struct gm_snapshot_timeline tl;
            enum gm_status st = gm_snapshot_timeline(snap, snap->devices[i].index, 0, &tl, err);
            if (st != GM_OK)
                return st;
            peak = tl.peak_bytes;
            gm_snapshot_timeline_release(&tl);
        }
        if (best == SIZE_MAX || peak > best_peak) { /* '>': the first of equal peaks */
            best = i;
            best_peak = peak;
        }
    }
    *out = snap->devices[best == SIZE_MAX ? 0 : best].index;
    return GM_OK;
}
