/* SPDX-License-Identifier: MIT */
/* snapshot.h - PyTorch CUDA memory snapshots (torch.cuda.memory._dump_snapshot() pickles),
 * read safely: nothing in the file is ever executed.
 *
 * A loaded struct gm_snapshot is a plain tree of arrays and counts that C code can walk
 * without any internal header:
 *
 *   snap->segments[i].blocks[j]          segments and their blocks, sorted as in the file
 *   snap->devices[d].events[k]           the trace of one device, oldest first
 *   snap->stacks[id].frames[f]           an interned stack: frame ids, innermost first
 *   snap->frames[frame_id]               an interned frame (filename, line, name)
 *
 * Frames and stacks are interned: equal (filename, line, name) triples have one frame id,
 * equal frame-id sequences one stack id, and stack id 0 is always the empty stack.
 * Strings are NUL-terminated UTF-8 as found in the file (invalid UTF-8 is kept as bytes;
 * an embedded NUL byte truncates the C string) and equal strings share one pointer.
 *
 * Ownership: everything reachable from a struct gm_snapshot lives in the snapshot's arena
 * and is valid until gm_snapshot_free(); callers never free any of it.  A snapshot is
 * read-only after loading, so several threads may read one at the same time.
 * Results of the analysis functions (gm_snapshot_stats, gm_snapshot_timeline) are owned by
 * the caller through their own *_free() / *_release() functions. */
#ifndef GPUMEM_SNAPSHOT_H
#define GPUMEM_SNAPSHOT_H

#include "gpumem/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

/* Format generations (docs/snapshot.md, "Generations"), detected from the
 * keys present; there is no version field in the file.  Ordered: a later generation
 * implies the features of the earlier ones. */
enum gm_snapshot_gen {
    GM_SNAPSHOT_GEN_G0 = 0, /* top-level list of segments (1.13, or memory_snapshot()) */
    GM_SNAPSHOT_GEN_G1,     /* 2.0: dict, device_traces, blocks carry 'history' */
    GM_SNAPSHOT_GEN_G2,     /* 2.1: block 'frames'/'address', segment pool id, no time_us */
    GM_SNAPSHOT_GEN_G3,     /* 2.2: trace entries carry 'time_us' */
    GM_SNAPSHOT_GEN_G4,     /* 2.3: 'allocator_settings' */
    GM_SNAPSHOT_GEN_G5,     /* 2.4-2.7: 'external_annotations' */
    GM_SNAPSHOT_GEN_G6,     /* 2.8: 'compile_context' on trace entries */
    GM_SNAPSHOT_GEN_G7,     /* 2.9: settings have 'graph_capture_record_stream_reuse' */
    GM_SNAPSHOT_GEN_G8,     /* 2.10: 'user_metadata' on trace entries */
    GM_SNAPSHOT_GEN_G9      /* 2026: 'pool_id'/'forward_frames'/host data/overflow flag */
};

/* What kind of accelerator a snapshot's devices are.  The file names no device type: an
 * XPU snapshot (torch.xpu.memory._dump_snapshot) is told by its allocator_settings, which
 * name the PYTORCH_ALLOC_CONF string and none of the CUDA allocator's own keys
 * (PYTORCH_CUDA_ALLOC_CONF, release_lock_on_cudamalloc, pinned_use_cuda_host_register);
 * anything else is CUDA. */
enum gm_device_kind {
    GM_DEVICE_CUDA = 0,
    GM_DEVICE_XPU,
};

/* "cuda", "xpu"; static storage. */
const char *gm_device_kind_name(enum gm_device_kind kind);

/* "g5"; static storage. */
const char *gm_snapshot_gen_name(enum gm_snapshot_gen gen);
/* "2.4-2.7"-style torch version range of a generation; static storage. */
const char *gm_snapshot_gen_torch(enum gm_snapshot_gen gen);

/* The longest frame file or function name kept whole (bytes; PATH_MAX): a longer one (no
 * real frame has one) is kept as its first GM_SNAPSHOT_TEXT_MAX bytes, cut at a character,
 * and " ... (N bytes)", so that what is shown or written of a frame never grows with such a
 * name however many frames share it. */
#define GM_SNAPSHOT_TEXT_MAX 4096

/* One interned frame.  Python frames have a .py filename; C++ frames usually "??" and 0. */
struct gm_snapshot_frame {
    const char *filename; /* never NULL ("" when missing) */
    const char *name;     /* function; never NULL */
    int64_t line;         /* 0 when unknown */
    bool is_python;       /* filename ends in ".py" (not "??", not a C/C++ source) */
    bool is_noise;        /* matched by the memory_viz noise filter (unwind::, PyEval_, ...) */
    /* Set by the loader, which looks at each distinct text once: user_file is
     * gm_snapshot_file_is_user(filename) when user_known (else gm_snapshot_frame_is_user()
     * reads the filename), and the ids number the snapshot's distinct texts
     * (< gm_snapshot.n_strings; equal ids, equal texts), so that a consumer can keep what it
     * finds in a text per text, not per frame. */
    bool user_known;
    bool user_file;
    uint32_t filename_id;
    uint32_t name_id;
};

/* One interned stack: frame ids into gm_snapshot.frames, innermost first (file order). */
struct gm_snapshot_stack {
    const uint32_t *frames; /* n_frames ids; NULL when n_frames == 0 */
    uint32_t n_frames;
};

enum gm_block_state {
    GM_BLOCK_INACTIVE = 0,        /* cached, free */
    GM_BLOCK_ACTIVE_ALLOCATED,    /* held by a tensor */
    GM_BLOCK_ACTIVE_PENDING_FREE, /* freed, still in use on another stream (record_stream) */
    GM_BLOCK_UNKNOWN              /* any other state string (see gm_snapshot_block.state_name) */
};

/* "active_allocated" etc.; static storage. */
const char *gm_block_state_name(enum gm_block_state s);

struct gm_snapshot_block {
    uint64_t address;        /* segment address + sizes of earlier blocks when not in file */
    uint64_t size;           /* bytes (rounded, multiple of 512) */
    uint64_t requested_size; /* bytes asked for; falls back to history[0].real_size, then size */
    enum gm_block_state state;
    const char *state_name;    /* the state string as written */
    uint32_t stack;            /* stack id: 'frames', or history[0].frames (2.0); 0 if none */
    bool has_requested;        /* 'requested_size' (or history real_size) was in the file */
    bool has_history;          /* a 2.0 'history' list was present */
    const char *user_metadata; /* NULL when absent */
};

/* One segment: a cudaMalloc, or an expandable-segments virtual range. */
struct gm_snapshot_segment {
    int32_t device;
    uint64_t address;
    uint64_t total_size;     /* bytes reserved */
    uint64_t allocated_size; /* as written in the file (0 when absent) */
    uint64_t active_size;    /* as written (0 when absent) */
    uint64_t requested_size; /* as written (0 when absent) */
    uint64_t stream;         /* raw cudaStream_t value; 0 is the default stream */
    bool is_small;           /* segment_type == "small" (the <= 1 MiB pool) */
    bool is_expandable;
    bool has_pool_id;
    int64_t pool_id[2]; /* segment_pool_id; (0,0) is the default pool */
    uint32_t stack;     /* stack of the cudaMalloc; 0 if none */
    const struct gm_snapshot_block *blocks;
    size_t n_blocks;
};

enum gm_snapshot_action {
    GM_ACTION_ALLOC = 0,
    GM_ACTION_FREE_REQUESTED,
    GM_ACTION_FREE_COMPLETED,
    GM_ACTION_SEGMENT_ALLOC,
    GM_ACTION_SEGMENT_FREE,
    GM_ACTION_SEGMENT_MAP,
    GM_ACTION_SEGMENT_UNMAP,
    GM_ACTION_SNAPSHOT,
    GM_ACTION_OOM,
    GM_ACTION_OTHER /* unknown action (e.g. 'user_defined'): kept so indexes match the file */
};
#define GM_ACTION_COUNT 10

/* "alloc", "free_requested", ...; "other" for GM_ACTION_OTHER; static storage. */
const char *gm_snapshot_action_name(enum gm_snapshot_action a);

enum gm_event_flags {
    GM_EVENT_HAS_TIME = 1 << 0,    /* time_us is valid */
    GM_EVENT_HAS_ADDR = 1 << 1,    /* 'addr' was in the entry */
    GM_EVENT_HAS_FRAMES = 1 << 2,  /* 'frames' was in the entry (stack may still be 0) */
    GM_EVENT_HAS_POOL_ID = 1 << 3, /* pool_id is valid */
};

/* One trace entry.  40 bytes; a device trace is a plain array of these.  The stream is
 * one of the interned extra fields: gm_snapshot_event_stream(). */
struct gm_snapshot_event {
    uint64_t addr;   /* block or segment address; for GM_ACTION_OOM: device_free (bytes) */
    uint64_t size;   /* bytes: requested bytes for alloc/free_*, range for segment_* */
    int64_t time_us; /* microseconds since the epoch; valid if flags & GM_EVENT_HAS_TIME */
    uint32_t stack;  /* stack id, 0 when not recorded */
    uint32_t extra;  /* index+1 into gm_snapshot.extras, 0 when none */
    uint8_t action;  /* enum gm_snapshot_action */
    uint8_t flags;   /* enum gm_event_flags */
};

/* Per-event fields that repeat (the stream; compile_context is "N/A" on every 2.8+ entry),
 * kept out of the hot 40-byte event and interned: equal combinations share one entry.  An
 * event on stream 0 without any of the other fields has none (extra 0). */
struct gm_snapshot_event_extra {
    uint64_t stream;             /* raw cudaStream_t value */
    const char *action_name;     /* the raw action string of GM_ACTION_OTHER, else NULL */
    const char *compile_context; /* NULL when absent */
    const char *user_metadata;   /* NULL when absent */
    int64_t pool_id[2];          /* valid if event flags & GM_EVENT_HAS_POOL_ID */
    /* The allocator's own tag of the event (e.g. "mallocWithAddress"); NULL when absent. */
    const char *internal_metadata;
    /* 'forward_frames': the forward-pass traceback of the autograd node that allocated in
     * the backward pass, its 'File "f", line N, in name' lines read as frames (innermost
     * first, as stacks are); 0 when absent (gm_snapshot_event_user_stack()). */
    uint32_t forward_stack;
};

/* The microseconds from t0 to t (t - t0): true when the span fits int64, else false with
 * *span saturated at INT64_MIN or INT64_MAX (a file may hold times a span beyond int64
 * apart; subtracting them as int64 would overflow).  The one rule every time axis uses. */
static inline bool gm_snapshot_span_us(int64_t t, int64_t t0, int64_t *span)
{
    if (!__builtin_sub_overflow(t, t0, span))
        return true;
    *span = t < t0 ? INT64_MIN : INT64_MAX;
    return false;
}

/* device_free of an oom event (bytes CUDA reported free). */
static inline uint64_t gm_snapshot_event_device_free(const struct gm_snapshot_event *e)
{
    return e->action == GM_ACTION_OOM ? e->addr : 0;
}

/* A device trace as the loader keeps it: packed, a few bytes per event (opaque; read it
 * with a struct gm_snapshot_cursor or gm_snapshot_events_read()). */
struct gm_snapshot_packed;
struct gm_snapshot_consumer;

/* Everything the file says about one device index. */
struct gm_snapshot_device {
    int32_t index;        /* CUDA device index */
    bool has_trace;       /* device_traces had a list for this index */
    size_t first_segment; /* index in gm_snapshot.segments of its first segment */
    size_t n_segments;    /* its segments: segments[first_segment .. +n_segments) */
    size_t n_events;      /* the trace's events, oldest first: read them with a cursor */
    /* Events per action (enum gm_snapshot_action), counted by the loader (zero in a
     * snapshot built by hand). */
    uint64_t n_actions[GM_ACTION_COUNT];
    /* The trace itself: a loaded snapshot keeps it packed (events NULL); a snapshot built
     * by hand may point 'events' to a plain array of n_events instead (packed NULL).
     * Cursors read either. */
    const struct gm_snapshot_packed *packed;
    const struct gm_snapshot_event *events;
};

/* ---- reading a trace: cursors ----
 *
 * Events are read in order: a cursor decodes a batch of them at a time into its own
 * buffer, and gm_snapshot_cursor_next() hands them out one by one (O(1) each, no
 * allocation).  Opening a cursor at event k costs at most GM_SNAPSHOT_CHECKPOINT events of
 * decoding.  The event pointers are borrowed: valid until the next call on the cursor.
 *
 *   struct gm_snapshot_cursor c;
 *   const struct gm_snapshot_event *e;
 *   gm_snapshot_cursor_init(&c, dev, 0);
 *   while ((e = gm_snapshot_cursor_next(&c)) != NULL)
 *       ... event c.index is *e ...
 *
 * A cursor is a plain value (about 5 KiB): it may live on the stack, be copied, and
 * several may read one device at the same time, also from several threads. */
#define GM_SNAPSHOT_CURSOR_BATCH 128
#define GM_SNAPSHOT_CHECKPOINT   256

struct gm_snapshot_cursor {
    const struct gm_snapshot_event *p;   /* the next event to hand out */
    const struct gm_snapshot_event *end; /* the end of the decoded batch */
    size_t index;                        /* index of the event last handed out */
    /* private: the decoder's state */
    const struct gm_snapshot_device *dev_;
    size_t next_; /* index of the first event not decoded yet */
    size_t pos_;  /* byte position of that event in the packed trace */
    struct gm_snapshot_event last_;
    struct gm_snapshot_event buf_[GM_SNAPSHOT_CURSOR_BATCH];
};

/* Position 'c' before event 'first' of 'dev' (first >= n_events: at the end). */
void gm_snapshot_cursor_init(struct gm_snapshot_cursor *c, const struct gm_snapshot_device *dev,
                             size_t first);

/* Decode the next batch; false at the end of the trace.  Called by
 * gm_snapshot_cursor_next(). */
bool gm_snapshot_cursor_fill(struct gm_snapshot_cursor *c);

/* The next event (its index is then c->index), or NULL after the last one. */
static inline const struct gm_snapshot_event *gm_snapshot_cursor_next(struct gm_snapshot_cursor *c)
{
    if (c->p == c->end && !gm_snapshot_cursor_fill(c))
        return NULL;
    c->index++;
    return c->p++;
}

/* Decode events [first, first + n) of 'dev' into the caller's array 'out' (a plain array
 * of the fixed public struct, e.g. the buffer of a NumPy structured array); returns how
 * many were written (fewer when the trace ends first). */
size_t gm_snapshot_events_read(const struct gm_snapshot_device *dev, size_t first,
                               struct gm_snapshot_event *out, size_t n);

/* Event 'k' of 'dev' into *out (random access: up to GM_SNAPSHOT_CHECKPOINT events
 * decoded); false when k >= n_events. */
bool gm_snapshot_event_at(const struct gm_snapshot_device *dev, size_t k,
                          struct gm_snapshot_event *out);

/* Event 'k' of 'dev' into *out as gm_snapshot_event_at() reads it, or, in a snapshot loaded
 * with its events consumed (gm_snapshot.events_consumed), from those the load kept aside:
 * the trace's first and last event and its out-of-memory events.  False when k >= n_events
 * or event k is not kept. */
bool gm_snapshot_event_kept(const struct gm_snapshot_device *dev, size_t k,
                            struct gm_snapshot_event *out);

/* Bytes the packed trace of 'dev' occupies (0 for a plain array or no trace). */
size_t gm_snapshot_packed_bytes(const struct gm_snapshot_device *dev);

struct gm_snapshot_annotation {
    const char *name;  /* record_function range, e.g. "ProfilerStep#3" */
    const char *stage; /* "START" or "END" as written */
    int32_t device;
    int64_t time_us;
    bool is_start;
};

/* One allocator_settings item; nested dicts (roundup_power2_divisions) are flattened
 * as "parent.key". */
enum gm_setting_type {
    GM_SETTING_INT,
    GM_SETTING_FLOAT,
    GM_SETTING_BOOL,
    GM_SETTING_STR,
    GM_SETTING_NONE,
    GM_SETTING_OTHER
};
struct gm_snapshot_setting {
    const char *key;
    enum gm_setting_type type;
    int64_t i;     /* INT, BOOL (0/1) */
    double d;      /* FLOAT (and INT converted) */
    const char *s; /* STR; for OTHER a short description ("list") */
};

struct gm_snapshot {
    enum gm_snapshot_gen gen;
    int protocol;         /* pickle protocol (2..5) */
    bool is_list;         /* top level was a list of segments (g0) */
    uint64_t file_size;   /* bytes of the file (the compressed ones when it was gzip'd) */
    uint64_t pickle_size; /* bytes of the pickle (file_size unless gzip'd) */
    bool compressed;      /* the file was gzip'd (read through a temporary copy) */

    /* Grouped by device (ascending), file order within a device, which is address order
     * in every real file. */
    const struct gm_snapshot_segment *segments;
    size_t n_segments;
    size_t n_blocks; /* over all segments */

    /* Devices named by the file: every index of device_traces plus every segment device,
     * ascending. */
    const struct gm_snapshot_device *devices;
    size_t n_devices;
    size_t n_events; /* over all devices */

    const struct gm_snapshot_frame *frames;
    size_t n_frames;
    /* Per frame id, the stack of its 'fx_original_trace' (the model's source stack of the
     * FX node a compiled graph's frame runs, written by _dump_snapshot(
     * augment_with_fx_traces=True)), 0 when it has none; NULL when no frame has one. */
    const uint32_t *frame_fx_origin;
    size_t n_strings; /* distinct texts: the bound of gm_snapshot_frame.filename_id/name_id */
    const struct gm_snapshot_stack *stacks; /* stacks[0] is the empty stack */
    size_t n_stacks;

    const struct gm_snapshot_event_extra *extras; /* event.extra - 1 indexes this */
    size_t n_extras;

    bool has_allocator_settings;
    const struct gm_snapshot_setting *settings;
    size_t n_settings;

    bool has_annotations; /* 'external_annotations' key present (may be empty) */
    const struct gm_snapshot_annotation *annotations;
    size_t n_annotations;

    bool has_time;         /* some event has time_us */
    int64_t time_first_us; /* earliest / latest time_us over all events, when has_time */
    int64_t time_last_us;
    bool has_host_data;    /* host_segments / host_traces present */
    bool trace_overflowed; /* allocator_settings.trace_alloc_overflowed is true */
    size_t n_unknown_actions;

    /* Memory: the bytes this snapshot holds, and the limit that every analysis of it
     * (timeline, analysis, replay, report) stays under together with them, so that a small
     * file describing a huge trace (shared memo references) fails with GM_ERR_LIMIT
     * instead of taking the machine's memory.  From gm_snapshot_opts.memory_limit, else
     * 256 MiB + 4 x the file size; 0: no limit.  A caller may change it. */
    uint64_t memory_bytes;
    uint64_t memory_limit;

    /* Batches of trace entries the flat reader decoded (0 with GM_SNAPSHOT_READER_GENERAL):
     * a diagnostic of how the file was read. */
    uint64_t n_flat_batches;
    bool events_dropped; /* loaded with gm_snapshot_opts.drop_events or timeline_only (and
                          * kept no event): no cursor reads any */
    /* Loaded with gm_snapshot_opts.consume_events, the load's consumers having done on each
     * device trace all that its analysis reads of the events: no cursor reads any device's
     * events (the host trace is kept), gm_snapshot_event_kept() reads the few the load kept
     * aside, and the analyses answer from what the consumers kept. */
    bool events_consumed;

    /* Pinned host memory (torch's CachingHostAllocator: host_segments / host_traces, written
     * with _record_memory_history(record_host=True)), kept apart from the devices: no
     * device's figures ever count it.  host.index is -1 and host.first_segment indexes
     * host_segments; host.has_trace when the file has host_traces. */
    const struct gm_snapshot_segment *host_segments;
    size_t n_host_segments;
    size_t n_host_blocks;
    struct gm_snapshot_device host;

    /* The kind of accelerator the devices are (gm_snapshot_device_kind_of()). */
    enum gm_device_kind device_kind;
};

/* The trace events of action 'a' over every device of 'snap' (their n_actions summed). */
uint64_t gm_snapshot_action_count(const struct gm_snapshot *snap, enum gm_snapshot_action a);

/* Which reader turns the pickle's trace entries into events.  Both give the same
 * snapshot; AUTO reads the usual batches of trace entries with the flat reader (decoded
 * straight from the bytes, pickle.h) and everything else with the general one; GENERAL
 * never uses the flat reader (for tests that hold the two against each other). */
enum gm_snapshot_reader {
    GM_SNAPSHOT_READER_AUTO = 0,
    GM_SNAPSHOT_READER_GENERAL,
};

/* Load options; zero-initialise and set what you need. */
struct gm_snapshot_opts {
    uint64_t memory_limit; /* the snapshot's memory limit (gm_snapshot.memory_limit), bytes;
                            * 0: 256 MiB + 4 x the file size */
    uint32_t max_depth;    /* pickle nesting cap; 0: 1000 */
    /* Called now and then while parsing with bytes read so far and the file size; may be
     * NULL.  Never called for inputs under 16 MiB. */
    void (*progress)(uint64_t done, uint64_t total, void *ctx);
    void *progress_ctx;
    enum gm_snapshot_reader reader;
    /* Keep no events, only what the loader counts and sums from them (n_events,
     * n_actions, the time span): for what needs only the snapshot state (stats, info),
     * in a fraction of the memory.  gm_snapshot.events_dropped is then set, and the
     * timeline and the analyses refuse the snapshot. */
    bool drop_events;
    /* Keep the events only if more than each device's timeline (gm_snapshot_timeline()) is
     * asked of them, as for the peak: the timelines are folded while the file is read and
     * no event is kept; when a fold cannot answer, or a trace holds an out-of-memory event
     * or per-event notes (user_metadata, forward_frames), the input is read again with its
     * events.  Without them gm_snapshot.events_dropped is set, the timeline answers from
     * the folds and what else needs the events refuses the snapshot (as with drop_events,
     * which wins when both are set). */
    bool timeline_only;
    /* Work done on each device trace's events while the file is read (an analysis's first
     * pass: gm_analysis_first_pass_consumer()), kept with the snapshot for that work to take up;
     * NULL: none.  Never changes what the snapshot holds or any result. */
    const struct gm_snapshot_consumer *consumer;
    /* With 'consumer': keep no device trace's events when the consumer and the timeline's
     * fold follow each trace whole while the file is read and the consumer needs nothing of
     * the stored trace afterwards; the load keeps aside each trace's first and last event and
     * its out-of-memory events (gm_snapshot_event_kept()) and sets gm_snapshot.events_consumed.
     * When a trace is not followed whole (a batch too long, memory) or the consumer needs the
     * trace (gm_analysis_first_pass_consumer(): times that go back, annotations, per-event
     * notes), the input is read again with its events, as without this option.  A caller
     * whose later work on such a snapshot needs the events after all (gm_analysis_run()
     * failing on it, gm_analysis_reads_trace()) loads the file again without the option: the
     * results are then those of a load that kept them.  Ignored with drop_events,
     * timeline_only or a memory_limit (a limit fails the same loads with it or without); over
     * the default limit the input is read again with its events, whose failure is told. */
    bool consume_events;
    /* Where the work done on the events while the file is read (the timeline's fold,
     * 'consumer') runs: 0 (auto), on one second thread, beside the reading, when there is a
     * 'consumer' (the fold alone is too little work to gain from it), the process may run
     * on two CPUs or more (its affinity: gm_cpus_usable(); a CPU quota such as
     * `docker --cpus=1` is not seen) and the input is at least 8 MiB of pickle (inflated,
     * for gzip), else on the loading thread; 1, on the loading thread; 2 or more, on one
     * second thread always (never more than one).  The results are the same either way. */
    unsigned threads;
};

/* Load the snapshot pickle at 'path' (mapped, not copied; a gzip'd file is inflated into
 * an unlinked temporary file, at most opts->memory_limit bytes when set, then mapped).  On
 * success *out owns all memory; release it with gm_snapshot_free().  'opts' may be NULL.
 * Errors: GM_ERR_NOENT (no such file, or a directory), GM_ERR_IO (cannot be read, a FIFO or
 * device, changed while read), GM_ERR_FORMAT (malformed pickle or not a snapshot, with
 * the byte offset; JSON, text or other compression named as such), GM_ERR_UNSUPPORTED (an
 * executing opcode such as GLOBAL/REDUCE, named with its offset), GM_ERR_LIMIT (memory or
 * depth cap), GM_ERR_NOMEM. */
enum gm_status gm_snapshot_load(const char *path, const struct gm_snapshot_opts *opts,
                                struct gm_snapshot **out, struct gm_error *err);

/* Whether 'n' first bytes of a file can begin a memory snapshot: a pickle of protocol 2 or
 * later (PROTO), or a gzip member (gm_snapshot_load() inflates it).  What a folder of a job's
 * files holds beside its snapshots (logs, JSON series) is told apart by it. */
bool gm_snapshot_head_plausible(const unsigned char *p, size_t n);

/* Load from the open descriptor 'fd' (borrowed: not closed), named 'name' in messages
 * (NULL: "standard input"): a regular file is mapped, anything else (a pipe, a socket) is
 * copied into an unlinked temporary file first, as a gzip'd input is inflated into one
 * (gm_snapshot_load() reads gzip'd files the same way).  The same errors as
 * gm_snapshot_load(), and bytes that are no pickle (JSON, text, a zip archive, other
 * compression) are GM_ERR_FORMAT naming what they are. */
enum gm_status gm_snapshot_load_fd(int fd, const char *name, const struct gm_snapshot_opts *opts,
                                   struct gm_snapshot **out, struct gm_error *err);

/* The same for 'len' bytes at 'data' (borrowed only during the call). */
enum gm_status gm_snapshot_load_mem(const void *data, size_t len,
                                    const struct gm_snapshot_opts *opts, struct gm_snapshot **out,
                                    struct gm_error *err);

/* Release a snapshot and everything reachable from it; NULL is a no-op. */
void gm_snapshot_free(struct gm_snapshot *snap);

/* What loading a snapshot file of 'file_bytes' and analysing it typically holds, for a
 * caller that reads several files at once within a memory budget: half the file plus
 * 64 MiB (the loaded snapshot about a fifth of its file, an analysis a third more, on
 * training traces: docs/snapshot.md).  An estimate, not a bound: the bound is the
 * snapshot's memory_limit. */
uint64_t gm_snapshot_memory_estimate(uint64_t file_bytes);

/* The extra fields of event 'e', or NULL when it has none. Borrowed. */
const struct gm_snapshot_event_extra *gm_snapshot_event_extra_of(const struct gm_snapshot *snap,
                                                                 const struct gm_snapshot_event *e);

/* The raw cudaStream_t value of the events whose extra fields are 'extra'
 * (gm_snapshot_event.extra; 0: the default stream). */
static inline uint64_t gm_snapshot_extra_stream(const struct gm_snapshot *snap, uint64_t extra)
{
    return extra && extra <= snap->n_extras ? snap->extras[extra - 1].stream : 0;
}

/* The raw cudaStream_t value of event 'e' (0: the default stream). */
static inline uint64_t gm_snapshot_event_stream(const struct gm_snapshot *snap,
                                                const struct gm_snapshot_event *e)
{
    return gm_snapshot_extra_stream(snap, e->extra);
}

/* The device with CUDA index 'index', or NULL. Borrowed. */
const struct gm_snapshot_device *gm_snapshot_device_by_index(const struct gm_snapshot *snap,
                                                             int32_t index);

/* ---- stats: the segment/block state at snapshot time ---- */

/* Figures over a set of segments (a device, or one pool of a device). */
struct gm_snapshot_figures {
    uint64_t reserved_bytes;      /* sum of segment total_size */
    uint64_t allocated_bytes;     /* sum of size of active_allocated blocks */
    uint64_t active_bytes;        /* allocated + active_pending_free blocks */
    uint64_t requested_bytes;     /* sum of requested_size of active_allocated blocks */
    uint64_t internal_free_bytes; /* allocated - requested: rounding and split waste */
    uint64_t external_free_bytes; /* sum of inactive blocks */
    uint64_t largest_free_block_bytes;
    uint64_t n_segments;
    uint64_t n_blocks;
    uint64_t n_active_blocks; /* active_allocated */
    uint64_t n_pending_free_blocks;
    uint64_t n_inactive_blocks;
};

/* Segment size histogram bucket: segments with lo <= total_size < hi (powers of two). */
struct gm_snapshot_hist_bucket {
    uint64_t lo; /* bytes, inclusive */
    uint64_t hi; /* bytes, exclusive */
    uint64_t n_segments;
    uint64_t bytes;
};

struct gm_snapshot_pool_stats {
    bool is_small;      /* small (<= 1 MiB) or large pool */
    int64_t pool_id[2]; /* (0,0) default; other: private pool / CUDA graph / MemPool */
    bool is_expandable; /* all its segments are expandable */
    struct gm_snapshot_figures fig;
};

struct gm_snapshot_device_stats {
    int32_t device;
    struct gm_snapshot_figures fig;
    struct gm_snapshot_pool_stats *pools; /* ordered: default large, default small, others */
    size_t n_pools;
    struct gm_snapshot_hist_bucket *hist; /* non-empty buckets, ascending */
    size_t n_hist;
};

struct gm_snapshot_stats {
    struct gm_snapshot_device_stats *devices; /* one per gm_snapshot.devices entry */
    size_t n_devices;
    /* Pinned host memory (gm_snapshot.host_segments), apart from every device: when the
     * file has host_segments. */
    bool has_host;
    struct gm_snapshot_figures host;
};

/* The figures of device 'device''s segments in private pools (segment_pool_id other than
 * (0, 0): a CUDA graph's pool, a torch.cuda.MemPool) into *out; false when it has none. */
bool gm_snapshot_private_pool_figures(const struct gm_snapshot *snap, int32_t device,
                                      struct gm_snapshot_figures *out);

/* The figures of the pinned host memory (gm_snapshot.host_segments) into *out. */
void gm_snapshot_host_figures(const struct gm_snapshot *snap, struct gm_snapshot_figures *out);

/* Compute the stats of every device.  On success 'out' is owned by the caller: release it
 * with gm_snapshot_stats_release().  Errors: GM_ERR_NOMEM. */
enum gm_status gm_snapshot_stats(const struct gm_snapshot *snap, struct gm_snapshot_stats *out,
                                 struct gm_error *err);
void gm_snapshot_stats_release(struct gm_snapshot_stats *st);

/* ---- timeline: memory over the trace (memory_viz "Active Memory Timeline") ----
 *
 * Allocated bytes follow memory_viz: an allocation lives from its 'alloc' event to the
 * matching 'free_completed' (same address); sizes are the trace's (requested) bytes.
 * Alive from the start are (a) 'free_completed' events whose address had no earlier alloc,
 * at their size, and (b) blocks 'active_allocated' at snapshot time whose address has no
 * alloc still pending at the end of the trace, at their requested_size.  A second alloc at
 * an address with a pending alloc replaces the pending one in the address map (the first
 * stays alive to the end), as memory_viz does.
 *
 * Reserved bytes are replayed backwards from the snapshot's segments: reserved at the end
 * of the trace is the sum of the device's segment total_size, and each segment_alloc /
 * segment_map adds its size, each segment_free / segment_unmap subtracts it (clamped at
 * 0 when a file is inconsistent). */

/* One allocation alive at the peak. */
struct gm_snapshot_live {
    uint64_t addr;
    uint64_t bytes; /* trace (requested) bytes */
    uint64_t stream;
    uint32_t stack;      /* stack id */
    int64_t alloc_event; /* index of its alloc event in the device trace; -1: from the start */
};

struct gm_snapshot_timeline {
    int32_t device;
    uint64_t initial_bytes;   /* allocated bytes alive from the start */
    uint64_t peak_bytes;      /* the most allocated bytes after any event (or at the start) */
    int64_t peak_event_index; /* event after which the peak first holds; -1: initial */
    bool peak_time_valid;
    int64_t peak_time_us; /* time_us of that event, when valid */
    uint64_t reserved_at_peak_bytes;
    uint64_t initial_reserved_bytes; /* reserved bytes before the first event */
    uint64_t peak_reserved_bytes;    /* the most reserved bytes */
    int64_t peak_reserved_event_index;
    uint64_t final_bytes;          /* allocated bytes after the last event */
    struct gm_snapshot_live *live; /* with GM_TIMELINE_LIVE: alive at the peak, largest first,
                                    * then by address; else NULL */
    size_t n_live;
    uint64_t n_allocs_matched;   /* alloc events that met their free_completed */
    uint64_t reserved_start_raw; /* initial reserved bytes, unclamped (gm_snapshot_reserved_step) */
    size_t pending_max_;         /* private: the most allocations pending at one time */
};

/* Reserved bytes replayed forward: '*raw' starts at a timeline's reserved_start_raw and
 * follows each event (segment_alloc/map add their size, segment_free/unmap subtract it,
 * modulo 2^64); returns the reserved bytes after 'e', clamped at 0 when a file is
 * inconsistent. */
static inline uint64_t gm_snapshot_reserved_step(uint64_t *raw, const struct gm_snapshot_event *e)
{
    if (e->action == GM_ACTION_SEGMENT_ALLOC || e->action == GM_ACTION_SEGMENT_MAP)
        *raw += e->size;
    else if (e->action == GM_ACTION_SEGMENT_FREE || e->action == GM_ACTION_SEGMENT_UNMAP)
        *raw -= e->size;
    return *raw > (uint64_t)INT64_MAX ? 0 : *raw;
}

enum gm_timeline_flags {
    GM_TIMELINE_LIVE = 1 << 0, /* also list the allocations alive at the peak (one more pass) */
};

/* The timeline of device 'index': one or two passes over its trace with an address map of
 * the allocations pending a free, no per-event or per-allocation array.  'flags': enum
 * gm_timeline_flags.  On success 'out' is owned by the caller:
 * gm_snapshot_timeline_release().  A device with no trace has only the snapshot state.
 * Errors: GM_ERR_INVALID (no such device), GM_ERR_NOMEM, GM_ERR_LIMIT (the snapshot's
 * memory limit). */
enum gm_status gm_snapshot_timeline(const struct gm_snapshot *snap, int32_t index, unsigned flags,
                                    struct gm_snapshot_timeline *out, struct gm_error *err);
void gm_snapshot_timeline_release(struct gm_snapshot_timeline *tl);

/* The allocated and reserved bytes after each event of a device, in order: the timeline's
 * points, replayed with the address map instead of kept in arrays.
 *
 *   struct gm_snapshot_walk w;
 *   if (gm_snapshot_walk_init(&w, snap, dev, &tl, &err) != GM_OK) ...;
 *   while ((e = gm_snapshot_walk_next(&w)) != NULL)
 *       ... after event w.cur.index: w.allocated, w.reserved ...
 *   gm_snapshot_walk_release(&w);
 *
 * Before the first gm_snapshot_walk_next() allocated and reserved hold the initial state.
 * 'tl' is this device's timeline (its initial figures are used; it may be released after
 * the call).  Errors (of the init only; gm_snapshot_walk_next() cannot fail): GM_ERR_NOMEM,
 * GM_ERR_LIMIT. */
struct gm_snapshot_walk {
    struct gm_snapshot_cursor cur;
    uint64_t allocated; /* bytes after the event last returned */
    uint64_t reserved;
    /* private */
    uint64_t res_;
    void *map_;
};

enum gm_status gm_snapshot_walk_init(struct gm_snapshot_walk *w, const struct gm_snapshot *snap,
                                     const struct gm_snapshot_device *dev,
                                     const struct gm_snapshot_timeline *tl, struct gm_error *err);
const struct gm_snapshot_event *gm_snapshot_walk_next(struct gm_snapshot_walk *w);
void gm_snapshot_walk_release(struct gm_snapshot_walk *w);

/* ---- user phases: gpumem.torch.record()'s phase() marks ----
 *
 * Each phase() of gpumem.torch.record() is a record_function range "gpumem.phase:<name>",
 * kept by PyTorch (2.4+) as START and END entries of external_annotations, per device, by
 * time.  A START opens a range of its name and the next END of that name closes it; one
 * never closed lasts to the end (the snapshot was dumped inside it, as at an OOM). */
#define GM_USER_PHASE_PREFIX "gpumem.phase:"

struct gm_snapshot_user_range {
    const char *name; /* <name> (borrowed from the snapshot) */
    int64_t start_us;
    int64_t end_us; /* INT64_MAX: never closed */
};

/* The user ranges of device 'device', sorted by start (an outer range before those inside
 * it) into *out (gm_free(), the caller's; NULL with *n_out 0 when there are none).  Errors:
 * GM_ERR_NOMEM. */
enum gm_status gm_snapshot_user_ranges(const struct gm_snapshot *snap, int32_t device,
                                       struct gm_snapshot_user_range **out, size_t *n_out,
                                       struct gm_error *err);

/* The record_function ranges of device 'device' whose names begin with 'prefix' (NULL or
 * "": every range), paired START to END as the user ranges are, the prefix cut from each
 * name; sorted and owned as gm_snapshot_user_ranges() says.  Errors: GM_ERR_NOMEM. */
enum gm_status gm_snapshot_annotation_ranges(const struct gm_snapshot *snap, int32_t device,
                                             const char *prefix,
                                             struct gm_snapshot_user_range **out, size_t *n_out,
                                             struct gm_error *err);

/* The name of the innermost user range open at 'time_us', or NULL. */
const char *gm_snapshot_user_phase_at(const struct gm_snapshot_user_range *r, size_t n,
                                      int64_t time_us);

/* An out-of-memory event of a trace. */
struct gm_snapshot_oom {
    size_t event;         /* index in the device trace */
    uint64_t requested;   /* bytes the failed allocation asked for */
    uint64_t device_free; /* bytes CUDA reported free */
    uint64_t stream;
};

/* The first oom event of 'dev' into *out (one pass, stopping at it); false when the trace
 * has none, or when the snapshot was loaded without its events (dev->n_actions[GM_ACTION_OOM]
 * still counts them then). */
bool gm_snapshot_first_oom(const struct gm_snapshot *snap, const struct gm_snapshot_device *dev,
                           struct gm_snapshot_oom *out);

/* Group live allocations by stack: one group per distinct stack, summed bytes and count,
 * largest first. */
struct gm_snapshot_live_group {
    uint32_t stack;
    uint64_t bytes;
    uint64_t count;
};

/* Group tl->live by stack into a caller-owned array (*out, released with gm_free from
 * arena.h); *n_out groups. Errors: GM_ERR_NOMEM. */
enum gm_status gm_snapshot_group_live(const struct gm_snapshot_timeline *tl,
                                      struct gm_snapshot_live_group **out, size_t *n_out,
                                      struct gm_error *err);

/* ---- frames: whose code allocated, and how a stack is shown ----
 *
 * The one rule that names "the user frame" everywhere (peak, leaks, diff, the analysis,
 * the report): a frame is the user's when it is a Python frame, not noise, of the
 * program's own code: not in the torch package ('/torch/' in its path), not in an
 * installed package (site-packages, dist-packages), not the Python standard library
 * (.../lib/python3.X/..., ...\Lib\...), not a frozen or generated module ('<frozen ...>').
 * Paths are compared with '/' and '\\' alike. */
bool gm_snapshot_frame_is_user(const struct gm_snapshot_frame *f);
/* The part of that rule that looks at the file name alone. */
bool gm_snapshot_file_is_user(const char *filename);

/* How a frame reads on a terminal: "name (file:line)", or the name alone for a frame with
 * no file (C++), escaped (gm_text_escape()) into buf[n].  Returns 'buf'. */
char *gm_snapshot_frame_text(char *buf, size_t n, const struct gm_snapshot_frame *f);

/* Index in stacks[stack].frames of its first user frame (innermost first), or of its first
 * non-noise frame when it has none; -1 for an empty stack. */
long gm_snapshot_stack_user_frame(const struct gm_snapshot *snap, uint32_t stack);

/* The stack that names the user's code for event 'e': the forward-pass stack of its
 * 'forward_frames' (gm_snapshot_event_extra.forward_stack) when that has a user frame,
 * since an allocation of the backward pass is the autograd node of that forward line;
 * else the source stack of the innermost frame of e->stack that runs an FX node of a
 * compiled graph (gm_snapshot.frame_fx_origin) when that has a user frame, since the
 * compiled graph's generated code is not the user's; else e->stack.  Every listing that
 * picks an event's user frame goes through it. */
uint32_t gm_snapshot_event_user_stack(const struct gm_snapshot *snap,
                                      const struct gm_snapshot_event *e);

/* The frames worth listing for 'stack': its Python frames when it has any (the C++ frames
 * under them are the interpreter and the operator machinery), else its frames that are
 * not noise.  Writes up to 'cap' frame ids into 'ids' and returns how many the stack has
 * (may exceed cap). */
size_t gm_snapshot_stack_frames(const struct gm_snapshot *snap, uint32_t stack, uint32_t *ids,
                                size_t cap);

/* A stack shown folded, as every command shows one: the first frame (the user frame, or
 * the first non-noise frame when there is none; for a C++-only stack the ATen operator),
 * the user frames that called it (outwards), the innermost frame when the user's line
 * called into a library ("via": torch.nn.functional.cross_entropy, adamw.py:120), and how
 * many frames are folded away (torch internals, C++, library code).  Indexes are into
 * stacks[stack].frames, -1 when absent. */
#define GM_SNAPSHOT_VIEW_CALLERS 8
struct gm_snapshot_stack_view {
    long first;         /* -1: an empty stack */
    bool first_is_user; /* gm_snapshot_frame_is_user() of 'first' */
    long via;
    long callers[GM_SNAPSHOT_VIEW_CALLERS]; /* innermost first */
    size_t n_callers;
    uint32_t n_folded; /* non-noise frames not shown */
};
void gm_snapshot_stack_view(const struct gm_snapshot *snap, uint32_t stack,
                            struct gm_snapshot_stack_view *out);

/* A stack of some snapshot (stacks shown together may come from two files: diff). */
struct gm_snapshot_stack_ref {
    const struct gm_snapshot *snap;
    uint32_t stack;
};

/* For n stacks listed together: stacks that show alike folded with up to 'callers' callers
 * (the same first and via frames and callers, compared by filename, line and name; a one-line
 * listing shows 0 callers) are told apart by a frame of their own.  apart[i] gets the index
 * in refs[i]'s stack of the first frame, innermost first, in which it differs from the stack
 * that shows like it and shares the most frames with it, or -1 when no other stack shows
 * like it.  One cross_entropy line called from train_step and from evaluate parts at the
 * caller of the model. */
void gm_snapshot_stacks_apart(const struct gm_snapshot_stack_ref *refs, size_t n, size_t callers,
                              long *apart);

/* The stacks the file records: interned stacks less the empty stack (id 0). */
size_t gm_snapshot_unique_stacks(const struct gm_snapshot *snap);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
