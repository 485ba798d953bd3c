/* SPDX-License-Identifier: MIT */
/* names.c - names, rule texts and advice paragraphs of the analysis (static strings). */
#include "analysis/analysis_int.h"

const char *gm_category_name(enum gm_category c)
{
    static const char *const names[GM_CATEGORY_COUNT] = {
        "parameter",       "input",          "activation", "gradient",
        "optimizer_state", "optimizer_temp", "other"};
    return (unsigned)c < GM_CATEGORY_COUNT ? names[c] : "other";
}

const char *gm_category_advice(enum gm_category c)
{
    switch (c) {
    case GM_CATEGORY_PARAMETER:
        return "The weights dominate: load them in bf16/fp16 (or 8/4-bit quantized for "
               "inference), shard them across GPUs (FSDP, ZeRO-3) or offload part of them.";
    case GM_CATEGORY_INPUT:
        return "The input batches dominate: use a smaller batch (with gradient accumulation "
               "to keep the effective batch), keep only the current batch on the GPU, and "
               "move data in its compact dtype (uint8 images, int32 tokens).";
    case GM_CATEGORY_ACTIVATION:
        return "Activations dominate: they grow with batch and sequence length. Use a "
               "smaller micro-batch with gradient accumulation, activation checkpointing "
               "(torch.utils.checkpoint), bf16/fp16 autocast, or memory-efficient attention "
               "(scaled_dot_product_attention).";
    case GM_CATEGORY_GRADIENT:
        return "Parameter gradients dominate: they are as large as the trainable weights. "
               "Freeze what you do not train (requires_grad_(False), LoRA), keep gradients in "
               "bf16, shard them (ZeRO-2, FSDP), and free them with zero_grad(set_to_none=True).";
    case GM_CATEGORY_OPTIMIZER_STATE:
        return "Optimizer state dominates: Adam/AdamW keep two moments per parameter (twice "
               "the fp32 weights). Use an 8-bit optimizer (bitsandbytes), a factored one "
               "(Adafactor), SGD with momentum, or shard the state (ZeRO-1, FSDP).";
    case GM_CATEGORY_OPTIMIZER_TEMP:
        return "Optimizer temporaries dominate: the foreach implementation copies whole "
               "parameter groups. Use fused=True (Adam/AdamW on CUDA), or foreach=False to "
               "step one tensor at a time.";
    case GM_CATEGORY_OTHER:
        break;
    }
    return "Temporaries and unclassified tensors dominate: see the largest sites (--top). "
           "Large activation gradients or logits (vocabulary x tokens) shrink with a smaller "
           "micro-batch or a chunked loss; memory kept across iterations is a leak "
           "(gpumem snapshot leaks).";
}

const char *gm_phase_name(enum gm_phase p)
{
    static const char *const names[GM_PHASE_COUNT] = {"other", "forward", "backward",
                                                      "optimizer_step"};
    return (unsigned)p < GM_PHASE_COUNT ? names[p] : "other";
}

static const struct {
    const char *name;
    const char *text;
} rules[GM_RULE_COUNT] = {
    {"none", "no rule matched (unexplained)"},
    {"param_frames", "allocated by Module.to/_apply/cuda, nn.init, load_state_dict, "
                     "from_pretrained, torch.load or DataParallel replicate"},
    {"param_lifetime", "alive from before the trace to its end, without a stack"},
    {"input_frames", "allocated by torch.utils.data code"},
    {"input_batch", "a few tensors allocated by user code before a forward and freed by "
                    "the next iteration (or the latest such batch)"},
    {"act_saved", "allocated in forward, freed during backward (saved for backward)"},
    {"act_held", "allocated in forward and kept after it within the iteration"},
    {"temp_forward", "allocated and freed inside one forward"},
    {"grad", "allocated in backward and alive after it (parameter gradient)"},
    {"temp_backward", "allocated and freed inside backward (activation gradient, temporary)"},
    {"opt_state", "allocated in an optimizer step and kept after it"},
    {"opt_temp", "allocated and freed inside one optimizer step"},
    {"kept_forward", "allocated in forward and kept into later iterations"},
    {"user", "allocated outside model, autograd and optimizer code (user code, libraries)"},
    {"custom", "matched a rule of your category rules (--categories; the first match wins)"},
};

const char *gm_rule_name(enum gm_rule r)
{
    return (unsigned)r < GM_RULE_COUNT ? rules[r].name : "none";
}

const char *gm_rule_text(enum gm_rule r)
{
    return (unsigned)r < GM_RULE_COUNT ? rules[r].text : rules[0].text;
}

const char *gm_leak_kind_name(enum gm_leak_kind k)
{
    static const char *const names[GM_LEAK_KIND_COUNT] = {"forward_output", "graph_kept",
                                                          "user_tensor", "optimizer", "other"};
    return (unsigned)k < GM_LEAK_KIND_COUNT ? names[k] : "other";
}

const char *gm_leak_kind_advice(enum gm_leak_kind k)
{
    switch (k) {
    case GM_LEAK_FORWARD_OUTPUT:
        return "A result of the forward pass (typically the loss or an output) is kept from "
               "every iteration, for example accumulated for logging with "
               "`total = total + loss` or `losses.append(loss)`. The kept tensor also keeps "
               "its autograd graph. Keep a number instead: `total += loss.item()`, or "
               "`loss.detach()` when a tensor is needed.";
    case GM_LEAK_GRAPH_NO_GRAD:
        return "Whole autograd graphs are kept: many forward allocation sites (the "
               "activations a graph saved for backward) stay alive from every iteration. "
               "Either a forward runs without backward and without `torch.no_grad()` (an "
               "evaluation loop) while its output is kept, or an output is accumulated with "
               "its graph (`y_sum = y_sum + y`). Wrap evaluation in `with torch.no_grad():` "
               "(or `torch.inference_mode()`), and keep `loss.item()` or `y.detach()` "
               "instead of the tensor.";
    case GM_LEAK_USER_TENSOR:
        return "Your code creates a GPU tensor every iteration and keeps it (a list, a "
               "dict, a cache). Keep a CPU copy (`.cpu()`, `.item()`), bound the container, "
               "or clear it.";
    case GM_LEAK_OPTIMIZER:
        return "The optimizer state grows every iteration: parameters are added to the "
               "optimizer repeatedly, or a new optimizer is created per step while the old "
               "one is still referenced. Create the optimizer once.";
    case GM_LEAK_OTHER:
        break;
    }
    return "Memory allocated at this site in every iteration is never freed. Find what "
           "keeps a reference to these tensors.";
}

enum gm_leak_verdict gm_analysis_leak_verdict(const struct gm_analysis_device *dev)
{
    if (!dev->n_events)
        return GM_LEAK_VERDICT_NO_TRACE;
    if (dev->n_leaks)
        return GM_LEAK_VERDICT_FOUND;
    return dev->n_iterations < ANA_MIN_LEAK_ITERATIONS ? GM_LEAK_VERDICT_TOO_FEW
                                                       : GM_LEAK_VERDICT_NONE;
}

const char *gm_leak_verdict_name(enum gm_leak_verdict v)
{
    static const char *const names[] = {"no_trace", "too_few_iterations", "none", "found"};
    return (unsigned)v < sizeof(names) / sizeof(names[0]) ? names[v] : "none";
}

const char *gm_leak_verdict_text(enum gm_leak_verdict v)
{
    switch (v) {
    case GM_LEAK_VERDICT_NO_TRACE:
        return "no trace: iterations and leaks need the allocation history";
    case GM_LEAK_VERDICT_TOO_FEW:
        return "too few iterations to judge: a leak shows only over 3 or more iterations "
               "(memory kept by two iterations before the last)";
    case GM_LEAK_VERDICT_NONE:
        return "no leak: no allocation site keeps memory from one iteration to the next";
    case GM_LEAK_VERDICT_FOUND:
        break;
    }
    return "memory grows from iteration to iteration";
}

const char *gm_oom_verdict_name(enum gm_oom_verdict v)
{
    switch (v) {
    case GM_VERDICT_SHORTAGE:
        return "shortage";
    case GM_VERDICT_FRAGMENTATION:
        return "fragmentation";
    case GM_VERDICT_LIMIT:
        return "limit";
    case GM_VERDICT_NONE:
        break;
    }
    return "none";
}

const char *gm_oom_verdict_advice(enum gm_oom_verdict v)
{
    switch (v) {
    case GM_VERDICT_SHORTAGE:
        return "True shortage: even if every free byte (free in CUDA plus cached but "
               "unallocated) could be used, the request would not fit. Allocator settings "
               "cannot fix this; need less memory at this point: a smaller batch or "
               "sequence, activation checkpointing, bf16/fp16, an 8-bit or fused optimizer, "
               "or sharding (FSDP/ZeRO).";
    case GM_VERDICT_FRAGMENTATION:
        return "Fragmentation: enough bytes are free in total, but no single free range is "
               "large enough. PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments "
               "grow in place, so freed pages are reused for any size (the usual fix). "
               "max_split_size_mb:N stops the allocator from splitting cached blocks larger "
               "than N MiB, keeping large blocks whole for large requests. "
               "garbage_collection_threshold:0.8 makes it release unused cached blocks "
               "before it reaches the limit instead of after a failed cudaMalloc.";
    case GM_VERDICT_LIMIT:
        return "CUDA reported enough free memory for the request, so the allocator hit "
               "another limit: torch.cuda.set_per_process_memory_fraction, a private pool "
               "(CUDA graphs, MemPool), or another stream's cached blocks. Check the "
               "memory fraction and the pools.";
    case GM_VERDICT_NONE:
        break;
    }
    return "";
}
