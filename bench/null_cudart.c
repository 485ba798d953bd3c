/* SPDX-License-Identifier: MIT */
/* null_cudart.c - a libcudart.so.12 for bench/account.sh: cudaMalloc and cudaFree forward to
 * the driver, so that the interposer must walk the stack past the runtime to find the
 * caller (its slow path). */
#include <stddef.h>
#include <stdint.h>

#define API __attribute__((visibility("default")))

int cuMemAlloc_v2(unsigned long long *p, size_t n);
int cuMemFree_v2(unsigned long long p);

API int cudaMalloc(void **p, size_t n)
{
    unsigned long long d;
    int r = cuMemAlloc_v2(&d, n);
    *p = (void *)(uintptr_t)d;
    return r;
}

API int cudaFree(void *p)
{
    return cuMemFree_v2((unsigned long long)(uintptr_t)p);
}
