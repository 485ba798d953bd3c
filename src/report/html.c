/* SPDX-License-Identifier: MIT */
/* html.c - the self-contained HTML report (see report.h): the page, its ranks, and the
 * data of each rank.
 *
 * Page layout: <style> (report.css) | the views' markup | <script type="application/json"
 * id="gm-data"> (the model below, "</" escaped) | <script> (report.js).
 *
 * Data model "gpumem.report/2" (x on each device's axis, gpumem/lod.h: microseconds since
 * its first event when every event has time_us, else the event index; "k" an event index,
 * -1 the initial state):
 *   {schema, title, gpumem_version, categories[], phases[],
 *    ranks[{title, meta{...}, settings[[key, value]], summary{device, peak, peak_k, phase,
 *           max_reserved, at_peak[7]} | null  (gm_analysis_rank()),
 *           digest{host, series[allocated bytes]}  (a rank read from its digest: no devices),
 *           frames[[filename, name, line, user]], stacks{id: [frame...]},
 *           devices[{device, n_events, has_trace, n_segments, x_unit, t0_us, x0, x1,
 *                    initial, final,
 *                    lod{n, amin[], amax[], kmax[], rmax[], krmax[], rest[7][] | absent}
 *                      | null  (uniform buckets of the axis, each with the exact least and
 *                      most allocated and the most reserved that held in it, and the events
 *                      where the most first held; the page takes unions of whole buckets;
 *                      rest: by category, what is not a band after kmax as runs [value,
 *                      buckets, ...], null for a category never there, absent without an
 *                      analysis),
 *                    uphases[[x0, x1, name]], peak{bytes, k, x, time_us, reserved,
 *                      max_reserved, n_live, phase, iteration (from 1; null: none), uphase},
 *                    bands[[k_alloc, k_free, x0, x1, bytes, cat, stack, addr, stream]]
 *                      (gpumem/bands.h), n_edge, n_allocs, rbands[{x0, x1, b[band...]}],
 *                    series{x[], k[], r[], c[7][]}, runs[[x0, x1, phase]],
 *                    iterations[{n (from 1), x0, x1, ...}],
 *                    leaks[...], ooms[...], frag{...}, at_peak_cat[7], ...,
 *                    at_peak[[bytes, count, stack, [bytes by category] | null]],
 *                    segtl{...}, marks[[k, what]], state{...} | null  (html_state.c)}]}],
 *    imbalance{ranks, max_rank, min_rank, max_peak, min_peak, ratio, spread, category,
 *              category_diff} | null  (two ranks or more: gm_analysis_ranks()),
 *    job{peak, peak_rank, rank_from, rank_ids[], outliers[]} | null  (the job's peak and the
 *        page index of its rank, each rank's number, gm_analysis_rank_outliers()),
 *    account{processes[...]} | null  (gpumem account of the same run: html_account.c)} */
#define _GNU_SOURCE /* fopencookie(): gm_report_html() writes its rank straight into the page */
#include "base/buf.h"
#include "base/json_room.h"
#include "base/outbuf.h"
#include "base/vec.h"
#include "gpumem/report.h"

#include "gpumem/arena.h"
#include "gpumem/json.h"
#include "gpumem/units.h"
#include "gpumem/version.h"

#include "report/report_int.h"
#include "report_assets.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void gm_report_num(struct gm_json *w, double v)
{
    /* integers exactly, the rest with 3 decimals (x positions); beyond int64 in thousandths
     * (a damaged file's times; the conversion would be undefined, C11 6.3.1.4p1) and NaN as
     * they are */
    if (gm_report_num_is_int(v))
        gm_json_i64(w, (int64_t)v);
    else if (v > -9.2e15 && v < 9.2e15) /* v * 1e3 within int64 (below 2^63 = 9.22e18) */
        gm_json_double(w, (double)(int64_t)(v * 1e3) / 1e3);
    else
        gm_json_double(w, v);
}

char *gm_report_stream_text(char *p, uint64_t stream)
{
    *p++ = '"';
    p = gm_fmt_u64_room(p, stream); /* "%llu": every band has one */
    *p++ = '"';
    return p;
}

void gm_report_stream(struct gm_json *w, uint64_t stream)
{
    char *p = gm_json_room(w, GM_REPORT_STREAM_ROOM);
    if (p) {
        gm_json_room_end(w, gm_report_stream_text(p, stream));
    } else {
        char b[GM_REPORT_STREAM_ROOM + 1];
        *gm_report_stream_text(b, stream) = '\0';
        gm_json_raw(w, b);
    }
}

/* ---- frames and stacks that a rank's data refers to ---- */

static void write_stacks(struct gm_report_ctx *c)
{
    const struct gm_snapshot *snap = c->snap;
    struct gm_json *w = c->w;
    uint32_t *dense = gm_malloc((snap->n_frames + 1) * sizeof(uint32_t));
    uint32_t ids[256], n_dense = 0;

    if (!dense) {
        c->nomem = true;
        return;
    }
    for (size_t i = 0; i < snap->n_frames; i++)
        dense[i] = UINT32_MAX;
    gm_json_key(w, "stacks");
    gm_json_begin_object(w);
    for (size_t s = 1; s < snap->n_stacks; s++) {
        char key[24];
        size_t n;
        if (!c->stack_used[s])
            continue;
        n = gm_snapshot_stack_frames(snap, (uint32_t)s, ids, 256);
        if (n > 256)
            n = 256;
        snprintf(key, sizeof(key), "%zu", s);
        gm_json_key(w, key);
        gm_json_begin_array(w);
        for (size_t i = 0; i < n; i++) {
            if (dense[ids[i]] == UINT32_MAX)
                dense[ids[i]] = n_dense++;
            gm_json_u64(w, dense[ids[i]]);
        }
        gm_json_end_array(w);
    }
    gm_json_end_object(w);
    {
        /* frames in dense order */
        uint32_t *order = gm_malloc((n_dense + 1) * sizeof(uint32_t));
        if (!order) {
            c->nomem = true;
            gm_free(dense);
            return;
        }
        for (size_t i = 0; i < snap->n_frames; i++)
            if (dense[i] != UINT32_MAX)
                order[dense[i]] = (uint32_t)i;
        gm_json_key(w, "frames");
        gm_json_begin_array(w);
        for (uint32_t i = 0; i < n_dense; i++) {
            const struct gm_snapshot_frame *f = &snap->frames[order[i]];
            gm_json_begin_array(w);
            gm_json_str(w, f->filename);
            gm_json_str(w, f->name);
            gm_json_i64(w, f->line);
            gm_json_u64(w, gm_snapshot_frame_is_user(f));
            gm_json_end_array(w);
        }
        gm_json_end_array(w);
        gm_free(order);
    }
    gm_free(dense);
}

static void write_meta(struct gm_report_ctx *c, const char *title)
{
    const struct gm_snapshot *snap = c->snap;
    struct gm_json *w = c->w;
    gm_json_kv_str(w, "title", title);
    gm_json_key(w, "meta");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "file_size", snap->file_size);
    gm_json_kv_str(w, "generation", gm_snapshot_gen_name(snap->gen));
    gm_json_kv_str(w, "torch", gm_snapshot_gen_torch(snap->gen));
    gm_json_kv_i64(w, "protocol", snap->protocol);
    gm_json_kv_bool(w, "is_list", snap->is_list);
    gm_json_kv_u64(w, "segments", snap->n_segments);
    gm_json_kv_u64(w, "blocks", snap->n_blocks);
    gm_json_kv_u64(w, "events", snap->n_events);
    gm_json_kv_u64(w, "frames", snap->n_frames);
    gm_json_kv_u64(w, "stacks", gm_snapshot_unique_stacks(snap));
    gm_json_kv_bool(w, "has_time", snap->has_time);
    if (snap->has_time) {
        gm_json_kv_i64(w, "time_first_us", snap->time_first_us);
        gm_json_kv_i64(w, "time_last_us", snap->time_last_us);
    }
    gm_json_kv_u64(w, "annotations", snap->n_annotations);
    gm_json_kv_u64(w, "unknown_actions", snap->n_unknown_actions);
    gm_json_kv_bool(w, "trace_overflowed", snap->trace_overflowed);
    gm_json_kv_bool(w, "host_data", snap->has_host_data);
    if (snap->has_host_data) {
        /* pinned host memory: its own figures, in no device's */
        struct gm_snapshot_figures hf;
        gm_snapshot_host_figures(snap, &hf);
        gm_json_kv_u64(w, "host_reserved", hf.reserved_bytes);
        gm_json_kv_u64(w, "host_allocated", hf.allocated_bytes);
        gm_json_kv_u64(w, "host_events", snap->host.n_events);
    }
    gm_json_kv_str(w, "device_kind", gm_device_kind_name(snap->device_kind));
    gm_json_kv_bool(w, "has_analysis", c->an != NULL);
    gm_json_end_object(w);
    gm_json_key(w, "settings");
    gm_json_begin_array(w);
    for (size_t i = 0; i < snap->n_settings; i++) {
        const struct gm_snapshot_setting *s = &snap->settings[i];
        char v[64];
        gm_json_begin_array(w);
        gm_json_str(w, s->key);
        switch (s->type) {
        case GM_SETTING_INT:
            snprintf(v, sizeof(v), "%lld", (long long)s->i);
            gm_json_str(w, v);
            break;
        case GM_SETTING_FLOAT:
            snprintf(v, sizeof(v), "%g", s->d);
            gm_json_str(w, v);
            break;
        case GM_SETTING_BOOL:
            gm_json_str(w, s->i ? "True" : "False");
            break;
        case GM_SETTING_NONE:
            gm_json_str(w, "None");
            break;
        case GM_SETTING_STR:
        case GM_SETTING_OTHER:
            gm_json_str(w, s->s ? s->s : "");
            break;
        }
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
}

/* ---- the page ---- */

struct gm_report_page {
    struct gm_report_opts o;
    char **ranks; /* each rank's JSON object */
    size_t *len;
    struct gm_rank *sum; /* each rank's figures (gm_analysis_rank()) */
    bool *has_sum;
    size_t n, cap;
};

enum gm_status gm_report_page_new(const struct gm_report_opts *o, struct gm_report_page **out,
                                  struct gm_error *err)
{
    struct gm_report_page *p = gm_calloc(1, sizeof(*p));
    *out = NULL;
    if (!p)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
    if (o)
        p->o = *o;
    *out = p;
    return GM_OK;
}

void gm_report_page_free(struct gm_report_page *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        gm_free(p->ranks[i]); /* gm_buf_file()'s buffers */
    gm_free(p->ranks);
    gm_free(p->len);
    gm_free(p->sum);
    gm_free(p->has_sum);
    gm_free(p);
}

/* Room for one more rank: four arrays of one capacity, each grown by the same rule from
 * the same size. */
static bool page_grow(struct gm_report_page *p)
{
    size_t need = p->cap + 1, c = p->cap;
    if (!GM_VEC_RESERVE(p->ranks, c, need, NULL))
        return false;
    c = p->cap;
    if (!GM_VEC_RESERVE(p->len, c, need, NULL))
        return false;
    c = p->cap;
    if (!GM_VEC_RESERVE(p->sum, c, need, NULL))
        return false;
    c = p->cap;
    if (!GM_VEC_RESERVE(p->has_sum, c, need, NULL))
        return false;
    p->cap = c;
    return true;
}

static void write_summary(struct gm_json *w, const struct gm_rank *s, bool has)
{
    gm_json_key(w, "summary");
    if (!has) {
        gm_json_null(w);
        return;
    }
    gm_json_begin_object(w);
    gm_json_kv_i64(w, "device", s->device);
    gm_json_kv_u64(w, "peak", s->value[GM_RANK_PEAK]);
    gm_json_kv_i64(w, "peak_k", s->peak_event);
    gm_json_kv_str(w, "phase", gm_phase_name((enum gm_phase)s->peak_phase));
    gm_json_kv_u64(w, "max_reserved", s->value[GM_RANK_PEAK_RESERVED]);
    gm_json_key(w, "at_peak");
    gm_json_begin_array(w);
    for (int cat = 0; cat < GM_CATEGORY_COUNT; cat++)
        gm_json_u64(w, s->at_peak[cat]);
    gm_json_end_array(w);
    gm_json_end_object(w);
}

/* Room for rank p->n, and its figures (gm_analysis_rank()) for the page's head. */
static enum gm_status rank_summary(struct gm_report_page *p, const struct gm_analysis *an,
                                   const char *title, struct gm_error *err)
{
    if (p->n == p->cap && !page_grow(p))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
    p->has_sum[p->n] = false;
    if (an)
        return gm_analysis_rank(an, p->n, title, &p->sum[p->n], &p->has_sum[p->n], err);
    return GM_OK;
}

/* Rank r's object of the page data (its figures from rank_summary()) to 'f', which nothing
 * else writes to meanwhile. */
static enum gm_status rank_write(const struct gm_report_page *p, size_t r,
                                 const struct gm_snapshot *snap, const struct gm_analysis *an,
                                 const char *title, FILE *f, struct gm_error *err)
{
    struct gm_json w;
    struct gm_report_ctx c;
    enum gm_status st = GM_OK;

    memset(&c, 0, sizeof(c));
    c.snap = snap;
    c.an = an;
    c.o = &p->o;
    c.w = &w;
    c.stack_used = gm_calloc(snap->n_stacks + 1, 1);
    if (!c.stack_used)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
    gm_json_init(&w, f, GM_JSON_BUFFERED); /* f is written by w alone */
    gm_json_begin_object(&w);
    write_meta(&c, title ? title : p->o.title ? p->o.title : "snapshot");
    write_summary(&w, &p->sum[r], p->has_sum[r]);
    gm_json_key(&w, "devices");
    gm_json_begin_array(&w);
    for (size_t d = 0; d < snap->n_devices && st == GM_OK; d++) {
        const struct gm_snapshot_device *sd = &snap->devices[d];
        const struct gm_analysis_device *ad =
            an ? gm_analysis_device_by_index(an, sd->index) : NULL;
        st = gm_report_device(&c, sd, ad, err);
    }
    gm_json_end_array(&w);
    if (st == GM_OK) {
        write_stacks(&c);
        gm_json_end_object(&w);
        if (!gm_json_finish(&w) || c.nomem)
            st = gm_fail(err, c.nomem ? GM_ERR_NOMEM : GM_ERR_INTERNAL, GM_NO_OFFSET,
                         "report: building the page data failed");
    }
    gm_free(c.stack_used);
    return st;
}

enum gm_status gm_report_page_add(struct gm_report_page *p, const struct gm_snapshot *snap,
                                  const struct gm_analysis *an, const char *title,
                                  struct gm_error *err)
{
    struct gm_buf json = GM_BUF_INIT;
    FILE *mem;
    enum gm_status st = gm_analysis_require_series(an, "report", err);

    if (st != GM_OK || (st = rank_summary(p, an, title, err)) != GM_OK)
        return st;
    mem = gm_buf_file(&json);
    if (!mem)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
    /* the buffered writer hands over its text in pieces of its whole buffer: unbuffered, each
     * goes to the page's buffer in one copy, not first into the stream's own buffer (mem is
     * written by w alone: small writes would each be a call of the cookie).  Refused, the
     * stream stays buffered (the same text, one copy more), with no error left on it */
    if (setvbuf(mem, NULL, _IONBF, 0) != 0)
        clearerr(mem);
    st = rank_write(p, p->n, snap, an, title, mem, err);
    if (fclose(mem) != 0 && st == GM_OK)
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
    if (st != GM_OK) {
        gm_buf_release(&json);
        return st;
    }
    p->ranks[p->n] = json.data;
    p->len[p->n++] = json.len;
    return GM_OK;
}

enum gm_status gm_report_page_add_digest(struct gm_report_page *p, const struct gm_digest *d,
                                         const char *title, struct gm_error *err)
{
    struct gm_json w;
    struct gm_buf json = GM_BUF_INIT;
    FILE *mem;
    if (p->n == p->cap && !page_grow(p))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
    if (!(mem = gm_buf_file(&json)))
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
    gm_digest_rank(d, p->n, title, &p->sum[p->n], &p->has_sum[p->n]);
    gm_json_init(&w, mem, 0);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "title", title ? title : d->file);
    gm_json_key(&w, "meta");
    gm_json_begin_object(&w);
    gm_json_kv_bool(&w, "digest", true);
    gm_json_kv_str(&w, "snapshot", d->file);
    gm_json_kv_bool(&w, "has_analysis", true);
    gm_json_end_object(&w);
    gm_json_key(&w, "settings");
    gm_json_begin_array(&w);
    gm_json_end_array(&w);
    write_summary(&w, &p->sum[p->n], p->has_sum[p->n]);
    gm_json_key(&w, "devices");
    gm_json_begin_array(&w);
    gm_json_end_array(&w);
    gm_json_key(&w, "frames");
    gm_json_begin_array(&w);
    gm_json_end_array(&w);
    gm_json_key(&w, "stacks");
    gm_json_begin_object(&w);
    gm_json_end_object(&w);
    gm_json_key(&w, "digest");
    gm_json_begin_object(&w);
    if (d->host)
        gm_json_kv_str(&w, "host", d->host);
    else
        gm_json_kv_null(&w, "host");
    gm_json_key(&w, "series"); /* the allocated bytes at the digest's points, in order */
    gm_json_begin_array(&w);
    for (size_t i = 0; i < d->n_series; i++)
        gm_json_u64(&w, d->series[i].total);
    gm_json_end_array(&w);
    gm_json_end_object(&w);
    gm_json_end_object(&w);
    if (fclose(mem) != 0 || !json.data) {
        gm_buf_release(&json);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
    }
    p->ranks[p->n] = json.data;
    p->len[p->n++] = json.len;
    return GM_OK;
}

/* "job": {peak, peak_rank (the page's index of the rank that holds it), rank_ids[] (each
 * page rank's number, null without a device), rank_from, outliers[] (page indexes)} | null */
static void write_job(struct gm_json *w, const struct gm_ranks *rs, size_t n_page)
{
    size_t *idx = n_page ? gm_calloc(n_page, sizeof(*idx)) : NULL;
    size_t n_out;
    gm_json_key(w, "job");
    if (!rs->n_ranks || !idx) {
        gm_free(idx);
        gm_json_null(w);
        return;
    }
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "peak", rs->spread[GM_RANK_PEAK].max);
    gm_json_kv_u64(w, "peak_rank", rs->ranks[rs->spread[GM_RANK_PEAK].max_rank].file);
    gm_json_kv_str(w, "rank_from", gm_rank_source_name((enum gm_rank_source)rs->source));
    for (size_t i = 0; i < n_page; i++)
        idx[i] = SIZE_MAX;
    for (size_t i = 0; i < rs->n_ranks; i++)
        if (rs->ranks[i].file < n_page)
            idx[rs->ranks[i].file] = i;
    gm_json_key(w, "rank_ids");
    gm_json_begin_array(w);
    for (size_t i = 0; i < n_page; i++) {
        if (idx[i] == SIZE_MAX)
            gm_json_null(w);
        else
            gm_json_u64(w, rs->ranks[idx[i]].id);
    }
    gm_json_end_array(w);
    n_out = gm_analysis_rank_outliers(rs, idx);
    gm_json_key(w, "outliers");
    gm_json_begin_array(w);
    for (size_t i = 0; i < n_out; i++)
        gm_json_u64(w, rs->ranks[idx[i]].file);
    gm_json_end_array(w);
    gm_json_end_object(w);
    gm_free(idx);
}

static void put_html_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '&':
            fputs("&amp;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

static void put_chunks(FILE *f, const char *const *chunks)
{
    for (; *chunks; chunks++)
        fputs(*chunks, f);
}

/* Copy JSON text into a <script> element: the '<' of "</" and "<!" becomes "\u003c" (the
 * same character to JSON) so that no string in the data can close the element or open a
 * comment. */
/* Whether a '<' followed by 'next' must be written escaped: the one rule of both the copy
 * below and the streamed copy (script_write()) */
static bool script_escapes(char next)
{
    return next == '/' || next == '!';
}

static void put_json_for_script(FILE *f, const char *s, size_t n)
{
    size_t run = 0; /* start of the bytes not written yet */
    const char *lt;
    /* memchr: the data are megabytes with few '<' */
    for (size_t i = 0; i < n && (lt = memchr(s + i, '<', n - i)) != NULL;) {
        i = (size_t)(lt - s);
        if (i + 1 < n && script_escapes(s[i + 1])) {
            fwrite(s + run, 1, i - run, f);
            fputs("\\u003c", f);
            run = i + 1;
        }
        i++;
    }
    fwrite(s + run, 1, n - run, f);
}

/* The page up to its data's ranks, escaped (put_json_for_script()): what comes before them
 * and the data's head, made of every rank's figures (rank_summary()). */
static enum gm_status page_head(struct gm_report_page *p, FILE *f, struct gm_error *err)
{
    const char *title = p->o.title ? p->o.title : "snapshot";
    struct gm_json w;

    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
          "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n"
          "<link rel=\"icon\" href=\"data:,\">\n<title>gpumem report: ",
          f);
    put_html_escaped(f, title);
    fputs("</title>\n<style>\n", f);
    put_chunks(f, gm_report_css);
    fputs("</style>\n</head>\n<body>\n", f);
    put_chunks(f, gm_report_body);
    fputs("<script type=\"application/json\" id=\"gm-data\">", f);
    {
        /* the head of the data (the ranks' objects follow it) */
        struct gm_buf head = GM_BUF_INIT;
        FILE *mem = gm_buf_file(&head);
        if (!mem)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
        gm_json_init(&w, mem, 0);
        gm_json_begin_object(&w);
        gm_json_kv_str(&w, "schema", "gpumem.report/2");
        gm_json_kv_str(&w, "title", title);
        gm_json_kv_str(&w, "gpumem_version", gm_version());
        gm_json_key(&w, "categories");
        gm_json_begin_array(&w);
        for (int cat = 0; cat < GM_CATEGORY_COUNT; cat++)
            gm_json_str(&w, gm_category_name((enum gm_category)cat));
        gm_json_end_array(&w);
        gm_json_key(&w, "phases");
        gm_json_begin_array(&w);
        for (int ph = 0; ph < GM_PHASE_COUNT; ph++)
            gm_json_str(&w, gm_phase_name((enum gm_phase)ph));
        gm_json_end_array(&w);
        gm_json_key(&w, "imbalance");
        {
            /* the ranks that have a device, in the page's order (gm_rank.file: their index) */
            struct gm_rank *r = gm_malloc((p->n ? p->n : 1) * sizeof(*r));
            struct gm_ranks rs;
            size_t nr = 0;
            enum gm_status st;
            if (!r) {
                fclose(mem);
                gm_buf_release(&head);
                return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
            }
            for (size_t i = 0; i < p->n; i++)
                if (p->has_sum[i])
                    r[nr++] = p->sum[i];
            st = gm_analysis_ranks(r, nr, &rs, err);
            gm_free(r);
            if (st != GM_OK) {
                fclose(mem);
                gm_buf_release(&head);
                return st;
            }
            if (p->n >= 2 && rs.n_ranks >= 2) {
                const struct gm_rank_spread *sp = &rs.spread[GM_RANK_PEAK];
                gm_json_begin_object(&w);
                gm_json_kv_u64(&w, "ranks", rs.n_ranks);
                gm_json_kv_u64(&w, "max_rank", rs.ranks[sp->max_rank].file);
                gm_json_kv_u64(&w, "min_rank", rs.ranks[sp->min_rank].file);
                gm_json_kv_u64(&w, "max_peak", sp->max);
                gm_json_kv_u64(&w, "min_peak", sp->min);
                gm_json_kv_u64(&w, "spread", sp->max - sp->min);
                gm_json_kv_double(&w, "ratio", rs.peak_ratio);
                gm_json_kv_u64(&w, "category", rs.category);
                gm_json_kv_i64(&w, "category_diff", rs.category_bytes);
                gm_json_end_object(&w);
            } else {
                gm_json_null(&w);
            }
            write_job(&w, &rs, p->n);
            gm_analysis_ranks_release(&rs);
        }
        gm_json_key(&w, "account");
        gm_report_account(&w, p->o.account);
        gm_json_key(&w, "ranks");
        gm_json_begin_array(&w);
        fflush(mem);
        put_json_for_script(f, head.data, head.len);
        fclose(mem);
        gm_buf_release(&head);
    }
    return GM_OK;
}

/* The rest of the page after the data's ranks. */
static enum gm_status page_tail(FILE *f, struct gm_error *err)
{
    fputs("]}</script>\n<script>\n", f);
    put_chunks(f, gm_report_js);
    fputs("</script>\n</body>\n</html>\n", f);
    if (fflush(f) != 0 || ferror(f))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "report: write error");
    return GM_OK;
}

enum gm_status gm_report_page_write(struct gm_report_page *p, FILE *f, struct gm_error *err)
{
    enum gm_status st = page_head(p, f, err);
    if (st != GM_OK)
        return st;
    for (size_t i = 0; i < p->n; i++) {
        if (i)
            fputc(',', f);
        put_json_for_script(f, p->ranks[i], p->len[i]);
    }
    return page_tail(f, err);
}

static ssize_t script_write(void *cookie, const char *buf, size_t n)
{
    struct gm_report_script *o = cookie;
    if (n == 0)
        return 0;
    if (o->lt)
        fputs(script_escapes(buf[0]) ? "\\u003c" : "<", o->f);
    o->lt = buf[n - 1] == '<';
    put_json_for_script(o->f, buf, o->lt ? n - 1 : n);
    return ferror(o->f) ? -1 : (ssize_t)n;
}

static int script_close(void *cookie)
{
    struct gm_report_script *o = cookie;
    if (o->lt)
        fputc('<', o->f);
    o->lt = false;
    return ferror(o->f) ? EOF : 0;
}

FILE *gm_report_script_open(struct gm_report_script *s, FILE *f)
{
    cookie_io_functions_t io = {NULL, script_write, NULL, script_close};
    s->f = f;
    s->lt = false;
    return fopencookie(s, "w", io);
}

/* One rank written as it is rendered, straight into the page (not gathered first as
 * gm_report_page_add() does: a page of millions of values would take that many fresh
 * bytes): the head needs only this rank's figures. */
enum gm_status gm_report_html(FILE *f, const struct gm_snapshot *snap, const struct gm_analysis *an,
                              const struct gm_report_opts *o, struct gm_error *err)
{
    struct gm_report_page *p;
    struct gm_report_script so;
    FILE *data;
    enum gm_status st = gm_analysis_require_series(an, "report", err);

    if (st != GM_OK || (st = gm_report_page_new(o, &p, err)) != GM_OK)
        return st;
    if ((st = rank_summary(p, an, NULL, err)) != GM_OK)
        goto out_free;
    p->ranks[0] = NULL; /* written below */
    p->len[0] = 0;
    p->n = 1;
    if ((st = page_head(p, f, err)) != GM_OK)
        goto out_free;
    data = gm_report_script_open(&so, f);
    if (!data) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "report: out of memory");
        goto out_free;
    }
    /* unbuffered: the JSON writer's pieces go on as they are (see gm_report_page_add()) */
    if (setvbuf(data, NULL, _IONBF, 0) != 0)
        clearerr(data);
    st = rank_write(p, 0, snap, an, NULL, data, err);
    if (fclose(data) != 0 && st == GM_OK)
        st = gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "report: write error");
    if (st == GM_OK)
        st = page_tail(f, err);
out_free:
    gm_report_page_free(p);
    return st;
}
