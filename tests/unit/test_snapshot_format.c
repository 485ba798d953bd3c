/* SPDX-License-Identifier: MIT */
/* test_snapshot_format.c - the 2026 content of the snapshot format: pinned host memory kept
 * apart from the devices, pool ids, event metadata, forward frames, XPU snapshots, and
 * torch's component counters.  The files of the exact shapes PyTorch writes are those of
 * tests/reference/make_2026_format.py kept in the fuzz corpus (fmt2026_*); hostile variants
 * are written here with the library's pickle writer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumem/gpumem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((uint64_t)1 << 20)

static struct gm_snapshot *load_corpus(const char *name)
{
    const char *src = getenv("GM_SOURCE_DIR");
    char path[1024];
    struct gm_snapshot *s = NULL;
    struct gm_error err;
    assert_non_null(src);
    snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/snapshot/%s", src, name);
    if (gm_snapshot_load(path, NULL, &s, &err) != GM_OK)
        fail_msg("%s: %s", name, err.msg);
    return s;
}

/* The bytes a pickle writer wrote into a memory stream. */
struct mem {
    char *buf;
    size_t len;
    FILE *f;
    struct gm_pickle_writer *w;
};

static struct gm_pickle_writer *mem_open(struct mem *m)
{
    struct gm_error err;
    memset(m, 0, sizeof(*m));
    m->f = open_memstream(&m->buf, &m->len);
    assert_non_null(m->f);
    assert_int_equal(gm_pickle_writer_new(m->f, 4, &m->w, &err), GM_OK);
    return m->w;
}

static enum gm_status mem_load(struct mem *m, struct gm_snapshot **s, struct gm_error *err)
{
    struct gm_error werr;
    enum gm_status st;
    assert_int_equal(gm_pickle_writer_finish(m->w, &werr), GM_OK);
    fclose(m->f);
    *s = NULL;
    st = gm_snapshot_load_mem(m->buf, m->len, NULL, s, err);
    free(m->buf);
    return st;
}

static void kv_int(struct gm_pickle_writer *w, const char *k, int64_t v)
{
    gm_pickle_str(w, k);
    gm_pickle_int(w, v);
}

/* {"segments": [], "device_traces": [[]], <key>: <what the caller writes next>} */
static void doc_with(struct gm_pickle_writer *w, const char *key)
{
    gm_pickle_dict_begin(w, 3);
    gm_pickle_str(w, "segments");
    gm_pickle_list_begin(w, 0);
    gm_pickle_list_end(w);
    gm_pickle_str(w, "device_traces");
    gm_pickle_list_begin(w, 1);
    gm_pickle_list_begin(w, 0);
    gm_pickle_list_end(w);
    gm_pickle_list_end(w);
    gm_pickle_str(w, key);
}

/* One segment dict of 'size' bytes, one block, on device 'device' (no key when < -1). */
static void segment(struct gm_pickle_writer *w, int64_t device, uint64_t size)
{
    gm_pickle_dict_begin(w, device < -1 ? 3 : 4);
    if (device >= -1)
        kv_int(w, "device", device);
    kv_int(w, "address", 0x7f0000000000);
    kv_int(w, "total_size", (int64_t)size);
    gm_pickle_str(w, "blocks");
    gm_pickle_list_begin(w, 1);
    gm_pickle_dict_begin(w, 2);
    kv_int(w, "size", (int64_t)size);
    gm_pickle_str(w, "state");
    gm_pickle_str(w, "active_allocated");
    gm_pickle_dict_end(w);
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
}

/* Pinned host memory is read into the snapshot's host, never into a device: device 0 keeps
 * its 20 MiB reserved / 12 MiB allocated and its three events, the host has its 4 MiB
 * segment (2 MiB allocated) and five trace events, with host_traces as one list of
 * entries or as a list of lists. */
static void test_host_kept_apart(void **state)
{
    static const char *const files[] = {"fmt2026_pinned_host.pickle",
                                        "fmt2026_pinned_host_nested.pickle"};
    (void)state;
    for (size_t i = 0; i < 2; i++) {
        struct gm_snapshot *s = load_corpus(files[i]);
        struct gm_snapshot_stats st;
        struct gm_snapshot_timeline tl;
        struct gm_error err;
        assert_true(s->has_host_data);
        assert_int_equal(s->n_host_segments, 1);
        assert_int_equal(s->n_host_blocks, 2);
        assert_int_equal(s->host.index, -1);
        assert_true(s->host.has_trace);
        assert_int_equal(s->host.n_events, 5);
        assert_int_equal(s->host.n_actions[GM_ACTION_ALLOC], 2);
        assert_int_equal(s->host_segments[0].device, -1);
        assert_int_equal(s->n_devices, 1);
        assert_int_equal(s->n_events, 3);
        assert_int_equal(s->n_segments, 1);
        assert_int_equal(gm_snapshot_stats(s, &st, &err), GM_OK);
        assert_true(st.has_host);
        assert_int_equal(st.host.reserved_bytes, 4 * MiB);
        assert_int_equal(st.host.allocated_bytes, 2 * MiB);
        assert_int_equal(st.devices[0].fig.reserved_bytes, 20 * MiB);
        assert_int_equal(st.devices[0].fig.allocated_bytes, 12 * MiB);
        gm_snapshot_stats_release(&st);
        assert_int_equal(gm_snapshot_timeline(s, 0, 0, &tl, &err), GM_OK);
        assert_int_equal(tl.peak_bytes, 12 * MiB);
        gm_snapshot_timeline_release(&tl);
        {
            /* the host trace reads as a device trace does */
            struct gm_snapshot_cursor c;
            const struct gm_snapshot_event *e;
            uint64_t alloc = 0;
            gm_snapshot_cursor_init(&c, &s->host, 0);
            while ((e = gm_snapshot_cursor_next(&c)) != NULL)
                if (e->action == GM_ACTION_ALLOC)
                    alloc += e->size;
            assert_int_equal(alloc, 4 * MiB);
        }
        gm_snapshot_free(s);
    }
}

/* What is wrong in host data is refused naming it; a host segment's device needs no index
 * (missing or out of range: -1); host sizes that add up past 2^63 are refused as device
 * sizes are. */
static void test_host_hostile(void **state)
{
    struct mem m;
    struct gm_pickle_writer *w;
    struct gm_snapshot *s;
    struct gm_error err;
    (void)state;

    w = mem_open(&m);
    doc_with(w, "host_segments");
    gm_pickle_int(w, 3);
    gm_pickle_dict_end(w);
    assert_int_equal(mem_load(&m, &s, &err), GM_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "host_segments"));

    w = mem_open(&m);
    doc_with(w, "host_traces");
    gm_pickle_list_begin(w, 1);
    gm_pickle_str(w, "not an entry");
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
    assert_int_equal(mem_load(&m, &s, &err), GM_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "host_traces"));

    w = mem_open(&m);
    doc_with(w, "host_segments");
    gm_pickle_list_begin(w, 2);
    segment(w, -2, 4096); /* no 'device' */
    segment(w, 5000, 4096);
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
    assert_int_equal(mem_load(&m, &s, &err), GM_OK);
    assert_int_equal(s->n_host_segments, 2);
    assert_int_equal(s->host_segments[0].device, -1);
    assert_int_equal(s->host_segments[1].device, -1);
    assert_int_equal(s->n_segments, 0);
    assert_false(s->host.has_trace);
    gm_snapshot_free(s);

    w = mem_open(&m);
    doc_with(w, "host_segments");
    gm_pickle_list_begin(w, 3);
    for (int i = 0; i < 3; i++)
        segment(w, 0, (uint64_t)1 << 61);
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
    assert_int_equal(mem_load(&m, &s, &err), GM_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "host memory"));
}

/* segment_pool_id and the trace entries' pool_id are kept: a CUDA graph's pool (1, 0) and a
 * MemPool (0, 1) beside the default pool. */
static void test_pool_ids(void **state)
{
    struct gm_snapshot *s = load_corpus("fmt2026_private_pools.pickle");
    struct gm_snapshot_event ev[7];
    (void)state;
    assert_int_equal(s->n_segments, 3);
    assert_true(s->segments[1].has_pool_id);
    assert_int_equal(s->segments[1].pool_id[0], 1);
    assert_int_equal(s->segments[1].pool_id[1], 0);
    assert_int_equal(s->segments[2].pool_id[0], 0);
    assert_int_equal(s->segments[2].pool_id[1], 1);
    assert_int_equal(gm_snapshot_events_read(&s->devices[0], 0, ev, 7), 7);
    for (int k = 0; k < 7; k++) {
        const struct gm_snapshot_event_extra *x = gm_snapshot_event_extra_of(s, &ev[k]);
        assert_true(ev[k].flags & GM_EVENT_HAS_POOL_ID);
        assert_non_null(x);
        assert_int_equal(x->pool_id[0], k == 3 || k == 4 ? 1 : 0);
        assert_int_equal(x->pool_id[1], k == 5 || k == 6 ? 1 : 0);
    }
    gm_snapshot_free(s);
}

/* user_metadata is kept per event as written (plain, JSON, control characters), "" where
 * torch wrote its default; internal_metadata only where written. */
static void test_event_metadata(void **state)
{
    struct gm_snapshot *s = load_corpus("fmt2026_metadata.pickle");
    struct gm_snapshot_event ev[6];
    const struct gm_snapshot_event_extra *x;
    (void)state;
    assert_int_equal(gm_snapshot_events_read(&s->devices[0], 0, ev, 6), 6);
    x = gm_snapshot_event_extra_of(s, &ev[0]);
    assert_true(!x || !x->user_metadata || !*x->user_metadata);
    assert_true(!x || !x->internal_metadata);
    x = gm_snapshot_event_extra_of(s, &ev[1]);
    assert_string_equal(x->user_metadata, "loading weights");
    x = gm_snapshot_event_extra_of(s, &ev[2]);
    assert_string_equal(x->user_metadata,
                        "{\"phase\": \"forward\", \"step\": 3, \"note\": \"a \\\"b\\\"\"}");
    assert_null(x->internal_metadata);
    x = gm_snapshot_event_extra_of(s, &ev[3]);
    assert_string_equal(x->user_metadata, "tab\there\nnewline \x1b[31mred");
    assert_string_equal(x->internal_metadata, "mallocWithAddress");
    gm_snapshot_free(s);
}

/* forward_frames become the event's forward stack, innermost first (model.py:15 forward,
 * the module call, train.py:40 main), and name the event's user code; so does the
 * fx_original_trace of a compiled graph's generated-code frame; an event with neither keeps
 * its own stack. */
static void test_forward_frames(void **state)
{
    struct gm_snapshot *s = load_corpus("fmt2026_forward_frames.pickle");
    struct gm_snapshot_event ev[5];
    const struct gm_snapshot_event_extra *x;
    const struct gm_snapshot_stack *fs;
    const struct gm_snapshot_frame *f;
    (void)state;
    assert_int_equal(gm_snapshot_events_read(&s->devices[0], 0, ev, 5), 5);
    x = gm_snapshot_event_extra_of(s, &ev[3]);
    assert_non_null(x);
    assert_true(x->forward_stack > 0);
    fs = &s->stacks[x->forward_stack];
    assert_int_equal(fs->n_frames, 3);
    f = &s->frames[fs->frames[0]];
    assert_string_equal(f->filename, "/home/u/model.py");
    assert_int_equal(f->line, 15);
    assert_string_equal(f->name, "forward");
    assert_string_equal(s->frames[fs->frames[2]].name, "main");
    assert_int_equal(gm_snapshot_event_user_stack(s, &ev[3]), x->forward_stack);
    assert_int_equal(gm_snapshot_event_user_stack(s, &ev[1]), ev[1].stack);
    /* the compiled graph's allocation: its generated-code frame's fx_original_trace */
    assert_non_null(s->frame_fx_origin);
    {
        uint32_t gen = s->stacks[ev[4].stack].frames[0], us;
        assert_true(s->frame_fx_origin[gen] > 0);
        us = gm_snapshot_event_user_stack(s, &ev[4]);
        assert_int_equal(us, s->frame_fx_origin[gen]);
        assert_int_equal(s->stacks[us].n_frames, 1);
        f = &s->frames[s->stacks[us].frames[0]];
        assert_string_equal(f->filename, "/home/u/model.py");
        assert_int_equal(f->line, 15);
        assert_int_equal(s->frame_fx_origin[s->stacks[ev[4].stack].frames[1]], 0);
    }
    gm_snapshot_free(s);
}

/* A forward_frames list of other text (source lines, a cut 'File "' line) gives no forward
 * stack; an item that is not a str is refused; a line number of any length stays bounded. */
static void test_forward_frames_hostile(void **state)
{
    static const char *const lines[] = {
        "    out = model(x)\n", "  File \"/u/a.py", "  File \"/u/a.py\", line x, in f",
        "  File \"/u/b.py\", line 99999999999999999999999999, in g\n"};
    struct mem m;
    struct gm_pickle_writer *w;
    struct gm_snapshot *s;
    struct gm_snapshot_event e;
    struct gm_error err;
    (void)state;
    for (int bad = 0; bad < 2; bad++) {
        w = mem_open(&m);
        gm_pickle_dict_begin(w, 2);
        gm_pickle_str(w, "device_traces"); /* the trace first, the (empty) segments after */
        gm_pickle_list_begin(w, 1);
        gm_pickle_list_begin(w, 1);
        gm_pickle_dict_begin(w, 4);
        gm_pickle_str(w, "action");
        gm_pickle_str(w, "alloc");
        kv_int(w, "addr", 4096);
        kv_int(w, "size", 512);
        gm_pickle_str(w, "forward_frames");
        gm_pickle_list_begin(w, bad ? 1 : 4);
        if (bad)
            gm_pickle_int(w, 7);
        else
            for (int i = 0; i < 4; i++)
                gm_pickle_str(w, lines[i]);
        gm_pickle_list_end(w);
        gm_pickle_dict_end(w);
        gm_pickle_list_end(w);
        gm_pickle_list_end(w);
        gm_pickle_str(w, "segments");
        gm_pickle_list_begin(w, 0);
        gm_pickle_list_end(w);
        gm_pickle_dict_end(w);
        if (bad) {
            assert_int_equal(mem_load(&m, &s, &err), GM_ERR_FORMAT);
            assert_non_null(strstr(err.msg, "forward_frames"));
            continue;
        }
        assert_int_equal(mem_load(&m, &s, &err), GM_OK);
        assert_true(gm_snapshot_event_at(&s->devices[0], 0, &e));
        {
            const struct gm_snapshot_event_extra *x = gm_snapshot_event_extra_of(s, &e);
            const struct gm_snapshot_stack *fs;
            assert_non_null(x);
            fs = &s->stacks[x->forward_stack];
            /* only the b.py line names a frame; its line number is cut, not overflowed */
            assert_int_equal(fs->n_frames, 1);
            assert_string_equal(s->frames[fs->frames[0]].name, "g");
            assert_true(s->frames[fs->frames[0]].line > 0);
        }
        gm_snapshot_free(s);
    }
}

/* An XPU snapshot (allocator_settings with PYTORCH_ALLOC_CONF and none of the CUDA
 * allocator's keys) is told from a CUDA one; settings naming both are CUDA's. */
static void test_device_kind(void **state)
{
    struct gm_snapshot *s = load_corpus("fmt2026_xpu_writer_c.pickle");
    struct mem m;
    struct gm_pickle_writer *w;
    struct gm_error err;
    (void)state;
    assert_int_equal(s->device_kind, GM_DEVICE_XPU);
    assert_string_equal(gm_device_kind_name(s->device_kind), "xpu");
    assert_int_equal(s->protocol, 2);
    gm_snapshot_free(s);
    s = load_corpus("fmt2026_pinned_host.pickle");
    assert_int_equal(s->device_kind, GM_DEVICE_CUDA);
    gm_snapshot_free(s);
    w = mem_open(&m);
    doc_with(w, "allocator_settings");
    gm_pickle_dict_begin(w, 2);
    gm_pickle_str(w, "PYTORCH_ALLOC_CONF");
    gm_pickle_str(w, "");
    gm_pickle_str(w, "release_lock_on_cudamalloc");
    gm_pickle_bool(w, false);
    gm_pickle_dict_end(w);
    gm_pickle_dict_end(w);
    assert_int_equal(mem_load(&m, &s, &err), GM_OK);
    assert_int_equal(s->device_kind, GM_DEVICE_CUDA);
    gm_snapshot_free(s);
}

/* The component counters of memory_stats(): flat keys and the nested form, components with
 * no category counted apart, and refusals. */
static void test_components(void **state)
{
    static const char flat[] = "{\"component_bytes.parameter.current\": 8, "
                               "\"component_bytes.parameter.peak\": 99, "
                               "\"component_bytes.optimizer_state.current\": 3, "
                               "\"component_bytes.kv_cache.current\": 5, "
                               "\"allocated_bytes.all.current\": 100}";
    static const char nested[] = "{\"component_bytes\": {\"gradient\": {\"current\": 4}}}";
    struct gm_components c;
    struct gm_error err;
    (void)state;
    assert_int_equal(gm_components_parse(flat, strlen(flat), "f", &c, &err), GM_OK);
    assert_int_equal(c.n_components, 3);
    assert_true(c.has[GM_CATEGORY_PARAMETER]);
    assert_int_equal(c.bytes[GM_CATEGORY_PARAMETER], 8);
    assert_int_equal(c.bytes[GM_CATEGORY_OPTIMIZER_STATE], 3);
    assert_false(c.has[GM_CATEGORY_GRADIENT]);
    assert_int_equal(c.unmapped_bytes, 5);
    assert_int_equal(gm_components_parse(nested, strlen(nested), "n", &c, &err), GM_OK);
    assert_int_equal(c.bytes[GM_CATEGORY_GRADIENT], 4);
    assert_int_equal(gm_components_parse("[]", 2, "l", &c, &err), GM_ERR_FORMAT);
    assert_int_equal(gm_components_parse("{}", 2, "e", &c, &err), GM_ERR_FORMAT);
    assert_int_equal(gm_components_parse("{\"component_bytes.a.current\": 1.5}", 34, "x", &c, &err),
                     GM_ERR_FORMAT);
    assert_int_equal(gm_components_load("/nonexistent/memory_stats.json", &c, &err), GM_ERR_NOENT);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_host_kept_apart), cmocka_unit_test(test_host_hostile),
    cmocka_unit_test(test_pool_ids),        cmocka_unit_test(test_event_metadata),
    cmocka_unit_test(test_forward_frames),  cmocka_unit_test(test_forward_frames_hostile),
    cmocka_unit_test(test_device_kind),     cmocka_unit_test(test_components),
};

int main(void)
{
    return cmocka_run_group_tests(tests, NULL, NULL);
}
