/* SPDX-License-Identifier: MIT */
/* test_trace.c - unit tests of the trace writer (src/analysis/trace.c): every NDJSON event
 * line is what printf writes for the event, its extra and the walk's totals after it,
 * whatever the writer keeps from the line before (the end of a line kept as text while
 * stack, extra, pool flag and reserved total stay; the slots of sizes, addresses, address and
 * size pairs (one too long to keep among them) and totals;
 * the memos' spans of digits), and each stack's frames line comes before the first event that names
 * it; in text, the size and total columns are gm_format_bytes() of them (kept in slots by value).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off: cmocka.h needs the headers above first */
#include <cmocka.h>
/* clang-format on */

#include "gpumem/analysis.h"
#include "gpumem/snapshot.h"
#include "gpumem/text.h"
#include "gpumem/units.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_EVENTS 6000
#define N_STACKS 7

static const struct gm_snapshot_frame frames[] = {
    {"/home/u/train.py", "main", 10, true, false, false, false, 0, 0},
    {"/home/u/model.py", "forward", 20, true, false, false, false, 0, 0},
    {"/opt/py/site-packages/torch/nn/modules/module.py", "_call_impl", 1500, true, false, false,
     false, 0, 0},
};
static const uint32_t st_main[] = {0};
static const uint32_t st_fwd[] = {1, 2, 0};
static const uint32_t st_lib[] = {2};
static const struct gm_snapshot_stack stacks[N_STACKS] = {
    {NULL, 0}, {st_main, 1}, {st_fwd, 3}, {st_lib, 1}, {st_fwd, 2}, {st_main, 1}, {st_fwd, 1},
};

/* extras: none of the keys, each key, a pool, a stream, a forward stack, an action's own
 * name, and metadata longer than any end of line the writer keeps */
static char long_meta[5000]; /* over the writer's 4096-byte room: the line moves */
static struct gm_snapshot_event_extra extras[] = {
    {0, NULL, "N/A", NULL, {0, 0}, NULL, 0},
    {0, NULL, NULL, NULL, {0, 0}, NULL, 0},
    {7, NULL, "N/A", "step 3", {1, 2}, NULL, 0},
    {0x7f00aa, NULL, NULL, NULL, {0, 5}, "mallocWithAddress", 3},
    {0, "user_defined", "compiled fn", NULL, {0, 0}, NULL, 0},
    {0, NULL, NULL, long_meta, {3, 4}, NULL, 6},
    {12, NULL, "N/A", NULL, {-1, 9}, NULL, 0},
};
#define N_EXTRAS (sizeof(extras) / sizeof(extras[0]))

static uint64_t rng = 88172645463325252u;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A trace that changes each field in runs and jumps: sizes from a set larger than the
 * writer's slots, addresses and totals across 10^8, 10^9 and 10^10 boundaries, times that
 * step, jump, go missing or negative, runs of one stack and extra broken at random. */
static void build(struct gm_snapshot_event *ev, size_t n)
{
    uint64_t addr = UINT64_C(139363423879168), t = UINT64_C(1763324225770251);
    uint32_t stack = 1, extra = 1;
    for (size_t i = 0; i < n; i++) {
        struct gm_snapshot_event *e = &ev[i];
        uint64_t r = rnd();
        memset(e, 0, sizeof(*e));
        e->action = (uint8_t)(r % 16 < 6 ? r % 3 : (r >> 4) % GM_ACTION_COUNT);
        e->flags = GM_EVENT_HAS_ADDR | GM_EVENT_HAS_TIME | GM_EVENT_HAS_FRAMES;
        if ((r >> 8) % 50 == 0)
            e->flags &= (uint8_t)~GM_EVENT_HAS_ADDR;
        if ((r >> 14) % 60 == 0)
            e->flags &= (uint8_t)~GM_EVENT_HAS_TIME;
        if ((r >> 20) % 7 == 0)
            e->flags |= GM_EVENT_HAS_POOL_ID;
        switch ((r >> 24) % 8) {
        case 0:
            addr += (rnd() % 4000) * 512; /* within the last eight digits mostly */
            break;
        case 1:
            addr += (rnd() % 40) * UINT64_C(100000000); /* across 10^8 */
            break;
        case 2:
            addr -= (rnd() % 30) * UINT64_C(1000000000); /* across 10^9 and 10^10 */
            break;
        case 3:
            addr = rnd() >> (rnd() % 64); /* anything */
            break;
        default:
            break;
        }
        e->addr = addr;
        e->size = (r >> 32) % 5 == 0 ? rnd() >> (rnd() % 64) : ((r >> 35) % 40 + 1) * 1048576;
        if (i % 97 == 5 || i % 97 == 6 || i % 97 == 40) {
            /* one address and size again and again whose ,"addr":A,"size":S text (51 bytes)
             * is longer than the writer keeps for a pair: made anew each time */
            e->addr = UINT64_MAX - 999;
            e->size = UINT64_C(123456789012345);
        }
        t += (r >> 40) % 9 == 0 ? rnd() % UINT64_C(5000000000) : (r >> 44) % 300;
        e->time_us = (r >> 50) % 97 == 0 ? -(int64_t)(rnd() % 100000) : (int64_t)t;
        if ((r >> 52) % 9 == 0) {
            stack = (uint32_t)(rnd() % (N_STACKS + 2)); /* now and then past the stacks */
            /* stacks 3 and 6 only as the extras' forward stacks: their frames lines come
             * before the first event of their extra, which may change without the stack */
            if (stack == 3 || stack == 6)
                stack = 2;
        }
        if ((r >> 56) % 11 == 0)
            extra = (uint32_t)(rnd() % (N_EXTRAS + 2)); /* 0: none; past the extras: none */
        e->stack = stack;
        e->extra = extra;
    }
}

/* The line printf writes for event k of 'd' with the totals after it. */
static void want_line(char *out, size_t room, const struct gm_snapshot *snap,
                      const struct gm_snapshot_device *d, size_t k,
                      const struct gm_snapshot_event *e, uint64_t allocated, uint64_t reserved)
{
    const struct gm_snapshot_event_extra *x =
        e->extra && e->extra <= snap->n_extras ? &snap->extras[e->extra - 1] : NULL;
    size_t n = (size_t)snprintf(
        out, room, "{\"device\":%d,\"index\":%zu,\"action\":\"%s\"", (int)d->index, k,
        x && x->action_name ? x->action_name
                            : gm_snapshot_action_name((enum gm_snapshot_action)e->action));
    if (e->action == GM_ACTION_OOM)
        n += (size_t)snprintf(out + n, room - n, ",\"device_free\":%" PRIu64, e->addr);
    else if (e->flags & GM_EVENT_HAS_ADDR)
        n += (size_t)snprintf(out + n, room - n, ",\"addr\":%" PRIu64, e->addr);
    n += (size_t)snprintf(out + n, room - n, ",\"size\":%" PRIu64 ",\"stream\":%" PRIu64, e->size,
                          x ? x->stream : 0);
    if (e->flags & GM_EVENT_HAS_TIME)
        n += (size_t)snprintf(out + n, room - n, ",\"time_us\":%" PRId64, e->time_us);
    else
        n += (size_t)snprintf(out + n, room - n, ",\"time_us\":null");
    n += (size_t)snprintf(out + n, room - n,
                          ",\"allocated_bytes\":%" PRIu64 ",\"reserved_bytes\":%" PRIu64, allocated,
                          reserved);
    if (x && (e->flags & GM_EVENT_HAS_POOL_ID))
        n += (size_t)snprintf(out + n, room - n, ",\"pool_id\":[%" PRId64 ",%" PRId64 "]",
                              x->pool_id[0], x->pool_id[1]);
    if (x && x->compile_context)
        n += (size_t)snprintf(out + n, room - n, ",\"compile_context\":\"%s\"", x->compile_context);
    if (x && x->user_metadata)
        n += (size_t)snprintf(out + n, room - n, ",\"user_metadata\":\"%s\"", x->user_metadata);
    if (x && x->internal_metadata)
        n += (size_t)snprintf(out + n, room - n, ",\"internal_metadata\":\"%s\"",
                              x->internal_metadata);
    n += (size_t)snprintf(out + n, room - n, ",\"stack\":%" PRIu32, e->stack);
    if (x && x->forward_stack)
        n += (size_t)snprintf(out + n, room - n, ",\"forward_stack\":%" PRIu32, x->forward_stack);
    (void)snprintf(out + n, room - n, "}");
}

/* The stack id of a '{"stack":N,"frames":...}' line, or -1 for another line. */
static long stack_line(const char *line)
{
    const char *key = "{\"stack\":";
    if (strncmp(line, key, strlen(key)) != 0)
        return -1;
    return strtol(line + strlen(key), NULL, 10);
}

static struct gm_snapshot_event ev0[N_EVENTS], ev1[N_EVENTS / 3];

/* Two devices' traces (build()) in 'snap'. */
static void make_snapshot(struct gm_snapshot *snap, struct gm_snapshot_device *devs)
{
    rng = 88172645463325252u;
    memset(long_meta, 'm', sizeof(long_meta) - 1);
    build(ev0, N_EVENTS);
    build(ev1, N_EVENTS / 3);
    memset(snap, 0, sizeof(*snap));
    memset(devs, 0, 2 * sizeof(*devs));
    devs[0].index = 0;
    devs[0].events = ev0;
    devs[0].n_events = N_EVENTS;
    devs[1].index = 1234567; /* six or more digits: the line start is not the index's key */
    devs[1].events = ev1;
    devs[1].n_events = N_EVENTS / 3;
    for (int i = 0; i < 2; i++)
        devs[i].has_trace = true;
    snap->gen = GM_SNAPSHOT_GEN_G7;
    snap->devices = devs;
    snap->n_devices = 2;
    snap->n_events = devs[0].n_events + devs[1].n_events;
    snap->frames = frames;
    snap->n_frames = sizeof(frames) / sizeof(frames[0]);
    snap->stacks = stacks;
    snap->n_stacks = N_STACKS;
    snap->extras = extras;
    snap->n_extras = N_EXTRAS;
}

/* The trace of 'snap' in 'format' as one string (free()). */
static char *trace_text(const struct gm_snapshot *snap, enum gm_trace_format format)
{
    struct gm_analysis_trace_opts opts = {-1, 0, UINT64_MAX, format};
    struct gm_error err;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(gm_analysis_trace(f, snap, &opts, &err), GM_OK);
    assert_int_equal(fclose(f), 0);
    return buf;
}

/* Every NDJSON event line equals printf of the event with the walk's totals after it, and each
 * stack's frames line comes before the first event that names the stack. */
static void test_ndjson_lines_are_printf_of_the_events(void **state)
{
    struct gm_snapshot snap;
    struct gm_snapshot_device devs[2];
    struct gm_error err;
    char *buf, *line, *save = NULL, want[16384];
    size_t n_lines = 0;
    bool shown[N_STACKS] = {false};
    (void)state;
    make_snapshot(&snap, devs);
    buf = trace_text(&snap, GM_TRACE_NDJSON);
    line = strtok_r(buf, "\n", &save);
    for (size_t di = 0; di < 2; di++) {
        const struct gm_snapshot_device *d = &devs[di];
        struct gm_snapshot_timeline tl;
        struct gm_snapshot_walk w;
        const struct gm_snapshot_event *e;
        assert_int_equal(gm_snapshot_timeline(&snap, d->index, 0, &tl, &err), GM_OK);
        assert_int_equal(gm_snapshot_walk_init(&w, &snap, d, &tl, &err), GM_OK);
        while ((e = gm_snapshot_walk_next(&w)) != NULL) {
            const struct gm_snapshot_event_extra *x =
                e->extra && e->extra <= N_EXTRAS ? &extras[e->extra - 1] : NULL;
            long s;
            /* the frames lines before it */
            for (; line && (s = stack_line(line)) >= 0; line = strtok_r(NULL, "\n", &save)) {
                assert_true(s < N_STACKS);
                assert_false(shown[s]);
                shown[s] = true;
            }
            if (e->stack < N_STACKS)
                assert_true(shown[e->stack]);
            if (x && x->forward_stack)
                assert_true(shown[x->forward_stack]);
            want_line(want, sizeof(want), &snap, d, w.cur.index, e, w.allocated, w.reserved);
            assert_non_null(line);
            if (strcmp(line, want) != 0) {
                fprintf(stderr, "event %zu:\n want %s\n got  %s\n", w.cur.index, want, line);
                fail();
            }
            line = strtok_r(NULL, "\n", &save);
            n_lines++;
        }
        gm_snapshot_walk_release(&w);
        gm_snapshot_timeline_release(&tl);
    }
    assert_null(line);
    assert_int_equal(n_lines, N_EVENTS + N_EVENTS / 3);
    free(buf);
}

/* The column of 'bytes' as gm_format_bytes() makes it, right-aligned in 11. */
static void want_column(char *out, uint64_t bytes)
{
    char b[48];
    snprintf(out, 32, "%11s", gm_format_bytes(b, sizeof(b), bytes, GM_UNITS_IEC));
}

/* The text line printf writes for event k with the total after it, t0 the first time of the
 * device: the index, the seconds since t0, the action, the address, the size and total
 * columns (gm_format_bytes()), then the stream, an OOM's free bytes, a private pool, the
 * extra's metadata and the user frame of the event's stacks. */
static void want_text_line(char *out, size_t room, const struct gm_snapshot *snap, size_t k,
                           const struct gm_snapshot_event *e, uint64_t allocated, int64_t t0)
{
    const struct gm_snapshot_event_extra *x =
        e->extra && e->extra <= snap->n_extras ? &snap->extras[e->extra - 1] : NULL;
    char size[32], total[32], b[48], fr[512], esc[128];
    uint32_t us = gm_snapshot_event_user_stack(snap, e);
    long u = gm_snapshot_stack_user_frame(snap, us);
    size_t n = (size_t)snprintf(out, room, "%7zu ", k);
    if (e->flags & GM_EVENT_HAS_TIME)
        n += (size_t)snprintf(out + n, room - n, "%+12.6fs ",
                              (double)(int64_t)((uint64_t)e->time_us - (uint64_t)t0) / 1e6);
    n += (size_t)snprintf(out + n, room - n, "%-15s ",
                          x && x->action_name
                              ? x->action_name
                              : gm_snapshot_action_name((enum gm_snapshot_action)e->action));
    if (e->action == GM_ACTION_OOM)
        n += (size_t)snprintf(out + n, room - n, "requested        ");
    else
        n += (size_t)snprintf(out + n, room - n, "0x%014" PRIx64 " ", e->addr);
    want_column(size, e->size);
    want_column(total, allocated);
    n += (size_t)snprintf(out + n, room - n, "%s  total %s", size, total);
    if (x && x->stream)
        n += (size_t)snprintf(out + n, room - n, "  stream 0x%" PRIx64, x->stream);
    if (e->action == GM_ACTION_OOM)
        n += (size_t)snprintf(out + n, room - n, "  (%s free in CUDA)",
                              gm_format_bytes(b, sizeof(b), e->addr, GM_UNITS_IEC));
    if (x && (e->flags & GM_EVENT_HAS_POOL_ID) && (x->pool_id[0] || x->pool_id[1]))
        n += (size_t)snprintf(out + n, room - n, "  private pool (%" PRId64 ", %" PRId64 ")",
                              x->pool_id[0], x->pool_id[1]);
    if (x && x->user_metadata && *x->user_metadata)
        n += (size_t)snprintf(out + n, room - n, "  metadata %s",
                              gm_text_escape(esc, 120, x->user_metadata));
    if (x && x->internal_metadata && *x->internal_metadata)
        n += (size_t)snprintf(out + n, room - n, "  internal %s",
                              gm_text_escape(esc, 120, x->internal_metadata));
    if (u >= 0)
        (void)snprintf(
            out + n, room - n, "  %s",
            gm_snapshot_frame_text(fr, sizeof(fr), &snap->frames[snap->stacks[us].frames[u]]));
}

/* Every text event line equals printf of the event with the walk's total after it (the
 * writer keeps the index and whole-seconds columns from the line before, the extra's and
 * frame's texts while stack and extra stay, and ready text of counts and addresses in slots
 * by value). */
static void test_text_lines_are_printf_of_the_events(void **state)
{
    struct gm_snapshot snap;
    struct gm_snapshot_device devs[2];
    struct gm_error err;
    char *buf, *line, *save = NULL, want[4096];
    size_t n_lines = 0;
    (void)state;
    make_snapshot(&snap, devs);
    buf = trace_text(&snap, GM_TRACE_TEXT);
    line = strtok_r(buf, "\n", &save);
    for (size_t di = 0; di < 2; di++) {
        const struct gm_snapshot_device *d = &devs[di];
        struct gm_snapshot_timeline tl;
        struct gm_snapshot_walk w;
        const struct gm_snapshot_event *e;
        int64_t t0 = 0;
        for (size_t i = 0; i < d->n_events; i++)
            if (d->events[i].flags & GM_EVENT_HAS_TIME) {
                t0 = d->events[i].time_us;
                break;
            }
        assert_int_equal(gm_snapshot_timeline(&snap, d->index, 0, &tl, &err), GM_OK);
        assert_int_equal(gm_snapshot_walk_init(&w, &snap, d, &tl, &err), GM_OK);
        assert_non_null(line);
        assert_true(strncmp(line, "device ", 7) == 0); /* the line before the events */
        line = strtok_r(NULL, "\n", &save);
        while ((e = gm_snapshot_walk_next(&w)) != NULL) {
            assert_non_null(line);
            want_text_line(want, sizeof(want), &snap, w.cur.index, e, w.allocated, t0);
            if (strcmp(line, want) != 0) {
                fprintf(stderr, "event %zu:\n want %s\n got  %s\n", w.cur.index, want, line);
                fail();
            }
            line = strtok_r(NULL, "\n", &save);
            n_lines++;
        }
        assert_non_null(line);
        assert_true(strncmp(line, "device ", 7) == 0); /* the line after them */
        line = strtok_r(NULL, "\n", &save);
        gm_snapshot_walk_release(&w);
        gm_snapshot_timeline_release(&tl);
    }
    assert_null(line);
    assert_int_equal(n_lines, N_EVENTS + N_EVENTS / 3);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ndjson_lines_are_printf_of_the_events),
        cmocka_unit_test(test_text_lines_are_printf_of_the_events),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
