/* SPDX-License-Identifier: MIT */
/* readings.c - how much of a device is used, read three ways, and the facts of a device.
 *
 *   NVML usedGpuMemory of this process (nvmlDeviceGetComputeRunningProcesses, 16-byte v1
 *     entries; _v3/_v2 with 24-byte ones where v1 is missing): what nvidia-smi shows for the
 *     process, the left side of the equation.  A process in a PID namespace is listed under
 *     its host PID: then it is not found, and
 *   NVML device used (nvmlDeviceGetMemoryInfo_v2, v1 as fallback) less a baseline read
 *     before the process's first context stands in for it;
 *   cuMemGetInfo_v2 (total - free, the whole device) in the calling thread's context: cheap,
 *     but other processes move it; used around module loads and graph instantiation only
 *     where NVML does not list the process.
 *
 * NVML is loaded with dlopen (GPUMEM_NVML_LIBRARY, else libnvidia-ml.so.1) at activation and
 * its symbols bound from a table; the driver's functions come from the driver (resolve.c). */
#define _GNU_SOURCE
#include "preload.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvmlReturn_t;

struct nvml_memory_v2 {
    unsigned version;
    unsigned long long total, reserved, free, used;
};
struct nvml_memory_v1 {
    unsigned long long total, free, used;
};
_Static_assert(sizeof(struct nvml_memory_v2) == 40, "nvmlMemory_v2_t is 40 bytes");

static struct {
    void *lib;
    bool ok;
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*by_uuid)(const char *, void **);
    nvmlReturn_t (*memory_v2)(void *, struct nvml_memory_v2 *);
    nvmlReturn_t (*memory_v1)(void *, struct nvml_memory_v1 *);
    nvmlReturn_t (*procs_v1)(void *, unsigned *, void *); /* 16-byte entries */
    nvmlReturn_t (*procs_v3)(void *, unsigned *, void *); /* 24-byte entries */
} nvml;

static const struct {
    const char *names[2];
    size_t offset;
    bool required;
} nvml_syms[] = {
    {{"nvmlInit_v2", NULL}, offsetof(__typeof__(nvml), init), true},
    {{"nvmlShutdown", NULL}, offsetof(__typeof__(nvml), shutdown), true},
    {{"nvmlDeviceGetHandleByUUID", NULL}, offsetof(__typeof__(nvml), by_uuid), true},
    {{"nvmlDeviceGetMemoryInfo_v2", NULL}, offsetof(__typeof__(nvml), memory_v2), false},
    {{"nvmlDeviceGetMemoryInfo", NULL}, offsetof(__typeof__(nvml), memory_v1), false},
    {{"nvmlDeviceGetComputeRunningProcesses", NULL}, offsetof(__typeof__(nvml), procs_v1), false},
    {{"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"},
     offsetof(__typeof__(nvml), procs_v3),
     false},
};

bool acct_nvml_open(void)
{
    const char *path = getenv("GPUMEM_NVML_LIBRARY");
    if (nvml.ok)
        return true;
    nvml.lib = dlopen(path && *path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nvml.lib)
        return false;
    for (size_t i = 0; i < sizeof(nvml_syms) / sizeof(nvml_syms[0]); i++) {
        void *p = NULL;
        for (int k = 0; k < 2 && nvml_syms[i].names[k] && !p; k++)
            p = acct_real_dlsym(nvml.lib, nvml_syms[i].names[k]);
        if (!p && nvml_syms[i].required)
            return false;
        memcpy((char *)&nvml + nvml_syms[i].offset, &p, sizeof(p));
    }
    if ((!nvml.procs_v1 && !nvml.procs_v3) || nvml.init() != 0)
        return false;
    nvml.ok = true;
    return true;
}

void acct_nvml_close(void)
{
    if (nvml.ok)
        nvml.shutdown();
    nvml.ok = false;
}

/* This process's usedGpuMemory on NVML device 'h': false when it is not listed (or NVML
 * says the figure is not available). */
static bool nvml_process(void *h, uint64_t *used)
{
    unsigned char stack[64 * 24], *buf = stack;
    unsigned n = 64, stride = nvml.procs_v1 ? 16 : 24;
    nvmlReturn_t (*fn)(void *, unsigned *, void *) = nvml.procs_v1 ? nvml.procs_v1 : nvml.procs_v3;
    nvmlReturn_t r = fn(h, &n, buf);
    bool found = false;
    uint32_t me = (uint32_t)getpid();
    if (r == 7 /* INSUFFICIENT_SIZE */) {
        n += 16;
        if (!(buf = malloc((size_t)n * stride)))
            return false;
        r = fn(h, &n, buf);
    }
    for (unsigned i = 0; r == 0 && i < n && !found; i++) {
        uint32_t pid;
        uint64_t u;
        memcpy(&pid, buf + (size_t)i * stride, sizeof(pid));
        memcpy(&u, buf + (size_t)i * stride + 8, sizeof(u));
        if (pid == me && u != ~0ull) {
            *used = u;
            found = true;
        }
    }
    if (buf != stack)
        free(buf);
    return found;
}

static bool nvml_device_used(void *h, uint64_t *used)
{
    if (nvml.memory_v2) {
        struct nvml_memory_v2 m;
        memset(&m, 0, sizeof(m));
        m.version = (unsigned)(sizeof(m) | (2u << 24));
        if (nvml.memory_v2(h, &m) == 0) {
            *used = m.used;
            return true;
        }
    }
    if (nvml.memory_v1) {
        struct nvml_memory_v1 m;
        if (nvml.memory_v1(h, &m) == 0) {
            *used = m.used;
            return true;
        }
    }
    return false;
}

/* ---- the driver ---- */

typedef CUresult (*fn_ctx_get_device)(CUdevice *);
typedef CUresult (*fn_mem_get_info)(size_t *, size_t *);
typedef CUresult (*fn_uuid)(unsigned char *, CUdevice);
typedef CUresult (*fn_name)(char *, int, CUdevice);
typedef CUresult (*fn_total)(size_t *, CUdevice);
typedef CUresult (*fn_granularity)(size_t *, const void *, int);

#define DRIVER_FN(type, name) __extension__((type)acct_driver_sym(name))

int acct_current_device(void)
{
    static _Atomic(fn_ctx_get_device) f;
    fn_ctx_get_device g = atomic_load_explicit(&f, memory_order_relaxed);
    CUdevice d;
    if (!g) {
        g = DRIVER_FN(fn_ctx_get_device, "cuCtxGetDevice");
        atomic_store(&f, g);
    }
    return g && g(&d) == ACCT_CUDA_SUCCESS ? d : -1;
}

static bool mem_get_info(uint64_t *used)
{
    static _Atomic(fn_mem_get_info) f;
    fn_mem_get_info g = atomic_load_explicit(&f, memory_order_relaxed);
    size_t fr, total;
    if (!g) {
        g = DRIVER_FN(fn_mem_get_info, "cuMemGetInfo_v2");
        atomic_store(&f, g);
    }
    if (!g || g(&fr, &total) != ACCT_CUDA_SUCCESS || fr > total)
        return false;
    *used = (uint64_t)(total - fr);
    return true;
}

struct acct_device *acct_device(int dev)
{
    struct acct_device *d;
    int expected = 0;
    unsigned char u[16];
    fn_uuid uuid;
    fn_name name;
    fn_total total;
    fn_granularity gran;
    if (dev < 0 || dev >= ACCT_MAX_DEV)
        return NULL;
    d = &account.dev[dev];
    if (atomic_load_explicit(&d->ready, memory_order_acquire) == 2 ||
        !atomic_compare_exchange_strong(&d->ready, &expected, 1))
        return d; /* ready, or another thread fills it: the counters need none of it */
    uuid = DRIVER_FN(fn_uuid, "cuDeviceGetUuid_v2");
    if (!uuid)
        uuid = DRIVER_FN(fn_uuid, "cuDeviceGetUuid");
    if (uuid && uuid(u, dev) == ACCT_CUDA_SUCCESS)
        snprintf(d->uuid, sizeof(d->uuid),
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
                 u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
                 u[14], u[15]);
    name = DRIVER_FN(fn_name, "cuDeviceGetName");
    if (!name || name(d->name, (int)sizeof(d->name), dev) != ACCT_CUDA_SUCCESS)
        d->name[0] = '\0';
    total = DRIVER_FN(fn_total, "cuDeviceTotalMem_v2");
    {
        size_t t = 0;
        if (total && total(&t, dev) == ACCT_CUDA_SUCCESS)
            d->total = t;
    }
    gran = DRIVER_FN(fn_granularity, "cuMemGetAllocationGranularity");
    {
        /* CUmemAllocationProp: pinned device memory on 'dev'; the minimum granularity */
        int prop[8] = {1 /* PINNED */, 0, 1 /* LOCATION_TYPE_DEVICE */, dev, 0, 0, 0, 0};
        size_t g = 0;
        d->gran_measured = gran && gran(&g, prop, 0) == ACCT_CUDA_SUCCESS && g;
        d->gran = d->gran_measured ? g : (uint64_t)2 << 20;
    }
    if (nvml.ok && d->uuid[0] && nvml.by_uuid(d->uuid, &d->nvml) != 0)
        d->nvml = NULL;
    atomic_store_explicit(&d->ready, 2, memory_order_release);
    return d;
}

void acct_read(struct acct_device *d, bool with_nvml, bool with_info, struct acct_reading *r)
{
    memset(r, 0, sizeof(*r));
    if (with_nvml && nvml.ok && d && d->nvml) {
        r->proc_valid = nvml_process(d->nvml, &r->proc);
        r->dev_valid = nvml_device_used(d->nvml, &r->dev);
    }
    if (with_info)
        r->info_valid = mem_get_info(&r->info);
}

bool acct_read_used(struct acct_device *d, uint64_t *used)
{
    struct acct_reading r;
    switch (atomic_load(&d->used_source)) {
    case GM_ACCOUNT_READING_NVML_PROCESS:
        acct_read(d, true, false, &r);
        /* not listed: the process holds nothing there any more */
        *used = r.proc_valid ? r.proc : 0;
        return r.dev_valid;
    case GM_ACCOUNT_READING_NVML_DEVICE:
        acct_read(d, true, false, &r);
        if (!r.dev_valid || !d->baseline_valid)
            return false;
        *used = r.dev > d->baseline ? r.dev - d->baseline : 0;
        return true;
    default:
        return false;
    }
}

uint64_t acct_cost(struct acct_device *d, const struct acct_reading *before,
                   const struct acct_reading *after, enum gm_account_reading *source)
{
    uint64_t b;
    if (after->proc_valid) {
        b = before->proc_valid ? before->proc : 0;
        *source = GM_ACCOUNT_READING_NVML_PROCESS;
        if (d)
            atomic_store(&d->used_source, GM_ACCOUNT_READING_NVML_PROCESS);
        return after->proc > b ? after->proc - b : 0;
    }
    if (after->dev_valid && before->dev_valid) {
        *source = GM_ACCOUNT_READING_NVML_DEVICE;
        if (d && !d->baseline_valid && atomic_load(&d->used_source) == GM_ACCOUNT_READING_NONE) {
            /* NVML does not list us (a PID namespace): the device's growth is ours */
            d->baseline = before->dev;
            d->baseline_valid = true;
            atomic_store(&d->used_source, GM_ACCOUNT_READING_NVML_DEVICE);
        }
        return after->dev > before->dev ? after->dev - before->dev : 0;
    }
    if (after->info_valid && before->info_valid) {
        *source = GM_ACCOUNT_READING_MEM_GET_INFO;
        return after->info > before->info ? after->info - before->info : 0;
    }
    *source = GM_ACCOUNT_READING_NONE;
    return 0;
}
