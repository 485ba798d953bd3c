/* SPDX-License-Identifier: MIT */
/* cublas.c - PyTorch's cuBLAS workspaces: how big one is, how many a job holds, and whether
 * they are inside the caching allocator.  One rule for every PyTorch job the estimate
 * models: training (stage_train.c, replayed by step_alloc.c), transformers' inference
 * (stage_infer.c) and vLLM's profile run (stage_engine.c). */
#include "estimate/estimate_int.h"

#include <stdio.h>

/* PyTorch's cuBLAS workspace on one GPU: cuBLAS gets it from the caching allocator the first
 * time a handle is obtained on a stream, before its first GEMM (getCurrentCUDABlasHandle ->
 * setWorkspaceForHandle -> getNewWorkspace: "CUDACachingAllocator::get()->allocate(
 * getChosenWorkspaceSize())"), and it stays for the life of the process; its size, without
 * CUBLAS_WORKSPACE_CONFIG, is ":4096:2:16:8" (2 x 4096 KiB + 8 x 16 KiB) and 32 MiB on compute
 * capability 9.0 ("32MiB for Hopper", parseChosenWorkspaceSize,
 * aten/src/ATen/cuda/CublasHandlePool.cpp @ 26a3905; the Hopper default since pytorch/pytorch
 * PR #91564, merged 2023-01-03, PyTorch 2.0).  A GPU of unknown compute capability takes the
 * smaller default. */
uint64_t est_torch_cublas_workspace_bytes(const struct est_ctx *cx)
{
    return cx->job->gpu.sm == 90 ? 32 * GM_MIB : 2 * 4096 * 1024 + 8 * 16 * 1024;
}

/* The workspaces are keyed by (handle, stream) ("cublas_handle_stream_to_workspace", a map from
 * std::make_tuple(handle, stream), CublasHandlePool.cpp @ 26a3905), and a handle belongs to a
 * thread: getCurrentCUDABlasHandle reserves it through a "thread_local" PoolWindow of the
 * DeviceThreadHandlePool, which hands a thread its own handle per device while the thread
 * lives (aten/src/ATen/cuda/detail/DeviceThreadHandles.h @ 1d8b3cc).  A forward runs its GEMMs on
 * the calling thread; autograd runs a CUDA backward on its device thread (Engine::
 * start_device_threads, one thread per device, torch/csrc/autograd/engine.cpp @ e1253a9), the
 * recomputation of checkpointed layers included, so training takes a second handle, and with
 * it a second workspace on the same stream, at the first GEMM of the first backward (the
 * lm_head's gradient).  Inference (transformers' generate, vLLM's workers) runs every GEMM on
 * one thread and one stream: one workspace. */
unsigned est_torch_cublas_handles(const struct gm_job *j)
{
    return j->mode == GM_EST_TRAIN ? 2 : 1;
}

/* PyTorch takes the workspaces from its caching allocator since pytorch/pytorch PR #83461
 * ("Explicitly set the workspace for cuBLAS handles", August 2022, PyTorch 1.13); before it
 * cuBLAS allocated the workspace of each handle itself, outside the allocator, with the same
 * default configuration (PR #89027 chose ":4096:2:16:8" to match "the default workspace size
 * ... before the explicit allocation change").  Where --torch-version is not given, the
 * current release. */
bool est_torch_cublas_in_allocator(const struct gm_job *j)
{
    return !j->stack.torch || j->stack.torch >= GM_VERSION(1, 13, 0);
}

enum gm_status est_add_torch_workspaces(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    unsigned n = est_torch_cublas_handles(j);
    uint64_t ws = est_torch_cublas_workspace_bytes(cx);
    char note[GM_EST_NOTE_MAX];
    if (!est_torch_cublas_in_allocator(j))
        return GM_OK; /* cuBLAS's own: the runtime stage puts them outside */
    if (n > 1)
        snprintf(note, sizeof note,
                 "%u x %.3f MiB from the caching allocator, kept: the forward's handle from its "
                 "first GEMM, autograd's device thread's from the first backward's",
                 n, (double)ws / (double)GM_MIB);
    else
        snprintf(note, sizeof note, "%.3f MiB from the caching allocator at the first GEMM, kept",
                 (double)ws / (double)GM_MIB);
    return est_add(cx->e, GM_KIND_TORCH_WORKSPACE, EST_TORCH_WORKSPACE_NAME, (uint64_t)n * ws,
                   j->mode == GM_EST_TRAIN ? GM_EST_PHASE_TRAIN_ALL : GM_EST_PHASE_INFER_ALL, false,
                   GM_EXTENT_ONE_LAYER, note, err);
}
