/* SPDX-License-Identifier: MIT */
/* test_analysis.c - unit tests of src/analysis: frame patterns of real PyTorch programs
 * (Linux and Windows paths, C++ autograd symbols), a hand-built training trace whose every
 * allocation has a known category, phase, iteration and leak, and the peaks read from the
 * analysis held against the peaks replayed from the trace. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* clang-format off: cmocka.h needs the headers above first */
#include <cmocka.h>
/* clang-format on */

#include "analysis/analysis_int.h"
#include "base/json_load.h"
#include "base/path.h"
#include "gpumem/analysis.h"
#include "gpumem/example.h"
#include "gpumem/internal/alloc_hooks.h"
#include "gpumem/lod.h"
#include "gpumem/pickle_write.h"
#include "gpumem/report.h"
#include "snapshot/snapshot_int.h"
#include "testdata.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static uint16_t flags_of(const char *file, const char *name, bool py)
{
    struct gm_snapshot_frame f = {file, name, 1, py, false, false, false, 0, 0};
    return ana_frame_flags(&f);
}

static void test_paths(void **state)
{
    (void)state;
    assert_true(gm_path_has("C:\\x\\lib\\site-packages\\torch\\nn\\modules\\module.py",
                            "/torch/nn/modules/module.py"));
    assert_true(gm_path_has("/a/torch/optim/adam.py", "/torch/optim/"));
    assert_false(gm_path_has("/a/torch_geometric/data.py", "/torch/"));
    assert_false(gm_path_has("", "/x"));
    assert_true(gm_path_has("abc", ""));
}

static void test_frame_flags(void **state)
{
    (void)state;
    const char *mod = "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py";
    const char *wmod = "C:\\r\\.venv\\lib\\site-packages\\torch\\nn\\modules\\module.py";
    assert_true(flags_of(mod, "_call_impl", true) & FR_MODULE_CALL);
    assert_true(flags_of(wmod, "_wrapped_call_impl", true) & FR_MODULE_CALL);
    assert_true(flags_of(mod, "convert", true) & FR_PARAM_LOAD);
    assert_true(flags_of(mod, "_apply", true) & FR_PARAM_LOAD);
    assert_false(flags_of(mod, "_apply", true) & FR_MODULE_CALL);
    assert_true(flags_of("/e/lib/python3.10/site-packages/torch/autograd/__init__.py",
                         "_make_grads", true) &
                FR_BACKWARD);
    assert_true(flags_of("/e/site-packages/torch/_tensor.py", "backward", true) & FR_BACKWARD);
    assert_false(flags_of("/e/site-packages/torch/_tensor.py", "wrapped", true) & FR_BACKWARD);
    assert_true(flags_of("??",
                         "torch::autograd::Engine::evaluate_function(std::shared_ptr<"
                         "torch::autograd::GraphTask>&, torch::autograd::Node*)",
                         false) &
                FR_BACKWARD);
    assert_true(flags_of("??",
                         "torch::autograd::generated::MmBackward0::apply(std::vector<"
                         "at::Tensor, std::allocator<at::Tensor> >&&)",
                         false) &
                FR_BACKWARD);
    /* dropping a graph in forward runs release_variables(): not backward */
    assert_false(
        flags_of("??", "torch::autograd::generated::PowBackward0::release_variables()", false) &
        FR_BACKWARD);
    assert_true(flags_of("/e/site-packages/torch/optim/adam.py", "_init_group", true) &
                FR_OPTIM_STEP);
    assert_true(flags_of("/e/site-packages/torch/optim/adamw.py", "_multi_tensor_adamw", true) &
                FR_OPTIM_STEP);
    uint16_t zg = flags_of("/e/site-packages/torch/optim/optimizer.py", "zero_grad", true);
    assert_true(zg & FR_ZERO_GRAD);
    assert_false(zg & FR_OPTIM_STEP);
    assert_false(flags_of("/e/site-packages/torch/optim/lr_scheduler.py", "step", true) &
                 FR_OPTIM_STEP);
    assert_true(flags_of("/e/site-packages/torch/utils/data/dataloader.py", "__next__", true) &
                FR_DATA);
    assert_true(flags_of("/e/site-packages/torch_geometric/data/data.py", "to", true) & FR_DATA);
    assert_true(flags_of("/e/site-packages/transformers/tokenization_utils_base.py", "to", true) &
                FR_DATA);
    assert_true(flags_of("/e/site-packages/transformers/trainer.py", "_prepare_input", true) &
                FR_DATA);
    assert_true(
        flags_of("/e/site-packages/accelerate/utils/operations.py", "send_to_device", true) &
        FR_DATA);
    assert_false(flags_of("/home/u/train.py", "send_to_device", true) & FR_DATA);
    assert_true(flags_of("/e/site-packages/deepspeed/ops/adam/fused_adam.py", "step", true) &
                FR_OPTIM_STEP);
    assert_true(flags_of("/home/u/proj/train.py", "main", true) & FR_USER);
    assert_true(flags_of("/tmp/ipykernel_1/123.py", "<module>", true) & FR_USER);
    assert_false(flags_of("/usr/lib/python3.10/threading.py", "run", true) & FR_USER);
    assert_false(flags_of("C:\\py\\cpython-3.10-windows\\lib\\copy.py", "deepcopy", true) &
                 FR_USER);
    assert_false(
        flags_of("/e/site-packages/transformers/models/opt/modeling_opt.py", "forward", true) &
        FR_USER);
    assert_true(flags_of("/e/site-packages/torch/nn/parallel/replicate.py", "replicate", true) &
                FR_PARAM_LOAD);
    assert_int_equal(ana_phase_of_flags(FR_MODULE_CALL | FR_BACKWARD), RAW_BACKWARD);
    assert_int_equal(ana_phase_of_flags(FR_MODULE_CALL | FR_USER), RAW_FORWARD);
    assert_int_equal(ana_phase_of_flags(FR_USER), RAW_UNKNOWN);
}

/* ---- a hand-built training trace ---- */

enum {
    F_APPLY,
    F_MAIN,
    F_CALL,
    F_FWD,
    F_AG_BWD,
    F_T_BWD,
    F_INIT,
    F_WRAP,
    F_MT,
    F_ZG,
    F_LEAK,
    N_FR
};
static const struct gm_snapshot_frame frames[N_FR] = {
    {"/e/site-packages/torch/nn/modules/module.py", "_apply", 930, true, false, false, false, 0, 0},
    {"/home/u/train.py", "main", 40, true, false, false, false, 0, 0},
    {"/e/site-packages/torch/nn/modules/module.py", "_call_impl", 1520, true, false, false, false,
     0, 0},
    {"/home/u/model.py", "forward", 12, true, false, false, false, 0, 0},
    {"/e/site-packages/torch/autograd/__init__.py", "backward", 251, true, false, false, false, 0,
     0},
    {"/e/site-packages/torch/_tensor.py", "backward", 522, true, false, false, false, 0, 0},
    {"/e/site-packages/torch/optim/adam.py", "_init_group", 111, true, false, false, false, 0, 0},
    {"/e/site-packages/torch/optim/optimizer.py", "wrapper", 385, true, false, false, false, 0, 0},
    {"/e/site-packages/torch/optim/adam.py", "_multi_tensor_adam", 579, true, false, false, false,
     0, 0},
    {"/e/site-packages/torch/optim/optimizer.py", "zero_grad", 820, true, false, false, false, 0,
     0},
    {"/home/u/train.py", "main", 99, true, false, false, false, 0, 0},
};
enum { S_EMPTY, S_PARAM, S_FWD, S_USER, S_BWD, S_INIT, S_TEMP, S_LEAK, S_ZG, N_ST };
static const uint32_t st_param[] = {F_APPLY, F_MAIN};
static const uint32_t st_fwd[] = {F_FWD, F_CALL, F_MAIN};
static const uint32_t st_user[] = {F_MAIN};
static const uint32_t st_bwd[] = {F_AG_BWD, F_T_BWD, F_MAIN};
static const uint32_t st_init[] = {F_INIT, F_WRAP, F_MAIN};
static const uint32_t st_temp[] = {F_MT, F_WRAP, F_MAIN};
static const uint32_t st_leak[] = {F_LEAK};
static const uint32_t st_zg[] = {F_ZG, F_MAIN};
static const struct gm_snapshot_stack stacks[N_ST] = {
    {NULL, 0},    {st_param, 2}, {st_fwd, 3},  {st_user, 1}, {st_bwd, 3},
    {st_init, 3}, {st_temp, 3},  {st_leak, 1}, {st_zg, 2},
};

struct trace {
    struct gm_snapshot_event ev[256];
    size_t n;
};

static void ev(struct trace *t, enum gm_snapshot_action a, uint64_t addr, uint64_t size,
               uint32_t stack)
{
    struct gm_snapshot_event *e = &t->ev[t->n++];
    memset(e, 0, sizeof(*e));
    e->action = (uint8_t)a;
    e->addr = addr;
    e->size = size;
    e->stack = stack;
    e->flags = GM_EVENT_HAS_ADDR | GM_EVENT_HAS_FRAMES;
}

static void alloc(struct trace *t, uint64_t addr, uint64_t size, uint32_t stack)
{
    ev(t, GM_ACTION_ALLOC, addr, size, stack);
}

static void release(struct trace *t, uint64_t addr, uint64_t size, uint32_t stack)
{
    ev(t, GM_ACTION_FREE_REQUESTED, addr, size, stack);
    ev(t, GM_ACTION_FREE_COMPLETED, addr, size, stack);
}

/* W param; per iteration: batch (input), A1 (activation), T (forward temp), loss, ones and
 * tmpgrad (backward temps), G (gradient), S1/S2 (state, first step), tmp (optimizer temp),
 * L (a 50-byte leak when 'leak'). */
static void build_trace(struct trace *t, bool leak)
{
    t->n = 0;
    alloc(t, 0x1000, 1000, S_PARAM);
    for (int it = 0; it < 4; it++) {
        if (it)
            release(t, 0x2000, 100, S_USER);
        alloc(t, 0x2000, 100, S_USER);
        alloc(t, 0x3000, 500, S_FWD);
        alloc(t, 0x3800, 300, S_FWD);
        release(t, 0x3800, 300, S_FWD);
        alloc(t, 0x3c00, 4, S_FWD);
        alloc(t, 0x4000, 4, S_BWD);
        alloc(t, 0x5000, 1000, S_EMPTY);
        alloc(t, 0x5800, 200, S_EMPTY);
        release(t, 0x5800, 200, S_EMPTY);
        release(t, 0x3000, 500, S_EMPTY);
        release(t, 0x4000, 4, S_BWD);
        if (it == 0) {
            alloc(t, 0x6000, 1000, S_INIT);
            alloc(t, 0x6800, 1000, S_INIT);
        }
        alloc(t, 0x7000, 1000, S_TEMP);
        release(t, 0x7000, 1000, S_TEMP);
        release(t, 0x5000, 1000, S_ZG);
        if (leak)
            alloc(t, 0x9000 + (uint64_t)it * 0x100, 50, S_LEAK);
        release(t, 0x3c00, 4, S_USER);
    }
}

static void make_snapshot(struct gm_snapshot *s, struct gm_snapshot_device *d, struct trace *t)
{
    memset(s, 0, sizeof(*s));
    memset(d, 0, sizeof(*d));
    d->index = 0;
    d->has_trace = true;
    d->events = t->ev;
    d->n_events = t->n;
    s->gen = GM_SNAPSHOT_GEN_G7;
    s->devices = d;
    s->n_devices = 1;
    s->n_events = t->n;
    s->frames = frames;
    s->n_frames = N_FR;
    s->stacks = stacks;
    s->n_stacks = N_ST;
}

static const struct gm_analysis_alloc *find(const struct gm_analysis_device *dev, uint64_t addr,
                                            int32_t iteration)
{
    for (size_t i = 0; i < dev->n_allocs; i++)
        if (dev->allocs[i].addr == addr &&
            (iteration < -1 ||
             gm_analysis_iteration_at(dev, dev->allocs[i].alloc_event) == iteration))
            return &dev->allocs[i];
    return NULL;
}

/* The training trace (with its leak) built into 't', 's' and 'd', and its whole analysis. */
static struct gm_analysis *analyse_training_trace(struct trace *t, struct gm_snapshot *s,
                                                  struct gm_snapshot_device *d)
{
    struct gm_analysis *an = NULL;
    struct gm_error err;
    build_trace(t, true);
    make_snapshot(s, d, t);
    if (gm_analysis_run(s, NULL, &an, &err) != GM_OK)
        fail_msg("the training trace: %s", err.msg);
    return an;
}

/* Phase and iteration of an event both answer "none" outside the trace: before the first
 * event, at the event count and beyond (the last iteration ends at the last event). */
static void test_event_lookups_bounded_by_the_trace(void **state)
{
    (void)state;
    static struct trace t;
    struct gm_snapshot s;
    struct gm_snapshot_device d;
    struct gm_analysis *an = analyse_training_trace(&t, &s, &d);
    const struct gm_analysis_device *dev = &an->devices[0];
    int64_t n = (int64_t)dev->n_events;
    assert_true(dev->n_iterations > 0);
    assert_int_equal(dev->iterations[dev->n_iterations - 1].last_event, n - 1);
    assert_int_equal(gm_analysis_iteration_at(dev, n - 1), (int32_t)dev->n_iterations - 1);
    assert_int_equal(gm_analysis_iteration_at(dev, n), -1);
    assert_int_equal(gm_analysis_iteration_at(dev, n + 1000), -1);
    assert_int_equal(gm_analysis_iteration_at(dev, -1), -1);
    assert_int_equal(gm_analysis_phase_at(dev, n), GM_PHASE_OTHER);
    assert_int_equal(gm_analysis_phase_at(dev, -1), GM_PHASE_OTHER);
    gm_analysis_free(an);
}

static void test_training_trace(void **state)
{
    (void)state;
    static struct trace t;
    struct gm_snapshot s;
    struct gm_snapshot_device d;
    struct gm_error err;
    struct gm_analysis *an = analyse_training_trace(&t, &s, &d);
    const struct gm_analysis_device *dev = &an->devices[0];
    assert_int_equal(dev->n_iterations, 4);
    struct {
        uint64_t addr;
        enum gm_category cat;
        enum gm_rule rule;
    } want[] = {
        {0x1000, GM_CATEGORY_PARAMETER, GM_RULE_PARAM_FRAMES},
        {0x3000, GM_CATEGORY_ACTIVATION, GM_RULE_ACT_SAVED},
        {0x3800, GM_CATEGORY_OTHER, GM_RULE_TEMP_FORWARD},
        {0x3c00, GM_CATEGORY_ACTIVATION, GM_RULE_ACT_HELD},
        {0x4000, GM_CATEGORY_OTHER, GM_RULE_TEMP_BACKWARD},
        {0x5000, GM_CATEGORY_GRADIENT, GM_RULE_GRAD},
        {0x5800, GM_CATEGORY_OTHER, GM_RULE_TEMP_BACKWARD},
        {0x6000, GM_CATEGORY_OPTIMIZER_STATE, GM_RULE_OPT_STATE},
        {0x7000, GM_CATEGORY_OPTIMIZER_TEMP, GM_RULE_OPT_TEMP},
        {0x9000, GM_CATEGORY_OTHER, GM_RULE_USER},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const struct gm_analysis_alloc *a = find(dev, want[i].addr, -2);
        assert_non_null(a);
        assert_int_equal(a->category, want[i].cat);
        assert_int_equal(a->rule, want[i].rule);
    }
    /* batches: the last is alive at the end, all are inputs */
    for (int it = 0; it < 4; it++) {
        const struct gm_analysis_alloc *a = find(dev, 0x2000, it - 1);
        assert_non_null(a);
        assert_int_equal(a->category, GM_CATEGORY_INPUT);
    }
    /* phases of a few events: the engine's empty stacks are backward */
    const struct gm_analysis_alloc *g = find(dev, 0x5000, 0);
    assert_non_null(g);
    assert_int_equal(gm_analysis_phase_at(dev, g->alloc_event), GM_PHASE_BACKWARD);
    assert_int_equal(gm_analysis_phase_at(dev, find(dev, 0x7000, 0)->alloc_event),
                     GM_PHASE_OPTIMIZER_STEP);
    assert_int_equal(gm_analysis_phase_at(dev, find(dev, 0x3000, 0)->alloc_event),
                     GM_PHASE_FORWARD);
    /* the peak: last step, with three 50-byte leaks alive */
    assert_int_equal(dev->peak_bytes, 1000 + 100 + 4 + 1000 + 2000 + 1000 + 150);
    assert_int_equal(dev->peak_phase, GM_PHASE_OPTIMIZER_STEP);
    assert_int_equal(dev->peak_iteration, 3);
    assert_int_equal(dev->at_peak[GM_CATEGORY_PARAMETER], 1000);
    assert_int_equal(dev->at_peak[GM_CATEGORY_INPUT], 100);
    assert_int_equal(dev->at_peak[GM_CATEGORY_ACTIVATION], 4);
    assert_int_equal(dev->at_peak[GM_CATEGORY_GRADIENT], 1000);
    assert_int_equal(dev->at_peak[GM_CATEGORY_OPTIMIZER_STATE], 2000);
    assert_int_equal(dev->at_peak[GM_CATEGORY_OPTIMIZER_TEMP], 1000);
    assert_int_equal(dev->at_peak[GM_CATEGORY_OTHER], 150);
    assert_int_equal(dev->at_peak_unexplained, 0);
    /* the leak */
    assert_int_equal(dev->n_leaks, 1);
    assert_int_equal(dev->leaks[0].bytes_per_iteration, 50);
    assert_int_equal(dev->leaks[0].total_bytes, 200);
    assert_int_equal(dev->leaks[0].count, 4);
    assert_int_equal(dev->leaks[0].stack, S_LEAK);
    assert_int_equal(dev->leaks[0].kind, GM_LEAK_USER_TENSOR);
    /* iterations: memory left at the end grows by the leak */
    assert_int_equal(dev->iterations[1].end_bytes - dev->iterations[0].end_bytes, 50);
    assert_int_equal(dev->iterations[0].start_bytes, 1000 + 100);
    /* the series keeps the peak and ends with the final state */
    uint64_t best = 0;
    for (size_t i = 0; i < dev->n_points; i++)
        if (dev->points[i].total > best)
            best = dev->points[i].total;
    assert_int_equal(best, dev->peak_bytes);
    assert_int_equal(dev->points[0].event, -1);
    assert_int_equal(dev->points[dev->n_points - 1].event, (int64_t)t.n - 1);

    /* a coarse series still keeps the peak */
    struct gm_analysis *coarse = NULL;
    struct gm_analysis_opts o = {.max_points = 5};
    assert_int_equal(gm_analysis_run(&s, &o, &coarse, &err), GM_OK);
    /* one bucket: the initial state, then the least, the most and the last state */
    assert_true(coarse->devices[0].n_points <= 5);
    assert_int_equal(coarse->devices[0].points[0].event, -1);
    assert_int_equal(coarse->devices[0].points[coarse->devices[0].n_points - 1].event,
                     (int64_t)t.n - 1);
    best = 0;
    for (size_t i = 0; i < coarse->devices[0].n_points; i++) {
        if (coarse->devices[0].points[i].total > best)
            best = coarse->devices[0].points[i].total;
        if (i)
            assert_true(coarse->devices[0].points[i].event >
                        coarse->devices[0].points[i - 1].event);
    }
    assert_int_equal(best, dev->peak_bytes);
    gm_analysis_free(coarse);

    /* diff against the same program without the leak: the leak site vanished */
    static struct trace t2;
    struct gm_snapshot s2;
    struct gm_snapshot_device d2;
    build_trace(&t2, false);
    make_snapshot(&s2, &d2, &t2);
    struct gm_analysis *an2 = NULL;
    assert_int_equal(gm_analysis_run(&s2, NULL, &an2, &err), GM_OK);
    assert_int_equal(an2->devices[0].n_leaks, 0);
    struct gm_analysis_diff *df = NULL;
    assert_int_equal(gm_analysis_diff(an, an2, &df, &err), GM_OK);
    assert_int_equal(df->n_devices, 1);
    assert_int_equal(df->devices[0].peak_bytes[0] - df->devices[0].peak_bytes[1], 150);
    const struct gm_analysis_diff_site *top = &df->devices[0].sites[0];
    assert_int_equal(top->stack[0], S_LEAK);
    assert_int_equal(top->stack[1], UINT32_MAX);
    assert_int_equal(top->bytes[0], 150);
    assert_int_equal(top->bytes[1], 0);
    gm_analysis_diff_free(df);
    gm_analysis_free(an2);
    gm_analysis_free(an);
}

/* ---- leaks, one per cause ---- */

/* A training loop that runs an evaluation without torch.no_grad() and keeps its outputs
 * (three forward sites under evaluate(), two of them inside submodules), and keeps a user
 * tensor every iteration: two causes, whatever the number of sites. */
static void build_eval_leak(struct trace *t, int iterations)
{
    enum { L_TRAIN_FWD = 1, L_BWD, L_E1, L_E2, L_E3, L_USER };
    t->n = 0;
    for (int it = 0; it < iterations; it++) {
        uint64_t k = (uint64_t)it * 0x1000;
        alloc(t, 0x100000, 1000, L_TRAIN_FWD);
        alloc(t, 0x200000, 10, L_BWD);
        release(t, 0x100000, 1000, L_BWD);
        release(t, 0x200000, 10, L_BWD);
        alloc(t, 0x300000 + k, 64, L_E1);
        alloc(t, 0x300100 + k, 32, L_E2);
        alloc(t, 0x300200 + k, 16, L_E3);
        alloc(t, 0x300300 + k, 8, L_USER);
    }
}

static const struct gm_snapshot_frame eval_frames[] = {
    {"/e/site-packages/torch/nn/modules/linear.py", "forward", 125, true, false, false, false, 0,
     0}, /* 0 */
    {"/e/site-packages/torch/nn/modules/module.py", "_call_impl", 1520, true, false, false, false,
     0, 0},                                                                  /* 1 */
    {"/home/u/model.py", "forward", 10, true, false, false, false, 0, 0},    /* 2 */
    {"/home/u/model.py", "forward", 11, true, false, false, false, 0, 0},    /* 3 */
    {"/home/u/model.py", "forward", 12, true, false, false, false, 0, 0},    /* 4 */
    {"/home/u/train.py", "evaluate", 70, true, false, false, false, 0, 0},   /* 5 */
    {"/home/u/train.py", "train_step", 50, true, false, false, false, 0, 0}, /* 6 */
    {"/e/site-packages/torch/autograd/__init__.py", "backward", 251, true, false, false, false, 0,
     0},                                                               /* 7 */
    {"/home/u/train.py", "main", 90, true, false, false, false, 0, 0}, /* 8 */
    {"/home/u/train.py", "keep", 95, true, false, false, false, 0, 0}, /* 9 */
};
static const uint32_t el_train[] = {2, 1, 6, 8}, el_bwd[] = {7, 6, 8};
static const uint32_t el_e1[] = {0, 1, 2, 1, 5, 8}, el_e2[] = {0, 1, 3, 1, 5, 8};
static const uint32_t el_e3[] = {4, 1, 5, 8}, el_user[] = {9, 8};
static const struct gm_snapshot_stack eval_stacks[] = {
    {NULL, 0}, {el_train, 4}, {el_bwd, 3}, {el_e1, 6}, {el_e2, 6}, {el_e3, 4}, {el_user, 2},
};

static void test_leak_causes(void **state)
{
    (void)state;
    static struct trace t;
    struct gm_snapshot s;
    struct gm_snapshot_device d;
    struct gm_analysis *an = NULL;
    struct gm_error err;
    build_eval_leak(&t, 5);
    make_snapshot(&s, &d, &t);
    s.frames = eval_frames;
    s.n_frames = sizeof(eval_frames) / sizeof(eval_frames[0]);
    s.stacks = eval_stacks;
    s.n_stacks = sizeof(eval_stacks) / sizeof(eval_stacks[0]);
    assert_int_equal(gm_analysis_run(&s, NULL, &an, &err), GM_OK);
    const struct gm_analysis_device *dev = &an->devices[0];
    assert_int_equal(gm_analysis_leak_verdict(dev), GM_LEAK_VERDICT_FOUND);
    /* four leaking sites, two causes: evaluate() keeps three, keep() one */
    assert_int_equal(dev->n_leaks, 2);
    const struct gm_analysis_leak *g = &dev->leaks[0], *u = &dev->leaks[1];
    assert_int_equal(g->kind, GM_LEAK_GRAPH_NO_GRAD);
    assert_int_equal(g->frame, 5); /* evaluate, the caller of the model */
    assert_int_equal(g->n_sites, 3);
    assert_int_equal(g->bytes_per_iteration, 64 + 32 + 16);
    assert_int_equal(g->sites[0].stack, 3); /* largest first */
    assert_int_equal(g->sites[0].bytes_per_iteration, 64);
    assert_int_equal(g->stack, 3);
    assert_int_equal(g->count, 15);
    assert_int_equal(g->first_iteration, g->last_iteration - 4);
    assert_int_equal(u->frame, 9);
    assert_int_equal(u->n_sites, 1);
    assert_int_equal(u->total_bytes, 5 * 8);
    gm_analysis_free(an);

    /* two iterations (one training step, then the evaluation) are too few to judge, not
     * "no leak" */
    build_eval_leak(&t, 1);
    make_snapshot(&s, &d, &t);
    s.frames = eval_frames;
    s.n_frames = sizeof(eval_frames) / sizeof(eval_frames[0]);
    s.stacks = eval_stacks;
    s.n_stacks = sizeof(eval_stacks) / sizeof(eval_stacks[0]);
    assert_int_equal(gm_analysis_run(&s, NULL, &an, &err), GM_OK);
    assert_int_equal(an->devices[0].n_iterations, 2);
    assert_int_equal(gm_analysis_leak_verdict(&an->devices[0]), GM_LEAK_VERDICT_TOO_FEW);
    assert_non_null(strstr(gm_leak_verdict_text(GM_LEAK_VERDICT_TOO_FEW), "too few iterations"));
    gm_analysis_free(an);
}

/* The user's phases (gpumem.phase:<name> marks of gpumem.torch.record()): ranges by time on
 * the events, an inner range within an outer one, the peak inside each, the peak's phase. */
static void test_user_phases(void **state)
{
    (void)state;
    static struct trace t;
    struct gm_snapshot s;
    struct gm_snapshot_device d;
    struct gm_analysis *an = NULL;
    struct gm_error err;
    const struct gm_snapshot_annotation anns[] = {
        {"gpumem.phase:load", "START", 0, 0, true},
        {"gpumem.phase:load", "END", 0, 15, false},
        {"Optimizer.step#Adam.step", "START", 0, 16, true},
        {"gpumem.phase:train", "START", 0, 20, true},
        {"gpumem.phase:inner", "START", 0, 30, true},
        {"gpumem.phase:inner", "END", 0, 40, false},
        {"gpumem.phase:train", "END", 0, 60, false},
        {"gpumem.phase:load", "START", 1, 0, true}, /* another device */
    };
    t.n = 0;
    alloc(&t, 0x1000, 100, S_USER); /* t=0..: load */
    alloc(&t, 0x2000, 100, S_USER);
    alloc(&t, 0x3000, 500, S_USER);  /* train */
    alloc(&t, 0x4000, 1000, S_USER); /* inner: the peak */
    release(&t, 0x4000, 1000, S_USER);
    release(&t, 0x3000, 500, S_USER); /* train */
    alloc(&t, 0x5000, 7, S_USER);     /* after every phase */
    for (size_t i = 0; i < t.n; i++) {
        t.ev[i].flags |= GM_EVENT_HAS_TIME;
        t.ev[i].time_us = (int64_t)i * 10; /* events at 0, 10, ..., 100 */
    }
    make_snapshot(&s, &d, &t);
    s.has_time = true;
    s.annotations = anns;
    s.n_annotations = sizeof(anns) / sizeof(anns[0]);
    s.has_annotations = true;
    assert_int_equal(gm_analysis_run(&s, NULL, &an, &err), GM_OK);
    const struct gm_analysis_device *dev = &an->devices[0];
    assert_int_equal(dev->n_user_phases, 3);
    assert_string_equal(dev->user_phases[0].name, "load");
    assert_string_equal(dev->user_phases[1].name, "train");
    assert_string_equal(dev->user_phases[2].name, "inner");
    assert_int_equal(dev->n_user_ranges, 3);
    /* load holds events 0 and 1 (t 0, 10), train 2..6 (t 20..60), inner 3..4 (t 30, 40) */
    assert_int_equal(dev->user_ranges[0].first_event, 0);
    assert_int_equal(dev->user_ranges[0].last_event, 1);
    assert_int_equal(dev->user_ranges[1].first_event, 2);
    assert_int_equal(dev->user_ranges[1].last_event, 6);
    assert_int_equal(dev->user_ranges[2].first_event, 3);
    assert_int_equal(dev->user_ranges[2].last_event, 4);
    assert_int_equal(dev->user_phases[0].allocated_bytes, 200);
    assert_int_equal(dev->user_phases[0].peak_bytes, 200);
    /* the peak (after event 3: 1700 bytes) is inside inner, the innermost range */
    assert_int_equal(dev->peak_bytes, 1700);
    assert_int_equal(dev->peak_event, 3);
    assert_int_equal(dev->peak_user_phase, 2);
    assert_int_equal(dev->user_phases[2].peak_bytes, 1700);
    assert_int_equal(dev->user_phases[2].at_peak[GM_CATEGORY_OTHER] +
                         dev->user_phases[2].at_peak[GM_CATEGORY_INPUT],
                     1700);
    /* train's own events: 2, 5, 6 (inner has 3 and 4); its peak is after event 2 */
    assert_int_equal(dev->user_phases[1].n_events, 3);
    assert_int_equal(dev->user_phases[1].peak_event, 2);
    assert_int_equal(dev->user_phases[1].allocated_bytes, 500);
    gm_analysis_free(an);
}

/* make_snapshot() with event i at times[i] us (NULL: at 10 i) and the annotations anns[n]. */
static void make_snapshot_at_times(struct gm_snapshot *s, struct gm_snapshot_device *d,
                                   struct trace *t, const int64_t *times,
                                   const struct gm_snapshot_annotation *anns, size_t n)
{
    for (size_t i = 0; i < t->n; i++) {
        t->ev[i].flags |= GM_EVENT_HAS_TIME;
        t->ev[i].time_us = times ? times[i] : (int64_t)i * 10;
    }
    make_snapshot(s, d, t);
    s->has_time = true;
    s->annotations = anns;
    s->n_annotations = n;
    s->has_annotations = true;
}

/* make_snapshot() with event k at time 10 k us and the annotations anns[n]. */
static void make_timed_snapshot(struct gm_snapshot *s, struct gm_snapshot_device *d,
                                struct trace *t, const struct gm_snapshot_annotation *anns,
                                size_t n)
{
    make_snapshot_at_times(s, d, t, NULL, anns, n);
}

/* The user's category rules come before the built-in ones, the first that matches wins,
 * frame expressions search file and function names, annotation expressions the
 * record_function ranges open at the allocation (both must match when a rule has both). */
static void test_category_rules_first_match_wins(void **state)
{
    (void)state;
    static struct trace t;
    struct gm_snapshot s;
    struct gm_snapshot_device d;
    struct gm_analysis *an = NULL;
    struct gm_error err;
    struct gm_category_rules *r = NULL;
    const char *text = "{\"rules\": ["
                       "{\"name\": \"model inputs\", \"category\": \"input\", "
                       "\"file\": \"u/model\\\\.py$\", "
                       "\"function\": \"^forward$\"},"
                       "{\"category\": \"parameter\", \"function\": \"^forward$\"}]}";
    build_trace(&t, true);
    make_snapshot(&s, &d, &t);
    assert_int_equal(gm_category_rules_parse(text, strlen(text), &r, &err), GM_OK);
    assert_int_equal(gm_category_rules_count(r), 2);
    struct gm_analysis_opts ao = {.rules = r};
    assert_int_equal(gm_analysis_run(&s, &ao, &an, &err), GM_OK);
    const struct gm_analysis_device *dev = &an->devices[0];
    /* the forward's activation (0x3000) matched the first rule, not the second */
    const struct gm_analysis_alloc *a = find(dev, 0x3000, 0);
    assert_non_null(a);
    assert_int_equal(a->category, GM_CATEGORY_INPUT);
    assert_int_equal(a->rule, GM_RULE_CUSTOM);
    assert_int_equal(a->user_rule, 1);
    /* the rules' names and categories are kept by the analysis, the second unnamed */
    assert_int_equal(an->n_user_rules, 2);
    assert_string_equal(an->user_rule_names[0], "model inputs");
    assert_string_equal(an->user_rule_names[1], "rule 2");
    assert_int_equal(an->user_rule_categories[1], GM_CATEGORY_PARAMETER);
    {
        uint64_t b[2];
        gm_analysis_user_rules_at(dev, dev->peak_event, b, 2);
        assert_int_equal(b[1], 0); /* the second rule never wins */
        assert_true(b[0] > 0 && b[0] <= dev->at_peak[GM_CATEGORY_INPUT]);
    }
    /* what no rule matches keeps its built-in category and rule */
    a = find(dev, 0x1000, -2);
    assert_int_equal(a->category, GM_CATEGORY_PARAMETER);
    assert_int_equal(a->rule, GM_RULE_PARAM_FRAMES);
    assert_int_equal(a->user_rule, 0);
    a = find(dev, 0x6000, -2);
    assert_int_equal(a->category, GM_CATEGORY_OPTIMIZER_STATE);
    gm_analysis_free(an);
    gm_category_rules_free(r);

    /* annotations: 'inner' inside 'train', by time */
    const struct gm_snapshot_annotation anns[] = {
        {"load", "START", 0, 0, true},   {"load", "END", 0, 15, false},
        {"train", "START", 0, 20, true}, {"inner", "START", 0, 30, true},
        {"inner", "END", 0, 40, false},  {"train", "END", 0, 60, false},
        {"inner", "START", 1, 0, true}, /* another device */
    };
    text = "[{\"category\": \"gradient\", \"annotation\": \"^inner$\"},"
           " {\"category\": \"activation\", \"annotation\": \"^train$\", \"function\": \"^main$\"},"
           " {\"category\": \"input\", \"annotation\": \"^train$\", \"file\": \"model\\\\.py\"}]";
    t.n = 0;
    alloc(&t, 0x1000, 100, S_USER);  /* t 0: in load */
    alloc(&t, 0x3000, 500, S_USER);  /* t 10: in none */
    alloc(&t, 0x4000, 1000, S_USER); /* t 20: in train */
    alloc(&t, 0x5000, 1000, S_USER); /* t 30: in inner, inside train */
    alloc(&t, 0x6000, 7, S_USER);    /* t 40: in inner at its END time */
    alloc(&t, 0x7000, 7, S_USER);    /* t 50: in train again */
    alloc(&t, 0x8000, 7, S_USER);    /* t 60: after every range? its END is inclusive */
    alloc(&t, 0x9000, 7, S_USER);    /* t 70: after every range */
    make_timed_snapshot(&s, &d, &t, anns, sizeof(anns) / sizeof(anns[0]));
    assert_int_equal(gm_category_rules_parse(text, strlen(text), &r, &err), GM_OK);
    ao.rules = r;
    assert_int_equal(gm_analysis_run(&s, &ao, &an, &err), GM_OK);
    dev = &an->devices[0];
    static const struct {
        uint64_t addr;
        bool custom;
        enum gm_category cat;
    } want[] = {
        {0x1000, false, GM_CATEGORY_OTHER},     {0x3000, false, GM_CATEGORY_OTHER},
        {0x4000, true, GM_CATEGORY_ACTIVATION}, {0x5000, true, GM_CATEGORY_GRADIENT},
        {0x6000, true, GM_CATEGORY_GRADIENT},   {0x7000, true, GM_CATEGORY_ACTIVATION},
        {0x8000, true, GM_CATEGORY_ACTIVATION}, {0x9000, false, GM_CATEGORY_OTHER},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        a = find(dev, want[i].addr, -2);
        assert_non_null(a);
        assert_int_equal(a->rule == GM_RULE_CUSTOM, want[i].custom);
        if (want[i].custom)
            assert_int_equal(a->category, want[i].cat);
    }
    gm_analysis_free(an);
    gm_category_rules_free(r);
}

/* Nine events: the bytes allocated after each are 100, 200, 700, 1700, 1700, 700, 700, 200,
 * 207 (a release is a free request and its completion). */
static void build_region_trace(struct trace *t)
{
    t->n = 0;
    alloc(t, 0x1000, 100, S_USER);
    alloc(t, 0x2000, 100, S_USER);
    alloc(t, 0x3000, 500, S_USER);
    alloc(t, 0x4000, 1000, S_USER);
    release(t, 0x4000, 1000, S_USER);
    release(t, 0x3000, 500, S_USER);
    alloc(t, 0x5000, 7, S_USER);
    assert_int_equal(t->n, 9);
}

/* The annotation regions 'r' (found by walking the trace) equal those found from an axis
 * that keeps the events' times. */
static void check_regions_on_kept_axis(struct gm_snapshot *s, struct gm_snapshot_device *d,
                                       const struct gm_analysis *an,
                                       const struct gm_analysis_device *dev,
                                       const struct gm_analysis_regions *r)
{
    struct gm_analysis_regions ra;
    struct gm_snapshot_timeline tl;
    struct gm_lod_axis ax;
    struct gm_lod al, rl;
    struct gm_error err;
    assert_int_equal(gm_snapshot_timeline(s, 0, 0, &tl, &err), GM_OK);
    assert_int_equal(gm_lod_axis_timeline(&ax, s, d, &tl, 16, &al, &rl, &err), GM_OK);
    assert_true(gm_lod_axis_keeps_x(&ax));
    assert_int_equal(gm_analysis_regions_on_axis(an, dev, GM_REGION_ANNOTATION, &ax, &ra, &err),
                     GM_OK);
    assert_int_equal(ra.n, r->n);
    for (size_t i = 0; i < r->n; i++) {
        assert_string_equal(ra.v[i].name, r->v[i].name);
        assert_int_equal(ra.v[i].first_event, r->v[i].first_event);
        assert_int_equal(ra.v[i].last_event, r->v[i].last_event);
        assert_int_equal(ra.v[i].start_bytes, r->v[i].start_bytes);
        assert_int_equal(ra.v[i].peak_bytes, r->v[i].peak_bytes);
        assert_int_equal(ra.v[i].end_bytes, r->v[i].end_bytes);
    }
    gm_analysis_regions_release(&ra);
    gm_lod_release(&al);
    gm_lod_release(&rl);
    gm_lod_axis_release(&ax);
    gm_snapshot_timeline_release(&tl);
}

/* The events of an annotation found from an axis that keeps the events' times equal those
 * found by walking the trace, also where the times go back (a damaged file): the first
 * event at or after a time is the first whose time is at least it, whatever came before;
 * times below the first event's keep the axis in 64 bits. */
static void test_annotation_events_with_times_going_back(void **state)
{
    (void)state;
    static struct trace t;
    struct gm_snapshot s;
    struct gm_snapshot_device d;
    struct gm_analysis *an = NULL;
    struct gm_error err;
    static const int64_t times[2][9] = {{20, 50, 30, 60, 40, 90, 55, 120, 100},
                                        {20, 50, 5, 60, 40, 90, 3, 120, 100}};
    const struct gm_snapshot_annotation anns[] = {
        {"a", "START", 0, 0, true},   {"a", "END", 0, 35, false},  {"b", "START", 0, 52, true},
        {"b", "END", 0, 95, false},   {"c", "START", 0, 91, true}, {"c", "END", 0, 119, false},
        {"d", "START", 0, 110, true}, {"d", "END", 0, 200, false}, {"e", "START", 0, 51, true},
        {"e", "END", 0, 52, false},
    };
    for (int v = 0; v < 2; v++) {
        struct gm_analysis_regions r;
        build_region_trace(&t);
        make_snapshot_at_times(&s, &d, &t, times[v], anns, sizeof(anns) / sizeof(anns[0]));
        assert_int_equal(gm_analysis_run(&s, NULL, &an, &err), GM_OK);
        const struct gm_analysis_device *dev = &an->devices[0];
        assert_int_equal(gm_analysis_regions(an, dev, GM_REGION_ANNOTATION, &r, &err), GM_OK);
        assert_int_equal(r.n, 5);
        check_regions_on_kept_axis(&s, &d, an, dev, &r);
        /* "b" opens at 52: event 3 (60) is the first at or after it (event 2 is earlier, 30);
         * it closes at 95: event 7 (120) is the first after it, so event 6 is its last */
        assert_string_equal(r.v[2].name, "b"); /* the ranges in the order they open */
        assert_int_equal(r.v[2].first_event, 3);
        assert_int_equal(r.v[2].last_event, 6);
        /* "d" ends after every event: it runs to the last */
        assert_string_equal(r.v[4].name, "d");
        assert_int_equal(r.v[4].last_event, 8);
        gm_analysis_regions_release(&r);
        gm_analysis_free(an);
    }
}

/* The kept axis answers a time by scanning its 32-bit x's eight at a time while all eight are
 * before it (regions.c answer_time_queries()).  An annotation time equal to an event's, right
 * after a block of eight whose first equals it and whose others are earlier (times going
 * back), must find that event (planting "x32[k] <= u" for the first of the eight finds event
 * 16 instead of 8); times 2^32 us or more past the first event saturate the 32-bit bound, and
 * an event at exactly UINT32_MAX us is not passed over.  The walk of the trace is the
 * reference. */
static void test_annotation_times_equal_and_past_32_bits(void **state)
{
    (void)state;
    static struct trace t;
    struct gm_snapshot s;
    struct gm_snapshot_device d;
    struct gm_analysis *an = NULL;
    struct gm_error err;
    struct gm_analysis_regions r;
    int64_t times[18];
    const int64_t far = 100 + ((int64_t)1 << 32);
    const struct gm_snapshot_annotation anns[] = {
        {"eq", "START", 0, 1000, true},       {"eq", "END", 0, 2000, false},
        {"far", "START", 0, 3000, true},      {"far", "END", 0, far + 10, false},
        {"past", "START", 0, far + 20, true}, {"past", "END", 0, far + 30, false},
    };
    t.n = 0;
    for (size_t i = 0; i < 18; i++) {
        alloc(&t, 0x1000 * (i + 1), 100 + i, S_USER);
        times[i] = i < 8    ? 100 + 10 * (int64_t)i
                   : i < 9  ? 1000
                   : i < 16 ? 500 + 10 * (int64_t)i
                            : 2000;
    }
    times[17] = 100 + (int64_t)UINT32_MAX; /* the largest 32-bit x */
    make_snapshot_at_times(&s, &d, &t, times, anns, sizeof(anns) / sizeof(anns[0]));
    assert_int_equal(gm_analysis_run(&s, NULL, &an, &err), GM_OK);
    const struct gm_analysis_device *dev = &an->devices[0];
    assert_int_equal(gm_analysis_regions(an, dev, GM_REGION_ANNOTATION, &r, &err), GM_OK);
    assert_int_equal(r.n, 3);
    assert_string_equal(r.v[0].name, "eq");
    assert_int_equal(r.v[0].first_event, 8); /* the event at 1000 itself */
    check_regions_on_kept_axis(&s, &d, an, dev, &r);
    gm_analysis_regions_release(&r);
    gm_analysis_free(an);
}

/* The bytes after every event by the plain rule (each allocation counts from its alloc event
 * to its free_completed, those alive from the start in the initial bytes), one array an event:
 * the reference the regions' walk is held to. */
static void bytes_after_each(const struct gm_analysis_device *dev, uint64_t *initial,
                             uint64_t *after)
{
    *initial = 0;
    memset(after, 0, dev->n_events * sizeof(*after));
    for (size_t i = 0; i < dev->n_allocs; i++) {
        const struct gm_analysis_alloc *a = &dev->allocs[i];
        if (a->alloc_event < 0)
            *initial += a->bytes;
        else
            after[a->alloc_event] += a->bytes;
        if (a->free_event >= 0)
            after[a->free_event] -= a->bytes;
    }
    uint64_t cur = *initial;
    for (size_t k = 0; k < dev->n_events; k++)
        after[k] = cur += after[k];
}

/* The region's figures are the reference's over its events [first, last]: start after the
 * event before, end after the last, the most inside it and the first event that holds it
 * (start and the event before when nothing inside is above it); no event: the state after the
 * event before. */
static void check_region_figures(const struct gm_analysis_region *g, uint64_t initial,
                                 const uint64_t *after)
{
    int64_t f = g->first_event, l = g->last_event;
    uint64_t start = f == 0 ? initial : after[f - 1], peak = start;
    int64_t peak_event = f - 1;
    for (int64_t k = f; k <= l; k++)
        if (after[k] > peak) {
            peak = after[k];
            peak_event = k;
        }
    assert_int_equal(g->start_bytes, start);
    assert_int_equal(g->peak_bytes, peak);
    assert_int_equal(g->peak_event, peak_event);
    assert_int_equal(g->end_bytes, f <= l ? after[l] : start);
}

/* The regions' figures come from one walk of the allocations in alloc-event and free-event
 * order (regions.c measure()), with no array per event; held to the per-event reference on
 * a trace of small sizes that reaches one total many times (the first event to hold the most
 * counts), frees of blocks allocated before the trace, blocks never freed, and many
 * annotation ranges open at once (nested, overlapping, one with no event inside, one never
 * closed) measured in one walk; every window of events also. */
static void test_regions_walk_matches_every_event(void **state)
{
    (void)state;
    static struct trace t;
    static struct gm_snapshot_annotation anns[64];
    static char names[32][8];
    struct gm_snapshot s;
    struct gm_snapshot_device d;
    struct gm_analysis *an = NULL;
    struct gm_error err;
    struct gm_analysis_regions r;
    struct gm_analysis_region w;
    uint64_t after[256], initial;
    uint64_t live[24] = {0}; /* per address slot: its size, 0 when free */
    uint32_t x = 12345;
    size_t na = 0;

    t.n = 0;
    /* two blocks from before the trace, freed inside it */
    release(&t, 0x100000, 300, S_USER);
    for (int i = 0; t.n < 200; i++) {
        x = x * 1103515245u + 12345u;
        unsigned slot = (x >> 16) % 24;
        if (live[slot]) {
            release(&t, 0x1000 * (slot + 1), live[slot], S_USER);
            live[slot] = 0;
        } else {
            live[slot] = 100 * (1 + (x >> 8) % 3);
            alloc(&t, 0x1000 * (slot + 1), live[slot], S_USER);
        }
        if (i == 40)
            release(&t, 0x200000, 200, S_USER);
    }
    /* ranges at times 10 * event: nested and overlapping, from random starts and lengths */
    for (size_t i = 0; i < 30; i++) {
        x = x * 1103515245u + 12345u;
        int64_t start = (int64_t)((x >> 8) % 2000), len = (int64_t)((x >> 20) % 700);
        snprintf(names[i], sizeof(names[i]), "r%zu", i);
        anns[na++] = (struct gm_snapshot_annotation){names[i], "START", 0, start, true};
        if (i != 7) /* never closed */
            anns[na++] = (struct gm_snapshot_annotation){names[i], "END", 0, start + len, false};
    }
    snprintf(names[30], sizeof(names[30]), "gap");
    anns[na++] = (struct gm_snapshot_annotation){names[30], "START", 0, 501, true};
    anns[na++] = (struct gm_snapshot_annotation){names[30], "END", 0, 505, false};
    make_timed_snapshot(&s, &d, &t, anns, na);
    assert_int_equal(gm_analysis_run(&s, NULL, &an, &err), GM_OK);
    const struct gm_analysis_device *dev = &an->devices[0];
    assert_true(dev->n_events <= 256);
    bytes_after_each(dev, &initial, after);
    assert_true(initial == 500);
    assert_int_equal(gm_analysis_regions(an, dev, GM_REGION_ANNOTATION, &r, &err), GM_OK);
    assert_int_equal(r.n, 31);
    bool empty = false, peak_inside = false;
    for (size_t i = 0; i < r.n; i++) {
        check_region_figures(&r.v[i], initial, after);
        empty |= r.v[i].first_event > r.v[i].last_event;
        peak_inside |= r.v[i].peak_event >= r.v[i].first_event;
    }
    assert_true(empty && peak_inside);
    gm_analysis_regions_release(&r);
    for (int64_t f = 0; f < (int64_t)dev->n_events; f++)
        for (int64_t l = f; l < (int64_t)dev->n_events; l++) {
            struct gm_analysis_window win = {false, f, l};
            assert_int_equal(gm_analysis_window_region(an, dev, &win, &w, &err), GM_OK);
            check_region_figures(&w, initial, after);
        }
    gm_analysis_free(an);
}

/* Regions: every record_function range (any name) with the bytes at its start, its end
 * and the most inside it; windows by event and by time; the n-th allocation of an address. */
static void test_regions_and_windows(void **state)
{
    (void)state;
    static struct trace t;
    struct gm_snapshot s;
    struct gm_snapshot_device d;
    struct gm_analysis *an = NULL;
    struct gm_error err;
    struct gm_analysis_regions r;
    struct gm_analysis_region w;
    const struct gm_snapshot_annotation anns[] = {
        {"load", "START", 0, 0, true},
        {"load", "END", 0, 15, false},
        {"Optimizer.step#Adam.step", "START", 0, 16, true}, /* never closed */
        {"train", "START", 0, 20, true},
        {"inner", "START", 0, 30, true},
        {"inner", "END", 0, 40, false},
        {"train", "END", 0, 60, false},
        {"gap", "START", 0, 84, true}, /* no event inside */
        {"gap", "END", 0, 86, false},
        {"load", "START", 1, 0, true}, /* another device */
    };
    build_region_trace(&t); /* times 0, 10, ... 80 */
    make_timed_snapshot(&s, &d, &t, anns, sizeof(anns) / sizeof(anns[0]));
    assert_int_equal(gm_analysis_run(&s, NULL, &an, &err), GM_OK);
    const struct gm_analysis_device *dev = &an->devices[0];
    assert_int_equal(gm_analysis_regions(an, dev, GM_REGION_ANNOTATION, &r, &err), GM_OK);
    static const struct {
        const char *name;
        int64_t first, last;
        uint64_t start, peak, end;
        int64_t peak_event;
    } want[] = {
        {"load", 0, 1, 0, 200, 200, 1},     {"Optimizer.step#Adam.step", 2, 8, 200, 1700, 207, 3},
        {"train", 2, 6, 200, 1700, 700, 3}, {"inner", 3, 4, 700, 1700, 1700, 3},
        {"gap", 9, 8, 207, 207, 207, 8},
    };
    assert_int_equal(r.n, 5);
    for (size_t i = 0; i < r.n; i++) {
        assert_string_equal(r.v[i].name, want[i].name);
        assert_int_equal(r.v[i].first_event, want[i].first);
        assert_int_equal(r.v[i].last_event, want[i].last);
        assert_int_equal(r.v[i].start_bytes, want[i].start);
        assert_int_equal(r.v[i].peak_bytes, want[i].peak);
        assert_int_equal(r.v[i].end_bytes, want[i].end);
        assert_int_equal(r.v[i].peak_event, want[i].peak_event);
    }
    assert_int_equal(r.v[1].end_us, INT64_MAX);
    /* the same from an axis that keeps the events' times (no walk of the trace) */
    check_regions_on_kept_axis(&s, &d, an, dev, &r);
    gm_analysis_regions_release(&r);
    /* no compile context anywhere: no compile region */
    assert_int_equal(gm_analysis_regions(an, dev, GM_REGION_COMPILE, &r, &err), GM_OK);
    assert_int_equal(r.n, 0);
    assert_int_equal(gm_analysis_regions(an, dev, GM_REGION_WINDOW, &r, &err), GM_ERR_INVALID);

    /* windows: the whole trace holds the device's peak; one after the peak peaks at its start */
    struct gm_analysis_window win = {false, 0, 8};
    assert_int_equal(gm_analysis_window_region(an, dev, &win, &w, &err), GM_OK);
    assert_int_equal(w.peak_bytes, dev->peak_bytes);
    assert_int_equal(w.peak_event, dev->peak_event);
    win = (struct gm_analysis_window){false, 5, 8};
    assert_int_equal(gm_analysis_window_region(an, dev, &win, &w, &err), GM_OK);
    assert_int_equal(w.start_bytes, 1700);
    assert_int_equal(w.peak_bytes, 1700);
    assert_int_equal(w.peak_event, 4);
    assert_int_equal(w.end_bytes, 207);
    win = (struct gm_analysis_window){true, 25, 45}; /* events 3, 4 */
    assert_int_equal(gm_analysis_window_region(an, dev, &win, &w, &err), GM_OK);
    assert_int_equal(w.first_event, 3);
    assert_int_equal(w.last_event, 4);
    assert_int_equal(w.start_bytes, 700);
    win = (struct gm_analysis_window){false, 3, 9};
    assert_int_equal(gm_analysis_window_region(an, dev, &win, &w, &err), GM_ERR_INVALID);
    win = (struct gm_analysis_window){false, 4, 3};
    assert_int_equal(gm_analysis_window_region(an, dev, &win, &w, &err), GM_ERR_INVALID);
    gm_analysis_free(an);

    /* the n-th allocation of an address: the batch address is reused every iteration */
    size_t ix;
    int32_t last = -1;
    build_trace(&t, false);
    make_snapshot(&s, &d, &t);
    assert_int_equal(gm_analysis_run(&s, NULL, &an, &err), GM_OK);
    dev = &an->devices[0];
    for (uint32_t n = 1; n <= 4; n++) {
        assert_int_equal(gm_analysis_alloc_at_address(dev, 0x2000, n, &ix, &err), GM_OK);
        assert_int_equal(dev->allocs[ix].addr, 0x2000);
        assert_true(dev->allocs[ix].alloc_event > last);
        last = dev->allocs[ix].alloc_event;
    }
    assert_int_equal(gm_analysis_alloc_at_address(dev, 0x2000, 5, &ix, &err), GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "4 times"));
    assert_int_equal(gm_analysis_alloc_at_address(dev, 0x2000, 0, &ix, &err), GM_ERR_INVALID);
    assert_int_equal(gm_analysis_alloc_at_address(dev, 0x123, 1, &ix, &err), GM_ERR_INVALID);
    gm_analysis_free(an);
}

/* The YAML form of the rules: each accepted way of writing them (a list or "rules:", the
 * list aligned with or indented under it, "- key" or "-" then keys, plain, single- and
 * double-quoted values with their escapes, comments, blank lines, CRLF, a leading "---")
 * gives the tree the JSON form gives, and so the same rules. */
static void test_category_rules_yaml_equals_json(void **state)
{
    (void)state;
    const char *json =
        "{\"rules\": ["
        "{\"name\": \"it's logits\", \"category\": \"activation\", "
        "\"function\": \"^cross_entropy$\"},"
        "{\"category\": \"optimizer_state\", \"annotation\": \"^Optimizer\\\\.step#\","
        " \"file\": \"a: b \\t\\u00e9\\u2028 # c\"}]}";
    static const char *const yaml[] = {
        "rules:\n"
        "  - name: it's logits\n"
        "    category: activation\n"
        "    function: ^cross_entropy$\n"
        "  - category: optimizer_state\n"
        "    annotation: ^Optimizer\\.step#\n"
        "    file: \"a: b \\t\\xe9\\L # c\"\n",
        /* comments, blank lines, quoted forms, the list at the key's column, CRLF */
        "# my rules\r\n---\r\nrules:   # the list\r\n\r\n"
        "- name: 'it''s logits'   # a quote in single quotes\r\n"
        "  category: \"activation\"\r\n"
        "  function: '^cross_entropy$'\r\n"
        "-   # the second rule\r\n"
        "    category: optimizer_state\r\n"
        "    annotation: \"^Optimizer\\\\.step#\"\r\n"
        "    file: 'a: b \t\xc3\xa9\xe2\x80\xa8 # c'\r\n",
    };
    json_t *want, *got;
    struct gm_error err;
    struct gm_category_rules *r = NULL;

    assert_int_equal(gm_json_load(json, strlen(json), 0, &want, &err), GM_OK);
    for (size_t i = 0; i < sizeof(yaml) / sizeof(yaml[0]); i++) {
        assert_int_equal(ana_rules_yaml(yaml[i], strlen(yaml[i]), &got, &err), GM_OK);
        if (!json_equal(got, want)) {
            char *dump = json_dumps(got, JSON_SORT_KEYS);
            print_error("form %zu read as %s\n", i, dump ? dump : "?");
            free(dump);
            fail();
        }
        json_decref(got);
        assert_int_equal(gm_category_rules_parse(yaml[i], strlen(yaml[i]), &r, &err), GM_OK);
        assert_int_equal(gm_category_rules_count(r), 2);
        gm_category_rules_free(r);
    }
    json_decref(want);
    /* a top-level list; the form is the content's: leading whitespace before JSON is JSON */
    const char *list = "- category: other\n  file: x\n";
    const char *json_list = " \n\t[{\"category\": \"other\", \"file\": \"x\"}]";
    assert_int_equal(gm_json_load(json_list, strlen(json_list), 0, &want, &err), GM_OK);
    assert_int_equal(ana_rules_yaml(list, strlen(list), &got, &err), GM_OK);
    assert_true(json_equal(got, want));
    json_decref(got);
    json_decref(want);
    assert_int_equal(gm_category_rules_parse(json_list, strlen(json_list), &r, &err), GM_OK);
    assert_int_equal(gm_category_rules_count(r), 1);
    gm_category_rules_free(r);
}

/* What the YAML reader does not read is refused, naming its line; what it reads is checked
 * by the JSON form's rules (an unknown category, the limits). */
static void test_category_rules_yaml_refused(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        const char *says;
    } cases[] = {
        {"- category: other\n  file: &a x\n", "line 2: an anchor"},
        {"- category: other\n  file: *a\n", "line 2: an alias"},
        {"- category: other\n  file: !!str x\n", "line 2: a tag"},
        {"- {category: other, file: x}\n", "line 1: a flow collection"},
        {"rules: [ ]\n", "line 1: a flow collection"},
        {"- category: other\n  file: |\n    x\n", "line 2: a block scalar"},
        {"- category: other\n  file: >\n    x\n", "line 2: a block scalar"},
        {"- category: other\n  file: \"x\n    y\"\n", "line 2: a quoted value not closed"},
        {"- category: other\n  file: a\n    b\n", "line 3: unexpected indentation"},
        {"- category: other\n\tfile: x\n", "line 2: a tab in the indentation"},
        {"- category: other\n  file: x\n  file: y\n", "line 3: a duplicate key"},
        {"- category: other\n  file:\n", "line 2: a key or \"-\" without a value"},
        {"- category: other\n  \"file\": x\n", "line 2: expected \"key: value\""},
        {"- category: other\n  ? file\n  : x\n", "line 2: expected \"key: value\""},
        {"- category: other\n  file: \"\\q\"\n", "line 2: an unknown or incomplete escape"},
        {"- category: other\n  file: \"\\ud800\"\n", "line 2: an unknown or incomplete escape"},
        {"- category: other\n  file: 'x' y\n", "line 2: text after a closing quote"},
        {"- category: other\n  file: a: b\n", "line 2: \": \" inside a plain value"},
        {"- category: other\n  file: \"\xff\"\n", "line 2: a value that is not UTF-8"},
        {"- category: other\n  file: x\n---\n- category: other\n", "line 3: a document marker"},
        {"- category: other\nfile: x\n", "line 2: a sequence item and a key"},
        {"rules:\n  - category: other\n  file: x\n", "line 3: unexpected indentation"},
        {"- - - - - x\n", "line 1: nested deeper"},
        {"- category: other\n  file: x\0\n", "line 2: holds a NUL byte"},
        {"# nothing\n\n", "no rules"},
        {"not a list\n", "expected {\"rules\": [...]} or a list of rules"},
        {"- category: weights\n  file: x\n", "category rule 1: \"category\" must be one of"},
        {"rules:\n- category: other\n  file: x\nextra: 1\n", "expected {\"rules\""},
        {"- category: other\n  file: \"a\\0b\"\n", "holds a NUL"},
    };
    struct gm_category_rules *r = (struct gm_category_rules *)&r;
    struct gm_error err;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len = strlen(cases[i].text);
        if (strstr(cases[i].says, "NUL byte"))
            len += 2; /* the NUL and the newline after it */
        assert_int_equal(gm_category_rules_parse(cases[i].text, len, &r, &err), GM_ERR_FORMAT);
        assert_null(r);
        if (!strstr(err.msg, cases[i].says)) {
            print_error("case %zu: %s\n", i, err.msg);
            fail();
        }
    }
    /* the limits are the JSON form's: 65 rules; more bytes than the text may have */
    char *big = malloc(GM_CATEGORY_RULES_MAX_BYTES + 2);
    assert_non_null(big);
    size_t n = 0;
    for (int i = 0; i <= GM_CATEGORY_RULES_MAX; i++)
        n += (size_t)sprintf(big + n, "- category: other\n  file: f\n");
    assert_int_equal(gm_category_rules_parse(big, n, &r, &err), GM_ERR_LIMIT);
    memset(big, '#', GM_CATEGORY_RULES_MAX_BYTES + 1);
    assert_int_equal(gm_category_rules_parse(big, GM_CATEGORY_RULES_MAX_BYTES + 1, &r, &err),
                     GM_ERR_LIMIT);
    free(big);
}

/* A rules file that cannot be used is refused with the rule and the reason. */
static void test_category_rules_refused(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        enum gm_status st;
        const char *says;
    } cases[] = {
        {"[{\"category\": \"weights\", \"file\": \"x\"}]", GM_ERR_FORMAT, "must be one of"},
        {"[{\"category\": \"other\", \"file\": \"x\", \"line\": 3}]", GM_ERR_FORMAT, "unknown key"},
        {"[{\"category\": \"other\"}]", GM_ERR_FORMAT, "has no"},
        {"[{\"file\": \"x\"}]", GM_ERR_FORMAT, "has no \"category\""},
        {"[{\"category\": \"other\", \"file\": \"(\"}]", GM_ERR_FORMAT, "not a valid"},
        {"[{\"category\": \"other\", \"file\": \"(a)\\\\1\"}]", GM_ERR_FORMAT, "back-reference"},
        {"[{\"category\": \"other\", \"file\": \"((a{0,64}){0,64})x\"}]", GM_ERR_FORMAT,
         "more than one bounded repetition"},
        {"[{\"category\": \"other\", \"file\": \"((((((((((a)+)+)+)+)+)+)+)+)+)\"}]", GM_ERR_FORMAT,
         "more than 8 repetitions \"+\""},
        {"[{\"category\": \"other\", \"file\": 3}]", GM_ERR_FORMAT, "must be a string"},
        {"[{\"category\": \"other\", \"file\": \"\"}]", GM_ERR_FORMAT, "empty"},
        {"{\"rule\": []}", GM_ERR_FORMAT, "expected"},
        {"[1]", GM_ERR_FORMAT, "not an object"},
        {"[{\"name\": \"\", \"category\": \"other\", \"file\": \"x\"}]", GM_ERR_FORMAT,
         "\"name\" must be"},
    };
    struct gm_category_rules *r = (struct gm_category_rules *)&r;
    struct gm_error err;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(gm_category_rules_parse(cases[i].text, strlen(cases[i].text), &r, &err),
                         cases[i].st);
        assert_null(r);
        assert_non_null(strstr(err.msg, cases[i].says));
    }
    /* the limits: rules, bytes of one expression, bytes of the text */
    char *big = malloc(GM_CATEGORY_RULES_MAX_BYTES + 2);
    assert_non_null(big);
    size_t n = 0;
    n += (size_t)sprintf(big + n, "[");
    for (int i = 0; i <= GM_CATEGORY_RULES_MAX; i++)
        n += (size_t)sprintf(big + n, "%s{\"category\": \"other\", \"file\": \"f\"}", i ? "," : "");
    sprintf(big + n, "]");
    assert_int_equal(gm_category_rules_parse(big, strlen(big), &r, &err), GM_ERR_LIMIT);
    n = (size_t)sprintf(big, "[{\"category\": \"other\", \"file\": \"");
    memset(big + n, 'a', GM_CATEGORY_RULE_PATTERN_MAX + 1);
    sprintf(big + n + GM_CATEGORY_RULE_PATTERN_MAX + 1, "\"}]");
    assert_int_equal(gm_category_rules_parse(big, strlen(big), &r, &err), GM_ERR_LIMIT);
    memset(big, ' ', GM_CATEGORY_RULES_MAX_BYTES + 1);
    assert_int_equal(gm_category_rules_parse(big, GM_CATEGORY_RULES_MAX_BYTES + 1, &r, &err),
                     GM_ERR_LIMIT);
    free(big);
    assert_int_equal(gm_category_rules_count(NULL), 0);
    gm_category_rules_free(NULL);
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(gm_category_name(GM_CATEGORY_OPTIMIZER_STATE), "optimizer_state");
    assert_string_equal(gm_phase_name(GM_PHASE_OPTIMIZER_STEP), "optimizer_step");
    assert_string_equal(gm_oom_verdict_name(GM_VERDICT_FRAGMENTATION), "fragmentation");
    assert_non_null(strstr(gm_oom_verdict_advice(GM_VERDICT_FRAGMENTATION), "expandable_segments"));
    assert_non_null(strstr(gm_leak_kind_advice(GM_LEAK_FORWARD_OUTPUT), ".item()"));
    for (int c = 0; c < GM_CATEGORY_COUNT; c++)
        assert_true(strlen(gm_category_advice((enum gm_category)c)) > 40);
    for (int r = 0; r < GM_RULE_COUNT; r++)
        assert_true(strlen(gm_rule_text((enum gm_rule)r)) > 0);
}

/* Allocation failures anywhere must give GM_ERR_NOMEM and leak nothing (ASan checks). */
static void test_nomem(void **state)
{
    (void)state;
    static struct trace t;
    struct gm_snapshot s;
    struct gm_snapshot_device d;
    build_trace(&t, true);
    make_snapshot(&s, &d, &t);
    /* the full analysis, then the one for a diff */
    for (int part = 0; part < 2; part++) {
        bool ok = false;
        for (long n = 0; n < 400 && !ok; n++) {
            struct gm_analysis *an = NULL;
            struct gm_error err;
            gm_alloc_fail_after(n);
            enum gm_status st = part ? gm_analysis_diff_prepare(&s, NULL, &an, &err)
                                     : gm_analysis_run(&s, NULL, &an, &err);
            gm_alloc_fail_after(-1);
            if (st == GM_OK) {
                ok = true;
                gm_analysis_free(an);
            } else {
                assert_int_equal(st, GM_ERR_NOMEM);
                assert_null(an);
            }
        }
        assert_true(ok);
    }
}

/* Two 20 MiB segments with 20 MiB free in total, the largest free range 8 MiB. */
static enum gm_oom_verdict oom_verdict(uint64_t request, uint64_t device_free,
                                       struct gm_analysis_frag *copy)
{
    static struct trace t;
    struct gm_snapshot s;
    struct gm_snapshot_device d;
    const uint64_t M = 1 << 20, A = 0x7f0000000000ULL, B = A + 64 * M;
    t.n = 0;
    ev(&t, GM_ACTION_SEGMENT_ALLOC, A, 20 * M, S_FWD);
    alloc(&t, A, 4 * M, S_FWD);
    alloc(&t, A + 12 * M, 4 * M, S_FWD);
    ev(&t, GM_ACTION_SEGMENT_ALLOC, B, 20 * M, S_FWD);
    alloc(&t, B, 12 * M, S_FWD);
    ev(&t, GM_ACTION_OOM, device_free, request, S_FWD);
    make_snapshot(&s, &d, &t);
    struct gm_analysis *an = NULL;
    struct gm_error err;
    assert_int_equal(gm_analysis_run(&s, NULL, &an, &err), GM_OK);
    assert_int_equal(an->devices[0].n_ooms, 1);
    const struct gm_analysis_frag *f = &an->devices[0].ooms[0];
    enum gm_oom_verdict v = (enum gm_oom_verdict)f->verdict;
    *copy = *f;
    copy->pools = NULL;
    assert_int_equal(f->n_pools, 1);
    assert_int_equal(f->pools[0].n_segments, 2);
    gm_analysis_free(an);
    return v;
}

static void test_oom(void **state)
{
    (void)state;
    const uint64_t M = 1 << 20;
    struct gm_analysis_frag f;
    assert_int_equal(oom_verdict(12 * M, 2 * M, &f), GM_VERDICT_FRAGMENTATION);
    assert_int_equal(f.reserved, 40 * M);
    assert_int_equal(f.allocated, 20 * M);
    assert_int_equal(f.reserved_unallocated, 20 * M);
    assert_int_equal(f.largest_free, 8 * M);
    assert_int_equal(f.requested, 12 * M);
    assert_int_equal(f.device_free, 2 * M);
    assert_true(f.is_oom);
    assert_int_equal(oom_verdict(40 * M, 2 * M, &f), GM_VERDICT_SHORTAGE);
    assert_int_equal(oom_verdict(12 * M, 100 * M, &f), GM_VERDICT_LIMIT);
    assert_int_equal(oom_verdict(6 * M, 0, &f), GM_VERDICT_LIMIT); /* fits a free range */
}

/* Random traces over a small address pool (collisions, frees without allocs, segment
 * events, ooms): the analysis must hold its invariants on all of them. */
static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* The phase of every event by the direct reading of the smoothing (docs/analysis.md,
 * "Phases"): the raw phases from the stacks, then each unknown event from the known events
 * either side of it, every stack read from the events at hand.  For traces without
 * annotations (no optimizer step ranges).  Returns how many unknown events lay between two
 * forward events (the case that reads stacks around them). */
static size_t reference_phases(const struct gm_snapshot *snap, const struct gm_snapshot_event *ev,
                               size_t n, uint8_t *out)
{
    struct ana_classifier cls;
    struct gm_error err;
    uint8_t raw[256];
    bool has_frames = false, raw_backward = false;
    size_t between = 0;
    assert_true(n <= 256);
    assert_int_equal(ana_classifier_init(&cls, snap, &err), GM_OK);
    for (size_t k = 0; k < n; k++) {
        raw[k] = RAW_UNKNOWN;
        if (ev[k].action != GM_ACTION_SNAPSHOT && ev[k].action != GM_ACTION_OTHER)
            raw[k] = (uint8_t)ana_phase_of_flags(ana_stack_flags(&cls, ev[k].stack));
        has_frames = has_frames || ev[k].stack;
        raw_backward = raw_backward || raw[k] == RAW_BACKWARD;
    }
    for (size_t k = 0; k < n; k++) {
        uint8_t r = raw[k];
        if (r == RAW_UNKNOWN) {
            size_t before = k, after = k + 1;
            while (before > 0 && raw[before - 1] == RAW_UNKNOWN)
                before--;
            while (after < n && raw[after] == RAW_UNKNOWN)
                after++;
            uint8_t p = before ? raw[before - 1] : (uint8_t)RAW_UNKNOWN;
            uint8_t q = after < n ? raw[after] : (uint8_t)RAW_UNKNOWN;
            if (!ev[k].stack && has_frames && (p == RAW_BACKWARD || q == RAW_BACKWARD)) {
                r = RAW_BACKWARD;
            } else if (p == RAW_FORWARD && q == RAW_FORWARD) {
                uint32_t u = ana_stack_first_user(&cls, ev[k].stack);
                bool same =
                    u == ANA_NO_FRAME ||
                    ana_same_function(snap, u, ana_stack_caller(&cls, ev[before - 1].stack)) ||
                    ana_same_function(snap, u, ana_stack_caller(&cls, ev[after].stack));
                r = raw_backward && same ? RAW_FORWARD : RAW_OTHER;
                between++;
            } else if (p == q && p != RAW_UNKNOWN) {
                r = p;
            } else if (p == RAW_FORWARD && q == RAW_BACKWARD) {
                r = RAW_FORWARD;
            } else {
                r = RAW_OTHER;
            }
        }
        out[k] = (uint8_t)(r == RAW_FORWARD    ? GM_PHASE_FORWARD
                           : r == RAW_BACKWARD ? GM_PHASE_BACKWARD
                           : r == RAW_STEP     ? GM_PHASE_OPTIMIZER_STEP
                                               : GM_PHASE_OTHER);
    }
    ana_classifier_release(&cls);
    return between;
}

/* The layout history an analysis keeps equals the one gm_layout_history_build() makes. */
static void assert_same_history(const struct gm_layout_history *k,
                                const struct gm_layout_history *h)
{
    assert_int_equal(k->n_segments, h->n_segments);
    assert_int_equal(k->n_initial, h->n_initial);
    assert_int_equal(k->n_changes, h->n_changes);
    assert_int_equal(k->n_final_blocks, h->n_final_blocks);
    for (size_t i = 0; i < h->n_segments; i++) {
        assert_int_equal(k->segments[i].base, h->segments[i].base);
        assert_int_equal(k->segments[i].stream, h->segments[i].stream);
        assert_int_equal(k->segments[i].is_small, h->segments[i].is_small);
        assert_int_equal(k->segments[i].is_expandable, h->segments[i].is_expandable);
        assert_int_equal(k->segments[i].pool_id[0], h->segments[i].pool_id[0]);
        assert_int_equal(k->segments[i].pool_id[1], h->segments[i].pool_id[1]);
    }
    for (size_t i = 0; i < h->n_initial + h->n_changes; i++) {
        const struct gm_layout_change *a =
            i < h->n_initial ? &k->initial[i] : &k->changes[i - h->n_initial];
        const struct gm_layout_change *b =
            i < h->n_initial ? &h->initial[i] : &h->changes[i - h->n_initial];
        assert_int_equal(a->event, b->event);
        assert_int_equal(a->segment, b->segment);
        assert_int_equal(a->op, b->op);
        assert_int_equal(a->addr, b->addr);
        assert_int_equal(a->size, b->size);
    }
}

/* Forward stacks of a model called from two functions (main, and model.py's forward for a
 * second one), code of each outside any module, a backward stack, an empty one: the
 * smoothing between forward events reads the callers on both sides. */
static const uint32_t ws_fwd_main[] = {F_FWD, F_CALL, F_MAIN};
static const uint32_t ws_fwd_other[] = {F_FWD, F_CALL, F_FWD};
static const uint32_t ws_main[] = {F_MAIN};
static const uint32_t ws_other[] = {F_FWD};
static const uint32_t ws_bwd[] = {F_AG_BWD, F_T_BWD, F_MAIN};
static const struct gm_snapshot_stack walk_stacks[] = {
    {NULL, 0}, {ws_fwd_main, 3}, {ws_fwd_other, 3}, {ws_main, 1}, {ws_other, 1}, {ws_bwd, 3},
};

/* What is alive after each event by a replay of the trace's own allocs and frees, matched
 * by address (an alloc at a mapped address displaces the one there, which lives on; a
 * free with nothing mapped ends an allocation alive from the start, marked alive back to
 * the initial state): alive[k + 1][j] for allocation j of 'dev' after event k (k = -1: the
 * initial state). */
static void reference_live(const struct trace *t, const struct gm_analysis_device *dev,
                           uint8_t (*alive)[256])
{
    int64_t mapped[8]; /* per address slot: the alloc event of what is mapped there, or -1 */
    uint8_t cur[256] = {0};
    for (int a = 0; a < 8; a++)
        mapped[a] = -1;
    memset(alive[0], 0, sizeof(alive[0]));
    for (size_t k = 0; k < t->n; k++) {
        const struct gm_snapshot_event *e = &t->ev[k];
        size_t slot = (size_t)((e->addr - 0x100000) / 0x100000);
        for (size_t j = 0; j < dev->n_allocs; j++) {
            const struct gm_analysis_alloc *a = &dev->allocs[j];
            if (e->action == GM_ACTION_ALLOC && a->alloc_event == (int32_t)k)
                cur[j] = 1;
            if (e->action == GM_ACTION_FREE_COMPLETED && mapped[slot] >= 0 &&
                a->alloc_event == (int32_t)mapped[slot])
                cur[j] = 0;
            if (e->action == GM_ACTION_FREE_COMPLETED && mapped[slot] < 0 && a->alloc_event < 0 &&
                a->free_event == (int32_t)k)
                for (size_t q = 0; q <= k; q++)
                    alive[q][j] = 1; /* alive from the start until this free */
        }
        if (e->action == GM_ACTION_ALLOC)
            mapped[slot] = (int64_t)k;
        else if (e->action == GM_ACTION_FREE_COMPLETED)
            mapped[slot] = -1;
        memcpy(alive[k + 1], cur, sizeof(cur));
    }
}

struct live_check {
    const int64_t *ks;
    uint8_t (*alive)[256];
    size_t n_alive; /* allocations alive in all the answers, summed */
};

static enum gm_status check_live(void *ctx, size_t i, const uint32_t *live, size_t n_live,
                                 struct gm_error *err)
{
    struct live_check *c = ctx;
    const uint8_t *want = c->alive[c->ks[i] + 1];
    size_t n_want = 0;
    (void)err;
    for (size_t j = 0; j < 256; j++)
        n_want += want[j];
    assert_int_equal(n_live, n_want);
    for (size_t j = 0; j < n_live; j++) {
        assert_true(want[live[j]]);
        assert_true(j == 0 || live[j - 1] < live[j]); /* ascending */
    }
    c->n_alive += n_live;
    return GM_OK;
}

/* gm_analysis_live_at() at every moment of random traces equals a replay of the trace, the
 * moments asked in order and in any order with repeats. */
static void test_live_at_equals_a_replay_of_random_traces(void **state)
{
    static struct trace t;
    static uint8_t alive[257][256];
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    size_t n_alive = 0;
    (void)state;
    for (int round = 0; round < 300; round++) {
        size_t n = (size_t)(rng_next(&x) % 120);
        int64_t ks[2 * 121];
        t.n = 0;
        for (size_t i = 0; i < n; i++) {
            static const uint8_t actions[] = {GM_ACTION_ALLOC, GM_ACTION_FREE_COMPLETED,
                                              GM_ACTION_FREE_REQUESTED, GM_ACTION_SEGMENT_ALLOC};
            uint64_t addr = 0x100000 + (rng_next(&x) % 8) * 0x100000;
            ev(&t, (enum gm_snapshot_action)actions[rng_next(&x) % sizeof(actions)], addr,
               1 + rng_next(&x) % 0x1000, 1);
        }
        struct gm_snapshot s;
        struct gm_snapshot_device d;
        make_snapshot(&s, &d, &t);
        struct gm_analysis *an = NULL;
        struct gm_error err;
        assert_int_equal(gm_analysis_run(&s, NULL, &an, &err), GM_OK);
        const struct gm_analysis_device *dev = &an->devices[0];
        assert_true(dev->n_allocs <= 256);
        reference_live(&t, dev, alive);
        for (size_t i = 0; i <= n; i++)
            ks[i] = (int64_t)i - 1;
        struct live_check c = {ks, alive, 0};
        assert_int_equal(gm_analysis_live_at(an, dev, ks, n + 1, check_live, &c, &err), GM_OK);
        for (size_t i = 0; i < 2 * (n + 1); i++)
            ks[i] = (int64_t)(rng_next(&x) % (n + 1)) - 1;
        assert_int_equal(gm_analysis_live_at(an, dev, ks, 2 * (n + 1), check_live, &c, &err),
                         GM_OK);
        n_alive += c.n_alive;
        gm_analysis_free(an);
    }
    assert_true(n_alive > 10000); /* the traces keep many allocations alive */
}

/* What the analysis's walks hand each consumer over random traces equals what a pass of its
 * own computes: the phases of the smoothing (which reads stacks only around unknown events
 * between forward ones) and the layout history (its segment events gathered on the
 * analysis's first walk). */
static void test_walk_consumers_of_random_traces(void **state)
{
    (void)state;
    static struct trace t;
    static const uint8_t actions[] = {GM_ACTION_ALLOC,          GM_ACTION_ALLOC,
                                      GM_ACTION_FREE_COMPLETED, GM_ACTION_SEGMENT_ALLOC,
                                      GM_ACTION_SEGMENT_FREE,   GM_ACTION_SEGMENT_MAP,
                                      GM_ACTION_SEGMENT_UNMAP,  GM_ACTION_SNAPSHOT,
                                      GM_ACTION_OTHER,          GM_ACTION_FREE_REQUESTED};
    uint64_t x = 0x2545f4914f6cdd1dULL;
    size_t between = 0, changes = 0;
    for (int round = 0; round < 400; round++) {
        size_t n = (size_t)(rng_next(&x) % 200);
        t.n = 0;
        for (size_t i = 0; i < n; i++) {
            /* forward stacks half the time, so that unknown events fall between them */
            static const uint32_t pick[] = {1, 2, 1, 2, 0, 3, 4, 5};
            uint32_t st = pick[rng_next(&x) % 8];
            uint64_t addr = 0x100000 + (rng_next(&x) % 8) * 0x100000;
            ev(&t, (enum gm_snapshot_action)actions[rng_next(&x) % sizeof(actions)], addr,
               1 + rng_next(&x) % 0x200000, st);
        }
        struct gm_snapshot s;
        struct gm_snapshot_device d;
        make_snapshot(&s, &d, &t);
        s.stacks = walk_stacks;
        s.n_stacks = sizeof(walk_stacks) / sizeof(walk_stacks[0]);
        uint8_t want[256];
        between += reference_phases(&s, t.ev, t.n, want);
        struct gm_analysis *an = NULL;
        struct gm_error err;
        assert_int_equal(gm_analysis_run(&s, NULL, &an, &err), GM_OK);
        const struct gm_analysis_device *dev = &an->devices[0];
        for (size_t k = 0; k < t.n; k++)
            assert_int_equal(gm_analysis_phase_at(dev, (int64_t)k), want[k]);
        struct gm_layout_history h;
        assert_int_equal(gm_layout_history_build(&s, &d, &h, &err), GM_OK);
        assert_same_history(gm_analysis_layout_history(dev), &h);
        changes += h.n_changes;
        gm_layout_history_release(&h);
        gm_analysis_free(an);
    }
    assert_true(between > 1000); /* the traces hold the case many times */
    assert_true(changes > 1000);
}

/* ---- the analysis for a diff: what it keeps equals the full analysis's ---- */

/* Whether the sums per stack a diff's analysis kept for device 'y' are those of the
 * allocations of the full analysis's device 'x' (made by the one rule, ana_stack_sums_add()). */
static bool sums_agree(const struct gm_analysis *full, const struct gm_analysis_device *x,
                       const struct gm_analysis_device *y)
{
    struct ana_stack_sums want;
    bool same;
    assert_true(ana_stack_sums_init(&want, full->snap->n_stacks));
    for (size_t i = 0; i < x->n_allocs; i++) {
        const struct gm_analysis_alloc *a = &x->allocs[i];
        assert_true(ana_stack_sums_add(&want, a->stack, a->bytes, a->alloc_event, a->free_event,
                                       x->peak_event));
    }
    assert_non_null(y->priv_);
    same = want.n == y->priv_->n_sums &&
           (!want.n || !memcmp(want.v, y->priv_->sums, want.n * sizeof(*want.v)));
    ana_stack_sums_release(&want);
    return same;
}

/* gm_analysis_diff_prepare() of 'snap' gives, per device, the peak, its phase and iteration,
 * the split at it and, in place of the allocations of gm_analysis_run() (it keeps none), their
 * sums per stack, and a diff of two such analyses equals the diff of two full ones. */
static void diff_analysis_agrees(const struct gm_snapshot *snap,
                                 const struct gm_category_rules *rules, const char *name)
{
    struct gm_analysis *full, *part;
    struct gm_analysis_diff *df, *dp;
    struct gm_analysis_opts o = {.rules = rules};
    struct gm_error err;
    assert_int_equal(gm_analysis_run(snap, &o, &full, &err), GM_OK);
    assert_int_equal(gm_analysis_diff_prepare(snap, &o, &part, &err), GM_OK);
    assert_int_equal(full->n_devices, part->n_devices);
    for (size_t d = 0; d < full->n_devices; d++) {
        const struct gm_analysis_device *x = &full->devices[d], *y = &part->devices[d];
        if (memcmp(x->at_peak, y->at_peak, sizeof(x->at_peak)) || x->peak_phase != y->peak_phase)
            fail_msg("%s device %d: the diff's analysis differs at the peak", name, (int)x->device);
        assert_int_equal(x->device, y->device);
        assert_true(x->peak_bytes == y->peak_bytes);
        assert_int_equal(x->peak_event, y->peak_event);
        assert_int_equal(x->peak_iteration, y->peak_iteration);
        assert_true(x->at_peak_unexplained == y->at_peak_unexplained);
        assert_true(x->at_peak_lifetime_only == y->at_peak_lifetime_only);
        assert_true(x->has_frames == y->has_frames);
        /* the diff's analysis keeps no allocation, only their sums */
        assert_null(y->allocs);
        assert_int_equal(y->n_allocs, 0);
        if (!sums_agree(full, x, y))
            fail_msg("%s device %d: the diff's sums per stack differ", name, (int)x->device);
    }
    assert_int_equal(gm_analysis_diff(full, full, &df, &err), GM_OK);
    assert_int_equal(gm_analysis_diff(part, part, &dp, &err), GM_OK);
    assert_int_equal(df->n_devices, dp->n_devices);
    for (size_t d = 0; d < df->n_devices; d++) {
        const struct gm_analysis_diff_device *x = &df->devices[d], *y = &dp->devices[d];
        assert_int_equal(x->n_sites, y->n_sites);
        assert_memory_equal(x->at_peak, y->at_peak, sizeof(x->at_peak));
        assert_memory_equal(x->peak_phase, y->peak_phase, sizeof(x->peak_phase));
        for (size_t i = 0; i < x->n_sites; i++) {
            assert_memory_equal(x->sites[i].stack, y->sites[i].stack, sizeof(x->sites[i].stack));
            assert_memory_equal(x->sites[i].bytes, y->sites[i].bytes, sizeof(x->sites[i].bytes));
            assert_memory_equal(x->sites[i].total, y->sites[i].total, sizeof(x->sites[i].total));
            assert_memory_equal(x->sites[i].count, y->sites[i].count, sizeof(x->sites[i].count));
            assert_int_equal(x->sites[i].apart, y->sites[i].apart);
        }
    }
    gm_analysis_diff_free(df);
    gm_analysis_diff_free(dp);
    gm_analysis_free(full);
    gm_analysis_free(part);
}

/* The actions of the random traces, allocations and frees more often than the rest. */
static const uint8_t random_actions[] = {GM_ACTION_ALLOC,
                                         GM_ACTION_ALLOC,
                                         GM_ACTION_ALLOC,
                                         GM_ACTION_FREE_REQUESTED,
                                         GM_ACTION_FREE_COMPLETED,
                                         GM_ACTION_FREE_COMPLETED,
                                         GM_ACTION_SEGMENT_ALLOC,
                                         GM_ACTION_SEGMENT_FREE,
                                         GM_ACTION_SEGMENT_MAP,
                                         GM_ACTION_SEGMENT_UNMAP,
                                         GM_ACTION_OOM,
                                         GM_ACTION_SNAPSHOT,
                                         GM_ACTION_OTHER};

static void test_random_traces(void **state)
{
    (void)state;
    static struct trace t;
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int round = 0; round < 300; round++) {
        size_t n = (size_t)(rng_next(&x) % 250);
        t.n = 0;
        for (size_t i = 0; i < n; i++) {
            uint8_t a = random_actions[rng_next(&x) % sizeof(random_actions)];
            uint64_t addr = 0x10000 + (rng_next(&x) % 12) * 0x1000;
            uint64_t size = 1 + rng_next(&x) % 0x3000;
            ev(&t, (enum gm_snapshot_action)a, addr, size, (uint32_t)(rng_next(&x) % N_ST));
            if (rng_next(&x) % 2) {
                t.ev[t.n - 1].flags |= GM_EVENT_HAS_TIME;
                t.ev[t.n - 1].time_us = (int64_t)(i * 10);
            }
        }
        struct gm_snapshot s;
        struct gm_snapshot_device d;
        make_snapshot(&s, &d, &t);
        struct gm_analysis *an = NULL;
        struct gm_error err;
        struct gm_analysis_opts o = {.max_points = (uint32_t)(1 + rng_next(&x) % 40)};
        assert_int_equal(gm_analysis_run(&s, &o, &an, &err), GM_OK);
        const struct gm_analysis_device *dev = &an->devices[0];
        uint64_t sum = 0;
        for (int c = 0; c < GM_CATEGORY_COUNT; c++)
            sum += dev->at_peak[c];
        assert_int_equal(sum, dev->peak_bytes);
        int64_t next = 0;
        for (size_t r = 0; r < dev->n_phases; r++) {
            assert_int_equal(dev->phases[r].first_event, next);
            next = dev->phases[r].last_event + 1;
        }
        assert_int_equal(next, (int64_t)t.n);
        for (size_t i = 1; i < dev->n_points; i++)
            assert_true(dev->points[i].event > dev->points[i - 1].event);
        for (size_t i = 0; i < dev->n_iterations; i++)
            assert_true(dev->iterations[i].peak_bytes >= dev->iterations[i].end_bytes);
        struct gm_analysis_diff *df = NULL;
        assert_int_equal(gm_analysis_diff(an, an, &df, &err), GM_OK);
        for (size_t i = 0; i < df->devices[0].n_sites; i++)
            assert_int_equal(df->devices[0].sites[i].bytes[0], df->devices[0].sites[i].bytes[1]);
        gm_analysis_diff_free(df);
        gm_analysis_free(an);
        diff_analysis_agrees(&s, NULL, "a random trace");
    }
}

/* A random trace of 1 to 250 events whose times take one of the series pass's roads
 * (0 to 5): every event with a time in small steps (the times kept by the first pass, two
 * bytes a step); a step of more than 2^32 us (1) or a step back (2); some events (3) or
 * none (4) with a time (the trace read again, or no time at all); small steps among steps
 * of 65,535 us or more, kept apart (5). */
static void random_timed_trace(struct trace *t, uint64_t *x, int road)
{
    size_t n = 1 + (size_t)(rng_next(x) % 250);
    int64_t time = 1700000000000000 + (int64_t)(rng_next(x) % 1000);
    t->n = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t addr = 0x10000 + (rng_next(x) % 12) * 0x1000;
        ev(t, (enum gm_snapshot_action)random_actions[rng_next(x) % sizeof(random_actions)], addr,
           1 + rng_next(x) % 0x3000, (uint32_t)(rng_next(x) % N_ST));
        time += (int64_t)(rng_next(x) % 3 ? rng_next(x) % 50 : 0);
        if (road == 1 && i == n / 2)
            time += (int64_t)1 << 33;
        if (road == 2 && i == n / 2)
            time -= 500;
        if (road == 5 && rng_next(x) % 4 == 0)
            time += 65535 - 1 + (int64_t)(rng_next(x) % 3 * (rng_next(x) % 5000000));
        if (road == 4 || (road == 3 && rng_next(x) % 4 == 0)) {
            /* a time without the flag that says it is one: not read */
            if (rng_next(x) % 2)
                t->ev[t->n - 1].time_us = time;
            continue;
        }
        t->ev[t->n - 1].flags |= GM_EVENT_HAS_TIME;
        t->ev[t->n - 1].time_us = time;
    }
}

/* The series over random traces whose times take each road of the series pass: every event
 * with a time in small steps (the times kept by the first pass, two bytes a step), small
 * steps among steps of 65,535 us or more (kept apart), a step of more than 2^32 us or a
 * step back, some events or none with a time (the trace read again, or no time at
 * all).  Each point holds the state after its event as gm_snapshot_walk() replays it (its
 * time, allocated and reserved bytes), the points keep the least and the most allocated
 * bytes of the whole trace, and each iteration has the times of its first and last events. */
static void test_series_of_random_traces_holds_each_events_state(void **state)
{
    (void)state;
    static struct trace t;
    uint64_t x = 0x5851f42d4c957f2dULL;
    for (int round = 0; round < 500; round++) {
        random_timed_trace(&t, &x, round % 6);
        struct gm_snapshot s;
        struct gm_snapshot_device d;
        make_snapshot(&s, &d, &t);
        struct gm_analysis *an = NULL;
        struct gm_error err;
        struct gm_analysis_opts o = {.max_points = (uint32_t)(1 + rng_next(&x) % 60)};
        assert_int_equal(gm_analysis_run(&s, &o, &an, &err), GM_OK);
        const struct gm_analysis_device *dev = &an->devices[0];

        static uint64_t allocated[256], reserved[256];
        struct gm_snapshot_timeline tl;
        struct gm_snapshot_walk wk;
        const struct gm_snapshot_event *e;
        assert_int_equal(gm_snapshot_timeline(&s, 0, 0, &tl, &err), GM_OK);
        assert_int_equal(gm_snapshot_walk_init(&wk, &s, &d, &tl, &err), GM_OK);
        uint64_t least = tl.initial_bytes, most = tl.initial_bytes;
        while ((e = gm_snapshot_walk_next(&wk)) != NULL) {
            allocated[wk.cur.index] = wk.allocated;
            reserved[wk.cur.index] = wk.reserved;
            least = wk.allocated < least ? wk.allocated : least;
            most = wk.allocated > most ? wk.allocated : most;
        }
        gm_snapshot_walk_release(&wk);

        uint64_t p_least = UINT64_MAX, p_most = 0;
        assert_true(dev->n_points > 0);
        assert_int_equal(dev->points[0].event, -1);
        for (size_t i = 0; i < dev->n_points; i++) {
            const struct gm_analysis_point *pt = &dev->points[i];
            uint64_t sum = 0;
            for (int c = 0; c < GM_CATEGORY_COUNT; c++)
                sum += pt->bytes[c];
            assert_int_equal(sum, pt->total);
            p_least = pt->total < p_least ? pt->total : p_least;
            p_most = pt->total > p_most ? pt->total : p_most;
            if (pt->event < 0) {
                assert_int_equal(pt->total, tl.initial_bytes);
                continue;
            }
            const struct gm_snapshot_event *pe = &t.ev[pt->event];
            bool timed = (pe->flags & GM_EVENT_HAS_TIME) != 0;
            assert_int_equal(pt->total, allocated[pt->event]);
            assert_int_equal(pt->reserved, reserved[pt->event]);
            assert_int_equal(pt->has_time, timed);
            assert_int_equal(pt->time_us, timed ? pe->time_us : 0);
        }
        assert_int_equal(p_least, least);
        assert_int_equal(p_most, most);
        for (size_t i = 0; i < dev->n_iterations; i++) {
            const struct gm_analysis_iteration *iv = &dev->iterations[i];
            const struct gm_snapshot_event *f = &t.ev[iv->first_event];
            const struct gm_snapshot_event *l = &t.ev[iv->last_event];
            bool timed = (f->flags & l->flags & GM_EVENT_HAS_TIME) != 0;
            assert_int_equal(iv->has_time, timed);
            assert_int_equal(iv->start_us, timed ? f->time_us : 0);
            assert_int_equal(iv->end_us, timed ? l->time_us : 0);
        }
        gm_snapshot_timeline_release(&tl);
        gm_analysis_free(an);
    }
}

/* 'p' and 'q' the same series point. */
static bool same_point(const struct gm_analysis_point *p, const struct gm_analysis_point *q)
{
    return p->event == q->event && p->has_time == q->has_time && p->time_us == q->time_us &&
           p->phase == q->phase && p->total == q->total && p->reserved == q->reserved &&
           memcmp(p->bytes, q->bytes, sizeof(p->bytes)) == 0;
}

/* The series pass stops only where a point may be made: between two stops it takes the
 * allocations and frees in trace order and finds the times it needs from the blocks of 256
 * events the first pass keeps, or with the report's totals takes each event in turn; with a
 * user phase it handles every event in its main loop.  All three give the same points,
 * iterations and split at the peak (and with the totals, the categories at each of their
 * buckets' maximum are the allocations alive there), on random traces of 300 to 4,000 events
 * (segment events rare, so the pass runs far between its stops) whose times are small steps, small
 * steps among steps of 65,535 us or more, or none (an axis of event indexes), with any number of
 * buckets. */
static void test_series_between_stops_equals_the_series_of_every_event(void **state)
{
    static struct gm_snapshot_event evs[4000];
    static const uint8_t common[] = {GM_ACTION_ALLOC, GM_ACTION_ALLOC, GM_ACTION_FREE_REQUESTED,
                                     GM_ACTION_FREE_COMPLETED, GM_ACTION_FREE_COMPLETED};
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    size_t n_points = 0;
    (void)state;
    for (int round = 0; round < 90; round++) {
        int road = round % 3;
        size_t n = 300 + (size_t)(rng_next(&x) % 3700);
        int64_t time = 1700000000000000 + (int64_t)(rng_next(&x) % 1000);
        for (size_t i = 0; i < n; i++) {
            struct gm_snapshot_event *e = &evs[i];
            memset(e, 0, sizeof(*e));
            e->action = rng_next(&x) % 100 ? common[rng_next(&x) % sizeof(common)]
                                           : random_actions[rng_next(&x) % sizeof(random_actions)];
            e->addr = 0x10000 + (rng_next(&x) % 40) * 0x1000;
            e->size = 1 + rng_next(&x) % 0x3000;
            e->stack = (uint32_t)(rng_next(&x) % N_ST);
            e->flags = GM_EVENT_HAS_ADDR | GM_EVENT_HAS_FRAMES;
            time += (int64_t)(rng_next(&x) % 3 ? rng_next(&x) % 50 : 0);
            if (road == 1 && rng_next(&x) % 8 == 0)
                time += 65535 - 1 + (int64_t)(rng_next(&x) % 3 * (rng_next(&x) % 5000000));
            if (road != 2) {
                e->flags |= GM_EVENT_HAS_TIME;
                e->time_us = time;
            }
        }
        struct trace none;
        struct gm_snapshot s;
        struct gm_snapshot_device d;
        none.n = 0;
        make_snapshot(&s, &d, &none);
        d.events = evs;
        d.n_events = s.n_events = n;
        /* the reference: a user phase over the first half makes the pass handle every event */
        struct gm_snapshot_annotation marks[2] = {
            {.name = "gpumem.phase:probe", .stage = "START", .device = 0, .is_start = true},
            {.name = "gpumem.phase:probe", .stage = "END", .device = 0, .time_us = time}};
        struct gm_snapshot sr = s;
        marks[0].time_us = evs[0].time_us;
        marks[1].time_us = evs[n / 2].time_us;
        sr.annotations = marks;
        sr.n_annotations = 2;
        struct gm_analysis *an[3] = {NULL, NULL, NULL};
        struct gm_error err;
        uint32_t max_points = (uint32_t)(4 + rng_next(&x) % 400);
        struct gm_analysis_opts oa = {.max_points = max_points};
        struct gm_analysis_opts ob = {.max_points = max_points, .totals = true};
        assert_int_equal(gm_analysis_run(&sr, &oa, &an[0], &err), GM_OK);
        assert_int_equal(gm_analysis_run(&s, &oa, &an[1], &err), GM_OK);
        assert_int_equal(gm_analysis_run(&s, &ob, &an[2], &err), GM_OK);
        const struct gm_analysis_device *dr = &an[0]->devices[0];
        assert_int_equal(dr->n_user_ranges, 1);
        assert_non_null(gm_analysis_totals(&an[2]->devices[0]));
        for (int v = 1; v < 3; v++) {
            const struct gm_analysis_device *da = &an[v]->devices[0];
            assert_int_equal(da->n_user_ranges, 0);
            assert_int_equal(da->n_points, dr->n_points);
            for (size_t i = 0; i < da->n_points; i++)
                if (!same_point(&da->points[i], &dr->points[i]))
                    fail_msg("round %d (road %d, %zu events, %u points, %s): point %zu differs "
                             "(event %lld, not %lld)",
                             round, road, n, max_points, v == 1 ? "alone" : "with the totals", i,
                             (long long)da->points[i].event, (long long)dr->points[i].event);
            assert_int_equal(da->n_iterations, dr->n_iterations);
            for (size_t i = 0; i < da->n_iterations; i++)
                assert_memory_equal(&da->iterations[i], &dr->iterations[i],
                                    sizeof(da->iterations[i]));
            assert_memory_equal(da->at_peak, dr->at_peak, sizeof(da->at_peak));
            assert_memory_equal(da->at_end, dr->at_end, sizeof(da->at_end));
        }
        n_points += dr->n_points;
        /* the categories at the totals' kmax's (gm_analysis_totals_cats()): a row for each
         * run of buckets with one kmax, the sum over the allocations alive after it */
        {
            const struct gm_analysis_device *dt = &an[2]->devices[0];
            const struct gm_lod *al = &gm_analysis_totals(dt)->alloc;
            size_t n_rows = 0, r = 0;
            const uint64_t *cats = gm_analysis_totals_cats(dt, &n_rows);
            assert_non_null(cats);
            for (unsigned b = 0; b < al->n; b++) {
                uint64_t want[GM_CATEGORY_COUNT] = {0};
                int64_t k = al->b[b].kmax;
                if (b && k == al->b[b - 1].kmax)
                    continue;
                for (size_t i = 0; i < dt->n_allocs; i++) {
                    const struct gm_analysis_alloc *a = &dt->allocs[i];
                    if (a->alloc_event <= k && (a->free_event < 0 || a->free_event > k))
                        want[a->category] += a->bytes;
                }
                assert_true(r < n_rows);
                if (memcmp(want, cats + r * GM_CATEGORY_COUNT, sizeof(want)) != 0)
                    fail_msg("round %d (road %d): row %zu's categories (kmax %lld) differ", round,
                             road, r, (long long)k);
                r++;
            }
            assert_int_equal(r, n_rows);
        }
        for (int v = 0; v < 3; v++)
            gm_analysis_free(an[v]);
    }
    assert_true(n_points > 5000);
}

/* The analysis without the series ('figures') holds the whole one's figures on every
 * device: the split at the peak and at the end, every iteration's bytes, peak, phase and
 * times, and every leak's stack, bytes, count and iterations.  Returns the iterations and
 * the leaks compared. */
static size_t figures_equal_the_whole(const struct gm_analysis *whole,
                                      const struct gm_analysis *figures)
{
    size_t n_compared = 0;
    assert_int_equal(whole->n_devices, figures->n_devices);
    for (size_t d = 0; d < whole->n_devices; d++) {
        const struct gm_analysis_device *w = &whole->devices[d], *f = &figures->devices[d];
        assert_int_equal(f->n_points, 0);
        assert_memory_equal(w->at_peak, f->at_peak, sizeof(w->at_peak));
        assert_memory_equal(w->at_end, f->at_end, sizeof(w->at_end));
        assert_true(w->at_peak_unexplained == f->at_peak_unexplained);
        assert_true(w->at_peak_lifetime_only == f->at_peak_lifetime_only);
        assert_int_equal(w->n_iterations, f->n_iterations);
        for (size_t i = 0; i < w->n_iterations; i++)
            assert_memory_equal(&w->iterations[i], &f->iterations[i], sizeof(w->iterations[i]));
        assert_int_equal(w->n_leaks, f->n_leaks);
        for (size_t i = 0; i < w->n_leaks; i++) {
            const struct gm_analysis_leak *a = &w->leaks[i], *b = &f->leaks[i];
            assert_int_equal(a->stack, b->stack);
            assert_int_equal(a->kind, b->kind);
            assert_true(a->bytes_per_iteration == b->bytes_per_iteration);
            assert_true(a->total_bytes == b->total_bytes);
            assert_true(a->count == b->count);
            assert_int_equal(a->n_iterations, b->n_iterations);
            assert_int_equal(a->first_iteration, b->first_iteration);
            assert_int_equal(a->last_iteration, b->last_iteration);
        }
        n_compared += w->n_iterations + w->n_leaks;
    }
    return n_compared;
}

/* The analysis without the series (gm_analysis_run_figures(), whose pass stops only where
 * a figure is made) gives the whole analysis's figures (figures_equal_the_whole()) on
 * random traces of every road of random_timed_trace(), on an empty one, and on two devices
 * of such traces in one snapshot. */
static void test_figures_of_random_traces_equal_the_whole_analysis(void **state)
{
    (void)state;
    static struct trace t, t2;
    uint64_t x = 0x2545f4914f6cdd1dULL;
    size_t n_compared = 0;
    for (int round = 0; round < 600; round++) {
        random_timed_trace(&t, &x, round % 6);
        if (round == 0)
            t.n = 0; /* no event: the pass has nowhere to stop */
        struct gm_snapshot s;
        struct gm_snapshot_device d[2];
        make_snapshot(&s, &d[0], &t);
        if (round % 3 == 2) {
            /* a second device, of another road */
            random_timed_trace(&t2, &x, (round + 1) % 6);
            memset(&d[1], 0, sizeof(d[1]));
            d[1].index = 1;
            d[1].has_trace = true;
            d[1].events = t2.ev;
            d[1].n_events = t2.n;
            s.n_devices = 2;
            s.n_events += t2.n;
        }
        struct gm_analysis *whole = NULL, *figures = NULL;
        struct gm_error err;
        assert_int_equal(gm_analysis_run(&s, NULL, &whole, &err), GM_OK);
        assert_int_equal(gm_analysis_run_figures(&s, NULL, &figures, &err), GM_OK);
        n_compared += figures_equal_the_whole(whole, figures);
        gm_analysis_free(figures);
        gm_analysis_free(whole);
    }
    assert_true(n_compared > 100); /* the traces have iterations and leaks to compare */
}

/* ---- the peaks: from the analysis and from the timeline alone ---- */

/* Both ways of gm_analysis_peaks() give the same figures and groups on 'snap'. */
static void peaks_agree(const struct gm_snapshot *snap, const char *name)
{
    struct gm_analysis *an;
    struct gm_analysis_peaks a, t;
    struct gm_error err;
    assert_int_equal(gm_analysis_run(snap, NULL, &an, &err), GM_OK);
    assert_int_equal(gm_analysis_peaks(snap, an, NULL, &a, &err), GM_OK);
    assert_int_equal(gm_analysis_peaks(snap, NULL, NULL, &t, &err), GM_OK);
    assert_int_equal(a.n_devices, t.n_devices);
    for (size_t d = 0; d < a.n_devices; d++) {
        const struct gm_peak_device *x = &a.devices[d], *y = &t.devices[d];
        if (x->n_live != y->n_live || x->n_groups != y->n_groups ||
            x->timeline.peak_bytes != y->timeline.peak_bytes)
            fail_msg("%s device %d: %llu live in %zu groups from the analysis, %llu in %zu from "
                     "the timeline",
                     name, (int)x->device, (unsigned long long)x->n_live, x->n_groups,
                     (unsigned long long)y->n_live, y->n_groups);
        assert_int_equal(x->device, y->device);
        assert_int_equal(x->timeline.peak_event_index, y->timeline.peak_event_index);
        assert_true(x->timeline.reserved_at_peak_bytes == y->timeline.reserved_at_peak_bytes);
        assert_true(x->timeline.final_bytes == y->timeline.final_bytes);
        assert_int_equal(x->has_oom, y->has_oom);
        assert_true(x->user_phase == y->user_phase ||
                    (x->user_phase && y->user_phase && !strcmp(x->user_phase, y->user_phase)));
        for (size_t g = 0; g < x->n_groups; g++) {
            assert_int_equal(x->groups[g].stack, y->groups[g].stack);
            assert_true(x->groups[g].bytes == y->groups[g].bytes);
            assert_true(x->groups[g].count == y->groups[g].count);
        }
        assert_memory_equal(x->apart, y->apart, x->n_apart * sizeof(*x->apart));
    }
    gm_analysis_peaks_release(&a);
    gm_analysis_peaks_release(&t);
    gm_analysis_free(an);
}

static void peaks_agree_file(const char *path)
{
    struct gm_snapshot *snap;
    struct gm_error err;
    assert_int_equal(gm_snapshot_load(path, NULL, &snap, &err), GM_OK);
    peaks_agree(snap, path);
    gm_snapshot_free(snap);
}

/* The example job (with its phases when 'phases') loaded from memory; *buf (*len bytes)
 * holds the pickle the snapshot reads from, freed by the caller after the snapshot */
static struct gm_snapshot *load_example(bool phases, char **buf, size_t *len)
{
    FILE *f;
    struct gm_example_opts o;
    struct gm_snapshot *snap = NULL;
    struct gm_error err;
    *buf = NULL;
    f = open_memstream(buf, len);
    gm_example_opts_init(&o);
    o.phases = phases;
    assert_non_null(f);
    assert_int_equal(gm_example_write(f, &o, &err), GM_OK);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(gm_snapshot_load_mem(*buf, *len, NULL, &snap, &err), GM_OK);
    return snap;
}

static void test_peaks_from_the_analysis_match_the_timeline(void **state)
{
    const char *src = getenv("GM_SOURCE_DIR");
    char path[4096];
    (void)state;
    {
        /* the example job, with its leak and its phases */
        char *buf;
        size_t len;
        struct gm_snapshot *snap = load_example(true, &buf, &len);
        peaks_agree(snap, "the example");
        gm_snapshot_free(snap);
        free(buf);
    }
    if (src) {
        snprintf(path, sizeof(path), "%s/tests/fuzz/corpus/analysis/train_leak.pickle", src);
        peaks_agree_file(path);
    }
}

/* The example job, with its phases, alone and with category rules of each kind (frames,
 * annotation): the diff's analysis keeps what the full one finds. */
static void test_diff_analysis_of_the_example_equals_the_full_one(void **state)
{
    static const char rules_text[] =
        "{\"rules\": [{\"category\": \"activation\", \"function\": \"^cross_entropy$\"},"
        " {\"category\": \"input\", \"annotation\": \"^Optimizer\\\\.step#\"}]}";
    struct gm_category_rules *rules;
    struct gm_error err;
    char *buf;
    size_t len;
    struct gm_snapshot *snap = load_example(true, &buf, &len);
    (void)state;
    assert_int_equal(gm_category_rules_parse(rules_text, sizeof(rules_text) - 1, &rules, &err),
                     GM_OK);
    diff_analysis_agrees(snap, NULL, "the example");
    diff_analysis_agrees(snap, rules, "the example with rules");
    gm_category_rules_free(rules);
    gm_snapshot_free(snap);
    free(buf);
}

static enum gm_status never_called_live(void *ctx, size_t i, const uint32_t *live, size_t n_live,
                                        struct gm_error *err)
{
    (void)ctx, (void)i, (void)live, (void)n_live, (void)err;
    fail_msg("a diff-only analysis answered a live-set question");
    return GM_OK;
}

static enum gm_status never_called_layout(void *ctx, size_t i, const struct gm_layout *l,
                                          struct gm_error *err)
{
    (void)ctx, (void)i, (void)l, (void)err;
    fail_msg("a diff-only analysis answered a layout question");
    return GM_OK;
}

/* The JSON document 'kind' (with its series when 'series') of 'an' into *out (malloc'd). */
static enum gm_status doc_of(const struct gm_analysis *an, enum gm_analysis_doc_kind kind,
                             bool series, char **out)
{
    size_t len;
    struct gm_error err;
    struct gm_analysis_doc_file file = {.path = "example.pickle", .an = an};
    struct gm_analysis_doc doc = {.kind = kind, .files = &file, .n_files = 1, .series = series};
    FILE *f = open_memstream(out, &len);
    assert_non_null(f);
    enum gm_status st = gm_analysis_json(f, &doc, &err);
    assert_int_equal(fclose(f), 0);
    return st;
}

/* Opens a snapshot pickle in a new writer on f: a dict of 'keys' entries, the first two no
 * segments and the list of 'n_devices' device traces, left open for the caller's traces
 * (the caller closes that list, writes any other keys and closes the dict). */
static struct gm_pickle_writer *pickle_doc_begin(FILE *f, uint32_t keys, uint32_t n_devices)
{
    struct gm_pickle_writer *w;
    struct gm_error err;
    assert_non_null(f);
    assert_int_equal(gm_pickle_writer_new(f, 4, &w, &err), GM_OK);
    gm_pickle_dict_begin(w, keys);
    gm_pickle_str(w, "segments");
    gm_pickle_list_begin(w, 0);
    gm_pickle_list_end(w);
    gm_pickle_str(w, "device_traces");
    gm_pickle_list_begin(w, n_devices);
    return w;
}

/* The end of a document pickle_doc_begin() began, after its last device's trace: the list of
 * traces, the dict, the writer and the file 'f' closed. */
static void pickle_doc_end(struct gm_pickle_writer *w, FILE *f)
{
    struct gm_error err;
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
    assert_int_equal(gm_pickle_writer_finish(w, &err), GM_OK);
    assert_int_equal(fclose(f), 0);
}

/* ---- a load that keeps no events (gm_snapshot_opts.consume_events) ---- */

enum ooms_times {
    OOMS_FORWARD, /* every 10 us */
    OOMS_BACK,    /* the same, 5 ms back at event 300 */
    OOMS_NONE,    /* no time_us */
};

/* A trace of 'n' allocations on one stream, each freed 3 events later, with oom events at
 * events 100 and 400 (and 'n' large enough to hold them), its times as 'tk' says; annotations:
 * an Optimizer.step# range and a gpumem.phase range over parts of it. */
static void write_ooms_trace(char **buf, size_t *len, size_t n, enum ooms_times tk)
{
    static const struct {
        const char *name, *stage;
        int64_t time_us;
    } marks[] = {{"gpumem.phase:warmup", "START", 1500},
                 {"Optimizer.step#SGD.step", "START", 2000},
                 {"Optimizer.step#SGD.step", "END", 4000},
                 {"gpumem.phase:warmup", "END", 6000}};
    bool back = tk == OOMS_BACK;
    struct gm_pickle_writer *w;
    struct gm_error err;
    FILE *f = open_memstream(buf, len);
    size_t k = 0;
    w = pickle_doc_begin(f, 3, 1);
    gm_pickle_list_begin(w, 2 * n + 2);
    for (size_t i = 0; i < 2 * n + 2; i++, k++) {
        bool oom = k == 100 || k == 400;
        size_t a = i < 3 ? i : (i - 3) / 2; /* alloc a, then free a - 3 ... */
        const char *action = oom ? "oom" : i < 3 || i % 2 ? "alloc" : "free_completed";
        int64_t t = 1000 + 10 * (int64_t)k - (back && k >= 300 ? 5000 : 0);
        if (!oom && !(i < 3 || i % 2))
            a = a > 0 ? a - 1 : 0;
        gm_pickle_dict_begin(w, tk == OOMS_NONE ? 5 : 6);
        gm_pickle_str(w, "action");
        gm_pickle_str(w, action);
        gm_pickle_str(w, oom ? "device_free" : "addr");
        gm_pickle_uint(w, oom ? 1u << 20 : 0x7f0000000000u + 4096u * (uint64_t)a);
        gm_pickle_str(w, "size");
        gm_pickle_uint(w, oom ? 1u << 30 : 512u + (uint64_t)(a % 97));
        gm_pickle_str(w, "stream");
        gm_pickle_uint(w, 0);
        if (tk != OOMS_NONE) {
            gm_pickle_str(w, "time_us");
            gm_pickle_int(w, t);
        }
        gm_pickle_str(w, "frames");
        gm_pickle_list_begin(w, 1);
        gm_pickle_dict_begin(w, 3);
        gm_pickle_str(w, "filename");
        gm_pickle_str(w, "train.py");
        gm_pickle_str(w, "line");
        gm_pickle_int(w, 10 + (int64_t)(a % 5));
        gm_pickle_str(w, "name");
        gm_pickle_str(w, "forward");
        gm_pickle_dict_end(w);
        gm_pickle_list_end(w);
        gm_pickle_dict_end(w);
    }
    gm_pickle_list_end(w);
    gm_pickle_list_end(w);
    gm_pickle_str(w, "external_annotations");
    gm_pickle_list_begin(w, sizeof(marks) / sizeof(marks[0]));
    for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
        gm_pickle_dict_begin(w, 4);
        gm_pickle_str(w, "device");
        gm_pickle_int(w, 0);
        gm_pickle_str(w, "name");
        gm_pickle_str(w, marks[i].name);
        gm_pickle_str(w, "stage");
        gm_pickle_str(w, marks[i].stage);
        gm_pickle_str(w, "time_us");
        gm_pickle_int(w, marks[i].time_us);
        gm_pickle_dict_end(w);
    }
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
    assert_int_equal(gm_pickle_writer_finish(w, &err), GM_OK);
    assert_int_equal(fclose(f), 0);
}

static struct gm_snapshot *load_with_consumer(const char *buf, size_t len, bool consume)
{
    struct gm_snapshot_opts o = {0};
    struct gm_snapshot *snap = NULL;
    struct gm_error err;
    o.consumer = gm_analysis_first_pass_consumer();
    o.consume_events = consume;
    assert_int_equal(gm_snapshot_load_mem(buf, len, &o, &snap, &err), GM_OK);
    return snap;
}

/* The HTML report of 'an' (NULL: none) into a string (free()). */
static char *report_of(const struct gm_snapshot *snap, const struct gm_analysis *an)
{
    char *out = NULL;
    size_t len;
    struct gm_report_opts ro;
    struct gm_error err;
    FILE *f = open_memstream(&out, &len);
    memset(&ro, 0, sizeof(ro));
    assert_non_null(f);
    assert_int_equal(gm_report_html(f, snap, an, &ro, &err), GM_OK);
    assert_int_equal(fclose(f), 0);
    return out;
}

/* The pickle buf[0..len) loaded keeping its events and loaded consuming them: the second keeps
 * none ('consumed') or reads the file again with them; either way the events it keeps aside
 * are those of the trace (its first, its last, each oom, and no other) and the analyses, their
 * documents and the report are the same bytes. */
static void consumed_load_agrees(const char *buf, size_t len, const struct gm_category_rules *rules,
                                 bool consumed)
{
    struct gm_snapshot *s[2] = {load_with_consumer(buf, len, false),
                                load_with_consumer(buf, len, true)};
    struct gm_analysis *an[2];
    struct gm_analysis_opts ao = {.totals = true, .rules = rules};
    struct gm_error err;
    static const enum gm_analysis_doc_kind kinds[] = {GM_DOC_CATEGORIES, GM_DOC_LEAKS, GM_DOC_OOM};
    assert_false(s[0]->events_consumed);
    assert_int_equal(s[1]->events_consumed, consumed);
    assert_int_equal(s[0]->n_events, s[1]->n_events);
    for (size_t d = 0; d < s[0]->n_devices; d++) {
        const struct gm_snapshot_device *full = &s[0]->devices[d], *kept = &s[1]->devices[d];
        struct gm_snapshot_cursor c;
        const struct gm_snapshot_event *e;
        struct gm_snapshot_oom o[2];
        bool has[2];
        gm_snapshot_cursor_init(&c, kept, 0);
        if (consumed && kept->n_events)
            assert_null(gm_snapshot_cursor_next(&c)); /* no event stored */
        gm_snapshot_cursor_init(&c, full, 0);
        while ((e = gm_snapshot_cursor_next(&c)) != NULL) {
            struct gm_snapshot_event x;
            bool aside =
                c.index == 0 || c.index + 1 == full->n_events || e->action == GM_ACTION_OOM;
            bool got = gm_snapshot_event_kept(kept, c.index, &x);
            assert_int_equal(got, !consumed || aside);
            if (got)
                assert_true(x.addr == e->addr && x.size == e->size && x.time_us == e->time_us &&
                            x.stack == e->stack && x.extra == e->extra && x.action == e->action &&
                            x.flags == e->flags);
        }
        for (int i = 0; i < 2; i++)
            has[i] = gm_snapshot_first_oom(s[i], &s[i]->devices[d], &o[i]);
        assert_int_equal(has[0], has[1]);
        if (has[0])
            assert_true(o[0].event == o[1].event && o[0].requested == o[1].requested &&
                        o[0].device_free == o[1].device_free && o[0].stream == o[1].stream);
    }
    for (int i = 0; i < 2; i++)
        assert_int_equal(gm_analysis_run(s[i], &ao, &an[i], &err), GM_OK);
    assert_false(gm_analysis_reads_trace(an[1]));
    {
        /* the same loads analysed without the totals (not asked for): a page drawn from a
         * consumed trace would need its events, so the caller must read the file again (true);
         * a load that kept them never needs that (false) */
        struct gm_analysis_opts bare = {.totals = false, .rules = rules};
        for (int i = 0; i < 2; i++) {
            struct gm_snapshot *b = load_with_consumer(buf, len, i == 1);
            struct gm_analysis *ba;
            assert_int_equal(gm_analysis_run(b, &bare, &ba, &err), GM_OK);
            assert_int_equal(gm_analysis_reads_trace(ba), i == 1 && consumed && b->n_events > 0);
            gm_analysis_free(ba);
            gm_snapshot_free(b);
        }
    }
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        char *doc[2];
        for (int i = 0; i < 2; i++)
            assert_int_equal(doc_of(an[i], kinds[k], kinds[k] != GM_DOC_LEAKS, &doc[i]), GM_OK);
        assert_string_equal(doc[0], doc[1]);
        free(doc[0]);
        free(doc[1]);
    }
    {
        char *page[2] = {report_of(s[0], an[0]), report_of(s[1], an[1])};
        assert_string_equal(page[0], page[1]);
        free(page[0]);
        free(page[1]);
    }
    for (int i = 0; i < 2; i++) {
        gm_analysis_free(an[i]);
        gm_snapshot_free(s[i]);
    }
    if (!rules) {
        /* the analysis for a diff (without rules, as `snapshot diff` loads it) and the diff of
         * each snapshot with itself: the same document */
        char *doc[2];
        for (int i = 0; i < 2; i++) {
            struct gm_analysis_diff *df;
            struct gm_analysis_doc_file files[2];
            struct gm_analysis_doc dd;
            size_t dlen;
            FILE *f = open_memstream(&doc[i], &dlen);
            s[i] = load_with_consumer(buf, len, i == 1);
            assert_int_equal(gm_analysis_diff_prepare(s[i], NULL, &an[i], &err), GM_OK);
            assert_int_equal(gm_analysis_diff(an[i], an[i], &df, &err), GM_OK);
            files[0] = (struct gm_analysis_doc_file){.path = "a.pickle", .an = an[i]};
            files[1] = (struct gm_analysis_doc_file){.path = "b.pickle", .an = an[i]};
            memset(&dd, 0, sizeof(dd));
            dd.kind = GM_DOC_DIFF;
            dd.files = files;
            dd.n_files = 2;
            dd.diff = df;
            assert_non_null(f);
            assert_int_equal(gm_analysis_json(f, &dd, &err), GM_OK);
            assert_int_equal(fclose(f), 0);
            gm_analysis_diff_free(df);
            gm_analysis_free(an[i]);
            gm_snapshot_free(s[i]);
        }
        assert_string_equal(doc[0], doc[1]);
        free(doc[0]);
        free(doc[1]);
    }
}

static const char annotation_rules[] =
    "{\"rules\": [{\"category\": \"activation\", \"function\": \"^cross_entropy$\"},"
    " {\"category\": \"input\", \"annotation\": \"^Optimizer\\\\.step#\"}]}";

/* consume_events keeps no event where the consumers answer: the example job with and without
 * its phases, and a trace with oom events (fragmentation at each from the events kept aside),
 * with and without category rules by annotation (the Optimizer.step# ranges, the user's
 * phases and the rules applied by the times the scan kept); and reads the file again with its
 * events where the analysis would read them: times that go back. */
static void test_consumed_load_answers_as_one_that_keeps_the_events(void **state)
{
    struct gm_category_rules *rules;
    struct gm_error err;
    char *buf;
    size_t len;
    (void)state;
    assert_int_equal(
        gm_category_rules_parse(annotation_rules, strlen(annotation_rules), &rules, &err), GM_OK);
    for (int phases = 0; phases < 2; phases++) {
        struct gm_snapshot *snap = load_example(phases, &buf, &len);
        gm_snapshot_free(snap);
        consumed_load_agrees(buf, len, NULL, true);
        consumed_load_agrees(buf, len, rules, true);
        free(buf);
    }
    for (int back = 0; back < 2; back++) {
        struct gm_snapshot *snap;
        write_ooms_trace(&buf, &len, 600, back ? OOMS_BACK : OOMS_FORWARD);
        snap = load_with_consumer(buf, len, true);
        assert_int_equal(snap->devices[0].n_actions[GM_ACTION_OOM], 2);
        assert_int_equal(snap->n_annotations, 4);
        gm_snapshot_free(snap);
        consumed_load_agrees(buf, len, NULL, !back);
        consumed_load_agrees(buf, len, rules, !back);
        free(buf);
    }
    gm_category_rules_free(rules);
}

/* Under every memory limit the caller gives, from 64 KiB up to what the load needs, a load
 * asked to consume the events keeps them (holding less, it would pass limits that a load with
 * the events fails): it fails where one that keeps them fails, with the same error, and
 * succeeds where it does. */
static void test_consumed_load_under_memory_limits(void **state)
{
    char *buf;
    size_t len;
    uint64_t ok_from = 0;
    (void)state;
    write_ooms_trace(&buf, &len, 600, OOMS_FORWARD);
    for (uint64_t limit = 64 << 10; !ok_from; limit += 16 << 10) {
        struct gm_snapshot_opts o = {0};
        struct gm_snapshot *s[2] = {NULL, NULL};
        struct gm_error err[2];
        enum gm_status st[2];
        o.consumer = gm_analysis_first_pass_consumer();
        o.memory_limit = limit;
        for (int i = 0; i < 2; i++) {
            o.consume_events = i == 1;
            st[i] = gm_snapshot_load_mem(buf, len, &o, &s[i], &err[i]);
        }
        assert_int_equal(st[0], st[1]);
        if (st[0] != GM_OK) {
            assert_string_equal(err[0].msg, err[1].msg);
            assert_true(err[0].offset == err[1].offset);
        } else {
            ok_from = limit;
            assert_false(s[1]->events_consumed);
        }
        gm_snapshot_free(s[0]);
        gm_snapshot_free(s[1]);
        assert_true(limit < (64u << 20));
    }
    assert_true(ok_from > 64 << 10); /* some limits refused the file */
    free(buf);
}

/* An analysis that would read a trace whose events the load consumed fails instead (its
 * caller reads the file again with them: snapcli_load_many()): the category rules by
 * annotation and the user's phases, on a trace whose events have no time (annotations have
 * one), read the events for their times. */
static void test_consumed_load_refuses_what_reads_the_trace(void **state)
{
    const char *rules_text = annotation_rules;
    struct gm_category_rules *rules;
    struct gm_analysis *an = NULL;
    struct gm_analysis_opts ao = {0};
    struct gm_error err;
    struct gm_snapshot *snap;
    char *buf;
    size_t len;
    (void)state;
    assert_int_equal(gm_category_rules_parse(rules_text, strlen(rules_text), &rules, &err), GM_OK);
    write_ooms_trace(&buf, &len, 600, OOMS_NONE);
    for (int with_rules = 0; with_rules < 2; with_rules++) {
        /* (without the rules, the user's phases alone) */
        ao.rules = with_rules ? rules : NULL;
        snap = load_with_consumer(buf, len, true);
        assert_true(snap->events_consumed);
        assert_int_equal(gm_analysis_run(snap, &ao, &an, &err), GM_ERR_INVALID);
        assert_null(an);
        assert_non_null(strstr(err.msg, "consumed"));
        gm_snapshot_free(snap);
        snap = load_with_consumer(buf, len, false);
        assert_int_equal(gm_analysis_run(snap, &ao, &an, &err), GM_OK);
        gm_analysis_free(an);
        gm_snapshot_free(snap);
    }
    gm_category_rules_free(rules);
    free(buf);
}

/* An analysis without the series holds every other figure of the whole one: its documents
 * without a series are the same bytes; one with the series, and the calls that draw it
 * (gm_analysis_require_series()), refuse it. */
static void test_analysis_without_series_keeps_the_figures(void **state)
{
    char *buf, *a, *b;
    size_t len;
    struct gm_analysis *whole, *figures;
    struct gm_error err;
    (void)state;
    /* without the phases (the figures pass then skips between its stops) and with them */
    for (int phases = 0; phases < 2; phases++) {
        struct gm_snapshot *snap = load_example(phases, &buf, &len);
        assert_int_equal(gm_analysis_run(snap, NULL, &whole, &err), GM_OK);
        assert_int_equal(gm_analysis_run_figures(snap, NULL, &figures, &err), GM_OK);
        assert_false(whole->no_series);
        assert_true(figures->no_series);
        for (size_t d = 0; d < whole->n_devices; d++) {
            assert_true(whole->devices[d].n_points > 0);
            assert_true(whole->devices[d].n_iterations > 0);
            assert_true(whole->devices[d].n_leaks > 0);
        }
        figures_equal_the_whole(whole, figures);
        static const enum gm_analysis_doc_kind kinds[] = {GM_DOC_CATEGORIES, GM_DOC_LEAKS,
                                                          GM_DOC_OOM};
        for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
            assert_int_equal(doc_of(whole, kinds[i], false, &a), GM_OK);
            assert_int_equal(doc_of(figures, kinds[i], false, &b), GM_OK);
            assert_string_equal(a, b);
            free(a);
            free(b);
        }
        assert_int_equal(doc_of(whole, GM_DOC_CATEGORIES, true, &a), GM_OK);
        assert_int_equal(doc_of(figures, GM_DOC_CATEGORIES, true, &b), GM_ERR_INVALID);
        free(a);
        free(b);
        /* the calls that draw the series (report, plot, exports) refuse it too */
        assert_int_equal(gm_analysis_require_series(whole, "report", &err), GM_OK);
        assert_int_equal(gm_analysis_require_series(figures, "report", &err), GM_ERR_INVALID);
        assert_non_null(strstr(err.msg, "without its series"));
        gm_analysis_free(figures);
        gm_analysis_free(whole);
        gm_snapshot_free(snap);
        free(buf);
    }
}

/* An analysis made for a diff alone (no series, leaks, layout history; categories only at
 * the peak) is refused by every call that needs the rest, with GM_ERR_INVALID, while a whole
 * analysis of the same file is answered. */
static void test_diff_only_analysis_is_refused_where_the_whole_is_needed(void **state)
{
    char *buf;
    size_t len;
    struct gm_snapshot *snap = load_example(true, &buf, &len);
    struct gm_analysis *whole, *part;
    struct gm_error err;
    const struct gm_analysis_device *d;
    struct gm_snapshot_live_group *groups;
    size_t n_groups;
    struct gm_analysis_regions regions;
    struct gm_analysis_region region;
    struct gm_analysis_window window = {false, 0, 0};
    struct gm_analysis_files files;
    struct gm_report_page *page;
    int64_t k = 0;
    (void)state;
    assert_int_equal(gm_analysis_run(snap, NULL, &whole, &err), GM_OK);
    assert_int_equal(gm_analysis_diff_prepare(snap, NULL, &part, &err), GM_OK);
    assert_false(whole->diff_only);
    assert_true(part->diff_only);
    assert_int_equal(gm_analysis_require_whole(whole, "test", &err), GM_OK);
    assert_int_equal(gm_analysis_require_whole(part, "test", NULL), GM_ERR_INVALID);
    d = &part->devices[0];
    assert_int_equal(gm_analysis_live_at(part, d, &k, 1, never_called_live, NULL, &err),
                     GM_ERR_INVALID);
    assert_non_null(strstr(err.msg, "for a diff alone"));
    assert_int_equal(gm_analysis_group_live_at(part, d, 0, &groups, &n_groups, &err),
                     GM_ERR_INVALID);
    assert_int_equal(gm_analysis_regions(part, d, GM_REGION_ANNOTATION, &regions, &err),
                     GM_ERR_INVALID);
    assert_int_equal(gm_analysis_window_region(part, d, &window, &region, &err), GM_ERR_INVALID);
    assert_int_equal(gm_analysis_files(part, d, NULL, false, &files, &err), GM_ERR_INVALID);
    assert_int_equal(gm_layout_at(part, d, NULL, &k, 1, never_called_layout, NULL, &err),
                     GM_ERR_INVALID);
    assert_int_equal(gm_report_page_new(NULL, &page, &err), GM_OK);
    assert_int_equal(gm_report_page_add(page, snap, part, NULL, &err), GM_ERR_INVALID);
    gm_report_page_free(page);
    /* the whole analysis answers the same questions */
    d = &whole->devices[0];
    assert_int_equal(gm_analysis_group_live_at(whole, d, 0, &groups, &n_groups, &err), GM_OK);
    gm_free(groups);
    assert_int_equal(gm_analysis_regions(whole, d, GM_REGION_ANNOTATION, &regions, &err), GM_OK);
    gm_analysis_regions_release(&regions);
    gm_analysis_free(part);
    gm_analysis_free(whole);
    gm_snapshot_free(snap);
    free(buf);
}

/* The x of many events from one walk equals each event's x asked alone: in any order, with
 * repeats, the initial state and events past the end, questions few and many. */
static void test_axis_xs_of_many_events_equal_each_asked_alone(void **state)
{
    char *buf;
    size_t len;
    struct gm_snapshot *snap = load_example(false, &buf, &len);
    struct gm_error err;
    uint64_t seed = 7;
    bool timed = false;
    (void)state;
    for (size_t d = 0; d < snap->n_devices; d++) {
        struct gm_lod_axis ax;
        size_t ne = snap->devices[d].n_events;
        gm_lod_axis_init(&ax, &snap->devices[d]);
        timed |= ax.time;
        for (size_t n = 1; n <= 4 * ne + 1; n = n * 4 + 1) {
            int64_t *ks = malloc(n * sizeof(*ks));
            double *xs = malloc(n * sizeof(*xs));
            assert_non_null(ks);
            assert_non_null(xs);
            for (size_t i = 0; i < n; i++) {
                seed = seed * 6364136223846793005ull + 1442695040888963407ull;
                ks[i] = (int64_t)((seed >> 33) % (ne + 3)) - 1; /* -1 .. ne + 1 */
            }
            assert_int_equal(gm_lod_axis_xs(&ax, ks, xs, n, &err), GM_OK);
            for (size_t i = 0; i < n; i++)
                assert_true(xs[i] == gm_lod_axis_x(&ax, ks[i]));
            free(ks);
            free(xs);
        }
    }
    assert_true(timed); /* the example's events have times: the walk is what is tested */
    gm_snapshot_free(snap);
    free(buf);
}

/* fn() of the path of every real snapshot */
static void each_real_snapshot(void (*fn)(const char *path))
{
    char path[4096];
    DIR *dir;
    struct dirent *e;
    size_t n_files = 0;
    gm_testdata_path(path, sizeof(path), "snapshots", "");
    assert_non_null(dir = opendir(path));
    while ((e = readdir(dir)) != NULL) {
        size_t n = strlen(e->d_name);
        if ((n > 7 && !strcmp(e->d_name + n - 7, ".pickle")) ||
            (n > 4 && !strcmp(e->d_name + n - 4, ".pkl"))) {
            char file[4352];
            snprintf(file, sizeof(file), "%s/%s", path, e->d_name);
            fn(file);
            n_files++;
        }
    }
    closedir(dir);
    assert_true(n_files > 0);
}

/* the same on every real snapshot */
static void test_peaks_of_real_files_from_the_analysis_match_the_timeline(void **state)
{
    (void)state;
    each_real_snapshot(peaks_agree_file);
}

static void diff_analysis_agrees_file(const char *path)
{
    struct gm_snapshot *snap;
    struct gm_error err;
    assert_int_equal(gm_snapshot_load(path, NULL, &snap, &err), GM_OK);
    diff_analysis_agrees(snap, NULL, path);
    gm_snapshot_free(snap);
}

/* ana_stack_sums: one entry per stack in the order of its first allocation, stack ids past
 * the array (n_ids) as well as those in it; every allocation's bytes in its total, those
 * alive at the peak event (allocated at or before it, freed after it or never) in bytes and
 * count. */
static void test_stack_sums_per_stack_in_first_order(void **state)
{
    (void)state;
    struct ana_stack_sums s;
    assert_true(ana_stack_sums_init(&s, 4));
    /* peak event 10: alive there are those made at <= 10 and freed > 10 or never */
    assert_true(ana_stack_sums_add(&s, 3, 100, 2, 5, 10));  /* freed before the peak */
    assert_true(ana_stack_sums_add(&s, 70, 7, -1, -1, 10)); /* past n_ids, from the start */
    assert_true(ana_stack_sums_add(&s, 3, 40, 10, 11, 10)); /* made at the peak: alive */
    assert_true(ana_stack_sums_add(&s, 1, 9, 11, -1, 10));  /* made after it */
    assert_true(ana_stack_sums_add(&s, 70, 1, 3, 10, 10));  /* freed at the peak */
    assert_true(ana_stack_sums_add(&s, 70, 2, 4, -1, 10));  /* never freed: alive */
    assert_int_equal(s.n, 3);
    assert_int_equal(s.v[0].stack, 3);
    assert_int_equal(s.v[1].stack, 70);
    assert_int_equal(s.v[2].stack, 1);
    assert_int_equal(s.v[0].total, 140);
    assert_int_equal(s.v[0].bytes, 40);
    assert_int_equal(s.v[0].count, 1);
    assert_int_equal(s.v[1].total, 10);
    assert_int_equal(s.v[1].bytes, 9);
    assert_int_equal(s.v[1].count, 2);
    assert_int_equal(s.v[2].total, 9);
    assert_int_equal(s.v[2].bytes, 0);
    assert_int_equal(s.v[2].count, 0);
    ana_stack_sums_release(&s);
}

/* the diff's analysis on every real snapshot */
static void test_diff_analysis_of_real_files_equals_the_full_one(void **state)
{
    (void)state;
    each_real_snapshot(diff_analysis_agrees_file);
}

/* ---- the first pass done while loading (gm_analysis_first_pass_consumer()) ---- */

/* The documents (with the series when 'series') and the allocations of two analyses are
 * the same bytes. */
static void analyses_equal(const struct gm_analysis *a, const struct gm_analysis *b, bool series,
                           const char *name)
{
    static const enum gm_analysis_doc_kind kinds[] = {GM_DOC_CATEGORIES, GM_DOC_LEAKS, GM_DOC_OOM};
    assert_int_equal(a->n_devices, b->n_devices);
    for (size_t d = 0; d < a->n_devices; d++) {
        const struct gm_analysis_device *x = &a->devices[d], *y = &b->devices[d];
        assert_true(x->peak_bytes == y->peak_bytes);
        assert_int_equal(x->n_allocs, y->n_allocs);
        assert_int_equal(x->n_phases, y->n_phases);
        if (x->n_allocs && memcmp(x->allocs, y->allocs, x->n_allocs * sizeof(*x->allocs)))
            fail_msg("%s device %d: the allocations differ", name, (int)x->device);
        /* (the allocations name their streams by index into these) */
        assert_int_equal(x->n_streams, y->n_streams);
        if (x->n_streams && memcmp(x->streams, y->streams, x->n_streams * sizeof(*x->streams)))
            fail_msg("%s device %d: the streams differ", name, (int)x->device);
        /* a diff's analysis: the sums per stack in place of the allocations */
        assert_true(a->diff_only == b->diff_only);
        if (a->diff_only &&
            (x->priv_->n_sums != y->priv_->n_sums ||
             (x->priv_->n_sums &&
              memcmp(x->priv_->sums, y->priv_->sums, x->priv_->n_sums * sizeof(*x->priv_->sums)))))
            fail_msg("%s device %d: the sums per stack differ", name, (int)x->device);
    }
    if (a->diff_only)
        return;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        char *da = NULL, *db = NULL;
        enum gm_status sa = doc_of(a, kinds[i], series, &da);
        enum gm_status sb = doc_of(b, kinds[i], series, &db);
        assert_int_equal(sa, sb);
        if (strcmp(da, db))
            fail_msg("%s: document %d differs with the first pass done while loading", name,
                     (int)kinds[i]);
        free(da);
        free(db);
    }
}

typedef enum gm_status (*analyse_fn)(const struct gm_snapshot *snap,
                                     const struct gm_analysis_opts *opts, struct gm_analysis **out,
                                     struct gm_error *err);

/* The diff's first pass (gm_analysis_diff_first_pass_consumer()) of 'len' bytes at 'buf': the
 * diff's analysis takes it wherever it takes the whole first pass and finds the walk's
 * sums per stack and split at the peak, with its phases in the times' memory on every device
 * whose pass it took ('phases_in_times' 1: the times kept to the end; -1: unchecked), and it
 * holds fewer bytes than the whole first pass where a trace frees anything (no order of the
 * frees); any other analysis of a snapshot loaded with it walks, with the walk's results. */
static void diff_first_pass_agrees(const char *buf, size_t len, const char *name,
                                   int phases_in_times)
{
    struct gm_snapshot_opts whole, diff;
    struct gm_snapshot *plain, *fw, *fd, *fd2;
    struct gm_analysis *a, *b, *c, *d, *e;
    struct gm_error err;
    size_t frees = 0;
    memset(&whole, 0, sizeof(whole));
    memset(&diff, 0, sizeof(diff));
    whole.consumer = gm_analysis_first_pass_consumer();
    diff.consumer = gm_analysis_diff_first_pass_consumer();
    assert_int_equal(gm_snapshot_load_mem(buf, len, NULL, &plain, &err), GM_OK);
    assert_int_equal(gm_snapshot_load_mem(buf, len, &whole, &fw, &err), GM_OK);
    assert_int_equal(gm_snapshot_load_mem(buf, len, &diff, &fd, &err), GM_OK);
    assert_int_equal(gm_snapshot_load_mem(buf, len, &diff, &fd2, &err), GM_OK);
    for (size_t i = 0; i < plain->n_devices; i++)
        frees += plain->devices[i].n_actions[GM_ACTION_FREE_COMPLETED];
    if (frees)
        assert_true(fd->memory_bytes < fw->memory_bytes);
    assert_int_equal(gm_analysis_diff_prepare(plain, NULL, &a, &err), GM_OK);
    assert_int_equal(gm_analysis_diff_prepare(fd, NULL, &b, &err), GM_OK);
    assert_int_equal(gm_analysis_diff_prepare(fw, NULL, &e, &err), GM_OK);
    assert_int_equal(((const struct ana_priv *)b->priv_)->n_first_pass_taken,
                     ((const struct ana_priv *)e->priv_)->n_first_pass_taken);
    /* the phases in the times' memory wherever the diff took a first pass that kept them (the
     * step ranges read first); never on a walk */
    assert_int_equal(((const struct ana_priv *)a->priv_)->n_phases_in_times, 0);
    if (phases_in_times >= 0)
        assert_int_equal(((const struct ana_priv *)b->priv_)->n_phases_in_times,
                         phases_in_times ? ((const struct ana_priv *)b->priv_)->n_first_pass_taken
                                         : 0);
    analyses_equal(a, b, false, name);
    analyses_equal(a, e, false, name); /* (the whole first pass's allocations made lite) */
    for (size_t i = 0; i < a->n_devices; i++)
        if (memcmp(a->devices[i].at_peak, b->devices[i].at_peak, sizeof(a->devices[i].at_peak)))
            fail_msg("%s device %d: the split at the peak differs with the diff's first pass", name,
                     (int)a->devices[i].device);
    assert_int_equal(gm_analysis_run(plain, NULL, &c, &err), GM_OK);
    assert_int_equal(gm_analysis_run(fd2, NULL, &d, &err), GM_OK);
    assert_int_equal(((const struct ana_priv *)d->priv_)->n_first_pass_taken, 0);
    analyses_equal(c, d, true, name);
    gm_analysis_free(a);
    gm_analysis_free(b);
    gm_analysis_free(c);
    gm_analysis_free(d);
    gm_analysis_free(e);
    gm_snapshot_free(plain);
    gm_snapshot_free(fw);
    gm_snapshot_free(fd);
    gm_snapshot_free(fd2);
}

/* Each kind of analysis of 'len' bytes at 'buf' equals, loaded with the first pass, the one
 * loaded without it, and so does a second analysis of the same snapshot (which walks the
 * trace: the first took the loader's work); the first pass's work was there to take.  The
 * diff's first pass too (diff_first_pass_agrees()). */
static void first_pass_agrees(const char *buf, size_t len, const char *name, int phases_in_times)
{
    static const analyse_fn runs[] = {gm_analysis_run, gm_analysis_run_figures,
                                      gm_analysis_diff_prepare};
    struct gm_snapshot_opts with;
    struct gm_error err;
    memset(&with, 0, sizeof(with));
    with.consumer = gm_analysis_first_pass_consumer();
    for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
        struct gm_snapshot *plain, *fed;
        struct gm_analysis *a, *b, *c;
        bool any = false;
        assert_int_equal(gm_snapshot_load_mem(buf, len, NULL, &plain, &err), GM_OK);
        assert_int_equal(gm_snapshot_load_mem(buf, len, &with, &fed, &err), GM_OK);
        for (size_t d = 0; d < fed->n_devices; d++)
            any |= fed->devices[d].packed && fed->devices[d].packed->consumed;
        assert_int_equal(runs[r](plain, NULL, &a, &err), GM_OK);
        assert_int_equal(runs[r](fed, NULL, &b, &err), GM_OK);
        for (size_t d = 0; d < fed->n_devices; d++)
            assert_true(!fed->devices[d].packed || !fed->devices[d].packed->consumed);
        assert_int_equal(runs[r](fed, NULL, &c, &err), GM_OK);
        analyses_equal(a, b, r == 0, name);
        analyses_equal(a, c, r == 0, name);
        if (plain->n_events)
            assert_true(any);
        gm_analysis_free(a);
        gm_analysis_free(b);
        gm_analysis_free(c);
        gm_snapshot_free(plain);
        gm_snapshot_free(fed);
    }
    diff_first_pass_agrees(buf, len, name, phases_in_times);
}

static void test_first_pass_while_loading_equals_the_walk(void **state)
{
    (void)state;
    for (int phases = 0; phases < 2; phases++) {
        char *buf;
        size_t len;
        gm_snapshot_free(load_example(phases, &buf, &len));
        first_pass_agrees(buf, len, phases ? "the example with phases" : "the example", 1);
        free(buf);
    }
}

/* The whole file at 'path', malloc()ed, its size in *n. */
static char *file_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long len;
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    len = ftell(f);
    assert_true(len >= 0);
    rewind(f);
    assert_non_null(buf = malloc((size_t)len + 1));
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static void first_pass_agrees_file(const char *path)
{
    size_t n;
    char *buf = file_bytes(path, &n);
    first_pass_agrees(buf, n, path, -1);
    free(buf);
}

/* the same on every real snapshot */
static void test_first_pass_on_real_files_equals_the_walk(void **state)
{
    (void)state;
    each_real_snapshot(first_pass_agrees_file);
}

/* A load whose consumers run on a worker thread (gm_snapshot_opts.threads 2) equals the inline
 * one (threads 1) of 'len' bytes at 'buf': with the first pass, keeping the events or not
 * (consume_events), the same memory, the same events kept, and analyses (their documents with
 * the series, the allocation and stream records) alike. */
static void threads_agree(const char *buf, size_t len, const char *name)
{
    for (int consume = 0; consume < 2; consume++) {
        struct gm_snapshot_opts o;
        struct gm_snapshot *s[2];
        struct gm_analysis *a[2];
        struct gm_error err;
        memset(&o, 0, sizeof(o));
        o.consumer = gm_analysis_first_pass_consumer();
        o.consume_events = consume;
        for (unsigned t = 0; t < 2; t++) {
            o.threads = t + 1;
            assert_int_equal(gm_snapshot_load_mem(buf, len, &o, &s[t], &err), GM_OK);
        }
        assert_true(s[0]->memory_bytes == s[1]->memory_bytes);
        assert_true(s[0]->events_consumed == s[1]->events_consumed);
        assert_int_equal(s[0]->n_devices, s[1]->n_devices);
        for (size_t d = 0; d < s[0]->n_devices; d++) {
            const struct gm_snapshot_packed *p = s[0]->devices[d].packed,
                                            *q = s[1]->devices[d].packed;
            assert_true(!p == !q);
            if (!p)
                continue;
            assert_int_equal(p->n_events, q->n_events);
            assert_int_equal(p->n_bytes, q->n_bytes);
            assert_true(!p->consumed == !q->consumed);
            assert_int_equal(p->n_side, q->n_side);
            if (p->n_bytes && memcmp(p->bytes, q->bytes, p->n_bytes))
                fail_msg("%s device %zu: the packed events differ with threads", name, d);
            if (p->n_side && memcmp(p->side, q->side, p->n_side * sizeof(*p->side)))
                fail_msg("%s device %zu: the events kept aside differ with threads", name, d);
        }
        for (int t = 0; t < 2; t++)
            assert_int_equal(gm_analysis_run(s[t], NULL, &a[t], &err), GM_OK);
        analyses_equal(a[0], a[1], true, name);
        for (int t = 0; t < 2; t++) {
            gm_analysis_free(a[t]);
            gm_snapshot_free(s[t]);
        }
    }
}

static void threads_agree_file(const char *path)
{
    size_t n;
    char *buf = file_bytes(path, &n);
    threads_agree(buf, n, path);
    free(buf);
}

/* the same on the example (with phases) and a trace with out-of-memory events and a step
 * back in time */
static void test_threads_equal_inline(void **state)
{
    char *buf;
    size_t len;
    (void)state;
    gm_snapshot_free(load_example(true, &buf, &len));
    threads_agree(buf, len, "the example with phases");
    free(buf);
    write_ooms_trace(&buf, &len, 600, OOMS_BACK);
    threads_agree(buf, len, "the ooms trace");
    free(buf);
}

/* the same on every real snapshot (one of three devices among them) */
static void test_threads_equal_inline_real_files(void **state)
{
    (void)state;
    each_real_snapshot(threads_agree_file);
}

/* The kinds of times of write_streams_and_steps(). */
enum steps_times {
    STEPS_PLAIN, /* every 10 us, the ranges' ends among them */
    /* events 1 us before the first range's start, at it, at its end and 1 us after it (a
     * run of them, of frames of no phase, at each side: one event's phase alone would be
     * smoothed away; event 900 a zero_grad(), of phase other, so that the run after the
     * end is not between two steps); the second range ends at INT64_MAX */
    STEPS_EDGES,
    STEPS_WRAP,      /* times up to INT64_MAX - 10, then from INT64_MIN on (a wrap: a step back) */
    STEPS_WRAP_LATE, /* the same wrap in the last block of 256 events (at event 2900) */
};

/* A trace for the first pass's own cases: allocations on the default stream and two others,
 * events with and without frames, inside and outside two Optimizer.step# ranges (the raw
 * phase of a frameless event there is the step's, by its time), every allocation freed in
 * the order made; its times as 'tk' says. */
static void write_streams_and_steps(char **buf, size_t *len, enum steps_times tk)
{
    enum { N = 1500 };
    struct {
        const char *stage;
        int64_t time_us;
    } marks[] = {{"START", 5000}, {"END", 9000}, {"START", 20000}, {"END", 25000}};
    if (tk == STEPS_EDGES) {
        marks[0].time_us = 5020; /* event 402's; 360 to 401 are at 5019 */
        marks[1].time_us = 9010; /* event 801's; 802 to 841 are at 9011 */
        marks[3].time_us = INT64_MAX;
    }
    struct gm_pickle_writer *w;
    struct gm_error err;
    FILE *f = open_memstream(buf, len);
    w = pickle_doc_begin(f, 3, 1);
    gm_pickle_list_begin(w, 2 * N);
    for (int i = 0; i < 2 * N; i++) {
        int a = i % N;
        gm_pickle_dict_begin(w, 6);
        gm_pickle_str(w, "action");
        gm_pickle_str(w, i < N ? "alloc" : "free_completed");
        gm_pickle_str(w, "addr");
        gm_pickle_uint(w, 0x7f0000000000u + 4096u * (uint64_t)a);
        gm_pickle_str(w, "size");
        gm_pickle_uint(w, 512u + (uint64_t)a);
        gm_pickle_str(w, "stream");
        gm_pickle_uint(w, a % 3 ? 0x5000u + (uint64_t)(a % 3) : 0);
        int64_t t = 1000 + 10 * (int64_t)i;
        /* (the runs at the edges: frames of no known phase, which only a step range makes a
         * step; a frameless event would take the phase before it in the smoothing) */
        bool edge = tk == STEPS_EDGES && ((i >= 360 && i <= 401) || (i >= 802 && i < 842));
        bool framed = edge || a % 4 == 0;
        if (edge)
            t = i <= 401 ? 5019 : 9011;
        else if (tk == STEPS_WRAP)
            t = i < N ? INT64_MAX - 10 * (N - i) : INT64_MIN + 10 * (int64_t)(i - N);
        else if (tk == STEPS_WRAP_LATE)
            t = i < 2900 ? INT64_MAX - 10 * (2900 - i) : INT64_MIN + 10 * (int64_t)(i - 2900);
        gm_pickle_str(w, "time_us");
        gm_pickle_int(w, t);
        gm_pickle_str(w, "frames");
        gm_pickle_list_begin(w, framed ? 1 : 0);
        if (framed) {
            gm_pickle_dict_begin(w, 3);
            gm_pickle_str(w, "filename");
            gm_pickle_str(w, "train.py");
            gm_pickle_str(w, "line");
            gm_pickle_int(w, 10 + a % 7);
            gm_pickle_str(w, "name");
            gm_pickle_str(w, edge                            ? "collate"
                             : tk == STEPS_EDGES && i == 900 ? "zero_grad"
                                                             : "forward");
            gm_pickle_dict_end(w);
        }
        gm_pickle_list_end(w);
        gm_pickle_dict_end(w);
    }
    gm_pickle_list_end(w);
    gm_pickle_list_end(w);
    gm_pickle_str(w, "external_annotations");
    gm_pickle_list_begin(w, sizeof(marks) / sizeof(marks[0]));
    for (size_t i = 0; i < sizeof(marks) / sizeof(marks[0]); i++) {
        gm_pickle_dict_begin(w, 4);
        gm_pickle_str(w, "device");
        gm_pickle_int(w, 0);
        gm_pickle_str(w, "name");
        gm_pickle_str(w, "Optimizer.step#SGD.step");
        gm_pickle_str(w, "stage");
        gm_pickle_str(w, marks[i].stage);
        gm_pickle_str(w, "time_us");
        gm_pickle_int(w, marks[i].time_us);
        gm_pickle_dict_end(w);
    }
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
    assert_int_equal(gm_pickle_writer_finish(w, &err), GM_OK);
    assert_int_equal(fclose(f), 0);
}

/* The analysis of 'buf' loaded under 'limit' (0: the default) into *snap, with the first
 * pass or without, its report page in *html (the caller's), and how many devices' first pass
 * it took from the load. */
static struct gm_analysis *analyse_loaded(const char *buf, size_t len, uint64_t limit, bool first,
                                          struct gm_snapshot **snap, char **html, size_t *taken)
{
    struct gm_snapshot_opts o;
    struct gm_analysis *an;
    struct gm_error err;
    size_t n;
    FILE *f;
    memset(&o, 0, sizeof(o));
    o.memory_limit = limit;
    o.consumer = first ? gm_analysis_first_pass_consumer() : NULL;
    assert_int_equal(gm_snapshot_load_mem(buf, len, &o, snap, &err), GM_OK);
    assert_int_equal(gm_analysis_run(*snap, NULL, &an, &err), GM_OK);
    *taken = ((const struct ana_priv *)an->priv_)->n_first_pass_taken;
    assert_non_null(f = open_memstream(html, &n));
    assert_int_equal(gm_report_html(f, *snap, an, NULL, &err), GM_OK);
    assert_int_equal(fclose(f), 0);
    return an;
}

/* A frame at 'file', 'line', in 'name'. */
static void pickle_frame(struct gm_pickle_writer *w, const char *file, int64_t line,
                         const char *name)
{
    gm_pickle_dict_begin(w, 3);
    gm_pickle_str(w, "filename");
    gm_pickle_str(w, file);
    gm_pickle_str(w, "line");
    gm_pickle_int(w, line);
    gm_pickle_str(w, "name");
    gm_pickle_str(w, name);
    gm_pickle_dict_end(w);
}

/* One event of write_many_stacks(): its user frame on line 'line' (none when 0), under a
 * module call (forward), in Tensor.backward or in neither, as run % 3 says. */
static void many_stacks_event(struct gm_pickle_writer *w, const char *action, uint64_t addr,
                              uint64_t size, int64_t t, int64_t line, int run)
{
    gm_pickle_dict_begin(w, 5);
    gm_pickle_str(w, "action");
    gm_pickle_str(w, action);
    gm_pickle_str(w, "addr");
    gm_pickle_uint(w, addr);
    gm_pickle_str(w, "size");
    gm_pickle_uint(w, size);
    gm_pickle_str(w, "time_us");
    gm_pickle_int(w, t);
    gm_pickle_str(w, "frames");
    gm_pickle_list_begin(w, line ? 2 : 0);
    if (line) {
        pickle_frame(w, "train.py", line, "run");
        if (run % 3 == 0)
            pickle_frame(w, "/env/lib/python3.11/site-packages/torch/nn/modules/module.py", 1750,
                         "_call_impl");
        else if (run % 3 == 1)
            pickle_frame(w, "/env/lib/python3.11/site-packages/torch/_tensor.py", 626, "backward");
        else
            pickle_frame(w, "train.py", 5, "collate");
    }
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
}

/* A trace whose stack ids pass 16 bits half-way: N allocations, each with a stack of its
 * own (its user frame's line), in runs of 200 forward, backward or neither, a snapshot
 * event (no phase) with the stack of the allocation before it after every 97th, then the
 * frees in order; the first pass keeps its stacks in 16 bits up to the first id of 0x8000
 * and in 32 from there.  Allocation i has stack i + 1 (0 is the empty one), so stack
 * 0x8000, the first past 16 bits, is allocation 32767's: the first of a forward run (run
 * 165) after one of neither, where its own phase is what the smoothing starts from. */
static void write_many_stacks(char **buf, size_t *len)
{
    enum { N = 0x8000 + 4000 };
    struct gm_pickle_writer *w;
    FILE *f = open_memstream(buf, len);
    int64_t t = 1000;
    w = pickle_doc_begin(f, 2, 1);
    gm_pickle_list_begin(w, 2 * N + N / 97);
    for (int i = 0; i < N; i++) {
        uint64_t addr = 0x7f0000000000u + 4096u * (uint64_t)i;
        int run = (i + 233) / 200;
        many_stacks_event(w, "alloc", addr, 512u + (uint64_t)(i % 64), t++, 10 + i, run);
        if (i % 97 == 96)
            many_stacks_event(w, "snapshot", 0, 0, t++, 10 + i, run);
    }
    for (int i = 0; i < N; i++)
        many_stacks_event(w, "free_completed", 0x7f0000000000u + 4096u * (uint64_t)i,
                          512u + (uint64_t)(i % 64), t++, 0, 0);
    gm_pickle_list_end(w); /* the last device's trace */
    pickle_doc_end(w, f);
}

/* The first pass of a trace with more stacks than 16 bits number (its stacks kept in 16 bits,
 * then widened to 32 at the first id past them) is taken and gives the walk's results: the
 * phases of the events on either side of the widening, those without a phase among them. */
static void test_first_pass_of_more_stacks_than_16_bits_equals_the_walk(void **state)
{
    char *buf, *ha, *hb;
    size_t len, ta, tb;
    struct gm_snapshot *sa, *sb;
    (void)state;
    write_many_stacks(&buf, &len);
    first_pass_agrees(buf, len, "more stacks than 16 bits", 1);
    struct gm_analysis *a = analyse_loaded(buf, len, 0, false, &sa, &ha, &ta);
    struct gm_analysis *b = analyse_loaded(buf, len, 0, true, &sb, &hb, &tb);
    /* what the case is about: stack ids past 16 bits, the first pass taken, phases */
    assert_true(sb->n_stacks > 0x8000);
    assert_int_equal(ta, 0);
    assert_int_equal(tb, 1);
    assert_true(a->devices[0].n_phases > 100);
    analyses_equal(a, b, true, "more stacks than 16 bits");
    assert_string_equal(ha, hb);
    free(ha);
    free(hb);
    gm_analysis_free(a);
    gm_analysis_free(b);
    gm_snapshot_free(sa);
    gm_snapshot_free(sb);
    free(buf);
}

/* The first pass's consumer with one change: the allocation calls made while it takes the
 * batch of events that holds the first stack id past 16 bits (where it widens its stacks)
 * are counted, calls [widen_from, widen_to) of the load. */
static const struct snap_consumer_ops *widen_real;
static long widen_from = -1, widen_to = -1;

static void widen_counted_events(void *state, const struct gm_snapshot_event *ev, size_t n)
{
    bool widens = false;
    for (size_t i = 0; i < n && widen_from < 0; i++)
        widens |= ev[i].stack >= 0x8000;
    long before = gm_alloc_count();
    widen_real->events(state, ev, n);
    if (widens) {
        widen_from = before;
        widen_to = gm_alloc_count();
    }
}

/* An allocation that fails while the load's first pass widens its stacks from 16 to 32 bits
 * (write_many_stacks()) stops the first pass alone: the load goes on, and the analysis, which
 * then walks the trace, gives what a second analysis of the same snapshot gives (which always
 * walks); nothing the pass held is lost (ASan).  Each allocation made while the pass takes
 * that batch of events fails in turn, it alone (the widening's among them). */
static void test_first_pass_out_of_memory_while_widening_stacks(void **state)
{
    const struct gm_snapshot_consumer *pass = gm_analysis_first_pass_consumer();
    struct snap_consumer_ops counted = *pass->ops;
    struct gm_snapshot_consumer counting = {&counted, pass->ctx};
    struct gm_snapshot_opts o;
    struct gm_snapshot *s;
    struct gm_error err;
    size_t len, n_walked = 0;
    char *buf;
    (void)state;
    write_many_stacks(&buf, &len);
    memset(&o, 0, sizeof(o));
    widen_real = pass->ops;
    counted.events = widen_counted_events;
    o.consumer = &counting;
    o.threads = 1;           /* (the allocations are counted on this thread: the pass runs on it) */
    gm_alloc_fail_after(-1); /* (counts from here) */
    assert_int_equal(gm_snapshot_load_mem(buf, len, &o, &s, &err), GM_OK);
    gm_snapshot_free(s);
    assert_true(widen_from >= 0 && widen_to > widen_from);
    o.consumer = pass;
    for (long n = widen_from; n < widen_to; n++) {
        struct gm_analysis *first, *walk;
        gm_alloc_fail_once_after(n);
        enum gm_status st = gm_snapshot_load_mem(buf, len, &o, &s, &err);
        gm_alloc_fail_after(-1);
        assert_int_equal(st, GM_OK); /* (the pass's failure is not the load's) */
        assert_int_equal(gm_analysis_run(s, NULL, &first, &err), GM_OK);
        assert_int_equal(gm_analysis_run(s, NULL, &walk, &err), GM_OK);
        assert_int_equal(((const struct ana_priv *)walk->priv_)->n_first_pass_taken, 0);
        n_walked += ((const struct ana_priv *)first->priv_)->n_first_pass_taken == 0;
        analyses_equal(walk, first, true, "first pass out of memory while widening");
        gm_analysis_free(first);
        gm_analysis_free(walk);
        gm_snapshot_free(s);
    }
    /* the pass stopped, at each failure */
    assert_int_equal(n_walked, (size_t)(widen_to - widen_from));
    free(buf);
}

/* On streams, frameless events in step ranges and frees, the first pass made while loading is
 * the one the analysis uses, and its results (documents and report page) are the walk's; under
 * a memory limit too small for it the analysis walks, with the same results.  The same with
 * frameless events 1 us before a range, at its start, at its end and 1 us after it, and a
 * range to INT64_MAX (the first pass's phases stretch by stretch must be the walk's, event by
 * event); and times that wrap from INT64_MAX to INT64_MIN, a step back, for which the first
 * pass keeps no times, so it is not taken (the step ranges need them). */
static void test_first_pass_used_on_streams_and_step_ranges(void **state)
{
    /* the default, and 4 MiB, leave the first pass room; under 1 MiB the load's consumers
     * share an eighth (128 KiB), in which the fold's map and lists (which answer for the
     * pass) do not fit beside the pass's records and times of the 1500 allocations: the
     * fold gives up while loading (after the first batch), and the pass with it */
    static const struct {
        uint64_t limit;
        size_t taken;
    } cases[] = {{0, 1}, {4 << 20, 1}, {1 << 20, 0}};
    (void)state;
    for (int tk = STEPS_PLAIN; tk <= STEPS_WRAP_LATE; tk++)
        for (size_t l = 0; l < sizeof(cases) / sizeof(cases[0]); l++) {
            char *buf;
            size_t len;
            write_streams_and_steps(&buf, &len, (enum steps_times)tk);
            if (l == 0)
                first_pass_agrees(buf, len, "streams and step ranges", 1);
            char *ha, *hb;
            size_t ta, tb;
            struct gm_snapshot *sa, *sb;
            struct gm_analysis *a = analyse_loaded(buf, len, cases[l].limit, false, &sa, &ha, &ta);
            struct gm_analysis *b = analyse_loaded(buf, len, cases[l].limit, true, &sb, &hb, &tb);
            assert_int_equal(ta, 0);
            assert_int_equal(tb, tk >= STEPS_WRAP ? 0 : cases[l].taken);
            /* what the case is about: allocations on other streams, the steps' phases */
            assert_int_equal(a->devices[0].n_allocs, 1500);
            assert_int_equal(gm_analysis_alloc_stream(&a->devices[0], &a->devices[0].allocs[1]),
                             0x5001);
            assert_true(tk >= STEPS_WRAP || a->devices[0].n_phases > 1);
            analyses_equal(a, b, true, "streams and step ranges");
            if (strcmp(ha, hb))
                fail_msg("the report page differs with the first pass (limit %llu)",
                         (unsigned long long)cases[l].limit);
            free(ha);
            free(hb);
            gm_analysis_free(a);
            gm_analysis_free(b);
            gm_snapshot_free(sa);
            gm_snapshot_free(sb);
            free(buf);
        }
}

/* A trace that starts with 'n_early' frees of blocks allocated before it (early allocations,
 * which go in front of the trace's own) and goes on with 300 allocations, each freed by the
 * event after it; the ith early block and the ith allocation on stream 0x5000 + i % 3; with
 * 'metadata' each event has a user_metadata of five kinds (so that events of one stream
 * have several extras, met in another order than their streams). */
static void write_early_frees_on_streams(char **buf, size_t *len, int n_early, bool metadata)
{
    struct gm_pickle_writer *w;
    FILE *f = open_memstream(buf, len);
    int n = n_early + 600;
    w = pickle_doc_begin(f, 2, 1);
    gm_pickle_list_begin(w, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        /* past the early frees: allocation a at event n_early + 2a, its free after it */
        int k = i - n_early, a = k / 2;
        bool alloc = k >= 0 && k % 2 == 0;
        uint64_t addr =
            k < 0 ? 0x7e0000000000u + 4096u * (uint64_t)i : 0x7f0000000000u + 4096u * (uint64_t)a;
        gm_pickle_dict_begin(w, metadata ? 6 : 5);
        gm_pickle_str(w, "action");
        gm_pickle_str(w, alloc ? "alloc" : "free_completed");
        gm_pickle_str(w, "addr");
        gm_pickle_uint(w, addr);
        gm_pickle_str(w, "size");
        gm_pickle_uint(w, 512u + (uint64_t)(k < 0 ? i : a));
        if (metadata) {
            static const char *const md[] = {"e", "d", "c", "b", "a"};
            gm_pickle_str(w, "user_metadata");
            gm_pickle_str(w, md[(k < 0 ? i : a) / 2 % 5]);
        }
        gm_pickle_str(w, "stream");
        gm_pickle_uint(w, 0x5000u + (uint64_t)((k < 0 ? i : a) % 3));
        gm_pickle_str(w, "frames");
        gm_pickle_list_begin(w, 0);
        gm_pickle_list_end(w);
        gm_pickle_dict_end(w);
    }
    gm_pickle_list_end(w); /* the last device's trace */
    pickle_doc_end(w, f);
}

/* Early allocations (frees of blocks allocated before the trace) go in front of the trace's
 * own, each allocation with its stream, whether the first pass was made while loading (the
 * trace's allocations then get their streams as they move behind the early ones) or the trace
 * is walked after; with no early allocation too; and with events of one stream that differ
 * in their user_metadata (extras of their own: the loader's first pass names streams by the
 * extra, the device's table by the stream): the device's table holds each stream once. */
static void test_first_pass_early_allocations_keep_their_streams(void **state)
{
    static const int n_early[] = {0, 1, 7, 0, 7};
    (void)state;
    for (size_t c = 0; c < sizeof(n_early) / sizeof(n_early[0]); c++) {
        char *buf, *html;
        size_t len, taken;
        struct gm_snapshot *snap;
        struct gm_analysis *an;
        bool metadata = c >= 3;
        write_early_frees_on_streams(&buf, &len, n_early[c], metadata);
        first_pass_agrees(buf, len, "early frees on streams", 1);
        an = analyse_loaded(buf, len, 0, true, &snap, &html, &taken);
        assert_int_equal(taken, 1);
        const struct gm_analysis_device *d = &an->devices[0];
        assert_int_equal(d->n_allocs, (size_t)n_early[c] + 300);
        for (size_t i = 0; i < d->n_allocs; i++) {
            const struct gm_analysis_alloc *x = &d->allocs[i];
            bool early = i < (size_t)n_early[c];
            size_t j = early ? i : i - (size_t)n_early[c];
            assert_int_equal(x->alloc_event, early ? -1 : (int32_t)(n_early[c] + 2 * (int)j));
            assert_int_equal(x->bytes, 512u + j);
            assert_int_equal(gm_analysis_alloc_stream(d, x), 0x5000u + j % 3);
        }
        assert_int_equal(d->n_streams, 3);
        if (metadata)
            assert_true(snap->n_extras > 3); /* (what the case is about) */
        free(html);
        gm_analysis_free(an);
        gm_snapshot_free(snap);
        free(buf);
    }
}

/* A trace of 'n' allocations, the ith on stream 0x100 + i. */
static void write_allocs_on_streams(char **buf, size_t *len, size_t n)
{
    struct gm_pickle_writer *w;
    FILE *f = open_memstream(buf, len);
    w = pickle_doc_begin(f, 2, 1);
    gm_pickle_list_begin(w, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        gm_pickle_dict_begin(w, 5);
        gm_pickle_str(w, "action");
        gm_pickle_str(w, "alloc");
        gm_pickle_str(w, "addr");
        gm_pickle_uint(w, 0x7f0000000000u + 512u * (uint64_t)i);
        gm_pickle_str(w, "size");
        gm_pickle_uint(w, 512);
        gm_pickle_str(w, "stream");
        gm_pickle_uint(w, 0x100u + (uint64_t)i);
        gm_pickle_str(w, "frames");
        gm_pickle_list_begin(w, 0);
        gm_pickle_list_end(w);
        gm_pickle_dict_end(w);
    }
    gm_pickle_list_end(w);
    pickle_doc_end(w, f);
}

/* An allocation names its stream by a 16-bit index into its device's table: a device with
 * allocations on GM_ANALYSIS_STREAMS_MAX streams is analysed, whether its first pass was made
 * while loading or the trace is walked, and one with a stream more is refused (GM_ERR_LIMIT),
 * never given an index that wraps; a diff's analysis, which keeps no allocations, is not. */
static void test_streams_bounded(void **state)
{
    (void)state;
    for (size_t more = 0; more < 2; more++) {
        size_t n = GM_ANALYSIS_STREAMS_MAX + more, len;
        char *buf;
        write_allocs_on_streams(&buf, &len, n);
        for (int first = 0; first < 2; first++) {
            struct gm_snapshot_opts o;
            struct gm_snapshot *snap;
            struct gm_analysis *an = NULL;
            struct gm_error err;
            memset(&o, 0, sizeof(o));
            o.consumer = first ? gm_analysis_first_pass_consumer() : NULL;
            assert_int_equal(gm_snapshot_load_mem(buf, len, &o, &snap, &err), GM_OK);
            enum gm_status st = gm_analysis_run(snap, NULL, &an, &err);
            if (more) {
                assert_int_equal(st, GM_ERR_LIMIT);
                assert_non_null(strstr(err.msg, "streams"));
            } else {
                const struct gm_analysis_device *d = &an->devices[0];
                assert_int_equal(st, GM_OK);
                assert_int_equal(d->n_allocs, n);
                assert_int_equal(d->n_streams, n);
                for (size_t i = 0; i < n; i += 4099)
                    assert_int_equal(gm_analysis_alloc_stream(d, &d->allocs[i]), 0x100u + i);
                assert_int_equal(gm_analysis_alloc_stream(d, &d->allocs[n - 1]), 0x100u + n - 1);
            }
            gm_analysis_free(an);
            assert_int_equal(gm_analysis_diff_prepare(snap, NULL, &an, &err), GM_OK);
            gm_analysis_free(an);
            gm_snapshot_free(snap);
        }
        free(buf);
    }
}

/* Pickle opcodes for write_long_batch(), protocol 2 (pickletools names). */
static void op_str(FILE *f, const char *s)
{
    uint32_t n = (uint32_t)strlen(s);
    fputc('X', f); /* BINUNICODE */
    for (int i = 0; i < 4; i++)
        fputc((int)(n >> (8 * i)) & 0xff, f);
    fputs(s, f);
}

static void op_uint(FILE *f, uint64_t v)
{
    fputc(0x8a, f); /* LONG1: 8 bytes, little-endian (v below 2^63) */
    fputc(8, f);
    for (int i = 0; i < 8; i++)
        fputc((int)(v >> (8 * i)) & 0xff, f);
}

/* One device trace of 2 x 'n' events (allocations of 'size' + i bytes, then their frees)
 * appended in one batch (MARK ... APPENDS), as a writer other than CPython's may write it:
 * the loader hands its consumers no events of a batch longer than it buffers. */
static void write_long_batch(char **buf, size_t *len, int n, uint64_t size)
{
    FILE *f = open_memstream(buf, len);
    assert_non_null(f);
    fputs("\x80\x02}(", f); /* PROTO 2, EMPTY_DICT, MARK */
    op_str(f, "segments");
    fputc(']', f);
    op_str(f, "device_traces");
    fputs("]](", f); /* the list of traces, the trace, MARK for APPENDS */
    for (int i = 0; i < 2 * n; i++) {
        fputs("}(", f);
        op_str(f, "action");
        op_str(f, i < n ? "alloc" : "free_completed");
        op_str(f, "addr");
        op_uint(f, 0x7f0000000000u + 4096u * (uint64_t)(i % n));
        op_str(f, "size");
        op_uint(f, size + (uint64_t)(i % n));
        op_str(f, "stream");
        op_uint(f, (i % n) % 3 ? 0x5000u : 0);
        op_str(f, "time_us");
        op_uint(f, 1000u + 10u * (uint64_t)i);
        op_str(f, "frames");
        fputs("]u", f); /* EMPTY_LIST, SETITEMS */
    }
    fputs("eau.", f); /* APPENDS, APPEND (the trace to the list), SETITEMS, STOP */
    assert_int_equal(fclose(f), 0);
}

/* A batch longer than the loader buffers ends its consumers: the analysis walks the trace,
 * with the same results. */
static void test_first_pass_after_a_long_batch_is_the_walk(void **state)
{
    char *buf, *ha, *hb;
    size_t len, ta, tb;
    struct gm_snapshot *sa, *sb;
    struct gm_analysis *a, *b;
    (void)state;
    write_long_batch(&buf, &len, 3000, 512);
    a = analyse_loaded(buf, len, 0, false, &sa, &ha, &ta);
    b = analyse_loaded(buf, len, 0, true, &sb, &hb, &tb);
    assert_int_equal(a->devices[0].n_allocs, 3000);
    assert_int_equal(tb, 0);
    analyses_equal(a, b, true, "a long batch");
    assert_string_equal(ha, hb);
    free(ha);
    free(hb);
    gm_analysis_free(a);
    gm_analysis_free(b);
    gm_snapshot_free(sa);
    gm_snapshot_free(sb);
    free(buf);
}

/* Where the fold gives up at its finish for the timeline's reasons alone (sizes whose sums
 * may saturate: the timeline walks the trace), it answered every event all the same: the
 * first pass made while loading is taken, with the walk's results. */
static void test_first_pass_kept_when_the_fold_gives_up_at_its_finish(void **state)
{
    char *buf, *ha, *hb;
    size_t len, ta, tb;
    struct gm_snapshot *sa, *sb;
    struct gm_analysis *a, *b;
    (void)state;
    /* 2 allocations of 2^60 bytes and more, and their frees: every size summed passes 2^62
     * (ONE_PASS_LIMIT, timeline.c) */
    write_long_batch(&buf, &len, 2, (uint64_t)1 << 60);
    a = analyse_loaded(buf, len, 0, false, &sa, &ha, &ta);
    b = analyse_loaded(buf, len, 0, true, &sb, &hb, &tb);
    assert_false(snap_fold_ready(&sb->devices[0])); /* what the case is about */
    assert_int_equal(a->devices[0].n_allocs, 2);
    assert_int_equal(ta, 0);
    assert_int_equal(tb, 1);
    analyses_equal(a, b, true, "sums past 2^62");
    assert_string_equal(ha, hb);
    free(ha);
    free(hb);
    gm_analysis_free(a);
    gm_analysis_free(b);
    gm_snapshot_free(sa);
    gm_snapshot_free(sb);
    free(buf);
}

/* An event of a hand-written trace: stream 0, times 1000, 1010, ... by position. */
struct plain_ev {
    const char *action;
    uint64_t addr, size;
};

/* One device's trace of the n events ev[] (a list of event dicts). */
static void pickle_plain_trace(struct gm_pickle_writer *w, const struct plain_ev *ev, size_t n)
{
    gm_pickle_list_begin(w, n);
    for (size_t i = 0; i < n; i++) {
        gm_pickle_dict_begin(w, 5);
        gm_pickle_str(w, "action");
        gm_pickle_str(w, ev[i].action);
        gm_pickle_str(w, "addr");
        gm_pickle_uint(w, ev[i].addr);
        gm_pickle_str(w, "size");
        gm_pickle_uint(w, ev[i].size);
        gm_pickle_str(w, "stream");
        gm_pickle_uint(w, 0);
        gm_pickle_str(w, "time_us");
        gm_pickle_int(w, 1000 + 10 * (int64_t)i);
        gm_pickle_dict_end(w);
    }
    gm_pickle_list_end(w);
}

/* One segment of device 'dev' at 'addr' into w: blocks of 1024 bytes, each allocated with
 * its requested size, or inactive where that is 0. */
static void pickle_segment(struct gm_pickle_writer *w, int dev, uint64_t addr,
                           const uint64_t *requested, size_t n)
{
    gm_pickle_dict_begin(w, 6);
    gm_pickle_str(w, "device");
    gm_pickle_int(w, dev);
    gm_pickle_str(w, "address");
    gm_pickle_uint(w, addr);
    gm_pickle_str(w, "total_size");
    gm_pickle_uint(w, 1024 * (uint64_t)n);
    gm_pickle_str(w, "stream");
    gm_pickle_uint(w, 0);
    gm_pickle_str(w, "segment_type");
    gm_pickle_str(w, "small");
    gm_pickle_str(w, "blocks");
    gm_pickle_list_begin(w, n);
    for (size_t i = 0; i < n; i++) {
        gm_pickle_dict_begin(w, 3);
        gm_pickle_str(w, "size");
        gm_pickle_uint(w, 1024);
        gm_pickle_str(w, "requested_size");
        gm_pickle_uint(w, requested[i]);
        gm_pickle_str(w, "state");
        gm_pickle_str(w, requested[i] ? "active_allocated" : "inactive");
        gm_pickle_dict_end(w);
    }
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
}

/* Two devices: on device 0 a segment at 0x10000 of two blocks, the first explained by the
 * alloc pending at the end of its trace (event 0), the second inactive; on device 1 a
 * segment at 0x90000 of two allocated blocks, the first explained by its trace's alloc
 * (event 1; event 0 allocates and event 2 frees 0xa0000), the second by none (alive from
 * the start).  Device 1's blocks are its 0th and 1st, the snapshot's 2nd and 3rd. */
static void write_two_devices(char **buf, size_t *len)
{
    static const uint64_t dev0[] = {1000, 0}, dev1[] = {1000, 900};
    static const struct plain_ev ev0[] = {{"alloc", 0x10000, 1000}},
                                 ev1[] = {{"alloc", 0xa0000, 300},
                                          {"alloc", 0x90000, 1000},
                                          {"free_completed", 0xa0000, 300}};
    struct gm_pickle_writer *w;
    struct gm_error err;
    FILE *f = open_memstream(buf, len);
    assert_non_null(f);
    assert_int_equal(gm_pickle_writer_new(f, 4, &w, &err), GM_OK);
    gm_pickle_dict_begin(w, 2);
    gm_pickle_str(w, "segments");
    gm_pickle_list_begin(w, 2);
    pickle_segment(w, 0, 0x10000, dev0, 2);
    pickle_segment(w, 1, 0x90000, dev1, 2);
    gm_pickle_list_end(w);
    gm_pickle_str(w, "device_traces");
    gm_pickle_list_begin(w, 2);
    pickle_plain_trace(w, ev0, sizeof(ev0) / sizeof(ev0[0]));
    pickle_plain_trace(w, ev1, sizeof(ev1) / sizeof(ev1[0]));
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
    assert_int_equal(gm_pickle_writer_finish(w, &err), GM_OK);
    assert_int_equal(fclose(f), 0);
}

/* A snapshot of n devices, device d with the one-alloc trace of peaks[d] bytes (a 0-byte
 * alloc when 0), or no trace at all (an empty device) when peaks[d] is UINT64_MAX. */
static struct gm_snapshot *load_peaks(const uint64_t *peaks, size_t n, char **buf)
{
    struct gm_pickle_writer *w;
    struct gm_snapshot *snap;
    struct gm_error err;
    size_t len;
    FILE *f = open_memstream(buf, &len);
    w = pickle_doc_begin(f, 2, (uint32_t)n);
    for (size_t d = 0; d < n; d++) {
        struct plain_ev ev = {"alloc", 0x10000 * (d + 1), peaks[d]};
        pickle_plain_trace(w, &ev, peaks[d] == UINT64_MAX ? 0 : 1);
    }
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
    assert_int_equal(gm_pickle_writer_finish(w, &err), GM_OK);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(gm_snapshot_load_mem(*buf, len, NULL, &snap, &err), GM_OK);
    return snap;
}

/* The default device (gm_default_device) is the largest peak, the first of equal ones, an
 * empty device passed over unless all are (then the first), the same whether the peaks come
 * from an analysis or the timelines; a rank's device is it, or nothing when it is empty;
 * no device at all is GM_ERR_INVALID. */
static void test_default_device_ties_and_empty_devices(void **state)
{
    static const uint64_t E = UINT64_MAX;
    static const struct {
        uint64_t peaks[4];
        size_t n;
        int32_t want;
        bool rank; /* gm_analysis_rank_device() finds one */
    } cases[] = {
        {{300, 1000}, 2, 1, true},
        {{500, 1000, 1000}, 3, 1, true}, /* a tie after the first device: the first of it */
        {{1000, 1000, 500}, 3, 0, true},
        {{E, 0, E, 0}, 4, 1, true}, /* empty device 0 before a device with data, peak 0 */
        {{E, 700, 2000}, 3, 2, true},
        {{E, E, E}, 3, 0, false}, /* all empty: the first, and no rank device */
        {{E}, 1, 0, false},
    };
    (void)state;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        char *buf;
        struct gm_snapshot *snap = load_peaks(cases[c].peaks, cases[c].n, &buf);
        struct gm_analysis *an;
        struct gm_error err;
        const struct gm_analysis_device *rd;
        int32_t got = -1, got_an = -1;
        assert_int_equal(snap->n_devices, cases[c].n);
        assert_int_equal(gm_default_device(snap, NULL, &got, &err), GM_OK);
        assert_int_equal(gm_analysis_run(snap, NULL, &an, &err), GM_OK);
        assert_int_equal(gm_default_device(snap, an, &got_an, &err), GM_OK);
        if (got != cases[c].want || got_an != cases[c].want)
            fail_msg("case %zu: want device %d, timelines %d, analysis %d", c, (int)cases[c].want,
                     (int)got, (int)got_an);
        rd = gm_analysis_rank_device(an);
        assert_int_equal(rd != NULL, cases[c].rank);
        if (rd)
            assert_int_equal(rd->device, cases[c].want);
        gm_analysis_free(an);
        gm_snapshot_free(snap);
        free(buf);
    }
    {
        char *buf;
        struct gm_snapshot *snap = load_peaks(NULL, 0, &buf);
        struct gm_error err;
        int32_t got = -1;
        assert_int_equal(snap->n_devices, 0);
        assert_int_equal(gm_default_device(snap, NULL, &got, &err), GM_ERR_INVALID);
        assert_string_equal(err.msg, "the snapshot names no device");
        gm_snapshot_free(snap);
        free(buf);
    }
}

/* The blocks alive from the start are counted per device (the fold's bits and the walk's
 * test): on device 1 the first pass made while loading (taken for both devices) finds the
 * block no alloc explains and not the one its trace's alloc does, as the walk does. */
static void test_first_pass_blocks_from_the_start_per_device(void **state)
{
    char *buf, *ha, *hb;
    size_t len, ta, tb;
    struct gm_snapshot *sa, *sb;
    struct gm_analysis *a, *b;
    (void)state;
    write_two_devices(&buf, &len);
    a = analyse_loaded(buf, len, 0, false, &sa, &ha, &ta);
    b = analyse_loaded(buf, len, 0, true, &sb, &hb, &tb);
    assert_int_equal(ta, 0);
    assert_int_equal(tb, 2);
    for (int r = 0; r < 2; r++) {
        const struct gm_analysis *an = r ? b : a;
        const struct gm_analysis_device *d = NULL;
        for (size_t i = 0; i < an->n_devices; i++)
            if (an->devices[i].device == 1)
                d = &an->devices[i];
        assert_non_null(d);
        /* the block from the start first, then the trace's two allocations */
        assert_int_equal(d->n_allocs, 3);
        assert_true(d->allocs[0].addr == 0x90400);
        assert_int_equal(d->allocs[0].alloc_event, -1);
        assert_int_equal(d->allocs[1].alloc_event, 0);
        assert_int_equal(d->allocs[2].alloc_event, 1);
    }
    analyses_equal(a, b, true, "two devices");
    assert_string_equal(ha, hb);
    free(ha);
    free(hb);
    gm_analysis_free(a);
    gm_analysis_free(b);
    gm_snapshot_free(sa);
    gm_snapshot_free(sb);
    free(buf);
}

/* A trace for the pairing of events with allocations (snap_fold_answers()): a free_requested
 * before and after an alloc displaced the first at its address, frees without an alloc, an
 * allocation pending at the end at an allocated block's address, and blocks allocated at
 * snapshot time that none explains (one never allocated in the trace, one allocated and
 * freed there).  Its events, by index:
 *   0 alloc 0x20000 (100)        1 free_requested 0x20000     2 alloc 0x20000 (200)
 *   3 free_requested 0x20000     4 free_completed 0x20000     5 free_requested 0x30000
 *   6 free_completed 0x30000     7 alloc 0x10000 (1000)       8 alloc 0x10800 (800)
 *   9 free_completed 0x10800    10 free_requested 0x10800
 * Its one segment at 0x10000 has four blocks of 1024 bytes: allocated (0x10000, 0x10400,
 * 0x10800) and inactive (0x10c00). */
static void write_pairs(char **buf, size_t *len)
{
    static const struct plain_ev ev[] = {
        {"alloc", 0x20000, 100},          {"free_requested", 0x20000, 100},
        {"alloc", 0x20000, 200},          {"free_requested", 0x20000, 200},
        {"free_completed", 0x20000, 200}, {"free_requested", 0x30000, 50},
        {"free_completed", 0x30000, 50},  {"alloc", 0x10000, 1000},
        {"alloc", 0x10800, 800},          {"free_completed", 0x10800, 800},
        {"free_requested", 0x10800, 800},
    };
    static const struct {
        uint64_t requested;
        const char *state;
    } blocks[] = {{1000, "active_allocated"},
                  {900, "active_allocated"},
                  {800, "active_allocated"},
                  {0, "inactive"}};
    struct gm_pickle_writer *w;
    struct gm_error err;
    FILE *f = open_memstream(buf, len);
    assert_non_null(f);
    assert_int_equal(gm_pickle_writer_new(f, 4, &w, &err), GM_OK);
    gm_pickle_dict_begin(w, 2);
    gm_pickle_str(w, "segments");
    gm_pickle_list_begin(w, 1);
    gm_pickle_dict_begin(w, 6);
    gm_pickle_str(w, "device");
    gm_pickle_int(w, 0);
    gm_pickle_str(w, "address");
    gm_pickle_uint(w, 0x10000);
    gm_pickle_str(w, "total_size");
    gm_pickle_uint(w, 4096);
    gm_pickle_str(w, "stream");
    gm_pickle_uint(w, 0);
    gm_pickle_str(w, "segment_type");
    gm_pickle_str(w, "small");
    gm_pickle_str(w, "blocks");
    gm_pickle_list_begin(w, sizeof(blocks) / sizeof(blocks[0]));
    for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++) {
        gm_pickle_dict_begin(w, 3);
        gm_pickle_str(w, "size");
        gm_pickle_uint(w, 1024);
        gm_pickle_str(w, "requested_size");
        gm_pickle_uint(w, blocks[i].requested);
        gm_pickle_str(w, "state");
        gm_pickle_str(w, blocks[i].state);
        gm_pickle_dict_end(w);
    }
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
    gm_pickle_list_end(w);
    gm_pickle_str(w, "device_traces");
    gm_pickle_list_begin(w, 1);
    pickle_plain_trace(w, ev, sizeof(ev) / sizeof(ev[0]));
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
    assert_int_equal(gm_pickle_writer_finish(w, &err), GM_OK);
    assert_int_equal(fclose(f), 0);
}

/* The first pass made while loading pairs each free_requested and free_completed with the
 * allocation its address holds from the timeline's fold (one map for both), and takes the
 * blocks alive from the start from it: each allocation's events as the trace above says,
 * the same as the walk's pairing with its own map, and the loader's pass is the one used. */
static void test_first_pass_pairs_events_with_the_folds_map(void **state)
{
    static const struct {
        uint64_t addr;
        int32_t alloc_event, free_event, free_requested_event;
    } want[] = {
        {0x30000, -1, 6, -1},  /* freed without an alloc (its free_requested had none either) */
        {0x10400, -1, -1, -1}, /* a block no alloc explains */
        {0x10800, -1, -1, -1}, /* a block whose alloc was freed in the trace */
        {0x20000, 0, -1, 1},   /* displaced at event 2: never freed */
        {0x20000, 2, 4, 3},
        {0x10000, 7, -1, -1}, /* pending at the end: its block is not counted again */
        {0x10800, 8, 9, -1},  /* the free_requested after its free has no allocation */
    };
    char *buf, *ha, *hb;
    size_t len, ta, tb;
    struct gm_snapshot *sa, *sb;
    struct gm_analysis *a, *b;
    (void)state;
    write_pairs(&buf, &len);
    first_pass_agrees(buf, len, "pairs", 1);
    a = analyse_loaded(buf, len, 0, false, &sa, &ha, &ta);
    b = analyse_loaded(buf, len, 0, true, &sb, &hb, &tb);
    assert_int_equal(ta, 0);
    assert_int_equal(tb, 1);
    for (int r = 0; r < 2; r++) {
        const struct gm_analysis_device *d = &(r ? b : a)->devices[0];
        assert_int_equal(d->n_allocs, sizeof(want) / sizeof(want[0]));
        for (size_t i = 0; i < d->n_allocs; i++) {
            assert_true(d->allocs[i].addr == want[i].addr);
            assert_int_equal(d->allocs[i].alloc_event, want[i].alloc_event);
            assert_int_equal(d->allocs[i].free_event, want[i].free_event);
            assert_int_equal(d->allocs[i].free_requested_event, want[i].free_requested_event);
        }
    }
    analyses_equal(a, b, true, "pairs");
    assert_string_equal(ha, hb);
    free(ha);
    free(hb);
    gm_analysis_free(a);
    gm_analysis_free(b);
    gm_snapshot_free(sa);
    gm_snapshot_free(sb);
    free(buf);
}

/* The rank a file's name carries, by the names launchers and trainers write. */
static void test_rank_from_file_names(void **state)
{
    static const struct {
        const char *path;
        int64_t rank; /* -1: none */
    } cases[] = {
        {"memory_snapshot/iteration_10/rank3_memory_snapshot.pickle", 3}, /* torchtitan */
        {"snapshot_7.pickle", 7},                                         /* Megatron-Bridge */
        {"out/snapshot_oom_rank-12.pickle", 12},
        {"oom_rank5.pickle", 5},
        {"rank_11.pickle", 11},
        {"RANK2.pkl", 2},
        {"job/rank4/snapshot.pickle", 4}, /* the folder carries it */
        {"run/rank4/rank6_x.pickle", 6},  /* the file's own name first */
        {"rank10.digest", 10},
        {"frank3.pickle", -1},         /* a word that ends in "rank" */
        {"ranks.pickle", -1},          /* no number */
        {"snapshot_7x.pickle", -1},    /* not snapshot_R.ext */
        {"my_snapshot_7.pickle", -1},  /* snapshot_R is the whole name */
        {"rank1234567890.pickle", -1}, /* too long for a rank */
        {"iteration_3/profile.pickle", -1},
        {"", -1},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t r = 999;
        bool has = gm_rank_from_name(cases[i].path, &r);
        if (has != (cases[i].rank >= 0) || (has && (int64_t)r != cases[i].rank))
            fail_msg("'%s': got %s %llu, want %lld", cases[i].path, has ? "rank" : "none",
                     (unsigned long long)r, (long long)cases[i].rank);
    }
    assert_false(gm_rank_from_name(NULL, &(uint64_t){0}));
}

static void test_rank_names_in_natural_order(void **state)
{
    (void)state;
    assert_true(gm_rank_name_cmp("rank2.pickle", "rank10.pickle") < 0);
    assert_true(gm_rank_name_cmp("rank10.pickle", "rank2.pickle") > 0);
    assert_true(gm_rank_name_cmp("rank02.pickle", "rank2.pickle") == 0);
    assert_true(gm_rank_name_cmp("a/rank1", "a/rank1x") < 0);
    assert_true(gm_rank_name_cmp("iteration_9", "iteration_10") < 0);
    assert_int_equal(gm_rank_name_cmp("same", "same"), 0);
}

/* One source for every rank's number: the names when all carry distinct ranks, else the
 * devices when distinct, else the order; the ranks come back in that order. */
static void test_rank_ids_from_names_devices_or_order(void **state)
{
    struct gm_rank r[3];
    struct gm_ranks rs;
    (void)state;
    memset(r, 0, sizeof(r));
    for (size_t i = 0; i < 3; i++) {
        r[i].file = i;
        r[i].value[GM_RANK_PEAK] = 100 * (i + 1);
    }
    /* rank10, rank2, rank0 as a shell glob gives them (lexically) */
    r[0].has_name_rank = r[1].has_name_rank = r[2].has_name_rank = true;
    r[0].name_rank = 10;
    r[1].name_rank = 2;
    r[2].name_rank = 0;
    assert_int_equal(gm_analysis_ranks(r, 3, &rs, NULL), GM_OK);
    assert_int_equal(rs.source, GM_RANK_BY_NAME);
    assert_int_equal(rs.ranks[0].id, 0);
    assert_int_equal(rs.ranks[0].file, 2);
    assert_int_equal(rs.ranks[2].id, 10);
    assert_int_equal(rs.ranks[rs.spread[GM_RANK_PEAK].max_rank].id, 0); /* file 2: 300 B */
    gm_analysis_ranks_release(&rs);

    /* a name without a rank: the devices, distinct */
    r[1].has_name_rank = false;
    r[0].device = 3;
    r[1].device = 1;
    r[2].device = 2;
    assert_int_equal(gm_analysis_ranks(r, 3, &rs, NULL), GM_OK);
    assert_int_equal(rs.source, GM_RANK_BY_DEVICE);
    assert_int_equal(rs.ranks[0].id, 1);
    assert_int_equal(rs.ranks[0].file, 1);
    gm_analysis_ranks_release(&rs);

    /* two files on one device: the order */
    r[2].device = 1;
    assert_int_equal(gm_analysis_ranks(r, 3, &rs, NULL), GM_OK);
    assert_int_equal(rs.source, GM_RANK_BY_ORDER);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(rs.ranks[i].id, i);
        assert_int_equal(rs.ranks[i].file, i);
    }
    gm_analysis_ranks_release(&rs);

    /* two names with one rank: not by name */
    r[1].has_name_rank = true;
    r[1].name_rank = 10;
    assert_int_equal(gm_analysis_ranks(r, 3, &rs, NULL), GM_OK);
    assert_int_not_equal(rs.source, GM_RANK_BY_NAME);
    gm_analysis_ranks_release(&rs);
}

/* A file of that name: a snapshot's first bytes (pickle PROTO 2) in a .pickle, a JSON
 * object in a .json, nothing else otherwise. */
static void touch(const char *path)
{
    size_t n = strlen(path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    if (n > 7 && !strcmp(path + n - 7, ".pickle"))
        fputs("\x80\x02}q\x00.", f);
    else if (n > 5 && !strcmp(path + n - 5, ".json"))
        fputs("{\"schema\": \"gpumem.measure/1\"}", f);
    fclose(f);
}

/* A folder stands for its rank files in rank order, or for its last iteration's. */
static void test_rank_files_of_a_folder(void **state)
{
    char dir[] = "/tmp/gm-rank-files-XXXXXX", p[512];
    /* rank1_series.json and rank1.log carry a rank in their names but are no snapshot (a
     * job's folder holds gpumem.torch's series and logs beside the snapshots) */
    static const char *const names[] = {"rank10.pickle", "rank2.pickle", "rank0.pickle",
                                        "notes.txt",     "r.digest",     "rank1_series.json",
                                        "rank1.log"};
    struct gm_rank_files rf;
    struct gm_error err;
    const char *args[2];
    (void)state;
    assert_non_null(mkdtemp(dir));
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        touch(p);
    }
    args[0] = dir;
    assert_int_equal(gm_rank_files_list(args, 1, &rf, &err), GM_OK);
    /* r.digest carries no rank: natural order, the arguments' order kept */
    assert_int_equal(rf.n, 4);
    assert_non_null(strstr(rf.paths[0], "/r.digest"));
    assert_non_null(strstr(rf.paths[1], "/rank0.pickle"));
    assert_non_null(strstr(rf.paths[2], "/rank2.pickle"));
    assert_non_null(strstr(rf.paths[3], "/rank10.pickle"));
    gm_rank_files_release(&rf);
    snprintf(p, sizeof(p), "%s/r.digest", dir);
    remove(p);
    /* a snapshot with its digest beside it (as gpumem.torch's record() writes them): one
     * rank, the digest standing for it; a digest of another name does not */
    {
        static const char *const pair[] = {"rank2.digest", "rank3_profile.pickle",
                                           "rank3_profile.digest", "rank3_other.digest"};
        for (size_t i = 0; i < sizeof(pair) / sizeof(pair[0]); i++) {
            snprintf(p, sizeof(p), "%s/%s", dir, pair[i]);
            touch(p);
        }
        assert_int_equal(gm_rank_files_list(args, 1, &rf, &err), GM_OK);
        /* rank2.pickle and rank3_profile.pickle give way to their digests */
        assert_int_equal(rf.n, 5);
        assert_non_null(strstr(rf.paths[0], "/rank0.pickle"));
        assert_non_null(strstr(rf.paths[1], "/rank2.digest"));
        assert_non_null(strstr(rf.paths[2], "/rank3_other.digest"));
        assert_non_null(strstr(rf.paths[3], "/rank3_profile.digest"));
        assert_non_null(strstr(rf.paths[4], "/rank10.pickle"));
        gm_rank_files_release(&rf);
        for (size_t i = 0; i < sizeof(pair) / sizeof(pair[0]); i++) {
            snprintf(p, sizeof(p), "%s/%s", dir, pair[i]);
            remove(p);
        }
    }
    /* files named on the command line in shell order come back in rank order */
    args[0] = "x/rank10.pickle";
    args[1] = "x/rank9.pickle";
    assert_int_equal(gm_rank_files_list(args, 2, &rf, &err), GM_OK);
    assert_string_equal(rf.paths[0], "x/rank9.pickle");
    gm_rank_files_release(&rf);
    /* a torchtitan folder: the last iteration_N */
    {
        char top[300], sub[320];
        snprintf(top, sizeof(top), "%s/memory_snapshot", dir);
        assert_int_equal(mkdir(top, 0700), 0);
        for (int it = 2; it <= 10; it += 8) {
            snprintf(sub, sizeof(sub), "%s/iteration_%d", top, it);
            assert_int_equal(mkdir(sub, 0700), 0);
            for (int r = 0; r < 2; r++) {
                snprintf(p, sizeof(p), "%s/rank%d_memory_snapshot.pickle", sub, r);
                touch(p);
            }
        }
        args[0] = top;
        assert_int_equal(gm_rank_files_list(args, 1, &rf, &err), GM_OK);
        assert_int_equal(rf.n, 2);
        assert_non_null(strstr(rf.paths[0], "iteration_10/rank0_memory_snapshot.pickle"));
        gm_rank_files_release(&rf);
        for (int it = 2; it <= 10; it += 8) {
            for (int r = 0; r < 2; r++) {
                snprintf(p, sizeof(p), "%s/iteration_%d/rank%d_memory_snapshot.pickle", top, it, r);
                remove(p);
            }
            snprintf(sub, sizeof(sub), "%s/iteration_%d", top, it);
            rmdir(sub);
        }
        /* an empty folder: no rank files */
        assert_int_equal(gm_rank_files_list(args, 1, &rf, &err), GM_ERR_NOENT);
        assert_non_null(strstr(err.msg, "without rank files"));
        rmdir(top);
    }
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, names[i]);
        remove(p);
    }
    rmdir(dir);
}

/* A digest written from an analysis reads back as the same rank, and a damaged one is
 * refused with the error of its class. */
static void test_digest_reads_back_the_rank_of_its_snapshot(void **state)
{
    char *buf, *dg = NULL;
    size_t len, dg_len = 0;
    FILE *f;
    struct gm_snapshot *snap = load_example(false, &buf, &len);
    struct gm_analysis *an;
    struct gm_digest *d;
    struct gm_error err;
    struct gm_rank want, got;
    bool has_want = false, has_got = false;
    (void)state;
    assert_int_equal(gm_analysis_run(snap, NULL, &an, &err), GM_OK);
    {
        struct gm_analysis_doc_file file = {.path = "run/rank5_memory_snapshot.pickle", .an = an};
        struct gm_analysis_doc doc = {
            .kind = GM_DOC_DIGEST, .files = &file, .n_files = 1, .host = "node3"};
        f = open_memstream(&dg, &dg_len);
        assert_non_null(f);
        assert_int_equal(gm_analysis_json(f, &doc, &err), GM_OK);
        assert_int_equal(fclose(f), 0);
    }
    assert_true(gm_digest_sniff(dg, dg_len));
    assert_false(gm_digest_sniff(buf, len)); /* a pickle */
    assert_int_equal(gm_digest_parse(dg, dg_len, &d, &err), GM_OK);
    assert_string_equal(d->host, "node3");
    assert_true(d->has_rank);
    assert_int_equal(d->rank, 5);
    assert_true(d->n_series > 0 && d->n_series <= GM_DIGEST_POINTS);
    assert_int_equal(d->n_iterations, an->devices[0].n_iterations);
    assert_int_equal(gm_analysis_rank(an, 3, "x.pickle", &want, &has_want, &err), GM_OK);
    gm_digest_rank(d, 3, "x.digest", &got, &has_got);
    assert_true(has_want && has_got);
    assert_int_equal(got.device, want.device);
    assert_memory_equal(got.value, want.value, sizeof(want.value));
    assert_memory_equal(got.at_peak, want.at_peak, sizeof(want.at_peak));
    assert_int_equal(got.peak_event, want.peak_event);
    assert_int_equal(got.peak_phase, want.peak_phase);
    assert_int_equal(got.file, 3);
    assert_true(got.has_name_rank); /* from the snapshot's name, kept in the digest */
    assert_int_equal(got.name_rank, 5);
    gm_digest_rank(d, 3, "rank7.digest", &got, &has_got); /* the digest's own name first */
    assert_int_equal(got.name_rank, 7);
    gm_digest_free(d);
    {
        /* damaged: the error says which class */
        static const struct {
            const char *text;
            enum gm_status code;
        } bad[] = {
            {"{\"schema\": \"gpumem.snapshot.digest/2\"}", GM_ERR_UNSUPPORTED},
            {"{\"schema\": \"gpumem.snapshot.digest/1\"}", GM_ERR_FORMAT},
            {"{\"schema\": \"gpumem.snapshot.digest/1\", \"file\": 1}", GM_ERR_FORMAT},
            {"{\"schema\": \"gpumem.snapshot.digest/1\", oops", GM_ERR_FORMAT},
            {"{\"schema\": \"gpumem.snapshot.info/1\"}", GM_ERR_FORMAT},
            {"", GM_ERR_FORMAT},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            assert_int_equal(gm_digest_parse(bad[i].text, strlen(bad[i].text), &d, &err),
                             bad[i].code);
            assert_null(d);
        }
        assert_int_equal(gm_digest_parse(dg, (size_t)GM_DIGEST_MAX_BYTES + 1, &d, &err),
                         GM_ERR_LIMIT);
    }
    free(dg);
    gm_analysis_free(an);
    gm_snapshot_free(snap);
    free(buf);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_digest_reads_back_the_rank_of_its_snapshot),
    cmocka_unit_test(test_rank_from_file_names),
    cmocka_unit_test(test_category_rules_first_match_wins),
    cmocka_unit_test(test_category_rules_refused),
    cmocka_unit_test(test_category_rules_yaml_equals_json),
    cmocka_unit_test(test_category_rules_yaml_refused),
    cmocka_unit_test(test_regions_and_windows),
    cmocka_unit_test(test_regions_walk_matches_every_event),
    cmocka_unit_test(test_annotation_events_with_times_going_back),
    cmocka_unit_test(test_annotation_times_equal_and_past_32_bits),
    cmocka_unit_test(test_rank_names_in_natural_order),
    cmocka_unit_test(test_rank_ids_from_names_devices_or_order),
    cmocka_unit_test(test_rank_files_of_a_folder),
    cmocka_unit_test(test_paths),
    cmocka_unit_test(test_frame_flags),
    cmocka_unit_test(test_training_trace),
    cmocka_unit_test(test_event_lookups_bounded_by_the_trace),
    cmocka_unit_test(test_names),
    cmocka_unit_test(test_nomem),
    cmocka_unit_test(test_oom),
    cmocka_unit_test(test_random_traces),
    cmocka_unit_test(test_walk_consumers_of_random_traces),
    cmocka_unit_test(test_series_of_random_traces_holds_each_events_state),
    cmocka_unit_test(test_series_between_stops_equals_the_series_of_every_event),
    cmocka_unit_test(test_figures_of_random_traces_equal_the_whole_analysis),
    cmocka_unit_test(test_live_at_equals_a_replay_of_random_traces),
    cmocka_unit_test(test_leak_causes),
    cmocka_unit_test(test_user_phases),
    cmocka_unit_test(test_peaks_from_the_analysis_match_the_timeline),
    cmocka_unit_test(test_axis_xs_of_many_events_equal_each_asked_alone),
    cmocka_unit_test(test_diff_analysis_of_the_example_equals_the_full_one),
    cmocka_unit_test(test_stack_sums_per_stack_in_first_order),
    cmocka_unit_test(test_consumed_load_answers_as_one_that_keeps_the_events),
    cmocka_unit_test(test_consumed_load_refuses_what_reads_the_trace),
    cmocka_unit_test(test_consumed_load_under_memory_limits),
    cmocka_unit_test(test_diff_only_analysis_is_refused_where_the_whole_is_needed),
    cmocka_unit_test(test_analysis_without_series_keeps_the_figures),
    cmocka_unit_test(test_first_pass_while_loading_equals_the_walk),
    cmocka_unit_test(test_first_pass_of_more_stacks_than_16_bits_equals_the_walk),
    cmocka_unit_test(test_first_pass_out_of_memory_while_widening_stacks),
    cmocka_unit_test(test_first_pass_used_on_streams_and_step_ranges),
    cmocka_unit_test(test_first_pass_early_allocations_keep_their_streams),
    cmocka_unit_test(test_streams_bounded),
    cmocka_unit_test(test_first_pass_after_a_long_batch_is_the_walk),
    cmocka_unit_test(test_first_pass_kept_when_the_fold_gives_up_at_its_finish),
    cmocka_unit_test(test_default_device_ties_and_empty_devices),
    cmocka_unit_test(test_first_pass_blocks_from_the_start_per_device),
    cmocka_unit_test(test_first_pass_pairs_events_with_the_folds_map),
    cmocka_unit_test(test_threads_equal_inline),
};

/* real snapshots */
static const struct CMUnitTest third_party_tests[] = {
    cmocka_unit_test(test_peaks_of_real_files_from_the_analysis_match_the_timeline),
    cmocka_unit_test(test_diff_analysis_of_real_files_equals_the_full_one),
    cmocka_unit_test(test_first_pass_on_real_files_equals_the_walk),
    cmocka_unit_test(test_threads_equal_inline_real_files),
};

GM_TEST_MAIN(tests, third_party_tests)
