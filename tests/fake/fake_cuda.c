/* SPDX-License-Identifier: MIT */
/* fake_cuda.c - a fake libcuda.so.1 for tests: the driver-API subset gpumem binds
 * (driver-abi.md §1.2), backed by host memory.  Never installed; tests pass its absolute
 * path in GPUMEM_CUDA_LIBRARY.
 *
 * Behaviour
 *   - SONAME libcuda.so.1; exports the versioned names (cuMemAlloc_v2, cuMemGetInfo_v2,
 *     cuDeviceTotalMem_v2, ...).  The legacy unversioned names with the 32-bit ABI
 *     (cuMemAlloc, cuMemFree, cuMemGetInfo, cuDeviceTotalMem, cuMemcpyHtoD, cuMemcpyDtoH,
 *     cuMemcpyDtoD, cuMemsetD8, cuMemsetD32, cuCtxCreate, cuCtxDestroy) are exported too, but print
 * a line on stderr and return CUDA_ERROR_NOT_SUPPORTED (801): a wrong binding is caught at once.
 *   - Each allocation is its own mmap(MAP_NORESERVE) mapping: the device pointer is a host
 *     address, untouched "gigabytes" cost no RAM.  Allocations are charged in granules
 *     (default 2 MiB, like the real driver's pages); a retained primary context is charged
 *     GPUMEM_FAKE_CONTEXT_BYTES.  Past the device's capacity: CUDA_ERROR_OUT_OF_MEMORY (2).
 *   - The process's usage (allocations + context) is published in the state file so the
 *     fake NVML of another process (gpumem watch) sees it as usedGpuMemory.
 *   - CUDA_VISIBLE_DEVICES is honoured (a list of physical indices; an empty value hides
 *     every device, so cuInit returns 100).
 *   - Modules: cuModuleLoadDataEx reads just enough PTX: ".version X.Y" (newer than
 *     GPUMEM_FAKE_PTX_ISA gives 222 UNSUPPORTED_PTX_VERSION with a JIT error log; no
 *     .version gives 218 INVALID_PTX) and the ".entry NAME" kernels.  cuLaunchKernel runs
 *     the CPU implementation of a kernel found by name in fake_kernels[] below; a kernel not
 *     in the table is a successful no-op.
 *
 * Adding a kernel (e.g. for gpumem measure): write
 *     static CUresult k_name(const struct fake_launch *l, void **params)
 * where params[i] points at the i-th argument as in cuLaunchKernel (a device pointer
 * argument is a CUdeviceptr, i.e. a host address here), do the work on the CPU over the
 * whole grid (l->grid[] x l->block[] threads), and add {".entry name", k_name} to
 * fake_kernels[].
 *
 * Configuration (environment, read at cuInit; all optional)
 *   GPUMEM_FAKE_DEVICES        device count (default 1; 0: cuInit returns 100)
 *   GPUMEM_FAKE_NAME           names, comma-separated, the last repeats
 *   GPUMEM_FAKE_MEMORY         total per device ("80GiB", comma list)
 *   GPUMEM_FAKE_RESERVED       driver-reserved per device (default 512MiB); CUDA's total
 *                              (cuDeviceTotalMem_v2) is MEMORY - RESERVED
 *   GPUMEM_FAKE_BASE_USED      memory used on every device by nobody we list
 *   GPUMEM_FAKE_CUDA_VERSION   cuDriverGetVersion (default 12040)
 *   GPUMEM_FAKE_CC, _SMS       compute capability "8.0", SM count
 *   GPUMEM_FAKE_CUINIT_ERROR   forced cuInit result: 34 acts as the toolkit stub (then
 *                              cuDriverGetVersion fails with 34 too), 100, 999, ...
 *   GPUMEM_FAKE_OOM_AFTER      cuMemAlloc_v2 fails with 2 after N successful calls (counted
 *                              from the last cuInit)
 *   GPUMEM_FAKE_CONTEXT_BYTES  charge of a primary context (default 300MiB)
 *   GPUMEM_FAKE_GRANULE        allocation charge unit (default 2MiB)
 *   GPUMEM_FAKE_STATE          path of the state file shared with the fake NVML
 *   GPUMEM_FAKE_PTX_ISA        highest PTX ISA accepted (default 8.5)
 *   GPUMEM_FAKE_MODULE_BYTES   charge of each loaded module or library (default 0)
 *   GPUMEM_FAKE_GRAPH_BYTES    charge of each instantiated graph (default 0)
 *
 * The entry points of gpumem account's interposer live beside this file: explicit contexts,
 * limits and cuGetProcAddress in fake_cuda_proc.c; pitch, managed, stream-ordered, VMM and
 * pinned host memory in fake_cuda_mem.c; libraries and graphs in fake_cuda_graph.c.  They
 * share this file's state through fake_cuda_int.h. */
#include "fake_cuda_int.h"
#include "fake_kernels.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- process state ---- */

struct fake_alloc {
    void *p;
    size_t size;     /* requested */
    size_t mapped;   /* mapping length */
    uint64_t charge; /* what the device is charged: granule-rounded, exact, or 0 */
    int device;      /* physical */
    int kind;        /* enum fake_alloc_kind */
};

pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
struct fake_config fake_cfg;
static int initialised;
static int visible[FAKE_MAX_DEV]; /* ordinal -> physical index */
static int n_visible;
struct fake_ctx_st fake_primary[FAKE_MAX_DEV];
__thread struct fake_ctx_st *fake_current;
static struct fake_alloc *allocs;
static size_t n_allocs, cap_allocs;
static uint64_t charged[FAKE_MAX_DEV];
static uint64_t charged_extra[FAKE_MAX_DEV]; /* modules, libraries, graphs, limits */
static uint64_t ctx_extra[FAKE_MAX_DEV];     /* explicit contexts */
static long n_alloc_calls;

#define lock    fake_lock
#define cfg     fake_cfg
#define ctxs    fake_primary
#define current fake_current

static void publish(int dev)
{
    uint64_t ctx = (ctxs[dev].refs > 0 ? cfg.context_bytes : 0) + ctx_extra[dev];
    fake_state_put(cfg.state, (int32_t)getpid(), dev, charged[dev] + charged_extra[dev], ctx);
}

/* The CUDA_VISIBLE_DEVICES list of 'c' into vis[]; returns how many. */
static int parse_visible(const struct fake_config *c, int *vis)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    int n = 0;
    if (!v) {
        for (int i = 0; i < c->n_devices; i++)
            vis[n++] = i;
        return n;
    }
    /* Like the driver: parse indices until the first invalid entry. */
    while (*v && n < FAKE_MAX_DEV) {
        char *end;
        long i = strtol(v, &end, 10);
        if (end == v || i < 0 || i >= c->n_devices)
            break;
        vis[n++] = (int)i;
        v = *end == ',' ? end + 1 : end;
        if (*end != ',')
            break;
    }
    return n;
}

static void legacy(const char *name, const char *use)
{
    fprintf(stderr, "fake libcuda: legacy symbol %s called (32-bit ABI); bind %s instead\n", name,
            use);
}

bool fake_initialised(void)
{
    return initialised;
}

FAKE_API CUresult cuInit(unsigned flags)
{
    CUresult r = CUDA_SUCCESS;
    struct fake_config c;
    int vis[FAKE_MAX_DEV], n = 0;
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* Threads may call cuInit while others use the driver (every runtime thread does): the
     * configuration is read aside and the shared state never passes through zeros. */
    fake_config_load(&c);
    if (c.cuinit_error)
        r = c.cuinit_error;
    else if ((n = parse_visible(&c, vis)) == 0)
        r = CUDA_ERROR_NO_DEVICE;
    pthread_mutex_lock(&lock);
    cfg = c;
    memcpy(visible, vis, sizeof(vis));
    n_visible = n;
    initialised = r == CUDA_SUCCESS;
    n_alloc_calls = 0; /* GPUMEM_FAKE_OOM_AFTER counts from the (last) cuInit */
    pthread_mutex_unlock(&lock);
    return r;
}

FAKE_API CUresult cuDriverGetVersion(int *v)
{
    struct fake_config c;
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    fake_config_load(&c);
    if (c.cuinit_error == 34)
        return 34; /* the toolkit stub fails this one too */
    *v = c.cuda_version;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGetCount(int *n)
{
    NEED_INIT();
    if (!n)
        return CUDA_ERROR_INVALID_VALUE;
    *n = n_visible;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGet(CUdevice *d, int ordinal)
{
    NEED_INIT();
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal < 0 || ordinal >= n_visible)
        return CUDA_ERROR_INVALID_DEVICE;
    *d = ordinal;
    return CUDA_SUCCESS;
}

int fake_phys(CUdevice d)
{
    return d >= 0 && d < n_visible ? visible[d] : -1;
}

int fake_ordinal(int p)
{
    for (int i = 0; i < n_visible; i++)
        if (visible[i] == p)
            return i;
    return -1;
}

#define phys fake_phys

FAKE_API CUresult cuDeviceGetName(char *name, int len, CUdevice d)
{
    NEED_INIT();
    if (phys(d) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", cfg.name[phys(d)]);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d)
{
    NEED_INIT();
    if (phys(d) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *bytes = (size_t)(cfg.total[phys(d)] - cfg.reserved[phys(d)]);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceTotalMem(unsigned *bytes, CUdevice d)
{
    (void)bytes;
    (void)d;
    legacy("cuDeviceTotalMem", "cuDeviceTotalMem_v2");
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult cuDeviceGetAttribute(int *v, int attrib, CUdevice d)
{
    NEED_INIT();
    if (phys(d) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    switch (attrib) {
    case 16:
        *v = cfg.sms;
        break;
    case 75:
        *v = cfg.cc_major;
        break;
    case 76:
        *v = cfg.cc_minor;
        break;
    case 33: /* PCI bus id */
        *v = (int)fake_pci_bus(phys(d));
        break;
    case 18: /* integrated */
        *v = 0;
        break;
    case 102: /* VMM supported */
    case 115: /* memory pools supported */
        *v = 1;
        break;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

static CUresult get_uuid(unsigned char uuid[16], CUdevice d)
{
    NEED_INIT();
    if (phys(d) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    fake_uuid(phys(d), uuid);
    return CUDA_SUCCESS;
}

/* Built with FAKE_CUDA_PRE_11, the library has only the names of drivers before CUDA 11
 * (no cuDeviceGetUuid_v2, no cuDevicePrimaryCtxRelease_v2): gpumem's fallbacks run. */
#ifndef FAKE_CUDA_PRE_11
FAKE_API CUresult cuDeviceGetUuid_v2(unsigned char uuid[16], CUdevice d)
{
    return get_uuid(uuid, d);
}
#endif

FAKE_API CUresult cuDeviceGetUuid(unsigned char uuid[16], CUdevice d)
{
    return get_uuid(uuid, d);
}

FAKE_API CUresult cuDeviceGetPCIBusId(char *buf, int len, CUdevice d)
{
    NEED_INIT();
    if (phys(d) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(buf, (size_t)len, "0000:%02X:00.0", fake_pci_bus(phys(d)));
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d)
{
    int p;
    NEED_INIT();
    p = phys(d);
    if (p < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    ctxs[p].device = p;
    ctxs[p].explicit_ = false;
    if (ctxs[p].refs++ == 0)
        publish(p);
    pthread_mutex_unlock(&lock);
    *c = (CUcontext)(void *)&ctxs[p];
    return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice d)
{
    int p;
    NEED_INIT();
    p = phys(d);
    if (p < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    if (ctxs[p].refs <= 0) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if (--ctxs[p].refs == 0)
        publish(p);
    pthread_mutex_unlock(&lock);
    return CUDA_SUCCESS;
}

#ifndef FAKE_CUDA_PRE_11
FAKE_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d)
{
    return primary_release(d);
}
#endif

FAKE_API CUresult cuDevicePrimaryCtxRelease(CUdevice d)
{
    return primary_release(d);
}

FAKE_API CUresult cuCtxSetCurrent(CUcontext c)
{
    NEED_INIT();
    current = (struct fake_ctx_st *)(void *)c;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxSynchronize(void)
{
    NEED_INIT();
    return current ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

FAKE_API CUresult cuCtxCreate(CUcontext *c, unsigned flags, CUdevice d)
{
    (void)c;
    (void)flags;
    (void)d;
    legacy("cuCtxCreate", "cuDevicePrimaryCtxRetain or cuCtxCreate_v2");
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult cuCtxDestroy(CUcontext c)
{
    (void)c;
    legacy("cuCtxDestroy", "cuCtxDestroy_v2");
    return CUDA_ERROR_NOT_SUPPORTED;
}

static uint64_t device_usable(int dev)
{
    return cfg.total[dev] - cfg.reserved[dev];
}

/* Bytes in use on 'dev' by everyone: other processes through the state file, this one
 * from its own counters (the state file may lag or be absent). */
static uint64_t device_in_use(int dev)
{
    uint64_t all = cfg.base_used + charged[dev] + charged_extra[dev] + ctx_extra[dev] +
                   (ctxs[dev].refs > 0 ? cfg.context_bytes : 0);
    struct fake_slot slots[FAKE_STATE_SLOTS];
    size_t n = fake_state_get(cfg.state, slots, FAKE_STATE_SLOTS);
    for (size_t k = 0; k < n; k++)
        if (slots[k].device == dev && slots[k].pid != (int32_t)getpid())
            all += slots[k].used + slots[k].ctx;
    return all;
}

FAKE_API CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    uint64_t usable, used;
    NEED_CTX();
    pthread_mutex_lock(&lock);
    usable = device_usable(current->device);
    used = device_in_use(current->device);
    pthread_mutex_unlock(&lock);
    *free_bytes = (size_t)(used < usable ? usable - used : 0);
    *total_bytes = (size_t)usable;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemGetInfo(unsigned *free_bytes, unsigned *total_bytes)
{
    (void)free_bytes;
    (void)total_bytes;
    legacy("cuMemGetInfo", "cuMemGetInfo_v2");
    return CUDA_ERROR_NOT_SUPPORTED;
}

uint64_t fake_granules(uint64_t n)
{
    return (n + cfg.granule - 1) / cfg.granule * cfg.granule;
}

CUresult fake_charge(int dev, int64_t delta, bool ctx)
{
    uint64_t *to = ctx ? &ctx_extra[dev] : &charged_extra[dev];
    if (delta > 0 && device_in_use(dev) + (uint64_t)delta > device_usable(dev))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *to = delta < 0 && (uint64_t)-delta > *to ? 0 : *to + (uint64_t)delta;
    publish(dev);
    return CUDA_SUCCESS;
}

CUresult fake_alloc_new(CUdeviceptr *dptr, size_t n, int dev, uint64_t charge, int kind)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), mapped;
    void *p;

    pthread_mutex_lock(&lock);
    if ((kind == FAKE_ALLOC_DEVICE && cfg.oom_after >= 0 && n_alloc_calls >= cfg.oom_after) ||
        (charge && device_in_use(dev) + charge > device_usable(dev))) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (n_allocs == cap_allocs) {
        size_t nc = cap_allocs ? cap_allocs * 2 : 64;
        struct fake_alloc *a = realloc(allocs, nc * sizeof(*a));
        if (!a) {
            pthread_mutex_unlock(&lock);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        allocs = a;
        cap_allocs = nc;
    }
    mapped = (n + page - 1) / page * page;
    p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
             0);
    if (p == MAP_FAILED) {
        pthread_mutex_unlock(&lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    allocs[n_allocs++] = (struct fake_alloc){p, n, mapped, charge, dev, kind};
    if (kind != FAKE_ALLOC_HOST) {
        charged[dev] += charge;
        if (kind == FAKE_ALLOC_DEVICE)
            n_alloc_calls++;
        publish(dev);
    }
    pthread_mutex_unlock(&lock);
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

CUresult fake_alloc_free(CUdeviceptr dptr, unsigned kinds)
{
    pthread_mutex_lock(&lock);
    for (size_t k = 0; k < n_allocs; k++) {
        if ((CUdeviceptr)(uintptr_t)allocs[k].p == dptr && (kinds & (1u << allocs[k].kind))) {
            struct fake_alloc a = allocs[k];
            allocs[k] = allocs[--n_allocs];
            munmap(a.p, a.mapped);
            if (a.kind != FAKE_ALLOC_HOST) {
                charged[a.device] -= a.charge;
                publish(a.device);
            }
            pthread_mutex_unlock(&lock);
            return CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&lock);
    return CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n)
{
    NEED_CTX();
    if (!dptr || n == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return fake_alloc_new(dptr, n, current->device, fake_granules(n), FAKE_ALLOC_DEVICE);
}

FAKE_API CUresult cuMemAlloc(unsigned *dptr, unsigned n)
{
    (void)dptr;
    (void)n;
    legacy("cuMemAlloc", "cuMemAlloc_v2");
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    NEED_CTX();
    /* like the driver, it also frees stream-ordered and managed memory (synchronising) */
    return fake_alloc_free(dptr, 1u << FAKE_ALLOC_DEVICE | 1u << FAKE_ALLOC_ASYNC |
                                     1u << FAKE_ALLOC_MANAGED);
}

FAKE_API CUresult cuMemFree(unsigned dptr)
{
    (void)dptr;
    legacy("cuMemFree", "cuMemFree_v2");
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* Whether [p, p + n) lies inside one allocation. */
static int in_allocation(CUdeviceptr p, size_t n)
{
    int ok = 0;
    pthread_mutex_lock(&lock);
    for (size_t k = 0; k < n_allocs && !ok; k++) {
        CUdeviceptr b = (CUdeviceptr)(uintptr_t)allocs[k].p;
        ok = p >= b && n <= allocs[k].size && p - b <= allocs[k].size - n;
    }
    pthread_mutex_unlock(&lock);
    return ok;
}

FAKE_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    NEED_CTX();
    if (!in_allocation(dst, n) || (!src && n))
        return CUDA_ERROR_INVALID_VALUE;
    if (n)
        memcpy((void *)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    NEED_CTX();
    if (!in_allocation(src, n) || (!dst && n))
        return CUDA_ERROR_INVALID_VALUE;
    if (n)
        memcpy(dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemsetD8_v2(CUdeviceptr p, unsigned char v, size_t n)
{
    NEED_CTX();
    if (!in_allocation(p, n))
        return CUDA_ERROR_INVALID_VALUE;
    memset((void *)(uintptr_t)p, v, n);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemsetD32_v2(CUdeviceptr p, unsigned v, size_t n)
{
    uint32_t *q = (uint32_t *)(uintptr_t)p;
    NEED_CTX();
    if (p % 4 || n > SIZE_MAX / 4 || !in_allocation(p, n * 4))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t k = 0; k < n; k++)
        q[k] = v;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    NEED_CTX();
    if (!in_allocation(dst, n) || !in_allocation(src, n))
        return CUDA_ERROR_INVALID_VALUE;
    if (n)
        memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemsetD32(unsigned p, unsigned v, unsigned n)
{
    (void)p;
    (void)v;
    (void)n;
    legacy("cuMemsetD32", "cuMemsetD32_v2");
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult cuMemcpyDtoD(unsigned dst, unsigned src, unsigned n)
{
    (void)dst;
    (void)src;
    (void)n;
    legacy("cuMemcpyDtoD", "cuMemcpyDtoD_v2");
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult cuMemcpyHtoD(unsigned dst, const void *src, unsigned n)
{
    (void)dst;
    (void)src;
    (void)n;
    legacy("cuMemcpyHtoD", "cuMemcpyHtoD_v2");
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult cuMemcpyDtoH(void *dst, unsigned src, unsigned n)
{
    (void)dst;
    (void)src;
    (void)n;
    legacy("cuMemcpyDtoH", "cuMemcpyDtoH_v2");
    return CUDA_ERROR_NOT_SUPPORTED;
}

FAKE_API CUresult cuMemsetD8(unsigned p, unsigned char v, unsigned n)
{
    (void)p;
    (void)v;
    (void)n;
    legacy("cuMemsetD8", "cuMemsetD8_v2");
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- modules and kernels ---- */

int fake_in_allocation(unsigned long long p, size_t n)
{
    return in_allocation(p, n);
}

/* gpumem_fill_u32(u32 *p, u32 value, u64 n): p[i] = value for i < n, one thread per
 * element in the real kernel; the whole range here. */
static CUresult k_fill_u32(const struct fake_launch *l, void **params)
{
    CUdeviceptr p;
    uint32_t value;
    uint64_t n, threads;
    uint32_t *q;

    memcpy(&p, params[0], sizeof(p));
    memcpy(&value, params[1], sizeof(value));
    memcpy(&n, params[2], sizeof(n));
    threads =
        (uint64_t)l->grid[0] * l->grid[1] * l->grid[2] * l->block[0] * l->block[1] * l->block[2];
    if (n > threads)
        n = threads; /* a real launch covers only its threads */
    if (n && !in_allocation(p, (size_t)n * sizeof(uint32_t)))
        return 700; /* CUDA_ERROR_ILLEGAL_ADDRESS */
    q = (uint32_t *)(uintptr_t)p;
    for (uint64_t i = 0; i < n; i++)
        q[i] = value;
    return CUDA_SUCCESS;
}

static const struct {
    const char *name;
    fake_kernel_fn run;
} fake_kernels[] = {
    {"gpumem_fill_u32", k_fill_u32},
};

#define MAX_ENTRIES 64

struct CUfunc_st {
    char name[128];
    fake_kernel_fn run; /* NULL: unknown kernel, launched as a no-op */
};

struct CUmod_st {
    struct CUfunc_st fn[MAX_ENTRIES];
    int n_fn;
    int device;      /* physical, of the context it was loaded into */
    uint64_t charge; /* GPUMEM_FAKE_MODULE_BYTES */
};

/* A module of the current context, charged GPUMEM_FAKE_MODULE_BYTES; NULL when memory (host
 * or fake device) runs out. */
static struct CUmod_st *module_new(void)
{
    struct CUmod_st *mod = calloc(1, sizeof(*mod));
    if (!mod)
        return NULL;
    mod->device = current->device;
    mod->charge = cfg.module_bytes;
    pthread_mutex_lock(&lock);
    if (fake_charge(mod->device, (int64_t)mod->charge, false) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&lock);
        free(mod);
        return NULL;
    }
    pthread_mutex_unlock(&lock);
    return mod;
}

static void jit_log(unsigned n_opt, const CUjit_option *opt, void **vals, const char *msg)
{
    char *buf = NULL;
    size_t size = 0;
    for (unsigned k = 0; k < n_opt; k++) {
        if (opt[k] == 5) /* CU_JIT_ERROR_LOG_BUFFER */
            buf = vals[k];
        else if (opt[k] == 6) /* CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES */
            size = (size_t)(uintptr_t)vals[k];
    }
    if (buf && size)
        snprintf(buf, size, "%s", msg);
}

FAKE_API CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n_opt,
                                     CUjit_option *opt, void **vals)
{
    const char *ptx = image, *p;
    struct CUmod_st *mod;
    int major, minor;

    NEED_CTX();
    if (!m || !ptx)
        return CUDA_ERROR_INVALID_VALUE;
    p = strstr(ptx, ".version");
    if (!p || sscanf(p + 8, " %d.%d", &major, &minor) != 2) {
        jit_log(n_opt, opt, vals, "ptxas fatal   : no .version directive in the PTX input");
        return CUDA_ERROR_INVALID_PTX;
    }
    if (major > cfg.ptx_major || (major == cfg.ptx_major && minor > cfg.ptx_minor)) {
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "ptxas application ptx input, line 1; fatal   : Unsupported .version %d.%d; "
                 "current version is '%d.%d'",
                 major, minor, cfg.ptx_major, cfg.ptx_minor);
        jit_log(n_opt, opt, vals, msg);
        return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
    }
    if (!(mod = module_new()))
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (p = strstr(ptx, ".entry"); p && mod->n_fn < MAX_ENTRIES; p = strstr(p + 6, ".entry")) {
        const char *q = p + 6;
        size_t len = 0;
        struct CUfunc_st *f = &mod->fn[mod->n_fn];
        while (*q == ' ' || *q == '\t')
            q++;
        while ((isalnum((unsigned char)q[len]) || q[len] == '_' || q[len] == '$') &&
               len < sizeof(f->name) - 1)
            len++;
        if (!len)
            continue;
        memcpy(f->name, q, len);
        f->name[len] = '\0';
        for (size_t k = 0; k < sizeof(fake_kernels) / sizeof(fake_kernels[0]); k++)
            if (!strcmp(fake_kernels[k].name, f->name))
                f->run = fake_kernels[k].run;
        if (!f->run)
            f->run = fake_measure_kernel(f->name);
        mod->n_fn++;
    }
    *m = mod;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
    return cuModuleLoadDataEx(m, image, 0, NULL, NULL);
}

FAKE_API CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    NEED_CTX();
    if (!f || !m || !name)
        return CUDA_ERROR_INVALID_VALUE;
    for (int k = 0; k < m->n_fn; k++) {
        if (!strcmp(m->fn[k].name, name)) {
            *f = &m->fn[k];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}

/* A fat binary is loaded without looking inside: a module with no kernel. */
FAKE_API CUresult cuModuleLoadFatBinary(CUmodule *m, const void *image)
{
    struct CUmod_st *mod;
    NEED_CTX();
    if (!m || !image)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(mod = module_new()))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *m = mod;
    return CUDA_SUCCESS;
}

/* A PTX file, read whole. */
FAKE_API CUresult cuModuleLoad(CUmodule *m, const char *fname)
{
    FILE *f;
    char *text;
    long len;
    CUresult r;
    NEED_CTX();
    if (!m || !fname)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(f = fopen(fname, "rb")))
        return CUDA_ERROR_FILE_NOT_FOUND;
    if (fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0 ||
        !(text = calloc(1, (size_t)len + 1))) {
        fclose(f);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (fread(text, 1, (size_t)len, f) != (size_t)len) {
        fclose(f);
        free(text);
        return CUDA_ERROR_INVALID_VALUE;
    }
    fclose(f);
    r = cuModuleLoadDataEx(m, text, 0, NULL, NULL);
    free(text);
    return r;
}

FAKE_API CUresult cuModuleUnload(CUmodule m)
{
    NEED_INIT();
    if (!m)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&lock);
    fake_charge(m->device, -(int64_t)m->charge, false);
    pthread_mutex_unlock(&lock);
    free(m);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned shmem, CUstream s,
                                 void **params, void **extra)
{
    struct fake_launch l = {{gx, gy, gz}, {bx, by, bz}, shmem};
    (void)s;
    (void)extra;
    NEED_CTX();
    if (!f || !gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    return f->run ? f->run(&l, params) : CUDA_SUCCESS;
}

/* ---- errors ---- */

static const struct {
    int code;
    const char *name;
    const char *text;
} errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION",
     "the provided PTX was compiled with an unsupported toolchain."},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

FAKE_API CUresult cuGetErrorName(CUresult e, const char **s)
{
    for (size_t k = 0; k < sizeof(errors) / sizeof(errors[0]); k++) {
        if (errors[k].code == e) {
            *s = errors[k].name;
            return CUDA_SUCCESS;
        }
    }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuGetErrorString(CUresult e, const char **s)
{
    for (size_t k = 0; k < sizeof(errors) / sizeof(errors[0]); k++) {
        if (errors[k].code == e) {
            *s = errors[k].text;
            return CUDA_SUCCESS;
        }
    }
    *s = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}
