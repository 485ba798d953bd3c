/* SPDX-License-Identifier: MIT */
/* amdsmi_abi.h - the layouts of AMD SMI's amdsmi_proc_info_t that gpumem reads, as our own
 * declarations (docs/device.md cites the header lines and documentation they come from);
 * shared by the backend (amdsmi.c) and the fake library of the tests, and pinned by
 * _Static_assert so that neither can drift from the real ABI. */
#ifndef GM_DEVICE_AMDSMI_ABI_H
#define GM_DEVICE_AMDSMI_ABI_H

#include <stddef.h>
#include <stdint.h>

typedef uint32_t amd_status; /* amdsmi_status_t */
typedef void *amd_handle;    /* amdsmi_socket_handle, amdsmi_processor_handle */

/* amdsmi_status_t values gpumem tells apart (the same in every version read) */
#define AMDSMI_STATUS_SUCCESS           0u
#define AMDSMI_STATUS_INVAL             1u
#define AMDSMI_STATUS_NOT_SUPPORTED     2u
#define AMDSMI_STATUS_OUT_OF_RESOURCES  15u
#define AMDSMI_STATUS_INIT_ERROR        18u
#define AMDSMI_STATUS_NOT_FOUND         31u
#define AMDSMI_STATUS_NOT_INIT          32u
#define AMDSMI_STATUS_DRIVER_NOT_LOADED 34u
#define AMDSMI_STATUS_INSUFFICIENT_SIZE 41u
#define AMDSMI_INIT_AMD_GPUS            (1ull << 1)
#define AMDSMI_MEM_TYPE_VRAM            0
#define AMDSMI_GPU_UUID_SIZE            38u /* bytes of a UUID string with its NUL */

/* What follows the PID in every layout of amdsmi_proc_info_t (8-byte aligned, so it starts
 * 8 bytes after the u32 pid, as in the C layout). */
struct amd_proc_usage {
    uint64_t mem;          /* bytes: VRAM + GTT + CPU */
    uint64_t engine_ns[2]; /* gfx, enc */
    uint32_t engine_reserved[12];
    uint64_t gtt_mem, cpu_mem; /* bytes */
    uint64_t vram_mem;         /* bytes */
    uint32_t memory_reserved[10];
};

/* amdsmi_proc_info_t of lib 23.x-24.x. */
struct amd_proc_v24 {
    char name[32];
    uint32_t pid;
    struct amd_proc_usage u;
    char container_name[32];
    uint32_t reserved[4];
};

/* amdsmi_proc_info_t of lib 26.x (ROCm 7): the strings are AMDSMI_MAX_STRING_LENGTH (256). */
struct amd_proc_v26 {
    char name[256];
    uint32_t pid;
    struct amd_proc_usage u;
    char container_name[256];
    uint32_t cu_occupancy;
    uint32_t reserved[11];
};

_Static_assert(sizeof(struct amd_proc_v24) == 224, "amdsmi_proc_info_t (lib 24) is 224 bytes");
_Static_assert(offsetof(struct amd_proc_v24, u.vram_mem) == 128, "vram_mem at 128 (lib 24)");
_Static_assert(sizeof(struct amd_proc_v26) == 704, "amdsmi_proc_info_t (lib 26) is 704 bytes");
_Static_assert(offsetof(struct amd_proc_v26, pid) == 256, "pid at 256 (lib 26)");
_Static_assert(offsetof(struct amd_proc_v26, u.vram_mem) == 352, "vram_mem at 352 (lib 26)");

#endif
