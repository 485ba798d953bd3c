/* SPDX-License-Identifier: MIT */
/* replay.c - replay a snapshot's device traces through the allocator model (replay.h).
 *
 * Per device: (1) a scan checks the soundness conditions of allocator-model.md 10.4;
 * (2) the model runs with the snapshot's own settings on an unlimited fake device, and its
 * segment events are compared with the recorded ones; where the recording frees segments
 * that the model still caches, an empty_cache() call is inferred at that trace position;
 * (3) with what-if settings the same sequence runs again, with the inferred empty_cache()
 * calls at the same positions, on a device of the given size.
 *
 * Trace addresses key live tensors: an alloc maps its recorded address to the model's
 * address and its free_completed looks it up (an address is reused only after its free).
 * free_requested is ignored: a block returns to the pool at free_completed (record_stream
 * delays, 10.4 item 4). */
#include "gpumem/replay.h"

#include "alloc/alloc_int.h"

#include "base/vec.h"

#include "gpumem/arena.h"
#include "gpumem/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- event lists ---------------------------------------------------------------------- */

struct evlist {
    struct gm_replay_event *v;
    size_t n;
    size_t cap;
    bool failed; /* an append ran out of memory */
};

static void ev_push(struct evlist *l, enum gm_alloc_event_kind k, uint64_t size, int64_t at)
{
    struct gm_replay_event *e = GM_VEC_PUSH(l->v, l->n, l->cap, NULL);
    if (!e) {
        l->failed = true;
        return;
    }
    e->kind = k;
    e->size = size;
    e->trace_index = at;
}

/* ---- the state at the start of a late trace ------------------------------------------- */

struct seed_seg {
    uint64_t addr; /* its recorded address */
    uint64_t size; /* bytes */
    int64_t stream;
    bool small;
};

struct seed_alloc {
    uint64_t addr;
    uint64_t size; /* requested bytes */
    int64_t stream;
};

/* What existed before the first trace event: the segments, and the allocations alive from
 * the start (freed in the trace without an alloc before, or allocated at snapshot time with
 * no alloc in the trace). */
struct initial {
    struct seed_seg *segs;
    size_t n_segs, cap_segs;
    struct seed_alloc *allocs;
    size_t n_allocs, cap_allocs;
    bool failed; /* an append ran out of memory */
};

static void initial_release(struct initial *ini)
{
    gm_free(ini->segs);
    gm_free(ini->allocs);
    memset(ini, 0, sizeof(*ini));
}

static void add_seg(struct initial *ini, uint64_t addr, uint64_t size, int64_t stream, bool small)
{
    struct seed_seg *g = GM_VEC_PUSH(ini->segs, ini->n_segs, ini->cap_segs, NULL);
    if (!g) {
        ini->failed = true;
        return;
    }
    *g = (struct seed_seg){addr, size, stream, small};
}

static void add_alloc(struct initial *ini, uint64_t addr, uint64_t size, int64_t stream)
{
    struct seed_alloc *x = GM_VEC_PUSH(ini->allocs, ini->n_allocs, ini->cap_allocs, NULL);
    if (!x) {
        ini->failed = true;
        return;
    }
    *x = (struct seed_alloc){addr, size, stream};
}

struct run_ctx {
    const struct gm_snapshot *snap;
    struct evlist pred;
    int64_t at;       /* trace index being replayed */
    uint64_t n_frees; /* segment_free + segment_unmap produced */
};

static void on_model_event(void *ctx, enum gm_alloc_event_kind k, uint64_t addr, uint64_t size,
                           int64_t stream)
{
    struct run_ctx *rc = ctx;
    (void)addr;
    (void)stream;
    if (k == GM_ALLOC_EV_OOM)
        return;
    if (k == GM_ALLOC_EV_SEGMENT_FREE || k == GM_ALLOC_EV_SEGMENT_UNMAP)
        rc->n_frees++;
    ev_push(&rc->pred, k, size, rc->at);
}

/* ---- settings ------------------------------------------------------------------------- */

static unsigned log2_u64(uint64_t v)
{
    unsigned r = 0;
    while (v >>= 1)
        r++;
    return r;
}

void gm_replay_snapshot_conf(const struct gm_snapshot *snap, struct gm_alloc_conf *conf,
                             bool *assumed)
{
    gm_alloc_conf_init(conf);
    *assumed = !snap->has_allocator_settings;
    if (!snap->has_allocator_settings) {
        /* no settings recorded: expandable segments still show in the file */
        for (size_t i = 0; i < snap->n_segments; i++)
            if (snap->segments[i].is_expandable)
                conf->expandable_segments = true;
        for (size_t d = 0; d < snap->n_devices && !conf->expandable_segments; d++) {
            struct gm_snapshot_cursor c;
            const struct gm_snapshot_event *e;
            gm_snapshot_cursor_init(&c, &snap->devices[d], 0);
            while ((e = gm_snapshot_cursor_next(&c)) != NULL)
                if (e->action == GM_ACTION_SEGMENT_MAP) {
                    conf->expandable_segments = true;
                    break;
                }
        }
        return;
    }
    /* the string first (it holds what has no field of its own, such as
     * max_non_split_rounding_mb), then the resolved fields, which are authoritative */
    for (size_t i = 0; i < snap->n_settings; i++) {
        const struct gm_snapshot_setting *s = &snap->settings[i];
        if (!strcmp(s->key, "PYTORCH_CUDA_ALLOC_CONF") && s->type == GM_SETTING_STR && s->s) {
            struct gm_alloc_conf c = *conf;
            if (gm_alloc_conf_parse(&c, s->s, NULL) == GM_OK)
                *conf = c;
        }
    }
    for (size_t i = 0; i < snap->n_settings; i++) {
        const struct gm_snapshot_setting *s = &snap->settings[i];
        if (!strcmp(s->key, "max_split_size") && s->type == GM_SETTING_INT) {
            conf->max_split_size = s->i < 0 ? GM_ALLOC_NO_SPLIT_LIMIT : (uint64_t)s->i;
        } else if (!strcmp(s->key, "garbage_collection_threshold") &&
                   (s->type == GM_SETTING_FLOAT || s->type == GM_SETTING_INT)) {
            conf->garbage_collection_threshold = s->d > 0.0 && s->d < 1.0 ? s->d : 0.0;
        } else if (!strcmp(s->key, "expandable_segments") && s->type == GM_SETTING_BOOL) {
            conf->expandable_segments = s->i != 0;
        } else if (!strncmp(s->key, "roundup_power2_divisions.", 25) && s->type == GM_SETTING_INT &&
                   s->i >= 0 && s->i <= UINT32_MAX) {
            uint64_t mb = 0;
            if (gm_parse_u64(s->key + 25, &mb, NULL) == GM_OK && mb) {
                unsigned idx = log2_u64(mb);
                if (idx < GM_ALLOC_ROUNDUP_INTERVALS)
                    conf->roundup_power2_divisions[idx] = (uint32_t)s->i;
            }
        }
    }
}

/* ---- soundness scan ------------------------------------------------------------------- */

static enum gm_alloc_event_kind kind_of(uint8_t a)
{
    switch (a) {
    case GM_ACTION_SEGMENT_ALLOC:
        return GM_ALLOC_EV_SEGMENT_ALLOC;
    case GM_ACTION_SEGMENT_FREE:
        return GM_ALLOC_EV_SEGMENT_FREE;
    case GM_ACTION_SEGMENT_MAP:
        return GM_ALLOC_EV_SEGMENT_MAP;
    default:
        return GM_ALLOC_EV_SEGMENT_UNMAP;
    }
}

/* Note why a trace starts late (the first reason found is kept). */
static void late(struct gm_replay_device *rd, const char *why)
{
    if (rd->late_start)
        return;
    rd->late_start = true;
    snprintf(rd->late_start_note, sizeof(rd->late_start_note), "%s", why);
}

/* Check the conditions; fills rd->replayable/reason, the recorded figures and the late
 * start, 'rec' with the recorded segment events and 'ini' with the state at the start. */
static enum gm_status scan(const struct gm_snapshot *snap, const struct gm_snapshot_device *dev,
                           struct gm_replay_device *rd, struct evlist *rec, struct initial *ini)
{
    struct gm_map live = GM_MAP_INIT, segs = GM_MAP_INIT; /* recorded addresses */
    int64_t net = 0, max_net = 0, min_net = 0;            /* reserved bytes relative to the start */
    uint64_t final_total = 0;
    bool expandable = false;
    enum gm_status st = GM_OK;
    char why[200];

    rd->replayable = true;
    for (size_t i = 0; i < dev->n_segments; i++) {
        const struct gm_snapshot_segment *s = &snap->segments[dev->first_segment + i];
        final_total += s->total_size;
        expandable = expandable || s->is_expandable;
        if (s->has_pool_id && (s->pool_id[0] != 0 || s->pool_id[1] != 0) && rd->replayable) {
            rd->replayable = false;
            snprintf(rd->reason, sizeof(rd->reason),
                     "segment at 0x%llx is in private pool (%lld,%lld) (CUDA graph or MemPool), "
                     "which the model does not replay",
                     (unsigned long long)s->address, (long long)s->pool_id[0],
                     (long long)s->pool_id[1]);
        }
    }
    rd->recorded_final_reserved_bytes = final_total;
    if (snap->trace_overflowed)
        late(rd, "the trace ring buffer overflowed (trace_alloc_overflowed): its first events "
                 "are lost");
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    gm_snapshot_cursor_init(&c, dev, 0);
    while ((e = gm_snapshot_cursor_next(&c)) != NULL) {
        size_t k = c.index;
        switch (e->action) {
        case GM_ACTION_ALLOC:
            rd->n_allocs++;
            if (gm_map_get(&live, e->addr, NULL) && rd->replayable) {
                rd->replayable = false;
                snprintf(rd->reason, sizeof(rd->reason),
                         "event %zu allocates 0x%llx, which is still live: the trace is "
                         "inconsistent",
                         k, (unsigned long long)e->addr);
            }
            st = gm_map_put(&live, e->addr, 1) ? GM_OK : GM_ERR_NOMEM;
            break;
        case GM_ACTION_FREE_COMPLETED:
            if (!gm_map_take(&live, e->addr, NULL)) {
                snprintf(why, sizeof(why),
                         "event %zu frees 0x%llx, which the trace never allocated: recording "
                         "started after the allocation or the ring buffer wrapped",
                         k, (unsigned long long)e->addr);
                late(rd, why);
                add_alloc(ini, e->addr, e->size, (int64_t)gm_snapshot_event_stream(snap, e));
            }
            break;
        case GM_ACTION_SEGMENT_ALLOC:
        case GM_ACTION_SEGMENT_MAP:
            net += (int64_t)e->size;
            if (net > max_net)
                max_net = net;
            rd->recorded_segment_events++;
            ev_push(rec, kind_of(e->action), e->size, (int64_t)k);
            if (e->action == GM_ACTION_SEGMENT_ALLOC)
                st = gm_map_put(&segs, e->addr, e->size) ? GM_OK : GM_ERR_NOMEM;
            break;
        case GM_ACTION_SEGMENT_FREE:
        case GM_ACTION_SEGMENT_UNMAP:
            rd->recorded_segment_events++;
            ev_push(rec, kind_of(e->action), e->size, (int64_t)k);
            net -= (int64_t)e->size;
            if (net < min_net)
                min_net = net;
            if (e->action == GM_ACTION_SEGMENT_FREE) {
                if (!gm_map_take(&segs, e->addr, NULL)) {
                    snprintf(why, sizeof(why),
                             "event %zu frees segment 0x%llx, which the trace never allocated: "
                             "recording started late",
                             k, (unsigned long long)e->addr);
                    late(rd, why);
                    add_seg(ini, e->addr, e->size, (int64_t)gm_snapshot_event_stream(snap, e),
                            e->size == GM_ALLOC_SMALL_BUFFER);
                }
            }
            break;
        case GM_ACTION_OOM:
            rd->recorded_ooms++;
            break;
        default:
            break;
        }
        if (!st && (rec->failed || ini->failed))
            st = GM_ERR_NOMEM;
        if (st)
            goto out_release;
    }
    /* a trace that starts late began with (final - net) bytes already reserved */
    {
        int64_t initial = (int64_t)final_total - net;
        if (initial < -min_net)
            initial = -min_net;
        if (initial < 0)
            initial = 0;
        rd->recorded_peak_reserved_bytes = (uint64_t)(initial + max_net);
    }
    if (rd->replayable && rd->n_allocs == 0) {
        rd->replayable = false;
        snprintf(rd->reason, sizeof(rd->reason),
                 "the trace holds no alloc event (%zu entries): nothing to replay", dev->n_events);
    }
    /* what existed from before the trace: the final segments it did not create, and the
     * blocks allocated at snapshot time that it did not allocate */
    for (size_t i = 0; i < dev->n_segments; i++) {
        const struct gm_snapshot_segment *sg = &snap->segments[dev->first_segment + i];
        /* (a 2 MiB segment is the small pool's whatever the file says: the large pool
         * never makes one) */
        if (!sg->is_expandable && !gm_map_get(&segs, sg->address, NULL))
            add_seg(ini, sg->address, sg->total_size, (int64_t)sg->stream,
                    sg->is_small || sg->total_size == GM_ALLOC_SMALL_BUFFER);
        for (size_t b = 0; b < sg->n_blocks; b++) {
            const struct gm_snapshot_block *bl = &sg->blocks[b];
            if ((bl->state == GM_BLOCK_ACTIVE_ALLOCATED ||
                 bl->state == GM_BLOCK_ACTIVE_PENDING_FREE) &&
                !gm_map_get(&live, bl->address, NULL))
                add_alloc(ini, bl->address, bl->requested_size, (int64_t)sg->stream);
        }
    }
    if (ini->failed) {
        st = GM_ERR_NOMEM;
        goto out_release;
    }
    if (net != (int64_t)final_total) {
        char a[32], b[32];
        snprintf(why, sizeof(why),
                 "the trace does not start from an empty allocator: its segment events account "
                 "for %s but the snapshot holds %s",
                 gm_format_bytes(a, sizeof(a), net > 0 ? (uint64_t)net : 0, GM_UNITS_IEC),
                 gm_format_bytes(b, sizeof(b), final_total, GM_UNITS_IEC));
        late(rd, why);
    }
    if (ini->n_allocs && !rd->late_start)
        late(rd, "blocks allocated at snapshot time have no alloc in the trace: recording "
                 "started after them");
    if (rd->late_start) {
        for (size_t i = 0; i < ini->n_segs; i++)
            rd->initial_reserved_bytes += ini->segs[i].size;
        if (expandable) {
            int64_t initial = (int64_t)final_total - net;
            rd->initial_reserved_bytes = initial > 0 ? (uint64_t)initial : 0;
        }
        rd->initial_segments = ini->n_segs;
        rd->initial_allocations = ini->n_allocs;
        for (size_t i = 0; i < ini->n_allocs; i++)
            rd->initial_allocated_bytes += ini->allocs[i].size;
        snprintf(rd->late_start_unknown, sizeof(rd->late_start_unknown), "%s",
                 expandable ? "which pages of the expandable segments were mapped but free at "
                              "the start (the model maps what the allocations alive then need)"
                            : "which free ranges between the allocations alive at the start "
                              "were split (the model places those allocations where their "
                              "addresses say and takes the space between as merged)");
    }
out_release:
    gm_map_release(&live);
    gm_map_release(&segs);
    return st;
}

/* ---- model runs ----------------------------------------------------------------------- */

struct sizes {
    uint64_t *v; /* final segment sizes */
    size_t n;
    uint64_t *blocks; /* final allocated block sizes */
    size_t n_blocks;
};

/* blocks the model still holds at the end: allocated, or freed but pending on another
 * stream (no free_completed yet) */
static bool is_held(enum gm_block_state st)
{
    return st == GM_BLOCK_ACTIVE_ALLOCATED || st == GM_BLOCK_ACTIVE_PENDING_FREE;
}

static int cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* Whether the model's final segments have the sizes of the snapshot's. */
static enum gm_status compare_final(const struct gm_snapshot *snap,
                                    const struct gm_snapshot_device *dev, struct sizes *model,
                                    struct gm_replay_device *rd)
{
    uint64_t *rec = gm_calloc(dev->n_segments ? dev->n_segments : 1, sizeof(uint64_t));
    if (!rec)
        return GM_ERR_NOMEM;
    for (size_t i = 0; i < dev->n_segments; i++)
        rec[i] = snap->segments[dev->first_segment + i].total_size;
    qsort(rec, dev->n_segments, sizeof(uint64_t), cmp_u64);
    qsort(model->v, model->n, sizeof(uint64_t), cmp_u64);
    rd->final_segments_recorded = dev->n_segments;
    rd->final_segments_model = model->n;
    rd->final_segments_match =
        model->n == dev->n_segments &&
        (model->n == 0 || !memcmp(rec, model->v, model->n * sizeof(uint64_t)));
    gm_free(rec);
    /* the allocated blocks */
    {
        size_t n = 0, k = 0;
        for (size_t i = 0; i < dev->n_segments; i++) {
            const struct gm_snapshot_segment *sg = &snap->segments[dev->first_segment + i];
            for (size_t j = 0; j < sg->n_blocks; j++)
                n += is_held(sg->blocks[j].state);
        }
        rec = gm_calloc(n ? n : 1, sizeof(uint64_t));
        if (!rec)
            return GM_ERR_NOMEM;
        for (size_t i = 0; i < dev->n_segments; i++) {
            const struct gm_snapshot_segment *sg = &snap->segments[dev->first_segment + i];
            for (size_t j = 0; j < sg->n_blocks; j++)
                if (is_held(sg->blocks[j].state))
                    rec[k++] = sg->blocks[j].size;
        }
        qsort(rec, n, sizeof(uint64_t), cmp_u64);
        qsort(model->blocks, model->n_blocks, sizeof(uint64_t), cmp_u64);
        rd->final_blocks_recorded = n;
        rd->final_blocks_model = model->n_blocks;
        rd->final_blocks_match =
            n == model->n_blocks && (n == 0 || !memcmp(rec, model->blocks, n * sizeof(uint64_t)));
        gm_free(rec);
    }
    return GM_OK;
}

struct empties {
    int64_t *at; /* trace indices of inferred empty_cache() calls, ascending */
    size_t n;
    size_t cap;
};

static int seg_by_addr(const void *x, const void *y)
{
    const struct seed_seg *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static int alloc_by_addr(const void *x, const void *y)
{
    const struct seed_alloc *a = x, *b = y;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

/* The blocks of the allocations segs[s] held at the start: each where it sat (its offset in
 * the segment), its size rounded as the allocator rounds it, and in the large pool with the
 * free rest up to the next block kept when it is 1 MiB or less (the allocator splits off
 * only a larger rest, so no smaller free block exists there).  placed[i] marks allocs[i]. */
static size_t seg_blocks(const struct gm_alloc *a, const struct seed_seg *g,
                         const struct seed_alloc *allocs, size_t n_allocs, size_t *first,
                         struct alloc_seed_block *out)
{
    size_t lo = 0, hi = n_allocs, n = 0;
    while (lo < hi) { /* the first allocation at or above the segment */
        size_t mid = lo + (hi - lo) / 2;
        if (allocs[mid].addr < g->addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    *first = lo;
    for (size_t i = lo; i < n_allocs && allocs[i].addr - g->addr < g->size; i++) {
        const struct seed_alloc *x = &allocs[i];
        uint64_t off = x->addr - g->addr, room = g->size - off;
        uint64_t size = gm_alloc_round_size(&a->conf, x->size);
        if (i + 1 < n_allocs && allocs[i + 1].addr - g->addr < g->size)
            room = allocs[i + 1].addr - x->addr;
        if (size > room)
            size = room;
        if (!g->small && room - size <= GM_ALLOC_SMALL_SIZE)
            size = room;
        out[n++] = (struct alloc_seed_block){off, size, x->size};
    }
    return n;
}

/* Put the model in the state of a late trace's start: the segments that existed then, each
 * with the allocations alive from the start where they sat in it (their recorded addresses
 * tell), in address order; an allocation in no such segment (or in an expandable one) is
 * then placed by the model's best fit.  'map' gets each allocation's trace address.  No
 * event reaches the hook, and the statistics start from this state.  An allocation that does
 * not fit counts as an out-of-memory error at the start. */
static enum gm_status seed(struct gm_alloc *a, const struct initial *ini, struct gm_map *map,
                           struct gm_replay_run *out, struct gm_error *err)
{
    size_t n_segs = ini->n_segs, n_allocs = ini->n_allocs;
    struct seed_seg *segs = gm_calloc(n_segs ? n_segs : 1, sizeof(*segs));
    struct seed_alloc *allocs = gm_calloc(n_allocs ? n_allocs : 1, sizeof(*allocs));
    struct alloc_seed_block *blocks = gm_calloc(n_allocs ? n_allocs : 1, sizeof(*blocks));
    uint64_t *ptrs = gm_calloc(n_allocs ? n_allocs : 1, sizeof(*ptrs));
    bool *placed = gm_calloc(n_allocs ? n_allocs : 1, sizeof(*placed));
    bool exact = !a->conf.expandable_segments;
    enum gm_status st = GM_OK;
    if (!segs || !allocs || !blocks || !ptrs || !placed) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
        goto out_free;
    }
    if (n_segs)
        memcpy(segs, ini->segs, n_segs * sizeof(*segs));
    if (n_allocs)
        memcpy(allocs, ini->allocs, n_allocs * sizeof(*allocs));
    qsort(segs, n_segs, sizeof(*segs), seg_by_addr);
    qsort(allocs, n_allocs, sizeof(*allocs), alloc_by_addr);
    for (size_t i = 0; i < n_segs && st == GM_OK; i++) {
        const struct seed_seg *g = &segs[i];
        size_t first = 0, n = exact ? seg_blocks(a, g, allocs, n_allocs, &first, blocks) : 0;
        uint64_t ptr = 0;
        if (exact) {
            /* a 2 MiB segment is the small pool's whatever the file says: the large pool
             * never makes one */
            st = alloc_seed_segment(a, g->small, g->small ? GM_ALLOC_SMALL_BUFFER : g->size,
                                    g->stream, blocks, n, ptrs, err);
            for (size_t k = 0; st == GM_OK && k < n; k++) {
                if (!ptrs[k])
                    continue;
                placed[first + k] = true;
                if (!gm_map_put(map, allocs[first + k].addr, ptrs[k]))
                    st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
            }
        } else {
            /* a request of the small pool makes a 2 MiB small segment; one of a large
             * segment's size makes that segment, freed at once so that it stays cached */
            st = gm_alloc_malloc(a, g->small ? GM_ALLOC_SMALL_SIZE : g->size, g->stream, &ptr, err);
            if (st == GM_OK && ptr)
                st = gm_alloc_dealloc(a, ptr, err);
        }
        if (st == GM_ERR_LIMIT) {
            out->n_ooms++;
            out->n_ooms_at_start++;
            st = GM_OK;
        }
    }
    for (size_t i = 0; i < n_allocs && st == GM_OK; i++) {
        const struct seed_alloc *x = &allocs[i];
        uint64_t ptr = 0;
        if (placed[i])
            continue;
        st = gm_alloc_malloc(a, x->size, x->stream, &ptr, err);
        if (st == GM_ERR_LIMIT) {
            out->n_ooms++;
            out->n_ooms_at_start++;
            st = GM_OK;
        } else if (st == GM_OK && ptr && !gm_map_put(map, x->addr, ptr)) {
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
        }
    }
    gm_alloc_reset_peak(a);
    gm_alloc_reset_accumulated(a);
out_free:
    gm_free(segs);
    gm_free(allocs);
    gm_free(blocks);
    gm_free(ptrs);
    gm_free(placed);
    return st;
}

/* One replay of 'dev'.  infer: the validation run (infers empty_cache into *emp);
 * otherwise empty_cache is called at the positions in *emp.  'ini': the state at the start
 * of a late trace, NULL for a trace that starts from an empty allocator. */
static enum gm_status run(const struct gm_snapshot_device *dev, const struct gm_alloc_conf *conf,
                          uint64_t capacity, uint64_t device_bytes, double fraction, bool infer,
                          const struct initial *ini, struct empties *emp, struct run_ctx *rc,
                          struct gm_replay_run *out, struct sizes *final, struct gm_error *err)
{
    struct gm_alloc_fakedev fake;
    struct gm_alloc_device d;
    struct gm_alloc *a = NULL;
    struct gm_map map = GM_MAP_INIT; /* recorded address -> model address */
    uint64_t rec_frees = 0, best_reserved = 0, best_allocated = 0;
    size_t next_empty = 0;
    enum gm_status st;

    memset(out, 0, sizeof(*out));
    out->first_oom_event = -1;
    gm_alloc_fakedev_init(&fake, capacity);
    d.ops = &gm_alloc_fakedev_ops;
    d.ctx = &fake;
    /* the expandable range is 1.125 x device memory; unknown memory: size it for 1 TiB */
    d.total_bytes = device_bytes ? device_bytes : GM_TIB;
    st = gm_alloc_new(conf, &d, &a, err);
    if (st)
        return st;
    if (fraction > 0.0) {
        st = gm_alloc_set_memory_fraction(a, fraction, err);
        if (st)
            goto out_free;
    }
    if (ini && (st = seed(a, ini, &map, out, err)) != GM_OK)
        goto out_free;
    gm_alloc_set_event_hook(a, on_model_event, rc);
    best_reserved = a->stats.reserved_bytes[GM_ALLOC_STAT_ALL].current;
    best_allocated = a->stats.allocated_bytes[GM_ALLOC_STAT_ALL].current;
    out->allocated_at_peak_reserved_bytes = best_allocated;
    out->reserved_at_peak_allocated_bytes = best_reserved;
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    gm_snapshot_cursor_init(&c, dev, 0);
    while ((e = gm_snapshot_cursor_next(&c)) != NULL) {
        size_t k = c.index;
        uint64_t ptr = 0;
        rc->at = (int64_t)k;
        if (!infer && next_empty < emp->n && emp->at[next_empty] == (int64_t)k) {
            gm_alloc_empty_cache(a);
            next_empty++;
        }
        switch (e->action) {
        case GM_ACTION_ALLOC:
            st = gm_alloc_malloc(a, e->size, (int64_t)gm_snapshot_event_stream(rc->snap, e), &ptr,
                                 err);
            if (st == GM_ERR_LIMIT) {
                if (!out->n_ooms++) {
                    out->first_oom_event = (int64_t)k;
                    out->first_oom_request_bytes = e->size;
                }
                st = GM_OK;
            } else if (st == GM_OK && ptr && !gm_map_put(&map, e->addr, ptr)) {
                st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
            }
            break;
        case GM_ACTION_FREE_COMPLETED:
            if (gm_map_take(&map, e->addr, &ptr))
                st = gm_alloc_dealloc(a, ptr, err);
            break;
        case GM_ACTION_SEGMENT_FREE:
        case GM_ACTION_SEGMENT_UNMAP:
            rec_frees++;
            if (infer && rc->n_frees < rec_frees) {
                /* the recording gave memory back that the model still caches: an
                 * empty_cache() (or an OOM flush) happened here */
                int64_t *at = GM_VEC_PUSH(emp->at, emp->n, emp->cap, NULL);
                if (!at) {
                    st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
                    break;
                }
                *at = (int64_t)k;
                gm_alloc_empty_cache(a);
            }
            break;
        default:
            break;
        }
        if (st)
            goto out_free;
        if (rc->pred.failed) {
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
            goto out_free;
        }
        {
            const struct gm_alloc_stats *s = &a->stats;
            uint64_t r = s->reserved_bytes[GM_ALLOC_STAT_ALL].current;
            uint64_t al = s->allocated_bytes[GM_ALLOC_STAT_ALL].current;
            if (r > best_reserved) {
                best_reserved = r;
                out->allocated_at_peak_reserved_bytes = al;
            }
            if (al > best_allocated) {
                best_allocated = al;
                out->reserved_at_peak_allocated_bytes = r;
            }
        }
    }
    gm_alloc_get_stats(a, &out->stats);
    out->segment_events = rc->pred.n;
    out->peak_reserved_bytes = out->stats.reserved_bytes[GM_ALLOC_STAT_ALL].peak;
    out->peak_allocated_bytes = out->stats.allocated_bytes[GM_ALLOC_STAT_ALL].peak;
    out->final_reserved_bytes = out->stats.reserved_bytes[GM_ALLOC_STAT_ALL].current;
    out->final_allocated_bytes = out->stats.allocated_bytes[GM_ALLOC_STAT_ALL].current;
    out->n_alloc_retries = out->stats.num_alloc_retries;
    out->unallocated_at_peak_allocated_bytes =
        out->reserved_at_peak_allocated_bytes > out->peak_allocated_bytes
            ? out->reserved_at_peak_allocated_bytes - out->peak_allocated_bytes
            : 0;
    if (final) {
        size_t n = gm_alloc_segment_sizes(a, NULL, 0);
        final->v = gm_calloc(n ? n : 1, sizeof(uint64_t));
        if (!final->v) {
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
            goto out_free;
        }
        final->n = gm_alloc_segment_sizes(a, final->v, n);
        final->blocks = gm_calloc(gm_map_count(&a->active) + 1, sizeof(uint64_t));
        if (!final->blocks) {
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
            goto out_free;
        }
        for (size_t pos = 0;;) {
            const struct block *b = alloc_active_next(a, &pos);
            if (!b)
                break;
            final->blocks[final->n_blocks++] = b->size;
        }
    }
out_free:
    gm_map_release(&map);
    gm_alloc_free(a);
    return st;
}

/* Compare recorded and predicted segment events (kind and size, in order). */
static void compare(const struct evlist *rec, const struct evlist *pred,
                    struct gm_replay_device *rd)
{
    size_t ip = 0;
    rd->segment_events_matched = 0;
    rd->has_divergence = false;
    for (size_t i = 0; i <= rec->n; i++) {
        const struct gm_replay_event *e = i < rec->n ? &rec->v[i] : NULL;
        if (!e && ip == pred->n)
            return;
        if (e && ip < pred->n && pred->v[ip].kind == e->kind && pred->v[ip].size == e->size) {
            rd->segment_events_matched++;
            ip++;
            continue;
        }
        rd->has_divergence = true;
        rd->first_divergence.index = i;
        rd->first_divergence.has_recorded = e != NULL;
        if (e)
            rd->first_divergence.recorded = *e;
        rd->first_divergence.has_predicted = ip < pred->n;
        if (ip < pred->n)
            rd->first_divergence.predicted = pred->v[ip];
        return;
    }
}

/* What one device's replays share: the state at the start of a late trace and the
 * inferred empty_cache() calls. */
struct prep {
    struct initial ini;
    struct empties emp;
};

static void prep_release(struct prep *p)
{
    initial_release(&p->ini);
    gm_free(p->emp.at);
    memset(p, 0, sizeof(*p));
}

/* The soundness scan and the validation run of 'dev' with the recorded settings 'own' into
 * rd; 'p' then holds what the other runs need (when rd->replayable). */
static enum gm_status prepare(const struct gm_snapshot *snap, const struct gm_snapshot_device *dev,
                              const struct gm_alloc_conf *own, uint64_t device_bytes,
                              struct gm_replay_device *rd, struct prep *p, struct gm_error *err)
{
    struct sizes final = {NULL, 0, NULL, 0};
    struct evlist rec = {NULL, 0, 0, false};
    struct run_ctx rc;
    enum gm_status st;
    memset(p, 0, sizeof(*p));
    rd->device = dev->index;
    rd->n_trace_events = dev->n_events;
    st = scan(snap, dev, rd, &rec, &p->ini);
    if (st) {
        gm_free(rec.v);
        return gm_fail(err, st, GM_NO_OFFSET, "replay: out of memory");
    }
    if (rd->replayable && own->backend != GM_ALLOC_BACKEND_NATIVE) {
        rd->replayable = false;
        snprintf(rd->reason, sizeof(rd->reason),
                 "recorded with backend:cudaMallocAsync, which the model does not replay");
    }
    if (!rd->replayable) {
        gm_free(rec.v);
        return GM_OK;
    }
    memset(&rc, 0, sizeof(rc));
    rc.snap = snap;
    st = run(dev, own, 0, device_bytes, 0.0, true, rd->late_start ? &p->ini : NULL, &p->emp, &rc,
             &rd->own, &final, err);
    if (st == GM_OK) {
        compare(&rec, &rc.pred, rd);
        rd->n_inferred_empty_cache = p->emp.n;
        if (compare_final(snap, dev, &final, rd))
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
    }
    gm_free(final.v);
    gm_free(final.blocks);
    gm_free(rc.pred.v);
    gm_free(rec.v);
    return st;
}

/* A prediction run of a prepared device under 'conf'. */
static enum gm_status predict(const struct gm_snapshot *snap, const struct gm_snapshot_device *dev,
                              const struct gm_replay_device *rd, struct prep *p,
                              const struct gm_alloc_conf *conf, uint64_t device_bytes,
                              double fraction, struct gm_replay_run *out, struct gm_error *err)
{
    struct run_ctx rc;
    enum gm_status st;
    memset(&rc, 0, sizeof(rc));
    rc.snap = snap;
    st = run(dev, conf, device_bytes, device_bytes, fraction, false,
             rd->late_start ? &p->ini : NULL, &p->emp, &rc, out, NULL, err);
    gm_free(rc.pred.v);
    return st;
}

static enum gm_status check_opts(const struct gm_snapshot *snap, const struct gm_replay_opts *opts,
                                 struct gm_error *err)
{
    if (opts->memory_fraction != 0.0 &&
        (!(opts->memory_fraction > 0.0 && opts->memory_fraction <= 1.0) || !opts->device_bytes))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "replay: a memory fraction needs the device memory and must be in (0, 1]");
    if (snap->events_dropped)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "replay: the snapshot was loaded without its events");
    return GM_OK;
}

enum gm_status gm_replay_snapshot(const struct gm_snapshot *snap, const struct gm_replay_opts *opts,
                                  struct gm_replay_result *out, struct gm_error *err)
{
    struct gm_replay_opts none;
    size_t n = 0;
    enum gm_status st = GM_OK;

    memset(out, 0, sizeof(*out));
    if (!opts) {
        memset(&none, 0, sizeof(none));
        opts = &none;
    }
    if ((st = check_opts(snap, opts, err)) != GM_OK)
        return st;
    gm_replay_snapshot_conf(snap, &out->own_conf, &out->own_conf_assumed);
    gm_alloc_conf_format(&out->own_conf, out->own_conf_string, sizeof(out->own_conf_string));
    for (size_t d = 0; d < snap->n_devices; d++)
        if (snap->devices[d].n_events)
            n++;
    if (!n)
        return GM_OK;
    out->devices = gm_calloc(n, sizeof(*out->devices));
    if (!out->devices)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
    for (size_t d = 0; d < snap->n_devices && st == GM_OK; d++) {
        const struct gm_snapshot_device *dev = &snap->devices[d];
        struct gm_replay_device *rd;
        struct prep p;
        /* device memory alone: what the recorded settings do on a device of that size */
        const struct gm_alloc_conf *what_if = opts->what_if        ? opts->what_if
                                              : opts->device_bytes ? &out->own_conf
                                                                   : NULL;
        if (!dev->n_events)
            continue;
        rd = &out->devices[out->n_devices++];
        st = prepare(snap, dev, &out->own_conf, opts->device_bytes, rd, &p, err);
        if (st == GM_OK && rd->replayable && what_if) {
            st = predict(snap, dev, rd, &p, what_if, opts->device_bytes, opts->memory_fraction,
                         &rd->what_if, err);
            rd->has_what_if = st == GM_OK;
        }
        prep_release(&p);
    }
    if (st)
        gm_replay_release(out);
    return st;
}

/* ---- comparing the common settings ---------------------------------------------------- */

const char *gm_replay_verdict_name(enum gm_replay_verdict v)
{
    static const char *const names[] = {"keep", "change", "avoids_oom", "nothing_fits"};
    return (unsigned)v < sizeof(names) / sizeof(names[0]) ? names[v] : "keep";
}

/* Add the recorded settings with the change 'change' (parsed on top of them), unless it
 * changes nothing. */
static void add_choice(struct gm_replay_comparison *c, const struct gm_alloc_conf *own,
                       const char *change)
{
    struct gm_replay_choice *ch;
    struct gm_alloc_conf conf = *own;
    char a[256], b[256];
    if (c->n_choices >= GM_REPLAY_MAX_CHOICES)
        return;
    if (*change && gm_alloc_conf_parse(&conf, change, NULL) != GM_OK)
        return;
    gm_alloc_conf_format(own, a, sizeof(a));
    gm_alloc_conf_format(&conf, b, sizeof(b));
    if (*change && !strcmp(a, b) &&
        conf.garbage_collection_threshold == own->garbage_collection_threshold)
        return; /* already the recorded setting */
    ch = &c->choices[c->n_choices++];
    memset(ch, 0, sizeof(*ch));
    ch->conf = conf;
    snprintf(ch->change, sizeof(ch->change), "%s", change);
    snprintf(ch->settings, sizeof(ch->settings), "%s", b);
}

/* Better first: fewer out-of-memory errors, then less peak reserved, the recorded settings
 * (and then the order tried) first among equals. */
static bool better(const struct gm_replay_choice *x, size_t ix, const struct gm_replay_choice *y,
                   size_t iy)
{
    if (x->run.n_ooms != y->run.n_ooms)
        return x->run.n_ooms < y->run.n_ooms;
    if (x->run.peak_reserved_bytes != y->run.peak_reserved_bytes)
        return x->run.peak_reserved_bytes < y->run.peak_reserved_bytes;
    return ix < iy;
}

/* A saving worth changing a setting for: 5% of the peak reserved, or 64 MiB. */
static bool worth(uint64_t from, uint64_t to)
{
    uint64_t d = from > to ? from - to : 0;
    return d >= (uint64_t)64 << 20 || (double)d >= 0.05 * (double)from;
}

static void rank_choices(struct gm_replay_comparison *c)
{
    /* insertion sort: at most GM_REPLAY_MAX_CHOICES, stable by the order tried */
    size_t order[GM_REPLAY_MAX_CHOICES];
    struct gm_replay_choice sorted[GM_REPLAY_MAX_CHOICES];
    const struct gm_replay_choice *best, *rec;
    memset(sorted, 0, sizeof(sorted));
    for (size_t i = 0; i < c->n_choices; i++) {
        size_t j = i;
        while (j > 0 && better(&c->choices[i], i, &c->choices[order[j - 1]], order[j - 1])) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    for (size_t i = 0; i < c->n_choices; i++) {
        sorted[i] = c->choices[order[i]];
        if (order[i] == 0)
            c->recorded = i;
    }
    memcpy(c->choices, sorted, c->n_choices * sizeof(sorted[0]));
    best = &c->choices[0];
    rec = &c->choices[c->recorded];
    if (best->run.n_ooms)
        c->verdict = GM_REPLAY_NOTHING_FITS;
    else if (rec->run.n_ooms)
        c->verdict = GM_REPLAY_AVOIDS_OOM;
    else if (c->recorded != 0 && worth(rec->run.peak_reserved_bytes, best->run.peak_reserved_bytes))
        c->verdict = GM_REPLAY_CHANGE;
    else
        c->verdict = GM_REPLAY_KEEP;
}

enum gm_status gm_replay_compare(const struct gm_snapshot *snap, const struct gm_replay_opts *opts,
                                 struct gm_replay_comparison **out, size_t *n_out,
                                 struct gm_error *err)
{
    static const char *const changes[] = {
        "",
        "expandable_segments:True",
        "expandable_segments:False",
        "max_split_size_mb:128",
        "max_split_size_mb:256",
        "max_split_size_mb:512",
        "garbage_collection_threshold:0.8",
        "roundup_power2_divisions:4",
    };
    struct gm_replay_opts none;
    struct gm_alloc_conf own;
    bool assumed;
    size_t n = 0;
    enum gm_status st = GM_OK;
    *out = NULL;
    *n_out = 0;
    if (!opts) {
        memset(&none, 0, sizeof(none));
        opts = &none;
    }
    if ((st = check_opts(snap, opts, err)) != GM_OK)
        return st;
    gm_replay_snapshot_conf(snap, &own, &assumed);
    *out = gm_calloc(snap->n_devices ? snap->n_devices : 1, sizeof(**out));
    if (!*out)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
    for (size_t d = 0; d < snap->n_devices && st == GM_OK; d++) {
        const struct gm_snapshot_device *dev = &snap->devices[d];
        struct gm_replay_device rd;
        struct gm_replay_comparison *c = &(*out)[n];
        struct prep p;
        /* garbage collection acts only under a memory fraction, which needs the device */
        double fraction = opts->memory_fraction > 0 ? opts->memory_fraction : 1.0;
        if (!dev->n_events)
            continue;
        memset(&rd, 0, sizeof(rd));
        st = prepare(snap, dev, &own, opts->device_bytes, &rd, &p, err);
        if (st != GM_OK || !rd.replayable) {
            prep_release(&p);
            continue;
        }
        memset(c, 0, sizeof(*c));
        c->device = dev->index;
        for (size_t i = 0; i < sizeof(changes) / sizeof(changes[0]); i++)
            if (opts->device_bytes || strncmp(changes[i], "garbage_collection", 18))
                add_choice(c, &own, changes[i]);
        for (size_t i = 0; i < c->n_choices && st == GM_OK; i++)
            st = predict(snap, dev, &rd, &p, &c->choices[i].conf, opts->device_bytes,
                         opts->device_bytes ? fraction : 0.0, &c->choices[i].run, err);
        prep_release(&p);
        if (st == GM_OK) {
            rank_choices(c);
            n++;
        }
    }
    if (st != GM_OK) {
        gm_free(*out);
        *out = NULL;
        return st;
    }
    *n_out = n;
    return GM_OK;
}

void gm_replay_release(struct gm_replay_result *r)
{
    if (!r)
        return;
    gm_free(r->devices);
    r->devices = NULL;
    r->n_devices = 0;
}
