/* SPDX-License-Identifier: MIT */
/* stage_runtime.c - the runtime stage: what lives outside PyTorch's caching allocator, and
 * the three figures.
 *
 * Outside the allocator, on every device: the CUDA context with its loaded kernels
 * (--cuda-context), cuBLAS/cuDNN workspaces (--workspace), NCCL communicator buffers when
 * several GPUs talk (1 GiB per GPU; NCCL allocates them with cudaMalloc, not through
 * PyTorch), or for vLLM its measured non-torch memory instead of the last two (it covers
 * NCCL and cuBLAS; stage_engine.c sizes it).  llama.cpp has no caching allocator and no
 * cuBLAS workspace of its own beyond the context.  In the weights-only estimate a flat
 * --reserve-gib, when given, stands for everything that is not the weights.
 *
 * Figures: peak allocated is the largest phase; peak reserved adds the allocator's
 * fragmentation on transient memory (none where buffers are exact); device used adds the
 * outside components.  Devices of one group (pipeline stage) get the same overheads. */
#include "estimate/estimate_int.h"

#include <stdio.h>
#include <string.h>

#define NCCL_BYTES GM_GIB

/* One overhead: its kind, its label in the device sentence and where it comes from. */
struct overhead {
    enum gm_est_kind kind;
    uint64_t bytes;
    const char *label;  /* "CUDA context" */
    const char *source; /* "--cuda-context" */
};

static enum gm_status add_overheads(struct gm_estimate *e, const struct overhead *o, size_t n,
                                    bool weights_only, struct gm_error *err)
{
    char list[GM_EST_NOTE_MAX] = "", sources[96] = "";
    size_t shown = 0, k = 0;
    enum gm_status st;
    for (size_t i = 0; i < n; i++)
        shown += o[i].bytes > 0;
    for (size_t i = 0; i < n; i++) {
        if (!o[i].bytes)
            continue;
        if ((st = est_add(e, o[i].kind, gm_est_kind_name(o[i].kind), o[i].bytes, GM_PHASE_ALL,
                          false, GM_EXTENT_ONE_LAYER, o[i].source, err)))
            return st;
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%.0f MiB %s",
                 k == 0 ? "" : (k + 1 == shown ? " and " : ", "),
                 (double)o[i].bytes / (double)GM_MIB, o[i].label);
        snprintf(sources + strlen(sources), sizeof sources - strlen(sources), "%s%s", k ? ", " : "",
                 o[i].source);
        k++;
    }
    if (!shown)
        est_assume(e, "device used adds nothing outside the allocator (--cuda-context 0)%s",
                   weights_only ? "; no activations or KV cache" : "");
    else
        est_assume(e, "device used adds %s (%s)%s", list, sources,
                   weights_only ? "; no activations or KV cache" : "");
    return GM_OK;
}

/* How peak reserved follows from peak allocated for the job's memory manager. */
static void reserved_rule(const struct gm_job *j, struct gm_estimate *e)
{
    switch (est_allocator(j)) {
    case EST_ALLOC_ONCE:
        break;
    case EST_ALLOC_VLLM:
        est_assume(e, "peak reserved = allocated rounded up to 2 MiB: vLLM allocates its KV "
                      "pool once, up front (no fragmentation margin)");
        break;
    case EST_ALLOC_GGML:
        est_assume(e, "\"reserved\" = allocated rounded up to 2 MiB: ggml allocates exact "
                      "buffers (no caching allocator, no fragmentation margin)");
        break;
    case EST_ALLOC_TORCH:
        est_assume(e,
                   "peak reserved = allocated + %.2f x transient memory of the peak phase "
                   "(allocator fragmentation), rounded to 2 MiB",
                   est_fragmentation(j));
        break;
    }
}

static enum gm_status overheads(const struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    struct gm_estimate *e = cx->e;
    struct overhead o[3];
    size_t n = 0;
    bool vllm = est_allocator(j) == EST_ALLOC_VLLM;
    bool llamacpp = est_allocator(j) == EST_ALLOC_GGML;

    if (j->mode == GM_EST_WEIGHTS && j->runtime.reserve_bytes) {
        est_assume(e,
                   "the %.2f GiB reserve is an assumption for everything else "
                   "(CUDA context, activations, KV cache, fragmentation), not "
                   "a proof that the job fits",
                   (double)j->runtime.reserve_bytes / (double)GM_GIB);
        return est_add(e, GM_KIND_RESERVE, "reserve", j->runtime.reserve_bytes, GM_PHASE_ALL, false,
                       GM_EXTENT_ONE_LAYER, "--reserve-gib", err);
    }
    o[n++] = (struct overhead){GM_KIND_CUDA_CONTEXT, j->runtime.cuda_context_bytes, "CUDA context",
                               "--cuda-context"};
    if (vllm)
        o[n++] = (struct overhead){GM_KIND_NON_TORCH, e->serving.non_torch_bytes,
                                   "vLLM non-torch memory", "--non-torch"};
    else if (!llamacpp)
        o[n++] = (struct overhead){GM_KIND_WORKSPACE, j->runtime.workspace_bytes,
                                   "library workspaces", "--workspace"};
    if (!vllm && !llamacpp && j->parallel.gpus > 1 &&
        (j->mode == GM_EST_TRAIN || j->parallel.tp > 1))
        o[n++] = (struct overhead){GM_KIND_NCCL, NCCL_BYTES, "NCCL communicator buffers",
                                   "1 GiB per GPU"};
    reserved_rule(j, e);
    return add_overheads(e, o, n, j->mode == GM_EST_WEIGHTS, err);
}

enum gm_status est_stage_runtime(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    struct gm_estimate *e = cx->e;
    struct gm_est_layout *l = &e->layout;
    uint64_t outside;
    enum gm_status st;

    if (j->mode == GM_EST_TRAIN && j->memory.paged_optimizer) {
        e->pageable_bytes = gm_estimate_kind_bytes(e, GM_KIND_OPTIMIZER_STATE);
        est_assume(e,
                   "paged optimizer: its state (%llu bytes) lives in CUDA unified memory and "
                   "pages to host memory under pressure; the figures assume it stays resident",
                   (unsigned long long)e->pageable_bytes);
    }
    if ((st = overheads(cx, err)) != GM_OK)
        return st;
    /* the weights one device holds, in whatever form the stages left them */
    e->weight_bytes = gm_add_sat(gm_add_sat(gm_estimate_kind_bytes(e, GM_KIND_WEIGHTS),
                                            gm_estimate_kind_bytes(e, GM_KIND_MASTER_WEIGHTS)),
                                 gm_estimate_kind_bytes(e, GM_KIND_ADAPTERS));
    est_figures(e, est_fragmentation(j));
    outside = est_outside_bytes(e);
    e->device_bytes = gm_add_sat(e->peak_reserved_bytes, outside);
    if (l->n_groups == 0) {
        struct gm_device_group *g = &l->groups[l->n_groups++];
        snprintf(g->role, sizeof g->role, "all");
        g->first_rank = 0;
        g->count = l->gpus ? l->gpus : 1;
        g->allocated_bytes = e->peak_allocated_bytes;
        g->reserved_bytes = e->peak_reserved_bytes;
    }
    for (size_t i = 0; i < l->n_groups; i++)
        l->groups[i].device_bytes = gm_add_sat(l->groups[i].reserved_bytes, outside);
    if (e->device_bytes == UINT64_MAX || e->peak_allocated_bytes == UINT64_MAX)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "the estimate exceeds 2^64 bytes: inputs are absurd");
    return GM_OK;
}
