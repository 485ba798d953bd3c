/* SPDX-License-Identifier: MIT */
/* fuzz_safetensors.c - the safetensors header parser on arbitrary bytes: the input is a
 * whole file (its size is the input size). */
#include "gpumem/modelfile.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gm_modelfile m;
    struct gm_modelfile_limits lim;
    struct gm_error err;
    gm_modelfile_limits_default(&lim);
    lim.max_header_bytes = 1 << 20;
    lim.max_tensors = 4096;
    gm_modelfile_init(&m);
    if (gm_safetensors_parse(data, size, size, &lim, &m, &err) == GM_OK)
        (void)gm_modelfile_finish(&m, &err);
    gm_modelfile_release(&m);
    return 0;
}
