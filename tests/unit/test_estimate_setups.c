/* SPDX-License-Identifier: MIT */
/* test_estimate_setups.c - the stages after training and inference: DeepSpeed's
 * documented estimator outputs, LoRA/QLoRA sizes, data / tensor / pipeline parallelism,
 * serving engines, and the search for the largest batch or context. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "estimate/estimate_int.h"
#include "gpumem/arena.h"
#include "gpumem/estimate.h"
#include "gpumem/internal/alloc_hooks.h"
#include "gpumem/units.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* DeepSpeed prints f"{bytes/2**30:7.2f}GB". */
static void ds_fmt(char *out, size_t n, uint64_t bytes)
{
    snprintf(out, n, "%.2f", (double)bytes / (double)GM_GIB);
}

static void check_rows(const struct gm_deepspeed *d, const char *const *cpu, const char *const *gpu)
{
    char b[32];
    for (size_t i = 0; i < d->n_rows; i++) {
        ds_fmt(b, sizeof b, d->rows[i].cpu_bytes);
        if (strcmp(b, cpu[i]) != 0)
            fail_msg("row %zu cpu %s, want %s", i, b, cpu[i]);
        ds_fmt(b, sizeof b, d->rows[i].gpu_bytes);
        if (strcmp(b, gpu[i]) != 0)
            fail_msg("row %zu gpu %s, want %s", i, b, gpu[i]);
    }
}

/* docs/code-docs/source/memory.rst of DeepSpeed: every printed figure. */
static void test_deepspeed_documented(void **state)
{
    struct gm_deepspeed d;
    struct gm_error e;
    (void)state;
    /* cold: total_params=2851e6, 8 GPUs, 1 node */
    assert_int_equal(gm_deepspeed_estimate(2, 2851000000ull, 0, 8, 1, 1.5, &d, &e), GM_OK);
    assert_int_equal(d.n_rows, 2);
    check_rows(&d, (const char *const[]){"127.45", "127.45"},
               (const char *const[]){"5.31", "15.93"});
    assert_int_equal(gm_deepspeed_estimate(3, 2851000000ull, 32000000ull, 8, 1, 1.5, &d, &e),
                     GM_OK);
    assert_int_equal(d.n_rows, 6);
    check_rows(&d, (const char *const[]){"71.69", "127.45", "63.72", "127.45", "1.43", "127.45"},
               (const char *const[]){"0.12", "0.12", "0.78", "0.78", "6.09", "6.09"});
    /* live t5-3b: 2,851,598,336 parameters (shared 32128 x 1024 embedding counted once),
     * largest layer the embedding, 32,899,072 */
    assert_int_equal(gm_deepspeed_estimate(2, 2851598336ull, 0, 8, 1, 1.5, &d, &e), GM_OK);
    check_rows(&d, (const char *const[]){"127.48", "127.48"},
               (const char *const[]){"5.31", "15.93"});
    assert_int_equal(gm_deepspeed_estimate(3, 2851598336ull, 32899072ull, 8, 1, 1.5, &d, &e),
                     GM_OK);
    check_rows(&d, (const char *const[]){"71.71", "127.48", "63.74", "127.48", "1.47", "127.48"},
               (const char *const[]){"0.12", "0.12", "0.79", "0.79", "6.10", "6.10"});
    /* t5-small on 1 GPU: 60,506,624 params, 16,449,536 largest layer */
    assert_int_equal(gm_deepspeed_estimate(3, 60506624ull, 16449536ull, 1, 1, 1.5, &d, &e), GM_OK);
    check_rows(&d, (const char *const[]){"1.52", "1.52", "1.35", "1.35", "0.09", "0.34"},
               (const char *const[]){"0.06", "0.06", "0.17", "0.17", "1.08", "1.08"});
    /* t5-large worked example (4 GPUs): case1 3291 MB, case2 125, case3 477 (>> 20) */
    assert_int_equal(gm_deepspeed_estimate(3, 737668096ull, 32899072ull, 4, 1, 1.5, &d, &e), GM_OK);
    assert_int_equal(d.rows[4].gpu_bytes >> 20, 3291);
    assert_int_equal(d.rows[0].gpu_bytes >> 20, 125);
    assert_int_equal(d.rows[2].gpu_bytes >> 20, 477);
    /* several nodes: gpus_factor = 1/nodes */
    assert_int_equal(gm_deepspeed_estimate(3, 1000000000ull, 10000000ull, 8, 4, 1.5, &d, &e),
                     GM_OK);
    assert_int_equal(d.rows[0].cpu_bytes, 1000000000ull * 18 / 4 * 3 / 2);
    assert_int_equal(d.rows[1].cpu_bytes, 1000000000ull * 32 * 3 / 2); /* max(4n, 18/4) = 32 */
    assert_int_equal(gm_deepspeed_estimate(1, 1, 0, 1, 1, 1.5, &d, &e), GM_ERR_INVALID);
    assert_int_equal(gm_deepspeed_estimate(3, 1, 0, 0, 1, 1.5, &d, &e), GM_ERR_INVALID);
}

/* ZeRO paper Fig. 1: 7.5B parameters, N_d = 64 -> 120 / 31.4 / 16.6 / 1.9 GB */
static void test_zero_paper(void **state)
{
    uint64_t b[4];
    char t[32];
    const char *const want[4] = {"120.0", "31.4", "16.6", "1.9"};
    (void)state;
    gm_zero_paper_model_states(7500000000ull, 64, 12, b);
    for (int i = 0; i < 4; i++) {
        snprintf(t, sizeof t, "%.1f", (double)b[i] / 1e9);
        assert_string_equal(t, want[i]);
    }
    /* 1.5B GPT-2 needs >= 24 GB of model states (16 bytes per parameter) */
    gm_zero_paper_model_states(1500000000ull, 1, 12, b);
    assert_int_equal(b[0], 24000000000ull);
}

static void test_lora_params(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("Llama-2-7b-hf");
    unsigned t = 0;
    struct gm_error e;
    (void)state;
    assert_non_null(m);
    /* PEFT's well-known figure for Llama-2-7B, r = 8, q_proj + v_proj: 4,194,304 */
    assert_int_equal(gm_lora_targets_parse("q_proj,v_proj", &t, &e), GM_OK);
    assert_int_equal(gm_lora_params(m, 8, t), 4194304);
    /* all linear layers, r = 16: 32 x 16 x (4 x 8192 + 3 x (4096 + 11008)) */
    assert_int_equal(gm_lora_targets_parse("all-linear", &t, &e), GM_OK);
    assert_int_equal(gm_lora_params(m, 16, t), 32ull * 16 * (4 * 8192 + 3 * (4096 + 11008)));
    /* GQA: k/v outputs are kv_heads x head_dim (Llama-3-8B: 1024) */
    m = gm_model_catalog_find("Meta-Llama-3-8B");
    assert_non_null(m);
    assert_int_equal(gm_lora_params(m, 8, GM_LORA_K), 32ull * 8 * (4096 + 1024));
    assert_int_equal(gm_lora_targets_parse("q,bogus", &t, &e), GM_ERR_INVALID);
    assert_int_equal(gm_lora_targets_parse("", &t, &e), GM_ERR_INVALID);
}

static void test_nf4(void **state)
{
    (void)state;
    /* 0.5 B per weight + 4 B per 64 weights (0.5 bit/weight) */
    assert_int_equal(gm_nf4_bytes(64 * 1024, 64, false), 32 * 1024 + 4 * 1024);
    /* double quantisation: 1 B per block + 4 B per 256 blocks (0.127 bit/weight) */
    assert_int_equal(gm_nf4_bytes(64 * 1024, 64, true), 32 * 1024 + 1024 + 4 * 4);
}

static struct gm_estimate *full, *lo, *qlo, *one, *z1, *z2, *z3, *fsdp, *off, *tp, *lz, *pp, *est,
    *above;

static void train_job(struct gm_job *j, const struct gm_model *m)
{
    gm_job_init(j);
    j->mode = GM_EST_TRAIN;
    j->model.model = m;
    j->workload.batch = 1;
    j->workload.seq = 2048;
}

static uint64_t component(const struct gm_estimate *e, const char *name)
{
    for (size_t i = 0; i < e->n_components; i++)
        if (strcmp(e->components[i].name, name) == 0)
            return e->components[i].bytes;
    return UINT64_MAX;
}

/* The equal tensors a component is made of (gm_est_component.tensors), UINT64_MAX when the
 * estimate has none of that name. */
static uint64_t component_tensors(const struct gm_estimate *e, const char *name)
{
    for (size_t i = 0; i < e->n_components; i++)
        if (strcmp(e->components[i].name, name) == 0)
            return e->components[i].tensors;
    return UINT64_MAX;
}

static void test_lora_estimate(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("Llama-2-7b-hf");
    struct gm_job j;
    struct gm_error e;
    (void)state;
    train_job(&j, m);
    assert_int_equal(gm_estimate_run(&j, &full, &e), GM_OK);
    j.memory.adapter = GM_ADAPTER_LORA;
    assert_int_equal(gm_estimate_run(&j, &lo, &e), GM_OK);
    /* default targets q,k,v,o at r = 16 */
    assert_int_equal(lo->lora.trainable_params, 32ull * 16 * 4 * 8192);
    assert_int_equal(component(lo, "weights"), 6738415616ull * 2);
    assert_int_equal(component(lo, "lora_adapters"), lo->lora.trainable_params * 4);
    assert_int_equal(component(lo, "lora_optimizer_state"), lo->lora.trainable_params * 8);
    assert_int_equal(component(lo, "gradients"), UINT64_MAX);
    assert_int_equal(component(lo, "optimizer_state"), UINT64_MAX);
    assert_int_equal(gm_estimate_kind_bytes(lo, GM_KIND_ADAPTERS), lo->lora.trainable_params * 4);
    /* activations of the full estimate (bf16-mixed: fp32 residual stream) less what a frozen
     * base does not save: the norms' normalised tensors (the weights are frozen: 2 x 4h, the
     * fp32 stream), the 16-bit inputs of the base linears (q,k,v and gate,up inputs 2 x 2h,
     * down_proj's 2I); PEFT casts the adapters' inputs to their fp32 dtype and autocast
     * casts them back to bf16 for A's matmul, so the adapters keep their own 16-bit copies
     * (lora_activations: per targeted linear r x 2 B for A's bf16 output and 2 B per input
     * element; the fp32 copy is freed once cast) */
    assert_int_equal(component(lo, "activations"),
                     component(full, "activations") -
                         (8ull * 4096 + 4ull * 4096 + 2ull * 11008) * 2048 * 32);
    assert_int_equal(component(lo, "lora_activations"),
                     (4ull * 16 * 2 + 4ull * 2 * 4096) * 2048 * 32);
    /* with lora_dropout: the dropout mask (1 B) and autocast's bf16 cast of the fp32
     * dropped-out copy per input element */
    j.memory.lora.dropout = 0.1;
    assert_int_equal(gm_estimate_run(&j, &lo, &e), GM_OK);
    assert_int_equal(component(lo, "lora_activations"),
                     (4ull * 16 * 2 + 4ull * 3 * 4096) * 2048 * 32);
    /* pure bf16 (no autocast) with fp32 adapters: A runs in fp32 and keeps the fp32 copies
     * (4 B for its output, 1 + 4 B per input element) */
    j.numerics.precision = GM_PREC_BF16;
    j.memory.adapter_dtype = GM_DTYPE_F32;
    assert_int_equal(gm_estimate_run(&j, &lo, &e), GM_OK);
    assert_int_equal(component(lo, "lora_activations"),
                     (4ull * 16 * 4 + 4ull * 5 * 4096) * 2048 * 32);
    j.numerics.precision = GM_PREC_BF16_MIXED;
    j.memory.adapter_dtype = GM_DTYPE_UNKNOWN;
    j.memory.lora.dropout = 0;
    /* bf16 adapters without dropout read the layer's own 16-bit tensors: with every linear
     * targeted those inputs are kept as in full training, only the norms' differ */
    j.memory.lora.targets = GM_LORA_ALL_LINEAR;
    j.memory.adapter_dtype = GM_DTYPE_BF16;
    assert_int_equal(gm_estimate_run(&j, &lo, &e), GM_OK);
    assert_int_equal(component(lo, "activations"),
                     component(full, "activations") - 8ull * 4096 * 2048 * 32);
    assert_int_equal(component(lo, "lora_activations"), 7ull * 16 * 2 * 2048 * 32);
    j.memory.lora.targets = GM_LORA_ATTENTION;
    j.memory.adapter_dtype = GM_DTYPE_UNKNOWN;
    assert_true(lo->peak_allocated_bytes < full->peak_allocated_bytes / 4);

    j.memory.adapter = GM_ADAPTER_QLORA;
    assert_int_equal(gm_estimate_run(&j, &qlo, &e), GM_OK);
    /* PEFT's prepare_model_for_kbit_training: the 262,410,240 parameters outside NF4 in fp32 */
    assert_int_equal(qlo->lora.base_weight_bytes,
                     gm_nf4_bytes(6476005376ull, 64, true) + 262410240ull * 4);
    j.memory.lora.fp32_upcast = false;
    assert_int_equal(gm_estimate_run(&j, &qlo, &e), GM_OK);
    /* 6,476,005,376 decoder linear weights in NF4 with double quantisation, the other
     * 262,410,240 parameters in bf16 */
    assert_int_equal(qlo->lora.base_weight_bytes,
                     gm_nf4_bytes(6476005376ull, 64, true) + 262410240ull * 2);
    assert_int_equal(qlo->lora.base_weight_bytes, 3865591808ull);
    assert_true(component(qlo, "nf4_dequant_buffer") != UINT64_MAX);
    assert_true(qlo->peak_allocated_bytes < lo->peak_allocated_bytes);

    /* LoRA outside training is refused */
    j.mode = GM_EST_INFER;
    assert_int_equal(gm_estimate_run(&j, &qlo, &e), GM_ERR_INVALID);
}

static void test_sharding(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("Meta-Llama-3-8B");
    /* ZeRO-3's one data-parallel communicator: 8 ranks on the node, no GPU given (PCIe's
     * channels, no NVLS), peer access, cuMem (PyTorch >= 2.2, the version not given) */
    const struct est_nccl_comm dp8 = {8, GM_GPU_LINK_PCIE, 0, true, true};
    struct gm_job j;
    struct gm_error e;
    uint64_t w;
    (void)state;
    train_job(&j, m);
    assert_int_equal(gm_estimate_run(&j, &one, &e), GM_OK);
    w = component(one, "optimizer_state");
    j.parallel.gpus = 8;
    j.parallel.shard = GM_SHARD_ZERO1;
    assert_int_equal(gm_estimate_run(&j, &z1, &e), GM_OK);
    assert_int_equal(component(z1, "optimizer_state"), (w + 7) / 8);
    assert_int_equal(component(z1, "gradients"), component(one, "gradients"));
    j.parallel.shard = GM_SHARD_ZERO2;
    assert_int_equal(gm_estimate_run(&j, &z2, &e), GM_OK);
    assert_int_equal(component(z2, "gradients"), (component(one, "gradients") + 7) / 8);
    j.parallel.shard = GM_SHARD_ZERO3;
    assert_int_equal(gm_estimate_run(&j, &z3, &e), GM_OK);
    assert_true(component(z3, "gathered_params") != UINT64_MAX);
    assert_int_equal(component(z3, "weights_16bit_autocast_copies"), UINT64_MAX);
    assert_true(z3->peak_allocated_bytes < z2->peak_allocated_bytes);
    assert_true(z2->peak_allocated_bytes < z1->peak_allocated_bytes);
    assert_true(z1->peak_allocated_bytes < one->peak_allocated_bytes);
    /* NCCL's buffers are their own kind outside the allocator, not workspace, by NCCL's rule:
     * the device code and the one communicator; PyTorch's cuBLAS workspaces are inside it,
     * whole on every rank */
    assert_int_equal(z3->layout.nccl_communicators, 1);
    assert_int_equal(z3->layout.gpus_per_node, 8);
    assert_int_equal(gm_estimate_kind_bytes(z3, GM_KIND_NCCL),
                     est_nccl_lib_bytes(EST_POINT) + est_nccl_comm_bytes(&dp8, EST_POINT));
    assert_int_equal(gm_estimate_kind_bytes(z3, GM_KIND_WORKSPACE), 0);
    assert_int_equal(gm_estimate_kind_bytes(z3, GM_KIND_TORCH_WORKSPACE),
                     gm_estimate_kind_bytes(one, GM_KIND_TORCH_WORKSPACE));
    assert_int_equal(gm_estimate_kind_bytes(one, GM_KIND_NCCL), 0);
    j.parallel.shard = GM_SHARD_FSDP;
    assert_int_equal(gm_estimate_run(&j, &fsdp, &e), GM_OK);
    assert_int_equal(fsdp->layout.n_groups, 1);
    assert_int_equal(fsdp->layout.groups[0].count, 8);
    /* optimizer offload: state on the host, 8 GPUs per node hold 8 partitions */
    j.parallel.shard = GM_SHARD_ZERO3;
    j.parallel.offload_optimizer = true;
    assert_int_equal(gm_estimate_run(&j, &off, &e), GM_OK);
    assert_int_equal(component(off, "optimizer_state"), UINT64_MAX);
    assert_true(off->layout.host_bytes_per_node >= w);
    /* tensor parallel 2 x data parallel 4, sequence parallel: activations halve */
    j.parallel.offload_optimizer = false;
    j.parallel.shard = GM_SHARD_NONE;
    j.parallel.tp = 2;
    j.parallel.sequence_parallel = true;
    assert_int_equal(gm_estimate_run(&j, &tp, &e), GM_OK);
    assert_int_equal(component(tp, "activations"), (component(one, "activations") + 1) / 2);
    assert_true(component(tp, "ddp_grad_buckets") != UINT64_MAX);
    /* LoRA under ZeRO-3: the frozen base is partitioned too, the adapters' state as well */
    j.parallel.tp = 1;
    j.parallel.sequence_parallel = false;
    j.parallel.shard = GM_SHARD_ZERO3;
    j.memory.adapter = GM_ADAPTER_LORA;
    assert_int_equal(gm_estimate_run(&j, &lz, &e), GM_OK);
    assert_int_equal(component(lz, "weights"), (8030261248ull * 2 + 7) / 8);
    assert_int_equal(component(lz, "lora_optimizer_state"),
                     (lz->lora.trainable_params * 8 + 7) / 8);
    /* FSDP with parameter and optimizer offload: no model state left on the GPU */
    j.memory.adapter = GM_ADAPTER_NONE;
    j.parallel.shard = GM_SHARD_FSDP;
    j.parallel.offload_optimizer = j.parallel.offload_params = true;
    assert_int_equal(gm_estimate_run(&j, &lz, &e), GM_OK);
    assert_int_equal(component(lz, "weights_fp32_master"), UINT64_MAX);
    assert_int_equal(component(lz, "optimizer_state"), UINT64_MAX);
    assert_int_equal(component(lz, "gradients"), UINT64_MAX);
    /* host: (master + state + temps + grads) / 8 per GPU x 8 GPUs per node */
    assert_true(lz->layout.host_bytes_per_node >= 8030261248ull * 16);
    /* inconsistent options */
    j.parallel.offload_optimizer = j.parallel.offload_params = false;
    j.parallel.shard = GM_SHARD_NONE;
    j.parallel.gpus = 3;
    j.parallel.tp = 2;
    assert_int_equal(gm_estimate_run(&j, &tp, &e), GM_ERR_INVALID);
    j.parallel.gpus = 8;
    j.parallel.tp = 1;
    j.parallel.offload_params = true;
    j.parallel.shard = GM_SHARD_ZERO2;
    assert_int_equal(gm_estimate_run(&j, &tp, &e), GM_ERR_INVALID);
    /* a TP degree that does not divide the heads needs the model: the stage refuses it */
    j.parallel.offload_params = false;
    j.parallel.shard = GM_SHARD_NONE;
    j.parallel.tp = 8;
    j.parallel.gpus = 8;
    j.model.model = gm_model_catalog_find("qwen2.5-1.5b"); /* 12 heads */
    assert_int_equal(gm_estimate_run(&j, &tp, &e), GM_ERR_INVALID);
    assert_non_null(strstr(e.msg, "--tp 8 does not divide the 12 attention heads"));
}

/* The phases of the component 'name' (0 when there is none). */
static unsigned component_phases(const struct gm_estimate *e, const char *name)
{
    for (size_t i = 0; i < e->n_components; i++)
        if (strcmp(e->components[i].name, name) == 0)
            return e->components[i].phases;
    return 0;
}

/* DeepSpeed's reduce buffer as deepspeed/runtime/zero/stage_1_and_2.py and stage3.py
 * (v0.16.1) allocate it: torch.empty(int(reduce_bucket_size)) in the 16-bit dtype, never
 * cut to the model's size; ZeRO-1/2 in backward(), a second one with overlap_comm; ZeRO-3
 * once, when the optimizer is built, kept for good; no all-gather bucket (the step gathers
 * into the flat groups, all_gather_into_tensor, from v0.12.4). */
static void test_zero_reduce_buffers(void **state)
{
    /* 494 M parameters: fewer than the default bucket of 5e8 elements */
    const struct gm_model *m = gm_model_catalog_find("qwen2.5-0.5b");
    struct gm_estimate *z = NULL;
    struct gm_job j;
    struct gm_error e;
    (void)state;
    assert_non_null(m);
    train_job(&j, m);
    j.parallel.gpus = 2;
    j.parallel.shard = GM_SHARD_ZERO2;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    assert_true(z->n_params < 500000000ull);
    assert_int_equal(component(z, "zero_reduce_bucket"), 500000000ull * 2);
    assert_int_equal(component_phases(z, "zero_reduce_bucket"), GM_EST_PHASE_SAVED);
    assert_int_equal(component(z, "zero_allgather_bucket"), UINT64_MAX);
    /* overlap_comm: double-buffered */
    j.parallel.zero_overlap_comm = true;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    assert_int_equal(component(z, "zero_reduce_bucket"), 2ull * 500000000ull * 2);
    /* ZeRO-1 alike */
    j.parallel.shard = GM_SHARD_ZERO1;
    j.parallel.bucket_elements = 200000000;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    assert_int_equal(component(z, "zero_reduce_bucket"), 2ull * 200000000ull * 2);
    /* ZeRO-3: one buffer whatever overlap_comm says, held through the whole step; the HF
     * Trainer's "auto" makes it hidden x hidden elements (896^2 here) */
    j.parallel.shard = GM_SHARD_ZERO3;
    j.parallel.bucket_elements = 896ull * 896;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    assert_int_equal(component(z, "zero_reduce_bucket"), 896ull * 896 * 2);
    assert_int_equal(component_phases(z, "zero_reduce_bucket"), GM_EST_PHASE_TRAIN_ALL);
    /* one GPU (ZeRO-Offload on a single card) has it too: DeepSpeedZeroOptimizer.backward()
     * makes it under "if self.contiguous_gradients:" alone (deepspeed/runtime/zero/
     * stage_1_and_2.py, v0.16.1), whatever the world size */
    j.parallel.gpus = 1;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    assert_int_equal(component(z, "zero_reduce_bucket"), 896ull * 896 * 2);
    j.parallel.shard = GM_SHARD_ZERO2;
    j.parallel.bucket_elements = 500000000;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    assert_int_equal(component(z, "zero_reduce_bucket"), 2ull * 500000000ull * 2);
    /* in the optimizer's dtype: fp32 in fp32 training */
    j.numerics.precision = GM_PREC_FP32;
    j.parallel.zero_overlap_comm = false;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    assert_int_equal(component(z, "zero_reduce_bucket"), 500000000ull * 4);
    gm_estimate_free(z);
}

/* ZeRO-1/2's reduce buffer lives from before the loss's backward to the end of backward
 * (the optimizer's backward() makes it before loss.backward()): with full checkpointing the
 * peak is at the loss or in backward, so the peak moves by the whole bucket. */
static void test_zero_reduce_buffer_moves_peak(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("qwen2.5-0.5b");
    struct gm_estimate *z = NULL;
    struct gm_job j;
    struct gm_error e;
    uint64_t small, large;
    (void)state;
    assert_non_null(m);
    train_job(&j, m);
    j.workload.batch = 8;
    j.workload.seq = 4096;
    j.parallel.gpus = 2;
    j.parallel.shard = GM_SHARD_ZERO2;
    j.memory.checkpointing = GM_CKPT_FULL;
    j.parallel.bucket_elements = 1;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    assert_int_equal(component_phases(z, "zero_reduce_bucket"), GM_EST_PHASE_SAVED);
    small = z->peak_allocated_bytes;
    j.parallel.bucket_elements = 500000000;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    large = z->peak_allocated_bytes;
    assert_int_equal(large - small, (500000000ull - 1) * 2);
    /* made at the loss, after the forward: a bucket too large for the card fails there, with
     * the forward's tensors live */
    j.workload.batch = 1;
    j.workload.seq = 2048;
    j.memory.checkpointing = GM_CKPT_NONE;
    j.parallel.bucket_elements = 20000000000ull;
    j.gpu.memory_bytes = 30ull << 30;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    assert_true(z->replay.oom);
    assert_int_equal(z->replay.failed.request, 20000000000ull * 2);
    assert_int_equal(z->replay.failed.at, GM_EST_AT_LOSS);
    assert_int_equal(z->replay.failed.kind, GM_KIND_COMM_BUFFERS);
    gm_estimate_free(z);
}

/* bitsandbytes through Lightning Fabric's BitsandbytesPrecision (LitGPT 8641822, Lightning
 * 71aed751 src/lightning/fabric/plugins/precision/bitsandbytes.py): every nn.Linear is
 * converted, the lm_head too, and quantised from an fp16 copy, so bitsandbytes 0.41.1's
 * dequantize_4bit returns fp16 and MatMul4Bit casts it to bf16 beside it
 * (F.dequantize_4bit(B, state).to(A.dtype)).  HF's loading leaves the lm_head in 16 bit and
 * quantises in the compute dtype. */
static void test_bnb_lightning(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("Llama-2-7b-hf");
    const uint64_t head = 32000ull * 4096, mlp = 11008ull * 4096;
    struct gm_estimate *hf = NULL, *lit = NULL;
    struct gm_job j;
    struct gm_error e;
    (void)state;
    assert_non_null(m);
    /* serving a prompt of 6 tokens in NF4 (fp32 absmax per 64) */
    gm_job_init(&j);
    j.mode = GM_EST_INFER;
    j.model.model = m;
    j.workload.batch = 1;
    j.workload.context = 6;
    j.workload.new_tokens = 50;
    assert_int_equal(gm_job_set(&j, "quant", "nf4", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &hf, &e), GM_OK);
    assert_int_equal(gm_job_set(&j, "model-impl", "litgpt", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &lit, &e), GM_OK);
    /* the lm_head in NF4 (0.5 B + 4 B per 64) instead of bf16 */
    assert_int_equal(component(hf, "weights") - component(lit, "weights"),
                     head * 2 - (head / 2 + head / 64 * 4));
    /* the prompt's matmul: HF dequantises its largest linear (the MLP's) once; Lightning its
     * lm_head, in fp16, then casts it */
    assert_int_equal(component(hf, "nf4_dequant_buffer"), mlp * 2);
    assert_int_equal(component(lit, "nf4_dequant_buffer"), head * 2 * 2);
    /* each copy a tensor of its own (dequantize_4bit's output, then its cast), as in
     * training (stage_adapters.c) */
    assert_int_equal(component_tensors(hf, "nf4_dequant_buffer"), 1);
    assert_int_equal(component_tensors(lit, "nf4_dequant_buffer"), 2);
    /* QLoRA training: the lm_head dequantised and cast (2 x 2 B) outweighs a layer's largest
     * linear beside its successor (3 x 2 B with the cast) */
    gm_estimate_free(hf);
    gm_estimate_free(lit);
    hf = lit = NULL;
    train_job(&j, m);
    j.memory.adapter = GM_ADAPTER_QLORA;
    j.memory.lora.fp32_upcast = false;
    j.numerics.precision = GM_PREC_BF16;
    assert_int_equal(gm_estimate_run(&j, &hf, &e), GM_OK);
    assert_int_equal(component(hf, "nf4_dequant_buffer"), mlp * 2 * 2);
    assert_int_equal(gm_job_set(&j, "model-impl", "litgpt", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &lit, &e), GM_OK);
    assert_int_equal(component(lit, "nf4_dequant_buffer"), head * 2 * 2);
    assert_int_equal(component_tensors(hf, "nf4_dequant_buffer"), 2);
    assert_int_equal(component_tensors(lit, "nf4_dequant_buffer"), 2);
    assert_true(lit->lora.base_weight_bytes < hf->lora.base_weight_bytes);
    /* fp16 compute (LitGPT's "16-true", finetune/lora.py 8641822; gpumem's nearest is
     * fp16-mixed): the state's fp16 is the compute dtype, no cast, one copy of the lm_head
     * (above a layer's largest linear beside its successor, 2 x 2 B) */
    gm_estimate_free(lit);
    lit = NULL;
    j.numerics.precision = GM_PREC_FP16_MIXED;
    assert_int_equal(gm_estimate_run(&j, &lit, &e), GM_OK);
    assert_int_equal(component(lit, "nf4_dequant_buffer"), head * 2);
    gm_estimate_free(hf);
    gm_estimate_free(lit);
    hf = lit = NULL;
    /* serving on a T4 (no bf16): LitGPT picks "16-true" (lit_gpt/utils.py
     * get_default_supported_precision, 8641822), so the prompt's lm_head is dequantised
     * once, whatever the training-only --precision says */
    gm_job_init(&j);
    j.mode = GM_EST_INFER;
    j.model.model = m;
    j.workload.batch = 1;
    j.workload.context = 6;
    j.workload.new_tokens = 50;
    assert_int_equal(gm_job_set(&j, "quant", "nf4", &e), GM_OK);
    assert_int_equal(gm_job_set(&j, "model-impl", "litgpt", &e), GM_OK);
    assert_int_equal(gm_job_set(&j, "gpu", "T4", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &lit, &e), GM_OK);
    assert_int_equal(component(lit, "nf4_dequant_buffer"), head * 2);
    assert_int_equal(component_tensors(lit, "nf4_dequant_buffer"), 1);
    gm_estimate_free(lit);
}

/* Bytes of a component, 0 when the estimate has none. */
static uint64_t component_or0(const struct gm_estimate *e, const char *name)
{
    uint64_t b = component(e, name);
    return b == UINT64_MAX ? 0 : b;
}

/* ZeRO-3's reuse distance (DeepSpeed PartitionedParameterCoordinator.__params_to_release,
 * deepspeed/runtime/zero/partitioned_param_coordinator.py, v0.8.0 to v0.16.4): a module's
 * parameters stay gathered when the modules fetched before their next use hold fewer than
 * stage3_max_reuse_distance of the rank's elements (ds_numel: / tp).  The lm_head's next use
 * is its own backward, right after the loss: kept whatever the distance, and released by its
 * post-backward hook, so at the loss only; a layer element with s layer elements after it
 * comes back after 2H + 2s elements (3s when every layer is recomputed; each layer after it
 * with its own c when only some are); with a distance beyond the whole model everything stays
 * gathered, the trainable untied embedding until its backward at the end.  Of the kept layers the
 * one computed and the one prefetched are counted by gathered_params and gathered_prefetch. */
static void test_zero3_reuse_distance(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("llama-2-7b");
    const uint64_t H = 32000ull * 4096; /* the untied lm_head, also the embedding */
    struct gm_estimate *z = NULL;
    struct gm_job j;
    struct gm_error e;
    uint64_t unit, kept;
    (void)state;
    assert_non_null(m);
    train_job(&j, m);
    j.numerics.precision = GM_PREC_BF16;
    j.parallel.gpus = 2;
    j.parallel.shard = GM_SHARD_ZERO3;
    /* a distance of 1000 elements: only the lm_head (bf16) stays, from its forward to its
     * own backward: the loss, not the layers' backward */
    j.parallel.zero_reuse_distance = 1000;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    assert_int_equal(component(z, "zero3_reused_head"), H * 2);
    assert_int_equal(component_phases(z, "zero3_reused_head"), GM_EST_PHASE_LOSS);
    assert_int_equal(component(z, "zero3_reused_params"), UINT64_MAX);
    assert_int_equal(component(z, "zero3_reused_embedding"), UINT64_MAX);
    /* 0: every module released after use (DeepSpeed before a trace is complete).  The
     * lm_head gathered again for its own backward is not counted at the loss: a known
     * under-count there, not a DeepSpeed fact */
    j.parallel.zero_reuse_distance = 0;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    assert_int_equal(component(z, "zero3_reused_head"), UINT64_MAX);
    assert_int_equal(component(z, "zero3_reused_params"), UINT64_MAX);
    /* beyond the model: at the start of backward every layer and the embedding gathered,
     * two layers of them counted as the layer computed and the one prefetched */
    j.parallel.zero_reuse_distance = 1000000000000000ull;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    unit = component(z, "gathered_params");
    assert_true(unit > 0 && unit != UINT64_MAX);
    assert_int_equal(component(z, "gathered_prefetch"), unit);
    assert_int_equal(component(z, "zero3_reused_embedding"), H * 2);
    assert_int_equal(component_phases(z, "zero3_reused_embedding"),
                     GM_EST_PHASE_SAVED | GM_EST_PHASE_BACKWARD_END);
    assert_int_equal(component_phases(z, "zero3_reused_params"), GM_EST_PHASE_SAVED);
    /* at the loss, the last layer is the prefetched one: the lm_head and one layer more */
    assert_int_equal(component(z, "zero3_reused_head"), H * 2 + unit);
    {
        /* the whole model in bf16 less the lm_head and the final norm, within rounding */
        uint64_t all = component(z, "zero3_reused_params") + H * 2 + 2 * unit;
        uint64_t want = z->n_params * 2 - H * 2;
        assert_true(all <= want && want - all < 4096 * 2 + 64);
    }
    /* DeepSpeed's default 1e9: the last (1e9 - 2H) / 2 layer elements without
     * checkpointing (1.8 layers: the one computed, 0.8 of the prefetched one, at the loss
     * the 0.8 beside the prefetched last layer) */
    j.parallel.zero_reuse_distance = 1000000000;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    kept =
        component(z, "zero3_reused_head") - H * 2 + unit + component_or0(z, "zero3_reused_params");
    assert_true(kept / 2 >= (1000000000 - 2 * H) / 2 - 2 &&
                kept / 2 <= (1000000000 - 2 * H) / 2 + 2);
    /* a LoRA job: the frozen embedding has no backward, nothing keeps it */
    j.parallel.zero_reuse_distance = 1000000000000000ull;
    j.memory.adapter = GM_ADAPTER_LORA;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    assert_int_equal(component(z, "zero3_reused_embedding"), UINT64_MAX);
    j.memory.adapter = GM_ADAPTER_NONE;
    j.parallel.zero_reuse_distance = 1000000000;
    /* every layer recomputed: (1e9 - 2H) / 3 */
    j.memory.checkpointing = GM_CKPT_FULL;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    kept =
        component(z, "zero3_reused_head") - H * 2 + unit + component_or0(z, "zero3_reused_params");
    assert_true(kept / 2 >= (1000000000 - 2 * H) / 3 - 2 &&
                kept / 2 <= (1000000000 - 2 * H) / 3 + 2);
    /* every second layer recomputed, counted from 1 (torchtitan _apply_layer_sac): the last
     * layer (the 32nd) is, and comes back after 3 n; the 31st is not: of it
     * (1e9 - 2H - 3n) / 2 elements stay, n = unit / 2 (not an average c of 1.5) */
    j.memory.checkpoint_every = 2;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    kept =
        component(z, "zero3_reused_head") - H * 2 + unit + component_or0(z, "zero3_reused_params");
    {
        uint64_t n = unit / 2, want = n + (1000000000 - 2 * H - 3 * n) / 2;
        assert_true(kept / 2 >= want - 2 && kept / 2 <= want + 2);
    }
    /* tp 2: the rank's elements are halves, so (1e9 - 2H/2) / 2 of them stay (4.3 layers of
     * the rank's halves), in bytes of its half-layers */
    j.memory.checkpointing = GM_CKPT_NONE;
    j.memory.checkpoint_every = 1;
    j.parallel.gpus = 4;
    j.parallel.tp = 2;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    unit = component(z, "gathered_params");
    assert_int_equal(component(z, "zero3_reused_head"), H * 2 / 2 + unit);
    kept = component(z, "zero3_reused_params") + 2 * unit;
    assert_true(kept / 2 >= (1000000000 - H) / 2 - 2 && kept / 2 <= (1000000000 - H) / 2 + 2);
    /* QLoRA: a layer's elements are its packed 4-bit storage in 16-bit words (PEFT's ZeRO-3
     * QLoRA recipe, bnb_4bit_quant_storage bf16), its stored bytes / 2: (1e9 - 2H) / 2 of
     * them stay, 5.6 of the NF4 layers where the whole-model count would keep 1.8 */
    j.parallel.gpus = 2;
    j.parallel.tp = 1;
    j.memory.adapter = GM_ADAPTER_QLORA;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    unit = component(z, "gathered_params");
    kept = component(z, "zero3_reused_params") + 2 * unit;
    assert_true(kept / 2 >= (1000000000 - 2 * H) / 2 - 2 &&
                kept / 2 <= (1000000000 - 2 * H) / 2 + 2);
    j.memory.adapter = GM_ADAPTER_NONE;
    /* FSDP has no such rule */
    j.parallel.shard = GM_SHARD_FSDP;
    j.parallel.fsdp_version = 2;
    assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
    assert_int_equal(component(z, "zero3_reused_params"), UINT64_MAX);
    assert_int_equal(component(z, "zero3_reused_head"), UINT64_MAX);
    gm_estimate_free(z);
    z = NULL;
    {
        /* a tied embedding (Qwen2.5-0.5B, 24 layers of 14.9 M): the shared weight, kept from
         * the lm_head's backward to the embedding's (c L = 358 M elements < 1e9), is live to
         * the end of the backward; at the loss only the prefetched layer's neighbour is
         * added.  Frozen (LoRA), the embedding has no backward and is released. */
        const struct gm_model *q = gm_model_catalog_find("qwen2.5-0.5b");
        const uint64_t E = 151936ull * 896;
        assert_non_null(q);
        train_job(&j, q);
        j.numerics.precision = GM_PREC_BF16;
        j.parallel.gpus = 2;
        j.parallel.shard = GM_SHARD_ZERO3;
        j.parallel.zero_reuse_distance = 1000000000;
        assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
        assert_int_equal(component(z, "zero3_reused_embedding"), E * 2);
        assert_int_equal(component_phases(z, "zero3_reused_embedding"),
                         GM_EST_PHASE_SAVED | GM_EST_PHASE_BACKWARD_END);
        assert_int_equal(component(z, "zero3_reused_head"), component(z, "gathered_params"));
        j.memory.adapter = GM_ADAPTER_LORA;
        assert_int_equal(gm_estimate_run(&j, &z, &e), GM_OK);
        assert_int_equal(component(z, "zero3_reused_embedding"), UINT64_MAX);
        gm_estimate_free(z);
    }
}

/* Pipeline: the first stage keeps p micro-batches of L/p layers (= L layers' worth), the
 * last stage L/p layers of one micro-batch plus the logits. */
static void test_pipeline(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("Meta-Llama-3-8B");
    struct gm_job j;
    struct gm_error e;
    (void)state;
    train_job(&j, m);
    assert_int_equal(gm_estimate_run(&j, &one, &e), GM_OK);
    j.parallel.gpus = 4;
    j.parallel.pp = 4;
    assert_int_equal(gm_estimate_run(&j, &pp, &e), GM_OK);
    assert_int_equal(pp->layout.n_groups, 3);
    assert_string_equal(pp->layout.groups[0].role, "first stage");
    assert_int_equal(pp->layout.groups[0].count, 1);
    assert_int_equal(pp->layout.groups[0].layers, 8);
    assert_int_equal(pp->layout.groups[1].count, 2);
    assert_int_equal(pp->layout.groups[1].first_rank, 1);
    assert_int_equal(pp->layout.groups[2].first_rank, 3);
    /* the kept estimate is the largest stage: here the first (embedding, p micro-batches) */
    assert_int_equal(pp->device_bytes, pp->layout.groups[0].device_bytes);
    assert_true(pp->layout.groups[0].device_bytes > pp->layout.groups[2].device_bytes);
    assert_int_equal(component(pp, "activations"), component(one, "activations"));
    assert_int_equal(component(pp, "logits_and_loss"), UINT64_MAX);
    /* about a quarter of the optimizer state, plus the embedding's share */
    assert_true(component(pp, "optimizer_state") > component(one, "optimizer_state") / 4);
    assert_true(component(pp, "optimizer_state") < component(one, "optimizer_state") / 3);
    /* allocation failures are reported, never a crash */
    for (long k = 0; k < 4; k++) {
        enum gm_status st;
        gm_alloc_fail_after(k);
        st = gm_estimate_run(&j, &pp, &e);
        gm_alloc_fail_after(-1);
        assert_true(st == GM_OK || st == GM_ERR_NOMEM);
    }
    j.parallel.shard = GM_SHARD_ZERO3;
    assert_int_equal(gm_estimate_run(&j, &pp, &e), GM_ERR_INVALID);
    j.parallel.shard = GM_SHARD_NONE;
    j.parallel.pp = 64;
    j.parallel.gpus = 64;
    assert_int_equal(gm_estimate_run(&j, &pp, &e), GM_ERR_INVALID);
}

/* Interleaved 1F1B as torch's ScheduleInterleaved1F1B runs it: rank r runs W_r = min((v - 1)
 * x mpr + 2 (p - 1 - r), n x v) stage-forwards before its first backward, then a forward
 * before each backward.  With p 4, v 2 and n 4 micro-batches rank 0 runs all 8 first (4
 * micro-batches of its layers, as 1F1B's first stage), rank 1 too (4, where 1F1B keeps 3),
 * the last rank 4 + 1 (2.5, where 1F1B keeps 1); with n 16 (rounds of 4) rank 0 holds
 * 4 + 6 + 1 = 11 (5.5).  Only the activations move: the groups' allocated peaks differ by
 * the activations of (difference) micro-batches through a rank's 8 of 32 layers. */
static void test_pipeline_interleaved(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("Meta-Llama-3-8B");
    struct gm_estimate *whole = NULL, *f = NULL, *il = NULL;
    struct gm_job j;
    struct gm_error e;
    double act;
    (void)state;
    assert_int_equal(gm_est_pp_interleaved_in_flight(4, 2, 4, 0), 8);
    assert_int_equal(gm_est_pp_interleaved_in_flight(4, 2, 4, 3), 5);
    assert_int_equal(gm_est_pp_interleaved_in_flight(4, 2, 16, 0), 11);
    assert_int_equal(gm_est_pp_interleaved_in_flight(8, 2, 8, 0), 16);
    assert_int_equal(gm_est_pp_interleaved_in_flight(8, 2, 8, 7), 9);
    train_job(&j, m);
    j.workload.batch = 8; /* activations, not the optimizer step, set every rank's peak */
    j.workload.seq = 4096;
    assert_int_equal(gm_estimate_run(&j, &whole, &e), GM_OK);
    act = (double)component(whole, "activations") * 8 / 32; /* one micro-batch, one rank */
    j.parallel.gpus = 4;
    j.parallel.pp = 4;
    assert_int_equal(gm_estimate_run(&j, &f, &e), GM_OK);
    assert_int_equal(gm_job_set(&j, "pp-schedule", "interleaved-1f1b", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &il, &e), GM_OK);
    assert_int_equal(il->layout.n_groups, 3);
    assert_int_equal(il->layout.groups[0].allocated_bytes, f->layout.groups[0].allocated_bytes);
    assert_true(
        fabs((double)(il->layout.groups[1].allocated_bytes - f->layout.groups[1].allocated_bytes) -
             act * (4 - 3)) < 4);
    assert_true(
        fabs((double)(il->layout.groups[2].allocated_bytes - f->layout.groups[2].allocated_bytes) -
             act * (2.5 - 1)) < 4);
    assert_int_equal(gm_job_set(&j, "grad-accum", "16", &e), GM_OK);
    assert_int_equal(gm_job_set(&j, "pp-schedule", "1f1b", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &f, &e), GM_OK);
    assert_int_equal(gm_job_set(&j, "pp-schedule", "interleaved-1f1b", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &il, &e), GM_OK);
    assert_true(
        fabs((double)(il->layout.groups[0].allocated_bytes - f->layout.groups[0].allocated_bytes) -
             act * (5.5 - 4)) < 4);
    /* torch's rounds: 6 micro-batches on 4 ranks are one round of 6, 9 are not 2 rounds */
    assert_int_equal(gm_job_set(&j, "grad-accum", "6", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &il, &e), GM_OK);
    assert_int_equal(gm_job_set(&j, "grad-accum", "9", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &il, &e), GM_ERR_INVALID);
    /* more stages than layers, and the schedule without a pipeline, are refused */
    assert_int_equal(gm_job_set(&j, "grad-accum", "4", &e), GM_OK);
    assert_int_equal(gm_job_set(&j, "pp-stages-per-rank", "9", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &il, &e), GM_ERR_INVALID);
    train_job(&j, m);
    assert_int_equal(gm_job_set(&j, "pp-schedule", "interleaved-1f1b", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &il, &e), GM_ERR_INVALID);
    /* --pp-stages-per-rank belongs to the interleaved schedule */
    train_job(&j, m);
    j.parallel.gpus = 4;
    j.parallel.pp = 4;
    assert_int_equal(gm_job_set(&j, "pp-stages-per-rank", "2", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &il, &e), GM_ERR_INVALID);
    assert_int_equal(gm_job_set(&j, "pp-schedule", "interleaved-1f1b", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &il, &e), GM_OK);
    /* DeepSpeed's pipeline engine (--zero 1) and Megatron have no ScheduleInterleaved1F1B */
    assert_int_equal(gm_job_set(&j, "zero", "1", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &il, &e), GM_ERR_INVALID);
    assert_int_equal(gm_job_set(&j, "zero", "0", &e), GM_OK);
    assert_int_equal(gm_job_set(&j, "stack", "megatron", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &il, &e), GM_ERR_INVALID);
    gm_estimate_free(whole);
    gm_estimate_free(f);
    gm_estimate_free(il);
}

/* The pipeline's micro-batches are decided from the job's values, whoever set them: a
 * struct caller's grad_accum 8 runs the same 8 micro-batches as gm_job_set("grad-accum"),
 * pp_microbatches set directly too, and torch's rounds check holds for each (9 on 4 ranks
 * is refused); a schedule out of the enum's range is refused, not taken for 1F1B. */
static void test_pipeline_microbatches(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("Meta-Llama-3-8B");
    struct gm_estimate *set = NULL, *raw = NULL;
    struct gm_job j;
    struct gm_error e;
    (void)state;
    train_job(&j, m);
    j.parallel.gpus = 4;
    j.parallel.pp = 4;
    j.parallel.pp_schedule = GM_PP_INTERLEAVED_1F1B;
    assert_int_equal(gm_job_set(&j, "grad-accum", "8", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &set, &e), GM_OK);
    train_job(&j, m);
    j.parallel.gpus = 4;
    j.parallel.pp = 4;
    j.parallel.pp_schedule = GM_PP_INTERLEAVED_1F1B;
    j.workload.grad_accum = 8;
    assert_int_equal(gm_estimate_run(&j, &raw, &e), GM_OK);
    assert_int_equal(raw->layout.n_groups, set->layout.n_groups);
    for (size_t g = 0; g < raw->layout.n_groups; g++)
        assert_int_equal(raw->layout.groups[g].allocated_bytes,
                         set->layout.groups[g].allocated_bytes);
    /* without accumulation the default is the pipeline's degree; pp_microbatches 8 gives the
     * first rank 11 stage-forwards in flight where 4 give it 8 */
    j.workload.grad_accum = 1;
    assert_int_equal(gm_estimate_run(&j, &set, &e), GM_OK);
    j.parallel.pp_microbatches = 4;
    assert_int_equal(gm_estimate_run(&j, &raw, &e), GM_OK);
    assert_int_equal(raw->layout.groups[0].allocated_bytes, set->layout.groups[0].allocated_bytes);
    j.parallel.pp_microbatches = 8;
    assert_int_equal(gm_estimate_run(&j, &raw, &e), GM_OK);
    assert_true(raw->layout.groups[0].allocated_bytes > set->layout.groups[0].allocated_bytes);
    j.parallel.pp_microbatches = 9;
    assert_int_equal(gm_estimate_run(&j, &raw, &e), GM_ERR_INVALID);
    j.parallel.pp_microbatches = 0;
    j.workload.grad_accum = 9;
    assert_int_equal(gm_estimate_run(&j, &raw, &e), GM_ERR_INVALID);
    j.workload.grad_accum = 8;
    j.parallel.pp_schedule = (enum gm_pp_schedule)7;
    assert_int_equal(gm_estimate_run(&j, &raw, &e), GM_ERR_INVALID);
    gm_estimate_free(set);
    gm_estimate_free(raw);
}

/* AsyncTP: the fused ops' workspace is one SymmetricMemory buffer per TP group, grown to the
 * largest request, a matmul reduce-scatter's two output chunks of [tokens / tp, hidden] (here
 * 2 x 2 x 4096 / 2 x 4096 x 2 B = 64 MiB), plus the 2048-B signal pad, mapped at the 2 MiB
 * granularity with cuMemCreate: device used grows by it, max_memory_reserved does not (the
 * caching allocator never sees it).  torchtitan refuses AsyncTP without torch.compile. */
static void test_async_tp_workspace(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("Meta-Llama-3-8B");
    struct gm_estimate *sync = NULL, *async = NULL;
    struct gm_job j;
    struct gm_error e;
    (void)state;
    train_job(&j, m);
    j.workload.batch = 2;
    j.workload.seq = 4096;
    j.parallel.gpus = 2;
    j.parallel.tp = 2;
    j.parallel.sequence_parallel = true;
    j.memory.compile = true;
    assert_int_equal(gm_estimate_run(&j, &sync, &e), GM_OK);
    j.parallel.async_tp = true;
    assert_int_equal(gm_estimate_run(&j, &async, &e), GM_OK);
    assert_int_equal(gm_estimate_kind_bytes(async, GM_KIND_SYMM_MEM), 66 * GM_MIB);
    assert_int_equal(gm_estimate_kind_bytes(sync, GM_KIND_SYMM_MEM), 0);
    assert_int_equal(async->peak_allocated_bytes, sync->peak_allocated_bytes);
    assert_int_equal(async->peak_reserved_bytes, sync->peak_reserved_bytes);
    assert_int_equal(async->device_bytes - sync->device_bytes, 66 * GM_MIB);
    assert_true(gm_est_kind_outside_allocator(GM_KIND_SYMM_MEM));
    {
        /* the workspace has an assumption line of its own, whole (not cut at the note's
         * size with the other overheads) */
        bool line = false;
        for (size_t i = 0; i < async->n_assumptions; i++)
            line |=
                strncmp(async->assumptions[i], "AsyncTP workspace 66 MiB (--async-tp)", 37) == 0 &&
                strstr(async->assumptions[i], "outside max_memory_reserved") != NULL;
        assert_true(line);
    }
    /* torchtitan's stack has AsyncTP; Megatron (TransformerEngine's userbuffers) and the HF
     * Trainer do not */
    assert_int_equal(gm_job_set(&j, "stack", "torchtitan", &e), GM_OK);
    j.memory.compile = true;
    assert_int_equal(gm_estimate_run(&j, &async, &e), GM_OK);
    assert_int_equal(gm_job_set(&j, "stack", "megatron", &e), GM_OK);
    j.memory.compile = true;
    assert_int_equal(gm_estimate_run(&j, &async, &e), GM_ERR_INVALID);
    assert_int_equal(gm_job_set(&j, "stack", "hf-trainer", &e), GM_OK);
    j.memory.compile = true;
    assert_int_equal(gm_estimate_run(&j, &async, &e), GM_ERR_INVALID);
    train_job(&j, m);
    j.parallel.gpus = 2;
    j.parallel.tp = 2;
    j.parallel.sequence_parallel = true;
    j.parallel.async_tp = true;
    j.memory.compile = false;
    assert_int_equal(gm_estimate_run(&j, &async, &e), GM_ERR_INVALID);
    gm_estimate_free(sync);
    gm_estimate_free(async);
}

/* Sequence parallelism as torch's TP plan runs it: the lm_head (ColwiseParallel with
 * input_layouts=Shard(1)) all-gathers the final norm's sharded output and F.linear saves the
 * whole sequence for the weight's gradient, T x hidden x 2 B (2 x 4096 tokens x 4096 x 2 B =
 * 64 MiB) where the sharded half (32 MiB) was counted: 32 MiB more at the loss.  Megatron's
 * sequence-parallel linear keeps the shard and gathers it again in backward, and without
 * sequence parallelism the input is already whole. */
static void test_sequence_parallel_head_input(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("Meta-Llama-3-8B");
    struct gm_estimate *r = NULL;
    struct gm_job j;
    struct gm_error e;
    (void)state;
    train_job(&j, m);
    j.workload.batch = 2;
    j.workload.seq = 4096;
    j.parallel.gpus = 2;
    j.parallel.tp = 2;
    j.parallel.sequence_parallel = true;
    assert_int_equal(gm_estimate_run(&j, &r, &e), GM_OK);
    assert_int_equal(component(r, "head_input_gathered"), 32 * GM_MIB);
    j.parallel.sequence_parallel = false;
    assert_int_equal(gm_estimate_run(&j, &r, &e), GM_OK);
    assert_int_equal(component(r, "head_input_gathered"), UINT64_MAX);
    j.parallel.sequence_parallel = true;
    /* a frozen head (LoRA) saves no input for a weight gradient, and a fused linear loss
     * keeps the hidden states itself: neither has the gathered input */
    assert_int_equal(gm_job_set(&j, "lora", NULL, &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &r, &e), GM_OK);
    assert_int_equal(component(r, "head_input_gathered"), UINT64_MAX);
    train_job(&j, m);
    j.workload.batch = 2;
    j.workload.seq = 4096;
    j.parallel.gpus = 2;
    j.parallel.tp = 2;
    j.parallel.sequence_parallel = true;
    assert_int_equal(gm_job_set(&j, "loss", "fused-linear", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &r, &e), GM_OK);
    assert_int_equal(component(r, "head_input_gathered"), UINT64_MAX);
    assert_int_equal(gm_job_set(&j, "loss", "full", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &r, &e), GM_OK);
    assert_int_equal(component(r, "head_input_gathered"), 32 * GM_MIB);
    assert_int_equal(gm_job_set(&j, "stack", "megatron", &e), GM_OK);
    assert_int_equal(gm_estimate_run(&j, &r, &e), GM_OK);
    assert_int_equal(component(r, "head_input_gathered"), UINT64_MAX);
    gm_estimate_free(r);
}

static void test_llamacpp_kv(void **state)
{
    struct gm_model m;
    uint64_t b = 0;
    struct gm_error e;
    (void)state;
    /* measured llama.cpp KV allocations at n_ctx 2048, f16 (Hugging Face discussion
     * dranger003/c4ai-command-r-v01-iMat.GGUF#6) */
    assert_int_equal(
        gm_llamacpp_kv_bytes(gm_model_catalog_find("Meta-Llama-3-8B"), 1, 2048, &b, &e), GM_OK);
    assert_int_equal(b, 256 * GM_MIB);
    assert_int_equal(
        gm_llamacpp_kv_bytes(gm_model_catalog_find("Meta-Llama-3-70B"), 1, 2048, &b, &e), GM_OK);
    assert_int_equal(b, 640 * GM_MIB);
    /* Command-R 35B: 40 layers, 64 KV heads (MHA), head_dim 128 */
    gm_model_init(&m);
    m.n_layers = 40;
    m.n_kv_heads = 64;
    m.head_dim = 128;
    assert_int_equal(gm_llamacpp_kv_bytes(&m, 1, 2048, &b, &e), GM_OK);
    assert_int_equal(b, 2560 * GM_MIB);
    /* q8_0: 34 bytes per 32 elements */
    assert_int_equal(gm_llamacpp_kv_bytes(&m, 8, 2048, &b, &e), GM_OK);
    assert_int_equal(b, 2ull * 40 * (64 * 128 / 32 * 34) * 2048);
}

/* The job's --kv-dtype reaches llama.cpp as its own cache type, in the library. */
static void test_llamacpp_engine(void **state)
{
    struct gm_job j;
    struct gm_error e;
    uint64_t f16;
    (void)state;
    gm_job_init(&j);
    j.mode = GM_EST_INFER;
    j.model.model = gm_model_catalog_find("Meta-Llama-3-8B");
    j.engine.kind = GM_ENGINE_LLAMACPP;
    j.workload.context = 2048;
    assert_int_equal(gm_estimate_run(&j, &est, &e), GM_OK);
    f16 = component(est, "kv_cache");
    assert_int_equal(f16, 256 * GM_MIB);
    j.numerics.kv_dtype = GM_DTYPE_I8; /* q8_0 */
    assert_int_equal(gm_estimate_run(&j, &est, &e), GM_OK);
    assert_int_equal(component(est, "kv_cache"), 2ull * 32 * (8 * 128 / 32 * 34) * 2048);
    /* ggml buffers are exact: no fragmentation margin, no cuBLAS workspace of PyTorch's */
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_WORKSPACE), 0);
    assert_int_equal(est->peak_reserved_bytes - est->peak_allocated_bytes < 2 * GM_MIB, true);
}

static void test_vllm(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("Meta-Llama-3-8B");
    struct gm_job j;
    struct gm_error e;
    uint64_t need;
    (void)state;
    gm_job_init(&j);
    j.mode = GM_EST_INFER;
    j.model.model = m;
    j.gpu.memory_bytes = 80 * GM_GIB;
    j.engine.kind = GM_ENGINE_VLLM;
    assert_int_equal(gm_estimate_run(&j, &est, &e), GM_OK);
    assert_int_equal(est->serving.kv_bytes_per_token, 131072); /* 2 x 32 x 8 x 128 x 2 B */
    assert_int_equal(est->serving.budget_bytes, (uint64_t)(80.0 * 0.9 * (double)GM_GIB));
    /* current vLLM (0.21+): its own estimate of the CUDA graphs is charged to the budget too
     * (not the captured pool, the cuda_graphs component); the profile peak holds PyTorch's
     * cuBLAS workspace (16-bit layers), its own component */
    need = component(est, "weights") + component(est, "activations") + component(est, "logits") +
           gm_estimate_kind_bytes(est, GM_KIND_TORCH_WORKSPACE) + est->serving.non_torch_bytes +
           est->serving.cuda_graph_charged_bytes;
    assert_int_equal(est->serving.kv_blocks, (est->serving.budget_bytes - need) / (16 * 131072));
    assert_int_equal(est->serving.kv_tokens, est->serving.kv_blocks * 16);
    /* the weights as vLLM's load allocates them: the tensors and the rotary cos/sin cache,
     * 8192 positions x 128 x 2 B, a buffer no checkpoint stores */
    assert_int_equal(component(est, "weights"), 8030261248ull * 2 + 8192ull * 128 * 2);
    assert_int_equal(est->serving.max_model_len, 8192);
    /* the CUDA context is outside the budget and non-torch memory (the kernels vLLM's
     * load and profile run bring, 0.14 GiB from 0.11) replaces the workspace */
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_NON_TORCH), 143 * GM_MIB);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_WORKSPACE), 0);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_CUDA_CONTEXT), 450 * GM_MIB);
    assert_true(est->fit.fits);
    /* TP 2: half the weights and KV heads; NCCL buffers of the pynccl communicator and
     * torch's group, outside the budget since 0.11 (the baseline is taken after them) */
    j.parallel.tp = 2;
    j.parallel.gpus = 2;
    assert_int_equal(gm_estimate_run(&j, &est, &e), GM_OK);
    assert_int_equal(est->serving.kv_bytes_per_token, 65536);
    /* the custom all-reduce's two IPC buffers beside the kernels: 10 + 8 MiB */
    assert_int_equal(est->serving.non_torch_bytes, 143 * GM_MIB + 18 * GM_MIB);
    assert_int_equal(est->layout.nccl_communicators, 2);
    {
        uint64_t nccl;
        /* 0.9.2 to 0.10: NCCL initialised after the baseline, so charged to the budget
         * (against 0.21, whose V1 runner samples the profile as 0.10 does) */
        uint64_t blocks, graphs;
        j.stack.vllm = GM_VERSION(0, 21, 0);
        assert_int_equal(gm_estimate_run(&j, &est, &e), GM_OK);
        blocks = est->serving.kv_blocks;
        graphs = est->serving.cuda_graph_charged_bytes; /* vLLM's estimate, not the pool */
        j.stack.vllm = GM_VERSION(0, 10, 1);
        assert_int_equal(gm_estimate_run(&j, &est, &e), GM_OK);
        nccl = gm_estimate_kind_bytes(est, GM_KIND_NCCL);
        assert_true(nccl > 0);
        /* NCCL and the custom all-reduce buffers charged, the graphs not, 0.21 charges
         * the communicator its profile run creates (420 MiB), and 0.10 counts 20 MiB of
         * kernels where 0.21 counts 143: the pools differ by that, to within the one block
         * each cut leaves (signed: 0.10's pool may be the larger) */
        {
            int64_t moved = ((int64_t)blocks - (int64_t)est->serving.kv_blocks) * 16 * 65536;
            int64_t charged = (int64_t)nccl + 18 * (int64_t)GM_MIB - (int64_t)graphs -
                              420 * (int64_t)GM_MIB - (143 - 20) * (int64_t)GM_MIB;
            assert_true(moved + 16 * 65536 > charged);
            assert_true(moved < charged + 16 * 65536);
        }
        j.stack.vllm = 0;
    }
    /* no GPU given */
    j.gpu.memory_bytes = 0;
    assert_int_equal(gm_estimate_run(&j, &est, &e), GM_ERR_INVALID);
}

static void test_search(void **state)
{
    const struct gm_model *m = gm_model_catalog_find("Meta-Llama-3-8B");
    struct gm_job j;
    struct gm_est_search r;
    struct gm_error e;
    (void)state;
    train_job(&j, m);
    j.gpu.memory_bytes = 80 * GM_GIB;
    j.memory.adapter = GM_ADAPTER_QLORA;
    assert_int_equal(gm_estimate_search(&j, GM_SEARCH_BATCH, &r, &est, &e), GM_OK);
    assert_true(r.value >= 1);
    assert_true(est->device_bytes <= j.gpu.memory_bytes);
    assert_true(est->fit.fits);
    /* one more does not fit */
    j.workload.batch = r.value + 1;
    assert_int_equal(gm_estimate_run(&j, &above, &e), GM_OK);
    assert_true(above->device_bytes > j.gpu.memory_bytes);
    assert_false(above->fit.fits);
    /* vLLM: the largest batch of 2048-token sequences is what the pool holds */
    {
        struct gm_job v;
        gm_job_init(&v);
        v.mode = GM_EST_INFER;
        v.model.model = m;
        v.workload.context = 2048;
        v.gpu.memory_bytes = 80 * GM_GIB;
        v.engine.kind = GM_ENGINE_VLLM;
        v.engine.vllm.max_num_seqs = 100000;
        assert_int_equal(gm_estimate_search(&v, GM_SEARCH_BATCH, &r, &est, &e), GM_OK);
        assert_int_equal(r.value, est->serving.kv_tokens / 2048);
        /* the largest max_model_len that starts is what the pool holds (model limit 8192) */
        v.engine.vllm.max_num_seqs = 256;
        v.gpu.memory_bytes = 20 * GM_GIB;
        assert_int_equal(gm_estimate_search(&v, GM_SEARCH_MAX_MODEL_LEN, &r, &est, &e), GM_OK);
        assert_true(r.value >= 2048 && r.value <= 8192);
        assert_true(r.hit_limit || r.value == est->serving.kv_tokens);
    }
    /* full fine-tuning of 8B on a 24 GiB card: not even batch 1 */
    j.memory.adapter = GM_ADAPTER_NONE;
    j.workload.batch = 1;
    j.gpu.memory_bytes = 24 * GM_GIB;
    assert_int_equal(gm_estimate_search(&j, GM_SEARCH_BATCH, &r, &est, &e), GM_OK);
    assert_int_equal(r.value, 0);
    /* a search needs a GPU */
    j.gpu.memory_bytes = 0;
    assert_int_equal(gm_estimate_search(&j, GM_SEARCH_BATCH, &r, NULL, &e), GM_ERR_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deepspeed_documented),
        cmocka_unit_test(test_zero_paper),
        cmocka_unit_test(test_lora_params),
        cmocka_unit_test(test_nf4),
        cmocka_unit_test(test_lora_estimate),
        cmocka_unit_test(test_sharding),
        cmocka_unit_test(test_zero_reduce_buffers),
        cmocka_unit_test(test_zero_reduce_buffer_moves_peak),
        cmocka_unit_test(test_zero3_reuse_distance),
        cmocka_unit_test(test_bnb_lightning),
        cmocka_unit_test(test_pipeline),
        cmocka_unit_test(test_pipeline_interleaved),
        cmocka_unit_test(test_pipeline_microbatches),
        cmocka_unit_test(test_async_tp_workspace),
        cmocka_unit_test(test_sequence_parallel_head_input),
        cmocka_unit_test(test_llamacpp_kv),
        cmocka_unit_test(test_llamacpp_engine),
        cmocka_unit_test(test_vllm),
        cmocka_unit_test(test_search),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
