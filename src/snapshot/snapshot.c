/* SPDX-License-Identifier: MIT */
/* snapshot.c - build a struct gm_snapshot from the pickle graph of a torch CUDA memory
 * snapshot (schema: shared/docs/snapshot-format.md section 2).
 *
 * The top level is a dict {segments, device_traces, allocator_settings,
 * external_annotations, ...} or, for memory_snapshot() and 1.13, a bare list of segments.
 * Only the key names are trusted, never the shape: every value is type-checked, unknown keys
 * are ignored, missing optional keys take the documented defaults.  The walk follows the
 * schema (at most five levels deep), never the graph, so shared or even cyclic references
 * cannot make it recurse.  Frames and stacks are interned through two maps each: one keyed
 * by the pickle object (memo sharing makes most look-ups hit there) and one by content
 * (for writers that share nothing, like 2.0). */
#include "base/big.h"
#include "base/prefault.h"
#include "snapshot/snapshot_int.h"

#include "gpumem/arena.h"
#include "gpumem/units.h"
#include "pickle/pickle.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEVICES 4096

/* The default memory limit: what a real snapshot needs is well below its size (its trace
 * packed, the analyses' arrays); a file that describes far more than that through shared
 * references is refused rather than allowed to take the machine's memory. */
#define DEFAULT_MEMORY_BASE   ((size_t)256 << 20)
#define DEFAULT_MEMORY_FACTOR 4

/* The snapshot and what it owns. */
struct snap_impl {
    struct gm_snapshot pub;
    struct gm_arena arena;
    struct ev_writer *traces; /* the packed traces the devices point to */
    size_t n_traces;
    uint64_t *size_sums; /* per device: the sizes of all its events summed (check_sizes) */
};

/* Every string the schema gives meaning to. */
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
    W_FILENAME,
    W_LINE,
    W_NAME,
    W_STAGE,
    W_GRAPH_CAPTURE_RSR,
    W_TRACE_OVERFLOWED,
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

static const char *const word_text[W_COUNT] = {
    [W_SEGMENTS] = "segments",
    [W_DEVICE_TRACES] = "device_traces",
    [W_ALLOCATOR_SETTINGS] = "allocator_settings",
    [W_EXTERNAL_ANNOTATIONS] = "external_annotations",
    [W_HOST_SEGMENTS] = "host_segments",
    [W_HOST_TRACES] = "host_traces",
    [W_DEVICE] = "device",
    [W_ADDRESS] = "address",
    [W_TOTAL_SIZE] = "total_size",
    [W_ALLOCATED_SIZE] = "allocated_size",
    [W_ACTIVE_SIZE] = "active_size",
    [W_REQUESTED_SIZE] = "requested_size",
    [W_STREAM] = "stream",
    [W_SEGMENT_TYPE] = "segment_type",
    [W_SEGMENT_POOL_ID] = "segment_pool_id",
    [W_IS_EXPANDABLE] = "is_expandable",
    [W_FRAMES] = "frames",
    [W_BLOCKS] = "blocks",
    [W_SIZE] = "size",
    [W_STATE] = "state",
    [W_HISTORY] = "history",
    [W_USER_METADATA] = "user_metadata",
    [W_ADDR] = "addr",
    [W_REAL_SIZE] = "real_size",
    [W_ACTION] = "action",
    [W_DEVICE_FREE] = "device_free",
    [W_TIME_US] = "time_us",
    [W_COMPILE_CONTEXT] = "compile_context",
    [W_POOL_ID] = "pool_id",
    [W_FORWARD_FRAMES] = "forward_frames",
    [W_FILENAME] = "filename",
    [W_LINE] = "line",
    [W_NAME] = "name",
    [W_STAGE] = "stage",
    [W_GRAPH_CAPTURE_RSR] = "graph_capture_record_stream_reuse",
    [W_TRACE_OVERFLOWED] = "trace_alloc_overflowed",
    [W_A_ALLOC] = "alloc",
    [W_A_FREE_REQUESTED] = "free_requested",
    [W_A_FREE_COMPLETED] = "free_completed",
    [W_A_SEGMENT_ALLOC] = "segment_alloc",
    [W_A_SEGMENT_FREE] = "segment_free",
    [W_A_SEGMENT_MAP] = "segment_map",
    [W_A_SEGMENT_UNMAP] = "segment_unmap",
    [W_A_SNAPSHOT] = "snapshot",
    [W_A_OOM] = "oom",
    [W_ACTIVE_ALLOCATED] = "active_allocated",
    [W_ACTIVE_PENDING_FREE] = "active_pending_free",
    [W_INACTIVE] = "inactive",
    [W_SMALL] = "small",
    [W_LARGE] = "large",
};

/* A frames list remembered by its items: the frame dict objects (see intern_stack). */
struct sig {
    uint32_t off; /* into sig_pool */
    uint32_t n;
    uint32_t stack;
};

struct stack_rec {
    uint32_t off; /* into the frame-id pool */
    uint32_t n;
};

/* A direct-mapped cache in front of a map: most look-ups repeat the last few keys. */
#define DM_BITS    12
#define BATCH_BITS 14
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

/* What later checks need from a trace, summed while its events are made (no extra pass
 * over an array of tens of megabytes). */
struct ev_sums {
    int64_t t_min, t_max; /* over the events with a time */
    uint64_t size_sum;    /* sizes of all the events, saturating */
    bool has_time;
};

static inline void ev_sums_add(struct ev_sums *s, const struct gm_snapshot_event *e)
{
    if (e->flags & GM_EVENT_HAS_TIME) {
        if (!s->has_time || e->time_us < s->t_min)
            s->t_min = e->time_us;
        if (!s->has_time || e->time_us > s->t_max)
            s->t_max = e->time_us;
        s->has_time = true;
    }
    s->size_sum = snap_sat_add(s->size_sum, e->size);
}

static void ev_sums_merge(struct ev_sums *s, const struct ev_sums *o)
{
    if (o->has_time) {
        if (!s->has_time || o->t_min < s->t_min)
            s->t_min = o->t_min;
        if (!s->has_time || o->t_max > s->t_max)
            s->t_max = o->t_max;
        s->has_time = true;
    }
    s->size_sum = snap_sat_add(s->size_sum, o->size_sum);
}

/* A device trace list consumed while parsing (see on_append). */
struct stream {
    int32_t device;
    struct ev_writer w;  /* its events; the last 'prov' of them provisional */
    struct ev_mark mark; /* where the provisional events of a flat batch start */
    size_t unknown;
    size_t prov, prov_unknown; /* provisional events of a flat batch (on_flat) */
    struct ev_sums sums, prov_sums;
    bool taken; /* its events moved to the snapshot (build()) */
};

struct builder {
    const struct pk_doc *doc;
    struct snap_impl *impl;
    struct gm_arena *arena;
    struct gm_error *err;
    size_t ev_bytes; /* held by the packed traces, counted against the arena's cap */

    struct dm_entry words[1 << DM_BITS];      /* string value -> enum word */
    struct dm_entry str_by_val[1 << DM_BITS]; /* string value -> index in strs */
    struct dm_entry sig_dm[1 << DM_BITS];     /* frame-objects hash -> index in sigs */
    struct dm_entry list_dm[1 << DM_BITS];    /* frames list object -> stack id */
    struct dm_entry content_dm[1 << DM_BITS]; /* string content hash -> index in strs */
    struct dm_entry extra_dm[1 << DM_BITS];   /* extra hash -> extra id */

    struct stream *streams;
    size_t n_streams, cap_streams;
    struct hmap stream_by_node;

    struct hmap str_by_content; /* content hash -> index in strs */
    const char **strs;
    size_t *str_lens;
    size_t n_strs, cap_strs;

    struct hmap frame_by_node, frame_by_content;
    struct gm_snapshot_frame *frames;
    size_t n_frames, cap_frames;

    struct hmap stack_by_content;
    struct hmap sig_map; /* frame-objects hash -> index in sigs */
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

    struct hmap extra_by_content;
    /* the key sequence of the last trace entry: entries repeat it, with memoized keys */
    pk_val shape_keys[16];
    uint8_t shape_words[16];
    uint32_t shape_n;
    bool shape_canon;    /* shape_words is a subsequence of canon_words[], each once */
    int8_t shape_pos[8]; /* per canon_words[] entry: its index in the shape, or -1 */
    uint32_t last_extra; /* id + 1 of the last interned extra, 0 none */
    /* frames lists read from the trace entries of the current append batch, for
     * list_token(): list object -> stack id, an entry valid when gen is the batch's (see
     * batch_put()) */
    struct batch_list {
        const struct pk_node *list;
        uint32_t stack;
        uint32_t gen;
    } batch[1 << BATCH_BITS];
    uint32_t batch_gen;
    uint32_t batch_n;  /* entries of this batch */
    uint32_t last_str; /* index in strs of the last string interned from a value */
    bool last_str_ok;
    bool in_hook;                    /* read_event runs inside on_append */
    const struct pk_node *flat_list; /* the list of the last on_flat, and its stream */
    uint32_t flat_si;
    uint32_t scratch_tok; /* the stack id read from a transient frames list */
    /* flat_event(): shape_* describe the keys of the last on_flat entry, which read_event()
     * read in the canonical order; and the compile_context string last seen there */
    bool flat_shape;
    const char *flat_cc;
    uint64_t flat_cc_word, flat_cc_mask; /* its SHORT_BINUNICODE opcode, length and bytes */
    pk_val flat_act_val[2];              /* the last two action values and their actions */
    uint8_t flat_act[2];
    uint64_t flat_x_stream; /* the extra of the last entry (stream, compile_context) */
    const char *flat_x_cc;
    uint32_t flat_x_id; /* 0: none yet */
    struct gm_snapshot_event_extra *extras;
    size_t n_extras, cap_extras;

    /* generation evidence */
    bool any_history, any_block_frames, any_seg_g2, any_time, any_compile_ctx, any_user_meta,
        any_g9, settings_g7;
};

/* ---- small helpers ---- */

static bool grow_arr(void **arr, size_t *cap, size_t need, size_t elem)
{
    size_t ncap = *cap ? *cap : 16;
    void *n;
    if (need <= *cap)
        return true;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2 / elem)
            return false;
        ncap *= 2;
    }
    n = gm_realloc(*arr, ncap * elem);
    if (!n)
        return false;
    *arr = n;
    *cap = ncap;
    return true;
}

static enum gm_status nomem(struct builder *b)
{
    if (b->arena->limit_hit)
        return gm_fail(b->err, GM_ERR_LIMIT, GM_NO_OFFSET,
                       "snapshot: memory cap of %zu bytes exceeded", b->arena->cap);
    return gm_fail(b->err, GM_ERR_NOMEM, GM_NO_OFFSET, "snapshot: out of memory");
}

/* Add event 'e' to trace 'w', within the memory cap the events count against with the
 * snapshot's arena. */
static bool append_event(struct builder *b, struct ev_writer *w, const struct gm_snapshot_event *e)
{
    size_t before = ev_writer_capacity(w);
    if (!ev_writer_append(w, e))
        return false;
    b->ev_bytes += ev_writer_capacity(w) - before;
    if (b->arena->cap && b->ev_bytes + b->arena->used > b->arena->cap) {
        b->arena->limit_hit = true;
        return false;
    }
    return true;
}

static enum word word_of(struct builder *b, pk_val v)
{
    uint32_t w;
    const char *p;
    size_t n;
    struct dm_entry *c;
    if (pk_tag(v) != PK_TAG_STR)
        return W_UNKNOWN;
    c = &b->words[dm_slot(v)];
    if (c->key == v)
        return (enum word)c->val;
    w = W_UNKNOWN;
    if (pk_get_str(b->doc, v, &p, &n, NULL)) {
        for (unsigned i = 1; i < W_COUNT; i++) {
            if (strlen(word_text[i]) == n && !memcmp(word_text[i], p, n)) {
                w = i;
                break;
            }
        }
    }
    c->key = v;
    c->val = w;
    return (enum word)w;
}

struct str_eq_ctx {
    struct builder *b;
    const char *p;
    size_t n;
};

static bool str_eq(void *ctx, uint32_t idx)
{
    struct str_eq_ctx *c = ctx;
    return c->b->str_lens[idx] == c->n && !memcmp(c->b->strs[idx], c->p, c->n);
}

/* Intern 'n' bytes at 'p'; *idx is its index in strs. */
static enum gm_status intern_bytes_idx(struct builder *b, const char *p, size_t n, uint32_t *idx)
{
    struct str_eq_ctx c = {b, p, n};
    uint64_t h = dm_key(hmap_hash_bytes(p, n, 0));
    struct dm_entry *dc = &b->content_dm[dm_slot(h)];
    uint32_t i;
    char *s;
    if (dc->key == h && str_eq(&c, dc->val)) {
        *idx = dc->val;
        return GM_OK;
    }
    i = hmap_find(&b->str_by_content, h, str_eq, &c);
    if (i != HMAP_NONE) {
        dc->key = h;
        dc->val = i;
        *idx = i;
        return GM_OK;
    }
    if (b->n_strs >= UINT32_MAX - 1)
        return nomem(b);
    if (b->n_strs == b->cap_strs) {
        size_t cap = b->cap_strs;
        size_t *nl;
        if (!grow_arr((void **)&b->strs, &cap, b->n_strs + 1, sizeof(char *)))
            return nomem(b);
        nl = gm_realloc(b->str_lens, cap * sizeof(size_t));
        if (!nl)
            return nomem(b);
        b->str_lens = nl;
        b->cap_strs = cap;
    }
    s = gm_arena_strndup(b->arena, p, n);
    if (!s)
        return nomem(b);
    b->strs[b->n_strs] = s;
    b->str_lens[b->n_strs] = n;
    if (!hmap_put(&b->str_by_content, h, (uint32_t)b->n_strs))
        return nomem(b);
    *idx = (uint32_t)b->n_strs++;
    return GM_OK;
}

static enum gm_status intern_bytes(struct builder *b, const char *p, size_t n, const char **out)
{
    uint32_t idx;
    enum gm_status st = intern_bytes_idx(b, p, n, &idx);
    if (st == GM_OK)
        *out = b->strs[idx];
    return st;
}

static inline bool short_eq(const char *a, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

/* An interned copy of string value 'v'. */
static enum gm_status intern_str(struct builder *b, pk_val v, const char *what, const char **out)
{
    const char *p;
    size_t n;
    uint32_t idx;
    struct dm_entry *c;
    enum gm_status st;
    /* Unmemoized repeats ("N/A" on every 2.8+ trace entry) equal the last short string:
     * checked first, and not cached by value (that value never comes again). */
    if (b->last_str_ok && pk_short_str(b->doc, v, &p, &n)) {
        /* the common case, without a call: a SHORT_BINUNICODE */
        if (n == b->str_lens[b->last_str] && n <= 16 && short_eq(p, b->strs[b->last_str], n)) {
            *out = b->strs[b->last_str];
            return GM_OK;
        }
    } else if (b->last_str_ok && pk_get_str(b->doc, v, &p, &n, NULL) &&
               n == b->str_lens[b->last_str] && n <= 16 && short_eq(p, b->strs[b->last_str], n)) {
        *out = b->strs[b->last_str];
        return GM_OK;
    }
    c = &b->str_by_val[dm_slot(v)];
    if (c->key == v && pk_tag(v) == PK_TAG_STR) {
        *out = b->strs[c->val];
        return GM_OK;
    }
    if (!pk_get_str(b->doc, v, &p, &n, NULL))
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: '%s' is a %s, expected a str", what, pk_type_name(v));
    if ((st = intern_bytes_idx(b, p, n, &idx)) != GM_OK)
        return st;
    b->last_str = idx;
    b->last_str_ok = true;
    c->key = v;
    c->val = idx;
    *out = b->strs[idx];
    return GM_OK;
}

static enum gm_status bad_type(struct builder *b, const char *where, size_t i, enum word key,
                               pk_val v, const char *want)
{
    return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                   "snapshot: %s %zu: '%s' is a %s, expected %s", where, i, word_text[key],
                   pk_type_name(v), want);
}

static enum gm_status get_u64_slow(struct builder *b, const char *where, size_t i, enum word key,
                                   pk_val v, uint64_t *out)
{
    int64_t s;
    if (pk_get_u64(v, out))
        return GM_OK;
    /* Negative values where the schema has unsigned ones: keep the two's complement, as the
     * C++ side stores int64 (a stream handle above 2^63 arrives negative from writer C). */
    if (pk_get_i64(v, &s)) {
        *out = (uint64_t)s;
        return GM_OK;
    }
    return bad_type(b, where, i, key, v, "an int");
}

static inline enum gm_status get_u64(struct builder *b, const char *where, size_t i, enum word key,
                                     pk_val v, uint64_t *out)
{
    if (pk_tag(v) == PK_TAG_INT && (int64_t)v >= 0) {
        *out = v >> 3;
        return GM_OK;
    }
    return get_u64_slow(b, where, i, key, v, out);
}

static inline enum gm_status get_i64(struct builder *b, const char *where, size_t i, enum word key,
                                     pk_val v, int64_t *out)
{
    if (pk_tag(v) == PK_TAG_INT) {
        *out = (int64_t)v >> 3;
        return GM_OK;
    }
    if (pk_get_i64(v, out))
        return GM_OK;
    return bad_type(b, where, i, key, v, "an int");
}

static enum gm_status get_pair(struct builder *b, const char *where, size_t i, enum word key,
                               pk_val v, int64_t out[2])
{
    const struct pk_node *t = pk_node(v);
    if (!t || (t->kind != PK_TUPLE && t->kind != PK_LIST) || t->len != 2 ||
        !pk_get_i64(t->items[0], &out[0]) || !pk_get_i64(t->items[1], &out[1]))
        return bad_type(b, where, i, key, v, "a pair of ints");
    return GM_OK;
}

static const struct pk_node *as_list(pk_val v)
{
    const struct pk_node *n = pk_node(v);
    return n && (n->kind == PK_LIST || n->kind == PK_TUPLE) ? n : NULL;
}

/* ---- frames and stacks ---- */

static bool has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !memcmp(s + a - b, suf, b);
}

/* memory_viz's noise filter (shared/docs/snapshot-format.md section 2.5). */
static bool frame_is_noise(const char *filename, const char *name)
{
    static const char *const names[] = {"unwind::unwind",    "CapturedTraceback::gather",
                                        "gather_with_cpp",   "_start",
                                        "__libc_start_main", "PyEval_",
                                        "PyObject_",         "PyFunction_"};
    static const char *const files[] = {"core/boxing",
                                        "/Register",
                                        "/Redispatch",
                                        "pythonrun.c",
                                        "Modules/main.c",
                                        "Objects/call.c",
                                        "Objects/methodobject.c",
                                        "pycore_ceval.h",
                                        "ceval.c",
                                        "cpython/abstract.h"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strstr(name, names[i]))
            return true;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        if (strstr(filename, files[i]))
            return true;
    return false;
}

struct frame_eq_ctx {
    struct builder *b;
    const char *filename, *name;
    int64_t line;
};

static bool frame_eq(void *ctx, uint32_t id)
{
    struct frame_eq_ctx *c = ctx;
    const struct gm_snapshot_frame *f = &c->b->frames[id];
    return f->filename == c->filename && f->name == c->name && f->line == c->line;
}

static enum gm_status intern_frame(struct builder *b, pk_val v, uint32_t *out)
{
    const struct pk_node *d = pk_node_of_kind(v, PK_DICT);
    uint32_t id;
    struct frame_eq_ctx c = {b, "", "", 0};
    uint64_t h;
    enum gm_status st;

    if (!d)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: a frame is a %s, expected a dict", pk_type_name(v));
    id = hmap_find(&b->frame_by_node, (uint64_t)(uintptr_t)d, NULL, NULL);
    if (id != HMAP_NONE) {
        *out = id;
        return GM_OK;
    }
    for (uint32_t i = 0; i < d->len; i++) {
        pk_val k = d->items[2 * i], val = d->items[2 * i + 1];
        switch (word_of(b, k)) {
        case W_FILENAME:
            if ((st = intern_str(b, val, "filename", &c.filename)) != GM_OK)
                return st;
            break;
        case W_NAME:
            if ((st = intern_str(b, val, "name", &c.name)) != GM_OK)
                return st;
            break;
        case W_LINE:
            if (!pk_get_i64(val, &c.line))
                return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                               "snapshot: frame 'line' is a %s, expected an int",
                               pk_type_name(val));
            break;
        default:
            break; /* fx_node_* and future fields */
        }
    }
    if (!c.filename[0] && !c.name[0]) {
        /* Interned "" so that every frame's strings compare by pointer. */
        if ((st = intern_bytes(b, "", 0, &c.filename)) != GM_OK)
            return st;
        c.name = c.filename;
    } else {
        if (!c.filename[0] && (st = intern_bytes(b, "", 0, &c.filename)) != GM_OK)
            return st;
        if (!c.name[0] && (st = intern_bytes(b, "", 0, &c.name)) != GM_OK)
            return st;
    }
    h = hmap_mix((uint64_t)(uintptr_t)c.filename * 31 + (uint64_t)(uintptr_t)c.name * 7 +
                 (uint64_t)c.line);
    id = hmap_find(&b->frame_by_content, h, frame_eq, &c);
    if (id == HMAP_NONE) {
        struct gm_snapshot_frame *f;
        if (b->n_frames >= UINT32_MAX - 1 ||
            !grow_arr((void **)&b->frames, &b->cap_frames, b->n_frames + 1, sizeof(*f)))
            return nomem(b);
        f = &b->frames[b->n_frames];
        f->filename = c.filename;
        f->name = c.name;
        f->line = c.line;
        f->is_python = has_suffix(c.filename, ".py");
        f->is_noise = frame_is_noise(c.filename, c.name);
        id = (uint32_t)b->n_frames++;
        if (!hmap_put(&b->frame_by_content, h, id))
            return nomem(b);
    }
    if (!hmap_put(&b->frame_by_node, (uint64_t)(uintptr_t)d, id))
        return nomem(b);
    *out = id;
    return GM_OK;
}

struct stack_eq_ctx {
    struct builder *b;
    size_t n;
};

static bool stack_eq(void *ctx, uint32_t id)
{
    struct stack_eq_ctx *c = ctx;
    const struct stack_rec *s = &c->b->stacks[id];
    return s->n == c->n && !memcmp(c->b->pool + s->off, c->b->tmp, c->n * sizeof(uint32_t));
}

struct sig_eq_ctx {
    struct builder *b;
    const pk_val *items;
    size_t n;
};

/* Whether sigs[idx] holds the n frame objects at items. */
static inline bool sig_same(const struct builder *b, uint32_t idx, const pk_val *items, size_t n)
{
    const struct sig *g = &b->sigs[idx];
    const pk_val *a;
    if (g->n != n)
        return false;
    a = b->sig_pool + g->off;
    for (size_t i = 0; i < n; i++)
        if (a[i] != items[i])
            return false;
    return true;
}

/* The hash of a frames list's items for sig_dm and sig_map (never 0): two rotate-xor chains
 * (a cycle or two per item, where a multiply chain costs four), mixed at the end;
 * sig_same() settles collisions. */
static inline uint64_t items_hash(const pk_val *items, uint32_t n)
{
    uint64_t h0 = (uint64_t)n, h1 = 0x9e3779b97f4a7c15ULL;
    uint32_t i = 0;
    for (; i + 1 < n; i += 2) {
        h0 = ((h0 << 7) | (h0 >> 57)) ^ items[i];
        h1 = ((h1 << 7) | (h1 >> 57)) ^ items[i + 1];
    }
    if (i < n)
        h0 = ((h0 << 7) | (h0 >> 57)) ^ items[i];
    return dm_key(hmap_mix(h0 ^ (h1 * 0xff51afd7ed558ccdULL)));
}

static bool sig_eq(void *ctx, uint32_t idx)
{
    struct sig_eq_ctx *c = ctx;
    return sig_same(c->b, idx, c->items, c->n);
}

/* The stack id of a list of frame dicts.  Frame lists are looked up by their items (the
 * frame dict objects, shared through the memo), not by the list object: writers share
 * either the list or its frames, and lists inside trace entries are recycled while
 * parsing.  Only lists of memo-shared frames are remembered by items; others go through
 * the content maps every time (2.0 files share nothing). */
static enum gm_status intern_stack(struct builder *b, pk_val v, uint32_t *out)
{
    const struct pk_node *l = as_list(v);
    uint32_t id, gi;
    struct stack_eq_ctx c = {b, 0};
    struct sig_eq_ctx sc;
    struct dm_entry *dc, *ldc, scratch_dc;
    uint64_t h, hs;
    bool all_shared = true;
    enum gm_status st;

    if (pk_is_token(v) && pk_token_id(v) < b->n_stacks) {
        /* a frames list read in an earlier trace entry, recycled by the parser */
        *out = pk_token_id(v);
        return GM_OK;
    }
    if (!l)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: 'frames' is a %s, expected a list", pk_type_name(v));
    if (l->len == 0) {
        *out = 0;
        return GM_OK;
    }
    /* A frames list object is recycled by the parser only through list_token(), which
     * clears its entry here, so an address found here is still that list. */
    ldc = &b->list_dm[dm_slot((uint64_t)(uintptr_t)l)];
    if (l->flags & PK_NODE_SCRATCH) {
        ldc = &scratch_dc; /* a transient list: never remembered by its address */
    } else if (ldc->key == (uint64_t)(uintptr_t)l) {
        *out = ldc->val;
        return GM_OK;
    }
    sc.b = b;
    sc.items = l->items;
    sc.n = l->len;
    hs = items_hash(l->items, l->len);
    dc = &b->sig_dm[dm_slot(hs)];
    if (dc->key == hs && sig_same(b, dc->val, l->items, l->len)) {
        *out = b->sigs[dc->val].stack;
        ldc->key = (uint64_t)(uintptr_t)l;
        ldc->val = *out;
        return GM_OK;
    }
    gi = hmap_find(&b->sig_map, hs, sig_eq, &sc);
    if (gi != HMAP_NONE) {
        dc->key = hs;
        dc->val = gi;
        *out = b->sigs[gi].stack;
        ldc->key = (uint64_t)(uintptr_t)l;
        ldc->val = *out;
        return GM_OK;
    }
    if (!grow_arr((void **)&b->tmp, &b->cap_tmp, l->len, sizeof(uint32_t)))
        return nomem(b);
    for (uint32_t i = 0; i < l->len; i++) {
        const struct pk_node *f = pk_node(l->items[i]);
        if ((st = intern_frame(b, l->items[i], &b->tmp[i])) != GM_OK)
            return st;
        if (!f || !(f->flags & PK_NODE_SHARED))
            all_shared = false;
    }
    c.n = l->len;
    h = (uint64_t)c.n * 0x9e3779b97f4a7c15ULL;
    for (size_t i = 0; i < c.n; i++)
        h = hmap_mix(h ^ b->tmp[i]) + i;
    id = hmap_find(&b->stack_by_content, h, stack_eq, &c);
    if (id == HMAP_NONE) {
        if (b->n_pool + c.n > UINT32_MAX || b->n_stacks >= UINT32_MAX - 1 ||
            !grow_arr((void **)&b->pool, &b->cap_pool, b->n_pool + c.n, sizeof(uint32_t)) ||
            !grow_arr((void **)&b->stacks, &b->cap_stacks, b->n_stacks + 1,
                      sizeof(struct stack_rec)))
            return nomem(b);
        memcpy(b->pool + b->n_pool, b->tmp, c.n * sizeof(uint32_t));
        b->stacks[b->n_stacks].off = (uint32_t)b->n_pool;
        b->stacks[b->n_stacks].n = (uint32_t)c.n;
        b->n_pool += c.n;
        id = (uint32_t)b->n_stacks++;
        if (!hmap_put(&b->stack_by_content, h, id))
            return nomem(b);
    }
    if (all_shared) {
        /* remember these frame objects: the next list of the same frames is one look-up */
        if (b->n_sig_pool + c.n > UINT32_MAX || b->n_sigs >= UINT32_MAX - 1 ||
            !grow_arr((void **)&b->sig_pool, &b->cap_sig_pool, b->n_sig_pool + c.n,
                      sizeof(pk_val)) ||
            !grow_arr((void **)&b->sigs, &b->cap_sigs, b->n_sigs + 1, sizeof(struct sig)))
            return nomem(b);
        memcpy(b->sig_pool + b->n_sig_pool, l->items, c.n * sizeof(pk_val));
        b->sigs[b->n_sigs].off = (uint32_t)b->n_sig_pool;
        b->sigs[b->n_sigs].n = (uint32_t)c.n;
        b->sigs[b->n_sigs].stack = id;
        b->n_sig_pool += c.n;
        if (!hmap_put(&b->sig_map, hs, (uint32_t)b->n_sigs))
            return nomem(b);
        dc->key = hs;
        dc->val = (uint32_t)b->n_sigs++;
    }
    ldc->key = (uint64_t)(uintptr_t)l;
    ldc->val = id;
    *out = id;
    return GM_OK;
}

/* ---- segments and blocks ---- */

static enum gm_status read_block(struct builder *b, pk_val v, size_t si, size_t bi,
                                 uint64_t *running, struct gm_snapshot_block *blk)
{
    const struct pk_node *d = pk_node_of_kind(v, PK_DICT);
    bool has_addr = false, has_frames = false;
    pk_val history = PK_HOLE;
    enum gm_status st = GM_OK;
    (void)si;

    if (!d)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: block %zu of segment %zu is a %s, expected a dict", bi, si,
                       pk_type_name(v));
    memset(blk, 0, sizeof(*blk));
    blk->state = GM_BLOCK_UNKNOWN;
    blk->state_name = "";
    for (uint32_t i = 0; i < d->len && st == GM_OK; i++) {
        pk_val k = d->items[2 * i], val = d->items[2 * i + 1];
        enum word w = word_of(b, k);
        switch (w) {
        case W_SIZE:
            st = get_u64(b, "block", bi, w, val, &blk->size);
            break;
        case W_REQUESTED_SIZE:
            st = get_u64(b, "block", bi, w, val, &blk->requested_size);
            blk->has_requested = true;
            break;
        case W_ADDRESS:
            st = get_u64(b, "block", bi, w, val, &blk->address);
            has_addr = true;
            break;
        case W_STATE:
            st = intern_str(b, val, "state", &blk->state_name);
            switch (word_of(b, val)) {
            case W_ACTIVE_ALLOCATED:
                blk->state = GM_BLOCK_ACTIVE_ALLOCATED;
                break;
            case W_ACTIVE_PENDING_FREE:
                blk->state = GM_BLOCK_ACTIVE_PENDING_FREE;
                break;
            case W_INACTIVE:
                blk->state = GM_BLOCK_INACTIVE;
                break;
            default:
                break;
            }
            break;
        case W_FRAMES:
            st = intern_stack(b, val, &blk->stack);
            has_frames = true;
            b->any_block_frames = true;
            break;
        case W_HISTORY:
            history = val;
            break;
        case W_USER_METADATA:
            if (pk_tag(val) == PK_TAG_STR)
                st = intern_str(b, val, "user_metadata", &blk->user_metadata);
            break;
        default:
            break;
        }
    }
    if (st != GM_OK)
        return st;
    if (!has_addr)
        blk->address = *running;
    *running += blk->size;
    if (history != PK_HOLE) {
        /* 2.0: frames and the real size come from history[0] (memory_viz does the same). */
        const struct pk_node *h = as_list(history);
        b->any_history = true;
        blk->has_history = true;
        if (!h)
            return bad_type(b, "block", bi, W_HISTORY, history, "a list");
        if (h->len > 0) {
            const struct pk_node *h0 = pk_node_of_kind(h->items[0], PK_DICT);
            pk_val rs, fr;
            if (!h0)
                return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                               "snapshot: block %zu: history[0] is a %s, expected a dict", bi,
                               pk_type_name(h->items[0]));
            rs = pk_dict_get(b->doc, h0, "real_size");
            fr = pk_dict_get(b->doc, h0, "frames");
            if (!has_frames && fr != PK_HOLE && (st = intern_stack(b, fr, &blk->stack)) != GM_OK)
                return st;
            if (rs != PK_HOLE && !has_frames && (!blk->has_requested || !blk->requested_size)) {
                if ((st = get_u64(b, "block", bi, W_REAL_SIZE, rs, &blk->requested_size)) != GM_OK)
                    return st;
                blk->has_requested = true;
            }
        }
    }
    if (!blk->has_requested)
        blk->requested_size = blk->size;
    return GM_OK;
}

static enum gm_status read_segment(struct builder *b, pk_val v, size_t si,
                                   struct gm_snapshot_segment *seg)
{
    const struct pk_node *d = pk_node_of_kind(v, PK_DICT);
    pk_val blocks = PK_HOLE;
    int64_t dev = 0;
    bool has_dev = false;
    enum gm_status st = GM_OK;

    if (!d)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: segment %zu is a %s, expected a dict", si, pk_type_name(v));
    memset(seg, 0, sizeof(*seg));
    for (uint32_t i = 0; i < d->len && st == GM_OK; i++) {
        pk_val k = d->items[2 * i], val = d->items[2 * i + 1];
        enum word w = word_of(b, k);
        switch (w) {
        case W_DEVICE:
            st = get_i64(b, "segment", si, w, val, &dev);
            has_dev = true;
            break;
        case W_ADDRESS:
            st = get_u64(b, "segment", si, w, val, &seg->address);
            break;
        case W_TOTAL_SIZE:
            st = get_u64(b, "segment", si, w, val, &seg->total_size);
            break;
        case W_ALLOCATED_SIZE:
            st = get_u64(b, "segment", si, w, val, &seg->allocated_size);
            break;
        case W_ACTIVE_SIZE:
            st = get_u64(b, "segment", si, w, val, &seg->active_size);
            break;
        case W_REQUESTED_SIZE:
            st = get_u64(b, "segment", si, w, val, &seg->requested_size);
            break;
        case W_STREAM:
            st = get_u64(b, "segment", si, w, val, &seg->stream);
            break;
        case W_SEGMENT_TYPE:
            seg->is_small = word_of(b, val) == W_SMALL;
            break;
        case W_SEGMENT_POOL_ID:
            st = get_pair(b, "segment", si, w, val, seg->pool_id);
            seg->has_pool_id = true;
            b->any_seg_g2 = true;
            break;
        case W_IS_EXPANDABLE:
            seg->is_expandable = val == PK_TRUE;
            b->any_seg_g2 = true;
            break;
        case W_FRAMES:
            st = intern_stack(b, val, &seg->stack);
            b->any_seg_g2 = true;
            break;
        case W_BLOCKS:
            blocks = val;
            break;
        default:
            break;
        }
    }
    if (st != GM_OK)
        return st;
    if (!has_dev)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET, "snapshot: segment %zu has no 'device'",
                       si);
    if (dev < 0 || dev >= MAX_DEVICES)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: segment %zu: device %lld is out of range (0..%d)", si,
                       (long long)dev, MAX_DEVICES - 1);
    seg->device = (int32_t)dev;
    if (blocks != PK_HOLE) {
        const struct pk_node *l = as_list(blocks);
        struct gm_snapshot_block *arr;
        uint64_t running = seg->address;
        if (!l)
            return bad_type(b, "segment", si, W_BLOCKS, blocks, "a list");
        if (l->len) {
            arr = gm_arena_calloc(b->arena, l->len, sizeof(*arr));
            if (!arr)
                return nomem(b);
            for (uint32_t i = 0; i < l->len; i++)
                if ((st = read_block(b, l->items[i], si, i, &running, &arr[i])) != GM_OK)
                    return st;
            seg->blocks = arr;
            seg->n_blocks = l->len;
        }
    }
    return GM_OK;
}

/* ---- trace entries ---- */

struct extra_eq_ctx {
    struct builder *b;
    const struct gm_snapshot_event_extra *x;
};

static bool extra_eq(void *ctx, uint32_t id)
{
    struct extra_eq_ctx *c = ctx;
    const struct gm_snapshot_event_extra *a = &c->b->extras[id], *x = c->x;
    return a->stream == x->stream && a->action_name == x->action_name &&
           a->compile_context == x->compile_context && a->user_metadata == x->user_metadata &&
           a->pool_id[0] == x->pool_id[0] && a->pool_id[1] == x->pool_id[1];
}

static enum gm_status intern_extra(struct builder *b, const struct gm_snapshot_event_extra *x,
                                   uint32_t *out)
{
    struct extra_eq_ctx c = {b, x};
    uint64_t h;
    struct dm_entry *dc;
    uint32_t id;
    if (b->last_extra && extra_eq(&c, b->last_extra - 1)) {
        *out = b->last_extra;
        return GM_OK;
    }
    h = dm_key(hmap_mix((x->stream * 13) ^ (uint64_t)(uintptr_t)x->action_name ^
                        ((uint64_t)(uintptr_t)x->compile_context * 3) ^
                        ((uint64_t)(uintptr_t)x->user_metadata * 5) ^
                        ((uint64_t)x->pool_id[0] * 7) ^ ((uint64_t)x->pool_id[1] * 11)));
    dc = &b->extra_dm[dm_slot(h)];
    if (dc->key == h && extra_eq(&c, dc->val)) {
        b->last_extra = dc->val + 1;
        *out = dc->val + 1;
        return GM_OK;
    }
    id = hmap_find(&b->extra_by_content, h, extra_eq, &c);
    if (id == HMAP_NONE) {
        if (b->n_extras >= UINT32_MAX - 2 ||
            !grow_arr((void **)&b->extras, &b->cap_extras, b->n_extras + 1, sizeof(*x)))
            return nomem(b);
        b->extras[b->n_extras] = *x;
        id = (uint32_t)b->n_extras++;
        if (!hmap_put(&b->extra_by_content, h, id))
            return nomem(b);
    }
    dc->key = h;
    dc->val = id;
    b->last_extra = id + 1;
    *out = id + 1;
    return GM_OK;
}

/* The slot of list 'l' in b->batch. */
static inline size_t batch_home(const struct pk_node *l)
{
    return (size_t)(((uint64_t)(uintptr_t)l * 0x9e3779b97f4a7c15ULL) >> (64 - BATCH_BITS));
}

/* Remember that list 'l' of this batch reads as stack 'stack': open addressing with linear
 * probing over the entries of this batch's generation (the others are free).  A batch that
 * has filled half the table records no more, so which lists are remembered (and so
 * recycled: list_token()) depends on their order, never on their addresses, and so does
 * every message about a damaged file. */
static void batch_put(struct builder *b, const struct pk_node *l, uint32_t stack)
{
    const size_t mask = ((size_t)1 << BATCH_BITS) - 1;
    for (size_t i = batch_home(l);; i = (i + 1) & mask) {
        struct batch_list *bl = &b->batch[i];
        if (bl->gen != b->batch_gen) {
            if (b->batch_n >= (1u << BATCH_BITS) / 2)
                return;
            bl->list = l;
            bl->stack = stack;
            bl->gen = b->batch_gen;
            b->batch_n++;
            return;
        }
        if (bl->list == l) {
            bl->stack = stack;
            return;
        }
    }
}

static const struct batch_list *batch_get(const struct builder *b, const struct pk_node *l)
{
    const size_t mask = ((size_t)1 << BATCH_BITS) - 1;
    for (size_t i = batch_home(l);; i = (i + 1) & mask) {
        const struct batch_list *bl = &b->batch[i];
        if (bl->gen != b->batch_gen)
            return NULL;
        if (bl->list == l)
            return bl;
    }
}

/* What read_event() gathers over the fields of one trace entry. */
struct entry_state {
    struct gm_snapshot_event_extra x;
    size_t ei;
    uint64_t device_free;
    bool has_extra, has_action, has_device_free;
};

/* One field of a trace entry.  Always inlined: read_event() calls it with a constant word
 * for the common key layouts, which folds the switch away. */
static inline __attribute__((always_inline)) enum gm_status read_field(struct builder *b,
                                                                       enum word w, pk_val val,
                                                                       struct gm_snapshot_event *e,
                                                                       struct entry_state *s)
{
    enum gm_status st = GM_OK;
    switch (w) {
    case W_ACTION: {
        enum word a = word_of(b, val);
        s->has_action = true;
        if (a >= W_A_ALLOC && a <= W_A_OOM) {
            e->action = (uint8_t)(GM_ACTION_ALLOC + (a - W_A_ALLOC));
        } else {
            e->action = GM_ACTION_OTHER;
            if (pk_tag(val) == PK_TAG_STR)
                st = intern_str(b, val, "action", &s->x.action_name);
            s->has_extra = true;
        }
        break;
    }
    case W_ADDR:
        st = get_u64(b, "trace entry", s->ei, w, val, &e->addr);
        e->flags |= GM_EVENT_HAS_ADDR;
        break;
    case W_DEVICE_FREE:
        st = get_u64(b, "trace entry", s->ei, w, val, &s->device_free);
        s->has_device_free = true;
        break;
    case W_SIZE:
        st = get_u64(b, "trace entry", s->ei, w, val, &e->size);
        break;
    case W_STREAM:
        st = get_u64(b, "trace entry", s->ei, w, val, &s->x.stream);
        s->has_extra |= s->x.stream != 0;
        break;
    case W_TIME_US:
        st = get_i64(b, "trace entry", s->ei, w, val, &e->time_us);
        e->flags |= GM_EVENT_HAS_TIME;
        b->any_time = true;
        break;
    case W_FRAMES:
        st = intern_stack(b, val, &e->stack);
        e->flags |= GM_EVENT_HAS_FRAMES;
        if (st == GM_OK && pk_node(val) && (pk_node(val)->flags & PK_NODE_SCRATCH)) {
            b->scratch_tok = e->stack;
            break;
        }
        /* the lists the parser may recycle (see pickle.c recycle()) */
        if (st == GM_OK && b->in_hook && pk_node_of_kind(val, PK_LIST) &&
            !(pk_node(val)->flags & PK_NODE_STREAMED) && pk_node(val)->n_puts <= 1) {
            batch_put(b, pk_node(val), e->stack);
        }
        break;
    case W_COMPILE_CONTEXT:
        b->any_compile_ctx = true;
        if (pk_tag(val) == PK_TAG_STR) {
            st = intern_str(b, val, "compile_context", &s->x.compile_context);
            s->has_extra = true;
        }
        break;
    case W_USER_METADATA:
        b->any_user_meta = true;
        if (pk_tag(val) == PK_TAG_STR) {
            st = intern_str(b, val, "user_metadata", &s->x.user_metadata);
            s->has_extra = true;
        }
        break;
    case W_POOL_ID:
        b->any_g9 = true;
        st = get_pair(b, "trace entry", s->ei, w, val, s->x.pool_id);
        e->flags |= GM_EVENT_HAS_POOL_ID;
        s->has_extra = true;
        break;
    case W_FORWARD_FRAMES:
        b->any_g9 = true;
        break;
    default:
        break;
    }
    return st;
}

/* The key order of every known writer's trace entries; an entry whose keys are a
 * subsequence of it (each at most once) is read field by field in straight-line code. */
static const uint8_t canon_words[] = {
    W_ACTION, W_ADDR, W_SIZE, W_STREAM, W_TIME_US, W_COMPILE_CONTEXT, W_USER_METADATA, W_FRAMES};
#define N_CANON (sizeof(canon_words) / sizeof(canon_words[0]))

/* Fills b->shape_pos from b->shape_words (see struct builder). */
static void shape_canon(struct builder *b)
{
    size_t c = 0;
    b->shape_canon = true;
    for (size_t j = 0; j < N_CANON; j++)
        b->shape_pos[j] = -1;
    for (uint32_t i = 0; i < b->shape_n; i++) {
        while (c < N_CANON && canon_words[c] != b->shape_words[i])
            c++;
        if (c == N_CANON) {
            b->shape_canon = false;
            return;
        }
        b->shape_pos[c++] = (int8_t)i;
    }
}

static enum gm_status read_event(struct builder *b, pk_val v, size_t ei,
                                 struct gm_snapshot_event *e, size_t *n_unknown)
{
    const struct pk_node *d = pk_node_of_kind(v, PK_DICT);
    struct entry_state s;
    const uint8_t *shape;
    enum gm_status st = GM_OK;

    b->flat_shape = false;
    if (!d)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: trace entry %zu is a %s, expected a dict", ei, pk_type_name(v));
    memset(e, 0, sizeof(*e));
    memset(&s, 0, sizeof(s));
    s.ei = ei;
    {
        bool same = d->len == b->shape_n;
        for (uint32_t i = 0; same && i < d->len; i++)
            same = d->items[2 * i] == b->shape_keys[i];
        if (!same && d->len <= 16) {
            for (uint32_t i = 0; i < d->len; i++) {
                b->shape_keys[i] = d->items[2 * i];
                b->shape_words[i] = (uint8_t)word_of(b, d->items[2 * i]);
            }
            b->shape_n = d->len;
            shape_canon(b);
            same = true;
        }
        if (!same)
            b->shape_n = 0;
        shape = same ? b->shape_words : NULL;
    }
    if (shape && b->shape_canon) {
#define CANON_FIELD(j)                                                                             \
    if (st == GM_OK && b->shape_pos[j] >= 0)                                                       \
        st = read_field(b, (enum word)canon_words[j], d->items[2 * (uint32_t)b->shape_pos[j] + 1], \
                        e, &s);
        CANON_FIELD(0)
        CANON_FIELD(1)
        CANON_FIELD(2)
        CANON_FIELD(3)
        CANON_FIELD(4)
        CANON_FIELD(5)
        CANON_FIELD(6)
        CANON_FIELD(7)
#undef CANON_FIELD
    } else {
        for (uint32_t i = 0; i < d->len && st == GM_OK; i++) {
            pk_val k = d->items[2 * i];
            st = read_field(b, shape ? (enum word)shape[i] : word_of(b, k), d->items[2 * i + 1], e,
                            &s);
        }
    }
    if (st != GM_OK)
        return st;
    if (!s.has_action) {
        e->action = GM_ACTION_OTHER;
        s.has_extra = true;
    }
    if (e->action == GM_ACTION_OTHER)
        (*n_unknown)++;
    if (e->action == GM_ACTION_OOM && s.has_device_free)
        e->addr = s.device_free;
    if (s.has_extra)
        return intern_extra(b, &s.x, &e->extra);
    return GM_OK;
}

/* ---- streaming: device traces are converted while the pickle is parsed ---- */

/* The append hook (pickle.h): when the list being appended to is device_traces[i], turn
 * the trace entries into events now and let the parser recycle their dicts, so that a
 * trace of millions of entries never exists as a generic graph.  The list is recognised by
 * the stack shape every known writer produces for {"device_traces": [[...], ...]}:
 * "device_traces", outer list, [MARK,] earlier inner lists, this list. */
static enum gm_status on_append(void *ctx, const struct pk_append *a, bool *consumed,
                                struct gm_error *err)
{
    struct builder *b = ctx;
    const struct pk_node *list = pk_node(a->stack[a->list_pos]);
    uint32_t si = hmap_find(&b->stream_by_node, (uint64_t)(uintptr_t)list, NULL, NULL);
    struct stream *str;
    enum gm_status st;
    (void)err;

    if (si == HMAP_NONE) {
        const struct pk_node *outer = NULL;
        size_t dev = 0;
        size_t p = a->list_pos;
        if (p >= 2 && pk_node_of_kind(a->stack[p - 1], PK_LIST) &&
            pk_str_eq(a->doc, a->stack[p - 2], "device_traces")) {
            outer = pk_node(a->stack[p - 1]);
            dev = outer->len;
        } else if (a->n_marks) {
            size_t m = a->marks[a->n_marks - 1];
            if (m < 2 || m > p || !pk_node_of_kind(a->stack[m - 1], PK_LIST) ||
                !pk_str_eq(a->doc, a->stack[m - 2], "device_traces"))
                return GM_OK;
            for (size_t i = m; i < p; i++)
                if (!pk_node_of_kind(a->stack[i], PK_LIST))
                    return GM_OK;
            outer = pk_node(a->stack[m - 1]);
            dev = (size_t)outer->len + (p - m);
        } else {
            return GM_OK;
        }
        if (dev >= MAX_DEVICES)
            return GM_OK; /* build() reports it */
        if (!grow_arr((void **)&b->streams, &b->cap_streams, b->n_streams + 1,
                      sizeof(struct stream)))
            return nomem(b);
        si = (uint32_t)b->n_streams++;
        memset(&b->streams[si], 0, sizeof(struct stream));
        b->streams[si].device = (int32_t)dev;
        if (!hmap_put(&b->stream_by_node, (uint64_t)(uintptr_t)list, si))
            return nomem(b);
    }
    str = &b->streams[si];
    if (++b->batch_gen == 0) { /* after 2^32 batches: every entry would look current */
        memset(b->batch, 0, sizeof(b->batch));
        b->batch_gen = 1;
    }
    b->batch_n = 0;
    b->in_hook = true;
    for (size_t i = 0; i < a->n_items; i++) {
        struct gm_snapshot_event e;
        if ((st = read_event(b, a->items[i], str->w.pk.n_events, &e, &str->unknown)) != GM_OK) {
            b->in_hook = false;
            b->err->offset = a->offset;
            return gm_error_prefix(b->err, "device %d", str->device);
        }
        if (!append_event(b, &str->w, &e)) {
            b->in_hook = false;
            return nomem(b);
        }
        ev_sums_add(&str->sums, &e);
    }
    b->in_hook = false;
    *consumed = true;
    return GM_OK;
}

/* 8 bytes at p as a native word (compared with masks made the same way). */
static inline uint64_t load8(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* on_flat()'s common case, in straight-line code: an entry whose keys are those of the
 * entry before (the parser says so) in the canonical order, with values of the usual types:
 * action one of the known names, sizes and addresses small non-negative ints, the
 * compile_context string of the entry before, frames a list or the token of one.  It fills
 * *e exactly as read_event() would and returns true; false (having changed nothing but *e)
 * for anything else, which read_event() then reads. */
static inline bool flat_event(struct builder *b, const struct pk_node *d,
                              struct gm_snapshot_event *e)
{
    const pk_val *it = d->items;
    const int8_t *pos = b->shape_pos;
    struct gm_snapshot_event_extra x;
    bool has_extra = false;
    enum word a;
    pk_val v;

    if (pos[0] < 0 || pos[6] >= 0)
        return false; /* no action, or user_metadata: the general reader */
    memset(&x, 0, sizeof(x));
    memset(e, 0, sizeof(*e)); /* padding too, as read_event() leaves it */
    /* the action: alloc and free alternate, so two values remembered do */
    v = it[2 * pos[0] + 1];
    if (v == b->flat_act_val[0] && v) {
        e->action = b->flat_act[0];
    } else if (v == b->flat_act_val[1] && v) {
        e->action = b->flat_act[1];
    } else {
        a = word_of(b, v);
        if (a < W_A_ALLOC || a > W_A_OOM)
            return false;
        e->action = (uint8_t)(GM_ACTION_ALLOC + (a - W_A_ALLOC));
        b->flat_act_val[1] = b->flat_act_val[0];
        b->flat_act[1] = b->flat_act[0];
        b->flat_act_val[0] = v;
        b->flat_act[0] = e->action;
    }
#define FLAT_U64(j, dst)                                                                           \
    if (pos[j] >= 0) {                                                                             \
        v = it[2 * pos[j] + 1];                                                                    \
        if (pk_tag(v) != PK_TAG_INT || (int64_t)v < 0)                                             \
            return false;                                                                          \
        dst = v >> 3;                                                                              \
    }
    FLAT_U64(1, e->addr)
    if (pos[1] >= 0)
        e->flags |= GM_EVENT_HAS_ADDR;
    FLAT_U64(2, e->size)
    FLAT_U64(3, x.stream)
#undef FLAT_U64
    has_extra = x.stream != 0;
    if (pos[4] >= 0) {
        v = it[2 * pos[4] + 1];
        if (pk_tag(v) != PK_TAG_INT)
            return false;
        e->time_us = (int64_t)v >> 3;
        e->flags |= GM_EVENT_HAS_TIME;
        b->any_time = true;
    }
    if (pos[5] >= 0) {
        const char *p;
        size_t n;
        v = it[2 * pos[5] + 1];
        b->any_compile_ctx = true;
        /* "N/A" on every entry, a new literal each time: one 8-byte compare of its opcode,
         * length and bytes with those of the last one */
        if (b->flat_cc && pk_tag(v) == PK_TAG_STR && (v >> 3) < b->doc->len - 8 &&
            (load8(b->doc->data + (v >> 3)) & b->flat_cc_mask) == b->flat_cc_word) {
            x.compile_context = b->flat_cc;
        } else if (pk_tag(v) == PK_TAG_STR) {
            if (intern_str(b, v, "compile_context", &x.compile_context) != GM_OK)
                return false;
            b->flat_cc = NULL;
            if (pk_short_str(b->doc, v, &p, &n) && n <= 6 && b->doc->len >= 8 &&
                (v >> 3) < b->doc->len - 8) {
                unsigned char m[8] = {0};
                memset(m, 0xff, 2 + n);
                memcpy(&b->flat_cc_mask, m, 8);
                b->flat_cc_word = load8(b->doc->data + (v >> 3)) & b->flat_cc_mask;
                b->flat_cc = x.compile_context;
            }
        }
        has_extra |= pk_tag(v) == PK_TAG_STR;
    }
    if (pos[7] >= 0) {
        v = it[2 * pos[7] + 1];
        if (pk_is_token(v) && pk_token_id(v) < b->n_stacks) {
            e->stack = pk_token_id(v);
        } else if (pk_node_of_kind(v, PK_LIST) && (pk_node(v)->flags & PK_NODE_SCRATCH) &&
                   pk_node(v)->len) {
            /* a new frames list: most repeat one read before (intern_stack()'s first cache) */
            const struct pk_node *ln = pk_node(v);
            uint64_t hs = items_hash(ln->items, ln->len);
            const struct dm_entry *dc = &b->sig_dm[dm_slot(hs)];
            if (dc->key == hs && sig_same(b, dc->val, ln->items, ln->len))
                e->stack = b->sigs[dc->val].stack;
            else if (intern_stack(b, v, &e->stack) != GM_OK)
                return false;
            b->scratch_tok = e->stack;
        } else if (pk_node_of_kind(v, PK_LIST)) {
            if (intern_stack(b, v, &e->stack) != GM_OK)
                return false;
            if (pk_node(v)->flags & PK_NODE_SCRATCH)
                b->scratch_tok = e->stack;
        } else {
            return false;
        }
        e->flags |= GM_EVENT_HAS_FRAMES;
    }
    if (has_extra) {
        /* the extra of the entry before, when stream and compile_context are its */
        if (b->flat_x_id && x.stream == b->flat_x_stream && x.compile_context == b->flat_x_cc) {
            e->extra = b->flat_x_id;
        } else {
            if (intern_extra(b, &x, &e->extra) != GM_OK)
                return false;
            b->flat_x_stream = x.stream;
            b->flat_x_cc = x.compile_context;
            b->flat_x_id = e->extra;
        }
    }
    return true;
}

/* The flat fast path (pickle.h): one trace entry of a streamed device trace, kept
 * provisionally until on_flat_end. */
static enum gm_status on_flat(void *ctx, const struct pk_node *list, pk_val item,
                              uint32_t *list_tok, struct gm_error *err)
{
    struct builder *b = ctx;
    struct stream *str;
    struct gm_snapshot_event e;
    size_t at;
    enum gm_status st;
    (void)err;
    if (list != b->flat_list) {
        uint32_t si = hmap_find(&b->stream_by_node, (uint64_t)(uintptr_t)list, NULL, NULL);
        if (si == HMAP_NONE)
            return GM_ERR_FORMAT; /* not a device trace: the ordinary path reads it */
        b->flat_list = list;
        b->flat_si = si;
    }
    str = &b->streams[b->flat_si];
    at = str->w.pk.n_events;
    if (!str->prov)
        ev_writer_mark(&str->w, &str->mark);
    b->scratch_tok = UINT32_MAX;
    if (!b->flat_shape || !(pk_node(item)->flags & PK_NODE_SAME_KEYS) ||
        !flat_event(b, pk_node(item), &e)) {
        const struct pk_node *d = pk_node(item);
        b->scratch_tok = UINT32_MAX;
        st = read_event(b, item, at, &e, &str->prov_unknown);
        if (st != GM_OK)
            return st;
        /* the shape read_event() kept is this entry's: the next may take flat_event() */
        b->flat_shape = b->shape_canon && b->shape_n == d->len && d->len;
    }
    if (!append_event(b, &str->w, &e))
        return GM_ERR_NOMEM;
    ev_sums_add(&str->prov_sums, &e);
    str->prov++;
    *list_tok = b->scratch_tok;
    return GM_OK;
}

static void on_flat_end(void *ctx, const struct pk_node *list, bool commit)
{
    struct builder *b = ctx;
    struct stream *str;
    if (list != b->flat_list)
        return; /* no on_flat call got this far */
    str = &b->streams[b->flat_si];
    if (commit) {
        str->unknown += str->prov_unknown;
        ev_sums_merge(&str->sums, &str->prov_sums);
    } else if (str->prov) {
        ev_writer_rewind(&str->w, &str->mark);
    }
    str->prov = 0;
    str->prov_unknown = 0;
    memset(&str->prov_sums, 0, sizeof(str->prov_sums));
}

/* The parser recycles a trace entry's frames list: hand it the stack id we read it as (a
 * list not remembered, see batch_put(), is simply kept). */
static uint32_t list_token(void *ctx, const struct pk_node *list)
{
    struct builder *b = ctx;
    struct dm_entry *ldc = &b->list_dm[dm_slot((uint64_t)(uintptr_t)list)];
    const struct batch_list *bl = batch_get(b, list);
    uint32_t id;
    if (!bl)
        return UINT32_MAX; /* not read as a frames list in this batch: keep it */
    id = bl->stack;
    if (ldc->key == (uint64_t)(uintptr_t)list)
        ldc->key = 0; /* the address may now be reused for another list */
    return id;
}

/* ---- top level ---- */

static enum gm_status read_settings(struct builder *b, pk_val v)
{
    const struct pk_node *d = pk_node_of_kind(v, PK_DICT);
    struct gm_snapshot *s = &b->impl->pub;
    struct gm_snapshot_setting *arr;
    size_t n = 0, cap = 0;
    enum gm_status st;

    if (!d)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: 'allocator_settings' is a %s, expected a dict", pk_type_name(v));
    s->has_allocator_settings = true;
    for (uint32_t i = 0; i < d->len; i++) {
        const struct pk_node *sub = pk_node_of_kind(d->items[2 * i + 1], PK_DICT);
        cap += 1 + (sub ? sub->len : 0);
    }
    arr = gm_arena_calloc(b->arena, cap ? cap : 1, sizeof(*arr));
    if (!arr)
        return nomem(b);
    for (uint32_t i = 0; i < d->len; i++) {
        pk_val k = d->items[2 * i], val = d->items[2 * i + 1];
        const struct pk_node *sub = pk_node_of_kind(val, PK_DICT);
        const char *key;
        const char *kp;
        size_t kn;
        if (!pk_get_str(b->doc, k, &kp, &kn, NULL))
            continue; /* a non-str key: nothing we could name */
        if ((st = intern_bytes(b, kp, kn, &key)) != GM_OK)
            return st;
        if (word_of(b, k) == W_GRAPH_CAPTURE_RSR)
            b->settings_g7 = true;
        if (word_of(b, k) == W_TRACE_OVERFLOWED) {
            s->trace_overflowed = val == PK_TRUE;
            b->any_g9 = true;
        }
        if (sub) {
            for (uint32_t j = 0; j < sub->len; j++) {
                const char *sp;
                size_t sn;
                char name[256];
                int len;
                struct gm_snapshot_setting *it = &arr[n];
                if (!pk_get_str(b->doc, sub->items[2 * j], &sp, &sn, NULL))
                    continue;
                len = snprintf(name, sizeof(name), "%s.%.*s", key, (int)(sn > 200 ? 200 : sn), sp);
                if (len < 0)
                    continue;
                if ((st = intern_bytes(b, name, strlen(name), &it->key)) != GM_OK)
                    return st;
                val = sub->items[2 * j + 1];
                if (val == PK_TRUE || val == PK_FALSE) {
                    it->type = GM_SETTING_BOOL;
                    it->i = val == PK_TRUE;
                } else if (pk_get_i64(val, &it->i)) {
                    it->type = GM_SETTING_INT;
                    it->d = (double)it->i;
                } else if (pk_get_double(val, &it->d)) {
                    it->type = GM_SETTING_FLOAT;
                } else {
                    it->type = GM_SETTING_OTHER;
                    it->s = pk_type_name(val);
                }
                n++;
            }
            continue;
        }
        {
            struct gm_snapshot_setting *it = &arr[n++];
            it->key = key;
            if (val == PK_TRUE || val == PK_FALSE) {
                it->type = GM_SETTING_BOOL;
                it->i = val == PK_TRUE;
            } else if (val == PK_NONE) {
                it->type = GM_SETTING_NONE;
            } else if (pk_tag(val) == PK_TAG_STR) {
                it->type = GM_SETTING_STR;
                if ((st = intern_str(b, val, "allocator_settings", &it->s)) != GM_OK)
                    return st;
            } else if (pk_get_i64(val, &it->i)) {
                it->type = GM_SETTING_INT;
                it->d = (double)it->i;
            } else if (pk_get_double(val, &it->d)) {
                it->type = GM_SETTING_FLOAT;
            } else {
                it->type = GM_SETTING_OTHER;
                it->s = pk_type_name(val);
            }
        }
    }
    s->settings = arr;
    s->n_settings = n;
    return GM_OK;
}

static enum gm_status read_annotations(struct builder *b, pk_val v)
{
    const struct pk_node *l = as_list(v);
    struct gm_snapshot *s = &b->impl->pub;
    struct gm_snapshot_annotation *arr;
    enum gm_status st;

    if (!l)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: 'external_annotations' is a %s, expected a list",
                       pk_type_name(v));
    s->has_annotations = true;
    if (!l->len)
        return GM_OK;
    arr = gm_arena_calloc(b->arena, l->len, sizeof(*arr));
    if (!arr)
        return nomem(b);
    for (uint32_t i = 0; i < l->len; i++) {
        const struct pk_node *d = pk_node_of_kind(l->items[i], PK_DICT);
        struct gm_snapshot_annotation *a = &arr[i];
        int64_t dev = 0;
        a->name = a->stage = "";
        if (!d)
            return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                           "snapshot: annotation %u is a %s, expected a dict", i,
                           pk_type_name(l->items[i]));
        for (uint32_t j = 0; j < d->len; j++) {
            pk_val k = d->items[2 * j], val = d->items[2 * j + 1];
            enum word w = word_of(b, k);
            st = GM_OK;
            if (w == W_NAME)
                st = intern_str(b, val, "name", &a->name);
            else if (w == W_STAGE)
                st = intern_str(b, val, "stage", &a->stage);
            else if (w == W_DEVICE)
                st = get_i64(b, "annotation", i, w, val, &dev);
            else if (w == W_TIME_US)
                st = get_i64(b, "annotation", i, w, val, &a->time_us);
            if (st != GM_OK)
                return st;
        }
        a->device = dev < INT32_MIN ? INT32_MIN : dev > INT32_MAX ? INT32_MAX : (int32_t)dev;
        a->is_start = !strcmp(a->stage, "START");
    }
    s->annotations = arr;
    s->n_annotations = l->len;
    return GM_OK;
}

struct seg_key {
    int32_t device;
    uint32_t pos;
};

static int cmp_seg_key(const void *pa, const void *pb)
{
    const struct seg_key *a = pa, *b = pb;
    if (a->device != b->device)
        return a->device < b->device ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

/* Group segments by device, keeping file order within a device (a stable sort). */
static enum gm_status group_segments(struct builder *b, struct gm_snapshot_segment **segs, size_t n)
{
    struct seg_key *keys;
    struct gm_snapshot_segment *out;
    bool sorted = true;
    for (size_t i = 1; i < n; i++)
        if ((*segs)[i].device < (*segs)[i - 1].device)
            sorted = false;
    if (sorted)
        return GM_OK;
    keys = gm_malloc(n * sizeof(*keys));
    out = gm_arena_alloc(b->arena, n * sizeof(*out), 8);
    if (!keys || !out) {
        gm_free(keys);
        return nomem(b);
    }
    for (size_t i = 0; i < n; i++) {
        keys[i].device = (*segs)[i].device;
        keys[i].pos = (uint32_t)i;
    }
    qsort(keys, n, sizeof(*keys), cmp_seg_key);
    for (size_t i = 0; i < n; i++)
        out[i] = (*segs)[keys[i].pos];
    gm_free(keys);
    *segs = out;
    return GM_OK;
}

static enum gm_status build(struct builder *b, pk_val root)
{
    struct gm_snapshot *s = &b->impl->pub;
    const struct pk_node *top = pk_node(root);
    pk_val segments = PK_HOLE, traces = PK_HOLE;
    const struct pk_node *segl, *trl = NULL;
    struct gm_snapshot_segment *segs = NULL;
    struct gm_snapshot_device *devs;
    bool named[MAX_DEVICES];
    size_t n_named = 0;
    enum gm_status st;

    if (!top || (top->kind != PK_DICT && top->kind != PK_LIST))
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: the pickle holds a %s, not a memory snapshot (a dict or a "
                       "list of segments)",
                       pk_type_name(root));
    if (top->kind == PK_LIST) {
        s->is_list = true;
        segments = root;
    } else {
        for (uint32_t i = 0; i < top->len; i++) {
            pk_val k = top->items[2 * i], val = top->items[2 * i + 1];
            switch (word_of(b, k)) {
            case W_SEGMENTS:
                segments = val;
                break;
            case W_DEVICE_TRACES:
                traces = val;
                break;
            case W_ALLOCATOR_SETTINGS:
                if ((st = read_settings(b, val)) != GM_OK)
                    return st;
                break;
            case W_EXTERNAL_ANNOTATIONS:
                if ((st = read_annotations(b, val)) != GM_OK)
                    return st;
                break;
            case W_HOST_SEGMENTS:
            case W_HOST_TRACES:
                s->has_host_data = true;
                b->any_g9 = true;
                break;
            default:
                break;
            }
        }
        if (segments == PK_HOLE)
            return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                           "snapshot: the dict has no 'segments' key: not a memory snapshot");
    }
    segl = as_list(segments);
    if (!segl)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: 'segments' is a %s, expected a list", pk_type_name(segments));
    if (traces != PK_HOLE && !(trl = as_list(traces)))
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: 'device_traces' is a %s, expected a list", pk_type_name(traces));
    if (trl && trl->len > MAX_DEVICES)
        return gm_fail(b->err, GM_ERR_LIMIT, GM_NO_OFFSET,
                       "snapshot: 'device_traces' has %u device lists (at most %d supported)",
                       trl->len, MAX_DEVICES);

    /* segments */
    if (segl->len) {
        segs = gm_arena_calloc(b->arena, segl->len, sizeof(*segs));
        if (!segs)
            return nomem(b);
    }
    for (uint32_t i = 0; i < segl->len; i++) {
        if ((st = read_segment(b, segl->items[i], i, &segs[i])) != GM_OK)
            return st;
        s->n_blocks += segs[i].n_blocks;
    }
    if (segl->len > 1 && (st = group_segments(b, &segs, segl->len)) != GM_OK)
        return st;
    s->segments = segs;
    s->n_segments = segl->len;

    /* devices: every trace slot and every segment device */
    memset(named, 0, sizeof(named));
    for (uint32_t i = 0; trl && i < trl->len; i++)
        named[i] = true;
    for (size_t i = 0; i < s->n_segments; i++)
        named[segs[i].device] = true;
    for (size_t i = 0; i < MAX_DEVICES; i++)
        n_named += named[i];
    devs = gm_arena_calloc(b->arena, n_named ? n_named : 1, sizeof(*devs));
    b->impl->size_sums = gm_arena_calloc(b->arena, n_named ? n_named : 1, sizeof(uint64_t));
    b->impl->traces = gm_calloc(n_named ? n_named : 1, sizeof(struct ev_writer));
    if (!devs || !b->impl->size_sums || !b->impl->traces)
        return nomem(b);
    {
        size_t di = 0, si = 0;
        struct ev_sums span; /* the time range over all devices */
        memset(&span, 0, sizeof(span));
        for (int32_t i = 0; i < MAX_DEVICES; i++) {
            struct gm_snapshot_device *d;
            if (!named[i])
                continue;
            d = &devs[di++];
            d->index = i;
            while (si < s->n_segments && segs[si].device < i)
                si++;
            d->first_segment = si;
            while (si < s->n_segments && segs[si].device == i) {
                si++;
                d->n_segments++;
            }
            if (trl && (uint32_t)i < trl->len) {
                const struct pk_node *l = as_list(trl->items[i]);
                struct ev_writer *tw = &b->impl->traces[b->impl->n_traces];
                size_t unknown = 0;
                struct ev_sums sums;
                memset(&sums, 0, sizeof(sums));
                d->has_trace = true;
                if (!l)
                    return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                                   "snapshot: device_traces[%d] is a %s, expected a list", i,
                                   pk_type_name(trl->items[i]));
                if (l->flags & PK_NODE_STREAMED) {
                    uint32_t sj = hmap_find(&b->stream_by_node, (uint64_t)(uintptr_t)l, NULL, NULL);
                    struct stream *str;
                    if (sj == HMAP_NONE || b->streams[sj].device != i || b->streams[sj].taken)
                        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                                       "snapshot: device_traces[%d] is a trace list read for "
                                       "another device (shared between devices?)",
                                       i);
                    str = &b->streams[sj];
                    /* the snapshot owns the events now */
                    *tw = str->w;
                    ev_writer_init(&str->w);
                    str->taken = true;
                    unknown = str->unknown;
                    sums = str->sums;
                } else {
                    for (uint32_t k = 0; k < l->len; k++) {
                        struct gm_snapshot_event e;
                        if ((st = read_event(b, l->items[k], k, &e, &unknown)) != GM_OK)
                            return gm_error_prefix(b->err, "device %d", i);
                        if (!append_event(b, tw, &e))
                            return nomem(b);
                        ev_sums_add(&sums, &e);
                    }
                }
                b->impl->n_traces++;
                ev_writer_shrink(tw);
                ev_sums_merge(&span, &sums);
                b->impl->size_sums[di - 1] = sums.size_sum;
                d->n_events = tw->pk.n_events;
                if (d->n_events)
                    d->packed = &tw->pk;
                memcpy(d->n_actions, tw->n_actions, sizeof(d->n_actions));
                s->n_events += d->n_events;
                s->n_unknown_actions += unknown;
            }
        }
        s->has_time = span.has_time;
        s->time_first_us = span.t_min;
        s->time_last_us = span.t_max;
    }
    s->devices = devs;
    s->n_devices = n_named;

    /* generation: the newest evidence wins */
    if (s->is_list)
        s->gen = GM_SNAPSHOT_GEN_G0;
    else if (b->any_g9)
        s->gen = GM_SNAPSHOT_GEN_G9;
    else if (b->any_user_meta)
        s->gen = GM_SNAPSHOT_GEN_G8;
    else if (b->settings_g7)
        s->gen = GM_SNAPSHOT_GEN_G7;
    else if (b->any_compile_ctx)
        s->gen = GM_SNAPSHOT_GEN_G6;
    else if (s->has_annotations)
        s->gen = GM_SNAPSHOT_GEN_G5;
    else if (s->has_allocator_settings)
        s->gen = GM_SNAPSHOT_GEN_G4;
    else if (b->any_time)
        s->gen = GM_SNAPSHOT_GEN_G3;
    else if (b->any_block_frames || b->any_seg_g2)
        s->gen = GM_SNAPSHOT_GEN_G2;
    else
        s->gen = GM_SNAPSHOT_GEN_G1;
    return GM_OK;
}

/* Move the interning tables' results into the arena. */
static enum gm_status finish(struct builder *b)
{
    struct gm_snapshot *s = &b->impl->pub;
    struct gm_snapshot_frame *frames = NULL;
    struct gm_snapshot_stack *stacks;
    uint32_t *pool = NULL;

    if (b->n_frames) {
        frames = gm_arena_alloc(b->arena, b->n_frames * sizeof(*frames), 8);
        if (!frames)
            return nomem(b);
        memcpy(frames, b->frames, b->n_frames * sizeof(*frames));
    }
    if (b->n_pool) {
        pool = gm_arena_alloc(b->arena, b->n_pool * sizeof(uint32_t), 8);
        if (!pool)
            return nomem(b);
        memcpy(pool, b->pool, b->n_pool * sizeof(uint32_t));
    }
    stacks = gm_arena_calloc(b->arena, b->n_stacks, sizeof(*stacks));
    if (!stacks)
        return nomem(b);
    for (size_t i = 1; i < b->n_stacks; i++) {
        stacks[i].frames = pool + b->stacks[i].off;
        stacks[i].n_frames = b->stacks[i].n;
    }
    if (b->n_extras) {
        struct gm_snapshot_event_extra *x = gm_arena_alloc(b->arena, b->n_extras * sizeof(*x), 8);
        if (!x)
            return nomem(b);
        memcpy(x, b->extras, b->n_extras * sizeof(*x));
        s->extras = x;
        s->n_extras = b->n_extras;
    }
    s->frames = frames;
    s->n_frames = b->n_frames;
    s->stacks = stacks;
    s->n_stacks = b->n_stacks;
    return GM_OK;
}

static void builder_release(struct builder *b)
{
    hmap_release(&b->stream_by_node);
    for (size_t i = 0; i < b->n_streams; i++)
        ev_writer_release(&b->streams[i].w);
    gm_free(b->streams);
    hmap_release(&b->str_by_content);
    hmap_release(&b->frame_by_node);
    hmap_release(&b->frame_by_content);
    hmap_release(&b->sig_map);
    gm_free(b->sigs);
    gm_free(b->sig_pool);
    hmap_release(&b->stack_by_content);
    hmap_release(&b->extra_by_content);
    gm_free(b->strs);
    gm_free(b->str_lens);
    gm_free(b->frames);
    gm_free(b->stacks);
    gm_free(b->pool);
    gm_free(b->tmp);
    gm_free(b->extras);
}

/* No device holds 2^63 bytes, nor does a trace allocate and free that much.  A file whose
 * event sizes (every event: a free without its alloc counts from the start), block sizes
 * (reserved and requested) and segment sizes add up to that much on one device is damaged
 * or crafted; refusing it here means no later sum (timeline, categories, report) can
 * overflow. */
static enum gm_status check_sizes(const struct snap_impl *impl, struct gm_error *err)
{
    const uint64_t limit = (uint64_t)1 << 63;
    const struct gm_snapshot *snap = &impl->pub;
    for (size_t di = 0; di < snap->n_devices; di++) {
        const struct gm_snapshot_device *d = &snap->devices[di];
        uint64_t sum = impl->size_sums ? impl->size_sums[di] : 0; /* the trace's events */
        for (size_t si = d->first_segment; si < d->first_segment + d->n_segments; si++) {
            const struct gm_snapshot_segment *seg = &snap->segments[si];
            sum = snap_sat_add(sum, seg->total_size);
            for (size_t bi = 0; bi < seg->n_blocks; bi++) {
                sum = snap_sat_add(sum, seg->blocks[bi].size);
                sum = snap_sat_add(sum, seg->blocks[bi].requested_size);
            }
        }
        if (sum >= limit)
            return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                           "device %d: the sizes in the file add up to more than 2^63 bytes, "
                           "which no device can hold",
                           (int)d->index);
    }
    return GM_OK;
}

static enum gm_status load(const void *data, size_t len, const struct gm_snapshot_opts *opts,
                           bool mapped, struct gm_snapshot **out, struct gm_error *err)
{
    struct pk_opts po;
    struct pk_doc doc;
    struct builder *b;
    struct snap_impl *impl;
    size_t cap;
    enum gm_status st;
    struct gm_error local;

    *out = NULL;
    if (!err) {
        gm_error_clear(&local);
        err = &local;
    }
    if (opts && opts->max_memory)
        cap = opts->max_memory > SIZE_MAX ? SIZE_MAX : (size_t)opts->max_memory;
    else
        cap = len > (SIZE_MAX - DEFAULT_MEMORY_BASE) / DEFAULT_MEMORY_FACTOR
                  ? SIZE_MAX
                  : len * DEFAULT_MEMORY_FACTOR + DEFAULT_MEMORY_BASE;

    impl = gm_calloc(1, sizeof(*impl));
    b = gm_calloc(1, sizeof(*b));
    if (!impl || !b) {
        gm_free(impl);
        gm_free(b);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "snapshot: out of memory");
    }
    gm_arena_init(&impl->arena, cap);
    impl->pub.file_size = len;
    b->doc = &doc;
    b->impl = impl;
    b->arena = &impl->arena;
    b->err = err;

    memset(&po, 0, sizeof(po));
    po.max_memory = cap;
    po.max_depth = opts ? opts->max_depth : 0;
    if (opts) {
        po.progress = opts->progress;
        po.progress_ctx = opts->progress_ctx;
    }
    po.on_append = on_append;
    po.append_ctx = b;
    po.list_token = list_token;
    if (!getenv("GM_SNAPSHOT_NO_FAST_PATH")) {
        po.on_flat = on_flat;
        po.on_flat_end = on_flat_end;
    }
    po.drop_behind = mapped;

    /* stack id 0 is the empty stack */
    if (!grow_arr((void **)&b->stacks, &b->cap_stacks, 1, sizeof(struct stack_rec))) {
        st = nomem(b);
    } else {
        b->stacks[0].off = 0;
        b->stacks[0].n = 0;
        b->n_stacks = 1;
        st = pk_parse(&doc, data, len, &po, err);
        if (st == GM_OK) {
            impl->pub.protocol = doc.protocol;
            st = build(b, doc.root);
            if (st == GM_OK)
                st = finish(b);
            if (st == GM_OK)
                st = check_sizes(impl, err);
            pk_doc_release(&doc);
        }
    }
    builder_release(b);
    gm_free(b);
    if (st != GM_OK) {
        gm_snapshot_free(&impl->pub);
        return st;
    }
    impl->pub.memory_limit = cap;
    impl->pub.memory_bytes = impl->arena.reserved;
    for (size_t i = 0; i < impl->n_traces; i++)
        impl->pub.memory_bytes += ev_writer_capacity(&impl->traces[i]);
    *out = &impl->pub;
    return GM_OK;
}

enum gm_status gm_snapshot_load_mem(const void *data, size_t len,
                                    const struct gm_snapshot_opts *opts, struct gm_snapshot **out,
                                    struct gm_error *err)
{
    return load(data, len, opts, false, out, err);
}

enum gm_status gm_snapshot_load(const char *path, const struct gm_snapshot_opts *opts,
                                struct gm_snapshot **out, struct gm_error *err)
{
    int fd;
    struct stat st;
    void *map;
    enum gm_status rc;

    *out = NULL;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return gm_fail(err, e == ENOENT ? GM_ERR_NOENT : GM_ERR_IO, GM_NO_OFFSET,
                       "cannot open '%s': %s", path, strerror(e));
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "'%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return gm_fail(err, GM_ERR_FORMAT, 0, "'%s' is empty: not a pickle", path);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "'%s' is too large", path);
    }
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "cannot map '%s': %s", path, strerror(errno));
    (void)madvise(map, (size_t)st.st_size, MADV_SEQUENTIAL);
    rc = load(map, (size_t)st.st_size, opts, true, out, err);
    munmap(map, (size_t)st.st_size);
    if (rc != GM_OK && err)
        gm_error_prefix(err, "%s", path);
    return rc;
}

void gm_snapshot_free(struct gm_snapshot *snap)
{
    struct snap_impl *impl = (struct snap_impl *)snap;
    if (!snap)
        return;
    for (size_t i = 0; i < impl->n_traces; i++)
        ev_writer_release(&impl->traces[i]);
    gm_free(impl->traces);
    gm_arena_release(&impl->arena);
    gm_free(impl);
}

const struct gm_snapshot_device *gm_snapshot_device_by_index(const struct gm_snapshot *snap,
                                                             int32_t index)
{
    for (size_t i = 0; i < snap->n_devices; i++)
        if (snap->devices[i].index == index)
            return &snap->devices[i];
    return NULL;
}

const struct gm_snapshot_event_extra *gm_snapshot_event_extra_of(const struct gm_snapshot *snap,
                                                                 const struct gm_snapshot_event *e)
{
    if (!e->extra || e->extra > snap->n_extras)
        return NULL;
    return &snap->extras[e->extra - 1];
}

const char *gm_snapshot_gen_name(enum gm_snapshot_gen gen)
{
    static const char *const names[] = {"g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8", "g9"};
    return (unsigned)gen < sizeof(names) / sizeof(names[0]) ? names[gen] : "?";
}

const char *gm_snapshot_gen_torch(enum gm_snapshot_gen gen)
{
    static const char *const torch[] = {"1.13+ (list of segments)",
                                        "2.0",
                                        "2.1",
                                        "2.2",
                                        "2.3",
                                        "2.4-2.7",
                                        "2.8",
                                        "2.9",
                                        "2.10+",
                                        "2026 (2.12+?)"};
    return (unsigned)gen < sizeof(torch) / sizeof(torch[0]) ? torch[gen] : "?";
}

const char *gm_block_state_name(enum gm_block_state s)
{
    switch (s) {
    case GM_BLOCK_INACTIVE:
        return "inactive";
    case GM_BLOCK_ACTIVE_ALLOCATED:
        return "active_allocated";
    case GM_BLOCK_ACTIVE_PENDING_FREE:
        return "active_pending_free";
    default:
        return "unknown";
    }
}

const char *gm_snapshot_action_name(enum gm_snapshot_action a)
{
    static const char *const names[GM_ACTION_COUNT] = {
        "alloc",       "free_requested", "free_completed", "segment_alloc", "segment_free",
        "segment_map", "segment_unmap",  "snapshot",       "oom",           "other"};
    return (unsigned)a < GM_ACTION_COUNT ? names[a] : "other";
}
