/* SPDX-License-Identifier: MIT */
/* fake_nccl.c - a fake libnccl.so.2 for gpumem account's tests: linked against
 * libcuda.so.1 and calling the driver directly, as NCCL does: device buffers with
 * cuMemAlloc_v2, its cuMem path (one physical handle mapped into a reserved range), and
 * pinned host memory for its proxy. */
#include <stddef.h>
#include <stdint.h>

#define API __attribute__((visibility("default")))

typedef int CUresult;
CUresult cuMemAlloc_v2(unsigned long long *p, size_t n);
CUresult cuMemFree_v2(unsigned long long p);
CUresult cuMemAddressReserve(unsigned long long *p, size_t size, size_t align,
                             unsigned long long addr, unsigned long long flags);
CUresult cuMemCreate(unsigned long long *h, size_t size, const void *prop,
                     unsigned long long flags);
CUresult cuMemMap(unsigned long long p, size_t size, size_t offset, unsigned long long h,
                  unsigned long long flags);
CUresult cuMemHostAlloc(void **pp, size_t n, unsigned flags);
CUresult cuCtxGetDevice(int *dev);

struct prop {
    int type, handle_types, location_type, location_id;
    void *win32;
    unsigned char flags[8];
};

/* A communicator: 'dev_bytes' of buffers, 'vmm_bytes' through cuMem, 'host_bytes' pinned. */
API int nccl_comm_init(size_t dev_bytes, size_t vmm_bytes, size_t host_bytes)
{
    unsigned long long p, va, h;
    void *host;
    int dev;
    struct prop pr = {1, 0, 1, 0, NULL, {0}};
    if (cuCtxGetDevice(&dev) != 0)
        return -1;
    pr.location_id = dev;
    if (dev_bytes && cuMemAlloc_v2(&p, dev_bytes) != 0)
        return -1;
    if (vmm_bytes && (cuMemAddressReserve(&va, vmm_bytes, 0, 0, 0) != 0 ||
                      cuMemCreate(&h, vmm_bytes, &pr, 0) != 0 || cuMemMap(va, vmm_bytes, 0, h, 0)))
        return -1;
    if (host_bytes && cuMemHostAlloc(&host, host_bytes, 0) != 0)
        return -1;
    return 0;
}

API int nccl_buffer(size_t n, unsigned long long *p)
{
    return cuMemAlloc_v2(p, n) == 0 ? 0 : -1;
}

API int nccl_buffer_free(unsigned long long p)
{
    return cuMemFree_v2(p) == 0 ? 0 : -1;
}
