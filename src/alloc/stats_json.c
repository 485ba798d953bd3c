/* SPDX-License-Identifier: MIT */
/* stats_json.c - write struct gm_alloc_stats with the key names and order of
 * torch.cuda.memory_stats(): "<stat>.<all|large_pool|small_pool>.<current|peak|allocated|
 * freed>", "oversize_*.<...>", the num_* counters and max_split_size (-1: unlimited), keys
 * sorted as torch's OrderedDict sorts them. */
#include "gpumem/alloc.h"
#include "gpumem/json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kv {
    char key[64];
    int64_t value;
};

static const char *const pool_names[GM_ALLOC_STAT_N] = {"all", "small_pool", "large_pool"};

static int64_t clamp_i64(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)v;
}

static size_t add_stat(struct kv *out, size_t n, const char *name, const struct gm_alloc_stat *s)
{
    static const char *const parts[4] = {"current", "peak", "allocated", "freed"};
    uint64_t v[4];
    v[0] = s->current;
    v[1] = s->peak;
    v[2] = s->allocated;
    v[3] = s->freed;
    for (int i = 0; i < 4; i++) {
        snprintf(out[n].key, sizeof(out[n].key), "%s.%s", name, parts[i]);
        out[n++].value = clamp_i64(v[i]);
    }
    return n;
}

static size_t add_array(struct kv *out, size_t n, const char *name, const struct gm_alloc_stat *arr)
{
    for (int p = 0; p < GM_ALLOC_STAT_N; p++) {
        char full[48];
        snprintf(full, sizeof(full), "%s.%s", name, pool_names[p]);
        n = add_stat(out, n, full, &arr[p]);
    }
    return n;
}

static int cmp_kv(const void *a, const void *b)
{
    return strcmp(((const struct kv *)a)->key, ((const struct kv *)b)->key);
}

void gm_alloc_stats_write_json(struct gm_json *w, const struct gm_alloc_stats *s)
{
    struct kv kv[9 * GM_ALLOC_STAT_N * 4 + 2 * 4 + 6];
    size_t n = 0;
    n = add_array(kv, n, "active", s->active);
    n = add_array(kv, n, "active_bytes", s->active_bytes);
    n = add_array(kv, n, "allocated_bytes", s->allocated_bytes);
    n = add_array(kv, n, "allocation", s->allocation);
    n = add_array(kv, n, "inactive_split", s->inactive_split);
    n = add_array(kv, n, "inactive_split_bytes", s->inactive_split_bytes);
    n = add_array(kv, n, "requested_bytes", s->requested_bytes);
    n = add_array(kv, n, "reserved_bytes", s->reserved_bytes);
    n = add_array(kv, n, "segment", s->segment);
    n = add_stat(kv, n, "oversize_allocations", &s->oversize_allocations);
    n = add_stat(kv, n, "oversize_segments", &s->oversize_segments);
    snprintf(kv[n].key, sizeof(kv[n].key), "num_alloc_retries");
    kv[n++].value = clamp_i64(s->num_alloc_retries);
    snprintf(kv[n].key, sizeof(kv[n].key), "num_ooms");
    kv[n++].value = clamp_i64(s->num_ooms);
    snprintf(kv[n].key, sizeof(kv[n].key), "num_sync_all_streams");
    kv[n++].value = clamp_i64(s->num_sync_all_streams);
    snprintf(kv[n].key, sizeof(kv[n].key), "num_device_alloc");
    kv[n++].value = clamp_i64(s->num_device_alloc);
    snprintf(kv[n].key, sizeof(kv[n].key), "num_device_free");
    kv[n++].value = clamp_i64(s->num_device_free);
    snprintf(kv[n].key, sizeof(kv[n].key), "max_split_size");
    kv[n++].value =
        s->max_split_size == GM_ALLOC_NO_SPLIT_LIMIT ? -1 : clamp_i64(s->max_split_size);
    qsort(kv, n, sizeof(kv[0]), cmp_kv);
    gm_json_begin_object(w);
    for (size_t i = 0; i < n; i++)
        gm_json_kv_i64(w, kv[i].key, kv[i].value);
    gm_json_end_object(w);
}
