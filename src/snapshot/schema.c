/* SPDX-License-Identifier: MIT */
/* schema.c - the words of the snapshot schema and its typed fields (load_int.h).
 *
 * The schema is in docs/snapshot.md, "File format".  Only the key names are
 * trusted, never the shape: every value is type-checked, with a message that names the
 * field, what it is and what was expected. */
#include "snapshot/load_int.h"

#include "gpumem/units.h"

#include <string.h>

const char *const snap_word_text[W_COUNT] = {
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
    [W_INTERNAL_METADATA] = "internal_metadata",
    [W_FX_ORIGINAL_TRACE] = "fx_original_trace",
    [W_FILENAME] = "filename",
    [W_LINE] = "line",
    [W_NAME] = "name",
    [W_STAGE] = "stage",
    [W_GRAPH_CAPTURE_RSR] = "graph_capture_record_stream_reuse",
    [W_TRACE_OVERFLOWED] = "trace_alloc_overflowed",
    [W_PYTORCH_CUDA_ALLOC_CONF] = "PYTORCH_CUDA_ALLOC_CONF",
    [W_PYTORCH_ALLOC_CONF] = "PYTORCH_ALLOC_CONF",
    [W_RELEASE_LOCK_ON_CUDAMALLOC] = "release_lock_on_cudamalloc",
    [W_PINNED_USE_CUDA_HOST_REGISTER] = "pinned_use_cuda_host_register",
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

enum gm_status snap_nomem(struct builder *b)
{
    if (b->arena->limit_hit) {
        char lim[32];
        gm_format_bytes(lim, sizeof(lim), b->arena->cap, GM_UNITS_IEC);
        return gm_fail_setting(b->err, GM_ERR_LIMIT, "memory_limit",
                               "snapshot: over the memory limit of %s%s", lim,
                               b->limit_given ? "" : " (the default for a file of this size)");
    }
    return gm_fail(b->err, GM_ERR_NOMEM, GM_NO_OFFSET, "snapshot: out of memory");
}

enum word snap_word_of(struct builder *b, pk_val v)
{
    uint32_t w;
    const char *p;
    size_t n;
    struct dm_entry *c;
    if (!pk_is_str(v))
        return W_UNKNOWN;
    c = &b->words[dm_slot(v)];
    if (c->key == v)
        return (enum word)c->val;
    w = W_UNKNOWN;
    if (pk_get_str(b->doc, v, &p, &n, NULL)) {
        for (unsigned i = 1; i < W_COUNT; i++) {
            if (strlen(snap_word_text[i]) == n && !memcmp(snap_word_text[i], p, n)) {
                w = i;
                break;
            }
        }
    }
    c->key = v;
    c->val = w;
    return (enum word)w;
}

/* "a str", "an int", ...: the article that goes with a type name. */
static const char *article(const char *type)
{
    return strchr("aeiou", type[0]) ? "an" : "a";
}

enum gm_status snap_bad_type(struct builder *b, const char *where, size_t i, enum word key,
                             pk_val v, const char *want)
{
    const char *t = pk_type_name(v);
    uint64_t u;
    int64_t s;
    if (!strcmp(t, "int") && !pk_get_u64(v, &u) && !pk_get_i64(v, &s))
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: %s %zu: '%s' is an int that does not fit 64 bits, expected %s",
                       where, i, snap_word_text[key], want);
    return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                   "snapshot: %s %zu: '%s' is %s %s, expected %s", where, i, snap_word_text[key],
                   article(t), t, want);
}

enum gm_status snap_get_u64_slow(struct builder *b, const char *where, size_t i, enum word key,
                                 pk_val v, uint64_t *out)
{
    int64_t s;
    if (pk_get_u64(v, out))
        return GM_OK;
    if (pk_get_i64(v, &s)) {
        *out = (uint64_t)s;
        return GM_OK;
    }
    return snap_bad_type(b, where, i, key, v, "an int");
}

enum gm_status snap_get_size_slow(struct builder *b, const char *where, size_t i, enum word key,
                                  pk_val v, uint64_t *out)
{
    int64_t s;
    if (pk_get_u64(v, out))
        return GM_OK;
    if (pk_get_i64(v, &s))
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: %s %zu: '%s' is %lld, a size must not be negative", where, i,
                       snap_word_text[key], (long long)s);
    return snap_bad_type(b, where, i, key, v, "an int");
}

enum gm_status snap_get_i64_slow(struct builder *b, const char *where, size_t i, enum word key,
                                 pk_val v, int64_t *out)
{
    if (pk_get_i64(v, out))
        return GM_OK;
    return snap_bad_type(b, where, i, key, v, "an int");
}

enum gm_status snap_get_pair(struct builder *b, const char *where, size_t i, enum word key,
                             pk_val v, int64_t out[2])
{
    const struct pk_node *t = pk_node(v);
    if (!t || (t->kind != PK_TUPLE && t->kind != PK_LIST) || t->len != 2 ||
        !pk_get_i64(t->items[0], &out[0]) || !pk_get_i64(t->items[1], &out[1]))
        return snap_bad_type(b, where, i, key, v, "a pair of ints");
    return GM_OK;
}

const struct pk_node *snap_as_list(pk_val v)
{
    const struct pk_node *n = pk_node(v);
    return n && (n->kind == PK_LIST || n->kind == PK_TUPLE) ? n : NULL;
}
