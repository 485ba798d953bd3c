/* SPDX-License-Identifier: MIT */
/* stage_model.c - the first stage: how many parameters, and how the weights are stored.
 *
 * The count is the architecture's (gm_model_count_params), the weight files' exact sum
 * when the model came from files, or --parameters (which overrides, and is needed for an
 * architecture gpumem cannot count).  For inference and weights-only estimates the
 * weights are as stored: the files' tensor bytes (every dtype and quantisation block from
 * the headers), else --bits, else the config's torch_dtype, else 16 bit.  Training
 * decides its own weight copies from --precision (stage_train.c). */
#include "estimate/estimate_int.h"

#include <stdio.h>
#include <string.h>

enum gm_status est_stage_model(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_model *m = cx->m;
    struct gm_estimate *e = cx->e;
    uint64_t given = j->model.n_params, n;
    bool counted = false;
    char note[GM_EST_NOTE_MAX];

    memset(&cx->pc, 0, sizeof(cx->pc));
    if (m) {
        struct gm_error verr;
        enum gm_status st = gm_model_count_params(m, &cx->pc, &verr);
        if (st == GM_ERR_UNSUPPORTED && (given || m->n_params_file)) {
            /* Unknown family: the count comes from the caller or the files; the
             * architecture fields still drive activations and KV. */
            memset(&cx->pc, 0, sizeof(cx->pc));
            est_assume(e,
                       "model type '%s' is not one gpumem counts; parameters %s, layout "
                       "assumed llama-like",
                       m->model_type[0] ? m->model_type : "?",
                       given ? "given explicitly" : "from the model files");
            if (!given)
                given = m->n_params_file;
        } else if (st != GM_OK) {
            if (err)
                *err = verr;
            return st;
        } else {
            counted = true;
            if (m->n_params_file && !j->model.n_params)
                cx->pc.total = m->n_params_file;
        }
    }
    n = given ? given : (m ? cx->pc.total : 0);
    if (!n)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "no model and no parameter count (give MODEL or --parameters N)");
    if (j->model.n_params && m && cx->pc.total && j->model.n_params != cx->pc.total)
        est_assume(e, "parameter count given (%llu) overrides the architecture's (%llu)",
                   (unsigned long long)j->model.n_params, (unsigned long long)cx->pc.total);
    cx->pc.total = n;
    if (!counted)
        cx->pc.largest_tensor = n;
    cx->n = n;
    e->n_params = n;
    e->largest_layer_params = j->model.largest_layer_params ? j->model.largest_layer_params
                              : j->model.files              ? j->model.files->largest_module_params
                              : counted                     ? cx->pc.largest_tensor
                                                            : 0;

    cx->stored_bits = j->numerics.weight_format == GM_WEIGHTS_BITS ? j->numerics.weight_bits
                      : (m && gm_dtype_bits(m->dtype))             ? (double)gm_dtype_bits(m->dtype)
                                                                   : 16.0;
    cx->weights_from_files =
        m && m->weight_bytes_file && j->numerics.weight_format == GM_WEIGHTS_AS_STORED;
    cx->stored_weight_bytes =
        cx->weights_from_files ? m->weight_bytes_file : est_bits_bytes(n, cx->stored_bits);
    if (j->mode == GM_EST_TRAIN)
        return GM_OK;

    if (cx->weights_from_files)
        snprintf(note, sizeof note, "%llu bytes of tensor data in the model files",
                 (unsigned long long)cx->stored_weight_bytes);
    else
        snprintf(note, sizeof note, "%llu parameters x %g bits", (unsigned long long)n,
                 cx->stored_bits);
    if (cx->weights_from_files)
        est_assume(e,
                   "weights as stored in the model files (%llu bytes, every dtype and "
                   "quantisation block counted from the headers)",
                   (unsigned long long)cx->stored_weight_bytes);
    else if (j->mode == GM_EST_WEIGHTS)
        est_assume(e, "weights only: %g bits per parameter, no quantisation constants",
                   cx->stored_bits);
    else
        est_assume(e, "weights at %g bits per parameter%s", cx->stored_bits,
                   cx->stored_bits < 16 ? " (quantisation constants not included unless in --bits)"
                                        : "");
    return est_add(e, GM_KIND_WEIGHTS, "weights", cx->stored_weight_bytes, GM_EST_PHASE_INFER_ALL,
                   false, GM_EXTENT_ALL_LAYERS, note, err);
}
