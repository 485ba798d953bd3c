/* SPDX-License-Identifier: MIT */
/* fake_cuda_graph.c - the fake libcuda.so.1's context-independent libraries (cuLibrary*,
 * CUDA 12) and CUDA graphs.
 *
 *   cuLibraryLoadData / cuLibraryLoadFromFile  charge GPUMEM_FAKE_MODULE_BYTES to the device
 *       of the current context (none without one: a real driver loads it into each context
 *       lazily), given back by cuLibraryUnload;
 *   cuGraphInstantiateWithFlags / WithParams   charge GPUMEM_FAKE_GRAPH_BYTES to the current
 *       device until cuGraphExecDestroy;
 *   cuGraphCreate, cuGraphDestroy, cuGraphLaunch: empty graphs, launched as no-ops. */
#include "fake_cuda_int.h"

#include <stdio.h>
#include <stdlib.h>

struct fake_loaded {
    int device; /* physical, -1: charged to no device */
    uint64_t charge;
};

/* A library or a graph exec charged 'bytes' to the current context's device. */
static CUresult loaded_new(void **out, uint64_t bytes)
{
    struct fake_loaded *l;
    CUresult r = CUDA_SUCCESS;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(l = calloc(1, sizeof(*l))))
        return CUDA_ERROR_OUT_OF_MEMORY;
    l->device = fake_current && fake_current->refs > 0 ? fake_current->device : -1;
    l->charge = l->device >= 0 ? bytes : 0;
    if (l->charge) {
        pthread_mutex_lock(&fake_lock);
        r = fake_charge(l->device, (int64_t)l->charge, false);
        pthread_mutex_unlock(&fake_lock);
    }
    if (r != CUDA_SUCCESS) {
        free(l);
        return r;
    }
    *out = l;
    return CUDA_SUCCESS;
}

static CUresult loaded_free(void *p)
{
    struct fake_loaded *l = p;
    if (!l)
        return CUDA_ERROR_INVALID_HANDLE;
    if (l->charge) {
        pthread_mutex_lock(&fake_lock);
        fake_charge(l->device, -(int64_t)l->charge, false);
        pthread_mutex_unlock(&fake_lock);
    }
    free(l);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuLibraryLoadData(void **lib, const void *code, CUjit_option *jo, void **jv,
                                    unsigned nj, int *lo, void **lv, unsigned nl)
{
    (void)jo;
    (void)jv;
    (void)nj;
    (void)lo;
    (void)lv;
    (void)nl;
    NEED_INIT();
    if (!code)
        return CUDA_ERROR_INVALID_VALUE;
    return loaded_new(lib, fake_cfg.module_bytes);
}

/* The file must exist; its contents are not looked at. */
FAKE_API CUresult cuLibraryLoadFromFile(void **lib, const char *file, CUjit_option *jo, void **jv,
                                        unsigned nj, int *lo, void **lv, unsigned nl)
{
    FILE *f;
    NEED_INIT();
    if (!file)
        return CUDA_ERROR_INVALID_VALUE;
    if (!(f = fopen(file, "rb")))
        return CUDA_ERROR_FILE_NOT_FOUND;
    fclose(f);
    return cuLibraryLoadData(lib, file, jo, jv, nj, lo, lv, nl);
}

FAKE_API CUresult cuLibraryUnload(void *lib)
{
    NEED_INIT();
    return loaded_free(lib);
}

FAKE_API CUresult cuGraphCreate(void **g, unsigned flags)
{
    NEED_INIT();
    if (!g || flags)
        return CUDA_ERROR_INVALID_VALUE;
    *g = calloc(1, 1);
    return *g ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

FAKE_API CUresult cuGraphDestroy(void *g)
{
    NEED_INIT();
    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    free(g);
    return CUDA_SUCCESS;
}

FAKE_API CUresult cuGraphInstantiateWithFlags(void **e, void *g, unsigned long long flags)
{
    (void)flags;
    NEED_CTX();
    if (!g)
        return CUDA_ERROR_INVALID_VALUE;
    return loaded_new(e, fake_cfg.graph_bytes);
}

FAKE_API CUresult cuGraphInstantiateWithParams(void **e, void *g, void *params)
{
    (void)params;
    return cuGraphInstantiateWithFlags(e, g, 0);
}

FAKE_API CUresult cuGraphInstantiateWithParams_ptsz(void **e, void *g, void *params)
{
    return cuGraphInstantiateWithParams(e, g, params);
}

FAKE_API CUresult cuGraphExecDestroy(void *e)
{
    NEED_INIT();
    return loaded_free(e);
}

FAKE_API CUresult cuGraphLaunch(void *e, CUstream s)
{
    (void)s;
    NEED_CTX();
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
