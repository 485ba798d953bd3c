/* SPDX-License-Identifier: MIT */
/* export.c - gm_export_write(): the format table, and the stacks alive at the moment an
 * export shows, which the speedscope and pprof writers share. */
#include "export/export_int.h"

#include "gpumem/arena.h"

#include <string.h>

static const char *const format_name[GM_EXPORT_FORMAT_COUNT] = {"perfetto", "speedscope", "pprof",
                                                                "sqlite"};

const char *gm_export_format_name(enum gm_export_format f)
{
    return (unsigned)f < GM_EXPORT_FORMAT_COUNT ? format_name[f] : "?";
}

bool gm_export_available(enum gm_export_format f)
{
#ifdef GM_HAVE_SQLITE
    return (unsigned)f < GM_EXPORT_FORMAT_COUNT;
#else
    return (unsigned)f < GM_EXPORT_FORMAT_COUNT && f != GM_EXPORT_SQLITE;
#endif
}

void export_alive_release(struct export_alive *a, size_t n)
{
    for (size_t i = 0; a && i < n; i++)
        gm_free(a[i].groups);
    gm_free(a);
}

enum gm_status export_alive_collect(const struct gm_snapshot *snap, const struct gm_analysis *an,
                                    const struct gm_export_opts *o, struct export_alive **out,
                                    size_t *n_out, struct gm_error *err)
{
    struct gm_analysis_peaks peaks = {0};
    struct gm_analysis_peaks_opts po = {o->device, SIZE_MAX};
    struct export_alive *a;
    size_t n = 0;
    enum gm_status st = GM_OK;
    *out = NULL;
    *n_out = 0;
    if (!o->at_given && (st = gm_analysis_peaks(snap, an, &po, &peaks, err)) != GM_OK)
        return st;
    a = gm_calloc(an->n_devices ? an->n_devices : 1, sizeof(*a));
    if (!a) {
        gm_analysis_peaks_release(&peaks);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "export: out of memory");
    }
    for (size_t d = 0; d < an->n_devices && st == GM_OK; d++) {
        const struct gm_analysis_device *dev = &an->devices[d];
        struct export_alive *x = &a[n];
        if (!export_selects(o, dev->device))
            continue;
        x->device = dev->device;
        if (o->at_given) {
            x->event = o->at;
            st = gm_analysis_group_live_at(an, dev, o->at, &x->groups, &x->n_groups, err);
        } else {
            const struct gm_peak_device *p = NULL;
            for (size_t i = 0; i < peaks.n_devices; i++)
                if (peaks.devices[i].device == dev->device)
                    p = &peaks.devices[i];
            x->event = dev->peak_event;
            if (p && p->n_groups) {
                x->groups = gm_calloc(p->n_groups, sizeof(*x->groups));
                if (!x->groups)
                    st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "export: out of memory");
                else
                    memcpy(x->groups, p->groups, p->n_groups * sizeof(*x->groups));
                x->n_groups = x->groups ? p->n_groups : 0;
            }
        }
        for (size_t g = 0; g < x->n_groups; g++)
            x->bytes += x->groups[g].bytes;
        n++;
    }
    gm_analysis_peaks_release(&peaks);
    if (st == GM_OK && o->device >= 0 && !n)
        st = gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "the snapshot has no device %d",
                     (int)o->device);
    if (st != GM_OK) {
        export_alive_release(a, an->n_devices); /* zeroed past the last one used */
        return st;
    }
    *out = a;
    *n_out = n;
    return GM_OK;
}

enum gm_status gm_export_write(FILE *f, const struct gm_export_input *in, size_t n,
                               const struct gm_export_opts *o, struct gm_error *err)
{
    if (!n)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "export: no snapshot to write");
    for (size_t i = 0; i < n; i++) {
        enum gm_status st = gm_analysis_require_series(in[i].an, "export", err);
        if (st != GM_OK)
            return st;
        if (o->device >= 0 && !gm_analysis_device_by_index(in[i].an, o->device))
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "%s%sthe snapshot has no device %d",
                           in[i].label ? in[i].label : "", in[i].label ? ": " : "", (int)o->device);
    }
    if (n > 1 && o->format != GM_EXPORT_PERFETTO && o->format != GM_EXPORT_SPEEDSCOPE)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "%s takes one snapshot at a time",
                       gm_export_format_name(o->format));
    switch (o->format) {
    case GM_EXPORT_PERFETTO:
        return export_perfetto(f, in, n, o, err);
    case GM_EXPORT_SPEEDSCOPE:
        return export_speedscope(f, in, n, o, err);
    case GM_EXPORT_PPROF:
        return export_pprof(f, in, o, err);
    case GM_EXPORT_SQLITE:
        return export_sqlite(f, in, o, err);
    }
    return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "export: unknown format %d", (int)o->format);
}
