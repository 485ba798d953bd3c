/* SPDX-License-Identifier: MIT */
/* fake_common.h - what the fake libcuda.so.1 and libnvidia-ml.so.1 share: the configuration
 * read from GPUMEM_FAKE_* environment variables, the identity of each fake device (name,
 * UUID, PCI bus id), and the state file through which the fake NVML in one process sees
 * the memory that processes using the fake CUDA hold.  See fake_cuda.c for the list of
 * variables.  Everything here is hidden; only the driver entry points are exported. */
#ifndef GM_FAKE_COMMON_H
#define GM_FAKE_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FAKE_API     __attribute__((visibility("default")))
#define FAKE_MAX_DEV 8

struct fake_config {
    int n_devices;
    char name[FAKE_MAX_DEV][96];
    uint64_t total[FAKE_MAX_DEV];    /* bytes, NVML total */
    uint64_t reserved[FAKE_MAX_DEV]; /* bytes the "driver/firmware" keeps (NVML v2 reserved) */
    uint64_t base_used;              /* bytes used on each device by no process we list */
    char driver[80];                 /* "550.54.15" */
    int cuda_version;                /* 12040 */
    int cc_major, cc_minor;
    int sms;
    int cuinit_error;         /* forced cuInit result (34 = stub), 0 none */
    int nvml_init_error;      /* forced nvmlInit_v2 result (9 = driver not loaded) */
    int nvml_memory_error;    /* forced result of both memory-info calls (3 = UMA) */
    bool no_memory_v2;        /* nvmlDeviceGetMemoryInfo_v2 fails: test the v1 fallback */
    long oom_after;           /* cuMemAlloc_v2 fails after this many successes, -1 never */
    uint64_t context_bytes;   /* charged per retained primary context */
    uint64_t granule;         /* allocations are charged in these units */
    char state[1024];         /* state file path, "" none */
    uint32_t pid_offset;      /* NVML reports pid + offset (a PID namespace) */
    bool stride_bug;          /* _v2/_v3 process entries of 32 bytes (drivers 535.43-85) */
    int ptx_major, ptx_minor; /* highest PTX ISA the "driver" JITs */
    bool proc_mem_na;         /* usedGpuMemory = NVML_VALUE_NOT_AVAILABLE (WDDM, MIG) */
    int32_t graphics_pid;     /* a process with a graphics context on device 0, 0 none */
    uint64_t graphics_bytes;  /* its usage (counted in device used) */
    uint64_t module_bytes;    /* charged per loaded module or library */
    uint64_t graph_bytes;     /* charged per instantiated graph */
};

/* "80GiB", "512MiB", "24GB", "1000" (bytes) -> bytes; 'dflt' when unset or bad. */
uint64_t fake_parse_size(const char *s, uint64_t dflt) __attribute__((visibility("hidden")));
/* The integer in variable 'name', 'dflt' when unset or bad. */
long fake_env_long(const char *name, long dflt) __attribute__((visibility("hidden")));
/* Item 'i' of a comma-separated list (the last item repeats), into out[n]. */
void fake_list_item(const char *list, int i, char *out, size_t n)
    __attribute__((visibility("hidden")));

/* Read the configuration (once per call; cheap). */
void fake_config_load(struct fake_config *c) __attribute__((visibility("hidden")));

/* The 16 UUID bytes of physical device 'i' and its NVML spelling "GPU-...". */
void fake_uuid(int i, unsigned char u[16]) __attribute__((visibility("hidden")));
void fake_uuid_string(int i, char *out, size_t n) __attribute__((visibility("hidden")));
/* PCI bus number of device 'i' (domain 0, device 0, function 0). */
unsigned fake_pci_bus(int i) __attribute__((visibility("hidden")));

/* One process's usage on one device, as published in the state file. */
struct fake_slot {
    int32_t pid;    /* 0: free slot */
    int32_t device; /* physical index */
    uint64_t used;  /* bytes charged for allocations */
    uint64_t ctx;   /* bytes charged for the context */
};

#define FAKE_STATE_SLOTS 256

/* The state file, locked (shared or exclusive) for a reading: the descriptor, or -1 when
 * there is no state file. */
int fake_state_lock(const char *path, bool exclusive) __attribute__((visibility("hidden")));
/* Its live entries (dead PIDs are skipped) into out[0..cap); returns how many (0 for -1). */
size_t fake_state_live(int fd, struct fake_slot *out, size_t cap)
    __attribute__((visibility("hidden")));
/* Count a process list of physical 'device' handed out (fd locked exclusive), so that a test
 * program can wait until a watcher has seen its change instead of sleeping (workload.c's
 * "seen" step). */
void fake_state_count_read(int fd, int device) __attribute__((visibility("hidden")));
void fake_state_unlock(int fd) __attribute__((visibility("hidden")));
/* How many process lists of 'device' were handed out so far (0 without a state file). */
uint64_t fake_state_reads(const char *path, int device) __attribute__((visibility("hidden")));

/* Publish 'pid''s usage of 'device' (used + ctx == 0 removes it).  0 or -1. */
int fake_state_put(const char *path, int32_t pid, int32_t device, uint64_t used, uint64_t ctx)
    __attribute__((visibility("hidden")));
/* Live entries (dead PIDs are skipped) into out[0..cap); returns how many. */
size_t fake_state_get(const char *path, struct fake_slot *out, size_t cap)
    __attribute__((visibility("hidden")));

/* Bytes all listed processes use on physical 'device' (allocations + contexts). */
uint64_t fake_state_device_used(const char *path, int device) __attribute__((visibility("hidden")));

#endif
