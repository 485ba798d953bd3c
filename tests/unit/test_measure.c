/* SPDX-License-Identifier: MIT */
/* test_measure.c - the measure workload's allocation sequence through the allocator model
 * (gm_measure_estimate, no GPU): hand-computed figures per phase, option checks, the
 * embedded PTX, and host allocation failures.  The GPU path runs against the fake driver in
 * tests/measure/. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumem/arena.h"
#include "gpumem/internal/alloc_hooks.h"
#include "gpumem/measure.h"

#include <stdio.h>
#include <string.h>

#define KiB ((uint64_t)1024)
#define MiB ((uint64_t)1 << 20)

static void test_estimate_inference(void **state)
{
    struct gm_measure_opts o;
    struct gm_measure_result r;
    uint64_t params;
    (void)state;
    gm_measure_opts_init(&o);
    o.width = 64;
    o.batch = 2;
    o.context = 8;
    o.layers = 3;
    memset(&r, 0, sizeof(r));
    assert_int_equal(gm_measure_estimate(&o, &r, NULL), GM_OK);
    /* weights 64x64 floats = 16 KiB, bias 256 B rounded to 512 B, three layers */
    params = 3 * (16 * KiB + 512);
    assert_true(r.parameter_bytes == 3 * (16 * KiB + 256));
    assert_true(r.phases[GM_MEASURE_MODEL_LOAD].estimate_peak_allocated == params);
    /* the input: 16 rows x 64 floats = 4 KiB */
    assert_true(r.phases[GM_MEASURE_INPUTS].estimate_peak_allocated == params + 4 * KiB);
    /* a forward pass holds at most two layer outputs besides the input */
    assert_true(r.phases[GM_MEASURE_COLD_FORWARD].estimate_peak_allocated == params + 3 * 4 * KiB);
    assert_true(r.phases[GM_MEASURE_WARM_FORWARD].estimate_peak_allocated == params + 3 * 4 * KiB);
    /* everything fits in one 2 MiB small-pool segment */
    assert_true(r.estimate_peak_reserved == 2 * MiB);
    /* no training phases */
    assert_true(r.phases[GM_MEASURE_BACKWARD].estimate_peak_allocated == 0);
}

static void test_estimate_training(void **state)
{
    struct gm_measure_opts o;
    struct gm_measure_result r;
    uint64_t layer = 4 * MiB + 4 * KiB, params, act = 1 * MiB;
    (void)state;
    gm_measure_opts_init(&o);
    o.width = 1024;
    o.batch = 1;
    o.context = 256; /* activations of 256 x 1024 floats = 1 MiB: still the small pool */
    o.layers = 2;
    o.train = true;
    memset(&r, 0, sizeof(r));
    assert_int_equal(gm_measure_estimate(&o, &r, NULL), GM_OK);
    params = 2 * layer;
    assert_true(r.phases[GM_MEASURE_MODEL_LOAD].estimate_peak_allocated == params);
    /* training keeps both layer outputs */
    assert_true(r.phases[GM_MEASURE_COLD_FORWARD].estimate_peak_allocated ==
                params + act + 2 * act);
    /* warm_forward starts with gradients and momentum (created in warmup) and keeps both
     * outputs of its last pass */
    assert_true(r.phases[GM_MEASURE_WARM_FORWARD].estimate_peak_allocated ==
                3 * params + act + 2 * act);
    /* backward: input, both outputs, and dy and dx of the last layer at once */
    assert_true(r.phases[GM_MEASURE_BACKWARD].estimate_peak_allocated ==
                3 * params + act + 2 * act + 2 * act);
    assert_true(r.phases[GM_MEASURE_OPTIMIZER_STEP].estimate_peak_allocated == 3 * params + act);
}

static void test_estimate_bf16(void **state)
{
    struct gm_measure_opts o;
    struct gm_measure_result r;
    (void)state;
    gm_measure_opts_init(&o);
    o.width = 64;
    o.batch = 2;
    o.context = 8;
    o.layers = 3;
    o.dtype = GM_MEASURE_BF16;
    memset(&r, 0, sizeof(r));
    assert_int_equal(gm_measure_estimate(&o, &r, NULL), GM_OK);
    /* half the bytes: weights 8 KiB, bias 128 B rounded to 512 B, activations 2 KiB */
    assert_true(r.parameter_bytes == 3 * (8 * KiB + 128));
    assert_true(r.phases[GM_MEASURE_COLD_FORWARD].estimate_peak_allocated ==
                3 * (8 * KiB + 512) + 3 * 2 * KiB);
}

static void test_opts_check(void **state)
{
    struct gm_measure_opts o;
    struct gm_error e;
    (void)state;
    gm_measure_opts_init(&o);
    assert_int_equal(gm_measure_opts_check(&o, &e), GM_OK);
    o.width = 0;
    assert_int_equal(gm_measure_opts_check(&o, &e), GM_ERR_INVALID);
    gm_measure_opts_init(&o);
    o.width = 65536;
    assert_int_equal(gm_measure_opts_check(&o, &e), GM_ERR_INVALID);
    assert_non_null(strstr(e.msg, "2^31"));
    gm_measure_opts_init(&o);
    o.repeats = 0;
    assert_int_equal(gm_measure_opts_check(&o, &e), GM_ERR_INVALID);
}

static void test_embedded_ptx(void **state)
{
    const char *ptx = gm_measure_ptx_text();
    static const char *const entries[] = {
        ".entry gm_linear_fwd(", ".entry gm_linear_bwd_data(", ".entry gm_linear_bwd_weight(",
        ".entry gm_relu_bwd(",   ".entry gm_mse_grad(",        ".entry gm_sgd_momentum(",
    };
    (void)state;
    assert_non_null(strstr(ptx, "\n.version 7.0\n"));
    assert_non_null(strstr(ptx, "\n.target sm_70\n"));
    assert_non_null(strstr(ptx, "\n.address_size 64\n"));
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
        char bf[64];
        assert_non_null(strstr(ptx, entries[i]));
        /* and the bfloat16 variant: ".entry NAME_bf16(" */
        snprintf(bf, sizeof(bf), "%.*s_bf16(", (int)strlen(entries[i]) - 1, entries[i]);
        assert_non_null(strstr(ptx, bf));
    }
}

static void test_host_alloc_failures(void **state)
{
    struct gm_measure_opts o;
    (void)state;
    gm_measure_opts_init(&o);
    o.width = 16;
    o.context = 4;
    o.train = true;
    for (long n = 0; n < 60; n++) {
        struct gm_measure_result r;
        enum gm_status st;
        memset(&r, 0, sizeof(r));
        gm_alloc_fail_after(n);
        st = gm_measure_estimate(&o, &r, NULL);
        gm_alloc_fail_after(-1);
        assert_true(st == GM_OK || st == GM_ERR_NOMEM);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimate_inference), cmocka_unit_test(test_estimate_training),
        cmocka_unit_test(test_estimate_bf16),      cmocka_unit_test(test_opts_check),
        cmocka_unit_test(test_embedded_ptx),       cmocka_unit_test(test_host_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
