/* SPDX-License-Identifier: MIT */
/* ext.c - the extended estimate: run the base estimate, then apply LoRA/QLoRA,
 * parallelism or a serving engine, and finish the per-device figures; plus the search for
 * the largest batch or context that fits. */
#include "estimate/ext_int.h"

#include <stdio.h>
#include <string.h>

void gm_estimate_ext_init(struct gm_estimate_ext *x)
{
    memset(x, 0, sizeof(*x));
    x->lora_rank = 16;
    x->lora_targets = GM_LORA_ATTENTION;
    x->qlora_double_quant = true;
    x->qlora_block = 64;
    x->qlora_fp32_rest = true;
    x->gpus = 1;
    x->tp = 1;
    x->pp = 1;
    x->bucket_elements = 500000000;
    x->grad_accum = 1;
    x->gpu_memory_utilization = 0.9;
    x->block_size = 16;
    x->max_num_seqs = 256;
    x->cuda_graph_bytes = (uint64_t)512 << 20;
    x->kv_ggml_type = 1; /* f16 */
    x->n_ubatch = 512;
    x->search_limit = (uint64_t)1 << 20;
}

const char *gm_shard_name(enum gm_shard s)
{
    static const char *const names[] = {"ddp", "zero-1", "zero-2", "zero-3", "fsdp"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "unknown";
}

const char *gm_engine_name(enum gm_engine e)
{
    static const char *const names[] = {"none", "hf", "vllm", "llama.cpp"};
    return (unsigned)e < sizeof(names) / sizeof(names[0]) ? names[e] : "unknown";
}

enum ext_role ext_component_role(const struct gm_est_component *c)
{
    const char *n = c->name;
    if (strstr(n, "master"))
        return ROLE_MASTER;
    if (strstr(n, "autocast") || strstr(n, "weight_copies") || strstr(n, "cast"))
        return ROLE_AUTOCAST;
    if (strstr(n, "grad"))
        return ROLE_GRADS;
    if (strstr(n, "optimizer_state") || strstr(n, "optimizer_states"))
        return ROLE_OPT_STATE;
    if (strstr(n, "optimizer") || strstr(n, "step"))
        return ROLE_OPT_TEMP;
    if (strncmp(n, "weights", 7) == 0 || strstr(n, "adapters"))
        return ROLE_WEIGHTS;
    if (strstr(n, "logits") || strstr(n, "loss"))
        return ROLE_LOGITS;
    if (strstr(n, "kv"))
        return ROLE_KV;
    if (strstr(n, "activation") || strstr(n, "embedding"))
        return ROLE_ACT;
    if (c->phases & GM_EST_PHASE_OPTIMIZER_STEP)
        return ROLE_OTHER;
    return c->transient ? ROLE_ACT : ROLE_OTHER;
}

void ext_remove_component(struct gm_estimate *e, size_t i)
{
    if (i >= e->n_components)
        return;
    memmove(&e->components[i], &e->components[i + 1],
            (e->n_components - i - 1) * sizeof(e->components[0]));
    e->n_components--;
}

unsigned ext_weight_bytes(enum gm_precision p)
{
    return p == GM_PREC_FP32 ? 4 : 2;
}

unsigned ext_state_bytes(enum gm_precision p)
{
    return p == GM_PREC_BF16 ? 2 : 4;
}

uint64_t ext_largest_linear(const struct gm_model *m)
{
    uint64_t q = m->hidden * m->n_heads * m->head_dim, f = m->hidden * m->intermediate;
    return q > f ? q : f;
}

uint64_t ext_layer_params(const struct gm_model *m, const struct gm_param_counts *pc)
{
    if (!m->n_layers)
        return pc->largest_tensor;
    return (pc->attention + pc->mlp + pc->norms) / m->n_layers;
}

/* Drop the base estimate's assumptions that start with 'prefix' (superseded). */
static void drop_assumption(struct gm_estimate *e, const char *prefix)
{
    size_t k = 0;
    for (size_t i = 0; i < e->n_assumptions; i++) {
        if (strncmp(e->assumptions[i], prefix, strlen(prefix)) == 0)
            continue;
        if (k != i)
            memcpy(e->assumptions[k], e->assumptions[i], sizeof(e->assumptions[0]));
        k++;
    }
    e->n_assumptions = k;
}

/* Weights and inference from model files: the bytes the files really hold. */
static void use_file_weight_bytes(const struct gm_estimate_inputs *in, struct gm_estimate *e)
{
    const struct gm_model *m = in->model;
    if (!m || !m->weight_bytes_file || in->weight_bits > 0)
        return;
    for (size_t i = 0; i < e->n_components; i++) {
        struct gm_est_component *c = &e->components[i];
        if (strcmp(c->name, "weights") != 0)
            continue;
        c->bytes = m->weight_bytes_file;
        snprintf(c->note, sizeof c->note, "%llu bytes of tensor data in the model files",
                 (unsigned long long)m->weight_bytes_file);
        e->weight_bytes = m->weight_bytes_file;
        gm_estimate_assume(e,
                           "weights as stored in the model files (%llu bytes, every dtype and "
                           "quantisation block counted from the headers)",
                           (unsigned long long)m->weight_bytes_file);
    }
}

static enum gm_status check_ext(const struct gm_estimate_inputs *in,
                                const struct gm_estimate_ext *x, struct gm_error *err)
{
    if (x->lora != GM_LORA_NONE && in->mode != GM_EST_TRAIN)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "LoRA/QLoRA applies to --train");
    if (x->engine != GM_ENGINE_NONE && in->mode != GM_EST_INFER)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--engine applies to --infer");
    if (x->shard != GM_SHARD_NONE && in->mode != GM_EST_TRAIN)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--zero / --fsdp apply to --train");
    if (x->gpus == 0 || x->tp == 0 || x->gpus > 65536 || x->tp > 1024)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--gpus and --tp must be in 1..65536");
    if (x->tp > x->gpus)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--tp %llu exceeds --gpus %llu",
                       (unsigned long long)x->tp, (unsigned long long)x->gpus);
    if (x->pp == 0 || x->pp > 1024)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--pp must be in 1..1024");
    if (x->pp > 1 && in->mode != GM_EST_TRAIN)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--pp applies to --train");
    if (x->pp > 1 && x->shard >= GM_SHARD_ZERO2)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--pp combines with ZeRO-1 at most (DeepSpeed's pipeline engine refuses "
                       "ZeRO-2 and ZeRO-3)");
    if (x->tp * x->pp > x->gpus)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--tp x --pp exceeds --gpus %llu",
                       (unsigned long long)x->gpus);
    if (x->sequence_parallel && x->tp < 2)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--sequence-parallel needs --tp >= 2");
    if (x->engine == GM_ENGINE_LLAMACPP && x->tp > 1)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--engine llama.cpp splits layers, not tensors: --tp is not supported");
    if (x->grad_accum == 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--grad-accum must be >= 1");
    if (x->lora_dropout < 0 || x->lora_dropout >= 1)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--lora-dropout must be in [0, 1)");
    return GM_OK;
}

enum gm_status gm_estimate_ext_run(const struct gm_estimate_inputs *in,
                                   const struct gm_estimate_ext *x, struct gm_estimate *out,
                                   struct gm_estimate_ext_result *res, struct gm_error *err)
{
    struct gm_estimate_inputs bi = *in;
    struct gm_param_counts pc;
    enum gm_status st;

    memset(res, 0, sizeof(*res));
    if ((st = check_ext(in, x, err)))
        return st;
    if (x->selective_ckpt && in->mode == GM_EST_TRAIN) {
        if (in->grad_ckpt != GM_CKPT_NONE)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "selective and full checkpointing exclude each other");
        /* Selective recompute (Korthikanti et al.) drops exactly the attention core's
         * s x s tensors: what SDPA/flash attention never stores. */
        bi.attention = GM_ATTN_SDPA;
    }
    if ((st = gm_estimate_run(&bi, out, err)))
        return st;
    memset(&pc, 0, sizeof(pc));
    if (in->model) {
        struct gm_error cerr;
        if (gm_model_count_params(in->model, &pc, &cerr) != GM_OK) {
            /* an architecture gpumem does not count: the base estimate ran on n_params */
            memset(&pc, 0, sizeof(pc));
            pc.largest_tensor = out->n_params;
        }
        pc.total = out->n_params;
    } else {
        pc.total = in->n_params;
        pc.largest_tensor = in->n_params;
    }
    if (in->n_params)
        pc.total = in->n_params;

    if (in->mode == GM_EST_WEIGHTS || (in->mode == GM_EST_INFER && x->engine != GM_ENGINE_VLLM &&
                                       x->engine != GM_ENGINE_LLAMACPP))
        use_file_weight_bytes(in, out);
    if (x->gpus > 1 || x->tp > 1 || x->shard != GM_SHARD_NONE)
        drop_assumption(out, "single GPU");
    if (in->mode == GM_EST_TRAIN) {
        /* With accumulation the gradients of earlier micro-batches stay allocated through
         * the forward of the next ones. */
        for (size_t i = 0; x->grad_accum > 1 && i < out->n_components; i++)
            if (ext_component_role(&out->components[i]) == ROLE_GRADS)
                out->components[i].phases = GM_EST_PHASE_TRAIN_ALL;
        if (x->lora != GM_LORA_NONE && (st = ext_apply_lora(&bi, x, &pc, out, res, err)))
            return st;
        if ((x->gpus > 1 || x->tp > 1 || x->shard != GM_SHARD_NONE) &&
            (st = ext_apply_parallel(&bi, x, &pc, out, res, err)))
            return st;
        if (x->pp > 1 && (st = ext_apply_pipeline(&bi, x, &pc, out, res, err)))
            return st;
        if (x->selective_ckpt)
            gm_estimate_assume(out, "selective activation recomputation: the attention core "
                                    "(s x s scores, softmax, dropout) is recomputed, the rest "
                                    "kept (Korthikanti et al. 2022)");
        if (x->grad_accum > 1)
            gm_estimate_assume(out,
                               "gradient accumulation over %llu micro-batches: activations "
                               "are those of one micro-batch; the gradients stay allocated "
                               "through the next micro-batches' forward passes",
                               (unsigned long long)x->grad_accum);
        if (x->paged_optimizer) {
            for (size_t i = 0; i < out->n_components; i++)
                if (ext_component_role(&out->components[i]) == ROLE_OPT_STATE)
                    res->pageable_bytes = gm_add_sat(res->pageable_bytes, out->components[i].bytes);
            gm_estimate_assume(out,
                               "paged optimizer: its state (%llu bytes) lives in CUDA "
                               "unified memory and pages to host memory under pressure; "
                               "the figures assume it stays resident",
                               (unsigned long long)res->pageable_bytes);
        }
    } else if (in->mode == GM_EST_INFER) {
        switch (x->engine) {
        case GM_ENGINE_VLLM:
            st = ext_apply_vllm(&bi, x, &pc, out, res, err);
            break;
        case GM_ENGINE_LLAMACPP:
            st = ext_apply_llamacpp(&bi, x, &pc, out, res, err);
            break;
        default:
            if (x->engine == GM_ENGINE_HF)
                gm_estimate_assume(out, "transformers generate(): weights, KV cache of every "
                                        "sequence, prefill activations and logits");
            if (x->tp > 1 || x->gpus > 1)
                st = ext_apply_parallel(&bi, x, &pc, out, res, err);
            break;
        }
        if (st)
            return st;
    }
    if (x->lora != GM_LORA_NONE || x->gpus > 1 || x->tp > 1 || x->shard != GM_SHARD_NONE ||
        x->engine == GM_ENGINE_VLLM || x->engine == GM_ENGINE_LLAMACPP) {
        /* the weights held by one device in this setup */
        uint64_t w = 0;
        for (size_t i = 0; i < out->n_components; i++) {
            enum ext_role r = ext_component_role(&out->components[i]);
            if (r == ROLE_WEIGHTS || r == ROLE_MASTER)
                w = gm_add_sat(w, out->components[i].bytes);
        }
        out->weight_bytes = w;
    }
    gm_estimate_finish(&bi, out);
    if (!res->gpus) {
        res->gpus = x->gpus;
        res->gpus_per_node = x->gpus_per_node ? x->gpus_per_node : (x->gpus < 8 ? x->gpus : 8);
        res->nodes = (x->gpus + res->gpus_per_node - 1) / res->gpus_per_node;
    }
    if (x->pp > 1 && in->mode == GM_EST_TRAIN)
        return GM_OK; /* ext_apply_pipeline filled one group per stage */
    res->n_groups = 1;
    snprintf(res->groups[0].role, sizeof res->groups[0].role, "all");
    res->groups[0].first_rank = 0;
    res->groups[0].count = x->gpus;
    res->groups[0].layers = 0;
    res->groups[0].allocated_bytes = out->peak_allocated_bytes;
    res->groups[0].reserved_bytes = out->peak_reserved_bytes;
    res->groups[0].device_bytes = out->device_bytes;
    return GM_OK;
}

/* Does the job fit at this value?  vLLM fits when the pool holds the sequences. */
static enum gm_status fits_at(const struct gm_estimate_inputs *in, const struct gm_estimate_ext *x,
                              uint64_t v, struct gm_estimate *out,
                              struct gm_estimate_ext_result *res, bool *fits, struct gm_error *err)
{
    struct gm_estimate_inputs t = *in;
    struct gm_estimate_ext tx = *x;
    enum gm_status st;
    if (x->search == GM_SEARCH_BATCH) {
        t.batch = v;
    } else if (in->mode == GM_EST_TRAIN) {
        t.seq = v;
    } else {
        t.context = v;
        if (x->engine == GM_ENGINE_VLLM)
            tx.max_model_len = v + in->new_tokens;
    }
    st = gm_estimate_ext_run(&t, &tx, out, res, err);
    if (st)
        return st;
    if (x->engine == GM_ENGINE_VLLM) {
        uint64_t need = gm_mul_sat(t.batch ? t.batch : 1, t.context + t.new_tokens);
        *fits = res->kv_tokens >= need && res->kv_tokens >= res->max_model_len &&
                (x->search != GM_SEARCH_BATCH || t.batch <= x->max_num_seqs);
    } else {
        *fits = out->device_bytes <= in->gpu_memory_bytes;
    }
    return GM_OK;
}

enum gm_status gm_estimate_ext_search(const struct gm_estimate_inputs *in,
                                      const struct gm_estimate_ext *x, struct gm_estimate *out,
                                      struct gm_estimate_ext_result *res, struct gm_error *err)
{
    uint64_t lo = 0, hi = 1, limit = x->search_limit ? x->search_limit : ((uint64_t)1 << 20);
    bool fits = false, hit = false;
    enum gm_status st;

    if (x->search == GM_SEARCH_NONE)
        return gm_estimate_ext_run(in, x, out, res, err);
    /* A context beyond the model's positions is not a useful answer. */
    if (x->search == GM_SEARCH_CONTEXT && in->model && in->model->max_positions &&
        in->model->max_positions < limit) {
        limit = in->model->max_positions;
        if (in->mode == GM_EST_INFER && limit > in->new_tokens)
            limit -= in->new_tokens;
    }
    if (!in->gpu_memory_bytes)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--max-batch / --max-context need a GPU: give --gpu or --gpu-memory");
    /* grow until it does not fit, then bisect between the last fit and the first miss */
    for (;;) {
        if ((st = fits_at(in, x, hi, out, res, &fits, err)))
            return st;
        if (!fits)
            break;
        lo = hi;
        if (hi >= limit) {
            hit = true;
            break;
        }
        hi = hi * 2 > limit ? limit : hi * 2;
    }
    if (!hit) {
        while (hi - lo > 1) {
            uint64_t mid = lo + (hi - lo) / 2;
            if ((st = fits_at(in, x, mid, out, res, &fits, err)))
                return st;
            if (fits)
                lo = mid;
            else
                hi = mid;
        }
    }
    if ((st = fits_at(in, x, lo ? lo : 1, out, res, &fits, err)))
        return st;
    res->search_value = lo;
    res->search_hit_limit = hit;
    res->search_limit = limit;
    return GM_OK;
}
