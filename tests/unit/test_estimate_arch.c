/* SPDX-License-Identifier: MIT */
/* test_estimate_arch.c - the estimator on encoders, encoder-decoders, MoE/MLA layouts and
 * weight formats: KV layouts per engine (MLA latent, decompressed K/V, replicated KV heads, sliding
 * windows), encoder and encoder-decoder inference, weight formats against the published
 * checkpoints' sizes, and the refusals around quantised weights. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumem/estimate.h"
#include "gpumem/units.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct gm_estimate *est;

static const struct gm_est_component *find(const struct gm_estimate *e, const char *name)
{
    for (size_t i = 0; i < e->n_components; i++)
        if (strcmp(e->components[i].name, name) == 0)
            return &e->components[i];
    return NULL;
}

static void infer_job(struct gm_job *j, const char *model)
{
    gm_job_init(j);
    j->mode = GM_EST_INFER;
    j->model.model = gm_model_catalog_find(model);
    assert_non_null(j->model.model);
}

static void vllm_job(struct gm_job *j, const char *model, uint64_t tp, uint64_t max_len)
{
    struct gm_error err;
    infer_job(j, model);
    j->engine.kind = GM_ENGINE_VLLM;
    j->parallel.tp = tp;
    j->engine.vllm.max_model_len = max_len;
    j->workload.context = max_len;
    assert_int_equal(gm_job_set(j, "gpu", "H200", &err), GM_OK);
}

/* DeepSeek-V3 (MLA): vLLM caches one latent of kv_lora_rank + qk_rope_head_dim = 512 + 64
 * values per token and layer, bf16, on every GPU at any tp: 576 x 61 x 2 = 70,272 B per
 * token, 2,302,672,896 B for 32k tokens (vLLM's MLAAttentionSpec). */
static void test_mla_kv(void **state)
{
    struct gm_job j;
    struct gm_error err;
    (void)state;
    for (uint64_t tp = 1; tp <= 8; tp *= 2) {
        vllm_job(&j, "deepseek-v3", tp, 32768);
        j.parallel.gpus = tp;
        assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
        assert_int_equal(est->serving.kv_bytes_per_token, (512 + 64) * 61 * 2);
        assert_int_equal(est->serving.kv_bytes_per_token * 32768ull, 2302672896ull);
    }
    /* fp8 cache: half */
    vllm_job(&j, "deepseek-v3", 8, 32768);
    j.numerics.kv_dtype = GM_DTYPE_F8_E4M3;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(est->serving.kv_bytes_per_token, (512 + 64) * 61);
    /* transformers keeps the decompressed per-head keys (128 + 64) and values (128):
     * 61 x 128 x 320 x 2 = 4,997,120 B per token */
    infer_job(&j, "deepseek-v3");
    j.workload.context = 1000;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(find(est, "kv_cache")->bytes, 4997120ull * 1000);
    /* llama.cpp caches the latent once (the V cache a view of K): f16, 576 x 61 x 2 */
    {
        uint64_t b = 0;
        assert_int_equal(gm_llamacpp_kv_bytes(j.model.model, 1, 1000, &b, &err), GM_OK);
        assert_int_equal(b, 576ull * 61 * 2 * 1000);
    }
}

/* GQA under tensor parallelism: KV heads split, and replicated once tp exceeds them
 * (vLLM's get_num_kv_heads: max(1, kv_heads / tp)). */
static void test_gqa_tp_kv(void **state)
{
    struct gm_job j;
    struct gm_error err;
    (void)state;
    vllm_job(&j, "llama-3-70b", 4, 8192);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(est->serving.kv_bytes_per_token, 2ull * 80 * 2 * 128 * 2);
    vllm_job(&j, "llama-3-70b", 8, 8192);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(est->serving.kv_bytes_per_token, 2ull * 80 * 1 * 128 * 2);
    /* multi-query (gpt_bigcode): one KV head in transformers' cache */
    infer_job(&j, "starcoderbase-1b");
    j.workload.context = 4096;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(find(est, "kv_cache")->bytes, 2ull * 24 * 1 * 128 * 4096 * 4);
}

/* Sliding windows where the engine sizes them: vLLM's hybrid allocator (a sliding layer
 * holds cdiv(min(window - 1 + max_num_batched_tokens, len), 16) + 1 blocks of 16 per
 * request) and llama.cpp's iswa cache (window + n_ubatch cells, padded to 256). */
static void test_sliding_kv(void **state)
{
    struct gm_job j;
    struct gm_error err;
    const uint64_t per_layer = 2 * 1 * 256 * 2; /* gemma-3-1b: 1 KV head of 256, bf16 */
    uint64_t held = ((511 + 8192 + 15) / 16 + 1) * 16, want;
    (void)state;
    vllm_job(&j, "gemma-3-1b", 1, 32768);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    want = (4 * per_layer * 32768 + 22 * per_layer * held) / 32768;
    assert_int_equal(est->serving.kv_bytes_per_token, want);
    assert_true(est->serving.kv_bytes_per_token < 26 * per_layer);
    /* llama.cpp: 4 global layers x 32768 cells + 22 window layers x 1024 cells, f16 */
    {
        uint64_t b = 0;
        assert_int_equal(gm_llamacpp_kv_bytes(j.model.model, 1, 32768, &b, &err), GM_OK);
        assert_int_equal(b, 4 * per_layer * 32768 + 22 * per_layer * 1024);
    }
}

/* Whether an assumption of 'e' contains 'text'. */
static bool assumes(const struct gm_estimate *e, const char *text)
{
    for (size_t i = 0; i < e->n_assumptions; i++)
        if (strstr(e->assumptions[i], text))
            return true;
    return false;
}

/* gpt-oss's MXFP4 checkpoint, tensor by tensor as openai/gpt-oss-20b stores it: per layer
 * the experts' gate_up_proj_blocks (E, 2I, h/32, 16 bytes) with gate_up_proj_scales
 * (E, 2I, h/32, one e8m0 byte) and down_proj_blocks (E, h, I/32, 16) with down_proj_scales
 * (E, h, I/32); everything else (attention with sinks, router, biases, norms, embeddings,
 * lm_head) bf16.  The model card (arXiv 2508.10925, table 1) gives the checkpoints as 12.8
 * and 60.8 GiB. */
static void test_gpt_oss_mxfp4_weights(void **state)
{
    static const struct {
        const char *model;
        uint64_t layers, experts;
        double card_gib;
    } rows[] = {{"gpt-oss-20b", 24, 32, 12.8}, {"gpt-oss-120b", 36, 128, 60.8}};
    const uint64_t h = 2880, I = 2880;
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct gm_job j;
        struct gm_error err;
        struct gm_param_counts pc;
        uint64_t E = rows[i].experts, L = rows[i].layers;
        uint64_t blocks = L * E * (2 * I * (h / 32) * 16 + h * (I / 32) * 16);
        uint64_t scales = L * E * (2 * I * (h / 32) + h * (I / 32));
        uint64_t expert_weights = L * E * (2 * I * h + h * I), want;
        gm_job_init(&j);
        j.model.model = gm_model_catalog_find(rows[i].model);
        assert_non_null(j.model.model);
        assert_int_equal(gm_model_count_params(j.model.model, &pc, &err), GM_OK);
        want = blocks + scales + (pc.total - expert_weights) * 2;
        assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
        if (est->weight_bytes != want)
            fail_msg("%s: %llu B, the checkpoint's tensors %llu B", rows[i].model,
                     (unsigned long long)est->weight_bytes, (unsigned long long)want);
        assert_true(fabs((double)est->weight_bytes / GM_GIB - rows[i].card_gib) < 0.05);
    }
}

/* NVFP4 as the two producers write it: a ModelOpt checkpoint (quant_method modelopt,
 * quant_algo NVFP4, exclude_modules) and compressed-tensors' nvfp4-pack-quantized (float
 * weights of 4 bits in groups of 16).  One out x in weight: n/2 packed bytes + one fp8 scale
 * per 16 inputs of a row + the fp32 weight_scale_2 and input_scale (vLLM modelopt.py
 * ModelOptNvFp4LinearMethod.create_weights); lm_head and embeddings stay bf16. */
static void test_nvfp4_weights(void **state)
{
    static const char *const configs[] = {
        "{\"model_type\": \"llama\", \"hidden_size\": 4096, \"num_hidden_layers\": 2, "
        "\"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"intermediate_size\": 14336, "
        "\"vocab_size\": 128256, \"torch_dtype\": \"bfloat16\", \"quantization_config\": "
        "{\"quant_method\": \"modelopt\", \"quant_algo\": \"NVFP4\", \"group_size\": 16, "
        "\"exclude_modules\": [\"lm_head\"]}}",
        "{\"model_type\": \"llama\", \"hidden_size\": 4096, \"num_hidden_layers\": 2, "
        "\"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"intermediate_size\": 14336, "
        "\"vocab_size\": 128256, \"torch_dtype\": \"bfloat16\", \"quantization_config\": "
        "{\"quant_method\": \"compressed-tensors\", \"format\": \"nvfp4-pack-quantized\", "
        "\"config_groups\": {\"group_0\": {\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 4, "
        "\"type\": \"float\", \"strategy\": \"tensor_group\", \"group_size\": 16}}}, "
        "\"ignore\": [\"lm_head\"]}}",
    };
    const uint64_t h = 4096, I = 14336, kv = 1024, V = 128256, L = 2;
    /* (out, in) of the matrices of one layer: q, k, v, o, gate, up, down */
    const uint64_t shapes[7][2] = {{h, h}, {kv, h}, {kv, h}, {h, h}, {I, h}, {I, h}, {h, I}};
    uint64_t want = 2 * (2 * V * h + (2 * L + 1) * h); /* embeddings, lm_head, norms: bf16 */
    (void)state;
    for (size_t k = 0; k < 7; k++)
        want += L * (shapes[k][0] * shapes[k][1] / 2 + shapes[k][0] * (shapes[k][1] / 16) + 8);
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        struct gm_model m;
        struct gm_job j;
        struct gm_error err;
        assert_int_equal(gm_model_parse_hf_config(configs[i], strlen(configs[i]), &m, &err), GM_OK);
        assert_int_equal(m.quant.method, GM_QUANT_NVFP4);
        gm_job_init(&j);
        j.model.model = &m;
        assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
        assert_int_equal(est->weight_bytes, want);
    }
}

/* FP8 block-quantised weights as DeepSeek-V3's checkpoint stores them (config.json
 * quantization_config: quant_method fp8, weight_block_size [128, 128]): each out x in Linear
 * one e4m3 byte per weight and an fp32 scale per 128 x 128 block, ceil(out / 128) x
 * ceil(in / 128) of them (deepseek-ai/DeepSeek-V3 inference/model.py at 1ea5a1a, Linear:
 * weight_scale_inv / scale of (scale_out_features, scale_in_features), float32); embeddings,
 * norms and lm_head stay bf16.  A block size that does not divide a side rounds up: 1000
 * wide layers with 64 x 64 blocks hold 16 x 16 scales per 1000 x 1000 matrix. */
static void test_fp8_block_weights(void **state)
{
    static const struct {
        uint64_t h, I, heads, kv_heads, block;
    } cases[] = {{4096, 14336, 32, 8, 128}, {1000, 3000, 8, 8, 64}};
    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const uint64_t h = cases[c].h, I = cases[c].I, V = 32000, L = 2, bs = cases[c].block;
        const uint64_t kv = cases[c].kv_heads * (h / cases[c].heads);
        const uint64_t shapes[7][2] = {{h, h}, {kv, h}, {kv, h}, {h, h}, {I, h}, {I, h}, {h, I}};
        uint64_t want = 2 * (2 * V * h + (2 * L + 1) * h);
        char config[768];
        struct gm_model m;
        struct gm_job j;
        struct gm_error err;
        for (size_t k = 0; k < 7; k++)
            want += L * (shapes[k][0] * shapes[k][1] +
                         ((shapes[k][0] + bs - 1) / bs) * ((shapes[k][1] + bs - 1) / bs) * 4);
        snprintf(config, sizeof config,
                 "{\"model_type\": \"llama\", \"hidden_size\": %llu, \"num_hidden_layers\": 2, "
                 "\"num_attention_heads\": %llu, \"num_key_value_heads\": %llu, "
                 "\"intermediate_size\": %llu, \"vocab_size\": 32000, \"torch_dtype\": "
                 "\"bfloat16\", \"quantization_config\": {\"quant_method\": \"fp8\", "
                 "\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", "
                 "\"weight_block_size\": [%llu, %llu]}}",
                 (unsigned long long)h, (unsigned long long)cases[c].heads,
                 (unsigned long long)cases[c].kv_heads, (unsigned long long)I,
                 (unsigned long long)bs, (unsigned long long)bs);
        assert_int_equal(gm_model_parse_hf_config(config, strlen(config), &m, &err), GM_OK);
        assert_int_equal(m.quant.method, GM_QUANT_FP8);
        gm_job_init(&j);
        j.model.model = &m;
        assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
        assert_int_equal(est->weight_bytes, want);
    }
}

/* DeepSeek-V3.2 adds a sparse-attention indexer to V3's layers (DeepSeek-V3.2-Exp
 * inference/model.py Indexer: wq_b q_lora_rank -> 64 x 128, wk 7168 -> 128, k_norm LayerNorm
 * (weight and bias), weights_proj 7168 -> 64), and vLLM caches one indexer key per token and
 * layer beside the MLA latent: 128 fp8 values + one fp32 scale = 132 B
 * (DeepseekV32IndexerCache), on every GPU. */
static void test_deepseek_v32_indexer(void **state)
{
    struct gm_job j;
    struct gm_error err;
    struct gm_param_counts v3, v32;
    const uint64_t indexer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64;
    (void)state;
    assert_int_equal(gm_model_count_params(gm_model_catalog_find("deepseek-v3"), &v3, &err), GM_OK);
    assert_int_equal(gm_model_count_params(gm_model_catalog_find("deepseek-v3.2"), &v32, &err),
                     GM_OK);
    assert_int_equal(v32.total, v3.total + 61 * indexer);
    for (uint64_t tp = 1; tp <= 8; tp *= 8) {
        vllm_job(&j, "deepseek-v3.2", tp, 32768);
        j.parallel.gpus = tp;
        assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
        assert_int_equal(est->serving.kv_bytes_per_token, 61 * ((512 + 64) * 2 + 132));
        assert_true(assumes(est, "DeepSeek-V3.2 indexer keys: 132 B per token and layer"));
    }
}

/* A vision-language job: --images with --image-size put each image's tokens in the context
 * once, however often the job is resolved (the report resolves it before the run does); vLLM
 * V1's profile run holds the dummy encoder outputs (encoder_cache["tmp"]) of as many
 * largest-size images as max(max_num_batched_tokens, one image) holds, through the language
 * model's dummy run: LLaVA-1.5 at 2048 batched tokens 3 x 576 tokens, Qwen2.5-VL one image of
 * 16384 tokens (max_pixels), x hidden x 2 B, on top of the text model's profile. */
static void test_vision_language_jobs(void **state)
{
    struct gm_job j;
    struct gm_error err;
    struct gm_estimate_report *r = NULL;
    uint64_t act_text, act_vl;
    (void)state;
    infer_job(&j, "qwen2.5-vl-7b");
    j.workload.context = 100;
    assert_int_equal(gm_job_set(&j, "images", "2", &err), GM_OK);
    assert_int_equal(gm_job_set(&j, "image-size", "1280x720", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(assumes(est, "2 image(s) of 1280 x 720 pixels per sequence: 1196 tokens each"));
    assert_int_equal(gm_estimate_report_run(&j, &r, &err), GM_OK);
    assert_int_equal(r->job.workload.context, 100 + 2 * 1196);
    gm_estimate_report_free(r);
    assert_int_equal(gm_job_set(&j, "image-size", "wide", &err), GM_ERR_INVALID);
    /* a model without a tower gpumem reads refuses images rather than ignoring them */
    infer_job(&j, "llama-3-8b");
    assert_int_equal(gm_job_set(&j, "images", "1", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "has no vision tower"));

    vllm_job(&j, "llava-1.5-7b", 1, 4096);
    assert_int_equal(gm_job_set(&j, "max-num-batched-tokens", "2048", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    act_vl = est->serving.activation_peak_bytes;
    {
        struct gm_model text = *gm_model_catalog_find("llava-1.5-7b");
        text.vision.kind = GM_VISION_NONE;
        j.model.model = &text;
        assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
        act_text = est->serving.activation_peak_bytes;
    }
    assert_int_equal(act_vl - act_text, 3ull * 576 * 4096 * 2);

    vllm_job(&j, "qwen2.5-vl-7b", 1, 32768);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(assumes(est, "1 dummy image(s) of 16384 tokens encoded and held"));
}

/* Training an encoder-decoder (transformers T5ForConditionalGeneration): the encoder over
 * --seq source tokens, the decoder over --target-seq target tokens; the loss is the model's
 * CrossEntropyLoss on the lm_logits of the target tokens (no shift, no upcast of its own:
 * logits + autocast's fp32 cast + fp32 log-softmax = 2 + 8 B per logit), not a causal LM's.
 * A target as long as the source is the old single-length job; a shorter one shrinks only
 * the decoder's share. */
static void test_seq2seq_target_length(void **state)
{
    struct gm_job j;
    struct gm_error err;
    uint64_t same, shorter, loss_same, loss_short;
    (void)state;
    gm_job_init(&j);
    j.mode = GM_EST_TRAIN;
    j.model.model = gm_model_catalog_find("t5-large");
    j.workload.seq = 512;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    same = find(est, "activations")->bytes;
    loss_same = find(est, "logits_and_loss")->bytes;
    assert_int_equal(loss_same, 10ull * 512 * 32128);
    assert_true(assumes(est, "seq2seq loss over the B*T target tokens"));
    assert_false(assumes(est, "ForCausalLMLoss"));
    assert_int_equal(gm_job_set(&j, "target-seq", "512", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(find(est, "activations")->bytes, same);
    assert_int_equal(gm_job_set(&j, "target-seq", "128", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    shorter = find(est, "activations")->bytes;
    loss_short = find(est, "logits_and_loss")->bytes;
    assert_int_equal(loss_short, 10ull * 128 * 32128);
    assert_true(assumes(est, "source 512 / target 128 tokens"));
    /* the encoder's share stays and the decoder keeps the source's cross-attention keys,
     * values and scores: a quarter of the target saves less than three quarters */
    assert_true(shorter < same && shorter > same / 4);
}

/* Qwen3-Next: 3 of every 4 layers are Gated DeltaNet linear attention (layer_types), which
 * keep a fixed recurrent state (value heads x key dim x value dim) and a convolution state
 * over the q, k, v channels per sequence instead of a KV cache (modular_qwen3_next.py
 * Qwen3NextGatedDeltaNet, Qwen3NextDynamicCache; vLLM's MambaSpec with kernel - 1 columns,
 * heads split by tp).  Parameters from the module shapes: gated attention (q_proj doubled)
 * with q/k norms on the full-attention layers; in_proj_qkvz, in_proj_ba, a bias-free
 * depthwise conv1d, dt_bias, A_log, a gated RMSNorm and out_proj on the others; qwen2-moe
 * experts with a gated shared expert. */
static void test_qwen3_next_linear_attention(void **state)
{
    static const char cfg[] =
        "{\"model_type\": \"qwen3_next\", \"hidden_size\": 2048, \"num_hidden_layers\": 8, "
        "\"num_attention_heads\": 16, \"num_key_value_heads\": 2, \"head_dim\": 256, "
        "\"intermediate_size\": 5120, \"moe_intermediate_size\": 512, "
        "\"shared_expert_intermediate_size\": 512, \"num_experts\": 512, "
        "\"num_experts_per_tok\": 10, \"vocab_size\": 151936, \"tie_word_embeddings\": false, "
        "\"linear_num_key_heads\": 16, \"linear_num_value_heads\": 32, "
        "\"linear_key_head_dim\": 128, \"linear_value_head_dim\": 128, "
        "\"linear_conv_kernel_dim\": 4, \"full_attention_interval\": 4}";
    const uint64_t h = 2048, V = 151936, kd = 16 * 128, vd = 32 * 128, conv = 2 * kd + vd;
    const uint64_t attn = h * 16 * 256 * 2 + 2 * h * 2 * 256 + 16 * 256 * h + 2 * 256;
    const uint64_t gdn = h * (2 * kd + 2 * vd) + h * 64 + conv * 4 + 2 * 32 + 128 + vd * h;
    const uint64_t moe = 512 * 3 * h * 512 + 512 * h + 3 * h * 512 + h;
    struct gm_model m;
    struct gm_param_counts pc;
    struct gm_job j;
    struct gm_error err;
    const struct gm_est_component *c;
    (void)state;
    assert_int_equal(gm_model_parse_hf_config(cfg, strlen(cfg), &m, &err), GM_OK);
    assert_int_equal(m.n_linear_layers, 6);
    assert_int_equal(gm_model_count_params(&m, &pc, &err), GM_OK);
    assert_int_equal(pc.total, 2 * V * h + h + 8 * 2 * h + 2 * attn + 6 * gdn + 8 * moe);

    /* transformers: KV for 2 layers, the states of 6 (fp32 recurrent, whole-kernel conv) */
    gm_job_init(&j);
    j.mode = GM_EST_INFER;
    j.model.model = &m;
    j.workload.batch = 2;
    j.workload.context = 1000;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(find(est, "kv_cache")->bytes, 2ull * 2 * 2 * 256 * 1000 * 2 * 2);
    c = find(est, "recurrent_state");
    assert_non_null(c);
    assert_int_equal(c->bytes, 2ull * 6 * (32 * 128 * 128 * 4 + conv * 4 * 2));

    /* vLLM at tp 2: one KV head per GPU in 2 layers; each request's states spread over its
     * max_model_len tokens */
    j.model.model = &m;
    j.engine.kind = GM_ENGINE_VLLM;
    j.parallel.tp = 2;
    j.parallel.gpus = 2;
    j.engine.vllm.max_model_len = 32768;
    j.workload.context = 32768;
    assert_int_equal(gm_job_set(&j, "gpu", "H200", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    {
        uint64_t state_b = 6ull * (32 / 2 * 128 * 128 + conv / 2 * 3) * 2;
        assert_int_equal(est->serving.kv_bytes_per_token,
                         2ull * 2 * 1 * 256 * 2 + (state_b + 32767) / 32768);
    }
    assert_true(assumes(est, "6 Gated DeltaNet layers keep a recurrent and a convolution state"));
}

/* Jamba (modeling_jamba.py): a Mamba mixer on every layer but each 8th from the 4th, MoE
 * MLPs on every other layer.  Parameters from the module shapes (JambaMambaMixer in_proj,
 * conv1d with bias, x_proj, dt_proj with bias, A_log, D, out_proj, dt/B/C RMSNorms); the
 * Mamba layers keep d_inner x d_state and d_inner x d_conv per sequence (transformers'
 * HybridMambaAttentionDynamicCache, model dtype), only the 4 attention layers a KV cache. */
static void test_jamba_mamba_layers(void **state)
{
    const uint64_t h = 4096, di = 8192, V = 65536;
    const uint64_t mamba = 2 * di * h + di * 4 + di + (256 + 32) * di + di * 256 + di + di * 16 +
                           di + h * di + 256 + 32;
    const uint64_t attn = h * h + 2 * h * 1024 + h * h, mlp = 3 * h * 14336;
    struct gm_param_counts pc;
    struct gm_job j;
    struct gm_error err;
    (void)state;
    assert_int_equal(gm_model_count_params(gm_model_catalog_find("jamba-v0.1"), &pc, &err), GM_OK);
    assert_int_equal(pc.total, 2 * V * h + h + 32 * 2 * h + 4 * attn + 28 * mamba +
                                   16 * (16 * mlp + 16 * h) + 16 * mlp);
    infer_job(&j, "jamba-v0.1");
    j.workload.context = 100000;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(find(est, "kv_cache")->bytes, 4ull * 2 * 8 * 128 * 100000 * 2);
    assert_int_equal(find(est, "recurrent_state")->bytes, 28ull * (di * 16 + di * 4) * 2);
}

/* Nemotron-H (modeling_nemotron_h.py NemotronHBlock, NemotronHMamba2Mixer): each block one
 * RMSNorm and one mixer as hybrid_override_pattern says.  A Mamba-2 mixer: in_proj h ->
 * gate d_inner + conv channels (d_inner + 2 groups x d_state) + one dt per head, a conv1d
 * with bias, dt_bias/A_log/D per head, the gated RMSNorm of d_inner, out_proj; attention
 * blocks plain GQA; MLP blocks up/down (relu2).  Only the 4 '*' blocks keep KV; the 24 'M'
 * blocks a d_inner x d_state recurrent state and the conv channels x d_conv (transformers)
 * or x (d_conv - 1) (vLLM mamba2_state_shape) per sequence. */
static void test_nemotron_h_layer_pattern(void **state)
{
    static const char cfg[] =
        "{\"model_type\": \"nemotron_h\", \"hidden_size\": 4096, \"num_hidden_layers\": 52, "
        "\"hybrid_override_pattern\": "
        "\"M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-\", "
        "\"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"attention_head_dim\": 128, "
        "\"intermediate_size\": 21504, \"mlp_hidden_act\": \"relu2\", \"vocab_size\": 131072, "
        "\"mamba_num_heads\": 128, \"mamba_head_dim\": 64, \"n_groups\": 8, "
        "\"ssm_state_size\": 128, \"conv_kernel\": 4, \"tie_word_embeddings\": false, "
        "\"torch_dtype\": \"bfloat16\"}";
    const uint64_t h = 4096, V = 131072, di = 128 * 64, conv = di + 2 * 8 * 128;
    const uint64_t mamba = h * (di + conv + 128) + conv * 4 + conv + 3 * 128 + di + di * h;
    const uint64_t attn = 2 * h * h + 2 * h * 1024, mlp = 2 * h * 21504;
    struct gm_model m;
    struct gm_param_counts pc;
    struct gm_job j;
    struct gm_error err;
    (void)state;
    assert_int_equal(gm_model_parse_hf_config(cfg, strlen(cfg), &m, &err), GM_OK);
    assert_int_equal(m.n_linear_layers, 24);
    assert_int_equal(m.act, GM_ACT_RELU); /* relu2: one intermediate, no gate */
    assert_false(m.gated_mlp);
    assert_int_equal(m.norms_per_layer, 1);
    assert_int_equal(gm_model_attention_layers(&m), 4);
    assert_int_equal(gm_model_mlp_layers(&m), 24);
    assert_int_equal(gm_model_count_params(&m, &pc, &err), GM_OK);
    assert_int_equal(pc.total, 2 * V * h + 24 * mamba + 4 * attn + 24 * mlp + 52 * h + h);
    /* the catalog entry is the same config */
    assert_int_equal(gm_model_count_params(gm_model_catalog_find("nemotron-h-8b"), &pc, &err),
                     GM_OK);
    assert_int_equal(pc.total, 2 * V * h + 24 * mamba + 4 * attn + 24 * mlp + 52 * h + h);
    /* LoRA on q, k, v, o exists in the 4 attention blocks only; on up/down in the 24 MLPs */
    assert_int_equal(gm_lora_params(&m, 16, GM_LORA_Q | GM_LORA_K | GM_LORA_V | GM_LORA_O),
                     4ull * 16 * (2 * (h + h) + 2 * (h + 1024)));
    assert_int_equal(gm_lora_params(&m, 16, GM_LORA_UP | GM_LORA_DOWN),
                     24ull * 16 * 2 * (h + 21504));

    infer_job(&j, "nemotron-h-8b");
    j.workload.batch = 2;
    j.workload.context = 8192;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(find(est, "kv_cache")->bytes, 2ull * 4 * 2 * 8 * 128 * 8192 * 2);
    assert_int_equal(find(est, "recurrent_state")->bytes, 2ull * 24 * (di * 128 + conv * 4) * 2);

    /* vLLM at tp 2: the 8 groups split, half the heads per GPU, kernel - 1 conv columns */
    vllm_job(&j, "nemotron-h-8b", 2, 8192);
    j.parallel.gpus = 2;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    {
        uint64_t state_b = 24ull * (di / 2 * 128 + conv / 2 * 3) * 2;
        assert_int_equal(est->serving.kv_bytes_per_token,
                         4ull * 2 * 4 * 128 * 2 + (state_b + 8191) / 8192);
    }
    assert_true(assumes(est, "24 Mamba-2 layers keep a recurrent and a convolution state"));

    /* newer configs list the blocks by name (layers_block_type) */
    {
        static const char named[] =
            "{\"model_type\": \"nemotron_h\", \"hidden_size\": 256, \"num_hidden_layers\": 4, "
            "\"layers_block_type\": [\"mamba\", \"mlp\", \"mamba\", \"attention\"], "
            "\"num_attention_heads\": 4, \"intermediate_size\": 512, \"vocab_size\": 1000, "
            "\"mamba_num_heads\": 8, \"mamba_head_dim\": 32, \"mamba_n_groups\": 2}";
        assert_int_equal(gm_model_parse_hf_config(named, strlen(named), &m, &err), GM_OK);
        assert_int_equal(m.n_linear_layers, 2);
        assert_int_equal(gm_model_attention_layers(&m), 1);
        assert_int_equal(gm_model_mlp_layers(&m), 1);
        assert_int_equal(m.mamba_d_inner, 256);
        assert_int_equal(m.mamba_groups, 2);
    }
    /* a mixture-of-experts block is refused, not counted as something else */
    {
        static const char moe[] = "{\"model_type\": \"nemotron_h\", \"hidden_size\": 64, "
                                  "\"num_hidden_layers\": 3, \"hybrid_override_pattern\": \"ME*\", "
                                  "\"num_attention_heads\": 4, \"intermediate_size\": 128, "
                                  "\"vocab_size\": 100, \"mamba_num_heads\": 4}";
        assert_int_equal(gm_model_parse_hf_config(moe, strlen(moe), &m, &err), GM_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "mixture-of-experts"));
    }
    /* a block type it does not know is named as such, not taken for a mixture of experts */
    {
        static const char typo[] =
            "{\"model_type\": \"nemotron_h\", \"hidden_size\": 64, "
            "\"num_hidden_layers\": 3, \"hybrid_override_pattern\": \"MX*\", "
            "\"num_attention_heads\": 4, \"intermediate_size\": 128, "
            "\"vocab_size\": 100, \"mamba_num_heads\": 4}";
        static const char kinds[] = "{\"model_type\": \"nemotron_h\", \"hidden_size\": 64, "
                                    "\"num_hidden_layers\": 2, \"layers_block_type\": "
                                    "[\"mamba\", \"linear\"], \"num_attention_heads\": 4, "
                                    "\"intermediate_size\": 128, \"vocab_size\": 100, "
                                    "\"mamba_num_heads\": 4}";
        assert_int_equal(gm_model_parse_hf_config(typo, strlen(typo), &m, &err), GM_ERR_FORMAT);
        assert_non_null(strstr(err.msg, "unknown block type at position 1"));
        assert_int_equal(gm_model_parse_hf_config(kinds, strlen(kinds), &m, &err), GM_ERR_FORMAT);
        assert_non_null(strstr(err.msg, "layers_block_type[1]"));
    }
    /* Mamba-2 channels that overflow 64 bits (heads x head dim) are refused as absurd */
    {
        static const char huge[] = "{\"model_type\": \"nemotron_h\", \"hidden_size\": 64, "
                                   "\"num_hidden_layers\": 1, \"hybrid_override_pattern\": \"M\", "
                                   "\"num_attention_heads\": 4, \"intermediate_size\": 128, "
                                   "\"vocab_size\": 100, \"mamba_num_heads\": 4294967296, "
                                   "\"mamba_head_dim\": 4294967296}";
        assert_int_equal(gm_model_parse_hf_config(huge, strlen(huge), &m, &err), GM_ERR_FORMAT);
        assert_non_null(strstr(err.msg, "absurd"));
    }
}

/* Falcon-H1 (modeling_falcon_h1.py FalconH1DecoderLayer): every layer runs attention and a
 * Mamba-2 mixer (FalconH1Mixer: no gated norm unless mamba_rms_norm) side by side on the
 * input norm's output, then a SwiGLU MLP behind pre_ff_layernorm; so all 44 layers keep KV
 * and a Mamba state (FalconHybridMambaAttentionDynamicCache: conv channels x d_conv and
 * heads x head dim x d_state, model dtype).  vLLM at tp 2 repeats the single group on each
 * GPU (extra_groups_for_head_shards). */
static void test_falcon_h1_parallel_layers(void **state)
{
    const uint64_t h = 3072, V = 130048, di = 3072, conv = di + 2 * 256;
    const uint64_t mamba = h * (di + conv + 24) + conv * 4 + conv + 3 * 24 + di * h;
    const uint64_t attn = 2 * h * 1536 + 2 * h * 256, mlp = 3 * h * 12288;
    struct gm_param_counts pc;
    struct gm_job j;
    struct gm_error err;
    (void)state;
    assert_int_equal(gm_model_count_params(gm_model_catalog_find("falcon-h1-7b"), &pc, &err),
                     GM_OK);
    assert_int_equal(pc.total, 2 * V * h + 44 * (attn + mamba + mlp + 2 * h) + h);

    infer_job(&j, "falcon-h1-7b");
    j.workload.context = 4096;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(find(est, "kv_cache")->bytes, 44ull * 2 * 2 * 128 * 4096 * 2);
    assert_int_equal(find(est, "recurrent_state")->bytes, 44ull * (di * 256 + conv * 4) * 2);

    vllm_job(&j, "falcon-h1-7b", 2, 32768);
    j.parallel.gpus = 2;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    {
        uint64_t state_b = 44ull * (di / 2 * 256 + (di + 2 * 2 * 256) / 2 * 3) * 2;
        assert_int_equal(est->serving.kv_bytes_per_token,
                         44ull * 2 * 1 * 128 * 2 + (state_b + 32767) / 32768);
    }
}

/* llama.cpp keeps KV in all of Falcon-H1's layers and an f32 recurrent state per sequence
 * (llama_memory_recurrent): a public llama.cpp log of Falcon-H1-1.5B at 32768 cells
 * (GeniePod/genie-claw issue 410) prints "KV buffer size = 768.00 MiB (32768 cells, 24
 * layers, K 384 + V 384)" and "RS buffer size = 72.98 MiB (1 cells, 24 layers, R 0.98 + S
 * 72.00)"; the config's sizes are the transformers falcon_h1 doc's H1-1.5B row. */
static void test_falcon_h1_llamacpp_state(void **state)
{
    static const char cfg[] =
        "{\"model_type\": \"falcon_h1\", \"hidden_size\": 2048, \"num_hidden_layers\": 24, "
        "\"num_attention_heads\": 8, \"num_key_value_heads\": 2, \"head_dim\": 128, "
        "\"intermediate_size\": 4608, \"vocab_size\": 65537, \"mamba_d_state\": 256, "
        "\"mamba_d_conv\": 4, \"mamba_n_groups\": 1, \"mamba_n_heads\": 48, "
        "\"mamba_d_head\": 64, \"mamba_d_ssm\": 3072, \"torch_dtype\": \"bfloat16\"}";
    struct gm_model m;
    struct gm_job j;
    struct gm_error err;
    (void)state;
    assert_int_equal(gm_model_parse_hf_config(cfg, strlen(cfg), &m, &err), GM_OK);
    gm_job_init(&j);
    j.mode = GM_EST_INFER;
    j.model.model = &m;
    j.engine.kind = GM_ENGINE_LLAMACPP;
    j.workload.context = 32768;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(find(est, "kv_cache")->bytes, 768ull << 20);
    assert_int_equal(find(est, "recurrent_state")->bytes, (72ull << 20) + 1032192);
}

/* gpt-oss alternates 128-token windows with full attention (layer_types): vLLM's
 * SlidingWindowSpec holds cdiv(min(127 + 8192, len), 16) + 1 blocks for the 12 sliding
 * layers of the 20b; llama.cpp's iswa cache 128 + 512 cells padded to 256 = 768 for them. */
static void test_gpt_oss_windows_kv(void **state)
{
    struct gm_job j;
    struct gm_error err;
    const uint64_t per_layer = 2 * 8 * 64 * 2; /* 8 KV heads of 64, bf16 */
    const uint64_t len = 131072, held = ((127 + 8192 + 15) / 16 + 1) * 16;
    uint64_t b = 0;
    (void)state;
    vllm_job(&j, "gpt-oss-20b", 1, len);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(est->serving.kv_bytes_per_token,
                     (12 * per_layer * len + 12 * per_layer * held) / len);
    assert_true(assumes(est, "12 sliding-window layers hold at most 128 - 1 + 8192 tokens"));
    assert_int_equal(gm_llamacpp_kv_bytes(j.model.model, 1, 32768, &b, &err), GM_OK);
    assert_int_equal(b, 12 * per_layer * 32768 + 12 * per_layer * 768);
}

/* Llama-4 attends within chunks of 8192 tokens on its RoPE layers (36 of 48) and globally
 * on every fourth: vLLM's ChunkedLocalAttentionSpec holds cdiv(min(8192 + 8192, len), 16)
 * blocks (no extra block, unlike a sliding window); llama.cpp's iswa cache (swa_type
 * CHUNKED, n_swa 8192) 8192 + 512 cells padded to 256 for those layers. */
static void test_llama4_chunked_kv(void **state)
{
    struct gm_job j;
    struct gm_error err;
    const uint64_t per_layer = 2 * 8 * 128 * 2; /* 8 KV heads of 128, bf16 */
    const uint64_t len = 131072, held = (8192 + 8192 + 15) / 16 * 16;
    uint64_t b = 0;
    (void)state;
    vllm_job(&j, "llama-4-scout", 8, len);
    j.parallel.gpus = 8;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(est->serving.kv_bytes_per_token,
                     (12 * per_layer / 8 * len + 36 * per_layer / 8 * held) / len);
    assert_true(assumes(est, "36 chunked-attention layers hold at most 8192 + 8192 tokens"));
    assert_int_equal(gm_llamacpp_kv_bytes(j.model.model, 1, 65536, &b, &err), GM_OK);
    assert_int_equal(b, 12 * per_layer * 65536 + 36 * per_layer * 8704);
}

/* transformers' T5 and gpt-oss classes have no SDPA path: a training or generate() job on
 * them runs eager attention unless --attention says otherwise; a Llama does not, and a
 * serving engine uses its own kernels. */
static void test_eager_follows_model_class(void **state)
{
    struct gm_job j;
    struct gm_error err;
    const struct gm_est_component *c;
    double scores_default, scores_sdpa;
    (void)state;
    gm_job_init(&j);
    j.mode = GM_EST_TRAIN;
    j.model.model = gm_model_catalog_find("t5-small");
    assert_non_null(j.model.model);
    j.workload.seq = 512;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(assumes(est, "attention eager by default: the transformers t5 class"));
    assert_true(assumes(est, "eager, s*s scores saved"));
    c = find(est, "activations");
    assert_non_null(c);
    scores_default = (double)c->bytes;
    assert_int_equal(gm_job_set(&j, "attention", "sdpa", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_false(assumes(est, "attention eager by default"));
    scores_sdpa = (double)find(est, "activations")->bytes;
    assert_true(scores_default > scores_sdpa);

    gm_job_init(&j);
    j.mode = GM_EST_TRAIN;
    j.model.model = gm_model_catalog_find("gpt-oss-20b");
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(assumes(est, "_supports_sdpa = False"));

    gm_job_init(&j);
    j.mode = GM_EST_TRAIN;
    j.model.model = gm_model_catalog_find("llama-3-8b");
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_true(assumes(est, "sdpa/flash, no s*s scores"));

    vllm_job(&j, "gpt-oss-20b", 1, 8192);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(j.memory.attention, GM_ATTN_SDPA);
    assert_false(assumes(est, "attention eager by default"));
}

/* Encoders: one forward pass, no cache; the output grows with batch x tokens; generation
 * and the serving engines are refused. */
static void test_encoder_infer(void **state)
{
    struct gm_job j;
    struct gm_error err;
    uint64_t a0, a1, a2;
    (void)state;
    infer_job(&j, "bert-base-uncased");
    j.workload.batch = 8;
    j.workload.context = 512;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_KV_CACHE), 0);
    assert_int_equal(find(est, "encoder_outputs")->bytes, 8ull * 512 * 768 * 4 + 8 * 768 * 4);
    a1 = est->peak_allocated_bytes;
    j.workload.batch = 16;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    a2 = est->peak_allocated_bytes;
    /* beyond the weights and the cuBLAS workspace, twice the batch keeps twice the bytes */
    a0 = 437928960ull + gm_estimate_kind_bytes(est, GM_KIND_TORCH_WORKSPACE);
    assert_true(a2 > a1 && a2 - a0 > 2 * (a1 - a0) - 1024);
    j.engine.kind = GM_ENGINE_VLLM;
    assert_int_equal(gm_job_set(&j, "gpu", "L4", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "encoder"));
    /* training an encoder: no vocabulary logits */
    gm_job_init(&j);
    j.mode = GM_EST_TRAIN;
    j.model.model = gm_model_catalog_find("roberta-base");
    j.workload.seq = 512;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_null(find(est, "logits_and_loss"));
}

/* Encoder-decoder: the decoder's layers cache the generated tokens (self-attention) and
 * the encoder's output (cross-attention): 2 x 6 decoder layers x 8 heads x 64 x (context +
 * new tokens + the start token) x bytes x sequences for t5-small. */
static void test_seq2seq_infer(void **state)
{
    struct gm_job j;
    struct gm_error err;
    (void)state;
    infer_job(&j, "t5-small");
    j.workload.batch = 4;
    j.workload.context = 512;
    j.workload.new_tokens = 128;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(find(est, "kv_cache")->bytes, 2ull * 6 * 8 * 64 * (512 + 128 + 1) * 4 * 4);
    assert_int_equal(find(est, "encoder_outputs")->bytes, 4ull * 512 * 512 * 4);
    /* training: both stacks' activations and the logits over the target */
    gm_job_init(&j);
    j.mode = GM_EST_TRAIN;
    j.model.model = gm_model_catalog_find("flan-t5-base");
    j.workload.seq = 512;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_non_null(find(est, "logits_and_loss"));
}

/* Weight formats against the published checkpoints (tests/data/estimate/
 * checkpoint_sizes.csv has the sources): the formula values of each scheme. */
static void test_weight_formats(void **state)
{
    static const struct {
        const char *model;
        const char *quant;
        const char *group;
        uint64_t bytes;
    } rows[] = {
        {"llama-3-8b", "gptq", NULL, 5732835328ull},   /* 5.734e9 published */
        {"llama-3-8b", "awq", NULL, 5727854592ull},    /* 5.73e9 */
        {"llama-3-8b", "nf4-dq", NULL, 5702295552ull}, /* 5.70e9 */
        {"mistral-7b", "gptq", NULL, 4155777024ull},   /* 4.16e9 */
        {"mistral-7b", "nf4-dq", NULL, 4125237248ull}, /* 4.13e9 */
        {"qwen2.5-7b", "gptq", NULL, 5575277568ull},   /* 5.58e9 (q/k/v biases fp16) */
        {"llama-2-70b", "gptq", "0", 35318431744ull},  /* 35.3e9, no groups */
    };
    (void)state;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        struct gm_job j;
        struct gm_error err;
        gm_job_init(&j);
        j.model.model = gm_model_catalog_find(rows[i].model);
        assert_int_equal(gm_job_set(&j, "quant", rows[i].quant, &err), GM_OK);
        if (rows[i].group)
            assert_int_equal(gm_job_set(&j, "group-size", rows[i].group, &err), GM_OK);
        assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
        if (est->weight_bytes != rows[i].bytes)
            fail_msg("%s --quant %s: %llu, want %llu", rows[i].model, rows[i].quant,
                     (unsigned long long)est->weight_bytes, (unsigned long long)rows[i].bytes);
    }
}

/* The bitsandbytes schemes differ by their constants; --bits stays a plain override of
 * every parameter (embeddings and lm_head too). */
static void test_format_variants(void **state)
{
    struct gm_job j;
    struct gm_error err;
    uint64_t nf4, nf4dq, int8, bits4;
    (void)state;
    gm_job_init(&j);
    j.model.model = gm_model_catalog_find("llama-3-8b");
    assert_int_equal(gm_job_set(&j, "quant", "nf4", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    nf4 = est->weight_bytes;
    assert_int_equal(gm_job_set(&j, "quant", "nf4-dq", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    nf4dq = est->weight_bytes;
    /* fp32 absmax per 64 weights against 1 B + 4 B per 256 blocks: 0.373 bit per weight */
    assert_true(nf4 > nf4dq);
    assert_int_equal(nf4 - nf4dq, 6979321856ull / 64 * 3 - 6979321856ull / 64 / 256 * 4);
    assert_int_equal(gm_job_set(&j, "quant", "int8", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    int8 = est->weight_bytes;
    assert_true(int8 > 8030261248ull && int8 < 9100000000ull);
    gm_job_init(&j);
    j.model.model = gm_model_catalog_find("llama-3-8b");
    assert_int_equal(gm_job_set(&j, "bits", "4", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    bits4 = est->weight_bytes;
    assert_int_equal(bits4, 8030261248ull / 2);
    /* --bits and --quant exclude each other */
    assert_int_equal(gm_job_set(&j, "quant", "gptq", &err), GM_OK);
    assert_int_equal(gm_job_check(&j, &err), GM_ERR_INVALID);
}

/* Quantised weights take no gradients: full fine-tuning is refused (pointing to LoRA and
 * QLoRA); adapters on a quantised base keep it as stored; --qlora with a GPTQ checkpoint
 * and --quant over a quantised checkpoint are refused. */
static void test_quant_refusals(void **state)
{
    struct gm_job j;
    struct gm_model m;
    struct gm_error err;
    char path[1024];
    const char *src = getenv("GM_SOURCE_DIR");
    uint64_t lora_gptq;
    (void)state;
    gm_job_init(&j);
    j.mode = GM_EST_TRAIN;
    j.model.model = gm_model_catalog_find("llama-3-8b");
    assert_int_equal(gm_job_set(&j, "quant", "gptq", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--qlora"));
    assert_int_equal(gm_job_set(&j, "lora", NULL, &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    lora_gptq = find(est, "weights")->bytes;
    assert_int_equal(lora_gptq, 5732835328ull);
    /* a GPTQ checkpoint's config */
    snprintf(path, sizeof path, "%s/tests/data/configs/quant/llama-3.1-8b-instruct-gptq-int4.json",
             src && *src ? src : ".");
    assert_int_equal(gm_model_load_hf_config(path, &m, &err), GM_OK);
    assert_int_equal(m.quant.method, GM_QUANT_GPTQ);
    assert_true(m.quant.desc_act);
    gm_job_init(&j);
    j.mode = GM_EST_TRAIN;
    j.model.model = &m;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID);
    assert_int_equal(gm_job_set(&j, "qlora", NULL, &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--lora"));
    gm_job_init(&j);
    j.model.model = &m;
    assert_int_equal(gm_job_set(&j, "quant", "awq", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "already gptq"));
    /* from the config alone, the checkpoint's bytes come from the scheme */
    gm_job_init(&j);
    j.model.model = &m;
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(est->weight_bytes, 5732835328ull);
}

/* The suggestions for serving a model that does not fit name weight formats (each one run
 * through the pipeline) where the layout is known, and plain --bits where it is not. */
static void test_format_suggestions(void **state)
{
    struct gm_job j;
    struct gm_error err;
    struct gm_est_suggestions s;
    bool fp8 = false, awq = false, bits = false;
    (void)state;
    infer_job(&j, "llama-3.1-70b");
    j.engine.kind = GM_ENGINE_VLLM;
    j.parallel.tp = 2;
    assert_int_equal(gm_job_set(&j, "gpu", "H100", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_false(est->fit.fits);
    assert_int_equal(gm_estimate_suggest(&j, est, &s, &err), GM_OK);
    for (size_t i = 0; i < s.n; i++) {
        fp8 = fp8 || (!strcmp(s.items[i].change, "--quant fp8") && s.items[i].fits);
        awq = awq || (!strcmp(s.items[i].change, "--quant awq") && s.items[i].fits);
        bits = bits || !strncmp(s.items[i].change, "--bits", 6);
    }
    assert_true(fp8 && awq && !bits);
    gm_est_suggestions_release(&s);
    /* plain numbers: no layout to quantise, --bits it is */
    gm_job_init(&j);
    assert_int_equal(gm_job_set(&j, "parameters", "70B", &err), GM_OK);
    assert_int_equal(gm_job_set(&j, "gpu", "A100-80GB", &err), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
    assert_int_equal(gm_estimate_suggest(&j, est, &s, &err), GM_OK);
    bits = false;
    for (size_t i = 0; i < s.n; i++)
        bits = bits || !strncmp(s.items[i].change, "--bits", 6);
    assert_true(bits);
    gm_est_suggestions_release(&s);
}

/* Every catalog model estimates training and inference; the figures grow with the work and
 * MoE models compute with their active experts. */
static void test_catalog_estimates(void **state)
{
    (void)state;
    for (size_t i = 0; i < gm_model_catalog_count(); i++) {
        const struct gm_model *m = gm_model_catalog_get(i);
        struct gm_job j;
        struct gm_error err;
        uint64_t a, b;
        gm_job_init(&j);
        j.mode = GM_EST_TRAIN;
        j.model.model = m;
        j.workload.seq = 256;
        if (m->quant.method != GM_QUANT_NONE)
            j.memory.adapter = GM_ADAPTER_LORA;
        if (gm_estimate_run(&j, &est, &err) != GM_OK)
            fail_msg("%s --train: %s", m->name, err.msg);
        a = gm_estimate_kind_bytes(est, GM_KIND_ACTIVATIONS);
        j.workload.seq = 512;
        assert_int_equal(gm_estimate_run(&j, &est, &err), GM_OK);
        b = gm_estimate_kind_bytes(est, GM_KIND_ACTIVATIONS);
        if (!(a > 0 && b > a))
            fail_msg("%s: activations %llu at 256 tokens, %llu at 512", m->name,
                     (unsigned long long)a, (unsigned long long)b);
        gm_job_init(&j);
        j.mode = GM_EST_INFER;
        j.model.model = m;
        j.workload.context = 512;
        if (gm_estimate_run(&j, &est, &err) != GM_OK)
            fail_msg("%s --infer: %s", m->name, err.msg);
        if (m->head == GM_HEAD_ENCODER)
            assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_KV_CACHE), 0);
        else
            assert_true(gm_estimate_kind_bytes(est, GM_KIND_KV_CACHE) > 0);
        assert_true(est->peak_allocated_bytes > est->weight_bytes);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mla_kv),
        cmocka_unit_test(test_gqa_tp_kv),
        cmocka_unit_test(test_sliding_kv),
        cmocka_unit_test(test_encoder_infer),
        cmocka_unit_test(test_seq2seq_infer),
        cmocka_unit_test(test_weight_formats),
        cmocka_unit_test(test_format_variants),
        cmocka_unit_test(test_quant_refusals),
        cmocka_unit_test(test_format_suggestions),
        cmocka_unit_test(test_catalog_estimates),
        cmocka_unit_test(test_gpt_oss_mxfp4_weights),
        cmocka_unit_test(test_nvfp4_weights),
        cmocka_unit_test(test_fp8_block_weights),
        cmocka_unit_test(test_deepseek_v32_indexer),
        cmocka_unit_test(test_vision_language_jobs),
        cmocka_unit_test(test_seq2seq_target_length),
        cmocka_unit_test(test_qwen3_next_linear_attention),
        cmocka_unit_test(test_jamba_mamba_layers),
        cmocka_unit_test(test_nemotron_h_layer_pattern),
        cmocka_unit_test(test_falcon_h1_parallel_layers),
        cmocka_unit_test(test_falcon_h1_llamacpp_state),
        cmocka_unit_test(test_gpt_oss_windows_kv),
        cmocka_unit_test(test_llama4_chunked_kv),
        cmocka_unit_test(test_eager_follows_model_class),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
