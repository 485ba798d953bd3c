/* SPDX-License-Identifier: MIT */
/* hooks_cuda.c - the CUDA backend of the interposer: every driver entry point it hooks, as
 * a wrapper exported under the driver's own name, and the backend's tables (hooks, and the
 * names cuGetProcAddress takes).  Prototypes are those of cuda.h (CUDA 13), declared here.
 *
 * Each wrapper calls the driver with the caller's arguments and returns what the driver
 * returned, whatever happens to the accounting.  Around it:
 *   allocations (cuMemAlloc_v2, pitch, managed, stream-ordered, pinned host): recorded
 *     after a success, credited to the caller;
 *   releases: taken out of the table before the driver reuses the address, put back if
 *     the driver refused;
 *   VMM: cuMemCreate's physical memory counts until the handle is released and unmapped;
 *     reserved address ranges are reported apart (no memory);
 *   contexts, modules, libraries, graphs: bracketed, under one lock (they are rare, and a
 *     bracket must not overlap another), by readings of device used (NVML's figure of the
 *     process where NVML lists it, else cuMemGetInfo); the cost is the difference less what
 *     the process's tracked allocations moved meanwhile. */
#include "preload.h"

#include <string.h>

/* ---- the hooked entry points (their order is the api index of events) ---- */

#define CUDA_HOOKS(X)                                                                              \
    X(cuMemAlloc_v2)                                                                               \
    X(cuMemAllocPitch_v2)                                                                          \
    X(cuMemAllocManaged)                                                                           \
    X(cuMemFree_v2)                                                                                \
    X(cuMemAllocAsync)                                                                             \
    X(cuMemAllocAsync_ptsz)                                                                        \
    X(cuMemAllocFromPoolAsync)                                                                     \
    X(cuMemAllocFromPoolAsync_ptsz)                                                                \
    X(cuMemFreeAsync)                                                                              \
    X(cuMemFreeAsync_ptsz)                                                                         \
    X(cuMemPoolCreate)                                                                             \
    X(cuMemPoolDestroy)                                                                            \
    X(cuMemCreate)                                                                                 \
    X(cuMemRelease)                                                                                \
    X(cuMemMap)                                                                                    \
    X(cuMemUnmap)                                                                                  \
    X(cuMemAddressReserve)                                                                         \
    X(cuMemAddressFree)                                                                            \
    X(cuMemHostAlloc)                                                                              \
    X(cuMemAllocHost_v2)                                                                           \
    X(cuMemFreeHost)                                                                               \
    X(cuMemHostRegister_v2)                                                                        \
    X(cuMemHostUnregister)                                                                         \
    X(cuDevicePrimaryCtxRetain)                                                                    \
    X(cuDevicePrimaryCtxRelease)                                                                   \
    X(cuDevicePrimaryCtxRelease_v2)                                                                \
    X(cuCtxCreate_v2)                                                                              \
    X(cuCtxCreate_v3)                                                                              \
    X(cuCtxCreate_v4)                                                                              \
    X(cuCtxDestroy_v2)                                                                             \
    X(cuModuleLoad)                                                                                \
    X(cuModuleLoadData)                                                                            \
    X(cuModuleLoadDataEx)                                                                          \
    X(cuModuleLoadFatBinary)                                                                       \
    X(cuModuleUnload)                                                                              \
    X(cuLibraryLoadData)                                                                           \
    X(cuLibraryLoadFromFile)                                                                       \
    X(cuLibraryUnload)                                                                             \
    X(cuGraphInstantiateWithFlags)                                                                 \
    X(cuGraphInstantiateWithParams)                                                                \
    X(cuGraphInstantiateWithParams_ptsz)                                                           \
    X(cuGraphInstantiate_v2)                                                                       \
    X(cuGraphExecDestroy)                                                                          \
    X(cuGetProcAddress)                                                                            \
    X(cuGetProcAddress_v2)

enum {
#define ENUM(n) H_##n,
    CUDA_HOOKS(ENUM)
#undef ENUM
        H__COUNT
};

/* The driver's prototypes. */
typedef CUresult (*PFN_cuMemAlloc_v2)(CUdeviceptr *, size_t);
typedef CUresult (*PFN_cuMemAllocPitch_v2)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
typedef CUresult (*PFN_cuMemAllocManaged)(CUdeviceptr *, size_t, unsigned);
typedef CUresult (*PFN_cuMemFree_v2)(CUdeviceptr);
typedef CUresult (*PFN_cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
typedef PFN_cuMemAllocAsync PFN_cuMemAllocAsync_ptsz;
typedef CUresult (*PFN_cuMemAllocFromPoolAsync)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
typedef PFN_cuMemAllocFromPoolAsync PFN_cuMemAllocFromPoolAsync_ptsz;
typedef CUresult (*PFN_cuMemFreeAsync)(CUdeviceptr, CUstream);
typedef PFN_cuMemFreeAsync PFN_cuMemFreeAsync_ptsz;
typedef CUresult (*PFN_cuMemPoolCreate)(CUmemoryPool *, const void *);
typedef CUresult (*PFN_cuMemPoolDestroy)(CUmemoryPool);
typedef CUresult (*PFN_cuMemCreate)(CUmemGenericAllocationHandle *, size_t, const void *,
                                    unsigned long long);
typedef CUresult (*PFN_cuMemRelease)(CUmemGenericAllocationHandle);
typedef CUresult (*PFN_cuMemMap)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle,
                                 unsigned long long);
typedef CUresult (*PFN_cuMemUnmap)(CUdeviceptr, size_t);
typedef CUresult (*PFN_cuMemAddressReserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr,
                                            unsigned long long);
typedef CUresult (*PFN_cuMemAddressFree)(CUdeviceptr, size_t);
typedef CUresult (*PFN_cuMemHostAlloc)(void **, size_t, unsigned);
typedef CUresult (*PFN_cuMemAllocHost_v2)(void **, size_t);
typedef CUresult (*PFN_cuMemFreeHost)(void *);
typedef CUresult (*PFN_cuMemHostRegister_v2)(void *, size_t, unsigned);
typedef CUresult (*PFN_cuMemHostUnregister)(void *);
typedef CUresult (*PFN_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
typedef CUresult (*PFN_cuDevicePrimaryCtxRelease)(CUdevice);
typedef PFN_cuDevicePrimaryCtxRelease PFN_cuDevicePrimaryCtxRelease_v2;
typedef CUresult (*PFN_cuCtxCreate_v2)(CUcontext *, unsigned, CUdevice);
typedef CUresult (*PFN_cuCtxCreate_v3)(CUcontext *, void *, int, unsigned, CUdevice);
typedef CUresult (*PFN_cuCtxCreate_v4)(CUcontext *, void *, unsigned, CUdevice);
typedef CUresult (*PFN_cuCtxDestroy_v2)(CUcontext);
typedef CUresult (*PFN_cuModuleLoad)(CUmodule *, const char *);
typedef CUresult (*PFN_cuModuleLoadData)(CUmodule *, const void *);
typedef CUresult (*PFN_cuModuleLoadDataEx)(CUmodule *, const void *, unsigned, CUjit_option *,
                                           void **);
typedef CUresult (*PFN_cuModuleLoadFatBinary)(CUmodule *, const void *);
typedef CUresult (*PFN_cuModuleUnload)(CUmodule);
typedef CUresult (*PFN_cuLibraryLoadData)(CUlibrary *, const void *, CUjit_option *, void **,
                                          unsigned, CUlibraryOption *, void **, unsigned);
typedef CUresult (*PFN_cuLibraryLoadFromFile)(CUlibrary *, const char *, CUjit_option *, void **,
                                              unsigned, CUlibraryOption *, void **, unsigned);
typedef CUresult (*PFN_cuLibraryUnload)(CUlibrary);
typedef CUresult (*PFN_cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
typedef CUresult (*PFN_cuGraphInstantiateWithParams)(CUgraphExec *, CUgraph, void *);
typedef PFN_cuGraphInstantiateWithParams PFN_cuGraphInstantiateWithParams_ptsz;
typedef CUresult (*PFN_cuGraphInstantiate_v2)(CUgraphExec *, CUgraph, CUgraphNode *, char *,
                                              size_t);
typedef CUresult (*PFN_cuGraphExecDestroy)(CUgraphExec);
typedef CUresult (*PFN_cuGetProcAddress)(const char *, void **, int, unsigned long long);
typedef CUresult (*PFN_cuGetProcAddress_v2)(const char *, void **, int, unsigned long long, int *);

/* POSIX lets a void * hold a function pointer; __extension__ keeps -Wpedantic quiet. */
#define REAL(n) __extension__((PFN_##n)acct_real(H_##n))
#define CALLER  __builtin_return_address(0)

/* The location id of a CUmemAllocationProp / CUmemPoolProps when its location is a device
 * (both start {type, handle types, {location type, location id}}), else -1. */
static int prop_device(const void *prop)
{
    int f[4];
    if (!prop)
        return -1;
    memcpy(f, prop, sizeof(f));
    return f[2] == 1 /* CU_MEM_LOCATION_TYPE_DEVICE */ ? f[3] : -1;
}

/* ---- a bracket: readings of device used around a slow operation ---- */

struct bracket {
    int dev;
    struct acct_device *d;
    bool nvml; /* read with NVML (contexts), else cuMemGetInfo when it works */
    struct acct_reading before;
    uint64_t tracked; /* the device's tracked bytes at the start */
};

static void bracket_read(struct bracket *b, struct acct_reading *r)
{
    /* the process's own figure wherever NVML lists the process: cuMemGetInfo is the whole
     * device, which other processes (a job's other ranks, its workers) change meanwhile */
    bool nvml = b->nvml || (b->d && atomic_load(&b->d->used_source) ==
                                        GM_ACCOUNT_READING_NVML_PROCESS);
    acct_read(b->d, nvml, !nvml, r);
    if (!nvml && !r->info_valid)
        acct_read(b->d, true, false, r); /* no current context: NVML */
}

static void bracket_begin(struct bracket *b, int dev, bool nvml)
{
    pthread_mutex_lock(&account.slow_lock);
    b->dev = dev;
    b->d = acct_device(dev);
    b->nvml = nvml;
    memset(&b->before, 0, sizeof(b->before));
    if (b->d) {
        bracket_read(b, &b->before);
        b->tracked = atomic_load(&b->d->tracked);
    }
}

/* The cost measured by the bracket; the slow lock stays held. */
static uint64_t bracket_cost(struct bracket *b, enum gm_account_reading *source)
{
    struct acct_reading after;
    uint64_t cost, moved;
    *source = GM_ACCOUNT_READING_NONE;
    if (!b->d)
        return 0;
    bracket_read(b, &after);
    cost = acct_cost(b->d, &b->before, &after, source);
    /* allocations of other threads meanwhile are theirs, not the operation's */
    moved = atomic_load(&b->d->tracked) - b->tracked;
    return cost > moved ? cost - moved : 0;
}

static void bracket_end(struct bracket *b, bool ok, enum acct_res what, uint64_t handle,
                        uint8_t api, void *ra)
{
    if (ok) {
        enum gm_account_reading source;
        uint64_t cost = bracket_cost(b, &source);
        acct_track_resource(what, handle, b->dev, cost, source, api, ra);
    }
    pthread_mutex_unlock(&account.slow_lock);
}

/* Forget a resource under the slow lock, after the driver released it. */
#define RESOURCE_END(name, what, handle_expr, call)                                                \
    do {                                                                                           \
        CUresult r_;                                                                               \
        pthread_mutex_lock(&account.slow_lock);                                                    \
        r_ = (call);                                                                               \
        if (r_ == ACCT_CUDA_SUCCESS)                                                               \
            acct_track_resource_end(what, (uint64_t)(uintptr_t)(handle_expr), H_##name, NULL);     \
        pthread_mutex_unlock(&account.slow_lock);                                                  \
        acct_end();                                                                                \
        return r_;                                                                                 \
    } while (0)

/* ---- allocations ---- */

#define ALLOC_KINDS_DEVICE                                                                         \
    (1u << GM_ACCOUNT_KIND_DEVICE | 1u << GM_ACCOUNT_KIND_PITCH | 1u << GM_ACCOUNT_KIND_ASYNC |    \
     1u << GM_ACCOUNT_KIND_MANAGED)

static CUresult after_alloc(CUresult r, enum gm_account_kind kind, uint8_t api, int dev,
                            uint64_t addr, uint64_t bytes, void *ra)
{
    if (r == ACCT_CUDA_SUCCESS)
        acct_track_alloc(kind, api, dev, addr, bytes, ra);
    acct_end();
    return r;
}

static CUresult do_free(CUresult (*real)(CUdeviceptr, CUstream), CUdeviceptr p, CUstream s,
                        unsigned kinds, uint8_t api)
{
    struct acct_live undo;
    bool known = p && acct_track_free(p, kinds, api, &undo);
    CUresult r = real(p, s);
    if (r != ACCT_CUDA_SUCCESS && known)
        acct_track_restore(&undo);
    acct_end();
    return r;
}

ACCT_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n)
{
    PFN_cuMemAlloc_v2 real = REAL(cuMemAlloc_v2);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(dptr, n);
    r = real(dptr, n);
    return after_alloc(r, GM_ACCOUNT_KIND_DEVICE, H_cuMemAlloc_v2, acct_current_device(),
                       r == ACCT_CUDA_SUCCESS ? *dptr : 0, n, CALLER);
}

ACCT_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                        size_t height, unsigned elem)
{
    PFN_cuMemAllocPitch_v2 real = REAL(cuMemAllocPitch_v2);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(dptr, pitch, width, height, elem);
    r = real(dptr, pitch, width, height, elem);
    return after_alloc(r, GM_ACCOUNT_KIND_PITCH, H_cuMemAllocPitch_v2, acct_current_device(),
                       r == ACCT_CUDA_SUCCESS ? *dptr : 0,
                       r == ACCT_CUDA_SUCCESS ? (uint64_t)*pitch * height : 0, CALLER);
}

ACCT_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t n, unsigned flags)
{
    PFN_cuMemAllocManaged real = REAL(cuMemAllocManaged);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(dptr, n, flags);
    r = real(dptr, n, flags);
    return after_alloc(r, GM_ACCOUNT_KIND_MANAGED, H_cuMemAllocManaged, acct_current_device(),
                       r == ACCT_CUDA_SUCCESS ? *dptr : 0, n, CALLER);
}

static CUresult free_sync(CUdeviceptr p, CUstream s)
{
    (void)s;
    return REAL(cuMemFree_v2)(p);
}

ACCT_EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
    PFN_cuMemFree_v2 real = REAL(cuMemFree_v2);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(p);
    return do_free(free_sync, p, NULL, ALLOC_KINDS_DEVICE, H_cuMemFree_v2);
}

static CUresult alloc_async(PFN_cuMemAllocAsync real, uint8_t api, CUdeviceptr *dptr, size_t n,
                            CUstream s, void *ra)
{
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(dptr, n, s);
    r = real(dptr, n, s);
    return after_alloc(r, GM_ACCOUNT_KIND_ASYNC, api, acct_current_device(),
                       r == ACCT_CUDA_SUCCESS ? *dptr : 0, n, ra);
}

ACCT_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t n, CUstream s)
{
    return alloc_async(REAL(cuMemAllocAsync), H_cuMemAllocAsync, dptr, n, s, CALLER);
}

ACCT_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s)
{
    return alloc_async(REAL(cuMemAllocAsync_ptsz), H_cuMemAllocAsync_ptsz, dptr, n, s, CALLER);
}

static CUresult alloc_pool(PFN_cuMemAllocFromPoolAsync real, uint8_t api, CUdeviceptr *dptr,
                           size_t n, CUmemoryPool pool, CUstream s, void *ra)
{
    CUresult r;
    int dev;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(dptr, n, pool, s);
    r = real(dptr, n, pool, s);
    dev = acct_resource_device((uint64_t)(uintptr_t)pool);
    return after_alloc(r, GM_ACCOUNT_KIND_ASYNC, api, dev >= 0 ? dev : acct_current_device(),
                       r == ACCT_CUDA_SUCCESS ? *dptr : 0, n, ra);
}

ACCT_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t n, CUmemoryPool pool,
                                             CUstream s)
{
    return alloc_pool(REAL(cuMemAllocFromPoolAsync), H_cuMemAllocFromPoolAsync, dptr, n, pool, s,
                      CALLER);
}

ACCT_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t n, CUmemoryPool pool,
                                                  CUstream s)
{
    return alloc_pool(REAL(cuMemAllocFromPoolAsync_ptsz), H_cuMemAllocFromPoolAsync_ptsz, dptr, n,
                      pool, s, CALLER);
}

ACCT_EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
    PFN_cuMemFreeAsync real = REAL(cuMemFreeAsync);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(p, s);
    return do_free(real, p, s, ALLOC_KINDS_DEVICE, H_cuMemFreeAsync);
}

ACCT_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s)
{
    PFN_cuMemFreeAsync_ptsz real = REAL(cuMemFreeAsync_ptsz);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(p, s);
    return do_free(real, p, s, ALLOC_KINDS_DEVICE, H_cuMemFreeAsync_ptsz);
}

ACCT_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const void *props)
{
    PFN_cuMemPoolCreate real = REAL(cuMemPoolCreate);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(pool, props);
    r = real(pool, props);
    if (r == ACCT_CUDA_SUCCESS)
        acct_track_resource(ACCT_RES_POOL, (uint64_t)(uintptr_t)*pool, prop_device(props), 0,
                            GM_ACCOUNT_READING_NONE, H_cuMemPoolCreate, CALLER);
    acct_end();
    return r;
}

ACCT_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    PFN_cuMemPoolDestroy real = REAL(cuMemPoolDestroy);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(pool);
    RESOURCE_END(cuMemPoolDestroy, ACCT_RES_POOL, pool, real(pool));
}

/* ---- virtual memory management ---- */

ACCT_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t size, const void *prop,
                                 unsigned long long flags)
{
    PFN_cuMemCreate real = REAL(cuMemCreate);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(h, size, prop, flags);
    r = real(h, size, prop, flags);
    if (r == ACCT_CUDA_SUCCESS) {
        int dev = prop_device(prop);
        acct_track_vmm_create(*h, size, dev >= 0 ? dev : acct_current_device(), H_cuMemCreate,
                              CALLER);
    }
    acct_end();
    return r;
}

ACCT_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h)
{
    PFN_cuMemRelease real = REAL(cuMemRelease);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(h);
    /* before the driver can hand the same handle value out again */
    acct_track_vmm_release(h, H_cuMemRelease);
    r = real(h);
    acct_end();
    return r;
}

ACCT_EXPORT CUresult cuMemMap(CUdeviceptr va, size_t size, size_t offset,
                              CUmemGenericAllocationHandle h, unsigned long long flags)
{
    PFN_cuMemMap real = REAL(cuMemMap);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(va, size, offset, h, flags);
    r = real(va, size, offset, h, flags);
    if (r == ACCT_CUDA_SUCCESS)
        acct_track_vmm_map(va, size, h);
    acct_end();
    return r;
}

ACCT_EXPORT CUresult cuMemUnmap(CUdeviceptr va, size_t size)
{
    PFN_cuMemUnmap real = REAL(cuMemUnmap);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(va, size);
    acct_track_vmm_unmap(va, size, H_cuMemUnmap);
    r = real(va, size);
    acct_end();
    return r;
}

ACCT_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *va, size_t size, size_t align,
                                         CUdeviceptr addr, unsigned long long flags)
{
    PFN_cuMemAddressReserve real = REAL(cuMemAddressReserve);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(va, size, align, addr, flags);
    r = real(va, size, align, addr, flags);
    if (r == ACCT_CUDA_SUCCESS)
        acct_track_reserve(*va, size, acct_current_device(), H_cuMemAddressReserve, CALLER);
    acct_end();
    return r;
}

ACCT_EXPORT CUresult cuMemAddressFree(CUdeviceptr va, size_t size)
{
    PFN_cuMemAddressFree real = REAL(cuMemAddressFree);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(va, size);
    acct_track_unreserve(va, H_cuMemAddressFree);
    r = real(va, size);
    acct_end();
    return r;
}

/* ---- pinned host memory ---- */

ACCT_EXPORT CUresult cuMemHostAlloc(void **pp, size_t n, unsigned flags)
{
    PFN_cuMemHostAlloc real = REAL(cuMemHostAlloc);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(pp, n, flags);
    r = real(pp, n, flags);
    return after_alloc(r, GM_ACCOUNT_KIND_HOST, H_cuMemHostAlloc, ACCT_HOST,
                       r == ACCT_CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pp : 0, n, CALLER);
}

ACCT_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t n)
{
    PFN_cuMemAllocHost_v2 real = REAL(cuMemAllocHost_v2);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(pp, n);
    r = real(pp, n);
    return after_alloc(r, GM_ACCOUNT_KIND_HOST, H_cuMemAllocHost_v2, ACCT_HOST,
                       r == ACCT_CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pp : 0, n, CALLER);
}

static CUresult host_free(void *p, unsigned kinds, uint8_t api, CUresult (*real)(void *))
{
    struct acct_live undo;
    bool known = p && acct_track_free((uint64_t)(uintptr_t)p, kinds, api, &undo);
    CUresult r = real(p);
    if (r != ACCT_CUDA_SUCCESS && known)
        acct_track_restore(&undo);
    acct_end();
    return r;
}

ACCT_EXPORT CUresult cuMemFreeHost(void *p)
{
    PFN_cuMemFreeHost real = REAL(cuMemFreeHost);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(p);
    return host_free(p, 1u << GM_ACCOUNT_KIND_HOST, H_cuMemFreeHost, real);
}

ACCT_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags)
{
    PFN_cuMemHostRegister_v2 real = REAL(cuMemHostRegister_v2);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(p, n, flags);
    r = real(p, n, flags);
    return after_alloc(r, GM_ACCOUNT_KIND_HOST_REGISTERED, H_cuMemHostRegister_v2, ACCT_HOST,
                       (uint64_t)(uintptr_t)p, n, CALLER);
}

ACCT_EXPORT CUresult cuMemHostUnregister(void *p)
{
    PFN_cuMemHostUnregister real = REAL(cuMemHostUnregister);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(p);
    return host_free(p, 1u << GM_ACCOUNT_KIND_HOST_REGISTERED, H_cuMemHostUnregister, real);
}

/* ---- contexts ---- */

ACCT_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    PFN_cuDevicePrimaryCtxRetain real = REAL(cuDevicePrimaryCtxRetain);
    struct bracket b;
    CUresult r;
    bool first;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(pctx, dev);
    bracket_begin(&b, dev, true);
    first = b.d && b.d->primary_refs == 0;
    r = real(pctx, dev);
    if (r == ACCT_CUDA_SUCCESS && b.d) {
        if (first) {
            enum gm_account_reading source;
            b.d->primary_bytes = bracket_cost(&b, &source);
            acct_track_primary(dev, true, b.d->primary_bytes, source, H_cuDevicePrimaryCtxRetain,
                               CALLER);
        }
        b.d->primary_refs++;
    }
    pthread_mutex_unlock(&account.slow_lock);
    acct_end();
    return r;
}

static CUresult primary_release(PFN_cuDevicePrimaryCtxRelease real, uint8_t api, CUdevice dev,
                                void *ra)
{
    struct acct_device *d;
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(dev);
    pthread_mutex_lock(&account.slow_lock);
    r = real(dev);
    d = acct_device(dev);
    if (r == ACCT_CUDA_SUCCESS && d && d->primary_refs > 0 && --d->primary_refs == 0)
        acct_track_primary(dev, false, d->primary_bytes, GM_ACCOUNT_READING_NONE, api, ra);
    pthread_mutex_unlock(&account.slow_lock);
    acct_end();
    return r;
}

ACCT_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return primary_release(REAL(cuDevicePrimaryCtxRelease), H_cuDevicePrimaryCtxRelease, dev,
                           CALLER);
}

ACCT_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return primary_release(REAL(cuDevicePrimaryCtxRelease_v2), H_cuDevicePrimaryCtxRelease_v2, dev,
                           CALLER);
}

ACCT_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    PFN_cuCtxCreate_v2 real = REAL(cuCtxCreate_v2);
    struct bracket b;
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(pctx, flags, dev);
    bracket_begin(&b, dev, true);
    r = real(pctx, flags, dev);
    bracket_end(&b, r == ACCT_CUDA_SUCCESS, ACCT_RES_CONTEXT,
                r == ACCT_CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pctx : 0, H_cuCtxCreate_v2, CALLER);
    acct_end();
    return r;
}

ACCT_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, void *params, int n_params, unsigned flags,
                                    CUdevice dev)
{
    PFN_cuCtxCreate_v3 real = REAL(cuCtxCreate_v3);
    struct bracket b;
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(pctx, params, n_params, flags, dev);
    bracket_begin(&b, dev, true);
    r = real(pctx, params, n_params, flags, dev);
    bracket_end(&b, r == ACCT_CUDA_SUCCESS, ACCT_RES_CONTEXT,
                r == ACCT_CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pctx : 0, H_cuCtxCreate_v3, CALLER);
    acct_end();
    return r;
}

ACCT_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, void *params, unsigned flags, CUdevice dev)
{
    PFN_cuCtxCreate_v4 real = REAL(cuCtxCreate_v4);
    struct bracket b;
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(pctx, params, flags, dev);
    bracket_begin(&b, dev, true);
    r = real(pctx, params, flags, dev);
    bracket_end(&b, r == ACCT_CUDA_SUCCESS, ACCT_RES_CONTEXT,
                r == ACCT_CUDA_SUCCESS ? (uint64_t)(uintptr_t)*pctx : 0, H_cuCtxCreate_v4, CALLER);
    acct_end();
    return r;
}

ACCT_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    PFN_cuCtxDestroy_v2 real = REAL(cuCtxDestroy_v2);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(ctx);
    RESOURCE_END(cuCtxDestroy_v2, ACCT_RES_CONTEXT, ctx, real(ctx));
}

/* ---- modules, libraries, graphs ---- */

#define MEASURED(name, what, out, call)                                                            \
    do {                                                                                           \
        struct bracket b_;                                                                         \
        CUresult r_;                                                                               \
        bracket_begin(&b_, acct_current_device(), false);                                          \
        r_ = (call);                                                                               \
        bracket_end(&b_, r_ == ACCT_CUDA_SUCCESS && (out), what,                                   \
                    r_ == ACCT_CUDA_SUCCESS && (out) ? (uint64_t)(uintptr_t) * (out) : 0,          \
                    H_##name, CALLER);                                                             \
        acct_end();                                                                                \
        return r_;                                                                                 \
    } while (0)

ACCT_EXPORT CUresult cuModuleLoad(CUmodule *m, const char *fname)
{
    PFN_cuModuleLoad real = REAL(cuModuleLoad);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(m, fname);
    MEASURED(cuModuleLoad, ACCT_RES_MODULE, m, real(m, fname));
}

ACCT_EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image)
{
    PFN_cuModuleLoadData real = REAL(cuModuleLoadData);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(m, image);
    MEASURED(cuModuleLoadData, ACCT_RES_MODULE, m, real(m, image));
}

ACCT_EXPORT CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n,
                                        CUjit_option *opt, void **vals)
{
    PFN_cuModuleLoadDataEx real = REAL(cuModuleLoadDataEx);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(m, image, n, opt, vals);
    MEASURED(cuModuleLoadDataEx, ACCT_RES_MODULE, m, real(m, image, n, opt, vals));
}

ACCT_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *m, const void *image)
{
    PFN_cuModuleLoadFatBinary real = REAL(cuModuleLoadFatBinary);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(m, image);
    MEASURED(cuModuleLoadFatBinary, ACCT_RES_MODULE, m, real(m, image));
}

ACCT_EXPORT CUresult cuModuleUnload(CUmodule m)
{
    PFN_cuModuleUnload real = REAL(cuModuleUnload);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(m);
    RESOURCE_END(cuModuleUnload, ACCT_RES_MODULE, m, real(m));
}

ACCT_EXPORT CUresult cuLibraryLoadData(CUlibrary *lib, const void *code, CUjit_option *jo,
                                       void **jv, unsigned nj, CUlibraryOption *lo, void **lv,
                                       unsigned nl)
{
    PFN_cuLibraryLoadData real = REAL(cuLibraryLoadData);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(lib, code, jo, jv, nj, lo, lv, nl);
    MEASURED(cuLibraryLoadData, ACCT_RES_MODULE, lib, real(lib, code, jo, jv, nj, lo, lv, nl));
}

ACCT_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary *lib, const char *file, CUjit_option *jo,
                                           void **jv, unsigned nj, CUlibraryOption *lo, void **lv,
                                           unsigned nl)
{
    PFN_cuLibraryLoadFromFile real = REAL(cuLibraryLoadFromFile);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(lib, file, jo, jv, nj, lo, lv, nl);
    MEASURED(cuLibraryLoadFromFile, ACCT_RES_MODULE, lib, real(lib, file, jo, jv, nj, lo, lv, nl));
}

ACCT_EXPORT CUresult cuLibraryUnload(CUlibrary lib)
{
    PFN_cuLibraryUnload real = REAL(cuLibraryUnload);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(lib);
    RESOURCE_END(cuLibraryUnload, ACCT_RES_MODULE, lib, real(lib));
}

ACCT_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g,
                                                 unsigned long long flags)
{
    PFN_cuGraphInstantiateWithFlags real = REAL(cuGraphInstantiateWithFlags);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(e, g, flags);
    MEASURED(cuGraphInstantiateWithFlags, ACCT_RES_GRAPH, e, real(e, g, flags));
}

ACCT_EXPORT CUresult cuGraphInstantiateWithParams(CUgraphExec *e, CUgraph g, void *params)
{
    PFN_cuGraphInstantiateWithParams real = REAL(cuGraphInstantiateWithParams);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(e, g, params);
    MEASURED(cuGraphInstantiateWithParams, ACCT_RES_GRAPH, e, real(e, g, params));
}

ACCT_EXPORT CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *e, CUgraph g, void *params)
{
    PFN_cuGraphInstantiateWithParams_ptsz real = REAL(cuGraphInstantiateWithParams_ptsz);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(e, g, params);
    MEASURED(cuGraphInstantiateWithParams_ptsz, ACCT_RES_GRAPH, e, real(e, g, params));
}

ACCT_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *e, CUgraph g, CUgraphNode *err_node,
                                           char *log, size_t log_size)
{
    PFN_cuGraphInstantiate_v2 real = REAL(cuGraphInstantiate_v2);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(e, g, err_node, log, log_size);
    MEASURED(cuGraphInstantiate_v2, ACCT_RES_GRAPH, e, real(e, g, err_node, log, log_size));
}

ACCT_EXPORT CUresult cuGraphExecDestroy(CUgraphExec e)
{
    PFN_cuGraphExecDestroy real = REAL(cuGraphExecDestroy);
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    if (!acct_begin())
        return real(e);
    RESOURCE_END(cuGraphExecDestroy, ACCT_RES_GRAPH, e, real(e));
}

/* ---- cuGetProcAddress ---- */

ACCT_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
                                      unsigned long long flags)
{
    PFN_cuGetProcAddress real = REAL(cuGetProcAddress);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    r = real(symbol, pfn, version, flags);
    if (r == ACCT_CUDA_SUCCESS && pfn)
        *pfn = acct_proc_swap(symbol, *pfn, version, flags);
    return r;
}

ACCT_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                         unsigned long long flags, int *status)
{
    PFN_cuGetProcAddress_v2 real = REAL(cuGetProcAddress_v2);
    CUresult r;
    if (!real)
        return ACCT_CUDA_ERROR_NOT_INITIALIZED;
    r = real(symbol, pfn, version, flags, status);
    if (r == ACCT_CUDA_SUCCESS && pfn)
        *pfn = acct_proc_swap(symbol, *pfn, version, flags);
    return r;
}

/* ---- the backend's tables ---- */

static struct acct_hook hooks[H__COUNT] = {
#define ROW(n) [H_##n] = {#n, (void *)(uintptr_t)n, NULL, NULL},
    CUDA_HOOKS(ROW)
#undef ROW
};

/* cuGetProcAddress's names (no version suffix) of the hooked variants; a name whose ABI
 * depends on the version in ways not listed here (cuCtxCreate, cuGraphInstantiate) is
 * matched by address only. */
static const struct acct_proc_name names[] = {
    {"cuMemAlloc", 3020, false, H_cuMemAlloc_v2},
    {"cuMemAllocPitch", 3020, false, H_cuMemAllocPitch_v2},
    {"cuMemAllocManaged", 6000, false, H_cuMemAllocManaged},
    {"cuMemFree", 3020, false, H_cuMemFree_v2},
    {"cuMemAllocAsync", 11020, false, H_cuMemAllocAsync},
    {"cuMemAllocAsync", 11020, true, H_cuMemAllocAsync_ptsz},
    {"cuMemAllocFromPoolAsync", 11020, false, H_cuMemAllocFromPoolAsync},
    {"cuMemAllocFromPoolAsync", 11020, true, H_cuMemAllocFromPoolAsync_ptsz},
    {"cuMemFreeAsync", 11020, false, H_cuMemFreeAsync},
    {"cuMemFreeAsync", 11020, true, H_cuMemFreeAsync_ptsz},
    {"cuMemPoolCreate", 11020, false, H_cuMemPoolCreate},
    {"cuMemPoolDestroy", 11020, false, H_cuMemPoolDestroy},
    {"cuMemCreate", 10020, false, H_cuMemCreate},
    {"cuMemRelease", 10020, false, H_cuMemRelease},
    {"cuMemMap", 10020, false, H_cuMemMap},
    {"cuMemUnmap", 10020, false, H_cuMemUnmap},
    {"cuMemAddressReserve", 10020, false, H_cuMemAddressReserve},
    {"cuMemAddressFree", 10020, false, H_cuMemAddressFree},
    {"cuMemHostAlloc", 2020, false, H_cuMemHostAlloc},
    {"cuMemAllocHost", 3020, false, H_cuMemAllocHost_v2},
    {"cuMemFreeHost", 2000, false, H_cuMemFreeHost},
    {"cuMemHostRegister", 6050, false, H_cuMemHostRegister_v2},
    {"cuMemHostUnregister", 4000, false, H_cuMemHostUnregister},
    {"cuDevicePrimaryCtxRetain", 7000, false, H_cuDevicePrimaryCtxRetain},
    {"cuDevicePrimaryCtxRelease", 11000, false, H_cuDevicePrimaryCtxRelease_v2},
    {"cuModuleLoad", 2000, false, H_cuModuleLoad},
    {"cuModuleLoadData", 2000, false, H_cuModuleLoadData},
    {"cuModuleLoadDataEx", 2010, false, H_cuModuleLoadDataEx},
    {"cuModuleLoadFatBinary", 2000, false, H_cuModuleLoadFatBinary},
    {"cuModuleUnload", 2000, false, H_cuModuleUnload},
    {"cuLibraryLoadData", 12000, false, H_cuLibraryLoadData},
    {"cuLibraryLoadFromFile", 12000, false, H_cuLibraryLoadFromFile},
    {"cuLibraryUnload", 12000, false, H_cuLibraryUnload},
    {"cuGraphInstantiateWithFlags", 11040, false, H_cuGraphInstantiateWithFlags},
    {"cuGraphExecDestroy", 10000, false, H_cuGraphExecDestroy},
    {"cuGetProcAddress", 12000, false, H_cuGetProcAddress_v2},
};

const struct acct_backend acct_cuda_backend = {
    "cuda", "libcuda.so.1", hooks, H__COUNT, names, sizeof(names) / sizeof(names[0]),
};

const char *acct_api_name(uint8_t api)
{
    return api < H__COUNT ? hooks[api].name : "?";
}
