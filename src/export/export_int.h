/* SPDX-License-Identifier: MIT */
/* export_int.h - what the writers of src/export share (library-internal). */
#ifndef GM_EXPORT_EXPORT_INT_H
#define GM_EXPORT_EXPORT_INT_H

#include "gpumem/export.h"

/* The stacks alive on one device at the moment an export shows: at the peak (as
 * `snapshot peak` groups them) or after event o->at. */
struct export_alive {
    int32_t device;
    int64_t event; /* the moment: the event after which they are alive, -1 the start */
    uint64_t bytes;
    struct gm_snapshot_live_group *groups; /* by stack, largest first (gm_free()) */
    size_t n_groups;
};

/* The moments of every device 'o' selects into *out (export_alive_release()); *n_out of them.
 * Errors: GM_ERR_INVALID (no such device or event), GM_ERR_NOMEM, GM_ERR_LIMIT. */
enum gm_status export_alive_collect(const struct gm_snapshot *snap, const struct gm_analysis *an,
                                    const struct gm_export_opts *o, struct export_alive **out,
                                    size_t *n_out, struct gm_error *err);
void export_alive_release(struct export_alive *a, size_t n);

/* Whether device index 'device' is one 'o' selects. */
static inline bool export_selects(const struct gm_export_opts *o, int32_t device)
{
    return o->device < 0 || o->device == device;
}

enum gm_status export_perfetto(FILE *f, const struct gm_export_input *in, size_t n,
                               const struct gm_export_opts *o, struct gm_error *err);
enum gm_status export_speedscope(FILE *f, const struct gm_export_input *in, size_t n,
                                 const struct gm_export_opts *o, struct gm_error *err);
enum gm_status export_pprof(FILE *f, const struct gm_export_input *in,
                            const struct gm_export_opts *o, struct gm_error *err);
enum gm_status export_sqlite(FILE *f, const struct gm_export_input *in,
                             const struct gm_export_opts *o, struct gm_error *err);

#endif
