/* SPDX-License-Identifier: MIT */
/* estimate_ext.c - `gpumem estimate` for real-world setups: weight files as MODEL, LoRA /
 * QLoRA, ZeRO / FSDP / tensor parallelism with per-device figures, DeepSpeed's own
 * estimator beside ours, serving engines and the max batch / context search. */
#include "estimate_ext.h"

#include "cli.h"

#include "gpumem/units.h"

#include <string.h>

const char *const est_ext_zero_choices[] = {"0", "1", "2", "3", NULL};
const char *const est_ext_engine_choices[] = {"none", "hf", "vllm", "llama.cpp", NULL};

void est_ext_opts_init(struct est_ext_opts *o)
{
    memset(o, 0, sizeof(*o));
    gm_estimate_ext_init(&o->x);
    gm_modelfile_init(&o->file);
    o->rank = o->x.lora_rank;
    o->gpus = 1;
    o->tp = 1;
    o->pp = 1;
    o->accum = 1;
    o->util = o->x.gpu_memory_utilization;
    o->block = o->x.block_size;
    o->seqs = o->x.max_num_seqs;
    o->ubatch = o->x.n_ubatch;
    o->bucket = o->x.bucket_elements;
}

void est_ext_release(struct est_ext_opts *o)
{
    gm_modelfile_release(&o->file);
}

bool est_ext_active(const struct est_ext_opts *o)
{
    return o->lora || o->qlora || o->fsdp || o->off_opt || o->off_par || o->sp || o->paged ||
           o->max_batch || o->max_ctx || o->s_gpus || o->s_tp || o->s_pp || o->s_zero ||
           o->s_engine || o->s_accum || o->x.selective_ckpt || o->deepspeed;
}

int est_ext_resolve_model(const char *cmd, struct est_ext_opts *o, const char *spec,
                          struct gm_model *model)
{
    struct gm_error err;
    if (!gm_modelfile_is_weights(spec)) {
        if (gm_model_resolve(spec, model, &err) != GM_OK)
            return cli_fail(cmd, &err);
        return 0;
    }
    if (gm_modelfile_load(spec, NULL, &o->file, &err) != GM_OK)
        return cli_fail(cmd, &err);
    o->have_file = true;
    if (gm_modelfile_to_model(&o->file, model, &err) != GM_OK)
        return cli_fail(cmd, &err);
    if (!model->name[0]) {
        /* name the model after its folder (or file) */
        const char *end = spec + strlen(spec), *start;
        while (end > spec + 1 && end[-1] == '/')
            end--;
        start = end;
        while (start > spec && start[-1] != '/')
            start--;
        snprintf(model->name, sizeof(model->name), "%.*s", (int)(end - start), start);
    }
    if (o->file.format == GM_MODELFILE_GGUF) {
        o->x.gguf_weight_bytes = o->file.n_bytes;
        for (size_t i = 0; i < o->file.n_tensors; i++)
            if (strcmp(o->file.tensors[i].name, "token_embd.weight") == 0)
                o->x.gguf_input_bytes = o->file.tensors[i].n_bytes;
    }
    return 0;
}

/* llama.cpp's cache types, from the --kv-dtype names. */
static bool kv_ggml_type(enum gm_dtype t, uint32_t *out)
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

int est_ext_prepare(const char *cmd, struct est_ext_opts *o, struct gm_estimate_inputs *in,
                    bool method_deepspeed, bool train, bool infer)
{
    struct gm_estimate_ext *x = &o->x;
    struct gm_error err;
    bool train_opt = o->lora || o->qlora || o->s_rank || o->targets || o->s_dropout || o->no_dq ||
                     o->no_upcast || o->s_pp || o->s_zero || o->fsdp || o->off_opt || o->off_par ||
                     o->s_accum || o->paged || o->sp || o->s_bucket || o->ddp_view;
    bool serve_opt = o->s_engine || o->s_util || o->s_mml || o->s_block || o->s_seqs || o->s_mnbt ||
                     o->eager || o->s_ubatch || o->fa || o->s_nontorch;

    o->deepspeed = method_deepspeed;
    if (train_opt && !train)
        return cli_usage(cmd, "LoRA, sharding and offload options need --train");
    if (serve_opt && !infer)
        return cli_usage(cmd, "--engine and its options need --infer");
    if ((o->s_gpus || o->s_tp || o->s_pp || o->s_gpn) && !train && !infer)
        return cli_usage(cmd, "--gpus, --gpus-per-node, --tp and --pp need --train or --infer");
    if (o->s_largest && !method_deepspeed)
        return cli_usage(cmd, "--largest-layer applies to --method deepspeed");
    if (o->lora && o->qlora)
        return cli_usage(cmd, "--lora and --qlora exclude each other");
    if ((o->s_rank || o->targets || o->s_dropout) && !o->lora && !o->qlora)
        return cli_usage(cmd,
                         "--lora-rank, --lora-targets and --lora-dropout need --lora or --qlora");
    if ((o->no_dq || o->no_upcast) && !o->qlora)
        return cli_usage(cmd, "--no-double-quant and --no-fp32-upcast need --qlora");
    if (o->fsdp && o->s_zero)
        return cli_usage(cmd, "--fsdp and --zero exclude each other");
    if (o->max_batch && o->max_ctx)
        return cli_usage(cmd, "--max-batch and --max-context exclude each other");
    if ((o->max_batch || o->max_ctx) && !train && !infer)
        return cli_usage(cmd, "--max-batch / --max-context need --train or --infer");
    if (o->s_util && !(o->util > 0 && o->util <= 1))
        return cli_usage(cmd, "--gpu-memory-utilization: must be above 0 and at most 1");
    if (o->s_dropout && !(o->dropout >= 0 && o->dropout < 1))
        return cli_usage(cmd, "--lora-dropout: must be in [0, 1)");
    if ((o->s_block && (o->block == 0 || o->block > 4096)) || (o->s_seqs && o->seqs == 0) ||
        (o->s_ubatch && (o->ubatch == 0 || o->ubatch > 65536)) || (o->s_rank && o->rank == 0) ||
        (o->s_gpus && (o->gpus == 0 || o->gpus > 65536)) ||
        (o->s_tp && (o->tp == 0 || o->tp > 1024)) || (o->s_pp && (o->pp == 0 || o->pp > 1024)) ||
        (o->s_accum && o->accum == 0) || (o->s_gpn && (o->gpn == 0 || o->gpn > 65536)))
        return cli_usage(cmd, "counts (--gpus, --tp, --lora-rank, --block-size, ...) must be "
                              "positive and in range");
    if (method_deepspeed) {
        if (!train)
            return cli_usage(cmd, "--method deepspeed needs --train");
        if (!o->s_zero)
            o->zero = 3;
        if (o->zero < 2)
            return cli_usage(cmd, "--method deepspeed covers --zero 2 and --zero 3");
        if (o->lora || o->qlora || o->s_tp)
            return cli_usage(cmd, "--method deepspeed sizes full training without tensor "
                                  "parallelism");
    }

    x->lora = o->qlora ? GM_LORA_QLORA : o->lora ? GM_LORA_LORA : GM_LORA_NONE;
    x->lora_rank = o->rank;
    if (o->targets && gm_lora_targets_parse(o->targets, &x->lora_targets, &err) != GM_OK) {
        cli_errorf(cmd, "--lora-targets: %s", err.msg);
        return GM_EXIT_USAGE;
    }
    x->lora_dropout = o->dropout;
    x->qlora_double_quant = !o->no_dq;
    x->qlora_fp32_rest = !o->no_upcast;
    /* --tp N --pp M alone means N x M GPUs */
    x->gpus = o->s_gpus ? o->gpus : o->tp * o->pp;
    x->pp = o->pp;
    x->gpus_per_node = o->gpn;
    x->shard = o->fsdp ? GM_SHARD_FSDP : (enum gm_shard)o->zero;
    x->offload_optimizer = o->off_opt;
    x->offload_params = o->off_par;
    x->tp = o->tp;
    x->sequence_parallel = o->sp;
    x->bucket_elements = o->bucket;
    x->ddp_bucket_view = o->ddp_view;
    x->grad_accum = o->accum;
    x->paged_optimizer = o->paged;
    x->engine = (enum gm_engine)o->engine;
    x->gpu_memory_utilization = o->util;
    x->max_model_len = o->mml;
    x->block_size = o->block;
    x->max_num_seqs = o->seqs;
    x->max_num_batched_tokens = o->mnbt;
    x->enforce_eager = o->eager;
    x->non_torch_bytes = o->non_torch;
    x->n_ubatch = o->ubatch;
    x->flash_attn = o->fa;
    x->search = o->max_batch ? GM_SEARCH_BATCH : o->max_ctx ? GM_SEARCH_CONTEXT : GM_SEARCH_NONE;
    if (x->engine == GM_ENGINE_LLAMACPP && !kv_ggml_type(in->kv_dtype, &x->kv_ggml_type))
        return cli_usage(cmd, "--engine llama.cpp caches KV as fp32, fp16, bf16, int8 (q8_0) "
                              "or int4 (q4_0)");
    if (x->search != GM_SEARCH_NONE && !in->gpu_memory_bytes)
        return cli_usage(cmd, "--max-batch / --max-context need --gpu or --gpu-memory");
    if (o->have_file && in->model && in->model->arch == GM_ARCH_UNKNOWN && !in->n_params)
        in->n_params = in->model->n_params_file;
    return 0;
}

enum gm_status est_ext_run(struct est_ext_opts *o, struct gm_estimate_inputs *in,
                           struct gm_estimate *e, struct gm_error *err)
{
    enum gm_status st;
    if (o->deepspeed) {
        struct gm_param_counts pc;
        uint64_t total = in->n_params, largest = o->largest;
        uint64_t gpn = o->gpn ? o->gpn : (o->gpus < 8 ? o->gpus : 8);
        if (in->model && gm_model_count_params(in->model, &pc, err) == GM_OK) {
            if (!total)
                total = in->model->n_params_file ? in->model->n_params_file : pc.total;
            if (!largest)
                largest = o->have_file ? o->file.largest_module_params : pc.largest_tensor;
        }
        if (o->gpus % gpn != 0)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "--gpus %llu is not a whole number of nodes of %llu GPUs",
                           (unsigned long long)o->gpus, (unsigned long long)gpn);
        if (o->zero == 3 && !largest)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "ZeRO-3 needs the largest layer: give a MODEL or --largest-layer N");
        st = gm_deepspeed_estimate(o->zero, total, largest, gpn, o->gpus / gpn, 1.5, &o->ds, err);
        if (st)
            return st;
        if (!in->model) {
            /* No architecture: DeepSpeed's table alone, over a weights-only base. */
            struct gm_estimate_inputs w = *in;
            w.mode = GM_EST_WEIGHTS;
            o->ds_only = true;
            return gm_estimate_run(&w, e, err);
        }
    }
    st = gm_estimate_ext_search(in, &o->x, e, &o->res, err);
    if (st)
        return st;
    /* Show the job at the value found. */
    if (o->res.search_value) {
        if (o->x.search == GM_SEARCH_BATCH)
            in->batch = o->res.search_value;
        else if (in->mode == GM_EST_TRAIN)
            in->seq = o->res.search_value;
        else
            in->context = o->res.search_value;
    }
    /* Engines that preallocate exact buffers: the rendered assumptions should say so. */
    if (o->x.engine == GM_ENGINE_VLLM || o->x.engine == GM_ENGINE_LLAMACPP)
        in->fragmentation = 0;
    return GM_OK;
}

static void gib(char *b, size_t n, uint64_t v)
{
    gm_format_fixed(b, n, v, GM_GIB, "GiB");
}

static void ds_option_text(char *b, size_t n, const struct gm_deepspeed *d,
                           const struct gm_deepspeed_row *r)
{
    if (d->stage == 2)
        snprintf(b, n, "offload_optimizer=%s", r->offload_optimizer ? "cpu" : "none");
    else
        snprintf(b, n, "offload_param=%s, offload_optimizer=%s, zero_init=%d",
                 r->offload_params ? "cpu" : "none", r->offload_optimizer ? "cpu" : "none",
                 r->zero_init ? 1 : 0);
}

void est_ext_render_text(FILE *f, const struct est_ext_opts *o, const struct est_view *v)
{
    const struct gm_estimate_ext *x = &o->x;
    const struct gm_estimate_ext_result *r = &o->res;
    const struct gm_estimate *e = v->e;
    char a[32], b[32], c[32];

    if (o->have_file) {
        fprintf(f,
                "\nmodel files: %s, %llu file%s, %llu tensors, %llu parameters, %llu bytes "
                "(headers read: %llu bytes)\n",
                o->file.format == GM_MODELFILE_GGUF ? "GGUF" : "safetensors",
                (unsigned long long)o->file.n_files, o->file.n_files == 1 ? "" : "s",
                (unsigned long long)o->file.n_tensors, (unsigned long long)o->file.n_params,
                (unsigned long long)o->file.n_bytes, (unsigned long long)o->file.header_bytes);
        for (size_t i = 0; i < o->file.n_dtypes; i++)
            fprintf(f, "  %-10s %6llu tensors %16llu elements %16llu bytes\n",
                    o->file.dtypes[i].name, (unsigned long long)o->file.dtypes[i].n_tensors,
                    (unsigned long long)o->file.dtypes[i].n_elements,
                    (unsigned long long)o->file.dtypes[i].n_bytes);
        if (o->file.largest_module[0])
            fprintf(f, "  largest module: %s (%llu parameters)\n", o->file.largest_module,
                    (unsigned long long)o->file.largest_module_params);
    }
    if (o->deepspeed) {
        const struct gm_deepspeed *d = &o->ds;
        fprintf(f,
                "%sDeepSpeed ZeRO-%d model-state estimator (estimate_zero%d_model_states_mem_"
                "needs_all_cold), reproduced:\n",
                o->ds_only ? "" : "\n", d->stage, d->stage);
        fprintf(f, "  HW: %llu node%s, %llu GPU%s per node; SW: %llu params",
                (unsigned long long)d->nodes, d->nodes > 1 ? "s" : "",
                (unsigned long long)d->gpus_per_node, d->gpus_per_node > 1 ? "s" : "",
                (unsigned long long)d->total_params);
        if (d->stage == 3)
            fprintf(f, ", %llu largest layer params", (unsigned long long)d->largest_layer_params);
        fprintf(f, "\n  %12s %12s   %s\n", "per CPU", "per GPU", "options");
        for (size_t i = 0; i < d->n_rows; i++) {
            char opt[96];
            gib(a, sizeof a, d->rows[i].cpu_bytes);
            gib(b, sizeof b, d->rows[i].gpu_bytes);
            ds_option_text(opt, sizeof opt, d, &d->rows[i]);
            fprintf(f, "  %12s %12s   %s\n", a, b, opt);
        }
        {
            uint64_t zp[4];
            gm_zero_paper_model_states(d->total_params, d->gpus_per_node * d->nodes, 12, zp);
            fprintf(f,
                    "  ZeRO paper (Rajbhandari et al. 2020, K = 12) per GPU over %llu ranks: "
                    "baseline %.2f GB, P_os %.2f GB, P_os+g %.2f GB, P_os+g+p %.2f GB\n",
                    (unsigned long long)(d->gpus_per_node * d->nodes), (double)zp[0] / 1e9,
                    (double)zp[1] / 1e9, (double)zp[2] / 1e9, (double)zp[3] / 1e9);
        }
        fprintf(f, "  DeepSpeed prints these GiB (2^30) figures labelled \"GB\"; model states "
                   "only: no activations, buffers or CUDA context.\n");
        fprintf(f, "  %s\n",
                o->ds_only ? "Give a MODEL for gpumem's fuller per-device estimate "
                             "(activations, buffers, context)."
                           : "gpumem's fuller per-device estimate for this setup is "
                             "above.");
    }
    if (x->lora != GM_LORA_NONE) {
        fprintf(f, "\n%s: rank %llu, %llu trainable adapter parameters, frozen base %llu bytes",
                x->lora == GM_LORA_QLORA ? "QLoRA" : "LoRA", (unsigned long long)x->lora_rank,
                (unsigned long long)r->lora_params, (unsigned long long)r->base_weight_bytes);
        if (x->lora == GM_LORA_QLORA)
            fprintf(f, " (NF4 constants %llu bytes)", (unsigned long long)r->nf4_constant_bytes);
        fprintf(f, "\n");
    }
    if (!o->ds_only && (x->gpus > 1 || x->tp > 1 || x->pp > 1 || x->shard != GM_SHARD_NONE)) {
        char pp[32] = "";
        if (x->pp > 1)
            snprintf(pp, sizeof pp, ", pp %llu", (unsigned long long)x->pp);
        fprintf(f, "\nper device: %s, %llu GPUs (%llu per node, %llu node%s), tp %llu%s%s\n",
                v->in->mode != GM_EST_TRAIN                            ? "inference"
                : x->shard != GM_SHARD_NONE || r->gpus > x->tp * x->pp ? gm_shard_name(x->shard)
                                                                       : "no data parallelism",
                (unsigned long long)r->gpus, (unsigned long long)r->gpus_per_node,
                (unsigned long long)r->nodes, r->nodes > 1 ? "s" : "", (unsigned long long)x->tp,
                x->sequence_parallel ? " + sequence parallel" : "", pp);
        for (size_t i = 0; i < r->n_groups; i++) {
            gib(a, sizeof a, r->groups[i].allocated_bytes);
            gib(b, sizeof b, r->groups[i].reserved_bytes);
            gib(c, sizeof c, r->groups[i].device_bytes);
            char layers[48] = "";
            if (r->groups[i].layers)
                snprintf(layers, sizeof layers, " (%s, %llu layers)", r->groups[i].role,
                         (unsigned long long)r->groups[i].layers);
            fprintf(f, "  ranks %llu-%llu%s: allocated %s, reserved %s, device %s each\n",
                    (unsigned long long)r->groups[i].first_rank,
                    (unsigned long long)(r->groups[i].first_rank + r->groups[i].count - 1), layers,
                    a, b, c);
        }
        if (r->cpu_bytes_per_node) {
            gib(a, sizeof a, r->cpu_bytes_per_node);
            fprintf(f, "  host memory per node for offloaded state: %llu bytes = %s\n",
                    (unsigned long long)r->cpu_bytes_per_node, a);
        }
    }
    if (x->paged_optimizer && v->gpu_bytes && e->device_bytes > v->gpu_bytes) {
        uint64_t over = e->device_bytes - v->gpu_bytes;
        gib(a, sizeof a, r->pageable_bytes);
        gib(b, sizeof b, over);
        if (over <= r->pageable_bytes)
            fprintf(f,
                    "\npaged optimizer: %s of its %s state would live in host memory; the job "
                    "runs, with slower optimizer steps\n",
                    b, a);
        else
            fprintf(f,
                    "\npaged optimizer: even with all %s of its state in host memory the job "
                    "does not fit\n",
                    a);
    }
    if (x->engine == GM_ENGINE_VLLM) {
        gib(a, sizeof a, r->budget_bytes);
        gib(b, sizeof b, r->kv_pool_bytes);
        fprintf(f,
                "\nvLLM: budget %s (%.2f x capacity); KV pool %s = %llu blocks x %llu tokens "
                "= %llu tokens (%llu bytes per token)\n",
                a, x->gpu_memory_utilization, b, (unsigned long long)r->kv_blocks,
                (unsigned long long)x->block_size, (unsigned long long)r->kv_tokens,
                (unsigned long long)r->kv_bytes_per_token);
        fprintf(f, "  max_model_len %llu: %.2f concurrent sequences at full length%s\n",
                (unsigned long long)r->max_model_len, r->max_concurrency,
                r->kv_tokens < r->max_model_len ? " - vLLM would refuse to start (lower "
                                                  "--max-model-len or raise "
                                                  "--gpu-memory-utilization)"
                                                : "");
    }
    if (x->engine == GM_ENGINE_LLAMACPP) {
        gib(a, sizeof a, r->compute_buffer_bytes);
        fprintf(f, "\nllama.cpp: KV %llu bytes per token; compute buffer %s\n",
                (unsigned long long)r->kv_bytes_per_token, a);
    }
    if (x->search != GM_SEARCH_NONE) {
        const char *what = x->search == GM_SEARCH_BATCH
                               ? "batch"
                               : (v->in->mode == GM_EST_TRAIN ? "seq" : "context");
        gib(a, sizeof a, e->device_bytes);
        if (r->search_value)
            fprintf(f, "\nlargest %s that fits %s: %llu%s (device %s at that %s)\n", what,
                    v->gpu_label, (unsigned long long)r->search_value,
                    r->search_hit_limit ? " (the search limit: the model's positions or 2^20)" : "",
                    a, what);
        else
            fprintf(f, "\nlargest %s that fits %s: none (even 1 needs %s)\n", what, v->gpu_label,
                    a);
    }
}

void est_ext_render_json(struct gm_json *w, const struct est_ext_opts *o, const struct est_view *v)
{
    const struct gm_estimate_ext *x = &o->x;
    const struct gm_estimate_ext_result *r = &o->res;
    if (o->have_file) {
        gm_json_key(w, "model_file");
        gm_json_begin_object(w);
        gm_json_kv_str(w, "format", o->file.format == GM_MODELFILE_GGUF ? "gguf" : "safetensors");
        if (o->file.format == GM_MODELFILE_GGUF)
            gm_json_kv_u64(w, "gguf_version", o->file.gguf_version);
        gm_json_kv_u64(w, "files", o->file.n_files);
        gm_json_kv_u64(w, "tensors", o->file.n_tensors);
        gm_json_kv_u64(w, "parameters", o->file.n_params);
        gm_json_kv_u64(w, "bytes", o->file.n_bytes);
        gm_json_kv_u64(w, "header_bytes", o->file.header_bytes);
        gm_json_key(w, "dtypes");
        gm_json_begin_array(w);
        for (size_t i = 0; i < o->file.n_dtypes; i++) {
            gm_json_begin_object(w);
            gm_json_kv_str(w, "dtype", o->file.dtypes[i].name);
            gm_json_kv_u64(w, "tensors", o->file.dtypes[i].n_tensors);
            gm_json_kv_u64(w, "elements", o->file.dtypes[i].n_elements);
            gm_json_kv_u64(w, "bytes", o->file.dtypes[i].n_bytes);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
        gm_json_kv_str(w, "largest_module", o->file.largest_module);
        gm_json_kv_u64(w, "largest_module_parameters", o->file.largest_module_params);
        gm_json_end_object(w);
    }
    if (!est_ext_active(o))
        return;
    gm_json_key(w, "setup");
    gm_json_begin_object(w);
    gm_json_kv_str(w, "lora", x->lora == GM_LORA_QLORA ? "qlora" : x->lora ? "lora" : "none");
    gm_json_kv_str(w, "sharding", gm_shard_name(x->shard));
    gm_json_kv_u64(w, "gpus", x->gpus);
    gm_json_kv_u64(w, "tp", x->tp);
    gm_json_kv_u64(w, "pp", x->pp);
    gm_json_kv_bool(w, "sequence_parallel", x->sequence_parallel);
    gm_json_kv_bool(w, "offload_optimizer", x->offload_optimizer);
    gm_json_kv_bool(w, "offload_params", x->offload_params);
    gm_json_kv_u64(w, "grad_accum", x->grad_accum);
    gm_json_kv_bool(w, "selective_checkpointing", x->selective_ckpt);
    gm_json_kv_bool(w, "paged_optimizer", x->paged_optimizer);
    gm_json_kv_str(w, "engine", gm_engine_name(x->engine));
    gm_json_end_object(w);
    gm_json_key(w, "devices");
    gm_json_begin_array(w);
    for (size_t i = 0; i < r->n_groups; i++) {
        gm_json_begin_object(w);
        gm_json_kv_str(w, "role", r->groups[i].role);
        gm_json_kv_u64(w, "first_rank", r->groups[i].first_rank);
        gm_json_kv_u64(w, "count", r->groups[i].count);
        if (r->groups[i].layers)
            gm_json_kv_u64(w, "layers", r->groups[i].layers);
        gm_json_kv_u64(w, "allocated_bytes", r->groups[i].allocated_bytes);
        gm_json_kv_u64(w, "reserved_bytes", r->groups[i].reserved_bytes);
        gm_json_kv_u64(w, "device_bytes", r->groups[i].device_bytes);
        gm_json_kv_u64(w, "host_bytes_per_node", r->cpu_bytes_per_node);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    if (x->paged_optimizer) {
        gm_json_key(w, "paged_optimizer");
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "pageable_bytes", r->pageable_bytes);
        if (v->gpu_bytes)
            gm_json_kv_bool(w, "fits_with_paging",
                            v->e->device_bytes <= v->gpu_bytes ||
                                v->e->device_bytes - v->gpu_bytes <= r->pageable_bytes);
        gm_json_end_object(w);
    }
    if (x->lora != GM_LORA_NONE) {
        gm_json_key(w, "lora");
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "rank", x->lora_rank);
        gm_json_kv_u64(w, "trainable_parameters", r->lora_params);
        gm_json_kv_u64(w, "frozen_parameters", r->frozen_params);
        gm_json_kv_u64(w, "frozen_weight_bytes", r->base_weight_bytes);
        gm_json_kv_u64(w, "nf4_constant_bytes", r->nf4_constant_bytes);
        gm_json_end_object(w);
    }
    if (x->engine == GM_ENGINE_VLLM || x->engine == GM_ENGINE_LLAMACPP) {
        gm_json_key(w, "serving");
        gm_json_begin_object(w);
        gm_json_kv_str(w, "engine", gm_engine_name(x->engine));
        gm_json_kv_u64(w, "kv_bytes_per_token", r->kv_bytes_per_token);
        if (x->engine == GM_ENGINE_VLLM) {
            gm_json_kv_u64(w, "budget_bytes", r->budget_bytes);
            gm_json_kv_u64(w, "non_torch_bytes", r->non_torch_bytes);
            gm_json_kv_u64(w, "activation_peak_bytes", r->activation_peak_bytes);
            gm_json_kv_u64(w, "kv_pool_bytes", r->kv_pool_bytes);
            gm_json_kv_u64(w, "kv_blocks", r->kv_blocks);
            gm_json_kv_u64(w, "kv_tokens", r->kv_tokens);
            gm_json_kv_u64(w, "max_model_len", r->max_model_len);
            gm_json_kv_double(w, "max_concurrency", r->max_concurrency);
            gm_json_kv_bool(w, "starts", r->kv_tokens >= r->max_model_len);
        } else {
            gm_json_kv_u64(w, "compute_buffer_bytes", r->compute_buffer_bytes);
        }
        gm_json_end_object(w);
    }
    if (x->search != GM_SEARCH_NONE) {
        gm_json_key(w, "search");
        gm_json_begin_object(w);
        gm_json_kv_str(w, "what",
                       x->search == GM_SEARCH_BATCH
                           ? "batch"
                           : (v->in->mode == GM_EST_TRAIN ? "seq" : "context"));
        gm_json_kv_u64(w, "largest_fitting", r->search_value);
        gm_json_kv_bool(w, "limit_reached", r->search_hit_limit);
        gm_json_kv_u64(w, "limit", r->search_limit);
        gm_json_end_object(w);
    }
    if (o->deepspeed) {
        const struct gm_deepspeed *d = &o->ds;
        gm_json_key(w, "deepspeed");
        gm_json_begin_object(w);
        gm_json_kv_i64(w, "stage", d->stage);
        gm_json_kv_u64(w, "total_params", d->total_params);
        gm_json_kv_u64(w, "largest_layer_params", d->largest_layer_params);
        gm_json_kv_u64(w, "gpus_per_node", d->gpus_per_node);
        gm_json_kv_u64(w, "nodes", d->nodes);
        gm_json_kv_double(w, "additional_buffer_factor", d->buffer_factor);
        {
            uint64_t zp[4];
            gm_zero_paper_model_states(d->total_params, d->gpus_per_node * d->nodes, 12, zp);
            gm_json_key(w, "zero_paper_bytes");
            gm_json_begin_object(w);
            gm_json_kv_u64(w, "baseline", zp[0]);
            gm_json_kv_u64(w, "os", zp[1]);
            gm_json_kv_u64(w, "os_g", zp[2]);
            gm_json_kv_u64(w, "os_g_p", zp[3]);
            gm_json_end_object(w);
        }
        gm_json_key(w, "rows");
        gm_json_begin_array(w);
        for (size_t i = 0; i < d->n_rows; i++) {
            gm_json_begin_object(w);
            gm_json_kv_bool(w, "offload_optimizer", d->rows[i].offload_optimizer);
            if (d->stage == 3) {
                gm_json_kv_bool(w, "offload_params", d->rows[i].offload_params);
                gm_json_kv_bool(w, "zero_init", d->rows[i].zero_init);
            }
            gm_json_kv_u64(w, "cpu_bytes", d->rows[i].cpu_bytes);
            gm_json_kv_u64(w, "gpu_bytes", d->rows[i].gpu_bytes);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
        gm_json_end_object(w);
    }
}

/* ---- what to change, for the extended setups ---- */

typedef void (*ext_apply_fn)(struct gm_estimate_inputs *, struct gm_estimate_ext *);

static void ap_ckpt(struct gm_estimate_inputs *in, struct gm_estimate_ext *x)
{
    in->grad_ckpt = GM_CKPT_FULL;
    x->selective_ckpt = false;
}
static void ap_half_batch(struct gm_estimate_inputs *in, struct gm_estimate_ext *x)
{
    (void)x;
    in->batch = in->batch > 1 ? in->batch / 2 : 1;
}
static void ap_qlora(struct gm_estimate_inputs *in, struct gm_estimate_ext *x)
{
    (void)in;
    x->lora = GM_LORA_QLORA;
}
static void ap_zero3(struct gm_estimate_inputs *in, struct gm_estimate_ext *x)
{
    (void)in;
    x->shard = GM_SHARD_ZERO3;
}
static void ap_offload_par(struct gm_estimate_inputs *in, struct gm_estimate_ext *x)
{
    (void)in;
    if (x->shard != GM_SHARD_FSDP)
        x->shard = GM_SHARD_ZERO3;
    x->offload_optimizer = true;
    x->offload_params = true;
}
static void ap_offload_opt(struct gm_estimate_inputs *in, struct gm_estimate_ext *x)
{
    (void)in;
    x->offload_optimizer = true;
}
static void ap_8bit(struct gm_estimate_inputs *in, struct gm_estimate_ext *x)
{
    (void)x;
    in->optimizer = GM_OPT_ADAMW_8BIT;
}
static void ap_kv_fp8(struct gm_estimate_inputs *in, struct gm_estimate_ext *x)
{
    (void)x;
    in->kv_dtype = GM_DTYPE_F8_E4M3;
}
static void ap_half_len(struct gm_estimate_inputs *in, struct gm_estimate_ext *x)
{
    (void)in;
    x->max_model_len /= 2;
}
static void ap_util(struct gm_estimate_inputs *in, struct gm_estimate_ext *x)
{
    (void)in;
    x->gpu_memory_utilization = 0.95;
}
static void ap_fa(struct gm_estimate_inputs *in, struct gm_estimate_ext *x)
{
    (void)in;
    x->flash_attn = true;
}

static bool ext_fits(const struct gm_estimate_ext *x, const struct gm_estimate *e,
                     const struct gm_estimate_ext_result *r, uint64_t gpu)
{
    if (x->engine == GM_ENGINE_VLLM)
        return r->kv_tokens >= r->max_model_len && e->device_bytes <= gpu;
    return e->device_bytes <= gpu;
}

struct ext_combined {
    struct gm_estimate_inputs in;
    struct gm_estimate_ext x;
    uint64_t device_bytes;
    bool fits;
    char flags[96];
    int n;
};

static void ext_try(struct est_view *v, const struct est_ext_opts *o, struct ext_combined *all,
                    const char *change, ext_apply_fn apply)
{
    struct gm_estimate_inputs in = *v->in;
    struct gm_estimate_ext x = o->x;
    struct gm_estimate e;
    struct gm_estimate_ext_result r;
    struct gm_error err;
    struct est_suggestion *sg;
    if (v->n_sugg >= (int)(sizeof(v->sugg) / sizeof(v->sugg[0])) - 1)
        return;
    x.search = GM_SEARCH_NONE;
    apply(&in, &x);
    if (gm_estimate_ext_run(&in, &x, &e, &r, &err) != GM_OK)
        return;
    sg = &v->sugg[v->n_sugg++];
    snprintf(sg->change, sizeof(sg->change), "%s", change);
    sg->device_bytes = e.device_bytes;
    sg->fits = ext_fits(&x, &e, &r, v->gpu_bytes);
    in = all->in;
    x = all->x;
    apply(&in, &x);
    if (gm_estimate_ext_run(&in, &x, &e, &r, &err) == GM_OK &&
        (e.device_bytes < all->device_bytes ||
         (!all->fits && ext_fits(&x, &e, &r, v->gpu_bytes)))) {
        size_t len = strlen(all->flags);
        all->in = in;
        all->x = x;
        all->device_bytes = e.device_bytes;
        all->fits = ext_fits(&x, &e, &r, v->gpu_bytes);
        snprintf(all->flags + len, sizeof(all->flags) - len, "%s%s", len ? " " : "", change);
        all->n++;
    }
}

void est_ext_suggestions(const struct est_ext_opts *o, struct est_view *v)
{
    const struct gm_estimate_inputs *in = v->in;
    const struct gm_estimate_ext *x = &o->x;
    struct ext_combined all;
    char buf[64];
    if (!v->gpu_bytes || o->ds_only || ext_fits(x, v->e, &o->res, v->gpu_bytes))
        return;
    memset(&all, 0, sizeof(all));
    all.in = *in;
    all.x = *x;
    all.x.search = GM_SEARCH_NONE;
    all.device_bytes = v->e->device_bytes;
    if (in->mode == GM_EST_TRAIN) {
        if (in->grad_ckpt == GM_CKPT_NONE)
            ext_try(v, o, &all, "--grad-checkpointing full", ap_ckpt);
        if (in->batch > 1) {
            snprintf(buf, sizeof buf, "--batch %llu", (unsigned long long)(in->batch / 2));
            ext_try(v, o, &all, buf, ap_half_batch);
        }
        if (x->lora == GM_LORA_LORA)
            ext_try(v, o, &all, "--qlora", ap_qlora);
        if (x->gpus > x->tp && x->shard < GM_SHARD_ZERO3)
            ext_try(v, o, &all, "--zero 3", ap_zero3);
        if (x->shard != GM_SHARD_NONE && !x->offload_optimizer)
            ext_try(v, o, &all, "--offload-optimizer", ap_offload_opt);
        if (x->shard != GM_SHARD_NONE && !x->offload_params)
            ext_try(v, o, &all,
                    x->shard == GM_SHARD_FSDP ||
                            (x->shard == GM_SHARD_ZERO3 && x->offload_optimizer)
                        ? "--offload-params"
                        : "--zero 3 --offload-optimizer --offload-params",
                    ap_offload_par);
        if (in->optimizer == GM_OPT_ADAMW || in->optimizer == GM_OPT_ADAM)
            ext_try(v, o, &all, "--optimizer adamw-8bit", ap_8bit);
    } else if (in->mode == GM_EST_INFER) {
        if (in->kv_dtype != GM_DTYPE_F8_E4M3 && in->kv_dtype != GM_DTYPE_INT4 &&
            x->engine != GM_ENGINE_LLAMACPP)
            ext_try(v, o, &all, "--kv-dtype fp8", ap_kv_fp8);
        if (x->engine == GM_ENGINE_LLAMACPP && !x->flash_attn)
            ext_try(v, o, &all, "--flash-attn", ap_fa);
        if (x->engine == GM_ENGINE_VLLM) {
            struct gm_estimate_ext half = *x;
            if (!half.max_model_len)
                half.max_model_len = o->res.max_model_len;
            snprintf(buf, sizeof buf, "--max-model-len %llu",
                     (unsigned long long)(half.max_model_len / 2));
            all.x.max_model_len = half.max_model_len;
            {
                /* the halving applies to the resolved length */
                struct est_ext_opts t = *o;
                t.x.max_model_len = half.max_model_len;
                ext_try(v, &t, &all, buf, ap_half_len);
            }
            if (x->gpu_memory_utilization < 0.95)
                ext_try(v, o, &all, "--gpu-memory-utilization 0.95", ap_util);
        }
        if (in->batch > 1) {
            snprintf(buf, sizeof buf, "--batch %llu", (unsigned long long)(in->batch / 2));
            ext_try(v, o, &all, buf, ap_half_batch);
        }
    }
    if (all.n > 1) {
        struct est_suggestion *sg = &v->sugg[v->n_sugg++];
        snprintf(sg->change, sizeof(sg->change), "together: %s", all.flags);
        sg->device_bytes = all.device_bytes;
        sg->fits = all.fits;
    }
}
