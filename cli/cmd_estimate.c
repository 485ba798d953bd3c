/* SPDX-License-Identifier: MIT */
/* cmd_estimate.c - gpumem estimate: will this training or inference job fit on my GPU?
 * Parses options into a struct gm_estimate_inputs, runs the estimator, and when the job
 * does not fit a given GPU re-runs it with one change at a time to say what helps. */
#include "cli.h"
#include "commands.h"
#include "estimate_ext.h"
#include "estimate_render.h"
#include "opts.h"

#include "gpumem/estimate.h"
#include "gpumem/model.h"
#include "gpumem/units.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const precision_choices[] = {"fp32", "fp16-mixed", "bf16-mixed", "bf16", NULL};
static const char *const optimizer_choices[] = {"adamw",      "adam",      "sgd",  "sgd-momentum",
                                                "adamw-8bit", "adafactor", "lion", NULL};
static const char *const impl_choices[] = {"foreach", "fused", "for-loop", NULL};
static const char *const ckpt_choices[] = {"none", "full", "selective", NULL};
static const char *const attn_choices[] = {"sdpa", "eager", NULL};
static const char *const method_choices[] = {"arch", "blog", "deepspeed", NULL};
static const char *const zero_grad_choices[] = {"set-to-none", "zeros", NULL};
static const char *const kv_choices[] = {"auto", "fp32", "fp16", "bf16",
                                         "fp8",  "int8", "int4", NULL};
static const enum gm_dtype kv_dtypes[] = {GM_DTYPE_UNKNOWN, GM_DTYPE_F32,     GM_DTYPE_F16,
                                          GM_DTYPE_BF16,    GM_DTYPE_F8_E4M3, GM_DTYPE_I8,
                                          GM_DTYPE_INT4};

static int list_models(void)
{
    printf("%-26s %-36s %16s\n", "name", "hub id", "parameters");
    for (size_t i = 0; i < gm_model_catalog_count(); i++) {
        struct gm_param_counts pc;
        struct gm_error err;
        const struct gm_model *m = gm_model_catalog_get(i);
        if (gm_model_count_params(m, &pc, &err) != GM_OK)
            return cli_fail("gpumem estimate", &err);
        printf("%-26s %-36s %16llu\n", m->name, gm_model_catalog_hub_id(i),
               (unsigned long long)pc.total);
    }
    return 0;
}

static int list_gpus(void)
{
    printf("%-14s %-12s %10s %10s\n", "name", "kind", "MiB", "GiB");
    for (size_t i = 0; i < gm_gpu_catalog_count(); i++) {
        const struct gm_gpu *g = gm_gpu_catalog_get(i);
        printf("%-14s %-12s %10llu %10.2f\n", g->name, g->kind,
               (unsigned long long)(g->memory_bytes / GM_MIB),
               (double)g->memory_bytes / (double)GM_GIB);
    }
    return 0;
}

/* "80" means 80 GiB; anything with a unit goes through gm_parse_size(). */
static enum gm_status parse_gpu_memory(const char *s, uint64_t *out, struct gm_error *err)
{
    double d;
    if (strspn(s, "0123456789.") == strlen(s)) {
        if (gm_parse_double(s, &d, err) != GM_OK || !(d > 0) || d > 1048576.0)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--gpu-memory: '%s' is not a size in GiB between 0 and 1048576", s);
        *out = (uint64_t)llround(d * (double)GM_GIB);
        return GM_OK;
    }
    if (gm_parse_size(s, out, err) != GM_OK)
        return gm_error_prefix(err, "--gpu-memory");
    if (*out == 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--gpu-memory: must be above zero");
    return GM_OK;
}

/* The changes tried so far, applied together, while each one lowered the figure. */
struct combined {
    struct gm_estimate_inputs in;
    uint64_t device_bytes;
    char flags[96];
    int n;
};

static void suggest(struct est_view *v, const struct gm_estimate_inputs *alt, const char *change,
                    struct combined *all, void (*apply)(struct gm_estimate_inputs *), bool combine)
{
    struct gm_estimate e;
    struct gm_error err;
    struct est_suggestion *sg;
    struct gm_estimate_inputs c;
    if (v->n_sugg >= (int)(sizeof(v->sugg) / sizeof(v->sugg[0])) - 1)
        return;
    if (gm_estimate_run(alt, &e, &err) != GM_OK)
        return;
    sg = &v->sugg[v->n_sugg++];
    snprintf(sg->change, sizeof(sg->change), "%s", change);
    sg->device_bytes = e.device_bytes;
    sg->fits = v->gpu_bytes && e.device_bytes <= v->gpu_bytes;
    /* Accumulate into the combined alternative when it helps. */
    if (!combine)
        return;
    c = all->in;
    apply(&c);
    if (gm_estimate_run(&c, &e, &err) == GM_OK && e.device_bytes < all->device_bytes) {
        size_t len = strlen(all->flags);
        const char *sp = strchr(change, ' ');
        const char *end = sp ? strchr(sp + 1, ' ') : NULL;
        int n = end ? (int)(end - change) : (int)strlen(change);
        all->in = c;
        all->device_bytes = e.device_bytes;
        snprintf(all->flags + len, sizeof(all->flags) - len, "%s%.*s", len ? " " : "", n, change);
        all->n++;
    }
}

static void ap_ckpt(struct gm_estimate_inputs *a)
{
    a->grad_ckpt = GM_CKPT_FULL;
}
static void ap_half_batch(struct gm_estimate_inputs *a)
{
    a->batch = a->batch > 1 ? a->batch / 2 : 1;
}
static void ap_8bit(struct gm_estimate_inputs *a)
{
    a->optimizer = GM_OPT_ADAMW_8BIT;
}
static void ap_fused(struct gm_estimate_inputs *a)
{
    a->optim_impl = GM_OPTIM_FUSED;
}
static void ap_sdpa(struct gm_estimate_inputs *a)
{
    a->attention = GM_ATTN_SDPA;
}
static void ap_bf16(struct gm_estimate_inputs *a)
{
    a->precision = GM_PREC_BF16;
}
static void ap_kv_fp8(struct gm_estimate_inputs *a)
{
    a->kv_dtype = GM_DTYPE_F8_E4M3;
}
static void ap_bits8(struct gm_estimate_inputs *a)
{
    a->weight_bits = 8;
}
static void ap_bits4(struct gm_estimate_inputs *a)
{
    a->weight_bits = 4.5;
}

static void try_change(struct est_view *v, struct combined *all, const char *change,
                       void (*apply)(struct gm_estimate_inputs *), bool combine)
{
    struct gm_estimate_inputs a = *v->in;
    apply(&a);
    suggest(v, &a, change, all, apply, combine);
}

/* One change at a time, the ones that usually matter most first; then all the helpful
 * ones together. */
static void suggestions(struct est_view *v)
{
    const struct gm_estimate_inputs *in = v->in;
    struct combined all;
    char buf[96];
    memset(&all, 0, sizeof(all));
    all.in = *in;
    all.device_bytes = v->e->device_bytes;
    if (in->mode == GM_EST_TRAIN && in->method == GM_METHOD_ARCH) {
        if (in->grad_ckpt == GM_CKPT_NONE)
            try_change(v, &all, "--grad-checkpointing full", ap_ckpt, true);
        if (in->batch > 1) {
            snprintf(buf, sizeof(buf), "--batch %llu (raise gradient accumulation)",
                     (unsigned long long)(in->batch / 2));
            try_change(v, &all, buf, ap_half_batch, true);
        }
        if (in->optimizer == GM_OPT_ADAMW || in->optimizer == GM_OPT_ADAM) {
            try_change(v, &all, "--optimizer adamw-8bit", ap_8bit, true);
            if (in->optim_impl == GM_OPTIM_FOREACH)
                try_change(v, &all, "--optimizer-impl fused", ap_fused, true);
        }
        if (in->attention == GM_ATTN_EAGER)
            try_change(v, &all, "--attention sdpa", ap_sdpa, true);
        if (in->precision != GM_PREC_BF16)
            try_change(v, &all, "--precision bf16 (pure bf16, no fp32 master)", ap_bf16, true);
    } else if (in->mode == GM_EST_INFER) {
        if (in->kv_dtype != GM_DTYPE_F8_E4M3 && in->kv_dtype != GM_DTYPE_INT4)
            try_change(v, &all, "--kv-dtype fp8", ap_kv_fp8, true);
        if (in->weight_bits == 0 || in->weight_bits > 8)
            try_change(v, &all, "--bits 8 (int8/fp8 weights)", ap_bits8, false);
        if (in->weight_bits == 0 || in->weight_bits > 4.5)
            try_change(v, &all, "--bits 4.5 (4-bit weights + scales)", ap_bits4, true);
        if (in->batch > 1) {
            snprintf(buf, sizeof(buf), "--batch %llu", (unsigned long long)(in->batch / 2));
            try_change(v, &all, buf, ap_half_batch, true);
        }
    }
    if (all.n > 1) {
        struct est_suggestion *sg = &v->sugg[v->n_sugg++];
        snprintf(sg->change, sizeof(sg->change), "together: %s", all.flags);
        sg->device_bytes = all.device_bytes;
        sg->fits = v->gpu_bytes && all.device_bytes <= v->gpu_bytes;
    }
}

int cmd_estimate(int argc, char **argv)
{
    const char *cmd = argv[0];
    struct gm_estimate_inputs in;
    struct gm_estimate e;
    struct gm_model model;
    struct gm_error err;
    struct est_view v;
    bool json = false, train = false, infer = false, list_m = false, list_g = false;
    bool full_logits = false;
    int precision = GM_PREC_BF16_MIXED, optimizer = 0, impl = 0, ckpt = 0, attn = 0, method = 0;
    int zero_grad = 0, kv = 0, color = 0;
    uint64_t params = 0, batch = 1, seq = 2048, context = 2048, new_tokens = 0;
    uint64_t ctx_bytes, ws_bytes;
    double bits = 0, reserve_gib = 0, apt = 0, frag;
    const char *gpu = NULL, *gpu_mem = NULL;
    bool s_train[8] = {false}, s_infer[4] = {false}, s_apt = false, s_bits = false;
    bool s_reserve = false;
    int n_pos = 0, rc;
    struct est_ext_opts xo;

    gm_estimate_inputs_init(&in);
    est_ext_opts_init(&xo);
    ctx_bytes = in.cuda_context_bytes;
    ws_bytes = in.workspace_bytes;
    frag = in.fragmentation;
    {
        const struct opt opts[] = {
            OPT_U64("parameters", 0, &params, "N", "parameter count (plain numbers, or override)",
                    NULL),
            OPT_DOUBLE("bits", 0, &bits, "B",
                       "bits per weight (weights / inference), e.g. 16, 8, 4.5", &s_bits),
            OPT_DOUBLE("reserve-gib", 0, &reserve_gib, "GIB",
                       "weights mode: flat reserve for everything else (an assumption)",
                       &s_reserve),
            OPT_FLAG("train", 0, &train, "estimate one training step"),
            OPT_FLAG("infer", 0, &infer, "estimate generation (KV cache, prefill)"),
            OPT_CHOICE("precision", 0, &precision, precision_choices,
                       "training precision (default bf16-mixed)", &s_train[0]),
            OPT_CHOICE("optimizer", 0, &optimizer, optimizer_choices, "optimizer (default adamw)",
                       &s_train[1]),
            OPT_CHOICE("optimizer-impl", 0, &impl, impl_choices,
                       "optimizer step implementation (default foreach)", &s_train[2]),
            OPT_U64("seq", 0, &seq, "L", "training sequence length (default 2048)", &s_train[3]),
            OPT_CHOICE("grad-checkpointing", 0, &ckpt, ckpt_choices,
                       "activation checkpointing per layer (default none)", &s_train[4]),
            OPT_CHOICE("zero-grad", 0, &zero_grad, zero_grad_choices,
                       "gradients between steps (default set-to-none)", &s_train[5]),
            OPT_CHOICE("method", 0, &method, method_choices,
                       "arch (per-tensor) or blog (HF blog formula)", &s_train[6]),
            OPT_DOUBLE("activations-per-token", 0, &apt, "A",
                       "blog method: override A (elements per token)", &s_apt),
            OPT_U64("batch", 0, &batch, "N",
                    "micro-batch (training) or concurrent sequences (inference)", NULL),
            OPT_CHOICE("attention", 0, &attn, attn_choices,
                       "sdpa/flash (no s*s scores) or eager (default sdpa)", NULL),
            OPT_U64("context", 0, &context, "T",
                    "inference: prompt tokens per sequence (default 2048)", &s_infer[0]),
            OPT_U64("new-tokens", 0, &new_tokens, "T",
                    "inference: generated tokens per sequence (default 0)", &s_infer[1]),
            OPT_CHOICE("kv-dtype", 0, &kv, kv_choices,
                       "inference: KV cache element type (default: activation dtype)", &s_infer[2]),
            OPT_FLAG("full-logits", 0, &full_logits,
                     "inference: prefill computes logits for every position"),
            OPT_SIZE("cuda-context", 0, &ctx_bytes, "SIZE",
                     "CUDA context + kernels outside the allocator (default 450MiB)", NULL),
            OPT_SIZE("workspace", 0, &ws_bytes, "SIZE",
                     "cuBLAS/cuDNN workspaces outside the allocator (default 64MiB)", NULL),
            OPT_DOUBLE("fragmentation", 0, &frag, "F",
                       "reserved excess on transient memory (default 0.25)", NULL),
            OPT_STRING("gpu", 0, &gpu, "NAME", "judge the fit on this GPU (see --list-gpus)"),
            OPT_STRING("gpu-memory", 0, &gpu_mem, "SIZE",
                       "judge the fit on this capacity (bare number: GiB)"),
            OPT_FLAG("list-models", 0, &list_m, "list the built-in models"),
            OPT_FLAG("list-gpus", 0, &list_g, "list the GPU catalog"),
            EST_EXT_OPTS(&xo),
            OPT_JSON(&json, "gpumem.estimate/1"),
            OPT_COLOR(&color),
            OPT_END,
        };
        const struct opt_usage usage = {
            "gpumem estimate [MODEL] [--train|--infer] [OPTIONS]",
            "Predict peak GPU memory before launching: peak allocated, peak reserved and\n"
            "device used as nvidia-smi shows it, with every component and assumption.\n"
            "MODEL is a built-in name (--list-models), a config.json or a directory holding\n"
            "one.  Without --train or --infer only the weights are sized.",
            "  gpumem estimate --parameters 7000000000 --bits 16 --reserve-gib 4\n"
            "  gpumem estimate llama-3-8b --train --batch 4 --seq 2048 --gpu H100\n"
            "  gpumem estimate qwen2.5-1.5b --train --method blog --precision fp32 --batch 16 --seq 256\n"
            "  gpumem estimate mistral-7b --infer --batch 8 --context 8192 --kv-dtype fp8"};
        int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
        if (prc >= 0)
            return prc;
    }
    if (list_m)
        return list_models();
    if (list_g)
        return list_gpus();
    if (n_pos > 1)
        return cli_usage(cmd, "unexpected argument '%s'", argv[2]);
    if (train && infer)
        return cli_usage(cmd, "--train and --infer exclude each other");
    for (size_t i = 0; i < sizeof(s_train) / sizeof(s_train[0]); i++)
        if (s_train[i] && !train)
            return cli_usage(
                cmd, "training options (--precision, --optimizer, --seq, ...) need --train");
    for (size_t i = 0; i < sizeof(s_infer) / sizeof(s_infer[0]); i++)
        if ((s_infer[i] || full_logits) && !infer)
            return cli_usage(cmd,
                             "--context, --new-tokens, --kv-dtype and --full-logits need --infer");
    if (s_apt && !(train && method == GM_METHOD_BLOG))
        return cli_usage(cmd, "--activations-per-token needs --train --method blog");
    if (s_reserve && (train || infer))
        return cli_usage(cmd, "--reserve-gib applies to the weights-only estimate");
    if (s_reserve && !(reserve_gib >= 0 && reserve_gib <= 1048576.0))
        return cli_usage(cmd, "--reserve-gib: must be between 0 and 1048576");
    if (s_bits && train)
        return cli_usage(
            cmd, "--bits applies to weights and --infer estimates; training uses --precision");
    if (s_bits && !(bits > 0 && bits <= 64))
        return cli_usage(cmd, "--bits: must be above 0 and at most 64");
    if (s_apt && !(apt > 0 && apt <= 1e12))
        return cli_usage(cmd, "--activations-per-token: must be above 0 and at most 1e12");
    if (!(frag >= 0 && frag <= 4))
        return cli_usage(cmd, "--fragmentation: must be between 0 and 4");
    if (n_pos == 0 && params == 0)
        return cli_usage(cmd, "give a MODEL or --parameters N");

    if (n_pos == 1) {
        if ((rc = est_ext_resolve_model(cmd, &xo, argv[1], &model)) != 0)
            goto out;
        in.model = &model;
    }
    in.mode = train ? GM_EST_TRAIN : infer ? GM_EST_INFER : GM_EST_WEIGHTS;
    in.method = method == 2 ? GM_METHOD_ARCH : (enum gm_method)method;
    in.n_params = params;
    in.weight_bits = bits;
    in.reserve_bytes = (uint64_t)llround(reserve_gib * (double)GM_GIB);
    in.precision = (enum gm_precision)precision;
    in.optimizer = (enum gm_optimizer)optimizer;
    in.optim_impl = (enum gm_optim_impl)impl;
    in.grad_ckpt = ckpt == 2 ? GM_CKPT_NONE : (enum gm_grad_ckpt)ckpt;
    xo.x.selective_ckpt = ckpt == 2;
    in.attention = (enum gm_attention)attn;
    in.zero_grad = (enum gm_zero_grad)zero_grad;
    in.activations_per_token = apt;
    in.batch = batch;
    in.seq = seq;
    in.context = context;
    in.new_tokens = new_tokens;
    in.kv_dtype = kv_dtypes[kv];
    in.full_logits = full_logits;
    in.cuda_context_bytes = ctx_bytes;
    in.workspace_bytes = ws_bytes;
    in.fragmentation = frag;

    memset(&v, 0, sizeof(v));
    if (gpu) {
        v.gpu = gm_gpu_find(gpu);
        if (!v.gpu) {
            cli_errorf(cmd, "--gpu: unknown GPU '%s' (see --list-gpus, or give --gpu-memory)", gpu);
            rc = GM_EXIT_USAGE;
            goto out;
        }
        v.gpu_bytes = v.gpu->memory_bytes;
        v.gpu_label = v.gpu->name;
    }
    if (gpu_mem) {
        if (gpu) {
            rc = cli_usage(cmd, "--gpu and --gpu-memory exclude each other");
            goto out;
        }
        if (parse_gpu_memory(gpu_mem, &v.gpu_bytes, &err) != GM_OK) {
            cli_errorf(cmd, "%s", err.msg);
            rc = GM_EXIT_USAGE;
            goto out;
        }
        v.gpu_label = gpu_mem;
    }
    in.gpu_memory_bytes = v.gpu_bytes;
    in.gpu_name = v.gpu_label;

    if ((rc = est_ext_prepare(cmd, &xo, &in, method == 2, train, infer)) != 0)
        goto out;
    if (est_ext_run(&xo, &in, &e, &err) != GM_OK) {
        rc = cli_fail(cmd, &err);
        goto out;
    }
    v.in = &in;
    v.e = &e;
    v.model = in.model;
    v.color = cli_use_color((enum cli_color)color, stdout);
    if (v.gpu_bytes && est_ext_active(&xo))
        est_ext_suggestions(&xo, &v);
    else if (v.gpu_bytes && e.device_bytes > v.gpu_bytes)
        suggestions(&v);

    if (xo.ds_only && !json) {
        est_ext_render_text(stdout, &xo, &v);
        rc = fflush(stdout) != 0 ? GM_EXIT_IOERR : 0;
        goto out;
    }
    if (json) {
        struct gm_json w;
        cli_json_begin(&w, stdout, "estimate");
        est_render_json(&w, &v);
        est_ext_render_json(&w, &xo, &v);
        rc = cli_json_end(&w, cmd);
        goto out;
    }
    est_render_text(stdout, &v);
    est_ext_render_text(stdout, &xo, &v);
    rc = fflush(stdout) != 0 ? GM_EXIT_IOERR : 0;
out:
    est_ext_release(&xo);
    return rc;
}
