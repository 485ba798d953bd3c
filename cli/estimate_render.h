/* SPDX-License-Identifier: MIT */
/* estimate_render.h - human table and JSON document of `gpumem estimate`. */
#ifndef GM_CLI_ESTIMATE_RENDER_H
#define GM_CLI_ESTIMATE_RENDER_H

#include "gpumem/estimate.h"
#include "gpumem/json.h"

#include <stdbool.h>
#include <stdio.h>

/* One "what to change" alternative: the flag to add and its device figure. */
struct est_suggestion {
    char change[128];
    uint64_t device_bytes;
    bool fits;
};

struct est_view {
    const struct gm_estimate_inputs *in;
    const struct gm_estimate *e;
    const struct gm_model *model; /* NULL for plain numbers */
    const struct gm_gpu *gpu;     /* --gpu, or NULL */
    uint64_t gpu_bytes;           /* capacity judged against, 0 = list the catalog */
    const char *gpu_label;        /* name shown for the capacity */
    struct est_suggestion sugg[8];
    int n_sugg;
    bool color;
};

void est_render_text(FILE *f, const struct est_view *v);
void est_render_json(struct gm_json *w, const struct est_view *v);

#endif
