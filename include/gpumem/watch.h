/* SPDX-License-Identifier: MIT */
/* watch.h - the record of a `gpumem watch` run: timed samples of device memory and of the
 * GPU memory of the watched processes, their peaks, and the CSV / JSON files written from
 * them.  Sampling itself (timers, child processes, signals) is the caller's business.
 *
 * Attribution: NVML reports host PIDs.  A process row is attributed to the watched command
 * either because its PID is in the command's process tree (GM_WATCH_ATTR_PID_TREE), or,
 * when NVML PIDs are not visible from here (a PID namespace), because it appeared after
 * the command started (GM_WATCH_ATTR_NEW_PID).  When neither finds anything, the summary
 * falls back to the device-level delta against the baseline taken before the start, valid
 * only when nothing else uses the GPU.  The method is always reported. */
#ifndef GPUMEM_WATCH_H
#define GPUMEM_WATCH_H

#include "gpumem/device.h"
#include "gpumem/error.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

enum gm_watch_attr {
    GM_WATCH_ATTR_NONE = 0,     /* a device row */
    GM_WATCH_ATTR_PID_TREE = 1, /* the PID is the command or one of its descendants */
    GM_WATCH_ATTR_NEW_PID = 2   /* a PID not visible here that appeared after the start */
};

struct gm_watch_sample {
    uint64_t t_ms;          /* milliseconds since the start */
    uint32_t device;        /* index into the watch's devices */
    uint32_t pid;           /* 0 for a device row */
    struct gm_reading used; /* bytes: device used (NVML sense) or usedGpuMemory */
    struct gm_reading free; /* bytes, device rows only */
    enum gm_watch_attr attr;
};

#define GM_WATCH_MAX_DEVICES 16
#define GM_WATCH_MAX_PROCS   256

#define GM_WATCH_BASELINE_PIDS 64

struct gm_watch_device {
    char label[16]; /* "cuda:0" or "nvml:3" */
    size_t pos;     /* position in the gm_devices list (gm_watch_setup()) */
    uint32_t baseline_pids[GM_WATCH_BASELINE_PIDS]; /* NVML PIDs present before the start */
    size_t n_baseline_pids;
    char name[96];
    struct gm_reading total;    /* bytes */
    struct gm_reading baseline; /* used before the start */
    struct gm_reading peak;     /* highest used seen */
    uint64_t peak_t_ms;
    struct gm_reading cmd_peak; /* highest sum of the command's processes on this device */
    uint64_t cmd_peak_t_ms;
    enum gm_memory_source source;
};

struct gm_watch_proc {
    uint32_t pid;
    uint32_t device;
    char name[32]; /* from /proc/<pid>/comm when visible, else "" */
    uint64_t peak; /* bytes */
    uint64_t peak_t_ms;
    uint64_t first_t_ms;
    uint64_t last_t_ms;
    enum gm_watch_attr attr;
};

struct gm_watch {
    struct gm_watch_device dev[GM_WATCH_MAX_DEVICES];
    uint32_t n_dev;
    struct gm_watch_proc proc[GM_WATCH_MAX_PROCS];
    uint32_t n_proc;
    struct gm_watch_sample *samples; /* owned */
    size_t n_samples;
    size_t cap_samples;
    size_t max_samples; /* past this, samples are dropped (peaks still update) */
    bool samples_dropped;
    uint64_t cmd_peak; /* highest sum of the command's processes, all devices */
    uint64_t cmd_peak_t_ms;
    bool cmd_seen;      /* at least one process row was attributed */
    unsigned attr_seen; /* 1 << enum gm_watch_attr of every attribution used */
    uint64_t n_device_reads;
    uint64_t n_process_reads;
    uint64_t end_t_ms;
    uint64_t round_t_ms; /* the process reading in progress (sums across devices) */
    uint64_t round_total;
    /* Optional: called with every sample as it is recorded (streaming output), even when
     * the store is full. */
    void (*on_sample)(const struct gm_watch *w, const struct gm_watch_sample *s, void *arg);
    void *on_sample_arg;
};

/* Prepare 'w' with room for at most 'max_samples' stored samples (0: a default of 4M).
 * Allocates nothing yet; release with gm_watch_release(). */
void gm_watch_init(struct gm_watch *w, size_t max_samples);
void gm_watch_release(struct gm_watch *w);

/* Register a device; returns its index, or -1 when GM_WATCH_MAX_DEVICES are taken. */
int gm_watch_add_device(struct gm_watch *w, const char *label, const char *name,
                        struct gm_reading total, struct gm_reading baseline);

/* Record a device reading. */
enum gm_status gm_watch_device_sample(struct gm_watch *w, uint64_t t_ms, uint32_t device,
                                      const struct gm_device_memory *m, struct gm_error *err);

/* Record one process-list reading of 'device' at 't_ms': only the rows attributed to the
 * command (attr != NONE) are passed; 'names' may be NULL or hold each process's name. */
enum gm_status gm_watch_process_sample(struct gm_watch *w, uint64_t t_ms, uint32_t device,
                                       const struct gm_process_memory *procs,
                                       const enum gm_watch_attr *attr, const char *const *names,
                                       size_t n, struct gm_error *err);

/* Register the devices of 'd' to watch (every one, or only CUDA device 'only_cuda' when
 * >= 0) and take the baseline: used memory and the NVML PIDs already there.  A device whose
 * memory cannot be read fails the setup (GM_ERR_UNSUPPORTED / GM_ERR_DRIVER, naming it). */
enum gm_status gm_watch_setup(struct gm_watch *w, struct gm_devices *d, int only_cuda,
                              struct gm_error *err);

/* One reading of every watched device's memory at 't_ms'. */
void gm_watch_poll_devices(struct gm_watch *w, struct gm_devices *d, uint64_t t_ms);

/* One reading of every watched device's process list at 't_ms', attributing to the command
 * the processes in the tree of 'root' (GM_WATCH_ATTR_PID_TREE) and, unless 'attached',
 * PIDs that this PID namespace cannot see and that were not there at the baseline
 * (GM_WATCH_ATTR_NEW_PID). */
void gm_watch_poll_processes(struct gm_watch *w, struct gm_devices *d, uint64_t t_ms, uint32_t root,
                             bool attached);

/* Human words for an attribution ("process tree", ...); static. */
const char *gm_watch_attr_name(enum gm_watch_attr a);

/* The outcome of a run, for the files written at the end. */
struct gm_watch_run {
    char *const *command; /* the watched argv (NULL-terminated), NULL when attached */
    uint32_t pid;         /* the child or the attached process */
    uint64_t interval_ms;
    uint64_t process_interval_ms;
    int exit_status;  /* the command's status as a shell shows it, -1 unknown */
    bool interrupted; /* stopped by SIGINT/SIGTERM */
};

/* Samples as CSV: header time_ms,device,pid,used_bytes,free_bytes,attribution; device rows
 * have an empty pid, process rows an empty free_bytes, unknown values are empty.  Rows in
 * time order.  false on a write error. */
bool gm_watch_write_csv(const struct gm_watch *w, FILE *f);

/* The whole run as one JSON document, schema gpumem.watch/1: command, intervals, outcome,
 * the command's peak, devices (watch order), processes (first-seen order), samples (time
 * order).  Times are integer milliseconds since the start (*_ms). */
bool gm_watch_write_json(const struct gm_watch *w, const struct gm_watch_run *run, FILE *f);

/* JSON Lines, one object per line, flushed (schema gpumem.watch.stream/1): a "start" line
 * (command, devices, baselines), a "device" or "process" line per sample, an "end" line
 * with the summary members of gm_watch_write_json(). */
bool gm_watch_jsonl_start(const struct gm_watch *w, const struct gm_watch_run *run, FILE *f);
bool gm_watch_jsonl_sample(const struct gm_watch *w, const struct gm_watch_sample *s, FILE *f);
bool gm_watch_jsonl_end(const struct gm_watch *w, const struct gm_watch_run *run, FILE *f);

#ifdef __cplusplus
}
#endif
#endif
