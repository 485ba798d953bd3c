/* SPDX-License-Identifier: MIT */
/* step_alloc.c - peak reserved of a training job from its allocation sequence, replayed
 * through the caching-allocator model (include/gpumem/alloc.h, docs/alloc.md).
 *
 * The estimate's components say how many bytes of each kind live at four moments of a
 * step (the loss, the start of backward, the end of backward, the optimizer step).  Here
 * they become the tensors a PyTorch training step allocates and frees, in order, on the
 * streams that allocate them:
 *
 *   before the first step   weights, master weights, adapters, persistent buffers (FSDP1
 *                           under the HF Trainer: the wrap, unit by unit, fsdp1_wrap())
 *   forward, layer 1..L     the layer's parameters gathered (FSDP / ZeRO-3: all-gather
 *                           stream), the tensors it saves for backward (per layer), the
 *                           gathered parameters freed again (reshard after forward); a
 *                           checkpointed layer op by op (forward_layer(), FOAK's fused
 *                           LoRA in lora_qkv() and lora_matmul())
 *   loss                    the next layer prefetched for backward; the logits and the
 *                           loss's tensors (vocabulary-wide pieces), freed after its backward
 *   backward, layer L..1    the next layer prefetched, the layer's recomputed activations
 *                           and gradients of activations (one layer's worth), freed; the
 *                           layer's saved tensors freed; its parameter gradients (the
 *                           reduce-scatter stream allocates FSDP's sharded gradients).
 *                           FSDP1's frozen units under reentrant checkpointing: the gradient
 *                           of the layer's input made at the end of its backward, and the
 *                           layer inputs with those gradients kept to the end of backward
 *   optimizer step          the optimizer state (first step only: torch creates it
 *                           lazily), the step's temporaries, freed; zero_grad frees the
 *                           gradients (set_to_none)
 *
 * Tensors have the sizes of what they stand for: per parameter (q, k, v, o, the MLP
 * matrices, the norms; one flat parameter per FSDP unit), per activation (the widths a
 * layer computes: hidden, q, k, v, attention output, MLP), per logits copy.  Three steps
 * are replayed so that the cache is warm (the first step's activations are reused by the
 * optimizer state it creates; the second step needs new segments for them).  The replay
 * runs on a device of the GPU's capacity minus what lives outside the allocator, so near
 * the capacity the allocator frees its cache and retries, as PyTorch does.
 *
 * At each of the four moments the live tensors are exactly the components the estimate
 * counts there, so the replay's largest sum of live tensors is the estimate's peak
 * allocated (tests/unit/test_step_alloc.c checks it; beyond it where a layer's backward runs
 * beside gradients of the layers done: many FSDP ranks, FSDP1's kept inputs); what the
 * replay adds is how the allocator rounds, splits, caches per stream and per pool: peak
 * reserved. */
#include "base/vec.h"
#include "estimate/estimate_int.h"
#include "gpumem/alloc.h"
#include "gpumem/arena.h"

#include <string.h>

#define STEPS      3  /* replayed training steps: the third sees a warm cache */
#define MAX_PIECES 32 /* tensors per unit of a component */
/* FSDP1's _FreeEventQueue._max_num_inflight_all_gathers (torch/distributed/fsdp/
 * _limiter_utils.py, torch 2.4) */
#define FSDP1_INFLIGHT 2
#define FREE_EVENTS    8 /* free events kept queued (a later mark covers a dropped one) */
/* FSDP1's sync_module_states: PARAM_BROADCAST_BUCKET_SIZE (torch/distributed/fsdp/
 * _init_utils.py, torch 2.4) and broadcast_coalesced's buckets in flight (max_in_flight,
 * torch/csrc/distributed/c10d/comm.cpp) */
#define BROADCAST_BUCKET   (250ull << 20)
#define BROADCAST_INFLIGHT 2

/* How a component's tensors come and go in the step. */
enum life {
    LIFE_PERSISTENT,  /* before the first step, never freed */
    LIFE_STATE,       /* at the first optimizer step, kept (optimizer state) */
    LIFE_GRAD,        /* per unit in backward, freed by zero_grad after the step */
    LIFE_GRAD_KEPT,   /* per unit in the first backward, kept (zeros, accumulation) */
    LIFE_SAVED,       /* per layer in forward, freed per layer in backward */
    LIFE_LOSS_LAYERS, /* per layer in forward, freed after the loss */
    LIFE_LAYER_BWD,   /* one layer's worth in each layer's backward */
    LIFE_KEPT_BWD,    /* per layer, made by its backward (all but the first), kept to its end */
    LIFE_UNSHARD,     /* one layer gathered in each layer's forward and backward */
    LIFE_PREFETCH,    /* the next layer gathered, from the loss through backward */
    LIFE_BACKWARD,    /* from the loss's backward to the end of backward, once */
    LIFE_HANDLE,      /* one tensor per cuBLAS handle, each from its thread's first GEMM of the
                         first step (the forward's, the backward's), kept */
    LIFE_SPAN         /* from its first moment to its last */
};

/* The moments of a step, in order (what a span is allocated at / freed after). */
enum moment { M_FORWARD = 0, M_LOSS, M_BACKWARD, M_BACKWARD_END, M_STEP, M_NONE };

/* How far the GPU lags the CPU when FSDP1 frees a tensor another stream used: as far as
 * the rate limiter lets it (the point and the range's high end), not at all (the low end:
 * every block is free at once). */
enum lag { LAG_LIMITER = 0, LAG_NONE };

/* How a unit's bytes split into tensors. */
enum profile {
    PROF_ONE = 0, /* one tensor per unit */
    PROF_PARAMS,  /* per parameter of a layer; the embedding and the head one each */
    PROF_ADAPTER, /* LoRA A and B matrices of a layer */
    PROF_ACTS,    /* the widths one layer computes */
    PROF_LOGITS,  /* vocabulary-wide copies of the logits */
    PROF_HANDLES  /* one tensor per cuBLAS handle (est_torch_cublas_handles()) */
};

/* A component's tensors in the replay; like struct replay, values only besides 'c' (its
 * contents are part of the replay's input) and the slots. */
struct plan {
    const struct gm_est_component *c;
    enum life life;
    enum profile prof;
    bool ends; /* units 0 (embedding) and L+1 (head) hold shares */
    /* equal tensors each piece is made of, each its own request (1: the piece itself; 2: an
     * optimizer state's two moments per parameter; a component's gm_est_component.tensors) */
    unsigned parts;
    enum moment first, last; /* LIFE_SPAN */
    int64_t stream;
    size_t n_units;              /* L + 2 */
    size_t per_unit;             /* address slots per unit */
    uint64_t *addr;              /* n_units x per_unit, 0 = not allocated */
    uint64_t *size;              /* requested bytes of each slot */
    uint64_t *piece;             /* the bytes each slot asks for (piece_bytes(), once per run) */
    struct gm_alloc_block **blk; /* each slot's block, freed by it (NULL = not allocated) */
};

/* A replay's state.  What it starts from is its whole input: est_step_replay() remembers
 * replays by these bytes (memo_key(), the pointers below cleared), so a field the run reads
 * holds a value, never a pointer into the job, the model or the estimate. */
struct replay {
    struct gm_alloc *a;
    struct gm_error *err;
    enum gm_status st; /* first hard error */
    bool oom;
    uint64_t cur, peak; /* requested bytes live / at most */
    uint64_t mallocs;
    uint64_t stream_cur[GM_EST_STREAM__COUNT], stream_peak[GM_EST_STREAM__COUNT], reserved_cur,
        reserved_max;
    /* requested bytes live per stream / at most: what the stream's own segments must hold */
    uint64_t stream_live[GM_EST_STREAM__COUNT], stream_live_peak[GM_EST_STREAM__COUNT];
    /* shapes */
    uint64_t layers;
    uint64_t blas_handles; /* cuBLAS handles of the step: workspaces (est_torch_cublas_handles) */
    /* the backward's first GEMM is the lm_head's gradient in the loss's backward; a fused
     * linear cross-entropy takes the head's gradients in its forward (Liger,
     * linkedin/Liger-Kernel src/liger_kernel/ops/fused_linear_cross_entropy.py @ ead96b61) or
     * in its own kernels (Cut Cross-Entropy, apple/ml-cross-entropy
     * cut_cross_entropy/cce_backward.py @ 18e76ad), so the backward thread's first GEMM is the
     * last layer's */
    bool head_gemm_in_backward;
    double w_params[MAX_PIECES], w_acts[MAX_PIECES];
    size_t n_params, n_acts;
    double share_emb, share_head; /* of a parameter-shaped component */
    /* the loss: the model's logits (compute dtype), then fp32 copies over every position
     * and over the shifted ones (labels shifted by one: a position less per sequence) */
    uint64_t logits_16, logits_32, logits_32_shifted, logits_16_shifted;
    /* the model's own nn.CrossEntropyLoss on its shifted copy (EST_HF_LOSS_INLINE), under
     * autocast (the copy cast to fp32 first), with the Trainer's fp32 copy of the outputs */
    bool inline_ce, inline_mixed, fp32_outputs;
    /* the model's forward upcasts and shifts (EST_HF_LOSS_UPCAST): its fp32 logits
     * and their shifted copy, the 16-bit logits (upcast16) a temporary before them; the
     * loss nn.CrossEntropyLoss or the cross-entropy kernel in its place (upcast_kernel) */
    bool upcast, upcast16, upcast_kernel;
    /* --loss fused over materialised logits (gm_job_memory.loss_cache_block): one fp32 copy
     * of the logits (bytes; 0 = none) that the first step's loss asks for while its own
     * logits blocks are taken and frees at once, so that the cache keeps a segment of that
     * size (loss_cache_block()); its segment's bytes, and the GPU's bytes the block must find
     * room in (0 = no limit; the GPU's in the replay without the limit too) */
    uint64_t loss_block, loss_block_segment, capacity;
    /* what it did: made (bytes), or left out for want of room; the allocator's peaks up to
     * it (its instant is no tensor's, so the allocated peak leaves it out) */
    uint64_t loss_block_made, kept_allocated_peak, kept_reserved_peak;
    bool loss_block_no_room;
    /* the forward of a checkpointed layer (no_grad): tensor bytes by width */
    bool fwd_ops; /* run the layer's op sequence in forward */
    bool fused_norm, fused_rope, gated;
    uint64_t b_h, b_q, b_k, b_v, b_o, b_mlp, b_h32; /* bytes of one tensor of each width */
    uint64_t b_ring[EST_RING_PARTS]; /* ring attention's tensors in one attention call (--cp) */
    size_t n_ring;
    /* unsloth's fused LoRA in that forward (FOAK: LoRA_QKV for q, k and v, LoRA_W for o):
     * each projection's matmul_lora; with lora_dropout its dropout mask (bool) and the
     * dropped-out copy of its input, kept to the function's end; the base weight dequantised
     * per matmul (bitsandbytes: deq_each) or for q, k and v at once (GPTQ's dequant248) */
    bool lora_qkv, lora_o, lora_dropout, deq_each;
    uint64_t b_xa;                   /* X @ A: tokens x r in the compute dtype */
    uint64_t b_mask_h, b_mask_o;     /* dropout masks of a q/k/v input and of o's */
    uint64_t b_wq, b_wk, b_wv, b_wo; /* a dequantised weight of each (0: not quantised) */
    /* bitsandbytes 0.43.3 MatMul4Bit.forward (bitsandbytes/autograd/_functions.py at tag
     * 0.43.3 = 2e03d344, l. 509): every 4-bit linear the fused functions do not run is
     * `linear(A, dequantize_4bit(B).to(A.dtype).t())`, a whole dequantised weight alive for
     * its matmul.  Bytes of q, k, v, o's (b_lq..b_lo) and of one MLP matrix's (b_lmlp); 0
     * where the base is not bitsandbytes 4-bit */
    uint64_t b_lq, b_lk, b_lv, b_lo, b_lmlp;
    /* FSDP1's frees of tensors another stream used (cross_freed()): the rate limiter's
     * queue of free events (marks on the compute stream), and how far the GPU lags */
    bool fsdp1_frees;
    enum lag lag;
    uint64_t free_events[FREE_EVENTS];
    size_t n_free_events;
    uint64_t synced; /* the free event the limiter waited for last */
    /* FSDP1's wrap before the first step (fsdp1_wrap()): data-parallel degree, broadcast */
    bool fsdp1_wrap;
    bool sync_states;
    uint64_t dp;
    /* the segment trace (gm_estimate_run_traced): where the step is, the request being made */
    gm_est_segment_fn trace;
    void *trace_ctx;
    est_request_fn req_trace; /* every tensor request and free (est_run_requests()) */
    void *req_trace_ctx;
    struct gm_est_replay_segment where;
    /* the request that failed on the capacity: 'where' then, and whose tensor it was */
    struct gm_est_replay_segment failed;
    const struct gm_est_component *failed_c; /* NULL: a temporary of the step */
    /* what the allocator kept then (request_failed()) */
    uint64_t fail_reserved, fail_allocated, fail_largest_free;
    /* the segment of that largest free block, the bytes in use in it, and its largest tensor
     * of a component (pin_c NULL: temporaries only; pin_unit its unit) */
    uint64_t fail_segment, fail_segment_live, fail_pin_bytes;
    const struct gm_est_component *fail_pin_c;
    size_t fail_pin_unit;
    /* the run's plans (run_prepared(); NULL in a prepared replay and its memo key) */
    const struct plan *plans;
    size_t n_plans;
};

static void on_segment(void *ctx, enum gm_alloc_event_kind kind, uint64_t addr, uint64_t size,
                       int64_t stream)
{
    struct replay *r = ctx;
    size_t s = stream >= 0 && stream < GM_EST_STREAM__COUNT ? (size_t)stream : 0;
    (void)addr;
    if (kind == GM_ALLOC_EV_SEGMENT_ALLOC || kind == GM_ALLOC_EV_SEGMENT_MAP) {
        r->stream_cur[s] += size;
        r->reserved_cur += size;
        if (r->reserved_cur > r->reserved_max) {
            r->reserved_max = r->reserved_cur;
            memcpy(r->stream_peak, r->stream_cur, sizeof r->stream_peak);
        }
        if (r->trace) {
            struct gm_est_replay_segment seg = r->where;
            seg.bytes = size;
            seg.reserved = r->reserved_cur;
            seg.stream = (enum gm_est_stream)s;
            r->trace(r->trace_ctx, &seg);
        }
    } else if (kind == GM_ALLOC_EV_SEGMENT_FREE || kind == GM_ALLOC_EV_SEGMENT_UNMAP) {
        r->stream_cur[s] -= size < r->stream_cur[s] ? size : r->stream_cur[s];
        r->reserved_cur -= size < r->reserved_cur ? size : r->reserved_cur;
    }
}

/* ---- tensors ---- */

/* 'bytes' allocated on 'stream' (+) or freed from it (-): the live sums, in all and per
 * stream */
/* est_run_requests()'s trace: one tensor allocated (+) or freed (-), where the step is */
static void request_trace(struct replay *r, bool alloc, uint64_t bytes)
{
    struct est_replay_request rq;
    if (!r->req_trace)
        return;
    rq.alloc = alloc;
    rq.bytes = bytes;
    rq.live = r->cur;
    rq.pass = r->where.pass;
    rq.step = r->where.step;
    rq.at = r->where.at;
    rq.layer = r->where.layer;
    r->req_trace(r->req_trace_ctx, &rq);
}

static void live_inc(struct replay *r, enum gm_est_stream stream, uint64_t bytes)
{
    r->cur += bytes;
    if (r->cur > r->peak)
        r->peak = r->cur;
    r->stream_live[stream] += bytes;
    if (r->stream_live[stream] > r->stream_live_peak[stream])
        r->stream_live_peak[stream] = r->stream_live[stream];
    request_trace(r, true, bytes);
}

static void live_dec(struct replay *r, enum gm_est_stream stream, uint64_t bytes)
{
    r->cur -= bytes;
    r->stream_live[stream] -= bytes;
    request_trace(r, false, bytes);
}

/* The largest free block of one pool on one stream (gm_alloc_segments()), and the segment
 * that holds it: where it starts, its bytes, the bytes in use in it. */
struct largest_free {
    int64_t stream;
    bool small;
    uint64_t bytes;
    uint64_t seg_addr, seg_bytes, seg_live;
};

static enum gm_status largest_free_block(void *ctx, const struct gm_alloc_segment_info *seg,
                                         struct gm_error *err)
{
    struct largest_free *f = ctx;
    (void)err;
    uint64_t live = 0;
    bool here = false;
    if (seg->stream != f->stream || seg->is_small != f->small)
        return GM_OK;
    for (size_t i = 0; i < seg->n_blocks; i++) {
        if (seg->blocks[i].state != GM_ALLOC_BLOCK_INACTIVE)
            live += seg->blocks[i].size;
        else if (seg->blocks[i].size > f->bytes) {
            f->bytes = seg->blocks[i].size;
            here = true;
        }
    }
    if (here) {
        f->seg_addr = seg->addr;
        f->seg_bytes = seg->size;
        f->seg_live = live;
    }
    return GM_OK;
}

/* PyTorch's malloc() has by the time a request fails freed every cached segment that holds no
 * allocated block (release_cached_blocks(): only blocks with neither prev nor next,
 * c10/cuda/CUDACachingAllocator.cpp at v2.4.1) and asked cudaMalloc again, so what is
 * reserved is the segments with a block in use; the largest free block left in them says
 * whether the bytes were there but not in one piece (a block live inside a cached segment).
 * A request is served only from its own pool on its own stream: small-pool requests are
 * those of at most 1 MiB (kSmallSize, the same file). */
void est_alloc_at_failure(const struct gm_alloc *a, int64_t stream, uint64_t bytes,
                          struct est_alloc_failure *out)
{
    struct gm_alloc_stats s;
    struct largest_free f;
    gm_alloc_get_stats(a, &s);
    out->reserved = s.reserved_bytes[GM_ALLOC_STAT_ALL].current;
    out->allocated = s.allocated_bytes[GM_ALLOC_STAT_ALL].current;
    f.stream = stream;
    f.small = bytes <= GM_ALLOC_SMALL_SIZE;
    f.bytes = f.seg_addr = f.seg_bytes = f.seg_live = 0;
    /* out of memory for the walk: the largest free block stays unknown (0) */
    if (gm_alloc_segments(a, largest_free_block, &f, NULL) != GM_OK)
        f.bytes = f.seg_addr = f.seg_bytes = f.seg_live = 0;
    out->largest_free = f.bytes;
    out->segment_addr = f.seg_addr;
    out->segment = f.seg_bytes;
    out->segment_live = f.seg_live;
}

/* A request of 'bytes' on 'stream' failed on the capacity: r->failed as the step stood, with
 * what the allocator held then (est_alloc_at_failure()). */
static void request_failed(struct replay *r, int64_t stream, uint64_t bytes,
                           const struct gm_est_component *c)
{
    struct est_alloc_failure held;
    r->oom = true;
    r->failed = r->where;
    r->failed.stream = (enum gm_est_stream)stream;
    r->failed_c = c;
    est_alloc_at_failure(r->a, stream, bytes, &held);
    r->fail_reserved = held.reserved;
    r->fail_allocated = held.allocated;
    r->fail_largest_free = held.largest_free;
    r->fail_segment = held.segment;
    r->fail_segment_live = held.segment_live;
    r->fail_pin_bytes = 0;
    r->fail_pin_c = NULL;
    r->fail_pin_unit = 0;
    /* the tensors of the components that lie in that segment: the largest names what holds it */
    for (size_t i = 0; held.segment && i < r->n_plans; i++) {
        const struct plan *p = &r->plans[i];
        for (size_t k = 0; k < p->n_units * p->per_unit; k++)
            if (p->addr[k] >= held.segment_addr && p->addr[k] - held.segment_addr < held.segment &&
                p->size[k] > r->fail_pin_bytes) {
                r->fail_pin_bytes = p->size[k];
                r->fail_pin_c = p->c;
                r->fail_pin_unit = k / p->per_unit;
            }
    }
}

static void t_alloc(struct replay *r, struct plan *p, size_t slot, uint64_t bytes)
{
    uint64_t ptr = 0;
    enum gm_status st;
    if (r->st || r->oom || !bytes || p->addr[slot])
        return;
    r->where.request = bytes;
    r->where.live = r->cur;
    st = gm_alloc_malloc_block(r->a, bytes, p->stream, &ptr, &p->blk[slot], r->err);
    if (st == GM_ERR_LIMIT) {
        request_failed(r, p->stream, bytes, p->c);
        return;
    }
    if (st) {
        r->st = st;
        return;
    }
    p->addr[slot] = ptr;
    p->size[slot] = bytes;
    r->mallocs++;
    live_inc(r, (enum gm_est_stream)p->stream, bytes);
}

static void t_free(struct replay *r, struct plan *p, size_t slot)
{
    if (r->st || !p->addr[slot])
        return;
    if ((r->st = gm_alloc_dealloc_block(r->a, p->blk[slot], r->err)) != GM_OK)
        return;
    live_dec(r, (enum gm_est_stream)p->stream, p->size[slot]);
    p->addr[slot] = 0;
    p->size[slot] = 0;
    p->blk[slot] = NULL;
}

/* A tensor of no component: the forward's temporaries (compute stream); its block, NULL
 * when none was allocated. */
static struct gm_alloc_block *raw_alloc(struct replay *r, uint64_t bytes)
{
    struct gm_alloc_block *b = NULL;
    uint64_t ptr;
    enum gm_status st;
    if (r->st || r->oom || !bytes)
        return NULL;
    r->where.request = bytes;
    r->where.live = r->cur;
    st = gm_alloc_malloc_block(r->a, bytes, GM_EST_STREAM_COMPUTE, &ptr, &b, r->err);
    if (st == GM_ERR_LIMIT) {
        request_failed(r, GM_EST_STREAM_COMPUTE, bytes, NULL);
        return NULL;
    }
    if (st) {
        r->st = st;
        return NULL;
    }
    r->mallocs++;
    live_inc(r, GM_EST_STREAM_COMPUTE, bytes);
    return b;
}

static void raw_free(struct replay *r, struct gm_alloc_block **b, uint64_t bytes)
{
    if (r->st || !*b)
        return;
    if ((r->st = gm_alloc_dealloc_block(r->a, *b, r->err)) != GM_OK)
        return;
    live_dec(r, GM_EST_STREAM_COMPUTE, bytes);
    *b = NULL;
}

/* ---- sizes ---- */

/* Bytes of unit u (0 embedding, 1..L layers, L+1 head) of plan p. */
static uint64_t unit_bytes(const struct replay *r, const struct plan *p, size_t u)
{
    uint64_t b = p->c->bytes, L = r->layers, emb = 0, head = 0, layers, each;
    if (p->n_units == 1)
        return u == 0 ? b : 0;
    if (p->ends) {
        emb = (uint64_t)((double)b * r->share_emb);
        head = (uint64_t)((double)b * r->share_head);
        if (emb + head > b)
            emb = head = 0;
    }
    if (p->life == LIFE_KEPT_BWD) {
        /* one gradient per layer input the backward makes while the hooks hold them: the
         * layers L..2 (the first layer's goes on to the embedding) */
        if (u < 2 || u > L || L < 2)
            return 0;
        each = b / (L - 1);
        return u == L ? b - each * (L - 2) : each;
    }
    if (u == 0)
        return emb;
    if (u == L + 1)
        return head;
    layers = b - emb - head;
    each = layers / L;
    return u == L ? layers - each * (L - 1) : each;
}

static size_t n_pieces(const struct replay *r, const struct plan *p, size_t u)
{
    size_t n;
    switch (p->prof) {
    case PROF_PARAMS:
        n = (u == 0 || u == r->layers + 1) ? 1 : r->n_params;
        break;
    case PROF_ADAPTER:
        n = 8;
        break;
    case PROF_ACTS:
        n = r->n_acts;
        break;
    case PROF_LOGITS:
        n = MAX_PIECES / 2;
        break;
    case PROF_HANDLES:
        n = (size_t)r->blas_handles;
        break;
    default:
        n = 1;
    }
    return p->parts > 1 ? n * p->parts : n;
}

/* Bytes of piece j of unit u (the last piece takes what rounding leaves). */
static uint64_t piece_bytes(const struct replay *r, const struct plan *p, size_t u, size_t j,
                            uint64_t ub)
{
    size_t parts = p->parts > 1 ? p->parts : 1;
    size_t n = n_pieces(r, p, u), k = j / parts, nk = n / parts;
    const double *w = NULL;
    double wsum = 0, before = 0;
    uint64_t lo, hi;
    if (parts > 1) {
        /* 'parts' tensors of the same size per piece: floor(x / parts) each, the last the
         * rest */
        uint64_t whole;
        struct plan q = *p;
        q.parts = 1;
        whole = piece_bytes(r, &q, u, k, ub);
        return j % parts + 1 < parts ? whole / parts : whole - (parts - 1) * (whole / parts);
    }
    if (p->prof == PROF_LOGITS) {
        /* the logits, then fp32 copies over all and over the shifted positions in turn; the
         * model's own loss: the logits, their shifted copy, (under autocast its fp32 cast)
         * and the log-softmax over the shifted positions */
        uint64_t start = 0, piece = 0;
        for (size_t i = 0; i <= j; i++) {
            start += piece;
            if (r->inline_ce)
                piece = i == 0                       ? r->logits_16
                        : i == 1 || !r->inline_mixed ? r->logits_16_shifted
                                                     : r->logits_32_shifted;
            else if (r->upcast)
                piece = i == 0 ? r->logits_32 : r->logits_32_shifted;
            else
                piece = i == 0 ? r->logits_16 : (i % 2 ? r->logits_32 : r->logits_32_shifted);
        }
        if (!piece || start >= ub)
            return 0;
        return j + 1 == n || ub - start < piece ? ub - start : piece;
    }
    if (p->prof == PROF_PARAMS && u != 0 && u != r->layers + 1)
        w = r->w_params;
    else if (p->prof == PROF_ACTS)
        w = r->w_acts;
    if (!w || n <= 1) {
        uint64_t each = ub / nk;
        return k + 1 == nk ? ub - each * (nk - 1) : each;
    }
    for (size_t i = 0; i < nk; i++)
        wsum += w[i];
    for (size_t i = 0; i < k; i++)
        before += w[i];
    /* boundaries on 512-byte blocks, so that tensors of a width come out the same size and
     * the allocator's rounding adds nothing of its own */
    lo = (uint64_t)((double)ub * before / wsum) / GM_ALLOC_MIN_BLOCK * GM_ALLOC_MIN_BLOCK;
    hi = k + 1 == nk ? ub
                     : (uint64_t)((double)ub * (before + w[k]) / wsum) / GM_ALLOC_MIN_BLOCK *
                           GM_ALLOC_MIN_BLOCK;
    return hi > lo ? hi - lo : 0;
}

/* FSDP1's tensors that another stream uses when they are freed: the gathered parameters
 * (allocated on the unshard stream, used by the compute stream) and a layer's unsharded
 * gradient (allocated on the compute stream, used by the reduce-scatter). */
enum cross_use { USE_NONE = 0, USE_GATHERED, USE_GRADIENT };

static enum cross_use cross_use(const struct replay *r, const struct plan *p)
{
    if (!r->fsdp1_frees || r->lag == LAG_NONE || p->c->kind != GM_KIND_GATHERED)
        return USE_NONE;
    if (p->stream == GM_EST_STREAM_UNSHARD)
        return USE_GATHERED;
    return p->life == LIFE_LAYER_BWD && p->stream == GM_EST_STREAM_COMPUTE ? USE_GRADIENT
                                                                           : USE_NONE;
}

/* FSDP1 _unshard() with limit_all_gathers: once FSDP1_INFLIGHT free events are queued, the
 * CPU waits for the oldest (event.synchronize()) before it allocates the gather, so the
 * compute stream has passed that reshard and every end-of-life event recorded on it before.
 * A layer's reduce-scatter is taken as done once the compute stream has passed the next
 * layer's reshard (the one the limiter waited for the time before): the post-backward
 * stream waits for nothing but the compute stream, and one layer's reduce-scatter takes
 * less than the next layer's backward. */
static void gather_limiter(struct replay *r)
{
    uint64_t mark;
    if (r->n_free_events < FSDP1_INFLIGHT)
        return;
    mark = r->free_events[0];
    memmove(r->free_events, r->free_events + 1, (r->n_free_events - 1) * sizeof r->free_events[0]);
    r->n_free_events--;
    gm_alloc_stream_passed(r->a, GM_EST_STREAM_COMPUTE, mark);
    gm_alloc_stream_passed(r->a, GM_EST_STREAM_REDUCE, r->synced);
    r->synced = mark;
}

/* FSDP1 _reshard(): FlatParamHandle._free_unsharded_flat_param() records the compute stream
 * on the gathered block before it frees it; then the free event is queued for the limiter.
 * _post_backward_hook records the post-backward stream on the unsharded gradient before it
 * drops it (torch/distributed/fsdp/_flat_param.py, _runtime_utils.py, torch 2.4). */
static void cross_freed(struct replay *r, struct plan *p, size_t u, enum cross_use use)
{
    int64_t stream = use == USE_GATHERED ? GM_EST_STREAM_COMPUTE : GM_EST_STREAM_REDUCE;
    for (size_t j = 0; j < p->per_unit && !r->st; j++) {
        struct gm_alloc_block *b = p->blk[u * p->per_unit + j];
        if (b)
            r->st = gm_alloc_record_stream_block(r->a, b, stream, r->err);
    }
}

/* The end of backward synchronises the CPU with the GPU: FSDP1's post-backward final
 * callback makes the compute stream wait for the reduce-scatters and, with offloaded
 * parameters, synchronises it; the HF Trainer reads the step's loss on the host
 * (logging_nan_inf_filter's isnan / isinf test), as custom loops do to log it. */
static void step_synced(struct replay *r)
{
    uint64_t now = gm_alloc_stream_mark(r->a);
    gm_alloc_stream_passed(r->a, GM_EST_STREAM_COMPUTE, now);
    gm_alloc_stream_passed(r->a, GM_EST_STREAM_REDUCE, now);
}

static void gather_queued(struct replay *r)
{
    if (r->n_free_events == FREE_EVENTS) {
        memmove(r->free_events, r->free_events + 1, (FREE_EVENTS - 1) * sizeof r->free_events[0]);
        r->n_free_events--;
    }
    r->free_events[r->n_free_events++] = gm_alloc_stream_mark(r->a);
}

static void unit_alloc(struct replay *r, struct plan *p, size_t u)
{
    size_t n = n_pieces(r, p, u);
    /* the model's upcast: lm_head's 16-bit output, freed once its fp32 copy exists */
    struct gm_alloc_block *l16 =
        p->prof == PROF_LOGITS && r->upcast16 ? raw_alloc(r, r->logits_16) : NULL;
    if (cross_use(r, p) == USE_GATHERED)
        gather_limiter(r);
    for (size_t j = 0; j < n; j++) {
        t_alloc(r, p, u * p->per_unit + j, p->piece[u * p->per_unit + j]);
        if (j == 0)
            raw_free(r, &l16, r->logits_16);
    }
}

static void unit_free(struct replay *r, struct plan *p, size_t u)
{
    enum cross_use use = p->addr[u * p->per_unit] ? cross_use(r, p) : USE_NONE;
    if (use != USE_NONE)
        cross_freed(r, p, u, use);
    for (size_t j = p->per_unit; j-- > 0;)
        t_free(r, p, u * p->per_unit + j);
    if (use == USE_GATHERED)
        gather_queued(r);
}

static void all_alloc(struct replay *r, struct plan *p)
{
    for (size_t u = 0; u < p->n_units; u++)
        unit_alloc(r, p, u);
}

static void all_free(struct replay *r, struct plan *p)
{
    for (size_t u = p->n_units; u-- > 0;)
        unit_free(r, p, u);
}

/* ---- the plan ---- */

static enum moment first_moment(unsigned ph)
{
    if (ph & GM_EST_PHASE_LOSS)
        return (ph & GM_EST_PHASE_FORWARD_BACKWARD) ? M_FORWARD : M_LOSS;
    if (ph & GM_EST_PHASE_FORWARD_BACKWARD)
        return M_BACKWARD;
    if (ph & GM_EST_PHASE_BACKWARD_END)
        return M_BACKWARD_END;
    return (ph & GM_EST_PHASE_OPTIMIZER_STEP) ? M_STEP : M_NONE;
}

static enum moment last_moment(unsigned ph)
{
    if (ph & GM_EST_PHASE_OPTIMIZER_STEP)
        return M_STEP;
    if (ph & GM_EST_PHASE_BACKWARD_END)
        return M_BACKWARD_END;
    if (ph & GM_EST_PHASE_FORWARD_BACKWARD)
        return M_BACKWARD;
    return (ph & GM_EST_PHASE_LOSS) ? M_LOSS : M_NONE;
}

static bool param_shaped(enum gm_est_kind k)
{
    switch (k) {
    case GM_KIND_WEIGHTS:
    case GM_KIND_MASTER_WEIGHTS:
    case GM_KIND_ADAPTERS:
    case GM_KIND_WEIGHT_COPIES:
    case GM_KIND_GRADIENTS:
    case GM_KIND_OPTIMIZER_STATE:
    case GM_KIND_OPTIMIZER_TEMP:
        return true;
    default:
        return false;
    }
}

static void plan_component(const struct est_ctx *cx, struct plan *p)
{
    const struct gm_job *j = cx->job;
    const struct gm_est_component *c = p->c;
    unsigned ph = c->phases & GM_EST_PHASE_TRAIN_ALL;
    bool fsdp = j->parallel.shard == GM_SHARD_FSDP && est_data_parallel(j) > 1;
    bool adapters = j->memory.adapter != GM_ADAPTER_NONE;
    bool all_layers = c->extent == GM_EXTENT_ALL_LAYERS;

    p->stream = (int64_t)c->stream;
    p->first = first_moment(ph);
    p->last = last_moment(ph);
    if (c->kind == GM_KIND_TORCH_WORKSPACE)
        p->life = LIFE_HANDLE;
    else if (ph == GM_EST_PHASE_TRAIN_ALL)
        p->life = c->kind == GM_KIND_OPTIMIZER_STATE ? LIFE_STATE
                  : c->kind == GM_KIND_GRADIENTS     ? LIFE_GRAD_KEPT
                                                     : LIFE_PERSISTENT;
    else if (c->kind == GM_KIND_GATHERED && c->extent == GM_EXTENT_ONE_LAYER &&
             c->stream == GM_EST_STREAM_UNSHARD && ph == GM_EST_PHASE_FORWARD_BACKWARD)
        p->life = LIFE_UNSHARD;
    else if (c->kind == GM_KIND_GATHERED && c->extent == GM_EXTENT_ONE_LAYER &&
             c->stream == GM_EST_STREAM_UNSHARD && ph == GM_EST_PHASE_SAVED)
        p->life = LIFE_PREFETCH;
    else if (c->kind == GM_KIND_COMM_BUFFERS && c->extent == GM_EXTENT_ONE_LAYER &&
             ph == GM_EST_PHASE_SAVED)
        p->life = LIFE_BACKWARD; /* ZeRO-1/2's reduce buffer (stage_parallel.c) */
    else if (all_layers && ph == GM_EST_PHASE_SAVED)
        p->life = LIFE_SAVED;
    else if (all_layers && ph == GM_EST_PHASE_LOSS)
        p->life = LIFE_LOSS_LAYERS;
    else if (all_layers && c->kind == GM_KIND_GRADIENTS &&
             ph == (GM_EST_PHASE_BACKWARD_END | GM_EST_PHASE_OPTIMIZER_STEP))
        p->life = LIFE_GRAD;
    else if (c->extent == GM_EXTENT_ONE_LAYER && (ph & GM_EST_PHASE_FORWARD_BACKWARD) &&
             !(ph & (GM_EST_PHASE_LOSS | GM_EST_PHASE_OPTIMIZER_STEP)))
        p->life = LIFE_LAYER_BWD;
    else if (all_layers && c->kind == GM_KIND_BACKWARD_TEMP && ph == GM_EST_PHASE_FORWARD_BACKWARD)
        p->life = LIFE_KEPT_BWD; /* FSDP1's kept input gradients (stage_parallel.c) */
    else
        p->life = LIFE_SPAN;

    /* tensor shapes */
    p->prof = PROF_ONE;
    p->ends = false;
    p->parts = 1;
    if (param_shaped(c->kind) && all_layers) {
        bool trainable = c->kind != GM_KIND_WEIGHTS && c->kind != GM_KIND_WEIGHT_COPIES;
        bool flat = fsdp && (c->kind == GM_KIND_WEIGHTS || c->kind == GM_KIND_MASTER_WEIGHTS ||
                             c->kind == GM_KIND_ADAPTERS || c->stream == GM_EST_STREAM_REDUCE);
        if (adapters && trainable)
            p->prof = flat ? PROF_ONE : PROF_ADAPTER; /* adapters live in the layers only */
        else {
            p->prof = flat ? PROF_ONE : PROF_PARAMS;
            p->ends = true;
        }
        if (c->kind == GM_KIND_OPTIMIZER_STATE)
            p->parts = 2; /* exp_avg and exp_avg_sq */
        if (p->life == LIFE_SAVED || p->life == LIFE_LOSS_LAYERS)
            p->ends = false; /* made layer by layer in forward */
    } else if (c->kind == GM_KIND_LOGITS) {
        p->prof = PROF_LOGITS;
    } else if (c->forward_local) {
        p->prof = PROF_ONE; /* one tensor: the final norm's output */
    } else if (p->life == LIFE_HANDLE) {
        p->prof = PROF_HANDLES;
    } else if (c->kind == GM_KIND_ACTIVATIONS || c->kind == GM_KIND_BACKWARD_TEMP ||
               c->kind == GM_KIND_KV_CACHE) {
        /* full checkpointing keeps one tensor per layer: its input (and FSDP1's frozen
         * units the gradient of it, a backward temporary over all layers) */
        bool layer_inputs = (p->life == LIFE_SAVED && j->memory.checkpointing == GM_CKPT_FULL &&
                             j->memory.checkpoint_every <= 1) ||
                            (c->kind == GM_KIND_BACKWARD_TEMP && all_layers);
        p->prof = layer_inputs ? PROF_ONE : PROF_ACTS;
    }
    /* a component of equal tensors, each its own request (bitsandbytes' dequantised
     * weights: est_set_tensors() in stage_adapters.c and stage_infer.c) */
    if (p->prof == PROF_ONE && c->tensors >= 2 && c->tensors <= MAX_PIECES)
        p->parts = c->tensors;
}

/* Layer shapes: the parameters and activation widths of one decoder layer, the shares of
 * the embedding and the head in a parameter-shaped component. */
static void plan_shapes(const struct est_ctx *cx, struct replay *r)
{
    const struct gm_job *j = cx->job;
    const struct gm_model *m = cx->m;
    const struct gm_param_counts *pc = &cx->pc;
    struct est_geom g;
    double h = (double)m->hidden, L = (double)r->layers, T = cx->tokens;
    double mlp = (double)pc->mlp / L, norms = (double)pc->norms / L;
    double tot = (double)pc->embedding + (double)pc->positions + (double)pc->lm_head +
                 (double)pc->other + (double)pc->attention + (double)pc->mlp + (double)pc->norms;
    double ea = (double)est_weight_elem_bytes(j->numerics.precision); /* compute dtype */
    double t = (double)(j->parallel.tp ? j->parallel.tp : 1), v = (double)m->vocab / t;
    double shifted = T > (double)j->workload.batch ? T - (double)j->workload.batch : T;
    uint64_t experts = m->n_experts ? m->n_experts + m->n_shared_experts : 1, mats;
    double biases, each_mat;
    size_t n = 0;

    est_geom(m, &g);
    /* one layer's parameter tensors: the norms (h each), q, k, v, o with their biases, the
     * MLP matrices (of every expert) with theirs; shares of the layer's bytes by elements */
    for (double left = norms; left > 0.5 && n < 4; left -= h)
        r->w_params[n++] = left < h ? left : h;
    r->w_params[n++] = h * g.q;
    r->w_params[n++] = h * g.k;
    r->w_params[n++] = h * g.v;
    r->w_params[n++] = g.o_in * h;
    if (m->qkv_bias) {
        r->w_params[n++] = g.q;
        r->w_params[n++] = g.k;
        r->w_params[n++] = g.v;
    }
    if (m->out_bias)
        r->w_params[n++] = h;
    mats = (m->gated_mlp ? 3 : 2) * experts;
    if (mats > (MAX_PIECES - n) / 2)
        mats = (MAX_PIECES - n) / 2;
    biases = m->mlp_bias ? (double)mats * g.mlp_widest : 0;
    each_mat = (mlp - biases) / (double)mats;
    for (uint64_t i = 0; i < mats; i++)
        r->w_params[n++] = each_mat > 0 ? each_mat : mlp / (double)mats;
    if (m->mlp_bias)
        for (uint64_t i = 0; i < mats; i++)
            r->w_params[n++] = g.mlp_widest;
    r->n_params = n;

    n = 0;
    r->w_acts[n++] = h;      /* the layer's input (residual stream) */
    r->w_acts[n++] = h;      /* the norm's output */
    r->w_acts[n++] = g.q;    /* queries */
    r->w_acts[n++] = g.k;    /* keys */
    r->w_acts[n++] = g.v;    /* values */
    r->w_acts[n++] = g.o_in; /* attention output */
    r->w_acts[n++] = h;      /* residual after attention */
    r->w_acts[n++] = h;      /* the second norm's output */
    for (int i = 0; i < (m->gated_mlp ? 3 : 2); i++)
        r->w_acts[n++] = g.mlp; /* gate, up, activation (or up, activation) */
    r->n_acts = n;

    r->fwd_ops = est_replay_forward_ops(j);
    r->fused_norm = (j->memory.fused_kernels & GM_FUSED_RMS_NORM) != 0;
    r->fused_rope = (j->memory.fused_kernels & GM_FUSED_ROPE) != 0;
    r->gated = m->gated_mlp;
    r->b_h = est_round(T * h * ea);
    r->b_h32 = est_round(T * h * 4.0);
    r->b_q = est_round(T * g.q * ea / t);
    r->b_k = est_round(T * g.k * ea / t);
    r->b_v = est_round(T * g.v * ea / t);
    r->b_o = est_round(T * g.o_in * ea / t);
    r->b_mlp = est_round(T * g.mlp * ea / t);
    r->n_ring = est_ring_attention_parts(j, m, T, r->b_ring);
    r->lora_qkv = est_fused_lora_runs(j, GM_LORA_Q);
    r->lora_o = est_fused_lora_runs(j, GM_LORA_O);
    r->lora_dropout = (r->lora_qkv || r->lora_o) && j->memory.lora.dropout > 0;
    r->b_xa = est_round(T * (double)j->memory.lora.rank * ea);
    r->b_mask_h = r->lora_dropout ? est_round(T * h) : 0;
    r->b_mask_o = r->lora_dropout ? est_round(T * g.o_in / t) : 0;
    {
        /* the base weights the fused functions dequantise: bitsandbytes' in the compute
         * dtype (fast_dequantize), GPTQ's in fp16 (dequant248); bitsandbytes' MatMul4Bit
         * dequantises the others in the compute dtype too */
        enum est_lora_base base = est_lora_base(j);
        bool bnb = base == EST_LORA_BASE_BNB4;
        double wb = bnb ? ea : base == EST_LORA_BASE_GPTQ ? 2.0 : 0.0, lb = bnb ? ea : 0.0;
        r->deq_each = bnb;
        r->b_wq = est_round(h * g.q / t * wb);
        r->b_wk = est_round(h * g.k / t * wb);
        r->b_wv = est_round(h * g.v / t * wb);
        r->b_wo = est_round(g.o_in / t * h * wb);
        r->b_lq = r->lora_qkv ? 0 : est_round(h * g.q / t * lb);
        r->b_lk = r->lora_qkv ? 0 : est_round(h * g.k / t * lb);
        r->b_lv = r->lora_qkv ? 0 : est_round(h * g.v / t * lb);
        r->b_lo = r->lora_o ? 0 : est_round(g.o_in / t * h * lb);
        /* one matrix of one expert (the layer's MLP parameters over its matrices) */
        r->b_lmlp = est_round(mlp / ((m->gated_mlp ? 3.0 : 2.0) * (double)experts) / t * lb);
    }

    r->share_emb = tot > 0 ? ((double)pc->embedding + (double)pc->positions) / tot : 0;
    r->share_head = tot > 0 ? ((double)pc->lm_head + (double)pc->other) / tot : 0;
    r->logits_16 = est_round(ea * T * v);
    r->logits_32 = est_round(4.0 * T * v);
    r->logits_32_shifted = est_round(4.0 * shifted * v);
    r->logits_16_shifted = est_round(ea * shifted * v);
    enum est_hf_loss form = est_hf_loss_form(j, m);
    r->inline_ce = (j->memory.loss == GM_LOSS_FULL && form == EST_HF_LOSS_INLINE) ||
                   j->memory.loss == GM_LOSS_PLAIN;
    r->inline_mixed = r->inline_ce && est_precision_autocast(j->numerics.precision);
    r->fp32_outputs = est_hf_trainer_fp32_outputs(j);
    r->upcast = form == EST_HF_LOSS_UPCAST &&
                (j->memory.loss == GM_LOSS_FULL || j->memory.loss == GM_LOSS_FUSED);
    r->upcast16 = r->upcast && ea != 4.0;
    r->upcast_kernel = r->upcast && j->memory.loss == GM_LOSS_FUSED;
    r->loss_block = v > 0 && est_loss_cache_block_applies(j) ? r->logits_32 : 0;
}

bool est_loss_cache_block_applies(const struct gm_job *j)
{
    /* measured on fms-acceleration's FOAK runs only (unsloth's Fast_CrossEntropyLoss), which
     * ran without expandable_segments: no other kernel, no other segments */
    return j->memory.loss == GM_LOSS_FUSED && j->memory.loss_impl == GM_LOSS_IMPL_UNSLOTH &&
           j->memory.loss_cache_block && !j->runtime.alloc.expandable_segments;
}

bool est_replay_failed_on_layout(const struct gm_est_replay *r)
{
    return r->oom && r->failed.request && r->capacity_bytes &&
           r->allocated_peak <= r->capacity_bytes;
}

bool est_step_replay_job_applies(const struct gm_job *j)
{
    return j->mode == GM_EST_TRAIN && est_allocator(j) == EST_ALLOC_TORCH &&
           j->method != GM_METHOD_BLOG && j->parallel.pp <= 1 &&
           !est_given(j, EST_SET_FRAGMENTATION);
}

bool est_step_replay_applies(const struct est_ctx *cx)
{
    return est_step_replay_job_applies(cx->job) && cx->m && cx->m->hidden && cx->m->n_layers;
}

/* ---- the step ---- */

const char *gm_est_replay_at_name(enum gm_est_replay_at at)
{
    static const char *const names[GM_EST_AT__COUNT] = {"setup", "forward", "loss", "backward",
                                                        "optimizer"};
    return (unsigned)at < GM_EST_AT__COUNT ? names[at] : "?";
}

const char *gm_est_stream_name(enum gm_est_stream stream)
{
    static const char *const names[GM_EST_STREAM__COUNT] = {"compute", "unshard", "reduce_scatter"};
    return (unsigned)stream < GM_EST_STREAM__COUNT ? names[stream] : "?";
}

/* Where the step is, for the segment trace. */
static void at(struct replay *r, enum gm_est_replay_at where, size_t layer)
{
    r->where.at = where;
    r->where.layer = (unsigned)layer;
}

/* ---- FSDP1's wrap ---- */

/* One FSDP1 unit wrapped (torch 2.4 torch/distributed/fsdp/_init_utils.py
 * _init_param_handle_from_module, _flat_param.py FlatParamHandle), on the compute stream:
 * its parameters come to the GPU one tensor each (_move_module_to_device on rank 0, where
 * the HF loading left them on the CPU; accelerate's param_init_fn, to_empty, on the other
 * ranks, where they are on the meta device); with sync_module_states rank 0 broadcasts them
 * (_sync_module_params_and_buffers: broadcast_coalesced flattens buckets of 250 MiB, two in
 * flight); flatten_tensors torch.cat()s them into the unsharded flat parameter; shard()
 * clones the rank's chunk (the persistent weights, unit by unit as the replay holds them),
 * resizes the unsharded storage to 0 and points the original parameters at the shard
 * (_use_sharded_views), which frees them. */
static void fsdp1_wrap_unit(struct replay *r, struct plan *w, const size_t *units, size_t n_units)
{
    struct gm_alloc_block *ptr[2 * MAX_PIECES], *bucket[BROADCAST_INFLIGHT], *flat;
    uint64_t size[2 * MAX_PIECES], bucket_size[BROADCAST_INFLIGHT], flat_size = 0, acc = 0;
    size_t n = 0, inflight = 0;
    struct plan q = *w;
    q.prof = PROF_PARAMS;
    q.parts = 1;
    for (size_t i = 0; i < n_units; i++) {
        uint64_t ub = gm_mul_sat(unit_bytes(r, w, units[i]), r->dp);
        size_t k = n_pieces(r, &q, units[i]);
        if (k > MAX_PIECES) { /* a unit has at most MAX_PIECES tensors (n_pieces()) */
            r->st = GM_ERR_INTERNAL;
            return;
        }
        for (size_t j = 0; j < k; j++, n++) {
            size[n] = piece_bytes(r, &q, units[i], j, ub);
            ptr[n] = raw_alloc(r, size[n]);
            flat_size = gm_add_sat(flat_size, size[n]);
        }
    }
    for (size_t i = 0; r->sync_states && i < n; i++) {
        acc += size[i];
        if (acc < BROADCAST_BUCKET && i + 1 < n)
            continue;
        if (inflight == BROADCAST_INFLIGHT) {
            raw_free(r, &bucket[0], bucket_size[0]);
            bucket[0] = bucket[1];
            bucket_size[0] = bucket_size[1];
            inflight--;
        }
        bucket_size[inflight] = acc;
        bucket[inflight++] = raw_alloc(r, acc);
        acc = 0;
    }
    for (size_t i = 0; i < inflight; i++)
        raw_free(r, &bucket[i], bucket_size[i]);
    flat = raw_alloc(r, flat_size);
    for (size_t i = 0; i < n_units; i++)
        unit_alloc(r, w, units[i]);
    raw_free(r, &flat, flat_size);
    for (size_t i = n; i-- > 0;)
        raw_free(r, &ptr[i], size[i]);
}

/* accelerate's prepare() wraps the model inside trainer.train(), after the memory tracker's
 * empty_cache(), and nothing empties the cache before the first step: the wrap's free
 * segments are what the first step starts from.  The auto-wrap policy wraps bottom-up, the
 * decoder layers in order, then the root (embedding, final norm, lm_head). */
static bool fsdp1_wrap(struct replay *r, struct plan *pl, size_t n)
{
    size_t L = (size_t)r->layers, root[2] = {0, L + 1};
    struct plan *w = NULL;
    for (size_t i = 0; i < n && !w; i++)
        if (pl[i].life == LIFE_PERSISTENT && pl[i].c->kind == GM_KIND_WEIGHTS &&
            pl[i].prof == PROF_ONE && pl[i].n_units == L + 2)
            w = &pl[i];
    if (!w) /* weights not held unit by unit (offloaded): nothing is wrapped on the GPU */
        return false;
    for (size_t u = 1; u <= L && !r->st && !r->oom; u++) {
        at(r, GM_EST_AT_SETUP, u);
        fsdp1_wrap_unit(r, w, &u, 1);
    }
    at(r, GM_EST_AT_SETUP, 0);
    fsdp1_wrap_unit(r, w, root, 2);
    return true;
}

static void each(struct replay *r, struct plan *pl, size_t n, enum life life, size_t u, bool alloc);

bool est_replay_forward_ops(const struct gm_job *j)
{
    return j->memory.checkpointing == GM_CKPT_FULL && j->memory.checkpoint_every <= 1 &&
           !j->memory.compile;
}

/* An RMSNorm / LayerNorm as HF writes it: the input upcast to fp32, multiplied by its rstd
 * (fp32), cast back and scaled; a fused kernel writes its output directly. */
static struct gm_alloc_block *norm_op(struct replay *r)
{
    struct gm_alloc_block *f1, *f2, *out;
    if (r->fused_norm)
        return raw_alloc(r, r->b_h);
    f1 = raw_alloc(r, r->b_h32);
    f2 = raw_alloc(r, r->b_h32);
    raw_free(r, &f1, r->b_h32);
    out = raw_alloc(r, r->b_h);
    raw_free(r, &f2, r->b_h32);
    return out;
}

/* A linear layer's output of 'out_b' bytes; 'w' > 0: its weight dequantised first and
 * freed once the matmul has run (bitsandbytes' MatMul4Bit.forward and fast_dequantize,
 * GPTQ's dequant248 around o: the dequantised weight is a temporary of the call). */
static struct gm_alloc_block *linear_op(struct replay *r, uint64_t w, uint64_t out_b)
{
    struct gm_alloc_block *wd = raw_alloc(r, w), *out = raw_alloc(r, out_b);
    raw_free(r, &wd, w);
    return out;
}

/* One projection through unsloth's matmul_lora (FOAK fused_ops/unsloth_lora/utils.py and
 * gptq/fast_lora.py at 733992a) under no_grad: the base matmul's output, the dropout of the
 * input (PyTorch's dropout_cuda allocates the bool mask, then the output, and native_dropout's
 * caller drops the mask: aten/src/ATen/native/cuda/Dropout.cu, read at atalman/pytorch
 * 122bfa37, a fork; the runs' torch 2.4.1 tag could not be opened here), kept in *dropped
 * until the autograd function returns, then `out += (X @ A) @ (s * B)`: X @ A, the product
 * of out's shape, X @ A freed as an operand, the product after the add (A and s * B cast to
 * the compute dtype are r-wide: small-pool blocks, left out).  'w' is the weight
 * bitsandbytes dequantises for this matmul alone (0: none). */
static struct gm_alloc_block *lora_matmul(struct replay *r, uint64_t w, uint64_t out_b,
                                          uint64_t in_b, uint64_t mask_b,
                                          struct gm_alloc_block **dropped)
{
    struct gm_alloc_block *out = linear_op(r, w, out_b), *mask, *xa, *tmp;
    if (r->lora_dropout) {
        mask = raw_alloc(r, mask_b);
        *dropped = raw_alloc(r, in_b);
        raw_free(r, &mask, mask_b);
    }
    xa = raw_alloc(r, r->b_xa);
    tmp = raw_alloc(r, out_b);
    raw_free(r, &xa, r->b_xa);
    raw_free(r, &tmp, out_b);
    return out;
}

/* FOAK's LoRA_QKV.forward (bnb/fast_lora.py, gptq/fast_lora.py at 733992a): q, k and v
 * through matmul_lora in turn (GPTQ dequantises the three weights first and holds them to
 * the end); the dropped-out copies die with the function's context (no_grad keeps none). */
static void lora_qkv(struct replay *r, struct gm_alloc_block **q, struct gm_alloc_block **k,
                     struct gm_alloc_block **v)
{
    struct gm_alloc_block *d[3] = {NULL, NULL, NULL}, *w[3] = {NULL, NULL, NULL};
    uint64_t wb[3] = {r->b_wq, r->b_wk, r->b_wv}, each[3];
    for (size_t i = 0; i < 3; i++) {
        each[i] = r->deq_each ? wb[i] : 0;
        if (!r->deq_each)
            w[i] = raw_alloc(r, wb[i]);
    }
    *q = lora_matmul(r, each[0], r->b_q, r->b_h, r->b_mask_h, &d[0]);
    *k = lora_matmul(r, each[1], r->b_k, r->b_h, r->b_mask_h, &d[1]);
    *v = lora_matmul(r, each[2], r->b_v, r->b_h, r->b_mask_h, &d[2]);
    for (size_t i = 3; i-- > 0;) {
        raw_free(r, &d[i], r->b_h);
        raw_free(r, &w[i], wb[i]);
    }
}

/* The forward of one checkpointed decoder layer under no_grad (nothing of it is kept but
 * its output, the next layer's input), as a llama-style layer's Python runs it (HF
 * MistralDecoderLayer, MistralFlashAttention2 / MistralAttention and MistralMLP,
 * src/transformers/models/mistral/modeling_mistral.py at v4.45.2 and v4.48.1; LlamaDecoderLayer
 * alike): one rule, a tensor lives until the code drops its last reference.  So
 *  - the decoder layer keeps the norm's output in its `hidden_states` local until the
 *    attention (then the MLP) returns and the name is rebound to their output;
 *  - the attention keeps query_states / key_states / value_states to its return, after
 *    o_proj (FOAK replaces only the q/k/v/o projections' forwards: fms-acceleration
 *    fused-ops-and-kernels models/utils.py `_build_qkv_forwards` at 733992a unloads its
 *    Q, K, V on each call, so the attention's locals hold the only references); the rotary
 *    embedding rebinds q and k, whose old tensors die once both new ones exist;
 *  - the MLP is `down_proj(act_fn(gate_proj(x)) * up_proj(x))`: gate, its activation (the
 *    gate's output then unreferenced), up, the product (activation and up then freed), down;
 *  - bitsandbytes' 4-bit linears outside the fused functions dequantise their weight for
 *    each call (linear_op()).
 * Widths are the tensors'; an op's own temporaries beyond these are not replayed. */
static void forward_layer(struct replay *r, struct plan *pl, size_t n, size_t u)
{
    struct gm_alloc_block *n1, *q, *k, *v, *q2 = NULL, *k2 = NULL, *a, *o, *res, *n2, *g, *up, *act,
                                           *prod, *down, *ring[EST_RING_PARTS];
    n1 = norm_op(r);
    if (r->lora_qkv) {
        lora_qkv(r, &q, &k, &v);
    } else {
        q = linear_op(r, r->b_lq, r->b_q);
        k = linear_op(r, r->b_lk, r->b_k);
        v = linear_op(r, r->b_lv, r->b_v);
    }
    if (!r->fused_rope) { /* q * cos + rotate_half(q) * sin: new tensors, then rebound */
        q2 = raw_alloc(r, r->b_q);
        k2 = raw_alloc(r, r->b_k);
        raw_free(r, &k, r->b_k);
        raw_free(r, &q, r->b_q);
    }
    /* context parallelism's ring: its tensors live until the attention call returns */
    for (size_t i = 0; i < r->n_ring; i++)
        ring[i] = raw_alloc(r, r->b_ring[i]);
    a = raw_alloc(r, r->b_o);
    for (size_t i = r->n_ring; i-- > 0;)
        raw_free(r, &ring[i], r->b_ring[i]);
    if (r->lora_o) {
        /* LoRA_W.forward: GPTQ's weight dequantised around matmul_lora (`del W`), then the
         * dropped-out copy with the function's context */
        uint64_t held = r->deq_each ? 0 : r->b_wo;
        struct gm_alloc_block *d = NULL, *w = raw_alloc(r, held);
        o = lora_matmul(r, r->deq_each ? r->b_wo : 0, r->b_h, r->b_o, r->b_mask_o, &d);
        raw_free(r, &w, held);
        raw_free(r, &d, r->b_o);
    } else {
        o = linear_op(r, r->b_lo, r->b_h);
    }
    raw_free(r, &a, r->b_o); /* attn_output rebound to o_proj's output */
    /* the attention returns: its locals go; the decoder rebinds hidden_states */
    raw_free(r, &v, r->b_v);
    raw_free(r, &k2, r->b_k);
    raw_free(r, &q2, r->b_q);
    raw_free(r, &k, r->b_k);
    raw_free(r, &q, r->b_q);
    raw_free(r, &n1, r->b_h);
    res = raw_alloc(r, r->b_h);
    raw_free(r, &o, r->b_h);
    n2 = norm_op(r);
    g = linear_op(r, r->b_lmlp, r->b_mlp);
    act = raw_alloc(r, r->b_mlp);
    raw_free(r, &g, r->b_mlp);
    if (r->gated) {
        up = linear_op(r, r->b_lmlp, r->b_mlp);
        prod = raw_alloc(r, r->b_mlp);
        raw_free(r, &act, r->b_mlp);
        raw_free(r, &up, r->b_mlp);
    } else {
        prod = act;
        act = NULL;
    }
    down = linear_op(r, r->b_lmlp, r->b_h);
    raw_free(r, &prod, r->b_mlp);
    raw_free(r, &n2, r->b_h); /* the MLP returns; hidden_states rebound to its output */
    /* the residual sum: the layer's output, which the next layer's checkpoint keeps as its
     * input (the last layer's the final norm keeps: its span at the loss) */
    if (u < r->layers)
        each(r, pl, n, LIFE_SAVED, u + 1, true);
    raw_free(r, &down, r->b_h);
    raw_free(r, &res, r->b_h);
}

static void spans(struct replay *r, struct plan *pl, size_t n, enum moment at, bool alloc)
{
    if (alloc) {
        for (size_t i = 0; i < n; i++)
            if (pl[i].life == LIFE_SPAN && pl[i].first == at)
                all_alloc(r, &pl[i]);
    } else {
        for (size_t i = n; i-- > 0;)
            if (pl[i].life == LIFE_SPAN && pl[i].last == at)
                all_free(r, &pl[i]);
    }
}

static void each(struct replay *r, struct plan *pl, size_t n, enum life life, size_t u, bool alloc)
{
    if (alloc) {
        for (size_t i = 0; i < n; i++)
            if (pl[i].life == life)
                unit_alloc(r, &pl[i], u);
    } else {
        for (size_t i = n; i-- > 0;)
            if (pl[i].life == life)
                unit_free(r, &pl[i], u);
    }
}

static void gradients(struct replay *r, struct plan *pl, size_t n, size_t u, bool first_step)
{
    each(r, pl, n, LIFE_GRAD, u, true);
    if (first_step)
        each(r, pl, n, LIFE_GRAD_KEPT, u, true);
}

/* After the loss's moment (logits, the fp32 copy, the shifted copy and the log-softmax
 * over it all live: transformers' ForCausalLMLoss), its backward as autograd runs it: the
 * copies no backward needs are freed, then the gradient of the log-softmax's input (the
 * shifted shape), the log-softmax freed, the gradient of the fp32 copy (zeros of the
 * unshifted shape, the shifted slice copied in), the gradient of the logits in their dtype
 * -- each made before what it replaces is freed, never more live than at the moment. */
static void loss_backward(struct replay *r, struct plan *p)
{
    uint64_t limit = r->cur, g_prev_size = 0;
    struct gm_alloc_block *g_prev = NULL;
    size_t n = n_pieces(r, p, 0);
    /* the fp32 copy and the shifted copy: not saved */
    if (n > 2) {
        t_free(r, p, 1);
        t_free(r, p, 2);
    }
    for (size_t k = n; k-- > 0;) {
        uint64_t size = p->size[k];
        struct gm_alloc_block *g = NULL;
        if (!p->addr[k])
            continue;
        if (r->cur + size <= limit)
            g = raw_alloc(r, size);
        t_free(r, p, k);
        raw_free(r, &g_prev, g_prev_size);
        g_prev = g;
        g_prev_size = g ? size : 0;
        if (k == 3 && n > 2) {
            /* the gradient of the unshifted fp32 copy, beside the shifted one's */
            uint64_t full = r->logits_32;
            struct gm_alloc_block *gf = NULL;
            if (r->cur + full <= limit)
                gf = raw_alloc(r, full);
            raw_free(r, &g_prev, g_prev_size);
            g_prev = gf;
            g_prev_size = gf ? full : 0;
        }
    }
    raw_free(r, &g_prev, g_prev_size);
}

/* The loss of a model that upcasts and shifts in its forward (EST_HF_LOSS_UPCAST)
 * after its moment, as transformers 4.45 (modeling_llama.py), the unsloth kernel
 * (fms-acceleration 733992a kernels/unsloth/cross_entropy_loss.py) and autograd (torch
 * 2.4.1) run it: the fp32 logits are the outputs the Trainer drops before backward, and the
 * per-token pieces (losses, logsumexp) go with the loss's backward; nn.CrossEntropyLoss
 * keeps only its log-softmax, so the shifted copy goes with the forward and
 * _log_softmax_backward_data's gradient is made beside the log-softmax, while the kernel
 * writes its gradient into the shifted copy it saved; then SliceBackward's zeros of the
 * unshifted shape beside the shifted gradient, and ToCopyBackward's 16-bit gradient beside
 * those.  Each only while no more is live than at the moment. */
static void upcast_loss_backward(struct replay *r, struct plan *p, bool kernel)
{
    uint64_t limit = r->cur, shifted = p->size[1];
    struct gm_alloc_block *g = NULL, *z = NULL, *g16 = NULL, *dx = NULL;
    size_t n = n_pieces(r, p, 0), kept = kernel ? 2 : 3;
    t_free(r, p, 0);
    for (size_t k = kept; k < n; k++)
        t_free(r, p, k);
    if (!kernel) {
        t_free(r, p, 1);
        if (r->cur + shifted <= limit)
            g = raw_alloc(r, shifted);
        t_free(r, p, 2);
    }
    if (r->cur + r->logits_32 <= limit)
        z = raw_alloc(r, r->logits_32);
    t_free(r, p, 1);
    raw_free(r, &g, shifted);
    if (r->upcast16 && r->cur + r->logits_16 <= limit)
        g16 = raw_alloc(r, r->logits_16);
    raw_free(r, &z, r->logits_32);
    /* the head's MmBackward: the gradient of its input, a hidden-state-wide tensor, made
     * before the logits' gradient goes (where the forward held that input, in its hole) */
    if (r->cur + r->b_h <= limit)
        dx = raw_alloc(r, r->b_h);
    raw_free(r, &g16, r->logits_16);
    raw_free(r, &dx, r->b_h);
}

/* The model's own cross-entropy (EST_HF_LOSS_INLINE: GPT-2, GPT-NeoX, Falcon before 4.46,
 * GPTBigCode) after its moment, as transformers (modeling_gpt_bigcode.py) and autograd run
 * it: the shifted copy and (under autocast) its fp32 cast are not saved; under mixed precision the
 * Trainer's forward returns an fp32 copy of the logits (accelerate convert_to_fp32, v1.0.1) in
 * place of the 16-bit ones, dropped before backward; then nll_loss_backward's zeros of the
 * log-softmax's shape, _log_softmax_backward_data's gradient beside them and the kept log-softmax,
 * the cast's gradient back in the compute dtype, and the slice's: zeros of the logits' shape.  Each
 * only while no more is live than at the moment. */
static void inline_loss_backward(struct replay *r, struct plan *p)
{
    uint64_t limit = r->cur;
    struct gm_alloc_block *g1 = NULL, *g2 = NULL, *g16 = NULL, *z = NULL, *c32 = NULL;
    size_t ls = r->inline_mixed ? 3 : 2;
    uint64_t ls_size = p->size[ls];
    t_free(r, p, 1);
    if (r->inline_mixed)
        t_free(r, p, 2);
    if (r->fp32_outputs && r->cur + r->logits_32 <= limit)
        c32 = raw_alloc(r, r->logits_32);
    t_free(r, p, 0);
    raw_free(r, &c32, r->logits_32);
    if (!p->addr[ls])
        return;
    if (r->cur + 2 * ls_size <= limit) {
        g1 = raw_alloc(r, ls_size);
        g2 = raw_alloc(r, ls_size);
    }
    raw_free(r, &g1, ls_size);
    t_free(r, p, ls);
    if (r->inline_mixed && g2 && r->cur + r->logits_16_shifted <= limit) {
        g16 = raw_alloc(r, r->logits_16_shifted);
        raw_free(r, &g2, ls_size);
    }
    if (r->cur + r->logits_16 <= limit)
        z = raw_alloc(r, r->logits_16);
    raw_free(r, &g2, ls_size);
    raw_free(r, &g16, r->logits_16_shifted);
    raw_free(r, &z, r->logits_16);
}

/* One layer's backward after the moment its recomputed tensors and its largest gradients
 * of activations are all live: those gradients freed, then the saved tensors released in
 * reverse order of the forward, each after the gradient of what produced it (a tensor of
 * its shape) has been made -- never more live than at the moment. */
static void backward_layer(struct replay *r, struct plan *pl, size_t n)
{
    uint64_t limit = r->cur, g_size = 0;
    struct gm_alloc_block *g = NULL;
    for (size_t i = n; i-- > 0;)
        if (pl[i].life == LIFE_LAYER_BWD && pl[i].c->kind == GM_KIND_BACKWARD_TEMP)
            unit_free(r, &pl[i], 0);
    for (size_t i = n; i-- > 0;) {
        struct plan *p = &pl[i];
        if (p->life != LIFE_LAYER_BWD || p->c->kind != GM_KIND_ACTIVATIONS || p->prof != PROF_ACTS)
            continue;
        for (size_t k = p->per_unit; k-- > 0;) {
            uint64_t size = p->size[k];
            struct gm_alloc_block *next = NULL;
            if (!p->addr[k])
                continue;
            if (r->cur + size <= limit)
                next = raw_alloc(r, size);
            t_free(r, p, k);
            raw_free(r, &g, g_size);
            g = next;
            g_size = next ? size : 0;
        }
    }
    raw_free(r, &g, g_size);
}

/* The cache block of --loss fused (r->loss_block), at the first step's loss with the loss's
 * logits tensors live: one fp32 copy of the logits asked for and freed at once, so that the
 * allocator makes a segment of that size (no free block of it: the logits blocks are taken)
 * and keeps it cached, where later requests may use it and where freeing the cache on a
 * failed cudaMalloc releases it.  Not a tensor of the job: the bytes live stay as they
 * are, and the allocator's allocated peak leaves its instant out (the peaks up to it are
 * kept, then reset).  Measured, not read in code: fms-acceleration's FOAK runs hold about
 * one fp32 copy of the logits more than the replay of the code read (docs/estimate.md, "The
 * FOAK runs' cache block").  Where the device has no room for its segment it is left out:
 * near the capacity a cudaMalloc fails first and the allocator frees its cache. */
static void loss_cache_block(struct replay *r)
{
    struct gm_alloc_stats s;
    struct gm_alloc_block *b = NULL;
    uint64_t ptr, alloc_peak, reserved;
    enum gm_status st;
    if (r->st || r->oom || !r->loss_block)
        return;
    if (r->capacity && r->reserved_cur + r->loss_block_segment > r->capacity) {
        r->loss_block_no_room = true;
        return;
    }
    gm_alloc_get_stats(r->a, &s);
    alloc_peak = s.allocated_bytes[GM_ALLOC_STAT_ALL].peak;
    reserved = s.reserved_bytes[GM_ALLOC_STAT_ALL].current;
    r->where.request = r->loss_block;
    r->where.live = r->cur;
    r->where.measured = true;
    st = gm_alloc_malloc_block(r->a, r->loss_block, GM_EST_STREAM_COMPUTE, &ptr, &b, NULL);
    r->where.measured = false;
    if (st == GM_ERR_LIMIT) {
        /* not reached: the room was checked above, for the segment the allocator makes
         * (est_loss_cache_block_applies() leaves expandable segments out, whose mapping
         * differs); the allocator has freed its cache and counted an out-of-memory by now,
         * which is no run's, so the replay stops rather than go on from there */
        r->st = gm_fail(r->err, GM_ERR_INTERNAL, GM_NO_OFFSET,
                        "step replay: the FOAK loss cache block failed on the capacity after "
                        "its room was checked");
        return;
    }
    if (st || (st = gm_alloc_dealloc_block(r->a, b, r->err)) != GM_OK) {
        r->st = st ? st : GM_ERR_NOMEM;
        return;
    }
    gm_alloc_get_stats(r->a, &s);
    if (alloc_peak > r->kept_allocated_peak)
        r->kept_allocated_peak = alloc_peak;
    if (s.reserved_bytes[GM_ALLOC_STAT_ALL].peak > r->kept_reserved_peak)
        r->kept_reserved_peak = s.reserved_bytes[GM_ALLOC_STAT_ALL].peak;
    gm_alloc_reset_peak(r->a);
    /* what the block added to the cache: a segment made for it (a cached free block of its
     * size would have taken it and added nothing) */
    r->loss_block_made = s.reserved_bytes[GM_ALLOC_STAT_ALL].current > reserved
                             ? s.reserved_bytes[GM_ALLOC_STAT_ALL].current - reserved
                             : 0;
}

static struct plan *find_life(struct plan *pl, size_t n, enum life life)
{
    for (size_t i = 0; i < n; i++)
        if (pl[i].life == life)
            return &pl[i];
    return NULL;
}

/* The cuBLAS workspace of handle k (0: the forward's thread, 1: autograd's device thread),
 * allocated when that thread runs its first GEMM (cublas.c): the first step's first layer
 * forward, and its loss's backward (the lm_head's gradient) or, where the loss takes the
 * head's gradient itself (head_gemm_in_backward false), the last layer's backward; kept for
 * the process. */
static void handle_workspace(struct replay *r, struct plan *pl, size_t n, size_t k)
{
    for (size_t i = 0; i < n; i++)
        if (pl[i].life == LIFE_HANDLE && k < pl[i].per_unit)
            t_alloc(r, &pl[i], k, pl[i].piece[k]);
}

static void one_step(struct replay *r, struct plan *pl, size_t n, bool first_step)
{
    size_t L = (size_t)r->layers;
    struct plan *prefetch = find_life(pl, n, LIFE_PREFETCH);
    struct plan *unshard = find_life(pl, n, LIFE_UNSHARD);
    /* FSDP1's reshard-only hooks hold every layer input and its gradient to the end of
     * backward (add_fsdp1_reentrant() in stage_parallel.c) */
    bool kept = find_life(pl, n, LIFE_KEPT_BWD) != NULL;

    /* forward */
    at(r, GM_EST_AT_FORWARD, 0);
    spans(r, pl, n, M_FORWARD, true);
    if (r->fwd_ops) /* the embedding's output: the first layer's checkpointed input */
        each(r, pl, n, LIFE_SAVED, 1, true);
    for (size_t u = 1; u <= L; u++) {
        at(r, GM_EST_AT_FORWARD, u);
        each(r, pl, n, LIFE_UNSHARD, 0, true);
        if (first_step && u == 1)
            handle_workspace(r, pl, n, 0);
        if (r->fwd_ops)
            forward_layer(r, pl, n, u);
        else
            each(r, pl, n, LIFE_SAVED, u, true);
        each(r, pl, n, LIFE_LOSS_LAYERS, u, true);
        each(r, pl, n, LIFE_UNSHARD, 0, false);
    }
    /* the loss, with the last layer prefetched for backward */
    at(r, GM_EST_AT_LOSS, 0);
    each(r, pl, n, LIFE_PREFETCH, 0, true);
    spans(r, pl, n, M_LOSS, true);
    each(r, pl, n, LIFE_BACKWARD, 0, true); /* made before the loss's backward runs */
    if (first_step && r->head_gemm_in_backward)
        handle_workspace(r, pl, n, 1);
    /* the model's forward returns with the loss: what its locals alone held goes
     * (gm_est_component.forward_local: the final norm's output, est_forward_holds_head_input) */
    for (size_t i = n; i-- > 0;)
        if (pl[i].life == LIFE_SPAN && pl[i].c->forward_local)
            all_free(r, &pl[i]);
    for (size_t i = 0; first_step && i < n; i++)
        if (pl[i].life == LIFE_SPAN && pl[i].prof == PROF_LOGITS && pl[i].addr[0]) {
            loss_cache_block(r);
            break;
        }
    for (size_t i = 0; i < n; i++)
        if (pl[i].life == LIFE_SPAN && pl[i].prof == PROF_LOGITS && pl[i].last == M_LOSS) {
            if (r->inline_ce)
                inline_loss_backward(r, &pl[i]);
            else if (r->upcast)
                upcast_loss_backward(r, &pl[i], r->upcast_kernel);
            else
                loss_backward(r, &pl[i]);
        }
    for (size_t u = L; u >= 1; u--)
        each(r, pl, n, LIFE_LOSS_LAYERS, u, false);
    spans(r, pl, n, M_LOSS, false);

    /* backward, last layer first */
    at(r, GM_EST_AT_BACKWARD, L);
    if (first_step && !r->head_gemm_in_backward)
        handle_workspace(r, pl, n, 1);
    spans(r, pl, n, M_BACKWARD, true);
    for (size_t u = L; u >= 1; u--) {
        at(r, GM_EST_AT_BACKWARD, u);
        /* with a prefetch, the current layer's parameters are the block prefetched while
         * the layer after it ran (at the loss for the last one), and the next layer's are
         * gathered now; without one, each layer gathers its own */
        if (!prefetch || u > 1)
            each(r, pl, n, LIFE_UNSHARD, 0, true);
        each(r, pl, n, LIFE_LAYER_BWD, 0, true);
        backward_layer(r, pl, n);
        /* the gradient of the layer's input, the last its backward makes
         * (CheckpointFunction.backward returns the detached input's .grad) */
        each(r, pl, n, LIFE_KEPT_BWD, u, true);
        for (size_t i = n; i-- > 0;)
            if (pl[i].life == LIFE_LAYER_BWD &&
                !(u == 1 && (pl[i].c->phases & GM_EST_PHASE_BACKWARD_END)))
                unit_free(r, &pl[i], 0);
        if (!kept)
            each(r, pl, n, LIFE_SAVED, u, false);
        if (u == L)
            gradients(r, pl, n, L + 1, first_step); /* the head's, from the loss's backward */
        gradients(r, pl, n, u, first_step);
        if (u == 1)
            gradients(r, pl, n, 0, first_step); /* the embedding's, last */
        if (prefetch) {
            /* the current layer resharded; the block gathered for the next becomes its
             * current one */
            unit_free(r, prefetch, 0);
            if (unshard && u > 1) {
                prefetch->addr[0] = unshard->addr[0];
                prefetch->size[0] = unshard->size[0];
                prefetch->blk[0] = unshard->blk[0];
                unshard->addr[0] = unshard->size[0] = 0;
                unshard->blk[0] = NULL;
            }
        }
        each(r, pl, n, LIFE_UNSHARD, 0, false);
        if (r->st || r->oom)
            return;
    }
    if (kept) /* _finalize_params removes the hooks in the post-backward final callback */
        for (size_t u = 1; u <= L; u++) {
            each(r, pl, n, LIFE_KEPT_BWD, u, false);
            each(r, pl, n, LIFE_SAVED, u, false);
        }
    spans(r, pl, n, M_BACKWARD, false);
    each(r, pl, n, LIFE_BACKWARD, 0, false);
    if (r->fsdp1_frees)
        step_synced(r);

    /* end of backward, optimizer step, zero_grad */
    at(r, GM_EST_AT_OPTIMIZER, 0);
    spans(r, pl, n, M_BACKWARD_END, true);
    each(r, pl, n, LIFE_LAYER_BWD, 0, false);
    spans(r, pl, n, M_BACKWARD_END, false);
    if (first_step)
        for (size_t i = 0; i < n; i++)
            if (pl[i].life == LIFE_STATE)
                all_alloc(r, &pl[i]);
    spans(r, pl, n, M_STEP, true);
    spans(r, pl, n, M_STEP, false);
    for (size_t i = n; i-- > 0;)
        if (pl[i].life == LIFE_GRAD)
            all_free(r, &pl[i]);
}

/* A replay ready to run: the shapes and the plans of cx->e's components, before any
 * tensor is allocated.  Running it reads nothing else, so these are its inputs. */
struct prepared {
    struct gm_alloc_conf conf;
    struct replay r;
    struct plan *pl; /* room for a plan per component of cx->e */
    size_t n;        /* plans */
    size_t slots;    /* address slots of all plans */
    uint64_t bytes;  /* of all the plans' components */
};

static enum gm_status prepare(struct est_ctx *cx, struct prepared *pr, struct gm_error *err)
{
    struct gm_estimate *e = cx->e;
    struct replay *r = &pr->r;

    memset(pr, 0, sizeof *pr);
    pr->conf = cx->job->runtime.alloc;
    pr->pl = gm_calloc(e->n_components ? e->n_components : 1, sizeof(*pr->pl));
    if (!pr->pl)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "step replay: out of memory");
    r->err = err;
    r->trace = cx->trace;
    r->trace_ctx = cx->trace_ctx;
    r->req_trace = cx->req_trace;
    r->req_trace_ctx = cx->req_trace_ctx;
    r->layers = cx->m->n_layers;
    r->blas_handles = est_torch_cublas_handles(cx->job);
    r->head_gemm_in_backward = cx->job->memory.loss != GM_LOSS_FUSED_LINEAR;
    r->fsdp1_frees = cx->job->parallel.shard == GM_SHARD_FSDP &&
                     cx->job->parallel.fsdp_version == 1 && est_data_parallel(cx->job) > 1;
    /* whether the compute stream has already run past the last reshard when the CPU asks
     * for the next gather: nothing in between synchronises (the rate limiter waits for the
     * reshard before that one), so in the point estimate it has not */
    if (r->fsdp1_frees)
        r->lag = (enum lag)est_uncertain(cx, GM_UNCERTAIN_STREAM_TIMING, false, (double)LAG_LIMITER,
                                         (double)LAG_NONE, (double)LAG_LIMITER);
    r->fsdp1_wrap = r->fsdp1_frees && est_fsdp1_hf(cx->job);
    r->sync_states = cx->job->parallel.sync_module_states;
    r->dp = est_data_parallel(cx->job);
    plan_shapes(cx, r);
    for (size_t i = 0; i < e->n_components; i++) {
        const struct gm_est_component *c = &e->components[i];
        struct plan *p;
        if (gm_est_kind_outside_allocator(c->kind) || !c->bytes ||
            !(c->phases & GM_EST_PHASE_TRAIN_ALL))
            continue;
        p = &pr->pl[pr->n++];
        memset(p, 0, sizeof *p);
        p->c = c;
        plan_component(cx, p);
        /* per unit of the model (embedding, layers, head), or one unit */
        p->n_units = c->extent == GM_EXTENT_ALL_LAYERS && p->life != LIFE_LAYER_BWD &&
                             p->life != LIFE_UNSHARD && p->life != LIFE_PREFETCH
                         ? (size_t)r->layers + 2
                         : 1;
        p->per_unit = n_pieces(r, p, 1) > n_pieces(r, p, 0) ? n_pieces(r, p, 1) : n_pieces(r, p, 0);
        pr->slots += p->n_units * p->per_unit;
        pr->bytes = gm_add_sat(pr->bytes, c->bytes);
    }
    return GM_OK;
}

/* Where a step starts: the allocator's state (gm_alloc_state()), every slot of the plans,
 * the bytes live, and the counts the run reports.  The arrays are kept from step to step and
 * replay to replay (the estimate's kept model holds two), grown as needed. */
struct step_start {
    bool taken;      /* the state and the slots, not only the counts */
    uint64_t *words; /* cap_words of them, n_words written */
    size_t n_words, cap_words;
    uint64_t *slots; /* the plans' slot arrays, copied (cap_slots words) */
    size_t cap_slots;
    uint64_t cur, mallocs;
    uint64_t dev_allocs, dev_frees, retries; /* the device's segments, the retries so far */
};

static void step_start_release(struct step_start *m)
{
    gm_free(m->words);
    gm_free(m->slots);
    memset(m, 0, sizeof(*m));
}

/* the counts at the start of a step, the state not (yet) taken */
static void step_start_counts(const struct replay *r, struct step_start *m)
{
    struct gm_alloc_stats stats;
    gm_alloc_get_stats(r->a, &stats);
    m->taken = false;
    m->cur = r->cur;
    m->mallocs = r->mallocs;
    m->dev_allocs = stats.num_device_alloc;
    m->dev_frees = stats.num_device_free;
    m->retries = stats.num_alloc_retries;
}

/* the step between 'prev' and 'now' began with the bytes live it ended with and never went
 * to the device (no segment made or freed, no retry) */
static bool step_counts_repeat(const struct step_start *prev, const struct step_start *now)
{
    return prev->cur == now->cur && prev->dev_allocs == now->dev_allocs &&
           prev->dev_frees == now->dev_frees && prev->retries == now->retries;
}

/* the state too; false when it cannot be taken (then no step is skipped) */
static bool step_start_state(const struct replay *r, const uint64_t *mem, size_t n_mem,
                             struct step_start *m)
{
    if (gm_alloc_state(r->a, &m->words, &m->n_words, &m->cap_words, NULL) != GM_OK ||
        !GM_VEC_RESERVE(m->slots, m->cap_slots, n_mem, NULL))
        return false;
    memcpy(m->slots, mem, n_mem * sizeof(*mem));
    m->taken = true;
    return true;
}

/* Whether the step that began at 'prev' and ended at 'now' will repeat itself, request for
 * request: it began in the same state (allocator, tensors, bytes live) and never went to
 * the device, so the next one makes the same requests of the same state and gets the same
 * answers, and the peaks it reaches are the ones already reached. */
static bool step_repeats(const struct step_start *prev, const struct step_start *now, size_t n_mem)
{
    return prev->taken && now->taken && step_counts_repeat(prev, now) &&
           prev->n_words == now->n_words &&
           memcmp(prev->words, now->words, now->n_words * sizeof(*now->words)) == 0 &&
           memcmp(prev->slots, now->slots, n_mem * sizeof(*now->slots)) == 0;
}

/* The allocator model a run leaves for the next (gm_alloc_reset()), with the device it
 * runs on: what its bookkeeping took is taken once per estimate, not once per replay. */
struct kept_alloc {
    struct gm_alloc *a; /* NULL: none yet */
    struct gm_alloc_fakedev fake;
    struct step_start starts[2]; /* run_prepared()'s, kept for their arrays */
    struct plan *pl;             /* run_prepared()'s plans (cap_pl) and slots (cap_mem words) */
    size_t cap_pl;
    uint64_t *mem;
    size_t cap_mem;
    struct gm_alloc_block **blk; /* the slots' blocks (cap_blk) */
    size_t cap_blk;
};

static void kept_alloc_release(struct kept_alloc *k)
{
    gm_alloc_free(k->a);
    step_start_release(&k->starts[0]);
    step_start_release(&k->starts[1]);
    gm_free(k->pl);
    gm_free(k->mem);
    gm_free(k->blk);
    memset(k, 0, sizeof(*k));
}

/* Run the prepared replay on a device of 'capacity' bytes (0: no limit); 'pass' tells the
 * segment trace which run it sees; 'keep' (NULL: none) lends the model and takes it back. */
static enum gm_status run_prepared(const struct prepared *pr, uint64_t capacity, unsigned pass,
                                   struct kept_alloc *keep, struct gm_est_replay *out,
                                   struct gm_error *err)
{
    struct replay r = pr->r;
    struct kept_alloc own = {0}, *k = keep ? keep : &own;
    struct gm_alloc_fakedev *fake = &k->fake;
    struct step_start *prev = &k->starts[0], *now = &k->starts[1];
    bool repeat;
    struct gm_alloc_device dev;
    struct gm_alloc_stats stats;
    size_t n = pr->n, off = 0;
    struct plan *pl;
    uint64_t *mem;
    enum gm_status st;

    memset(out, 0, sizeof *out);
    if (!n)
        return GM_OK;
    r.err = err;
    r.where.pass = pass;
    r.plans = NULL;
    r.n_plans = 0;
    r.loss_block_segment =
        r.loss_block ? gm_alloc_segment_size(gm_alloc_round_size(&pr->conf, r.loss_block)) : 0;
    /* arrays the kept model's runs share: fresh ones would be fresh pages each run */
    if (!GM_VEC_RESERVE(k->pl, k->cap_pl, n, NULL) ||
        !GM_VEC_RESERVE(k->mem, k->cap_mem, 3 * pr->slots, NULL) ||
        !GM_VEC_RESERVE(k->blk, k->cap_blk, pr->slots, NULL)) {
        kept_alloc_release(&own);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "step replay: out of memory");
    }
    pl = k->pl;
    mem = k->mem;
    memset(mem, 0, 2 * pr->slots * sizeof(*mem)); /* addresses and sizes; pieces set below */
    for (size_t i = 0; i < pr->slots; i++)
        k->blk[i] = NULL;
    memcpy(pl, pr->pl, n * sizeof(*pl));
    r.plans = pl;
    r.n_plans = n;
    for (size_t i = 0; i < n; i++) {
        pl[i].addr = mem + off;
        pl[i].size = mem + pr->slots + off;
        pl[i].piece = mem + 2 * pr->slots + off;
        pl[i].blk = k->blk + off;
        for (size_t u = 0, per = pl[i].per_unit; u < pl[i].n_units; u++) {
            uint64_t ub = unit_bytes(&r, &pl[i], u);
            size_t np = n_pieces(&r, &pl[i], u);
            /* the layers but the last hold the same bytes: the same pieces */
            if (u >= 2 && u <= r.layers && ub == unit_bytes(&r, &pl[i], u - 1)) {
                memcpy(pl[i].piece + u * per, pl[i].piece + (u - 1) * per,
                       np * sizeof(*pl[i].piece));
                continue;
            }
            for (size_t j = 0; j < np; j++)
                pl[i].piece[u * per + j] = piece_bytes(&r, &pl[i], u, j, ub);
        }
        off += pl[i].n_units * pl[i].per_unit;
    }
    dev.ops = &gm_alloc_fakedev_ops;
    dev.ctx = fake;
    dev.total_bytes = capacity ? capacity : EST_MAX_BYTES;
    /* expandable segments reserve a virtual range of 1.125 x the device per stream and pool,
     * a byte per page: without a limit, a device with room for every tensor of the job four
     * times over and 16 GiB of temporaries (a range that runs out fails as a full device) */
    if (!capacity && pr->conf.expandable_segments)
        dev.total_bytes = gm_add_sat(gm_mul_sat(pr->bytes, 4), 16 * GM_GIB);
    /* the kept model gives its segments back to the device it ran on before that one
     * starts again */
    if (k->a)
        st = gm_alloc_reset(r.a = k->a, &pr->conf, &dev, err);
    else if ((st = gm_alloc_new(&pr->conf, &dev, &r.a, err)) == GM_OK)
        k->a = r.a;
    if (st != GM_OK) {
        kept_alloc_release(&own);
        return st;
    }
    gm_alloc_fakedev_init(fake, capacity);
    gm_alloc_set_event_hook(r.a, on_segment, &r);
    /* the peaks and the counts below are all it reads */
    if ((st = gm_alloc_set_lean(r.a, err)) != GM_OK) {
        kept_alloc_release(&own);
        return st;
    }

    if (r.fsdp1_wrap)
        r.fsdp1_wrap = fsdp1_wrap(&r, pl, n);
    at(&r, GM_EST_AT_SETUP, 0);
    for (size_t i = 0; i < n; i++)
        if (pl[i].life == LIFE_PERSISTENT)
            all_alloc(&r, &pl[i]);
    /* A warm cache often settles: a step that starts where the one before started (and met
     * no device) is the one before again, so it is counted, not run.  Not with what the
     * state's words leave out (expandable segments, FSDP1's events) or a segment trace. */
    repeat = !r.fsdp1_frees && !r.trace && !pr->conf.expandable_segments;
    prev->taken = now->taken = false;
    for (unsigned s = 0; s < STEPS && !r.st && !r.oom; s++) {
        r.where.step = s;
        if (repeat && s >= 1) {
            struct step_start *t = prev;
            prev = now;
            now = t;
            step_start_counts(&r, now);
            /* the state, to compare with the last step's, or for the next step to compare */
            if ((prev->taken && step_counts_repeat(prev, now)) || s + 1 < STEPS) {
                if (!step_start_state(&r, mem, 3 * pr->slots, now)) {
                    repeat = false;
                } else if (s >= 2 && step_repeats(prev, now, 3 * pr->slots)) {
                    r.mallocs += (STEPS - s) * (now->mallocs - prev->mallocs);
                    out->steps = STEPS;
                    out->steps_counted = STEPS - s;
                    break;
                }
            }
        }
        one_step(&r, pl, n, s == 0);
        out->steps = s + 1;
    }
    gm_alloc_get_stats(r.a, &stats);
    st = r.st;
    out->used = st == GM_OK;
    out->mallocs = r.mallocs;
    out->requested_peak = r.peak;
    out->allocated_peak = stats.allocated_bytes[GM_ALLOC_STAT_ALL].peak;
    out->reserved_peak = stats.reserved_bytes[GM_ALLOC_STAT_ALL].peak;
    if (r.kept_allocated_peak > out->allocated_peak) /* the peaks before loss_cache_block() */
        out->allocated_peak = r.kept_allocated_peak;
    if (r.kept_reserved_peak > out->reserved_peak)
        out->reserved_peak = r.kept_reserved_peak;
    out->loss_cache_block = r.loss_block_made;
    out->loss_cache_no_room = r.loss_block_no_room;
    out->capacity_bytes = capacity;
    out->segments = stats.num_device_alloc;
    out->retries = stats.num_alloc_retries;
    out->oom = r.oom;
    if (r.oom) {
        out->failed.request = r.failed.request;
        out->failed.live = r.failed.live;
        out->failed.step = r.failed.step;
        out->failed.at = r.failed.at;
        out->failed.layer = r.failed.layer;
        out->failed.stream = r.failed.stream;
        out->failed.kind = r.failed_c ? r.failed_c->kind : GM_KIND__COUNT;
        out->failed.reserved = r.fail_reserved;
        out->failed.allocated = r.fail_allocated;
        out->failed.largest_free = r.fail_largest_free;
        out->failed.segment = r.fail_segment;
        out->failed.segment_live = r.fail_segment_live;
        out->failed.pin_bytes = r.fail_pin_bytes;
        out->failed.pin_kind = r.fail_pin_c ? r.fail_pin_c->kind : GM_KIND__COUNT;
        out->failed.pin_layer = r.fail_pin_c && r.fail_pin_unit >= 1 &&
                                        r.fail_pin_unit <= r.layers &&
                                        r.fail_pin_c->extent == GM_EXTENT_ALL_LAYERS
                                    ? (unsigned)r.fail_pin_unit
                                    : 0;
    }
    out->wrap = r.fsdp1_wrap;
    out->wrap_synced = r.fsdp1_wrap && r.sync_states;
    memcpy(out->stream_reserved, r.stream_peak, sizeof out->stream_reserved);
    memcpy(out->stream_live_peak, r.stream_live_peak, sizeof out->stream_live_peak);
    out->expandable = pr->conf.expandable_segments;
    kept_alloc_release(&own);
    return st;
}

/* ---- replays already run ---- */

/* A suggestion search runs the same job shape many times (a larger GPU changes only the
 * capacity; a job that does not fit asks for its replay without the limit again), so an
 * estimate keeps the replays run into it, by their inputs as bytes: the prepared shapes
 * (pointers cleared) and each plan with its component's contents.  Equal bytes, equal
 * replay: the run reads nothing else.  Room for every shape one suggestion search runs
 * (a training job's candidates and their combinations are some twenty to thirty): with
 * fewer, the base's own replay is gone again before the larger GPUs ask for it. */
#define MEMO_MAX 64

struct memo_ent {
    uint8_t *key;
    size_t len;        /* bytes of key */
    uint64_t capacity; /* bytes, 0 = no limit */
    struct gm_est_replay out;
};

struct est_replay_memo {
    size_t n;    /* entries used */
    size_t next; /* the entry a new replay replaces once all are used */
    struct memo_ent ent[MEMO_MAX];
    uint64_t runs[2];       /* replays run into it, not answered from it: at a capacity, without */
    struct kept_alloc kept; /* the model the replays run into this estimate share */
};

void est_replay_memo_free(struct est_replay_memo *m)
{
    if (!m)
        return;
    kept_alloc_release(&m->kept);
    for (size_t i = 0; i < m->n; i++)
        gm_free(m->ent[i].key);
    gm_free(m);
}

/* The inputs of 'pr' as bytes (*len of them), owned by the caller; NULL when out of memory
 * (the replay then runs unremembered). */
static uint8_t *memo_key(const struct prepared *pr, size_t *len)
{
    size_t each = sizeof(struct plan) + sizeof(struct gm_est_component);
    uint8_t *key = gm_malloc(sizeof pr->conf + sizeof(struct replay) + pr->n * each), *k = key;
    struct replay r;
    if (!key)
        return NULL;
    memcpy(k, &pr->conf, sizeof pr->conf);
    k += sizeof pr->conf;
    memcpy(&r, &pr->r, sizeof r);
    r.err = NULL;
    r.trace = NULL;
    r.trace_ctx = NULL;
    r.req_trace = NULL;
    r.req_trace_ctx = NULL;
    r.plans = NULL;
    memcpy(k, &r, sizeof r);
    k += sizeof r;
    for (size_t i = 0; i < pr->n; i++) {
        struct plan p;
        memcpy(&p, &pr->pl[i], sizeof p);
        p.c = NULL;
        memcpy(k, &p, sizeof p);
        memcpy(k + sizeof p, pr->pl[i].c, sizeof(*pr->pl[i].c));
        k += each;
    }
    *len = (size_t)(k - key);
    return key;
}

static const struct gm_est_replay *memo_find(const struct est_replay_memo *m, const uint8_t *key,
                                             size_t len, uint64_t capacity)
{
    for (size_t i = 0; m && i < m->n; i++)
        if (m->ent[i].capacity == capacity && m->ent[i].len == len &&
            memcmp(m->ent[i].key, key, len) == 0)
            return &m->ent[i].out;
    return NULL;
}

/* Keep a copy of 'key' and 'out' in *mp; nothing when out of memory (only a later run
 * repeats the work). */
static void memo_put(struct est_replay_memo **mp, const uint8_t *key, size_t len, uint64_t capacity,
                     const struct gm_est_replay *out)
{
    struct est_replay_memo *m = *mp;
    struct memo_ent *e;
    uint8_t *copy;
    if (!m && !(m = *mp = gm_calloc(1, sizeof(*m))))
        return;
    if (!(copy = gm_malloc(len)))
        return;
    memcpy(copy, key, len);
    if (m->n < MEMO_MAX) {
        e = &m->ent[m->n++];
    } else {
        e = &m->ent[m->next];
        m->next = (m->next + 1) % MEMO_MAX;
        gm_free(e->key);
    }
    e->key = copy;
    e->len = len;
    e->capacity = capacity;
    e->out = *out;
}

uint64_t est_step_replay_runs(const struct gm_estimate *e, bool free_runs)
{
    return e->store->replays ? e->store->replays->runs[free_runs] : 0;
}

void est_replay_memo_copy(struct est_replay_memo **to, const struct est_replay_memo *from)
{
    for (size_t i = 0; from && i < from->n; i++)
        memo_put(to, from->ent[i].key, from->ent[i].len, from->ent[i].capacity, &from->ent[i].out);
}

/* The prepared replay at 'capacity': remembered, or run (and remembered when 'key'). */
static enum gm_status replay_at(struct est_ctx *cx, const struct prepared *pr, const uint8_t *key,
                                size_t len, uint64_t capacity, unsigned pass,
                                struct gm_est_replay *out, struct gm_error *err)
{
    struct est_replay_memo **mp = cx->replays; /* NULL: nothing remembered (then no key) */
    const struct gm_est_replay *seen = mp && key ? memo_find(*mp, key, len, capacity) : NULL;
    enum gm_status st;
    if (seen) {
        *out = *seen;
        return GM_OK;
    }
    if (mp && !*mp)
        *mp = gm_calloc(1, sizeof(**mp)); /* NULL: the run takes its own model */
    if (mp && *mp)
        (*mp)->runs[capacity == 0]++;
    st = run_prepared(pr, capacity, pass, mp && *mp ? &(*mp)->kept : NULL, out, err);
    if (st == GM_OK && mp && key)
        memo_put(mp, key, len, capacity, out);
    return st;
}

/* The replay on a device of 'capacity' bytes from the one without a limit, 'free_run', where
 * that one settles it: true with *out filled.  Below the capacity all along, the device never
 * refused a request, so the limited replay is the same run (the capacity is only a limit: the
 * allocator reads the device's size only for expandable segments).  With more bytes live at
 * once than the capacity (allocated_peak: blocks, at least the bytes asked for), the limited
 * replay runs out of memory for certain; what it reserves is free_run's, only how many
 * retries came first is unknown, and a probe (est_run_point()) does not ask. */
static bool settled_by_free_run(const struct est_ctx *cx, const struct prepared *pr,
                                const struct gm_est_replay *free_run, uint64_t capacity,
                                struct gm_est_replay *out)
{
    if (pr->conf.expandable_segments)
        return false;
    if (free_run->reserved_peak <= capacity) {
        *out = *free_run;
        out->capacity_bytes = capacity;
        return true;
    }
    if (cx->reads != EST_READS_ALL && free_run->allocated_peak > capacity) {
        *out = *free_run;
        out->capacity_bytes = capacity;
        out->retries = 0;
        out->oom = true;
        return true;
    }
    return false;
}

enum gm_status est_step_replay(struct est_ctx *cx, uint64_t capacity, struct gm_est_replay *out,
                               struct gm_error *err)
{
    struct gm_est_replay free_run;
    struct prepared pr;
    uint8_t *key = NULL;
    size_t len = 0;
    bool have_free = false;
    enum gm_status st;

    if ((st = prepare(cx, &pr, err)) != GM_OK)
        return st;
    /* the cache block's room is the GPU's, in the run without the limit too: what that run
     * reserves for a job that does not fit holds no cache the device had no room for (a
     * replay without the block stays one for every GPU) */
    if (pr.r.loss_block)
        pr.r.capacity = capacity;
    /* a traced run reports every segment as it is made: it always runs, limited first */
    if (!cx->trace && !cx->req_trace && cx->replays && pr.n)
        key = memo_key(&pr, &len);
    /* Only the verdict read: the replay at the capacity answers it alone.  One that never
     * runs out of memory is the answer (the one without the limit would be the same run
     * where it stays below the capacity, or run out of memory where it does not).  One that
     * runs out of memory does not fit: without the limit it reserves more than the capacity
     * (below it all along, the device would never have refused), and that lower bound is all
     * it says, where an estimate would run the replay without the limit for its figures.
     * Expandable segments read the device's size: not the same run (settled_by_free_run()).
     * Where the replay without the limit is remembered, that one answers below. */
    if (capacity && cx->reads == EST_READS_VERDICT && !pr.conf.expandable_segments &&
        !(key && memo_find(*cx->replays, key, len, 0))) {
        st = replay_at(cx, &pr, key, len, capacity, 0, out, err);
        if (st == GM_OK && out->oom && out->reserved_peak <= capacity)
            out->reserved_peak = gm_add_sat(capacity, 1);
        goto out_free;
    }
    /* remembered at the capacity (run for a verdict) without running out of memory, the
     * replay is the answer: the one below that would run it again, or run the one without
     * the limit where that is the same run */
    if (key && capacity) {
        const struct gm_est_replay *seen = memo_find(*cx->replays, key, len, capacity);
        if (seen && !seen->oom) {
            *out = *seen;
            goto out_free;
        }
    }
    /* remembered, the replay without the limit is the cheap one to ask first */
    if (key && capacity) {
        if ((st = replay_at(cx, &pr, key, len, 0, 1, &free_run, err)) != GM_OK)
            goto out_free;
        have_free = true;
        if (settled_by_free_run(cx, &pr, &free_run, capacity, out))
            goto out_free;
    }
    st = replay_at(cx, &pr, key, len, capacity, 0, out, err);
    if (st != GM_OK || !out->oom || !capacity)
        goto out_free;
    /* a request failed even after freeing the cache: the job does not fit; what it would
     * reserve is the replay without the limit */
    if (!have_free && (st = replay_at(cx, &pr, key, len, 0, 1, &free_run, err)) != GM_OK)
        goto out_free;
    free_run.capacity_bytes = out->capacity_bytes;
    free_run.retries = out->retries;
    free_run.oom = true;
    free_run.failed = out->failed;
    *out = free_run;
out_free:
    gm_free(key);
    gm_free(pr.pl);
    return st;
}
