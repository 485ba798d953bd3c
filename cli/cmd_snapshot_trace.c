/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_trace.c - gpumem snapshot trace FILE: one line per trace event with the
 * running allocated and reserved totals (--json: NDJSON, one object per line). */
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"

#include "gpumem/units.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void json_event(const struct gm_snapshot *snap, const struct gm_snapshot_device *d, size_t k,
                       const struct gm_snapshot_event *e, const struct gm_snapshot_walk *tl)
{
    const struct gm_snapshot_event_extra *x = gm_snapshot_event_extra_of(snap, e);
    struct gm_json w;
    gm_json_init(&w, stdout, 0);
    gm_json_begin_object(&w);
    gm_json_kv_i64(&w, "device", d->index);
    gm_json_kv_u64(&w, "index", k);
    gm_json_kv_str(&w, "action",
                   x && x->action_name ? x->action_name : gm_snapshot_action_name(e->action));
    if (e->action == GM_ACTION_OOM) {
        gm_json_kv_u64(&w, "device_free", e->addr);
    } else if (e->flags & GM_EVENT_HAS_ADDR) {
        gm_json_kv_u64(&w, "addr", e->addr);
    }
    gm_json_kv_u64(&w, "size", e->size);
    gm_json_kv_u64(&w, "stream", x ? x->stream : 0);
    if (e->flags & GM_EVENT_HAS_TIME)
        gm_json_kv_i64(&w, "time_us", e->time_us);
    else
        gm_json_kv_null(&w, "time_us");
    gm_json_kv_u64(&w, "allocated_bytes", tl->allocated);
    gm_json_kv_u64(&w, "reserved_bytes", tl->reserved);
    if (x && x->compile_context)
        gm_json_kv_str(&w, "compile_context", x->compile_context);
    if (x && x->user_metadata)
        gm_json_kv_str(&w, "user_metadata", x->user_metadata);
    gm_json_key(&w, "frames");
    snapcli_json_stack(&w, snap, e->stack, 0);
    gm_json_end_object(&w);
    gm_json_finish(&w);
}

static void text_event(const struct gm_snapshot *snap, size_t k, const struct gm_snapshot_event *e,
                       const struct gm_snapshot_walk *tl, int64_t t0)
{
    const struct gm_snapshot_event_extra *x = gm_snapshot_event_extra_of(snap, e);
    char sz[48], tot[48], fr[512];
    long u = gm_snapshot_stack_user_frame(snap, e->stack);
    printf("%7zu ", k);
    if (e->flags & GM_EVENT_HAS_TIME)
        printf("%+12.6fs ", (double)(e->time_us - t0) / 1e6);
    printf("%-15s ", x && x->action_name ? snapcli_safe(fr, 32, x->action_name)
                                         : gm_snapshot_action_name(e->action));
    if (e->action == GM_ACTION_OOM)
        printf("%-16s %11s", "requested", gm_format_bytes(sz, sizeof(sz), e->size, GM_UNITS_IEC));
    else
        printf("0x%014" PRIx64 " %11s", e->addr,
               gm_format_bytes(sz, sizeof(sz), e->size, GM_UNITS_IEC));
    printf("  total %11s", gm_format_bytes(tot, sizeof(tot), tl->allocated, GM_UNITS_IEC));
    if (x && x->stream)
        printf("  stream 0x%" PRIx64, x->stream);
    if (e->action == GM_ACTION_OOM)
        printf("  (%s free in CUDA)", gm_format_bytes(sz, sizeof(sz), e->addr, GM_UNITS_IEC));
    if (u >= 0)
        printf("  %s",
               snapcli_frame(fr, sizeof(fr), &snap->frames[snap->stacks[e->stack].frames[u]]));
    printf("\n");
}

int cmd_snapshot_trace(int argc, char **argv)
{
    bool json = false, from_seen = false, to_seen = false;
    uint64_t from = 0, to = UINT64_MAX;
    const char *device = NULL;
    int32_t want = -1;
    int n_pos = 0, rc;
    struct gm_snapshot *snap;
    const struct opt opts[] = {
        OPT_STRING("device", 'd', &device, "N", "only this device (default: all)"),
        OPT_U64("from", 0, &from, "K", "first event index to print (default 0)", &from_seen),
        OPT_U64("to", 0, &to, "K", "last event index to print, inclusive (default: the last)",
                &to_seen),
        OPT_JSON(&json, "NDJSON, one gpumem.snapshot.trace/1 event per line"),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot trace [--device N] [--from K] [--to K] [--json] FILE",
        "Print every trace event: index, time since the first event, action, address, size, "
        "the allocated total after it (Active Memory Timeline semantics: requested bytes), "
        "the stream when not the default one, and the first user frame. --json writes NDJSON "
        "with allocated_bytes and reserved_bytes after each event.",
        "gpumem snapshot trace --device 0 --from 100 --to 200 profile.pkl"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    (void)from_seen;
    (void)to_seen;
    if (n_pos != 1)
        return cli_usage(argv[0], n_pos ? "expected one FILE" : "missing FILE");
    if ((rc = snapcli_device_arg(argv[0], device, &want)) != 0)
        return rc;
    if (from > to)
        return cli_usage(argv[0], "--from %" PRIu64 " is after --to %" PRIu64, from, to);
    if ((rc = snapcli_load(argv[0], argv[1], &snap)) != 0)
        return rc;
    if (want >= 0 && !gm_snapshot_device_by_index(snap, want)) {
        gm_snapshot_free(snap);
        cli_errorf(argv[0], "'%s' has no device %d", argv[1], want);
        return GM_EXIT_USAGE;
    }
    for (size_t i = 0; i < snap->n_devices && rc == 0; i++) {
        const struct gm_snapshot_device *d = &snap->devices[i];
        struct gm_snapshot_timeline tl;
        struct gm_error err;
        int64_t t0 = 0;
        if (want >= 0 && d->index != want)
            continue;
        struct gm_snapshot_walk wk;
        struct gm_snapshot_cursor c;
        const struct gm_snapshot_event *e;
        if (gm_snapshot_timeline(snap, d->index, 0, &tl, &err) != GM_OK ||
            gm_snapshot_walk_init(&wk, snap, d, &tl, &err) != GM_OK) {
            rc = cli_fail(argv[0], &err);
            break;
        }
        gm_snapshot_cursor_init(&c, d, 0);
        while ((e = gm_snapshot_cursor_next(&c)) != NULL)
            if (e->flags & GM_EVENT_HAS_TIME) {
                t0 = e->time_us;
                break;
            }
        if (!json) {
            char a[48];
            printf("device %d: %zu events; allocated at the start %s\n", d->index, d->n_events,
                   gm_format_bytes(a, sizeof(a), tl.initial_bytes, GM_UNITS_IEC));
        }
        while ((e = gm_snapshot_walk_next(&wk)) != NULL && wk.cur.index <= to) {
            size_t k = wk.cur.index;
            if (k < from)
                continue;
            if (json)
                json_event(snap, d, k, e, &wk);
            else
                text_event(snap, k, e, &wk, t0);
        }
        gm_snapshot_walk_release(&wk);
        if (!json) {
            char a[48], b[48];
            printf("device %d: allocated at the end %s, peak %s after event %" PRId64 "\n",
                   d->index, gm_format_bytes(a, sizeof(a), tl.final_bytes, GM_UNITS_IEC),
                   gm_format_bytes(b, sizeof(b), tl.peak_bytes, GM_UNITS_IEC), tl.peak_event_index);
        }
        gm_snapshot_timeline_release(&tl);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_errorf(argv[0], "writing the output failed");
        rc = GM_EXIT_IOERR;
    }
    gm_snapshot_free(snap);
    return rc;
}
