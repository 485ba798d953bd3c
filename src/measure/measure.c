/* SPDX-License-Identifier: MIT */
/* measure.c - the measure workload (measure.h): a dense network on the GPU through the
 * driver API, every tensor allocated through the caching-allocator model.
 *
 * The same code runs "dry" (no driver: the model over its fake device, kernels and copies
 * skipped) to give the model's estimate of the same allocation sequence.
 *
 * Tensor lifetimes follow what PyTorch does for `out = model(x)`:
 * - inference: each layer output is a new tensor; the previous layer's output is freed as
 *   soon as the next one is computed; the final output is checked and then dropped;
 * - training: the forward pass keeps every layer output (autograd saves them); backward
 *   frees them as it goes; gradients (.grad) persist once created; the momentum buffers
 *   are created by the first optimizer step. */
#include "gpumem/measure.h"

#include "gpumem/arena.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

extern const char gm_measure_ptx[];

enum kernel_id { K_FWD, K_BWD_DATA, K_BWD_WEIGHT, K_RELU_BWD, K_MSE_GRAD, K_SGD, K_N };

static const char *const kernel_names[2][K_N] = {
    {"gm_linear_fwd", "gm_linear_bwd_data", "gm_linear_bwd_weight", "gm_relu_bwd", "gm_mse_grad",
     "gm_sgd_momentum"},
    {"gm_linear_fwd_bf16", "gm_linear_bwd_data_bf16", "gm_linear_bwd_weight_bf16",
     "gm_relu_bwd_bf16", "gm_mse_grad_bf16", "gm_sgd_momentum_bf16"},
};

static const char *const phase_names[GM_MEASURE_N_PHASES] = {
    "model_load", "inputs", "cold_forward", "warmup", "warm_forward", "backward", "optimizer_step",
};

const char *gm_measure_phase_name(enum gm_measure_phase_id id)
{
    return (unsigned)id < GM_MEASURE_N_PHASES ? phase_names[id] : "unknown";
}

const char *gm_measure_ptx_text(void)
{
    return gm_measure_ptx;
}

void gm_measure_opts_init(struct gm_measure_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->batch = 2;
    o->context = 128;
    o->width = 1024;
    o->layers = 4;
    o->warmup = 3;
    o->repeats = 5;
    o->lr = 0.01f;
    o->momentum = 0.9f;
}

enum gm_status gm_measure_opts_check(const struct gm_measure_opts *o, struct gm_error *err)
{
    uint64_t rows = (uint64_t)o->batch * o->context;
    if (!o->batch || !o->context || !o->width || !o->layers)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "batch, context, width and layers must be at least 1");
    if (!o->repeats)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "repeats must be at least 1");
    if (rows * o->width >= ((uint64_t)1 << 31) ||
        (uint64_t)o->width * o->width >= ((uint64_t)1 << 31))
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "a tensor of %llu x %u elements is too large (the kernels index with "
                       "32 bits: keep rows x width and width x width under 2^31)",
                       (unsigned long long)rows, o->width);
    return GM_OK;
}

/* ---- the workspace ------------------------------------------------------------------ */

struct ws {
    const struct gm_measure_opts *o;
    bool dry;
    bool bf;        /* tensors are bfloat16 (else float32) */
    uint64_t esize; /* bytes per element */
    struct gm_cuda *cu;
    struct gm_cuda_function *fn[K_N];
    struct gm_alloc *a;
    uint32_t rows, width, layers;
    uint64_t *w, *b;     /* per layer: weights [width, width], bias [width] */
    uint64_t *gw, *gb;   /* gradients, 0 until the first backward */
    uint64_t *mw, *mb;   /* momentum, 0 until the first step */
    uint64_t *act;       /* training: saved layer outputs, 0 when not held */
    uint64_t x;          /* input */
    float *hw, *hb, *hx; /* host copies of the initial values */
};

/* host arrays are float32 */
static uint64_t fbytes(uint64_t n)
{
    return n * sizeof(float);
}

/* device tensors are float32 or bfloat16 */
static uint64_t ebytes(const struct ws *s, uint64_t n)
{
    return n * s->esize;
}

/* float -> bfloat16 bits, round to nearest even, NaN kept quiet (as the kernels do) */
static uint16_t bf16_bits(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float bf16_float(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float v;
    memcpy(&v, &u, sizeof(v));
    return v;
}

/* what storing 'v' in a tensor keeps */
static float q(const struct ws *s, float v)
{
    return s->bf ? bf16_float(bf16_bits(v)) : v;
}

static enum gm_status t_alloc(struct ws *s, uint64_t bytes, uint64_t *p, struct gm_error *err)
{
    return gm_alloc_malloc(s->a, bytes, 0, p, err);
}

static void t_free(struct ws *s, uint64_t *p)
{
    if (*p)
        (void)gm_alloc_dealloc(s->a, *p, NULL);
    *p = 0;
}

/* copy 'n' elements from host floats to a tensor (converted when it is bfloat16) */
static enum gm_status h2d(struct ws *s, uint64_t dst, const float *src, uint64_t n,
                          struct gm_error *err)
{
    uint16_t *tmp;
    enum gm_status st;
    if (s->dry)
        return GM_OK;
    if (!s->bf)
        return gm_cuda_memcpy_htod(s->cu, dst, src, fbytes(n), err);
    tmp = gm_malloc(n * sizeof(uint16_t) + 1);
    if (!tmp)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "measure: out of host memory");
    for (uint64_t i = 0; i < n; i++)
        tmp[i] = bf16_bits(src[i]);
    st = gm_cuda_memcpy_htod(s->cu, dst, tmp, n * sizeof(uint16_t), err);
    gm_free(tmp);
    return st;
}

/* copy 'n' elements of a tensor into host floats */
static enum gm_status d2h(struct ws *s, float *dst, uint64_t src, uint64_t n, struct gm_error *err)
{
    uint16_t *tmp;
    enum gm_status st;
    if (s->dry)
        return GM_OK;
    if (!s->bf)
        return gm_cuda_memcpy_dtoh(s->cu, dst, src, fbytes(n), err);
    tmp = gm_malloc(n * sizeof(uint16_t) + 1);
    if (!tmp)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "measure: out of host memory");
    st = gm_cuda_memcpy_dtoh(s->cu, tmp, src, n * sizeof(uint16_t), err);
    for (uint64_t i = 0; st == GM_OK && i < n; i++)
        dst[i] = bf16_float(tmp[i]);
    gm_free(tmp);
    return st;
}

static enum gm_status launch(struct ws *s, enum kernel_id k, uint64_t n, void **params,
                             struct gm_error *err)
{
    struct gm_cuda_launch_dims d;
    if (s->dry || n == 0)
        return GM_OK;
    memset(&d, 0, sizeof(d));
    d.grid[0] = (unsigned)((n + 255) / 256);
    d.grid[1] = d.grid[2] = 1;
    d.block[0] = 256;
    d.block[1] = d.block[2] = 1;
    return gm_cuda_launch(s->cu, s->fn[k], &d, params, err);
}

static enum gm_status sync(struct ws *s, struct gm_error *err)
{
    return s->dry ? GM_OK : gm_cuda_synchronize(s->cu, err);
}

/* ---- deterministic initial values ------------------------------------------------------ */

static uint32_t rng_next(uint64_t *state)
{
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*state >> 33);
}

/* uniform in [-scale, scale) */
static void fill_uniform(float *p, uint64_t n, float scale, uint64_t seed)
{
    uint64_t st = seed;
    for (uint64_t i = 0; i < n; i++)
        p[i] = scale * ((float)rng_next(&st) / 2147483648.0f - 1.0f);
}

/* ---- CPU reference -------------------------------------------------------------------- */

/* y = x w^T + b (relu) with the kernel's summation order and fmaf, rounded as stored */
static void cpu_linear(const struct ws *s, const float *x, const float *w, const float *b, float *y,
                       uint32_t rows, uint32_t n, bool relu)
{
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t o = 0; o < n; o++) {
            float acc = b[o];
            for (uint64_t i = 0; i < n; i++)
                acc = fmaf(x[r * n + i], w[o * n + i], acc);
            if (relu && acc < 0.0f)
                acc = 0.0f;
            y[r * n + o] = q(s, acc);
        }
}

/* max |got - want| over the larger of max |want| and max |got| (so a zero reference does
 * not blow up the ratio); NaN anywhere gives infinity */
static double rel_error(const float *got, const float *want, uint64_t n)
{
    double max_diff = 0.0, max_ref = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        double g = (double)got[i], w = (double)want[i], d = fabs(g - w);
        if (d != d)
            return HUGE_VAL;
        if (d > max_diff)
            max_diff = d;
        if (fabs(w) > max_ref)
            max_ref = fabs(w);
        if (fabs(g) > max_ref)
            max_ref = fabs(g);
    }
    return max_ref > 0.0 ? max_diff / max_ref : 0.0;
}

#define CHECK_TOLERANCE 1e-4

/* ---- passes ----------------------------------------------------------------------------- */

static enum gm_status layer_fwd(struct ws *s, uint32_t l, uint64_t in, uint64_t out,
                                struct gm_error *err)
{
    uint64_t pw = s->w[l], pb = s->b[l];
    uint32_t rows = s->rows, width = s->width, relu = l + 1 < s->layers;
    void *params[8] = {&in, &pw, &pb, &out, &rows, &width, &width, &relu};
    return launch(s, K_FWD, (uint64_t)rows * width, params, err);
}

/* One forward pass.  Training keeps every layer output in s->act; inference frees each
 * input as soon as it is consumed and leaves the result in *y. */
static enum gm_status forward(struct ws *s, bool keep, uint64_t *y, struct gm_error *err)
{
    uint64_t cur = s->x, next = 0;
    uint64_t act_bytes = ebytes(s, (uint64_t)s->rows * s->width);
    *y = 0;
    for (uint32_t l = 0; l < s->layers; l++) {
        enum gm_status st = t_alloc(s, act_bytes, &next, err);
        if (st == GM_OK)
            st = layer_fwd(s, l, cur, next, err);
        if (st) {
            /* leave no tensor behind that nothing refers to */
            if (keep) {
                s->act[l] = next;
            } else {
                t_free(s, &next);
                if (cur != s->x)
                    t_free(s, &cur);
            }
            return st;
        }
        if (keep)
            s->act[l] = next;
        else if (cur != s->x)
            t_free(s, &cur);
        cur = next;
    }
    *y = cur;
    return GM_OK;
}

static void drop_activations(struct ws *s)
{
    for (uint32_t l = 0; l < s->layers; l++)
        t_free(s, &s->act[l]);
}

/* Backward from s->act (freed as it goes); gradients are created on first use. */
static enum gm_status backward(struct ws *s, struct gm_error *err)
{
    uint64_t n = (uint64_t)s->rows * s->width, bytes = ebytes(s, n), dy = 0, dx = 0;
    uint32_t rows = s->rows, width = s->width, n32 = (uint32_t)n;
    float scale = 1.0f / (float)n;
    enum gm_status st;
    uint32_t l;

    st = t_alloc(s, bytes, &dy, err);
    if (st)
        return st;
    {
        uint64_t y = s->act[s->layers - 1];
        void *p[4] = {&y, &dy, &n32, &scale};
        st = launch(s, K_MSE_GRAD, n, p, err);
    }
    for (l = s->layers; st == GM_OK && l-- > 0;) {
        uint64_t in = l ? s->act[l - 1] : s->x;
        if (l + 1 < s->layers) {
            uint64_t y = s->act[l];
            void *p[3] = {&y, &dy, &n32};
            st = launch(s, K_RELU_BWD, n, p, err);
            if (st)
                break;
        }
        if (!s->gw[l]) {
            st = t_alloc(s, ebytes(s, (uint64_t)width * width), &s->gw[l], err);
            if (st == GM_OK)
                st = t_alloc(s, ebytes(s, width), &s->gb[l], err);
            if (st)
                break;
        }
        {
            uint64_t gw = s->gw[l], gb = s->gb[l];
            void *p[7] = {&dy, &in, &gw, &gb, &rows, &width, &width};
            st = launch(s, K_BWD_WEIGHT, (uint64_t)width * width, p, err);
            if (st)
                break;
        }
        if (l > 0) {
            uint64_t w = s->w[l];
            st = t_alloc(s, bytes, &dx, err);
            if (st)
                break;
            {
                void *p[6] = {&dy, &w, &dx, &rows, &width, &width};
                st = launch(s, K_BWD_DATA, n, p, err);
            }
            t_free(s, &dy);
            dy = dx;
            dx = 0;
        }
        t_free(s, &s->act[l]);
    }
    t_free(s, &dy);
    t_free(s, &dx);
    return st;
}

static enum gm_status optimizer_step(struct ws *s, struct gm_error *err)
{
    float lr = s->o->lr, mu = s->o->momentum;
    uint32_t width = s->width;
    enum gm_status st = GM_OK;
    for (uint32_t l = 0; l < s->layers && st == GM_OK; l++) {
        uint64_t nw = (uint64_t)width * width;
        if (!s->gw[l])
            continue; /* no gradient yet: torch's SGD skips the parameter */
        if (!s->mw[l]) {
            st = t_alloc(s, ebytes(s, nw), &s->mw[l], err);
            if (st == GM_OK)
                st = t_alloc(s, ebytes(s, width), &s->mb[l], err);
            if (st == GM_OK && !s->dry)
                st = gm_cuda_memset_d8(s->cu, s->mw[l], 0, ebytes(s, nw), err);
            if (st == GM_OK && !s->dry)
                st = gm_cuda_memset_d8(s->cu, s->mb[l], 0, ebytes(s, width), err);
            if (st)
                break;
        }
        {
            uint64_t w = s->w[l], g = s->gw[l], m = s->mw[l];
            uint32_t n32 = (uint32_t)nw;
            void *p[6] = {&w, &g, &m, &lr, &mu, &n32};
            st = launch(s, K_SGD, nw, p, err);
        }
        if (st == GM_OK) {
            uint64_t w = s->b[l], g = s->gb[l], m = s->mb[l];
            uint32_t n32 = width;
            void *p[6] = {&w, &g, &m, &lr, &mu, &n32};
            st = launch(s, K_SGD, width, p, err);
        }
    }
    return st;
}

/* ---- checks against the CPU ---------------------------------------------------------- */

/* Forward on the CPU from the device's current weights; compare with the device output. */
static enum gm_status check_forward(struct ws *s, uint64_t y, struct gm_measure_phase *ph,
                                    struct gm_error *err)
{
    uint64_t n = (uint64_t)s->rows * s->width, nw = (uint64_t)s->width * s->width;
    float *got = NULL, *a = NULL, *b = NULL, *w = NULL, *bias = NULL;
    enum gm_status st = GM_OK;
    if (s->dry)
        return GM_OK;
    got = gm_malloc(fbytes(n));
    a = gm_malloc(fbytes(n));
    b = gm_malloc(fbytes(n));
    w = gm_malloc(fbytes(nw));
    bias = gm_malloc(fbytes(s->width));
    if (!got || !a || !b || !w || !bias) {
        st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "measure: out of host memory");
        goto out_free;
    }
    st = d2h(s, got, y, n, err);
    memcpy(a, s->hx, fbytes(n));
    for (uint32_t l = 0; l < s->layers && st == GM_OK; l++) {
        float *t;
        st = d2h(s, w, s->w[l], nw, err);
        if (st == GM_OK)
            st = d2h(s, bias, s->b[l], s->width, err);
        if (st)
            break;
        cpu_linear(s, a, w, bias, b, s->rows, s->width, l + 1 < s->layers);
        t = a;
        a = b;
        b = t;
    }
    if (st == GM_OK) {
        ph->checked = true;
        ph->max_rel_error = rel_error(got, a, n);
        ph->check_ok = ph->max_rel_error <= CHECK_TOLERANCE;
    }
out_free:
    gm_free(got);
    gm_free(a);
    gm_free(b);
    gm_free(w);
    gm_free(bias);
    return st;
}

/* The whole backward pass on the CPU, in the kernels' summation order, from the device's
 * weights (unchanged since the forward pass) and the input; compares every bias gradient
 * and the weight gradients of the first and the last layer.  y_host, the device's output
 * of that forward pass, is compared too.  Host memory too short for the check leaves the
 * phase unchecked rather than failing it. */
static enum gm_status check_backward(struct ws *s, const float *y_host, struct gm_measure_phase *ph,
                                     struct gm_error *err)
{
    uint64_t n = (uint64_t)s->rows * s->width, nw = (uint64_t)s->width * s->width;
    uint32_t L = s->layers, rows = s->rows, W = s->width;
    float *w = gm_malloc(fbytes(nw * L)), *b = gm_malloc(fbytes((uint64_t)W * L));
    float *act = gm_malloc(fbytes(n * L)), *dy = gm_malloc(fbytes(n)), *dx = gm_malloc(fbytes(n));
    float *got = gm_malloc(fbytes(nw)), *want = gm_malloc(fbytes(nw));
    float scale = 1.0f / (float)n;
    double worst = 0.0;
    enum gm_status st = GM_OK;

    if (!w || !b || !act || !dy || !dx || !got || !want)
        goto out_free; /* not checked */
    for (uint32_t l = 0; l < L && st == GM_OK; l++) {
        st = d2h(s, w + (uint64_t)l * nw, s->w[l], nw, err);
        if (st == GM_OK)
            st = d2h(s, b + (uint64_t)l * W, s->b[l], W, err);
    }
    if (st)
        goto out_free;
    for (uint32_t l = 0; l < L; l++)
        cpu_linear(s, l ? act + (uint64_t)(l - 1) * n : s->hx, w + (uint64_t)l * nw,
                   b + (uint64_t)l * W, act + (uint64_t)l * n, rows, W, l + 1 < L);
    worst = rel_error(y_host, act + (uint64_t)(L - 1) * n, n);
    for (uint64_t i = 0; i < n; i++)
        dy[i] = q(s, scale * act[(uint64_t)(L - 1) * n + i]);
    for (uint32_t l = L; l-- > 0;) {
        const float *in = l ? act + (uint64_t)(l - 1) * n : s->hx;
        const float *out = act + (uint64_t)l * n;
        const float *wl = w + (uint64_t)l * nw;
        bool weights = l == 0 || l == L - 1;
        double e;
        float *t;
        if (l + 1 < L)
            for (uint64_t i = 0; i < n; i++)
                if (!(out[i] > 0.0f))
                    dy[i] = 0.0f;
        /* bias gradient (column sums) and, for two layers, the weight gradient */
        for (uint64_t o = 0; o < W; o++) {
            float accb = 0.0f;
            for (uint64_t r = 0; r < rows; r++)
                accb += dy[r * W + o];
            want[o] = q(s, accb);
        }
        st = d2h(s, got, s->gb[l], W, err);
        if (st)
            goto out_free;
        e = rel_error(got, want, W);
        worst = e > worst ? e : worst;
        if (weights) {
            for (uint64_t o = 0; o < W; o++)
                for (uint64_t i = 0; i < W; i++) {
                    float acc = 0.0f;
                    for (uint64_t r = 0; r < rows; r++)
                        acc = fmaf(dy[r * W + o], in[r * W + i], acc);
                    want[o * W + i] = q(s, acc);
                }
            st = d2h(s, got, s->gw[l], nw, err);
            if (st)
                goto out_free;
            e = rel_error(got, want, nw);
            worst = e > worst ? e : worst;
        }
        if (l == 0)
            break;
        for (uint64_t r = 0; r < rows; r++)
            for (uint64_t i = 0; i < W; i++) {
                float acc = 0.0f;
                for (uint64_t o = 0; o < W; o++)
                    acc = fmaf(dy[r * W + o], wl[o * W + i], acc);
                dx[r * W + i] = q(s, acc);
            }
        t = dy;
        dy = dx;
        dx = t;
    }
    ph->checked = true;
    ph->max_rel_error = worst;
    ph->check_ok = worst <= CHECK_TOLERANCE;
out_free:
    gm_free(w);
    gm_free(b);
    gm_free(act);
    gm_free(dy);
    gm_free(dx);
    gm_free(got);
    gm_free(want);
    return st;
}

/* ---- phases --------------------------------------------------------------------------- */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void read_device(struct ws *s, struct gm_reading *free_r, struct gm_reading *used_r)
{
    uint64_t fr = 0, total = 0;
    *free_r = GM_READING_NONE;
    *used_r = GM_READING_NONE;
    if (s->dry || gm_cuda_mem_get_info(s->cu, &fr, &total, NULL) != GM_OK)
        return;
    free_r->value = fr;
    free_r->valid = true;
    if (total >= fr) {
        used_r->value = total - fr;
        used_r->valid = true;
    }
}

struct phase_state {
    float *y_host; /* host copy of the last training forward output */
};

static void pass_time(struct gm_measure_phase *ph, double t)
{
    if (ph->passes == 0 || t < ph->pass_seconds_min)
        ph->pass_seconds_min = t;
    if (ph->passes == 0 || t > ph->pass_seconds_max)
        ph->pass_seconds_max = t;
    ph->pass_seconds_mean = (ph->pass_seconds_mean * ph->passes + t) / (ph->passes + 1);
    ph->passes++;
}

static enum gm_status run_phase(struct ws *s, enum gm_measure_phase_id id,
                                struct gm_measure_phase *ph, struct phase_state *ps,
                                struct gm_error *err)
{
    const struct gm_measure_opts *o = s->o;
    uint64_t n_act = (uint64_t)s->rows * s->width, nw = (uint64_t)s->width * s->width;
    enum gm_status st = GM_OK;
    uint64_t y = 0;

    switch (id) {
    case GM_MEASURE_MODEL_LOAD:
        for (uint32_t l = 0; l < s->layers && st == GM_OK; l++) {
            st = t_alloc(s, ebytes(s, nw), &s->w[l], err);
            if (st == GM_OK)
                st = t_alloc(s, ebytes(s, s->width), &s->b[l], err);
            if (st == GM_OK)
                st = h2d(s, s->w[l], s->dry ? NULL : s->hw + (uint64_t)l * nw, nw, err);
            if (st == GM_OK)
                st = h2d(s, s->b[l], s->dry ? NULL : s->hb + (uint64_t)l * s->width, s->width, err);
        }
        break;
    case GM_MEASURE_INPUTS:
        st = t_alloc(s, ebytes(s, n_act), &s->x, err);
        if (st == GM_OK)
            st = h2d(s, s->x, s->hx, n_act, err);
        break;
    case GM_MEASURE_COLD_FORWARD:
    case GM_MEASURE_WARMUP:
    case GM_MEASURE_WARM_FORWARD: {
        uint32_t passes = id == GM_MEASURE_COLD_FORWARD ? 1
                          : id == GM_MEASURE_WARMUP     ? o->warmup
                                                        : o->repeats;
        for (uint32_t k = 0; k < passes && st == GM_OK; k++) {
            double t0 = now();
            bool last = k + 1 == passes;
            if (o->train)
                drop_activations(s);
            st = forward(s, o->train, &y, err);
            if (st == GM_OK && o->train && id == GM_MEASURE_WARMUP) {
                /* a training step: forward, backward, optimizer */
                st = backward(s, err);
                if (st == GM_OK)
                    st = optimizer_step(s, err);
                y = 0;
            }
            if (st == GM_OK)
                st = sync(s, err);
            if (st)
                break;
            pass_time(ph, now() - t0);
            if (y && last && id != GM_MEASURE_WARMUP) {
                double c0 = now();
                st = check_forward(s, y, ph, err);
                ph->check_seconds += now() - c0;
            }
            if (st == GM_OK && y && last && o->train && id == GM_MEASURE_WARM_FORWARD && !s->dry) {
                double c0 = now();
                st = d2h(s, ps->y_host, y, n_act, err);
                ph->check_seconds += now() - c0;
            }
            /* the output is dropped after each pass; in training the layer outputs stay
             * with the graph until the next pass or backward */
            if (!o->train)
                t_free(s, &y);
        }
        if (o->train && id == GM_MEASURE_COLD_FORWARD)
            drop_activations(s); /* no backward after the cold pass */
        break;
    }
    case GM_MEASURE_BACKWARD:
        st = backward(s, err);
        if (st == GM_OK)
            st = sync(s, err);
        if (st == GM_OK && !s->dry) {
            double c0 = now();
            st = check_backward(s, ps->y_host, ph, err);
            ph->check_seconds += now() - c0;
        }
        break;
    case GM_MEASURE_OPTIMIZER_STEP: {
        /* check the first layer's bias: w' = w - lr (mu m + g) */
        float *b0 = NULL, *g0 = NULL, *m0 = NULL, *b1 = NULL;
        bool have_m = s->mb[0] != 0;
        if (!s->dry) {
            b0 = gm_malloc(fbytes(s->width));
            g0 = gm_malloc(fbytes(s->width));
            m0 = gm_calloc(s->width, sizeof(float));
            b1 = gm_malloc(fbytes(s->width));
            if (!b0 || !g0 || !m0 || !b1)
                st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "measure: out of host memory");
            if (st == GM_OK)
                st = d2h(s, b0, s->b[0], s->width, err);
            if (st == GM_OK)
                st = d2h(s, g0, s->gb[0], s->width, err);
            if (st == GM_OK && have_m)
                st = d2h(s, m0, s->mb[0], s->width, err);
        }
        if (st == GM_OK)
            st = optimizer_step(s, err);
        if (st == GM_OK)
            st = sync(s, err);
        if (st == GM_OK && !s->dry) {
            st = d2h(s, b1, s->b[0], s->width, err);
            if (st == GM_OK) {
                for (uint32_t i = 0; i < s->width; i++)
                    b0[i] = q(s, fmaf(-o->lr, fmaf(o->momentum, m0[i], g0[i]), b0[i]));
                ph->checked = true;
                ph->max_rel_error = rel_error(b1, b0, s->width);
                ph->check_ok = ph->max_rel_error <= CHECK_TOLERANCE;
            }
        }
        gm_free(b0);
        gm_free(g0);
        gm_free(m0);
        gm_free(b1);
        break;
    }
    default:
        break;
    }
    return st;
}

static void ws_release(struct ws *s)
{
    if (s->a) {
        for (uint32_t l = 0; s->w && l < s->layers; l++) {
            t_free(s, &s->w[l]);
            t_free(s, &s->b[l]);
            t_free(s, &s->gw[l]);
            t_free(s, &s->gb[l]);
            t_free(s, &s->mw[l]);
            t_free(s, &s->mb[l]);
            t_free(s, &s->act[l]);
        }
        t_free(s, &s->x);
        gm_alloc_free(s->a); /* gives every segment back (cuMemFree_v2) */
    }
    gm_free(s->w);
    gm_free(s->hw);
    gm_free(s->hb);
    gm_free(s->hx);
    memset(s, 0, sizeof(*s));
}

static enum gm_status ws_init(struct ws *s, const struct gm_measure_opts *o, bool dry,
                              struct gm_error *err)
{
    uint32_t L = o->layers;
    memset(s, 0, sizeof(*s));
    s->o = o;
    s->dry = dry;
    s->rows = o->batch * o->context;
    s->width = o->width;
    s->layers = L;
    s->bf = o->dtype == GM_MEASURE_BF16;
    s->esize = s->bf ? 2 : 4;
    s->w = gm_calloc((size_t)L * 7, sizeof(uint64_t));
    if (!s->w)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "measure: out of host memory");
    s->b = s->w + L;
    s->gw = s->w + 2 * (size_t)L;
    s->gb = s->w + 3 * (size_t)L;
    s->mw = s->w + 4 * (size_t)L;
    s->mb = s->w + 5 * (size_t)L;
    s->act = s->w + 6 * (size_t)L;
    if (!dry) {
        uint64_t nw = (uint64_t)o->width * o->width, nx = (uint64_t)s->rows * o->width;
        float scale = 1.0f / sqrtf((float)o->width);
        s->hw = gm_malloc(fbytes(nw * L));
        s->hb = gm_malloc(fbytes((uint64_t)o->width * L));
        s->hx = gm_malloc(fbytes(nx));
        if (!s->hw || !s->hb || !s->hx)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "measure: out of host memory");
        fill_uniform(s->hw, nw * L, scale, 1);
        fill_uniform(s->hb, (uint64_t)o->width * L, scale, 2);
        fill_uniform(s->hx, nx, 1.0f, 3);
        /* in bfloat16 the tensors hold these values exactly */
        for (uint64_t i = 0; i < nw * L; i++)
            s->hw[i] = q(s, s->hw[i]);
        for (uint64_t i = 0; i < (uint64_t)o->width * L; i++)
            s->hb[i] = q(s, s->hb[i]);
        for (uint64_t i = 0; i < nx; i++)
            s->hx[i] = q(s, s->hx[i]);
    }
    return GM_OK;
}

static void stats_now(struct ws *s, uint64_t *allocated, uint64_t *reserved, uint64_t *pa,
                      uint64_t *pr)
{
    struct gm_alloc_stats st;
    gm_alloc_get_stats(s->a, &st);
    *allocated = st.allocated_bytes[GM_ALLOC_STAT_ALL].current;
    *reserved = st.reserved_bytes[GM_ALLOC_STAT_ALL].current;
    if (pa)
        *pa = st.allocated_bytes[GM_ALLOC_STAT_ALL].peak;
    if (pr)
        *pr = st.reserved_bytes[GM_ALLOC_STAT_ALL].peak;
}

static bool phase_wanted(const struct gm_measure_opts *o, enum gm_measure_phase_id id)
{
    return o->train || (id != GM_MEASURE_BACKWARD && id != GM_MEASURE_OPTIMIZER_STEP);
}

/* The phases, with the measurement protocol around each. */
static enum gm_status run_all(struct ws *s, struct gm_measure_result *out, struct gm_error *err)
{
    struct phase_state ps;
    enum gm_status st = GM_OK;
    bool failed = false;

    memset(&ps, 0, sizeof(ps));
    if (!s->dry && s->o->train) {
        ps.y_host = gm_malloc(fbytes((uint64_t)s->rows * s->width));
        if (!ps.y_host)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "measure: out of host memory");
    }
    out->all_ok = true;
    out->all_checks_ok = true;
    for (int id = 0; id < GM_MEASURE_N_PHASES; id++) {
        struct gm_measure_phase *ph = &out->phases[id];
        struct gm_error perr;
        enum gm_status pst;
        double t0;
        uint64_t pa, pr, dummy_a, dummy_r;
        if (!phase_wanted(s->o, (enum gm_measure_phase_id)id) || failed)
            continue;
        if (s->dry) {
            gm_alloc_reset_peak(s->a);
            pst = run_phase(s, (enum gm_measure_phase_id)id, ph, &ps, &perr);
            stats_now(s, &dummy_a, &dummy_r, &pa, &pr);
            ph->estimate_peak_allocated = pa;
            ph->estimate_peak_reserved = pr;
            if (pst) {
                failed = true;
                if (pst == GM_ERR_NOMEM) {
                    st = pst;
                    if (err)
                        *err = perr;
                    break;
                }
            }
            continue;
        }
        pst = sync(s, &perr);
        read_device(s, &ph->device_free_begin, &ph->device_used_begin);
        stats_now(s, &ph->allocated_begin, &ph->reserved_begin, NULL, NULL);
        gm_alloc_reset_peak(s->a);
        t0 = now();
        ph->ran = true;
        if (pst == GM_OK)
            pst = run_phase(s, (enum gm_measure_phase_id)id, ph, &ps, &perr);
        if (pst == GM_OK)
            pst = sync(s, &perr);
        /* the CPU check is not part of the phase's time */
        ph->seconds = now() - t0 - ph->check_seconds;
        stats_now(s, &ph->allocated_end, &ph->reserved_end, &ph->peak_allocated,
                  &ph->peak_reserved);
        read_device(s, &ph->device_free_end, &ph->device_used_end);
        ph->ok = pst == GM_OK && (!ph->checked || ph->check_ok);
        if (pst != GM_OK) {
            snprintf(ph->error, sizeof(ph->error), "%s", perr.msg);
            if (pst == GM_ERR_NOMEM) {
                st = pst;
                if (err)
                    *err = perr;
                break;
            }
        } else if (ph->checked && !ph->check_ok) {
            snprintf(ph->error, sizeof(ph->error),
                     "result differs from the CPU reference: max relative error %.3g > %.0e",
                     ph->max_rel_error, CHECK_TOLERANCE);
        }
        if (!ph->ok) {
            out->all_ok = false;
            failed = pst != GM_OK; /* a wrong result does not stop the lab */
        }
        if (ph->checked && !ph->check_ok)
            out->all_checks_ok = false;
        if (ph->peak_allocated > out->peak_allocated)
            out->peak_allocated = ph->peak_allocated;
        if (ph->peak_reserved > out->peak_reserved)
            out->peak_reserved = ph->peak_reserved;
    }
    gm_free(ps.y_host);
    if (st == GM_OK)
        gm_alloc_get_stats(s->a, &out->stats);
    return st;
}

static void fill_sizes(const struct gm_measure_opts *o, struct gm_measure_result *out)
{
    uint64_t rows = (uint64_t)o->batch * o->context;
    uint64_t esize = o->dtype == GM_MEASURE_BF16 ? 2 : 4;
    out->parameter_bytes = ((uint64_t)o->width * o->width + o->width) * o->layers * esize;
    out->input_bytes = rows * o->width * esize;
    out->activation_bytes = out->input_bytes;
}

enum gm_status gm_measure_estimate(const struct gm_measure_opts *o, struct gm_measure_result *out,
                                   struct gm_error *err)
{
    struct gm_alloc_fakedev fake;
    struct gm_alloc_device dev;
    struct gm_alloc_conf defaults;
    struct ws s;
    enum gm_status st = gm_measure_opts_check(o, err);
    if (st)
        return st;
    fill_sizes(o, out);
    gm_alloc_conf_init(&defaults);
    gm_alloc_fakedev_init(&fake, 0);
    dev.ops = &gm_alloc_fakedev_ops;
    dev.ctx = &fake;
    dev.total_bytes = (uint64_t)80 << 30; /* sizes only the expandable VA range */
    st = ws_init(&s, o, true, err);
    if (st == GM_OK)
        st = gm_alloc_new(o->conf ? o->conf : &defaults, &dev, &s.a, err);
    if (st == GM_OK) {
        struct gm_measure_result tmp;
        memset(&tmp, 0, sizeof(tmp));
        st = run_all(&s, &tmp, err);
        if (st == GM_OK) {
            struct gm_alloc_stats stt;
            gm_alloc_get_stats(s.a, &stt);
            for (int id = 0; id < GM_MEASURE_N_PHASES; id++) {
                out->phases[id].estimate_peak_allocated = tmp.phases[id].estimate_peak_allocated;
                out->phases[id].estimate_peak_reserved = tmp.phases[id].estimate_peak_reserved;
                if (tmp.phases[id].estimate_peak_allocated > out->estimate_peak_allocated)
                    out->estimate_peak_allocated = tmp.phases[id].estimate_peak_allocated;
                if (tmp.phases[id].estimate_peak_reserved > out->estimate_peak_reserved)
                    out->estimate_peak_reserved = tmp.phases[id].estimate_peak_reserved;
            }
        }
    }
    ws_release(&s);
    return st;
}

/* the allocator's device: segments from cuMemAlloc_v2 */
static enum gm_status cu_seg_alloc(void *ctx, uint64_t size, uint64_t *addr, struct gm_error *err)
{
    return gm_cuda_mem_alloc(ctx, size, addr, err);
}

static void cu_seg_free(void *ctx, uint64_t addr, uint64_t size)
{
    (void)size;
    (void)gm_cuda_mem_free(ctx, addr, NULL);
}

static const struct gm_alloc_device_ops cuda_ops = {cu_seg_alloc, cu_seg_free, NULL,
                                                    NULL,         NULL,        NULL};

enum gm_status gm_measure_run(struct gm_cuda *cu, const struct gm_measure_opts *o,
                              struct gm_measure_result *out, struct gm_error *err)
{
    struct gm_alloc_device dev;
    struct gm_alloc_conf defaults;
    struct gm_cuda_module *mod = NULL;
    struct ws s;
    uint64_t fr = 0, total = 0;
    enum gm_status st = gm_measure_opts_check(o, err);

    if (st)
        return st;
    if (o->conf && o->conf->expandable_segments)
        return gm_fail(err, GM_ERR_UNSUPPORTED, GM_NO_OFFSET,
                       "measure: expandable_segments needs the driver's virtual memory calls, "
                       "which gpumem does not bind yet");
    fill_sizes(o, out);
    gm_alloc_conf_init(&defaults);
    st = gm_cuda_context_begin(cu, o->device, err);
    if (st)
        return st;
    st = gm_cuda_module_load_ptx(cu, gm_measure_ptx, &mod, err);
    for (int k = 0; k < K_N && st == GM_OK; k++)
        st = gm_cuda_module_function(cu, mod, kernel_names[o->dtype == GM_MEASURE_BF16][k],
                                     &s.fn[k], err);
    if (st)
        goto out_ctx;
    if (gm_cuda_mem_get_info(cu, &fr, &total, NULL) == GM_OK) {
        out->device_total.value = total;
        out->device_total.valid = true;
        out->used_after_context.value = total - fr;
        out->used_after_context.valid = total >= fr;
    }
    {
        struct gm_cuda_function *fn[K_N];
        memcpy(fn, s.fn, sizeof(fn));
        st = ws_init(&s, o, false, err);
        memcpy(s.fn, fn, sizeof(fn));
    }
    s.cu = cu;
    dev.ops = &cuda_ops;
    dev.ctx = cu;
    dev.total_bytes = total;
    if (st == GM_OK)
        st = gm_alloc_new(o->conf ? o->conf : &defaults, &dev, &s.a, err);
    if (st == GM_OK)
        st = run_all(&s, out, err);
    ws_release(&s);
out_ctx:
    if (mod)
        (void)gm_cuda_module_unload(cu, mod, NULL);
    (void)gm_cuda_context_end(cu, NULL);
    return st;
}
