/* SPDX-License-Identifier: MIT */
/* fake_common.c - configuration, device identity and the shared state file of the fake
 * drivers (see fake_common.h).  The state file is FAKE_STATE_SLOTS fixed records of
 * struct fake_slot, read and rewritten whole under flock(), then FAKE_MAX_DEV counters
 * (uint64_t) of the process lists NVML handed out, one per device. */
#include "fake_common.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

uint64_t fake_parse_size(const char *s, uint64_t dflt)
{
    char *end;
    double v;
    if (!s || !*s)
        return dflt;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return dflt;
    if (!strcmp(end, "KiB"))
        v *= 1024.0;
    else if (!strcmp(end, "MiB"))
        v *= 1048576.0;
    else if (!strcmp(end, "GiB"))
        v *= 1073741824.0;
    else if (!strcmp(end, "TiB"))
        v *= 1099511627776.0;
    else if (!strcmp(end, "MB"))
        v *= 1e6;
    else if (!strcmp(end, "GB"))
        v *= 1e9;
    else if (*end)
        return dflt;
    return (uint64_t)v;
}

long fake_env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    char *end;
    long v;
    if (!s || !*s)
        return dflt;
    errno = 0;
    v = strtol(s, &end, 10);
    return errno || *end ? dflt : v;
}

/* Item 'i' of a comma-separated list (the last item repeats), into out. */
void fake_list_item(const char *list, int i, char *out, size_t n)
{
    const char *p = list, *comma;
    int k = 0;
    size_t len;
    while (k < i && (comma = strchr(p, ',')) != NULL) {
        p = comma + 1;
        k++;
    }
    comma = strchr(p, ',');
    len = comma ? (size_t)(comma - p) : strlen(p);
    if (len >= n)
        len = n - 1;
    memcpy(out, p, len);
    out[len] = '\0';
}

void fake_config_load(struct fake_config *c)
{
    const char *names = getenv("GPUMEM_FAKE_NAME");
    const char *mem = getenv("GPUMEM_FAKE_MEMORY");
    const char *res = getenv("GPUMEM_FAKE_RESERVED");
    const char *s;
    long n;

    memset(c, 0, sizeof(*c));
    n = fake_env_long("GPUMEM_FAKE_DEVICES", 1);
    c->n_devices = n < 0 ? 0 : n > FAKE_MAX_DEV ? FAKE_MAX_DEV : (int)n;
    for (int i = 0; i < FAKE_MAX_DEV; i++) {
        char item[96];
        if (names && *names)
            fake_list_item(names, i, c->name[i], sizeof(c->name[i]));
        else
            snprintf(c->name[i], sizeof(c->name[i]), "NVIDIA Fake A100-SXM4-80GB");
        item[0] = '\0';
        if (mem)
            fake_list_item(mem, i, item, sizeof(item));
        c->total[i] = fake_parse_size(item, 80 * 1073741824ull);
        item[0] = '\0';
        if (res)
            fake_list_item(res, i, item, sizeof(item));
        c->reserved[i] = fake_parse_size(item, 512 * 1048576ull);
        if (c->reserved[i] > c->total[i])
            c->reserved[i] = c->total[i];
    }
    c->base_used = fake_parse_size(getenv("GPUMEM_FAKE_BASE_USED"), 0);
    s = getenv("GPUMEM_FAKE_DRIVER_VERSION");
    snprintf(c->driver, sizeof(c->driver), "%s", s && *s ? s : "550.54.15");
    c->cuda_version = (int)fake_env_long("GPUMEM_FAKE_CUDA_VERSION", 12040);
    s = getenv("GPUMEM_FAKE_CC");
    if (!s || sscanf(s, "%d.%d", &c->cc_major, &c->cc_minor) != 2) {
        c->cc_major = 8;
        c->cc_minor = 0;
    }
    c->sms = (int)fake_env_long("GPUMEM_FAKE_SMS", 108);
    c->cuinit_error = (int)fake_env_long("GPUMEM_FAKE_CUINIT_ERROR", 0);
    c->nvml_init_error = (int)fake_env_long("GPUMEM_FAKE_NVML_INIT_ERROR", 0);
    c->nvml_memory_error = (int)fake_env_long("GPUMEM_FAKE_NVML_MEMORY_ERROR", 0);
    c->no_memory_v2 = fake_env_long("GPUMEM_FAKE_NO_MEMORY_V2", 0) != 0;
    c->oom_after = fake_env_long("GPUMEM_FAKE_OOM_AFTER", -1);
    c->context_bytes = fake_parse_size(getenv("GPUMEM_FAKE_CONTEXT_BYTES"), 300 * 1048576ull);
    c->granule = fake_parse_size(getenv("GPUMEM_FAKE_GRANULE"), 2 * 1048576ull);
    if (!c->granule)
        c->granule = 1;
    s = getenv("GPUMEM_FAKE_STATE");
    snprintf(c->state, sizeof(c->state), "%s", s ? s : "");
    c->pid_offset = (uint32_t)fake_env_long("GPUMEM_FAKE_PID_OFFSET", 0);
    c->stride_bug = fake_env_long("GPUMEM_FAKE_STRIDE_BUG", 0) != 0;
    c->proc_mem_na = fake_env_long("GPUMEM_FAKE_PROC_MEMORY_NA", 0) != 0;
    c->graphics_pid = (int32_t)fake_env_long("GPUMEM_FAKE_GRAPHICS_PID", 0);
    c->graphics_bytes = fake_parse_size(getenv("GPUMEM_FAKE_GRAPHICS_BYTES"), 128 * 1048576ull);
    c->module_bytes = fake_parse_size(getenv("GPUMEM_FAKE_MODULE_BYTES"), 0);
    c->graph_bytes = fake_parse_size(getenv("GPUMEM_FAKE_GRAPH_BYTES"), 0);
    s = getenv("GPUMEM_FAKE_PTX_ISA");
    if (!s || sscanf(s, "%d.%d", &c->ptx_major, &c->ptx_minor) != 2) {
        c->ptx_major = 8;
        c->ptx_minor = 5;
    }
}

void fake_uuid(int i, unsigned char u[16])
{
    static const unsigned char base[16] = {0xfa, 0x4e, 0x00, 0x00, 0x6d, 0x65, 0x6d, 0x00,
                                           0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    memcpy(u, base, 16);
    u[3] = (unsigned char)i;
    u[15] = (unsigned char)(0x10 + i);
}

void fake_uuid_string(int i, char *out, size_t n)
{
    unsigned char u[16];
    fake_uuid(i, u);
    snprintf(out, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}

unsigned fake_pci_bus(int i)
{
    return 0x17u + (unsigned)i * 0x10u;
}

static int state_open_locked(const char *path, int lock)
{
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    if (flock(fd, lock) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static void state_read(int fd, struct fake_slot *slots)
{
    ssize_t got;
    memset(slots, 0, sizeof(struct fake_slot) * FAKE_STATE_SLOTS);
    got = pread(fd, slots, sizeof(struct fake_slot) * FAKE_STATE_SLOTS, 0);
    (void)got; /* a short or empty file reads as free slots */
}

static bool alive(int32_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

int fake_state_put(const char *path, int32_t pid, int32_t device, uint64_t used, uint64_t ctx)
{
    struct fake_slot slots[FAKE_STATE_SLOTS];
    int fd, free_slot = -1, rc = 0;
    bool done = false;

    if (!path || !*path)
        return 0;
    fd = state_open_locked(path, LOCK_EX);
    if (fd < 0)
        return -1;
    state_read(fd, slots);
    for (int k = 0; k < FAKE_STATE_SLOTS; k++) {
        if (slots[k].pid && !alive(slots[k].pid))
            memset(&slots[k], 0, sizeof(slots[k])); /* prune dead processes */
        if (slots[k].pid == pid && slots[k].device == device) {
            slots[k].used = used;
            slots[k].ctx = ctx;
            if (!used && !ctx)
                memset(&slots[k], 0, sizeof(slots[k]));
            done = true;
        }
        if (!slots[k].pid && free_slot < 0)
            free_slot = k;
    }
    if (!done && (used || ctx)) {
        if (free_slot < 0) {
            rc = -1;
        } else {
            slots[free_slot].pid = pid;
            slots[free_slot].device = device;
            slots[free_slot].used = used;
            slots[free_slot].ctx = ctx;
        }
    }
    if (pwrite(fd, slots, sizeof(slots), 0) != (ssize_t)sizeof(slots))
        rc = -1;
    close(fd); /* releases the lock */
    return rc;
}

int fake_state_lock(const char *path, bool exclusive)
{
    if (!path || !*path)
        return -1;
    return state_open_locked(path, exclusive ? LOCK_EX : LOCK_SH);
}

void fake_state_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* releases the lock */
}

size_t fake_state_live(int fd, struct fake_slot *out, size_t cap)
{
    struct fake_slot slots[FAKE_STATE_SLOTS];
    size_t n = 0;

    if (fd < 0)
        return 0;
    state_read(fd, slots);
    for (int k = 0; k < FAKE_STATE_SLOTS && n < cap; k++)
        if (slots[k].pid && alive(slots[k].pid))
            out[n++] = slots[k];
    return n;
}

/* The counters follow the slots. */
#define READS_AT ((off_t)(sizeof(struct fake_slot) * FAKE_STATE_SLOTS))

static uint64_t reads_of(int fd, int device)
{
    uint64_t v = 0;
    if (device < 0 || device >= FAKE_MAX_DEV ||
        pread(fd, &v, sizeof(v), READS_AT + device * (off_t)sizeof(v)) != (ssize_t)sizeof(v))
        return 0; /* a short file: none counted yet */
    return v;
}

void fake_state_count_read(int fd, int device)
{
    uint64_t v;
    if (fd < 0 || device < 0 || device >= FAKE_MAX_DEV)
        return;
    v = reads_of(fd, device) + 1;
    if (pwrite(fd, &v, sizeof(v), READS_AT + device * (off_t)sizeof(v)) != (ssize_t)sizeof(v))
        return; /* a waiter then waits for its bound */
}

uint64_t fake_state_reads(const char *path, int device)
{
    int fd = fake_state_lock(path, false);
    uint64_t v = fd < 0 ? 0 : reads_of(fd, device);
    fake_state_unlock(fd);
    return v;
}

size_t fake_state_get(const char *path, struct fake_slot *out, size_t cap)
{
    int fd = fake_state_lock(path, false);
    size_t n = fake_state_live(fd, out, cap);
    fake_state_unlock(fd);
    return n;
}

uint64_t fake_state_device_used(const char *path, int device)
{
    struct fake_slot slots[FAKE_STATE_SLOTS];
    size_t n = fake_state_get(path, slots, FAKE_STATE_SLOTS);
    uint64_t sum = 0;
    for (size_t k = 0; k < n; k++)
        if (slots[k].device == device)
            sum += slots[k].used + slots[k].ctx;
    return sum;
}
