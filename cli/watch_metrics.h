/* SPDX-License-Identifier: MIT */
/* watch_metrics.h - `gpumem watch --prometheus FILE`: the watch's latest state in the
 * Prometheus text format (gm_watch_prometheus()), rewritten at most once a second and at the
 * end, each time whole into a temporary file renamed over FILE, so that node_exporter's
 * textfile collector never reads half a file.  The job labels come from the launcher's
 * environment: SLURM_JOB_ID; SLURM_PROCID, else RANK (torchrun); SLURMD_NODENAME, else the
 * host name. */
#ifndef GM_CLI_WATCH_METRICS_H
#define GM_CLI_WATCH_METRICS_H

#include "gpumem/watch.h"

#include <stdbool.h>
#include <stdint.h>

struct watch_metrics {
    const char *path; /* NULL: no --prometheus */
    struct gm_watch_prom_labels labels;
    char host[256];
    uint64_t written_ms; /* when the file was last written */
    bool written;
};

/* Take the labels from the environment. */
void watch_metrics_init(struct watch_metrics *m, const char *path);

/* Write the file when a second has passed since the last time, or 'final'.  0, or an exit
 * code after printing the error. */
int watch_metrics_write(struct watch_metrics *m, const char *cmd, const struct gm_watch *w,
                        const struct gm_devices *d, uint64_t t_ms, bool final);

#endif
