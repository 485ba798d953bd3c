/* SPDX-License-Identifier: MIT */
/* stage_model.c - the first stage: how many parameters, and how the weights are stored.
 *
 * The count is the architecture's (gm_model_count_params), the weight files' exact sum
 * when the model came from files, or --parameters (which overrides, and is needed for an
 * architecture gpumem cannot count from a config alone).  A checkpoint of packed weights
 * (GPTQ / AWQ int32 qweight, bitsandbytes uint8) stores fewer elements than it has
 * parameters, so its count comes from the architecture.
 *
 * For inference and weights-only estimates the weights are as stored: --bits B (every
 * parameter at B bits: a plain override, no scheme), else a weight format (--quant, or the
 * checkpoint's quantization_config: weights.c gives each scheme's bytes and what it leaves
 * in 16 bit; a quantised checkpoint's own files give their exact bytes), else the files'
 * tensor bytes (GGUF: every tensor at its ggml type, as the headers say; such a file's
 * format is GM_QUANT_GGUF only so that training refuses it), else the
 * config's torch_dtype, else 16 bit.  Training decides its own weight copies from
 * --precision (stage_train.c); it cannot train quantised weights (adapters can: stage 4). */
#include "estimate/estimate_int.h"

#include <stdio.h>
#include <string.h>

/* ---- weight formats (bitsandbytes, GPTQ, AWQ, FP8) ---- */

/* "GPTQ 4-bit, groups of 128", "bitsandbytes NF4, double-quantised", "FP8 per block". */
static void format_name(const struct gm_quant *q, char *b, size_t n)
{
    static const char *const scales[] = {"per tensor", "per channel", "per block", "per group"};
    char group[32] = "whole columns";
    if (q->group_size)
        snprintf(group, sizeof group, "groups of %llu", (unsigned long long)q->group_size);
    switch (q->method) {
    case GM_QUANT_BNB_INT8:
        snprintf(b, n, "bitsandbytes LLM.int8 (int8, fp32 row scales)");
        break;
    case GM_QUANT_BNB_NF4:
    case GM_QUANT_BNB_FP4:
        snprintf(b, n, "bitsandbytes %s, blocks of 64, %s", gm_quant_method_name(q->method),
                 q->double_quant ? "double-quantised absmax" : "fp32 absmax");
        break;
    case GM_QUANT_GPTQ:
        snprintf(b, n, "GPTQ %u-bit, %s, fp16 scales, packed zeros, g_idx%s", q->bits, group,
                 q->desc_act ? " (act-order)" : "");
        break;
    case GM_QUANT_AWQ:
        snprintf(b, n, "AWQ %u-bit, %s, fp16 scales%s", q->bits, group,
                 q->zeros ? ", packed zeros" : "");
        break;
    case GM_QUANT_FP8:
        snprintf(b, n, "FP8 e4m3, fp32 scales %s%s", scales[q->scale],
                 q->input_scale ? ", static input scales" : "");
        break;
    case GM_QUANT_INT:
        snprintf(b, n, "compressed-tensors int%u, %s%s", q->bits, group,
                 q->zeros ? ", zero points" : "");
        break;
    case GM_QUANT_MXFP4:
        snprintf(b, n, "MXFP4 (e2m1), one e8m0 scale per %llu inputs",
                 (unsigned long long)q->group_size);
        break;
    case GM_QUANT_NVFP4:
        snprintf(b, n, "NVFP4 (e2m1), one fp8 e4m3 scale per %llu inputs, fp32 global scales",
                 (unsigned long long)q->group_size);
        break;
    default:
        snprintf(b, n, "%s", gm_quant_method_name(q->method));
        break;
    }
}

/* The roles of the model that the format leaves in plain floats, as a phrase. */
static void kept_roles(const struct gm_quant *q, const struct gm_param_counts *pc, char *b,
                       size_t n)
{
    unsigned keep = gm_quant_kept_roles(q);
    size_t len = 0;
    b[0] = '\0';
    for (int r = 0; r < GM_ROLE__COUNT && len + 1 < n; r++) {
        if (!(keep & (1u << r)) || !pc->by_role[r])
            continue;
        snprintf(b + len, n - len, "%s%s", len ? ", " : "",
                 gm_param_role_name((enum gm_param_role)r));
        len = strlen(b);
    }
}

/* Whether the model files hold this format's checkpoint (their bytes are the answer). */
static bool files_are_format(const struct gm_job *j, const struct gm_model *m)
{
    if (!m || !m->weight_bytes_file || m->quant.method == GM_QUANT_NONE)
        return false;
    return j->numerics.weight_format == GM_WEIGHTS_AS_STORED ||
           (j->numerics.weight_format == GM_WEIGHTS_QUANT &&
            j->numerics.quant.method == m->quant.method);
}

/* Refusals of the weight format: quantised weights take no gradients; --quant cannot
 * re-quantise a quantised checkpoint; a format needs an architecture to place. */
static enum gm_status check_format(const struct est_ctx *cx, bool counted, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_model *m = cx->m;
    const struct gm_quant *q = cx->quant;
    if (m && m->quant.unknown[0] && !m->weight_bytes_file &&
        j->numerics.weight_format != GM_WEIGHTS_BITS)
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "quantization_config quant_method '%s' is not a weight format gpumem "
                       "knows (gptq, awq, bitsandbytes, fp8, fbgemm_fp8, compressed-tensors); "
                       "give the weight files, or --bits B",
                       m->quant.unknown);
    if (j->numerics.weight_format == GM_WEIGHTS_QUANT && m && m->quant.method != GM_QUANT_NONE &&
        m->quant.method != j->numerics.quant.method)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--quant %s: the checkpoint is already %s (a weight format applies to "
                       "16-bit weights)",
                       gm_quant_method_name(j->numerics.quant.method),
                       gm_quant_method_name(m->quant.method));
    if (j->mode == GM_EST_TRAIN && j->memory.adapter == GM_ADAPTER_QLORA && m &&
        m->quant.method != GM_QUANT_NONE && m->quant.method != GM_QUANT_BNB_NF4)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--qlora quantises a 16-bit checkpoint to NF4; this one is %s already: "
                       "train --lora adapters on its frozen %s base instead",
                       gm_quant_method_name(m->quant.method),
                       gm_quant_method_name(m->quant.method));
    if (j->mode == GM_EST_TRAIN && j->memory.adapter == GM_ADAPTER_NONE && q)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--train: %s weights cannot be fully fine-tuned (quantised weights take "
                       "no gradients): train adapters on the frozen base with --lora, or "
                       "--qlora (adapters on an NF4 base quantised from the 16-bit checkpoint)",
                       gm_quant_method_name(q->method));
    if (q && q->method != GM_QUANT_GGUF && !files_are_format(j, m) && !counted)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--quant %s needs an architecture gpumem counts (its layout decides which "
                       "weights are quantised): give MODEL",
                       gm_quant_method_name(q->method));
    return GM_OK;
}

/* The weights in the job's format: cx->format_bytes and the component's note. */
static void format_bytes(struct est_ctx *cx, char *note, size_t n)
{
    const struct gm_model *m = cx->m;
    const struct gm_quant *q = cx->quant;
    unsigned bits = m ? gm_dtype_bits(m->dtype) : 0, plain = bits == 32 ? 4 : 2;
    char what[96], kept[96];
    struct est_format f;
    format_name(q, what, sizeof what);
    kept_roles(q, &cx->pc, kept, sizeof kept);
    if (files_are_format(cx->job, m)) {
        cx->format_bytes = m->weight_bytes_file;
        snprintf(note, n, "%llu bytes of %s tensors in the model files",
                 (unsigned long long)cx->format_bytes, gm_quant_method_name(q->method));
        est_assume(cx->e,
                   "weights as stored in the %s checkpoint (%llu bytes from the headers: every "
                   "tensor at its stored type, packed values, scales and zeros)",
                   gm_quant_method_name(q->method), (unsigned long long)cx->format_bytes);
        return;
    }
    est_format_weights(&cx->pc, q, plain, &f);
    cx->format_bytes = f.bytes;
    snprintf(note, n, "%llu parameters in %s (%llu B of constants), %llu in %u-bit floats",
             (unsigned long long)f.quantised, gm_quant_method_name(q->method),
             (unsigned long long)f.constants, (unsigned long long)f.plain, plain * 8);
    est_assume(cx->e, "weights in %s; the scheme leaves the %s weights in %u-bit floats", what,
               kept, plain * 8);
}

enum gm_status est_stage_model(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_model *m = cx->m;
    struct gm_estimate *e = cx->e;
    uint64_t given = j->model.n_params, n;
    bool counted = false;
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    memset(&cx->pc, 0, sizeof(cx->pc));
    if (j->model.origin)
        est_assume(e, "%s", j->model.origin);
    if (j->from)
        est_assume(e, "%s", j->from);
    if (m) {
        struct gm_error verr;
        st = gm_model_count_params(m, &cx->pc, &verr);
        if (st == GM_ERR_UNSUPPORTED && (given || m->n_params_file)) {
            /* Unknown family: the count comes from the caller or the files; the
             * architecture fields still drive activations and KV, and the llama layout
             * they are taken in places the matrices (weight formats, QLoRA) */
            struct gm_model like = *m;
            like.arch = GM_ARCH_LLAMA;
            if (gm_model_count_params(&like, &cx->pc, NULL) != GM_OK)
                memset(&cx->pc, 0, sizeof(cx->pc));
            if (m->no_config)
                est_assume(e,
                           "no config.json beside the weights: bytes exact from the header; "
                           "activations and KV by a generic rule (%llu GPT-2 layers of width "
                           "%llu, 64-wide heads, MLP %llu)",
                           (unsigned long long)m->n_layers, (unsigned long long)m->hidden,
                           (unsigned long long)m->intermediate);
            else if (m->generic)
                est_assume(e,
                           "model type '%s' is not one gpumem knows: weights exact from its "
                           "files; activations and KV by a generic rule (its %llu layers as "
                           "GPT-2 layers of width %llu, 64-wide heads, MLP %llu)",
                           m->model_type[0] ? m->model_type : "?", (unsigned long long)m->n_layers,
                           (unsigned long long)m->hidden, (unsigned long long)m->intermediate);
            else
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
            /* the files' exact count wins, unless they hold packed weights (a GPTQ qweight
             * element holds 32 / bits parameters) */
            if (m->n_params_file && !j->model.n_params &&
                (m->quant.method == GM_QUANT_NONE || m->quant.method == GM_QUANT_GGUF))
                cx->pc.total = m->n_params_file;
            else if (m->n_params_file && !j->model.n_params && m->n_params_file != cx->pc.total)
                est_assume(e,
                           "parameters from the architecture (%llu): the %s files store packed "
                           "weights, %llu elements",
                           (unsigned long long)cx->pc.total, gm_quant_method_name(m->quant.method),
                           (unsigned long long)m->n_params_file);
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

    if (m && m->text_only)
        est_assume(e, "the language model of a multimodal checkpoint: its vision tower and "
                      "projector are not counted");
    if (m && m->from_shapes && !m->generic) {
        char b[96] = "";
        static const struct {
            unsigned flag;
            const char *name;
        } fields[] = {
            {GM_FROM_SHAPES_VOCAB, "vocabulary"},  {GM_FROM_SHAPES_FFN, "FFN width"},
            {GM_FROM_SHAPES_KV_HEADS, "KV heads"}, {GM_FROM_SHAPES_HIDDEN, "hidden size"},
            {GM_FROM_SHAPES_LAYERS, "layers"},     {GM_FROM_SHAPES_HEAD_DIM, "head size"}};
        for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
            if (m->from_shapes & fields[i].flag)
                snprintf(b + strlen(b), sizeof b - strlen(b), "%s%s", b[0] ? ", " : "",
                         fields[i].name);
        est_assume(e,
                   "%s from the weight files' tensor shapes (the metadata leaves %s out or "
                   "disagrees)",
                   b, (m->from_shapes & (m->from_shapes - 1)) ? "them" : "it");
    }
    cx->quant = est_job_quant(j);
    /* Lightning's BitsandbytesPrecision (weights.c est_bnb_lightning()) */
    if (est_bnb_lightning(j) && (j->memory.adapter == GM_ADAPTER_QLORA ||
                                 (cx->quant && (cx->quant->method == GM_QUANT_BNB_NF4 ||
                                                cx->quant->method == GM_QUANT_BNB_FP4 ||
                                                cx->quant->method == GM_QUANT_BNB_INT8))))
        est_assume(e,
                   "bitsandbytes through Lightning: every linear quantised, the lm_head too, "
                   "from an fp16 copy; a matmul dequantises to fp16, then casts to the compute "
                   "dtype: %s",
                   est_bnb_dequant_copies(j) > 1 ? "two 16-bit copies" : "one copy (fp16 compute)");
    if ((st = check_format(cx, counted, err)) != GM_OK)
        return st;
    cx->stored_bits = j->numerics.weight_format == GM_WEIGHTS_BITS ? j->numerics.weight_bits
                      : (m && gm_dtype_bits(m->dtype))             ? (double)gm_dtype_bits(m->dtype)
                                                                   : 16.0;
    if (cx->quant && cx->quant->method != GM_QUANT_GGUF) {
        format_bytes(cx, note, sizeof note);
        cx->stored_weight_bytes = cx->format_bytes;
        cx->weights_from_files = files_are_format(j, m);
        /* the compute dtype: the plain floats the format keeps */
        cx->stored_bits = m && gm_dtype_bits(m->dtype) == 32 ? 32.0 : 16.0;
        if (j->mode == GM_EST_TRAIN)
            return GM_OK;
        return est_add(e, GM_KIND_WEIGHTS, "weights", cx->stored_weight_bytes,
                       GM_EST_PHASE_INFER_ALL, false, GM_EXTENT_ALL_LAYERS, note, err);
    }
    if (m && m->quant.method == GM_QUANT_MXFP4 && j->mode == GM_EST_TRAIN && !cx->quant)
        est_assume(e, "the MXFP4 checkpoint is loaded dequantised to bf16 for training "
                      "(transformers Mxfp4Config(dequantize=True): the MXFP4 kernels have no "
                      "backward)");
    cx->weights_from_files = m && m->weight_bytes_file &&
                             j->numerics.weight_format == GM_WEIGHTS_AS_STORED &&
                             !(m->quant.method == GM_QUANT_MXFP4 && j->mode == GM_EST_TRAIN);
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
