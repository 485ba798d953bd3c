/* SPDX-License-Identifier: MIT */
/* html_account.c - the "account" member of the HTML report's data: where each process's
 * device memory went (gpumem account of the same run), drawn beside the snapshot.
 *
 *   account{t0_ns, processes[{pid, rank, command, devices[{device, name, total,
 *           peak: BAL, end: BAL, points[[t_s, used | null, seen, torch]]}]}]}
 *   BAL: {at, t_s, used | null, used_source, terms[[title, bytes, term, lib, detail]]} | null
 * Times are seconds since the first process's start; bytes integers; at most MAX_POINTS
 * points per device (each the one with the most device used of its stretch). */
#include "report/report_int.h"

#include "gpumem/account.h"

#include <string.h>

#define MAX_POINTS 400

static double secs(uint64_t t, uint64_t t0)
{
    return t > t0 ? (double)(t - t0) / 1e9 : 0.0;
}

static void balance(struct gm_json *w, const char *key, const struct gm_account_balance *b,
                    uint64_t t0)
{
    char detail[256];
    gm_json_key(w, key);
    if (!b->valid) {
        gm_json_null(w);
        return;
    }
    gm_json_begin_object(w);
    gm_json_kv_str(w, "at", gm_account_moment_name(b->at));
    gm_json_key(w, "t_s");
    gm_report_num(w, secs(b->t_ns, t0));
    if (b->used_valid)
        gm_json_kv_u64(w, "used", b->used);
    else
        gm_json_kv_null(w, "used");
    gm_json_kv_str(w, "used_source", gm_account_reading_key(b->used_source));
    gm_json_key(w, "terms");
    gm_json_begin_array(w);
    for (size_t i = 0; i < b->n_terms; i++) {
        const struct gm_account_term *t = &b->terms[i];
        gm_account_term_source(t, b, detail, sizeof(detail));
        gm_json_begin_array(w);
        gm_json_str(w, gm_account_term_title(t));
        gm_json_i64(w, t->bytes);
        gm_json_str(w, gm_account_term_key(t->kind));
        gm_json_str(w, gm_account_lib_key(t->lib));
        gm_json_str(w, detail);
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);
}

static void points(struct gm_json *w, const struct gm_account_device *d, uint64_t t0)
{
    size_t n = d->n_points, step = (n + MAX_POINTS - 1) / MAX_POINTS;
    gm_json_key(w, "points");
    gm_json_begin_array(w);
    for (size_t i = 0; step && i < n; i += step) {
        const struct gm_account_point *best = &d->points[i];
        for (size_t k = i + 1; k < i + step && k < n; k++)
            if (d->points[k].used > best->used)
                best = &d->points[k];
        gm_json_begin_array(w);
        gm_report_num(w, secs(best->t_ns, t0));
        if (best->used_valid)
            gm_json_u64(w, best->used);
        else
            gm_json_null(w);
        gm_json_u64(w, best->seen);
        gm_json_u64(w, best->by_lib[GM_ACCOUNT_LIB_TORCH]);
        gm_json_end_array(w);
    }
    gm_json_end_array(w);
}

void gm_report_account(struct gm_json *w, const struct gm_account *a)
{
    size_t n = gm_account_n_processes(a);
    uint64_t t0 = UINT64_MAX;
    if (!a || !n) {
        gm_json_null(w);
        return;
    }
    for (size_t i = 0; i < n; i++)
        if (gm_account_process(a, i)->t_start_ns < t0)
            t0 = gm_account_process(a, i)->t_start_ns;
    gm_json_begin_object(w);
    gm_json_key(w, "processes");
    gm_json_begin_array(w);
    for (size_t i = 0; i < n; i++) {
        const struct gm_account_process *p = gm_account_process(a, i);
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "pid", p->pid);
        gm_json_kv_i64(w, "rank", p->rank);
        gm_json_kv_str(w, "command", p->command);
        gm_json_kv_bool(w, "disabled", p->disabled);
        gm_json_key(w, "devices");
        gm_json_begin_array(w);
        for (size_t k = 0; k < p->n_devices; k++) {
            const struct gm_account_device *d = &p->devices[k];
            gm_json_begin_object(w);
            gm_json_kv_i64(w, "device", d->cuda);
            gm_json_kv_str(w, "name", d->name);
            gm_json_kv_u64(w, "total", d->total);
            balance(w, "peak", &d->peak, t0);
            balance(w, "end", &d->end, t0);
            points(w, d, t0);
            gm_json_end_object(w);
        }
        gm_json_end_array(w);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);
}
