/* SPDX-License-Identifier: MIT */
/* sharding.c - per-device memory under data and tensor parallelism.
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
 * NCCL: communicators allocate their buffers outside PyTorch's allocator; with more than
 * one GPU 1 GiB per GPU is added to the device figure (estimation.md §3: vLLM's non-torch
 * memory is about 2 GiB per GPU at TP >= 2, CUDA context included). */
#include "estimate/ext_int.h"

#include <stdio.h>
#include <string.h>

#define NCCL_BYTES ((uint64_t)1 << 30)

static uint64_t div_up(uint64_t a, uint64_t b)
{
    return b ? a / b + (a % b != 0) : a;
}

enum gm_status ext_apply_parallel(struct gm_estimate_inputs *in, const struct gm_estimate_ext *x,
                                  const struct gm_param_counts *pc, struct gm_estimate *e,
                                  struct gm_estimate_ext_result *res, struct gm_error *err)
{
    const struct gm_model *m = in->model;
    uint64_t t = x->tp ? x->tp : 1, g = x->gpus ? x->gpus : 1, pp = x->pp ? x->pp : 1, D, cpu = 0,
             grads = 0, n = in->n_params ? in->n_params : pc->total;
    int stage = x->shard == GM_SHARD_FSDP ? 3 : (int)x->shard;
    unsigned wbytes = in->precision == GM_PREC_FP32 ? 4 : 2;
    char note[GM_EST_NOTE_MAX];
    enum gm_status st;

    if (g % (t * pp) != 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--gpus %llu is not a multiple of --tp %llu x --pp %llu",
                       (unsigned long long)g, (unsigned long long)t, (unsigned long long)pp);
    /* query heads split evenly; KV heads split, or are replicated when fewer than t */
    if (t > 1 && m && m->n_heads && m->n_kv_heads &&
        (m->n_heads % t != 0 || (m->n_kv_heads % t != 0 && t % m->n_kv_heads != 0)))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--tp %llu does not divide the %llu attention heads / %llu KV heads",
                       (unsigned long long)t, (unsigned long long)m->n_heads,
                       (unsigned long long)m->n_kv_heads);
    if (x->offload_params && stage != 3)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "parameter offload needs --zero 3 or --fsdp");
    if (x->offload_optimizer && stage == 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "optimizer offload needs --zero 1|2|3 or --fsdp");
    D = g / (t * pp);
    res->gpus = g;
    res->gpus_per_node = x->gpus_per_node ? x->gpus_per_node : (g < 8 ? g : 8);
    res->nodes = div_up(g, res->gpus_per_node);

    for (size_t i = e->n_components; i-- > 0;) {
        struct gm_est_component *c = &e->components[i];
        enum ext_role r = ext_component_role(c);
        uint64_t b = c->bytes;
        bool to_cpu = false;
        switch (r) {
        case ROLE_ACT:
            if (t > 1)
                b = x->sequence_parallel ? div_up(b, t) : gm_mul_div_u64(b, 10 * t + 24, 34 * t);
            break;
        case ROLE_WEIGHTS:
            b = div_up(b, t);
            if (stage >= 3) {
                b = div_up(b, D);
                to_cpu = x->offload_params;
            }
            break;
        case ROLE_AUTOCAST:
            if (stage >= 3) {
                ext_remove_component(e, i);
                continue;
            }
            b = div_up(b, t);
            break;
        case ROLE_MASTER:
        case ROLE_OPT_STATE:
        case ROLE_OPT_TEMP:
            b = div_up(b, t);
            if (stage >= 1) {
                b = div_up(b, D);
                to_cpu = x->offload_optimizer;
            }
            break;
        case ROLE_GRADS:
            b = div_up(b, t);
            if (stage >= 2) {
                b = div_up(b, D);
                to_cpu = x->offload_optimizer;
            }
            grads = gm_add_sat(grads, b);
            break;
        default:
            b = div_up(b, t);
            break;
        }
        if (to_cpu) {
            cpu = gm_add_sat(cpu, gm_mul_sat(b, res->gpus_per_node));
            ext_remove_component(e, i);
            continue;
        }
        if (b != c->bytes) {
            size_t len = strlen(c->note);
            if (len + 24 < sizeof(c->note))
                snprintf(c->note + len, sizeof(c->note) - len, "%sper device", len ? "; " : "");
            c->bytes = b;
        }
    }
    res->cpu_bytes_per_node = cpu;

    if (in->mode == GM_EST_INFER && D > 1)
        gm_estimate_assume(e,
                           "%llu independent replicas of the model (data parallel inference): "
                           "figures are per GPU",
                           (unsigned long long)D);
    if (stage == 0 && D > 1 && !x->ddp_bucket_view && grads) {
        if ((st = gm_estimate_add_component(e, "ddp_grad_buckets", grads, GM_EST_PHASE_TRAIN_ALL,
                                            false,
                                            "DDP bucket copy of the gradients "
                                            "(gradient_as_bucket_view=False)",
                                            err)))
            return st;
    }
    if (stage >= 1 && stage <= 2 && D > 1) {
        uint64_t el = x->bucket_elements < div_up(n, t) ? x->bucket_elements : div_up(n, t);
        snprintf(note, sizeof note, "ZeRO reduce bucket, %llu elements in 16-bit",
                 (unsigned long long)el);
        if ((st = gm_estimate_add_component(e, "zero_reduce_bucket", gm_mul_sat(el, 2),
                                            GM_EST_PHASE_FORWARD_BACKWARD, true, note, err)))
            return st;
        snprintf(note, sizeof note, "ZeRO all-gather bucket, %llu elements in 16-bit",
                 (unsigned long long)el);
        if ((st = gm_estimate_add_component(e, "zero_allgather_bucket", gm_mul_sat(el, 2),
                                            GM_EST_PHASE_OPTIMIZER_STEP, true, note, err)))
            return st;
    }
    if (stage == 3) {
        uint64_t layer = m ? div_up(ext_layer_params(m, pc), t) : div_up(pc->largest_tensor, t);
        uint64_t gathered = gm_mul_sat(layer, 2 * wbytes);
        uint64_t gbytes = in->precision == GM_PREC_BF16 ? 2 : 4;
        snprintf(note, sizeof note,
                 "gathered parameters: current + prefetched layer, %llu params each in %u B",
                 (unsigned long long)layer, wbytes);
        if ((st = gm_estimate_add_component(e, "gathered_params", gathered,
                                            GM_EST_PHASE_FORWARD_BACKWARD, true, note, err)))
            return st;
        snprintf(note, sizeof note,
                 "one layer's unsharded gradient during reduce-scatter (%llu B "
                 "each)",
                 (unsigned long long)gbytes);
        if ((st = gm_estimate_add_component(e, "gathered_grads", gm_mul_sat(layer, gbytes),
                                            GM_EST_PHASE_FORWARD_BACKWARD, true, note, err)))
            return st;
        if (x->shard == GM_SHARD_ZERO3 && D > 1) {
            uint64_t el = x->bucket_elements < div_up(n, t) ? x->bucket_elements : div_up(n, t);
            snprintf(note, sizeof note, "ZeRO-3 reduce bucket, %llu elements in 16-bit",
                     (unsigned long long)el);
            if ((st = gm_estimate_add_component(e, "zero_reduce_bucket", gm_mul_sat(el, 2),
                                                GM_EST_PHASE_FORWARD_BACKWARD, true, note, err)))
                return st;
        }
    }
    if (g > 1 && (in->mode == GM_EST_TRAIN || t > 1)) {
        in->workspace_bytes = gm_add_sat(in->workspace_bytes, NCCL_BYTES);
        gm_estimate_assume(e, "NCCL communicator buffers: 1 GiB per GPU outside the caching "
                              "allocator (added to the device figure)");
    }
    if (t > 1)
        gm_estimate_assume(e,
                           "tensor parallel %llu: weights, gradients, optimizer state and logits "
                           "divided by %llu; activations %s",
                           (unsigned long long)t, (unsigned long long)t,
                           x->sequence_parallel ? "divided by t (sequence parallel)"
                                                : "x (10 + 24/t)/34 (Korthikanti, no sequence "
                                                  "parallelism)");
    if (in->mode == GM_EST_TRAIN && (x->shard != GM_SHARD_NONE || D > 1))
        gm_estimate_assume(e, "%s over %llu data-parallel ranks (%llu GPUs, %llu per node)%s%s",
                           gm_shard_name(x->shard), (unsigned long long)D, (unsigned long long)g,
                           (unsigned long long)res->gpus_per_node,
                           x->offload_optimizer ? "; optimizer state, master weights and step on "
                                                  "the CPU"
                                                : "",
                           x->offload_params ? "; parameters offloaded to the CPU" : "");
    return GM_OK;
}
