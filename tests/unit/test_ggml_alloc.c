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

static uint64_t reserve(struct est_ggml_graph *g, uint64_t alignment)
{
    struct gm_error err;
    uint64_t bytes = 0;
    if (est_ggml_reserve(g, alignment, &bytes, &err) != GM_OK)
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
    x = est_ggml_push(&g, 1024, 1, 0, N, N);
    y = est_ggml_push(&g, 1024, 1, 0, N, N);
    w = est_ggml_push(&g, 64, 2, 0, y, N);
    v = est_ggml_push(&g, 2048, 3, 0, w, N);
    est_ggml_push(&g, 64, 2, 0, x, v);
    assert_int_equal(reserve(&g, 64), 4160);
}

/* Sizes round up to the alignment: 100 B takes 128 at alignment 128, so a, b (reading a) and
 * c (reading b) of 100 B each: a @0, b @128, a freed, c best fits at 0: 256. */
static void test_sizes_round_up_to_the_alignment(void **state)
{
    struct est_ggml_graph g = {0};
    uint32_t a, b;
    (void)state;
    a = est_ggml_push(&g, 100, 1, 0, N, N);
    b = est_ggml_push(&g, 100, 1, 0, a, N);
    est_ggml_push(&g, 100, 1, 0, b, N);
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
    a = est_ggml_push(&g, 1024, 1, 0, N, N);
    b = est_ggml_push(&g, 1024, 1, EST_GGML_INPLACE, a, N);
    est_ggml_push(&g, 2048, 2, 0, b, N);
    assert_int_equal(reserve(&g, 64), 3072);

    a = est_ggml_push(&g, 1024, 1, 0, N, N);
    b = est_ggml_push(&g, 1024, 1, EST_GGML_INPLACE, a, N);
    c = est_ggml_push(&g, 2048, 2, 0, b, N);
    est_ggml_push(&g, 64, 3, 0, a, c);
    assert_int_equal(reserve(&g, 64), 4096);

    a = est_ggml_push(&g, 1024, 1, 0, N, N);
    b = est_ggml_push(&g, 1024, 9, EST_GGML_INPLACE, a, N);
    est_ggml_push(&g, 2048, 2, 0, b, N);
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
    a = est_ggml_push(&g, 1024, 1, 0, N, N);
    v = est_ggml_view(&g, a);
    est_ggml_push(&g, 2048, 2, 0, v, N);
    assert_int_equal(reserve(&g, 64), 3072);
}

/* a, b, c 1024 each @0, @1024, @2048; d 64 reads a and c: @3072, then a and c are freed.
 * e 64 reads b and d: the holes tie at 1024, the higher one wins, e @2048.  b freed merges
 * with the hole below it into [0, 2048), so f (2048) fits there: the buffer stays 3136. */
static void test_freed_ranges_merge(void **state)
{
    struct est_ggml_graph g = {0};
    uint32_t a, b, c, d, e;
    (void)state;
    a = est_ggml_push(&g, 1024, 1, 0, N, N);
    b = est_ggml_push(&g, 1024, 1, 0, N, N);
    c = est_ggml_push(&g, 1024, 1, 0, N, N);
    d = est_ggml_push(&g, 64, 2, 0, a, c);
    e = est_ggml_push(&g, 64, 2, 0, b, d);
    est_ggml_push(&g, 2048, 3, 0, e, N);
    assert_int_equal(reserve(&g, 64), 3136);
}

/* a (an output) 1024 @0, b @1024 reads a, c reads b: a is never freed, so c @2048: 3072;
 * without the flag c takes a's range: 2048.  An in-place op never writes over an output. */
static void test_outputs_are_kept(void **state)
{
    struct est_ggml_graph g = {0};
    uint32_t a, b;
    (void)state;
    a = est_ggml_push(&g, 1024, 1, EST_GGML_OUTPUT, N, N);
    b = est_ggml_push(&g, 1024, 1, 0, a, N);
    est_ggml_push(&g, 1024, 1, 0, b, N);
    assert_int_equal(reserve(&g, 64), 3072);

    a = est_ggml_push(&g, 1024, 1, 0, N, N);
    b = est_ggml_push(&g, 1024, 1, 0, a, N);
    est_ggml_push(&g, 1024, 1, 0, b, N);
    assert_int_equal(reserve(&g, 64), 2048);

    a = est_ggml_push(&g, 1024, 1, EST_GGML_OUTPUT, N, N);
    est_ggml_push(&g, 1024, 1, EST_GGML_INPLACE, a, N);
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
    a = est_ggml_push(&g, 1024, 1, 0, N, N);
    b = est_ggml_push(&g, 1024, 1, 0, a, N);
    in = est_ggml_push(&g, 512, 2, EST_GGML_INPUT, N, N);
    est_ggml_push(&g, 1024, 1, 0, b, in);
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
    a = est_ggml_push(&g, 1024, 1, 0, N, N);
    est_ggml_push(&g, 4096, 1, EST_GGML_EXTERNAL, a, N);
    assert_int_equal(reserve(&g, 64), 1024);

    est_ggml_push(&g, 1024, 1, 0, 1, N);
    est_ggml_push(&g, 1024, 1, 0, N, N);
    assert_int_equal(est_ggml_reserve(&g, 64, &bytes, &err), GM_ERR_INVALID);
    assert_string_equal(err.msg, "ggml graph: tensor 0 reads tensor 1, which comes after it");
    assert_int_equal(est_ggml_reserve(&g, 48, &bytes, &err), GM_ERR_INVALID);
    est_ggml_graph_release(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_too_big_for_the_hole_goes_above),
        cmocka_unit_test(test_sizes_round_up_to_the_alignment),
        cmocka_unit_test(test_in_place_over_a_parent_with_one_consumer),
        cmocka_unit_test(test_a_view_keeps_its_source),
        cmocka_unit_test(test_freed_ranges_merge),
        cmocka_unit_test(test_outputs_are_kept),
        cmocka_unit_test(test_inputs_are_placed_first),
        cmocka_unit_test(test_external_and_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
