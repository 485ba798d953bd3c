/* SPDX-License-Identifier: MIT */
/* report.h - render a snapshot for people: a self-contained HTML report and terminal charts.
 *
 * The HTML report is one file with its data, script and style inside: it makes no request to
 * any other host or file and works from file://.  The C side pre-aggregates everything the
 * page draws (a level-of-detail pyramid of allocated/reserved bytes per time bucket, the
 * largest allocations as individual bands, per-category series, the allocator state at a set
 * of moments, the table at the peak, the findings), so the page stays small and fast for
 * snapshots of any size.  Renderers only read their inputs; they never print elsewhere. */
#ifndef GPUMEM_REPORT_H
#define GPUMEM_REPORT_H

#include "gpumem/analysis.h"
#include "gpumem/error.h"
#include "gpumem/snapshot.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct gm_report_opts {
    const char *title;    /* shown as the report's title (e.g. the file name); NULL: "snapshot" */
    uint32_t max_bands;   /* allocations drawn individually per device; 0: 400 */
    uint32_t max_moments; /* allocator states (segments view) per device; 0: 12 */
};

/* Write the HTML report of 'snap' to 'f'.  'an' (may be NULL) adds categories, phases,
 * iterations, leaks and the fragmentation/OOM findings; it must come from 'snap'.
 * Errors: GM_ERR_NOMEM, GM_ERR_IO (write error on 'f'). */
enum gm_status gm_report_html(FILE *f, const struct gm_snapshot *snap, const struct gm_analysis *an,
                              const struct gm_report_opts *o, struct gm_error *err);

enum gm_plot_flags {
    GM_PLOT_COLOR = 1 << 0,      /* ANSI colours */
    GM_PLOT_ASCII = 1 << 1,      /* only ASCII characters */
    GM_PLOT_CATEGORIES = 1 << 2, /* stack categories (needs an analysis) */
};

struct gm_plot_opts {
    unsigned width;  /* columns of the whole chart, at least 40 */
    unsigned height; /* rows of the plot area, at least 4 */
    unsigned flags;  /* enum gm_plot_flags */
};

/* The plot's columns for these options: one bucket of the time axis each.  An analysis
 * made for the plot with gm_analysis_opts.max_points = 3 * columns + 2 has its series in the
 * same buckets, so that the categories of each column are those at its maximum. */
unsigned gm_report_plot_columns(const struct gm_plot_opts *o);

/* Draw allocated (and reserved) bytes over time of device 'device' as a terminal chart on
 * 'f', with the peak marked, an axis and a one-line legend.  With GM_PLOT_CATEGORIES the
 * allocated area is stacked by category ('an' required).  Errors: GM_ERR_INVALID (no such
 * device, categories without analysis), GM_ERR_NOMEM, GM_ERR_IO. */
enum gm_status gm_report_plot(FILE *f, const struct gm_snapshot *snap, const struct gm_analysis *an,
                              int32_t device, const struct gm_plot_opts *o, struct gm_error *err);

#ifdef __cplusplus
}
#endif
#endif
