/* SPDX-License-Identifier: MIT */
/* fake_measure_kernels.c - CPU versions of the kernels of src/measure/kernels.cu, run by
 * the fake libcuda.so.1 when gpumem measure launches them by name.  Same arguments, same
 * arithmetic (fmaf where the kernel uses fmaf), one loop iteration per GPU thread; a launch
 * with too few threads computes only the elements its threads cover, and an access outside
 * an allocation fails with 700 (CUDA_ERROR_ILLEGAL_ADDRESS) as on a GPU.
 * GPUMEM_FAKE_KERNEL_CORRUPT=1 (or =gm_linear_fwd, =gm_linear_bwd_data) makes that kernel
 * wrong by 1.0 in its first element. */
#include "fake_common.h"
#include "fake_kernels.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ILLEGAL_ADDRESS 700

/* GPUMEM_FAKE_KERNEL_CORRUPT=NAME (1 means gm_linear_fwd): that kernel's first result is
 * off by 1.0, to test that measure's checks see a wrong result */
static int corrupt(const char *kernel)
{
    const char *v = getenv("GPUMEM_FAKE_KERNEL_CORRUPT");
    if (!v)
        return 0;
    return !strcmp(v, kernel) || (!strcmp(v, "1") && !strcmp(kernel, "gm_linear_fwd"));
}

static uint64_t threads(const struct fake_launch *l)
{
    return (uint64_t)l->grid[0] * l->grid[1] * l->grid[2] * l->block[0] * l->block[1] * l->block[2];
}

static float *fptr(void **params, int i)
{
    unsigned long long p;
    memcpy(&p, params[i], sizeof(p));
    return (float *)(uintptr_t)p;
}

static unsigned u32(void **params, int i)
{
    unsigned v;
    memcpy(&v, params[i], sizeof(v));
    return v;
}

static float f32(void **params, int i)
{
    float v;
    memcpy(&v, params[i], sizeof(v));
    return v;
}

static int ok(const float *p, uint64_t n_floats)
{
    return n_floats == 0 ||
           fake_in_allocation((unsigned long long)(uintptr_t)p, (size_t)n_floats * sizeof(float));
}

/* gm_linear_fwd(x, w, b, y, rows, in, out, relu) */
static int k_linear_fwd(const struct fake_launch *l, void **params)
{
    const float *x = fptr(params, 0), *w = fptr(params, 1), *b = fptr(params, 2);
    float *y = fptr(params, 3);
    unsigned rows = u32(params, 4), in = u32(params, 5), out = u32(params, 6);
    unsigned relu = u32(params, 7);
    uint64_t n = (uint64_t)rows * out, t = threads(l);
    if (n > t)
        n = t;
    if (!ok(x, (uint64_t)rows * in) || !ok(w, (uint64_t)out * in) || !ok(b, out) || !ok(y, n))
        return ILLEGAL_ADDRESS;
    for (uint64_t idx = 0; idx < n; idx++) {
        uint64_t r = idx / out, o = idx % out;
        float acc = b[o];
        for (unsigned i = 0; i < in; i++)
            acc = fmaf(x[r * in + i], w[o * in + i], acc);
        if (relu && acc < 0.0f)
            acc = 0.0f;
        y[idx] = acc;
    }
    /* GPUMEM_FAKE_KERNEL_CORRUPT=1: a wrong result, to test that measure's check sees it */
    if (n && getenv("GPUMEM_FAKE_KERNEL_CORRUPT") &&
        !strcmp(getenv("GPUMEM_FAKE_KERNEL_CORRUPT"), "1"))
        y[0] += 1.0f;
    return 0;
}

/* gm_linear_bwd_data(dy, w, dx, rows, in, out) */
static int k_linear_bwd_data(const struct fake_launch *l, void **params)
{
    const float *dy = fptr(params, 0), *w = fptr(params, 1);
    float *dx = fptr(params, 2);
    unsigned rows = u32(params, 3), in = u32(params, 4), out = u32(params, 5);
    uint64_t n = (uint64_t)rows * in, t = threads(l);
    if (n > t)
        n = t;
    if (!ok(dy, (uint64_t)rows * out) || !ok(w, (uint64_t)out * in) || !ok(dx, n))
        return ILLEGAL_ADDRESS;
    for (uint64_t idx = 0; idx < n; idx++) {
        uint64_t r = idx / in, i = idx % in;
        float acc = 0.0f;
        for (unsigned o = 0; o < out; o++)
            acc = fmaf(dy[r * out + o], w[(uint64_t)o * in + i], acc);
        dx[idx] = acc;
    }
    if (n && corrupt("gm_linear_bwd_data"))
        dx[0] += 1.0f;
    return 0;
}

/* gm_linear_bwd_weight(dy, x, dw, db, rows, in, out) */
static int k_linear_bwd_weight(const struct fake_launch *l, void **params)
{
    const float *dy = fptr(params, 0), *x = fptr(params, 1);
    float *dw = fptr(params, 2), *db = fptr(params, 3);
    unsigned rows = u32(params, 4), in = u32(params, 5), out = u32(params, 6);
    uint64_t n = (uint64_t)out * in, t = threads(l);
    if (n > t)
        n = t;
    if (!ok(dy, (uint64_t)rows * out) || !ok(x, (uint64_t)rows * in) || !ok(dw, n) || !ok(db, out))
        return ILLEGAL_ADDRESS;
    for (uint64_t idx = 0; idx < n; idx++) {
        uint64_t o = idx / in, i = idx % in;
        float acc = 0.0f, accb = 0.0f;
        for (unsigned r = 0; r < rows; r++) {
            float g = dy[(uint64_t)r * out + o];
            acc = fmaf(g, x[(uint64_t)r * in + i], acc);
            accb += g;
        }
        dw[idx] = acc;
        if (i == 0)
            db[o] = accb;
    }
    return 0;
}

/* gm_relu_bwd(y, dy, n) */
static int k_relu_bwd(const struct fake_launch *l, void **params)
{
    const float *y = fptr(params, 0);
    float *dy = fptr(params, 1);
    uint64_t n = u32(params, 2), t = threads(l);
    if (n > t)
        n = t;
    if (!ok(y, n) || !ok(dy, n))
        return ILLEGAL_ADDRESS;
    for (uint64_t i = 0; i < n; i++)
        if (!(y[i] > 0.0f))
            dy[i] = 0.0f;
    return 0;
}

/* gm_mse_grad(y, dy, n, scale) */
static int k_mse_grad(const struct fake_launch *l, void **params)
{
    const float *y = fptr(params, 0);
    float *dy = fptr(params, 1);
    uint64_t n = u32(params, 2), t = threads(l);
    float scale = f32(params, 3);
    if (n > t)
        n = t;
    if (!ok(y, n) || !ok(dy, n))
        return ILLEGAL_ADDRESS;
    for (uint64_t i = 0; i < n; i++)
        dy[i] = scale * y[i];
    return 0;
}

/* gm_sgd_momentum(w, g, m, lr, mu, n) */
static int k_sgd_momentum(const struct fake_launch *l, void **params)
{
    float *w = fptr(params, 0), *g = fptr(params, 1), *m = fptr(params, 2);
    float lr = f32(params, 3), mu = f32(params, 4);
    uint64_t n = u32(params, 5), t = threads(l);
    if (n > t)
        n = t;
    if (!ok(w, n) || !ok(g, n) || !ok(m, n))
        return ILLEGAL_ADDRESS;
    for (uint64_t i = 0; i < n; i++) {
        float v = fmaf(mu, m[i], g[i]);
        m[i] = v;
        w[i] = fmaf(-lr, v, w[i]);
    }
    return 0;
}

static const struct {
    const char *name;
    fake_kernel_fn run;
} kernels[] = {
    {"gm_linear_fwd", k_linear_fwd},
    {"gm_linear_bwd_data", k_linear_bwd_data},
    {"gm_linear_bwd_weight", k_linear_bwd_weight},
    {"gm_relu_bwd", k_relu_bwd},
    {"gm_mse_grad", k_mse_grad},
    {"gm_sgd_momentum", k_sgd_momentum},
};

fake_kernel_fn fake_measure_kernel(const char *name)
{
    for (size_t k = 0; k < sizeof(kernels) / sizeof(kernels[0]); k++)
        if (!strcmp(kernels[k].name, name))
            return kernels[k].run;
    return NULL;
}
