/* SPDX-License-Identifier: MIT */
/* json.h - streaming JSON writer.
 *
 * Writes JSON text to a FILE* as it goes, with exact 64-bit integers, correct string
 * escaping (control characters, quotes, backslash; invalid UTF-8 replaced by U+FFFD), a
 * fixed key order (the caller's), and either pretty (2-space indent) or compact output.
 * Nesting is tracked so commas and indentation are always right; misuse (a value where a
 * key is expected, unbalanced ends) sets the writer's error flag rather than writing bad
 * JSON silently.  Doubles that are NaN or infinite are written as null.
 *
 * The library's JSON comes one way: a whole document is written by
 *   enum gm_status gm_<what>_json(FILE *f, <what it writes>, ..., struct gm_error *err)
 * ({"schema": "gpumem.<document>/1", "gpumem_version", ...}; GM_ERR_IO when the write
 * fails), as gm_analysis_json(), gm_estimate_report_json(), gm_sweep_json(),
 * gm_watch_json() and gm_account_json() do; the parts a caller composes into a document of
 * its own are written into its writer by void gm_<what>_write_json(struct gm_json *w, ...)
 * (gm_devices_write_json(), gm_alloc_stats_write_json()). */
#ifndef GPUMEM_JSON_H
#define GPUMEM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

#define GM_JSON_MAX_DEPTH 64

enum gm_json_flags {
    GM_JSON_PRETTY = 1 << 0, /* newlines and 2-space indentation */
    /* Nothing else writes to the FILE until gm_json_finish(): the text is gathered in the
     * writer and written in large pieces (a document of millions of values). */
    GM_JSON_BUFFERED = 1 << 1,
};

#define GM_JSON_BUF_SIZE 8192

struct gm_json {
    FILE *f;
    unsigned flags;
    int depth;
    bool first[GM_JSON_MAX_DEPTH];  /* no element written yet at this level */
    bool is_obj[GM_JSON_MAX_DEPTH]; /* this level is an object */
    bool want_value;                /* a key was written, its value comes next */
    bool failed;                    /* misuse or a write error */
    size_t n_buf;                   /* bytes in buf (GM_JSON_BUFFERED) */
    char buf[GM_JSON_BUF_SIZE];     /* text not written to f yet (GM_JSON_BUFFERED) */
};

void gm_json_init(struct gm_json *w, FILE *f, unsigned flags);

void gm_json_begin_object(struct gm_json *w);
void gm_json_end_object(struct gm_json *w);
void gm_json_begin_array(struct gm_json *w);
void gm_json_end_array(struct gm_json *w);

/* A key inside an object; the next call writes its value. */
void gm_json_key(struct gm_json *w, const char *key);

void gm_json_str(struct gm_json *w, const char *s); /* NULL writes null */
void gm_json_strn(struct gm_json *w, const char *s, size_t n);
void gm_json_u64(struct gm_json *w, uint64_t v);
void gm_json_i64(struct gm_json *w, int64_t v);
/* n values of an array, as gm_json_u64() / gm_json_i64() write them one by one: the first at
 * 'first', each next 'stride' bytes further (a field of an array of structs: stride the
 * struct's size; a plain array: the value's size).  For arrays of many numbers. */
void gm_json_u64s(struct gm_json *w, const void *first, size_t n, size_t stride);
void gm_json_i64s(struct gm_json *w, const void *first, size_t n, size_t stride);
/* A whole array of integers, [u[0], ..., u[nu-1], s[0], ..., s[ns-1]], as the calls one by
 * one would write it: for the many short rows of a document. */
void gm_json_int_array(struct gm_json *w, const uint64_t *u, size_t nu, const int64_t *s,
                       size_t ns);
void gm_json_double(struct gm_json *w, double v); /* shortest round-trip form */
void gm_json_bool(struct gm_json *w, bool v);
void gm_json_null(struct gm_json *w);
/* Pre-formatted JSON text (the caller vouches for its validity). */
void gm_json_raw(struct gm_json *w, const char *text);

/* key + value in one call. */
void gm_json_kv_str(struct gm_json *w, const char *key, const char *v);
void gm_json_kv_u64(struct gm_json *w, const char *key, uint64_t v);
void gm_json_kv_i64(struct gm_json *w, const char *key, int64_t v);
void gm_json_kv_double(struct gm_json *w, const char *key, double v);
void gm_json_kv_bool(struct gm_json *w, const char *key, bool v);
void gm_json_kv_null(struct gm_json *w, const char *key);

/* Finish a document: writes the trailing newline and flushes.  Returns false when the
 * writer was misused, left unbalanced, or the stream had a write error. */
bool gm_json_finish(struct gm_json *w);

/* Escape 's' (length n) as JSON string content, without quotes, to 'f'. */
void gm_json_escape(FILE *f, const char *s, size_t n);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
