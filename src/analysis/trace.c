/* SPDX-License-Identifier: MIT */
/* trace.c - a snapshot's trace event by event (gm_analysis_trace()): one line per event with
 * the running allocated and reserved totals, as text or as NDJSON.
 *
 * A trace has millions of events: lines are made in a buffer with base/outbuf.h's own
 * number formatting (printf's cost more than the rest of the work), and what repeats is
 * made once: the frame text of each stack, the extra fields of each interned extra.  In
 * NDJSON a stack's frames are written once, on a line of their own before the first event
 * that has that stack, and events name the stack: the output stays proportional to the
 * file even when thousands of events share one stack of a million frames. */
#include "analysis/analysis_int.h"

#include "base/outbuf.h"
#include "snapshot/snapshot_int.h"

#include "gpumem/arena.h"
#include "gpumem/json.h"
#include "gpumem/text.h"
#include "gpumem/units.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What is made once per extra: its action name (text: made safe; JSON: a JSON string) and
 * its metadata: for JSON its compile_context, user_metadata and internal_metadata keys, for
 * text what follows the event's line ("  metadata ...  internal ...", made safe and cut);
 * "" without them. */
struct xtext {
    char *name;
    char *keys;
    size_t n_name, n_keys; /* their lengths */
    char stream[32];       /* JSON: ,"stream":N (at most 10 + 20 bytes) */
    uint8_t n_stream;
};

/* A stack's frame text and its length; s NULL: not made yet. */
struct ftext {
    char *s;
    size_t n;
};

/* The slots of the size, address and allocated total fields (gm_fmt_u64_slot(), and the
 * text columns): 2^n each.  A training loop's few sizes come round again and again; a
 * caching allocator hands out its blocks again at the same addresses, and a steady loop
 * comes back to the same totals at the same point of each step.  A value the same as the
 * line before is found in its slot whatever the size (a third of the totals and addresses:
 * free_requested then free_completed); the rest depends on how many values a step goes
 * through: 4096 slots (256 KiB a field) hold a step of a few thousand events (the synthetic
 * GPT's step of 2,889 events: 96 % of the addresses and 89 % of the totals found; with
 * 1024 slots 90 % and 71 %; on ../shared/testdata/snapshots' PyTorch files 1024 slots find
 * 82-99 % and 67-95 %). */
#define SIZE_BITS  8
#define VALUE_BITS 12

/* A byte count in its text column (gm_fmt_iec(), width 11), kept for the next time the
 * same count comes: a training loop's sizes and totals come round again.  gm_fmt_iec()
 * writes at most 16 + 11 bytes.  Every slot holds a count's text (0's at first). */
#define IEC_BITS 12
#define IEC_ROOM 32
struct iec_text {
    uint64_t v;
    uint8_t n; /* bytes of s */
    char s[IEC_ROOM];
};

/* An address in its text column ("0x%014llx "), kept by value as the JSON addresses are
 * (gm_fmt_u64_slot()); every slot holds an address's text (0's at first). */
#define HEX_ROOM 24 /* "0x", up to 16 digits, ' ' */
struct hex_text {
    uint64_t v;
    uint8_t n; /* bytes of s */
    char s[HEX_ROOM];
};

/* What is made once per stack and per extra. */
struct cache {
    const struct gm_snapshot *snap;
    struct ftext *frame; /* per stack: "  name (file:line)", "" without a user frame; lazily */
    uint8_t *shown;      /* --json: per stack, its frames line written */
    struct xtext *extra; /* per extra id; lazily */
    bool failed;         /* out of memory */
    /* text: each action's name in its column (padded to 15, as gm_fmt_left() pads) */
    char action_col[GM_ACTION_COUNT + 1][32];
    uint8_t n_action_col[GM_ACTION_COUNT + 1];
    struct iec_text *iec; /* text: 2^IEC_BITS byte counts in their column */
    struct hex_text *hex; /* text: 2^VALUE_BITS addresses in their column */
};

/* gm_fmt_iec(p, v, 11) by way of the slot of v. */
static inline char *put_iec(struct cache *c, char *p, uint64_t v)
{
    struct iec_text *t = &c->iec[(v * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - IEC_BITS)];
    if (t->v != v) {
        t->n = (uint8_t)(gm_fmt_iec(t->s, v, 11) - t->s);
        t->v = v;
    }
    memcpy(p, t->s, IEC_ROOM);
    return p + t->n;
}

/* "0x%014llx " of v by way of the slot of v. */
static inline char *put_hex(struct cache *c, char *p, uint64_t v)
{
    struct hex_text *t = &c->hex[(v * UINT64_C(0x9E3779B97F4A7C15)) >> (64 - VALUE_BITS)];
    if (t->v != v) {
        char *q = gm_fmt_hex(gm_fmt_lit(t->s, "0x"), v, 14);
        *q++ = ' ';
        t->n = (uint8_t)(q - t->s);
        t->v = v;
    }
    memcpy(p, t->s, HEX_ROOM);
    return p + t->n;
}

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
            gm_snapshot_frame_text(fr + 2, sizeof(fr) - 2,
                                   &snap->frames[snap->stacks[stack].frames[u]]);
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

/* Bytes after the end of each JSON text of the cache (zeros): a text no longer than this is
 * copied into a line in one move of this many bytes (the line's room holds them). */
#define TEXT_TAIL 32

/* The JSON of gm_json calls into a string (gm_free), TEXT_TAIL bytes of zeros after it: for
 * what is written once. */
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
    out = buf ? gm_malloc(len + 1 + TEXT_TAIL) : NULL;
    if (out) {
        memcpy(out, buf, len);
        memset(out + len, 0, 1 + TEXT_TAIL);
    }
    free(buf);
    return out;
}

static char *copy(const char *s)
{
    char *d = gm_malloc(strlen(s) + 1);
    if (d)
        memcpy(d, s, strlen(s) + 1);
    return d;
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
    if (x->internal_metadata)
        gm_json_kv_str(w, "internal_metadata", x->internal_metadata);
    gm_json_end_object(w);
}

/* The text of an extra's metadata after an event's line: user_metadata when not empty (a
 * string, JSON or not, shown as written, made safe and cut to 120 bytes) and
 * internal_metadata. */
static char *text_keys(const struct gm_snapshot_event_extra *x)
{
    char buf[400], esc[128];
    size_t n = 0;
    buf[0] = '\0';
    if (x->user_metadata && *x->user_metadata)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "  metadata %s",
                              gm_text_escape(esc, 120, x->user_metadata));
    if (x->internal_metadata && *x->internal_metadata && n < sizeof(buf))
        (void)snprintf(buf + n, sizeof(buf) - n, "  internal %s",
                       gm_text_escape(esc, 120, x->internal_metadata));
    return copy(buf);
}

static const struct xtext *extra_text(struct cache *c, uint32_t id, bool json)
{
    static const struct xtext none = {NULL, NULL, 0, 0, ",\"stream\":0", 11};
    const struct gm_snapshot_event_extra *x = &c->snap->extras[id - 1];
    struct xtext *t = &c->extra[id];
    if (t->keys)
        return t;
    if (json) {
        char *obj = json_text(json_keys, x);
        size_t n = obj ? strlen(obj) : 0;
        if (n >= 2) { /* "{...}" -> "..." (the zeros after it move too) */
            memmove(obj, obj + 1, n - 2);
            memset(obj + n - 2, 0, 2);
        }
        t->keys = obj;
        t->n_stream = (uint8_t)(gm_fmt_u64_room(gm_fmt_lit(t->stream, ",\"stream\":"), x->stream) -
                                t->stream);
        t->name = x->action_name ? json_text(json_name, x->action_name) : NULL;
        t->n_keys = obj ? strlen(obj) : 0;
        t->n_name = t->name ? strlen(t->name) : 0;
    } else {
        char buf[40];
        t->keys = text_keys(x);
        t->name = copy(gm_text_escape(buf, 32, x->action_name ? x->action_name : ""));
        t->n_keys = t->keys ? strlen(t->keys) : 0;
        t->n_name = t->name ? strlen(t->name) : 0;
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
    ana_json_stack(w, a->snap, a->stack);
    gm_json_end_object(w);
}

/* The {"stack", "frames"} line of 'stack' before the first event that names it. */
static void write_stack(struct gm_outbuf *o, struct cache *c, uint32_t stack)
{
    {
        /* written straight out, never held whole: a stack may have thousands of frames (a
         * write error shows in the stream, reported at the end) */
        struct stack_arg a = {c->snap, stack};
        struct gm_json w;
        c->shown[stack] = 1;
        gm_outbuf_flush(o);
        gm_json_init(&w, o->f, 0);
        json_stack_line(&w, &a);
        (void)gm_json_finish(&w);
    }
}

static inline const struct xtext *extra_of(struct cache *c, uint32_t id, bool json)
{
    return c->extra[id].keys ? &c->extra[id] : extra_text(c, id, json);
}

static inline void show_stack(struct gm_outbuf *o, struct cache *c, uint32_t stack)
{
    if (stack < c->snap->n_stacks && !c->shown[stack])
        write_stack(o, c, stack);
}

/* The end of an NDJSON line from its reserved bytes on ({"reserved_bytes"[, "pool_id"], the
 * extra's keys, "stack"[, "forward_stack"]}): the same for runs of events (one stack, one
 * extra, the reserved total unchanged), so it is kept as text and copied whole while they
 * stay the same; one longer than TAIL_MAX is made anew each time. */
#define TAIL_MAX   128
#define TAIL_SHORT 80 /* a tail this long or shorter is copied in a move of this many bytes */
struct json_tail {
    /* the stack and extra (gm_snapshot_event.stack and .extra as one word: stack_extra()),
     * the reserved total and the event's GM_EVENT_HAS_POOL_ID (with the extra: "pool_id"
     * or not) s was made for; pool TAIL_NONE: s holds none */
    uint64_t stack_extra;
    uint64_t reserved;
    uint8_t pool;
    uint8_t n; /* bytes of s */
    char s[TAIL_MAX];
};
#define TAIL_NONE 0xff /* no GM_EVENT_HAS_POOL_ID bit pattern */

/* The stack and extra of an event as one word (equal words: equal fields; the two fields are
 * neighbours in the event, read with one load). */
static inline uint64_t stack_extra(const struct gm_snapshot_event *e)
{
    uint64_t w;
    _Static_assert(offsetof(struct gm_snapshot_event, extra) ==
                       offsetof(struct gm_snapshot_event, stack) + 4,
                   "stack and extra are one word");
    memcpy(&w, &e->stack, 8);
    return w;
}

/* The ,"addr":A,"size":S text of an event with an address (not an oom), kept by the pair
 * in the slot it hashes to: a caching allocator hands out a block again at the same
 * address for the same size, and a free repeats its alloc's pair (95 % of the pairs of the
 * 30 MB synthetic file found in 4096 slots; the address alone 96 %).  One slot is 64
 * bytes, a pair's text at most PAIR_TEXT of them (a longer one is never kept); every slot
 * holds a pair and its text (0 and 0 at first). */
#define PAIR_TEXT 47
struct pair_slot {
    uint64_t addr, size;
    char s[PAIR_TEXT + 1]; /* the text; its length in the last byte (copied with it) */
};

/* The slot of the pair (addr, size) among 2^VALUE_BITS. */
static inline size_t pair_slot_of(uint64_t addr, uint64_t size)
{
    return (size_t)(((addr + size * UINT64_C(0xC2B2AE3D27D4EB4F)) * UINT64_C(0x9E3779B97F4A7C15)) >>
                    (64 - VALUE_BITS));
}

/* What the NDJSON lines of one device repeat: the start of every line, each action's name
 * as a JSON string, and the digits each number field wrote last (gm_fmt_u64_memo). */
struct json_line {
    char head[32]; /* {"device":N,"index": (N an int32_t: at most 32 bytes) */
    size_t n_head;
    size_t n_device; /* bytes of its {"device":N */
    /* the index memo's key is the head (when the head with every index of the device fits
     * GM_FMT_SHORT_ROOM bytes: all but traces of a billion events), else ,"index": after
     * the head's {"device":N */
    bool index_has_head;
    /* the stack and extra of the line before (stack_extra()); UINT64_MAX before the first
     * line, which no event has: stack UINT32_MAX is past the last stack and extra
     * UINT32_MAX past the last extra (intern.c keeps both counts below) */
    uint64_t last_se;
    /* the extra of the line before (UINT64_MAX before the first line), and what is made of
     * it: its action name (NULL: the action's own) and its ,"stream":N text */
    uint64_t extra_id;
    const struct gm_snapshot_event_extra *x;
    const struct xtext *t;
    const char *name;
    size_t n_name;
    const char *stream;
    size_t n_stream;
    /* ,"action":"name" of each action, the last: "other" */
    char action[GM_ACTION_COUNT + 1][32];
    uint8_t n_action[GM_ACTION_COUNT + 1];
    /* each number field with its key before it (",\"size\":"); the index's key is the
     * head when it fits one (index_has_head), else none */
    struct gm_fmt_memo index, addr, device_free, size, time, allocated, reserved, stack, fwd;
    struct json_tail tail;
    /* the texts of sizes, addresses and allocated totals, by value */
    struct gm_fmt_slot size_slot[1u << SIZE_BITS];
    struct gm_fmt_slot addr_slot[1u << VALUE_BITS], allocated_slot[1u << VALUE_BITS];
    struct pair_slot pair[1u << VALUE_BITS];
};

/* ,"stream":0: the stream of an event without an extra (TEXT_TAIL bytes readable). */
static const char stream_0[TEXT_TAIL] = ",\"stream\":0";

/* Room for one line's own fields (each number GM_FMT_MEMO_ROOM), the longest name or keys
 * text of an extra copied into the line's room rather than put through the buffer, and the
 * room reserved for a line: its fields and two such texts. */
#define LINE_ROOM    640
#define SHORT_TEXT   4096
#define LINE_RESERVE (LINE_ROOM + 2 * SHORT_TEXT)

/* put_text() of a text longer than TEXT_TAIL. */
static char *put_long_text(struct gm_outbuf *o, char *p, const char *s, size_t n)
{
    if (n <= SHORT_TEXT)
        return gm_fmt_str(p, s, n);
    gm_outbuf_commit(o, p);
    gm_outbuf_put(o, s, n);
    return gm_outbuf_reserve(o, LINE_RESERVE);
}

/* 's' (n bytes, a text of the cache) at p: in the room reserved for the line when short,
 * else through the buffer (then a line's room is reserved again). */
static inline char *put_text(struct gm_outbuf *o, char *p, const char *s, size_t n)
{
    if (n <= TEXT_TAIL) {
        memcpy(p, s, TEXT_TAIL); /* TEXT_TAIL bytes are readable past it */
        return p + n;
    }
    return put_long_text(o, p, s, n);
}

/* The memos of a line and their keys, each of GM_FMT_KEY_MIN to GM_FMT_KEY_MAX bytes (the
 * static assertion below: gm_fmt_memo_init() refuses any other). */
#define JSON_MEMOS(X)                                                                              \
    X(index, ",\"index\":")                                                                        \
    X(addr, ",\"addr\":")                                                                          \
    X(device_free, ",\"device_free\":")                                                            \
    X(size, ",\"size\":")                                                                          \
    X(time, ",\"time_us\":")                                                                       \
    X(allocated, ",\"allocated_bytes\":")                                                          \
    X(reserved, ",\"reserved_bytes\":")                                                            \
    X(stack, ",\"stack\":")                                                                        \
    X(fwd, ",\"forward_stack\":")
#define JSON_MEMO_KEY_FITS(field, key)                                                             \
    _Static_assert(sizeof(key) - 1 >= GM_FMT_KEY_MIN && sizeof(key) - 1 <= GM_FMT_KEY_MAX,         \
                   "the key of " #field " fits a memo");
JSON_MEMOS(JSON_MEMO_KEY_FITS)

/* Whether gm_fmt_memo_init() takes every key of JSON_MEMOS (it does, by the assertion above:
 * checked once per trace, so that json_line_init() need not, its caller's hot loop left as
 * it was: a check there cost 25 k to 50 k more instructions of the 30 MB file's trace). */
static bool json_keys_fit(void)
{
    struct gm_fmt_memo m;
#define JSON_MEMO_TAKES(field, key)                                                                \
    if (!gm_fmt_memo_init(&m, key))                                                                \
        return false;
    JSON_MEMOS(JSON_MEMO_TAKES)
#undef JSON_MEMO_TAKES
    return true;
}

/* The line state of device d (its memos' keys checked by json_keys_fit()). */
static void json_line_init(struct json_line *jl, const struct gm_snapshot_device *d)
{
    char *p;
    size_t n_digits = 1; /* of the device's last index */
#define JSON_MEMO_ENTRY(field, key) {&jl->field, key},
    const struct {
        struct gm_fmt_memo *m;
        const char *key;
    } memos[] = {JSON_MEMOS(JSON_MEMO_ENTRY)};
#undef JSON_MEMO_ENTRY
    /* the fields written by the short copies (gm_fmt_u64_memo_short, _slot_short) */
    _Static_assert(sizeof(",\"addr\":") - 1 <= GM_FMT_SHORT_KEY &&
                       sizeof(",\"size\":") - 1 <= GM_FMT_SHORT_KEY &&
                       sizeof(",\"time_us\":") - 1 <= GM_FMT_SHORT_KEY &&
                       sizeof(",\"stack\":") - 1 <= GM_FMT_SHORT_KEY,
                   "the short keys fit GM_FMT_SHORT_KEY");
    memset(jl, 0, sizeof(*jl));
    jl->last_se = UINT64_MAX;
    jl->extra_id = UINT64_MAX;
    jl->stream = stream_0;
    jl->n_stream = sizeof(",\"stream\":0") - 1;
    jl->tail.pool = TAIL_NONE;
    for (size_t i = 0; i < sizeof(memos) / sizeof(memos[0]); i++)
        (void)gm_fmt_memo_init(memos[i].m, memos[i].key); /* json_keys_fit() */
    gm_fmt_slots_init(jl->size_slot, 1u << SIZE_BITS, &jl->size);
    gm_fmt_slots_init(jl->addr_slot, 1u << VALUE_BITS, &jl->addr);
    gm_fmt_slots_init(jl->allocated_slot, 1u << VALUE_BITS, &jl->allocated);
    {
        /* the pair (0, 0) in every slot, made by the field's own writers */
        char first[2 * GM_FMT_MEMO_ROOM] = {0}; /* (what is copied past the text: defined) */
        char *q = gm_fmt_u64_slot_short(first, 0, jl->addr_slot, VALUE_BITS, &jl->addr);
        q = gm_fmt_u64_slot_short(q, 0, jl->size_slot, SIZE_BITS, &jl->size);
        for (size_t i = 0; i < (size_t)1 << VALUE_BITS; i++) {
            memcpy(jl->pair[i].s, first, PAIR_TEXT);
            jl->pair[i].s[PAIR_TEXT] = (char)(q - first);
        }
    }
    p = gm_fmt_lit(jl->head, "{\"device\":");
    p = gm_fmt_i64(p, d->index);
    jl->n_device = (size_t)(p - jl->head);
    p = gm_fmt_lit(p, ",\"index\":");
    jl->n_head = (size_t)(p - jl->head);
    /* the start of the line as the index's key, where it fits a short copy with every index */
    for (uint64_t last = d->n_events ? d->n_events - 1 : 0; last >= 10; last /= 10)
        n_digits++;
    if (jl->n_head + n_digits <= GM_FMT_SHORT_ROOM) {
        *p = '\0'; /* a key of more than GM_FMT_KEY_MAX bytes refused: the keyless route */
        jl->index_has_head = gm_fmt_memo_init(&jl->index, jl->head);
    }
    for (unsigned a = 0; a <= GM_ACTION_COUNT; a++) {
        const char *an = gm_snapshot_action_name((enum gm_snapshot_action)a);
        size_t n = strlen(an);
        char *q = gm_fmt_lit(jl->action[a], ",\"action\":\"");
        if (n > sizeof(jl->action[a]) - 12)
            n = sizeof(jl->action[a]) - 12;
        q = gm_fmt_str(q, an, n);
        *q++ = '"';
        jl->n_action[a] = (uint8_t)(q - jl->action[a]);
    }
}

/* The ,"addr":A,"size":S text of a pair not in its slot, at p, made by way of the fields'
 * own slots and memos, and kept in slot t when it fits; the end of the text.  Made aside
 * and copied to both places (a copy out of the line's bytes just written would wait for
 * their stores). */
static char *pair_miss(struct json_line *jl, struct pair_slot *t, char *p, uint64_t addr,
                       uint64_t size)
{
    char made[2 * GM_FMT_MEMO_ROOM + 16] = {0}; /* (what is copied past the text: defined) */
    char *q = gm_fmt_u64_slot_short(made, addr, jl->addr_slot, VALUE_BITS, &jl->addr);
    size_t n;
    q = gm_fmt_u64_slot_short(q, size, jl->size_slot, SIZE_BITS, &jl->size);
    n = (size_t)(q - made);
    memcpy(p, made, 2 * GM_FMT_SHORT_ROOM); /* the two fields' copies: at most 64 bytes */
    if (n <= PAIR_TEXT) {
        t->addr = addr;
        t->size = size;
        memcpy(t->s, made, PAIR_TEXT);
        t->s[PAIR_TEXT] = (char)n;
    }
    return p + n;
}

/* The row of an event's action in the per-action tables (action_col, jl->action): its
 * own, or the last ("other") for an action the library does not know. */
static inline unsigned action_slot(unsigned a)
{
    return a < GM_ACTION_COUNT ? a : GM_ACTION_COUNT;
}

/* One event's line, written at p, the end of what o holds (not committed: the caller keeps
 * the position from line to line and commits it); returns the end of the line.
 * head_in_index: jl->index_has_head (a constant where this is inlined, so that the loop of
 * each case tests nothing for it). */
static GM_INLINE_ALWAYS char *json_event(struct gm_outbuf *o, struct cache *c, struct json_line *jl,
                                         size_t k, const struct gm_snapshot_event *e,
                                         const struct snap_walk_totals *tl, bool head_in_index,
                                         char *p)
{
    const struct gm_snapshot *snap = c->snap;
    const struct gm_snapshot_event_extra *x;
    const struct xtext *t;
    struct json_tail *tc = &jl->tail;
    uint64_t se = stack_extra(e);
    char *tail;
    /* runs of events share their stack and extra: a change of either is looked at once a
     * run (the state before the first line is that of no extra, with a word no event has) */
    if (GM_UNLIKELY(se != jl->last_se)) {
        gm_outbuf_commit(o, p); /* a frames line goes out through o */
        if (e->extra != jl->extra_id) {
            jl->x = NULL;
            jl->t = NULL;
            jl->name = NULL;
            jl->stream = stream_0;
            jl->n_stream = sizeof(",\"stream\":0") - 1;
            if (e->extra && e->extra <= snap->n_extras) {
                jl->x = &snap->extras[e->extra - 1];
                jl->t = extra_of(c, e->extra, true);
                jl->name = jl->t->name;
                jl->n_name = jl->t->n_name;
                jl->stream = jl->t->stream;
                jl->n_stream = jl->t->n_stream;
            }
            jl->extra_id = e->extra;
        }
        /* the frames lines of the stack and extra of the line before are written already:
         * skipping show_stack() is only a shortcut (it writes a stack's frames line once,
         * and its "already shown" marks are never reset) */
        show_stack(o, c, e->stack);
        if (jl->x)
            show_stack(o, c, jl->x->forward_stack);
        jl->last_se = se;
        p = o->buf + o->n;
    }
    /* the names and keys come from the file, of any length: the short ones in the line's
     * room */
    if (GM_UNLIKELY(p > o->buf + (GM_OUTBUF_SIZE - LINE_RESERVE))) {
        gm_outbuf_commit(o, p);
        p = gm_outbuf_reserve(o, LINE_RESERVE);
    }
    if (head_in_index) {
        p = gm_fmt_u64_memo_next_copy(p, k, &jl->index, GM_FMT_SHORT_ROOM);
    } else {
        memcpy(p, jl->head, sizeof(jl->head));
        p += jl->n_device;
        p = gm_fmt_u64_memo_next(p, k, &jl->index);
    }
    if (jl->name) {
        p = gm_fmt_lit(p, ",\"action\":");
        p = put_text(o, p, jl->name, jl->n_name);
    } else {
        unsigned a = action_slot(e->action);
        memcpy(p, jl->action[a], sizeof(jl->action[a]));
        p += jl->n_action[a];
    }
    if (GM_LIKELY(e->action != GM_ACTION_OOM && (e->flags & GM_EVENT_HAS_ADDR))) {
        struct pair_slot *ps = &jl->pair[pair_slot_of(e->addr, e->size)];
        if (GM_LIKELY(ps->addr == e->addr && ps->size == e->size)) {
            memcpy(p, ps->s, PAIR_TEXT + 1);
            p += (uint8_t)ps->s[PAIR_TEXT];
        } else {
            p = pair_miss(jl, ps, p, e->addr, e->size);
        }
    } else {
        if (e->action == GM_ACTION_OOM)
            p = gm_fmt_u64_memo(p, e->addr, &jl->device_free);
        p = gm_fmt_u64_slot_short(p, e->size, jl->size_slot, SIZE_BITS, &jl->size);
    }
    memcpy(p, jl->stream, TEXT_TAIL);
    p += jl->n_stream;
    if (!(e->flags & GM_EVENT_HAS_TIME)) {
        p = gm_fmt_lit(p, ",\"time_us\":null");
    } else if (e->time_us >= 0) {
        p = gm_fmt_u64_memo_short(p, (uint64_t)e->time_us, &jl->time);
    } else {
        p = gm_fmt_lit(p, ",\"time_us\":");
        p = gm_fmt_i64(p, e->time_us);
    }
    p = gm_fmt_u64_slot(p, tl->allocated, jl->allocated_slot, VALUE_BITS, &jl->allocated);
    if (se == tc->stack_extra && tl->reserved == tc->reserved &&
        (e->flags & GM_EVENT_HAS_POOL_ID) == tc->pool) {
        if (tc->n <= TAIL_SHORT)
            memcpy(p, tc->s, TAIL_SHORT);
        else
            memcpy(p, tc->s, TAIL_MAX);
        return p + tc->n;
    }
    /* the kept line end: everything written from here to the line's end must depend only on
     * the key compared above (stack, extra, reserved total, pool flag); a field that depends on
     * anything else goes before this point, or into that key */
    tail = p;
    x = jl->x;
    t = jl->t;
    p = gm_fmt_u64_memo(p, tl->reserved, &jl->reserved);
    if ((e->flags & GM_EVENT_HAS_POOL_ID) && x) {
        p = gm_fmt_lit(p, ",\"pool_id\":[");
        p = gm_fmt_i64(p, x->pool_id[0]);
        *p++ = ',';
        p = gm_fmt_i64(p, x->pool_id[1]);
        *p++ = ']';
    }
    tc->pool = TAIL_NONE;
    if (t && t->n_keys) {
        if (t->n_keys > TAIL_MAX)
            tail = NULL; /* put_text() may move the line */
        *p++ = ',';
        p = put_text(o, p, t->keys, t->n_keys);
    }
    p = gm_fmt_u64_memo_short(p, e->stack, &jl->stack);
    if (x && x->forward_stack)
        p = gm_fmt_u64_memo(p, x->forward_stack, &jl->fwd);
    p = gm_fmt_lit(p, "}\n");
    if (tail && p - tail <= TAIL_MAX) {
        tc->pool = e->flags & GM_EVENT_HAS_POOL_ID;
        tc->stack_extra = se;
        tc->reserved = tl->reserved;
        tc->n = (uint8_t)(p - tail);
        memcpy(tc->s, tail, tc->n);
    }
    return p;
}

/* What the text lines of one device repeat: what is made of the stack and extra of the
 * line before, the index column of the line before and the seconds column's whole
 * seconds. */
struct text_line {
    /* the stack and extra of the line before (stack_extra()); UINT64_MAX before the first
     * line, which no event has (as json_line.last_se) */
    uint64_t last_se;
    const struct gm_snapshot_event_extra *x; /* its extra, or NULL */
    const struct xtext *t;                   /* the extra's texts (with x) */
    const struct ftext *fr;                  /* the text of its user frame */
    /* the index column ("%7llu") of index k */
    uint64_t k;
    uint8_t n_k;
    char k_s[64]; /* gm_fmt_u64()'s room past the column */
    /* the seconds column ("%+12.6f") up to its point of the whole seconds sec (UINT64_MAX:
     * none yet) */
    uint64_t sec;
    uint8_t n_sec;
    char sec_s[64]; /* gm_fmt_seconds()'s room past the column */
};

static void text_line_init(struct text_line *tl)
{
    memset(tl, 0, sizeof(*tl));
    tl->last_se = UINT64_MAX;
    tl->n_k = (uint8_t)(gm_fmt_u64(tl->k_s, 0, 7) - tl->k_s); /* index 0 */
    tl->sec = UINT64_MAX;
}

/* The room of a text line: every part is bounded (the action name is cut to 31 bytes, the
 * frame to 511, the metadata to 2 x 127). */
#define TEXT_LINE_ROOM 1200

/* One event's text line at p, the end of what o holds (not committed, as json_event()); the
 * end of the line. */
static GM_INLINE_ALWAYS char *text_event(struct gm_outbuf *o, struct cache *c, struct text_line *tl,
                                         size_t k, const struct gm_snapshot_event *e,
                                         const struct snap_walk_totals *tot, int64_t t0, char *p)
{
    const struct gm_snapshot *snap = c->snap;
    const struct gm_snapshot_event_extra *x;
    uint64_t se = stack_extra(e);
    if (GM_UNLIKELY(se != tl->last_se)) {
        /* the extra and the user frame depend on the stack and extra alone */
        tl->x = gm_snapshot_event_extra_of(snap, e);
        tl->t = tl->x ? extra_of(c, e->extra, false) : NULL;
        tl->fr = frame_text(c, gm_snapshot_event_user_stack(snap, e));
        tl->last_se = se;
    }
    x = tl->x;
    if (GM_UNLIKELY(p > o->buf + (GM_OUTBUF_SIZE - TEXT_LINE_ROOM))) {
        gm_outbuf_commit(o, p);
        p = gm_outbuf_reserve(o, TEXT_LINE_ROOM);
    }
    /* the index: one more than the line before is its last digit's step (no carry) */
    if (k != tl->k) {
        if (k - tl->k == 1 && k && tl->k_s[tl->n_k - 1] != '9')
            tl->k_s[tl->n_k - 1]++;
        else
            tl->n_k = (uint8_t)(gm_fmt_u64(tl->k_s, k, 7) - tl->k_s);
        tl->k = k;
    }
    memcpy(p, tl->k_s, 32); /* at most 20 digits */
    p += tl->n_k;
    *p++ = ' ';
    if (e->flags & GM_EVENT_HAS_TIME) {
        uint64_t us = (uint64_t)e->time_us - (uint64_t)t0;
        if (us < ((uint64_t)1 << 52)) {
            /* gm_fmt_seconds(): the column up to the point depends on the whole seconds
             * alone, then the six decimals */
            uint64_t sec = us / 1000000u;
            if (sec != tl->sec) {
                tl->n_sec = (uint8_t)(gm_fmt_seconds(tl->sec_s, (int64_t)(sec * 1000000u), 12) -
                                      tl->sec_s - 6);
                tl->sec = sec;
            }
            memcpy(p, tl->sec_s, 32); /* the sign, at most 10 digits, the point */
            p += tl->n_sec;
            gm_store64(p, (gm_digits8((uint32_t)(us - sec * 1000000u)) | GM_ASCII_ZEROS) >> 16);
            p += 6;
        } else {
            p = gm_fmt_seconds(p, (int64_t)us, 12);
        }
        p = gm_fmt_lit(p, "s ");
    }
    if (x && x->action_name) {
        const struct xtext *t = tl->t;
        p = t->name ? gm_fmt_left(p, t->name, t->n_name, 15) : gm_fmt_left(p, "", 0, 15);
    } else {
        unsigned a = action_slot(e->action);
        memcpy(p, c->action_col[a], sizeof(c->action_col[a]));
        p += c->n_action_col[a];
    }
    *p++ = ' ';
    if (e->action == GM_ACTION_OOM)
        p = gm_fmt_lit(p, "requested        ");
    else
        p = put_hex(c, p, e->addr);
    p = put_iec(c, p, e->size);
    p = gm_fmt_lit(p, "  total ");
    p = put_iec(c, p, tot->allocated);
    if (x && x->stream) {
        p = gm_fmt_lit(p, "  stream 0x");
        p = gm_fmt_hex(p, x->stream, 1);
    }
    if (e->action == GM_ACTION_OOM) {
        p = gm_fmt_lit(p, "  (");
        p = gm_fmt_iec(p, e->addr, 0);
        if (snap->device_kind == GM_DEVICE_XPU)
            p = gm_fmt_lit(p, " free in XPU)");
        else
            p = gm_fmt_lit(p, " free in CUDA)");
    }
    if (x && (e->flags & GM_EVENT_HAS_POOL_ID) && (x->pool_id[0] || x->pool_id[1])) {
        p = gm_fmt_lit(p, "  private pool (");
        p = gm_fmt_i64(p, x->pool_id[0]);
        p = gm_fmt_lit(p, ", ");
        p = gm_fmt_i64(p, x->pool_id[1]);
        *p++ = ')';
    }
    if (x && tl->t->keys)
        p = gm_fmt_str(p, tl->t->keys, tl->t->n_keys);
    if (tl->fr->n) /* a stack past the last one has no text (and no pointer to copy from) */
        p = gm_fmt_str(p, tl->fr->s, tl->fr->n);
    *p++ = '\n';
    return p;
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
    gm_free(c->iec);
    gm_free(c->hex);
}

/* The text columns' slots, each holding 0's text. */
static bool text_slots_init(struct cache *c)
{
    c->iec = gm_malloc(((size_t)1 << IEC_BITS) * sizeof(*c->iec));
    c->hex = gm_malloc(((size_t)1 << VALUE_BITS) * sizeof(*c->hex));
    if (!c->iec || !c->hex)
        return false;
    for (size_t i = 0; i < (size_t)1 << IEC_BITS; i++) {
        c->iec[i].v = 0;
        c->iec[i].n = (uint8_t)(gm_fmt_iec(c->iec[i].s, 0, 11) - c->iec[i].s);
    }
    for (size_t i = 0; i < (size_t)1 << VALUE_BITS; i++) {
        char *q = gm_fmt_hex(gm_fmt_lit(c->hex[i].s, "0x"), 0, 14);
        *q++ = ' ';
        c->hex[i].v = 0;
        c->hex[i].n = (uint8_t)(q - c->hex[i].s);
    }
    return true;
}

/* One device: a line before and after its events in text. */
static enum gm_status trace_device(struct gm_outbuf *o, struct cache *c,
                                   const struct gm_snapshot_device *d,
                                   const struct gm_analysis_trace_opts *opts, struct gm_error *err)
{
    const struct gm_snapshot *snap = c->snap;
    bool json = opts->format == GM_TRACE_NDJSON;
    struct gm_snapshot_timeline tl;
    struct gm_snapshot_walk wk;
    struct gm_snapshot_cursor cur;
    const struct gm_snapshot_event *e;
    struct json_line *jl = NULL;
    struct text_line txt;
    int64_t t0 = 0;
    size_t n_batch;
    bool past_to = false;
    enum gm_status st;
    struct snap_walk_totals after[GM_SNAPSHOT_CURSOR_BATCH];
    if (json) {
        if (!(jl = gm_malloc(sizeof(*jl))))
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "trace: out of memory");
        json_line_init(jl, d);
    }
    text_line_init(&txt);
    if ((st = gm_snapshot_timeline(snap, d->index, 0, &tl, err)) != GM_OK) {
        gm_free(jl);
        return st;
    }
    if ((st = gm_snapshot_walk_init(&wk, snap, d, &tl, err)) != GM_OK) {
        gm_snapshot_timeline_release(&tl);
        gm_free(jl);
        return st;
    }
    gm_snapshot_cursor_init(&cur, d, 0);
    while ((e = gm_snapshot_cursor_next(&cur)) != NULL)
        if (e->flags & GM_EVENT_HAS_TIME) {
            t0 = e->time_us;
            break;
        }
    if (!json) {
        char a[48], line[200];
        int n = snprintf(line, sizeof(line), "device %d: %zu events; allocated at the start %s\n",
                         d->index, d->n_events,
                         gm_format_bytes(a, sizeof(a), tl.initial_bytes, GM_UNITS_IEC));
        gm_outbuf_put(o, line, n > 0 ? (size_t)n : 0);
    }
    /* a batch at a time, its events [k0, k0 + n) cut to [from, to] */
    while (!past_to && (n_batch = snap_walk_batch(&wk, &e, after)) > 0) {
        size_t n = n_batch, k0 = wk.cur.index + 1 - n, i = 0;
        if (k0 + n - 1 > opts->to) {
            n = opts->to >= k0 ? (size_t)(opts->to - k0) + 1 : 0;
            past_to = true;
        }
        if (k0 < opts->from)
            i = opts->from - k0 < n ? (size_t)(opts->from - k0) : n;
        if (json) {
            char *p = o->buf + o->n;
            if (jl->index_has_head)
                for (; i < n; i++)
                    p = json_event(o, c, jl, k0 + i, &e[i], &after[i], true, p);
            else
                for (; i < n; i++)
                    p = json_event(o, c, jl, k0 + i, &e[i], &after[i], false, p);
            gm_outbuf_commit(o, p);
        } else {
            char *p = o->buf + o->n;
            for (; i < n; i++)
                p = text_event(o, c, &txt, k0 + i, &e[i], &after[i], t0, p);
            gm_outbuf_commit(o, p);
        }
    }
    gm_snapshot_walk_release(&wk);
    if (!json) {
        char a[48], b[48], line[200];
        int n = snprintf(line, sizeof(line),
                         "device %d: allocated at the end %s, peak %s after event %" PRId64 "\n",
                         d->index, gm_format_bytes(a, sizeof(a), tl.final_bytes, GM_UNITS_IEC),
                         gm_format_bytes(b, sizeof(b), tl.peak_bytes, GM_UNITS_IEC),
                         tl.peak_event_index);
        gm_outbuf_put(o, line, n > 0 ? (size_t)n : 0);
    }
    gm_snapshot_timeline_release(&tl);
    gm_free(jl);
    return GM_OK;
}

enum gm_status gm_analysis_trace(FILE *f, const struct gm_snapshot *snap,
                                 const struct gm_analysis_trace_opts *opts, struct gm_error *err)
{
    struct gm_outbuf *o;
    struct cache c;
    enum gm_status st = GM_OK;
    if (opts->device >= 0 && !gm_snapshot_device_by_index(snap, opts->device))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "the snapshot has no device %d",
                       (int)opts->device);
    memset(&c, 0, sizeof(c));
    c.snap = snap;
    c.frame = gm_calloc(snap->n_stacks + 1, sizeof(*c.frame));
    c.shown = gm_calloc(snap->n_stacks + 1, 1);
    c.extra = gm_calloc(snap->n_extras + 1, sizeof(*c.extra));
    o = gm_malloc(sizeof(*o));
    if (!c.frame || !c.shown || !c.extra || !o ||
        (opts->format != GM_TRACE_NDJSON && !text_slots_init(&c))) {
        cache_release(&c);
        gm_free(o);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "trace: out of memory");
    }
    if (opts->format == GM_TRACE_NDJSON && !json_keys_fit()) {
        cache_release(&c);
        gm_free(o);
        return gm_fail(err, GM_ERR_INTERNAL, GM_NO_OFFSET, "trace: a field's key out of range");
    }
    gm_outbuf_init(o, f);
    for (unsigned a = 0; a <= GM_ACTION_COUNT; a++) {
        /* the library's names (14 bytes at most), bounded by the column's room all the
         * same: the name, then when it is shorter than 15 spaces eight at a time, up to
         * seven bytes past the 15th (gm_fmt_left()); text_event copies the whole room */
        const char *an = gm_snapshot_action_name((enum gm_snapshot_action)a);
        size_t n = strnlen(an, sizeof(c.action_col[a]) - 1);
        c.n_action_col[a] = (uint8_t)(gm_fmt_left(c.action_col[a], an, n, 15) - c.action_col[a]);
    }
    for (size_t i = 0; i < snap->n_devices && st == GM_OK; i++) {
        const struct gm_snapshot_device *d = &snap->devices[i];
        if (opts->device >= 0 && d->index != opts->device)
            continue;
        /* NDJSON has a line for each event in [from, to] and nothing else: a device with none
         * there (a rank file's other devices) needs no line state (some 800 KiB made for each
         * device) and no walk */
        if (opts->format == GM_TRACE_NDJSON && (opts->from >= d->n_events || opts->from > opts->to))
            continue;
        st = trace_device(o, &c, d, opts, err);
    }
    if (st == GM_OK && c.failed)
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "trace: out of memory");
    if (!gm_outbuf_flush(o) || fflush(f) != 0 || ferror(f)) {
        if (st == GM_OK)
            st = gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the trace failed");
    }
    cache_release(&c);
    gm_free(o);
    return st;
}
