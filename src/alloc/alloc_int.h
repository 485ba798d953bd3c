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
    struct xseg *xseg; /* the expandable segment, NULL for a cudaMalloc segment */
    uint64_t gc_base;  /* pool->free_block_calls when the block entered the pool */
    bool allocated;
    bool mapped; /* false only for unmapped ranges of expandable segments */
};

/* A sorted array of blocks with lower_bound; small N makes memmove cheap enough. */
struct blockset {
    struct block **v;
    size_t n;
    size_t cap;
    bool by_size; /* (stream, size, addr) when true, else (stream, addr) */
};

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

/* Open-addressing map from an allocated address to its block. */
struct ptrmap {
    uint64_t *keys;
    struct block **vals; /* NULL: empty slot */
    size_t cap;          /* a power of two, or 0 */
    size_t n;
};

struct gm_alloc {
    struct gm_alloc_conf conf;
    struct gm_alloc_device dev;
    struct alloc_pool large;
    struct alloc_pool small;
    struct xseg *xsegs;
    struct ptrmap active;
    struct gm_alloc_stats stats;
    uint64_t total_allocated; /* bytes: total_allocated_memory (what the device holds) */
    bool set_fraction;
    uint64_t allowed_max; /* bytes: fraction * device total */
    size_t n_segments;    /* cudaMalloc segments */
    size_t n_xsegs;
    gm_alloc_event_fn hook;
    void *hook_ctx;
};

#endif
