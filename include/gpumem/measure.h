/* SPDX-License-Identifier: MIT */
/* measure.h - the measurement lab: run a small dense network on the GPU, phase by phase,
 * and record what memory each phase takes.
 *
 * The network is `layers` Linear(width, width) layers (ReLU after all but the last) on a
 * synthetic input of batch * context rows, in float32 or bfloat16.  Every tensor is allocated
 * through the caching-allocator model (alloc.h) whose segments come from cuMemAlloc_v2, so
 * "allocated" and "reserved" mean exactly what torch.cuda.memory_allocated() and
 * memory_reserved() mean; the driver's cuMemGetInfo adds the device-level view (context,
 * modules, driver granularity).  Kernels are the embedded PTX of src/measure/kernels.cu.
 *
 * Phases, in order: model_load, inputs, cold_forward, warmup, warm_forward, and with
 * training: backward, optimizer_step (SGD with momentum).  Each phase: synchronize, read
 * allocated/reserved, reset the peaks (peak = current), run, synchronize, read the peaks
 * and the end values.  All repeats run in the same process.  Results are checked against
 * a CPU computation of the same network. */
#ifndef GPUMEM_MEASURE_H
#define GPUMEM_MEASURE_H

#include "gpumem/alloc.h"
#include "gpumem/device.h"
#include "gpumem/error.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

enum gm_measure_phase_id {
    GM_MEASURE_MODEL_LOAD = 0,
    GM_MEASURE_INPUTS,
    GM_MEASURE_COLD_FORWARD,
    GM_MEASURE_WARMUP,
    GM_MEASURE_WARM_FORWARD,
    GM_MEASURE_BACKWARD,
    GM_MEASURE_OPTIMIZER_STEP,
    GM_MEASURE_N_PHASES
};

/* "model_load", ...; static storage. */
const char *gm_measure_phase_name(enum gm_measure_phase_id id);

enum gm_measure_dtype {
    GM_MEASURE_F32 = 0, /* float32 tensors */
    GM_MEASURE_BF16     /* bfloat16 tensors, float32 arithmetic (rounded when stored) */
};

struct gm_measure_opts {
    int device; /* CUDA ordinal */
    enum gm_measure_dtype dtype;
    uint32_t batch;
    uint32_t context; /* rows per sample: the input is batch * context rows */
    uint32_t width;
    uint32_t layers;
    uint32_t warmup;  /* passes in the warmup phase */
    uint32_t repeats; /* timed passes in warm_forward */
    bool train;
    float lr;                         /* SGD learning rate */
    float momentum;                   /* SGD momentum */
    const struct gm_alloc_conf *conf; /* allocator settings; NULL: defaults */
};

/* Defaults: batch 2, context 128, width 1024, 4 layers, warmup 3, repeats 5, inference,
 * lr 0.01, momentum 0.9, device 0. */
void gm_measure_opts_init(struct gm_measure_opts *o);

/* Check the dimensions (non-zero, every tensor under 2^31 elements).  GM_ERR_INVALID. */
enum gm_status gm_measure_opts_check(const struct gm_measure_opts *o, struct gm_error *err);

struct gm_measure_phase {
    bool ran; /* false: skipped (not requested, or an earlier phase failed) */
    bool ok;
    char error[256]; /* when ran && !ok */
    /* the four allocator counters, bytes */
    uint64_t allocated_begin;
    uint64_t reserved_begin;
    uint64_t allocated_end;
    uint64_t reserved_end;
    uint64_t peak_allocated;
    uint64_t peak_reserved;
    /* the allocator model alone on the same allocation sequence, without a GPU */
    uint64_t estimate_peak_allocated;
    uint64_t estimate_peak_reserved;
    /* driver view (cuMemGetInfo_v2) before and after */
    struct gm_reading device_free_begin;
    struct gm_reading device_free_end;
    struct gm_reading device_used_begin; /* total - free */
    struct gm_reading device_used_end;
    double seconds;          /* wall time of the phase, synchronized, without the check */
    double check_seconds;    /* time spent on the CPU check (copies + reference) */
    uint32_t passes;         /* forward (or training) passes run */
    double pass_seconds_min; /* per pass, when passes > 0 */
    double pass_seconds_mean;
    double pass_seconds_max;
    bool checked; /* a result was compared with the CPU reference */
    bool check_ok;
    double max_rel_error; /* max |gpu - cpu| / max |cpu| */
};

struct gm_measure_result {
    struct gm_measure_phase phases[GM_MEASURE_N_PHASES];
    uint64_t parameter_bytes; /* weights + biases */
    uint64_t input_bytes;
    uint64_t activation_bytes; /* one layer output */
    struct gm_reading device_total;
    struct gm_reading used_before_context; /* NVML-free view is not available: invalid */
    struct gm_reading used_after_context;  /* cuMemGetInfo right after the context and module */
    struct gm_alloc_stats stats;           /* memory_stats() at the end */
    uint64_t peak_allocated;               /* max over the phases that ran, bytes */
    uint64_t peak_reserved;
    uint64_t estimate_peak_allocated; /* over all phases, allocator model alone */
    uint64_t estimate_peak_reserved;
    bool all_ok;
    bool all_checks_ok;
};

/* Run the allocator model alone over the workload (no GPU): fills only the estimate_*
 * fields of 'out'.  Never needs a driver. */
enum gm_status gm_measure_estimate(const struct gm_measure_opts *o, struct gm_measure_result *out,
                                   struct gm_error *err);

/* Run the workload on CUDA device o->device through 'cu' (loaded, no context current).
 * A phase that fails (out of memory, a driver error, a wrong result) is recorded in its
 * phase and the later phases are skipped; that is not an error of this function.  Returns
 * GM_ERR_NODEV / GM_ERR_DRIVER when the context or the module cannot be set up,
 * GM_ERR_NOMEM for host memory. */
enum gm_status gm_measure_run(struct gm_cuda *cu, const struct gm_measure_opts *o,
                              struct gm_measure_result *out, struct gm_error *err);

/* The PTX the kernels are loaded from (NUL-terminated, static storage). */
const char *gm_measure_ptx_text(void);

/* ---- a recorded series: the JSON documents of schema gpumem.measure/1 ----
 *
 * Two writers share the schema: `gpumem measure --output` (gpumem's own network, phases of
 * a fixed list, "ran": false for those skipped) and the Python module gpumem.torch (the
 * user's phases, "pass": "first" / "warm", an OOM with "oom": true and "requested_bytes").
 * docs/python.md lists the members.  A reading the file does not have stays invalid. */

enum gm_measure_source {
    GM_MEASURE_SOURCE_UNKNOWN = 0, /* no "source" member */
    GM_MEASURE_SOURCE_LAB,         /* "gpumem measure": gpumem's own dense network */
    GM_MEASURE_SOURCE_TORCH        /* "gpumem.torch": the user's PyTorch job */
};

/* One of the allocator's counters over a phase (bytes). */
struct gm_measure_counter {
    struct gm_reading begin;
    struct gm_reading end;
    struct gm_reading peak; /* since the reset at the start of the phase */
};

struct gm_measure_series_phase {
    const char *name;
    bool ran;            /* false: skipped (gpumem measure after a failure) */
    bool ok;             /* when ran */
    bool warm;           /* a later pass of its name ("pass": "warm") */
    bool oom;            /* failed with an out-of-memory error */
    uint32_t occurrence; /* pass number of its name, 0 when not written */
    const char *device;  /* "cuda:0"; NULL when not written */
    struct gm_measure_counter allocated;
    struct gm_measure_counter reserved;
    struct gm_reading used_begin; /* device used, the driver's view, bytes */
    struct gm_reading used_end;
    struct gm_reading requested; /* oom: bytes the allocator tried to get */
    bool has_seconds;
    double seconds;    /* wall time of the phase */
    const char *error; /* NULL when none */
};

/* A member of "dimensions" or "settings": its value as text (strings unquoted, numbers and
 * booleans as JSON writes them, null as "null"). */
struct gm_measure_kv {
    const char *key;
    const char *value;
};

/* The environment a measurement ran in (the members `gpumem environment --json` writes, and
 * gpumem.torch's "torch"); NULL strings are unknown. */
struct gm_measure_env {
    const char *gpu;               /* name of the first device listed */
    struct gm_reading gpu_total;   /* its memory, bytes (NVML total) */
    const char *driver;            /* driver version "550.54.15" */
    const char *cuda_driver;       /* CUDA version of the driver API "12.4" */
    const char *torch;             /* torch.__version__ */
    const char *torch_cuda;        /* torch.version.cuda */
    const char *torch_hip;         /* torch.version.hip */
    const char *allocator_backend; /* "native", "cudaMallocAsync" */
    const char *alloc_conf;        /* PYTORCH_CUDA_ALLOC_CONF, else PYTORCH_ALLOC_CONF */
};

struct gm_measure_series {
    enum gm_measure_source source;
    const struct gm_measure_series_phase *phases; /* in the order they ran */
    size_t n_phases;
    struct gm_reading peak_allocated; /* "measured": over the phases, bytes */
    struct gm_reading peak_reserved;
    const struct gm_measure_kv *dimensions;
    size_t n_dimensions;
    const struct gm_measure_kv *settings;
    size_t n_settings;
    struct gm_measure_env env;
    const char *const *caveats; /* texts of "caveats" (e.g. backend:cudaMallocAsync) */
    size_t n_caveats;
    bool ok; /* every phase that ran succeeded */
    void *priv_;
};

/* Read a gpumem.measure/1 document from 'len' bytes at 'data' (borrowed during the call).
 * 'memory_limit': bytes the text and its parsed tree may take together (0: a budget relative
 * to the size of the text).  On success *out owns everything (gm_measure_series_free()).
 * GM_ERR_FORMAT when it is not JSON, not of that schema, or a member has the wrong type;
 * GM_ERR_LIMIT when parsing it would take more than the limit; GM_ERR_NOMEM. */
enum gm_status gm_measure_series_load_mem(const void *data, size_t len, uint64_t memory_limit,
                                          struct gm_measure_series **out, struct gm_error *err);
/* The same for the file at 'path' (GM_ERR_NOENT, GM_ERR_IO besides). */
enum gm_status gm_measure_series_load(const char *path, struct gm_measure_series **out,
                                      struct gm_error *err);
/* NULL is a no-op. */
void gm_measure_series_free(struct gm_measure_series *s);

/* The environment of a gpumem.environment/1 document (`gpumem environment --json`), in the
 * same form, its strings owned by *holder (a series with no phases; free it with
 * gm_measure_series_free()). */
enum gm_status gm_measure_env_load_mem(const void *data, size_t len, uint64_t memory_limit,
                                       struct gm_measure_series **holder, struct gm_error *err);

/* The phases of the series 's[0..n)' (one per process; 'ranks[i]' the rank of s[i], NULL
 * none) in the Prometheus text exposition format: gauges gpumem_phase_peak_allocated_bytes
 * and gpumem_phase_peak_reserved_bytes, labelled phase and rank plus the job's labels 'l'
 * (may be NULL; its rank is replaced by ranks[i]).  A name run several times (a phase per
 * step) gives the figures of its latest pass.  Errors: GM_ERR_NOMEM, GM_ERR_IO. */
struct gm_watch_prom_labels; /* gpumem/watch.h */
enum gm_status gm_measure_series_prometheus(FILE *f, const struct gm_measure_series *const *s,
                                            const char *const *ranks, size_t n,
                                            const struct gm_watch_prom_labels *l,
                                            struct gm_error *err);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
