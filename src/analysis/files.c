/* SPDX-License-Identifier: MIT */
/* files.c - memory by source file, and by the functions of one file (analysis.h, "memory
 * by source file"): each allocation goes to one frame of its stack, found once per stack. */
#include "analysis/analysis_int.h"

#include "base/path.h"
#include "base/vec.h"

#include "gpumem/arena.h"
#include "gpumem/json.h"
#include "gpumem/version.h"

#include <stdlib.h>
#include <string.h>

#define NO_ROW UINT32_MAX

struct builder {
    const struct gm_snapshot *snap;
    const char *suffix;
    bool by_line;
    struct gm_analysis_files *out;
    size_t cap;
    uint32_t *row_of_stack; /* per stack: its row + 1, 0 not yet found */
};

static bool same(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

/* The frame of 'stack' its memory is attributed to, or NULL. */
static const struct gm_snapshot_frame *frame_of(const struct builder *b, uint32_t stack)
{
    const struct gm_snapshot *snap = b->snap;
    if (stack >= snap->n_stacks)
        return NULL;
    const struct gm_snapshot_stack *st = &snap->stacks[stack];
    if (!b->suffix) {
        long u = gm_snapshot_stack_user_frame(snap, stack);
        if (u < 0 || st->frames[u] >= snap->n_frames)
            return NULL;
        return &snap->frames[st->frames[u]];
    }
    for (uint32_t i = 0; i < st->n_frames; i++) { /* innermost first */
        const struct gm_snapshot_frame *f =
            st->frames[i] < snap->n_frames ? &snap->frames[st->frames[i]] : NULL;
        if (f && f->filename && gm_path_ends(f->filename, b->suffix))
            return f;
    }
    return NULL;
}

/* The row of 'stack' (NO_ROW: none), made when first seen. */
static enum gm_status row_of(struct builder *b, uint32_t stack, uint32_t *row, struct gm_error *err)
{
    if (stack < b->snap->n_stacks && b->row_of_stack[stack]) {
        *row = b->row_of_stack[stack] - 1;
        return GM_OK;
    }
    const struct gm_snapshot_frame *f = frame_of(b, stack);
    const char *fn = f ? (b->suffix ? f->name : NULL) : NULL;
    *row = NO_ROW;
    if (f) {
        struct gm_analysis_files *o = b->out;
        size_t i;
        for (i = 0; i < o->n; i++)
            if (same(o->rows[i].filename, f->filename) && same(o->rows[i].function, fn) &&
                (!b->by_line || o->rows[i].first_line == f->line))
                break;
        if (i == o->n) {
            struct gm_analysis_file_row *r = GM_VEC_PUSH(o->rows, o->n, b->cap, NULL);
            if (!r)
                return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "files: out of memory");
            memset(r, 0, sizeof(*r));
            r->filename = f->filename;
            r->function = fn;
            r->first_line = f->line;
        }
        if (f->line < o->rows[i].first_line)
            o->rows[i].first_line = f->line;
        *row = (uint32_t)i;
    }
    if (stack < b->snap->n_stacks)
        b->row_of_stack[stack] = *row + 1; /* NO_ROW + 1 wraps to 0: searched again (cheap) */
    return GM_OK;
}

static int cmp_rows(const void *x, const void *y)
{
    const struct gm_analysis_file_row *a = x, *b = y;
    if (a->bytes_at_peak != b->bytes_at_peak)
        return a->bytes_at_peak > b->bytes_at_peak ? -1 : 1;
    if (a->bytes_allocated != b->bytes_allocated)
        return a->bytes_allocated > b->bytes_allocated ? -1 : 1;
    int c = strcmp(a->filename ? a->filename : "", b->filename ? b->filename : "");
    return c ? c : strcmp(a->function ? a->function : "", b->function ? b->function : "");
}

enum gm_status gm_analysis_files(const struct gm_analysis *an, const struct gm_analysis_device *dev,
                                 const char *suffix, bool by_line, struct gm_analysis_files *out,
                                 struct gm_error *err)
{
    struct builder b = {
        an->snap, suffix && *suffix ? suffix : NULL, by_line && suffix && *suffix, out, 0, NULL};
    int64_t k = dev->peak_event;
    enum gm_status st = GM_OK;

    memset(out, 0, sizeof(*out));
    if ((st = gm_analysis_require_whole(an, "files", err)) != GM_OK)
        return st;
    b.row_of_stack = gm_calloc(an->snap->n_stacks ? an->snap->n_stacks : 1, sizeof(uint32_t));
    if (!b.row_of_stack)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "files: out of memory");
    for (size_t i = 0; i < dev->n_allocs; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        bool at_peak = ana_alive_at(a->alloc_event, a->free_event, k);
        bool made = a->alloc_event >= 0;
        uint32_t r;
        if (!at_peak && !made)
            continue;
        if ((st = row_of(&b, a->stack, &r, err)) != GM_OK)
            break;
        if (r == NO_ROW) {
            out->other_at_peak += at_peak ? a->bytes : 0;
            out->other_allocated += made ? a->bytes : 0;
            continue;
        }
        if (at_peak) {
            out->rows[r].bytes_at_peak += a->bytes;
            out->rows[r].count_at_peak++;
        }
        if (made) {
            out->rows[r].bytes_allocated += a->bytes;
            out->rows[r].count_allocated++;
        }
    }
    gm_free(b.row_of_stack);
    if (st != GM_OK) {
        gm_analysis_files_release(out);
        return st;
    }
    out->by_line = b.by_line;
    if (out->n)
        qsort(out->rows, out->n, sizeof(*out->rows), cmp_rows);
    return GM_OK;
}

void gm_analysis_files_release(struct gm_analysis_files *f)
{
    gm_free(f->rows);
    memset(f, 0, sizeof(*f));
}

static int64_t delta(const struct gm_analysis_file_change *c)
{
    return (int64_t)(c->b ? c->b->bytes_at_peak : 0) - (int64_t)(c->a ? c->a->bytes_at_peak : 0);
}

static int cmp_changes(const void *x, const void *y)
{
    const struct gm_analysis_file_change *a = x, *b = y;
    uint64_t da = (uint64_t)llabs(a->delta_at_peak), db = (uint64_t)llabs(b->delta_at_peak);
    if (da != db)
        return da > db ? -1 : 1;
    int c = strcmp(a->filename ? a->filename : "", b->filename ? b->filename : "");
    return c ? c : strcmp(a->function ? a->function : "", b->function ? b->function : "");
}

enum gm_status gm_analysis_files_compare(const struct gm_analysis_files *a,
                                         const struct gm_analysis_files *b,
                                         struct gm_analysis_file_change **out, size_t *n,
                                         struct gm_error *err)
{
    struct gm_analysis_file_change *v = gm_calloc(a->n + b->n + 1, sizeof(*v));
    size_t m = 0;
    *out = NULL;
    *n = 0;
    if (!v)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "files: out of memory");
    for (size_t i = 0; i < a->n; i++)
        v[m++] = (struct gm_analysis_file_change){a->rows[i].filename, a->rows[i].function,
                                                  &a->rows[i], NULL, 0};
    /* rows of b join a's row of the same file and function (rows are few: a linear search) */
    for (size_t i = 0; i < b->n; i++) {
        size_t j;
        for (j = 0; j < a->n; j++)
            if (!v[j].b && same(v[j].filename, b->rows[i].filename) &&
                same(v[j].function, b->rows[i].function) &&
                (!a->by_line || v[j].a->first_line == b->rows[i].first_line))
                break;
        if (j < a->n)
            v[j].b = &b->rows[i];
        else
            v[m++] = (struct gm_analysis_file_change){b->rows[i].filename, b->rows[i].function,
                                                      NULL, &b->rows[i], 0};
    }
    for (size_t i = 0; i < m; i++)
        v[i].delta_at_peak = delta(&v[i]);
    qsort(v, m, sizeof(*v), cmp_changes);
    *out = v;
    *n = m;
    return GM_OK;
}

static void json_row(struct gm_json *w, const struct gm_analysis_file_row *r)
{
    gm_json_begin_object(w);
    gm_json_kv_str(w, "filename", r->filename);
    gm_json_kv_str(w, "function", r->function);
    gm_json_kv_i64(w, "first_line", r->first_line);
    gm_json_kv_u64(w, "bytes_at_peak", r->bytes_at_peak);
    gm_json_kv_u64(w, "count_at_peak", r->count_at_peak);
    gm_json_kv_u64(w, "bytes_allocated", r->bytes_allocated);
    gm_json_kv_u64(w, "count_allocated", r->count_allocated);
    gm_json_end_object(w);
}

enum gm_status gm_analysis_files_json(FILE *f, const char *const *paths, int32_t device,
                                      const char *suffix, const struct gm_analysis_files *a,
                                      const struct gm_analysis_files *b,
                                      const struct gm_analysis_file_change *changes,
                                      size_t n_changes, struct gm_error *err)
{
    struct gm_json w;
    gm_json_init(&w, f, GM_JSON_PRETTY);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "schema", "gpumem.snapshot.files/1");
    gm_json_kv_str(&w, "gpumem_version", gm_version());
    gm_json_key(&w, "files");
    gm_json_begin_array(&w);
    gm_json_str(&w, paths[0]);
    if (b)
        gm_json_str(&w, paths[1]);
    gm_json_end_array(&w);
    gm_json_kv_i64(&w, "device", device);
    gm_json_kv_str(&w, "source_file", suffix);
    gm_json_key(&w, "rows");
    gm_json_begin_array(&w);
    if (!b) {
        for (size_t i = 0; i < a->n; i++)
            json_row(&w, &a->rows[i]);
    } else {
        for (size_t i = 0; i < n_changes; i++) {
            gm_json_begin_object(&w);
            gm_json_kv_str(&w, "filename", changes[i].filename);
            gm_json_kv_str(&w, "function", changes[i].function);
            gm_json_key(&w, "a");
            if (changes[i].a)
                json_row(&w, changes[i].a);
            else
                gm_json_null(&w);
            gm_json_key(&w, "b");
            if (changes[i].b)
                json_row(&w, changes[i].b);
            else
                gm_json_null(&w);
            gm_json_kv_i64(&w, "delta_at_peak_bytes", changes[i].delta_at_peak);
            gm_json_end_object(&w);
        }
    }
    gm_json_end_array(&w);
    if (!b) {
        gm_json_kv_u64(&w, "other_at_peak_bytes", a->other_at_peak);
        gm_json_kv_u64(&w, "other_allocated_bytes", a->other_allocated);
    } else {
        gm_json_key(&w, "other_at_peak_bytes");
        gm_json_begin_array(&w);
        gm_json_u64(&w, a->other_at_peak);
        gm_json_u64(&w, b->other_at_peak);
        gm_json_end_array(&w);
    }
    gm_json_end_object(&w);
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the files document failed");
    return GM_OK;
}
