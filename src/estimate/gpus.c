/* SPDX-License-Identifier: MIT */
/* gpus.c - GPU catalog for fit verdicts.
 *
 * Capacities are the total memory the driver reports (nvidia-smi "Total", MiB-exact) where
 * that figure is known from published nvidia-smi output; otherwise the nominal capacity in
 * GiB.  The figure nvidia-smi shows is slightly below the marketing "80GB" on some boards
 * (H100: 81559 MiB); ECC, when enabled on older boards, takes a further share. */
#include "gpumem/estimate.h"

#include "gpumem/units.h"

#include <string.h>
#include <strings.h>

#define MIB(x) ((uint64_t)(x)*GM_MIB)

static const struct gm_gpu gpus[] = {
    /* data-centre */
    {"B200", "b200", MIB(183359), "data-centre"},
    {"H200", "h200 h200-141gb", MIB(143771), "data-centre"},
    {"H100-NVL", "h100-nvl h100nvl", MIB(95830), "data-centre"},
    {"H100-80GB", "h100 h100-sxm h100-pcie h100-80gb", MIB(81559), "data-centre"},
    {"A100-80GB", "a100-80gb a100-80g a100-sxm4-80gb", MIB(81920), "data-centre"},
    {"A100-40GB", "a100 a100-40gb a100-40g a100-sxm4-40gb", MIB(40960), "data-centre"},
    {"L40S", "l40s", MIB(46068), "data-centre"},
    {"L40", "l40", MIB(46068), "data-centre"},
    {"A40", "a40", MIB(46068), "data-centre"},
    {"L4", "l4", MIB(23034), "data-centre"},
    {"A10G", "a10g", MIB(23028), "data-centre"},
    {"A10", "a10", MIB(23028), "data-centre"},
    {"V100-32GB", "v100-32gb v100-32g", MIB(32768), "data-centre"},
    {"V100-16GB", "v100 v100-16gb v100-16g", MIB(16160), "data-centre"},
    {"T4", "t4", MIB(15360), "data-centre"},
    /* workstation and consumer */
    {"RTX-6000-Ada", "rtx-6000-ada rtx6000ada", MIB(49140), "workstation"},
    {"RTX-A6000", "rtx-a6000 a6000", MIB(49140), "workstation"},
    {"RTX-5090", "rtx-5090 5090 rtx5090", MIB(32607), "consumer"},
    {"RTX-4090", "rtx-4090 4090 rtx4090", MIB(24564), "consumer"},
    {"RTX-3090", "rtx-3090 3090 rtx3090", MIB(24576), "consumer"},
    {"RTX-4080", "rtx-4080 4080 rtx4080", MIB(16376), "consumer"},
    {"RTX-4070-Ti", "rtx-4070-ti 4070ti", MIB(12282), "consumer"},
    {"RTX-3080", "rtx-3080 3080 rtx3080", MIB(10240), "consumer"},
    {"RTX-3060", "rtx-3060 3060 rtx3060", MIB(12288), "consumer"},
};

#define N_GPUS (sizeof(gpus) / sizeof(gpus[0]))

size_t gm_gpu_catalog_count(void)
{
    return N_GPUS;
}

const struct gm_gpu *gm_gpu_catalog_get(size_t i)
{
    return i < N_GPUS ? &gpus[i] : NULL;
}

const struct gm_gpu *gm_gpu_find(const char *name)
{
    size_t n;
    if (!name || !*name)
        return NULL;
    n = strlen(name);
    for (size_t i = 0; i < N_GPUS; i++) {
        const char *p = gpus[i].aliases;
        if (!strcasecmp(gpus[i].name, name))
            return &gpus[i];
        while (*p) {
            const char *e = strchr(p, ' ');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len == n && !strncasecmp(p, name, n))
                return &gpus[i];
            if (!e)
                break;
            p = e + 1;
        }
    }
    return NULL;
}
