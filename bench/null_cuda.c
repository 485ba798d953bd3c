/* SPDX-License-Identifier: MIT */
/* null_cuda.c - a libcuda.so.1 that does nothing, for bench/account.sh: cuMemAlloc_v2 hands
 * out addresses from a counter and cuMemFree_v2 succeeds, so that a timed loop measures the
 * interposer's own cost per call and nothing of a driver.  Never installed. */
#include <stdatomic.h>
#include <stddef.h>

#define API __attribute__((visibility("default")))

typedef int CUresult;

static _Atomic unsigned long long next = 0x7f0000000000ull;

API CUresult cuMemAlloc_v2(unsigned long long *p, size_t n)
{
    *p = atomic_fetch_add(&next, (n + 255) & ~(size_t)255);
    return 0;
}

API CUresult cuMemFree_v2(unsigned long long p)
{
    (void)p;
    return 0;
}

API CUresult cuCtxGetDevice(int *d)
{
    *d = 0;
    return 0;
}
