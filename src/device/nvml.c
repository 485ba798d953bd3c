/* SPDX-License-Identifier: MIT */
/* nvml.c - the "nvml" backend: dlopen("libnvidia-ml.so.1"), versions, devices, memory and
 * per-process usage.
 *
 * Our own declarations (driver-abi.md §1.3), no nvml.h.  Layouts (LP64):
 *   nvmlMemory_t        {u64 total, free, used}                         24 B (used includes
 * reserved) nvmlMemory_v2_t     {u32 version; pad; u64 total, reserved, free, used}  40 B, version
 * 0x02000028 nvmlPciInfo_t (v3)  {char busIdLegacy[16]; u32 domain, bus, device, pciDeviceId,
 *                        pciSubSystemId; char busId[32]}               68 B
 *   nvmlProcessInfo_v1  {u32 pid; pad; u64 usedGpuMemory}               16 B (unversioned symbol)
 *   nvmlProcessInfo_v2  v1 + {u32 gpuInstanceId, computeInstanceId}     24 B (_v2 and _v3 symbols;
 *                        32 B on drivers 535.43-535.85, found by probing the stride)
 * Process lists use the unversioned (v1, 16-byte) entry point as PyTorch does; when a
 * driver lacks it, _v3/_v2 with the stride probe.  Compute and graphics lists are merged
 * by PID (nvidia-smi's "C", "G", "C+G"). */
#include "device/device_int.h"

#include "gpumem/arena.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

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

struct nvml_process_v1 {
    unsigned pid;
    unsigned long long used;
};

_Static_assert(sizeof(struct nvml_memory_v2) == 40, "nvmlMemory_v2_t is 40 bytes");
_Static_assert(sizeof(struct nvml_pci_info) == 68, "nvmlPciInfo_t is 68 bytes");
_Static_assert(sizeof(struct nvml_process_v1) == 16, "nvmlProcessInfo_v1_t is 16 bytes");

#define NVML_MEMORY_V2_VERSION       (unsigned)(sizeof(struct nvml_memory_v2) | (2u << 24))
#define NVML_VALUE_NOT_AVAILABLE     0xFFFFFFFFFFFFFFFFull
#define NVML_SUCCESS                 0
#define NVML_ERROR_NOT_SUPPORTED     3
#define NVML_ERROR_INSUFFICIENT_SIZE 7

struct nvml_api {
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    const char *(*error_string)(nvmlReturn_t r);
    nvmlReturn_t (*system_driver_version)(char *buf, unsigned len);
    nvmlReturn_t (*system_nvml_version)(char *buf, unsigned len);
    nvmlReturn_t (*system_cuda_version)(int *v);
    nvmlReturn_t (*device_count)(unsigned *n);
    nvmlReturn_t (*device_by_index)(unsigned i, nvmlDevice_t *d);
    nvmlReturn_t (*device_name)(nvmlDevice_t d, char *buf, unsigned len);
    nvmlReturn_t (*device_uuid)(nvmlDevice_t d, char *buf, unsigned len);
    nvmlReturn_t (*device_pci_info)(nvmlDevice_t d, struct nvml_pci_info *p);
    nvmlReturn_t (*device_cc)(nvmlDevice_t d, int *major, int *minor);
    nvmlReturn_t (*device_memory_v2)(nvmlDevice_t d, struct nvml_memory_v2 *m);
    nvmlReturn_t (*device_memory_v1)(nvmlDevice_t d, struct nvml_memory_v1 *m);
    nvmlReturn_t (*device_procs_v1)(nvmlDevice_t d, unsigned *count, void *infos);
    nvmlReturn_t (*device_procs_v23)(nvmlDevice_t d, unsigned *count, void *infos);
    nvmlReturn_t (*device_gfx_v1)(nvmlDevice_t d, unsigned *count, void *infos);
    nvmlReturn_t (*device_gfx_v23)(nvmlDevice_t d, unsigned *count, void *infos);
};

#define SYM(field, req, ...)                                                                       \
    {                                                                                              \
        {__VA_ARGS__}, offsetof(struct nvml_api, field), req                                       \
    }
static const struct gm_dl_sym nvml_syms[] = {
    SYM(init, true, "nvmlInit_v2", "nvmlInit"),
    SYM(shutdown, true, "nvmlShutdown"),
    SYM(error_string, false, "nvmlErrorString"),
    SYM(system_driver_version, false, "nvmlSystemGetDriverVersion"),
    SYM(system_nvml_version, false, "nvmlSystemGetNVMLVersion"),
    SYM(system_cuda_version, false, "nvmlSystemGetCudaDriverVersion_v2",
        "nvmlSystemGetCudaDriverVersion"),
    SYM(device_count, true, "nvmlDeviceGetCount_v2"),
    SYM(device_by_index, true, "nvmlDeviceGetHandleByIndex_v2"),
    SYM(device_name, false, "nvmlDeviceGetName"),
    SYM(device_uuid, false, "nvmlDeviceGetUUID"),
    SYM(device_pci_info, false, "nvmlDeviceGetPciInfo_v3"),
    SYM(device_cc, false, "nvmlDeviceGetCudaComputeCapability"),
    SYM(device_memory_v2, false, "nvmlDeviceGetMemoryInfo_v2"),
    SYM(device_memory_v1, false, "nvmlDeviceGetMemoryInfo"),
    SYM(device_procs_v1, false, "nvmlDeviceGetComputeRunningProcesses"),
    SYM(device_procs_v23, false, "nvmlDeviceGetComputeRunningProcesses_v3",
        "nvmlDeviceGetComputeRunningProcesses_v2"),
    SYM(device_gfx_v1, false, "nvmlDeviceGetGraphicsRunningProcesses"),
    SYM(device_gfx_v23, false, "nvmlDeviceGetGraphicsRunningProcesses_v3",
        "nvmlDeviceGetGraphicsRunningProcesses_v2"),
};
#undef SYM

struct nvml_ctx {
    void *dl;
    struct nvml_api api;
    unsigned n_devices;
};

static const char *nvml_err(const struct nvml_ctx *c, nvmlReturn_t r)
{
    const char *s = c->api.error_string ? c->api.error_string(r) : NULL;
    return s ? s : "NVML error";
}

static void *nvml_open(struct gm_backend_status *s, struct gm_driver_versions *v, gm_env_fn env)
{
    struct nvml_ctx *c = gm_calloc(1, sizeof(*c));
    char why[512], missing[64];
    nvmlReturn_t r;
    int cv = 0;

    if (!c) {
        s->state = GM_BACKEND_ERROR;
        gm_strlcpy(s->msg, "out of memory", sizeof(s->msg));
        return NULL;
    }
    c->dl = gm_dl_open(env, "GPUMEM_NVML_LIBRARY", "libnvidia-ml.so.1", s->library,
                       sizeof(s->library), why, sizeof(why));
    if (!c->dl) {
        s->state = GM_BACKEND_MISSING;
        snprintf(s->msg, sizeof(s->msg),
                 "no NVIDIA driver: the NVML library could not be loaded (%.190s)", why);
        gm_free(c);
        return NULL;
    }
    if (!gm_dl_bind(c->dl, nvml_syms, sizeof(nvml_syms) / sizeof(nvml_syms[0]), &c->api, missing,
                    sizeof(missing))) {
        s->state = GM_BACKEND_ERROR;
        snprintf(s->msg, sizeof(s->msg), "%.150s does not export %.60s: the driver is too old",
                 s->library, missing);
        gm_free(c);
        return NULL;
    }
    r = c->api.init();
    if (r != NVML_SUCCESS) {
        s->driver_code = r;
        /* ecosystem.md §3.4: these mean "no GPU"; anything else is an NVML failure. */
        if (r == 9 || r == 12 || r == 18 || r == 28)
            s->state = GM_BACKEND_NODEV;
        else
            s->state = GM_BACKEND_ERROR;
        snprintf(s->msg, sizeof(s->msg), "%s (nvmlInit_v2 returned %d, %s)",
                 r == 9    ? "the NVIDIA kernel driver is not loaded"
                 : r == 12 ? "NVML could not find the driver library"
                 : r == 18 ? "the NVML library and the kernel driver versions differ"
                 : r == 28 ? "no NVIDIA GPU was found"
                           : "NVML failed to initialise",
                 r, nvml_err(c, r));
        gm_free(c);
        return NULL;
    }
    r = c->api.device_count(&c->n_devices);
    if (r != NVML_SUCCESS || c->n_devices == 0) {
        s->driver_code = r;
        s->state = r == NVML_SUCCESS ? GM_BACKEND_NODEV : GM_BACKEND_ERROR;
        if (r == NVML_SUCCESS)
            gm_strlcpy(s->msg, "no NVIDIA GPU: NVML reports 0 devices", sizeof(s->msg));
        else
            snprintf(s->msg, sizeof(s->msg), "nvmlDeviceGetCount_v2 failed: %s (%d)",
                     nvml_err(c, r), r);
        c->api.shutdown();
        gm_free(c);
        return NULL;
    }
    if (c->api.system_driver_version)
        c->api.system_driver_version(v->driver, sizeof(v->driver));
    v->driver[sizeof(v->driver) - 1] = '\0';
    if (c->api.system_nvml_version)
        c->api.system_nvml_version(v->nvml, sizeof(v->nvml));
    v->nvml[sizeof(v->nvml) - 1] = '\0';
    if (c->api.system_cuda_version && c->api.system_cuda_version(&cv) == NVML_SUCCESS) {
        v->nvml_cuda_version = cv;
        v->nvml_cuda_version_valid = true;
    }
    s->state = GM_BACKEND_OK;
    return c;
}

static void nvml_close(void *ctx)
{
    struct nvml_ctx *c = ctx;
    if (!c)
        return;
    c->api.shutdown();
    /* Like libcuda, the driver library stays mapped: NVML keeps threads of its own. */
    gm_free(c);
}

static int nvml_count(void *ctx)
{
    struct nvml_ctx *c = ctx;
    return (int)c->n_devices;
}

static enum gm_status handle(struct nvml_ctx *c, int i, nvmlDevice_t *d, struct gm_error *err)
{
    nvmlReturn_t r;
    if (i < 0 || (unsigned)i >= c->n_devices)
        return gm_fail(err, GM_ERR_NODEV, GM_NO_OFFSET, "NVML device %d is out of range", i);
    r = c->api.device_by_index((unsigned)i, d);
    if (r != NVML_SUCCESS)
        return gm_fail(err, GM_ERR_DRIVER, GM_NO_OFFSET,
                       "nvmlDeviceGetHandleByIndex_v2(%d) failed: %s (%d)", i, nvml_err(c, r), r);
    return GM_OK;
}

static enum gm_status nvml_info(void *ctx, int i, struct gm_device_info *out, struct gm_error *err)
{
    struct nvml_ctx *c = ctx;
    struct nvml_pci_info pci;
    nvmlDevice_t d;
    enum gm_status st;

    memset(out, 0, sizeof(*out));
    out->cuda_index = -1;
    out->nvml_index = i;
    st = handle(c, i, &d, err);
    if (st)
        return st;
    if (c->api.device_name && c->api.device_name(d, out->name, sizeof(out->name)) != NVML_SUCCESS)
        out->name[0] = '\0';
    out->name[sizeof(out->name) - 1] = '\0';
    if (c->api.device_uuid && c->api.device_uuid(d, out->uuid, sizeof(out->uuid)) != NVML_SUCCESS)
        out->uuid[0] = '\0';
    out->uuid[sizeof(out->uuid) - 1] = '\0';
    memset(&pci, 0, sizeof(pci));
    if (c->api.device_pci_info && c->api.device_pci_info(d, &pci) == NVML_SUCCESS) {
        pci.bus_id[sizeof(pci.bus_id) - 1] = '\0';
        if (!gm_pci_normalise(pci.bus_id, out->pci_bus_id, sizeof(out->pci_bus_id)))
            gm_strlcpy(out->pci_bus_id, pci.bus_id, sizeof(out->pci_bus_id));
    }
    if (c->api.device_cc && c->api.device_cc(d, &out->cc_major, &out->cc_minor) == NVML_SUCCESS)
        out->cc_valid = true;
    return GM_OK;
}

static struct gm_reading reading(unsigned long long v)
{
    if (v == NVML_VALUE_NOT_AVAILABLE)
        return GM_READING_NONE;
    return (struct gm_reading){v, true};
}

static enum gm_status nvml_memory(void *ctx, int i, struct gm_device_memory *out,
                                  struct gm_error *err)
{
    struct nvml_ctx *c = ctx;
    nvmlDevice_t d;
    nvmlReturn_t r = NVML_ERROR_NOT_SUPPORTED;
    enum gm_status st;

    memset(out, 0, sizeof(*out));
    st = handle(c, i, &d, err);
    if (st)
        return st;
    if (c->api.device_memory_v2) {
        struct nvml_memory_v2 m;
        memset(&m, 0, sizeof(m));
        /* The version is the struct size plus 2 << 24, not plain 2 (nvml.h NVML_STRUCT_VERSION). */
        m.version = NVML_MEMORY_V2_VERSION;
        r = c->api.device_memory_v2(d, &m);
        if (r == NVML_SUCCESS) {
            out->total = reading(m.total);
            out->reserved = reading(m.reserved);
            out->free = reading(m.free);
            out->used = reading(m.used);
            out->source = GM_MEMORY_NVML_V2;
            return GM_OK;
        }
    }
    if (c->api.device_memory_v1) {
        struct nvml_memory_v1 m;
        memset(&m, 0, sizeof(m));
        r = c->api.device_memory_v1(d, &m);
        if (r == NVML_SUCCESS) {
            out->total = reading(m.total);
            out->free = reading(m.free);
            out->used = reading(m.used);
            out->source = GM_MEMORY_NVML_V1;
            return GM_OK;
        }
    }
    if (r == NVML_ERROR_NOT_SUPPORTED)
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "NVML cannot read the memory of device %d (not supported: an integrated, "
                       "unified-memory GPU?)",
                       i);
    return gm_fail(err, GM_ERR_DRIVER, GM_NO_OFFSET, "nvmlDeviceGetMemoryInfo failed: %s (%d)",
                   nvml_err(c, r), r);
}

/* Entry stride of a _v2/_v3 process list: 24 bytes, or 32 on drivers 535.43-535.85.  The
 * buffer was filled with 0xAA before the call; the last byte the driver wrote tells. */
static size_t probe_stride(const unsigned char *buf, size_t len, unsigned count)
{
    size_t last = 0;
    for (size_t k = len; k > 0; k--) {
        if (buf[k - 1] != 0xAA) {
            last = k;
            break;
        }
    }
    return count && last > (size_t)24 * count ? 32 : 24;
}

typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned *, void *);

/* Read one process list ('fn' writes v1 16-byte entries when 'v1', else _v2/_v3 entries of
 * a probed stride) and merge it into out[0..cap) by PID with kind 'kind'; *n counts the
 * distinct processes seen, which may exceed cap. */
static enum gm_status read_list(struct nvml_ctx *c, nvmlDevice_t d, procs_fn fn, bool v1,
                                unsigned kind, const char *what, struct gm_process_memory *out,
                                size_t cap, size_t *n, struct gm_error *err)
{
    size_t entry = v1 ? 16 : 32; /* room for the widest layout */
    unsigned count = 0, alloc_n = 0;
    unsigned char *buf = NULL;
    nvmlReturn_t r = NVML_SUCCESS;

    /* Processes come and go between the size query and the call: retry with headroom. */
    for (int attempt = 0; attempt < 4; attempt++) {
        unsigned want = 0, got;
        r = fn(d, &want, NULL);
        if (r == NVML_SUCCESS)
            return GM_OK; /* no processes */
        if (r != NVML_ERROR_INSUFFICIENT_SIZE)
            break;
        got = want * 2 + 5;
        buf = gm_malloc((size_t)got * entry);
        if (!buf)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "out of memory");
        memset(buf, 0xAA, (size_t)got * entry);
        count = alloc_n = got;
        r = fn(d, &count, buf);
        if (r == NVML_SUCCESS)
            break;
        gm_free(buf);
        buf = NULL;
        if (r != NVML_ERROR_INSUFFICIENT_SIZE)
            break;
    }
    if (r != NVML_SUCCESS)
        return gm_fail(err, GM_ERR_DRIVER, GM_NO_OFFSET, "%s failed: %s (%d)", what, nvml_err(c, r),
                       r);
    if (count > alloc_n)
        count = alloc_n; /* never trust a count past our buffer */
    {
        size_t stride = v1 ? 16 : probe_stride(buf, (size_t)alloc_n * entry, count);
        /* The v1, v2 and v3 layouts all start with {u32 pid; pad; u64 usedGpuMemory}. */
        for (unsigned k = 0; k < count; k++) {
            struct nvml_process_v1 p;
            size_t j, stored = *n < cap ? *n : cap;
            memcpy(&p, buf + (size_t)k * stride, sizeof(p));
            for (j = 0; j < stored && out[j].pid != p.pid; j++) {
            }
            if (j < stored) {
                /* Both lists hold the process ("C+G"): one figure for the process. */
                out[j].kinds |= kind;
                if (!out[j].used.valid)
                    out[j].used = reading(p.used);
                continue;
            }
            if (*n < cap) {
                out[*n].pid = p.pid;
                out[*n].used = reading(p.used);
                out[*n].kinds = kind;
            }
            (*n)++;
        }
    }
    gm_free(buf);
    return GM_OK;
}

static enum gm_status nvml_processes(void *ctx, int i, struct gm_process_memory *out, size_t cap,
                                     size_t *n, struct gm_error *err)
{
    struct nvml_ctx *c = ctx;
    nvmlDevice_t d;
    enum gm_status st;
    struct gm_error ignored;

    *n = 0;
    st = handle(c, i, &d, err);
    if (st)
        return st;
    if (!c->api.device_procs_v1 && !c->api.device_procs_v23)
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "this NVML has no nvmlDeviceGetComputeRunningProcesses");
    st = read_list(c, d, c->api.device_procs_v1 ? c->api.device_procs_v1 : c->api.device_procs_v23,
                   c->api.device_procs_v1 != NULL, GM_PROCESS_COMPUTE,
                   "nvmlDeviceGetComputeRunningProcesses", out, cap, n, err);
    if (st)
        return st;
    /* Graphics contexts (a desktop's display server) hold memory too; a failure here only
     * loses them. */
    if (c->api.device_gfx_v1 || c->api.device_gfx_v23)
        read_list(c, d, c->api.device_gfx_v1 ? c->api.device_gfx_v1 : c->api.device_gfx_v23,
                  c->api.device_gfx_v1 != NULL, GM_PROCESS_GRAPHICS,
                  "nvmlDeviceGetGraphicsRunningProcesses", out, cap, n, &ignored);
    return GM_OK;
}

const struct gm_device_ops gm_nvml_ops = {
    "nvml", nvml_open, nvml_close, nvml_count, nvml_info, nvml_memory, nvml_processes,
};
