/* SPDX-License-Identifier: MIT */
/* fuzz_gguf.c - the GGUF header parser on arbitrary bytes, both as a whole file and as the
 * prefix of a longer one (the loader's retry path); a header that parses is turned into a
 * model (metadata keys, shapes filling in what they leave out, MLA and MoE keys, the generic
 * layout of an unknown architecture) and counted. */
#include "gpumem/estimate.h"
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
    lim.max_array = 1 << 16;
    lim.max_string = 1 << 16;
    for (int pass = 0; pass < 2; pass++) {
        gm_modelfile_init(&m);
        if (gm_gguf_parse(data, size, pass ? (uint64_t)size * 4 + 64 : size, &lim, &m, &err) ==
                GM_OK &&
            gm_modelfile_finish(&m, &err) == GM_OK) {
            struct gm_model mm;
            struct gm_param_counts pc;
            if (gm_modelfile_to_model(&m, &mm, &err) == GM_OK)
                (void)gm_model_count_params(&mm, &pc, &err);
        }
        gm_modelfile_release(&m);
    }
    return 0;
}
