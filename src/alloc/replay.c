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

#include "gpumem/arena.h"
#include "gpumem/units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- address map: recorded address -> model address --------------------------------- */

struct addrmap {
    uint64_t *keys;
    uint64_t *vals;
    uint8_t *used;
    size_t cap;
    size_t n;
};

static size_t am_hash(uint64_t k, size_t cap)
{
    return (size_t)(((k >> 6) * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

static void am_release(struct addrmap *m)
{
    gm_free(m->keys);
    gm_free(m->vals);
    gm_free(m->used);
    memset(m, 0, sizeof(*m));
}

static enum gm_status am_grow(struct addrmap *m)
{
    struct addrmap n = {0};
    n.cap = m->cap ? m->cap * 2 : 1024;
    n.keys = gm_calloc(n.cap, sizeof(uint64_t));
    n.vals = gm_calloc(n.cap, sizeof(uint64_t));
    n.used = gm_calloc(n.cap, 1);
    if (!n.keys || !n.vals || !n.used) {
        am_release(&n);
        return GM_ERR_NOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        size_t j;
        if (!m->used[i])
            continue;
        j = am_hash(m->keys[i], n.cap);
        while (n.used[j])
            j = (j + 1) & (n.cap - 1);
        n.used[j] = 1;
        n.keys[j] = m->keys[i];
        n.vals[j] = m->vals[i];
        n.n++;
    }
    am_release(m);
    *m = n;
    return GM_OK;
}

static size_t am_find(const struct addrmap *m, uint64_t k)
{
    size_t j;
    if (!m->cap)
        return SIZE_MAX;
    j = am_hash(k, m->cap);
    while (m->used[j]) {
        if (m->keys[j] == k)
            return j;
        j = (j + 1) & (m->cap - 1);
    }
    return SIZE_MAX;
}

static enum gm_status am_put(struct addrmap *m, uint64_t k, uint64_t v)
{
    size_t j = am_find(m, k);
    if (j != SIZE_MAX) {
        m->vals[j] = v;
        return GM_OK;
    }
    if ((m->n + 1) * 2 > m->cap && am_grow(m) != GM_OK)
        return GM_ERR_NOMEM;
    j = am_hash(k, m->cap);
    while (m->used[j])
        j = (j + 1) & (m->cap - 1);
    m->used[j] = 1;
    m->keys[j] = k;
    m->vals[j] = v;
    m->n++;
    return GM_OK;
}

static void am_remove_at(struct addrmap *m, size_t j)
{
    size_t i = j;
    m->used[i] = 0;
    m->n--;
    for (;;) {
        size_t h;
        j = (j + 1) & (m->cap - 1);
        if (!m->used[j])
            return;
        h = am_hash(m->keys[j], m->cap);
        if ((i <= j) ? (h <= i || h > j) : (h <= i && h > j)) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            m->used[i] = 1;
            m->used[j] = 0;
            i = j;
        }
    }
}

/* ---- event lists ---------------------------------------------------------------------- */

struct evlist {
    struct gm_replay_event *v;
    size_t n;
    size_t cap;
    bool failed; /* an append ran out of memory */
};

static void ev_push(struct evlist *l, enum gm_alloc_event_kind k, uint64_t size, int64_t at)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 256;
        struct gm_replay_event *v = gm_realloc(l->v, cap * sizeof(*v));
        if (!v) {
            l->failed = true;
            return;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].kind = k;
    l->v[l->n].size = size;
    l->v[l->n].trace_index = at;
    l->n++;
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

/* Check the conditions; fills rd->replayable/reason and the recorded figures, and 'rec'
 * with the recorded segment events. */
static enum gm_status scan(const struct gm_snapshot *snap, const struct gm_snapshot_device *dev,
                           struct gm_replay_device *rd, struct evlist *rec)
{
    struct addrmap live = {0}, segs = {0};
    int64_t net = 0, max_net = 0, min_net = 0; /* reserved bytes relative to the start */
    uint64_t final_total = 0;
    enum gm_status st = GM_OK;

    rd->replayable = true;
    for (size_t i = 0; i < dev->n_segments; i++) {
        const struct gm_snapshot_segment *s = &snap->segments[dev->first_segment + i];
        final_total += s->total_size;
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
    if (snap->trace_overflowed && rd->replayable) {
        rd->replayable = false;
        snprintf(rd->reason, sizeof(rd->reason),
                 "the trace ring buffer overflowed (trace_alloc_overflowed): early events are "
                 "missing");
    }
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    gm_snapshot_cursor_init(&c, dev, 0);
    while ((e = gm_snapshot_cursor_next(&c)) != NULL) {
        size_t k = c.index, j;
        switch (e->action) {
        case GM_ACTION_ALLOC:
            rd->n_allocs++;
            if (am_find(&live, e->addr) != SIZE_MAX && rd->replayable) {
                rd->replayable = false;
                snprintf(rd->reason, sizeof(rd->reason),
                         "event %zu allocates 0x%llx, which is still live: the trace is "
                         "inconsistent",
                         k, (unsigned long long)e->addr);
            }
            st = am_put(&live, e->addr, 1);
            break;
        case GM_ACTION_FREE_COMPLETED:
            j = am_find(&live, e->addr);
            if (j == SIZE_MAX) {
                if (rd->replayable) {
                    rd->replayable = false;
                    snprintf(rd->reason, sizeof(rd->reason),
                             "event %zu frees 0x%llx, which the trace never allocated: "
                             "recording started after the allocation or the ring buffer "
                             "wrapped",
                             k, (unsigned long long)e->addr);
                }
            } else {
                am_remove_at(&live, j);
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
                st = am_put(&segs, e->addr, e->size);
            break;
        case GM_ACTION_SEGMENT_FREE:
        case GM_ACTION_SEGMENT_UNMAP:
            rd->recorded_segment_events++;
            ev_push(rec, kind_of(e->action), e->size, (int64_t)k);
            net -= (int64_t)e->size;
            if (net < min_net)
                min_net = net;
            if (e->action == GM_ACTION_SEGMENT_FREE) {
                j = am_find(&segs, e->addr);
                if (j == SIZE_MAX) {
                    if (rd->replayable) {
                        rd->replayable = false;
                        snprintf(rd->reason, sizeof(rd->reason),
                                 "event %zu frees segment 0x%llx, which the trace never "
                                 "allocated: recording started late",
                                 k, (unsigned long long)e->addr);
                    }
                } else {
                    am_remove_at(&segs, j);
                }
            }
            break;
        case GM_ACTION_OOM:
            rd->recorded_ooms++;
            break;
        default:
            break;
        }
        if (!st && rec->failed)
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
    if (rd->replayable && net != (int64_t)final_total) {
        char a[32], b[32];
        rd->replayable = false;
        snprintf(rd->reason, sizeof(rd->reason),
                 "the trace does not start from an empty allocator: its segment events "
                 "account for %s but the snapshot holds %s",
                 gm_format_bytes(a, sizeof(a), net > 0 ? (uint64_t)net : 0, GM_UNITS_IEC),
                 gm_format_bytes(b, sizeof(b), final_total, GM_UNITS_IEC));
    }
out_release:
    am_release(&live);
    am_release(&segs);
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

/* One replay of 'dev'.  infer: the validation run (infers empty_cache into *emp);
 * otherwise empty_cache is called at the positions in *emp. */
static enum gm_status run(const struct gm_snapshot_device *dev, const struct gm_alloc_conf *conf,
                          uint64_t capacity, uint64_t device_bytes, double fraction, bool infer,
                          struct empties *emp, struct run_ctx *rc, struct gm_replay_run *out,
                          struct sizes *final, struct gm_error *err)
{
    struct gm_alloc_fakedev fake;
    struct gm_alloc_device d;
    struct gm_alloc *a = NULL;
    struct addrmap map = {0};
    uint64_t rec_frees = 0, best_reserved = 0;
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
    gm_alloc_set_event_hook(a, on_model_event, rc);
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    gm_snapshot_cursor_init(&c, dev, 0);
    while ((e = gm_snapshot_cursor_next(&c)) != NULL) {
        size_t k = c.index, j;
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
            } else if (st == GM_OK && ptr) {
                st = am_put(&map, e->addr, ptr);
                if (st)
                    gm_fail(err, st, GM_NO_OFFSET, "replay: out of memory");
            }
            break;
        case GM_ACTION_FREE_COMPLETED:
            j = am_find(&map, e->addr);
            if (j != SIZE_MAX) {
                st = gm_alloc_dealloc(a, map.vals[j], err);
                am_remove_at(&map, j);
            }
            break;
        case GM_ACTION_SEGMENT_FREE:
        case GM_ACTION_SEGMENT_UNMAP:
            rec_frees++;
            if (infer && rc->n_frees < rec_frees) {
                /* the recording gave memory back that the model still caches: an
                 * empty_cache() (or an OOM flush) happened here */
                if (emp->n == emp->cap) {
                    size_t cap = emp->cap ? emp->cap * 2 : 16;
                    int64_t *v = gm_realloc(emp->at, cap * sizeof(*v));
                    if (!v) {
                        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
                        break;
                    }
                    emp->at = v;
                    emp->cap = cap;
                }
                emp->at[emp->n++] = (int64_t)k;
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
            if (r > best_reserved) {
                best_reserved = r;
                out->allocated_at_peak_reserved_bytes =
                    s->allocated_bytes[GM_ALLOC_STAT_ALL].current;
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
    if (final) {
        size_t n = gm_alloc_segment_sizes(a, NULL, 0);
        final->v = gm_calloc(n ? n : 1, sizeof(uint64_t));
        if (!final->v) {
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
            goto out_free;
        }
        final->n = gm_alloc_segment_sizes(a, final->v, n);
        final->blocks = gm_calloc(a->active.n ? a->active.n : 1, sizeof(uint64_t));
        if (!final->blocks) {
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
            goto out_free;
        }
        for (size_t i = 0; i < a->active.cap; i++)
            if (a->active.vals[i])
                final->blocks[final->n_blocks++] = a->active.vals[i]->size;
    }
out_free:
    am_release(&map);
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
    if (opts->memory_fraction != 0.0 &&
        (!(opts->memory_fraction > 0.0 && opts->memory_fraction <= 1.0) || !opts->device_bytes))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "replay: a memory fraction needs the device memory and must be in (0, 1]");
    if (snap->events_dropped)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "replay: the snapshot was loaded without its events");
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
        struct empties emp = {0};
        struct sizes final = {NULL, 0, NULL, 0};
        struct evlist rec = {NULL, 0, 0, false};
        struct run_ctx rc;
        if (!dev->n_events)
            continue;
        rd = &out->devices[out->n_devices++];
        rd->device = dev->index;
        rd->n_trace_events = dev->n_events;
        st = scan(snap, dev, rd, &rec);
        if (st) {
            gm_free(rec.v);
            gm_fail(err, st, GM_NO_OFFSET, "replay: out of memory");
            break;
        }
        if (!rd->replayable) {
            gm_free(rec.v);
            continue;
        }
        if (out->own_conf.backend != GM_ALLOC_BACKEND_NATIVE) {
            rd->replayable = false;
            snprintf(rd->reason, sizeof(rd->reason),
                     "recorded with backend:cudaMallocAsync, which the model does not replay");
            gm_free(rec.v);
            continue;
        }
        memset(&rc, 0, sizeof(rc));
        rc.snap = snap;
        st = run(dev, &out->own_conf, 0, opts->device_bytes, 0.0, true, &emp, &rc, &rd->own, &final,
                 err);
        if (st == GM_OK) {
            compare(&rec, &rc.pred, rd);
            rd->n_inferred_empty_cache = emp.n;
            if (compare_final(snap, dev, &final, rd))
                st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "replay: out of memory");
        }
        gm_free(final.v);
        gm_free(final.blocks);
        gm_free(rc.pred.v);
        gm_free(rec.v);
        if (st == GM_OK && opts->what_if) {
            memset(&rc, 0, sizeof(rc));
            rc.snap = snap;
            st = run(dev, opts->what_if, opts->device_bytes, opts->device_bytes,
                     opts->memory_fraction, false, &emp, &rc, &rd->what_if, NULL, err);
            rd->has_what_if = st == GM_OK;
            gm_free(rc.pred.v);
        }
        gm_free(emp.at);
    }
    if (st)
        gm_replay_release(out);
    return st;
}

void gm_replay_release(struct gm_replay_result *r)
{
    if (!r)
        return;
    gm_free(r->devices);
    r->devices = NULL;
    r->n_devices = 0;
}
