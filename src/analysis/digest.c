/* SPDX-License-Identifier: MIT */
/* digest.c - read back a rank's digest (analysis.h, "digests"), the document
 * gm_analysis_json() writes for GM_DOC_DIGEST, from a file that may come from anywhere.
 *
 * Layout (JSON, members in this order; others are ignored):
 *   {"schema": "gpumem.snapshot.digest/1", "gpumem_version": str, "file": str,
 *    "host": str | null, "rank": int | null,
 *    "rank_figures": {"device": int, "peak_bytes", "peak_reserved_bytes", "reserved_bytes",
 *                     "allocated_bytes": int >= 0, "peak_event_index": int,
 *                     "peak_phase": str, "at_peak": {category: int >= 0}} | null,
 *    "allocator_settings": {"expandable_segments": bool, "max_split_size": int,
 *                           "garbage_collection_threshold": number},
 *    "devices": [{"device": int, "iterations": int >= 0, "leaks": {"bytes_per_iteration"},
 *                 "ooms": [...], "series": [[event, total, reserved, c0..c6], ...], ...}]}
 * The file is at most GM_DIGEST_MAX_BYTES and goes through jansson within its budget
 * (base/json_load.h); every number is checked for its range before it is used. */
#include "analysis/analysis_int.h"

#include "base/buf.h"
#include "base/file.h"
#include "base/json_load.h"
#include "gpumem/arena.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define DIGEST_SCHEMA "gpumem.snapshot.digest/"
#define DIGEST_SNIFF  256 /* bytes of a file looked at to tell a digest */

bool gm_digest_sniff(const void *data, size_t len)
{
    const char *p = data;
    size_t i = 0, n = len < DIGEST_SNIFF ? len : DIGEST_SNIFF;
    char head[DIGEST_SNIFF + 1];
    while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t'))
        i++;
    if (i >= n || p[i] != '{')
        return false;
    memcpy(head, p, n);
    head[n] = '\0';
    return strstr(head, "\"" DIGEST_SCHEMA) != NULL;
}

bool gm_digest_is_file(const char *path)
{
    char head[DIGEST_SNIFF];
    int fd;
    uint64_t size;
    bool is;
    /* only a regular file is opened (a FIFO is never waited on nor drained) */
    if (!strcmp(path, "-") || gm_file_open(path, &fd, &size, NULL) != GM_OK)
        return false;
    if (size > sizeof(head))
        size = sizeof(head);
    is = size > 0 && gm_file_read_at(fd, path, 0, head, (size_t)size, NULL) == GM_OK &&
         gm_digest_sniff(head, (size_t)size);
    close(fd);
    return is;
}

/* obj[key] as an integer in [lo, hi]. */
static bool get_int(const json_t *obj, const char *key, int64_t lo, int64_t hi, int64_t *v)
{
    const json_t *j = json_object_get(obj, key);
    if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi)
        return false;
    *v = (int64_t)json_integer_value(j);
    return true;
}

static bool get_u64(const json_t *obj, const char *key, uint64_t *v)
{
    int64_t x;
    if (!get_int(obj, key, 0, INT64_MAX, &x))
        return false;
    *v = (uint64_t)x;
    return true;
}

static bool get_phase(const json_t *obj, const char *key, uint8_t *phase)
{
    const char *s = json_string_value(json_object_get(obj, key));
    for (int p = 0; s && p < GM_PHASE_COUNT; p++)
        if (!strcmp(s, gm_phase_name((enum gm_phase)p))) {
            *phase = (uint8_t)p;
            return true;
        }
    return false;
}

static bool get_cats(const json_t *obj, const char *key, uint64_t *bytes)
{
    const json_t *c = json_object_get(obj, key);
    if (!json_is_object(c))
        return false;
    for (int i = 0; i < GM_CATEGORY_COUNT; i++)
        if (!get_u64(c, gm_category_name((enum gm_category)i), &bytes[i]))
            return false;
    return true;
}

static const char *dup_str(struct gm_arena *a, const json_t *j)
{
    const char *s = json_string_value(j);
    return s ? gm_arena_strndup(a, s, json_string_length(j)) : NULL;
}

static enum gm_status bad(struct gm_error *err, const char *what)
{
    return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "digest: %s", what);
}

static enum gm_status read_figures(const json_t *f, struct gm_rank *r, struct gm_error *err)
{
    int64_t dev;
    memset(r, 0, sizeof(*r));
    if (!get_int(f, "device", INT32_MIN, INT32_MAX, &dev))
        return bad(err, "rank_figures: no device");
    r->device = (int32_t)dev;
    for (int m = 0; m < GM_RANK_METRIC_COUNT; m++)
        if (!get_u64(f, gm_rank_metric_name((enum gm_rank_metric)m), &r->value[m]))
            return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "digest: rank_figures: no %s",
                           gm_rank_metric_name((enum gm_rank_metric)m));
    if (!get_int(f, "peak_event_index", -1, INT64_MAX, &r->peak_event) ||
        !get_phase(f, "peak_phase", &r->peak_phase) || !get_cats(f, "at_peak", r->at_peak))
        return bad(err, "rank_figures: no peak_event_index, peak_phase or at_peak");
    return GM_OK;
}

static enum gm_status read_series(const json_t *arr, struct gm_digest *d, struct gm_error *err)
{
    size_t n = json_array_size(arr);
    if (!json_is_array(arr))
        return bad(err, "a device without its series");
    if (n > GM_DIGEST_POINTS)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET,
                       "digest: %zu points in a series (at most %d)", n, GM_DIGEST_POINTS);
    d->series = gm_arena_calloc(d->arena, n ? n : 1, sizeof(*d->series));
    if (!d->series)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "digest: out of memory");
    for (size_t i = 0; i < n; i++) {
        const json_t *p = json_array_get(arr, i);
        struct gm_digest_point *q = &d->series[i];
        const json_t *v[3 + GM_CATEGORY_COUNT];
        if (json_array_size(p) != 3 + GM_CATEGORY_COUNT)
            return bad(err, "a point of a series is not [event, total, reserved, categories...]");
        for (size_t k = 0; k < 3 + GM_CATEGORY_COUNT; k++) {
            v[k] = json_array_get(p, k);
            if (!json_is_integer(v[k]) || json_integer_value(v[k]) < (k ? 0 : -1))
                return bad(err, "a point of a series holds a negative or non-integer number");
        }
        q->event = (int64_t)json_integer_value(v[0]);
        q->total = (uint64_t)json_integer_value(v[1]);
        q->reserved = (uint64_t)json_integer_value(v[2]);
        for (int c = 0; c < GM_CATEGORY_COUNT; c++)
            q->bytes[c] = (uint64_t)json_integer_value(v[3 + c]);
    }
    d->n_series = n;
    return GM_OK;
}

/* The figures of the rank's device (the first device when it had none). */
static enum gm_status read_device(const json_t *devs, struct gm_digest *d, struct gm_error *err)
{
    const json_t *dev = NULL, *leaks;
    int64_t idx;
    if (!json_is_array(devs))
        return bad(err, "no devices");
    for (size_t i = 0; i < json_array_size(devs); i++) {
        const json_t *x = json_array_get(devs, i);
        if (!json_is_object(x) || !get_int(x, "device", INT32_MIN, INT32_MAX, &idx))
            return bad(err, "a device without its index");
        if (!dev || (d->has_figures && idx == d->figures.device))
            dev = x;
    }
    if (!dev)
        return GM_OK;
    leaks = json_object_get(dev, "leaks");
    if (!get_u64(dev, "iterations", &d->n_iterations) ||
        !json_is_array(json_object_get(dev, "ooms")) ||
        !get_u64(leaks, "bytes_per_iteration", &d->leak_bytes_per_iteration))
        return bad(err, "a device without its iterations, ooms or leaks");
    d->n_ooms = json_array_size(json_object_get(dev, "ooms"));
    return read_series(json_object_get(dev, "series"), d, err);
}

static enum gm_status read_doc(const json_t *root, struct gm_digest *d, struct gm_error *err)
{
    const char *schema = json_string_value(json_object_get(root, "schema"));
    const json_t *fig, *rank, *host, *alloc;
    int64_t v;
    enum gm_status st;
    if (!json_is_object(root) || !schema || strncmp(schema, DIGEST_SCHEMA, strlen(DIGEST_SCHEMA)))
        return bad(err, "not a gpumem digest (its schema is not " DIGEST_SCHEMA "N)");
    if (strcmp(schema + strlen(DIGEST_SCHEMA), "1"))
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "digest: schema '%s' is newer than this gpumem reads (1)", schema);
    if (!(d->file = dup_str(d->arena, json_object_get(root, "file"))))
        return bad(err, "no file");
    host = json_object_get(root, "host");
    if (!json_is_null(host) && !(d->host = dup_str(d->arena, host)))
        return bad(err, "host is neither a string nor null");
    rank = json_object_get(root, "rank");
    if (!json_is_null(rank)) {
        if (!get_int(root, "rank", 0, INT64_MAX, &v))
            return bad(err, "rank is neither a non-negative integer nor null");
        d->has_rank = true;
        d->rank = (uint64_t)v;
    }
    fig = json_object_get(root, "rank_figures");
    if (!json_is_null(fig)) {
        if (!json_is_object(fig))
            return bad(err, "rank_figures is neither an object nor null");
        if ((st = read_figures(fig, &d->figures, err)) != GM_OK)
            return st;
        d->has_figures = true;
    }
    alloc = json_object_get(root, "allocator_settings");
    if (!json_is_object(alloc) || !json_is_boolean(json_object_get(alloc, "expandable_segments")) ||
        !get_int(alloc, "max_split_size", -1, INT64_MAX, &d->max_split_size) ||
        !json_is_number(json_object_get(alloc, "garbage_collection_threshold")))
        return bad(err, "no allocator_settings");
    d->expandable_segments = json_is_true(json_object_get(alloc, "expandable_segments"));
    d->gc_threshold = json_number_value(json_object_get(alloc, "garbage_collection_threshold"));
    return read_device(json_object_get(root, "devices"), d, err);
}

enum gm_status gm_digest_parse(const void *data, size_t len, struct gm_digest **out,
                               struct gm_error *err)
{
    struct gm_digest *d;
    json_t *root = NULL;
    enum gm_status st;
    *out = NULL;
    if (len > GM_DIGEST_MAX_BYTES)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "digest: %zu bytes (at most %llu)", len,
                       (unsigned long long)GM_DIGEST_MAX_BYTES);
    if (!gm_digest_sniff(data, len))
        return bad(err, "not a gpumem digest (no " DIGEST_SCHEMA "N schema at its start)");
    if ((st = gm_json_load(data, len, 0, &root, err)) != GM_OK)
        return st;
    d = gm_calloc(1, sizeof(*d));
    if (!d || !(d->arena = gm_calloc(1, sizeof(*d->arena)))) {
        gm_free(d);
        json_decref(root);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "digest: out of memory");
    }
    gm_arena_init(d->arena, 0);
    st = read_doc(root, d, err);
    json_decref(root);
    if (st != GM_OK) {
        gm_digest_free(d);
        return st;
    }
    *out = d;
    return GM_OK;
}

enum gm_status gm_digest_load(const char *path, struct gm_digest **out, struct gm_error *err)
{
    struct gm_buf b;
    enum gm_status st;
    *out = NULL;
    gm_buf_init(&b, GM_DIGEST_MAX_BYTES);
    if ((st = gm_buf_read_file(&b, path, err)) == GM_OK)
        st = gm_digest_parse(b.data ? b.data : "", b.len, out, err);
    gm_buf_release(&b);
    return st != GM_OK ? gm_error_prefix(err, "%s", path) : GM_OK;
}

void gm_digest_rank(const struct gm_digest *d, size_t file, const char *name, struct gm_rank *out,
                    bool *has_device)
{
    *has_device = d->has_figures;
    if (!d->has_figures)
        return;
    *out = d->figures;
    out->file = file;
    out->has_name_rank = gm_rank_from_name(name, &out->name_rank);
    if (!out->has_name_rank && d->has_rank) {
        out->has_name_rank = true;
        out->name_rank = d->rank;
    }
}

void gm_digest_free(struct gm_digest *d)
{
    if (!d)
        return;
    if (d->arena) {
        gm_arena_release(d->arena);
        gm_free(d->arena);
    }
    gm_free(d);
}
