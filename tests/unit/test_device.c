/* SPDX-License-Identifier: MIT */
/* test_device.c - the device layer against the fake drivers (tests/fake/): CUDA driver
 * calls, no-GPU states, the joined device list, NVML memory v1/v2, process lists through
 * the shared state file, the watch record, and small helpers.
 * ctest sets GPUMEM_CUDA_LIBRARY / GPUMEM_NVML_LIBRARY to the fakes. */
/* cmocka.h needs these first */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "device/device_int.h"
#include "gpumem/arena.h"
#include "gpumem/device.h"
#include "gpumem/internal/alloc_hooks.h"
#include "gpumem/watch.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB (1024ull * 1024ull)

static char state_path[256];

/* Every test starts from the fakes' defaults and a fresh state file. */
static int setup(void **state)
{
    static const char *const vars[] = {"GPUMEM_FAKE_DEVICES",
                                       "GPUMEM_FAKE_NAME",
                                       "GPUMEM_FAKE_MEMORY",
                                       "GPUMEM_FAKE_RESERVED",
                                       "GPUMEM_FAKE_CUINIT_ERROR",
                                       "GPUMEM_FAKE_NVML_INIT_ERROR",
                                       "GPUMEM_FAKE_NVML_MEMORY_ERROR",
                                       "GPUMEM_FAKE_NO_MEMORY_V2",
                                       "GPUMEM_FAKE_OOM_AFTER",
                                       "GPUMEM_FAKE_PID_OFFSET",
                                       "GPUMEM_FAKE_PTX_ISA",
                                       "CUDA_VISIBLE_DEVICES",
                                       "GPUMEM_FAKE_PROC_MEMORY_NA",
                                       "GPUMEM_FAKE_BASE_USED",
                                       "GPUMEM_FAKE_GRAPHICS_PID",
                                       "GPUMEM_FAKE_GRAPHICS_BYTES",
                                       "GPUMEM_FAKE_AMD_DEVICES",
                                       "GPUMEM_FAKE_AMD_NAME",
                                       "GPUMEM_FAKE_AMD_MEMORY",
                                       "GPUMEM_FAKE_AMD_USED",
                                       "GPUMEM_FAKE_AMD_PROCESSES",
                                       "GPUMEM_FAKE_AMD_VERSION",
                                       "GPUMEM_FAKE_AMD_INIT_ERROR",
                                       NULL};
    (void)state;
    for (int k = 0; vars[k]; k++)
        unsetenv(vars[k]);
    snprintf(state_path, sizeof(state_path), "/tmp/gm-test-device-%d.state", (int)getpid());
    unlink(state_path);
    setenv("GPUMEM_FAKE_STATE", state_path, 1);
    setenv("GPUMEM_AMDSMI_LIBRARY", "/nonexistent/libamd_smi.so", 1); /* AMD SMI only when asked */
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    unlink(state_path);
    return 0;
}

static void test_parse_spec(void **state)
{
    int i = -1;
    struct gm_error e;
    (void)state;
    assert_int_equal(gm_device_parse_spec("cuda:3", &i, &e), GM_OK);
    assert_int_equal(i, 3);
    assert_int_equal(gm_device_parse_spec("0", &i, &e), GM_OK);
    assert_int_equal(i, 0);
    assert_int_equal(gm_device_parse_spec("gpu:1", &i, &e), GM_ERR_INVALID);
    assert_int_equal(gm_device_parse_spec("cuda:", &i, &e), GM_ERR_INVALID);
    assert_int_equal(gm_device_parse_spec("cuda:1x", &i, &e), GM_ERR_INVALID);
    assert_int_equal(gm_device_parse_spec("cuda:-1", &i, &e), GM_ERR_INVALID);
}

static void test_pci_normalise(void **state)
{
    char b[32];
    (void)state;
    assert_true(gm_pci_normalise("0000:17:00.0", b, sizeof b));
    assert_string_equal(b, "00000000:17:00.0");
    assert_true(gm_pci_normalise("00000000:3b:00.1", b, sizeof b));
    assert_string_equal(b, "00000000:3B:00.1");
    assert_false(gm_pci_normalise("17:00.0", b, sizeof b));
    assert_false(gm_pci_normalise("0000:17:00.0x", b, sizeof b));
}

static void test_cuda_basics(void **state)
{
    struct gm_cuda *cu;
    struct gm_error e;
    struct gm_device_info info;
    uint64_t f0, t0, f1, t1, p, q;
    int v = 0, n = 0;
    (void)state;

    setenv("GPUMEM_FAKE_MEMORY", "16GiB", 1);
    setenv("GPUMEM_FAKE_RESERVED", "256MiB", 1);
    assert_int_equal(gm_cuda_load(&cu, getenv, &e), GM_OK);
    assert_int_equal(gm_cuda_driver_version(cu, &v, &e), GM_OK);
    assert_int_equal(v, 12040);
    assert_int_equal(gm_cuda_device_count(cu, &n, &e), GM_OK);
    assert_int_equal(n, 1);
    assert_int_equal(gm_cuda_device_info(cu, 0, &info, &e), GM_OK);
    assert_string_equal(info.name, "NVIDIA Fake A100-SXM4-80GB");
    assert_string_equal(info.uuid, "GPU-fa4e0000-6d65-6d00-8000-000000000010");
    assert_string_equal(info.pci_bus_id, "00000000:17:00.0");
    assert_true(info.cc_valid);
    assert_int_equal(info.cc_major, 8);
    assert_true(info.cuda_total.valid);
    assert_int_equal(info.cuda_total.value, 16 * 1024 * MIB - 256 * MIB);
    assert_int_equal(info.cuda_index, 0);
    assert_int_equal(info.nvml_index, -1);

    /* Memory calls need a context; the context itself costs 300 MiB. */
    assert_int_equal(gm_cuda_mem_get_info(cu, &f0, &t0, &e), GM_ERR_INVALID);
    assert_int_equal(gm_cuda_context_begin(cu, 5, &e), GM_ERR_NODEV);
    assert_non_null(strstr(e.msg, "cuda:5 is out of range: 1 CUDA device visible"));
    assert_int_equal(gm_cuda_context_begin(cu, 0, &e), GM_OK);
    assert_int_equal(gm_cuda_mem_get_info(cu, &f0, &t0, &e), GM_OK);
    assert_int_equal(t0, 16 * 1024 * MIB - 256 * MIB);
    assert_int_equal(f0, t0 - 300 * MIB);

    /* 5 GiB + 1 byte: above 4 GiB (a 32-bit binding would truncate) and charged in
     * 2 MiB granules. */
    assert_int_equal(gm_cuda_mem_alloc(cu, 5 * 1024 * MIB + 1, &p, &e), GM_OK);
    assert_int_equal(gm_cuda_mem_get_info(cu, &f1, &t1, &e), GM_OK);
    assert_int_equal(f0 - f1, 5 * 1024 * MIB + 2 * MIB);

    /* Past the capacity: GM_ERR_LIMIT with CUresult 2. */
    assert_int_equal(gm_cuda_mem_alloc(cu, 11ull * 1024 * MIB, &q, &e), GM_ERR_LIMIT);
    assert_int_equal(gm_cuda_last_result(cu), GM_CU_ERROR_OUT_OF_MEMORY);
    assert_non_null(strstr(e.msg, "CUDA_ERROR_OUT_OF_MEMORY"));

    {
        unsigned char in[64], out[64];
        for (int k = 0; k < 64; k++)
            in[k] = (unsigned char)(k * 7);
        assert_int_equal(gm_cuda_memcpy_htod(cu, p + 4096, in, sizeof in, &e), GM_OK);
        assert_int_equal(gm_cuda_memcpy_dtoh(cu, out, p + 4096, sizeof out, &e), GM_OK);
        assert_memory_equal(in, out, sizeof in);
        assert_int_equal(gm_cuda_memset_d8(cu, p, 0x11, 16, &e), GM_OK);
        assert_int_equal(gm_cuda_memcpy_dtoh(cu, out, p, 16, &e), GM_OK);
        assert_int_equal(out[15], 0x11);
        /* 32-bit fill (the bits of 1.0f) and a device-to-device copy. */
        assert_int_equal(gm_cuda_memset_d32(cu, p + 8192, 0x3f800000u, 4, &e), GM_OK);
        assert_int_equal(gm_cuda_memcpy_dtod(cu, p + 16384, p + 8192, 16, &e), GM_OK);
        assert_int_equal(gm_cuda_memcpy_dtoh(cu, out, p + 16384, 16, &e), GM_OK);
        {
            uint32_t w[4];
            memcpy(w, out, sizeof w);
            assert_int_equal(w[0], 0x3f800000u);
            assert_int_equal(w[3], 0x3f800000u);
        }
        assert_int_equal(gm_cuda_memset_d32(cu, p + 2, 0, 1, &e), GM_ERR_DRIVER); /* unaligned */
    }
    assert_int_equal(gm_cuda_mem_free(cu, p, &e), GM_OK);
    assert_int_equal(gm_cuda_mem_free(cu, p, &e), GM_ERR_DRIVER); /* double free */
    assert_int_equal(gm_cuda_mem_get_info(cu, &f1, &t1, &e), GM_OK);
    assert_int_equal(f1, f0);
    assert_int_equal(gm_cuda_context_end(cu, &e), GM_OK);
    gm_cuda_unload(cu);
}

static void test_cuda_oom_after(void **state)
{
    struct gm_cuda *cu;
    struct gm_error e;
    uint64_t p[3];
    (void)state;
    setenv("GPUMEM_FAKE_OOM_AFTER", "2", 1);
    assert_int_equal(gm_cuda_load(&cu, getenv, &e), GM_OK);
    assert_int_equal(gm_cuda_context_begin(cu, 0, &e), GM_OK);
    assert_int_equal(gm_cuda_mem_alloc(cu, MIB, &p[0], &e), GM_OK);
    assert_int_equal(gm_cuda_mem_alloc(cu, MIB, &p[1], &e), GM_OK);
    assert_int_equal(gm_cuda_mem_alloc(cu, MIB, &p[2], &e), GM_ERR_LIMIT);
    assert_int_equal(gm_cuda_mem_free(cu, p[0], &e), GM_OK);
    assert_int_equal(gm_cuda_mem_free(cu, p[1], &e), GM_OK);
    gm_cuda_unload(cu); /* releases the context too */
}

static const char fill_ptx[] = ".version 7.0\n.target sm_70\n.address_size 64\n"
                               ".visible .entry gpumem_fill_u32(.param .u64 p, .param .u32 v, "
                               ".param .u64 n)\n{\n ret;\n}\n"
                               ".visible .entry other_kernel()\n{\n ret;\n}\n";

static void test_cuda_module(void **state)
{
    struct gm_cuda *cu;
    struct gm_error e;
    struct gm_cuda_module *m;
    struct gm_cuda_function *f;
    uint64_t p, n = 1000;
    uint32_t value = 0xdeadbeefu, out[1000];
    struct gm_cuda_launch_dims dims = {{4, 1, 1}, {256, 1, 1}, 0};
    void *params[3] = {&p, &value, &n};
    (void)state;

    assert_int_equal(gm_cuda_load(&cu, getenv, &e), GM_OK);
    assert_int_equal(gm_cuda_context_begin(cu, 0, &e), GM_OK);
    assert_int_equal(gm_cuda_mem_alloc(cu, sizeof out, &p, &e), GM_OK);
    assert_int_equal(gm_cuda_module_load_ptx(cu, fill_ptx, &m, &e), GM_OK);
    assert_int_equal(gm_cuda_module_function(cu, m, "missing", &f, &e), GM_ERR_DRIVER);
    assert_non_null(strstr(e.msg, "kernel 'missing'"));
    assert_int_equal(gm_cuda_module_function(cu, m, "gpumem_fill_u32", &f, &e), GM_OK);
    assert_int_equal(gm_cuda_launch(cu, f, &dims, params, &e), GM_OK);
    assert_int_equal(gm_cuda_synchronize(cu, &e), GM_OK);
    assert_int_equal(gm_cuda_memcpy_dtoh(cu, out, p, sizeof out, &e), GM_OK);
    assert_int_equal(out[0], value);
    assert_int_equal(out[999], value);
    assert_int_equal(gm_cuda_module_function(cu, m, "other_kernel", &f, &e), GM_OK);
    assert_int_equal(gm_cuda_module_unload(cu, m, &e), GM_OK);
    assert_int_equal(gm_cuda_mem_free(cu, p, &e), GM_OK);

    /* A PTX ISA newer than the driver's: 222 with the JIT log in the message. */
    setenv("GPUMEM_FAKE_PTX_ISA", "6.4", 1);
    gm_cuda_unload(cu);
    assert_int_equal(gm_cuda_load(&cu, getenv, &e), GM_OK);
    assert_int_equal(gm_cuda_context_begin(cu, 0, &e), GM_OK);
    assert_int_equal(gm_cuda_module_load_ptx(cu, fill_ptx, &m, &e), GM_ERR_DRIVER);
    assert_int_equal(gm_cuda_last_result(cu), GM_CU_ERROR_UNSUPPORTED_PTX_VERSION);
    assert_non_null(strstr(e.msg, "Unsupported .version 7.0"));
    assert_int_equal(gm_cuda_module_load_ptx(cu, "garbage", &m, &e), GM_ERR_DRIVER);
    assert_int_equal(gm_cuda_last_result(cu), GM_CU_ERROR_INVALID_PTX);
    gm_cuda_unload(cu);
}

static void test_cuda_no_gpu(void **state)
{
    struct gm_cuda *cu;
    struct gm_error e;
    const char *lib = getenv("GPUMEM_CUDA_LIBRARY");
    char saved[1024];
    (void)state;

    setenv("GPUMEM_FAKE_CUINIT_ERROR", "34", 1);
    assert_int_equal(gm_cuda_load(&cu, getenv, &e), GM_ERR_NODEV);
    assert_null(cu);
    assert_non_null(strstr(e.msg, "only the CUDA stub library"));
    setenv("GPUMEM_FAKE_CUINIT_ERROR", "999", 1);
    assert_int_equal(gm_cuda_load(&cu, getenv, &e), GM_ERR_NODEV);
    assert_non_null(strstr(e.msg, "999"));
    setenv("GPUMEM_FAKE_CUINIT_ERROR", "3", 1);
    assert_int_equal(gm_cuda_load(&cu, getenv, &e), GM_ERR_DRIVER);
    unsetenv("GPUMEM_FAKE_CUINIT_ERROR");
    setenv("GPUMEM_FAKE_DEVICES", "0", 1);
    assert_int_equal(gm_cuda_load(&cu, getenv, &e), GM_ERR_NODEV);
    assert_non_null(strstr(e.msg, "no CUDA device"));
    unsetenv("GPUMEM_FAKE_DEVICES");
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    assert_int_equal(gm_cuda_load(&cu, getenv, &e), GM_ERR_NODEV);
    unsetenv("CUDA_VISIBLE_DEVICES");

    assert_non_null(lib);
    snprintf(saved, sizeof saved, "%s", lib);
    setenv("GPUMEM_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    assert_int_equal(gm_cuda_load(&cu, getenv, &e), GM_ERR_NODEV);
    assert_non_null(strstr(e.msg, "no NVIDIA driver"));
    setenv("GPUMEM_CUDA_LIBRARY", saved, 1);
}

/* The library reads the environment only through the caller's lookup: a lookup that hides
 * the fake libraries' paths makes both backends missing although the process environment
 * names them, gm_devices_check() quotes CUDA_VISIBLE_DEVICES only as the lookup gives it,
 * and NULL is an empty environment. */
static char *hiding_env(const char *name)
{
    static char missing[] = "/nonexistent/libgpumem-test-driver.so";
    if (!strcmp(name, "GPUMEM_NVML_LIBRARY") || !strcmp(name, "GPUMEM_CUDA_LIBRARY"))
        return missing;
    return getenv(name);
}

static char *no_visible_devices_env(const char *name)
{
    if (!strcmp(name, "CUDA_VISIBLE_DEVICES"))
        return NULL;
    return getenv(name);
}

static void test_devices_env_is_the_callers(void **state)
{
    struct gm_devices *d;
    struct gm_error e;
    (void)state;

    assert_non_null(getenv("GPUMEM_NVML_LIBRARY"));
    assert_int_equal(gm_devices_open(&d, hiding_env, &e), GM_OK);
    assert_int_equal(gm_devices_backend(d, 0)->state, GM_BACKEND_MISSING);
    assert_int_equal(gm_devices_backend(d, 1)->state, GM_BACKEND_MISSING);
    assert_string_equal(gm_devices_backend(d, 0)->library, "/nonexistent/libgpumem-test-driver.so");
    assert_int_equal(gm_devices_count(d), 0);
    gm_devices_close(d);

    /* The fake CUDA reads CUDA_VISIBLE_DEVICES from the process (as libcuda does) and sees
     * no device; the reason names the variable only when the caller's lookup gives it. */
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    assert_int_equal(gm_devices_check(d, &e), GM_ERR_NODEV);
    assert_non_null(strstr(e.msg, "CUDA_VISIBLE_DEVICES"));
    gm_devices_close(d);
    assert_int_equal(gm_devices_open(&d, no_visible_devices_env, &e), GM_OK);
    assert_int_equal(gm_devices_check(d, &e), GM_ERR_NODEV);
    assert_null(strstr(e.msg, "CUDA_VISIBLE_DEVICES"));
    gm_devices_close(d);
    unsetenv("CUDA_VISIBLE_DEVICES");

    assert_int_equal(gm_devices_open(&d, NULL, &e), GM_OK);
    assert_string_equal(gm_devices_backend(d, 0)->library, "libnvidia-ml.so.1");
    gm_devices_close(d);
}

static void test_devices_join(void **state)
{
    struct gm_devices *d;
    struct gm_error e;
    struct gm_device_memory m;
    size_t pos;
    (void)state;

    setenv("GPUMEM_FAKE_DEVICES", "3", 1);
    setenv("GPUMEM_FAKE_NAME", "Card A,Card B,Card C", 1);
    setenv("GPUMEM_FAKE_MEMORY", "24GiB,48GiB,80GiB", 1);
    setenv("CUDA_VISIBLE_DEVICES", "2,0", 1);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    assert_int_equal(gm_devices_check(d, &e), GM_OK);
    assert_int_equal(gm_devices_count(d), 3);
    /* CUDA order first (cuda:0 is physical 2), then the device CUDA does not see. */
    assert_string_equal(gm_devices_info(d, 0)->name, "Card C");
    assert_int_equal(gm_devices_info(d, 0)->cuda_index, 0);
    assert_int_equal(gm_devices_info(d, 0)->nvml_index, 2);
    assert_int_equal(gm_devices_info(d, 1)->cuda_index, 1);
    assert_int_equal(gm_devices_info(d, 1)->nvml_index, 0);
    assert_int_equal(gm_devices_info(d, 2)->cuda_index, -1);
    assert_int_equal(gm_devices_info(d, 2)->nvml_index, 1);
    assert_int_equal(gm_devices_find_cuda(d, 1, &pos, &e), GM_OK);
    assert_int_equal(pos, 1);
    assert_int_equal(gm_devices_find_cuda(d, 2, &pos, &e), GM_ERR_NODEV);
    assert_non_null(strstr(e.msg, "cuda:2 is out of range: 2 CUDA devices visible"));

    assert_int_equal(gm_devices_memory(d, 0, &m, &e), GM_OK);
    assert_int_equal(m.source, GM_MEMORY_NVML_V2);
    assert_int_equal(m.total.value, 80 * 1024 * MIB);
    assert_int_equal(m.reserved.value, 512 * MIB);
    assert_int_equal(m.used.value, 0);
    assert_int_equal(m.free.value, 80 * 1024 * MIB - 512 * MIB);
    assert_true(gm_devices_versions(d)->cuda_driver_api_valid);
    assert_string_equal(gm_devices_versions(d)->driver, "550.54.15");
    gm_devices_close(d);
}

static void test_devices_memory_fallbacks(void **state)
{
    struct gm_devices *d;
    struct gm_error e;
    struct gm_device_memory m;
    (void)state;

    setenv("GPUMEM_FAKE_NO_MEMORY_V2", "1", 1);
    setenv("GPUMEM_FAKE_BASE_USED", "1GiB", 1);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    assert_int_equal(gm_devices_memory(d, 0, &m, &e), GM_OK);
    assert_int_equal(m.source, GM_MEMORY_NVML_V1);
    assert_false(m.reserved.valid);             /* v1 cannot tell: unknown, not 0 */
    assert_int_equal(m.used.value, 1536 * MIB); /* v1 used includes reserved */
    gm_devices_close(d);
    unsetenv("GPUMEM_FAKE_BASE_USED");

    setenv("GPUMEM_FAKE_NVML_MEMORY_ERROR", "3", 1);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    assert_int_equal(gm_devices_memory(d, 0, &m, &e), GM_ERR_UNSUPPORTED);
    assert_false(m.used.valid);
    assert_false(m.total.valid);
    gm_devices_close(d);
}

static void test_devices_no_gpu(void **state)
{
    struct gm_devices *d;
    struct gm_error e;
    (void)state;

    setenv("GPUMEM_FAKE_CUINIT_ERROR", "34", 1);
    setenv("GPUMEM_FAKE_NVML_INIT_ERROR", "9", 1);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    assert_int_equal(gm_devices_check(d, &e), GM_ERR_NODEV);
    assert_non_null(strstr(e.msg, "stub library"));
    assert_int_equal(gm_devices_backend(d, 0)->state, GM_BACKEND_NODEV);
    assert_int_equal(gm_devices_backend(d, 0)->driver_code, 9);
    assert_int_equal(gm_devices_backend(d, 1)->state, GM_BACKEND_STUB);
    assert_int_equal(gm_devices_backend(d, 1)->driver_code, 34);
    gm_devices_close(d);

    unsetenv("GPUMEM_FAKE_CUINIT_ERROR");
    setenv("GPUMEM_FAKE_NVML_INIT_ERROR", "999", 1);
    setenv("GPUMEM_FAKE_DEVICES", "0", 1);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    assert_int_equal(gm_devices_check(d, &e), GM_ERR_NODEV);
    assert_non_null(strstr(e.msg, "no CUDA device"));
    assert_int_equal(gm_devices_count(d), 0);
    gm_devices_close(d);
}

/* Our own allocations through the fake CUDA show up in the fake NVML's process list. */
static void test_devices_processes(void **state)
{
    struct gm_cuda *cu;
    struct gm_devices *d;
    struct gm_error e;
    struct gm_process_memory procs[8];
    struct gm_device_memory m;
    uint64_t p;
    size_t n = 99;
    (void)state;

    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    assert_int_equal(gm_devices_processes(d, 0, procs, 8, &n, &e), GM_OK);
    assert_int_equal(n, 0);
    assert_int_equal(gm_cuda_load(&cu, getenv, &e), GM_OK);
    assert_int_equal(gm_cuda_context_begin(cu, 0, &e), GM_OK);
    assert_int_equal(gm_cuda_mem_alloc(cu, 100 * MIB + 5, &p, &e), GM_OK);
    assert_int_equal(gm_devices_processes(d, 0, procs, 8, &n, &e), GM_OK);
    assert_int_equal(n, 1);
    assert_int_equal(procs[0].pid, (uint32_t)getpid());
    assert_true(procs[0].used.valid);
    assert_int_equal(procs[0].used.value, 102 * MIB + 300 * MIB);
    assert_int_equal(procs[0].kinds, GM_PROCESS_COMPUTE);
    assert_int_equal(gm_devices_memory(d, 0, &m, &e), GM_OK);
    assert_int_equal(m.used.value, 402 * MIB);
    /* cap smaller than the count: *n says how many there are. */
    assert_int_equal(gm_devices_processes(d, 0, procs, 0, &n, &e), GM_OK);
    assert_int_equal(n, 1);
    /* NVML_VALUE_NOT_AVAILABLE (WDDM, MIG): the process is listed, its usage unknown. */
    setenv("GPUMEM_FAKE_PROC_MEMORY_NA", "1", 1);
    gm_devices_close(d);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    assert_int_equal(gm_devices_processes(d, 0, procs, 8, &n, &e), GM_OK);
    assert_int_equal(n, 1);
    assert_false(procs[0].used.valid);
    unsetenv("GPUMEM_FAKE_PROC_MEMORY_NA");
    assert_int_equal(gm_cuda_mem_free(cu, p, &e), GM_OK);
    assert_int_equal(gm_cuda_context_end(cu, &e), GM_OK);
    assert_int_equal(gm_devices_processes(d, 0, procs, 8, &n, &e), GM_OK);
    assert_int_equal(n, 0);
    gm_cuda_unload(cu);
    gm_devices_close(d);
}

/* A display server's graphics context is listed too, and one process in both lists
 * ("C+G") is one entry. */
static void test_devices_graphics(void **state)
{
    struct gm_devices *d;
    struct gm_error e;
    struct gm_process_memory procs[8];
    struct gm_device_memory m;
    size_t n = 0;
    char pid[32];
    (void)state;

    setenv("GPUMEM_FAKE_GRAPHICS_PID", "1", 1);
    setenv("GPUMEM_FAKE_GRAPHICS_BYTES", "256MiB", 1);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    assert_int_equal(gm_devices_processes(d, 0, procs, 8, &n, &e), GM_OK);
    assert_int_equal(n, 1);
    assert_int_equal(procs[0].pid, 1);
    assert_int_equal(procs[0].kinds, GM_PROCESS_GRAPHICS);
    assert_int_equal(procs[0].used.value, 256 * MIB);
    assert_int_equal(gm_devices_memory(d, 0, &m, &e), GM_OK);
    assert_int_equal(m.used.value, 256 * MIB);
    gm_devices_close(d);

    /* Our own process in both lists. */
    {
        struct gm_cuda *cu;
        snprintf(pid, sizeof pid, "%d", (int)getpid());
        setenv("GPUMEM_FAKE_GRAPHICS_PID", pid, 1);
        assert_int_equal(gm_cuda_load(&cu, getenv, &e), GM_OK);
        assert_int_equal(gm_cuda_context_begin(cu, 0, &e), GM_OK);
        assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
        assert_int_equal(gm_devices_processes(d, 0, procs, 8, &n, &e), GM_OK);
        assert_int_equal(n, 1);
        assert_int_equal(procs[0].kinds, GM_PROCESS_COMPUTE | GM_PROCESS_GRAPHICS);
        gm_devices_close(d);
        gm_cuda_unload(cu);
    }
    unsetenv("GPUMEM_FAKE_GRAPHICS_PID");
    unsetenv("GPUMEM_FAKE_GRAPHICS_BYTES");
}

static void test_proc_tree(void **state)
{
    uint32_t tree[64];
    size_t n;
    pid_t child;
    (void)state;

    child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    n = gm_proc_tree((uint32_t)getpid(), tree, 64);
    assert_true(n >= 2);
    assert_int_equal(tree[0], (uint32_t)getpid());
    {
        bool found = false;
        for (size_t k = 0; k < n && k < 64; k++)
            found = found || tree[k] == (uint32_t)child;
        assert_true(found);
    }
    assert_true(gm_proc_exists((uint32_t)child));
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    assert_false(gm_proc_exists((uint32_t)child));
    assert_int_equal(gm_proc_tree((uint32_t)child, tree, 64), 0);
}

static void test_watch_record(void **state)
{
    struct gm_watch w;
    struct gm_error e;
    struct gm_device_memory m = {{100, true}, {50, true}, {10, true}, {5, true}, GM_MEMORY_NVML_V2};
    struct gm_process_memory p[3] = {{11, {300, true}, GM_PROCESS_COMPUTE},
                                     {12, {0, false}, GM_PROCESS_COMPUTE},
                                     {13, {700, true}, GM_PROCESS_COMPUTE}};
    enum gm_watch_attr a[3] = {GM_WATCH_ATTR_PID_TREE, GM_WATCH_ATTR_PID_TREE, GM_WATCH_ATTR_NONE};
    char *buf = NULL;
    size_t len = 0;
    FILE *f;
    (void)state;

    gm_watch_init(&w, 6);
    assert_int_equal(gm_watch_add_device(&w, "cuda:0", "X", m.total, m.used), 0);
    assert_int_equal(gm_watch_add_device(&w, "cuda:1", "Y", m.total, m.used), 1);
    assert_int_equal(gm_watch_device_sample(&w, 0, 0, &m, &e), GM_OK);
    m.used.value = 40;
    assert_int_equal(gm_watch_device_sample(&w, 100, 0, &m, &e), GM_OK);
    m.used.value = 20;
    assert_int_equal(gm_watch_device_sample(&w, 200, 0, &m, &e), GM_OK);
    assert_int_equal(w.dev[0].peak.value, 40);
    assert_int_equal(w.dev[0].peak_t_ms, 100);
    /* Two devices read at the same time add up for the command's peak. */
    assert_int_equal(gm_watch_process_sample(&w, 500, 0, p, a, NULL, 3, &e), GM_OK);
    assert_int_equal(gm_watch_process_sample(&w, 500, 1, p, a, NULL, 1, &e), GM_OK);
    assert_int_equal(w.cmd_peak, 600);
    assert_int_equal(w.cmd_peak_t_ms, 500);
    assert_int_equal(w.dev[0].cmd_peak.value, 300);
    assert_int_equal(w.n_proc, 3); /* pid 11 and 12 on cuda:0, pid 11 on cuda:1; 13 not ours */
    assert_int_equal(w.n_samples, 6);
    assert_false(w.samples_dropped);
    assert_int_equal(gm_watch_process_sample(&w, 600, 1, p, a, NULL, 1, &e), GM_OK);
    assert_true(w.samples_dropped); /* the store holds 6; peaks still count */

    f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_true(gm_watch_write_csv(&w, f));
    fclose(f);
    assert_string_equal(buf, "time_ms,device,pid,used_bytes,free_bytes,attribution\n"
                             "0,cuda:0,,10,50,device\n"
                             "100,cuda:0,,40,50,device\n"
                             "200,cuda:0,,20,50,device\n"
                             "500,cuda:0,11,300,,pid_tree\n"
                             "500,cuda:0,12,,,pid_tree\n"
                             "500,cuda:1,11,300,,pid_tree\n"
                             "600,,,,,samples_dropped\n");
    assert_int_equal(w.n_samples_dropped, 1);
    assert_int_equal(w.first_dropped_t_ms, 600);
    free(buf);
    gm_watch_release(&w);
}

static void device_at(struct gm_watch *w, uint64_t t, uint64_t used_mib)
{
    struct gm_device_memory m = {
        {80000 * MIB, true}, {0, false}, {used_mib * MIB, true}, {0, false}, GM_MEMORY_NVML_V2};
    struct gm_error e;
    assert_int_equal(gm_watch_device_sample(w, t, 0, &m, &e), GM_OK);
}

/* Device readings are credited to the command while no other process uses the device:
 * a 6 GiB plateau between two process readings is the peak, confirmed
 * only by the next process reading; once another process is listed, device readings are
 * no longer credited and the excess is reported as unexplained. */
static void test_watch_device_credit(void **state)
{
    struct gm_watch w;
    struct gm_error e;
    struct gm_process_memory p[2] = {{11, {2048 * MIB, true}, GM_PROCESS_COMPUTE},
                                     {99, {500 * MIB, true}, GM_PROCESS_COMPUTE}};
    enum gm_watch_attr a[2] = {GM_WATCH_ATTR_PID_TREE, GM_WATCH_ATTR_NONE};
    (void)state;

    gm_watch_init(&w, 0);
    assert_int_equal(gm_watch_add_device(&w, "cuda:0", "X", (struct gm_reading){80000 * MIB, true},
                                         (struct gm_reading){100 * MIB, true}),
                     0);
    device_at(&w, 0, 100);
    assert_false(w.process_due);
    device_at(&w, 100, 2148);
    assert_true(w.process_due); /* moved by 2 GiB: read the processes now */
    w.process_due = false;
    device_at(&w, 200, 6244);
    device_at(&w, 300, 2148);
    /* held back until a process reading shows no other process */
    assert_false(w.dev[0].cmd_peak.valid);
    assert_int_equal(gm_watch_process_sample(&w, 500, 0, p, a, NULL, 1, &e), GM_OK);
    assert_true(w.dev[0].cmd_peak.value == 6144 * MIB);
    assert_int_equal(w.dev[0].cmd_peak_t_ms, 200);
    assert_int_equal(w.dev[0].cmd_peak_source, GM_WATCH_SOURCE_DEVICE);
    assert_true(w.dev[0].proc_peak.value == 2048 * MIB);
    assert_true(w.cmd_peak == 6144 * MIB);
    assert_int_equal(w.cmd_peak_t_ms, 200);
    assert_int_equal(w.cmd_peak_source, GM_WATCH_SOURCE_DEVICE);
    assert_int_equal(gm_watch_unexplained_bytes(&w, 0), 0);

    /* another process appears: the credit of this window is dropped, and no later one */
    device_at(&w, 600, 8100);
    assert_int_equal(gm_watch_process_sample(&w, 700, 0, p, a, NULL, 2, &e), GM_OK);
    assert_true(w.dev[0].others_seen);
    device_at(&w, 800, 9000);
    assert_int_equal(gm_watch_process_sample(&w, 900, 0, p, a, NULL, 1, &e), GM_OK);
    assert_true(w.cmd_peak == 6144 * MIB);
    assert_true(gm_watch_unexplained_bytes(&w, 0) == (9000 - 100 - 6144) * MIB);
    gm_watch_release(&w);

    /* attached: what the command held at the start is in the baseline and is its own */
    gm_watch_init(&w, 0);
    w.attached = true;
    assert_int_equal(gm_watch_add_device(&w, "cuda:0", "X", (struct gm_reading){80000 * MIB, true},
                                         (struct gm_reading){2148 * MIB, true}),
                     0);
    device_at(&w, 0, 2148);
    assert_int_equal(gm_watch_process_sample(&w, 0, 0, p, a, NULL, 1, &e), GM_OK);
    device_at(&w, 100, 4148);
    assert_int_equal(gm_watch_process_sample(&w, 500, 0, p, a, NULL, 1, &e), GM_OK);
    assert_true(w.cmd_peak == 4048 * MIB);
    assert_int_equal(w.cmd_peak_source, GM_WATCH_SOURCE_DEVICE);

    /* a process of the command still running after it exited is counted once */
    a[0] = GM_WATCH_ATTR_AFTER_EXIT;
    assert_int_equal(gm_watch_process_sample(&w, 600, 0, p, a, NULL, 1, &e), GM_OK);
    assert_int_equal(gm_watch_process_sample(&w, 700, 0, p, a, NULL, 1, &e), GM_OK);
    assert_int_equal(w.n_after_exit, 1);
    assert_int_equal(w.proc[0].attr, GM_WATCH_ATTR_AFTER_EXIT);
    gm_watch_release(&w);
}

/* A zombie exists but no longer runs; signals have their names. */
static void test_proc_zombie(void **state)
{
    pid_t child;
    (void)state;
    child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(0);
    /* until the child has exited (a minute at most, however slow the machine) */
    for (int i = 0; i < 6000 && gm_proc_running((uint32_t)child); i++)
        usleep(10000);
    assert_true(gm_proc_exists((uint32_t)child));
    assert_false(gm_proc_running((uint32_t)child));
    assert_true(gm_proc_running((uint32_t)getpid()));
    waitpid(child, NULL, 0);
    assert_false(gm_proc_running((uint32_t)child));
    assert_string_equal(gm_signal_name(SIGSEGV), "SIGSEGV");
    assert_string_equal(gm_signal_name(SIGKILL), "SIGKILL");
    assert_null(gm_signal_name(0));
}

/* The environment members parse as JSON, with null for what is unknown. */
static void test_environment_json(void **state)
{
    struct gm_devices *d;
    struct gm_host_info h;
    struct gm_error e;
    struct gm_json w;
    json_t *root, *dev;
    json_error_t jerr;
    char *buf = NULL;
    size_t len = 0;
    FILE *f;
    (void)state;

    setenv("GPUMEM_FAKE_DEVICES", "2", 1);
    setenv("GPUMEM_FAKE_NO_MEMORY_V2", "1", 1);
    setenv("CUDA_VISIBLE_DEVICES", "1", 1);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    gm_host_probe(&h, getenv);
    f = open_memstream(&buf, &len);
    assert_non_null(f);
    gm_json_init(&w, f, GM_JSON_PRETTY);
    gm_json_begin_object(&w);
    gm_devices_write_json(&w, d, &h, -1);
    gm_json_end_object(&w);
    assert_true(gm_json_finish(&w));
    fclose(f);
    root = json_loads(buf, 0, &jerr);
    assert_non_null(root);
    assert_int_equal(json_array_size(json_object_get(root, "devices")), 2);
    dev = json_array_get(json_object_get(root, "devices"), 0);
    assert_int_equal(json_integer_value(json_object_get(dev, "cuda_index")), 0);
    assert_int_equal(json_integer_value(json_object_get(dev, "nvml_index")), 1);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(dev, "memory"), "source")), "nvml_v1");
    /* v1 cannot tell reserved memory: null, not 0. */
    assert_true(json_is_null(json_object_get(json_object_get(dev, "memory"), "reserved_bytes")));
    dev = json_array_get(json_object_get(root, "devices"), 1);
    assert_true(json_is_null(json_object_get(dev, "cuda_index")));
    assert_string_equal(json_string_value(json_object_get(json_object_get(root, "settings"),
                                                          "CUDA_VISIBLE_DEVICES")),
                        "1");
    assert_true(json_is_boolean(json_object_get(json_object_get(root, "host"), "pid_namespace")));
    json_decref(root);
    free(buf);
    gm_devices_close(d);
}

static void test_watch_json(void **state)
{
    struct gm_watch w;
    struct gm_error e;
    struct gm_device_memory m = {
        {1000, true}, {600, true}, {100, true}, {0, false}, GM_MEMORY_NVML_V1};
    struct gm_process_memory p[1] = {{4242, {300, true}, GM_PROCESS_COMPUTE}};
    enum gm_watch_attr a[1] = {GM_WATCH_ATTR_NEW_PID};
    const char *names[1] = {"python3"};
    char arg0[] = "python3", arg1[] = "train.py";
    char *cmd[] = {arg0, arg1, NULL};
    struct gm_watch_run run = {cmd, 77, 100, 500, 130, true, 0};
    json_t *root, *proc;
    json_error_t jerr;
    char *buf = NULL;
    size_t len = 0;
    FILE *f;
    (void)state;

    gm_watch_init(&w, 0);
    assert_int_equal(gm_watch_add_device(&w, "cuda:0", "Card \"A\"", m.total, m.used), 0);
    assert_int_equal(gm_watch_device_sample(&w, 0, 0, &m, &e), GM_OK);
    assert_int_equal(gm_watch_process_sample(&w, 250, 0, p, a, names, 1, &e), GM_OK);
    f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(gm_watch_json(f, &w, &run, NULL), GM_OK);
    fclose(f);
    root = json_loads(buf, 0, &jerr);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_object_get(root, "schema")), "gpumem.watch/1");
    assert_string_equal(json_string_value(json_object_get(root, "attribution")), "new_pid");
    assert_int_equal(json_integer_value(json_object_get(root, "exit_status")), 130);
    assert_true(json_is_true(json_object_get(root, "interrupted")));
    assert_int_equal(json_integer_value(json_object_get(root, "peak_bytes")), 300);
    assert_int_equal(json_integer_value(json_object_get(root, "peak_time_ms")), 250);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(root, "samples"), 1), "t_ms")),
                     250);
    assert_string_equal(json_string_value(json_array_get(json_object_get(root, "command"), 1)),
                        "train.py");
    proc = json_array_get(json_object_get(root, "processes"), 0);
    assert_string_equal(json_string_value(json_object_get(proc, "name")), "python3");
    assert_int_equal(json_array_size(json_object_get(root, "samples")), 2);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(root, "devices"), 0), "memory_source")),
                        "nvml_v1");
    json_decref(root);
    free(buf);
    gm_watch_release(&w);
}

/* The sampler: our own process, allocating through the fake CUDA, is found in the process
 * tree of our PID; seen through a "PID namespace" (PID offset) it is a new, invisible PID. */
static void test_watch_poll(void **state)
{
    struct gm_devices *d;
    struct gm_cuda *cu;
    struct gm_error e;
    struct gm_watch w;
    uint64_t p;
    (void)state;

    setenv("GPUMEM_FAKE_DEVICES", "2", 1);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    gm_watch_init(&w, 0);
    assert_int_equal(gm_watch_setup(&w, d, 1, &e), GM_OK);
    assert_int_equal(w.n_dev, 1);
    assert_string_equal(w.dev[0].label, "cuda:1");
    assert_int_equal(w.dev[0].n_baseline_pids, 0);
    assert_int_equal(gm_cuda_load(&cu, getenv, &e), GM_OK);
    assert_int_equal(gm_cuda_context_begin(cu, 1, &e), GM_OK);
    assert_int_equal(gm_cuda_mem_alloc(cu, 64 * MIB, &p, &e), GM_OK);
    gm_watch_poll_devices(&w, d, 10);
    gm_watch_poll_processes(&w, d, 10, (uint32_t)getpid(), false);
    assert_int_equal(w.dev[0].peak.value, 364 * MIB);
    assert_int_equal(w.cmd_peak, 364 * MIB);
    assert_int_equal(w.n_proc, 1);
    assert_int_equal(w.proc[0].pid, (uint32_t)getpid());
    assert_int_equal(w.proc[0].attr, GM_WATCH_ATTR_PID_TREE);
    assert_string_not_equal(w.proc[0].name, "");
    gm_watch_release(&w);
    gm_devices_close(d);

    /* The same process seen as host PID + 3000000 from a namespace that cannot see it. */
    setenv("GPUMEM_FAKE_PID_OFFSET", "3000000", 1);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    gm_watch_init(&w, 0);
    assert_int_equal(gm_watch_setup(&w, d, -1, &e), GM_OK);
    assert_int_equal(w.n_dev, 2);
    assert_int_equal(w.dev[1].n_baseline_pids, 1); /* already there at the start */
    gm_watch_poll_processes(&w, d, 10, (uint32_t)getpid(), false);
    assert_false(w.cmd_seen);     /* a baseline PID is not the command's */
    w.dev[1].n_baseline_pids = 0; /* as if it had started after the baseline */
    gm_watch_poll_processes(&w, d, 20, (uint32_t)getpid(), false);
    assert_true(w.cmd_seen);
    assert_int_equal(w.proc[0].attr, GM_WATCH_ATTR_NEW_PID);
    assert_int_equal(w.proc[0].pid, (uint32_t)getpid() + 3000000u);
    gm_watch_poll_processes(&w, d, 30, (uint32_t)getpid(), true); /* attached: no guessing */
    assert_int_equal(w.proc[0].last_t_ms, 20);
    gm_watch_release(&w);
    gm_devices_close(d);

    assert_int_equal(gm_cuda_mem_free(cu, p, &e), GM_OK);
    gm_cuda_unload(cu);
}

/* The start and the cadence watch and sweep share: output to a file (stdout and stderr),
 * a command that cannot run is an errno and no process, its own process group ends with
 * its tree; a process reading happens when scheduled, and early when a device reading
 * moved by GM_WATCH_CHANGE_BYTES (counted as triggered). */
static void test_watch_spawn_and_tick(void **state)
{
    extern char **environ;
    static char sh[] = "sh", dash_c[] = "-c", script[] = "echo out; echo err >&2; exit 3";
    static char sleep_[] = "sleep", five[] = "5", nosuch[] = "gm-no-such-command";
    char out_path[256], buf[64] = {0};
    char *echo[] = {sh, dash_c, script, NULL};
    char *sleeper[] = {sleep_, five, NULL};
    char *missing[] = {nosuch, NULL};
    struct gm_watch_command c = {echo, environ, out_path, false, false};
    struct gm_watch_clock clk;
    struct gm_devices *d;
    struct gm_cuda *cu;
    struct gm_watch w;
    struct gm_error e;
    pid_t pid = 0;
    int exec_errno = -1, wst = 0;
    uint64_t p, t;
    FILE *f;
    (void)state;

    snprintf(out_path, sizeof(out_path), "/tmp/gm-test-spawn-%d.log", (int)getpid());
    assert_int_equal(gm_watch_spawn(&c, &pid, &exec_errno, &e), GM_OK);
    assert_int_equal(exec_errno, 0);
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFEXITED(wst) && WEXITSTATUS(wst) == 3);
    f = fopen(out_path, "r");
    assert_non_null(f);
    assert_int_equal(fread(buf, 1, sizeof(buf) - 1, f), 8);
    fclose(f);
    unlink(out_path);
    assert_string_equal(buf, "out\nerr\n");

    c = (struct gm_watch_command){missing, environ, NULL, false, false};
    assert_int_equal(gm_watch_spawn(&c, &pid, &exec_errno, &e), GM_OK);
    assert_int_equal(exec_errno, ENOENT);
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1); /* no child left behind */

    c = (struct gm_watch_command){sleeper, environ, NULL, false, true};
    assert_int_equal(gm_watch_spawn(&c, &pid, &exec_errno, &e), GM_OK);
    assert_int_equal(getpgid(pid), pid);
    assert_int_equal(kill(-pid, SIGTERM), 0);
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_true(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGTERM);

    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    gm_watch_init(&w, 0);
    assert_int_equal(gm_watch_setup(&w, d, 0, &e), GM_OK);
    gm_watch_clock_start(&clk, 10, 3600000);
    t = gm_watch_tick(&w, d, &clk, (uint32_t)getpid(), false);
    assert_true(t < 1000);
    assert_int_equal(w.n_device_reads, 1);
    assert_int_equal(w.n_process_reads, 1); /* the first one is scheduled */
    assert_int_equal(clk.next_process_ms, t + 3600000);
    gm_watch_wait(&clk, t);
    assert_true(gm_watch_clock_ms(&clk) >= t + 1);
    gm_watch_tick(&w, d, &clk, (uint32_t)getpid(), false);
    assert_int_equal(w.n_process_reads, 1); /* not due, nothing moved */
    assert_int_equal(gm_cuda_load(&cu, getenv, &e), GM_OK);
    assert_int_equal(gm_cuda_context_begin(cu, 0, &e), GM_OK);
    assert_int_equal(gm_cuda_mem_alloc(cu, 128 * MIB, &p, &e), GM_OK);
    gm_watch_tick(&w, d, &clk, (uint32_t)getpid(), false);
    assert_int_equal(w.n_process_reads, 2);
    assert_int_equal(w.n_triggered_reads, 1);
    assert_true(w.cmd_seen);
    assert_int_equal(gm_cuda_mem_free(cu, p, &e), GM_OK);
    gm_cuda_unload(cu);
    gm_watch_release(&w);
    gm_devices_close(d);
}

/* Point AMD SMI at the fake library (tests/fake/fake_amdsmi.c). */
static void use_fake_amdsmi(void)
{
    char path[512];
    const char *dir = getenv("GM_FAKE_DIR");
    assert_non_null(dir);
    snprintf(path, sizeof(path), "%s/libamd_smi.so.26", dir);
    setenv("GPUMEM_AMDSMI_LIBRARY", path, 1);
}

/* No NVIDIA library (an AMD-only machine); the paths in effect are saved into cuda[], nvml[]
 * for nvidia_restore(). */
static void nvidia_absent(char cuda[512], char nvml[512])
{
    snprintf(cuda, 512, "%s", getenv("GPUMEM_CUDA_LIBRARY"));
    snprintf(nvml, 512, "%s", getenv("GPUMEM_NVML_LIBRARY"));
    setenv("GPUMEM_CUDA_LIBRARY", "/nonexistent/libcuda.so.1", 1);
    setenv("GPUMEM_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
}

static void nvidia_restore(const char cuda[512], const char nvml[512])
{
    setenv("GPUMEM_CUDA_LIBRARY", cuda, 1);
    setenv("GPUMEM_NVML_LIBRARY", nvml, 1);
}

/* NVIDIA and AMD GPUs on one machine: each vendor's GPUs are their own entries, CUDA's first,
 * then AMD SMI's in its order, with AMD SMI's VRAM figures and per-process VRAM. */
static void test_amd_devices(void **state)
{
    struct gm_devices *d;
    struct gm_device_memory m;
    struct gm_process_memory procs[8];
    const struct gm_device_info *a, *b;
    struct gm_error e;
    size_t n;
    (void)state;

    use_fake_amdsmi();
    setenv("GPUMEM_FAKE_AMD_DEVICES", "2", 1);
    setenv("GPUMEM_FAKE_AMD_NAME", "AMD Instinct MI300X,AMD Instinct MI250", 1);
    setenv("GPUMEM_FAKE_AMD_MEMORY", "192GiB,64GiB", 1);
    setenv("GPUMEM_FAKE_AMD_USED", "100MiB", 1);
    setenv("GPUMEM_FAKE_AMD_PROCESSES", "0:4242:8GiB,1:4343:1GiB,0:4444:512MiB", 1);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    assert_int_equal(gm_devices_check(d, &e), GM_OK);
    assert_int_equal(gm_devices_n_backends(d), 3);
    assert_string_equal(gm_devices_backend(d, 2)->name, "amdsmi");
    assert_int_equal(gm_devices_backend(d, 2)->state, GM_BACKEND_OK);
    assert_string_equal(gm_devices_versions(d)->amdsmi, "26.1.0");
    assert_int_equal(gm_devices_count(d), 3);
    assert_int_equal(gm_devices_info(d, 0)->vendor, GM_VENDOR_NVIDIA);
    assert_int_equal(gm_devices_info(d, 0)->cuda_index, 0);
    assert_int_equal(gm_devices_info(d, 0)->amdsmi_index, -1);
    a = gm_devices_info(d, 1);
    b = gm_devices_info(d, 2);
    assert_int_equal(a->vendor, GM_VENDOR_AMD);
    assert_string_equal(gm_vendor_name(a->vendor), "AMD");
    assert_int_equal(a->amdsmi_index, 0);
    assert_int_equal(a->cuda_index, -1);
    assert_int_equal(a->nvml_index, -1);
    assert_string_equal(a->name, "AMD Instinct MI300X");
    assert_string_equal(a->uuid, "10ff74a1-0000-1000-80ff-0c8ae9aa5e41");
    assert_string_equal(a->pci_bus_id, "00000000:0C:00.0");
    assert_false(a->cc_valid);
    assert_int_equal(b->amdsmi_index, 1);
    assert_string_equal(b->name, "AMD Instinct MI250");
    assert_string_equal(b->pci_bus_id, "00000000:1C:00.0");

    assert_int_equal(gm_devices_memory(d, 1, &m, &e), GM_OK);
    assert_int_equal(m.source, GM_MEMORY_AMDSMI);
    assert_true(m.total.valid && m.used.valid && m.free.valid);
    assert_false(m.reserved.valid); /* AMD SMI has no such figure: unknown, not 0 */
    assert_int_equal(m.total.value, 192 * 1024 * MIB);
    assert_int_equal(m.used.value, 100 * MIB + 8 * 1024 * MIB + 512 * MIB);
    assert_int_equal(m.free.value, m.total.value - m.used.value);

    assert_int_equal(gm_devices_processes(d, 1, procs, 8, &n, &e), GM_OK);
    assert_int_equal(n, 2);
    assert_int_equal(procs[0].pid, 4242);
    assert_true(procs[0].used.valid);
    assert_int_equal(procs[0].used.value, 8 * 1024 * MIB); /* VRAM, not VRAM + GTT */
    assert_int_equal(procs[1].pid, 4444);
    assert_int_equal(procs[1].used.value, 512 * MIB);
    /* more processes than room: the count says so, only 'cap' are written */
    assert_int_equal(gm_devices_processes(d, 1, procs, 1, &n, &e), GM_OK);
    assert_int_equal(n, 2);
    assert_int_equal(gm_devices_processes(d, 2, procs, 8, &n, &e), GM_OK);
    assert_int_equal(n, 1);
    assert_int_equal(procs[0].pid, 4343);
    gm_devices_close(d);
}

/* The process entry layout follows the library's version: PIDs plus one call per PID before
 * 24.6, 224-byte entries to 24.x, 704-byte entries in 26.x; another version (25.x of ROCm 6.4,
 * whose version struct still has the year; 27.x) leaves per-process memory unknown with the
 * reason instead of misreading it. */
static void test_amd_process_layouts(void **state)
{
    static const char *const versions[] = {"23.4.1.0", "24.5.1.0", "24.6.2.0",
                                           "24.7.1.0", "26.0.0",   "26.1.0"};
    static const char *const unknown[] = {"25.3.0", "27.1.0"};
    char cuda[512], nvml[512];
    struct gm_devices *d;
    struct gm_process_memory procs[4];
    struct gm_error e;
    size_t n;
    (void)state;

    use_fake_amdsmi();
    nvidia_absent(cuda, nvml);
    setenv("GPUMEM_FAKE_AMD_PROCESSES", "0:777:3GiB,0:778:5MiB", 1);
    for (size_t k = 0; k < sizeof(versions) / sizeof(versions[0]); k++) {
        setenv("GPUMEM_FAKE_AMD_VERSION", versions[k], 1);
        assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
        assert_string_equal(gm_devices_versions(d)->amdsmi, versions[k]);
        assert_int_equal(gm_devices_count(d), 1);
        assert_string_equal(gm_devices_info(d, 0)->name, "AMD Instinct MI300X");
        assert_int_equal(gm_devices_processes(d, 0, procs, 4, &n, &e), GM_OK);
        assert_int_equal(n, 2);
        assert_int_equal(procs[0].pid, 777);
        assert_int_equal(procs[0].used.value, 3 * 1024 * MIB);
        assert_int_equal(procs[1].pid, 778);
        assert_int_equal(procs[1].used.value, 5 * MIB);
        gm_devices_close(d);
    }
    for (size_t k = 0; k < sizeof(unknown) / sizeof(unknown[0]); k++) {
        struct gm_device_memory m;
        setenv("GPUMEM_FAKE_AMD_VERSION", unknown[k], 1);
        assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
        assert_string_equal(gm_devices_versions(d)->amdsmi, unknown[k]);
        assert_int_equal(gm_devices_processes(d, 0, procs, 4, &n, &e), GM_ERR_UNSUPPORTED);
        assert_non_null(strstr(e.msg, unknown[k]));
        assert_int_equal(gm_devices_memory(d, 0, &m, &e), GM_OK); /* the rest still reads */
        assert_string_equal(gm_devices_info(d, 0)->name, "AMD Instinct MI300X");
        gm_devices_close(d);
    }
    nvidia_restore(cuda, nvml);
}

/* An AMD-only machine: the reading commands have a device (check passes), the CUDA ones
 * find no CUDA device (exit 2); an AMD SMI without GPUs or driver is "no device". */
static void test_amd_only(void **state)
{
    char cuda[512], nvml[512];
    struct gm_devices *d;
    struct gm_error e;
    size_t pos;
    (void)state;

    use_fake_amdsmi();
    nvidia_absent(cuda, nvml);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    assert_int_equal(gm_devices_check(d, &e), GM_OK);
    assert_int_equal(gm_devices_find_cuda(d, 0, &pos, &e), GM_ERR_NODEV);
    assert_non_null(strstr(e.msg, "0 CUDA devices visible (1 AMD GPU"));
    gm_devices_close(d);

    setenv("GPUMEM_FAKE_AMD_INIT_ERROR", "34", 1);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    assert_int_equal(gm_devices_backend(d, 2)->state, GM_BACKEND_NODEV);
    assert_int_equal(gm_devices_backend(d, 2)->driver_code, 34);
    assert_non_null(strstr(gm_devices_backend(d, 2)->msg, "amdgpu kernel driver is not loaded"));
    assert_int_equal(gm_devices_check(d, &e), GM_ERR_NODEV);
    gm_devices_close(d);
    unsetenv("GPUMEM_FAKE_AMD_INIT_ERROR");

    setenv("GPUMEM_FAKE_AMD_DEVICES", "0", 1);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    assert_int_equal(gm_devices_backend(d, 2)->state, GM_BACKEND_NODEV);
    assert_non_null(strstr(gm_devices_backend(d, 2)->msg, "0 GPUs"));
    assert_int_equal(gm_devices_count(d), 0);
    gm_devices_close(d);

    setenv("GPUMEM_AMDSMI_LIBRARY", "/nonexistent/libamd_smi.so", 1);
    assert_int_equal(gm_devices_open(&d, getenv, &e), GM_OK);
    assert_int_equal(gm_devices_backend(d, 2)->state, GM_BACKEND_MISSING);
    assert_string_equal(gm_devices_backend(d, 2)->library, "/nonexistent/libamd_smi.so");
    gm_devices_close(d);
    nvidia_restore(cuda, nvml);
}

/* Fail the Nth host allocation for every N: each call fails cleanly (no crash, no leak
 * under ASan) or succeeds, and once N is past the last allocation everything works. */
static void test_alloc_failures(void **state)
{
    bool completed = false;
    (void)state;
    for (long nth = 0; nth < 200 && !completed; nth++) {
        struct gm_devices *d = NULL;
        struct gm_cuda *cu = NULL;
        struct gm_error e;
        struct gm_process_memory procs[4];
        struct gm_device_memory m;
        struct gm_watch w;
        size_t n;
        uint64_t p;
        enum gm_status st;

        gm_alloc_fail_after(nth);
        st = gm_devices_open(&d, getenv, &e);
        if (st == GM_OK) {
            bool ok = gm_devices_check(d, &e) == GM_OK && gm_devices_count(d) == 1 &&
                      gm_devices_memory(d, 0, &m, &e) == GM_OK;
            ok = ok && gm_cuda_load(&cu, getenv, &e) == GM_OK;
            ok = ok && gm_cuda_context_begin(cu, 0, &e) == GM_OK &&
                 gm_cuda_mem_alloc(cu, MIB, &p, &e) == GM_OK;
            ok = ok && gm_devices_processes(d, 0, procs, 4, &n, &e) == GM_OK && n == 1;
            gm_watch_init(&w, 0);
            ok = ok && gm_watch_add_device(&w, "cuda:0", "x", m.total, m.used) == 0 &&
                 gm_watch_device_sample(&w, 0, 0, &m, &e) == GM_OK;
            gm_watch_release(&w);
            if (cu && ok)
                assert_int_equal(gm_cuda_mem_free(cu, p, &e), GM_OK);
            gm_cuda_unload(cu);
            gm_devices_close(d);
            completed = ok;
        } else {
            assert_int_equal(st, GM_ERR_NOMEM);
            assert_null(d);
        }
        gm_alloc_fail_after(-1);
    }
    assert_true(completed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_parse_spec, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pci_normalise, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuda_basics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuda_oom_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuda_module, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cuda_no_gpu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devices_join, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devices_env_is_the_callers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devices_memory_fallbacks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devices_no_gpu, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devices_processes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devices_graphics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proc_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_device_credit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proc_zombie, setup, teardown),
        cmocka_unit_test_setup_teardown(test_amd_devices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_amd_process_layouts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_amd_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_environment_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_poll, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watch_spawn_and_tick, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
