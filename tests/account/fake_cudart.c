/* SPDX-License-Identifier: MIT */
/* fake_cudart.c - a fake libcuda runtime, libcudart.so.12, for gpumem account's tests: it
 * reaches the driver the way the real runtime does, by dlopen("libcuda.so.1") and
 * dlsym(handle, "cuGetProcAddress_v2"), then cuGetProcAddress_v2 for every other entry
 * point, so that an interposer that only defines symbols sees none of its calls.  Calls
 * made through it are credited to its caller (the runtime passes calls through). */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define API __attribute__((visibility("default")))

typedef int CUresult;
typedef CUresult (*get_proc_fn)(const char *, void **, int, unsigned long long, int *);

static pthread_once_t once = PTHREAD_ONCE_INIT;
static get_proc_fn get_proc;
static CUresult (*cu_init)(unsigned);
static CUresult (*cu_retain)(void **, int);
static CUresult (*cu_set_current)(void *);
static CUresult (*cu_alloc)(unsigned long long *, size_t);
static CUresult (*cu_free)(unsigned long long);

static void *proc(const char *name)
{
    void *fn = NULL;
    int status = 0;
    return get_proc && get_proc(name, &fn, 12040, 0, &status) == 0 ? fn : NULL;
}

#define BIND(var, name)                                                                            \
    do {                                                                                           \
        void *p_ = proc(name);                                                                     \
        __builtin_memcpy(&var, &p_, sizeof(p_));                                                   \
    } while (0)

static void load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    void *p = h ? dlsym(h, "cuGetProcAddress_v2") : NULL;
    __builtin_memcpy(&get_proc, &p, sizeof(p));
    BIND(cu_init, "cuInit");
    BIND(cu_retain, "cuDevicePrimaryCtxRetain");
    BIND(cu_set_current, "cuCtxSetCurrent");
    BIND(cu_alloc, "cuMemAlloc");
    BIND(cu_free, "cuMemFree");
}

/* cudaSetDevice + the runtime's lazy initialisation: the primary context, made current. */
API int cudart_init(int dev)
{
    void *ctx;
    pthread_once(&once, load);
    if (!cu_init || !cu_retain || !cu_set_current || cu_init(0) != 0 || cu_retain(&ctx, dev) != 0)
        return -1;
    return cu_set_current(ctx) == 0 ? 0 : -1;
}

API int cudaMalloc(void **p, size_t n)
{
    unsigned long long d = 0;
    pthread_once(&once, load);
    if (!cu_alloc || cu_alloc(&d, n) != 0)
        return 2; /* cudaErrorMemoryAllocation */
    *p = (void *)(uintptr_t)d;
    return 0;
}

API int cudaFree(void *p)
{
    pthread_once(&once, load);
    return cu_free && cu_free((unsigned long long)(uintptr_t)p) == 0 ? 0 : 1;
}

/* What PyTorch uses for the VMM API (c10/cuda/driver_api.cpp). */
API int cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags)
{
    int status = 0;
    pthread_once(&once, load);
    return get_proc && get_proc(symbol, fn, 12040, flags, &status) == 0 ? 0 : 1;
}
