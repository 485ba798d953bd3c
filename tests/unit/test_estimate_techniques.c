/* SPDX-License-Identifier: MIT */
/* test_estimate_techniques.c - the memory techniques and the runtime around the tensors:
 * each setting changes the component kinds it should and no other (the table below: a
 * base job, the settings added, the kinds whose bytes change); the sizes the techniques'
 * sources give (the loss variants per B*L*V, torchtitan's op-level checkpointing, the
 * optimizer in backward, paged state outside the allocator); the ranges and the
 * three-way verdict; the vLLM budget per version range. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "estimate/estimate_int.h"
#include "gpumem/gpumem.h"
#include "job_settings.h"

#include <stdio.h>
#include <string.h>

static struct gm_estimate *base, *with; /* large: off the stack */

static void run(const char *model, const char *settings, struct gm_estimate **e)
{
    struct gm_job j;
    struct gm_error err;
    job_make(model, settings, &j);
    if (gm_estimate_run(&j, e, &err) != GM_OK)
        fail_msg("%s %s: %s", model, settings, err.msg);
}

/* Flags (1 << kind) of the kinds whose bytes differ between a and b. */
static unsigned changed_kinds(const struct gm_estimate *a, const struct gm_estimate *b)
{
    unsigned m = 0;
    for (int k = 0; k < GM_KIND__COUNT; k++)
        if (gm_estimate_kind_bytes(a, (enum gm_est_kind)k) !=
            gm_estimate_kind_bytes(b, (enum gm_est_kind)k))
            m |= 1u << k;
    return m;
}

static void kinds_text(unsigned m, char *out, size_t n)
{
    out[0] = 0;
    for (int k = 0; k < GM_KIND__COUNT; k++)
        if (m & (1u << k))
            snprintf(out + strlen(out), n - strlen(out), "%s%s", out[0] ? "," : "",
                     gm_est_kind_name((enum gm_est_kind)k));
}

#define K(kind) (1u << (kind))

#define TRAIN8B "--train --batch 2 --seq 4096"
#define FSDP8   TRAIN8B " --gpus 8 --fsdp"

/* Each technique against its base: exactly these kinds change. */
static void test_techniques_change_their_kinds(void **state)
{
    static const struct {
        const char *model, *base, *added;
        unsigned kinds;
    } cases[] = {
        /* the loss implementations change the loss; fused linear cross-entropy also drops
         * the lm_head's saved input (the kernel keeps the input's gradient instead) */
        {"llama-3-8b", TRAIN8B, "--loss chunked", K(GM_KIND_LOGITS)},
        {"llama-3-8b", TRAIN8B, "--loss chunked --loss-chunks 32", K(GM_KIND_LOGITS)},
        {"llama-3-8b", TRAIN8B, "--loss fused", K(GM_KIND_LOGITS)},
        {"llama-3-8b", TRAIN8B, "--loss fused-linear", K(GM_KIND_LOGITS) | K(GM_KIND_ACTIVATIONS)},
        {"llama-3-8b", TRAIN8B, "--transformers-version 4.48.1", K(GM_KIND_LOGITS)},
        /* the optimizer in backward: gradients and step temporaries, not the state */
        {"llama-3-8b", TRAIN8B, "--optimizer-in-backward",
         K(GM_KIND_GRADIENTS) | K(GM_KIND_OPTIMIZER_TEMP)},
        /* paged state leaves the allocator (bitsandbytes updates in place) */
        {"llama-3-8b", TRAIN8B, "--paged-optimizer",
         K(GM_KIND_OPTIMIZER_STATE) | K(GM_KIND_MANAGED) | K(GM_KIND_OPTIMIZER_TEMP)},
        /* checkpointing policies and offloading: activations only */
        {"llama-3-8b", TRAIN8B, "--grad-checkpointing full", K(GM_KIND_ACTIVATIONS)},
        {"llama-3-8b", TRAIN8B, "--grad-checkpointing op", K(GM_KIND_ACTIVATIONS)},
        {"llama-3-8b", TRAIN8B, "--grad-checkpointing full --checkpoint-every 2",
         K(GM_KIND_ACTIVATIONS)},
        {"llama-3-8b", TRAIN8B " --attention eager", "--grad-checkpointing selective",
         K(GM_KIND_ACTIVATIONS)},
        {"llama-3-8b", TRAIN8B, "--activation-offload", K(GM_KIND_ACTIVATIONS)},
        {"llama-3-8b", TRAIN8B " --grad-checkpointing full", "--activation-offload",
         K(GM_KIND_ACTIVATIONS)},
        /* fused kernels and the compiled layers: what a layer keeps and its backward */
        {"llama-3-8b", TRAIN8B, "--fused-kernels rms_norm", K(GM_KIND_ACTIVATIONS)},
        {"llama-3-8b", TRAIN8B, "--fused-kernels swiglu",
         K(GM_KIND_ACTIVATIONS) | K(GM_KIND_BACKWARD_TEMP)},
        {"llama-3-8b", TRAIN8B, "--fused-kernels rope", 0}, /* forward temporaries only */
        {"llama-3-8b", TRAIN8B, "--compile", K(GM_KIND_ACTIVATIONS) | K(GM_KIND_BACKWARD_TEMP)},
        /* torchtune compiles its chunked loss with the layers */
        {"llama-3-8b", TRAIN8B " --stack torchtune@0.4 --loss chunked", "--compile",
         K(GM_KIND_ACTIVATIONS) | K(GM_KIND_BACKWARD_TEMP) | K(GM_KIND_LOGITS)},
        /* packing: the same tokens change nothing; more tokens scale the per-token terms */
        {"llama-3-8b", "--train --seq 4096", "--tokens-per-batch 4096", 0},
        {"llama-3-8b", "--train --seq 4096", "--tokens-per-batch 16384",
         K(GM_KIND_ACTIVATIONS) | K(GM_KIND_LOGITS) | K(GM_KIND_BACKWARD_TEMP)},
        /* FSDP variants: what is gathered */
        {"llama-3-8b", FSDP8, "--fsdp-version 2", K(GM_KIND_GATHERED)},
        {"llama-3-8b", FSDP8, "--no-reshard-after-forward", K(GM_KIND_GATHERED)},
        /* QLoRA without the fp32 upcast: the frozen base's 16-bit parts and a 16-bit
         * residual stream: the checkpointed layer inputs, the residual's gradient */
        {"llama-3-8b", TRAIN8B " --qlora --grad-checkpointing full", "--no-fp32-upcast",
         K(GM_KIND_WEIGHTS) | K(GM_KIND_ACTIVATIONS) | K(GM_KIND_BACKWARD_TEMP)},
        {"llama-3-8b", TRAIN8B " --lora", "--adapter-dtype bf16",
         K(GM_KIND_ADAPTERS) | K(GM_KIND_GRADIENTS) | K(GM_KIND_OPTIMIZER_STATE) |
             K(GM_KIND_OPTIMIZER_TEMP) | K(GM_KIND_ACTIVATIONS)},
        /* the runtime around the tensors */
        {"llama-3-8b", TRAIN8B, "--cuda-version 11.2", K(GM_KIND_CUDA_CONTEXT)},
        {"llama-3-8b", TRAIN8B, "--cuda-version 12.1", 0},
        {"llama-3-8b", FSDP8, "--nccl 2GiB", K(GM_KIND_NCCL)},
        /* 0.10 captures 67 graph sizes where current vLLM captures 51, its V1 runner
         * sorts the profile's logits where current vLLM's runner V2 samples without a sort,
         * it counts 20 MiB of kernels as non-torch where current vLLM counts 143, and it
         * turns NCCL's cuMem off (its small allocations not in 2 MiB granules) */
        {"llama-3-8b", "--infer --engine vllm --gpu H100 --tp 2", "--vllm-version 0.10.1",
         K(GM_KIND_LOGITS) | K(GM_KIND_KV_CACHE) | K(GM_KIND_ENGINE_POOL) | K(GM_KIND_NCCL) |
             K(GM_KIND_NON_TORCH)},
        /* V0 also profiles its own batch: 256 sequences to sample with a sort, not 1024
         * without one, so its sampler outweighs the forward (whose activations give way to
         * the hidden states it leaves), captures graphs for 35 sizes to 256, and counts
         * row v008's 94 MiB of kernels where current vLLM counts 143 */
        {"llama-3-8b", "--infer --engine vllm --gpu H100", "--vllm-version 0.6.3",
         K(GM_KIND_ACTIVATIONS) | K(GM_KIND_KV_CACHE) | K(GM_KIND_LOGITS) | K(GM_KIND_ENGINE_POOL) |
             K(GM_KIND_NON_TORCH)},
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char b[512], got[256], want[256];
        unsigned m;
        run(cases[i].model, cases[i].base, &base);
        snprintf(b, sizeof b, "%s %s", cases[i].base, cases[i].added);
        run(cases[i].model, b, &with);
        m = changed_kinds(base, with);
        kinds_text(m, got, sizeof got);
        kinds_text(cases[i].kinds, want, sizeof want);
        if (m != cases[i].kinds)
            fail_msg("%s: %s changes {%s}, want {%s}", cases[i].base, cases[i].added, got, want);
    }
}

/* Expert parallelism splits the experts' model state, adds the all-to-all rows and a
 * communicator, and leaves attention and the loss alone. */
static void test_expert_parallel(void **state)
{
    uint64_t w0, w1;
    double share;
    const struct gm_model *m = gm_model_catalog_find("mixtral-8x7b");
    (void)state;
    run("mixtral-8x7b", "--train --precision bf16 --batch 1 --seq 2048 --gpus 4", &base);
    run("mixtral-8x7b", "--train --precision bf16 --batch 1 --seq 2048 --gpus 4 --ep 4", &with);
    w0 = gm_estimate_kind_bytes(base, GM_KIND_WEIGHTS);
    w1 = gm_estimate_kind_bytes(with, GM_KIND_WEIGHTS);
    /* the routed experts: 32 layers x 8 experts x 3 x 4096 x 14336 of 46.7 B parameters */
    share = 32.0 * 8 * 3 * 4096 * 14336 / 46702792704.0;
    assert_true(w1 < w0);
    assert_true((double)w1 / (double)w0 > (1 - share + share / 4) - 1e-6 &&
                (double)w1 / (double)w0 < (1 - share + share / 4) + 1e-6);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS),
                     gm_estimate_kind_bytes(base, GM_KIND_LOGITS));
    assert_true(gm_estimate_kind_bytes(with, GM_KIND_ACTIVATIONS) >
                gm_estimate_kind_bytes(base, GM_KIND_ACTIVATIONS));
    /* data parallel + expert parallel: two communicators, the second of 4 ranks over PCIe
     * (no GPU named) with cuMem: 2 channels x two 12 MiB pairs + 2 MiB x (3 x 2 + 2) */
    assert_int_equal(with->layout.nccl_communicators, 2);
    assert_int_equal(base->layout.nccl_communicators, 1);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_NCCL) -
                         gm_estimate_kind_bytes(base, GM_KIND_NCCL),
                     2 * 2 * 12 * GM_MIB + 8 * 2 * GM_MIB);
    assert_non_null(m);
}

static const struct gm_est_component *named(const struct gm_estimate *e, const char *name);

/* The gradients of the logits among the loss's bytes (act_grad_share), as bytes. */
static double loss_grad_bytes(const struct gm_estimate *e)
{
    const struct gm_est_component *c = named(e, "logits_and_loss");
    return c->act_grad_share * (double)c->bytes;
}

/* The loss at its moment, in bytes per logit (T = B*L tokens, V = vocabulary). */
static void test_loss_sizes(void **state)
{
    const uint64_t T = 2 * 4096, V = 128256, h = 4096;
    uint64_t logits;
    (void)state;
    run("llama-3-8b", TRAIN8B, &base);
    logits = gm_estimate_kind_bytes(base, GM_KIND_LOGITS);
    /* HF ForCausalLMLoss: 12 B per logit (the fp32 log-softmax kept, its output's and its
     * input's gradients); transformers 4.46-4.48 also copy the shifted fp32 logits: 14 B */
    assert_int_equal(logits, 12 * T * V);
    run("llama-3-8b", TRAIN8B " --transformers-version 4.48.1", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 14 * T * V);
    run("llama-3-8b", TRAIN8B " --transformers-version 4.45.2", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 12 * T * V);
    /* torchtune's chunked cross-entropy: 4 B per logit kept plus one chunk's 10 B */
    run("llama-3-8b", TRAIN8B " --loss chunked", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 4 * T * V + 10 * T * V / 8);
    assert_true(loss_grad_bytes(with) > 4.0 * (double)(T * V) / 8 - 1 && /* one chunk's fp32 */
                loss_grad_bytes(with) < 4.0 * (double)(T * V) / 8 + 1);
    /* the same chunks with each chunk's loss compiled (torchtune 0.3 to 0.6's compile_loss):
     * the 16-bit logits kept by the compiled graphs, one chunk's new 16-bit gradient beside
     * them and a log-sum-exp per token, no fp32 copy; with 16 chunks the gradient is half as
     * large */
    run("llama-3-8b", TRAIN8B " --stack torchtune@0.4 --loss chunked --compile", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS),
                     2 * T * V + 2 * T * V / 8 + 4 * T);
    /* of which one chunk's 16-bit gradient, not the whole logits' */
    assert_true(loss_grad_bytes(with) > 2.0 * (double)(T * V) / 8 - 1 &&
                loss_grad_bytes(with) < 2.0 * (double)(T * V) / 8 + 1);
    run("llama-3-8b", TRAIN8B " --stack torchtune --loss chunked --loss-chunks 16 --compile",
        &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS),
                     2 * T * V + 2 * T * V / 16 + 4 * T);
    /* compile_loss exists from torchtune 0.3.0 only, and no other stack compiles the chunks:
     * torchtune 0.2, accelerate and a custom loop keep the uncompiled form */
    run("llama-3-8b", TRAIN8B " --stack torchtune@0.2 --loss chunked --compile", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 4 * T * V + 10 * T * V / 8);
    run("llama-3-8b", TRAIN8B " --stack accelerate --loss chunked --compile", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 4 * T * V + 10 * T * V / 8);
    run("llama-3-8b", TRAIN8B " --loss chunked --compile", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 4 * T * V + 10 * T * V / 8);
    /* torchtune's compile_loss compiles any other loss whole: not modelled, said */
    run("llama-3-8b", TRAIN8B " --stack torchtune@0.4 --loss full --compile", &with);
    {
        bool said = false;
        for (size_t i = 0; i < with->n_assumptions; i++)
            said = said || strstr(with->assumptions[i], "compile_loss else branch") != NULL;
        assert_true(said);
    }
    /* a cross-entropy kernel on the bf16 logits: 2 B per logit and a logsumexp per token */
    run("llama-3-8b", TRAIN8B " --loss fused", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 2 * T * V + 4 * T);
    /* Liger's fused linear cross-entropy: the input's gradient, the lm_head's fp32 gradient
     * (the master weights' dtype), one chunk of next_pow2(ceil(8192 / ceil(V / h))) = 256
     * rows of logits and of input gradient; no B x L x V tensor */
    run("llama-3-8b", TRAIN8B " --loss fused-linear", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS),
                     2 * T * h + 4 * V * h + 2 * 256 * (V + h));
    assert_true(gm_estimate_kind_bytes(with, GM_KIND_LOGITS) < logits / 4);
    /* a custom loop's F.cross_entropy on the shifted copy of the bf16 logits: under autocast
     * cross_entropy is an fp32 op (the copy cast to fp32, an fp32 log-softmax): 12 B, as
     * ForCausalLMLoss; in pure bf16 nothing is upcast: logits, copy, log-softmax, 3 x 2 B */
    run("llama-3-8b", TRAIN8B " --loss plain", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 12 * T * V);
    run("llama-3-8b", TRAIN8B " --loss plain --precision bf16", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 6 * T * V);
    run("llama-3-8b", TRAIN8B " --precision bf16", &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_LOGITS), 12 * T * V);
    assert_true(with->peak_allocated_bytes < base->peak_allocated_bytes);
    /* torchtitan's ChunkedCELoss (components/loss.py, f90c845): 8 chunks, each with its
     * backward at once: the detached .contiguous() copy of the hidden states, the list of
     * chunk input gradients and their torch.cat (3 x 2 B x T x h), the lm_head's fp32
     * gradient taken per chunk, one chunk's bf16 logits (held by the loop), its fp32
     * log-softmax, that one's gradient and the fp32 input's (2 + 4 + 4 + 4 B per logit) */
    run("llama-3-8b", TRAIN8B " --loss chunked-backward", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS),
                     3 * 2 * T * h + 4 * V * h + 14 * T * V / 8);
    run("llama-3-8b", TRAIN8B " --loss chunked-backward --loss-chunks 16", &base);
    assert_true(gm_estimate_kind_bytes(base, GM_KIND_LOGITS) <
                gm_estimate_kind_bytes(with, GM_KIND_LOGITS));
    /* Apple's Cut Cross-Entropy (cce_backward.py, 18e76ad): the fp32 log-sum-exp per token
     * and the two gradients, no chunk of logits in device memory: less than Liger's */
    run("llama-3-8b", TRAIN8B " --loss fused-linear --loss-impl cce", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 2 * T * h + 4 * V * h + 4 * T);
    /* TileGym's cuTile fused linear cross-entropy (fused_linear_cross_entropy.py, d966a0a):
     * one 4096-row bf16 logits buffer kept for the backward, the input's gradient, an fp32
     * loss per row, and over two chunks an fp32 dW accumulator beside a bf16 dW buffer, made
     * even where the head is frozen: a LoRA job keeps the same bytes at the loss, where
     * Liger's holds no head gradient (4 V h less) */
    run("llama-3-8b", TRAIN8B " --loss fused-linear --loss-impl cutile", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS),
                     2 * T * h + (4 + 2) * V * h + 2 * 4096 * V + 4 * T);
    run("llama-3-8b", TRAIN8B " --loss fused-linear --loss-impl cutile --lora", &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_LOGITS),
                     gm_estimate_kind_bytes(with, GM_KIND_LOGITS));
    run("llama-3-8b", TRAIN8B " --loss fused-linear --lora", &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_LOGITS), 2 * T * h + 2 * 256 * (V + h));
    /* 1001 rows: padded to 1008 (a padded copy of the input and a gradient of that size), one
     * chunk (no dW buffers), the buffer still 4096 rows */
    run("llama-3-8b", "--train --batch 1 --seq 1001 --loss fused-linear --loss-impl cutile", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS),
                     2 * 2 * 1008 * h + 2 * 4096 * V + 4 * 1008);
    run("llama-3-8b", TRAIN8B, &base);
    /* the loss lives at its own moment, not beside the layers' backward temporaries */
    assert_true(base->loss_bytes >= logits);
    assert_true(base->backward_start_bytes < base->loss_bytes + logits);
}

/* FSDP with the embedding and the lm_head as units of their own (torchtune's
 * custom_sharded_layers, torchtitan's apply_fsdp): the root no longer holds them from the
 * forward to the backward.  At the start of the layers' backward neither is gathered (the
 * whole root's bytes less), at the loss only the lm_head and the final norm (the
 * embedding's bytes less); the same bytes, at other moments. */
static void test_fsdp_shard_ends(void **state)
{
    uint64_t root = 0, head = 0, emb = 0;
    (void)state;
    run("llama-3-8b", FSDP8 " --fsdp-version 2", &base);
    run("llama-3-8b", FSDP8 " --fsdp-version 2 --fsdp-shard-ends", &with);
    for (size_t i = 0; i < base->n_components; i++)
        if (!strcmp(base->components[i].name, "gathered_root"))
            root = base->components[i].bytes;
    for (size_t i = 0; i < with->n_components; i++) {
        assert_string_not_equal(with->components[i].name, "gathered_root");
        if (!strcmp(with->components[i].name, "gathered_head"))
            head = with->components[i].bytes;
        if (!strcmp(with->components[i].name, "gathered_embedding"))
            emb = with->components[i].bytes;
    }
    /* Llama-3-8B untied: 128256 x 4096 each, in bf16, plus the final norm with the head */
    assert_int_equal(emb, 2ull * 128256 * 4096);
    assert_int_equal(head, 2ull * (128256 * 4096 + 4096));
    assert_int_equal(root, head + emb);
    assert_int_equal(base->backward_start_bytes - with->backward_start_bytes, root);
    assert_int_equal(base->loss_bytes - with->loss_bytes, emb);
}

/* The model implementation where stacks differ: GPT-2's gelu_new is transformers' Python
 * formula (NewGELUActivation: x^3, its sum, the tanh, each saved), LitGPT's GptNeoxMLP one
 * F.gelu(approximate="tanh") op saving its input only (litgpt/model.py, 04205815): 3 x the
 * MLP width fewer bytes per token and layer; a SwiGLU model (Llama) is the same in both. */
static void test_model_impl(void **state)
{
    const uint64_t T = 8 * 1024, I = 3072, layers = 12;
    (void)state;
    run("gpt2", "--train --batch 8 --seq 1024", &base);
    run("gpt2", "--train --batch 8 --seq 1024 --model-impl litgpt", &with);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_ACTIVATIONS) -
                         gm_estimate_kind_bytes(with, GM_KIND_ACTIVATIONS),
                     layers * T * I * 2 * 3);
    run("llama-3-8b", TRAIN8B, &base);
    run("llama-3-8b", TRAIN8B " --model-impl litgpt", &with);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_ACTIVATIONS),
                     gm_estimate_kind_bytes(with, GM_KIND_ACTIVATIONS));
}

/* FSDP's parameter offload (FSDP2 CPUOffloadPolicy: "offloads parameters, gradients, and
 * optimizer states to CPU ... the optimizer step runs on CPU", torch
 * _fully_shard/_fsdp_api.py) leaves no model state on the device; DeepSpeed ZeRO-3's
 * offload_param alone keeps the optimizer state where offload_optimizer says. */
static void test_fsdp_param_offload(void **state)
{
    static const enum gm_est_kind gone[] = {GM_KIND_MASTER_WEIGHTS, GM_KIND_GRADIENTS,
                                            GM_KIND_OPTIMIZER_STATE, GM_KIND_OPTIMIZER_TEMP};
    (void)state;
    run("llama-3-8b", FSDP8 " --fsdp-version 2", &base);
    run("llama-3-8b", FSDP8 " --fsdp-version 2 --offload-params", &with);
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) {
        assert_true(gm_estimate_kind_bytes(base, gone[i]) > 0);
        assert_int_equal(gm_estimate_kind_bytes(with, gone[i]), 0);
    }
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_ACTIVATIONS),
                     gm_estimate_kind_bytes(base, GM_KIND_ACTIVATIONS));
    run("llama-3-8b", TRAIN8B " --gpus 8 --zero 3 --offload-params", &with);
    assert_true(gm_estimate_kind_bytes(with, GM_KIND_OPTIMIZER_STATE) > 0);
}

/* transformers generate() by release (stage_infer.c hf_generate_form): before 4.36 the
 * legacy tuple cache keeps the previous step's whole cache while torch.cat builds the next
 * (twice the cache at the end of a step) and the prefill returns fp32 logits at every prompt
 * position; 4.36 to 4.44 DynamicCache replaces one layer at a time (one layer's cache more),
 * logits still at every position; from 4.45 (num_logits_to_keep) the last position only. */
/* The kernels generate() runs quantised linears through, and their buffers, from each
 * kernel's code: exllama (v1, transformers' default for 4-bit GPTQ) keeps temp_dq, the
 * largest linear in fp16 (qweight.numel() x 8 halves), and with act-order temp_state of
 * max_input_len x the widest side; exllamav2 one scratch of the largest
 * scratch_space_fixed(); Marlin an int32 workspace of out / 128 x 16 per linear; AWQ's gemm
 * dequantises the weight for 1024 prompt tokens or more; LLM.int8() quantises the prompt and
 * keeps an int32 product.  Llama-3-8B: the largest linear is gate/up, 4096 x 14336. */
static void test_quant_kernel_scratch(void **state)
{
    /* q, k, v, o, gate, up, down outputs */
    const uint64_t big = 4096ull * 14336, layer_outs = 4096 + 2 * 1024 + 4096 + 2 * 14336 + 4096;
    (void)state;
    run("llama-3-8b", "--infer --batch 2 --context 4096 --quant gptq", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_ENGINE_POOL), big * 2 + 2);
    run("llama-3-8b", "--infer --batch 2 --context 4096 --quant gptq --quant-kernel exllamav2",
        &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_ENGINE_POOL),
                     big * 2 + 128 + 14336ull * 2048 * 8 * 4 + 128);
    run("llama-3-8b", "--infer --batch 2 --context 4096 --quant gptq --quant-kernel marlin", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_ENGINE_POOL), 32ull * layer_outs / 2);
    run("llama-3-8b", "--infer --batch 2 --context 4096 --quant gptq --quant-kernel plain", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_ENGINE_POOL), 0);
    /* a kernel of another format is refused by name, not counted */
    run("llama-3-8b", "--infer --batch 2 --context 4096 --quant gptq --quant-kernel gemm", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_ENGINE_POOL), 0);
    run("llama-3-8b", "--infer --batch 1 --context 4096 --quant awq", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_GATHERED), big * 2);
    run("llama-3-8b", "--infer --batch 1 --context 512 --quant awq", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_GATHERED), 0);
    run("llama-3-8b", "--infer --batch 1 --context 4096 --quant int8", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_GATHERED),
                     4096ull * (3 * 4096 + 6 * 14336));
}

static void test_hf_generate_by_version(void **state)
{
    const uint64_t B = 8, ctx = 4096, V = 128256, layers = 32;
    uint64_t kv;
    (void)state;
#define GEN "--infer --batch 8 --context 4096 --new-tokens 512"
    run("llama-3-8b", GEN, &base);
    kv = gm_estimate_kind_bytes(base, GM_KIND_KV_CACHE);
    assert_int_equal(kv, 2ull * layers * 8 * 128 * (4096 + 512) * 2 * B);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_LOGITS), B * V * 6);
    run("llama-3-8b", GEN " --transformers-version 4.35.2", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_KV_CACHE), 2 * kv);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), B * ctx * V * 6);
    run("llama-3-8b", GEN " --transformers-version 4.40", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_KV_CACHE), kv + kv / layers);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), B * ctx * V * 6);
    run("llama-3-8b", GEN " --transformers-version 4.46", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_KV_CACHE), kv + kv / layers);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), B * V * 6);
    /* a static cache is written in place */
    run("llama-3-8b", GEN " --transformers-version 4.46 --static-cache", &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_KV_CACHE), kv);
    /* bitsandbytes 4-bit: the prompt's matmuls dequantise each weight to bf16 (MatMul4Bit),
     * the largest linear (4096 x 14336) for a moment of the prefill; decoding's gemv no copy */
    run("llama-3-8b", GEN " --quant nf4", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_GATHERED), 4096ull * 14336 * 2);
    run("llama-3-8b", "--infer --batch 1 --context 1 --quant nf4", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_GATHERED), 0);
    /* the preset syntax: hf@V is transformers V */
    run("llama-3-8b", GEN " --stack hf@4.35.2", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_KV_CACHE), 2 * kv);
    run("llama-3-8b", GEN, &base);
    run("llama-3-8b", GEN " --transformers-version 4.46", &with);
    /* from 4.45 the peak is the current accounting's and one layer's cache at most */
    assert_true(with->peak_allocated_bytes < base->peak_allocated_bytes + kv / layers + 1);
#undef GEN
}

/* What generate()'s default cache keeps in the sliding-window layers, by transformers release
 * and architecture (stage_infer.c hf_window_cache): before 4.56 a plain DynamicCache keeps
 * every token in every layer (Mistral-7B-v0.1, gpt-oss); from 4.56 DynamicSlidingWindowLayer
 * keeps the window; Gemma-2's default before 4.56 is its hybrid cache: the window, preallocated
 * and written in place (no concatenation); --static-cache keeps the window at any release. */
static void test_hf_generate_sliding_by_version(void **state)
{
    /* bytes per token and layer: Mistral-7B-v0.1 (32 layers, all sliding, window 4096, 8 KV
     * heads of 128, bf16) */
    const uint64_t mistral_tok = 2ull * 8 * 128 * 2;
    /* Gemma-2-9B: 42 layers, 21 sliding (window 4096), 8 KV heads of 256 */
    const uint64_t gemma_tok = 2ull * 8 * 256 * 2;
    /* gpt-oss-20b: 24 layers, 12 sliding (window 128), 8 KV heads of 64 */
    const uint64_t oss_tok = 2ull * 8 * 64 * 2;
    uint64_t kv;
    (void)state;
#define LONG "--infer --batch 1 --context 16384 --new-tokens 0"
    run("mistral-7b", LONG, &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_KV_CACHE), 32 * mistral_tok * 4096);
    run("mistral-7b", LONG " --transformers-version 4.55.4", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_KV_CACHE), 32 * mistral_tok * 16384);
    run("mistral-7b", LONG " --transformers-version 4.56", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_KV_CACHE), 32 * mistral_tok * 4096);
    run("mistral-7b", LONG " --transformers-version 4.40 --static-cache", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_KV_CACHE), 32 * mistral_tok * 4096);
    /* the assumption names the cache of the release: the legacy tuple cache before 4.36,
     * DynamicCache from 4.36 */
    {
        static const struct {
            const char *version, *cache;
        } said[] = {{"4.35.2", "generate()'s legacy tuple cache keeps every token"},
                    {"4.40", "generate()'s DynamicCache keeps every token"}};
        for (size_t k = 0; k < sizeof said / sizeof said[0]; k++) {
            char args[160];
            bool named = false;
            snprintf(args, sizeof args, LONG " --transformers-version %s", said[k].version);
            run("mistral-7b", args, &with);
            for (size_t i = 0; i < with->n_assumptions; i++)
                named = named || strstr(with->assumptions[i], said[k].cache) != NULL;
            assert_true(named);
        }
    }
    run("gpt-oss-20b", LONG " --transformers-version 4.55", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_KV_CACHE), 24 * oss_tok * 16384);
    run("gpt-oss-20b", LONG " --transformers-version 4.56", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_KV_CACHE),
                     12 * oss_tok * 16384 + 12 * oss_tok * 128);
#undef LONG
    /* Gemma-2 decoding 512 tokens after 8192: the hybrid cache before 4.56 (no torch.cat
     * copy), DynamicCache with window layers from 4.56 (one layer's average copy) */
    kv = gemma_tok * (21 * 4096 + 21 * (8192 + 512));
    run("gemma-2-9b",
        "--infer --batch 1 --context 8192 --new-tokens 512 "
        "--transformers-version 4.50",
        &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_KV_CACHE), kv);
    run("gemma-2-9b",
        "--infer --batch 1 --context 8192 --new-tokens 512 "
        "--transformers-version 4.56",
        &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_KV_CACHE), kv + kv / 42);
}

/* --stack NAME[@VERSION] takes the stack's own defaults (src/estimate/stacks.c, each row
 * cited): torchtune before 0.3 ran nn.CrossEntropyLoss on the decoder's fp32 logits
 * (TransformerDecoder: self.output(h).float()) with a for-loop
 * AdamW under FSDP1; from 0.3 CEWithChunkedOutputLoss, from 0.4 fused AdamW, FSDP2;
 * torchtitan checkpoints every 2nd block with fused AdamW and launches with expandable
 * segments (run_train.sh); hf-trainer@V is transformers V.
 * An option given wins whether it comes before or after --stack, and the preset's
 * choices still in force are named as assumptions. */
static void test_stack_presets(void **state)
{
    struct gm_job j;
    struct gm_error err;
    (void)state;
    job_make("llama-3-8b", "--train --stack torchtune@0.2.1", &j);
    assert_int_equal(j.memory.loss, GM_LOSS_FULL);
    assert_true(est_preset_set(&j, EST_SET_LOSS));
    assert_int_equal(j.numerics.optim_impl, GM_OPTIM_FOR_LOOP);
    assert_int_equal(j.parallel.fsdp_version, 1);
    assert_int_equal(j.numerics.precision, GM_PREC_BF16);
    assert_int_equal(j.memory.checkpointing, GM_CKPT_FULL);
    assert_int_equal(j.stack.framework, GM_FRAMEWORK_TORCHTUNE);
    assert_false(gm_job_given(&j, "loss"));
    job_make("llama-3-8b", "--train --stack torchtune@0.3", &j);
    assert_int_equal(j.memory.loss, GM_LOSS_CHUNKED);
    assert_int_equal(j.numerics.optim_impl, GM_OPTIM_FOR_LOOP);
    assert_int_equal(j.parallel.fsdp_version, 2);
    job_make("llama-3-8b", "--train --stack torchtune", &j);
    assert_int_equal(j.numerics.optim_impl, GM_OPTIM_FUSED);
    /* explicit options win, before or after */
    job_make("llama-3-8b", "--train --loss full --stack torchtune", &j);
    assert_int_equal(j.memory.loss, GM_LOSS_FULL);
    job_make("llama-3-8b", "--train --stack torchtune --loss full", &j);
    assert_int_equal(j.memory.loss, GM_LOSS_FULL);
    assert_true(gm_job_given(&j, "loss"));
    job_make("llama-3-8b", "--train --stack torchtitan", &j);
    assert_int_equal(j.memory.checkpointing, GM_CKPT_FULL);
    assert_int_equal(j.memory.checkpoint_every, 2);
    assert_int_equal(j.numerics.optim_impl, GM_OPTIM_FUSED);
    assert_int_equal(j.memory.loss, GM_LOSS_FULL);
    assert_int_equal(j.stack.framework, GM_FRAMEWORK_TORCHTITAN);
    /* run_train.sh starts every run with expandable segments; --alloc-conf still wins */
    assert_true(j.runtime.alloc.expandable_segments);
    assert_true(est_preset_set(&j, EST_SET_ALLOC_CONF));
    job_make("llama-3-8b", "--train --stack torchtitan --alloc-conf max_split_size_mb:512", &j);
    assert_false(j.runtime.alloc.expandable_segments);
    job_make("llama-3-8b", "--train --stack lightning", &j);
    assert_int_equal(j.stack.model_impl, GM_MODEL_IMPL_LITGPT);
    assert_int_equal(j.stack.framework, GM_FRAMEWORK_LIGHTNING);
    job_make("llama-3-8b", "--train --stack hf-trainer@4.47", &j);
    assert_int_equal(j.stack.transformers, GM_VERSION(4, 47, 0));
    assert_int_equal(j.stack.framework, GM_FRAMEWORK_HF);
    /* the preset's choices are assumptions; an overridden one is not */
    job_make("llama-3-8b", "--train --stack torchtune --optimizer-impl foreach", &j);
    if (gm_estimate_run(&j, &with, &err) != GM_OK)
        fail_msg("%s", err.msg);
    {
        bool loss = false, impl = false;
        for (size_t i = 0; i < with->n_assumptions; i++) {
            loss |= strstr(with->assumptions[i], "--stack torchtune: --loss chunked") != NULL;
            impl |= strstr(with->assumptions[i], "--optimizer-impl") != NULL;
        }
        assert_true(loss);
        assert_false(impl);
    }
    /* the QLoRA-only row is no assumption of a full fine-tune or a LoRA job */
    for (int lora = 0; lora < 2; lora++) {
        run("llama-3.2-1b", lora ? "--train --stack torchtune --lora" : "--train --stack torchtune",
            &with);
        for (size_t i = 0; i < with->n_assumptions; i++)
            if (strstr(with->assumptions[i], "--no-fp32-upcast"))
                fail_msg("%s: %s", lora ? "LoRA" : "full", with->assumptions[i]);
    }
    gm_job_init(&j);
    assert_int_equal(gm_job_set(&j, "stack", "torchtune@x", &err), GM_ERR_INVALID);
    assert_int_equal(gm_job_set(&j, "stack", "tune", &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "torchtitan"));
}

/* torchtune's QLoRA builds the model in bf16 and turns only the linears into NF4
 * (models/llama3_2/_component_builders.py at 1814feb: FrozenNF4Linear / LoRALinear with
 * quantize_base; nn.Embedding, the tied output and RMSNorm stay bf16): no PEFT
 * prepare_model_for_kbit_training, so the rest of Llama-3.2-3B's frozen base is 2 B per
 * parameter, not 4: the tied embedding (128256 x 3072) and 57 norms of 3072. */
static void test_torchtune_qlora_keeps_the_rest_bf16(void **state)
{
    const uint64_t rest = 128256ull * 3072 + 57ull * 3072;
    struct gm_job j;
    uint64_t w_tune, w_peft, w_flag;
    (void)state;
    job_make("llama-3.2-3b", "--train --qlora --stack torchtune", &j);
    assert_false(j.memory.lora.fp32_upcast);
    assert_true(est_preset_set(&j, EST_SET_NO_FP32_UPCAST));
    run("llama-3.2-3b", "--train --qlora --stack torchtune", &with);
    w_tune = gm_estimate_kind_bytes(with, GM_KIND_WEIGHTS);
    {
        bool named = false;
        for (size_t i = 0; i < with->n_assumptions; i++)
            named = named || strstr(with->assumptions[i], "--stack torchtune: --no-fp32-upcast");
        assert_true(named);
    }
    run("llama-3.2-3b", "--train --qlora --precision bf16 --no-fp32-upcast", &base);
    w_flag = gm_estimate_kind_bytes(base, GM_KIND_WEIGHTS);
    run("llama-3.2-3b", "--train --qlora --precision bf16", &base);
    w_peft = gm_estimate_kind_bytes(base, GM_KIND_WEIGHTS);
    assert_int_equal(w_tune, w_flag);
    assert_int_equal(w_peft - w_tune, 2 * rest);
}

/* TRL's SFTTrainer with a PEFT config on a 4-bit model under bf16 AMP (trl/trainer/
 * sft_trainer.py at v0.13.0, 8d4cc94): PEFT's prepare_model_for_kbit_training upcasts every
 * parameter that is not 4-bit to fp32, then peft_module_casting_to_bf16 (trl/trainer/utils.py)
 * keeps the norms fp32 and casts "embed_tokens" and "lm_head" back to bf16.  Mistral-7B's
 * frozen base is then the --no-fp32-upcast one plus the norms' 65 x 4096 at 2 B more (what the
 * fms table's baseline QLoRA runs read against the accelerated ones beside the fp32
 * checkpoints), and the upcast one less 2 x 32000 x 4096 x 2 B.  From TRL 0.7.5 (0c77f98); not
 * under FSDP (from 0.8.0 TRL leaves a sharded QLoRA model as it is), nor under fp16 AMP
 * (args.bf16 false), nor without --trl-version. */
static void test_trl_casts_qlora_embeddings_bf16(void **state)
{
    const char *q = "--train --qlora --batch 1 --seq 512 --transformers-version 4.48.1";
    const uint64_t norms = 65ull * 4096, vocab = 2ull * 32000 * 4096;
    char args[256];
    uint64_t w_trl, w_peft, w_none, w;
    (void)state;
    run("mistral-7b", q, &base);
    w_peft = gm_estimate_kind_bytes(base, GM_KIND_WEIGHTS);
    snprintf(args, sizeof args, "%s --no-fp32-upcast --trl-version 0.13.0", q);
    run("mistral-7b", args, &base);
    w_none = gm_estimate_kind_bytes(base, GM_KIND_WEIGHTS);
    snprintf(args, sizeof args, "%s --trl-version 0.13.0", q);
    run("mistral-7b", args, &with);
    w_trl = gm_estimate_kind_bytes(with, GM_KIND_WEIGHTS);
    assert_int_equal(w_peft - w_trl, 2 * vocab);
    assert_int_equal(w_trl - w_none, 2 * norms);
    /* the allocated peak carries the difference (the weights are live at every moment) */
    run("mistral-7b", q, &base);
    assert_int_equal(base->peak_allocated_bytes - with->peak_allocated_bytes, 2 * vocab);
    /* 0.7.5 is the first release that casts; 0.7.4 and fp16 AMP keep PEFT's fp32 */
    snprintf(args, sizeof args, "%s --trl-version 0.7.5", q);
    run("mistral-7b", args, &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_WEIGHTS), w_trl);
    snprintf(args, sizeof args, "%s --trl-version 0.7.4", q);
    run("mistral-7b", args, &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_WEIGHTS), w_peft);
    snprintf(args, sizeof args, "%s --trl-version 0.13.0 --precision fp16-mixed", q);
    run("mistral-7b", args, &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_WEIGHTS), w_peft);
    /* under FSDP the sharded model is left as it is: the same as without TRL */
    snprintf(args, sizeof args, "%s --gpus 2 --fsdp", q);
    run("mistral-7b", args, &base);
    w = gm_estimate_kind_bytes(base, GM_KIND_WEIGHTS);
    snprintf(args, sizeof args, "%s --gpus 2 --fsdp --trl-version 0.13.0", q);
    run("mistral-7b", args, &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_WEIGHTS), w);
}

/* TRL before 0.9 also cast the LoRA adapters to bf16: peft_module_casting_to_bf16 sent every
 * BaseTunerLayer to bfloat16 (trl/trainer/utils.py at v0.7.5 0c77f98 l. 632-633 and v0.8.6
 * e90e8d9 l. 665-666) until commit 99f2c94b2 (PR #1644), which the first 0.9 release (0.9.2,
 * a03e7cc4e) holds.  Their gradients and AdamW's two moments take the parameter's dtype
 * (torch.zeros_like): at 0.8.6 the adapters, their gradients and their state are half what
 * they are at 0.9.2 and 0.9.3, and the frozen base is the same (the embedding rule did not
 * change). */
static void test_trl_casts_qlora_adapters_bf16_before_0_9(void **state)
{
    static const char *const later[] = {"0.9.2", "0.9.3"};
    const char *q = "--train --qlora --batch 1 --seq 512 --transformers-version 4.48.1";
    char args[256];
    uint64_t pa;
    (void)state;
    snprintf(args, sizeof args, "%s --trl-version 0.8.6", q);
    run("mistral-7b", args, &with);
    pa = with->lora.trainable_params;
    assert_true(pa > 0);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_ADAPTERS), 2 * pa);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_GRADIENTS), 2 * pa);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_OPTIMIZER_STATE), 2 * 2 * pa);
    for (size_t i = 0; i < sizeof later / sizeof later[0]; i++) {
        snprintf(args, sizeof args, "%s --trl-version %s", q, later[i]);
        run("mistral-7b", args, &base);
        assert_int_equal(base->lora.trainable_params, pa);
        assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_ADAPTERS), 4 * pa);
        assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_GRADIENTS), 4 * pa);
        assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_OPTIMIZER_STATE), 2 * 4 * pa);
        assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_WEIGHTS),
                         gm_estimate_kind_bytes(with, GM_KIND_WEIGHTS));
    }
    /* --adapter-dtype fp32 says what the run holds, whatever TRL did */
    snprintf(args, sizeof args, "%s --trl-version 0.8.6 --adapter-dtype fp32", q);
    run("mistral-7b", args, &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_ADAPTERS), 4 * pa);
}

/* TRL's cast matches module names, not a model family: Qwen2's HF classes name the embedding
 * model.embed_tokens and the head lm_head as Llama's do (modeling_qwen2.py at 00d4b3d2), so
 * Qwen2.5-7B's untied embedding and head (2 x 152064 x 3584) go back to 2 B under
 * --trl-version 0.13.0.  Where the names were not read (GPT-NeoX: embed_in, embed_out) the
 * upcast stays, and an assumption line says TRL's cast was not applied. */
static void test_trl_cast_follows_the_hf_names(void **state)
{
    const char *q = "--train --qlora --batch 1 --seq 512 --transformers-version 4.48.1";
    const struct gm_model *qw = gm_model_catalog_find("qwen2.5-7b");
    char args[256];
    uint64_t w_peft;
    bool said = false;
    (void)state;
    assert_non_null(qw);
    assert_false(qw->tied_embeddings);
    run("qwen2.5-7b", q, &base);
    w_peft = gm_estimate_kind_bytes(base, GM_KIND_WEIGHTS);
    snprintf(args, sizeof args, "%s --trl-version 0.13.0", q);
    run("qwen2.5-7b", args, &with);
    assert_int_equal(w_peft - gm_estimate_kind_bytes(with, GM_KIND_WEIGHTS),
                     2 * qw->vocab * qw->hidden * 2);
    for (size_t i = 0; i < with->n_assumptions; i++)
        said = said || strstr(with->assumptions[i], "not applied") != NULL;
    assert_false(said);
    run("pythia-1b", q, &base);
    run("pythia-1b", args, &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_WEIGHTS),
                     gm_estimate_kind_bytes(base, GM_KIND_WEIGHTS));
    for (size_t i = 0; i < with->n_assumptions; i++)
        said =
            said || strstr(with->assumptions[i], "peft_module_casting_to_bf16 not applied") != NULL;
    assert_true(said);
}

/* --torch-version before 2.0: torch.optim's default step is the for-loop (foreach became the
 * default on CUDA in 2.0, pytorch/pytorch PR #92306) and Optimizer.zero_grad() zeroes the
 * gradients in place (set_to_none defaults to True from 2.0, PR #92731): the same job as
 * --optimizer-impl for-loop --zero-grad zeros once the job is resolved.  An option given, or
 * a stack preset's, wins; 2.0 and later change nothing. */
static void test_torch_version_before_2_defaults(void **state)
{
    static const struct {
        const char *settings;
        enum gm_optim_impl impl;
        enum gm_zero_grad zero_grad;
    } cases[] = {
        {" --torch-version 1.13", GM_OPTIM_FOR_LOOP, GM_ZERO_GRAD_ZEROS},
        {" --torch-version 1.13 --optimizer-impl foreach", GM_OPTIM_FOREACH, GM_ZERO_GRAD_ZEROS},
        {" --zero-grad set-to-none --torch-version 1.12", GM_OPTIM_FOR_LOOP,
         GM_ZERO_GRAD_SET_TO_NONE},
        {" --torch-version 2.0", GM_OPTIM_FOREACH, GM_ZERO_GRAD_SET_TO_NONE},
        /* a PEP 440 local version label names a build of the release */
        {" --torch-version 2.1.0+cu121", GM_OPTIM_FOREACH, GM_ZERO_GRAD_SET_TO_NONE},
        {" --torch-version 1.13.1+cu117", GM_OPTIM_FOR_LOOP, GM_ZERO_GRAD_ZEROS},
    };
    /* what needs PyTorch 2: torch.compile, FSDP2's fully_shard, torchtune (whose recipes use
     * both) */
    static const char *const refused[] = {
        " --torch-version 1.13 --compile",
        " --torch-version 1.13 --gpus 2 --fsdp --fsdp-version 2",
        " --stack torchtune --torch-version 1.13",
        /* the FOAK cache block: only FOAK's kernel has one, only the step replay keeps it */
        " --loss fused --no-loss-cache-block",
        " --loss fused --loss-impl liger --no-loss-cache-block",
        " --loss fused --loss-impl cce",
        /* cuTile's is a fused linear cross-entropy too: no kernel on the logits alone */
        " --loss fused --loss-impl cutile",
        " --loss fused --loss-impl unsloth --no-loss-cache-block --fragmentation 0.1",
        " --loss fused --loss-impl unsloth --no-loss-cache-block --pp 2 --gpus 2",
        " --loss fused --loss-impl unsloth --no-loss-cache-block --method blog",
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct gm_job j;
        char b[256];
        snprintf(b, sizeof b, "%s%s", TRAIN8B, cases[i].settings);
        job_make("llama-3-8b", b, &j);
        est_job_resolve(&j);
        if (j.numerics.optim_impl != cases[i].impl || j.numerics.zero_grad != cases[i].zero_grad)
            fail_msg("%s: optimizer-impl %d, zero-grad %d", b, (int)j.numerics.optim_impl,
                     (int)j.numerics.zero_grad);
    }
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        struct gm_job j;
        struct gm_error e;
        char b[256];
        snprintf(b, sizeof b, "%s%s", TRAIN8B, refused[i]);
        job_make("llama-3-8b", b, &j);
        if (gm_job_check(&j, &e) != GM_ERR_INVALID)
            fail_msg("%s: accepted", b);
    }
    {
        struct gm_job j;
        struct gm_error e;
        gm_job_init(&j);
        assert_int_equal(gm_job_set(&j, "torch-version", "2.+cu121", &e), GM_ERR_INVALID);
        assert_int_equal(gm_job_set(&j, "torch-version", "2.1+", &e), GM_ERR_INVALID);
    }
    run("llama-3-8b", TRAIN8B " --torch-version 1.13", &with);
    run("llama-3-8b", TRAIN8B " --optimizer-impl for-loop --zero-grad zeros", &base);
    assert_int_equal(with->peak_allocated_bytes, base->peak_allocated_bytes);
    {
        bool named = false;
        for (size_t i = 0; i < with->n_assumptions; i++)
            named = named || strstr(with->assumptions[i], "PyTorch 1.13 (--torch-version)");
        assert_true(named);
    }
    run("llama-3-8b", TRAIN8B, &base);
    assert_true(with->peak_allocated_bytes != base->peak_allocated_bytes);
}

/* The HF-family presets, each default as its stack's code sets it: axolotl's schema (bf16
 * 'auto', adamw_torch_fused, no gradient checkpointing, no Liger plugin, sdpa); unsloth's
 * get_peft_model ('unsloth' checkpointing: layer inputs offloaded to host; all linear
 * targets, no dropout) and its fused CE (chunks of at most 4 GiB of fp32 logits, a multiple
 * of 4 of them); accelerate's FSDP plugin (FSDP1, no sync_module_states broadcast).  An
 * explicit option wins; a preset's offload goes with its checkpointing. */
static void test_stack_presets_hf_family(void **state)
{
    struct gm_job j;
    struct gm_error err;
    /* Llama-3-8B, batch 4 x 4096: 16384 rows x 128256 x 4 B = 1.96 x 4 GiB -> 4 chunks */
    const uint64_t T = 4 * 4096, V = 128256, rows = T / 4;
    (void)state;
    job_make("llama-3-8b", "--train --stack axolotl", &j);
    assert_int_equal(j.numerics.precision, GM_PREC_BF16_MIXED);
    assert_int_equal(j.numerics.optimizer, GM_OPT_ADAMW);
    assert_int_equal(j.numerics.optim_impl, GM_OPTIM_FUSED);
    assert_int_equal(j.memory.checkpointing, GM_CKPT_NONE);
    assert_int_equal(j.memory.attention, GM_ATTN_SDPA);
    assert_int_equal(j.memory.loss, GM_LOSS_FULL);
    assert_true(est_preset_set(&j, EST_SET_OPTIMIZER_IMPL));
    job_make("llama-3-8b", "--train --lora --stack unsloth", &j);
    assert_int_equal(j.memory.checkpointing, GM_CKPT_FULL);
    assert_true(j.memory.activation_offload);
    assert_int_equal(j.memory.loss, GM_LOSS_FUSED_LINEAR);
    assert_int_equal(j.memory.loss_impl, GM_LOSS_IMPL_UNSLOTH);
    assert_int_equal(j.memory.lora.targets, GM_LORA_ALL_LINEAR);
    assert_true(j.memory.lora.dropout == 0.0);
    job_make("llama-3-8b", "--train --stack accelerate --fsdp --gpus 8", &j);
    assert_int_equal(j.parallel.fsdp_version, 1);
    assert_false(j.parallel.sync_module_states);
    /* explicit options win, and FSDP2 given by hand leaves the FSDP1-only default aside */
    job_make("llama-3-8b", "--train --stack accelerate --fsdp --gpus 8 --fsdp-version 2", &j);
    assert_int_equal(j.parallel.fsdp_version, 2);
    if (gm_estimate_run(&j, &with, &err) != GM_OK)
        fail_msg("%s", err.msg);
    job_make("llama-3-8b", "--train --stack axolotl --optimizer-impl foreach", &j);
    assert_int_equal(j.numerics.optim_impl, GM_OPTIM_FOREACH);
    /* unsloth's fused CE over 4 chunks of 4096 rows: each chunk's logits, fp32 copy,
     * log-softmax and gradient, plus the input's gradient */
    run("llama-3-8b", "--train --lora --stack unsloth --batch 4 --seq 4096", &with);
    assert_true(gm_estimate_kind_bytes(with, GM_KIND_LOGITS) >= rows * V * 14 + T * 4096 * 2);
    assert_true(gm_estimate_kind_bytes(with, GM_KIND_LOGITS) <
                rows * V * 14 + T * 4096 * 2 + T * 8);
    run("llama-3-8b", "--train --lora --stack unsloth --batch 1 --seq 2048", &with);
    assert_true(gm_estimate_kind_bytes(with, GM_KIND_LOGITS) >= 2048 * V * 14);
    /* without checkpointing the preset's offload goes too: as much kept as with none */
    run("llama-3-8b", "--train --lora --stack unsloth --grad-checkpointing none", &with);
#define UNSLOTH_BY_HAND                                                                            \
    "--train --lora --grad-checkpointing none --loss fused-linear --loss-impl unsloth "            \
    "--lora-targets all-linear --lora-dropout 0 --transformers-version 4.57"
    run("llama-3-8b", UNSLOTH_BY_HAND, &base);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_ACTIVATIONS),
                     gm_estimate_kind_bytes(base, GM_KIND_ACTIVATIONS));
    run("llama-3-8b", UNSLOTH_BY_HAND " --activation-offload", &base);
    assert_true(gm_estimate_kind_bytes(with, GM_KIND_ACTIVATIONS) !=
                gm_estimate_kind_bytes(base, GM_KIND_ACTIVATIONS));
#undef UNSLOTH_BY_HAND
}

/* torchtitan compiles its loss with the model from v0.1.0 (components/loss.py
 * build_cross_entropy_loss: torch.compile(loss_fn) when compiling, bbb1b616): under
 * --stack torchtitan --compile the preset's full loss is the compiled one, which keeps the
 * 16-bit logits as its saved input and writes their gradient into a new 16-bit tensor
 * (Llama-3 8B, 2 x 4096 tokens, vocabulary 128256: 4 B per logit and 4 B per token where
 * the eager loss keeps 12 B per logit); before v0.1.0, without --compile or with --loss
 * given, the loss is as the preset or the option says.  Embedding and [norm, output] are
 * FSDP units of their own from 83e6941 (v0.2.0), not in v0.1.0. */
/* A training loop's F.cross_entropy(pred.float()) under torch.compile: Inductor fuses the
 * upcast and the log-softmax (no fp32 copy of the logits), the compiled graph keeps the 16-bit
 * logits as its saved input, and its backward writes their gradient into a new 16-bit tensor
 * (AOTAutograd donates to Inductor only saved tensors that alias no forward input, and the
 * logits are the graph's input): one B*L*V 16-bit tensor more than a fused kernel, which
 * writes the gradient in place; that tensor is the loss's gradient part.  Llama-3 8B, 2 x
 * 4096 tokens: 2 B per logit more than --loss fused, 4 B per logit and 4 B per token in all. */
static void test_compiled_loss_keeps_logits_and_new_gradient(void **state)
{
    const double nv = 2.0 * 4096.0 * 128256.0;
    (void)state;
    run("llama-3-8b", TRAIN8B " --loss compiled", &with);
    run("llama-3-8b", TRAIN8B " --loss fused", &base);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS),
                     (uint64_t)(4.0 * nv + 4.0 * 2.0 * 4096.0));
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS) -
                         gm_estimate_kind_bytes(base, GM_KIND_LOGITS),
                     (uint64_t)(2.0 * nv));
    /* the replay holds the new gradient beside the logits: a higher peak than the fused
     * kernel's by no more than that tensor */
    assert_true(with->peak_allocated_bytes > base->peak_allocated_bytes);
    assert_true(with->peak_allocated_bytes - base->peak_allocated_bytes <= (uint64_t)(2.0 * nv));
}

static void test_torchtitan_compiled_loss(void **state)
{
    const double nv = 2.0 * 4096.0 * 128256.0;
    struct gm_job j;
    (void)state;
    run("llama-3-8b", FSDP8 " --stack torchtitan --compile", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS),
                     (uint64_t)(4.0 * nv + 4.0 * 2.0 * 4096.0));
    run("llama-3-8b", FSDP8 " --stack torchtitan@0.1.0 --compile", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS),
                     (uint64_t)(4.0 * nv + 4.0 * 2.0 * 4096.0));
    run("llama-3-8b", FSDP8 " --stack torchtitan", &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_LOGITS), (uint64_t)(12.0 * nv));
    run("llama-3-8b", FSDP8 " --stack torchtitan@0.0.2 --compile", &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_LOGITS), (uint64_t)(12.0 * nv));
    job_make("llama-3-8b", FSDP8 " --stack torchtitan --compile --loss full", &j);
    est_job_resolve(&j);
    assert_int_equal(j.memory.loss, GM_LOSS_FULL);
    job_make("llama-3-8b", FSDP8 " --stack torchtitan --compile", &j);
    est_job_resolve(&j);
    assert_int_equal(j.memory.loss, GM_LOSS_COMPILED);
    assert_true(j.parallel.shard_ends);
    job_make("llama-3-8b", FSDP8 " --stack torchtitan@0.1.0", &j);
    assert_false(j.parallel.shard_ends);
}

/* Gemma-2's final logit soft-cap (logits / 30, tanh, x 30 in Gemma2ForCausalLM.forward): tanh
 * saves its result for its backward, one B*L*V tensor of the compute dtype beside the capped
 * logits, whichever loss then takes them: the HF loss (full), a loop's own cross_entropy
 * (plain), a cross-entropy kernel (fused) or a compiled one (compiled).  The forms that
 * project the hidden states themselves have no capped B*L*V tensor: Liger's fused linear
 * cross-entropy caps inside its kernel (LigerFusedLinearCrossEntropyLoss(softcap=...), the
 * kernel's HAS_SOFTCAPPING), and torchtune's Gemma-2 caps the final norm's output
 * (Gemma2FinalNorm: B*L*h) before its chunked loss.  Gemma-2-9B, 2 x 4096 tokens, vocabulary
 * 256000, hidden 3584, bf16 under autocast. */
static void test_final_softcap_by_loss_form(void **state)
{
    const uint64_t T = 2 * 4096, V = 256000, h = 3584, nv = T * V, cap = 2 * nv;
    /* Liger's chunk: next_pow2(ceil(8192 / ceil(256000 / 3584))) = 128 rows */
    const uint64_t chunk = 128;
    (void)state;
    run("gemma-2-9b", TRAIN8B, &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 12 * nv + cap);
    run("gemma-2-9b", TRAIN8B " --loss plain", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 12 * nv + cap);
    run("gemma-2-9b", TRAIN8B " --loss fused", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 2 * nv + 4 * T + cap);
    run("gemma-2-9b", TRAIN8B " --loss compiled", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 4 * nv + 4 * T + cap);
    run("gemma-2-9b", TRAIN8B " --loss chunked", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS),
                     4 * nv + 10 * nv / 8 + 2 * T * h);
    run("gemma-2-9b", TRAIN8B " --loss fused-linear", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS),
                     2 * T * h + 4 * V * h + 2 * chunk * (V + h));
    /* unsloth caps each chunk (compute_fused_ce_loss): tanh's 16-bit result kept with the
     * chunk's logits, fp32 copy, log-softmax and gradient, 16 B per logit of the chunk; 8192
     * x 256000 x 4 B = 7.8 GiB of fp32 logits: 4 chunks of 2048 rows */
    run("gemma-2-9b", TRAIN8B " --loss fused-linear --loss-impl unsloth", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS),
                     2 * T * h + 4 * V * h + 2048 * V * 16);
}

/* Tensor parallelism with the vocabulary sharded: torch's loss_parallel
 * (torch/distributed/tensor/parallel/loss.py, torchtitan's default with TP) runs the
 * log-softmax as _log_softmax writes it, unfused in fp32 on the local shard, and the
 * backward as _nll_loss_and_log_softmax_backward: on the saved log-softmax x it allocates
 * zeros_like(x), exp(x), their sum and the sum times the gradient, 16 B per local logit
 * with x itself (the forward's end holds 14: the bf16 logits, the fp32 input, x - max and
 * the result).  Megatron's own vocabulary-parallel loss is not this code. */
static void test_loss_parallel(void **state)
{
    const uint64_t T = 2 * 4096, V = 128256, t = 8;
    (void)state;
    run("llama-3-8b", TRAIN8B " --gpus 8 --tp 8 --sequence-parallel", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 16 * T * V / t);
    /* pure bf16: the loss still upcasts the shard (.float()); the backward is fp32 alike */
    run("llama-3-8b", TRAIN8B " --gpus 8 --tp 8 --sequence-parallel --precision bf16", &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_LOGITS), 16 * T * V / t);
    run("llama-3-8b", TRAIN8B " --gpus 8 --tp 8 --sequence-parallel --stack megatron", &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_LOGITS), 12 * T * V / t);
    assert_true(with->peak_allocated_bytes > base->peak_allocated_bytes);
    /* without TP the logits are whole and HF's ForCausalLMLoss form applies */
    run("llama-3-8b", FSDP8, &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_LOGITS), 12 * T * V);
}

/* A model whose Hugging Face class computes its own loss: GPTBigCode's nn.CrossEntropyLoss
 * on the shifted compute-dtype logits (transformers before 4.54, when the version is given):
 * logits, their shifted copy and the log-softmax, 3 x 2 B per logit in pure bf16; a
 * cross-entropy kernel replacing it keeps the logits and the copy (4 B).  Without a
 * version the current release's ForCausalLMLoss applies (12 B, a kernel 2 B). */
static void test_loss_in_the_model(void **state)
{
    const uint64_t T = 2 * 2048, V = 49280;
#define SANTA "--train --batch 2 --seq 2048 --precision bf16"
    (void)state;
    run("santacoder", SANTA " --transformers-version 4.48.1", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 6 * T * V);
    run("santacoder", SANTA " --transformers-version 4.48.1 --loss fused", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 4 * T * V + 4 * T);
    run("santacoder", SANTA, &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 12 * T * V);
    run("santacoder", SANTA " --loss fused", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 2 * T * V + 4 * T);
    /* llama's ForCausalLMLoss is not affected by the version rule */
    run("llama-3-8b", TRAIN8B " --transformers-version 4.53.0", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 12 * 2 * 4096 * 128256ull);
#undef SANTA
}

/* GPT-2, GPT-NeoX and Falcon computed their own nn.CrossEntropyLoss on the shifted bf16
 * logits before transformers 4.46 (no .float(): log_softmax returns its input's dtype), so
 * logits, shifted copy and log-softmax are 3 x 2 B per logit; from 4.46 they call
 * ForCausalLMLoss (4.46-4.48: logits 2, upcast 4, shifted copy 4, log-softmax 4 = 14 B;
 * later 12 B).  Only GPTBigCode returns its key/values: none here. */
static void test_loss_in_the_model_before_446(void **state)
{
    static const struct {
        const char *model;
        uint64_t V;
    } models[] = {{"gpt2", 50257}, {"pythia-160m", 50304}, {"falcon-rw-1b", 50304}};
    const uint64_t T = 2 * 1024;
#define ONE "--train --batch 2 --seq 1024 --precision bf16 --transformers-version "
    (void)state;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        uint64_t nv = T * models[i].V;
        run(models[i].model, ONE "4.45.2", &with);
        assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 6 * nv);
        assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_KV_CACHE), 0);
        run(models[i].model, ONE "4.45.2 --loss fused", &with);
        assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 4 * nv + 4 * T);
        run(models[i].model, ONE "4.46.0", &with);
        assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 14 * nv);
        run(models[i].model, ONE "4.50.0", &with);
        assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 12 * nv);
    }
    /* the model upcasting itself before 4.46 (Llama-style classes) is unchanged: its fp32
     * logits and their fp32 shifted copy kept, 12 B as ForCausalLMLoss's */
    run("qwen2.5-0.5b", ONE "4.45.2", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 12 * T * 151936ull);
#undef ONE
}

/* What the HF stack itself copies around the loss (the fms-acceleration runs):
 *  - the Trainer under mixed precision (transformers >= 4.30, through accelerate) returns an
 *    fp32 copy of the 16-bit logits, alive beside what the loss keeps after the forward;
 *  - a cross-entropy kernel on an HF model runs inside the model's loss, after its fp32
 *    upcast and (4.46-4.48) its shifted fp32 copy (FOAK's FastForCausalLMLoss);
 *  - GPTBigCode returns each layer's key/value (a view of c_attn's output) in training while
 *    config.use_cache holds, until the loss (not at the start of backward);
 *  - QLoRA behind LayerNorm carries an fp32 residual stream (bitsandbytes' Linear4bit returns
 *    its input's dtype, LayerNorm is fp32 under autocast), behind RMSNorm a 16-bit one. */
static void test_hf_stack_copies(void **state)
{
    const uint64_t T = 2 * 4096, V = 128256, Ts = 2 * 2048, Vs = 49280;
    const struct gm_model *sc = gm_model_catalog_find("santacoder");
    struct gm_model nocache;
    struct gm_job j;
    struct gm_error err;
    uint64_t kv, lora_stream, qlora_stream;
    (void)state;
    /* kernel inside ForCausalLMLoss of 4.48: logits 2 + upcast 4 + shifted copy 4 */
    run("llama-3-8b", TRAIN8B " --loss fused --transformers-version 4.48.1", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 10 * T * V + 4 * T);
    /* 4.50: no shifted copy; after the forward the logits, the kernel's fp32 input and the
     * Trainer's fp32 copy (2 + 4 + 4) outweigh the forward's 2 + 4 */
    run("llama-3-8b", TRAIN8B " --loss fused --transformers-version 4.50.0", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 10 * T * V + 4 * T);
    /* before 4.46 the model upcasts (its bf16 logits freed) and shifts: fp32 logits and
     * their copy, 8 B, and what it returns is fp32 already (no copy made of it) */
    run("llama-3-8b", TRAIN8B " --loss fused --transformers-version 4.45.2", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 8 * T * V + 4 * T);
    run("llama-3-8b", TRAIN8B " --loss fused --transformers-version 4.50.0 --precision bf16",
        &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 6 * T * V + 4 * T);
    /* a custom loop (no version): the kernel on the 16-bit logits, no copy */
    run("llama-3-8b", TRAIN8B " --loss fused", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 2 * T * V + 4 * T);
    /* the full loss keeps more inside itself (12 B) than after the forward (2 + 4 + 4) */
    run("llama-3-8b", TRAIN8B " --transformers-version 4.50.0", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 12 * T * V);
    /* GPTBigCode's own loss with the kernel under the Trainer's autocast: the logits, their
     * 16-bit shifted copy (the kernel's input) and the fp32 copy: 8 B */
    run("santacoder", "--train --batch 2 --seq 2048 --transformers-version 4.48.1 --loss fused",
        &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_LOGITS), 8 * Ts * Vs + 4 * Ts);

    /* the returned key/values: 24 layers x (2048 + 2 x 128) x 2 B, at the loss only */
    run("santacoder", "--train --batch 2 --seq 2048 --precision bf16 --transformers-version 4.48.1",
        &with);
    kv = gm_estimate_kind_bytes(with, GM_KIND_KV_CACHE);
    assert_int_equal(kv, 24ull * (2048 + 2 * 128) * 2 * Ts);
    /* config.json "use_cache": false: nothing returned; the rest as before */
    assert_non_null(sc);
    nocache = *sc;
    nocache.use_cache_off = true;
    gm_job_init(&j);
    j.model.model = &nocache;
    job_set_all(&j, "--train --batch 2 --seq 2048 --precision bf16 --transformers-version 4.48.1");
    assert_int_equal(gm_estimate_run(&j, &base, &err), GM_OK);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_KV_CACHE), 0);
    assert_int_equal(with->loss_bytes - base->loss_bytes, kv);
    assert_int_equal(with->backward_start_bytes, base->backward_start_bytes);
    /* not without the version (the current GPTBigCode) */
    run("santacoder", "--train --batch 2 --seq 2048 --precision bf16", &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_KV_CACHE), 0);
    /* under QLoRA behind LayerNorm the projections return fp32: 4 B per element */
    run("santacoder",
        "--train --batch 2 --seq 2048 --transformers-version 4.48.1 --qlora --no-fp32-upcast",
        &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_KV_CACHE),
                     24ull * (2048 + 2 * 128) * 4 * Ts);

    /* the checkpointed layer inputs follow the residual stream's dtype */
    run("santacoder", "--train --batch 2 --seq 2048 --grad-checkpointing full --lora", &base);
    run("santacoder",
        "--train --batch 2 --seq 2048 --grad-checkpointing full --qlora --no-fp32-upcast", &with);
    lora_stream = gm_estimate_kind_bytes(base, GM_KIND_ACTIVATIONS);
    qlora_stream = gm_estimate_kind_bytes(with, GM_KIND_ACTIVATIONS);
    assert_true(qlora_stream > lora_stream + 24ull * 2048 * 2 * Ts);
    run("llama-3-8b", TRAIN8B " --grad-checkpointing full --lora", &base);
    run("llama-3-8b", TRAIN8B " --grad-checkpointing full --qlora --no-fp32-upcast", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_ACTIVATIONS),
                     gm_estimate_kind_bytes(base, GM_KIND_ACTIVATIONS));
}

/* HF's MoE blocks run the experts one after another (MixtralSparseMoeBlock's loop), so a
 * layer's backward holds one expert's intermediate gradients over its share of the tokens
 * (top-k / experts of them): Mixtral-8x7B, LoRA (16-bit stream), 3 x 2 B x 14336 x 2/8 per
 * token beside the residual's gradient; without the HF version (grouped experts) every
 * routed token's: 3 x 2 B x 2 x 14336. */
static void test_moe_expert_loop(void **state)
{
    const uint64_t T = 2 * 4096, h = 4096, I = 14336;
    (void)state;
    run("mixtral-8x7b", TRAIN8B " --lora --transformers-version 4.48.1", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_BACKWARD_TEMP),
                     (2 * h + 3 * 2 * I * 2 / 8) * T);
    run("mixtral-8x7b", TRAIN8B " --lora", &base);
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_BACKWARD_TEMP),
                     (2 * h + 3 * 2 * 2 * I) * T);
    /* a dense model is the same either way */
    run("llama-3-8b", TRAIN8B " --lora --transformers-version 4.48.1", &with);
    run("llama-3-8b", TRAIN8B " --lora", &base);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_BACKWARD_TEMP),
                     gm_estimate_kind_bytes(base, GM_KIND_BACKWARD_TEMP));
}

/* The gradients of layer inputs a job keeps across layers: a backward temporary over all
 * layers (the one-layer backward temporaries are every job's). */
static const struct gm_est_component *kept_input_grads(const struct gm_estimate *e)
{
    for (size_t i = 0; i < e->n_components; i++)
        if (e->components[i].kind == GM_KIND_BACKWARD_TEMP &&
            e->components[i].extent == GM_EXTENT_ALL_LAYERS)
            return &e->components[i];
    return NULL;
}

#define FSDP_CKPT                                                                                  \
    "--train --batch 1 --seq 512 --grad-checkpointing full --precision bf16 --gpus 2 --fsdp"
#define HF " --transformers-version 4.48.1"

/* FSDP1 under the HF stack's reentrant checkpointing (stage_parallel.c).  With a frozen base
 * (LoRA leaves wrapped apart) each base unit's reshard-only hook keeps its checkpointed input
 * and that input's gradient until the end of backward: Llama-3-8B, 512 tokens, bf16
 * residual: 31 gradients of 512 x 4096 x 2 B beyond the checkpointed inputs, at the layers'
 * backward, not at the loss.  And no decoder layer is prefetched for backward (the no_grad
 * forward never marks a unit as needing its pre-backward unshard), with or without
 * adapters; a custom loop (no --transformers-version: non-reentrant checkpoint_wrapper)
 * keeps neither. */
static void test_fsdp1_reentrant(void **state)
{
    const struct gm_est_component *c;
    uint64_t gathered, root, layer;
    (void)state;
    run("llama-3-8b", FSDP_CKPT " --lora" HF, &with);
    c = kept_input_grads(with);
    assert_non_null(c);
    assert_int_equal(c->bytes, 31ull * 512 * 4096 * 2);
    assert_int_equal(c->phases, GM_EST_PHASE_FORWARD_BACKWARD);
    assert_true(c->transient);
    /* counted at the layers' backward beside every checkpointed input, not at the loss */
    assert_true(with->backward_start_bytes >=
                c->bytes + gm_estimate_kind_bytes(with, GM_KIND_ACTIVATIONS));
    /* what is gathered: the layer computed and the root unit (embedding, final norm,
     * lm_head of 128256 x 4096 each, bf16), no prefetched layer */
    gathered = gm_estimate_kind_bytes(with, GM_KIND_GATHERED);
    root = (2ull * 128256 * 4096 + 4096) * 2;
    layer = gathered - root;
    assert_true(layer > 0 && layer < root);
    run("llama-3-8b", FSDP_CKPT " --lora", &base);
    assert_null(kept_input_grads(base));
    assert_int_equal(gm_estimate_kind_bytes(base, GM_KIND_GATHERED), gathered + layer);
    /* full fine-tuning: the units need gradients (no reshard-only hook), still no prefetch */
    run("llama-3-8b", FSDP_CKPT HF, &with);
    assert_null(kept_input_grads(with));
    run("llama-3-8b", FSDP_CKPT, &base);
    assert_true(gm_estimate_kind_bytes(base, GM_KIND_GATHERED) >
                gm_estimate_kind_bytes(with, GM_KIND_GATHERED));
    /* FSDP2 has neither (fully_shard's own hooks and prefetch) */
    run("llama-3-8b", FSDP_CKPT " --lora --fsdp-version 2" HF, &with);
    assert_null(kept_input_grads(with));
}

/* The component of that name, or a failure. */
static const struct gm_est_component *named(const struct gm_estimate *e, const char *name)
{
    for (size_t i = 0; i < e->n_components; i++)
        if (strcmp(e->components[i].name, name) == 0)
            return &e->components[i];
    fail_msg("no component '%s'", name);
    return NULL;
}

/* The final norm's saved tensors belong to the loss moment: autograd runs the final norm's
 * node right after the loss's and the head's and releases its saved tensors then
 * (engine.cpp evaluate_function: release_variables() unless retain_graph), before any
 * decoder layer's backward.  In pure bf16 HF's LlamaRMSNorm keeps its fp32 copy of the input (4 B x
 * h per token, for pow and mul) and, trained, the 16-bit normalised tensor its weight multiplies;
 * Liger's loss keeps no normalised output for an lm_head gradient.  So fusing the norms
 * changes a layer's backward only by the layer's own norms, and the loss moment only by the
 * final norm. */
static void test_final_norm_released_before_the_layers(void **state)
{
    const uint64_t T = 2 * 4096, h = 4096;
    const struct gm_est_component *eager, *fused;
    (void)state;
    run("llama-3-8b", TRAIN8B " --precision bf16 --grad-checkpointing full --loss fused-linear",
        &base);
    run("llama-3-8b",
        TRAIN8B " --precision bf16 --grad-checkpointing full --loss fused-linear "
                "--fused-kernels rms_norm",
        &with);
    eager = named(base, "final_norm");
    fused = named(with, "final_norm");
    assert_int_equal(eager->phases, GM_EST_PHASE_LOSS);
    assert_int_equal(eager->bytes, T * (4 * h + 2 * h));
    assert_int_equal(fused->bytes, T * 2 * h);
    /* token ids stay to the end of backward: the embedding's backward is the last */
    assert_int_equal(named(base, "embeddings")->bytes, T * 8);
    assert_true(named(base, "embeddings")->phases & GM_EST_PHASE_FORWARD_BACKWARD);
    assert_int_equal(base->backward_start_bytes - with->backward_start_bytes,
                     named(base, "recomputed_layer")->bytes -
                         named(with, "recomputed_layer")->bytes);
    assert_int_equal(base->loss_bytes - with->loss_bytes, eager->bytes - fused->bytes);
}

/* unsloth's fused LoRA as fms-acceleration's FOAK runs it (fused_lora: true; fused_ops/
 * unsloth_lora/bnb/fast_lora.py and utils.py matmul_lora at 733992a): LoRA_QKV and LoRA_W
 * save X and, with dropout, the dropped-out copy of X they made, in X's dtype: no dropout
 * mask, no r-wide output of A.  PEFT's layers under autocast keep per adapter the mask
 * (1 B), the 16-bit dropped-out input A keeps and A's output (2 B x r).  On Llama-3-8B
 * (q, k, v and o all h = 4096 wide in) QLoRA without the fp32 upcast, one recomputed layer:
 * PEFT 4 x (3 h + 2 r), fused 3 dropped copies + X + o's dropped copy = 5 x 2 h; with
 * Liger's loss the peak is that layer's backward. */
static void test_fused_lora_saves_dropped_inputs(void **state)
{
    const uint64_t T = 2 * 4096, h = 4096, r = 16;
    static const char *const job = TRAIN8B " --grad-checkpointing full --qlora --lora-rank 16 "
                                           "--adapter-dtype fp32 --no-fp32-upcast "
                                           "--loss fused-linear";
    char settings[512];
    (void)state;
    snprintf(settings, sizeof settings, "%s --lora-targets q,k,v,o --lora-dropout 0.1", job);
    run("llama-3-8b", settings, &base);
    assert_int_equal(named(base, "lora_recomputed")->bytes, T * 4 * (3 * h + 2 * r));
    snprintf(settings, sizeof settings,
             "%s --lora-targets q,k,v,o --lora-dropout 0.1 --fused-kernels lora", job);
    run("llama-3-8b", settings, &with);
    assert_int_equal(named(with, "lora_recomputed")->bytes, T * 5 * 2 * h);
    assert_true(with->peak_allocated_bytes < base->peak_allocated_bytes);
    /* without dropout X itself is saved, which q, k and v share (fp32 adapters: PEFT keeps
     * a cast; the fused functions run A and B in X's dtype) */
    snprintf(settings, sizeof settings, "%s --lora-targets q,k,v,o --fused-kernels lora", job);
    run("llama-3-8b", settings, &with);
    assert_int_equal(named(with, "lora_recomputed")->bytes, T * 2 * h);
    /* q and v without k: FOAK's qkvo rule fuses q, k, v only together; o alone */
    snprintf(settings, sizeof settings, "%s --lora-targets q,v --lora-dropout 0.1", job);
    run("llama-3-8b", settings, &base);
    snprintf(settings, sizeof settings,
             "%s --lora-targets q,v --lora-dropout 0.1 --fused-kernels lora", job);
    run("llama-3-8b", settings, &with);
    assert_int_equal(named(with, "lora_recomputed")->bytes, named(base, "lora_recomputed")->bytes);
}

/* HF's Mistral and Mixtral attention before transformers 4.48 (MistralFlashAttention2 and
 * MistralSdpaAttention, modeling_mistral.py of the 4.45 line; Mixtral's class is copied from
 * it) expand K/V with repeat_kv from 8 to 32 heads before the kernel, which saves the expanded
 * copies for backward.  With full checkpointing one recomputed layer holds them: 2 x (32 - 8)
 * x 128 x 2 B = 12,288 B a token more than the 8 heads, at 4.45.2 and not at 4.48.1 (the
 * shared attention functions pass K/V as they are), and never on Llama-3-8B, whose
 * LlamaFlashAttention2 passes the KV heads as they are. */
static void test_hf_mistral_repeat_kv_saved(void **state)
{
    const uint64_t T = 2 * 4096, per_token = 2 * (32 - 8) * 128 * 2;
    static const char *const job = TRAIN8B " --grad-checkpointing full --lora --precision bf16";
    static const char *const models[] = {"mistral-7b", "mixtral-8x7b"};
    char settings[256];
    (void)state;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        snprintf(settings, sizeof settings, "%s --transformers-version 4.48.1", job);
        run(models[i], settings, &base);
        snprintf(settings, sizeof settings, "%s --transformers-version 4.45.2", job);
        run(models[i], settings, &with);
        assert_int_equal(named(with, "recomputed_layer")->bytes -
                             named(base, "recomputed_layer")->bytes,
                         T * per_token);
    }
    /* eager attention saved the repeated K/V already: no change by version */
    run("mistral-7b",
        TRAIN8B " --grad-checkpointing full --lora --precision bf16 --attention eager "
                "--transformers-version 4.48.1",
        &base);
    run("mistral-7b",
        TRAIN8B " --grad-checkpointing full --lora --precision bf16 --attention eager "
                "--transformers-version 4.45.2",
        &with);
    assert_int_equal(named(with, "recomputed_layer")->bytes,
                     named(base, "recomputed_layer")->bytes);
    run("llama-3-8b", TRAIN8B " --grad-checkpointing full --lora --transformers-version 4.48.1",
        &base);
    run("llama-3-8b", TRAIN8B " --grad-checkpointing full --lora --transformers-version 4.45.2",
        &with);
    assert_int_equal(named(with, "recomputed_layer")->bytes,
                     named(base, "recomputed_layer")->bytes);
}

/* LoRA on a fused q/k/v projection (PEFT's c_attn, query_key_value, qkv_proj): one adapter
 * of r x (hidden + q + 2 kv) per layer, not three of r x (hidden + width). */
static void test_lora_fused_qkv(void **state)
{
    const struct gm_model *sc = gm_model_catalog_find("santacoder");
    unsigned t = 0;
    struct gm_error err;
    (void)state;
    assert_non_null(sc);
    assert_int_equal(gm_lora_targets_parse("c_attn", &t, &err), GM_OK);
    assert_int_equal(t, GM_LORA_QKV);
    assert_int_equal(gm_lora_targets_parse("query_key_value,o", &t, &err), GM_OK);
    assert_int_equal(t, GM_LORA_QKV | GM_LORA_O);
    /* santacoder: 24 layers, hidden 2048, 16 heads of 128, one KV head */
    assert_int_equal(gm_lora_params(sc, 16, GM_LORA_QKV), 16ull * (2048 + 2048 + 2 * 128) * 24);
    assert_int_equal(gm_lora_params(sc, 16, GM_LORA_Q | GM_LORA_K | GM_LORA_V),
                     16ull * ((2048 + 2048) + 2 * (2048 + 128)) * 24);
    assert_true(gm_arch_fused_qkv(GM_ARCH_GPT_BIGCODE) && gm_arch_fused_qkv(GM_ARCH_GPT_NEOX));
    assert_false(gm_arch_fused_qkv(GM_ARCH_LLAMA) || gm_arch_fused_qkv(GM_ARCH_MISTRAL));
    run("santacoder", "--train --batch 2 --seq 2048 --lora --lora-targets c_attn", &with);
    assert_int_equal(with->lora.trainable_params, 16ull * (2048 + 2048 + 2 * 128) * 24);
}

/* torchtitan's op-level SAC keeps the layer input, wq, wv, w1 and w2 outputs and the
 * attention output: 2N(h + n_h d + n_kv d + f + h) + 2N n_h d per token (bf16) + lse. */
static void test_op_checkpointing(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("llama-3-8b");
    struct est_layer_cfg c = est_layer_cfg_full(2, 2, false, 4096);
    double want = 2.0 * (4096 + 4096 + 1024 + 14336 + 4096) + 2.0 * 4096 + 4.0 * 32;
    (void)state;
    assert_true(est_layer_op_saved_per_token(m, &c) == want);
    /* the full layer keeps about three times more */
    assert_true(est_layer_saved_per_token(m, &c, NULL) > 2.5 * want);
    /* an attention op the policy does not save: neither its output nor its logsumexp */
    c.sac_attn_recomputed = true;
    assert_true(est_layer_op_saved_per_token(m, &c) == want - 2.0 * 4096 - 4.0 * 32);
}

/* Activation bytes of one extent in an estimate. */
static uint64_t activations_of(const struct gm_estimate *e, enum gm_est_extent extent)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < e->n_components; i++)
        if (e->components[i].kind == GM_KIND_ACTIVATIONS && e->components[i].extent == extent)
            sum += e->components[i].bytes;
    return sum;
}

/* torchtitan from "Use cudnn backend on B200" (3b85aa31f, in v0.1.0) runs cuDNN's SDPA first
 * on compute capability >= 10 (models/attention.py _init_backend: has_cuda_capability(10, 0)),
 * and op-level SAC's _save_list names only the flash and efficient SDPA ops until b39377f9f
 * (in v0.2.1), so on a B200 with v0.1.0 to v0.2.0 the attention is recomputed in backward:
 * for Llama-3-8B over 8192 tokens the 32 layers keep 32 x 8192 x (2 x 4096 + 4 x 32) bytes
 * less, and the one layer rebuilt in backward holds that layer's share more. */
static void test_titan_cudnn_attention_recomputed_by_op_sac(void **state)
{
    static const char *const cases[][2] = {
        {"--train --gpu B200 --stack torchtitan@0.1.0 --grad-checkpointing op", "1"},
        {"--train --gpu B200 --stack torchtitan@0.2.0 --grad-checkpointing op", "1"},
        {"--train --gpu B200 --stack torchtitan@0.2.1 --grad-checkpointing op", "0"},
        {"--train --gpu B200 --stack torchtitan --grad-checkpointing op", "0"},
        {"--train --gpu H100-80GB --stack torchtitan@0.1.0 --grad-checkpointing op", "0"},
        {"--train --gpu B200 --stack torchtitan@0.1.0 --grad-checkpointing full", "0"},
        {"--train --gpu B200 --grad-checkpointing op", "0"},
    };
    const char *common = " --precision bf16-mixed --fsdp --gpus 8 --batch 1 --seq 8192";
    const uint64_t per_layer = 8192ull * (2 * 4096 + 4 * 32);
    char settings[256];
    struct gm_job j;
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(settings, sizeof settings, "%s%s", cases[i][0], common);
        job_make("llama-3.1-8b", settings, &j);
        assert_int_equal(est_titan_sac_recomputes_attention(&j), cases[i][1][0] == '1');
    }
    snprintf(settings, sizeof settings, "%s%s", cases[2][0], common); /* v0.2.1 */
    run("llama-3.1-8b", settings, &base);
    snprintf(settings, sizeof settings, "%s%s", cases[0][0], common); /* v0.1.0 */
    run("llama-3.1-8b", settings, &with);
    assert_int_equal(activations_of(base, GM_EXTENT_ALL_LAYERS) -
                         activations_of(with, GM_EXTENT_ALL_LAYERS),
                     32 * per_layer);
    assert_int_equal(activations_of(with, GM_EXTENT_ONE_LAYER) -
                         activations_of(base, GM_EXTENT_ONE_LAYER),
                     per_layer);
    /* the estimate says so, in full (a note holds GM_EST_NOTE_MAX - 1 characters) */
    {
        bool said = false;
        for (size_t i = 0; i < with->n_assumptions; i++)
            said = said || strstr(with->assumptions[i], "not in the save list)") != NULL;
        assert_true(said);
    }
    gm_estimate_free(base);
    gm_estimate_free(with);
    base = with = NULL;
}

/* torchao Float8Linear saves its bf16 input and weight for backward
 * (matmul_with_hp_or_float8_args.forward: ctx.save_for_backward(input_hp, weight_hp_t)), so
 * Float8 training keeps the same activations; its backward casts the output gradient twice,
 * the weight and the input to fp8: for Llama-3-8B's gate/up projection (out 14336, in 4096)
 * over 2 x 4096 tokens, (2 x 14336 + 4096) x 8192 + 14336 x 4096 bytes beside the layer's
 * other gradients. */
static void test_float8_training(void **state)
{
    const double T = 8192, h = 4096, I = 14336;
    (void)state;
    run("llama-3-8b", TRAIN8B, &base);
    run("llama-3-8b", TRAIN8B " --float8", &with);
    assert_int_equal(changed_kinds(base, with), K(GM_KIND_BACKWARD_TEMP));
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_BACKWARD_TEMP) -
                         gm_estimate_kind_bytes(base, GM_KIND_BACKWARD_TEMP),
                     (uint64_t)((2 * I + h) * T + I * h));
}

/* The optimizer in backward frees each gradient as it is stepped; the step phase is gone. */
static void test_optimizer_in_backward(void **state)
{
    uint64_t largest = 128256ull * 4096; /* the embedding (and lm_head) */
    (void)state;
    run("llama-3-8b", TRAIN8B " --optimizer-in-backward", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_GRADIENTS), 2 * largest * 4);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_OPTIMIZER_TEMP), largest * 4);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_OPTIMIZER_STATE),
                     8 * with->n_params); /* the state is unchanged */
    assert_int_not_equal(with->peak_phase, GM_EST_PHASE_OPTIMIZER_STEP);
    /* refused with gradient accumulation, as torchtune refuses it */
    {
        struct gm_job j;
        struct gm_error err;
        gm_job_init(&j);
        j.model.model = gm_model_catalog_find("llama-3-8b");
        job_set_all(&j, "--train --optimizer-in-backward --grad-accum 4");
        assert_int_equal(gm_estimate_run(&j, &with, &err), GM_ERR_INVALID);
        assert_non_null(strstr(err.msg, "--grad-accum"));
    }
}

/* A paged optimizer's state is on the device but not in max_memory_allocated. */
static void test_paged_state(void **state)
{
    (void)state;
    run("llama-3-8b", TRAIN8B, &base);
    run("llama-3-8b", TRAIN8B " --paged-optimizer", &with);
    assert_true(gm_estimate_kind_bytes(with, GM_KIND_MANAGED) > 0);
    assert_true(gm_est_kind_outside_allocator(GM_KIND_MANAGED));
    assert_true(with->peak_allocated_bytes < base->peak_allocated_bytes);
    assert_int_equal(with->pageable_bytes, gm_estimate_kind_bytes(with, GM_KIND_MANAGED));
    /* state of the small tensors (norms) stays with the allocator */
    assert_true(gm_estimate_kind_bytes(with, GM_KIND_OPTIMIZER_STATE) > 0);
    assert_true(gm_estimate_kind_bytes(with, GM_KIND_OPTIMIZER_STATE) < 8 * 1000 * 1000);
}

/* The paged state gives way to the allocator (its pages migrate to host memory when a
 * cudaMalloc needs the device's): on a 12 GiB RTX 3060 whose 11.5 GiB of Adam state fits only
 * paged, the step replay runs in the GPU less the context, not less the state, and no request
 * fails, so the output does not say "more in use than the GPU holds" beside a verdict that
 * fits with paging. */
static void test_paged_state_gives_way_to_the_replay(void **state)
{
    const char *job = "--train --precision bf16 --paged-optimizer --batch 1 --seq 1024 "
                      "--grad-checkpointing full --gpu RTX-3060";
    (void)state;
    run("qwen2.5-1.5b", job, &with);
    assert_true(with->pageable_bytes > 11 * GM_GIB);
    assert_true(with->fit.fits);
    assert_true(with->replay.capacity_bytes > 12 * GM_GIB - with->pageable_bytes);
    assert_true(with->replay.capacity_bytes >= with->peak_reserved_bytes);
    assert_false(with->replay.oom);
    assert_int_equal(with->replay.failed.request, 0);
}

/* The range holds the point; given settings leave no range; the three-way verdict. */
static void test_ranges_and_verdict(void **state)
{
    struct gm_job j;
    struct gm_error err;
    const struct gm_est_range *r;
    (void)state;
    run("llama-3-8b", TRAIN8B " --gpu H100", &base);
    r = &base->range;
    assert_true(r->allocated_bytes[0] <= base->peak_allocated_bytes &&
                base->peak_allocated_bytes <= r->allocated_bytes[1]);
    /* a custom loop's point is the step replay, which is also the range's low end */
    assert_true(r->reserved_bytes[0] <= base->peak_reserved_bytes &&
                base->peak_reserved_bytes < r->reserved_bytes[1]);
    assert_true(r->device_bytes[0] < base->device_bytes && base->device_bytes < r->device_bytes[1]);
    assert_true(r->sources & GM_UNCERTAIN_FRAGMENTATION);
    assert_true(r->sources & GM_UNCERTAIN_CUDA_CONTEXT);
    assert_int_equal(base->fit.verdict, GM_VERDICT_DOES_NOT_FIT);
    /* every uncertain assumption given: no range (--fragmentation given: the factor rule, no
     * replay; the same point as the HF stack's, whose floor decides here) */
    run("llama-3-8b", TRAIN8B " --gpu H100 --transformers-version 4.48.1", &base);
    assert_true(base->replay.used && base->replay.floor);
    run("llama-3-8b",
        TRAIN8B " --gpu H100 --transformers-version 4.48.1 --fragmentation 0.25 "
                "--cuda-context 450MiB",
        &with);
    assert_false(with->replay.used);
    assert_int_equal(with->range.sources, 0);
    assert_int_equal(with->range.device_bytes[0], with->range.device_bytes[1]);
    assert_int_equal(with->device_bytes, base->device_bytes);
    run("llama-3-8b", TRAIN8B " --gpu H100", &base);
    /* a sequence length not given is the default, named in the assumptions, and spreads no
     * range: the same figures as --seq 2048 given */
    run("llama-3-8b", "--train --batch 8 --gpu H100", &with);
    run("llama-3-8b", "--train --batch 8 --seq 2048 --gpu H100", &base);
    assert_int_equal(with->range.sources, base->range.sources);
    assert_int_equal(with->range.device_bytes[0], base->range.device_bytes[0]);
    assert_int_equal(with->range.device_bytes[1], base->range.device_bytes[1]);
    assert_int_equal(with->fit.verdict, base->fit.verdict);
    {
        bool named = false;
        for (size_t i = 0; i < with->n_assumptions; i++)
            named = named || strstr(with->assumptions[i], "sequence length 2048 tokens: not given");
        assert_true(named);
    }
    run("llama-3-8b", TRAIN8B " --gpu H100", &base);
    /* near the capacity the replayed allocator frees its cache and retries: on a GPU a
     * little smaller than the replay alone asks for (the range's low end), the job runs with
     * what the allocator could keep; the high end's floor is cache the allocator frees there
     * too, so no end reserves more than the GPU and the job fits */
    run("llama-3-8b", TRAIN8B " --gpu H100 --transformers-version 4.48.1", &with);
    {
        uint64_t outside = with->device_bytes - with->peak_reserved_bytes;
        uint64_t need = with->peak_allocated_bytes + outside;
        gm_job_init(&j);
        j.model.model = gm_model_catalog_find("llama-3-8b");
        job_set_all(&j, "--train --batch 2 --seq 4096 --transformers-version 4.48.1");
        j.gpu.memory_bytes = need + (with->range.device_bytes[0] - need) / 20 * 19;
    }
    assert_int_equal(gm_estimate_run(&j, &with, &err), GM_OK);
    assert_true(with->replay.retries > 0);
    assert_true(with->fit.fits);
    assert_true(with->device_bytes <= j.gpu.memory_bytes);
    assert_true(with->range.device_bytes[1] <= j.gpu.memory_bytes);
    assert_int_equal(with->fit.verdict, GM_VERDICT_FITS);
    /* borderline: a capacity between the ends; fits above the high end (the factor rule
     * alone, --fragmentation given: the range is the CUDA context's) */
    run("llama-3-8b", TRAIN8B " --gpu H100 --fragmentation 0.25", &base);
    assert_true(r->device_bytes[0] < base->device_bytes && base->device_bytes < r->device_bytes[1]);
    gm_job_init(&j);
    j.model.model = gm_model_catalog_find("llama-3-8b");
    job_set_all(&j, "--train --batch 2 --seq 4096 --fragmentation 0.25");
    j.gpu.memory_bytes = (base->range.device_bytes[0] + base->device_bytes) / 2;
    assert_int_equal(gm_estimate_run(&j, &with, &err), GM_OK);
    assert_false(with->fit.fits);
    assert_int_equal(with->fit.verdict, GM_VERDICT_BORDERLINE);
    assert_true(with->fit.headroom_high_bytes > 0 && with->fit.headroom_low_bytes < 0);
    j.gpu.memory_bytes = (base->range.device_bytes[1] + base->device_bytes) / 2;
    assert_int_equal(gm_estimate_run(&j, &with, &err), GM_OK);
    assert_true(with->fit.fits);
    assert_int_equal(with->fit.verdict, GM_VERDICT_BORDERLINE);
    j.gpu.memory_bytes = base->range.device_bytes[1] + GM_GIB;
    assert_int_equal(gm_estimate_run(&j, &with, &err), GM_OK);
    assert_int_equal(with->fit.verdict, GM_VERDICT_FITS);
    assert_string_equal(gm_fit_verdict_name(GM_VERDICT_BORDERLINE), "borderline");
}

/* The CUDA context before lazy loading, by generation; NCCL by communicators. */
static void test_runtime(void **state)
{
    (void)state;
    run("llama-3-8b", TRAIN8B " --cuda-version 11.2 --gpu V100-32GB", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_CUDA_CONTEXT), 1343 * GM_MIB);
    run("llama-3-8b", TRAIN8B " --cuda-version 11.0 --gpu A100-80GB", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_CUDA_CONTEXT), 1488 * GM_MIB);
    run("llama-3-8b", TRAIN8B " --cuda-version 11.8 --gpu A100-80GB", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_CUDA_CONTEXT), 450 * GM_MIB);
    /* data x tensor x pipeline parallel: three process groups, three communicators; no GPU
     * named, so PCIe's 2 channels, and PyTorch's NCCL with cuMem (2 MiB x (3 x 2 + 2) of
     * small allocations each): the data-parallel group's 4 ranks (tp 2 apart, all on one
     * node of 8) hold two 12 MiB pairs a channel, the tensor group's 2 one; the pipeline
     * neighbours are a stage, tp 2 x dp 4 = 8 ranks, apart, on the next node of 8: the small
     * allocations alone; the device code once */
    run("llama-3-8b", "--train --seq 2048 --gpus 16 --tp 2 --pp 2", &with);
    assert_int_equal(with->layout.nccl_communicators, 3);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_NCCL),
                     125 * GM_MIB + (2 * 24 + 16) * GM_MIB + (2 * 12 + 16) * GM_MIB + 16 * GM_MIB);
    run("llama-3-8b", "--train --seq 2048 --gpus 8 --fsdp", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_NCCL), 125 * GM_MIB + 64 * GM_MIB);
    /* one GPU per node: every connection goes through NCCL's network transport, whose
     * buffers are host memory (or, with GPUDirect RDMA, tens of MiB on the GPU): the device
     * code and the small allocations */
    run("llama-3-8b", "--train --seq 2048 --gpus 8 --gpus-per-node 1 --fsdp", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_NCCL), 125 * GM_MIB + 16 * GM_MIB);
    run("llama-3-8b", "--train --seq 2048 --gpus 8 --gpus-per-node 1 --fsdp --nccl 256MiB", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_NCCL), 256 * GM_MIB);
}

/* NCCL's device memory by its own rule (stage_runtime.c): per (send, receive) P2P pair
 * ALIGN(4 KiB, 2 MiB) + ALIGN(4 KiB + LL 524,288 + LL128 4,915,200 + SIMPLE 4 MiB, 2 MiB) =
 * 2 + 10 MiB; 24 channels over NVLink, 2 over PCIe; one pair a channel at two ranks, two from
 * three (ring and tree); under cuMem 2 MiB x (3 x nextPow2(channels) + 2) of small allocations;
 * over NVLink what NVIDIA/nccl#964 measured beyond the buffers, 256 MiB at two ranks and 112
 * from three (not at the low end);
 * NVLS on sm90 over NVSwitch with more than two GPUs, 16 x 2 x 1 MiB x GPUs (NCCL 2.22 on;
 * 4 + 2 MiB a buffer to 2.20 at the high end); none of the buffers without peer access; the
 * device code, 125 MiB (104-128), once per process.  Each figure below fails when one term
 * is taken out. */
static void test_nccl_rule(void **state)
{
    struct est_nccl_comm t4 = {2, GM_GPU_LINK_PCIE, 75, true, false};
    struct est_nccl_comm h100 = {2, GM_GPU_LINK_NVLINK, 90, true, false};
    struct est_nccl_comm h100x8 = {8, GM_GPU_LINK_NVLINK, 90, true, true};
    struct est_nccl_comm a100x8 = {8, GM_GPU_LINK_NVLINK, 80, true, true};
    struct est_nccl_comm a100x8_pcie = {8, GM_GPU_LINK_PCIE, 80, true, true};
    struct est_nccl_comm shm = {2, GM_GPU_LINK_PCIE, 89, false, false};
    (void)state;
    assert_int_equal(est_nccl_pair_bytes(), 12 * GM_MIB);
    assert_int_equal(est_nccl_channels(GM_GPU_LINK_NVLINK), 24);
    assert_int_equal(est_nccl_channels(GM_GPU_LINK_PCIE), 2);
    /* two T4s over PCIe with peer access (vLLM 0.5.0's pair, cuMem off): 2 channels x 12 MiB;
     * with cuMem the 8 small allocations in 2 MiB granules */
    assert_int_equal(est_nccl_comm_bytes(&t4, EST_POINT), 24 * GM_MIB);
    t4.cumem = true;
    assert_int_equal(est_nccl_comm_bytes(&t4, EST_POINT), 24 * GM_MIB + 8 * 2 * GM_MIB);
    assert_int_equal(est_nccl_comm_bytes(&t4, EST_LOW), 24 * GM_MIB);
    /* two H100s over NVLink: 24 channels x 12 MiB = 288 MiB and #964's 256 MiB; NVLS needs
     * more than two GPUs; with cuMem 98 small allocations (32 channels initialised) */
    assert_int_equal(est_nccl_comm_bytes(&h100, EST_POINT), 288 * GM_MIB + 256 * GM_MIB);
    assert_int_equal(est_nccl_comm_bytes(&h100, EST_HIGH), 288 * GM_MIB + 256 * GM_MIB);
    assert_int_equal(est_nccl_comm_bytes(&h100, EST_LOW), 288 * GM_MIB);
    h100.cumem = true;
    assert_int_equal(est_nccl_comm_bytes(&h100, EST_POINT),
                     288 * GM_MIB + 256 * GM_MIB + 196 * GM_MIB);
    /* eight H100s: two pairs a channel (576 MiB), the small allocations, #964's 112 MiB, NVLS
     * 256 MiB (NCCL 2.22 on) or 1536 MiB (to 2.20) at the high end; the low end one pair a
     * channel alone */
    assert_int_equal(est_nccl_comm_bytes(&h100x8, EST_POINT),
                     576 * GM_MIB + 196 * GM_MIB + 112 * GM_MIB + 256 * GM_MIB);
    assert_int_equal(est_nccl_comm_bytes(&h100x8, EST_HIGH),
                     576 * GM_MIB + 196 * GM_MIB + 112 * GM_MIB + 1536 * GM_MIB);
    assert_int_equal(est_nccl_comm_bytes(&h100x8, EST_LOW), 288 * GM_MIB);
    /* eight A100s (sm80): no NVLS; over PCIe 2 channels and nothing from #964 */
    assert_int_equal(est_nccl_comm_bytes(&a100x8, EST_POINT),
                     576 * GM_MIB + 196 * GM_MIB + 112 * GM_MIB);
    assert_int_equal(est_nccl_comm_bytes(&a100x8_pcie, EST_POINT), 2 * 24 * GM_MIB + 16 * GM_MIB);
    /* no peer access (SHM): the buffers are host memory; with cuMem the small ones remain */
    assert_int_equal(est_nccl_comm_bytes(&shm, EST_POINT), 0);
    shm.cumem = true;
    assert_int_equal(est_nccl_comm_bytes(&shm, EST_POINT), 8 * 2 * GM_MIB);
    /* the device code, once per process */
    assert_int_equal(est_nccl_lib_bytes(EST_POINT), 125 * GM_MIB);
    assert_int_equal(est_nccl_lib_bytes(EST_LOW), 104 * GM_MIB);
    assert_int_equal(est_nccl_lib_bytes(EST_HIGH), 128 * GM_MIB);
    /* the whole estimate: vLLM 0.5.0 at tp 2 on two T4s (row v010): the device code and three
     * communicators of 24 MiB (pynccl's, the tensor-parallel group's and the world group's
     * that the worker's start-up all-reduce creates, vllm_world_warmup); beside them rank 0's
     * receive connections for the logits' gather (V0 from 0.2.7): 2 p2p channels to its peer
     * over PCIe, 10 MiB each */
    run("deepseek-coder-6.7b-instruct",
        "--infer --engine vllm --vllm-version 0.5.0 --gpu T4 --gpus 2 --kv-dtype fp16", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_NCCL),
                     125 * GM_MIB + 3 * 24 * GM_MIB + 2 * 10 * GM_MIB);
    assert_int_equal(with->layout.nccl_communicators, 3);
    /* from 0.5.1 (GroupCoordinator) no warm-up of the world group is read: two */
    run("deepseek-coder-6.7b-instruct",
        "--infer --engine vllm --vllm-version 0.5.1 --gpu T4 --gpus 2 --kv-dtype fp16", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_NCCL),
                     125 * GM_MIB + 2 * 24 * GM_MIB + 2 * 10 * GM_MIB);
    /* V1 (0.8) gathers no logits to one rank: the two communicators alone */
    run("deepseek-coder-6.7b-instruct",
        "--infer --engine vllm --vllm-version 0.8.0 --gpu T4 --gpus 2 --kv-dtype fp16", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_NCCL), 125 * GM_MIB + 2 * 24 * GM_MIB);
    /* the gather's receive buffers: (peers) x p2p channels a peer x one receive; P2P read
     * (sm80 over NVLink) leaves SIMPLE with the sender, 6 MiB a receive; none without peer
     * access */
    assert_int_equal(est_nccl_p2p_channels_per_peer(GM_GPU_LINK_PCIE), 2);
    assert_int_equal(est_nccl_p2p_channels_per_peer(GM_GPU_LINK_NVLINK), 32);
    t4.cumem = false;
    assert_int_equal(est_nccl_gather_root_bytes(&t4), 2 * 10 * GM_MIB);
    h100.cumem = false;
    assert_int_equal(est_nccl_gather_root_bytes(&h100), 32 * 10 * GM_MIB);
    assert_int_equal(est_nccl_gather_root_bytes(&h100x8), 7 * 32 * 10 * GM_MIB);
    assert_int_equal(est_nccl_gather_root_bytes(&a100x8), 7 * 32 * 6 * GM_MIB);
    assert_int_equal(est_nccl_gather_root_bytes(&a100x8_pcie), 7 * 2 * 10 * GM_MIB);
    assert_int_equal(est_nccl_gather_root_bytes(&shm), 0);
    /* one GPU holds no communicator, warm-up or not */
    run("deepseek-coder-6.7b-instruct",
        "--infer --engine vllm --vllm-version 0.5.0 --gpu T4 --kv-dtype fp16", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_NCCL), 0);
    /* two RTX 4090s, which have no peer access: the device code alone */
    run("deepseek-coder-6.7b-instruct",
        "--infer --engine vllm --vllm-version 0.5.0 --gpu RTX-4090 --gpus 2", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_NCCL), 125 * GM_MIB);
    /* the range of a two-H100 job whose only uncertain term is NCCL (PyTorch's NCCL, cuMem
     * on): the point 125 + 288 + 196 + 256 = 865 MiB; the low end the device code's 104 MiB
     * and one pair a channel, 392; the high end 128 MiB and the 2 GiB a communicator kept over
     * NVLink where the rule's own high end is below it */
    run("llama-3-8b",
        "--train --seq 2048 --gpus 2 --gpu H100 --cuda-context 450MiB --fragmentation 0.25 "
        "--lora",
        &with);
    assert_int_equal(with->range.sources, GM_UNCERTAIN_NCCL);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_NCCL), 865 * GM_MIB);
    assert_int_equal(with->device_bytes - with->range.device_bytes[0], (865 - 392) * GM_MIB);
    assert_int_equal(with->range.device_bytes[1] - with->device_bytes, (128 + 2048 - 865) * GM_MIB);
    /* a given --nccl replaces the rule, per communicator, without the device code */
    run("llama-3-8b", "--train --seq 2048 --gpus 8 --gpu H100 --fsdp --nccl 1GiB", &with);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_NCCL), GM_GIB);
}

/* The expert-parallel group's ranks are tp apart, as the data-parallel group's are (Megatron
 * builds it with the experts' tensor parallelism innermost, the model's tp by default): at tp 4
 * on nodes of 8 GPUs, a node holds 2 of an EP group's 4 ranks, a pair, not a group of four.
 * The rule's value is the device code and one communicator for each group: dp 4 (a pair on the
 * node), tp 4 (all four), ep 4 (a pair).  On nodes of 16 the whole EP group is on the node. */
static void test_nccl_expert_group(void **state)
{
    struct est_nccl_comm pair = {2, GM_GPU_LINK_NVLINK, 90, true, true};
    struct est_nccl_comm four = {4, GM_GPU_LINK_NVLINK, 90, true, true};
    struct gm_estimate *e = NULL;
    (void)state;
    run("qwen3-30b-a3b", "--train --seq 2048 --gpu H100 --gpus 16 --gpus-per-node 8 --tp 4 --ep 4",
        &e);
    assert_int_equal(e->layout.nccl_communicators, 3);
    assert_int_equal(gm_estimate_kind_bytes(e, GM_KIND_NCCL),
                     est_nccl_lib_bytes(EST_POINT) + 2 * est_nccl_comm_bytes(&pair, EST_POINT) +
                         est_nccl_comm_bytes(&four, EST_POINT));
    /* all on one node: dp's 4 ranks and ep's 4 each a group of four */
    run("qwen3-30b-a3b", "--train --seq 2048 --gpu H100 --gpus 16 --gpus-per-node 16 --tp 4 --ep 4",
        &e);
    assert_int_equal(gm_estimate_kind_bytes(e, GM_KIND_NCCL),
                     est_nccl_lib_bytes(EST_POINT) + 3 * est_nccl_comm_bytes(&four, EST_POINT));
    assert_true(est_nccl_comm_bytes(&four, EST_POINT) > est_nccl_comm_bytes(&pair, EST_POINT));
    gm_estimate_free(e);
}

/* Pipeline parallelism is outermost (Megatron "tp-cp-ep-dp-pp", torchtitan's mesh, DeepSpeed's
 * ['pipe', 'data']), so pipeline neighbours are a whole stage, tp x dp ranks, apart.  At tp 4,
 * pp 2 on 16 H100s, dp is 2 and a stage is 8 ranks: on nodes of 8 the neighbour is on the
 * other node (one GPU of the pair per node: the cuMem allocations alone), on nodes of 16 it is
 * on the same one (a pair), as it would be 1 or tp ranks apart.  vLLM's pipeline group is tp
 * apart: at tp 8 each stage fills a node of 8. */
static void test_nccl_pipeline_neighbours(void **state)
{
    struct est_nccl_comm one = {1, GM_GPU_LINK_NVLINK, 90, true, true};
    struct est_nccl_comm pair = {2, GM_GPU_LINK_NVLINK, 90, true, true};
    struct est_nccl_comm four = {4, GM_GPU_LINK_NVLINK, 90, true, true};
    struct est_nccl_comm eight = {8, GM_GPU_LINK_NVLINK, 90, true, true};
    struct gm_estimate *e = NULL;
    (void)state;
    /* the pair's rule and the lone GPU's differ, so the placement shows in the sum */
    assert_true(est_nccl_comm_bytes(&pair, EST_POINT) > est_nccl_comm_bytes(&one, EST_POINT));
    /* dp 2 (4 apart: a pair on the node), tp 4, the pipeline pair 8 apart: across nodes */
    run("llama-3-8b", "--train --seq 2048 --gpu H100 --gpus 16 --gpus-per-node 8 --tp 4 --pp 2",
        &e);
    assert_int_equal(e->layout.nccl_communicators, 3);
    assert_int_equal(gm_estimate_kind_bytes(e, GM_KIND_NCCL),
                     est_nccl_lib_bytes(EST_POINT) + est_nccl_comm_bytes(&pair, EST_POINT) +
                         est_nccl_comm_bytes(&four, EST_POINT) +
                         est_nccl_comm_bytes(&one, EST_POINT));
    /* nodes of 16: both stages on one node, the pipeline pair a pair again */
    run("llama-3-8b", "--train --seq 2048 --gpu H100 --gpus 16 --gpus-per-node 16 --tp 4 --pp 2",
        &e);
    assert_int_equal(gm_estimate_kind_bytes(e, GM_KIND_NCCL),
                     est_nccl_lib_bytes(EST_POINT) + 2 * est_nccl_comm_bytes(&pair, EST_POINT) +
                         est_nccl_comm_bytes(&four, EST_POINT));
    /* vLLM from 0.11 (cuMem on): pynccl and torch's group over the tp 8 stage, and the
     * pipeline group of 2, 8 apart: one GPU of it per node of 8 */
    run("llama-3.1-8b",
        "--infer --engine vllm --vllm-version 0.11 --gpu H100 --gpus 16 --gpus-per-node 8 --tp 8 "
        "--pp 2",
        &e);
    assert_int_equal(gm_estimate_kind_bytes(e, GM_KIND_NCCL),
                     est_nccl_lib_bytes(EST_POINT) + 2 * est_nccl_comm_bytes(&eight, EST_POINT) +
                         est_nccl_comm_bytes(&one, EST_POINT));
    gm_estimate_free(e);
}

/* vLLM: what the budget charges, per version range; pipeline stages hold their layers.  The
 * context the global versions count is the H100's own, by its SMs (est_cuda_bare_context_bytes:
 * 8 MiB + 1986 B x 132 SMs x 2048 threads). */
#define H100_CONTEXT (8 * GM_MIB + 132ull * 2048 * 1986)
/* NCCL at tp 2 on H100s (NVLink, 24 channels) before 0.11, cuMem off: the device code and two
 * communicators of one 12 MiB (send, receive) pair a channel and NVIDIA/nccl#964's 256 MiB;
 * from 0.11, with cuMem, each also holds 98 small allocations of 2 MiB (3 x 32 channels + 2) */
#define NCCL_H100_TP2 (125 * GM_MIB + 2 * (24 * 12 + 256) * GM_MIB)
/* V0 from 0.2.7: rank 0 also receives the logits' gather on 32 channels of 10 MiB */
#define NCCL_H100_TP2_V0    (NCCL_H100_TP2 + 32 * 10 * GM_MIB)
#define NCCL_H100_TP2_CUMEM (NCCL_H100_TP2 + 2 * 98 * 2 * GM_MIB)
static void test_vllm_versions(void **state)
{
    uint64_t blk;
    struct {
        const char *version;
        uint64_t counted; /* counted as non-torch beside the kernels and the custom
                             all-reduce buffers; UINT64_MAX: those buffers not counted, the
                             communicator the profile run creates counted */
        bool graphs;      /* the CUDA-graph estimate charged too */
        bool gather;      /* V0 from 0.2.7: rank 0's receive connections for the logits */
    } cases[] = {
        {"0.2.5", H100_CONTEXT + NCCL_H100_TP2, false, false},   /* total - free: all inside */
        {"0.6.3", NCCL_H100_TP2_V0, false, true},                /* init_device baseline */
        {"0.6.4", H100_CONTEXT + NCCL_H100_TP2_V0, false, true}, /* global: context, NCCL */
        {"0.6.5", NCCL_H100_TP2_V0, false, true},                /* baseline before NCCL */
        {"0.7.2", NCCL_H100_TP2_V0, false, true},                /* the V0 engine still */
        {"0.8.5", H100_CONTEXT + NCCL_H100_TP2, false, false},   /* early V1: global again */
        {"0.10.1", NCCL_H100_TP2, false, false},                 /* baseline before NCCL */
        {"0.11.0", UINT64_MAX, false, false},                    /* baseline after pynccl's */
        {"0.21.0", UINT64_MAX, true, false},                     /* CUDA-graph estimate charged */
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char s[160];
        uint64_t need, own, gap, reserve;
        snprintf(s, sizeof s, "--infer --engine vllm --gpu H100 --tp 2 --vllm-version %s",
                 cases[i].version);
        run("llama-3-8b", s, &with);
        own = with->serving.non_torch_bytes;
        /* 0.6.4 and 0.6.5 also count the cache the load leaves in PyTorch's allocator
         * (replayed) */
        gap = 0;
        if (!strcmp(cases[i].version, "0.6.4") || !strcmp(cases[i].version, "0.6.5")) {
            struct gm_error err;
            assert_int_equal(est_vllm_load_cache_gap(gm_model_catalog_find("llama-3-8b"), NULL,
                                                     false, 2, 1, &gap, NULL, &err),
                             GM_OK);
            assert_true(gap > 0);
        }
        assert_int_equal(with->serving.non_torch_logged_bytes,
                         cases[i].counted == UINT64_MAX ? own - 18 * GM_MIB + 420 * GM_MIB
                                                        : own + cases[i].counted + gap);
        /* the profile peak holds PyTorch's cuBLAS workspace (16-bit layers): its own component */
        need = gm_estimate_kind_bytes(with, GM_KIND_WEIGHTS) +
               gm_estimate_kind_bytes(with, GM_KIND_ACTIVATIONS) +
               gm_estimate_kind_bytes(with, GM_KIND_LOGITS) +
               gm_estimate_kind_bytes(with, GM_KIND_TORCH_WORKSPACE) +
               with->serving.non_torch_logged_bytes +
               (cases[i].graphs ? with->serving.cuda_graph_charged_bytes : 0);
        /* 0.3.2 to 0.6.3 charge the profile run's reserved segments beyond the peak paid too,
         * up to the replay's reserve above the forward's peak */
        reserve = 0;
        if (!strcmp(cases[i].version, "0.6.3")) {
            struct gm_error err;
            assert_int_equal(est_vllm_profile_reserve(gm_model_catalog_find("llama-3-8b"),
                                                      with->serving.max_num_batched_tokens, 2,
                                                      &reserve, &err),
                             GM_OK);
            assert_true(reserve > 0);
        }
        blk = with->serving.kv_bytes_per_token * with->serving.block_size;
        /* at most the replay's reserve more (the sampler's phase may peak above the forward) */
        assert_true(with->serving.kv_blocks <= (with->serving.budget_bytes - need) / blk);
        assert_true(with->serving.kv_blocks + (reserve + blk - 1) / blk + 1 >=
                    (with->serving.budget_bytes - need) / blk);
        /* the device holds the same NCCL memory whatever the version charges, but for the
         * cuMem granules vLLM turned off before 0.11 and V0's gather to rank 0 from 0.2.7 */
        assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_NCCL),
                         cases[i].counted == UINT64_MAX ? NCCL_H100_TP2_CUMEM
                         : cases[i].gather              ? NCCL_H100_TP2_V0
                                                        : NCCL_H100_TP2);
    }
    /* pipeline parallel serving: half the layers' KV per token and weights per stage */
    run("llama-3-8b", "--infer --engine vllm --gpu H100", &base);
    run("llama-3-8b", "--infer --engine vllm --gpu H100 --pp 2", &with);
    assert_int_equal(with->serving.kv_bytes_per_token * 2, base->serving.kv_bytes_per_token);
    assert_true(gm_estimate_kind_bytes(with, GM_KIND_WEIGHTS) <
                gm_estimate_kind_bytes(base, GM_KIND_WEIGHTS) * 6 / 10);
    assert_true(with->serving.kv_tokens > 2 * base->serving.kv_tokens);
    /* one communicator between the two stages (current vLLM: cuMem on) and the device code */
    assert_int_equal(with->layout.nccl_communicators, 1);
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_NCCL),
                     125 * GM_MIB + (24 * 12 + 256) * GM_MIB + 98 * 2 * GM_MIB);
}

/* Context parallelism as torch's context_parallel runs it under torchtitan: every rank holds
 * seq / cp tokens, FSDP shards over the data x context ranks, so a job at seq 8192 over cp 2
 * keeps what the same job at seq 4096 keeps but for ring attention's backward buffers (per
 * local token at the query width: fp32 dq, dk, dv accumulators 12 B, the contiguous k and v
 * 2 x 2 B, their concatenation 2 x 2 B, the all-gathered concatenation cp x 2 x 2 B, the fp32
 * dk|dv sent and received 2 x 8 B), beside dq, dk, dv and the output's gradient; the
 * attention's backward then outgrows the MLP's (three 14336-wide bf16 gradients). */
static void test_context_parallel(void **state)
{
    const uint64_t T = 4096, hq = 4096, kv = 1024, cp = 2, I = 14336;
    const uint64_t ring = hq * (12 + 2 * 2 + 2 * 2 + cp * 2 * 2 + 2 * 8);
    struct gm_job j;
    bool said = false;
    (void)state;
    run("llama-3-8b", "--train --batch 1 --seq 4096 --gpus 8 --fsdp --fsdp-version 2", &base);
    run("llama-3-8b", "--train --batch 1 --seq 8192 --gpus 8 --fsdp --fsdp-version 2 --cp 2",
        &with);
    assert_int_equal(changed_kinds(base, with), K(GM_KIND_BACKWARD_TEMP));
    assert_int_equal(gm_estimate_kind_bytes(with, GM_KIND_BACKWARD_TEMP) -
                         gm_estimate_kind_bytes(base, GM_KIND_BACKWARD_TEMP),
                     T * (2 * (hq + hq + kv + kv) + ring - 2 * 3 * I));
    for (size_t i = 0; i < with->n_assumptions; i++)
        said |= strstr(with->assumptions[i], "context parallel 2") != NULL;
    assert_true(said);
    /* the forward's (the replay allocates it around each checkpointed layer's attention):
     * contiguous k, v and their concatenation 2 x 2 x 2 B, the gathered cp x 2 x 2 B, the
     * merger's fp32 output, block output and difference 3 x 4 B; none without --cp */
    job_make("llama-3-8b", "--train --seq 8192 --gpus 8 --fsdp --fsdp-version 2 --cp 2", &j);
    assert_int_equal(est_ring_attention_per_token(&j, j.model.model, false),
                     hq * (2 * 2 * 2 + cp * 2 * 2 + 3 * 4));
    job_make("llama-3-8b", "--train --seq 8192 --gpus 8 --fsdp", &j);
    assert_int_equal(est_ring_attention_per_token(&j, j.model.model, false), 0);
    /* at tp 2 each rank holds half the heads: the replay's ring allocation over a rank's
     * 4096 tokens halves */
    job_make("llama-3-8b", "--train --seq 8192 --gpus 8 --fsdp --fsdp-version 2 --tp 2 --cp 2", &j);
    assert_int_equal(est_ring_attention_bytes(&j, j.model.model, 4096.0),
                     4096 * hq * (2 * 2 * 2 + cp * 2 * 2 + 3 * 4) / 2);
    {
        uint64_t part[EST_RING_PARTS];
        assert_int_equal(est_ring_attention_parts(&j, j.model.model, 4096.0, part), 7);
        assert_int_equal(part[0], 4096 * hq * 2 / 2);      /* contiguous k */
        assert_int_equal(part[3], 4096 * hq * cp * 4 / 2); /* the gathered k|v */
        assert_int_equal(part[6], 4096 * hq * 4 / 2);      /* the fp32 difference */
    }
    /* with full checkpointing the replay runs each layer's forward op by op: the ring's seven
     * tensors (contiguous k and v, k|v, the gathered k|v, three fp32 merger tensors) more per
     * layer and step */
    run("llama-3-8b",
        "--train --batch 1 --seq 4096 --gpus 8 --fsdp --fsdp-version 2 --grad-checkpointing full",
        &base);
    run("llama-3-8b",
        "--train --batch 1 --seq 8192 --gpus 8 --fsdp --fsdp-version 2 --grad-checkpointing full "
        "--cp 2",
        &with);
    assert_true(base->replay.used && with->replay.steps == base->replay.steps);
    assert_int_equal(with->replay.mallocs - base->replay.mallocs, 7 * 32 * base->replay.steps);
    /* tensor parallel 2 without sequence parallelism: the backward transients, ring buffers
     * included, scale by Korthikanti's (10 + 24/2)/34 as at cp 1; the replay still allocates
     * the ring's tensors in every layer and step */
    {
        uint64_t tp1 = gm_estimate_kind_bytes(with, GM_KIND_BACKWARD_TEMP), tp2;
        uint64_t steps = with->replay.steps;
        run("llama-3-8b",
            "--train --batch 1 --seq 8192 --gpus 8 --fsdp --fsdp-version 2 --grad-checkpointing "
            "full --cp 2 --tp 2",
            &with);
        tp2 = gm_estimate_kind_bytes(with, GM_KIND_BACKWARD_TEMP);
        assert_true(tp2 + 1 >= tp1 * 22 / 34 && tp2 <= tp1 * 22 / 34 + 1);
        run("llama-3-8b",
            "--train --batch 1 --seq 4096 --gpus 8 --fsdp --fsdp-version 2 --grad-checkpointing "
            "full --tp 2",
            &base);
        assert_int_equal(with->replay.steps, steps);
        assert_int_equal(with->replay.mallocs - base->replay.mallocs, 7 * 32 * steps);
    }
    /* the ring's tensors are allocated apart, as the call makes them: one block of their sum
     * stayed cached where later requests could not reuse it, so reserved fell from 97.64 to
     * 95.60 GiB as the sequence grew from 81920 to 90112 tokens; now it rises with it */
    {
        uint64_t last = 0;
        for (uint64_t seq = 73728; seq <= 98304; seq += 8192) {
            char s[200];
            snprintf(s, sizeof s,
                     "--train --precision bf16-mixed --fsdp --fsdp-version 2 --grad-checkpointing "
                     "full --batch 1 --gpus 8 --float8 --seq %llu --cp 2",
                     (unsigned long long)seq);
            run("llama-3.1-8b", s, &with);
            assert_true(with->replay.used);
            assert_true(with->peak_reserved_bytes > last);
            last = with->peak_reserved_bytes;
        }
    }
}

/* FSDP2 under pipeline parallelism as torchtitan and torch.distributed.pipelining run it:
 * apply_fsdp does not reshard after forward when pp is enabled, so every layer of the stage
 * stays gathered; each micro-batch's backward runs with gradient sync off, so fully_shard
 * keeps the stage's unsharded gradients accumulated in the reduce dtype (fp32 under mixed
 * precision) until the reduce-scatter after the last.  Llama-3-8B over two stages: each
 * holds 16 layers and one 128256 x 4096 end, half the model. */
static void test_pipeline_with_fsdp(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("llama-3-8b");
    uint64_t acc = 0, gathered = 0, one = 0, layer, stage;
    struct gm_param_counts pc;
    (void)state;
    run("llama-3-8b", "--train --batch 1 --seq 4096 --gpus 16 --pp 2 --fsdp --fsdp-version 2",
        &with);
    for (size_t i = 0; i < with->n_components; i++) {
        const struct gm_est_component *c = &with->components[i];
        if (!strcmp(c->name, "accumulated_grads"))
            acc = c->bytes;
        if (!strcmp(c->name, "gathered_params"))
            gathered = c->bytes;
        if (!strcmp(c->name, "gathered_grads"))
            one = c->bytes;
    }
    assert_int_equal(gm_model_count_params(m, &pc, NULL), GM_OK);
    /* a layer with its share of the norms; a stage: 16 of them and one 128256 x 4096 end */
    layer = est_layer_params(m, &pc);
    stage = 16 * layer + 128256ull * 4096;
    /* fp32 gradients of the stage's parameters */
    assert_int_equal(acc, gm_mul_div_u64(4 * with->n_params, stage, pc.total));
    /* every layer gathered in bf16, the same share of them */
    assert_int_equal(gathered, gm_mul_div_u64(2 * 32 * layer, stage, pc.total));
    /* one layer's bf16 gradient and its fp32 cast, no reduce-scatter input */
    assert_int_equal(one, layer * (2 + 4));
}

/* Settings that need others, and the refusals of the sources' own code. */
static void test_technique_checks(void **state)
{
    static const struct {
        const char *model, *settings, *msg;
    } bad[] = {
        {"llama-3-8b", "--train --loss-chunks 4", "--loss-chunks needs --loss chunked"},
        {"llama-3-8b", "--train --checkpoint-every 2", "needs --grad-checkpointing full"},
        {"llama-3-8b", "--train --fsdp-version 2", "need --fsdp"},
        {"llama-3-8b", "--train --no-reshard-after-forward --gpus 2", "need --fsdp"},
        {"llama-3-8b", "--train --no-sync-module-states --gpus 2", "need --fsdp"},
        {"llama-3-8b", "--train --no-sync-module-states --gpus 2 --fsdp --fsdp-version 2",
         "needs FSDP1"},
        {"llama-3-8b", "--train --batch 2 --tokens-per-batch 8192", "exclude each other"},
        {"llama-3-8b", "--train --seq 8192 --tokens-per-batch 4096", "exceeds --tokens-per-batch"},
        {"llama-3-8b", "--train --method blog --parameters 8B --loss chunked", "--method arch"},
        {"llama-3-8b", "--train --optimizer-in-backward --gpus 8 --zero 2", "not --zero"},
        {"llama-3-8b", "--train --gpus 8 --ep 3", "does not divide"},
        {"llama-3-8b", "--train --gpus 2 --ep 2", "MoE"},
        {"bert-large-uncased", "--train --loss fused", "no vocabulary head"},
        {"llama-3-8b", "--train --loss compiled --transformers-version 4.46",
         "not the loss of an HF"},
        {"llama-3-8b", "--train --lora --lora-targets qkv", "separate q, k and v"},
        {"llama-3-8b", "--train --adapter-dtype bf16", "needs --lora or --qlora"},
        {"llama-3-8b", "--infer --pp 2", "--engine vllm"},
        {"llama-3-8b", "--train --gpus 8 --seq 8192 --cp 3",
         "--gpus 8 is not a multiple of --tp 1 x --pp 1 x --cp 3"},
        {"llama-3-8b", "--train --gpus 8 --cp 2 --tokens-per-batch 4096", "not --tokens-per-batch"},
        {"llama-3-8b", "--train --gpus 8 --seq 8190 --cp 2", "multiple of 2 x cp"},
        {"llama-3-8b", "--train --gpus 8 --cp 2 --attention eager", "needs SDPA"},
        {"llama-3-8b", "--infer --gpus 2 --cp 2", "--train"},
        {"llama-3-8b", "--train --gpus 8 --seq 8192 --cp 2 --zero 3", "not --zero"},
        {"llama-3-8b", "--train --gpus 8 --seq 8192 --cp 2 --zero 1", "not --zero"},
        {"llama-3-8b", "--train --gpus 8 --seq 8192 --cp 2 --fsdp", "needs FSDP2"},
        {"llama-3-8b", "--train --gpus 8 --seq 8192 --cp 2 --fsdp --fsdp-version 2 --lora",
         "not with --lora"},
        {"llama-3-8b", "--train --gpus 8 --seq 8192 --cp 2 --fsdp --fsdp-version 2 --qlora",
         "not with --lora"},
        {"llama-3-8b", "--train --gpus 4 --pp 2 --fsdp --fsdp-version 1", "needs FSDP2"},
        {"llama-3-8b", "--train --gpus 4 --pp 2 --zero 3", "ZeRO-1 at most"},
        {"llama-3-8b", "--infer --engine vllm --gpu H100 --vllm-version 1.x", "not a version"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct gm_job j;
        struct gm_error err;
        char buf[256], *save = NULL;
        enum gm_status st = GM_OK;
        gm_job_init(&j);
        j.model.model = gm_model_catalog_find(bad[i].model);
        snprintf(buf, sizeof buf, "%s", bad[i].settings);
        for (char *tok = strtok_r(buf, " ", &save); tok && st == GM_OK;
             tok = strtok_r(NULL, " ", &save)) {
            const struct gm_job_setting *s = gm_job_setting_find(tok + 2);
            assert_non_null(s);
            st = gm_job_set(&j, tok + 2, s->type == GM_JOB_FLAG ? NULL : strtok_r(NULL, " ", &save),
                            &err);
        }
        if (st == GM_OK)
            st = gm_estimate_run(&j, &with, &err);
        if (st != GM_ERR_INVALID)
            fail_msg("%s: accepted", bad[i].settings);
        if (!strstr(err.msg, bad[i].msg))
            fail_msg("%s: '%s' lacks '%s'", bad[i].settings, err.msg, bad[i].msg);
    }
}

/* Training saves per token what each block runs: a Mamba-2 mixer its in_proj output, the
 * scan output and an fp32 rstd per group (mamba_split_conv1d_scan_combined); Nemotron-H's
 * blocks average attention, Mamba-2 and MLP blocks by their counts; Falcon-H1's layers hold
 * all three.  Checked against est_layer_mix_saved's parts: a pattern with fewer MLP blocks
 * saves less per layer, and Falcon-H1 saves more than its attention + MLP alone. */
static void test_hybrid_training_saved(void **state)
{
    struct gm_model m = *gm_model_catalog_find("nemotron-h-8b");
    struct est_layer_cfg c = est_layer_cfg_full(2.0, 2.0, false, 4096);
    const double di = 8192, conv = 8192 + 2 * 8 * 128;
    double attn = 100.0, mlp = 1000.0, norm = 10.0, ssm = 2.0 * (di + conv + 128) + 2.0 * di + 32.0;
    (void)state;
    assert_true(fabs(est_layer_mix_saved(&m, &c, attn, mlp, norm) -
                     (4 * attn + 24 * (norm + ssm) + 24 * (norm + mlp)) / 52) < 1e-6);
    m = *gm_model_catalog_find("falcon-h1-7b");
    ssm = 2.0 * 3072 + 2.0 * (3072 + 3584 + 24) + 2.0 * 3072 + 4.0;
    assert_true(fabs(est_layer_mix_saved(&m, &c, attn, mlp, norm) -
                     (attn + ssm + 2.0 * 3072 + mlp)) < 1e-6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hybrid_training_saved),
        cmocka_unit_test(test_quant_kernel_scratch),
        cmocka_unit_test(test_stack_presets_hf_family),
        cmocka_unit_test(test_techniques_change_their_kinds),
        cmocka_unit_test(test_expert_parallel),
        cmocka_unit_test(test_loss_sizes),
        cmocka_unit_test(test_loss_parallel),
        cmocka_unit_test(test_loss_in_the_model),
        cmocka_unit_test(test_stack_presets),
        cmocka_unit_test(test_torchtune_qlora_keeps_the_rest_bf16),
        cmocka_unit_test(test_trl_casts_qlora_embeddings_bf16),
        cmocka_unit_test(test_trl_casts_qlora_adapters_bf16_before_0_9),
        cmocka_unit_test(test_trl_cast_follows_the_hf_names),
        cmocka_unit_test(test_torch_version_before_2_defaults),
        cmocka_unit_test(test_compiled_loss_keeps_logits_and_new_gradient),
        cmocka_unit_test(test_torchtitan_compiled_loss),
        cmocka_unit_test(test_fsdp_shard_ends),
        cmocka_unit_test(test_hf_generate_by_version),
        cmocka_unit_test(test_hf_generate_sliding_by_version),
        cmocka_unit_test(test_fsdp_param_offload),
        cmocka_unit_test(test_model_impl),
        cmocka_unit_test(test_loss_in_the_model_before_446),
        cmocka_unit_test(test_hf_stack_copies),
        cmocka_unit_test(test_moe_expert_loop),
        cmocka_unit_test(test_lora_fused_qkv),
        cmocka_unit_test(test_final_norm_released_before_the_layers),
        cmocka_unit_test(test_fused_lora_saves_dropped_inputs),
        cmocka_unit_test(test_fsdp1_reentrant),
        cmocka_unit_test(test_float8_training),
        cmocka_unit_test(test_final_softcap_by_loss_form),
        cmocka_unit_test(test_op_checkpointing),
        cmocka_unit_test(test_titan_cudnn_attention_recomputed_by_op_sac),
        cmocka_unit_test(test_hf_mistral_repeat_kv_saved),
        cmocka_unit_test(test_optimizer_in_backward),
        cmocka_unit_test(test_paged_state),
        cmocka_unit_test(test_paged_state_gives_way_to_the_replay),
        cmocka_unit_test(test_ranges_and_verdict),
        cmocka_unit_test(test_runtime),
        cmocka_unit_test(test_nccl_rule),
        cmocka_unit_test(test_nccl_expert_group),
        cmocka_unit_test(test_nccl_pipeline_neighbours),
        cmocka_unit_test(test_vllm_versions),
        cmocka_unit_test(test_context_parallel),
        cmocka_unit_test(test_pipeline_with_fsdp),
        cmocka_unit_test(test_technique_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
