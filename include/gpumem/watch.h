/* SPDX-License-Identifier: MIT */
/* watch.h - the record of a `gpumem watch` run: timed samples of device memory and of the
 * GPU memory of the watched processes, their peaks, and the CSV / JSON files written from
 * them.  Sampling itself (timers, child processes, signals) is the caller's business.
 *
 * Attribution: NVML reports host PIDs.  A process row is attributed to the watched command
 * either because its PID is in the command's process tree (GM_WATCH_ATTR_PID_TREE), or,
 * when NVML PIDs are not visible from here (a PID namespace), because it appeared after
 * the command started (GM_WATCH_ATTR_NEW_PID).  A process of the command's tree that still
 * holds GPU memory after the command itself exited is GM_WATCH_ATTR_AFTER_EXIT.
 *
 * The command's peak comes from two kinds of readings.  Process readings (NVML
 * usedGpuMemory, slow to query) give the command's own memory wherever other processes
 * run.  Device readings (NVML used, cheap, taken more often) are credited to the command
 * as "used minus what others held at the start" while no other process uses the device:
 * those credits are held back until the next process reading of the device shows no
 * other process, and dropped for good once one is seen.  A device reading that moves by
 * GM_WATCH_CHANGE_BYTES or more asks for a process reading at once (process_due), so that
 * a short plateau between two scheduled process readings is still seen.  When nothing of
 * the command appears in any process list, the summary falls back to the device-level
 * delta against the baseline, valid only when nothing else uses the GPU.  The source of
 * every peak is reported.
 *
 * Running (gm_watch_spawn, the clock and gm_watch_tick at the end): what `gpumem watch` and
 * `gpumem sweep` both do with a command, written once: start it, then sample on a fixed
 * cadence until the caller sees it end.  Signals, waiting and killing stay the caller's. */
#ifndef GPUMEM_WATCH_H
#define GPUMEM_WATCH_H

#include "gpumem/device.h"
#include "gpumem/error.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

enum gm_watch_attr {
    GM_WATCH_ATTR_NONE = 0,      /* a device row */
    GM_WATCH_ATTR_PID_TREE = 1,  /* the PID is the command or one of its descendants */
    GM_WATCH_ATTR_NEW_PID = 2,   /* a PID not visible here that appeared after the start */
    GM_WATCH_ATTR_AFTER_EXIT = 3 /* of the command's tree, still running after it exited */
};

/* Where a command peak comes from. */
enum gm_watch_source {
    GM_WATCH_SOURCE_NONE = 0,
    GM_WATCH_SOURCE_PROCESSES, /* a process reading: the sum of the command's usedGpuMemory */
    GM_WATCH_SOURCE_DEVICE     /* a device reading while only the command used the device */
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

/* A device reading that moves at least this far from the one before asks for a process
 * reading (gm_watch.process_due). */
#define GM_WATCH_CHANGE_BYTES ((uint64_t)64 << 20)

struct gm_watch_device {
    char label[16];          /* "cuda:0" or "nvml:3" */
    size_t pos;              /* position in the gm_devices list (gm_watch_setup()) */
    uint32_t *baseline_pids; /* NVML PIDs present before the start (owned) */
    size_t n_baseline_pids;
    char name[96];
    struct gm_reading total;    /* bytes */
    struct gm_reading baseline; /* used before the start */
    struct gm_reading peak;     /* highest used seen */
    uint64_t peak_t_ms;
    struct gm_reading cmd_peak; /* highest memory of the command on this device */
    uint64_t cmd_peak_t_ms;
    enum gm_watch_source cmd_peak_source;
    struct gm_reading proc_peak; /* highest sum of the command's processes (process readings) */
    uint64_t proc_peak_t_ms;
    enum gm_memory_source source;
    /* Device credits (see the top): private to watch.c. */
    bool others_seen;          /* a process not of the command was listed on this device */
    bool listed;               /* at least one process reading of this device */
    uint64_t others_base;      /* bytes of 'baseline' that are not the command's */
    struct gm_reading pending; /* highest credit since the last process reading */
    uint64_t pending_t_ms;
    struct gm_reading last_used; /* the latest device reading */
    uint64_t last_proc_sum;      /* the command's bytes at the latest process reading */
};

struct gm_watch_proc {
    uint32_t pid;
    uint32_t device;
    char name[32]; /* from /proc/<pid>/comm when visible, else "" */
    uint64_t peak; /* bytes */
    uint64_t peak_t_ms;
    uint64_t first_t_ms;
    uint64_t last_t_ms;
    uint64_t last_used;      /* bytes at the latest reading */
    enum gm_watch_attr attr; /* of the latest reading */
};

struct gm_watch {
    struct gm_watch_device dev[GM_WATCH_MAX_DEVICES];
    uint32_t n_dev;
    struct gm_watch_proc *proc; /* n_proc entries, first-seen order (owned) */
    uint32_t n_proc;
    uint32_t cap_proc;
    struct gm_watch_sample *samples; /* owned */
    size_t n_samples;
    size_t cap_samples;
    size_t max_samples; /* past this, samples are not stored (peaks still update) */
    bool samples_dropped;
    uint64_t n_samples_dropped;
    uint64_t first_dropped_t_ms;
    uint64_t cmd_peak; /* highest memory of the command, all devices at one moment */
    uint64_t cmd_peak_t_ms;
    enum gm_watch_source cmd_peak_source;
    bool cmd_seen;      /* at least one process row was attributed */
    unsigned attr_seen; /* 1 << enum gm_watch_attr of every attribution used */
    uint64_t n_device_reads;
    uint64_t n_process_reads;
    uint64_t n_triggered_reads; /* process readings asked for by a device-level change */
    uint32_t n_after_exit;      /* processes still holding memory after the command exited */
    uint64_t end_t_ms;
    bool process_due; /* a device reading moved by GM_WATCH_CHANGE_BYTES: read processes now */
    bool attached;    /* the command was running before the start (its memory is in the
                         baseline); set by the caller or gm_watch_poll_processes() */
    /* private: the process reading in progress (sums across devices), the device-credit
     * total of the current window, the command's last known process tree */
    uint64_t round_t_ms;
    uint64_t round_total;
    uint32_t round_mask;
    bool round_others;
    uint64_t dev_round_t_ms;
    uint64_t dev_round_total;
    uint32_t dev_round_mask;
    bool dev_round_open;
    uint64_t pending_total;
    uint64_t pending_total_t_ms;
    uint32_t *tree;
    size_t n_tree;
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

/* Record one process-list reading of 'device' at 't_ms': every row NVML listed, with its
 * attribution (GM_WATCH_ATTR_NONE: another process, which is not stored but ends the
 * device credits of this device); 'names' may be NULL or hold each process's name. */
enum gm_status gm_watch_process_sample(struct gm_watch *w, uint64_t t_ms, uint32_t device,
                                       const struct gm_process_memory *procs,
                                       const enum gm_watch_attr *attr, const char *const *names,
                                       size_t n, struct gm_error *err);

/* Register the devices of 'd' to watch (every one, or only CUDA device 'only_cuda' when
 * >= 0) and take the baseline: used memory and the NVML PIDs already there.  A device whose
 * memory cannot be read fails the setup (GM_ERR_UNSUPPORTED / GM_ERR_DRIVER, naming it). */
enum gm_status gm_watch_setup(struct gm_watch *w, struct gm_devices *d, int only_cuda,
                              struct gm_error *err);

/* One reading of every watched device's memory at 't_ms'; sets w->process_due when one
 * moved by GM_WATCH_CHANGE_BYTES or more. */
void gm_watch_poll_devices(struct gm_watch *w, struct gm_devices *d, uint64_t t_ms);

/* One reading of every watched device's process list at 't_ms' (however many processes
 * NVML lists), attributing to the command the processes in the tree of 'root'
 * (GM_WATCH_ATTR_PID_TREE) and, unless 'attached', PIDs that this PID namespace cannot see
 * and that were not there at the baseline (GM_WATCH_ATTR_NEW_PID).  When 'root' has ended
 * (or is 0), the processes of its last known tree that still run are the ones attributed,
 * as GM_WATCH_ATTR_AFTER_EXIT: call it once after the command exits to find them.  Clears
 * w->process_due. */
void gm_watch_poll_processes(struct gm_watch *w, struct gm_devices *d, uint64_t t_ms, uint32_t root,
                             bool attached);

/* After the last reading: the device delta of each device against what others held at the
 * start, when it exceeds the command's peak there by more than 1% and 16 MiB (a peak the
 * process readings missed, or memory of other processes).  0 when it does not. */
uint64_t gm_watch_unexplained_bytes(const struct gm_watch *w, uint32_t device);

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
    int term_signal;  /* the signal that killed the command (exit_status 128 + it), 0 none */
};

/* Samples as CSV: header time_ms,device,pid,used_bytes,free_bytes,attribution; device rows
 * have an empty pid, process rows an empty free_bytes, unknown values are empty.  Rows in
 * time order.  When samples were not stored (the store was full), a last row
 * "T,,,,,samples_dropped" gives the time of the first one left out.  false on a write
 * error. */
bool gm_watch_write_csv(const struct gm_watch *w, FILE *f);

/* The whole run as one JSON document, schema gpumem.watch/1: command, intervals, outcome,
 * the command's peak, devices (watch order), processes (first-seen order), samples (time
 * order).  Times are integer milliseconds since the start (*_ms). */
enum gm_status gm_watch_json(FILE *f, const struct gm_watch *w, const struct gm_watch_run *run,
                             struct gm_error *err);

/* JSON Lines, one object per line, flushed (schema gpumem.watch.stream/1): a "start" line
 * (command, devices, baselines), a "device" or "process" line per sample, an "end" line
 * with the summary members of gm_watch_json().  Errors: GM_ERR_IO. */
enum gm_status gm_watch_jsonl_start(FILE *f, const struct gm_watch *w,
                                    const struct gm_watch_run *run, struct gm_error *err);
enum gm_status gm_watch_jsonl_sample(FILE *f, const struct gm_watch *w,
                                     const struct gm_watch_sample *s, struct gm_error *err);
enum gm_status gm_watch_jsonl_end(FILE *f, const struct gm_watch *w, const struct gm_watch_run *run,
                                  struct gm_error *err);

/* The labels gm_watch_prometheus() adds to every series (NULL: left out): the caller reads
 * them (the launcher's environment, the host name); the library never does. */
struct gm_watch_prom_labels {
    const char *hostname; /* "Hostname", as DCGM exporter names it */
    const char *job;      /* "job_id": the batch system's job (SLURM_JOB_ID) */
    const char *rank;     /* "rank": the process's rank in the job (SLURM_PROCID, RANK) */
};

/* The latest state of the run in the Prometheus text exposition format: DCGM exporter's
 * DCGM_FI_DEV_FB_USED / DCGM_FI_DEV_FB_FREE (MiB; labels gpu, UUID, device, modelName,
 * Hostname) for each watched device, then gpumem_device_memory_used_peak_bytes,
 * gpumem_process_memory_bytes (pid, process), gpumem_command_memory_peak_bytes and
 * gpumem_watch_device_reads_total; every series with the labels 'l' (may be NULL).  'd' (may
 * be NULL) gives the devices' NVML indexes and UUIDs.  Errors: GM_ERR_IO. */
enum gm_status gm_watch_prometheus(FILE *f, const struct gm_watch *w, const struct gm_devices *d,
                                   const struct gm_watch_prom_labels *l, struct gm_error *err);

/* ---- running a command and sampling it ---- */

/* How to start a watched command. */
struct gm_watch_command {
    char *const *argv;     /* NULL-terminated; argv[0] is searched on PATH */
    char *const *envp;     /* its environment (the caller's own, usually) */
    const char *output;    /* NULL: stdout and stderr as the caller's; else both to this
                              file, which must not exist (never a symbolic link followed) */
    bool stdout_to_stderr; /* stdout goes where stderr goes (output NULL) */
    bool own_group;        /* its own process group, so that kill(-pid) ends its tree */
};

/* Start 'c' with every signal that gpumem handles or ignores (SIGINT, SIGTERM, SIGHUP,
 * SIGQUIT, SIGPIPE, SIGXFSZ, SIGALRM, SIGUSR1, SIGUSR2) at its default and no signal
 * blocked; stdio is flushed first.  *pid gets the process.  A command that cannot be run
 * (not found, not executable) is *exec_errno (ENOENT: a shell's 127, else 126) with no
 * process left, not an error.  GM_ERR_EXISTS when c->output exists (a file, a symbolic link
 * or anything else), GM_ERR_IO when it cannot be created; GM_ERR_NOMEM or GM_ERR_INTERNAL
 * when the start cannot be set up. */
enum gm_status gm_watch_spawn(const struct gm_watch_command *c, pid_t *pid, int *exec_errno,
                              struct gm_error *err);

/* 'envp' with NAME=value in place of any NAME it has: *out is one allocation (gm_free()),
 * its strings borrowed from 'envp' but for the new one.  GM_ERR_NOMEM. */
enum gm_status gm_watch_env_with(char *const *envp, const char *name, const char *value,
                                 char ***out, struct gm_error *err);

/* The cadence of a watched run: device readings every interval, process readings every
 * process interval and, in between, whenever a device reading asks for one. */
struct gm_watch_clock {
    uint64_t start_ms;            /* gm_watch_now_ms() at the start */
    uint64_t interval_ms;         /* device readings */
    uint64_t process_interval_ms; /* scheduled process readings */
    uint64_t next_process_ms;     /* since the start */
};

/* Milliseconds of the monotonic clock. */
uint64_t gm_watch_now_ms(void);
/* Sleep 'ms' milliseconds; a signal cuts it short. */
void gm_watch_sleep_ms(uint64_t ms);
/* Start 'c' now. */
void gm_watch_clock_start(struct gm_watch_clock *c, uint64_t interval_ms,
                          uint64_t process_interval_ms);
/* Milliseconds since the start of 'c'. */
uint64_t gm_watch_clock_ms(const struct gm_watch_clock *c);
/* One sample at this moment: every device, and the process lists when they are due or a
 * device reading asked for them (counted in w->n_triggered_reads), attributing the tree of
 * 'root' as gm_watch_poll_processes() does.  Returns its time, ms since the start. */
uint64_t gm_watch_tick(struct gm_watch *w, struct gm_devices *d, struct gm_watch_clock *c,
                       uint32_t root, bool attached);
/* Sleep until the next multiple of the interval after the sample taken at 't'; a signal
 * cuts it short (the caller checks its flags next). */
void gm_watch_wait(const struct gm_watch_clock *c, uint64_t t);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
