/* SPDX-License-Identifier: MIT */
/* series.c - read a recorded series (schema gpumem.measure/1), written by `gpumem measure
 * --output` or by the Python module gpumem.torch, and the environment of
 * `gpumem environment --json` (gpumem.environment/1), into struct gm_measure_series.
 *
 * The document is parsed by jansson, then every member used is copied into one arena owned
 * by the series, so that the jansson tree is released before returning.  Members are typed
 * by gm_jin_*: a byte count that is absent, null or negative stays an invalid reading; a
 * member of the wrong type (phases not a list, a phase not an object) is GM_ERR_FORMAT. */
#include "gpumem/arena.h"
#include "gpumem/measure.h"

#include "base/buf.h"
#include "base/json_in.h"
#include "base/json_load.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DOC_BYTES (64u << 20) /* a series of thousands of phases is a few MiB */
#define MAX_ITEMS     100000u     /* phases, dimensions, settings, caveats */

struct holder {
    struct gm_measure_series s;
    struct gm_arena arena;
    bool nomem; /* a copy failed (read_series reports it once) */
};

/* A copy of 's' in the series' arena; NULL for NULL. */
static const char *dup(struct holder *h, const char *s)
{
    char *c;
    if (!s)
        return NULL;
    c = gm_arena_strndup(&h->arena, s, strlen(s));
    if (!c)
        h->nomem = true;
    return c;
}

static enum gm_status read_kvs(struct holder *h, json_t *obj, const struct gm_measure_kv **out,
                               size_t *n, struct gm_error *err)
{
    const char *key;
    json_t *v;
    struct gm_measure_kv *kv;
    size_t i = 0;
    *out = NULL;
    *n = 0;
    if (!obj)
        return GM_OK;
    if (json_object_size(obj) > MAX_ITEMS)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "series: more than %u members", MAX_ITEMS);
    kv = gm_arena_calloc(&h->arena, json_object_size(obj) + 1, sizeof(*kv));
    if (!kv)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "series: out of memory");
    json_object_foreach(obj, key, v)
    {
        char text[1024];
        kv[i].key = dup(h, key);
        kv[i].value = dup(h, gm_jin_text(v, text, sizeof(text)));
        if (!kv[i].key || !kv[i].value)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "series: out of memory");
        i++;
    }
    *out = kv;
    *n = i;
    return GM_OK;
}

static struct gm_measure_counter read_counter(const json_t *phase, const char *key)
{
    const json_t *c = gm_jin_object(phase, key);
    struct gm_measure_counter out;
    out.begin = gm_jin_reading(c, "begin");
    out.end = gm_jin_reading(c, "end");
    out.peak = gm_jin_reading(c, "peak");
    return out;
}

static enum gm_status read_phase(struct holder *h, const json_t *p,
                                 struct gm_measure_series_phase *out, size_t index,
                                 struct gm_error *err)
{
    const json_t *dev = gm_jin_object(p, "device_bytes");
    const json_t *sec = json_object_get(p, "seconds");
    const json_t *occ = json_object_get(p, "occurrence");
    const char *pass = gm_jin_str(p, "pass");
    if (!json_is_object(p))
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "series: phase %zu is not an object",
                       index);
    out->name = dup(h, gm_jin_str(p, "name"));
    if (h->nomem)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "series: out of memory");
    if (!out->name)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "series: phase %zu has no name", index);
    out->ran = gm_jin_bool(p, "ran", true);
    out->ok = gm_jin_bool(p, "ok", false);
    out->oom = gm_jin_bool(p, "oom", false);
    out->warm = pass && !strcmp(pass, "warm");
    if (json_is_integer(occ) && json_integer_value(occ) > 0 && json_integer_value(occ) < UINT32_MAX)
        out->occurrence = (uint32_t)json_integer_value(occ);
    out->device = dup(h, gm_jin_str(p, "device"));
    out->allocated = read_counter(p, "allocated_bytes");
    out->reserved = read_counter(p, "reserved_bytes");
    out->used_begin = gm_jin_reading(dev, "used_begin");
    out->used_end = gm_jin_reading(dev, "used_end");
    out->requested = gm_jin_reading(p, "requested_bytes");
    out->has_seconds = json_is_number(sec);
    out->seconds = out->has_seconds ? json_number_value(sec) : 0;
    out->error = dup(h, gm_jin_str(p, "error"));
    return GM_OK;
}

static void read_env(struct holder *h, const json_t *env, struct gm_measure_env *out)
{
    const json_t *devices = gm_jin_array(env, "devices");
    const json_t *first = devices ? json_array_get(devices, 0) : NULL;
    const json_t *driver = gm_jin_object(env, "driver");
    const json_t *settings = gm_jin_object(env, "settings");
    const json_t *torch = gm_jin_object(env, "torch");
    const char *conf = gm_jin_str(settings, "PYTORCH_CUDA_ALLOC_CONF");
    memset(out, 0, sizeof(*out));
    out->gpu = dup(h, gm_jin_str(first, "name"));
    out->gpu_total = gm_jin_reading(gm_jin_object(first, "memory"), "total_bytes");
    out->driver = dup(h, gm_jin_str(driver, "version"));
    out->cuda_driver = dup(h, gm_jin_str(driver, "cuda_driver_api_version"));
    out->torch = dup(h, gm_jin_str(torch, "version"));
    out->torch_cuda = dup(h, gm_jin_str(torch, "cuda"));
    out->torch_hip = dup(h, gm_jin_str(torch, "hip"));
    out->allocator_backend = dup(h, gm_jin_str(torch, "allocator_backend"));
    out->alloc_conf = dup(h, conf ? conf : gm_jin_str(settings, "PYTORCH_ALLOC_CONF"));
}

static enum gm_status read_caveats(struct holder *h, const json_t *list, struct gm_error *err)
{
    const char **texts;
    size_t n = list ? json_array_size(list) : 0, k = 0;
    if (n > MAX_ITEMS)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "series: more than %u caveats", MAX_ITEMS);
    texts = gm_arena_calloc(&h->arena, n + 1, sizeof(*texts));
    if (!texts)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "series: out of memory");
    for (size_t i = 0; i < n; i++) {
        const char *t = gm_jin_str(json_array_get(list, i), "text");
        if (t && !(texts[k++] = dup(h, t)))
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "series: out of memory");
    }
    h->s.caveats = texts;
    h->s.n_caveats = k;
    return GM_OK;
}

static enum gm_status read_series(struct holder *h, const json_t *root, struct gm_error *err)
{
    const json_t *phases = json_object_get(root, "phases");
    const json_t *measured = gm_jin_object(root, "measured");
    const char *source = gm_jin_str(root, "source");
    struct gm_measure_series_phase *ph;
    size_t n;
    enum gm_status st;

    if (!json_is_array(phases))
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "series: 'phases' is not a list");
    n = json_array_size(phases);
    if (n > MAX_ITEMS)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "series: more than %u phases", MAX_ITEMS);
    ph = gm_arena_calloc(&h->arena, n + 1, sizeof(*ph));
    if (!ph)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "series: out of memory");
    h->s.ok = true;
    for (size_t i = 0; i < n; i++) {
        st = read_phase(h, json_array_get(phases, i), &ph[i], i, err);
        if (st != GM_OK)
            return st;
        if (ph[i].ran && !ph[i].ok)
            h->s.ok = false;
    }
    h->s.phases = ph;
    h->s.n_phases = n;
    h->s.source = !source                             ? GM_MEASURE_SOURCE_UNKNOWN
                  : !strcmp(source, "gpumem.torch")   ? GM_MEASURE_SOURCE_TORCH
                  : !strcmp(source, "gpumem measure") ? GM_MEASURE_SOURCE_LAB
                                                      : GM_MEASURE_SOURCE_UNKNOWN;
    h->s.peak_allocated = gm_jin_reading(measured, "peak_allocated_bytes");
    h->s.peak_reserved = gm_jin_reading(measured, "peak_reserved_bytes");
    read_env(h, gm_jin_object(root, "environment"), &h->s.env);
    if ((st = read_kvs(h, gm_jin_object(root, "dimensions"), &h->s.dimensions, &h->s.n_dimensions,
                       err)) != GM_OK ||
        (st = read_kvs(h, gm_jin_object(root, "settings"), &h->s.settings, &h->s.n_settings,
                       err)) != GM_OK)
        return st;
    if ((st = read_caveats(h, gm_jin_array(root, "caveats"), err)) != GM_OK)
        return st;
    return h->nomem ? gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "series: out of memory") : GM_OK;
}

/* Parse 'data' as a document of 'schema' within 'limit' bytes (0: the JSON budget) and
 * hand its root to 'read'. */
static enum gm_status load_doc(const void *data, size_t len, uint64_t limit, const char *schema,
                               enum gm_status (*read)(struct holder *, const json_t *,
                                                      struct gm_error *),
                               struct gm_measure_series **out, struct gm_error *err)
{
    json_t *root;
    struct holder *h;
    const char *got;
    enum gm_status st;

    *out = NULL;
    if (len > MAX_DOC_BYTES)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "document of %zu bytes: over %u MiB", len,
                       MAX_DOC_BYTES >> 20);
    if ((st = gm_json_load_limit(data, len, 0, limit, &root, err)) != GM_OK)
        return st;
    got = gm_jin_str(root, "schema");
    if (!got || strcmp(got, schema) != 0) {
        /* 'got' lives in 'root': the message is made before the tree is released */
        st = gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET, "not a %s document (schema '%s')", schema,
                     got ? got : "none");
        json_decref(root);
        return st;
    }
    h = gm_calloc(1, sizeof(*h));
    if (!h) {
        json_decref(root);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "series: out of memory");
    }
    gm_arena_init(&h->arena, MAX_DOC_BYTES * 2u);
    h->s.priv_ = h;
    st = read(h, root, err);
    json_decref(root);
    if (st != GM_OK) {
        gm_measure_series_free(&h->s);
        return st;
    }
    *out = &h->s;
    return GM_OK;
}

enum gm_status gm_measure_series_load_mem(const void *data, size_t len, uint64_t memory_limit,
                                          struct gm_measure_series **out, struct gm_error *err)
{
    return load_doc(data, len, memory_limit, "gpumem.measure/1", read_series, out, err);
}

enum gm_status gm_measure_series_load(const char *path, struct gm_measure_series **out,
                                      struct gm_error *err)
{
    struct gm_buf b;
    enum gm_status st;
    gm_buf_init(&b, MAX_DOC_BYTES);
    st = gm_buf_read_file(&b, path, err);
    if (st == GM_OK) {
        st = gm_measure_series_load_mem(b.data ? b.data : "", b.len, 0, out, err);
        if (st != GM_OK && err)
            gm_error_prefix(err, "%s", path);
    }
    gm_buf_release(&b);
    return st;
}

static enum gm_status read_environment(struct holder *h, const json_t *root, struct gm_error *err)
{
    h->s.ok = true;
    read_env(h, root, &h->s.env);
    return h->nomem ? gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "environment: out of memory")
                    : GM_OK;
}

enum gm_status gm_measure_env_load_mem(const void *data, size_t len, uint64_t memory_limit,
                                       struct gm_measure_series **holder, struct gm_error *err)
{
    return load_doc(data, len, memory_limit, "gpumem.environment/1", read_environment, holder, err);
}

void gm_measure_series_free(struct gm_measure_series *s)
{
    struct holder *h;
    if (!s)
        return;
    h = s->priv_;
    gm_arena_release(&h->arena);
    gm_free(h);
}
