/* SPDX-License-Identifier: MIT */
/* stage_runtime.c - the runtime stage: what lives outside PyTorch's caching allocator, and
 * the three figures.
 *
 * Outside the allocator, on every device:
 *  - the CUDA context with its loaded kernels (--cuda-context).  With lazy module loading
 *    (CUDA >= 11.7; PyTorch sets CUDA_MODULE_LOADING=LAZY since 1.13, the driver default
 *    since CUDA 12.2) kernels load as they are first used: 287 MB measured in PyTorch
 *    PR #85692, about 300-400 MiB (pytorch#107667), 450 MiB assumed.  Before CUDA 11.7
 *    every kernel of the binary for the GPU's architecture loads at start-up: 1343 MiB on
 *    the HF docs' V100 (CUDA 11.2), about 1.0 GiB on Volta/Turing with CUDA 10
 *    (pytorch#28394), 1.0-1.5 GiB on Ampere with CUDA 11.0/11.1 (pytorch#49877, #54564);
 *  - library memory outside the allocator (--workspace, none by default), and before PyTorch
 *    1.13 the cuBLAS workspaces cuBLAS allocated itself (PyTorch's, inside the allocator, from
 *    1.13: cublas.c);
 *  - NCCL's device memory, by the communicators a rank holds (one per process group it
 *    talks in: data parallel, tensor parallel, pipeline neighbours, expert parallel; vLLM
 *    keeps a pynccl communicator beside torch's group) and NCCL's own rule for each: its
 *    P2P connections' buffers by channels and ranks, its small per-channel allocations under
 *    cuMem, NVLink SHARP buffers, and once per process the device code NCCL loads
 *    (est_nccl_comm_bytes below), and on vLLM V0's rank 0 the receive connections of the
 *    logits' gather (est_nccl_gather_root_bytes); --nccl SIZE per communicator replaces the
 *    rule;
 *  - vLLM's non-torch memory beside its budget (stage_engine.c);
 *  - bitsandbytes' paged optimizer state (cudaMallocManaged; the training stage).
 * llama.cpp has no caching allocator and no workspace of its own beyond the context.  In
 * the weights-only estimate a flat --reserve-gib, when given, stands for everything that is
 * not the weights.
 *
 * Figures: peak allocated is the largest phase; peak reserved adds the allocator's
 * fragmentation on transient memory (none where buffers are exact); device used adds the
 * outside components.  Devices of one group (pipeline stage) get the same overheads.
 * Ranges: the fragmentation factor, the context and the NCCL buffers are uncertain unless
 * given (est_uncertain()). */
#include "estimate/estimate_int.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

/* vLLM 0.4 to 0.5.0 hold a third communicator beside pynccl's and the tensor-parallel device
 * group's: the worker's start-up all-reduces a one-element tensor on the default (world)
 * process group ("A small all_reduce for warmup": init_worker_distributed_environment,
 * vllm/worker/worker.py in Snowflake-Labs/vllm @ 016e256, a 0.4.1-0.4.2 copy, and, by 0.5.0,
 * init_distributed_environment in vllm/distributed/parallel_state.py), which makes PyTorch
 * initialise NCCL for that group, a ProcessGroupNCCL of its own apart from the new_group()
 * the tensor-parallel layers all-reduce and gather in (initialize_model_parallel,
 * parallel_state.py in Snowflake-Labs/vllm @ 06609d9), and every step of it comes after
 * init_device's free-memory baseline.  From 0.5.1 the groups are GroupCoordinators and
 * nothing is read to warm the world group up (kept at two); before 0.4 (CuPy's communicator
 * in place of pynccl) not read either. */
static uint64_t vllm_world(const struct gm_job *j)
{
    return (j->parallel.tp ? j->parallel.tp : 1) * (j->parallel.pp ? j->parallel.pp : 1);
}

static bool vllm_world_warmup(const struct gm_job *j)
{
    uint32_t v = j->stack.vllm;
    return est_allocator(j) == EST_ALLOC_VLLM && v >= GM_VERSION(0, 4, 0) &&
           v < GM_VERSION(0, 5, 1) && vllm_world(j) > 1;
}

/* One group more in nccl_groups' arrays of EST_NCCL_MAX_COMMS: 'r' ranks, 'a' apart.  The cap
 * holds every job today (estimate_int.h); a group added past it is a programmer error. */
static void add_group(uint64_t *ranks, uint64_t *apart, size_t *n, uint64_t r, uint64_t a)
{
    assert(*n < EST_NCCL_MAX_COMMS);
    apart[*n] = a;
    ranks[(*n)++] = r;
}

/* The NCCL communicators of one rank, one per process group it talks in: the ranks of each
 * group ('ranks') and how far apart in the global order its ranks are ('apart'), room for
 * EST_NCCL_MAX_COMMS each; returns how many.  A node holds gpus_per_node / apart of a group's
 * ranks.  Tensor parallelism is innermost (Megatron's order "tp-cp-ep-dp-pp"), so the
 * data-parallel group's ranks are tp apart, and so are the expert-parallel group's: Megatron
 * builds that group with a RankGenerator of the experts' tensor parallelism, which is the
 * model's unless given ("if expert_tensor_parallel_size is None: expert_tensor_parallel_size =
 * tensor_model_parallel_size", initialize_model_parallel, NVIDIA/Megatron-LM
 * megatron/core/parallel_state.py @ 00caa53), and ep within it before dp.
 *
 * Pipeline parallelism is outermost in every stack read, so a pipeline group's ranks are one
 * stage's ranks apart: tp x dp (context parallelism counted in dp) in training, tp in the
 * serving engines, whose replicas are jobs of their own.  Megatron's order ends in pp
 * (initialize_model_parallel's 16-GPU example at tp 2, pp 4: "[g0, g4, g8, g12]", @ 00caa53);
 * torchtitan's ParallelDims.build_mesh unflattens the world with "pp" first and "tp" last
 * (pytorch/torchtitan torchtitan/distributed/parallel_dims.py @ 0119de1); DeepSpeed's
 * PipeDataParallelTopology has axes ['pipe', 'data'], "lower-volume pipeline communications to
 * use low-bandwidth inter-node links" (microsoft/DeepSpeed deepspeed/runtime/pipe/topology.py
 * @ 2eafdd3); vLLM's and SGLang's pipeline groups are "range(i, world_size,
 * num_pipeline_model_parallel_groups)", world / pp = tp apart (initialize_model_parallel in
 * vllm-project/vllm vllm/distributed/parallel_state.py @ 0030a31 and sgl-project/sglang
 * python/sglang/srt/distributed/parallel_state.py @ 0005973).  A stage as large as a node puts
 * the neighbours on different nodes. */
static size_t nccl_groups(const struct gm_job *j, uint64_t dp, uint64_t *ranks, uint64_t *apart)
{
    const struct gm_job_parallel *p = &j->parallel;
    uint64_t tp = p->tp ? p->tp : 1;
    size_t n = 0;
    /* serving engines: pynccl + torch's device group per TP group, one for the pipeline, and
     * in vLLM 0.4 to 0.5.0 the default (world) group's, which the worker warms up (above) */
    if (est_allocator(j) == EST_ALLOC_VLLM || est_allocator(j) == EST_ALLOC_SGLANG) {
        if (p->tp > 1) {
            add_group(ranks, apart, &n, p->tp, 1);
            add_group(ranks, apart, &n, p->tp, 1);
        }
        if (p->pp > 1) {
            add_group(ranks, apart, &n, p->pp, tp);
        }
        if (vllm_world_warmup(j)) {
            add_group(ranks, apart, &n, vllm_world(j), 1);
        }
        return n;
    }
    if (p->gpus <= 1 || (j->mode != GM_EST_TRAIN && p->tp <= 1))
        return 0;
    if (dp > 1) {
        add_group(ranks, apart, &n, dp, tp);
    }
    if (p->tp > 1) {
        add_group(ranks, apart, &n, p->tp, 1);
    }
    if (p->pp > 1) { /* torch's send/recv: one communicator per pair of neighbours */
        add_group(ranks, apart, &n, 2, tp * (dp ? dp : 1));
    }
    if (p->ep > 1) {
        add_group(ranks, apart, &n, p->ep, tp);
    }
    if (!n) {
        add_group(ranks, apart, &n, p->gpus, 1);
    }
    return n;
}

static uint64_t nccl_communicators(const struct gm_job *j, uint64_t dp)
{
    uint64_t ranks[EST_NCCL_MAX_COMMS], apart[EST_NCCL_MAX_COMMS];
    return nccl_groups(j, dp, ranks, apart);
}

/* The most threads one SM of a compute capability keeps resident (the CUDA C++ Programming
 * Guide, "Technical Specifications per Compute Capability": 1024 on 7.5, 1536 on 8.6, 8.7, 8.9
 * and 12.x, 2048 on the others from 5.0); 0 where not known. */
static unsigned max_threads_per_sm(unsigned sm)
{
    if (!sm)
        return 0;
    if (sm == 75)
        return 1024;
    if (sm == 86 || sm == 87 || sm == 89 || sm >= 120)
        return 1536;
    return 2048;
}

/* The driver's own context, before any kernel is loaded, on a catalog GPU with lazy module
 * loading: a fixed part and a part per resident thread of the device (SMs x the most threads
 * an SM keeps resident).  The driver sizes a context's local memory that way ("calculated as
 * MAX_THREADS_PER_SM x SMs x LOCAL_MEM_PER_THREAD", an NVIDIA engineer on the NVIDIA developer
 * forum, "Local memory management", t/289339; cuCtxCreate's CU_CTX_LMEM_RESIZE_TO_MAX).  The
 * two figures are read from two cards whose bare context (cudaMemGetInfo and nothing else,
 * lazy loading) ggml-org/llama.cpp PR #23604 measured: RTX PRO 6000 Blackwell (188 SMs x 1536)
 * 555 MiB, RTX 4060 Ti (34 x 1536) 107 MiB, so 448 MiB over 236,544 threads, 1986 B a thread
 * (about the 2 KiB of local memory the formula gives each), and 8 MiB beside it.  Checked on
 * two other published bare contexts, neither a validation row: an RTX 6000 Ada (142 x 1536)
 * 426 MiB (unslothai/unsloth-zoo PR #1053, torch.cuda.mem_get_info alone; 421 here) and an RTX
 * 3090 (82 x 1536) 256 MiB (invoke-ai/InvokeAI issue #9413; 247 here).  0 where the GPU's SMs
 * are not known (a capacity given, not a catalog GPU). */
#define CTX_BYTES_PER_THREAD 1986
#define CTX_FIXED_BYTES      (8 * GM_MIB)
/* the most resident threads per SM of the two measured cards (and of the two checks) */
#define CTX_MEASURED_THREADS_PER_SM 1536

static uint64_t bare_context(unsigned sms, unsigned threads_per_sm)
{
    uint64_t threads = (uint64_t)sms * threads_per_sm;
    return threads ? CTX_FIXED_BYTES + threads * CTX_BYTES_PER_THREAD : 0;
}

uint64_t est_cuda_bare_context_bytes(const struct gm_job *j)
{
    return bare_context(j->gpu.sms, max_threads_per_sm(j->gpu.sm));
}

/* The one rule for the CUDA context: its figure at the run's bound and where it comes from.
 * The device line's label, the JSON's inputs and the engines' budgets all read this.
 *  - CUDA before 11.7: every kernel loads at start-up (--cuda-context when given);
 *  - vLLM on a catalog GPU, --cuda-context not given: the driver's own context by SMs, since
 *    vLLM's non-torch memory holds the kernel modules its process loads (VLLM_KERNEL_BYTES,
 *    stage_engine.c).  On an SM of 2048 threads (7.0, 8.0, 9.0, 10.0) the per-thread figure is
 *    an extrapolation from two 1536-thread cards, and no bare context of a data-centre part
 *    was found: there the range's low end is the same SMs at 1536 threads, in case the
 *    driver's local memory does not follow the larger thread count (A100 290 MiB, H100 353;
 *    PyTorch PR #85692's lazy context with its kernels, 287,047,680 B, sits at that end);
 *  - otherwise --cuda-context (450 MiB), a context with the kernels a PyTorch job loads.  For
 *    vLLM given only a capacity that default also holds kernels vLLM's non-torch memory counts
 *    again: the device line may be high by up to est_vllm_kernel_bytes() (said in the
 *    assumptions). */
struct gm_est_context est_cuda_context(struct est_ctx *cx)
{
    const struct gm_job *j = cx->job;
    struct gm_est_context c = {0};
    bool known = est_given(j, EST_SET_CUDA_CONTEXT);
    uint32_t v = j->stack.cuda;
    unsigned tps = max_threads_per_sm(j->gpu.sm);
    uint64_t bare = bare_context(j->gpu.sms, tps);
    double point, low;
    if (v && v < GM_VERSION(11, 7, 0)) {
        /* every kernel loaded: the HF docs' V100 (Volta) 1343 MiB; Ampere about 1.45 GiB */
        c.source = known ? GM_EST_CONTEXT_GIVEN : GM_EST_CONTEXT_EAGER;
        point = known ? (double)j->runtime.cuda_context_bytes
                      : (j->gpu.sm >= 80 ? 1488.0 : 1343.0) * (double)GM_MIB;
        c.bytes = est_round(est_uncertain(cx, GM_UNCERTAIN_CUDA_CONTEXT, known, point,
                                          900.0 * (double)GM_MIB, 1640.0 * (double)GM_MIB));
        return c;
    }
    if (!known && bare && est_allocator(j) == EST_ALLOC_VLLM) {
        c.source = GM_EST_CONTEXT_DRIVER_BY_SMS;
        c.sms = j->gpu.sms;
        c.threads_per_sm = tps;
        c.extrapolated = tps > CTX_MEASURED_THREADS_PER_SM;
        low = 0.9 *
              (double)(c.extrapolated ? bare_context(c.sms, CTX_MEASURED_THREADS_PER_SM) : bare);
        c.bytes = est_round(est_uncertain(cx, GM_UNCERTAIN_CUDA_CONTEXT, false, (double)bare, low,
                                          1.2 * (double)bare));
        return c;
    }
    c.source = known ? GM_EST_CONTEXT_GIVEN : GM_EST_CONTEXT_DEFAULT;
    c.bytes = est_round(est_uncertain(cx, GM_UNCERTAIN_CUDA_CONTEXT, known,
                                      (double)j->runtime.cuda_context_bytes,
                                      287047680.0 /* PR #85692 */, 600.0 * (double)GM_MIB));
    return c;
}

uint64_t est_cuda_context_bytes(struct est_ctx *cx)
{
    return est_cuda_context(cx).bytes;
}

const char *gm_est_context_source_name(enum gm_est_context_source source)
{
    static const char *const names[GM_EST_CONTEXT__COUNT] = {"default", "given", "driver_by_sms",
                                                             "eager", "in_reserve"};
    return (unsigned)source < GM_EST_CONTEXT__COUNT ? names[source] : "?";
}

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
    char list[GM_EST_NOTE_MAX] = "", sources[160] = "";
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
static void reserved_rule(struct est_ctx *cx, struct gm_estimate *e)
{
    const struct gm_job *j = cx->job;
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
    case EST_ALLOC_SGLANG:
        est_assume(e, "peak reserved = allocated rounded up to 2 MiB: SGLang allocates its "
                      "token pool once, up front (no fragmentation margin)");
        break;
    case EST_ALLOC_TORCH:
        if (est_step_replay_applies(cx) && j->stack.transformers) {
            est_assume(e,
                       "peak reserved = max(the step replayed through the caching allocator, "
                       "allocated + %.2f x the step's transients: the HF stack's floor for "
                       "tensors the replay does not resolve), rounded to 2 MiB",
                       est_fragmentation(j));
            break;
        }
        if (est_step_replay_applies(cx)) {
            est_assume(e, "peak reserved = the step replayed through the caching allocator, "
                          "a custom training loop (with --transformers-version: the HF stack's "
                          "fragmentation floor where larger; the range's high end keeps it)");
            break;
        }
        est_assume(e,
                   "peak reserved = allocated + %.2f x %s (allocator fragmentation), rounded "
                   "to 2 MiB",
                   est_fragmentation(j),
                   j->mode == GM_EST_TRAIN ? "the step's transient memory, each tensor once"
                                           : "transient memory of the peak phase");
        break;
    }
}

bool est_no_p2p(const struct gm_job *j)
{
    return j->runtime.no_p2p || j->gpu.no_p2p;
}

/* Whether this GPU reaches other GPUs of its own node by peer access: the GPUs have it (not
 * --no-p2p, not a board without it) and the resolved layout puts more than one GPU on a node.
 * This one fact decides where NCCL keeps its buffers (its P2P transport's are on the device;
 * without it the SHM or network transport keeps them in host memory) and, with a group inside
 * one node, whether vLLM's custom all-reduce can map its peers' buffers. */
bool est_node_peers(const struct est_ctx *cx)
{
    return !est_no_p2p(cx->job) && cx->e->layout.gpus_per_node > 1;
}

/* ---- NCCL's device memory: the rule ---------------------------------------------------------
 *
 * Read in NVIDIA/nccl at its release tags (v2.18.3-1 to v2.30.7-1; file and line per figure in
 * docs/estimate.md, "NCCL's device memory").  Per GPU:
 *  - each P2P connection's buffers, allocated by the rank that owns them (its proxy,
 *    ncclP2pAllocateShareableBuffer; the peer maps them and spends nothing): a send holds
 *    ALIGN(sizeof(struct ncclSendMem), CUDA_IPC_MIN) and a receive ALIGN(sizeof(struct
 *    ncclRecvMem) + LL + LL128 + SIMPLE, CUDA_IPC_MIN) (src/transport/p2p.cc p2pSendSetup,
 *    p2pRecvSetup; the two headers are one 4 KiB MEM_ALIGN page each, src/include/comm.h;
 *    CUDA_IPC_MIN 2 MiB; the buffer sizes are computeBuffSizes' defaults, src/init.cc), 2 + 10
 *    MiB a pair (P2P read, sm80 over NVLink, moves SIMPLE to the send side: 6 + 6, the same);
 *  - per channel, at two ranks one send and one receive to the peer (ring and tree share
 *    them); from three ranks the ring's pair and the intra-node tree chain's second pair, 24
 *    MiB for a middle rank, 14 for the chain's leaf (derived from the connect code, not
 *    measured): the point and the high end count two pairs, the low end one (NCCL from 2.22
 *    with cuMem connects an algorithm at its first use, src/init.cc runtimeConn, and the ring
 *    may be all a job uses);
 *  - channels: 24 coll channels over NVLink on A100/H100 ("24 coll channels, ..., 32 p2p
 *    channels" in NCCL's INFO logs), 2 over PCIe ("Channel 00/02");
 *  - without peer access (the SHM transport) the buffers are host shared memory
 *    (src/transport/shm.cc): none on the device; with one GPU per node every connection goes
 *    through the network transport, none or, with GPUDirect RDMA, SIMPLE + LL128 (8.69 MiB)
 *    a connection (sendProxyConnect/recvProxyConnect, src/transport/net.cc @ 022c022): the range
 *    allows 64 MiB a communicator, a guess (the network channels NCCL picks are not derived);
 *  - with cuMem (NCCL_CUMEM_ENABLE, on by default from 2.19, src/misc/cudawrap.cc) every device
 *    allocation is rounded up to the 2 MiB granule (ncclCuMemAlloc, src/include/alloc.h),
 *    so the three small ones initChannel makes per channel up to the p2p channels
 *    (nextPow2(channels)) and devCommAndChans with its rank arrays hold 2 MiB x (3 x
 *    nextPow2(channels) + 2); under 1 MiB with cudaMalloc (none counted).  vLLM turned cuMem
 *    off from 0.5.0 (PR #5091, worker_base.py) until PR #24141 (merged 2025-09-03; 0.11 here);
 *    before 0.5.0 its pynccl loaded vllm-nccl's NCCL 2.18 and PyTorch 2.1's NCCL was 2.18, both
 *    off by default (0.4.1 to 0.4.3's PyTorch 2.2/2.3 group is on: not told apart here), so
 *    every vLLM before 0.11 is off; SGLang turns it off; PyTorch's own NCCL has it on from 2.19
 *    (PyTorch 2.2);
 *  - NVLink SHARP (NVLS) on sm90 and later over NVSwitch with more than two GPUs of the group
 *    on the node (the gpuCount <= 2 return of ncclNvlsInit, src/transport/nvls.cc): per GPU
 *    16 channels x 2 x a buffer x the GPUs, the buffer 1 MiB from NCCL 2.22 (nvlsChunkSize
 *    128 KiB x NCCL_STEPS 8), 1 + 2 MiB in 2.21 and 4 + 2 MiB to 2.20 (SIMPLE + the 2 MiB
 *    NVLS_MEM_ALIGN_SIZE): the point takes 2.22's, the high end 2.20's (which NCCL the job
 *    loads is not an input);
 *  - once per process, the device code: ncclInitKernelsForDevice calls cudaFuncGetAttributes on
 *    every NCCL kernel at the first communicator's init (src/enqueue.cc), which loads NCCL's
 *    whole device image even under lazy loading.  Its size is no figure of the source: 125
 *    MiB is read from vLLM starts without peer access, where the rest of the rule is zero (row
 *    v025 of vllm_startup_logs.csv, its fit row; 104 to 128 MiB over v012, v025, v026 are the
 *    range). */
#define NCCL_IPC_GRANULE     (2 * GM_MIB)           /* CUDA_IPC_MIN */
#define NCCL_CONN_HEADER     4096ULL                /* ncclSendMem / ncclRecvMem, MEM_ALIGN */
#define NCCL_LL_BYTES        (8ULL * 512 * 8 * 16)  /* 524,288 */
#define NCCL_LL128_BYTES     (120ULL * 640 * 8 * 8) /* 4,915,200 */
#define NCCL_SIMPLE_BYTES    (4 * GM_MIB)           /* DEFAULT_BUFFSIZE */
#define NCCL_CHANNELS_NVLINK 24
#define NCCL_CHANNELS_PCIE   2
#define NCCL_CUMEM_GRANULE   (2 * GM_MIB)
#define NCCL_NVLS_CHANNELS   16
#define NCCL_LIB_BYTES       (125 * GM_MIB)
#define NCCL_LIB_LOW_BYTES   (104 * GM_MIB)
#define NCCL_LIB_HIGH_BYTES  (128 * GM_MIB)
/* What a communicator over NVLink holds beyond the buffers derived above, as NVIDIA/nccl#964
 * measured it (4 A100s over NVLink, PyTorch, a 4 MB all-reduce in each group, rank 0's memory
 * for each group after the first, August 2023, so NCCL 2.18 or before, cuMem off): 544 MB (MiB
 * as nvidia-smi prints) for every 2-rank group and 688 for every group of 3 or 4 ranks, where
 * the buffers are 288 and 576 MiB.  What the 256 and 112 MiB are is not read in the source;
 * they are taken from that issue, which is no validation row, and judged on the NVLink rows of
 * tests/data/validation (fms-acceleration's two-A100 runs, vLLM's tp 2 and 8 H100 starts). The
 * low end leaves them out. */
#define NCCL_NVLINK_PAIR_EXTRA  (256 * GM_MIB)
#define NCCL_NVLINK_GROUP_EXTRA (112 * GM_MIB)
/* More is seen over NVLink than even that: NVIDIA/nccl#864, about 1.6 GB for one communicator
 * and an all-reduce (setup not stated); v002's two H100s at tp 2 (vLLM 0.6.5) print 3.58 GiB of
 * non-torch memory, 2.2 GiB above what gpumem charges them; the tp 8 H100 starts v036/v071 imply
 * 260-344 MiB more than the rule.  So the range's high end keeps 2 GiB a communicator over
 * NVLink where the rule's high end is below it, the flat figure gpumem charged before. */
#define NCCL_NVLINK_HIGH_BYTES (2 * GM_GIB)
/* The row the device code's size is read from, named by the assumption line. */
#define NCCL_LIB_FIT_ON "v025 of vllm_startup_logs.csv"

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) / a * a;
}

uint64_t est_nccl_pair_bytes(void)
{
    uint64_t send = align_up(NCCL_CONN_HEADER, NCCL_IPC_GRANULE);
    uint64_t recv = align_up(
        NCCL_CONN_HEADER + NCCL_LL_BYTES + NCCL_LL128_BYTES + NCCL_SIMPLE_BYTES, NCCL_IPC_GRANULE);
    return send + recv;
}

unsigned est_nccl_channels(enum gm_gpu_link link)
{
    return link == GM_GPU_LINK_NVLINK ? NCCL_CHANNELS_NVLINK : NCCL_CHANNELS_PCIE;
}

static uint64_t next_pow2(uint64_t v)
{
    uint64_t p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

uint64_t est_nccl_comm_bytes(const struct est_nccl_comm *c, enum est_bound bound)
{
    uint64_t ch = est_nccl_channels(c->link), bytes = 0;
    if (c->local_ranks < 2 || !c->p2p) /* the low end without cuMem's granules, as below */
        return c->cumem && bound != EST_LOW ? NCCL_CUMEM_GRANULE * (3 * next_pow2(ch) + 2) : 0;
    /* one (send, receive) pair a channel at two ranks; the tree's second from three */
    bytes = ch * est_nccl_pair_bytes() * (c->local_ranks > 2 && bound != EST_LOW ? 2 : 1);
    if (c->cumem && bound != EST_LOW)
        bytes += NCCL_CUMEM_GRANULE * (3 * next_pow2(ch) + 2);
    if (c->link == GM_GPU_LINK_NVLINK && bound != EST_LOW)
        bytes += c->local_ranks > 2 ? NCCL_NVLINK_GROUP_EXTRA : NCCL_NVLINK_PAIR_EXTRA;
    if (c->sm >= 90 && c->link == GM_GPU_LINK_NVLINK && c->local_ranks > 2 && bound != EST_LOW)
        bytes += NCCL_NVLS_CHANNELS * 2 * (bound == EST_HIGH ? 6 : 1) * GM_MIB * c->local_ranks;
    return bytes;
}

/* Whether this job's NCCL allocates through cuMem (above). */
static bool nccl_cumem(const struct gm_job *j)
{
    uint32_t v = j->stack.vllm;
    if (est_allocator(j) == EST_ALLOC_SGLANG)
        return false;
    if (est_allocator(j) == EST_ALLOC_VLLM && v && v < GM_VERSION(0, 11, 0))
        return false;
    return !j->stack.torch || j->stack.torch >= GM_VERSION(2, 2, 0);
}

/* ---- what a gather's root receives through: NCCL's P2P connections ------------------------
 *
 * PyTorch's ProcessGroupNCCL::gather calls torch::cuda::nccl::gather, where the root ncclRecv()s
 * from every other rank and the others ncclSend() (torch/csrc/cuda/nccl.cpp, gather,
 * pytorch/pytorch @ e6f159a).  NCCL runs send/receive on connector 1 of each channel, apart
 * from the collectives' connector 0, and marks for connection every one of the
 * p2pnChannelsPerPeer channels to that peer at the first operation, whatever its size ("P2P
 * uses only 1 connector", the point-to-point branch of taskAppend, src/enqueue.cc);
 * p2pnChannelsPerPeer is the per-peer channel count rounded up to a power of two
 * (ncclTopoComputeP2pChannels, src/graph/paths.cc), which NCCL's INFO line prints: "2 p2p
 * channels, 2 p2p channels per peer" for PCIe pairs, "32 p2p channels, 32 p2p channels per
 * peer" for A100 and H100 pairs and groups of eight over NVLink.  Each receive holds what a
 * collective's does, the header and LL + LL128 + SIMPLE in the 2 MiB IPC granule (10 MiB), less
 * SIMPLE where the peer writes nothing and the receiver reads (P2P read: "Enable P2P Read for
 * Ampere/NVLink only", compute capability 8.0 on both GPUs over NVLink, ncclTopoCheckP2p,
 * src/graph/paths.cc in NVIDIA/nccl @ 04cdb80): 6 MiB.  The senders hold a 2 MiB send
 * connection a channel (6 MiB in read mode); the figure is the root's.  Without peer access
 * the SHM transport's buffers are host memory, and peers on other nodes go through the network
 * transport: none counted. */
#define NCCL_P2P_CHANNELS_PER_PEER_NVLINK 32
#define NCCL_P2P_CHANNELS_PER_PEER_PCIE   2

unsigned est_nccl_p2p_channels_per_peer(enum gm_gpu_link link)
{
    return link == GM_GPU_LINK_NVLINK ? NCCL_P2P_CHANNELS_PER_PEER_NVLINK
                                      : NCCL_P2P_CHANNELS_PER_PEER_PCIE;
}

uint64_t est_nccl_gather_root_bytes(const struct est_nccl_comm *c)
{
    bool read = c->link == GM_GPU_LINK_NVLINK && c->sm == 80;
    uint64_t recv = align_up(NCCL_CONN_HEADER + NCCL_LL_BYTES + NCCL_LL128_BYTES +
                                 (read ? 0 : NCCL_SIMPLE_BYTES),
                             NCCL_IPC_GRANULE);
    if (c->local_ranks < 2 || !c->p2p)
        return 0;
    return (c->local_ranks - 1) * est_nccl_p2p_channels_per_peer(c->link) * recv;
}

uint64_t est_nccl_lib_bytes(enum est_bound bound)
{
    return bound == EST_LOW    ? NCCL_LIB_LOW_BYTES
           : bound == EST_HIGH ? NCCL_LIB_HIGH_BYTES
                               : NCCL_LIB_BYTES;
}

/* vLLM's V0 rank 0 gathers the logits over the tensor-parallel group (above): its receive
 * connections, the same at every end of the range; 0 for the other ranks and other jobs. */
/* The job's communicator of a group of 'ranks' ranks, 'on_node' of which fit on a node: its
 * ranks on this node, the link between them, and what NCCL's setup of the job says. */
static struct est_nccl_comm nccl_comm_of(const struct gm_job *j, uint64_t ranks, uint64_t on_node)
{
    return (struct est_nccl_comm){
        .local_ranks = ranks < on_node ? ranks : on_node,
        .link = j->gpu.link,
        .sm = j->gpu.sm,
        .p2p = !est_no_p2p(j),
        .cumem = nccl_cumem(j),
    };
}

/* The resolved layout's GPUs per node (1 when it says none). */
static uint64_t nccl_gpus_per_node(const struct est_ctx *cx)
{
    return cx->e->layout.gpus_per_node ? cx->e->layout.gpus_per_node : 1;
}

static uint64_t nccl_gather(const struct gm_job *j, uint64_t gpn)
{
    struct est_nccl_comm c = nccl_comm_of(j, j->parallel.tp ? j->parallel.tp : 1, gpn);
    return est_vllm_rank0_gathers(j) ? est_nccl_gather_root_bytes(&c) : 0;
}

/* The rule at one end of the range: the device code once and every communicator's memory. */
static uint64_t nccl_rule(struct est_ctx *cx, const uint64_t *ranks, const uint64_t *apart,
                          size_t n, enum est_bound b)
{
    const struct gm_job *j = cx->job;
    uint64_t gpn = nccl_gpus_per_node(cx);
    uint64_t bytes = est_nccl_lib_bytes(b);
    for (size_t i = 0; i < n; i++) {
        struct est_nccl_comm c = nccl_comm_of(j, ranks[i], gpn / apart[i] ? gpn / apart[i] : 1);
        uint64_t comm = est_nccl_comm_bytes(&c, b);
        /* the high end over NVLink keeps what the rule does not explain (above) */
        if (b == EST_HIGH && c.p2p && c.local_ranks > 1 && c.link == GM_GPU_LINK_NVLINK &&
            comm < NCCL_NVLINK_HIGH_BYTES)
            comm = NCCL_NVLINK_HIGH_BYTES;
        bytes = gm_add_sat(bytes, comm);
        /* one GPU of the group per node: its network transport (above) */
        if (c.local_ranks < 2 && c.p2p && b == EST_HIGH)
            bytes = gm_add_sat(bytes, 64 * GM_MIB);
    }
    return gm_add_sat(bytes, nccl_gather(j, gpn));
}

uint64_t est_nccl_gather_bytes(struct est_ctx *cx)
{
    const struct gm_job *j = cx->job;
    uint64_t ranks[EST_NCCL_MAX_COMMS], apart[EST_NCCL_MAX_COMMS];
    size_t comms = nccl_groups(j, est_data_parallel(j), ranks, apart);
    if (!comms || est_allocator(j) == EST_ALLOC_GGML || est_given(j, EST_SET_NCCL))
        return 0;
    return nccl_gather(j, nccl_gpus_per_node(cx));
}

uint64_t est_nccl_bytes(struct est_ctx *cx)
{
    const struct gm_job *j = cx->job;
    uint64_t ranks[EST_NCCL_MAX_COMMS], apart[EST_NCCL_MAX_COMMS];
    size_t comms = nccl_groups(j, est_data_parallel(j), ranks, apart);
    if (!comms || est_allocator(j) == EST_ALLOC_GGML)
        return 0;
    if (est_given(j, EST_SET_NCCL))
        return gm_mul_sat(j->runtime.nccl_bytes, comms);
    return est_round(est_uncertain(cx, GM_UNCERTAIN_NCCL, false,
                                   (double)nccl_rule(cx, ranks, apart, comms, EST_POINT),
                                   (double)nccl_rule(cx, ranks, apart, comms, EST_LOW),
                                   (double)nccl_rule(cx, ranks, apart, comms, EST_HIGH)));
}

/* AsyncTP's SymmetricMemory workspace: one buffer per TP group, grown to the largest request
 * of a fused op (torch/distributed/_symmetric_memory/__init__.py get_symm_mem_workspace):
 * an all-gather matmul asks for one rank's input shard, a matmul reduce-scatter for two
 * output chunks (_pipelined_produce_and_all2all's double buffer), each [tokens / tp, hidden]
 * in the activations' dtype under sequence parallelism, so the reduce-scatter's 2 x tokens /
 * tp x hidden sets it.  CUDASymmetricMemoryAllocator::alloc
 * (torch/csrc/distributed/c10d/CUDASymmetricMemory.cu at pytorch b4258b3) rounds the buffer
 * to 16 B, adds the signal pad (signal_pad_size, 2048 B) and maps it with cuMemCreate at the
 * allocation granularity (2 MiB): on the device, outside the caching allocator and its
 * max_memory_reserved.  The fused ops' own outputs (the gathered input, the stacked partial
 * products) come from the caching allocator at the sizes the unfused collectives' outputs
 * have. */
uint64_t est_symm_mem_bytes(const struct gm_job *j, const struct gm_model *m)
{
    double ea = est_act_elem_bytes(j);
    uint64_t tp = j->parallel.tp ? j->parallel.tp : 1, buf;
    if (!j->parallel.async_tp || !m)
        return 0;
    buf = est_round(2.0 * est_tokens(j) / (double)tp * (double)m->hidden * ea);
    buf = (buf + 15) / 16 * 16 + 2048;
    return (buf + 2 * GM_MIB - 1) / (2 * GM_MIB) * (2 * GM_MIB);
}

/* AsyncTP's workspace on a line of its own: how it is sized, and that it is outside
 * reserved. */
static enum gm_status async_tp_workspace(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    uint64_t bytes = est_symm_mem_bytes(j, cx->m);
    if (!bytes)
        return GM_OK;
    est_assume(cx->e,
               "AsyncTP workspace %.0f MiB (--async-tp): 2 x tokens/tp x hidden x %.0f B + 2048 B "
               "signal pad, in 2 MiB granules; mapped by the driver, outside max_memory_reserved",
               (double)bytes / (double)GM_MIB, est_act_elem_bytes(j));
    return est_add(cx->e, GM_KIND_SYMM_MEM, gm_est_kind_name(GM_KIND_SYMM_MEM), bytes, GM_PHASE_ALL,
                   false, GM_EXTENT_ONE_LAYER, "--async-tp", err);
}

/* The device line's word for where the context comes from. */
static const char *context_label(enum gm_est_context_source source)
{
    switch (source) {
    case GM_EST_CONTEXT_EAGER:
        return "no lazy loading before CUDA 11.7";
    case GM_EST_CONTEXT_DRIVER_BY_SMS:
        return "the driver's, by SMs";
    case GM_EST_CONTEXT_DEFAULT:
    case GM_EST_CONTEXT_GIVEN:
    case GM_EST_CONTEXT_IN_RESERVE:
    case GM_EST_CONTEXT__COUNT:
        break;
    }
    return "--cuda-context";
}

/* What the context's figure rests on, where it is not plainly --cuda-context. */
static void context_assumption(struct gm_estimate *e, bool vllm, uint32_t vllm_version)
{
    const struct gm_est_context *c = &e->context;
    if (c->source == GM_EST_CONTEXT_DRIVER_BY_SMS && c->extrapolated)
        est_assume(e,
                   "CUDA context %.0f MiB: the driver's by SMs (%u x %u threads), extrapolated "
                   "from two 1536-thread cards to a 2048-thread SM; the range's low end counts "
                   "1536",
                   (double)c->bytes / (double)GM_MIB, c->sms, c->threads_per_sm);
    else if (vllm && c->source == GM_EST_CONTEXT_DEFAULT)
        est_assume(e,
                   "CUDA context %.0f MiB (--cuda-context): a capacity names no SMs, and the "
                   "default holds PyTorch's kernels, which vLLM's non-torch memory counts "
                   "again (up to %.0f MiB high)",
                   (double)c->bytes / (double)GM_MIB,
                   (double)est_vllm_kernel_bytes(vllm_version) / (double)GM_MIB);
}

/* Library memory outside the allocator: what --workspace gives (none by default: PyTorch
 * takes its cuBLAS workspaces from the caching allocator, est_add_torch_workspaces(), and its
 * cuDNN workspaces too; no source names a library's own memory beyond them), and before PyTorch
 * 1.13 the cuBLAS workspaces, which cuBLAS then allocated itself (cublas.c). */
static struct overhead outside_workspaces(struct est_ctx *cx)
{
    const struct gm_job *j = cx->job;
    struct overhead o = {GM_KIND_WORKSPACE, j->runtime.workspace_bytes, "library workspaces",
                         "--workspace"};
    if (!est_torch_cublas_in_allocator(j)) {
        o.bytes = gm_add_sat(o.bytes, (uint64_t)est_torch_cublas_handles(j) *
                                          est_torch_cublas_workspace_bytes(cx));
        o.source = j->runtime.workspace_bytes ? "--workspace, cuBLAS's own before PyTorch 1.13"
                                              : "cuBLAS's own before PyTorch 1.13";
    }
    return o;
}

static enum gm_status overheads(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    struct gm_estimate *e = cx->e;
    struct overhead o[5];
    enum gm_status st;
    size_t n = 0;
    bool vllm = est_allocator(j) == EST_ALLOC_VLLM;
    bool llamacpp = est_allocator(j) == EST_ALLOC_GGML;
    uint64_t comms = nccl_communicators(j, est_data_parallel(j));
    char nccl_src[64];

    if (j->mode == GM_EST_WEIGHTS && j->runtime.reserve_bytes) {
        est_assume(e,
                   "the %.2f GiB reserve is an assumption for everything else "
                   "(CUDA context, activations, KV cache, fragmentation), not "
                   "a proof that the job fits",
                   (double)j->runtime.reserve_bytes / (double)GM_GIB);
        e->context.source = GM_EST_CONTEXT_IN_RESERVE;
        return est_add(e, GM_KIND_RESERVE, "reserve", j->runtime.reserve_bytes, GM_PHASE_ALL, false,
                       GM_EXTENT_ONE_LAYER, "--reserve-gib", err);
    }
    e->context = est_cuda_context(cx);
    o[n++] = (struct overhead){GM_KIND_CUDA_CONTEXT, e->context.bytes, "CUDA context",
                               context_label(e->context.source)};
    context_assumption(e, vllm, j->stack.vllm);
    if (j->gpu.catalog_bytes)
        est_assume(e,
                   "GPU: %s (compute capability %u.%u, %u SMs) with the total given, %.2f GiB "
                   "(--gpu-memory; the catalog's is %.2f GiB)",
                   j->gpu.label, j->gpu.sm / 10, j->gpu.sm % 10, j->gpu.sms,
                   (double)j->gpu.memory_bytes / (double)GM_GIB,
                   (double)j->gpu.catalog_bytes / (double)GM_GIB);
    if (vllm)
        o[n++] = (struct overhead){GM_KIND_NON_TORCH, e->serving.non_torch_bytes,
                                   "vLLM non-torch memory", "--non-torch"};
    else if (!llamacpp)
        o[n++] = outside_workspaces(cx);
    if (!llamacpp && comms) {
        if (j->gpu.no_p2p && !j->runtime.no_p2p)
            est_assume(e,
                       "%s: no peer access between the boards with NVIDIA's driver, so NCCL "
                       "keeps its buffers in host memory (as --no-p2p)",
                       j->gpu.label);
        if (est_given(j, EST_SET_NCCL))
            snprintf(nccl_src, sizeof nccl_src, "%llu communicator%s x %.0f MiB",
                     (unsigned long long)comms, comms > 1 ? "s" : "",
                     (double)j->runtime.nccl_bytes / (double)GM_MIB);
        else
            snprintf(nccl_src, sizeof nccl_src, "NCCL's rule, %llu communicator%s",
                     (unsigned long long)comms, comms > 1 ? "s" : "");
        if (!est_given(j, EST_SET_NCCL))
            est_assume(e,
                       "NCCL: %.0f MiB of device code once per process, measured from one log "
                       "(row %s), not read in code; the buffers by NCCL's rule (%u channels, "
                       "%s)",
                       (double)est_nccl_lib_bytes(EST_POINT) / (double)GM_MIB, NCCL_LIB_FIT_ON,
                       est_nccl_channels(j->gpu.link),
                       est_no_p2p(j)   ? "no peer access: in host memory"
                       : nccl_cumem(j) ? "cuMem's 2 MiB granules"
                                       : "cudaMalloc");
        e->layout.nccl_communicators = comms;
        o[n++] =
            (struct overhead){GM_KIND_NCCL, est_nccl_bytes(cx), "NCCL device memory", nccl_src};
    }
    reserved_rule(cx, e);
    if ((st = add_overheads(e, o, n, j->mode == GM_EST_WEIGHTS, err)) != GM_OK)
        return st;
    return async_tp_workspace(cx, err);
}

/* The fragmentation factor beside a replayed step ('f' at the run's bound): the floor of the
 * HF stack (an HF model's code, --transformers-version given), whose Trainer, kernels and
 * per-op tensors hold memory the replay's tensors do not; none for a custom training loop;
 * the range's low end is the replay alone, its high end keeps the floor whatever the stack. */
static double floor_factor(const struct est_ctx *cx, double f)
{
    if (cx->bound == EST_LOW)
        return 0;
    if (cx->bound == EST_HIGH)
        return f;
    return cx->job->stack.transformers ? f : 0;
}

/* The assumption that says how the replay reached peak reserved. */
static void replay_note(struct gm_estimate *e, bool floor_binds)
{
    const struct gm_est_replay *r = &e->replay;
    char cap[48] = "", streams[96] = "";
    const char *wrap = !r->wrap         ? ""
                       : r->wrap_synced ? "FSDP1's wrap (sync_module_states' broadcast), then "
                                        : "FSDP1's wrap (no sync_module_states), then ";
    if (r->capacity_bytes)
        snprintf(cap, sizeof cap, " in %.2f GiB", (double)r->capacity_bytes / (double)GM_GIB);
    if (r->stream_reserved[GM_EST_STREAM_UNSHARD] || r->stream_reserved[GM_EST_STREAM_REDUCE])
        snprintf(streams, sizeof streams, " (all-gather / reduce-scatter streams: %.2f / %.2f GiB)",
                 (double)r->stream_reserved[GM_EST_STREAM_UNSHARD] / (double)GM_GIB,
                 (double)r->stream_reserved[GM_EST_STREAM_REDUCE] / (double)GM_GIB);
    if (r->oom)
        est_assume(e,
                   "step replay: a request fails%s even after freeing the cache; without the "
                   "limit %s%llu steps, %llu tensors, %llu segments: %.2f GiB reserved%s; the %s "
                   "decides",
                   cap, wrap, (unsigned long long)r->steps, (unsigned long long)r->mallocs,
                   (unsigned long long)r->segments, (double)r->reserved_peak / (double)GM_GIB,
                   streams, floor_binds ? "floor" : "replay");
    else
        est_assume(e,
                   "step replay: %s%llu steps, %llu tensors, %llu segments, %llu OOM retries%s: "
                   "%.2f GiB reserved%s; the %s decides",
                   wrap, (unsigned long long)r->steps, (unsigned long long)r->mallocs,
                   (unsigned long long)r->segments, (unsigned long long)r->retries, cap,
                   (double)r->reserved_peak / (double)GM_GIB, streams,
                   floor_binds ? "floor" : "replay");
    if (r->oom && r->failed.request) {
        char layer[24] = "";
        if (r->failed.layer)
            snprintf(layer, sizeof layer, " layer %u", r->failed.layer);
        est_assume(e,
                   "step replay: the request that fails is %.2f GiB for %s, step %u%s %s (%s "
                   "stream), with %.2f GiB of tensors live",
                   (double)r->failed.request / (double)GM_GIB,
                   r->failed.kind == GM_KIND__COUNT ? "a temporary"
                                                    : gm_est_kind_name(r->failed.kind),
                   r->failed.step + 1, layer, gm_est_replay_at_name(r->failed.at),
                   gm_est_stream_name(r->failed.stream), (double)r->failed.live / (double)GM_GIB);
        est_assume(e,
                   "step replay: its cache freed, the allocator kept %.2f GiB reserved, "
                   "%.2f GiB allocated, the largest free block %.2f GiB: %s",
                   (double)r->failed.reserved / (double)GM_GIB,
                   (double)r->failed.allocated / (double)GM_GIB,
                   (double)r->failed.largest_free / (double)GM_GIB,
                   est_replay_failed_on_layout(r) ? "room enough, not in one block (fragmentation)"
                                                  : "more in use than the GPU holds");
        if (est_replay_failed_on_layout(r) && r->failed.segment && r->failed.segment_live) {
            char pin[96] = "temporaries of the step";
            if (r->failed.pin_kind != GM_KIND__COUNT) {
                char of[24] = "";
                if (r->failed.pin_layer)
                    snprintf(of, sizeof of, ", layer %u", r->failed.pin_layer);
                snprintf(pin, sizeof pin, "the largest: %.2f GiB of %s%s",
                         (double)r->failed.pin_bytes / (double)GM_GIB,
                         gm_est_kind_name(r->failed.pin_kind), of);
            }
            est_assume(
                e,
                "step replay: that block lies in a %.2f GiB segment held by %.2f GiB in use, "
                "which keep it from being freed or used whole (%s)",
                (double)r->failed.segment / (double)GM_GIB,
                (double)r->failed.segment_live / (double)GM_GIB, pin);
        }
    }
    if (r->loss_cache_block) /* measured, not read in code: said so (docs/estimate.md) */
        est_assume(e,
                   "step replay, FOAK's loss: one fp32 copy of the logits (%.2f GiB) more kept "
                   "cached: measured on FOAK runs (" EST_LOSS_CACHE_BLOCK_FIT_ON
                   ".csv), not read in code; --no-loss-cache-block: none",
                   (double)r->loss_cache_block / (double)GM_GIB);
    else if (r->loss_cache_no_room)
        est_assume(e, "step replay, FOAK's loss: no room on the GPU for the fp32 logits-sized "
                      "cache block measured on FOAK runs (a cudaMalloc would fail and the cache be "
                      "freed): none kept");
    if (r->at_capacity)
        est_assume(e,
                   "at the capacity: the floor's %.2f GiB is more than the GPU holds; there a "
                   "cudaMalloc fails and the allocator frees its cache and retries, so reserved "
                   "stops at %.2f GiB",
                   (double)r->floor_bytes / (double)GM_GIB,
                   (double)r->capacity_bytes / (double)GM_GIB);
}

enum gm_status est_stage_runtime(struct est_ctx *cx, struct gm_error *err)
{
    const struct gm_job *j = cx->job;
    struct gm_estimate *e = cx->e;
    struct gm_est_layout *l = &e->layout;
    uint64_t outside;
    double frag;
    bool replay;
    enum gm_status st;

    if (j->mode == GM_EST_TRAIN && j->memory.paged_optimizer) {
        e->pageable_bytes = gm_estimate_kind_bytes(e, GM_KIND_MANAGED);
        est_assume(e,
                   "paged optimizer (bitsandbytes): %llu bytes of state in cudaMallocManaged "
                   "memory: on the device (device used), not in max_memory_allocated; it pages "
                   "to host memory under pressure",
                   (unsigned long long)e->pageable_bytes);
    }
    if ((st = overheads(cx, err)) != GM_OK)
        return st;
    /* the weights one device holds, in whatever form the stages left them */
    e->weight_bytes = gm_add_sat(gm_add_sat(gm_estimate_kind_bytes(e, GM_KIND_WEIGHTS),
                                            gm_estimate_kind_bytes(e, GM_KIND_MASTER_WEIGHTS)),
                                 gm_estimate_kind_bytes(e, GM_KIND_ADAPTERS));
    replay = est_step_replay_applies(cx);
    frag = est_run_fragmentation(cx);
    if (replay)
        frag = floor_factor(cx, frag);
    est_figures(e, frag);
    outside = est_outside_bytes(e);
    if (replay) {
        /* the paged optimizer's state gives way to the allocator: the driver evicts
         * cudaMallocManaged pages to host memory to serve a device allocation (the paged
         * optimizers of arXiv 2305.14314 §2 rely on it; docs/estimate.md), and the verdict
         * says how much is paged out, so the replay's capacity leaves that state out */
        uint64_t held = outside - (e->pageable_bytes < outside ? e->pageable_bytes : outside);
        uint64_t cap =
            j->gpu.memory_bytes ? (j->gpu.memory_bytes > held ? j->gpu.memory_bytes - held : 1) : 0;
        bool floor_binds;
        if ((st = est_step_replay(cx, cap, &e->replay, err)) != GM_OK)
            return st;
        if (est_given(j, EST_SET_ALLOC_CONF)) {
            char conf[160];
            est_assume(e, "step replay with PYTORCH_CUDA_ALLOC_CONF=%s",
                       gm_alloc_conf_format(&j->runtime.alloc, conf, sizeof conf)[0]
                           ? conf
                           : "(the defaults)");
        }
        /* the larger of the two, except where the allocator had to free its cache: then it
         * reserves what the replay found it could (not at the range's high end, which keeps
         * the floor: op-level fragmentation may leave less to free) */
        floor_binds = e->replay.reserved_peak < e->peak_reserved_bytes &&
                      !(e->replay.retries && !e->replay.oom && cx->bound != EST_HIGH);
        if (!floor_binds) {
            e->peak_reserved_bytes = e->replay.reserved_peak;
        } else if (cap && !e->replay.oom && e->peak_reserved_bytes > cap) {
            /* the floor is cache an allocator without a limit keeps; on this GPU a cudaMalloc
             * fails first, and the allocator frees its cache and retries (the replay, which
             * fits, did or had room): reserved never passes the capacity */
            e->replay.at_capacity = true;
            e->replay.floor_bytes = e->peak_reserved_bytes;
            e->peak_reserved_bytes = cap;
        }
        e->replay.floor = floor_binds;
        replay_note(e, floor_binds);
        if (est_replay_forward_ops(j))
            est_assume(e, "step replay, checkpointed forward: op by op, each tensor freed when "
                          "the code drops its last reference (an approximation of HF's forward: "
                          "ops' own temporaries left out)");
        if (est_fused_lora_runs(j, GM_LORA_Q) || est_fused_lora_runs(j, GM_LORA_O))
            est_assume(e,
                       "step replay, FOAK's fused LoRA: per projection its dequantised weight, "
                       "a dropout mask and dropped-out copy of its input (lora_dropout %g; none "
                       "at 0), freed as its function returns",
                       j->memory.lora.dropout);
    }
    /* FOAK's loss where the replay keeps no block for it: said, not silent */
    if (j->mode == GM_EST_TRAIN && j->memory.loss == GM_LOSS_FUSED &&
        j->memory.loss_impl == GM_LOSS_IMPL_UNSLOTH && j->memory.loss_cache_block &&
        (!replay || j->runtime.alloc.expandable_segments))
        est_assume(e, "FOAK's loss: the cache block measured on FOAK runs is not counted %s",
                   replay ? "under expandable_segments (the runs had none)" : "(no step replay)");
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
