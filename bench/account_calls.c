/* SPDX-License-Identifier: MIT */
/* account_calls.c - time cuMemAlloc_v2 + cuMemFree_v2 pairs against the null driver, with or
 * without gpumem account's interposer preloaded (bench/account.sh runs it both ways).
 *
 *   account_calls direct|cudart PAIRS THREADS
 *
 * direct: the program calls the driver itself (the interposer's fast path: one return
 * address, cached); cudart: through libcudart.so.12 (the stack is walked past the runtime).
 * Each thread allocates 64 blocks, frees them, and again, PAIRS pairs in all; sizes vary so
 * the table sees distinct addresses.  Prints the nanoseconds of CPU time per call (an
 * allocation or a release) of the calling threads, the best of 5 rounds: CPU time, not wall
 * time, so that other processes sharing the machine do not count (the interposer's sampler
 * thread, which writes the events out, is not counted either). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cuMemAlloc_v2(unsigned long long *p, size_t n);
int cuMemFree_v2(unsigned long long p);
int cudaMalloc(void **p, size_t n);
int cudaFree(void *p);

static int via_runtime;
static long pairs_per_thread;

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *loop(void *arg)
{
    unsigned long long p[64];
    double *cpu = arg, t0 = cpu_now();
    for (long done = 0; done < pairs_per_thread; done += 64) {
        for (int i = 0; i < 64; i++) {
            size_t n = (size_t)(4096 + 256 * i);
            if (via_runtime) {
                void *q;
                cudaMalloc(&q, n);
                p[i] = (unsigned long long)(size_t)q;
            } else {
                cuMemAlloc_v2(&p[i], n);
            }
        }
        for (int i = 0; i < 64; i++) {
            if (via_runtime)
                cudaFree((void *)(size_t)p[i]);
            else
                cuMemFree_v2(p[i]);
        }
    }
    *cpu = cpu_now() - t0;
    return NULL;
}

int main(int argc, char **argv)
{
    long pairs;
    int threads;
    double best = 1e30;
    if (argc != 4 || (strcmp(argv[1], "direct") && strcmp(argv[1], "cudart"))) {
        fprintf(stderr, "usage: account_calls direct|cudart PAIRS THREADS\n");
        return 64;
    }
    via_runtime = !strcmp(argv[1], "cudart");
    pairs = atol(argv[2]);
    threads = atoi(argv[3]);
    if (pairs < 64 || threads < 1 || threads > 64)
        return 64;
    pairs_per_thread = pairs / threads;
    for (int round = 0; round < 5; round++) {
        pthread_t t[64];
        double cpu[64], sum = 0;
        for (int i = 0; i < threads; i++)
            pthread_create(&t[i], NULL, loop, &cpu[i]);
        for (int i = 0; i < threads; i++) {
            pthread_join(t[i], NULL);
            sum += cpu[i];
        }
        if (sum < best)
            best = sum;
    }
    /* CPU seconds of all threads per call */
    printf("%.1f\n", best * 1e9 / (2.0 * (double)pairs_per_thread * threads));
    return 0;
}
