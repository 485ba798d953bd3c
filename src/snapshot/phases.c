/* SPDX-License-Identifier: MIT */
/* phases.c - the phases a user marked (snapshot.h, "user phases"): gpumem.torch.record()
 * marks each phase() as a record_function range "gpumem.phase:<name>", which PyTorch keeps
 * as START and END entries of external_annotations, per device, by time.  A START opens a
 * range of its name, the next END of that name closes it; a START never closed lasts to the
 * end of the trace (the snapshot was dumped inside the phase, as at an out-of-memory
 * error). */
#include "snapshot/snapshot_int.h"

#include "gpumem/arena.h"

#include <stdlib.h>
#include <string.h>

static int cmp_range(const void *a, const void *b)
{
    const struct gm_snapshot_user_range *x = a, *y = b;
    if (x->start_us != y->start_us)
        return x->start_us < y->start_us ? -1 : 1;
    return x->end_us > y->end_us ? -1 : x->end_us < y->end_us; /* outer ranges first */
}

enum gm_status gm_snapshot_annotation_ranges(const struct gm_snapshot *snap, int32_t device,
                                             const char *prefix,
                                             struct gm_snapshot_user_range **out, size_t *n_out,
                                             struct gm_error *err)
{
    const size_t plen = prefix ? strlen(prefix) : 0;
    struct gm_snapshot_user_range *v;
    size_t n = 0;
    *out = NULL;
    *n_out = 0;
    if (!snap->n_annotations)
        return GM_OK;
    v = gm_malloc(snap->n_annotations * sizeof(*v));
    if (!v)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "snapshot: out of memory for phases");
    for (size_t i = 0; i < snap->n_annotations; i++) {
        const struct gm_snapshot_annotation *a = &snap->annotations[i];
        const char *name;
        if (a->device != device || !a->name || (plen && strncmp(a->name, prefix, plen)))
            continue;
        name = a->name + plen;
        if (a->is_start) {
            v[n].name = name;
            v[n].start_us = a->time_us;
            v[n].end_us = INT64_MAX; /* until its END */
            n++;
            continue;
        }
        /* the END closes the latest open range of its name */
        for (size_t k = n; k-- > 0;)
            if (v[k].end_us == INT64_MAX && !strcmp(v[k].name, name)) {
                v[k].end_us = a->time_us;
                break;
            }
    }
    if (!n) {
        gm_free(v);
        return GM_OK;
    }
    qsort(v, n, sizeof(*v), cmp_range);
    *out = v;
    *n_out = n;
    return GM_OK;
}

enum gm_status gm_snapshot_user_ranges(const struct gm_snapshot *snap, int32_t device,
                                       struct gm_snapshot_user_range **out, size_t *n_out,
                                       struct gm_error *err)
{
    return gm_snapshot_annotation_ranges(snap, device, GM_USER_PHASE_PREFIX, out, n_out, err);
}

const char *gm_snapshot_user_phase_at(const struct gm_snapshot_user_range *r, size_t n,
                                      int64_t time_us)
{
    const char *in = NULL;
    /* sorted by start, outer first: the last range open at the time is the innermost */
    for (size_t i = 0; i < n && r[i].start_us <= time_us; i++)
        if (time_us <= r[i].end_us)
            in = r[i].name;
    return in;
}
