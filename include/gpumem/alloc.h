/* SPDX-License-Identifier: MIT */
/* alloc.h - a model of PyTorch's CUDA caching allocator over a pluggable device.
 *
 * The model reproduces DeviceCachingAllocator (c10/cuda/CUDACachingAllocator.cpp): 512-byte
 * rounding and roundup_power2_divisions, small (<= 1 MiB) and large pools, 2 MiB / 20 MiB /
 * 2 MiB-rounded segments, best fit by (stream, size, address), splitting and merging,
 * max_split_size, expandable segments (pages mapped into one reserved range per stream and
 * pool), empty_cache, garbage_collection_threshold, the out-of-memory retry path and the
 * statistics of torch.cuda.memory_stats().  The rules are in
 * docs/alloc.md, section 1, each with the PyTorch function it follows.
 *
 * "Device memory" comes from a function table (struct gm_alloc_device_ops): a deterministic
 * host-side fake that never touches memory (gm_alloc_fakedev_*) or the real driver.  The
 * model itself never dereferences a device address. */
#ifndef GPUMEM_ALLOC_H
#define GPUMEM_ALLOC_H

#include "gpumem/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

/* Constants of the allocator (allocator-model.md section 1). */
#define GM_ALLOC_MIN_BLOCK         ((uint64_t)512)      /* kMinBlockSize */
#define GM_ALLOC_SMALL_SIZE        ((uint64_t)1 << 20)  /* kSmallSize */
#define GM_ALLOC_SMALL_BUFFER      ((uint64_t)2 << 20)  /* kSmallBuffer */
#define GM_ALLOC_MIN_LARGE_ALLOC   ((uint64_t)10 << 20) /* kMinLargeAlloc */
#define GM_ALLOC_ROUND_LARGE       ((uint64_t)2 << 20)  /* kRoundLarge */
#define GM_ALLOC_LARGE_BUFFER      ((uint64_t)20 << 20) /* kLargeBuffer */
#define GM_ALLOC_NO_SPLIT_LIMIT    UINT64_MAX           /* max_split_size "unlimited" */
#define GM_ALLOC_ROUNDUP_INTERVALS 16                   /* 1 MiB ... 32 GiB and above */

enum gm_alloc_backend {
    GM_ALLOC_BACKEND_NATIVE = 0,
    GM_ALLOC_BACKEND_CUDA_MALLOC_ASYNC /* parsed, not modelled */
};

/* The settings of PYTORCH_CUDA_ALLOC_CONF. */
struct gm_alloc_conf {
    uint64_t max_split_size;              /* bytes; GM_ALLOC_NO_SPLIT_LIMIT: none */
    uint64_t max_non_split_rounding_size; /* bytes; default 20 MiB */
    double garbage_collection_threshold;  /* fraction in (0,1); 0: off */
    bool expandable_segments;
    uint32_t roundup_power2_divisions[GM_ALLOC_ROUNDUP_INTERVALS]; /* 0 or a power of two */
    enum gm_alloc_backend backend;
    bool release_lock_on_cudamalloc;      /* accepted, no effect on the model */
    bool pinned_use_cuda_host_register;   /* accepted, no effect on the model */
    uint64_t pinned_num_register_threads; /* accepted, no effect on the model */
    bool pinned_use_background_threads;   /* accepted, no effect on the model */
};

/* PyTorch's defaults: no split limit, 20 MiB non-split rounding, no GC, no expandable
 * segments, no power-of-two rounding, native backend. */
void gm_alloc_conf_init(struct gm_alloc_conf *conf);

/* Parse a PYTORCH_CUDA_ALLOC_CONF string ("expandable_segments:True,max_split_size_mb:128",
 * "roundup_power2_divisions:[256:1,512:2,>:4]") on top of the values already in 'conf'
 * (call gm_alloc_conf_init() first).  NULL or "" changes nothing.  GM_ERR_INVALID with the
 * option named and the byte offset of the offending token in err->offset.  Unknown keys
 * are errors, as in PyTorch. */
enum gm_status gm_alloc_conf_parse(struct gm_alloc_conf *conf, const char *s, struct gm_error *err);

/* Write the canonical PYTORCH_CUDA_ALLOC_CONF form of the options that differ from the
 * defaults into 'out' ("" for the defaults), truncating at n-1 bytes.  Returns 'out'. */
char *gm_alloc_conf_format(const struct gm_alloc_conf *conf, char *out, size_t n);

/* round_size(): the block size a request of 'size' bytes occupies (0 stays 0). */
uint64_t gm_alloc_round_size(const struct gm_alloc_conf *conf, uint64_t size);

/* get_allocation_size(): the segment size cudaMalloc'd for a rounded request. */
uint64_t gm_alloc_segment_size(uint64_t rounded);

/* The "device" behind the model.  Each function gets the 'ctx' given with the table.
 * seg_alloc/map return GM_OK, GM_ERR_LIMIT when the device is out of memory (the model then
 * takes its retry path, as PyTorch does on cudaErrorMemoryAllocation) or another status for
 * a hard error, which the model passes on.  The VMM functions are needed only with
 * expandable segments and may be NULL otherwise. */
struct gm_alloc_device_ops {
    enum gm_status (*seg_alloc)(void *ctx, uint64_t size, uint64_t *addr, struct gm_error *err);
    void (*seg_free)(void *ctx, uint64_t addr, uint64_t size);
    /* reserve a virtual range (cuMemAddressReserve); GM_ERR_LIMIT when impossible */
    enum gm_status (*va_reserve)(void *ctx, uint64_t size, uint64_t align, uint64_t *addr,
                                 struct gm_error *err);
    void (*va_release)(void *ctx, uint64_t addr, uint64_t size);
    /* back [addr, addr+size) with physical pages (cuMemCreate + cuMemMap + SetAccess) */
    enum gm_status (*map)(void *ctx, uint64_t addr, uint64_t size, struct gm_error *err);
    void (*unmap)(void *ctx, uint64_t addr, uint64_t size);
};

struct gm_alloc_device {
    const struct gm_alloc_device_ops *ops;
    void *ctx;
    uint64_t total_bytes; /* device memory (totalGlobalMem); sizes the expandable VA range */
};

/* One statistic as torch keeps it: current, peak, allocated (sum of increases), freed. */
struct gm_alloc_stat {
    uint64_t current;
    uint64_t peak;
    uint64_t allocated;
    uint64_t freed;
};

/* Index of the per-pool statistic arrays (torch's StatType order). */
enum gm_alloc_stat_type {
    GM_ALLOC_STAT_ALL = 0,
    GM_ALLOC_STAT_SMALL_POOL = 1,
    GM_ALLOC_STAT_LARGE_POOL = 2,
    GM_ALLOC_STAT_N = 3
};

/* torch.cuda.memory_stats() for one device. */
struct gm_alloc_stats {
    struct gm_alloc_stat allocation[GM_ALLOC_STAT_N];           /* count */
    struct gm_alloc_stat segment[GM_ALLOC_STAT_N];              /* count */
    struct gm_alloc_stat active[GM_ALLOC_STAT_N];               /* count */
    struct gm_alloc_stat inactive_split[GM_ALLOC_STAT_N];       /* count */
    struct gm_alloc_stat allocated_bytes[GM_ALLOC_STAT_N];      /* bytes */
    struct gm_alloc_stat reserved_bytes[GM_ALLOC_STAT_N];       /* bytes */
    struct gm_alloc_stat active_bytes[GM_ALLOC_STAT_N];         /* bytes */
    struct gm_alloc_stat inactive_split_bytes[GM_ALLOC_STAT_N]; /* bytes */
    struct gm_alloc_stat requested_bytes[GM_ALLOC_STAT_N];      /* bytes */
    struct gm_alloc_stat oversize_allocations;                  /* count */
    struct gm_alloc_stat oversize_segments;                     /* count */
    uint64_t num_alloc_retries;
    uint64_t num_ooms;
    uint64_t num_sync_all_streams;
    uint64_t num_device_alloc;
    uint64_t num_device_free;
    uint64_t max_split_size; /* bytes; GM_ALLOC_NO_SPLIT_LIMIT when unlimited */
};

/* What the model did to the device, in order: what a snapshot trace records as
 * segment_alloc / segment_free / segment_map / segment_unmap, plus oom. */
enum gm_alloc_event_kind {
    GM_ALLOC_EV_SEGMENT_ALLOC = 0,
    GM_ALLOC_EV_SEGMENT_FREE,
    GM_ALLOC_EV_SEGMENT_MAP,
    GM_ALLOC_EV_SEGMENT_UNMAP,
    GM_ALLOC_EV_OOM
};

/* "segment_alloc", "segment_free", "segment_map", "segment_unmap", "oom". */
const char *gm_alloc_event_name(enum gm_alloc_event_kind kind);

typedef void (*gm_alloc_event_fn)(void *ctx, enum gm_alloc_event_kind kind, uint64_t addr,
                                  uint64_t size, int64_t stream);

struct gm_alloc;
struct gm_json;

/* Write 's' as a JSON object with torch.cuda.memory_stats()'s keys ("allocated_bytes.all.
 * peak", ..., "max_split_size" = -1 when unlimited), sorted as torch sorts them.  The
 * caller writes the key first when inside an object. */
void gm_alloc_stats_write_json(struct gm_json *w, const struct gm_alloc_stats *s);

/* Create a model with 'conf' (copied) over 'dev' (copied; the ops table and its ctx must
 * outlive the model).  The configuration is fixed for the model's lifetime, as PyTorch
 * reads it once.  GM_ERR_NOMEM, or GM_ERR_INVALID when expandable segments are requested
 * but the device has no VMM functions, or the backend is cudaMallocAsync. */
enum gm_status gm_alloc_new(const struct gm_alloc_conf *conf, const struct gm_alloc_device *dev,
                            struct gm_alloc **out, struct gm_error *err);

/* Release the model's bookkeeping and give every segment back to the device.
 * gm_alloc_free(NULL) is a no-op. */
void gm_alloc_free(struct gm_alloc *a);

/* Give every segment back to the model's device, then start again as gm_alloc_new() does
 * with 'conf' over 'dev' (the same rules, the same results), keeping the memory the
 * bookkeeping took (block records, set nodes, map slots): a series of runs takes it once
 * instead of from the system each time.  The old device is used only until this returns.
 * On an error (those of gm_alloc_new()) the model is unchanged. */
enum gm_status gm_alloc_reset(struct gm_alloc *a, const struct gm_alloc_conf *conf,
                              const struct gm_alloc_device *dev, struct gm_error *err);

/* set_per_process_memory_fraction(fraction) on a device of 'total' bytes: a cap on reserved
 * memory, and the precondition of garbage collection.  fraction in (0, 1]. */
enum gm_status gm_alloc_set_memory_fraction(struct gm_alloc *a, double fraction,
                                            struct gm_error *err);

/* From now on count of a request (malloc, free) only what a caller of the peaks reads:
 * allocated_bytes[GM_ALLOC_STAT_ALL]; allocation, active, active_bytes, inactive_split,
 * inactive_split_bytes, requested_bytes, oversize_allocations and the pools' allocated_bytes
 * stay as they were (0 when set first).  Segments, reserved bytes and the num_* counts are
 * counted in full.  A lean model also keeps no map from addresses to blocks (a look-up and
 * its cache misses per request): its blocks are freed and used on other streams by handle
 * (gm_alloc_malloc_block()), and an address finds none (gm_alloc_dealloc() and
 * gm_alloc_record_stream() fail with GM_ERR_INVALID, gm_alloc_block_size() reads 0), so set
 * it before the first request.  Nothing else changes.  gm_alloc_reset() counts everything
 * again. */
void gm_alloc_set_lean(struct gm_alloc *a);

/* Receive every device-level event (may be NULL to stop). */
void gm_alloc_set_event_hook(struct gm_alloc *a, gm_alloc_event_fn fn, void *ctx);

/* malloc(size) on 'stream'.  *ptr gets the block address (0 for size 0, which changes no
 * statistic).  GM_ERR_LIMIT is PyTorch's OutOfMemoryError: the message says what was tried,
 * what is allocated and what is reserved but unallocated; num_ooms counts it.  GM_ERR_NOMEM
 * when the host runs out of memory. */
enum gm_status gm_alloc_malloc(struct gm_alloc *a, uint64_t size, int64_t stream, uint64_t *ptr,
                               struct gm_error *err);

/* A block gm_alloc_malloc_block() handed out: the caller's handle on it until it is freed
 * (what it points to is the model's, never read by the caller). */
struct gm_alloc_block;

/* gm_alloc_malloc(), giving the block's handle too (*blk; NULL for size 0 or on an error),
 * which gm_alloc_dealloc_block() and gm_alloc_record_stream_block() take without looking its
 * address up. */
enum gm_status gm_alloc_malloc_block(struct gm_alloc *a, uint64_t size, int64_t stream,
                                     uint64_t *ptr, struct gm_alloc_block **blk,
                                     struct gm_error *err);

/* free(ptr).  allocated_bytes drops at once.  A block used on no other stream returns to
 * its pool at once; one given to gm_alloc_record_stream() gets an end-of-life event on each
 * such stream (insert_events) and stays active, out of its pool, until every one is
 * complete (gm_alloc_stream_passed) and the next malloc (process_events) or empty_cache /
 * the out-of-memory path (synchronize_and_free_events) sees it.  GM_ERR_INVALID for an
 * address that is not an allocated block; freeing 0 is a no-op. */
enum gm_status gm_alloc_dealloc(struct gm_alloc *a, uint64_t ptr, struct gm_error *err);

/* gm_alloc_dealloc() of the block behind 'blk', which must be allocated (handed out and not
 * freed since); NULL is a no-op. */
enum gm_status gm_alloc_dealloc_block(struct gm_alloc *a, struct gm_alloc_block *blk,
                                      struct gm_error *err);

/* Tensor.record_stream(stream) on the block at 'ptr' (recordStream): ignored for the
 * block's own stream.  GM_ERR_INVALID for an address that is not an allocated block. */
enum gm_status gm_alloc_record_stream(struct gm_alloc *a, uint64_t ptr, int64_t stream,
                                      struct gm_error *err);

/* gm_alloc_record_stream() on the block behind 'blk', which must be allocated. */
enum gm_status gm_alloc_record_stream_block(struct gm_alloc *a, struct gm_alloc_block *blk,
                                            int64_t stream, struct gm_error *err);

/* A point in the order of the end-of-life events: a cuda event recorded now on any stream
 * follows every event recorded so far.  gm_alloc_stream_passed(a, s, mark): the GPU has run
 * stream 's' past 'mark' (cudaEventSynchronize of an event recorded on 's' then), so the
 * events recorded on 's' up to that point are complete. */
uint64_t gm_alloc_stream_mark(const struct gm_alloc *a);
void gm_alloc_stream_passed(struct gm_alloc *a, int64_t stream, uint64_t mark);

/* Blocks freed with events outstanding, and their bytes ('bytes' may be NULL). */
size_t gm_alloc_pending_blocks(const struct gm_alloc *a, uint64_t *bytes);

/* The block size behind an allocated address, 0 if none. */
uint64_t gm_alloc_block_size(const struct gm_alloc *a, uint64_t ptr);

/* The model's state as words, to compare with another moment's: equal words, and the
 * model answers the same requests alike from then on (the same addresses, splits and
 * segments, the statistics' current values moving the same way).  Every block with its
 * pool, stream, size, bytes requested, whether allocated, and whether a block lies before it
 * in its segment (the one that ends where it starts), 5 words each.  *words is the caller's array
 * of *cap words (NULL and 0 at first), grown as needed and released with gm_free(); *n words are
 * written.  GM_ERR_UNSUPPORTED (*n 0) when the words would not say it all: expandable segments, a
 * block used on another stream or waiting for events, garbage collection under a memory fraction
 * (its ages); GM_ERR_NOMEM. */
enum gm_status gm_alloc_state(const struct gm_alloc *a, uint64_t **words, size_t *n, size_t *cap,
                              struct gm_error *err);

/* torch.cuda.empty_cache(): release every unsplit cached block, unmap every free page. */
void gm_alloc_empty_cache(struct gm_alloc *a);

/* Copy the statistics. */
void gm_alloc_get_stats(const struct gm_alloc *a, struct gm_alloc_stats *out);

/* reset_peak_memory_stats(): peak = current for every statistic. */
void gm_alloc_reset_peak(struct gm_alloc *a);

/* reset_accumulated_memory_stats(): zero allocated/freed and the num_* counters. */
void gm_alloc_reset_accumulated(struct gm_alloc *a);

/* Number of segments the model holds (expandable segments count once each). */
size_t gm_alloc_segment_count(const struct gm_alloc *a);

/* The segments as torch.cuda.memory_snapshot() lists them: each cudaMalloc segment, and
 * each contiguous mapped range of an expandable segment.  Writes up to 'cap' sizes (bytes,
 * in no particular order) to 'out' and returns how many there are. */
size_t gm_alloc_segment_sizes(const struct gm_alloc *a, uint64_t *out, size_t cap);

/* What a block of a segment is, as torch.cuda.memory_snapshot() says it. */
enum gm_alloc_block_state {
    GM_ALLOC_BLOCK_INACTIVE = 0,     /* free, in its pool */
    GM_ALLOC_BLOCK_ACTIVE_ALLOCATED, /* allocated */
    GM_ALLOC_BLOCK_PENDING_FREE,     /* freed, with end-of-life events outstanding */
};

struct gm_alloc_block_info {
    uint64_t addr;
    uint64_t size;      /* bytes */
    uint64_t requested; /* bytes its last caller asked for (kept once it is freed, as torch) */
    uint8_t state;      /* enum gm_alloc_block_state */
};

/* A segment as torch.cuda.memory_snapshot() lists it: a cudaMalloc'ed segment, or one
 * contiguous mapped range of an expandable segment, with its blocks by address. */
struct gm_alloc_segment_info {
    uint64_t addr;
    uint64_t size; /* bytes */
    int64_t stream;
    bool is_small; /* the small (<= 1 MiB requests) pool */
    bool is_expandable;
    const struct gm_alloc_block_info *blocks; /* borrowed for the call */
    size_t n_blocks;
};

typedef enum gm_status (*gm_alloc_segment_fn)(void *ctx, const struct gm_alloc_segment_info *seg,
                                              struct gm_error *err);

/* Each segment of the model, by address, to fn(ctx, seg) (borrowed for the call).  A non-OK
 * status from fn stops the walk and is returned; GM_ERR_NOMEM otherwise. */
enum gm_status gm_alloc_segments(const struct gm_alloc *a, gm_alloc_segment_fn fn, void *ctx,
                                 struct gm_error *err);

/* The deterministic fake device for tests and replay: addresses from a counter (each range
 * aligned to 2 MiB, never touched), an optional capacity on physical bytes (0: unlimited).
 * Initialise with gm_alloc_fakedev_init() and pass gm_alloc_fakedev_ops with &fake as ctx. */
struct gm_alloc_fakedev {
    uint64_t capacity;   /* bytes of physical memory, 0: unlimited */
    uint64_t used;       /* bytes held by segments and mapped pages */
    uint64_t peak_used;  /* bytes */
    uint64_t next_addr;  /* next address handed out */
    uint64_t n_alloc;    /* seg_alloc + map calls that succeeded */
    uint64_t n_free;     /* seg_free + unmap calls */
    uint64_t fail_after; /* fail every seg_alloc/map once this many succeeded; 0: never */
};
void gm_alloc_fakedev_init(struct gm_alloc_fakedev *f, uint64_t capacity);
extern const struct gm_alloc_device_ops gm_alloc_fakedev_ops;

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
