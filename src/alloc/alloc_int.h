/* SPDX-License-Identifier: MIT */
/* alloc_int.h - internals of the caching-allocator model, shared by src/alloc/ and its
 * unit test.
 *
 * Invariants (as in DeviceCachingAllocator):
 * - every block belongs to exactly one of: its pool's 'blocks' (free, mapped), its pool's
 *   'unmapped' (free, no physical pages; expandable segments only), or the active map
 *   (allocated);
 * - the blocks of one segment form an address-ordered doubly linked list (prev/next) with
 *   no gaps; a block without prev and next is an unsplit segment;
 * - two neighbours that are both free and have the same 'mapped' state are always merged,
 *   except that a freshly split remainder next to an allocated block stays apart. */
#ifndef GM_ALLOC_ALLOC_INT_H
#define GM_ALLOC_ALLOC_INT_H

#include "base/btree.h"
#include "base/map.h"

#include "gpumem/alloc.h"
#include "gpumem/arena.h"

struct alloc_pool;
struct xseg;

struct block {
    uint64_t addr;      /* device address */
    uint64_t size;      /* bytes */
    uint64_t requested; /* bytes the caller asked for (allocated blocks) */
    int64_t stream;
    struct block *prev; /* lower-address neighbour in the same segment */
    struct block *next; /* higher-address neighbour */
    struct alloc_pool *pool;
    struct xseg *xseg;    /* the expandable segment, NULL for a cudaMalloc segment */
    uint64_t gc_base;     /* pool->free_block_calls when the block entered the pool */
    int64_t *uses;        /* record_stream(): streams other than 'stream' that used it */
    size_t n_uses;        /* (allocated blocks only; moved into events at free) */
    uint32_t event_count; /* end-of-life events not yet processed (freed, not reusable) */
    /* the leaf of the set that holds it, NULL in none */
    struct gm_btree_node *leaf;
    /* allocated blocks: the neighbours in the model's list of them (gm_alloc.live) */
    struct block *live_prev;
    struct block *live_next;
    bool allocated;
    bool mapped; /* false only for unmapped ranges of expandable segments */
};

/* An ordered set of blocks: std::set<Block*, Comparator> with lower_bound and in-order
 * neighbours.  Blocks order by stream (unsigned, like the pointers PyTorch compares), then
 * size (sets ordered by size), then address.  A set keeps one B+ tree (base/btree.h) per
 * stream, the trees by ascending stream, so a search compares two words, (size, address) or
 * (0, address), never the stream; a block knows its leaf, so it is erased without a search.
 * A stream's tree stays once made (a set sees a few streams), empty or not; the trees of a
 * set share its pool of nodes.  A set may not move once it holds a tree. */
struct blockset_ent {
    uint64_t stream; /* streams compare as unsigned, like the pointers PyTorch compares */
    uint64_t size;   /* 0 in a set ordered by (stream, addr) */
    uint64_t addr;
};

struct blockset_tree {
    uint64_t stream;
    struct gm_btree t; /* keys (size, addr), values the blocks */
};

struct blockset {
    struct gm_slab nodes;        /* of every tree of the set (GM_BTREE_POOL_INIT) */
    struct blockset_tree *trees; /* by ascending stream */
    size_t n_trees, cap_trees;
    size_t n;        /* elements */
    unsigned height; /* at least the height of every tree (what an insert may split) */
    bool by_size;    /* (stream, size, addr) when true, else (stream, addr) */
};

/* A position in a set: entry p of trees[t], never the end of a tree but the set's end:
 * t == n_trees.  Any insert or erase invalidates every position. */
struct blockset_pos {
    size_t t;
    struct gm_btree_pos p;
};

/* an empty set, ordered by (stream, size, addr) when 'by_size', else (stream, addr) */
void alloc_blockset_init(struct blockset *s, bool by_size);
/* the first element not less than 'key' */
struct blockset_pos alloc_blockset_lower_bound(const struct blockset *s,
                                               const struct blockset_ent *key);
/* the same through gm_btree_seek(): the best fit's search */
struct blockset_pos alloc_blockset_seek(struct blockset *s, const struct blockset_ent *key);
/* Room for 'extra' more inserts, so that the inserts of an operation cannot fail half-way
 * through it: every mutating operation reserves first. */
enum gm_status alloc_blockset_reserve_slow(struct blockset *s, size_t extra);
static inline enum gm_status blockset_reserve(struct blockset *s, size_t extra)
{
    if (s->nodes.n_spare >= gm_btree_insert_nodes(s->height, extra) &&
        s->n_trees + extra <= s->cap_trees)
        return GM_OK;
    return alloc_blockset_reserve_slow(s, extra);
}

enum gm_status alloc_blockset_insert(struct blockset *s, struct block *b);
/* false when 'b' is not in the set */
bool alloc_blockset_erase(struct blockset *s, const struct block *b);
/* erase the element at 'p', which must not be the end */
void alloc_blockset_erase_at(struct blockset *s, struct blockset_pos p);
/* Erase 'old' (at 'at' when not NULL, else found by its leaf) and insert 'b' (reserved
 * first): in old's place when the order keeps b there (gm_btree_replace_at()), as it often
 * does a split block's remainder or a block that absorbed its neighbour; 'b' may be 'old'. */
enum gm_status alloc_blockset_replace(struct blockset *s, const struct blockset_pos *at,
                                      const struct block *old, struct block *b);
/* empties the set (not its blocks), keeping its memory (the tree array, the nodes) */
void alloc_blockset_clear(struct blockset *s);
/* frees the set's memory, not its blocks */
void alloc_blockset_release(struct blockset *s);

/* the key of (stream, size, addr) in the order of 's' */
static inline struct blockset_ent blockset_key(const struct blockset *s, int64_t stream,
                                               uint64_t size, uint64_t addr)
{
    struct blockset_ent k;
    k.stream = (uint64_t)stream;
    k.size = s->by_size ? size : 0;
    k.addr = addr;
    return k;
}

/* the first position at or after trees[t] that holds an element */
static inline struct blockset_pos blockset_from_tree(const struct blockset *s, size_t t)
{
    struct blockset_pos p;
    while (t < s->n_trees && !s->trees[t].t.n)
        t++;
    p.t = t;
    p.p.leaf = t < s->n_trees ? s->trees[t].t.head : NULL;
    p.p.i = 0;
    return p;
}

static inline struct blockset_pos blockset_first(const struct blockset *s)
{
    return blockset_from_tree(s, 0);
}

/* the block at 'p', NULL at the end */
static inline struct block *blockset_at(const struct blockset *s, struct blockset_pos p)
{
    return p.t < s->n_trees ? gm_btree_at(p.p) : NULL;
}

/* step to the next element (or the end); 'p' must not be the end */
static inline void blockset_next(const struct blockset *s, struct blockset_pos *p)
{
    gm_btree_next(&p->p);
    if (!p->p.leaf)
        *p = blockset_from_tree(s, p->t + 1);
}

/* step to the previous element (from the end: the last); false (and 'p' unchanged) at the
 * first */
static inline bool blockset_prev(const struct blockset *s, struct blockset_pos *p)
{
    size_t t = p->t;
    if (t < s->n_trees && gm_btree_prev(&s->trees[t].t, &p->p))
        return true;
    while (t-- > 0)
        if (s->trees[t].t.n) {
            p->t = t;
            p->p = gm_btree_last(&s->trees[t].t);
            return true;
        }
    return false;
}

struct alloc_pool {
    bool small;
    struct blockset blocks;    /* free mapped blocks, by (stream, size, addr) */
    struct blockset unmapped;  /* unmapped ranges, by (stream, addr) */
    uint64_t free_block_calls; /* get_free_blocks_call_count: the GC's age clock */
};

/* One expandable segment: a reserved virtual range mapped page by page. */
struct xseg {
    uint64_t base; /* device address of the reservation */
    uint64_t page; /* bytes per page: 2 MiB small pool, 20 MiB large pool */
    size_t n_pages;
    int64_t stream;
    struct alloc_pool *pool;
    uint8_t *mapped; /* per page: 1 when physical memory backs it */
    struct xseg *next_seg;
};

/* An end-of-life event of a block freed after record_stream(): recorded on 'stream' at the
 * free, the block returns to its pool once every one of its events is complete and
 * process_events() (the next malloc) or synchronize_and_free_events() sees it. */
struct alloc_event {
    int64_t stream;
    uint64_t seq; /* order of recording, over all streams */
    struct block *b;
    bool done; /* the stream has run past it (gm_alloc_stream_passed) */
};

struct gm_alloc {
    struct gm_alloc_conf conf;
    struct gm_alloc_device dev;
    struct alloc_pool large;
    struct alloc_pool small;
    struct xseg *xsegs;
    struct gm_map active; /* allocated address -> its struct block (uintptr_t); empty when lean */
    struct block *live;   /* the allocated blocks, most recently allocated first */
    size_t n_live;        /* blocks in 'live' */
    struct gm_alloc_stats stats;
    uint64_t total_allocated; /* bytes: total_allocated_memory (what the device holds) */
    bool set_fraction;
    uint64_t allowed_max; /* bytes: fraction * device total */
    size_t n_segments;    /* cudaMalloc segments */
    size_t n_xsegs;
    gm_alloc_event_fn hook;
    void *hook_ctx;
    struct alloc_event *events; /* outstanding, in order of recording */
    size_t n_events, cap_events;
    uint64_t event_seq; /* events recorded so far (gm_alloc_stream_mark) */
    size_t n_pending;   /* blocks freed with events outstanding */
    uint64_t pending_bytes;
    struct gm_slab records; /* where block records come from (alloc.c block_new()) */
    bool lean;              /* gm_alloc_set_lean(): requests count allocated_bytes' aggregate
                               and keep no 'active' map */
};

/* The allocated blocks one by one, in no particular order: start with *pos = 0; NULL at
 * the end (gm_map_next() over 'active': none in a lean model). */
struct block *alloc_active_next(const struct gm_alloc *a, size_t *pos);

/* One allocated block of a segment a late trace found: at 'offset' bytes from the segment's
 * start, 'size' bytes (rounded), 'requested' asked for. */
struct alloc_seed_block {
    uint64_t offset;
    uint64_t size;
    uint64_t requested;
};

/* Make a segment of 'size' bytes in the small or large pool on 'stream', holding the
 * allocated 'blocks' (ascending offsets) where they sat and free blocks between them: the
 * state a trace that starts late found (replay.c), which the allocator's own best fit
 * would not rebuild.  ptrs[i] gets each block's model address, 0 for one that overlaps the
 * one before or runs past the segment.  Counts as a cudaMalloc (the event hook sees it).
 * Not for expandable segments (GM_ERR_INVALID).  Errors: GM_ERR_LIMIT (no device memory),
 * GM_ERR_NOMEM. */
enum gm_status alloc_seed_segment(struct gm_alloc *a, bool small, uint64_t size, int64_t stream,
                                  const struct alloc_seed_block *blocks, size_t n, uint64_t *ptrs,
                                  struct gm_error *err);

#endif
