// SPDX-License-Identifier: MIT
// kernels.cu - the kernels of `gpumem measure`: a dense network (Linear + ReLU layers),
// its backward pass and an SGD-with-momentum step, row-major, with tensors stored as
// float32 (gm_*) or bfloat16 (gm_*_bf16).  Arithmetic is float32 in both cases; a bfloat16
// result is rounded to nearest even when stored, as PyTorch's bfloat16 kernels do.
//
// kernels.ptx beside this file is generated from this source by scripts/regen-ptx.sh
// (nvcc 13.0: nvcc -ptx -arch=compute_75; clang's NVPTX back end where nvcc is missing),
// with the header rewritten to `.version 7.0` / `.target sm_70` / `.address_size 64`
// (driver-abi.md section 2.2).  ptxas 13.0 assembles it for sm_75, sm_80, sm_90, sm_100 and
// sm_120 (the ptxas test of tests/cmake/measure.cmake, where a toolkit is installed); it has
// not yet been run on a GPU.  The fake libcuda of the test suite runs CPU versions of the
// same kernels, found by name (tests/fake/fake_measure_kernels.c); the CPU reference of
// src/measure/measure.c rounds at the same points.
//
// Shapes: x [rows, in], w [out, in] (PyTorch's nn.Linear layout), b [out], y [rows, out].
// One thread per output element; indices are 32-bit (gpumem measure keeps every tensor
// under 2^31 elements).  bfloat16 is handled as raw 16-bit patterns (no cuda_bf16.h), so
// the code needs no sm_80 instruction.

typedef unsigned short bf16_t;

__device__ __forceinline__ float ld(const float *p)
{
    return *p;
}

__device__ __forceinline__ float ld(const bf16_t *p)
{
    return __uint_as_float((unsigned)*p << 16);
}

__device__ __forceinline__ void st(float *p, float v)
{
    *p = v;
}

// float -> bfloat16, round to nearest even; a NaN stays a (quiet) NaN
__device__ __forceinline__ void st(bf16_t *p, float v)
{
    unsigned u = __float_as_uint(v);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        *p = (bf16_t)((u >> 16) | 0x40u);
        return;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    *p = (bf16_t)(u >> 16);
}

// y = x w^T + b, then max(y, 0) when relu != 0
template <typename T>
__device__ void linear_fwd(const T *x, const T *w, const T *b, T *y, unsigned rows, unsigned in,
                           unsigned out, unsigned relu)
{
    unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * out)
        return;
    unsigned r = idx / out, o = idx % out;
    const T *xr = x + (unsigned long long)r * in;
    const T *wo = w + (unsigned long long)o * in;
    float acc = ld(b + o);
    for (unsigned i = 0; i < in; i++)
        acc = fmaf(ld(xr + i), ld(wo + i), acc);
    if (relu != 0 && acc < 0.0f)
        acc = 0.0f;
    st(y + idx, acc);
}

// dx = dy w  (dx [rows, in], dy [rows, out])
template <typename T>
__device__ void linear_bwd_data(const T *dy, const T *w, T *dx, unsigned rows, unsigned in,
                                unsigned out)
{
    unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * in)
        return;
    unsigned r = idx / in, i = idx % in;
    const T *dyr = dy + (unsigned long long)r * out;
    const T *wi = w + i;
    float acc = 0.0f;
    for (unsigned o = 0; o < out; o++)
        acc = fmaf(ld(dyr + o), ld(wi + (unsigned long long)o * in), acc);
    st(dx + idx, acc);
}

// dw = dy^T x  (dw [out, in]); db = column sums of dy, written by the threads with i == 0
template <typename T>
__device__ void linear_bwd_weight(const T *dy, const T *x, T *dw, T *db, unsigned rows,
                                  unsigned in, unsigned out)
{
    unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= out * in)
        return;
    unsigned o = idx / in, i = idx % in;
    const T *dyo = dy + o;
    const T *xi = x + i;
    float acc = 0.0f, accb = 0.0f;
    for (unsigned r = 0; r < rows; r++) {
        float g = ld(dyo + (unsigned long long)r * out);
        acc = fmaf(g, ld(xi + (unsigned long long)r * in), acc);
        accb += g;
    }
    st(dw + idx, acc);
    if (i == 0)
        st(db + o, accb);
}

// dy = 0 where the ReLU output y is not positive
template <typename T> __device__ void relu_bwd(const T *y, T *dy, unsigned n)
{
    unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n)
        return;
    if (!(ld(y + idx) > 0.0f))
        st(dy + idx, 0.0f);
}

// gradient of the loss scale/2 * sum(y^2) (target 0): dy = scale * y
template <typename T> __device__ void mse_grad(const T *y, T *dy, unsigned n, float scale)
{
    unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n)
        return;
    st(dy + idx, scale * ld(y + idx));
}

// SGD with momentum (PyTorch's form, dampening 0): m = mu m + g; w = w - lr m
template <typename T>
__device__ void sgd_momentum(T *w, const T *g, T *m, float lr, float mu, unsigned n)
{
    unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n)
        return;
    float v = fmaf(mu, ld(m + idx), ld(g + idx));
    st(m + idx, v);
    st(w + idx, fmaf(-lr, v, ld(w + idx)));
}

#define GM_KERNELS(SUFFIX, T)                                                                   \
    extern "C" __global__ void gm_linear_fwd##SUFFIX(const T *x, const T *w, const T *b, T *y,  \
                                                     unsigned rows, unsigned in, unsigned out,  \
                                                     unsigned relu)                             \
    {                                                                                           \
        linear_fwd<T>(x, w, b, y, rows, in, out, relu);                                         \
    }                                                                                           \
    extern "C" __global__ void gm_linear_bwd_data##SUFFIX(const T *dy, const T *w, T *dx,       \
                                                          unsigned rows, unsigned in,           \
                                                          unsigned out)                         \
    {                                                                                           \
        linear_bwd_data<T>(dy, w, dx, rows, in, out);                                           \
    }                                                                                           \
    extern "C" __global__ void gm_linear_bwd_weight##SUFFIX(const T *dy, const T *x, T *dw,     \
                                                            T *db, unsigned rows, unsigned in,  \
                                                            unsigned out)                       \
    {                                                                                           \
        linear_bwd_weight<T>(dy, x, dw, db, rows, in, out);                                     \
    }                                                                                           \
    extern "C" __global__ void gm_relu_bwd##SUFFIX(const T *y, T *dy, unsigned n)               \
    {                                                                                           \
        relu_bwd<T>(y, dy, n);                                                                  \
    }                                                                                           \
    extern "C" __global__ void gm_mse_grad##SUFFIX(const T *y, T *dy, unsigned n, float scale)  \
    {                                                                                           \
        mse_grad<T>(y, dy, n, scale);                                                           \
    }                                                                                           \
    extern "C" __global__ void gm_sgd_momentum##SUFFIX(T *w, const T *g, T *m, float lr,        \
                                                       float mu, unsigned n)                    \
    {                                                                                           \
        sgd_momentum<T>(w, g, m, lr, mu, n);                                                    \
    }

GM_KERNELS(, float)
GM_KERNELS(_bf16, bf16_t)
