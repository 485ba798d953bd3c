/* SPDX-License-Identifier: MIT */
/* account_int.h - internals of src/account/: the account being read (processes, the raw
 * counters of their chosen samples) and the equation made from those counters. */
#ifndef GM_ACCOUNT_ACCOUNT_INT_H
#define GM_ACCOUNT_ACCOUNT_INT_H

#include "gpumem/account.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ACC_MAX_PROCESSES 65536             /* processes in one account */
#define ACC_MAX_DEVICES   64                /* CUDA ordinals of one process */
#define ACC_MAX_OBJECTS   4096              /* object ids of one process */
#define ACC_MAX_MEM       256               /* (object, kind) pairs of one sample line */
#define ACC_MAX_POINTS    (1u << 20)        /* timeline points kept per device */
#define ACC_MAX_LARGEST   64                /* largest allocations kept per process */
#define ACC_MAX_LINE      ((size_t)1 << 20) /* bytes of one line */

/* One (object, kind) counter of a sample. */
struct acc_mem {
    uint32_t object;
    enum gm_account_kind kind;
    uint64_t bytes;
    uint64_t count;
};

/* A sample line as written: the counters of one device at one moment. */
struct acc_sample {
    bool present;
    enum gm_account_moment at; /* PEAK for a periodic sample */
    uint64_t t_ns;
    bool used_valid;
    uint64_t used;
    enum gm_account_reading used_source;
    uint64_t used_t_ns;
    bool consistent;
    uint64_t context, n_context, modules, n_modules, graphs, n_graphs, rounding, virt;
    enum gm_account_reading context_source, modules_source, graphs_source;
    size_t n_mem;
    struct acc_mem mem[ACC_MAX_MEM];
};

/* A loaded object of a process, as its object line named it. */
struct acc_object {
    enum gm_account_lib lib;
    char name[64]; /* the file name, without its folder */
};

struct acc_device_state {
    struct acc_sample peak; /* the best peak candidate so far */
    uint64_t peak_seen;     /* its seen bytes, for samples without a reading */
    struct acc_sample end;  /* the exit / signal sample, or the last one */
    size_t cap_points;
};

/* What a process's lines left while they are read. */
struct acc_process_state {
    struct acc_object *objects;   /* ACC_MAX_OBJECTS, allocated when the first object comes */
    struct acc_device_state *dev; /* one per devices[] entry */
    size_t cap_devices;
    size_t cap_largest;
    uint64_t host_now; /* pinned + registered in the latest host sample */
};

struct gm_account {
    size_t n_processes;
    size_t cap_processes;
    struct gm_account_process *processes;
    struct acc_process_state *states;
};

/* The equation of a sample of a process's device (balance.c). */
void acc_balance(const struct acc_sample *s, const struct acc_object *objects,
                 const struct gm_account_device *dev, struct gm_account_balance *out);

/* The bytes every term but NOT_SEEN adds up to, and the device memory by class (for
 * timeline points; by_lib may be NULL). */
uint64_t acc_seen(const struct acc_sample *s, const struct acc_object *objects, uint64_t *by_lib);

/* The class of object 'id' of a process ('objects' may be NULL). */
enum gm_account_lib acc_object_lib(const struct acc_object *objects, uint32_t id);
const char *acc_object_name(const struct acc_object *objects, uint32_t id);

#endif
