/* SPDX-License-Identifier: MIT */
/* test_account.c - the account's library side: the table of file names that says what a
 * loaded object is, the equation made from a sample (terms in order, other objects named up
 * to a limit, "not seen" as the exact remainder, negative when the terms exceed the reading),
 * which samples are the peak and the end, a cut last line, a bad line named with its offset,
 * the command's environment, and every allocation failing in turn.  End to end (the
 * interposer in a real process) is tests/account/account_test.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumem/account.h"
#include "gpumem/arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_classify_table(void **state)
{
    static const struct {
        const char *path;
        enum gm_account_lib lib;
    } cases[] = {
        {"libc10_cuda.so", GM_ACCOUNT_LIB_TORCH},
        {"/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so", GM_ACCOUNT_LIB_TORCH},
        {"libtorch_cuda_cu.so", GM_ACCOUNT_LIB_TORCH},
        {"/usr/lib/libnccl.so.2", GM_ACCOUNT_LIB_NCCL},
        {"libcublasLt.so.12", GM_ACCOUNT_LIB_CUBLASLT},
        {"libcublas.so.12.4.5.8", GM_ACCOUNT_LIB_CUBLAS},
        {"libcudnn_engines_precompiled.so.9", GM_ACCOUNT_LIB_CUDNN},
        {"/home/u/.triton/cache/ab12/cuda_utils.cpython-311-x86_64-linux-gnu.so",
         GM_ACCOUNT_LIB_TRITON},
        {"/venv/triton/_C/libtriton.so", GM_ACCOUNT_LIB_TRITON},
        {"libcudart.so.12", GM_ACCOUNT_LIB_RUNTIME},
        {"/usr/lib/x86_64-linux-gnu/libcuda.so.1", GM_ACCOUNT_LIB_DRIVER},
        {"/usr/local/lib/gpumem/libgpumem-account.so", GM_ACCOUNT_LIB_SELF},
        {"/usr/lib/libcufft.so.11", GM_ACCOUNT_LIB_OTHER},
        {"/opt/app/train", GM_ACCOUNT_LIB_OTHER},
        {"", GM_ACCOUNT_LIB_UNKNOWN},
        {NULL, GM_ACCOUNT_LIB_UNKNOWN},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        assert_int_equal(gm_account_classify(cases[i].path), cases[i].lib);
    for (int l = 0; l < GM_ACCOUNT_LIB__COUNT; l++) {
        enum gm_account_lib back;
        const char *key = gm_account_lib_key((enum gm_account_lib)l);
        assert_true(gm_account_lib_from_key(key, strlen(key), &back));
        assert_int_equal(back, l);
        assert_int_equal(gm_account_lib_passes_through((enum gm_account_lib)l),
                         l == GM_ACCOUNT_LIB_RUNTIME || l == GM_ACCOUNT_LIB_DRIVER ||
                             l == GM_ACCOUNT_LIB_SELF);
    }
    for (int k = 0; k < GM_ACCOUNT_KIND__COUNT; k++) {
        enum gm_account_kind back;
        const char *key = gm_account_kind_key((enum gm_account_kind)k);
        assert_true(gm_account_kind_from_key(key, strlen(key), &back));
        assert_int_equal(back, k);
    }
}

#define START "{\"schema\":\"gpumem.account/1\",\"type\":\"start\",\"pid\":7,\"t\":1000}\n"
#define OBJ(id, lib, path)                                                                         \
    "{\"type\":\"object\",\"pid\":7,\"id\":" #id ",\"lib\":\"" lib "\",\"path\":\"" path "\"}\n"
#define DEVICE                                                                                     \
    "{\"type\":\"device\",\"pid\":7,\"device\":0,\"name\":\"G\",\"total\":100,"                    \
    "\"granularity\":2097152,\"granularity_measured\":true}\n"

static struct gm_account *load(const char *text, enum gm_status want)
{
    struct gm_account *a = NULL;
    struct gm_error err;
    assert_int_equal(gm_account_new(&a, NULL), GM_OK);
    assert_int_equal(gm_account_add_data(a, "t", text, strlen(text), &err), want);
    return a;
}

static const struct gm_account_term *term(const struct gm_account_balance *b,
                                          enum gm_account_term_kind kind, const char *title)
{
    for (size_t i = 0; i < b->n_terms; i++)
        if (b->terms[i].kind == kind &&
            (!title || !strcmp(gm_account_term_title(&b->terms[i]), title)))
            return &b->terms[i];
    return NULL;
}

static void test_equation_exact(void **state)
{
    const char *text = START OBJ(2, "torch", "/x/libc10_cuda.so") OBJ(3, "nccl", "/x/libnccl.so.2")
        OBJ(4, "other", "/x/libfoo.so") DEVICE
        "{\"type\":\"sample\",\"pid\":7,\"t\":2000,\"at\":\"periodic\",\"device\":0,\"used\":1000,"
        "\"used_source\":\"nvml_process\",\"consistent\":true,\"context\":300,\"contexts\":1,"
        "\"context_source\":\"nvml_process\",\"modules\":40,\"module_count\":2,"
        "\"modules_source\":\"mem_get_info\",\"graphs\":0,\"rounding\":7,\"virtual\":64,"
        "\"memory\":[[2,\"device\",200,2],[2,\"vmm\",100,5],[3,\"device\",50,1],"
        "[4,\"pitch\",30,1],[0,\"async\",3,1],[2,\"managed\",16,1]]}\n";
    struct gm_account *a = load(text, GM_OK);
    const struct gm_account_process *p = gm_account_process(a, 0);
    const struct gm_account_balance *b;
    const char *order[] = {
        "context",   "modules",        "PyTorch reserved", "NCCL",
        "libfoo.so", "unknown caller", "rounding",         "not seen by the driver API"};
    int64_t sum = 0;
    char src[256];
    (void)state;
    assert_int_equal(gm_account_n_processes(a), 1);
    assert_int_equal(p->n_devices, 1);
    b = &p->devices[0].peak;
    assert_true(b->valid && b->used_valid && b->consistent);
    assert_int_equal(b->n_terms, sizeof(order) / sizeof(order[0]));
    for (size_t i = 0; i < b->n_terms; i++) {
        assert_string_equal(gm_account_term_title(&b->terms[i]), order[i]);
        sum += b->terms[i].bytes;
    }
    assert_int_equal(sum, 1000); /* the equation balances to the byte */
    assert_int_equal(term(b, GM_ACCOUNT_TERM_LIBRARY, "PyTorch reserved")->bytes, 300);
    assert_int_equal(term(b, GM_ACCOUNT_TERM_NOT_SEEN, NULL)->bytes,
                     1000 - 300 - 40 - 300 - 50 - 30 - 3 - 7);
    assert_int_equal(b->managed, 16); /* beside the equation */
    assert_int_equal(b->virtual_reserved, 64);
    gm_account_term_source(term(b, GM_ACCOUNT_TERM_LIBRARY, "PyTorch reserved"), b, src,
                           sizeof(src));
    assert_string_equal(src, "cuMemAlloc x2, cuMemCreate x5 by libc10_cuda.so");
    gm_account_term_source(term(b, GM_ACCOUNT_TERM_CONTEXT, NULL), b, src, sizeof(src));
    assert_string_equal(src, "measured: NVML usedGpuMemory of the process around each creation "
                             "(1 context)");
    /* no exit sample: the end is the last sample */
    assert_int_equal(p->devices[0].end.at, GM_ACCOUNT_AT_LAST);
    assert_int_equal(p->end, GM_ACCOUNT_END_NONE);
    gm_account_free(a);
}

static void test_terms_above_the_reading(void **state)
{
    const char *text = START OBJ(2, "torch", "/x/libc10_cuda.so") DEVICE
        "{\"type\":\"sample\",\"pid\":7,\"t\":2,\"at\":\"exit\",\"device\":0,\"used\":100,"
        "\"used_source\":\"nvml_device\",\"consistent\":true,\"memory\":[[2,\"device\",150,1]]}\n"
        "{\"type\":\"end\",\"pid\":7,\"t\":3,\"reason\":\"exit\"}\n";
    struct gm_account *a = load(text, GM_OK);
    const struct gm_account_balance *b = &gm_account_process(a, 0)->devices[0].end;
    (void)state;
    assert_int_equal(b->at, GM_ACCOUNT_AT_EXIT);
    assert_int_equal(term(b, GM_ACCOUNT_TERM_NOT_SEEN, NULL)->bytes, -50);
    assert_int_equal(gm_account_process(a, 0)->end, GM_ACCOUNT_END_EXIT);
    gm_account_free(a);
}

static void test_other_objects_named_up_to_a_limit(void **state)
{
    char text[8192];
    size_t n = (size_t)snprintf(text, sizeof(text), START DEVICE);
    const struct gm_account_balance *b;
    struct gm_account *a;
    int named = 0, others = 0;
    (void)state;
    for (int i = 0; i < 9; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n,
                              "{\"type\":\"object\",\"pid\":7,\"id\":%d,\"lib\":\"other\","
                              "\"path\":\"/x/lib%d.so\"}\n",
                              10 + i, i);
    n += (size_t)snprintf(text + n, sizeof(text) - n,
                          "{\"type\":\"sample\",\"pid\":7,\"t\":2,\"at\":\"periodic\",\"device\":0,"
                          "\"used\":null,\"memory\":[");
    for (int i = 0; i < 9; i++)
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%s[%d,\"device\",%d,1]", i ? "," : "",
                              10 + i, 100 + i);
    snprintf(text + n, sizeof(text) - n, "]}\n");
    a = load(text, GM_OK);
    b = &gm_account_process(a, 0)->devices[0].peak;
    for (size_t i = 0; i < b->n_terms; i++) {
        named += b->terms[i].kind == GM_ACCOUNT_TERM_LIBRARY;
        others += b->terms[i].kind == GM_ACCOUNT_TERM_OTHERS;
    }
    assert_int_equal(named, GM_ACCOUNT_MAX_NAMED);
    assert_int_equal(others, 1);
    /* the largest are named, first */
    assert_string_equal(gm_account_term_title(&b->terms[0]), "lib8.so");
    assert_int_equal(term(b, GM_ACCOUNT_TERM_OTHERS, NULL)->bytes, 100 + 101 + 102);
    assert_false(b->used_valid);
    assert_null(term(b, GM_ACCOUNT_TERM_NOT_SEEN, NULL)); /* nothing read: no remainder */
    gm_account_free(a);
}

static void test_peak_is_the_highest_consistent_reading(void **state)
{
    const char *text = START DEVICE
        "{\"type\":\"sample\",\"pid\":7,\"t\":2,\"at\":\"periodic\",\"device\":0,\"used\":500,"
        "\"used_source\":\"nvml_process\",\"consistent\":true,\"memory\":[]}\n"
        "{\"type\":\"sample\",\"pid\":7,\"t\":3,\"at\":\"periodic\",\"device\":0,\"used\":900,"
        "\"used_source\":\"nvml_process\",\"consistent\":false,\"memory\":[]}\n"
        "{\"type\":\"sample\",\"pid\":7,\"t\":4,\"at\":\"periodic\",\"device\":0,\"used\":700,"
        "\"used_source\":\"nvml_process\",\"consistent\":true,\"memory\":[]}\n"
        "{\"type\":\"sample\",\"pid\":7,\"t\":5,\"at\":\"signal\",\"device\":0,\"used\":600,"
        "\"used_source\":\"nvml_process\",\"used_t\":4,\"consistent\":true,\"memory\":[]}\n"
        "{\"type\":\"sample\",\"pid\":7,\"t\":6,\"at\":\"periodic\",\"device\":0,\"used\":100,"
        "\"used_source\":\"nvml_process\",\"consistent\":true,\"memory\":[]}\n"
        "{\"type\":\"end\",\"pid\":7,\"t\":7,\"reason\":\"signal\",\"signal\":15}\n";
    struct gm_account *a = load(text, GM_OK);
    const struct gm_account_process *p = gm_account_process(a, 0);
    (void)state;
    assert_int_equal(p->devices[0].peak.used, 700);
    assert_int_equal(p->devices[0].end.at, GM_ACCOUNT_AT_SIGNAL);
    assert_int_equal(p->devices[0].end.used, 600);
    assert_int_equal(p->devices[0].end.used_t_ns, 4);
    assert_int_equal(p->end, GM_ACCOUNT_END_SIGNAL);
    assert_int_equal(p->signal, 15);
    assert_int_equal(p->devices[0].n_points, 5);
    gm_account_free(a);
}

static void test_cut_and_bad_lines(void **state)
{
    const char *cut = START DEVICE "{\"type\":\"sample\",\"pid\":7,\"t\":2,\"at\":\"peri";
    const char *bad =
        START "{\"type\":\"object\",\"pid\":7,\"id\":-1,\"lib\":\"nccl\",\"path\":\"x\"}\n" DEVICE;
    struct gm_account *a = load(cut, GM_OK);
    struct gm_error err;
    (void)state;
    assert_int_equal(gm_account_process(a, 0)->n_devices, 1);
    gm_account_free(a);
    assert_int_equal(gm_account_new(&a, NULL), GM_OK);
    assert_int_equal(gm_account_add_data(a, "t", bad, strlen(bad), &err), GM_ERR_FORMAT);
    assert_int_equal(err.offset, strlen(START));
    assert_non_null(strstr(err.msg, "line 2"));
    gm_account_free(a);
    assert_false(gm_account_is_account_data("{\"schema\":\"gpumem.watch/1\"}\n", 27));
    assert_true(gm_account_is_account_data(START, strlen(START)));
}

static void test_environment_of_the_command(void **state)
{
    static char v0[] = "PATH=/bin", v1[] = "LD_PRELOAD=/opt/libasan.so",
                v2[] = "GPUMEM_ACCOUNT_DIR=/old", v3[] = "HOME=/h";
    char *envp[] = {v0, v1, v2, v3, NULL};
    struct gm_account_env_opts o = {"/lib/libgpumem-account.so", "/tmp/acc", 50, 4};
    char **env = NULL;
    int seen = 0;
    (void)state;
    assert_int_equal(gm_account_env(envp, &o, &env, NULL), GM_OK);
    for (char **e = env; *e; e++) {
        if (!strncmp(*e, "LD_PRELOAD=", 11)) {
            /* after what was there: a sanitizer's runtime must stay first */
            assert_string_equal(*e, "LD_PRELOAD=/opt/libasan.so:/lib/libgpumem-account.so");
            seen |= 1;
        } else if (!strncmp(*e, "GPUMEM_ACCOUNT_DIR=", 19)) {
            assert_string_equal(*e, "GPUMEM_ACCOUNT_DIR=/tmp/acc");
            seen |= 2;
        } else if (!strcmp(*e, "GPUMEM_ACCOUNT_INTERVAL_MS=50")) {
            seen |= 4;
        } else if (!strcmp(*e, "GPUMEM_ACCOUNT_STACKS=4")) {
            seen |= 8;
        } else {
            assert_true(!strcmp(*e, "PATH=/bin") || !strcmp(*e, "HOME=/h"));
            seen |= 16;
        }
    }
    assert_int_equal(seen, 31);
    gm_free(env);
}

static void test_allocation_failures(void **state)
{
    const char *src = getenv("GM_SOURCE_DIR");
    char path[4096];
    (void)state;
    assert_non_null(src);
    snprintf(path, sizeof(path), "%s/docs/examples/account/fake-job.account.jsonl", src);
    for (long k = 0;; k++) {
        struct gm_account *a = NULL;
        enum gm_status st;
        gm_alloc_fail_after(k);
        st = gm_account_new(&a, NULL);
        if (st == GM_OK)
            st = gm_account_add_file(a, path, NULL);
        gm_alloc_fail_after(-1);
        gm_account_free(a);
        if (st == GM_OK)
            break;
        assert_true(st == GM_ERR_NOMEM || st == GM_ERR_LIMIT);
        assert_true(k < 100000);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify_table),
        cmocka_unit_test(test_equation_exact),
        cmocka_unit_test(test_terms_above_the_reading),
        cmocka_unit_test(test_other_objects_named_up_to_a_limit),
        cmocka_unit_test(test_peak_is_the_highest_consistent_reading),
        cmocka_unit_test(test_cut_and_bad_lines),
        cmocka_unit_test(test_environment_of_the_command),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
