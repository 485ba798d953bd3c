/* SPDX-License-Identifier: MIT */
/* deepspeed.c - DeepSpeed's ZeRO model-state estimators, reproduced figure for figure.
 *
 * Source: estimate_zero2_model_states_mem_needs (deepspeed/runtime/zero/stage_1_and_2.py)
 * and estimate_zero3_model_states_mem_needs (deepspeed/runtime/zero/stage3.py), with the
 * documented outputs in DeepSpeed's docs/code-docs/source/memory.rst.  The formulas are
 * evaluated in the same order with the same mix of integer and float arithmetic (Python
 * ints are exact, '/' gives a double, int() truncates), so the figures agree with what
 * DeepSpeed prints.  Model states only: no activations, buffers or CUDA context.
 *
 *   ZeRO-2  offload:    gpu = 2P              cpu = P * max(4G, 16) * f
 *           no offload: gpu = 4P + int(16P/G) cpu = 4P * n * f
 *   ZeRO-3  (LL = 4 * largest_layer_params, k = 1/nodes)
 *           params+opt offload: gpu = LL;             cpu = P*18*k*f  | P*max(4n, 18k)*f
 *           opt offload:        gpu = LL + int(2P/G); cpu = P*16*k*f  | P*max(4n, 16k)*f
 *           no offload:         gpu = LL + int(18P/G); cpu = L*4*n*f | P*4*n*f
 *           (cpu: with zero_init | without)
 * P = total params, G = all GPUs, n = GPUs per node, f = additional_buffer_factor. */
#include "gpumem/estimate.h"

/* Python's int() of a non-negative double. */
static uint64_t py_int(double v)
{
    if (!(v > 0))
        return 0;
    if (v >= 18446744073709551615.0)
        return UINT64_MAX;
    return (uint64_t)v;
}

/* Python's (int * int) * float: the exact product rounded once to a double (a correctly
 * rounded product of two exactly representable doubles is the same), then times f. */
static double mul_exact_then(uint64_t a, uint64_t b, double f)
{
    return (double)a * (double)b * f;
}

enum gm_status gm_deepspeed_estimate(int stage, uint64_t total_params,
                                     uint64_t largest_layer_params, uint64_t gpus_per_node,
                                     uint64_t nodes, double buffer_factor, struct gm_deepspeed *out,
                                     struct gm_error *err)
{
    uint64_t P = total_params, n = gpus_per_node, G;
    double f = buffer_factor;
    if (stage != 2 && stage != 3)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "DeepSpeed's estimator covers ZeRO stages 2 and 3, not %d", stage);
    if (n == 0 || nodes == 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "GPUs per node and nodes must be >= 1");
    if (P > ((uint64_t)1 << 50) || largest_layer_params > P || n > 65536 || nodes > 65536)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "parameters or GPU counts out of range for the DeepSpeed estimator");
    G = n * nodes;
    out->stage = stage;
    out->total_params = P;
    out->largest_layer_params = largest_layer_params;
    out->gpus_per_node = n;
    out->nodes = nodes;
    out->buffer_factor = f;
    out->n_rows = 0;
    if (stage == 2) {
        /* all_cold prints offload first, then no offload */
        struct gm_deepspeed_row *r = &out->rows[out->n_rows++];
        uint64_t m = 4 * G > 16 ? 4 * G : 16;
        r->offload_optimizer = true;
        r->offload_params = r->zero_init = false;
        r->gpu_bytes = 2 * P;
        r->cpu_bytes = py_int(mul_exact_then(P, m, f));
        r = &out->rows[out->n_rows++];
        r->offload_optimizer = r->offload_params = r->zero_init = false;
        r->gpu_bytes = 4 * P + py_int((double)(16 * P) / (double)G);
        r->cpu_bytes = py_int(mul_exact_then(P * 4, n, f));
        return GM_OK;
    }
    {
        double k = 1.0 / (double)nodes;
        uint64_t LL = 4 * largest_layer_params;
        /* (offload_optimizer, offload_params) in DeepSpeed's print order, each with
         * zero_init 1 then 0 */
        static const bool order[3][2] = {{true, true}, {true, false}, {false, false}};
        for (int i = 0; i < 3; i++) {
            for (int zi = 1; zi >= 0; zi--) {
                struct gm_deepspeed_row *r = &out->rows[out->n_rows++];
                bool opt = order[i][0], par = order[i][1];
                r->offload_optimizer = opt;
                r->offload_params = par;
                r->zero_init = zi != 0;
                if (opt) {
                    unsigned state = par ? 18 : 16;
                    double fac = (double)state * k, cpu_per;
                    r->gpu_bytes = par ? LL : LL + py_int((double)(2 * P) / (double)G);
                    if (zi) {
                        /* total_params * 18 * gpus_factor * f, left to right */
                        cpu_per = (double)(P * state) * k * f;
                    } else {
                        /* max(4 * n, 18 * k) keeps the int when it wins */
                        double four_n = (double)(4 * n);
                        cpu_per = four_n >= fac ? mul_exact_then(P, 4 * n, f) : (double)P * fac * f;
                    }
                    r->cpu_bytes = py_int(cpu_per);
                } else {
                    r->gpu_bytes = LL + py_int((double)(18 * P) / (double)G);
                    r->cpu_bytes = zi ? py_int(mul_exact_then(largest_layer_params * 4, n, f))
                                      : py_int(mul_exact_then(P * 4, n, f));
                }
            }
        }
    }
    return GM_OK;
}

void gm_zero_paper_model_states(uint64_t params, uint64_t n_d, unsigned k, uint64_t out[4])
{
    double P = (double)params, N = n_d ? (double)n_d : 1.0, K = (double)k;
    out[0] = py_int((4.0 + K) * P);
    out[1] = py_int(4.0 * P + K * P / N);
    out[2] = py_int(2.0 * P + (2.0 + K) * P / N);
    out[3] = py_int((4.0 + K) * P / N);
}
