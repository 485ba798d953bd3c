/* SPDX-License-Identifier: MIT */
/* fake_cublas.c - a fake libcublas.so.12 for gpumem account's tests: it finds the driver
 * with dlopen("libcuda.so.1") and dlsym on that handle (a lookup LD_PRELOAD alone does not
 * see), and allocates its workspace with cuMemAlloc_v2 and stream-ordered memory with
 * cuMemAllocAsync. */
#include <dlfcn.h>
#include <stddef.h>
#include <string.h>

#define API __attribute__((visibility("default")))

typedef int CUresult;

static void *driver(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    return h ? dlsym(h, name) : NULL;
}

/* A handle: a workspace of 'workspace' bytes, and 'async_bytes' of stream-ordered memory. */
API int cublas_create(size_t workspace, size_t async_bytes, unsigned long long *ws,
                      unsigned long long *scratch)
{
    CUresult (*alloc)(unsigned long long *, size_t);
    CUresult (*alloc_async)(unsigned long long *, size_t, void *);
    void *a = driver("cuMemAlloc_v2"), *b = driver("cuMemAllocAsync");
    if (!a || !b)
        return -1;
    memcpy(&alloc, &a, sizeof(a));
    memcpy(&alloc_async, &b, sizeof(b));
    if (workspace && alloc(ws, workspace) != 0)
        return -1;
    if (async_bytes && alloc_async(scratch, async_bytes, NULL) != 0)
        return -1;
    return 0;
}

API int cublas_free_scratch(unsigned long long scratch)
{
    CUresult (*free_async)(unsigned long long, void *);
    void *f = driver("cuMemFreeAsync");
    if (!f)
        return -1;
    memcpy(&free_async, &f, sizeof(f));
    return free_async(scratch, NULL) == 0 ? 0 : -1;
}
