/* SPDX-License-Identifier: MIT */
/* estimate_render.h - the human output of `gpumem estimate` (the JSON document is the
 * library's: gm_estimate_report_json()). */
#ifndef GM_CLI_ESTIMATE_RENDER_H
#define GM_CLI_ESTIMATE_RENDER_H

#include "gpumem/estimate.h"

#include <stdbool.h>
#include <stdio.h>

/* How the report is shown. */
struct est_render_opts {
    bool color;             /* ANSI colours on the verdicts */
    size_t max_suggestions; /* what to change, one line each; 0: every one */
};

/* The report as text: the component table with bytes, GB (1e9) and GiB (2^30) columns,
 * the phase peaks, the three figures, the verdict and what to change, every assumption,
 * then the sections of the setup (model files, DeepSpeed, LoRA, devices, engine, search)
 * and, for a serving job that fits, the engine's command line. */
void est_render_text(FILE *f, const struct gm_estimate_report *r, const struct est_render_opts *o);

/* The report in one line: the verdict, the device figure against the GPU, the margin or
 * the reason (without a GPU: the device figure and the smallest catalog GPU it fits). */
void est_render_brief(FILE *f, const struct gm_estimate_report *r);

#endif
