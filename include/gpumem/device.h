/* SPDX-License-Identifier: MIT */
/* device.h - talk to the GPU: driver versions, devices, memory, processes, and the CUDA
 * driver API calls gpumem itself needs (contexts, allocations, PTX modules, launches).
 *
 * Nothing here is linked against a vendor library: libnvidia-ml.so.1 and libcuda.so.1 are
 * loaded at run time with dlopen() by their SONAME (never the bare libcuda.so, which may be
 * the toolkit's stub), and every function is bound by its versioned name (cuMemAlloc_v2,
 * nvmlInit_v2, ...; the plain names are the legacy 32-bit ABI).  The environment variables
 * GPUMEM_NVML_LIBRARY and GPUMEM_CUDA_LIBRARY name another file to load instead (the test
 * suite points them at its fake drivers, tests/fake/).
 *
 * Two layers:
 *   - struct gm_devices: vendor-neutral view built from a registry of backends (NVML for
 *     monitoring, CUDA for the compute view; another vendor's backend plugs into the same
 *     ops table).  Devices seen by several backends are joined by UUID, then PCI bus id.
 *   - struct gm_cuda: the CUDA driver API itself, for code that runs work on the GPU
 *     (gpumem measure, tests).
 *
 * Every measured value carries a validity flag: an unknown value is never reported as 0.
 * "No GPU" (library missing, stub library, driver not loaded, no device, index out of
 * range) is always GM_ERR_NODEV with a sentence saying which; the CLI maps it to exit 2. */
#ifndef GPUMEM_DEVICE_H
#define GPUMEM_DEVICE_H

#include "gpumem/env.h"
#include "gpumem/error.h"
#include "gpumem/json.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

/* ------------------------------------------------------------------------------------ */
/* Readings */

/* A measured quantity (bytes unless said otherwise) that may be unknown. */
struct gm_reading {
    uint64_t value; /* meaningful only when valid */
    bool valid;
};

#define GM_READING_NONE ((struct gm_reading){0, false})

/* ------------------------------------------------------------------------------------ */
/* Host */

struct gm_host_info {
    char os[128];                /* PRETTY_NAME of /etc/os-release, "" unknown */
    char kernel[128];            /* uname sysname + release + machine */
    char cpu[128];               /* "model name" of /proc/cpuinfo, "" unknown */
    unsigned n_cpus;             /* online CPUs, 0 unknown */
    struct gm_reading mem_total; /* host RAM (MemTotal), bytes */
    bool in_container;           /* /.dockerenv, /run/.containerenv, cgroup or container= hints */
    char container[32];          /* "docker", "podman", "kubernetes", "lxc", "container" or "" */
    bool pid_namespace;          /* we run in a PID namespace: NVML reports host PIDs, not ours */
};

/* Fill 'h' from /proc, /etc/os-release, uname() and the container variables 'env' gives
 * ("container", KUBERNETES_SERVICE_HOST).  Never fails: unknown fields stay empty. */
void gm_host_probe(struct gm_host_info *h, gm_env_fn env);

/* The machine's online CPUs (gm_host_info.n_cpus), 0 unknown. */
unsigned gm_cpus_online(void);

/* The CPUs this process may run on: its affinity mask on Linux (taskset, cgroup cpusets;
 * CPU quotas such as `docker --cpus=1` with a full cpuset are not seen), else, or when the
 * mask cannot be read, gm_cpus_online().  0 unknown. */
unsigned gm_cpus_usable(void);

/* The environment settings that change GPU memory behaviour, in a fixed order, NULL
 * terminated: CUDA_VISIBLE_DEVICES, PYTORCH_CUDA_ALLOC_CONF, PYTORCH_ALLOC_CONF,
 * CUDA_MODULE_LOADING, ... (static storage). */
extern const char *const gm_memory_env_vars[];

/* Process tree from /proc: 'root' and every live descendant (by PPID), into out[0..cap);
 * returns how many there are (may exceed cap).  Returns 0 when 'root' does not exist. */
size_t gm_proc_tree(uint32_t root, uint32_t *out, size_t cap);

/* The same tree, whatever its size, in a new array: *out ('root' first, *n entries) is the
 * caller's to gm_free(); *n is 0 and *out NULL when 'root' does not exist.  GM_ERR_NOMEM. */
enum gm_status gm_proc_tree_list(uint32_t root, uint32_t **out, size_t *n, struct gm_error *err);

/* The command name of 'pid' (/proc/<pid>/comm) into out[n]; "" when not visible. */
void gm_proc_name(uint32_t pid, char *out, size_t n);

/* Whether 'pid' names a process in our /proc (false for a host PID that our PID
 * namespace cannot see; true for a zombie). */
bool gm_proc_exists(uint32_t pid);

/* Whether 'pid' exists and still runs: false for a zombie (exited, not yet reaped by its
 * parent) and for a PID that does not exist here. */
bool gm_proc_running(uint32_t pid);

/* The processes of process group 'pgid' that still run (zombies left out), from /proc,
 * into out[0..cap) in /proc's order; returns how many there are (may exceed cap). */
size_t gm_proc_group(uint32_t pgid, uint32_t *out, size_t cap);

/* "SIGSEGV" for SIGSEGV, ...; NULL for a number that is no signal this system names. */
const char *gm_signal_name(int sig);

/* ------------------------------------------------------------------------------------ */
/* Vendor-neutral device view */

struct gm_devices; /* opaque: the opened backends and the joined device list */

enum gm_backend_state {
    GM_BACKEND_OK = 0,  /* loaded and initialised, at least one device */
    GM_BACKEND_MISSING, /* the library could not be loaded */
    GM_BACKEND_STUB,    /* CUDA: only the toolkit stub library (cuInit returned 34) */
    GM_BACKEND_NODEV,   /* loaded, but no usable device (driver not loaded, 0 devices) */
    GM_BACKEND_ERROR    /* loaded, but failed otherwise */
};

struct gm_backend_status {
    const char *name; /* "nvml", "cuda" (static) */
    enum gm_backend_state state;
    char library[256]; /* what was dlopen()ed: SONAME or the override path */
    int driver_code;   /* the failing call's return code, 0 when none */
    char msg[256];     /* the reason when state != GM_BACKEND_OK */
};

struct gm_driver_versions {
    char driver[80];     /* NVML system driver version "550.54.15", "" unknown */
    char nvml[80];       /* NVML library version "12.550.54.15", "" unknown */
    char amdsmi[80];     /* AMD SMI library version "24.6.2.0" or "26.1.0", "" unknown */
    int cuda_driver_api; /* cuDriverGetVersion, e.g. 12040 */
    bool cuda_driver_api_valid;
    int nvml_cuda_version; /* nvmlSystemGetCudaDriverVersion_v2 */
    bool nvml_cuda_version_valid;
};

/* Who made the device (from the backend that reported it, never from its name). */
enum gm_vendor { GM_VENDOR_UNKNOWN = 0, GM_VENDOR_NVIDIA, GM_VENDOR_AMD };

/* "NVIDIA", "AMD" or "unknown" (static). */
const char *gm_vendor_name(enum gm_vendor v);

struct gm_device_info {
    enum gm_vendor vendor;
    int cuda_index;      /* CUDA ordinal (after CUDA_VISIBLE_DEVICES); -1: CUDA does not see it */
    int nvml_index;      /* NVML index (PCI order, ignores CUDA_VISIBLE_DEVICES); -1: none */
    int amdsmi_index;    /* AMD SMI GPU index (sockets, then processors, in order); -1: none */
    char name[96];       /* "" unknown */
    char uuid[96];       /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", "" unknown */
    char pci_bus_id[32]; /* "00000000:17:00.0", "" unknown */
    int cc_major;        /* compute capability */
    int cc_minor;
    bool cc_valid;
    int multiprocessors; /* SM count */
    bool multiprocessors_valid;
    struct gm_reading cuda_total; /* cuDeviceTotalMem_v2: the total CUDA programs see */
};

enum gm_memory_source {
    GM_MEMORY_NONE = 0,
    GM_MEMORY_NVML_V2, /* nvmlDeviceGetMemoryInfo_v2: used excludes reserved */
    GM_MEMORY_NVML_V1, /* nvmlDeviceGetMemoryInfo: used includes reserved, reserved unknown */
    GM_MEMORY_AMDSMI   /* amdsmi_get_gpu_memory_total/_usage (VRAM): free = total - used */
};

struct gm_device_memory {
    struct gm_reading total;    /* bytes */
    struct gm_reading free;     /* bytes */
    struct gm_reading used;     /* bytes, in the sense of 'source' */
    struct gm_reading reserved; /* bytes held by driver/firmware (v2 only) */
    enum gm_memory_source source;
};

enum gm_process_kind {
    GM_PROCESS_COMPUTE = 1 << 0, /* holds a compute (CUDA) context */
    GM_PROCESS_GRAPHICS = 1 << 1 /* holds a graphics context (display server, ...) */
};

struct gm_process_memory {
    uint32_t pid;           /* as the driver reports it: a host PID, even inside a container */
    struct gm_reading used; /* usedGpuMemory (AMD: the process's VRAM), bytes; invalid when
                               the driver says "not available" or its layout is unknown */
    unsigned kinds;         /* enum gm_process_kind bits */
};

/* Open every registered backend (NVML, CUDA, AMD SMI) and join their devices.  Succeeds (GM_OK)
 * even when no backend works, so that the caller can show what was found; only a host
 * allocation failure fails.  'env' gives the library overrides (GPUMEM_NVML_LIBRARY,
 * GPUMEM_CUDA_LIBRARY, GPUMEM_AMDSMI_LIBRARY), CUDA_VISIBLE_DEVICES for gm_devices_check()'s reason
 * and the allocator settings gm_devices_write_json() reports; it must stay valid until
 * gm_devices_close().  Release with gm_devices_close(). */
enum gm_status gm_devices_open(struct gm_devices **out, gm_env_fn env, struct gm_error *err);
void gm_devices_close(struct gm_devices *d);

/* GM_OK when at least one device is usable (an AMD GPU counts: it can be read; commands
 * that run CUDA work find no CUDA device with gm_devices_find_cuda()); otherwise GM_ERR_NODEV (no
 * driver, only the stub library, driver not loaded, no device) or GM_ERR_DRIVER, with one sentence
 * in 'err' saying which. */
enum gm_status gm_devices_check(const struct gm_devices *d, struct gm_error *err);

/* The backends in registry order (borrowed, valid until gm_devices_close()). */
size_t gm_devices_n_backends(const struct gm_devices *d);
const struct gm_backend_status *gm_devices_backend(const struct gm_devices *d, size_t i);

const struct gm_driver_versions *gm_devices_versions(const struct gm_devices *d);

/* The joined device list: CUDA-visible devices first in CUDA order, then devices only
 * NVML sees, then AMD GPUs in AMD SMI order.  Borrowed, valid until gm_devices_close(). */
size_t gm_devices_count(const struct gm_devices *d);
const struct gm_device_info *gm_devices_info(const struct gm_devices *d, size_t i);

/* Position in the list of CUDA device 'cuda_index' ("--device cuda:N"); GM_ERR_NODEV with
 * "device cuda:N is out of range: N CUDA devices visible" when there is none. */
enum gm_status gm_devices_find_cuda(const struct gm_devices *d, int cuda_index, size_t *pos,
                                    struct gm_error *err);

/* Parse "cuda:N" (or a bare "N") into N; GM_ERR_INVALID otherwise. */
enum gm_status gm_device_parse_spec(const char *spec, int *cuda_index, struct gm_error *err);

/* Current memory of device 'i' (a live reading, NVML v2, else v1).  Fields NVML cannot
 * give stay invalid; GM_ERR_UNSUPPORTED when no backend reads device memory. */
enum gm_status gm_devices_memory(struct gm_devices *d, size_t i, struct gm_device_memory *out,
                                 struct gm_error *err);

/* nvidia-smi's spelling of a process's kinds: "C", "G", "C+G" or "-" (static). */
const char *gm_process_kind_name(unsigned kinds);

/* Processes with a compute or graphics context on device 'i' (NVML, one entry per PID)
 * into out[0..cap); *n receives how many there are, which may exceed cap (then only cap
 * were written).
 * GM_ERR_UNSUPPORTED when no backend lists processes. */
enum gm_status gm_devices_processes(struct gm_devices *d, size_t i, struct gm_process_memory *out,
                                    size_t cap, size_t *n, struct gm_error *err);

/* Every process of device 'i', however many: gm_devices_processes() into a buffer that
 * grows to what NVML reports.  *out (n entries, NULL when there are none) belongs to the
 * caller: release it with gm_free(). */
enum gm_status gm_devices_process_list(struct gm_devices *d, size_t i,
                                       struct gm_process_memory **out, size_t *n,
                                       struct gm_error *err);

/* Write the environment as JSON members of the object open in 'w': "driver", "backends",
 * "devices" (only CUDA device 'only_cuda' when >= 0, with memory and processes), "host",
 * "settings".  The same layout as `gpumem environment --json` (schema
 * gpumem.environment/1), so other documents can embed it. */
void gm_devices_write_json(struct gm_json *w, struct gm_devices *d, const struct gm_host_info *h,
                           int only_cuda);

/* ------------------------------------------------------------------------------------ */
/* CUDA driver API */

struct gm_cuda;          /* a loaded and initialised libcuda.so.1 */
struct gm_cuda_module;   /* a loaded module (CUmodule) */
struct gm_cuda_function; /* a kernel of a module (CUfunction) */

/* CUresult values callers may want to tell apart (gm_cuda_last_result()). */
enum {
    GM_CU_SUCCESS = 0,
    GM_CU_ERROR_OUT_OF_MEMORY = 2,
    GM_CU_ERROR_STUB_LIBRARY = 34,
    GM_CU_ERROR_NO_DEVICE = 100,
    GM_CU_ERROR_INVALID_PTX = 218,
    GM_CU_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    GM_CU_ERROR_NOT_SUPPORTED = 801
};

/* dlopen libcuda.so.1 (or the path 'env' gives for GPUMEM_CUDA_LIBRARY), bind the versioned symbols
 * and call cuInit(0).  GM_ERR_NODEV when the library is missing, is the stub (cuInit 34), the
 * driver is too old/mismatched or there is no device, with a sentence saying which; GM_ERR_DRIVER
 * for other failures.  No context is created.  Release with gm_cuda_unload(). */
enum gm_status gm_cuda_load(struct gm_cuda **out, gm_env_fn env, struct gm_error *err);
void gm_cuda_unload(struct gm_cuda *cu);

/* The CUresult of the last driver call made through 'cu' (0 after a success). */
int gm_cuda_last_result(const struct gm_cuda *cu);
/* The library that was loaded (SONAME or override path); borrowed. */
const char *gm_cuda_library(const struct gm_cuda *cu);

enum gm_status gm_cuda_driver_version(struct gm_cuda *cu, int *version, struct gm_error *err);
enum gm_status gm_cuda_device_count(struct gm_cuda *cu, int *n, struct gm_error *err);
/* Name, UUID (as NVML spells it), PCI bus id, compute capability, SM count and
 * cuDeviceTotalMem_v2 of ordinal 'ordinal'; nvml_index is set to -1. */
enum gm_status gm_cuda_device_info(struct gm_cuda *cu, int ordinal, struct gm_device_info *out,
                                   struct gm_error *err);
/* cuDeviceGetAttribute (CU_DEVICE_ATTRIBUTE_* ids, see driver-abi.md). */
enum gm_status gm_cuda_device_attribute(struct gm_cuda *cu, int ordinal, int attribute, int *value,
                                        struct gm_error *err);

/* Retain the primary context of 'ordinal' (the one PyTorch and cudart use) and make it
 * current on the calling thread; gm_cuda_context_end() releases it.  One context at a
 * time per struct gm_cuda.  GM_ERR_NODEV when 'ordinal' is out of range. */
enum gm_status gm_cuda_context_begin(struct gm_cuda *cu, int ordinal, struct gm_error *err);
enum gm_status gm_cuda_context_end(struct gm_cuda *cu, struct gm_error *err);

/* The following need a current context (gm_cuda_context_begin()). */
enum gm_status gm_cuda_mem_get_info(struct gm_cuda *cu, uint64_t *free_bytes, uint64_t *total_bytes,
                                    struct gm_error *err);
/* cuMemAlloc_v2; out of device memory is GM_ERR_LIMIT with last result 2. */
enum gm_status gm_cuda_mem_alloc(struct gm_cuda *cu, uint64_t bytes, uint64_t *dptr,
                                 struct gm_error *err);
enum gm_status gm_cuda_mem_free(struct gm_cuda *cu, uint64_t dptr, struct gm_error *err);
enum gm_status gm_cuda_memset_d8(struct gm_cuda *cu, uint64_t dptr, uint8_t value, uint64_t n,
                                 struct gm_error *err);
/* cuMemsetD32_v2: 'n' 32-bit words (e.g. the bits of a float) from 'dptr' (4-byte aligned). */
enum gm_status gm_cuda_memset_d32(struct gm_cuda *cu, uint64_t dptr, uint32_t value, uint64_t n,
                                  struct gm_error *err);
/* cuMemcpyDtoD_v2: 'n' bytes between two device buffers. */
enum gm_status gm_cuda_memcpy_dtod(struct gm_cuda *cu, uint64_t dst, uint64_t src, uint64_t n,
                                   struct gm_error *err);
enum gm_status gm_cuda_memcpy_htod(struct gm_cuda *cu, uint64_t dst, const void *src, uint64_t n,
                                   struct gm_error *err);
enum gm_status gm_cuda_memcpy_dtoh(struct gm_cuda *cu, void *dst, uint64_t src, uint64_t n,
                                   struct gm_error *err);

/* Load NUL-terminated PTX text with cuModuleLoadDataEx; a JIT failure puts the driver's
 * error log into 'err'.  Release with gm_cuda_module_unload(). */
enum gm_status gm_cuda_module_load_ptx(struct gm_cuda *cu, const char *ptx,
                                       struct gm_cuda_module **out, struct gm_error *err);
enum gm_status gm_cuda_module_unload(struct gm_cuda *cu, struct gm_cuda_module *m,
                                     struct gm_error *err);
/* The kernel 'name' (its .entry name) of module 'm'; borrowed, valid until the module is
 * unloaded. */
enum gm_status gm_cuda_module_function(struct gm_cuda *cu, struct gm_cuda_module *m,
                                       const char *name, struct gm_cuda_function **out,
                                       struct gm_error *err);

struct gm_cuda_launch_dims {
    unsigned grid[3];      /* blocks in x, y, z */
    unsigned block[3];     /* threads per block in x, y, z */
    unsigned shared_bytes; /* dynamic shared memory per block */
};

/* cuLaunchKernel on the default stream; params[i] points at the i-th argument's value. */
enum gm_status gm_cuda_launch(struct gm_cuda *cu, struct gm_cuda_function *f,
                              const struct gm_cuda_launch_dims *dims, void **params,
                              struct gm_error *err);
enum gm_status gm_cuda_synchronize(struct gm_cuda *cu, struct gm_error *err);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
