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
#include "report/report_int.h"

#include <jansson.h>
#include <math.h>
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
    /* the merged rest: per category null or runs [value, buckets, ...], each run longer
     * than the one before would make it (no two in a row of one value) and all of them
     * the buckets; the bands alive after a bucket's kmax and its rest add up to its amax */
    {
        json_t *rest = json_object_get(lod, "rest"), *kmax = json_object_get(lod, "kmax");
        size_t nb = json_array_size(amax);
        uint64_t *sum_b = calloc(nb ? nb : 1, sizeof(*sum_b));
        size_t n_cats = 0;
        assert_int_equal(json_array_size(rest), GM_CATEGORY_COUNT);
        for (int c = 0; c < GM_CATEGORY_COUNT; c++) {
            json_t *runs = json_array_get(rest, (size_t)c);
            size_t b = 0;
            if (json_is_null(runs))
                continue;
            n_cats++;
            assert_int_equal(json_array_size(runs) % 2, 0);
            for (size_t r = 0; r < json_array_size(runs); r += 2) {
                uint64_t val = (uint64_t)json_integer_value(json_array_get(runs, r));
                json_int_t len = json_integer_value(json_array_get(runs, r + 1));
                assert_true(len > 0);
                if (r)
                    assert_true(val != (uint64_t)json_integer_value(json_array_get(runs, r - 2)));
                for (json_int_t u = 0; u < len; u++, b++) {
                    assert_true(b < nb);
                    sum_b[b] += val;
                }
            }
            assert_int_equal(b, nb);
        }
        assert_true(n_cats > 0);
        for (size_t b = 0; b < nb; b++) {
            json_int_t k = json_integer_value(json_array_get(kmax, b));
            json_t *band;
            size_t bi;
            json_array_foreach(bands, bi, band)
            {
                if (json_integer_value(json_array_get(band, 0)) <= k &&
                    k < json_integer_value(json_array_get(band, 1)))
                    sum_b[b] += (uint64_t)json_integer_value(json_array_get(band, 4));
            }
            assert_int_equal(sum_b[b], (uint64_t)json_integer_value(json_array_get(amax, b)));
        }
        free(sum_b);
    }
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

/* One trace event of the snapshot trace_begin() opened: 'action' of [addr, addr + size) at
 * time t µs. */
static void trace_event(struct gm_pickle_writer *w, const char *action, uint64_t addr,
                        uint64_t size, int64_t t)
{
    gm_pickle_dict_begin(w, 6);
    gm_pickle_str(w, "action");
    gm_pickle_str(w, action);
    gm_pickle_str(w, "addr");
    gm_pickle_uint(w, addr);
    gm_pickle_str(w, "size");
    gm_pickle_uint(w, size);
    gm_pickle_str(w, "stream");
    gm_pickle_int(w, 0);
    gm_pickle_str(w, "time_us");
    gm_pickle_int(w, t);
    gm_pickle_str(w, "frames");
    gm_pickle_list_begin(w, 0);
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
}

/* The page's state of device 0 ("state" of page data) with the given state budget. */
static json_t *state_of(const struct gm_snapshot *snap, const struct gm_analysis *an,
                        uint64_t budget, json_t **page)
{
    struct gm_report_opts o = {"state", 50, 6, budget, NULL};
    struct gm_error err;
    FILE *f = tmpfile();
    size_t n;
    char *html;
    json_t *st;
    assert_int_equal(gm_report_html(f, snap, an, &o, &err), GM_OK);
    html = read_all(f, &n);
    fclose(f);
    *page = page_data(html);
    free(html);
    st = json_object_get(
        json_array_get(
            json_object_get(json_array_get(json_object_get(*page, "ranks"), 0), "devices"), 0),
        "state");
    assert_true(json_is_object(st));
    return st;
}

/* The allocation rows of "A" copy a number's digits when it repeats one of the row's own (a
 * free completed at the event after its request: the request's digits, the last one counted
 * up).  Every row's events must be the analysis' own: frees completed 1 and 2 events after
 * their request, one at event 9 (its last digit cannot count up: the carry), one at 19,
 * frees of allocations from the start (their request is -1 in the analysis; the one completed
 * at event 0 must not count "-1" up to "-2") and allocations never freed (-1, -1).  Planting "copy
 * for any gap" or dropping the '9' or the ">= 0" test makes this test fail. */
static void test_state_rows_free_events(void **state)
{
    FILE *f = tmpfile();
    struct gm_pickle_writer *w = trace_begin(f, 24);
    struct gm_snapshot *snap;
    struct gm_analysis *an;
    struct gm_error err;
    json_t *page, *st, *row;
    size_t i;
    int64_t t = 1000;
    bool gap1 = false, gap2 = false, carry = false, none = false, neg = false;
    (void)state;
    trace_event(w, "free_completed", 0x700000, 512, t++);  /* 0: -1, -1, 0 */
    trace_event(w, "free_requested", 0x100000, 512, t++);  /* 1 */
    trace_event(w, "free_completed", 0x100000, 512, t++);  /* 2: -1, -1, 2 */
    trace_event(w, "alloc", 0x200000, 512, t++);           /* 3 */
    trace_event(w, "free_requested", 0x200000, 512, t++);  /* 4 */
    trace_event(w, "free_completed", 0x200000, 512, t++);  /* 5: 3, 4, 5 */
    trace_event(w, "alloc", 0x300000, 512, t++);           /* 6 */
    trace_event(w, "free_requested", 0x300000, 512, t++);  /* 7 */
    trace_event(w, "alloc", 0x400000, 1024, t++);          /* 8 */
    trace_event(w, "free_requested", 0x400000, 1024, t++); /* 9 */
    trace_event(w, "free_completed", 0x400000, 1024, t++); /* 10: 8, 9, 10 */
    trace_event(w, "free_completed", 0x300000, 512, t++);  /* 11: 6, 7, 11 */
    trace_event(w, "alloc", 0x500000, 512, t++);           /* 12: never freed */
    for (i = 13; i < 19; i++)
        trace_event(w, "alloc", 0x800000 + 0x1000 * i, 256, t++);
    trace_event(w, "free_requested", 0x800000 + 0x1000 * 13, 256, t++); /* 19 */
    trace_event(w, "free_completed", 0x800000 + 0x1000 * 13, 256, t++); /* 20: 13, 19, 20 */
    trace_event(w, "free_requested", 0x800000 + 0x1000 * 14, 256, t++); /* 21 */
    trace_event(w, "alloc", 0x900000, 256, t++);                        /* 22 */
    trace_event(w, "free_completed", 0x800000 + 0x1000 * 14, 256, t++); /* 23: 14, 21, 23 */
    snap = trace_load(w, f);
    assert_int_equal(gm_analysis_run(snap, NULL, &an, &err), GM_OK);
    st = state_of(snap, an, 0, &page);
    assert_true(json_is_true(json_object_get(st, "every_event")));
    json_array_foreach(json_object_get(st, "A"), i, row)
    {
        const struct gm_analysis_device *ad = &an->devices[0];
        uint64_t addr = (uint64_t)json_integer_value(json_array_get(row, 0));
        int64_t k0 = json_integer_value(json_array_get(row, 5)),
                kr = json_integer_value(json_array_get(row, 6)),
                k1 = json_integer_value(json_array_get(row, 7));
        const struct gm_analysis_alloc *a = NULL;
        for (size_t j = 0; j < ad->n_allocs; j++)
            if (ad->allocs[j].addr == addr && ad->allocs[j].alloc_event == k0)
                a = &ad->allocs[j];
        assert_non_null(a);
        assert_true(json_is_integer(json_array_get(row, 6)));
        assert_true(json_is_integer(json_array_get(row, 7)));
        assert_int_equal(kr, a->free_requested_event);
        assert_int_equal(k1, a->free_event);
        gap1 |= kr > 0 && k1 == kr + 1 && kr % 10 != 9;
        gap2 |= kr >= 0 && k1 == kr + 2;
        carry |= kr % 10 == 9 && k1 == kr + 1;
        none |= kr == -1 && k1 == -1;
        neg |= kr == -1 && k1 == 0;
    }
    /* the trace above gives every case */
    assert_true(gap1 && gap2 && carry && none && neg);
    json_decref(page);
    gm_analysis_free(an);
    gm_snapshot_free(snap);
}

/* Within a small state budget the page keeps windows (k0, k1] of the trace, and "changes"
 * must hold exactly the layout changes inside them.  The report finds them by walking the
 * windows along the changes, caching each answer up to the event it holds to: for the events
 * before a window that is k0, which is outside it, while k0 + 1 is inside.  A trace whose
 * every event maps or unmaps a segment has a change at k0 and at k0 + 1 of each window that
 * follows a gap; planting "until = k0 + 1" loses the change at k0 + 1 and fails this test. */
static void test_state_changes_in_windows(void **state)
{
    const size_t n = 4000;
    FILE *f = tmpfile();
    struct gm_pickle_writer *w = trace_begin(f, n);
    struct gm_snapshot *snap;
    struct gm_analysis *an;
    struct gm_error err;
    const struct gm_layout_history *h;
    json_t *page, *st, *win, *changes;
    size_t i, n_in = 0, edges = 0;
    (void)state;
    for (i = 0; i < n; i++) {
        size_t j = i - (i > 2000) - (i > 2050); /* the segment event's own count */
        if (i == 2000 || i == 2050)             /* the peak, with a window around it */
            trace_event(w, i == 2000 ? "alloc" : "free_completed", 0x90000000, 1u << 30,
                        1000 + (int64_t)i);
        else
            trace_event(w, j % 2 ? "segment_free" : "segment_alloc",
                        0x10000000 + 0x200000 * (j / 2 % 7), 0x200000, 1000 + (int64_t)i);
    }
    snap = trace_load(w, f);
    assert_int_equal(gm_analysis_run(snap, NULL, &an, &err), GM_OK);
    h = gm_analysis_layout_history(&an->devices[0]);
    assert_non_null(h);
    assert_int_equal(h->n_changes, n - 2);
    st = state_of(snap, an, 16384, &page);
    assert_true(json_is_false(json_object_get(st, "every_event")));
    win = json_object_get(st, "windows");
    changes = json_object_get(st, "changes");
    assert_true(json_array_size(win) > 1);
    for (i = 0; i < h->n_changes; i++) {
        int64_t k = h->changes[i].event;
        bool in = false;
        for (size_t j = 0; j < json_array_size(win); j++) {
            int64_t k0 = json_integer_value(json_array_get(json_array_get(win, j), 0)),
                    k1 = json_integer_value(json_array_get(json_array_get(win, j), 1));
            in |= k0 < k && k <= k1;
            /* a window after a gap, with changes at k0 and k0 + 1 */
            edges +=
                k == k0 && k1 > k0 &&
                (j == 0 || json_integer_value(json_array_get(json_array_get(win, j - 1), 1)) < k0);
        }
        if (in) {
            json_t *c = json_array_get(changes, n_in++);
            assert_non_null(c);
            assert_int_equal(json_integer_value(json_array_get(c, 0)), k);
        }
    }
    assert_int_equal(json_array_size(changes), n_in);
    assert_true(edges > 0);
    json_decref(page);
    gm_analysis_free(an);
    gm_snapshot_free(snap);
}

/* A band row [k_alloc, k_free, x0, x1, bytes, category, stack, addr, "stream"] is written in
 * place when its x's are whole numbers gm_report_num() writes as integers
 * (gm_report_num_is_int()), and through the writer's calls otherwise: an x 9e15 us or more
 * from the first event's (a damaged file's times) is written as a real number.  Both kinds of
 * row must say the same of their allocation, field for field. */
static void test_band_rows_both_ways(void **state)
{
    const int64_t t0 = 1000, big = 9000000000000000LL; /* 9e15: exact in a double */
    FILE *f = tmpfile();
    struct gm_pickle_writer *w = trace_begin(f, 6);
    struct gm_snapshot *snap;
    struct gm_analysis *an;
    struct gm_error err;
    json_t *page, *dev, *row;
    size_t i, n_whole = 0, n_real = 0;
    const int64_t times[6] = {t0, t0 + 1000, t0 + 2000, t0 + 2000, t0 + big, t0 + big + 4};
    (void)state;
    trace_event(w, "alloc", 0x100000, 4096, times[0]);          /* 0: whole, then a real x1 */
    trace_event(w, "alloc", 0x200000, 8192, times[1]);          /* 1: whole x's */
    trace_event(w, "free_requested", 0x200000, 8192, times[2]); /* 2 */
    trace_event(w, "free_completed", 0x200000, 8192, times[3]); /* 3 */
    trace_event(w, "alloc", 0x300000, 512, times[4]);           /* 4: real x's */
    trace_event(w, "free_completed", 0x100000, 4096, times[5]); /* 5 */
    snap = trace_load(w, f);
    assert_int_equal(gm_analysis_run(snap, NULL, &an, &err), GM_OK);
    state_of(snap, an, 0, &page);
    dev = json_array_get(
        json_object_get(json_array_get(json_object_get(page, "ranks"), 0), "devices"), 0);
    json_array_foreach(json_object_get(dev, "bands"), i, row)
    {
        const struct gm_analysis_device *ad = &an->devices[0];
        const struct gm_analysis_alloc *a = NULL;
        uint64_t addr = (uint64_t)json_integer_value(json_array_get(row, 7));
        char stream[24];
        double x0, x1;
        assert_int_equal(json_array_size(row), 9);
        for (size_t j = 0; j < ad->n_allocs; j++)
            if (ad->allocs[j].addr == addr &&
                ad->allocs[j].alloc_event == json_integer_value(json_array_get(row, 0)))
                a = &ad->allocs[j];
        assert_non_null(a);
        assert_int_equal(json_integer_value(json_array_get(row, 1)),
                         a->free_event < 0 ? 6 : a->free_event);
        x0 = (double)(times[a->alloc_event] - t0);
        x1 = a->free_event < 0 ? (double)(times[5] - t0) : (double)(times[a->free_event] - t0);
        assert_true(json_is_number(json_array_get(row, 2)) &&
                    json_is_number(json_array_get(row, 3)));
        assert_true(json_number_value(json_array_get(row, 2)) == x0);
        assert_true(json_number_value(json_array_get(row, 3)) == x1);
        if (json_is_integer(json_array_get(row, 2)) && json_is_integer(json_array_get(row, 3)))
            n_whole++;
        else
            n_real++;
        assert_int_equal(json_integer_value(json_array_get(row, 4)), a->bytes);
        assert_int_equal(json_integer_value(json_array_get(row, 5)), a->category);
        assert_int_equal(json_integer_value(json_array_get(row, 6)), a->stack);
        snprintf(stream, sizeof(stream), "%llu",
                 (unsigned long long)gm_analysis_alloc_stream(ad, a));
        assert_string_equal(json_string_value(json_array_get(row, 8)), stream);
    }
    assert_int_equal(n_whole, 1);
    assert_int_equal(n_real, 2);
    json_decref(page);
    gm_analysis_free(an);
    gm_snapshot_free(snap);
}

/* gm_report_num(): integers exactly, other numbers truncated to 3 decimals, and numbers whose
 * thousandths lie beyond int64 (an x from a damaged file's times) and NaN as they are, not
 * through an undefined conversion (which wrote -9223372036854775.808 for 1e300 on x86-64). */
static void test_report_num(void **state)
{
    static const double v[] = {0.0, -3.0, 2.5, 1.23456, 9e15, 9.1e15, 1e300, -1e19, NAN};
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct gm_json w;
    (void)state;
    assert_non_null(f);
    gm_json_init(&w, f, 0);
    gm_json_begin_array(&w);
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        gm_report_num(&w, v[i]);
    gm_json_end_array(&w);
    assert_true(gm_json_finish(&w));
    fclose(f);
    assert_string_equal(text, "[0,-3,2.5,1.234,9e+15,9.1e+15,1e+300,-1e+19,null]\n");
    free(text);
}

/* A snapshot of one allocation freed, its frame named to close the page's script element
 * and open a comment. */
static struct gm_snapshot *hostile_snapshot(void)
{
    struct gm_pickle_writer *w;
    FILE *f = tmpfile();
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
    return trace_load(w, f);
}

/* A snapshot whose frame and settings try to close the script element. */
static void test_hostile_strings(void **state)
{
    struct gm_snapshot *snap;
    struct gm_analysis *an;
    struct gm_error err;
    size_t n;
    char *html;
    json_t *j;
    (void)state;
    snap = hostile_snapshot();
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

/* The page's data element takes the text however it is cut into writes: a '<' that ends one
 * write and a '/' or '!' that starts the next are "\u003c" and the byte (holding the '<'
 * back is what this checks: written at once, "</" would close the element), a '<' before
 * anything else or at the end stays itself. */
static void test_script_file_cut_anywhere(void **state)
{
    static const char *const pieces[] = {"a<", "/b<", "!c<", "d", "</e", "<", "<", "x<"};
    const char *want = "a\\u003c/b\\u003c!c<d\\u003c/e<<x<";
    struct gm_report_script s;
    FILE *f = tmpfile(), *data;
    size_t n;
    char *got;
    (void)state;
    data = gm_report_script_open(&s, f);
    assert_non_null(data);
    assert_int_equal(setvbuf(data, NULL, _IONBF, 0), 0); /* each piece a write of its own */
    for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++)
        assert_int_equal(fputs(pieces[i], data) >= 0, 1);
    assert_int_equal(fclose(data), 0);
    got = read_all(f, &n);
    fclose(f);
    assert_string_equal(got, want);
    free(got);
}

/* gm_report_html() writes its one rank into the page as it is rendered; the page equals the
 * one gathered first and written by gm_report_page_write(), byte for byte: on the example,
 * on names that would close the element, on traces of every kind of time and without an
 * analysis. */
static void test_streamed_page_equals_gathered(void **state)
{
    struct gm_report_opts o = {"test </title><b>", 50, 6, 0, NULL};
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    (void)state;
    for (int round = 0; round < 8; round++) {
        struct gm_snapshot *snap = round == 0   ? example(3)
                                   : round == 1 ? hostile_snapshot()
                                                : random_trace(&x, round % 5);
        struct gm_analysis *an = NULL;
        struct gm_report_page *p;
        struct gm_error err;
        FILE *f1 = tmpfile(), *f2 = tmpfile();
        size_t n1, n2;
        char *h1, *h2;
        if (round != 7)
            assert_int_equal(gm_analysis_run(snap, NULL, &an, &err), GM_OK);
        assert_int_equal(gm_report_html(f1, snap, an, &o, &err), GM_OK);
        assert_int_equal(gm_report_page_new(&o, &p, &err), GM_OK);
        assert_int_equal(gm_report_page_add(p, snap, an, NULL, &err), GM_OK);
        assert_int_equal(gm_report_page_write(p, f2, &err), GM_OK);
        gm_report_page_free(p);
        h1 = read_all(f1, &n1);
        h2 = read_all(f2, &n2);
        fclose(f1);
        fclose(f2);
        assert_int_equal(n1, n2);
        assert_memory_equal(h1, h2, n1);
        free(h1);
        free(h2);
        gm_analysis_free(an);
        gm_snapshot_free(snap);
    }
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
        cmocka_unit_test(test_example_report),
        cmocka_unit_test(test_ranks_page),
        cmocka_unit_test(test_hostile_strings),
        cmocka_unit_test(test_script_file_cut_anywhere),
        cmocka_unit_test(test_streamed_page_equals_gathered),
        cmocka_unit_test(test_plot),
        cmocka_unit_test(test_layout_replay),
        cmocka_unit_test(test_layout_pages_equal_layout),
        cmocka_unit_test(test_kept_history),
        cmocka_unit_test(test_kept_totals_same_page),
        cmocka_unit_test(test_state_rows_free_events),
        cmocka_unit_test(test_state_changes_in_windows),
        cmocka_unit_test(test_band_rows_both_ways),
        cmocka_unit_test(test_report_num),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
