/* SPDX-License-Identifier: MIT */
/* replay.h - replay a memory snapshot's alloc/free trace through the allocator model.
 *
 * With the snapshot's own allocator settings the model must reproduce the recorded
 * segment_alloc / segment_free / segment_map / segment_unmap events (kind and size, in
 * order); that is the validation (allocator-model.md section 10.3).  With other settings
 * the same allocation sequence answers "what would peak reserved memory and fragmentation
 * be with expandable_segments:True / another max_split_size_mb / GC?".
 *
 * Soundness conditions checked per device (section 10.4): no private (CUDA graph) pools, no
 * cudaMallocAsync backend, a consistent trace with alloc events.  A trace that does not
 * start from an empty allocator (recording started late, or the ring buffer wrapped: frees
 * of addresses it never allocated, segments its events do not account for) is replayed
 * from the state the file records at its start: the segments that existed then are
 * created first and the allocations alive from the start placed into them by the model's
 * own best fit.  What is then unknown (where those allocations sat inside their segments,
 * and so the first segment events may differ) is said in late_start_unknown.  empty_cache()
 * calls are not trace actions: they are inferred where the trace frees segments the model
 * still caches, and replayed at the same trace positions under other settings.
 *
 * "Reserved but unallocated at the allocated peak" is reserved minus allocated bytes at the
 * moment the allocated bytes first peak, the figure `gpumem snapshot oom` gives at the peak
 * (gm_analysis_frag.reserved_unallocated of peak_frag) under the same name. */
#ifndef GPUMEM_REPLAY_H
#define GPUMEM_REPLAY_H

#include "gpumem/alloc.h"
#include "gpumem/error.h"
#include "gpumem/snapshot.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

struct gm_replay_opts {
    const struct gm_alloc_conf *what_if; /* other settings to predict; NULL: the recorded
                                          * ones when device_bytes is set, else none */
    uint64_t device_bytes;               /* device memory: caps the what-if model (0: unlimited) */
    double memory_fraction;              /* set_per_process_memory_fraction (0: not set); needs
                                          * device_bytes; the precondition of garbage collection */
};

/* Figures of one model run over a device trace. */
struct gm_replay_run {
    uint64_t segment_events; /* segment_alloc/free/map/unmap produced */
    uint64_t peak_reserved_bytes;
    uint64_t peak_allocated_bytes;
    uint64_t final_reserved_bytes;
    uint64_t final_allocated_bytes;
    uint64_t allocated_at_peak_reserved_bytes;    /* allocated when reserved first peaked */
    uint64_t reserved_at_peak_allocated_bytes;    /* reserved when allocated first peaked */
    uint64_t unallocated_at_peak_allocated_bytes; /* reserved but unallocated then: the
                                                   * first less peak_allocated_bytes */
    uint64_t n_ooms;                              /* allocations the model could not satisfy */
    uint64_t n_ooms_at_start; /* of them, what a late trace had at its start (not in the trace) */
    int64_t first_oom_event;  /* trace index of the first of them, -1 if none */
    uint64_t first_oom_request_bytes; /* its requested size */
    uint64_t n_alloc_retries;         /* cache flushes forced by a full device */
    struct gm_alloc_stats stats;      /* memory_stats() at the end */
};

/* A recorded or predicted segment event. */
struct gm_replay_event {
    enum gm_alloc_event_kind kind;
    uint64_t size;       /* bytes */
    int64_t trace_index; /* recorded: index in the device trace; predicted: the index of the
                          * trace event being replayed when the model produced it */
};

struct gm_replay_divergence {
    uint64_t index;    /* position in the segment-event sequences */
    bool has_recorded; /* false: the recording ended first */
    struct gm_replay_event recorded;
    bool has_predicted; /* false: the model produced fewer events */
    struct gm_replay_event predicted;
};

struct gm_replay_device {
    int32_t device;
    bool replayable;
    char reason[200]; /* why not, when !replayable */
    /* The trace does not start from an empty allocator: the model starts from the state
     * the file records then (see above). */
    bool late_start;
    char late_start_note[200];       /* why it is late */
    char late_start_unknown[200];    /* what is then unknown */
    uint64_t initial_segments;       /* segments (or mapped ranges) created before the trace */
    uint64_t initial_reserved_bytes; /* their bytes */
    uint64_t initial_allocations;    /* allocations alive from the start */
    uint64_t initial_allocated_bytes;
    uint64_t n_trace_events;
    uint64_t n_allocs; /* alloc events replayed */
    uint64_t recorded_segment_events;
    uint64_t recorded_peak_reserved_bytes;
    uint64_t recorded_final_reserved_bytes; /* sum of the final segments */
    uint64_t recorded_ooms;
    uint64_t n_inferred_empty_cache;
    /* the model with the snapshot's own settings (valid when replayable) */
    struct gm_replay_run own;
    uint64_t segment_events_matched;  /* common prefix of recorded and predicted events */
    uint64_t final_segments_recorded; /* segments in the snapshot for this device */
    uint64_t final_segments_model;    /* segments the model ends with */
    bool final_segments_match;        /* same multiset of segment sizes */
    uint64_t final_blocks_recorded;   /* active_allocated + active_pending_free blocks */
    uint64_t final_blocks_model;      /* allocated blocks in the model at the end */
    bool final_blocks_match;          /* same multiset of allocated block sizes */
    bool has_divergence;
    struct gm_replay_divergence first_divergence;
    /* the model with opts.what_if (valid when replayable and what_if was given) */
    bool has_what_if;
    struct gm_replay_run what_if;
};

struct gm_replay_result {
    struct gm_alloc_conf own_conf;    /* the snapshot's settings as the model uses them */
    bool own_conf_assumed;            /* no allocator_settings in the file: defaults assumed */
    char own_conf_string[256];        /* canonical PYTORCH_CUDA_ALLOC_CONF of own_conf */
    struct gm_replay_device *devices; /* one per device with a non-empty trace */
    size_t n_devices;
};

/* The allocator settings recorded in 'snap' (allocator_settings), or the defaults with
 * *assumed = true when the file predates them (expandable segments are then inferred
 * from expandable segments or segment_map events in the file). */
void gm_replay_snapshot_conf(const struct gm_snapshot *snap, struct gm_alloc_conf *conf,
                             bool *assumed);

/* ---- comparing the common settings (gpumem snapshot replay --compare) ---- */

/* One setting tried: the recorded settings with one change. */
struct gm_replay_choice {
    struct gm_alloc_conf conf;
    char change[80];    /* the change, as PYTORCH_CUDA_ALLOC_CONF ("" for the recorded ones) */
    char settings[256]; /* the whole PYTORCH_CUDA_ALLOC_CONF tried ("" the defaults) */
    struct gm_replay_run run;
};

enum gm_replay_verdict {
    GM_REPLAY_KEEP = 0,     /* no change saves at least 5% or 64 MiB of peak reserved */
    GM_REPLAY_CHANGE,       /* choices[0] saves that much */
    GM_REPLAY_AVOIDS_OOM,   /* with device memory: choices[0] has fewer out-of-memory errors */
    GM_REPLAY_NOTHING_FITS, /* with device memory: every choice runs out of memory */
};

/* "keep", "change", "avoids_oom", "nothing_fits"; static storage. */
const char *gm_replay_verdict_name(enum gm_replay_verdict v);

#define GM_REPLAY_MAX_CHOICES 10
struct gm_replay_comparison {
    int32_t device;
    /* ranked: the fewest out-of-memory errors, then the lowest peak reserved, the recorded
     * settings first among equals */
    struct gm_replay_choice choices[GM_REPLAY_MAX_CHOICES];
    size_t n_choices;
    size_t recorded; /* index of the recorded settings in choices */
    uint8_t verdict; /* enum gm_replay_verdict */
};

/* For every replayable device of 'snap', replay the trace under the common settings, each
 * one change from the recorded ones: expandable_segments, max_split_size_mb 128/256/512,
 * garbage_collection_threshold 0.8 (only with opts->device_bytes: it acts only under a
 * memory fraction, opts->memory_fraction or else 1.0) and roundup_power2_divisions 4, on a
 * device of opts->device_bytes (0: unlimited); and rank them.  opts->what_if is not used.
 * *out (gm_free(), one per replayable device, *n_out of them) is the caller's.  Errors:
 * GM_ERR_INVALID (bad opts), GM_ERR_NOMEM. */
enum gm_status gm_replay_compare(const struct gm_snapshot *snap, const struct gm_replay_opts *opts,
                                 struct gm_replay_comparison **out, size_t *n_out,
                                 struct gm_error *err);

/* Replay every device trace of 'snap'.  On success 'out' is owned by the caller: release
 * it with gm_replay_release().  A device that cannot be replayed soundly is reported
 * (replayable = false, reason), not an error.  Errors: GM_ERR_INVALID (bad opts),
 * GM_ERR_NOMEM. */
enum gm_status gm_replay_snapshot(const struct gm_snapshot *snap, const struct gm_replay_opts *opts,
                                  struct gm_replay_result *out, struct gm_error *err);
void gm_replay_release(struct gm_replay_result *r);

/* ---- the JSON documents (`gpumem snapshot replay --json`) ---- */

/* The share of the reserved bytes that is not allocated, 0 when reserved is 0 (or less
 * than allocated, in an inconsistent file). */
double gm_replay_fragmentation(uint64_t reserved, uint64_t allocated);

/* A replay to write.  Initialise with designated initialisers: members may be added. */
struct gm_replay_doc {
    const char *path;                               /* the snapshot as the caller named it */
    const struct gm_snapshot *snap;                 /* the snapshot replayed */
    const struct gm_replay_result *result;          /* gm_replay_snapshot() */
    const char *what_if;                            /* the what-if settings; NULL: none */
    uint64_t device_bytes;                          /* device memory given; 0: unlimited */
    const struct gm_replay_comparison *comparisons; /* gm_replay_compare(), or NULL */
    size_t n_comparisons;
};

/* Write gpumem.snapshot.replay/1, or gpumem.snapshot.replay_compare/1 when 'comparisons'
 * is set, to 'f'.  Errors: GM_ERR_INVALID (results missing), GM_ERR_IO. */
enum gm_status gm_replay_json(FILE *f, const struct gm_replay_doc *doc, struct gm_error *err);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
