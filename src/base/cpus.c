/* SPDX-License-Identifier: MIT */
/* cpus.c - how many CPUs there are and how many this process may use (gpumem/device.h). */
#if defined(__linux__)
#define _GNU_SOURCE 1 /* sched_getaffinity(), CPU_ALLOC() */
#endif
#include "gpumem/device.h"

#include <errno.h>
#include <unistd.h>

#if defined(__linux__)
#include <sched.h>
#endif

unsigned gm_cpus_online(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 0;
}

unsigned gm_cpus_usable(void)
{
#if defined(__linux__) && defined(CPU_ALLOC)
    /* the affinity mask (taskset, cgroup cpusets), sized for the CPUs the kernel may
     * number: a fixed cpu_set_t holds 1024 and the call fails with EINVAL past them */
    int max = 1024;
    for (int tries = 0; tries < 8; tries++, max *= 2) {
        cpu_set_t *set = CPU_ALLOC((size_t)max);
        size_t size = CPU_ALLOC_SIZE((size_t)max);
        int r, count;
        if (!set)
            break;
        r = sched_getaffinity(0, size, set);
        count = r == 0 ? CPU_COUNT_S(size, set) : 0;
        CPU_FREE(set);
        if (r == 0 && count > 0)
            return (unsigned)count;
        if (r != 0 && errno != EINVAL)
            break;
    }
#endif
    /* elsewhere, or the mask cannot be read: the machine's online CPUs */
    return gm_cpus_online();
}
