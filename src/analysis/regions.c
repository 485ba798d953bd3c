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

/* A region's span [first_event, last_event] of events to measure, keyed by one of its ends
 * for the walk below. */
struct span_key {
    int64_t k;
    size_t i; /* the region */
};

static int cmp_span_key(const void *a, const void *b)
{
    const struct span_key *p = a, *q = b;
    return p->k != q->k ? (p->k < q->k ? -1 : 1) : (p->i > q->i) - (p->i < q->i);
}

/* An event after which the allocated bytes are more than after every later event up to the
 * walk's place (the walk's stack of them: their bytes never increase from the bottom up). */
struct high {
    int64_t k;
    uint64_t bytes;
};

/* The figures of the regions v[0..n) from their spans: start_bytes after the event before
 * the first (the initial bytes before event 0), end_bytes after the last, peak_bytes the
 * most after any event of the span and peak_event the first that holds it (start_bytes and
 * the event before the first when none is above it); a span with no event (first_event >
 * last_event) holds the state after the event before its first.  A non-empty span is first
 * clamped to the device's events.
 *
 * One walk of the changes in event order, with no array per event: the allocations in
 * alloc-event order (dev->allocs; those alive from the start are the initial bytes) merged
 * with them in free-event order (the analysis's free order), each counting from its alloc
 * event to its free_completed, as the series and the peak count them (sums modulo 2^64:
 * they come right).  A span's start is read when the walk reaches its first event, its end
 * when it passes its last; its most from a stack of the walk's highs (struct high): the
 * first of them at or after the span's first event is the span's most and the first event
 * that holds it. */
static enum gm_status measure(const struct gm_analysis_device *dev, struct gm_analysis_region *v,
                              size_t n, struct gm_error *err)
{
    const struct gm_analysis_alloc *allocs = dev->allocs;
    const uint32_t *fo = dev->priv_ ? dev->priv_->free_order : NULL;
    size_t n_fo = dev->priv_ ? dev->priv_->n_free_order : 0, ai = 0, fi = 0;
    struct span_key *by_first = gm_malloc((n ? n : 1) * sizeof(*by_first)),
                    *by_last = gm_malloc((n ? n : 1) * sizeof(*by_last));
    struct high *hi = NULL;
    size_t n_hi = 0, cap_hi = 0, nl = 0, qf = 0, ql = 0;
    uint64_t cur = 0;
    enum gm_status st = GM_OK;

    if (!dev->priv_ && dev->n_allocs) {
        st = gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "regions: no analysis of the device");
        goto out;
    }
    if (!by_first || !by_last) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "regions: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        struct gm_analysis_region *r = &v[i];
        if (r->first_event <= r->last_event) {
            if (r->first_event < 0)
                r->first_event = 0;
            if (r->last_event >= (int64_t)dev->n_events)
                r->last_event = (int64_t)dev->n_events - 1;
        }
        if (r->first_event <= r->last_event) /* still, once clamped: its end is counted */
            by_last[nl++] = (struct span_key){r->last_event, i};
        by_first[i] = (struct span_key){r->first_event, i};
    }
    qsort(by_first, n, sizeof(*by_first), cmp_span_key);
    qsort(by_last, nl, sizeof(*by_last), cmp_span_key);
    for (; ai < dev->n_allocs && allocs[ai].alloc_event < 0; ai++)
        cur += allocs[ai].bytes;
    /* the next allocation's and the next free's events (INT64_MAX: none) */
    int64_t na = ai < dev->n_allocs ? allocs[ai].alloc_event : INT64_MAX;
    int64_t nf = n_fo ? allocs[fo[0]].free_event : INT64_MAX;
    size_t open = 0; /* spans with events begun and not ended */
    for (;;) {
        /* the next event that changes the bytes: every change before it is counted */
        int64_t k = na < nf ? na : nf;
        for (; qf < n && by_first[qf].k <= k; qf++) {
            struct gm_analysis_region *r = &v[by_first[qf].i];
            r->start_bytes = cur;
            open += r->first_event <= r->last_event;
        }
        for (; ql < nl && by_last[ql].k < k; ql++, open--) {
            struct gm_analysis_region *r = &v[by_last[ql].i];
            /* the first high at or after the span's first event */
            size_t lo = 0, up = n_hi;
            while (lo < up) {
                size_t mid = lo + (up - lo) / 2;
                if (hi[mid].k < r->first_event)
                    lo = mid + 1;
                else
                    up = mid;
            }
            r->end_bytes = cur;
            if (lo < n_hi && hi[lo].bytes > r->start_bytes) {
                r->peak_bytes = hi[lo].bytes;
                r->peak_event = hi[lo].k;
            } else {
                r->peak_bytes = r->start_bytes;
                r->peak_event = r->first_event - 1;
            }
        }
        if (qf == n && ql == nl)
            break;
        /* the changes before the next span's first event or after the next span's last (an
         * event is one allocation or one free: one change an event); the highs only while a
         * span is open (no later span looks before its own first event) */
        int64_t stop = qf < n ? by_first[qf].k : INT64_MAX;
        if (ql < nl && by_last[ql].k < stop)
            stop = by_last[ql].k + 1;
        if (!open)
            n_hi = 0;
        while (k < stop) {
            if (na < nf) {
                cur += allocs[ai].bytes;
                na = ++ai < dev->n_allocs ? allocs[ai].alloc_event : INT64_MAX;
            } else {
                cur -= allocs[fo[fi]].bytes;
                nf = ++fi < n_fo ? allocs[fo[fi]].free_event : INT64_MAX;
            }
            if (open) {
                while (n_hi && hi[n_hi - 1].bytes < cur)
                    n_hi--;
                if (n_hi == cap_hi && !GM_VEC_RESERVE(hi, cap_hi, n_hi + 1, NULL)) {
                    st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "regions: out of memory");
                    goto out;
                }
                hi[n_hi++] = (struct high){k, cur};
            }
            k = na < nf ? na : nf;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (v[i].first_event > v[i].last_event) {
            /* no event inside: the state at its time */
            v[i].end_bytes = v[i].peak_bytes = v[i].start_bytes;
            v[i].peak_event = v[i].first_event - 1;
        }
out:
    gm_free(by_first);
    gm_free(by_last);
    gm_free(hi);
    return st;
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
    out->v = gm_calloc(n, sizeof(*out->v));
    if (!out->v) {
        gm_free(q);
        gm_free(r);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "regions: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        struct gm_analysis_region *g = &out->v[i];
        g->name = r[i].name;
        g->has_time = true;
        g->start_us = r[i].start_us;
        g->end_us = r[i].end_us;
        g->first_event = q[2 * i].event;
        g->last_event =
            r[i].end_us == INT64_MAX ? (int64_t)dev->n_events - 1 : q[2 * i + 1].event - 1;
    }
    out->n = n;
    gm_free(q);
    gm_free(r);
    if ((st = measure(dev, out->v, n, err)) != GM_OK)
        gm_analysis_regions_release(out);
    return st;
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
    size_t cap = 0;
    enum gm_status st;
    const char *open = NULL;

    if (!sd || !dev->n_events)
        return GM_OK;
    gm_snapshot_cursor_init(&c, sd, 0);
    while ((e = gm_snapshot_cursor_next(&c)) != NULL && c.index < dev->n_events) {
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
    if ((st = measure(dev, out->v, out->n, err)) != GM_OK)
        gm_analysis_regions_release(out);
    return st;
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
    return measure(dev, out, 1, err);
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
