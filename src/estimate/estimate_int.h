/* SPDX-License-Identifier: MIT */
/* estimate_int.h - shared pieces of the estimator (library-internal). */
#ifndef GM_ESTIMATE_INT_H
#define GM_ESTIMATE_INT_H

#include "gpumem/estimate.h"

/* Limits on inputs: far above real jobs, low enough that products stay in 64 bits. */
#define EST_MAX_PARAMS ((uint64_t)1 << 50) /* 1.1e15 parameters */
#define EST_MAX_BATCH  ((uint64_t)1 << 20)
#define EST_MAX_TOKENS ((uint64_t)1 << 26) /* per sequence */
#define EST_MAX_BYTES  ((uint64_t)1 << 60) /* any single input size */

/* Bytes of 'n' elements of 'bits' bits each, rounded up to whole bytes (saturating). */
uint64_t est_bits_bytes(uint64_t n, double bits);
/* A double byte count, rounded to nearest, saturating at UINT64_MAX. */
uint64_t est_round(double bytes);

enum gm_status est_train(const struct gm_estimate_inputs *in, const struct gm_model *m,
                         const struct gm_param_counts *pc, struct gm_estimate *e,
                         struct gm_error *err);
enum gm_status est_infer(const struct gm_estimate_inputs *in, const struct gm_model *m,
                         const struct gm_param_counts *pc, struct gm_estimate *e,
                         struct gm_error *err);

/* Activation bytes saved for backward by one transformer layer, per token, with 'seq'
 * tokens per sequence ('ea' compute dtype bytes, 'er' residual-stream bytes). */
double est_layer_saved_per_token(const struct gm_model *m, double ea, double er, bool eager,
                                 uint64_t seq);

#endif
