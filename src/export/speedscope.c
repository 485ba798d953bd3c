/* SPDX-License-Identifier: MIT */
/* speedscope.c - the stacks alive at the peak (or after one event) in speedscope's JSON file
 * format (https://www.speedscope.app/file-format-schema.json):
 *
 *   {"$schema": ..., "shared": {"frames": [{"name", "file", "line"}...]},
 *    "profiles": [{"type": "sampled", "name", "unit": "bytes", "startValue": 0,
 *                  "endValue": bytes, "samples": [[frame index, ...]...], "weights": [...]}],
 *    "name", "activeProfileIndex": 0, "exporter": "gpumem VERSION"}
 *
 * One sampled profile per device: a sample per stack alive, its frames root first (the
 * outermost call first), weighted by the bytes alive under it.  The frames of a stack are
 * those worth listing (gm_snapshot_stack_frames()), as `snapshot peak --folded` writes
 * them; a stack with none is the frame "(no stack recorded)". */
#include "export/export_int.h"

#include "gpumem/arena.h"
#include "gpumem/json.h"
#include "gpumem/version.h"

#include <inttypes.h>

#define STACK_CAP 256

/* The index of snapshot frame 'id' in shared.frames, numbering it on first use. */
static uint32_t frame_index(uint32_t *index, uint32_t *n_used, uint32_t *order, uint32_t id)
{
    if (index[id] == UINT32_MAX) {
        index[id] = *n_used;
        order[(*n_used)++] = id;
    }
    return index[id];
}

enum gm_status export_speedscope(FILE *f, const struct gm_snapshot *snap,
                                 const struct gm_analysis *an, const struct gm_export_opts *o,
                                 struct gm_error *err)
{
    struct export_alive *alive;
    size_t n_alive;
    uint32_t *index, *order, n_used = 0, ids[STACK_CAP];
    uint32_t none = (uint32_t)snap->n_frames; /* the "(no stack recorded)" frame */
    struct gm_json w;
    char name[96];
    enum gm_status st = export_alive_collect(snap, an, o, &alive, &n_alive, err);
    if (st != GM_OK)
        return st;
    index = gm_calloc(snap->n_frames + 1, sizeof(*index));
    order = gm_calloc(snap->n_frames + 1, sizeof(*order));
    if (!index || !order) {
        gm_free(index);
        gm_free(order);
        export_alive_release(alive, n_alive);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "speedscope: out of memory");
    }
    for (size_t i = 0; i <= snap->n_frames; i++)
        index[i] = UINT32_MAX;
    gm_json_init(&w, f, 0);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "$schema", "https://www.speedscope.app/file-format-schema.json");
    /* The profiles first: numbering the frames as the samples meet them. */
    gm_json_key(&w, "profiles");
    gm_json_begin_array(&w);
    for (size_t d = 0; d < n_alive; d++) {
        const struct export_alive *a = &alive[d];
        if (o->at_given)
            snprintf(name, sizeof(name), "cuda:%d after event %" PRId64, (int)a->device, a->event);
        else
            snprintf(name, sizeof(name), "cuda:%d at the peak (after event %" PRId64 ")",
                     (int)a->device, a->event);
        gm_json_begin_object(&w);
        gm_json_kv_str(&w, "type", "sampled");
        gm_json_kv_str(&w, "name", name);
        gm_json_kv_str(&w, "unit", "bytes");
        gm_json_kv_u64(&w, "startValue", 0);
        gm_json_kv_u64(&w, "endValue", a->bytes);
        gm_json_key(&w, "samples");
        gm_json_begin_array(&w);
        for (size_t g = 0; g < a->n_groups; g++) {
            size_t nf = gm_snapshot_stack_frames(snap, a->groups[g].stack, ids, STACK_CAP);
            if (nf > STACK_CAP)
                nf = STACK_CAP;
            gm_json_begin_array(&w);
            if (!nf)
                gm_json_u64(&w, frame_index(index, &n_used, order, none));
            for (size_t k = nf; k-- > 0;)
                gm_json_u64(&w, frame_index(index, &n_used, order, ids[k]));
            gm_json_end_array(&w);
        }
        gm_json_end_array(&w);
        gm_json_key(&w, "weights");
        gm_json_begin_array(&w);
        for (size_t g = 0; g < a->n_groups; g++)
            gm_json_u64(&w, a->groups[g].bytes);
        gm_json_end_array(&w);
        gm_json_end_object(&w);
    }
    gm_json_end_array(&w);
    gm_json_key(&w, "shared");
    gm_json_begin_object(&w);
    gm_json_key(&w, "frames");
    gm_json_begin_array(&w);
    for (uint32_t i = 0; i < n_used; i++) {
        gm_json_begin_object(&w);
        if (order[i] == none) {
            gm_json_kv_str(&w, "name", "(no stack recorded)");
        } else {
            const struct gm_snapshot_frame *fr = &snap->frames[order[i]];
            gm_json_kv_str(&w, "name", fr->name);
            if (fr->filename[0])
                gm_json_kv_str(&w, "file", fr->filename);
            if (fr->line > 0)
                gm_json_kv_i64(&w, "line", fr->line);
        }
        gm_json_end_object(&w);
    }
    gm_json_end_array(&w);
    gm_json_end_object(&w);
    gm_json_kv_str(&w, "name", o->label ? o->label : "gpumem snapshot");
    gm_json_kv_u64(&w, "activeProfileIndex", 0);
    snprintf(name, sizeof(name), "gpumem %s", gm_version());
    gm_json_kv_str(&w, "exporter", name);
    gm_json_end_object(&w);
    gm_free(index);
    gm_free(order);
    export_alive_release(alive, n_alive);
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "speedscope: the write failed");
    return GM_OK;
}
