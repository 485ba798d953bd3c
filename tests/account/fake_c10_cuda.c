/* SPDX-License-Identifier: MIT */
/* fake_c10_cuda.c - a fake libc10_cuda.so for gpumem account's tests: PyTorch's caching
 * allocator in outline.  Segments come from cudaMalloc (the runtime, so through
 * cuGetProcAddress), expandable segments from the VMM API whose entry points it gets with
 * cudaGetDriverEntryPoint, as c10/cuda/driver_api.cpp does. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define API __attribute__((visibility("default")))

typedef int CUresult;
int cudaMalloc(void **p, size_t n);
int cudaFree(void *p);
int cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags);

API void *c10_raw_alloc(size_t n)
{
    void *p = NULL;
    return cudaMalloc(&p, n) == 0 ? p : NULL;
}

API int c10_raw_free(void *p)
{
    return cudaFree(p);
}

/* CUmemAllocationProp: pinned memory on device 'dev'. */
struct prop {
    int type, handle_types, location_type, location_id;
    void *win32;
    unsigned char flags[8];
};

#define MAX_PAGES 64
static unsigned long long handles[MAX_PAGES];

#define ENTRY(var, name)                                                                           \
    do {                                                                                           \
        void *p_ = NULL;                                                                           \
        if (cudaGetDriverEntryPoint(name, &p_, 0) != 0 || !p_)                                     \
            return -1;                                                                             \
        memcpy(&var, &p_, sizeof(p_));                                                             \
    } while (0)

/* An expandable segment of 'pages' pages of 'page' bytes: one address range reserved, one
 * physical handle mapped per page.  *va its address. */
API int c10_expand(int dev, size_t page, int pages, unsigned long long *va)
{
    CUresult (*reserve)(unsigned long long *, size_t, size_t, unsigned long long,
                        unsigned long long);
    CUresult (*create)(unsigned long long *, size_t, const void *, unsigned long long);
    CUresult (*map)(unsigned long long, size_t, size_t, unsigned long long, unsigned long long);
    struct prop pr = {1, 0, 1, dev, NULL, {0}};
    if (pages > MAX_PAGES)
        return -1;
    ENTRY(reserve, "cuMemAddressReserve");
    ENTRY(create, "cuMemCreate");
    ENTRY(map, "cuMemMap");
    if (reserve(va, page * (size_t)pages * 2, 0, 0, 0) != 0)
        return -1;
    for (int i = 0; i < pages; i++)
        if (create(&handles[i], page, &pr, 0) != 0 || map(*va + i * page, page, 0, handles[i], 0))
            return -1;
    return 0;
}

/* Give back pages [first, first + count) of the segment: one unmap of the whole run, then
 * each handle released, as PyTorch's expandable segments do. */
API int c10_shrink(unsigned long long va, size_t page, int first, int count)
{
    CUresult (*unmap)(unsigned long long, size_t);
    CUresult (*release)(unsigned long long);
    ENTRY(unmap, "cuMemUnmap");
    ENTRY(release, "cuMemRelease");
    if (unmap(va + (size_t)first * page, (size_t)count * page) != 0)
        return -1;
    for (int i = first; i < first + count; i++)
        if (release(handles[i]) != 0)
            return -1;
    return 0;
}
