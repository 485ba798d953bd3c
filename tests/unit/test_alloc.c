/* SPDX-License-Identifier: MIT */
/* test_alloc.c - the caching-allocator model: hand-computed test vectors
 * of each rule of docs/alloc.md section 1, the expandable-segments worked example,
 * statistics semantics (torch.cuda.memory_stats()), the OOM retry path, garbage collection, the
 * PYTORCH_CUDA_ALLOC_CONF parser, a randomised run that checks the invariants, and the ordered
 * free-block set driven at random against a linear scan. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "alloc/alloc_int.h"
#include "gpumem/alloc.h"
#include "gpumem/arena.h"
#include "gpumem/internal/alloc_hooks.h"
#include "gpumem/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((uint64_t)1 << 20)

struct fixture {
    struct gm_alloc_fakedev fake;
    struct gm_alloc *a;
    struct gm_alloc_conf conf;
    /* events seen through the hook */
    int n_ev;
    enum gm_alloc_event_kind ev[64];
    uint64_t ev_size[64];
    bool handles; /* seq_run() frees and records streams by handle, not by address */
};

static void on_event(void *ctx, enum gm_alloc_event_kind k, uint64_t addr, uint64_t size,
                     int64_t stream)
{
    struct fixture *f = ctx;
    (void)addr;
    (void)stream;
    if (f->n_ev < 64) {
        f->ev[f->n_ev] = k;
        f->ev_size[f->n_ev] = size;
    }
    f->n_ev++;
}

/* a model with 'conf_str' on a fake device of 'capacity' bytes (0: unlimited) */
static void setup(struct fixture *f, const char *conf_str, uint64_t capacity)
{
    struct gm_alloc_device dev;
    struct gm_error e;
    memset(f, 0, sizeof(*f));
    gm_alloc_conf_init(&f->conf);
    assert_int_equal(gm_alloc_conf_parse(&f->conf, conf_str, &e), GM_OK);
    gm_alloc_fakedev_init(&f->fake, capacity);
    dev.ops = &gm_alloc_fakedev_ops;
    dev.ctx = &f->fake;
    dev.total_bytes = 80ull << 30;
    assert_int_equal(gm_alloc_new(&f->conf, &dev, &f->a, &e), GM_OK);
    gm_alloc_set_event_hook(f->a, on_event, f);
}

static uint64_t m(struct fixture *f, uint64_t size)
{
    uint64_t p = 0;
    struct gm_error e;
    assert_int_equal(gm_alloc_malloc(f->a, size, 0, &p, &e), GM_OK);
    assert_true(p != 0);
    return p;
}

static void fr(struct fixture *f, uint64_t p)
{
    assert_int_equal(gm_alloc_dealloc(f->a, p, NULL), GM_OK);
}

static uint64_t allocated(struct fixture *f)
{
    return f->a->stats.allocated_bytes[GM_ALLOC_STAT_ALL].current;
}

static uint64_t reserved(struct fixture *f)
{
    return f->a->stats.reserved_bytes[GM_ALLOC_STAT_ALL].current;
}

static void teardown(struct fixture *f)
{
    gm_alloc_free(f->a);
    /* every byte went back to the device */
    assert_true(f->fake.used == 0);
}

/* ---- section 8 test vectors ---- */

static void test_vec_malloc_1(void **state)
{
    struct fixture f;
    (void)state;
    setup(&f, NULL, 0);
    m(&f, 1);
    assert_true(allocated(&f) == 512);
    assert_true(reserved(&f) == 2 * MiB);
    assert_true(f.a->stats.inactive_split_bytes[GM_ALLOC_STAT_ALL].current == 2 * MiB - 512);
    assert_true(f.a->stats.inactive_split[GM_ALLOC_STAT_SMALL_POOL].current == 1);
    assert_true(f.a->stats.requested_bytes[GM_ALLOC_STAT_ALL].current == 1);
    assert_true(f.a->stats.segment[GM_ALLOC_STAT_SMALL_POOL].current == 1);
    assert_true(f.a->stats.segment[GM_ALLOC_STAT_LARGE_POOL].current == 0);
    teardown(&f);
}

static void test_vec_one_mib_is_small(void **state)
{
    struct fixture f;
    (void)state;
    setup(&f, NULL, 0);
    m(&f, MiB);
    assert_true(allocated(&f) == MiB);
    assert_true(reserved(&f) == 2 * MiB);
    assert_true(f.a->stats.allocated_bytes[GM_ALLOC_STAT_SMALL_POOL].current == MiB);
    teardown(&f);
}

static void test_vec_just_over_one_mib(void **state)
{
    struct fixture f;
    (void)state;
    setup(&f, NULL, 0);
    m(&f, MiB + 1);
    assert_true(allocated(&f) == 1049088);
    assert_true(reserved(&f) == 20 * MiB);
    assert_true(f.a->stats.allocated_bytes[GM_ALLOC_STAT_LARGE_POOL].current == 1049088);
    /* split: the 20 MiB segment leaves a cached remainder */
    assert_true(f.a->stats.inactive_split_bytes[GM_ALLOC_STAT_ALL].current == 20 * MiB - 1049088);
    teardown(&f);
}

static void test_vec_ten_mib_exact(void **state)
{
    struct fixture f;
    (void)state;
    setup(&f, NULL, 0);
    m(&f, 10 * MiB);
    assert_true(allocated(&f) == 10 * MiB);
    assert_true(reserved(&f) == 10 * MiB);
    teardown(&f);
}

static void test_vec_eleven_mib_plus_one(void **state)
{
    struct fixture f;
    (void)state;
    setup(&f, NULL, 0);
    m(&f, 11 * MiB + 1);
    /* 12 MiB segment; remainder 1,048,064 is not > 1 MiB: no split, whole block counts */
    assert_true(allocated(&f) == 12 * MiB);
    assert_true(reserved(&f) == 12 * MiB);
    assert_true(f.a->stats.requested_bytes[GM_ALLOC_STAT_ALL].current == 11 * MiB + 1);
    assert_true(f.a->stats.inactive_split_bytes[GM_ALLOC_STAT_ALL].current == 0);
    teardown(&f);
}

static void test_vec_six_mib_twice_then_empty(void **state)
{
    struct fixture f;
    uint64_t p1, p2;
    (void)state;
    setup(&f, NULL, 0);
    p1 = m(&f, 6 * MiB);
    p2 = m(&f, 6 * MiB);
    assert_true(allocated(&f) == 12 * MiB);
    assert_true(reserved(&f) == 20 * MiB);
    assert_true(p2 == p1 + 6 * MiB); /* the low-address front of the remainder */
    assert_int_equal(f.n_ev, 1);     /* one segment_alloc */
    fr(&f, p1);
    fr(&f, p2);
    assert_true(f.a->stats.inactive_split[GM_ALLOC_STAT_ALL].current == 0);
    assert_true(f.a->large.blocks.n == 1); /* merged back into one unsplit block */
    gm_alloc_empty_cache(f.a);
    assert_true(allocated(&f) == 0);
    assert_true(reserved(&f) == 0);
    assert_int_equal(f.n_ev, 2);
    assert_int_equal(f.ev[1], GM_ALLOC_EV_SEGMENT_FREE);
    assert_true(f.ev_size[1] == 20 * MiB);
    assert_true(f.a->stats.num_device_alloc == 1 && f.a->stats.num_device_free == 1);
    teardown(&f);
}

static void test_vec_twelve_free_ten(void **state)
{
    struct fixture f;
    (void)state;
    setup(&f, NULL, 0);
    fr(&f, m(&f, 12 * MiB));
    m(&f, 10 * MiB);
    /* remainder 2 MiB > 1 MiB: split */
    assert_true(allocated(&f) == 10 * MiB);
    assert_true(reserved(&f) == 12 * MiB);
    assert_true(f.a->stats.inactive_split_bytes[GM_ALLOC_STAT_ALL].current == 2 * MiB);
    teardown(&f);
}

static void test_vec_max_split(void **state)
{
    struct fixture f;
    uint64_t p;
    (void)state;
    setup(&f, "max_split_size_mb:20", 0);
    fr(&f, m(&f, 100 * MiB));
    p = m(&f, 90 * MiB);
    /* 100 < 90 + 20: the oversize block is reused, not split */
    assert_true(allocated(&f) == 100 * MiB);
    assert_true(reserved(&f) == 100 * MiB);
    assert_true(f.a->stats.oversize_allocations.current == 1);
    assert_true(f.a->stats.oversize_segments.current == 1);
    fr(&f, p);
    p = m(&f, 70 * MiB);
    /* 100 >= 70 + 20: rejected, a new 70 MiB segment */
    assert_true(allocated(&f) == 70 * MiB);
    assert_true(reserved(&f) == 170 * MiB);
    /* with the 100 MiB block cached, a normal request never takes it */
    m(&f, 5 * MiB);
    assert_true(allocated(&f) == 75 * MiB);
    assert_true(reserved(&f) == 190 * MiB);
    (void)p;
    teardown(&f);
}

static void test_vec_roundup_divisions(void **state)
{
    struct fixture f;
    (void)state;
    setup(&f, "roundup_power2_divisions:4", 0);
    m(&f, 5 * MiB + 1);
    assert_true(allocated(&f) == 6 * MiB);
    assert_true(reserved(&f) == 20 * MiB);
    teardown(&f);
    setup(&f, "roundup_power2_divisions:4", 0);
    m(&f, 1200);
    assert_true(allocated(&f) == 1536);
    assert_true(reserved(&f) == 2 * MiB);
    teardown(&f);
}

static void test_malloc_zero(void **state)
{
    struct fixture f;
    uint64_t p = 7;
    (void)state;
    setup(&f, NULL, 0);
    assert_int_equal(gm_alloc_malloc(f.a, 0, 0, &p, NULL), GM_OK);
    assert_true(p == 0);
    assert_true(f.a->stats.allocation[GM_ALLOC_STAT_ALL].allocated == 0);
    assert_int_equal(gm_alloc_dealloc(f.a, 0, NULL), GM_OK);
    assert_int_equal(gm_alloc_dealloc(f.a, 12345, NULL), GM_ERR_INVALID);
    teardown(&f);
}

/* ---- section 3 rounding ---- */

static void test_round_size(void **state)
{
    struct gm_alloc_conf c;
    struct gm_error e;
    (void)state;
    gm_alloc_conf_init(&c);
    assert_true(gm_alloc_round_size(&c, 1) == 512);
    assert_true(gm_alloc_round_size(&c, 512) == 512);
    assert_true(gm_alloc_round_size(&c, 513) == 1024);
    assert_true(gm_alloc_segment_size(MiB) == 2 * MiB);
    assert_true(gm_alloc_segment_size(MiB + 512) == 20 * MiB);
    assert_true(gm_alloc_segment_size(10 * MiB - 512) == 20 * MiB);
    assert_true(gm_alloc_segment_size(10 * MiB) == 10 * MiB);
    assert_true(gm_alloc_segment_size(11 * MiB) == 12 * MiB);
    assert_int_equal(gm_alloc_conf_parse(&c, "roundup_power2_divisions:[256:1,512:2,>:8]", &e),
                     GM_OK);
    /* intervals below 256 MiB take the first value (1: off), 512 MiB takes 2, above 8 */
    assert_int_equal(c.roundup_power2_divisions[0], 1);
    assert_int_equal(c.roundup_power2_divisions[8], 1);
    assert_int_equal(c.roundup_power2_divisions[9], 2);
    assert_int_equal(c.roundup_power2_divisions[10], 8);
    assert_int_equal(c.roundup_power2_divisions[15], 8);
    /* 600 MiB in the 512 MiB interval, 2 divisions: step 256 MiB -> 768 MiB */
    assert_true(gm_alloc_round_size(&c, 600 * MiB) == 768 * MiB);
    /* 1100 MiB, 8 divisions of 1 GiB: step 128 MiB -> 1152 MiB */
    assert_true(gm_alloc_round_size(&c, 1100 * MiB) == 1152 * MiB);
    /* a power of two maps to itself */
    assert_true(gm_alloc_round_size(&c, 1024 * MiB) == 1024 * MiB);
    assert_true(gm_alloc_round_size(&c, 300 * MiB) == 300 * MiB);
}

/* ---- section 6 expandable segments ---- */

/* ---- the segments and their blocks, as memory_snapshot() lists them ---- */

struct seg_list {
    int n;
    struct gm_alloc_segment_info seg[8];
    struct gm_alloc_block_info blocks[8][8];
};

static enum gm_status keep_segment(void *ctx, const struct gm_alloc_segment_info *seg,
                                   struct gm_error *err)
{
    struct seg_list *l = ctx;
    uint64_t at = seg->addr, sum = 0;
    (void)err;
    assert_true(l->n < 8 && seg->n_blocks <= 8);
    /* the blocks tile the segment, by address */
    for (size_t i = 0; i < seg->n_blocks; i++) {
        assert_true(seg->blocks[i].addr == at);
        at += seg->blocks[i].size;
        sum += seg->blocks[i].size;
    }
    assert_true(sum == seg->size);
    memcpy(l->blocks[l->n], seg->blocks, seg->n_blocks * sizeof(*seg->blocks));
    l->seg[l->n++] = *seg;
    return GM_OK;
}

/* Every segment and block gm_alloc_segments() reports, folded into one number. */
struct seg_digest {
    uint64_t n, n_allocated, hash;
};

static void digest_word(struct seg_digest *d, uint64_t w)
{
    d->hash = (d->hash ^ w) * 0x100000001b3ull;
}

static enum gm_status digest_segment(void *ctx, const struct gm_alloc_segment_info *seg,
                                     struct gm_error *err)
{
    struct seg_digest *d = ctx;
    (void)err;
    d->n++;
    digest_word(d, seg->addr);
    digest_word(d, seg->size);
    digest_word(d, (uint64_t)seg->stream);
    digest_word(d, (uint64_t)seg->is_small << 1 | (uint64_t)seg->is_expandable);
    for (size_t i = 0; i < seg->n_blocks; i++) {
        const struct gm_alloc_block_info *b = &seg->blocks[i];
        d->n_allocated += b->state == GM_ALLOC_BLOCK_ACTIVE_ALLOCATED;
        digest_word(d, b->addr);
        digest_word(d, b->size);
        digest_word(d, b->requested);
        digest_word(d, b->state);
    }
    return GM_OK;
}

static void test_segments_by_address_with_their_blocks(void **state)
{
    struct fixture f;
    struct seg_list l;
    uint64_t big, small1, small2, pend;
    (void)state;
    setup(&f, NULL, 0);
    big = m(&f, 12 * MiB);  /* a 12 MiB segment, whole */
    small1 = m(&f, 1000);   /* a 2 MiB small segment: 1024 + the rest */
    small2 = m(&f, 3000);   /* splits the rest */
    pend = m(&f, 30 * MiB); /* a 30 MiB segment, freed with an event outstanding */
    assert_int_equal(gm_alloc_record_stream(f.a, pend, 5, NULL), GM_OK);
    fr(&f, pend);
    fr(&f, small1);
    memset(&l, 0, sizeof(l));
    assert_int_equal(gm_alloc_segments(f.a, keep_segment, &l, NULL), GM_OK);
    assert_int_equal(l.n, 3);
    for (int i = 1; i < l.n; i++)
        assert_true(l.seg[i - 1].addr < l.seg[i].addr);
    {
        uint64_t sizes[8];
        size_t n = gm_alloc_segment_sizes(f.a, sizes, 8);
        uint64_t want = 0, got = 0;
        assert_int_equal(n, 3);
        for (size_t i = 0; i < n; i++)
            want += sizes[i];
        for (int i = 0; i < l.n; i++)
            got += l.seg[i].size;
        assert_true(want == got);
    }
    for (int i = 0; i < l.n; i++) {
        const struct gm_alloc_segment_info *g = &l.seg[i];
        const struct gm_alloc_block_info *b = l.blocks[i];
        assert_false(g->is_expandable);
        if (g->addr == big) {
            assert_int_equal(g->n_blocks, 1);
            assert_int_equal(b[0].state, GM_ALLOC_BLOCK_ACTIVE_ALLOCATED);
            assert_true(b[0].requested == 12 * MiB);
        } else if (g->addr == pend) {
            assert_int_equal(g->n_blocks, 1);
            assert_int_equal(b[0].state, GM_ALLOC_BLOCK_PENDING_FREE);
        } else {
            assert_true(g->is_small);
            assert_true(g->size == 2 * MiB);
            assert_int_equal(g->n_blocks, 3);
            assert_true(b[0].addr == small1 && b[0].size == 1024);
            assert_int_equal(b[0].state, GM_ALLOC_BLOCK_INACTIVE);
            assert_true(b[0].requested == 1000); /* kept after the free, as torch */
            assert_true(b[1].addr == small2);
            assert_int_equal(b[1].state, GM_ALLOC_BLOCK_ACTIVE_ALLOCATED);
            assert_int_equal(b[2].state, GM_ALLOC_BLOCK_INACTIVE);
        }
    }
    gm_alloc_stream_passed(f.a, 5, gm_alloc_stream_mark(f.a));
    gm_alloc_empty_cache(f.a);
    fr(&f, big);
    fr(&f, small2);
    teardown(&f);
}

static void test_segments_of_expandable_ranges(void **state)
{
    struct fixture f;
    struct seg_list l;
    uint64_t p;
    (void)state;
    setup(&f, "expandable_segments:True", 0);
    p = m(&f, 12 * MiB); /* one 20 MiB page: 12 + 8 */
    memset(&l, 0, sizeof(l));
    assert_int_equal(gm_alloc_segments(f.a, keep_segment, &l, NULL), GM_OK);
    assert_int_equal(l.n, 1);
    assert_true(l.seg[0].is_expandable);
    assert_true(l.seg[0].size == 20 * MiB);
    assert_int_equal(l.seg[0].n_blocks, 2);
    assert_true(l.blocks[0][0].addr == p);
    fr(&f, p);
    teardown(&f);
}

static void test_expandable_worked_example(void **state)
{
    struct fixture f;
    (void)state;
    setup(&f, NULL, 0);
    m(&f, 12 * MiB);
    m(&f, 12 * MiB);
    assert_true(reserved(&f) == 24 * MiB);
    teardown(&f);

    setup(&f, "expandable_segments:True", 0);
    m(&f, 12 * MiB);
    /* one 20 MiB page mapped, split into 12 + 8 */
    assert_true(reserved(&f) == 20 * MiB);
    assert_int_equal(f.n_ev, 1);
    assert_int_equal(f.ev[0], GM_ALLOC_EV_SEGMENT_MAP);
    m(&f, 12 * MiB);
    /* the 8 MiB tail grows by one more page and merges */
    assert_true(reserved(&f) == 40 * MiB);
    assert_true(allocated(&f) == 24 * MiB);
    assert_int_equal(f.n_ev, 2);
    assert_true(f.ev_size[1] == 20 * MiB);
    /* expandable segments: no segment count, no inactive_split */
    assert_true(f.a->stats.segment[GM_ALLOC_STAT_ALL].current == 0);
    assert_true(f.a->stats.inactive_split_bytes[GM_ALLOC_STAT_ALL].current == 0);
    assert_true(gm_alloc_segment_count(f.a) == 1);
    teardown(&f);
}

static void test_expandable_small_pages_and_unmap(void **state)
{
    struct fixture f;
    uint64_t p1, p2, p3;
    (void)state;
    setup(&f, "expandable_segments:True", 0);
    p1 = m(&f, 1000);
    assert_true(reserved(&f) == 2 * MiB); /* small pool pages are 2 MiB */
    p2 = m(&f, 30 * MiB);
    assert_true(reserved(&f) == 2 * MiB + 40 * MiB);
    p3 = m(&f, 30 * MiB);
    /* 40 - 30 = 10 MiB tail + 20 more -> 30 */
    assert_true(reserved(&f) == 2 * MiB + 60 * MiB);
    assert_true(p3 == p2 + 30 * MiB);
    fr(&f, p2);
    gm_alloc_empty_cache(f.a);
    /* [0,30) free: pages 0 (0-20) can go, page 1 (20-40) holds p3's start */
    assert_true(reserved(&f) == 2 * MiB + 40 * MiB);
    assert_int_equal(f.ev[f.n_ev - 1], GM_ALLOC_EV_SEGMENT_UNMAP);
    assert_true(f.ev_size[f.n_ev - 1] == 20 * MiB);
    fr(&f, p3);
    fr(&f, p1);
    gm_alloc_empty_cache(f.a);
    assert_true(reserved(&f) == 0);
    assert_true(gm_alloc_segment_count(f.a) == 0);
    assert_true(f.a->stats.num_device_alloc == f.a->stats.num_device_free + 1 ||
                f.a->stats.num_device_free >= 3);
    teardown(&f);
}

static void test_expandable_reuse_after_unmap(void **state)
{
    struct fixture f;
    uint64_t p1, p2;
    (void)state;
    setup(&f, "expandable_segments:True", 0);
    p1 = m(&f, 40 * MiB);
    p2 = m(&f, 20 * MiB);
    fr(&f, p1);
    gm_alloc_empty_cache(f.a);
    assert_true(reserved(&f) == 20 * MiB);
    /* the hole at the front is remapped before the segment grows */
    p1 = m(&f, 20 * MiB);
    assert_true(reserved(&f) == 40 * MiB);
    assert_true(p1 < p2);
    teardown(&f);
}

/* get_free_block() under expandable segments (pytorch/pytorch
 * c10/cuda/CUDACachingAllocator.cpp @ 001074d): best fit by size, but a block followed by
 * unmapped space counts as the size it can grow to, so a free block that cannot grow is
 * taken before the smaller free tail of the segment. */
static void test_expandable_best_fit_prefers_a_block_that_cannot_grow(void **state)
{
    struct fixture f;
    uint64_t a, b, c;
    (void)state;
    setup(&f, "expandable_segments:True", 0);
    a = m(&f, 16 * MiB); /* one 20 MiB page: [a 16][free 4] */
    b = m(&f, 14 * MiB); /* the free 4 grows by a page: [a 16][b 14][free 10] */
    assert_true(b == a + 16 * MiB);
    assert_true(reserved(&f) == 40 * MiB);
    fr(&f, a); /* free: a's 16 MiB (b after it), the 10 MiB tail (unmapped after it) */
    c = m(&f, 8 * MiB);
    /* by size alone the 10 MiB tail; it can grow, so a's 16 MiB is taken */
    assert_true(c == a);
    assert_true(reserved(&f) == 40 * MiB);
    fr(&f, b);
    fr(&f, c);
    teardown(&f);
}

/* Expandable segments are per stream (find_expandable_block() searches the pool's unmapped
 * blocks of the request's stream; ExpandableSegment takes its stream): a stream's free
 * mapped pages serve no other stream.  They go back to the device only through
 * release_cached_blocks() (release_blocks() -> unmap_block(), then
 * release_expandable_segment() for a segment with nothing mapped), which the OOM retry of
 * malloc() calls, so a request of a third stream on a full device maps them again
 * (pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp @ 001074d). */
static void test_expandable_streams_keep_their_pages(void **state)
{
    struct fixture f;
    uint64_t p, q, r;
    (void)state;
    setup(&f, "expandable_segments:True", 200 * MiB);
    fr(&f, m(&f, 100 * MiB)); /* stream 0: five pages mapped, all free */
    assert_int_equal(gm_alloc_malloc(f.a, 100 * MiB, 7, &q, NULL), GM_OK);
    /* stream 7 maps five pages of its own beside stream 0's free ones */
    assert_true(reserved(&f) == 200 * MiB);
    assert_true(allocated(&f) == 100 * MiB);
    assert_true(f.a->stats.num_alloc_retries == 0);
    /* the device is full: stream 0's pages are unmapped and stream 9 maps three */
    assert_int_equal(gm_alloc_malloc(f.a, 60 * MiB, 9, &r, NULL), GM_OK);
    assert_true(reserved(&f) == 160 * MiB);
    assert_true(f.a->stats.num_alloc_retries == 1);
    assert_true(f.a->stats.reserved_bytes[GM_ALLOC_STAT_ALL].peak == 200 * MiB);
    assert_true(gm_alloc_segment_count(f.a) == 2); /* stream 0's segment is gone */
    /* stream 0 again: a segment of its own, mapped anew; no room left for it */
    assert_int_equal(gm_alloc_malloc(f.a, 60 * MiB, 0, &p, NULL), GM_ERR_LIMIT);
    fr(&f, r);
    fr(&f, q);
    teardown(&f);
}

/* find_expandable_block() reserves totalGlobalMem + totalGlobalMem / 8 of address space,
 * rounded up to whole pages (ExpandableSegment: max_handles_ = numSegments(total + total / 8);
 * pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp @ 001074d).  A device of 160 MiB + 1 B has
 * 180 MiB + 1 B of range, ten 20 MiB pages, not nine: 100 MiB and then 90 MiB fit in the
 * first segment. */
static void test_expandable_range_rounds_up_to_pages(void **state)
{
    struct fixture f;
    struct gm_alloc_device dev;
    struct gm_error e;
    uint64_t p, q;
    (void)state;
    setup(&f, "expandable_segments:True", 0);
    gm_alloc_free(f.a);
    dev.ops = &gm_alloc_fakedev_ops;
    dev.ctx = &f.fake; /* the fixture's fake device has no capacity: only the range is checked */
    dev.total_bytes = 160 * MiB + 1;
    assert_int_equal(gm_alloc_new(&f.conf, &dev, &f.a, &e), GM_OK);
    p = m(&f, 100 * MiB);
    q = m(&f, 90 * MiB);
    assert_true(q == p + 100 * MiB);
    assert_true(reserved(&f) == 200 * MiB);
    assert_true(gm_alloc_segment_count(f.a) == 1);
    fr(&f, q);
    fr(&f, p);
    teardown(&f);
}

/* ---- section 7 statistics ---- */

static void test_reset_peak(void **state)
{
    struct fixture f;
    uint64_t p;
    (void)state;
    setup(&f, NULL, 0);
    p = m(&f, 30 * MiB);
    fr(&f, m(&f, 50 * MiB));
    fr(&f, p);
    assert_true(f.a->stats.allocated_bytes[GM_ALLOC_STAT_ALL].peak == 80 * MiB);
    gm_alloc_reset_peak(f.a);
    /* peak = current, not zero */
    assert_true(f.a->stats.allocated_bytes[GM_ALLOC_STAT_ALL].peak == 0);
    assert_true(f.a->stats.reserved_bytes[GM_ALLOC_STAT_ALL].peak == 80 * MiB);
    p = m(&f, 4 * MiB);
    assert_true(f.a->stats.allocated_bytes[GM_ALLOC_STAT_ALL].peak == 4 * MiB);
    assert_true(f.a->stats.allocated_bytes[GM_ALLOC_STAT_ALL].allocated == 84 * MiB);
    assert_true(f.a->stats.allocated_bytes[GM_ALLOC_STAT_ALL].freed == 80 * MiB);
    gm_alloc_reset_accumulated(f.a);
    assert_true(f.a->stats.allocated_bytes[GM_ALLOC_STAT_ALL].allocated == 0);
    assert_true(f.a->stats.num_device_alloc == 0);
    assert_true(f.a->stats.allocated_bytes[GM_ALLOC_STAT_ALL].current == 4 * MiB);
    (void)p;
    teardown(&f);
}

static void test_streams_do_not_share(void **state)
{
    struct fixture f;
    uint64_t p;
    (void)state;
    setup(&f, NULL, 0);
    fr(&f, m(&f, 4 * MiB));
    assert_int_equal(gm_alloc_malloc(f.a, 4 * MiB, 7, &p, NULL), GM_OK);
    /* the cached 20 MiB block belongs to stream 0 */
    assert_true(reserved(&f) == 40 * MiB);
    teardown(&f);
}

/* ---- record_stream: end-of-life events (free(), insert_events, process_events) ---- */

/* A block allocated on stream 0 and used on stream 5: free() lowers allocated_bytes at
 * once, but the block stays active and out of the pool until stream 5 has passed the
 * free; a malloc before that needs a new segment, the first malloc after it reuses the
 * block (process_events runs at the start of malloc). */
static void test_record_stream_defers_reuse(void **state)
{
    struct fixture f;
    uint64_t p, q, r, mark, bytes;
    (void)state;
    setup(&f, NULL, 0);
    p = m(&f, 30 * MiB);
    assert_int_equal(gm_alloc_record_stream(f.a, p, 5, NULL), GM_OK);
    assert_int_equal(gm_alloc_record_stream(f.a, p, 5, NULL), GM_OK); /* a set */
    assert_int_equal(gm_alloc_record_stream(f.a, p, 0, NULL), GM_OK); /* own stream */
    fr(&f, p);
    mark = gm_alloc_stream_mark(f.a);
    assert_true(allocated(&f) == 0);
    assert_true(f.a->stats.active_bytes[GM_ALLOC_STAT_ALL].current == 30 * MiB);
    assert_int_equal(gm_alloc_pending_blocks(f.a, &bytes), 1);
    assert_true(bytes == 30 * MiB);
    q = m(&f, 30 * MiB); /* the pending block cannot be reused */
    assert_true(q != p);
    assert_true(reserved(&f) == 60 * MiB);
    /* stream 0 passing the mark says nothing about stream 5 */
    gm_alloc_stream_passed(f.a, 0, mark);
    r = m(&f, 512); /* small pool */
    assert_int_equal(gm_alloc_pending_blocks(f.a, NULL), 1);
    fr(&f, r);
    gm_alloc_stream_passed(f.a, 5, mark);
    assert_int_equal(gm_alloc_pending_blocks(f.a, NULL), 1); /* seen at the next malloc */
    fr(&f, q);
    r = m(&f, 30 * MiB);
    assert_int_equal(gm_alloc_pending_blocks(f.a, NULL), 0);
    assert_true(r == p);
    assert_true(f.a->stats.reserved_bytes[GM_ALLOC_STAT_LARGE_POOL].current == 60 * MiB);
    assert_true(f.a->stats.active_bytes[GM_ALLOC_STAT_LARGE_POOL].current == 30 * MiB);
    fr(&f, r);
    teardown(&f);
}

/* Events complete in order on each stream: a mark taken between two frees completes the
 * first only; several streams: the block waits for all of them. */
static void test_record_stream_marks_and_streams(void **state)
{
    struct fixture f;
    uint64_t p, q, mark1;
    (void)state;
    setup(&f, NULL, 0);
    p = m(&f, 30 * MiB);
    q = m(&f, 30 * MiB);
    assert_int_equal(gm_alloc_record_stream(f.a, p, 5, NULL), GM_OK);
    assert_int_equal(gm_alloc_record_stream(f.a, q, 5, NULL), GM_OK);
    assert_int_equal(gm_alloc_record_stream(f.a, q, 6, NULL), GM_OK);
    fr(&f, p);
    mark1 = gm_alloc_stream_mark(f.a);
    fr(&f, q);
    gm_alloc_stream_passed(f.a, 5, gm_alloc_stream_mark(f.a));
    fr(&f, m(&f, 1 * MiB)); /* process_events: p returns; q still waits for stream 6 */
    assert_int_equal(gm_alloc_pending_blocks(f.a, NULL), 1);
    gm_alloc_stream_passed(f.a, 6, mark1); /* q's event on 6 came after mark1 */
    fr(&f, m(&f, 1 * MiB));
    assert_int_equal(gm_alloc_pending_blocks(f.a, NULL), 1);
    gm_alloc_stream_passed(f.a, 6, gm_alloc_stream_mark(f.a));
    fr(&f, m(&f, 1 * MiB));
    assert_int_equal(gm_alloc_pending_blocks(f.a, NULL), 0);
    teardown(&f);
}

/* empty_cache() and the out-of-memory path synchronise every event first
 * (synchronize_and_free_events), so pending blocks are released too; a pending block is
 * never merged with a free neighbour; the model's teardown gives pending segments back. */
static void test_record_stream_sync_paths(void **state)
{
    struct fixture f;
    uint64_t p, q, r;
    (void)state;
    setup(&f, NULL, 100 * MiB);
    p = m(&f, 60 * MiB);
    assert_int_equal(gm_alloc_record_stream(f.a, p, 5, NULL), GM_OK);
    fr(&f, p);
    /* 70 MiB: the pending 60 MiB segment can only go after synchronising */
    q = m(&f, 70 * MiB);
    assert_int_equal(gm_alloc_pending_blocks(f.a, NULL), 0);
    assert_true(reserved(&f) == 70 * MiB);
    fr(&f, q);
    gm_alloc_empty_cache(f.a);
    /* a split segment: the pending half stays apart from its free neighbour */
    p = m(&f, 4 * MiB);
    q = m(&f, 4 * MiB);
    assert_int_equal(gm_alloc_record_stream(f.a, p, 5, NULL), GM_OK);
    fr(&f, p);
    fr(&f, q);
    /* [p pending 4][free 16]: 18 MiB does not fit beside p (it would in the merged 20) */
    assert_int_equal(gm_alloc_malloc(f.a, 18 * MiB, 0, &r, NULL), GM_OK);
    assert_true(reserved(&f) == 38 * MiB);
    assert_int_equal(gm_alloc_record_stream(f.a, r, 5, NULL), GM_OK);
    fr(&f, r);
    gm_alloc_empty_cache(f.a);
    assert_true(reserved(&f) == 0);
    /* teardown with an event outstanding */
    p = m(&f, 4 * MiB);
    assert_int_equal(gm_alloc_record_stream(f.a, p, 5, NULL), GM_OK);
    assert_int_equal(gm_alloc_record_stream(f.a, p, 6, NULL), GM_OK);
    fr(&f, p);
    assert_int_equal(gm_alloc_record_stream(f.a, p, 5, NULL), GM_ERR_INVALID);
    teardown(&f);
}

/* ---- out of memory ---- */

static void test_oom_retry_frees_cache(void **state)
{
    struct fixture f;
    uint64_t p;
    struct gm_error e;
    (void)state;
    setup(&f, NULL, 100 * MiB);
    fr(&f, m(&f, 60 * MiB));
    /* 60 MiB cached; 70 MiB does not fit in it nor beside it: release_cached_blocks, then
     * the retry succeeds */
    p = m(&f, 70 * MiB);
    assert_true(reserved(&f) == 70 * MiB);
    assert_true(f.a->stats.num_alloc_retries == 1);
    assert_true(f.a->stats.num_ooms == 0);
    assert_int_equal(f.ev[f.n_ev - 2], GM_ALLOC_EV_SEGMENT_FREE);
    assert_int_equal(f.ev[f.n_ev - 1], GM_ALLOC_EV_SEGMENT_ALLOC);
    /* 40 MiB more cannot fit next to 70 */
    assert_int_equal(gm_alloc_malloc(f.a, 40 * MiB, 0, &p, &e), GM_ERR_LIMIT);
    assert_non_null(strstr(e.msg, "out of memory"));
    assert_true(f.a->stats.num_ooms == 1);
    assert_int_equal(f.ev[f.n_ev - 1], GM_ALLOC_EV_OOM);
    teardown(&f);
}

static void test_oom_release_available(void **state)
{
    struct fixture f;
    (void)state;
    setup(&f, "max_split_size_mb:32", 200 * MiB);
    fr(&f, m(&f, 40 * MiB));
    fr(&f, m(&f, 100 * MiB));
    m(&f, 2 * MiB); /* oversize blocks are refused: a new 20 MiB segment, split */
    assert_true(reserved(&f) == 160 * MiB);
    /* 60 MiB: the cached 100 MiB block is too big to reuse (100 >= 60 + 20), and a new
     * segment does not fit; release_available_cached_blocks frees that one block only */
    m(&f, 60 * MiB);
    assert_true(reserved(&f) == 120 * MiB);
    assert_true(f.a->stats.num_alloc_retries == 0);
    assert_true(f.a->stats.oversize_segments.current == 2);
    teardown(&f);
    /* no single block is enough: the largest oversize blocks go, then a full release */
    setup(&f, "max_split_size_mb:32", 205 * MiB);
    fr(&f, m(&f, 40 * MiB));
    fr(&f, m(&f, 50 * MiB));
    m(&f, 2 * MiB);
    m(&f, 100 * MiB);
    assert_true(reserved(&f) == 120 * MiB);
    assert_true(f.a->stats.num_alloc_retries == 1);
    teardown(&f);
}

static void test_memory_fraction_and_gc(void **state)
{
    struct fixture f;
    uint64_t p;
    struct gm_error e;
    (void)state;
    setup(&f, "garbage_collection_threshold:0.5", 0);
    assert_int_equal(gm_alloc_set_memory_fraction(f.a, 0.00125, &e), GM_OK); /* 102.4 MiB */
    fr(&f, m(&f, 30 * MiB));
    fr(&f, m(&f, 40 * MiB));
    assert_true(reserved(&f) == 70 * MiB);
    /* reserved 70 > 0.5 * 102.4: a miss collects the old unsplit blocks first */
    p = m(&f, 50 * MiB);
    assert_true(reserved(&f) < 70 * MiB + 50 * MiB);
    assert_true(f.a->stats.num_device_free >= 1);
    assert_true(reserved(&f) <= f.a->allowed_max);
    (void)p;
    /* over the fraction: fail without calling the device */
    assert_int_equal(gm_alloc_malloc(f.a, 90 * MiB, 0, &p, &e), GM_ERR_LIMIT);
    assert_int_equal(gm_alloc_set_memory_fraction(f.a, 1.5, &e), GM_ERR_INVALID);
    teardown(&f);
}

/* ---- configuration parser ---- */

static void test_conf_parse_ok(void **state)
{
    struct gm_alloc_conf c;
    struct gm_error e;
    char buf[512];
    (void)state;
    gm_alloc_conf_init(&c);
    assert_int_equal(gm_alloc_conf_parse(&c, "", &e), GM_OK);
    assert_true(c.max_split_size == GM_ALLOC_NO_SPLIT_LIMIT);
    assert_string_equal(gm_alloc_conf_format(&c, buf, sizeof buf), "");
    assert_int_equal(gm_alloc_conf_parse(&c,
                                         "expandable_segments:True, max_split_size_mb:128,"
                                         "garbage_collection_threshold:0.6",
                                         &e),
                     GM_OK);
    assert_true(c.expandable_segments);
    assert_true(c.max_split_size == 128 * MiB);
    assert_true(c.garbage_collection_threshold > 0.59 && c.garbage_collection_threshold < 0.61);
    assert_string_equal(gm_alloc_conf_format(&c, buf, sizeof buf),
                        "expandable_segments:True,max_split_size_mb:128,"
                        "garbage_collection_threshold:0.6");
    assert_int_equal(gm_alloc_conf_parse(&c,
                                         "backend:native,max_non_split_rounding_mb:40,"
                                         "release_lock_on_cudamalloc:True,"
                                         "pinned_num_register_threads:8",
                                         &e),
                     GM_OK);
    assert_true(c.max_non_split_rounding_size == 40 * MiB);
    assert_true(c.pinned_num_register_threads == 8);
    /* the canonical form parses back to the same settings */
    {
        struct gm_alloc_conf c2;
        gm_alloc_conf_init(&c2);
        assert_int_equal(gm_alloc_conf_parse(&c2, gm_alloc_conf_format(&c, buf, sizeof buf), &e),
                         GM_OK);
        assert_memory_equal(&c, &c2, sizeof(c));
    }
    gm_alloc_conf_init(&c);
    assert_int_equal(gm_alloc_conf_parse(&c, "roundup_power2_divisions:[>:4]", &e), GM_OK);
    assert_int_equal(c.roundup_power2_divisions[0], 4);
    assert_int_equal(c.roundup_power2_divisions[15], 4);
    assert_string_equal(gm_alloc_conf_format(&c, buf, sizeof buf), "roundup_power2_divisions:4");
    assert_int_equal(gm_alloc_conf_parse(&c, "max_split_size_mb:20", &e), GM_OK);
}

static void expect_bad(const char *s, const char *needle, uint64_t offset)
{
    struct gm_alloc_conf c, before;
    struct gm_error e;
    gm_alloc_conf_init(&c);
    before = c;
    gm_error_clear(&e);
    if (gm_alloc_conf_parse(&c, s, &e) != GM_ERR_INVALID) {
        fprintf(stderr, "accepted: '%s'\n", s);
        fail();
    }
    if (!strstr(e.msg, needle)) {
        fprintf(stderr, "'%s': message '%s' lacks '%s'\n", s, e.msg, needle);
        fail();
    }
    if (offset != GM_NO_OFFSET && e.offset != offset) {
        fprintf(stderr, "'%s': offset %llu, want %llu\n", s, (unsigned long long)e.offset,
                (unsigned long long)offset);
        fail();
    }
    /* a failed parse leaves the settings untouched */
    assert_memory_equal(&c, &before, sizeof(c));
}

static void test_conf_parse_errors(void **state)
{
    (void)state;
    expect_bad("max_split_size_mb:19", "too small", 18);
    expect_bad("max_split_size_mb:abc", "not a whole", 18);
    expect_bad("max_split_size_mb:12abc", "not a whole", 18);
    expect_bad("max_split_size_mb", "expected ':'", 17);
    expect_bad("max_split_size_mb:", "missing value", 18);
    expect_bad("expandable_segments:true", "True or False", 20);
    expect_bad("expandable_segment:True", "unknown allocator option 'expandable_segment'", 0);
    expect_bad("garbage_collection_threshold:1.0", "strictly between", 29);
    expect_bad("garbage_collection_threshold:0", "strictly between", 29);
    expect_bad("garbage_collection_threshold:nan", "not a number", 29);
    expect_bad("roundup_power2_divisions:3", "not a power of two", 25);
    expect_bad("roundup_power2_divisions:[256:3]", "not a power of two", 30);
    expect_bad("roundup_power2_divisions:[300:2]", "interval 300 MiB", 26);
    expect_bad("roundup_power2_divisions:[256:2", "missing ']'", 31);
    expect_bad("roundup_power2_divisions:[]", "empty list", 26);
    expect_bad("roundup_power2_divisions:[256:2;512:4]", "not a whole", GM_NO_OFFSET);
    expect_bad("backend:cuda", "native or cudaMallocAsync", 8);
    expect_bad("expandable_segments:True,", "trailing ','", 24);
    expect_bad("expandable_segments:True max_split_size_mb:30", "True or False", GM_NO_OFFSET);
    expect_bad(",", "expected an option name", 0);
    expect_bad("pinned_num_register_threads:3", "power of two", 28);
    expect_bad("max_split_size_mb:99999999999999999999999", "too large", 18);
}

static void test_cuda_malloc_async_refused(void **state)
{
    struct gm_alloc_conf c;
    struct gm_alloc_fakedev fake;
    struct gm_alloc_device dev = {&gm_alloc_fakedev_ops, &fake, 0};
    struct gm_alloc *a;
    struct gm_error e;
    (void)state;
    gm_alloc_fakedev_init(&fake, 0);
    gm_alloc_conf_init(&c);
    assert_int_equal(gm_alloc_conf_parse(&c, "backend:cudaMallocAsync", &e), GM_OK);
    assert_int_equal(gm_alloc_new(&c, &dev, &a, &e), GM_ERR_UNSUPPORTED);
    assert_null(a);
}

static void test_stats_json(void **state)
{
    struct fixture f;
    struct gm_json w;
    char *buf = NULL;
    size_t len = 0;
    FILE *mem;
    (void)state;
    setup(&f, NULL, 0);
    m(&f, 1);
    mem = open_memstream(&buf, &len);
    assert_non_null(mem);
    gm_json_init(&w, mem, 0);
    gm_alloc_stats_write_json(&w, &f.a->stats);
    assert_true(gm_json_finish(&w));
    fclose(mem);
    /* torch's key names, torch's "unlimited", sorted keys */
    assert_non_null(strstr(buf, "\"allocated_bytes.all.current\":512"));
    assert_non_null(strstr(buf, "\"reserved_bytes.small_pool.peak\":2097152"));
    assert_non_null(strstr(buf, "\"inactive_split_bytes.all.current\":2096640"));
    assert_non_null(strstr(buf, "\"max_split_size\":-1"));
    assert_non_null(strstr(buf, "\"num_device_alloc\":1"));
    assert_true(strstr(buf, "\"active.all.allocated\"") <
                strstr(buf, "\"segment.small_pool.freed\""));
    free(buf);
    teardown(&f);
}

/* ---- invariants under a random workload ---- */

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* every segment's blocks tile it; sums of allocated and free blocks match the stats */
static void check_invariants(struct gm_alloc *a)
{
    uint64_t alloc_bytes = 0, free_bytes = 0, unmapped = 0;
    struct alloc_pool *pools[2] = {&a->large, &a->small};
    for (size_t pos = 0;;) {
        uint64_t addr, v;
        struct block *b;
        if (!gm_map_next(&a->active, &pos, &addr, &v))
            break;
        b = (struct block *)(uintptr_t)v;
        assert_true(b->allocated);
        assert_true(addr == b->addr);
        alloc_bytes += b->size;
        if (b->next)
            assert_true(b->next->addr == b->addr + b->size);
    }
    for (int k = 0; k < 2; k++) {
        const struct block *q = NULL;
        struct block *b;
        for (struct blockset_pos it = blockset_first(&pools[k]->blocks);
             (b = blockset_at(&pools[k]->blocks, it)) != NULL;
             blockset_next(&pools[k]->blocks, &it)) {
            assert_false(b->allocated);
            assert_true(b->mapped);
            /* two free mapped neighbours would have been merged */
            if (b->next)
                assert_true(b->next->allocated || !b->next->mapped);
            if (q)
                assert_true((uint64_t)q->stream < (uint64_t)b->stream ||
                            (q->stream == b->stream &&
                             (q->size < b->size || (q->size == b->size && q->addr < b->addr))));
            q = b;
            free_bytes += b->size;
        }
        for (struct blockset_pos it = blockset_first(&pools[k]->unmapped);
             (b = blockset_at(&pools[k]->unmapped, it)) != NULL;
             blockset_next(&pools[k]->unmapped, &it))
            unmapped += b->size;
    }
    /* the live list holds the active map's blocks, each once, its links both ways */
    {
        size_t n_live = 0;
        for (const struct block *b = a->live; b; b = b->live_next, n_live++) {
            uint64_t v;
            assert_true(b->allocated);
            assert_true(gm_map_get(&a->active, b->addr, &v) && v == (uintptr_t)b);
            assert_ptr_equal(b->live_next ? b->live_next->live_prev : b, b);
            assert_true(n_live <= gm_map_count(&a->active));
        }
        assert_true(n_live == gm_map_count(&a->active));
        assert_true(!a->live || !a->live->live_prev);
    }
    assert_true(alloc_bytes == a->stats.allocated_bytes[GM_ALLOC_STAT_ALL].current);
    assert_true(alloc_bytes == a->stats.active_bytes[GM_ALLOC_STAT_ALL].current);
    assert_true(alloc_bytes + free_bytes == a->stats.reserved_bytes[GM_ALLOC_STAT_ALL].current);
    assert_true(a->total_allocated == a->stats.reserved_bytes[GM_ALLOC_STAT_ALL].current);
    (void)unmapped;
}

static void random_run(const char *conf, uint64_t capacity, uint64_t seed, int steps)
{
    struct fixture f;
    uint64_t live[64] = {0};
    uint64_t s = seed;
    setup(&f, conf, capacity);
    for (int i = 0; i < steps; i++) {
        uint64_t r = rng_next(&s);
        size_t slot = (size_t)(r % 64);
        if (live[slot]) {
            fr(&f, live[slot]);
            live[slot] = 0;
        } else {
            uint64_t size;
            switch ((r >> 8) % 4) {
            case 0:
                size = 1 + (r >> 16) % 4096;
                break;
            case 1:
                size = 1 + (r >> 16) % (2 * MiB);
                break;
            case 2:
                size = 1 + (r >> 16) % (12 * MiB);
                break;
            default:
                size = 1 + (r >> 16) % (90 * MiB);
                break;
            }
            if (gm_alloc_malloc(f.a, size, (int64_t)((r >> 40) % 2), &live[slot], NULL) != GM_OK)
                live[slot] = 0;
            else
                assert_true(gm_alloc_block_size(f.a, live[slot]) >=
                            gm_alloc_round_size(&f.conf, size));
        }
        if (r % 97 == 0)
            gm_alloc_empty_cache(f.a);
        check_invariants(f.a);
        assert_true(f.fake.used == reserved(&f));
    }
    for (size_t k = 0; k < 64; k++)
        if (live[k])
            fr(&f, live[k]);
    check_invariants(f.a);
    assert_true(allocated(&f) == 0);
    assert_true(f.a->stats.inactive_split[GM_ALLOC_STAT_ALL].current == 0);
    gm_alloc_empty_cache(f.a);
    assert_true(reserved(&f) == 0);
    teardown(&f);
}

static void test_random_default(void **state)
{
    (void)state;
    random_run(NULL, 0, 88172645463325252ull, 3000);
    random_run(NULL, 512 * MiB, 1234567, 3000);
}

static void test_random_options(void **state)
{
    (void)state;
    random_run("max_split_size_mb:40", 600 * MiB, 42, 3000);
    random_run("roundup_power2_divisions:[1:2,64:4,>:8]", 0, 7, 2000);
    random_run("expandable_segments:True", 0, 99, 3000);
    random_run("expandable_segments:True", 700 * MiB, 5, 3000);
}

/* With expandable segments a freed block still waiting for another stream's work is not
 * free space either: the next request maps new pages beside it rather than taking it (the
 * block before the lowest unmapped one is used only when it is allocatable) */
static void test_expandable_pending_block_not_reused(void **state)
{
    struct fixture f;
    uint64_t p, q, mark;
    (void)state;
    setup(&f, "expandable_segments:True", 0);
    p = m(&f, 20 * MiB); /* one whole page; the rest of the range stays unmapped */
    assert_int_equal(gm_alloc_record_stream(f.a, p, 5, NULL), GM_OK);
    fr(&f, p);
    mark = gm_alloc_stream_mark(f.a);
    q = m(&f, 20 * MiB);
    assert_true(q == p + 20 * MiB);
    assert_true(reserved(&f) == 40 * MiB);
    gm_alloc_stream_passed(f.a, 5, mark);
    fr(&f, q);
    q = m(&f, 40 * MiB); /* the event seen: both pages are one free block again */
    assert_true(q == p);
    assert_true(reserved(&f) == 40 * MiB);
    fr(&f, q);
    teardown(&f);
}

/* A random run of mallocs, frees with record_stream and empty_cache under expandable segments
 * never hands out bytes of a block that is still live */
static void test_expandable_record_stream_no_overlap(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 100; seed++) {
        struct fixture f;
        uint64_t live[32] = {0}, size[32] = {0}, s = seed * 7919;
        setup(&f, "expandable_segments:True", 400 * MiB);
        for (int i = 0; i < 1500; i++) {
            uint64_t r = rng_next(&s), p;
            size_t slot = (size_t)(r % 32);
            if (live[slot]) {
                if ((r >> 8) % 5 == 0)
                    assert_int_equal(gm_alloc_record_stream(f.a, live[slot], 1, NULL), GM_OK);
                fr(&f, live[slot]);
                live[slot] = 0;
            } else {
                uint64_t n = 1 + (r >> 16) % (30 * MiB);
                if (gm_alloc_malloc(f.a, n, (int64_t)((r >> 40) % 2), &p, NULL) == GM_OK) {
                    for (size_t k = 0; k < 32; k++)
                        assert_false(live[k] && p < live[k] + size[k] && live[k] < p + n);
                    live[slot] = p;
                    size[slot] = n;
                }
            }
            if (r % 89 == 0)
                gm_alloc_empty_cache(f.a);
        }
        for (size_t k = 0; k < 32; k++)
            if (live[k])
                fr(&f, live[k]);
        gm_alloc_empty_cache(f.a);
        teardown(&f);
    }
}

/* free, by handle when f->handles */
static void seq_free(struct fixture *f, uint64_t ptr, struct gm_alloc_block *blk)
{
    if (f->handles)
        assert_int_equal(gm_alloc_dealloc_block(f->a, blk, NULL), GM_OK);
    else
        fr(f, ptr);
}

/* A run of mallocs and frees on f's model (leaving blocks live and events outstanding when
 * 'leave'), every pointer it got written to 'got'; some blocks used on another stream
 * (record_stream); by handle when f->handles */
static void seq_run(struct fixture *f, uint64_t seed, int steps, bool leave, uint64_t *got)
{
    uint64_t live[32] = {0};
    struct gm_alloc_block *blk[32] = {NULL};
    uint64_t s = seed;
    for (int i = 0; i < steps; i++) {
        uint64_t r = rng_next(&s);
        size_t slot = (size_t)(r % 32);
        uint64_t size = 1 + (r >> 16) % (30 * MiB);
        int64_t stream = (int64_t)((r >> 40) % 2);
        enum gm_status st;
        got[i] = 0;
        if (live[slot]) {
            if ((r >> 8) % 5 == 0)
                assert_int_equal(f->handles ? gm_alloc_record_stream_block(f->a, blk[slot], 1, NULL)
                                            : gm_alloc_record_stream(f->a, live[slot], 1, NULL),
                                 GM_OK);
            seq_free(f, live[slot], blk[slot]);
            live[slot] = 0;
            continue;
        }
        if (f->handles) {
            st = gm_alloc_malloc_block(f->a, size, stream, &live[slot], &blk[slot], NULL);
            assert_true(st == GM_OK ? blk[slot] != NULL : blk[slot] == NULL);
        } else {
            st = gm_alloc_malloc(f->a, size, stream, &live[slot], NULL);
        }
        if (st == GM_OK)
            got[i] = live[slot];
        else
            live[slot] = 0; /* out of device memory */
        if (r % 89 == 0)
            gm_alloc_empty_cache(f->a);
    }
    for (size_t k = 0; k < 32 && !leave; k++)
        if (live[k])
            seq_free(f, live[k], blk[k]);
}

/* A model reset onto another device and configuration runs as a new one would: the same
 * pointers, statistics and segment events, whatever the run before it left behind. */
static void test_reset_runs_as_new(void **state)
{
    static const char *confs[] = {NULL, "expandable_segments:True", "max_split_size_mb:20"};
    enum { STEPS = 1500 };
    static uint64_t want[STEPS], got[STEPS];
    (void)state;
    for (size_t c = 0; c < 3; c++) {
        struct fixture fresh, reused;
        struct gm_alloc_stats a, b;
        struct gm_alloc_device dev;
        struct gm_error e;
        setup(&fresh, confs[c], 400 * MiB);
        seq_run(&fresh, 1000 + c, STEPS, false, want);
        gm_alloc_get_stats(fresh.a, &a);

        setup(&reused, confs[(c + 1) % 3], 0);
        /* left with live blocks and events */
        seq_run(&reused, 77 + c, STEPS, true, got);
        gm_alloc_conf_init(&reused.conf);
        assert_int_equal(gm_alloc_conf_parse(&reused.conf, confs[c], &e), GM_OK);
        gm_alloc_fakedev_init(&reused.fake, 400 * MiB);
        dev.ops = &gm_alloc_fakedev_ops;
        dev.ctx = &reused.fake;
        dev.total_bytes = 80ull << 30;
        assert_int_equal(gm_alloc_reset(reused.a, &reused.conf, &dev, &e), GM_OK);
        /* the old device got its segments back before the new one was set up */
        gm_alloc_fakedev_init(&reused.fake, 400 * MiB);
        reused.n_ev = 0;
        gm_alloc_set_event_hook(reused.a, on_event, &reused);
        seq_run(&reused, 1000 + c, STEPS, false, got);
        gm_alloc_get_stats(reused.a, &b);

        assert_memory_equal(got, want, sizeof(want));
        assert_memory_equal(&a, &b, sizeof(a));
        assert_int_equal(reused.n_ev, fresh.n_ev);
        assert_memory_equal(reused.ev, fresh.ev, sizeof(fresh.ev));
        assert_memory_equal(reused.ev_size, fresh.ev_size, sizeof(fresh.ev_size));
        teardown(&fresh);
        teardown(&reused);
    }
}

/* A lean model, its blocks freed by handle, gives the same pointers, segment events,
 * segments, reserved and allocated bytes (aggregate), counts and state as a full one freed by
 * address; the statistics it does not keep read 0, an address finds no block in it, and a
 * reset counts everything again. */
static void test_lean_counts_what_peaks_need(void **state)
{
    static const char *confs[] = {NULL, "expandable_segments:True", "max_split_size_mb:20"};
    enum { STEPS = 1500 };
    static uint64_t want[STEPS], got[STEPS];
    (void)state;
    for (size_t c = 0; c < 3; c++) {
        struct fixture full, lean;
        struct gm_alloc_stats a, b;
        struct gm_alloc_device dev;
        struct gm_alloc_block *blk;
        struct gm_error e;
        struct seg_digest la, lb;
        uint64_t sa[64], sb[64], ptr;
        size_t n_sa, n_sb;
        setup(&full, confs[c], 300 * MiB);
        setup(&lean, confs[c], 300 * MiB);
        assert_int_equal(gm_alloc_set_lean(lean.a, NULL), GM_OK);
        lean.handles = true;
        seq_run(&full, 500 + c, STEPS, true, want);
        seq_run(&lean, 500 + c, STEPS, true, got);
        gm_alloc_get_stats(full.a, &a);
        gm_alloc_get_stats(lean.a, &b);
        assert_memory_equal(got, want, sizeof(want));
        assert_int_equal(lean.n_ev, full.n_ev);
        assert_memory_equal(lean.ev, full.ev, sizeof(full.ev));
        assert_memory_equal(lean.ev_size, full.ev_size, sizeof(full.ev_size));
        assert_memory_equal(&b.allocated_bytes[GM_ALLOC_STAT_ALL],
                            &a.allocated_bytes[GM_ALLOC_STAT_ALL], sizeof(struct gm_alloc_stat));
        assert_true(a.allocated_bytes[GM_ALLOC_STAT_ALL].peak > 0);
        assert_memory_equal(b.reserved_bytes, a.reserved_bytes, sizeof(a.reserved_bytes));
        assert_memory_equal(b.segment, a.segment, sizeof(a.segment));
        assert_memory_equal(&b.oversize_segments, &a.oversize_segments,
                            sizeof(a.oversize_segments));
        assert_true(b.num_device_alloc == a.num_device_alloc &&
                    b.num_device_free == a.num_device_free &&
                    b.num_alloc_retries == a.num_alloc_retries && b.num_ooms == a.num_ooms);
        assert_true(b.allocation[GM_ALLOC_STAT_ALL].allocated == 0 &&
                    b.active_bytes[GM_ALLOC_STAT_ALL].peak == 0 &&
                    b.requested_bytes[GM_ALLOC_STAT_ALL].peak == 0 &&
                    b.allocated_bytes[GM_ALLOC_STAT_LARGE_POOL].peak == 0);
        assert_true(a.allocation[GM_ALLOC_STAT_ALL].allocated > 0);
        if (!confs[c]) {
            uint64_t *wa = NULL, *wb = NULL;
            size_t na, nb, ca = 0, cb = 0;
            /* (refused alike while another stream's events are outstanding) */
            assert_int_equal(gm_alloc_state(lean.a, &wb, &nb, &cb, NULL),
                             gm_alloc_state(full.a, &wa, &na, &ca, NULL));
            assert_int_equal(na, nb);
            assert_memory_equal(wa, wb, na * sizeof(*wa));
            gm_free(wa);
            gm_free(wb);
        }
        /* the segments, with their allocated blocks, though no map holds those */
        n_sa = gm_alloc_segment_sizes(full.a, sa, 64);
        n_sb = gm_alloc_segment_sizes(lean.a, sb, 64);
        assert_true(n_sa <= 64 && n_sa == n_sb);
        assert_memory_equal(sa, sb, n_sa * sizeof(*sa));
        memset(&la, 0, sizeof(la));
        memset(&lb, 0, sizeof(lb));
        assert_int_equal(gm_alloc_segments(full.a, digest_segment, &la, NULL), GM_OK);
        assert_int_equal(gm_alloc_segments(lean.a, digest_segment, &lb, NULL), GM_OK);
        assert_true(la.n > 0 && la.n_allocated > 0);
        assert_memory_equal(&la, &lb, sizeof(la));
        /* by address a lean model finds nothing; by handle it frees */
        assert_int_equal(gm_alloc_malloc_block(lean.a, 5000, 0, &ptr, &blk, &e), GM_OK);
        assert_true(ptr != 0 && blk != NULL);
        assert_true(gm_alloc_block_size(lean.a, ptr) == 0);
        assert_int_equal(gm_alloc_record_stream(lean.a, ptr, 1, NULL), GM_ERR_INVALID);
        assert_int_equal(gm_alloc_dealloc(lean.a, ptr, NULL), GM_ERR_INVALID);
        /* lean counting is set before the first request, not with blocks allocated */
        assert_int_equal(gm_alloc_set_lean(lean.a, NULL), GM_ERR_INVALID);
        assert_int_equal(gm_alloc_dealloc_block(lean.a, blk, &e), GM_OK);
        assert_int_equal(gm_alloc_dealloc_block(lean.a, NULL, &e), GM_OK);
        /* a handle freed before is refused and changes nothing */
        gm_alloc_get_stats(lean.a, &b);
        {
            uint64_t before = b.allocated_bytes[GM_ALLOC_STAT_ALL].current;
            assert_int_equal(gm_alloc_dealloc_block(lean.a, blk, NULL), GM_ERR_INVALID);
            assert_int_equal(gm_alloc_record_stream_block(lean.a, blk, 1, NULL), GM_ERR_INVALID);
            gm_alloc_get_stats(lean.a, &b);
            assert_true(b.allocated_bytes[GM_ALLOC_STAT_ALL].current == before);
        }
        /* a reset model counts everything again */
        gm_alloc_fakedev_init(&lean.fake, 300 * MiB);
        dev.ops = &gm_alloc_fakedev_ops;
        dev.ctx = &lean.fake;
        dev.total_bytes = 80ull << 30;
        assert_int_equal(gm_alloc_reset(lean.a, &lean.conf, &dev, &e), GM_OK);
        gm_alloc_fakedev_init(&lean.fake, 300 * MiB);
        seq_run(&lean, 9, 200, true, got);
        gm_alloc_get_stats(lean.a, &b);
        assert_true(b.allocation[GM_ALLOC_STAT_ALL].allocated > 0);
        teardown(&full);
        teardown(&lean);
    }
}

/* The state as words: a pattern of requests that leaves the cache as it found it gives the
 * same words again; one more live block, other words; what the words cannot say is
 * refused. */
static void test_state_words(void **state)
{
    struct fixture f;
    uint64_t *w0 = NULL, *w1 = NULL, *w2 = NULL, p[4];
    size_t n0, n1, n2, c0 = 0, c1 = 0, c2 = 0;
    struct gm_error e;
    (void)state;
    setup(&f, NULL, 0);
    p[0] = m(&f, 3 * MiB);
    for (int round = 0; round < 2; round++) { /* warm: the cache holds these blocks */
        p[1] = m(&f, 7 * MiB);
        p[2] = m(&f, 1000);
        fr(&f, p[1]);
        fr(&f, p[2]);
    }
    assert_int_equal(gm_alloc_state(f.a, &w0, &n0, &c0, &e), GM_OK);
    p[1] = m(&f, 7 * MiB);
    p[2] = m(&f, 1000);
    fr(&f, p[1]);
    fr(&f, p[2]);
    assert_int_equal(gm_alloc_state(f.a, &w1, &n1, &c1, &e), GM_OK);
    assert_int_equal(n0, n1);
    assert_memory_equal(w0, w1, n0 * sizeof(*w0));
    p[3] = m(&f, 1000); /* one more live block */
    assert_int_equal(gm_alloc_state(f.a, &w2, &n2, &c2, &e), GM_OK);
    assert_true(n2 != n1 || memcmp(w1, w2, n1 * sizeof(*w1)) != 0);
    gm_free(w2);
    fr(&f, p[3]);
    gm_free(w1);
    /* a block used on another stream: its events are not in the words */
    assert_int_equal(gm_alloc_record_stream(f.a, p[0], 1, NULL), GM_OK);
    assert_int_equal(gm_alloc_state(f.a, &w0, &n0, &c0, &e), GM_ERR_UNSUPPORTED);
    assert_int_equal(n0, 0);
    fr(&f, p[0]);
    teardown(&f);
    setup(&f, "expandable_segments:True", 0);
    assert_int_equal(gm_alloc_state(f.a, &w0, &n0, &c0, &e), GM_ERR_UNSUPPORTED);
    assert_int_equal(n0, 0);
    gm_free(w0); /* the caller's array, grown on the first call */
    teardown(&f);
}

/* A refused configuration leaves the model as it was. */
static void test_reset_refused_leaves_model(void **state)
{
    struct fixture f;
    struct gm_alloc_conf c;
    struct gm_alloc_device dev;
    uint64_t p;
    (void)state;
    setup(&f, NULL, 0);
    p = m(&f, 5 * MiB);
    gm_alloc_conf_init(&c);
    c.backend = GM_ALLOC_BACKEND_CUDA_MALLOC_ASYNC;
    dev.ops = &gm_alloc_fakedev_ops;
    dev.ctx = &f.fake;
    dev.total_bytes = 80ull << 30;
    assert_int_equal(gm_alloc_reset(f.a, &c, &dev, NULL), GM_ERR_UNSUPPORTED);
    assert_true(allocated(&f) >= 5 * MiB);
    fr(&f, p);
    teardown(&f);
}

/* host allocation failures at every step: clean errors, no leaks (ASan checks) */
/* ---- the ordered block set against a linear scan ---- */

/* the set's order: (stream as unsigned, size, addr), or (stream, addr) */
static bool ref_less(bool by_size, const struct block *x, int64_t stream, uint64_t size,
                     uint64_t addr)
{
    if (x->stream != stream)
        return (uint64_t)x->stream < (uint64_t)stream;
    if (by_size && x->size != size)
        return x->size < size;
    return x->addr < addr;
}

/* the least present block not less than the key (lower_bound by linear scan), or NULL */
static const struct block *ref_lower_bound(bool by_size, struct block *blocks, const bool *in,
                                           size_t n, int64_t stream, uint64_t size, uint64_t addr)
{
    const struct block *best = NULL;
    for (size_t i = 0; i < n; i++)
        if (in[i] && !ref_less(by_size, &blocks[i], stream, size, addr) &&
            (!best || ref_less(by_size, &blocks[i], best->stream, best->size, best->addr)))
            best = &blocks[i];
    return best;
}

/* the greatest present block less than the key, or NULL */
static const struct block *ref_before(bool by_size, struct block *blocks, const bool *in, size_t n,
                                      int64_t stream, uint64_t size, uint64_t addr)
{
    const struct block *best = NULL;
    for (size_t i = 0; i < n; i++)
        if (in[i] && ref_less(by_size, &blocks[i], stream, size, addr) &&
            (!best || ref_less(by_size, best, blocks[i].stream, blocks[i].size, blocks[i].addr)))
            best = &blocks[i];
    return best;
}

/* the trees: one per stream, by ascending stream, their counts adding up to the set's, each
 * block's leaf holding it (what an erase without a search goes by), the order across trees */
static void check_blockset(const struct blockset *s, size_t n_in)
{
    size_t total = 0;
    const struct block *q = NULL;
    struct block *b;
    for (size_t t = 0; t < s->n_trees; t++) {
        const struct gm_btree *tr = &s->trees[t].t;
        if (t > 0)
            assert_true(s->trees[t - 1].stream < s->trees[t].stream);
        assert_true(tr->height <= s->height);
        for (struct gm_btree_pos it = gm_btree_first(tr); it.leaf; gm_btree_next(&it)) {
            b = gm_btree_at(it);
            assert_ptr_equal(b->leaf, it.leaf);
            assert_int_equal((uint64_t)b->stream, s->trees[t].stream);
        }
        total += tr->n;
    }
    assert_int_equal(total, s->n);
    assert_int_equal(s->n, n_in);
    total = 0;
    for (struct blockset_pos it = blockset_first(s); (b = blockset_at(s, it)) != NULL;
         blockset_next(s, &it)) {
        if (q)
            assert_true(ref_less(s->by_size, q, b->stream, b->size, b->addr));
        q = b;
        total++;
    }
    assert_int_equal(total, n_in);
}

static void blockset_random(bool by_size, uint64_t seed)
{
    enum { N = 3000 };
    static const int64_t streams[] = {0, 7, -1}; /* -1 sorts last, as unsigned */
    struct block *blocks = calloc(N, sizeof(*blocks));
    bool *in = calloc(N, sizeof(*in));
    struct blockset s;
    size_t n_in = 0;
    uint64_t r = seed;
    assert_non_null(blocks);
    assert_non_null(in);
    alloc_blockset_init(&s, by_size);
    for (size_t i = 0; i < N; i++) {
        blocks[i].stream = streams[rng_next(&r) % 3];
        blocks[i].size = (rng_next(&r) % 40 + 1) * 512;  /* many equal sizes */
        blocks[i].addr = (uint64_t)(i * 7919 % N) << 20; /* distinct, not in index order */
    }
    for (int step = 0; step < 40000; step++) {
        /* grow towards N, then drain towards empty, twice */
        bool grow = (step / 10000) % 2 == 0;
        size_t i = (size_t)(rng_next(&r) % N);
        uint64_t op = rng_next(&r) % 8;
        if (op < 4) {
            if (in[i] == grow) {
                /* erasing or inserting what is already so: erase of an absent block fails */
                if (!in[i])
                    assert_false(alloc_blockset_erase(&s, &blocks[i]));
                continue;
            }
            if (grow) {
                assert_int_equal(alloc_blockset_insert(&s, &blocks[i]), GM_OK);
                n_in++;
            } else if (op & 1) {
                assert_true(alloc_blockset_erase(&s, &blocks[i]));
                n_in--;
            } else {
                /* erase at the position lower_bound finds for the block's own key */
                struct blockset_ent key =
                    blockset_key(&s, blocks[i].stream, blocks[i].size, blocks[i].addr);
                struct blockset_pos p = alloc_blockset_lower_bound(&s, &key);
                assert_ptr_equal(blockset_at(&s, p), &blocks[i]);
                alloc_blockset_erase_at(&s, p);
                n_in--;
            }
            in[i] = grow;
        } else {
            /* lower_bound of a key that may or may not be present, and its neighbours */
            int64_t stream = streams[rng_next(&r) % 3];
            uint64_t size = (rng_next(&r) % 42) * 512;
            uint64_t addr = (rng_next(&r) % (N + 2)) << 20;
            struct blockset_ent key = blockset_key(&s, stream, size, addr);
            struct blockset_pos p = alloc_blockset_lower_bound(&s, &key);
            const struct block *want = ref_lower_bound(by_size, blocks, in, N, stream, size, addr);
            const struct block *before = ref_before(by_size, blocks, in, N, stream, size, addr);
            assert_ptr_equal(blockset_at(&s, p), want);
            if (want) {
                struct blockset_pos nx = p;
                const struct block *after = ref_lower_bound(by_size, blocks, in, N, want->stream,
                                                            want->size, want->addr + 1);
                blockset_next(&s, &nx);
                assert_ptr_equal(blockset_at(&s, nx), after);
            }
            if (blockset_prev(&s, &p))
                assert_ptr_equal(blockset_at(&s, p), before);
            else
                assert_null(before);
        }
        if (step % 500 == 0)
            check_blockset(&s, n_in);
    }
    check_blockset(&s, n_in);
    alloc_blockset_release(&s);
    free(in);
    free(blocks);
}

static void test_blockset_random_by_size(void **state)
{
    (void)state;
    blockset_random(true, 0x9E3779B97F4A7C15ull);
}

static void test_blockset_random_by_addr(void **state)
{
    (void)state;
    blockset_random(false, 0xD1B54A32D192ED03ull);
}

static void test_host_alloc_failures(void **state)
{
    (void)state;
    for (long n = 0; n < 40; n++) {
        struct gm_alloc_conf c;
        struct gm_alloc_fakedev fake;
        struct gm_alloc_device dev = {&gm_alloc_fakedev_ops, &fake, 1ull << 34};
        struct gm_alloc *a = NULL;
        uint64_t p[8] = {0};
        gm_alloc_fakedev_init(&fake, 0);
        gm_alloc_conf_init(&c);
        c.expandable_segments = (n % 2) != 0;
        gm_alloc_fail_after(n);
        if (gm_alloc_new(&c, &dev, &a, NULL) == GM_OK) {
            for (int i = 0; i < 8; i++)
                (void)gm_alloc_malloc(a, (uint64_t)(i + 1) * 3 * MiB, 0, &p[i], NULL);
            for (int i = 0; i < 8; i += 2)
                (void)gm_alloc_dealloc(a, p[i], NULL);
            gm_alloc_empty_cache(a);
        }
        gm_alloc_fail_after(-1);
        gm_alloc_free(a);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vec_malloc_1),
        cmocka_unit_test(test_vec_one_mib_is_small),
        cmocka_unit_test(test_vec_just_over_one_mib),
        cmocka_unit_test(test_vec_ten_mib_exact),
        cmocka_unit_test(test_vec_eleven_mib_plus_one),
        cmocka_unit_test(test_vec_six_mib_twice_then_empty),
        cmocka_unit_test(test_vec_twelve_free_ten),
        cmocka_unit_test(test_vec_max_split),
        cmocka_unit_test(test_vec_roundup_divisions),
        cmocka_unit_test(test_malloc_zero),
        cmocka_unit_test(test_round_size),
        cmocka_unit_test(test_segments_by_address_with_their_blocks),
        cmocka_unit_test(test_segments_of_expandable_ranges),
        cmocka_unit_test(test_expandable_worked_example),
        cmocka_unit_test(test_expandable_small_pages_and_unmap),
        cmocka_unit_test(test_expandable_reuse_after_unmap),
        cmocka_unit_test(test_expandable_best_fit_prefers_a_block_that_cannot_grow),
        cmocka_unit_test(test_expandable_streams_keep_their_pages),
        cmocka_unit_test(test_expandable_range_rounds_up_to_pages),
        cmocka_unit_test(test_reset_peak),
        cmocka_unit_test(test_streams_do_not_share),
        cmocka_unit_test(test_record_stream_defers_reuse),
        cmocka_unit_test(test_expandable_pending_block_not_reused),
        cmocka_unit_test(test_expandable_record_stream_no_overlap),
        cmocka_unit_test(test_record_stream_marks_and_streams),
        cmocka_unit_test(test_record_stream_sync_paths),
        cmocka_unit_test(test_oom_retry_frees_cache),
        cmocka_unit_test(test_oom_release_available),
        cmocka_unit_test(test_memory_fraction_and_gc),
        cmocka_unit_test(test_conf_parse_ok),
        cmocka_unit_test(test_conf_parse_errors),
        cmocka_unit_test(test_cuda_malloc_async_refused),
        cmocka_unit_test(test_stats_json),
        cmocka_unit_test(test_random_default),
        cmocka_unit_test(test_random_options),
        cmocka_unit_test(test_reset_runs_as_new),
        cmocka_unit_test(test_reset_refused_leaves_model),
        cmocka_unit_test(test_state_words),
        cmocka_unit_test(test_lean_counts_what_peaks_need),
        cmocka_unit_test(test_blockset_random_by_size),
        cmocka_unit_test(test_blockset_random_by_addr),
        cmocka_unit_test(test_host_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
