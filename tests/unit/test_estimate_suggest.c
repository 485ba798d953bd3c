/* SPDX-License-Identifier: MIT */
/* test_estimate_suggest.c - the suggestion engine and the report: for the jobs users
 * bring (vLLM serving a 70B model at TP 1 and 2 on H100s, a full fine-tune of Llama-3-8B
 * on H100s), a change that fits is found; every suggested change is real settings that,
 * applied again, give the figure shown; fitting changes come first, cheapest first; when
 * nothing can fit, the answer says so; the JSON document carries the verdict. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "estimate/estimate_int.h"
#include "gpumem/estimate.h"
#include "gpumem/units.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct gm_estimate *base, *again;
static struct gm_est_suggestions sugg;

static void set(struct gm_job *j, const char *name, const char *value)
{
    struct gm_error err;
    if (gm_job_set(j, name, value, &err) != GM_OK)
        fail_msg("--%s %s: %s", name, value ? value : "", err.msg);
}

static void vllm_70b(struct gm_job *j, const char *tp)
{
    gm_job_init(j);
    j->model.model = gm_model_catalog_find("llama-3.1-70b");
    set(j, "infer", NULL);
    set(j, "engine", "vllm");
    set(j, "tp", tp);
    set(j, "gpu", "H100");
    set(j, "gpu-memory-utilization", "0.95");
}

static void finetune_8b(struct gm_job *j, const char *gpus, const char *batch)
{
    gm_job_init(j);
    j->model.model = gm_model_catalog_find("llama-3-8b");
    set(j, "train", NULL);
    set(j, "batch", batch);
    set(j, "gpu", "H100");
    if (gpus)
        set(j, "gpus", gpus);
}

static void suggest(const struct gm_job *j)
{
    struct gm_error err;
    assert_int_equal(gm_estimate_run(j, &base, &err), GM_OK);
    assert_false(base->fit.fits);
    gm_est_suggestions_release(&sugg);
    assert_int_equal(gm_estimate_suggest(j, base, &sugg, &err), GM_OK);
}

/* The suggestion whose change starts with 'prefix', or NULL. */
static const struct gm_est_suggestion *with(const char *prefix)
{
    for (size_t i = 0; i < sugg.n; i++)
        if (!strncmp(sugg.items[i].change, prefix, strlen(prefix)))
            return &sugg.items[i];
    return NULL;
}

/* Apply a change as a user would type it ("--tp 4 --gpus 4") and run the job again. */
static void replay(const struct gm_job *job, const struct gm_est_suggestion *s)
{
    char buf[160], *save = NULL, *tok;
    struct gm_job j = *job;
    struct gm_error err;
    snprintf(buf, sizeof buf, "%s", s->change);
    for (tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        const struct gm_job_setting *st;
        assert_true(tok[0] == '-' && tok[1] == '-');
        st = gm_job_setting_find(tok + 2);
        assert_non_null(st);
        if (!strcmp(tok + 2, "qlora"))
            j.memory.adapter = GM_ADAPTER_NONE; /* replaces --lora */
        if (!strcmp(tok + 2, "gpu"))
            j.gpu.memory_bytes = 0;
        if (st->type == GM_JOB_FLAG) {
            set(&j, tok + 2, NULL);
        } else {
            char *v = strtok_r(NULL, " ", &save);
            assert_non_null(v);
            set(&j, tok + 2, v);
        }
    }
    assert_int_equal(gm_estimate_run(&j, &again, &err), GM_OK);
    assert_int_equal(again->fit.fits, s->fits);
    assert_int_equal(again->fit.device_bytes, s->device_bytes);
    assert_int_equal(again->fit.reason, s->reason);
    assert_int_equal(again->fit.paged_bytes, s->paged_bytes);
}

/* Fitting changes first, those on the GPUs given before more hardware; each one replays. */
static void check_order_and_replay(const struct gm_job *j)
{
    for (size_t i = 0; i < sugg.n; i++) {
        if (i && sugg.items[i].fits && sugg.items[i - 1].fits &&
            sugg.items[i - 1].cost == GM_COST_HARDWARE)
            assert_int_equal(sugg.items[i].cost, GM_COST_HARDWARE);
        if (i && sugg.items[i].fits && !sugg.items[i].combined)
            assert_true(sugg.items[i - 1].fits);
        assert_non_null(sugg.items[i].trade);
        replay(j, &sugg.items[i]);
    }
}

static void test_vllm_70b_tp2(void **state)
{
    struct gm_job j;
    const struct gm_est_suggestion *s;
    char want[48];
    (void)state;
    vllm_70b(&j, "2");
    suggest(&j);
    assert_int_equal(base->fit.reason, GM_FIT_ENGINE_NO_START);
    /* current vLLM (0.21+): the start-up NCCL buffers sit outside the budget (baseline after
     * init_worker_distributed_environment), the communicator the profile run creates (420
     * MiB, 2688 tokens of this model at tp 2) and the CUDA graphs (51 sizes x 81 pieces and
     * 51 full decode graphs of 81 layers and 16422 all-reduces captured in them, about 2.0
     * GiB; the budget pays vLLM's own estimate of them, one full graph and its 161 NCCL
     * all-reduces less: test_vllm_graph_estimate_charged) inside it, and the model runner V2's
     * profile samples 1024 sequences on an H100 without top-k/top-p (0.73 GiB of 16-bit and fp32
     * logits) beside PyTorch's 32 MiB cuBLAS workspace of an H100: at 0.95 of the 79.18 GiB CUDA
     * reports 2408 blocks are left (with 0.11's 143 MiB of kernels, and the weights as the load
     * allocates them, the 32 MiB rotary cache in: est_vllm_load_allocated) */
    assert_int_equal(base->serving.kv_tokens, 38528);
    /* the largest max_model_len vLLM starts with */
    snprintf(want, sizeof want, "--max-model-len %llu",
             (unsigned long long)base->serving.kv_tokens);
    s = with(want);
    assert_non_null(s);
    assert_true(s->fits);
    /* the smallest change on the GPUs given comes first, more GPUs after */
    assert_ptr_equal(s, &sugg.items[0]);
    s = with("--tp 4 --gpus 4");
    assert_non_null(s);
    assert_true(s->fits);
    assert_int_equal(s->cost, GM_COST_HARDWARE);
    assert_false(sugg.none_fits);
    check_order_and_replay(&j);
}

static void test_vllm_70b_tp1(void **state)
{
    struct gm_job j;
    const struct gm_est_suggestion *s;
    (void)state;
    vllm_70b(&j, "1");
    suggest(&j);
    assert_int_equal(base->fit.reason, GM_FIT_DEVICE_OVER);
    s = with("--tp 4 --gpus 4");
    assert_non_null(s);
    assert_true(s->fits);
    check_order_and_replay(&j);
}

/* No change needs what the GPU lacks: bf16 from sm 8.0, FP8 from sm 8.9.  On a T4 a training
 * job defaults to fp16 autocast and says why; the same serving job is offered FP8 on an H100
 * but not on a V100. */
static void test_suggestions_follow_the_gpu(void **state)
{
    struct gm_job j;
    bool said = false;
    (void)state;
    gm_job_init(&j);
    j.model.model = gm_model_catalog_find("llama-3-8b");
    set(&j, "train", NULL);
    set(&j, "gpu", "T4");
    suggest(&j);
    assert_int_equal(j.numerics.precision, GM_PREC_BF16_MIXED); /* the job as given */
    for (size_t i = 0; i < base->n_assumptions; i++)
        said |= strstr(base->assumptions[i], "fp16-mixed by default: the T4 (sm 7.5)") != NULL;
    assert_true(said);
    assert_true(sugg.n > 0);
    for (size_t i = 0; i < sugg.n; i++) {
        assert_null(strstr(sugg.items[i].change, "bf16"));
        assert_null(strstr(sugg.items[i].change, "fp8"));
    }
    vllm_70b(&j, "2");
    suggest(&j);
    assert_non_null(with("--quant fp8"));
    set(&j, "gpu", "V100-32GB");
    suggest(&j);
    assert_true(sugg.n > 0);
    for (size_t i = 0; i < sugg.n; i++)
        assert_null(strstr(sugg.items[i].change, "fp8"));
}

/* Full fine-tune over 8 GPUs: adapters and sharding are both offered. */
static void test_finetune_gpus(void **state)
{
    static const char *const wanted[] = {"--lora", "--qlora", "--zero 3", "--fsdp"};
    struct gm_job j;
    (void)state;
    finetune_8b(&j, "8", "1");
    suggest(&j);
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        const struct gm_est_suggestion *s = with(wanted[i]);
        if (!s)
            fail_msg("no %s suggestion", wanted[i]);
        assert_true(s->fits);
    }
    check_order_and_replay(&j);
    /* at batch 6 no cheap change fits alone: the cheap ones together on the same 8 GPUs come
     * first (gradient accumulation and sharding the optimizer state), before adapters */
    finetune_8b(&j, "8", "6");
    suggest(&j);
    assert_true(sugg.n >= 2);
    assert_true(sugg.items[0].combined);
    assert_true(sugg.items[0].fits);
    assert_non_null(strstr(sugg.items[0].change, "--grad-accum"));
    assert_null(strstr(sugg.items[0].change, "--gpus"));
    assert_null(with("--lora"));
    check_order_and_replay(&j);
}

/* A ZeRO-1 job given DeepSpeed's own bucket settings: the FSDP suggestion takes them back with
 * --zero (FSDP refuses them), so it is still offered, fits, and is the job it says. */
static void test_fsdp_replaces_deepspeed_settings(void **state)
{
    struct gm_job j;
    const struct gm_est_suggestion *s;
    (void)state;
    finetune_8b(&j, "8", "1");
    set(&j, "gpu", "A100-40GB");
    set(&j, "zero", "1");
    set(&j, "bucket-elements", "200000000");
    set(&j, "zero-overlap-comm", NULL);
    suggest(&j);
    s = with("--fsdp");
    if (!s)
        fail_msg("no --fsdp suggestion for a ZeRO-1 job with bucket settings");
    assert_true(s->fits);
    assert_null(strstr(s->change, "--zero"));
    /* the job the suggestion stands for: the same one with --fsdp in place of the ZeRO
     * settings, as the user would type it */
    finetune_8b(&j, "8", "1");
    set(&j, "gpu", "A100-40GB");
    replay(&j, s);
}

/* One GPU: no sharding over data-parallel ranks, but adapters and offload. */
static void test_finetune_one_gpu(void **state)
{
    struct gm_job j;
    (void)state;
    finetune_8b(&j, NULL, "1");
    suggest(&j);
    assert_null(with("--zero 1"));
    assert_null(with("--fsdp"));
    assert_non_null(with("--lora"));
    assert_non_null(with("--qlora"));
    assert_non_null(with("--zero 2 --offload-optimizer"));
    /* pure bf16 says that it changes the numerics */
    if (with("--precision bf16"))
        assert_non_null(strstr(with("--precision bf16")->trade, "numerics change"));
    /* a paged optimizer fits by the state it leaves in host memory: the suggestion carries
     * how much (what is beyond the GPU), which the output shows */
    if (with("--paged-optimizer")) {
        const struct gm_est_suggestion *p = with("--paged-optimizer");
        assert_int_equal(p->reason, GM_FIT_FITS_PAGED);
        assert_int_equal(p->paged_bytes, p->device_bytes - base->fit.capacity_bytes);
    }
    check_order_and_replay(&j);
}

/* Whether any suggestion's change holds 'text'. */
static bool named(const char *text)
{
    for (size_t i = 0; i < sugg.n; i++)
        if (strstr(sugg.items[i].change, text))
            return true;
    return false;
}

static void make_job(struct gm_job *j, const char *model, const char *settings)
{
    char buf[256], *save = NULL;
    gm_job_init(j);
    j->model.model = gm_model_catalog_find(model);
    assert_non_null(j->model.model);
    snprintf(buf, sizeof buf, "%s", settings);
    for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        const struct gm_job_setting *s = gm_job_setting_find(tok + 2);
        assert_non_null(s);
        set(j, tok + 2, s->type == GM_JOB_FLAG ? NULL : strtok_r(NULL, " ", &save));
    }
}

/* Never what the model, the GPU or the stack cannot do. */
static void test_never_impossible(void **state)
{
    struct gm_job j;
    (void)state;
    /* T5: Liger-Kernel does not patch it; the HF stack has no op-level checkpointing, no
     * optimizer-in-backward, no chunked loss; a T4 computes neither bf16 nor FP8 */
    make_job(&j, "t5-large", "--train --gpu T4");
    suggest(&j);
    assert_false(named("--fused-kernels") || named("--loss"));
    assert_false(named("--grad-checkpointing op") || named("--optimizer-in-backward") ||
                 named("--activation-offload"));
    assert_false(named("--precision bf16"));
    assert_true(named("--grad-checkpointing full"));
    make_job(&j, "llama-3.1-8b", "--infer --engine vllm --gpu T4 --context 8192 --batch 4");
    suggest(&j);
    assert_false(named("fp8"));
    /* an A100 runs bf16 but not FP8 */
    make_job(&j, "llama-3.1-70b", "--infer --engine vllm --tp 2 --gpu A100-80GB");
    suggest(&j);
    assert_false(named("fp8"));
    make_job(&j, "llama-3.1-70b", "--infer --engine vllm --tp 2 --gpu H100");
    suggest(&j);
    assert_true(named("--quant fp8"));
    /* the stack decides: op-level checkpointing under torchtitan, ZeRO never there */
    make_job(&j, "llama-3.1-8b", "--train --gpu H100 --batch 4 --stack torchtitan --gpus 8");
    suggest(&j);
    assert_false(named("--zero") || named("--offload") || named("--lora"));
    make_job(&j, "llama-3.1-8b", "--train --gpu RTX-4090 --lora --stack torchtitan");
    assert_int_equal(gm_job_check(&j, NULL), GM_OK);
}

/* Recomputation before sharding with offloads: LoRA on an RTX 4090. */
static void test_cheapest_first(void **state)
{
    struct gm_job j;
    size_t ckpt = SIZE_MAX, zero3 = SIZE_MAX;
    (void)state;
    make_job(&j, "llama-3.1-8b", "--train --lora --gpu RTX-4090");
    suggest(&j);
    for (size_t i = 0; i < sugg.n; i++) {
        if (!strcmp(sugg.items[i].change, "--grad-checkpointing full"))
            ckpt = i;
        if (!strncmp(sugg.items[i].change, "--zero 3", 8))
            zero3 = i;
    }
    assert_int_equal(ckpt, 0);
    assert_true(zero3 != SIZE_MAX && zero3 > ckpt);
    /* two copies of a 70B on two GPUs: one copy over both with a max_model_len that starts,
     * before more GPUs */
    make_job(
        &j, "llama-3.1-70b",
        "--infer --engine vllm --gpus 2 --replicas 2 --gpu H100 --gpu-memory-utilization 0.95");
    suggest(&j);
    assert_true(sugg.items[0].combined && sugg.items[0].fits);
    assert_non_null(strstr(sugg.items[0].change, "--tp 2 --replicas 1 --max-model-len"));
    check_order_and_replay(&j);
}

/* Changes that save more together than alone: an 8B trained on one H100 with torchtitan's
 * preset (batch 4) saves little by --batch 1 --grad-accum 4 alone (accumulation keeps fp32
 * gradients through the step) and falls just short with pure bf16 alone, so the sum of what
 * each saves alone is less than the distance to fitting; together they fit (pure bf16 halves
 * the gradients accumulation keeps), and the combination is still found. */
static void test_combination_beyond_the_sum(void **state)
{
    struct gm_job j;
    struct gm_error err;
    uint64_t short_bf16, short_accum, saved_bf16, saved_accum;
    (void)state;
    make_job(&j, "llama-3.1-8b",
             "--train --gpu H100 --batch 4 --stack torchtitan --precision bf16");
    assert_int_equal(gm_estimate_run(&j, &again, &err), GM_OK);
    assert_false(again->fit.fits);
    short_bf16 = again->fit.shortfall_bytes;
    make_job(&j, "llama-3.1-8b", "--train --gpu H100 --batch 1 --grad-accum 4 --stack torchtitan");
    assert_int_equal(gm_estimate_run(&j, &again, &err), GM_OK);
    assert_false(again->fit.fits);
    short_accum = again->fit.shortfall_bytes;
    make_job(&j, "llama-3.1-8b", "--train --gpu H100 --batch 4 --stack torchtitan");
    suggest(&j);
    /* the precondition: what each change saves alone sums to less than the shortfall, so
     * only the search beyond the sum of savings finds the combination */
    assert_true(short_bf16 < base->fit.shortfall_bytes);
    assert_true(short_accum < base->fit.shortfall_bytes);
    saved_bf16 = base->fit.shortfall_bytes - short_bf16;
    saved_accum = base->fit.shortfall_bytes - short_accum;
    assert_true(saved_bf16 + saved_accum < base->fit.shortfall_bytes);
    assert_true(sugg.items[0].combined && sugg.items[0].fits);
    assert_non_null(strstr(sugg.items[0].change, "--grad-accum 4"));
    assert_non_null(strstr(sugg.items[0].change, "--precision bf16"));
    check_order_and_replay(&j);
}

/* A catalog GPU with the total a log shows (--gpu H100 --gpu-memory 60, either order): the
 * job runs on the H100's compute capability and SMs at 60 GiB, and the larger GPU suggested
 * runs at its own catalog total, not the 60 GiB given, and is not the H100 again. */
static void test_larger_gpu_at_its_own_total(void **state)
{
    struct gm_job j, k;
    const struct gm_est_suggestion *s;
    const struct gm_gpu *h100, *g;
    struct gm_error err;
    uint64_t device = 0;
    (void)state;
    assert_int_equal(gm_gpu_lookup("H100", &h100, &err), GM_OK);
    for (int order = 0; order < 2; order++) {
        gm_job_init(&j);
        j.model.model = gm_model_catalog_find("llama-3.1-70b");
        set(&j, "infer", NULL);
        set(&j, "engine", "vllm");
        set(&j, "quant", "fp8");
        set(&j, "max-model-len", "4096");
        set(&j, order ? "gpu-memory" : "gpu", order ? "60" : "H100");
        set(&j, order ? "gpu" : "gpu-memory", order ? "H100" : "60");
        assert_int_equal(j.gpu.memory_bytes, 60 * GM_GIB);
        assert_int_equal(j.gpu.sm, h100->sm);
        assert_int_equal(j.gpu.sms, h100->sms);
        suggest(&j);
        if (order)
            assert_int_equal(base->device_bytes, device);
        device = base->device_bytes;
        s = with("--gpu ");
        assert_non_null(s);
        assert_non_null(strstr(s->trade, "without --gpu-memory"));
        g = gm_gpu_find(s->change + strlen("--gpu "));
        assert_non_null(g);
        assert_true(g != h100 && g->memory_bytes > h100->memory_bytes);
        /* the same job typed with only --gpu NAME gives the suggestion's figure */
        gm_job_init(&k);
        k.model.model = j.model.model;
        set(&k, "infer", NULL);
        set(&k, "engine", "vllm");
        set(&k, "quant", "fp8");
        set(&k, "max-model-len", "4096");
        set(&k, "gpu", g->name);
        assert_int_equal(k.gpu.memory_bytes, g->memory_bytes);
        assert_int_equal(gm_estimate_run(&k, &again, &err), GM_OK);
        assert_int_equal(again->fit.fits, s->fits);
        assert_int_equal(again->fit.device_bytes, s->device_bytes);
    }
}

/* 405B on a 12 GiB card: no change, combination or catalog GPU makes it fit. */
static void test_nothing_fits(void **state)
{
    struct gm_job j;
    (void)state;
    gm_job_init(&j);
    j.model.model = gm_model_catalog_find("llama-3.1-405b");
    set(&j, "infer", NULL);
    set(&j, "engine", "vllm");
    set(&j, "gpu", "RTX-3060");
    suggest(&j);
    assert_true(sugg.none_fits);
    for (size_t i = 0; i < sugg.n; i++)
        assert_false(sugg.items[i].fits);
}

/* The search runs a change's figures (a replay without the limit) only where it reads them:
 * a change that does not fit is shown only when none fits, and counts only where the
 * combination may take it.  The answer is the one of the search that runs every change's
 * figures, item by item; and for a 70B full fine-tune on one H100 (some changes fit, host
 * memory and adapters are not combined) it runs fewer replays without a limit. */
static void assert_same_suggestions(const struct gm_est_suggestions *a,
                                    const struct gm_est_suggestions *b)
{
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->none_fits, b->none_fits);
    for (size_t i = 0; i < a->n; i++) {
        const struct gm_est_suggestion *x = &a->items[i], *y = &b->items[i];
        assert_string_equal(x->change, y->change);
        assert_ptr_equal(x->trade, y->trade);
        assert_int_equal(x->cost, y->cost);
        assert_int_equal(x->device_bytes, y->device_bytes);
        assert_int_equal(x->fits, y->fits);
        assert_int_equal(x->reason, y->reason);
        assert_int_equal(x->paged_bytes, y->paged_bytes);
        assert_int_equal(x->combined, y->combined);
    }
}

/* est_suggest() with every change's figures and with those read: the same answer; the
 * replays without a limit each ran, in *all and *read. */
static void suggest_both_ways(const struct gm_job *j, uint64_t *all, uint64_t *read)
{
    struct est_sugg_probe probe = {.settle_all = true};
    struct gm_est_suggestions every = {0};
    struct gm_error err;
    assert_int_equal(gm_estimate_run(j, &base, &err), GM_OK);
    assert_false(base->fit.fits);
    assert_int_equal(est_suggest(j, base, &probe, &every, &err), GM_OK);
    *all = probe.free_runs;
    probe.settle_all = false;
    gm_est_suggestions_release(&sugg);
    assert_int_equal(est_suggest(j, base, &probe, &sugg, &err), GM_OK);
    *read = probe.free_runs;
    assert_same_suggestions(&every, &sugg);
    assert_true(*read <= *all);
    gm_est_suggestions_release(&every);
}

static void test_figures_only_where_read(void **state)
{
    struct gm_job j;
    uint64_t all, read;
    (void)state;
    gm_job_init(&j);
    j.model.model = gm_model_catalog_find("llama-3.1-70b");
    set(&j, "train", NULL);
    set(&j, "gpu", "H100");
    suggest_both_ways(&j, &all, &read);
    assert_false(sugg.none_fits);
    assert_true(read < all);
    /* nothing fits: every change is shown, every change's figures run */
    gm_job_init(&j);
    j.model.model = gm_model_catalog_find("llama-3.1-405b");
    set(&j, "infer", NULL);
    set(&j, "engine", "vllm");
    set(&j, "gpu", "RTX-3060");
    suggest_both_ways(&j, &all, &read);
    assert_true(sugg.none_fits);
    finetune_8b(&j, NULL, "8");
    set(&j, "gpu", "A100-40GB");
    suggest_both_ways(&j, &all, &read);
    /* the paths where a verdict first differs from the figures: expandable segments (the
     * verdict is the figures' own run), a paged optimizer (the verdict's lower bound judges
     * "fits paged"), two pipeline stages (a group per stage) */
    finetune_8b(&j, NULL, "8");
    set(&j, "gpu", "A100-40GB");
    set(&j, "alloc-conf", "expandable_segments:True");
    suggest_both_ways(&j, &all, &read);
    finetune_8b(&j, NULL, "8");
    set(&j, "gpu", "A100-40GB");
    set(&j, "paged-optimizer", NULL);
    suggest_both_ways(&j, &all, &read);
    finetune_8b(&j, "2", "8");
    set(&j, "gpu", "A100-40GB");
    set(&j, "pp", "2");
    suggest_both_ways(&j, &all, &read);
    /* only the combination fits (no change alone does): the answer is the changes together */
    finetune_8b(&j, NULL, "16");
    suggest_both_ways(&j, &all, &read);
    assert_true(sugg.n > 0);
    assert_true(sugg.items[0].combined);
    assert_true(sugg.items[0].fits);
    for (size_t i = 1; i < sugg.n; i++)
        assert_false(sugg.items[i].fits && !sugg.items[i].combined &&
                     sugg.items[i].cost != GM_COST_HARDWARE);
}

/* The report's JSON, parsed (the caller frees it with json_decref). */
static json_t *report_doc(const struct gm_estimate_report *r)
{
    struct gm_error err;
    char *buf = NULL;
    size_t len = 0;
    json_error_t jerr;
    json_t *doc;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    assert_int_equal(gm_estimate_report_json(f, r, &err), GM_OK);
    fclose(f);
    doc = json_loadb(buf, len, 0, &jerr);
    assert_non_null(doc);
    free(buf);
    return doc;
}

/* The JSON inputs of a training job echo --trl-version beside the other stack versions
 * (it changes a QLoRA model's frozen-base and adapter bytes): "0.13.0" when given, null
 * when not (no TRL: nothing of it is applied). */
static void test_report_json_trl_version(void **state)
{
    static const uint32_t given[] = {GM_VERSION(0, 13, 0), 0};
    (void)state;
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++) {
        struct gm_job j;
        struct gm_estimate_report *r = NULL;
        struct gm_error err;
        json_t *doc, *v;
        gm_job_init(&j);
        j.mode = GM_EST_TRAIN;
        j.model.model = gm_model_catalog_find("llama-3-8b");
        j.stack.trl = given[i];
        assert_int_equal(gm_estimate_report_run(&j, &r, &err), GM_OK);
        doc = report_doc(r);
        v = json_object_get(json_object_get(doc, "inputs"), "trl_version");
        assert_non_null(v);
        if (given[i])
            assert_string_equal(json_string_value(v), "0.13.0");
        else
            assert_true(json_is_null(v));
        json_decref(doc);
        gm_estimate_report_free(r);
    }
}

/* The report: with a GPU the verdict and suggestions, and the JSON that carries them. */
static void test_report_json(void **state)
{
    struct gm_job j;
    struct gm_estimate_report *r = NULL;
    struct gm_error err;
    json_t *doc, *fit;
    (void)state;
    vllm_70b(&j, "2");
    assert_int_equal(gm_estimate_report_run(&j, &r, &err), GM_OK);
    assert_false(r->est->fit.fits);
    assert_true(r->suggestions.n > 0);
    doc = report_doc(r);
    assert_string_equal(json_string_value(json_object_get(doc, "schema")), "gpumem.estimate/1");
    fit = json_object_get(doc, "fit");
    assert_true(json_is_false(json_object_get(fit, "fits")));
    assert_string_equal(json_string_value(json_object_get(fit, "reason")),
                        "engine_would_not_start");
    assert_int_equal(json_array_size(json_object_get(fit, "devices")), 1);
    assert_true(json_array_size(json_object_get(doc, "suggestions")) > 0);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(doc, "components"), 0), "kind")),
                        "weights");
    json_decref(doc);
    /* without a GPU: the catalog GPUs it fits on, smallest first */
    gm_job_init(&j);
    j.model.model = gm_model_catalog_find("llama-3-8b");
    gm_estimate_report_free(r);
    assert_int_equal(gm_estimate_report_run(&j, &r, &err), GM_OK);
    assert_true(r->n_fits_on > 0);
    for (size_t i = 1; i < r->n_fits_on; i++)
        assert_true(gm_gpu_catalog_get(r->fits_on[i])->memory_bytes >=
                    gm_gpu_catalog_get(r->fits_on[i - 1])->memory_bytes);
    assert_true(gm_gpu_catalog_get(r->fits_on[0])->memory_bytes >= r->est->device_bytes);
    /* --max-batch: the report shows the job at the value found */
    finetune_8b(&j, NULL, "1");
    set(&j, "qlora", NULL);
    set(&j, "max-batch", NULL);
    gm_estimate_report_free(r);
    assert_int_equal(gm_estimate_report_run(&j, &r, &err), GM_OK);
    assert_true(r->searched && r->search.value >= 1);
    assert_int_equal(r->job.workload.batch, r->search.value);
    assert_true(r->est->fit.fits);
    gm_estimate_report_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vllm_70b_tp2),
        cmocka_unit_test(test_vllm_70b_tp1),
        cmocka_unit_test(test_suggestions_follow_the_gpu),
        cmocka_unit_test(test_larger_gpu_at_its_own_total),
        cmocka_unit_test(test_finetune_gpus),
        cmocka_unit_test(test_fsdp_replaces_deepspeed_settings),
        cmocka_unit_test(test_finetune_one_gpu),
        cmocka_unit_test(test_nothing_fits),
        cmocka_unit_test(test_figures_only_where_read),
        cmocka_unit_test(test_report_json),
        cmocka_unit_test(test_never_impossible),
        cmocka_unit_test(test_report_json_trl_version),
        cmocka_unit_test(test_cheapest_first),
        cmocka_unit_test(test_combination_beyond_the_sum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
