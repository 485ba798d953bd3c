/* SPDX-License-Identifier: MIT */
/* regions.c - memory inside named spans of a device's trace (analysis.h, "memory inside
 * spans of the trace"): record_function ranges, torch.compile contexts, windows.
 *
 * The allocated bytes after every event are rebuilt from the analysis's allocations (each
 * counts from its alloc event to its free_completed, those alive from the start from the
 * initial state), so that every figure here is the one the series and the peak count. */
#include "analysis/analysis_int.h"

#include "base/vec.h"

#include "gpumem/arena.h"
#include "gpumem/json.h"
#include "gpumem/lod.h"
#include "gpumem/version.h"

#include <stdlib.h>
#include <string.h>

/* What a device's trace says over its events: the allocated bytes after each event, the
 * time of each (the time of the last timed event before it, for one without). */
struct totals {
    uint64_t initial; /* before the first event */
    uint64_t *after;  /* per event */
    size_t n;
};

static void totals_release(struct totals *t)
{
    gm_free(t->after);
    memset(t, 0, sizeof(*t));
}

static enum gm_status totals_build(const struct gm_analysis_device *dev, struct totals *t,
                                   struct gm_error *err)
{
    size_t n = dev->n_events;

    memset(t, 0, sizeof(*t));
    t->n = n;
    /* the changes of each event first, then summed in place: one array of 8 bytes an event */
    t->after = gm_calloc(n ? n : 1, sizeof(*t->after));
    if (!t->after)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "regions: out of memory");
    for (size_t i = 0; i < dev->n_allocs; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        if (a->alloc_event < 0)
            t->initial += a->bytes;
        else if ((size_t)a->alloc_event < n)
            t->after[a->alloc_event] += a->bytes; /* modulo 2^64: the sums come right */
        if (a->free_event >= 0 && (size_t)a->free_event < n)
            t->after[a->free_event] -= a->bytes;
    }
    uint64_t cur = t->initial;
    size_t k = 0;
    for (; k + 4 <= n; k += 4) { /* a running sum: four to a turn, an event costs ~3 */
        uint64_t *v = &t->after[k];
        v[0] = cur += v[0];
        v[1] = cur += v[1];
        v[2] = cur += v[2];
        v[3] = cur += v[3];
    }
    for (; k < n; k++)
        t->after[k] = cur += t->after[k];
    return GM_OK;
}

/* A question "the first event at or after time x" and its answer (n when none). */
struct time_query {
    int64_t x;
    int64_t event;
};

static int cmp_query_x(const void *a, const void *b)
{
    const struct time_query *p = *(const struct time_query *const *)a,
                            *q = *(const struct time_query *const *)b;
    return p->x < q->x ? -1 : p->x > q->x;
}

/* Answers every query in one walk of the device's events (none when 'ax' keeps every
 * event's time), with no per-event array: an event's time is the latest time seen up to
 * it, which never decreases, so the queries in time order are answered as the walk passes
 * them. Returns whether any event has a time (false: nothing answered). */
static enum gm_status answer_time_queries(const struct gm_analysis *an,
                                          const struct gm_analysis_device *dev,
                                          const struct gm_lod_axis *ax, struct time_query *q,
                                          size_t nq, bool *has_time, struct gm_error *err)
{
    const struct gm_snapshot_device *sd = gm_snapshot_device_by_index(an->snap, dev->device);
    struct time_query **order = gm_malloc((nq ? nq : 1) * sizeof(*order));
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    int64_t last = INT64_MIN;
    size_t next = 0, n = dev->n_events;

    *has_time = false;
    if (!order)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "regions: out of memory");
    for (size_t i = 0; i < nq; i++) {
        order[i] = &q[i];
        q[i].event = (int64_t)n;
    }
    qsort(order, nq, sizeof(*order), cmp_query_x);
    if (sd && n && ax && ax->dev == sd && ax->n_events == n && gm_lod_axis_keeps_x(ax)) {
        /* every event has one; the first event at or after x is the first whose time is
         * at least x, so a query is answered by looking for that alone */
        int64_t t0 = ax->t0_us;
        const uint32_t *x32 = gm_lod_axis_x32(ax);
        size_t k = 0;
        *has_time = true;
        while (next < nq) {
            int64_t x = order[next]->x, t = 0, xr;
            /* time_us = t0 + kept x (no overflow: the x's are exact spans), so time_us < x
             * is kept x < x - t0, saturated: beyond int64 every time or none is below */
            if (__builtin_sub_overflow(x, t0, &xr))
                xr = x > t0 ? INT64_MAX : INT64_MIN;
            if (x32) {
                /* eight at a time while all eight are before x (most of the trace lies
                 * between two questions), then one by one */
                if (xr > 0) {
                    uint32_t u = xr > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)xr;
                    while (k + 8 <= n && x32[k] < u && x32[k + 1] < u && x32[k + 2] < u &&
                           x32[k + 3] < u && x32[k + 4] < u && x32[k + 5] < u && x32[k + 6] < u &&
                           x32[k + 7] < u)
                        k += 8;
                }
                while (k < n && (int64_t)x32[k] < xr)
                    k++;
            } else {
                while (k < n && gm_lod_axis_kept_us(ax, k) < xr)
                    k++;
            }
            if (k == n)
                break;
            t = t0 + gm_lod_axis_kept_us(ax, k);
            while (next < nq && order[next]->x <= t)
                order[next++]->event = (int64_t)k;
            k++;
        }
    } else if (sd && n) {
        gm_snapshot_cursor_init(&c, sd, 0);
        while ((e = gm_snapshot_cursor_next(&c)) != NULL && c.index < n) {
            if (e->flags & GM_EVENT_HAS_TIME) {
                *has_time = true;
                if (e->time_us > last)
                    last = e->time_us;
            }
            while (next < nq && order[next]->x <= last)
                order[next++]->event = (int64_t)c.index;
        }
    }
    gm_free(order);
    return GM_OK;
}

/* The figures of r's events [first_event, last_event] (start_bytes: before the first). */
static void measure(const struct totals *t, struct gm_analysis_region *r)
{
    int64_t f = r->first_event, l = r->last_event;
    if (f < 0)
        f = 0;
    if (l >= (int64_t)t->n)
        l = (int64_t)t->n - 1;
    r->first_event = f;
    r->last_event = l;
    r->start_bytes = f == 0 ? t->initial : t->after[f - 1];
    r->peak_bytes = r->start_bytes;
    r->peak_event = f - 1;
    r->end_bytes = r->start_bytes;
    for (int64_t k = f; k <= l; k++) {
        if (t->after[k] > r->peak_bytes) {
            r->peak_bytes = t->after[k];
            r->peak_event = k;
        }
        r->end_bytes = t->after[k];
    }
}

/* The time of the device's first timed event (false when none has a time). */
static bool first_time(const struct gm_analysis *an, const struct gm_analysis_device *dev,
                       int64_t *t0)
{
    const struct gm_snapshot_device *sd = gm_snapshot_device_by_index(an->snap, dev->device);
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    if (!sd)
        return false;
    gm_snapshot_cursor_init(&c, sd, 0);
    while ((e = gm_snapshot_cursor_next(&c)) != NULL && c.index < dev->n_events)
        if (e->flags & GM_EVENT_HAS_TIME) {
            *t0 = e->time_us;
            return true;
        }
    return false;
}

static enum gm_status annotation_regions(const struct gm_analysis *an,
                                         const struct gm_analysis_device *dev,
                                         const struct gm_lod_axis *ax,
                                         struct gm_analysis_regions *out, struct gm_error *err)
{
    struct gm_snapshot_user_range *r = NULL;
    struct time_query *q = NULL;
    struct totals t;
    size_t n = 0;
    bool has_time = false;
    enum gm_status st;

    if ((st = gm_snapshot_annotation_ranges(an->snap, dev->device, NULL, &r, &n, err)) != GM_OK)
        return st;
    if (!n)
        return GM_OK;
    /* per range: the first event at or after its start, the first after its end */
    q = gm_malloc(2 * n * sizeof(*q));
    if (!q) {
        gm_free(r);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "regions: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        q[2 * i].x = r[i].start_us;
        q[2 * i + 1].x = r[i].end_us == INT64_MAX ? INT64_MAX : r[i].end_us + 1;
    }
    if ((st = answer_time_queries(an, dev, ax, q, 2 * n, &has_time, err)) != GM_OK ||
        !has_time) { /* without times no event can be placed in a range */
        gm_free(q);
        gm_free(r);
        return st;
    }
    if ((st = totals_build(dev, &t, err)) != GM_OK) {
        gm_free(q);
        gm_free(r);
        return st;
    }
    out->v = gm_calloc(n, sizeof(*out->v));
    if (!out->v) {
        gm_free(q);
        gm_free(r);
        totals_release(&t);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "regions: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        struct gm_analysis_region *g = &out->v[i];
        g->name = r[i].name;
        g->has_time = true;
        g->start_us = r[i].start_us;
        g->end_us = r[i].end_us;
        g->first_event = q[2 * i].event;
        g->last_event = r[i].end_us == INT64_MAX ? (int64_t)t.n - 1 : q[2 * i + 1].event - 1;
        if (g->first_event > g->last_event) {
            /* no event inside: the state at its time */
            int64_t before = g->first_event - 1;
            g->start_bytes = before < 0 ? t.initial : t.after[before];
            g->end_bytes = g->peak_bytes = g->start_bytes;
            g->peak_event = before;
        } else {
            measure(&t, g);
        }
    }
    out->n = n;
    gm_free(q);
    gm_free(r);
    totals_release(&t);
    return GM_OK;
}

static const char *compile_context_of(const struct gm_snapshot *snap,
                                      const struct gm_snapshot_event *e)
{
    const char *cc;
    if (!e->extra || e->extra > snap->n_extras)
        return NULL;
    cc = snap->extras[e->extra - 1].compile_context;
    return cc && *cc && strcmp(cc, "N/A") ? cc : NULL;
}

static enum gm_status compile_regions(const struct gm_analysis *an,
                                      const struct gm_analysis_device *dev,
                                      struct gm_analysis_regions *out, struct gm_error *err)
{
    const struct gm_snapshot *snap = an->snap;
    const struct gm_snapshot_device *sd = gm_snapshot_device_by_index(snap, dev->device);
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    struct totals t;
    size_t cap = 0;
    enum gm_status st;
    const char *open = NULL;

    if (!sd || !dev->n_events)
        return GM_OK;
    if ((st = totals_build(dev, &t, err)) != GM_OK)
        return st;
    gm_snapshot_cursor_init(&c, sd, 0);
    while ((e = gm_snapshot_cursor_next(&c)) != NULL && c.index < t.n) {
        const char *cc = compile_context_of(snap, e);
        struct gm_analysis_region *g = out->n ? &out->v[out->n - 1] : NULL;
        if (cc && open && (cc == open || !strcmp(cc, open))) {
            g->last_event = (int64_t)c.index; /* the run goes on */
            if (e->flags & GM_EVENT_HAS_TIME) {
                if (!g->has_time)
                    g->start_us = e->time_us;
                g->end_us = e->time_us;
                g->has_time = true;
            }
            continue;
        }
        open = cc;
        if (!cc)
            continue;
        g = GM_VEC_PUSH(out->v, out->n, cap, NULL);
        if (!g) {
            totals_release(&t);
            gm_analysis_regions_release(out);
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "regions: out of memory");
        }
        memset(g, 0, sizeof(*g));
        g->name = cc;
        g->first_event = g->last_event = (int64_t)c.index;
        if (e->flags & GM_EVENT_HAS_TIME) {
            g->has_time = true;
            g->start_us = g->end_us = e->time_us;
        }
    }
    for (size_t i = 0; i < out->n; i++)
        measure(&t, &out->v[i]);
    totals_release(&t);
    return GM_OK;
}

enum gm_status gm_analysis_regions(const struct gm_analysis *an,
                                   const struct gm_analysis_device *dev, enum gm_region_kind kind,
                                   struct gm_analysis_regions *out, struct gm_error *err)
{
    return gm_analysis_regions_on_axis(an, dev, kind, NULL, out, err);
}

enum gm_status gm_analysis_regions_on_axis(const struct gm_analysis *an,
                                           const struct gm_analysis_device *dev,
                                           enum gm_region_kind kind, const struct gm_lod_axis *ax,
                                           struct gm_analysis_regions *out, struct gm_error *err)
{
    enum gm_status st = gm_analysis_require_whole(an, "regions", err);
    memset(out, 0, sizeof(*out));
    if (st != GM_OK)
        return st;
    switch (kind) {
    case GM_REGION_ANNOTATION:
        return annotation_regions(an, dev, ax, out, err);
    case GM_REGION_COMPILE:
        return compile_regions(an, dev, out, err);
    case GM_REGION_WINDOW:
        break;
    }
    return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                   "regions: a window is measured with gm_analysis_window_region()");
}

void gm_analysis_regions_release(struct gm_analysis_regions *r)
{
    gm_free(r->v);
    r->v = NULL;
    r->n = 0;
}

enum gm_status gm_analysis_window_region(const struct gm_analysis *an,
                                         const struct gm_analysis_device *dev,
                                         const struct gm_analysis_window *w,
                                         struct gm_analysis_region *out, struct gm_error *err)
{
    struct totals t;
    enum gm_status st;

    memset(out, 0, sizeof(*out));
    if ((st = gm_analysis_require_whole(an, "window", err)) != GM_OK)
        return st;
    if (w->from > w->to)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "the window starts after it ends (%lld > %lld)", (long long)w->from,
                       (long long)w->to);
    if (!dev->n_events)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "device %d has no trace events",
                       (int)dev->device);
    if (!w->by_time && (w->from < 0 || (uint64_t)w->to >= dev->n_events))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "events 0 to %zu are on device %d: no event %lld", dev->n_events - 1,
                       (int)dev->device, (long long)(w->from < 0 ? w->from : w->to));
    if (w->by_time) {
        /* the first event at or after the start, the first after the end */
        struct time_query q[2];
        int64_t t0 = 0;
        bool has_time = false;
        if (!first_time(an, dev, &t0))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "the trace of device %d records no times: give events",
                           (int)dev->device);
        out->has_time = true;
        out->start_us = t0 + w->from;
        out->end_us = t0 + w->to;
        q[0].x = out->start_us;
        q[1].x = out->end_us == INT64_MAX ? INT64_MAX : out->end_us + 1;
        if ((st = answer_time_queries(an, dev, NULL, q, 2, &has_time, err)) != GM_OK)
            return st;
        out->first_event = q[0].event;
        out->last_event = out->end_us == INT64_MAX ? (int64_t)dev->n_events - 1 : q[1].event - 1;
    } else {
        out->first_event = w->from;
        out->last_event = w->to;
    }
    if ((st = totals_build(dev, &t, err)) != GM_OK)
        return st;
    if (out->first_event > out->last_event) {
        int64_t before = out->first_event - 1;
        out->start_bytes = before < 0 ? t.initial : t.after[before];
        out->end_bytes = out->peak_bytes = out->start_bytes;
        out->peak_event = before;
    } else {
        measure(&t, out);
    }
    totals_release(&t);
    return GM_OK;
}

static int cmp_alloc_event(const void *a, const void *b)
{
    const int32_t *x = a, *y = b;
    return *x < *y ? -1 : *x > *y;
}

enum gm_status gm_analysis_alloc_at_address(const struct gm_analysis_device *dev, uint64_t addr,
                                            uint32_t n, size_t *index, struct gm_error *err)
{
    int32_t *ev = NULL;
    size_t m = 0, cap = 0;
    /* the allocations of the address in the order they were made: those alive from the
     * start (alloc event -1, at most one) first, then by alloc event */
    for (size_t i = 0; i < dev->n_allocs; i++) {
        if (dev->allocs[i].addr != addr)
            continue;
        int32_t *p = GM_VEC_PUSH(ev, m, cap, NULL);
        if (!p) {
            gm_free(ev);
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
        }
        *p = dev->allocs[i].alloc_event;
    }
    if (n < 1 || n > m) {
        gm_free(ev);
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "device %d: address 0x%llx was allocated %zu time%s: no allocation #%u",
                       (int)dev->device, (unsigned long long)addr, m, m == 1 ? "" : "s", n);
    }
    qsort(ev, m, sizeof(*ev), cmp_alloc_event);
    int32_t want = ev[n - 1];
    gm_free(ev);
    for (size_t i = 0; i < dev->n_allocs; i++)
        if (dev->allocs[i].addr == addr && dev->allocs[i].alloc_event == want) {
            *index = i;
            return GM_OK;
        }
    return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "no allocation #%u of 0x%llx", n,
                   (unsigned long long)addr);
}

/* ---------------------------------------------------------------- JSON */

static const char *kind_name(enum gm_region_kind k)
{
    return k == GM_REGION_COMPILE  ? "compile_context"
           : k == GM_REGION_WINDOW ? "window"
                                   : "annotation";
}

static void json_region(struct gm_json *w, const struct gm_analysis_region *g)
{
    gm_json_begin_object(w);
    gm_json_kv_str(w, "name", g->name);
    if (g->has_time)
        gm_json_kv_i64(w, "start_us", g->start_us);
    else
        gm_json_kv_null(w, "start_us");
    if (g->has_time && g->end_us != INT64_MAX)
        gm_json_kv_i64(w, "end_us", g->end_us);
    else
        gm_json_kv_null(w, "end_us");
    if (g->first_event <= g->last_event) {
        gm_json_kv_i64(w, "first_event", g->first_event);
        gm_json_kv_i64(w, "last_event", g->last_event);
    } else {
        gm_json_kv_null(w, "first_event");
        gm_json_kv_null(w, "last_event");
    }
    gm_json_kv_u64(w, "start_bytes", g->start_bytes);
    gm_json_kv_u64(w, "end_bytes", g->end_bytes);
    gm_json_kv_u64(w, "peak_bytes", g->peak_bytes);
    gm_json_kv_i64(w, "peak_event", g->peak_event);
    gm_json_end_object(w);
}

enum gm_status gm_analysis_regions_json(FILE *f, const char *path, enum gm_region_kind kind,
                                        const struct gm_analysis_device *const *devs,
                                        const struct gm_analysis_regions *regions, size_t n,
                                        struct gm_error *err)
{
    struct gm_json w;
    gm_json_init(&w, f, GM_JSON_PRETTY);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "schema", "gpumem.snapshot.regions/1");
    gm_json_kv_str(&w, "gpumem_version", gm_version());
    gm_json_kv_str(&w, "file", path);
    gm_json_kv_str(&w, "kind", kind_name(kind));
    gm_json_key(&w, "devices");
    gm_json_begin_array(&w);
    for (size_t d = 0; d < n; d++) {
        gm_json_begin_object(&w);
        gm_json_kv_i64(&w, "device", devs[d]->device);
        gm_json_kv_u64(&w, "peak_bytes", devs[d]->peak_bytes);
        gm_json_key(&w, "regions");
        gm_json_begin_array(&w);
        for (size_t i = 0; i < regions[d].n; i++)
            json_region(&w, &regions[d].v[i]);
        gm_json_end_array(&w);
        gm_json_end_object(&w);
    }
    gm_json_end_array(&w);
    gm_json_end_object(&w);
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the regions document failed");
    return GM_OK;
}

enum gm_status gm_analysis_window_json(FILE *f, const char *path, const struct gm_analysis *an,
                                       const struct gm_analysis_device *dev,
                                       const struct gm_analysis_region *window,
                                       const struct gm_analysis_alloc *alloc, uint32_t nth,
                                       int64_t event, uint64_t allocated,
                                       const struct gm_snapshot_live_group *live, size_t n_live,
                                       size_t top, struct gm_error *err)
{
    struct gm_json w;
    gm_json_init(&w, f, GM_JSON_PRETTY);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "schema", "gpumem.snapshot.window/1");
    gm_json_kv_str(&w, "gpumem_version", gm_version());
    gm_json_kv_str(&w, "file", path);
    gm_json_kv_i64(&w, "device", dev->device);
    gm_json_key(&w, "window");
    if (window)
        json_region(&w, window);
    else
        gm_json_null(&w);
    gm_json_key(&w, "allocation");
    if (alloc) {
        gm_json_begin_object(&w);
        gm_json_kv_u64(&w, "address", alloc->addr);
        gm_json_kv_u64(&w, "nth", nth);
        gm_json_kv_u64(&w, "bytes", alloc->bytes);
        gm_json_kv_i64(&w, "alloc_event", alloc->alloc_event);
        gm_json_kv_i64(&w, "free_event", alloc->free_event);
        gm_json_kv_str(&w, "category", gm_category_name((enum gm_category)alloc->category));
        gm_json_kv_u64(&w, "stack", alloc->stack);
        gm_json_key(&w, "frames");
        ana_json_stack(&w, an->snap, alloc->stack);
        gm_json_end_object(&w);
    } else {
        gm_json_null(&w);
    }
    gm_json_kv_i64(&w, "event", event);
    gm_json_kv_u64(&w, "allocated_bytes", allocated);
    gm_json_key(&w, "live");
    gm_json_begin_array(&w);
    for (size_t i = 0; i < n_live && (!top || i < top); i++) {
        gm_json_begin_object(&w);
        gm_json_kv_u64(&w, "bytes", live[i].bytes);
        gm_json_kv_u64(&w, "count", live[i].count);
        gm_json_kv_u64(&w, "stack", live[i].stack);
        gm_json_key(&w, "frames");
        ana_json_stack(&w, an->snap, live[i].stack);
        gm_json_end_object(&w);
    }
    gm_json_end_array(&w);
    gm_json_end_object(&w);
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the window document failed");
    return GM_OK;
}
