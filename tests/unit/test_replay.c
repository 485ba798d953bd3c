/* SPDX-License-Identifier: MIT */
/* test_replay.c - snapshot replay through the allocator model on hand-built snapshots:
 * exact reproduction, inferred empty_cache, divergence reporting, the soundness checks,
 * recorded settings, and what-if predictions (allocator-model.md sections 6, 8, 10). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumem/arena.h"
#include "gpumem/internal/alloc_hooks.h"
#include "gpumem/replay.h"

#include <string.h>

#define MiB ((uint64_t)1 << 20)

struct fake_snap {
    struct gm_snapshot snap;
    struct gm_snapshot_device dev;
    struct gm_snapshot_event ev[32];
    struct gm_snapshot_segment seg[4];
    struct gm_snapshot_setting set[4];
};

static void init(struct fake_snap *f)
{
    memset(f, 0, sizeof(*f));
    f->snap.gen = GM_SNAPSHOT_GEN_G7;
    f->snap.devices = &f->dev;
    f->snap.n_devices = 1;
    f->snap.segments = f->seg;
    f->dev.events = f->ev;
    f->dev.has_trace = true;
}

static void ev(struct fake_snap *f, enum gm_snapshot_action a, uint64_t addr, uint64_t size)
{
    struct gm_snapshot_event *e = &f->ev[f->dev.n_events++];
    e->action = (uint8_t)a;
    e->addr = addr;
    e->size = size;
    e->flags = GM_EVENT_HAS_ADDR;
}

static void seg(struct fake_snap *f, uint64_t addr, uint64_t size)
{
    f->seg[f->snap.n_segments].address = addr;
    f->seg[f->snap.n_segments].total_size = size;
    f->snap.n_segments++;
    f->dev.n_segments++;
}

/* doc row "malloc(6 MiB) twice ... free both, empty_cache()" as a trace */
static void test_reproduces_and_infers_empty_cache(void **state)
{
    struct fake_snap f;
    struct gm_replay_result r;
    (void)state;
    init(&f);
    ev(&f, GM_ACTION_SEGMENT_ALLOC, 0x1000000, 20 * MiB);
    ev(&f, GM_ACTION_ALLOC, 0x1000000, 6 * MiB);
    ev(&f, GM_ACTION_ALLOC, 0x1600000, 6 * MiB);
    ev(&f, GM_ACTION_FREE_REQUESTED, 0x1000000, 6 * MiB);
    ev(&f, GM_ACTION_FREE_COMPLETED, 0x1000000, 6 * MiB);
    ev(&f, GM_ACTION_FREE_REQUESTED, 0x1600000, 6 * MiB);
    ev(&f, GM_ACTION_FREE_COMPLETED, 0x1600000, 6 * MiB);
    ev(&f, GM_ACTION_SEGMENT_FREE, 0x1000000, 20 * MiB);
    assert_int_equal(gm_replay_snapshot(&f.snap, NULL, &r, NULL), GM_OK);
    assert_int_equal(r.n_devices, 1);
    assert_true(r.own_conf_assumed);
    assert_true(r.devices[0].replayable);
    assert_true(r.devices[0].recorded_segment_events == 2);
    assert_true(r.devices[0].segment_events_matched == 2);
    assert_false(r.devices[0].has_divergence);
    assert_true(r.devices[0].n_inferred_empty_cache == 1);
    assert_true(r.devices[0].own.peak_reserved_bytes == 20 * MiB);
    assert_true(r.devices[0].own.peak_allocated_bytes == 12 * MiB);
    assert_true(r.devices[0].own.final_reserved_bytes == 0);
    assert_true(r.devices[0].recorded_peak_reserved_bytes == 20 * MiB);
    /* nothing is left: no segment, no block, on either side */
    assert_true(r.devices[0].final_segments_match);
    assert_true(r.devices[0].final_segments_model == 0);
    assert_true(r.devices[0].final_blocks_match);
    gm_replay_release(&r);
}

/* section 6 worked example: two live 12 MiB tensors, then what-if expandable segments */
static void test_what_if_expandable(void **state)
{
    struct fake_snap f;
    struct gm_replay_result r;
    struct gm_replay_opts o;
    struct gm_alloc_conf wi;
    (void)state;
    init(&f);
    ev(&f, GM_ACTION_SEGMENT_ALLOC, 0x10000000, 12 * MiB);
    ev(&f, GM_ACTION_ALLOC, 0x10000000, 12 * MiB);
    ev(&f, GM_ACTION_SEGMENT_ALLOC, 0x20000000, 12 * MiB);
    ev(&f, GM_ACTION_ALLOC, 0x20000000, 12 * MiB);
    seg(&f, 0x10000000, 12 * MiB);
    seg(&f, 0x20000000, 12 * MiB);
    gm_alloc_conf_init(&wi);
    assert_int_equal(gm_alloc_conf_parse(&wi, "expandable_segments:True", NULL), GM_OK);
    memset(&o, 0, sizeof(o));
    o.what_if = &wi;
    assert_int_equal(gm_replay_snapshot(&f.snap, &o, &r, NULL), GM_OK);
    assert_true(r.devices[0].replayable);
    assert_true(r.devices[0].segment_events_matched == 2);
    assert_true(r.devices[0].own.peak_reserved_bytes == 24 * MiB);
    assert_true(r.devices[0].has_what_if);
    assert_true(r.devices[0].what_if.peak_reserved_bytes == 40 * MiB);
    assert_true(r.devices[0].what_if.segment_events == 2);
    /* two 12 MiB segments on both sides; the hand-built segments list no blocks, while the
     * model holds two allocated blocks */
    assert_true(r.devices[0].final_segments_match);
    assert_true(r.devices[0].final_segments_model == 2);
    assert_false(r.devices[0].final_blocks_match);
    assert_true(r.devices[0].final_blocks_model == 2);
    /* on a 30 MiB device the expandable variant no longer fits */
    o.device_bytes = 30 * MiB;
    gm_replay_release(&r);
    assert_int_equal(gm_replay_snapshot(&f.snap, &o, &r, NULL), GM_OK);
    assert_true(r.devices[0].what_if.n_ooms == 1);
    gm_replay_release(&r);
}

static void test_divergence(void **state)
{
    struct fake_snap f;
    struct gm_replay_result r;
    (void)state;
    init(&f);
    /* a 12 MiB request gets a 12 MiB segment in the model, not 14 MiB */
    ev(&f, GM_ACTION_SEGMENT_ALLOC, 0x10000000, 14 * MiB);
    ev(&f, GM_ACTION_ALLOC, 0x10000000, 12 * MiB);
    seg(&f, 0x10000000, 14 * MiB);
    assert_int_equal(gm_replay_snapshot(&f.snap, NULL, &r, NULL), GM_OK);
    assert_true(r.devices[0].replayable);
    assert_true(r.devices[0].has_divergence);
    assert_true(r.devices[0].segment_events_matched == 0);
    assert_true(r.devices[0].first_divergence.index == 0);
    assert_true(r.devices[0].first_divergence.has_recorded);
    assert_true(r.devices[0].first_divergence.recorded.size == 14 * MiB);
    assert_true(r.devices[0].first_divergence.predicted.size == 12 * MiB);
    assert_int_equal(r.devices[0].first_divergence.predicted.kind, GM_ALLOC_EV_SEGMENT_ALLOC);
    gm_replay_release(&r);
}

static void test_not_replayable(void **state)
{
    struct fake_snap f;
    struct gm_replay_result r;
    (void)state;
    /* a private pool */
    init(&f);
    ev(&f, GM_ACTION_SEGMENT_ALLOC, 0x6000, 2 * MiB);
    ev(&f, GM_ACTION_ALLOC, 0x6000, 512);
    seg(&f, 0x6000, 2 * MiB);
    f.seg[0].has_pool_id = true;
    f.seg[0].pool_id[0] = 1;
    assert_int_equal(gm_replay_snapshot(&f.snap, NULL, &r, NULL), GM_OK);
    assert_false(r.devices[0].replayable);
    assert_non_null(strstr(r.devices[0].reason, "private pool"));
    gm_replay_release(&r);
    /* no alloc event: nothing to replay */
    init(&f);
    ev(&f, GM_ACTION_FREE_COMPLETED, 0x5000, 512);
    assert_int_equal(gm_replay_snapshot(&f.snap, NULL, &r, NULL), GM_OK);
    assert_false(r.devices[0].replayable);
    assert_non_null(strstr(r.devices[0].reason, "no alloc event"));
    gm_replay_release(&r);
    /* no trace at all: no device to report */
    init(&f);
    assert_int_equal(gm_replay_snapshot(&f.snap, NULL, &r, NULL), GM_OK);
    assert_int_equal(r.n_devices, 0);
    gm_replay_release(&r);
}

/* The allocations alive at a late start sit where their addresses say, not where best fit
 * would put them: a 4 MiB block at 8 MiB into a 20 MiB segment leaves no 12 MiB range, so
 * the trace's 12 MiB allocation needs a new segment, as recorded (best fit would have put
 * the block at the segment's start and found 16 MiB free). */
static void test_late_start_places_blocks_where_they_sat(void **state)
{
    struct fake_snap f;
    struct gm_replay_result r;
    (void)state;
    init(&f);
    ev(&f, GM_ACTION_SEGMENT_ALLOC, 0x4000000, 12 * MiB);
    ev(&f, GM_ACTION_ALLOC, 0x4000000, 12 * MiB);
    ev(&f, GM_ACTION_FREE_COMPLETED, 0x1000000 + 8 * MiB, 4 * MiB);
    seg(&f, 0x1000000, 20 * MiB);
    seg(&f, 0x4000000, 12 * MiB);
    assert_int_equal(gm_replay_snapshot(&f.snap, NULL, &r, NULL), GM_OK);
    assert_true(r.devices[0].replayable);
    assert_true(r.devices[0].late_start);
    assert_true(r.devices[0].initial_segments == 1);
    assert_true(r.devices[0].initial_allocations == 1);
    assert_true(r.devices[0].recorded_segment_events == 1);
    assert_true(r.devices[0].segment_events_matched == 1);
    assert_false(r.devices[0].first_divergence.has_recorded);
    gm_replay_release(&r);
}

/* A trace that starts late is replayed from the state the file records at its start
 * (before: refused as "not replayable"). */
static void test_late_start(void **state)
{
    struct fake_snap f;
    struct gm_replay_result r;
    (void)state;
    /* a free of an address the trace never allocated: an allocation alive from the start */
    init(&f);
    ev(&f, GM_ACTION_SEGMENT_ALLOC, 0x1000000, 20 * MiB);
    ev(&f, GM_ACTION_ALLOC, 0x1000000, 6 * MiB);
    ev(&f, GM_ACTION_FREE_COMPLETED, 0x5000, 512);
    seg(&f, 0x1000000, 20 * MiB);
    assert_int_equal(gm_replay_snapshot(&f.snap, NULL, &r, NULL), GM_OK);
    assert_true(r.devices[0].replayable);
    assert_true(r.devices[0].late_start);
    assert_non_null(strstr(r.devices[0].late_start_note, "never allocated"));
    assert_true(r.devices[0].initial_allocations == 1);
    assert_true(r.devices[0].initial_allocated_bytes == 512);
    assert_non_null(strstr(r.devices[0].late_start_unknown, "where their addresses say"));
    gm_replay_release(&r);
    /* segments that existed before recording started: the model starts with them cached,
     * so the trace's allocation reuses one and no segment event is predicted */
    init(&f);
    ev(&f, GM_ACTION_ALLOC, 0x6000, 512);
    seg(&f, 0x6000, 2 * MiB);
    assert_int_equal(gm_replay_snapshot(&f.snap, NULL, &r, NULL), GM_OK);
    assert_true(r.devices[0].replayable);
    assert_true(r.devices[0].late_start);
    assert_non_null(strstr(r.devices[0].late_start_note, "empty allocator"));
    assert_true(r.devices[0].initial_segments == 1);
    assert_true(r.devices[0].initial_reserved_bytes == 2 * MiB);
    assert_true(r.devices[0].recorded_peak_reserved_bytes == 2 * MiB);
    assert_true(r.devices[0].own.peak_reserved_bytes == 2 * MiB);
    assert_true(r.devices[0].own.segment_events == 0);
    assert_false(r.devices[0].has_divergence);
    assert_true(r.devices[0].final_segments_match);
    gm_replay_release(&r);
    /* an unknown segment freed: it existed at the start */
    init(&f);
    ev(&f, GM_ACTION_ALLOC, 0x6000, 512);
    ev(&f, GM_ACTION_SEGMENT_FREE, 0x9000000, 20 * MiB);
    assert_int_equal(gm_replay_snapshot(&f.snap, NULL, &r, NULL), GM_OK);
    assert_true(r.devices[0].replayable);
    assert_true(r.devices[0].late_start);
    assert_true(r.devices[0].initial_segments == 1);
    gm_replay_release(&r);
}

/* --device-memory alone predicts the recorded settings on a device of that size (before:
 * ignored without --alloc-conf). */
static void test_device_memory_alone(void **state)
{
    struct fake_snap f;
    struct gm_replay_result r;
    struct gm_replay_opts o;
    (void)state;
    init(&f);
    ev(&f, GM_ACTION_SEGMENT_ALLOC, 0x10000000, 12 * MiB);
    ev(&f, GM_ACTION_ALLOC, 0x10000000, 12 * MiB);
    ev(&f, GM_ACTION_SEGMENT_ALLOC, 0x20000000, 12 * MiB);
    ev(&f, GM_ACTION_ALLOC, 0x20000000, 12 * MiB);
    seg(&f, 0x10000000, 12 * MiB);
    seg(&f, 0x20000000, 12 * MiB);
    memset(&o, 0, sizeof(o));
    o.device_bytes = 20 * MiB;
    assert_int_equal(gm_replay_snapshot(&f.snap, &o, &r, NULL), GM_OK);
    assert_true(r.devices[0].has_what_if);
    assert_true(r.devices[0].what_if.n_ooms == 1);
    assert_true(r.devices[0].what_if.first_oom_event == 3);
    /* reserved but unallocated at the allocated peak: 0 here, both segments full */
    assert_true(r.devices[0].own.reserved_at_peak_allocated_bytes == 24 * MiB);
    assert_true(r.devices[0].own.peak_allocated_bytes == 24 * MiB);
    gm_replay_release(&r);
}

/* --compare: the common settings ranked by out-of-memory errors, then peak reserved, with a
 * verdict (two 12 MiB tensors: nothing beats the recorded 24 MiB). */
static void test_compare(void **state)
{
    struct fake_snap f;
    struct gm_replay_opts o;
    struct gm_replay_comparison *c = NULL;
    size_t n = 0;
    (void)state;
    init(&f);
    ev(&f, GM_ACTION_SEGMENT_ALLOC, 0x10000000, 12 * MiB);
    ev(&f, GM_ACTION_ALLOC, 0x10000000, 12 * MiB);
    ev(&f, GM_ACTION_SEGMENT_ALLOC, 0x20000000, 12 * MiB);
    ev(&f, GM_ACTION_ALLOC, 0x20000000, 12 * MiB);
    seg(&f, 0x10000000, 12 * MiB);
    seg(&f, 0x20000000, 12 * MiB);
    memset(&o, 0, sizeof(o));
    assert_int_equal(gm_replay_compare(&f.snap, &o, &c, &n, NULL), GM_OK);
    assert_int_equal(n, 1);
    assert_true(c[0].n_choices >= 5);
    assert_string_equal(c[0].choices[c[0].recorded].change, "");
    /* ranked by peak reserved: expandable segments map 20 MiB pages (40 MiB), worse */
    for (size_t i = 1; i < c[0].n_choices; i++)
        assert_true(c[0].choices[i - 1].run.peak_reserved_bytes <=
                    c[0].choices[i].run.peak_reserved_bytes);
    assert_int_equal(c[0].verdict, GM_REPLAY_KEEP);
    /* without device memory garbage collection is not tried */
    for (size_t i = 0; i < c[0].n_choices; i++)
        assert_null(strstr(c[0].choices[i].change, "garbage_collection"));
    gm_free(c);
    /* on 30 MiB the recorded settings fit; with device memory GC is tried */
    o.device_bytes = 30 * MiB;
    assert_int_equal(gm_replay_compare(&f.snap, &o, &c, &n, NULL), GM_OK);
    bool gc = false;
    for (size_t i = 0; i < c[0].n_choices; i++)
        gc = gc || strstr(c[0].choices[i].change, "garbage_collection") != NULL;
    assert_true(gc);
    assert_true(c[0].choices[0].run.n_ooms == 0);
    gm_free(c);
    /* on 20 MiB nothing fits */
    o.device_bytes = 20 * MiB;
    assert_int_equal(gm_replay_compare(&f.snap, &o, &c, &n, NULL), GM_OK);
    assert_int_equal(c[0].verdict, GM_REPLAY_NOTHING_FITS);
    gm_free(c);
}

static void test_recorded_settings(void **state)
{
    struct fake_snap f;
    struct gm_alloc_conf c;
    bool assumed;
    (void)state;
    init(&f);
    f.snap.has_allocator_settings = true;
    f.snap.settings = f.set;
    f.set[0].key = "PYTORCH_CUDA_ALLOC_CONF";
    f.set[0].type = GM_SETTING_STR;
    f.set[0].s = "max_non_split_rounding_mb:40";
    f.set[1].key = "max_split_size";
    f.set[1].type = GM_SETTING_INT;
    f.set[1].i = 64 * (int64_t)MiB;
    f.set[2].key = "expandable_segments";
    f.set[2].type = GM_SETTING_BOOL;
    f.set[2].i = 1;
    f.set[3].key = "roundup_power2_divisions.256";
    f.set[3].type = GM_SETTING_INT;
    f.set[3].i = 4;
    f.snap.n_settings = 4;
    gm_replay_snapshot_conf(&f.snap, &c, &assumed);
    assert_false(assumed);
    assert_true(c.max_split_size == 64 * MiB);
    assert_true(c.max_non_split_rounding_size == 40 * MiB);
    assert_true(c.expandable_segments);
    assert_int_equal(c.roundup_power2_divisions[8], 4);
    assert_int_equal(c.roundup_power2_divisions[7], 0);
    f.set[1].i = -1;
    gm_replay_snapshot_conf(&f.snap, &c, &assumed);
    assert_true(c.max_split_size == GM_ALLOC_NO_SPLIT_LIMIT);
    /* no settings, but a segment_map in the trace: expandable segments assumed */
    init(&f);
    ev(&f, GM_ACTION_SEGMENT_MAP, 0x1000, 20 * MiB);
    gm_replay_snapshot_conf(&f.snap, &c, &assumed);
    assert_true(assumed);
    assert_true(c.expandable_segments);
}

static void test_bad_opts(void **state)
{
    struct fake_snap f;
    struct gm_replay_result r;
    struct gm_replay_opts o;
    struct gm_error e;
    (void)state;
    init(&f);
    memset(&o, 0, sizeof(o));
    o.memory_fraction = 0.5; /* without device memory */
    assert_int_equal(gm_replay_snapshot(&f.snap, &o, &r, &e), GM_ERR_INVALID);
}

/* host allocation failures at every step: GM_ERR_NOMEM, nothing leaked (ASan checks) */
static void test_host_alloc_failures(void **state)
{
    struct fake_snap f;
    struct gm_replay_opts o;
    struct gm_alloc_conf wi;
    (void)state;
    init(&f);
    ev(&f, GM_ACTION_SEGMENT_ALLOC, 0x10000000, 20 * MiB);
    ev(&f, GM_ACTION_ALLOC, 0x10000000, 6 * MiB);
    ev(&f, GM_ACTION_ALLOC, 0x10600000, 6 * MiB);
    ev(&f, GM_ACTION_FREE_COMPLETED, 0x10000000, 6 * MiB);
    ev(&f, GM_ACTION_FREE_COMPLETED, 0x10600000, 6 * MiB);
    ev(&f, GM_ACTION_SEGMENT_FREE, 0x10000000, 20 * MiB);
    gm_alloc_conf_init(&wi);
    wi.expandable_segments = true;
    memset(&o, 0, sizeof(o));
    o.what_if = &wi;
    for (long n = 0; n < 80; n++) {
        struct gm_replay_result r;
        enum gm_status st;
        gm_alloc_fail_after(n);
        st = gm_replay_snapshot(&f.snap, &o, &r, NULL);
        gm_alloc_fail_after(-1);
        assert_true(st == GM_OK || st == GM_ERR_NOMEM);
        if (st == GM_OK)
            gm_replay_release(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reproduces_and_infers_empty_cache),
        cmocka_unit_test(test_what_if_expandable),
        cmocka_unit_test(test_divergence),
        cmocka_unit_test(test_not_replayable),
        cmocka_unit_test(test_late_start),
        cmocka_unit_test(test_late_start_places_blocks_where_they_sat),
        cmocka_unit_test(test_device_memory_alone),
        cmocka_unit_test(test_compare),
        cmocka_unit_test(test_recorded_settings),
        cmocka_unit_test(test_bad_opts),
        cmocka_unit_test(test_host_alloc_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
