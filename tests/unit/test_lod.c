/* SPDX-License-Identifier: MIT */
/* test_lod.c - level-of-detail series (gpumem/lod.h): every bucket keeps the exact minimum
 * and maximum of the step function it covers, an idle gap holds the value memory had during
 * it (not a stale maximum), points in one microsecond all count, a coarsened level equals
 * the level built directly, and time going backwards in a damaged file is absorbed; a
 * bucket's end found for whole x's adds the points as the lookup does; the axis that keeps
 * every x and its timeline from one walk equal the two passes; points added to a copy of
 * the current bucket and written back equal those added in place. */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "base/big.h"
#include "gpumem/lod.h"
#include "snapshot/snapshot_int.h"

#include <math.h>
#include <string.h>

static void test_gap_and_carry(void **state)
{
    struct gm_lod l;
    struct gm_error err;
    (void)state;
    assert_int_equal(gm_lod_init(&l, 0.0, 10.0, 10, &err), GM_OK);
    assert_int_equal(gm_lod_add(&l, 0.0, -1, 0), GM_LOD_NEW | GM_LOD_MIN | GM_LOD_MAX);
    /* exactly on the start of bucket 1: the value before does not hold in it */
    assert_int_equal(gm_lod_add(&l, 1.0, 0, 100), GM_LOD_NEW | GM_LOD_MIN | GM_LOD_MAX);
    assert_int_equal(gm_lod_add(&l, 1.5, 1, 10), GM_LOD_MIN);
    /* inside bucket 4: the carried 10 holds from its start */
    assert_int_equal(gm_lod_add(&l, 4.5, 2, 50), GM_LOD_NEW | GM_LOD_MAX);
    gm_lod_finish(&l);
    assert_int_equal(l.b[0].min, 0);
    assert_int_equal(l.b[0].max, 0);
    assert_int_equal(l.b[1].min, 10);
    assert_int_equal(l.b[1].max, 100);
    assert_int_equal(l.b[1].kmax, 0);
    assert_int_equal(l.b[1].last, 10);
    assert_int_equal(l.b[1].n, 2);
    /* the idle gap holds 10, never the 100 of bucket 1 */
    for (int b = 2; b < 4; b++) {
        assert_int_equal(l.b[b].min, 10);
        assert_int_equal(l.b[b].max, 10);
        assert_int_equal(l.b[b].n, 0);
        assert_int_equal(l.b[b].klast, 1);
    }
    assert_int_equal(l.b[4].min, 10);
    assert_int_equal(l.b[4].kmin, 1);
    assert_int_equal(l.b[4].max, 50);
    for (int b = 5; b < 10; b++) {
        assert_int_equal(l.b[b].min, 50);
        assert_int_equal(l.b[b].max, 50);
    }
    gm_lod_release(&l);
}

static void test_same_instant_and_backwards(void **state)
{
    struct gm_lod l;
    struct gm_error err;
    (void)state;
    assert_int_equal(gm_lod_init(&l, 0.0, 4.0, 4, &err), GM_OK);
    gm_lod_add(&l, 0.0, -1, 5);
    /* a transient state in one microsecond (an alloc and its free at one time_us) */
    gm_lod_add(&l, 2.2, 0, 900);
    gm_lod_add(&l, 2.2, 1, 7);
    /* time going backwards (a damaged file): counted where the trace is */
    assert_int_equal(gm_lod_peek(&l, 0.5), 2u);
    assert_int_equal(gm_lod_add(&l, 0.5, 2, 1), GM_LOD_MIN);
    gm_lod_finish(&l);
    assert_int_equal(l.b[2].max, 900);
    assert_int_equal(l.b[2].min, 1);
    assert_int_equal(l.b[0].max, 5);
    assert_int_equal(l.b[1].max, 5);
    assert_int_equal(l.b[3].max, 1);
    /* clamped outside the axis */
    assert_int_equal(gm_lod_bucket_of(&l, -3.0), 0u);
    assert_int_equal(gm_lod_bucket_of(&l, 99.0), 3u);
    gm_lod_release(&l);
}

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* The step function over [a, b): the points inside, and the value of the last point before
 * a unless a point falls exactly on a.  False when nothing holds there (before the first
 * point). */
static bool truth(const double *xs, const uint64_t *vs, size_t n, double a, double b, uint64_t *mn,
                  uint64_t *mx)
{
    size_t i = 0;
    bool any = false;
    while (i < n && xs[i] < a)
        i++;
    if (i > 0 && (i == n || xs[i] > a)) {
        *mn = *mx = vs[i - 1];
        any = true;
    }
    for (; i < n && xs[i] < b; i++) {
        if (!any || vs[i] < *mn)
            *mn = vs[i];
        if (!any || vs[i] > *mx)
            *mx = vs[i];
        any = true;
    }
    return any;
}

static void test_random_exact(void **state)
{
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    (void)state;
    for (int round = 0; round < 200; round++) {
        size_t n = 1 + rng_next(&seed) % 300;
        double xs[300];
        uint64_t vs[300], peak = 0;
        struct gm_lod fine, coarse, direct;
        struct gm_error err;
        double x = 0;
        for (size_t i = 0; i < n; i++) {
            /* clustered times: many points share an x, and long gaps */
            if (i && rng_next(&seed) % 3)
                x += (double)(rng_next(&seed) % 4 == 0 ? rng_next(&seed) % 5000
                                                       : rng_next(&seed) % 7);
            xs[i] = x;
            vs[i] = rng_next(&seed) % 1000;
            if (vs[i] > peak)
                peak = vs[i];
        }
        double x1 = 1.0; /* a power of two: bucket edges and positions are exact */
        while (x1 < x)
            x1 *= 2;
        assert_int_equal(gm_lod_init(&fine, 0.0, x1, 64, &err), GM_OK);
        assert_int_equal(gm_lod_init(&direct, 0.0, x1, 16, &err), GM_OK);
        for (size_t i = 0; i < n; i++) {
            gm_lod_add(&fine, xs[i], (int64_t)i - 1, vs[i]);
            gm_lod_add(&direct, xs[i], (int64_t)i - 1, vs[i]);
        }
        gm_lod_finish(&fine);
        gm_lod_finish(&direct);
        assert_int_equal(gm_lod_coarsen(&coarse, &fine, 4, &err), GM_OK);
        uint64_t drawn = 0;
        for (unsigned b = 0; b < 16; b++) {
            assert_int_equal(coarse.b[b].min, direct.b[b].min);
            assert_int_equal(coarse.b[b].max, direct.b[b].max);
            assert_int_equal(coarse.b[b].last, direct.b[b].last);
            assert_int_equal(coarse.b[b].n, direct.b[b].n);
            if (direct.b[b].max > drawn)
                drawn = direct.b[b].max;
        }
        /* the drawn maximum is the peak, whatever the resolution */
        assert_int_equal(drawn, peak);
        /* every bucket against the step function itself (the last bucket also holds the
         * points clamped at x1) */
        for (unsigned b = 0; b + 1 < 64; b++) {
            uint64_t mn = 0, mx = 0;
            double a = x1 * b / 64, e = x1 * (b + 1) / 64;
            if (!truth(xs, vs, n, a, e, &mn, &mx))
                continue;
            assert_int_equal(fine.b[b].min, mn);
            assert_int_equal(fine.b[b].max, mx);
        }
        assert_int_equal(gm_lod_coarsen(&coarse, &fine, 3, &err) == GM_OK, 0);
        gm_lod_release(&fine);
        gm_lod_release(&coarse);
        gm_lod_release(&direct);
    }
}

/* A run of points in one bucket added to a copy of gm_lod_here() (gm_lod_bucket_add()) and
 * written back makes the very series, and the same flags, that gm_lod_add_here() makes point
 * by point: gm_lod_here() is the bucket of the last point added (a series is cut into runs
 * at random, each started by gm_lod_add() at a point that may open a later bucket). */
static void test_run_on_copy_of_here(void **state)
{
    uint64_t seed = 0x2545f4914f6cdd1dULL;
    (void)state;
    for (int round = 0; round < 100; round++) {
        struct gm_lod each, copied;
        struct gm_error err;
        double x = 0;
        int64_t k = 0;
        assert_int_equal(gm_lod_init(&each, 0.0, 4096.0, 32, &err), GM_OK);
        assert_int_equal(gm_lod_init(&copied, 0.0, 4096.0, 32, &err), GM_OK);
        while (x < 4096.0) {
            uint64_t v = rng_next(&seed) % 1000;
            assert_int_equal(gm_lod_add(&copied, x, k, v), gm_lod_add(&each, x, k, v));
            k++;
            /* then points up to the bucket's end, on a copy of its bucket */
            struct gm_lod_bucket here = *gm_lod_here(&copied);
            double end = gm_lod_bucket_end(&copied, gm_lod_peek(&copied, x), x);
            size_t run = rng_next(&seed) % 40;
            for (size_t i = 0; i < run && x + 1 < end; i++, k++) {
                x += 1 + (double)(rng_next(&seed) % 2);
                if (x >= end)
                    x = end - 1;
                v = rng_next(&seed) % 1000;
                assert_int_equal(gm_lod_bucket_add(&here, k, v), gm_lod_add_here(&each, k, v));
            }
            *gm_lod_here(&copied) = here;
            x += 1 + (double)(rng_next(&seed) % 200);
        }
        gm_lod_finish(&each);
        gm_lod_finish(&copied);
        assert_memory_equal(copied.b, each.b, each.n * sizeof(*each.b));
        gm_lod_release(&each);
        gm_lod_release(&copied);
    }
}

/* gm_lod_bucket_end() is the least whole x after which a later bucket starts, on axes of
 * any length and bucket count; points added by comparing with it (gm_lod_add_here() while
 * below it, the same-bucket step) make the very buckets gm_lod_add() makes. */
static void test_bucket_end(void **state)
{
    uint64_t seed = 0x2545f4914f6cdd1dULL;
    (void)state;
    for (int round = 0; round < 400; round++) {
        double x1 = (double)(1 + rng_next(&seed) % (round % 4 == 0 ? 5000u : 4000000000u));
        unsigned n = 1 + (unsigned)(rng_next(&seed) % (round % 2 ? 70000u : 300u));
        struct gm_lod l, by_add, by_end;
        struct gm_error err;
        double x = 0, x_next = -1;
        assert_int_equal(gm_lod_init(&l, 0.0, x1, n, &err), GM_OK);
        for (int q = 0; q < 50; q++) {
            double at = (double)(rng_next(&seed) % (uint64_t)(x1 + 1));
            unsigned b = gm_lod_bucket_of(&l, at);
            double c;
            if (q % 5 == 0 && b + 1 < n)
                b++; /* the bucket of a later point: time went back */
            c = gm_lod_bucket_end(&l, b, at);
            if (b + 1 >= n) {
                assert_true(isinf(c) && c > 0);
                continue;
            }
            assert_true(c > at && c == (double)(uint64_t)c);
            assert_true(gm_lod_bucket_of(&l, c) > b);
            assert_true(c - 1 <= at || gm_lod_bucket_of(&l, c - 1) <= b);
            if (x1 <= 5000)
                for (double y = at; y < c; y++)
                    assert_true(gm_lod_bucket_of(&l, y) <= b);
        }
        gm_lod_release(&l);
        /* the same points both ways: clustered, with gaps, now and then going back */
        assert_int_equal(gm_lod_init(&by_add, 0.0, x1, n, &err), GM_OK);
        assert_int_equal(gm_lod_init(&by_end, 0.0, x1, n, &err), GM_OK);
        gm_lod_add(&by_add, 0.0, -1, 7);
        gm_lod_add(&by_end, 0.0, -1, 7);
        for (int i = 0; i < 3000; i++) {
            uint64_t r = rng_next(&seed), v = rng_next(&seed) % 1000;
            double step =
                r % 4 == 0 ? (double)(rng_next(&seed) % (uint64_t)(x1 / 50 + 2)) : (double)(r % 3);
            x = r % 97 == 0 && x > 10 ? x - 10 : x + step;
            gm_lod_add(&by_add, x, i, v);
            if (x < x_next) {
                gm_lod_add_here(&by_end, i, v);
            } else {
                gm_lod_add(&by_end, x, i, v);
                x_next = gm_lod_bucket_end(&by_end, by_end.cur_, x);
            }
        }
        gm_lod_finish(&by_add);
        gm_lod_finish(&by_end);
        assert_memory_equal(by_add.b, by_end.b, n * sizeof(*by_add.b));
        gm_lod_release(&by_add);
        gm_lod_release(&by_end);
    }
}

static void test_empty(void **state)
{
    struct gm_lod l;
    struct gm_error err;
    (void)state;
    assert_int_equal(gm_lod_init(&l, 0.0, 1.0, 0, &err), GM_ERR_INVALID);
    assert_int_equal(gm_lod_init(&l, 0.0, 1.0, 3, &err), GM_OK);
    gm_lod_finish(&l);
    for (int b = 0; b < 3; b++) {
        assert_int_equal(l.b[b].max, 0);
        assert_int_equal(l.b[b].klast, -1);
    }
    gm_lod_release(&l);
    gm_lod_release(NULL);
}

/* gm_lod_axis_timeline() against gm_lod_axis_init() + gm_lod_timeline() on random traces:
 * times that grow, go back, jump past 32 bits, or are missing on one event (no time axis
 * then): the same axis, the same buckets, the same x of every event. */
static void test_axis_timeline_equals_two_passes(void **state)
{
    static struct gm_snapshot_event ev[300];
    uint64_t x = 0x51afd7ed558ccd1dULL;
    int kinds_seen = 0;
    (void)state;
    for (int round = 0; round < 200; round++) {
        /* 0 grow, 1 back, 2 past 32 bits, 3 one untimed, 4 first untimed, 5 a span beyond
         * int64 (times are any int64 a file holds: the x's are taken in double, none kept) */
        int kind = round % 6;
        size_t n = 1 + (size_t)(rng_next(&x) % 300);
        int64_t t = kind == 5 ? INT64_MIN + (int64_t)(rng_next(&x) % 1000)
                              : 1700000000000000LL + (int64_t)(rng_next(&x) % 1000);
        struct gm_snapshot snap;
        struct gm_snapshot_device d;
        struct gm_snapshot_timeline tl;
        struct gm_lod_axis a1, a2;
        struct gm_lod al1, rl1, al2, rl2;
        struct gm_error err;
        unsigned nb = 1u << (rng_next(&x) % 8);
        for (size_t k = 0; k < n; k++) {
            static const uint8_t actions[] = {GM_ACTION_ALLOC, GM_ACTION_FREE_COMPLETED,
                                              GM_ACTION_SEGMENT_ALLOC, GM_ACTION_SEGMENT_FREE};
            struct gm_snapshot_event *e = &ev[k];
            memset(e, 0, sizeof(*e));
            e->action = actions[rng_next(&x) % 4];
            e->addr = 0x100000 * (1 + rng_next(&x) % 6);
            e->size = 1 + rng_next(&x) % 100000;
            e->flags = GM_EVENT_HAS_ADDR | GM_EVENT_HAS_TIME;
            t += (int64_t)(rng_next(&x) % 50);
            if (kind == 1 && rng_next(&x) % 7 == 0)
                t -= 200;
            if (kind == 2 && k == n / 2)
                t += (int64_t)1 << 33;
            if (kind == 5 && k == n / 2 && k > 0)
                t = INT64_MAX - 20000;
            e->time_us = t;
        }
        if (kind == 3) {
            size_t u = (size_t)(rng_next(&x) % n);
            ev[u].flags = (uint8_t)(ev[u].flags & ~GM_EVENT_HAS_TIME);
        }
        if (kind == 4)
            ev[0].flags = (uint8_t)(ev[0].flags & ~GM_EVENT_HAS_TIME);
        memset(&snap, 0, sizeof(snap));
        memset(&d, 0, sizeof(d));
        d.has_trace = true;
        d.events = ev;
        d.n_events = n;
        snap.gen = GM_SNAPSHOT_GEN_G7;
        snap.devices = &d;
        snap.n_devices = 1;
        snap.n_events = n;
        assert_int_equal(gm_snapshot_timeline(&snap, 0, 0, &tl, &err), GM_OK);
        gm_lod_axis_init(&a1, &d);
        assert_int_equal(gm_lod_timeline(&snap, &d, &tl, &a1, nb, &al1, &rl1, &err), GM_OK);
        assert_int_equal(gm_lod_axis_timeline(&a2, &snap, &d, &tl, nb, &al2, &rl2, &err), GM_OK);
        assert_int_equal(a1.time, a2.time);
        assert_int_equal(a1.time, kind < 3 || kind == 5);
        assert_int_equal(gm_lod_axis_keeps_x(&a2), kind < 3 || (kind == 5 && n < 2));
        assert_int_equal(a1.t0_us, a2.t0_us);
        assert_true(a1.x_end == a2.x_end);
        assert_int_equal(al1.n, al2.n);
        assert_memory_equal(al1.b, al2.b, nb * sizeof(*al1.b));
        assert_memory_equal(rl1.b, rl2.b, nb * sizeof(*rl1.b));
        for (int64_t k = -1; k <= (int64_t)n; k++)
            assert_true(gm_lod_axis_x(&a1, k) == gm_lod_axis_x(&a2, k));
        kinds_seen |= 1 << kind;
        gm_lod_release(&al1);
        gm_lod_release(&rl1);
        gm_lod_release(&al2);
        gm_lod_release(&rl2);
        gm_lod_axis_release(&a2);
        gm_snapshot_timeline_release(&tl);
    }
    assert_int_equal(kinds_seen, 63);
}

/* The totals' kept x's made in an array the caller gives (snap_lod_totals_begin_in(), big
 * enough to be mapped, holding other bytes): they are made in it, in place, and are the ones
 * of totals that make their own; where the axis keeps no x (an event without a time) the
 * array is freed (ASan). */
static void test_totals_in_given_array(void **state)
{
    enum { N = 300000 };
    static struct gm_snapshot_event ev[N];
    struct gm_snapshot_device d;
    struct gm_error err;
    (void)state;
    for (size_t k = 0; k < N; k++) {
        memset(&ev[k], 0, sizeof(ev[k]));
        ev[k].action = k % 2 ? GM_ACTION_FREE_COMPLETED : GM_ACTION_ALLOC;
        ev[k].addr = 0x100000 * (1 + k / 2 % 8);
        ev[k].size = 4096;
        ev[k].flags = GM_EVENT_HAS_ADDR | GM_EVENT_HAS_TIME;
        ev[k].time_us = 1700000000000000LL + (int64_t)(k * 3 + k % 7);
    }
    memset(&d, 0, sizeof(d));
    d.has_trace = true;
    d.events = ev;
    d.n_events = N;
    for (int timed = 1; timed >= 0; timed--) {
        struct gm_lod_totals own, given;
        uint32_t *mem = gm_big_realloc(NULL, 0, N * sizeof(uint32_t));
        assert_non_null(mem);
        memset(mem, 0xa5, N * sizeof(uint32_t));
        if (!timed)
            ev[N / 2].flags = GM_EVENT_HAS_ADDR;
        size_t n_timed = timed ? N : N - 1;
        assert_int_equal(gm_lod_totals_begin(&own, &d, n_timed, 64, 0, 0, &err), GM_OK);
        assert_int_equal(snap_lod_totals_begin_in(&given, &d, n_timed, 64, 0, 0, mem,
                                                  N * sizeof(uint32_t), &err),
                         GM_OK);
        for (size_t k = 0; k < N; k++) {
            gm_lod_totals_add(&own, (int64_t)k, &ev[k], k % 2 ? 0 : 4096, 1 << 20);
            gm_lod_totals_add(&given, (int64_t)k, &ev[k], k % 2 ? 0 : 4096, 1 << 20);
        }
        gm_lod_totals_end(&own);
        gm_lod_totals_end(&given);
        assert_int_equal(gm_lod_axis_keeps_x(&given.axis), timed);
        if (timed) {
#if defined(__linux__) && !defined(GM_ARENA_MALLOC)
            /* (a mapped array: the heap's realloc, under the sanitizers, may move it) */
            assert_ptr_equal(gm_lod_axis_x32(&given.axis), mem);
#endif
            assert_memory_equal(gm_lod_axis_x32(&given.axis), gm_lod_axis_x32(&own.axis),
                                N * sizeof(uint32_t));
        }
        assert_memory_equal(given.alloc.b, own.alloc.b, own.alloc.n * sizeof(*own.alloc.b));
        gm_lod_totals_release(&own);
        gm_lod_totals_release(&given);
    }
    ev[N / 2].flags = GM_EVENT_HAS_ADDR | GM_EVENT_HAS_TIME;
}

/* A level's buckets come from base/big.h: the finest level of a long trace (65536 buckets,
 * 3.7 MB) is a mapping of its own, populated at once, not heap pages faulted in one by one
 * (page-aligned where big arrays are mapped; calloc()'s block is not); small and large, the
 * buckets start zero and are released whole (ASan). */
static void test_level_buckets_mapped(void **state)
{
    static const unsigned ns[] = {1, 1024, 65536};
    (void)state;
    for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
        struct gm_lod l;
        struct gm_error err;
        const unsigned char *p;
        assert_int_equal(gm_lod_init(&l, 0.0, 100.0, ns[t], &err), GM_OK);
        p = (const unsigned char *)l.b;
        for (size_t i = 0; i < ns[t] * sizeof(*l.b); i++)
            assert_int_equal(p[i], 0);
#if defined(__linux__) && !defined(GM_ARENA_MALLOC)
        if (ns[t] * sizeof(*l.b) >= GM_BIG_MIN)
            assert_int_equal((uintptr_t)l.b % 4096, 0);
#endif
        gm_lod_add(&l, 50.0, 0, 7);
        gm_lod_release(&l);
        assert_null(l.b);
    }
}

/* gm_lod_axis_first_time_at(): the time it gives has an x at or above x and the time before it
 * an x below (checked with gm_lod_axis_x_of_time(), for whole and fractional x, near 0 and
 * 2^52, from t0's near both ends of int64); false where no int64 time reaches x and for x
 * beyond 2^52 in size. */
static void test_axis_first_time_at(void **state)
{
    static const int64_t t0s[] = {0, 1700000000000000LL, -5, INT64_MAX - 100, INT64_MIN + 100};
    static const double xs[] = {0.0,  1.0,  0.5,    2.25,   99.0,   100.0,        101.0,
                                -1.0, -0.5, -100.0, -101.0, 0x1p52, 0x1p52 - 0.5, -0x1p52};
    (void)state;
    for (size_t i = 0; i < sizeof(t0s) / sizeof(t0s[0]); i++) {
        struct gm_lod_axis a;
        memset(&a, 0, sizeof(a));
        a.time = true;
        a.t0_us = t0s[i];
        for (size_t j = 0; j < sizeof(xs) / sizeof(xs[0]); j++) {
            int64_t t;
            double x = xs[j];
            int64_t d = (int64_t)ceil(x); /* the time's offset from t0 */
            bool reaches = d > 0 ? a.t0_us <= INT64_MAX - d : a.t0_us >= INT64_MIN - d;
            if (!gm_lod_axis_first_time_at(&a, x, &t)) {
                if (reaches)
                    fail_msg("t0 %lld x %g: no time told", (long long)a.t0_us, x);
                continue;
            }
            if (!reaches)
                fail_msg("t0 %lld x %g: a time told past int64", (long long)a.t0_us, x);
            assert_true(gm_lod_axis_x_of_time(&a, t) >= x);
            if (t > INT64_MIN)
                assert_true(gm_lod_axis_x_of_time(&a, t - 1) < x);
        }
    }
    struct gm_lod_axis a;
    int64_t t;
    memset(&a, 0, sizeof(a));
    a.time = true;
    assert_false(gm_lod_axis_first_time_at(&a, 0x1p53, &t));
    assert_false(gm_lod_axis_first_time_at(&a, -0x1p53, &t));
    assert_false(gm_lod_axis_first_time_at(&a, NAN, &t));
    assert_false(gm_lod_axis_first_time_at(&a, INFINITY, &t));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gap_and_carry),
        cmocka_unit_test(test_same_instant_and_backwards),
        cmocka_unit_test(test_random_exact),
        cmocka_unit_test(test_run_on_copy_of_here),
        cmocka_unit_test(test_bucket_end),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_axis_timeline_equals_two_passes),
        cmocka_unit_test(test_axis_first_time_at),
        cmocka_unit_test(test_totals_in_given_array),
        cmocka_unit_test(test_level_buckets_mapped),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
