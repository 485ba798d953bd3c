/* SPDX-License-Identifier: MIT */
/* account.h - where every byte of device memory went: the driver-level account of a running
 * job, written by the interposer libgpumem-account.so (LD_PRELOAD, `gpumem account -- CMD`)
 * and read back here.
 *
 * The interposer sees the CUDA driver API's memory operations (allocations, releases, VMM,
 * pools, pinned host memory), brackets context creation, module loading and graph
 * instantiation with readings of the device's used memory, and credits every allocation to
 * the library that asked for it: the caller's return address, resolved with dladdr() to a
 * loaded object, classified by the object's file name (gm_account_classify()).  Each process
 * writes one file of JSON lines (schema gpumem.account/1, layout in src/account/load.c);
 * this module reads such files (one per process, or several merged) and turns them into one
 * equation per process and device, at the peak and at the end:
 *
 *   device used (NVML) = context + modules + graphs + PyTorch reserved + NCCL + cuBLAS + ...
 *                        + rounding to the driver's pages + not seen by the driver API
 *
 * where every term says where its figure comes from (enum gm_account_reading for the
 * measured ones, the entry points and objects for the counted ones) and the last term is
 * what no hook saw: the reading minus every other term, never hidden, never clamped.
 *
 * Classification: what a loaded object is (PyTorch, NCCL, cuBLAS, ...) is an enum; the file
 * names that mean each one are data in one table (src/account/classify.c), shared with the
 * interposer, so the rule is written once.  A second vendor (HIP: libamdhip64, rccl,
 * hipBLAS) adds rows to that table and a table of entry points to the interposer. */
#ifndef GPUMEM_ACCOUNT_H
#define GPUMEM_ACCOUNT_H

#include "gpumem/error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

/* ------------------------------------------------------------------------------------ */
/* Who asked: the classes of loaded objects */

enum gm_account_lib {
    GM_ACCOUNT_LIB_UNKNOWN = 0, /* no loaded object holds the caller's address (JIT code) */
    GM_ACCOUNT_LIB_TORCH,       /* PyTorch's caching allocator: libc10_cuda, libtorch_cuda */
    GM_ACCOUNT_LIB_NCCL,        /* libnccl */
    GM_ACCOUNT_LIB_CUBLAS,      /* libcublas */
    GM_ACCOUNT_LIB_CUBLASLT,    /* libcublasLt */
    GM_ACCOUNT_LIB_CUDNN,       /* libcudnn and its sub-libraries */
    GM_ACCOUNT_LIB_TRITON,      /* Triton: libtriton and the launchers it compiles */
    GM_ACCOUNT_LIB_OTHER,       /* any other named object (the program, cuFFT, ...) */
    /* Objects an allocation passes through on its way from the one that asked: attribution
     * looks past them to the first frame outside (gm_account_lib_passes_through()). */
    GM_ACCOUNT_LIB_RUNTIME, /* the CUDA runtime, libcudart */
    GM_ACCOUNT_LIB_DRIVER,  /* the driver, libcuda */
    GM_ACCOUNT_LIB_SELF,    /* the interposer, libgpumem-account */
    GM_ACCOUNT_LIB__COUNT
};

/* The class of the loaded object at 'path' (a file name or a full path; only the last
 * component counts, except for Triton's cache folder).  Never fails: an object no row of
 * the table names is GM_ACCOUNT_LIB_OTHER, a NULL or empty path GM_ACCOUNT_LIB_UNKNOWN. */
enum gm_account_lib gm_account_classify(const char *path);

/* Whether attribution looks past objects of class 'lib' to their caller. */
bool gm_account_lib_passes_through(enum gm_account_lib lib);

/* The stable key of 'lib' in account files ("torch", "nccl", ...; static). */
const char *gm_account_lib_key(enum gm_account_lib lib);
/* The class whose key is 'key' (n bytes); false when there is none. */
bool gm_account_lib_from_key(const char *key, size_t n, enum gm_account_lib *out);
/* Its name in the equation ("PyTorch reserved", "NCCL", "cuBLAS", ...; static). */
const char *gm_account_lib_title(enum gm_account_lib lib);

/* ------------------------------------------------------------------------------------ */
/* What kind of memory */

enum gm_account_kind {
    GM_ACCOUNT_KIND_DEVICE = 0,      /* cuMemAlloc_v2 */
    GM_ACCOUNT_KIND_PITCH,           /* cuMemAllocPitch_v2: pitch x height */
    GM_ACCOUNT_KIND_ASYNC,           /* stream-ordered, cuMemAllocAsync/FromPoolAsync: live bytes */
    GM_ACCOUNT_KIND_VMM,             /* cuMemCreate: physical memory until released and unmapped */
    GM_ACCOUNT_KIND_MANAGED,         /* cuMemAllocManaged: resident where used (reported apart) */
    GM_ACCOUNT_KIND_HOST,            /* pinned host memory: cuMemHostAlloc, cuMemAllocHost_v2 */
    GM_ACCOUNT_KIND_HOST_REGISTERED, /* host memory pinned by cuMemHostRegister_v2 */
    GM_ACCOUNT_KIND__COUNT
};

/* The key in account files ("device", "pitch", ...; static), and back. */
const char *gm_account_kind_key(enum gm_account_kind k);
bool gm_account_kind_from_key(const char *key, size_t n, enum gm_account_kind *out);
/* Whether memory of kind 'k' is device memory counted in the equation (device, pitch,
 * async, VMM); managed and host memory are reported beside it. */
bool gm_account_kind_in_equation(enum gm_account_kind k);
/* Whether the driver rounds allocations of kind 'k' up to its page granularity (device,
 * pitch: the equation's rounding term). */
bool gm_account_kind_rounded(enum gm_account_kind k);

/* How a figure was read. */
enum gm_account_reading {
    GM_ACCOUNT_READING_NONE = 0,     /* not measured */
    GM_ACCOUNT_READING_NVML_PROCESS, /* NVML usedGpuMemory of the process */
    GM_ACCOUNT_READING_NVML_DEVICE,  /* NVML device used, less what was used before the process
                                        (a PID namespace hides the process from NVML) */
    GM_ACCOUNT_READING_MEM_GET_INFO, /* cuMemGetInfo_v2: total - free of the device */
    GM_ACCOUNT_READING_MIXED         /* several of the above, for a sum */
};

const char *gm_account_reading_key(enum gm_account_reading r);
bool gm_account_reading_from_key(const char *key, size_t n, enum gm_account_reading *out);

/* ------------------------------------------------------------------------------------ */
/* The equation */

enum gm_account_term_kind {
    GM_ACCOUNT_TERM_CONTEXT = 0, /* contexts: measured around their creation */
    GM_ACCOUNT_TERM_MODULES,     /* modules and libraries: measured around their loading */
    GM_ACCOUNT_TERM_GRAPHS,      /* graph instantiation: measured around it */
    GM_ACCOUNT_TERM_LIBRARY,     /* device memory one class of objects (or one other object)
                                    asked for: counted from the calls */
    GM_ACCOUNT_TERM_OTHERS,      /* the other objects beyond GM_ACCOUNT_MAX_NAMED, together */
    GM_ACCOUNT_TERM_ROUNDING,    /* allocations rounded up to the driver's page granularity */
    GM_ACCOUNT_TERM_NOT_SEEN     /* the reading less every other term */
};

/* The key of a term kind in JSON ("context", "library", "not_seen", ...; static). */
const char *gm_account_term_key(enum gm_account_term_kind k);

#define GM_ACCOUNT_MAX_NAMED 6 /* other objects named one by one in an equation */
#define GM_ACCOUNT_MAX_TERMS 24

struct gm_account_term {
    enum gm_account_term_kind kind;
    enum gm_account_lib lib;                /* GM_ACCOUNT_TERM_LIBRARY */
    char object[64];                        /* the object's file name ("libnccl.so.2"; several: the
                                               first, for LIBRARY of a class), "" none */
    int64_t bytes;                          /* NOT_SEEN may be negative: terms above the reading */
    uint64_t count;                         /* live contexts, modules, graphs or allocations */
    uint64_t calls[GM_ACCOUNT_KIND__COUNT]; /* LIBRARY: live allocations by kind */
    enum gm_account_reading source;         /* CONTEXT, MODULES, GRAPHS: how each was measured */
};

/* When an equation was taken. */
enum gm_account_moment {
    GM_ACCOUNT_AT_PEAK = 0, /* the sample with the highest device used */
    GM_ACCOUNT_AT_EXIT,     /* at exit (before the driver tore the contexts down) */
    GM_ACCOUNT_AT_SIGNAL,   /* a signal ended the process: the counters then, the last reading */
    GM_ACCOUNT_AT_LAST      /* the process left no end (killed: SIGKILL, the OOM killer,
                               _exit): its last sample */
};

const char *gm_account_moment_name(enum gm_account_moment m);

struct gm_account_balance {
    bool valid;
    enum gm_account_moment at;
    uint64_t t_ns;      /* CLOCK_MONOTONIC of the counters */
    uint64_t used_t_ns; /* of the reading (differs from t_ns only at a signal) */
    bool used_valid;    /* a reading exists; otherwise there is no NOT_SEEN term */
    uint64_t used;      /* bytes, device used in the sense of 'used_source' */
    enum gm_account_reading used_source;
    bool consistent; /* no tracked call ran while the reading was taken */
    size_t n_terms;
    struct gm_account_term terms[GM_ACCOUNT_MAX_TERMS]; /* in equation order, zeros left out */
    uint64_t seen;        /* the sum of every term but NOT_SEEN, bytes */
    uint64_t granularity; /* the device's page, bytes (the rounding term) */
    bool granularity_measured;
    /* beside the equation */
    uint64_t managed;          /* cuMemAllocManaged bytes live */
    uint64_t virtual_reserved; /* cuMemAddressReserve'd address space (no memory) */
};

/* The title of a term in the equation ("context", "PyTorch reserved", "libfoo.so", "not
 * seen by the driver API"; borrowed from 't' or static). */
const char *gm_account_term_title(const struct gm_account_term *t);
/* The object a library term stands for alone (an allocation of an unknown library named by
 * its own object, which is then its title), or NULL. */
const char *gm_account_term_object(const struct gm_account_term *t);
/* Where the term's figure comes from, as a phrase, into buf[n]: "measured: NVML
 * usedGpuMemory around each creation (1 context)", "cuMemAlloc_v2 x3, cuMemCreate x12",
 * "device used less every other term". */
void gm_account_term_source(const struct gm_account_term *t, const struct gm_account_balance *b,
                            char *buf, size_t n);

/* ------------------------------------------------------------------------------------ */
/* Reading account files */

/* One allocation among the largest of a process, with its native stack. */
#define GM_ACCOUNT_MAX_FRAMES 16
struct gm_account_alloc {
    uint64_t t_ns;
    uint64_t addr;
    uint64_t bytes;
    int32_t device; /* CUDA ordinal, -1 host */
    enum gm_account_kind kind;
    enum gm_account_lib lib;
    char api[40];    /* "cuMemAlloc_v2" */
    char object[64]; /* the object credited ("libnccl.so.2") */
    size_t n_frames;
    char frames[GM_ACCOUNT_MAX_FRAMES][96]; /* "libnccl.so.2+0x1a2b (ncclCommInit)" */
};

/* One point of a device's timeline (the interposer's samples). */
struct gm_account_point {
    uint64_t t_ns;
    bool used_valid;
    uint64_t used;                          /* bytes */
    uint64_t seen;                          /* every term but NOT_SEEN */
    uint64_t by_lib[GM_ACCOUNT_LIB__COUNT]; /* device memory by class */
    uint64_t context;                       /* contexts + modules + graphs */
};

struct gm_account_device {
    int32_t cuda;              /* CUDA ordinal in the process (after CUDA_VISIBLE_DEVICES) */
    char uuid[96];             /* "GPU-...", "" unknown */
    char name[96];             /* "" unknown */
    uint64_t total;            /* bytes, cuDeviceTotalMem_v2; 0 unknown */
    uint64_t granularity;      /* bytes of a driver page */
    bool granularity_measured; /* from cuMemGetAllocationGranularity (else assumed 2 MiB) */
    struct gm_account_balance peak;
    struct gm_account_balance end; /* at exit, at a signal, or the last sample */
    uint64_t tracked_peak;         /* highest sum of the counted terms, bytes */
    uint64_t tracked_peak_t_ns;
    size_t n_points;
    struct gm_account_point *points; /* time order */
};

enum gm_account_end {
    GM_ACCOUNT_END_EXIT = 0, /* exit() ran */
    GM_ACCOUNT_END_SIGNAL,   /* SIGTERM or SIGINT at their default action */
    GM_ACCOUNT_END_NONE      /* no end line: killed (SIGKILL, OOM killer) or _exit() */
};

struct gm_account_process {
    uint32_t pid;
    uint32_t ppid;
    int32_t rank;       /* RANK, -1 when not set */
    int32_t local_rank; /* LOCAL_RANK, -1 when not set */
    char command[256];  /* /proc/self/cmdline, arguments joined by spaces */
    char file[256];     /* the file it was read from (its name) */
    uint64_t t_start_ns;
    uint64_t t_end_ns; /* of the end line, or of the last line */
    enum gm_account_end end;
    int signal;    /* GM_ACCOUNT_END_SIGNAL */
    bool disabled; /* the interposer stopped accounting (and passed every call through) */
    uint64_t disabled_t_ns;
    char disabled_reason[200];
    uint64_t n_events;   /* event lines read */
    uint64_t n_dropped;  /* events the interposer could not write (its queue was full) */
    uint64_t n_unhooked; /* entry points handed out unwrapped (cuGetProcAddress of a pointer
                            and name the interposer could not match) */
    uint64_t host_bytes[GM_ACCOUNT_LIB__COUNT]; /* pinned host memory at its highest, by class */
    uint64_t host_peak;                         /* pinned + registered host memory, highest */
    uint64_t host_registered_peak;
    size_t n_devices;
    struct gm_account_device *devices; /* CUDA order */
    size_t n_largest;
    struct gm_account_alloc *largest; /* largest first */
};

struct gm_account; /* the processes of one or more files */

/* An empty account; release with gm_account_free().  GM_ERR_NOMEM. */
enum gm_status gm_account_new(struct gm_account **out, struct gm_error *err);
/* NULL is a no-op. */
void gm_account_free(struct gm_account *a);

/* Add the processes of the account file at 'path', or of every account-*.jsonl file of the
 * folder 'path' (in name order).  GM_ERR_NOENT, GM_ERR_IO, GM_ERR_FORMAT (with the byte
 * offset of the bad line), GM_ERR_LIMIT, GM_ERR_NOMEM. */
enum gm_status gm_account_add_file(struct gm_account *a, const char *path, struct gm_error *err);
/* The same for 'len' bytes at 'data' (borrowed during the call), named 'name'.  A last line
 * without its newline (a process killed while writing it) is ignored; any other bad line is
 * GM_ERR_FORMAT. */
enum gm_status gm_account_add_data(struct gm_account *a, const char *name, const void *data,
                                   size_t len, struct gm_error *err);

/* Whether the first line of 'len' bytes at 'data' declares schema gpumem.account/1. */
bool gm_account_is_account_data(const void *data, size_t len);

/* The processes read, in the order of their start (borrowed, valid until gm_account_free()). */
size_t gm_account_n_processes(const struct gm_account *a);
const struct gm_account_process *gm_account_process(const struct gm_account *a, size_t i);

/* Write the processes' equations, peaks and largest allocations as one JSON document,
 * schema gpumem.account.summary/1.  GM_ERR_IO on a write error. */
enum gm_status gm_account_json(FILE *f, const struct gm_account *a, struct gm_error *err);

/* Write every line of the account files 'paths[0..n)' (files or folders, as
 * gm_account_add_file() takes them) into 'f' as one timeline: a header line
 * {"schema":"gpumem.account/1","type":"merged",...} then each process's lines in the order
 * of their start.  The result reads back with gm_account_add_file().  Errors as
 * gm_account_add_file(), GM_ERR_IO on a write error. */
enum gm_status gm_account_merge(FILE *f, const char *const *paths, size_t n, struct gm_error *err);

/* The equations of every process in the Prometheus text exposition format (base/prom.h),
 * for `gpumem watch --account --prometheus`: gpumem_account_used_bytes (the reading each
 * equation balances) and gpumem_account_term_bytes (one series per term, its 'term' label
 * the term kind's key, gm_account_term_key(); library terms add 'lib', gm_account_lib_key(),
 * and 'object' for an object named on its own; not_seen may be negative), each labelled pid,
 * process, cuda (the ordinal in the process), UUID, at ("peak", or "end": at exit, at a
 * signal, or the latest sample while the process runs) and the job's labels 'l' (may be
 * NULL; rank: the process's RANK when it has one).  Errors: GM_ERR_IO. */
struct gm_watch_prom_labels; /* gpumem/watch.h */
enum gm_status gm_account_prometheus(FILE *f, const struct gm_account *a,
                                     const struct gm_watch_prom_labels *l, struct gm_error *err);

/* ------------------------------------------------------------------------------------ */
/* Calibrating the estimate's components outside the caching allocator */

struct gm_job; /* gpumem/estimate.h */

/* The estimator's components that live outside PyTorch's caching allocator, each set by
 * one job setting. */
enum gm_account_component {
    GM_ACCOUNT_COMP_CONTEXT = 0, /* CUDA context and loaded modules: --cuda-context */
    GM_ACCOUNT_COMP_WORKSPACE,   /* cuBLAS, cuBLASLt and cuDNN's own memory: --workspace */
    GM_ACCOUNT_COMP_NCCL,        /* NCCL buffers, per communicator: --nccl */
    GM_ACCOUNT_COMP_NON_TORCH,   /* vLLM's non-torch memory beside NCCL: --non-torch */
    GM_ACCOUNT_COMP__COUNT
};

struct gm_account_calib_row {
    enum gm_account_component what;
    bool applies;           /* the estimate has this component for the job as described */
    uint64_t predicted;     /* the estimate's bytes, one device, before calibration */
    uint64_t measured;      /* the account's bytes for it (terms summed, see account.md) */
    uint64_t calibrated;    /* the estimate's bytes after calibration */
    uint64_t communicators; /* NCCL: the job's communicators per rank (the estimate's) */
    bool set;               /* the setting was given the measured value */
    char setting[24];       /* the job setting ("cuda-context") */
    uint64_t value;         /* what it was set to, bytes (per communicator for NCCL) */
    char note[200];         /* why it was not set */
};

struct gm_account_calibration {
    uint32_t pid;           /* the process whose equation was used: the highest peak */
    int32_t rank;           /* its RANK, -1 none */
    int32_t device;         /* its CUDA device */
    uint64_t measured_used; /* its device used at that peak (NVML), 0 when not read */
    struct gm_account_calib_row rows[GM_ACCOUNT_COMP__COUNT];
    uint64_t device_before; /* the estimate's device figure, as described */
    uint64_t device_after;  /* and with the measured components */
};

/* The name of a component in words ("CUDA context and modules"; static). */
const char *gm_account_component_name(enum gm_account_component c);

/* Hold the estimate of 'job' against the account 'a' of a run of it: take the equation at
 * the peak of the process and device with the highest device used, set each component the
 * estimate has outside the caching allocator from the terms that measure it (the job's
 * settings --cuda-context, --workspace, --nccl per communicator, --non-torch for vLLM: 'job'
 * is changed), and estimate again.  GM_ERR_INVALID when the account has no equation;
 * errors of gm_estimate_run(). */
enum gm_status gm_account_calibrate(const struct gm_account *a, struct gm_job *job,
                                    struct gm_account_calibration *out, struct gm_error *err);

/* The calibration as one JSON document (schema gpumem.calibrate.account/1). */
enum gm_status gm_account_calibration_json(FILE *f, const struct gm_account_calibration *c,
                                           struct gm_error *err);

/* ------------------------------------------------------------------------------------ */
/* Running a command under the interposer */

/* The interposer library: 'given' when not NULL or empty (the caller's choice, e.g. the
 * CLI's $GPUMEM_ACCOUNT_LIBRARY), else libgpumem-account.so beside the running executable,
 * in ../lib/gpumem/ from it (make install, the Python wheel), or in the library folder it
 * was installed to.  GM_ERR_NOENT (saying where it looked) when none exists. */
enum gm_status gm_account_preload_path(const char *given, char *out, size_t n,
                                       struct gm_error *err);

struct gm_account_env_opts {
    const char *preload;  /* the interposer (gm_account_preload_path()) */
    const char *dir;      /* where each process writes its file */
    uint64_t interval_ms; /* the interposer's sampling interval, 0: only at the end */
    uint64_t stacks;      /* largest allocations with a native stack */
};

/* A copy of 'envp' (NULL-terminated) for the command to run: the interposer added to
 * LD_PRELOAD (after what was there: a sanitizer's runtime must stay first),
 * GPUMEM_ACCOUNT_DIR, GPUMEM_ACCOUNT_INTERVAL_MS and
 * GPUMEM_ACCOUNT_STACKS set.  *out and its strings are one allocation: release it with
 * gm_free().  GM_ERR_NOMEM. */
enum gm_status gm_account_env(char *const *envp, const struct gm_account_env_opts *o, char ***out,
                              struct gm_error *err);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
