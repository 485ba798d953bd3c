/* SPDX-License-Identifier: MIT */
/* test_bands.c - the allocations a timeline draws one by one (gpumem/bands.h): those alive at
 * the start or the end come first (largest area first, a quarter of the budget kept for the
 * others), the others are spread over the whole axis, ties are broken by a total order, the
 * windows of zoomed views hold their largest clipped areas, and the bands alive after any
 * event plus the rest by category add up to what is alive then. */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "gpumem/bands.h"

#include <stdlib.h>
#include <string.h>

/* An axis of event indexes (no time): x of event k is k. */
static struct gm_lod_axis axis(size_t n_events)
{
    struct gm_lod_axis ax;
    memset(&ax, 0, sizeof(ax));
    ax.n_events = n_events;
    ax.x_end = (double)n_events;
    return ax;
}

static struct gm_analysis_alloc mk(int32_t k0, int32_t k1, uint64_t bytes, uint8_t cat,
                                   uint64_t addr)
{
    struct gm_analysis_alloc a;
    memset(&a, 0, sizeof(a));
    a.alloc_event = k0;
    a.free_event = k1;
    a.bytes = bytes;
    a.category = cat;
    a.addr = addr;
    return a;
}

static bool chosen(const struct gm_bands *b, uint32_t i)
{
    return b->is_band[i] != 0;
}

static void test_edges_first_and_a_quarter_for_the_others(void **state)
{
    /* 100 events; in alloc order as the analysis keeps them (those from the start first) */
    struct gm_analysis_alloc al[] = {
        mk(-1, -1, 1000, GM_CATEGORY_PARAMETER, 0x1000),  /* 0: area 100000 */
        mk(-1, -1, 10, GM_CATEGORY_PARAMETER, 0x2000),    /* 1: area 1000 */
        mk(-1, 50, 100, GM_CATEGORY_PARAMETER, 0x3000),   /* 2: area 5000 */
        mk(10, 20, 5000, GM_CATEGORY_ACTIVATION, 0x4000), /* 3: area 50000, inner */
        mk(20, 90, 400, GM_CATEGORY_ACTIVATION, 0x5000),  /* 4: area 28000, inner */
        mk(30, -1, 20, GM_CATEGORY_OTHER, 0x6000),        /* 5: area 1400, alive at the end */
        mk(40, 41, 9000, GM_CATEGORY_OTHER, 0x7000),      /* 6: area 9000, inner */
    };
    struct gm_analysis_device ad;
    struct gm_lod_axis ax = axis(100);
    struct gm_bands_opts o = {4, 0, 0};
    struct gm_bands b;
    struct gm_error err;
    (void)state;
    memset(&ad, 0, sizeof(ad));
    ad.allocs = al;
    ad.n_allocs = sizeof(al) / sizeof(al[0]);
    assert_int_equal(gm_bands_choose(&ad, &ax, &o, &b, &err), GM_OK);
    /* 4 bands: 3 of the 4 edge ones (the quarter kept for the others), largest areas first */
    assert_int_equal(b.n, 4);
    assert_int_equal(b.n_edge, 3);
    assert_true(chosen(&b, 0) && chosen(&b, 2) && chosen(&b, 5));
    assert_false(chosen(&b, 1)); /* the smallest edge area */
    /* the largest inner area, not the largest inner allocation (6) */
    assert_true(chosen(&b, 3));
    assert_false(chosen(&b, 6) || chosen(&b, 4));
    /* stacked in allocation order, the oldest at the bottom */
    assert_int_equal(b.allocs[0], 0);
    assert_int_equal(b.allocs[1], 2);
    assert_int_equal(b.allocs[2], 3);
    assert_int_equal(b.allocs[3], 5);
    gm_bands_release(&b);

    /* a budget larger than the edge ones and no inner one left out: all edge ones */
    o.max_bands = 10;
    assert_int_equal(gm_bands_choose(&ad, &ax, &o, &b, &err), GM_OK);
    assert_int_equal(b.n, 7);
    assert_int_equal(b.n_edge, 4);
    gm_bands_release(&b);

    /* without others, the edge ones take the whole budget */
    ad.n_allocs = 3;
    o.max_bands = 3;
    assert_int_equal(gm_bands_choose(&ad, &ax, &o, &b, &err), GM_OK);
    assert_int_equal(b.n, 3);
    assert_int_equal(b.n_edge, 3);
    gm_bands_release(&b);
}

static void test_spread_over_the_whole_axis(void **state)
{
    /* 3200 events; 64 large short allocations in the first 100 events, and one small one
     * of 10 events every 10 events over the whole trace: a pure "largest area" rule would
     * draw only the first 100 events */
    size_t n = 64 + 320, ne = 3200, k = 0, nbig = 0;
    struct gm_analysis_alloc *al = calloc(n, sizeof(*al));
    struct gm_analysis_device ad;
    struct gm_lod_axis ax = axis(ne);
    struct gm_bands_opts o = {64, 0, 0};
    struct gm_bands b;
    struct gm_error err;
    unsigned covered[GM_BANDS_SPREAD] = {0};
    (void)state;
    assert_non_null(al);
    /* in alloc order */
    for (int32_t t = 0; t < (int32_t)ne; t += 10) {
        for (int j = 0; j < 7 && nbig < 64; j++, nbig++)
            al[k] = mk(t, t + 5, 1u << 20, GM_CATEGORY_ACTIVATION, 0x100000u * k), k++;
        al[k] = mk(t, t + 10, 1000, GM_CATEGORY_OTHER, 0x1000u * k), k++;
    }
    assert_int_equal(k, n);
    memset(&ad, 0, sizeof(ad));
    ad.allocs = al;
    ad.n_allocs = n;
    assert_int_equal(gm_bands_choose(&ad, &ax, &o, &b, &err), GM_OK);
    assert_int_equal(b.n, 64);
    assert_int_equal(b.n_edge, 0);
    for (size_t i = 0; i < b.n; i++) {
        const struct gm_analysis_alloc *a = &al[b.allocs[i]];
        covered[(size_t)a->alloc_event * GM_BANDS_SPREAD / ne]++;
        if (i)
            assert_true(al[b.allocs[i - 1]].alloc_event <= a->alloc_event);
    }
    /* every slice of the axis has its bands, two each (64 / 32) */
    for (unsigned s = 0; s < GM_BANDS_SPREAD; s++)
        assert_int_equal(covered[s], 2);
    gm_bands_release(&b);
    free(al);
}

static void test_ties_by_a_total_order(void **state)
{
    /* equal areas: the larger first, then the older, then the first in the analysis' order */
    struct gm_analysis_alloc al[] = {
        mk(0, 10, 100, GM_CATEGORY_OTHER, 0x10),   /* area 1000 */
        mk(0, 20, 50, GM_CATEGORY_OTHER, 0x20),    /* area 1000 */
        mk(5, 15, 100, GM_CATEGORY_OTHER, 0x30),   /* area 1000 */
        mk(5, 15, 100, GM_CATEGORY_OTHER, 0x40),   /* area 1000 */
        mk(20, 21, 1000, GM_CATEGORY_OTHER, 0x50), /* area 1000 */
    };
    struct gm_analysis_device ad;
    struct gm_lod_axis ax = axis(2); /* one slice of the axis holds everything */
    struct gm_bands_opts o = {2, 0, 0};
    struct gm_bands b;
    struct gm_error err;
    (void)state;
    ax.x_end = 100; /* events past n_events: x is still k */
    ax.n_events = 100;
    memset(&ad, 0, sizeof(ad));
    ad.allocs = al;
    ad.n_allocs = 5;
    assert_int_equal(gm_bands_choose(&ad, &ax, &o, &b, &err), GM_OK);
    assert_int_equal(b.n, 2);
    assert_true(chosen(&b, 4)); /* the largest */
    assert_true(chosen(&b, 0)); /* then of the 100-byte ones, the oldest */
    gm_bands_release(&b);
    o.max_bands = 3;
    assert_int_equal(gm_bands_choose(&ad, &ax, &o, &b, &err), GM_OK);
    assert_true(chosen(&b, 2) && !chosen(&b, 3)); /* same age: the first */
    gm_bands_release(&b);
}

/* a small random trace: alloc k -> free later or never */
static struct gm_analysis_alloc *random_trace(size_t ne, size_t *n_out, unsigned seed)
{
    struct gm_analysis_alloc *al = calloc(ne + 20, sizeof(*al));
    size_t n = 0;
    srand(seed);
    for (int i = 0; i < 20; i++)
        al[n] = mk(-1, rand() % 3 ? -1 : (int32_t)(rand() % (int)ne), (uint64_t)(rand() % 5000 + 1),
                   (uint8_t)(rand() % GM_CATEGORY_COUNT), (uint64_t)n * 0x1000),
        n++;
    for (int32_t k = 0; k < (int32_t)ne; k++) {
        int32_t f;
        if (rand() % 2)
            continue;
        f = rand() % 4 ? k + 1 + rand() % ((int)ne - k) : -1;
        if (f >= (int32_t)ne)
            f = -1;
        al[n] = mk(k, f, (uint64_t)(rand() % 100000 + 1), (uint8_t)(rand() % GM_CATEGORY_COUNT),
                   (uint64_t)n * 0x1000);
        n++;
    }
    *n_out = n;
    return al;
}

static bool alive(const struct gm_analysis_alloc *a, int64_t k)
{
    return a->alloc_event <= k && (a->free_event < 0 || a->free_event > k);
}

static void test_bands_and_rest_add_up(void **state)
{
    (void)state;
    for (unsigned seed = 1; seed <= 20; seed++) {
        size_t ne = 300, n;
        struct gm_analysis_alloc *al = random_trace(ne, &n, seed);
        struct gm_analysis_device ad;
        struct gm_lod_axis ax = axis(ne);
        struct gm_bands_opts o = {(uint32_t)(seed * 3), 8, 5};
        struct gm_bands b;
        struct gm_error err;
        int64_t ks[302];
        uint64_t(*rest)[GM_CATEGORY_COUNT] = calloc(302, sizeof(*rest));
        memset(&ad, 0, sizeof(ad));
        ad.allocs = al;
        ad.n_allocs = n;
        assert_int_equal(gm_bands_choose(&ad, &ax, &o, &b, &err), GM_OK);
        /* is_band, which held the areas' codes while the windows were chosen, is 1 for the
         * bands and 0 for the others again */
        {
            size_t ones = 0;
            for (size_t i = 0; i < n; i++) {
                assert_true(b.is_band[i] <= 1);
                ones += b.is_band[i];
            }
            assert_int_equal(ones, b.n);
        }
        /* the events asked in reverse order: the answer follows the question */
        for (int64_t k = -1; k < (int64_t)ne; k++)
            ks[ne - 1 - k] = k;
        assert_int_equal(gm_bands_rest_at(&ad, &b, ks, ne + 1, rest, &err), GM_OK);
        for (size_t q = 0; q <= ne; q++) {
            uint64_t want[GM_CATEGORY_COUNT] = {0}, bands = 0, all = 0, got = 0;
            for (size_t i = 0; i < n; i++) {
                if (!alive(&al[i], ks[q]))
                    continue;
                all += al[i].bytes;
                if (b.is_band[i])
                    bands += al[i].bytes;
                else
                    want[al[i].category] += al[i].bytes;
            }
            for (int c = 0; c < GM_CATEGORY_COUNT; c++) {
                assert_int_equal(rest[q][c], want[c]);
                got += rest[q][c];
            }
            assert_int_equal(bands + got, all);
        }
        /* asked again in event order, every event twice: the same answers */
        {
            int64_t up[604];
            uint64_t(*again)[GM_CATEGORY_COUNT] = calloc(604, sizeof(*again));
            for (size_t q = 0; q < 2 * (ne + 1); q++)
                up[q] = (int64_t)(q / 2) - 1;
            assert_int_equal(gm_bands_rest_at(&ad, &b, up, 2 * (ne + 1), again, &err), GM_OK);
            for (size_t q = 0; q < 2 * (ne + 1); q++)
                assert_memory_equal(again[q], rest[ne - 1 - (size_t)up[q]], sizeof(again[q]));
            free(again);
        }
        /* the windows: bands of their own, alive in them, the largest clipped areas */
        for (size_t w = 0; w < b.n_windows; w++) {
            const struct gm_bands_window *bw = &b.windows[w];
            double least = -1;
            assert_true(bw->n >= 1 && bw->n <= o.per_window);
            for (size_t j = 0; j < bw->n; j++) {
                const struct gm_analysis_alloc *a = &al[bw->allocs[j]];
                int64_t end = a->free_event < 0 ? (int64_t)ne : a->free_event;
                double x0 = a->alloc_event < bw->k0 ? (double)bw->k0 : (double)a->alloc_event;
                double x1 = end > bw->k1 ? (double)bw->k1 : (double)end;
                double area = (double)a->bytes * (x1 - x0);
                assert_false(b.is_band[bw->allocs[j]]);
                assert_true(a->alloc_event < bw->k1 && end > bw->k0);
                if (least < 0 || area < least)
                    least = area;
            }
            if (bw->n == o.per_window)
                for (size_t i = 0; i < n; i++) {
                    const struct gm_analysis_alloc *a = &al[i];
                    int64_t end = a->free_event < 0 ? (int64_t)ne : a->free_event;
                    double x0, x1;
                    bool in = false;
                    if (b.is_band[i] || a->alloc_event >= bw->k1 || end <= bw->k0)
                        continue;
                    for (size_t j = 0; j < bw->n; j++)
                        in = in || bw->allocs[j] == i;
                    x0 = a->alloc_event < bw->k0 ? (double)bw->k0 : (double)a->alloc_event;
                    x1 = end > bw->k1 ? (double)bw->k1 : (double)end;
                    if (!in)
                        assert_true((double)a->bytes * (x1 - x0) <= least);
                }
        }
        gm_bands_release(&b);
        free(rest);
        free(al);
    }
}

/* gm_bands_rest_from() (the bytes by category of everything alive given, the bands taken
 * off) answers as gm_bands_rest_at() does: random traces, questions in event order with
 * repeats (as the buckets of a timeline carry their kmax), and out of order (then it is
 * rest_at's answer). */
static void test_rest_from_all_equals_rest_at(void **state)
{
    (void)state;
    for (unsigned seed = 1; seed <= 20; seed++) {
        size_t ne = 300, n, nq = 0;
        struct gm_analysis_alloc *al = random_trace(ne, &n, seed + 100);
        struct gm_analysis_device ad;
        struct gm_lod_axis ax = axis(ne);
        struct gm_bands_opts o = {(uint32_t)(seed * 5), 0, 0};
        struct gm_bands b;
        struct gm_error err;
        int64_t ks[1000];
        uint64_t(*all)[GM_CATEGORY_COUNT] = calloc(1000, sizeof(*all));
        uint64_t(*want)[GM_CATEGORY_COUNT] = calloc(1000, sizeof(*want));
        uint64_t(*got)[GM_CATEGORY_COUNT] = calloc(1000, sizeof(*got));
        memset(&ad, 0, sizeof(ad));
        ad.allocs = al;
        ad.n_allocs = n;
        assert_int_equal(gm_bands_choose(&ad, &ax, &o, &b, &err), GM_OK);
        for (int64_t k = -1; k < (int64_t)ne; k += 1 + (int64_t)(seed % 3))
            for (unsigned r = 0; r <= (unsigned)(k + seed) % 3; r++)
                ks[nq++] = k;
        for (size_t q = 0; q < nq; q++)
            for (size_t i = 0; i < n; i++)
                if (alive(&al[i], ks[q]))
                    all[q][al[i].category] += al[i].bytes;
        assert_int_equal(gm_bands_rest_at(&ad, &b, ks, nq, want, &err), GM_OK);
        assert_int_equal(gm_bands_rest_from(&ad, &b, ks, nq, &all[0][0], got, &err), GM_OK);
        assert_memory_equal(got, want, nq * sizeof(*got));
        /* out of order: rest_at's answer, 'all' not read */
        {
            int64_t t = ks[0];
            ks[0] = ks[nq - 1];
            ks[nq - 1] = t;
            memset(all, 0xff, 1000 * sizeof(*all));
            assert_int_equal(gm_bands_rest_at(&ad, &b, ks, nq, want, &err), GM_OK);
            assert_int_equal(gm_bands_rest_from(&ad, &b, ks, nq, &all[0][0], got, &err), GM_OK);
            assert_memory_equal(got, want, nq * sizeof(*got));
        }
        gm_bands_release(&b);
        free(all);
        free(want);
        free(got);
        free(al);
    }
}

/* A window's choice skips an allocation whose whole area, as a coded bound, is below the
 * heap's root; the bound must round up (bands.c area_code).  Area 3 x 11184811 = 33554433
 * = 2^25 + 1 has no code: rounded to nearest (or down) it would be 2^25, below the root's
 * exact 33554433, and allocation 2, which ties on area and wins on bytes, would be turned
 * away for allocation 1 (planting round-to-nearest makes this test fail). */
static void test_window_area_bound_rounds_up(void **state)
{
    struct gm_analysis_alloc al[] = {
        mk(-1, -1, (uint64_t)1 << 40, GM_CATEGORY_PARAMETER, 0x1000), /* 0: the band */
        mk(10, 13, 11184811, GM_CATEGORY_ACTIVATION, 0x2000),         /* 1: area 33554433 */
        mk(20, 21, 33554433, GM_CATEGORY_ACTIVATION, 0x3000),         /* 2: same area, more bytes */
    };
    struct gm_analysis_device ad;
    struct gm_lod_axis ax = axis(100);
    struct gm_bands_opts o = {1, 1, 1}; /* one band, one window holding one allocation */
    struct gm_bands b;
    struct gm_error err;
    (void)state;
    memset(&ad, 0, sizeof(ad));
    ad.allocs = al;
    ad.n_allocs = 3;
    assert_int_equal(gm_bands_choose(&ad, &ax, &o, &b, &err), GM_OK);
    assert_int_equal(b.n, 1);
    assert_int_equal(b.allocs[0], 0);
    assert_int_equal(b.n_windows, 1);
    assert_int_equal(b.windows[0].n, 1);
    assert_int_equal(b.windows[0].allocs[0], 2);
    gm_bands_release(&b);
}

/* The rule of gpumem/bands.h worked out by sorting every allocation (the library keeps only
 * bounded heaps, in one pass over them): ref_better() is bands.c's order of candidates. */
struct ref_cand {
    double area;
    uint64_t bytes;
    int32_t k;
    uint32_t i;
};

static int ref_better(const void *pa, const void *pb)
{
    const struct ref_cand *x = pa, *y = pb;
    if (x->area != y->area)
        return x->area > y->area ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->k != y->k)
        return x->k < y->k ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static int cmp_index(const void *pa, const void *pb)
{
    uint32_t x = *(const uint32_t *)pa, y = *(const uint32_t *)pb;
    return (x > y) - (x < y);
}

/* 'got' (n indexes, any order) equals want[0..n) as sets */
static void assert_same_set(const uint32_t *got, uint32_t *want, size_t n)
{
    uint32_t *g = malloc((n ? n : 1) * sizeof(*g));
    memcpy(g, got, n * sizeof(*g));
    qsort(g, n, sizeof(*g), cmp_index);
    qsort(want, n, sizeof(*want), cmp_index);
    assert_memory_equal(g, want, n * sizeof(*g));
    free(g);
}

/* The bands of the whole trace and of each window equal the rule's, worked out by sorting, on
 * random traces with budgets from a few to all, and windows whose best would be bands (a
 * window must still get its per_window others: fails if a window keeps fewer candidates than
 * its share plus the budget, or if a kind takes more than its share). */
static void test_choice_equals_sorting(void **state)
{
    (void)state;
    for (unsigned seed = 1; seed <= 40; seed++) {
        size_t ne = 200 + seed, n, n_edge = 0, n_ref = 0, n_pick = 0, n_win = 0;
        struct gm_analysis_alloc *al = random_trace(ne, &n, seed + 300);
        struct gm_analysis_device ad;
        struct gm_lod_axis ax = axis(ne);
        struct gm_bands_opts o = {(uint32_t)(1 + seed * 7 % 120), 1 + seed % 9, 1 + seed % 6};
        struct gm_bands b;
        struct gm_error err;
        struct ref_cand *edge = calloc(n, sizeof(*edge)), *inner = calloc(n, sizeof(*inner));
        struct ref_cand *slice[GM_BANDS_SPREAD], *pick = calloc(n, sizeof(*pick));
        size_t n_slice[GM_BANDS_SPREAD] = {0}, n_inner = 0, max, edge_take, take_inner, per_slice;
        uint32_t *ref = calloc(n, sizeof(*ref));
        bool *band = calloc(n, sizeof(*band));
        memset(&ad, 0, sizeof(ad));
        ad.allocs = al;
        ad.n_allocs = n;
        for (unsigned s = 0; s < GM_BANDS_SPREAD; s++)
            slice[s] = calloc(n, sizeof(*slice[s]));
        assert_int_equal(gm_bands_choose(&ad, &ax, &o, &b, &err), GM_OK);
        max = o.max_bands < n ? o.max_bands : n;
        for (size_t i = 0; i < n; i++) {
            const struct gm_analysis_alloc *a = &al[i];
            double x0 = a->alloc_event < 0 ? 0 : a->alloc_event;
            double x1 = a->free_event < 0 ? (double)ne : a->free_event;
            struct ref_cand c = {(double)a->bytes * (x1 - x0), a->bytes, a->alloc_event,
                                 (uint32_t)i};
            if (a->alloc_event < 0 || a->free_event < 0) {
                edge[n_edge++] = c;
            } else {
                double mid = (x0 + x1) / 2 / (double)ne * GM_BANDS_SPREAD;
                unsigned s = mid >= GM_BANDS_SPREAD ? GM_BANDS_SPREAD - 1 : (unsigned)mid;
                slice[s][n_slice[s]++] = c;
                inner[n_inner++] = c;
            }
        }
        edge_take = max - (n_inner < max / 4 ? n_inner : max / 4);
        if (edge_take > n_edge)
            edge_take = n_edge;
        take_inner = max - edge_take < n_inner ? max - edge_take : n_inner;
        per_slice = (take_inner + GM_BANDS_SPREAD - 1) / GM_BANDS_SPREAD;
        qsort(edge, n_edge, sizeof(*edge), ref_better);
        for (size_t j = 0; j < edge_take; j++)
            band[ref[n_ref++] = edge[j].i] = true;
        assert_int_equal(b.n_edge, edge_take);
        for (unsigned s = 0; s < GM_BANDS_SPREAD; s++) {
            qsort(slice[s], n_slice[s], sizeof(*slice[s]), ref_better);
            for (size_t j = 0; j < n_slice[s] && j < per_slice; j++)
                pick[n_pick++] = slice[s][j];
        }
        qsort(pick, n_pick, sizeof(*pick), ref_better);
        for (size_t j = 0; j < n_pick && n_ref < max; j++)
            band[ref[n_ref++] = pick[j].i] = true;
        qsort(inner, n_inner, sizeof(*inner), ref_better);
        for (size_t j = 0; j < take_inner && n_ref < max; j++)
            if (!band[inner[j].i])
                band[ref[n_ref++] = inner[j].i] = true;
        assert_int_equal(b.n, n_ref);
        assert_same_set(b.allocs, ref, n_ref);
        /* each window: the best per_window of the others alive in it, by clipped area */
        for (size_t w = 0; n_ref < n && w < o.n_windows; w++) {
            int64_t k0 = (int64_t)(ne * w / o.n_windows),
                    k1 = (int64_t)(ne * (w + 1) / o.n_windows);
            size_t nc = 0;
            for (size_t i = 0; i < n; i++) {
                const struct gm_analysis_alloc *a = &al[i];
                int64_t end = a->free_event < 0 ? (int64_t)ne : a->free_event;
                double x0 = a->alloc_event < 0 ? 0 : a->alloc_event;
                double x1 = a->free_event < 0 ? (double)ne : a->free_event;
                if (band[i] || a->alloc_event >= k1 || end <= k0 || k1 <= k0)
                    continue;
                x0 = x0 > (double)k0 ? x0 : (double)k0;
                x1 = x1 < (double)k1 ? x1 : (double)k1;
                pick[nc++] = (struct ref_cand){(double)a->bytes * (x1 - x0 > 0 ? x1 - x0 : 0),
                                               a->bytes, a->alloc_event, (uint32_t)i};
            }
            if (!nc)
                continue;
            qsort(pick, nc, sizeof(*pick), ref_better);
            if (nc > o.per_window)
                nc = o.per_window;
            for (size_t j = 0; j < nc; j++)
                ref[j] = pick[j].i;
            assert_true(n_win < b.n_windows);
            assert_int_equal(b.windows[n_win].k0, k0);
            assert_int_equal(b.windows[n_win].n, nc);
            assert_same_set(b.windows[n_win].allocs, ref, nc);
            n_win++;
        }
        assert_int_equal(b.n_windows, n_win);
        gm_bands_release(&b);
        for (unsigned s = 0; s < GM_BANDS_SPREAD; s++)
            free(slice[s]);
        free(edge);
        free(inner);
        free(pick);
        free(ref);
        free(band);
        free(al);
    }
}

static void test_empty(void **state)
{
    struct gm_analysis_device ad;
    struct gm_lod_axis ax = axis(0);
    struct gm_bands b;
    struct gm_error err;
    uint64_t rest[1][GM_CATEGORY_COUNT];
    int64_t k = -1;
    (void)state;
    memset(&ad, 0, sizeof(ad));
    assert_int_equal(gm_bands_choose(&ad, &ax, NULL, &b, &err), GM_OK);
    assert_int_equal(b.n, 0);
    assert_int_equal(gm_bands_rest_at(&ad, &b, &k, 1, rest, &err), GM_OK);
    for (int c = 0; c < GM_CATEGORY_COUNT; c++)
        assert_int_equal(rest[0][c], 0);
    gm_bands_release(&b);
    gm_bands_release(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edges_first_and_a_quarter_for_the_others),
        cmocka_unit_test(test_spread_over_the_whole_axis),
        cmocka_unit_test(test_ties_by_a_total_order),
        cmocka_unit_test(test_bands_and_rest_add_up),
        cmocka_unit_test(test_rest_from_all_equals_rest_at),
        cmocka_unit_test(test_window_area_bound_rounds_up),
        cmocka_unit_test(test_choice_equals_sorting),
        cmocka_unit_test(test_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
