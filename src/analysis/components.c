/* SPDX-License-Identifier: MIT */
/* components.c - torch's own attribution of allocated memory (component tracking:
 * torch.accelerator.memory.memory_stats() 'component_bytes.<component>.current' counters,
 * PR pytorch/pytorch#182387), read as the ground truth the categories are compared with.
 *
 * The stats are a flat dict of "a.b.c" keys (memory_stats() flattens the allocator's
 * nested stats); a nested {"component_bytes": {"parameter": {"current": N}}} is read too.
 * Only the counters are trusted, never the shape: other keys are skipped, a counter that is
 * not a non-negative integer is an error. */
#include "gpumem/analysis.h"

#include "base/buf.h"
#include "base/json_load.h"

#include "gpumem/units.h"

#include <string.h>

/* The components that are one of the categories, by the component's name in the stats (the
 * tracker's component types); any other component is counted as unmapped. */
static const struct {
    const char *name;
    enum gm_category category;
} component_category[] = {
    {"parameter", GM_CATEGORY_PARAMETER},   {"gradient", GM_CATEGORY_GRADIENT},
    {"activation", GM_CATEGORY_ACTIVATION}, {"optimizer_state", GM_CATEGORY_OPTIMIZER_STATE},
    {"input", GM_CATEGORY_INPUT},           {"other", GM_CATEGORY_OTHER},
};

#define COMPONENTS_MAX_BYTES ((size_t)16 << 20) /* a memory_stats() dump is a few KiB */

static enum gm_status add_counter(struct gm_components *out, const char *name, size_t n, json_t *v,
                                  const char *path, struct gm_error *err)
{
    json_int_t x;
    if (!json_is_integer(v) || (x = json_integer_value(v)) < 0)
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "%s: component_bytes.%.*s.current is not a byte count", path,
                       (int)(n > 64 ? 64 : n), name);
    out->n_components++;
    for (size_t i = 0; i < sizeof(component_category) / sizeof(component_category[0]); i++)
        if (strlen(component_category[i].name) == n &&
            !memcmp(component_category[i].name, name, n)) {
            enum gm_category c = component_category[i].category;
            out->has[c] = true;
            out->bytes[c] = gm_add_sat(out->bytes[c], (uint64_t)x);
            return GM_OK;
        }
    out->unmapped_bytes = gm_add_sat(out->unmapped_bytes, (uint64_t)x);
    return GM_OK;
}

enum gm_status gm_components_parse(const char *text, size_t len, const char *path,
                                   struct gm_components *out, struct gm_error *err)
{
    static const char prefix[] = "component_bytes.", suffix[] = ".current";
    const size_t np = sizeof(prefix) - 1, ns = sizeof(suffix) - 1;
    json_t *root, *nested, *v;
    const char *key;
    enum gm_status st = GM_OK;
    memset(out, 0, sizeof(*out));
    if ((st = gm_json_load(text, len, 0, &root, err)) != GM_OK)
        return gm_error_prefix(err, "%s", path);
    if (!json_is_object(root)) {
        json_decref(root);
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "%s: not a memory_stats() dict (a JSON object)", path);
    }
    json_object_foreach(root, key, v)
    {
        size_t n = strlen(key);
        if (st == GM_OK && n > np + ns && !memcmp(key, prefix, np) &&
            !memcmp(key + n - ns, suffix, ns))
            st = add_counter(out, key + np, n - np - ns, v, path, err);
    }
    nested = json_object_get(root, "component_bytes");
    if (st == GM_OK && json_is_object(nested)) {
        json_object_foreach(nested, key, v)
        {
            json_t *cur = json_is_object(v) ? json_object_get(v, "current") : NULL;
            if (st == GM_OK && cur)
                st = add_counter(out, key, strlen(key), cur, path, err);
        }
    }
    json_decref(root);
    if (st == GM_OK && !out->n_components)
        st = gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                     "%s: no component_bytes.*.current counters (was component tracking "
                     "enabled when memory_stats() was called?)",
                     path);
    return st;
}

enum gm_status gm_components_load(const char *path, struct gm_components *out, struct gm_error *err)
{
    struct gm_buf b;
    enum gm_status st;
    gm_buf_init(&b, COMPONENTS_MAX_BYTES);
    st = gm_buf_read_file(&b, path, err);
    if (st == GM_OK)
        st = gm_components_parse(b.data ? b.data : "", b.len, path, out, err);
    gm_buf_release(&b);
    return st;
}
