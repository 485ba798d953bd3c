/* SPDX-License-Identifier: MIT */
/* replay_json.c - the JSON documents of a replay (gm_replay_json()): gpumem.snapshot.replay/1
 * (the model against the recording, and the what-if run) and gpumem.snapshot.replay_compare/1
 * (the common settings ranked), what `gpumem snapshot replay --json` prints. */
#include "gpumem/replay.h"

#include "gpumem/json.h"
#include "gpumem/version.h"

#include <stdio.h>

double gm_replay_fragmentation(uint64_t reserved, uint64_t allocated)
{
    if (!reserved || allocated > reserved)
        return 0.0;
    return (double)(reserved - allocated) / (double)reserved;
}

static void json_run(struct gm_json *w, const struct gm_replay_run *r)
{
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "segment_events", r->segment_events);
    gm_json_kv_u64(w, "peak_reserved_bytes", r->peak_reserved_bytes);
    gm_json_kv_u64(w, "peak_allocated_bytes", r->peak_allocated_bytes);
    gm_json_kv_u64(w, "allocated_at_peak_reserved_bytes", r->allocated_at_peak_reserved_bytes);
    gm_json_kv_double(
        w, "fragmentation_at_peak_reserved",
        gm_replay_fragmentation(r->peak_reserved_bytes, r->allocated_at_peak_reserved_bytes));
    gm_json_kv_u64(w, "reserved_at_peak_allocated_bytes", r->reserved_at_peak_allocated_bytes);
    gm_json_kv_u64(w, "unallocated_at_peak_allocated_bytes",
                   r->unallocated_at_peak_allocated_bytes);
    gm_json_kv_u64(w, "final_reserved_bytes", r->final_reserved_bytes);
    gm_json_kv_u64(w, "final_allocated_bytes", r->final_allocated_bytes);
    gm_json_kv_u64(w, "num_device_alloc", r->stats.num_device_alloc);
    gm_json_kv_u64(w, "num_device_free", r->stats.num_device_free);
    gm_json_kv_u64(w, "num_alloc_retries", r->n_alloc_retries);
    gm_json_kv_u64(w, "num_ooms", r->n_ooms);
    gm_json_kv_u64(w, "num_ooms_at_start", r->n_ooms_at_start);
    if (r->n_ooms) {
        gm_json_key(w, "first_oom");
        gm_json_begin_object(w);
        gm_json_kv_i64(w, "trace_index", r->first_oom_event);
        gm_json_kv_u64(w, "requested_bytes", r->first_oom_request_bytes);
        gm_json_end_object(w);
    }
    gm_json_key(w, "memory_stats");
    gm_alloc_stats_write_json(w, &r->stats);
    gm_json_end_object(w);
}

static void json_event(struct gm_json *w, const char *key, bool has,
                       const struct gm_replay_event *e)
{
    gm_json_key(w, key);
    if (!has) {
        gm_json_null(w);
        return;
    }
    gm_json_begin_object(w);
    gm_json_kv_str(w, "action", gm_alloc_event_name(e->kind));
    gm_json_kv_u64(w, "size", e->size);
    gm_json_kv_i64(w, "trace_index", e->trace_index);
    gm_json_end_object(w);
}

static void replay_doc(struct gm_json *w, const struct gm_replay_doc *doc)
{
    const struct gm_replay_result *res = doc->result;
    const char *what_if = doc->what_if;
    uint64_t device_bytes = doc->device_bytes;
    gm_json_kv_str(w, "file", doc->path);
    gm_json_kv_str(w, "generation", gm_snapshot_gen_name(doc->snap->gen));
    gm_json_key(w, "settings");
    gm_json_begin_object(w);
    gm_json_kv_str(w, "recorded", res->own_conf_string);
    gm_json_kv_bool(w, "recorded_assumed", res->own_conf_assumed);
    if (what_if)
        gm_json_kv_str(w, "predicted", what_if);
    else
        gm_json_kv_str(w, "predicted", res->own_conf_string);
    if (device_bytes)
        gm_json_kv_u64(w, "device_bytes", device_bytes);
    else
        gm_json_kv_null(w, "device_bytes");
    gm_json_end_object(w);
    gm_json_key(w, "devices");
    gm_json_begin_array(w);
    for (size_t i = 0; i < res->n_devices; i++) {
        const struct gm_replay_device *d = &res->devices[i];
        gm_json_begin_object(w);
        gm_json_kv_i64(w, "device", d->device);
        gm_json_kv_bool(w, "replayable", d->replayable);
        if (!d->replayable)
            gm_json_kv_str(w, "reason", d->reason);
        gm_json_kv_u64(w, "trace_events", d->n_trace_events);
        gm_json_key(w, "late_start");
        if (d->replayable && d->late_start) {
            gm_json_begin_object(w);
            gm_json_kv_str(w, "reason", d->late_start_note);
            gm_json_kv_str(w, "unknown", d->late_start_unknown);
            gm_json_kv_u64(w, "segments", d->initial_segments);
            gm_json_kv_u64(w, "reserved_bytes", d->initial_reserved_bytes);
            gm_json_kv_u64(w, "allocations", d->initial_allocations);
            gm_json_kv_u64(w, "allocated_bytes", d->initial_allocated_bytes);
            gm_json_end_object(w);
        } else {
            gm_json_null(w);
        }
        gm_json_key(w, "recorded");
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "segment_events", d->recorded_segment_events);
        gm_json_kv_u64(w, "peak_reserved_bytes", d->recorded_peak_reserved_bytes);
        gm_json_kv_u64(w, "final_reserved_bytes", d->recorded_final_reserved_bytes);
        gm_json_kv_u64(w, "num_ooms", d->recorded_ooms);
        gm_json_end_object(w);
        if (!d->replayable) {
            gm_json_kv_null(w, "predicted");
            gm_json_kv_null(w, "segment_events_matched");
            gm_json_kv_null(w, "first_divergence");
            gm_json_end_object(w);
            continue;
        }
        gm_json_key(w, "predicted");
        json_run(w, d->has_what_if ? &d->what_if : &d->own);
        if (d->has_what_if) {
            gm_json_key(w, "model_with_recorded_settings");
            json_run(w, &d->own);
        }
        gm_json_kv_u64(w, "segment_events_matched", d->segment_events_matched);
        gm_json_kv_double(w, "match_rate",
                          d->recorded_segment_events || d->own.segment_events
                              ? (double)d->segment_events_matched /
                                    (double)(d->recorded_segment_events > d->own.segment_events
                                                 ? d->recorded_segment_events
                                                 : d->own.segment_events)
                              : 1.0);
        gm_json_kv_u64(w, "inferred_empty_cache_calls", d->n_inferred_empty_cache);
        gm_json_key(w, "final_segments");
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "recorded", d->final_segments_recorded);
        gm_json_kv_u64(w, "model", d->final_segments_model);
        gm_json_kv_bool(w, "sizes_match", d->final_segments_match);
        gm_json_end_object(w);
        gm_json_key(w, "final_allocated_blocks");
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "recorded", d->final_blocks_recorded);
        gm_json_kv_u64(w, "model", d->final_blocks_model);
        gm_json_kv_bool(w, "sizes_match", d->final_blocks_match);
        gm_json_end_object(w);
        gm_json_key(w, "first_divergence");
        if (!d->has_divergence) {
            gm_json_null(w);
        } else {
            gm_json_begin_object(w);
            gm_json_kv_u64(w, "index", d->first_divergence.index);
            json_event(w, "recorded", d->first_divergence.has_recorded,
                       &d->first_divergence.recorded);
            json_event(w, "predicted", d->first_divergence.has_predicted,
                       &d->first_divergence.predicted);
            gm_json_end_object(w);
        }
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
}

static void json_comparison(struct gm_json *w, const struct gm_replay_comparison *c)
{
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "device", c->device);
    gm_json_kv_str(w, "verdict", gm_replay_verdict_name((enum gm_replay_verdict)c->verdict));
    gm_json_kv_u64(w, "recorded_index", c->recorded);
    gm_json_key(w, "ranked");
    gm_json_begin_array(w);
    for (size_t i = 0; i < c->n_choices; i++) {
        const struct gm_replay_choice *ch = &c->choices[i];
        gm_json_begin_object(w);
        gm_json_kv_str(w, "change", ch->change);
        gm_json_kv_str(w, "settings", ch->settings);
        gm_json_key(w, "predicted");
        json_run(w, &ch->run);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);
}

enum gm_status gm_replay_json(FILE *f, const struct gm_replay_doc *doc, struct gm_error *err)
{
    struct gm_json w;
    if (!doc->result || !doc->snap || (doc->n_comparisons && !doc->comparisons))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "replay document: results missing");
    gm_json_init(&w, f, GM_JSON_PRETTY);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "schema",
                   doc->comparisons ? "gpumem.snapshot.replay_compare/1"
                                    : "gpumem.snapshot.replay/1");
    gm_json_kv_str(&w, "gpumem_version", gm_version());
    if (doc->comparisons) {
        gm_json_kv_str(&w, "file", doc->path);
        gm_json_kv_str(&w, "recorded", doc->result->own_conf_string);
        gm_json_kv_bool(&w, "recorded_assumed", doc->result->own_conf_assumed);
        if (doc->device_bytes)
            gm_json_kv_u64(&w, "device_bytes", doc->device_bytes);
        else
            gm_json_kv_null(&w, "device_bytes");
        gm_json_key(&w, "devices");
        gm_json_begin_array(&w);
        for (size_t i = 0; i < doc->n_comparisons; i++)
            json_comparison(&w, &doc->comparisons[i]);
        gm_json_end_array(&w);
    } else {
        replay_doc(&w, doc);
    }
    gm_json_end_object(&w);
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the replay document failed");
    return GM_OK;
}
