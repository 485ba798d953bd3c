/* SPDX-License-Identifier: MIT */
/* stage_parallel.c - the parallel layout stage: per-device memory under data and tensor
 * parallelism, ZeRO / FSDP sharding and CPU offload.
 *
 * Tensor parallel (Megatron, Shoeybi et al. 2019; Korthikanti et al. 2022): every weight
 * matrix and the vocabulary-parallel embedding/lm_head are split t ways, so weights,
 * gradients and optimizer state divide by t (norms are replicated; they are < 0.1% of a
 * transformer).  Activations per layer go from sbh(34 + 5as/h) to sbh(10 + 24/t + 5as/(ht))
 * without sequence parallelism and to sbh/t (34 + 5as/h) with it (Korthikanti Table 2): the
 * 10sbh of LayerNorm/dropout/residual inputs are replicated unless --sequence-parallel.
 * Logits are vocabulary-parallel: divided by t.
 *
 * Data parallel over D = gpus / t replicas (Rajbhandari et al. 2020, ZeRO):
 *   stage 1 partitions optimizer state and fp32 master weights (x 1/D),
 *   stage 2 also gradients, stage 3 also the parameters, which are gathered one layer at a
 *   time (current + prefetched layer in 16-bit, plus the layer's unsharded gradient during
 *   its reduce-scatter).  FSDP FULL_SHARD is modelled as stage 3 with one decoder layer per
 *   unit and no autocast copies (MixedPrecision gathers 16-bit parameters directly).
 *   Plain DDP keeps a bucket copy of the gradients (gradient_as_bucket_view=False, the
 *   default), ZeRO-1/2 a reduce bucket and an all-gather bucket (reduce_bucket_size and
 *   allgather_bucket_size, 5e8 elements in 16-bit), ZeRO-3 a reduce bucket.
 * CPU offload (ZeRO-Offload, Ren et al. 2021; ZeRO-Infinity): optimizer offload moves the
 * optimizer state, fp32 master weights, the step's temporaries and (stage >= 2) the
 * gradient partitions to the host; parameter offload (stage 3 / FSDP) moves the parameter
 * partitions too.  Host bytes are reported per node.
 * The NCCL buffers outside the allocator are a runtime overhead (stage_runtime.c).  vLLM
 * and llama.cpp place their shards themselves (stage_engine.c); this stage leaves them. */
#include "estimate/estimate_int.h"

#include <stdio.h>
#include <string.h>

/* The resolved layout: GPUs, nodes and data-parallel ranks. */
static void fill_layout(const struct gm_job *j, struct gm_est_layout *l)
{
    const struct gm_job_parallel *p = &j->parallel;
    l->gpus = p->gpus;
    l->gpus_per_node = p->gpus_per_node ? p->gpus_per_node : (p->gpus < 8 ? p->gpus : 8);
    l->nodes = est_div_up(p->gpus, l->gpus_per_node);
    l->dp = est_data_parallel(j);
}

/* Rescale one component for tensor parallelism t and data parallelism D at ZeRO 'stage';
 * *to_host: it moves to host memory; *drop: sharding replaces it. */
static uint64_t shard_bytes(const struct gm_job_parallel *p, int stage, uint64_t D,
                            const struct gm_est_component *c, bool *to_host, bool *drop)
{
    uint64_t t = p->tp, b = c->bytes;
    *to_host = *drop = false;
    switch (c->kind) {
    case GM_KIND_ACTIVATIONS:
    case GM_KIND_BACKWARD_TEMP:
    case GM_KIND_GATHERED:
        if (t > 1)
            b = p->sequence_parallel ? est_div_up(b, t) : gm_mul_div_u64(b, 10 * t + 24, 34 * t);
        return b;
    case GM_KIND_WEIGHTS:
    case GM_KIND_ADAPTERS:
        b = est_div_up(b, t);
        if (stage >= 3) {
            b = est_div_up(b, D);
            *to_host = p->offload_params;
        }
        return b;
    case GM_KIND_WEIGHT_COPIES:
        /* FSDP MixedPrecision and ZeRO-3 gather 16-bit layers instead */
        *drop = stage >= 3;
        return est_div_up(b, t);
    case GM_KIND_MASTER_WEIGHTS:
    case GM_KIND_OPTIMIZER_STATE:
    case GM_KIND_OPTIMIZER_TEMP:
        b = est_div_up(b, t);
        if (stage >= 1) {
            b = est_div_up(b, D);
            *to_host = p->offload_optimizer;
        }
        return b;
    case GM_KIND_GRADIENTS:
        b = est_div_up(b, t);
        if (stage >= 2) {
            b = est_div_up(b, D);
            *to_host = p->offload_optimizer;
        }
        return b;
    default:
        return est_div_up(b, t);
    }
}

enum gm_status est_stage_parallel(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    const struct gm_job_parallel *p = &j->parallel;
    const struct gm_model *m = cx->m;
    struct gm_estimate *e = cx->e;
    struct gm_est_layout *l = &e->layout;
    uint64_t t = p->tp, g = p->gpus, D, cpu = 0, grads = 0, n = cx->n;
    int stage = p->shard == GM_SHARD_FSDP ? 3 : (int)p->shard;
    unsigned wbytes = est_weight_elem_bytes(j->numerics.precision);
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    fill_layout(j, l);
    if (est_allocator(j) != EST_ALLOC_TORCH)
        return GM_OK; /* weights only, or an engine that places its own shards */
    if (g <= 1 && t <= 1 && p->shard == GM_SHARD_NONE) {
        if (j->mode == GM_EST_TRAIN && j->method != GM_METHOD_BLOG)
            est_assume(e, "single GPU, no tensor/pipeline/data-parallel sharding, no "
                          "CPU offload");
        return GM_OK;
    }
    /* query heads split evenly; KV heads split, or are replicated when fewer than t */
    if (m && !est_tp_divides(m, t))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--tp %llu does not divide the %llu attention heads / %llu KV heads",
                       (unsigned long long)t, (unsigned long long)m->n_heads,
                       (unsigned long long)m->n_kv_heads);
    D = l->dp;

    for (size_t i = e->n_components; i-- > 0;) {
        struct gm_est_component *c = &e->components[i];
        bool to_host, drop;
        uint64_t b = shard_bytes(p, stage, D, c, &to_host, &drop);
        if (drop) {
            est_remove(e, i);
            continue;
        }
        if (c->kind == GM_KIND_GRADIENTS && !to_host)
            grads = gm_add_sat(grads, b);
        if (to_host) {
            cpu = gm_add_sat(cpu, gm_mul_sat(b, l->gpus_per_node));
            est_remove(e, i);
            continue;
        }
        if (b != c->bytes) {
            est_note_append(c, "per device");
            c->bytes = b;
        }
    }
    l->host_bytes_per_node = cpu;

    if (j->mode == GM_EST_INFER && D > 1)
        est_assume(e,
                   "%llu independent replicas of the model (data parallel inference): "
                   "figures are per GPU",
                   (unsigned long long)D);
    if (stage == 0 && D > 1 && !p->ddp_bucket_view && grads) {
        if ((st = est_add(e, GM_KIND_COMM_BUFFERS, "ddp_grad_buckets", grads,
                          GM_EST_PHASE_TRAIN_ALL, false, GM_EXTENT_ALL_LAYERS,
                          "DDP bucket copy of the gradients "
                          "(gradient_as_bucket_view=False)",
                          err)))
            return st;
    }
    if (stage >= 1 && stage <= 2 && D > 1) {
        uint64_t el = p->bucket_elements < est_div_up(n, t) ? p->bucket_elements : est_div_up(n, t);
        snprintf(note, sizeof note, "ZeRO reduce bucket, %llu elements in 16-bit",
                 (unsigned long long)el);
        if ((st = est_add(e, GM_KIND_COMM_BUFFERS, "zero_reduce_bucket", gm_mul_sat(el, 2),
                          GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_ONE_LAYER, note, err)))
            return st;
        snprintf(note, sizeof note, "ZeRO all-gather bucket, %llu elements in 16-bit",
                 (unsigned long long)el);
        if ((st = est_add(e, GM_KIND_COMM_BUFFERS, "zero_allgather_bucket", gm_mul_sat(el, 2),
                          GM_EST_PHASE_OPTIMIZER_STEP, true, GM_EXTENT_ONE_LAYER, note, err)))
            return st;
    }
    if (stage == 3) {
        uint64_t layer =
            m ? est_div_up(est_layer_params(m, &cx->pc), t) : est_div_up(cx->pc.largest_tensor, t);
        uint64_t gathered = gm_mul_sat(layer, 2 * wbytes);
        uint64_t gbytes = j->numerics.precision == GM_PREC_BF16 ? 2 : 4;
        snprintf(note, sizeof note,
                 "gathered parameters: current + prefetched layer, %llu params each in %u B",
                 (unsigned long long)layer, wbytes);
        if ((st = est_add(e, GM_KIND_GATHERED, "gathered_params", gathered,
                          GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_ONE_LAYER, note, err)))
            return st;
        snprintf(note, sizeof note,
                 "one layer's unsharded gradient during reduce-scatter (%llu B "
                 "each)",
                 (unsigned long long)gbytes);
        if ((st = est_add(e, GM_KIND_GATHERED, "gathered_grads", gm_mul_sat(layer, gbytes),
                          GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_ONE_LAYER, note, err)))
            return st;
        if (p->shard == GM_SHARD_ZERO3 && D > 1) {
            uint64_t el =
                p->bucket_elements < est_div_up(n, t) ? p->bucket_elements : est_div_up(n, t);
            snprintf(note, sizeof note, "ZeRO-3 reduce bucket, %llu elements in 16-bit",
                     (unsigned long long)el);
            if ((st = est_add(e, GM_KIND_COMM_BUFFERS, "zero_reduce_bucket", gm_mul_sat(el, 2),
                              GM_EST_PHASE_FORWARD_BACKWARD, true, GM_EXTENT_ONE_LAYER, note, err)))
                return st;
        }
    }
    if (t > 1)
        est_assume(e,
                   "tensor parallel %llu: weights, gradients, optimizer state and logits "
                   "divided by %llu; activations %s",
                   (unsigned long long)t, (unsigned long long)t,
                   p->sequence_parallel ? "divided by t (sequence parallel)"
                                        : "x (10 + 24/t)/34 (Korthikanti, no sequence "
                                          "parallelism)");
    if (j->mode == GM_EST_TRAIN && (p->shard != GM_SHARD_NONE || D > 1))
        est_assume(e, "%s over %llu data-parallel ranks (%llu GPUs, %llu per node)%s%s",
                   gm_shard_name(p->shard), (unsigned long long)D, (unsigned long long)g,
                   (unsigned long long)l->gpus_per_node,
                   p->offload_optimizer ? "; optimizer state, master weights and step on "
                                          "the CPU"
                                        : "",
                   p->offload_params ? "; parameters offloaded to the CPU" : "");
    return GM_OK;
}
