/* SPDX-License-Identifier: MIT */
/* report_int.h - helpers shared by the report renderers (library-internal). */
#ifndef GM_REPORT_REPORT_INT_H
#define GM_REPORT_REPORT_INT_H

#include "gpumem/analysis.h"
#include "gpumem/json.h"
#include "gpumem/lod.h"
#include "gpumem/report.h"
#include "gpumem/snapshot.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---- the HTML page (html.c, html_device.c, html_state.c) ---- */

/* A FILE whose text goes on to 'f' as the page's data element takes it: the '<' of "</"
 * and "<!" as "\u003c" (the same character to JSON), so that no string in the data closes
 * the element or opens a comment, however the text is cut into writes (a '<' that ends a
 * write waits for the first byte of the next).  NULL when out of memory; 's' is the FILE's
 * state until fclose(), which writes what waits.  Errors of 'f' are the FILE's. */
struct gm_report_script {
    FILE *f;
    bool lt; /* a '<' held back */
};
FILE *gm_report_script_open(struct gm_report_script *s, FILE *f);

/* What the renderers of one rank share. */
struct gm_report_ctx {
    const struct gm_snapshot *snap;
    const struct gm_analysis *an; /* may be NULL */
    const struct gm_report_opts *o;
    struct gm_json *w;
    uint8_t *stack_used; /* per snapshot stack id: the page names it */
    bool nomem;
};

static inline void gm_report_use_stack(struct gm_report_ctx *c, uint32_t id)
{
    if (id < c->snap->n_stacks)
        c->stack_used[id] = 1;
}

/* Whether gm_report_num() writes v as an integer (every x of a time axis kept in whole
 * microseconds, and every event index): the one test, also for rows formatted in place. */
static inline bool gm_report_num_is_int(double v)
{
    return v == (double)(int64_t)v && v > -9e15 && v < 9e15;
}
/* A number: integers exactly, the rest with 3 decimals (x positions). */
void gm_report_num(struct gm_json *w, double v);
/* A cudaStream_t as a decimal string (a JavaScript number would round it), written by
 * gm_report_stream_text() at p (GM_REPORT_STREAM_ROOM bytes of room); the end of it. */
#define GM_REPORT_STREAM_ROOM (GM_FMT_ROOM + 2)
char *gm_report_stream_text(char *p, uint64_t stream);
void gm_report_stream(struct gm_json *w, uint64_t stream);

/* One device's object of the page data. */
enum gm_status gm_report_device(struct gm_report_ctx *c, const struct gm_snapshot_device *sd,
                                const struct gm_analysis_device *ad, struct gm_error *err);

/* The "segtl" (segment timeline), "marks" (moments named) and "state" (allocator state at
 * any event) keys of a device's object. */
enum gm_status gm_report_state(struct gm_report_ctx *c, const struct gm_snapshot_device *sd,
                               const struct gm_analysis_device *ad,
                               const struct gm_snapshot_timeline *tl, const struct gm_lod_axis *ax,
                               struct gm_error *err);

/* The page's "account" member: each process's equations and timeline (html_account.c),
 * or null. */
void gm_report_account(struct gm_json *w, const struct gm_account *a);

#endif
