/* SPDX-License-Identifier: MIT */
/* fake_measure_kernels.c - CPU versions of the kernels of src/measure/kernels.cu (float32
 * and _bf16), run by the fake libcuda.so.1 when gpumem measure launches them by name.  Same
 * arguments, same arithmetic (fmaf where the kernel uses fmaf, bfloat16 rounded to nearest
 * even when stored), one loop iteration per GPU thread; a launch
 * with too few threads computes only the elements its threads cover, and an access outside
 * an allocation fails with 700 (CUDA_ERROR_ILLEGAL_ADDRESS) as on a GPU.
 * GPUMEM_FAKE_KERNEL_CORRUPT=1 (or =gm_linear_fwd, =gm_linear_bwd_data) makes that kernel
 * wrong by 1.0 in its first element. */
#include "fake_common.h"
#include "fake_kernels.h"

#include <math.h>
#include <stdbool.h>
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

/* element access: 'bf' selects bfloat16 storage (raw 16-bit patterns), else float32 */
struct ten {
    void *p;
    bool bf;
};

static struct ten tptr(void **params, int i, bool bf)
{
    unsigned long long p;
    struct ten t;
    memcpy(&p, params[i], sizeof(p));
    t.p = (void *)(uintptr_t)p;
    t.bf = bf;
    return t;
}

static float ld(struct ten t, uint64_t i)
{
    if (t.bf) {
        uint32_t u = (uint32_t)((const uint16_t *)t.p)[i] << 16;
        float f;
        memcpy(&f, &u, sizeof(f));
        return f;
    }
    return ((const float *)t.p)[i];
}

/* float -> bfloat16 rounding to nearest even, NaN kept quiet: as the kernel does */
static void st(struct ten t, uint64_t i, float v)
{
    uint32_t u;
    if (!t.bf) {
        ((float *)t.p)[i] = v;
        return;
    }
    memcpy(&u, &v, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        ((uint16_t *)t.p)[i] = (uint16_t)((u >> 16) | 0x40u);
        return;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    ((uint16_t *)t.p)[i] = (uint16_t)(u >> 16);
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

static int ok(struct ten t, uint64_t n)
{
    return n == 0 ||
           fake_in_allocation((unsigned long long)(uintptr_t)t.p, (size_t)n * (t.bf ? 2 : 4));
}

/* gm_linear_fwd(x, w, b, y, rows, in, out, relu) */
static int linear_fwd(const struct fake_launch *l, void **params, bool bf)
{
    struct ten x = tptr(params, 0, bf), w = tptr(params, 1, bf), b = tptr(params, 2, bf);
    struct ten y = tptr(params, 3, bf);
    unsigned rows = u32(params, 4), in = u32(params, 5), out = u32(params, 6);
    unsigned relu = u32(params, 7);
    uint64_t n = (uint64_t)rows * out, t = threads(l);
    if (n > t)
        n = t;
    if (!ok(x, (uint64_t)rows * in) || !ok(w, (uint64_t)out * in) || !ok(b, out) || !ok(y, n))
        return ILLEGAL_ADDRESS;
    for (uint64_t idx = 0; idx < n; idx++) {
        uint64_t r = idx / out, o = idx % out;
        float acc = ld(b, o);
        for (unsigned i = 0; i < in; i++)
            acc = fmaf(ld(x, r * in + i), ld(w, o * in + i), acc);
        if (relu && acc < 0.0f)
            acc = 0.0f;
        st(y, idx, acc);
    }
    if (n && corrupt("gm_linear_fwd"))
        st(y, 0, ld(y, 0) + 1.0f);
    return 0;
}

/* gm_linear_bwd_data(dy, w, dx, rows, in, out) */
static int linear_bwd_data(const struct fake_launch *l, void **params, bool bf)
{
    struct ten dy = tptr(params, 0, bf), w = tptr(params, 1, bf), dx = tptr(params, 2, bf);
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
            acc = fmaf(ld(dy, r * out + o), ld(w, (uint64_t)o * in + i), acc);
        st(dx, idx, acc);
    }
    if (n && corrupt("gm_linear_bwd_data"))
        st(dx, 0, ld(dx, 0) + 1.0f);
    return 0;
}

/* gm_linear_bwd_weight(dy, x, dw, db, rows, in, out) */
static int linear_bwd_weight(const struct fake_launch *l, void **params, bool bf)
{
    struct ten dy = tptr(params, 0, bf), x = tptr(params, 1, bf);
    struct ten dw = tptr(params, 2, bf), db = tptr(params, 3, bf);
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
            float g = ld(dy, (uint64_t)r * out + o);
            acc = fmaf(g, ld(x, (uint64_t)r * in + i), acc);
            accb += g;
        }
        st(dw, idx, acc);
        if (i == 0)
            st(db, o, accb);
    }
    return 0;
}

/* gm_relu_bwd(y, dy, n) */
static int relu_bwd(const struct fake_launch *l, void **params, bool bf)
{
    struct ten y = tptr(params, 0, bf), dy = tptr(params, 1, bf);
    uint64_t n = u32(params, 2), t = threads(l);
    if (n > t)
        n = t;
    if (!ok(y, n) || !ok(dy, n))
        return ILLEGAL_ADDRESS;
    for (uint64_t i = 0; i < n; i++)
        if (!(ld(y, i) > 0.0f))
            st(dy, i, 0.0f);
    return 0;
}

/* gm_mse_grad(y, dy, n, scale) */
static int mse_grad(const struct fake_launch *l, void **params, bool bf)
{
    struct ten y = tptr(params, 0, bf), dy = tptr(params, 1, bf);
    uint64_t n = u32(params, 2), t = threads(l);
    float scale = f32(params, 3);
    if (n > t)
        n = t;
    if (!ok(y, n) || !ok(dy, n))
        return ILLEGAL_ADDRESS;
    for (uint64_t i = 0; i < n; i++)
        st(dy, i, scale * ld(y, i));
    return 0;
}

/* gm_sgd_momentum(w, g, m, lr, mu, n) */
static int sgd_momentum(const struct fake_launch *l, void **params, bool bf)
{
    struct ten w = tptr(params, 0, bf), g = tptr(params, 1, bf), m = tptr(params, 2, bf);
    float lr = f32(params, 3), mu = f32(params, 4);
    uint64_t n = u32(params, 5), t = threads(l);
    if (n > t)
        n = t;
    if (!ok(w, n) || !ok(g, n) || !ok(m, n))
        return ILLEGAL_ADDRESS;
    for (uint64_t i = 0; i < n; i++) {
        float v = fmaf(mu, ld(m, i), ld(g, i));
        st(m, i, v);
        st(w, i, fmaf(-lr, v, ld(w, i)));
    }
    return 0;
}

#define BOTH(name)                                                                                 \
    static int k_##name(const struct fake_launch *l, void **params)                                \
    {                                                                                              \
        return name(l, params, false);                                                             \
    }                                                                                              \
    static int k_##name##_bf16(const struct fake_launch *l, void **params)                         \
    {                                                                                              \
        return name(l, params, true);                                                              \
    }
BOTH(linear_fwd)
BOTH(linear_bwd_data)
BOTH(linear_bwd_weight)
BOTH(relu_bwd)
BOTH(mse_grad)
BOTH(sgd_momentum)

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
    {"gm_linear_fwd_bf16", k_linear_fwd_bf16},
    {"gm_linear_bwd_data_bf16", k_linear_bwd_data_bf16},
    {"gm_linear_bwd_weight_bf16", k_linear_bwd_weight_bf16},
    {"gm_relu_bwd_bf16", k_relu_bwd_bf16},
    {"gm_mse_grad_bf16", k_mse_grad_bf16},
    {"gm_sgd_momentum_bf16", k_sgd_momentum_bf16},
};

fake_kernel_fn fake_measure_kernel(const char *name)
{
    for (size_t k = 0; k < sizeof(kernels) / sizeof(kernels[0]); k++)
        if (!strcmp(kernels[k].name, name))
            return kernels[k].run;
    return NULL;
}
