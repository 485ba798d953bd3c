/* SPDX-License-Identifier: MIT */
/* sweep.h - find where a job stops fitting: run a command once per value of one integer
 * parameter, each run a fresh process, and follow the device memory of each run as
 * `gpumem watch` does (watch.h), until the first failure; then bisect between the last value
 * that ran and the first that failed until the two are adjacent.
 *
 *   gpumem sweep --param batch=1,2,4,8 -- python train.py --batch {batch}
 *
 * "{batch}" in any argument is replaced by the value.  A run that exits with status 0 fits;
 * any other end (a status, a signal, the timeout) is a failure, kept as an observation.
 * Each run is told the file GPUMEM_TORCH_OUTPUT: a script that uses gpumem.torch writes its
 * phase series there (schema gpumem.measure/1), and the sweep reads from it the phase that
 * failed, its error, whether it was an out-of-memory error, the bytes asked for and the
 * allocator's peaks.  When that series says the first failure was not an out-of-memory error,
 * no bisection is made: the boundary found would not be a memory boundary.
 *
 * The planning (gm_sweep_next, gm_sweep_record, gm_sweep_end) is pure and separate from
 * running (gm_sweep_run), which forks, execs and samples; signals stay the caller's business
 * (it passes a flag its handler sets). */
#ifndef GPUMEM_SWEEP_H
#define GPUMEM_SWEEP_H

#include "gpumem/device.h"
#include "gpumem/error.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GM_SWEEP_MAX_VALUES 64
#define GM_SWEEP_MAX_RUNS   128

/* The environment variable naming the file a run's gpumem.torch series goes to. */
#define GM_SWEEP_SERIES_ENV "GPUMEM_TORCH_OUTPUT"

enum gm_sweep_outcome {
    GM_SWEEP_RUN_OK = 0,      /* exit status 0: it fits */
    GM_SWEEP_RUN_FAILED,      /* a non-zero exit status */
    GM_SWEEP_RUN_SIGNALED,    /* killed by a signal it did not get from us */
    GM_SWEEP_RUN_TIMEOUT,     /* killed after the timeout */
    GM_SWEEP_RUN_NOT_STARTED, /* the command could not be run (exec failed) */
    GM_SWEEP_RUN_INTERRUPTED  /* stopped because the sweep was interrupted */
};

/* "ok", "failed", "signaled", "timeout", "not_started", "interrupted"; static storage. */
const char *gm_sweep_outcome_name(enum gm_sweep_outcome o);

struct gm_sweep_run {
    uint64_t value;
    bool bisection; /* chosen by the bisection, not from the given list */
    enum gm_sweep_outcome outcome;
    int exit_status;  /* as a shell shows it (128 + signal); -1 unknown */
    uint64_t wall_ms; /* from the start to the end of the process */
    /* The watched device whose used memory rose the most (watch's device rows). */
    char device[16];                /* "cuda:0"; "" when no device was watched */
    struct gm_reading baseline;     /* used before the start, bytes */
    struct gm_reading device_peak;  /* highest used during the run, bytes */
    struct gm_reading rise;         /* device_peak - baseline, bytes (0 when it fell) */
    struct gm_reading total;        /* bytes */
    struct gm_reading command_peak; /* highest sum of the command's own processes, bytes */
    /* From the run's gpumem.torch series, when it wrote one. */
    bool has_series;
    uint32_t n_phases;
    uint32_t n_phases_failed;
    char phase[64];                   /* the failed phase, else the last one */
    bool oom;                         /* the failed phase ran out of memory */
    struct gm_reading requested;      /* its allocation tried, bytes */
    struct gm_reading peak_allocated; /* over the phases, bytes */
    struct gm_reading peak_reserved;
    /* A failure: the failed phase's error, else the last line the command wrote. */
    char error[256];
    /* Processes of the run's process group still running when its command exited (a
     * server started in the background, a data loader): gpumem ended them before the next
     * run.  Their names and PIDs, "name (pid N), ..." (the first few), and how many. */
    uint32_t n_left;
    char left[256];
};

/* One line on a run into out[n]: "fits", "out of memory in phase 'backward' (tried 2.00
 * GiB)", "phase 'x' failed: ...", "exit 1: <its last line>", "timeout: ...". */
void gm_sweep_describe_run(const struct gm_sweep_run *r, char *out, size_t n);

/* Why the sweep ended where it did. */
enum gm_sweep_end {
    GM_SWEEP_END_ALL_FIT = 0,  /* every given value fits: the boundary is above them */
    GM_SWEEP_END_BOUNDARY,     /* adjacent values: 'fit' fits, 'fail' does not */
    GM_SWEEP_END_FIRST_FAILS,  /* the smallest value already fails */
    GM_SWEEP_END_NOT_OOM,      /* the first failure is not an out-of-memory error */
    GM_SWEEP_END_NO_BISECTION, /* bisection was turned off */
    GM_SWEEP_END_MAX_RUNS,     /* the run budget ended before the values were adjacent */
    GM_SWEEP_END_INTERRUPTED   /* stopped by the caller */
};

/* "all_fit", "boundary", "first_fails", "not_oom", "no_bisection", "max_runs",
 * "interrupted"; static storage. */
const char *gm_sweep_end_name(enum gm_sweep_end e);

struct gm_sweep {
    char param[64];                       /* the parameter's name */
    uint64_t values[GM_SWEEP_MAX_VALUES]; /* given, strictly increasing */
    size_t n_values;
    bool bisect;                                 /* bisect after the first failure (default) */
    uint32_t max_runs;                           /* 0: GM_SWEEP_MAX_RUNS */
    char command[1024];                          /* the command as given, for the record */
    struct gm_sweep_run runs[GM_SWEEP_MAX_RUNS]; /* in the order they ran */
    size_t n_runs;
    size_t n_listed_run; /* given values run so far */
    bool has_fit;
    uint64_t fit; /* the largest value that fits below 'fail' */
    bool has_fail;
    uint64_t fail; /* the smallest value that failed */
    bool first_failure_not_oom;
    bool interrupted;
};

/* Parse "NAME=V1,V2,..." (whole numbers below 2^63, strictly increasing, at most
 * GM_SWEEP_MAX_VALUES) into a zeroed 's' (bisect on).  GM_ERR_INVALID with a message naming
 * the problem. */
enum gm_status gm_sweep_parse_param(struct gm_sweep *s, const char *spec, struct gm_error *err);

/* The next value to run, and whether the bisection chose it; false when the sweep is over. */
bool gm_sweep_next(const struct gm_sweep *s, uint64_t *value, bool *bisection);

/* Record a finished run (copied) and update the boundary. */
void gm_sweep_record(struct gm_sweep *s, const struct gm_sweep_run *r);

/* Why a finished sweep ended. */
enum gm_sweep_end gm_sweep_end(const struct gm_sweep *s);

/* The run of the smallest value that failed (the boundary's 'fail'), or NULL. Borrowed. */
const struct gm_sweep_run *gm_sweep_failed_run(const struct gm_sweep *s);

struct gm_sweep_opts {
    char *const *argv;            /* the command, NULL-terminated; "{param}" is replaced */
    char *const *envp;            /* the runs' environment (the caller's own, usually) */
    uint64_t interval_ms;         /* device memory every ... (watch's --interval) */
    uint64_t process_interval_ms; /* process list every ... */
    uint64_t timeout_ms;          /* per run, 0: none */
    int only_cuda;                /* watch only this CUDA device, -1: every device */
    const char *work_dir;         /* an existing folder for each run's log and series */
    bool keep_files;              /* leave run-N.log and run-N.json there */
    volatile sig_atomic_t *stop;  /* non-zero: stop at once (the caller's signal flag) */
    /* Called after each run (progress); may be NULL. */
    void (*on_run)(const struct gm_sweep *s, const struct gm_sweep_run *r, void *ctx);
    void *ctx;
};

/* Whether some argument of 'argv' holds "{param}". */
bool gm_sweep_command_uses(const struct gm_sweep *s, char *const *argv);

/* Whether folder 'dir' holds a run's log or series (run-N.log, run-N.json: a file, a
 * symbolic link or anything else of such a name); its name into found[n] when it does. */
bool gm_sweep_dir_has_runs(const char *dir, char *found, size_t n);

/* Run the sweep planned by 's' (gm_sweep_parse_param) with the devices of 'd' watched.
 * Returns GM_OK when it ran to its end (see gm_sweep_end()), also when runs failed;
 * GM_ERR_INVALID for bad options, GM_ERR_UNSUPPORTED / GM_ERR_DRIVER when the devices cannot
 * be watched, GM_ERR_EXISTS when a run's log appeared in work_dir (never written over, nor
 * through a symbolic link), GM_ERR_IO / GM_ERR_NOMEM for the host.  After each run, what
 * its command left running in its process group is ended (SIGTERM, then SIGKILL) and named
 * in the run; a caller that made itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER,
 * as gpumem sweep does) has those processes reaped too. */
enum gm_status gm_sweep_run(struct gm_sweep *s, struct gm_devices *d, const struct gm_sweep_opts *o,
                            struct gm_error *err);

/* The sweep as one JSON document, schema gpumem.sweep/1.  false on a write error. */
bool gm_sweep_write_json(const struct gm_sweep *s, const struct gm_sweep_opts *o, FILE *f);

/* Read a gpumem.sweep/1 document back into 's' (for gpumem sheet), parsing it within
 * 'memory_limit' bytes (0: a budget relative to its size).  GM_ERR_FORMAT when it is not
 * one, GM_ERR_LIMIT for more values or runs than a sweep holds or over the memory limit. */
enum gm_status gm_sweep_load_mem(struct gm_sweep *s, const void *data, size_t len,
                                 uint64_t memory_limit, struct gm_error *err);

#ifdef __cplusplus
}
#endif
#endif
