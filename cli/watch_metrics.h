/* SPDX-License-Identifier: MIT */
/* watch_metrics.h - `gpumem watch --prometheus FILE`: the watch's latest state in the
 * Prometheus text format (gm_watch_prometheus()), rewritten at most once a second and at the
 * end, each time whole into a temporary file renamed over FILE, so that node_exporter's
 * textfile collector never reads half a file.  The job labels come from the launcher's
 * environment: SLURM_JOB_ID; SLURM_PROCID, else RANK (torchrun); SLURMD_NODENAME, else the
 * host name.  `--listen ADDR:PORT` serves the same text at /metrics over HTTP/1.0, one
 * scrape at a time between two samples.  With --account the account's equations follow the
 * watch's metrics (gm_account_prometheus()).  The watched command's gpumem.torch phases
 * follow them (gm_measure_series_prometheus()): the command runs with GPUMEM_TORCH_OUTPUT
 * naming series-{rank}.json in a private temporary folder, one file per process, read again
 * at each update. */
#ifndef GM_CLI_WATCH_METRICS_H
#define GM_CLI_WATCH_METRICS_H

#include "gpumem/account.h"
#include "gpumem/measure.h"
#include "gpumem/watch.h"

#include <stdbool.h>
#include <stdint.h>

struct watch_metrics {
    const char *path; /* NULL: no --prometheus */
    int listen_fd;    /* --listen: the listening socket, -1 none */
    struct gm_watch_prom_labels labels;
    char host[256];
    uint64_t written_ms; /* when the metrics were last brought up to date */
    bool written;
    const char *account_dir;           /* --account: the interposer's folder, NULL none */
    struct gm_account *account;        /* its files as last read (NULL: none yet) */
    char series_dir[4096];             /* the series' temporary folder ("": none) */
    char **env;                        /* the command's environment with GPUMEM_TORCH_OUTPUT */
    struct gm_measure_series **series; /* the series as last read, one per file */
    char **ranks;                      /* the rank of each, from its file's name */
    size_t n_series;
};

/* Take the labels from the environment. */
void watch_metrics_init(struct watch_metrics *m, const char *path);

/* With --prometheus or --listen: make the series' folder, and the command's environment
 * 'envp' plus GPUMEM_TORCH_OUTPUT (*env_out; 'envp' itself otherwise).  0, or an exit code
 * after printing the error. */
int watch_metrics_series_begin(struct watch_metrics *m, const char *cmd, char **envp,
                               char ***env_out);

/* Bring the metrics up to date when a second has passed since the last time, or 'final':
 * with --account, read the interposer's files again (the processes' equations so far: a
 * process still running gives its latest sample); read the series' files again; then write
 * the file.  0, or an exit code after printing the error. */
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

/* Free everything, and remove the series' folder and its files. */
void watch_metrics_close(struct watch_metrics *m);

#endif
