/* SPDX-License-Identifier: MIT */
/* fake_cuda_mem.c - the fake libcuda.so.1's other kinds of memory: pitched, managed,
 * stream-ordered (with pools), the virtual memory management API and pinned host memory.
 *
 * Charges (what NVML's usedGpuMemory of the process shows):
 *   cuMemAllocPitch_v2       pitch (width rounded up to 512) x height, in granules
 *   cuMemAllocManaged        nothing: managed memory is on the device only where touched
 *   cuMemAllocAsync, ...     the exact bytes, until cuMemFreeAsync (the fake's pools keep no
 *                            reserve: a real pool keeps up to its release threshold)
 *   cuMemCreate              its size (a multiple of the granule, else INVALID_VALUE) from
 *                            creation until it is released and no mapping of it is left
 *   cuMemAddressReserve      nothing (address space: a PROT_NONE mapping)
 *   cuMemMap / cuMemUnmap    make the range usable / PROT_NONE again; nothing charged
 *   pinned host memory       nothing on the device */
#include "fake_cuda_int.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* CUmemAllocationProp / CUmemPoolProps start alike: {type, handle types, {location type,
 * location id}}: the device is the location id (a CUDA ordinal). */
struct fake_location_prefix {
    int type;
    int handle_types;
    int location_type;
    int location_id;
};

static int prop_device(const void *prop)
{
    struct fake_location_prefix p;
    memcpy(&p, prop, sizeof(p));
    return p.location_type == 1 /* CU_MEM_LOCATION_TYPE_DEVICE */ ? fake_phys(p.location_id) : -1;
}

FAKE_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                     unsigned elem)
{
    size_t p, n;
    CUresult r;
    NEED_CTX();
    if (!dptr || !pitch || !width || !height || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    p = (width + 511) / 512 * 512;
    if (height > SIZE_MAX / p)
        return CUDA_ERROR_INVALID_VALUE;
    n = p * height;
    r = fake_alloc_new(dptr, n, fake_current->device, fake_granules(n), FAKE_ALLOC_DEVICE);
    if (r == CUDA_SUCCESS)
        *pitch = p;
    return r;
}

FAKE_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t n, unsigned flags)
{
    (void)flags;
    NEED_CTX();
    if (!dptr || !n)
        return CUDA_ERROR_INVALID_VALUE;
    return fake_alloc_new(dptr, n, fake_current->device, 0, FAKE_ALLOC_MANAGED);
}

/* ---- stream-ordered memory and pools ---- */

struct fake_pool {
    int device; /* physical */
};

FAKE_API CUresult cuMemPoolCreate(void **pool, const void *props)
{
    struct fake_pool *p;
    int dev;
    NEED_INIT();
    if (!pool || !props || (dev = prop_device(props)) < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(p = calloc(1, sizeof(*p))))
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->device = dev;
    *pool = p;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemPoolDestroy(void *pool)
{
    NEED_INIT();
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    free(pool);
    return CUDA_SUCCESS;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t n, int dev)
{
    if (!dptr || !n)
        return CUDA_ERROR_INVALID_VALUE;
    return fake_alloc_new(dptr, n, dev, n, FAKE_ALLOC_ASYNC);
}

FAKE_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t n, CUstream s)
{
    (void)s;
    NEED_CTX();
    return alloc_async(dptr, n, fake_current->device);
}

FAKE_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s)
{
    return cuMemAllocAsync(dptr, n, s);
}

FAKE_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t n, void *pool, CUstream s)
{
    (void)s;
    NEED_CTX();
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, n, ((struct fake_pool *)pool)->device);
}

FAKE_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t n, void *pool, CUstream s)
{
    return cuMemAllocFromPoolAsync(dptr, n, pool, s);
}

FAKE_API CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s)
{
    (void)s;
    NEED_CTX();
    return fake_alloc_free(p, 1u << FAKE_ALLOC_ASYNC | 1u << FAKE_ALLOC_DEVICE);
}

FAKE_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s)
{
    return cuMemFreeAsync(p, s);
}

/* ---- virtual memory management ---- */

struct fake_handle {
    size_t size;
    int device; /* physical */
    int maps;   /* live mappings of it */
    bool released;
};

struct fake_mapping {
    CUdeviceptr va;
    size_t size;
    struct fake_handle *h;
};

#define MAX_MAPPINGS 4096
static struct fake_mapping mappings[MAX_MAPPINGS]; /* under fake_lock */
static size_t n_mappings;

/* Give the handle's memory back once it is released and unmapped (fake_lock held). */
static void handle_settle(struct fake_handle *h)
{
    if (h->released && h->maps == 0) {
        fake_charge(h->device, -(int64_t)h->size, false);
        free(h);
    }
}

FAKE_API CUresult cuMemCreate(unsigned long long *handle, size_t size, const void *prop,
                              unsigned long long flags)
{
    struct fake_handle *h;
    int dev;
    CUresult r;
    (void)flags;
    NEED_INIT();
    if (!handle || !prop || !size || size % fake_cfg.granule || (dev = prop_device(prop)) < 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(h = calloc(1, sizeof(*h))))
        return CUDA_ERROR_OUT_OF_MEMORY;
    h->size = size;
    h->device = dev;
    pthread_mutex_lock(&fake_lock);
    r = fake_charge(dev, (int64_t)size, false);
    pthread_mutex_unlock(&fake_lock);
    if (r != CUDA_SUCCESS) {
        free(h);
        return r;
    }
    *handle = (unsigned long long)(uintptr_t)h;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemRelease(unsigned long long handle)
{
    struct fake_handle *h = (struct fake_handle *)(uintptr_t)handle;
    NEED_INIT();
    if (!h || h->released)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fake_lock);
    h->released = true;
    handle_settle(h);
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
                                      unsigned long long flags)
{
    void *p;
    (void)align;
    (void)addr;
    (void)flags;
    NEED_INIT();
    if (!ptr || !size || size % fake_cfg.granule)
        return CUDA_ERROR_INVALID_VALUE;
    p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    NEED_INIT();
    if (!ptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    return munmap((void *)(uintptr_t)ptr, size) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, unsigned long long handle,
                           unsigned long long flags)
{
    struct fake_handle *h = (struct fake_handle *)(uintptr_t)handle;
    void *p;
    (void)flags;
    NEED_INIT();
    if (!ptr || !h || h->released || offset || size != h->size)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fake_lock);
    if (n_mappings == MAX_MAPPINGS) {
        pthread_mutex_unlock(&fake_lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p = mmap((void *)(uintptr_t)ptr, size, PROT_READ | PROT_WRITE,
             MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        pthread_mutex_unlock(&fake_lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    mappings[n_mappings++] = (struct fake_mapping){ptr, size, h};
    h->maps++;
    pthread_mutex_unlock(&fake_lock);
    return CUDA_SUCCESS;
}

/* Unmaps every mapping inside [ptr, ptr + size), as the driver does for a range. */
FAKE_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    int found = 0;
    NEED_INIT();
    if (!ptr || !size)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fake_lock);
    for (size_t k = 0; k < n_mappings;) {
        struct fake_mapping m = mappings[k];
        if (m.va >= ptr && m.va - ptr < size) {
            mappings[k] = mappings[--n_mappings];
            mmap((void *)(uintptr_t)m.va, m.size, PROT_NONE,
                 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            m.h->maps--;
            handle_settle(m.h);
            found = 1;
        } else {
            k++;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FAKE_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const void *desc, size_t count)
{
    NEED_INIT();
    return ptr && size && desc && count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- pinned host memory ---- */

FAKE_API CUresult cuMemHostAlloc(void **pp, size_t n, unsigned flags)
{
    CUdeviceptr p;
    CUresult r;
    (void)flags;
    NEED_CTX();
    if (!pp || !n)
        return CUDA_ERROR_INVALID_VALUE;
    r = fake_alloc_new(&p, n, fake_current->device, 0, FAKE_ALLOC_HOST);
    if (r == CUDA_SUCCESS)
        *pp = (void *)(uintptr_t)p;
    return r;
}

FAKE_API CUresult cuMemAllocHost_v2(void **pp, size_t n)
{
    return cuMemHostAlloc(pp, n, 0);
}

FAKE_API CUresult cuMemFreeHost(void *p)
{
    NEED_INIT();
    return fake_alloc_free((CUdeviceptr)(uintptr_t)p, 1u << FAKE_ALLOC_HOST);
}

#define MAX_REGISTERED 256
static void *registered[MAX_REGISTERED]; /* under fake_lock */

FAKE_API CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags)
{
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    (void)flags;
    NEED_CTX();
    if (!p || !n)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fake_lock);
    for (int k = 0; k < MAX_REGISTERED; k++) {
        if (registered[k] == p) {
            r = 712; /* CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED */
            break;
        }
    }
    for (int k = 0; k < MAX_REGISTERED && r == CUDA_ERROR_OUT_OF_MEMORY; k++) {
        if (!registered[k]) {
            registered[k] = p;
            r = CUDA_SUCCESS;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    return r;
}

FAKE_API CUresult cuMemHostUnregister(void *p)
{
    CUresult r = 713; /* CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED */
    NEED_INIT();
    pthread_mutex_lock(&fake_lock);
    for (int k = 0; k < MAX_REGISTERED; k++) {
        if (p && registered[k] == p) {
            registered[k] = NULL;
            r = CUDA_SUCCESS;
            break;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    return r;
}
