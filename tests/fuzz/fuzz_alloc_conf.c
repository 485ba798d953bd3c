/* SPDX-License-Identifier: MIT */
/* fuzz_alloc_conf.c - PYTORCH_CUDA_ALLOC_CONF parser: any byte string either parses or
 * fails with GM_ERR_INVALID and a message; what parses formats back to a string that
 * parses to the same settings, and a model built from it survives a short workload. */
#include "gpumem/alloc.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[1024], canon[1024];
    struct gm_alloc_conf c, c2;
    struct gm_error e;
    struct gm_alloc_fakedev fake;
    struct gm_alloc_device dev = {&gm_alloc_fakedev_ops, &fake, 1ull << 33};
    struct gm_alloc *a = NULL;
    uint64_t p[4] = {0};

    if (size >= sizeof(s))
        size = sizeof(s) - 1;
    memcpy(s, data, size);
    s[size] = '\0';
    gm_alloc_conf_init(&c);
    if (gm_alloc_conf_parse(&c, s, &e) != GM_OK) {
        if (e.code != GM_ERR_INVALID || !e.msg[0])
            abort();
        return 0;
    }
    gm_alloc_conf_format(&c, canon, sizeof(canon));
    gm_alloc_conf_init(&c2);
    if (gm_alloc_conf_parse(&c2, canon, &e) != GM_OK || memcmp(&c, &c2, sizeof(c)) != 0)
        abort();
    gm_alloc_fakedev_init(&fake, 1ull << 30);
    if (gm_alloc_new(&c, &dev, &a, &e) != GM_OK)
        return 0;
    for (int i = 0; i < 4; i++)
        (void)gm_alloc_malloc(a, ((uint64_t)1 << (8 + 6 * i)) + 3, 0, &p[i], NULL);
    (void)gm_alloc_dealloc(a, p[1], NULL);
    gm_alloc_empty_cache(a);
    gm_alloc_free(a);
    return 0;
}
