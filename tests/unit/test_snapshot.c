/* SPDX-License-Identifier: MIT */
/* test_snapshot.c - the snapshot model, stats and timeline on hand-built pickles with known
 * answers, and robustness on real files: every proper prefix, random byte flips, and
 * allocation failures at every point; a file truncated while it is read, a FIFO given as a
 * snapshot, the one-pass peak search against the forward replay, cursors against random
 * access. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumem/gpumem.h"
#include "gpumem/internal/alloc_hooks.h"
#include "snapshot/load_int.h"
#include "snapshot/snapshot_int.h"
#include "testdata.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

static void exercise(const struct gm_snapshot *s);

/* A tiny protocol-2 pickle writer (the TorchScript pickler's shapes). */
struct em {
    uint8_t b[16384];
    size_t n;
};

static void e_raw(struct em *e, const void *p, size_t n)
{
    assert_true(e->n + n <= sizeof e->b);
    memcpy(e->b + e->n, p, n);
    e->n += n;
}

static void e_op(struct em *e, uint8_t op)
{
    e_raw(e, &op, 1);
}

static void e_str(struct em *e, const char *s)
{
    uint32_t n = (uint32_t)strlen(s);
    uint8_t len[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16), (uint8_t)(n >> 24)};
    e_op(e, 'X');
    e_raw(e, len, 4);
    e_raw(e, s, n);
}

static void e_int(struct em *e, int64_t v)
{
    uint8_t b[10];
    uint64_t u = (uint64_t)v;
    b[0] = 0x8a;
    b[1] = 8;
    for (int i = 0; i < 8; i++)
        b[2 + i] = (uint8_t)(u >> (8 * i));
    e_raw(e, b, 10);
}

static void e_kv_int(struct em *e, const char *k, int64_t v)
{
    e_str(e, k);
    e_int(e, v);
}

static void e_kv_str(struct em *e, const char *k, const char *v)
{
    e_str(e, k);
    e_str(e, v);
}

static void e_begin_dict(struct em *e)
{
    e_raw(e, "}(", 2);
}

static void e_begin_list(struct em *e)
{
    e_raw(e, "](", 2);
}

static void e_end_dict(struct em *e)
{
    e_op(e, 'u');
}

static void e_end_list(struct em *e)
{
    e_op(e, 'e');
}

static void e_block(struct em *e, uint64_t size, uint64_t req, const char *state)
{
    e_begin_dict(e);
    e_kv_int(e, "size", (int64_t)size);
    e_kv_int(e, "requested_size", (int64_t)req);
    e_kv_str(e, "state", state);
    e_str(e, "frames");
    e_begin_list(e);
    e_begin_dict(e);
    e_kv_str(e, "filename", "D:\\work\\train.py");
    e_kv_int(e, "line", 7);
    e_kv_str(e, "name", "step");
    e_end_dict(e);
    e_end_list(e);
    e_end_dict(e);
}

static void e_event(struct em *e, const char *action, uint64_t addr, uint64_t size, int64_t t)
{
    e_begin_dict(e);
    e_kv_str(e, "action", action);
    e_kv_int(e, strcmp(action, "oom") ? "addr" : "device_free", (int64_t)addr);
    e_kv_int(e, "size", (int64_t)size);
    e_kv_int(e, "stream", 0);
    e_kv_int(e, "time_us", t);
    e_end_dict(e);
}

/* A pickle of one small segment of 'total_size' bytes at 0x1000 on device 0, open at
 * its list of blocks. */
static void begin_segment(struct em *e, uint64_t total_size)
{
    e->n = 0;
    e_raw(e, "\x80\x02", 2);
    e_begin_dict(e);
    e_str(e, "segments");
    e_begin_list(e);
    e_begin_dict(e);
    e_kv_int(e, "device", 0);
    e_kv_int(e, "address", 0x1000);
    e_kv_int(e, "total_size", (int64_t)total_size);
    e_kv_int(e, "stream", 0);
    e_kv_str(e, "segment_type", "small");
    e_str(e, "blocks");
    e_begin_list(e);
}

/* Closes begin_segment()'s blocks and opens device 0's trace. */
static void begin_trace(struct em *e)
{
    e_end_list(e);
    e_end_dict(e);
    e_end_list(e);
    e_str(e, "device_traces");
    e_begin_list(e);
    e_begin_list(e);
}

/* The scenario of the timeline test (see test_timeline for the expected figures). */
static void build_scenario(struct em *e)
{
    begin_segment(e, 4096);
    e_block(e, 1024, 1000, "active_allocated");
    e_block(e, 1024, 900, "active_allocated");
    e_block(e, 2048, 0, "inactive");
    begin_trace(e);
    e_event(e, "segment_alloc", 0x1000, 4096, 100);
    e_event(e, "alloc", 0x2000, 300, 101);
    e_event(e, "alloc", 0x1000, 1000, 102);
    e_event(e, "free_requested", 0x2000, 300, 103);
    e_event(e, "free_completed", 0x2000, 300, 104);
    e_event(e, "free_completed", 0x5000, 50, 105);
    e_event(e, "alloc", 0x3000, 700, 106);
    e_event(e, "alloc", 0x3000, 200, 107);
    e_event(e, "free_completed", 0x3000, 200, 108);
    e_event(e, "oom", 123, 999, 109);
    e_end_list(e);
    e_begin_list(e);
    e_end_list(e);
    e_end_list(e);
    e_str(e, "external_annotations");
    e_begin_list(e);
    e_end_list(e);
    e_end_dict(e);
    e_op(e, '.');
}

static void test_model(void **state)
{
    struct em e;
    struct gm_snapshot *s;
    struct gm_error err;
    const struct gm_snapshot_device *d;
    const struct gm_snapshot_stack *st;
    struct gm_snapshot_event ev;
    (void)state;
    build_scenario(&e);
    assert_int_equal(gm_snapshot_load_mem(e.b, e.n, NULL, &s, &err), GM_OK);
    assert_int_equal(s->gen, GM_SNAPSHOT_GEN_G5);
    assert_int_equal(s->protocol, 2);
    assert_int_equal(s->n_devices, 2);
    assert_int_equal(s->n_segments, 1);
    assert_int_equal(s->n_blocks, 3);
    assert_true(s->segments[0].is_small);
    /* block addresses from the running sum */
    assert_true(s->segments[0].blocks[1].address == 0x1400);
    assert_true(s->segments[0].blocks[2].address == 0x1800);
    /* one frame, one stack, shared by both active blocks (interned by content) */
    assert_int_equal(s->n_frames, 1);
    assert_int_equal(s->n_stacks, 2);
    assert_int_equal(s->segments[0].blocks[0].stack, 1);
    assert_int_equal(s->segments[0].blocks[2].stack, 1);
    st = &s->stacks[1];
    assert_int_equal(st->n_frames, 1);
    assert_string_equal(s->frames[st->frames[0]].filename, "D:\\work\\train.py");
    assert_true(s->frames[st->frames[0]].is_python);
    d = gm_snapshot_device_by_index(s, 0);
    assert_non_null(d);
    assert_int_equal(d->n_events, 10);
    assert_true(gm_snapshot_event_at(d, 9, &ev));
    assert_int_equal(ev.action, GM_ACTION_OOM);
    assert_true(gm_snapshot_event_device_free(&ev) == 123);
    assert_true(d->n_actions[GM_ACTION_OOM] == 1);
    assert_true(gm_snapshot_event_at(d, 0, &ev));
    assert_true(ev.flags & GM_EVENT_HAS_TIME);
    assert_false(gm_snapshot_event_at(d, 10, &ev));
    assert_true(s->has_time && s->time_first_us == 100 && s->time_last_us == 109);
    d = gm_snapshot_device_by_index(s, 1);
    assert_non_null(d);
    assert_true(d->has_trace);
    assert_int_equal(d->n_events, 0);
    assert_null(gm_snapshot_device_by_index(s, 2));
    gm_snapshot_free(s);
}

static void test_stats(void **state)
{
    struct em e;
    struct gm_snapshot *s;
    struct gm_snapshot_stats st;
    struct gm_error err;
    const struct gm_snapshot_figures *f;
    (void)state;
    build_scenario(&e);
    assert_int_equal(gm_snapshot_load_mem(e.b, e.n, NULL, &s, &err), GM_OK);
    assert_int_equal(gm_snapshot_stats(s, &st, &err), GM_OK);
    assert_int_equal(st.n_devices, 2);
    f = &st.devices[0].fig;
    assert_true(f->reserved_bytes == 4096);
    assert_true(f->allocated_bytes == 2048);
    assert_true(f->active_bytes == 2048);
    assert_true(f->requested_bytes == 1900);
    assert_true(f->internal_free_bytes == 148);
    assert_true(f->external_free_bytes == 2048);
    assert_true(f->largest_free_block_bytes == 2048);
    assert_int_equal(st.devices[0].n_pools, 1);
    assert_true(st.devices[0].pools[0].is_small);
    assert_int_equal(st.devices[0].n_hist, 1);
    assert_true(st.devices[0].hist[0].lo == 4096);
    assert_true(st.devices[1].fig.reserved_bytes == 0);
    gm_snapshot_stats_release(&st);
    gm_snapshot_free(s);
}

static void test_timeline(void **state)
{
    static const uint64_t want[11] = {950,  950,  1250, 2250, 2250, 1950,
                                      1900, 2600, 2800, 2600, 2600};
    struct em e;
    struct gm_snapshot *s;
    struct gm_snapshot_timeline tl;
    struct gm_snapshot_live_group *g;
    struct gm_snapshot_walk w;
    size_t ng;
    struct gm_error err;
    (void)state;
    build_scenario(&e);
    assert_int_equal(gm_snapshot_load_mem(e.b, e.n, NULL, &s, &err), GM_OK);
    assert_int_equal(gm_snapshot_timeline(s, 0, GM_TIMELINE_LIVE, &tl, &err), GM_OK);
    assert_int_equal(gm_snapshot_walk_init(&w, s, gm_snapshot_device_by_index(s, 0), &tl, &err),
                     GM_OK);
    assert_true(w.allocated == want[0] && w.reserved == 0);
    for (int i = 1; i < 11; i++) {
        assert_non_null(gm_snapshot_walk_next(&w));
        assert_int_equal(w.cur.index, i - 1);
        assert_true(w.allocated == want[i]);
        assert_true(w.reserved == 4096);
    }
    assert_null(gm_snapshot_walk_next(&w));
    gm_snapshot_walk_release(&w);
    assert_true(tl.initial_bytes == 950);
    assert_true(tl.peak_bytes == 2800);
    assert_int_equal(tl.peak_event_index, 7);
    assert_true(tl.peak_time_valid && tl.peak_time_us == 107);
    assert_true(tl.final_bytes == 2600);
    assert_true(tl.initial_reserved_bytes == 0);
    assert_true(tl.peak_reserved_bytes == 4096);
    assert_int_equal(tl.peak_reserved_event_index, 0);
    assert_int_equal(tl.n_live, 4);
    assert_true(tl.live[0].bytes == 1000 && tl.live[0].alloc_event == 2);
    assert_true(tl.live[1].bytes == 900 && tl.live[1].alloc_event == -1);
    assert_true(tl.live[2].bytes == 700 && tl.live[3].bytes == 200);
    assert_int_equal(gm_snapshot_group_live(&tl, &g, &ng, &err), GM_OK);
    assert_int_equal(ng, 2); /* the blocks' stack, and the events' empty stack */
    assert_true(g[0].bytes == 1900 && g[0].count == 3 && g[0].stack == 0);
    assert_true(g[1].bytes == 900 && g[1].count == 1 && g[1].stack == 1);
    gm_free(g);
    gm_snapshot_timeline_release(&tl);
    /* a device without events: the initial state */
    assert_int_equal(gm_snapshot_timeline(s, 1, GM_TIMELINE_LIVE, &tl, &err), GM_OK);
    assert_int_equal(tl.n_live, 0);
    assert_int_equal(tl.peak_event_index, -1);
    assert_true(tl.peak_bytes == 0);
    gm_snapshot_timeline_release(&tl);
    assert_int_equal(gm_snapshot_timeline(s, 7, 0, &tl, &err), GM_ERR_INVALID);
    gm_snapshot_free(s);
}

/* Trace entries with no keys at all (found by fuzzing: an all-empty extra hashed to the
 * empty cache key). */
static void test_empty_entries(void **state)
{
    struct em e;
    struct gm_snapshot *s;
    struct gm_snapshot_event ev;
    struct gm_error err;
    (void)state;
    e.n = 0;
    e_raw(&e, "\x80\x02", 2);
    e_begin_dict(&e);
    e_str(&e, "segments");
    e_begin_list(&e);
    e_end_list(&e);
    e_str(&e, "device_traces");
    e_begin_list(&e);
    e_begin_list(&e);
    e_begin_dict(&e);
    e_end_dict(&e);
    e_begin_dict(&e);
    e_end_dict(&e);
    e_end_list(&e);
    e_end_list(&e);
    e_end_dict(&e);
    e_op(&e, '.');
    assert_int_equal(gm_snapshot_load_mem(e.b, e.n, NULL, &s, &err), GM_OK);
    assert_int_equal(s->n_events, 2);
    assert_true(gm_snapshot_event_at(&s->devices[0], 1, &ev));
    assert_int_equal(ev.action, GM_ACTION_OTHER);
    assert_int_equal(s->n_unknown_actions, 2);
    exercise(s);
    gm_snapshot_free(s);
}

static void test_alloc_failures(void **state)
{
    struct em e;
    bool ok = false;
    (void)state;
    build_scenario(&e);
    for (long n = 0; n < 2000 && !ok; n++) {
        struct gm_snapshot *s = NULL;
        struct gm_error err;
        enum gm_status st;
        gm_alloc_fail_after(n);
        st = gm_snapshot_load_mem(e.b, e.n, NULL, &s, &err);
        if (st == GM_OK) {
            struct gm_snapshot_timeline tl;
            struct gm_snapshot_stats sst;
            enum gm_status t1 = gm_snapshot_timeline(s, 0, GM_TIMELINE_LIVE, &tl, &err);
            enum gm_status t2 = gm_snapshot_stats(s, &sst, &err);
            gm_alloc_fail_after(-1);
            assert_true(t1 == GM_OK || t1 == GM_ERR_NOMEM);
            assert_true(t2 == GM_OK || t2 == GM_ERR_NOMEM);
            if (t1 == GM_OK)
                gm_snapshot_timeline_release(&tl);
            if (t2 == GM_OK)
                gm_snapshot_stats_release(&sst);
            ok = t1 == GM_OK && t2 == GM_OK;
            gm_snapshot_free(s);
        } else {
            gm_alloc_fail_after(-1);
            assert_true(st == GM_ERR_NOMEM || st == GM_ERR_LIMIT);
            assert_null(s);
        }
    }
    gm_alloc_fail_after(-1);
    assert_true(ok);
}

/* A real snapshot (third-party data) read whole; fails the test when it cannot be read. */
static uint8_t *read_real(const char *name, size_t *len)
{
    char path[4096];
    FILE *f;
    uint8_t *buf;
    long n;
    f = fopen(gm_testdata_path(path, sizeof path, "snapshots", name), "rb");
    if (!f)
        fail_msg("%s: cannot open", path);
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return NULL;
    }
    buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void exercise(const struct gm_snapshot *s)
{
    struct gm_snapshot_stats st;
    struct gm_error err;
    assert_int_equal(gm_snapshot_stats(s, &st, &err), GM_OK);
    gm_snapshot_stats_release(&st);
    for (size_t i = 0; i < s->n_devices; i++) {
        struct gm_snapshot_timeline tl;
        struct gm_snapshot_live_group *g;
        size_t ng;
        assert_int_equal(gm_snapshot_timeline(s, s->devices[i].index, GM_TIMELINE_LIVE, &tl, &err),
                         GM_OK);
        assert_int_equal(gm_snapshot_group_live(&tl, &g, &ng, &err), GM_OK);
        for (size_t k = 0; k < ng; k++)
            (void)gm_snapshot_stack_user_frame(s, g[k].stack);
        gm_free(g);
        gm_snapshot_timeline_release(&tl);
    }
}

static void test_real_file_prefixes(void **state)
{
    size_t len;
    uint8_t *data = read_real("g5_annotations_small.pickle", &len);
    struct gm_snapshot *s;
    struct gm_error err;
    (void)state;
    assert_non_null(data);
    assert_int_equal(gm_snapshot_load_mem(data, len, NULL, &s, &err), GM_OK);
    assert_int_equal(s->n_segments, 2);
    assert_int_equal(s->n_blocks, 79);
    assert_int_equal(s->n_events, 5);
    assert_int_equal(s->gen, GM_SNAPSHOT_GEN_G5);
    exercise(s);
    gm_snapshot_free(s);
    /* every proper prefix fails cleanly */
    for (size_t n = 0; n < len; n++) {
        enum gm_status st = gm_snapshot_load_mem(data, n, NULL, &s, &err);
        assert_int_not_equal(st, GM_OK);
        assert_true(st == GM_ERR_FORMAT);
        assert_null(s);
    }
    free(data);
}

static void test_real_file_flips(void **state)
{
    size_t len;
    uint8_t *data = read_real("g5_annotations_small.pickle", &len);
    uint8_t *copy;
    uint32_t rnd = 12345;
    size_t ok = 0;
    (void)state;
    assert_non_null(data);
    copy = malloc(len);
    assert_non_null(copy);
    for (int round = 0; round < 3000; round++) {
        struct gm_snapshot *s;
        struct gm_error err;
        enum gm_status st;
        int flips;
        memcpy(copy, data, len);
        rnd = rnd * 1103515245u + 12345u;
        flips = 1 + (int)((rnd >> 16) % 4);
        for (int f = 0; f < flips; f++) {
            rnd = rnd * 1103515245u + 12345u;
            size_t at = (rnd >> 8) % len;
            rnd = rnd * 1103515245u + 12345u;
            copy[at] = (uint8_t)(rnd >> 16);
        }
        st = gm_snapshot_load_mem(copy, len, NULL, &s, &err);
        if (st == GM_OK) {
            exercise(s);
            gm_snapshot_free(s);
            ok++;
        } else {
            assert_true(st == GM_ERR_FORMAT || st == GM_ERR_UNSUPPORTED || st == GM_ERR_LIMIT);
        }
    }
    assert_true(ok > 0);
    free(copy);
    free(data);
}

/* A snapshot of 'n' trace entries (alloc/free pairs, ~80 bytes each) written to 'f'. */
static void write_big(FILE *f, size_t n)
{
    struct em e;
    e.n = 0;
    e_raw(&e, "\x80\x02", 2);
    e_begin_dict(&e);
    e_str(&e, "segments");
    e_begin_list(&e);
    e_end_list(&e);
    e_str(&e, "device_traces");
    e_op(&e, ']'); /* the outer list */
    e_op(&e, ']'); /* device 0's */
    fwrite(e.b, 1, e.n, f);
    for (size_t k = 0; k < n; k += 100) {
        e.n = 0;
        e_op(&e, '(');
        for (size_t i = k; i < k + 100 && i < n; i++)
            e_event(&e, i % 2 ? "free_completed" : "alloc", 0x100000 + (i / 2 % 64) * 4096,
                    512 * (1 + i % 7), (int64_t)i);
        e_op(&e, 'e'); /* APPENDS */
        fwrite(e.b, 1, e.n, f);
    }
    e.n = 0;
    e_op(&e, 'a'); /* device 0's list into the outer one */
    e_end_dict(&e);
    e_op(&e, '.');
    fwrite(e.b, 1, e.n, f);
}

struct shrink {
    const char *path;
    int calls;
};

/* The progress callback of the load: at its first call the file loses all but 1 MiB, as
 * when a writer rewrites a snapshot someone reads. */
static void shrink_file(uint64_t done, uint64_t total, void *ctx)
{
    struct shrink *sh = ctx;
    (void)done;
    (void)total;
    if (sh->calls++ == 0)
        assert_int_equal(truncate(sh->path, 1 << 20), 0);
}

static void test_file_shrinks(void **state)
{
    char path[] = "/tmp/gpumem-test-shrink-XXXXXX";
    int fd = mkstemp(path);
    FILE *f;
    struct gm_snapshot *s = NULL;
    struct gm_snapshot_opts o;
    struct gm_error err;
    struct shrink sh = {path, 0};
    (void)state;
    assert_true(fd >= 0);
    f = fdopen(fd, "wb");
    assert_non_null(f);
    write_big(f, 300000); /* about 24 MB: progress is reported from 16 MiB on */
    assert_int_equal(fclose(f), 0);
    /* read whole, it is a snapshot of 300000 events */
    assert_int_equal(gm_snapshot_load(path, NULL, &s, &err), GM_OK);
    assert_int_equal(s->n_events, 300000);
    gm_snapshot_free(s);
    /* shrunk while it is read: an error, no crash (and nothing leaks: ASan) */
    memset(&o, 0, sizeof(o));
    o.progress = shrink_file;
    o.progress_ctx = &sh;
    assert_int_equal(gm_snapshot_load(path, &o, &s, &err), GM_ERR_IO);
    assert_null(s);
    assert_non_null(strstr(err.msg, "the file changed while being read"));
    assert_non_null(strstr(err.msg, path));
    /* and once more, so that the handler is installed again for the next load */
    sh.calls = 0;
    assert_int_equal(gm_snapshot_load(path, &o, &s, &err), GM_ERR_FORMAT); /* 1 MiB now */
    unlink(path);
}

static void test_fifo(void **state)
{
    char dir[] = "/tmp/gpumem-test-fifo-XXXXXX", path[64];
    struct gm_snapshot *s = NULL;
    struct gm_error err;
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/pipe", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    /* refused without waiting for a writer (a blocking open would hang the test) */
    assert_int_equal(gm_snapshot_load(path, NULL, &s, &err), GM_ERR_IO);
    assert_null(s);
    assert_non_null(strstr(err.msg, "FIFO"));
    unlink(path);
    /* a directory is an input that is missing (exit 66), named as a directory */
    assert_int_equal(gm_snapshot_load(dir, NULL, &s, &err), GM_ERR_NOENT);
    assert_non_null(strstr(err.msg, "is a directory"));
    rmdir(dir);
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* gzip'd snapshots are read as the pickle they hold, standard input (a pipe) too; JSON,
 * text and other formats are named as such, a truncated gzip file as truncated. */
static void test_inputs(void **state)
{
    char dir[] = "/tmp/gpumem-test-inputs-XXXXXX", pk[96], gz[96], js[96], tx[96], zp[96];
    struct gm_example_opts eo;
    struct gm_snapshot *a = NULL, *b = NULL, *c = NULL;
    struct gm_error err;
    char *buf = NULL;
    size_t len = 0;
    FILE *mem;
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(pk, sizeof(pk), "%s/ex.pickle", dir);
    snprintf(gz, sizeof(gz), "%s/ex.pickle.gz", dir);
    snprintf(js, sizeof(js), "%s/x.json", dir);
    snprintf(tx, sizeof(tx), "%s/x.txt", dir);
    snprintf(zp, sizeof(zp), "%s/x.pt", dir);
    gm_example_opts_init(&eo);
    eo.iterations = 2;
    mem = open_memstream(&buf, &len);
    assert_non_null(mem);
    assert_int_equal(gm_example_write(mem, &eo, &err), GM_OK);
    assert_int_equal(fclose(mem), 0);
    write_file(pk, buf, len);
    {
        gzFile g = gzopen(gz, "wb");
        assert_non_null(g);
        assert_int_equal(gzwrite(g, buf, (unsigned)len), (int)len);
        assert_int_equal(gzclose(g), Z_OK);
    }
    assert_int_equal(gm_snapshot_load(pk, NULL, &a, &err), GM_OK);
    assert_int_equal(gm_snapshot_load(gz, NULL, &b, &err), GM_OK);
    assert_true(b->compressed);
    assert_int_equal(b->pickle_size, len);
    assert_true(b->file_size < len);
    assert_int_equal(a->n_events, b->n_events);
    assert_int_equal(a->n_stacks, b->n_stacks);
    /* through a pipe, as standard input */
    {
        int fd[2];
        pid_t pid;
        assert_int_equal(pipe(fd), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            size_t off = 0;
            close(fd[0]);
            while (off < len) {
                ssize_t k = write(fd[1], buf + off, len - off);
                if (k <= 0)
                    _exit(1);
                off += (size_t)k;
            }
            _exit(0);
        }
        close(fd[1]);
        assert_int_equal(gm_snapshot_load_fd(fd[0], NULL, NULL, &c, &err), GM_OK);
        close(fd[0]);
        waitpid(pid, NULL, 0);
        assert_int_equal(c->n_events, a->n_events);
        assert_int_equal(c->file_size, len);
    }
    gm_snapshot_free(a);
    gm_snapshot_free(b);
    gm_snapshot_free(c);
    a = b = c = NULL;
    /* a file that inflates far more than it holds: the last input is read long before the
     * last output is written (a snapshot with 8 MiB of zeros in a key of its own) */
    {
        static const unsigned char hd[] = {0x80, 4,   '}', 0x94, '(', 0x8c, 8,    's',  'e',
                                           'g',  'm', 'e', 'n',  't', 's',  ']',  0x8c, 3,
                                           'p',  'a', 'd', 'B',  0,   0,    0x80, 0};
        const size_t pad = (size_t)8 << 20;
        unsigned char *z = calloc(1, sizeof(hd) + pad + 2);
        gzFile g = gzopen(gz, "wb9");
        assert_non_null(z);
        memcpy(z, hd, sizeof(hd));     /* ...BINBYTES len32 (8 MiB, little-endian) */
        z[sizeof(hd) + pad] = 'u';     /* SETITEMS */
        z[sizeof(hd) + pad + 1] = '.'; /* STOP */
        assert_non_null(g);
        assert_int_equal(gzwrite(g, z, (unsigned)(sizeof(hd) + pad + 2)),
                         (int)(sizeof(hd) + pad + 2));
        assert_int_equal(gzclose(g), Z_OK);
        assert_int_equal(gm_snapshot_load(gz, NULL, &b, &err), GM_OK);
        assert_int_equal(b->pickle_size, sizeof(hd) + pad + 2);
        gm_snapshot_free(b);
        b = NULL;
        free(z);
    }
    /* a gzip file cut in the middle of its stream */
    {
        struct stat st;
        assert_int_equal(stat(gz, &st), 0);
        assert_int_equal(truncate(gz, st.st_size / 2), 0);
        assert_int_equal(gm_snapshot_load(gz, NULL, &b, &err), GM_ERR_FORMAT);
        assert_non_null(strstr(err.msg, "truncated"));
    }
    /* not a snapshot: named as what it is */
    write_file(js, "{\"segments\": []}\n", 17);
    assert_int_equal(gm_snapshot_load(js, NULL, &a, &err), GM_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "JSON document"));
    write_file(tx, "hello world\n", 12);
    assert_int_equal(gm_snapshot_load(tx, NULL, &a, &err), GM_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "text file"));
    write_file(zp, "PK\x03\x04 archive", 12);
    assert_int_equal(gm_snapshot_load(zp, NULL, &a, &err), GM_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "zip archive"));
    /* a protocol-0 pickle of code keeps the pickle reader's refusal */
    write_file(tx, "cos\nsystem\n(S'ls'\ntR.", 21);
    assert_int_equal(gm_snapshot_load(tx, NULL, &a, &err), GM_ERR_UNSUPPORTED);
    assert_non_null(strstr(err.msg, "GLOBAL"));
    unlink(pk);
    unlink(gz);
    unlink(js);
    unlink(tx);
    unlink(zp);
    rmdir(dir);
    free(buf);
}

/* The figures of one timeline that both computations make. */
static void same_timeline(const struct gm_snapshot_timeline *a,
                          const struct gm_snapshot_timeline *b)
{
    assert_true(a->initial_bytes == b->initial_bytes);
    assert_true(a->peak_bytes == b->peak_bytes);
    assert_true(a->peak_event_index == b->peak_event_index);
    assert_true(a->reserved_at_peak_bytes == b->reserved_at_peak_bytes);
    assert_true(a->peak_reserved_bytes == b->peak_reserved_bytes);
    assert_true(a->peak_reserved_event_index == b->peak_reserved_event_index);
    assert_true(a->final_bytes == b->final_bytes);
    assert_true(a->peak_time_valid == b->peak_time_valid && a->peak_time_us == b->peak_time_us);
    assert_true(a->initial_reserved_bytes == b->initial_reserved_bytes);
    assert_true(a->reserved_start_raw == b->reserved_start_raw);
    assert_true(a->n_allocs_matched == b->n_allocs_matched);
    assert_true(a->pending_max_ == b->pending_max_);
    assert_true(a->n_live == b->n_live);
    for (size_t i = 0; i < a->n_live; i++)
        assert_true(a->live[i].addr == b->live[i].addr && a->live[i].bytes == b->live[i].bytes &&
                    a->live[i].stream == b->live[i].stream &&
                    a->live[i].stack == b->live[i].stack &&
                    a->live[i].alloc_event == b->live[i].alloc_event);
}

/* The walk of device 'd' of 's' against the walk of the same events as a plain array
 * (which pairs every free with its alloc through the address map): the same totals after
 * each event. */
static void check_walk(const struct gm_snapshot *s, const struct gm_snapshot_device *d)
{
    struct gm_snapshot_device plain = *d;
    struct gm_snapshot_event *ev = calloc(d->n_events ? d->n_events : 1, sizeof(*ev));
    struct gm_snapshot_timeline tl;
    struct gm_snapshot_walk a, b;
    struct gm_error err;
    assert_non_null(ev);
    assert_int_equal(gm_snapshot_events_read(d, 0, ev, d->n_events), d->n_events);
    plain.packed = NULL;
    plain.events = ev;
    assert_int_equal(gm_snapshot_timeline(s, d->index, 0, &tl, &err), GM_OK);
    assert_int_equal(gm_snapshot_walk_init(&a, s, d, &tl, &err), GM_OK);
    assert_int_equal(gm_snapshot_walk_init(&b, s, &plain, &tl, &err), GM_OK);
    while (gm_snapshot_walk_next(&a) != NULL) {
        assert_non_null(gm_snapshot_walk_next(&b));
        assert_true(a.allocated == b.allocated && a.reserved == b.reserved);
    }
    assert_null(gm_snapshot_walk_next(&b));
    gm_snapshot_walk_release(&a);
    gm_snapshot_walk_release(&b);
    /* a batch at a time, the packed trace and the plain array alike, a few events taken one
     * by one between batches: the same events and totals as one by one */
    for (int plain_too = 0; plain_too < 2; plain_too++) {
        struct gm_snapshot_walk w, one;
        const struct gm_snapshot_event *batch;
        struct snap_walk_totals after[GM_SNAPSHOT_CURSOR_BATCH];
        size_t n, seen = 0;
        assert_int_equal(gm_snapshot_walk_init(&w, s, plain_too ? &plain : d, &tl, &err), GM_OK);
        assert_int_equal(gm_snapshot_walk_init(&one, s, d, &tl, &err), GM_OK);
        for (;;) {
            if (seen % 3 == 1) {
                const struct gm_snapshot_event *e = gm_snapshot_walk_next(&w);
                if (!e)
                    break;
                assert_non_null(gm_snapshot_walk_next(&one));
                assert_true(w.allocated == one.allocated && w.reserved == one.reserved);
                assert_int_equal(w.cur.index, seen);
                seen++;
                continue;
            }
            if ((n = snap_walk_batch(&w, &batch, after)) == 0)
                break;
            assert_true(n <= GM_SNAPSHOT_CURSOR_BATCH);
            assert_int_equal(w.cur.index + 1, seen + n);
            for (size_t i = 0; i < n; i++, seen++) {
                const struct gm_snapshot_event *e = gm_snapshot_walk_next(&one);
                assert_non_null(e);
                assert_memory_equal(e, &batch[i], offsetof(struct gm_snapshot_event, flags) + 1);
                assert_true(after[i].allocated == one.allocated &&
                            after[i].reserved == one.reserved);
            }
            assert_true(w.allocated == one.allocated && w.reserved == one.reserved);
        }
        assert_int_equal(seen, d->n_events);
        assert_null(gm_snapshot_walk_next(&one));
        assert_int_equal(snap_walk_batch(&w, &batch, after), 0);
        gm_snapshot_walk_release(&w);
        gm_snapshot_walk_release(&one);
    }
    gm_snapshot_timeline_release(&tl);
    free(ev);
}

/* Every device of 's': the one-pass peak search against the forward replay, the walk
 * against the walk of a plain array, and cursors opened anywhere against a cursor from the
 * start. */
static void check_passes(const struct gm_snapshot *s)
{
    for (size_t i = 0; i < s->n_devices; i++) {
        const struct gm_snapshot_device *d = &s->devices[i];
        struct gm_snapshot_timeline one, two;
        struct gm_snapshot_cursor c, at;
        const struct gm_snapshot_event *e;
        struct gm_error err;
        assert_int_equal(snap_timeline(s, d->index, GM_TIMELINE_LIVE, false, &one, &err), GM_OK);
        assert_int_equal(snap_timeline(s, d->index, GM_TIMELINE_LIVE, true, &two, &err), GM_OK);
        same_timeline(&one, &two);
        gm_snapshot_timeline_release(&one);
        gm_snapshot_timeline_release(&two);
        check_walk(s, d);
        gm_snapshot_cursor_init(&c, d, 0);
        while ((e = gm_snapshot_cursor_next(&c)) != NULL) {
            struct gm_snapshot_event r;
            size_t k = c.index;
            if (k % 97 != 0 && k + 1 != d->n_events)
                continue;
            assert_true(gm_snapshot_event_at(d, k, &r));
            assert_true(r.addr == e->addr && r.size == e->size && r.time_us == e->time_us &&
                        r.stack == e->stack && r.extra == e->extra && r.action == e->action &&
                        r.flags == e->flags);
            gm_snapshot_cursor_init(&at, d, k);
            assert_true(gm_snapshot_cursor_next(&at) != NULL && at.index == k);
        }
        assert_int_equal(c.index + 1, d->n_events);
    }
}

static void test_passes(void **state)
{
    struct em e;
    struct gm_snapshot *s;
    struct gm_error err;
    (void)state;
    build_scenario(&e);
    assert_int_equal(gm_snapshot_load_mem(e.b, e.n, NULL, &s, &err), GM_OK);
    check_passes(s);
    gm_snapshot_free(s);
}

/* A trace whose first maximum (event 7) comes after a lower one (event 0, then freed),
 * with frees that no alloc explains before and after it, allocations displaced by a second
 * alloc at their address before and after it, allocations alive at it freed later, and a
 * block at snapshot time that a pending alloc explains beside one that none does. */
static void build_middle_peak(struct em *e, uint64_t last_free)
{
    begin_segment(e, 2048);
    e_block(e, 1024, 100, "active_allocated"); /* 0x1000: the alloc at event 13 */
    e_block(e, 1024, 64, "active_allocated");  /* 0x1400: alive from the start */
    begin_trace(e);
    e_event(e, "alloc", 0x70, 300, 100);                /* 0: a first maximum */
    e_event(e, "free_completed", 0x70, 300, 101);       /* 1: freed before the peak */
    e_event(e, "alloc", 0x10, 100, 102);                /* 2 */
    e_event(e, "free_completed", 0x99, 40, 103);        /* 3: no alloc, before the peak */
    e_event(e, "alloc", 0x20, 200, 104);                /* 4 */
    e_event(e, "alloc", 0x30, 50, 105);                 /* 5: a new maximum */
    e_event(e, "alloc", 0x30, 70, 106);                 /* 6: displaces 5 */
    e_event(e, "alloc", 0x40, 500, 107);                /* 7: the peak */
    e_event(e, "free_completed", 0x10, 100, 108);       /* 8: frees 2 */
    e_event(e, "alloc", 0x20, 10, 109);                 /* 9: displaces 4 */
    e_event(e, "free_completed", 0x98, 30, 110);        /* 10: no alloc, after the peak */
    e_event(e, "alloc", 0x50, 50, 111);                 /* 11 */
    e_event(e, "free_completed", 0x40, last_free, 112); /* 12: frees the peak's alloc */
    e_event(e, "alloc", 0x1000, 100, 113);              /* 13 */
    e_end_list(e);
    e_end_list(e);
    e_end_dict(e);
    e_op(e, '.');
}

/* The timeline the loader folds while reading against the walks of the trace, with each
 * reader, and with a free of the size of its alloc or of another size (which the walk then
 * pairs through its map): the same figures and the same allocations alive at the peak. */
static void test_folded_timeline(void **state)
{
    static const enum gm_snapshot_reader readers[] = {GM_SNAPSHOT_READER_AUTO,
                                                      GM_SNAPSHOT_READER_GENERAL};
    struct em e;
    (void)state;
    for (size_t r = 0; r < 4; r++) {
        struct gm_snapshot_opts o = {0};
        struct gm_snapshot *s;
        struct gm_snapshot_timeline tl;
        struct gm_error err;
        build_middle_peak(&e, r < 2 ? 500 : 400);
        o.reader = readers[r % 2];
        assert_int_equal(gm_snapshot_load_mem(e.b, e.n, &o, &s, &err), GM_OK);
        assert_true(snap_fold_ready(&s->devices[0]));
        check_passes(s);
        assert_int_equal(gm_snapshot_timeline(s, 0, GM_TIMELINE_LIVE, &tl, &err), GM_OK);
        assert_int_equal(tl.peak_event_index, 7);
        assert_true(tl.initial_bytes == 40 + 30 + 64);
        assert_true(tl.peak_bytes == 134 + 880);
        /* 7, 2, 4, 6, the 64 bytes of the block, 5, the free at 10 */
        assert_int_equal(tl.n_live, 7);
        assert_true(tl.live[0].bytes == 500 && tl.live[1].bytes == 200 && tl.live[2].bytes == 100);
        assert_true(tl.live[3].bytes == 70 && tl.live[4].bytes == 64 && tl.live[5].bytes == 50);
        assert_true(tl.live[6].bytes == 30 && tl.live[6].alloc_event == -1);
        gm_snapshot_timeline_release(&tl);
        gm_snapshot_free(s);
    }
}

/* A trace for the fold's answers to another consumer (snap_fold_answers()): an allocation
 * displaced with a free_requested before and after, frees and a free_requested without an
 * alloc, a free_requested after its allocation's free, and blocks explained by a pending
 * alloc (0x1000), by none (0x1400), by one freed in the trace (0x1800), or not allocated
 * (0x1c00).  The answer expected for each event (FA_NONE: none; FA_SKIP: none asked). */
#define FA_NONE SNAP_NO_ALLOC
#define FA_SKIP (SNAP_NO_ALLOC - 1)
static const uint32_t pairs_want[] = {
    FA_SKIP, 0, FA_SKIP, 1, 1, FA_NONE, FA_NONE, FA_SKIP, FA_SKIP, 3, FA_NONE,
};

static void build_pairs(struct em *e)
{
    begin_segment(e, 4096);
    e_block(e, 1024, 100, "active_allocated"); /* 0x1000: the alloc at event 7 */
    e_block(e, 1024, 64, "active_allocated");  /* 0x1400: alive from the start */
    e_block(e, 1024, 32, "active_allocated");  /* 0x1800: freed at 9, so from the start */
    e_block(e, 1024, 0, "inactive");
    begin_trace(e);
    e_event(e, "alloc", 0x20, 100, 100);           /* 0: the 0th alloc */
    e_event(e, "free_requested", 0x20, 100, 101);  /* 1: of 0 */
    e_event(e, "alloc", 0x20, 200, 102);           /* 2: the 1st, displaces 0 */
    e_event(e, "free_requested", 0x20, 200, 103);  /* 3: of 1 */
    e_event(e, "free_completed", 0x20, 200, 104);  /* 4: of 1 */
    e_event(e, "free_requested", 0x30, 50, 105);   /* 5: no alloc */
    e_event(e, "free_completed", 0x30, 50, 106);   /* 6: no alloc */
    e_event(e, "alloc", 0x1000, 100, 107);         /* 7: the 2nd, pending at the end */
    e_event(e, "alloc", 0x1800, 32, 108);          /* 8: the 3rd */
    e_event(e, "free_completed", 0x1800, 32, 109); /* 9: of 3 */
    e_event(e, "free_requested", 0x1800, 32, 110); /* 10: after its free: none */
    e_end_list(e);
    e_end_list(e);
    e_end_dict(e);
    e_op(e, '.');
}

/* A consumer that asks the fold for its answers and keeps them. */
struct pairs_seen {
    struct snap_fold *fold;
    uint32_t got[16];
    size_t n;
    bool other_batch_answered; /* snap_fold_answers() for a batch the fold did not take last */
};

static void *pairs_open(void *ctx, uint32_t index, struct gm_budget *shared,
                        struct gm_snapshot_packed *pk)
{
    struct pairs_seen *p = ctx;
    (void)index;
    (void)shared;
    p->fold = pk->fold;
    snap_fold_answer(pk->fold, true);
    return p;
}

static void pairs_events(void *state, const struct gm_snapshot_event *ev, size_t n)
{
    struct pairs_seen *p = state;
    const uint32_t *found = snap_fold_answers(p->fold, p->n, n);
    assert_non_null(found);
    p->other_batch_answered |= snap_fold_answers(p->fold, p->n + 1, n) != NULL ||
                               snap_fold_answers(p->fold, p->n, n + 1) != NULL;
    for (size_t i = 0; i < n && p->n < 16; i++, p->n++)
        p->got[p->n] =
            ev[i].action == GM_ACTION_FREE_REQUESTED || ev[i].action == GM_ACTION_FREE_COMPLETED
                ? found[i]
                : FA_SKIP;
}

static void pairs_nothing(void *state)
{
    (void)state;
}

static const struct snap_consumer_ops pairs_ops = {pairs_open, pairs_events, pairs_nothing,
                                                   pairs_nothing, NULL};

/* The fold answers another consumer of the trace with the allocation (its ordinal among the
 * allocs) each free_requested and free_completed meets at its address, for the batch it
 * took last only, and after the load says which blocks no pending allocation explains; a
 * fold not asked keeps none of that.  With each reader. */
static void test_fold_answers(void **state)
{
    static const enum gm_snapshot_reader readers[] = {GM_SNAPSHOT_READER_AUTO,
                                                      GM_SNAPSHOT_READER_GENERAL};
    struct em e;
    (void)state;
    build_pairs(&e);
    for (size_t r = 0; r < 2; r++) {
        struct pairs_seen seen;
        struct gm_snapshot_consumer c = {&pairs_ops, &seen};
        struct gm_snapshot_opts o = {0};
        struct gm_snapshot *s;
        struct gm_error err;
        uint64_t *bits, bytes;
        memset(&seen, 0, sizeof(seen));
        o.reader = readers[r];
        o.consumer = &c;
        assert_int_equal(gm_snapshot_load_mem(e.b, e.n, &o, &s, &err), GM_OK);
        assert_int_equal(seen.n, sizeof(pairs_want) / sizeof(pairs_want[0]));
        for (size_t i = 0; i < seen.n; i++)
            if (seen.got[i] != pairs_want[i])
                fail_msg("event %zu: answer %u, expected %u", i, seen.got[i], pairs_want[i]);
        assert_false(seen.other_batch_answered);
        assert_true(snap_fold_ready(&s->devices[0]));
        assert_non_null(bits = snap_fold_take_from_start(&s->devices[0], &bytes));
        assert_true(bits[0] == 0x6);               /* the blocks at 0x1400 and 0x1800 */
        assert_int_equal(bytes, sizeof(uint64_t)); /* 4 blocks: one word (n / 64 + 1 made two) */
        gm_free(bits);
        /* handed over once */
        assert_null(snap_fold_take_from_start(&s->devices[0], &bytes));
        assert_int_equal(bytes, 0);
        check_passes(s);
        gm_snapshot_free(s);
        /* without a consumer that asks: no bits kept */
        o.consumer = NULL;
        assert_int_equal(gm_snapshot_load_mem(e.b, e.n, &o, &s, &err), GM_OK);
        assert_true(snap_fold_ready(&s->devices[0]));
        assert_null(snap_fold_take_from_start(&s->devices[0], &bytes));
        gm_snapshot_free(s);
    }
    assert_null(snap_fold_answers(NULL, 0, 1));
}

/* A consumer that asks the fold for its answers and gives up on its first batch. */
static void pairs_give_up(void *state, const struct gm_snapshot_event *ev, size_t n)
{
    struct pairs_seen *p = state;
    (void)ev;
    if (p->n)
        return;
    assert_non_null(snap_fold_answers(p->fold, 0, n));
    snap_fold_answer(p->fold, false);
    /* answers no more, for this batch either */
    p->other_batch_answered = snap_fold_answers(p->fold, 0, n) != NULL;
    p->n = n;
}

static const struct snap_consumer_ops pairs_give_up_ops = {pairs_open, pairs_give_up, pairs_nothing,
                                                           pairs_nothing, NULL};

/* A consumer that gives up stops the fold answering: no answers after, no blocks' bits after
 * the load, and the fold's timeline as without that consumer. */
static void test_fold_stops_answering_a_consumer_that_gave_up(void **state)
{
    struct em e;
    struct pairs_seen seen;
    struct gm_snapshot_consumer c = {&pairs_give_up_ops, &seen};
    struct gm_snapshot_opts o = {0};
    struct gm_snapshot *s;
    struct gm_error err;
    uint64_t bytes;
    (void)state;
    build_pairs(&e);
    memset(&seen, 0, sizeof(seen));
    o.consumer = &c;
    assert_int_equal(gm_snapshot_load_mem(e.b, e.n, &o, &s, &err), GM_OK);
    assert_true(seen.n > 0);
    assert_false(seen.other_batch_answered);
    assert_true(snap_fold_ready(&s->devices[0]));
    assert_null(snap_fold_take_from_start(&s->devices[0], &bytes));
    assert_int_equal(bytes, 0);
    check_passes(s);
    gm_snapshot_free(s);
}

/* A trace of 'n' entries: 10 in a first batch (MARK ... APPENDS), the rest in a second one
 * (the first batch of a list is never the flat reader's); with 'odd_at' < n, entry odd_at
 * has a float field, which the flat reader leaves to the ordinary path (it drops the
 * batch, which is then read again from its MARK). */
static uint8_t *write_one_batch(size_t n, size_t odd_at, size_t *len)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    struct em e;
    assert_non_null(f);
    begin_segment(&e, 4096);
    e_end_list(&e);
    e_end_dict(&e);
    e_end_list(&e);
    e_str(&e, "device_traces");
    e_op(&e, ']'); /* the outer list */
    e_op(&e, ']'); /* device 0's */
    e_op(&e, '(');
    fwrite(e.b, 1, e.n, f);
    for (size_t i = 0; i < n; i++) {
        e.n = 0;
        if (i == odd_at) {
            static const uint8_t half[9] = {'G', 0x3f, 0xe0, 0, 0, 0, 0, 0, 0}; /* 0.5 */
            e_begin_dict(&e);
            e_kv_str(&e, "action", "alloc");
            e_kv_int(&e, "addr", 0x700000);
            e_kv_int(&e, "size", 512);
            e_str(&e, "ratio");
            e_raw(&e, half, sizeof(half));
            e_end_dict(&e);
        } else {
            e_event(&e, i % 2 ? "free_completed" : "alloc", 0x100000 + (i / 2 % 64) * 4096,
                    512 * (1 + i % 7), (int64_t)i);
        }
        if (i == 9) {
            e_end_list(&e); /* APPENDS */
            e_op(&e, '(');
        }
        fwrite(e.b, 1, e.n, f);
    }
    e.n = 0;
    e_end_list(&e); /* APPENDS */
    e_op(&e, 'a');  /* device 0's list into the outer one */
    /* a key after the trace: the flat reader leaves the last bytes of a file alone */
    e_kv_str(&e, "note", "a key after device_traces, as real snapshots have");
    e_end_dict(&e);
    e_op(&e, '.');
    fwrite(e.b, 1, e.n, f);
    assert_int_equal(fclose(f), 0);
    *len = size;
    return (uint8_t *)buf;
}

/* A batch longer than the loader keeps waiting for its commit: the events written out as
 * it goes are the general reader's, the timeline is the walk's; and when the flat reader
 * drops such a batch after part of it was written out, what it wrote is taken back (the
 * events are those of the batch read once). */
static void test_long_batch(void **state)
{
    (void)state;
    for (int odd = 0; odd < 2; odd++) {
        size_t len, n = 6000;
        uint8_t *data = write_one_batch(n, odd ? 5500 : SIZE_MAX, &len);
        struct gm_snapshot *s[2];
        struct gm_error err;
        struct gm_snapshot_cursor c[2];
        const struct gm_snapshot_event *a, *b;
        for (int r = 0; r < 2; r++) {
            struct gm_snapshot_opts o = {0};
            o.reader = r ? GM_SNAPSHOT_READER_GENERAL : GM_SNAPSHOT_READER_AUTO;
            assert_int_equal(gm_snapshot_load_mem(data, len, &o, &s[r], &err), GM_OK);
            assert_int_equal(s[r]->n_devices, 1);
            assert_int_equal(s[r]->devices[0].n_events, n);
            gm_snapshot_cursor_init(&c[r], &s[r]->devices[0], 0);
        }
        assert_int_equal(s[0]->n_flat_batches, odd ? 0 : 1);
        assert_false(snap_fold_ready(&s[0]->devices[0]));
        while ((a = gm_snapshot_cursor_next(&c[0])) != NULL) {
            assert_non_null(b = gm_snapshot_cursor_next(&c[1]));
            assert_true(a->addr == b->addr && a->size == b->size && a->time_us == b->time_us &&
                        a->stack == b->stack && a->extra == b->extra && a->action == b->action &&
                        a->flags == b->flags);
        }
        assert_null(gm_snapshot_cursor_next(&c[1]));
        check_passes(s[0]);
        gm_snapshot_free(s[0]);
        gm_snapshot_free(s[1]);
        free(data);
    }
}

/* The packed trace keeps every number whole: values and differences of every length (each
 * length's smallest and largest, at the 7-bit and the 8-bit group boundaries alike),
 * negative differences, times before the epoch, the largest stack and extra ids, events
 * that change no field or one only, read back by a cursor from the start and from every
 * event. */
static void test_packed_numbers(void **state)
{
    enum { N = 600 };
    struct gm_snapshot_event *ev = calloc(N, sizeof(*ev));
    struct ev_writer w;
    struct gm_snapshot_device dev;
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    uint64_t x = UINT64_C(0x9e3779b97f4a7c15);
    (void)state;
    assert_non_null(ev);
    snap_ev_writer_init(&w);
    for (size_t i = 0; i < N; i++) {
        unsigned bits = (unsigned)(i % 65);
        /* each length's edges: 2^(7k) - 1 and 2^(7k); then any number of that many bits */
        uint64_t edge = bits && bits < 64 && (bits % 7 == 0 || bits % 8 == 0)
                            ? (UINT64_C(1) << bits) - (i & 1)
                            : 0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ev[i].addr = edge ? edge : (bits == 64 ? x : x & ((UINT64_C(1) << bits) - 1));
        ev[i].size = i % 5 == 0 ? ev[i].addr : x >> (i % 64);
        ev[i].time_us = (int64_t)(x >> (i % 64)) * (i % 3 == 0 ? -1 : 1);
        ev[i].stack = (uint32_t)(i % 4 == 0 ? UINT32_MAX : x >> (i % 32));
        ev[i].extra = (uint32_t)(i % 6 == 0 ? UINT32_MAX - (uint32_t)i : x >> 40);
        ev[i].action = (uint8_t)(i % GM_ACTION_COUNT);
        ev[i].flags =
            (uint8_t)(i % 7 == 0 ? GM_EVENT_HAS_ADDR : GM_EVENT_HAS_TIME | GM_EVENT_HAS_ADDR);
        if (i % 10 == 9) { /* the event before again, another action: no field follows */
            uint8_t a = ev[i].action;
            ev[i] = ev[i - 1];
            ev[i].action = a;
        } else if (i % 10 == 8) { /* the extra alone changes of the stack and the extra */
            ev[i].stack = ev[i - 1].stack;
        }
        if (!(ev[i].flags & GM_EVENT_HAS_TIME))
            ev[i].time_us = 0;
        assert_true(snap_ev_writer_append(&w, &ev[i]));
    }
    memset(&dev, 0, sizeof(dev));
    dev.n_events = N;
    dev.packed = &w.pk;
    for (size_t first = 0; first < N; first += first < 300 ? 1 : 37) {
        gm_snapshot_cursor_init(&c, &dev, first);
        for (size_t i = first; i < N; i++) {
            assert_non_null(e = gm_snapshot_cursor_next(&c));
            assert_memory_equal(e, &ev[i], offsetof(struct gm_snapshot_event, flags) + 1);
        }
        assert_null(gm_snapshot_cursor_next(&c));
    }
    snap_ev_writer_release(&w);
    free(ev);
}

/* Packing at the extremes of every field (events.c): time jumps 0 -> INT64_MIN -> INT64_MAX ->
 * INT64_MIN (differences of 2^63 and -1 as unsigned), addresses 0 <-> UINT64_MAX and 2^63,
 * sizes 0 <-> UINT64_MAX and equal sizes, stack and extra ids UINT32_MAX and 0 (one changing
 * without the other), a 7-byte time difference (written as 8), the time flag toggling, an
 * action past the known ones (stored as GM_ACTION_OTHER).  Written by reserve + append_n in
 * batches of odd sizes that cross checkpoints, shrunk to the exact size (SLACK: the reader's
 * 8-byte loads stay inside the heap block), then read back by a cursor from every start and by
 * gm_snapshot_event_at().  Also the sums (snap_ev_sums_add_n(): INT64_MIN..INT64_MAX, the size
 * sum saturated) and the count-only writer's sums and action counts. */
static bool same_event(const struct gm_snapshot_event *a, const struct gm_snapshot_event *b)
{
    return a->addr == b->addr && a->size == b->size && a->time_us == b->time_us &&
           a->stack == b->stack && a->extra == b->extra && a->action == b->action &&
           a->flags == b->flags;
}

/* The event sums (snap_ev_sums_add_n): no event with a time leaves has_time unset whatever
 * the sizes; a single timed event is both ends of the range, at either extreme of int64;
 * sums carried over from a batch before widen; sizes saturate. */
static void test_event_sums(void **state)
{
    struct gm_snapshot_event ev[3];
    struct ev_sums s = {0, 0, 0, false};
    (void)state;
    memset(ev, 0, sizeof(ev));
    ev[0].size = 7;
    ev[1].size = 9;
    ev[1].time_us = 42; /* no GM_EVENT_HAS_TIME: not a time */
    snap_ev_sums_add_n(&s, ev, 2);
    assert_false(s.has_time);
    assert_int_equal(s.size_sum, 16);
    for (int k = 0; k < 3; k++) {
        static const int64_t one[3] = {5, INT64_MIN, INT64_MAX};
        struct ev_sums o = {0, 0, 0, false};
        ev[2].flags = GM_EVENT_HAS_TIME;
        ev[2].time_us = one[k];
        ev[2].size = UINT64_MAX - 1;
        snap_ev_sums_add_n(&o, &ev[2], 1);
        assert_true(o.has_time && o.t_min == one[k] && o.t_max == one[k]);
        assert_int_equal(o.size_sum, UINT64_MAX - 1);
        /* a later batch: its times widen the range, its sizes saturate the sum */
        ev[1].flags = GM_EVENT_HAS_TIME;
        ev[1].time_us = k == 1 ? INT64_MAX : INT64_MIN;
        snap_ev_sums_add_n(&o, ev, 2);
        assert_true(o.has_time && o.t_min == (k == 1 ? INT64_MIN : ev[1].time_us) &&
                    o.t_max == (k == 1 ? INT64_MAX : one[k]));
        assert_true(o.size_sum == UINT64_MAX);
        ev[1].flags = 0;
    }
}

static void test_packed_extremes(void **state)
{
    enum { N = 1100, NE = 8 };
    static const struct {
        int64_t t;
        uint64_t a, s;
        uint32_t k, x;
    } EDGE[NE] = {
        {0, 0, 0, 0, 0},
        {INT64_MIN, UINT64_MAX, UINT64_MAX, UINT32_MAX, 0},
        {INT64_MAX, 0, 0, UINT32_MAX, UINT32_MAX},
        {INT64_MIN, UINT64_C(1) << 63, UINT64_MAX, 0, UINT32_MAX},
        {INT64_MAX, 1, UINT64_MAX, 0, 0},
        {-1, UINT64_MAX - 1, UINT64_C(1) << 63, UINT32_MAX, UINT32_MAX},
        {-INT64_C(0x81), INT64_C(0x7fffffffffff), 1, 1, UINT32_MAX - 1},
        {INT64_C(1) << 54, UINT64_C(0x8000000000000001), UINT64_MAX - 1, 0, 1},
    };
    static const size_t B[] = {1, 7, 300, 2, 255, 256, 257, 3};
    struct gm_snapshot_event *ev = calloc(N, sizeof(*ev)), *want = calloc(N, sizeof(*ev));
    struct ev_writer w, cw;
    struct ev_sums sums = {0, 0, 0, false}, csums = {0, 0, 0, false};
    struct gm_snapshot_device dev;
    struct gm_snapshot_cursor c;
    const struct gm_snapshot_event *e;
    struct gm_snapshot_event one;
    uint64_t x = UINT64_C(0x2545f4914f6cdd1d), n_other = 0;
    size_t at = 0, b = 0;
    (void)state;
    assert_non_null(ev);
    assert_non_null(want);
    for (size_t i = 0; i < N; i++) {
        /* the first 2 * NE * NE events take every ordered pair of rows, the rest at random */
        size_t r = i % 2 ? i / 2 % NE : i / 2 / NE % NE;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (i >= 2 * NE * NE)
            r = (size_t)(x % NE);
        ev[i].time_us = EDGE[r].t;
        ev[i].addr = EDGE[r].a;
        ev[i].size = EDGE[r].s;
        ev[i].stack = EDGE[r].k;
        ev[i].extra = EDGE[r].x;
        ev[i].action = (uint8_t)(i % 19 == 5 ? 200 : i % GM_ACTION_COUNT);
        ev[i].flags = (uint8_t)(GM_EVENT_HAS_ADDR | ((x >> 40) % 3 ? GM_EVENT_HAS_TIME : 0));
        want[i] = ev[i];
        if (!(ev[i].flags & GM_EVENT_HAS_TIME))
            want[i].time_us = 0;
        if (want[i].action >= GM_ACTION_COUNT)
            want[i].action = GM_ACTION_OTHER;
        n_other += want[i].action == GM_ACTION_OTHER;
    }
    snap_ev_writer_init(&w);
    snap_ev_writer_init(&cw);
    cw.count_only = true;
    while (at < N) {
        size_t n = B[b++ % (sizeof(B) / sizeof(B[0]))];
        if (n > N - at)
            n = N - at;
        assert_true(snap_ev_writer_reserve(&w, n) >= n);
        snap_ev_writer_append_n(&w, ev + at, n, &sums);
        snap_ev_writer_append_n(&cw, ev + at, n, &csums);
        at += n;
    }
    snap_ev_writer_shrink(&w);
    /* 36 bytes at most an event (the MAX_EVENT comment) */
    assert_true(w.pk.n_bytes <= (size_t)N * 36);
    assert_true(w.pk.n_events == N && cw.pk.n_events == N);
    assert_true(w.n_actions[GM_ACTION_OTHER] == n_other);
    assert_memory_equal(w.n_actions, cw.n_actions, sizeof(w.n_actions));
    memset(&dev, 0, sizeof(dev));
    dev.n_events = N;
    dev.packed = &w.pk;
    for (size_t first = 0; first <= N; first++) {
        gm_snapshot_cursor_init(&c, &dev, first);
        for (size_t i = first; i < N; i++) {
            e = gm_snapshot_cursor_next(&c);
            assert_non_null(e);
            if (!same_event(e, &want[i]))
                fail_msg("event %zu read from %zu differs", i, first);
            if (i == first && (!gm_snapshot_event_at(&dev, i, &one) || !same_event(&one, &want[i])))
                fail_msg("gm_snapshot_event_at(%zu) differs", i);
        }
        assert_null(gm_snapshot_cursor_next(&c));
    }
    /* the sums: every time was given, the sizes overflow */
    assert_true(sums.has_time && sums.t_min == INT64_MIN && sums.t_max == INT64_MAX);
    assert_true(sums.size_sum == UINT64_MAX);
    assert_true(csums.has_time && csums.t_min == INT64_MIN && csums.t_max == INT64_MAX &&
                csums.size_sum == UINT64_MAX);
    snap_ev_writer_release(&w);
    snap_ev_writer_release(&cw);
    free(ev);
    free(want);
}

/* Whether two timelines have the same figures and the same allocations alive at the peak. */
static void assert_same_timeline(const struct gm_snapshot_timeline *a,
                                 const struct gm_snapshot_timeline *b)
{
    assert_true(a->peak_bytes == b->peak_bytes && a->peak_event_index == b->peak_event_index);
    assert_true(a->initial_bytes == b->initial_bytes && a->final_bytes == b->final_bytes);
    assert_true(a->peak_reserved_bytes == b->peak_reserved_bytes &&
                a->reserved_at_peak_bytes == b->reserved_at_peak_bytes);
    assert_true(a->peak_time_valid == b->peak_time_valid && a->peak_time_us == b->peak_time_us);
    assert_int_equal(a->n_live, b->n_live);
    for (size_t i = 0; i < a->n_live; i++)
        assert_true(a->live[i].addr == b->live[i].addr && a->live[i].bytes == b->live[i].bytes &&
                    a->live[i].alloc_event == b->live[i].alloc_event &&
                    a->live[i].stack == b->live[i].stack);
}

/* timeline_only: a trace whose timeline the load folds keeps no event and answers as a full
 * load does; a trace that the fold cannot answer (a batch longer than the loader waits for),
 * or that holds an out-of-memory event, is read again with its events. */
static void test_timeline_only(void **state)
{
    (void)state;
    for (int kind = 0; kind < 3; kind++) {
        struct gm_snapshot_opts full = {0}, only = {0};
        struct gm_snapshot *s[2];
        struct gm_snapshot_timeline tl[2];
        struct gm_snapshot_cursor c;
        struct gm_error err;
        struct em e;
        uint8_t *data = NULL;
        const uint8_t *in;
        size_t len;
        if (kind == 1) {
            in = data = write_one_batch(6000, SIZE_MAX, &len);
        } else {
            build_middle_peak(&e, 500);
            if (kind == 2) { /* an out-of-memory event before the end */
                e.n -= 4;    /* APPENDS APPENDS SETITEMS STOP */
                e_event(&e, "oom", 1 << 20, 4096, 114);
                e_end_list(&e);
                e_end_list(&e);
                e_end_dict(&e);
                e_op(&e, '.');
            }
            in = e.b;
            len = e.n;
        }
        only.timeline_only = true;
        assert_int_equal(gm_snapshot_load_mem(in, len, &full, &s[0], &err), GM_OK);
        assert_int_equal(gm_snapshot_load_mem(in, len, &only, &s[1], &err), GM_OK);
        assert_int_equal(s[1]->devices[0].n_events, s[0]->devices[0].n_events);
        assert_int_equal(s[1]->events_dropped, kind == 0);
        gm_snapshot_cursor_init(&c, &s[1]->devices[0], 0);
        if (kind == 0)
            assert_null(gm_snapshot_cursor_next(&c)); /* no event kept */
        else
            assert_non_null(gm_snapshot_cursor_next(&c));
        for (int i = 0; i < 2; i++)
            assert_int_equal(gm_snapshot_timeline(s[i], 0, GM_TIMELINE_LIVE, &tl[i], &err), GM_OK);
        assert_same_timeline(&tl[0], &tl[1]);
        for (int i = 0; i < 2; i++) {
            gm_snapshot_timeline_release(&tl[i]);
            gm_snapshot_free(s[i]);
        }
        free(data);
    }
}

/* The events kept aside by a load that keeps none (side.c): the first and the last of the
 * trace and each oom, in trace order and once each (an oom that is the first or the last);
 * only the batches said to hold ooms are looked into; past SNAP_SIDE_MAX events, or after a
 * batch written out before its end, none (the load then keeps the trace). */
static void test_side_records(void **state)
{
    struct gm_snapshot_event ev[10];
    struct gm_arena arena;
    (void)state;
    memset(ev, 0, sizeof(ev));
    for (int i = 0; i < 10; i++) {
        ev[i].action = GM_ACTION_ALLOC;
        ev[i].addr = 0x1000 + (uint64_t)i;
        ev[i].time_us = 100 + i;
        ev[i].flags = GM_EVENT_HAS_TIME;
    }
    ev[0].action = GM_ACTION_OOM; /* the first is an oom */
    ev[4].action = GM_ACTION_OOM;
    ev[7].action = GM_ACTION_OOM; /* in a batch said to hold none: not looked at */
    for (int last_oom = 0; last_oom < 2; last_oom++) {
        struct snap_side side;
        struct gm_snapshot_packed pk;
        struct gm_snapshot_device d;
        struct gm_snapshot_event x;
        size_t k;
        static const size_t want[] = {0, 4, 9};
        memset(&side, 0, sizeof(side));
        memset(&pk, 0, sizeof(pk));
        memset(&d, 0, sizeof(d));
        gm_arena_init(&arena, 1 << 20);
        ev[9].action = last_oom ? GM_ACTION_OOM : GM_ACTION_ALLOC;
        assert_true(snap_side_add(&side, ev, 6, true));         /* events 0..5 */
        assert_true(snap_side_add(&side, ev + 6, 3, false));    /* 6..8 */
        assert_true(snap_side_add(&side, ev + 9, 1, last_oom)); /* 9 */
        assert_true(snap_side_finish(&side, &arena, &pk));
        assert_int_equal(pk.n_side, 3);
        for (size_t i = 0; i < 3; i++) {
            assert_int_equal(pk.side[i].k, want[i]);
            assert_true(pk.side[i].e.addr == ev[want[i]].addr);
        }
        d.n_events = 10;
        d.packed = &pk;
        for (size_t i = 0; i < 10; i++) {
            bool aside = i == 0 || i == 4 || i == 9;
            assert_int_equal(gm_snapshot_event_kept(&d, i, &x), aside);
            if (aside)
                assert_true(x.addr == ev[i].addr && x.time_us == ev[i].time_us &&
                            x.action == ev[i].action && x.flags == ev[i].flags);
        }
        assert_false(gm_snapshot_event_kept(&d, 10, &x));
        assert_true(snap_side_first(&d, GM_ACTION_OOM, &k, &x) && k == 0);
        assert_false(snap_side_first(&d, GM_ACTION_FREE_COMPLETED, &k, &x));
        snap_side_release(&side);
        gm_arena_release(&arena);
    }
    {
        /* what the records hold is drawn on the load's budget of its consumers: past it, none
         * (and what was drawn is given back) */
        struct snap_side side;
        struct gm_snapshot_packed pk;
        struct gm_budget load = gm_budget_make(GM_VEC_FIRST * sizeof(struct snap_side_event), 0);
        memset(&side, 0, sizeof(side));
        memset(&pk, 0, sizeof(pk));
        side.budget.shared = &load;
        gm_arena_init(&arena, 1 << 20);
        for (int i = 0; i < 10; i++)
            ev[i].action = GM_ACTION_OOM;
        assert_true(snap_side_add(&side, ev, 10, true)); /* the first 16 fit */
        assert_true(load.used > 0);
        assert_false(snap_side_add(&side, ev, 10, true)); /* 32 do not */
        assert_false(snap_side_finish(&side, &arena, &pk));
        snap_side_release(&side);
        assert_int_equal(load.used, 0);
        gm_arena_release(&arena);
    }
    {
        /* more ooms than are kept aside */
        struct snap_side side;
        struct gm_snapshot_packed pk;
        memset(&side, 0, sizeof(side));
        memset(&pk, 0, sizeof(pk));
        gm_arena_init(&arena, 1 << 20);
        for (int i = 0; i < 10; i++)
            ev[i].action = GM_ACTION_OOM;
        for (size_t i = 0; i < SNAP_SIDE_MAX / 10; i++)
            assert_true(snap_side_add(&side, ev, 10, true));
        assert_false(snap_side_add(&side, ev, 10, true));
        assert_false(snap_side_finish(&side, &arena, &pk));
        assert_null(pk.side);
        snap_side_release(&side);
        gm_arena_release(&arena);
    }
}

/* consume_events with a trace batch longer than the loader waits for: the consumers give it
 * up while it is read, so the input is read again with its events (every one read back). */
static void test_consume_long_batch(void **state)
{
    size_t len, n = 6000, k = 0;
    uint8_t *data = write_one_batch(n, SIZE_MAX, &len);
    struct gm_snapshot_opts o = {0};
    struct gm_snapshot *s;
    struct gm_error err;
    struct gm_snapshot_cursor c;
    (void)state;
    o.consumer = gm_analysis_first_pass_consumer();
    o.consume_events = true;
    assert_int_equal(gm_snapshot_load_mem(data, len, &o, &s, &err), GM_OK);
    assert_false(s->events_consumed);
    gm_snapshot_cursor_init(&c, &s->devices[0], 0);
    while (gm_snapshot_cursor_next(&c))
        k++;
    assert_int_equal(k, n);
    gm_snapshot_free(s);
    free(data);
}

/* ---- the consumers on a worker thread (gm_snapshot_opts.threads, pipe.c) ---- */

/* A consumer that logs every call it gets: which, for which device, the events' count and
 * a hash of their bytes, and whether it ran on the loading thread.  It asserts nothing
 * itself (it may run on another thread). */
enum call_kind { CALL_OPEN, CALL_EVENTS, CALL_ABANDON };
struct call {
    enum call_kind kind;
    uint32_t index;
    size_t n;
    uint64_t hash;
};
struct call_log {
    pthread_t loader;
    struct call calls[4096];
    size_t n;
    size_t on_loader, off_loader; /* calls on the loading thread, on another */
    struct log_state {
        struct call_log *l;
        uint32_t index;
    } st[8]; /* the states open() hands out, by device */
};

static void log_call(struct call_log *l, enum call_kind kind, uint32_t index, size_t n,
                     uint64_t hash)
{
    if (pthread_equal(pthread_self(), l->loader))
        l->on_loader++;
    else
        l->off_loader++;
    if (l->n < sizeof(l->calls) / sizeof(l->calls[0]))
        l->calls[l->n++] = (struct call){kind, index, n, hash};
}

static void *log_open(void *ctx, uint32_t index, struct gm_budget *shared,
                      struct gm_snapshot_packed *pk)
{
    struct call_log *l = ctx;
    (void)shared;
    (void)pk;
    log_call(l, CALL_OPEN, index, 0, 0);
    if (index >= 8)
        return NULL;
    l->st[index] = (struct log_state){l, index};
    return &l->st[index];
}

static void log_events(void *state, const struct gm_snapshot_event *ev, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = (const uint8_t *)&ev[i];
        for (size_t j = 0; j < offsetof(struct gm_snapshot_event, flags) + 1; j++)
            h = (h ^ p[j]) * 1099511628211ULL;
    }
    const struct log_state *st = state;
    log_call(st->l, CALL_EVENTS, st->index, n, h);
}

static void log_abandon(void *state)
{
    const struct log_state *st = state;
    log_call(st->l, CALL_ABANDON, st->index, 0, 0);
}

static void log_release(void *state)
{
    (void)state;
}

static const struct snap_consumer_ops log_ops = {log_open, log_events, log_abandon, log_release,
                                                 NULL};

/* The load of data[0..len) with 'threads' and the logging consumer into *l. */
static struct gm_snapshot *load_logged(const uint8_t *data, size_t len, unsigned threads,
                                       struct call_log *l)
{
    struct gm_snapshot_consumer c = {&log_ops, l};
    struct gm_snapshot_opts o = {0};
    struct gm_snapshot *s;
    struct gm_error err;
    memset(l, 0, sizeof(*l));
    l->loader = pthread_self();
    o.consumer = &c;
    o.threads = threads;
    assert_int_equal(gm_snapshot_load_mem(data, len, &o, &s, &err), GM_OK);
    return s;
}

/* A load of data[0..len) with 64 bytes of 0xff written over its middle (three quarters in),
 * its consumers on the worker thread (threads 2, jobs in flight when the parse fails), fails
 * exactly as the inline load (threads 1): same status, offset and message; 'must_fail': the
 * damage is known to break the parse. */
static void worker_fails_alike(const uint8_t *data, size_t len, bool must_fail)
{
    static struct call_log l;
    struct gm_snapshot_consumer c = {&log_ops, &l};
    struct gm_error err[2];
    enum gm_status st[2];
    uint8_t *bad = malloc(len);
    size_t at = len / 4 * 3;
    assert_non_null(bad);
    assert_true(len > at + 64);
    memcpy(bad, data, len);
    memset(bad + at, 0xff, 64);
    for (unsigned t = 0; t < 2; t++) {
        struct gm_snapshot_opts o = {0};
        struct gm_snapshot *s = NULL;
        memset(&l, 0, sizeof(l));
        memset(&err[t], 0, sizeof(err[t]));
        l.loader = pthread_self();
        o.consumer = &c;
        o.threads = t + 1;
        st[t] = gm_snapshot_load_mem(bad, len, &o, &s, &err[t]);
        if (st[t] == GM_OK)
            gm_snapshot_free(s);
    }
    assert_int_equal(st[0], st[1]);
    assert_true(!must_fail || st[0] != GM_OK);
    if (st[0] != GM_OK) {
        assert_int_equal(err[0].code, err[1].code);
        assert_true(err[0].offset == err[1].offset);
        assert_string_equal(err[0].msg, err[1].msg);
    }
    free(bad);
}

/* A load of data[0..len) whose consumers run on the worker thread (threads 2) gives each
 * consumer the same calls in the same order with the same events as an inline load
 * (threads 1), all of them on the other thread, and the same snapshot (memory, timelines);
 * 'abandoned': the consumers are abandoned (a batch longer than the loader waits for).
 * Inline (threads 1, a small file with threads 0, or the allocation-failure hook armed)
 * every call is on the loading thread. */
static void worker_agrees(const uint8_t *data, size_t len, bool abandoned)
{
    static struct call_log inl, thr;
    struct gm_snapshot *a, *b;
    bool any_abandon = false;
    a = load_logged(data, len, 1, &inl);
    b = load_logged(data, len, 2, &thr);
    assert_true(inl.n > 0 && inl.n < sizeof(inl.calls) / sizeof(inl.calls[0]));
    assert_int_equal(inl.n, thr.n);
    assert_memory_equal(inl.calls, thr.calls, inl.n * sizeof(inl.calls[0]));
    assert_int_equal(inl.off_loader, 0);
    assert_int_equal(thr.on_loader, 0);
    assert_int_equal(thr.off_loader, inl.on_loader);
    for (size_t i = 0; i < inl.n; i++)
        any_abandon |= inl.calls[i].kind == CALL_ABANDON;
    assert_true(any_abandon == abandoned);
    assert_true(a->memory_bytes == b->memory_bytes);
    assert_int_equal(a->n_devices, b->n_devices);
    for (size_t d = 0; d < a->n_devices; d++) {
        struct gm_snapshot_timeline ta, tb;
        struct gm_error err;
        assert_int_equal(a->devices[d].n_events, b->devices[d].n_events);
        assert_true(snap_fold_ready(&a->devices[d]) == snap_fold_ready(&b->devices[d]));
        assert_int_equal(gm_snapshot_timeline(a, a->devices[d].index, 0, &ta, &err), GM_OK);
        assert_int_equal(gm_snapshot_timeline(b, b->devices[d].index, 0, &tb, &err), GM_OK);
        assert_true(ta.peak_bytes == tb.peak_bytes && ta.final_bytes == tb.final_bytes &&
                    ta.peak_event_index == tb.peak_event_index &&
                    ta.peak_reserved_bytes == tb.peak_reserved_bytes &&
                    ta.n_allocs_matched == tb.n_allocs_matched);
        gm_snapshot_timeline_release(&ta);
        gm_snapshot_timeline_release(&tb);
    }
    gm_snapshot_free(a);
    gm_snapshot_free(b);
    /* a small file, threads left to the load: inline */
    gm_snapshot_free(load_logged(data, len, 0, &thr));
    assert_true(thr.on_loader == inl.on_loader && thr.off_loader == 0);
    /* the allocation-failure hook armed (far from failing): inline */
    gm_alloc_fail_after(1L << 40);
    gm_snapshot_free(load_logged(data, len, 2, &thr));
    gm_alloc_fail_after(-1);
    assert_true(thr.on_loader == inl.on_loader && thr.off_loader == 0);
}

/* The rule that decides when a load gets a worker (snap_pipe_wanted()).  Left to the load
 * (threads 0) a large input gets one only with a consumer besides the timeline's fold and
 * two usable CPUs: the fold alone stays inline, where it costs less (pipe.c). */
static void test_worker_rule(void **state)
{
    const size_t big = (size_t)1 << 30, small = ((size_t)8 << 20) - 1;
    (void)state;
    assert_false(snap_pipe_wanted(0, big, false, 16));  /* the fold alone: inline */
    assert_true(snap_pipe_wanted(0, big, true, 2));     /* and a first pass: a worker */
    assert_false(snap_pipe_wanted(0, big, true, 1));    /* one CPU */
    assert_false(snap_pipe_wanted(0, small, true, 16)); /* under 8 MiB */
    assert_true(snap_pipe_wanted(0, small + 1, true, 2));
    assert_false(snap_pipe_wanted(1, big, true, 16)); /* asked inline */
    assert_true(snap_pipe_wanted(2, 1, false, 1));    /* asked for, whatever the rest */
    assert_true(snap_pipe_wanted(3, 1, false, 0));
}

/* the same on a trace of one long batch (the consumers abandoned mid-trace) and of short ones */
static void test_consumers_on_a_worker(void **state)
{
    size_t len;
    uint8_t *data = write_one_batch(6000, SIZE_MAX, &len);
    (void)state;
    worker_agrees(data, len, true);
    worker_fails_alike(data, len, true);
    free(data);
    data = write_one_batch(3000, SIZE_MAX, &len);
    worker_agrees(data, len, false);
    worker_fails_alike(data, len, true);
    free(data);
}

/* the same on real files: one of three devices (each device's consumers opened and fed in
 * turn), one of one */
static void test_consumers_on_a_worker_real_files(void **state)
{
    static const char *const names[] = {"g6_compile_ctx_3dev_expandable_oom.pickle",
                                        "g3_time_us_snapshot_actions.pickle"};
    (void)state;
    for (size_t f = 0; f < sizeof(names) / sizeof(names[0]); f++) {
        size_t len;
        uint8_t *data = read_real(names[f], &len);
        assert_non_null(data);
        worker_agrees(data, len, false);
        worker_fails_alike(data, len, false);
        free(data);
    }
}

static void test_passes_real_files(void **state)
{
    static const char *const names[] = {
        "g3_time_us_snapshot_actions.pickle", "g6_compile_ctx_3dev_expandable_oom.pickle",
        "g7_record_stream_reuse_pyframes.pickle", "g2_cpp_frames_no_time.pickle"};
    struct gm_snapshot *s;
    struct gm_error err;
    (void)state;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        size_t len;
        uint8_t *data = read_real(names[i], &len);
        assert_non_null(data);
        assert_int_equal(gm_snapshot_load_mem(data, len, NULL, &s, &err), GM_OK);
        check_passes(s);
        gm_snapshot_free(s);
        free(data);
    }
}

/* ---- the one rule for user frames, and stacks shown folded ---- */

static bool user(const char *file)
{
    struct gm_snapshot_frame f = {file, "f", 1, true, false, false, false, 0, 0};
    return gm_snapshot_frame_is_user(&f);
}

static void test_user_frames(void **state)
{
    (void)state;
    /* the program's own code */
    assert_true(user("/home/u/proj/train.py"));
    assert_true(user("/tmp/ipykernel_1/123.py"));
    assert_true(user("C:\\research\\DeComFL\\cezo_fl\\client.py"));
    assert_true(user("train.py"));
    assert_true(user("/home/u/library/lib/model.py")); /* a folder named lib is not Python's */
    /* torch, installed packages, the standard library, frozen modules */
    assert_false(user("/e/site-packages/torch/nn/modules/module.py"));
    assert_false(user("torch/nn/functional.py"));
    assert_false(user("C:\\venv\\Lib\\site-packages\\torch\\nn\\functional.py"));
    assert_false(user("/e/site-packages/transformers/modeling_utils.py"));
    assert_false(user("/usr/lib/python3/dist-packages/numpy/core.py"));
    assert_false(user("/usr/lib/python3.10/threading.py"));
    assert_false(user("/opt/conda/lib/python3.11/copy.py"));
    assert_false(user("C:\\Python311\\Lib\\threading.py"));
    assert_false(user("C:\\py\\cpython-3.10-windows\\lib\\copy.py"));
    assert_false(user("<frozen importlib._bootstrap>"));
    /* not Python, or noise */
    struct gm_snapshot_frame cpp = {
        "??", "at::native::empty_cuda", 0, false, false, false, false, 0, 0};
    struct gm_snapshot_frame noise = {"/home/u/x.py", "f", 1, true, true, false, false, 0, 0};
    assert_false(gm_snapshot_frame_is_user(&cpp));
    assert_false(gm_snapshot_frame_is_user(&noise));
}

static const struct gm_snapshot_frame view_frames[] = {
    {"/e/site-packages/torch/optim/adamw.py", "_init_group", 120, true, false, false, false, 0,
     0}, /* 0 */
    {"/e/site-packages/torch/optim/adamw.py", "_init_group", 124, true, false, false, false, 0,
     0}, /* 1 */
    {"/e/site-packages/torch/optim/optimizer.py", "wrapper", 385, true, false, false, false, 0,
     0},                                                                     /* 2 */
    {"/home/u/train.py", "train_step", 60, true, false, false, false, 0, 0}, /* 3 */
    {"/home/u/train.py", "main", 131, true, false, false, false, 0, 0},      /* 4 */
    {"/e/site-packages/torch/nn/functional.py", "cross_entropy", 3494, true, false, false, false, 0,
     0},                                                                     /* 5 */
    {"/home/u/model.py", "forward", 100, true, false, false, false, 0, 0},   /* 6 */
    {"/home/u/train.py", "train_step", 58, true, false, false, false, 0, 0}, /* 7 */
    {"/home/u/train.py", "evaluate", 70, true, false, false, false, 0, 0},   /* 8 */
    {"??", "unwind::unwind", 0, false, true, false, false, 0, 0},            /* 9 */
    {"??", "at::_ops::mm::call", 0, false, false, false, false, 0, 0},       /* 10 */
    {"??", "torch::autograd::generated::MmBackward0::apply(...)", 0, false, false, false, false, 0,
     0}, /* 11 */
    {"/e/site-packages/torch/nn/modules/module.py", "_call_impl", 1762, true, false, false, false,
     0, 0}, /* 12 */
};
static const uint32_t vs_exp_avg[] = {9, 0, 2, 3, 4}, vs_exp_avg_sq[] = {9, 1, 2, 3, 4};
static const uint32_t vs_train_ce[] = {5, 6, 12, 7, 4}, vs_eval_ce[] = {5, 6, 12, 8, 4};
static const uint32_t vs_cpp[] = {9, 10, 11};
static const struct gm_snapshot_stack view_stacks[] = {
    {NULL, 0}, {vs_exp_avg, 5}, {vs_exp_avg_sq, 5}, {vs_train_ce, 5}, {vs_eval_ce, 5}, {vs_cpp, 3},
};

static void test_stack_view(void **state)
{
    (void)state;
    struct gm_snapshot s;
    struct gm_snapshot_stack_view v;
    memset(&s, 0, sizeof(s));
    s.frames = view_frames;
    s.n_frames = sizeof(view_frames) / sizeof(view_frames[0]);
    s.stacks = view_stacks;
    s.n_stacks = sizeof(view_stacks) / sizeof(view_stacks[0]);
    assert_int_equal(gm_snapshot_unique_stacks(&s), 5);

    /* the user frame first, its user callers, the innermost frame as "via", the rest folded */
    gm_snapshot_stack_view(&s, 1, &v);
    assert_int_equal(v.first, 3);
    assert_true(v.first_is_user);
    assert_int_equal(v.via, 1);
    assert_int_equal(v.n_callers, 1);
    assert_int_equal(v.callers[0], 4);
    assert_int_equal(v.n_folded, 1); /* optimizer.py wrapper; the noise frame is not counted */
    assert_int_equal(gm_snapshot_stack_user_frame(&s, 1), 3);

    /* a C++-only stack: the operator, then the autograd node */
    gm_snapshot_stack_view(&s, 5, &v);
    assert_int_equal(v.first, 1);
    assert_false(v.first_is_user);
    assert_int_equal(v.n_callers, 1);
    assert_int_equal(v.callers[0], 2);
    gm_snapshot_stack_view(&s, 0, &v);
    assert_int_equal(v.first, -1);

    /* exp_avg and exp_avg_sq read alike only without their innermost frame: folded they
     * differ already (via adamw.py:120 / :124), so nothing else is needed to tell them apart */
    struct gm_snapshot_stack_ref refs[4] = {{&s, 1}, {&s, 2}, {&s, 3}, {&s, 4}};
    long apart[4];
    gm_snapshot_stacks_apart(refs, 2, 0, apart);
    assert_int_equal(apart[0], -1);
    assert_int_equal(apart[1], -1);
    /* the same cross_entropy line called from train_step and from evaluate reads alike on
     * one line (user frame and via): told apart by the caller, where they first differ */
    gm_snapshot_stacks_apart(refs, 4, 0, apart);
    assert_int_equal(apart[2], 3);
    assert_int_equal(apart[3], 3);
    /* with one caller shown they differ already */
    gm_snapshot_stacks_apart(refs + 2, 2, 1, apart);
    assert_int_equal(apart[0], -1);
    assert_int_equal(apart[1], -1);
}

/* The spool of a pipe or a gzip'd file is bounded when the caller gives no limit: at most
 * GM_SNAPSHOT_SPOOL_MAX and 90% of the space left where it is written, so that an endless
 * stream never fills the disk; a limit the caller gives is the bound. */
static void test_spool_bound(void **state)
{
    FILE *t = tmpfile();
    struct statvfs vfs;
    uint64_t bound;
    (void)state;
    assert_non_null(t);
    assert_int_equal(fstatvfs(fileno(t), &vfs), 0);
    bound = snap_spool_bound(fileno(t), UINT64_MAX);
    assert_true(bound <= GM_SNAPSHOT_SPOOL_MAX);
    assert_true(bound <= (uint64_t)vfs.f_bavail * vfs.f_frsize / 10 * 9 + vfs.f_frsize);
    assert_true(bound > 0);
    assert_int_equal(snap_spool_bound(fileno(t), 12345), 12345);
    fclose(t);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_model),
    cmocka_unit_test(test_stats),
    cmocka_unit_test(test_timeline),
    cmocka_unit_test(test_empty_entries),
    cmocka_unit_test(test_alloc_failures),
    cmocka_unit_test(test_file_shrinks),
    cmocka_unit_test(test_fifo),
    cmocka_unit_test(test_inputs),
    cmocka_unit_test(test_passes),
    cmocka_unit_test(test_folded_timeline),
    cmocka_unit_test(test_fold_answers),
    cmocka_unit_test(test_fold_stops_answering_a_consumer_that_gave_up),
    cmocka_unit_test(test_long_batch),
    cmocka_unit_test(test_timeline_only),
    cmocka_unit_test(test_side_records),
    cmocka_unit_test(test_consume_long_batch),
    cmocka_unit_test(test_consumers_on_a_worker),
    cmocka_unit_test(test_worker_rule),
    cmocka_unit_test(test_user_frames),
    cmocka_unit_test(test_stack_view),
    cmocka_unit_test(test_spool_bound),
    cmocka_unit_test(test_packed_numbers),
    cmocka_unit_test(test_packed_extremes),
    cmocka_unit_test(test_event_sums),
};

/* real snapshots */
static const struct CMUnitTest third_party_tests[] = {
    cmocka_unit_test(test_real_file_prefixes),
    cmocka_unit_test(test_real_file_flips),
    cmocka_unit_test(test_passes_real_files),
    cmocka_unit_test(test_consumers_on_a_worker_real_files),
};

GM_TEST_MAIN(tests, third_party_tests)
