/* SPDX-License-Identifier: MIT */
/* preload.h - internals of libgpumem-account.so, the interposer of `gpumem account`.
 *
 * The interposer is loaded with LD_PRELOAD into every process of a job.  It is not the
 * gpumem library (no jansson, no gm_* calls): it is a small program of its own whose only
 * shared code is the classification table (src/account/classify.c).  A process-wide
 * interposer cannot pass a context around: its state is the one 'struct acct' below (and
 * the tables of track.c), reset in a forked child.
 *
 * Files:
 *   dlsym_entry.S  dlsym itself: hands every call to libc's dlsym with the caller's return
 *                  address intact, except lookups of hooked driver names (acct_dlsym_filter)
 *   resolve.c      the real functions: the driver's handle, dlsym and cuGetProcAddress
 *                  answered with our wrappers (by address, then by name and version)
 *   hooks_cuda.c   the CUDA backend: the table of hooked entry points and their wrappers
 *   track.c        live allocations (sharded hash tables), counters per device, object and
 *                  kind, attribution by return address, the largest allocations' stacks
 *   readings.c     device used: NVML (process and device) and cuMemGetInfo; device facts
 *   output.c       the event queue, the JSON lines, the sampler thread, activation, exit,
 *                  SIGTERM/SIGINT and fork
 *
 * Never harm the job: every wrapper calls the real function with the caller's arguments and
 * returns its result unchanged; when anything inside fails the interposer disables itself
 * (state ACCT_DISABLED, said in its file) and every wrapper passes straight through. */
#ifndef GM_PRELOAD_H
#define GM_PRELOAD_H

#include "device/cuda_abi.h" /* the driver's types, as gpumem declares them */
#include "gpumem/account.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ACCT_HIDDEN __attribute__((visibility("hidden")))
#define ACCT_EXPORT __attribute__((visibility("default")))
/* Code that dlsym reaches may run before anything else in the process, a sanitizer's own
 * start-up included (it looks its interceptors up with dlsym): it must not be instrumented. */
#define ACCT_EARLY __attribute__((no_sanitize_address))

enum {
    ACCT_CUDA_SUCCESS = 0,
    ACCT_CUDA_ERROR_NOT_INITIALIZED = 3,
    ACCT_CUDA_ERROR_NOT_FOUND = 500
};

/* ---- limits ---- */
#define ACCT_MAX_DEV  16           /* CUDA ordinals tracked per process */
#define ACCT_HOST     ACCT_MAX_DEV /* the counters' slot of pinned host memory */
#define ACCT_MAX_OBJ  256          /* distinct loaded objects credited */
#define ACCT_OBJ_NONE 0            /* no object: the caller's address is in none */
#define ACCT_OBJ_FULL 1            /* more objects than ACCT_MAX_OBJ */
#define ACCT_MAX_BIG  32           /* largest allocations kept with a stack */
#define ACCT_STACK    16           /* frames kept of a stack */
#define ACCT_PATH_MAX 240

/* ---- state ---- */

enum acct_state {
    ACCT_OFF = 0,    /* GPUMEM_ACCOUNT_DIR not set: pure pass-through, nothing swapped */
    ACCT_CONFIGURED, /* set, waiting for the first tracked call */
    ACCT_ACTIVATING, /* one thread opens the file, starts the sampler */
    ACCT_ACTIVE,
    ACCT_DISABLED, /* an internal failure: pass-through from now on */
    ACCT_FINISHED  /* exit or a signal wrote the end */
};

/* What a reading of device used is (the values of enum gm_account_reading). */
struct acct_reading {
    bool proc_valid; /* NVML listed the process: proc is its usedGpuMemory */
    uint64_t proc;
    bool dev_valid; /* NVML device used (v2 when present) */
    uint64_t dev;
    bool info_valid; /* cuMemGetInfo_v2 in the calling thread's context: total - free */
    uint64_t info;
};

/* One CUDA device of the process (by ordinal).  Counters are atomics updated by any
 * thread; the facts are filled once (ready 0 -> 1 -> 2). */
struct acct_device {
    _Atomic int ready;
    char uuid[96];
    char name[96];
    uint64_t total;
    uint64_t gran;
    bool gran_measured;
    void *nvml; /* nvmlDevice_t, NULL when NVML does not know it */
    /* how samples read device used: NVML of the process while NVML lists it, else NVML
     * device used less the baseline taken before the process's first context */
    _Atomic int used_source; /* enum gm_account_reading */
    uint64_t baseline;
    bool baseline_valid;
    int primary_refs; /* under the slow lock */
    uint64_t primary_bytes;
    _Atomic bool touched; /* anything of this device was tracked (samples are written) */
    bool info_written;
    /* counters */
    _Atomic uint64_t bytes[ACCT_MAX_OBJ][GM_ACCOUNT_KIND__COUNT];
    _Atomic uint64_t count[ACCT_MAX_OBJ][GM_ACCOUNT_KIND__COUNT];
    _Atomic uint32_t n_obj_used; /* objects with a nonzero counter ever, upper bound + 1 */
    _Atomic uint64_t rounding;
    _Atomic uint64_t virt;
    _Atomic uint64_t ctx, n_ctx, mod, n_mod, graph, n_graph;
    _Atomic unsigned ctx_src, mod_src, graph_src; /* 1 << enum gm_account_reading used */
    _Atomic uint64_t tracked;                     /* every counted term of the equation */
    _Atomic uint64_t tracked_peak;
    _Atomic uint64_t tracked_peak_t;
    /* the sampler's latest reading (also read by the signal handler) */
    _Atomic uint64_t last_used, last_used_t, last_gen;
    _Atomic bool last_valid;
    uint64_t written_used, written_gen; /* of the last sample line written */
    bool written_any;
};

struct acct_object {
    char path[ACCT_PATH_MAX];
    enum gm_account_lib lib;
    uintptr_t base; /* load address (dli_fbase) */
    bool written;   /* its line is in the file */
};

/* One of the largest allocations, with the stack of the call. */
struct acct_big {
    uint64_t t, addr, bytes;
    uint32_t obj;
    int16_t dev;
    uint8_t kind, api;
    int n_frames;
    void *frames[ACCT_STACK];
    bool written;
};

struct acct {
    _Atomic int state;
    char dir[1024];
    uint64_t interval_ms;
    unsigned n_big_max;
    int fail_insert_at; /* GPUMEM_ACCOUNT_FAIL_AT: a test simulates an internal failure at
                           the Nth table insertion (0: never) */
    _Atomic uint64_t n_inserts;
    /* the one consistent-reading protocol: calls in flight, and a generation bumped by
     * every tracked change, so a sample knows that nothing moved while it read */
    _Atomic uint64_t inflight;
    _Atomic uint64_t gen;
    /* output */
    int fd;
    uint64_t t_start;
    _Atomic uint64_t n_events, n_dropped, n_unhooked, n_unknown_frees, n_other_devices;
    _Atomic int consumer; /* the event queue's one reader (sampler, exit, signal) */
    char disabled_reason[200];
    _Atomic bool disabled_written;
    pthread_t sampler;
    bool sampler_running;
    _Atomic bool sampler_stop;
    /* pass-through objects and the driver */
    void *driver;                             /* dlopen handle of the driver, NULL until known */
    struct acct_device dev[ACCT_MAX_DEV + 1]; /* + the host slot */
    struct acct_object objects[ACCT_MAX_OBJ];
    _Atomic uint32_t n_objects;
    struct acct_big big[ACCT_MAX_BIG];
    unsigned n_big;
    _Atomic uint64_t big_floor; /* an allocation must exceed this to enter big[] */
    /* locks, never held across a hot-path call: objects (interning), the largest
     * allocations, the slow operations (contexts, modules, graphs: brackets of readings) */
    pthread_mutex_t obj_lock, big_lock, slow_lock;
};

extern struct acct account ACCT_HIDDEN;

/* ---- output.c ---- */

/* Enter a tracked call: activate on the first one, count it in flight.  false: pass
 * through (off, disabled, finished, or activation failed). */
bool acct_begin(void) ACCT_HIDDEN;
/* Leave it: bump the generation, leave flight. */
void acct_end(void) ACCT_HIDDEN;
/* Stop accounting for good (pass-through from now on) and say why in the file. */
void acct_disable(const char *reason) ACCT_HIDDEN;
uint64_t acct_now(void) ACCT_HIDDEN;

enum acct_op {
    ACCT_OP_ALLOC = 0,
    ACCT_OP_FREE,
    ACCT_OP_CONTEXT,
    ACCT_OP_CONTEXT_END,
    ACCT_OP_MODULE,
    ACCT_OP_MODULE_END,
    ACCT_OP_GRAPH,
    ACCT_OP_GRAPH_END,
    ACCT_OP_RESERVE,
    ACCT_OP_RESERVE_END,
    ACCT_OP_MAP,
    ACCT_OP_UNMAP,
    ACCT_OP_POOL,
    ACCT_OP_POOL_END,
    ACCT_OP__COUNT
};

struct acct_event {
    uint64_t t;
    uint64_t addr;  /* pointer, handle or address range start */
    uint64_t bytes; /* size, or the measured cost of a context/module/graph */
    uint32_t obj;   /* the object credited */
    int16_t dev;    /* ordinal, ACCT_HOST, or -1 */
    uint8_t op;     /* enum acct_op */
    uint8_t kind;   /* enum gm_account_kind (allocations) */
    uint8_t api;    /* enum acct_api */
    uint8_t source; /* enum gm_account_reading (measured ops) */
};

/* Queue an event for the file (dropped, and counted, when the queue is full). */
void acct_event_push(const struct acct_event *e) ACCT_HIDDEN;

/* ---- track.c ---- */

/* An entry of the live tables: an allocation (by address), a VMM handle, a mapping (by
 * address; aux is its handle) or a resource (by handle). */
struct acct_live {
    uint64_t key;
    uint64_t bytes;
    uint64_t t;
    uint64_t aux;
    uint32_t obj;
    int16_t dev;
    uint8_t kind; /* enum gm_account_kind */
    uint8_t api;
    uint8_t state;    /* slot: 0 empty, 1 full, 2 deleted */
    uint8_t what;     /* enum acct_res of a resource */
    uint8_t released; /* a VMM handle given to cuMemRelease */
    uint8_t source;   /* enum gm_account_reading of a measured resource */
    uint32_t maps;    /* a VMM handle's live mappings */
};

/* The object credited with a call whose return address is 'ra': the first frame outside
 * the runtime, the driver and the interposer (gm_account_lib_passes_through()). */
uint32_t acct_attribute(void *ra) ACCT_HIDDEN;
/* Whether 'addr' lies in the interposer itself (its frames are left out of stacks). */
bool acct_is_self(void *addr) ACCT_HIDDEN;
/* The first frame of 'frames[0..n)' after the interposer's own (and anything before them). */
int acct_stack_start(void *const *frames, int n) ACCT_HIDDEN;

/* Record allocations and releases.  'dev' is an ordinal (or ACCT_HOST). */
void acct_track_alloc(enum gm_account_kind kind, uint8_t api, int dev, uint64_t addr,
                      uint64_t bytes, void *ra) ACCT_HIDDEN;
/* Take the allocation at 'addr' out of the table before the driver frees it: true and *undo
 * filled when it was known.  Put it back with acct_track_restore() if the free failed.
 * 'kinds': the kinds (1 << enum gm_account_kind) the freeing call frees. */
bool acct_track_free(uint64_t addr, unsigned kinds, uint8_t api,
                     struct acct_live *undo) ACCT_HIDDEN;
void acct_track_restore(const struct acct_live *undo) ACCT_HIDDEN;

/* VMM: physical handles, their mappings, reserved address ranges. */
void acct_track_vmm_create(CUmemGenericAllocationHandle h, uint64_t bytes, int dev, uint8_t api,
                           void *ra) ACCT_HIDDEN;
void acct_track_vmm_release(CUmemGenericAllocationHandle h, uint8_t api) ACCT_HIDDEN;
void acct_track_vmm_map(uint64_t va, uint64_t size, CUmemGenericAllocationHandle h) ACCT_HIDDEN;
void acct_track_vmm_unmap(uint64_t va, uint64_t size, uint8_t api) ACCT_HIDDEN;
void acct_track_reserve(uint64_t va, uint64_t size, int dev, uint8_t api, void *ra) ACCT_HIDDEN;
void acct_track_unreserve(uint64_t va, uint8_t api) ACCT_HIDDEN;

/* Resources measured by a bracket (contexts, modules, libraries, graphs) and pools. */
enum acct_res { ACCT_RES_CONTEXT = 1, ACCT_RES_MODULE, ACCT_RES_GRAPH, ACCT_RES_POOL };
void acct_track_resource(enum acct_res what, uint64_t handle, int dev, uint64_t bytes,
                         enum gm_account_reading source, uint8_t api, void *ra) ACCT_HIDDEN;
/* Forget a resource; false when it was not known.  Its device in *dev (may be NULL). */
bool acct_track_resource_end(enum acct_res what, uint64_t handle, uint8_t api,
                             int *dev) ACCT_HIDDEN;
/* The device of a known resource (a pool), -1 unknown. */
int acct_resource_device(uint64_t handle) ACCT_HIDDEN;

/* The primary context of 'dev' retained (first: its measured cost) or released. */
void acct_track_primary(int dev, bool retain, uint64_t bytes, enum gm_account_reading source,
                        uint8_t api, void *ra) ACCT_HIDDEN;

/* Every table emptied and every counter zeroed (a forked child). */
void acct_track_reset(void) ACCT_HIDDEN;
/* Lock / unlock every table (fork). */
void acct_track_lock_all(void) ACCT_HIDDEN;
void acct_track_unlock_all(void) ACCT_HIDDEN;
void acct_track_reinit_locks(void) ACCT_HIDDEN;

/* ---- readings.c ---- */

/* Load NVML (GPUMEM_NVML_LIBRARY or libnvidia-ml.so.1); false when it is not there. */
bool acct_nvml_open(void) ACCT_HIDDEN;
void acct_nvml_close(void) ACCT_HIDDEN;
/* Fill the facts of device 'dev' once (uuid, name, total, granularity, NVML handle).
 * Returns its slot, or NULL for an ordinal beyond ACCT_MAX_DEV. */
struct acct_device *acct_device(int dev) ACCT_HIDDEN;
/* Read device used every available way.  'with_info': also cuMemGetInfo_v2 (the calling
 * thread's current context must be on 'dev'). */
void acct_read(struct acct_device *d, bool with_nvml, bool with_info,
               struct acct_reading *r) ACCT_HIDDEN;
/* The device's used memory in the sense samples use (acct_device.used_source); false when
 * it cannot be read. */
bool acct_read_used(struct acct_device *d, uint64_t *used) ACCT_HIDDEN;
/* The cost of an operation from readings before and after it, and how it was read. */
uint64_t acct_cost(struct acct_device *d, const struct acct_reading *before,
                   const struct acct_reading *after, enum gm_account_reading *source) ACCT_HIDDEN;
/* The CUDA ordinal of the calling thread's current context, -1 none. */
int acct_current_device(void) ACCT_HIDDEN;

/* ---- resolve.c ---- */

/* A hooked entry point of one backend: its exported name, our wrapper, the driver's
 * function (resolved lazily), the driver's export of that name (to recognise what
 * cuGetProcAddress hands out). */
struct acct_hook {
    const char *name;
    void *wrapper;
    _Atomic(void *) real;
    _Atomic(void *) driver_export;
};

/* Names a driver's cuGetProcAddress takes (without version suffix) mapped to hooks, for a
 * pointer that is not one of the driver's exports: the row with the highest version not
 * above the caller's wins. */
struct acct_proc_name {
    const char *base;
    int version; /* the CUDA version that introduced the hooked variant */
    bool ptds;   /* the per-thread-default-stream variant (_ptsz) */
    int hook;    /* index in the backend's hooks */
};

/* A backend: the vendor's driver library and the tables of its entry points.  CUDA is the
 * one backend today; HIP (libamdhip64.so) adds a table of its own, not a fork of this code. */
struct acct_backend {
    const char *name;
    const char *driver_soname;
    struct acct_hook *hooks;
    size_t n_hooks;
    const struct acct_proc_name *names;
    size_t n_names;
};

extern const struct acct_backend acct_cuda_backend ACCT_HIDDEN;

/* The real function of hook 'i' of the CUDA backend (NULL when no driver has it). */
void *acct_real(int i) ACCT_HIDDEN;
/* A function of the driver that is not hooked (cuCtxGetDevice, cuMemGetInfo_v2, ...). */
void *acct_driver_sym(const char *name) ACCT_HIDDEN;
/* What cuGetProcAddress handed out for 'symbol': our wrapper when it is a hooked entry
 * point, else 'fn' unchanged. */
void *acct_proc_swap(const char *symbol, void *fn, int version,
                     unsigned long long flags) ACCT_HIDDEN;
/* libc's dlsym (resolved with dlvsym on first use). */
void *acct_real_dlsym(void *handle, const char *name) ACCT_HIDDEN;

/* enum acct_api: the hooked entry points, for events (the index of the CUDA backend's
 * hooks, so a HIP table would add its own range). */
const char *acct_api_name(uint8_t api) ACCT_HIDDEN;

#endif
