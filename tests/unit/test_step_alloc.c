/* SPDX-License-Identifier: MIT */
/* test_step_alloc.c - peak reserved from the training step replayed through the
 * caching-allocator model (src/estimate/step_alloc.c): the replay's largest sum of live
 * tensors is exactly the estimate's peak allocated for every kind of training job; FSDP's
 * all-gather and reduce-scatter streams cache their own blocks; FSDP1's frozen units keep
 * the gradients of the layer inputs, each made by its layer's backward; FSDP1's gathered layers,
 * freed after record_stream, come back only once the compute stream is done with them;
 * GPTBigCode's own loss under autocast reserves a third fp32 segment of the shifted logits;
 * a model that upcasts its logits itself (transformers before 4.46) takes a segment for its
 * 16-bit logits beside those of the fp32 logits and their shifted copy; --loss fused keeps
 * the fp32 logits-sized block measured on FOAK's runs in the cache, where there is room;
 * FOAK's fused LoRA drops out q/k/v's and o's inputs in a checkpointed layer's forward (a
 * mask's segment and three copies), and its layer inputs then take those blocks;
 * near the capacity the allocator frees its cache and retries, and a job that cannot fit is
 * judged so; a replay remembered or answered from the one without a limit is the replay
 * run; a probe of the verdict alone stops at the capacity; where the replay does not apply
 * (inference, engines, --fragmentation given, pipeline stages) the factor rule stays; the segment
 * trace hands over every segment the replay takes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "estimate/estimate_int.h"
#include "gpumem/gpumem.h"
#include "job_settings.h"

#include <stdio.h>
#include <string.h>

static struct gm_estimate *est; /* large: off the stack */

static void run_traced(const char *model, const char *settings, struct gm_estimate **e,
                       gm_est_segment_fn fn, void *ctx)
{
    struct gm_job j;
    struct gm_error err;
    job_make(model, settings, &j);
    if (gm_estimate_run_traced(&j, e, fn, ctx, &err) != GM_OK)
        fail_msg("%s %s: %s", model, settings, err.msg);
}

static void run(const char *model, const char *settings, struct gm_estimate **e)
{
    run_traced(model, settings, e, NULL, NULL);
}

/* Training jobs of every shape the stages produce: the replay reproduces the estimate's
 * peak allocated to the byte (its tensors are the components, at each of the four moments
 * exactly those the estimate counts there), and reserved holds at least that.  FSDP1 under
 * the HF stack with a frozen base is the exception, with its own test
 * (test_fsdp1_kept_gradients_made_per_layer), so its QLoRA job here runs as a custom loop. */
static void test_requested_peak_is_peak_allocated(void **state)
{
    static const struct {
        const char *model, *settings;
    } jobs[] = {
        {"llama-3-8b", "--train --batch 2 --seq 2048"},
        {"llama-3-8b", "--train --batch 4 --seq 4096 --grad-checkpointing full --precision bf16"},
        {"mistral-7b", "--train --batch 4 --seq 4096 --grad-checkpointing full --precision bf16 "
                       "--lora --loss fused --fused-kernels rms_norm,rope"},
        {"mistral-7b", "--train --batch 4 --seq 4096 --grad-checkpointing full --qlora"},
        {"mistral-7b", "--train --batch 2 --seq 4096 --grad-checkpointing full --precision bf16 "
                       "--gpus 2 --fsdp"},
        {"mistral-7b", "--train --batch 2 --seq 4096 --grad-checkpointing full --gpus 8 --fsdp "
                       "--fsdp-version 2 --no-reshard-after-forward"},
        {"mistral-7b", "--train --batch 2 --seq 4096 --grad-checkpointing full --qlora --gpus 2 "
                       "--fsdp"},
        {"mistral-7b", "--train --batch 2 --seq 4096 --gpus 4 --zero 3"},
        {"mistral-7b", "--train --batch 2 --seq 4096 --gpus 4 --zero 2"},
        {"llama-3.2-1b", "--train --batch 8 --seq 1024 --gpus 4"},
        {"llama-3.2-1b", "--train --batch 8 --seq 1024 --optimizer-in-backward --loss chunked"},
        {"llama-3.2-1b", "--train --batch 8 --seq 1024 --grad-accum 4 --zero-grad zeros "
                         "--precision fp16-mixed"},
        {"llama-3.2-1b", "--train --batch 8 --seq 1024 --grad-checkpointing op --compile"},
        {"llama-3.2-1b", "--train --batch 8 --seq 1024 --grad-checkpointing selective "
                         "--attention eager --paged-optimizer --optimizer adamw-8bit"},
        {"llama-3.2-1b", "--train --batch 8 --seq 1024 --grad-checkpointing full "
                         "--checkpoint-every 2 --activation-offload"},
        {"mixtral-8x7b", "--train --batch 1 --seq 4096 --grad-checkpointing full --qlora"},
        {"qwen2.5-0.5b", "--train --batch 16 --seq 512 --tp 2 --gpus 2 --sequence-parallel"},
        {"bert-large-uncased", "--train --batch 4 --seq 512 --precision fp16-mixed "
                               "--optimizer-impl for-loop --zero-grad zeros --attention eager"},
        {"gpt2", "--train --batch 8 --seq 512 --precision fp32"},
        {"santacoder", "--train --batch 2 --seq 2048 --grad-checkpointing full --qlora "
                       "--transformers-version 4.48.1"},
        {"santacoder", "--train --batch 2 --seq 2048 --grad-checkpointing full --precision bf16 "
                       "--transformers-version 4.48.1"},
        {"mistral-7b", "--train --batch 4 --seq 4096 --grad-checkpointing full --precision "
                       "bf16-mixed --lora --transformers-version 4.45.2 --loss fused"},
        {"mistral-7b", "--train --batch 4 --seq 4096 --grad-checkpointing full --precision "
                       "bf16-mixed --lora --transformers-version 4.45.2"},
        {"llama-3.2-1b", "--train --batch 4 --seq 1024 --precision fp32 "
                         "--transformers-version 4.45.2 --loss fused"},
        {"gpt2", "--train --batch 8 --seq 1024 --precision bf16 --transformers-version 4.45.2"},
        {"gpt2", "--train --batch 8 --seq 1024 --transformers-version 4.45.2"},
        {"falcon-rw-1b", "--train --batch 2 --seq 2048 --grad-checkpointing full --precision "
                         "bf16 --transformers-version 4.45.2"},
        {"falcon-rw-1b", "--train --batch 2 --seq 2048 --grad-checkpointing full --lora "
                         "--transformers-version 4.45.2"},
        {"mistral-7b", "--train --batch 4 --seq 4096 --grad-checkpointing full --qlora "
                       "--lora-dropout 0.1 --fused-kernels rms_norm,rope,lora"},
        {"mistral-7b", "--train --batch 4 --seq 4096 --grad-checkpointing full --quant gptq "
                       "--lora --precision fp16-mixed --lora-dropout 0.1 --fused-kernels "
                       "rms_norm,rope,lora"},
    };
    int bad = 0;
    (void)state;
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
        run(jobs[i].model, jobs[i].settings, &est);
        if (!est->replay.used)
            fail_msg("%s %s: the replay was not used", jobs[i].model, jobs[i].settings);
        if (est->replay.requested_peak != est->peak_allocated_bytes && ++bad)
            print_error("%s %s: replay peak %llu, estimate %llu\n", jobs[i].model, jobs[i].settings,
                        (unsigned long long)est->replay.requested_peak,
                        (unsigned long long)est->peak_allocated_bytes);
        assert_true(est->replay.steps == 3);
        assert_true(est->replay.allocated_peak >= est->replay.requested_peak);
        assert_true(est->peak_reserved_bytes >= est->replay.allocated_peak);
        assert_true(est->peak_reserved_bytes == est->replay.reserved_peak ||
                    est->peak_reserved_bytes > est->replay.reserved_peak);
    }
    assert_int_equal(bad, 0);
}

/* Where a layer's gradients outgrow its saved activations (full fine-tuning on many FSDP
 * ranks: the sharded fp32 gradient of a layer is larger than its checkpointed input), the
 * first layer's backward runs beside nearly every gradient, above both moments of backward
 * the estimate counts.  The replay shows it; the estimate's peak allocated stays (its
 * end-of-backward moment leaves out the first layer's backward tensors). */
static void test_gradients_outgrow_activations(void **state)
{
    uint64_t kept = 0;
    (void)state;
    run("mistral-7b",
        "--train --batch 2 --seq 4096 --grad-checkpointing full --gpus 8 --fsdp "
        "--fsdp-version 2",
        &est);
    assert_true(est->replay.used);
    for (size_t i = 0; i < est->n_components; i++)
        if ((est->components[i].phases & GM_EST_PHASE_TRAIN_ALL) == GM_EST_PHASE_TRAIN_ALL &&
            !gm_est_kind_outside_allocator(est->components[i].kind))
            kept += est->components[i].bytes;
    assert_true(est->replay.requested_peak > est->peak_allocated_bytes);
    /* no more than the end of backward plus what the start of backward holds beyond the
     * tensors kept throughout */
    assert_true(est->replay.requested_peak <=
                est->backward_end_bytes + est->backward_start_bytes - kept);
    assert_true(est->peak_reserved_bytes >= est->replay.allocated_peak);
}

/* The first step's backward segments on the compute stream, by request size: the first
 * taken at the highest layer and the last at the lowest, with the bytes live before each. */
struct kept_segs {
    size_t n;
    struct {
        uint64_t request, hi_live, lo_live;
        unsigned hi_layer, lo_layer;
    } by[16];
};

static void kept_segment(void *ctx, const struct gm_est_replay_segment *seg)
{
    struct kept_segs *k = ctx;
    size_t i = 0;
    if (seg->step != 0 || seg->at != GM_EST_AT_BACKWARD || seg->stream != GM_EST_STREAM_COMPUTE)
        return;
    while (i < k->n && k->by[i].request != seg->request)
        i++;
    if (i == k->n) {
        if (k->n == 16)
            return;
        k->n++;
        k->by[i].request = seg->request;
        k->by[i].hi_layer = seg->layer;
        k->by[i].hi_live = seg->live;
    }
    k->by[i].lo_layer = seg->layer;
    k->by[i].lo_live = seg->live;
}

/* FSDP1 under the HF stack's reentrant checkpointing with a frozen base: the gradient of a
 * layer's input is made by that layer's backward, last (CheckpointFunction.backward runs
 * torch.autograd.backward on the recomputed layer and returns the detached input's .grad,
 * torch/utils/checkpoint.py), and the base unit's reshard-only hook keeps it and the input
 * until the post-backward final callback.  So the step's live bytes grow through backward
 * by one input gradient per layer (Mistral-7B, 4 x 4096 tokens: 128 MiB each) instead of
 * falling by one checkpointed input: the request that keeps taking segments as the kept
 * gradients fill the cache finds, at a layer b below a, at least (a - b) x 128 MiB more
 * live.  At the first layer's backward every kept gradient, every input and the sharded
 * adapter gradients of the layers done (31 of 32) are live: the replay's peak is the
 * estimate's plus those gradients. */
static void test_fsdp1_kept_gradients_made_per_layer(void **state)
{
    static const char *const job =
        "--train --batch 4 --seq 4096 --grad-checkpointing full --precision bf16-mixed --lora "
        "--gpus 2 --fsdp --transformers-version 4.45.2 --loss fused-linear";
    struct kept_segs k = {0};
    uint64_t each = 4ull * 4096 * 4096 * 2, grads;
    size_t best = 0;
    (void)state;
    run_traced("mistral-7b", job, &est, kept_segment, &k);
    assert_true(est->replay.used && !est->replay.oom);
    grads = gm_estimate_kind_bytes(est, GM_KIND_GRADIENTS);
    assert_true(grads > 0);
    assert_int_equal(est->replay.requested_peak, est->peak_allocated_bytes + grads - grads / 32);
    for (size_t i = 1; i < k.n; i++)
        if (k.by[i].hi_layer - k.by[i].lo_layer > k.by[best].hi_layer - k.by[best].lo_layer)
            best = i;
    assert_true(k.n > 0);
    assert_true(k.by[best].hi_layer >= k.by[best].lo_layer + 16);
    assert_true(k.by[best].lo_live - k.by[best].hi_live >=
                (uint64_t)(k.by[best].hi_layer - k.by[best].lo_layer) * each);
}

/* FSDP on two GPUs: the parameters are gathered on the all-gather stream and the sharded
 * gradients allocated on the reduce-scatter stream, so each stream holds segments of its
 * own; one GPU uses the compute stream alone. */
static void test_fsdp_streams(void **state)
{
    (void)state;
    run("mistral-7b",
        "--train --batch 2 --seq 4096 --grad-checkpointing full --precision bf16 "
        "--gpus 2 --fsdp",
        &est);
    assert_true(est->replay.used);
    assert_true(est->replay.stream_reserved[GM_EST_STREAM_UNSHARD] > 0);
    assert_true(est->replay.stream_reserved[GM_EST_STREAM_REDUCE] > 0);
    /* the sharded gradients are at least the reduce-scatter stream's segments */
    assert_true(est->replay.stream_reserved[GM_EST_STREAM_REDUCE] >=
                gm_estimate_kind_bytes(est, GM_KIND_GRADIENTS));
    run("mistral-7b", "--train --batch 2 --seq 4096 --grad-checkpointing full --precision bf16",
        &est);
    assert_true(est->replay.used);
    assert_int_equal(est->replay.stream_reserved[GM_EST_STREAM_UNSHARD], 0);
    assert_int_equal(est->replay.stream_reserved[GM_EST_STREAM_REDUCE], 0);
}

/* The allocator caches blocks (and, with expandable segments, maps pages) per stream
 * (pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp @ 001074d: BlockComparatorSize and
 * BlockComparatorAddress order by stream first; find_expandable_block() searches the request's
 * stream; ExpandableSegment is made for one stream), and FSDP2 allocates the sharded
 * gradients on the reduce-scatter stream (torch/distributed/fsdp/_fully_shard/
 * _fsdp_collectives.py @ 010ae4a, foreach_reduce: reduce_output under the reduce-scatter
 * stream, the gradients views of it).  So until the cache is freed each stream's segments
 * hold at least that stream's largest sum of live tensors, and reserved at least their sum:
 * the gradients, whole at the end of backward, stay reserved on their stream while the
 * compute stream's peak comes at the loss.  Expandable segments pack each stream into one
 * growing range: the gradients take their bytes in whole 20 MiB pages, and the whole replay
 * sits closer to the floor than the default allocator's does. */
static void test_stream_live_peaks_floor_reserved(void **state)
{
    static const char *const job = "--train --precision bf16-mixed --fsdp --fsdp-version 2 "
                                   "--grad-checkpointing op --batch 1 --seq 8192 --gpus 8 "
                                   "--gpu H100";
    const uint64_t page = (uint64_t)20 << 20;
    char settings[256];
    uint64_t floor[2], above[2];
    (void)state;
    for (int x = 0; x < 2; x++) {
        const struct gm_est_replay *r;
        snprintf(settings, sizeof settings, "%s%s", job,
                 x ? " --alloc-conf expandable_segments:True" : "");
        run("llama-3.1-8b", settings, &est);
        r = &est->replay;
        assert_true(r->used && !r->oom && r->retries == 0);
        assert_int_equal(r->expandable, x == 1);
        floor[x] = 0;
        for (size_t s = 0; s < GM_EST_STREAM__COUNT; s++) {
            assert_true(r->stream_reserved[s] >= r->stream_live_peak[s]);
            floor[x] += r->stream_live_peak[s];
        }
        /* the peaks of the streams come at different moments */
        assert_true(floor[x] > r->requested_peak);
        assert_true(r->reserved_peak >= floor[x]);
        above[x] = r->reserved_peak - floor[x];
        /* every sharded gradient live at once, on their own stream */
        assert_true(r->stream_live_peak[GM_EST_STREAM_REDUCE] >=
                    gm_estimate_kind_bytes(est, GM_KIND_GRADIENTS));
        if (x)
            assert_true(r->stream_reserved[GM_EST_STREAM_REDUCE] -
                            r->stream_live_peak[GM_EST_STREAM_REDUCE] <
                        page);
    }
    assert_true(above[1] < above[0]);
}

static uint64_t seg2m(uint64_t bytes)
{
    uint64_t r = (uint64_t)2 << 20;
    return (bytes + r - 1) / r * r;
}

/* the bytes of the gathered component on the all-gather stream of extent 'x' */
static uint64_t gathered(const struct gm_estimate *e, enum gm_est_extent x)
{
    for (size_t i = 0; i < e->n_components; i++) {
        const struct gm_est_component *c = &e->components[i];
        if (c->kind == GM_KIND_GATHERED && c->stream == GM_EST_STREAM_UNSHARD && c->extent == x)
            return c->bytes;
    }
    fail_msg("no gathered component of extent %d", (int)x);
    return 0;
}

/* FSDP1 records the compute stream on each gathered layer before freeing it
 * (_free_unsharded_flat_param), and its rate limiter lets the CPU ask for the next layer's
 * gather before the compute stream is done with the last one: under the HF stack's
 * reentrant checkpointing (one layer gathered at a time) the all-gather stream holds the
 * root's segment and two layers' -- the layer gathered and the one before it, not yet
 * reusable.  FSDP2 frees without record_stream: one layer's. */
static void test_fsdp1_deferred_frees(void **state)
{
    uint64_t layer, root;
    (void)state;
    run("mistral-7b",
        "--train --batch 2 --seq 4096 --grad-checkpointing full --precision bf16 "
        "--gpus 2 --fsdp --transformers-version 4.48.1",
        &est);
    assert_true(est->replay.used);
    layer = seg2m(gathered(est, GM_EXTENT_ONE_LAYER));
    root = seg2m(gathered(est, GM_EXTENT_ENDS));
    assert_true(est->replay.stream_reserved[GM_EST_STREAM_UNSHARD] == root + 2 * layer);
    assert_true(est->replay.requested_peak == est->peak_allocated_bytes);
    /* the range's low end has the GPU caught up: one layer's segment */
    assert_true(est->range.sources & GM_UNCERTAIN_STREAM_TIMING);
    run("mistral-7b",
        "--train --batch 2 --seq 4096 --grad-checkpointing full --precision bf16 "
        "--gpus 2 --fsdp --fsdp-version 2",
        &est);
    assert_true(est->replay.used);
    assert_false(est->range.sources & GM_UNCERTAIN_STREAM_TIMING);
}

/* Full fine-tuning creates the optimizer state in the first step's optimizer.step(), in
 * the segments the first step's activations and loss left cached: the second step needs
 * new segments for them, so reserved exceeds what one step alone would reserve. */
static void test_lazy_state_takes_the_cache(void **state)
{
    uint64_t reserved, allocated;
    (void)state;
    run("llama-3.2-1b", "--train --batch 8 --seq 2048 --grad-checkpointing full --precision bf16",
        &est);
    assert_true(est->replay.used);
    reserved = est->replay.reserved_peak;
    allocated = est->peak_allocated_bytes;
    /* at least the state has been placed twice over: once in the cache, once anew */
    assert_true(reserved > allocated + gm_estimate_kind_bytes(est, GM_KIND_OPTIMIZER_STATE) / 2);
}

/* GPTBigCode's own cross-entropy under autocast (transformers before 4.54, bf16 AMP): the
 * log-softmax runs in fp32 on the fp32 cast of the 16-bit shifted copy, and its backward holds
 * three fp32 tensors of the shifted logits' shape at once (nll_loss_backward's zeros, the
 * log-softmax's input gradient, the kept log-softmax) where the forward made two fp32
 * segments: a third one, 4 x 4094 x 49280 B = 807 MB at batch 2 x 2048, is reserved beyond
 * peak allocated. */
static void test_inline_loss_fp32_backward(void **state)
{
    uint64_t third = 4ull * (2 * 2048 - 2) * 49280;
    (void)state;
    run("santacoder",
        "--train --batch 2 --seq 2048 --grad-checkpointing full --qlora "
        "--transformers-version 4.48.1",
        &est);
    assert_true(est->replay.used);
    assert_true(est->replay.reserved_peak >= est->peak_allocated_bytes + third);
}

/* Near the capacity: on a GPU a little smaller than the job reserves without a limit, the
 * allocator frees its cache and retries, reserves less and stays within what the GPU leaves
 * it, and the job fits.  Below peak allocated a request fails even after the retry and the
 * job does not fit. */
static void test_capacity_retry_and_oom(void **state)
{
    const char *job = "--train --batch 8 --seq 2048 --grad-checkpointing full --precision bf16";
    char settings[256];
    uint64_t allocated, reserved, outside;
    (void)state;
    run("llama-3.2-1b", job, &est);
    allocated = est->peak_allocated_bytes;
    reserved = est->replay.reserved_peak;
    outside = est->device_bytes - est->peak_reserved_bytes;
    assert_true(reserved > allocated + 64 * GM_MIB);
    snprintf(settings, sizeof settings, "%s --gpu-memory %lluMiB", job,
             (unsigned long long)((allocated + (reserved - allocated) / 50 * 49 + outside) >> 20));
    run("llama-3.2-1b", settings, &est);
    assert_true(est->replay.used);
    assert_false(est->replay.oom);
    assert_true(est->replay.retries > 0);
    assert_true(est->replay.reserved_peak <= est->replay.capacity_bytes);
    assert_true(est->replay.reserved_peak < reserved);
    /* the allocator freed its cache: the replay decides, whatever the floor says */
    assert_int_equal(est->peak_reserved_bytes, est->replay.reserved_peak);
    assert_int_equal(est->peak_allocated_bytes, allocated);
    assert_true(est->fit.fits);
    snprintf(settings, sizeof settings, "%s --gpu-memory %lluMiB", job,
             (unsigned long long)((allocated - allocated / 20 + outside) >> 20));
    run("llama-3.2-1b", settings, &est);
    assert_true(est->replay.oom);
    assert_true(est->device_bytes > est->fit.capacity_bytes);
    assert_false(est->fit.fits);
}

/* An estimate remembers the replays run into it and answers the limited one from the one
 * without a limit where that settles it; a traced run always replays, limited first.  The
 * two agree field by field: with room to spare, with the cache freed and retried, and out
 * of memory; and again when every replay is remembered. */
static void count_segment(void *ctx, const struct gm_est_replay_segment *seg)
{
    (void)seg;
    (*(size_t *)ctx)++;
}

static void assert_same_replay(const struct gm_estimate *a, const struct gm_estimate *b)
{
    const struct gm_est_replay *x = &a->replay, *y = &b->replay;
    assert_int_equal(x->used, y->used);
    assert_int_equal(x->steps, y->steps);
    assert_int_equal(x->mallocs, y->mallocs);
    assert_int_equal(x->requested_peak, y->requested_peak);
    assert_int_equal(x->allocated_peak, y->allocated_peak);
    assert_int_equal(x->reserved_peak, y->reserved_peak);
    assert_int_equal(x->capacity_bytes, y->capacity_bytes);
    assert_int_equal(x->segments, y->segments);
    assert_int_equal(x->retries, y->retries);
    assert_int_equal(x->oom, y->oom);
    assert_int_equal(x->floor, y->floor);
    for (size_t s = 0; s < GM_EST_STREAM__COUNT; s++) {
        assert_int_equal(x->stream_reserved[s], y->stream_reserved[s]);
        assert_int_equal(x->stream_live_peak[s], y->stream_live_peak[s]);
    }
    assert_int_equal(a->peak_reserved_bytes, b->peak_reserved_bytes);
    assert_int_equal(a->device_bytes, b->device_bytes);
    assert_int_equal(a->fit.fits, b->fit.fits);
}

/* Three device sizes for 'job' on llama-3.2-1b: room to spare, the cache freed and retried,
 * out of memory. */
static void three_capacities(const char *job, uint64_t gib[3])
{
    uint64_t allocated, reserved, outside;
    run("llama-3.2-1b", job, &est);
    allocated = est->peak_allocated_bytes;
    reserved = est->replay.reserved_peak;
    outside = est->device_bytes - est->peak_reserved_bytes;
    gib[0] = (reserved + outside) * 2;                               /* room to spare */
    gib[1] = allocated + (reserved - allocated) / 50 * 49 + outside; /* retries */
    gib[2] = allocated - allocated / 20 + outside;                   /* out of memory */
}

static void test_remembered_replay_is_the_replay(void **state)
{
    const char *job = "--train --batch 8 --seq 2048 --grad-checkpointing full --precision bf16";
    struct gm_estimate *traced = NULL, *plain = NULL;
    uint64_t gib[3];
    char settings[256];
    (void)state;
    three_capacities(job, gib);
    for (size_t k = 0; k < 3; k++) {
        size_t segments = 0;
        snprintf(settings, sizeof settings, "%s --gpu-memory %lluMiB", job,
                 (unsigned long long)(gib[k] >> 20));
        run_traced("llama-3.2-1b", settings, &traced, count_segment, &segments);
        assert_true(segments > 0);
        run("llama-3.2-1b", settings, &plain);
        assert_same_replay(traced, plain);
        run("llama-3.2-1b", settings, &plain); /* every replay remembered now */
        assert_same_replay(traced, plain);
        assert_int_equal(plain->replay.retries > 0, k > 0);
        assert_int_equal(plain->replay.oom, k == 2);
    }
    gm_estimate_free(traced);
    gm_estimate_free(plain);
}

/* A probe that reads the verdict alone (est_run_verdict()) judges by the replay at the
 * capacity: with room to spare and with the cache freed and retried it is the probe of
 * est_run_point() field by field; out of memory it stops at the failing request, without
 * the replay without the limit (fewer requests than est_run_point()'s replay), and still
 * does not fit.  A probe for the figures after it answers from the remembered limited replay
 * where that fitted, and is again est_run_point()'s on a fresh estimate. */
static void test_verdict_from_the_limited_replay(void **state)
{
    const char *job = "--train --batch 8 --seq 2048 --grad-checkpointing full --precision bf16";
    struct gm_estimate *verdict, *point;
    uint64_t gib[3];
    char settings[256];
    (void)state;
    three_capacities(job, gib);
    for (size_t k = 0; k < 3; k++) {
        struct gm_job j;
        snprintf(settings, sizeof settings, "%s --gpu-memory %lluMiB", job,
                 (unsigned long long)(gib[k] >> 20));
        job_make("llama-3.2-1b", settings, &j);
        verdict = est_new();
        point = est_new();
        assert_non_null(verdict);
        assert_non_null(point);
        assert_int_equal(est_run_verdict(&j, verdict, NULL), GM_OK);
        assert_int_equal(est_run_point(&j, point, NULL), GM_OK);
        assert_int_equal(verdict->fit.fits, k < 2);
        assert_int_equal(point->fit.fits, k < 2);
        assert_int_equal(point->replay.retries > 0, k == 1); /* a probe counts none at OOM */
        if (k < 2) {
            assert_same_replay(verdict, point);
        } else {
            assert_true(verdict->replay.oom);
            assert_true(verdict->replay.mallocs < point->replay.mallocs);
            assert_true(verdict->device_bytes > verdict->fit.capacity_bytes);
        }
        /* the figures after the verdict, into the same estimate (its replays remembered) */
        assert_int_equal(est_run_point(&j, verdict, NULL), GM_OK);
        assert_same_replay(verdict, point);
        gm_estimate_free(verdict);
        gm_estimate_free(point);
    }
}

/* A step that starts where the one before started is counted, not run; a traced replay
 * runs every step.  Both give the same replay, for jobs whose cache settles after a step
 * and jobs whose does not, without a limit and near one. */
static void test_settled_step_counted_as_run(void **state)
{
    static const char *const jobs[][2] = {
        {"llama-3.1-8b", "--train --batch 1 --seq 2048"},
        {"llama-3.1-8b", "--train --batch 4 --seq 4096 --grad-checkpointing full"},
        {"llama-3.1-8b", "--train --batch 8 --seq 1024 --gpu A100-40GB"},
        {"qwen2.5-1.5b", "--train --gpus 4 --grad-accum 8 --batch 4 --seq 1024"},
        {"mistral-7b", "--train --lora --batch 2 --seq 4096 --grad-checkpointing full"},
        {"llama-3-8b", "--train --qlora --batch 1 --seq 2048 --grad-checkpointing full"},
        {"llama-3.1-8b", "--train --batch 2 --seq 2048 --alloc-conf max_split_size_mb:256"},
    };
    struct gm_estimate *traced = NULL, *plain = NULL;
    size_t segments = 0, counted = 0;
    (void)state;
    for (size_t k = 0; k < sizeof(jobs) / sizeof(jobs[0]); k++) {
        run_traced(jobs[k][0], jobs[k][1], &traced, count_segment, &segments);
        run(jobs[k][0], jobs[k][1], &plain);
        assert_true(plain->replay.used);
        assert_int_equal(plain->replay.steps, 3);
        assert_int_equal(traced->replay.steps_counted, 0);
        assert_true(plain->replay.steps_counted <= 1);
        counted += plain->replay.steps_counted;
        assert_same_replay(traced, plain);
    }
    /* the jobs whose cache settles had their last step counted */
    assert_true(counted > 0);
    gm_estimate_free(traced);
    gm_estimate_free(plain);
}

/* The HF stack (--transformers-version given): peak reserved is the larger of the replay and
 * the fragmentation floor (allocated + 0.25 x the step's transients).  A custom loop: the
 * replay alone.  Either way the range's low end is the replay alone and its high end at least
 * the floor at 0.50. */
static uint64_t floor_at(const struct gm_estimate *e, unsigned quarters)
{
    uint64_t transient = 0;
    for (size_t i = 0; i < e->n_components; i++)
        if (e->components[i].transient && !gm_est_kind_outside_allocator(e->components[i].kind))
            transient += e->components[i].bytes;
    return e->peak_allocated_bytes + transient / 4 * quarters;
}

static void test_replay_and_floor(void **state)
{
    static const char *const job = "--train --batch 4 --seq 4096 --grad-checkpointing full "
                                   "--lora --precision bf16";
    char settings[256];
    uint64_t floor_point;
    (void)state;
    snprintf(settings, sizeof settings, "%s --transformers-version 4.48.1", job);
    run("mistral-7b", settings, &est);
    assert_true(est->replay.used);
    floor_point = floor_at(est, 1);
    /* this job's replay reserves less than the floor: the floor decides */
    assert_true(est->replay.reserved_peak < floor_point);
    assert_true(est->peak_reserved_bytes >= floor_point &&
                est->peak_reserved_bytes < floor_point + 2 * GM_MIB);
    assert_true(est->range.reserved_bytes[0] <= est->replay.reserved_peak);
    assert_true(est->range.reserved_bytes[1] + 2 * GM_MIB > floor_at(est, 2));
    /* the same job in a custom loop: the replay decides, the range still spans the floor */
    run("mistral-7b", job, &est);
    assert_true(est->replay.used);
    assert_int_equal(est->peak_reserved_bytes, est->replay.reserved_peak);
    assert_true(est->range.reserved_bytes[0] <= est->replay.reserved_peak);
    assert_true(est->range.reserved_bytes[1] + 2 * GM_MIB > floor_at(est, 2));
    assert_true(est->range.sources & GM_UNCERTAIN_FRAGMENTATION);
    /* --fragmentation given: the factor alone */
    run("mistral-7b", "--train --fragmentation 0.25", &est);
    assert_false(est->replay.used);
}

/* Near the capacity the allocator frees its cache on a failed cudaMalloc and retries
 * (release_cached_blocks in PyTorch's DeviceCachingAllocator::malloc): a job whose replay fits
 * on the GPU is never given a peak reserved above it, however much cache the HF stack's floor
 * says an allocator without a limit would keep; on a GPU that holds the floor, the floor
 * decides as before. */
static void test_floor_stops_at_the_capacity(void **state)
{
    static const char *const job =
        "--train --lora --batch 4 --seq 2048 --transformers-version 4.46 --precision bf16";
    char settings[256];
    uint64_t floor, replay, outside;
    (void)state;
    run("llama-3.1-8b", job, &est);
    floor = est->peak_reserved_bytes;
    replay = est->replay.reserved_peak;
    outside = est->device_bytes - est->peak_reserved_bytes;
    assert_true(est->replay.floor && replay + 512 * GM_MIB < floor);
    /* a GPU between what the replay reserves and what the floor says */
    snprintf(settings, sizeof settings, "%s --gpu-memory %lluMiB", job,
             (unsigned long long)((outside + replay + (floor - replay) / 2) >> 20));
    run("llama-3.1-8b", settings, &est);
    assert_false(est->replay.oom);
    assert_true(est->replay.at_capacity);
    assert_int_equal(est->replay.floor_bytes, floor);
    assert_int_equal(est->peak_reserved_bytes, est->replay.capacity_bytes);
    assert_true(est->device_bytes <= est->fit.capacity_bytes);
    assert_true(est->range.device_bytes[1] <= est->fit.capacity_bytes);
    assert_true(est->fit.fits);
    assert_int_equal(est->fit.verdict, GM_VERDICT_FITS);
    /* a GPU that holds the floor: the floor decides */
    snprintf(settings, sizeof settings, "%s --gpu-memory %lluMiB", job,
             (unsigned long long)((outside + floor) / GM_MIB + 64));
    run("llama-3.1-8b", settings, &est);
    assert_false(est->replay.at_capacity);
    assert_int_equal(est->peak_reserved_bytes, floor);
}

/* The run's PYTORCH_CUDA_ALLOC_CONF reaches the replay: with expandable segments the
 * allocator maps pages into one range per stream and pool instead of caching whole
 * segments, so the same job replays differently, and both replays are remembered apart. */
static void test_alloc_conf_reaches_the_replay(void **state)
{
    static const char *const job = "--train --lora --batch 4 --seq 2048 --precision bf16 "
                                   "--gpu H100";
    char settings[256];
    struct gm_est_replay plain;
    (void)state;
    run("llama-3.1-8b", job, &est);
    plain = est->replay;
    assert_true(plain.used && !plain.oom);
    snprintf(settings, sizeof settings, "%s --alloc-conf expandable_segments:True", job);
    run("llama-3.1-8b", settings, &est);
    assert_true(est->replay.used && !est->replay.oom);
    assert_true(est->replay.reserved_peak <= est->replay.capacity_bytes);
    assert_int_equal(est->replay.requested_peak, plain.requested_peak);
    assert_true(est->replay.segments != plain.segments ||
                est->replay.reserved_peak != plain.reserved_peak);
}

/* A job that does not fit names the request that failed even after the cache was freed:
 * where in the step, whose tensor, how large, and what was live; the same request is where
 * the segment trace of the replay on the capacity stops. */
struct last_seg {
    struct gm_est_replay_segment seg;
    bool seen;
};

static void last_segment(void *ctx, const struct gm_est_replay_segment *seg)
{
    struct last_seg *t = ctx;
    if (seg->pass == 0) {
        t->seg = *seg;
        t->seen = true;
    }
}

static void test_failed_request_named(void **state)
{
    static const char *const job = "--train --batch 8 --seq 2048 --grad-checkpointing full "
                                   "--precision bf16 --gpu-memory 12GiB";
    struct last_seg t;
    const struct gm_est_replay *r;
    (void)state;
    run("llama-3.2-1b", job, &est);
    r = &est->replay;
    assert_true(r->oom);
    assert_true(r->failed.request > 0);
    assert_true(r->failed.at < GM_EST_AT__COUNT);
    assert_true(r->failed.step < r->steps);
    assert_true(r->failed.kind <= GM_KIND__COUNT);
    assert_true(r->failed.live <= r->capacity_bytes);
    assert_int_equal(est->fit.verdict, GM_VERDICT_DOES_NOT_FIT);
    assert_true(est->device_bytes > est->fit.capacity_bytes);
    /* the traced run on the capacity took its last segment at or before the failure */
    memset(&t, 0, sizeof t);
    run_traced("llama-3.2-1b", job, &est, last_segment, &t);
    assert_true(t.seen);
    assert_true(t.seg.step < r->failed.step ||
                (t.seg.step == r->failed.step && t.seg.at <= r->failed.at));
}

/* A request that fails says what the allocator kept once it had freed its cache: what stayed
 * reserved leaves no room on the device for the request's segment, the largest free block
 * of its pool is smaller than the request (else it would have taken it), and whether the
 * failure is where the blocks lie (fragmentation) or the bytes: a small model whose
 * tensors alone are more than the GPU holds fails on the bytes; Mistral-7B QLoRA at 32 x
 * 4096 (fms-acceleration's row 116, which ran on an A100-80GB and fits in the replay there)
 * on a device of 72 GiB never has more allocated than the capacity, and its fp32 logits
 * fail because the free bytes lie in segments that layers' checkpointed inputs hold. */
static void test_failed_request_layout(void **state)
{
    static const struct {
        const char *model, *settings;
        bool layout;
    } jobs[] = {
        {"llama-3.2-1b",
         "--train --batch 8 --seq 2048 --grad-checkpointing full --precision bf16 "
         "--gpu-memory 12GiB",
         false},
        {"mistral-7b",
         "--train --batch 32 --seq 4096 --grad-checkpointing full --transformers-version 4.45.2 "
         "--gpu A100-80GB --qlora --lora-rank 16 --lora-targets q,k,v,o --lora-dropout 0.1 "
         "--adapter-dtype fp32 --no-fp32-upcast --loss fused --loss-impl unsloth "
         "--fused-kernels rms_norm,rope,lora --gpu-memory 72GiB",
         true},
    };
    (void)state;
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
        const struct gm_est_replay *r;
        uint64_t seg;
        struct gm_alloc_conf conf;
        run(jobs[i].model, jobs[i].settings, &est);
        r = &est->replay;
        gm_alloc_conf_init(&conf);
        seg = gm_alloc_segment_size(gm_alloc_round_size(&conf, r->failed.request));
        assert_true(r->oom && r->failed.request > 0);
        assert_true(r->failed.allocated >= r->failed.live);
        assert_true(r->failed.allocated <= r->failed.reserved);
        assert_true(r->failed.reserved <= r->capacity_bytes);
        assert_true(r->failed.reserved + seg > r->capacity_bytes);
        assert_true(r->failed.largest_free < r->failed.request);
        assert_true(r->failed.largest_free <= r->failed.reserved - r->failed.allocated);
        assert_int_equal(est_replay_failed_on_layout(r), jobs[i].layout);
        if (jobs[i].layout) {
            /* the bytes were free, not in one block */
            assert_true(r->failed.allocated + r->failed.request <= r->capacity_bytes);
            assert_true(r->failed.largest_free > 0);
            assert_int_equal(r->failed.kind, GM_KIND_LOGITS);
            /* the segment of the largest free block holds a block in use: a layer's input
             * kept by its checkpoint, placed behind that layer's temporaries */
            assert_true(r->failed.segment_live > 0);
            assert_true(r->failed.largest_free + r->failed.segment_live <= r->failed.segment);
            assert_int_equal(r->failed.pin_kind, GM_KIND_ACTIVATIONS);
            assert_true(r->failed.pin_layer >= 1 && r->failed.pin_layer <= 32);
            assert_true(r->failed.pin_bytes <= r->failed.segment_live);
        }
        assert_int_equal(est->fit.verdict, GM_VERDICT_DOES_NOT_FIT);
    }
}

/* What the allocator holds when a request fails (est_alloc_at_failure()): reserved and
 * allocated as they are now, not at their peaks (a 500 MiB segment reserved and emptied
 * earlier is gone), and the largest free block of the request's own pool on its own stream:
 * a larger free block on another stream (88 MiB on stream 7, an FSDP all-gather stream's) or
 * in the other pool (the large pool's 18 MiB, for a small request) cannot serve it. */
static void test_failure_reads_own_pool_and_stream(void **state)
{
    struct gm_alloc_fakedev fake;
    struct gm_alloc_device dev;
    struct gm_alloc_conf conf;
    struct gm_alloc *a = NULL;
    struct gm_alloc_stats s;
    struct est_alloc_failure held;
    uint64_t p, big, keep0, keep7, small;
    (void)state;
    gm_alloc_conf_init(&conf);
    gm_alloc_fakedev_init(&fake, 0);
    dev.ops = &gm_alloc_fakedev_ops;
    dev.ctx = &fake;
    dev.total_bytes = 80ull << 30;
    assert_int_equal(gm_alloc_new(&conf, &dev, &a, NULL), GM_OK);
    /* a segment reserved at the start and given back: the peak, not what is held */
    assert_int_equal(gm_alloc_malloc(a, 500 * GM_MIB, 0, &big, NULL), GM_OK);
    assert_int_equal(gm_alloc_dealloc(a, big, NULL), GM_OK);
    gm_alloc_empty_cache(a);
    /* stream 0, large pool: 12 MiB in use in a 30 MiB segment, 18 MiB free */
    assert_int_equal(gm_alloc_malloc(a, 30 * GM_MIB, 0, &p, NULL), GM_OK);
    assert_int_equal(gm_alloc_dealloc(a, p, NULL), GM_OK);
    assert_int_equal(gm_alloc_malloc(a, 12 * GM_MIB, 0, &keep0, NULL), GM_OK);
    /* stream 7, large pool: 12 MiB in use in a 100 MiB segment, 88 MiB free */
    assert_int_equal(gm_alloc_malloc(a, 100 * GM_MIB, 7, &p, NULL), GM_OK);
    assert_int_equal(gm_alloc_dealloc(a, p, NULL), GM_OK);
    assert_int_equal(gm_alloc_malloc(a, 12 * GM_MIB, 7, &keep7, NULL), GM_OK);
    /* stream 0, small pool: 512 KiB in use in a 2 MiB segment, 1.5 MiB free */
    assert_int_equal(gm_alloc_malloc(a, 512 * GM_KIB, 0, &small, NULL), GM_OK);

    gm_alloc_get_stats(a, &s);
    assert_true(s.reserved_bytes[GM_ALLOC_STAT_ALL].peak >
                s.reserved_bytes[GM_ALLOC_STAT_ALL].current);
    est_alloc_at_failure(a, 0, 200 * GM_MIB, &held);
    assert_int_equal(held.reserved, s.reserved_bytes[GM_ALLOC_STAT_ALL].current);
    assert_int_equal(held.reserved, 132 * GM_MIB);
    assert_int_equal(held.allocated, s.allocated_bytes[GM_ALLOC_STAT_ALL].current);
    assert_int_equal(held.largest_free, 18 * GM_MIB);
    /* and the segment that holds it: 30 MiB, 12 MiB of it in use */
    assert_int_equal(held.segment, 30 * GM_MIB);
    assert_int_equal(held.segment_live, 12 * GM_MIB);
    assert_int_equal(held.segment_addr, keep0);
    est_alloc_at_failure(a, 7, 200 * GM_MIB, &held);
    assert_int_equal(held.largest_free, 88 * GM_MIB);
    assert_int_equal(held.segment, 100 * GM_MIB);
    assert_int_equal(held.segment_live, 12 * GM_MIB);
    est_alloc_at_failure(a, 0, GM_MIB, &held);
    assert_int_equal(held.largest_free, 1536 * GM_KIB);
    assert_int_equal(held.segment, 2 * GM_MIB);
    assert_int_equal(held.segment_live, 512 * GM_KIB);
    /* no small segment on stream 7: no block, no segment */
    est_alloc_at_failure(a, 7, GM_MIB, &held);
    assert_int_equal(held.largest_free, 0);
    assert_int_equal(held.segment, 0);
    assert_int_equal(held.segment_live, 0);
    gm_alloc_free(a);
}

/* Bytes live where each replayed step begins and ends (pass 0; est_run_requests()). */
struct step_bounds {
    bool seen[4];
    uint64_t begin[4], end[4];
};

static void step_bound(void *ctx, const struct est_replay_request *rq)
{
    struct step_bounds *t = ctx;
    uint64_t before = rq->alloc ? rq->live - rq->bytes : rq->live + rq->bytes;
    if (rq->pass || rq->step >= 4)
        return;
    if (!t->seen[rq->step]) {
        t->seen[rq->step] = true;
        t->begin[rq->step] = before;
    }
    t->end[rq->step] = rq->live;
}

/* A step frees every tensor it makes but the state it creates lazily (the first step's
 * optimizer state, the cuBLAS workspaces): the second step ends with exactly the bytes live
 * it began with, on the fms Liger row 116 job at 8 per GPU (which fits).  So at the start of
 * the next step every segment without a persistent tensor is one free block, and the
 * backward's order reaches the next step only through segments it makes or gives back
 * (docs/estimate.md, "Replay at capacity: what holds the failing request"). */
static void test_step_ends_with_what_it_began(void **state)
{
    static struct step_bounds t;
    struct gm_job j;
    struct gm_error err;
    (void)state;
    memset(&t, 0, sizeof t);
    job_make("mistral-7b",
             "--train --batch 8 --seq 4096 --grad-checkpointing full --transformers-version "
             "4.45.2 --gpu A100-80GB --qlora --lora-rank 16 --lora-targets q,k,v,o "
             "--lora-dropout 0.1 --adapter-dtype fp32 --no-fp32-upcast --loss fused "
             "--loss-impl unsloth --fused-kernels rms_norm,rope,lora",
             &j);
    if (est_run_requests(&j, &est, step_bound, &t, &err) != GM_OK)
        fail_msg("%s", err.msg);
    assert_false(est->replay.oom);
    assert_true(t.seen[0] && t.seen[1]);
    /* the first step leaves its lazily created state live */
    assert_true(t.end[0] > t.begin[0]);
    assert_int_equal(t.begin[1], t.end[0]);
    assert_int_equal(t.end[1], t.begin[1]);
}

/* What a segment trace sums to, per pass, and what the loss takes. */
struct seg_sum {
    uint64_t n[2], bytes[2], last_reserved[2];
    uint64_t loss_big, loss_bytes, loss_big_bytes; /* pass 0, at the loss; of 1 GiB or more */
    bool unordered[2]; /* reserved did not grow by each segment (a pass that freed its cache) */
};

static void sum_segment(void *ctx, const struct gm_est_replay_segment *seg)
{
    struct seg_sum *t = ctx;
    unsigned p = seg->pass ? 1 : 0;
    assert_true(seg->pass <= 1);
    assert_true(seg->bytes >= seg->request);
    assert_true(seg->at < GM_EST_AT__COUNT);
    if (seg->reserved != t->last_reserved[p] + seg->bytes)
        t->unordered[p] = true;
    t->last_reserved[p] = seg->reserved;
    t->n[p]++;
    t->bytes[p] += seg->bytes;
    if (!p && seg->at == GM_EST_AT_LOSS) {
        t->loss_bytes += seg->bytes;
        if (seg->bytes >= GM_GIB - 64 * GM_MIB) {
            t->loss_big++;
            t->loss_big_bytes += seg->bytes;
        }
    }
}

/* What the setup of a replay takes, layer by layer (FSDP1's wrap, fsdp1_wrap()). */
struct setup_segs {
    uint64_t n[3], largest[3], request[3][40]; /* layers 1, 2 and the rest */
    uint64_t n_other;                          /* setup segments of no layer */
    uint64_t reserved;                         /* after the last setup segment */
};

static void setup_segment(void *ctx, const struct gm_est_replay_segment *seg)
{
    struct setup_segs *t = ctx;
    size_t k = seg->layer == 1 ? 0 : seg->layer == 2 ? 1 : 2;
    if (seg->pass || seg->step || seg->at != GM_EST_AT_SETUP)
        return;
    t->reserved = seg->reserved;
    if (!seg->layer) {
        t->n_other++;
        return;
    }
    if (t->n[k] < 40)
        t->request[k][t->n[k]] = seg->request;
    t->n[k]++;
    if (seg->request > t->largest[k])
        t->largest[k] = seg->request;
}

/* FSDP1 under the HF Trainer wraps the model inside trainer.train() with nothing emptying
 * the cache before the first step, unit by unit (torch 2.4 _init_utils.py, _flat_param.py):
 * the first layer takes segments for its unsharded parameters one by one, for the broadcast
 * buckets of sync_module_states and for the unsharded flat parameter (torch.cat: twice the
 * shard on two GPUs), its shard cloned into what a bucket left; every later layer finds the
 * first one's transients cached and takes one segment, its shard.  Without
 * sync_module_states no bucket; outside the HF stack (where the model is, gpumem does not
 * know) no wrap: the shards alone. */
static void test_fsdp1_wrap_segments(void **state)
{
    static const char *const job = "--train --batch 1 --seq 1024 --grad-checkpointing full "
                                   "--precision bf16 --lora --gpus 2 --fsdp";
    char settings[512];
    struct setup_segs sync = {0}, nosync = {0}, custom = {0};
    uint64_t shard;
    (void)state;
    snprintf(settings, sizeof settings, "%s --transformers-version 4.48.1", job);
    run_traced("mistral-7b", settings, &est, setup_segment, &sync);
    assert_true(est->replay.used);
    assert_true(est->replay.wrap && est->replay.wrap_synced);
    assert_int_equal(sync.n[1], 1);
    assert_int_equal(sync.n[2], 30); /* layers 3..32: one segment each */
    shard = sync.request[1][0];
    assert_true(shard > 100 * GM_MIB);
    for (size_t i = 0; i < 29; i++) /* layers 3..31 (the last one takes what rounding left) */
        assert_int_equal(sync.request[2][i], shard);
    /* the flat parameter: the whole unit unsharded, the largest request */
    assert_int_equal(sync.largest[0], 2 * shard);
    assert_true(sync.n[0] >= 4); /* parameters, a bucket, the flat parameter */

    snprintf(settings, sizeof settings, "%s --transformers-version 4.48.1 --no-sync-module-states",
             job);
    run_traced("mistral-7b", settings, &est, setup_segment, &nosync);
    assert_true(est->replay.wrap && !est->replay.wrap_synced);
    assert_int_equal(nosync.n[1], 1);
    assert_int_equal(nosync.largest[0], 2 * shard);
    assert_true(nosync.n[0] < sync.n[0]); /* no bucket */
    assert_true(nosync.reserved < sync.reserved);

    run_traced("mistral-7b", job, &est, setup_segment, &custom);
    assert_false(est->replay.wrap);
    assert_int_equal(custom.n[0] + custom.n[1] + custom.n[2], 0);
    assert_true(custom.n_other > 0);
    assert_true(custom.reserved < nosync.reserved);
}

/* gm_estimate_run_traced() hands over every segment of the point estimate's replay in
 * order: without an out-of-memory retry nothing is freed, so they sum to the replay's peak
 * reserved, one call per cudaMalloc.  What the trace shows of the loss: Mistral-7B QLoRA at
 * 4 x 4096 tokens (vocabulary 32000) takes four logits-sized segments at its loss (the
 * 16-bit logits, 1000 MiB; the fp32 upcast, the shifted copy and the log-softmax, 2000 MiB
 * each) and no more later; with a cross-entropy kernel (--loss fused, its default kernel:
 * the code read, no measured block; test_loss_cache_block has FOAK's) three, the
 * log-softmax's missing.  A job that does not fit reruns without the limit (pass 1), and
 * the figures are that pass's; a job without a replay calls nothing. */
static void test_segment_trace(void **state)
{
    static const char *const job =
        "--train --batch 4 --seq 4096 --grad-checkpointing full --transformers-version 4.48.1 "
        "--qlora --lora-rank 16 --lora-targets q,k,v,o --adapter-dtype fp32 --no-fp32-upcast";
    char settings[512];
    struct seg_sum plain = {0}, fused = {0}, oom = {0}, none = {0};
    (void)state;
    run_traced("mistral-7b", job, &est, sum_segment, &plain);
    assert_true(est->replay.used && !est->replay.oom && !est->replay.retries);
    assert_false(plain.unordered[0]);
    assert_int_equal(plain.n[0], est->replay.segments);
    assert_int_equal(plain.bytes[0], est->replay.reserved_peak);
    assert_int_equal(plain.n[1], 0);
    assert_int_equal(plain.loss_big, 4);
    snprintf(settings, sizeof settings, "%s --loss fused --fused-kernels rms_norm,rope", job);
    run_traced("mistral-7b", settings, &est, sum_segment, &fused);
    assert_int_equal(fused.n[0], est->replay.segments);
    assert_int_equal(fused.bytes[0], est->replay.reserved_peak);
    assert_int_equal(fused.loss_big, 3);
    assert_int_equal(plain.loss_bytes - fused.loss_bytes, 2000 * GM_MIB);

    run_traced("llama-3.2-1b",
               "--train --batch 8 --seq 2048 --grad-checkpointing full --precision bf16 "
               "--gpu-memory 3.5GiB",
               &est, sum_segment, &oom);
    assert_true(est->replay.oom);
    /* the first pass freed its cache before it failed; the rerun frees nothing */
    assert_true(oom.n[0] > 0 && oom.n[1] > 0 && oom.unordered[0] && !oom.unordered[1]);
    assert_int_equal(oom.bytes[1], est->replay.reserved_peak);

    run_traced("llama-3-8b", "--infer --context 4096", &est, sum_segment, &none);
    assert_int_equal(none.n[0] + none.n[1], 0);
}

/* Before transformers 4.46 the model upcasts its logits and shifts an fp32 copy in its
 * forward (modeling_llama.py at 4.45.2: lm_head(...).float(), then .contiguous() of the
 * shifted slice): the 16-bit logits are freed by the upcast, so the shifted copy cannot take
 * their block, half its size, and the loss takes three segments: the 16-bit logits', the
 * fp32 logits' and the shifted copy's (Mistral-7B at 4 x 4096 tokens: 1000 + 2000 + 2000
 * MiB).  With the unsloth kernel (FOAK) in place of nn.CrossEntropyLoss nothing more: its
 * gradient goes into the shifted copy, SliceBackward's zeros into the fp32 logits' block
 * once the Trainer has dropped the outputs, the 16-bit gradient into the first; with
 * nn.CrossEntropyLoss the fp32 log-softmax a fourth (2000 MiB).  (The code read: --loss
 * fused's default kernel; test_loss_cache_block has FOAK's measured block.) */
static void test_model_upcast_loss_segments(void **state)
{
    static const char *const job =
        "--train --batch 4 --seq 4096 --grad-checkpointing full --precision bf16-mixed --lora "
        "--lora-rank 16 --lora-targets q,k,v,o --transformers-version 4.45.2";
    char settings[512];
    struct seg_sum fused = {0}, full = {0};
    (void)state;
    snprintf(settings, sizeof settings, "%s --loss fused --fused-kernels rms_norm,rope", job);
    run_traced("mistral-7b", settings, &est, sum_segment, &fused);
    assert_true(est->replay.used && !est->replay.oom);
    assert_int_equal(est->replay.requested_peak, est->peak_allocated_bytes);
    assert_int_equal(fused.loss_big, 3);
    assert_int_equal(fused.loss_big_bytes, 5000 * GM_MIB);
    run_traced("mistral-7b", job, &est, sum_segment, &full);
    assert_true(est->replay.used && !est->replay.oom);
    assert_int_equal(full.loss_big, 4);
    assert_int_equal(full.loss_big_bytes, 7000 * GM_MIB);
}

/* The FOAK cache block (loss_cache_block() in step_alloc.c; measured on fms-acceleration's
 * FOAK runs, not read in code): with --loss fused --loss-impl unsloth (FOAK's kernel) the
 * first step's loss asks for one fp32
 * copy of the logits more while its own logits blocks are taken and frees it at once, so
 * the loss takes a fourth logits-sized segment (Mistral-7B at 4 x 4096 tokens, transformers
 * 4.45.2: 1000 + 3 x 2000 MiB, against 1000 + 2 x 2000 MiB of the code read) that stays
 * cached: reserved grows by it, no tensor does (requested and allocated peaks stay), and the
 * estimate says it is measured.  --no-loss-cache-block gives the replay of the code read.
 * On a GPU with no room for its segment at the loss the block is left out and the replay is
 * the one without it, with no retry; on one with room at the loss but not for the step's
 * later segments, the allocator frees the cached block with the rest of its cache and
 * retries, and the job fits.  The segment trace marks the block's segment, the one segment
 * 'measured', of the block's bytes (what reserved grew by) and made at step 1's loss. */
struct loss_block_seg {
    size_t n;                /* segments marked measured */
    uint64_t bytes;          /* the last one's */
    uint64_t reserved_after; /* reserved once its segment was made */
    bool at_first_loss;      /* pass 0, step 1's loss */
};

static void find_loss_block(void *ctx, const struct gm_est_replay_segment *seg)
{
    struct loss_block_seg *t = ctx;
    if (!seg->measured)
        return;
    t->n++;
    t->bytes = seg->bytes;
    t->reserved_after = seg->reserved;
    t->at_first_loss = !seg->pass && !seg->step && seg->at == GM_EST_AT_LOSS;
}

static void test_loss_cache_block(void **state)
{
    static const char *const job =
        "--train --batch 4 --seq 4096 --grad-checkpointing full --precision bf16-mixed --lora "
        "--lora-rank 16 --lora-targets q,k,v,o --transformers-version 4.45.2 --loss fused "
        "--loss-impl unsloth --fused-kernels rms_norm,rope";
    char settings[512];
    struct seg_sum with = {0}, without = {0};
    struct loss_block_seg blk = {0}, none = {0};
    uint64_t reserved, reserved_off, allocated_off, outside;
    bool said = false;
    (void)state;
    snprintf(settings, sizeof settings, "%s --no-loss-cache-block", job);
    run_traced("mistral-7b", settings, &est, find_loss_block, &none);
    assert_int_equal(none.n, 0);
    run_traced("mistral-7b", settings, &est, sum_segment, &without);
    assert_true(est->replay.used && !est->replay.oom);
    assert_int_equal(est->replay.loss_cache_block, 0);
    assert_int_equal(without.loss_big, 3);
    reserved_off = est->replay.reserved_peak;
    allocated_off = est->replay.allocated_peak;
    outside = est->device_bytes - est->peak_reserved_bytes;

    run_traced("mistral-7b", job, &est, sum_segment, &with);
    assert_true(est->replay.used && !est->replay.oom && !est->replay.retries);
    assert_int_equal(est->replay.loss_cache_block, 2000 * GM_MIB);
    assert_int_equal(with.loss_big, 4);
    assert_int_equal(with.loss_big_bytes, 7000 * GM_MIB);
    assert_int_equal(est->replay.requested_peak, est->peak_allocated_bytes);
    assert_int_equal(est->replay.allocated_peak, allocated_off);
    assert_true(est->replay.reserved_peak > reserved_off);
    assert_true(est->replay.reserved_peak <= reserved_off + 2000 * GM_MIB);
    assert_int_equal(with.bytes[0], est->replay.reserved_peak);
    for (size_t i = 0; i < est->n_assumptions; i++)
        said = said || (strstr(est->assumptions[i], "FOAK's loss: one fp32 copy of the logits") &&
                        strstr(est->assumptions[i], "measured on FOAK runs"));
    assert_true(said);
    reserved = est->replay.reserved_peak;

    /* no room at the loss: none kept, the replay of the code read */
    snprintf(settings, sizeof settings, "%s --gpu-memory %lluMiB", job,
             (unsigned long long)((reserved_off + outside) / GM_MIB + 64));
    run("mistral-7b", settings, &est);
    assert_true(est->replay.used && !est->replay.oom && !est->replay.retries);
    assert_true(est->replay.loss_cache_no_room);
    assert_int_equal(est->replay.loss_cache_block, 0);
    assert_int_equal(est->replay.reserved_peak, reserved_off);
    assert_true(est->fit.fits);

    /* room at the loss, not for what the step takes after it: the cache (the block with it)
     * is freed and the request retried */
    run_traced("mistral-7b", job, &est, find_loss_block, &blk);
    assert_int_equal(blk.n, 1);
    assert_true(blk.at_first_loss);
    assert_int_equal(blk.bytes, est->replay.loss_cache_block);
    assert_true(blk.reserved_after > 0 && blk.reserved_after < reserved);
    snprintf(
        settings, sizeof settings, "%s --gpu-memory %lluMiB", job,
        (unsigned long long)((blk.reserved_after + (reserved - blk.reserved_after) / 2 + outside) /
                             GM_MIB));
    run("mistral-7b", settings, &est);
    assert_true(est->replay.used && !est->replay.oom);
    assert_int_equal(est->replay.loss_cache_block, 2000 * GM_MIB);
    assert_true(est->replay.retries > 0);
    assert_true(est->replay.reserved_peak <= est->replay.capacity_bytes);
    assert_true(est->fit.fits);
}

/* The block is FOAK's alone (measured on its runs with unsloth's kernel, without expandable
 * segments): a custom loop's --loss fused (no transformers version) and Liger's kernel in
 * HF's loss keep none, and reserve what FOAK's job with the block turned off reserves; FOAK's
 * job with it keeps one.  Under expandable_segments it is not counted, and the estimate says
 * so; where no replay runs (--pp 2) the estimate says it is not counted. */
static void test_loss_cache_block_foak_only(void **state)
{
    static const char *const loop =
        "--train --batch 4 --seq 4096 --precision bf16 --lora --grad-checkpointing full "
        "--loss fused --gpu A100-80GB";
    char settings[512];
    uint64_t off;
    bool said = false;
    (void)state;
    snprintf(settings, sizeof settings, "%s --loss-impl unsloth --no-loss-cache-block", loop);
    run("llama-3-8b", settings, &est);
    assert_true(est->replay.used);
    off = est->replay.reserved_peak;
    run("llama-3-8b", loop, &est);
    assert_true(est->replay.used);
    assert_int_equal(est->replay.loss_cache_block, 0);
    assert_false(est->replay.loss_cache_no_room);
    assert_int_equal(est->replay.reserved_peak, off);
    snprintf(settings, sizeof settings, "%s --loss-impl unsloth", loop);
    run("llama-3-8b", settings, &est);
    assert_true(est->replay.loss_cache_block > 0);
    assert_true(est->replay.reserved_peak > off);

    snprintf(settings, sizeof settings, "%s --transformers-version 4.46 --loss-impl liger", loop);
    run("llama-3-8b", settings, &est);
    assert_int_equal(est->replay.loss_cache_block, 0);

    snprintf(settings, sizeof settings,
             "%s --loss-impl unsloth --alloc-conf expandable_segments:True", loop);
    run("llama-3-8b", settings, &est);
    assert_true(est->replay.used && est->replay.expandable);
    assert_int_equal(est->replay.loss_cache_block, 0);
    for (size_t i = 0; i < est->n_assumptions; i++)
        said = said || strstr(est->assumptions[i], "not counted under expandable_segments");
    assert_true(said);

    said = false;
    run("llama-3-8b",
        "--train --batch 4 --seq 4096 --precision bf16 --grad-checkpointing full --loss fused "
        "--loss-impl unsloth --pp 2 --gpus 2",
        &est);
    assert_false(est->replay.used);
    for (size_t i = 0; i < est->n_assumptions; i++)
        said = said || strstr(est->assumptions[i], "not counted (no step replay)");
    assert_true(said);
}

/* gm_estimate_run_segments() collects what the trace hands over: as many segments as the
 * replay took, summing to its peak reserved, each on a named stream (an FSDP job's
 * all-gathers on "unshard"); an inference job has none. */
static void test_segment_list(void **state)
{
    struct gm_job j;
    struct gm_error err;
    struct gm_est_segments l;
    uint64_t sum = 0;
    size_t unshard = 0;
    (void)state;
    job_make("llama-3-8b", "--train --batch 1 --seq 1024 --gpus 2 --fsdp", &j);
    assert_int_equal(gm_estimate_run_segments(&j, &est, &l, &err), GM_OK);
    assert_true(est->replay.used && !est->replay.oom && !est->replay.retries);
    assert_int_equal(l.n, est->replay.segments);
    for (size_t i = 0; i < l.n; i++) {
        sum += l.v[i].bytes;
        assert_string_not_equal(gm_est_stream_name(l.v[i].stream), "?");
        unshard += l.v[i].stream == GM_EST_STREAM_UNSHARD;
    }
    assert_int_equal(sum, est->replay.reserved_peak);
    assert_true(unshard > 0);
    assert_string_equal(gm_est_stream_name(GM_EST_STREAM_UNSHARD), "unshard");
    assert_string_equal(gm_est_stream_name(GM_EST_STREAM_REDUCE), "reduce_scatter");
    gm_est_segments_free(&l);
    assert_null(l.v);

    job_make("llama-3-8b", "--infer --context 4096", &j);
    assert_int_equal(gm_estimate_run_segments(&j, &est, &l, &err), GM_OK);
    assert_int_equal(l.n, 0);
    gm_est_segments_free(&l);
}

/* The requests of a component of equal tensors (est_run_requests()): runs of exactly 'k'
 * requests of 'part' bytes in a row, nothing freed or allocated between them, each adding its
 * bytes to what is live; and requests of 'whole' bytes (the component as one block). */
struct part_runs {
    uint64_t part, whole;
    unsigned k, run;
    size_t runs, wholes;
    uint64_t live; /* bytes live after the run's last request */
};

static void part_run_end(struct part_runs *t)
{
    t->runs += t->run == t->k;
    t->run = 0;
}

static void part_request(void *ctx, const struct est_replay_request *rq)
{
    struct part_runs *t = ctx;
    if (rq->pass)
        return;
    t->wholes += rq->alloc && rq->bytes == t->whole;
    if (!rq->alloc || rq->bytes != t->part || (t->run && rq->live != t->live + t->part)) {
        part_run_end(t);
        if (!rq->alloc || rq->bytes != t->part)
            return;
    }
    t->run++;
    t->live = rq->live;
}

/* The replay's requests for the job's QLoRA dequantisation buffer, a GATHERED component of
 * 'tensors' equal tensors of 'part' bytes each. */
static void dequant_buffer_runs(const char *model, const char *settings, unsigned tensors,
                                uint64_t part, struct part_runs *t)
{
    struct gm_job j;
    struct gm_error err;
    uint64_t buffer = 0;
    memset(t, 0, sizeof *t);
    t->part = part;
    t->whole = tensors * part;
    t->k = tensors;
    job_make(model, settings, &j);
    if (est_run_requests(&j, &est, part_request, t, &err) != GM_OK)
        fail_msg("%s %s: %s", model, settings, err.msg);
    part_run_end(t);
    for (size_t i = 0; i < est->n_components; i++)
        if (est->components[i].kind == GM_KIND_GATHERED && est->components[i].tensors == tensors)
            buffer = est->components[i].bytes;
    assert_int_equal(buffer, t->whole);
    assert_true(est->replay.used && !est->replay.oom);
}

/* bitsandbytes dequantises each 4-bit weight into a tensor of its own (dequantize_4bit's
 * torch.empty per call, bitsandbytes 0.43.3 functional.py; MatMul4Bit.backward, autograd/
 * _functions.py), so the QLoRA dequantisation buffer, the largest linear beside its
 * successor's (and under Lightning's bf16 compute each one's cast from fp16: three), is
 * equal tensors: the replay asks for each on its own, in a row, once in each layer's
 * backward of each step it runs (steps_counted are not run), never for their sum in one block.
 * Checked on fms-acceleration's four-GPU QLoRA Liger run of Mistral-7B (row 181 of its Liger
 * table): as one block, every layer's backward made a segment of the whole buffer, since the block
 * the layer before freed holds FSDP1's kept input gradient. */
static void test_dequant_buffer_tensors(void **state)
{
    struct gm_job j;
    struct gm_error err;
    struct gm_est_segments l;
    struct part_runs t;
    static const char *const mistral =
        "--train --batch 4 --seq 4096 --grad-checkpointing full --transformers-version 4.45.2 "
        "--gpu A100-80GB --gpus 4 --fsdp --qlora --lora-rank 16 --lora-targets q,k,v,o "
        "--lora-dropout 0.1 --adapter-dtype fp32 --no-fp32-upcast --loss fused-linear "
        "--fused-kernels rms_norm,rope,lora";
    (void)state;
    /* two tensors: the largest linear (14336 x 4096) in bf16, twice */
    dequant_buffer_runs("mistral-7b", mistral, 2, 14336ull * 4096 * 2, &t);
    assert_int_equal(t.wholes, 0);
    assert_int_equal(t.runs, 32 * (est->replay.steps - est->replay.steps_counted));
    /* the symptom: no segment of the whole buffer */
    job_make("mistral-7b", mistral, &j);
    assert_int_equal(gm_estimate_run_segments(&j, &est, &l, &err), GM_OK);
    for (size_t i = 0; i < l.n; i++)
        assert_int_not_equal(l.v[i].request, t.whole);
    gm_est_segments_free(&l);

    /* three tensors: Lightning's bf16 compute dequantises to fp16 and casts (est_bnb_dequant_
     * copies() 2); Llama-2-70B's largest linear (28672 x 8192) is above 2/3 of its lm_head
     * (32000 x 8192), so the buffer is that linear's two copies and its successor's */
    dequant_buffer_runs("llama-2-70b", "--train --qlora --model-impl litgpt", 3,
                        28672ull * 8192 * 2, &t);
    assert_int_equal(t.wholes, 0);
    assert_int_equal(t.runs, 80 * (est->replay.steps - est->replay.steps_counted));
}

/* Where the replay does not apply, peak reserved is the factor rule's. */
static void test_where_it_does_not_apply(void **state)
{
    (void)state;
    run("llama-3-8b", "--train --batch 2 --seq 2048 --fragmentation 0.25", &est);
    assert_false(est->replay.used);
    run("llama-3-8b", "--infer --context 4096", &est);
    assert_false(est->replay.used);
    run("llama-3-8b", "--infer --context 4096 --engine vllm --gpu H100", &est);
    assert_false(est->replay.used);
    run("llama-3-8b", "--train --batch 2 --seq 2048 --pp 2 --gpus 2", &est);
    assert_false(est->replay.used);
}

/* The tensor requests and frees of layer 1's forward in the second step (est_run_requests()),
 * in order: the first step's also takes the forward thread's cuBLAS workspace
 * (test_cublas_workspaces_in_the_replay). */
#define MAX_EVENTS 256
struct layer1_events {
    struct est_replay_request v[MAX_EVENTS];
    size_t n;
};

static void layer1_request(void *ctx, const struct est_replay_request *rq)
{
    struct layer1_events *t = ctx;
    if (rq->pass || rq->step != 1 || rq->at != GM_EST_AT_FORWARD || rq->layer != 1)
        return;
    if (t->n < MAX_EVENTS)
        t->v[t->n++] = *rq;
}

static void run_requests(const char *model, const char *settings, struct layer1_events *t)
{
    struct gm_job j;
    struct gm_error err;
    t->n = 0;
    job_make(model, settings, &j);
    if (est_run_requests(&j, &est, layer1_request, t, &err) != GM_OK)
        fail_msg("%s %s: %s", model, settings, err.msg);
    assert_true(t->n > 0 && t->n < MAX_EVENTS);
}

/* The index of the first event at or after 'from' that allocates (alloc) or frees 'bytes';
 * t->n if none. */
static size_t next_event(const struct layer1_events *t, size_t from, bool alloc, uint64_t bytes)
{
    while (from < t->n && (t->v[from].alloc != alloc || t->v[from].bytes != bytes))
        from++;
    return from;
}

/* The checkpointed forward of one Mistral-7B layer as its code runs it (step_alloc.c
 * forward_layer(): a tensor lives until the code drops its last reference), here a QLoRA job
 * under FOAK's fused LoRA (fms-acceleration 733992a) at 4 x 4096 tokens, bf16:
 *  - matmul_lora drops out each projection's input: PyTorch's dropout allocates the bool
 *    mask (tokens x hidden bytes), then the copy (tokens x hidden x 2 B), right after it;
 *    four times (q, k, v and o); never with lora_dropout 0;
 *  - inside LoRA_QKV the norm's output, q, k, v and the three copies are live together;
 *    the copies are freed when it returns, before the attention's output is allocated;
 *  - the norm's output and q, k, v live until the attention returns, after o_proj;
 *  - the MLP runs act_fn(gate_proj(x)) before up_proj(x), and the second norm's output
 *    lives until down_proj's output exists;
 *  - bitsandbytes' MatMul4Bit dequantises each MLP weight (h x 14336 x 2 B) for its matmul.
 * Sizes are the tensors'; the assertions hold the order, not a validation row's outcome. */
static void test_fused_lora_forward_order(void **state)
{
    static const char *const job = "--train --batch 4 --seq 4096 --grad-checkpointing full "
                                   "--transformers-version 4.45.2 --gpu A100-80GB --qlora "
                                   "--lora-rank 16 --lora-targets q,k,v,o --adapter-dtype fp32 "
                                   "--no-fp32-upcast --loss fused --loss-impl unsloth "
                                   "--fused-kernels rms_norm,rope,lora --lora-dropout";
    const uint64_t T = 4 * 4096, h = 4096, kv = 1024, ffn = 14336;
    const uint64_t mask = T * h, b_h = T * h * 2, b_q = b_h, b_kv = T * kv * 2, b_mlp = T * ffn * 2,
                   w_mlp = h * ffn * 2, w_o = h * h * 2;
    static struct layer1_events ev;
    size_t masks = 0, third_copy = 0, a, o, i, first_free, mlp_allocs = 0, with_h = 0,
           without_h = 0;
    uint64_t base, copies_freed = 0;
    char settings[512];
    (void)state;

    snprintf(settings, sizeof settings, "%s 0.1", job);
    run_requests("mistral-7b", settings, &ev);
    base = ev.v[0].live - ev.v[0].bytes;                /* live before the layer's first request */
    assert_true(ev.v[0].alloc && ev.v[0].bytes == b_h); /* the fused norm's output */
    for (i = 0; i + 1 < ev.n; i++)
        if (ev.v[i].alloc && ev.v[i].bytes == mask) {
            /* the copy follows its mask at once, then the mask goes */
            assert_true(ev.v[i + 1].alloc && ev.v[i + 1].bytes == b_h);
            assert_true(i + 2 < ev.n && !ev.v[i + 2].alloc && ev.v[i + 2].bytes == mask);
            if (++masks == 3)
                third_copy = i + 1;
        }
    assert_int_equal(masks, 4);
    /* at v's copy: norm output, q, k, v, three copies and v's mask, nothing else */
    assert_int_equal(ev.v[third_copy].live, base + b_h + b_q + 2 * b_kv + 3 * b_h + mask);
    /* the attention's output (tokens x hidden, after LoRA_QKV returned): the three copies
     * freed before it; the norm's output, q, k and v still live */
    a = next_event(&ev, third_copy + 1, true, b_h);
    assert_true(a < ev.n);
    for (i = third_copy + 1; i < a; i++)
        copies_freed += !ev.v[i].alloc && ev.v[i].bytes == b_h;
    assert_int_equal(copies_freed, 3);
    assert_int_equal(ev.v[a].live, base + b_h + b_q + 2 * b_kv + b_h);
    /* o_proj's output (its weight dequantised first): the norm's output, q, k, v and the
     * attention's output still live */
    o = next_event(&ev, a + 1, true, b_h);
    assert_true(o < ev.n);
    assert_int_equal(ev.v[o].live, base + b_h + b_q + 2 * b_kv + b_h + w_o + b_h);
    /* the MLP: two of its tensors (gate, activation) before the first is freed (gate) */
    first_free = next_event(&ev, 0, false, b_mlp);
    assert_true(first_free < ev.n);
    for (i = 0; i < first_free; i++)
        mlp_allocs += ev.v[i].alloc && ev.v[i].bytes == b_mlp;
    assert_int_equal(mlp_allocs, 2);
    /* down_proj's output: residual, second norm's output, the product, the dequantised down
     * weight and down itself above the layer's start */
    i = next_event(&ev, first_free, true, w_mlp); /* up's weight */
    i = next_event(&ev, i + 1, true, w_mlp);      /* down's weight */
    assert_true(i + 1 < ev.n && ev.v[i + 1].alloc && ev.v[i + 1].bytes == b_h);
    assert_int_equal(ev.v[i + 1].live, base + b_h + b_h + b_mlp + w_mlp + b_h);

    /* without dropout: no mask and four tokens x hidden tensors fewer (the copies) */
    for (i = 0; i < ev.n; i++)
        with_h += ev.v[i].alloc && ev.v[i].bytes == b_h;
    snprintf(settings, sizeof settings, "%s 0", job);
    run_requests("mistral-7b", settings, &ev);
    for (i = 0; i < ev.n; i++) {
        assert_false(ev.v[i].bytes == mask);
        without_h += ev.v[i].alloc && ev.v[i].bytes == b_h;
    }
    assert_int_equal(with_h, without_h + 4);
}

/* Requests of the point estimate's replay of 'bytes' exactly, by step and moment. */
struct sized_requests {
    uint64_t bytes;
    unsigned allocs[3][GM_EST_AT__COUNT]; /* by step and moment */
    bool first_of_layer1;                 /* step 0's first request in layer 1's forward */
    bool layer1_seen;
};

static void sized_request(void *ctx, const struct est_replay_request *rq)
{
    struct sized_requests *t = ctx;
    if (rq->pass || rq->step > 2)
        return;
    if (rq->step == 0 && rq->at == GM_EST_AT_FORWARD && rq->layer == 1 && !t->layer1_seen) {
        t->layer1_seen = true;
        t->first_of_layer1 = rq->alloc && rq->bytes == t->bytes;
    }
    if (rq->alloc && rq->bytes == t->bytes && (unsigned)rq->at < GM_EST_AT__COUNT)
        t->allocs[rq->step][rq->at]++;
}

/* PyTorch's cuBLAS workspaces in training (cublas.c): the forward's thread takes its handle's
 * at the first GEMM of the first step (layer 1's first request), autograd's device thread its
 * own at the first GEMM of the first backward (the loss's backward: the lm_head's gradient);
 * both kept, so no later step asks for one.  8,519,680 B each on an A100 (":4096:2:16:8"). */
static void test_cublas_workspaces_in_the_replay(void **state)
{
    struct gm_job j;
    struct gm_error err;
    struct sized_requests t;
    (void)state;
    memset(&t, 0, sizeof t);
    t.bytes = 2 * 4096 * 1024 + 8 * 16 * 1024;
    job_make("llama-3-8b", "--train --batch 1 --seq 1024 --gpu A100-80GB", &j);
    if (est_run_requests(&j, &est, sized_request, &t, &err) != GM_OK)
        fail_msg("%s", err.msg);
    assert_int_equal(gm_estimate_kind_bytes(est, GM_KIND_TORCH_WORKSPACE), 2 * t.bytes);
    assert_true(t.first_of_layer1);
    assert_int_equal(t.allocs[0][GM_EST_AT_FORWARD], 1);
    assert_int_equal(t.allocs[0][GM_EST_AT_LOSS], 1);
    assert_int_equal(t.allocs[0][GM_EST_AT_BACKWARD] + t.allocs[0][GM_EST_AT_OPTIMIZER], 0);
    for (unsigned s = 1; s < 3; s++)
        for (unsigned a = 0; a < GM_EST_AT__COUNT; a++)
            assert_int_equal(t.allocs[s][a], 0);
    /* the replay's peak of live tensors is still the estimate's peak allocated */
    assert_int_equal(est->replay.requested_peak, est->peak_allocated_bytes);
    /* a fused linear cross-entropy takes the head's gradients itself (Liger's in its forward,
     * Cut Cross-Entropy's in its kernels): the backward thread's first GEMM is the last
     * layer's, at the start of the layers' backward */
    memset(&t, 0, sizeof t);
    t.bytes = 2 * 4096 * 1024 + 8 * 16 * 1024;
    job_make("llama-3-8b", "--train --batch 1 --seq 1024 --gpu A100-80GB --loss fused-linear", &j);
    if (est_run_requests(&j, &est, sized_request, &t, &err) != GM_OK)
        fail_msg("%s", err.msg);
    assert_true(t.first_of_layer1);
    assert_int_equal(t.allocs[0][GM_EST_AT_FORWARD], 1);
    assert_int_equal(t.allocs[0][GM_EST_AT_LOSS], 0);
    assert_int_equal(t.allocs[0][GM_EST_AT_BACKWARD], 1);
    assert_int_equal(est->replay.requested_peak, est->peak_allocated_bytes);
}

/* The second step's requests at the loss and before the first layer (est_run_requests()). */
struct loss_events {
    struct est_replay_request v[MAX_EVENTS];
    size_t n;
    uint64_t embed; /* the largest tensor allocated before the first layer */
};

static void loss_request(void *ctx, const struct est_replay_request *rq)
{
    struct loss_events *t = ctx;
    if (rq->pass || rq->step != 1)
        return;
    if (rq->at == GM_EST_AT_FORWARD && rq->layer == 0 && rq->alloc && rq->bytes > t->embed)
        t->embed = rq->bytes;
    if (rq->at == GM_EST_AT_LOSS && t->n < MAX_EVENTS)
        t->v[t->n++] = *rq;
}

/* The index of the first event in [from, to) that allocates (alloc) or frees 'bytes'; 'to'
 * if none. */
static size_t find_event(const struct loss_events *t, size_t from, size_t to, bool alloc,
                         uint64_t bytes)
{
    while (from < to && (t->v[from].alloc != alloc || t->v[from].bytes != bytes))
        from++;
    return from;
}

/* FOAK's loss as its code runs it (notes: fms-acceleration 733992a kernels/unsloth/
 * cross_entropy_loss.py Fast_CrossEntropyLoss and rms_layernorm.py Fast_RMS_Layernorm;
 * transformers 4.45 MistralForCausalLM.forward; torch 2.4.1 slice_backward), Mistral-7B
 * QLoRA at 2 x 1024 tokens (T = 2048, V = 32000, h = 4096, bf16):
 *  - the vocabulary-wide requests, in order: lm_head's bf16 logits (T V 2 B), their fp32 copy
 *    A (T V 4 B), the bf16 logits freed, the shifted copy B ((T - 2) V 4 B: a position less
 *    per sequence); A freed before backward (the Trainer drops the outputs); SliceBackward's
 *    zeros (A's size), B freed (the kernel wrote its gradient into B), ToCopyBackward's bf16
 *    gradient, the zeros freed, that gradient freed -- nothing else as wide: the kernel
 *    allocates no logits-sized buffer;
 *  - the final norm's output Y (T h 2 B), held by the forward's hidden_states, is allocated
 *    before the logits, live at the loss's peak (the shifted copy) and freed before A;
 *  - lm_head's backward makes the gradient of its input (T h 2 B) before the bf16 gradient
 *    of the logits goes;
 *  - the embedding's output, the first layer's checkpointed input, is allocated before the
 *    first layer runs. */
static void test_foak_loss_events(void **state)
{
    const uint64_t T = 2 * 1024, h = 4096, V = 32000;
    const uint64_t b_h = T * h * 2, l16 = T * V * 2, a32 = T * V * 4, b32 = (T - 2) * V * 4;
    const struct {
        bool alloc;
        uint64_t bytes;
    } wide[] = {{true, l16}, {true, a32},  {false, l16}, {true, b32},  {false, a32},
                {true, a32}, {false, b32}, {true, l16},  {false, a32}, {false, l16}};
    static struct loss_events ev;
    size_t k = 0, i_l16 = 0, i_b = 0, i_a_free = 0, i_g16 = 0, i_g16_free = 0, y = 0, y_free,
           peak = 0, dx;
    struct gm_job j;
    struct gm_error err;
    (void)state;

    memset(&ev, 0, sizeof ev);
    job_make("mistral-7b",
             "--train --batch 2 --seq 1024 --grad-checkpointing full --transformers-version 4.45.2 "
             "--gpu A100-80GB --qlora --lora-rank 16 --lora-targets q,k,v,o --adapter-dtype fp32 "
             "--no-fp32-upcast --loss fused --loss-impl unsloth --fused-kernels rms_norm,rope,lora",
             &j);
    if (est_run_requests(&j, &est, loss_request, &ev, &err) != GM_OK)
        fail_msg("%s", err.msg);
    assert_true(ev.n > 0 && ev.n < MAX_EVENTS);
    for (size_t i = 0; i < ev.n; i++) {
        if (ev.v[i].bytes < l16)
            continue;
        assert_true(k < sizeof wide / sizeof wide[0]);
        assert_int_equal(ev.v[i].alloc, wide[k].alloc);
        assert_int_equal(ev.v[i].bytes, wide[k].bytes);
        if (k == 0)
            i_l16 = i;
        else if (k == 3)
            i_b = i;
        else if (k == 4)
            i_a_free = i;
        else if (k == 7)
            i_g16 = i;
        else if (k == 9)
            i_g16_free = i;
        k++;
    }
    assert_int_equal(k, sizeof wide / sizeof wide[0]);
    /* Y: the last hidden-wide request before the logits, freed after B and before A */
    for (size_t i = 0; i < i_l16; i++)
        if (ev.v[i].alloc && ev.v[i].bytes == b_h)
            y = i + 1;
    assert_true(y > 0);
    y_free = find_event(&ev, i_b, i_a_free, false, b_h);
    assert_true(y_free < i_a_free);
    /* the loss's peak: after B is made, while Y is still live */
    for (size_t i = 0; i < ev.n; i++)
        if (ev.v[i].live > ev.v[peak].live)
            peak = i;
    assert_true(peak >= i_b && peak < y_free);
    /* lm_head's input gradient between the bf16 gradient's alloc and its free */
    dx = find_event(&ev, i_g16, i_g16_free, true, b_h);
    assert_true(dx < i_g16_free);
    /* the embedding's output before the first layer */
    assert_int_equal(ev.embed, b_h);
    assert_int_equal(est->replay.requested_peak, est->peak_allocated_bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_requested_peak_is_peak_allocated),
        cmocka_unit_test(test_gradients_outgrow_activations),
        cmocka_unit_test(test_fsdp_streams),
        cmocka_unit_test(test_fsdp1_kept_gradients_made_per_layer),
        cmocka_unit_test(test_stream_live_peaks_floor_reserved),
        cmocka_unit_test(test_fsdp1_deferred_frees),
        cmocka_unit_test(test_fsdp1_wrap_segments),
        cmocka_unit_test(test_lazy_state_takes_the_cache),
        cmocka_unit_test(test_inline_loss_fp32_backward),
        cmocka_unit_test(test_capacity_retry_and_oom),
        cmocka_unit_test(test_remembered_replay_is_the_replay),
        cmocka_unit_test(test_verdict_from_the_limited_replay),
        cmocka_unit_test(test_settled_step_counted_as_run),
        cmocka_unit_test(test_replay_and_floor),
        cmocka_unit_test(test_floor_stops_at_the_capacity),
        cmocka_unit_test(test_failed_request_named),
        cmocka_unit_test(test_failed_request_layout),
        cmocka_unit_test(test_failure_reads_own_pool_and_stream),
        cmocka_unit_test(test_step_ends_with_what_it_began),
        cmocka_unit_test(test_alloc_conf_reaches_the_replay),
        cmocka_unit_test(test_where_it_does_not_apply),
        cmocka_unit_test(test_segment_trace),
        cmocka_unit_test(test_segment_list),
        cmocka_unit_test(test_dequant_buffer_tensors),
        cmocka_unit_test(test_model_upcast_loss_segments),
        cmocka_unit_test(test_loss_cache_block),
        cmocka_unit_test(test_loss_cache_block_foak_only),
        cmocka_unit_test(test_fused_lora_forward_order),
        cmocka_unit_test(test_cublas_workspaces_in_the_replay),
        cmocka_unit_test(test_foak_loss_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
