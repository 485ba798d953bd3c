/* SPDX-License-Identifier: MIT */
/* estimate_render.h - the human output of `gpumem estimate` (the JSON document is the
 * library's: gm_estimate_report_json()). */
#ifndef GM_CLI_ESTIMATE_RENDER_H
#define GM_CLI_ESTIMATE_RENDER_H

#include "gpumem/estimate.h"

#include <stdbool.h>
#include <stdio.h>

/* The report as text: the component table with bytes, GB (1e9) and GiB (2^30) columns,
 * the phase peaks, the three figures, the verdict and what to change, every assumption,
 * then the sections of the setup (model files, DeepSpeed, LoRA, devices, engine,
 * search).  'color' marks the verdicts with ANSI colours. */
void est_render_text(FILE *f, const struct gm_estimate_report *r, bool color);

#endif
