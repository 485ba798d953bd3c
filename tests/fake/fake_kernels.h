/* SPDX-License-Identifier: MIT */
/* fake_kernels.h - CPU kernels of the fake libcuda.so.1, found by .entry name.
 *
 * A kernel gets the launch dimensions and cuLaunchKernel's params (params[i] points at the
 * i-th argument's value; a device pointer is a host address in the fake).  It returns a
 * CUresult: 0, or 700 (CUDA_ERROR_ILLEGAL_ADDRESS) for an access outside an allocation. */
#ifndef GM_FAKE_KERNELS_H
#define GM_FAKE_KERNELS_H

#include <stddef.h>

struct fake_launch {
    unsigned grid[3];
    unsigned block[3];
    unsigned shared_bytes;
};

typedef int (*fake_kernel_fn)(const struct fake_launch *l, void **params);

/* Whether [p, p+n) lies inside one live allocation of the fake (fake_cuda.c). */
int fake_in_allocation(unsigned long long p, size_t n);

/* The kernels of gpumem measure (fake_measure_kernels.c); NULL for another name. */
fake_kernel_fn fake_measure_kernel(const char *name);

#endif
