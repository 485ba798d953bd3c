/* SPDX-License-Identifier: MIT */
/* job.c - the job description: its defaults, the table of settings (what the CLI's options
 * and a binding's keyword arguments set, by name; what the library sets, by id), the checks
 * across settings, and what the job implies for every stage (its allocator, element sizes,
 * data-parallel ranks).
 *
 * Each setting is one row, at the index of its id (enum est_setting): name, type, help,
 * where it applies (modes, engine), the field of struct gm_job it fills and the range it
 * accepts, and a setter for what else it decides.  The choices of a row are the names of
 * its enum (gm_precision_name() reads them).  gm_job_set() parses and checks one value;
 * gm_job_check() holds every numeric field to its row's range and checks what only the
 * whole job can tell (settings that do not apply to the mode, settings that exclude each
 * other, counts that must divide).  The stages check what needs the model. */
#include "estimate/estimate_int.h"

#include "gpumem/text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gm_job_init(struct gm_job *job)
{
    memset(job, 0, sizeof(*job));
    job->mode = GM_EST_WEIGHTS;
    job->method = GM_METHOD_ARCH;
    job->workload.batch = 1;
    job->workload.seq = 2048;
    job->workload.context = 2048;
    job->workload.grad_accum = 1;
    job->numerics.precision = GM_PREC_BF16_MIXED;
    job->numerics.weight_format = GM_WEIGHTS_AS_STORED;
    job->numerics.kv_dtype = GM_DTYPE_UNKNOWN;
    job->numerics.optimizer = GM_OPT_ADAMW;
    job->numerics.optim_impl = GM_OPTIM_FOREACH;
    job->numerics.zero_grad = GM_ZERO_GRAD_SET_TO_NONE;
    job->memory.checkpointing = GM_CKPT_NONE;
    job->memory.attention = GM_ATTN_SDPA;
    job->memory.adapter = GM_ADAPTER_NONE;
    job->memory.lora.rank = 16;
    job->memory.lora.targets = GM_LORA_ATTENTION;
    job->memory.lora.double_quant = true;
    job->memory.lora.block = 64;
    job->memory.lora.fp32_upcast = true;
    job->memory.loss_cache_block = true;
    job->parallel.tp = 1;
    job->parallel.pp = 1;
    job->parallel.pp_schedule = GM_PP_1F1B;
    job->parallel.pp_stages_per_rank = 2;
    job->parallel.cp = 1;
    job->parallel.shard = GM_SHARD_NONE;
    job->parallel.bucket_elements = 500000000;
    job->parallel.zero_reuse_distance = 1000000000;
    job->engine.kind = GM_ENGINE_NONE;
    job->engine.vllm.gpu_memory_utilization = 0.9;
    job->engine.vllm.block_size = 16;
    job->engine.vllm.max_num_seqs = 256;
    job->engine.llamacpp.n_ubatch = 512;
    job->engine.llamacpp.n_gpu_layers = 999;
    job->runtime.cuda_context_bytes = 450 * GM_MIB;
    job->runtime.workspace_bytes = 0; /* cuBLAS's are PyTorch's, inside (cublas.c) */
    job->runtime.fragmentation = 0.25;
    gm_alloc_conf_init(&job->runtime.alloc);
    job->search = GM_SEARCH_NONE;
    job->search_limit = (uint64_t)1 << 20;
    /* memory techniques and the runtime around the tensors */
    job->memory.loss = GM_LOSS_FULL;
    job->memory.loss_chunks = 8;
    job->memory.checkpoint_every = 1;
    job->memory.adapter_dtype = GM_DTYPE_UNKNOWN;
    job->parallel.fsdp_version = 1;
    job->parallel.reshard_after_forward = true;
    job->parallel.sync_module_states = true;
    job->parallel.ep = 1;
}

/* ---- setters that fill more than one field ---- */

/* --image-size WxH (or one side N for a square image), pixels. */
static enum gm_status set_image_size(struct gm_job *j, const union gm_job_value *v,
                                     struct gm_error *err)
{
    unsigned long long w = 0, h = 0;
    char tail = 0;
    int n = sscanf(v->text, "%llu%c%llu", &w, &tail, &h);
    if (n == 1)
        h = w;
    else if (n != 3 || (tail != 'x' && tail != 'X'))
        h = 0;
    if (!w || !h || w > 65536 || h > 65536)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--image-size '%s': give WIDTHxHEIGHT in pixels (1024x768), up to 65536",
                       v->text);
    j->workload.image_width = w;
    j->workload.image_height = h;
    return GM_OK;
}

static enum gm_status set_train(struct gm_job *j, const union gm_job_value *v, struct gm_error *err)
{
    (void)v;
    (void)err;
    j->mode = GM_EST_TRAIN;
    return GM_OK;
}

static enum gm_status set_infer(struct gm_job *j, const union gm_job_value *v, struct gm_error *err)
{
    (void)v;
    (void)err;
    j->mode = GM_EST_INFER;
    return GM_OK;
}

/* --bits: the bits are stored in their field; every weight takes them. */
static enum gm_status set_bits(struct gm_job *j, const union gm_job_value *v, struct gm_error *err)
{
    (void)v;
    (void)err;
    j->numerics.weight_format = GM_WEIGHTS_BITS;
    return GM_OK;
}

static enum gm_status set_reserve(struct gm_job *j, const union gm_job_value *v,
                                  struct gm_error *err)
{
    (void)err;
    j->runtime.reserve_bytes = (uint64_t)llround(v->number * (double)GM_GIB);
    return GM_OK;
}

static enum gm_status set_lora(struct gm_job *j, const union gm_job_value *v, struct gm_error *err)
{
    (void)v;
    (void)err;
    j->memory.adapter = GM_ADAPTER_LORA;
    return GM_OK;
}

static enum gm_status set_qlora(struct gm_job *j, const union gm_job_value *v, struct gm_error *err)
{
    (void)v;
    (void)err;
    j->memory.adapter = GM_ADAPTER_QLORA;
    return GM_OK;
}

const char *est_lora_target_name(unsigned t)
{
    switch (t) {
    case GM_LORA_Q:
        return "q";
    case GM_LORA_K:
        return "k";
    case GM_LORA_V:
        return "v";
    case GM_LORA_O:
        return "o";
    case GM_LORA_GATE:
        return "gate";
    case GM_LORA_UP:
        return "up";
    case GM_LORA_DOWN:
        return "down";
    case GM_LORA_QKV:
        return "qkv";
    default:
        return "unknown";
    }
}

enum gm_status gm_lora_targets_parse(const char *s, unsigned *out, struct gm_error *err)
{
    static const struct {
        const char *name;
        unsigned flags;
    } names[] = {
        {"q", GM_LORA_Q},
        {"q_proj", GM_LORA_Q},
        {"k", GM_LORA_K},
        {"k_proj", GM_LORA_K},
        {"v", GM_LORA_V},
        {"v_proj", GM_LORA_V},
        {"o", GM_LORA_O},
        {"o_proj", GM_LORA_O},
        {"gate", GM_LORA_GATE},
        {"gate_proj", GM_LORA_GATE},
        {"up", GM_LORA_UP},
        {"up_proj", GM_LORA_UP},
        {"down", GM_LORA_DOWN},
        {"down_proj", GM_LORA_DOWN},
        {"attention", GM_LORA_ATTENTION},
        {"qkv", GM_LORA_QKV},
        {"c_attn", GM_LORA_QKV},
        {"query_key_value", GM_LORA_QKV},
        {"qkv_proj", GM_LORA_QKV},
        {"Wqkv", GM_LORA_QKV},
        {"mlp", GM_LORA_MLP},
        {"all-linear", GM_LORA_ALL_LINEAR},
        {"all", GM_LORA_ALL_LINEAR},
    };
    unsigned flags = 0;
    const char *p = s;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        bool found = false;
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && !found; i++) {
            if (strlen(names[i].name) == n && strncmp(names[i].name, p, n) == 0) {
                flags |= names[i].flags;
                found = true;
            }
        }
        if (!found)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "unknown LoRA target '%.*s' (use q,k,v,o,gate,up,down, qkv for a "
                           "fused projection, attention, mlp or all-linear)",
                           (int)(n > 32 ? 32 : n), p);
        p += n;
        if (*p == ',')
            p++;
    }
    if (!flags)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "no LoRA targets given");
    *out = flags;
    return GM_OK;
}

static enum gm_status set_targets(struct gm_job *j, const union gm_job_value *v,
                                  struct gm_error *err)
{
    if (gm_lora_targets_parse(v->text, &j->memory.lora.targets, err) != GM_OK)
        return gm_error_prefix(err, "--lora-targets");
    return GM_OK;
}

static enum gm_status set_fsdp(struct gm_job *j, const union gm_job_value *v, struct gm_error *err)
{
    (void)v;
    (void)err;
    j->parallel.shard = GM_SHARD_FSDP;
    return GM_OK;
}

static enum gm_status set_max_batch(struct gm_job *j, const union gm_job_value *v,
                                    struct gm_error *err)
{
    (void)v;
    (void)err;
    j->search = GM_SEARCH_BATCH;
    return GM_OK;
}

static enum gm_status set_max_context(struct gm_job *j, const union gm_job_value *v,
                                      struct gm_error *err)
{
    (void)v;
    (void)err;
    j->search = GM_SEARCH_CONTEXT;
    return GM_OK;
}

/* --gpu NAME and --gpu-memory SIZE together are that GPU (its compute capability, SMs, peer
 * access) with the total the user gives, as nvidia-smi or the job's log shows it, whichever
 * comes first: each setter keeps what the other one set.  The given total is the one CUDA
 * reports too (cuda_bytes 0), as for --gpu-memory alone. */
static enum gm_status set_gpu(struct gm_job *j, const union gm_job_value *v, struct gm_error *err)
{
    const struct gm_gpu *g;
    if (gm_gpu_lookup(v->text, &g, err) != GM_OK)
        return gm_error_prefix(err, "--gpu");
    if (est_given(j, EST_SET_GPU_MEMORY)) {
        j->gpu.cuda_bytes = 0;
        j->gpu.catalog_bytes = g->memory_bytes;
    } else {
        j->gpu.memory_bytes = g->memory_bytes;
        j->gpu.cuda_bytes = g->cuda_bytes;
        j->gpu.catalog_bytes = 0;
    }
    j->gpu.sm = g->sm;
    j->gpu.sms = g->sms;
    j->gpu.no_p2p = g->no_p2p;
    j->gpu.link = g->link;
    snprintf(j->gpu.label, sizeof j->gpu.label, "%s", g->name);
    return GM_OK;
}

/* The one rule of a GPU's memory (gm_parse_gpu_memory(): "80" means 80 GiB); its errors
 * name the setting, which the CLI shows as --gpu-memory.  With --gpu it replaces that GPU's
 * total only (set_gpu()). */
static enum gm_status set_gpu_memory(struct gm_job *j, const union gm_job_value *v,
                                     struct gm_error *err)
{
    const char *s = v->text;
    uint64_t b;
    enum gm_status st = gm_parse_gpu_memory(s, &b, err);
    if (st != GM_OK)
        return st;
    if (est_given(j, EST_SET_GPU)) {
        if (!j->gpu.catalog_bytes)
            j->gpu.catalog_bytes = j->gpu.memory_bytes;
        j->gpu.memory_bytes = b;
        j->gpu.cuda_bytes = 0;
        return GM_OK;
    }
    j->gpu.memory_bytes = b;
    j->gpu.cuda_bytes = 0;
    j->gpu.catalog_bytes = 0;
    j->gpu.sm = 0;
    j->gpu.sms = 0;
    j->gpu.no_p2p = false;
    j->gpu.link = GM_GPU_LINK_PCIE;
    snprintf(j->gpu.label, sizeof j->gpu.label, "%.*s", (int)sizeof(j->gpu.label) - 1, s);
    return GM_OK;
}

/* ---- setters of the memory techniques and the software versions ---- */

static enum gm_status set_fused(struct gm_job *j, const union gm_job_value *v, struct gm_error *err)
{
    static const struct {
        const char *name;
        unsigned flags;
    } names[] = {
        {"rms_norm", GM_FUSED_RMS_NORM},
        {"rms-norm", GM_FUSED_RMS_NORM},
        {"swiglu", GM_FUSED_SWIGLU},
        {"geglu", GM_FUSED_SWIGLU},
        {"rope", GM_FUSED_ROPE},
        {"liger", GM_FUSED_ALL},
        {"lora", GM_FUSED_LORA},
        {"all", GM_FUSED_ALL},
        {"none", 0},
    };
    unsigned flags = 0;
    const char *p = v->text;
    while (*p) {
        size_t n = strcspn(p, ",");
        bool found = false;
        for (size_t i = 0; i < sizeof names / sizeof names[0] && !found; i++)
            if (strlen(names[i].name) == n && strncmp(names[i].name, p, n) == 0) {
                flags |= names[i].flags;
                found = true;
            }
        if (!found)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--fused-kernels: unknown kernel '%.*s' (use rms_norm, swiglu, rope, "
                           "liger for all three, lora, or none)",
                           (int)(n > 32 ? 32 : n), p);
        p += n + (p[n] == ',');
    }
    j->memory.fused_kernels = flags;
    return GM_OK;
}

/* PYTORCH_CUDA_ALLOC_CONF as the job runs with it, by the allocator model's own parser; the
 * cudaMallocAsync backend is parsed there but not modelled, so a replay could not use it. */
static enum gm_status set_alloc_conf(struct gm_job *j, const union gm_job_value *v,
                                     struct gm_error *err)
{
    struct gm_alloc_conf conf;
    enum gm_status st;
    gm_alloc_conf_init(&conf);
    if ((st = gm_alloc_conf_parse(&conf, v->text, err)) != GM_OK) {
        char why[sizeof err->msg];
        if (!err)
            return st;
        snprintf(why, sizeof why, "%s", err->msg);
        return gm_fail(err, st, err->offset, "--alloc-conf: %s", why);
    }
    if (conf.backend != GM_ALLOC_BACKEND_NATIVE)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--alloc-conf: backend:cudaMallocAsync is not modelled (the step replay "
                       "follows the native caching allocator)");
    j->runtime.alloc = conf;
    return GM_OK;
}

/* "12.1", "4.48.1", "0.11" -> GM_VERSION(major, minor, patch). */
static enum gm_status parse_version(const char *name, const char *s, uint32_t *out,
                                    struct gm_error *err)
{
    unsigned long part[3] = {0, 0, 0};
    const char *p = s;
    size_t k = 0;
    for (; k < 3; k++) {
        char *end;
        if (*p < '0' || *p > '9')
            break;
        part[k] = strtoul(p, &end, 10);
        if (part[k] > 255)
            break;
        p = end;
        if (*p != '.')
            break;
        p++;
    }
    /* a PEP 440 local version label (torch's "2.1.0+cu121") names a build, not a release */
    if (*p == '+' && p != s && p[-1] >= '0' && p[-1] <= '9' && p[1]) {
        const char *q = p + 1;
        while ((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') ||
               *q == '.')
            q++;
        if (!*q)
            p = q;
    }
    if (k == 3 || *p || p == s || (part[0] == 0 && part[1] == 0 && part[2] == 0))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--%s: '%s' is not a version (MAJOR.MINOR[.PATCH][+LOCAL], each 0-255)",
                       name, s);
    *out = GM_VERSION(part[0], part[1], part[2]);
    return GM_OK;
}

static enum gm_status set_cuda_version(struct gm_job *j, const union gm_job_value *v,
                                       struct gm_error *err)
{
    return parse_version("cuda-version", v->text, &j->stack.cuda, err);
}

/* --stack NAME[@VERSION]: the preset's defaults (src/estimate/stacks.c). */
static enum gm_status set_stack(struct gm_job *j, const union gm_job_value *v, struct gm_error *err)
{
    return est_stack_apply(j, v->text, err);
}

uint32_t est_parse_version_or_zero(const char *name, const char *s, struct gm_error *err)
{
    uint32_t v = 0;
    return parse_version(name, s, &v, err) == GM_OK ? v : 0;
}

const char *est_version_text(uint32_t v, char *b, size_t n)
{
    snprintf(b, n, "%u.%u.%u", (unsigned)(v >> 16), (unsigned)((v >> 8) & 255),
             (unsigned)(v & 255));
    return b;
}

static enum gm_status set_transformers_version(struct gm_job *j, const union gm_job_value *v,
                                               struct gm_error *err)
{
    return parse_version("transformers-version", v->text, &j->stack.transformers, err);
}

static enum gm_status set_torch_version(struct gm_job *j, const union gm_job_value *v,
                                        struct gm_error *err)
{
    return parse_version("torch-version", v->text, &j->stack.torch, err);
}

static enum gm_status set_vllm_version(struct gm_job *j, const union gm_job_value *v,
                                       struct gm_error *err)
{
    return parse_version("vllm-version", v->text, &j->stack.vllm, err);
}

static enum gm_status set_bnb_version(struct gm_job *j, const union gm_job_value *v,
                                      struct gm_error *err)
{
    return parse_version("bitsandbytes-version", v->text, &j->stack.bitsandbytes, err);
}

static enum gm_status set_trl_version(struct gm_job *j, const union gm_job_value *v,
                                      struct gm_error *err)
{
    return parse_version("trl-version", v->text, &j->stack.trl, err);
}

/* ---- weight formats (bitsandbytes, GPTQ, AWQ, FP8) ---- */

/* --quant: the scheme and its variant, in the order of quant_choices. */
static const struct {
    enum gm_quant_method method;
    bool double_quant;
    enum gm_quant_scale scale;
    unsigned bits;
} quant_kinds[] = {
    {GM_QUANT_BNB_INT8, false, GM_SCALE_TENSOR, 8}, {GM_QUANT_BNB_NF4, false, GM_SCALE_TENSOR, 4},
    {GM_QUANT_BNB_NF4, true, GM_SCALE_TENSOR, 4},   {GM_QUANT_BNB_FP4, false, GM_SCALE_TENSOR, 4},
    {GM_QUANT_BNB_FP4, true, GM_SCALE_TENSOR, 4},   {GM_QUANT_GPTQ, false, GM_SCALE_GROUP, 4},
    {GM_QUANT_AWQ, false, GM_SCALE_GROUP, 4},       {GM_QUANT_FP8, false, GM_SCALE_TENSOR, 8},
    {GM_QUANT_FP8, false, GM_SCALE_CHANNEL, 8},     {GM_QUANT_FP8, false, GM_SCALE_BLOCK, 8},
    {GM_QUANT_INT, false, GM_SCALE_GROUP, 4},       {GM_QUANT_INT, false, GM_SCALE_GROUP, 8},
    {GM_QUANT_MXFP4, false, GM_SCALE_GROUP, 4},     {GM_QUANT_NVFP4, false, GM_SCALE_GROUP, 4},
};
static const char *const quant_choices[] = {"int8",  "nf4",   "nf4-dq", "fp4",         "fp4-dq",
                                            "gptq",  "awq",   "fp8",    "fp8-channel", "fp8-block",
                                            "w4a16", "w8a16", "mxfp4",  "nvfp4",       NULL};
_Static_assert(sizeof quant_kinds / sizeof quant_kinds[0] + 1 ==
                       sizeof quant_choices / sizeof quant_choices[0] &&
                   sizeof quant_kinds / sizeof quant_kinds[0] == EST_QUANT__COUNT,
               "one scheme per --quant choice, in enum est_quant_choice order");

static enum gm_status set_quant(struct gm_job *j, const union gm_job_value *v, struct gm_error *err)
{
    struct gm_quant *q = &j->numerics.quant;
    unsigned bits = q->bits;
    uint64_t group = q->group_size;
    (void)err;
    gm_quant_init(q, quant_kinds[v->choice].method);
    q->double_quant = quant_kinds[v->choice].double_quant;
    q->scale = quant_kinds[v->choice].scale;
    q->bits = est_given(j, EST_SET_QUANT_BITS) ? bits : quant_kinds[v->choice].bits;
    if (est_given(j, EST_SET_GROUP_SIZE))
        q->group_size = group; /* given before --quant (a binding's keyword order) */
    j->numerics.weight_format = GM_WEIGHTS_QUANT;
    return GM_OK;
}

const char *est_quant_setting_name(const struct gm_quant *q)
{
    for (size_t i = 0; i < sizeof quant_kinds / sizeof quant_kinds[0]; i++)
        if (quant_kinds[i].method == q->method && quant_kinds[i].double_quant == q->double_quant &&
            (q->method != GM_QUANT_FP8 || quant_kinds[i].scale == q->scale) &&
            (q->method != GM_QUANT_INT || quant_kinds[i].bits == q->bits))
            return quant_choices[i];
    return gm_quant_method_name(q->method);
}

static enum gm_status set_quant_bits(struct gm_job *j, const union gm_job_value *v,
                                     struct gm_error *err)
{
    (void)err;
    j->numerics.quant.bits = (unsigned)v->u64;
    return GM_OK;
}

/* ---- the table ---- */

static const char *const precision_choices[] = {"fp32", "fp16-mixed", "bf16-mixed", "bf16", NULL};
static const char *const optimizer_choices[] = {"adamw",      "adam",      "sgd",  "sgd-momentum",
                                                "adamw-8bit", "adafactor", "lion", NULL};
static const char *const impl_choices[] = {"foreach", "fused", "for-loop", NULL};
static const char *const ckpt_choices[] = {"none", "full", "selective", "op", NULL};
static const char *const attn_choices[] = {"sdpa", "eager", NULL};
static const char *const method_choices[] = {"arch", "blog", "deepspeed", NULL};
static const char *const zero_grad_choices[] = {"set-to-none", "zeros", NULL};
static const char *const kv_choices[] = {"auto", "fp32", "fp16", "bf16",
                                         "fp8",  "int8", "int4", NULL};
static const int kv_values[] = {GM_DTYPE_UNKNOWN, GM_DTYPE_F32, GM_DTYPE_F16, GM_DTYPE_BF16,
                                GM_DTYPE_F8_E4M3, GM_DTYPE_I8,  GM_DTYPE_INT4};
static const char *const zero_choices[] = {"0", "1", "2", "3", NULL};
static const char *const engine_choices[] = {"none", "hf", "vllm", "llama.cpp", "sglang", NULL};
static const char *const loss_choices[] = {"full",  "chunked",          "fused",    "fused-linear",
                                           "plain", "chunked-backward", "compiled", NULL};
static const char *const loss_impl_choices[] = {"liger", "cce", "unsloth", "cutile", NULL};
static const char *const model_impl_choices[] = {"hf", "litgpt", NULL};
static const char *const quant_kernel_choices[] = {"auto", "exllama", "exllamav2", "marlin",
                                                   "gemm", "plain",   NULL};
static const char *const adapter_dtype_choices[] = {"fp32", "bf16", NULL};
static const int adapter_dtype_values[] = {GM_DTYPE_F32, GM_DTYPE_BF16};
static const char *const fsdp_version_choices[] = {"1", "2", NULL};
static const char *const pp_schedule_choices[] = {"1f1b", "interleaved-1f1b", NULL};
static const int fsdp_version_values[] = {1, 2};

_Static_assert(
    sizeof precision_choices / sizeof precision_choices[0] == GM_PREC__COUNT + 1 &&
        sizeof loss_choices / sizeof loss_choices[0] == GM_LOSS__COUNT + 1 &&
        sizeof loss_impl_choices / sizeof loss_impl_choices[0] == GM_LOSS_IMPL__COUNT + 1 &&
        sizeof model_impl_choices / sizeof model_impl_choices[0] == GM_MODEL_IMPL__COUNT + 1 &&
        sizeof quant_kernel_choices / sizeof quant_kernel_choices[0] == GM_QKERNEL__COUNT + 1 &&
        sizeof optimizer_choices / sizeof optimizer_choices[0] == GM_OPT__COUNT + 1 &&
        sizeof engine_choices / sizeof engine_choices[0] == GM_ENGINE__COUNT + 1 &&
        sizeof pp_schedule_choices / sizeof pp_schedule_choices[0] == GM_PP__COUNT + 1,
    "one choice per enum value: the choices are the enums' names");

const char *gm_quant_kernel_name(enum gm_quant_kernel k)
{
    return (unsigned)k < GM_QKERNEL__COUNT ? quant_kernel_choices[k] : "unknown";
}

const char *gm_precision_name(enum gm_precision p)
{
    return (unsigned)p < GM_PREC__COUNT ? precision_choices[p] : "unknown";
}

const char *gm_optimizer_name(enum gm_optimizer o)
{
    return (unsigned)o < GM_OPT__COUNT ? optimizer_choices[o] : "unknown";
}

const char *gm_pp_schedule_name(enum gm_pp_schedule s)
{
    return (unsigned)s < GM_PP__COUNT ? pp_schedule_choices[s] : "unknown";
}

const char *gm_engine_name(enum gm_engine e)
{
    return (unsigned)e < GM_ENGINE__COUNT ? engine_choices[e] : "unknown";
}

#define OFF(field) offsetof(struct gm_job, field)
#define NO_FIELD   SIZE_MAX
#define TRAIN      GM_APPLIES_TRAIN
#define INFER      GM_APPLIES_INFER
#define RUN        (GM_APPLIES_TRAIN | GM_APPLIES_INFER)
#define ANY        GM_APPLIES_ANY
#define TOKENS     ((double)EST_MAX_TOKENS)
#define BYTES      ((double)EST_MAX_BYTES)
#define FLAG(n, h, modes, eng, field)                                                              \
    {                                                                                              \
        n, GM_JOB_FLAG, NULL, h, NULL, modes, eng, OFF(field), 0, 0, 0, NULL, NULL, false          \
    }
#define FLAG_OFF(n, h, modes, field)                                                               \
    {                                                                                              \
        n, GM_JOB_FLAG, NULL, h, NULL, modes, GM_ENGINE_NONE, OFF(field), 0, 0, 0, NULL, NULL,     \
            true                                                                                   \
    }
#define FLAG_FN(n, h, modes, fn)                                                                   \
    {                                                                                              \
        n, GM_JOB_FLAG, NULL, h, NULL, modes, GM_ENGINE_NONE, NO_FIELD, 0, 0, 0, NULL, fn, false   \
    }
#define NUM(n, type, a, h, modes, eng, field, lo, hi, open)                                        \
    {                                                                                              \
        n, type, a, h, NULL, modes, eng, OFF(field), lo, hi, open, NULL, NULL, false               \
    }
#define NUM_ALSO(n, type, a, h, modes, field, lo, hi, open, fn)                                    \
    {                                                                                              \
        n, type, a, h, NULL, modes, GM_ENGINE_NONE, OFF(field), lo, hi, open, NULL, fn, false      \
    }
#define NUM_FN(n, type, a, h, modes, lo, hi, open, fn)                                             \
    {                                                                                              \
        n, type, a, h, NULL, modes, GM_ENGINE_NONE, NO_FIELD, lo, hi, open, NULL, fn, false        \
    }
#define CHOICE(n, c, vals, h, modes, field)                                                        \
    {                                                                                              \
        n, GM_JOB_CHOICE, NULL, h, c, modes, GM_ENGINE_NONE, OFF(field), 0, 0, 0, vals, NULL,      \
            false                                                                                  \
    }
#define TEXT_FN(n, a, h, modes, fn)                                                                \
    {                                                                                              \
        n, GM_JOB_TEXT, a, h, NULL, modes, GM_ENGINE_NONE, NO_FIELD, 0, 0, 0, NULL, fn, false      \
    }

static const struct gm_job_setting settings[] = {
    [EST_SET_PARAMETERS] =
        NUM("parameters", GM_JOB_COUNT, "N",
            "parameter count (plain numbers, or override): 7000000000, 7e9, 1.5B, 500M", ANY,
            GM_ENGINE_NONE, model.n_params, 0, (double)EST_MAX_PARAMS, 0),
    [EST_SET_BITS] = NUM_ALSO("bits", GM_JOB_DOUBLE, "B",
                              "bits per weight (weights / inference), e.g. 16, 8, 4.5",
                              GM_APPLIES_WEIGHTS | INFER, numerics.weight_bits, 0, 64, 1, set_bits),
    [EST_SET_RESERVE_GIB] = NUM_FN("reserve-gib", GM_JOB_DOUBLE, "GIB",
                                   "weights mode: flat reserve for everything else (an assumption)",
                                   GM_APPLIES_WEIGHTS, 0, 1048576, 0, set_reserve),
    [EST_SET_TRAIN] = FLAG_FN("train", "estimate one training step", ANY, set_train),
    [EST_SET_INFER] = FLAG_FN("infer", "estimate generation (KV cache, prefill)", ANY, set_infer),
    [EST_SET_PRECISION] =
        CHOICE("precision", precision_choices, NULL, "training precision (default bf16-mixed)",
               TRAIN, numerics.precision),
    [EST_SET_OPTIMIZER] = CHOICE("optimizer", optimizer_choices, NULL, "optimizer (default adamw)",
                                 TRAIN, numerics.optimizer),
    [EST_SET_OPTIMIZER_IMPL] =
        CHOICE("optimizer-impl", impl_choices, NULL,
               "optimizer step implementation (default foreach)", TRAIN, numerics.optim_impl),
    [EST_SET_SEQ] = NUM("seq", GM_JOB_U64, "L", "training sequence length (default 2048)", TRAIN,
                        GM_ENGINE_NONE, workload.seq, 1, TOKENS, 0),
    [EST_SET_GRAD_CHECKPOINTING] = CHOICE(
        "grad-checkpointing", ckpt_choices, NULL,
        "activation checkpointing per layer: full, selective (attention core), op (torchtitan "
        "op-level; default none)",
        TRAIN, memory.checkpointing),
    [EST_SET_ZERO_GRAD] =
        CHOICE("zero-grad", zero_grad_choices, NULL,
               "gradients between steps (default set-to-none)", TRAIN, numerics.zero_grad),
    [EST_SET_METHOD] =
        CHOICE("method", method_choices, NULL,
               "arch (per-tensor), blog (HF blog formula) or deepspeed (+ DeepSpeed's estimator)",
               TRAIN, method),
    [EST_SET_ACTIVATIONS_PER_TOKEN] = NUM(
        "activations-per-token", GM_JOB_DOUBLE, "A", "blog method: override A (elements per token)",
        TRAIN, GM_ENGINE_NONE, numerics.activations_per_token, 0, 1e12, 1),
    [EST_SET_BATCH] =
        NUM("batch", GM_JOB_U64, "N", "micro-batch (training) or concurrent sequences (inference)",
            RUN, GM_ENGINE_NONE, workload.batch, 1, (double)EST_MAX_BATCH, 0),
    [EST_SET_ATTENTION] =
        CHOICE("attention", attn_choices, NULL,
               "sdpa/flash (no s*s scores) or eager (default sdpa)", RUN, memory.attention),
    [EST_SET_CONTEXT] =
        NUM("context", GM_JOB_U64, "T", "inference: prompt tokens per sequence (default 2048)",
            INFER, GM_ENGINE_NONE, workload.context, 0, TOKENS, 0),
    [EST_SET_NEW_TOKENS] =
        NUM("new-tokens", GM_JOB_U64, "T", "inference: generated tokens per sequence (default 0)",
            INFER, GM_ENGINE_NONE, workload.new_tokens, 0, TOKENS, 0),
    [EST_SET_KV_DTYPE] = CHOICE("kv-dtype", kv_choices, kv_values,
                                "inference: KV cache element type (default: activation dtype)",
                                INFER, numerics.kv_dtype),
    [EST_SET_FULL_LOGITS] =
        FLAG("full-logits", "inference: prefill computes logits for every position", INFER,
             GM_ENGINE_NONE, workload.full_logits),
    [EST_SET_CUDA_CONTEXT] = NUM("cuda-context", GM_JOB_SIZE, "SIZE",
                                 "CUDA context + kernels outside the allocator (default 450MiB)",
                                 ANY, GM_ENGINE_NONE, runtime.cuda_context_bytes, 0, BYTES, 0),
    [EST_SET_WORKSPACE] = NUM(
        "workspace", GM_JOB_SIZE, "SIZE",
        "library memory outside the allocator (default 0: PyTorch's cuBLAS workspaces are inside)",
        ANY, GM_ENGINE_NONE, runtime.workspace_bytes, 0, BYTES, 0),
    [EST_SET_FRAGMENTATION] = NUM("fragmentation", GM_JOB_DOUBLE, "F",
                                  "reserved excess on transient memory (default 0.25)", ANY,
                                  GM_ENGINE_NONE, runtime.fragmentation, 0, 4, 0),
    [EST_SET_ALLOC_CONF] = TEXT_FN(
        "alloc-conf", "CONF",
        "PYTORCH_CUDA_ALLOC_CONF of the run, for the step replay: expandable_segments:True, "
        "max_split_size_mb:N, ...",
        TRAIN, set_alloc_conf),
    [EST_SET_GPU] = TEXT_FN(
        "gpu", "NAME", "judge the fit on this GPU: a catalog or nvidia-smi name (see --list-gpus)",
        ANY, set_gpu),
    [EST_SET_GPU_MEMORY] =
        TEXT_FN("gpu-memory", "SIZE",
                "judge the fit on this capacity (bare number: GiB); with --gpu, that GPU's "
                "total as nvidia-smi or the job's log shows it",
                ANY, set_gpu_memory),
    [EST_SET_LORA] = FLAG_FN("lora", "train LoRA adapters on a frozen base", TRAIN, set_lora),
    [EST_SET_QLORA] =
        FLAG_FN("qlora", "QLoRA: NF4 frozen base (bitsandbytes), bf16 compute", TRAIN, set_qlora),
    [EST_SET_LORA_RANK] = NUM("lora-rank", GM_JOB_U64, "R", "LoRA rank (default 16)", TRAIN,
                              GM_ENGINE_NONE, memory.lora.rank, 1, (double)EST_MAX_BATCH, 0),
    [EST_SET_LORA_TARGETS] =
        TEXT_FN("lora-targets", "LIST",
                "q,k,v,o,gate,up,down, qkv (fused), attention (default), mlp or all-linear", TRAIN,
                set_targets),
    [EST_SET_LORA_DROPOUT] = NUM("lora-dropout", GM_JOB_DOUBLE, "P",
                                 "LoRA dropout (keeps a dropped-out input copy; default 0)", TRAIN,
                                 GM_ENGINE_NONE, memory.lora.dropout, 0, 1, 2),
    [EST_SET_NO_DOUBLE_QUANT] = FLAG_OFF("no-double-quant", "QLoRA without double quantisation",
                                         TRAIN, memory.lora.double_quant),
    [EST_SET_NO_FP32_UPCAST] = FLAG_OFF(
        "no-fp32-upcast", "QLoRA: keep non-NF4 weights bf16 (no prepare_model_for_kbit_training)",
        TRAIN, memory.lora.fp32_upcast),
    [EST_SET_GPUS] = NUM("gpus", GM_JOB_U64, "N", "GPUs in the job (default 1, or tp x pp)", RUN,
                         GM_ENGINE_NONE, parallel.gpus, 1, 65536, 0),
    [EST_SET_GPUS_PER_NODE] =
        NUM("gpus-per-node", GM_JOB_U64, "N", "GPUs per node (default min(gpus, 8))", RUN,
            GM_ENGINE_NONE, parallel.gpus_per_node, 1, 65536, 0),
    [EST_SET_ZERO] =
        CHOICE("zero", zero_choices, NULL, "DeepSpeed ZeRO stage 0-3 over the data-parallel GPUs",
               TRAIN, parallel.shard),
    [EST_SET_FSDP] =
        FLAG_FN("fsdp", "PyTorch FSDP FULL_SHARD (one decoder layer per unit)", TRAIN, set_fsdp),
    [EST_SET_OFFLOAD_OPTIMIZER] =
        FLAG("offload-optimizer", "optimizer state, master weights and step on the CPU", TRAIN,
             GM_ENGINE_NONE, parallel.offload_optimizer),
    [EST_SET_OFFLOAD_PARAMS] = FLAG("offload-params", "ZeRO-3/FSDP parameters on the CPU", TRAIN,
                                    GM_ENGINE_NONE, parallel.offload_params),
    [EST_SET_TP] = NUM("tp", GM_JOB_U64, "N", "tensor-parallel degree (default 1)", RUN,
                       GM_ENGINE_NONE, parallel.tp, 1, 1024, 0),
    [EST_SET_PP] =
        NUM("pp", GM_JOB_U64, "N", "pipeline stages (training 1F1B, or vLLM serving; default 1)",
            RUN, GM_ENGINE_NONE, parallel.pp, 1, 1024, 0),
    [EST_SET_PP_SCHEDULE] =
        CHOICE("pp-schedule", pp_schedule_choices, NULL,
               "--pp training: 1f1b (torch Schedule1F1B, one stage per rank; default) or "
               "interleaved-1f1b (ScheduleInterleaved1F1B, looped stages; micro-batches: "
               "--grad-accum when above 1, else --pp)",
               TRAIN, parallel.pp_schedule),
    [EST_SET_PP_STAGES_PER_RANK] =
        NUM("pp-stages-per-rank", GM_JOB_U64, "V",
            "--pp-schedule interleaved-1f1b: stages per rank (default 2, torchtitan's)", TRAIN,
            GM_ENGINE_NONE, parallel.pp_stages_per_rank, 2, 64, 0),
    [EST_SET_SEQUENCE_PARALLEL] =
        FLAG("sequence-parallel",
             "sequence parallelism (with --tp): Megatron's, or torch's TP plan (SequenceParallel "
             "norms; the lm_head gathers its input over the sequence)",
             TRAIN, GM_ENGINE_NONE, parallel.sequence_parallel),
    [EST_SET_ASYNC_TP] =
        FLAG("async-tp",
             "async tensor parallelism (torchtitan enable_async_tensor_parallel: fused "
             "all-gather/reduce-scatter matmuls over a SymmetricMemory workspace; with --tp, "
             "--sequence-parallel and --compile)",
             TRAIN, GM_ENGINE_NONE, parallel.async_tp),
    [EST_SET_BUCKET_ELEMENTS] =
        NUM("bucket-elements", GM_JOB_COUNT, "N", "ZeRO reduce bucket in elements (default 5e8)",
            TRAIN, GM_ENGINE_NONE, parallel.bucket_elements, 1, 1e15, 0),
    [EST_SET_ZERO_OVERLAP_COMM] =
        FLAG("zero-overlap-comm",
             "ZeRO-1/2 overlap_comm: two reduce buckets in backward (DeepSpeed's default: off)",
             TRAIN, GM_ENGINE_NONE, parallel.zero_overlap_comm),
    [EST_SET_ZERO_REUSE_DISTANCE] =
        NUM("zero-reuse-distance", GM_JOB_COUNT, "N",
            "ZeRO-3 stage3_max_reuse_distance in elements: parameters used again within N "
            "stay gathered (default 1e9)",
            TRAIN, GM_ENGINE_NONE, parallel.zero_reuse_distance, 0, 1e15, 0),
    [EST_SET_DDP_BUCKET_VIEW] =
        FLAG("ddp-bucket-view", "DDP gradient_as_bucket_view=True (no gradient bucket copy)", TRAIN,
             GM_ENGINE_NONE, parallel.ddp_bucket_view),
    [EST_SET_GRAD_ACCUM] =
        NUM("grad-accum", GM_JOB_U64, "N", "micro-batches per optimizer step", TRAIN,
            GM_ENGINE_NONE, workload.grad_accum, 1, (double)EST_MAX_BATCH, 0),
    [EST_SET_PAGED_OPTIMIZER] = FLAG("paged-optimizer", "bitsandbytes paged optimizer", TRAIN,
                                     GM_ENGINE_NONE, memory.paged_optimizer),
    [EST_SET_LARGEST_LAYER] = NUM(
        "largest-layer", GM_JOB_COUNT, "N", "--method deepspeed: parameters of the largest layer",
        TRAIN, GM_ENGINE_NONE, model.largest_layer_params, 0, (double)EST_MAX_PARAMS, 0),
    [EST_SET_ENGINE] = CHOICE("engine", engine_choices, NULL,
                              "inference engine: hf, vllm or llama.cpp", INFER, engine.kind),
    [EST_SET_GPU_MEMORY_UTILIZATION] =
        NUM("gpu-memory-utilization", GM_JOB_DOUBLE, "F", "vLLM budget share (default 0.9)", INFER,
            GM_ENGINE_VLLM, engine.vllm.gpu_memory_utilization, 0, 1, 1),
    [EST_SET_MAX_MODEL_LEN] =
        NUM("max-model-len", GM_JOB_U64, "T", "vLLM max_model_len (default: the model's)", INFER,
            GM_ENGINE_VLLM, engine.vllm.max_model_len, 1, TOKENS, 0),
    [EST_SET_BLOCK_SIZE] = NUM("block-size", GM_JOB_U64, "T", "vLLM KV block size (default 16)",
                               INFER, GM_ENGINE_VLLM, engine.vllm.block_size, 1, 4096, 0),
    [EST_SET_MAX_NUM_SEQS] = NUM(
        "max-num-seqs", GM_JOB_U64, "N", "vLLM max_num_seqs (default: the version's for the GPU)",
        INFER, GM_ENGINE_VLLM, engine.vllm.max_num_seqs, 1, (double)EST_MAX_BATCH, 0),
    [EST_SET_MAX_NUM_BATCHED_TOKENS] =
        NUM("max-num-batched-tokens", GM_JOB_U64, "T",
            "vLLM profile-run tokens (default: the version's for the GPU)", INFER, GM_ENGINE_VLLM,
            engine.vllm.max_num_batched_tokens, 1, TOKENS, 0),
    [EST_SET_ENFORCE_EAGER] = FLAG("enforce-eager", "vLLM without CUDA graphs", INFER,
                                   GM_ENGINE_VLLM, engine.vllm.enforce_eager),
    [EST_SET_NON_TORCH] =
        NUM("non-torch", GM_JOB_SIZE, "SIZE",
            "vLLM non-torch memory beside NCCL (default: the version's kernels + all-reduce)",
            INFER, GM_ENGINE_VLLM, engine.vllm.non_torch_bytes, 1, BYTES, 0),
    [EST_SET_UBATCH] = NUM("ubatch", GM_JOB_U64, "N", "llama.cpp n_ubatch (default 512)", INFER,
                           GM_ENGINE_LLAMACPP, engine.llamacpp.n_ubatch, 1, 65536, 0),
    [EST_SET_FLASH_ATTN] = FLAG("flash-attn", "llama.cpp flash attention (-fa)", INFER,
                                GM_ENGINE_LLAMACPP, engine.llamacpp.flash_attn),
    [EST_SET_MAX_BATCH] =
        FLAG_FN("max-batch", "find the largest --batch that fits the GPU", RUN, set_max_batch),
    [EST_SET_MAX_CONTEXT] =
        FLAG_FN("max-context", "find the largest --seq (training) or --context that fits the GPU",
                RUN, set_max_context),
    /* memory techniques (docs/estimate.md, "Memory techniques") */
    [EST_SET_LOSS] =
        CHOICE("loss", loss_choices, NULL,
               "loss over the vocabulary: full (HF), chunked, fused (CE kernel), fused-linear, "
               "plain (a custom loop's F.cross_entropy, no upcast), chunked-backward or compiled "
               "(a custom loop's torch.compile'd F.cross_entropy) (default full)",
               TRAIN, memory.loss),
    [EST_SET_LOSS_CHUNKS] =
        NUM("loss-chunks", GM_JOB_U64, "N", "--loss chunked, chunked-backward: chunks (default 8)",
            TRAIN, GM_ENGINE_NONE, memory.loss_chunks, 1, 65536, 0),
    [EST_SET_NO_LOSS_CACHE_BLOCK] =
        FLAG_OFF("no-loss-cache-block",
                 "--loss fused --loss-impl unsloth: leave out the fp32 logits-sized block the "
                 "step replay keeps in the cache (measured on fms-acceleration's FOAK runs, not "
                 "read in code)",
                 TRAIN, memory.loss_cache_block),
    [EST_SET_CHECKPOINT_EVERY] =
        NUM("checkpoint-every", GM_JOB_U64, "N",
            "--grad-checkpointing full on every N-th layer only (torchtitan; default 1)", TRAIN,
            GM_ENGINE_NONE, memory.checkpoint_every, 1, 1024, 0),
    [EST_SET_OPTIMIZER_IN_BACKWARD] =
        FLAG("optimizer-in-backward", "step each parameter as its gradient is ready (torchtune)",
             TRAIN, GM_ENGINE_NONE, memory.optimizer_in_backward),
    [EST_SET_ACTIVATION_OFFLOAD] =
        FLAG("activation-offload", "saved activations to pinned host memory (torchtune)", TRAIN,
             GM_ENGINE_NONE, memory.activation_offload),
    [EST_SET_FUSED_KERNELS] =
        TEXT_FN("fused-kernels", "LIST",
                "rms_norm,swiglu,rope or liger (all three), lora (FOAK's fused LoRA: --qlora or "
                "--quant gptq base): fused kernels",
                TRAIN, set_fused),
    [EST_SET_COMPILE] = FLAG("compile", "torch.compile (the partitioner's saved set, approximate)",
                             TRAIN, GM_ENGINE_NONE, memory.compile),
    [EST_SET_TARGET_SEQ] = NUM("target-seq", GM_JOB_U64, "T",
                               "training an encoder-decoder: target (decoder) tokens per "
                               "sequence (default --seq)",
                               TRAIN, GM_ENGINE_NONE, workload.target_seq, 1, TOKENS, 0),
    [EST_SET_IMAGES] =
        NUM("images", GM_JOB_U64, "N",
            "vision-language model: images per sequence (their tokens join the "
            "context or the sequence)",
            GM_APPLIES_TRAIN | GM_APPLIES_INFER, GM_ENGINE_NONE, workload.images, 0, 4096, 0),
    [EST_SET_IMAGE_SIZE] = TEXT_FN("image-size", "WxH",
                                   "vision-language model: image size in pixels (default the "
                                   "processor's: CLIP's side, else 1024x1024)",
                                   GM_APPLIES_TRAIN | GM_APPLIES_INFER, set_image_size),
    [EST_SET_FLOAT8] = FLAG("float8",
                            "torchao Float8Linear training (torchtitan --float8): fp8 casts of "
                            "the linears' operands; saved activations stay bf16",
                            TRAIN, GM_ENGINE_NONE, memory.float8),
    [EST_SET_ADAPTER_DTYPE] =
        CHOICE("adapter-dtype", adapter_dtype_choices, adapter_dtype_values,
               "LoRA adapter weights (default fp32, bf16 with --precision bf16)", TRAIN,
               memory.adapter_dtype),
    [EST_SET_TOKENS_PER_BATCH] =
        NUM("tokens-per-batch", GM_JOB_U64, "N",
            "packed / padding-free: tokens per micro-batch (instead of --batch x --seq)", TRAIN,
            GM_ENGINE_NONE, workload.tokens, 1, 68719476736.0, 0),
    [EST_SET_FSDP_VERSION] =
        CHOICE("fsdp-version", fsdp_version_choices, fsdp_version_values,
               "--fsdp: 1 (FullyShardedDataParallel) or 2 (fully_shard); default 1", TRAIN,
               parallel.fsdp_version),
    [EST_SET_NO_RESHARD_AFTER_FORWARD] =
        FLAG_OFF("no-reshard-after-forward",
                 "--fsdp: keep gathered layers from forward to backward (SHARD_GRAD_OP)", TRAIN,
                 parallel.reshard_after_forward),
    [EST_SET_NO_SYNC_MODULE_STATES] = FLAG_OFF(
        "no-sync-module-states",
        "--fsdp (FSDP1, HF Trainer): no broadcast of each unit from rank 0 as it is wrapped", TRAIN,
        parallel.sync_module_states),
    [EST_SET_EP] = NUM("ep", GM_JOB_U64, "N", "expert-parallel degree for MoE layers (default 1)",
                       TRAIN, GM_ENGINE_NONE, parallel.ep, 1, 1024, 0),
    /* the runtime around the tensors */
    [EST_SET_NCCL] = NUM("nccl", GM_JOB_SIZE, "SIZE",
                         "NCCL device memory per communicator (default: NCCL's own rule)", RUN,
                         GM_ENGINE_NONE, runtime.nccl_bytes, 0, BYTES, 0),
    [EST_SET_NO_P2P] = FLAG("no-p2p",
                            "GPUs without peer access: NCCL buffers in host memory, no vLLM "
                            "custom all-reduce",
                            RUN, GM_ENGINE_NONE, runtime.no_p2p),
    [EST_SET_CUDA_VERSION] =
        TEXT_FN("cuda-version", "V", "CUDA runtime (before 11.7: no lazy kernel loading)", ANY,
                set_cuda_version),
    [EST_SET_TRANSFORMERS_VERSION] =
        TEXT_FN("transformers-version", "V",
                "HF transformers (the loss's logits copies; generate()'s cache and prefill logits)",
                RUN, set_transformers_version),
    [EST_SET_VLLM_VERSION] = {"vllm-version", GM_JOB_TEXT, "V",
                              "vLLM version (its start-up budget; default current)", NULL, INFER,
                              GM_ENGINE_VLLM, NO_FIELD, 0, 0, 0, NULL, set_vllm_version, false},
    [EST_SET_BITSANDBYTES_VERSION] =
        TEXT_FN("bitsandbytes-version", "V",
                "bitsandbytes (QLoRA's saved inputs, 8-bit optimizer blocks; default current)",
                TRAIN, set_bnb_version),
    [EST_SET_TORCH_VERSION] =
        TEXT_FN("torch-version", "V",
                "PyTorch (training before 2.0: for-loop optimizer step, zero_grad() to zeros; "
                "vLLM on Hopper before 2.8.1: MXFP4 experts unswizzled; default current)",
                RUN, set_torch_version),
    [EST_SET_TRL_VERSION] =
        TEXT_FN("trl-version", "V",
                "TRL, whose SFTTrainer prepares the PEFT model (QLoRA: from 0.7.5 its embeddings "
                "and lm_head back to bf16, before 0.9 its adapters too; default none)",
                TRAIN, set_trl_version),
    /* ---- weight formats (bitsandbytes, GPTQ, AWQ, FP8) ---- */
    [EST_SET_QUANT] =
        {"quant", GM_JOB_CHOICE, NULL,
         "weight format: bitsandbytes int8/nf4/fp4 (-dq: double quant), gptq, awq, fp8 (per tensor, "
         "channel or block), w4a16/w8a16, mxfp4 (MoE experts) or nvfp4",
         quant_choices, ANY, GM_ENGINE_NONE, NO_FIELD, 0, 0, 0, NULL, set_quant, false},
    [EST_SET_QUANT_BITS] =
        NUM_FN("quant-bits", GM_JOB_U64, "B", "--quant gptq/awq/w4a16: bits per weight (default 4)",
               ANY, 2, 8, 0, set_quant_bits),
    [EST_SET_GROUP_SIZE] = NUM("group-size", GM_JOB_U64, "N",
                               "--quant gptq/awq/w4a16: input features per scale (default 128; 0: "
                               "per column)",
                               ANY, GM_ENGINE_NONE, numerics.quant.group_size, 0, 65536, 0),
    /* scale-out and the engines' own flags */
    [EST_SET_REPLICAS] = NUM("replicas", GM_JOB_U64, "N",
                             "inference: copies of the model over --gpus (vLLM, SGLang: --gpus "
                             "alone is tensor parallelism)",
                             INFER, GM_ENGINE_NONE, parallel.replicas, 1, 65536, 0),
    [EST_SET_MEM_FRACTION_STATIC] =
        NUM("mem-fraction-static", GM_JOB_DOUBLE, "F",
            "SGLang weights + KV pool share (default: SGLang's for "
            "the GPU)",
            INFER, GM_ENGINE_SGLANG, engine.sglang.mem_fraction_static, 0, 1, 1),
    [EST_SET_CONTEXT_LENGTH] =
        NUM("context-length", GM_JOB_U64, "T", "SGLang --context-length (default: the model's)",
            INFER, GM_ENGINE_SGLANG, engine.sglang.context_length, 1, TOKENS, 0),
    [EST_SET_MAX_RUNNING_REQUESTS] =
        NUM("max-running-requests", GM_JOB_U64, "N", "SGLang --max-running-requests", INFER,
            GM_ENGINE_SGLANG, engine.sglang.max_running_requests, 1, (double)EST_MAX_BATCH, 0),
    [EST_SET_CHUNKED_PREFILL_SIZE] =
        NUM("chunked-prefill-size", GM_JOB_U64, "T",
            "SGLang prefill chunk (default: SGLang's for the GPU)", INFER, GM_ENGINE_SGLANG,
            engine.sglang.chunked_prefill_size, 1, TOKENS, 0),
    [EST_SET_N_GPU_LAYERS] =
        NUM("n-gpu-layers", GM_JOB_U64, "N", "llama.cpp -ngl: layers on the GPU (default 999: all)",
            INFER, GM_ENGINE_LLAMACPP, engine.llamacpp.n_gpu_layers, 0, 100000, 0),
    [EST_SET_N_CPU_MOE] = NUM("n-cpu-moe", GM_JOB_U64, "N",
                              "llama.cpp --n-cpu-moe: experts of the first N layers in host memory",
                              INFER, GM_ENGINE_LLAMACPP, engine.llamacpp.n_cpu_moe, 0, 100000, 0),
    [EST_SET_NGL_OUTPUT_LAST] =
        FLAG("ngl-output-last",
             "llama.cpp -ngl counts the repeating layers first, the output layer last (builds "
             "before December 2025, ollama's runner)",
             INFER, GM_ENGINE_LLAMACPP, engine.llamacpp.ngl_output_last),
    [EST_SET_KV_CPY] =
        FLAG("kv-cpy",
             "llama.cpp writes the KV cache with ggml_cpy into views, without row indices "
             "(builds before PR #14959, August 2025, or up to PR #15505 with "
             "LLAMA_SET_ROWS=0); used where the compute buffer is placed (llama, mistral, "
             "qwen2, GPT-NeoX fully offloaded, no MoE), ignored elsewhere",
             INFER, GM_ENGINE_LLAMACPP, engine.llamacpp.kv_cpy),
    [EST_SET_CP] = NUM("cp", GM_JOB_U64, "N",
                       "context-parallel degree: the sequence split over N ranks with ring "
                       "attention, FSDP sharding over data x context ranks (torchtitan; default 1)",
                       TRAIN, GM_ENGINE_NONE, parallel.cp, 1, 1024, 0),
    [EST_SET_STACK] = TEXT_FN("stack", "NAME[@V]",
                              "training stack and its defaults: torchtune, torchtitan, hf-trainer, "
                              "accelerate, axolotl, unsloth, lightning (preset), hf or megatron "
                              "(suggestions only; hf@V: transformers V, generate() too); @V "
                              "picks the version's defaults",
                              RUN, set_stack),
    [EST_SET_KV_CACHE_MEMORY_BYTES] =
        NUM("kv-cache-memory-bytes", GM_JOB_SIZE, "SIZE",
            "vLLM KV pool per GPU, instead of the "
            "--gpu-memory-utilization budget",
            INFER, GM_ENGINE_VLLM, engine.vllm.kv_cache_memory_bytes, 1, BYTES, 0),
    [EST_SET_LOSS_IMPL] = CHOICE("loss-impl", loss_impl_choices, NULL,
                                 "--loss fused-linear: liger (row chunks of logits), cce (Cut "
                                 "Cross-Entropy, no logits in memory), unsloth (chunks of at "
                                 "most 4 GiB of fp32 logits) or cutile (TileGym's 4096-row "
                                 "chunks); --loss fused: liger (any kernel "
                                 "writing the gradient into the logits) or unsloth (FOAK's, with "
                                 "the cache block measured on its runs); default liger",
                                 TRAIN, memory.loss_impl),
    [EST_SET_FSDP_SHARD_ENDS] =
        FLAG("fsdp-shard-ends",
             "--fsdp: embedding and lm_head as units of their own (torchtune "
             "custom_sharded_layers, torchtitan), not gathered in the root",
             TRAIN, GM_ENGINE_NONE, parallel.shard_ends),
    [EST_SET_STATIC_CACHE] =
        FLAG("static-cache",
             "inference: generate(cache_implementation=\"static\"), the cache preallocated", INFER,
             GM_ENGINE_NONE, workload.static_cache),
    [EST_SET_MODEL_IMPL] = CHOICE("model-impl", model_impl_choices, NULL,
                                  "whose model code: hf (transformers, default) or litgpt (one "
                                  "F.gelu op where HF's gelu_new keeps its intermediates; "
                                  "bitsandbytes through Lightning: every linear, lm_head too, "
                                  "quantised from fp16)",
                                  RUN, stack.model_impl),
    [EST_SET_QUANT_KERNEL] =
        CHOICE("quant-kernel", quant_kernel_choices, NULL,
               "inference (HF generate): the GPTQ / AWQ kernel and its scratch: "
               "exllama, exllamav2, marlin, gemm (AWQ), plain (none); default "
               "auto, as transformers picks; with vLLM auto (Marlin from compute capability "
               "8.0), marlin, or gemm, its plain AWQ kernel (the log's \"forcing awq\"); the "
               "others are refused there",
               INFER, numerics.quant_kernel),
    [EST_SET_FLASHINFER_SAMPLER] =
        FLAG("flashinfer-sampler",
             "vLLM V1 samples top-k/top-p through FlashInfer (its log: \"Using FlashInfer for "
             "top-p & top-k sampling\")",
             INFER, GM_ENGINE_VLLM, engine.vllm.flashinfer_sampler),
};

#define N_SETTINGS (sizeof(settings) / sizeof(settings[0]))
_Static_assert(N_SETTINGS == EST_SET__COUNT, "one row per setting id (EST_SETTINGS)");
_Static_assert(N_SETTINGS <= GM_JOB_MAX_SETTINGS, "raise GM_JOB_MAX_SETTINGS");

/* Choices are stored into enum fields as int: every such enum is int-sized. */
_Static_assert(sizeof(enum gm_precision) == sizeof(int) && sizeof(enum gm_dtype) == sizeof(int) &&
                   sizeof(enum gm_shard) == sizeof(int) && sizeof(enum gm_engine) == sizeof(int) &&
                   sizeof(enum gm_method) == sizeof(int) && sizeof(enum gm_ckpt) == sizeof(int) &&
                   sizeof(enum gm_loss) == sizeof(int) && sizeof(unsigned) == sizeof(int) &&
                   sizeof(enum gm_quant_kernel) == sizeof(int),
               "enums are int-sized");

const struct gm_job_setting *gm_job_settings(size_t *n)
{
    *n = N_SETTINGS;
    return settings;
}

/* Names match with '-' and '_' alike (--max-model-len, max_model_len). */
static bool same_name(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a == '_' ? '-' : *a, y = *b == '_' ? '-' : *b;
        if (x != y)
            return false;
    }
    return *a == *b;
}

static ptrdiff_t setting_index(const char *name)
{
    for (size_t i = 0; i < N_SETTINGS; i++)
        if (same_name(settings[i].name, name))
            return (ptrdiff_t)i;
    return -1;
}

const struct gm_job_setting *gm_job_setting_find(const char *name)
{
    ptrdiff_t i = name ? setting_index(name) : -1;
    return i < 0 ? NULL : &settings[i];
}

const struct gm_job_setting *est_setting(enum est_setting id)
{
    return &settings[id];
}

bool est_given(const struct gm_job *j, enum est_setting id)
{
    return (j->given[id / 64] >> (id % 64)) & 1;
}

void est_job_mark(struct gm_job *j, enum est_setting id, bool given)
{
    if (given)
        j->given[id / 64] |= (uint64_t)1 << (id % 64);
    else
        j->given[id / 64] &= ~((uint64_t)1 << (id % 64));
}

bool gm_job_given(const struct gm_job *job, const char *name)
{
    ptrdiff_t i = setting_index(name);
    return i >= 0 && est_given(job, (enum est_setting)i);
}

/* A bound as people read it: 2^20 rather than 1048576. */
static void bound_text(char *b, size_t n, double v)
{
    int e;
    if (v >= 65536 && v == floor(v) && frexp(v, &e) == 0.5)
        snprintf(b, n, "2^%d", e - 1);
    else
        snprintf(b, n, "%.15g", v);
}

static enum gm_status out_of_range(const struct gm_job_setting *s, const char *shown,
                                   struct gm_error *err)
{
    char lo[32], hi[32];
    bound_text(lo, sizeof lo, s->lo);
    bound_text(hi, sizeof hi, s->hi);
    return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--%s: %s is out of range %c%s, %s%c",
                   s->name, shown, (s->open & 1) ? '(' : '[', lo, hi, (s->open & 2) ? ')' : ']');
}

static bool in_range(const struct gm_job_setting *s, double v)
{
    if ((s->open & 1) ? !(v > s->lo) : !(v >= s->lo))
        return false;
    return (s->open & 2) ? v < s->hi : v <= s->hi;
}

static enum gm_status parse_value(const struct gm_job_setting *s, const char *text,
                                  union gm_job_value *v, struct gm_error *err)
{
    enum gm_status st = GM_OK;
    memset(v, 0, sizeof(*v));
    switch (s->type) {
    case GM_JOB_FLAG:
        v->flag = !text || !*text || !strcmp(text, "true") || !strcmp(text, "1");
        if (!v->flag && strcmp(text, "false") != 0 && strcmp(text, "0") != 0)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--%s takes no value", s->name);
        return GM_OK;
    case GM_JOB_U64:
        st = gm_parse_u64(text, &v->u64, err);
        break;
    case GM_JOB_COUNT:
        st = gm_parse_count(text, &v->u64, err);
        break;
    case GM_JOB_SIZE:
        st = gm_parse_size(text, &v->u64, err);
        break;
    case GM_JOB_DOUBLE:
        st = gm_parse_double(text, &v->number, err);
        break;
    case GM_JOB_CHOICE: {
        char list[256] = "";
        for (int i = 0; s->choices[i]; i++) {
            if (!strcmp(s->choices[i], text)) {
                v->choice = s->values ? s->values[i] : i;
                return GM_OK;
            }
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     s->choices[i]);
        }
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--%s: '%s' is not one of: %s", s->name,
                       text, list);
    }
    case GM_JOB_TEXT:
        if (!text || !*text)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--%s: needs a value", s->name);
        v->text = text;
        return GM_OK;
    }
    if (st != GM_OK)
        return gm_error_prefix(err, "--%s", s->name);
    return GM_OK;
}

/* Whether the setting has a range of numbers, and the number 'v' holds for it. */
static bool number_of(const struct gm_job_setting *s, const union gm_job_value *v, double *d)
{
    if (!(s->lo < s->hi))
        return false;
    switch (s->type) {
    case GM_JOB_U64:
    case GM_JOB_COUNT:
    case GM_JOB_SIZE:
        *d = (double)v->u64;
        return true;
    case GM_JOB_DOUBLE:
        *d = v->number;
        return true;
    default:
        return false;
    }
}

/* The setting's range, from its row: 'shown' is the value as given (NULL: the number). */
static enum gm_status check_range(const struct gm_job_setting *s, const union gm_job_value *v,
                                  const char *shown, struct gm_error *err)
{
    char b[32];
    double d;
    if (!number_of(s, v, &d) || in_range(s, d))
        return GM_OK;
    if (!shown) {
        snprintf(b, sizeof b, "%.15g", d);
        shown = b;
    }
    return out_of_range(s, shown, err);
}

static void store(struct gm_job *j, const struct gm_job_setting *s, const union gm_job_value *v)
{
    char *field = (char *)j + s->offset;
    if (s->offset == NO_FIELD)
        return;
    switch (s->type) {
    case GM_JOB_FLAG: {
        bool b = s->clears ? !v->flag : v->flag;
        memcpy(field, &b, sizeof(bool));
        break;
    }
    case GM_JOB_U64:
    case GM_JOB_COUNT:
    case GM_JOB_SIZE:
        memcpy(field, &v->u64, sizeof(uint64_t));
        break;
    case GM_JOB_DOUBLE:
        memcpy(field, &v->number, sizeof(double));
        break;
    case GM_JOB_CHOICE:
        memcpy(field, &v->choice, sizeof(int));
        break;
    case GM_JOB_TEXT:
        break;
    }
}

/* "unknown setting 'bach'", with the setting it is likely a slip for ('_' read as '-', and
 * the setting named back in the caller's spelling: max_model_len for a Python keyword). */
static enum gm_status unknown_setting(const char *name, struct gm_error *err)
{
    const char *names[N_SETTINGS], *near;
    char dashed[64], spelled[64];
    size_t n = 0;
    for (; name[n] && n + 1 < sizeof dashed; n++)
        dashed[n] = name[n] == '_' ? '-' : name[n];
    dashed[n] = '\0';
    for (size_t i = 0; i < N_SETTINGS; i++)
        names[i] = settings[i].name;
    near = gm_text_closest(dashed, n, names, N_SETTINGS, true);
    if (near) {
        size_t k = 0;
        for (; near[k] && k + 1 < sizeof spelled; k++)
            spelled[k] = near[k] == '-' && strchr(name, '_') ? '_' : near[k];
        spelled[k] = '\0';
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "unknown setting '%s' (did you mean '%s'?)", name, spelled);
    }
    return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "unknown setting '%s'", name);
}

/* Store a checked value: into the row's field, then through its setter (which fills what
 * else the setting decides, or the whole value when the row names no field). */
static enum gm_status put(struct gm_job *job, enum est_setting id, const union gm_job_value *v,
                          struct gm_error *err)
{
    const struct gm_job_setting *s = &settings[id];
    enum gm_status st = GM_OK;
    store(job, s, v);
    if (s->set)
        st = s->set(job, v, err);
    if (st == GM_OK) {
        est_job_mark(job, id, true);
        job->preset[id / 64] &= ~((uint64_t)1 << (id % 64));
    }
    return st;
}

enum gm_status est_job_preset(struct gm_job *job, enum est_setting id, const char *value,
                              struct gm_error *err)
{
    const struct gm_job_setting *s = &settings[id];
    union gm_job_value v;
    enum gm_status st;
    if (est_given(job, id))
        return GM_OK;
    if ((st = parse_value(s, value, &v, err)) != GM_OK ||
        (st = check_range(s, &v, value, err)) != GM_OK)
        return st;
    store(job, s, &v);
    if (s->set && (st = s->set(job, &v, err)) != GM_OK)
        return st;
    job->preset[id / 64] |= (uint64_t)1 << (id % 64);
    return GM_OK;
}

bool est_preset_set(const struct gm_job *job, enum est_setting id)
{
    return (job->preset[id / 64] >> (id % 64)) & 1;
}

enum gm_status gm_job_set(struct gm_job *job, const char *name, const char *value,
                          struct gm_error *err)
{
    ptrdiff_t i = name ? setting_index(name) : -1;
    const struct gm_job_setting *s;
    union gm_job_value v;
    enum gm_status st;

    if (i < 0)
        return unknown_setting(name ? name : "", err);
    s = &settings[i];
    if (s->type != GM_JOB_FLAG && !value)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--%s needs a value (%s)", s->name,
                       s->argname ? s->argname : "see --help");
    if ((st = parse_value(s, value, &v, err)) != GM_OK ||
        (st = check_range(s, &v, value, err)) != GM_OK)
        return st;
    if (s->type == GM_JOB_FLAG && !v.flag)
        return GM_OK;
    return put(job, (enum est_setting)i, &v, err);
}

enum gm_status est_job_set(struct gm_job *job, enum est_setting id, const char *value,
                           struct gm_error *err)
{
    return gm_job_set(job, settings[id].name, value, err);
}

enum gm_status est_job_put(struct gm_job *job, enum est_setting id, const union gm_job_value *v,
                           struct gm_error *err)
{
    enum gm_status st;
    if ((st = check_range(&settings[id], v, NULL, err)) != GM_OK)
        return st;
    return put(job, id, v, err);
}

void est_setting_value_text(enum est_setting id, const union gm_job_value *v, char *out, size_t n)
{
    const struct gm_job_setting *s = &settings[id];
    out[0] = '\0';
    switch (s->type) {
    case GM_JOB_FLAG:
        break;
    case GM_JOB_U64:
    case GM_JOB_COUNT:
    case GM_JOB_SIZE:
        snprintf(out, n, "%llu", (unsigned long long)v->u64);
        break;
    case GM_JOB_DOUBLE:
        snprintf(out, n, "%g", v->number);
        break;
    case GM_JOB_CHOICE:
        for (int i = 0; s->choices[i]; i++)
            if ((s->values ? s->values[i] : i) == v->choice)
                snprintf(out, n, "%s", s->choices[i]);
        break;
    case GM_JOB_TEXT:
        snprintf(out, n, "%s", v->text ? v->text : "");
        break;
    }
}

/* ---- checks across settings ---- */

static const char *modes_text(unsigned modes)
{
    switch (modes) {
    case GM_APPLIES_TRAIN:
        return "--train";
    case GM_APPLIES_INFER:
        return "--infer";
    case GM_APPLIES_TRAIN | GM_APPLIES_INFER:
        return "--train or --infer";
    case GM_APPLIES_WEIGHTS:
        return "the weights-only estimate (without --train or --infer)";
    case GM_APPLIES_WEIGHTS | GM_APPLIES_INFER:
        return "the weights-only estimate and --infer (training uses --precision)";
    default:
        return "another kind of estimate";
    }
}

bool est_engine_shards(const struct gm_job *j)
{
    return j->mode == GM_EST_INFER &&
           (j->engine.kind == GM_ENGINE_VLLM || j->engine.kind == GM_ENGINE_SGLANG);
}

bool est_tp_from_gpus(const struct gm_job *j)
{
    return est_engine_shards(j) && est_given(j, EST_SET_GPUS) && !est_given(j, EST_SET_TP);
}

void est_job_resolve(struct gm_job *j)
{
    struct gm_job_parallel *p = &j->parallel;
    struct gm_quant *q = &j->numerics.quant;
    /* Lightning's BitsandbytesPrecision converts the lm_head too (est_bnb_lightning()) */
    if (j->numerics.weight_format == GM_WEIGHTS_QUANT && est_bnb_lightning(j) &&
        (q->method == GM_QUANT_BNB_NF4 || q->method == GM_QUANT_BNB_FP4 ||
         q->method == GM_QUANT_BNB_INT8))
        q->lm_head = true;
    /* serving engines that shard a model: N GPUs are one copy in tensor parallelism, unless
     * --replicas says how many copies share them */
    if (est_tp_from_gpus(j)) {
        uint64_t per = (p->replicas ? p->replicas : 1) * (p->pp ? p->pp : 1);
        if (per && p->gpus % per == 0 && p->gpus / per >= 1)
            p->tp = p->gpus / per;
    }
    if (j->mode == GM_EST_INFER && p->replicas && !est_given(j, EST_SET_GPUS))
        p->gpus = gm_mul_sat(p->replicas, gm_mul_sat(p->tp ? p->tp : 1, p->pp ? p->pp : 1));
    if (!j->parallel.gpus)
        j->parallel.gpus =
            gm_mul_sat(j->parallel.tp ? j->parallel.tp : 1, j->parallel.pp ? j->parallel.pp : 1);
    /* packed / padding-free: the longest sequence cannot exceed the micro-batch */
    if (j->workload.tokens && !est_given(j, EST_SET_SEQ) && j->workload.seq > j->workload.tokens)
        j->workload.seq = j->workload.tokens;
    /* bf16 needs compute capability 8.0 (Ampere; torch.cuda.is_bf16_supported() is false
     * before): on an older catalog GPU (T4, V100, RTX 20xx) mixed precision defaults to fp16
     * autocast with a gradient scaler, as the stacks fall back (stage_train says so) */
    if (j->mode == GM_EST_TRAIN && j->gpu.sm && j->gpu.sm < 80 &&
        j->numerics.precision == GM_PREC_BF16_MIXED && !est_given(j, EST_SET_PRECISION))
        j->numerics.precision = GM_PREC_FP16_MIXED;
    /* FSDP under pipeline parallelism keeps every layer gathered from its forward to its
     * backward: torchtitan's apply_fsdp sets reshard_after_forward=False when pp is enabled
     * (parallelize_llama.py, torchtitan 9dec370), to spare an all-gather per micro-batch */
    if (j->mode == GM_EST_TRAIN && j->parallel.pp > 1 && j->parallel.shard == GM_SHARD_FSDP)
        j->parallel.reshard_after_forward = false;
    /* a preset's activation offload is its checkpointing's (unsloth's offloaded layer
     * inputs): without full checkpointing there is nothing of it to offload */
    if (est_preset_set(j, EST_SET_ACTIVATION_OFFLOAD) && j->memory.checkpointing != GM_CKPT_FULL)
        j->memory.activation_offload = false;
    /* a vision-language model's images: their tokens in every sequence */
    if (j->model.model && j->workload.images && j->model.model->vision.kind != GM_VISION_NONE) {
        uint64_t w = j->workload.image_width ? j->workload.image_width : 1024;
        uint64_t h = j->workload.image_height ? j->workload.image_height : 1024;
        uint64_t t =
            gm_mul_sat(j->workload.images, gm_model_image_tokens(j->model.model, w, h, NULL));
        uint64_t *len = j->mode == GM_EST_TRAIN ? &j->workload.seq : &j->workload.context;
        /* resolving twice adds them once */
        *len =
            gm_add_sat(*len >= j->workload.image_tokens ? *len - j->workload.image_tokens : 0, t);
        j->workload.image_tokens = t;
    }
    /* transformers classes without an SDPA path (T5, gpt-oss: gm_arch_hf_eager()) run
     * eager attention whatever attn_implementation says: the default follows the model
     * class in the jobs transformers runs (training, generate()); serving engines have
     * their own kernels */
    if (j->model.model && gm_arch_hf_eager(j->model.model->arch) &&
        !est_given(j, EST_SET_ATTENTION) &&
        (j->mode == GM_EST_TRAIN || (j->mode == GM_EST_INFER && (j->engine.kind == GM_ENGINE_NONE ||
                                                                 j->engine.kind == GM_ENGINE_HF))))
        j->memory.attention = GM_ATTN_EAGER;
    /* torchtitan compiles its loss with the model (components/loss.py
     * build_cross_entropy_loss: torch.compile(loss_fn) when compiling, from bbb1b616 and in
     * every release from v0.1.0; v0.2 compile.components ["model", "loss"]): the preset's
     * full loss is the compiled one */
    if (j->mode == GM_EST_TRAIN && j->stack.preset == GM_STACK_TORCHTITAN && j->memory.compile &&
        j->memory.loss == GM_LOSS_FULL && est_preset_set(j, EST_SET_LOSS) &&
        (!j->stack.preset_version || j->stack.preset_version >= GM_VERSION(0, 1, 0)))
        j->memory.loss = GM_LOSS_COMPILED;
    /* PyTorch before 2.0: with neither foreach nor fused given, torch.optim's optimizers ran
     * the for-loop step (2.0 made foreach the default on CUDA: pytorch/pytorch PR #92306, and
     * #95862 for nn.Parameter lists), and Optimizer.zero_grad() zeroed the gradients in place
     * (set_to_none default False until PR #92731, in 2.0), so they stay allocated between
     * steps.  An option given, or a stack preset's, wins. */
    if (j->mode == GM_EST_TRAIN && est_torch_before_2(j)) {
        if (!est_given(j, EST_SET_OPTIMIZER_IMPL) && !est_preset_set(j, EST_SET_OPTIMIZER_IMPL))
            j->numerics.optim_impl = GM_OPTIM_FOR_LOOP;
        if (!est_given(j, EST_SET_ZERO_GRAD) && !est_preset_set(j, EST_SET_ZERO_GRAD))
            j->numerics.zero_grad = GM_ZERO_GRAD_ZEROS;
    }
    /* DeepSpeed's estimator is about ZeRO-3 unless a stage is named. */
    if (j->method == GM_METHOD_DEEPSPEED && j->parallel.shard == GM_SHARD_NONE &&
        !est_given(j, EST_SET_ZERO))
        j->parallel.shard = GM_SHARD_ZERO3;
}

enum est_allocator est_allocator(const struct gm_job *job)
{
    if (job->mode == GM_EST_WEIGHTS)
        return EST_ALLOC_ONCE;
    if (job->mode == GM_EST_INFER && job->engine.kind == GM_ENGINE_VLLM)
        return EST_ALLOC_VLLM;
    if (job->mode == GM_EST_INFER && job->engine.kind == GM_ENGINE_LLAMACPP)
        return EST_ALLOC_GGML;
    if (job->mode == GM_EST_INFER && job->engine.kind == GM_ENGINE_SGLANG)
        return EST_ALLOC_SGLANG;
    return EST_ALLOC_TORCH;
}

double est_fragmentation(const struct gm_job *job)
{
    return est_allocator(job) == EST_ALLOC_TORCH ? job->runtime.fragmentation : 0;
}

bool est_torch_before_2(const struct gm_job *j)
{
    return j->stack.torch && j->stack.torch < GM_VERSION(2, 0, 0);
}

unsigned est_weight_elem_bytes(enum gm_precision p)
{
    return p == GM_PREC_FP32 ? 4 : 2;
}

bool est_precision_autocast(enum gm_precision p)
{
    return p == GM_PREC_FP16_MIXED || p == GM_PREC_BF16_MIXED;
}

unsigned est_adapter_bytes(const struct gm_job *j)
{
    if (j->memory.adapter_dtype == GM_DTYPE_BF16)
        return 2;
    if (j->memory.adapter_dtype == GM_DTYPE_F32)
        return 4;
    if (est_trl_casts_adapters_bf16(j))
        return 2;
    return j->numerics.precision == GM_PREC_BF16 ? 2 : 4;
}

unsigned est_frozen_rest_bytes(const struct gm_job *j)
{
    if (j->numerics.precision == GM_PREC_FP32)
        return 4;
    return j->memory.adapter == GM_ADAPTER_QLORA && j->memory.lora.fp32_upcast ? 4 : 2;
}

/* TRL's SFTTrainer, given a PEFT config and a 4-bit model (trl/trainer/sft_trainer.py,
 * SFTTrainer.__init__, read at v0.7.5 0c77f98, v0.13.0 8d4cc94 l. 182-233 and v0.21.0):
 * prepare_model_for_kbit_training (PEFT: every parameter that is not 4-bit to fp32),
 * get_peft_model, then with args.bf16 peft_module_casting_to_bf16 (trl/trainer/utils.py, v0.13.0
 * l. 872): modules whose name holds "norm" to fp32, and those named "lm_head", "embed_tokens",
 * "wte" or "wpe" whose weight is fp32 back to bf16.  From 0.8.0 (PR #1416) neither runs where
 * the 4-bit weights sit on the CPU or the meta device (QLoRA under FSDP or ZeRO-3; QLoRA under
 * them came with that release), so a sharded job keeps the rule it had. */
bool est_trl_casts_bf16(const struct gm_job *j)
{
    if (j->memory.adapter != GM_ADAPTER_QLORA || !j->memory.lora.fp32_upcast)
        return false;
    if (j->stack.trl < GM_VERSION(0, 7, 5) || j->numerics.precision != GM_PREC_BF16_MIXED)
        return false;
    return j->parallel.shard != GM_SHARD_FSDP && j->parallel.shard != GM_SHARD_ZERO3;
}

/* Before 0.9 peft_module_casting_to_bf16 also cast every PEFT tuner layer (isinstance
 * BaseTunerLayer, the LoRA adapters) to bf16 (trl/trainer/utils.py at v0.7.5 0c77f98 l. 632-633,
 * the same at every tag to v0.8.6 e90e8d9 l. 665-666); commit 99f2c94b2 (PR #1644, "don't cast
 * the trainable lora layers to half precision") removed it, and the first 0.9 release
 * (a03e7cc4e, "Release 0.9.2", __version__ 0.9.2) already holds it. */
bool est_trl_casts_adapters_bf16(const struct gm_job *j)
{
    return est_trl_casts_bf16(j) && j->stack.trl < GM_VERSION(0, 9, 0);
}

/* The names it matches are the model's HF module names (gm_arch_hf_embed_names()): where
 * they were not read the estimate keeps the upcast and says so (stage_adapters.c). */
bool est_trl_casts_embeddings_bf16(const struct gm_job *j, const struct gm_model *m)
{
    return m && est_trl_casts_bf16(j) &&
           gm_arch_hf_embed_names(m->arch) == GM_HF_EMBED_NAMES_EMBED_TOKENS;
}

uint64_t est_data_parallel(const struct gm_job *j)
{
    uint64_t per_replica = j->parallel.tp * j->parallel.pp;
    return per_replica ? j->parallel.gpus / per_replica : 1;
}

bool est_llamacpp_kv_type(enum gm_dtype t, uint32_t *out)
{
    switch (t) {
    case GM_DTYPE_UNKNOWN:
    case GM_DTYPE_F16:
        *out = 1;
        return true;
    case GM_DTYPE_F32:
        *out = 0;
        return true;
    case GM_DTYPE_BF16:
        *out = 30;
        return true;
    case GM_DTYPE_I8:
        *out = 8; /* q8_0 */
        return true;
    case GM_DTYPE_INT4:
        *out = 2; /* q4_0 */
        return true;
    default:
        return false;
    }
}

/* The value in the field of a numeric setting's row. */
static bool field_value(const struct gm_job *j, const struct gm_job_setting *s,
                        union gm_job_value *v)
{
    const char *field = (const char *)j + s->offset;
    if (s->offset == NO_FIELD)
        return false;
    switch (s->type) {
    case GM_JOB_U64:
    case GM_JOB_COUNT:
    case GM_JOB_SIZE:
        memcpy(&v->u64, field, sizeof(uint64_t));
        return true;
    case GM_JOB_DOUBLE:
        memcpy(&v->number, field, sizeof(double));
        return true;
    default:
        return false;
    }
}

/* Limits that keep the arithmetic meaningful, for jobs filled in directly as well: every
 * numeric field of the settings table within its row's range (a field at its default, which
 * means "not set", is left alone), and what no row states. */
static enum gm_status check_limits(const struct gm_job *j, struct gm_error *err)
{
    const struct gm_job_workload *w = &j->workload;
    struct gm_job d;
    enum gm_status st;
    gm_job_init(&d);
    for (size_t i = 0; i < N_SETTINGS; i++) {
        union gm_job_value v, dv;
        if (!field_value(j, &settings[i], &v) || !field_value(&d, &settings[i], &dv) ||
            !memcmp(&v, &dv, sizeof v))
            continue;
        if ((st = check_range(&settings[i], &v, NULL, err)) != GM_OK)
            return st;
    }
    /* sizes that no numeric setting holds as they are */
    if (j->runtime.reserve_bytes > EST_MAX_BYTES || j->gpu.memory_bytes > EST_MAX_BYTES ||
        j->engine.vllm.cuda_graph_bytes > EST_MAX_BYTES)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "a size is absurd (limit 2^60 bytes)");
    if (j->numerics.weight_format == GM_WEIGHTS_BITS && !(j->numerics.weight_bits > 0))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--bits: needs a value above 0");
    if (j->mode == GM_EST_INFER && w->context + w->new_tokens == 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--context + --new-tokens: at least one token");
    if ((unsigned)j->mode >= GM_EST_MODE__COUNT || (unsigned)j->method >= GM_METHOD__COUNT ||
        (unsigned)j->numerics.precision >= GM_PREC__COUNT ||
        (unsigned)j->numerics.optimizer >= GM_OPT__COUNT ||
        (unsigned)j->numerics.optim_impl >= GM_OPTIM__COUNT ||
        (unsigned)j->numerics.zero_grad >= GM_ZERO_GRAD__COUNT ||
        (unsigned)j->numerics.weight_format >= GM_WEIGHTS__COUNT ||
        (unsigned)j->memory.checkpointing >= GM_CKPT__COUNT ||
        (unsigned)j->memory.attention >= GM_ATTN__COUNT ||
        (unsigned)j->memory.adapter >= GM_ADAPTER__COUNT ||
        (unsigned)j->parallel.shard >= GM_SHARD__COUNT ||
        (unsigned)j->engine.kind >= GM_ENGINE__COUNT ||
        (unsigned)j->memory.loss >= GM_LOSS__COUNT ||
        (unsigned)j->stack.framework >= GM_FRAMEWORK__COUNT ||
        (unsigned)j->parallel.pp_schedule >= GM_PP__COUNT ||
        (j->memory.fused_kernels & ~(unsigned)(GM_FUSED_ALL | GM_FUSED_LORA)) ||
        (j->parallel.fsdp_version != 1 && j->parallel.fsdp_version != 2))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "estimate: enum input out of range");
    return GM_OK;
}

/* Settings given for a mode or an engine they do not belong to. */
static enum gm_status check_applies(const struct gm_job *j, struct gm_error *err)
{
    for (size_t i = 0; i < N_SETTINGS; i++) {
        const struct gm_job_setting *s = &settings[i];
        if (!est_given(j, (enum est_setting)i))
            continue;
        if (!(s->modes & (1u << j->mode)))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--%s applies to %s", s->name,
                           modes_text(s->modes));
        if (s->engine != GM_ENGINE_NONE && j->engine.kind != s->engine)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--%s applies to --engine %s",
                           s->name, gm_engine_name(s->engine));
    }
    return GM_OK;
}

static enum gm_status exclusive(const struct gm_job *j, enum est_setting a, enum est_setting b,
                                struct gm_error *err)
{
    if (est_given(j, a) && est_given(j, b))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--%s and --%s exclude each other",
                       settings[a].name, settings[b].name);
    return GM_OK;
}

static enum gm_status check_adapters(const struct gm_job *j, struct gm_error *err)
{
    static const enum est_setting lora_only[] = {EST_SET_LORA_RANK, EST_SET_LORA_TARGETS,
                                                 EST_SET_LORA_DROPOUT, EST_SET_ADAPTER_DTYPE};
    static const enum est_setting qlora_only[] = {EST_SET_NO_DOUBLE_QUANT, EST_SET_NO_FP32_UPCAST};
    enum gm_status st;
    if ((st = exclusive(j, EST_SET_LORA, EST_SET_QLORA, err)))
        return st;
    for (size_t i = 0; i < sizeof lora_only / sizeof lora_only[0]; i++)
        if (est_given(j, lora_only[i]) && j->memory.adapter == GM_ADAPTER_NONE)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--%s needs --lora or --qlora",
                           settings[lora_only[i]].name);
    for (size_t i = 0; i < sizeof qlora_only / sizeof qlora_only[0]; i++)
        if (est_given(j, qlora_only[i]) && j->memory.adapter != GM_ADAPTER_QLORA)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--%s needs --qlora",
                           settings[qlora_only[i]].name);
    if (j->memory.adapter != GM_ADAPTER_NONE && j->mode != GM_EST_TRAIN)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "LoRA/QLoRA applies to --train");
    /* BitsandbytesPrecision.__init__ raises for int8 with any dtype but torch.float16
     * (src/lightning/fabric/plugins/precision/bitsandbytes.py, Lightning-AI/pytorch-lightning
     * 71aed751, the commit LitGPT 8641822 pins) */
    if (j->numerics.weight_format == GM_WEIGHTS_QUANT &&
        j->numerics.quant.method == GM_QUANT_BNB_INT8 && est_bnb_lightning(j) &&
        !est_bnb_compute_fp16(j))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--quant int8 with --model-impl litgpt needs fp16: Lightning's "
                       "BitsandbytesPrecision refuses int8 with %s (%s)",
                       j->mode == GM_EST_INFER ? "bf16-true" : "this --precision",
                       j->mode == GM_EST_INFER ? "LitGPT's default where the GPU has bf16"
                                               : "LitGPT's 16-true: --precision fp16-mixed");
    return GM_OK;
}

static enum gm_status check_parallel(const struct gm_job *j, struct gm_error *err)
{
    const struct gm_job_parallel *p = &j->parallel;
    int stage = p->shard == GM_SHARD_FSDP ? 3 : (int)p->shard;
    enum gm_status st;
    if ((st = exclusive(j, EST_SET_FSDP, EST_SET_ZERO, err)))
        return st;
    /* DeepSpeed's reduce buffer: neither DDP nor FSDP has one (at ZeRO-3 overlap_comm
     * changes nothing: stage_parallel.c says so) */
    if (p->shard == GM_SHARD_NONE || p->shard == GM_SHARD_FSDP) {
        if (est_given(j, EST_SET_ZERO_OVERLAP_COMM))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--zero-overlap-comm needs --zero 1 or 2");
        if (est_given(j, EST_SET_BUCKET_ELEMENTS))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--bucket-elements needs --zero");
    }
    if (p->shard != GM_SHARD_ZERO3 && est_given(j, EST_SET_ZERO_REUSE_DISTANCE))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--zero-reuse-distance needs --zero 3");
    if (p->tp > p->gpus)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--tp %llu exceeds --gpus %llu",
                       (unsigned long long)p->tp, (unsigned long long)p->gpus);
    if (p->tp * p->pp > p->gpus)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--tp x --pp exceeds --gpus %llu",
                       (unsigned long long)p->gpus);
    if (p->gpus % (p->tp * p->pp) != 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--gpus %llu is not a multiple of --tp %llu x --pp %llu",
                       (unsigned long long)p->gpus, (unsigned long long)p->tp,
                       (unsigned long long)p->pp);
    if (p->cp > 1 && p->gpus % (p->tp * p->pp * p->cp) != 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--gpus %llu is not a multiple of --tp %llu x --pp %llu x --cp %llu",
                       (unsigned long long)p->gpus, (unsigned long long)p->tp,
                       (unsigned long long)p->pp, (unsigned long long)p->cp);
    /* the load-balanced split gives each rank two of 2 x cp equal chunks of every sequence
     * (context_parallel's round-robin); ring attention runs SDPA's flash or efficient kernels
     * only (torchtitan's train context restricts the backends) */
    if (p->cp > 1 && j->workload.seq % (2 * p->cp) != 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--cp %llu needs --seq a multiple of 2 x cp = %llu (two chunks per rank)",
                       (unsigned long long)p->cp, (unsigned long long)(2 * p->cp));
    if (p->cp > 1 && j->workload.tokens)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--cp splits every sequence of --batch x --seq: not --tokens-per-batch");
    /* the one stack whose context parallelism gpumem models is torchtitan's, which shards the
     * model with FSDP2's fully_shard over the dp_shard_cp mesh and trains every parameter */
    if (p->cp > 1 && p->shard != GM_SHARD_NONE && p->shard != GM_SHARD_FSDP)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--cp runs under torchtitan's FSDP2 (--fsdp --fsdp-version 2), not --zero");
    if (p->cp > 1 && p->shard == GM_SHARD_FSDP && p->fsdp_version != 2)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--cp with --fsdp needs FSDP2 (--fsdp-version 2): torchtitan shards its "
                       "context-parallel model with fully_shard");
    if (p->cp > 1 && j->memory.adapter != GM_ADAPTER_NONE)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--cp runs as torchtitan's full training (FSDP2), not with --lora or "
                       "--qlora");
    if (p->cp > 1 && j->memory.attention == GM_ATTN_EAGER)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--cp needs SDPA attention (ring attention wraps the flash and efficient "
                       "kernels), not --attention eager");
    if (p->shard != GM_SHARD_NONE && j->mode != GM_EST_TRAIN)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--zero / --fsdp apply to --train");
    if (p->pp > 1 && j->mode == GM_EST_INFER && j->engine.kind != GM_ENGINE_VLLM)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--pp applies to --train and to --engine vllm");
    if (p->pp > 1 && stage >= 2 && p->shard != GM_SHARD_FSDP)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--pp combines with ZeRO-1 at most (DeepSpeed's pipeline engine refuses "
                       "ZeRO-2 and ZeRO-3) or with --fsdp (FSDP2, as torchtitan)");
    if (p->pp > 1 && p->shard == GM_SHARD_FSDP && p->fsdp_version != 2)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--pp with --fsdp needs FSDP2 (--fsdp-version 2): torch.distributed."
                       "pipelining drives fully_shard modules");
    /* torch's interleaved schedule runs n_microbatches in rounds of microbatches_per_round
     * (ScheduleInterleaved1F1B: num_rounds = max(1, n_microbatches // pp_group_size), and
     * n_microbatches % num_rounds must be 0) */
    if (est_given(j, EST_SET_PP_SCHEDULE) && p->pp < 2)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--pp-schedule needs --pp >= 2");
    if (est_given(j, EST_SET_PP_STAGES_PER_RANK) && p->pp_schedule != GM_PP_INTERLEAVED_1F1B)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--pp-stages-per-rank needs --pp-schedule interleaved-1f1b");
    /* DeepSpeed's pipeline engine (--pp with --zero 1) runs its own TrainSchedule, which has
     * no interleaved form; the schedule modelled is torch.distributed.pipelining's */
    if (p->pp > 1 && p->pp_schedule == GM_PP_INTERLEAVED_1F1B && p->shard != GM_SHARD_NONE &&
        p->shard != GM_SHARD_FSDP)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--pp-schedule interleaved-1f1b is torch.distributed.pipelining's "
                       "schedule: with --zero, --pp is DeepSpeed's pipeline engine, whose "
                       "TrainSchedule has no interleaved form");
    /* Megatron's virtual pipeline (--num-layers-per-virtual-pipeline-stage) has its own
     * warmup count, not read here */
    if (p->pp > 1 && p->pp_schedule == GM_PP_INTERLEAVED_1F1B &&
        j->stack.framework == GM_FRAMEWORK_MEGATRON)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--pp-schedule interleaved-1f1b is torch's ScheduleInterleaved1F1B: "
                       "Megatron's virtual pipeline stages are not modelled (--stack megatron)");
    if (p->pp_microbatches > EST_MAX_BATCH)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "estimate: pp_microbatches %llu out of range (at most %llu)",
                       (unsigned long long)p->pp_microbatches, (unsigned long long)EST_MAX_BATCH);
    if (p->pp > 1 && p->pp_schedule == GM_PP_INTERLEAVED_1F1B) {
        uint64_t n_mb = est_pp_microbatches(j);
        uint64_t rounds = n_mb / p->pp ? n_mb / p->pp : 1;
        if (n_mb % rounds != 0)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--pp-schedule interleaved-1f1b runs the micro-batches in rounds of "
                           "--pp: %llu micro-batches (--grad-accum) are not a multiple of its "
                           "%llu rounds",
                           (unsigned long long)n_mb, (unsigned long long)rounds);
    }
    /* torchtitan's apply_tp raises "Async TP requires --training.compile" (Inductor's
     * micro-pipeline pass does the fusing), and the pass fuses the all-gathers and
     * reduce-scatters of sequence parallelism's activations */
    if (p->async_tp && (p->tp < 2 || !p->sequence_parallel || !j->memory.compile))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--async-tp needs --tp >= 2, --sequence-parallel and --compile (Inductor "
                       "fuses the sequence-parallel collectives with the matmuls)");
    /* torch's AsyncTP rides on torch's TP plan and a stack that turns it on (stacks.c) */
    if (p->async_tp && (!est_torch_tp_plan(j) || !est_stack_async_tp(j)))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--async-tp is torch's AsyncTP (torchtitan's enable_async_tensor_parallel, "
                       "or a custom torch loop): --stack %s has none",
                       est_stack_name(j));
    if (p->sequence_parallel && p->tp < 2)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--sequence-parallel needs --tp >= 2");
    if (p->offload_params && stage != 3)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "parameter offload needs --zero 3 or --fsdp");
    if (p->offload_optimizer && stage == 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "optimizer offload needs --zero 1|2|3 or --fsdp");
    return GM_OK;
}

static enum gm_status check_engine(const struct gm_job *j, struct gm_error *err)
{
    uint32_t t;
    if (j->engine.kind != GM_ENGINE_NONE && j->mode != GM_EST_INFER)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--engine applies to --infer");
    if (j->engine.kind == GM_ENGINE_LLAMACPP && !est_llamacpp_kv_type(j->numerics.kv_dtype, &t))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--engine llama.cpp caches KV as fp32, fp16, bf16, int8 (q8_0) or int4 "
                       "(q4_0)");
    if (j->engine.kind == GM_ENGINE_LLAMACPP && j->parallel.tp > 1)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--engine llama.cpp splits layers, not tensors: --tp is not supported");
    if (est_engine_shards(j) && !j->gpu.memory_bytes)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--engine %s sizes its KV pool from the GPU's memory: give --gpu or "
                       "--gpu-memory",
                       gm_engine_name(j->engine.kind));
    if (j->parallel.replicas &&
        j->parallel.gpus != j->parallel.replicas * j->parallel.tp * j->parallel.pp)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--replicas %llu x --tp %llu x --pp %llu is not --gpus %llu",
                       (unsigned long long)j->parallel.replicas, (unsigned long long)j->parallel.tp,
                       (unsigned long long)j->parallel.pp, (unsigned long long)j->parallel.gpus);
    return GM_OK;
}

/* The memory techniques: what each needs and what it excludes. */
static enum gm_status check_techniques(const struct gm_job *j, struct gm_error *err)
{
    static const enum est_setting arch_only[] = {EST_SET_LOSS,
                                                 EST_SET_FUSED_KERNELS,
                                                 EST_SET_COMPILE,
                                                 EST_SET_FLOAT8,
                                                 EST_SET_ACTIVATION_OFFLOAD,
                                                 EST_SET_TOKENS_PER_BATCH,
                                                 EST_SET_OPTIMIZER_IN_BACKWARD,
                                                 EST_SET_CP};
    const struct gm_job_memory *mem = &j->memory;
    enum gm_status st;
    if (est_given(j, EST_SET_LOSS_CHUNKS) && mem->loss != GM_LOSS_CHUNKED &&
        mem->loss != GM_LOSS_CHUNKED_BACKWARD)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--loss-chunks needs --loss chunked or chunked-backward");
    /* the block lives in the step replay: where none runs there is nothing to turn off */
    if (est_given(j, EST_SET_NO_LOSS_CACHE_BLOCK) &&
        (mem->loss != GM_LOSS_FUSED || mem->loss_impl != GM_LOSS_IMPL_UNSLOTH))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--no-loss-cache-block needs --loss fused --loss-impl unsloth");
    if (est_given(j, EST_SET_NO_LOSS_CACHE_BLOCK) && !est_step_replay_job_applies(j))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--no-loss-cache-block needs the step replay, which --fragmentation, "
                       "--pp above 1, --method blog and allocators other than PyTorch's leave "
                       "out: there is no cache block to leave out");
    if (mem->loss == GM_LOSS_COMPILED && j->stack.transformers)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--loss compiled is a training loop's own compiled F.cross_entropy, not "
                       "the loss of an HF model (--transformers-version)");
    /* what PyTorch 2.0 brought: torch.compile, and torch.distributed's fully_shard (FSDP2);
     * torchtune requires torch 2 (its recipes compile and shard with them) */
    if (est_torch_before_2(j)) {
        if (mem->compile)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--compile needs PyTorch 2.0 or later (--torch-version)");
        if (j->parallel.shard == GM_SHARD_FSDP && j->parallel.fsdp_version == 2)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--fsdp-version 2 needs PyTorch 2.0 or later (--torch-version)");
        if (j->stack.preset == GM_STACK_TORCHTUNE)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--stack torchtune needs PyTorch 2.0 or later (--torch-version)");
    }
    if (est_given(j, EST_SET_LOSS_IMPL) && mem->loss != GM_LOSS_FUSED_LINEAR &&
        !(mem->loss == GM_LOSS_FUSED &&
          (mem->loss_impl == GM_LOSS_IMPL_LIGER || mem->loss_impl == GM_LOSS_IMPL_UNSLOTH)))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--loss-impl needs --loss fused-linear, or --loss fused with liger or "
                       "unsloth (Cut Cross-Entropy and cuTile's are fused linear "
                       "cross-entropies)");
    if (est_given(j, EST_SET_CHECKPOINT_EVERY) && mem->checkpointing != GM_CKPT_FULL)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--checkpoint-every needs --grad-checkpointing full");
    if ((est_given(j, EST_SET_FSDP_VERSION) || !j->parallel.reshard_after_forward ||
         est_given(j, EST_SET_NO_SYNC_MODULE_STATES)) &&
        j->parallel.shard != GM_SHARD_FSDP)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--fsdp-version, --no-reshard-after-forward and --no-sync-module-states "
                       "need --fsdp");
    if (est_given(j, EST_SET_NO_SYNC_MODULE_STATES) && j->parallel.fsdp_version != 1)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--no-sync-module-states needs FSDP1 (--fsdp-version 1): FSDP2's "
                       "fully_shard has no sync_module_states");
    if ((st = exclusive(j, EST_SET_BATCH, EST_SET_TOKENS_PER_BATCH, err)) ||
        (st = exclusive(j, EST_SET_MAX_BATCH, EST_SET_TOKENS_PER_BATCH, err)))
        return st;
    if (j->workload.tokens && j->workload.seq > j->workload.tokens)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--seq %llu (the longest sequence) exceeds --tokens-per-batch %llu",
                       (unsigned long long)j->workload.seq, (unsigned long long)j->workload.tokens);
    for (size_t i = 0; i < sizeof arch_only / sizeof arch_only[0]; i++)
        if (est_given(j, arch_only[i]) && j->method == GM_METHOD_BLOG)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--%s applies to --method arch (the blog formula has no such term)",
                           settings[arch_only[i]].name);
    /* FOAK fuses LoRA only on a quantised base (fms-acceleration 733992a
     * plugins/fused-ops-and-kernels framework_plugin_fast_kernels.py: "fused_lora" is omitted
     * where the model has no quantization_method; base_layer "auto_gptq" or "bitsandbytes"),
     * and runs under HF Trainer / accelerate with FSDP or DDP: the same file's callbacks handle
     * FSDP only, and LoRA_QKV / LoRA_W multiply the whole dequantised weight (no tensor
     * parallelism) */
    if (mem->fused_kernels & GM_FUSED_LORA) {
        if (est_lora_base(j) == EST_LORA_BASE_PLAIN)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--fused-kernels lora: FOAK fuses LoRA only on a bitsandbytes "
                           "(--qlora) or GPTQ (--quant gptq) base");
        if (j->parallel.tp > 1)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--fused-kernels lora: FOAK's fused LoRA has no tensor parallelism "
                           "(--tp above 1)");
    }
    if (mem->optimizer_in_backward) {
        /* torchtune's recipes assert both; DeepSpeed steps its own partitions */
        if (j->workload.grad_accum > 1)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--optimizer-in-backward steps at every micro-batch: it excludes "
                           "--grad-accum (torchtune refuses both)");
        if (j->parallel.shard >= GM_SHARD_ZERO1 && j->parallel.shard <= GM_SHARD_ZERO3)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--optimizer-in-backward works with DDP or --fsdp, not --zero");
        if (j->parallel.offload_optimizer || j->parallel.pp > 1)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--optimizer-in-backward excludes --offload-optimizer and --pp");
    }
    if (j->parallel.ep > 1 && est_data_parallel(j) % j->parallel.ep != 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--ep %llu does not divide the %llu data-parallel ranks (experts are "
                       "spread over data-parallel GPUs)",
                       (unsigned long long)j->parallel.ep,
                       (unsigned long long)est_data_parallel(j));
    return GM_OK;
}

/* ---- weight formats (bitsandbytes, GPTQ, AWQ, FP8) ---- */
static enum gm_status check_quant(const struct gm_job *j, struct gm_error *err)
{
    const struct gm_quant *q = &j->numerics.quant;
    bool grouped =
        j->numerics.weight_format == GM_WEIGHTS_QUANT &&
        (q->method == GM_QUANT_GPTQ || q->method == GM_QUANT_AWQ || q->method == GM_QUANT_INT);
    enum gm_status st;
    if ((st = exclusive(j, EST_SET_BITS, EST_SET_QUANT, err)) ||
        (st = exclusive(j, EST_SET_QLORA, EST_SET_QUANT, err)))
        return st;
    if ((est_given(j, EST_SET_QUANT_BITS) || est_given(j, EST_SET_GROUP_SIZE)) && !grouped)
        return gm_fail(
            err, GM_ERR_INVALID, GM_NO_OFFSET, "--%s applies to --quant gptq, awq, w4a16 or w8a16",
            settings[est_given(j, EST_SET_QUANT_BITS) ? EST_SET_QUANT_BITS : EST_SET_GROUP_SIZE]
                .name);
    if (grouped && q->method == GM_QUANT_AWQ && q->bits != 4)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--quant-bits: AWQ checkpoints are 4-bit (AutoAWQ's GEMM/GEMV kernels)");
    if (grouped && q->method == GM_QUANT_GPTQ && q->bits != 2 && q->bits != 3 && q->bits != 4 &&
        q->bits != 8)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--quant-bits: GPTQ uses 2, 3, 4 or 8");
    if (grouped && q->method == GM_QUANT_INT && q->bits != 4 && q->bits != 8)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--quant-bits: w4a16 / w8a16 are 4 or 8");
    return GM_OK;
}

static enum gm_status check_method(const struct gm_job *j, struct gm_error *err)
{
    if (est_given(j, EST_SET_ACTIVATIONS_PER_TOKEN) && j->method != GM_METHOD_BLOG)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--activations-per-token applies to --method blog");
    if (est_given(j, EST_SET_LARGEST_LAYER) && j->method != GM_METHOD_DEEPSPEED)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--largest-layer applies to --method deepspeed");
    if (j->method != GM_METHOD_DEEPSPEED)
        return GM_OK;
    if (j->mode != GM_EST_TRAIN)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--method deepspeed needs --train");
    if (j->parallel.shard != GM_SHARD_ZERO2 && j->parallel.shard != GM_SHARD_ZERO3)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--method deepspeed covers --zero 2 and --zero 3");
    if (j->memory.adapter != GM_ADAPTER_NONE || j->parallel.tp > 1)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--method deepspeed sizes full training without tensor parallelism (no "
                       "--lora, --qlora or --tp)");
    return GM_OK;
}

enum gm_status gm_job_check(const struct gm_job *job, struct gm_error *err)
{
    struct gm_job j = *job;
    enum gm_status st;

    est_job_resolve(&j);
    if ((st = exclusive(&j, EST_SET_TRAIN, EST_SET_INFER, err)))
        return st;
    if ((st = check_applies(&j, err)) || (st = check_limits(&j, err)))
        return st;
    if ((est_given(&j, EST_SET_IMAGES) || est_given(&j, EST_SET_IMAGE_SIZE)) && j.model.model &&
        j.model.model->vision.kind == GM_VISION_NONE)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--images / --image-size: '%s' has no vision tower gpumem reads (LLaVA, "
                       "Qwen2-VL, Qwen2.5-VL)",
                       j.model.model->name[0] ? j.model.model->name : j.model.model->model_type);
    if ((st = exclusive(&j, EST_SET_MAX_BATCH, EST_SET_MAX_CONTEXT, err)))
        return st;
    if ((st = check_method(&j, err)) || (st = check_adapters(&j, err)) ||
        (st = check_parallel(&j, err)) || (st = check_engine(&j, err)) ||
        (st = check_techniques(&j, err)) || (st = check_quant(&j, err)))
        return st;
    if (j.search != GM_SEARCH_NONE && j.mode == GM_EST_WEIGHTS)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--max-batch / --max-context need --train or --infer");
    if (j.search != GM_SEARCH_NONE && !j.gpu.memory_bytes)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--max-batch / --max-context need --gpu or --gpu-memory");
    return GM_OK;
}
