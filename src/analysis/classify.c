/* SPDX-License-Identifier: MIT */
/* classify.c - what the frames of a stack say about the code that allocated or freed:
 * module forward, autograd engine, optimizer step, zero_grad, data loading, parameter
 * loading, user code.  Only frames that real PyTorch programs produce are matched (file
 * paths inside the torch package and the function names PyTorch defines there, plus the
 * C++ symbols of the autograd engine); docs/analysis.md lists every pattern.  Paths are
 * compared with '/' and '\\' as the same character so Windows files match too. */
#include "analysis/analysis_int.h"

#include "base/path.h"
#include "snapshot/snapshot_int.h"

#include "gpumem/arena.h"

#include <string.h>

static bool eq(const char *a, const char *b)
{
    return strcmp(a, b) == 0;
}

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (eq(s, *list))
            return true;
    return false;
}

/* Module methods that move or create parameters and buffers (all end in _apply/convert). */
static const char *const module_param_fns[] = {"_apply",
                                               "convert",
                                               "to",
                                               "cuda",
                                               "to_empty",
                                               "_load_from_state_dict",
                                               "load_state_dict",
                                               "half",
                                               "float",
                                               "double",
                                               "bfloat16",
                                               "type",
                                               "xpu",
                                               NULL};

/* torch.optim.Optimizer methods that are not part of step(). */
static const char *const optim_not_step[] = {"__init__",
                                             "add_param_group",
                                             "state_dict",
                                             "load_state_dict",
                                             "__setstate__",
                                             "__getstate__",
                                             "__repr__",
                                             "_patch_step_function",
                                             "register_step_pre_hook",
                                             "register_step_post_hook",
                                             "register_state_dict_pre_hook",
                                             "register_state_dict_post_hook",
                                             "register_load_state_dict_pre_hook",
                                             "register_load_state_dict_post_hook",
                                             "_process_value_according_to_param_policy",
                                             "zero_grad",
                                             NULL};

/* Batch transfer helpers of training libraries (HF Trainer, accelerate, Lightning). */
static const char *const batch_fns[] = {"_prepare_input",
                                        "_prepare_inputs",
                                        "send_to_device",
                                        "move_data_to_device",
                                        "batch_to_device",
                                        "transfer_batch_to_device",
                                        "_apply_batch_transfer_handler",
                                        NULL};

static uint16_t python_flags(const char *fn, const char *nm)
{
    uint16_t fl = FR_PY;
    bool in_torch = gm_frame_path_in_torch(fn);

    if (gm_path_has(fn, "/torch/nn/modules/module.py")) {
        if (eq(nm, "_call_impl") || eq(nm, "_wrapped_call_impl") || eq(nm, "__call__") ||
            eq(nm, "_slow_forward"))
            fl |= FR_MODULE_CALL;
        else if (in_list(nm, module_param_fns))
            fl |= FR_PARAM_LOAD;
    } else if (gm_path_has(fn, "/torch/nn/init.py") || gm_path_has(fn, "/torch/nn/parameter.py") ||
               gm_path_has(fn, "/torch/serialization.py") ||
               gm_path_has(fn, "/torch/nn/parallel/replicate.py") ||
               gm_path_has(fn, "/safetensors/torch.py")) {
        fl |= FR_PARAM_LOAD;
    } else if (gm_path_has(fn, "/torch/nn/modules/") &&
               (eq(nm, "__init__") || eq(nm, "reset_parameters"))) {
        fl |= FR_PARAM_LOAD;
    } else if (gm_path_has(fn, "/transformers/modeling_utils.py") &&
               (strstr(nm, "load") || eq(nm, "from_pretrained") || eq(nm, "to") || eq(nm, "cuda") ||
                eq(nm, "half") || eq(nm, "float"))) {
        fl |= FR_PARAM_LOAD;
    } else if (gm_path_has(fn, "/accelerate/utils/modeling.py") &&
               (strstr(nm, "set_module_tensor_to_device") || strstr(nm, "load"))) {
        fl |= FR_PARAM_LOAD;
    }

    if (gm_path_has(fn, "/torch/autograd/")) {
        fl |= FR_AUTOGRAD_PY;
        if (gm_path_has(fn, "/torch/autograd/__init__.py") &&
            (eq(nm, "backward") || eq(nm, "grad") || eq(nm, "_make_grads")))
            fl |= FR_BACKWARD;
        if (gm_path_has(fn, "/torch/autograd/graph.py") && eq(nm, "_engine_run_backward"))
            fl |= FR_BACKWARD;
    }
    if (gm_path_has(fn, "/torch/_tensor.py") && eq(nm, "backward"))
        fl |= FR_BACKWARD;
    if (gm_path_has(fn, "/torch/utils/checkpoint.py")) {
        fl |= FR_AUTOGRAD_PY;
        if (strstr(nm, "unpack") || strstr(nm, "recompute") || strstr(nm, "backward"))
            fl |= FR_BACKWARD;
    }

    if (gm_path_has(fn, "/torch/optim/")) {
        if (!gm_path_has(fn, "lr_scheduler") && !gm_path_has(fn, "swa_utils") &&
            !in_list(nm, optim_not_step))
            fl |= FR_OPTIM_STEP;
    } else if ((gm_path_has(fn, "/optim/") || gm_path_has(fn, "/optimizers/") ||
                gm_path_has(fn, "/optimization.py") || gm_path_has(fn, "/deepspeed/ops/")) &&
               (eq(nm, "step") || starts(nm, "_multi_tensor_") || starts(nm, "_single_tensor_") ||
                starts(nm, "_fused_") || eq(nm, "_init_group"))) {
        fl |= FR_OPTIM_STEP;
    }
    if (eq(nm, "zero_grad"))
        fl |= FR_ZERO_GRAD;
    /* Data loading and batches moved to the GPU by the libraries that do it for the user:
     * torch.utils.data, PyG Batch/Data.to(), Hugging Face BatchEncoding/BatchFeature.to(),
     * the HF Trainer, accelerate and Lightning batch transfer helpers. */
    if (gm_path_has(fn, "/torch/utils/data/") || gm_path_has(fn, "/torch_geometric/data/") ||
        ((gm_path_has(fn, "/transformers/tokenization_utils_base.py") ||
          gm_path_has(fn, "/transformers/feature_extraction_utils.py")) &&
         eq(nm, "to")) ||
        (!in_torch && gm_frame_path_in_packages(fn) && in_list(nm, batch_fns)))
        fl |= FR_DATA;

    return fl;
}

static uint16_t cpp_flags(const char *nm)
{
    if (starts(nm, "torch::autograd::Engine::") ||
        starts(nm, "torch::autograd::python::PythonEngine::") ||
        starts(nm, "torch::autograd::Node::operator()") ||
        starts(nm, "torch::autograd::AccumulateGrad::") ||
        starts(nm, "torch::autograd::generated::details::") ||
        strstr(nm, "torch::autograd::CppNode"))
        return FR_BACKWARD;
    /* torch::autograd::generated::MmBackward0::apply(...): a backward node running.  Not
     * ...::release_variables(), which also runs when a graph is dropped in forward. */
    if (strstr(nm, "torch::autograd::") && strstr(nm, "Backward") && strstr(nm, "::apply("))
        return FR_BACKWARD;
    return 0;
}

uint16_t ana_frame_flags(const struct gm_snapshot_frame *f)
{
    const char *fn = f->filename ? f->filename : "";
    const char *nm = f->name ? f->name : "";
    if (f->is_python)
        /* user code by the snapshot's one rule (gm_snapshot_frame_is_user()) */
        return (uint16_t)(python_flags(fn, nm) | (gm_snapshot_frame_is_user(f) ? FR_USER : 0));
    return cpp_flags(nm);
}

enum gm_status ana_classifier_init(struct ana_classifier *c, const struct gm_snapshot *snap,
                                   struct gm_error *err)
{
    memset(c, 0, sizeof(*c));
    c->snap = snap;
    c->frame_flags = gm_calloc(snap->n_frames ? snap->n_frames : 1, sizeof(uint16_t));
    c->stack_flags = gm_calloc(snap->n_stacks ? snap->n_stacks : 1, sizeof(uint16_t));
    c->caller = gm_malloc((snap->n_stacks ? snap->n_stacks : 1) * sizeof(uint32_t));
    if (!c->frame_flags || !c->stack_flags || !c->caller) {
        ana_classifier_release(c);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "analysis: out of memory for frame flags");
    }
    for (size_t i = 0; i < snap->n_frames; i++)
        c->frame_flags[i] = ana_frame_flags(&snap->frames[i]);
    memset(c->caller, 0xfe, (snap->n_stacks ? snap->n_stacks : 1) * sizeof(uint32_t));
    return GM_OK;
}

void ana_classifier_release(struct ana_classifier *c)
{
    gm_free(c->frame_flags);
    gm_free(c->stack_flags);
    gm_free(c->caller);
    c->frame_flags = NULL;
    c->stack_flags = NULL;
    c->caller = NULL;
}

uint16_t ana_stack_flags(struct ana_classifier *c, uint32_t stack)
{
    const struct gm_snapshot *snap = c->snap;
    if (stack >= snap->n_stacks)
        return 0;
    uint16_t cached = c->stack_flags[stack];
    if (cached & FR_STACK_DONE)
        return (uint16_t)(cached & ~FR_STACK_DONE);
    const struct gm_snapshot_stack *st = &snap->stacks[stack];
    uint16_t fl = 0;
    long outer_py = -1;
    for (uint32_t i = 0; i < st->n_frames; i++) {
        uint32_t id = st->frames[i];
        if (id >= snap->n_frames)
            continue;
        fl |= c->frame_flags[id];
        if (c->frame_flags[id] & FR_PY)
            outer_py = (long)id;
    }
    /* A Python stack that starts inside torch/autograd (or checkpoint) was entered from the
     * C++ autograd engine: a custom Function's backward, a hook, a recomputation. */
    if (outer_py >= 0 && (c->frame_flags[outer_py] & FR_AUTOGRAD_PY))
        fl |= FR_BACKWARD;
    c->stack_flags[stack] = (uint16_t)(fl | FR_STACK_DONE);
    return fl;
}

#define CALLER_UNSET 0xfefefefeu

uint32_t ana_stack_caller(struct ana_classifier *c, uint32_t stack)
{
    const struct gm_snapshot *snap = c->snap;
    if (stack >= snap->n_stacks)
        return ANA_NO_FRAME;
    if (c->caller[stack] != CALLER_UNSET)
        return c->caller[stack];
    const struct gm_snapshot_stack *st = &snap->stacks[stack];
    long outer_call = -1;
    for (uint32_t i = 0; i < st->n_frames; i++)
        if (st->frames[i] < snap->n_frames && (c->frame_flags[st->frames[i]] & FR_MODULE_CALL))
            outer_call = (long)i;
    uint32_t found = ANA_NO_FRAME;
    for (uint32_t i = (uint32_t)(outer_call + 1); outer_call >= 0 && i < st->n_frames; i++) {
        uint32_t id = st->frames[i];
        if (id < snap->n_frames && (c->frame_flags[id] & FR_PY) &&
            !(c->frame_flags[id] & FR_MODULE_CALL)) {
            found = id;
            break;
        }
    }
    c->caller[stack] = found;
    return found;
}

uint32_t ana_stack_model_caller(const struct ana_classifier *c, uint32_t stack)
{
    const struct gm_snapshot *snap = c->snap;
    const struct gm_snapshot_stack *st;
    long outer = -1;
    if (stack >= snap->n_stacks)
        return ANA_NO_FRAME;
    st = &snap->stacks[stack];
    /* the outermost frame of the model: a module call, or a forward() where the program
     * calls the model's forward directly (no module call frames around it) */
    for (uint32_t i = 0; i < st->n_frames; i++) {
        uint32_t id = st->frames[i];
        if (id < snap->n_frames && (c->frame_flags[id] & FR_PY) &&
            ((c->frame_flags[id] & FR_MODULE_CALL) || eq(snap->frames[id].name, "forward")))
            outer = (long)i;
    }
    for (uint32_t i = (uint32_t)(outer + 1); outer >= 0 && i < st->n_frames; i++) {
        uint32_t id = st->frames[i];
        if (id < snap->n_frames && (c->frame_flags[id] & FR_PY))
            return id;
    }
    return ANA_NO_FRAME;
}

uint32_t ana_stack_first_user(const struct ana_classifier *c, uint32_t stack)
{
    const struct gm_snapshot *snap = c->snap;
    if (stack >= snap->n_stacks)
        return ANA_NO_FRAME;
    const struct gm_snapshot_stack *st = &snap->stacks[stack];
    for (uint32_t i = 0; i < st->n_frames; i++)
        if (st->frames[i] < snap->n_frames && (c->frame_flags[st->frames[i]] & FR_USER))
            return st->frames[i];
    return ANA_NO_FRAME;
}

bool ana_same_function(const struct gm_snapshot *snap, uint32_t a, uint32_t b)
{
    if (a >= snap->n_frames || b >= snap->n_frames)
        return false;
    const struct gm_snapshot_frame *x = &snap->frames[a], *y = &snap->frames[b];
    return (x->filename == y->filename || !strcmp(x->filename, y->filename)) &&
           (x->name == y->name || !strcmp(x->name, y->name));
}

enum ana_raw_phase ana_phase_of_flags(uint16_t fl)
{
    if (fl & FR_BACKWARD)
        return RAW_BACKWARD;
    if (fl & FR_OPTIM_STEP)
        return RAW_STEP;
    if (fl & FR_ZERO_GRAD)
        return RAW_OTHER;
    if (fl & FR_MODULE_CALL)
        return RAW_FORWARD;
    if (fl & (FR_PARAM_LOAD | FR_DATA))
        return RAW_OTHER;
    return RAW_UNKNOWN;
}
