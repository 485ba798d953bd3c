/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_trace.c - gpumem snapshot trace FILE: one line per trace event with the
 * running allocated and reserved totals (--json: NDJSON, one object per line).
 *
 * A trace has millions of events: lines are made in a buffer with gpumem/outbuf.h's own
 * number formatting (printf's cost more than the rest of the command), and what repeats is
 * made once: the frame text of each stack, the extra fields of each interned extra.  With
 * --json a stack's frames are written once, on a line of their own before the first event
 * that has that stack, and events name the stack: the output stays proportional to the
 * file even when thousands of events share one stack of a million frames. */
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"

#include "gpumem/arena.h"
#include "gpumem/outbuf.h"
#include "gpumem/units.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What is made once per extra: its action name (text: made safe; JSON: a JSON string) and,
 * for JSON, its compile_context and user_metadata keys ("" without them). */
struct xtext {
    char *name;
    char *keys;
};

/* A stack's frame text and its length; s NULL: not made yet. */
struct ftext {
    char *s;
    size_t n;
};

/* What is made once per stack and per extra. */
struct cache {
    const struct gm_snapshot *snap;
    struct ftext *frame; /* per stack: "  name (file:line)", "" without a user frame; lazily */
    uint8_t *shown;      /* --json: per stack, its frames line written */
    struct xtext *extra; /* per extra id; lazily */
    bool failed;         /* out of memory */
};

static const struct ftext *frame_text(struct cache *c, uint32_t stack)
{
    static const struct ftext none = {NULL, 0};
    const struct gm_snapshot *snap = c->snap;
    struct ftext *t;
    if (stack >= snap->n_stacks)
        return &none;
    t = &c->frame[stack];
    if (!t->s) {
        char fr[512];
        long u = gm_snapshot_stack_user_frame(snap, stack);
        if (u < 0) {
            fr[0] = '\0';
        } else {
            fr[0] = fr[1] = ' ';
            snapcli_frame(fr + 2, sizeof(fr) - 2, &snap->frames[snap->stacks[stack].frames[u]]);
        }
        t->n = strlen(fr);
        if (!(t->s = gm_malloc(t->n + 1))) {
            c->failed = true;
            return &none;
        }
        memcpy(t->s, fr, t->n + 1);
    }
    return t;
}

/* The JSON of gm_json calls into a string (gm_free): for what is written once. */
static char *json_text(void (*fn)(struct gm_json *w, const void *arg), const void *arg)
{
    char *buf = NULL, *out;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    struct gm_json w;
    if (!mem)
        return NULL;
    gm_json_init(&w, mem, 0);
    fn(&w, arg);
    fclose(mem);
    out = buf ? gm_malloc(len + 1) : NULL;
    if (out) {
        memcpy(out, buf, len);
        out[len] = '\0';
    }
    free(buf);
    return out;
}

static void json_name(struct gm_json *w, const void *arg)
{
    gm_json_str(w, arg);
}

/* {"compile_context": ..., "user_metadata": ...} of an extra: its keys are cut out of it. */
static void json_keys(struct gm_json *w, const void *arg)
{
    const struct gm_snapshot_event_extra *x = arg;
    gm_json_begin_object(w);
    if (x->compile_context)
        gm_json_kv_str(w, "compile_context", x->compile_context);
    if (x->user_metadata)
        gm_json_kv_str(w, "user_metadata", x->user_metadata);
    gm_json_end_object(w);
}

static char *copy(const char *s)
{
    char *d = gm_malloc(strlen(s) + 1);
    if (d)
        memcpy(d, s, strlen(s) + 1);
    return d;
}

static const struct xtext *extra_text(struct cache *c, uint32_t id, bool json)
{
    static const struct xtext none = {NULL, NULL};
    const struct gm_snapshot_event_extra *x = &c->snap->extras[id - 1];
    struct xtext *t = &c->extra[id];
    if (t->keys)
        return t;
    if (json) {
        char *obj = json_text(json_keys, x);
        size_t n = obj ? strlen(obj) : 0;
        if (n >= 2) { /* "{...}" -> "..." */
            memmove(obj, obj + 1, n - 2);
            obj[n - 2] = '\0';
        }
        t->keys = obj;
        t->name = x->action_name ? json_text(json_name, x->action_name) : NULL;
    } else {
        char buf[40];
        t->keys = copy("");
        t->name = copy(snapcli_safe(buf, 32, x->action_name ? x->action_name : ""));
    }
    if (!t->keys || (x->action_name && !t->name)) {
        c->failed = true;
        return &none;
    }
    return t;
}

struct stack_arg {
    const struct gm_snapshot *snap;
    uint32_t stack;
};

static void json_stack_line(struct gm_json *w, const void *arg)
{
    const struct stack_arg *a = arg;
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "stack", a->stack);
    gm_json_key(w, "frames");
    snapcli_json_stack(w, a->snap, a->stack, 0);
    gm_json_end_object(w);
}

static void json_event(struct gm_outbuf *o, struct cache *c, const struct gm_snapshot_device *d,
                       size_t k, const struct gm_snapshot_event *e,
                       const struct gm_snapshot_walk *tl)
{
    const struct gm_snapshot *snap = c->snap;
    const char *name = NULL, *keys = "";
    uint64_t stream = 0;
    char *p;
    if (e->extra && e->extra <= snap->n_extras) {
        const struct xtext *t = extra_text(c, e->extra, true);
        stream = snap->extras[e->extra - 1].stream;
        name = t->name;
        keys = t->keys ? t->keys : "";
    }
    if (e->stack < snap->n_stacks && !c->shown[e->stack]) {
        /* written straight out, never held whole: a stack may have thousands of frames (a
         * write error shows in the stream, reported at the end) */
        struct stack_arg a = {snap, e->stack};
        struct gm_json w;
        c->shown[e->stack] = 1;
        gm_outbuf_flush(o);
        gm_json_init(&w, o->f, 0);
        json_stack_line(&w, &a);
        (void)gm_json_finish(&w);
    }
    /* the names and keys come from the file: written apart, of any length */
    p = gm_outbuf_reserve(o, 128);
    p = gm_fmt_lit(p, "{\"device\":");
    p = gm_fmt_i64(p, d->index);
    p = gm_fmt_lit(p, ",\"index\":");
    p = gm_fmt_u64(p, k, 0);
    p = gm_fmt_lit(p, ",\"action\":");
    if (name) {
        gm_outbuf_commit(o, p);
        gm_outbuf_put(o, name, strlen(name));
        p = gm_outbuf_reserve(o, 320);
    } else {
        const char *an = gm_snapshot_action_name(e->action);
        *p++ = '"';
        p = gm_fmt_str(p, an, strlen(an));
        *p++ = '"';
        gm_outbuf_commit(o, p);
        p = gm_outbuf_reserve(o, 320);
    }
    if (e->action == GM_ACTION_OOM) {
        p = gm_fmt_lit(p, ",\"device_free\":");
        p = gm_fmt_u64(p, e->addr, 0);
    } else if (e->flags & GM_EVENT_HAS_ADDR) {
        p = gm_fmt_lit(p, ",\"addr\":");
        p = gm_fmt_u64(p, e->addr, 0);
    }
    p = gm_fmt_lit(p, ",\"size\":");
    p = gm_fmt_u64(p, e->size, 0);
    p = gm_fmt_lit(p, ",\"stream\":");
    p = gm_fmt_u64(p, stream, 0);
    if (e->flags & GM_EVENT_HAS_TIME) {
        p = gm_fmt_lit(p, ",\"time_us\":");
        p = gm_fmt_i64(p, e->time_us);
    } else {
        p = gm_fmt_lit(p, ",\"time_us\":null");
    }
    p = gm_fmt_lit(p, ",\"allocated_bytes\":");
    p = gm_fmt_u64(p, tl->allocated, 0);
    p = gm_fmt_lit(p, ",\"reserved_bytes\":");
    p = gm_fmt_u64(p, tl->reserved, 0);
    if (*keys) {
        *p++ = ',';
        gm_outbuf_commit(o, p);
        gm_outbuf_put(o, keys, strlen(keys));
        p = gm_outbuf_reserve(o, 64);
    }
    p = gm_fmt_lit(p, ",\"stack\":");
    p = gm_fmt_u64(p, e->stack, 0);
    p = gm_fmt_lit(p, "}\n");
    gm_outbuf_commit(o, p);
}

static void text_event(struct gm_outbuf *o, struct cache *c, size_t k,
                       const struct gm_snapshot_event *e, const struct gm_snapshot_walk *tl,
                       int64_t t0)
{
    const struct gm_snapshot *snap = c->snap;
    const struct gm_snapshot_event_extra *x = gm_snapshot_event_extra_of(snap, e);
    const struct ftext *fr = frame_text(c, e->stack);
    /* every part is bounded: the action name is cut to 31 bytes, the frame to 511 */
    char *p = gm_outbuf_reserve(o, 800);
    const char *an;
    p = gm_fmt_u64(p, k, 7);
    *p++ = ' ';
    if (e->flags & GM_EVENT_HAS_TIME) {
        p = gm_fmt_seconds(p, (int64_t)((uint64_t)e->time_us - (uint64_t)t0), 12);
        p = gm_fmt_lit(p, "s ");
    }
    if (x && x->action_name) {
        const struct xtext *t = extra_text(c, e->extra, false);
        an = t->name ? t->name : "";
    } else {
        an = gm_snapshot_action_name(e->action);
    }
    p = gm_fmt_left(p, an, strlen(an), 15);
    *p++ = ' ';
    if (e->action == GM_ACTION_OOM) {
        p = gm_fmt_lit(p, "requested        ");
    } else {
        p = gm_fmt_lit(p, "0x");
        p = gm_fmt_hex(p, e->addr, 14);
        *p++ = ' ';
    }
    p = gm_fmt_iec(p, e->size, 11);
    p = gm_fmt_lit(p, "  total ");
    p = gm_fmt_iec(p, tl->allocated, 11);
    if (x && x->stream) {
        p = gm_fmt_lit(p, "  stream 0x");
        p = gm_fmt_hex(p, x->stream, 1);
    }
    if (e->action == GM_ACTION_OOM) {
        p = gm_fmt_lit(p, "  (");
        p = gm_fmt_iec(p, e->addr, 0);
        p = gm_fmt_lit(p, " free in CUDA)");
    }
    p = gm_fmt_str(p, fr->s, fr->n);
    *p++ = '\n';
    gm_outbuf_commit(o, p);
}

static void cache_release(struct cache *c)
{
    for (size_t i = 0; c->frame && i < c->snap->n_stacks; i++)
        gm_free(c->frame[i].s);
    for (size_t i = 0; c->extra && i <= c->snap->n_extras; i++) {
        gm_free(c->extra[i].name);
        gm_free(c->extra[i].keys);
    }
    gm_free(c->frame);
    gm_free(c->extra);
    gm_free(c->shown);
}

int cmd_snapshot_trace(int argc, char **argv)
{
    bool json = false, from_seen = false, to_seen = false;
    uint64_t from = 0, to = UINT64_MAX, mem_limit = 0;
    const char *device = NULL;
    int32_t want = -1;
    int n_pos = 0, rc;
    struct gm_snapshot *snap;
    struct gm_outbuf *o;
    struct cache c;
    const struct opt opts[] = {
        OPT_STRING("device", 'd', &device, "N", "only this device (default: all)"),
        OPT_U64("from", 0, &from, "K", "first event index to print (default 0)", &from_seen),
        OPT_U64("to", 0, &to, "K", "last event index to print, inclusive (default: the last)",
                &to_seen),
        OPT_JSON(&json, "NDJSON, one gpumem.snapshot.trace/2 event per line, each stack's "
                        "frames once on a line before its first event"),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot trace [--device N] [--from K] [--to K] [--json] FILE",
        "Print every trace event: index, time since the first event, action, address, size, "
        "the allocated total after it (Active Memory Timeline semantics: requested bytes), "
        "the stream when not the default one, and the first user frame. --json writes NDJSON "
        "with allocated_bytes and reserved_bytes after each event and the event's stack id; "
        "the frames of a stack are written once, as {\"stack\", \"frames\"}, before the first "
        "event that has it.",
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
    struct snapcli_load_opts lo = {mem_limit, false};
    if ((rc = snapcli_load(argv[0], argv[1], &lo, &snap)) != 0)
        return rc;
    if (want >= 0 && !gm_snapshot_device_by_index(snap, want)) {
        gm_snapshot_free(snap);
        cli_errorf(argv[0], "'%s' has no device %d", argv[1], want);
        return GM_EXIT_USAGE;
    }
    memset(&c, 0, sizeof(c));
    c.snap = snap;
    c.frame = gm_calloc(snap->n_stacks + 1, sizeof(*c.frame));
    c.shown = gm_calloc(snap->n_stacks + 1, 1);
    c.extra = gm_calloc(snap->n_extras + 1, sizeof(*c.extra));
    o = gm_malloc(sizeof(*o));
    if (!c.frame || !c.shown || !c.extra || !o) {
        cache_release(&c);
        gm_free(o);
        gm_snapshot_free(snap);
        cli_errorf(argv[0], "out of memory");
        return GM_EXIT_SOFTWARE;
    }
    gm_outbuf_init(o, stdout);
    for (size_t i = 0; i < snap->n_devices && rc == 0; i++) {
        const struct gm_snapshot_device *d = &snap->devices[i];
        struct gm_snapshot_timeline tl;
        struct gm_error err;
        int64_t t0 = 0;
        struct gm_snapshot_walk wk;
        struct gm_snapshot_cursor cur;
        const struct gm_snapshot_event *e;
        if (want >= 0 && d->index != want)
            continue;
        if (gm_snapshot_timeline(snap, d->index, 0, &tl, &err) != GM_OK ||
            gm_snapshot_walk_init(&wk, snap, d, &tl, &err) != GM_OK) {
            rc = cli_fail(argv[0], &err);
            break;
        }
        gm_snapshot_cursor_init(&cur, d, 0);
        while ((e = gm_snapshot_cursor_next(&cur)) != NULL)
            if (e->flags & GM_EVENT_HAS_TIME) {
                t0 = e->time_us;
                break;
            }
        if (!json) {
            char a[48], line[200];
            int n = snprintf(
                line, sizeof(line), "device %d: %zu events; allocated at the start %s\n", d->index,
                d->n_events, gm_format_bytes(a, sizeof(a), tl.initial_bytes, GM_UNITS_IEC));
            gm_outbuf_put(o, line, n > 0 ? (size_t)n : 0);
        }
        while ((e = gm_snapshot_walk_next(&wk)) != NULL && wk.cur.index <= to) {
            size_t k = wk.cur.index;
            if (k < from)
                continue;
            if (json)
                json_event(o, &c, d, k, e, &wk);
            else
                text_event(o, &c, k, e, &wk, t0);
        }
        gm_snapshot_walk_release(&wk);
        if (!json) {
            char a[48], b[48], line[200];
            int n = snprintf(
                line, sizeof(line),
                "device %d: allocated at the end %s, peak %s after event %" PRId64 "\n", d->index,
                gm_format_bytes(a, sizeof(a), tl.final_bytes, GM_UNITS_IEC),
                gm_format_bytes(b, sizeof(b), tl.peak_bytes, GM_UNITS_IEC), tl.peak_event_index);
            gm_outbuf_put(o, line, n > 0 ? (size_t)n : 0);
        }
        gm_snapshot_timeline_release(&tl);
    }
    if (rc == 0 && c.failed) {
        cli_errorf(argv[0], "out of memory");
        rc = GM_EXIT_SOFTWARE;
    }
    if (!gm_outbuf_flush(o) || fflush(stdout) != 0 || ferror(stdout))
        rc = GM_EXIT_IOERR; /* said once, with its errno, by cli_stdout_end() */
    cache_release(&c);
    gm_free(o);
    gm_snapshot_free(snap);
    return rc;
}
