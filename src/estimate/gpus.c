/* SPDX-License-Identifier: MIT */
/* gpus.c - GPU catalog for fit verdicts, and GPU names as people type them.
 *
 * Capacities are the total memory the driver reports (nvidia-smi "Total", MiB-exact) where
 * that figure is known from published nvidia-smi output; otherwise the nominal capacity in
 * GiB.  The figure nvidia-smi shows is slightly below the marketing "80GB" on some boards
 * (H100: 81559 MiB); ECC, when enabled on older boards, takes a further share.
 *
 * Names: "H100", "h100-sxm", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "Tesla T4",
 * "NVIDIA GeForce RTX 4090".  A name is cut into words at spaces, '-', '_' and '/'; vendor
 * words (NVIDIA, Tesla, GeForce, Quadro), memory and form-factor words (HBM3, PCIe, SXM4,
 * Generation) are dropped; a size word ("80GB", "80G", or "80" followed by "GB") picks the
 * board; the words left name the family.  A family with several boards (A100: 40 and 80
 * GB) needs the size, and without it the name is refused with the choices. */
#include "estimate/estimate_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB(x) ((uint64_t)(x)*GM_MIB)
/* a total printed in hundredths of a GiB ("79.25 GiB") */
#define GIB_X100(x) ((uint64_t)(x)*GM_GIB / 100)

/* name, family, nominal GB, total memory, kind, compute capability x 10, no peer access, the
 * total CUDA reports where a public log prints it (below), and the streaming multiprocessors
 * as NVIDIA publishes them (its architecture whitepapers and product specifications: Volta
 * V100 80, Turing T4 40, Ampere A100 108, A40 and RTX A6000 84, RTX A5000 64, A10 72, A10G 80,
 * RTX 3090 82, 3080 68, 3060 28, Ada L40/L40S and RTX 6000 Ada 142, L4 58, RTX 4090 128,
 * 4080 76, 4070 Ti 60, Hopper H100 SXM, H100 NVL and H200 132, Blackwell B200 148, RTX 5090 170;
 * the catalog's H100-80GB is the SXM board, a PCIe H100 has 114), from which the driver's own
 * CUDA context follows (est_cuda_bare_context_bytes); the total CUDA reports where a public log
 * prints it (cudaMemGetInfo, which vLLM multiplies by gpu_memory_utilization; below nvidia-smi's
 * figure by what the driver keeps): the A100-SXM4-80GB's 79.25 GiB from a vLLM log that names the
 * board
 * ("Free memory on device (78.84/79.25 GiB)", LukeJYK/AutoScientists vllm.log @ e313354, whose
 * fused_moe config is NVIDIA_A100-SXM4-80GB's); the H100's 79.18 GiB from llm-d/llm-d-benchmark
 * config_explorer/empirical-vllm-memory-results.md @ b5c3307 (ten H100 starts at 0.11.0; the
 * two PR #10511 blocks print 79.22 GiB for an H100 in December 2024); the RTX 3090's 23.58 GiB
 * from the two 0.6.4 logs of vLLM issue #10517 ("total_gpu_memory (23.58GiB)"); the L40S's
 * 44.31 GiB from the 0.7.2 log of vLLM issue #15196 ("GPU: L40s", its fused_moe config file
 * named for NVIDIA_L40S, "total_gpu_memory (44.31GiB)"); the RTX PRO
 * 6000 Blackwell's 94.97 GiB from the vLLM log 2215860382/VedioSifter
 * train_run_20260421_065709.log @ 3902952, as the validation table's row v043 quotes it (that
 * repository's vllm_server.log names the board in its fused_moe device_name, "NVIDIA RTX PRO
 * 6000 Blackwell Server Edition").  That board's nvidia-smi total, 97887 MiB, is the one
 * nvidia-smi prints for the Server Edition (huggingface.co/datasets/uclanecl/NECL_GPUs
 * alderaan.csv @ 5f8a3f0, "97887MB") and the Workstation Edition
 * (MarcoPizeta/flash-next-rtxpro6000-bench HARDWARE.md, "97887 MiB"); its 188 SMs are 24,064
 * CUDA cores at 128 an SM (GB202 with 188 of its 192 SMs on, as the announcements of March 2025
 * give it), compute capability 12.0 (sm_120, antirez/ds4 PR #256).  Where no
 * vLLM log prints it, the CUDA device properties' total (cudaDeviceProp.totalGlobalMem, the
 * total cudaMemGetInfo reports too) as a public printout gives it: the A100-SXM4-40GB's 40536
 * MiB from PaddlePaddle/Paddle python/paddle/device/cuda/__init__.py @ 00195b2
 * (get_device_properties' example, "total_memory=40536MB"), the RTX 4090's 25386352640 B from
 * thamada/nvidia-smi gls/RTX4090_deviceQuery.py @ b09ef13 (deviceQuery, driver 12.4), the
 * T4's 15095 MiB from sylvia-ymlin/cuda-kernels-from-scratch README.md @ c28c34a (deviceQuery
 * on Colab), the RTX A5000's 24114 MiB from ankilab/HANCOTHON25 README.md @ 77adeba (PyTorch's
 * get_device_properties printed in a container, "total_memory=24114MB", which is MiB: the
 * _CudaDeviceProperties repr in PyTorch's torch/csrc/cuda/Module.cpp divides totalGlobalMem
 * by 1024 * 1024; the same listing gives its "multi_processor_count=64"),
 * whose nvidia-smi total is 24564 MiB as the validation table's row v058 takes it.  The figure
 * moves by some tens of MiB between drivers (an RTX 3090's
 * deviceQuery prints 25286672384 B, 23.55 GiB, beside the 23.58 GiB vLLM printed:
 * Jumperkables/cuda-benchmarking 00_deviceQuery/README.md @ 76861ca).
 * The RTX 4090 has no P2P with NVIDIA's driver: the mailbox hardware its P2P would use "is not
 * present or disabled in hardware on the 4090s" (tinygrad/open-gpu-kernel-modules README,
 * 1f40371, the fork that adds P2P through BAR1), so NCCL connects two of them through host
 * memory and vLLM's custom all-reduce stays off, as --no-p2p says.
 * The link: NVLink through NVSwitch for the SXM boards of the A100, H100, H200 and B200, as their
 * HGX/DGX servers connect them (NCCL logs "24 coll channels" there for A100-SXM4 and H100 pairs
 * and groups of eight: stage_runtime.c); every other board PCIe, the H100 NVL's bridged pairs
 * and the V100's hybrid cube mesh included (no NCCL channel count of theirs was read). */

static const struct gm_gpu gpus[] = {
    /* data-centre */
    {"B200", "b200", 192, MIB(183359), "data-centre", 100, false, 0, 148, GM_GPU_LINK_NVLINK},
    {"H200", "h200", 141, MIB(143771), "data-centre", 90, false, 0, 132, GM_GPU_LINK_NVLINK},
    {"H100-NVL", "h100-nvl h100nvl", 94, MIB(95830), "data-centre", 90, false, 0, 132,
     GM_GPU_LINK_PCIE},
    {"H100-80GB", "h100", 80, MIB(81559), "data-centre", 90, false, GIB_X100(7918), 132,
     GM_GPU_LINK_NVLINK},
    {"A100-80GB", "a100", 80, MIB(81920), "data-centre", 80, false, GIB_X100(7925), 108,
     GM_GPU_LINK_NVLINK},
    {"A100-40GB", "a100", 40, MIB(40960), "data-centre", 80, false, MIB(40536), 108,
     GM_GPU_LINK_NVLINK},
    {"L40S", "l40s", 48, MIB(46068), "data-centre", 89, false, GIB_X100(4431), 142,
     GM_GPU_LINK_PCIE},
    {"L40", "l40", 48, MIB(46068), "data-centre", 89, false, 0, 142, GM_GPU_LINK_PCIE},
    {"A40", "a40", 48, MIB(46068), "data-centre", 86, false, 0, 84, GM_GPU_LINK_PCIE},
    {"L4", "l4", 24, MIB(23034), "data-centre", 89, false, 0, 58, GM_GPU_LINK_PCIE},
    {"A10G", "a10g", 24, MIB(23028), "data-centre", 86, false, 0, 80, GM_GPU_LINK_PCIE},
    {"A10", "a10", 24, MIB(23028), "data-centre", 86, false, 0, 72, GM_GPU_LINK_PCIE},
    {"V100-32GB", "v100", 32, MIB(32768), "data-centre", 70, false, 0, 80, GM_GPU_LINK_PCIE},
    {"V100-16GB", "v100", 16, MIB(16160), "data-centre", 70, false, 0, 80, GM_GPU_LINK_PCIE},
    {"T4", "t4", 16, MIB(15360), "data-centre", 75, false, MIB(15095), 40, GM_GPU_LINK_PCIE},
    /* workstation and consumer */
    {"RTX-6000-Ada", "rtx-6000-ada rtx6000ada rtx-6000ada", 48, MIB(49140), "workstation", 89,
     false, 0, 142, GM_GPU_LINK_PCIE},
    {"RTX-A6000", "rtx-a6000 a6000 rtxa6000", 48, MIB(49140), "workstation", 86, false, 0, 84,
     GM_GPU_LINK_PCIE},
    {"RTX-A5000", "rtx-a5000 a5000 rtxa5000", 24, MIB(24564), "workstation", 86, false, MIB(24114),
     64, GM_GPU_LINK_PCIE},
    {"RTX-PRO-6000",
     "rtx-pro-6000 rtxpro6000 rtx-pro-6000-blackwell rtx-pro-6000-blackwell-server-edition "
     "rtx-pro-6000-blackwell-workstation-edition rtx-pro-6000-blackwell-max-q-workstation-edition",
     96, MIB(97887), "workstation", 120, false, GIB_X100(9497), 188, GM_GPU_LINK_PCIE},
    {"RTX-5090", "rtx-5090 5090 rtx5090", 32, MIB(32607), "consumer", 120, false, 0, 170,
     GM_GPU_LINK_PCIE},
    {"RTX-4090", "rtx-4090 4090 rtx4090", 24, MIB(24564), "consumer", 89, true, 25386352640, 128,
     GM_GPU_LINK_PCIE},
    {"RTX-3090", "rtx-3090 3090 rtx3090", 24, MIB(24576), "consumer", 86, false, GIB_X100(2358), 82,
     GM_GPU_LINK_PCIE},
    {"RTX-4080", "rtx-4080 4080 rtx4080", 16, MIB(16376), "consumer", 89, false, 0, 76,
     GM_GPU_LINK_PCIE},
    {"RTX-4070-Ti", "rtx-4070-ti 4070-ti 4070ti rtx4070ti", 12, MIB(12282), "consumer", 89, false,
     0, 60, GM_GPU_LINK_PCIE},
    {"RTX-3080", "rtx-3080 3080 rtx3080", 10, MIB(10240), "consumer", 86, false, 0, 68,
     GM_GPU_LINK_PCIE},
    {"RTX-3060", "rtx-3060 3060 rtx3060", 12, MIB(12288), "consumer", 86, false, 0, 28,
     GM_GPU_LINK_PCIE},
};

#define N_GPUS (sizeof(gpus) / sizeof(gpus[0]))
_Static_assert(N_GPUS <= GM_EST_MAX_CATALOG, "raise GM_EST_MAX_CATALOG");

size_t gm_gpu_catalog_count(void)
{
    return N_GPUS;
}

const struct gm_gpu *gm_gpu_catalog_get(size_t i)
{
    return i < N_GPUS ? &gpus[i] : NULL;
}

size_t est_gpus_by_size(size_t *idx, size_t max)
{
    size_t n = N_GPUS < max ? N_GPUS : max;
    for (size_t i = 0; i < n; i++) {
        size_t j = i;
        idx[i] = i;
        while (j > 0 && gpus[idx[j - 1]].memory_bytes > gpus[idx[j]].memory_bytes) {
            size_t t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
            j--;
        }
    }
    return n;
}

/* Words that say nothing about which board it is. */
static bool noise_word(const char *w)
{
    static const char *const words[] = {"nvidia", "tesla", "geforce", "quadro", "hbm2",
                                        "hbm2e",  "hbm3",  "hbm3e",   "pcie",   "sxm",
                                        "sxm2",   "sxm3",  "sxm4",    "sxm5",   "generation"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strcmp(w, words[i]))
            return true;
    return false;
}

/* "80gb" / "80g" -> 80; 0 when the word is not a size. */
static unsigned size_word(const char *w, const char *next)
{
    size_t d = strspn(w, "0123456789");
    if (d == 0 || d > 4)
        return 0;
    if (!strcmp(w + d, "gb") || !strcmp(w + d, "g") ||
        (!w[d] && next && (!strcmp(next, "gb") || !strcmp(next, "g"))))
        return (unsigned)strtoul(w, NULL, 10);
    return 0;
}

/* Whether 'family' is one of the space-separated names in 'list'. */
static bool in_family(const char *list, const char *family)
{
    size_t n = strlen(family);
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, family, n))
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

/* A size word matches a board by its nominal size or its real capacity (within 5%). */
static bool size_matches(const struct gm_gpu *g, unsigned gb)
{
    double gib = (double)g->memory_bytes / (double)GM_GIB;
    return gb == g->memory_gb || ((double)gb > gib * 0.95 && (double)gb < gib * 1.05);
}

enum gm_status gm_gpu_lookup(const char *name, const struct gm_gpu **out, struct gm_error *err)
{
    char buf[96], family[96] = "", *words[16];
    size_t n_words = 0, n_match = 0;
    const struct gm_gpu *match[4];
    unsigned gb = 0;

    *out = NULL;
    if (!name || !*name || strlen(name) >= sizeof buf)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "unknown GPU '%.40s' (see --list-gpus)",
                       name ? name : "");
    for (size_t i = 0; name[i]; i++)
        buf[i] = (char)tolower((unsigned char)name[i]);
    buf[strlen(name)] = '\0';
    for (char *p = buf; *p && n_words < sizeof words / sizeof words[0];) {
        size_t len = strcspn(p, " -_/");
        if (len) {
            words[n_words++] = p;
            p += len;
        }
        if (*p)
            *p++ = '\0';
    }
    for (size_t i = 0; i < n_words; i++) {
        unsigned s = size_word(words[i], i + 1 < n_words ? words[i + 1] : NULL);
        if (s) {
            gb = s;
            if (!words[i][strspn(words[i], "0123456789")])
                i++; /* "80" "GB": the unit is the next word */
            continue;
        }
        if (noise_word(words[i]))
            continue;
        snprintf(family + strlen(family), sizeof family - strlen(family), "%s%s",
                 family[0] ? "-" : "", words[i]);
    }
    for (size_t i = 0; i < N_GPUS && n_match < sizeof match / sizeof match[0]; i++)
        if (in_family(gpus[i].family, family) && (!gb || size_matches(&gpus[i], gb)))
            match[n_match++] = &gpus[i];
    if (n_match == 1) {
        *out = match[0];
        return GM_OK;
    }
    if (n_match == 0)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "unknown GPU '%s' (see --list-gpus, or give --gpu-memory)", name);
    {
        char list[160] = "";
        for (size_t i = 1; i < n_match; i++) /* smallest board first */
            for (size_t j = i; j > 0 && match[j - 1]->memory_bytes > match[j]->memory_bytes; j--) {
                const struct gm_gpu *t = match[j];
                match[j] = match[j - 1];
                match[j - 1] = t;
            }
        for (size_t i = 0; i < n_match; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                     i == 0 ? "" : (i + 1 == n_match ? " or " : ", "), match[i]->name);
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "'%s' is ambiguous: %s (name the size, as nvidia-smi does)", name, list);
    }
}

const struct gm_gpu *gm_gpu_find(const char *name)
{
    const struct gm_gpu *g;
    return gm_gpu_lookup(name, &g, NULL) == GM_OK ? g : NULL;
}
