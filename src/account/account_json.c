/* SPDX-License-Identifier: MIT */
/* account_json.c - the account as one JSON document, schema gpumem.account.summary/1 (what
 * `gpumem account --json` prints):
 *
 *   {schema, gpumem_version, processes: [{pid, ppid, rank, local_rank, command, file, end,
 *    signal, disabled, disabled_reason, events, dropped, unhooked, host: {peak, registered,
 *    by_lib}, devices: [{device, uuid, name, total, granularity, granularity_measured,
 *    tracked_peak, peak: BALANCE, end: BALANCE}], largest: [{t_ns, device, kind, api,
 *    bytes, lib, object, frames}]}]}
 *   BALANCE: {at, t_ns, used, used_source, used_t_ns, consistent, seen, managed, virtual,
 *    terms: [{term, title, lib, object, bytes, count, source, detail}]} or null
 *
 * Bytes are integers; "used" is null when nothing read the device; "not_seen" is the last
 * term, when there is a reading. */
#include "account/account_int.h"

#include "gpumem/json.h"
#include "gpumem/version.h"

#include <errno.h>
#include <string.h>

static void int_or_null(struct gm_json *w, const char *k, int64_t v)
{
    if (v < 0)
        gm_json_kv_null(w, k);
    else
        gm_json_kv_i64(w, k, v);
}

static void balance(struct gm_json *w, const char *k, const struct gm_account_balance *b)
{
    char detail[256];
    gm_json_key(w, k);
    if (!b->valid) {
        gm_json_null(w);
        return;
    }
    gm_json_begin_object(w);
    gm_json_kv_str(w, "at", gm_account_moment_name(b->at));
    gm_json_kv_u64(w, "t_ns", b->t_ns);
    if (b->used_valid) {
        gm_json_kv_u64(w, "used", b->used);
        gm_json_kv_str(w, "used_source", gm_account_reading_key(b->used_source));
        gm_json_kv_u64(w, "used_t_ns", b->used_t_ns);
    } else {
        gm_json_kv_null(w, "used");
        gm_json_kv_null(w, "used_source");
        gm_json_kv_null(w, "used_t_ns");
    }
    gm_json_kv_bool(w, "consistent", b->consistent);
    gm_json_kv_u64(w, "seen", b->seen);
    gm_json_kv_u64(w, "managed", b->managed);
    gm_json_kv_u64(w, "virtual", b->virtual_reserved);
    gm_json_key(w, "terms");
    gm_json_begin_array(w);
    for (size_t i = 0; i < b->n_terms; i++) {
        const struct gm_account_term *t = &b->terms[i];
        gm_json_begin_object(w);
        gm_json_kv_str(w, "term", gm_account_term_key(t->kind));
        gm_json_kv_str(w, "title", gm_account_term_title(t));
        if (t->kind == GM_ACCOUNT_TERM_LIBRARY || t->kind == GM_ACCOUNT_TERM_OTHERS) {
            gm_json_kv_str(w, "lib", gm_account_lib_key(t->lib));
            gm_json_kv_str(w, "object", t->object);
        }
        gm_json_kv_i64(w, "bytes", t->bytes);
        gm_json_kv_u64(w, "count", t->count);
        if (t->kind <= GM_ACCOUNT_TERM_GRAPHS)
            gm_json_kv_str(w, "source", gm_account_reading_key(t->source));
        gm_account_term_source(t, b, detail, sizeof(detail));
        gm_json_kv_str(w, "detail", detail);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);
}

static const char *end_key(enum gm_account_end e)
{
    return e == GM_ACCOUNT_END_EXIT ? "exit" : e == GM_ACCOUNT_END_SIGNAL ? "signal" : "none";
}

static void process(struct gm_json *w, const struct gm_account_process *p)
{
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "pid", p->pid);
    gm_json_kv_u64(w, "ppid", p->ppid);
    int_or_null(w, "rank", p->rank);
    int_or_null(w, "local_rank", p->local_rank);
    gm_json_kv_str(w, "command", p->command);
    gm_json_kv_str(w, "file", p->file);
    gm_json_kv_str(w, "end", end_key(p->end));
    int_or_null(w, "signal", p->end == GM_ACCOUNT_END_SIGNAL ? p->signal : -1);
    gm_json_kv_bool(w, "disabled", p->disabled);
    if (p->disabled)
        gm_json_kv_str(w, "disabled_reason", p->disabled_reason);
    else
        gm_json_kv_null(w, "disabled_reason");
    gm_json_kv_u64(w, "events", p->n_events);
    gm_json_kv_u64(w, "dropped", p->n_dropped);
    gm_json_kv_u64(w, "unhooked", p->n_unhooked);
    gm_json_key(w, "host");
    gm_json_begin_object(w);
    gm_json_kv_u64(w, "peak", p->host_peak);
    gm_json_kv_u64(w, "registered", p->host_registered_peak);
    gm_json_key(w, "by_lib");
    gm_json_begin_object(w);
    for (int l = 0; l < GM_ACCOUNT_LIB__COUNT; l++)
        if (p->host_bytes[l])
            gm_json_kv_u64(w, gm_account_lib_key((enum gm_account_lib)l), p->host_bytes[l]);
    gm_json_end_object(w);
    gm_json_end_object(w);
    gm_json_key(w, "devices");
    gm_json_begin_array(w);
    for (size_t i = 0; i < p->n_devices; i++) {
        const struct gm_account_device *d = &p->devices[i];
        gm_json_begin_object(w);
        gm_json_kv_i64(w, "device", d->cuda);
        gm_json_kv_str(w, "uuid", d->uuid);
        gm_json_kv_str(w, "name", d->name);
        gm_json_kv_u64(w, "total", d->total);
        gm_json_kv_u64(w, "granularity", d->granularity);
        gm_json_kv_bool(w, "granularity_measured", d->granularity_measured);
        gm_json_kv_u64(w, "tracked_peak", d->tracked_peak);
        gm_json_kv_u64(w, "samples", d->n_points);
        balance(w, "peak", &d->peak);
        balance(w, "end", &d->end);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_key(w, "largest");
    gm_json_begin_array(w);
    for (size_t i = 0; i < p->n_largest; i++) {
        const struct gm_account_alloc *a = &p->largest[i];
        gm_json_begin_object(w);
        gm_json_kv_u64(w, "t_ns", a->t_ns);
        gm_json_kv_i64(w, "device", a->device);
        gm_json_kv_str(w, "kind", gm_account_kind_key(a->kind));
        gm_json_kv_str(w, "api", a->api);
        gm_json_kv_u64(w, "bytes", a->bytes);
        gm_json_kv_str(w, "lib", gm_account_lib_key(a->lib));
        gm_json_kv_str(w, "object", a->object);
        gm_json_key(w, "frames");
        gm_json_begin_array(w);
        for (size_t f = 0; f < a->n_frames; f++)
            gm_json_str(w, a->frames[f]);
        gm_json_end_array(w);
        gm_json_end_object(w);
    }
    gm_json_end_array(w);
    gm_json_end_object(w);
}

enum gm_status gm_account_write_json(FILE *f, const struct gm_account *a, struct gm_error *err)
{
    struct gm_json w;
    gm_json_init(&w, f, GM_JSON_PRETTY);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "schema", "gpumem.account.summary/1");
    gm_json_kv_str(&w, "gpumem_version", gm_version());
    gm_json_key(&w, "processes");
    gm_json_begin_array(&w);
    for (size_t i = 0; i < gm_account_n_processes(a); i++)
        process(&w, gm_account_process(a, i));
    gm_json_end_array(&w);
    gm_json_end_object(&w);
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the account failed: %s",
                       strerror(errno));
    return GM_OK;
}
