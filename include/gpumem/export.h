/* SPDX-License-Identifier: MIT */
/* export.h - a snapshot and its analysis written in the formats other tools read:
 *
 *   GM_EXPORT_PERFETTO    Chrome trace-event JSON (ui.perfetto.dev, chrome://tracing): a
 *                         process per device, counter tracks of the allocated bytes by
 *                         category and of the reserved bytes, the phases, iterations and
 *                         record_function annotations as slices, out-of-memory events as
 *                         instants
 *   GM_EXPORT_SPEEDSCOPE  speedscope's JSON file format: a sampled profile per device of the
 *                         stacks alive at the peak (or after one event), weighted by bytes
 *   GM_EXPORT_PPROF       a gzip'd profile.proto (go tool pprof, Pyroscope): the same
 *                         stacks, sample types objects/count and space/bytes
 *   GM_EXPORT_SQLITE      an SQLite database: device_traces, segments and blocks (joined by
 *                         segment_id and address), frames, stack_frames, allocations,
 *                         categories, phases, iterations (docs/export.md has the schema)
 *
 * Every figure is the analysis' (gpumem/analysis.h): what is alive is what `snapshot peak`
 * lists, categories and phases are the analysis' own, stacks are shown by the one frame
 * rule (gm_snapshot_stack_frames()).  Nothing is computed here that the analysis knows. */
#ifndef GPUMEM_EXPORT_H
#define GPUMEM_EXPORT_H

#include "gpumem/analysis.h"
#include "gpumem/error.h"
#include "gpumem/snapshot.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

enum gm_export_format {
    GM_EXPORT_PERFETTO = 0,
    GM_EXPORT_SPEEDSCOPE,
    GM_EXPORT_PPROF,
    GM_EXPORT_SQLITE,
};
#define GM_EXPORT_FORMAT_COUNT 4

/* "perfetto", "speedscope", "pprof", "sqlite"; static storage. */
const char *gm_export_format_name(enum gm_export_format f);

/* Whether this build can write 'f' (SQLite is optional at build time). */
bool gm_export_available(enum gm_export_format f);

/* Options; zero-initialise, then set what you need. */
struct gm_export_opts {
    enum gm_export_format format;
    int32_t device; /* only this CUDA device; -1: every device */
    bool at_given;  /* speedscope, pprof: what is alive after event 'at' of each device */
    int64_t at;     /* (-1: the state before the first event) instead of at the peak */
};

/* One snapshot to export: its analysis and the name it is shown by. */
struct gm_export_input {
    const char *label;              /* the file's name (NULL: none) */
    const struct gm_snapshot *snap; /* borrowed */
    const struct gm_analysis *an;   /* gm_analysis_run() of snap; borrowed */
};

/* Write the n inputs in o->format to 'f'.  Perfetto and speedscope take several, the ranks
 * of one job: a process (a profile) per file and device, on one time axis (microseconds
 * since the earliest first event of them all); pprof and SQLite one.  The Perfetto counters
 * are the analysis' series (gm_analysis_opts.max_points: every bucket's least, most and last
 * figures are exact).  Errors: GM_ERR_INVALID (no such device or event, or several inputs
 * for a format that takes one), GM_ERR_UNSUPPORTED (a format this build lacks),
 * GM_ERR_NOMEM, GM_ERR_LIMIT, GM_ERR_IO (the write failed). */
enum gm_status gm_export_write(FILE *f, const struct gm_export_input *in, size_t n,
                               const struct gm_export_opts *o, struct gm_error *err);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
