/* SPDX-License-Identifier: MIT */
/* peaks.c - the peak of each device and what is alive there, grouped by stack
 * (gm_analysis_peaks()), and the figures of a device at its peak that the outputs share:
 * the bytes per rule, the dominant category, the allocation sites.
 *
 * What is alive at the peak comes from the timeline's third pass (its live list) when only
 * the snapshot is at hand, or from the analysis's allocations when it is: an allocation is
 * alive after event k when it was allocated at or before k (or from the start) and not
 * freed by k.  The analysis matches allocations to frees exactly as the timeline does, so
 * both give the same list; tests hold the two against each other on every real file. */
#include "analysis/analysis_int.h"
#include "analysis/made_by.h"

#include "base/map.h"
#include "base/vec.h"
#include "snapshot/snapshot_int.h"

#include "gpumem/arena.h"

#include <stdlib.h>
#include <string.h>

static bool alive_at(const struct gm_analysis_alloc *a, int64_t k)
{
    return ana_alive_at(a->alloc_event, a->free_event, k);
}

/* Per group of 'p', its bytes per category: the allocations of the group's stack alive at
 * the peak. */
static enum gm_status group_categories(const struct gm_analysis_device *dev,
                                       struct gm_peak_device *p, struct gm_error *err)
{
    struct gm_map group_of = GM_MAP_INIT; /* stack -> group */
    p->categories = gm_calloc(p->n_groups ? p->n_groups : 1, sizeof(*p->categories));
    if (!p->categories)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "peaks: out of memory");
    for (size_t g = 0; g < p->n_groups; g++)
        if (!gm_map_put(&group_of, p->groups[g].stack, g)) {
            gm_map_release(&group_of);
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "peaks: out of memory");
        }
    for (size_t i = 0, end = gm_analysis_made_by(dev, 0, dev->peak_event); i < end; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        uint64_t g;
        if (alive_at(a, dev->peak_event) && a->category < GM_CATEGORY_COUNT &&
            gm_map_get(&group_of, a->stack, &g))
            p->categories[g][a->category] += a->bytes;
    }
    gm_map_release(&group_of);
    return GM_OK;
}

struct note_key {
    int64_t event; /* alloc event */
    uint32_t stack;
};

static int cmp_note_key(const void *pa, const void *pb)
{
    const struct note_key *a = pa, *b = pb;
    return a->event < b->event ? -1 : a->event > b->event;
}

/* p->group_metadata and p->group_user_stack from the alloc events of the allocations
 * alive at the peak (keys[0..n): their alloc event and stack), read in one pass. */
static enum gm_status group_notes(const struct gm_snapshot *snap,
                                  const struct gm_snapshot_device *d, struct note_key *keys,
                                  size_t n, struct gm_peak_device *p, struct gm_error *err)
{
    struct gm_map group_of = GM_MAP_INIT; /* stack -> group */
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e = NULL;
    uint8_t *seen;
    size_t ng = p->n_groups ? p->n_groups : 1;
    p->group_metadata = gm_calloc(ng, sizeof(*p->group_metadata));
    p->group_user_stack = gm_calloc(ng, sizeof(*p->group_user_stack));
    seen = gm_calloc(ng, 1); /* 1: a note taken, 2: the group's allocations differ */
    if (!p->group_metadata || !p->group_user_stack || !seen)
        goto nomem;
    for (size_t g = 0; g < p->n_groups; g++)
        if (!gm_map_put(&group_of, p->groups[g].stack, g))
            goto nomem;
    qsort(keys, n, sizeof(*keys), cmp_note_key);
    gm_snapshot_cursor_init(&c, d, 0);
    for (size_t i = 0; i < n; i++) {
        const char *meta = NULL;
        uint32_t fwd = 0;
        uint64_t g;
        if (keys[i].event >= 0) {
            while ((!e || c.index < (size_t)keys[i].event) &&
                   (e = gm_snapshot_cursor_next(&c)) != NULL)
                ;
            if (e && c.index == (size_t)keys[i].event) {
                const struct gm_snapshot_event_extra *x = gm_snapshot_event_extra_of(snap, e);
                meta = x && x->user_metadata && *x->user_metadata ? x->user_metadata : NULL;
                fwd = gm_snapshot_event_user_stack(snap, e);
                fwd = fwd != e->stack ? fwd : 0;
            }
        }
        if (!gm_map_get(&group_of, keys[i].stack, &g))
            continue;
        if (!seen[g]) {
            p->group_metadata[g] = meta;
            p->group_user_stack[g] = fwd;
            seen[g] = 1;
        } else {
            if (p->group_metadata[g] != meta) /* interned: equal texts, one pointer */
                p->group_metadata[g] = NULL;
            if (p->group_user_stack[g] != fwd)
                p->group_user_stack[g] = 0;
        }
    }
    gm_map_release(&group_of);
    gm_free(seen);
    return GM_OK;
nomem:
    gm_map_release(&group_of);
    gm_free(seen);
    return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "peaks: out of memory");
}

/* The allocations the analysis says are alive at the peak of 'dev', grouped by stack. */
static enum gm_status groups_of_analysis(const struct gm_analysis_device *dev,
                                         struct gm_peak_device *p, struct gm_error *err)
{
    struct gm_snapshot_live *live = NULL, *l;
    size_t n = 0, cap = 0;
    enum gm_status st;
    for (size_t i = 0, end = gm_analysis_made_by(dev, 0, dev->peak_event); i < end; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        if (!alive_at(a, dev->peak_event))
            continue;
        if (!(l = GM_VEC_PUSH(live, n, cap, NULL))) {
            gm_free(live);
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "peaks: out of memory");
        }
        l->addr = a->addr;
        l->bytes = a->bytes;
        l->stream = gm_analysis_alloc_stream(dev, a);
        l->stack = a->stack;
        l->alloc_event = a->alloc_event;
    }
    p->n_live = n;
    st = snap_group_live(live, n, &p->groups, &p->n_groups, err);
    gm_free(live);
    if (st == GM_OK)
        st = group_categories(dev, p, err);
    return st;
}

/* The listed groups told apart where they would read alike. */
static enum gm_status tell_apart(const struct gm_snapshot *snap, struct gm_peak_device *p,
                                 size_t listed, struct gm_error *err)
{
    size_t n = listed < p->n_groups ? listed : p->n_groups;
    struct gm_snapshot_stack_ref *refs = gm_malloc((n ? n : 1) * sizeof(*refs));
    p->apart = gm_malloc((n ? n : 1) * sizeof(*p->apart));
    if (!refs || !p->apart) {
        gm_free(refs);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "peaks: out of memory");
    }
    for (size_t g = 0; g < n; g++)
        refs[g] = (struct gm_snapshot_stack_ref){snap, p->groups[g].stack};
    gm_snapshot_stacks_apart(refs, n, GM_PEAK_CALLERS, p->apart);
    p->n_apart = n;
    gm_free(refs);
    return GM_OK;
}

static enum gm_status device_peak(const struct gm_snapshot *snap, const struct gm_analysis *an,
                                  const struct gm_snapshot_device *d, size_t listed,
                                  struct gm_peak_device *p, struct gm_error *err)
{
    const struct gm_analysis_device *ad = an ? gm_analysis_device_by_index(an, d->index) : NULL;
    enum gm_status st;
    bool notes = snap_has_event_notes(snap);
    struct note_key *keys = NULL;
    size_t n_keys = 0;
    p->device = d->index;
    if (ad) {
        p->timeline = ad->timeline;
        st = groups_of_analysis(ad, p, err);
        if (st == GM_OK && notes && (keys = gm_malloc((p->n_live ? p->n_live : 1) * sizeof(*keys))))
            for (size_t i = 0, end = gm_analysis_made_by(ad, 0, ad->peak_event); i < end; i++)
                if (alive_at(&ad->allocs[i], ad->peak_event) && n_keys < p->n_live)
                    keys[n_keys++] =
                        (struct note_key){ad->allocs[i].alloc_event, ad->allocs[i].stack};
    } else {
        struct gm_snapshot_timeline tl;
        if ((st = gm_snapshot_timeline(snap, d->index, GM_TIMELINE_LIVE, &tl, err)) != GM_OK)
            return st;
        st = gm_snapshot_group_live(&tl, &p->groups, &p->n_groups, err);
        p->n_live = tl.n_live;
        if (st == GM_OK && notes && (keys = gm_malloc((tl.n_live ? tl.n_live : 1) * sizeof(*keys))))
            for (size_t i = 0; i < tl.n_live; i++)
                keys[n_keys++] = (struct note_key){tl.live[i].alloc_event, tl.live[i].stack};
        gm_snapshot_timeline_release(&tl);
        p->timeline = tl; /* the scalars; the live list is given back */
    }
    if (st == GM_OK && notes)
        st = keys ? group_notes(snap, d, keys, n_keys, p, err)
                  : gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "peaks: out of memory");
    gm_free(keys);
    p->timeline.live = NULL;
    p->timeline.n_live = 0;
    if (st != GM_OK || (st = tell_apart(snap, p, listed, err)) != GM_OK)
        return st;
    if (p->timeline.peak_time_valid) {
        struct gm_snapshot_user_range *r = NULL;
        size_t n = 0;
        if ((st = gm_snapshot_user_ranges(snap, d->index, &r, &n, err)) != GM_OK)
            return st;
        p->user_phase = gm_snapshot_user_phase_at(r, n, p->timeline.peak_time_us);
        gm_free(r);
    }
    p->has_oom = gm_snapshot_first_oom(snap, d, &p->first_oom);
    return GM_OK;
}

enum gm_status gm_analysis_peaks(const struct gm_snapshot *snap, const struct gm_analysis *an,
                                 const struct gm_analysis_peaks_opts *opts,
                                 struct gm_analysis_peaks *out, struct gm_error *err)
{
    int32_t want = opts ? opts->device : -1;
    size_t listed = opts ? opts->listed : SIZE_MAX;
    memset(out, 0, sizeof(*out));
    if (want >= 0 && !gm_snapshot_device_by_index(snap, want))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "the snapshot has no device %d",
                       (int)want);
    out->devices = gm_calloc(snap->n_devices ? snap->n_devices : 1, sizeof(*out->devices));
    if (!out->devices)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "peaks: out of memory");
    for (size_t i = 0; i < snap->n_devices; i++) {
        const struct gm_snapshot_device *d = &snap->devices[i];
        enum gm_status st;
        if (want >= 0 && d->index != want)
            continue;
        st = device_peak(snap, an, d, listed, &out->devices[out->n_devices++], err);
        if (st != GM_OK) {
            gm_analysis_peaks_release(out);
            return st;
        }
    }
    return GM_OK;
}

void gm_analysis_peaks_release(struct gm_analysis_peaks *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_devices; i++) {
        gm_free(p->devices[i].groups);
        gm_free(p->devices[i].categories);
        gm_free(p->devices[i].apart);
        gm_free(p->devices[i].group_metadata);
        gm_free(p->devices[i].group_user_stack);
    }
    gm_free(p->devices);
    memset(p, 0, sizeof(*p));
}

/* ---- figures at the peak ---- */

void gm_analysis_rules_at(const struct gm_analysis_device *dev, int64_t event,
                          uint64_t rules[GM_RULE_COUNT])
{
    memset(rules, 0, GM_RULE_COUNT * sizeof(uint64_t));
    for (size_t i = 0; i < dev->n_allocs; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        if (alive_at(a, event) && a->rule < GM_RULE_COUNT)
            rules[a->rule] += a->bytes;
    }
}

void gm_analysis_user_rules_at(const struct gm_analysis_device *dev, int64_t event, uint64_t *out,
                               size_t n)
{
    memset(out, 0, n * sizeof(uint64_t));
    for (size_t i = 0; i < dev->n_allocs; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        if (a->user_rule && a->user_rule <= n && alive_at(a, event))
            out[a->user_rule - 1] += a->bytes;
    }
}

int gm_analysis_dominant(const struct gm_analysis_device *dev)
{
    int best = GM_CATEGORY_COUNT;
    uint64_t b = 0;
    for (int c = 0; c < GM_CATEGORY_COUNT; c++)
        if (dev->at_peak[c] > b) {
            b = dev->at_peak[c];
            best = c;
        }
    return best;
}

static int cmp_key(const void *pa, const void *pb)
{
    const struct gm_analysis_site *a = pa, *b = pb;
    if (a->category != b->category)
        return a->category < b->category ? -1 : 1;
    if (a->stack != b->stack)
        return a->stack < b->stack ? -1 : 1;
    return (a->rule > b->rule) - (a->rule < b->rule);
}

static int cmp_bytes(const void *pa, const void *pb)
{
    const struct gm_analysis_site *a = pa, *b = pb;
    if (a->category != b->category)
        return a->category < b->category ? -1 : 1;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    return a->stack < b->stack ? -1 : a->stack > b->stack;
}

enum gm_status gm_analysis_sites_at_peak(const struct gm_analysis_device *dev,
                                         struct gm_analysis_site **out, size_t *n_out,
                                         struct gm_error *err)
{
    size_t n = 0, m = 0;
    int64_t k = dev->peak_event;
    struct gm_analysis_site *v = gm_malloc((dev->n_allocs ? dev->n_allocs : 1) * sizeof(*v));
    *out = NULL;
    *n_out = 0;
    if (!v)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for sites");
    for (size_t i = 0; i < dev->n_allocs; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        if (alive_at(a, k))
            v[n++] = (struct gm_analysis_site){a->stack, a->category, a->rule, a->bytes, 1};
    }
    qsort(v, n, sizeof(*v), cmp_key);
    for (size_t i = 0; i < n; i++) {
        if (m && v[m - 1].category == v[i].category && v[m - 1].stack == v[i].stack &&
            v[m - 1].rule == v[i].rule) {
            v[m - 1].bytes += v[i].bytes;
            v[m - 1].count++;
        } else {
            v[m++] = v[i];
        }
    }
    qsort(v, m, sizeof(*v), cmp_bytes);
    *out = v;
    *n_out = m;
    return GM_OK;
}
