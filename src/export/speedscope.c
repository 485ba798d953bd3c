/* SPDX-License-Identifier: MIT */
/* speedscope.c - the stacks alive at the peak (or after one event) in speedscope's JSON file
 * format (https://www.speedscope.app/file-format-schema.json):
 *
 *   {"$schema": ..., "shared": {"frames": [{"name", "file", "line"}...]},
 *    "profiles": [{"type": "sampled", "name", "unit": "bytes", "startValue": 0,
 *                  "endValue": bytes, "samples": [[frame index, ...]...], "weights": [...]}],
 *    "name", "activeProfileIndex": 0, "exporter": "gpumem VERSION"}
 *
 * One sampled profile per device (of each file, with several: the ranks of one job, each
 * profile named by its file): a sample per stack alive, its frames root first (the
 * outermost call first), weighted by the bytes alive under it.  The frames of a stack are
 * those worth listing (gm_snapshot_stack_frames()), as `snapshot peak --folded` writes
 * them; a stack with none is the frame "(no stack recorded)". */
#include "export/export_int.h"

#include "gpumem/arena.h"
#include "gpumem/json.h"
#include "gpumem/version.h"

#include <inttypes.h>

#define STACK_CAP 256

/* shared.frames: the snapshots' frames numbered on first use.  index[f][id] is frame id
 * of file f's number + 1 (0: not yet); order lists (file, frame id) by number, a frame id of
 * n_frames being the file's "(no stack recorded)". */
struct frames {
    uint32_t **index;
    uint32_t (*order)[2];
    uint32_t n;
};

static uint32_t frame_index(struct frames *fr, uint32_t file, uint32_t id)
{
    if (!fr->index[file][id]) {
        fr->order[fr->n][0] = file;
        fr->order[fr->n][1] = id;
        fr->index[file][id] = ++fr->n;
    }
    return fr->index[file][id] - 1;
}

static void profile(struct gm_json *w, const struct gm_export_input *in, uint32_t file,
                    size_t n_files, const struct export_alive *a, const struct gm_export_opts *o,
                    struct frames *fr)
{
    const struct gm_snapshot *snap = in->snap;
    uint32_t ids[STACK_CAP], none = (uint32_t)snap->n_frames;
    char name[400], who[300] = "";
    if (n_files > 1)
        snprintf(who, sizeof(who), "%.250s ", in->label ? in->label : "?");
    if (o->at_given)
        snprintf(name, sizeof(name), "%scuda:%d after event %" PRId64, who, (int)a->device,
                 a->event);
    else
        snprintf(name, sizeof(name), "%scuda:%d at the peak (after event %" PRId64 ")", who,
                 (int)a->device, a->event);
    gm_json_begin_object(w);
    gm_json_kv_str(w, "type", "sampled");
    gm_json_kv_str(w, "name", name);
    gm_json_kv_str(w, "unit", "bytes");
    gm_json_kv_u64(w, "startValue", 0);
    gm_json_kv_u64(w, "endValue", a->bytes);
    gm_json_key(w, "samples");
    gm_json_begin_array(w);
    for (size_t g = 0; g < a->n_groups; g++) {
        size_t nf = gm_snapshot_stack_frames(snap, a->groups[g].stack, ids, STACK_CAP);
        if (nf > STACK_CAP)
            nf = STACK_CAP;
        gm_json_begin_array(w);
        if (!nf)
            gm_json_u64(w, frame_index(fr, file, none));
        for (size_t k = nf; k-- > 0;)
            gm_json_u64(w, frame_index(fr, file, ids[k]));
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "weights");
    gm_json_begin_array(w);
    for (size_t g = 0; g < a->n_groups; g++)
        gm_json_u64(w, a->groups[g].bytes);
    gm_json_end_array(w);
    gm_json_end_object(w);
}

static void frames_release(struct frames *fr, size_t n)
{
    for (size_t i = 0; fr->index && i < n; i++)
        gm_free(fr->index[i]);
    gm_free(fr->index);
    gm_free(fr->order);
}

enum gm_status export_speedscope(FILE *f, const struct gm_export_input *in, size_t n,
                                 const struct gm_export_opts *o, struct gm_error *err)
{
    struct frames fr = {NULL, NULL, 0};
    struct gm_json w;
    size_t total = 0;
    char name[96];
    enum gm_status st = GM_OK;
    fr.index = gm_calloc(n, sizeof(*fr.index));
    for (size_t i = 0; fr.index && i < n; i++) {
        total += in[i].snap->n_frames + 1;
        if (!(fr.index[i] = gm_calloc(in[i].snap->n_frames + 1, sizeof(**fr.index))))
            st = GM_ERR_NOMEM;
    }
    fr.order = gm_calloc(total ? total : 1, sizeof(*fr.order));
    if (!fr.index || !fr.order || st != GM_OK) {
        frames_release(&fr, n);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "speedscope: out of memory");
    }
    gm_json_init(&w, f, 0);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "$schema", "https://www.speedscope.app/file-format-schema.json");
    /* The profiles first: numbering the frames as the samples meet them. */
    gm_json_key(&w, "profiles");
    gm_json_begin_array(&w);
    for (size_t i = 0; i < n && st == GM_OK; i++) {
        struct export_alive *alive;
        size_t n_alive;
        if ((st = export_alive_collect(in[i].snap, in[i].an, o, &alive, &n_alive, err)) != GM_OK)
            break;
        for (size_t d = 0; d < n_alive; d++)
            profile(&w, &in[i], (uint32_t)i, n, &alive[d], o, &fr);
        export_alive_release(alive, n_alive);
    }
    gm_json_end_array(&w);
    gm_json_key(&w, "shared");
    gm_json_begin_object(&w);
    gm_json_key(&w, "frames");
    gm_json_begin_array(&w);
    for (uint32_t k = 0; k < fr.n; k++) {
        const struct gm_snapshot *snap = in[fr.order[k][0]].snap;
        uint32_t id = fr.order[k][1];
        gm_json_begin_object(&w);
        if (id == snap->n_frames) {
            gm_json_kv_str(&w, "name", "(no stack recorded)");
        } else {
            const struct gm_snapshot_frame *sf = &snap->frames[id];
            gm_json_kv_str(&w, "name", sf->name);
            if (sf->filename[0])
                gm_json_kv_str(&w, "file", sf->filename);
            if (sf->line > 0)
                gm_json_kv_i64(&w, "line", sf->line);
        }
        gm_json_end_object(&w);
    }
    gm_json_end_array(&w);
    gm_json_end_object(&w);
    gm_json_kv_str(&w, "name", n == 1 && in[0].label ? in[0].label : "gpumem snapshot");
    gm_json_kv_u64(&w, "activeProfileIndex", 0);
    snprintf(name, sizeof(name), "gpumem %s", gm_version());
    gm_json_kv_str(&w, "exporter", name);
    gm_json_end_object(&w);
    frames_release(&fr, n);
    if (st != GM_OK)
        return st;
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "speedscope: the write failed");
    return GM_OK;
}
