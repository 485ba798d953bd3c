/* SPDX-License-Identifier: MIT */
/* redact.c - gm_snapshot_redact(): the snapshot's pickle read as an object graph (pickle.h)
 * and written again (pickle_write.h) value for value, with the program's text replaced by
 * hashes.  What is replaced is decided by where a string sits, never by what it says:
 *
 *   a frame dict ({"filename", "line", "name"}: block and trace 'frames', 2.0 'history')
 *                         filename -> "f" + 12 hex digits + its extension (".py" stays, so
 *                         a Python frame stays one); name -> "fn_" + 12 hex digits
 *   a 'forward_frames' string (a traceback line 'File "f", line N, in name' and the source
 *                         line under it) -> the same line with f and name hashed as a
 *                         frame's, the source dropped; another string -> "h_" + 12 hex
 *   an annotation dict ({"name", "stage", ...}: external_annotations)
 *                         name -> "a_" + 12 hex digits, after "gpumem.phase:" when it
 *                         starts so (a user phase stays a phase)
 *   "compile_context", "user_metadata", "internal_metadata" values and the frames' FX
 *   names and traces ("fx_node_name", "fx_node_target", "fx_original_trace")
 *                         -> "h_" + 12 hex digits
 *
 * "" and "??" (C++ frames without a file) and "N/A" stay, and so does a function named
 * "forward": nn.Module's protocol, not the program's secret, by which the analysis finds
 * the model's outermost frame when the program calls forward() itself.  With
 * GM_REDACT_KEEP_LIBRARY_FRAMES a frame whose file is not the user's stays whole.
 *
 * The graph is walked with an explicit stack (a hostile file may nest deeply or share
 * objects in cycles).  Shared objects stay shared: a list or dict is memoized when it
 * begins and referred to again by its memo index, a tuple when it ends, and equal input
 * strings with the same replacement share one output string, so the output is never much
 * larger than the input.  The hash is FNV-1a over salt, NUL, text, finished by the
 * splitmix64 mixer, 48 bits shown. */
#include "gpumem/redact.h"

#include "base/map.h"
#include "gpumem/arena.h"
#include "gpumem/pickle_write.h"
#include "gpumem/snapshot.h"
#include "pickle/pickle.h"
#include "snapshot/snapshot_int.h"

#include <errno.h>
#include <string.h>
#include <zlib.h>

enum kind { K_RAW = 0, K_PATH, K_FUNCTION, K_ANNOTATION, K_OTHER, K_TRACEBACK };

#define IN_PROGRESS  UINT32_MAX /* the mark of a tuple being written */
#define PHASE_PREFIX GM_USER_PHASE_PREFIX

struct frame {
    pk_val v;
    uint32_t i;   /* items written so far (a dict: keys and values) */
    uint8_t kind; /* how a string value in this slot is written */
    bool begun;
};

struct redactor {
    const struct pk_doc *doc;
    struct gm_pickle_writer *w;
    const struct gm_redact_opts *o;
    struct gm_redact_stats st;
    struct gm_map strings; /* (input string, kind) -> output memo index */
    struct frame *stack;
    size_t n, cap;
};

static uint64_t hash_text(const char *salt, const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325u;
    for (const char *s = salt; s && *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3u;
    h = (h ^ 0) * 0x100000001b3u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)p[i]) * 0x100000001b3u;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9u;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebu;
    return h ^ (h >> 31);
}

/* The extension of a path worth keeping: "." and up to 4 letters or digits, else "". */
static size_t extension(const char *p, size_t n)
{
    for (size_t k = 1; k <= 5 && k <= n; k++) {
        char c = p[n - k];
        if (c == '.')
            return k > 1 && k < n ? k : 0;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')))
            return 0;
    }
    return 0;
}

static bool kept_as_is(const char *p, size_t n)
{
    return n == 0 || (n == 2 && memcmp(p, "??", 2) == 0) || (n == 3 && memcmp(p, "N/A", 3) == 0);
}

/* Write string value 'v' as 'kind' says, sharing equal results. */
static void write_str(struct redactor *r, pk_val v, enum kind kind, const char *p, size_t n)
{
    uint64_t key = ((v >> 3) << 3 | (uint64_t)kind), *slot;
    bool added = false;
    char out[96];
    size_t len = 0;
    uint64_t h;
    if (kind != K_RAW && kept_as_is(p, n))
        kind = K_RAW;
    slot = gm_map_at(&r->strings, key, &added);
    if (slot && !added) {
        gm_pickle_get(r->w, (uint32_t)*slot);
        return;
    }
    h = hash_text(r->o->salt, p, n) & 0xffffffffffffu;
    switch (kind) {
    case K_RAW:
        len = n;
        break;
    case K_PATH: {
        size_t e = extension(p, n);
        len = (size_t)snprintf(out, sizeof(out), "f%012llx%.*s", (unsigned long long)h, (int)e,
                               p + n - e);
        r->st.n_paths++;
        break;
    }
    case K_FUNCTION:
        len = (size_t)snprintf(out, sizeof(out), "fn_%012llx", (unsigned long long)h);
        r->st.n_functions++;
        break;
    case K_ANNOTATION: {
        size_t pre = strlen(PHASE_PREFIX);
        bool phase = n > pre && memcmp(p, PHASE_PREFIX, pre) == 0;
        if (phase)
            h = hash_text(r->o->salt, p + pre, n - pre) & 0xffffffffffffu;
        len = (size_t)snprintf(out, sizeof(out), "%sa_%012llx", phase ? PHASE_PREFIX : "",
                               (unsigned long long)h);
        r->st.n_annotations++;
        break;
    }
    case K_OTHER:
        len = (size_t)snprintf(out, sizeof(out), "h_%012llx", (unsigned long long)h);
        r->st.n_other++;
        break;
    case K_TRACEBACK: {
        /* a forward_frames line: its file and function hashed as a frame's are (the same
         * text, the same hash), its line kept, the source text after it dropped; any other
         * line (source text) hashed */
        struct snap_tb_line t;
        if (snap_traceback_line(p, n, &t)) {
            uint64_t hf = hash_text(r->o->salt, t.file, t.file_len) & 0xffffffffffffu;
            uint64_t hn = hash_text(r->o->salt, t.name, t.name_len) & 0xffffffffffffu;
            size_t e = extension(t.file, t.file_len);
            bool fwd = t.name_len == 7 && !memcmp(t.name, "forward", 7);
            char fn[32];
            snprintf(fn, sizeof(fn), "fn_%012llx", (unsigned long long)hn);
            len = (size_t)snprintf(out, sizeof(out), "  File \"f%012llx%.*s\", line %lld, in %s\n",
                                   (unsigned long long)hf, (int)e, t.file + t.file_len - e,
                                   (long long)t.line, fwd ? "forward" : fn);
            r->st.n_paths++;
        } else {
            len = (size_t)snprintf(out, sizeof(out), "h_%012llx", (unsigned long long)h);
            r->st.n_other++;
        }
        break;
    }
    }
    {
        uint32_t memo =
            kind == K_RAW ? gm_pickle_strn(r->w, p, len) : gm_pickle_strn(r->w, out, len);
        if (slot)
            *slot = memo;
    }
}

/* Whether frame dict 'd' is kept whole: GM_REDACT_KEEP_LIBRARY_FRAMES and a file that is
 * not the user's. */
static bool frame_kept(const struct redactor *r, const struct pk_node *d)
{
    const char *p;
    size_t n;
    char path[GM_SNAPSHOT_TEXT_MAX + 1];
    pk_val f;
    if (!(r->o->flags & GM_REDACT_KEEP_LIBRARY_FRAMES))
        return false;
    f = pk_dict_get(r->doc, d, "filename");
    if (!pk_str_view(r->doc, f, &p, &n) || n > GM_SNAPSHOT_TEXT_MAX)
        return false;
    memcpy(path, p, n);
    path[n] = '\0';
    /* the user's frames are Python frames of the user's files (gm_snapshot_frame_is_user()) */
    return !(n > 3 && memcmp(path + n - 3, ".py", 3) == 0) || !gm_snapshot_file_is_user(path);
}

/* How the value under key 'key' of dict 'd' is written. */
static enum kind value_kind(const struct redactor *r, const struct pk_node *d, pk_val key)
{
    bool is_frame;
    if (!pk_is_str(key))
        return K_RAW;
    if (pk_str_eq(r->doc, key, "compile_context") || pk_str_eq(r->doc, key, "user_metadata") ||
        pk_str_eq(r->doc, key, "internal_metadata") || pk_str_eq(r->doc, key, "fx_node_name") ||
        pk_str_eq(r->doc, key, "fx_node_target") || pk_str_eq(r->doc, key, "fx_original_trace"))
        return K_OTHER;
    if (pk_str_eq(r->doc, key, "forward_frames"))
        return K_TRACEBACK; /* its strings (a list's items take the list's kind) */
    is_frame =
        pk_is_str(pk_dict_get(r->doc, d, "filename")) && pk_is_str(pk_dict_get(r->doc, d, "name"));
    if (pk_str_eq(r->doc, key, "filename"))
        return is_frame && !frame_kept(r, d) ? K_PATH : K_RAW;
    if (!pk_str_eq(r->doc, key, "name"))
        return K_RAW;
    if (is_frame)
        return frame_kept(r, d) || pk_str_eq(r->doc, pk_dict_get(r->doc, d, "name"), "forward")
                   ? K_RAW
                   : K_FUNCTION;
    return pk_is_str(pk_dict_get(r->doc, d, "stage")) ? K_ANNOTATION : K_RAW;
}

static enum gm_status push(struct redactor *r, pk_val v, enum kind kind, struct gm_error *err)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        struct frame *s = gm_realloc(r->stack, cap * sizeof(*s));
        if (!s)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "redact: out of memory");
        r->stack = s;
        r->cap = cap;
    }
    r->stack[r->n++] = (struct frame){v, 0, (uint8_t)kind, false};
    return GM_OK;
}

/* Write a value that is no container. */
static enum gm_status write_scalar(struct redactor *r, pk_val v, enum kind kind,
                                   struct gm_error *err)
{
    const char *p;
    size_t n;
    bool is_bytes = false;
    int64_t i;
    switch (pk_tag(v)) {
    case PK_TAG_INT:
        pk_small_i64(v, &i);
        gm_pickle_int(r->w, i);
        return GM_OK;
    case PK_TAG_STR:
        if (!pk_get_str(r->doc, v, &p, &n, &is_bytes) || is_bytes)
            return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                           "redact: a bytes value, which no snapshot holds");
        write_str(r, v, kind, p, n);
        return GM_OK;
    case PK_TAG_BOX: {
        const struct pk_box *b = (const struct pk_box *)(uintptr_t)(v & ~(pk_val)7);
        if (b->kind == PK_BOX_I64)
            gm_pickle_int(r->w, b->v.i);
        else if (b->kind == PK_BOX_U64)
            gm_pickle_uint(r->w, b->v.u);
        else if (b->kind == PK_BOX_FLOAT)
            gm_pickle_float(r->w, b->v.d);
        else
            return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                           "redact: an integer wider than 64 bits");
        return GM_OK;
    }
    default:
        if (v == PK_NONE)
            gm_pickle_none(r->w);
        else if (pk_is_bool(v))
            gm_pickle_bool(r->w, v == PK_TRUE);
        else
            return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                           "redact: a value the pickle never completed");
        return GM_OK;
    }
}

/* Open the container on top of the stack, or refer to it when it was written before. */
static enum gm_status begin(struct redactor *r, struct frame *f, struct gm_error *err)
{
    const struct pk_node *nd = pk_node(f->v);
    uint32_t mark = pk_mark(f->v);
    f->begun = true;
    if (mark == IN_PROGRESS)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "redact: a tuple that contains itself");
    if (mark) {
        gm_pickle_get(r->w, mark - 1);
        f->i = UINT32_MAX; /* done */
        return GM_OK;
    }
    switch (nd->kind) {
    case PK_LIST:
        pk_set_mark(f->v, gm_pickle_list_begin(r->w, nd->len) + 1);
        return GM_OK;
    case PK_DICT:
        pk_set_mark(f->v, gm_pickle_dict_begin(r->w, nd->len) + 1);
        return GM_OK;
    case PK_TUPLE:
        pk_set_mark(f->v, IN_PROGRESS);
        gm_pickle_tuple_begin(r->w, nd->len);
        return GM_OK;
    default:
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "redact: a set, which no snapshot holds");
    }
}

static enum gm_status walk(struct redactor *r, struct gm_error *err)
{
    enum gm_status st = push(r, r->doc->root, K_RAW, err);
    while (st == GM_OK && r->n) {
        struct frame *f = &r->stack[r->n - 1];
        const struct pk_node *nd = pk_node(f->v);
        uint32_t total;
        if (!nd) {
            st = write_scalar(r, f->v, (enum kind)f->kind, err);
            r->n--;
            continue;
        }
        if (!f->begun && (st = begin(r, f, err)) != GM_OK)
            break;
        total = nd->kind == PK_DICT ? nd->len * 2 : nd->len;
        if (f->i == UINT32_MAX) {
            r->n--;
            continue;
        }
        if (f->i < total) {
            uint32_t i = f->i++;
            enum kind k = nd->kind == PK_DICT
                              ? (i & 1) ? value_kind(r, nd, nd->items[i - 1]) : K_RAW
                          : f->kind == K_TRACEBACK ? K_TRACEBACK
                                                   : K_RAW;
            st = push(r, nd->items[i], k, err);
            continue;
        }
        if (nd->kind == PK_LIST) {
            gm_pickle_list_end(r->w);
        } else if (nd->kind == PK_DICT) {
            gm_pickle_dict_end(r->w);
        } else {
            uint32_t memo = gm_pickle_tuple_end(r->w);
            pk_set_mark(f->v, memo == GM_PICKLE_NO_MEMO ? 0 : memo + 1);
        }
        r->n--;
    }
    return st;
}

/* The whole input, inflated when gzip'd, into *buf (gm_free()). */
static enum gm_status read_input(const char *path, uint64_t cap, unsigned char **buf, size_t *len,
                                 struct gm_error *err)
{
    gzFile gz = gzopen(path, "rb");
    size_t n = 0, size = 1 << 20;
    unsigned char *p;
    *buf = NULL;
    if (!gz)
        return gm_fail(err, errno == ENOENT ? GM_ERR_NOENT : GM_ERR_IO, GM_NO_OFFSET,
                       "cannot open '%s': %s", path, strerror(errno ? errno : EIO));
    p = gm_malloc(size);
    for (;;) {
        int k;
        if (p && n == size) {
            unsigned char *q = size < cap ? gm_realloc(p, size * 2) : NULL;
            if (!q) {
                gm_free(p);
                gzclose(gz);
                return gm_fail(err, size < cap ? GM_ERR_NOMEM : GM_ERR_LIMIT, GM_NO_OFFSET,
                               "'%s': larger than the memory limit", path);
            }
            p = q;
            size *= 2;
        }
        if (!p) {
            gzclose(gz);
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "redact: out of memory");
        }
        k = gzread(gz, p + n, (unsigned)(size - n < (1u << 30) ? size - n : (1u << 30)));
        if (k < 0) {
            gm_free(p);
            gzclose(gz);
            return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "cannot read '%s'", path);
        }
        if (k == 0)
            break;
        n += (size_t)k;
    }
    gzclose(gz);
    *buf = p;
    *len = n;
    return GM_OK;
}

enum gm_status gm_snapshot_redact(const char *path, FILE *out, const struct gm_redact_opts *o,
                                  struct gm_redact_stats *stats, struct gm_error *err)
{
    static const struct gm_redact_opts none = {0};
    struct redactor r = {0};
    struct pk_doc doc = {0};
    struct pk_opts po = {0};
    struct gm_snapshot_opts so = {0};
    struct gm_snapshot *snap = NULL;
    unsigned char *data;
    size_t len = 0;
    uint64_t cap;
    enum gm_status st;
    r.o = o ? o : &none;
    cap = r.o->memory_limit ? r.o->memory_limit : UINT64_MAX;
    /* It must be a snapshot: the loader's checks and messages (JSON, text, executing
     * opcodes), and its memory limit for the graph. */
    so.memory_limit = r.o->memory_limit;
    so.drop_events = true;
    if ((st = gm_snapshot_load(path, &so, &snap, err)) != GM_OK)
        return st;
    if ((st = read_input(path, cap, &data, &len, err)) != GM_OK) {
        gm_snapshot_free(snap);
        return st;
    }
    po.memory_limit =
        (size_t)(r.o->memory_limit ? r.o->memory_limit : ((uint64_t)256 << 20) + 4 * (uint64_t)len);
    po.general_only = true;
    st = pk_parse(&doc, data, len, &po, err);
    if (st == GM_OK) {
        r.doc = &doc;
        gm_map_init(&r.strings, NULL);
        st = gm_pickle_writer_new(out, snap->protocol < 2 ? 2 : snap->protocol, &r.w, err);
        if (st == GM_OK && (st = walk(&r, err)) == GM_OK) {
            st = gm_pickle_writer_finish(r.w, err);
        } else {
            gm_pickle_writer_free(r.w);
        }
        gm_map_release(&r.strings);
        gm_free(r.stack);
        pk_doc_release(&doc);
    }
    gm_snapshot_free(snap);
    gm_free(data);
    if (st == GM_OK && stats)
        *stats = r.st;
    return st;
}
