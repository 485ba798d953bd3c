/* SPDX-License-Identifier: MIT */
/* alloc.c - the caching-allocator model: DeviceCachingAllocator's malloc / free / empty_cache
 * with its statistics, over a struct gm_alloc_device.
 *
 * Each function below names the PyTorch function it models; the rules are stated in
 * docs/alloc.md section 1.  One stream set per model, no CUDA
 * graphs, no cross-stream events (free returns a block to the pool at once: what a trace's
 * free_completed records). */
#include "alloc/alloc_int.h"

#include "base/hint.h"
#include "base/vec.h"

#include "gpumem/units.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- statistics ------------------------------------------------------------------- */

static inline void stat_inc(struct gm_alloc_stat *s, uint64_t v)
{
    s->current += v;
    s->allocated += v;
    if (s->current > s->peak)
        s->peak = s->current;
}

static inline void stat_dec(struct gm_alloc_stat *s, uint64_t v)
{
    /* a decrease below zero would be a bookkeeping bug; clamp rather than wrap */
    s->current = v <= s->current ? s->current - v : 0;
    s->freed += v;
}

static inline enum gm_alloc_stat_type pool_type(const struct alloc_pool *p)
{
    return p->small ? GM_ALLOC_STAT_SMALL_POOL : GM_ALLOC_STAT_LARGE_POOL;
}

/* increase_stat / decrease_stat on the aggregate and the pool's own entry */
static inline void pool_inc(struct gm_alloc_stat *arr, const struct alloc_pool *p, uint64_t v)
{
    stat_inc(&arr[GM_ALLOC_STAT_ALL], v);
    stat_inc(&arr[pool_type(p)], v);
}

static inline void pool_dec(struct gm_alloc_stat *arr, const struct alloc_pool *p, uint64_t v)
{
    stat_dec(&arr[GM_ALLOC_STAT_ALL], v);
    stat_dec(&arr[pool_type(p)], v);
}

/* allocated_bytes, which a lean model keeps in the aggregate only (gm_alloc_set_lean()) */
static inline void alloc_bytes_inc(struct gm_alloc *a, const struct alloc_pool *p, uint64_t v)
{
    stat_inc(&a->stats.allocated_bytes[GM_ALLOC_STAT_ALL], v);
    if (!a->lean)
        stat_inc(&a->stats.allocated_bytes[pool_type(p)], v);
}

static inline void alloc_bytes_dec(struct gm_alloc *a, const struct alloc_pool *p, uint64_t v)
{
    stat_dec(&a->stats.allocated_bytes[GM_ALLOC_STAT_ALL], v);
    if (!a->lean)
        stat_dec(&a->stats.allocated_bytes[pool_type(p)], v);
}

static void emit(struct gm_alloc *a, enum gm_alloc_event_kind k, uint64_t addr, uint64_t size,
                 int64_t stream)
{
    if (a->hook)
        a->hook(a->hook_ctx, k, addr, size, stream);
}

const char *gm_alloc_event_name(enum gm_alloc_event_kind kind)
{
    switch (kind) {
    case GM_ALLOC_EV_SEGMENT_ALLOC:
        return "segment_alloc";
    case GM_ALLOC_EV_SEGMENT_FREE:
        return "segment_free";
    case GM_ALLOC_EV_SEGMENT_MAP:
        return "segment_map";
    case GM_ALLOC_EV_SEGMENT_UNMAP:
        return "segment_unmap";
    case GM_ALLOC_EV_OOM:
        return "oom";
    }
    return "unknown";
}

/* ---- ordered block sets (std::set<Block*, Comparator> with lower_bound) -------------- */

static struct gm_btree_key tree_key(const struct blockset_ent *k)
{
    struct gm_btree_key t;
    t.hi = k->size;
    t.lo = k->addr;
    return t;
}

static struct blockset_ent block_key(const struct blockset *s, const struct block *b)
{
    return blockset_key(s, b->stream, b->size, b->addr);
}

/* index of the first tree whose stream is not less than 'stream' (a set has a few) */
static size_t tree_index(const struct blockset *s, uint64_t stream)
{
    size_t t = 0;
    while (t < s->n_trees && s->trees[t].stream < stream)
        t++;
    return t;
}

/* 'p', a position in trees[t], as the set's: past the tree's end, the next tree's first */
static struct blockset_pos in_tree(const struct blockset *s, size_t t, struct gm_btree_pos p)
{
    struct blockset_pos q;
    if (!p.leaf)
        return blockset_from_tree(s, t + 1);
    q.t = t;
    q.p = p;
    return q;
}

struct blockset_pos alloc_blockset_lower_bound(const struct blockset *s,
                                               const struct blockset_ent *key)
{
    size_t t = tree_index(s, key->stream);
    if (t < s->n_trees && s->trees[t].stream == key->stream)
        return in_tree(s, t, gm_btree_lower_bound(&s->trees[t].t, tree_key(key)));
    return blockset_from_tree(s, t);
}

/* alloc_blockset_seek(), inlined in the best fit's search of every request */
static GM_INLINE_ALWAYS struct blockset_pos set_seek(struct blockset *s,
                                                     const struct blockset_ent *key)
{
    size_t t = tree_index(s, key->stream);
    if (t < s->n_trees && s->trees[t].stream == key->stream)
        return in_tree(s, t, gm_btree_seek(&s->trees[t].t, tree_key(key)));
    return blockset_from_tree(s, t);
}

struct blockset_pos alloc_blockset_seek(struct blockset *s, const struct blockset_ent *key)
{
    return set_seek(s, key);
}

enum gm_status alloc_blockset_reserve_slow(struct blockset *s, size_t extra)
{
    if (!GM_VEC_RESERVE(s->trees, s->cap_trees, s->n_trees + extra, NULL))
        return GM_ERR_NOMEM;
    return gm_slab_reserve(&s->nodes, gm_btree_insert_nodes(s->height, extra));
}

enum gm_status alloc_blockset_insert(struct blockset *s, struct block *b)
{
    struct blockset_ent key;
    struct blockset_tree *tr;
    size_t t;
    if (blockset_reserve(s, 1))
        return GM_ERR_NOMEM;
    key = block_key(s, b);
    t = tree_index(s, key.stream);
    if (t == s->n_trees || s->trees[t].stream != key.stream) {
        memmove(s->trees + t + 1, s->trees + t, (s->n_trees - t) * sizeof(*s->trees));
        s->n_trees++;
        s->trees[t].stream = key.stream;
        gm_btree_init(&s->trees[t].t, &s->nodes, offsetof(struct block, leaf));
    }
    tr = &s->trees[t];
    if (gm_btree_insert(&tr->t, tree_key(&key), b))
        return GM_ERR_INVALID; /* reserved, so only a block already in the set */
    if (tr->t.height > s->height)
        s->height = tr->t.height;
    s->n++;
    return GM_OK;
}

/* by the block's leaf: no search */
bool alloc_blockset_erase(struct blockset *s, const struct block *b)
{
    size_t t = tree_index(s, (uint64_t)b->stream);
    if (t == s->n_trees || s->trees[t].stream != (uint64_t)b->stream ||
        !gm_btree_erase(&s->trees[t].t, b))
        return false;
    s->n--;
    return true;
}

void alloc_blockset_erase_at(struct blockset *s, struct blockset_pos p)
{
    gm_btree_erase_at(&s->trees[p.t].t, p.p);
    s->n--;
}

enum gm_status alloc_blockset_replace(struct blockset *s, const struct blockset_pos *at,
                                      const struct block *old, struct block *b)
{
    struct blockset_pos p;
    if (at) {
        p = *at;
    } else {
        p.t = tree_index(s, (uint64_t)old->stream);
        if (p.t == s->n_trees || s->trees[p.t].stream != (uint64_t)old->stream ||
            !(p.p = gm_btree_find(&s->trees[p.t].t, old)).leaf)
            return alloc_blockset_insert(s, b); /* 'old' is in none */
    }
    if (b->stream == old->stream) {
        struct blockset_ent key = block_key(s, b);
        if (gm_btree_replace_at(&s->trees[p.t].t, p.p, tree_key(&key), b))
            return GM_OK;
    }
    alloc_blockset_erase_at(s, p);
    return alloc_blockset_insert(s, b);
}

void alloc_blockset_init(struct blockset *s, bool by_size)
{
    struct gm_slab nodes = GM_BTREE_POOL_INIT;
    memset(s, 0, sizeof(*s));
    s->nodes = nodes;
    s->by_size = by_size;
}

void alloc_blockset_clear(struct blockset *s)
{
    for (size_t t = 0; t < s->n_trees; t++)
        gm_btree_release(&s->trees[t].t);
    s->n_trees = s->n = 0;
    s->height = 0;
}

void alloc_blockset_release(struct blockset *s)
{
    for (size_t t = 0; t < s->n_trees; t++)
        gm_btree_release(&s->trees[t].t);
    gm_free(s->trees);
    gm_slab_release(&s->nodes);
    s->trees = NULL;
    s->n_trees = s->cap_trees = s->n = 0;
    s->height = 0;
}

/* pool.insert_into_blocks(): also restarts the block's GC age */
static enum gm_status pool_insert(struct alloc_pool *p, struct block *b)
{
    b->gc_base = p->free_block_calls;
    return alloc_blockset_insert(&p->blocks, b);
}

/* blocks.erase(old) (at 'at' when not NULL); insert_into_blocks(b): in place when the
 * order allows (alloc_blockset_replace()) */
static enum gm_status pool_replace(struct alloc_pool *p, const struct blockset_pos *at,
                                   const struct block *old, struct block *b)
{
    b->gc_base = p->free_block_calls;
    return alloc_blockset_replace(&p->blocks, at, old, b);
}

/* ---- allocated-address map: address -> block (base/map.h) --------------------------- */

static struct block *active_block(const struct gm_alloc *a, uint64_t ptr)
{
    uint64_t v;
    return gm_map_get(&a->active, ptr, &v) ? (struct block *)(uintptr_t)v : NULL;
}

struct block *alloc_active_next(const struct gm_alloc *a, size_t *pos)
{
    uint64_t k, v;
    return gm_map_next(&a->active, pos, &k, &v) ? (struct block *)(uintptr_t)v : NULL;
}

/* 'b' (just put in the active map) first in the live list */
static void live_add(struct gm_alloc *a, struct block *b)
{
    b->live_prev = NULL;
    b->live_next = a->live;
    if (a->live)
        a->live->live_prev = b;
    a->live = b;
    a->n_live++;
}

/* 'b' (just taken from the active map) out of the live list */
static void live_remove(struct gm_alloc *a, struct block *b)
{
    if (b->live_prev)
        b->live_prev->live_next = b->live_next;
    else
        a->live = b->live_next;
    if (b->live_next)
        b->live_next->live_prev = b->live_prev;
    b->live_prev = b->live_next = NULL;
    a->n_live--;
}

static bool active_reserve(struct gm_alloc *a)
{
    return gm_map_reserve(&a->active, gm_map_count(&a->active) + 1);
}

/* ---- blocks --------------------------------------------------------------------------- */

/* Block records come from a pool (base/slab.h) the allocator keeps until gm_alloc_free():
 * a replay makes and drops hundreds of thousands of them, and a record given back is the
 * next one handed out. */
#define BLOCK_SLAB 256

static GM_INLINE_ALWAYS struct block *block_new(struct gm_alloc *a, uint64_t addr, uint64_t size,
                                                int64_t stream, struct alloc_pool *pool,
                                                struct xseg *xs)
{
    struct block *b = gm_slab_take(&a->records);
    if (!b)
        return NULL;
    /* every field by name: a compound literal becomes a string store (rep stos), slow to
     * start for the hundreds of thousands of records a replay makes */
    b->addr = addr;
    b->size = size;
    b->requested = 0;
    b->stream = stream;
    b->prev = b->next = NULL;
    b->pool = pool;
    b->xseg = xs;
    b->gc_base = 0;
    b->uses = NULL;
    b->n_uses = 0;
    b->event_count = 0;
    b->leaf = NULL;
    b->live_prev = b->live_next = NULL;
    b->allocated = false;
    b->mapped = true;
    return b;
}

/* Give a record back (its 'uses' already freed or moved); NULL is a no-op. */
static void block_drop(struct gm_alloc *a, struct block *b)
{
    gm_slab_give(&a->records, b);
}

static bool is_split(const struct block *b)
{
    return b->prev || b->next;
}

/* whether try_merge_blocks(dst, src) merges: src is free with the same mapped state */
static bool mergeable(const struct block *dst, const struct block *src)
{
    return src && !src->allocated && src->event_count == 0 && dst->mapped == src->mapped;
}

/* dst takes in its mergeable neighbour src, which leaves its set and is dropped unless
 * 'keep' (the caller puts dst in its place); returns the bytes absorbed */
static GM_INLINE_ALWAYS uint64_t absorb(struct gm_alloc *a, struct block *dst, struct block *src,
                                        bool keep)
{
    uint64_t sub;
    if (dst->prev == src) {
        dst->addr = src->addr;
        dst->prev = src->prev;
        if (dst->prev)
            dst->prev->next = dst;
    } else {
        dst->next = src->next;
        if (dst->next)
            dst->next->prev = dst;
    }
    sub = src->size;
    dst->size += sub;
    if (keep)
        return sub;
    if (src->mapped)
        alloc_blockset_erase(&src->pool->blocks, src);
    else
        alloc_blockset_erase(&src->pool->unmapped, src);
    block_drop(a, src);
    return sub;
}

/* try_merge_blocks(dst, src): dst absorbs its neighbour src when src is free with the same
 * mapped state; returns the bytes absorbed (0: no merge). */
static uint64_t try_merge(struct gm_alloc *a, struct block *dst, struct block *src)
{
    return mergeable(dst, src) ? absorb(a, dst, src, false) : 0;
}

/* ---- segments ------------------------------------------------------------------------ */

/* release_block(): cudaFree an unsplit cached block */
static void release_block(struct gm_alloc *a, struct block *b)
{
    struct alloc_pool *p = b->pool;
    emit(a, GM_ALLOC_EV_SEGMENT_FREE, b->addr, b->size, b->stream);
    a->dev.ops->seg_free(a->dev.ctx, b->addr, b->size);
    a->total_allocated -= b->size;
    pool_dec(a->stats.segment, p, 1);
    pool_dec(a->stats.reserved_bytes, p, b->size);
    a->stats.num_device_free++;
    if (b->size >= a->conf.max_split_size)
        stat_dec(&a->stats.oversize_segments, 1);
    alloc_blockset_erase(&p->blocks, b);
    a->n_segments--;
    block_drop(a, b);
}

static uint64_t page_floor(const struct xseg *xs, uint64_t addr)
{
    return xs->base + (addr - xs->base) / xs->page * xs->page;
}

static uint64_t page_ceil(const struct xseg *xs, uint64_t addr)
{
    uint64_t off = addr - xs->base;
    return xs->base + (off + xs->page - 1) / xs->page * xs->page;
}

/* map_block(): back the first 'size' bytes of the unmapped block 'b' with pages, merge it
 * with free mapped neighbours and put it in the pool.  *out is the resulting free block. */
static enum gm_status map_block(struct gm_alloc *a, struct block *b, uint64_t size,
                                struct block **out, struct gm_error *err)
{
    struct xseg *xs = b->xseg;
    struct alloc_pool *p = b->pool;
    uint64_t end = page_ceil(xs, b->addr + size);
    uint64_t mapped = end - b->addr;
    size_t first = (size_t)((b->addr - xs->base) / xs->page);
    size_t n = (size_t)(mapped / xs->page);
    struct block *rest = NULL;
    enum gm_status st;

    if (blockset_reserve(&p->unmapped, 1) || blockset_reserve(&p->blocks, 1))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    if (mapped < b->size) {
        rest = block_new(a, b->addr + mapped, b->size - mapped, b->stream, p, xs);
        if (!rest)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
        rest->mapped = false;
    }
    st = a->dev.ops->map(a->dev.ctx, b->addr, mapped, err);
    if (st) {
        block_drop(a, rest);
        return st;
    }
    memset(xs->mapped + first, 1, n);
    alloc_blockset_erase(&p->unmapped, b);
    b->mapped = true;
    if (rest) {
        rest->prev = b;
        rest->next = b->next;
        if (b->next)
            b->next->prev = rest;
        b->next = rest;
        b->size = mapped;
        if (alloc_blockset_insert(&p->unmapped, rest))
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    }
    try_merge(a, b, b->prev);
    try_merge(a, b, b->next);
    if (pool_insert(p, b))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    a->total_allocated += mapped;
    pool_inc(a->stats.reserved_bytes, p, mapped);
    a->stats.num_device_alloc++;
    emit(a, GM_ALLOC_EV_SEGMENT_MAP, end - mapped, mapped, b->stream);
    *out = b;
    return GM_OK;
}

/* unmap_block(): give back the whole pages inside the free mapped block 'b'. */
static enum gm_status unmap_block(struct gm_alloc *a, struct block *b, struct block **out)
{
    struct xseg *xs = b->xseg;
    struct alloc_pool *p = b->pool;
    uint64_t lo = page_ceil(xs, b->addr);
    uint64_t hi = page_floor(xs, b->addr + b->size);
    struct block *before = NULL, *after = NULL;

    *out = b;
    if (lo >= hi || lo < b->addr)
        return GM_OK;
    if (blockset_reserve(&p->blocks, 2) || blockset_reserve(&p->unmapped, 1))
        return GM_ERR_NOMEM;
    if (lo > b->addr) {
        before = block_new(a, b->addr, lo - b->addr, b->stream, p, xs);
        if (!before)
            return GM_ERR_NOMEM;
    }
    if (b->addr + b->size > hi) {
        after = block_new(a, hi, b->addr + b->size - hi, b->stream, p, xs);
        if (!after) {
            block_drop(a, before);
            return GM_ERR_NOMEM;
        }
    }
    alloc_blockset_erase(&p->blocks, b);
    if (before) {
        before->prev = b->prev;
        before->next = b;
        if (b->prev)
            b->prev->next = before;
        b->prev = before;
        if (pool_insert(p, before))
            return GM_ERR_NOMEM;
    }
    if (after) {
        after->prev = b;
        after->next = b->next;
        if (b->next)
            b->next->prev = after;
        b->next = after;
        if (pool_insert(p, after))
            return GM_ERR_NOMEM;
    }
    a->dev.ops->unmap(a->dev.ctx, lo, hi - lo);
    memset(xs->mapped + (size_t)((lo - xs->base) / xs->page), 0, (size_t)((hi - lo) / xs->page));
    b->addr = lo;
    b->size = hi - lo;
    b->mapped = false;
    try_merge(a, b, b->prev);
    try_merge(a, b, b->next);
    if (alloc_blockset_insert(&p->unmapped, b))
        return GM_ERR_NOMEM;
    a->total_allocated -= hi - lo;
    pool_dec(a->stats.reserved_bytes, p, hi - lo);
    a->stats.num_device_free++;
    emit(a, GM_ALLOC_EV_SEGMENT_UNMAP, lo, hi - lo, b->stream);
    return GM_OK;
}

/* release_expandable_segment(): the segment is one unmapped block; drop it */
static void release_xseg(struct gm_alloc *a, struct block *b)
{
    struct xseg *xs = b->xseg, **pp;
    alloc_blockset_erase(&b->pool->unmapped, b);
    a->dev.ops->va_release(a->dev.ctx, xs->base, (uint64_t)xs->n_pages * xs->page);
    for (pp = &a->xsegs; *pp; pp = &(*pp)->next_seg)
        if (*pp == xs) {
            *pp = xs->next_seg;
            break;
        }
    gm_free(xs->mapped);
    gm_free(xs);
    block_drop(a, b);
    a->n_xsegs--;
}

/* release_blocks(pool): free every unsplit cudaMalloc block, unmap every free page */
static enum gm_status release_blocks(struct gm_alloc *a, struct alloc_pool *p)
{
    size_t n = p->blocks.n, n_unmap = 0;
    struct block **v, *b;
    enum gm_status st = GM_OK;
    if (!n)
        return GM_OK;
    v = gm_malloc(n * sizeof(*v));
    if (!v)
        return GM_ERR_NOMEM;
    n = 0;
    for (struct blockset_pos it = blockset_first(&p->blocks);
         (b = blockset_at(&p->blocks, it)) != NULL; blockset_next(&p->blocks, &it))
        v[n++] = b;
    for (size_t i = 0; i < n; i++) {
        b = v[i];
        if (b->xseg)
            v[n_unmap++] = b; /* unmapping changes the pool: gather first */
        else if (!is_split(b))
            release_block(a, b);
    }
    for (size_t i = 0; i < n_unmap && st == GM_OK; i++) {
        st = unmap_block(a, v[i], &b);
        if (st == GM_OK && !is_split(b) && !b->mapped)
            release_xseg(a, b);
    }
    gm_free(v);
    return st;
}

static enum gm_status free_block(struct gm_alloc *a, struct block *b);

/* process_events() ('all' false: the blocks whose events are all complete return to their
 * pools) and synchronize_and_free_events() ('all' true: every event is waited for). */
static enum gm_status process_events(struct gm_alloc *a, bool all)
{
    size_t keep = 0;
    for (size_t i = 0; i < a->n_events; i++) {
        struct alloc_event *ev = &a->events[i];
        struct block *b = ev->b;
        if (!all && !ev->done) {
            a->events[keep++] = *ev;
            continue;
        }
        if (b->event_count == 1) {
            if (blockset_reserve(&b->pool->blocks, 1)) {
                memmove(&a->events[keep], ev, (a->n_events - i) * sizeof(*ev));
                a->n_events = keep + (a->n_events - i);
                return GM_ERR_NOMEM;
            }
            b->event_count = 0;
            a->n_pending--;
            a->pending_bytes -= b->size;
            if (free_block(a, b) != GM_OK)
                return GM_ERR_NOMEM; /* cannot happen: reserved above */
        } else {
            b->event_count--;
        }
    }
    a->n_events = keep;
    return GM_OK;
}

/* release_cached_blocks(): what empty_cache() does */
static enum gm_status release_cached(struct gm_alloc *a)
{
    enum gm_status st = process_events(a, true);
    if (st == GM_OK)
        st = release_blocks(a, &a->large);
    if (st == GM_OK)
        st = release_blocks(a, &a->small);
    return st;
}

void gm_alloc_empty_cache(struct gm_alloc *a)
{
    (void)release_cached(a);
}

/* ---- malloc --------------------------------------------------------------------------- */

static uint64_t expandable_size(const struct block *b)
{
    return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
}

/* get_free_block(): best fit by (stream, size, address), with the oversize rules; the
 * block stays in the pool's set, at *at, for alloc_found() to take out */
static struct block *get_free_block(struct gm_alloc *a, struct alloc_pool *p, uint64_t size,
                                    int64_t stream, struct blockset_pos *at)
{
    struct blockset_ent key = blockset_key(&p->blocks, stream, size, 0);
    struct blockset_pos i;
    struct block *b;
    if (a->set_fraction && a->conf.garbage_collection_threshold > 0.0)
        p->free_block_calls++;
    i = set_seek(&p->blocks, &key);
    b = blockset_at(&p->blocks, i);
    if (!b || b->stream != stream)
        return NULL;
    if (b->xseg && a->conf.expandable_segments) {
        /* prefer a block that cannot grow: a block followed by unmapped space counts as
         * the size it can expand to */
        while (b->xseg) {
            struct blockset_pos j = i;
            struct block *nx;
            blockset_next(&p->blocks, &j);
            nx = blockset_at(&p->blocks, j);
            if (!nx || nx->stream != stream || expandable_size(nx) >= expandable_size(b))
                break;
            i = j;
            b = nx;
        }
    }
    if (size < a->conf.max_split_size && b->size >= a->conf.max_split_size)
        return NULL;
    if (size >= a->conf.max_split_size &&
        b->size >= gm_add_sat(size, a->conf.max_non_split_rounding_size))
        return NULL;
    *at = i;
    return b;
}

/* garbage_collect_cached_blocks(): free old unsplit large blocks until reserved is back
 * under threshold * allowed */
static void garbage_collect(struct gm_alloc *a)
{
    struct alloc_pool *p = &a->large;
    uint64_t threshold = (uint64_t)(a->conf.garbage_collection_threshold * (double)a->allowed_max);
    uint64_t target, reclaimed = 0, total_age = 0;
    uint64_t freeable = 0;
    bool freed = true;
    struct block *b;

    if (a->total_allocated <= threshold)
        return;
    target = a->total_allocated - threshold;
    for (struct blockset_pos it = blockset_first(&p->blocks);
         (b = blockset_at(&p->blocks, it)) != NULL; blockset_next(&p->blocks, &it)) {
        if (is_split(b))
            continue;
        total_age += p->free_block_calls - b->gc_base;
        freeable++;
    }
    if (!freeable)
        return;
    while (reclaimed < target && freed && freeable > 0) {
        double age_threshold = (double)total_age / (double)freeable;
        struct blockset_pos i = blockset_first(&p->blocks);
        freed = false;
        while ((b = blockset_at(&p->blocks, i)) != NULL) {
            uint64_t age = p->free_block_calls - b->gc_base;
            if (!is_split(b) && !b->xseg && (double)age >= age_threshold) {
                struct blockset_ent key = block_key(&p->blocks, b);
                freed = true;
                reclaimed += b->size;
                total_age -= age;
                freeable--;
                release_block(a, b);
                i = alloc_blockset_lower_bound(&p->blocks, &key); /* the block after b */
            } else {
                blockset_next(&p->blocks, &i);
            }
        }
    }
}

/* a block find_expandable_block() may take: not handed out, and no other stream's work on it
 * still outstanding (a freed block waiting for its events is neither allocated nor free) */
static bool allocatable(const struct block *b)
{
    return b && !b->allocated && b->event_count == 0;
}

/* find_expandable_block(): the lowest-address run of free + unmapped space of this stream
 * that can hold 'size'; a new segment when none can */
static enum gm_status find_expandable(struct gm_alloc *a, struct alloc_pool *p, int64_t stream,
                                      uint64_t size, struct block **out, struct gm_error *err)
{
    struct blockset_ent key = blockset_key(&p->unmapped, stream, 0, 0);
    struct blockset_pos i;
    struct block *c;
    struct xseg *xs;
    uint64_t page = p->small ? GM_ALLOC_SMALL_BUFFER : GM_ALLOC_LARGE_BUFFER;
    uint64_t total = a->dev.total_bytes, va;
    enum gm_status st;

    for (i = alloc_blockset_lower_bound(&p->unmapped, &key);
         (c = blockset_at(&p->unmapped, i)) != NULL && c->stream == stream;
         blockset_next(&p->unmapped, &i)) {
        uint64_t bytes = 0;
        struct block *b;
        if (allocatable(c->prev))
            c = c->prev;
        for (b = c; bytes < size && allocatable(b); b = b->next)
            bytes += b->size;
        if (bytes >= size) {
            *out = c;
            return GM_OK;
        }
    }
    /* totalGlobalMem + totalGlobalMem / 8 of address space, in whole pages (ExpandableSegment:
     * max_handles_ = numSegments(total + total / 8), rounding up) */
    va = gm_add_sat(total, total / 8);
    if (va < size)
        va = size;
    xs = gm_calloc(1, sizeof(*xs));
    if (!xs)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    xs->page = page;
    xs->n_pages = (size_t)(va / page + (va % page != 0));
    xs->stream = stream;
    xs->pool = p;
    xs->mapped = gm_calloc(xs->n_pages, 1);
    c = xs->mapped ? block_new(a, 0, (uint64_t)xs->n_pages * page, stream, p, xs) : NULL;
    if (!c) {
        gm_free(xs->mapped);
        gm_free(xs);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    }
    st = a->dev.ops->va_reserve(a->dev.ctx, c->size, page, &xs->base, err);
    if (st) {
        block_drop(a, c);
        gm_free(xs->mapped);
        gm_free(xs);
        return st;
    }
    c->addr = xs->base;
    c->mapped = false;
    if (alloc_blockset_insert(&p->unmapped, c)) {
        a->dev.ops->va_release(a->dev.ctx, xs->base, c->size);
        block_drop(a, c);
        gm_free(xs->mapped);
        gm_free(xs);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    }
    xs->next_seg = a->xsegs;
    a->xsegs = xs;
    a->n_xsegs++;
    *out = c;
    return GM_OK;
}

/* try_allocate_expandable_block() */
static enum gm_status alloc_expandable(struct gm_alloc *a, struct alloc_pool *p, int64_t stream,
                                       uint64_t size, struct block **out, struct gm_error *err)
{
    struct block *c = NULL;
    enum gm_status st = find_expandable(a, p, stream, size, &c, err);
    if (st)
        return st;
    if (!c->mapped) {
        st = map_block(a, c, size < c->size ? size : c->size, &c, err);
        if (st)
            return st;
    }
    while (c->size < size) {
        /* invariant: free mapped block -> unmapped block -> ... */
        uint64_t remaining = size - c->size;
        struct block *next = c->next;
        st = map_block(a, next, remaining < next->size ? remaining : next->size, &c, err);
        if (st)
            return st;
    }
    alloc_blockset_erase(&p->blocks, c);
    *out = c;
    return GM_OK;
}

/* alloc_block(): a new segment (or new pages) for a request of rounded size 'size' */
static enum gm_status alloc_block(struct gm_alloc *a, struct alloc_pool *p, int64_t stream,
                                  uint64_t size, uint64_t alloc_size, bool retry,
                                  struct block **out, struct gm_error *err)
{
    uint64_t addr;
    struct block *b;
    enum gm_status st;
    if (retry)
        a->stats.num_alloc_retries++;
    if (a->set_fraction && gm_add_sat(a->total_allocated, alloc_size) > a->allowed_max)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "over the memory fraction");
    if (a->conf.expandable_segments)
        return alloc_expandable(a, p, stream, size, out, err);
    st = a->dev.ops->seg_alloc(a->dev.ctx, alloc_size, &addr, err);
    if (st)
        return st;
    b = block_new(a, addr, alloc_size, stream, p, NULL);
    if (!b) {
        a->dev.ops->seg_free(a->dev.ctx, addr, alloc_size);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    }
    a->total_allocated += alloc_size;
    pool_inc(a->stats.segment, p, 1);
    pool_inc(a->stats.reserved_bytes, p, alloc_size);
    a->stats.num_device_alloc++;
    if (alloc_size >= a->conf.max_split_size)
        stat_inc(&a->stats.oversize_segments, 1);
    a->n_segments++;
    emit(a, GM_ALLOC_EV_SEGMENT_ALLOC, addr, alloc_size, stream);
    *out = b;
    return GM_OK;
}

/* release_available_cached_blocks(): with a split limit, free oversize cached blocks */
static bool release_available(struct gm_alloc *a, struct alloc_pool *p, int64_t stream,
                              uint64_t size)
{
    uint64_t want, released = 0;
    struct blockset_ent key;
    struct blockset_pos i;
    struct block *b;
    if (a->conf.max_split_size == GM_ALLOC_NO_SPLIT_LIMIT)
        return false;
    want = size < a->conf.max_split_size ? a->conf.max_split_size : size;
    key = blockset_key(&p->blocks, stream, want, 0);
    i = alloc_blockset_lower_bound(&p->blocks, &key);
    b = blockset_at(&p->blocks, i);
    if (b && b->stream == stream && !b->xseg && !is_split(b)) {
        release_block(a, b);
        return true;
    }
    /* no single block is large enough: free oversize blocks, largest first */
    while (released < want && blockset_prev(&p->blocks, &i)) {
        b = blockset_at(&p->blocks, i);
        if (b->size < a->conf.max_split_size || b->stream != stream)
            break;
        if (!b->xseg && !is_split(b)) {
            key = block_key(&p->blocks, b);
            released += b->size;
            release_block(a, b);
            i = alloc_blockset_lower_bound(&p->blocks, &key); /* the block after b */
        }
    }
    return released >= want;
}

static bool should_split(const struct gm_alloc *a, const struct block *b, uint64_t size)
{
    uint64_t remaining = b->size - size;
    if (b->pool->small || a->conf.expandable_segments)
        return remaining >= GM_ALLOC_MIN_BLOCK;
    return size < a->conf.max_split_size && remaining > GM_ALLOC_SMALL_SIZE;
}

/* alloc_found_block(): split if wanted, mark allocated, count; 'at' is b's place in its
 * pool's free blocks (get_free_block()), NULL when it is in none (a new segment) */
static enum gm_status alloc_found(struct gm_alloc *a, struct block *b,
                                  const struct blockset_pos *at, uint64_t size, uint64_t orig,
                                  struct block **out, struct gm_error *err)
{
    struct alloc_pool *p = b->pool;
    bool already_split = is_split(b);
    if (should_split(a, b, size)) {
        struct block *rest = b;
        b = block_new(a, rest->addr, size, rest->stream, p, rest->xseg);
        if (!b) {
            if (!at)
                (void)pool_insert(p, rest);
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
        }
        b->prev = rest->prev;
        if (b->prev)
            b->prev->next = b;
        b->next = rest;
        rest->prev = b;
        rest->addr += size;
        rest->size -= size;
        /* the remainder stays among the free blocks under its new key */
        if (at ? pool_replace(p, at, rest, rest) : pool_insert(p, rest))
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
        if (!a->lean && !b->xseg) {
            if (already_split) {
                pool_dec(a->stats.inactive_split_bytes, p, b->size);
            } else {
                pool_inc(a->stats.inactive_split_bytes, p, rest->size);
                pool_inc(a->stats.inactive_split, p, 1);
            }
        }
    } else {
        if (at)
            alloc_blockset_erase_at(&p->blocks, *at);
        if (already_split && !b->xseg && !a->lean) {
            pool_dec(a->stats.inactive_split_bytes, p, b->size);
            pool_dec(a->stats.inactive_split, p, 1);
        }
    }
    b->allocated = true;
    b->requested = orig;
    if (!a->lean && !gm_map_put(&a->active, b->addr, (uintptr_t)b))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    live_add(a, b);
    alloc_bytes_inc(a, p, b->size);
    if (!a->lean) {
        pool_inc(a->stats.allocation, p, 1);
        pool_inc(a->stats.active, p, 1);
        pool_inc(a->stats.active_bytes, p, b->size);
        pool_inc(a->stats.requested_bytes, p, orig);
        if (b->size >= a->conf.max_split_size)
            stat_inc(&a->stats.oversize_allocations, 1);
    }
    *out = b;
    return GM_OK;
}

static uint64_t cached_unallocated(const struct gm_alloc *a)
{
    const struct gm_alloc_stats *s = &a->stats;
    uint64_t r = s->reserved_bytes[GM_ALLOC_STAT_ALL].current;
    uint64_t al = s->allocated_bytes[GM_ALLOC_STAT_ALL].current;
    return r > al ? r - al : 0;
}

/* malloc(orig) on 'stream': *out gets the block (NULL for size 0) */
static enum gm_status malloc_block(struct gm_alloc *a, uint64_t orig, int64_t stream,
                                   struct block **out, struct gm_error *err)
{
    uint64_t size, alloc_size;
    struct alloc_pool *p;
    struct block *b;
    struct blockset_pos at;
    enum gm_status st;
    struct gm_error e2;

    *out = NULL;
    if (orig == 0)
        return GM_OK;
    if (a->n_events && process_events(a, false))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    size = gm_alloc_round_size(&a->conf, orig);
    p = size <= GM_ALLOC_SMALL_SIZE ? &a->small : &a->large;
    /* room for the remainder of a split and the new allocation: once a block is taken
     * from the pool, nothing below may fail half-way (the unmapped ranges take inserts
     * only with expandable segments: find_expandable()) */
    if (blockset_reserve(&p->blocks, 2) ||
        (a->conf.expandable_segments && blockset_reserve(&p->unmapped, 2)) ||
        (!a->lean && !active_reserve(a)))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    b = get_free_block(a, p, size, stream, &at);
    if (b) {
        st = alloc_found(a, b, &at, size, orig, &b, err);
    } else {
        alloc_size = gm_alloc_segment_size(size);
        if (a->set_fraction && a->conf.garbage_collection_threshold > 0.0)
            garbage_collect(a);
        st = alloc_block(a, p, stream, size, alloc_size, false, &b, &e2);
        if (st == GM_ERR_LIMIT && release_available(a, p, stream, size))
            st = alloc_block(a, p, stream, size, alloc_size, false, &b, &e2);
        if (st == GM_ERR_LIMIT) {
            st = release_cached(a);
            if (st == GM_OK)
                st = alloc_block(a, p, stream, size, alloc_size, true, &b, &e2);
        }
        if (st == GM_ERR_LIMIT) {
            char t[32], al[32], fr[32];
            a->stats.num_ooms++;
            emit(a, GM_ALLOC_EV_OOM, 0, orig, stream);
            return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET,
                           "cuda out of memory: tried to allocate %s; %s allocated by the "
                           "model, %s reserved but unallocated",
                           gm_format_bytes(t, sizeof(t), alloc_size, GM_UNITS_IEC),
                           gm_format_bytes(al, sizeof(al),
                                           a->stats.allocated_bytes[GM_ALLOC_STAT_ALL].current,
                                           GM_UNITS_IEC),
                           gm_format_bytes(fr, sizeof(fr), cached_unallocated(a), GM_UNITS_IEC));
        }
        if (st) {
            if (err)
                *err = e2;
            return st;
        }
        st = alloc_found(a, b, NULL, size, orig, &b, err);
    }
    if (st)
        return st;
    *out = b;
    return GM_OK;
}

enum gm_status gm_alloc_malloc(struct gm_alloc *a, uint64_t size, int64_t stream, uint64_t *ptr,
                               struct gm_error *err)
{
    struct block *b;
    enum gm_status st = malloc_block(a, size, stream, &b, err);
    *ptr = b ? b->addr : 0;
    return st;
}

enum gm_status gm_alloc_malloc_block(struct gm_alloc *a, uint64_t size, int64_t stream,
                                     uint64_t *ptr, struct gm_alloc_block **blk,
                                     struct gm_error *err)
{
    struct block *b;
    enum gm_status st = malloc_block(a, size, stream, &b, err);
    *ptr = b ? b->addr : 0;
    *blk = (struct gm_alloc_block *)b;
    return st;
}

/* ---- a segment as a late trace found it ------------------------------------------------ */

/* The first 'len' bytes of the free block 'b' as a block of their own, before it. */
static struct block *split_front(struct gm_alloc *a, struct block *b, uint64_t len)
{
    struct block *f = block_new(a, b->addr, len, b->stream, b->pool, NULL);
    if (!f)
        return NULL;
    f->prev = b->prev;
    if (f->prev)
        f->prev->next = f;
    f->next = b;
    b->prev = f;
    b->addr += len;
    b->size -= len;
    return f;
}

/* Count free block 'b' of a segment into its pool (as free_block() leaves one). */
static enum gm_status seed_free(struct gm_alloc *a, struct block *b)
{
    struct alloc_pool *p = b->pool;
    if (blockset_reserve(&p->blocks, 1) || pool_insert(p, b))
        return GM_ERR_NOMEM;
    if (is_split(b)) {
        pool_inc(a->stats.inactive_split, p, 1);
        pool_inc(a->stats.inactive_split_bytes, p, b->size);
    }
    return GM_OK;
}

enum gm_status alloc_seed_segment(struct gm_alloc *a, bool small, uint64_t size, int64_t stream,
                                  const struct alloc_seed_block *blocks, size_t n, uint64_t *ptrs,
                                  struct gm_error *err)
{
    struct alloc_pool *p = small ? &a->small : &a->large;
    struct block *head, *cur, *b;
    uint64_t base;
    enum gm_status st;
    if (a->conf.expandable_segments)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "allocator model: expandable segments are not seeded block by block");
    st = alloc_block(a, p, stream, size, size, false, &head, err);
    if (st)
        return st;
    base = head->addr;
    cur = head; /* the free rest of the segment, not in the pool yet */
    for (size_t i = 0; i < n && cur; i++) {
        uint64_t at = base + blocks[i].offset, len = blocks[i].size;
        ptrs[i] = 0;
        if (at < cur->addr || len == 0 || len > cur->size || at - cur->addr > cur->size - len)
            continue; /* overlaps one placed before, or runs past the segment */
        if (at > cur->addr && !split_front(a, cur, at - cur->addr))
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
        b = cur;
        if (len < cur->size) {
            if (!(b = split_front(a, cur, len)))
                return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
        } else {
            cur = NULL;
        }
        if (!active_reserve(a))
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
        b->allocated = true;
        b->requested = blocks[i].requested;
        if (!a->lean)
            (void)gm_map_put(&a->active, b->addr, (uintptr_t)b);
        live_add(a, b);
        pool_inc(a->stats.allocation, p, 1);
        pool_inc(a->stats.allocated_bytes, p, b->size);
        pool_inc(a->stats.active, p, 1);
        pool_inc(a->stats.active_bytes, p, b->size);
        pool_inc(a->stats.requested_bytes, p, b->requested);
        if (b->size >= a->conf.max_split_size)
            stat_inc(&a->stats.oversize_allocations, 1);
        ptrs[i] = b->addr;
    }
    while (head->prev)
        head = head->prev;
    for (b = head; b; b = b->next)
        if (!b->allocated && seed_free(a, b) != GM_OK)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    return GM_OK;
}

/* ---- free ----------------------------------------------------------------------------- */

static enum gm_status events_reserve(struct gm_alloc *a, size_t extra)
{
    return GM_VEC_RESERVE(a->events, a->cap_events, a->n_events + extra, NULL) ? GM_OK
                                                                               : GM_ERR_NOMEM;
}

/* free_block(): merge with free neighbours and return to the pool */
static enum gm_status free_block(struct gm_alloc *a, struct block *b)
{
    struct alloc_pool *p = b->pool;
    uint64_t orig_size = b->size, requested = b->requested;
    int64_t d_blocks = 0, d_bytes = 0;
    struct block *cand[2] = {b->prev, b->next}, *spot = NULL;
    bool merge[2];
    for (int i = 0; i < 2; i++)
        merge[i] = mergeable(b, cand[i]);
    /* b takes the place among the free blocks of a neighbour it absorbs (of two, the later
     * in their order, whose place is nearer b's), the other leaves them */
    if (b->mapped && (merge[0] || merge[1]))
        spot = !merge[1] || (merge[0] &&
                             (cand[0]->size > cand[1]->size ||
                              (cand[0]->size == cand[1]->size && cand[0]->addr > cand[1]->addr)))
                   ? cand[0]
                   : cand[1];
    for (int i = 0; i < 2; i++) {
        uint64_t sub = merge[i] ? absorb(a, b, cand[i], cand[i] == spot) : 0;
        if (sub) {
            d_blocks -= 1;
            d_bytes -= (int64_t)sub;
        }
    }
    if (spot) {
        /* spot is free, mapped, with no event pending: among its pool's free blocks, in its
         * stream's tree (the segment's) */
        struct blockset_pos at = {tree_index(&p->blocks, (uint64_t)spot->stream), {NULL, 0}};
        enum gm_status st;
        if (at.t < p->blocks.n_trees && p->blocks.trees[at.t].stream == (uint64_t)spot->stream)
            at.p = gm_btree_find_held(&p->blocks.trees[at.t].t, spot);
        /* the premise above, checked in a debug build: what spot's home finds is in the tree
         * of spot's stream (gm_btree_find() looks for the leaf's tree), not another's */
        assert(!at.p.leaf || gm_btree_find(&p->blocks.trees[at.t].t, spot).leaf == at.p.leaf);
        st = pool_replace(p, at.p.leaf ? &at : NULL, spot, b);
        block_drop(a, spot);
        if (st)
            return GM_ERR_NOMEM;
    } else if (pool_insert(p, b)) {
        return GM_ERR_NOMEM;
    }
    if (is_split(b)) {
        d_blocks += 1;
        d_bytes += (int64_t)b->size;
    }
    if (a->lean)
        return GM_OK;
    if (!b->xseg) {
        if (d_blocks > 0)
            pool_inc(a->stats.inactive_split, p, (uint64_t)d_blocks);
        else if (d_blocks < 0)
            pool_dec(a->stats.inactive_split, p, (uint64_t)-d_blocks);
        if (d_bytes > 0)
            pool_inc(a->stats.inactive_split_bytes, p, (uint64_t)d_bytes);
        else if (d_bytes < 0)
            pool_dec(a->stats.inactive_split_bytes, p, (uint64_t)-d_bytes);
    }
    pool_dec(a->stats.active, p, 1);
    pool_dec(a->stats.active_bytes, p, orig_size);
    pool_dec(a->stats.requested_bytes, p, requested);
    return GM_OK;
}

/* free(): the allocated block 'b' */
static enum gm_status dealloc(struct gm_alloc *a, struct block *b, struct gm_error *err)
{
    if (blockset_reserve(&b->pool->blocks, 1) || events_reserve(a, b->n_uses))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    if (!a->lean)
        (void)gm_map_take(&a->active, b->addr, NULL);
    live_remove(a, b);
    b->allocated = false;
    alloc_bytes_dec(a, b->pool, b->size);
    if (!a->lean) {
        pool_dec(a->stats.allocation, b->pool, 1);
        if (b->size >= a->conf.max_split_size)
            stat_dec(&a->stats.oversize_allocations, 1);
    }
    if (b->n_uses) {
        /* insert_events(): one event per stream that used the block; the block stays
         * active (and out of its pool) until they are complete */
        for (size_t i = 0; i < b->n_uses; i++) {
            struct alloc_event *ev = &a->events[a->n_events++];
            ev->stream = b->uses[i];
            ev->seq = ++a->event_seq;
            ev->b = b;
            ev->done = false;
        }
        b->event_count = (uint32_t)b->n_uses;
        a->n_pending++;
        a->pending_bytes += b->size;
        gm_free(b->uses);
        b->uses = NULL;
        b->n_uses = 0;
        return GM_OK;
    }
    if (free_block(a, b))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    return GM_OK;
}

enum gm_status gm_alloc_dealloc(struct gm_alloc *a, uint64_t ptr, struct gm_error *err)
{
    struct block *b;
    if (ptr == 0)
        return GM_OK;
    if (!(b = active_block(a, ptr)))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "free: 0x%llx is not an allocated block",
                       (unsigned long long)ptr);
    return dealloc(a, b, err);
}

enum gm_status gm_alloc_dealloc_block(struct gm_alloc *a, struct gm_alloc_block *blk,
                                      struct gm_error *err)
{
    struct block *b = (struct block *)blk;
    if (!b)
        return GM_OK;
    if (!b->allocated) /* freed before: refused before anything changes */
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "free: the block is not allocated");
    return dealloc(a, b, err);
}

/* recordStream(): 'stream' used the allocated block 'b' */
static enum gm_status record_stream(struct block *b, int64_t stream, struct gm_error *err)
{
    int64_t *uses;
    if (stream == b->stream) /* uses on the allocation stream need no event */
        return GM_OK;
    for (size_t i = 0; i < b->n_uses; i++)
        if (b->uses[i] == stream)
            return GM_OK;
    if (b->n_uses >= UINT32_MAX || !(uses = gm_realloc(b->uses, (b->n_uses + 1) * sizeof(*uses))))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    uses[b->n_uses++] = stream;
    b->uses = uses;
    return GM_OK;
}

enum gm_status gm_alloc_record_stream(struct gm_alloc *a, uint64_t ptr, int64_t stream,
                                      struct gm_error *err)
{
    struct block *b = ptr ? active_block(a, ptr) : NULL;
    if (!b)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "record_stream: 0x%llx is not an allocated block", (unsigned long long)ptr);
    return record_stream(b, stream, err);
}

enum gm_status gm_alloc_record_stream_block(struct gm_alloc *a, struct gm_alloc_block *blk,
                                            int64_t stream, struct gm_error *err)
{
    struct block *b = (struct block *)blk;
    (void)a;
    if (!b || !b->allocated)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "record_stream: the block is not allocated");
    return record_stream(b, stream, err);
}

uint64_t gm_alloc_stream_mark(const struct gm_alloc *a)
{
    return a->event_seq;
}

void gm_alloc_stream_passed(struct gm_alloc *a, int64_t stream, uint64_t mark)
{
    for (size_t i = 0; i < a->n_events; i++)
        if (a->events[i].stream == stream && a->events[i].seq <= mark)
            a->events[i].done = true;
}

size_t gm_alloc_pending_blocks(const struct gm_alloc *a, uint64_t *bytes)
{
    if (bytes)
        *bytes = a->pending_bytes;
    return a->n_pending;
}

uint64_t gm_alloc_block_size(const struct gm_alloc *a, uint64_t ptr)
{
    const struct block *b = active_block(a, ptr);
    return b ? b->size : 0;
}

/* ---- lifecycle and stats -------------------------------------------------------------- */

/* what gm_alloc_new() refuses */
static enum gm_status check_new(const struct gm_alloc_conf *conf, const struct gm_alloc_device *dev,
                                struct gm_error *err)
{
    if (!dev || !dev->ops || !dev->ops->seg_alloc || !dev->ops->seg_free)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "allocator model: no device");
    if (conf->backend == GM_ALLOC_BACKEND_CUDA_MALLOC_ASYNC)
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "allocator model: backend:cudaMallocAsync is not modelled (the driver's "
                       "stream-ordered pool has other rules)");
    if (conf->expandable_segments &&
        (!dev->ops->va_reserve || !dev->ops->va_release || !dev->ops->map || !dev->ops->unmap))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "allocator model: expandable_segments needs a device with virtual "
                       "memory management");
    return GM_OK;
}

/* a new model's fields, over zeroed memory */
static void init_fields(struct gm_alloc *a, const struct gm_alloc_conf *conf,
                        const struct gm_alloc_device *dev)
{
    a->conf = *conf;
    a->dev = *dev;
    a->small.small = true;
    a->stats.max_split_size = conf->max_split_size;
}

enum gm_status gm_alloc_new(const struct gm_alloc_conf *conf, const struct gm_alloc_device *dev,
                            struct gm_alloc **out, struct gm_error *err)
{
    struct gm_alloc *a;
    enum gm_status st;
    *out = NULL;
    if ((st = check_new(conf, dev, err)) != GM_OK)
        return st;
    a = gm_calloc(1, sizeof(*a));
    if (!a)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    alloc_blockset_init(&a->large.blocks, true);
    alloc_blockset_init(&a->large.unmapped, false);
    alloc_blockset_init(&a->small.blocks, true);
    alloc_blockset_init(&a->small.unmapped, false);
    a->records = (struct gm_slab)GM_SLAB_INIT(struct block, BLOCK_SLAB);
    init_fields(a, conf, dev);
    *out = a;
    return GM_OK;
}

enum gm_status gm_alloc_set_memory_fraction(struct gm_alloc *a, double fraction,
                                            struct gm_error *err)
{
    if (!(fraction > 0.0 && fraction <= 1.0))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "memory fraction %g is out of range (0, 1]", fraction);
    if (!a->dev.total_bytes)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "memory fraction: the device's total memory is unknown");
    a->set_fraction = true;
    a->allowed_max = (uint64_t)(fraction * (double)a->dev.total_bytes);
    return GM_OK;
}

enum gm_status gm_alloc_set_lean(struct gm_alloc *a, struct gm_error *err)
{
    if (a->n_live) /* their addresses would no longer find them */
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "allocator model: lean counting is set before the first request");
    a->lean = true;
    gm_map_clear(&a->active); /* no address finds a block any more */
    return GM_OK;
}

void gm_alloc_set_event_hook(struct gm_alloc *a, gm_alloc_event_fn fn, void *ctx)
{
    a->hook = fn;
    a->hook_ctx = ctx;
}

static uint64_t chain_size(const struct block *h)
{
    uint64_t total = 0;
    for (; h; h = h->next)
        total += h->size;
    return total;
}

/* whether event i is its block's first (a block used on several streams has several) */
static bool first_event(const struct gm_alloc *a, size_t i)
{
    for (size_t k = 0; k < i; k++)
        if (a->events[k].b == a->events[i].b)
            return false;
    return true;
}

/* drop the set's blocks; release its memory too unless 'keep' */
static void free_set(struct gm_alloc *a, struct blockset *s, bool keep)
{
    struct block *b;
    for (struct blockset_pos it = blockset_first(s); (b = blockset_at(s, it)) != NULL;
         blockset_next(s, &it))
        block_drop(a, b);
    if (keep)
        alloc_blockset_clear(s);
    else
        alloc_blockset_release(s);
}

/* Give every segment back to the device and drop every block; 'keep': hold on to the memory
 * of the bookkeeping (block records, set nodes, map slots, the event array) for the model's
 * next run (gm_alloc_reset()), else release it all but 'a' itself. */
static void teardown(struct gm_alloc *a, bool keep)
{
    struct alloc_pool *pools[2];
    pools[0] = &a->large;
    pools[1] = &a->small;
    /* give cudaMalloc segments back: walk each segment from its head */
    for (int k = 0; k < 2; k++) {
        struct block *h, *b;
        for (struct blockset_pos it = blockset_first(&pools[k]->blocks);
             (h = blockset_at(&pools[k]->blocks, it)) != NULL;
             blockset_next(&pools[k]->blocks, &it)) {
            uint64_t total = 0;
            if (h->xseg || h->prev)
                continue;
            for (b = h; b; b = b->next)
                total += b->size;
            a->dev.ops->seg_free(a->dev.ctx, h->addr, total);
        }
    }
    for (struct block *h = a->live, *b; h; h = h->live_next) {
        uint64_t total = 0;
        if (h->xseg || h->prev)
            continue;
        for (b = h; b; b = b->next)
            total += b->size;
        a->dev.ops->seg_free(a->dev.ctx, h->addr, total);
    }
    /* blocks freed with events outstanding: their segments first (a chain may pass through
     * other such blocks), then each block once, at its last event */
    for (size_t i = 0; i < a->n_events; i++) {
        const struct block *h = a->events[i].b;
        if (first_event(a, i) && !h->xseg && !h->prev)
            a->dev.ops->seg_free(a->dev.ctx, h->addr, chain_size(h));
    }
    for (size_t i = 0; i < a->n_events; i++)
        if (--a->events[i].b->event_count == 0)
            block_drop(a, a->events[i].b);
    a->n_events = 0;
    if (!keep) {
        gm_free(a->events);
        a->events = NULL;
        a->cap_events = 0;
    }
    while (a->xsegs) {
        struct xseg *xs = a->xsegs;
        for (size_t i = 0; i < xs->n_pages; i++)
            if (xs->mapped[i])
                a->dev.ops->unmap(a->dev.ctx, xs->base + (uint64_t)i * xs->page, xs->page);
        a->dev.ops->va_release(a->dev.ctx, xs->base, (uint64_t)xs->n_pages * xs->page);
        a->xsegs = xs->next_seg;
        gm_free(xs->mapped);
        gm_free(xs);
    }
    for (int k = 0; k < 2; k++) {
        free_set(a, &pools[k]->blocks, keep);
        free_set(a, &pools[k]->unmapped, keep);
    }
    for (struct block *b = a->live, *next; b; b = next) {
        next = b->live_next;
        gm_free(b->uses);
        block_drop(a, b);
    }
    a->live = NULL;
    a->n_live = 0;
    if (keep) {
        gm_map_clear(&a->active);
        return;
    }
    gm_map_release(&a->active);
    gm_slab_release(&a->records);
}

void gm_alloc_free(struct gm_alloc *a)
{
    if (!a)
        return;
    teardown(a, false);
    gm_free(a);
}

enum gm_status gm_alloc_reset(struct gm_alloc *a, const struct gm_alloc_conf *conf,
                              const struct gm_alloc_device *dev, struct gm_error *err)
{
    struct gm_map active;
    struct blockset sets[4];
    struct alloc_event *events;
    size_t cap_events;
    struct gm_slab records;
    enum gm_status st;
    if ((st = check_new(conf, dev, err)) != GM_OK)
        return st;
    teardown(a, true);
    /* what the bookkeeping holds, empty; everything else as gm_alloc_new() leaves it */
    active = a->active;
    sets[0] = a->large.blocks;
    sets[1] = a->large.unmapped;
    sets[2] = a->small.blocks;
    sets[3] = a->small.unmapped;
    events = a->events;
    cap_events = a->cap_events;
    records = a->records;
    memset(a, 0, sizeof(*a));
    a->active = active;
    a->large.blocks = sets[0];
    a->large.unmapped = sets[1];
    a->small.blocks = sets[2];
    a->small.unmapped = sets[3];
    a->events = events;
    a->cap_events = cap_events;
    a->records = records;
    init_fields(a, conf, dev);
    return GM_OK;
}

#define STATE_WORDS 5 /* words a block */

/* address, size, bytes requested (a free block keeps its last, which nothing reads),
 * stream, whether it is in the small pool, whether a block lies before it in its segment
 * and whether it is allocated.  The blocks of a segment tile it, so the one before is the
 * block that ends at its address: which it is needs no word (nor a read of its record). */
static uint64_t *state_block(uint64_t *w, const struct block *b)
{
    *w++ = b->addr;
    *w++ = b->size;
    *w++ = b->allocated ? b->requested : 0;
    *w++ = (uint64_t)b->stream;
    *w++ =
        (uint64_t)b->pool->small << 2 | (uint64_t)(b->prev != NULL) << 1 | (uint64_t)b->allocated;
    return w;
}

enum gm_status gm_alloc_state(const struct gm_alloc *a, uint64_t **words, size_t *n, size_t *cap,
                              struct gm_error *err)
{
    const struct blockset *sets[2] = {&a->large.blocks, &a->small.blocks};
    size_t n_blocks = a->n_live + sets[0]->n + sets[1]->n;
    struct block *b;
    uint64_t *w;
    *n = 0;
    if (a->conf.expandable_segments || a->n_events || a->n_pending ||
        (a->set_fraction && a->conf.garbage_collection_threshold > 0.0))
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "allocator model: a state with expandable segments, events or "
                       "garbage collection is not written as words");
    if (n_blocks > SIZE_MAX / STATE_WORDS ||
        !GM_VEC_RESERVE(*words, *cap, n_blocks * STATE_WORDS, NULL))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
    w = *words;
    /* the free blocks in their sets' order, the allocated ones most recently allocated
     * first: every block once with its segment neighbour, so equal words are equal states
     * (two equal states whose blocks were allocated in another order give other words) */
    for (int k = 0; k < 2; k++)
        for (struct blockset_pos it = blockset_first(sets[k]); (b = blockset_at(sets[k], it));
             blockset_next(sets[k], &it))
            w = state_block(w, b);
    for (b = a->live; b; b = b->live_next) {
        if (b->n_uses)
            return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                           "allocator model: a block used on another stream is not written "
                           "as words");
        w = state_block(w, b);
    }
    *n = (size_t)(w - *words);
    return GM_OK;
}

void gm_alloc_get_stats(const struct gm_alloc *a, struct gm_alloc_stats *out)
{
    *out = a->stats;
}

static void reset_peak(struct gm_alloc_stat *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        s[i].peak = s[i].current;
}

void gm_alloc_reset_peak(struct gm_alloc *a)
{
    struct gm_alloc_stats *s = &a->stats;
    reset_peak(s->allocation, GM_ALLOC_STAT_N);
    reset_peak(s->segment, GM_ALLOC_STAT_N);
    reset_peak(s->active, GM_ALLOC_STAT_N);
    reset_peak(s->inactive_split, GM_ALLOC_STAT_N);
    reset_peak(s->allocated_bytes, GM_ALLOC_STAT_N);
    reset_peak(s->reserved_bytes, GM_ALLOC_STAT_N);
    reset_peak(s->active_bytes, GM_ALLOC_STAT_N);
    reset_peak(s->inactive_split_bytes, GM_ALLOC_STAT_N);
    reset_peak(s->requested_bytes, GM_ALLOC_STAT_N);
    reset_peak(&s->oversize_allocations, 1);
    reset_peak(&s->oversize_segments, 1);
}

static void reset_acc(struct gm_alloc_stat *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        s[i].allocated = 0;
        s[i].freed = 0;
    }
}

void gm_alloc_reset_accumulated(struct gm_alloc *a)
{
    struct gm_alloc_stats *s = &a->stats;
    reset_acc(s->allocation, GM_ALLOC_STAT_N);
    reset_acc(s->segment, GM_ALLOC_STAT_N);
    reset_acc(s->active, GM_ALLOC_STAT_N);
    reset_acc(s->inactive_split, GM_ALLOC_STAT_N);
    reset_acc(s->allocated_bytes, GM_ALLOC_STAT_N);
    reset_acc(s->reserved_bytes, GM_ALLOC_STAT_N);
    reset_acc(s->active_bytes, GM_ALLOC_STAT_N);
    reset_acc(s->inactive_split_bytes, GM_ALLOC_STAT_N);
    reset_acc(s->requested_bytes, GM_ALLOC_STAT_N);
    reset_acc(&s->oversize_allocations, 1);
    reset_acc(&s->oversize_segments, 1);
    s->num_alloc_retries = 0;
    s->num_ooms = 0;
    s->num_sync_all_streams = 0;
    s->num_device_alloc = 0;
    s->num_device_free = 0;
}

size_t gm_alloc_segment_count(const struct gm_alloc *a)
{
    return a->n_segments + a->n_xsegs;
}

static size_t put_size(uint64_t *out, size_t cap, size_t n, uint64_t v)
{
    if (n < cap)
        out[n] = v;
    return n + 1;
}

size_t gm_alloc_segment_sizes(const struct gm_alloc *a, uint64_t *out, size_t cap)
{
    const struct alloc_pool *pools[2] = {&a->large, &a->small};
    size_t n = 0;
    /* cudaMalloc segments: walk from each head block, wherever the head is */
    for (int k = 0; k < 2; k++) {
        struct block *b;
        for (struct blockset_pos it = blockset_first(&pools[k]->blocks);
             (b = blockset_at(&pools[k]->blocks, it)) != NULL;
             blockset_next(&pools[k]->blocks, &it))
            if (!b->xseg && !b->prev)
                n = put_size(out, cap, n, chain_size(b));
    }
    for (const struct block *b = a->live; b; b = b->live_next)
        if (!b->xseg && !b->prev)
            n = put_size(out, cap, n, chain_size(b));
    for (size_t i = 0; i < a->n_events; i++) {
        const struct block *b = a->events[i].b;
        if (first_event(a, i) && !b->xseg && !b->prev)
            n = put_size(out, cap, n, chain_size(b));
    }
    /* expandable segments: one entry per run of mapped pages */
    for (const struct xseg *xs = a->xsegs; xs; xs = xs->next_seg) {
        uint64_t run = 0;
        for (size_t i = 0; i <= xs->n_pages; i++) {
            if (i < xs->n_pages && xs->mapped[i]) {
                run += xs->page;
            } else if (run) {
                n = put_size(out, cap, n, run);
                run = 0;
            }
        }
    }
    return n;
}

/* A head block (the lowest of its segment) to the list. */
static bool add_head(const struct block ***v, size_t *n, size_t *cap, const struct block *b)
{
    if (b->prev)
        return true;
    if (!GM_VEC_RESERVE(*v, *cap, *n + 1, NULL))
        return false;
    (*v)[(*n)++] = b;
    return true;
}

static int cmp_head(const void *pa, const void *pb)
{
    const struct block *a = *(const struct block *const *)pa, *b = *(const struct block *const *)pb;
    return a->addr < b->addr ? -1 : a->addr > b->addr;
}

static uint8_t block_state(const struct block *b)
{
    if (b->allocated)
        return GM_ALLOC_BLOCK_ACTIVE_ALLOCATED;
    return b->event_count ? GM_ALLOC_BLOCK_PENDING_FREE : GM_ALLOC_BLOCK_INACTIVE;
}

enum gm_status gm_alloc_segments(const struct gm_alloc *a, gm_alloc_segment_fn fn, void *ctx,
                                 struct gm_error *err)
{
    const struct alloc_pool *pools[2] = {&a->large, &a->small};
    const struct block **heads = NULL;
    struct gm_alloc_block_info *blocks = NULL;
    size_t n_heads = 0, cap_heads = 0, cap_blocks = 0;
    enum gm_status st = GM_OK;
    bool ok = true;

    /* every segment's head, wherever it is: a pool, the unmapped ranges, the allocated
     * blocks, the blocks waiting for their events */
    for (int k = 0; k < 2 && ok; k++) {
        const struct blockset *sets[2] = {&pools[k]->blocks, &pools[k]->unmapped};
        for (int j = 0; j < 2 && ok; j++) {
            struct block *b;
            for (struct blockset_pos it = blockset_first(sets[j]);
                 ok && (b = blockset_at(sets[j], it)) != NULL; blockset_next(sets[j], &it))
                ok = add_head(&heads, &n_heads, &cap_heads, b);
        }
    }
    for (const struct block *b = a->live; b && ok; b = b->live_next)
        ok = add_head(&heads, &n_heads, &cap_heads, b);
    for (size_t i = 0; i < a->n_events && ok; i++)
        if (first_event(a, i)) /* a block used on several streams has several */
            ok = add_head(&heads, &n_heads, &cap_heads, a->events[i].b);
    if (!ok) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
        goto out;
    }
    if (n_heads > 1)
        qsort(heads, n_heads, sizeof(*heads), cmp_head);
    for (size_t h = 0; h < n_heads && st == GM_OK; h++) {
        /* a cudaMalloc segment is one run; an expandable one a run per mapped range */
        const struct block *b = heads[h];
        while (b && st == GM_OK) {
            struct gm_alloc_segment_info seg;
            size_t n = 0;
            if (!b->mapped) {
                b = b->next;
                continue;
            }
            memset(&seg, 0, sizeof(seg));
            seg.addr = b->addr;
            seg.stream = b->stream;
            seg.is_small = b->pool->small;
            seg.is_expandable = b->xseg != NULL;
            for (; b && b->mapped; b = b->next) {
                if (!GM_VEC_RESERVE(blocks, cap_blocks, n + 1, NULL)) {
                    st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "allocator model: out of memory");
                    goto out;
                }
                blocks[n++] =
                    (struct gm_alloc_block_info){b->addr, b->size, b->requested, block_state(b)};
                seg.size += b->size;
            }
            seg.blocks = blocks;
            seg.n_blocks = n;
            st = fn(ctx, &seg, err);
        }
    }
out:
    gm_free(heads);
    gm_free(blocks);
    return st;
}

/* ---- the fake device -------------------------------------------------------------------- */

static bool fake_full(struct gm_alloc_fakedev *f, uint64_t size)
{
    if (f->fail_after && f->n_alloc >= f->fail_after)
        return true;
    return f->capacity && (size > f->capacity || f->used > f->capacity - size);
}

static uint64_t fake_take(struct gm_alloc_fakedev *f, uint64_t size)
{
    uint64_t addr = f->next_addr;
    /* keep every range 2 MiB aligned, with a gap, so neighbours never touch */
    f->next_addr += (size + (4u << 20) - 1) / (2u << 20) * (2u << 20);
    return addr;
}

static enum gm_status fake_seg_alloc(void *ctx, uint64_t size, uint64_t *addr, struct gm_error *err)
{
    struct gm_alloc_fakedev *f = ctx;
    if (fake_full(f, size))
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "fake device: out of memory");
    *addr = fake_take(f, size);
    f->used += size;
    if (f->used > f->peak_used)
        f->peak_used = f->used;
    f->n_alloc++;
    return GM_OK;
}

static void fake_seg_free(void *ctx, uint64_t addr, uint64_t size)
{
    struct gm_alloc_fakedev *f = ctx;
    (void)addr;
    f->used -= size <= f->used ? size : f->used;
    f->n_free++;
}

static enum gm_status fake_va_reserve(void *ctx, uint64_t size, uint64_t align, uint64_t *addr,
                                      struct gm_error *err)
{
    struct gm_alloc_fakedev *f = ctx;
    (void)err;
    if (align > 1)
        f->next_addr = (f->next_addr + align - 1) / align * align;
    *addr = fake_take(f, size);
    return GM_OK;
}

static void fake_va_release(void *ctx, uint64_t addr, uint64_t size)
{
    (void)ctx;
    (void)addr;
    (void)size;
}

static enum gm_status fake_map(void *ctx, uint64_t addr, uint64_t size, struct gm_error *err)
{
    struct gm_alloc_fakedev *f = ctx;
    (void)addr;
    if (fake_full(f, size))
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "fake device: out of memory");
    f->used += size;
    if (f->used > f->peak_used)
        f->peak_used = f->used;
    f->n_alloc++;
    return GM_OK;
}

const struct gm_alloc_device_ops gm_alloc_fakedev_ops = {
    fake_seg_alloc, fake_seg_free, fake_va_reserve, fake_va_release, fake_map, fake_seg_free,
};

void gm_alloc_fakedev_init(struct gm_alloc_fakedev *f, uint64_t capacity)
{
    memset(f, 0, sizeof(*f));
    f->capacity = capacity;
    f->next_addr = (uint64_t)1 << 40;
}
