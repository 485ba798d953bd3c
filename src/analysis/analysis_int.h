/* SPDX-License-Identifier: MIT */
/* analysis_int.h - internals shared by the files of src/analysis/: frame and stack
 * classification, the per-device working state, and a small address map. */
#ifndef GM_ANALYSIS_INT_H
#define GM_ANALYSIS_INT_H

#include "base/map.h"

#include "gpumem/analysis.h"
#include "gpumem/arena.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a frame (or, ORed over its frames, a stack) says about the code that allocated. */
enum ana_frame_flag {
    FR_PY = 1 << 0,          /* a Python frame */
    FR_MODULE_CALL = 1 << 1, /* torch/nn/modules/module.py _call_impl & co: inside forward */
    FR_PARAM_LOAD = 1 << 2,  /* Module._apply/to/cuda, nn.init, load_state_dict, torch.load,
                              * from_pretrained, DataParallel replicate */
    FR_BACKWARD = 1 << 3,    /* autograd engine / loss.backward() / torch.autograd.grad */
    FR_OPTIM_STEP = 1 << 4,  /* torch/optim (and other optimizers') step code */
    FR_ZERO_GRAD = 1 << 5,   /* zero_grad */
    FR_DATA = 1 << 6,        /* torch/utils/data */
    FR_USER = 1 << 7,        /* user code: gm_snapshot_frame_is_user() */
    FR_AUTOGRAD_PY = 1 << 8, /* a Python frame in torch/autograd/ or torch/utils/checkpoint */
    FR_STACK_DONE = 1 << 15  /* cache marker of ana_stack_flags() */
};

/* The fewest iterations a leak is judged on: memory kept by two iterations before the
 * last one. */
#define ANA_MIN_LEAK_ITERATIONS 3

/* Raw phase of one event before smoothing. */
enum ana_raw_phase { RAW_UNKNOWN = 0, RAW_OTHER, RAW_FORWARD, RAW_BACKWARD, RAW_STEP };

/* The user's category rules at work on one snapshot (rules.c): what each rule says of the
 * texts and stacks seen so far, and of the annotations open over the current device's
 * time. */
struct ana_rules_step {
    int64_t time_us; /* from this time on ... */
    uint64_t mask;   /* ... these annotation rules match (while building: the range's) */
    int delta;       /* while building: +1 a range opens, -1 it closes */
};
/* The times of a device's events as the analysis's scan keeps them (struct ana_times,
 * analysis.c: every event has one and they never go back), read without the trace by a cursor
 * that moves forward (a step back starts again from the kept block of the event asked). */
struct ana_times;
struct ana_time_cursor {
    const struct ana_times *tm;
    int64_t k; /* the event whose time is t (-1: none yet) */
    int64_t t; /* microseconds */
    size_t wi; /* the wide steps read up to event k */
};
void ana_time_cursor_init(struct ana_time_cursor *c, const struct ana_times *tm);
/* The time_us of event k (0 <= k < the events). */
int64_t ana_time_cursor_at(struct ana_time_cursor *c, int64_t k);

struct ana_rules {
    const struct gm_category_rules *rules; /* NULL: none */
    const struct gm_snapshot *snap;
    size_t n_texts;
    uint64_t *file_mask, *name_mask; /* per text id */
    uint8_t *text_done;              /* per text id: 1 file mask found, 2 name mask found */
    uint64_t *stack_mask;            /* per stack id */
    uint8_t *stack_done;             /* bit per stack id */
    const struct gm_snapshot_device *sd;
    struct ana_rules_step *steps;
    size_t n_steps;
    struct gm_snapshot_cursor cursor; /* at the last allocation's event */
    struct gm_snapshot_event event;
    bool have_event;
    /* the times the scan kept (NULL: none, the events' times are read from the trace) */
    bool use_times;
    struct ana_time_cursor times;
};

/* Prepare the rules (none when 'rules' is NULL or empty) for 'snap'. */
enum gm_status ana_rules_init(struct ana_rules *u, const struct gm_category_rules *rules,
                              const struct gm_snapshot *snap, struct gm_error *err);
void ana_rules_release(struct ana_rules *u);
/* Copy the rules' names and categories into 'an' (its arena). */
/* The YAML form of category rules (rules_yaml.c: the subset it reads) as the JSON tree of
 * the JSON form, *out to json_decref(); GM_ERR_FORMAT naming the line of what it refuses. */
enum gm_status ana_rules_yaml(const char *text, size_t len, json_t **out, struct gm_error *err);

enum gm_status ana_rules_keep(struct gm_analysis *an, struct gm_arena *arena,
                              const struct gm_category_rules *r, struct gm_error *err);
/* Prepare the annotation rules for the device 'sd' (before its allocations are tried); 'tm':
 * the times of its events the scan kept, else NULL (they are read from the trace; a trace
 * whose events were consumed: GM_ERR_INVALID, ana_events_missing()). */
enum gm_status ana_rules_device(struct ana_rules *u, const struct gm_snapshot_device *sd,
                                const struct ana_times *tm, struct gm_error *err);
/* The index of the first rule that an allocation of 'stack' at event 'alloc_event' (-1:
 * before the trace) matches, its category in *cat; -1 when none does. */
int ana_rules_match(struct ana_rules *u, uint32_t stack, int64_t alloc_event,
                    enum gm_category *cat);

struct ana_classifier {
    const struct gm_snapshot *snap;
    uint16_t *frame_flags;   /* per frame id */
    uint16_t *stack_flags;   /* per stack id, FR_STACK_DONE once computed */
    uint32_t *caller;        /* per stack id: see ana_stack_caller(); CALLER_UNSET until done */
    struct ana_rules *rules; /* the user's category rules (never NULL once analysing) */
};

#define ANA_NO_FRAME UINT32_MAX

/* Prepare per-frame flags (gm_malloc'ed arrays). */
enum gm_status ana_classifier_init(struct ana_classifier *c, const struct gm_snapshot *snap,
                                   struct gm_error *err);
void ana_classifier_release(struct ana_classifier *c);

/* Flags of one frame (computed without cache, for tests). */
uint16_t ana_frame_flags(const struct gm_snapshot_frame *f);

/* ORed flags of a stack; FR_BACKWARD also when the outermost Python frame is in
 * torch/autograd (a Python function called by the engine thread). Cached: a stack's first
 * ask computes them (ana_stack_flags_compute(), classify.c), every later one reads the
 * cache here without a call (the analysis asks once per allocation).  _compute() reads no
 * cache: call it only through ana_stack_flags(). */
uint16_t ana_stack_flags_compute(struct ana_classifier *c, uint32_t stack);
static inline uint16_t ana_stack_flags(struct ana_classifier *c, uint32_t stack)
{
    if (stack < c->snap->n_stacks) {
        uint16_t cached = c->stack_flags[stack];
        if (cached & FR_STACK_DONE)
            return (uint16_t)(cached & ~FR_STACK_DONE);
    }
    return ana_stack_flags_compute(c, stack);
}

/* The frame that called the model: the first Python frame outside the outermost module
 * call of 'stack' (ANA_NO_FRAME when there is none). Cached. */
uint32_t ana_stack_caller(struct ana_classifier *c, uint32_t stack);

/* The frame that called the model, for naming what keeps a forward result: the first
 * Python frame outside the outermost module call or forward() of 'stack' (ANA_NO_FRAME when
 * there is none). */
uint32_t ana_stack_model_caller(const struct ana_classifier *c, uint32_t stack);

/* The first user-code frame of 'stack' (innermost first), or ANA_NO_FRAME. */
uint32_t ana_stack_first_user(const struct ana_classifier *c, uint32_t stack);

/* Do two frame ids name the same function (filename and name)? */
bool ana_same_function(const struct gm_snapshot *snap, uint32_t a, uint32_t b);

/* Phase the flags of a stack imply (RAW_UNKNOWN when they say nothing). */
enum ana_raw_phase ana_phase_of_flags(uint16_t flags);

/* The 32-bit value (an index) of 'key' in a base map (base/map.h), UINT32_MAX when the map
 * has none. */
static inline uint32_t ana_map_u32(const struct gm_map *m, uint64_t key)
{
    uint64_t v;
    return gm_map_get(m, key, &v) ? (uint32_t)v : UINT32_MAX;
}

/* Every frame of 'stack' but the noise, innermost first, as a JSON array of {"filename",
 * "line", "name"} (the peak document and the trace's NDJSON). */
struct gm_json;
void ana_json_stack(struct gm_json *w, const struct gm_snapshot *snap, uint32_t stack);

/* --- internals of the analysis object --- */

/* A large array the analysis owns outside its arena (base/big.h). */
struct ana_kept {
    void *p;
    size_t bytes;
};

/* gm_analysis_totals_cats() of a device: 'n' rows (NULL: none). */
struct ana_cats {
    uint64_t *rows;
    size_t n;
};

struct ana_priv {
    struct gm_arena arena;
    struct ana_kept *kept;
    size_t n_kept, cap_kept;
    uint64_t held;                     /* bytes of results, against the snapshot's memory limit */
    struct gm_layout_history *layouts; /* one per device, same order as an->devices */
    struct gm_lod_totals *totals;      /* one per device (gm_analysis_opts.totals), or NULL */
    struct ana_cats *totals_cats;      /* with them, one per device: gm_analysis_totals_cats() */
    size_t n_first_pass_taken;         /* devices whose first pass the load made (tests read it) */
    size_t n_phases_in_times; /* a diff's devices whose phases took the times' memory (tests) */
};

/* What ana_run() computes: everything (gm_analysis_run()), everything but the series
 * (gm_analysis_run_figures()), or only what gm_analysis_diff() reads
 * (gm_analysis_diff_prepare()): per device the peak, its phase and iteration, the category
 * split at it and the allocations' sums per stack (ana_device_priv.sums), no allocation
 * kept; the category of an allocation made only where it counts in that split. */
enum ana_parts { ANA_PARTS_ALL, ANA_PARTS_FIGURES, ANA_PARTS_DIFF };

enum gm_status ana_run(const struct gm_snapshot *snap, const struct gm_analysis_opts *opts,
                       enum ana_parts parts, struct gm_analysis **out, struct gm_error *err);

/* Whether an allocation made at event 'alloc_event' (-1: from the start) and freed at
 * 'free_event' (-1: never) holds its bytes after event k (its own alloc and free included). */
static inline bool ana_alive_at(int64_t alloc_event, int64_t free_event, int64_t k)
{
    return alloc_event <= k && (free_event < 0 || free_event > k);
}

/* The allocations of one stack, as a diff reads them (diff.c): its bytes over the trace,
 * and those alive at the device's peak event (allocated at or before it, freed after it or
 * never) with their count. */
struct ana_stack_sum {
    uint32_t stack;
    uint64_t total;
    uint64_t bytes;
    uint64_t count;
};

/* Per stack its sums, the stacks in the order their first allocation comes in the device's
 * allocations (diff.c makes its sites in that order). */
struct ana_stack_sums {
    struct ana_stack_sum *v;
    size_t n, cap;
    uint32_t *slot_of; /* stack id < n_ids -> its index in v, UINT32_MAX: none yet */
    size_t n_ids;
    struct gm_map other; /* a stack id >= n_ids -> its index in v */
};

/* Sums for a snapshot of 'n_stacks' stacks; false on NOMEM. */
bool ana_stack_sums_init(struct ana_stack_sums *s, size_t n_stacks);
void ana_stack_sums_release(struct ana_stack_sums *s);

/* The index in s->v of 'stack', added at the end when new; UINT32_MAX on NOMEM. */
uint32_t ana_stack_sums_slot(struct ana_stack_sums *s, uint32_t stack);

/* One allocation of 'bytes' of 'stack' made at event 'alloc_event' and freed at 'free_event'
 * (-1: from the start / never) into the sums, against the peak event 'peak'; false on NOMEM.
 * (Inline: once per allocation, a stack seen before in one array read.) */
static inline bool ana_stack_sums_add(struct ana_stack_sums *s, uint32_t stack, uint64_t bytes,
                                      int64_t alloc_event, int64_t free_event, int64_t peak)
{
    uint32_t slot = stack < s->n_ids ? s->slot_of[stack] : UINT32_MAX;
    if (slot == UINT32_MAX && (slot = ana_stack_sums_slot(s, stack)) == UINT32_MAX)
        return false;
    struct ana_stack_sum *x = &s->v[slot];
    x->total += bytes;
    if (ana_alive_at(alloc_event, free_event, peak)) {
        x->bytes += bytes;
        x->count++;
    }
    return true;
}

/* What one device's analysis keeps beside its public results. */
struct ana_device_priv {
    const struct gm_layout_history *layout; /* the device's layout history (NULL: none) */
    const struct gm_lod_totals *totals;     /* gm_analysis_totals() */
    const struct ana_cats *totals_cats;     /* gm_analysis_totals_cats(), or NULL */
    /* the allocations (indexes into allocs) in the order of their free_completed events, one
     * per such event: with allocs, in alloc-event order, the bytes after every event in one
     * merge (regions.c), no array per event */
    const uint32_t *free_order;
    size_t n_free_order;
    /* gm_analysis_diff_prepare(), which keeps no allocations: their sums per stack, in the
     * order of ana_stack_sums (in the arena; NULL otherwise) */
    const struct ana_stack_sum *sums;
    size_t n_sums;
};

/* Keep 'p' (a gm_big array of 'bytes') until gm_analysis_free(); false when out of memory
 * (then the caller still owns it). */
bool ana_priv_keep(struct ana_priv *priv, void *p, size_t bytes);

/* ---- user phases (user.c) ---- */

/* GM_ERR_INVALID: the analysis would read the trace of 'sd', whose events the load consumed
 * without keeping them (gm_snapshot.events_consumed); its caller loads the file again with
 * them (gm_snapshot_opts.consume_events).  Every reader of a trace in the analysis asks
 * snap_events_stored() first and fails with this, never reading an empty trace. */
enum gm_status ana_events_missing(const struct gm_snapshot_device *sd, struct gm_error *err);

/* dev->user_phases and dev->user_ranges of device 'sd' from the snapshot's gpumem.phase
 * marks, the ranges put on the events by one pass over their times (events are in time
 * order: a range holds the events from its START to its END): those the scan kept ('tm'),
 * else the trace's.  Errors: GM_ERR_NOMEM; GM_ERR_INVALID (ana_events_missing()) without
 * 'tm' on a trace whose events were consumed. */
enum gm_status ana_user_phases(const struct gm_snapshot *snap, const struct gm_snapshot_device *sd,
                               const struct ana_times *tm, struct gm_arena *arena,
                               struct gm_analysis_device *dev, struct gm_error *err);

/* The innermost user phase of event after event, read in order (k ascending from -1). */
#define ANA_USER_OPEN 16
struct ana_user_cursor {
    const struct gm_analysis_device *dev;
    size_t next;                  /* the next range (by first event) to open */
    uint32_t open[ANA_USER_OPEN]; /* ranges open at the current event, outer first */
    size_t n_open;
};
void ana_user_cursor_init(struct ana_user_cursor *c, const struct gm_analysis_device *dev);
/* The phase (index into dev->user_phases) of event k, UINT32_MAX for none. */
uint32_t ana_user_cursor_at(struct ana_user_cursor *c, int64_t k);

/* The layout history's part of a walk of the trace (layout.c): the segment events, kept
 * with their indexes, so that the analysis's walk gathers them beside its own work and
 * gm_layout_history_build() walks only when called alone.  ana_layout_events_see() takes
 * each event in trace order (false: out of memory); ana_layout_history_of() builds the
 * history from them and takes them over (released whatever it returns). */
struct ana_layout_event {
    int64_t k;
    struct gm_snapshot_event e;
};
struct ana_layout_events {
    struct ana_layout_event *ev;
    size_t n, cap;
};
bool ana_layout_events_keep(struct ana_layout_events *s, int64_t k,
                            const struct gm_snapshot_event *e);
static inline bool ana_layout_events_see(struct ana_layout_events *s, int64_t k,
                                         const struct gm_snapshot_event *e)
{
    if (e->action < GM_ACTION_SEGMENT_ALLOC || e->action > GM_ACTION_SEGMENT_UNMAP)
        return true;
    return ana_layout_events_keep(s, k, e);
}
void ana_layout_events_release(struct ana_layout_events *s);
enum gm_status ana_layout_history_of(const struct gm_snapshot *snap,
                                     const struct gm_snapshot_device *dev,
                                     struct ana_layout_events *s, struct gm_layout_history *h,
                                     struct gm_error *err);

/* Where to put the fragmentation figures of one moment (event -1: the initial state). */
struct ana_frag_target {
    int64_t event;
    struct gm_analysis_frag *out;
};

/* Fragmentation at the given moments of one device ('targets' sorted by event), from the
 * live sets of gm_analysis_live_at() (the allocations' alloc and free events). */
enum gm_status ana_frag_compute(const struct gm_snapshot *snap, const struct gm_snapshot_device *sd,
                                const struct gm_analysis *an, const struct gm_analysis_device *dev,
                                struct gm_arena *arena, const struct ana_frag_target *targets,
                                size_t n_targets, struct gm_error *err);

#endif
