/* SPDX-License-Identifier: MIT */
/* pprof.c - the stacks alive at the peak (or after one event) as a pprof profile: a gzip'd
 * perftools.profiles.Profile (github.com/google/pprof, proto/profile.proto), encoded here.
 *
 * Protocol buffers wire format, as used: a field is a varint key (field number << 3 | wire
 * type), then a varint (type 0) or a varint length and that many bytes (type 2: strings,
 * messages, packed repeated integers).  The fields written:
 *
 *   Profile   1 sample_type: ValueType  2 sample: Sample  4 location: Location
 *             5 function: Function  6 string_table: string  9 time_nanos
 *             11 period_type: ValueType  12 period  14 default_sample_type
 *   ValueType 1 type, 2 unit (string table indexes)
 *   Sample    1 location_id (packed, the leaf first)  2 value (packed)  3 label: Label
 *   Label     1 key, 2 str (string table indexes), 3 num
 *   Location  1 id  4 line: Line     Line  1 function_id  2 line
 *   Function  1 id  2 name  3 system_name  4 filename (string table indexes)
 *
 * Sample types: objects/count and space/bytes (the default, as a heap profile's inuse_space):
 * one sample per stack alive per device, labelled device=N.  A frame of the snapshot is one
 * location and one function (id = frame id + 1); string_table[0] is "". */
#include "export/export_int.h"

#include "base/buf.h"
#include "gpumem/arena.h"

#include <string.h>
#include <zlib.h>

#define STACK_CAP 256

/* A message being encoded, with a sticky status. */
struct pb {
    struct gm_buf b;
    enum gm_status st;
    struct gm_error *err;
};

static void pb_init(struct pb *m, struct gm_error *err)
{
    gm_buf_init(&m->b, SIZE_MAX / 2);
    m->st = GM_OK;
    m->err = err;
}

static void pb_bytes(struct pb *m, const void *p, size_t n)
{
    if (m->st == GM_OK)
        m->st = gm_buf_append(&m->b, p, n, m->err);
}

static void pb_varint(struct pb *m, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            tmp[n] |= 0x80;
        n++;
    } while (v);
    pb_bytes(m, tmp, n);
}

static void pb_uint(struct pb *m, unsigned field, uint64_t v)
{
    pb_varint(m, (uint64_t)field << 3);
    pb_varint(m, v);
}

static void pb_len(struct pb *m, unsigned field, const void *p, size_t n)
{
    pb_varint(m, (uint64_t)field << 3 | 2);
    pb_varint(m, n);
    pb_bytes(m, p, n);
}

/* Append the message 'sub' as field 'field' of 'm' and empty 'sub' for the next one. */
static void pb_msg(struct pb *m, unsigned field, struct pb *sub)
{
    if (sub->st != GM_OK && m->st == GM_OK)
        m->st = sub->st;
    pb_len(m, field, sub->b.data, sub->b.len);
    sub->b.len = 0;
}

/* The string table: snapshot texts numbered on first use (by their distinct-text ids),
 * others appended as they come. */
struct strings {
    struct pb table; /* the string_table fields, in order */
    uint32_t *by_id; /* snapshot text id -> index + 1; 0: not yet */
    size_t n_ids;
    uint32_t n;
};

static uint32_t str_add(struct strings *s, const char *text)
{
    pb_len(&s->table, 6, text, strlen(text));
    return s->n++;
}

static uint32_t str_of(struct strings *s, uint32_t id, const char *text)
{
    if (id >= s->n_ids)
        return str_add(s, text);
    if (!s->by_id[id])
        s->by_id[id] = str_add(s, text) + 1;
    return s->by_id[id] - 1;
}

static void value_type(struct pb *m, unsigned field, struct pb *sub, uint32_t type, uint32_t unit)
{
    pb_uint(sub, 1, type);
    pb_uint(sub, 2, unit);
    pb_msg(m, field, sub);
}

/* Deflate 'len' bytes at 'p' into a gzip stream on 'f'. */
static enum gm_status gzip_write(FILE *f, const void *p, size_t len, struct gm_error *err)
{
    z_stream z;
    uint8_t out[16384] = {0};
    int zr;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "pprof: cannot start gzip");
    z.next_in = (Bytef *)(uintptr_t)p;
    z.avail_in = (uInt)len; /* checked by the caller: below 4 GiB */
    do {
        z.next_out = out;
        z.avail_out = sizeof(out);
        zr = deflate(&z, Z_FINISH);
        if (zr == Z_STREAM_ERROR ||
            fwrite(out, 1, sizeof(out) - z.avail_out, f) != sizeof(out) - z.avail_out) {
            deflateEnd(&z);
            return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "pprof: the write failed");
        }
    } while (zr != Z_STREAM_END);
    deflateEnd(&z);
    return GM_OK;
}

enum gm_status export_pprof(FILE *f, const struct gm_export_input *in,
                            const struct gm_export_opts *o, struct gm_error *err)
{
    const struct gm_snapshot *snap = in->snap;
    const struct gm_analysis *an = in->an;
    struct export_alive *alive;
    size_t n_alive;
    struct pb prof, sub, line, packed;
    struct strings s = {.n_ids = snap->n_strings};
    uint32_t ids[STACK_CAP];
    uint32_t none = (uint32_t)snap->n_frames; /* the "(no stack recorded)" frame */
    uint8_t *used;
    uint32_t k_objects, k_count, k_space, k_bytes, k_device;
    enum gm_status st = export_alive_collect(snap, an, o, &alive, &n_alive, err);
    if (st != GM_OK)
        return st;
    used = gm_calloc(snap->n_frames + 1, 1);
    s.by_id = gm_calloc(s.n_ids ? s.n_ids : 1, sizeof(*s.by_id));
    if (!used || !s.by_id) {
        gm_free(used);
        gm_free(s.by_id);
        export_alive_release(alive, n_alive);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "pprof: out of memory");
    }
    pb_init(&prof, err);
    pb_init(&sub, err);
    pb_init(&line, err);
    pb_init(&packed, err);
    pb_init(&s.table, err);
    str_add(&s, "");
    k_objects = str_add(&s, "objects");
    k_count = str_add(&s, "count");
    k_space = str_add(&s, "space");
    k_bytes = str_add(&s, "bytes");
    k_device = str_add(&s, "device");
    value_type(&prof, 1, &sub, k_objects, k_count);
    value_type(&prof, 1, &sub, k_space, k_bytes);
    for (size_t d = 0; d < n_alive; d++) {
        for (size_t g = 0; g < alive[d].n_groups; g++) {
            const struct gm_snapshot_live_group *gr = &alive[d].groups[g];
            size_t nf = gm_snapshot_stack_frames(snap, gr->stack, ids, STACK_CAP);
            if (nf > STACK_CAP)
                nf = STACK_CAP;
            if (!nf)
                used[none] = 1;
            for (size_t k = 0; k < nf; k++) {
                used[ids[k]] = 1;
                pb_varint(&packed, (uint64_t)ids[k] + 1); /* the leaf first */
            }
            if (!nf)
                pb_varint(&packed, (uint64_t)none + 1);
            pb_len(&sub, 1, packed.b.data, packed.b.len);
            packed.b.len = 0;
            pb_varint(&packed, gr->count);
            pb_varint(&packed, gr->bytes);
            pb_len(&sub, 2, packed.b.data, packed.b.len);
            packed.b.len = 0;
            pb_uint(&line, 1, k_device);
            pb_uint(&line, 3, (uint64_t)(int64_t)alive[d].device);
            pb_msg(&sub, 3, &line);
            pb_msg(&prof, 2, &sub);
        }
    }
    for (size_t i = 0; i <= snap->n_frames; i++) {
        if (!used[i])
            continue;
        pb_uint(&sub, 1, i + 1);
        pb_uint(&line, 1, i + 1);
        if (i < snap->n_frames && snap->frames[i].line > 0)
            pb_uint(&line, 2, (uint64_t)snap->frames[i].line);
        pb_msg(&sub, 4, &line);
        pb_msg(&prof, 4, &sub);
    }
    for (size_t i = 0; i <= snap->n_frames; i++) {
        uint32_t nm, fn = 0;
        if (!used[i])
            continue;
        if (i == none) {
            nm = str_add(&s, "(no stack recorded)");
        } else {
            const struct gm_snapshot_frame *fr = &snap->frames[i];
            nm = str_of(&s, fr->name_id, fr->name);
            if (fr->filename[0])
                fn = str_of(&s, fr->filename_id, fr->filename);
        }
        pb_uint(&sub, 1, i + 1);
        pb_uint(&sub, 2, nm);
        pb_uint(&sub, 3, nm);
        pb_uint(&sub, 4, fn);
        pb_msg(&prof, 5, &sub);
    }
    pb_bytes(&prof, s.table.b.data, s.table.b.len);
    if (snap->has_time)
        pb_uint(&prof, 9, (uint64_t)(snap->time_first_us * 1000));
    value_type(&prof, 11, &sub, k_space, k_bytes);
    pb_uint(&prof, 12, 1);
    pb_uint(&prof, 14, k_space);
    st = prof.st != GM_OK ? prof.st : s.table.st != GM_OK ? s.table.st : sub.st;
    if (st == GM_OK && prof.b.len > UINT32_MAX)
        st = gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "pprof: the profile exceeds 4 GiB");
    if (st == GM_OK)
        st = gzip_write(f, prof.b.data, prof.b.len, err);
    if (st == GM_OK && fflush(f) != 0)
        st = gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "pprof: the write failed");
    gm_buf_release(&prof.b);
    gm_buf_release(&sub.b);
    gm_buf_release(&line.b);
    gm_buf_release(&packed.b);
    gm_buf_release(&s.table.b);
    gm_free(used);
    gm_free(s.by_id);
    export_alive_release(alive, n_alive);
    return st;
}
