/* SPDX-License-Identifier: MIT */
/* fake_nvml.c - a fake libnvidia-ml.so.1 for tests (driver-abi.md §1.3, §5.2).  Never
 * installed; tests pass its absolute path in GPUMEM_NVML_LIBRARY.
 *
 *   - SONAME libnvidia-ml.so.1; the versioned entry points gpumem binds (nvmlInit_v2,
 *     nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetPciInfo_v3,
 *     nvmlDeviceGetMemoryInfo_v2, ...) and nvmlDeviceGetHandleByUUID (gpumem account).  Legacy
 * names whose semantics or layout differ (nvmlInit, nvmlDeviceGetCount, nvmlDeviceGetHandleByIndex,
 * nvmlDeviceGetPciInfo) print a line on stderr and fail with NVML_ERROR_UNKNOWN.
 *   - nvmlDeviceGetMemoryInfo_v2 insists on version 0x02000028 (else 25,
 *     ARGUMENT_VERSION_MISMATCH) and reports used without reserved; the v1 call's used
 *     includes reserved, as the real driver's does.
 *   - Process lists come from the state file the fake libcuda writes
 *     (GPUMEM_FAKE_STATE), each symbol with its own entry stride: unversioned 16 bytes,
 *     _v2/_v3 24 bytes (32 with GPUMEM_FAKE_STRIDE_BUG=1, like drivers 535.43-535.85).
 *     PIDs are reported plus GPUMEM_FAKE_PID_OFFSET (a container's PID namespace).
 *   - GPUMEM_FAKE_PROC_MEMORY_NA=1: usedGpuMemory is NVML_VALUE_NOT_AVAILABLE (all ones), as
 *     under WDDM or for MIG without privileges.
 *   - GPUMEM_FAKE_GRAPHICS_PID / _BYTES: a process with a graphics context on device 0 (a
 *     display server; default 128MiB), listed by nvmlDeviceGetGraphicsRunningProcesses and
 *     counted in the device's used memory.
 *   - GPUMEM_FAKE_NVML_INIT_ERROR forces nvmlInit_v2's result (9: driver not loaded);
 *     GPUMEM_FAKE_NVML_MEMORY_ERROR forces the memory calls' result (3: a UMA device);
 *     GPUMEM_FAKE_NO_MEMORY_V2=1 makes the v2 call fail so the v1 fallback is used.
 * Other variables (device count, names, memory, driver version) as in fake_cuda.c. */
#include "fake_common.h"

#include <stdio.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999
};

struct nvml_memory_v1 {
    unsigned long long total, free, used;
};

struct nvml_memory_v2 {
    unsigned version;
    unsigned long long total, reserved, free, used;
};

struct nvml_pci_info {
    char bus_id_legacy[16];
    unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
    char bus_id[32];
};

_Static_assert(sizeof(struct nvml_memory_v2) == 40, "nvmlMemory_v2_t is 40 bytes");
_Static_assert(sizeof(struct nvml_pci_info) == 68, "nvmlPciInfo_t is 68 bytes");

static struct fake_config cfg;
static int init_count;

/* Handles encode the device index; nothing is dereferenced. */
static nvmlDevice_t to_handle(int i)
{
    return (nvmlDevice_t)(uintptr_t)(0x6e760000u + (unsigned)i);
}

static int from_handle(nvmlDevice_t d)
{
    uintptr_t v = (uintptr_t)d;
    if (!init_count || v < 0x6e760000u || v >= 0x6e760000u + (unsigned)cfg.n_devices)
        return -1;
    return (int)(v - 0x6e760000u);
}

static void legacy(const char *name, const char *use)
{
    fprintf(stderr, "fake NVML: legacy symbol %s called; bind %s instead\n", name, use);
}

FAKE_API nvmlReturn_t nvmlInit_v2(void)
{
    struct fake_config c;
    /* read aside: another thread may be reading the configuration (it never passes
     * through zeros) */
    fake_config_load(&c);
    cfg = c;
    if (cfg.nvml_init_error)
        return cfg.nvml_init_error;
    init_count++;
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlInit(void)
{
    legacy("nvmlInit", "nvmlInit_v2");
    return NVML_ERROR_UNKNOWN;
}

FAKE_API nvmlReturn_t nvmlShutdown(void)
{
    if (!init_count)
        return NVML_ERROR_UNINITIALIZED;
    init_count--;
    return NVML_SUCCESS;
}

FAKE_API const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case 0:
        return "Success";
    case 1:
        return "Uninitialized";
    case 2:
        return "Invalid Argument";
    case 3:
        return "Not Supported";
    case 7:
        return "Insufficient Size";
    case 9:
        return "Driver Not Loaded";
    case 12:
        return "NVML Shared Library Not Found";
    case 18:
        return "RM has detected an NVML/RM version mismatch.";
    case 25:
        return "Argument version mismatch";
    default:
        return "Unknown Error";
    }
}

FAKE_API nvmlReturn_t nvmlSystemGetDriverVersion(char *buf, unsigned len)
{
    if (!init_count)
        return NVML_ERROR_UNINITIALIZED;
    if (!buf || len < strlen(cfg.driver) + 1)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(buf, len, "%s", cfg.driver);
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlSystemGetNVMLVersion(char *buf, unsigned len)
{
    if (!init_count)
        return NVML_ERROR_UNINITIALIZED;
    if (!buf || len < strlen(cfg.driver) + 4)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(buf, len, "%d.%s", cfg.cuda_version / 1000, cfg.driver);
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    if (!init_count)
        return NVML_ERROR_UNINITIALIZED;
    *v = cfg.cuda_version;
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v)
{
    return nvmlSystemGetCudaDriverVersion_v2(v);
}

FAKE_API nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n)
{
    if (!init_count)
        return NVML_ERROR_UNINITIALIZED;
    *n = (unsigned)cfg.n_devices;
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetCount(unsigned *n)
{
    (void)n;
    legacy("nvmlDeviceGetCount", "nvmlDeviceGetCount_v2");
    return NVML_ERROR_UNKNOWN;
}

FAKE_API nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t *d)
{
    if (!init_count)
        return NVML_ERROR_UNINITIALIZED;
    if (i >= (unsigned)cfg.n_devices || !d)
        return NVML_ERROR_INVALID_ARGUMENT;
    *d = to_handle((int)i);
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned i, nvmlDevice_t *d)
{
    (void)i;
    (void)d;
    legacy("nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2");
    return NVML_ERROR_UNKNOWN;
}

FAKE_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d)
{
    if (!init_count)
        return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !d)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < cfg.n_devices; i++) {
        char u[96];
        fake_uuid_string(i, u, sizeof(u));
        if (!strcmp(u, uuid)) {
            *d = to_handle(i);
            return NVML_SUCCESS;
        }
    }
    return 6; /* NVML_ERROR_NOT_FOUND */
}

FAKE_API nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned len)
{
    int i = from_handle(d);
    if (i < 0 || !buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (len < strlen(cfg.name[i]) + 1)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(buf, len, "%s", cfg.name[i]);
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned len)
{
    int i = from_handle(d);
    if (i < 0 || !buf)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (len < 41)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    fake_uuid_string(i, buf, len);
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, struct nvml_pci_info *p)
{
    int i = from_handle(d);
    if (i < 0 || !p)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(p, 0, sizeof(*p));
    p->bus = fake_pci_bus(i);
    p->pci_device_id = 0x20b210deu;
    snprintf(p->bus_id_legacy, sizeof(p->bus_id_legacy), "0000:%02X:00.0", p->bus);
    snprintf(p->bus_id, sizeof(p->bus_id), "00000000:%02X:00.0", p->bus);
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, void *p)
{
    (void)d;
    (void)p;
    legacy("nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v3");
    return NVML_ERROR_UNKNOWN;
}

FAKE_API nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor)
{
    if (from_handle(d) < 0 || !major || !minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    *major = cfg.cc_major;
    *minor = cfg.cc_minor;
    return NVML_SUCCESS;
}

/* used (without reserved) on device i: every listed process plus the base load. */
static unsigned long long used_of(int i)
{
    unsigned long long used = cfg.base_used + fake_state_device_used(cfg.state, i);
    if (i == 0 && cfg.graphics_pid)
        used += cfg.graphics_bytes;
    unsigned long long cap = cfg.total[i] - cfg.reserved[i];
    return used < cap ? used : cap;
}

FAKE_API nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, struct nvml_memory_v2 *m)
{
    int i = from_handle(d);
    if (i < 0 || !m)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (m->version != (unsigned)(sizeof(*m) | (2u << 24)))
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (cfg.nvml_memory_error)
        return cfg.nvml_memory_error;
    if (cfg.no_memory_v2)
        return NVML_ERROR_NOT_SUPPORTED;
    m->total = cfg.total[i];
    m->reserved = cfg.reserved[i];
    m->used = used_of(i);
    m->free = m->total - m->reserved - m->used;
    return NVML_SUCCESS;
}

FAKE_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, struct nvml_memory_v1 *m)
{
    int i = from_handle(d);
    if (i < 0 || !m)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (cfg.nvml_memory_error)
        return cfg.nvml_memory_error;
    m->total = cfg.total[i];
    m->used = used_of(i) + cfg.reserved[i];
    m->free = m->total - m->used;
    return NVML_SUCCESS;
}

/* Write 'n' process entries of 'stride' bytes, each starting {u32 pid; pad; u64
 * usedGpuMemory} (the rest, instance ids, zero), honouring the size-query contract. */
static nvmlReturn_t write_list(const struct fake_slot *slots, unsigned n, unsigned *count,
                               void *infos, size_t stride)
{
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    if (!infos && n)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned k = 0; k < n; k++) {
        unsigned char *e = (unsigned char *)infos + k * stride;
        unsigned pid = (unsigned)slots[k].pid + cfg.pid_offset;
        unsigned long long used = cfg.proc_mem_na ? ~0ull : slots[k].used + slots[k].ctx;
        memset(e, 0, stride);
        memcpy(e, &pid, sizeof(pid));
        memcpy(e + 8, &used, sizeof(used));
    }
    *count = n;
    return NVML_SUCCESS;
}

/* The compute process list of device 'd': the processes of the state file.  A list handed
 * out is counted in the state file under the same lock as it was read, so a count that rose
 * after a change means a list read after that change. */
static nvmlReturn_t processes(nvmlDevice_t d, unsigned *count, void *infos, size_t stride)
{
    struct fake_slot slots[FAKE_STATE_SLOTS];
    unsigned n = 0;
    size_t got;
    nvmlReturn_t rc;
    int i = from_handle(d), fd;

    if (i < 0 || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    fd = fake_state_lock(cfg.state, true);
    got = fake_state_live(fd, slots, FAKE_STATE_SLOTS);
    for (size_t k = 0; k < got; k++)
        if (slots[k].device == i)
            slots[n++] = slots[k];
    rc = write_list(slots, n, count, infos, stride);
    if (rc == NVML_SUCCESS)
        fake_state_count_read(fd, i);
    fake_state_unlock(fd);
    return rc;
}

/* The graphics list: GPUMEM_FAKE_GRAPHICS_PID on device 0 (a display server). When that
 * PID also uses the fake CUDA, the real driver reports one figure for the process: the
 * same total in both lists. */
static nvmlReturn_t graphics(nvmlDevice_t d, unsigned *count, void *infos, size_t stride)
{
    struct fake_slot g;
    int i = from_handle(d);
    if (i < 0 || !count)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(&g, 0, sizeof(g));
    g.pid = cfg.graphics_pid;
    g.used = cfg.graphics_bytes;
    return write_list(&g, i == 0 && cfg.graphics_pid ? 1 : 0, count, infos, stride);
}

/* Built with FAKE_NVML_NO_V1_PROCESSES, the library lacks the unversioned entry point, so
 * gpumem must use _v3/_v2 and probe their stride. */
#ifndef FAKE_NVML_NO_V1_PROCESSES
FAKE_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned *count,
                                                           void *infos)
{
    return processes(d, count, infos, 16);
}
#endif

FAKE_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned *count,
                                                              void *infos)
{
    return processes(d, count, infos, cfg.stride_bug ? 32 : 24);
}

FAKE_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned *count,
                                                              void *infos)
{
    return processes(d, count, infos, cfg.stride_bug ? 32 : 24);
}

FAKE_API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned *count,
                                                            void *infos)
{
    return graphics(d, count, infos, 16);
}

FAKE_API nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned *count,
                                                               void *infos)
{
    return graphics(d, count, infos, cfg.stride_bug ? 32 : 24);
}
