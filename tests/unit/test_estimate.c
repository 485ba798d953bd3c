/* SPDX-License-Identifier: MIT */
/* test_estimate.c - the estimator's core: weights, KV cache, blog formula, per-layer
 * activations against Korthikanti et al., phase logic, bad inputs, the job settings by
 * name (input forms, checks across settings), the kind-to-category map, every reason of
 * the fit verdict, and GPU names as nvidia-smi prints them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "estimate/estimate_int.h"
#include "gpumem/gpumem.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct gm_estimate *est; /* large: off the stack */

static const struct gm_est_component *find(const struct gm_estimate *e, const char *name)
{
    for (size_t i = 0; i < e->n_components; i++)
        if (!strcmp(e->components[i].name, name))
            return &e->components[i];
    return NULL;
}

static void set(struct gm_job *j, const char *name, const char *value)
{
    struct gm_error err;
    if (gm_job_set(j, name, value, &err) != GM_OK)
        fail_msg("--%s %s: %s", name, value ? value : "", err.msg);
}

static void test_weights_7b(void **state)
{
    struct gm_job j;
    struct gm_error err;
    (void)state;
    gm_job_init(&j);
    j.model.n_params = 7000000000ull;
    set(&j, "bits", "16");
    set(&j, "reserve-gib", "4");
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(est->weight_bytes == 14000000000ull);
    assert_true(est->device_bytes == 14000000000ull + 4 * GM_GIB);
    /* 17.04 GiB */
    assert_true(fabs((double)est->device_bytes / (double)GM_GIB - 17.04) < 0.005);
    /* The reserve is stated as an assumption, and is a component outside the allocator. */
    assert_non_null(strstr(est->assumptions[1], "not a proof"));
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_RESERVE), 4 * GM_GIB);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_CUDA_CONTEXT), 0);
    /* Odd bit widths round up to whole bytes. */
    j.numerics.weight_bits = 4;
    j.model.n_params = 3;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(est->weight_bytes, 2);
    j.numerics.weight_bits = 4.5;
    j.model.n_params = 1000;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(est->weight_bytes, 563);
}

static void test_kv_cache(void **state)
{
    struct gm_job j;
    struct gm_error err;
    const struct gm_model *l3 = gm_model_catalog_find("llama-3-8b");
    struct gm_model m;
    (void)state;
    gm_job_init(&j);
    j.mode = GM_EST_INFER;
    j.model.model = l3;
    j.workload.context = 8192;
    j.numerics.kv_dtype = GM_DTYPE_BF16;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(find(est, "kv_cache")->bytes == 1073741824ull);
    assert_int_equal(find(est, "kv_cache")->kind, GM_KIND_KV_CACHE);
    j.workload.batch = 4;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(find(est, "kv_cache")->bytes == 4 * GM_GIB);
    /* fp8 halves it; new tokens count as tokens. */
    j.numerics.kv_dtype = GM_DTYPE_F8_E4M3;
    j.workload.context = 4096;
    j.workload.new_tokens = 4096;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(find(est, "kv_cache")->bytes == 2 * GM_GIB);
    /* KV heads, never query heads: MHA with the same dims is 4x. */
    m = *l3;
    m.n_kv_heads = m.n_heads;
    j.model.model = &m;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(find(est, "kv_cache")->bytes == 8 * GM_GIB);
    /* Sliding window: Mistral keeps 4096 tokens per layer. */
    j.model.model = gm_model_catalog_find("mistral-7b");
    j.workload.batch = 1;
    j.numerics.kv_dtype = GM_DTYPE_BF16;
    j.workload.context = 32768;
    j.workload.new_tokens = 0;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(find(est, "kv_cache")->bytes == 512 * GM_MIB);
    /* Gemma-2: only every other layer is windowed. 21 layers x 4096 + 21 x 8192 tokens. */
    j.model.model = gm_model_catalog_find("gemma-2-9b");
    j.workload.context = 8192;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(find(est, "kv_cache")->bytes == 2ull * 8 * 256 * 2 * (21 * 4096 + 21 * 8192));
    /* Explicit head_dim (gemma-7b: 256, not 3072/16). */
    j.model.model = gm_model_catalog_find("gemma-7b");
    j.workload.context = 1000;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(find(est, "kv_cache")->bytes == 2ull * 28 * 16 * 256 * 1000 * 2);
}

/* Inference beyond the model's positions is warned about, as training is. */
static void test_context_warning(void **state)
{
    struct gm_job j;
    struct gm_error err;
    bool warned = false;
    (void)state;
    gm_job_init(&j);
    j.mode = GM_EST_INFER;
    j.model.model = gm_model_catalog_find("llama-3-8b"); /* 8192 positions */
    j.workload.context = 100000;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    for (size_t i = 0; i < est->n_assumptions; i++)
        warned = warned || strstr(est->assumptions[i], "exceed the model's "
                                                       "max_position_embeddings 8192");
    assert_true(warned);
    j.workload.context = 8000;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    for (size_t i = 0; i < est->n_assumptions; i++)
        assert_null(strstr(est->assumptions[i], "max_position_embeddings"));
}

static void test_blog(void **state)
{
    struct gm_job j;
    struct gm_error err;
    double N = 1543714304.0, A = 4.6894e-4 * N + 1.8494e6;
    (void)state;
    gm_job_init(&j);
    j.mode = GM_EST_TRAIN;
    j.method = GM_METHOD_BLOG;
    j.model.model = gm_model_catalog_find("qwen2.5-1.5b");
    j.numerics.precision = GM_PREC_FP32;
    j.workload.batch = 16;
    j.workload.seq = 256;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    /* N*P + 2NP + max(2NP, A*B*L*P) */
    assert_true(est->peak_allocated_bytes ==
                (uint64_t)llround(3 * N * 4) + (uint64_t)llround(A * 16 * 256 * 4));
    assert_true(fabs((double)est->peak_allocated_bytes / 1e9 - 60.69) < 0.005);
    assert_true(fabs((double)est->peak_allocated_bytes / (double)GM_GIB - 56.52) < 0.005);
    assert_int_equal(est->peak_phase, GM_EST_PHASE_FORWARD_BACKWARD);
    /* The hook-measured A = 5,065,216 gives 101.5 GB. */
    j.numerics.activations_per_token = 5065216;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(fabs((double)est->peak_allocated_bytes / 1e9 - 101.51) < 0.005);
    /* Batch 2: the optimizer step dominates, total = 5NP. */
    j.numerics.activations_per_token = 0;
    j.workload.batch = 2;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(est->peak_phase, GM_EST_PHASE_OPTIMIZER_STEP);
    assert_true(est->peak_allocated_bytes == 5 * (uint64_t)llround(N * 4));
    /* Plain numbers work with the blog method. */
    j.model.model = NULL;
    j.model.n_params = 1543714304ull;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(est->peak_allocated_bytes == 5 * (uint64_t)llround(N * 4));
}

static void test_korthikanti(void **state)
{
    /* A GPT layer with LayerNorm, 4h GELU MLP, MHA, dropout, learned positions: in fp32
     * (16E+2)sbh + (2E+1)as^2b with E = 4, i.e. per token 66h + 9as (paper Table 2 with
     * 4-byte activations), of which 9as is the s x s part; with SDPA the as^2 term is
     * gone. */
    struct gm_model m;
    double h = 1024, a = 16, s = 512, got, seq2 = -1;
    struct est_layer_cfg eager = est_layer_cfg_full(4, 4, true, 512);
    struct est_layer_cfg sdpa = est_layer_cfg_full(4, 4, false, 512);
    (void)state;
    m = *gm_model_catalog_find("bert-large-uncased");
    got = est_layer_saved_per_token(&m, &eager, &seq2);
    assert_true(fabs(got - (66 * h + 9 * a * s)) < 1e-6);
    assert_true(fabs(seq2 - 9 * a * s) < 1e-6);
    got = est_layer_saved_per_token(&m, &sdpa, &seq2);
    assert_true(fabs(got - (66 * h + 4 * a)) < 1e-6);
    assert_true(seq2 == 0);
    /* Gated MLP keeps four I-wide tensors instead of two. */
    m.gated_mlp = true;
    assert_true(est_layer_saved_per_token(&m, &sdpa, NULL) - got ==
                2.0 * 4 * (double)m.intermediate);
}

/* The parts of a training estimate's components.  The s x s part: with eager attention
 * the saved activations hold layers x heads x seq scores per token (fp32 GPT-2, no
 * dropout: 4 bytes each) and the backward temporaries one layer's score gradients (4 + 4
 * bytes); with SDPA neither.  The loss's 12 bytes per logit are the kept log-softmax
 * (a snapshot's 'activation') and two gradients ('other'). */
static void test_component_parts(void **state)
{
    const struct gm_est_component *acts, *bwd, *loss;
    uint64_t cats[GM_CATEGORY_COUNT] = {0};
    struct gm_model m = *gm_model_catalog_find("gpt2");
    struct gm_job j;
    struct gm_error err;
    double T = 4 * 1024, want;
    (void)state;
    m.attn_dropout = m.hidden_dropout = 0;
    gm_job_init(&j);
    j.mode = GM_EST_TRAIN;
    j.model.model = &m;
    j.numerics.precision = GM_PREC_FP32;
    j.workload.batch = 4;
    j.workload.seq = 1024;
    j.memory.attention = GM_ATTN_EAGER;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    acts = find(est, "activations");
    bwd = find(est, "backward_transients");
    want = 12.0 * 12.0 * 1024 * 4 * T;
    assert_true(fabs(acts->seq2_share * (double)acts->bytes - want) < 2);
    assert_true(fabs(bwd->seq2_share * (double)bwd->bytes - 12.0 * 1024 * 8 * T) < 2);
    loss = find(est, "logits_and_loss");
    assert_true(loss->seq2_share == 0);
    assert_true(find(est, "weights")->seq2_share == 0);
    assert_true(est_component_categories(loss, cats));
    assert_true(cats[GM_CATEGORY_ACTIVATION] == (uint64_t)(4 * T) * m.vocab);
    assert_true(cats[GM_CATEGORY_OTHER] == (uint64_t)(8 * T) * m.vocab);
    j.memory.attention = GM_ATTN_SDPA;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(find(est, "activations")->seq2_share == 0);
    assert_true(find(est, "backward_transients")->seq2_share == 0);
}

/* Training of Llama-3-8B at its defaults, sequences of 512 tokens. */
static void llama3_train_512(struct gm_job *j)
{
    gm_job_init(j);
    j->mode = GM_EST_TRAIN;
    j->model.model = gm_model_catalog_find("llama-3-8b");
    j->workload.seq = 512;
}

/* PyTorch's cuBLAS workspaces, one rule (cublas.c): ":4096:2:16:8" = 8,519,680 B per
 * (handle, stream), 32 MiB on compute capability 9.0 (CublasHandlePool.cpp
 * parseChosenWorkspaceSize); two handles in training (the forward's thread, autograd's device
 * thread), one in inference; inside the caching allocator from PyTorch 1.13 (PR #83461),
 * cuBLAS's own outside it before; nothing else outside by default (--workspace 0). */
static void test_cublas_workspaces(void **state)
{
    const uint64_t ws = 2 * 4096 * 1024 + 8 * 16 * 1024;
    const struct gm_est_component *c;
    struct gm_estimate *old = NULL;
    struct gm_job j;
    struct gm_error err;
    (void)state;
    llama3_train_512(&j);
    assert_int_equal(j.runtime.workspace_bytes, 0);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    c = find(est, "cublas_workspaces");
    assert_int_equal(c->kind, GM_KIND_TORCH_WORKSPACE);
    assert_int_equal(c->bytes, 2 * ws);
    assert_int_equal(c->phases, GM_EST_PHASE_TRAIN_ALL);
    assert_false(gm_est_kind_outside_allocator(c->kind));
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_WORKSPACE), 0);
    assert_true(est->device_bytes == est->peak_reserved_bytes + j.runtime.cuda_context_bytes);
    /* Hopper: 32 MiB each */
    assert_int_equal(gm_job_set(&j, "gpu", "H100", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(find(est, "cublas_workspaces")->bytes, 2 * 32 * GM_MIB);
    /* before PyTorch 1.13: the same workspaces, cuBLAS's own, outside the allocator; peak
     * allocated lower by them, beside --workspace */
    llama3_train_512(&j);
    assert_int_equal(gm_job_set(&j, "torch-version", "1.13", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &old, &err), GM_OK);
    assert_int_equal(gm_estimate_kind_bytes(old, GM_KIND_TORCH_WORKSPACE), 2 * ws);
    assert_int_equal(gm_job_set(&j, "torch-version", "1.12", &err), GM_OK);
    assert_int_equal(gm_job_set(&j, "workspace", "1MiB", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_TORCH_WORKSPACE), 0);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_WORKSPACE), 2 * ws + GM_MIB);
    assert_int_equal(old->peak_allocated_bytes - est->peak_allocated_bytes, 2 * ws);
    gm_estimate_free(old);
    /* inference (transformers): one thread, one handle, in both phases */
    gm_job_init(&j);
    j.mode = GM_EST_INFER;
    j.model.model = gm_model_catalog_find("llama-3-8b");
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    c = find(est, "cublas_workspaces");
    assert_int_equal(c->bytes, ws);
    assert_int_equal(c->phases, GM_EST_PHASE_INFER_ALL);
    /* the blog method is the blog's formula: none */
    gm_job_init(&j);
    j.mode = GM_EST_TRAIN;
    j.method = GM_METHOD_BLOG;
    j.model.model = gm_model_catalog_find("llama-3-8b");
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_TORCH_WORKSPACE), 0);
}

static void test_train_phases(void **state)
{
    struct gm_job j;
    struct gm_error err;
    (void)state;
    llama3_train_512(&j);
    /* Small batch: the optimizer step dominates (weights + grads + state + temporaries). */
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(est->peak_phase, GM_EST_PHASE_OPTIMIZER_STEP);
    assert_int_equal(find(est, "weights_fp32_master")->kind, GM_KIND_MASTER_WEIGHTS);
    assert_int_equal(find(est, "weights_16bit_autocast_copies")->kind, GM_KIND_WEIGHT_COPIES);
    assert_true(find(est, "optimizer_state")->bytes == 8 * est->n_params);
    assert_true(find(est, "optimizer_step_temporaries")->bytes == 4 * est->n_params);
    assert_true(est->optimizer_step_bytes ==
                20 * est->n_params + find(est, "cublas_workspaces")->bytes);
    assert_true(est->peak_reserved_bytes >= est->peak_allocated_bytes);
    assert_true(est->device_bytes == est->peak_reserved_bytes + j.runtime.cuda_context_bytes +
                                         j.runtime.workspace_bytes);
    /* Large batch: forward/backward dominates; the logits term scales with B*L*V. */
    j.workload.batch = 16;
    j.workload.seq = 4096;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(est->peak_phase, GM_EST_PHASE_FORWARD_BACKWARD);
    /* HF ForCausalLMLoss at its backward: the fp32 log-softmax kept, the gradient of its
     * output and of its input, 12 bytes per logit, in the loss's own moment (not beside the
     * layers' backward) */
    assert_true(find(est, "logits_and_loss")->bytes == 16ull * 4096 * 128256 * 12);
    assert_int_equal(find(est, "logits_and_loss")->phases, GM_EST_PHASE_LOSS);
    /* Checkpointing shrinks activations by more than 8x here (32 layers). */
    {
        uint64_t full = find(est, "activations")->bytes;
        j.memory.checkpointing = GM_CKPT_FULL;
        assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
        assert_true(find(est, "activations")->bytes * 8 < full);
    }
    /* Pure bf16: 2 bytes weights, grads; Adam state 4 bytes; no master copy. */
    j.numerics.precision = GM_PREC_BF16;
    j.memory.checkpointing = GM_CKPT_NONE;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_null(find(est, "weights_fp32_master"));
    assert_true(find(est, "weights")->bytes == 2 * est->n_params);
    assert_true(find(est, "optimizer_state")->bytes == 4 * est->n_params);
    /* Fused AdamW has no step temporaries; SGD no state. */
    j.numerics.optim_impl = GM_OPTIM_FUSED;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_null(find(est, "optimizer_step_temporaries"));
    j.numerics.optimizer = GM_OPT_SGD;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_null(find(est, "optimizer_state"));
    /* Eager attention adds the s*s scores; selective checkpointing recomputes them. */
    {
        uint64_t sdpa;
        j.numerics.optimizer = GM_OPT_ADAMW;
        j.workload.batch = 1;
        j.workload.seq = 2048;
        assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
        sdpa = find(est, "activations")->bytes;
        j.memory.attention = GM_ATTN_EAGER;
        assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
        assert_true(find(est, "activations")->bytes > sdpa + 32ull * 32 * 2048 * 2048 * 4);
        j.memory.checkpointing = GM_CKPT_SELECTIVE;
        assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
        assert_int_equal(find(est, "activations")->bytes, sdpa);
    }
    /* Gradient accumulation keeps the gradients through the next forward passes. */
    j.memory.checkpointing = GM_CKPT_NONE;
    j.memory.attention = GM_ATTN_SDPA;
    assert_int_equal(find(est, "gradients")->phases,
                     GM_EST_PHASE_BACKWARD_END | GM_EST_PHASE_OPTIMIZER_STEP);
    j.workload.grad_accum = 4;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(find(est, "gradients")->phases, GM_EST_PHASE_TRAIN_ALL);
}

static void test_bad_inputs(void **state)
{
    struct gm_job j;
    struct gm_error err;
    (void)state;
    gm_job_init(&j);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID); /* nothing given */
    j.model.n_params = (uint64_t)1 << 60;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--parameters"));
    j.model.n_params = 1000;
    j.workload.batch = 0;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--batch"));
    j.workload.batch = 1;
    j.numerics.weight_format = GM_WEIGHTS_BITS;
    j.numerics.weight_bits = -1;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID);
    j.numerics.weight_bits = 16;
    j.mode = GM_EST_TRAIN; /* arch method without a model */
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID);
    j.mode = GM_EST_INFER;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID);
    /* Encoders have no KV cache: their forward pass is sized, and they generate nothing. */
    j.model.model = gm_model_catalog_find("bert-base-uncased");
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_KV_CACHE), 0);
    j.workload.new_tokens = 8;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "encoder"));
    j.workload.new_tokens = 0;
    /* Absurd but individually allowed sizes: the total would pass 2^64. */
    j.model.model = gm_model_catalog_find("llama-3.1-405b");
    j.workload.batch = (uint64_t)1 << 20;
    j.workload.context = (uint64_t)1 << 26;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "2^64"));
}

/* The lists of an estimate grow to their caps: a component past it is refused, an
 * assumption past it dropped. */
static void test_components_limit(void **state)
{
    struct gm_error err;
    struct gm_estimate *e = est_new();
    (void)state;
    assert_non_null(e);
    for (int i = 0; i < GM_EST_MAX_COMPONENTS; i++)
        assert_int_equal(est_add(e, GM_KIND_ACTIVATIONS, "x", 1, GM_EST_PHASE_PREFILL, false,
                                 GM_EXTENT_ONE_LAYER, NULL, &err),
                         GM_OK);
    assert_int_equal(est_add(e, GM_KIND_ACTIVATIONS, "x", 1, GM_EST_PHASE_PREFILL, false,
                             GM_EXTENT_ONE_LAYER, NULL, &err),
                     GM_ERR_LIMIT);
    assert_int_equal(e->n_components, GM_EST_MAX_COMPONENTS);
    for (int i = 0; i < GM_EST_MAX_ASSUMPTIONS + 3; i++)
        est_assume(e, "assumption %d", i);
    assert_int_equal(e->n_assumptions, GM_EST_MAX_ASSUMPTIONS);
    assert_string_equal(e->assumptions[GM_EST_MAX_ASSUMPTIONS - 1], "assumption 255");
    est_reset(e); /* emptied, storage kept */
    assert_int_equal(e->n_components, 0);
    assert_non_null(e->components);
    gm_estimate_free(e);
}

/* Parameter counts as people write them; the old forms keep working. */
static void test_input_forms(void **state)
{
    static const struct {
        const char *text;
        uint64_t value;
    } good[] = {
        {"7000000000", 7000000000ull},
        {"7e9", 7000000000ull},
        {"7_000_000_000", 7000000000ull},
        {"1.5e9", 1500000000ull},
        {"27.4e9", 27400000000ull},
        {"8B", 8000000000ull},
        {"70B", 70000000000ull},
        {"1.5B", 1500000000ull},
        {"500M", 500000000ull},
        {"1.2T", 1200000000000ull},
        {"7b", 7000000000ull},
        {"2851e6", 2851000000ull},
        {"0.5K", 500},
        {"1000e-3", 1},
        {"0", 0},
    };
    static const char *const bad[] = {"-7e9",
                                      "1.5",
                                      "8X",
                                      "B",
                                      "",
                                      "1.5e",
                                      "e9",
                                      "8BB",
                                      "0.0001K",
                                      "1500e-3",
                                      "99999999999999999999999"};
    struct gm_job j;
    struct gm_error err;
    uint64_t v;
    (void)state;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        if (gm_parse_count(good[i].text, &v, &err) != GM_OK)
            fail_msg("'%s': %s", good[i].text, err.msg);
        if (v != good[i].value)
            fail_msg("'%s' gave %llu", good[i].text, (unsigned long long)v);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (gm_parse_count(bad[i], &v, &err) == GM_OK)
            fail_msg("'%s' accepted as %llu", bad[i], (unsigned long long)v);
    /* The --parameters setting takes them; the estimate sizes them. */
    gm_job_init(&j);
    set(&j, "parameters", "1.5B");
    assert_int_equal(j.model.n_params, 1500000000ull);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(est->weight_bytes, 3000000000ull);
    assert_int_equal(gm_job_set(&j, "parameters", "-7000000000", &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "--parameters: '-7000000000': not a non-negative whole number");
}

/* The settings table: names with dashes or underscores, ranges, choices, given-ness, and
 * the checks across settings with messages naming them. */
static void test_settings(void **state)
{
    struct gm_job j;
    struct gm_error err;
    size_t n;
    const struct gm_job_setting *s = gm_job_settings(&n);
    (void)state;
    assert_true(n > 40);
    for (size_t i = 0; i < n; i++) {
        assert_non_null(s[i].help);
        assert_ptr_equal(gm_job_setting_find(s[i].name), &s[i]);
    }
    gm_job_init(&j);
    set(&j, "max_model_len", "4096"); /* a binding's keyword spelling */
    assert_int_equal(j.engine.vllm.max_model_len, 4096);
    assert_true(gm_job_given(&j, "max-model-len"));
    assert_false(gm_job_given(&j, "batch"));
    assert_int_equal(gm_job_set(&j, "batch", "0", &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "--batch: 0 is out of range [1, 2^20]");
    assert_int_equal(gm_job_set(&j, "precision", "fp64", &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "'fp64' is not one of: fp32, fp16-mixed"));
    assert_int_equal(gm_job_set(&j, "bogus", "1", &err), GM_ERR_INVALID);
    set(&j, "train", "false"); /* a false flag is not given */
    assert_false(gm_job_given(&j, "train"));
    /* --max-model-len without vLLM, in weights mode: the first check names it */
    assert_int_equal(gm_job_check(&j, &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "--max-model-len applies to --infer");
    set(&j, "infer", NULL);
    assert_int_equal(gm_job_check(&j, &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "--max-model-len applies to --engine vllm");
    set(&j, "engine", "vllm");
    assert_int_equal(gm_job_check(&j, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "give --gpu or --gpu-memory"));
    set(&j, "gpu-memory", "80");
    assert_int_equal(j.gpu.memory_bytes, 80 * GM_GIB);
    assert_int_equal(gm_job_check(&j, &err), GM_OK);
    set(&j, "kv-dtype", "fp8");
    assert_int_equal(j.numerics.kv_dtype, GM_DTYPE_F8_E4M3);
    /* --gpu with --gpu-memory: that GPU (compute capability, SMs) with the total given, in
     * either order; the catalog's total is kept for the assumption line and the suggestions */
    set(&j, "gpu", "H100");
    assert_int_equal(gm_job_check(&j, &err), GM_OK);
    {
        const struct gm_gpu *h100;
        struct gm_job k = j;
        assert_int_equal(gm_gpu_lookup("H100", &h100, &err), GM_OK);
        assert_int_equal(j.gpu.memory_bytes, 80 * GM_GIB);
        assert_int_equal(j.gpu.cuda_bytes, 0);
        assert_int_equal(j.gpu.catalog_bytes, h100->memory_bytes);
        assert_int_equal(j.gpu.sm, h100->sm);
        assert_int_equal(j.gpu.sms, h100->sms);
        assert_string_equal(j.gpu.label, h100->name);
        /* the other order gives the same GPU */
        gm_job_init(&k);
        set(&k, "infer", NULL);
        set(&k, "engine", "vllm");
        set(&k, "gpu", "H100");
        set(&k, "gpu-memory", "80");
        set(&k, "kv-dtype", "fp8");
        assert_int_equal(gm_job_check(&k, &err), GM_OK);
        assert_int_equal(k.gpu.memory_bytes, j.gpu.memory_bytes);
        assert_int_equal(k.gpu.cuda_bytes, 0);
        assert_int_equal(k.gpu.catalog_bytes, j.gpu.catalog_bytes);
        assert_int_equal(k.gpu.sm, j.gpu.sm);
        assert_int_equal(k.gpu.sms, j.gpu.sms);
        assert_int_equal(k.gpu.no_p2p, j.gpu.no_p2p);
        assert_string_equal(k.gpu.label, j.gpu.label);
    }
    /* training settings */
    gm_job_init(&j);
    set(&j, "train", NULL);
    set(&j, "lora", NULL);
    set(&j, "qlora", NULL);
    assert_int_equal(gm_job_check(&j, &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "--lora and --qlora exclude each other");
    gm_job_init(&j);
    set(&j, "train", NULL);
    set(&j, "no-double-quant", NULL);
    assert_int_equal(gm_job_check(&j, &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "--no-double-quant needs --qlora");
    gm_job_init(&j);
    set(&j, "train", NULL);
    set(&j, "gpus", "6");
    set(&j, "tp", "4");
    assert_int_equal(gm_job_check(&j, &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "--gpus 6 is not a multiple of --tp 4 x --pp 1");
    /* --tp alone means that many GPUs */
    gm_job_init(&j);
    set(&j, "train", NULL);
    set(&j, "tp", "4");
    assert_int_equal(gm_job_check(&j, &err), GM_OK);
    /* llama.cpp has no fp8 cache */
    gm_job_init(&j);
    set(&j, "infer", NULL);
    set(&j, "engine", "llama.cpp");
    set(&j, "kv-dtype", "fp8");
    assert_int_equal(gm_job_check(&j, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "caches KV as fp32, fp16, bf16, int8 (q8_0) or int4"));
}

/* Each setting id addresses the table row of its name (RESERVE_GIB: "reserve-gib"). */
static void test_setting_ids(void **state)
{
    static const char *const ids[] = {
#define ID_NAME(id) #id,
        EST_SETTINGS(ID_NAME)
#undef ID_NAME
    };
    size_t n;
    const struct gm_job_setting *s = gm_job_settings(&n);
    (void)state;
    assert_int_equal(n, EST_SET__COUNT);
    assert_int_equal(sizeof ids / sizeof ids[0], EST_SET__COUNT);
    for (size_t i = 0; i < n; i++) {
        char want[64];
        size_t k = 0;
        for (; ids[i][k] && k + 1 < sizeof want; k++)
            want[k] = ids[i][k] == '_' ? '-' : (char)tolower((unsigned char)ids[i][k]);
        want[k] = '\0';
        assert_string_equal(s[i].name, want);
        assert_ptr_equal(est_setting((enum est_setting)i), &s[i]);
    }
}

/* A job filled in directly is held to the same ranges as gm_job_set(): the table's; a
 * setting put by id is range-checked and marked given; its value reads as typed. */
static void test_setting_ranges(void **state)
{
    struct gm_job j;
    struct gm_error err;
    union gm_job_value v;
    char text[48];
    (void)state;
    gm_job_init(&j);
    j.model.n_params = 7000000000ull;
    j.mode = GM_EST_TRAIN;
    j.memory.loss_chunks = 0;
    assert_int_equal(gm_job_check(&j, &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "--loss-chunks: 0 is out of range [1, 2^16]");
    j.memory.loss_chunks = 8;
    j.runtime.fragmentation = 4.5;
    assert_int_equal(gm_job_check(&j, &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "--fragmentation: 4.5 is out of range [0, 4]");
    j.runtime.fragmentation = 0.25;
    j.parallel.tp = 0;
    assert_int_equal(gm_job_check(&j, &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "--tp: 0 is out of range [1, 1024]");
    j.parallel.tp = 1;
    j.memory.lora.dropout = 1.0;
    assert_int_equal(gm_job_check(&j, &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "--lora-dropout: 1 is out of range [0, 1)");
    j.memory.lora.dropout = 0;
    assert_int_equal(gm_job_check(&j, &err), GM_OK);
    /* defaults that mean "not set" sit outside their ranges and pass */
    assert_int_equal(j.engine.vllm.max_model_len, 0);
    assert_int_equal(j.workload.tokens, 0);

    v.u64 = 0;
    assert_int_equal(est_job_put(&j, EST_SET_BATCH, &v, &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "--batch: 0 is out of range [1, 2^20]");
    assert_false(est_given(&j, EST_SET_BATCH));
    v.u64 = 4;
    assert_int_equal(est_job_put(&j, EST_SET_BATCH, &v, &err), GM_OK);
    assert_int_equal(j.workload.batch, 4);
    assert_true(est_given(&j, EST_SET_BATCH));
    assert_true(gm_job_given(&j, "batch"));
    v.choice = GM_DTYPE_F8_E4M3;
    est_setting_value_text(EST_SET_KV_DTYPE, &v, text, sizeof text);
    assert_string_equal(text, "fp8");
    v.choice = GM_SHARD_ZERO3;
    assert_int_equal(est_job_put(&j, EST_SET_ZERO, &v, &err), GM_OK);
    assert_int_equal(j.parallel.shard, GM_SHARD_ZERO3);
    est_setting_value_text(EST_SET_ZERO, &v, text, sizeof text);
    assert_string_equal(text, "3");
    v.choice = EST_QUANT_NF4_DQ;
    est_setting_value_text(EST_SET_QUANT, &v, text, sizeof text);
    assert_string_equal(text, "nf4-dq");
    v.number = 4.5;
    est_setting_value_text(EST_SET_BITS, &v, text, sizeof text);
    assert_string_equal(text, "4.5");
    v.flag = true;
    est_setting_value_text(EST_SET_LORA, &v, text, sizeof text);
    assert_string_equal(text, "");
}

/* Every kind maps to a snapshot category, except what lives outside the allocator. */
static void test_kind_categories(void **state)
{
    static const struct {
        enum gm_est_kind kind;
        enum gm_category category;
    } map[] = {
        {GM_KIND_WEIGHTS, GM_CATEGORY_PARAMETER},
        {GM_KIND_MASTER_WEIGHTS, GM_CATEGORY_PARAMETER},
        {GM_KIND_ADAPTERS, GM_CATEGORY_PARAMETER},
        {GM_KIND_WEIGHT_COPIES, GM_CATEGORY_ACTIVATION},
        {GM_KIND_GATHERED, GM_CATEGORY_OTHER},
        {GM_KIND_GRADIENTS, GM_CATEGORY_GRADIENT},
        {GM_KIND_OPTIMIZER_STATE, GM_CATEGORY_OPTIMIZER_STATE},
        {GM_KIND_OPTIMIZER_TEMP, GM_CATEGORY_OPTIMIZER_TEMP},
        {GM_KIND_ACTIVATIONS, GM_CATEGORY_ACTIVATION},
        {GM_KIND_LOGITS, GM_CATEGORY_ACTIVATION},
        {GM_KIND_BACKWARD_TEMP, GM_CATEGORY_OTHER},
        {GM_KIND_KV_CACHE, GM_CATEGORY_ACTIVATION},
        {GM_KIND_COMM_BUFFERS, GM_CATEGORY_OTHER},
        {GM_KIND_ENGINE_POOL, GM_CATEGORY_OTHER},
        {GM_KIND_TORCH_WORKSPACE, GM_CATEGORY_OTHER},
    };
    static const enum gm_est_kind outside[] = {
        GM_KIND_CUDA_CONTEXT, GM_KIND_WORKSPACE, GM_KIND_NCCL,    GM_KIND_NON_TORCH,
        GM_KIND_RESERVE,      GM_KIND_MANAGED,   GM_KIND_SYMM_MEM};
    enum gm_category c;
    (void)state;
    assert_int_equal(sizeof map / sizeof map[0] + sizeof outside / sizeof outside[0],
                     GM_KIND__COUNT);
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        assert_true(gm_est_kind_category(map[i].kind, &c));
        assert_int_equal(c, map[i].category);
        assert_false(gm_est_kind_outside_allocator(map[i].kind));
        assert_string_not_equal(gm_est_kind_name(map[i].kind), "unknown");
    }
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        assert_false(gm_est_kind_category(outside[i], &c));
        assert_true(gm_est_kind_outside_allocator(outside[i]));
    }
    assert_false(gm_est_kind_category(GM_KIND__COUNT, &c));
    assert_string_equal(gm_est_kind_name(GM_KIND__COUNT), "unknown");
}

static void judge(const struct gm_job *j, enum gm_fit_reason want, bool fits, const char *text)
{
    struct gm_error err;
    if (gm_estimate_run(j, &est, &err) != GM_OK)
        fail_msg("%s", err.msg);
    if (est->fit.reason != want)
        fail_msg("reason %s, want %s (%s)", gm_fit_reason_name(est->fit.reason),
                 gm_fit_reason_name(want), est->fit.text);
    assert_int_equal(est->fit.fits, fits);
    if (text && !strstr(est->fit.text, text))
        fail_msg("'%s' lacks '%s'", est->fit.text, text);
}

/* Each reason of the one fit predicate. */
static void test_fit_reasons(void **state)
{
    struct gm_job j;
    (void)state;
    gm_job_init(&j);
    j.model.model = gm_model_catalog_find("llama-3-8b");
    judge(&j, GM_FIT_NOT_JUDGED, false, "no GPU");
    set(&j, "gpu", "H100");
    judge(&j, GM_FIT_FITS, true, "headroom");
    assert_true(est->fit.headroom_bytes > 0 && est->fit.shortfall_bytes == 0);
    set(&j, "train", NULL);
    judge(&j, GM_FIT_DEVICE_OVER, false, "short by");
    assert_true(est->fit.shortfall_bytes == est->device_bytes - est->fit.capacity_bytes);
    assert_false(est->fit.group_fits[0]);
    /* a paged optimizer runs when it is short by no more than its state */
    gm_job_init(&j);
    j.model.model = gm_model_catalog_find("qwen2.5-1.5b");
    set(&j, "train", NULL);
    set(&j, "precision", "bf16");
    set(&j, "paged-optimizer", NULL);
    set(&j, "seq", "1024");
    set(&j, "grad-checkpointing", "full");
    set(&j, "gpu", "RTX-3060");
    judge(&j, GM_FIT_FITS_PAGED, true, "paged optimizer state in host memory");
    assert_true(est->fit.paged_bytes > 0 && est->fit.paged_bytes <= est->pageable_bytes);
    /* vLLM: the device figure fits, the pool does not hold one max_model_len sequence */
    gm_job_init(&j);
    j.model.model = gm_model_catalog_find("llama-3.1-70b");
    set(&j, "infer", NULL);
    set(&j, "engine", "vllm");
    set(&j, "tp", "2");
    set(&j, "gpu", "H100");
    set(&j, "gpu-memory-utilization", "0.95");
    judge(&j, GM_FIT_ENGINE_NO_START, false, "fewer than max_model_len 131072");
    assert_true(est->device_bytes < est->fit.capacity_bytes);
    assert_int_equal(est->fit.shortfall_bytes,
                     (131072 - est->serving.kv_tokens) * est->serving.kv_bytes_per_token);
    /* ... it starts at a length the pool holds (about 51000 tokens: current vLLM's model
     * runner V2 profiles its sampler of 1024 sequences without top-k/top-p, 0.73 GiB, the CUDA
     * graphs take about 1 GiB), but not with 32 such sequences at once */
    set(&j, "max-model-len", "2048");
    judge(&j, GM_FIT_FITS, true, NULL);
    set(&j, "batch", "32");
    judge(&j, GM_FIT_ENGINE_CONCURRENCY, false, "fewer than 32 sequences");
    /* llama.cpp: the weights fit, the KV cache for the context does not */
    gm_job_init(&j);
    j.model.model = gm_model_catalog_find("llama-3-8b");
    set(&j, "infer", NULL);
    set(&j, "engine", "llama.cpp");
    set(&j, "bits", "4.5");
    set(&j, "context", "200000");
    set(&j, "gpu", "RTX-4090");
    judge(&j, GM_FIT_CONTEXT_OVER, false, "the KV cache for n_ctx 200000 does not");
    /* pipeline stages: judged per device group */
    gm_job_init(&j);
    j.model.model = gm_model_catalog_find("llama-3-70b");
    set(&j, "train", NULL);
    set(&j, "gpus", "64");
    set(&j, "tp", "8");
    set(&j, "pp", "4");
    set(&j, "sequence-parallel", NULL);
    set(&j, "seq", "4096");
    set(&j, "gpu-memory", "62"); /* between the first stage's figure and the others' */
    judge(&j, GM_FIT_DEVICE_OVER, false, "on ranks 0-15 (first stage)");
    assert_int_equal(est->layout.n_groups, 3);
    assert_false(est->fit.group_fits[0]);
    assert_true(est->fit.group_fits[2]);
}

static void test_gpus(void **state)
{
    static const struct {
        const char *name, *want;
    } names[] = {
        {"H100", "H100-80GB"},
        {"h100-sxm", "H100-80GB"},
        {"NVIDIA H100 80GB HBM3", "H100-80GB"},
        {"NVIDIA H100 PCIe", "H100-80GB"},
        {"NVIDIA H100 NVL", "H100-NVL"},
        {"NVIDIA A100-SXM4-80GB", "A100-80GB"},
        {"NVIDIA A100-SXM4-40GB", "A100-40GB"},
        {"NVIDIA A100-PCIE-40GB", "A100-40GB"},
        {"NVIDIA A100 80GB PCIe", "A100-80GB"},
        {"a100-80g", "A100-80GB"},
        {"Tesla V100-SXM2-16GB", "V100-16GB"},
        {"Tesla V100-PCIE-32GB", "V100-32GB"},
        {"Tesla T4", "T4"},
        {"NVIDIA L4", "L4"},
        {"NVIDIA A10G", "A10G"},
        {"NVIDIA L40S", "L40S"},
        {"NVIDIA H200", "H200"},
        {"NVIDIA GeForce RTX 4090", "RTX-4090"},
        {"NVIDIA GeForce RTX 4070 Ti", "RTX-4070-Ti"},
        {"NVIDIA RTX A6000", "RTX-A6000"},
        {"NVIDIA RTX A5000", "RTX-A5000"},
        {"NVIDIA RTX 6000 Ada Generation", "RTX-6000-Ada"},
        {"rtx4090", "RTX-4090"},
        /* nvidia-smi's name and vLLM's fused_moe device_name for the Blackwell RTX PRO 6000 */
        {"NVIDIA RTX PRO 6000 Blackwell Server Edition", "RTX-PRO-6000"},
        {"NVIDIA_RTX_PRO_6000_Blackwell_Server_Edition", "RTX-PRO-6000"},
        {"NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX-PRO-6000"},
        {"RTX PRO 6000 96GB", "RTX-PRO-6000"},
    };
    const struct gm_gpu *g;
    struct gm_error err;
    (void)state;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (gm_gpu_lookup(names[i].name, &g, &err) != GM_OK)
            fail_msg("'%s': %s", names[i].name, err.msg);
        if (strcmp(g->name, names[i].want) != 0)
            fail_msg("'%s' is %s, want %s", names[i].name, g->name, names[i].want);
    }
    /* every catalog name finds itself */
    for (size_t i = 0; i < gm_gpu_catalog_count(); i++) {
        assert_ptr_equal(gm_gpu_find(gm_gpu_catalog_get(i)->name), gm_gpu_catalog_get(i));
        assert_true(gm_gpu_catalog_get(i)->memory_bytes >= 8 * GM_GIB);
    }
    assert_true(gm_gpu_find("h100")->memory_bytes == 81559 * GM_MIB);
    assert_true(gm_gpu_find("A100-80GB")->memory_bytes == 80 * GM_GIB);
    assert_true(gm_gpu_find("rtx-4090")->memory_bytes == 24564 * GM_MIB);
    /* the RTX PRO 6000 Blackwell as nvidia-smi and vLLM print it: 97887 MiB, 94.97 GiB for
     * CUDA, 188 SMs of compute capability 12.0 */
    assert_true(gm_gpu_find("rtx-pro-6000")->memory_bytes == 97887 * GM_MIB);
    assert_true(gm_gpu_find("rtx-pro-6000")->cuda_bytes == (uint64_t)9497 * GM_GIB / 100);
    assert_int_equal(gm_gpu_find("rtx-pro-6000")->sms, 188);
    assert_int_equal(gm_gpu_find("rtx-pro-6000")->sm, 120);
    /* the L40S's CUDA total as a vLLM log on one prints it (44.31 GiB), below nvidia-smi's */
    assert_true(gm_gpu_find("l40s")->cuda_bytes == (uint64_t)4431 * GM_GIB / 100);
    assert_true(gm_gpu_find("l40s")->memory_bytes == 46068 * GM_MIB);
    /* the RTX A5000: nvidia-smi's 24564 MiB, and the 24114 MiB CUDA reports (a PyTorch
     * device-properties printout), which vLLM's budget multiplies; 64 SMs of cc 8.6 */
    assert_true(gm_gpu_find("rtx-a5000")->memory_bytes == 24564 * GM_MIB);
    assert_true(gm_gpu_find("rtx-a5000")->cuda_bytes == 24114 * GM_MIB);
    assert_int_equal(gm_gpu_find("rtx-a5000")->sms, 64);
    assert_int_equal(gm_gpu_find("rtx-a5000")->sm, 86);
    /* ambiguous: refused with the choices, smallest first */
    assert_int_equal(gm_gpu_lookup("A100", &g, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "'A100' is ambiguous: A100-40GB or A100-80GB"));
    assert_int_equal(gm_gpu_lookup("Tesla V100", &g, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "V100-16GB or V100-32GB"));
    assert_null(gm_gpu_find("A100"));
    assert_null(gm_gpu_find("voodoo2"));
    assert_null(gm_gpu_find("H100 40GB")); /* no such board */
    assert_null(gm_gpu_find(""));
    assert_string_equal(gm_est_phases_name(GM_EST_PHASE_TRAIN_ALL), "persistent");
    assert_string_equal(gm_est_phases_name(GM_EST_PHASE_OPTIMIZER_STEP), "optimizer_step");
}

/* A config is named after its file (or the folder holding config.json), and an unknown
 * architecture says which ones gpumem knows. */
static void test_model_sources(void **state)
{
    /* layouts gpumem does not count (gpt_bigcode, t5 and falcon are known) */
    static const char *const unknown[] = {
        "{\"model_type\": \"mamba\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
        "\"vocab_size\": 10}",
        "{\"model_type\": \"rwkv\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
        "\"vocab_size\": 10}",
        "{\"model_type\": \"zamba2\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
        "\"vocab_size\": 10}",
    };
    struct gm_model m;
    struct gm_error err;
    struct gm_job_source src;
    char dir[] = "/tmp/gm_test_estimate_XXXXXX", path[96];
    FILE *f;
    (void)state;
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++) {
        assert_int_equal(gm_model_parse_hf_config(unknown[i], strlen(unknown[i]), &m, &err),
                         GM_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "is not an architecture gpumem knows (the 36 it knows: "
                                        "gpumem estimate --list-archs"));
        assert_null(strstr(err.msg, "missing"));
        assert_null(strstr(err.msg, ")'"));
    }
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/tiny.json", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"model_type\": \"llama\", \"hidden_size\": 64, \"num_hidden_layers\": 2, "
          "\"num_attention_heads\": 4, \"vocab_size\": 10, \"intermediate_size\": 8}",
          f);
    fclose(f);
    assert_int_equal(gm_job_source_load(&src, path, NULL, &err), GM_OK);
    assert_string_equal(src.model.name, "tiny.json");
    gm_job_source_release(&src);
    {
        char tiny[96];
        snprintf(tiny, sizeof tiny, "%s/tiny.json", dir);
        snprintf(path, sizeof path, "%s/config.json", dir);
        assert_int_equal(rename(tiny, path), 0);
    }
    assert_int_equal(gm_job_source_load(&src, path, NULL, &err), GM_OK);
    assert_string_equal(src.model.name, strrchr(dir, '/') + 1);
    gm_job_source_release(&src);
    assert_int_equal(gm_job_source_load(&src, dir, NULL, &err), GM_OK);
    assert_string_equal(src.model.name, strrchr(dir, '/') + 1);
    gm_job_source_release(&src);
    remove(path);
    remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weights_7b),
        cmocka_unit_test(test_kv_cache),
        cmocka_unit_test(test_context_warning),
        cmocka_unit_test(test_blog),
        cmocka_unit_test(test_korthikanti),
        cmocka_unit_test(test_component_parts),
        cmocka_unit_test(test_train_phases),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_cublas_workspaces),
        cmocka_unit_test(test_components_limit),
        cmocka_unit_test(test_input_forms),
        cmocka_unit_test(test_settings),
        cmocka_unit_test(test_setting_ids),
        cmocka_unit_test(test_setting_ranges),
        cmocka_unit_test(test_kind_categories),
        cmocka_unit_test(test_fit_reasons),
        cmocka_unit_test(test_gpus),
        cmocka_unit_test(test_model_sources),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
