/* SPDX-License-Identifier: MIT */
/* fuzz_hf_config.c - config.json reader: any bytes must give GM_OK or a clean error, and a
 * model that parses must survive parameter counting and a training and an inference
 * estimate without crashing, overflowing or hanging. */
#include "gpumem/estimate.h"
#include "gpumem/model.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gm_model m;
    struct gm_param_counts pc;
    struct gm_job job;
    struct gm_error err;
    static struct gm_estimate *e; /* reused from one input to the next */

    if (gm_model_parse_hf_config((const char *)data, size, &m, &err) != GM_OK)
        return 0;
    (void)gm_model_count_params(&m, &pc, &err);
    gm_job_init(&job);
    job.model.model = &m;
    job.model.n_params = m.arch == GM_ARCH_UNKNOWN ? 1000 : 0;
    job.mode = GM_EST_TRAIN;
    job.workload.seq = 64;
    job.memory.attention = GM_ATTN_EAGER;
    (void)gm_estimate_run(&job, &e, &err);
    job.mode = GM_EST_INFER;
    job.workload.context = 100;
    job.workload.new_tokens = 28;
    (void)gm_estimate_run(&job, &e, &err);
    return 0;
}
