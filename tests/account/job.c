/* SPDX-License-Identifier: MIT */
/* job.c - the test workload of gpumem account: a process that reaches the fake driver every
 * way a real job does, from several threads and two forked children, and says what it
 * allocated.
 *
 *   account_job MODE      MODE: exit (run to the end), term (wait for SIGTERM at the end
 *                          state), kill (wait for SIGKILL there)
 *
 * Paths to the driver: directly (libnccl.so.2 and this program are linked against
 * libcuda.so.1), through cuGetProcAddress (libcudart.so.12, which libc10_cuda.so's caching
 * allocator uses, and the VMM entry points it gets with cudaGetDriverEntryPoint), through a
 * dlopen'd handle (libcublas.so.12).  Also modules, a library, a graph, a heap limit (memory
 * no allocation call shows), pitched, managed, stream-ordered and pinned host memory.
 *
 * Output on stdout:
 *   result N          a checksum of data written to and read back from device memory: the
 *                     same with and without the interposer
 *   expect PID AT k=v ...  this process's own bookkeeping of what each term of the account
 *                     must be, AT peak and end (bytes): context, modules, graphs, torch, nccl,
 *                     cublas, other, rounding, not_seen, host, managed, and torch_vmm (of
 *                     torch: the expandable segment's pages, mapped through entry points
 *                     it got from cuGetProcAddress)
 *   codes A B C       the results of calls the driver refuses (a zero-byte cuMemAlloc_v2, a
 *                     cuMemFree_v2 of an address never allocated, a cuMemFreeHost of device
 *                     memory): the same with and without the interposer
 *   ready             (term, kill) the end state is reached; the process waits for a signal
 *
 * The fake's charges are read from the environment the test sets (bytes): GPUMEM_FAKE_
 * CONTEXT_BYTES, _MODULE_BYTES, _GRAPH_BYTES, _GRANULE.  ACCOUNT_JOB_HOLD_MS (default 300)
 * is how long the peak and the end state are held, so that samples see them. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
CUresult cuModuleLoadData(void **m, const void *image);
CUresult cuLibraryLoadData(void **lib, const void *code, int *jo, void **jv, unsigned nj, int *lo,
                           void **lv, unsigned nl);
CUresult cuGraphCreate(void **g, unsigned flags);
CUresult cuGraphInstantiateWithFlags(void **e, void *g, unsigned long long flags);
CUresult cuCtxSetLimit(int limit, size_t value);
CUresult cuMemAllocPitch_v2(unsigned long long *p, size_t *pitch, size_t w, size_t h, unsigned e);
CUresult cuMemAllocManaged(unsigned long long *p, size_t n, unsigned flags);
CUresult cuMemHostAlloc(void **pp, size_t n, unsigned flags);
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags);
CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n);
CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n);
CUresult cuMemAlloc_v2(unsigned long long *p, size_t n);
CUresult cuMemFree_v2(unsigned long long p);
CUresult cuMemFreeHost(void *p);

int cudart_init(int dev);
void *c10_raw_alloc(size_t n);
int c10_raw_free(void *p);
int c10_expand(int dev, size_t page, int pages, unsigned long long *va);
int c10_shrink(unsigned long long va, size_t page, int first, int count);
int nccl_comm_init(size_t dev_bytes, size_t vmm_bytes, size_t host_bytes);
int nccl_buffer(size_t n, unsigned long long *p);
int nccl_buffer_free(unsigned long long p);

#define MiB       ((size_t)1 << 20)
#define N_THREADS 4

static const char ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
                          ".visible .entry gpumem_account_noop()\n{\n\tret;\n}\n";

/* What this process expects each term to be. */
struct expect {
    uint64_t context, modules, graphs, torch, nccl, cublas, other, rounding, not_seen, host,
        managed, torch_vmm;
};

static uint64_t granule;
/* kept for the whole run (and reachable at exit, for LeakSanitizer) */
static void *module, *library, *graph, *exec, *host, *cublas;

static uint64_t env_bytes(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    return s && *s ? strtoull(s, NULL, 10) : dflt;
}

static uint64_t rounding(uint64_t n)
{
    return (n + granule - 1) / granule * granule - n;
}

static void say_expect(const char *at, const struct expect *e)
{
    printf("expect %ld %s context=%llu modules=%llu graphs=%llu torch=%llu nccl=%llu cublas=%llu "
           "other=%llu rounding=%llu not_seen=%llu host=%llu managed=%llu torch_vmm=%llu\n",
           (long)getpid(), at, (unsigned long long)e->context, (unsigned long long)e->modules,
           (unsigned long long)e->graphs, (unsigned long long)e->torch, (unsigned long long)e->nccl,
           (unsigned long long)e->cublas, (unsigned long long)e->other,
           (unsigned long long)e->rounding, (unsigned long long)e->not_seen,
           (unsigned long long)e->host, (unsigned long long)e->managed,
           (unsigned long long)e->torch_vmm);
    fflush(stdout);
}

static void hold(void)
{
    long ms = (long)env_bytes("ACCOUNT_JOB_HOLD_MS", 300);
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void die(const char *what)
{
    fprintf(stderr, "account_job: %s failed\n", what);
    exit(1);
}

/* A thread of the job: its own context current, a segment of the caching allocator (data
 * written and read back), a small one, an NCCL buffer. */
struct worker {
    int index;
    void *big, *small;
    unsigned long long buffer;
    uint64_t big_bytes, small_bytes, buffer_bytes;
    uint64_t checksum;
    int failed;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    unsigned char out[4096], in[4096];
    w->big_bytes = (10 + (uint64_t)w->index) * MiB;
    w->small_bytes = 2 * MiB + 512 * (uint64_t)w->index;
    w->buffer_bytes = MiB * (uint64_t)(w->index + 1);
    if (cudart_init(0) != 0 || !(w->big = c10_raw_alloc(w->big_bytes)) ||
        !(w->small = c10_raw_alloc(w->small_bytes)) || nccl_buffer(w->buffer_bytes, &w->buffer)) {
        w->failed = 1;
        return NULL;
    }
    for (size_t i = 0; i < sizeof(out); i++)
        out[i] = (unsigned char)(i * 7 + (size_t)w->index * 13);
    if (cuMemcpyHtoD_v2((unsigned long long)(uintptr_t)w->big, out, sizeof(out)) ||
        cuMemcpyDtoH_v2(in, (unsigned long long)(uintptr_t)w->big, sizeof(in))) {
        w->failed = 1;
        return NULL;
    }
    for (size_t i = 0; i < sizeof(in); i++)
        w->checksum += in[i] * (i + 1);
    return NULL;
}

/* The child forked before the parent touches the GPU: NCCL only. */
static int child_nccl(uint64_t context_bytes)
{
    struct expect e;
    memset(&e, 0, sizeof(e));
    if (cudart_init(0) != 0 || nccl_comm_init(8 * MiB + 4096, 0, 2 * MiB) != 0)
        die("child: nccl");
    e.context = context_bytes;
    e.nccl = 8 * MiB + 4096;
    e.rounding = rounding(8 * MiB + 4096);
    e.host = 2 * MiB;
    say_expect("peak", &e);
    say_expect("end", &e);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "exit";
    uint64_t context_bytes = env_bytes("GPUMEM_FAKE_CONTEXT_BYTES", 300 * MiB);
    uint64_t module_bytes = env_bytes("GPUMEM_FAKE_MODULE_BYTES", 0);
    uint64_t graph_bytes = env_bytes("GPUMEM_FAKE_GRAPH_BYTES", 0);
    struct worker w[N_THREADS];
    pthread_t tid[N_THREADS];
    struct expect e;
    static unsigned char registered[64 * 1024];
    unsigned long long pitched, managed, va, ws, scratch;
    size_t pitch;
    uint64_t checksum = 0, heap = 6 * MiB + 1, ws_bytes = 4 * MiB + 100, async_bytes = 3 * MiB;
    int (*cublas_create)(size_t, size_t, unsigned long long *, unsigned long long *);
    int (*cublas_free_scratch)(unsigned long long);
    pid_t first, worker_child;
    int status;

    granule = env_bytes("GPUMEM_FAKE_GRANULE", 2 * MiB);
    if (strcmp(mode, "exit") && strcmp(mode, "term") && strcmp(mode, "kill")) {
        fprintf(stderr, "usage: account_job exit|term|kill\n");
        return 64;
    }
    fflush(stdout);
    first = fork();
    if (first == 0)
        return child_nccl(context_bytes);
    if (first < 0)
        die("fork");

    memset(&e, 0, sizeof(e));
    if (cudart_init(0) != 0)
        die("cudart_init");
    e.context = context_bytes;
    if (cuModuleLoadData(&module, ptx) || cuLibraryLoadData(&library, ptx, 0, 0, 0, 0, 0, 0))
        die("modules");
    e.modules = 2 * module_bytes;
    if (cuGraphCreate(&graph, 0) || cuGraphInstantiateWithFlags(&exec, graph, 0))
        die("graph");
    e.graphs = graph_bytes;
    if (cuCtxSetLimit(2 /* CU_LIMIT_MALLOC_HEAP_SIZE */, heap))
        die("heap limit");
    e.not_seen = heap + rounding(heap);

    if (nccl_comm_init(16 * MiB + 1000, 8 * MiB, 1 * MiB))
        die("nccl");
    e.nccl = 16 * MiB + 1000 + 8 * MiB;
    e.rounding += rounding(16 * MiB + 1000);
    e.host = 1 * MiB;

    {
        void *lib = dlopen("libcublas.so.12", RTLD_NOW | RTLD_LOCAL);
        void *c = lib ? dlsym(lib, "cublas_create") : NULL;
        void *f = lib ? dlsym(lib, "cublas_free_scratch") : NULL;
        if (!c || !f)
            die("dlopen libcublas.so.12");
        memcpy(&cublas_create, &c, sizeof(c));
        memcpy(&cublas_free_scratch, &f, sizeof(f));
        cublas = lib;
    }
    if (cublas_create(ws_bytes, async_bytes, &ws, &scratch))
        die("cublas");
    e.cublas = ws_bytes + async_bytes;
    e.rounding += rounding(ws_bytes);

    memset(w, 0, sizeof(w));
    for (int i = 0; i < N_THREADS; i++) {
        w[i].index = i;
        if (pthread_create(&tid[i], NULL, work, &w[i]))
            die("pthread_create");
    }
    for (int i = 0; i < N_THREADS; i++) {
        pthread_join(tid[i], NULL);
        if (w[i].failed)
            die("worker");
        checksum += w[i].checksum;
        e.torch += w[i].big_bytes + w[i].small_bytes;
        e.rounding += rounding(w[i].big_bytes) + rounding(w[i].small_bytes);
        e.nccl += w[i].buffer_bytes;
        e.rounding += rounding(w[i].buffer_bytes);
    }
    if (c10_expand(0, granule, 8, &va))
        die("expandable segment");
    e.torch += 8 * granule;
    e.torch_vmm = 8 * granule;

    if (cuMemAllocPitch_v2(&pitched, &pitch, 1000, 100, 4))
        die("pitch");
    e.other = (uint64_t)pitch * 100;
    e.rounding += rounding((uint64_t)pitch * 100);
    if (cuMemAllocManaged(&managed, 16 * MiB, 1))
        die("managed");
    e.managed = 16 * MiB;
    if (cuMemHostAlloc(&host, MiB, 0) || cuMemHostRegister_v2(registered, sizeof(registered), 0))
        die("host");
    e.host += MiB + sizeof(registered);

    {
        unsigned long long p = 0;
        int a = cuMemAlloc_v2(&p, 0), b = cuMemFree_v2(0x10), c = cuMemFreeHost(w[2].small);
        printf("codes %d %d %d\n", a, b, c);
    }
    printf("result %llu\n", (unsigned long long)checksum);
    say_expect("peak", &e);
    hold();

    /* give some back: a segment, half the expandable pages, the scratch, a buffer */
    if (c10_raw_free(w[0].big) || c10_shrink(va, granule, 4, 4) || cublas_free_scratch(scratch) ||
        nccl_buffer_free(w[1].buffer))
        die("frees");
    e.torch -= w[0].big_bytes + 4 * granule;
    e.torch_vmm -= 4 * granule;
    e.rounding -= rounding(w[0].big_bytes) + rounding(w[1].buffer_bytes);
    e.cublas -= async_bytes;
    e.nccl -= w[1].buffer_bytes;
    say_expect("end", &e);
    (void)cublas;

    /* a worker forked after the GPU is in use, that never touches it (a DataLoader worker) */
    fflush(stdout);
    worker_child = fork();
    if (worker_child == 0) {
        volatile uint64_t sum = 0;
        for (uint64_t i = 0; i < 1000000; i++)
            sum += i;
        exit(sum == 499999500000ull ? 0 : 1);
    }
    if (worker_child < 0 || waitpid(worker_child, &status, 0) != worker_child ||
        !WIFEXITED(status) || WEXITSTATUS(status))
        die("worker child");
    if (waitpid(first, &status, 0) != first || !WIFEXITED(status) || WEXITSTATUS(status))
        die("first child");
    hold();
    if (strcmp(mode, "exit")) {
        printf("ready\n");
        fflush(stdout);
        for (;;)
            pause();
    }
    return 0;
}
