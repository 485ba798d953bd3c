/* SPDX-License-Identifier: MIT */
/* series_prom.c - the phases of gpumem.torch series as Prometheus gauges (measure.h), for
 * `gpumem watch --prometheus` and `--listen`.  The text is written by base/prom.h. */
#include "gpumem/arena.h"
#include "gpumem/measure.h"
#include "gpumem/watch.h"

#include "base/prom.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A phase that ran, for ordering them by name then by when they ran. */
struct ran {
    const char *name;
    size_t i;
};

static int by_name_then_order(const void *a, const void *b)
{
    const struct ran *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* The family 'name' of counter 'which' (0 allocated, 1 reserved). */
static enum gm_status family(FILE *f, const char *name, int which,
                             const struct gm_measure_series *const *s, const char *const *ranks,
                             size_t n, const struct gm_watch_prom_labels *l, struct gm_error *err)
{
    for (size_t k = 0; k < n; k++) {
        const struct gm_measure_series *ms = s[k];
        struct ran *order = ms->n_phases ? gm_malloc(ms->n_phases * sizeof(*order)) : NULL;
        size_t m = 0;
        if (ms->n_phases && !order)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory for the phases");
        for (size_t i = 0; i < ms->n_phases; i++)
            if (ms->phases[i].ran && ms->phases[i].name)
                order[m++] = (struct ran){ms->phases[i].name, i};
        if (m > 1)
            qsort(order, m, sizeof(*order), by_name_then_order);
        for (size_t i = 0; i < m; i++) {
            const struct gm_measure_series_phase *p = &ms->phases[order[i].i];
            struct gm_reading r = which ? p->reserved.peak : p->allocated.peak;
            bool first = true;
            /* the latest pass of each name: the last of its run in this order */
            if (i + 1 < m && !strcmp(p->name, order[i + 1].name))
                continue;
            if (!r.valid)
                continue;
            fputs(name, f);
            gm_prom_label(f, &first, "phase", p->name);
            gm_prom_job_labels(f, &first, l ? l->hostname : NULL, l ? l->job : NULL,
                               ranks ? ranks[k] : NULL);
            gm_prom_end_labels(f, first);
            fprintf(f, " %" PRIu64 "\n", r.value);
        }
        gm_free(order);
    }
    return GM_OK;
}

enum gm_status gm_measure_series_prometheus(FILE *f, const struct gm_measure_series *const *s,
                                            const char *const *ranks, size_t n,
                                            const struct gm_watch_prom_labels *l,
                                            struct gm_error *err)
{
    enum gm_status st;
    gm_prom_family(f, "gpumem_phase_peak_allocated_bytes", "gauge",
                   "The most memory PyTorch's allocator had allocated in the latest pass of a "
                   "gpumem.torch phase (bytes).");
    if ((st = family(f, "gpumem_phase_peak_allocated_bytes", 0, s, ranks, n, l, err)) != GM_OK)
        return st;
    gm_prom_family(f, "gpumem_phase_peak_reserved_bytes", "gauge",
                   "The most memory PyTorch's allocator had reserved in the latest pass of a "
                   "gpumem.torch phase (bytes).");
    if ((st = family(f, "gpumem_phase_peak_reserved_bytes", 1, s, ranks, n, l, err)) != GM_OK)
        return st;
    if (fflush(f) != 0 || ferror(f))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the metrics failed");
    return GM_OK;
}
