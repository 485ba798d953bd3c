/* SPDX-License-Identifier: MIT */
/* test_ggml_alloc.c - the model of ggml-alloc's graph allocator (estimate/ggml_alloc.h) on
 * hand-built graphs whose buffer size is worked out by hand in each test's comment: best fit
 * below the tail, in-place reuse, views keeping their source alive, merging of freed ranges,
 * outputs never freed, inputs placed first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "estimate/ggml_alloc.h"

#define N EST_GGML_NONE
/* layout number k: tensors of equal k share a layout */
#define L(k) ((struct est_ggml_layout){{(k), 1, 1}, 0})

static uint64_t reserve(struct est_ggml_graph *g, uint64_t alignment)
{
    struct gm_error err;
    uint64_t bytes = 0;
    if (est_ggml_reserve(g, alignment, &bytes, NULL, &err) != GM_OK)
        fail_msg("%s", err.msg);
    est_ggml_graph_release(g);
    return bytes;
}

/* x 1024 @0, y 1024 @1024, w 64 @2048 frees y: a 1024-byte hole at 1024.  v (2048) does not
 * fit the hole, so it goes to the tail at 2112: 4160 bytes, though only x, w and v (3136)
 * are ever alive at once. */
static void test_too_big_for_the_hole_goes_above(void **state)
{
    struct est_ggml_graph g = {0};
    uint32_t x, y, w, v;
    (void)state;
    x = est_ggml_push(&g, 1024, L(1), 0, N, N);
    y = est_ggml_push(&g, 1024, L(1), 0, N, N);
    w = est_ggml_push(&g, 64, L(2), 0, y, N);
    v = est_ggml_push(&g, 2048, L(3), 0, w, N);
    est_ggml_push(&g, 64, L(2), 0, x, v);
    assert_int_equal(reserve(&g, 64), 4160);
}

/* Sizes round up to the alignment: 100 B takes 128 at alignment 128, so a, b (reading a) and
 * c (reading b) of 100 B each: a @0, b @128, a freed, c best fits at 0: 256. */
static void test_sizes_round_up_to_the_alignment(void **state)
{
    struct est_ggml_graph g = {0};
    uint32_t a, b;
    (void)state;
    a = est_ggml_push(&g, 100, L(1), 0, N, N);
    b = est_ggml_push(&g, 100, L(1), 0, a, N);
    est_ggml_push(&g, 100, L(1), 0, b, N);
    assert_int_equal(reserve(&g, 128), 256);
}

/* a 1024 @0; b runs in place over a (one consumer, same layout) @0; c 2048 @1024: 3072.
 * With a second consumer of a (d, at the end) b cannot, so b @1024 and c @2048: 4096 (d, 64,
 * fits the hole b left).  A
 * parent of another layout is not reused either: b @1024, a freed, c (2048) too big for the
 * hole: @2048, 4096. */
static void test_in_place_over_a_parent_with_one_consumer(void **state)
{
    struct est_ggml_graph g = {0};
    uint32_t a, b, c;
    (void)state;
    a = est_ggml_push(&g, 1024, L(1), 0, N, N);
    b = est_ggml_push(&g, 1024, L(1), EST_GGML_INPLACE, a, N);
    est_ggml_push(&g, 2048, L(2), 0, b, N);
    assert_int_equal(reserve(&g, 64), 3072);

    a = est_ggml_push(&g, 1024, L(1), 0, N, N);
    b = est_ggml_push(&g, 1024, L(1), EST_GGML_INPLACE, a, N);
    c = est_ggml_push(&g, 2048, L(2), 0, b, N);
    est_ggml_push(&g, 64, L(3), 0, a, c);
    assert_int_equal(reserve(&g, 64), 4096);

    a = est_ggml_push(&g, 1024, L(1), 0, N, N);
    b = est_ggml_push(&g, 1024, L(9), EST_GGML_INPLACE, a, N);
    est_ggml_push(&g, 2048, L(2), 0, b, N);
    assert_int_equal(reserve(&g, 64), 4096);

    /* layouts compare every dimension and the type exactly: 2^20 + 1 x 1 is not 1 x 1, nor
     * is type 26 type 0 */
    a = est_ggml_push(&g, 1024, ((struct est_ggml_layout){{1, 1, 1}, 0}), 0, N, N);
    b = est_ggml_push(&g, 1024, ((struct est_ggml_layout){{(1u << 20) + 1, 1, 1}, 0}),
                      EST_GGML_INPLACE, a, N);
    est_ggml_push(&g, 2048, L(2), 0, b, N);
    assert_int_equal(reserve(&g, 64), 4096);
    a = est_ggml_push(&g, 1024, ((struct est_ggml_layout){{1, 1, 1 + (1u << 12)}, 0}), 0, N, N);
    b = est_ggml_push(&g, 1024, ((struct est_ggml_layout){{1, 1, 1}, 0}), EST_GGML_INPLACE, a, N);
    est_ggml_push(&g, 2048, L(2), 0, b, N);
    assert_int_equal(reserve(&g, 64), 4096);
    a = est_ggml_push(&g, 1024, ((struct est_ggml_layout){{1, 1, 1}, 26}), 0, N, N);
    b = est_ggml_push(&g, 1024, ((struct est_ggml_layout){{1, 1, 1}, 0}), EST_GGML_INPLACE, a, N);
    est_ggml_push(&g, 2048, L(2), 0, b, N);
    assert_int_equal(reserve(&g, 64), 4096);
}

/* a 1024 @0 is read only through a view; b (2048) reads the view.  The view keeps a alive
 * until b ran, so b goes to 1024: 3072 (freed at the view, a would leave b the tail at 0:
 * 2048). */
static void test_a_view_keeps_its_source(void **state)
{
    struct est_ggml_graph g = {0};
    uint32_t a, v;
    (void)state;
    a = est_ggml_push(&g, 1024, L(1), 0, N, N);
    v = est_ggml_view(&g, a);
    est_ggml_push(&g, 2048, L(2), 0, v, N);
    assert_int_equal(reserve(&g, 64), 3072);
}

/* Where each tensor of 'g' went (g->n offsets into 'off'), and the buffer's size. */
static uint64_t reserve_at(struct est_ggml_graph *g, uint64_t *off)
{
    struct gm_error err;
    uint64_t bytes = 0;
    if (est_ggml_reserve(g, 64, &bytes, off, &err) != GM_OK)
        fail_msg("%s", err.msg);
    est_ggml_graph_release(g);
    return bytes;
}

/* a, b, c 1024 each @0, @1024, @2048; d 64 reads a and c: @3072, then a and c are freed,
 * leaving holes [0, 1024) and [2048, 3072) around b.  Sets *b and *d. */
static void two_holes(struct est_ggml_graph *g, uint32_t *b, uint32_t *d)
{
    uint32_t a = est_ggml_push(g, 1024, L(1), 0, N, N), c;
    *b = est_ggml_push(g, 1024, L(1), 0, N, N);
    c = est_ggml_push(g, 1024, L(1), 0, N, N);
    *d = est_ggml_push(g, 64, L(2), 0, a, c);
}

/* two_holes(), then e 64 reads b and d: the holes tie at 1024, the higher one wins, e @2048
 * (the lower would be @0).  b freed merges with the hole below it into [0, 2048), so f
 * (2048) fits there at 0: the buffer stays 3136. */
static void test_equal_holes_take_the_higher(void **state)
{
    struct est_ggml_graph g = {0};
    uint64_t off[6];
    uint32_t b, d, e, f;
    (void)state;
    two_holes(&g, &b, &d);
    e = est_ggml_push(&g, 64, L(2), 0, b, d);
    f = est_ggml_push(&g, 2048, L(3), 0, e, N);
    assert_int_equal(reserve_at(&g, off), 3136);
    assert_int_equal(off[d], 3072);
    assert_int_equal(off[e], 2048);
    assert_int_equal(off[f], 0);
}

/* two_holes(), then e (outside the buffer) reads b and d: b freed touches both holes and
 * merges them into [0, 3072), and d freed joins that to the tail, so f (3072) goes at 0 and
 * the buffer stays 3136.  Merged only with the hole below, b would leave [0, 2048) and
 * [2048, 3136 + tail): f at 2048, 5120. */
static void test_a_freed_range_joins_both_neighbours(void **state)
{
    struct est_ggml_graph g = {0};
    uint64_t off[6];
    uint32_t b, d, e, f;
    (void)state;
    two_holes(&g, &b, &d);
    e = est_ggml_push(&g, 0, L(2), EST_GGML_EXTERNAL, b, d);
    f = est_ggml_push(&g, 3072, L(3), 0, N, N);
    assert_int_equal(reserve_at(&g, off), 3136);
    assert_true(off[e] == EST_GGML_NOWHERE);
    assert_int_equal(off[f], 0);
}

/* a (an output) 1024 @0, b @1024 reads a, c reads b: a is never freed, so c @2048: 3072;
 * without the flag c takes a's range: 2048.  An in-place op never writes over an output. */
static void test_outputs_are_kept(void **state)
{
    struct est_ggml_graph g = {0};
    uint32_t a, b;
    (void)state;
    a = est_ggml_push(&g, 1024, L(1), EST_GGML_OUTPUT, N, N);
    b = est_ggml_push(&g, 1024, L(1), 0, a, N);
    est_ggml_push(&g, 1024, L(1), 0, b, N);
    assert_int_equal(reserve(&g, 64), 3072);

    a = est_ggml_push(&g, 1024, L(1), 0, N, N);
    b = est_ggml_push(&g, 1024, L(1), 0, a, N);
    est_ggml_push(&g, 1024, L(1), 0, b, N);
    assert_int_equal(reserve(&g, 64), 2048);

    a = est_ggml_push(&g, 1024, L(1), EST_GGML_OUTPUT, N, N);
    est_ggml_push(&g, 1024, L(1), EST_GGML_INPLACE, a, N);
    assert_int_equal(reserve(&g, 64), 2048);
}

/* An input (512) listed after a and b is placed first, @0: a @512, b @1536, a freed, c (1024,
 * reading b and the input) fits a's hole: 2560.  Placed in list order it would land in a's
 * hole and push c to the tail: 3072. */
static void test_inputs_are_placed_first(void **state)
{
    struct est_ggml_graph g = {0};
    uint32_t a, b, in;
    (void)state;
    a = est_ggml_push(&g, 1024, L(1), 0, N, N);
    b = est_ggml_push(&g, 1024, L(1), 0, a, N);
    in = est_ggml_push(&g, 512, L(2), EST_GGML_INPUT, N, N);
    est_ggml_push(&g, 1024, L(1), 0, b, in);
    assert_int_equal(reserve(&g, 64), 2560);
}

/* Tensors outside the buffer (a KV-cache write) take nothing; a parent listed after its
 * child is refused. */
static void test_external_and_malformed(void **state)
{
    struct est_ggml_graph g = {0};
    struct gm_error err;
    uint64_t bytes;
    uint32_t a;
    (void)state;
    a = est_ggml_push(&g, 1024, L(1), 0, N, N);
    est_ggml_push(&g, 4096, L(1), EST_GGML_EXTERNAL, a, N);
    assert_int_equal(reserve(&g, 64), 1024);

    est_ggml_push(&g, 1024, L(1), 0, 1, N);
    est_ggml_push(&g, 1024, L(1), 0, N, N);
    assert_int_equal(est_ggml_reserve(&g, 64, &bytes, NULL, &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "ggml graph: tensor 0 reads tensor 1, which comes after it");
    assert_int_equal(est_ggml_reserve(&g, 48, &bytes, NULL, &err), GM_ERR_INVALID);
    est_ggml_graph_release(&g);

    /* a view must read a tensor before it */
    a = est_ggml_push(&g, 1024, L(1), 0, N, N);
    g.t[est_ggml_view(&g, a)].view_src = N;
    assert_int_equal(est_ggml_reserve(&g, 64, &bytes, NULL, &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "ggml graph: view 1 has no source before it");
    g.t[1].view_src = 1;
    assert_int_equal(est_ggml_reserve(&g, 64, &bytes, NULL, &err), GM_ERR_INVALID);
    est_ggml_graph_release(&g);
}

/* A tensor above UINT64_MAX / 4 bytes could wrap when aligned or added to the buffer: refused.
 * Three of UINT64_MAX / 4 alive at once pass the tail's UINT64_MAX / 2: refused too. */
static void test_sizes_past_the_limit(void **state)
{
    struct est_ggml_graph g = {0};
    struct gm_error err;
    uint64_t bytes;
    uint32_t a, b, c;
    (void)state;
    est_ggml_push(&g, UINT64_MAX / 4 + 1, L(1), 0, N, N);
    assert_int_equal(est_ggml_reserve(&g, 64, &bytes, NULL, &err), GM_ERR_LIMIT);
    est_ggml_graph_release(&g);
    est_ggml_push(&g, UINT64_MAX, L(1), 0, N, N);
    assert_int_equal(est_ggml_reserve(&g, 64, &bytes, NULL, &err), GM_ERR_LIMIT);
    est_ggml_graph_release(&g);

    a = est_ggml_push(&g, UINT64_MAX / 4 - 63, L(1), 0, N, N);
    b = est_ggml_push(&g, UINT64_MAX / 4 - 63, L(1), 0, N, N);
    c = est_ggml_push(&g, UINT64_MAX / 4 - 63, L(1), 0, N, N);
    est_ggml_push(&g, 64, L(2), 0, a, b);
    est_ggml_push(&g, 64, L(2), 0, c, N);
    assert_int_equal(est_ggml_reserve(&g, 64, &bytes, NULL, &err), GM_ERR_LIMIT);
    est_ggml_graph_release(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_too_big_for_the_hole_goes_above),
        cmocka_unit_test(test_sizes_round_up_to_the_alignment),
        cmocka_unit_test(test_in_place_over_a_parent_with_one_consumer),
        cmocka_unit_test(test_a_view_keeps_its_source),
        cmocka_unit_test(test_equal_holes_take_the_higher),
        cmocka_unit_test(test_a_freed_range_joins_both_neighbours),
        cmocka_unit_test(test_outputs_are_kept),
        cmocka_unit_test(test_inputs_are_placed_first),
        cmocka_unit_test(test_external_and_malformed),
        cmocka_unit_test(test_sizes_past_the_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
