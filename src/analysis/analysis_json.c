/* SPDX-License-Identifier: MIT */
/* analysis_json.c - the JSON documents of the snapshot commands (gm_analysis_json()):
 * info, stats, peak, categories, leaks, oom and diff, written once here for the CLI's
 * --json and for Python's Snapshot methods, which parse them.
 *
 * A document is {"schema": "gpumem.snapshot.<command>/1", "gpumem_version", ...}: the
 * members of one file, or with several files (stats, peak, categories: the ranks of one
 * job) {"files": [{"file", ...}], "ranks", "spread", "imbalance"}.  Key order is fixed;
 * sizes are exact integers; what is unknown is null, never 0.  The text outputs of the
 * same results are the CLI's. */
#include "analysis/analysis_int.h"

#include "gpumem/json.h"
#include "gpumem/version.h"

#include <stdio.h>
#include <string.h>

static const char *const doc_name[GM_DOC_COUNT] = {"info",  "stats", "peak", "categories",
                                                   "leaks", "oom",   "diff", "digest"};

const char *gm_analysis_doc_name(enum gm_analysis_doc_kind kind)
{
    return (unsigned)kind < GM_DOC_COUNT ? doc_name[kind] : "?";
}

uint64_t gm_analysis_doc_top(enum gm_analysis_doc_kind kind)
{
    switch (kind) {
    case GM_DOC_LEAKS:
        return 10;
    case GM_DOC_DIFF:
        return 20;
    case GM_DOC_DIGEST:
        return GM_DIGEST_SITES;
    default:
        return 0;
    }
}

static const char *file_path(const struct gm_analysis_doc *doc, size_t i)
{
    return i < doc->n_files && doc->files[i].path ? doc->files[i].path : "";
}

/* An iteration as the CLI says it ("iteration 3 of 4"): numbered from 1, null outside
 * any (the analysis numbers them from 0, -1 outside). */
static void json_iteration(struct gm_json *w, const char *key, int32_t iteration)
{
    if (iteration < 0)
        gm_json_kv_null(w, key);
    else
        gm_json_kv_i64(w, key, (int64_t)iteration + 1);
}

/* ---- frames ---- */

static void json_frame_obj(struct gm_json *w, const struct gm_snapshot_frame *f)
{
    gm_json_begin_object(w);
    gm_json_kv_str(w, "filename", f->filename);
    gm_json_kv_i64(w, "line", f->line);
    gm_json_kv_str(w, "name", f->name);
    gm_json_end_object(w);
}

/* The user frame of 'stack' (gm_snapshot_stack_user_frame()), null when it has none. */
static void json_user_frame(struct gm_json *w, const struct gm_snapshot *snap, uint32_t stack)
{
    long u = gm_snapshot_stack_user_frame(snap, stack);
    const struct gm_snapshot_frame *f;
    if (u < 0 || !gm_snapshot_frame_is_user(f = &snap->frames[snap->stacks[stack].frames[u]])) {
        gm_json_null(w);
        return;
    }
    json_frame_obj(w, f);
}

void ana_json_stack(struct gm_json *w, const struct gm_snapshot *snap, uint32_t stack)
{
    const struct gm_snapshot_stack *s = stack < snap->n_stacks ? &snap->stacks[stack] : NULL;
    gm_json_begin_array(w);
    for (uint32_t i = 0; s && i < s->n_frames; i++) {
        const struct gm_snapshot_frame *f = &snap->frames[s->frames[i]];
        if (!f->is_noise)
            json_frame_obj(w, f);
    }
    gm_json_end_array(w);
}

/* The frames worth showing of 'stack' (gm_snapshot_stack_frames()), at most 256. */
static void json_frames(struct gm_json *w, const struct gm_snapshot *snap, uint32_t stack)
{
    uint32_t ids[256];
    size_t n = gm_snapshot_stack_frames(snap, stack, ids, 256);
    if (n > 256)
        n = 256;
    gm_json_begin_array(w);
    for (size_t i = 0; i < n; i++)
        json_frame_obj(w, &snap->frames[ids[i]]);
    gm_json_end_array(w);
}

/* ---- info ---- */

static void json_setting(struct gm_json *w, const struct gm_snapshot_setting *s)
{
    gm_json_key(w, s->key);
    switch (s->type) {
    case GM_SETTING_INT:
        gm_json_i64(w, s->i);
        break;
    case GM_SETTING_FLOAT:
        gm_json_double(w, s->d);
        break;
    case GM_SETTING_BOOL:
        gm_json_bool(w, s->i != 0);
        break;
    case GM_SETTING_STR:
        gm_json_str(w, s->s);
        break;
    default:
        gm_json_null(w);
        break;
    }
}

static void info_doc(struct gm_json *w, const char *path, const struct gm_snapshot *s)
{
    gm_json_kv_str(w, "file", path);
    gm_json_kv_u64(w, "file_bytes", s->file_size);
    gm_json_kv_bool(w, "gzip", s->compressed);
    gm_json_kv_u64(w, "pickle_bytes", s->pickle_size);
    gm_json_kv_str(w, "generation", gm_snapshot_gen_name(s->gen));
    gm_json_kv_str(w, "torch", gm_snapshot_gen_torch(s->gen));
    gm_json_kv_i64(w, "pickle_protocol", s->protocol);
    gm_json_kv_bool(w, "top_level_list", s->is_list);
    gm_json_kv_u64(w, "segments", s->n_segments);
    gm_json_kv_u64(w, "blocks", s->n_blocks);
    gm_json_kv_u64(w, "trace_events", s->n_events);
    gm_json_kv_u64(w, "unique_frames", s->n_frames);
    gm_json_kv_u64(w, "unique_stacks", s->n_stacks > 0 ? s->n_stacks - 1 : 0);
    gm_json_key(w, "devices");
    gm_json_begin_array(w);
    for (size_t i = 0; i < s->n_devices; i++) {
        const struct gm_snapshot_device *d = &s->devices[i];
        size_t blocks = 0;
        for (size_t j = d->first_segment; j < d->first_segment + d->n_segments; j++)
            blocks += s->segments[j].n_blocks;
        gm_json_begin_object(w);
        gm_json_kv_i64(w, "device", d->index);
        gm_json_kv_bool(w, "has_trace", d->has_trace);
        gm_json_kv_u64(w, "segments", d->n_segments);
        gm_json_kv_u64(w, "blocks", blocks);
        gm_json_kv_u64(w, "trace_events", d->n_events);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "actions");
    gm_json_begin_object(w);
    for (int a = 0; a < GM_ACTION_COUNT; a++)
        gm_json_kv_u64(w, gm_snapshot_action_name((enum gm_snapshot_action)a),
                       gm_snapshot_action_count(s, (enum gm_snapshot_action)a));
    gm_json_end_object(w);
    if (s->has_time) {
        gm_json_kv_i64(w, "time_first_us", s->time_first_us);
        gm_json_kv_i64(w, "time_last_us", s->time_last_us);
    } else {
        gm_json_kv_null(w, "time_first_us");
        gm_json_kv_null(w, "time_last_us");
    }
    gm_json_key(w, "allocator_settings");
    if (s->has_allocator_settings) {
        gm_json_begin_object(w);
        for (size_t i = 0; i < s->n_settings; i++)
            json_setting(w, &s->settings[i]);
        gm_json_end_object(w);
    } else {
        gm_json_null(w);
    }
    gm_json_key(w, "annotations");
    if (s->has_annotations) {
        gm_json_begin_array(w);
        for (size_t i = 0; i < s->n_annotations; i++) {
            const struct gm_snapshot_annotation *a = &s->annotations[i];
            gm_json_begin_object(w);
            gm_json_kv_str(w, "name", a->name);
            gm_json_kv_str(w, "stage", a->stage);
            gm_json_kv_i64(w, "device", a->device);
            gm_json_kv_i64(w, "time_us", a->time_us);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
    } else {
        gm_json_null(w);
    }
    gm_json_kv_bool(w, "host_data", s->has_host_data);
    if (s->has_host_data) {
        /* pinned host memory, counted in no device's figures */
        const struct gm_snapshot_device *h = &s->host;
        gm_json_key(w, "host");
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "segments", s->n_host_segments);
        gm_json_kv_u64(w, "blocks", s->n_host_blocks);
        gm_json_kv_bool(w, "has_trace", h->has_trace);
        gm_json_kv_u64(w, "trace_events", h->n_events);
        gm_json_end_object(w);
    }
    if (s->device_kind != GM_DEVICE_CUDA)
        gm_json_kv_str(w, "device_kind", gm_device_kind_name(s->device_kind));
    gm_json_kv_bool(w, "trace_overflowed", s->trace_overflowed);
    gm_json_kv_u64(w, "flat_batches", s->n_flat_batches);
    gm_json_key(w, "oom_devices");
    gm_json_begin_array(w);
    for (size_t i = 0; i < s->n_devices; i++)
        if (s->devices[i].n_actions[GM_ACTION_OOM])
            gm_json_i64(w, s->devices[i].index);
    gm_json_end_array(w);
}

/* ---- stats ---- */

static void json_figures(struct gm_json *w, const struct gm_snapshot_figures *f)
{
    gm_json_kv_u64(w, "reserved_bytes", f->reserved_bytes);
    gm_json_kv_u64(w, "allocated_bytes", f->allocated_bytes);
    gm_json_kv_u64(w, "active_bytes", f->active_bytes);
    gm_json_kv_u64(w, "requested_bytes", f->requested_bytes);
    gm_json_kv_u64(w, "internal_free_bytes", f->internal_free_bytes);
    gm_json_kv_u64(w, "external_free_bytes", f->external_free_bytes);
    gm_json_kv_u64(w, "largest_free_block_bytes", f->largest_free_block_bytes);
    gm_json_kv_u64(w, "segments", f->n_segments);
    gm_json_kv_u64(w, "blocks", f->n_blocks);
    gm_json_kv_u64(w, "active_allocated_blocks", f->n_active_blocks);
    gm_json_kv_u64(w, "active_pending_free_blocks", f->n_pending_free_blocks);
    gm_json_kv_u64(w, "inactive_blocks", f->n_inactive_blocks);
}

static void stats_devices(struct gm_json *w, const struct gm_snapshot_stats *st)
{
    if (st->has_host) {
        /* pinned host memory: beside the devices, in none of their figures */
        gm_json_key(w, "host");
        gm_json_begin_object(w);
        json_figures(w, &st->host);
        gm_json_end_object(w);
    }
    gm_json_key(w, "devices");
    gm_json_begin_array(w);
    for (size_t i = 0; i < st->n_devices; i++) {
        const struct gm_snapshot_device_stats *d = &st->devices[i];
        gm_json_begin_object(w);
        gm_json_kv_i64(w, "device", d->device);
        json_figures(w, &d->fig);
        gm_json_key(w, "pools");
        gm_json_begin_array(w);
        for (size_t p = 0; p < d->n_pools; p++) {
            const struct gm_snapshot_pool_stats *ps = &d->pools[p];
            gm_json_begin_object(w);
            gm_json_kv_str(w, "pool", ps->is_small ? "small" : "large");
            gm_json_key(w, "pool_id");
            gm_json_begin_array(w);
            gm_json_i64(w, ps->pool_id[0]);
            gm_json_i64(w, ps->pool_id[1]);
            gm_json_end_array(w);
            gm_json_kv_bool(w, "expandable", ps->is_expandable);
            json_figures(w, &ps->fig);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
        gm_json_key(w, "segment_size_histogram");
        gm_json_begin_array(w);
        for (size_t h = 0; h < d->n_hist; h++) {
            gm_json_begin_object(w);
            gm_json_kv_u64(w, "min_bytes", d->hist[h].lo);
            gm_json_kv_u64(w, "max_bytes_exclusive", d->hist[h].hi);
            gm_json_kv_u64(w, "segments", d->hist[h].n_segments);
            gm_json_kv_u64(w, "bytes", d->hist[h].bytes);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
}

/* ---- peak ---- */

static void peak_device(struct gm_json *w, const struct gm_snapshot *snap,
                        const struct gm_peak_device *p, uint64_t top)
{
    const struct gm_snapshot_timeline *tl = &p->timeline;
    const struct gm_snapshot_device *d = gm_snapshot_device_by_index(snap, p->device);
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "device", p->device);
    gm_json_kv_u64(w, "peak_bytes", tl->peak_bytes);
    gm_json_kv_i64(w, "peak_event_index", tl->peak_event_index);
    if (tl->peak_time_valid)
        gm_json_kv_i64(w, "peak_time_us", tl->peak_time_us);
    else
        gm_json_kv_null(w, "peak_time_us");
    gm_json_kv_u64(w, "peak_reserved_bytes", tl->peak_reserved_bytes);
    gm_json_kv_u64(w, "reserved_at_peak_bytes", tl->reserved_at_peak_bytes);
    gm_json_kv_u64(w, "initial_bytes", tl->initial_bytes);
    gm_json_kv_u64(w, "final_bytes", tl->final_bytes);
    gm_json_kv_u64(w, "trace_events", d ? d->n_events : 0);
    if (p->user_phase)
        gm_json_kv_str(w, "peak_user_phase", p->user_phase);
    else
        gm_json_kv_null(w, "peak_user_phase");
    gm_json_key(w, "first_oom");
    if (p->has_oom) {
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "event_index", p->first_oom.event);
        gm_json_kv_u64(w, "requested_bytes", p->first_oom.requested);
        gm_json_kv_u64(w, "device_free_bytes", p->first_oom.device_free);
        gm_json_end_object(w);
    } else {
        gm_json_null(w);
    }
    gm_json_kv_u64(w, "live_allocations", p->n_live);
    gm_json_kv_u64(w, "live_groups", p->n_groups);
    gm_json_key(w, "live_at_peak");
    gm_json_begin_array(w);
    for (size_t g = 0; g < p->n_groups && (top == 0 || g < top); g++) {
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "bytes", p->groups[g].bytes);
        gm_json_kv_u64(w, "count", p->groups[g].count);
        gm_json_kv_u64(w, "stack", p->groups[g].stack);
        gm_json_key(w, "user_frame");
        json_user_frame(w, snap, p->groups[g].stack);
        gm_json_key(w, "frames");
        ana_json_stack(w, snap, p->groups[g].stack);
        if (p->group_metadata && p->group_metadata[g])
            gm_json_kv_str(w, "user_metadata", p->group_metadata[g]);
        if (p->group_user_stack && p->group_user_stack[g]) {
            gm_json_kv_u64(w, "source_stack", p->group_user_stack[g]);
            gm_json_key(w, "source_user_frame");
            json_user_frame(w, snap, p->group_user_stack[g]);
        }
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);
}

/* ---- categories ---- */

static void json_cats(struct gm_json *w, const char *key, const uint64_t *b)
{
    gm_json_key(w, key);
    gm_json_begin_object(w);
    for (int c = 0; c < GM_CATEGORY_COUNT; c++)
        gm_json_kv_u64(w, gm_category_name((enum gm_category)c), b[c]);
    gm_json_end_object(w);
}

/* "user_rules_at_peak": what each of the user's category rules decided at the peak (only
 * when the analysis applied some). */
static void json_user_rules(struct gm_json *w, const struct gm_analysis *an,
                            const struct gm_analysis_device *dev)
{
    uint64_t b[GM_CATEGORY_RULES_MAX];
    size_t n = an->n_user_rules < GM_CATEGORY_RULES_MAX ? an->n_user_rules : GM_CATEGORY_RULES_MAX;
    if (!n)
        return;
    gm_analysis_user_rules_at(dev, dev->peak_event, b, n);
    gm_json_key(w, "user_rules_at_peak");
    gm_json_begin_array(w);
    for (size_t i = 0; i < n; i++) {
        gm_json_begin_object(w);
        gm_json_kv_str(w, "name", an->user_rule_names[i]);
        gm_json_kv_str(w, "category",
                       gm_category_name((enum gm_category)an->user_rule_categories[i]));
        gm_json_kv_u64(w, "bytes", b[i]);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
}

/* "components": per category torch's component bytes, ours at the end of the trace, and
 * the difference (ours - torch's), for the categories the stats name. */
static void components_json(struct gm_json *w, const struct gm_analysis_device *dev,
                            const struct gm_components *c)
{
    gm_json_key(w, "components");
    gm_json_begin_object(w);
    for (int k = 0; k < GM_CATEGORY_COUNT; k++) {
        if (!c->has[k])
            continue;
        gm_json_key(w, gm_category_name((enum gm_category)k));
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "torch_bytes", c->bytes[k]);
        gm_json_kv_u64(w, "gpumem_bytes", dev->at_end[k]);
        gm_json_kv_i64(w, "difference_bytes", (int64_t)(dev->at_end[k] - c->bytes[k]));
        gm_json_end_object(w);
    }
    gm_json_kv_u64(w, "unmapped_bytes", c->unmapped_bytes);
    gm_json_end_object(w);
}

static void categories_device(struct gm_json *w, const struct gm_snapshot *snap,
                              const struct gm_analysis_device *dev, bool series,
                              const struct gm_components *components, const struct gm_analysis *an)
{
    struct gm_snapshot_figures pools;
    uint64_t rules[GM_RULE_COUNT];
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "device", dev->device);
    gm_json_kv_u64(w, "peak_bytes", dev->peak_bytes);
    gm_json_kv_i64(w, "peak_event_index", dev->peak_event);
    if (dev->peak_has_time)
        gm_json_kv_i64(w, "peak_time_us", dev->peak_time_us);
    else
        gm_json_kv_null(w, "peak_time_us");
    gm_json_kv_str(w, "peak_phase", gm_phase_name((enum gm_phase)dev->peak_phase));
    json_iteration(w, "peak_iteration", dev->peak_iteration);
    json_cats(w, "at_peak", dev->at_peak);
    int dom = gm_analysis_dominant(dev);
    if (dom < GM_CATEGORY_COUNT) {
        gm_json_kv_str(w, "dominant", gm_category_name((enum gm_category)dom));
        gm_json_kv_str(w, "advice", gm_category_advice((enum gm_category)dom));
    } else {
        gm_json_kv_null(w, "dominant");
        gm_json_kv_null(w, "advice");
    }
    gm_json_kv_u64(w, "unexplained_bytes", dev->at_peak_unexplained);
    gm_json_kv_u64(w, "lifetime_only_bytes", dev->at_peak_lifetime_only);
    gm_analysis_rules_at(dev, dev->peak_event, rules);
    gm_json_key(w, "rules_at_peak");
    gm_json_begin_object(w);
    for (int r = 0; r < GM_RULE_COUNT; r++)
        if (rules[r])
            gm_json_kv_u64(w, gm_rule_name((enum gm_rule)r), rules[r]);
    gm_json_end_object(w);
    json_user_rules(w, an, dev);
    json_cats(w, "at_end", dev->at_end);
    if (gm_snapshot_private_pool_figures(snap, dev->device, &pools)) {
        /* what CUDA graphs' and MemPools' own pools hold at the snapshot */
        gm_json_key(w, "private_pools");
        gm_json_begin_object(w);
        json_figures(w, &pools);
        gm_json_end_object(w);
    }
    if (components)
        components_json(w, dev, components);
    gm_json_kv_u64(w, "events", dev->n_events);
    gm_json_key(w, "phase_events");
    gm_json_begin_object(w);
    for (int p = 0; p < GM_PHASE_COUNT; p++)
        gm_json_kv_u64(w, gm_phase_name((enum gm_phase)p), dev->phase_events[p]);
    gm_json_end_object(w);
    gm_json_kv_u64(w, "iterations", dev->n_iterations);
    gm_json_key(w, "iteration_peaks");
    gm_json_begin_array(w);
    for (size_t i = 0; i < dev->n_iterations; i++) {
        const struct gm_analysis_iteration *it = &dev->iterations[i];
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "iteration", i + 1);
        gm_json_kv_u64(w, "peak_bytes", it->peak_bytes);
        gm_json_kv_i64(w, "peak_event_index", it->peak_event);
        gm_json_kv_str(w, "peak_phase", gm_phase_name((enum gm_phase)it->peak_phase));
        json_cats(w, "at_peak", it->at_peak);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "user_phases");
    gm_json_begin_array(w);
    for (size_t i = 0; i < dev->n_user_phases; i++) {
        const struct gm_analysis_user_phase *u = &dev->user_phases[i];
        gm_json_begin_object(w);
        gm_json_kv_str(w, "name", u->name);
        gm_json_kv_u64(w, "ranges", u->n_ranges);
        gm_json_kv_u64(w, "events", u->n_events);
        gm_json_kv_u64(w, "allocated_bytes", u->allocated_bytes);
        gm_json_kv_u64(w, "peak_bytes", u->peak_bytes);
        gm_json_kv_i64(w, "peak_event_index", u->peak_event);
        json_cats(w, "at_peak", u->at_peak);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    if (dev->peak_user_phase >= 0)
        gm_json_kv_str(w, "peak_user_phase", dev->user_phases[dev->peak_user_phase].name);
    else
        gm_json_kv_null(w, "peak_user_phase");
    if (series) {
        gm_json_key(w, "user_ranges");
        gm_json_begin_array(w);
        for (size_t i = 0; i < dev->n_user_ranges; i++) {
            const struct gm_analysis_user_range *r = &dev->user_ranges[i];
            gm_json_begin_object(w);
            gm_json_kv_str(w, "phase", dev->user_phases[r->phase].name);
            gm_json_kv_i64(w, "first_event", r->first_event);
            gm_json_kv_i64(w, "last_event", r->last_event);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
        gm_json_key(w, "phases");
        gm_json_begin_array(w);
        for (size_t i = 0; i < dev->n_phases; i++) {
            const struct gm_analysis_phase_run *r = &dev->phases[i];
            gm_json_begin_object(w);
            gm_json_kv_i64(w, "first_event", r->first_event);
            gm_json_kv_i64(w, "last_event", r->last_event);
            gm_json_kv_str(w, "phase", gm_phase_name((enum gm_phase)r->phase));
            json_iteration(w, "iteration", r->iteration);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
        gm_json_key(w, "series");
        gm_json_begin_array(w);
        for (size_t i = 0; i < dev->n_points; i++) {
            const struct gm_analysis_point *p = &dev->points[i];
            gm_json_begin_object(w);
            gm_json_kv_i64(w, "event", p->event);
            if (p->has_time)
                gm_json_kv_i64(w, "time_us", p->time_us);
            else
                gm_json_kv_null(w, "time_us");
            gm_json_kv_str(w, "phase", gm_phase_name((enum gm_phase)p->phase));
            gm_json_kv_u64(w, "total", p->total);
            gm_json_kv_u64(w, "reserved", p->reserved);
            json_cats(w, "bytes", p->bytes);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
    }
    gm_json_end_object(w);
}

/* ---- leaks ---- */

static void json_frame(struct gm_json *w, const struct gm_snapshot *snap, uint32_t frame)
{
    const struct gm_snapshot_frame *f;
    if (frame >= snap->n_frames) {
        gm_json_null(w);
        return;
    }
    f = &snap->frames[frame];
    gm_json_begin_object(w);
    gm_json_kv_str(w, "filename", f->filename);
    gm_json_kv_i64(w, "line", f->line);
    gm_json_kv_str(w, "name", f->name);
    gm_json_end_object(w);
}

static void json_leak(struct gm_json *w, const struct gm_snapshot *snap,
                      const struct gm_analysis_leak *l)
{
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "bytes_per_iteration", l->bytes_per_iteration);
    gm_json_kv_u64(w, "total_bytes", l->total_bytes);
    gm_json_kv_u64(w, "count", l->count);
    gm_json_kv_u64(w, "n_iterations", l->n_iterations);
    gm_json_kv_i64(w, "first_iteration", l->first_iteration + 1);
    gm_json_kv_i64(w, "last_iteration", l->last_iteration + 1);
    gm_json_kv_str(w, "kind", gm_leak_kind_name((enum gm_leak_kind)l->kind));
    gm_json_kv_str(w, "category", gm_category_name((enum gm_category)l->category));
    gm_json_kv_str(w, "advice", gm_leak_kind_advice((enum gm_leak_kind)l->kind));
    gm_json_key(w, "cause_frame");
    json_frame(w, snap, l->frame);
    gm_json_key(w, "frames");
    json_frames(w, snap, l->stack);
    gm_json_key(w, "sites");
    gm_json_begin_array(w);
    for (size_t s = 0; s < l->n_sites; s++) {
        const struct gm_analysis_leak_site *si = &l->sites[s];
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "bytes_per_iteration", si->bytes_per_iteration);
        gm_json_kv_u64(w, "total_bytes", si->total_bytes);
        gm_json_kv_u64(w, "count", si->count);
        gm_json_kv_u64(w, "n_iterations", si->n_iterations);
        gm_json_key(w, "user_frame");
        json_user_frame(w, snap, si->stack);
        gm_json_key(w, "frames");
        json_frames(w, snap, si->stack);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);
}

static void leaks_device(struct gm_json *w, const struct gm_snapshot *snap,
                         const struct gm_analysis_device *dev, uint64_t top)
{
    enum gm_leak_verdict v = gm_analysis_leak_verdict(dev);
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "device", dev->device);
    gm_json_kv_u64(w, "iterations", dev->n_iterations);
    gm_json_key(w, "iteration_list");
    gm_json_begin_array(w);
    for (size_t i = 0; i < dev->n_iterations; i++) {
        const struct gm_analysis_iteration *it = &dev->iterations[i];
        gm_json_begin_object(w);
        gm_json_kv_i64(w, "first_event", it->first_event);
        gm_json_kv_i64(w, "last_event", it->last_event);
        gm_json_kv_i64(w, "backward_event", it->backward_event);
        gm_json_kv_i64(w, "step_event", it->step_event);
        gm_json_kv_u64(w, "start_bytes", it->start_bytes);
        gm_json_kv_u64(w, "peak_bytes", it->peak_bytes);
        gm_json_kv_i64(w, "peak_event_index", it->peak_event);
        gm_json_kv_str(w, "peak_phase", gm_phase_name((enum gm_phase)it->peak_phase));
        gm_json_kv_u64(w, "end_bytes", it->end_bytes);
        if (it->has_time) {
            gm_json_kv_i64(w, "start_time_us", it->start_us);
            gm_json_kv_i64(w, "end_time_us", it->end_us);
        }
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_kv_str(w, "verdict", gm_leak_verdict_name(v));
    gm_json_kv_str(w, "verdict_text", gm_leak_verdict_text(v));
    gm_json_key(w, "leaks");
    gm_json_begin_array(w);
    for (size_t i = 0; i < dev->n_leaks && (!top || i < top); i++)
        json_leak(w, snap, &dev->leaks[i]);
    gm_json_end_array(w);
    gm_json_end_object(w);
}

/* ---- oom ---- */

static void json_frag(struct gm_json *w, const struct gm_snapshot *snap,
                      const struct gm_analysis_frag *f)
{
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "event_index", f->event);
    gm_json_kv_str(w, "phase", gm_phase_name((enum gm_phase)f->phase));
    if (f->is_oom) {
        gm_json_kv_u64(w, "requested_bytes", f->requested);
        gm_json_kv_u64(w, "device_free_bytes", f->device_free);
    }
    gm_json_kv_u64(w, "reserved_bytes", f->reserved);
    gm_json_kv_u64(w, "allocated_bytes", f->allocated);
    gm_json_kv_u64(w, "reserved_unallocated_bytes", f->reserved_unallocated);
    gm_json_kv_u64(w, "largest_free_block_bytes", f->largest_free);
    gm_json_key(w, "pools");
    gm_json_begin_array(w);
    for (size_t i = 0; i < f->n_pools; i++) {
        const struct gm_analysis_pool_free *p = &f->pools[i];
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "stream", p->stream);
        gm_json_kv_str(w, "pool", p->is_small ? "small" : "large");
        gm_json_kv_u64(w, "reserved_bytes", p->reserved);
        gm_json_kv_u64(w, "free_bytes", p->free);
        gm_json_kv_u64(w, "largest_free_block_bytes", p->largest_free);
        gm_json_kv_u64(w, "segments", p->n_segments);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "at_event");
    gm_json_begin_object(w);
    for (int c = 0; c < GM_CATEGORY_COUNT; c++)
        gm_json_kv_u64(w, gm_category_name((enum gm_category)c), f->at_event[c]);
    gm_json_end_object(w);
    if (f->is_oom) {
        gm_json_kv_str(w, "verdict", gm_oom_verdict_name((enum gm_oom_verdict)f->verdict));
        gm_json_kv_str(w, "advice", gm_oom_verdict_advice((enum gm_oom_verdict)f->verdict));
        gm_json_key(w, "frames");
        json_frames(w, snap, f->stack);
    }
    gm_json_end_object(w);
}

static void allocator_settings(struct gm_json *w, const struct gm_analysis *an)
{
    gm_json_key(w, "allocator_settings");
    gm_json_begin_object(w);
    gm_json_kv_bool(w, "expandable_segments", an->expandable_segments);
    gm_json_kv_i64(w, "max_split_size", an->max_split_size);
    gm_json_kv_double(w, "garbage_collection_threshold", an->gc_threshold);
    gm_json_end_object(w);
}

static void oom_doc(struct gm_json *w, const struct gm_analysis *an, bool series)
{
    allocator_settings(w, an);
    gm_json_key(w, "devices");
    gm_json_begin_array(w);
    for (size_t d = 0; d < an->n_devices; d++) {
        const struct gm_analysis_device *dev = &an->devices[d];
        gm_json_begin_object(w);
        gm_json_kv_i64(w, "device", dev->device);
        gm_json_kv_u64(w, "peak_bytes", dev->peak_bytes);
        gm_json_key(w, "at_peak");
        json_frag(w, an->snap, &dev->peak_frag);
        gm_json_key(w, "series");
        gm_json_begin_array(w);
        for (size_t i = 0; series && i < dev->n_points; i++) {
            const struct gm_analysis_point *p = &dev->points[i];
            gm_json_begin_object(w);
            gm_json_kv_i64(w, "event", p->event);
            gm_json_kv_u64(w, "reserved_bytes", p->reserved);
            gm_json_kv_u64(w, "allocated_bytes", p->total);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
        gm_json_key(w, "ooms");
        gm_json_begin_array(w);
        for (size_t i = 0; i < dev->n_ooms; i++)
            json_frag(w, an->snap, &dev->ooms[i]);
        gm_json_end_array(w);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
}

/* ---- diff ---- */

static void json_pair(struct gm_json *w, const char *key, uint64_t a, uint64_t b)
{
    gm_json_key(w, key);
    gm_json_begin_array(w);
    gm_json_u64(w, a);
    gm_json_u64(w, b);
    gm_json_end_array(w);
}

static void diff_device(struct gm_json *w, const struct gm_analysis_diff_device *d,
                        const struct gm_snapshot *sa, const struct gm_snapshot *sb, uint64_t top)
{
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "device", d->device);
    gm_json_key(w, "devices");
    gm_json_begin_array(w);
    gm_json_i64(w, d->devices[0]);
    gm_json_i64(w, d->devices[1]);
    gm_json_end_array(w);
    gm_json_key(w, "present");
    gm_json_begin_array(w);
    gm_json_bool(w, d->present[0]);
    gm_json_bool(w, d->present[1]);
    gm_json_end_array(w);
    json_pair(w, "peak_bytes", d->peak_bytes[0], d->peak_bytes[1]);
    gm_json_key(w, "peak_phase");
    gm_json_begin_array(w);
    gm_json_str(w, gm_phase_name((enum gm_phase)d->peak_phase[0]));
    gm_json_str(w, gm_phase_name((enum gm_phase)d->peak_phase[1]));
    gm_json_end_array(w);
    gm_json_key(w, "at_peak");
    gm_json_begin_object(w);
    for (int c = 0; c < GM_CATEGORY_COUNT; c++)
        json_pair(w, gm_category_name((enum gm_category)c), d->at_peak[0][c], d->at_peak[1][c]);
    gm_json_end_object(w);
    gm_json_kv_u64(w, "n_sites", d->n_sites);
    gm_json_key(w, "sites");
    gm_json_begin_array(w);
    for (size_t i = 0; i < d->n_sites && (!top || i < top); i++) {
        const struct gm_analysis_diff_site *s = &d->sites[i];
        uint32_t stack;
        const struct gm_snapshot *snap = gm_analysis_diff_site_stack(s, sa, sb, &stack);
        gm_json_begin_object(w);
        gm_json_key(w, "frames");
        json_frames(w, snap, stack);
        json_pair(w, "bytes", s->bytes[0], s->bytes[1]);
        json_pair(w, "count", s->count[0], s->count[1]);
        json_pair(w, "total_bytes", s->total[0], s->total[1]);
        gm_json_kv_str(w, "status", gm_diff_status_name((enum gm_diff_status)s->status));
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);
}

/* ---- several files: the ranks ---- */

/* The members of a rank's figures (gm_analysis_rank()): what a digest keeps of them too. */
static void rank_figures(struct gm_json *w, const struct gm_rank *r)
{
    gm_json_kv_i64(w, "device", r->device);
    for (int m = 0; m < GM_RANK_METRIC_COUNT; m++)
        gm_json_kv_u64(w, gm_rank_metric_name((enum gm_rank_metric)m), r->value[m]);
    gm_json_kv_i64(w, "peak_event_index", r->peak_event);
    gm_json_kv_str(w, "peak_phase", gm_phase_name((enum gm_phase)r->peak_phase));
    json_cats(w, "at_peak", r->at_peak);
}

/* "ranks": [{rank, file, device, peak_bytes, ...}], "spread": [{devices, peak_bytes: {min,
 * max, spread, mean, min_file, max_file}, ...}], "imbalance": {...} or null. */
static enum gm_status ranks_json(struct gm_json *w, const struct gm_analysis_doc *doc,
                                 struct gm_error *err)
{
    struct gm_ranks rs;
    enum gm_status st = gm_analysis_ranks(doc->ranks, doc->n_ranks, &rs, err);
    if (st != GM_OK)
        return st;
    gm_json_key(w, "ranks");
    gm_json_begin_array(w);
    for (size_t i = 0; i < rs.n_ranks; i++) {
        const struct gm_rank *r = &rs.ranks[i];
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "rank", r->id);
        gm_json_kv_str(w, "rank_from", gm_rank_source_name((enum gm_rank_source)r->id_source));
        gm_json_kv_str(w, "file", file_path(doc, r->file));
        rank_figures(w, r);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    /* one entry: the spread over the ranks, each on its own device */
    gm_json_key(w, "spread");
    gm_json_begin_array(w);
    if (rs.n_ranks) {
        gm_json_begin_object(w);
        gm_json_key(w, "devices");
        gm_json_begin_array(w);
        for (size_t i = 0; i < rs.n_ranks; i++)
            gm_json_i64(w, rs.ranks[i].device);
        gm_json_end_array(w);
        for (int m = 0; m < GM_RANK_METRIC_COUNT; m++) {
            const struct gm_rank_spread *s = &rs.spread[m];
            gm_json_key(w, gm_rank_metric_name((enum gm_rank_metric)m));
            gm_json_begin_object(w);
            gm_json_kv_u64(w, "files", rs.n_ranks);
            gm_json_kv_u64(w, "min", s->min);
            gm_json_kv_u64(w, "max", s->max);
            gm_json_kv_u64(w, "spread", s->max - s->min);
            gm_json_kv_double(w, "mean", s->mean);
            gm_json_kv_str(w, "min_file", file_path(doc, rs.ranks[s->min_rank].file));
            gm_json_kv_str(w, "max_file", file_path(doc, rs.ranks[s->max_rank].file));
            gm_json_kv_u64(w, "min_rank", rs.ranks[s->min_rank].id);
            gm_json_kv_u64(w, "max_rank", rs.ranks[s->max_rank].id);
            gm_json_end_object(w);
        }
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "imbalance");
    if (rs.n_ranks >= 2) {
        const struct gm_rank_spread *p = &rs.spread[GM_RANK_PEAK];
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "max_rank", rs.ranks[p->max_rank].id);
        gm_json_kv_u64(w, "min_rank", rs.ranks[p->min_rank].id);
        gm_json_kv_double(w, "peak_ratio", rs.peak_ratio);
        gm_json_kv_u64(w, "peak_spread_bytes", p->max - p->min);
        gm_json_kv_str(w, "category", gm_category_name((enum gm_category)rs.category));
        gm_json_kv_i64(w, "category_bytes", rs.category_bytes);
        gm_json_end_object(w);
    } else {
        gm_json_null(w);
    }
    gm_analysis_ranks_release(&rs);
    return GM_OK;
}

/* ---- digest: one rank summed up ---- */

/* The series at a bounded level of detail: at most GM_DIGEST_POINTS points, each the
 * highest of its run of the analysis's points, so that the peak is among them. */
static void digest_series(struct gm_json *w, const struct gm_analysis_device *dev)
{
    size_t step = (dev->n_points + GM_DIGEST_POINTS - 1) / GM_DIGEST_POINTS;
    gm_json_key(w, "series");
    gm_json_begin_array(w);
    for (size_t i = 0; step && i < dev->n_points; i += step) {
        const struct gm_analysis_point *best = &dev->points[i];
        for (size_t k = i + 1; k < i + step && k < dev->n_points; k++)
            if (dev->points[k].total > best->total)
                best = &dev->points[k];
        gm_json_begin_array(w);
        gm_json_i64(w, best->event);
        gm_json_u64(w, best->total);
        gm_json_u64(w, best->reserved);
        for (int c = 0; c < GM_CATEGORY_COUNT; c++)
            gm_json_u64(w, best->bytes[c]);
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
}

static enum gm_status digest_device(struct gm_json *w, const struct gm_snapshot *snap,
                                    const struct gm_analysis_device *dev, uint64_t top,
                                    struct gm_error *err)
{
    struct gm_analysis_site *sites = NULL;
    size_t n_sites = 0;
    uint64_t per_it = 0, kept = 0;
    enum gm_status st = gm_analysis_sites_at_peak(dev, &sites, &n_sites, err);
    if (st != GM_OK)
        return st;
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "device", dev->device);
    gm_json_kv_u64(w, "peak_bytes", dev->peak_bytes);
    gm_json_kv_i64(w, "peak_event_index", dev->peak_event);
    gm_json_kv_str(w, "peak_phase", gm_phase_name((enum gm_phase)dev->peak_phase));
    gm_json_kv_u64(w, "events", dev->n_events);
    json_cats(w, "at_peak", dev->at_peak);
    gm_json_key(w, "sites_at_peak");
    gm_json_begin_array(w);
    for (size_t i = 0, shown = 0; i < n_sites && (!top || shown < top); i++) {
        /* the largest sites of any category: sites[] is largest first within each */
        size_t best = n_sites;
        for (size_t k = 0; k < n_sites; k++)
            if (sites[k].count && (best == n_sites || sites[k].bytes > sites[best].bytes))
                best = k;
        if (best == n_sites)
            break;
        gm_json_begin_object(w);
        gm_json_kv_str(w, "category", gm_category_name((enum gm_category)sites[best].category));
        gm_json_kv_u64(w, "bytes", sites[best].bytes);
        gm_json_kv_u64(w, "count", sites[best].count);
        gm_json_key(w, "user_frame");
        json_user_frame(w, snap, sites[best].stack);
        gm_json_end_object(w);
        sites[best].count = 0; /* taken */
        shown++;
    }
    gm_json_end_array(w);
    gm_free(sites);
    digest_series(w, dev);
    gm_json_kv_u64(w, "iterations", dev->n_iterations);
    for (size_t i = 0; i < dev->n_leaks; i++) {
        per_it += dev->leaks[i].bytes_per_iteration;
        kept += dev->leaks[i].total_bytes;
    }
    gm_json_key(w, "leaks");
    gm_json_begin_object(w);
    gm_json_kv_str(w, "verdict", gm_leak_verdict_name(gm_analysis_leak_verdict(dev)));
    gm_json_kv_u64(w, "causes", dev->n_leaks);
    gm_json_kv_u64(w, "bytes_per_iteration", per_it);
    gm_json_kv_u64(w, "kept_bytes", kept);
    gm_json_end_object(w);
    gm_json_key(w, "fragmentation_at_peak");
    json_frag(w, snap, &dev->peak_frag);
    gm_json_key(w, "ooms");
    gm_json_begin_array(w);
    for (size_t i = 0; i < dev->n_ooms; i++)
        json_frag(w, snap, &dev->ooms[i]);
    gm_json_end_array(w);
    gm_json_end_object(w);
    return GM_OK;
}

/* {"file", "host", "rank", "rank_figures": {...} | null, "allocator_settings", "devices"} */
static enum gm_status digest_doc(struct gm_json *w, const struct gm_analysis_doc *doc,
                                 struct gm_error *err)
{
    const struct gm_analysis *an = doc->files[0].an;
    const char *path = file_path(doc, 0);
    struct gm_rank r;
    bool has = false;
    uint64_t name_rank;
    enum gm_status st = gm_analysis_rank(an, 0, path, &r, &has, err);
    if (st != GM_OK)
        return st;
    gm_json_kv_str(w, "file", path);
    if (doc->host)
        gm_json_kv_str(w, "host", doc->host);
    else
        gm_json_kv_null(w, "host");
    if (gm_rank_from_name(path, &name_rank))
        gm_json_kv_u64(w, "rank", name_rank);
    else
        gm_json_kv_null(w, "rank");
    gm_json_key(w, "rank_figures");
    if (has) {
        gm_json_begin_object(w);
        rank_figures(w, &r);
        gm_json_end_object(w);
    } else {
        gm_json_null(w);
    }
    allocator_settings(w, an);
    gm_json_key(w, "devices");
    gm_json_begin_array(w);
    for (size_t d = 0; d < an->n_devices && st == GM_OK; d++)
        st = digest_device(w, an->snap, &an->devices[d], doc->top, err);
    gm_json_end_array(w);
    return st;
}

/* ---- the documents ---- */

/* The members of file i of a document (its "file" written by the caller). */
static enum gm_status file_members(struct gm_json *w, const struct gm_analysis_doc *doc, size_t i,
                                   struct gm_error *err)
{
    const struct gm_analysis_doc_file *f = &doc->files[i];
    const struct gm_digest *dg = doc->digests ? doc->digests[i] : NULL;
    if (dg &&
        (doc->kind == GM_DOC_STATS || doc->kind == GM_DOC_PEAK || doc->kind == GM_DOC_CATEGORIES)) {
        /* a rank read from its digest: its figures, what the document's ranks come from */
        gm_json_key(w, "digest");
        gm_json_begin_object(w);
        gm_json_kv_str(w, "snapshot", dg->file);
        if (dg->host)
            gm_json_kv_str(w, "host", dg->host);
        else
            gm_json_kv_null(w, "host");
        if (dg->has_figures)
            rank_figures(w, &dg->figures);
        gm_json_end_object(w);
        return GM_OK;
    }
    switch (doc->kind) {
    case GM_DOC_STATS:
        if (!f->stats)
            break;
        stats_devices(w, f->stats);
        return GM_OK;
    case GM_DOC_PEAK:
        if (!f->peaks || !f->snap)
            break;
        gm_json_kv_str(w, "sizes", "requested bytes as recorded in the trace");
        gm_json_key(w, "devices");
        gm_json_begin_array(w);
        for (size_t d = 0; d < f->peaks->n_devices; d++)
            peak_device(w, f->snap, &f->peaks->devices[d], doc->top);
        gm_json_end_array(w);
        return GM_OK;
    case GM_DOC_CATEGORIES:
        if (!f->an)
            break;
        gm_json_key(w, "devices");
        gm_json_begin_array(w);
        for (size_t d = 0; d < f->an->n_devices; d++)
            if (doc->device < 0 || f->an->devices[d].device == doc->device)
                categories_device(
                    w, f->an->snap, &f->an->devices[d], doc->series,
                    f->an->devices[d].device == doc->components_device ? doc->components : NULL,
                    f->an);
        gm_json_end_array(w);
        return GM_OK;
    default:
        break;
    }
    return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "%s document: file %zu lacks its results",
                   gm_analysis_doc_name(doc->kind), i);
}

static enum gm_status doc_body(struct gm_json *w, const struct gm_analysis_doc *doc,
                               struct gm_error *err)
{
    const struct gm_analysis_doc_file *f = doc->files;
    enum gm_status st;
    if (!doc->n_files || (doc->kind == GM_DOC_DIFF && doc->n_files != 2))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "%s document: %zu files",
                       gm_analysis_doc_name(doc->kind), doc->n_files);
    switch (doc->kind) {
    case GM_DOC_INFO:
        if (doc->n_files != 1 || !f->snap)
            break;
        info_doc(w, f->path, f->snap);
        return GM_OK;
    case GM_DOC_LEAKS:
        if (doc->n_files != 1 || !f->an)
            break;
        gm_json_key(w, "devices");
        gm_json_begin_array(w);
        for (size_t d = 0; d < f->an->n_devices; d++)
            leaks_device(w, f->an->snap, &f->an->devices[d], doc->top);
        gm_json_end_array(w);
        return GM_OK;
    case GM_DOC_OOM:
        if (doc->n_files != 1 || !f->an)
            break;
        oom_doc(w, f->an, doc->series);
        return GM_OK;
    case GM_DOC_DIGEST:
        if (doc->n_files != 1 || !f->an)
            break;
        return digest_doc(w, doc, err);
    case GM_DOC_DIFF:
        if (!doc->diff || !f[0].an || !f[1].an)
            break;
        gm_json_key(w, "files");
        gm_json_begin_array(w);
        gm_json_str(w, file_path(doc, 0));
        gm_json_str(w, file_path(doc, 1));
        gm_json_end_array(w);
        gm_json_key(w, "devices");
        gm_json_begin_array(w);
        for (size_t i = 0; i < doc->diff->n_devices; i++)
            diff_device(w, &doc->diff->devices[i], f[0].an->snap, f[1].an->snap, doc->top);
        gm_json_end_array(w);
        return GM_OK;
    case GM_DOC_STATS:
    case GM_DOC_PEAK:
    case GM_DOC_CATEGORIES:
        if (doc->n_files == 1) {
            if (doc->kind != GM_DOC_CATEGORIES)
                gm_json_kv_str(w, "file", file_path(doc, 0));
            return file_members(w, doc, 0, err);
        }
        gm_json_key(w, "files");
        gm_json_begin_array(w);
        for (size_t i = 0; i < doc->n_files; i++) {
            gm_json_begin_object(w);
            gm_json_kv_str(w, "file", file_path(doc, i));
            if ((st = file_members(w, doc, i, err)) != GM_OK)
                return st;
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
        return ranks_json(w, doc, err);
    default:
        break;
    }
    return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "%s document: its results are missing",
                   gm_analysis_doc_name(doc->kind));
}

enum gm_status gm_analysis_json(FILE *f, const struct gm_analysis_doc *doc, struct gm_error *err)
{
    struct gm_json w;
    char schema[64];
    enum gm_status st;
    if ((unsigned)doc->kind >= GM_DOC_COUNT)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "no JSON document of kind %d",
                       (int)doc->kind);
    /* a series asked of an analysis made without it */
    for (size_t i = 0; (doc->series || doc->kind == GM_DOC_DIGEST) && i < doc->n_files; i++)
        if (doc->files[i].an && doc->files[i].an->no_series)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                           "%s document: the analysis was made without its series "
                           "(gm_analysis_run_figures())",
                           gm_analysis_doc_name(doc->kind));
    snprintf(schema, sizeof(schema), "gpumem.snapshot.%s/1", gm_analysis_doc_name(doc->kind));
    gm_json_init(&w, f, doc->kind == GM_DOC_DIGEST ? 0 : GM_JSON_PRETTY); /* a digest is small */
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "schema", schema);
    gm_json_kv_str(&w, "gpumem_version", gm_version());
    if ((st = doc_body(&w, doc, err)) != GM_OK)
        return st;
    gm_json_end_object(&w);
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the %s document failed",
                       gm_analysis_doc_name(doc->kind));
    return GM_OK;
}

enum gm_status gm_analysis_stack_json(FILE *f, const struct gm_snapshot *snap, uint32_t stack,
                                      struct gm_error *err)
{
    struct gm_json w;
    if (stack >= snap->n_stacks)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "no stack %u (the snapshot has %zu)",
                       stack, snap->n_stacks);
    gm_json_init(&w, f, 0);
    json_frames(&w, snap, stack);
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the frames of stack %u failed",
                       stack);
    return GM_OK;
}
