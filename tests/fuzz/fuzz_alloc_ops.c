/* SPDX-License-Identifier: MIT */
/* fuzz_alloc_ops.c - the caching-allocator model driven by an arbitrary operation sequence.
 *
 * Input: byte 0 picks the settings (expandable segments, max_split_size, roundup divisions,
 * a device capacity, GC under a memory fraction, and without max_split_size bit 4 a lean
 * model whose blocks are freed by handle); then 4-byte records
 *   op (1 byte) | arg (3 bytes, little endian)
 * op % 5: 0,1 malloc(arg scaled by op>>3 into 1 B .. 96 MiB) on stream op>>7;
 *         2,3 free the live block number arg % 64; 4 empty_cache.
 * After every operation the invariants hold: blocks tile their segments, allocated and
 * reserved match the blocks, the fake device holds exactly what is reserved. */
#include "alloc/alloc_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct gm_alloc *a, const struct gm_alloc_fakedev *fake)
{
    uint64_t alloc_bytes = 0, free_bytes = 0;
    const struct alloc_pool *pools[2] = {&a->large, &a->small};
    size_t n_live = 0;
    for (const struct block *b = a->live; b; b = b->live_next) {
        if (!b->allocated || (b->next && b->next->addr != b->addr + b->size) ||
            (b->live_next && b->live_next->live_prev != b))
            abort();
        alloc_bytes += b->size;
        n_live++;
    }
    /* a full model maps each allocated address to its block, a lean one none */
    if (n_live != a->n_live || gm_map_count(&a->active) != (a->lean ? 0 : n_live))
        abort();
    for (int k = 0; k < 2; k++) {
        const struct block *b;
        for (struct blockset_pos it = blockset_first(&pools[k]->blocks);
             (b = blockset_at(&pools[k]->blocks, it)) != NULL;
             blockset_next(&pools[k]->blocks, &it)) {
            if (b->allocated || !b->mapped)
                abort();
            if (b->next && !b->next->allocated && b->next->mapped)
                abort(); /* two free mapped neighbours must have merged */
            free_bytes += b->size;
        }
    }
    if (alloc_bytes != a->stats.allocated_bytes[GM_ALLOC_STAT_ALL].current ||
        alloc_bytes + free_bytes != a->stats.reserved_bytes[GM_ALLOC_STAT_ALL].current ||
        a->total_allocated != fake->used)
        abort();
}

/* free by handle in a lean model (an address finds nothing there), by address otherwise */
static enum gm_status free_one(struct gm_alloc *a, bool lean, uint64_t ptr,
                               struct gm_alloc_block *blk)
{
    if (!lean)
        return gm_alloc_dealloc(a, ptr, NULL);
    if (gm_alloc_dealloc(a, ptr, NULL) != GM_ERR_INVALID)
        abort();
    return gm_alloc_dealloc_block(a, blk, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gm_alloc_conf conf;
    struct gm_alloc_fakedev fake;
    struct gm_alloc_device dev = {&gm_alloc_fakedev_ops, &fake, (uint64_t)8 << 30};
    struct gm_alloc *a = NULL;
    uint64_t live[64] = {0};
    struct gm_alloc_block *blk[64] = {NULL};
    uint8_t mode;
    bool lean;

    if (size < 1)
        return 0;
    mode = data[0];
    gm_alloc_conf_init(&conf);
    conf.expandable_segments = (mode & 1) != 0;
    if (mode & 2)
        conf.max_split_size = (uint64_t)(21 + (mode >> 4)) << 20;
    if (mode & 4)
        for (int i = 0; i < GM_ALLOC_ROUNDUP_INTERVALS; i++)
            conf.roundup_power2_divisions[i] = 4;
    if (mode & 8)
        conf.garbage_collection_threshold = 0.5;
    gm_alloc_fakedev_init(&fake, (mode & 0x40) ? (uint64_t)768 << 20 : 0);
    if (gm_alloc_new(&conf, &dev, &a, NULL) != GM_OK)
        abort();
    if ((mode & 8) && gm_alloc_set_memory_fraction(a, 0.125, NULL) != GM_OK) /* 1 GiB */
        abort();
    lean = (mode & 0x12) == 0x10;
    if (lean)
        gm_alloc_set_lean(a);
    for (size_t i = 1; i + 4 <= size && i < 1 + 4 * 4000; i += 4) {
        uint8_t op = data[i];
        uint32_t arg =
            (uint32_t)data[i + 1] | (uint32_t)data[i + 2] << 8 | (uint32_t)data[i + 3] << 16;
        switch (op % 5) {
        case 0:
        case 1: {
            /* op>>3 in 0..31 picks the magnitude: up to 2^(arg bits) scaled */
            unsigned shift = (op >> 3) & 7;
            uint64_t sz = ((uint64_t)arg << shift) % (96ull << 20) + 1;
            size_t slot = arg % 64;
            if (live[slot])
                break;
            if (gm_alloc_malloc_block(a, sz, (int64_t)(op >> 7), &live[slot], &blk[slot], NULL) !=
                GM_OK)
                live[slot] = 0;
            break;
        }
        case 2:
        case 3:
            if (live[arg % 64] && free_one(a, lean, live[arg % 64], blk[arg % 64]) != GM_OK)
                abort();
            live[arg % 64] = 0;
            break;
        default:
            gm_alloc_empty_cache(a);
            break;
        }
        check(a, &fake);
    }
    for (size_t k = 0; k < 64; k++)
        if (live[k] && free_one(a, lean, live[k], blk[k]) != GM_OK)
            abort();
    gm_alloc_empty_cache(a);
    if (a->stats.reserved_bytes[GM_ALLOC_STAT_ALL].current != 0 || fake.used != 0)
        abort();
    gm_alloc_free(a);
    return 0;
}
