/* SPDX-License-Identifier: MIT */
/* load_int.h - the snapshot loader's state, shared by its files (library-internal):
 *
 *   schema.c    the words of the schema (keys and values with a meaning) and typed fields
 *   intern.c    strings, frames, stacks and the per-event extras, each interned once
 *   segments.c  segments and blocks, allocator settings, annotations
 *   trace.c     trace entries: the records of device_traces, streamed while parsing
 *   load.c      the file, the parse, the top level, the checks, the public entry points
 *
 * The loader reads the pickle's graph through pickle.h's accessors only; device traces
 * arrive as records (pickle.h, "streaming records") and become packed events (events.c). */
#ifndef GM_SNAPSHOT_LOAD_INT_H
#define GM_SNAPSHOT_LOAD_INT_H

#include "snapshot/snapshot_int.h"

#include "base/vec.h"

#include "gpumem/arena.h"
#include "pickle/pickle.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MAX_DEVICES 4096

/* The snapshot and what it owns. */
struct snap_impl {
    struct gm_snapshot pub;
    struct gm_arena arena;
    struct ev_writer *traces; /* the packed traces the devices point to */
    size_t n_traces;
    uint64_t *size_sums;    /* per device: the sizes of all its events summed (check_sizes) */
    uint64_t host_size_sum; /* the same for the host trace */
    /* what the consumers of the load's traces hold together (snap_consumer_ops.open()) */
    struct gm_budget consumers;
};

/* ---- input.c: what a snapshot is read from ---- */

/* The bytes of a pickle, ready to be mapped: a regular file's own, or a spool (an unlinked
 * temporary file) that a gzip'd file was inflated into or a pipe copied into. */
struct snap_input {
    int fd;             /* what to map: the file's descriptor, or the spool's */
    int spool;          /* the spool's descriptor (closed by snap_input_close()), or -1 */
    uint64_t len;       /* bytes of pickle */
    uint64_t file_size; /* bytes of the input itself (compressed ones for gzip) */
    bool gzip;
};

/* The most a spool holds when the caller gives no memory limit (bytes). */
#define GM_SNAPSHOT_SPOOL_MAX ((uint64_t)16 << 30)

/* Make 'fd' (named 'name' in messages; a regular file or a stream: pipe, socket, terminal)
 * ready to map: gzip is inflated and a stream copied into a spool of at most 'cap' bytes
 * (UINT64_MAX: GM_SNAPSHOT_SPOOL_MAX or 90% of the space left under the spool, whichever
 * is less; GM_ERR_LIMIT past it), its first bytes checked as they arrive.  A directory is
 * GM_ERR_NOENT, a zip archive or other compression GM_ERR_FORMAT naming it (snap_input_sniff()), a
 * compressed file that ends before the size it had when opened GM_ERR_IO "the file changed while
 * being read". */
enum gm_status snap_input_open(int fd, const char *name, uint64_t cap, struct snap_input *in,
                               struct gm_error *err);

/* GM_OK when the first bytes p[0..n) may be a pickle, else GM_ERR_FORMAT naming the
 * format their magic bytes say (zip, bzip2, xz, zstd; 'compressed': found inside a gzip
 * file). */
enum gm_status snap_input_sniff(const unsigned char *p, size_t n, const char *name, bool compressed,
                                struct gm_error *err);

/* After the pickle reader failed with GM_ERR_FORMAT on bytes starting p[0..n): when they
 * are text, 'err' is replaced by one naming them (a JSON document, a text file) instead of
 * the opcode the reader met; returns the error's code.  (Text that the reader refused for
 * a reason of its own, such as a protocol-0 GLOBAL, keeps that reason: only FORMAT errors
 * come here.) */
enum gm_status snap_input_explain(const unsigned char *p, size_t n, const char *name,
                                  bool compressed, struct gm_error *err);

void snap_input_close(struct snap_input *in);

/* The most a spool on 'fd' may hold when the caller gave 'cap' (UINT64_MAX: none): the cap,
 * or GM_SNAPSHOT_SPOOL_MAX and 90% of what the filesystem under 'fd' has left, whichever is
 * less. */
uint64_t snap_spool_bound(int fd, uint64_t cap);

/* ---- schema.c: every string the schema gives meaning to ---- */
enum word {
    W_UNKNOWN = 0,
    /* keys */
    W_SEGMENTS,
    W_DEVICE_TRACES,
    W_ALLOCATOR_SETTINGS,
    W_EXTERNAL_ANNOTATIONS,
    W_HOST_SEGMENTS,
    W_HOST_TRACES,
    W_DEVICE,
    W_ADDRESS,
    W_TOTAL_SIZE,
    W_ALLOCATED_SIZE,
    W_ACTIVE_SIZE,
    W_REQUESTED_SIZE,
    W_STREAM,
    W_SEGMENT_TYPE,
    W_SEGMENT_POOL_ID,
    W_IS_EXPANDABLE,
    W_FRAMES,
    W_BLOCKS,
    W_SIZE,
    W_STATE,
    W_HISTORY,
    W_USER_METADATA,
    W_ADDR,
    W_REAL_SIZE,
    W_ACTION,
    W_DEVICE_FREE,
    W_TIME_US,
    W_COMPILE_CONTEXT,
    W_POOL_ID,
    W_FORWARD_FRAMES,
    W_INTERNAL_METADATA,
    W_FX_ORIGINAL_TRACE,
    W_FILENAME,
    W_LINE,
    W_NAME,
    W_STAGE,
    W_GRAPH_CAPTURE_RSR,
    W_TRACE_OVERFLOWED,
    W_PYTORCH_CUDA_ALLOC_CONF,
    W_PYTORCH_ALLOC_CONF,
    W_RELEASE_LOCK_ON_CUDAMALLOC,
    W_PINNED_USE_CUDA_HOST_REGISTER,
    /* actions */
    W_A_ALLOC,
    W_A_FREE_REQUESTED,
    W_A_FREE_COMPLETED,
    W_A_SEGMENT_ALLOC,
    W_A_SEGMENT_FREE,
    W_A_SEGMENT_MAP,
    W_A_SEGMENT_UNMAP,
    W_A_SNAPSHOT,
    W_A_OOM,
    /* values */
    W_ACTIVE_ALLOCATED,
    W_ACTIVE_PENDING_FREE,
    W_INACTIVE,
    W_SMALL,
    W_LARGE,
    W_COUNT
};

extern const char *const snap_word_text[W_COUNT];

/* A direct-mapped cache in front of a map: most look-ups repeat the last few keys. */
#define DM_BITS 12
struct dm_entry {
    uint64_t key; /* 0: empty */
    uint32_t val;
};

/* Hash keys are never 0, the empty entry's key. */
static inline uint64_t dm_key(uint64_t h)
{
    return h ? h : 1;
}

static inline size_t dm_slot(uint64_t key)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> (64 - DM_BITS));
}

/* ---- intern.c ---- */

#define LONG_STR 64 /* bytes: a longer string is remembered by value in a map */

/* A frames list remembered by its items: the frame dict objects (see snap_intern_stack). */
struct sig {
    uint32_t off; /* into sig_pool */
    uint32_t n;
    uint32_t stack;
};

struct stack_rec {
    uint32_t off; /* into the frame-id pool */
    uint32_t n;
};

/* Strings, frames, stacks and extras, each interned once: looked up first by the pickle
 * object (memo sharing makes most look-ups hit there), then by content (for writers that
 * share nothing, like 2.0). */
struct interner {
    struct dm_entry str_by_val[1 << DM_BITS]; /* string value -> index in strs */
    struct dm_entry sig_dm[1 << DM_BITS];     /* frame-objects hash -> index in sigs */
    struct dm_entry content_dm[1 << DM_BITS]; /* string content hash -> index in strs */
    struct dm_entry extra_dm[1 << DM_BITS];   /* extra hash -> extra id */

    struct gm_map str_by_content; /* content hash -> index in strs */
    struct gm_map long_by_val;    /* string value of more than LONG_STR bytes -> index in strs */
    struct gm_map short_by_val;   /* frame text over GM_SNAPSHOT_TEXT_MAX -> its shortened copy */
    const char **strs;
    size_t *str_lens;
    uint8_t *str_kinds; /* per string: what it says as a frame's file or function (STR_*) */
    size_t n_strs, cap_strs;
    uint32_t last_str; /* index in strs of the last string interned from a value */
    bool last_str_ok;

    struct gm_map frame_by_node, frame_by_content;
    struct gm_snapshot_frame *frames;
    size_t n_frames, cap_frames;
    uint32_t *fx_origin; /* per frame id below n_fx_origin: the stack of its fx_original_trace */
    size_t n_fx_origin, cap_fx_origin;

    struct gm_map stack_by_content;
    struct gm_map sig_map; /* frame-objects hash -> index in sigs */
    struct sig *sigs;
    size_t n_sigs, cap_sigs;
    pk_val *sig_pool;
    size_t n_sig_pool, cap_sig_pool;
    struct stack_rec *stacks;
    size_t n_stacks, cap_stacks;
    uint32_t *pool;
    size_t n_pool, cap_pool;
    uint32_t *tmp;
    size_t cap_tmp;

    struct gm_map extra_by_content;
    struct gm_snapshot_event_extra *extras;
    size_t n_extras, cap_extras;
    uint32_t last_extra; /* id + 1 of the last interned extra, 0 none */

    size_t heap_bytes; /* what the arrays and maps above hold, counted in builder.held */
};

/* ---- trace.c ---- */

/* One device trace, streamed while parsing. */
struct stream {
    struct ev_writer w;  /* its committed events, and the 'flushed' ones of the open batch */
    struct ev_mark mark; /* where the open batch starts in w, when some of it is flushed */
    size_t unknown;
    size_t prov, flushed, prov_unknown; /* events of the open batch, not committed yet */
    struct ev_sums sums, prov_sums;
    /* the open batch's last 'prov' events, written to w, summed and folded once the batch
     * is committed */
    struct gm_snapshot_event *prov_ev;
    size_t cap_prov_ev;
    size_t room_end;                    /* w takes events up to this count without growing */
    void *consumer[SNAP_MAX_CONSUMERS]; /* per builder.consumers[]: its state, or NULL */
    struct snap_side side;              /* consume_events: the events kept aside (side.c) */
    bool abandoned; /* the loader's own: its consumers abandoned, no more jobs (pipe.c) */
    bool taken;     /* its events moved to the snapshot (build()) */
};

#define FLAT_ACT_BITS 3

/* The state of the trace-entry readers: the general one reads any entry field by field;
 * the straight-line one (flat_event()) the usual entry whose keys are those of the one
 * before, with values of the usual types. */
struct trace_reader {
    struct stream *streams[MAX_DEVICES]; /* by device index, made at its first record */
    /* the key sequence of the last trace entry: entries repeat it, with memoized keys */
    pk_val shape_keys[16];
    uint8_t shape_words[16];
    uint32_t shape_n;
    bool shape_canon;    /* shape_words is a subsequence of canon_words[], each once */
    int8_t shape_pos[8]; /* per canon_words[] entry: its index in the shape, or -1 */
    bool shape_usual;    /* shape_pos is usual_pos[] (trace.c): the usual writer's keys */
    /* flat_event(): shape_* describe the keys of the record before, which read_event()
     * read in the canonical order */
    bool flat_shape;
    const char *flat_cc; /* the compile_context string last seen, and its bytes */
    const char *flat_cc_p;
    size_t flat_cc_n;
    uint64_t flat_cc_word;                   /* pk_short_str_word() of the last one, 0: none */
    pk_val flat_act_val[1 << FLAT_ACT_BITS]; /* action values and their actions, by value */
    uint8_t flat_act[1 << FLAT_ACT_BITS];
    uint64_t flat_x_stream; /* the extra of the last entry (stream, compile_context) */
    const char *flat_x_cc;
    uint32_t flat_x_id; /* 0: none yet */
};

struct builder {
    const struct pk_doc *doc;
    struct snap_impl *impl;
    struct gm_arena *arena;
    struct gm_error *err;
    size_t ev_bytes; /* held by the packed traces, counted against the arena's cap */
    size_t *held;    /* bytes the whole load holds under the cap: the arena's, the parse's,
                        the traces' and the interner's (gm_arena_share()) */
    struct dm_entry words[1 << DM_BITS]; /* string value -> enum word */
    struct interner in;
    struct trace_reader tr;
    struct gm_snapshot_consumer consumers[SNAP_MAX_CONSUMERS]; /* of every device trace */
    size_t n_consumers;
    struct snap_pipe *pipe; /* the consumers' worker thread (pipe.c), or NULL: inline */
    bool drop_events;       /* gm_snapshot_opts.drop_events, or timeline_only: keep no event */
    bool fold_only;         /* timeline_only (without drop_events): the device traces are folded */
    bool consume;           /* consume_events (with a consumer, neither of the above): the device
                               traces' events go to the consumers, a few kept aside, none stored */
    bool limit_given;       /* the memory limit is the caller's, not the default */
    /* generation evidence */
    bool any_history, any_block_frames, any_seg_g2, any_time, any_compile_ctx, any_user_meta,
        any_g9, settings_g7, settings_cuda, settings_generic_conf;
};

/* schema.c */
enum word snap_word_of(struct builder *b, pk_val v);
enum gm_status snap_nomem(struct builder *b);
/* Room for 'need' elements of 'elem' bytes in *arr (capacity *cap): the base array's
 * growth (base/vec.h) for the loader's arrays, which it passes by address. */
/* Whether the n bytes at a and b are equal, without a call: for the short strings met on
 * every event (a libc memcmp per event costs more than the bytes it compares). */
static inline bool short_eq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

static inline bool grow_arr(void **arr, size_t *cap, size_t need, size_t elem)
{
    *arr = gm_vec_grow(*arr, cap, need, elem, 0, NULL);
    return need <= *cap;
}
enum gm_status snap_bad_type(struct builder *b, const char *where, size_t i, enum word key,
                             pk_val v, const char *want);
enum gm_status snap_get_u64_slow(struct builder *b, const char *where, size_t i, enum word key,
                                 pk_val v, uint64_t *out);
enum gm_status snap_get_size_slow(struct builder *b, const char *where, size_t i, enum word key,
                                  pk_val v, uint64_t *out);
enum gm_status snap_get_i64_slow(struct builder *b, const char *where, size_t i, enum word key,
                                 pk_val v, int64_t *out);
enum gm_status snap_get_pair(struct builder *b, const char *where, size_t i, enum word key,
                             pk_val v, int64_t out[2]);
const struct pk_node *snap_as_list(pk_val v);

/* An unsigned field (an address, a stream handle): a negative value keeps its two's
 * complement, as the C++ side stores int64 (a stream handle above 2^63 arrives negative
 * from writer C). */
static inline enum gm_status get_u64(struct builder *b, const char *where, size_t i, enum word key,
                                     pk_val v, uint64_t *out)
{
    if (pk_small_u64(v, out))
        return GM_OK;
    return snap_get_u64_slow(b, where, i, key, v, out);
}

/* A size in bytes: never negative. */
static inline enum gm_status get_size(struct builder *b, const char *where, size_t i, enum word key,
                                      pk_val v, uint64_t *out)
{
    if (pk_small_u64(v, out))
        return GM_OK;
    return snap_get_size_slow(b, where, i, key, v, out);
}

static inline enum gm_status get_i64(struct builder *b, const char *where, size_t i, enum word key,
                                     pk_val v, int64_t *out)
{
    if (pk_small_i64(v, out))
        return GM_OK;
    return snap_get_i64_slow(b, where, i, key, v, out);
}

/* intern.c */
void snap_interner_release(struct interner *in);
/* Count what the interner's arrays and maps hold now against the load's memory cap;
 * GM_ERR_LIMIT past it. */
enum gm_status snap_intern_charge(struct builder *b);
enum gm_status snap_intern_bytes(struct builder *b, const char *p, size_t n, const char **out);
enum gm_status snap_intern_str(struct builder *b, pk_val v, const char *what, const char **out);
/* The stack id of frames list 'v' (a list object seen before: by its mark, pk_mark()). */
enum gm_status snap_intern_stack(struct builder *b, pk_val v, uint32_t *out);
/* The stack of a 'forward_frames' list of traceback strings (0 when no line of it names a
 * frame). */
enum gm_status snap_intern_forward_stack(struct builder *b, pk_val v, uint32_t *out);
/* The stack of a transient list already read (a hash of its frame objects), or false. */
bool snap_stack_seen(const struct builder *b, const pk_val *items, uint32_t n, uint32_t *out);
enum gm_status snap_intern_extra(struct builder *b, const struct gm_snapshot_event_extra *x,
                                 uint32_t *out);
/* Move the interned frames, stacks and extras into the snapshot. */
enum gm_status snap_intern_finish(struct builder *b);

/* segments.c */
enum gm_status snap_read_segments(struct builder *b, pk_val segments);
/* 'host_segments' into gm_snapshot.host_segments (file order). */
enum gm_status snap_read_host_segments(struct builder *b, pk_val segments);
enum gm_status snap_read_settings(struct builder *b, pk_val v);
enum gm_status snap_read_annotations(struct builder *b, pk_val v);

/* pipe.c: every call of the consumers (builder.consumers[]) of a load, inline or, from
 * snap_pipe_start() to snap_pipe_end(), in the same order on one worker thread. */
struct snap_pipe;
/* A worker for the load (b->pipe) when 'threads' (gm_snapshot_opts.threads) asks for one
 * or leaves it to the load, of 'len' bytes of pickle, with a consumer besides the fold, and
 * the process may use two CPUs or more (snap_pipe_wanted()); none when there are no consumers, the
 * allocation-failure hook is armed or the thread cannot be made (the consumers then run inline). */
void snap_pipe_start(struct builder *b, unsigned threads, size_t len);
/* The rule of snap_pipe_start(): whether a load of 'len' bytes of pickle with 'threads'
 * (gm_snapshot_opts.threads) gets a worker, when its consumers include more than the
 * timeline's fold ('beyond_fold') and the process may use 'cpus' CPUs. */
bool snap_pipe_wanted(unsigned threads, size_t len, bool beyond_fold, unsigned cpus);
/* Open the consumers of new stream 'str', device 'index' (stream.consumer[]). */
void snap_pipe_open(struct builder *b, struct stream *str, uint32_t index);
/* The committed batch str->prov_ev[0..prov) to every consumer of 'str' in order, and to
 * the events it keeps aside ('ooms': the batch holds out-of-memory events).  With a worker
 * the buffer goes with the job and str->prov_ev is another (contents undefined). */
void snap_pipe_events(struct builder *b, struct stream *str, bool ooms);
/* No more events for the consumers of 'str' (a batch written out before its end). */
void snap_pipe_abandon(struct builder *b, struct stream *str);
/* Every job done and the worker gone (none: nothing to do); before anything reads a
 * consumer's state or the streams are released.  Again: nothing. */
void snap_pipe_end(struct builder *b);

/* trace.c */
extern const struct pk_stream snap_trace_stream_ops;
void snap_ev_sums_add(struct ev_sums *s, const struct gm_snapshot_event *e);
void snap_ev_sums_merge(struct ev_sums *s, const struct ev_sums *o);
/* The consumers of every device trace's events: the timeline's fold where the load keeps
 * the events or folds them (timeline_only), then 'caller' (NULL: none). */
void snap_trace_consumers_init(struct builder *b, const struct gm_snapshot_consumer *caller);
void snap_trace_reader_release(struct trace_reader *tr);
/* The events of device_traces[i], list 'v' (streamed or not), into trace 'w'. */
enum gm_status snap_read_trace(struct builder *b, int32_t i, pk_val v, struct ev_writer *w,
                               size_t *unknown, struct ev_sums *sums);

#endif
