/* SPDX-License-Identifier: MIT */
/* fake_cuda_int.h - what the files of the fake libcuda.so.1 share: the driver types we
 * declare ourselves (driver-abi.md §1.2), the process state of fake_cuda.c (its lock, its
 * configuration, the contexts) and its helpers for devices, charges and allocations.
 * Everything here is hidden; only the driver entry points are exported. */
#ifndef GM_FAKE_CUDA_INT_H
#define GM_FAKE_CUDA_INT_H

#include "device/cuda_abi.h" /* the driver's types, as gpumem declares them */
#include "fake_common.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CUDA_ERROR_FILE_NOT_FOUND = 301,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_SUPPORTED = 801
};

#define HIDDEN __attribute__((visibility("hidden")))

/* A context: the primary one of a device (fake_primary[], reference-counted) or an
 * explicit one (cuCtxCreate_v2, refs 1 until destroyed). */
struct fake_ctx_st {
    int device; /* physical */
    int refs;
    bool explicit_; /* made by cuCtxCreate_v2 */
};

/* What a fake allocation is, for the calls that free it and for its charge. */
enum fake_alloc_kind {
    FAKE_ALLOC_DEVICE = 0, /* cuMemAlloc_v2, cuMemAllocPitch_v2: charged in granules */
    FAKE_ALLOC_ASYNC,      /* stream-ordered: charged exactly (the fake's pools keep nothing) */
    FAKE_ALLOC_MANAGED,    /* on the device only where touched: charged nothing */
    FAKE_ALLOC_HOST        /* pinned host memory: no device charge */
};

extern pthread_mutex_t fake_lock HIDDEN;
extern struct fake_config fake_cfg HIDDEN;
extern struct fake_ctx_st fake_primary[FAKE_MAX_DEV] HIDDEN;
extern __thread struct fake_ctx_st *fake_current HIDDEN;

/* cuInit succeeded. */
bool fake_initialised(void) HIDDEN;
/* The physical index of CUDA ordinal 'd', -1 when out of range; and back (-1 hidden). */
int fake_phys(CUdevice d) HIDDEN;
int fake_ordinal(int phys) HIDDEN;

/* Charge 'delta' bytes (may be negative) of modules, libraries, graphs or limits to
 * physical device 'dev', or of explicit contexts (ctx true), and publish the process's
 * usage.  Call with fake_lock held.  CUDA_ERROR_OUT_OF_MEMORY when a positive charge does
 * not fit (nothing charged then). */
CUresult fake_charge(int dev, int64_t delta, bool ctx) HIDDEN;

/* Map 'n' bytes, record them as an allocation of 'kind' on physical 'dev' charged 'charge'
 * bytes, and give its address.  Takes fake_lock.  CUDA_ERROR_OUT_OF_MEMORY past the
 * device's capacity or GPUMEM_FAKE_OOM_AFTER. */
CUresult fake_alloc_new(CUdeviceptr *dptr, size_t n, int dev, uint64_t charge, int kind) HIDDEN;
/* Free the allocation at 'p' when its kind is in 'kinds' (1 << enum fake_alloc_kind).
 * Takes fake_lock.  CUDA_ERROR_INVALID_VALUE when there is none. */
CUresult fake_alloc_free(CUdeviceptr p, unsigned kinds) HIDDEN;

/* Bytes rounded up to the configured granule. */
uint64_t fake_granules(uint64_t n) HIDDEN;

/* The exported entry point 'name' of this library for cuGetProcAddress (fake_cuda_proc.c):
 * NULL when the fake has none. */
void *fake_proc_lookup(const char *name, int version, unsigned long long flags) HIDDEN;

#define NEED_INIT()                                                                                \
    do {                                                                                           \
        if (!fake_initialised())                                                                   \
            return CUDA_ERROR_NOT_INITIALIZED;                                                     \
    } while (0)

#define NEED_CTX()                                                                                 \
    do {                                                                                           \
        NEED_INIT();                                                                               \
        if (!fake_current || fake_current->refs <= 0)                                              \
            return CUDA_ERROR_INVALID_CONTEXT;                                                     \
    } while (0)

#endif
