/* SPDX-License-Identifier: MIT */
/* fuzz_memory_stats.c - torch memory_stats() JSON (component_bytes counters) on arbitrary
 * bytes. */
#include "gpumem/gpumem.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gm_components c;
    struct gm_error err;
    (void)gm_components_parse((const char *)data, size, "input", &c, &err);
    return 0;
}
