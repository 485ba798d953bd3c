/* SPDX-License-Identifier: MIT */
/* watch_metrics.c - `gpumem watch --prometheus FILE` (watch_metrics.h). */
#include "watch_metrics.h"

#include "cli.h"

#include "gpumem/output.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WATCH_METRICS_EVERY_MS 1000

void watch_metrics_init(struct watch_metrics *m, const char *path)
{
    const char *node = getenv("SLURMD_NODENAME");
    memset(m, 0, sizeof(*m));
    m->path = path;
    m->labels.job = getenv("SLURM_JOB_ID");
    m->labels.rank = getenv("SLURM_PROCID") ? getenv("SLURM_PROCID") : getenv("RANK");
    if (node && *node) {
        snprintf(m->host, sizeof(m->host), "%s", node);
        m->labels.hostname = m->host;
    } else if (gethostname(m->host, sizeof(m->host)) == 0) {
        m->host[sizeof(m->host) - 1] = '\0';
        m->labels.hostname = m->host;
    }
}

int watch_metrics_write(struct watch_metrics *m, const char *cmd, const struct gm_watch *w,
                        const struct gm_devices *d, uint64_t t_ms, bool final)
{
    struct gm_output o;
    struct gm_error err;
    int rc;
    if (!m->path || (!final && m->written && t_ms < m->written_ms + WATCH_METRICS_EVERY_MS))
        return 0;
    if ((rc = cli_output_open(&o, cmd, m->path, true)) != 0)
        return rc;
    if (gm_watch_prometheus(o.f, w, d, &m->labels, &err) != GM_OK)
        return cli_output_fail(&o, cmd, &err);
    m->written = true;
    m->written_ms = t_ms;
    return cli_output_commit(&o, cmd);
}
