/* SPDX-License-Identifier: MIT */
/* segments.c - the snapshot state of a torch memory snapshot: segments and their blocks,
 * allocator settings and annotations (load_int.h; schema: docs/snapshot.md,
 * "File format").  The walk follows the schema (at most five levels deep), never the graph, so
 * shared or even cyclic references cannot make it recurse. */
#include "snapshot/load_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        enum word w = snap_word_of(b, k);
        switch (w) {
        case W_SIZE:
            st = get_size(b, "block", bi, w, val, &blk->size);
            break;
        case W_REQUESTED_SIZE:
            st = get_size(b, "block", bi, w, val, &blk->requested_size);
            blk->has_requested = true;
            break;
        case W_ADDRESS:
            st = get_u64(b, "block", bi, w, val, &blk->address);
            has_addr = true;
            break;
        case W_STATE:
            st = snap_intern_str(b, val, "state", &blk->state_name);
            switch (snap_word_of(b, val)) {
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
            st = snap_intern_stack(b, val, &blk->stack);
            has_frames = true;
            b->any_block_frames = true;
            break;
        case W_HISTORY:
            history = val;
            break;
        case W_USER_METADATA:
            if (pk_is_str(val))
                st = snap_intern_str(b, val, "user_metadata", &blk->user_metadata);
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
        const struct pk_node *h = snap_as_list(history);
        b->any_history = true;
        blk->has_history = true;
        if (!h)
            return snap_bad_type(b, "block", bi, W_HISTORY, history, "a list");
        if (h->len > 0) {
            const struct pk_node *h0 = pk_node_of_kind(h->items[0], PK_DICT);
            pk_val rs, fr;
            if (!h0)
                return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                               "snapshot: block %zu: history[0] is a %s, expected a dict", bi,
                               pk_type_name(h->items[0]));
            rs = pk_dict_get(b->doc, h0, "real_size");
            fr = pk_dict_get(b->doc, h0, "frames");
            if (!has_frames && fr != PK_HOLE &&
                (st = snap_intern_stack(b, fr, &blk->stack)) != GM_OK)
                return st;
            if (rs != PK_HOLE && !has_frames && (!blk->has_requested || !blk->requested_size)) {
                if ((st = get_size(b, "block", bi, W_REAL_SIZE, rs, &blk->requested_size)) != GM_OK)
                    return st;
                blk->has_requested = true;
            }
        }
    }
    if (!blk->has_requested)
        blk->requested_size = blk->size;
    return GM_OK;
}

/* One segment of 'segments' or, 'host', of 'host_segments' (pinned host memory: its
 * 'device' is not a device index and may be missing, -1 then). */
static enum gm_status read_segment(struct builder *b, pk_val v, size_t si, bool host,
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
        enum word w = snap_word_of(b, k);
        switch (w) {
        case W_DEVICE:
            st = get_i64(b, "segment", si, w, val, &dev);
            has_dev = true;
            break;
        case W_ADDRESS:
            st = get_u64(b, "segment", si, w, val, &seg->address);
            break;
        case W_TOTAL_SIZE:
            st = get_size(b, "segment", si, w, val, &seg->total_size);
            break;
        case W_ALLOCATED_SIZE:
            st = get_size(b, "segment", si, w, val, &seg->allocated_size);
            break;
        case W_ACTIVE_SIZE:
            st = get_size(b, "segment", si, w, val, &seg->active_size);
            break;
        case W_REQUESTED_SIZE:
            st = get_size(b, "segment", si, w, val, &seg->requested_size);
            break;
        case W_STREAM:
            st = get_u64(b, "segment", si, w, val, &seg->stream);
            break;
        case W_SEGMENT_TYPE:
            seg->is_small = snap_word_of(b, val) == W_SMALL;
            break;
        case W_SEGMENT_POOL_ID:
            st = snap_get_pair(b, "segment", si, w, val, seg->pool_id);
            seg->has_pool_id = true;
            b->any_seg_g2 = true;
            break;
        case W_IS_EXPANDABLE:
            seg->is_expandable = val == PK_TRUE;
            b->any_seg_g2 = true;
            break;
        case W_FRAMES:
            st = snap_intern_stack(b, val, &seg->stack);
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
    if (host)
        dev = has_dev && dev >= 0 && dev < MAX_DEVICES ? dev : -1;
    else if (!has_dev)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET, "snapshot: segment %zu has no 'device'",
                       si);
    else if (dev < 0 || dev >= MAX_DEVICES)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: segment %zu: device %lld is out of range (0..%d)", si,
                       (long long)dev, MAX_DEVICES - 1);
    seg->device = (int32_t)dev;
    if (blocks != PK_HOLE) {
        const struct pk_node *l = snap_as_list(blocks);
        struct gm_snapshot_block *arr;
        uint64_t running = seg->address;
        if (!l)
            return snap_bad_type(b, "segment", si, W_BLOCKS, blocks, "a list");
        if (l->len) {
            arr = gm_arena_calloc(b->arena, l->len, sizeof(*arr));
            if (!arr)
                return snap_nomem(b);
            for (uint32_t i = 0; i < l->len; i++)
                if ((st = read_block(b, l->items[i], si, i, &running, &arr[i])) != GM_OK)
                    return st;
            seg->blocks = arr;
            seg->n_blocks = l->len;
        }
    }
    return GM_OK;
}

enum gm_status snap_read_settings(struct builder *b, pk_val v)
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
        return snap_nomem(b);
    for (uint32_t i = 0; i < d->len; i++) {
        pk_val k = d->items[2 * i], val = d->items[2 * i + 1];
        const struct pk_node *sub = pk_node_of_kind(val, PK_DICT);
        const char *key;
        const char *kp;
        size_t kn;
        if (!pk_get_str(b->doc, k, &kp, &kn, NULL))
            continue; /* a non-str key: nothing we could name */
        if ((st = snap_intern_bytes(b, kp, kn, &key)) != GM_OK)
            return st;
        switch (snap_word_of(b, k)) {
        case W_GRAPH_CAPTURE_RSR:
            b->settings_g7 = true;
            break;
        case W_PYTORCH_CUDA_ALLOC_CONF:
        case W_RELEASE_LOCK_ON_CUDAMALLOC:
        case W_PINNED_USE_CUDA_HOST_REGISTER:
            b->settings_cuda = true;
            break;
        case W_PYTORCH_ALLOC_CONF:
            b->settings_generic_conf = true;
            break;
        default:
            break;
        }
        if (snap_word_of(b, k) == W_TRACE_OVERFLOWED) {
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
                if ((st = snap_intern_bytes(b, name, strlen(name), &it->key)) != GM_OK)
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
            } else if (pk_is_str(val)) {
                it->type = GM_SETTING_STR;
                if ((st = snap_intern_str(b, val, "allocator_settings", &it->s)) != GM_OK)
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

enum gm_status snap_read_annotations(struct builder *b, pk_val v)
{
    const struct pk_node *l = snap_as_list(v);
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
        return snap_nomem(b);
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
            enum word w = snap_word_of(b, k);
            st = GM_OK;
            if (w == W_NAME)
                st = snap_intern_str(b, val, "name", &a->name);
            else if (w == W_STAGE)
                st = snap_intern_str(b, val, "stage", &a->stage);
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
        return snap_nomem(b);
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

static enum gm_status read_segment_list(struct builder *b, pk_val segments, bool host,
                                        const struct gm_snapshot_segment **out, size_t *n_out,
                                        size_t *n_blocks)
{
    const struct pk_node *segl = snap_as_list(segments);
    struct gm_snapshot_segment *segs = NULL;
    enum gm_status st;
    if (!segl)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: '%s' is a %s, expected a list",
                       host ? "host_segments" : "segments", pk_type_name(segments));
    if (segl->len) {
        segs = gm_arena_calloc(b->arena, segl->len, sizeof(*segs));
        if (!segs)
            return snap_nomem(b);
    }
    for (uint32_t i = 0; i < segl->len; i++) {
        if ((st = read_segment(b, segl->items[i], i, host, &segs[i])) != GM_OK)
            return host ? gm_error_prefix(b->err, "host_segments") : st;
        *n_blocks += segs[i].n_blocks;
    }
    if (!host && segl->len > 1 && (st = group_segments(b, &segs, segl->len)) != GM_OK)
        return st;
    *out = segs;
    *n_out = segl->len;
    return GM_OK;
}

enum gm_status snap_read_segments(struct builder *b, pk_val segments)
{
    struct gm_snapshot *s = &b->impl->pub;
    return read_segment_list(b, segments, false, &s->segments, &s->n_segments, &s->n_blocks);
}

enum gm_status snap_read_host_segments(struct builder *b, pk_val segments)
{
    struct gm_snapshot *s = &b->impl->pub;
    s->host.n_segments = 0;
    return read_segment_list(b, segments, true, &s->host_segments, &s->n_host_segments,
                             &s->n_host_blocks);
}
