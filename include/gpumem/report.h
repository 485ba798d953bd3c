/* SPDX-License-Identifier: MIT */
/* report.h - render a snapshot for people: a self-contained HTML report and terminal charts.
 *
 * The HTML report is one file with its data, script and style inside: it makes no request to
 * any other host or file and works from file://.  The C side pre-aggregates everything the
 * page draws, within bounds that do not grow with the trace: level-of-detail series
 * (gpumem/lod.h) of allocated and reserved bytes and of the categories, the largest
 * allocations as individual bands, the allocator's state (segments and blocks, from the
 * library's layout) at any event of windows chosen within a byte budget, the segment
 * timeline, what is alive at the peak by stack, the findings.  Several files make one page
 * with the ranks side by side.  Renderers only read their inputs; they never print
 * elsewhere. */
#ifndef GPUMEM_REPORT_H
#define GPUMEM_REPORT_H

#include "gpumem/account.h"
#include "gpumem/analysis.h"
#include "gpumem/error.h"
#include "gpumem/snapshot.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

struct gm_report_opts {
    const char *title;     /* shown as the report's title (e.g. the file name); NULL: "snapshot" */
    uint32_t max_bands;    /* allocations drawn individually per device; 0: 400 */
    uint32_t max_moments;  /* moments named in the allocator state's list per device; 0: 12 */
    uint64_t state_budget; /* bytes of page data for the allocator state of one device: within
                            * it every event's state is kept, beyond it the windows around the
                            * peak and the OOMs and states spread over the trace; 0: 4 MiB */
    /* gpumem account of the same run (may be NULL): the page then shows each process's
     * whole device beside the snapshot, the allocator's memory as the driver saw it and
     * everything else (borrowed until gm_report_page_write() or gm_report_html() returns) */
    const struct gm_account *account;
};

/* A page being built: one rank (file) after the other. */
struct gm_report_page;

/* A page with the options 'o' (may be NULL; copied, the title borrowed until
 * gm_report_page_free()).  Errors: GM_ERR_NOMEM. */
enum gm_status gm_report_page_new(const struct gm_report_opts *o, struct gm_report_page **out,
                                  struct gm_error *err);

/* Add 'snap' as the next rank, titled 'title' (its file name; NULL: the page's title).  'an'
 * (may be NULL) adds categories, phases, iterations, leaks, fragmentation and OOM findings;
 * it must come from 'snap'.  What the page needs is rendered now: 'snap' and 'an' may be
 * freed after the call.  Errors: GM_ERR_NOMEM, GM_ERR_LIMIT. */
enum gm_status gm_report_page_add(struct gm_report_page *p, const struct gm_snapshot *snap,
                                  const struct gm_analysis *an, const char *title,
                                  struct gm_error *err);

/* Add a rank read from its digest 'd' (gpumem snapshot digest) to the page, as 'title':
 * its figures, host and series in the ranks' table, heatmap and imbalance, without the
 * views of a device (a digest keeps no allocations).  Errors: GM_ERR_NOMEM. */
enum gm_status gm_report_page_add_digest(struct gm_report_page *p, const struct gm_digest *d,
                                         const char *title, struct gm_error *err);

/* Write the page to 'f': with two or more ranks, they are shown side by side with their
 * imbalance (gm_analysis_imbalance()).  Errors: GM_ERR_IO, GM_ERR_NOMEM. */
enum gm_status gm_report_page_write(struct gm_report_page *p, FILE *f, struct gm_error *err);

/* NULL is a no-op. */
void gm_report_page_free(struct gm_report_page *p);

/* Write the HTML report of one snapshot to 'f' (a page of one rank), its data as they are
 * rendered: after a failure 'f' may hold part of the page.  Errors: those of the page
 * functions. */
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
 * device, categories without analysis), GM_ERR_UNSUPPORTED (the device has no trace event:
 * nothing over time to draw; the message says what the file holds), GM_ERR_NOMEM,
 * GM_ERR_IO. */
enum gm_status gm_report_plot(FILE *f, const struct gm_snapshot *snap, const struct gm_analysis *an,
                              int32_t device, const struct gm_plot_opts *o, struct gm_error *err);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
