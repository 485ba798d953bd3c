/* SPDX-License-Identifier: MIT */
/* diff.c - compare two analysed snapshots (before/after a change, or two ranks): peak,
 * per-category split at the peak, and allocation sites with their bytes at the peak.
 *
 * A site is keyed by its shown frames (gm_snapshot_stack_frames(): the Python frames, or
 * the non-noise frames of a C++-only stack) as filename + function, with the line number of
 * the innermost frame only, so that an edit that shifts the callers' lines does not turn
 * one site into a vanished and a new one, while two allocations of one function stay
 * apart. */
#include "analysis/analysis_int.h"

#include "base/vec.h"

#include "gpumem/arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The sites' keys (stack_key()), one per site in site order, and an index of their hashes. */
struct smap {
    struct gm_map index; /* hash of a key -> its site */
    char **keys;         /* gm_malloc'ed */
    size_t n, cap;
};

static void smap_release(struct smap *m)
{
    for (size_t i = 0; i < m->n; i++)
        gm_free(m->keys[i]);
    gm_free(m->keys);
    gm_map_release(&m->index);
    memset(m, 0, sizeof(*m));
}

struct key_eq {
    const struct smap *m;
    const char *key;
};

static bool key_eq(void *ctx, uint64_t site)
{
    const struct key_eq *c = ctx;
    return !strcmp(c->m->keys[site], c->key);
}

/* The site of 'key' (taking ownership of it when new: *is_new set, the site is the next
 * one), or SIZE_MAX on NOMEM. */
static size_t smap_get_or_add(struct smap *m, char *key, bool *is_new)
{
    uint64_t h = gm_hash_bytes(key, strlen(key), 0), site;
    struct key_eq c = {m, key};
    *is_new = false;
    if (gm_map_find(&m->index, h, key_eq, &c, &site)) {
        gm_free(key);
        return (size_t)site;
    }
    if (!GM_VEC_RESERVE(m->keys, m->cap, m->n + 1, NULL) || !gm_map_add(&m->index, h, m->n))
        return SIZE_MAX;
    m->keys[m->n] = key;
    *is_new = true;
    return m->n++;
}

/* The site key of a stack: "file\x1ffunction\x1fline\x1e" for the innermost shown frame,
 * then "file\x1ffunction\x1e" for its callers, a run of one function calling itself
 * (Module._apply recursing into submodules) written once: the depth of a module in its
 * model does not make another site (gm_malloc'ed). */
static char *stack_key(const struct gm_snapshot *snap, uint32_t stack)
{
    uint32_t ids[256];
    size_t n = gm_snapshot_stack_frames(snap, stack, ids, 256);
    if (n > 256)
        n = 256;
    size_t len = 24;
    for (size_t i = 0; i < n; i++)
        len += strlen(snap->frames[ids[i]].filename) + strlen(snap->frames[ids[i]].name) + 2;
    char *k = gm_malloc(len);
    if (!k)
        return NULL;
    char *p = k;
    for (size_t i = 0; i < n; i++) {
        const struct gm_snapshot_frame *f = &snap->frames[ids[i]];
        size_t a = strlen(f->filename), b = strlen(f->name);
        if (i > 1 && !strcmp(f->name, snap->frames[ids[i - 1]].name) &&
            !strcmp(f->filename, snap->frames[ids[i - 1]].filename))
            continue; /* the same function again (i > 1: the innermost frame has its line) */
        memcpy(p, f->filename, a);
        p += a;
        *p++ = '\x1f';
        memcpy(p, f->name, b);
        p += b;
        if (i == 0)
            p += snprintf(p, 24, "\x1f%lld", (long long)f->line);
        *p++ = '\x1e';
    }
    *p = 0;
    return k;
}

struct sites {
    struct gm_analysis_diff_site *v;
    size_t n, cap;
};

bool ana_stack_sums_init(struct ana_stack_sums *s, size_t n_stacks)
{
    size_t size = (n_stacks ? n_stacks : 1) * sizeof(uint32_t);
    memset(s, 0, sizeof(*s));
    gm_map_init(&s->other, NULL);
    /* stack ids are dense (the loader interns every stack below n_stacks): an array */
    if (!(s->slot_of = gm_malloc(size)))
        return false;
    memset(s->slot_of, 0xff, size);
    s->n_ids = n_stacks;
    return true;
}

void ana_stack_sums_release(struct ana_stack_sums *s)
{
    gm_free(s->v);
    gm_free(s->slot_of);
    gm_map_release(&s->other);
    memset(s, 0, sizeof(*s));
}

uint32_t ana_stack_sums_slot(struct ana_stack_sums *s, uint32_t stack)
{
    uint32_t slot = stack < s->n_ids ? s->slot_of[stack] : ana_map_u32(&s->other, stack);
    if (slot != UINT32_MAX)
        return slot;
    if (s->n >= UINT32_MAX - 1)
        return UINT32_MAX;
    struct ana_stack_sum *x = GM_VEC_PUSH(s->v, s->n, s->cap, NULL);
    if (!x)
        return UINT32_MAX;
    memset(x, 0, sizeof(*x));
    x->stack = stack;
    slot = (uint32_t)(s->n - 1);
    if (stack < s->n_ids)
        s->slot_of[stack] = slot;
    else if (!gm_map_put(&s->other, stack, slot))
        return UINT32_MAX;
    return slot;
}

/* The sums per stack of 'dev': those its analysis kept (gm_analysis_diff_prepare()), else
 * made from its allocations into *made (released by the caller). */
static enum gm_status sums_of(const struct gm_analysis *an, const struct gm_analysis_device *dev,
                              struct ana_stack_sums *made, const struct ana_stack_sum **v,
                              size_t *n, struct gm_error *err)
{
    memset(made, 0, sizeof(*made));
    if (dev->priv_ && dev->priv_->sums) {
        *v = dev->priv_->sums;
        *n = dev->priv_->n_sums;
        return GM_OK;
    }
    if (!ana_stack_sums_init(made, an->snap->n_stacks))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "diff: out of memory");
    for (size_t i = 0; i < dev->n_allocs; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        if (!ana_stack_sums_add(made, a->stack, a->bytes, a->alloc_event, a->free_event,
                                dev->peak_event))
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "diff: out of memory");
    }
    *v = made->v;
    *n = made->n;
    return GM_OK;
}

/* The stacks of one side into the sites, each stack's allocations at once (their sums; the
 * stacks in the order of their first allocation, so that the sites come in that order). */
static enum gm_status add_side(struct smap *m, struct sites *s, const struct gm_analysis *an,
                               const struct gm_analysis_device *dev, int side, struct gm_error *err)
{
    struct ana_stack_sums made;
    const struct ana_stack_sum *v = NULL;
    size_t n = 0;
    enum gm_status st = sums_of(an, dev, &made, &v, &n, err);
    if (st != GM_OK)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const struct ana_stack_sum *x = &v[i];
        char *key = stack_key(an->snap, x->stack);
        if (!key)
            goto nomem;
        bool is_new;
        size_t idx = smap_get_or_add(m, key, &is_new);
        if (idx == SIZE_MAX) {
            gm_free(key);
            goto nomem;
        }
        if (is_new) {
            struct gm_analysis_diff_site *ds = GM_VEC_PUSH(s->v, s->n, s->cap, NULL);
            if (!ds)
                goto nomem;
            memset(ds, 0, sizeof(*ds));
            ds->stack[0] = ds->stack[1] = UINT32_MAX;
        }
        if (idx >= UINT32_MAX) {
            st = gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "diff: too many sites");
            goto out;
        }
        struct gm_analysis_diff_site *ds = &s->v[idx];
        if (ds->stack[side] == UINT32_MAX)
            ds->stack[side] = x->stack;
        ds->total[side] += x->total;
        ds->bytes[side] += x->bytes;
        ds->count[side] += x->count;
    }
    st = GM_OK;
    goto out;
nomem:
    st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "diff: out of memory");
out:
    ana_stack_sums_release(&made);
    return st;
}

static uint64_t absdiff(uint64_t a, uint64_t b)
{
    return a > b ? a - b : b - a;
}

static int cmp_site(const void *pa, const void *pb)
{
    const struct gm_analysis_diff_site *x = pa, *y = pb;
    uint64_t dx = absdiff(x->bytes[0], x->bytes[1]), dy = absdiff(y->bytes[0], y->bytes[1]);
    if (dx != dy)
        return dx > dy ? -1 : 1;
    uint64_t tx = x->total[0] > x->total[1] ? x->total[0] : x->total[1];
    uint64_t ty = y->total[0] > y->total[1] ? y->total[0] : y->total[1];
    if (tx != ty)
        return tx > ty ? -1 : 1;
    uint64_t bx = x->bytes[0] + x->bytes[1], by = y->bytes[0] + y->bytes[1];
    return bx > by ? -1 : bx < by;
}

const char *gm_diff_status_name(enum gm_diff_status s)
{
    static const char *const names[] = {"same", "changed", "new", "vanished"};
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}

static enum gm_diff_status status_of(const struct gm_analysis_diff_site *s)
{
    if (!s->total[0] && s->total[1])
        return GM_DIFF_NEW;
    if (s->total[0] && !s->total[1])
        return GM_DIFF_VANISHED;
    if (s->bytes[0] != s->bytes[1] || s->total[0] != s->total[1])
        return GM_DIFF_CHANGED;
    return GM_DIFF_SAME;
}

/* Sites that read alike on one line (their keys differ in the callers): the frame of each
 * that tells it apart, so that no site seems listed twice ("vanished" and "same"). */
static enum gm_status tell_apart(const struct gm_analysis *const *an, struct sites *s,
                                 struct gm_error *err)
{
    struct gm_snapshot_stack_ref *refs = gm_malloc((s->n ? s->n : 1) * sizeof(*refs));
    long *apart = gm_malloc((s->n ? s->n : 1) * sizeof(*apart));
    if (!refs || !apart) {
        gm_free(refs);
        gm_free(apart);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "diff: out of memory");
    }
    for (size_t i = 0; i < s->n; i++) {
        int side = s->v[i].stack[0] != UINT32_MAX ? 0 : 1;
        refs[i].snap = an[side]->snap;
        refs[i].stack = s->v[i].stack[side];
    }
    gm_snapshot_stacks_apart(refs, s->n, 0, apart);
    for (size_t i = 0; i < s->n; i++)
        s->v[i].apart = apart[i];
    gm_free(refs);
    gm_free(apart);
    return GM_OK;
}

static enum gm_status diff_device(const struct gm_analysis *a, const struct gm_analysis *b,
                                  const int32_t *index, struct gm_arena *arena,
                                  struct gm_analysis_diff_device *out, struct gm_error *err)
{
    const struct gm_analysis *an[2] = {a, b};
    struct smap m = {0};
    struct sites s = {0};
    enum gm_status st = GM_OK;
    out->devices[0] = index[0];
    out->devices[1] = index[1];
    for (int side = 0; side < 2; side++) {
        const struct gm_analysis_device *dev = gm_analysis_device_by_index(an[side], index[side]);
        if (!dev)
            continue;
        out->present[side] = true;
        out->peak_bytes[side] = dev->peak_bytes;
        out->peak_phase[side] = dev->peak_phase;
        memcpy(out->at_peak[side], dev->at_peak, sizeof(dev->at_peak));
        st = add_side(&m, &s, an[side], dev, side, err);
        if (st != GM_OK)
            goto out;
    }
    for (size_t i = 0; i < s.n; i++)
        s.v[i].status = (uint8_t)status_of(&s.v[i]);
    out->device = out->present[0] ? index[0] : index[1];
    if (s.n)
        qsort(s.v, s.n, sizeof(*s.v), cmp_site);
    if ((st = tell_apart(an, &s, err)) != GM_OK)
        goto out;
    out->sites = gm_arena_calloc(arena, s.n ? s.n : 1, sizeof(*out->sites));
    if (!out->sites) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "diff: out of memory");
        goto out;
    }
    if (s.n)
        memcpy(out->sites, s.v, s.n * sizeof(*s.v));
    out->n_sites = s.n;
out:
    gm_free(s.v);
    smap_release(&m);
    return st;
}

static int cmp_i32(const void *pa, const void *pb)
{
    int32_t x = *(const int32_t *)pa, y = *(const int32_t *)pb;
    return x < y ? -1 : x > y;
}

/* The device indexes of the devices of 'an' that have a trace or segments; how many. */
static size_t active_devices(const struct gm_analysis *an, int32_t *first)
{
    size_t n = 0;
    for (size_t i = 0; i < an->n_devices; i++) {
        const struct gm_snapshot_device *sd = &an->snap->devices[i];
        if (sd->n_events || sd->n_segments) {
            if (!n)
                *first = an->devices[i].device;
            n++;
        }
    }
    return n;
}

/* Whether A and B are two ranks' files: one active device each, at different indexes (with
 * the same index the comparison by index says the same). */
static bool one_rank_each(const struct gm_analysis *a, const struct gm_analysis *b, int32_t *ra,
                          int32_t *rb)
{
    return active_devices(a, ra) == 1 && active_devices(b, rb) == 1 && *ra != *rb;
}

enum gm_status gm_analysis_diff_prepare(const struct gm_snapshot *snap,
                                        const struct gm_analysis_opts *opts,
                                        struct gm_analysis **out, struct gm_error *err)
{
    return ana_run(snap, opts, ANA_PARTS_DIFF, out, err);
}

enum gm_status gm_analysis_diff(const struct gm_analysis *a, const struct gm_analysis *b,
                                struct gm_analysis_diff **out, struct gm_error *err)
{
    int32_t ra, rb;
    *out = NULL;
    struct gm_analysis_diff *d = gm_calloc(1, sizeof(*d));
    struct ana_priv *priv = gm_calloc(1, sizeof(*priv));
    int32_t *idx = gm_malloc((a->n_devices + b->n_devices + 1) * sizeof(int32_t));
    enum gm_status st;
    if (!d || !priv || !idx) {
        gm_free(d);
        gm_free(priv);
        gm_free(idx);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "diff: out of memory");
    }
    gm_arena_init(&priv->arena, 0);
    d->priv_ = priv;
    size_t n = 0;
    for (size_t i = 0; i < a->n_devices; i++)
        idx[n++] = a->devices[i].device;
    for (size_t i = 0; i < b->n_devices; i++)
        idx[n++] = b->devices[i].device;
    qsort(idx, n, sizeof(int32_t), cmp_i32);
    size_t u = 0;
    for (size_t i = 0; i < n; i++)
        if (!u || idx[u - 1] != idx[i])
            idx[u++] = idx[i];
    d->devices = gm_arena_calloc(&priv->arena, u ? u : 1, sizeof(*d->devices));
    if (!d->devices) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "diff: out of memory");
        goto fail;
    }
    d->n_devices = u;
    if (one_rank_each(a, b, &ra, &rb)) {
        int32_t pair[2] = {ra, rb};
        d->n_devices = 1;
        st = diff_device(a, b, pair, &priv->arena, &d->devices[0], err);
        if (st != GM_OK)
            goto fail;
    }
    for (size_t i = 0; d->n_devices == u && i < u; i++) {
        int32_t pair[2] = {idx[i], idx[i]};
        st = diff_device(a, b, pair, &priv->arena, &d->devices[i], err);
        if (st != GM_OK)
            goto fail;
    }
    gm_free(idx);
    *out = d;
    return GM_OK;
fail:
    gm_free(idx);
    gm_analysis_diff_free(d);
    return st;
}

void gm_analysis_diff_free(struct gm_analysis_diff *d)
{
    if (!d)
        return;
    struct ana_priv *priv = d->priv_;
    if (priv) {
        gm_arena_release(&priv->arena);
        gm_free(priv);
    }
    gm_free(d);
}

const struct gm_snapshot *gm_analysis_diff_site_stack(const struct gm_analysis_diff_site *s,
                                                      const struct gm_snapshot *a,
                                                      const struct gm_snapshot *b, uint32_t *stack)
{
    if (s->stack[0] != UINT32_MAX) {
        *stack = s->stack[0];
        return a;
    }
    *stack = s->stack[1];
    return b;
}
