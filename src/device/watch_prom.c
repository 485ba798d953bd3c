/* SPDX-License-Identifier: MIT */
/* watch_prom.c - the latest state of a `gpumem watch` run in the Prometheus text exposition
 * format (version 0.0.4), for node_exporter's textfile collector or a scrape of /metrics.
 *
 * Names follow DCGM exporter's where they mean the same thing, so that one dashboard reads
 * both: DCGM_FI_DEV_FB_USED and DCGM_FI_DEV_FB_FREE, gauges in MiB (2^20 bytes, rounded
 * down), labelled gpu (the NVML index), UUID, device ("nvidiaN"), modelName and Hostname.
 * gpumem's own metrics are in bytes (gpumem_*_bytes).  Every series also carries the
 * caller's job labels (the job id and rank, from the launcher's environment).  The text is
 * written by base/prom.h. */
#include "gpumem/watch.h"

#include "base/prom.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static void job_labels(FILE *f, bool *first, const struct gm_watch_prom_labels *l)
{
    if (l)
        gm_prom_job_labels(f, first, l->hostname, l->job, l->rank);
}

/* The labels of device 'i' of the watch, then the job's. */
static void device_labels(FILE *f, bool *first, const struct gm_watch *w, uint32_t i,
                          const struct gm_devices *d, const struct gm_watch_prom_labels *l)
{
    const struct gm_device_info *info = d ? gm_devices_info(d, w->dev[i].pos) : NULL;
    char gpu[16], dev[24];
    if (info && info->nvml_index >= 0) {
        snprintf(gpu, sizeof(gpu), "%d", info->nvml_index);
        snprintf(dev, sizeof(dev), "nvidia%d", info->nvml_index);
        gm_prom_label(f, first, "gpu", gpu);
        if (info->uuid[0])
            gm_prom_label(f, first, "UUID", info->uuid);
        gm_prom_label(f, first, "device", dev);
    } else {
        gm_prom_label(f, first, "gpu", w->dev[i].label);
    }
    if (w->dev[i].name[0])
        gm_prom_label(f, first, "modelName", w->dev[i].name);
    job_labels(f, first, l);
}

/* The latest free bytes of device i: its last stored device row, else total - used. */
static struct gm_reading last_free(const struct gm_watch *w, uint32_t i)
{
    const struct gm_watch_device *dv = &w->dev[i];
    for (size_t k = w->n_samples; !w->samples_dropped && k-- > 0;)
        if (!w->samples[k].pid && w->samples[k].device == i)
            return w->samples[k].free;
    if (dv->total.valid && dv->last_used.valid && dv->total.value >= dv->last_used.value)
        return (struct gm_reading){dv->total.value - dv->last_used.value, true};
    return (struct gm_reading){0, false};
}

enum gm_status gm_watch_prometheus(FILE *f, const struct gm_watch *w, const struct gm_devices *d,
                                   const struct gm_watch_prom_labels *l, struct gm_error *err)
{
    bool first;
    gm_prom_family(f, "DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).");
    for (uint32_t i = 0; i < w->n_dev; i++) {
        if (!w->dev[i].last_used.valid)
            continue;
        first = true;
        fputs("DCGM_FI_DEV_FB_USED", f);
        device_labels(f, &first, w, i, d, l);
        gm_prom_end_labels(f, first);
        fprintf(f, " %" PRIu64 "\n", w->dev[i].last_used.value >> 20);
    }
    gm_prom_family(f, "DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).");
    for (uint32_t i = 0; i < w->n_dev; i++) {
        struct gm_reading fr = last_free(w, i);
        if (!fr.valid)
            continue;
        first = true;
        fputs("DCGM_FI_DEV_FB_FREE", f);
        device_labels(f, &first, w, i, d, l);
        gm_prom_end_labels(f, first);
        fprintf(f, " %" PRIu64 "\n", fr.value >> 20);
    }
    gm_prom_family(f, "gpumem_device_memory_used_peak_bytes", "gauge",
                   "The most device memory used since the watch started (bytes).");
    for (uint32_t i = 0; i < w->n_dev; i++) {
        if (!w->dev[i].peak.valid)
            continue;
        first = true;
        fputs("gpumem_device_memory_used_peak_bytes", f);
        device_labels(f, &first, w, i, d, l);
        gm_prom_end_labels(f, first);
        fprintf(f, " %" PRIu64 "\n", w->dev[i].peak.value);
    }
    gm_prom_family(
        f, "gpumem_process_memory_bytes", "gauge",
        "Device memory of a process of the watched command, at the latest process reading "
        "that listed it (bytes).");
    for (uint32_t k = 0; k < w->n_proc; k++) {
        const struct gm_watch_proc *p = &w->proc[k];
        char pid[16];
        /* only the processes the latest process reading listed: current, as DCGM's */
        if (p->device >= w->n_dev || !w->n_process_reads || p->last_t_ms != w->round_t_ms)
            continue;
        snprintf(pid, sizeof(pid), "%" PRIu32, p->pid);
        first = true;
        fputs("gpumem_process_memory_bytes", f);
        device_labels(f, &first, w, p->device, d, l);
        gm_prom_label(f, &first, "pid", pid);
        if (p->name[0])
            gm_prom_label(f, &first, "process", p->name);
        gm_prom_end_labels(f, first);
        fprintf(f, " %" PRIu64 "\n", p->last_used);
    }
    gm_prom_family(f, "gpumem_command_memory_peak_bytes", "gauge",
                   "The most device memory of the watched command, all its devices at one moment "
                   "(bytes).");
    first = true;
    fputs("gpumem_command_memory_peak_bytes", f);
    job_labels(f, &first, l);
    gm_prom_end_labels(f, first);
    fprintf(f, " %" PRIu64 "\n", w->cmd_peak);
    gm_prom_family(f, "gpumem_watch_device_reads_total", "counter",
                   "Device memory readings taken by gpumem watch.");
    first = true;
    fputs("gpumem_watch_device_reads_total", f);
    job_labels(f, &first, l);
    gm_prom_end_labels(f, first);
    fprintf(f, " %" PRIu64 "\n", w->n_device_reads);
    if (fflush(f) != 0 || ferror(f))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the metrics failed");
    return GM_OK;
}
