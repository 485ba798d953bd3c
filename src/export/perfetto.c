/* SPDX-License-Identifier: MIT */
/* perfetto.c - a snapshot as Chrome trace-event JSON, the JSON that ui.perfetto.dev and
 * chrome://tracing open (the "JSON Object Format" of the Trace Event Format):
 *
 *   {"displayTimeUnit": "ms", "otherData": {...}, "traceEvents": [...]}
 *
 * Per device one process (pid = device index + 1, named "cuda:N"; with several files, the
 * ranks of one job, pid = 1000 x file + device index + 1, named "FILE cuda:N"), in it:
 *   "C" counters  "allocated" (args: bytes per category, a stacked counter) and "reserved"
 *                 at every point of the analysis' series
 *   "X" slices    tid 1 the phases (forward, backward, optimizer_step), tid 2 the training
 *                 iterations ("iteration N", 1-based as the CLI counts them), tid 3 the
 *                 record_function annotations, START paired with the END that closes it
 *   "i" instants  out-of-memory events (process scope)
 *   "M" metadata  process and thread names
 * Timestamps are microseconds since the earliest first event of the files when every trace
 * records times; otherwise the axis is the event index (event k at k + 1, the start at 0),
 * which otherData.time_axis says, and annotations (timed only) are left out. */
#include "export/export_int.h"

#include "gpumem/json.h"
#include "gpumem/version.h"

#include <string.h>

enum { TID_PHASES = 1, TID_ITERATIONS, TID_ANNOTATIONS };

struct axis {
    const struct gm_snapshot *snap;
    const struct gm_snapshot_device *sdev;
    bool timed;        /* the traces record times */
    int64_t origin_us; /* the time of ts 0 */
};

/* The timestamp of time 't' (microseconds since the origin; saturated when a damaged file
 * holds times a span beyond int64 apart: gm_snapshot_span_us()). */
static int64_t ts_of(const struct axis *ax, int64_t t)
{
    int64_t ts;
    (void)gm_snapshot_span_us(t, ax->origin_us, &ts);
    return ts;
}

/* The timestamp of the state after event k (-1: the start). */
static int64_t axis_ts(const struct axis *ax, int64_t k)
{
    struct gm_snapshot_event e;
    if (!ax->timed)
        return k + 1;
    if (k < 0)
        k = 0;
    if (ax->sdev && gm_snapshot_event_at(ax->sdev, (size_t)k, &e) && (e.flags & GM_EVENT_HAS_TIME))
        return ts_of(ax, e.time_us);
    return 0;
}

static void head(struct gm_json *w, const char *ph, const char *name, int32_t pid, int tid)
{
    gm_json_begin_object(w);
    gm_json_kv_str(w, "ph", ph);
    gm_json_kv_str(w, "name", name);
    gm_json_kv_i64(w, "pid", pid);
    gm_json_kv_i64(w, "tid", tid);
}

static void meta(struct gm_json *w, const char *what, int32_t pid, int tid, const char *name)
{
    head(w, "M", what, pid, tid);
    gm_json_key(w, "args");
    gm_json_begin_object(w);
    gm_json_kv_str(w, "name", name);
    gm_json_end_object(w);
    gm_json_end_object(w);
}

static void slice(struct gm_json *w, const char *name, int32_t pid, int tid, int64_t ts,
                  int64_t end)
{
    int64_t dur;
    (void)gm_snapshot_span_us(end, ts, &dur);
    head(w, "X", name, pid, tid);
    gm_json_kv_i64(w, "ts", ts);
    gm_json_kv_i64(w, "dur", dur > 0 ? dur : 0);
}

static void counters(struct gm_json *w, const struct axis *ax, int32_t pid,
                     const struct gm_analysis_device *dev)
{
    for (size_t i = 0; i < dev->n_points; i++) {
        const struct gm_analysis_point *p = &dev->points[i];
        int64_t ts = p->has_time && ax->timed ? ts_of(ax, p->time_us) : axis_ts(ax, p->event);
        head(w, "C", "allocated", pid, 0);
        gm_json_kv_i64(w, "ts", ts);
        gm_json_key(w, "args");
        gm_json_begin_object(w);
        for (int c = 0; c < GM_CATEGORY_COUNT; c++)
            gm_json_kv_u64(w, gm_category_name((enum gm_category)c), p->bytes[c]);
        gm_json_end_object(w);
        gm_json_end_object(w);
        head(w, "C", "reserved", pid, 0);
        gm_json_kv_i64(w, "ts", ts);
        gm_json_key(w, "args");
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "reserved", p->reserved);
        gm_json_end_object(w);
        gm_json_end_object(w);
    }
}

static void phases(struct gm_json *w, const struct axis *ax, int32_t pid,
                   const struct gm_analysis_device *dev)
{
    for (size_t i = 0; i < dev->n_phases; i++) {
        const struct gm_analysis_phase_run *r = &dev->phases[i];
        if (r->phase == GM_PHASE_OTHER)
            continue;
        slice(w, gm_phase_name((enum gm_phase)r->phase), pid, TID_PHASES,
              axis_ts(ax, r->first_event - 1), axis_ts(ax, r->last_event));
        gm_json_end_object(w);
    }
    for (size_t i = 0; i < dev->n_iterations; i++) {
        const struct gm_analysis_iteration *it = &dev->iterations[i];
        char name[48];
        snprintf(name, sizeof(name), "iteration %zu", i + 1);
        slice(w, name, pid, TID_ITERATIONS, axis_ts(ax, it->first_event - 1),
              axis_ts(ax, it->last_event));
        gm_json_key(w, "args");
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "start_bytes", it->start_bytes);
        gm_json_kv_u64(w, "peak_bytes", it->peak_bytes);
        gm_json_kv_i64(w, "peak_event", it->peak_event);
        gm_json_kv_u64(w, "end_bytes", it->end_bytes);
        gm_json_end_object(w);
        gm_json_end_object(w);
    }
}

/* record_function ranges of device 'device': each START with the END of its name that closes
 * it (ranges of one name nest), one never closed lasting to the end of the trace. */
static void annotations(struct gm_json *w, const struct axis *ax, int32_t pid, int32_t device)
{
    const struct gm_snapshot *snap = ax->snap;
    int64_t last = ts_of(ax, snap->time_last_us);
    for (size_t i = 0; i < snap->n_annotations; i++) {
        const struct gm_snapshot_annotation *a = &snap->annotations[i];
        int64_t end = last;
        size_t depth = 0; /* ranges of the same name opened inside this one */
        if (a->device != device || !a->is_start)
            continue;
        for (size_t j = i + 1; j < snap->n_annotations; j++) {
            const struct gm_snapshot_annotation *b = &snap->annotations[j];
            if (b->device != device || strcmp(b->name, a->name) != 0)
                continue;
            if (b->is_start) {
                depth++;
            } else if (depth) {
                depth--;
            } else {
                end = ts_of(ax, b->time_us);
                break;
            }
        }
        slice(w, a->name, pid, TID_ANNOTATIONS, ts_of(ax, a->time_us), end);
        gm_json_end_object(w);
    }
}

static void ooms(struct gm_json *w, const struct axis *ax, int32_t pid,
                 const struct gm_analysis_device *dev)
{
    for (size_t i = 0; i < dev->n_ooms; i++) {
        const struct gm_analysis_frag *o = &dev->ooms[i];
        head(w, "i", "out of memory", pid, 0);
        gm_json_kv_i64(w, "ts", axis_ts(ax, o->event));
        gm_json_kv_str(w, "s", "p");
        gm_json_key(w, "args");
        gm_json_begin_object(w);
        gm_json_kv_i64(w, "event", o->event);
        gm_json_kv_u64(w, "requested", o->requested);
        gm_json_kv_u64(w, "device_free", o->device_free);
        gm_json_kv_u64(w, "reserved", o->reserved);
        gm_json_kv_u64(w, "allocated", o->allocated);
        gm_json_end_object(w);
        gm_json_end_object(w);
    }
}

/* The processes of one file. */
static void file_events(struct gm_json *w, const struct gm_export_input *in, size_t file,
                        size_t n_files, bool timed, int64_t origin_us,
                        const struct gm_export_opts *o)
{
    const struct gm_analysis *an = in->an;
    for (size_t d = 0; d < an->n_devices; d++) {
        const struct gm_analysis_device *dev = &an->devices[d];
        struct axis ax = {in->snap, gm_snapshot_device_by_index(in->snap, dev->device), timed,
                          origin_us};
        int32_t pid = (int32_t)(n_files > 1 ? 1000 * file : 0) + dev->device + 1;
        char name[300];
        if (!export_selects(o, dev->device))
            continue;
        if (n_files > 1)
            snprintf(name, sizeof(name), "%.250s cuda:%d", in->label ? in->label : "?",
                     (int)dev->device);
        else
            snprintf(name, sizeof(name), "cuda:%d", (int)dev->device);
        meta(w, "process_name", pid, 0, name);
        meta(w, "thread_name", pid, TID_PHASES, "phases");
        meta(w, "thread_name", pid, TID_ITERATIONS, "iterations");
        if (timed)
            meta(w, "thread_name", pid, TID_ANNOTATIONS, "annotations");
        counters(w, &ax, pid, dev);
        phases(w, &ax, pid, dev);
        if (timed)
            annotations(w, &ax, pid, dev->device);
        ooms(w, &ax, pid, dev);
    }
}

enum gm_status export_perfetto(FILE *f, const struct gm_export_input *in, size_t n,
                               const struct gm_export_opts *o, struct gm_error *err)
{
    struct gm_json w;
    bool timed = true;
    int64_t origin_us = INT64_MAX;
    for (size_t i = 0; i < n; i++) {
        timed = timed && in[i].snap->has_time;
        if (in[i].snap->has_time && in[i].snap->time_first_us < origin_us)
            origin_us = in[i].snap->time_first_us;
    }
    gm_json_init(&w, f, 0);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "displayTimeUnit", "ms");
    gm_json_key(&w, "otherData");
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "generator", "gpumem");
    gm_json_kv_str(&w, "gpumem_version", gm_version());
    gm_json_key(&w, "files");
    gm_json_begin_array(&w);
    for (size_t i = 0; i < n; i++)
        gm_json_str(&w, in[i].label ? in[i].label : "");
    gm_json_end_array(&w);
    gm_json_kv_str(&w, "time_axis", timed ? "microseconds since the first event" : "event index");
    if (timed)
        gm_json_kv_i64(&w, "time_origin_us", origin_us);
    gm_json_end_object(&w);
    gm_json_key(&w, "traceEvents");
    gm_json_begin_array(&w);
    for (size_t i = 0; i < n; i++)
        file_events(&w, &in[i], i, n, timed, origin_us, o);
    gm_json_end_array(&w);
    gm_json_end_object(&w);
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "perfetto: the write failed");
    return GM_OK;
}
