/* SPDX-License-Identifier: MIT */
/* json_writer.c - streaming JSON writer (see gpumem/json.h). */
#include "gpumem/json.h"

#include "base/json_room.h"
#include "base/outbuf.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void gm_json_init(struct gm_json *w, FILE *f, unsigned flags)
{
    memset(w, 0, offsetof(struct gm_json, buf));
    w->f = f;
    w->flags = flags;
    w->depth = 0;
    w->first[0] = true;
}

static void flush_buf(struct gm_json *w)
{
    if (w->n_buf && fwrite(w->buf, 1, w->n_buf, w->f) != w->n_buf)
        w->failed = true;
    w->n_buf = 0;
}

/* Every byte the writer writes goes through put(): to f at once, or gathered in buf. */
static void put(struct gm_json *w, const char *s, size_t n)
{
    if (!(w->flags & GM_JSON_BUFFERED)) {
        if (fwrite(s, 1, n, w->f) != n)
            w->failed = true;
        return;
    }
    if (n > sizeof(w->buf) - w->n_buf) {
        flush_buf(w);
        if (n > sizeof(w->buf)) {
            if (fwrite(s, 1, n, w->f) != n)
                w->failed = true;
            return;
        }
    }
    memcpy(w->buf + w->n_buf, s, n);
    w->n_buf += n;
}

static void put_c(struct gm_json *w, char c)
{
    if (!(w->flags & GM_JSON_BUFFERED)) {
        if (fputc(c, w->f) == EOF)
            w->failed = true;
        return;
    }
    if (w->n_buf == sizeof(w->buf))
        flush_buf(w);
    w->buf[w->n_buf++] = c;
}

#define put_lit(w, s) put((w), (s), sizeof(s) - 1)

static void newline_indent(struct gm_json *w)
{
    if (!(w->flags & GM_JSON_PRETTY))
        return;
    put_c(w, '\n');
    for (int i = 0; i < w->depth; i++)
        put_lit(w, "  ");
}

/* Called before every value: writes the separator, or checks that a key came first. */
static bool before_value(struct gm_json *w)
{
    if (w->failed)
        return false;
    if (w->depth > 0 && w->is_obj[w->depth]) {
        if (!w->want_value) {
            w->failed = true; /* a value inside an object without a key */
            return false;
        }
        w->want_value = false;
        return true;
    }
    if (w->depth == 0 && !w->first[0]) {
        w->failed = true; /* two top-level values */
        return false;
    }
    if (!w->first[w->depth])
        put_c(w, ',');
    if (w->depth > 0)
        newline_indent(w);
    w->first[w->depth] = false;
    return true;
}

static void open_level(struct gm_json *w, bool obj, char c)
{
    if (!before_value(w))
        return;
    if (w->depth + 1 >= GM_JSON_MAX_DEPTH) {
        w->failed = true;
        return;
    }
    put_c(w, c);
    w->depth++;
    w->first[w->depth] = true;
    w->is_obj[w->depth] = obj;
}

static void close_level(struct gm_json *w, bool obj, char c)
{
    if (w->failed)
        return;
    if (w->depth == 0 || w->is_obj[w->depth] != obj || w->want_value) {
        w->failed = true;
        return;
    }
    w->depth--;
    if (!w->first[w->depth + 1])
        newline_indent(w);
    put_c(w, c);
}

void gm_json_begin_object(struct gm_json *w)
{
    open_level(w, true, '{');
}

void gm_json_end_object(struct gm_json *w)
{
    close_level(w, true, '}');
}

void gm_json_begin_array(struct gm_json *w)
{
    open_level(w, false, '[');
}

void gm_json_end_array(struct gm_json *w)
{
    close_level(w, false, ']');
}

/* Length of a valid UTF-8 sequence starting at s (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF)
        len = 2, cp = c & 0x1F;
    else if (c >= 0xE0 && c <= 0xEF)
        len = 3, cp = c & 0x0F;
    else if (c >= 0xF0 && c <= 0xF4)
        len = 4, cp = c & 0x07;
    else
        return 0;
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/* 's' as JSON string content: runs of bytes that need no escape are written whole. */
static void escape(struct gm_json *w, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, run = 0; /* p[run..i) is plain text not written yet */
    while (i < n) {
        unsigned char c = p[i];
        size_t len;
        const char *esc;
        char u[8];
        if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
            i++;
            continue;
        }
        if (c >= 0x80 && (len = utf8_len(p + i, n - i)) != 0) {
            i += len;
            continue;
        }
        put(w, s + run, i - run);
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\r':
            esc = "\\r";
            break;
        case '\t':
            esc = "\\t";
            break;
        default:
            if (c < 0x20 || c == 0x7F) {
                snprintf(u, sizeof(u), "\\u%04x", c);
                esc = u;
            } else {
                esc = "\\ufffd"; /* not UTF-8 */
            }
            break;
        }
        put(w, esc, strlen(esc));
        run = ++i;
    }
    put(w, s + run, n - run);
}

void gm_json_escape(FILE *f, const char *s, size_t n)
{
    struct gm_json w;
    w.f = f;
    w.flags = 0; /* unbuffered: straight to f */
    w.n_buf = 0;
    w.failed = false;
    escape(&w, s, n);
}

void gm_json_key(struct gm_json *w, const char *key)
{
    if (w->failed)
        return;
    if (w->depth == 0 || !w->is_obj[w->depth] || w->want_value) {
        w->failed = true;
        return;
    }
    if (!w->first[w->depth])
        put_c(w, ',');
    newline_indent(w);
    w->first[w->depth] = false;
    put_c(w, '"');
    escape(w, key, strlen(key));
    if (w->flags & GM_JSON_PRETTY)
        put_lit(w, "\": ");
    else
        put_lit(w, "\":");
    w->want_value = true;
}

void gm_json_strn(struct gm_json *w, const char *s, size_t n)
{
    if (!before_value(w))
        return;
    put_c(w, '"');
    escape(w, s, n);
    put_c(w, '"');
}

void gm_json_str(struct gm_json *w, const char *s)
{
    if (!s) {
        gm_json_null(w);
        return;
    }
    gm_json_strn(w, s, strlen(s));
}

/* Where a number goes straight into the buffer, its separator written: the common case of
 * before_value() (a compact buffered writer, inside an array or after a key, with room for
 * a comma, a sign and GM_FMT_ROOM), else NULL and the caller takes the general path. */
static char *number_slot(struct gm_json *w)
{
    char *p;
    if (w->flags != GM_JSON_BUFFERED || w->failed || w->depth == 0 ||
        sizeof(w->buf) - w->n_buf < GM_FMT_ROOM + 2)
        return NULL;
    p = w->buf + w->n_buf;
    if (w->is_obj[w->depth]) {
        if (!w->want_value)
            return NULL; /* misuse: before_value() marks it */
        w->want_value = false;
        return p;
    }
    if (!w->first[w->depth])
        *p++ = ',';
    w->first[w->depth] = false;
    return p;
}

/* Integers are formatted by hand (gm_fmt_*, the same digits as printf's): a report writes
 * millions of them, and printf's format parsing cost more than the rest of the writer. */
void gm_json_u64(struct gm_json *w, uint64_t v)
{
    char buf[24], *p = number_slot(w);
    if (p)
        w->n_buf = (size_t)(gm_fmt_u64_room(p, v) - w->buf);
    else if (before_value(w))
        put(w, buf, (size_t)(gm_fmt_u64(buf, v, 0) - buf));
}

void gm_json_i64(struct gm_json *w, int64_t v)
{
    char buf[24], *p = number_slot(w);
    if (p)
        w->n_buf = (size_t)(gm_fmt_i64_room(p, v) - w->buf);
    else if (before_value(w))
        put(w, buf, (size_t)(gm_fmt_i64(buf, v) - buf));
}

/* The values after an array's first: a comma and the digits straight into the buffer, with
 * no separator logic per value (the writer is compact and buffered, inside an array, after
 * a value); false when the writer is not so and the caller writes them one by one. */
static bool rest_of_array(struct gm_json *w)
{
    return w->flags == GM_JSON_BUFFERED && !w->failed && w->depth > 0 && !w->is_obj[w->depth] &&
           !w->first[w->depth];
}

/* gm_json_u64s() (is_signed false) or gm_json_i64s(). */
static void ints(struct gm_json *w, const char *p, size_t n, size_t stride, bool is_signed)
{
    uint64_t u;
    int64_t v;
    size_t i = 0;
    for (; i < n && (i == 0 || !rest_of_array(w)); i++, p += stride) {
        memcpy(&u, p, sizeof(u));
        memcpy(&v, p, sizeof(v));
        if (is_signed)
            gm_json_i64(w, v);
        else
            gm_json_u64(w, u);
    }
    /* the text of the value before after its comma, copied again for an equal one: the
     * page's level of detail repeats most values (buckets that carry the one before) */
    char last[GM_FMT_ROOM + 4] = {','};
    size_t n_last = 0; /* with the comma */
    uint64_t last_u = 0;
    while (i < n) {
        char *q;
        size_t fit, end;
        if (sizeof(w->buf) - w->n_buf < GM_FMT_ROOM + 2)
            flush_buf(w);
        /* as many values as the buffer holds whatever their length, with no check each */
        q = w->buf + w->n_buf;
        fit = (sizeof(w->buf) - w->n_buf) / (GM_FMT_ROOM + 2);
        end = n - i < fit ? n : i + fit;
        for (; i < end; i++, p += stride) {
            memcpy(&u, p, sizeof(u));
            if (u != last_u || !n_last) {
                memcpy(&v, p, sizeof(v));
                n_last = (size_t)((is_signed ? gm_fmt_i64_room(last + 1, v)
                                             : gm_fmt_u64_room(last + 1, u)) -
                                  last);
                last_u = u;
            }
            memcpy(q, last, GM_FMT_ROOM + 2); /* the room of one value and its comma */
            q += n_last;
        }
        w->n_buf = (size_t)(q - w->buf);
    }
}

void gm_json_u64s(struct gm_json *w, const void *first, size_t n, size_t stride)
{
    ints(w, first, n, stride, false);
}

void gm_json_i64s(struct gm_json *w, const void *first, size_t n, size_t stride)
{
    ints(w, first, n, stride, true);
}

void gm_json_int_array(struct gm_json *w, const uint64_t *u, size_t nu, const int64_t *s, size_t ns)
{
    size_t need = 2 + (nu + ns) * (GM_FMT_ROOM + 2);
    char *p = NULL;
    if (w->flags == GM_JSON_BUFFERED && need <= sizeof(w->buf)) {
        if (sizeof(w->buf) - w->n_buf < need)
            flush_buf(w);
        p = number_slot(w);
    }
    if (!p) {
        gm_json_begin_array(w);
        for (size_t i = 0; i < nu; i++)
            gm_json_u64(w, u[i]);
        for (size_t i = 0; i < ns; i++)
            gm_json_i64(w, s[i]);
        gm_json_end_array(w);
        return;
    }
    *p++ = '[';
    for (size_t i = 0; i < nu; i++) {
        p = gm_fmt_u64_room(p, u[i]);
        *p++ = ',';
    }
    for (size_t i = 0; i < ns; i++) {
        p = gm_fmt_i64_room(p, s[i]);
        *p++ = ',';
    }
    if (nu + ns)
        p--; /* the last comma */
    *p++ = ']';
    w->n_buf = (size_t)(p - w->buf);
}

void gm_json_double(struct gm_json *w, double v)
{
    char buf[32];
    if (!isfinite(v)) {
        gm_json_null(w);
        return;
    }
    if (!before_value(w))
        return;
    /* The shortest of %.15g..%.17g that reads back exactly. */
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    put(w, buf, strlen(buf));
    /* Keep it a JSON number that reads back as floating point. */
    if (!strpbrk(buf, ".eEn"))
        put_lit(w, ".0");
}

void gm_json_bool(struct gm_json *w, bool v)
{
    if (before_value(w))
        put(w, v ? "true" : "false", v ? 4 : 5);
}

void gm_json_null(struct gm_json *w)
{
    if (before_value(w))
        put_lit(w, "null");
}

void gm_json_raw(struct gm_json *w, const char *text)
{
    if (before_value(w))
        put(w, text, strlen(text));
}

void gm_json_kv_str(struct gm_json *w, const char *key, const char *v)
{
    gm_json_key(w, key);
    gm_json_str(w, v);
}

void gm_json_kv_u64(struct gm_json *w, const char *key, uint64_t v)
{
    gm_json_key(w, key);
    gm_json_u64(w, v);
}

void gm_json_kv_i64(struct gm_json *w, const char *key, int64_t v)
{
    gm_json_key(w, key);
    gm_json_i64(w, v);
}

void gm_json_kv_double(struct gm_json *w, const char *key, double v)
{
    gm_json_key(w, key);
    gm_json_double(w, v);
}

void gm_json_kv_bool(struct gm_json *w, const char *key, bool v)
{
    gm_json_key(w, key);
    gm_json_bool(w, v);
}

void gm_json_kv_null(struct gm_json *w, const char *key)
{
    gm_json_key(w, key);
    gm_json_null(w);
}

bool gm_json_finish(struct gm_json *w)
{
    if (w->depth != 0 || w->want_value)
        w->failed = true;
    put_c(w, '\n');
    flush_buf(w);
    if (fflush(w->f) != 0 || ferror(w->f))
        w->failed = true;
    return !w->failed;
}

char *gm_json_room(struct gm_json *w, size_t n)
{
    if (w->flags != GM_JSON_BUFFERED || n + 1 > sizeof(w->buf))
        return NULL;
    if (sizeof(w->buf) - w->n_buf < n + 1)
        flush_buf(w);
    return number_slot(w);
}

void gm_json_room_end(struct gm_json *w, char *end)
{
    /* an end before the room's start or past the buffer (a row that outgrew its room) is
     * the caller's error: the writer fails rather than take it */
    if (end < w->buf + w->n_buf || end > w->buf + sizeof(w->buf)) {
        w->failed = true;
        return;
    }
    w->n_buf = (size_t)(end - w->buf);
}
