/* SPDX-License-Identifier: MIT */
/* account_prom.c - the account's equations as Prometheus metrics (gm_account_prometheus()),
 * beside the watch's (device/watch_prom.c), written by base/prom.h: one gauge of the reading
 * each equation balances and one of its terms, a series per term. */
#include "gpumem/account.h"
#include "gpumem/watch.h"

#include "base/prom.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define USED_NAME "gpumem_account_used_bytes"
#define TERM_NAME "gpumem_account_term_bytes"

/* The equations of a device of a process: at its peak, then at its end. */
static const struct gm_account_balance *balance_at(const struct gm_account_device *d, int k)
{
    const struct gm_account_balance *b = k == 0 ? &d->peak : &d->end;
    return b->valid ? b : NULL;
}

/* The labels of device 'dv' of process 'p' at moment k, then the job's. */
static void labels(FILE *f, bool *first, const struct gm_account_process *p,
                   const struct gm_account_device *dv, int k, const struct gm_watch_prom_labels *l)
{
    char pid[16], cuda[16], rank[16];
    const char *name = p->command, *end = strchr(name, ' '), *slash;
    char process[256];
    size_t n = end ? (size_t)(end - name) : strlen(name);
    /* the program of the command line, without its folder, as the watch's 'process' */
    snprintf(process, sizeof(process), "%.*s", (int)n, name);
    slash = strrchr(process, '/');
    snprintf(pid, sizeof(pid), "%" PRIu32, p->pid);
    snprintf(cuda, sizeof(cuda), "%" PRId32, dv->cuda);
    gm_prom_label(f, first, "pid", pid);
    if (process[0])
        gm_prom_label(f, first, "process", slash ? slash + 1 : process);
    gm_prom_label(f, first, "cuda", cuda);
    if (dv->uuid[0])
        gm_prom_label(f, first, "UUID", dv->uuid);
    gm_prom_label(f, first, "at", k == 0 ? "peak" : "end");
    if (p->rank >= 0)
        snprintf(rank, sizeof(rank), "%" PRId32, p->rank);
    gm_prom_job_labels(f, first, l ? l->hostname : NULL, l ? l->job : NULL,
                       p->rank >= 0 ? rank
                       : l          ? l->rank
                                    : NULL);
}

/* The terms of equation 'b', a sample each. */
static void term_samples(FILE *f, const struct gm_account_process *p,
                         const struct gm_account_device *dv, int k,
                         const struct gm_account_balance *b, const struct gm_watch_prom_labels *l)
{
    for (size_t t = 0; t < b->n_terms; t++) {
        const struct gm_account_term *term = &b->terms[t];
        bool first = true;
        fputs(TERM_NAME, f);
        labels(f, &first, p, dv, k, l);
        gm_prom_label(f, &first, "term", gm_account_term_key(term->kind));
        if (term->kind == GM_ACCOUNT_TERM_LIBRARY || term->kind == GM_ACCOUNT_TERM_OTHERS)
            gm_prom_label(f, &first, "lib", gm_account_lib_key(term->lib));
        if (gm_account_term_object(term))
            gm_prom_label(f, &first, "object", term->object);
        gm_prom_end_labels(f, first);
        fprintf(f, " %" PRId64 "\n", term->bytes);
    }
}

/* The samples of one family, every process, device and moment: the readings, or the terms. */
static void samples(FILE *f, const struct gm_account *a, const struct gm_watch_prom_labels *l,
                    bool terms)
{
    for (size_t i = 0; i < gm_account_n_processes(a); i++) {
        const struct gm_account_process *p = gm_account_process(a, i);
        for (size_t j = 0; j < p->n_devices; j++)
            for (int k = 0; k < 2; k++) {
                const struct gm_account_balance *b = balance_at(&p->devices[j], k);
                bool first = true;
                if (b && terms) {
                    term_samples(f, p, &p->devices[j], k, b, l);
                } else if (b && b->used_valid) {
                    fputs(USED_NAME, f);
                    labels(f, &first, p, &p->devices[j], k, l);
                    gm_prom_end_labels(f, first);
                    fprintf(f, " %" PRIu64 "\n", b->used);
                }
            }
    }
}

enum gm_status gm_account_prometheus(FILE *f, const struct gm_account *a,
                                     const struct gm_watch_prom_labels *l, struct gm_error *err)
{
    gm_prom_family(f, USED_NAME, "gauge",
                   "Device memory used by a process of the watched command, as the equation of "
                   "gpumem account balances it (bytes).");
    samples(f, a, l, false);
    gm_prom_family(f, TERM_NAME, "gauge",
                   "A term of the equation of gpumem account: where device memory of a process "
                   "went (bytes; not_seen, the reading less every other term, may be negative).");
    samples(f, a, l, true);
    if (fflush(f) != 0 || ferror(f))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the account's metrics failed");
    return GM_OK;
}
