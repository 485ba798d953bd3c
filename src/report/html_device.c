/* SPDX-License-Identifier: MIT */
/* html_device.c - one device's object of the HTML report's data (schema in html.c).
 *
 * x is the device's axis (gpumem/lod.h: microseconds since its first event when every event
 * has time_us, else the event index); "k" is an event index, -1 the initial state. */
#include "gpumem/arena.h"
#include "gpumem/bands.h"
#include "gpumem/json.h"
#include "gpumem/lod.h"

#include "base/json_room.h"
#include "base/outbuf.h"
#include "report/report_int.h"

#include <stdlib.h>
#include <string.h>

#define MAX_AT_PEAK 300u
#define RB_WINDOWS  32u /* windows of events with bands of their own, for zoomed views */

#define xat(ax, k) gm_lod_axis_x((ax), (k))

/* ---- allocated and reserved: the finest level of detail the page keeps ---- */

/* "rest": of each bucket, the bytes by category of what is not a band after its event of
 * the most allocated (kmax), so that the bands alive there and this stack add up to amax;
 * a category with nothing in any bucket is null, the others runs [value, buckets, value,
 * buckets...] (they change far less often than the buckets do).  Buckets in a row with one
 * kmax (those that hold the value carried in: most of them at this level) have one rest:
 * it is asked once for the row, and the runs are made of rows. */
static void write_rest(struct gm_report_ctx *c, const struct gm_analysis_device *ad,
                       const struct gm_bands *bands, const struct gm_lod_totals *lt)
{
    const struct gm_lod *al = &lt->alloc;
    /* the analysis' categories at each row's kmax, when these are its totals */
    size_t n_cats = 0;
    const uint64_t *cats =
        lt == gm_analysis_totals(ad) ? gm_analysis_totals_cats(ad, &n_cats) : NULL;
    struct gm_json *w = c->w;
    unsigned nb = al->n, ng = 0;
    int64_t *ks = gm_malloc(nb * sizeof(*ks));      /* per row: its kmax */
    uint32_t *size = gm_malloc(nb * sizeof(*size)); /* per row: its buckets */
    uint64_t(*rest)[GM_CATEGORY_COUNT] = gm_malloc(nb * sizeof(*rest));
    uint64_t *runs = gm_malloc(2 * (size_t)nb * sizeof(*runs)); /* one category's */
    struct gm_error err;
    gm_json_key(w, "rest");
    for (unsigned b = 0; ks && size && b < nb; b++) {
        if (ng && al->b[b].kmax == ks[ng - 1]) {
            size[ng - 1]++;
            continue;
        }
        ks[ng] = al->b[b].kmax;
        size[ng++] = 1;
    }
    /* (the analysis' rows are these rows) */
    if (n_cats != ng)
        cats = NULL;
    if (!ks || !size || !rest || !runs ||
        (cats ? gm_bands_rest_from(ad, bands, ks, ng, cats, rest, &err)
              : gm_bands_rest_at(ad, bands, ks, ng, rest, &err)) != GM_OK) {
        c->nomem = true;
        gm_json_null(w);
        goto out_free;
    }
    gm_json_begin_array(w);
    for (int cat = 0; cat < GM_CATEGORY_COUNT; cat++) {
        size_t n_runs = 0;
        bool any = false;
        for (unsigned g = 0; g < ng && !any; g++)
            any = rest[g][cat] != 0;
        if (!any) {
            gm_json_null(w);
            continue;
        }
        /* runs of equal buckets [value, count], a row at a time */
        for (unsigned g = 0; g < ng; g++) {
            if (n_runs && runs[n_runs - 2] == rest[g][cat]) {
                runs[n_runs - 1] += size[g];
            } else {
                runs[n_runs++] = rest[g][cat];
                runs[n_runs++] = size[g];
            }
        }
        gm_json_begin_array(w);
        gm_json_u64s(w, runs, n_runs, sizeof(*runs));
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
out_free:
    gm_free(ks);
    gm_free(size);
    gm_free(rest);
    gm_free(runs);
}

/* The device's axis, keeping every x (the bands, series and state read them), and its
 * allocated and reserved timeline in the finest buckets (the page draws unions of whole
 * ones): those the analysis kept (gm_analysis_totals()), else one walk of the trace into
 * 'own'.  *have_lod false when the timeline could not be made (out of memory: the axis is
 * then one that keeps nothing). */
static const struct gm_lod_totals *axis_and_timeline(struct gm_report_ctx *c,
                                                     const struct gm_snapshot_device *sd,
                                                     const struct gm_analysis_device *ad,
                                                     const struct gm_snapshot_timeline *tl,
                                                     struct gm_lod_totals *own, bool *have_lod)
{
    const struct gm_lod_totals *kept = gm_analysis_totals(ad);
    struct gm_error err;
    memset(own, 0, sizeof(*own));
    *have_lod = sd->n_events > 0;
    if (kept && *have_lod)
        return kept;
    if (*have_lod &&
        gm_lod_axis_timeline(&own->axis, c->snap, sd, tl, gm_lod_finest_buckets(sd->n_events),
                             &own->alloc, &own->res, &err) == GM_OK)
        return own;
    if (*have_lod)
        c->nomem = true;
    *have_lod = false;
    gm_lod_axis_init(&own->axis, sd);
    return own;
}

static void write_lod(struct gm_report_ctx *c, const struct gm_analysis_device *ad,
                      const struct gm_bands *bands, const struct gm_lod_totals *lt)
{
    struct gm_json *w = c->w;
    const struct gm_lod *al = &lt->alloc, *rl = &lt->res;
    unsigned nb = al->n;
    gm_json_key(w, "lod");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "n", nb);
    /* each an array of one field of the buckets */
    gm_json_key(w, "amin");
    gm_json_begin_array(w);
    gm_json_u64s(w, &al->b[0].min, nb, sizeof(al->b[0]));
    gm_json_end_array(w);
    gm_json_key(w, "amax");
    gm_json_begin_array(w);
    gm_json_u64s(w, &al->b[0].max, nb, sizeof(al->b[0]));
    gm_json_end_array(w);
    gm_json_key(w, "kmax");
    gm_json_begin_array(w);
    gm_json_i64s(w, &al->b[0].kmax, nb, sizeof(al->b[0]));
    gm_json_end_array(w);
    gm_json_key(w, "krmax");
    gm_json_begin_array(w);
    gm_json_i64s(w, &rl->b[0].kmax, nb, sizeof(rl->b[0]));
    gm_json_end_array(w);
    gm_json_key(w, "rmax");
    gm_json_begin_array(w);
    gm_json_u64s(w, &rl->b[0].max, nb, sizeof(rl->b[0]));
    gm_json_end_array(w);
    if (ad)
        write_rest(c, ad, bands, lt);
    gm_json_end_object(w);
}

/* ---- the allocations drawn one by one (gpumem/bands.h) ---- */

/* A band's row [k_alloc, k_free, x0, x1, bytes, cat, stack, addr, "stream"] at p
 * (BAND_ROW_MAX bytes of room) when its x's are whole; the end of the row. */
#define BAND_ROW_MAX (4 + 9 * (GM_FMT_ROOM + 2))
static char *band_row(char *p, const struct gm_lod_axis *ax, const struct gm_analysis_device *ad,
                      const struct gm_analysis_alloc *a, double x0, double x1)
{
    *p++ = '[';
    p = gm_fmt_i64_room(p, a->alloc_event);
    *p++ = ',';
    p = gm_fmt_i64_room(p, a->free_event < 0 ? (int64_t)ax->n_events : a->free_event);
    *p++ = ',';
    p = gm_fmt_i64_room(p, (int64_t)x0);
    *p++ = ',';
    p = gm_fmt_i64_room(p, (int64_t)x1);
    *p++ = ',';
    p = gm_fmt_u64_room(p, a->bytes);
    *p++ = ',';
    p = gm_fmt_u64_room(p, a->category);
    *p++ = ',';
    p = gm_fmt_u64_room(p, a->stack);
    *p++ = ',';
    p = gm_fmt_u64_room(p, a->addr);
    *p++ = ',';
    p = gm_report_stream_text(p, gm_analysis_alloc_stream(ad, a));
    *p++ = ']';
    return p;
}

static void write_band(struct gm_report_ctx *c, const struct gm_lod_axis *ax,
                       const struct gm_analysis_device *ad, const struct gm_analysis_alloc *a,
                       const double *x)
{
    struct gm_json *w = c->w;
    double x1 = a->free_event < 0 ? ax->x_end : x[1];
    if (gm_report_num_is_int(x[0]) && gm_report_num_is_int(x1)) {
        /* the common row at once, as the calls below write it: thousands of bands */
        char *p = gm_json_room(w, BAND_ROW_MAX);
        if (p) {
            gm_json_room_end(w, band_row(p, ax, ad, a, x[0], x1));
        } else {
            char row[BAND_ROW_MAX + 1];
            *band_row(row, ax, ad, a, x[0], x1) = '\0';
            gm_json_raw(w, row);
        }
        gm_report_use_stack(c, a->stack);
        return;
    }
    gm_json_begin_array(w);
    gm_json_i64(w, a->alloc_event);
    gm_json_i64(w, a->free_event < 0 ? (int64_t)ax->n_events : a->free_event);
    gm_report_num(w, x[0]);
    gm_report_num(w, x1);
    gm_json_u64(w, a->bytes);
    gm_json_u64(w, a->category);
    gm_json_u64(w, a->stack);
    gm_json_u64(w, a->addr);
    gm_report_stream(w, gm_analysis_alloc_stream(ad, a));
    gm_json_end_array(w);
    gm_report_use_stack(c, a->stack);
}

/* The x of every band's alloc and free and of every window's ends, in the order
 * write_bands() writes them, from one walk of the trace (gm_lod_axis_xs()); NULL when out of
 * memory. */
static double *band_xs(const struct gm_lod_axis *ax, const struct gm_analysis_device *ad,
                       const struct gm_bands *b)
{
    size_t n = 2 * b->n, j = 0;
    int64_t *ks;
    double *xs;
    for (size_t wi = 0; wi < b->n_windows; wi++)
        n += 2 + 2 * b->windows[wi].n;
    ks = gm_malloc((n ? n : 1) * sizeof(*ks));
    xs = gm_malloc((n ? n : 1) * sizeof(*xs));
    if (ks && xs) {
        for (size_t i = 0; i < b->n; i++, j += 2) {
            ks[j] = ad->allocs[b->allocs[i]].alloc_event;
            ks[j + 1] = ad->allocs[b->allocs[i]].free_event;
        }
        for (size_t wi = 0; wi < b->n_windows; wi++) {
            const struct gm_bands_window *bw = &b->windows[wi];
            ks[j++] = bw->k0;
            ks[j++] = bw->k1;
            for (size_t i = 0; i < bw->n; i++, j += 2) {
                ks[j] = ad->allocs[bw->allocs[i]].alloc_event;
                ks[j + 1] = ad->allocs[bw->allocs[i]].free_event;
            }
        }
    }
    if (!ks || !xs || gm_lod_axis_xs(ax, ks, xs, n, NULL) != GM_OK) {
        gm_free(xs);
        xs = NULL;
    }
    gm_free(ks);
    return xs;
}

/* The bands of the whole trace ("bands"), those alive at the start or the end first
 * ("n_edge" of them), and for each of RB_WINDOWS windows of events its own ("rbands"): the
 * page adds a window's bands when the view is zoomed into it. */
static void write_bands(struct gm_report_ctx *c, const struct gm_lod_axis *ax,
                        const struct gm_analysis_device *ad, const struct gm_bands *b)
{
    struct gm_json *w = c->w;
    size_t ne = ax->n_events;
    double *xs = band_xs(ax, ad, b);
    const double *x = xs;
    if (!xs) {
        c->nomem = true;
        return;
    }
    gm_json_key(w, "bands");
    gm_json_begin_array(w);
    for (size_t i = 0; i < b->n; i++, x += 2)
        write_band(c, ax, ad, &ad->allocs[b->allocs[i]], x);
    gm_json_end_array(w);
    gm_json_kv_u64(w, "n_edge", b->n_edge);
    gm_json_kv_u64(w, "n_allocs", ad ? ad->n_allocs : 0);
    gm_json_key(w, "rbands");
    gm_json_begin_array(w);
    for (size_t wi = 0; wi < b->n_windows; wi++, x += 2) {
        const struct gm_bands_window *bw = &b->windows[wi];
        gm_json_begin_object(w);
        gm_json_key(w, "x0");
        gm_report_num(w, x[0]);
        gm_json_key(w, "x1");
        gm_report_num(w, bw->k1 >= (int64_t)ne ? ax->x_end : x[1]);
        gm_json_key(w, "b");
        gm_json_begin_array(w);
        for (size_t i = 0; i < bw->n; i++)
            write_band(c, ax, ad, &ad->allocs[bw->allocs[i]], x += 2);
        gm_json_end_array(w);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_free(xs);
}

/* ---- categories over time, phases, iterations ---- */

static void write_series(struct gm_report_ctx *c, const struct gm_lod_axis *ax,
                         const struct gm_analysis_device *ad)
{
    struct gm_json *w = c->w;
    gm_json_key(w, "series");
    gm_json_begin_object(w);
    gm_json_key(w, "x");
    gm_json_begin_array(w);
    {
        /* the points' x from one walk of the trace */
        int64_t *ks = gm_malloc((ad->n_points ? ad->n_points : 1) * sizeof(*ks));
        double *xs = gm_malloc((ad->n_points ? ad->n_points : 1) * sizeof(*xs));
        if (ks && xs) {
            for (size_t i = 0; i < ad->n_points; i++)
                ks[i] = ad->points[i].event;
            if (gm_lod_axis_xs(ax, ks, xs, ad->n_points, NULL) == GM_OK)
                for (size_t i = 0; i < ad->n_points; i++)
                    gm_report_num(w, xs[i]);
            else
                c->nomem = true;
        } else {
            c->nomem = true;
        }
        gm_free(ks);
        gm_free(xs);
    }
    gm_json_end_array(w);
    gm_json_key(w, "k");
    gm_json_begin_array(w);
    if (ad->n_points)
        gm_json_i64s(w, &ad->points[0].event, ad->n_points, sizeof(ad->points[0]));
    gm_json_end_array(w);
    gm_json_key(w, "r");
    gm_json_begin_array(w);
    if (ad->n_points)
        gm_json_u64s(w, &ad->points[0].reserved, ad->n_points, sizeof(ad->points[0]));
    gm_json_end_array(w);
    gm_json_key(w, "c");
    gm_json_begin_array(w);
    for (int cat = 0; cat < GM_CATEGORY_COUNT; cat++) {
        gm_json_begin_array(w);
        if (ad->n_points)
            gm_json_u64s(w, &ad->points[0].bytes[cat], ad->n_points, sizeof(ad->points[0]));
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);

    gm_json_key(w, "runs");
    gm_json_begin_array(w);
    for (size_t i = 0; i < ad->n_phases; i++) {
        const struct gm_analysis_phase_run *r = &ad->phases[i];
        if (r->phase == GM_PHASE_OTHER)
            continue;
        gm_json_begin_array(w);
        /* a phase ends at its last event: idle time after it is no phase */
        gm_report_num(w, xat(ax, r->first_event));
        gm_report_num(w, ax->time ? xat(ax, r->last_event) : (double)r->last_event + 1.0);
        gm_json_u64(w, r->phase);
        gm_json_end_array(w);
    }
    gm_json_end_array(w);

    gm_json_key(w, "iterations");
    gm_json_begin_array(w);
    for (size_t i = 0; i < ad->n_iterations; i++) {
        const struct gm_analysis_iteration *it = &ad->iterations[i];
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "n", i + 1); /* its number, from 1 as the CLI numbers them */
        gm_json_key(w, "x0");
        gm_report_num(w, xat(ax, it->first_event));
        gm_json_key(w, "x1");
        gm_report_num(w, it->last_event + 1 >= (int64_t)ax->n_events ? ax->x_end
                                                                     : xat(ax, it->last_event + 1));
        gm_json_kv_u64(w, "start", it->start_bytes);
        gm_json_kv_u64(w, "peak", it->peak_bytes);
        gm_json_kv_i64(w, "peak_k", it->peak_event);
        gm_json_key(w, "peak_x");
        gm_report_num(w, xat(ax, it->peak_event));
        gm_json_kv_str(w, "peak_phase", gm_phase_name((enum gm_phase)it->peak_phase));
        gm_json_kv_u64(w, "end", it->end_bytes);
        gm_json_key(w, "at_peak");
        gm_json_begin_array(w);
        for (int cat = 0; cat < GM_CATEGORY_COUNT; cat++)
            gm_json_u64(w, it->at_peak[cat]);
        gm_json_end_array(w);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
}

/* ---- the user's own phases (gm_snapshot_user_ranges(): gpumem.torch.record()'s marks) ---- */

/* "uphases": [[x0, x1, name]], the user ranges of the device on its time axis (none without
 * one: the marks are times).  Returns the name of the phase of the peak: the analysis'
 * (the innermost range around the peak's event), else the one open at the peak's time. */
static const char *write_user_phases(struct gm_report_ctx *c, const struct gm_snapshot_device *sd,
                                     const struct gm_analysis_device *ad,
                                     const struct gm_lod_axis *ax,
                                     const struct gm_snapshot_timeline *tl, struct gm_error *err)
{
    struct gm_json *w = c->w;
    struct gm_snapshot_user_range *r = NULL;
    const char *at = NULL;
    size_t n = 0;
    gm_json_key(w, "uphases");
    gm_json_begin_array(w);
    if (ax->time && gm_snapshot_user_ranges(c->snap, sd->index, &r, &n, err) != GM_OK)
        c->nomem = true;
    for (size_t i = 0; i < n; i++) {
        gm_json_begin_array(w);
        gm_report_num(w, gm_lod_axis_x_of_time(ax, r[i].start_us));
        gm_report_num(w, r[i].end_us == INT64_MAX ? ax->x_end
                                                  : gm_lod_axis_x_of_time(ax, r[i].end_us));
        gm_json_str(w, r[i].name);
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
    if (ad && ad->peak_user_phase >= 0 && (size_t)ad->peak_user_phase < ad->n_user_phases)
        at = ad->user_phases[ad->peak_user_phase].name;
    else if (!ad && n && tl->peak_time_valid)
        at = gm_snapshot_user_phase_at(r, n, tl->peak_time_us);
    gm_free(r);
    return at;
}

/* ---- every record_function range (gm_analysis_regions()) ---- */

/* "annotations": [[x0, x1, name, bytes at its start, the most inside it, at its end]] on the
 * device's time axis (none without one, or without the analysis: the bytes are its). */
static void write_annotations(struct gm_report_ctx *c, const struct gm_analysis_device *ad,
                              const struct gm_lod_axis *ax, struct gm_error *err)
{
    struct gm_json *w = c->w;
    struct gm_analysis_regions r = {NULL, 0};
    gm_json_key(w, "annotations");
    gm_json_begin_array(w);
    if (ax->time && c->an && ad &&
        gm_analysis_regions_on_axis(c->an, ad, GM_REGION_ANNOTATION, ax, &r, err) != GM_OK)
        c->nomem = true;
    for (size_t i = 0; i < r.n; i++) {
        gm_json_begin_array(w);
        gm_report_num(w, gm_lod_axis_x_of_time(ax, r.v[i].start_us));
        gm_report_num(w, r.v[i].end_us == INT64_MAX ? ax->x_end
                                                    : gm_lod_axis_x_of_time(ax, r.v[i].end_us));
        gm_json_str(w, r.v[i].name);
        gm_json_u64(w, r.v[i].start_bytes);
        gm_json_u64(w, r.v[i].peak_bytes);
        gm_json_u64(w, r.v[i].end_bytes);
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
    gm_analysis_regions_release(&r);
}

/* ---- what is alive at the peak, grouped by stack (gm_analysis_peaks(), as `snapshot peak`
 * groups it) ---- */

static void write_at_peak(struct gm_report_ctx *c, const struct gm_peak_device *p)
{
    struct gm_json *w = c->w;
    uint64_t rest = 0, rest_n = 0;
    gm_json_key(w, "at_peak");
    gm_json_begin_array(w);
    for (size_t i = 0; i < p->n_groups; i++) {
        const struct gm_snapshot_live_group *g = &p->groups[i];
        if (i >= MAX_AT_PEAK) {
            rest += g->bytes;
            rest_n += g->count;
            continue;
        }
        gm_json_begin_array(w);
        gm_json_u64(w, g->bytes);
        gm_json_u64(w, g->count);
        gm_json_u64(w, g->stack);
        if (p->categories) {
            gm_json_begin_array(w);
            for (int cat = 0; cat < GM_CATEGORY_COUNT; cat++)
                gm_json_u64(w, p->categories[i][cat]);
            gm_json_end_array(w);
        } else {
            gm_json_null(w);
        }
        gm_json_end_array(w);
        gm_report_use_stack(c, g->stack);
    }
    gm_json_end_array(w);
    gm_json_kv_u64(w, "at_peak_rest_bytes", rest);
    gm_json_kv_u64(w, "at_peak_rest_count", rest_n);
    gm_json_kv_u64(w, "at_peak_groups", p->n_groups);
}

/* ---- findings ---- */

static void write_frag(struct gm_report_ctx *c, const struct gm_lod_axis *ax,
                       const struct gm_analysis_frag *f)
{
    struct gm_json *w = c->w;
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "k", f->event);
    gm_json_key(w, "x");
    gm_report_num(w, xat(ax, f->event));
    gm_json_kv_bool(w, "is_oom", f->is_oom);
    gm_json_kv_u64(w, "requested", f->requested);
    gm_json_kv_u64(w, "device_free", f->device_free);
    gm_json_kv_u64(w, "reserved", f->reserved);
    gm_json_kv_u64(w, "allocated", f->allocated);
    gm_json_kv_u64(w, "reserved_unallocated", f->reserved_unallocated);
    gm_json_kv_u64(w, "largest_free", f->largest_free);
    gm_json_kv_str(w, "phase", gm_phase_name((enum gm_phase)f->phase));
    gm_json_kv_str(w, "verdict", gm_oom_verdict_name((enum gm_oom_verdict)f->verdict));
    gm_json_kv_str(w, "advice",
                   f->verdict ? gm_oom_verdict_advice((enum gm_oom_verdict)f->verdict) : "");
    gm_json_kv_u64(w, "stack", f->stack);
    gm_report_use_stack(c, f->stack);
    gm_json_key(w, "pools");
    gm_json_begin_array(w);
    for (size_t i = 0; i < f->n_pools; i++) {
        const struct gm_analysis_pool_free *p = &f->pools[i];
        gm_json_begin_array(w);
        gm_report_stream(w, p->stream);
        gm_json_u64(w, p->is_small);
        gm_json_u64(w, p->reserved);
        gm_json_u64(w, p->free);
        gm_json_u64(w, p->largest_free);
        gm_json_u64(w, p->n_segments);
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "at");
    gm_json_begin_array(w);
    for (int cat = 0; cat < GM_CATEGORY_COUNT; cat++)
        gm_json_u64(w, f->at_event[cat]);
    gm_json_end_array(w);
    gm_json_end_object(w);
}

static void write_findings(struct gm_report_ctx *c, const struct gm_lod_axis *ax,
                           const struct gm_analysis_device *ad)
{
    struct gm_json *w = c->w;
    gm_json_key(w, "leaks");
    gm_json_begin_array(w);
    for (size_t i = 0; i < ad->n_leaks; i++) {
        const struct gm_analysis_leak *l = &ad->leaks[i];
        gm_json_begin_object(w);
        gm_json_kv_str(w, "kind", gm_leak_kind_name((enum gm_leak_kind)l->kind));
        gm_json_kv_str(w, "advice", gm_leak_kind_advice((enum gm_leak_kind)l->kind));
        gm_json_kv_u64(w, "per_iteration", l->bytes_per_iteration);
        gm_json_kv_u64(w, "total", l->total_bytes);
        gm_json_kv_u64(w, "count", l->count);
        gm_json_kv_u64(w, "iterations", l->n_iterations);
        gm_json_kv_u64(w, "cat", l->category);
        gm_json_kv_u64(w, "stack", l->stack);
        gm_json_kv_i64(w, "first_iteration", l->first_iteration + 1);
        gm_json_kv_i64(w, "last_iteration", l->last_iteration + 1);
        /* the sites of the cause: [per_iteration, total, count, iterations, stack] */
        gm_json_key(w, "sites");
        gm_json_begin_array(w);
        for (size_t k = 0; k < l->n_sites; k++) {
            const struct gm_analysis_leak_site *si = &l->sites[k];
            gm_json_begin_array(w);
            gm_json_u64(w, si->bytes_per_iteration);
            gm_json_u64(w, si->total_bytes);
            gm_json_u64(w, si->count);
            gm_json_u64(w, si->n_iterations);
            gm_json_u64(w, si->stack);
            gm_json_end_array(w);
            gm_report_use_stack(c, si->stack);
        }
        gm_json_end_array(w);
        gm_json_end_object(w);
        gm_report_use_stack(c, l->stack);
    }
    gm_json_end_array(w);
    gm_json_kv_str(w, "leak_verdict", gm_leak_verdict_name(gm_analysis_leak_verdict(ad)));
    gm_json_kv_str(w, "leak_verdict_text", gm_leak_verdict_text(gm_analysis_leak_verdict(ad)));
    gm_json_key(w, "ooms");
    gm_json_begin_array(w);
    for (size_t i = 0; i < ad->n_ooms; i++)
        write_frag(c, ax, &ad->ooms[i]);
    gm_json_end_array(w);
    gm_json_key(w, "frag");
    write_frag(c, ax, &ad->peak_frag);
    gm_json_key(w, "at_peak_cat");
    gm_json_begin_array(w);
    for (int cat = 0; cat < GM_CATEGORY_COUNT; cat++)
        gm_json_u64(w, ad->at_peak[cat]);
    gm_json_end_array(w);
    gm_json_kv_u64(w, "at_peak_unexplained", ad->at_peak_unexplained);
    gm_json_kv_u64(w, "at_peak_lifetime_only", ad->at_peak_lifetime_only);
    gm_json_key(w, "phase_events");
    gm_json_begin_array(w);
    for (int p = 0; p < GM_PHASE_COUNT; p++)
        gm_json_u64(w, ad->phase_events[p]);
    gm_json_end_array(w);
}

/* ---- one device ---- */

enum gm_status gm_report_device(struct gm_report_ctx *c, const struct gm_snapshot_device *sd,
                                const struct gm_analysis_device *ad, struct gm_error *err)
{
    struct gm_json *w = c->w;
    struct gm_analysis_peaks pk;
    const struct gm_peak_device *p;
    struct gm_snapshot_timeline tl;
    struct gm_lod_totals own; /* the axis and timeline, when the analysis kept none */
    const struct gm_lod_totals *lt;
    const struct gm_lod_axis *ax;
    struct gm_bands bands;
    struct gm_bands_opts bo = {0, RB_WINDOWS, 0};
    bool have_lod;
    const char *peak_up;
    double peak_x;
    /* the peak and what is alive there: with an analysis, its kept timeline and its
     * allocations (no replay of the trace); else the timeline of the trace */
    struct gm_analysis_peaks_opts po = {sd->index, 0};
    enum gm_status st = gm_analysis_peaks(c->snap, ad ? c->an : NULL, &po, &pk, err);
    if (st != GM_OK)
        return st;
    p = &pk.devices[0];
    tl = p->timeline;
    lt = axis_and_timeline(c, sd, ad, &tl, &own, &have_lod);
    ax = &lt->axis;
    bo.max_bands = c->o->max_bands;
    bo.per_window = (bo.max_bands ? bo.max_bands : GM_BANDS_DEFAULT) / 4 + 1;
    st = gm_bands_choose(ad, ax, &bo, &bands, err);
    if (st != GM_OK) {
        gm_lod_totals_release(&own);
        gm_analysis_peaks_release(&pk);
        return st;
    }
    peak_x = xat(ax, tl.peak_event_index);
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "device", sd->index);
    gm_json_kv_u64(w, "n_events", sd->n_events);
    gm_json_kv_bool(w, "has_trace", sd->n_events > 0);
    gm_json_kv_u64(w, "n_segments", sd->n_segments);
    gm_json_kv_str(w, "x_unit", ax->time ? "us" : "event");
    gm_json_kv_i64(w, "t0_us", ax->t0_us);
    gm_json_kv_u64(w, "x0", 0);
    gm_json_key(w, "x1");
    gm_report_num(w, ax->x_end);
    gm_json_kv_u64(w, "initial", tl.initial_bytes);
    gm_json_kv_u64(w, "final", tl.final_bytes);
    if (have_lod)
        write_lod(c, ad, &bands, lt);
    else
        gm_json_kv_null(w, "lod");
    peak_up = write_user_phases(c, sd, ad, ax, &tl, err);
    write_annotations(c, ad, ax, err);
    gm_json_key(w, "peak");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "bytes", tl.peak_bytes);
    gm_json_kv_i64(w, "k", tl.peak_event_index);
    gm_json_key(w, "x");
    gm_report_num(w, peak_x);
    if (tl.peak_time_valid)
        gm_json_kv_i64(w, "time_us", tl.peak_time_us);
    else
        gm_json_kv_null(w, "time_us");
    gm_json_kv_u64(w, "reserved", tl.reserved_at_peak_bytes);
    gm_json_kv_u64(w, "max_reserved", tl.peak_reserved_bytes);
    gm_json_kv_u64(w, "n_live", p->n_live);
    if (ad) {
        gm_json_kv_str(w, "phase", gm_phase_name((enum gm_phase)ad->peak_phase));
        /* numbered from 1 as the CLI numbers them; null outside any iteration */
        if (ad->peak_iteration >= 0)
            gm_json_kv_i64(w, "iteration", (int64_t)ad->peak_iteration + 1);
        else
            gm_json_kv_null(w, "iteration");
    }
    gm_json_kv_str(w, "uphase", peak_up);
    gm_json_end_object(w);
    write_bands(c, ax, ad, &bands);
    if (ad) {
        write_series(c, ax, ad);
        write_findings(c, ax, ad);
    }
    write_at_peak(c, p);
    st = gm_report_state(c, sd, ad, &tl, ax, err);
    gm_json_end_object(w);
    gm_bands_release(&bands);
    gm_lod_totals_release(&own);
    gm_analysis_peaks_release(&pk);
    if (st == GM_OK && c->nomem)
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
    return st;
}
