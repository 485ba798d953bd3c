/* SPDX-License-Identifier: MIT */
/* fake_amdsmi.c - a fake AMD SMI library (libamd_smi.so) for tests.  Never installed; tests
 * pass its absolute path in GPUMEM_AMDSMI_LIBRARY.  Our own declarations of the ABI gpumem
 * binds (src/device/amdsmi.c, docs/device.md), one socket per GPU.
 *
 *   GPUMEM_FAKE_AMD_DEVICES     number of GPUs (default 1; 0: amdsmi_init succeeds, no GPU)
 *   GPUMEM_FAKE_AMD_NAME        market names, comma-separated (the last repeats)
 *   GPUMEM_FAKE_AMD_MEMORY      VRAM totals (default 192GiB)
 *   GPUMEM_FAKE_AMD_USED        VRAM in use by no listed process (default 0)
 *   GPUMEM_FAKE_AMD_PROCESSES   "GPU:PID:BYTES,..." processes and their VRAM (also counted in
 *                               the GPU's used VRAM)
 *   GPUMEM_FAKE_AMD_VERSION     the library version and so its ABI: "24.5.0.0" (year form,
 *                               before ROCm 6.2: the process list gives PIDs and
 *                               amdsmi_get_gpu_process_info each entry), "24.6.2.0" (224-byte
 *                               process entries), "26.1.0" (no year field: 704-byte entries;
 *                               the default); "25.3.0" is written as ROCm 6.4 does, in the
 *                               year form {year, 25, 3, 0}; other versions write 704-byte
 *                               entries
 *   GPUMEM_FAKE_AMD_INIT_ERROR  amdsmi_init's forced result (34: amdgpu driver not loaded)
 */
#include "fake_common.h"

#include "device/amdsmi_abi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PROCS 32

struct fake_amd {
    int n_gpus;
    uint64_t total[FAKE_MAX_DEV], used[FAKE_MAX_DEV];
    char name[FAKE_MAX_DEV][96];
    unsigned version[4];
    bool year_form; /* {year, major, minor, release} */
    int n_procs;
    int proc_gpu[MAX_PROCS];
    uint32_t proc_pid[MAX_PROCS];
    uint64_t proc_vram[MAX_PROCS];
};

static struct fake_amd amd;
static int init_count;

static void load(void)
{
    const char *names = getenv("GPUMEM_FAKE_AMD_NAME");
    const char *mem = getenv("GPUMEM_FAKE_AMD_MEMORY");
    const char *used = getenv("GPUMEM_FAKE_AMD_USED");
    const char *procs = getenv("GPUMEM_FAKE_AMD_PROCESSES");
    const char *ver = getenv("GPUMEM_FAKE_AMD_VERSION");
    char item[96];
    int n;

    memset(&amd, 0, sizeof(amd));
    amd.n_gpus = (int)fake_env_long("GPUMEM_FAKE_AMD_DEVICES", 1);
    if (amd.n_gpus < 0)
        amd.n_gpus = 0;
    if (amd.n_gpus > FAKE_MAX_DEV)
        amd.n_gpus = FAKE_MAX_DEV;
    for (int i = 0; i < amd.n_gpus; i++) {
        fake_list_item(names && *names ? names : "AMD Instinct MI300X", i, amd.name[i],
                       sizeof(amd.name[i]));
        fake_list_item(mem && *mem ? mem : "192GiB", i, item, sizeof(item));
        amd.total[i] = fake_parse_size(item, 192ull << 30);
        fake_list_item(used && *used ? used : "0", i, item, sizeof(item));
        amd.used[i] = fake_parse_size(item, 0);
    }
    for (const char *p = procs; p && *p && amd.n_procs < MAX_PROCS;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char one[96], size[48];
        int gpu;
        unsigned pid;
        if (len >= sizeof(one))
            len = sizeof(one) - 1;
        memcpy(one, p, len);
        one[len] = '\0';
        if (sscanf(one, "%d:%u:%47s", &gpu, &pid, size) == 3 && gpu >= 0 && gpu < amd.n_gpus) {
            amd.proc_gpu[amd.n_procs] = gpu;
            amd.proc_pid[amd.n_procs] = pid;
            amd.proc_vram[amd.n_procs] = fake_parse_size(size, 0);
            amd.used[gpu] += amd.proc_vram[amd.n_procs];
            amd.n_procs++;
        }
        p = comma ? comma + 1 : p + len;
    }
    n = sscanf(ver && *ver ? ver : "26.1.0", "%u.%u.%u.%u", &amd.version[0], &amd.version[1],
               &amd.version[2], &amd.version[3]);
    amd.year_form = n == 4;
}

/* The process ABI of the configured version: 0 PIDs + per-PID info, 24 (224 B) or 26 (704 B). */
static int proc_abi(void)
{
    if (amd.year_form)
        return amd.version[0] == 24 && amd.version[1] >= 6 ? 24 : 0;
    return 26;
}

/* Handles encode the GPU index (sockets and processors alike); nothing is dereferenced. */
static amd_handle to_handle(unsigned base, int i)
{
    return (amd_handle)(uintptr_t)(base + (unsigned)i);
}

static int from_handle(amd_handle h, unsigned base)
{
    uintptr_t v = (uintptr_t)h;
    if (!init_count || v < base || v >= base + (unsigned)amd.n_gpus)
        return -1;
    return (int)(v - base);
}

#define SOCKET_BASE 0x50c0000u
#define GPU_BASE    0x6a0000u

FAKE_API amd_status amdsmi_init(uint64_t flags)
{
    long forced = fake_env_long("GPUMEM_FAKE_AMD_INIT_ERROR", 0);
    if (!(flags & (1u << 1)))
        return AMDSMI_STATUS_INVAL; /* gpumem asks for GPUs */
    if (forced)
        return (amd_status)forced;
    if (!init_count)
        load();
    init_count++;
    return AMDSMI_STATUS_SUCCESS;
}

FAKE_API amd_status amdsmi_shut_down(void)
{
    if (!init_count)
        return AMDSMI_STATUS_NOT_INIT;
    init_count--;
    return AMDSMI_STATUS_SUCCESS;
}

FAKE_API amd_status amdsmi_status_code_to_string(amd_status s, const char **out)
{
    switch (s) {
    case AMDSMI_STATUS_SUCCESS:
        *out = "AMDSMI_STATUS_SUCCESS: Call succeeded";
        break;
    case 34:
        *out = "AMDSMI_STATUS_DRIVER_NOT_LOADED: Processor driver not loaded";
        break;
    default:
        *out = "AMDSMI_STATUS_UNKNOWN_ERROR: An unknown error occurred";
        break;
    }
    return AMDSMI_STATUS_SUCCESS;
}

FAKE_API amd_status amdsmi_get_lib_version(void *out)
{
    uint32_t v[4] = {0, 0, 0, 0};
    if (!out)
        return AMDSMI_STATUS_INVAL;
    if (!init_count)
        load(); /* callable before amdsmi_init from 25.2 on */
    memcpy(v, amd.version, sizeof(v));
    if (!amd.year_form && amd.version[0] == 25) { /* ROCm 6.4: the year field stayed */
        v[0] = 25;
        v[1] = amd.version[0];
        v[2] = amd.version[1];
        v[3] = amd.version[2];
    } else if (!amd.year_form) {
        v[3] = 0; /* padding before the build pointer */
    }
    memcpy(out, v, sizeof(v));
    memset((char *)out + 16, 0, sizeof(void *)); /* build: NULL */
    return AMDSMI_STATUS_SUCCESS;
}

FAKE_API amd_status amdsmi_get_socket_handles(uint32_t *count, amd_handle *sockets)
{
    if (!init_count)
        return AMDSMI_STATUS_NOT_INIT;
    if (!count)
        return AMDSMI_STATUS_INVAL;
    if (sockets) {
        uint32_t n = *count < (uint32_t)amd.n_gpus ? *count : (uint32_t)amd.n_gpus;
        for (uint32_t k = 0; k < n; k++)
            sockets[k] = to_handle(SOCKET_BASE, (int)k);
    }
    *count = (uint32_t)amd.n_gpus;
    return AMDSMI_STATUS_SUCCESS;
}

FAKE_API amd_status amdsmi_get_processor_handles(amd_handle socket, uint32_t *count,
                                                 amd_handle *procs)
{
    int s = from_handle(socket, SOCKET_BASE);
    if (s < 0 || !count)
        return AMDSMI_STATUS_INVAL;
    if (procs && *count >= 1)
        procs[0] = to_handle(GPU_BASE, s);
    *count = 1;
    return AMDSMI_STATUS_SUCCESS;
}

FAKE_API amd_status amdsmi_get_gpu_memory_total(amd_handle h, int type, uint64_t *bytes)
{
    int i = from_handle(h, GPU_BASE);
    if (i < 0 || !bytes || type != 0)
        return AMDSMI_STATUS_INVAL;
    *bytes = amd.total[i];
    return AMDSMI_STATUS_SUCCESS;
}

FAKE_API amd_status amdsmi_get_gpu_memory_usage(amd_handle h, int type, uint64_t *bytes)
{
    int i = from_handle(h, GPU_BASE);
    if (i < 0 || !bytes || type != 0)
        return AMDSMI_STATUS_INVAL;
    *bytes = amd.used[i];
    return AMDSMI_STATUS_SUCCESS;
}

FAKE_API amd_status amdsmi_get_gpu_device_uuid(amd_handle h, unsigned *len, char *uuid)
{
    int i = from_handle(h, GPU_BASE);
    if (i < 0 || !len || !uuid)
        return AMDSMI_STATUS_INVAL;
    if (*len < AMDSMI_GPU_UUID_SIZE)
        return AMDSMI_STATUS_INSUFFICIENT_SIZE;
    snprintf(uuid, *len, "%02xff74a1-0000-1000-80ff-0c8ae9aa5e%02x", 0x10 + i, 0x41 + i);
    *len = (unsigned)strlen(uuid);
    return AMDSMI_STATUS_SUCCESS;
}

FAKE_API amd_status amdsmi_get_gpu_device_bdf(amd_handle h, uint64_t *bdf)
{
    int i = from_handle(h, GPU_BASE);
    if (i < 0 || !bdf)
        return AMDSMI_STATUS_INVAL;
    /* function bits 0-2, device 3-7, bus 8-15, domain 16-63 */
    *bdf = ((uint64_t)(0x0cu + (unsigned)i * 0x10u) << 8);
    return AMDSMI_STATUS_SUCCESS;
}

FAKE_API amd_status amdsmi_get_gpu_asic_info(amd_handle h, void *info)
{
    int i = from_handle(h, GPU_BASE);
    /* market_name first: 64 bytes before ROCm 6.2, 256 after (the struct is larger still) */
    size_t name_len = amd.year_form && !(amd.version[0] == 24 && amd.version[1] >= 6) ? 64 : 256;
    if (i < 0 || !info)
        return AMDSMI_STATUS_INVAL;
    memset(info, 0, name_len + 64);
    snprintf(info, name_len, "%s", amd.name[i]);
    return AMDSMI_STATUS_SUCCESS;
}

/* 'mem' sums VRAM, GTT and CPU memory: 2 MiB of GTT makes a reader of the wrong field show. */
static void fill_usage(struct amd_proc_usage *u, int k)
{
    u->vram_mem = amd.proc_vram[k];
    u->gtt_mem = 2u << 20;
    u->mem = u->vram_mem + u->gtt_mem;
}

static void fill_proc(int k, void *entry, int abi)
{
    if (abi == 26) {
        struct amd_proc_v26 *p = entry;
        memset(p, 0, sizeof(*p));
        snprintf(p->name, sizeof(p->name), "python3");
        p->pid = amd.proc_pid[k];
        fill_usage(&p->u, k);
    } else {
        struct amd_proc_v24 *p = entry;
        memset(p, 0, sizeof(*p));
        snprintf(p->name, sizeof(p->name), "python3");
        p->pid = amd.proc_pid[k];
        fill_usage(&p->u, k);
    }
}

FAKE_API amd_status amdsmi_get_gpu_process_list(amd_handle h, uint32_t *max, void *list)
{
    int i = from_handle(h, GPU_BASE), abi = proc_abi();
    uint32_t n = 0, written = 0;
    size_t stride = abi == 0    ? sizeof(uint32_t)
                    : abi == 24 ? sizeof(struct amd_proc_v24)
                                : sizeof(struct amd_proc_v26);
    if (i < 0 || !max)
        return AMDSMI_STATUS_INVAL;
    for (int k = 0; k < amd.n_procs; k++) {
        if (amd.proc_gpu[k] != i)
            continue;
        if (list && written < *max) {
            void *e = (char *)list + (size_t)written * stride;
            if (abi == 0)
                memcpy(e, &amd.proc_pid[k], sizeof(uint32_t));
            else
                fill_proc(k, e, abi);
            written++;
        }
        n++;
    }
    if (*max == 0) {
        *max = n;
        return AMDSMI_STATUS_SUCCESS;
    }
    {
        uint32_t room = *max;
        *max = n;
        return n > room ? AMDSMI_STATUS_OUT_OF_RESOURCES : AMDSMI_STATUS_SUCCESS;
    }
}

/* Before ROCm 6.2 only: one 224-byte entry per PID. */
FAKE_API amd_status amdsmi_get_gpu_process_info(amd_handle h, uint32_t pid, void *info)
{
    int i = from_handle(h, GPU_BASE);
    if (i < 0 || !info)
        return AMDSMI_STATUS_INVAL;
    if (proc_abi() != 0)
        return AMDSMI_STATUS_NOT_SUPPORTED;
    for (int k = 0; k < amd.n_procs; k++) {
        if (amd.proc_gpu[k] == i && amd.proc_pid[k] == pid) {
            fill_proc(k, info, 24);
            return AMDSMI_STATUS_SUCCESS;
        }
    }
    return AMDSMI_STATUS_INVAL;
}
