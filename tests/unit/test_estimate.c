/* SPDX-License-Identifier: MIT */
/* test_estimate.c - weights, KV cache, blog formula, per-layer activations against
 * Korthikanti et al., phase logic, bad inputs, the GPU catalog. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "estimate/estimate_int.h"
#include "gpumem/gpumem.h"

#include <math.h>
#include <string.h>

static const struct gm_est_component *find(const struct gm_estimate *e, const char *name)
{
    for (size_t i = 0; i < e->n_components; i++)
        if (!strcmp(e->components[i].name, name))
            return &e->components[i];
    return NULL;
}

static void test_weights_7b(void **state)
{
    struct gm_estimate_inputs in;
    struct gm_estimate e;
    struct gm_error err;
    (void)state;
    gm_estimate_inputs_init(&in);
    in.n_params = 7000000000ull;
    in.weight_bits = 16;
    in.reserve_bytes = 4 * GM_GIB;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_true(e.weight_bytes == 14000000000ull);
    assert_true(e.device_bytes == 14000000000ull + 4 * GM_GIB);
    /* 17.04 GiB */
    assert_true(fabs((double)e.device_bytes / (double)GM_GIB - 17.04) < 0.005);
    /* The reserve is stated as an assumption. */
    assert_non_null(strstr(e.assumptions[1], "not a proof"));
    /* Odd bit widths round up to whole bytes. */
    in.weight_bits = 4;
    in.n_params = 3;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_int_equal(e.weight_bytes, 2);
    in.weight_bits = 4.5;
    in.n_params = 1000;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_int_equal(e.weight_bytes, 563);
}

static void test_kv_cache(void **state)
{
    struct gm_estimate_inputs in;
    struct gm_estimate e;
    struct gm_error err;
    const struct gm_model *l3 = gm_model_catalog_find("llama-3-8b");
    struct gm_model m;
    (void)state;
    gm_estimate_inputs_init(&in);
    in.mode = GM_EST_INFER;
    in.model = l3;
    in.context = 8192;
    in.kv_dtype = GM_DTYPE_BF16;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_true(find(&e, "kv_cache")->bytes == 1073741824ull);
    in.batch = 4;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_true(find(&e, "kv_cache")->bytes == 4 * GM_GIB);
    /* fp8 halves it; new tokens count as tokens. */
    in.kv_dtype = GM_DTYPE_F8_E4M3;
    in.context = 4096;
    in.new_tokens = 4096;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_true(find(&e, "kv_cache")->bytes == 2 * GM_GIB);
    /* KV heads, never query heads: MHA with the same dims is 4x. */
    m = *l3;
    m.n_kv_heads = m.n_heads;
    in.model = &m;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_true(find(&e, "kv_cache")->bytes == 8 * GM_GIB);
    /* Sliding window: Mistral keeps 4096 tokens per layer. */
    in.model = gm_model_catalog_find("mistral-7b");
    in.batch = 1;
    in.kv_dtype = GM_DTYPE_BF16;
    in.context = 32768;
    in.new_tokens = 0;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_true(find(&e, "kv_cache")->bytes == 512 * GM_MIB);
    /* Gemma-2: only every other layer is windowed. 21 layers x 4096 + 21 x 8192 tokens. */
    in.model = gm_model_catalog_find("gemma-2-9b");
    in.context = 8192;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_true(find(&e, "kv_cache")->bytes == 2ull * 8 * 256 * 2 * (21 * 4096 + 21 * 8192));
    /* Explicit head_dim (gemma-7b: 256, not 3072/16). */
    in.model = gm_model_catalog_find("gemma-7b");
    in.context = 1000;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_true(find(&e, "kv_cache")->bytes == 2ull * 28 * 16 * 256 * 1000 * 2);
}

static void test_blog(void **state)
{
    struct gm_estimate_inputs in;
    struct gm_estimate e;
    struct gm_error err;
    double N = 1543714304.0, A = 4.6894e-4 * N + 1.8494e6;
    (void)state;
    gm_estimate_inputs_init(&in);
    in.mode = GM_EST_TRAIN;
    in.method = GM_METHOD_BLOG;
    in.model = gm_model_catalog_find("qwen2.5-1.5b");
    in.precision = GM_PREC_FP32;
    in.batch = 16;
    in.seq = 256;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    /* N*P + 2NP + max(2NP, A*B*L*P) */
    assert_true(e.peak_allocated_bytes ==
                (uint64_t)llround(3 * N * 4) + (uint64_t)llround(A * 16 * 256 * 4));
    assert_true(fabs((double)e.peak_allocated_bytes / 1e9 - 60.69) < 0.005);
    assert_true(fabs((double)e.peak_allocated_bytes / (double)GM_GIB - 56.52) < 0.005);
    assert_int_equal(e.peak_phase, GM_EST_PHASE_FORWARD_BACKWARD);
    /* The hook-measured A = 5,065,216 gives 101.5 GB. */
    in.activations_per_token = 5065216;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_true(fabs((double)e.peak_allocated_bytes / 1e9 - 101.51) < 0.005);
    /* Batch 2: the optimizer step dominates, total = 5NP. */
    in.activations_per_token = 0;
    in.batch = 2;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_int_equal(e.peak_phase, GM_EST_PHASE_OPTIMIZER_STEP);
    assert_true(e.peak_allocated_bytes == 5 * (uint64_t)llround(N * 4));
    /* Plain numbers work with the blog method. */
    in.model = NULL;
    in.n_params = 1543714304ull;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_true(e.peak_allocated_bytes == 5 * (uint64_t)llround(N * 4));
}

static void test_korthikanti(void **state)
{
    /* A GPT layer with LayerNorm, 4h GELU MLP, MHA, dropout, learned positions: in fp32
     * (16E+2)sbh + (2E+1)as^2b with E = 4, i.e. per token 66h + 9as (paper Table 2 with
     * 4-byte activations); with SDPA the as^2 term is gone. */
    struct gm_model m;
    double h = 1024, a = 16, s = 512, got;
    (void)state;
    m = *gm_model_catalog_find("bert-large-uncased");
    got = est_layer_saved_per_token(&m, 4, 4, true, 512);
    assert_true(fabs(got - (66 * h + 9 * a * s)) < 1e-6);
    got = est_layer_saved_per_token(&m, 4, 4, false, 512);
    assert_true(fabs(got - (66 * h + 4 * a)) < 1e-6);
    /* Gated MLP keeps four I-wide tensors instead of two. */
    m.gated_mlp = true;
    assert_true(est_layer_saved_per_token(&m, 4, 4, false, 512) - got ==
                2.0 * 4 * (double)m.intermediate);
}

static void test_train_phases(void **state)
{
    struct gm_estimate_inputs in;
    struct gm_estimate e;
    struct gm_error err;
    (void)state;
    gm_estimate_inputs_init(&in);
    in.mode = GM_EST_TRAIN;
    in.model = gm_model_catalog_find("llama-3-8b");
    in.seq = 512;
    in.batch = 1;
    /* Small batch: the optimizer step dominates (weights + grads + state + temporaries). */
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_int_equal(e.peak_phase, GM_EST_PHASE_OPTIMIZER_STEP);
    assert_non_null(find(&e, "weights_fp32_master"));
    assert_non_null(find(&e, "weights_16bit_autocast_copies"));
    assert_true(find(&e, "optimizer_state")->bytes == 8 * e.n_params);
    assert_true(find(&e, "optimizer_step_temporaries")->bytes == 4 * e.n_params);
    assert_true(e.optimizer_step_bytes == 20 * e.n_params);
    assert_true(e.peak_reserved_bytes >= e.peak_allocated_bytes);
    assert_true(e.device_bytes ==
                e.peak_reserved_bytes + in.cuda_context_bytes + in.workspace_bytes);
    /* Large batch: forward/backward dominates; the logits term scales with B*L*V. */
    in.batch = 16;
    in.seq = 4096;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_int_equal(e.peak_phase, GM_EST_PHASE_FORWARD_BACKWARD);
    assert_true(find(&e, "logits_and_loss")->bytes == 16ull * 4096 * 128256 * (2 + 4 + 4));
    /* Checkpointing shrinks activations by more than 8x here (32 layers). */
    {
        uint64_t full = find(&e, "activations")->bytes;
        in.grad_ckpt = GM_CKPT_FULL;
        assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
        assert_true(find(&e, "activations")->bytes * 8 < full);
    }
    /* Pure bf16: 2 bytes weights, grads; Adam state 4 bytes; no master copy. */
    in.precision = GM_PREC_BF16;
    in.grad_ckpt = GM_CKPT_NONE;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_null(find(&e, "weights_fp32_master"));
    assert_true(find(&e, "weights")->bytes == 2 * e.n_params);
    assert_true(find(&e, "optimizer_state")->bytes == 4 * e.n_params);
    /* Fused AdamW has no step temporaries; SGD no state. */
    in.optim_impl = GM_OPTIM_FUSED;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_null(find(&e, "optimizer_step_temporaries"));
    in.optimizer = GM_OPT_SGD;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
    assert_null(find(&e, "optimizer_state"));
    /* Eager attention adds the s*s scores. */
    {
        uint64_t sdpa;
        in.optimizer = GM_OPT_ADAMW;
        in.batch = 1;
        in.seq = 2048;
        assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
        sdpa = find(&e, "activations")->bytes;
        in.attention = GM_ATTN_EAGER;
        assert_int_equal(gm_estimate_run(&in, &e, &err), GM_OK);
        assert_true(find(&e, "activations")->bytes > sdpa + 32ull * 32 * 2048 * 2048 * 4);
    }
}

static void test_bad_inputs(void **state)
{
    struct gm_estimate_inputs in;
    struct gm_estimate e;
    struct gm_error err;
    (void)state;
    gm_estimate_inputs_init(&in);
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_ERR_INVALID); /* nothing given */
    in.n_params = (uint64_t)1 << 60;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_ERR_INVALID);
    in.n_params = 1000;
    in.batch = 0;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_ERR_INVALID);
    in.batch = 1;
    in.weight_bits = -1;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_ERR_INVALID);
    in.weight_bits = 16;
    in.mode = GM_EST_TRAIN; /* arch method without a model */
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_ERR_INVALID);
    in.mode = GM_EST_INFER;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_ERR_INVALID);
    /* Encoders have no KV cache. */
    in.model = gm_model_catalog_find("bert-base-uncased");
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_ERR_INVALID);
    /* Absurd but individually allowed sizes: the total would pass 2^64. */
    in.model = gm_model_catalog_find("llama-3.1-405b");
    in.batch = (uint64_t)1 << 20;
    in.context = (uint64_t)1 << 26;
    assert_int_equal(gm_estimate_run(&in, &e, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "2^64"));
}

static void test_components_limit(void **state)
{
    struct gm_estimate e;
    struct gm_error err;
    (void)state;
    memset(&e, 0, sizeof(e));
    for (int i = 0; i < GM_EST_MAX_COMPONENTS; i++)
        assert_int_equal(
            gm_estimate_add_component(&e, "x", 1, GM_EST_PHASE_PREFILL, false, NULL, &err), GM_OK);
    assert_int_equal(gm_estimate_add_component(&e, "x", 1, GM_EST_PHASE_PREFILL, false, NULL, &err),
                     GM_ERR_LIMIT);
    for (int i = 0; i < GM_EST_MAX_ASSUMPTIONS + 3; i++)
        gm_estimate_assume(&e, "assumption %d", i);
    assert_int_equal(e.n_assumptions, GM_EST_MAX_ASSUMPTIONS);
}

static void test_gpus(void **state)
{
    (void)state;
    assert_non_null(gm_gpu_find("H100"));
    assert_true(gm_gpu_find("h100")->memory_bytes == 81559 * GM_MIB);
    assert_true(gm_gpu_find("A100-80GB")->memory_bytes == 80 * GM_GIB);
    assert_true(gm_gpu_find("rtx-4090")->memory_bytes == 24564 * GM_MIB);
    assert_null(gm_gpu_find("voodoo2"));
    for (size_t i = 0; i < gm_gpu_catalog_count(); i++)
        assert_true(gm_gpu_catalog_get(i)->memory_bytes >= 8 * GM_GIB);
    assert_string_equal(gm_est_phases_name(GM_EST_PHASE_TRAIN_ALL), "persistent");
    assert_string_equal(gm_est_phases_name(GM_EST_PHASE_OPTIMIZER_STEP), "optimizer_step");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weights_7b),
        cmocka_unit_test(test_kv_cache),
        cmocka_unit_test(test_blog),
        cmocka_unit_test(test_korthikanti),
        cmocka_unit_test(test_train_phases),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_components_limit),
        cmocka_unit_test(test_gpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
