/* SPDX-License-Identifier: MIT */
/* test_sweep.c - the sweep's plan without running anything: the given values up to the first
 * failure, then the bisection, against jobs whose boundary is known (a job "fits" below a
 * threshold); the ends (all fit, first fails, not an OOM, no bisection, run budget,
 * interrupted); parsing --param; the gpumem.sweep/1 document read back; and the series
 * reader (gpumem.measure/1, gpumem.environment/1) on hand-written documents; and the three
 * readers' memory budget on documents of empty objects. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumem/arena.h"
#include "gpumem/measure.h"
#include "gpumem/sweep.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Run the plan against a job that fits below 'threshold'; 'not_oom' makes the failures typed
 * as not out of memory by a series. */
static void simulate(struct gm_sweep *s, uint64_t threshold, bool not_oom, uint64_t *order,
                     size_t *n_order)
{
    uint64_t v;
    bool bis;
    *n_order = 0;
    while (gm_sweep_next(s, &v, &bis)) {
        struct gm_sweep_run r;
        memset(&r, 0, sizeof(r));
        r.value = v;
        r.bisection = bis;
        r.outcome = v < threshold ? GM_SWEEP_RUN_OK : GM_SWEEP_RUN_FAILED;
        if (r.outcome != GM_SWEEP_RUN_OK) {
            r.has_series = true;
            r.n_phases_failed = 1;
            r.oom = !not_oom;
        }
        order[(*n_order)++] = v;
        gm_sweep_record(s, &r);
        assert_true(*n_order < 200);
    }
}

static void test_bisection_finds_the_boundary(void **state)
{
    struct gm_sweep s;
    uint64_t order[256];
    size_t n;
    const uint64_t want[] = {1, 2, 4, 8, 6, 7}; /* fits below 7 */
    (void)state;
    assert_int_equal(gm_sweep_parse_param(&s, "batch=1,2,4,8,16", NULL), GM_OK);
    simulate(&s, 7, false, order, &n);
    assert_int_equal(n, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < n; i++)
        assert_int_equal(order[i], want[i]);
    assert_int_equal(gm_sweep_end(&s), GM_SWEEP_END_BOUNDARY);
    assert_true(s.has_fit && s.fit == 6 && s.has_fail && s.fail == 7);
    assert_int_equal(s.n_listed_run, 4); /* 16 was never run */
    assert_false(s.runs[3].bisection);
    assert_true(s.runs[4].bisection && s.runs[5].bisection);
}

static void test_bisection_over_wide_gaps(void **state)
{
    /* every threshold between two given values is found exactly, in log2(gap) runs */
    (void)state;
    for (uint64_t t = 1001; t <= 4096; t += 97) {
        struct gm_sweep s;
        uint64_t order[256];
        size_t n;
        assert_int_equal(gm_sweep_parse_param(&s, "mib=1000,4096", NULL), GM_OK);
        simulate(&s, t, false, order, &n);
        assert_int_equal(gm_sweep_end(&s), GM_SWEEP_END_BOUNDARY);
        assert_int_equal(s.fit, t - 1);
        assert_int_equal(s.fail, t);
        assert_true(n <= 2 + 12);
    }
}

static void test_ends(void **state)
{
    struct gm_sweep s;
    uint64_t order[256];
    size_t n;
    (void)state;
    /* every value fits */
    assert_int_equal(gm_sweep_parse_param(&s, "b=1,2,4", NULL), GM_OK);
    simulate(&s, 100, false, order, &n);
    assert_int_equal(n, 3);
    assert_int_equal(gm_sweep_end(&s), GM_SWEEP_END_ALL_FIT);
    assert_true(s.has_fit && s.fit == 4 && !s.has_fail);
    /* the smallest fails: nothing below it to bisect towards */
    assert_int_equal(gm_sweep_parse_param(&s, "b=4,8", NULL), GM_OK);
    simulate(&s, 2, false, order, &n);
    assert_int_equal(n, 1);
    assert_int_equal(gm_sweep_end(&s), GM_SWEEP_END_FIRST_FAILS);
    /* the first failure is typed as not an OOM: no bisection */
    assert_int_equal(gm_sweep_parse_param(&s, "b=1,2,4,8", NULL), GM_OK);
    simulate(&s, 3, true, order, &n);
    assert_int_equal(n, 3);
    assert_int_equal(gm_sweep_end(&s), GM_SWEEP_END_NOT_OOM);
    assert_true(s.fit == 2 && s.fail == 4);
    /* bisection off */
    assert_int_equal(gm_sweep_parse_param(&s, "b=1,2,4,8", NULL), GM_OK);
    s.bisect = false;
    simulate(&s, 3, false, order, &n);
    assert_int_equal(n, 3);
    assert_int_equal(gm_sweep_end(&s), GM_SWEEP_END_NO_BISECTION);
    /* the run budget */
    assert_int_equal(gm_sweep_parse_param(&s, "b=1,1000", NULL), GM_OK);
    s.max_runs = 4;
    simulate(&s, 500, false, order, &n);
    assert_int_equal(n, 4);
    assert_int_equal(gm_sweep_end(&s), GM_SWEEP_END_MAX_RUNS);
    assert_true(s.fit < s.fail - 1);
}

static void test_interrupted(void **state)
{
    struct gm_sweep s;
    struct gm_sweep_run r;
    uint64_t v;
    bool bis;
    (void)state;
    assert_int_equal(gm_sweep_parse_param(&s, "b=1,2,4", NULL), GM_OK);
    assert_true(gm_sweep_next(&s, &v, &bis) && v == 1);
    memset(&r, 0, sizeof(r));
    r.value = 1;
    r.outcome = GM_SWEEP_RUN_INTERRUPTED;
    gm_sweep_record(&s, &r);
    assert_false(gm_sweep_next(&s, &v, &bis));
    assert_int_equal(gm_sweep_end(&s), GM_SWEEP_END_INTERRUPTED);
    assert_false(s.has_fail); /* an interruption says nothing about memory */
}

static void test_parse_param(void **state)
{
    struct gm_sweep s;
    struct gm_error err;
    (void)state;
    assert_int_equal(gm_sweep_parse_param(&s, "seq_len=512,1024,2048", &err), GM_OK);
    assert_string_equal(s.param, "seq_len");
    assert_int_equal(s.n_values, 3);
    assert_int_equal(s.values[2], 2048);
    assert_true(s.bisect);
    /* a value past 2^63 - 1 could not be read back from the record (JSON integers) */
    const char *bad[] = {"batch",
                         "=1,2",
                         "batch=",
                         "batch=1,,2",
                         "batch=2,1",
                         "batch=1,1",
                         "b c=1",
                         "1b=1",
                         "batch=-1",
                         "batch=1.5",
                         "batch=1,9223372036854775808"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(gm_sweep_parse_param(&s, bad[i], &err), GM_ERR_INVALID);
    char many[1024] = "b=";
    for (int i = 0; i <= GM_SWEEP_MAX_VALUES; i++)
        snprintf(many + strlen(many), sizeof(many) - strlen(many), "%s%d", i ? "," : "", i + 1);
    assert_int_equal(gm_sweep_parse_param(&s, many, &err), GM_ERR_INVALID);
    char py[] = "python", yes[] = "--seq={seq_len}", no[] = "--seq=512";
    char *argv_yes[] = {py, yes, NULL};
    char *argv_no[] = {py, no, NULL};
    assert_int_equal(gm_sweep_parse_param(&s, "seq_len=1,2", &err), GM_OK);
    assert_true(gm_sweep_command_uses(&s, argv_yes));
    assert_false(gm_sweep_command_uses(&s, argv_no));
}

static void test_json_round_trip(void **state)
{
    struct gm_sweep s, back;
    uint64_t order[256];
    size_t n;
    char *text = NULL;
    size_t len = 0;
    FILE *f;
    (void)state;
    assert_int_equal(gm_sweep_parse_param(&s, "batch=8,16,32,64", NULL), GM_OK);
    snprintf(s.command, sizeof(s.command), "python3 train.py --batch {batch}");
    simulate(&s, 49, false, order, &n);
    s.runs[n - 1].requested = (struct gm_reading){536870912, true};
    snprintf(s.runs[n - 1].phase, sizeof(s.runs[n - 1].phase), "optimizer_step");
    f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_true(gm_sweep_write_json(&s, NULL, f));
    fclose(f);
    assert_int_equal(gm_sweep_load_mem(&back, text, len, 0, NULL), GM_OK);
    assert_string_equal(back.param, "batch");
    assert_string_equal(back.command, s.command);
    assert_int_equal(back.n_runs, s.n_runs);
    assert_int_equal(gm_sweep_end(&back), GM_SWEEP_END_BOUNDARY);
    assert_true(back.fit == 48 && back.fail == 49);
    assert_true(back.runs[n - 1].requested.valid && back.runs[n - 1].requested.value == 536870912);
    assert_string_equal(back.runs[n - 1].phase, "optimizer_step");
    assert_false(back.runs[0].device_peak.valid); /* null in the file: still unknown */
    assert_int_equal(back.n_listed_run, 4);
    free(text);
    /* damaged documents are refused */
    const char *bad[] = {"", "[]", "{\"schema\": \"gpumem.sweep/1\"}",
                         "{\"schema\": \"gpumem.sweep/1\", \"parameter\": \"b\", \"values\": [1],"
                         " \"runs\": [{\"value\": -1, \"outcome\": \"ok\"}]}",
                         "{\"schema\": \"gpumem.sweep/1\", \"parameter\": \"b\", \"values\": [1],"
                         " \"runs\": [{\"value\": 1, \"outcome\": \"sideways\"}]}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(gm_sweep_load_mem(&back, bad[i], strlen(bad[i]), 0, NULL), GM_ERR_FORMAT);
}

static const char series_torch[] =
    "{\"schema\": \"gpumem.measure/1\", \"source\": \"gpumem.torch\","
    " \"dimensions\": {\"batch\": 8, \"dtype\": \"bf16\", \"device\": \"cuda:0\"},"
    " \"environment\": {\"devices\": [{\"name\": \"GPU X\", \"memory\": {\"total_bytes\": 1024}}],"
    "   \"driver\": {\"version\": \"550.1\", \"cuda_driver_api_version\": \"12.4\"},"
    "   \"settings\": {\"PYTORCH_CUDA_ALLOC_CONF\": \"expandable_segments:True\"},"
    "   \"torch\": {\"version\": \"2.9.0\", \"cuda\": \"12.8\", \"hip\": null,"
    "     \"allocator_backend\": \"native\"}},"
    " \"phases\": ["
    "  {\"name\": \"forward\", \"ran\": true, \"ok\": true, \"pass\": \"first\", \"occurrence\": 1,"
    "   \"allocated_bytes\": {\"begin\": 10, \"end\": 20, \"peak\": 30},"
    "   \"reserved_bytes\": {\"begin\": 40, \"end\": 50},"
    "   \"device_bytes\": {\"used_begin\": 1, \"used_end\": 2}, \"seconds\": 0.5},"
    "  {\"name\": \"forward\", \"ok\": false, \"pass\": \"warm\", \"occurrence\": 2,"
    "   \"oom\": true, \"requested_bytes\": 2097152, \"error\": \"OutOfMemoryError: x\","
    "   \"allocated_bytes\": {\"begin\": -5, \"end\": null, \"peak\": 31}}],"
    " \"measured\": {\"peak_allocated_bytes\": 31, \"peak_reserved_bytes\": null},"
    " \"caveats\": [{\"id\": \"a\", \"text\": \"a caveat\"}], \"ok\": false}";

static void test_series_reader(void **state)
{
    struct gm_measure_series *s;
    const struct gm_measure_series_phase *p;
    (void)state;
    assert_int_equal(gm_measure_series_load_mem(series_torch, strlen(series_torch), 0, &s, NULL),
                     GM_OK);
    assert_int_equal(s->source, GM_MEASURE_SOURCE_TORCH);
    assert_int_equal(s->n_phases, 2);
    p = &s->phases[0];
    assert_string_equal(p->name, "forward");
    assert_true(p->ran && p->ok && !p->warm && p->occurrence == 1);
    assert_true(p->allocated.peak.valid && p->allocated.peak.value == 30);
    assert_false(p->reserved.peak.valid); /* absent: unknown, never 0 */
    assert_true(p->used_end.valid && p->used_end.value == 2);
    assert_true(p->has_seconds);
    p = &s->phases[1];
    assert_true(p->ran && !p->ok && p->warm && p->oom && p->occurrence == 2);
    assert_true(p->requested.valid && p->requested.value == 2097152);
    assert_false(p->allocated.begin.valid); /* negative: not a reading */
    assert_false(p->allocated.end.valid);   /* null */
    assert_string_equal(p->error, "OutOfMemoryError: x");
    assert_false(s->ok);
    assert_true(s->peak_allocated.valid && !s->peak_reserved.valid);
    assert_int_equal(s->n_dimensions, 3);
    assert_string_equal(s->dimensions[0].key, "batch");
    assert_string_equal(s->dimensions[0].value, "8");
    assert_string_equal(s->dimensions[1].value, "bf16");
    assert_string_equal(s->env.gpu, "GPU X");
    assert_true(s->env.gpu_total.valid && s->env.gpu_total.value == 1024);
    assert_string_equal(s->env.torch, "2.9.0");
    assert_null(s->env.torch_hip);
    assert_string_equal(s->env.alloc_conf, "expandable_segments:True");
    assert_int_equal(s->n_caveats, 1);
    assert_string_equal(s->caveats[0], "a caveat");
    gm_measure_series_free(s);
}

static void test_series_refusals(void **state)
{
    struct gm_measure_series *s = NULL;
    struct gm_error err;
    const char *bad[] = {
        "",
        "{\"schema\": \"gpumem.watch/1\", \"phases\": []}",
        "{\"schema\": \"gpumem.measure/1\"}",
        "{\"schema\": \"gpumem.measure/1\", \"phases\": [3]}",
        "{\"schema\": \"gpumem.measure/1\", \"phases\": [{\"ok\": true}]}",
        "{\"schema\": \"gpumem.measure/1\", \"schema\": \"gpumem.measure/1\", \"phases\": []}",
    };
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(gm_measure_series_load_mem(bad[i], strlen(bad[i]), 0, &s, &err),
                         GM_ERR_FORMAT);
        assert_null(s);
    }
    /* an environment document is not a series, and the other way round */
    assert_int_equal(gm_measure_env_load_mem(series_torch, strlen(series_torch), 0, &s, &err),
                     GM_ERR_FORMAT);
    assert_int_equal(gm_measure_series_load("/nonexistent/series.json", &s, &err), GM_ERR_NOENT);
}

static void test_series_allocation_failures(void **state)
{
    /* every allocation failing in turn: a clean error, nothing leaked (ASan) */
    (void)state;
    for (long k = 0;; k++) {
        struct gm_measure_series *s = NULL;
        enum gm_status st;
        gm_alloc_fail_after(k);
        st = gm_measure_series_load_mem(series_torch, strlen(series_torch), 0, &s, NULL);
        gm_alloc_fail_after(-1);
        if (st == GM_OK) {
            gm_measure_series_free(s);
            break;
        }
        assert_int_equal(st, GM_ERR_NOMEM);
        assert_true(k < 10000);
    }
}

/* A document of 'schema' whose member "x" holds 'n' empty objects (3 bytes each, about 290
 * bytes each once parsed); free() it. */
static char *empty_objects(const char *schema, size_t n, size_t *len)
{
    size_t cap = 64 + strlen(schema) + 3 * n;
    char *s = malloc(cap), *p;
    assert_non_null(s);
    p = s + snprintf(s, cap, "{\"schema\":\"%s\",\"x\":[", schema);
    for (size_t i = 0; i < n; i++) {
        memcpy(p, i ? ",{}" : "{}", i ? 3 : 2);
        p += i ? 3 : 2;
    }
    memcpy(p, "]}", 3);
    *len = (size_t)(p + 2 - s);
    return s;
}

/* The series, environment and sweep readers (a sweep reads each run's series back) parse
 * within a budget: 2 MB of empty objects (about 190 MB of tree) is refused before jansson
 * builds it, and a caller's limit is the bound when given. */
static void test_readers_budget(void **state)
{
    struct gm_measure_series *s = NULL;
    struct gm_sweep *sw = malloc(sizeof(*sw));
    struct gm_error err;
    size_t len;
    char *doc;
    (void)state;
    assert_non_null(sw);
    doc = empty_objects("gpumem.measure/1", 700000, &len);
    assert_int_equal(gm_measure_series_load_mem(doc, len, 0, &s, &err), GM_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "over the budget"));
    free(doc);
    doc = empty_objects("gpumem.environment/1", 700000, &len);
    assert_int_equal(gm_measure_env_load_mem(doc, len, 0, &s, &err), GM_ERR_LIMIT);
    free(doc);
    doc = empty_objects("gpumem.sweep/1", 700000, &len);
    assert_int_equal(gm_sweep_load_mem(sw, doc, len, 0, &err), GM_ERR_LIMIT);
    free(doc);
    /* small enough for the default budget, over a 64 KiB limit */
    doc = empty_objects("gpumem.measure/1", 1000, &len);
    assert_int_equal(gm_measure_series_load_mem(doc, len, 65536, &s, &err), GM_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "over the memory limit of 64.00 KiB"));
    /* within the default budget: parsed, then refused for what it holds (no phases) */
    assert_int_equal(gm_measure_series_load_mem(doc, len, 0, &s, &err), GM_ERR_FORMAT);
    free(doc);
    free(sw);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bisection_finds_the_boundary),
        cmocka_unit_test(test_bisection_over_wide_gaps),
        cmocka_unit_test(test_ends),
        cmocka_unit_test(test_interrupted),
        cmocka_unit_test(test_parse_param),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_series_reader),
        cmocka_unit_test(test_series_refusals),
        cmocka_unit_test(test_series_allocation_failures),
        cmocka_unit_test(test_readers_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
