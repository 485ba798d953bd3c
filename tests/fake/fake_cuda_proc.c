/* SPDX-License-Identifier: MIT */
/* fake_cuda_proc.c - the fake libcuda.so.1's explicit contexts, limits, current-context
 * calls and cuGetProcAddress (driver-abi.md §4.1): what the CUDA runtime uses to find the
 * driver's functions instead of dlsym.
 *
 * cuGetProcAddress answers from a table of (name without its version suffix, the CUDA
 * version that introduced the entry point, the function): the row with the highest
 * version not above the caller's cudaVersion wins, and with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM the _ptsz variant where there is one, as
 * the real driver does.  The library is linked with -Bsymbolic-functions, so the addresses
 * it hands out are its own exports, never an interposer's definition of the same name.
 *
 *   cuCtxCreate_v2 / cuCtxDestroy_v2  an explicit context, charged GPUMEM_FAKE_CONTEXT_BYTES
 *   cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE)  charges the heap, rounded to the granule: memory
 *                                     the driver takes that no allocation call shows
 *   GPUMEM_FAKE_PROC_PRIVATE=1        cuGetProcAddress answers the VMM names (cuMemCreate,
 *                                     cuMemRelease, cuMemMap, cuMemUnmap, cuMemAddressReserve)
 *                                     with functions of its own that are no export, as a driver
 *                                     may: an interposer cannot recognise them by address */
#include "fake_cuda_int.h"

#include <stdlib.h>
#include <string.h>

/* The entry points the table hands out (defined in the other files of the fake). */
CUresult cuInit(unsigned flags);
CUresult cuDriverGetVersion(int *v);
CUresult cuDeviceGet(CUdevice *d, int ordinal);
CUresult cuDeviceGetCount(int *n);
CUresult cuDeviceGetName(char *name, int len, CUdevice d);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d);
CUresult cuDeviceGetAttribute(int *v, int attrib, CUdevice d);
CUresult cuDeviceGetUuid(unsigned char uuid[16], CUdevice d);
CUresult cuDeviceGetUuid_v2(unsigned char uuid[16], CUdevice d);
CUresult cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d);
CUresult cuDevicePrimaryCtxRelease(CUdevice d);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d);
CUresult cuCtxSetCurrent(CUcontext c);
CUresult cuCtxSynchronize(void);
CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n);
CUresult cuModuleLoad(CUmodule *m, const char *fname);
CUresult cuModuleLoadData(CUmodule *m, const void *image);
CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n_opt, CUjit_option *opt,
                            void **vals);
CUresult cuModuleLoadFatBinary(CUmodule *m, const void *image);
CUresult cuModuleUnload(CUmodule m);
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name);
CUresult cuGetErrorName(CUresult e, const char **s);
CUresult cuGetErrorString(CUresult e, const char **s);
/* fake_cuda_mem.c */
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                            unsigned elem);
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t n, unsigned flags);
CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t n, CUstream s);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s);
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s);
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t n, void *pool, CUstream s);
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t n, void *pool, CUstream s);
CUresult cuMemPoolCreate(void **pool, const void *props);
CUresult cuMemPoolDestroy(void *pool);
CUresult cuMemCreate(unsigned long long *h, size_t size, const void *prop,
                     unsigned long long flags);
CUresult cuMemRelease(unsigned long long h);
CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                             unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr p, size_t size);
CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset, unsigned long long h,
                  unsigned long long flags);
CUresult cuMemUnmap(CUdeviceptr p, size_t size);
CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const void *desc, size_t count);
CUresult cuMemHostAlloc(void **pp, size_t n, unsigned flags);
CUresult cuMemAllocHost_v2(void **pp, size_t n);
CUresult cuMemFreeHost(void *p);
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags);
CUresult cuMemHostUnregister(void *p);
/* fake_cuda_graph.c */
CUresult cuLibraryLoadData(void **lib, const void *code, CUjit_option *jo, void **jv, unsigned nj,
                           int *lo, void **lv, unsigned nl);
CUresult cuLibraryLoadFromFile(void **lib, const char *file, CUjit_option *jo, void **jv,
                               unsigned nj, int *lo, void **lv, unsigned nl);
CUresult cuLibraryUnload(void *lib);
CUresult cuGraphCreate(void **g, unsigned flags);
CUresult cuGraphDestroy(void *g);
CUresult cuGraphInstantiateWithFlags(void **e, void *g, unsigned long long flags);
CUresult cuGraphInstantiateWithParams(void **e, void *g, void *params);
CUresult cuGraphInstantiateWithParams_ptsz(void **e, void *g, void *params);
CUresult cuGraphExecDestroy(void *e);
CUresult cuGraphLaunch(void *e, CUstream s);

#define FN(f) ((void *)(uintptr_t)(f))

/* ---- contexts ---- */

static __thread struct fake_ctx_st *pushed[8]; /* cuCtxPushCurrent_v2's stack */
static __thread int n_pushed;
static uint64_t heap[FAKE_MAX_DEV]; /* CU_LIMIT_MALLOC_HEAP_SIZE charged, per physical device */

FAKE_API CUresult cuCtxCreate_v2(CUcontext *c, unsigned flags, CUdevice d)
{
    struct fake_ctx_st *x;
    int p;
    (void)flags;
    NEED_INIT();
    p = fake_phys(d);
    if (p < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(x = calloc(1, sizeof(*x))))
        return CUDA_ERROR_OUT_OF_MEMORY;
    x->device = p;
    x->refs = 1;
    x->explicit_ = true;
    pthread_mutex_lock(&fake_lock);
    if (fake_charge(p, (int64_t)fake_cfg.context_bytes, true) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&fake_lock);
        free(x);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_unlock(&fake_lock);
    fake_current = x; /* the new context is made current, as the driver does */
    *c = (CUcontext)(void *)x;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxDestroy_v2(CUcontext c)
{
    struct fake_ctx_st *x = (struct fake_ctx_st *)(void *)c;
    NEED_INIT();
    if (!x || !x->explicit_)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&fake_lock);
    fake_charge(x->device, -(int64_t)fake_cfg.context_bytes, true);
    pthread_mutex_unlock(&fake_lock);
    if (fake_current == x)
        fake_current = NULL;
    free(x);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxGetCurrent(CUcontext *c)
{
    NEED_INIT();
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    *c = (CUcontext)(void *)fake_current;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxGetDevice(CUdevice *d)
{
    NEED_CTX();
    if (!d)
        return CUDA_ERROR_INVALID_VALUE;
    *d = fake_ordinal(fake_current->device);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPushCurrent_v2(CUcontext c)
{
    NEED_INIT();
    if (!c)
        return CUDA_ERROR_INVALID_VALUE;
    if (n_pushed == (int)(sizeof(pushed) / sizeof(pushed[0])))
        return CUDA_ERROR_OUT_OF_MEMORY;
    pushed[n_pushed++] = fake_current;
    fake_current = (struct fake_ctx_st *)(void *)c;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxPopCurrent_v2(CUcontext *c)
{
    NEED_INIT();
    if (!n_pushed)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (c)
        *c = (CUcontext)(void *)fake_current;
    fake_current = pushed[--n_pushed];
    return CUDA_SUCCESS;
}

/* CU_LIMIT_MALLOC_HEAP_SIZE (2) takes device memory for the in-kernel malloc heap; the other
 * limits are accepted and cost nothing here. */
FAKE_API CUresult cuCtxSetLimit(int limit, size_t value)
{
    int dev;
    CUresult r;
    NEED_CTX();
    if (limit != 2)
        return CUDA_SUCCESS;
    dev = fake_current->device;
    pthread_mutex_lock(&fake_lock);
    r = fake_charge(dev, (int64_t)fake_granules(value) - (int64_t)heap[dev], false);
    if (r == CUDA_SUCCESS)
        heap[dev] = fake_granules(value);
    pthread_mutex_unlock(&fake_lock);
    return r;
}

/* CU_MEM_ALLOC_GRANULARITY_MINIMUM and _RECOMMENDED: the granule, for any property. */
FAKE_API CUresult cuMemGetAllocationGranularity(size_t *granularity, const void *prop, int option)
{
    (void)option;
    NEED_INIT();
    if (!granularity || !prop)
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = (size_t)fake_cfg.granule;
    return CUDA_SUCCESS;
}

/* ---- cuGetProcAddress ---- */

/* The private entry points of GPUMEM_FAKE_PROC_PRIVATE: the same work, other addresses. */
static CUresult private_create(unsigned long long *h, size_t size, const void *prop,
                               unsigned long long flags)
{
    return cuMemCreate(h, size, prop, flags);
}
static CUresult private_release(unsigned long long h)
{
    return cuMemRelease(h);
}
static CUresult private_map(CUdeviceptr p, size_t size, size_t offset, unsigned long long h,
                            unsigned long long flags)
{
    return cuMemMap(p, size, offset, h, flags);
}
static CUresult private_unmap(CUdeviceptr p, size_t size)
{
    return cuMemUnmap(p, size);
}
static CUresult private_reserve(CUdeviceptr *p, size_t size, size_t align, CUdeviceptr addr,
                                unsigned long long flags)
{
    return cuMemAddressReserve(p, size, align, addr, flags);
}

static const struct {
    const char *name;
    void *fn;
} privates[] = {
    {"cuMemCreate", FN(private_create)},
    {"cuMemRelease", FN(private_release)},
    {"cuMemMap", FN(private_map)},
    {"cuMemUnmap", FN(private_unmap)},
    {"cuMemAddressReserve", FN(private_reserve)},
};

#define PTDS 1 /* a _ptsz variant, for CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */

struct proc {
    const char *name; /* without the version suffix */
    int version;      /* the CUDA version that introduced this function */
    int ptds;
    void *fn;
};

static const struct proc procs[] = {
    {"cuInit", 2000, 0, FN(cuInit)},
    {"cuDriverGetVersion", 2020, 0, FN(cuDriverGetVersion)},
    {"cuDeviceGet", 2000, 0, FN(cuDeviceGet)},
    {"cuDeviceGetCount", 2000, 0, FN(cuDeviceGetCount)},
    {"cuDeviceGetName", 2000, 0, FN(cuDeviceGetName)},
    {"cuDeviceTotalMem", 3020, 0, FN(cuDeviceTotalMem_v2)},
    {"cuDeviceGetAttribute", 2000, 0, FN(cuDeviceGetAttribute)},
    {"cuDeviceGetUuid", 9020, 0, FN(cuDeviceGetUuid)},
    {"cuDeviceGetUuid", 11040, 0, FN(cuDeviceGetUuid_v2)},
    {"cuDevicePrimaryCtxRetain", 7000, 0, FN(cuDevicePrimaryCtxRetain)},
    {"cuDevicePrimaryCtxRelease", 7000, 0, FN(cuDevicePrimaryCtxRelease)},
    {"cuDevicePrimaryCtxRelease", 11000, 0, FN(cuDevicePrimaryCtxRelease_v2)},
    {"cuCtxCreate", 3020, 0, FN(cuCtxCreate_v2)},
    {"cuCtxDestroy", 4000, 0, FN(cuCtxDestroy_v2)},
    {"cuCtxSetCurrent", 4000, 0, FN(cuCtxSetCurrent)},
    {"cuCtxGetCurrent", 4000, 0, FN(cuCtxGetCurrent)},
    {"cuCtxGetDevice", 2000, 0, FN(cuCtxGetDevice)},
    {"cuCtxPushCurrent", 4000, 0, FN(cuCtxPushCurrent_v2)},
    {"cuCtxPopCurrent", 4000, 0, FN(cuCtxPopCurrent_v2)},
    {"cuCtxSynchronize", 2000, 0, FN(cuCtxSynchronize)},
    {"cuCtxSetLimit", 3010, 0, FN(cuCtxSetLimit)},
    {"cuMemGetInfo", 3020, 0, FN(cuMemGetInfo_v2)},
    {"cuMemAlloc", 3020, 0, FN(cuMemAlloc_v2)},
    {"cuMemFree", 3020, 0, FN(cuMemFree_v2)},
    {"cuMemAllocPitch", 3020, 0, FN(cuMemAllocPitch_v2)},
    {"cuMemAllocManaged", 6000, 0, FN(cuMemAllocManaged)},
    {"cuMemAllocAsync", 11020, 0, FN(cuMemAllocAsync)},
    {"cuMemAllocAsync", 11020, PTDS, FN(cuMemAllocAsync_ptsz)},
    {"cuMemFreeAsync", 11020, 0, FN(cuMemFreeAsync)},
    {"cuMemFreeAsync", 11020, PTDS, FN(cuMemFreeAsync_ptsz)},
    {"cuMemAllocFromPoolAsync", 11020, 0, FN(cuMemAllocFromPoolAsync)},
    {"cuMemAllocFromPoolAsync", 11020, PTDS, FN(cuMemAllocFromPoolAsync_ptsz)},
    {"cuMemPoolCreate", 11020, 0, FN(cuMemPoolCreate)},
    {"cuMemPoolDestroy", 11020, 0, FN(cuMemPoolDestroy)},
    {"cuMemCreate", 10020, 0, FN(cuMemCreate)},
    {"cuMemRelease", 10020, 0, FN(cuMemRelease)},
    {"cuMemAddressReserve", 10020, 0, FN(cuMemAddressReserve)},
    {"cuMemAddressFree", 10020, 0, FN(cuMemAddressFree)},
    {"cuMemMap", 10020, 0, FN(cuMemMap)},
    {"cuMemUnmap", 10020, 0, FN(cuMemUnmap)},
    {"cuMemSetAccess", 10020, 0, FN(cuMemSetAccess)},
    {"cuMemGetAllocationGranularity", 10020, 0, FN(cuMemGetAllocationGranularity)},
    {"cuMemHostAlloc", 2020, 0, FN(cuMemHostAlloc)},
    {"cuMemAllocHost", 3020, 0, FN(cuMemAllocHost_v2)},
    {"cuMemFreeHost", 2000, 0, FN(cuMemFreeHost)},
    {"cuMemHostRegister", 6050, 0, FN(cuMemHostRegister_v2)},
    {"cuMemHostUnregister", 4000, 0, FN(cuMemHostUnregister)},
    {"cuMemcpyHtoD", 3020, 0, FN(cuMemcpyHtoD_v2)},
    {"cuMemcpyDtoH", 3020, 0, FN(cuMemcpyDtoH_v2)},
    {"cuModuleLoad", 2000, 0, FN(cuModuleLoad)},
    {"cuModuleLoadData", 2000, 0, FN(cuModuleLoadData)},
    {"cuModuleLoadDataEx", 2010, 0, FN(cuModuleLoadDataEx)},
    {"cuModuleLoadFatBinary", 2000, 0, FN(cuModuleLoadFatBinary)},
    {"cuModuleUnload", 2000, 0, FN(cuModuleUnload)},
    {"cuModuleGetFunction", 2000, 0, FN(cuModuleGetFunction)},
    {"cuLibraryLoadData", 12000, 0, FN(cuLibraryLoadData)},
    {"cuLibraryLoadFromFile", 12000, 0, FN(cuLibraryLoadFromFile)},
    {"cuLibraryUnload", 12000, 0, FN(cuLibraryUnload)},
    {"cuGraphCreate", 10000, 0, FN(cuGraphCreate)},
    {"cuGraphDestroy", 10000, 0, FN(cuGraphDestroy)},
    {"cuGraphInstantiate", 12000, 0, FN(cuGraphInstantiateWithFlags)},
    {"cuGraphInstantiateWithFlags", 11040, 0, FN(cuGraphInstantiateWithFlags)},
    {"cuGraphInstantiateWithParams", 12000, 0, FN(cuGraphInstantiateWithParams)},
    {"cuGraphInstantiateWithParams", 12000, PTDS, FN(cuGraphInstantiateWithParams_ptsz)},
    {"cuGraphExecDestroy", 10000, 0, FN(cuGraphExecDestroy)},
    {"cuGraphLaunch", 10000, 0, FN(cuGraphLaunch)},
    {"cuGetErrorName", 6000, 0, FN(cuGetErrorName)},
    {"cuGetErrorString", 6000, 0, FN(cuGetErrorString)},
    {"cuGetProcAddress", 11030, 0, NULL}, /* filled in below: these two are defined here */
    {"cuGetProcAddress", 12000, 0, NULL},
};

enum { PROC_NOT_FOUND = 1, PROC_VERSION_NOT_SUFFICIENT = 2 };

FAKE_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                      unsigned long long flags, int *status);
FAKE_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                                   unsigned long long flags);

void *fake_proc_lookup(const char *name, int version, unsigned long long flags)
{
    const struct proc *best = NULL;
    const char *priv = getenv("GPUMEM_FAKE_PROC_PRIVATE");
    if (priv && !strcmp(priv, "1"))
        for (size_t i = 0; i < sizeof(privates) / sizeof(privates[0]); i++)
            if (!strcmp(privates[i].name, name) && version >= 10020)
                return privates[i].fn;
    int want_ptds = (flags & 2) != 0; /* CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM */
    for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
        const struct proc *p = &procs[i];
        if (strcmp(p->name, name) != 0 || p->version > version || (p->ptds && !want_ptds))
            continue;
        if (!best || p->version > best->version || (p->version == best->version && p->ptds))
            best = p;
    }
    if (!best)
        return NULL;
    if (!best->fn) /* cuGetProcAddress itself */
        return best->version >= 12000 ? FN(cuGetProcAddress_v2) : FN(cuGetProcAddress);
    return best->fn;
}

static int known_name(const char *name)
{
    for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++)
        if (!strcmp(procs[i].name, name))
            return 1;
    return 0;
}

FAKE_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                      unsigned long long flags, int *status)
{
    void *fn;
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    fn = fake_proc_lookup(symbol, version, flags);
    *pfn = fn;
    if (status)
        *status = fn ? 0 : known_name(symbol) ? PROC_VERSION_NOT_SUFFICIENT : PROC_NOT_FOUND;
    return fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

FAKE_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                                   unsigned long long flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
