/* SPDX-License-Identifier: MIT */
/* json_load.c - jansson parsing behind a pre-scan that bounds the tree's size (see
 * json_load.h). */
#include "base/json_load.h"

#include "gpumem/units.h"

#include <stdio.h>
#include <string.h>

/* Costs per element in bytes, the measured figures rounded up (json_load.h). */
#define COST_OBJECT    256
#define COST_ARRAY     160
#define COST_STRING    96
#define COST_SCALAR    64
#define COST_SEPARATOR 32 /* the slot a member or element takes in its container */

static int is_scalar_char(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '-' ||
           c == '+' || c == '.';
}

void gm_json_scan(const char *data, size_t len, struct gm_json_scan *out)
{
    const unsigned char *p = (const unsigned char *)data;
    uint64_t depth = 0;
    int in_string = 0, escaped = 0, in_scalar = 0;

    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < len; i++) {
        unsigned char c = p[i];
        if (in_string) {
            if (escaped) {
                escaped = 0;
                out->string_bytes++;
            } else if (c == '\\')
                escaped = 1;
            else if (c == '"')
                in_string = 0;
            else
                out->string_bytes++;
            continue;
        }
        if (is_scalar_char(c)) {
            if (!in_scalar)
                out->n_scalars++;
            in_scalar = 1;
            continue;
        }
        in_scalar = 0;
        switch (c) {
        case '"':
            in_string = 1;
            out->n_strings++;
            break;
        case '{':
        case '[':
            if (c == '{')
                out->n_objects++;
            else
                out->n_arrays++;
            if (++depth > out->max_depth)
                out->max_depth = depth;
            break;
        case '}':
        case ']':
            if (depth)
                depth--;
            break;
        case ',':
        case ':':
            out->n_separators++;
            break;
        default:
            break;
        }
    }
    out->estimate = gm_add_sat(
        gm_add_sat(gm_mul_sat(out->n_objects, COST_OBJECT), gm_mul_sat(out->n_arrays, COST_ARRAY)),
        gm_add_sat(gm_add_sat(gm_mul_sat(out->n_strings, COST_STRING), out->string_bytes),
                   gm_add_sat(gm_mul_sat(out->n_scalars, COST_SCALAR),
                              gm_mul_sat(out->n_separators, COST_SEPARATOR))));
}

uint64_t gm_json_budget(size_t len)
{
    return gm_add_sat(GM_JSON_BUDGET_FLOOR, gm_mul_sat((uint64_t)len, GM_JSON_BUDGET_RATIO));
}

enum gm_status gm_json_load(const char *data, size_t len, uint64_t base, json_t **out,
                            struct gm_error *err)
{
    return gm_json_load_limit(data, len, base, 0, out, err);
}

enum gm_status gm_json_load_limit(const char *data, size_t len, uint64_t base, uint64_t limit,
                                  json_t **out, struct gm_error *err)
{
    struct gm_json_scan sc;
    json_error_t je;
    uint64_t budget = limit ? (limit > len ? limit - len : 0) : gm_json_budget(len);
    char need[32], have[32];

    *out = NULL;
    gm_json_scan(data, len, &sc);
    if (sc.max_depth > GM_JSON_LOAD_MAX_DEPTH)
        return gm_fail(err, GM_ERR_LIMIT, base,
                       "JSON nested %llu levels deep, more than the %d allowed",
                       (unsigned long long)sc.max_depth, GM_JSON_LOAD_MAX_DEPTH);
    if (sc.estimate > budget && limit)
        return gm_fail(err, GM_ERR_LIMIT, base,
                       "JSON of %zu bytes would take about %s once parsed (%llu objects, %llu "
                       "arrays, %llu strings, %llu scalars): over the memory limit of %s",
                       len, gm_format_bytes(need, sizeof(need), sc.estimate + len, GM_UNITS_IEC),
                       (unsigned long long)sc.n_objects, (unsigned long long)sc.n_arrays,
                       (unsigned long long)sc.n_strings, (unsigned long long)sc.n_scalars,
                       gm_format_bytes(have, sizeof(have), limit, GM_UNITS_IEC));
    if (sc.estimate > budget)
        return gm_fail(err, GM_ERR_LIMIT, base,
                       "JSON of %zu bytes would take about %s once parsed (%llu objects, %llu "
                       "arrays, %llu strings, %llu scalars), over the budget of %s for a "
                       "document of this size",
                       len, gm_format_bytes(need, sizeof(need), sc.estimate, GM_UNITS_IEC),
                       (unsigned long long)sc.n_objects, (unsigned long long)sc.n_arrays,
                       (unsigned long long)sc.n_strings, (unsigned long long)sc.n_scalars,
                       gm_format_bytes(have, sizeof(have), budget, GM_UNITS_IEC));
    *out = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je);
    if (*out)
        return GM_OK;
    if (json_error_code(&je) == json_error_out_of_memory || !je.text[0])
        return gm_fail(err, GM_ERR_NOMEM, base,
                       "out of memory parsing %zu bytes of JSON (estimated %s)", len,
                       gm_format_bytes(need, sizeof(need), sc.estimate, GM_UNITS_IEC));
    return gm_fail(err, GM_ERR_FORMAT, base + (uint64_t)(je.position > 0 ? je.position : 0),
                   "invalid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
}
