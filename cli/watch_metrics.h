/* SPDX-License-Identifier: MIT */
/* watch_metrics.h - `gpumem watch --prometheus FILE`: the watch's latest state in the
 * Prometheus text format (gm_watch_prometheus()), rewritten at most once a second and at the
 * end, each time whole into a temporary file renamed over FILE, so that node_exporter's
 * textfile collector never reads half a file.  The job labels come from the launcher's
 * environment: SLURM_JOB_ID; SLURM_PROCID, else RANK (torchrun); SLURMD_NODENAME, else the
 * host name.  `--listen ADDR:PORT` serves the same text at /metrics over HTTP/1.0, one
 * scrape at a time between two samples. */
#ifndef GM_CLI_WATCH_METRICS_H
#define GM_CLI_WATCH_METRICS_H

#include "gpumem/watch.h"

#include <stdbool.h>
#include <stdint.h>

struct watch_metrics {
    const char *path; /* NULL: no --prometheus */
    int listen_fd;    /* --listen: the listening socket, -1 none */
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

/* --listen ADDR:PORT (an IPv4 address or a host name, "*" every address; port 0: any,
 * said on stderr): listen for scrapes.  0, or an exit code after printing the error. */
int watch_metrics_listen(struct watch_metrics *m, const char *cmd, const char *addr);

/* Answer the scrapes waiting (never waits for one): GET /metrics gets the latest state,
 * another path 404, another method 405.  A client that does not send its request within
 * 200 ms is dropped. */
void watch_metrics_serve(struct watch_metrics *m, const struct gm_watch *w,
                         const struct gm_devices *d);

void watch_metrics_close(struct watch_metrics *m);

#endif
