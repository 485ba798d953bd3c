/* SPDX-License-Identifier: MIT */
/* workload.c - a test program that uses the GPU through gpumem's CUDA driver layer, on a
 * script of steps given as arguments, so that `gpumem watch` has something to follow:
 *
 *   gm_workload [--device N] STEP...
 *     alloc:MIB   allocate MIB MiB (cuMemAlloc_v2), untouched
 *     touch       write the newest allocation (cuMemsetD8_v2; costs host RAM with the fake)
 *     free        free the newest allocation
 *     freeall     free every allocation
 *     sleep:MS    sleep MS milliseconds
 *     info        print "free=N total=N" from cuMemGetInfo_v2
 *     pid         print "pid=N" (this process)
 *     fill        run the gpumem_fill_u32 kernel over the newest allocation from PTX and
 *                 check the result with cuMemcpyDtoH_v2 (prints "fill ok")
 *     exit:N      leave now with status N (without freeing)
 *     seen[:N]    wait until a watcher has seen every step before: the fake NVML has handed
 *                 out this device's process list N times (default 2) since this step began
 *                 (it counts them in the state file, GPUMEM_FAKE_STATE).  Each of them was
 *                 read after the steps before; with two, the watcher's second poll, its
 *                 process tree too, came whole after them (one is enough for a process the
 *                 watch started itself).  Nothing to wait for without a state file (a real
 *                 driver).
 *     await:PATH  wait until the file PATH exists and is not empty (a test says "go on")
 *
 * Both waits end after WAIT_MS at most, saying so on stderr: a test waits for what it needs
 * to have happened, never for a fixed time, and still ends when it never happens.
 *
 * The context is created before the first step and released at the end.  Exit status:
 * 0 ok, 2 no GPU, 1 any other failure. */
#include "gpumem/device.h"

#include "fake_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define WAIT_MS 60000
#define POLL_MS 50

/* p[i] = v for i < n, one thread per element.  Hand-written PTX at the oldest ISA/target
 * gpumem supports (driver-abi.md §2.2); the fake driver runs its CPU twin by name. */
static const char fill_ptx[] = ".version 7.0\n"
                               ".target sm_70\n"
                               ".address_size 64\n"
                               "\n"
                               ".visible .entry gpumem_fill_u32(\n"
                               "    .param .u64 param_p,\n"
                               "    .param .u32 param_v,\n"
                               "    .param .u64 param_n\n"
                               ")\n"
                               "{\n"
                               "    .reg .pred %p<2>;\n"
                               "    .reg .b32 %r<5>;\n"
                               "    .reg .b64 %rd<9>;\n"
                               "\n"
                               "    ld.param.u64 %rd1, [param_p];\n"
                               "    ld.param.u32 %r1, [param_v];\n"
                               "    ld.param.u64 %rd2, [param_n];\n"
                               "    mov.u32 %r2, %ctaid.x;\n"
                               "    mov.u32 %r3, %ntid.x;\n"
                               "    mov.u32 %r4, %tid.x;\n"
                               "    mul.wide.u32 %rd3, %r2, %r3;\n"
                               "    cvt.u64.u32 %rd4, %r4;\n"
                               "    add.s64 %rd5, %rd3, %rd4;\n"
                               "    setp.ge.u64 %p1, %rd5, %rd2;\n"
                               "    @%p1 bra DONE;\n"
                               "    cvta.to.global.u64 %rd6, %rd1;\n"
                               "    shl.b64 %rd7, %rd5, 2;\n"
                               "    add.s64 %rd8, %rd6, %rd7;\n"
                               "    st.global.u32 [%rd8], %r1;\n"
                               "DONE:\n"
                               "    ret;\n"
                               "}\n";

static struct gm_cuda *cu;

/* Leave with 'rc': the context handle is released, device memory is not freed. */
static int finish(int rc)
{
    fflush(stdout);
    gm_cuda_unload(cu);
    return rc;
}

static int fail(const struct gm_error *e)
{
    fprintf(stderr, "gm_workload: %s\n", e->msg);
    return finish(e->code == GM_ERR_NODEV ? 2 : 1);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The "seen:N" step on CUDA device 'device' (the fake's physical index: no
 * CUDA_VISIBLE_DEVICES in the tests). */
static void wait_seen(int device, uint64_t n)
{
    const char *state = getenv("GPUMEM_FAKE_STATE");
    long until = now_ms() + WAIT_MS;
    uint64_t from;
    if (!state || !*state)
        return;
    from = fake_state_reads(state, device);
    while (fake_state_reads(state, device) < from + n) {
        if (now_ms() > until) {
            fprintf(stderr, "gm_workload: no watcher read the process list within %d s\n",
                    WAIT_MS / 1000);
            return;
        }
        sleep_ms(POLL_MS);
    }
}

/* The "await:PATH" step. */
static void wait_file(const char *path)
{
    long until = now_ms() + WAIT_MS;
    struct stat st;
    while (stat(path, &st) != 0 || st.st_size == 0) {
        if (now_ms() > until) {
            fprintf(stderr, "gm_workload: '%s' did not appear within %d s\n", path, WAIT_MS / 1000);
            return;
        }
        sleep_ms(POLL_MS);
    }
}

int main(int argc, char **argv)
{
    struct gm_error e;
    uint64_t ptrs[256], sizes[256];
    int n = 0, device = 0, first = 1;

    if (argc > 2 && !strcmp(argv[1], "--device")) {
        device = (int)strtol(argv[2], NULL, 10);
        first = 3;
    }
    if (gm_cuda_load(&cu, getenv, &e) || gm_cuda_context_begin(cu, device, &e))
        return fail(&e);
    for (int i = first; i < argc; i++) {
        const char *s = argv[i];
        if (!strncmp(s, "alloc:", 6)) {
            uint64_t bytes = strtoull(s + 6, NULL, 10) << 20;
            if (n == 256)
                return finish(1);
            if (gm_cuda_mem_alloc(cu, bytes, &ptrs[n], &e))
                return fail(&e);
            sizes[n++] = bytes;
        } else if (!strcmp(s, "touch") && n > 0) {
            if (gm_cuda_memset_d8(cu, ptrs[n - 1], 0x5a, sizes[n - 1], &e))
                return fail(&e);
        } else if (!strcmp(s, "free") && n > 0) {
            if (gm_cuda_mem_free(cu, ptrs[--n], &e))
                return fail(&e);
        } else if (!strcmp(s, "freeall")) {
            while (n > 0)
                if (gm_cuda_mem_free(cu, ptrs[--n], &e))
                    return fail(&e);
        } else if (!strncmp(s, "sleep:", 6)) {
            sleep_ms(strtol(s + 6, NULL, 10));
        } else if (!strcmp(s, "info")) {
            uint64_t f, t;
            if (gm_cuda_mem_get_info(cu, &f, &t, &e))
                return fail(&e);
            printf("free=%llu total=%llu\n", (unsigned long long)f, (unsigned long long)t);
        } else if (!strcmp(s, "pid")) {
            printf("pid=%ld\n", (long)getpid());
        } else if (!strcmp(s, "fill") && n > 0) {
            struct gm_cuda_module *m;
            struct gm_cuda_function *f;
            uint32_t value = 0xC0FFEEu, probe[4];
            uint64_t count = sizes[n - 1] / 4;
            unsigned blocks = (unsigned)((count + 255) / 256);
            struct gm_cuda_launch_dims dims = {{blocks, 1, 1}, {256, 1, 1}, 0};
            void *params[3] = {&ptrs[n - 1], &value, &count};
            if (gm_cuda_module_load_ptx(cu, fill_ptx, &m, &e) ||
                gm_cuda_module_function(cu, m, "gpumem_fill_u32", &f, &e) ||
                gm_cuda_launch(cu, f, &dims, params, &e) || gm_cuda_synchronize(cu, &e) ||
                gm_cuda_memcpy_dtoh(cu, probe, ptrs[n - 1] + sizes[n - 1] - sizeof(probe),
                                    sizeof(probe), &e) ||
                gm_cuda_module_unload(cu, m, &e))
                return fail(&e);
            for (int k = 0; k < 4; k++)
                if (probe[k] != value) {
                    fprintf(stderr, "gm_workload: fill wrote %08x, expected %08x\n", probe[k],
                            value);
                    return finish(1);
                }
            printf("fill ok\n");
        } else if (!strcmp(s, "seen")) {
            wait_seen(device, 2);
        } else if (!strncmp(s, "seen:", 5)) {
            wait_seen(device, strtoull(s + 5, NULL, 10));
        } else if (!strncmp(s, "await:", 6)) {
            wait_file(s + 6);
        } else if (!strncmp(s, "exit:", 5)) {
            return finish((int)strtol(s + 5, NULL, 10));
        } else {
            fprintf(stderr, "gm_workload: bad step '%s'\n", s);
            return finish(64);
        }
        fflush(stdout);
    }
    while (n > 0)
        if (gm_cuda_mem_free(cu, ptrs[--n], &e))
            return fail(&e);
    if (gm_cuda_context_end(cu, &e))
        return fail(&e);
    return finish(0);
}
