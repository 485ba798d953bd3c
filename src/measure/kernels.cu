// SPDX-License-Identifier: MIT
// kernels.cu - the kernels of `gpumem measure`: a dense network (Linear + ReLU layers),
// its backward pass and an SGD-with-momentum step, float32, row-major.
//
// kernels.ptx beside this file is generated from this source by scripts/regen-ptx.sh
// (nvcc 13.0: nvcc -ptx -arch=compute_75; clang's NVPTX back end where nvcc is missing),
// with the header rewritten to `.version 7.0` / `.target sm_70` / `.address_size 64`
// (driver-abi.md section 2.2).  ptxas 13.0 assembles it for sm_75, sm_80, sm_90, sm_100 and
// sm_120 (the ptxas test of tests/cmake/measure.cmake, where a toolkit is installed); it has
// not yet been run on a GPU.  The fake libcuda of the test suite runs CPU versions of the
// same kernels, found by name (tests/fake/fake_measure_kernels.c).
//
// Shapes: x [rows, in], w [out, in] (PyTorch's nn.Linear layout), b [out], y [rows, out].
// One thread per output element; indices are 32-bit (gpumem measure keeps every tensor
// under 2^31 elements).

extern "C" {

// y = x w^T + b, then max(y, 0) when relu != 0
__global__ void gm_linear_fwd(const float *x, const float *w, const float *b, float *y,
                              unsigned rows, unsigned in, unsigned out, unsigned relu)
{
    unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * out)
        return;
    unsigned r = idx / out, o = idx % out;
    const float *xr = x + (unsigned long long)r * in;
    const float *wo = w + (unsigned long long)o * in;
    float acc = b[o];
    for (unsigned i = 0; i < in; i++)
        acc = fmaf(xr[i], wo[i], acc);
    if (relu != 0 && acc < 0.0f)
        acc = 0.0f;
    y[idx] = acc;
}

// dx = dy w  (dx [rows, in], dy [rows, out])
__global__ void gm_linear_bwd_data(const float *dy, const float *w, float *dx, unsigned rows,
                                   unsigned in, unsigned out)
{
    unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= rows * in)
        return;
    unsigned r = idx / in, i = idx % in;
    const float *dyr = dy + (unsigned long long)r * out;
    const float *wi = w + i;
    float acc = 0.0f;
    for (unsigned o = 0; o < out; o++)
        acc = fmaf(dyr[o], wi[(unsigned long long)o * in], acc);
    dx[idx] = acc;
}

// dw = dy^T x  (dw [out, in]); db = column sums of dy, written by the threads with i == 0
__global__ void gm_linear_bwd_weight(const float *dy, const float *x, float *dw, float *db,
                                     unsigned rows, unsigned in, unsigned out)
{
    unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= out * in)
        return;
    unsigned o = idx / in, i = idx % in;
    const float *dyo = dy + o;
    const float *xi = x + i;
    float acc = 0.0f, accb = 0.0f;
    for (unsigned r = 0; r < rows; r++) {
        float g = dyo[(unsigned long long)r * out];
        acc = fmaf(g, xi[(unsigned long long)r * in], acc);
        accb += g;
    }
    dw[idx] = acc;
    if (i == 0)
        db[o] = accb;
}

// dy = 0 where the ReLU output y is not positive
__global__ void gm_relu_bwd(const float *y, float *dy, unsigned n)
{
    unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n)
        return;
    if (!(y[idx] > 0.0f))
        dy[idx] = 0.0f;
}

// gradient of the loss scale/2 * sum(y^2) (target 0): dy = scale * y
__global__ void gm_mse_grad(const float *y, float *dy, unsigned n, float scale)
{
    unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n)
        return;
    dy[idx] = scale * y[idx];
}

// SGD with momentum (PyTorch's form, dampening 0): m = mu m + g; w = w - lr m
__global__ void gm_sgd_momentum(float *w, const float *g, float *m, float lr, float mu,
                                unsigned n)
{
    unsigned idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n)
        return;
    float v = fmaf(mu, m[idx], g[idx]);
    m[idx] = v;
    w[idx] = fmaf(-lr, v, w[idx]);
}

} // extern "C"
