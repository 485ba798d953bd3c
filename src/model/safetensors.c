/* SPDX-License-Identifier: MIT */
/* safetensors.c - read the header of a .safetensors file (never the tensor data).
 *
 * Layout: u64 LE header_len | header_len bytes of UTF-8 JSON | data.  The JSON object maps
 * tensor name -> {"dtype": "BF16", "shape": [d0, d1, ...], "data_offsets": [begin, end]},
 * offsets relative to the start of the data; "__metadata__" (string -> string) is optional.
 * The tensors tile the data exactly: sorted by begin, each starts where the previous one
 * ended, and the last ends at the end of the file.  Every rule is checked here, so the
 * element counts we report are the ones the bytes can really hold. */
#include "model/modelfile_int.h"

#include "base/json_load.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *name;
    unsigned bits;
} dtype_bits[] = {
    {"BOOL", 8},    {"U8", 8},   {"I8", 8},      {"F8_E5M2", 8}, {"F8_E4M3", 8},
    {"F8_E8M0", 8}, {"I16", 16}, {"U16", 16},    {"F16", 16},    {"BF16", 16},
    {"I32", 32},    {"U32", 32}, {"F32", 32},    {"F64", 64},    {"I64", 64},
    {"U64", 64},    {"F4", 4},   {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"C64", 64},
};

unsigned gm_safetensors_dtype_bits(const char *name)
{
    for (size_t i = 0; i < sizeof(dtype_bits) / sizeof(dtype_bits[0]); i++)
        if (strcmp(dtype_bits[i].name, name) == 0)
            return dtype_bits[i].bits;
    return 0;
}

struct span {
    uint64_t begin, end;
    const char *name; /* borrowed from the JSON document */
};

static int cmp_span(const void *a, const void *b)
{
    const struct span *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* A JSON integer that is >= 0. */
static bool json_u64(const json_t *v, uint64_t *out)
{
    json_int_t i;
    if (!json_is_integer(v))
        return false;
    i = json_integer_value(v);
    if (i < 0)
        return false;
    *out = (uint64_t)i;
    return true;
}

static enum gm_status parse_tensor(struct gm_modelfile *m, const struct gm_modelfile_limits *lim,
                                   const char *name, const json_t *t, uint64_t data_len,
                                   struct span *sp, struct gm_error *err)
{
    const json_t *dt = json_object_get(t, "dtype"), *shape = json_object_get(t, "shape"),
                 *offs = json_object_get(t, "data_offsets");
    uint64_t dims[GM_MODELFILE_MAX_DIMS], numel = 1, begin, end, bytes;
    unsigned bits;
    uint32_t idx;
    size_t n_dims;
    enum gm_status st;

    if (!json_is_object(t))
        return gm_fail(err, GM_ERR_FORMAT, 8, "tensor '%s': not an object", name);
    if (!json_is_string(dt))
        return gm_fail(err, GM_ERR_FORMAT, 8, "tensor '%s': no \"dtype\" string", name);
    bits = gm_safetensors_dtype_bits(json_string_value(dt));
    if (bits == 0)
        return gm_fail(err, GM_ERR_UNSUPPORTED, 8, "tensor '%s': unknown dtype '%.15s'", name,
                       json_string_value(dt));
    if (!json_is_array(shape))
        return gm_fail(err, GM_ERR_FORMAT, 8, "tensor '%s': no \"shape\" array", name);
    n_dims = json_array_size(shape);
    if (n_dims > GM_MODELFILE_MAX_DIMS)
        return gm_fail(err, GM_ERR_UNSUPPORTED, 8, "tensor '%s': %zu dimensions (at most %d)", name,
                       n_dims, GM_MODELFILE_MAX_DIMS);
    for (size_t i = 0; i < n_dims; i++) {
        if (!json_u64(json_array_get(shape, i), &dims[i]))
            return gm_fail(err, GM_ERR_FORMAT, 8, "tensor '%s': shape[%zu] is not a count", name,
                           i);
        if (dims[i] != 0 && numel > UINT64_MAX / dims[i])
            return gm_fail(err, GM_ERR_FORMAT, 8, "tensor '%s': shape overflows 64 bits", name);
        numel *= dims[i];
    }
    if (!json_is_array(offs) || json_array_size(offs) != 2 ||
        !json_u64(json_array_get(offs, 0), &begin) || !json_u64(json_array_get(offs, 1), &end))
        return gm_fail(err, GM_ERR_FORMAT, 8, "tensor '%s': \"data_offsets\" is not [begin, end]",
                       name);
    if (begin > end || end > data_len)
        return gm_fail(err, GM_ERR_FORMAT, 8,
                       "tensor '%s': data_offsets [%llu, %llu) outside the %llu data bytes", name,
                       (unsigned long long)begin, (unsigned long long)end,
                       (unsigned long long)data_len);
    if (numel > UINT64_MAX / bits || (numel * bits) % 8 != 0)
        return gm_fail(err, GM_ERR_FORMAT, 8,
                       "tensor '%s': %llu elements of %u bits are not whole bytes", name,
                       (unsigned long long)numel, bits);
    bytes = numel * bits / 8;
    if (end - begin != bytes)
        return gm_fail(err, GM_ERR_FORMAT, 8,
                       "tensor '%s': %llu data bytes for %llu elements of %s (%llu expected)", name,
                       (unsigned long long)(end - begin), (unsigned long long)numel,
                       json_string_value(dt), (unsigned long long)bytes);
    st = gm_modelfile_dtype_index(m, json_string_value(dt), &idx, err);
    if (st)
        return st;
    st = gm_modelfile_add_tensor(m, lim, name, strlen(name), idx, (uint32_t)n_dims, dims, numel,
                                 bytes, 8, err);
    if (st)
        return st;
    sp->begin = begin;
    sp->end = end;
    sp->name = name;
    return GM_OK;
}

enum gm_status gm_safetensors_parse(const void *data, size_t len, uint64_t file_size,
                                    const struct gm_modelfile_limits *lim, struct gm_modelfile *m,
                                    struct gm_error *err)
{
    const uint8_t *p = data;
    struct gm_modelfile_limits def;
    uint64_t hlen = 0, data_len, pos = 0;
    json_t *root, *v;
    const char *key;
    struct span *spans = NULL;
    size_t n = 0, n_obj;
    enum gm_status st = GM_OK;

    if (!lim) {
        gm_modelfile_limits_default(&def);
        lim = &def;
    }
    if (len < 8 || file_size < 8)
        return gm_fail(err, GM_ERR_FORMAT, 0, "too short for a safetensors file");
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | p[i];
    if (hlen > lim->max_header_bytes)
        return gm_fail(err, GM_ERR_LIMIT, 0, "header of %llu bytes exceeds the limit of %llu",
                       (unsigned long long)hlen, (unsigned long long)lim->max_header_bytes);
    if (hlen > file_size - 8 || hlen > len - 8)
        return gm_fail(err, GM_ERR_FORMAT, 0, "header length %llu runs past the end of the file",
                       (unsigned long long)hlen);
    if (hlen < 2 || p[8] != '{')
        return gm_fail(err, GM_ERR_FORMAT, 8, "header does not start with '{'");
    data_len = file_size - 8 - hlen;
    st = gm_json_load((const char *)p + 8, (size_t)hlen, 8, &root, err);
    if (st)
        return gm_error_prefix(err, "header");
    if (!json_is_object(root)) {
        st = gm_fail(err, GM_ERR_FORMAT, 8, "header is not a JSON object");
        goto out;
    }
    n_obj = json_object_size(root);
    spans = gm_calloc(n_obj ? n_obj : 1, sizeof(*spans));
    if (!spans) {
        st = gm_fail(err, GM_ERR_NOMEM, 8, "out of memory for %zu tensors", n_obj);
        goto out;
    }
    json_object_foreach(root, key, v)
    {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(v)) {
                st = gm_fail(err, GM_ERR_FORMAT, 8, "\"__metadata__\" is not an object");
                goto out;
            }
            continue;
        }
        st = parse_tensor(m, lim, key, v, data_len, &spans[n], err);
        if (st)
            goto out;
        n++;
    }
    /* The data must be covered exactly once, with no holes and nothing left over. */
    if (n)
        qsort(spans, n, sizeof(*spans), cmp_span);
    for (size_t i = 0; i < n; i++) {
        if (spans[i].begin != pos) {
            st = gm_fail(
                err, GM_ERR_FORMAT, 8,
                "tensor '%s': data starts at %llu but the previous tensor ends at %llu (%s)",
                spans[i].name, (unsigned long long)spans[i].begin, (unsigned long long)pos,
                spans[i].begin < pos ? "overlap" : "hole");
            goto out;
        }
        pos = spans[i].end;
    }
    if (pos != data_len) {
        st = gm_fail(err, GM_ERR_FORMAT, 8 + hlen,
                     "tensors cover %llu of the %llu data bytes after the header",
                     (unsigned long long)pos, (unsigned long long)data_len);
        goto out;
    }
    m->format = GM_MODELFILE_SAFETENSORS;
out:
    gm_free(spans);
    json_decref(root);
    return st;
}
