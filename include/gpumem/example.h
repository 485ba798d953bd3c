/* SPDX-License-Identifier: MIT */
/* example.h - gpumem's own example snapshot: a simulated training job written as the
 * pickle torch.cuda.memory._dump_snapshot() writes (PyTorch 2.9 layout, protocol 4).
 *
 * The job trains a small GPT (4 layers, hidden 1024, vocabulary 32000, batch 8 x 512 tokens,
 * fp32) with AdamW: parameters moved to the GPU, per iteration a batch copied to the GPU, the
 * forward pass (activations saved for backward, temporaries freed), loss.backward()
 * (activation gradients, parameter gradients, saved activations released), optimizer.step()
 * (AdamW state created at the first step, foreach temporaries freed inside each step) and
 * optimizer.zero_grad(set_to_none=True).  With 'leak', every iteration also runs an
 * evaluation forward without torch.no_grad() and keeps its loss in a Python list, so each
 * iteration's graph and its saved activations stay alive: the classic leak.
 *
 * Every allocation goes through the library's model of the CUDA caching allocator (alloc.h,
 * PyTorch's default settings), so the trace and the final segments agree exactly.
 * Stack frames are Python frames of torch.nn, torch.autograd and torch.optim and of the
 * user's train.py / model.py, shared the way the real writer shares them. */
#ifndef GPUMEM_EXAMPLE_H
#define GPUMEM_EXAMPLE_H

#include "gpumem/error.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

struct gm_example_opts {
    unsigned iterations; /* training iterations (1 to 1000), default 5 */
    bool leak;           /* evaluation loss kept with its graph every iteration, default true */
    int protocol;        /* pickle protocol 2 to 5, default 4 */
    uint64_t start_us;   /* time_us of the first event, default 2025-11-24 09:00 UTC */
    unsigned batch;      /* sequences of 512 tokens per training batch (1 to 64), default 8 */
    int device;          /* CUDA device of the job (0 to 15), default 0: the snapshot of rank N
                          * of a torchrun job, with one empty trace per device before it */
    bool phases;         /* mark each step's data, forward, backward, optimizer and evaluate
                          * as gpumem.torch.record() marks phase(): record_function ranges
                          * "gpumem.phase:<name>" in external_annotations; default false */
};

void gm_example_opts_init(struct gm_example_opts *o);

/* Simulate the job and write the snapshot pickle to 'f' (borrowed).  GM_ERR_INVALID for bad
 * options, GM_ERR_NOMEM, GM_ERR_IO. */
enum gm_status gm_example_write(FILE *f, const struct gm_example_opts *o, struct gm_error *err);

/* Write the gpumem.snapshot.example/1 document of a snapshot written to 'output' with 'o'
 * (what `gpumem snapshot example --json` prints) to 'f'.  Errors: GM_ERR_IO. */
enum gm_status gm_example_json(FILE *f, const char *output, const struct gm_example_opts *o,
                               struct gm_error *err);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
