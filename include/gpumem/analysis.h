/* SPDX-License-Identifier: MIT */
/* analysis.h - explain a memory snapshot: what each allocation is (parameter, activation,
 * gradient, ...), which phase of training every moment belongs to (forward, backward,
 * optimizer step), the training iterations, memory that leaks from iteration to iteration,
 * fragmentation and out-of-memory events, and the difference between two snapshots.
 *
 * Everything is derived from a loaded struct gm_snapshot (snapshot.h): the stack frames
 * that PyTorch records (torch/nn/modules/module.py module calls, the autograd engine,
 * torch/optim, zero_grad, torch/utils/data, user code) combined with each allocation's
 * lifetime.  The rules are documented in docs/analysis.md; every allocation carries the
 * rule that decided its category (enum gm_rule), and the bytes no rule explained are
 * reported apart (never guessed silently).
 *
 * Usage:
 *   struct gm_analysis *an;
 *   if (gm_analysis_run(snap, NULL, &an, &err) != GM_OK) ...;
 *   for (size_t d = 0; d < an->n_devices; d++) {
 *       const struct gm_analysis_device *dev = &an->devices[d];
 *       for (int c = 0; c < GM_CATEGORY_COUNT; c++)
 *           printf("%s %llu\n", gm_category_name(c), (unsigned long long)dev->at_peak[c]);
 *       for (size_t i = 0; i < dev->n_points; i++) ... dev->points[i].bytes[c] ...
 *   }
 *   gm_analysis_free(an);
 *
 * Ownership: a struct gm_analysis owns every array reachable from it (one arena) and
 * borrows the snapshot: keep the snapshot alive until gm_analysis_free().  Stack ids are
 * the snapshot's (snap->stacks[id]).  Sizes are the trace's bytes (requested bytes, as
 * memory_viz draws them), so totals match gm_snapshot_timeline(). */
#ifndef GPUMEM_ANALYSIS_H
#define GPUMEM_ANALYSIS_H

#include "gpumem/error.h"
#include "gpumem/snapshot.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct gm_digest;
struct gm_lod_totals;

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

struct ana_device_priv;

/* ---- categories and phases ---- */

enum gm_category {
    GM_CATEGORY_PARAMETER = 0,   /* weights and buffers of the model */
    GM_CATEGORY_INPUT,           /* batches copied to the GPU */
    GM_CATEGORY_ACTIVATION,      /* forward results kept for backward (or held by the caller) */
    GM_CATEGORY_GRADIENT,        /* parameter gradients (.grad), alive past backward */
    GM_CATEGORY_OPTIMIZER_STATE, /* optimizer state (Adam moments), born in a step, kept */
    GM_CATEGORY_OPTIMIZER_TEMP,  /* temporaries of an optimizer step, freed in the step */
    GM_CATEGORY_OTHER,           /* temporaries, activation gradients, unexplained */
};
#define GM_CATEGORY_COUNT 7

/* "parameter", "input", "activation", "gradient", "optimizer_state", "optimizer_temp",
 * "other" (the JSON keys); static storage. */
const char *gm_category_name(enum gm_category c);

enum gm_phase {
    GM_PHASE_OTHER = 0, /* data loading, zero_grad, clipping, logging, setup, unknown */
    GM_PHASE_FORWARD,
    GM_PHASE_BACKWARD,
    GM_PHASE_OPTIMIZER_STEP,
};
#define GM_PHASE_COUNT 4

/* What reduces the memory of a category when it dominates a peak (a paragraph naming
 * the PyTorch features that help); static storage. */
const char *gm_category_advice(enum gm_category c);

/* "other", "forward", "backward", "optimizer_step"; static storage. */
const char *gm_phase_name(enum gm_phase p);

/* The rule that decided an allocation's category (docs/analysis.md lists them). */
enum gm_rule {
    GM_RULE_NONE = 0,       /* no rule matched: counted as unexplained "other" */
    GM_RULE_PARAM_FRAMES,   /* parameter: Module._apply/to/cuda, init, load_state_dict,
                             * from_pretrained, torch.load frames */
    GM_RULE_PARAM_LIFETIME, /* parameter: alive from before the trace to its end, with no
                             * stack (allocated before recording started) */
    GM_RULE_INPUT_FRAMES,   /* input: torch/utils/data frames */
    GM_RULE_INPUT_BATCH,    /* input: a few tensors allocated by user code before a forward,
                             * freed by the next iteration (or the latest such batch) */
    GM_RULE_ACT_SAVED,      /* activation: born in forward, freed in backward */
    GM_RULE_ACT_HELD,       /* activation: born in forward, freed later in the iteration
                             * (or, with no backward at all, kept past the forward) */
    GM_RULE_TEMP_FORWARD,   /* other: born and freed inside one forward */
    GM_RULE_GRAD,           /* gradient: born in backward, alive past its end */
    GM_RULE_TEMP_BACKWARD,  /* other: born and freed in backward (activation gradients) */
    GM_RULE_OPT_STATE,      /* optimizer_state: born in a step, alive past it */
    GM_RULE_OPT_TEMP,       /* optimizer_temp: born and freed in one step */
    GM_RULE_KEPT_FORWARD,   /* other: born in forward, kept into later iterations (loss
                             * kept for logging, leaks) */
    GM_RULE_USER,           /* other: code outside model/autograd/optimizer (user code,
                             * other libraries) */
    GM_RULE_CUSTOM,         /* any category: the first matching rule of the user's rules
                             * (gm_category_rules), tried before every rule above */
};
#define GM_RULE_COUNT 15

/* Short name ("param_frames") and one-line explanation; static storage. */
const char *gm_rule_name(enum gm_rule r);
const char *gm_rule_text(enum gm_rule r);

/* ---- per-allocation results ---- */

/* One allocation: from its alloc event (or the start) to its free_completed (or the end),
 * matched by address exactly as gm_snapshot_timeline() does.  40 bytes: a device trace of
 * millions of allocations is one array of these (event indexes fit 31 bits: the timeline
 * refuses longer traces; its stream is an index into the device's table of streams, of at
 * most GM_ANALYSIS_STREAMS_MAX); what few readers ask is found from the events (its
 * iteration: gm_analysis_iteration_at() of alloc_event). */
struct gm_analysis_alloc {
    uint64_t addr;
    uint64_t bytes;               /* trace (requested) bytes */
    int32_t alloc_event;          /* index in the device trace; -1: alive from the start */
    int32_t free_event;           /* index of its free_completed; -1: alive at the end */
    int32_t free_requested_event; /* -1 when none */
    uint32_t stack;               /* stack of the alloc (or of the block / free when from start) */
    uint16_t stream_index;        /* its stream: gm_analysis_device.streams[stream_index]
                                   * (gm_analysis_alloc_stream()) */
    uint8_t category;             /* enum gm_category */
    uint8_t rule;                 /* enum gm_rule */
    uint8_t phase;                /* enum gm_phase at the alloc (from the start: the phase its
                                   * stack's frames imply, GM_PHASE_OTHER when none) */
    uint8_t user_rule;            /* GM_RULE_CUSTOM: 1 + the index of the user's rule, else 0 */
    uint8_t free_has_stack;       /* 1: its free_requested or free_completed has a stack */
};

/* The most distinct streams the allocations of one device may have (their index is 16
 * bits); an analysis of a device with more fails with GM_ERR_LIMIT. */
#define GM_ANALYSIS_STREAMS_MAX 65535

/* A maximal run of consecutive events of one phase. Runs cover the whole trace. */
struct gm_analysis_phase_run {
    int64_t first_event;
    int64_t last_event; /* inclusive */
    uint8_t phase;      /* enum gm_phase */
    int32_t iteration;  /* -1 outside any iteration */
};

/* One point of the per-category series: the state after 'event' (-1: initial state). */
struct gm_analysis_point {
    int64_t event;
    int64_t time_us; /* valid when has_time */
    bool has_time;
    uint8_t phase;     /* enum gm_phase of 'event' */
    uint64_t total;    /* allocated bytes (sum of bytes[]) */
    uint64_t reserved; /* reserved bytes (segments) */
    uint64_t bytes[GM_CATEGORY_COUNT];
};

/* One training iteration: a forward (and its backward and step) up to the next one. */
struct gm_analysis_iteration {
    int64_t first_event;
    int64_t last_event;    /* inclusive */
    int64_t forward_event; /* first event of each phase, -1 when the phase is absent */
    int64_t backward_event;
    int64_t step_event;
    uint64_t start_bytes; /* allocated bytes before first_event */
    uint64_t peak_bytes;  /* max allocated bytes inside the iteration */
    int64_t peak_event;
    uint8_t peak_phase; /* enum gm_phase */
    uint64_t end_bytes; /* allocated bytes after last_event */
    uint64_t at_peak[GM_CATEGORY_COUNT];
    bool has_time;
    int64_t start_us, end_us;
};

enum gm_leak_kind {
    GM_LEAK_FORWARD_OUTPUT = 0, /* a forward result (loss, output) kept every iteration */
    GM_LEAK_GRAPH_NO_GRAD,      /* "graph_kept": many forward sites leak together, a whole
                                 * graph is kept (eval without no_grad, y_sum = y_sum + y) */
    GM_LEAK_USER_TENSOR,        /* user code keeps a new tensor every iteration */
    GM_LEAK_OPTIMIZER,          /* optimizer state grows every iteration */
    GM_LEAK_OTHER,
};
#define GM_LEAK_KIND_COUNT 5

/* "forward_output", "graph_kept", ... and a paragraph: what causes it and the fix;
 * static storage. */
const char *gm_leak_kind_name(enum gm_leak_kind k);
const char *gm_leak_kind_advice(enum gm_leak_kind k);

/* One allocation site (stack) that keeps memory from iteration to iteration. */
struct gm_analysis_leak_site {
    uint32_t stack;               /* snapshot stack id */
    uint64_t bytes_per_iteration; /* median bytes kept per iteration that kept any */
    uint64_t total_bytes;         /* bytes of this site still kept at the end */
    uint64_t count;               /* allocations kept */
    uint32_t n_iterations;        /* iterations that left memory behind */
};

/* Memory that grows from iteration to iteration, one per cause: the leaking sites that
 * share the frame naming the cause and the iteration pattern (the same first and last
 * iteration and as many iterations keeping memory) and the kind.  A forward result is named
 * by the frame that called the model (the 12 activation sites of one evaluate() without
 * torch.no_grad() are one leak, named by evaluate()), anything else by its first user frame
 * (gm_snapshot_frame_is_user()). */
struct gm_analysis_leak {
    uint32_t stack;               /* the largest site's stack (sites[0].stack) */
    uint32_t frame;               /* frame id naming the cause; UINT32_MAX when none */
    uint8_t kind;                 /* enum gm_leak_kind */
    uint8_t category;             /* enum gm_category of the largest site */
    uint64_t bytes_per_iteration; /* median bytes all its sites kept per iteration */
    uint64_t total_bytes;         /* bytes still kept at the end */
    uint64_t count;               /* allocations kept */
    uint32_t n_iterations;        /* iterations that left memory behind */
    int32_t first_iteration;      /* the first and last of them */
    int32_t last_iteration;
    struct gm_analysis_leak_site *sites; /* largest total_bytes first */
    size_t n_sites;
};

/* What the leak search says of a device, in words every output shares. */
enum gm_leak_verdict {
    GM_LEAK_VERDICT_NO_TRACE = 0, /* no allocation history */
    GM_LEAK_VERDICT_TOO_FEW,      /* fewer than 3 iterations: too few to judge */
    GM_LEAK_VERDICT_NONE,         /* no site keeps memory from iteration to iteration */
    GM_LEAK_VERDICT_FOUND,        /* dev->leaks */
};

/* The verdict of a device's leak search (3 iterations are the fewest a leak is judged on:
 * memory kept in two iterations before the last). */
struct gm_analysis_device;
enum gm_leak_verdict gm_analysis_leak_verdict(const struct gm_analysis_device *dev);
/* "no_trace", "too_few_iterations", "none", "found"; static storage. */
const char *gm_leak_verdict_name(enum gm_leak_verdict v);
/* One sentence for a verdict ("too few iterations to judge: ..."); static storage. */
const char *gm_leak_verdict_text(enum gm_leak_verdict v);

/* Free memory inside reserved segments, for one pool and stream. */
struct gm_analysis_pool_free {
    uint64_t stream;
    bool is_small;         /* the <= 1 MiB pool */
    uint64_t reserved;     /* bytes of segments (mapped ranges) */
    uint64_t free;         /* bytes not covered by live allocations */
    uint64_t largest_free; /* largest contiguous free range */
    uint32_t n_segments;
};

enum gm_oom_verdict {
    GM_VERDICT_NONE = 0,      /* not an oom (the peak) */
    GM_VERDICT_SHORTAGE,      /* not enough memory even if every free byte were usable */
    GM_VERDICT_FRAGMENTATION, /* enough free bytes in total, but no range large enough */
    GM_VERDICT_LIMIT,         /* CUDA reported enough free memory: a per-process limit
                               * (set_per_process_memory_fraction) or another pool */
};

/* "none", "shortage", "fragmentation", "limit"; static storage. */
const char *gm_oom_verdict_name(enum gm_oom_verdict v);
/* What to change, including the PYTORCH_CUDA_ALLOC_CONF options that apply; static. */
const char *gm_oom_verdict_advice(enum gm_oom_verdict v);

/* Fragmentation at one moment (the peak, or an oom event). */
struct gm_analysis_frag {
    int64_t event; /* -1: the initial state */
    bool is_oom;
    uint64_t requested;                  /* oom: bytes asked for */
    uint64_t device_free;                /* oom: bytes CUDA reported free */
    uint32_t stack;                      /* oom: stack of the failed request */
    uint64_t reserved;                   /* bytes reserved by the allocator */
    uint64_t allocated;                  /* bytes allocated (trace bytes rounded up to 512) */
    uint64_t reserved_unallocated;       /* reserved - allocated */
    uint64_t largest_free;               /* largest free range over every pool and stream */
    struct gm_analysis_pool_free *pools; /* one per (stream, pool) with segments */
    size_t n_pools;
    uint64_t at_event[GM_CATEGORY_COUNT]; /* allocated bytes by category at that moment */
    uint8_t phase;                        /* enum gm_phase */
    uint8_t verdict;                      /* enum gm_oom_verdict */
};

/* A phase the user marked (gpumem.torch.record()'s phase(): snapshot.h, "user phases"). */
struct gm_analysis_user_phase {
    const char *name;         /* <name> of "gpumem.phase:<name>" (borrowed from the snapshot) */
    size_t n_ranges;          /* times it ran */
    uint64_t n_events;        /* trace events inside it */
    uint64_t allocated_bytes; /* bytes of the allocations made inside it */
    uint64_t peak_bytes;      /* the most allocated after an event inside it */
    int64_t peak_event;       /* that event; -1 when no event is inside it */
    uint64_t at_peak[GM_CATEGORY_COUNT];
};

/* One run of a user phase, on the trace's events (for a report's bands). */
struct gm_analysis_user_range {
    uint32_t phase;      /* index into user_phases */
    int64_t first_event; /* inclusive; first_event > last_event (-1, -2): no event inside */
    int64_t last_event;
    int64_t start_us; /* the annotations' times */
    int64_t end_us;   /* INT64_MAX: never closed */
};

/* The whole explanation of one device. */
struct gm_analysis_device {
    int32_t device;
    size_t n_events;
    bool has_trace;  /* a trace with events (else only the snapshot state) */
    bool has_frames; /* some event or block has a stack */

    uint64_t peak_bytes; /* = gm_snapshot_timeline() peak_bytes */
    int64_t peak_event;  /* -1: the initial state */
    bool peak_has_time;
    int64_t peak_time_us;
    uint8_t peak_phase;     /* enum gm_phase */
    int32_t peak_iteration; /* -1 outside any */
    /* gm_snapshot_timeline(snap, device, 0) as the analysis computed it, so that readers of
     * the analysis need not replay the trace again (live is NULL: nothing to release) */
    struct gm_snapshot_timeline timeline;
    uint64_t at_peak[GM_CATEGORY_COUNT];
    uint64_t at_peak_unexplained;       /* part of at_peak[OTHER] with GM_RULE_NONE */
    uint64_t at_peak_lifetime_only;     /* bytes whose category came from lifetime alone */
    uint64_t at_end[GM_CATEGORY_COUNT]; /* after the last event */

    /* by alloc event; those from the start first (none kept by gm_analysis_diff_prepare()) */
    struct gm_analysis_alloc *allocs;
    size_t n_allocs;
    /* the distinct streams (raw cudaStream_t) of the allocations, which name theirs by
     * index (gm_analysis_alloc.stream_index), in the order the analysis met them */
    const uint64_t *streams;
    size_t n_streams;

    struct gm_analysis_phase_run *phases; /* cover events 0..n_events-1 */
    size_t n_phases;
    uint64_t phase_events[GM_PHASE_COUNT]; /* events per phase */

    /* Per-category bytes over time, at most opts.max_points points: a level-of-detail
     * series (gpumem/lod.h) of (max_points - 1) / 3 buckets of the device's axis (time
     * when every event has one, else the event index), and of each bucket the states
     * where the total is least and most and its last state, in trace order; drawn as
     * steps through them, every bucket's exact minimum and maximum and its value at its
     * end hold, so peaks are never lost and idle gaps never hold a stale value.  The first
     * point is the initial state (event -1), the last the end. */
    struct gm_analysis_point *points;
    size_t n_points;

    struct gm_analysis_iteration *iterations;
    size_t n_iterations;

    struct gm_analysis_leak *leaks; /* one per cause, largest total_bytes first */
    size_t n_leaks;

    struct gm_analysis_frag peak_frag;
    struct gm_analysis_frag *ooms; /* one per oom event, in trace order */
    size_t n_ooms;

    /* The user's phases (gpumem.phase:<name> marks), in the order they first ran; their
     * runs sorted by start; the innermost one around the peak (-1: none). */
    struct gm_analysis_user_phase *user_phases;
    size_t n_user_phases;
    struct gm_analysis_user_range *user_ranges;
    size_t n_user_ranges;
    int32_t peak_user_phase;

    const struct ana_device_priv *priv_; /* internal */
};

/* The stream (raw cudaStream_t) of allocation 'a' of 'dev' (not of a diff's analysis, which
 * keeps no allocations). */
static inline uint64_t gm_analysis_alloc_stream(const struct gm_analysis_device *dev,
                                                const struct gm_analysis_alloc *a)
{
    return a->stream_index < dev->n_streams ? dev->streams[a->stream_index] : 0;
}

struct gm_analysis {
    const struct gm_snapshot *snap;     /* borrowed */
    struct gm_analysis_device *devices; /* one per snap->devices entry, same order */
    size_t n_devices;
    /* allocator settings that matter for the advice (from the snapshot) */
    bool expandable_segments;
    int64_t max_split_size; /* bytes, -1: unlimited / unknown */
    double gc_threshold;    /* 0: off / unknown */
    /* the user's category rules it applied (gm_analysis_opts.rules), copied: rule i's name
     * (its "name", else "rule <i+1>") and category */
    const char **user_rule_names;
    const uint8_t *user_rule_categories; /* enum gm_category */
    size_t n_user_rules;
    /* made by gm_analysis_diff_prepare(): it holds only what a diff reads, and the calls that
     * need the rest refuse it (gm_analysis_require_whole()) */
    bool diff_only;
    /* made by gm_analysis_run_figures(): every device's series is empty (n_points 0); the
     * JSON documents that show one and gm_analysis_require_series() refuse it */
    bool no_series;
    void *priv_; /* arena; internal */
};

/* ---- the user's category rules ----
 *
 * An ordered list of rules, each a category and regular expressions (POSIX extended,
 * searched anywhere in the text, back-references refused) on the frames of an allocation's
 * stack (a frame's file name, its function name: both must match one frame when both are
 * given) and on the record_function annotations open when it was allocated.  A rule
 * matches when each of its expressions does; the first rule that matches gives the
 * allocation its category (rule GM_RULE_CUSTOM, and the rule's index in user_rule) and the
 * built-in rules decide the rest.  A rule may have a "name" (at most 64 bytes) that names
 * what it finds ("attention"): the bytes each rule decided are reported by that name.
 * Read from JSON (docs/analysis.md shows the format):
 *   {"rules": [{"name": "attention", "category": "activation",
 *               "file": "models/attention\\.py$", "function": "^forward$"},
 *              {"category": "input", "annotation": "^data_loading"}]}
 * (a top-level array of rules is read too), or from the same rules in YAML (a subset: block
 * lists and mappings of one-line scalars; docs/analysis.md), the form chosen by the text:
 * JSON when it starts with '[' or '{' after blank space. */
#define GM_CATEGORY_RULES_MAX        64         /* rules in one file */
#define GM_CATEGORY_RULES_MAX_BYTES  (64 << 10) /* bytes of a rules file */
#define GM_CATEGORY_RULE_PATTERN_MAX 512        /* bytes of one expression */

struct gm_category_rules;

/* Parse 'len' bytes of JSON or YAML text into *out (gm_category_rules_free()).  Errors:
 * GM_ERR_FORMAT (not JSON, YAML outside the subset read (saying which line), an unknown key
 * or category, a rule without an expression, an expression regcomp() refuses, saying which
 * rule), GM_ERR_LIMIT (over the limits above),
 * GM_ERR_NOMEM. */
enum gm_status gm_category_rules_parse(const char *text, size_t len, struct gm_category_rules **out,
                                       struct gm_error *err);

/* gm_category_rules_parse() of the file 'path' (a regular file of at most
 * GM_CATEGORY_RULES_MAX_BYTES).  Errors: those of the parse, GM_ERR_NOENT, GM_ERR_IO. */
enum gm_status gm_category_rules_load(const char *path, struct gm_category_rules **out,
                                      struct gm_error *err);

/* NULL is a no-op. */
void gm_category_rules_free(struct gm_category_rules *r);

/* How many rules; 0 for NULL. */
size_t gm_category_rules_count(const struct gm_category_rules *r);

/* The bytes alive after 'event' of 'dev' (-1: the initial state) that each of the user's
 * rules decided, into out[an->n_user_rules]. */
void gm_analysis_user_rules_at(const struct gm_analysis_device *dev, int64_t event, uint64_t *out,
                               size_t n);

struct gm_analysis_opts {
    uint32_t max_points; /* points per device in the series; 0: 2000 */
    /* the user's category rules, tried before the built-in ones; NULL: none (borrowed for
     * the call) */
    const struct gm_category_rules *rules;
    /* also keep each device's allocated and reserved bytes over its axis, as
     * gm_lod_axis_timeline() makes them in gm_lod_finest_buckets() buckets, from the
     * series' own pass (gm_analysis_totals()): what the HTML report draws, which then
     * walks no trace for it, and the bytes by category at each bucket's maximum
     * (gm_analysis_totals_cats()); 4 bytes an event and up to 11 MiB a device more, outside the
     * snapshot's memory limit, held for every device until gm_analysis_free() (the report
     * held one device's at a time).  Only gm_analysis_run() keeps them:
     * gm_analysis_run_figures() and gm_analysis_diff_prepare() ignore it */
    bool totals;
};

/* Analyse every device of 'snap'.  'opts' may be NULL.  On success *out owns its memory:
 * release it with gm_analysis_free(); it borrows 'snap'.  Errors: GM_ERR_NOMEM,
 * GM_ERR_LIMIT. */
enum gm_status gm_analysis_run(const struct gm_snapshot *snap, const struct gm_analysis_opts *opts,
                               struct gm_analysis **out, struct gm_error *err);

/* NULL is a no-op. */
void gm_analysis_free(struct gm_analysis *an);

/* The totals gm_analysis_opts.totals asked for (gpumem/lod.h; borrowed, valid until
 * gm_analysis_free()), or NULL: not asked for, a device without events, or out of memory. */
const struct gm_lod_totals *gm_analysis_totals(const struct gm_analysis_device *dev);

/* Whether drawing 'an' as the HTML report does (gm_report_html(): each device's totals and
 * axis, its segments' history) reads the stored trace of a device whose events the load
 * consumed without keeping them (gm_snapshot.events_consumed): true when such a device's
 * analysis lacks them (not asked for, out of memory), and its caller loads the file again with
 * its events.  False when the snapshot kept them. */
bool gm_analysis_reads_trace(const struct gm_analysis *an);

/* With those totals: the bytes by category of the device's allocations
 * (gm_analysis_alloc.category) alive after the event of the most allocated (kmax; -1: the
 * initial state) of the buckets of their allocated series (gm_lod_totals.alloc), one row of
 * GM_CATEGORY_COUNT values for each run of buckets in a row with one kmax (a bucket that
 * holds the value carried in has the kmax of the bucket before), in bucket order: row r
 * from [r * GM_CATEGORY_COUNT], *n_rows of them (borrowed, valid until gm_analysis_free());
 * NULL (*n_rows 0) when the totals are not kept, or out of memory.  Kept by the analysis
 * after its series' pass, so that the report reads them rather than sum the allocations
 * again. */
const uint64_t *gm_analysis_totals_cats(const struct gm_analysis_device *dev, size_t *n_rows);

/* The device with CUDA index 'index', or NULL. Borrowed. */
const struct gm_analysis_device *gm_analysis_device_by_index(const struct gm_analysis *an,
                                                             int32_t index);

/* The device a reader means when it names none: the one with the largest allocated peak
 * (gm_snapshot_timeline() peak_bytes), the first of equal peaks, passing over the devices
 * with neither events nor segments unless every device is like that (then the first).  The
 * peaks are read from 'an' when given (an analysis of 'snap': its devices' peak_bytes, the
 * same figure), else from each device's timeline (folded while the file was read: no walk
 * of the trace).  The one rule for the Python package's default device, calibration's
 * device and a rank's device (gm_analysis_rank_device()).  On success *out is the device's
 * CUDA index.  Errors: GM_ERR_INVALID (the snapshot names no device), and those of
 * gm_snapshot_timeline() when 'an' is NULL. */
enum gm_status gm_default_device(const struct gm_snapshot *snap, const struct gm_analysis *an,
                                 int32_t *out, struct gm_error *err);

/* Phase of event 'event' of 'dev' (GM_PHASE_OTHER outside the trace). */
enum gm_phase gm_analysis_phase_at(const struct gm_analysis_device *dev, int64_t event);

/* Index in dev->iterations of the iteration holding event 'event', -1 outside any (before
 * the first, or outside the trace: 'event' < 0 or >= dev->n_events), as
 * gm_analysis_phase_at() bounds it. */
int32_t gm_analysis_iteration_at(const struct gm_analysis_device *dev, int64_t event);

/* What is alive at chosen moments, from the allocations' alloc and free events (the trace
 * is not read): for each moment ks[i] (event indexes, -1 the initial state; ascending
 * costs least), fn(ctx, i, live, n_live) is called
 * with the indexes into dev->allocs of the allocations alive after that event, ascending
 * (borrowed for the call).  A non-OK status from fn stops the pass and is returned.
 * Errors: GM_ERR_NOMEM, GM_ERR_LIMIT (the snapshot's memory limit), or fn's. */
typedef enum gm_status (*gm_analysis_live_fn)(void *ctx, size_t i, const uint32_t *live,
                                              size_t n_live, struct gm_error *err);
enum gm_status gm_analysis_live_at(const struct gm_analysis *an,
                                   const struct gm_analysis_device *dev, const int64_t *ks,
                                   size_t n, gm_analysis_live_fn fn, void *ctx,
                                   struct gm_error *err);

/* What is alive after event 'event' of 'dev' (-1: the state before the first event),
 * grouped by stack as gm_snapshot_group_live() groups what is alive at the peak: one group
 * per stack, largest first.  *out (released with gm_free()) is the caller's.  Errors:
 * GM_ERR_INVALID (no such event), GM_ERR_NOMEM, GM_ERR_LIMIT. */
enum gm_status gm_analysis_group_live_at(const struct gm_analysis *an,
                                         const struct gm_analysis_device *dev, int64_t event,
                                         struct gm_snapshot_live_group **out, size_t *n_out,
                                         struct gm_error *err);

/* ---- memory inside spans of the trace: annotations, compile regions, windows ----
 *
 * A region is a span of a device's trace with a name: a record_function range of the file's
 * external_annotations (any name, not only gpumem.phase marks; START to END by time, as
 * gm_snapshot_annotation_ranges() pairs them), a run of consecutive events that share one
 * torch.compile context (compile_context other than "N/A"), or a window the caller names by
 * time or event.  For each: the allocated bytes when it starts (after the last event
 * before it), when it ends (after its last event) and the most inside it (after one of its
 * events, or at its start), counted as the analysis counts them (its peak is the
 * timeline's). */
enum gm_region_kind {
    GM_REGION_ANNOTATION = 0, /* record_function ranges */
    GM_REGION_COMPILE,        /* torch.compile contexts */
    GM_REGION_WINDOW,         /* a window given by the caller */
};

struct gm_analysis_region {
    const char *name;    /* annotation or compile context (borrowed from the snapshot); NULL
                          * for a window */
    bool has_time;       /* start_us/end_us are valid */
    int64_t start_us;    /* annotation: its START; otherwise its first event's time */
    int64_t end_us;      /* annotation: its END (INT64_MAX: never closed); else last event's */
    int64_t first_event; /* inclusive; first_event > last_event: no event inside */
    int64_t last_event;
    uint64_t start_bytes; /* allocated when it starts */
    uint64_t end_bytes;   /* allocated when it ends */
    uint64_t peak_bytes;  /* the most allocated inside it */
    int64_t peak_event;   /* after that event; first_event - 1 (-1: the initial state) when
                           * the most was at its start */
};

struct gm_analysis_regions {
    struct gm_analysis_region *v; /* in order of start (an outer range before the inner) */
    size_t n;
};

/* The regions of 'kind' (ANNOTATION or COMPILE) of device 'dev' of 'an' into *out (release
 * with gm_analysis_regions_release()).  A trace without times has no annotation region.
 * Errors: GM_ERR_INVALID (kind WINDOW), GM_ERR_NOMEM. */
enum gm_status gm_analysis_regions(const struct gm_analysis *an,
                                   const struct gm_analysis_device *dev, enum gm_region_kind kind,
                                   struct gm_analysis_regions *out, struct gm_error *err);

/* The same with the device's axis at hand ('ax', gpumem/lod.h; NULL: as above): when it
 * keeps every event's x (gm_lod_axis_timeline()), the events' times come from it and the
 * trace is not read. */
struct gm_lod_axis;
enum gm_status gm_analysis_regions_on_axis(const struct gm_analysis *an,
                                           const struct gm_analysis_device *dev,
                                           enum gm_region_kind kind, const struct gm_lod_axis *ax,
                                           struct gm_analysis_regions *out, struct gm_error *err);
void gm_analysis_regions_release(struct gm_analysis_regions *r);

/* A window of a device's trace: from and to are event indexes, or (by_time) microseconds
 * since the trace's first event; both inclusive. */
struct gm_analysis_window {
    bool by_time;
    int64_t from, to;
};

/* The region of window 'w' of 'dev' into *out.  Errors: GM_ERR_INVALID (from after to, an
 * event outside the trace, times on a trace without them), GM_ERR_NOMEM. */
enum gm_status gm_analysis_window_region(const struct gm_analysis *an,
                                         const struct gm_analysis_device *dev,
                                         const struct gm_analysis_window *w,
                                         struct gm_analysis_region *out, struct gm_error *err);

/* The allocation of address 'addr' that was the n-th (from 1) to be made there on 'dev'
 * (those alive from before the trace first), as an index into dev->allocs.  Errors:
 * GM_ERR_INVALID (no such allocation: the message says how many the address had). */
enum gm_status gm_analysis_alloc_at_address(const struct gm_analysis_device *dev, uint64_t addr,
                                            uint32_t n, size_t *index, struct gm_error *err);

/* The gpumem.snapshot.regions/1 document of the regions of one file: {"schema",
 * "gpumem_version", "file", "kind", "devices": [{"device", "peak_bytes", "regions": [{"name",
 * "start_us", "end_us", "first_event", "last_event", "start_bytes", "end_bytes",
 * "peak_bytes", "peak_event"}...]}]}, one entry per device of 'devs' ('n' of them). */
enum gm_status gm_analysis_regions_json(FILE *f, const char *path, enum gm_region_kind kind,
                                        const struct gm_analysis_device *const *devs,
                                        const struct gm_analysis_regions *regions, size_t n,
                                        struct gm_error *err);

/* The gpumem.snapshot.window/1 document of one moment of device 'dev': {"schema",
 * "gpumem_version", "file", "device", "window": region or null, "allocation": {"address",
 * "nth", "bytes", "alloc_event", "free_event", "stack", "frames"} or null, "event" (the moment:
 * the window's peak or the allocation's event), "allocated_bytes" then, "live": [{"bytes",
 * "count", "stack", "frames"}...] (the groups 'live', at most 'top'; 0: all)}. */
enum gm_status gm_analysis_window_json(FILE *f, const char *path, const struct gm_analysis *an,
                                       const struct gm_analysis_device *dev,
                                       const struct gm_analysis_region *window,
                                       const struct gm_analysis_alloc *alloc, uint32_t nth,
                                       int64_t event, uint64_t allocated,
                                       const struct gm_snapshot_live_group *live, size_t n_live,
                                       size_t top, struct gm_error *err);

/* ---- memory by source file, and by the functions of one file ----
 *
 * Each allocation is attributed to one frame of its stack: by file, the file of its user
 * frame (gm_snapshot_stack_user_frame()); with a file named by the end of its path, the
 * innermost frame in that file (allocations whose stack never passes through it are
 * counted apart).  A row sums what is attributed to one file, or to one function of the
 * named file: the bytes alive at the device's peak and over the whole trace.  Frames record
 * a function's name, not its class: methods of two classes with one name share a row. */
struct gm_analysis_file_row {
    const char *filename; /* borrowed from the snapshot */
    const char *function; /* NULL for a row of a whole file */
    int64_t first_line;   /* the least line of its frames (by line: its line) */
    uint64_t bytes_at_peak;
    uint64_t count_at_peak;
    uint64_t bytes_allocated; /* by the allocations made during the trace */
    uint64_t count_allocated;
};

struct gm_analysis_files {
    struct gm_analysis_file_row *rows; /* largest at the peak first, then allocated */
    size_t n;
    uint64_t other_at_peak; /* bytes alive at the peak attributed to no row */
    uint64_t other_allocated;
    bool by_line; /* a row per line of the file, not per function */
};

/* The rows of device 'dev' of 'an': by file when 'suffix' is NULL, else by function of the
 * file(s) whose path ends with 'suffix' (whole components, '/' and '\\' alike), or with
 * 'by_line' by line of them (two classes' methods of one name sit on different lines).
 * Release with gm_analysis_files_release().  Errors: GM_ERR_NOMEM. */
enum gm_status gm_analysis_files(const struct gm_analysis *an, const struct gm_analysis_device *dev,
                                 const char *suffix, bool by_line, struct gm_analysis_files *out,
                                 struct gm_error *err);
void gm_analysis_files_release(struct gm_analysis_files *f);

/* One row of two snapshots' rows matched by file and function (either may be absent). */
struct gm_analysis_file_change {
    const char *filename, *function;
    const struct gm_analysis_file_row *a, *b; /* NULL when absent from that side */
    int64_t delta_at_peak;                    /* b - a, bytes */
};

/* The rows of 'a' and 'b' matched by file and function, the largest change at the peak
 * first, into *out and *n (gm_free(), the caller's; they borrow a and b).  Errors:
 * GM_ERR_NOMEM. */
enum gm_status gm_analysis_files_compare(const struct gm_analysis_files *a,
                                         const struct gm_analysis_files *b,
                                         struct gm_analysis_file_change **out, size_t *n,
                                         struct gm_error *err);

/* The gpumem.snapshot.files/1 document: {"schema", "gpumem_version", "files": [paths],
 * "device", "source_file": suffix or null, "rows": [{"filename", "function", "first_line",
 * "bytes_at_peak", "count_at_peak", "bytes_allocated", "count_allocated"}...],
 * "other_at_peak_bytes", "other_allocated_bytes"} of one file ('b' NULL); of two, "rows" are
 * the changes [{"filename", "function", "a": row or null, "b": row or null,
 * "delta_at_peak_bytes"}...] and "other_at_peak_bytes" a pair. */
enum gm_status gm_analysis_files_json(FILE *f, const char *const *paths, int32_t device,
                                      const char *suffix, const struct gm_analysis_files *a,
                                      const struct gm_analysis_files *b,
                                      const struct gm_analysis_file_change *changes,
                                      size_t n_changes, struct gm_error *err);

/* ---- the peak of each device and what is alive there ----
 *
 * What `gpumem snapshot peak` shows: the peak of memory_viz's Active Memory Timeline per
 * device (gm_snapshot_timeline()) and the allocations alive at it, grouped by stack
 * (gm_snapshot_group_live()), largest first.  From a snapshot alone the timeline is replayed
 * with its live list; with the snapshot's analysis, the timeline the analysis kept and
 * what it says is alive at the peak are read instead (the same figures, no second replay). */

/* Stack frames a rendering shows of the callers of a group's user frame: 'apart' tells the
 * groups apart as read with that many. */
#define GM_PEAK_CALLERS 2

struct gm_peak_device {
    int32_t device;
    struct gm_snapshot_timeline timeline;  /* its live list is not kept (live NULL) */
    uint64_t n_live;                       /* allocations alive at the peak */
    struct gm_snapshot_live_group *groups; /* by stack, largest first */
    size_t n_groups;
    /* per group, its bytes per category (enum gm_category); NULL without an analysis */
    uint64_t (*categories)[GM_CATEGORY_COUNT];
    /* per listed group (the first n_apart): the frame that tells it apart from the other
     * listed groups that read alike (gm_snapshot_stacks_apart(), GM_PEAK_CALLERS), -1 none */
    long *apart;
    size_t n_apart;
    const char *user_phase; /* the user phase (gpumem.phase mark) around the peak, or NULL
                             * (borrowed from the snapshot) */
    bool has_oom;           /* the trace has an oom event: the first one */
    struct gm_snapshot_oom first_oom;
    /* What the trace entries of a group's allocations say beyond their stack, when the file
     * has it (NULL arrays otherwise): per group the user_metadata they all share (NULL when
     * none or when they differ; borrowed from the snapshot) and the stack naming their
     * user code they all share when it is not the group's stack (the forward pass of a
     * backward allocation, the model source of a compiled graph's:
     * gm_snapshot_event_user_stack(); 0 when none or when they differ). */
    const char **group_metadata;
    uint32_t *group_user_stack;
};

struct gm_analysis_peaks {
    struct gm_peak_device *devices; /* the snapshot's devices in file order (only 'device'
                                     * when one was asked for) */
    size_t n_devices;
};

struct gm_analysis_peaks_opts {
    int32_t device; /* only this CUDA device; -1: every device */
    size_t listed;  /* the groups a rendering lists, told apart ('apart'): the first 'listed';
                     * 0: none, SIZE_MAX: all */
};

/* The peaks of 'snap' into *out; 'an' (may be NULL) is the snapshot's analysis, read instead
 * of replaying the trace.  'opts' may be NULL (every device, every group listed).  On success
 * *out is the caller's (gm_analysis_peaks_release()); it borrows the snapshot.  Errors:
 * GM_ERR_INVALID (no such device), GM_ERR_NOMEM, GM_ERR_LIMIT. */
enum gm_status gm_analysis_peaks(const struct gm_snapshot *snap, const struct gm_analysis *an,
                                 const struct gm_analysis_peaks_opts *opts,
                                 struct gm_analysis_peaks *out, struct gm_error *err);
void gm_analysis_peaks_release(struct gm_analysis_peaks *p);

/* ---- figures of a device at its peak ---- */

/* The bytes alive after event 'event' per rule (indexed by enum gm_rule). */
void gm_analysis_rules_at(const struct gm_analysis_device *dev, int64_t event,
                          uint64_t rules[GM_RULE_COUNT]);

/* The category with the most bytes at the peak; GM_CATEGORY_COUNT when the peak is 0. */
int gm_analysis_dominant(const struct gm_analysis_device *dev);

/* One allocation site at the peak: the allocations of one category, rule and stack alive
 * at the peak. */
struct gm_analysis_site {
    uint32_t stack;
    uint8_t category; /* enum gm_category */
    uint8_t rule;     /* enum gm_rule */
    uint64_t bytes;
    uint64_t count;
};

/* The sites alive at the peak of 'dev', by category, largest first within each, into *out
 * (the caller's: gm_free()), *n_out of them.  Errors: GM_ERR_NOMEM. */
enum gm_status gm_analysis_sites_at_peak(const struct gm_analysis_device *dev,
                                         struct gm_analysis_site **out, size_t *n_out,
                                         struct gm_error *err);

/* ---- the JSON documents of the snapshot commands ----
 *
 * What `gpumem snapshot <command> --json` prints and Python's gpumem.Snapshot parses:
 * {"schema": "gpumem.snapshot.<command>/1", "gpumem_version", ...} (docs/snapshot.md lists
 * the members).  stats, peak and categories take several files, the ranks of one job:
 * {"files": [{"file", ...}], "ranks", "spread", "imbalance"}. */

enum gm_analysis_doc_kind {
    GM_DOC_INFO = 0,   /* what the file is and holds: files[0].snap */
    GM_DOC_STATS,      /* the segments at snapshot time: files[i].stats */
    GM_DOC_PEAK,       /* the peaks and what is alive there: files[i].peaks and .snap */
    GM_DOC_CATEGORIES, /* the categories at the peak: files[i].an */
    GM_DOC_LEAKS,      /* iterations and leaks: files[0].an */
    GM_DOC_OOM,        /* fragmentation at the peak and at each oom: files[0].an */
    GM_DOC_DIFF,       /* two snapshots compared: files[0..1].an and diff */
    GM_DOC_DIGEST,     /* one rank summed up for the job's other commands: files[0].an
                        * (gm_digest_load() reads it back) */
};
#define GM_DOC_COUNT 8

/* "info", "stats", "peak", "categories", "leaks", "oom", "diff", "digest": the command;
 * static. */
const char *gm_analysis_doc_name(enum gm_analysis_doc_kind kind);

/* How many entries a document lists per device when the caller does not say (its 'top'):
 * 10 leaks, 20 diff sites, every live group of a peak (0). */
uint64_t gm_analysis_doc_top(enum gm_analysis_doc_kind kind);

/* One file of a document: its results (what its kind reads, the rest NULL). */
struct gm_analysis_doc_file {
    const char *path;                      /* as the caller named it ("file") */
    const struct gm_snapshot *snap;        /* info, peak */
    const struct gm_snapshot_stats *stats; /* stats */
    const struct gm_analysis_peaks *peaks; /* peak */
    const struct gm_analysis *an;          /* categories, leaks, oom, diff, digest */
};

/* A document to write.  Initialise with designated initialisers: members may be added. */
struct gm_analysis_doc {
    enum gm_analysis_doc_kind kind;
    const struct gm_analysis_doc_file *files;
    size_t n_files;              /* several (stats, peak, categories): ranks of one job */
    const struct gm_rank *ranks; /* several files: the rank of each file that has one */
    size_t n_ranks;
    const struct gm_analysis_diff *diff; /* diff: gm_analysis_diff(files[0].an, files[1].an) */
    int32_t device;                      /* categories: only this CUDA device; -1: every device */
    uint64_t top;                        /* peak groups, leaks, diff sites per device; 0: all */
    bool series;                         /* categories: the series and the phase runs; oom: the
                                          * reserved and allocated series */
    const char *host;                    /* digest: the machine the rank ran on (NULL: unknown) */
    const struct gm_digest *const *digests; /* stats, peak, categories: NULL, or per file a
                                             * rank read from its digest (its results then
                                             * NULL) or NULL */
    /* categories: torch's component bytes of device 'components_device', compared with
     * that device's categories at the end ("components"); NULL: none. */
    const struct gm_components *components;
    int32_t components_device;
};

/* ---- component tracking: torch's own attribution, the categories' ground truth ----
 *
 * With torch.accelerator.memory.component_tracking enabled, memory_stats() counts the
 * allocated bytes of each component the allocator stamped (parameter, gradient, activation,
 * optimizer_state, ...) as 'component_bytes.<component>.current'.  A JSON dump of that dict
 * (json.dump(torch.accelerator.memory.memory_stats(device), f)) taken when the snapshot was
 * taken holds what the categories at the end of the trace should be. */
struct gm_components {
    bool has[GM_CATEGORY_COUNT];       /* a counter of the file maps to the category */
    uint64_t bytes[GM_CATEGORY_COUNT]; /* its current bytes (summed when several map) */
    uint64_t unmapped_bytes;           /* components that are none of the categories */
    size_t n_components;               /* counters read */
};

/* Read the counters of memory_stats() JSON text[0..len) ('path' names it in messages).
 * Errors: GM_ERR_FORMAT (not JSON, not an object, a counter that is not a byte count, no
 * counter at all), GM_ERR_LIMIT, GM_ERR_NOMEM. */
enum gm_status gm_components_parse(const char *text, size_t len, const char *path,
                                   struct gm_components *out, struct gm_error *err);
/* The same from the file at 'path' (at most 16 MiB).  Also GM_ERR_NOENT, GM_ERR_IO. */
enum gm_status gm_components_load(const char *path, struct gm_components *out,
                                  struct gm_error *err);

/* Write the document 'doc' to 'f'.  Errors: GM_ERR_INVALID (a result the kind needs is
 * missing), GM_ERR_NOMEM (the ranks), GM_ERR_IO (the write failed). */
enum gm_status gm_analysis_json(FILE *f, const struct gm_analysis_doc *doc, struct gm_error *err);

/* Write the frames worth showing of stack 'stack' of 'snap' (gm_snapshot_stack_frames(),
 * at most 256) as the documents write a stack's "frames": [{"filename", "line", "name"},
 * ...].  Errors: GM_ERR_INVALID (no such stack), GM_ERR_IO. */
enum gm_status gm_analysis_stack_json(FILE *f, const struct gm_snapshot *snap, uint32_t stack,
                                      struct gm_error *err);

/* ---- the trace, event by event (`gpumem snapshot trace`) ---- */

enum gm_trace_format {
    GM_TRACE_TEXT = 0, /* a line per event: index, time, action, address, size, total, frame */
    GM_TRACE_NDJSON,   /* an object per event (gpumem.snapshot.trace/2), each stack's frames
                        * once on a line before the first event that has it */
};

struct gm_analysis_trace_opts {
    int32_t device; /* only this CUDA device; -1: every device */
    uint64_t from;  /* the first event index written */
    uint64_t to;    /* the last, inclusive; UINT64_MAX: the last of the trace */
    enum gm_trace_format format;
};

/* Write every trace event of 'snap' (within 'opts') to 'f' with the allocated total after
 * it (Active Memory Timeline semantics: requested bytes) and, in NDJSON, the reserved one.
 * Errors: GM_ERR_INVALID (no such device), GM_ERR_NOMEM, GM_ERR_LIMIT, GM_ERR_IO. */
enum gm_status gm_analysis_trace(FILE *f, const struct gm_snapshot *snap,
                                 const struct gm_analysis_trace_opts *opts, struct gm_error *err);

/* ---- the allocator's segments and blocks at any moment ----
 *
 * The one rebuild of the caching allocator's layout from a trace (src/analysis/layout.c
 * states the rules): the segments at the end of the trace (the snapshot's), every
 * segment_alloc / segment_free / segment_map / segment_unmap undone back to the start and
 * redone up to the moment, and the allocations alive then placed in them.  Fragmentation,
 * the report's allocator state and its segment timeline read it. */

/* A segment's identity over the trace: a cudaMalloc'ed segment, or the expandable pages of
 * one stream and pool (a "space", whose runs of mapped pages are its segments, as the
 * snapshot reports them). */
struct gm_layout_segment_info {
    uint64_t base;   /* first byte (a space: its lowest page ever mapped) */
    uint64_t stream; /* raw cudaStream_t value */
    bool is_small;   /* the small (<= 1 MiB requests) pool */
    bool is_expandable;
    /* its pool (segment_pool_id, or the pool_id of its segment events): (0, 0) the default,
     * anything else a private pool (a CUDA graph's, a torch.cuda.MemPool) */
    int64_t pool_id[2];
};

/* A change of one segment's mapped pages: op +1 maps [addr, addr+size) (segment_alloc,
 * segment_map), -1 unmaps it (segment_free, segment_unmap); a segment with no mapped page
 * does not exist at that moment. */
struct gm_layout_change {
    int64_t event;    /* the event's index (-1: the state at the start) */
    uint32_t segment; /* index in gm_layout_history.segments */
    int8_t op;
    uint64_t addr;
    uint64_t size; /* bytes */
};

/* Mapped pages of a segment. */
struct gm_layout_range {
    uint64_t addr;
    uint64_t size; /* bytes */
};

/* Every segment of a device's trace and the changes of their pages, in trace order. */
struct gm_layout_history {
    struct gm_layout_segment_info *segments; /* the snapshot's segments first, in file order */
    size_t n_segments;
    struct gm_layout_change *initial; /* the pages mapped before the first event (op +1) */
    size_t n_initial;
    struct gm_layout_change *changes; /* one per segment event of the trace, in order */
    size_t n_changes;
    struct gm_layout_range *final_blocks; /* the file's active blocks (addr, size), by address */
    size_t n_final_blocks;
};

/* Build the history of device 'dev' of 'snap' (one pass over its trace; the analysis
 * gathers the same segment events on its own first pass and builds the history it keeps
 * from them).  On success 'h' is owned by the caller: gm_layout_history_release().
 * Errors: GM_ERR_NOMEM. */
enum gm_status gm_layout_history_build(const struct gm_snapshot *snap,
                                       const struct gm_snapshot_device *dev,
                                       struct gm_layout_history *h, struct gm_error *err);
void gm_layout_history_release(struct gm_layout_history *h);

/* The history of device 'dev' that its analysis built and keeps (borrowed until
 * gm_analysis_free()); NULL for a device the analysis did not finish. */
const struct gm_layout_history *gm_analysis_layout_history(const struct gm_analysis_device *dev);

/* The bytes the block of allocation 'a' occupies: its real block in the file when it lives
 * to the end of the trace (with any tail the allocator did not split), else its requested
 * bytes rounded up to 512 as the allocator rounds. */
uint64_t gm_layout_block_size(const struct gm_layout_history *h, const struct gm_analysis_alloc *a);

/* One allocation's block. */
struct gm_layout_block {
    uint64_t addr;
    uint64_t size;  /* bytes it occupies: its real block (the snapshot's) when it lives to
                     * the end, else requested rounded up to 512; clipped at its pages' end */
    uint64_t bytes; /* requested (trace) bytes, at most size */
    uint32_t alloc; /* index into the device's allocs */
    uint32_t stack;
    uint8_t category;  /* enum gm_category */
    bool pending_free; /* freed (free_requested) but in use on another stream until
                        * free_completed (record_stream) */
};

/* One segment at the moment: a cudaMalloc'ed segment, or one run of mapped pages of an
 * expandable space. */
struct gm_layout_segment {
    uint32_t id;        /* index in gm_layout_history.segments (of its space, if expandable) */
    uint64_t addr;      /* first byte */
    uint64_t size;      /* bytes from addr to the end of its last mapped page */
    uint64_t mapped;    /* bytes mapped: what it reserves (= size but for an inconsistent file) */
    uint64_t allocated; /* bytes of its blocks */
    uint64_t requested; /* requested bytes of its blocks */
    uint64_t stream;
    bool is_small;
    bool is_expandable;
    size_t first_range, n_ranges; /* its pages: ranges[first_range ..), ascending */
    size_t first_block, n_blocks; /* its blocks: blocks[first_block ..), by address */
};

struct gm_layout {
    int64_t event;                            /* the state after this event (-1: the start) */
    const struct gm_layout_segment *segments; /* by address */
    size_t n_segments;
    const struct gm_layout_range *ranges;
    size_t n_ranges;
    const struct gm_layout_block *blocks; /* by address */
    size_t n_blocks;
    uint64_t reserved;  /* bytes mapped */
    uint64_t allocated; /* bytes of the blocks */
    uint64_t requested; /* requested bytes of the blocks */
    size_t n_outside;   /* live allocations in no mapped page (an inconsistent file) */
    uint64_t outside_bytes;
    const uint32_t *live; /* every allocation alive (indexes into the allocs, ascending) */
    size_t n_live;
};

/* The layout at each moment ks[i] (event indexes, ascending; -1 the start) of device 'dev',
 * in one pass: fn(ctx, i, layout) with the layout borrowed for the call.  'hist' is the
 * device's history (NULL: the analysis's, gm_analysis_layout_history()).  A non-OK status
 * from fn stops the pass and is returned.  Errors: GM_ERR_NOMEM, GM_ERR_LIMIT,
 * GM_ERR_INVALID, or fn's. */
typedef enum gm_status (*gm_layout_fn)(void *ctx, size_t i, const struct gm_layout *l,
                                       struct gm_error *err);
enum gm_status gm_layout_at(const struct gm_analysis *an, const struct gm_analysis_device *dev,
                            const struct gm_layout_history *hist, const int64_t *ks, size_t n,
                            gm_layout_fn fn, void *ctx, struct gm_error *err);

/* gm_layout_at() without the blocks, for a caller that reads none: each moment's segments,
 * their pages and the allocations alive (l->blocks NULL; n_blocks, allocated, requested,
 * n_outside and outside_bytes 0, each segment's too). */
enum gm_status gm_layout_pages_at(const struct gm_analysis *an,
                                  const struct gm_analysis_device *dev,
                                  const struct gm_layout_history *hist, const int64_t *ks, size_t n,
                                  gm_layout_fn fn, void *ctx, struct gm_error *err);

/* ---- comparing two snapshots (two runs, or two ranks) ---- */

/* How a site changed from A to B. */
enum gm_diff_status {
    GM_DIFF_SAME = 0, /* the same bytes at the peak and over the trace */
    GM_DIFF_CHANGED,
    GM_DIFF_NEW,      /* allocates only in B */
    GM_DIFF_VANISHED, /* allocates only in A */
};

/* "same", "changed", "new", "vanished"; static storage. */
const char *gm_diff_status_name(enum gm_diff_status s);

/* One allocation site in A and B: its Python frames as filename + function, with the line
 * of the innermost frame only (callers' lines are ignored so that an edit that shifts them
 * does not split a site). */
struct gm_analysis_diff_site {
    uint32_t stack[2]; /* a representative stack in A / in B; UINT32_MAX when absent */
    uint64_t bytes[2]; /* bytes alive at the peak in A / B */
    uint64_t count[2]; /* allocations alive at the peak */
    uint64_t total[2]; /* bytes allocated over the whole trace */
    uint8_t status;    /* enum gm_diff_status */
    /* The frame (index in the representative stack: A's when the site is in A) that tells
     * this site apart from the other sites of its device that read alike on one line (the
     * same user and innermost frames: gm_snapshot_stacks_apart() with 0 callers); -1 when
     * none does. */
    long apart;
};

struct gm_analysis_diff_device {
    int32_t device;     /* devices[0] when present in A, else devices[1] */
    int32_t devices[2]; /* the device compared in A / in B: two ranks' files (one device
                         * each) are compared whatever their indexes (rank 1 on cuda:1
                         * against rank 0 on cuda:0), else devices are paired by index */
    bool present[2];
    uint64_t peak_bytes[2];
    uint8_t peak_phase[2];
    uint64_t at_peak[2][GM_CATEGORY_COUNT];
    struct gm_analysis_diff_site *sites; /* by |bytes[1]-bytes[0]| descending, then total */
    size_t n_sites;
};

struct gm_analysis_diff {
    struct gm_analysis_diff_device *devices; /* the rank's device of each file, or the union
                                              * of the device indexes, ascending */
    size_t n_devices;
    void *priv_;
};

/* The first pass of an analysis, for gm_snapshot_opts.consumer: given to the load of a
 * snapshot that is then analysed (gm_analysis_run(), gm_analysis_run_figures(),
 * gm_analysis_diff_prepare()), the first analysis's walk of each device trace is done on the
 * events as the file is read, instead of decoding the stored events again afterwards.  The
 * results are the same either way (a trace it could not follow whole is walked as without
 * it); a later analysis of the same snapshot walks.  Per device it holds 4 bytes an event
 * (its stack in 2 while every stack id is below 2^15, else 4, and its time step), 4 more a
 * free, and per allocation its gm_analysis_alloc and up to 32 bytes of address map; with
 * the timeline's fold, all devices' together stay
 * within an eighth of the snapshot's memory limit while loading (past it a trace is walked
 * after the load instead) and count in gm_snapshot.memory_bytes until the analysis takes
 * them, or until gm_snapshot_free().  Borrowed, static. */
const struct gm_snapshot_consumer *gm_analysis_first_pass_consumer(void);

/* The same for a snapshot that gm_analysis_diff_prepare() alone analyses: it keeps nothing a
 * diff does not read (no 4 bytes a free for the order of the frees, no segment events for the
 * layout history, and per allocation 24 bytes, its size, events and stack, in place of its
 * gm_analysis_alloc), which another analysis needs: any other analysis of a snapshot loaded
 * with it walks the trace instead (or, where the load kept no events, fails as
 * gm_analysis_run() does on such a snapshot).  Borrowed, static. */
const struct gm_snapshot_consumer *gm_analysis_diff_first_pass_consumer(void);

/* gm_analysis_run() without the per-category series (each device's points empty, and
 * a document with the series refuses it): every other figure the same, for the callers
 * that show none (categories without --series, leaks).  Errors: as gm_analysis_run(). */
enum gm_status gm_analysis_run_figures(const struct gm_snapshot *snap,
                                       const struct gm_analysis_opts *opts,
                                       struct gm_analysis **out, struct gm_error *err);

/* Analyse 'snap' for gm_analysis_diff() alone: per device the peak, its phase and the category
 * split at it, as gm_analysis_run() finds them, without the series, the iterations' figures,
 * the leaks, the layout history and the fragmentation; the allocations matched to their frees
 * are summed per stack (bytes, and bytes and count alive at the peak) and not kept (each
 * device's allocs NULL).  The result serves gm_analysis_diff() and the diff document, then
 * gm_analysis_free(); it borrows 'snap'.  'opts' may be NULL.  Errors: as gm_analysis_run(). */
enum gm_status gm_analysis_diff_prepare(const struct gm_snapshot *snap,
                                        const struct gm_analysis_opts *opts,
                                        struct gm_analysis **out, struct gm_error *err);

/* GM_OK when 'an' is a whole analysis (gm_analysis_run() or gm_analysis_run_figures());
 * GM_ERR_INVALID, naming 'what', for one made by gm_analysis_diff_prepare(), whose series,
 * leaks, layout history and most categories it does not hold: the live set, regions, files,
 * layout and calibration call this first. */
enum gm_status gm_analysis_require_whole(const struct gm_analysis *an, const char *what,
                                         struct gm_error *err);

/* gm_analysis_require_whole(), and GM_ERR_INVALID for an analysis made by
 * gm_analysis_run_figures(), whose series is empty: the calls that draw the series (the
 * report, the plot, the exports) call this first. */
enum gm_status gm_analysis_require_series(const struct gm_analysis *an, const char *what,
                                          struct gm_error *err);

/* Compare two analyses (two runs, or two ranks: gm_analysis_rank_device()), each made by
 * gm_analysis_run() or gm_analysis_diff_prepare().  On success *out is
 * owned by the caller (gm_analysis_diff_free()); it borrows both analyses and their snapshots.
 * Errors: GM_ERR_NOMEM. */
enum gm_status gm_analysis_diff(const struct gm_analysis *a, const struct gm_analysis *b,
                                struct gm_analysis_diff **out, struct gm_error *err);
void gm_analysis_diff_free(struct gm_analysis_diff *d);

/* The representative stack of site 's' into *stack and the snapshot it belongs to: A's when
 * the site is in A ('a', the first snapshot compared), else B's ('b'). */
const struct gm_snapshot *gm_analysis_diff_site_stack(const struct gm_analysis_diff_site *s,
                                                      const struct gm_snapshot *a,
                                                      const struct gm_snapshot *b, uint32_t *stack);

/* ---- ranks: several snapshots of one job (rank*.pickle) ----
 *
 * Each file is a rank, whatever its device index: torchrun gives rank N the device N, so the
 * rank-1 file holds a trace on cuda:1 and an empty one on cuda:0.  A rank's device is the
 * file's device with a trace or segments, the one with the highest peak when several have
 * (a process that drives several GPUs, DataParallel). */

/* The device of the rank 'an' holds (see above: gm_default_device()), or NULL when it has
 * none (no device with events or segments). Borrowed. */
const struct gm_analysis_device *gm_analysis_rank_device(const struct gm_analysis *an);

enum gm_rank_metric {
    GM_RANK_PEAK = 0,      /* allocated peak (requested bytes, the timeline's) */
    GM_RANK_PEAK_RESERVED, /* the most reserved over the trace */
    GM_RANK_RESERVED,      /* reserved at snapshot time */
    GM_RANK_ALLOCATED,     /* allocated at snapshot time (block sizes) */
};
#define GM_RANK_METRIC_COUNT 4

/* "peak_bytes", "peak_reserved_bytes", "reserved_bytes", "allocated_bytes"; static. */
const char *gm_rank_metric_name(enum gm_rank_metric m);

/* Where a rank's number comes from (gm_analysis_ranks() chooses one for all the ranks): the
 * files' names when each carries a rank and no two the same one, else their devices when no
 * two share one, else the order the files were given in. */
enum gm_rank_source {
    GM_RANK_BY_ORDER = 0, /* the index of the file among those with a device */
    GM_RANK_BY_DEVICE,    /* the rank's device index (torchrun: rank N on cuda:N) */
    GM_RANK_BY_NAME,      /* the file's name (gm_rank_from_name()) */
};

/* "argument order", "device", "file name"; static. */
const char *gm_rank_source_name(enum gm_rank_source s);

/* The rank the name of 'path' carries, by the names rank files are given (the file's name
 * first, then its folders): rankR, rank_R or rank-R anywhere ("rank" not preceded by a
 * letter: torchtitan's rankR_memory_snapshot.pickle, oom_rankR.pickle,
 * snapshot_oom_rank-R.pickle, rankR/), or Megatron-Bridge's snapshot_R.pickle.  true with
 * *rank set, false when it carries none. */
bool gm_rank_from_name(const char *path, uint64_t *rank);

/* Natural order of two names: runs of digits compare as numbers (rank2 before rank10). */
int gm_rank_name_cmp(const char *a, const char *b);

/* The files several arguments stand for, in the order they are ranks of a job. */
struct gm_rank_files {
    struct gm_arena *arena; /* owns the paths */
    char **paths;           /* borrowed, valid until gm_rank_files_release() */
    size_t n;
};

/* The files of the arguments args[0..n): a folder stands for its rank files (names that
 * carry a rank, and .digest files; when it has none, those of its last iteration_N folder,
 * as torchtitan writes them), in natural order, a snapshot whose digest lies beside it
 * (its name less the extension, plus ".digest") left out for the digest; another argument
 * for itself ("-" too).  When every file's name carries a rank, they are put in rank order
 * (stably), else they keep the arguments' order.  On success *out is the caller's:
 * gm_rank_files_release().  Errors: GM_ERR_NOENT (a folder without rank files), GM_ERR_IO
 * (a folder that cannot be listed), GM_ERR_LIMIT, GM_ERR_NOMEM. */
enum gm_status gm_rank_files_list(const char *const *args, size_t n, struct gm_rank_files *out,
                                  struct gm_error *err);
void gm_rank_files_release(struct gm_rank_files *f);

struct gm_rank {
    size_t file;    /* index of its analysis in the caller's array */
    int32_t device; /* its device */
    bool has_name_rank;
    uint64_t name_rank; /* the rank its file's name carries (has_name_rank) */
    uint64_t id;        /* its rank, set by gm_analysis_ranks() from 'id_source' */
    uint8_t id_source;  /* enum gm_rank_source */
    uint64_t value[GM_RANK_METRIC_COUNT];
    int64_t peak_event;
    uint8_t peak_phase; /* enum gm_phase */
    uint64_t at_peak[GM_CATEGORY_COUNT];
};

/* One metric over the ranks. */
struct gm_rank_spread {
    uint64_t min, max;
    double mean;
    size_t min_rank, max_rank; /* indexes into ranks[] (the first of equals) */
};

struct gm_ranks {
    struct gm_rank *ranks; /* one per file that has a device, in rank order */
    size_t n_ranks;
    uint8_t source; /* enum gm_rank_source: where every rank's id comes from */
    struct gm_rank_spread spread[GM_RANK_METRIC_COUNT];
    /* The imbalance of the peaks (n_ranks >= 2): the largest peak over the smallest, and
     * the category whose bytes at the two peaks differ the most, with that difference
     * (the largest rank's less the smallest's; may be negative when the other categories
     * make up for it). */
    double peak_ratio;      /* 0 when the smallest peak is 0 */
    uint8_t category;       /* enum gm_category */
    int64_t category_bytes; /* bytes */
};

/* The figures of the rank 'an' holds into *out (its device, peak, reserved bytes, the
 * categories at its peak, the rank its file's name 'name' carries; NULL: none), 'file'
 * recorded in it; *has_device false (and nothing else done) when the file has no device
 * with a trace or segments.  A caller that reads many files keeps these and frees each
 * snapshot.  Returns GM_OK: the figures come from the analysis (its timeline included) and
 * the snapshot. */
enum gm_status gm_analysis_rank(const struct gm_analysis *an, size_t file, const char *name,
                                struct gm_rank *out, bool *has_device, struct gm_error *err);

/* The ranks' ids (one source for all: enum gm_rank_source) and, ordered by id, the spread
 * and imbalance of n ranks (copied into out->ranks; min_rank/max_rank index it).  On success
 * 'out' is the caller's: gm_analysis_ranks_release().  Errors: GM_ERR_NOMEM. */
enum gm_status gm_analysis_ranks(const struct gm_rank *ranks, size_t n, struct gm_ranks *out,
                                 struct gm_error *err);
void gm_analysis_ranks_release(struct gm_ranks *r);

/* The ranks whose peak stands out from the job's (GM_RANK_OUTLIERS_MIN ranks or more): a
 * peak further from the median than 3 median absolute deviations (scaled as a normal
 * distribution's standard deviation, 1.4826) and than 5% of the median.  Writes the indexes
 * into rs->ranks (in rank order) to out[] (room for rs->n_ranks) and returns how many;
 * 0 below GM_RANK_OUTLIERS_MIN ranks.  Errors: none (out of memory gives 0). */
#define GM_RANK_OUTLIERS_MIN 16
size_t gm_analysis_rank_outliers(const struct gm_ranks *rs, size_t *out);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
/* ---- digests: one rank summed up where its snapshot was written ----
 *
 * `gpumem snapshot digest` writes a rank's results as a small JSON document
 * (gm_analysis_json(), GM_DOC_DIGEST: "gpumem.snapshot.digest/1"): the rank's figures
 * (gm_analysis_rank()), what was alive at each device's peak by category and by site (the
 * GM_DIGEST_SITES largest), the allocated, reserved and per-category series at most
 * GM_DIGEST_POINTS points, the iterations, the leaks, the fragmentation at the peak and at
 * each oom, the allocator settings, the host and the rank.  The job's commands read
 * digests where they read snapshots and give the same rank figures from either, so that
 * only kilobytes leave each node. */

#define GM_DIGEST_POINTS    256                  /* points of a series, at most */
#define GM_DIGEST_SITES     20                   /* sites alive at a peak, at most */
#define GM_DIGEST_MAX_BYTES ((uint64_t)16 << 20) /* a digest file, at most */

/* One point of a digest's series. */
struct gm_digest_point {
    int64_t event;
    uint64_t total;    /* allocated bytes */
    uint64_t reserved; /* bytes */
    uint64_t bytes[GM_CATEGORY_COUNT];
};

/* What the job's commands read back from a digest. */
struct gm_digest {
    const char *file; /* the snapshot it sums up, as named when written */
    const char *host; /* NULL: unknown */
    bool has_rank;
    uint64_t rank; /* the rank its snapshot's name carried (has_rank) */
    bool has_figures;
    struct gm_rank figures; /* the rank's figures (has_figures: it had a device) */
    bool expandable_segments;
    int64_t max_split_size; /* bytes, -1: unlimited */
    double gc_threshold;
    /* of the rank's device */
    uint64_t n_iterations;
    uint64_t n_ooms;
    uint64_t leak_bytes_per_iteration;
    struct gm_digest_point *series;
    size_t n_series;
    struct gm_arena *arena; /* owns everything above */
};

/* Whether the first bytes data[0..len) of a file are a digest's (a JSON object whose
 * schema is gpumem.snapshot.digest/N). */
bool gm_digest_sniff(const void *data, size_t len);

/* Whether the file 'path' is a digest (its first bytes; false when it cannot be read). */
bool gm_digest_is_file(const char *path);

/* Parse the digest data[0..len).  On success *out owns its memory: gm_digest_free().
 * Errors: GM_ERR_FORMAT (not JSON, not a digest, a member missing or of the wrong type),
 * GM_ERR_UNSUPPORTED (a later version), GM_ERR_LIMIT (larger than GM_DIGEST_MAX_BYTES, a
 * series longer than GM_DIGEST_POINTS), GM_ERR_NOMEM. */
enum gm_status gm_digest_parse(const void *data, size_t len, struct gm_digest **out,
                               struct gm_error *err);

/* Read and parse the digest file 'path' (gm_digest_parse(); GM_ERR_NOENT, GM_ERR_IO). */
enum gm_status gm_digest_load(const char *path, struct gm_digest **out, struct gm_error *err);

/* The rank a digest holds, as gm_analysis_rank() gives it from the snapshot: its figures,
 * 'file' recorded in it, the rank carried by the digest file's name 'name' (NULL: none),
 * else by its snapshot's.  *has_device false when the snapshot had no device. */
void gm_digest_rank(const struct gm_digest *d, size_t file, const char *name, struct gm_rank *out,
                    bool *has_device);

/* NULL is a no-op. */
void gm_digest_free(struct gm_digest *d);

#endif
