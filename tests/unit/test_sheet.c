/* SPDX-License-Identifier: MIT */
/* test_sheet.c - gm_sheet: documents told apart by their schema, the three kinds of
 * knowledge kept in their sections, text escaped in HTML and in Markdown tables, the same
 * facts in both formats, and every allocation failing in turn.  The fixtures are gpumem's own
 * output (tests/data/sheet); the whole page is the golden test tests/cli/sheet_markdown. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumem/arena.h"
#include "gpumem/internal/alloc_hooks.h"
#include "gpumem/sheet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const fixtures[] = {"estimate.json", "series_oom.json", "sweep.json",
                                       "environment.json"};

static struct gm_sheet *load_fixtures(void)
{
    struct gm_sheet *sh = NULL;
    const char *src = getenv("GM_SOURCE_DIR");
    char path[4096];
    assert_non_null(src);
    assert_int_equal(gm_sheet_new(&sh, NULL), GM_OK);
    for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
        snprintf(path, sizeof(path), "%s/tests/data/sheet/%s", src, fixtures[i]);
        assert_int_equal(gm_sheet_add_file(sh, path, NULL), GM_OK);
    }
    return sh;
}

static char *render(const struct gm_sheet *sh, enum gm_sheet_format fmt)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    assert_non_null(f);
    assert_int_equal(gm_sheet_write(sh, fmt, f, NULL), GM_OK);
    fclose(f);
    return text;
}

/* Where 'needle' is in 'hay' (asserting it is there). */
static const char *at(const char *hay, const char *needle)
{
    const char *p = strstr(hay, needle);
    if (!p)
        fail_msg("'%s' is not in the sheet", needle);
    return p;
}

static void test_sections_keep_knowledge_apart(void **state)
{
    struct gm_sheet *sh = load_fixtures();
    char *md = render(sh, GM_SHEET_MARKDOWN);
    const char *computed, *observed, *assumed;
    (void)state;
    computed = at(md, "## Computed (gpumem estimate)");
    observed = at(md, "## Observed");
    assumed = at(md, "## Assumed (not checked yet)");
    assert_true(computed < observed && observed < assumed);
    /* the prediction is under Computed, the measurement under Observed */
    assert_true(at(md, "predicted peak allocated") > computed &&
                at(md, "predicted peak allocated") < observed);
    assert_true(at(md, "FAILED: out of memory (tried 512.00 MiB)") > observed);
    assert_true(at(md, "batch=48 fits, batch=49 fails") > observed);
    /* the estimate's assumptions under Assumed */
    assert_true(at(md, "0.25 x transient memory") > assumed);
    /* a sweep and a series were given: nothing says they are missing */
    assert_null(strstr(md, "nothing was measured on a GPU"));
    assert_null(strstr(md, "was not searched"));
    /* the four counters are labelled */
    at(md, "| allocated (end) | peak allocated | reserved (end) | peak reserved |");
    free(md);
    gm_sheet_free(sh);
}

static void test_html_says_the_same(void **state)
{
    struct gm_sheet *sh = load_fixtures();
    char *md = render(sh, GM_SHEET_MARKDOWN), *html = render(sh, GM_SHEET_HTML);
    const char *facts[] = {"Computed (gpumem estimate)",
                           "batch=48 fits, batch=49 fails",
                           "FAILED: out of memory (tried 512.00 MiB)",
                           "1.84 GiB (1976131072 B)",
                           "NVIDIA Fake RTX-4090",
                           "0.25 x transient memory",
                           "would fit with --batch 2 --grad-accum 4"};
    (void)state;
    assert_true(strncmp(html, "<!DOCTYPE html>", 15) == 0);
    at(html, "--accent"); /* the report's style sheet */
    assert_null(strstr(html, "<script"));
    for (size_t i = 0; i < sizeof(facts) / sizeof(facts[0]); i++) {
        at(md, facts[i]);
        at(html, facts[i]);
    }
    free(md);
    free(html);
    gm_sheet_free(sh);
}

/* The estimate as `gpumem estimate --json` writes it since the estimator's rebuild: the fit
 * verdict is its reason and sentence (vLLM serving whose devices have room but which would
 * not start does NOT fit, and no headroom is shown for it), the changes that would make it
 * fit come cheapest first, the components are summed by kind, what lives outside the
 * caching allocator is said, and without a GPU the catalog GPUs it fits on are listed. */
static void test_estimate_verdicts(void **state)
{
    static const char *const docs[] = {"estimate.json", "estimate_vllm.json",
                                       "estimate_weights.json"};
    struct gm_sheet *sh = NULL;
    const char *src = getenv("GM_SOURCE_DIR"), *vllm, *fit;
    char path[4096], *md;
    (void)state;
    assert_int_equal(gm_sheet_new(&sh, NULL), GM_OK);
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        snprintf(path, sizeof(path), "%s/tests/data/sheet/%s", src, docs[i]);
        assert_int_equal(gm_sheet_add_file(sh, path, NULL), GM_OK);
    }
    md = render(sh, GM_SHEET_MARKDOWN);
    at(md, "- fit on RTX-4090 (23.99 GiB): does NOT fit, short by 21.35 GiB (device_over)\n"
           "- would fit with --batch 2 --grad-accum 4: 18.56 GiB on the device (costs speed:");
    at(md, "activations 11.98 GiB, logits 11.59 GiB, backward_temp 6.96 GiB");
    at(md, "outside the caching allocator (in device used only): CUDA context and modules "
           "450.00 MiB, library workspaces 64.00 MiB");
    vllm = at(md, "estimate_vllm.json: Llama-3.1-70B");
    fit = at(vllm, "- fit on H100-80GB (79.65 GiB): does NOT fit, vLLM would refuse to start");
    assert_null(strstr(vllm, "headroom"));
    at(fit, "(engine_would_not_start)");
    at(vllm, "max concurrency 0.14 (would not start");
    at(fit, "would fit with --max-model-len 17984");
    at(md, "vLLM's non-torch memory 2.00 GiB");
    at(md, "- no GPU given; fits on T4, V100-16GB");
    free(md);
    gm_sheet_free(sh);
}

static void test_escaping(void **state)
{
    static const char doc[] =
        "{\"schema\": \"gpumem.measure/1\", \"source\": \"gpumem.torch\","
        " \"dimensions\": {\"model\": \"<b>x</b> | y\"},"
        " \"phases\": [{\"name\": \"a<script>\", \"ok\": false, \"error\": \"E: 1 | 2 & 3\"}]}";
    struct gm_sheet *sh = NULL;
    char *md, *html;
    (void)state;
    assert_int_equal(gm_sheet_new(&sh, NULL), GM_OK);
    assert_int_equal(gm_sheet_add(sh, "s.json", doc, strlen(doc), NULL), GM_OK);
    html = render(sh, GM_SHEET_HTML);
    md = render(sh, GM_SHEET_MARKDOWN);
    assert_null(strstr(html, "<script>"));
    assert_null(strstr(html, "<b>x"));
    at(html, "a&lt;script&gt;");
    at(html, "E: 1 | 2 &amp; 3");
    at(md, "| model | <b>x</b> \\| y |"); /* a '|' in a cell does not split the table */
    at(md, "FAILED: E: 1 \\| 2 & 3");
    free(md);
    free(html);
    gm_sheet_free(sh);
}

static void test_refusals(void **state)
{
    struct gm_sheet *sh = NULL;
    struct gm_error err;
    char *text = NULL;
    size_t len = 0;
    FILE *f;
    (void)state;
    assert_int_equal(gm_sheet_new(&sh, NULL), GM_OK);
    f = open_memstream(&text, &len);
    assert_int_equal(gm_sheet_write(sh, GM_SHEET_MARKDOWN, f, &err), GM_ERR_INVALID);
    fclose(f);
    free(text);
    assert_int_equal(gm_sheet_add(sh, "x", "{\"schema\": \"gpumem.watch/1\"}", 28, &err),
                     GM_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "gpumem.watch/1"));
    for (int i = 0; i < GM_SHEET_MAX_DOCS; i++)
        assert_int_equal(gm_sheet_add(sh, "e", "{\"schema\": \"gpumem.estimate/1\"}", 31, NULL),
                         GM_OK);
    assert_int_equal(gm_sheet_add(sh, "e", "{\"schema\": \"gpumem.estimate/1\"}", 31, &err),
                     GM_ERR_LIMIT);
    gm_sheet_free(sh);
}

static void test_allocation_failures(void **state)
{
    (void)state;
    for (long k = 0;; k++) {
        struct gm_sheet *sh = NULL;
        const char *src = getenv("GM_SOURCE_DIR");
        char path[4096];
        enum gm_status st;
        gm_alloc_fail_after(k);
        st = gm_sheet_new(&sh, NULL);
        for (size_t i = 0; st == GM_OK && i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
            snprintf(path, sizeof(path), "%s/tests/data/sheet/%s", src, fixtures[i]);
            st = gm_sheet_add_file(sh, path, NULL);
        }
        gm_alloc_fail_after(-1);
        gm_sheet_free(sh);
        if (st == GM_OK)
            break;
        assert_int_equal(st, GM_ERR_NOMEM);
        assert_true(k < 100000);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sections_keep_knowledge_apart),
        cmocka_unit_test(test_html_says_the_same),
        cmocka_unit_test(test_estimate_verdicts),
        cmocka_unit_test(test_escaping),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_allocation_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
