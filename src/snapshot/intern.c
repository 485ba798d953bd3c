/* SPDX-License-Identifier: MIT */
/* intern.c - strings, frames, stacks and the per-event extras of a snapshot, each interned
 * once (load_int.h).  Strings, frames and stacks are looked up first by the pickle object
 * (a string by its value, a frame dict in a map by its node, a frames list by the mark it
 * carries: pk_mark()), then by content (for writers that share nothing, like 2.0).  The
 * work is linear in the file: an object shared through the memo costs O(1) per reference,
 * whatever its size, and what is found in a text (memory_viz's noise filter, the user-frame
 * rule) is found once per distinct text, never once per frame that shares it. */
#define _GNU_SOURCE /* memmem() */
#include "snapshot/load_int.h"

#include <stdio.h>
#include <string.h>

/* Add hash -> val to one of the interner's maps.  A map's growth (its new slots beside the
 * old ones) is checked against the load's memory cap before it allocates; what the maps
 * hold is then counted by snap_intern_charge(). */
static bool in_map_add(struct builder *b, struct gm_map *m, uint64_t hash, uint64_t val)
{
    struct gm_budget bud = gm_budget_make(b->arena->cap, *b->held);
    bool ok;
    m->budget = &bud;
    ok = gm_map_add(m, hash, val);
    m->budget = NULL;
    if (bud.over)
        b->arena->limit_hit = true;
    return ok;
}

struct str_eq_ctx {
    struct builder *b;
    const char *p;
    size_t n;
};

static bool str_eq(void *ctx, uint64_t idx)
{
    struct str_eq_ctx *c = ctx;
    return c->b->in.str_lens[idx] == c->n && !memcmp(c->b->in.strs[idx], c->p, c->n);
}

/* Intern 'n' bytes at 'p'; *idx is its index in strs. */
static enum gm_status intern_bytes_idx(struct builder *b, const char *p, size_t n, uint32_t *idx)
{
    struct str_eq_ctx c = {b, p, n};
    uint64_t h = dm_key(gm_hash_bytes(p, n, 0));
    struct dm_entry *dc = &b->in.content_dm[dm_slot(h)];
    uint32_t i;
    char *s;
    if (dc->key == h && str_eq(&c, dc->val)) {
        *idx = dc->val;
        return GM_OK;
    }
    i = snap_index_find(&b->in.str_by_content, h, str_eq, &c);
    if (i != SNAP_ID_NONE) {
        dc->key = h;
        dc->val = i;
        *idx = i;
        return GM_OK;
    }
    if (b->in.n_strs >= UINT32_MAX - 1)
        return snap_nomem(b);
    if (b->in.n_strs == b->in.cap_strs) {
        size_t cap = b->in.cap_strs;
        size_t *nl;
        uint8_t *nk;
        if (!grow_arr((void **)&b->in.strs, &cap, b->in.n_strs + 1, sizeof(char *)))
            return snap_nomem(b);
        nl = gm_realloc(b->in.str_lens, cap * sizeof(size_t));
        if (!nl)
            return snap_nomem(b);
        b->in.str_lens = nl;
        nk = gm_realloc(b->in.str_kinds, cap);
        if (!nk)
            return snap_nomem(b);
        b->in.str_kinds = nk;
        b->in.cap_strs = cap;
    }
    s = gm_arena_strndup(b->arena, p, n);
    if (!s)
        return snap_nomem(b);
    b->in.strs[b->in.n_strs] = s;
    b->in.str_lens[b->in.n_strs] = n;
    b->in.str_kinds[b->in.n_strs] = 0;
    if (!in_map_add(b, &b->in.str_by_content, h, (uint32_t)b->in.n_strs))
        return snap_nomem(b);
    *idx = (uint32_t)b->in.n_strs++;
    return snap_intern_charge(b);
}

enum gm_status snap_intern_bytes(struct builder *b, const char *p, size_t n, const char **out)
{
    uint32_t idx;
    enum gm_status st = intern_bytes_idx(b, p, n, &idx);
    if (st == GM_OK)
        *out = b->in.strs[idx];
    return st;
}

/* The index in strs of string value 'v', interned.  A string value is the place of its
 * bytes in the file, so a memo reference to a string is the same value: the by-value cache
 * knows it without reading the bytes again.  A long string (over LONG_STR bytes) is also
 * remembered in a map by value, so that no reference to it is ever hashed twice, whatever
 * the references in between; a short one costs at most LONG_STR bytes hashed. */
static enum gm_status intern_str_idx(struct builder *b, pk_val v, const char *what, uint32_t *out)
{
    const char *p;
    size_t n;
    uint32_t idx;
    struct dm_entry *c;
    enum gm_status st;
    /* Unmemoized repeats ("N/A" on every 2.8+ trace entry) equal the last short string:
     * checked first, and not cached by value (that value never comes again). */
    if (b->in.last_str_ok && pk_short_str(b->doc, v, &p, &n)) {
        /* the common case, without a call: a SHORT_BINUNICODE */
        if (n == b->in.str_lens[b->in.last_str] && n <= 16 &&
            short_eq(p, b->in.strs[b->in.last_str], n)) {
            *out = b->in.last_str;
            return GM_OK;
        }
    } else if (b->in.last_str_ok && pk_get_str(b->doc, v, &p, &n, NULL) &&
               n == b->in.str_lens[b->in.last_str] && n <= 16 &&
               short_eq(p, b->in.strs[b->in.last_str], n)) {
        *out = b->in.last_str;
        return GM_OK;
    }
    c = &b->in.str_by_val[dm_slot(v)];
    if (c->key == v && pk_is_str(v)) {
        *out = c->val;
        return GM_OK;
    }
    if (!pk_get_str(b->doc, v, &p, &n, NULL))
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: '%s' is a %s, expected a str", what, pk_type_name(v));
    if (n > LONG_STR &&
        (idx = snap_index_find(&b->in.long_by_val, v, NULL, NULL)) != SNAP_ID_NONE) {
        c->key = v;
        c->val = idx;
        *out = idx;
        return GM_OK;
    }
    if ((st = intern_bytes_idx(b, p, n, &idx)) != GM_OK)
        return st;
    if (n > LONG_STR) {
        if (!in_map_add(b, &b->in.long_by_val, v, idx))
            return snap_nomem(b);
        if ((st = snap_intern_charge(b)) != GM_OK)
            return st;
    }
    b->in.last_str = idx;
    b->in.last_str_ok = true;
    c->key = v;
    c->val = idx;
    *out = idx;
    return GM_OK;
}

/* An interned copy of string value 'v'. */
enum gm_status snap_intern_str(struct builder *b, pk_val v, const char *what, const char **out)
{
    uint32_t idx;
    enum gm_status st = intern_str_idx(b, v, what, &idx);
    if (st == GM_OK)
        *out = b->in.strs[idx];
    return st;
}

/* ---- frames and stacks ---- */

/* What a string says as a frame's file name or function name, found once per distinct
 * string (str_kind, STR_*), never once per frame: memo-shared strings of megabytes in
 * thousands of frames cost their length once. */
enum {
    STR_KNOWN = 1 << 0,      /* the bits below are set */
    STR_PY = 1 << 1,         /* ends in ".py" */
    STR_NOISE_FILE = 1 << 2, /* a file of memory_viz's noise list */
    STR_NOISE_NAME = 1 << 3, /* a function of memory_viz's noise list */
    STR_USER_FILE = 1 << 4,  /* gm_snapshot_file_is_user() */
};

/* Whether one of 'pats' occurs in s[0..n). */
static bool has_any(const char *s, size_t n, const char *const *pats, size_t n_pats)
{
    for (size_t i = 0; i < n_pats; i++)
        if (memmem(s, n, pats[i], strlen(pats[i])))
            return true;
    return false;
}

/* The STR_* bits of strs[idx] (memory_viz's noise filter: the list is in docs/snapshot.md,
 * "File format"). */
static uint8_t str_kind(struct builder *b, uint32_t idx)
{
    static const char *const names[] = {"unwind::unwind",    "CapturedTraceback::gather",
                                        "gather_with_cpp",   "_start",
                                        "__libc_start_main", "PyEval_",
                                        "PyObject_",         "PyFunction_"};
    static const char *const files[] = {"core/boxing",
                                        "/Register",
                                        "/Redispatch",
                                        "pythonrun.c",
                                        "Modules/main.c",
                                        "Objects/call.c",
                                        "Objects/methodobject.c",
                                        "pycore_ceval.h",
                                        "ceval.c",
                                        "cpython/abstract.h"};
    const char *s = b->in.strs[idx];
    size_t n = b->in.str_lens[idx];
    uint8_t k = b->in.str_kinds[idx];
    if (k & STR_KNOWN)
        return k;
    k = STR_KNOWN;
    if (n >= 3 && !memcmp(s + n - 3, ".py", 3))
        k |= STR_PY;
    if (has_any(s, n, files, sizeof(files) / sizeof(files[0])))
        k |= STR_NOISE_FILE;
    if (has_any(s, n, names, sizeof(names) / sizeof(names[0])))
        k |= STR_NOISE_NAME;
    if (gm_snapshot_file_is_user(s))
        k |= STR_USER_FILE;
    b->in.str_kinds[idx] = k;
    return k;
}

/* The index in strs of frame text p[0..n), shortened past GM_SNAPSHOT_TEXT_MAX bytes
 * (snapshot.h) at a character, with its length said. */
static enum gm_status intern_text_cut(struct builder *b, const char *p, size_t n, uint32_t *out)
{
    char buf[GM_SNAPSHOT_TEXT_MAX + 48];
    size_t keep = GM_SNAPSHOT_TEXT_MAX;
    if (n <= GM_SNAPSHOT_TEXT_MAX)
        return intern_bytes_idx(b, p, n, out);
    while (keep > 0 && ((unsigned char)p[keep] & 0xc0) == 0x80)
        keep--;
    memcpy(buf, p, keep);
    keep += (size_t)snprintf(buf + keep, sizeof(buf) - keep, " ... (%zu bytes)", n);
    return intern_bytes_idx(b, buf, keep, out);
}

/* The index in strs of frame text 'v' (a file or function name), shortened past
 * GM_SNAPSHOT_TEXT_MAX bytes (snapshot.h): each distinct value is cut once, then known by
 * its value. */
static enum gm_status intern_frame_text(struct builder *b, pk_val v, const char *what,
                                        uint32_t *out)
{
    const char *p;
    size_t n;
    uint32_t idx;
    enum gm_status st;
    if (!pk_get_str(b->doc, v, &p, &n, NULL) || n <= GM_SNAPSHOT_TEXT_MAX)
        return intern_str_idx(b, v, what, out);
    if ((idx = snap_index_find(&b->in.short_by_val, v, NULL, NULL)) != SNAP_ID_NONE) {
        *out = idx;
        return GM_OK;
    }
    if ((st = intern_text_cut(b, p, n, &idx)) != GM_OK)
        return st;
    if (!in_map_add(b, &b->in.short_by_val, v, idx))
        return snap_nomem(b);
    *out = idx;
    return snap_intern_charge(b);
}

struct frame_eq_ctx {
    struct builder *b;
    const char *filename, *name;
    int64_t line;
};

static bool frame_eq(void *ctx, uint64_t id)
{
    struct frame_eq_ctx *c = ctx;
    const struct gm_snapshot_frame *f = &c->b->in.frames[id];
    return f->filename == c->filename && f->name == c->name && f->line == c->line;
}

/* The frame id of (strs[fi], line, strs[ni]), a new frame when none has them. */
static enum gm_status frame_by_content(struct builder *b, uint32_t fi, uint32_t ni, int64_t line,
                                       uint32_t *out)
{
    struct frame_eq_ctx c = {b, b->in.strs[fi], b->in.strs[ni], line};
    uint64_t h = gm_hash_mix((uint64_t)(uintptr_t)c.filename * 31 +
                             (uint64_t)(uintptr_t)c.name * 7 + (uint64_t)c.line);
    uint32_t id = snap_index_find(&b->in.frame_by_content, h, frame_eq, &c);
    if (id == SNAP_ID_NONE) {
        struct gm_snapshot_frame *f;
        if (b->in.n_frames >= UINT32_MAX - 1 ||
            !grow_arr((void **)&b->in.frames, &b->in.cap_frames, b->in.n_frames + 1, sizeof(*f)))
            return snap_nomem(b);
        f = &b->in.frames[b->in.n_frames];
        uint8_t fk = str_kind(b, fi), nk = str_kind(b, ni);
        f->filename = c.filename;
        f->name = c.name;
        f->line = c.line;
        f->is_python = (fk & STR_PY) != 0;
        f->is_noise = (fk & STR_NOISE_FILE) || (nk & STR_NOISE_NAME);
        f->user_known = true;
        f->user_file = (fk & STR_USER_FILE) != 0;
        f->filename_id = fi;
        f->name_id = ni;
        id = (uint32_t)b->in.n_frames++;
        if (!in_map_add(b, &b->in.frame_by_content, h, id))
            return snap_nomem(b);
    }
    *out = id;
    return GM_OK;
}

static enum gm_status stack_by_content(struct builder *b, const uint32_t *ids, size_t n,
                                       uint32_t *out);

#define FX_ORIGIN_MAX 256 /* frames kept of an fx_original_trace (the innermost) */

/* The stack of frame 'id''s fx_original_trace 'v' (a traceback text, outermost first, its
 * 'File "f", line N, in name' lines the frames), kept for the frame when it has none yet
 * (frames are interned by file, line and name: the first trace seen stays). */
static enum gm_status fx_origin(struct builder *b, uint32_t id, pk_val v)
{
    uint32_t ids[FX_ORIGIN_MAX], stack = 0;
    size_t n = 0, len;
    const char *p, *e;
    enum gm_status st;
    if (id < b->in.n_fx_origin && b->in.fx_origin[id])
        return GM_OK;
    if (!pk_get_str(b->doc, v, &p, &len, NULL))
        return GM_OK;
    for (e = p + len; p < e;) {
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        size_t ln = nl ? (size_t)(nl - p) : (size_t)(e - p);
        struct snap_tb_line t;
        uint32_t fi, ni;
        if (snap_traceback_line(p, ln, &t)) {
            if (n == FX_ORIGIN_MAX) { /* keep the innermost */
                memmove(ids, ids + 1, (FX_ORIGIN_MAX - 1) * sizeof(ids[0]));
                n--;
            }
            if ((st = intern_text_cut(b, t.file, t.file_len, &fi)) != GM_OK ||
                (st = intern_text_cut(b, t.name, t.name_len, &ni)) != GM_OK ||
                (st = frame_by_content(b, fi, ni, t.line, &ids[n])) != GM_OK)
                return st;
            n++;
        }
        p += ln + (nl != NULL);
    }
    if (!n)
        return GM_OK;
    for (size_t i = 0; i < n / 2; i++) { /* innermost first, as stacks are */
        uint32_t t = ids[i];
        ids[i] = ids[n - 1 - i];
        ids[n - 1 - i] = t;
    }
    if ((st = stack_by_content(b, ids, n, &stack)) != GM_OK)
        return st;
    if (id >= b->in.n_fx_origin) {
        if (!grow_arr((void **)&b->in.fx_origin, &b->in.cap_fx_origin, id + 1, sizeof(uint32_t)))
            return snap_nomem(b);
        memset(b->in.fx_origin + b->in.n_fx_origin, 0,
               (id + 1 - b->in.n_fx_origin) * sizeof(uint32_t));
        b->in.n_fx_origin = id + 1;
    }
    b->in.fx_origin[id] = stack;
    return GM_OK;
}

static enum gm_status intern_frame(struct builder *b, pk_val v, uint32_t *out)
{
    const struct pk_node *d = pk_node_of_kind(v, PK_DICT);
    uint32_t id, fi = UINT32_MAX, ni = UINT32_MAX;
    struct frame_eq_ctx c = {b, "", "", 0};
    pk_val fx = PK_HOLE;
    enum gm_status st;

    if (!d)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: a frame is a %s, expected a dict", pk_type_name(v));
    id = snap_index_find(&b->in.frame_by_node, (uint64_t)(uintptr_t)d, NULL, NULL);
    if (id != SNAP_ID_NONE) {
        *out = id;
        return GM_OK;
    }
    for (uint32_t i = 0; i < d->len; i++) {
        pk_val k = d->items[2 * i], val = d->items[2 * i + 1];
        switch (snap_word_of(b, k)) {
        case W_FILENAME:
            if ((st = intern_frame_text(b, val, "filename", &fi)) != GM_OK)
                return st;
            c.filename = b->in.strs[fi];
            break;
        case W_NAME:
            if ((st = intern_frame_text(b, val, "name", &ni)) != GM_OK)
                return st;
            c.name = b->in.strs[ni];
            break;
        case W_LINE:
            if (!pk_get_i64(val, &c.line))
                return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                               "snapshot: frame 'line' is a %s, expected an int",
                               pk_type_name(val));
            break;
        case W_FX_ORIGINAL_TRACE:
            fx = val;
            break;
        default:
            break; /* fx_node_* and future fields */
        }
    }
    /* Interned "" so that every frame's strings compare by pointer. */
    if (fi == UINT32_MAX) {
        if ((st = intern_bytes_idx(b, "", 0, &fi)) != GM_OK)
            return st;
        c.filename = b->in.strs[fi];
    }
    if (ni == UINT32_MAX) {
        if ((st = intern_bytes_idx(b, "", 0, &ni)) != GM_OK)
            return st;
        c.name = b->in.strs[ni];
    }
    if ((st = frame_by_content(b, fi, ni, c.line, &id)) != GM_OK)
        return st;
    if (fx != PK_HOLE && pk_is_str(fx) && (st = fx_origin(b, id, fx)) != GM_OK)
        return st;
    if (!in_map_add(b, &b->in.frame_by_node, (uint64_t)(uintptr_t)d, id))
        return snap_nomem(b);
    *out = id;
    return snap_intern_charge(b);
}

struct stack_eq_ctx {
    struct builder *b;
    size_t n;
    const uint32_t *ids;
};

static bool stack_eq(void *ctx, uint64_t id)
{
    struct stack_eq_ctx *c = ctx;
    const struct stack_rec *s = &c->b->in.stacks[id];
    return s->n == c->n && !memcmp(c->b->in.pool + s->off, c->ids, c->n * sizeof(uint32_t));
}

struct sig_eq_ctx {
    struct builder *b;
    const pk_val *items;
    size_t n;
};

/* Whether sigs[idx] holds the n frame objects at items. */
static inline bool sig_same(const struct builder *b, uint32_t idx, const pk_val *items, size_t n)
{
    const struct sig *g = &b->in.sigs[idx];
    const pk_val *a;
    if (g->n != n)
        return false;
    a = b->in.sig_pool + g->off;
    for (size_t i = 0; i < n; i++)
        if (a[i] != items[i])
            return false;
    return true;
}

/* The hash of a frames list's items for sig_dm and sig_map (never 0): two rotate-xor chains
 * (a cycle or two per item, where a multiply chain costs four), mixed at the end;
 * sig_same() settles collisions. */
static inline uint64_t items_hash(const pk_val *items, uint32_t n)
{
    uint64_t h0 = (uint64_t)n, h1 = 0x9e3779b97f4a7c15ULL;
    uint32_t i = 0;
    for (; i + 1 < n; i += 2) {
        h0 = ((h0 << 7) | (h0 >> 57)) ^ items[i];
        h1 = ((h1 << 7) | (h1 >> 57)) ^ items[i + 1];
    }
    if (i < n)
        h0 = ((h0 << 7) | (h0 >> 57)) ^ items[i];
    return dm_key(gm_hash_mix(h0 ^ (h1 * 0xff51afd7ed558ccdULL)));
}

static bool sig_eq(void *ctx, uint64_t idx)
{
    struct sig_eq_ctx *c = ctx;
    return sig_same(c->b, (uint32_t)idx, c->items, c->n);
}

/* The stack id of a list of frame dicts.  A list object seen before is known by its mark
 * (pickle.h, pk_mark()): one look-up per reference, whatever its length, however often the
 * memo shares it.  A new list is looked up by its items (the frame dict objects, shared
 * through the memo): writers share either the list or its frames, and lists inside trace
 * entries are recycled while parsing.  Only lists of memo-shared frames are remembered by
 * items; others go through the content maps (2.0 files share nothing), in time
 * proportional to the list, which the file spells out. */
/* The stack id of the n frame ids ids[0..n) (b->in.tmp or the caller's own array), a new
 * stack when none has them. */
static enum gm_status stack_by_content(struct builder *b, const uint32_t *ids, size_t n,
                                       uint32_t *out)
{
    struct stack_eq_ctx c = {b, n, ids};
    uint64_t h = (uint64_t)c.n * 0x9e3779b97f4a7c15ULL;
    uint32_t id;
    for (size_t i = 0; i < c.n; i++)
        h = gm_hash_mix(h ^ ids[i]) + i;
    id = snap_index_find(&b->in.stack_by_content, h, stack_eq, &c);
    if (id == SNAP_ID_NONE) {
        if (b->in.n_pool + c.n > UINT32_MAX || b->in.n_stacks >= UINT32_MAX - 1 ||
            !grow_arr((void **)&b->in.pool, &b->in.cap_pool, b->in.n_pool + c.n,
                      sizeof(uint32_t)) ||
            !grow_arr((void **)&b->in.stacks, &b->in.cap_stacks, b->in.n_stacks + 1,
                      sizeof(struct stack_rec)))
            return snap_nomem(b);
        memcpy(b->in.pool + b->in.n_pool, ids, c.n * sizeof(uint32_t));
        b->in.stacks[b->in.n_stacks].off = (uint32_t)b->in.n_pool;
        b->in.stacks[b->in.n_stacks].n = (uint32_t)c.n;
        b->in.n_pool += c.n;
        id = (uint32_t)b->in.n_stacks++;
        if (!in_map_add(b, &b->in.stack_by_content, h, id))
            return snap_nomem(b);
    }
    *out = id;
    return GM_OK;
}

bool snap_traceback_line(const char *p, size_t n, struct snap_tb_line *out)
{
    const char *e = p + n, *q, *f;
    int64_t v = 0;
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    if ((size_t)(e - p) < 6 || memcmp(p, "File \"", 6))
        return false;
    f = p + 6;
    if (!(q = memchr(f, '"', (size_t)(e - f))))
        return false;
    out->file = f;
    out->file_len = (size_t)(q - f);
    p = q + 1;
    if ((size_t)(e - p) < 7 || memcmp(p, ", line ", 7))
        return false;
    p += 7;
    if (p == e || *p < '0' || *p > '9')
        return false;
    for (; p < e && *p >= '0' && *p <= '9'; p++) /* a longer number stays at the cap */
        if (v < ((int64_t)1 << 40))
            v = v * 10 + (*p - '0');
    out->line = v;
    if ((size_t)(e - p) < 5 || memcmp(p, ", in ", 5))
        return false;
    p += 5;
    q = p;
    while (q < e && *q != '\n' && *q != '\r')
        q++;
    out->name = p;
    out->name_len = (size_t)(q - p);
    return true;
}

enum gm_status snap_intern_forward_stack(struct builder *b, pk_val v, uint32_t *out)
{
    const struct pk_node *l = snap_as_list(v);
    size_t n = 0;
    enum gm_status st;
    *out = 0;
    if (!l)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: 'forward_frames' is a %s, expected a list", pk_type_name(v));
    if (!grow_arr((void **)&b->in.tmp, &b->in.cap_tmp, l->len ? l->len : 1, sizeof(uint32_t)))
        return snap_nomem(b);
    /* traceback order is outermost first; a stack is innermost first */
    for (uint32_t k = l->len; k-- > 0;) {
        const char *p;
        size_t pn;
        struct snap_tb_line t;
        uint32_t fi, ni;
        if (!pk_get_str(b->doc, l->items[k], &p, &pn, NULL))
            return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                           "snapshot: a 'forward_frames' item is a %s, expected a str",
                           pk_type_name(l->items[k]));
        if (!snap_traceback_line(p, pn, &t))
            continue; /* a line of source text, or a form we do not know */
        if ((st = intern_text_cut(b, t.file, t.file_len, &fi)) != GM_OK ||
            (st = intern_text_cut(b, t.name, t.name_len, &ni)) != GM_OK ||
            (st = frame_by_content(b, fi, ni, t.line, &b->in.tmp[n])) != GM_OK)
            return st;
        n++;
    }
    if (n && (st = stack_by_content(b, b->in.tmp, n, out)) != GM_OK)
        return st;
    return snap_intern_charge(b);
}

enum gm_status snap_intern_stack(struct builder *b, pk_val v, uint32_t *out)
{
    const struct pk_node *l = snap_as_list(v);
    uint32_t id, gi, mark = pk_mark(v);
    struct sig_eq_ctx sc;
    struct dm_entry *dc;
    uint64_t hs;
    bool all_shared = true;
    enum gm_status st;

    if (pk_is_token(v) && pk_token_id(v) < b->in.n_stacks) {
        /* a frames list read in an earlier trace entry, recycled by the parser */
        *out = pk_token_id(v);
        return GM_OK;
    }
    if (!l)
        return gm_fail(b->err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "snapshot: 'frames' is a %s, expected a list", pk_type_name(v));
    if (l->len == 0) {
        *out = 0;
        return GM_OK;
    }
    /* marked: the stack of this list object; a list only grows (APPEND), so the same
     * length is the same items */
    if (mark && mark - 1 < b->in.n_stacks && b->in.stacks[mark - 1].n == l->len) {
        *out = mark - 1;
        return GM_OK;
    }
    sc.b = b;
    sc.items = l->items;
    sc.n = l->len;
    hs = items_hash(l->items, l->len);
    dc = &b->in.sig_dm[dm_slot(hs)];
    if (dc->key == hs && sig_same(b, dc->val, l->items, l->len)) {
        *out = b->in.sigs[dc->val].stack;
        pk_set_mark(v, *out + 1);
        return GM_OK;
    }
    gi = snap_index_find(&b->in.sig_map, hs, sig_eq, &sc);
    if (gi != SNAP_ID_NONE) {
        dc->key = hs;
        dc->val = gi;
        *out = b->in.sigs[gi].stack;
        pk_set_mark(v, *out + 1);
        return GM_OK;
    }
    if (!grow_arr((void **)&b->in.tmp, &b->in.cap_tmp, l->len, sizeof(uint32_t)))
        return snap_nomem(b);
    for (uint32_t i = 0; i < l->len; i++) {
        if ((st = intern_frame(b, l->items[i], &b->in.tmp[i])) != GM_OK)
            return st;
        if (!pk_is_shared(l->items[i]))
            all_shared = false;
    }
    if ((st = stack_by_content(b, b->in.tmp, l->len, &id)) != GM_OK)
        return st;
    if (all_shared) {
        /* remember these frame objects: the next list of the same frames is one look-up */
        if (b->in.n_sig_pool + l->len > UINT32_MAX || b->in.n_sigs >= UINT32_MAX - 1 ||
            !grow_arr((void **)&b->in.sig_pool, &b->in.cap_sig_pool, b->in.n_sig_pool + l->len,
                      sizeof(pk_val)) ||
            !grow_arr((void **)&b->in.sigs, &b->in.cap_sigs, b->in.n_sigs + 1, sizeof(struct sig)))
            return snap_nomem(b);
        memcpy(b->in.sig_pool + b->in.n_sig_pool, l->items, l->len * sizeof(pk_val));
        b->in.sigs[b->in.n_sigs].off = (uint32_t)b->in.n_sig_pool;
        b->in.sigs[b->in.n_sigs].n = (uint32_t)l->len;
        b->in.sigs[b->in.n_sigs].stack = id;
        b->in.n_sig_pool += l->len;
        if (!in_map_add(b, &b->in.sig_map, hs, (uint32_t)b->in.n_sigs))
            return snap_nomem(b);
        dc->key = hs;
        dc->val = (uint32_t)b->in.n_sigs++;
    }
    pk_set_mark(v, id + 1);
    *out = id;
    return snap_intern_charge(b);
}

bool snap_stack_seen(const struct builder *b, const pk_val *items, uint32_t n, uint32_t *out)
{
    uint64_t hs;
    const struct dm_entry *dc;
    if (!n)
        return false;
    hs = items_hash(items, n);
    dc = &b->in.sig_dm[dm_slot(hs)];
    if (dc->key != hs || !sig_same(b, dc->val, items, n))
        return false;
    *out = b->in.sigs[dc->val].stack;
    return true;
}

struct extra_eq_ctx {
    struct builder *b;
    const struct gm_snapshot_event_extra *x;
};

static bool extra_eq(void *ctx, uint64_t id)
{
    struct extra_eq_ctx *c = ctx;
    const struct gm_snapshot_event_extra *a = &c->b->in.extras[id], *x = c->x;
    return a->stream == x->stream && a->action_name == x->action_name &&
           a->compile_context == x->compile_context && a->user_metadata == x->user_metadata &&
           a->pool_id[0] == x->pool_id[0] && a->pool_id[1] == x->pool_id[1] &&
           a->internal_metadata == x->internal_metadata && a->forward_stack == x->forward_stack;
}

enum gm_status snap_intern_extra(struct builder *b, const struct gm_snapshot_event_extra *x,
                                 uint32_t *out)
{
    struct extra_eq_ctx c = {b, x};
    uint64_t h;
    struct dm_entry *dc;
    uint32_t id;
    enum gm_status st;
    if (b->in.last_extra && extra_eq(&c, b->in.last_extra - 1)) {
        *out = b->in.last_extra;
        return GM_OK;
    }
    h = dm_key(gm_hash_mix((x->stream * 13) ^ (uint64_t)(uintptr_t)x->action_name ^
                           ((uint64_t)(uintptr_t)x->compile_context * 3) ^
                           ((uint64_t)(uintptr_t)x->user_metadata * 5) ^
                           ((uint64_t)x->pool_id[0] * 7) ^ ((uint64_t)x->pool_id[1] * 11)));
    dc = &b->in.extra_dm[dm_slot(h)];
    if (dc->key == h && extra_eq(&c, dc->val)) {
        b->in.last_extra = dc->val + 1;
        *out = dc->val + 1;
        return GM_OK;
    }
    id = snap_index_find(&b->in.extra_by_content, h, extra_eq, &c);
    if (id == SNAP_ID_NONE) {
        if (b->in.n_extras >= UINT32_MAX - 2 ||
            !grow_arr((void **)&b->in.extras, &b->in.cap_extras, b->in.n_extras + 1, sizeof(*x)))
            return snap_nomem(b);
        b->in.extras[b->in.n_extras] = *x;
        id = (uint32_t)b->in.n_extras++;
        if (!in_map_add(b, &b->in.extra_by_content, h, id))
            return snap_nomem(b);
        if ((st = snap_intern_charge(b)) != GM_OK)
            return st;
    }
    dc->key = h;
    dc->val = id;
    b->in.last_extra = id + 1;
    *out = id + 1;
    return GM_OK;
}

static size_t map_bytes(const struct gm_map *m)
{
    return m->slots ? (m->mask + 1) * sizeof(*m->slots) : 0;
}

enum gm_status snap_intern_charge(struct builder *b)
{
    const struct interner *in = &b->in;
    size_t now = in->cap_strs * (sizeof(*in->strs) + sizeof(*in->str_lens) + 1) +
                 in->cap_frames * sizeof(*in->frames) + in->cap_sigs * sizeof(*in->sigs) +
                 in->cap_sig_pool * sizeof(*in->sig_pool) + in->cap_stacks * sizeof(*in->stacks) +
                 in->cap_pool * sizeof(*in->pool) + in->cap_tmp * sizeof(*in->tmp) +
                 in->cap_extras * sizeof(*in->extras) + in->cap_fx_origin * sizeof(*in->fx_origin) +
                 map_bytes(&in->str_by_content) + map_bytes(&in->long_by_val) +
                 map_bytes(&in->short_by_val) + map_bytes(&in->frame_by_node) +
                 map_bytes(&in->frame_by_content) + map_bytes(&in->sig_map) +
                 map_bytes(&in->stack_by_content) + map_bytes(&in->extra_by_content);
    *b->held = *b->held - b->in.heap_bytes + now;
    b->in.heap_bytes = now;
    if (b->arena->cap && *b->held > b->arena->cap) {
        b->arena->limit_hit = true;
        return snap_nomem(b);
    }
    return GM_OK;
}

/* Move the interning tables' results into the arena. */
enum gm_status snap_intern_finish(struct builder *b)
{
    struct gm_snapshot *s = &b->impl->pub;
    struct gm_snapshot_frame *frames = NULL;
    struct gm_snapshot_stack *stacks;
    uint32_t *pool = NULL;

    if (b->in.n_frames) {
        frames = gm_arena_alloc(b->arena, b->in.n_frames * sizeof(*frames), 8);
        if (!frames)
            return snap_nomem(b);
        memcpy(frames, b->in.frames, b->in.n_frames * sizeof(*frames));
    }
    if (b->in.n_pool) {
        pool = gm_arena_alloc(b->arena, b->in.n_pool * sizeof(uint32_t), 8);
        if (!pool)
            return snap_nomem(b);
        memcpy(pool, b->in.pool, b->in.n_pool * sizeof(uint32_t));
    }
    stacks = gm_arena_calloc(b->arena, b->in.n_stacks, sizeof(*stacks));
    if (!stacks)
        return snap_nomem(b);
    for (size_t i = 1; i < b->in.n_stacks; i++) {
        stacks[i].frames = pool + b->in.stacks[i].off;
        stacks[i].n_frames = b->in.stacks[i].n;
    }
    if (b->in.n_extras) {
        struct gm_snapshot_event_extra *x =
            gm_arena_alloc(b->arena, b->in.n_extras * sizeof(*x), 8);
        if (!x)
            return snap_nomem(b);
        memcpy(x, b->in.extras, b->in.n_extras * sizeof(*x));
        s->extras = x;
        s->n_extras = b->in.n_extras;
    }
    if (b->in.n_fx_origin) {
        uint32_t *o = gm_arena_calloc(b->arena, b->in.n_frames, sizeof(uint32_t));
        if (!o)
            return snap_nomem(b);
        memcpy(o, b->in.fx_origin, b->in.n_fx_origin * sizeof(uint32_t));
        s->frame_fx_origin = o;
    }
    s->frames = frames;
    s->n_frames = b->in.n_frames;
    s->n_strings = b->in.n_strs;
    s->stacks = stacks;
    s->n_stacks = b->in.n_stacks;
    return GM_OK;
}

void snap_interner_release(struct interner *in)
{
    gm_map_release(&in->str_by_content);
    gm_map_release(&in->long_by_val);
    gm_map_release(&in->short_by_val);
    gm_map_release(&in->frame_by_node);
    gm_map_release(&in->frame_by_content);
    gm_map_release(&in->sig_map);
    gm_free(in->sigs);
    gm_free(in->sig_pool);
    gm_map_release(&in->stack_by_content);
    gm_map_release(&in->extra_by_content);
    gm_free(in->strs);
    gm_free(in->str_lens);
    gm_free(in->str_kinds);
    gm_free(in->frames);
    gm_free(in->fx_origin);
    gm_free(in->stacks);
    gm_free(in->pool);
    gm_free(in->tmp);
    gm_free(in->extras);
}
