/* SPDX-License-Identifier: MIT */
/* snapshot_ranks.c - the per-rank table of `gpumem snapshot stats` with several files. */
#include "snapshot_ranks.h"

#include "cli.h"

#include "gpumem/arena.h"
#include "gpumem/units.h"

#include <inttypes.h>
#include <string.h>

int ranks_add(struct rank_table *t, const char *cmd, const char *file,
              const struct gm_snapshot *snap, const struct gm_snapshot_stats *st)
{
    for (size_t i = 0; i < snap->n_devices; i++) {
        const struct gm_snapshot_device *d = &snap->devices[i];
        if (!d->n_segments && !d->n_events)
            continue;
        struct gm_snapshot_timeline tl;
        struct gm_error err;
        if (gm_snapshot_timeline(snap, d->index, 0, &tl, &err) != GM_OK)
            return cli_fail(cmd, &err);
        if (t->n == t->cap) {
            size_t cap = t->cap ? t->cap * 2 : 16;
            struct rank_row *v = gm_realloc(t->rows, cap * sizeof(*v));
            if (!v) {
                gm_snapshot_timeline_release(&tl);
                cli_errorf(cmd, "out of memory");
                return GM_EXIT_SOFTWARE;
            }
            t->rows = v;
            t->cap = cap;
        }
        struct rank_row *r = &t->rows[t->n++];
        memset(r, 0, sizeof(*r));
        r->file = file;
        r->device = d->index;
        r->peak = tl.peak_bytes;
        r->peak_reserved = tl.peak_reserved_bytes;
        for (size_t k = 0; k < st->n_devices; k++) {
            if (st->devices[k].device == d->index) {
                r->reserved = st->devices[k].fig.reserved_bytes;
                r->allocated = st->devices[k].fig.allocated_bytes;
            }
        }
        gm_snapshot_timeline_release(&tl);
    }
    return 0;
}

void ranks_release(struct rank_table *t)
{
    gm_free(t->rows);
    memset(t, 0, sizeof(*t));
}

enum { M_PEAK, M_PEAK_RESERVED, M_RESERVED, M_ALLOCATED, N_METRIC };
static const char *const metric_key[N_METRIC] = {"peak_bytes", "peak_reserved_bytes",
                                                 "reserved_bytes", "allocated_bytes"};
static const char *const metric_label[N_METRIC] = {"peak", "peak reserved", "reserved",
                                                   "allocated"};

static uint64_t metric(const struct rank_row *r, int m)
{
    switch (m) {
    case M_PEAK:
        return r->peak;
    case M_PEAK_RESERVED:
        return r->peak_reserved;
    case M_RESERVED:
        return r->reserved;
    default:
        return r->allocated;
    }
}

struct spread {
    uint64_t min, max;
    double mean;
    const char *min_file, *max_file;
    size_t n;
};

static struct spread spread_of(const struct rank_table *t, int32_t device, int m)
{
    struct spread s = {UINT64_MAX, 0, 0.0, NULL, NULL, 0};
    double sum = 0.0;
    for (size_t i = 0; i < t->n; i++) {
        const struct rank_row *r = &t->rows[i];
        if (r->device != device)
            continue;
        uint64_t v = metric(r, m);
        if (v < s.min) {
            s.min = v;
            s.min_file = r->file;
        }
        if (v > s.max || !s.max_file) {
            s.max = v;
            s.max_file = r->file;
        }
        sum += (double)v;
        s.n++;
    }
    s.mean = s.n ? sum / (double)s.n : 0.0;
    return s;
}

/* Device indexes in first-seen order, each once, into idx (cap t->n). */
static size_t devices_of(const struct rank_table *t, int32_t *idx)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++) {
        size_t j = 0;
        while (j < n && idx[j] != t->rows[i].device)
            j++;
        if (j == n)
            idx[n++] = t->rows[i].device;
    }
    return n;
}

static const char *human(char *buf, size_t n, uint64_t b)
{
    if (b < 1024)
        snprintf(buf, n, "%" PRIu64 " B", b);
    else
        gm_format_bytes(buf, n, b, GM_UNITS_IEC);
    return buf;
}

void ranks_print(const struct rank_table *t, FILE *f)
{
    char a[32], b[32], c[32], d[32];
    int w = 4;
    for (size_t i = 0; i < t->n; i++) {
        size_t l = strlen(t->rows[i].file);
        if ((int)l > w)
            w = l > 72 ? 72 : (int)l;
    }
    fprintf(f, "\nper file (rank) and device:\n");
    fprintf(f, "  %-*s %6s %12s %14s %12s %12s\n", w, "file", "device", "peak", "peak reserved",
            "reserved", "allocated");
    for (size_t i = 0; i < t->n; i++) {
        const struct rank_row *r = &t->rows[i];
        fprintf(f, "  %-*.*s %6d %12s %14s %12s %12s\n", w, w, r->file, (int)r->device,
                human(a, sizeof(a), r->peak), human(b, sizeof(b), r->peak_reserved),
                human(c, sizeof(c), r->reserved), human(d, sizeof(d), r->allocated));
    }
    int32_t *idx = gm_malloc((t->n ? t->n : 1) * sizeof(int32_t));
    if (!idx)
        return;
    size_t nd = devices_of(t, idx);
    for (size_t k = 0; k < nd; k++) {
        struct spread s0 = spread_of(t, idx[k], M_PEAK);
        if (s0.n < 2)
            continue;
        fprintf(f, "spread over %zu files, device %d:\n", s0.n, (int)idx[k]);
        for (int m = 0; m < N_METRIC; m++) {
            struct spread s = spread_of(t, idx[k], m);
            double pct = s.mean > 0 ? 100.0 * (double)(s.max - s.min) / s.mean : 0.0;
            fprintf(f, "  %-14s min %12s  max %12s  max-min %12s (%.1f%% of the mean)  max in %s\n",
                    metric_label[m], human(a, sizeof(a), s.min), human(b, sizeof(b), s.max),
                    human(c, sizeof(c), s.max - s.min), pct, s.max_file);
        }
    }
    gm_free(idx);
}

void ranks_json(const struct rank_table *t, struct gm_json *w)
{
    gm_json_key(w, "ranks");
    gm_json_begin_array(w);
    for (size_t i = 0; i < t->n; i++) {
        const struct rank_row *r = &t->rows[i];
        gm_json_begin_object(w);
        gm_json_kv_str(w, "file", r->file);
        gm_json_kv_i64(w, "device", r->device);
        for (int m = 0; m < N_METRIC; m++)
            gm_json_kv_u64(w, metric_key[m], metric(r, m));
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "spread");
    gm_json_begin_array(w);
    int32_t *idx = gm_malloc((t->n ? t->n : 1) * sizeof(int32_t));
    size_t nd = idx ? devices_of(t, idx) : 0;
    for (size_t k = 0; k < nd; k++) {
        gm_json_begin_object(w);
        gm_json_kv_i64(w, "device", idx[k]);
        for (int m = 0; m < N_METRIC; m++) {
            struct spread s = spread_of(t, idx[k], m);
            gm_json_key(w, metric_key[m]);
            gm_json_begin_object(w);
            gm_json_kv_u64(w, "files", s.n);
            gm_json_kv_u64(w, "min", s.min);
            gm_json_kv_u64(w, "max", s.max);
            gm_json_kv_u64(w, "spread", s.max - s.min);
            gm_json_kv_double(w, "mean", s.mean);
            gm_json_kv_str(w, "min_file", s.min_file);
            gm_json_kv_str(w, "max_file", s.max_file);
            gm_json_end_object(w);
        }
        gm_json_end_object(w);
    }
    gm_free(idx);
    gm_json_end_array(w);
}
