/* SPDX-License-Identifier: MIT */
/* report_int.h - helpers shared by the report renderers (library-internal). */
#ifndef GM_REPORT_REPORT_INT_H
#define GM_REPORT_REPORT_INT_H

#include "gpumem/snapshot.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A Python frame of the user's own code: not torch, not an installed package, not the
 * standard library. */
bool gm_report_frame_is_user(const struct gm_snapshot_frame *f);

/* The frames worth showing for 'stack' (its Python frames, else the frames that are not
 * noise), innermost first; up to 'cap' ids into 'ids'; returns how many there are. */
size_t gm_report_stack_frames(const struct gm_snapshot *snap, uint32_t stack, uint32_t *ids,
                              size_t cap);

/* x positions of a device's events: microseconds since its first event when every event
 * has time_us, else the event index. */
struct gm_report_xmap {
    bool time;
    int64_t t0;
    const struct gm_snapshot_event *ev;
    size_t n;
};

void gm_report_xmap_init(struct gm_report_xmap *m, const struct gm_snapshot_device *d);
/* x of event k (-1: the initial state, at the first event). */
double gm_report_x(const struct gm_report_xmap *m, int64_t k);
/* x of the end of the trace. */
double gm_report_xend(const struct gm_report_xmap *m);
/* The bucket (0..n-1) of x on the axis [x0, x1] cut into n buckets.  time_us need not grow
 * monotonically in a damaged file, so x may fall outside the axis: it is clamped. */
unsigned gm_report_bucket(double x, double x0, double x1, unsigned n);

#endif
