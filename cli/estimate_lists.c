/* SPDX-License-Identifier: MIT */
/* estimate_lists.c - the catalogs `gpumem estimate` lists: the built-in models (by a filter
 * on the name or Hub id), the architectures it knows, the GPUs; as text or JSON. */
#include "estimate_lists.h"

#include "cli.h"

#include "gpumem/estimate.h"
#include "gpumem/json.h"
#include "gpumem/model.h"
#include "gpumem/units.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Whether 'needle' is in 'hay', ASCII letters without case. */
static bool contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++)
        if (!strncasecmp(hay, needle, n))
            return true;
    return n == 0;
}

/* Whether 'filter' (NULL: everything) is in the name, the Hub id or an alias. */
static bool model_matches(const char *filter, size_t i)
{
    const char *hub_id = gm_model_catalog_hub_id(i);
    return !filter || contains_nocase(gm_model_catalog_get(i)->name, filter) ||
           (hub_id && contains_nocase(hub_id, filter)) ||
           contains_nocase(gm_model_catalog_aliases(i), filter);
}

int est_list_models(const char *filter, bool json)
{
    struct gm_json w;
    size_t shown = 0;
    if (json) {
        cli_json_begin(&w, stdout, "estimate.models");
        gm_json_key(&w, "models");
        gm_json_begin_array(&w);
    } else {
        printf("%-26s %-36s %16s\n", "name", "hub id", "parameters");
    }
    for (size_t i = 0; i < gm_model_catalog_count(); i++) {
        struct gm_param_counts pc;
        struct gm_error err;
        const struct gm_model *m = gm_model_catalog_get(i);
        if (!model_matches(filter, i))
            continue;
        shown++;
        if (gm_model_count_params(m, &pc, &err) != GM_OK)
            return cli_fail("gpumem estimate", &err);
        if (json) {
            gm_json_begin_object(&w);
            gm_json_kv_str(&w, "name", m->name);
            gm_json_kv_str(&w, "hub_id", gm_model_catalog_hub_id(i));
            gm_json_key(&w, "aliases");
            gm_json_begin_array(&w);
            for (const char *a = gm_model_catalog_aliases(i); *a;) {
                size_t len = strcspn(a, " ");
                if (len)
                    gm_json_strn(&w, a, len);
                a += len + (a[len] == ' ');
            }
            gm_json_end_array(&w);
            gm_json_kv_u64(&w, "parameters", pc.total);
            gm_json_end_object(&w);
        } else {
            printf("%-26s %-36s %16llu\n", m->name, gm_model_catalog_hub_id(i),
                   (unsigned long long)pc.total);
        }
    }
    if (!json && !shown && filter) {
        const char *near = gm_model_catalog_closest(filter);
        cli_errorf("gpumem estimate", "no built-in model matches '%s'%s%s%s", filter,
                   near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
        return 1;
    }
    if (!json)
        return 0;
    gm_json_end_array(&w);
    return cli_json_end(&w, "gpumem estimate");
}

/* The model_type names gm_model_parse_hf_config() knows. */
int est_list_archs(bool json)
{
    struct gm_json w;
    if (json) {
        cli_json_begin(&w, stdout, "estimate.archs");
        gm_json_key(&w, "archs");
        gm_json_begin_array(&w);
    }
    for (int a = GM_ARCH_UNKNOWN + 1; a < GM_ARCH__COUNT; a++) {
        if (json)
            gm_json_str(&w, gm_arch_name((enum gm_arch)a));
        else
            printf("%s\n", gm_arch_name((enum gm_arch)a));
    }
    if (!json)
        return 0;
    gm_json_end_array(&w);
    return cli_json_end(&w, "gpumem estimate");
}

int est_list_gpus(bool json)
{
    struct gm_json w;
    if (json) {
        cli_json_begin(&w, stdout, "estimate.gpus");
        gm_json_key(&w, "gpus");
        gm_json_begin_array(&w);
    } else {
        printf("%-14s %-12s %10s %10s\n", "name", "kind", "MiB", "GiB");
    }
    for (size_t i = 0; i < gm_gpu_catalog_count(); i++) {
        const struct gm_gpu *g = gm_gpu_catalog_get(i);
        if (json) {
            gm_json_begin_object(&w);
            gm_json_kv_str(&w, "name", g->name);
            gm_json_kv_str(&w, "kind", g->kind);
            gm_json_kv_u64(&w, "memory_bytes", g->memory_bytes);
            gm_json_end_object(&w);
        } else {
            printf("%-14s %-12s %10llu %10.2f\n", g->name, g->kind,
                   (unsigned long long)(g->memory_bytes / GM_MIB),
                   (double)g->memory_bytes / (double)GM_GIB);
        }
    }
    if (!json)
        return 0;
    gm_json_end_array(&w);
    return cli_json_end(&w, "gpumem estimate");
}
