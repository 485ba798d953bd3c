/* SPDX-License-Identifier: MIT */
/* estimate.c - entry point of the estimator: inputs, components, phase peaks and the three
 * predicted figures (peak allocated, peak reserved, device used).
 *
 * Phase accounting: each component carries the set of phases during which it is live.  A
 * phase's allocated peak is the sum of its live components; the job's peak allocated is
 * the largest phase.  Reserved adds the allocator's excess on transient memory (blocks
 * freed and reused at different sizes leave cached but unused segments): fragmentation x
 * transient bytes of the peak phase, rounded up to the 2 MiB segment granularity.  Device
 * used adds what lives outside the caching allocator: the CUDA context and library
 * workspaces. */
#include "gpumem/estimate.h"

#include "estimate/estimate_int.h"
#include "gpumem/units.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void gm_estimate_inputs_init(struct gm_estimate_inputs *in)
{
    memset(in, 0, sizeof(*in));
    in->mode = GM_EST_WEIGHTS;
    in->method = GM_METHOD_ARCH;
    in->precision = GM_PREC_BF16_MIXED;
    in->optimizer = GM_OPT_ADAMW;
    in->optim_impl = GM_OPTIM_FOREACH;
    in->grad_ckpt = GM_CKPT_NONE;
    in->attention = GM_ATTN_SDPA;
    in->zero_grad = GM_ZERO_GRAD_SET_TO_NONE;
    in->batch = 1;
    in->seq = 2048;
    in->context = 2048;
    in->new_tokens = 0;
    in->kv_dtype = GM_DTYPE_UNKNOWN;
    in->cuda_context_bytes = 450 * GM_MIB;
    in->workspace_bytes = 64 * GM_MIB;
    in->fragmentation = 0.25;
}

uint64_t est_round(double bytes)
{
    if (!(bytes > 0))
        return 0;
    if (bytes >= 18446744073709549568.0)
        return UINT64_MAX;
    return (uint64_t)llround(bytes);
}

uint64_t est_bits_bytes(uint64_t n, double bits)
{
    double whole = floor(bits);
    /* Integral bit widths are computed exactly in integers. */
    if (whole == bits && bits >= 1 && bits <= 64) {
        uint64_t b = (uint64_t)bits;
        uint64_t q = n / 8, r = n % 8;
        return gm_add_sat(gm_mul_sat(q, b), (r * b + 7) / 8);
    }
    return est_round(ceil((double)n * bits / 8.0));
}

enum gm_status gm_estimate_add_component(struct gm_estimate *e, const char *name, uint64_t bytes,
                                         unsigned phases, bool transient, const char *note,
                                         struct gm_error *err)
{
    struct gm_est_component *c;
    if (e->n_components >= GM_EST_MAX_COMPONENTS)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "estimate: more than %d components",
                       GM_EST_MAX_COMPONENTS);
    c = &e->components[e->n_components++];
    memset(c, 0, sizeof(*c));
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->bytes = bytes;
    c->phases = phases;
    c->transient = transient;
    if (note)
        snprintf(c->note, sizeof(c->note), "%s", note);
    return GM_OK;
}

void gm_estimate_assume(struct gm_estimate *e, const char *fmt, ...)
{
    va_list ap;
    if (e->n_assumptions >= GM_EST_MAX_ASSUMPTIONS)
        return;
    va_start(ap, fmt);
    vsnprintf(e->assumptions[e->n_assumptions++], GM_EST_NOTE_MAX, fmt, ap);
    va_end(ap);
}

static uint64_t phase_sum(const struct gm_estimate *e, unsigned phase, bool transient_only)
{
    uint64_t s = 0;
    for (size_t i = 0; i < e->n_components; i++)
        if ((e->components[i].phases & phase) && (!transient_only || e->components[i].transient))
            s = gm_add_sat(s, e->components[i].bytes);
    return s;
}

void gm_estimate_finish(const struct gm_estimate_inputs *in, struct gm_estimate *e)
{
    static const unsigned order[] = {GM_EST_PHASE_FORWARD_BACKWARD, GM_EST_PHASE_BACKWARD_END,
                                     GM_EST_PHASE_OPTIMIZER_STEP, GM_EST_PHASE_PREFILL,
                                     GM_EST_PHASE_DECODE};
    unsigned best = 0;
    uint64_t peak = 0, transient, frag, reserved;

    e->backward_start_bytes = phase_sum(e, GM_EST_PHASE_FORWARD_BACKWARD, false);
    e->backward_end_bytes = phase_sum(e, GM_EST_PHASE_BACKWARD_END, false);
    e->forward_backward_bytes = e->backward_start_bytes > e->backward_end_bytes
                                    ? e->backward_start_bytes
                                    : e->backward_end_bytes;
    e->optimizer_step_bytes = phase_sum(e, GM_EST_PHASE_OPTIMIZER_STEP, false);
    e->prefill_bytes = phase_sum(e, GM_EST_PHASE_PREFILL, false);
    e->decode_bytes = phase_sum(e, GM_EST_PHASE_DECODE, false);
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        uint64_t s = phase_sum(e, order[i], false);
        if (s > peak) {
            peak = s;
            best = order[i];
        }
    }
    /* The end of backward belongs to the forward/backward phase. */
    e->peak_phase = best == GM_EST_PHASE_BACKWARD_END
                        ? GM_EST_PHASE_FORWARD_BACKWARD
                        : (enum gm_est_phase)(best ? best : GM_EST_PHASE_PREFILL);
    if (e->mode == GM_EST_WEIGHTS)
        e->peak_phase = GM_EST_PHASE_PREFILL;
    e->peak_allocated_bytes = peak;

    transient = best ? phase_sum(e, best, true) : 0;
    frag = est_round((double)transient * (in->fragmentation > 0 ? in->fragmentation : 0));
    reserved = gm_add_sat(peak, frag);
    if (reserved % (2 * GM_MIB))
        reserved = gm_add_sat(reserved, 2 * GM_MIB - reserved % (2 * GM_MIB));
    e->peak_reserved_bytes = reserved;

    if (e->mode == GM_EST_WEIGHTS && in->reserve_bytes) {
        /* A flat reserve stands for everything that is not the weights. */
        e->peak_reserved_bytes = peak;
        e->cuda_context_bytes = 0;
        e->workspace_bytes = 0;
        e->device_bytes = gm_add_sat(peak, in->reserve_bytes);
        return;
    }
    if (e->mode == GM_EST_WEIGHTS)
        e->peak_reserved_bytes = peak;
    e->cuda_context_bytes = in->cuda_context_bytes;
    e->workspace_bytes = in->workspace_bytes;
    e->device_bytes =
        gm_add_sat(gm_add_sat(e->peak_reserved_bytes, in->cuda_context_bytes), in->workspace_bytes);
}

static enum gm_status check_inputs(const struct gm_estimate_inputs *in, struct gm_error *err)
{
    if (in->n_params > EST_MAX_PARAMS)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "parameters: %llu is absurd (limit 2^50)",
                       (unsigned long long)in->n_params);
    if (in->weight_bits < 0 || in->weight_bits > 64 || isnan(in->weight_bits))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "bits: must be in (0, 64]");
    if (in->reserve_bytes > EST_MAX_BYTES || in->cuda_context_bytes > EST_MAX_BYTES ||
        in->workspace_bytes > EST_MAX_BYTES || in->gpu_memory_bytes > EST_MAX_BYTES)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "a size is absurd (limit 2^60 bytes)");
    if (in->batch == 0 || in->batch > EST_MAX_BATCH)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "batch: must be 1 to %llu",
                       (unsigned long long)EST_MAX_BATCH);
    if (in->mode == GM_EST_TRAIN && (in->seq == 0 || in->seq > EST_MAX_TOKENS))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "seq: must be 1 to %llu tokens",
                       (unsigned long long)EST_MAX_TOKENS);
    if (in->mode == GM_EST_INFER &&
        (in->context > EST_MAX_TOKENS || in->new_tokens > EST_MAX_TOKENS ||
         in->context + in->new_tokens == 0))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "context + new tokens: must be 1 to %llu tokens each",
                       (unsigned long long)EST_MAX_TOKENS);
    if (in->fragmentation < 0 || in->fragmentation > 4 || isnan(in->fragmentation))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "fragmentation: must be in [0, 4]");
    if (in->activations_per_token < 0 || in->activations_per_token > 1e12 ||
        isnan(in->activations_per_token))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "activations per token: must be in [0, 1e12]");
    if ((int)in->precision < 0 || in->precision >= GM_PREC__COUNT || (int)in->optimizer < 0 ||
        in->optimizer >= GM_OPT__COUNT || (int)in->method < 0 || in->method >= GM_METHOD__COUNT)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "estimate: enum input out of range");
    return GM_OK;
}

enum gm_status gm_estimate_run(const struct gm_estimate_inputs *in, struct gm_estimate *out,
                               struct gm_error *err)
{
    struct gm_param_counts pc;
    const struct gm_model *m = in->model;
    enum gm_status st;

    memset(out, 0, sizeof(*out));
    out->mode = in->mode;
    st = check_inputs(in, err);
    if (st != GM_OK)
        return st;
    memset(&pc, 0, sizeof(pc));
    if (m) {
        struct gm_error verr;
        st = gm_model_count_params(m, &pc, &verr);
        if (st == GM_ERR_UNSUPPORTED && in->n_params) {
            /* Unknown family: the caller gave the count; the architecture fields still
             * drive activations and KV. */
            gm_estimate_assume(out,
                               "model type '%s' is not one gpumem counts; parameters "
                               "given explicitly, layout assumed llama-like",
                               m->model_type[0] ? m->model_type : "?");
        } else if (st != GM_OK) {
            if (err)
                *err = verr;
            return st;
        } else if (m->n_params_file && !in->n_params) {
            pc.total = m->n_params_file;
        }
    }
    out->n_params = in->n_params ? in->n_params : (m ? pc.total : 0);
    if (!out->n_params)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "no model and no parameter count (give MODEL or --parameters N)");
    if (in->n_params && m && pc.total && in->n_params != pc.total)
        gm_estimate_assume(out, "parameter count given (%llu) overrides the architecture's (%llu)",
                           (unsigned long long)in->n_params, (unsigned long long)pc.total);

    switch (in->mode) {
    case GM_EST_WEIGHTS: {
        double bits = in->weight_bits > 0              ? in->weight_bits
                      : (m && gm_dtype_bits(m->dtype)) ? (double)gm_dtype_bits(m->dtype)
                                                       : 16.0;
        char note[GM_EST_NOTE_MAX];
        out->weight_bytes = est_bits_bytes(out->n_params, bits);
        snprintf(note, sizeof(note), "%llu parameters x %g bits", (unsigned long long)out->n_params,
                 bits);
        st = gm_estimate_add_component(out, "weights", out->weight_bytes, GM_EST_PHASE_INFER_ALL,
                                       false, note, err);
        if (st != GM_OK)
            return st;
        gm_estimate_assume(out, "weights only: %g bits per parameter, no quantisation constants",
                           bits);
        if (in->reserve_bytes)
            gm_estimate_assume(out,
                               "the %.2f GiB reserve is an assumption for everything else "
                               "(CUDA context, activations, KV cache, fragmentation), not "
                               "a proof that the job fits",
                               (double)in->reserve_bytes / (double)GM_GIB);
        else
            gm_estimate_assume(out,
                               "device used adds the CUDA context (%.0f MiB) and library "
                               "workspaces (%.0f MiB) only; no activations or KV cache",
                               (double)in->cuda_context_bytes / (double)GM_MIB,
                               (double)in->workspace_bytes / (double)GM_MIB);
        break;
    }
    case GM_EST_TRAIN:
        st = est_train(in, m, m ? &pc : NULL, out, err);
        break;
    case GM_EST_INFER:
        st = est_infer(in, m, m ? &pc : NULL, out, err);
        break;
    default:
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "estimate: unknown mode");
    }
    if (st != GM_OK)
        return st;
    gm_estimate_finish(in, out);
    if (out->device_bytes == UINT64_MAX || out->peak_allocated_bytes == UINT64_MAX)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "the estimate exceeds 2^64 bytes: inputs are absurd");
    return GM_OK;
}

static const char *const precision_names[GM_PREC__COUNT] = {"fp32", "fp16-mixed", "bf16-mixed",
                                                            "bf16"};
static const char *const optimizer_names[GM_OPT__COUNT] = {
    "adamw", "adam", "sgd", "sgd-momentum", "adamw-8bit", "adafactor", "lion"};

const char *gm_precision_name(enum gm_precision p)
{
    return (int)p >= 0 && p < GM_PREC__COUNT ? precision_names[p] : "unknown";
}

const char *gm_optimizer_name(enum gm_optimizer o)
{
    return (int)o >= 0 && o < GM_OPT__COUNT ? optimizer_names[o] : "unknown";
}

const char *gm_est_phase_name(enum gm_est_phase p)
{
    switch (p) {
    case GM_EST_PHASE_FORWARD_BACKWARD:
        return "forward_backward";
    case GM_EST_PHASE_OPTIMIZER_STEP:
        return "optimizer_step";
    case GM_EST_PHASE_PREFILL:
        return "prefill";
    case GM_EST_PHASE_DECODE:
        return "decode";
    case GM_EST_PHASE_BACKWARD_END:
        return "backward_end";
    }
    return "unknown";
}

const char *gm_est_phases_name(unsigned phases)
{
    if ((phases & GM_EST_PHASE_TRAIN_ALL) == GM_EST_PHASE_TRAIN_ALL ||
        (phases & GM_EST_PHASE_INFER_ALL) == GM_EST_PHASE_INFER_ALL)
        return "persistent";
    if (phases == (GM_EST_PHASE_BACKWARD_END | GM_EST_PHASE_OPTIMIZER_STEP))
        return "backward+optimizer_step";
    if (phases & GM_EST_PHASE_FORWARD_BACKWARD)
        return "forward_backward";
    if (phases & GM_EST_PHASE_OPTIMIZER_STEP)
        return "optimizer_step";
    if (phases & GM_EST_PHASE_PREFILL)
        return "prefill";
    if (phases & GM_EST_PHASE_DECODE)
        return "decode";
    return "none";
}
