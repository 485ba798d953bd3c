/* SPDX-License-Identifier: MIT */
/* weights.c - the bytes of a model's weights in a weight format: every matrix weight of
 * the architecture (struct gm_linear_class, from gm_model_count_params) in the scheme's
 * layout, or in plain floats where the scheme leaves its role alone
 * (gm_quant_kept_roles()); everything that is not a matrix (embeddings, norms, biases,
 * tables) in plain floats.
 *
 * One weight of out x in elements (n = out x in), groups g = ceil(in / group_size) (one
 * group when group_size is 0), as each format stores it on the GPU:
 *   int8 (bitsandbytes Int8Params)  n int8 + one fp32 scale per row (SCB): n + 4 out
 *   nf4 / fp4 (bitsandbytes Params4bit)  n/2 packed bytes + one absmax per block of 64:
 *                 fp32 (4 B), or double-quantised: 1 B + one fp32 per 256 blocks
 *                 (gm_nf4_bytes); the 16-entry code tables are not counted (~1 KB a weight)
 *   gptq          qweight n x bits/8 (int32-packed) + fp16 scales 2 g out + qzeros
 *                 g x ceil(out x bits / 32) x 4 + g_idx 4 in (int32 per input feature)
 *   awq           qweight n x bits/8 + fp16 scales 2 g out + qzeros (zero_point) as GPTQ's
 *   fp8           n + fp32 scales: 4 (per tensor), 4 out (per channel) or
 *                 4 ceil(out/128) ceil(in/128) (per block) + 4 for a static input scale
 *   int (compressed-tensors pack-quantized)  n x bits/8 + scales g x out in the plain dtype
 *                 + zero points g x out x bits/8 when asymmetric + 16 (weight_shape)
 *   mxfp4         n/2 packed e2m1 pairs (the *_blocks tensors) + one e8m0 byte per 32 inputs
 *                 of a row (the *_scales tensors): n/2 + out ceil(in/32)
 *   nvfp4         n/2 + one fp8 e4m3 scale per 16 inputs of a row + fp32 weight_scale_2 and
 *                 input_scale: n/2 + out ceil(in/16) + 8
 * These reproduce the published checkpoints' sizes (tests/data/estimate/checkpoint_sizes.csv,
 * within 0.2% where the sizes are exact to that precision). */
#include "estimate/estimate_int.h"

uint64_t gm_nf4_bytes(uint64_t n, uint64_t block, bool double_quant)
{
    uint64_t blocks, data = n / 2 + n % 2;
    if (block == 0)
        block = 64;
    blocks = n / block + (n % block != 0);
    if (!double_quant)
        return gm_add_sat(data, gm_mul_sat(blocks, 4));
    /* 8-bit absmax per block, then one fp32 scale (and offset folded in) per 256 blocks */
    return gm_add_sat(gm_add_sat(data, blocks), gm_mul_sat(blocks / 256 + (blocks % 256 != 0), 4));
}

/* Bytes of one out x in weight in format 'q' (no bias). */
static uint64_t matrix_bytes(const struct gm_quant *q, uint64_t out, uint64_t in, unsigned plain)
{
    uint64_t n = gm_mul_sat(out, in);
    uint64_t g = q->group_size && q->method != GM_QUANT_BNB_NF4 && q->method != GM_QUANT_BNB_FP4
                     ? est_div_up(in, q->group_size)
                     : 1;
    uint64_t packed = est_div_up(gm_mul_sat(n, q->bits ? q->bits : 4), 8), b;
    switch (q->method) {
    case GM_QUANT_BNB_INT8:
        return gm_add_sat(n, gm_mul_sat(out, 4));
    case GM_QUANT_BNB_NF4:
    case GM_QUANT_BNB_FP4:
        return gm_nf4_bytes(n, q->group_size ? q->group_size : 64, q->double_quant);
    case GM_QUANT_GPTQ:
    case GM_QUANT_AWQ:
        b = gm_add_sat(packed, gm_mul_sat(gm_mul_sat(g, out), 2));
        if (q->zeros)
            b = gm_add_sat(b,
                           gm_mul_sat(gm_mul_sat(g, est_div_up(gm_mul_sat(out, q->bits), 32)), 4));
        if (q->g_idx)
            b = gm_add_sat(b, gm_mul_sat(in, 4));
        return b;
    case GM_QUANT_FP8:
        b = n;
        if (q->scale == GM_SCALE_CHANNEL)
            b = gm_add_sat(b, gm_mul_sat(out, 4));
        else if (q->scale == GM_SCALE_BLOCK)
            b = gm_add_sat(
                b, gm_mul_sat(gm_mul_sat(est_div_up(out, q->block_rows ? q->block_rows : 128),
                                         est_div_up(in, q->block_cols ? q->block_cols : 128)),
                              4));
        else
            b = gm_add_sat(b, 4);
        return q->input_scale ? gm_add_sat(b, 4) : b;
    case GM_QUANT_MXFP4:
    case GM_QUANT_NVFP4:
        b = gm_add_sat(est_div_up(n, 2), gm_mul_sat(out, g));
        return q->method == GM_QUANT_NVFP4 ? gm_add_sat(b, 8) : b;
    case GM_QUANT_INT:
        b = gm_add_sat(packed, gm_mul_sat(gm_mul_sat(g, out), plain));
        if (q->zeros)
            b = gm_add_sat(b, est_div_up(gm_mul_sat(gm_mul_sat(g, out), q->bits), 8));
        return gm_add_sat(b, 16);
    default:
        return gm_mul_sat(n, plain);
    }
}

void est_format_weights(const struct gm_param_counts *pc, const struct gm_quant *q, unsigned plain,
                        struct est_format *out)
{
    unsigned keep = gm_quant_kept_roles(q);
    uint64_t in_linears = 0, bytes = 0;
    out->quantised = out->constants = 0;
    for (size_t i = 0; i < pc->n_linears; i++) {
        const struct gm_linear_class *k = &pc->linears[i];
        uint64_t n = gm_mul_sat(k->out, k->in), bias = k->bias ? k->out : 0;
        in_linears = gm_add_sat(in_linears, gm_mul_sat(gm_add_sat(n, bias), k->copies));
        if (keep & (1u << k->role)) {
            bytes =
                gm_add_sat(bytes, gm_mul_sat(gm_mul_sat(gm_add_sat(n, bias), k->copies), plain));
            continue;
        }
        {
            uint64_t mb = matrix_bytes(q, k->out, k->in, plain);
            uint64_t data = est_div_up(gm_mul_sat(n, q->bits ? q->bits : 4), 8);
            bytes =
                gm_add_sat(bytes, gm_mul_sat(gm_add_sat(mb, gm_mul_sat(bias, plain)), k->copies));
            out->quantised = gm_add_sat(out->quantised, gm_mul_sat(n, k->copies));
            if (mb > data)
                out->constants = gm_add_sat(out->constants, gm_mul_sat(mb - data, k->copies));
        }
    }
    /* embeddings, norms, tables: not matrices of the layers */
    out->plain = pc->total > out->quantised ? pc->total - out->quantised : 0;
    bytes =
        gm_add_sat(bytes, gm_mul_sat(pc->total > in_linears ? pc->total - in_linears : 0, plain));
    out->bytes = bytes;
}

/* Lightning Fabric's BitsandbytesPrecision, as LitGPT 8641822 uses it (generate/base.py,
 * finetune/lora.py: BitsandbytesPrecision(mode, dtype), no ignore_modules): the plugin
 * replaces every torch.nn.Linear (_convert_layers, or the class replacement under
 * init_module), the lm_head included, and _Linear4bit._quantize_weight quantises
 * weight.to(device="cuda", dtype=torch.half) (src/lightning/fabric/plugins/precision/
 * bitsandbytes.py, Lightning-AI/pytorch-lightning 71aed751, the commit LitGPT 8641822 pins).
 * bitsandbytes' quantize_4bit records the input's dtype in the quantisation state and
 * dequantize_4bit allocates its output in that dtype; MatMul4Bit then casts it to the
 * input's dtype, F.dequantize_4bit(B, state).to(A.dtype) (bitsandbytes 0.41.1, 18e827d,
 * autograd/_functions.py and functional.py): under bf16 both copies live during the cast. */
bool est_bnb_lightning(const struct gm_job *job)
{
    return job->stack.model_impl == GM_MODEL_IMPL_LITGPT;
}

/* The dtype Lightning's plugin computes in: a training job's --precision; a serving job's
 * the precision LitGPT picks, get_default_supported_precision(training=False) in
 * lit_gpt/utils.py (LitGPT 8641822): "bf16-true" where the GPU has bf16, "16-true" before
 * compute capability 8.0 (T4, V100) */
bool est_bnb_compute_fp16(const struct gm_job *job)
{
    if (job->mode == GM_EST_INFER)
        return job->gpu.sm && job->gpu.sm < 80;
    return job->numerics.precision == GM_PREC_FP16_MIXED;
}

unsigned est_bnb_dequant_copies(const struct gm_job *job)
{
    return est_bnb_lightning(job) && !est_bnb_compute_fp16(job) ? 2 : 1;
}

const struct gm_quant *est_job_quant(const struct gm_job *job)
{
    const struct gm_model *m = job->model.model;
    if (job->numerics.weight_format == GM_WEIGHTS_QUANT)
        return &job->numerics.quant;
    if (job->numerics.weight_format == GM_WEIGHTS_BITS || !m || m->quant.method == GM_QUANT_NONE)
        return NULL;
    /* MXFP4 kernels have no backward: a training job loads the checkpoint dequantised to
     * bf16 (transformers Mxfp4Config(dequantize=True), as OpenAI's fine-tuning cookbook
     * does); est_stage_model() says so */
    if (job->mode == GM_EST_TRAIN && m->quant.method == GM_QUANT_MXFP4)
        return NULL;
    return &m->quant;
}
