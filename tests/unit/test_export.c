/* SPDX-License-Identifier: MIT */
/* test_export.c - the exports of a snapshot (gpumem/export.h): Perfetto's timestamps of a
 * trace whose times lie a span beyond int64 apart (a damaged or hostile file may hold any
 * int64) are saturated, never an overflowing subtraction, and its durations never negative;
 * the span rule itself (gm_snapshot_span_us()) at the edges of int64. */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "gpumem/analysis.h"
#include "gpumem/export.h"
#include "gpumem/snapshot.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_span_edges(void **state)
{
    int64_t d;
    (void)state;
    assert_true(gm_snapshot_span_us(5, 3, &d));
    assert_int_equal(d, 2);
    assert_true(gm_snapshot_span_us(INT64_MIN, INT64_MIN, &d));
    assert_int_equal(d, 0);
    assert_true(gm_snapshot_span_us(-1, INT64_MIN, &d));
    assert_int_equal(d, INT64_MAX);
    assert_false(gm_snapshot_span_us(0, INT64_MIN, &d));
    assert_true(d == INT64_MAX);
    assert_false(gm_snapshot_span_us(INT64_MAX, INT64_MIN, &d));
    assert_true(d == INT64_MAX);
    assert_false(gm_snapshot_span_us(INT64_MIN, INT64_MAX, &d));
    assert_true(d == INT64_MIN);
    assert_false(gm_snapshot_span_us(INT64_MIN, 1, &d));
    assert_true(d == INT64_MIN);
}

/* A trace of allocations and frees whose first half is timed just above INT64_MIN and its
 * second half just below INT64_MAX, with record_function ranges across the whole span and
 * one whose END comes before its START. */
static void test_perfetto_span_beyond_int64(void **state)
{
    static struct gm_snapshot_event ev[40];
    struct gm_snapshot_annotation ann[4] = {
        {"early", "START", 0, INT64_MIN + 12, true},
        {"early", "END", 0, INT64_MAX - 2, false},
        {"late", "START", 0, INT64_MAX - 5, true},
        {"late", "END", 0, INT64_MIN + 8, false},
    };
    struct gm_snapshot snap;
    struct gm_snapshot_device d;
    struct gm_analysis *an;
    struct gm_export_input in;
    struct gm_export_opts o = {GM_EXPORT_PERFETTO, -1, false, 0};
    struct gm_error err;
    char *text = NULL;
    size_t len = 0, n_ts = 0, n_late = 0;
    FILE *f;
    json_t *doc, *events, *e;
    size_t i;
    (void)state;
    for (size_t k = 0; k < 40; k++) {
        memset(&ev[k], 0, sizeof(ev[k]));
        ev[k].action = k % 2 ? GM_ACTION_FREE_COMPLETED : GM_ACTION_ALLOC;
        ev[k].addr = 0x100000 * (1 + k / 2);
        ev[k].size = 4096 * (1 + k / 2);
        ev[k].flags = GM_EVENT_HAS_ADDR | GM_EVENT_HAS_TIME;
        ev[k].time_us = k < 20 ? INT64_MIN + 10 + (int64_t)k : INT64_MAX - 100 + (int64_t)k;
    }
    memset(&snap, 0, sizeof(snap));
    memset(&d, 0, sizeof(d));
    d.has_trace = true;
    d.events = ev;
    d.n_events = 40;
    snap.gen = GM_SNAPSHOT_GEN_G7;
    snap.devices = &d;
    snap.n_devices = 1;
    snap.n_events = 40;
    snap.has_time = true;
    snap.time_first_us = ev[0].time_us;
    snap.time_last_us = ev[39].time_us;
    snap.annotations = ann;
    snap.n_annotations = 4;
    assert_int_equal(gm_analysis_run(&snap, NULL, &an, &err), GM_OK);
    in = (struct gm_export_input){"span.pickle", &snap, an};
    f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(gm_export_write(f, &in, 1, &o, &err), GM_OK);
    fclose(f);
    doc = json_loadb(text, len, 0, NULL);
    assert_non_null(doc);
    events = json_object_get(doc, "traceEvents");
    assert_true(json_is_array(events));
    json_array_foreach(events, i, e)
    {
        json_t *ts = json_object_get(e, "ts"), *dur = json_object_get(e, "dur");
        if (!ts)
            continue;
        assert_true(json_is_integer(ts));
        /* from the origin (the first event) on: the late half saturates */
        assert_true(json_integer_value(ts) >= 0);
        n_late += json_integer_value(ts) == INT64_MAX;
        n_ts++;
        if (dur)
            assert_true(json_integer_value(dur) >= 0);
    }
    assert_true(n_ts > 20);
    assert_true(n_late > 0);
    json_decref(doc);
    free(text);
    gm_analysis_free(an);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_span_edges),
        cmocka_unit_test(test_perfetto_span_beyond_int64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
