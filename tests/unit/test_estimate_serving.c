/* SPDX-License-Identifier: MIT */
/* test_estimate_serving.c - serving as users ask for it: --gpus with a sharding engine is
 * tensor parallelism, SGLang's static share and pool, llama.cpp's host offload, the engine
 * command line read (--from) and written (the plan) as the same job, the binding limit of a
 * search, and a sequence length left unstated named instead of spread into a range. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "estimate/estimate_int.h"
#include "gpumem/gpumem.h"

#include "job_settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct gm_estimate *est, *again;

static void run(const struct gm_job *j, struct gm_estimate **e)
{
    struct gm_error err;
    if (gm_estimate_run(j, e, &err) != GM_OK)
        fail_msg("%s", err.msg);
}

static bool assumed(const struct gm_estimate *e, const char *text)
{
    for (size_t i = 0; i < e->n_assumptions; i++)
        if (strstr(e->assumptions[i], text))
            return true;
    return false;
}

/* PyTorch's default cuBLAS workspace (CUBLAS_WORKSPACE_CONFIG ":4096:2:16:8", and 32 MiB on
 * compute capability 9.0: parseChosenWorkspaceSize, aten/src/ATen/cuda/CublasHandlePool.cpp) */
static const uint64_t ws_default = 2 * 4096 * 1024 + 8 * 16 * 1024, ws_hopper = 32 * GM_MIB;

/* --gpus N with vLLM or SGLang: one copy over N GPUs; --replicas makes copies. */
static void test_gpus_are_tensor_parallel(void **state)
{
    struct gm_job j, t;
    struct gm_error err;
    (void)state;
    job_make("llama-3.1-70b", "--infer --engine vllm --gpus 2 --gpu H100", &j);
    t = j;
    est_job_resolve(&t);
    assert_int_equal(t.parallel.tp, 2);
    assert_int_equal(est_data_parallel(&t), 1);
    run(&j, &est);
    assert_true(assumed(est, "2 GPUs serve one vllm instance with tensor parallelism 2"));
    /* the same job as --tp 2 */
    job_make("llama-3.1-70b", "--infer --engine vllm --tp 2 --gpu H100", &t);
    run(&t, &again);
    assert_int_equal(est->device_bytes, again->device_bytes);
    assert_int_equal(est->serving.kv_tokens, again->serving.kv_tokens);
    /* --replicas: copies */
    job_make("llama-3.1-8b", "--infer --engine sglang --gpus 4 --replicas 2 --gpu H100", &j);
    t = j;
    est_job_resolve(&t);
    assert_int_equal(t.parallel.tp, 2);
    assert_int_equal(est_data_parallel(&t), 2);
    /* without a sharding engine --gpus stays copies */
    job_make("llama-3.1-8b", "--infer --gpus 2 --gpu H100", &t);
    est_job_resolve(&t);
    assert_int_equal(t.parallel.tp, 1);
    /* --replicas that do not multiply to --gpus are refused */
    job_make("llama-3.1-8b", "--infer --engine vllm --tp 2 --gpus 2 --replicas 2 --gpu H100", &t);
    assert_int_equal(gm_job_check(&t, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--replicas"));
}

/* vLLM's max_model_len when none is given (_get_and_verify_max_len, vllm/config/model.py @
 * 0052a5b): max_position_embeddings times rope_scaling's factor, except for "llama3", "longrope"
 * and Gemma 3, whose positions are already the scaled length; "yarn" scales
 * original_max_position_embeddings.  And the V0 profile run of such a length: before 0.5.4 the
 * scheduler batches the whole max_model_len (chunked prefill turned on above 32768 positions
 * only from PR #6666). */
static void test_vllm_max_len_from_rope_scaling(void **state)
{
    struct gm_job j;
    struct gm_model m;
    uint64_t t, n;
    (void)state;
    gm_model_init(&m);
    m.max_positions = 16384;
    assert_int_equal(est_vllm_max_len(&m), 16384); /* no rope_scaling */
    m.rope_scaling = GM_ROPE_LINEAR;
    m.rope_factor = 4.0;
    assert_int_equal(est_vllm_max_len(&m), 65536);
    m.rope_scaling = GM_ROPE_DYNAMIC;
    assert_int_equal(est_vllm_max_len(&m), 65536);
    m.rope_scaling = GM_ROPE_LLAMA3; /* Llama 3.1: 131072 already scaled */
    assert_int_equal(est_vllm_max_len(&m), 16384);
    m.rope_scaling = GM_ROPE_LONGROPE;
    assert_int_equal(est_vllm_max_len(&m), 16384);
    /* Gemma 3: linear x8 on 131072, not applied, for every model type holding "gemma3" (vLLM's
     * '"gemma3" not in hf_config.model_type'), whatever gpumem's architecture */
    m.rope_scaling = GM_ROPE_LINEAR;
    for (int i = 0; i < 3; i++) {
        snprintf(m.model_type, sizeof m.model_type, "%s",
                 i == 0   ? "gemma3"
                 : i == 1 ? "gemma3_text"
                          : "gemma3n");
        assert_int_equal(est_vllm_max_len(&m), 16384);
    }
    snprintf(m.model_type, sizeof m.model_type, "gemma2");
    assert_int_equal(est_vllm_max_len(&m), 65536);
    m.model_type[0] = '\0';
    m.rope_scaling = GM_ROPE_YARN; /* DeepSeek-V3: 4096 x 40 */
    m.rope_factor = 40.0;
    m.rope_original_positions = 4096;
    m.max_positions = 163840;
    assert_int_equal(est_vllm_max_len(&m), 163840);
    m.rope_original_positions = 0; /* yarn without it: max_position_embeddings x factor */
    m.max_positions = 4096;
    assert_int_equal(est_vllm_max_len(&m), 163840);

    /* the derived length is said, with where it came from (findings 6 and 7 of the kv review):
     * an assumption line, serving.max_model_len_from, and the same limit for --max-context as
     * for --max-model-len */
    job_make("deepseek-ai/deepseek-coder-6.7b-instruct", "--infer --engine vllm --gpu A100-80GB",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.max_model_len, 65536);
    assert_int_equal(est->serving.max_model_len_from, GM_MAX_LEN_ROPE);
    assert_true(assumed(est, "max_model_len 65536 = max_position_embeddings 16384 x rope_scaling "
                             "factor 4 (linear)"));
    gm_estimate_free(est);
    est = NULL;
    assert_int_equal(est_engine_max_len(&j, j.model.model), 65536);
    job_make("deepseek-ai/deepseek-coder-6.7b-instruct",
             "--infer --engine vllm --gpu A100-80GB --max-model-len 8192", &j);
    run(&j, &est);
    assert_int_equal(est->serving.max_model_len_from, GM_MAX_LEN_GIVEN);
    assert_false(assumed(est, "x rope_scaling factor"));
    gm_estimate_free(est);
    est = NULL;
    job_make("deepseek-ai/deepseek-coder-6.7b-instruct", "--infer --gpu A100-80GB", &j);
    assert_int_equal(est_engine_max_len(&j, j.model.model), 16384); /* HF generate: positions */
    job_make("deepseek-ai/deepseek-coder-6.7b-instruct",
             "--infer --engine vllm --gpu H200 --new-tokens 0", &j);
    {
        struct gm_est_search res;
        struct gm_error err;
        assert_int_equal(gm_estimate_search(&j, GM_SEARCH_CONTEXT, &res, NULL, &err), GM_OK);
        assert_int_equal(res.limit, 65536);
    }
    /* a yarn block without original_max_position_embeddings: vLLM reads that key outright,
     * so gpumem says what it took in its place */
    {
        struct gm_model y;
        job_make("deepseek-ai/deepseek-coder-6.7b-instruct", "--infer --engine vllm --gpu H100",
                 &j);
        y = *j.model.model;
        y.rope_scaling = GM_ROPE_YARN;
        y.rope_original_positions = 0;
        j.model.model = &y;
        run(&j, &est);
        assert_int_equal(est->serving.max_model_len, 65536);
        assert_true(assumed(est, "yarn rope scaling without original_max_position_embeddings"));
        gm_estimate_free(est);
        est = NULL;
    }

    /* the catalog's deepseek-coder-6.7b (linear x4) at vLLM 0.5.0: max_model_len 65536, and the
     * profile run batches all 65536 tokens (no chunked prefill before 0.5.4) */
    job_make("deepseek-ai/deepseek-coder-6.7b-instruct",
             "--infer --engine vllm --vllm-version 0.5.0 --gpu T4 --gpus 2", &j);
    run(&j, &est);
    assert_int_equal(est->serving.max_model_len, 65536);
    assert_int_equal(est->serving.max_num_batched_tokens, 65536);
    gm_estimate_free(est);
    est = NULL;
    est_vllm_batch(&j, 65536, &t, &n);
    assert_int_equal(t, 65536);
    /* from 0.5.4 the OpenAI server chunks prefills of 2048 above 32768 positions */
    job_make("deepseek-ai/deepseek-coder-6.7b-instruct",
             "--infer --engine vllm --vllm-version 0.5.4 --gpu T4 --gpus 2", &j);
    est_vllm_batch(&j, 65536, &t, &n);
    assert_int_equal(t, 2048);
    /* a max_model_len given wins */
    job_make("deepseek-ai/deepseek-coder-6.7b-instruct",
             "--infer --engine vllm --vllm-version 0.5.0 --gpu T4 --gpus 2 --max-model-len 8192",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.max_model_len, 8192);
    gm_estimate_free(est);
    est = NULL;
}

/* --quant-kernel under vLLM: auto, marlin (from compute capability 8.0, awq_marlin's
 * get_min_capability) and, for AWQ, gemm (its plain kernel) are vLLM's; transformers' kernels
 * (exllama, exllamav2, plain), gemm for GPTQ, any kernel for weights that are neither, and
 * Marlin on a T4 are refused as usage errors, not accepted silently (finding 4 of the kv
 * review). */
static void test_vllm_quant_kernel_choices(void **state)
{
    static const struct {
        const char *args;
        bool ok;
        const char *says;
    } cases[] = {
        {"--quant awq --quant-kernel auto --gpu L4", true, NULL},
        {"--quant awq --quant-kernel marlin --gpu L4", true, NULL},
        {"--quant awq --quant-kernel gemm --gpu L4", true, NULL},
        {"--quant gptq --quant-kernel marlin --gpu L4", true, NULL},
        {"--quant awq --quant-kernel exllama --gpu L4", false, "a kernel of HF generate()"},
        {"--quant awq --quant-kernel exllamav2 --gpu L4", false, "a kernel of HF generate()"},
        {"--quant gptq --quant-kernel plain --gpu L4", false, "a kernel of HF generate()"},
        {"--quant gptq --quant-kernel gemm --gpu L4", false, "plain kernel of AWQ weights"},
        {"--quant-kernel marlin --gpu L4", false, "not (unquantised)"},
        {"--quant awq --quant-kernel marlin --gpu T4", false, "compute capability 8.0"},
    };
    struct gm_job j;
    struct gm_error err;
    char args[256];
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(args, sizeof args, "--infer --engine vllm --max-model-len 4096 %s", cases[i].args);
        job_make("qwen2.5-7b", args, &j);
        if (cases[i].ok) {
            run(&j, &est);
        } else {
            assert_int_equal(gm_estimate_run(&j, &est, &err), GM_ERR_INVALID);
            assert_non_null(strstr(err.msg, cases[i].says));
        }
        gm_estimate_free(est);
        est = NULL;
    }
    /* HF generate() keeps transformers' kernels */
    job_make("qwen2.5-7b", "--infer --quant gptq --quant-kernel exllamav2 --gpu L4", &j);
    run(&j, &est);
    gm_estimate_free(est);
    est = NULL;
}

/* vLLM's plain AWQ kernel (AWQLinearMethod.apply): from 256 tokens it dequantises each linear's
 * whole weight to fp16 for a matmul, so the profile run and the CUDA-graph pool hold the largest
 * one, the fused gate_up_proj, beside its input, the residual and its output.  Taken with
 * --quant-kernel gemm (the log's "forcing awq") or below compute capability 8.0 (no Marlin);
 * Marlin otherwise, which dequantises nothing. */
static void test_vllm_awq_plain_kernel(void **state)
{
    struct gm_job j;
    const uint64_t h = 5120, cols = 2 * 13824, T = 2048;
    uint64_t dq = (T * (cols + 2 * h) + h * cols) * 2, graphs = 0, graphs_marlin = 0;
    (void)state;
    /* Qwen2.5-14B AWQ, one sequence so that the forward, not the sampler, is the peak */
    job_make("qwen2.5-14b",
             "--infer --engine vllm --quant awq --quant-kernel gemm --vllm-version 0.13.0 "
             "--gpu-memory 23.99 --max-model-len 8192 --max-num-seqs 1",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.max_num_batched_tokens, T);
    /* the dequantised weight's torch.matmul runs cuBLAS: its workspace is in the peak (no
     * compute capability known at 23.99 GiB: the default size) */
    assert_int_equal(est->serving.activation_peak_bytes, dq + ws_default);
    assert_true(assumed(est, "vLLM's plain AWQ kernel"));
    gm_estimate_free(est);
    est = NULL;
    /* the default at 23.99 GiB (no compute capability known) is Marlin: no copy */
    job_make("qwen2.5-14b",
             "--infer --engine vllm --quant awq --vllm-version 0.13.0 --gpu-memory 23.99 "
             "--max-model-len 8192 --max-num-seqs 1",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.activation_peak_bytes, T * (3 * 13824 + 3 * h) * 2);
    assert_false(assumed(est, "vLLM's plain AWQ kernel"));
    gm_estimate_free(est);
    est = NULL;
    /* the graph pool: 256 sequences capture up to 512 tokens, where the copy beside 512
     * tokens outweighs the layer's activations */
    job_make("qwen2.5-14b",
             "--infer --engine vllm --quant awq --quant-kernel gemm --vllm-version 0.13.0 "
             "--gpu-memory 23.99 --max-model-len 8192",
             &j);
    run(&j, &est);
    graphs = gm_estimate_kind_bytes(est, GM_KIND_ENGINE_POOL);
    gm_estimate_free(est);
    est = NULL;
    job_make("qwen2.5-14b",
             "--infer --engine vllm --quant awq --quant-kernel marlin --vllm-version 0.13.0 "
             "--gpu-memory 23.99 --max-model-len 8192",
             &j);
    run(&j, &est);
    graphs_marlin = gm_estimate_kind_bytes(est, GM_KIND_ENGINE_POOL);
    gm_estimate_free(est);
    est = NULL;
    assert_int_equal(graphs - graphs_marlin,
                     (512 * (cols + 2 * h) + h * cols) * 2 - 512ull * (3 * 13824 + 3 * h) * 2);
    /* a T4 (compute capability 7.5) has no Marlin: the plain kernel by default */
    job_make("qwen2.5-14b",
             "--infer --engine vllm --quant awq --vllm-version 0.13.0 --gpu T4 --gpus 2 "
             "--max-model-len 4096 --max-num-seqs 1",
             &j);
    run(&j, &est);
    assert_true(assumed(est, "vLLM's plain AWQ kernel"));
    gm_estimate_free(est);
    est = NULL;
}

/* SGLang: its default static share for the GPU, the pool what the weights leave of it. */
static void test_sglang_pool(void **state)
{
    struct gm_job j;
    double mfs;
    uint64_t free0;
    (void)state;
    job_make("llama-3.1-8b", "--infer --engine sglang --gpu H100", &j);
    run(&j, &est);
    /* H100 80 GB: chunked prefill 8192, 256 graph batches: 512 + 12288 + 128 + 512 MiB */
    mfs = est->serving.static_fraction;
    assert_true(mfs > 0.834 && mfs < 0.836);
    /* the static share (budget_bytes) holds the weights and the pool, whole tokens of it */
    free0 = est->serving.budget_bytes;
    assert_true(free0 - gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS) - est->serving.kv_pool_bytes <
                est->serving.kv_bytes_per_token);
    assert_true(est->fit.fits);
    /* a given share is used as it is */
    job_make("llama-3.1-8b", "--infer --engine sglang --gpu H100 --mem-fraction-static 0.5", &j);
    run(&j, &again);
    assert_true(again->serving.static_fraction == 0.5);
    assert_true(again->serving.kv_tokens < est->serving.kv_tokens);
    /* too little for the weights: SGLang would not start */
    job_make("llama-3.1-8b", "--infer --engine sglang --gpu H100 --mem-fraction-static 0.1", &j);
    run(&j, &again);
    assert_int_equal(again->fit.reason, GM_FIT_ENGINE_NO_START);
}

/* llama.cpp: -ngl keeps that many layers (and their KV) on the GPU, --n-cpu-moe moves the
 * first layers' experts to host memory.  Which layers -ngl counts is llama-model.cpp's
 * load_tensors: since PR #18148 i_gpu_start = max(n_layer + 1 - N, 0), the output layer first;
 * before it (--ngl-output-last) i_gpu_start = max(n_layer - N, 0), the output layer only when
 * N > n_layer. */
static void test_llamacpp_host_offload(void **state)
{
    struct gm_job j;
    uint64_t w_all, kv_all, w_first;
    (void)state;
    job_make("llama-3.1-70b", "--infer --engine llama.cpp --gpu H100", &j);
    run(&j, &est);
    w_all = gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS);
    kv_all = gm_estimate_kind_bytes(est, GM_KIND_KV_CACHE);
    /* output layer first: -ngl 41 is the output layer and 40 of the 80 layers */
    job_make("llama-3.1-70b", "--infer --engine llama.cpp --gpu H100 --n-gpu-layers 41", &j);
    run(&j, &again);
    assert_int_equal(gm_estimate_kind_bytes(again, GM_KIND_KV_CACHE), kv_all / 2);
    w_first = gm_estimate_kind_bytes(again, GM_KIND_WEIGHTS);
    assert_true(w_first > w_all / 2);
    assert_true(assumed(again, "40 of 80 layers on the GPU (-ngl 41, the output layer first)"));
    /* output layer last: -ngl 40 is 40 layers and no output layer, under half the weights;
     * the two differ by the output projection (8192 x 128256 at 16 bits) */
    job_make("llama-3.1-70b",
             "--infer --engine llama.cpp --gpu H100 --n-gpu-layers 40 --ngl-output-last", &j);
    run(&j, &again);
    assert_int_equal(gm_estimate_kind_bytes(again, GM_KIND_KV_CACHE), kv_all / 2);
    assert_true(gm_estimate_kind_bytes(again, GM_KIND_WEIGHTS) < w_all / 2);
    assert_int_equal(w_first - gm_estimate_kind_bytes(again, GM_KIND_WEIGHTS),
                     8192ull * 128256 * 2);
    assert_true(assumed(again, "40 of 80 layers on the GPU (-ngl 40, the output layer last)"));
    job_make("mixtral-8x7b", "--infer --engine llama.cpp --gpu H100", &j);
    run(&j, &est);
    w_all = gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS);
    job_make("mixtral-8x7b", "--infer --engine llama.cpp --gpu H100 --n-cpu-moe 32", &j);
    run(&j, &again);
    /* the experts are most of Mixtral: with all of them in host memory, under 10% is left */
    assert_true(gm_estimate_kind_bytes(again, GM_KIND_WEIGHTS) < w_all / 10);
    assert_true(assumed(again, "routed experts in host memory (--cpu-moe: all layers)"));
    /* with layers in host memory the graph is split between host and GPU, which ggml-alloc's
     * placement is not replayed for: the compute buffer is the largest phase of the sum, here
     * the output (the output layer stays in host memory below -ngl 33): the logits and hidden
     * states of 512 tokens beside the Q6_K output weight copied in, 203.99 MiB as Pythia-2.8B
     * Q4_0 at -ngl 10 printed (build 4343) */
    job_make("pythia-2.8b",
             "--infer --engine llama.cpp --context 2048 --bits 4.5 --n-gpu-layers 10 "
             "--ngl-output-last --kv-cpy",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.compute_buffer_bytes,
                     512ull * (50304 + 2560) * 4 + 50304ull * 2560 * 210 / 256);
    assert_true(assumed(est, "the compute buffer is the largest set of the reserved graph's "
                             "tensors alive at once"));
    job_make("pythia-2.8b", "--infer --engine llama.cpp --context 2048 --bits 4.5 --kv-cpy", &j);
    run(&j, &est);
    assert_true(assumed(est, "the compute buffer is where ggml-alloc places the reserved "
                             "graph's tensors, in order"));
}

/* llama.cpp's compute buffer is what ggml-alloc reserves for the graph of one micro-batch
 * (llama_context::graph_reserve: n_ubatch tokens, every one an output, over the whole cache),
 * the largest set of tensors alive at once.  With flash attention the f32 logits and the
 * normed hidden states they come from; without it the scores of every head over the cache,
 * beside the mask, the layer input and q, k, v; an output weight left in host memory is copied
 * in when the backend offloads its matmul (ggml-backend.cpp, CUDA offload_op: 32 rows). */
static void test_llamacpp_compute_buffer(void **state)
{
    struct gm_job j;
    const uint64_t ub = 512, mib = 1ull << 20;
    (void)state;
    /* gpt-oss-20b, flash attention: logits and hidden states, linear in n_ubatch */
    job_make("gpt-oss-20b", "--infer --engine llama.cpp --context 65536 --flash-attn", &j);
    run(&j, &est);
    assert_int_equal(est->serving.compute_buffer_bytes, ub * (201088 + 2880) * 4);
    job_make("gpt-oss-20b", "--infer --engine llama.cpp --context 32768 --ubatch 2048 --flash-attn",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.compute_buffer_bytes, 4 * ub * (201088 + 2880) * 4);
    /* Pythia-2.8B without flash attention at n_ctx 2048, every layer on the GPU, the KV cache
     * written by ggml_cpy (build 4343): the f32 mask 2048 x 512 (4 MiB), the layer input, q,
     * k and v (5 MiB each) and 32 heads of scores 2048 x 512 (128 MiB) are alive at once, 152
     * MiB; but the fused qkv projection (15 MiB at 14 MiB) is freed around the roped q kept at
     * 29 MiB, so the scores go above, at 34 MiB: 162 MiB, as the CI log printed */
    job_make("pythia-2.8b", "--infer --engine llama.cpp --context 2048 --kv-cpy", &j);
    run(&j, &est);
    assert_int_equal(est->serving.compute_buffer_bytes, 34 * mib + 4096 + 2048 * ub * 32 * 4);
    assert_int_equal(est->serving.compute_buffer_bytes, 162 * mib + 4096);
    /* Qwen2.5-32B with 49 of 64 layers (output layer last): the Q6_K output weight
     * (llama-quant.cpp: below 8 bits per weight) comes in beside the logits */
    job_make("qwen2.5-32b",
             "--infer --engine llama.cpp --context 32768 --flash-attn --n-gpu-layers 49 "
             "--ngl-output-last --bits 4.85",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.compute_buffer_bytes,
                     ub * (152064 + 5120) * 4 + 152064ull * 5120 * 210 / 256);
    /* the same with the output layer on the GPU (output layer first): no copy */
    job_make("qwen2.5-32b",
             "--infer --engine llama.cpp --context 32768 --flash-attn --n-gpu-layers 49 "
             "--bits 4.85",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.compute_buffer_bytes, ub * (152064 + 5120) * 4);
    /* every layer on the GPU, Llama layout: ggml-alloc's placement of the graph.  Qwen2.5-7B
     * at n_ctx 32768 with flash attention: the inputs take the bottom (embeddings 7 MiB, the
     * f32 mask 64 MiB, freed after its f16 cast); the last layer's down projection takes the
     * start of the range up freed, at 78.01 MiB, and the residual and result_norm (a graph
     * output, kept) run in place there, so the 297 MiB of logits start at 85.01 MiB: 382.01
     * MiB, as build 7780 printed (the sum of what is alive at once says 304) */
    job_make("qwen2.5-7b",
             "--infer --engine llama.cpp --context 32768 --flash-attn --kv-dtype fp16 --bits 8.5",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.compute_buffer_bytes, 89141248ull + ub * 152064 * 4);
    /* without set_rows' K and V row indices (two I64 x 512 inputs) everything sits 8 KiB
     * lower */
    job_make("qwen2.5-7b",
             "--infer --engine llama.cpp --context 32768 --flash-attn --kv-dtype fp16 --bits 8.5 "
             "--kv-cpy",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.compute_buffer_bytes, 89141248ull - 8192 + ub * 152064 * 4);
    /* Mistral-Nemo at n_ctx 4096 without flash attention, the KV cache written by ggml_cpy
     * (build 6050): the 256 MiB of scores of 32 heads go above 44 MiB of inputs and q, k, v;
     * the last hidden states land at 46 MiB and the 256 MiB of logits above them: 312 MiB,
     * as printed.  set_rows' 4 MiB V index (one I64 per element of the transposed cache)
     * shifts the free blocks so the hidden states land at 0: the scores' 304 MiB is the peak */
    job_make("mistral-nemo", "--infer --engine llama.cpp --context 4096 --kv-dtype fp16 --kv-cpy",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.compute_buffer_bytes, 56 * mib + 4096 + 256 * mib);
    job_make("mistral-nemo", "--infer --engine llama.cpp --context 4096 --kv-dtype fp16", &j);
    run(&j, &est);
    assert_int_equal(est->serving.compute_buffer_bytes, 48 * mib + 8192 + 256 * mib);
}

/* llama.cpp keeps token_embd in host memory; a weight format (gpt-oss's MXFP4 experts) keeps
 * the embedding at 16 bits, so the GPU holds the stored weights less vocab x hidden x 2 B, not
 * less the embedding's share at the checkpoint's mean width. */
static void test_llamacpp_format_embedding(void **state)
{
    struct gm_job j;
    uint64_t stored;
    (void)state;
    job_make("gpt-oss-20b", "--infer --context 4096", &j);
    run(&j, &est);
    stored = gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS);
    job_make("gpt-oss-20b", "--infer --engine llama.cpp --context 4096", &j);
    run(&j, &est);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS), stored - 201088ull * 2880 * 2);
}

/* llama.cpp's window cache (llama_kv_cache_iswa) holds n_swa x n_seq + n_ubatch cells padded to
 * 256 in a unified cache: gpt-oss-20b's 12 window layers at 8 KV heads of 64, f16. */
static void test_llamacpp_window_cells(void **state)
{
    struct gm_job j;
    const uint64_t per_cell = 12 * 2 * 8 * 64 * 2;
    (void)state;
    job_make("gpt-oss-20b", "--infer --engine llama.cpp --context 14016 --batch 4 --flash-attn",
             &j);
    run(&j, &est);
    /* 128 x 4 + 512 = 1024 cells */
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_KV_CACHE),
                     per_cell * 56064 + per_cell * 1024);
    job_make("gpt-oss-20b", "--infer --engine llama.cpp --context 32768 --ubatch 2048 --flash-attn",
             &j);
    run(&j, &est);
    /* 128 + 2048 = 2176, padded to 2304 */
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_KV_CACHE),
                     per_cell * 32768 + per_cell * 2304);
}

/* The plan a serving job gets, read back through gm_job_read_command(): the same job. */
static void round_trip(const char *model, const char *settings, const char *workload)
{
    struct gm_job j, back;
    struct gm_job_source src;
    struct gm_error err;
    char plan[2048], ref[512], note[256], all[512];
    snprintf(all, sizeof all, "%s %s", settings, workload);
    job_make(model, all, &j);
    run(&j, &est);
    assert_true(est->fit.fits);
    assert_int_equal(gm_estimate_plan(&j, est, plan, sizeof plan, &err), GM_OK);
    assert_true(plan[0]);
    gm_job_init(&back);
    if (gm_job_read_command(&back, plan, ref, sizeof ref, note, sizeof note, &err) != GM_OK)
        fail_msg("%s: %s", plan, err.msg);
    assert_string_equal(note, "");
    assert_int_equal(gm_job_source_load(&src, ref, NULL, &err), GM_OK);
    gm_job_use_source(&back, &src);
    job_set_all(&back, workload);
    run(&back, &again);
    assert_int_equal(again->device_bytes, est->device_bytes);
    assert_int_equal(again->peak_allocated_bytes, est->peak_allocated_bytes);
    assert_int_equal(again->serving.kv_tokens, est->serving.kv_tokens);
    assert_int_equal(again->fit.verdict, est->fit.verdict);
    gm_job_source_release(&src);
}

static void test_plan_round_trip(void **state)
{
    (void)state;
    round_trip("llama-3.1-70b",
               "--infer --engine vllm --gpus 2 --max-model-len 26176 --kv-dtype fp8 --quant fp8 "
               "--gpu-memory-utilization 0.92",
               "--gpu H100 --batch 4 --context 4096");
    round_trip("llama-3.1-8b",
               "--infer --engine vllm --gpus 4 --replicas 2 --max-num-seqs 64 "
               "--gpu-memory-utilization 0.85",
               "--gpu L4 --max-model-len 8192");
    round_trip("llama-3.1-8b", "--infer --engine sglang --kv-dtype fp8",
               "--gpu H100 --batch 8 --context 4096");
    round_trip("llama-3.1-8b",
               "--infer --engine llama.cpp --batch 2 --context 4096 --flash-attn --kv-dtype int8 "
               "--n-gpu-layers 20 --ubatch 256",
               "--gpu RTX-4090");
}

/* A model given as a config.json file: the plan names its folder (engines load folders),
 * quoted as one shell word, and reading the plan back loads the same model. */
static void test_plan_names_the_folder(void **state)
{
    char dir[] = "/tmp/gm it's a model XXXXXX", path[256], plan[2048], ref[512], note[256],
         want[300];
    struct gm_job_source src, back;
    struct gm_job j;
    struct gm_error err;
    FILE *f;
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/config.json", dir);
    assert_non_null(f = fopen(path, "w"));
    fputs("{\"model_type\": \"llama\", \"hidden_size\": 2048, \"num_hidden_layers\": 16, "
          "\"num_attention_heads\": 32, \"num_key_value_heads\": 8, \"vocab_size\": 128256, "
          "\"intermediate_size\": 8192, \"max_position_embeddings\": 8192}",
          f);
    fclose(f);
    assert_int_equal(gm_job_source_load(&src, path, NULL, &err), GM_OK);
    assert_string_equal(src.ref, dir);
    gm_job_init(&j);
    gm_job_use_source(&j, &src);
    job_set_all(&j, "--infer --engine vllm --gpu L4");
    run(&j, &est);
    assert_int_equal(gm_estimate_plan(&j, est, plan, sizeof plan, &err), GM_OK);
    snprintf(want, sizeof want, "vllm serve '/tmp/gm it'\\''s a model %s' ", dir + 21);
    assert_memory_equal(plan, want, strlen(want));
    gm_job_init(&j);
    assert_int_equal(gm_job_read_command(&j, plan, ref, sizeof ref, note, sizeof note, &err),
                     GM_OK);
    assert_string_equal(ref, dir);
    assert_int_equal(gm_job_source_load(&back, ref, NULL, &err), GM_OK);
    gm_job_use_source(&j, &back);
    job_set_all(&j, "--gpu L4");
    run(&j, &again);
    assert_int_equal(again->device_bytes, est->device_bytes);
    assert_int_equal(again->serving.kv_tokens, est->serving.kv_tokens);
    gm_job_source_release(&src);
    gm_job_source_release(&back);
    remove(path);
    rmdir(dir);
}

/* Engine command lines as users paste them: spellings, quotes, flags not read. */
static void test_read_commands(void **state)
{
    struct gm_job j;
    struct gm_error err;
    char ref[512], note[256];
    (void)state;
    gm_job_init(&j);
    assert_int_equal(gm_job_read_command(
                         &j,
                         "CUDA_VISIBLE_DEVICES=0,1 vllm serve \"Qwen/Qwen2.5-7B-Instruct\" -tp 2 "
                         "--max-model-len=32768 --port 8000 --trust-remote-code",
                         ref, sizeof ref, note, sizeof note, &err),
                     GM_OK);
    assert_string_equal(ref, "Qwen/Qwen2.5-7B-Instruct");
    assert_int_equal(j.engine.kind, GM_ENGINE_VLLM);
    assert_int_equal(j.parallel.tp, 2);
    assert_int_equal(j.engine.vllm.max_model_len, 32768);
    assert_string_equal(note, "--port 8000 --trust-remote-code");
    gm_job_init(&j);
    assert_int_equal(gm_job_read_command(&j,
                                         "python3 -m sglang.launch_server --model-path org/m "
                                         "--revision v2 --tp-size 4 --kv-cache-dtype fp8_e4m3",
                                         ref, sizeof ref, note, sizeof note, &err),
                     GM_OK);
    assert_string_equal(ref, "org/m@v2");
    assert_int_equal(j.engine.kind, GM_ENGINE_SGLANG);
    assert_int_equal(j.parallel.tp, 4);
    assert_int_equal(j.numerics.kv_dtype, GM_DTYPE_F8_E4M3);
    gm_job_init(&j);
    assert_int_equal(gm_job_read_command(&j, "llama-server -m m.gguf -c 8192 -np 4 -fa -ngl all",
                                         ref, sizeof ref, note, sizeof note, &err),
                     GM_OK);
    assert_int_equal(j.workload.batch, 4);
    assert_int_equal(j.workload.context, 2048);
    assert_true(j.engine.llamacpp.flash_attn);
    assert_int_equal(j.engine.llamacpp.n_gpu_layers, 999);
    gm_job_init(&j);
    assert_int_equal(gm_job_read_command(&j, "llama-server -m m.gguf -fa off -ctk q4_0", ref,
                                         sizeof ref, note, sizeof note, &err),
                     GM_OK);
    assert_false(j.engine.llamacpp.flash_attn);
    assert_int_equal(j.numerics.kv_dtype, GM_DTYPE_INT4);
    /* -ot moving routed experts to the CPU is --cpu-moe or --n-cpu-moe N; any other override
     * is named as not read */
    static const struct {
        const char *cmd;
        uint64_t n_cpu_moe;
        const char *note;
    } ot[] = {
        {"llama-server -m m.gguf -ot '.ffn_.*_exps.=CPU'", 100000, ""},
        {"llama-server -m m.gguf -ot 'blk\\.(0|1|2)\\.ffn_(up|down|gate)_exps=CPU'", 3, ""},
        {"llama-server -m m.gguf -ot 'blk.0.ffn_up_exps=CPU' --override-tensor=blk.1.ffn_up_exps=CPU",
         2, ""},
        {"llama-server -m m.gguf -ot 'blk\\.([0-9])\\.ffn_.*_exps=CPU'", 0,
         "-ot blk\\.([0-9])\\.ffn_.*_exps=CPU"},
        {"llama-server -m m.gguf -ot 'blk\\.5\\.ffn_up_exps=CPU'", 0,
         "-ot (blocks other than 0..N-1: gpumem moves the experts of the first N, --n-cpu-moe N)"},
        {"llama-server -m m.gguf -ot '.ffn_.*_exps.=CUDA0'", 0, "-ot .ffn_.*_exps.=CUDA0"},
        {"llama-server -m m.gguf -ot 'attn_q=CPU'", 0, "-ot attn_q=CPU"},
    };
    for (size_t i = 0; i < sizeof ot / sizeof ot[0]; i++) {
        gm_job_init(&j);
        assert_int_equal(
            gm_job_read_command(&j, ot[i].cmd, ref, sizeof ref, note, sizeof note, &err), GM_OK);
        assert_int_equal(j.engine.llamacpp.n_cpu_moe, ot[i].n_cpu_moe);
        assert_string_equal(note, ot[i].note);
    }
    /* refused: not a serving command, no model, an open quote, a bad value */
    gm_job_init(&j);
    assert_int_equal(
        gm_job_read_command(&j, "torchrun train.py", ref, sizeof ref, note, sizeof note, &err),
        GM_ERR_INVALID);
    assert_int_equal(gm_job_read_command(&j, "vllm serve --tensor-parallel-size 2", ref, sizeof ref,
                                         note, sizeof note, &err),
                     GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "no model"));
    assert_int_equal(
        gm_job_read_command(&j, "vllm serve 'm", ref, sizeof ref, note, sizeof note, &err),
        GM_ERR_INVALID);
    assert_int_equal(gm_job_read_command(&j, "vllm serve m --max-model-len lots", ref, sizeof ref,
                                         note, sizeof note, &err),
                     GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "--max-model-len"));
}

/* A search says what binds one past its answer: vLLM's max_model_len on an L4. */
static void test_search_binding_limit(void **state)
{
    struct gm_job j;
    struct gm_est_search r;
    struct gm_error err;
    (void)state;
    job_make("llama-3.1-8b", "--infer --engine vllm --gpu L4", &j);
    assert_int_equal(gm_estimate_search(&j, GM_SEARCH_BATCH, &r, NULL, &err), GM_OK);
    assert_int_equal(r.value, 0);
    assert_int_equal(r.limited_by, GM_FIT_ENGINE_NO_START);
    assert_non_null(strstr(r.limit_text, "max_model_len 131072"));
    job_make("llama-3.1-8b", "--infer --engine vllm --gpu L4 --max-model-len 8192 --context 4096",
             &j);
    assert_int_equal(gm_estimate_search(&j, GM_SEARCH_BATCH, &r, NULL, &err), GM_OK);
    assert_true(r.value > 0);
    assert_int_equal(r.limited_by, GM_FIT_ENGINE_CONCURRENCY);
}

/* The profile run's forward through a dense layer with a gated MLP, as vLLM's LlamaMLP runs
 * it: the local gate_up stays alive while down_proj writes, so the peak holds gate+up (2
 * ffn / tp), the activation (ffn / tp), the down_proj output, the layer's input and the
 * residual (three hidden-sized tensors), 16-bit. */
/* The profile peak vLLM prints for 'model' served with 'args': the activations and logits
 * components, and the cuBLAS workspace where the peak holds it (its own component). */
static uint64_t activations_of(const char *model, const char *args)
{
    struct gm_job j;
    struct gm_estimate *e = NULL;
    uint64_t bytes;
    job_make(model, args, &j);
    run(&j, &e);
    bytes = e->serving.activation_peak_bytes;
    assert_in_range(bytes - gm_estimate_kind_bytes(e, GM_KIND_ACTIVATIONS) -
                        gm_estimate_kind_bytes(e, GM_KIND_LOGITS),
                    0, gm_estimate_kind_bytes(e, GM_KIND_TORCH_WORKSPACE));
    gm_estimate_free(e);
    return bytes;
}

static void test_vllm_profile_forward_peak(void **state)
{
    (void)state;
    /* V0 at 20000 positions pushes 20000 tokens through: 2.06 GiB, above its sampler (so no
     * logits component beside it), with PyTorch's cuBLAS workspace of an RTX 3090 (8.125 MiB)
     * that the first layer's first GEMM allocates */
    assert_int_equal(activations_of("llama-3.1-8b",
                                    "--infer --engine vllm --vllm-version 0.6.4 --gpu RTX-3090 "
                                    "--max-model-len 20000"),
                     20000ull * (3 * 14336 + 3 * 4096) * 2 + ws_default);
    /* tensor parallelism splits the MLP, not the three hidden-sized tensors; an H100's
     * workspace is 32 MiB */
    assert_int_equal(activations_of("llama-3.1-70b",
                                    "--infer --engine vllm --vllm-version 0.6.4 --gpu H100 "
                                    "--gpus 2 --max-model-len 20000"),
                     20000ull * (3 * 28672 / 2 + 3 * 8192) * 2 + ws_hopper);
}

/* The cuBLAS workspace component of 'e': one, of 'bytes', in prefill and decode, persistent. */
static void assert_workspace_component(const struct gm_estimate *e, uint64_t bytes)
{
    size_t n = 0;
    for (size_t i = 0; i < e->n_components; i++) {
        const struct gm_est_component *c = &e->components[i];
        if (c->kind != GM_KIND_TORCH_WORKSPACE)
            continue;
        n++;
        assert_int_equal(c->bytes, bytes);
        assert_int_equal(c->phases, GM_EST_PHASE_INFER_ALL);
        assert_false(c->transient);
    }
    assert_int_equal(n, 1);
}

/* PyTorch gives cuBLAS its workspace from the caching allocator at a process's first GEMM
 * (getNewWorkspace, aten/src/ATen/cuda/CublasHandlePool.cpp), in vLLM's profile run, and keeps
 * it: 32 MiB on compute capability 9.0, else 8.125 MiB.  Checks its size by GPU; that it is a
 * component of its own (kind torch_workspace) in prefill and decode, so the decode phase, vLLM's
 * headline peak, holds it; and where it joins the profile peak vLLM measures (and the budget
 * pays): from the first layer where the layers run cuBLAS (16-bit weights), from the lm_head's
 * GEMM where they do not (GPTQ through Marlin), so a forward that outweighs the sampler holds it
 * only in the first case, while the component is there in both. */
static void test_vllm_cublas_workspace(void **state)
{
    struct gm_job j;
    struct est_ctx cx;
    const char *one_seq = "--infer --engine vllm --vllm-version 0.6.5 --gpu A100-80GB "
                          "--max-model-len 2048 --max-num-seqs 1";
    char args[256];
    uint64_t fwd, q16, qgptq, w, kv, graphs;
    (void)state;
    memset(&cx, 0, sizeof cx);
    cx.job = &j;
    job_make("llama-3.1-8b", "--infer --engine vllm --gpu H100", &j);
    assert_int_equal(est_torch_cublas_workspace_bytes(&cx), ws_hopper);
    job_make("llama-3.1-8b", "--infer --engine vllm --gpu A100-80GB", &j);
    assert_int_equal(est_torch_cublas_workspace_bytes(&cx), ws_default);
    job_make("llama-3.1-8b", "--infer --engine vllm --gpu T4", &j);
    assert_int_equal(est_torch_cublas_workspace_bytes(&cx), ws_default);
    job_make("llama-3.1-8b", "--infer --engine vllm --gpu-memory 79.25", &j); /* no cc known */
    assert_int_equal(est_torch_cublas_workspace_bytes(&cx), 8519680);

    /* Llama-3.1-70B at tp 2 on H100s: the decode phase (weights, KV pool, CUDA graphs) is the
     * headline peak and holds the 32 MiB workspace beside the pool the budget leaves */
    job_make("llama-3.1-70b", "--infer --engine vllm --gpu H100 --gpus 2", &j);
    run(&j, &est);
    assert_workspace_component(est, ws_hopper);
    w = gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS);
    kv = gm_estimate_kind_bytes(est, GM_KIND_KV_CACHE);
    graphs = gm_estimate_kind_bytes(est, GM_KIND_ENGINE_POOL);
    assert_int_equal(est->decode_bytes, w + kv + graphs + ws_hopper);
    assert_int_equal(est->peak_phase, GM_EST_PHASE_DECODE);
    assert_int_equal(est->peak_allocated_bytes, est->decode_bytes);
    /* the profile peak holds it (the sampler's phase here), beside the activations */
    assert_int_equal(est->serving.activation_peak_bytes,
                     gm_estimate_kind_bytes(est, GM_KIND_ACTIVATIONS) +
                         gm_estimate_kind_bytes(est, GM_KIND_LOGITS) + ws_hopper);
    gm_estimate_free(est);
    est = NULL;

    /* Phi-4 at 2048 tokens and one sequence: the forward is the peak.  16-bit: + the workspace */
    fwd = 2048ull * (3 * 17920 + 3 * 5120) * 2;
    q16 = activations_of("microsoft/phi-4", one_seq);
    assert_int_equal(q16, fwd + ws_default);
    /* GPTQ 4-bit through Marlin: no cuBLAS in the layers, the workspace comes after the peak,
     * yet it is allocated and kept: the component is there all the same */
    snprintf(args, sizeof args, "%s --quant gptq", one_seq);
    qgptq = activations_of("microsoft/phi-4", args);
    assert_int_equal(qgptq, fwd);
    job_make("microsoft/phi-4", args, &j);
    run(&j, &est);
    assert_workspace_component(est, ws_default);
    assert_int_equal(est->decode_bytes, gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS) +
                                            gm_estimate_kind_bytes(est, GM_KIND_KV_CACHE) +
                                            gm_estimate_kind_bytes(est, GM_KIND_ENGINE_POOL) +
                                            ws_default);
    gm_estimate_free(est);
    est = NULL;
    /* with 256 sequences the sampler (after the lm_head's GEMM) is the peak, and holds it */
    job_make("microsoft/phi-4",
             "--infer --engine vllm --quant gptq --vllm-version 0.6.5 --gpu A100-80GB "
             "--max-model-len 2048",
             &j);
    run(&j, &est);
    assert_true(est->serving.sampler_bytes > 0);
    assert_int_equal(est->serving.activation_peak_bytes,
                     est->serving.sampler_bytes + 2048ull * 5120 * 2 + ws_default);
    gm_estimate_free(est);
    est = NULL;
}

/* Where the layers take PyTorch's cuBLAS handle though the scheme quantises attention and MLP.
 * Plain GPTQ (no Marlin below compute capability 8.0): gptq_gemm passes
 * getCurrentCUDABlasHandle() on every call, whatever the rows (csrc/quantization/gptq/q_gemm.cu
 * @ 6ab6cdd), so the workspace is in the forward's peak even at 40 tokens, below the 50 rows
 * where the weight is reconstructed.  A mixture of experts under GPTQ-Marlin: vLLM builds the
 * router unquantised (mixtral.py @ 005df92, "linear_method=None"), a 16-bit GEMM in every
 * layer, so the forward's peak holds it as the 16-bit model's does. */
static void test_vllm_cublas_workspace_quantised_layers(void **state)
{
    struct gm_job j;
    const char *moe = "--infer --engine vllm --vllm-version 0.6.5 --gpu A100-80GB "
                      "--max-model-len 2048 --max-num-seqs 1";
    char args[256];
    (void)state;
    /* Phi-4, plain GPTQ on a T4, 40 tokens of one sequence: the forward (40 x (3 x 17920 + 3 x
     * 5120) x 2 B) outweighs the sampler of 100352 logits over the hidden states */
    job_make("microsoft/phi-4",
             "--infer --engine vllm --quant gptq --vllm-version 0.6.5 --gpu T4 "
             "--max-model-len 40 --max-num-batched-tokens 40 --max-num-seqs 1",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.max_num_batched_tokens, 40);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_LOGITS), 0); /* the forward's peak */
    assert_int_equal(est->serving.activation_peak_bytes,
                     40ull * (3 * 17920 + 3 * 5120) * 2 + ws_default);
    gm_estimate_free(est);
    est = NULL;
    /* Mixtral-8x7B, GPTQ through Marlin, one sequence of 2048 tokens: the forward is the peak,
     * with the workspace, as at 16 bit */
    snprintf(args, sizeof args, "%s --quant gptq", moe);
    job_make("mixtral-8x7b", args, &j);
    run(&j, &est);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_LOGITS), 0); /* the forward's peak */
    assert_int_equal(est->serving.activation_peak_bytes,
                     gm_estimate_kind_bytes(est, GM_KIND_ACTIVATIONS) + ws_default);
    assert_int_equal(est->serving.activation_peak_bytes, activations_of("mixtral-8x7b", moe));
    gm_estimate_free(est);
    est = NULL;
}

/* The profile peak vLLM's non-sampling workers print for 'model' served with 'args' (0 where
 * every rank samples); no worker's KV memory without one. */
static uint64_t worker_peak_of(const char *model, const char *args)
{
    struct gm_job j;
    uint64_t peak;
    job_make(model, args, &j);
    run(&j, &est);
    peak = est->serving.worker_activation_peak_bytes;
    if (!peak)
        assert_int_equal(est->serving.worker_kv_available_bytes, 0);
    gm_estimate_free(est);
    est = NULL;
    return peak;
}

/* From 0.2.7 to before 0.8, at tp > 1, only rank 0 receives the gathered logits and samples
 * (LogitsProcessor._get_logits' tensor_model_parallel_gather; ModelRunner.execute_model's
 * "Only perform sampling in the driver worker"), and the executor keeps the smallest count of
 * blocks the workers report (DistributedGPUExecutor.determine_num_available_blocks).  The
 * other ranks profile their forward alone, or their hidden states beside their own shard of
 * the 16-bit logits, and print the budget less that: more than the pool, which stays rank
 * 0's.  V1 samples on every rank, one GPU has no other rank. */
static void test_vllm_v0_workers_without_sampler(void **state)
{
    struct gm_job j;
    struct gm_est_serving *sv;
    uint64_t forward, shard;
    (void)state;
    /* Qwen2.5-14B on two RTX 4090s at 0.7.2 (the v012 log): 131072 positions, so chunked
     * prefills of 2048 tokens and 256 sequences; the forward (ffn 13824 over 2, three
     * 5120-wide tensors) outweighs the hidden states and a shard of 152064 / 2 logits */
    job_make("qwen2.5-14b",
             "--infer --engine vllm --vllm-version 0.7.2 --gpu RTX-4090 --gpus 2 "
             "--gpu-memory-utilization 0.98 --max-model-len 131072",
             &j);
    run(&j, &est);
    sv = &est->serving;
    forward = 2048ull * (3 * 13824 / 2 + 3 * 5120) * 2 + ws_default; /* with its own workspace */
    assert_int_equal(sv->worker_activation_peak_bytes, forward);
    assert_true(forward > 2048ull * 5120 * 2 + 256ull * 152064 / 2 * 2);
    assert_int_equal(sv->worker_kv_available_bytes,
                     sv->budget_bytes - gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS) - forward -
                         sv->non_torch_logged_bytes);
    /* rank 0 sorts 256 x 152064 logits: its pool is the smaller, and the pool */
    assert_int_equal(sv->sampler_bytes, 256ull * 152064 * 38);
    assert_true(sv->activation_peak_bytes > sv->worker_activation_peak_bytes);
    assert_true(sv->kv_pool_bytes < sv->worker_kv_available_bytes);
    assert_true(assumed(est, "only rank 0 gathers the logits and samples"));
    gm_estimate_free(est);
    est = NULL;
    /* four A100s over NVLink at 0.7.2: rank 0's NCCL figure holds its receive connections for
     * the logits' gather from the 3 others (est_nccl_gather_root_bytes); the other ranks hold
     * none, so their printed KV memory is the budget less their non-torch without them */
    {
        const struct est_nccl_comm a100x4 = {
            .local_ranks = 4, .link = GM_GPU_LINK_NVLINK, .sm = 80, .p2p = true};
        uint64_t gather = est_nccl_gather_root_bytes(&a100x4);
        job_make("qwen2.5-7b",
                 "--infer --engine vllm --vllm-version 0.7.2 --gpu A100-80GB --gpus 4", &j);
        run(&j, &est);
        sv = &est->serving;
        assert_true(gather > 0);
        assert_true(sv->worker_activation_peak_bytes > 0);
        assert_int_equal(sv->worker_kv_available_bytes,
                         sv->budget_bytes - gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS) -
                             sv->worker_activation_peak_bytes -
                             (sv->non_torch_logged_bytes - gather));
        gm_estimate_free(est);
        est = NULL;
    }
    /* a short profile batch of many sequences: the logits shard (512 x 151936 padded to 64,
     * over 2) beside the hidden states outweighs Qwen2.5-1.5B's forward */
    shard = 512ull * (151936 / 64 * 64 / 2) * 2;
    assert_true(shard + 512ull * 1536 * 2 > 512ull * (3 * 8960 / 2 + 3 * 1536) * 2);
    assert_int_equal(worker_peak_of("qwen2.5-1.5b",
                                    "--infer --engine vllm --vllm-version 0.6.4 --gpu A100-80GB "
                                    "--gpus 2 --max-model-len 512 --max-num-batched-tokens 512 "
                                    "--max-num-seqs 512"),
                     shard + 512ull * 1536 * 2 + ws_default);
    /* V1 (0.8 on) samples on every rank; a single GPU has no worker beside the driver */
    assert_int_equal(
        worker_peak_of("qwen2.5-14b",
                       "--infer --engine vllm --vllm-version 0.8.4 --gpu RTX-4090 "
                       "--gpus 2 --gpu-memory-utilization 0.98 --max-model-len 131072"),
        0);
    assert_int_equal(worker_peak_of("qwen2.5-14b", "--infer --engine vllm --vllm-version 0.7.2 "
                                                   "--gpu H100 --max-model-len 8192"),
                     0);
    /* before 0.2.7 every rank all-gathered the logits and sampled */
    assert_int_equal(worker_peak_of("llama-3.1-70b",
                                    "--infer --engine vllm --vllm-version 0.2.4 "
                                    "--gpu A100-80GB --gpus 4 --max-model-len 4096"),
                     0);
    assert_true(worker_peak_of("llama-3.1-70b",
                               "--infer --engine vllm --vllm-version 0.2.7 "
                               "--gpu A100-80GB --gpus 4 --max-model-len 4096") > 0);
}

/* vLLM's batch defaults follow its version and the GPU (V0's SchedulerConfig, V1's
 * arg_utils), given settings win, and the profile run's sampler sorts every logit of
 * max_num_seqs sequences at 38 B per logit, after the forward, so the activation peak is the
 * larger of the two. */
static void test_vllm_profile_run_by_version_and_gpu(void **state)
{
    struct gm_job j;
    uint64_t t, n, vocab;
    (void)state;
    /* V0 without chunked prefill: the longest request's tokens, 256 sequences */
    job_make("llama-3.1-8b",
             "--infer --engine vllm --vllm-version 0.6.4 --gpu RTX-3090 "
             "--max-model-len 20000",
             &j);
    est_vllm_batch(&j, 20000, &t, &n);
    assert_int_equal(t, 20000);
    assert_int_equal(n, 256);
    est_vllm_batch(&j, 1024, &t, &n);
    assert_int_equal(t, 2048);
    /* above 32768 positions the server chunks prefills of 2048 */
    est_vllm_batch(&j, 131072, &t, &n);
    assert_int_equal(t, 2048);
    /* V1: an H100 from 0.9 gets 8192 and 1024; an A100-80GB, an L4 or 0.8 get 2048 and 256 */
    job_make("llama-3.1-8b", "--infer --engine vllm --vllm-version 0.11 --gpu H100", &j);
    est_vllm_batch(&j, 16000, &t, &n);
    assert_int_equal(t, 8192);
    assert_int_equal(n, 1024);
    job_make("llama-3.1-8b", "--infer --engine vllm --vllm-version 0.8.4 --gpu H100", &j);
    est_vllm_batch(&j, 16000, &t, &n);
    assert_int_equal(t, 2048);
    assert_int_equal(n, 256);
    job_make("llama-3.1-8b", "--infer --engine vllm --vllm-version 0.11 --gpu A100-80GB", &j);
    est_vllm_batch(&j, 16000, &t, &n);
    assert_int_equal(t, 2048);
    assert_int_equal(n, 256);
    /* given settings win; max_num_seqs defaults to at most the batched tokens */
    job_make("llama-3.1-8b",
             "--infer --engine vllm --vllm-version 0.11 --gpu H100 "
             "--max-num-batched-tokens 512",
             &j);
    est_vllm_batch(&j, 16000, &t, &n);
    assert_int_equal(t, 512);
    assert_int_equal(n, 512);
    job_make("llama-3.1-8b",
             "--infer --engine vllm --vllm-version 0.11 --gpu H100 "
             "--max-num-seqs 16",
             &j);
    est_vllm_batch(&j, 16000, &t, &n);
    assert_int_equal(n, 16);

    /* the V1 sampler of 1024 sequences over Llama-3's 128256 logits outweighs the forward */
    job_make("llama-3.1-8b",
             "--infer --engine vllm --vllm-version 0.11 --gpu H100 "
             "--max-model-len 16000",
             &j);
    run(&j, &est);
    vocab = j.model.model->vocab;
    assert_int_equal(vocab, 128256);
    assert_int_equal(est->serving.sampler_bytes, 1024 * vocab * 38);
    assert_int_equal(est->serving.activation_peak_bytes,
                     1024 * vocab * 38 + 8192ull * j.model.model->hidden * 2 + ws_hopper);
    assert_int_equal(est->serving.max_num_seqs, 1024);
    gm_estimate_free(est);
    est = NULL;
    /* V0 profiles the same sort (SamplingParams(top_p=0.99, top_k=vocab - 1)) for its 256
     * sequences, after a forward of 20000 tokens, which is the larger here */
    job_make("llama-3.1-8b",
             "--infer --engine vllm --vllm-version 0.6.4 --gpu RTX-3090 --max-model-len 20000", &j);
    run(&j, &est);
    assert_int_equal(est->serving.sampler_bytes, 256 * vocab * 38);
    assert_true(est->serving.activation_peak_bytes > 256 * vocab * 38 + 20000ull * 4096 * 2);
    gm_estimate_free(est);
    est = NULL;
}

/* Qwen2.5-3B AWQ on an 8 GB card at 0.45 of it, as the 0.30 log of the validation rows (v076)
 * ran it, at vLLM 'version'. */
static void small_awq_server(const char *version, struct gm_job *j)
{
    char args[256];
    snprintf(args, sizeof args,
             "--infer --engine vllm --quant awq --vllm-version %s --gpu-memory 7.65 "
             "--gpu-memory-utilization 0.45 --max-model-len 1024 --enforce-eager",
             version);
    job_make("qwen2.5-3b", args, j);
}

/* The profile-run sampler by how the version samples: a top-k/top-p sort of every logit (38 B
 * per logit), V1 with FlashInfer's rejection sampling (top_k_top_p_sampling_from_logits: the
 * 16-bit logits, their fp32 copy, the top-k-masked copy and the softmax, 14 B), and the model
 * runner V2, the default for dense models from 0.25.1, whose dummy requests ask for no top-k or
 * top-p (the 16-bit logits and their fp32 copy, 6 B). */
static void test_vllm_profile_sampler_by_runner(void **state)
{
    struct gm_job j;
    uint64_t vocab;
    (void)state;
    /* 0.30 on a dense Qwen2.5 (AWQ, as the 0.30 log that printed 0.15 GiB of activation peak
     * ran it): V2, 256 sequences x 151936 logits x 6 B, and the KV pool that log's server had;
     * the sort would have left none */
    small_awq_server("0.30.0", &j);
    assert_true(est_vllm_runner_v2(&j, j.model.model));
    assert_int_equal(est_vllm_sampler_bytes_per_logit(&j, j.model.model), 6);
    run(&j, &est);
    vocab = j.model.model->vocab;
    assert_int_equal(vocab, 151936);
    assert_int_equal(est->serving.sampler_bytes, 256 * vocab * 6);
    assert_true(est->serving.activation_peak_bytes < 256 * vocab * 38);
    assert_true(est->serving.kv_pool_bytes > 0);
    gm_estimate_free(est);
    est = NULL;
    /* the same model before 0.25.1 runs V1 and sorts; a MoE model stays on V1 at 0.30 */
    small_awq_server("0.25.0", &j);
    assert_false(est_vllm_runner_v2(&j, j.model.model));
    assert_int_equal(est_vllm_sampler_bytes_per_logit(&j, j.model.model), 38);
    run(&j, &est);
    assert_int_equal(est->serving.kv_pool_bytes, 0);
    gm_estimate_free(est);
    est = NULL;
    job_make("qwen3-30b-a3b", "--infer --engine vllm --vllm-version 0.30.0 --gpu H100", &j);
    assert_false(est_vllm_runner_v2(&j, j.model.model));
    assert_int_equal(est_vllm_sampler_bytes_per_logit(&j, j.model.model), 38);
    /* V1 with FlashInfer's sampler: 14 B; V0 has no such path here, and V2 skips top-k/top-p */
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-80GB "
             "--flashinfer-sampler",
             &j);
    assert_int_equal(est_vllm_sampler_bytes_per_logit(&j, j.model.model), 14);
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.6.5 --gpu A100-80GB --flashinfer-sampler", &j);
    assert_int_equal(est_vllm_sampler_bytes_per_logit(&j, j.model.model), 38);
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.31.0 --gpu A100-80GB --flashinfer-sampler",
             &j);
    assert_int_equal(est_vllm_sampler_bytes_per_logit(&j, j.model.model), 6);
}

/* vLLM multiplies the total CUDA reports (torch.cuda.mem_get_info) by gpu_memory_utilization:
 * on a catalog GPU whose CUDA total a log printed (the A100-SXM4-80GB's 79.25 GiB) that
 * total, below nvidia-smi's 80 GiB; a capacity given with --gpu-memory is taken as vLLM's. */
static void test_vllm_budget_from_cuda_total(void **state)
{
    struct gm_job j;
    (void)state;
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-80GB "
             "--gpu-memory-utilization 0.5 --max-model-len 16384",
             &j);
    assert_int_equal(j.gpu.memory_bytes, 81920 * GM_MIB);
    assert_int_equal(j.gpu.cuda_bytes, 7925 * GM_GIB / 100);
    run(&j, &est);
    assert_int_equal(est->serving.budget_bytes, 7925 * GM_GIB / 200);
    assert_true(assumed(est, "79.25 GiB, what CUDA reports on the A100-80GB"));
    gm_estimate_free(est);
    est = NULL;
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.10.1 --gpu-memory 80 "
             "--gpu-memory-utilization 0.5 --max-model-len 16384",
             &j);
    assert_int_equal(j.gpu.cuda_bytes, 0);
    run(&j, &est);
    assert_int_equal(est->serving.budget_bytes, 40 * GM_GIB);
    gm_estimate_free(est);
    est = NULL;
    /* a catalog GPU without a printed CUDA total keeps nvidia-smi's */
    job_make("qwen2.5-7b", "--infer --engine vllm --gpu L4", &j);
    assert_int_equal(j.gpu.cuda_bytes, 0);
    run(&j, &est);
    assert_int_equal(est->serving.budget_bytes, (uint64_t)((double)(23034 * GM_MIB) * 0.9));
    gm_estimate_free(est);
    est = NULL;
    job_make("qwen2.5-7b", "--infer --engine vllm --gpu RTX-3090", &j);
    assert_int_equal(j.gpu.cuda_bytes, 2358 * GM_GIB / 100);
    /* the device properties' totals that public printouts give (deviceQuery, Paddle's
     * get_device_properties example): below nvidia-smi's by what the driver keeps */
    job_make("qwen2.5-7b", "--infer --engine vllm --gpu A100-40GB", &j);
    assert_int_equal(j.gpu.cuda_bytes, 40536 * GM_MIB);
    assert_int_equal(j.gpu.memory_bytes, 40960 * GM_MIB);
    run(&j, &est);
    assert_int_equal(est->serving.budget_bytes, (uint64_t)((double)(40536 * GM_MIB) * 0.9));
    gm_estimate_free(est);
    est = NULL;
    job_make("qwen2.5-7b", "--infer --engine vllm --gpu T4", &j);
    assert_int_equal(j.gpu.cuda_bytes, 15095 * GM_MIB);
    job_make("qwen2.5-7b", "--infer --engine vllm --gpu RTX-4090", &j);
    assert_int_equal(j.gpu.cuda_bytes, 25386352640ULL);
    assert_true(j.gpu.cuda_bytes < j.gpu.memory_bytes);
}

/* The KV cache size vLLM's log prints for a model with sliding-window layers beside full
 * attention (vllm/v1/core/kv_cache_utils.py: _get_kv_cache_groups_uniform_page_size,
 * get_kv_cache_config_from_groups, _report_kv_cache_config): num_blocks = pool / page /
 * group_size, printed as num_blocks / n_groups x block_size. */
static void test_vllm_tokens_logged_hybrid(void **state)
{
    struct gm_job j;
    (void)state;
    /* the one split of attention layers both the log's tokens and the bytes per token read */
    assert_int_equal(est_kv_sliding_layers(gm_model_catalog_find("gpt-oss-120b")), 18);
    assert_int_equal(est_kv_sliding_layers(gm_model_catalog_find("gemma-3-27b")), 52);
    assert_int_equal(est_kv_sliding_layers(gm_model_catalog_find("llama-3.1-8b")), 0);
    /* gpt-oss-120b at tp 4: 18 sliding + 18 full layers, group_size 18, 2 groups; one layer's
     * token is 2 KV heads x 64 x 2 (K, V) x 2 B = 512 B, a page of 16 tokens 8192 B; the pool
     * of 330018 blocks vLLM 0.10.1 made of "45.32 GiB" prints 330018 / 2 x 16 tokens */
    job_make("gpt-oss-120b",
             "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-80GB --gpus 4 "
             "--max-model-len 16384 --kv-cache-memory-bytes 48663134208",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.kv_tokens_logged, 2640144);
    /* the concurrency counts the windows: more tokens than the log's figure */
    assert_true(est->serving.kv_tokens > est->serving.kv_tokens_logged);
    gm_estimate_free(est);
    est = NULL;
    /* gemma-3-27b: 52 sliding + 10 full layers, group_size 10, 1 + 6 groups (the last padded);
     * 16 KV heads x 128 x 2 x 2 B = 8192 B a layer's token, 131072 B a page: 10 GiB is
     * 10737418240 / 131072 / 10 = 8192 blocks, printed 8192 / 7 x 16 */
    job_make("gemma-3-27b",
             "--infer --engine vllm --vllm-version 0.11 --gpu H100 "
             "--max-model-len 8192 --kv-cache-memory-bytes 10GiB",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.kv_tokens_logged, 8192 / 7 * 16);
    gm_estimate_free(est);
    est = NULL;
    /* before 0.10 and for one attention type the log prints the pool's tokens */
    job_make("gpt-oss-120b", "--infer --engine vllm --vllm-version 0.9.2 --gpu H100", &j);
    run(&j, &est);
    assert_int_equal(est->serving.kv_tokens_logged, est->serving.kv_tokens);
    gm_estimate_free(est);
    est = NULL;
    job_make("llama-3.1-8b", "--infer --engine vllm --vllm-version 0.11 --gpu H100", &j);
    run(&j, &est);
    assert_int_equal(est->serving.kv_tokens_logged, est->serving.kv_tokens);
    gm_estimate_free(est);
    est = NULL;
}

/* The bytes vLLM's MXFP4 layout adds where it takes 'want' on a GPU of compute capability
 * 'sm' at 'version' (PyTorch not given); 0 where it takes another backend. */
static uint64_t mxfp4(const struct gm_model *m, unsigned sm, uint32_t version, uint64_t tp,
                      uint64_t ep, enum est_mxfp4_backend want)
{
    enum est_mxfp4_backend b = est_vllm_mxfp4_backend(sm, version, 0);
    return b == want ? est_vllm_mxfp4_bytes(m, b, tp, ep) : 0;
}

/* gpt-oss's MXFP4 experts in vLLM's Marlin layout (mxfp4.py, Mxfp4Backend.MARLIN: the
 * intermediate share rounded up to 128, the hidden size to 256), 17/32 byte an element for
 * gate, up and down of 128 experts in 36 layers. */
static void test_vllm_mxfp4_marlin_padding(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("gpt-oss-120b");
    struct gm_job j;
    uint64_t marlin, triton;
    (void)state;
    assert_non_null(m);
    /* A100 at tp 4: 720 -> 768 and 2880 -> 3072 */
    assert_int_equal(mxfp4(m, 80, GM_VERSION(0, 10, 1), 4, 1, EST_MXFP4_MARLIN),
                     (768ull * 3072 - 720 * 2880) * 3 * 128 * 36 * 17 / 32);
    /* Hopper at 0.10.1 and tp 1: 2880 -> 2944 and 2880 -> 3072 */
    assert_int_equal(mxfp4(m, 90, GM_VERSION(0, 10, 1), 1, 1, EST_MXFP4_MARLIN),
                     (2944ull * 3072 - 2880 * 2880) * 3 * 128 * 36 * 17 / 32);
    /* Hopper from 0.11 (Triton), Blackwell B200 (FlashInfer), expert parallelism: none */
    assert_int_equal(mxfp4(m, 90, GM_VERSION(0, 11, 0), 1, 1, EST_MXFP4_MARLIN), 0);
    assert_int_equal(mxfp4(m, 100, GM_VERSION(0, 10, 1), 1, 1, EST_MXFP4_MARLIN), 0);
    assert_int_equal(mxfp4(m, 80, GM_VERSION(0, 10, 1), 1, 2, EST_MXFP4_MARLIN), 0);
    /* a checkpoint without MXFP4 experts keeps its shapes */
    assert_int_equal(mxfp4(gm_model_catalog_find("qwen3-30b-a3b"), 80, GM_VERSION(0, 10, 1), 1, 1,
                           EST_MXFP4_MARLIN),
                     0);
    /* the weights vLLM loads carry the padding */
    job_make("gpt-oss-120b", "--infer --engine vllm --vllm-version 0.10.1 --gpu H100", &j);
    run(&j, &est);
    marlin = gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS);
    gm_estimate_free(est);
    est = NULL;
    job_make("gpt-oss-120b", "--infer --engine vllm --vllm-version 0.11 --gpu H100", &j);
    run(&j, &est);
    triton = gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS);
    gm_estimate_free(est);
    est = NULL;
    /* Marlin's 5504827392 bytes of padding against the Triton layout's 3795517440 */
    assert_int_equal(marlin - triton, 5504827392ull - 3795517440ull);
    /* the layout depends on the install: the estimate says which it took and the other */
    job_make("gpt-oss-120b", "--infer --engine vllm --vllm-version 0.11 --gpu H100", &j);
    run(&j, &est);
    assert_true(assumed(est, "(+3.53 GiB a GPU); without triton_kernels installed vLLM takes "
                             "Marlin (+5.13 GiB)"));
    assert_true(assumed(est, "PyTorch >= 2.8.1 inferred from the vLLM version (0.11.0 pins "
                             "2.8.0): give --torch-version"));
    gm_estimate_free(est);
    est = NULL;
}

/* vLLM's Triton layout of MXFP4 experts on Hopper from 0.11 keeps the checkpoint's scales
 * beside the swizzled copies (rows padded to 256), and holds the biases in fp32: per expert
 * and layer of gpt-oss-120b at tp 1, the kept scales 5760 x 90 + 2880 x 90, the copies'
 * padding (5888 - 5760) x 90 + (3072 - 2880) x 90, the biases (5760 + 2880) x (4 - 2). */
static void test_vllm_mxfp4_triton_layout(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("gpt-oss-120b");
    uint64_t per = (5760ull + 2880) * 90 + (128ull + 192) * 90 + (5760ull + 2880) * 2;
    (void)state;
    assert_non_null(m);
    assert_int_equal(mxfp4(m, 90, GM_VERSION(0, 11, 0), 1, 1, EST_MXFP4_TRITON), per * 128 * 36);
    /* tp 2: the share 1440 rounded up to 64 is 1472, values and scales grow with it */
    {
        uint64_t i = 1472, h = 2880, s = 1440;
        uint64_t after = 2 * i * (h / 2) + h * (i / 2) + 2 * i * 90 + h * (i / 32) +
                         (3072 * 90 + 3072 * 46) + (2 * i + h) * 4;
        uint64_t before = s * h * 3 * 17 / 32 + (2 * s + h) * 2;
        assert_int_equal(mxfp4(m, 90, GM_VERSION(0, 11, 0), 2, 1, EST_MXFP4_TRITON),
                         (after - before) * 128 * 36);
    }
    /* Marlin before 0.11 on Hopper, other GPUs, expert parallelism, other checkpoints: none */
    assert_int_equal(mxfp4(m, 90, GM_VERSION(0, 10, 1), 1, 1, EST_MXFP4_TRITON), 0);
    assert_int_equal(mxfp4(m, 80, GM_VERSION(0, 11, 0), 1, 1, EST_MXFP4_TRITON), 0);
    assert_int_equal(mxfp4(m, 100, GM_VERSION(0, 11, 0), 1, 1, EST_MXFP4_TRITON), 0);
    assert_int_equal(mxfp4(m, 90, GM_VERSION(0, 11, 0), 1, 2, EST_MXFP4_TRITON), 0);
    assert_int_equal(mxfp4(gm_model_catalog_find("qwen3-30b-a3b"), 90, GM_VERSION(0, 11, 0), 1, 1,
                           EST_MXFP4_TRITON),
                     0);
}

/* _swizzle_mxfp4 keeps the strided layout on Hopper with PyTorch below 2.8.1: values and
 * scales stay the loaded tensors (gpt-oss-120b's intermediate 2880 needs no rounding to 64),
 * so only the fp32 biases add, (5760 + 2880) x (4 - 2) per expert and layer. */
static void test_vllm_mxfp4_layout_by_torch(void **state)
{
    struct gm_job j;
    uint64_t swizzled, strided;
    (void)state;
    assert_int_equal(est_vllm_mxfp4_backend(90, GM_VERSION(0, 11, 0), GM_VERSION(2, 8, 0)),
                     EST_MXFP4_TRITON_STRIDED);
    assert_int_equal(est_vllm_mxfp4_backend(90, GM_VERSION(0, 11, 0), GM_VERSION(2, 8, 1)),
                     EST_MXFP4_TRITON);
    assert_int_equal(est_vllm_mxfp4_backend(90, GM_VERSION(0, 11, 0), 0), EST_MXFP4_TRITON);
    assert_int_equal(est_vllm_mxfp4_backend(90, GM_VERSION(0, 10, 1), GM_VERSION(2, 8, 0)),
                     EST_MXFP4_MARLIN);
    assert_int_equal(
        est_vllm_mxfp4_bytes(gm_model_catalog_find("gpt-oss-120b"), EST_MXFP4_TRITON_STRIDED, 1, 1),
        (5760ull + 2880) * 2 * 128 * 36);
    job_make("gpt-oss-120b", "--infer --engine vllm --vllm-version 0.11 --gpu H100", &j);
    run(&j, &est);
    swizzled = gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS);
    gm_estimate_free(est);
    est = NULL;
    job_make("gpt-oss-120b",
             "--infer --engine vllm --vllm-version 0.11 --gpu H100 --torch-version 2.8.0", &j);
    run(&j, &est);
    strided = gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS);
    assert_int_equal(swizzled - strided, 3795517440ull - (5760ull + 2880) * 2 * 128 * 36);
    assert_true(assumed(est, "triton_kernels' strided layout (+0.07 GiB a GPU)"));
    assert_true(assumed(est, "PyTorch as --torch-version gives"));
    gm_estimate_free(est);
    est = NULL;
}

/* Two RTX 4090s have no peer access with NVIDIA's driver (the catalog's no_p2p): NCCL keeps
 * its buffers in host memory and vLLM's custom all-reduce stays off, as with --no-p2p, so the
 * non-torch figure a 0.7 log prints is the kernels alone. */
static void test_vllm_gpu_without_p2p(void **state)
{
    const struct gm_gpu *g;
    struct gm_job j;
    (void)state;
    assert_int_equal(gm_gpu_lookup("NVIDIA GeForce RTX 4090", &g, NULL), GM_OK);
    assert_true(g->no_p2p);
    assert_int_equal(gm_gpu_lookup("H100", &g, NULL), GM_OK);
    assert_false(g->no_p2p);
    job_make("qwen2.5-14b", "--infer --engine vllm --vllm-version 0.7.2 --gpu RTX-4090 --gpus 2",
             &j);
    run(&j, &est);
    /* NCCL's buffers in host memory: its device code alone (125 MiB), which 0.7 counts beside
     * the kernels before 0.9.2 (94 MiB) */
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_NCCL), 125 * GM_MIB);
    assert_int_equal(est->serving.non_torch_logged_bytes, 94 * GM_MIB + 125 * GM_MIB);
    gm_estimate_free(est);
    est = NULL;
    /* the same job on H100s: two communicators and the all-reduce buffers in the figure */
    job_make("qwen2.5-14b", "--infer --engine vllm --vllm-version 0.7.2 --gpu H100 --gpus 2", &j);
    run(&j, &est);
    assert_int_equal(est->serving.non_torch_logged_bytes,
                     94 * GM_MIB + 18 * GM_MIB + gm_estimate_kind_bytes(est, GM_KIND_NCCL));
    assert_true(gm_estimate_kind_bytes(est, GM_KIND_NCCL) > 0);
    gm_estimate_free(est);
    est = NULL;
}

/* The driver's own CUDA context by GPU: 8 MiB + 1986 B per resident thread (SMs x the most
 * threads an SM keeps: 1536 on Ampere GA10x, Ada and Blackwell consumer parts, 2048 on A100 and
 * H100, 1024 on Turing), from llama.cpp PR #23604's two bare contexts.  Checks the model on
 * the two published bare contexts it was not read from (RTX 6000 Ada 426 MiB, RTX 3090 256 MiB:
 * within 5 %), that vLLM's device line and 0.6.4's non-torch figure (total - free - allocated,
 * PR #9352: the context counted) take it, that --cuda-context still wins, and that a training
 * job keeps the 450 MiB that stands for the context with PyTorch's kernels. */
static void test_vllm_cuda_context_by_gpu(void **state)
{
    const uint64_t kernels = 94 * GM_MIB;
    struct gm_job j;
    struct gm_error err;
    uint64_t ctx, gap = 0;
    (void)state;
    job_make("llama-3.1-8b", "--infer --engine vllm --gpu RTX-6000-Ada", &j);
    ctx = est_cuda_bare_context_bytes(&j);
    assert_int_equal(ctx, 8 * GM_MIB + 142ull * 1536 * 1986);
    assert_true(ctx > 426 * GM_MIB * 95 / 100 && ctx < 426 * GM_MIB * 105 / 100);
    job_make("llama-3.1-8b", "--infer --engine vllm --gpu RTX-3090", &j);
    ctx = est_cuda_bare_context_bytes(&j);
    assert_true(ctx > 256 * GM_MIB * 95 / 100 && ctx < 256 * GM_MIB * 105 / 100);
    /* threads per SM by compute capability */
    job_make("llama-3.1-8b", "--infer --engine vllm --gpu H100", &j);
    assert_int_equal(est_cuda_bare_context_bytes(&j), 8 * GM_MIB + 132ull * 2048 * 1986);
    job_make("llama-3.1-8b", "--infer --engine vllm --gpu T4", &j);
    assert_int_equal(est_cuda_bare_context_bytes(&j), 8 * GM_MIB + 40ull * 1024 * 1986);
    /* cc 12.x keeps 1536 threads an SM (RTX 5090, 170 SMs: 502 MiB, not 667 at 2048); cc 8.0
     * keeps 2048 (A100, 108 SMs) */
    job_make("llama-3.1-8b", "--infer --engine vllm --gpu RTX-5090", &j);
    assert_int_equal(est_cuda_bare_context_bytes(&j), 8 * GM_MIB + 170ull * 1536 * 1986);
    job_make("llama-3.1-8b", "--infer --engine vllm --gpu A100-80GB", &j);
    assert_int_equal(est_cuda_bare_context_bytes(&j), 8 * GM_MIB + 108ull * 2048 * 1986);
    /* a capacity given names no SMs */
    job_make("llama-3.1-8b", "--infer --engine vllm --gpu-memory 23.58", &j);
    assert_int_equal(est_cuda_bare_context_bytes(&j), 0);

    /* 0.6.4 on the RTX 3090 of vLLM issue #10517: the log's non-torch figure is the context,
     * the kernels and the cache the load leaves in PyTorch's allocator (PR #9352 subtracts
     * allocated bytes after empty_cache()) */
    job_make("llama-3.1-8b",
             "--infer --engine vllm --vllm-version 0.6.4 --gpu RTX-3090 --max-model-len 20000", &j);
    run(&j, &est);
    ctx = gm_estimate_kind_bytes(est, GM_KIND_CUDA_CONTEXT);
    assert_int_equal(ctx, 8 * GM_MIB + 82ull * 1536 * 1986);
    assert_int_equal(est_vllm_load_cache_gap(j.model.model, NULL, false, 1, 1, &gap, NULL, &err),
                     GM_OK);
    assert_true(gap > 0);
    assert_int_equal(est->serving.non_torch_logged_bytes, ctx + kernels + gap);
    /* the estimate says which context it used, from the same rule: the figure, its source and
     * the SMs it follows (the JSON's inputs); 1536 threads were measured, no extrapolation */
    assert_int_equal(est->context.bytes, ctx);
    assert_int_equal(est->context.source, GM_EST_CONTEXT_DRIVER_BY_SMS);
    assert_string_equal(gm_est_context_source_name(est->context.source), "driver_by_sms");
    assert_int_equal(est->context.sms, 82);
    assert_int_equal(est->context.threads_per_sm, 1536);
    assert_false(est->context.extrapolated);
    assert_false(assumed(est, "extrapolated"));
    gm_estimate_free(est);
    est = NULL;
    /* an A100's 2048 threads an SM are an extrapolation: said, and the range's low end is the
     * same SMs at 1536 threads (0.9 x that), wider than the -10 % of a measured occupancy */
    job_make("llama-3.1-8b", "--infer --engine vllm --vllm-version 0.6.4 --gpu A100-80GB", &j);
    run(&j, &est);
    assert_int_equal(est->context.bytes, 8 * GM_MIB + 108ull * 2048 * 1986);
    assert_true(est->context.extrapolated);
    assert_true(assumed(est, "extrapolated from two 1536-thread cards"));
    gm_estimate_free(est);
    est = NULL;
    {
        struct est_ctx cx;
        struct gm_estimate scratch;
        memset(&cx, 0, sizeof cx);
        memset(&scratch, 0, sizeof scratch);
        cx.job = &j;
        cx.e = &scratch;
        cx.bound = EST_LOW;
        assert_int_equal(est_cuda_context(&cx).bytes,
                         est_round(0.9 * (double)(8 * GM_MIB + 108ull * 1536 * 1986)));
        cx.bound = EST_HIGH;
        assert_int_equal(est_cuda_context(&cx).bytes,
                         est_round(1.2 * (double)(8 * GM_MIB + 108ull * 2048 * 1986)));
    }
    /* given only a capacity vLLM keeps the default, and says that it counts kernels twice */
    job_make("llama-3.1-8b", "--infer --engine vllm --vllm-version 0.6.4 --gpu-memory 23.58", &j);
    run(&j, &est);
    assert_int_equal(est->context.bytes, 450 * GM_MIB);
    assert_int_equal(est->context.source, GM_EST_CONTEXT_DEFAULT);
    assert_int_equal(est->context.sms, 0);
    assert_true(assumed(est, "counts again"));
    gm_estimate_free(est);
    est = NULL;
    /* given, the context is what was given */
    job_make("llama-3.1-8b",
             "--infer --engine vllm --vllm-version 0.6.4 --gpu RTX-3090 --max-model-len 20000 "
             "--cuda-context 450MiB",
             &j);
    run(&j, &est);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_CUDA_CONTEXT), 450 * GM_MIB);
    assert_int_equal(est->serving.non_torch_logged_bytes, 450 * GM_MIB + kernels + gap);
    assert_int_equal(est->context.source, GM_EST_CONTEXT_GIVEN);
    assert_int_equal(est->context.sms, 0);
    gm_estimate_free(est);
    est = NULL;
    /* a PyTorch training job on the same GPU keeps the context with its kernels */
    job_make("llama-3.1-8b", "--train --lora --gpu RTX-3090 --seq 512", &j);
    run(&j, &est);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_CUDA_CONTEXT), 450 * GM_MIB);
    gm_estimate_free(est);
    est = NULL;
}

/* The weights vLLM logs and charges are the allocated bytes its load added (DeviceMemoryProfiler:
 * reset_peak_memory_stats, then max_memory_allocated, around load_model), and PyTorch counts
 * whole blocks: the estimate takes them from the load's replay.  A 16-bit Llama-3.1-8B holds its
 * tensors plus the rotary cos/sin cache, 131072 positions x 128 x 2 B, a buffer no checkpoint
 * stores, and a few MiB of unsplit block remainders at most; Phi-4 as GPTQ through Marlin (v011)
 * holds its repacked tensors, Marlin's workspaces and the whole 88 and 44 MiB blocks of each
 * layer's gate_up_proj and down_proj qweights (87.5 and 43.75 MiB asked). */
/* The scheme of the v011 log's checkpoint (Phi-4-AutoRound-GPTQ-4bit): GPTQ 4-bit, groups of
 * 128, zeros and g_idx */
static void gptq_4bit_g128(struct gm_quant *q)
{
    memset(q, 0, sizeof *q);
    q->method = GM_QUANT_GPTQ;
    q->bits = 4;
    q->group_size = 128;
    q->zeros = true;
    q->g_idx = true;
}

static void test_vllm_weights_allocated(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("llama-3.1-8b");
    struct gm_error err;
    struct gm_quant q;
    struct gm_job j;
    uint64_t alloc = 0, stored, rope;
    const char *why = NULL;
    (void)state;
    assert_non_null(m);
    job_make("llama-3.1-8b", "--infer --gpu RTX-3090", &j);
    run(&j, &est);
    stored = gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS);
    gm_estimate_free(est);
    est = NULL;
    assert_int_equal(est_vllm_load_allocated(m, NULL, false, 1, 1, &alloc, &why, &err), GM_OK);
    assert_null(why);
    rope = m->max_positions * (m->head_dim ? m->head_dim : m->hidden / m->n_heads) * 2;
    assert_true(alloc >= stored + rope && alloc < stored + rope + 8 * GM_MIB);
    /* the estimate of v008's start charges those bytes as the weights */
    job_make("llama-3.1-8b",
             "--infer --engine vllm --vllm-version 0.6.4 --gpu RTX-3090 --max-model-len 20000", &j);
    run(&j, &est);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS), alloc);
    assert_true(assumed(est, "allocated after a replay of the load"));
    gm_estimate_free(est);
    est = NULL;
    /* and of v011's, through Marlin */
    gptq_4bit_g128(&q);
    m = gm_model_catalog_find("microsoft/phi-4");
    assert_int_equal(est_vllm_load_allocated(m, &q, true, 1, 1, &alloc, NULL, &err), GM_OK);
    job_make("microsoft/phi-4",
             "--infer --engine vllm --quant gptq --vllm-version 0.6.5 --gpu-memory 79.25 "
             "--gpu-memory-utilization 0.15 --max-model-len 2048",
             &j);
    run(&j, &est);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS), alloc);
    gm_estimate_free(est);
    est = NULL;
    /* a model the replay does not cover keeps the stored bytes */
    assert_int_equal(est_vllm_load_allocated(gm_model_catalog_find("qwen3-30b-a3b"), NULL, false, 1,
                                             1, &alloc, &why, &err),
                     GM_OK);
    assert_int_equal(alloc, 0);
    assert_string_equal(why, "mixture-of-experts models");
}

/* The load is replayed once per shape of the job, not once per run: the point estimate and
 * the two ends of its range (which change none of its inputs) share one replay, a run of the
 * same job into the same estimate answers from it, and a job of another shape (tp 2) replays
 * once more.  What the estimate keeps is what a fresh replay gives: the weights at every
 * bound, and the allocated bytes and the cache gap for tp 2. */
static void test_vllm_load_once_per_shape(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("microsoft/phi-4");
    const char *job = "--infer --engine vllm --quant gptq --vllm-version 0.6.5 --gpu-memory 79.25 "
                      "--gpu-memory-utilization 0.15 --max-model-len 2048";
    char settings[256];
    struct gm_estimate *e = NULL;
    struct gm_error err;
    struct gm_quant q;
    struct gm_job j;
    uint64_t alloc, gap, kept_alloc, kept_gap;
    (void)state;
    gptq_4bit_g128(&q);
    assert_int_equal(est_vllm_load_allocated(m, &q, true, 1, 1, &alloc, NULL, &err), GM_OK);
    job_make("microsoft/phi-4", job, &j);
    run(&j, &e);
    assert_int_equal(est_vllm_load_runs(e), 1);
    assert_int_equal(gm_estimate_kind_bytes(e, GM_KIND_WEIGHTS), alloc);
    for (size_t k = 0; k < 2; k++)
        assert_int_equal(gm_estimate_kind_bytes(e->store->ends[k], GM_KIND_WEIGHTS), alloc);
    run(&j, &e);
    assert_int_equal(est_vllm_load_runs(e), 1);
    snprintf(settings, sizeof settings, "%s --gpus 2 --tp 2", job);
    job_make("microsoft/phi-4", settings, &j);
    run(&j, &e);
    assert_int_equal(est_vllm_load_runs(e), 2);
    run(&j, &e);
    assert_int_equal(est_vllm_load_runs(e), 2);
    assert_int_equal(est_vllm_load(m, &q, true, 2, 1, NULL, &alloc, &gap, NULL, &err), GM_OK);
    assert_int_equal(
        est_vllm_load(m, &q, true, 2, 1, &e->store->loads, &kept_alloc, &kept_gap, NULL, &err),
        GM_OK);
    assert_int_equal(est_vllm_load_runs(e), 2);
    assert_int_equal(kept_alloc, alloc);
    assert_int_equal(kept_gap, gap);
    assert_true(gap > 0);
    gm_estimate_free(e);
}

static void test_vllm_load_cache_gap(void **state)
{
    /* vLLM 0.6.5 and 0.6.6 subtract the allocated, not the reserved, bytes from the device's
     * use (memory_profiling before PR #11809), so the free parts of the segments the load
     * leaves partly used count as non-torch.  Phi-4 as GPTQ 4-bit g128 through Marlin (the
     * v011 log's setup): each repacked qkv_proj qweight, 640 x 7680 int32 = 19,660,800 B, gets
     * its own 20 MiB segment and leaves 1,310,720 B of it free, and the freed g_idx, qzeros
     * and pre-permutation scales leave holes in the small pool, so the replay finds more than
     * 40 x 1.25 MiB and more than without the repack (the plain GPTQ kernel below 8.0).  The
     * fused qkv and gate_up shards are copied in through GPU temporaries (non-contiguous
     * destinations), whose cached segments the repacked tensors then split: 176 MiB with
     * them, 152 MiB without (compared below with the replay that leaves them out) */
    const struct gm_model *m = gm_model_catalog_find("microsoft/phi-4");
    struct gm_quant q;
    struct gm_error err;
    struct gm_job j;
    uint64_t marlin, plain, bf16, kernels = 94 * GM_MIB;
    const char *why = NULL;
    (void)state;
    assert_non_null(m);
    gptq_4bit_g128(&q);
    assert_int_equal(est_vllm_load_cache_gap(m, &q, true, 1, 1, &marlin, NULL, &err), GM_OK);
    assert_int_equal(est_vllm_load_cache_gap(m, &q, false, 1, 1, &plain, NULL, &err), GM_OK);
    assert_int_equal(est_vllm_load_cache_gap(m, NULL, false, 1, 1, &bf16, NULL, &err), GM_OK);
    assert_true(marlin > 40 * 1310720);
    /* the shard temporaries' cached segments, split by the repacked tensors, add to it */
    assert_int_equal(est_vllm_load_cache_replay(m, &q, true, false, 1, 1, &plain, NULL, &err),
                     GM_OK);
    assert_true(marlin > plain && plain > 40 * 1310720);
    assert_true(marlin > plain);
    assert_true(marlin > bf16);
    /* act-order Marlin, mixture-of-experts models and pipeline stages are not replayed, and
     * the replay says why (the reason an assumption line names) */
    q.desc_act = true;
    assert_int_equal(est_vllm_load_cache_gap(m, &q, true, 1, 1, &plain, &why, &err), GM_OK);
    assert_int_equal(plain, 0);
    assert_string_equal(why, "act-order Marlin");
    assert_int_equal(est_vllm_load_cache_gap(gm_model_catalog_find("qwen3-30b-a3b"), NULL, false, 1,
                                             1, &plain, &why, &err),
                     GM_OK);
    assert_int_equal(plain, 0);
    assert_string_equal(why, "mixture-of-experts models");
    assert_int_equal(est_vllm_load_cache_gap(m, NULL, false, 1, 2, &plain, &why, &err), GM_OK);
    assert_int_equal(plain, 0);
    assert_string_equal(why, "pipeline stages (pp > 1)");
    assert_int_equal(est_vllm_load_cache_gap(m, NULL, false, 1, 1, &plain, &why, &err), GM_OK);
    assert_true(plain > 0);
    assert_null(why);
    /* an estimate of a model the replay skips says the cache is not charged, and why */
    job_make("qwen3-30b-a3b", "--infer --engine vllm --vllm-version 0.6.5 --gpu H100", &j);
    run(&j, &est);
    assert_true(assumed(est, "not replayed for mixture-of-experts models"));
    gm_estimate_free(est);
    est = NULL;
    /* the estimate of that start: 0.6.5 logs the kernels and the replayed cache, 0.7.0 (the
     * reserved-based figure) the kernels alone */
    job_make("microsoft/phi-4",
             "--infer --engine vllm --quant gptq --vllm-version 0.6.5 --gpu-memory 79.25 "
             "--gpu-memory-utilization 0.15 --max-model-len 2048",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.non_torch_logged_bytes, kernels + marlin);
    assert_true(assumed(est, "partly used segments"));
    gm_estimate_free(est);
    est = NULL;
    /* Marlin takes 4 or 8 bits in groups of -1, 32, 64 or 128 (check_marlin_supported):
     * group-256 weights go through the plain GPTQ kernel even where the GPU runs Marlin, so
     * their replay has no repack (vllm_gptq_marlin) */
    q.desc_act = false;
    q.group_size = 256;
    assert_int_equal(est_vllm_load_cache_gap(m, &q, false, 1, 1, &plain, NULL, &err), GM_OK);
    assert_int_equal(est_vllm_load_cache_gap(m, &q, true, 1, 1, &bf16, NULL, &err), GM_OK);
    assert_true(plain && plain != bf16);
    job_make("microsoft/phi-4",
             "--infer --engine vllm --quant gptq --group-size 256 --vllm-version 0.6.5 "
             "--gpu-memory 79.25 --gpu-memory-utilization 0.15 --max-model-len 2048",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.non_torch_logged_bytes, kernels + plain);
    gm_estimate_free(est);
    est = NULL;
    job_make("microsoft/phi-4",
             "--infer --engine vllm --quant gptq --vllm-version 0.7.0 --gpu-memory 79.25 "
             "--gpu-memory-utilization 0.15 --max-model-len 2048",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.non_torch_logged_bytes, kernels);
    gm_estimate_free(est);
    est = NULL;
}

/* The kernels and handles a vLLM version counts as non-torch on one GPU (est_vllm_kernel_bytes):
 * 0.9.2 to 0.10 print 0.02 GiB on one GPU (row v039, vLLM 0.10.2; 21474836 B as the table
 * holds it), read as 20 MiB; from 0.11, whose snapshot follows the communicators, 0.14 GiB on
 * an H100 (row v016, vLLM 0.11.0; 150323855 B), read as 143 MiB; the versions before take
 * row v008's 94 MiB (0.9.1, the global formula; 0.7.2, V0), and a single-GPU 0.10.2 start
 * charges exactly 20 MiB, where 0.11 charges 143 MiB, each with the assumption that names
 * its row. */
static void test_vllm_kernels_by_version(void **state)
{
    struct gm_job j;
    (void)state;
    assert_int_equal(est_vllm_kernel_bytes(GM_VERSION(0, 9, 2)), 20 * GM_MIB);
    assert_int_equal(est_vllm_kernel_bytes(GM_VERSION(0, 10, 0)), 20 * GM_MIB);
    assert_int_equal(est_vllm_kernel_bytes(GM_VERSION(0, 10, 2)), 20 * GM_MIB);
    assert_int_equal(est_vllm_kernel_bytes(GM_VERSION(0, 9, 1)), 94 * GM_MIB);
    assert_int_equal(est_vllm_kernel_bytes(GM_VERSION(0, 11, 0)), 143 * GM_MIB);
    assert_int_equal(est_vllm_kernel_bytes(GM_VERSION(0, 26, 1)), 143 * GM_MIB);
    assert_int_equal(est_vllm_kernel_bytes(GM_VERSION(0, 7, 2)), 94 * GM_MIB);
    assert_int_equal(est_vllm_kernel_bytes(0), 143 * GM_MIB);
    /* v039's 0.02 GiB printed, within the two decimals it was printed to */
    assert_true(est_vllm_kernel_bytes(GM_VERSION(0, 10, 2)) + (GM_GIB / 200) >= 21474836);
    assert_true(est_vllm_kernel_bytes(GM_VERSION(0, 10, 2)) <= 21474836 + (GM_GIB / 200));
    /* v016's 0.14 GiB printed, likewise */
    assert_true(est_vllm_kernel_bytes(GM_VERSION(0, 11, 0)) + (GM_GIB / 200) >= 150323855);
    assert_true(est_vllm_kernel_bytes(GM_VERSION(0, 11, 0)) <= 150323855 + (GM_GIB / 200));
    /* v039's start, and the same at 0.11 */
    for (size_t i = 0; i < 2; i++) {
        char args[160];
        snprintf(args, sizeof args,
                 "--infer --engine vllm --vllm-version %s --gpu-memory 23.65 --max-model-len 4096 "
                 "--max-num-seqs 1",
                 i ? "0.11" : "0.10.2");
        job_make("qwen2.5-3b", args, &j);
        run(&j, &est);
        assert_int_equal(est->serving.non_torch_logged_bytes, i ? 143 * GM_MIB : 20 * GM_MIB);
        /* the range's low end (one GPU: no all-reduce buffers): 0.10's 20 MiB is below the
         * 64 MiB low end the larger figure takes, so its low end is 0, not above the point */
        /* each figure is one log's, and the assumption names that log's row */
        assert_int_equal(assumed(est, "measured from one log (row v039"), i == 0);
        assert_int_equal(assumed(est, "measured from one log (row v016"), i == 1);
        assert_true(est->range.sources & GM_UNCERTAIN_ENGINE);
        assert_non_null(est->store->ends[0]);
        assert_int_equal(est->store->ends[0]->serving.non_torch_bytes, i ? 64 * GM_MIB : 0);
        assert_int_equal(est->store->ends[1]->serving.non_torch_bytes, GM_GIB / 2);
        gm_estimate_free(est);
        est = NULL;
    }
}

/* What vLLM 0.3.2 to 0.6.3 charge for the profile run: the segments PyTorch's caching allocator
 * reserved for it, since determine_num_available_blocks takes init_device's free memory less
 * the free memory right after profile_run(), with no empty_cache() between (vllm/worker/
 * worker.py, 0.6-era copy @ 002a0ba).  Row v010's start (deepseek-coder-6.7b, 32 heads of 128
 * with 32 KV heads, hidden 4096, MLP 11008, at tp 2, its 65536 positions batched whole in
 * 0.5.0) walks a LlamaDecoderLayer with 16-bit tensors of 65536 tokens: the residual and
 * input_layernorm's output 512 MiB each, qkv_proj's 768, the attention's output buffer and the
 * backend's result 256 each, o_proj's 512; then gate_up_proj's 1376 finds no free block that
 * large among the 768, 256, 256 and 512 freed and takes a segment of its own, SiLU-and-mul's
 * 688 splits the 768 block, down_proj's 512 reuses the input's.  Reserved 512 + 512 + 768 + 256
 * + 256 + 512 + 1376 = 4192 MiB against the allocated peak 512 + 512 + 1376 + 688 + 512 = 3600
 * MiB: 592 MiB more, which the budget pays in those versions only, and the assumption says.
 * Where the sampler's phase peaks higher, only what the forward's segments reserve above that
 * peak is added.  A mixture of experts is not replayed (0). */
static void test_vllm_profile_reserve(void **state)
{
    struct gm_job j;
    struct gm_error err;
    uint64_t extra = 1;
    (void)state;
    job_make("deepseek-ai/deepseek-coder-6.7b-instruct",
             "--infer --engine vllm --vllm-version 0.5.0 --gpu T4 --gpus 2 --kv-dtype fp16", &j);
    assert_int_equal(est_vllm_profile_reserve(j.model.model, 65536, 2, &extra, &err), GM_OK);
    assert_int_equal(extra, 592 * GM_MIB);
    run(&j, &est);
    assert_int_equal(est->serving.max_num_batched_tokens, 65536);
    assert_true(assumed(est, "reserved segments (init_device's free memory less the free memory "
                             "after it): 592 MiB"));
    /* the pool is what the budget leaves after weights, profile peak, non-torch and the 592 MiB */
    assert_true(est->serving.budget_bytes - est->serving.kv_pool_bytes -
                    (gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS) +
                     est->serving.activation_peak_bytes + est->serving.non_torch_logged_bytes +
                     extra) <
                16 * est->serving.kv_bytes_per_token);
    gm_estimate_free(est);
    est = NULL;
    /* at 2048 positions the sampler's phase (256 sequences x 32256 logits, sorted) peaks
     * above the forward's reserved segments, which it reuses: nothing more is charged */
    job_make("deepseek-ai/deepseek-coder-6.7b-instruct",
             "--infer --engine vllm --vllm-version 0.5.0 --gpu T4 --gpus 2 --kv-dtype fp16 "
             "--max-model-len 2048",
             &j);
    run(&j, &est);
    assert_false(assumed(est, "reserved segments"));
    assert_true(est->serving.budget_bytes - est->serving.kv_pool_bytes -
                    (gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS) +
                     est->serving.activation_peak_bytes + est->serving.non_torch_logged_bytes) <
                16 * est->serving.kv_bytes_per_token);
    gm_estimate_free(est);
    est = NULL;
    /* 0.6.4 takes the global formula, after an empty_cache(): not charged there */
    job_make("deepseek-ai/deepseek-coder-6.7b-instruct",
             "--infer --engine vllm --vllm-version 0.6.4 --gpu T4 --gpus 2 --kv-dtype fp16", &j);
    run(&j, &est);
    assert_false(assumed(est, "reserved segments"));
    gm_estimate_free(est);
    est = NULL;
    job_make("qwen3-30b-a3b", "--infer --engine vllm --vllm-version 0.5.0 --gpu H100", &j);
    assert_int_equal(est_vllm_profile_reserve(j.model.model, 8192, 1, &extra, &err), GM_OK);
    assert_int_equal(extra, 0);
}

/* vLLM's non-torch figure by where the version takes its baseline: before 0.2.5 none (the
 * budget pays PyTorch's peak alone), 0.2.5 to 0.3.1 and 0.6.4 all the device holds beside
 * PyTorch (the context too), 0.3.2 to 0.6.3 (init_device's free memory as the baseline),
 * 0.6.5 to 0.7 (the V0 engine) and 0.10 the growth since a snapshot before the communicators
 * (NCCL and the custom all-reduce's two cudaMalloc'd IPC buffers of 8 MiB + metadata and
 * 8 MiB in it), 0.11 only the kernels (the snapshot follows the communicators); the budget
 * pays that figure in each version. */
static void test_vllm_non_torch_by_version(void **state)
{
    /* the versions that charge NCCL and the all-reduce buffers, and whether the context too:
     * total - free after the profile run (0.2.5 to 0.3.1, PR #2031) and total - free -
     * allocated (0.6.4, PR #9352) count it; a baseline taken after the context and before
     * the communicators does not (0.3.2 to 0.6.3 in init_device, 0.6.5 to 0.7, 0.10) */
    static const struct {
        const char *version;
        bool context;
        uint64_t kernels; /* est_vllm_kernel_bytes: 0.10's 20 MiB, 0.11's 143, else 94 */
        unsigned comms;   /* NCCL communicators: the world group's too in 0.4 to 0.5.0 */
        bool gather;      /* V0 from 0.2.7: rank 0 receives the logits' gather */
    } charged[] = {
        {"0.2.5", true, 94 * GM_MIB, 2, false}, {"0.2.6", true, 94 * GM_MIB, 2, false},
        {"0.2.7", true, 94 * GM_MIB, 2, true}, /* the gather's first version */
        {"0.3.1", true, 94 * GM_MIB, 2, true},  {"0.3.2", false, 94 * GM_MIB, 2, true},
        {"0.4.0", false, 94 * GM_MIB, 3, true}, /* the world warm-up's first */
        {"0.5.0", false, 94 * GM_MIB, 3, true}, {"0.6.3", false, 94 * GM_MIB, 2, true},
        {"0.6.4", true, 94 * GM_MIB, 2, true},  {"0.6.5", false, 94 * GM_MIB, 2, true},
        {"0.7.2", false, 94 * GM_MIB, 2, true}, {"0.10.1", false, 20 * GM_MIB, 2, false}};
    /* 'kernels' of 0.11 and the current release; 'kernels10' of 0.9.2 to 0.10; 'kernels_v0' of V0
     */
    const uint64_t kernels = 143 * GM_MIB, kernels10 = 20 * GM_MIB, kernels_v0 = 94 * GM_MIB,
                   ar = 18 * GM_MIB;
    char args[160];
    struct gm_job j;
    uint64_t context, nccl, need, gap, reserve;
    (void)state;
    /* CustomAllreduce._SUPPORTED_WORLD_SIZES, each buffer in 2 MiB granules */
    assert_int_equal(est_vllm_custom_allreduce_bytes(1, true, GM_GPU_LINK_NVLINK), 0);
    assert_int_equal(est_vllm_custom_allreduce_bytes(2, true, GM_GPU_LINK_NVLINK), ar);
    assert_int_equal(est_vllm_custom_allreduce_bytes(3, true, GM_GPU_LINK_NVLINK), 0);
    assert_int_equal(est_vllm_custom_allreduce_bytes(8, true, GM_GPU_LINK_NVLINK), ar);
    assert_int_equal(est_vllm_custom_allreduce_bytes(2, false, GM_GPU_LINK_NVLINK), 0);
    /* on PCIe alone two GPUs keep it, more than two do not (CustomAllreduce.__init__: "not
     * supported on more than two PCIe-only GPUs", custom_all_reduce.py @ 00d618a) */
    assert_int_equal(est_vllm_custom_allreduce_bytes(2, true, GM_GPU_LINK_PCIE), ar);
    assert_int_equal(est_vllm_custom_allreduce_bytes(4, true, GM_GPU_LINK_PCIE), 0);
    assert_int_equal(est_vllm_custom_allreduce_bytes(8, true, GM_GPU_LINK_PCIE), 0);
    /* a tensor-parallel group across two nodes (the two-node 0.10.1 log of the validation
     * rows, v027, prints "Custom allreduce is disabled because this process group spans across
     * nodes"): no IPC buffers, and with one GPU per node NCCL's buffers go through its network
     * transport, in host memory, so 0.10.1 counts the kernels alone where one node counts the
     * two communicators and the buffers too */
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-40GB --gpus 2 "
             "--gpus-per-node 1 --gpu-memory-utilization 0.5 --max-model-len 16384",
             &j);
    run(&j, &est);
    need = est->serving.non_torch_logged_bytes;
    assert_int_equal(est->serving.non_torch_bytes, kernels10);
    /* NCCL's device code (125 MiB) is all it holds on the GPU there */
    assert_int_equal(need, kernels10 + 125 * GM_MIB);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_NCCL), 125 * GM_MIB);
    gm_estimate_free(est);
    est = NULL;
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-40GB --gpus 2 "
             "--gpu-memory-utilization 0.5 --max-model-len 16384",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.non_torch_bytes, kernels10 + ar);
    /* two communicators over NVLink (the catalog's A100 is the SXM board): 24 channels x one
     * 12 MiB (send, receive) pair each and NVIDIA/nccl#964's 256 MiB, cuMem off in 0.10, beside
     * the device code counted */
    assert_int_equal(est->serving.non_torch_logged_bytes, need + ar + 2 * (24 * 12 + 256) * GM_MIB);
    gm_estimate_free(est);
    est = NULL;

    /* 0.11: pynccl and the custom all-reduce sit in the baseline, but the device group's
     * communicator is created by the profile run's all-gather of the logits, so tp 2 prints
     * the kernels and what NCCL connects for it; without peer access NCCL keeps that in host
     * memory, and before 0.11 it is inside the two communicators charged already */
    assert_int_equal(est_vllm_profile_nccl_bytes(GM_VERSION(0, 11, 0), 2, true), 420 * GM_MIB);
    assert_int_equal(est_vllm_profile_nccl_bytes(0, 8, true), 420 * GM_MIB);
    assert_int_equal(est_vllm_profile_nccl_bytes(GM_VERSION(0, 11, 0), 1, true), 0);
    assert_int_equal(est_vllm_profile_nccl_bytes(GM_VERSION(0, 11, 0), 2, false), 0);
    assert_int_equal(est_vllm_profile_nccl_bytes(GM_VERSION(0, 10, 1), 2, true), 0);
    job_make("llama-3.1-8b", "--infer --engine vllm --vllm-version 0.11 --gpu H100", &j);
    run(&j, &est);
    assert_int_equal(est->serving.non_torch_logged_bytes, kernels);
    assert_int_equal(est->serving.non_torch_bytes, kernels);
    gm_estimate_free(est);
    est = NULL;
    job_make("llama-3.1-8b", "--infer --engine vllm --vllm-version 0.11 --gpu H100 --gpus 2", &j);
    run(&j, &est);
    assert_int_equal(est->serving.non_torch_logged_bytes, kernels + 420 * GM_MIB);
    assert_int_equal(est->serving.non_torch_bytes, kernels + ar);
    gm_estimate_free(est);
    est = NULL;
    job_make("llama-3.1-8b",
             "--infer --engine vllm --vllm-version 0.11 --gpu H100 --gpus 2 --no-p2p", &j);
    run(&j, &est);
    assert_int_equal(est->serving.non_torch_logged_bytes, kernels);
    gm_estimate_free(est);
    est = NULL;
    /* with one GPU per node that communicator connects through NCCL's network transport,
     * whose buffers are host memory as the start-up communicators' are */
    job_make("llama-3.1-8b",
             "--infer --engine vllm --vllm-version 0.11 --gpu H100 --gpus 2 --gpus-per-node 1", &j);
    run(&j, &est);
    /* the device code and, with cuMem from 0.11, the small allocations in 2 MiB granules
     * (3 x 32 + 2 for 24 channels over NVLink) of the two communicators */
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_NCCL), 125 * GM_MIB + 2 * 98 * 2 * GM_MIB);
    assert_int_equal(est->serving.non_torch_logged_bytes, kernels);
    gm_estimate_free(est);
    est = NULL;
    /* the custom all-reduce follows the resolved layout: 8 GPUs of 4 per node put a tp 8
     * group on two nodes, 8 GPUs alone fill one node */
    job_make("llama-3.1-8b",
             "--infer --engine vllm --vllm-version 0.10.1 --gpu H100 --gpus 8 --gpus-per-node 4",
             &j);
    run(&j, &est);
    assert_int_equal(est->layout.gpus_per_node, 4);
    assert_int_equal(est->serving.non_torch_bytes, kernels10);
    gm_estimate_free(est);
    est = NULL;
    job_make("llama-3.1-8b", "--infer --engine vllm --vllm-version 0.10.1 --gpu H100 --gpus 8", &j);
    run(&j, &est);
    assert_int_equal(est->layout.gpus_per_node, 8);
    assert_int_equal(est->serving.non_torch_bytes, kernels10 + ar);
    gm_estimate_free(est);
    est = NULL;

    for (size_t i = 0; i < sizeof charged / sizeof charged[0]; i++) {
        snprintf(args, sizeof args, "--infer --engine vllm --vllm-version %s --gpu H100 --gpus 2",
                 charged[i].version);
        job_make("llama-3.1-8b", args, &j);
        run(&j, &est);
        nccl = gm_estimate_kind_bytes(est, GM_KIND_NCCL);
        context = gm_estimate_kind_bytes(est, GM_KIND_CUDA_CONTEXT);
        /* NCCL's rule on two H100s over NVLink, cuMem off before 0.11: the device code and
         * two communicators (three in 0.4 to 0.5.0) of 24 channels x one 12 MiB (send,
         * receive) pair and #964's 256; in V0 from 0.2.7 rank 0's receive connections for the
         * logits' gather, 32 channels x 10 MiB (write mode on sm90) */
        assert_int_equal(nccl, 125 * GM_MIB + charged[i].comms * (24 * 12 + 256) * GM_MIB +
                                   (charged[i].gather ? 32 * 10 * GM_MIB : 0));
        assert_true(context > 0);
        /* 0.6.4 (PR #9352: the device's use less PyTorch's allocated bytes after
         * empty_cache()) and 0.6.5 (allocated-based, before PR #11809) count the load's cached
         * bytes too */
        gap = 0;
        if (!strcmp(charged[i].version, "0.6.4") || !strcmp(charged[i].version, "0.6.5")) {
            struct gm_error err;
            assert_int_equal(
                est_vllm_load_cache_gap(j.model.model, NULL, false, 2, 1, &gap, NULL, &err), GM_OK);
            assert_true(gap > 0);
        }
        assert_int_equal(est->serving.non_torch_logged_bytes,
                         charged[i].kernels + ar + nccl + gap + (charged[i].context ? context : 0));
        /* 0.3.2 to 0.6.3 also charge the profile run's reserved segments above the peak paid,
         * at most the replay's reserve above the forward's own peak (test_vllm_profile_reserve
         * checks the figure) */
        reserve = 0;
        if (!strcmp(charged[i].version, "0.3.2") || !strcmp(charged[i].version, "0.4.0") ||
            !strcmp(charged[i].version, "0.5.0") || !strcmp(charged[i].version, "0.6.3")) {
            struct gm_error err;
            assert_int_equal(est_vllm_profile_reserve(j.model.model,
                                                      est->serving.max_num_batched_tokens, 2,
                                                      &reserve, &err),
                             GM_OK);
            assert_true(reserve > 0);
        }
        need = est->serving.budget_bytes - est->serving.kv_pool_bytes;
        /* the pool is what the budget leaves after weights, profile peak and that figure,
         * cut to whole blocks */
        assert_true(need >= gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS) +
                                est->serving.activation_peak_bytes +
                                est->serving.non_torch_logged_bytes);
        assert_true(need -
                        (gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS) +
                         est->serving.activation_peak_bytes + est->serving.non_torch_logged_bytes) <
                    reserve + 16 * est->serving.kv_bytes_per_token);
        gm_estimate_free(est);
        est = NULL;
    }

    /* GPUs without peer access (vLLM's log: "Custom allreduce is disabled because your
     * platform lacks GPU P2P capability"): NCCL through host memory, no all-reduce buffers */
    job_make("llama-3.1-8b",
             "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-80GB --gpus 2 --no-p2p", &j);
    run(&j, &est);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_NCCL), 125 * GM_MIB);
    assert_int_equal(est->serving.non_torch_bytes, kernels10);
    assert_int_equal(est->serving.non_torch_logged_bytes, kernels10 + 125 * GM_MIB);
    gm_estimate_free(est);
    est = NULL;

    /* 0.6.4: total - free - allocated after the profile run, the context and the load's
     * cached bytes inside */
    job_make("llama-3.1-8b", "--infer --engine vllm --vllm-version 0.6.4 --gpu RTX-3090", &j);
    run(&j, &est);
    context = gm_estimate_kind_bytes(est, GM_KIND_CUDA_CONTEXT);
    assert_true(context > 0);
    {
        struct gm_error err;
        assert_int_equal(
            est_vllm_load_cache_gap(j.model.model, NULL, false, 1, 1, &gap, NULL, &err), GM_OK);
    }
    assert_true(gap > 0);
    assert_int_equal(est->serving.non_torch_logged_bytes, kernels_v0 + context + gap);
    gm_estimate_free(est);
    est = NULL;

    /* before 0.2.5 the budget paid PyTorch's peak allocation alone (torch.cuda.
     * max_memory_allocated(); PR #2031 took total - free instead): nothing is counted as
     * non-torch, so at tp 4 the pool holds the context, NCCL and the kernels that 0.2.5
     * charges (to within one block), while the device still holds them */
    for (int i = 0; i < 2; i++) {
        snprintf(args, sizeof args,
                 "--infer --engine vllm --vllm-version 0.2.%d --gpu A100-80GB --gpus 4 "
                 "--max-model-len 4096",
                 4 + i);
        job_make("llama-2-70b", args, &j);
        run(&j, i ? &again : &est);
    }
    assert_int_equal(est->serving.non_torch_logged_bytes, 0);
    need = est->serving.budget_bytes - est->serving.kv_pool_bytes;
    assert_true(need >=
                gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS) + est->serving.activation_peak_bytes);
    assert_true(
        need - (gm_estimate_kind_bytes(est, GM_KIND_WEIGHTS) + est->serving.activation_peak_bytes) <
        16 * est->serving.kv_bytes_per_token);
    context = gm_estimate_kind_bytes(again, GM_KIND_CUDA_CONTEXT);
    nccl = gm_estimate_kind_bytes(again, GM_KIND_NCCL);
    assert_int_equal(again->serving.non_torch_logged_bytes, kernels_v0 + ar + context + nccl);
    assert_true(est->serving.kv_pool_bytes > again->serving.kv_pool_bytes);
    assert_true(est->serving.kv_pool_bytes - again->serving.kv_pool_bytes +
                    16 * est->serving.kv_bytes_per_token >
                again->serving.non_torch_logged_bytes);
    assert_true(est->serving.kv_pool_bytes - again->serving.kv_pool_bytes <
                again->serving.non_torch_logged_bytes + 16 * est->serving.kv_bytes_per_token);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_NCCL), nccl);
    gm_estimate_free(est);
    gm_estimate_free(again);
    est = again = NULL;

    /* a given figure replaces the kernels and buffers, not the communicator the profile
     * run creates (as it does not replace NCCL where the version charges it) */
    job_make("llama-3.1-8b",
             "--infer --engine vllm --vllm-version 0.11 --gpu H100 --gpus 2 --non-torch 300MiB",
             &j);
    run(&j, &est);
    assert_int_equal(est->serving.non_torch_bytes, 300 * GM_MIB);
    assert_int_equal(est->serving.non_torch_logged_bytes, 720 * GM_MIB);
    gm_estimate_free(est);
    est = NULL;
}

/* vLLM's CUDA-graph capture sizes by version (V0's list to 256 under max_num_seqs, V1's to
 * 512, min(2 x max_num_seqs, 512) from 0.10, step 16 from 256 on from 0.11, never above the
 * batched tokens), and the graph memory as pieces x layers plus one shared pool. */
static void test_vllm_graph_capture_by_version(void **state)
{
    struct gm_job j;
    uint64_t top, bytes = 0;
    (void)state;
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.6.4 --gpu A100-80GB", &j);
    assert_int_equal(est_vllm_graph_sizes(&j, 2048, 256, &top), 35);
    assert_int_equal(top, 256);
    assert_int_equal(est_vllm_graph_sizes(&j, 2048, 16, &top), 5);
    assert_int_equal(top, 16);
    /* V0 pads max_num_seqs as a batch: 100 sequences capture up to 104, 3 up to 4 */
    assert_int_equal(est_vllm_graph_sizes(&j, 2048, 100, &top), 16);
    assert_int_equal(top, 104);
    assert_int_equal(est_vllm_graph_sizes(&j, 2048, 3, &top), 3);
    assert_int_equal(top, 4);
    assert_int_equal(est_vllm_graph_sizes(&j, 2048, 1, &top), 1);
    assert_int_equal(top, 1);
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.8.4 --gpu A100-80GB", &j);
    assert_int_equal(est_vllm_graph_sizes(&j, 2048, 1, &top), 67);
    assert_int_equal(top, 512);
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-80GB", &j);
    assert_int_equal(est_vllm_graph_sizes(&j, 2048, 256, &top), 67);
    /* 0.10 keeps 1, 2 and 4 above a top of 2 ("cudagraph_capture_sizes": [4, 2, 1] in the
     * 0.10.2 log of row v039, max_num_seqs 1) */
    assert_int_equal(est_vllm_graph_sizes(&j, 2048, 1, &top), 3);
    assert_int_equal(top, 4);
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.11 --gpu A100-80GB", &j);
    assert_int_equal(est_vllm_graph_sizes(&j, 2048, 256, &top), 51);
    assert_int_equal(top, 512);
    assert_int_equal(est_vllm_graph_sizes(&j, 2048, 128, &top), 35);
    assert_int_equal(top, 256);
    assert_int_equal(est_vllm_graph_sizes(&j, 64, 256, &top), 11);
    assert_int_equal(top, 64);
    /* from 0.11 1, 2 and 4 only up to the top: max_num_seqs 1 captures 1 and 2 */
    assert_int_equal(est_vllm_graph_sizes(&j, 2048, 1, &top), 2);
    assert_int_equal(top, 2);
    /* max_num_seqs 16 at 0.26 (row v038's log: sizes [1, 2, 4, 8, 16, 24, 32]) */
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.26.1 --gpu A100-80GB", &j);
    assert_int_equal(est_vllm_graph_sizes(&j, 2048, 16, &top), 7);
    assert_int_equal(top, 32);

    /* gpt-oss raises the top to 1024, step 16 from 256, whatever max_num_seqs is
     * (GptOssForCausalLMConfig; row v028's 0.10.1.1 log: "Overriding max cuda graph capture
     * size to 1024", 83 sizes), still only up to the batched tokens */
    job_make("gpt-oss-120b", "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-80GB", &j);
    assert_int_equal(est_vllm_graph_sizes(&j, 2048, 256, &top), 83);
    assert_int_equal(top, 1024);
    assert_int_equal(est_vllm_graph_sizes(&j, 2048, 1, &top), 83);
    assert_int_equal(est_vllm_graph_sizes(&j, 512, 256, &top), 3 + 31 + 17);
    assert_int_equal(top, 512);
    job_make("gpt-oss-120b", "--infer --engine vllm --vllm-version 0.11.0 --gpu H100", &j);
    assert_int_equal(est_vllm_graph_sizes(&j, 8192, 256, &top), 83);

    /* full-model graphs: from 0.11 (FULL_AND_PIECEWISE) one per decode size up to
     * max_num_seqs (v038's log: "PIECEWISE=7 (largest=32), FULL=5 (largest=16)"; v029's 0.11.0
     * log: 35 piecewise sizes and 19 full ones at max_num_seqs 128); none in V1 before 0.11;
     * V0's graphs are all full */
    assert_int_equal(est_vllm_full_graphs(&j, 2048, 16), 5);
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.11.0 --gpu A100-80GB", &j);
    assert_int_equal(est_vllm_full_graphs(&j, 2048, 128), 19);
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.10.2 --gpu A100-80GB", &j);
    assert_int_equal(est_vllm_full_graphs(&j, 2048, 128), 0);
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.6.5 --gpu A100-80GB", &j);
    assert_int_equal(est_vllm_full_graphs(&j, 2048, 256), 35);
    /* an MLA model below compute capability 9.0 runs TRITON_MLA, whose AttentionCGSupport was
     * NEVER: _check_and_update_cudagraph_mode sets PIECEWISE, no full graphs (a 0.16 log on an
     * A100: "not supported with TritonMLABackend; setting cudagraph_mode=PIECEWISE"); on an
     * H100 FlashMLA captures them, and the current release's TRITON_MLA does too (PR #42885) */
    job_make("deepseek-v2-lite", "--infer --engine vllm --vllm-version 0.16.0 --gpu A100-80GB", &j);
    assert_true(est_vllm_mla_piecewise_only(&j));
    assert_int_equal(est_vllm_full_graphs(&j, 2048, 128), 0);
    run(&j, &est);
    assert_true(assumed(est, "TRITON_MLA below compute capability 9.0 supports no full"));
    gm_estimate_free(est);
    est = NULL;
    job_make("deepseek-v2-lite", "--infer --engine vllm --vllm-version 0.16.0 --gpu H100", &j);
    assert_int_equal(est_vllm_full_graphs(&j, 2048, 128), 19);
    job_make("deepseek-v2-lite", "--infer --engine vllm --gpu A100-80GB", &j);
    assert_int_equal(est_vllm_full_graphs(&j, 2048, 128), 19);
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.16.0 --gpu A100-80GB", &j);
    assert_int_equal(est_vllm_full_graphs(&j, 2048, 128), 19); /* not MLA: FlashAttention */
    /* 0.11, max_num_seqs 128, Qwen2.5-7B: 35 sizes x 29 pieces at 235 KiB, 19 full graphs of
     * 29 layer-pieces at 173 KiB, and the pool of 256 tokens through one layer */
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.11.0 --gpu A100-80GB --max-num-seqs 128", &j);
    run(&j, &est);
    bytes = gm_estimate_kind_bytes(est, GM_KIND_ENGINE_POOL);
    assert_int_equal(bytes, 35ull * 29 * 235 * 1024 + 19ull * 29 * 173 * 1024 +
                                256ull * (18944 * 3 + 3 * 3584) * 2);
    assert_true(assumed(est, "and a full graph for each decode batch up to max_num_seqs"));
    gm_estimate_free(est);
    est = NULL;

    /* 0.10.1, Qwen2.5-7B: 67 sizes x (28 layers + 1) pieces, and the pool of 512 tokens
     * through one layer at its MLP's peak (gate+up, activation, three hidden-sized) */
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-80GB", &j);
    run(&j, &est);
    bytes = gm_estimate_kind_bytes(est, GM_KIND_ENGINE_POOL);
    assert_int_equal(bytes, 67ull * 29 * 235 * 1024 + 512ull * (18944 * 3 + 3 * 3584) * 2);
    assert_true(assumed(est, "67 batch sizes up to 512, each in 29 pieces"));
    gm_estimate_free(est);
    est = NULL;
    /* eager mode captures nothing */
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-80GB --enforce-eager", &j);
    run(&j, &est);
    for (size_t i = 0; i < est->n_components; i++)
        assert_int_not_equal(est->components[i].kind, GM_KIND_ENGINE_POOL);
    gm_estimate_free(est);
    est = NULL;
}

/* From 0.21 the budget pays vLLM's own estimate of the CUDA graphs (profile_cudagraph_memory:
 * per mode, PIECEWISE then FULL, each largest first, the first capture + (n - 1) x the second,
 * the largest first capture once), not the graphs as captured, which the device holds. From
 * gpumem's capture model the first piecewise capture holds the pool and every later capture
 * its own graph, so the estimate is the captured figure less one full graph (with its
 * all-reduces at tp >= 2), and the KV pool grows by it against a start without graphs. Before
 * 0.21 the budget pays no graphs. */
static void test_vllm_graph_estimate_charged(void **state)
{
    struct gm_estimate *eager = NULL;
    struct gm_job j;
    uint64_t graphs, charged, bs_bytes;
    (void)state;
    /* v038's capture sizes: 7 piecewise sizes up to 32, 5 full up to 16; 28 layers + 1 */
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.26.1 --gpu A100-80GB --max-num-seqs 16", &j);
    run(&j, &est);
    graphs = gm_estimate_kind_bytes(est, GM_KIND_ENGINE_POOL);
    charged = est->serving.cuda_graph_charged_bytes;
    assert_int_equal(charged, graphs - 29ull * 173 * 1024);
    assert_true(assumed(est, "charges the budget its own estimate of the CUDA graphs"));
    /* the KV pool pays the estimate: against --enforce-eager (no graphs) it is smaller by it,
     * to a block */
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.26.1 --gpu A100-80GB --max-num-seqs 16 "
             "--enforce-eager",
             &j);
    run(&j, &eager);
    assert_int_equal(eager->serving.cuda_graph_charged_bytes, 0);
    bs_bytes = est->serving.kv_bytes_per_token * est->serving.block_size;
    assert_true(eager->serving.kv_pool_bytes - est->serving.kv_pool_bytes + bs_bytes > charged);
    assert_true(eager->serving.kv_pool_bytes - est->serving.kv_pool_bytes < charged + bs_bytes);
    gm_estimate_free(eager);
    gm_estimate_free(est);
    est = NULL;
    /* tp 8, hidden 8192: the largest size (512, piecewise and full alike at this GPU's
     * max_num_seqs) all-reduces through NCCL, the rest through the custom all-reduce; the
     * estimate misses one full graph of 81 layer-pieces with its 2 x 80 + 1 NCCL all-reduces
     * (the largest FULL capture is below the first piecewise one, which holds the pool) */
    job_make("llama-3.1-70b", "--infer --engine vllm --vllm-version 0.26.1 --gpu H100 --tp 8", &j);
    run(&j, &est);
    graphs = gm_estimate_kind_bytes(est, GM_KIND_ENGINE_POOL);
    assert_int_equal(est->serving.cuda_graph_charged_bytes,
                     graphs - 81ull * 173 * 1024 -
                         161ull * est_vllm_graph_ar_bytes(EST_VLLM_GRAPH_AR_NCCL_NODE));
    gm_estimate_free(est);
    est = NULL;
    /* before 0.21 the budget pays none */
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.20.0 --gpu A100-80GB --max-num-seqs 16", &j);
    run(&j, &est);
    assert_int_equal(est->serving.cuda_graph_charged_bytes, 0);
    assert_true(gm_estimate_kind_bytes(est, GM_KIND_ENGINE_POOL) > 0);
    gm_estimate_free(est);
    est = NULL;
}

/* The all-reduces vLLM captures in its CUDA graphs at tp >= 2: 2 x layers + 1 in each size's
 * graphs (embedding, o_proj, down_proj), none at tp 1; through the custom all-reduce where it
 * is enabled and the 16-bit input is under its 8 MiB, else NCCL, across nodes where the group
 * spans them; each path's bytes added to the graph memory. */
static void test_vllm_graph_allreduces(void **state)
{
    struct gm_job j;
    uint64_t n[EST_VLLM_GRAPH_AR_PATHS], bytes, spans_bytes;
    const uint64_t pieces = 67ull * 29 * 235 * 1024;
    (void)state;
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-80GB", &j);
    assert_int_equal(est_vllm_graph_allreduces(&j, 2048, 256, true, false, true, n), 0);
    assert_int_equal(n[EST_VLLM_GRAPH_AR_CUSTOM] + n[EST_VLLM_GRAPH_AR_NCCL_NODE], 0);
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-80GB --tp 2",
             &j);
    /* 67 sizes x (2 x 28 + 1); 512 x 3584 x 2 B is under 8 MiB: all custom */
    bytes = est_vllm_graph_allreduces(&j, 2048, 256, true, false, true, n);
    assert_int_equal(n[EST_VLLM_GRAPH_AR_CUSTOM], 67 * 57);
    assert_int_equal(n[EST_VLLM_GRAPH_AR_NCCL_NODE] + n[EST_VLLM_GRAPH_AR_NCCL_NET], 0);
    assert_int_equal(bytes, 67ull * 57 * est_vllm_graph_ar_bytes(EST_VLLM_GRAPH_AR_CUSTOM));
    est_vllm_graph_allreduces(&j, 2048, 256, false, false, true, n);
    assert_int_equal(n[EST_VLLM_GRAPH_AR_NCCL_NODE], 67 * 57);
    est_vllm_graph_allreduces(&j, 2048, 256, false, true, true, n);
    assert_int_equal(n[EST_VLLM_GRAPH_AR_NCCL_NET], 67 * 57);
    /* a pipeline stage: 2 x its 14 layers, + 1 only on the stage that holds the embedding
     * (VocabParallelEmbedding runs on the first stage alone) */
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-80GB --tp 2 --pp 2", &j);
    est_vllm_graph_allreduces(&j, 2048, 256, true, false, true, n);
    assert_int_equal(n[EST_VLLM_GRAPH_AR_CUSTOM], 67 * 29);
    est_vllm_graph_allreduces(&j, 2048, 256, true, false, false, n);
    assert_int_equal(n[EST_VLLM_GRAPH_AR_CUSTOM], 67 * 28);
    /* the estimate describes the stage with the larger end: Qwen2.5-7B's embedding and
     * lm_head are the same size, so the first stage, with the embedding's all-reduce */
    run(&j, &est);
    assert_true(assumed(est, "(2 x 14 layers + 1 in each size's graphs)"));
    gm_estimate_free(est);
    est = NULL;
    /* from 0.11 the full decode graphs hold them too: 35 piecewise sizes + 19 full graphs */
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.11.0 --gpu A100-80GB --tp 2",
             &j);
    est_vllm_graph_allreduces(&j, 2048, 128, true, false, true, n);
    assert_int_equal(n[EST_VLLM_GRAPH_AR_CUSTOM], (35 + 19) * 57);
    /* hidden 8192: 512 tokens are 8 MiB, not under max_size: that size's through NCCL */
    job_make("llama-3.1-70b", "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-80GB --tp 8",
             &j);
    est_vllm_graph_allreduces(&j, 2048, 256, true, false, true, n);
    assert_int_equal(n[EST_VLLM_GRAPH_AR_CUSTOM], 66 * 161);
    assert_int_equal(n[EST_VLLM_GRAPH_AR_NCCL_NODE], 1 * 161);

    /* the estimate: row v025's setup (no peer access: NCCL within the node) adds them to the
     * tp 1 model's pieces and pool (512 tokens through one layer, the MLP split in two) */
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-80GB --gpus 2 --no-p2p", &j);
    run(&j, &est);
    bytes = gm_estimate_kind_bytes(est, GM_KIND_ENGINE_POOL);
    assert_int_equal(bytes, pieces + 512ull * (18944 / 2 * 3 + 3 * 3584) * 2 +
                                67ull * 57 * est_vllm_graph_ar_bytes(EST_VLLM_GRAPH_AR_NCCL_NODE));
    assert_true(assumed(est, "3819 all-reduces captured through NCCL within the node"));
    gm_estimate_free(est);
    est = NULL;
    /* v027's: one GPU per node, NCCL across nodes */
    job_make("qwen2.5-7b",
             "--infer --engine vllm --vllm-version 0.10.1 --gpu A100-80GB --gpus 2 "
             "--gpus-per-node 1",
             &j);
    run(&j, &est);
    spans_bytes = gm_estimate_kind_bytes(est, GM_KIND_ENGINE_POOL);
    assert_int_equal(spans_bytes - bytes,
                     67ull * 57 *
                         (est_vllm_graph_ar_bytes(EST_VLLM_GRAPH_AR_NCCL_NET) -
                          est_vllm_graph_ar_bytes(EST_VLLM_GRAPH_AR_NCCL_NODE)));
    assert_true(assumed(est, "through NCCL across nodes"));
    gm_estimate_free(est);
    est = NULL;
    /* four L40S (PCIe only, with peer access): vLLM disables the custom all-reduce above two
     * PCIe-only GPUs, so every captured all-reduce goes through NCCL within the node and the
     * non-torch figure holds the kernels alone, no IPC buffers (0.9.2-0.10: 20 MiB) */
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.10.1 --gpu L40S --gpus 4", &j);
    run(&j, &est);
    assert_true(assumed(est, "through NCCL within the node"));
    assert_false(assumed(est, "through the custom all-reduce"));
    assert_int_equal(est->serving.non_torch_bytes, 20 * GM_MIB);
    gm_estimate_free(est);
    est = NULL;
    /* the 8 MiB max_size is an assumption where vLLM's symmetric-memory table could lower it
     * (sm 9.0, 10.0, 10.3): said on an H100, not on two Ada boards (below) */
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.10.1 --gpu H100 --gpus 2", &j);
    run(&j, &est);
    assert_true(assumed(est, "max_size 8 MiB assumed"));
    gm_estimate_free(est);
    est = NULL;
    /* two of them keep it (world_size == 2 needs no NVLink) */
    job_make("qwen2.5-7b", "--infer --engine vllm --vllm-version 0.10.1 --gpu L40S --gpus 2", &j);
    run(&j, &est);
    assert_true(assumed(est, "through the custom all-reduce"));
    assert_false(assumed(est, "through NCCL within the node"));
    assert_false(assumed(est, "max_size 8 MiB assumed"));
    gm_estimate_free(est);
    est = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpus_are_tensor_parallel),
        cmocka_unit_test(test_sglang_pool),
        cmocka_unit_test(test_llamacpp_host_offload),
        cmocka_unit_test(test_llamacpp_compute_buffer),
        cmocka_unit_test(test_llamacpp_window_cells),
        cmocka_unit_test(test_llamacpp_format_embedding),
        cmocka_unit_test(test_plan_round_trip),
        cmocka_unit_test(test_plan_names_the_folder),
        cmocka_unit_test(test_read_commands),
        cmocka_unit_test(test_search_binding_limit),
        cmocka_unit_test(test_vllm_profile_run_by_version_and_gpu),
        cmocka_unit_test(test_vllm_graph_allreduces),
        cmocka_unit_test(test_vllm_max_len_from_rope_scaling),
        cmocka_unit_test(test_vllm_awq_plain_kernel),
        cmocka_unit_test(test_vllm_quant_kernel_choices),
        cmocka_unit_test(test_vllm_profile_forward_peak),
        cmocka_unit_test(test_vllm_cublas_workspace),
        cmocka_unit_test(test_vllm_cublas_workspace_quantised_layers),
        cmocka_unit_test(test_vllm_v0_workers_without_sampler),
        cmocka_unit_test(test_vllm_cuda_context_by_gpu),
        cmocka_unit_test(test_vllm_kernels_by_version),
        cmocka_unit_test(test_vllm_profile_reserve),
        cmocka_unit_test(test_vllm_non_torch_by_version),
        cmocka_unit_test(test_vllm_load_cache_gap),
        cmocka_unit_test(test_vllm_load_once_per_shape),
        cmocka_unit_test(test_vllm_weights_allocated),
        cmocka_unit_test(test_vllm_profile_sampler_by_runner),
        cmocka_unit_test(test_vllm_budget_from_cuda_total),
        cmocka_unit_test(test_vllm_tokens_logged_hybrid),
        cmocka_unit_test(test_vllm_mxfp4_marlin_padding),
        cmocka_unit_test(test_vllm_mxfp4_triton_layout),
        cmocka_unit_test(test_vllm_mxfp4_layout_by_torch),
        cmocka_unit_test(test_vllm_gpu_without_p2p),
        cmocka_unit_test(test_vllm_graph_capture_by_version),
        cmocka_unit_test(test_vllm_graph_estimate_charged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
