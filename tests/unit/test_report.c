/* SPDX-License-Identifier: MIT */
/* test_report.c - the HTML report's page data and the terminal plot, on the example snapshot
 * and on a hand-written hostile one: the page is self-contained (no URL to fetch, the data
 * cannot close its <script> element), the figures agree with the timeline (peak, level of
 * detail, at-the-peak table), the plot fits its width, and the allocator layout the report
 * draws equals a replay of the trace at random events. */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "gpumem/analysis.h"
#include "gpumem/arena.h"
#include "gpumem/example.h"
#include "gpumem/pickle_write.h"
#include "gpumem/report.h"
#include "gpumem/snapshot.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_all(FILE *f, size_t *n)
{
    long size;
    char *buf;
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    rewind(f);
    buf = malloc((size_t)size + 1);
    assert_non_null(buf);
    *n = fread(buf, 1, (size_t)size, f);
    buf[*n] = 0;
    return buf;
}

static struct gm_snapshot *example(unsigned iterations)
{
    struct gm_example_opts o;
    struct gm_snapshot *snap;
    struct gm_error err;
    FILE *f = tmpfile();
    size_t n;
    char *data;
    gm_example_opts_init(&o);
    o.iterations = iterations;
    assert_int_equal(gm_example_write(f, &o, &err), GM_OK);
    data = read_all(f, &n);
    fclose(f);
    assert_int_equal(gm_snapshot_load_mem(data, n, NULL, &snap, &err), GM_OK);
    free(data);
    return snap;
}

static char *render(const struct gm_snapshot *snap, const struct gm_analysis *an, size_t *n)
{
    struct gm_report_opts o = {"test </title><b>", 50, 6, 0, NULL};
    struct gm_error err;
    FILE *f = tmpfile();
    char *html;
    assert_int_equal(gm_report_html(f, snap, an, &o, &err), GM_OK);
    html = read_all(f, n);
    fclose(f);
    return html;
}

static size_t count(const char *s, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static json_t *page_data(const char *html)
{
    const char *tag = "<script type=\"application/json\" id=\"gm-data\">";
    const char *a = strstr(html, tag), *b;
    json_error_t je;
    json_t *j;
    assert_non_null(a);
    a += strlen(tag);
    b = strstr(a, "</script>");
    assert_non_null(b);
    j = json_loadb(a, (size_t)(b - a), 0, &je);
    if (!j)
        fprintf(stderr, "page data: %s at %d\n", je.text, je.position);
    assert_non_null(j);
    return j;
}

static void test_example_report(void **state)
{
    struct gm_snapshot *snap = example(3);
    struct gm_analysis *an;
    struct gm_snapshot_timeline tl;
    struct gm_error err;
    size_t n;
    char *html;
    json_t *j, *rank, *dev, *lod, *amax, *at_peak, *moments, *bands;
    uint64_t max = 0, sum = 0;
    size_t i;
    json_t *v;
    bool peak_moment = false;
    (void)state;

    assert_int_equal(gm_analysis_run(snap, NULL, &an, &err), GM_OK);
    html = render(snap, an, &n);
    /* self-contained: nothing to fetch, and exactly our two script elements */
    assert_null(strstr(html, "http://"));
    assert_null(strstr(html, "https://"));
    assert_null(strstr(html, " src="));
    assert_int_equal(count(html, "</script>"), 2);
    assert_non_null(strstr(html, "Content-Security-Policy"));
    assert_non_null(strstr(html, "<title>gpumem report: test &lt;/title&gt;&lt;b&gt;</title>"));

    j = page_data(html);
    assert_string_equal(json_string_value(json_object_get(j, "schema")), "gpumem.report/2");
    assert_true(json_is_null(json_object_get(j, "imbalance"))); /* one rank */
    rank = json_array_get(json_object_get(j, "ranks"), 0);
    dev = json_array_get(json_object_get(rank, "devices"), 0);
    assert_int_equal(gm_snapshot_timeline(snap, 0, GM_TIMELINE_LIVE, &tl, &err), GM_OK);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(dev, "peak"), "bytes")),
                     (json_int_t)tl.peak_bytes);
    assert_string_equal(json_string_value(json_object_get(dev, "x_unit")), "us");
    /* the level of detail keeps the peak, and each bucket's least is at most its most */
    lod = json_object_get(dev, "lod");
    amax = json_object_get(lod, "amax");
    assert_int_equal(json_array_size(amax), json_integer_value(json_object_get(lod, "n")));
    for (size_t b = 0; b < json_array_size(amax); b++) {
        uint64_t hi = (uint64_t)json_integer_value(json_array_get(amax, b));
        assert_true((uint64_t)json_integer_value(json_array_get(json_object_get(lod, "amin"), b)) <=
                    hi);
        if (hi > max)
            max = hi;
    }
    assert_int_equal(max, tl.peak_bytes);
    /* the table at the peak adds up to the peak, in the groups `snapshot peak` makes */
    at_peak = json_object_get(dev, "at_peak");
    json_array_foreach(at_peak, i, v) sum += (uint64_t)json_integer_value(json_array_get(v, 0));
    sum += (uint64_t)json_integer_value(json_object_get(dev, "at_peak_rest_bytes"));
    assert_int_equal(sum, tl.peak_bytes);
    {
        struct gm_snapshot_live_group *g = NULL;
        size_t ng = 0;
        assert_int_equal(gm_snapshot_group_live(&tl, &g, &ng, &err), GM_OK);
        assert_int_equal(json_integer_value(json_object_get(dev, "at_peak_groups")), ng);
        gm_free(g);
    }
    /* bands capped, stacked in allocation order */
    bands = json_object_get(dev, "bands");
    assert_int_equal(json_array_size(bands), 50);
    for (i = 1; i < json_array_size(bands); i++)
        assert_true(json_integer_value(json_array_get(json_array_get(bands, i - 1), 0)) <=
                    json_integer_value(json_array_get(json_array_get(bands, i), 0)));
    /* zoomed views get more bands: per window, none of them a global band */
    {
        json_t *rb = json_object_get(dev, "rbands"), *win, *b, *g;
        size_t wi, bi, gi;
        assert_true(json_array_size(rb) > 0);
        json_array_foreach(rb, wi, win)
        {
            assert_true(json_array_size(json_object_get(win, "b")) <= 50 / 4 + 1);
            json_array_foreach(json_object_get(win, "b"), bi, b)
            {
                json_array_foreach(bands, gi, g)
                {
                    assert_false(json_integer_value(json_array_get(g, 0)) ==
                                     json_integer_value(json_array_get(b, 0)) &&
                                 json_integer_value(json_array_get(g, 7)) ==
                                     json_integer_value(json_array_get(b, 7)));
                }
            }
        }
    }
    /* the moments named include the peak and the snapshot itself */
    moments = json_object_get(dev, "marks");
    assert_true(json_array_size(moments) >= 2 && json_array_size(moments) <= 6);
    json_array_foreach(moments, i, v)
    {
        if (json_integer_value(json_array_get(v, 0)) == tl.peak_event_index)
            peak_moment = true;
    }
    assert_true(peak_moment);
    assert_int_equal(json_integer_value(
                         json_array_get(json_array_get(moments, json_array_size(moments) - 1), 1)) &
                         1,
                     1);
    /* the state at every event is in the page, and at the peak its allocations add up */
    {
        json_t *st = json_object_get(dev, "state"), *a;
        uint64_t alive = 0;
        size_t ai;
        assert_true(json_is_true(json_object_get(st, "every_event")));
        json_array_foreach(json_object_get(st, "A"), ai, a)
        {
            int64_t k0 = json_integer_value(json_array_get(a, 5)),
                    k1 = json_integer_value(json_array_get(a, 7));
            if (k0 <= tl.peak_event_index && (k1 < 0 || k1 > tl.peak_event_index))
                alive += (uint64_t)json_integer_value(json_array_get(a, 2));
        }
        assert_int_equal(alive, tl.peak_bytes);
    }
    assert_true(json_array_size(json_object_get(dev, "leaks")) > 0);
    assert_true(json_object_size(json_object_get(rank, "stacks")) > 0);
    json_decref(j);
    free(html);

    /* without analysis: still a page, no categories, no allocator history */
    html = render(snap, NULL, &n);
    j = page_data(html);
    dev = json_array_get(json_object_get(json_array_get(json_object_get(j, "ranks"), 0), "devices"),
                         0);
    assert_null(json_object_get(dev, "series"));
    assert_true(json_is_null(json_object_get(dev, "state")));
    assert_int_equal(json_array_size(json_object_get(dev, "bands")), 0);
    json_decref(j);
    free(html);
    gm_snapshot_timeline_release(&tl);
    gm_analysis_free(an);
    gm_snapshot_free(snap);
}

/* Two ranks in one page: both there, and the imbalance names the larger one. */
static void test_ranks_page(void **state)
{
    struct gm_snapshot *a = example(2), *b = example(4);
    struct gm_analysis *aa, *ab;
    struct gm_report_page *p;
    struct gm_error err;
    FILE *f = tmpfile();
    size_t n;
    char *html;
    json_t *j, *ib;
    (void)state;
    assert_int_equal(gm_analysis_run(a, NULL, &aa, &err), GM_OK);
    assert_int_equal(gm_analysis_run(b, NULL, &ab, &err), GM_OK);
    assert_int_equal(gm_report_page_new(NULL, &p, &err), GM_OK);
    assert_int_equal(gm_report_page_add(p, a, aa, "rank0.pickle", &err), GM_OK);
    gm_analysis_free(aa); /* the page keeps what it needs */
    gm_snapshot_free(a);
    assert_int_equal(gm_report_page_add(p, b, ab, "rank1.pickle", &err), GM_OK);
    assert_int_equal(gm_report_page_write(p, f, &err), GM_OK);
    gm_report_page_free(p);
    html = read_all(f, &n);
    fclose(f);
    j = page_data(html);
    assert_int_equal(json_array_size(json_object_get(j, "ranks")), 2);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(j, "ranks"), 1), "title")),
        "rank1.pickle");
    ib = json_object_get(j, "imbalance");
    assert_true(json_is_object(ib));
    /* four iterations leak more than two: rank 1 peaks higher */
    assert_int_equal(json_integer_value(json_object_get(ib, "max_rank")), 1);
    assert_int_equal(json_integer_value(json_object_get(ib, "max_peak")),
                     (json_int_t)ab->devices[0].peak_bytes);
    assert_true(json_real_value(json_object_get(ib, "ratio")) > 1.0);
    json_decref(j);
    free(html);
    gm_analysis_free(ab);
    gm_snapshot_free(b);
}

/* A one-device snapshot written as a pickle: trace_begin() opens it (no segments, then the
 * trace of 'n' events, each written by the caller), trace_load() closes and loads it. */
static struct gm_pickle_writer *trace_begin(FILE *f, size_t n)
{
    struct gm_pickle_writer *w;
    struct gm_error err;
    assert_int_equal(gm_pickle_writer_new(f, 4, &w, &err), GM_OK);
    gm_pickle_dict_begin(w, 2);
    gm_pickle_str(w, "segments");
    gm_pickle_list_begin(w, 0);
    gm_pickle_list_end(w);
    gm_pickle_str(w, "device_traces");
    gm_pickle_list_begin(w, 1);
    gm_pickle_list_begin(w, n);
    return w;
}

static struct gm_snapshot *trace_load(struct gm_pickle_writer *w, FILE *f)
{
    struct gm_snapshot *snap;
    struct gm_error err;
    size_t len;
    char *data;
    gm_pickle_list_end(w);
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
    assert_int_equal(gm_pickle_writer_finish(w, &err), GM_OK);
    data = read_all(f, &len);
    fclose(f);
    if (gm_snapshot_load_mem(data, len, NULL, &snap, &err) != GM_OK)
        fail_msg("snapshot: %s", err.msg);
    free(data);
    return snap;
}

/* A snapshot whose frame and settings try to close the script element. */
static void test_hostile_strings(void **state)
{
    struct gm_pickle_writer *w;
    struct gm_snapshot *snap;
    struct gm_analysis *an;
    struct gm_error err;
    FILE *f = tmpfile();
    size_t n;
    char *html;
    json_t *j;
    (void)state;
    w = trace_begin(f, 2);
    for (int e = 0; e < 2; e++) {
        gm_pickle_dict_begin(w, 5);
        gm_pickle_str(w, "action");
        gm_pickle_str(w, e ? "free_completed" : "alloc");
        gm_pickle_str(w, "addr");
        gm_pickle_int(w, 1 << 20);
        gm_pickle_str(w, "size");
        gm_pickle_int(w, 4096);
        gm_pickle_str(w, "stream");
        gm_pickle_int(w, 0);
        gm_pickle_str(w, "frames");
        gm_pickle_list_begin(w, 1);
        gm_pickle_dict_begin(w, 3);
        gm_pickle_str(w, "name");
        gm_pickle_str(w, "</script><script>alert(1)</script><!--");
        gm_pickle_str(w, "filename");
        gm_pickle_str(w, "/home/u/x.py");
        gm_pickle_str(w, "line");
        gm_pickle_int(w, 1);
        gm_pickle_dict_end(w);
        gm_pickle_list_end(w);
        gm_pickle_dict_end(w);
    }
    snap = trace_load(w, f);
    assert_int_equal(gm_analysis_run(snap, NULL, &an, &err), GM_OK);
    html = render(snap, an, &n);
    assert_int_equal(count(html, "</script>"), 2);
    assert_null(strstr(html, "<!--"));
    j = page_data(html);
    /* the name survives intact in the page data */
    assert_string_equal(
        json_string_value(json_array_get(
            json_array_get(
                json_object_get(json_array_get(json_object_get(j, "ranks"), 0), "frames"), 0),
            1)),
        "</script><script>alert(1)</script><!--");
    json_decref(j);
    free(html);
    gm_analysis_free(an);
    gm_snapshot_free(snap);
}

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* A random one-device trace as a pickle: allocs and frees at a few addresses (frees without
 * an alloc or larger than what is allocated, two allocs at one address), segment events, times
 * that grow, go back, jump past 32 bits or are missing ('kind' as below). */
static struct gm_snapshot *random_trace(uint64_t *x, int kind)
{
    static const char *const actions[] = {"alloc",         "free_requested", "free_completed",
                                          "segment_alloc", "segment_free",   "oom"};
    FILE *f = tmpfile();
    size_t n = 1 + (size_t)(rng_next(x) % 400);
    int64_t t = 1700000000000000LL;
    struct gm_pickle_writer *w = trace_begin(f, n);
    for (size_t k = 0; k < n; k++) {
        /* kind 0 grows, 1 goes back, 2 jumps past 32 bits, 3 misses one time, 4 has none */
        bool timed = kind != 4 && !(kind == 3 && k == n / 2);
        uint64_t size = rng_next(x) % 16 == 0 ? (uint64_t)1 << 40 : 1 + rng_next(x) % 100000;
        t += (int64_t)(rng_next(x) % 50000);
        if (kind == 1 && rng_next(x) % 7 == 0)
            t -= 200000;
        if (kind == 2 && k == n / 2)
            t += (int64_t)1 << 33;
        gm_pickle_dict_begin(w, timed ? 6 : 5);
        gm_pickle_str(w, "action");
        gm_pickle_str(w, actions[rng_next(x) % 6]);
        gm_pickle_str(w, "addr");
        gm_pickle_uint(w, 0x100000 * (1 + rng_next(x) % 6));
        gm_pickle_str(w, "size");
        gm_pickle_uint(w, size);
        gm_pickle_str(w, "stream");
        gm_pickle_int(w, 0);
        if (timed) {
            gm_pickle_str(w, "time_us");
            gm_pickle_int(w, t);
        }
        gm_pickle_str(w, "frames");
        gm_pickle_list_begin(w, 0);
        gm_pickle_list_end(w);
        gm_pickle_dict_end(w);
    }
    return trace_load(w, f);
}

/* The timeline the analysis keeps for the page (gm_analysis_opts.totals, summed in its
 * series' pass) draws the page the report's own walk of the trace draws, byte for byte: on
 * the example and on random traces of every kind of time. */
static void test_kept_totals_same_page(void **state)
{
    struct gm_analysis_opts walk = {.max_points = 40}, kept = {.max_points = 40, .totals = true};
    uint64_t x = 0x2545f4914f6cdd1dULL;
    (void)state;
    for (int round = 0; round < 61; round++) {
        struct gm_snapshot *snap = round == 60 ? example(3) : random_trace(&x, round % 5);
        struct gm_analysis *a1, *a2;
        struct gm_error err;
        size_t n1, n2;
        char *h1, *h2;
        assert_int_equal(gm_analysis_run(snap, &walk, &a1, &err), GM_OK);
        assert_int_equal(gm_analysis_run(snap, &kept, &a2, &err), GM_OK);
        assert_null(gm_analysis_totals(&a1->devices[0]));
        assert_non_null(gm_analysis_totals(&a2->devices[0]));
        h1 = render(snap, a1, &n1);
        h2 = render(snap, a2, &n2);
        assert_int_equal(n1, n2);
        assert_memory_equal(h1, h2, n1);
        free(h1);
        free(h2);
        gm_analysis_free(a1);
        gm_analysis_free(a2);
        gm_snapshot_free(snap);
    }
}

static void test_plot(void **state)
{
    struct gm_snapshot *snap = example(2);
    struct gm_analysis *an;
    struct gm_plot_opts po = {60, 8, GM_PLOT_ASCII};
    struct gm_error err;
    FILE *f = tmpfile();
    size_t n, lines = 0;
    char *out, *line, *save = NULL;
    (void)state;
    assert_int_equal(gm_report_plot(f, snap, NULL, 0, &po, &err), GM_OK);
    out = read_all(f, &n);
    fclose(f);
    assert_non_null(strstr(out, "v peak"));
    for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        for (const char *p = line; *p; p++)
            assert_true((unsigned char)*p < 128); /* ASCII only */
        if (lines < 12)                           /* every line but the legend fits */
            assert_true(strlen(line) <= 60);
        lines++;
    }
    assert_int_equal(lines, 1 + 1 + 8 + 2 + 1);
    free(out);
    /* categories need an analysis; a device that is not there is an error */
    po.flags = GM_PLOT_CATEGORIES;
    assert_int_equal(gm_report_plot(stdout, snap, NULL, 0, &po, &err), GM_ERR_INVALID);
    assert_int_equal(gm_report_plot(stdout, snap, NULL, 7, &po, &err), GM_ERR_INVALID);
    assert_int_equal(gm_analysis_run(snap, NULL, &an, &err), GM_OK);
    f = tmpfile();
    po.flags = GM_PLOT_CATEGORIES | GM_PLOT_COLOR;
    assert_int_equal(gm_report_plot(f, snap, an, 0, &po, &err), GM_OK);
    out = read_all(f, &n);
    fclose(f);
    assert_non_null(strstr(out, "\033[38;5;32m")); /* parameters in blue */
    assert_non_null(strstr(out, "activations"));
    free(out);
    gm_analysis_free(an);
    gm_snapshot_free(snap);
}

/* ---- the allocator layout at random events against a replay of the trace ----
 * The replay here is the plainest reading of the trace, independent of src/analysis/layout.c:
 * from the empty allocator the example starts with, segment_alloc adds a segment and
 * segment_free removes it, alloc adds a block and free_completed removes it (a block freed
 * but not completed is still there). */
#define REPLAY_MAX 4096

struct replay {
    const struct gm_snapshot_device *sd;
    struct gm_snapshot_cursor cur;
    int64_t at; /* the replay holds the state after this event */
    uint64_t seg_addr[REPLAY_MAX], seg_size[REPLAY_MAX];
    uint64_t blk_addr[REPLAY_MAX], blk_size[REPLAY_MAX];
    size_t n_seg, n_blk;
    size_t checked_blocks;
};

static void put(uint64_t *addr, uint64_t *size, size_t *n, uint64_t a, uint64_t sz)
{
    size_t i = *n;
    assert_true(*n < REPLAY_MAX);
    while (i > 0 && addr[i - 1] > a) { /* kept by address */
        addr[i] = addr[i - 1];
        size[i] = size[i - 1];
        i--;
    }
    addr[i] = a;
    size[i] = sz;
    (*n)++;
}

static void drop(uint64_t *addr, uint64_t *size, size_t *n, uint64_t a)
{
    size_t i = 0;
    while (i < *n && addr[i] != a)
        i++;
    assert_true(i < *n); /* the trace frees only what it holds */
    memmove(addr + i, addr + i + 1, (*n - i - 1) * sizeof(*addr));
    memmove(size + i, size + i + 1, (*n - i - 1) * sizeof(*size));
    (*n)--;
}

static enum gm_status check_layout(void *ctx, size_t i, const struct gm_layout *l,
                                   struct gm_error *err)
{
    struct replay *r = ctx;
    const struct gm_snapshot_event *e;
    (void)i;
    (void)err;
    while (r->at < l->event && (e = gm_snapshot_cursor_next(&r->cur)) != NULL) {
        r->at++;
        if (e->action == GM_ACTION_SEGMENT_ALLOC)
            put(r->seg_addr, r->seg_size, &r->n_seg, e->addr, e->size);
        else if (e->action == GM_ACTION_SEGMENT_FREE)
            drop(r->seg_addr, r->seg_size, &r->n_seg, e->addr);
        else if (e->action == GM_ACTION_ALLOC)
            put(r->blk_addr, r->blk_size, &r->n_blk, e->addr, e->size);
        else if (e->action == GM_ACTION_FREE_COMPLETED)
            drop(r->blk_addr, r->blk_size, &r->n_blk, e->addr);
    }
    assert_int_equal(r->at, l->event);
    /* segment for segment, block for block */
    assert_int_equal(l->n_segments, r->n_seg);
    uint64_t reserved = 0;
    for (size_t s = 0; s < r->n_seg; s++) {
        assert_int_equal(l->segments[s].addr, r->seg_addr[s]);
        assert_int_equal(l->segments[s].size, r->seg_size[s]);
        reserved += r->seg_size[s];
    }
    assert_int_equal(l->reserved, reserved);
    assert_int_equal(l->n_outside, 0);
    assert_int_equal(l->n_blocks, r->n_blk);
    for (size_t b = 0; b < r->n_blk; b++) {
        assert_int_equal(l->blocks[b].addr, r->blk_addr[b]);
        assert_int_equal(l->blocks[b].bytes, r->blk_size[b]);
    }
    r->checked_blocks += r->n_blk;
    return GM_OK;
}

static void test_layout_replay(void **state)
{
    struct gm_snapshot *snap = example(6);
    struct gm_analysis *an;
    struct gm_error err;
    struct replay *r = calloc(1, sizeof(*r));
    int64_t ks[24];
    size_t n = 0;
    uint32_t x = 2463534242u; /* xorshift, seeded: the same events on every run */
    (void)state;
    assert_non_null(r);
    assert_int_equal(gm_analysis_run(snap, NULL, &an, &err), GM_OK);
    r->sd = gm_snapshot_device_by_index(snap, 0);
    assert_non_null(r->sd);
    const size_t n_events = r->sd->n_events;
    assert_true(n_events > 1000);
    ks[n++] = -1;
    while (n < 23) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        ks[n++] = (int64_t)(x % n_events);
    }
    ks[n++] = (int64_t)n_events - 1;
    /* ascending and distinct, as gm_layout_at() wants them */
    for (size_t a = 1; a < n; a++)
        for (size_t b = a; b > 0 && ks[b - 1] > ks[b]; b--) {
            int64_t t = ks[b];
            ks[b] = ks[b - 1];
            ks[b - 1] = t;
        }
    size_t m = 1;
    for (size_t a = 1; a < n; a++)
        if (ks[a] != ks[m - 1])
            ks[m++] = ks[a];
    gm_snapshot_cursor_init(&r->cur, r->sd, 0);
    r->at = -1;
    assert_int_equal(
        gm_layout_at(an, gm_analysis_device_by_index(an, 0), NULL, ks, m, check_layout, r, &err),
        GM_OK);
    assert_int_equal(r->at, (int64_t)n_events - 1);
    assert_true(r->checked_blocks > 1000); /* the events picked hold many blocks */
    free(r);
    gm_analysis_free(an);
    gm_snapshot_free(snap);
}

/* A digest of what gm_layout_pages_at() gives of a moment (segments, pages, the allocations
 * alive, reserved bytes), to compare with gm_layout_at()'s at the same moments. */
struct pages_digest {
    uint64_t d[64];
    size_t n;
    bool pages_only;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    return (h ^ v) * 0x100000001b3ull + (h >> 29);
}

static enum gm_status digest_pages(void *ctx, size_t i, const struct gm_layout *l,
                                   struct gm_error *err)
{
    struct pages_digest *p = ctx;
    uint64_t h = mix(0, (uint64_t)l->event);
    (void)err;
    assert_true(i < 64);
    for (size_t s = 0; s < l->n_segments; s++) {
        const struct gm_layout_segment *g = &l->segments[s];
        h = mix(mix(mix(mix(h, g->id), g->addr), g->size), g->mapped);
        h = mix(mix(mix(mix(h, g->stream), g->is_small), g->is_expandable), g->n_ranges);
        for (size_t r = 0; r < g->n_ranges; r++)
            h = mix(mix(h, l->ranges[g->first_range + r].addr), l->ranges[g->first_range + r].size);
        if (p->pages_only)
            assert_int_equal(g->n_blocks + g->allocated + g->requested, 0);
    }
    h = mix(mix(h, l->n_ranges), l->reserved);
    for (size_t j = 0; j < l->n_live; j++)
        h = mix(h, l->live[j]);
    if (p->pages_only) {
        assert_null(l->blocks);
        assert_int_equal(l->n_blocks + l->allocated + l->requested + l->n_outside, 0);
    }
    p->d[i] = h;
    p->n = i + 1;
    return GM_OK;
}

static void test_layout_pages_equal_layout(void **state)
{
    struct gm_snapshot *snap = example(6);
    struct gm_analysis *an;
    struct gm_error err;
    struct pages_digest whole = {{0}, 0, false}, pages = {{0}, 0, true};
    int64_t ks[40];
    (void)state;
    assert_int_equal(gm_analysis_run(snap, NULL, &an, &err), GM_OK);
    const struct gm_analysis_device *ad = gm_analysis_device_by_index(an, 0);
    const size_t n_events = gm_snapshot_device_by_index(snap, 0)->n_events;
    for (size_t i = 0; i < 40; i++)
        ks[i] = (int64_t)(i * n_events / 40) - 1;
    assert_int_equal(gm_layout_at(an, ad, NULL, ks, 40, digest_pages, &whole, &err), GM_OK);
    assert_int_equal(gm_layout_pages_at(an, ad, NULL, ks, 40, digest_pages, &pages, &err), GM_OK);
    assert_int_equal(whole.n, 40);
    assert_int_equal(pages.n, 40);
    for (size_t i = 0; i < 40; i++)
        assert_int_equal(whole.d[i], pages.d[i]);
    gm_analysis_free(an);
    gm_snapshot_free(snap);
}

/* The history the analysis keeps for a device is the one gm_layout_history_build() makes
 * of it, so the report reading it shows what a fresh build would. */
static void test_kept_history(void **state)
{
    struct gm_snapshot *snap = example(6);
    struct gm_analysis *an;
    struct gm_error err;
    struct gm_layout_history h;
    (void)state;
    assert_int_equal(gm_analysis_run(snap, NULL, &an, &err), GM_OK);
    const struct gm_snapshot_device *sd = gm_snapshot_device_by_index(snap, 0);
    const struct gm_layout_history *k =
        gm_analysis_layout_history(gm_analysis_device_by_index(an, 0));
    assert_non_null(sd);
    assert_non_null(k);
    assert_null(gm_analysis_layout_history(NULL));
    assert_int_equal(gm_layout_history_build(snap, sd, &h, &err), GM_OK);
    assert_true(h.n_changes > 0); /* the example maps and frees segments */
    assert_int_equal(k->n_segments, h.n_segments);
    assert_int_equal(k->n_initial, h.n_initial);
    assert_int_equal(k->n_changes, h.n_changes);
    assert_int_equal(k->n_final_blocks, h.n_final_blocks);
    for (size_t i = 0; i < h.n_segments; i++) {
        assert_int_equal(k->segments[i].base, h.segments[i].base);
        assert_int_equal(k->segments[i].stream, h.segments[i].stream);
        assert_int_equal(k->segments[i].is_small, h.segments[i].is_small);
        assert_int_equal(k->segments[i].is_expandable, h.segments[i].is_expandable);
    }
    for (size_t i = 0; i < h.n_initial + h.n_changes; i++) {
        const struct gm_layout_change *a =
            i < h.n_initial ? &k->initial[i] : &k->changes[i - h.n_initial];
        const struct gm_layout_change *b =
            i < h.n_initial ? &h.initial[i] : &h.changes[i - h.n_initial];
        assert_int_equal(a->event, b->event);
        assert_int_equal(a->segment, b->segment);
        assert_int_equal(a->op, b->op);
        assert_int_equal(a->addr, b->addr);
        assert_int_equal(a->size, b->size);
    }
    for (size_t i = 0; i < h.n_final_blocks; i++) {
        assert_int_equal(k->final_blocks[i].addr, h.final_blocks[i].addr);
        assert_int_equal(k->final_blocks[i].size, h.final_blocks[i].size);
    }
    gm_layout_history_release(&h);
    gm_analysis_free(an);
    gm_snapshot_free(snap);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_example_report),  cmocka_unit_test(test_ranks_page),
        cmocka_unit_test(test_hostile_strings), cmocka_unit_test(test_plot),
        cmocka_unit_test(test_layout_replay),   cmocka_unit_test(test_layout_pages_equal_layout),
        cmocka_unit_test(test_kept_history),    cmocka_unit_test(test_kept_totals_same_page),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
