/* SPDX-License-Identifier: MIT */
/* side.c - the events a load that keeps no events keeps aside (gm_snapshot_opts.consume_events):
 * per device trace its first and last event and its out-of-memory events, the ones the readers
 * after such a load ask for one by one (snapshot_int.h, "the events a load that keeps none
 * keeps aside").  Which events those are is decided here alone. */
#include "snapshot/snapshot_int.h"

#include "base/vec.h"

#include <string.h>

/* Whether event k of a trace, of action 'a', is kept aside (the last one is kept at the end,
 * snap_side_finish(): only then is it known to be the last). */
static bool kept_aside(size_t k, uint8_t a)
{
    return k == 0 || a == GM_ACTION_OOM;
}

static bool keep(struct snap_side *side, size_t k, const struct gm_snapshot_event *e)
{
    if (side->n_kept >= SNAP_SIDE_MAX ||
        !GM_VEC_RESERVE(side->kept, side->cap_kept, side->n_kept + 1, &side->budget)) {
        side->broken = true;
        return false;
    }
    side->kept[side->n_kept].k = k;
    side->kept[side->n_kept].e = *e;
    side->n_kept++;
    return true;
}

bool snap_side_add(struct snap_side *side, const struct gm_snapshot_event *ev, size_t n, bool ooms)
{
    /* without an oom in the batch only its first event can be kept aside: the trace's first */
    size_t end = ooms ? n : side->n_events == 0 && n ? 1 : 0;
    if (side->broken)
        return false;
    for (size_t i = 0; i < end; i++)
        if (kept_aside(side->n_events + i, ev[i].action) && !keep(side, side->n_events + i, &ev[i]))
            return false;
    if (n) {
        side->last = ev[n - 1];
        side->n_events += n;
    }
    return true;
}

bool snap_side_finish(struct snap_side *side, struct gm_arena *arena, struct gm_snapshot_packed *pk)
{
    struct snap_side_event *out;
    size_t n = side->n_kept;
    if (side->broken)
        return false;
    if (!side->n_events)
        return true; /* nothing to read */
    /* the last event, unless it is kept already (the first, an oom) */
    if (!n || side->kept[n - 1].k != side->n_events - 1) {
        if (!keep(side, side->n_events - 1, &side->last))
            return false;
        n++;
    }
    out = gm_arena_calloc(arena, n, sizeof(*out));
    if (!out) {
        side->broken = true;
        return false;
    }
    memcpy(out, side->kept, n * sizeof(*out));
    pk->side = out;
    pk->n_side = n;
    return true;
}

void snap_side_release(struct snap_side *side)
{
    gm_budget_give(&side->budget, (uint64_t)side->cap_kept * sizeof(*side->kept));
    gm_free(side->kept);
    memset(side, 0, sizeof(*side));
}

bool gm_snapshot_event_kept(const struct gm_snapshot_device *dev, size_t k,
                            struct gm_snapshot_event *out)
{
    const struct gm_snapshot_packed *pk = dev->packed;
    size_t lo = 0, hi;
    if (k >= dev->n_events)
        return false;
    if (!pk || pk->bytes || !pk->side)
        return gm_snapshot_event_at(dev, k, out);
    hi = pk->n_side;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pk->side[mid].k < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == pk->n_side || pk->side[lo].k != k)
        return false;
    *out = pk->side[lo].e;
    return true;
}

bool snap_side_first(const struct gm_snapshot_device *d, uint8_t a, size_t *k,
                     struct gm_snapshot_event *out)
{
    const struct gm_snapshot_packed *pk = d->packed;
    for (size_t i = 0; pk && i < pk->n_side; i++)
        if (pk->side[i].e.action == a) {
            *k = pk->side[i].k;
            *out = pk->side[i].e;
            return true;
        }
    return false;
}
