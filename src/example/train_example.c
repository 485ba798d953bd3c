/* SPDX-License-Identifier: MIT */
/* train_example.c - simulate a GPT training job on a model of the CUDA caching allocator and
 * write its memory snapshot (see example.h).
 *
 * Three layers: frames and stacks (interned; one Python list per captured traceback, as the
 * real writer does), the allocator (the library's model of the caching allocator, alloc.h, on
 * a device that hands out addresses one after the other; its segment events and the final
 * segments become the snapshot's), and the training script that drives it.  The pickle object graph
 * follows writer A of snapshot-format.md: key strings and state/action strings shared, one dict per
 * unique frame, the traceback list of an alloc shared by its segment_alloc, its live block and the
 * segment's frames, the list of a free shared by free_requested and free_completed, 'N/A' fresh per
 * entry. */
#include "gpumem/example.h"

#include "base/map.h"
#include "base/vec.h"

#include "gpumem/alloc.h"
#include "gpumem/arena.h"
#include "gpumem/json.h"
#include "gpumem/pickle_write.h"
#include "gpumem/version.h"

#include <string.h>

/* ---- frames and stacks ------------------------------------------------------------------ */

#define MAX_STACK 24

struct frame {
    const char *name;
    const char *file;
    int line;
    uint32_t memo;
};

struct stack {
    int f[MAX_STACK]; /* frame ids, innermost first */
    int n;
};

struct capture {
    int stack;
    uint32_t memo; /* the traceback's list */
};

/* ---- allocator ---------------------------------------------------------------------------- */

/* A tensor the script holds: its block in the model and the traceback of its allocation. */
struct tensor {
    uint64_t addr;      /* 0 once freed */
    uint64_t requested; /* bytes asked for */
    int capture;
};

enum action { A_ALLOC, A_FREE_REQ, A_FREE_DONE, A_SEG_ALLOC };

struct event {
    enum action action;
    uint64_t addr;
    uint64_t size;
    uint64_t time_us;
    int capture;
};

struct annotation {
    const char *name;
    bool start;
    uint64_t time_us;
};

#define VEC(T)                                                                                     \
    struct {                                                                                       \
        T *v;                                                                                      \
        size_t n, cap;                                                                             \
    }

struct sim {
    VEC(struct frame) frames;
    VEC(struct stack) stacks;
    VEC(struct capture) caps;
    VEC(struct tensor) tensors; /* by handle, in allocation order */
    VEC(struct event) events;
    VEC(struct annotation) anns;
    struct gm_alloc *alloc;
    struct gm_map seg_capture; /* segment address -> the capture of the request that made it */
    int capture_now;           /* the capture of the request being served */
    uint64_t next_addr;        /* the device's next address */
    uint64_t now_us;
    uint32_t rng;
    uint64_t batch; /* sequences per training batch */
    int device;     /* the CUDA device the job runs on */
    bool phases;    /* mark gpumem.phase:<name> ranges, as gpumem.torch.record() does */
    bool nomem;
};

#define PUSH(s, vec, val)                                                                          \
    do {                                                                                           \
        if (GM_VEC_RESERVE((s)->vec.v, (s)->vec.cap, (s)->vec.n + 1, NULL))                        \
            (s)->vec.v[(s)->vec.n++] = (val);                                                      \
        else                                                                                       \
            (s)->nomem = true;                                                                     \
    } while (0)

static int frame_id(struct sim *s, const char *name, const char *file, int line)
{
    for (size_t i = 0; i < s->frames.n; i++) {
        const struct frame *f = &s->frames.v[i];
        if (f->line == line && !strcmp(f->name, name) && !strcmp(f->file, file))
            return (int)i;
    }
    struct frame f = {name, file, line, GM_PICKLE_NO_MEMO};
    PUSH(s, frames, f);
    return s->nomem ? 0 : (int)s->frames.n - 1;
}

/* Python source locations used in the stacks. */
#define SP       "/home/user/.venv/lib/python3.11/site-packages/torch/"
#define T_MODULE SP "nn/modules/module.py"
#define T_LINEAR SP "nn/modules/linear.py"
#define T_NORM   SP "nn/modules/normalization.py"
#define T_ACTV   SP "nn/modules/activation.py"
#define T_SPARSE SP "nn/modules/sparse.py"
#define T_FUNC   SP "nn/functional.py"
#define T_GRAPH  SP "autograd/graph.py"
#define T_AG     SP "autograd/__init__.py"
#define T_TENSOR SP "_tensor.py"
#define T_ADAMW  SP "optim/adamw.py"
#define T_OPTIM  SP "optim/optimizer.py"
#define U_TRAIN  "/home/user/gpt/train.py"
#define U_MODEL  "/home/user/gpt/model.py"

struct fdef {
    const char *name;
    const char *file;
    int line;
};

/* A stack: 'inner' frames (innermost first) on top of stack 'outer' (-1: none). */
static int mkstack(struct sim *s, const struct fdef *inner, int n_inner, int outer)
{
    struct stack st;
    st.n = 0;
    for (int i = 0; i < n_inner && st.n < MAX_STACK; i++)
        st.f[st.n++] = frame_id(s, inner[i].name, inner[i].file, inner[i].line);
    if (outer >= 0 && !s->nomem) {
        const struct stack *o = &s->stacks.v[outer];
        for (int i = 0; i < o->n && st.n < MAX_STACK; i++)
            st.f[st.n++] = o->f[i];
    }
    for (size_t i = 0; i < s->stacks.n; i++) {
        const struct stack *o = &s->stacks.v[i];
        if (o->n == st.n && !memcmp(o->f, st.f, sizeof(int) * (size_t)st.n))
            return (int)i;
    }
    PUSH(s, stacks, st);
    return s->nomem ? 0 : (int)s->stacks.n - 1;
}

#define STK(s, outer, ...)                                                                         \
    mkstack((s), (const struct fdef[]){__VA_ARGS__},                                               \
            (int)(sizeof((const struct fdef[]){__VA_ARGS__}) / sizeof(struct fdef)), (outer))

/* A module call: the module's forward at 'line' of 'file', under _call_impl. */
static int call(struct sim *s, const char *fn, const char *file, int line, int outer)
{
    return STK(s, outer, {fn, file, line}, {"_call_impl", T_MODULE, 1762},
               {"_wrapped_call_impl", T_MODULE, 1751});
}

static uint32_t rnd(struct sim *s)
{
    s->rng = s->rng * 1664525u + 1013904223u;
    return s->rng >> 8;
}

static void tick(struct sim *s, uint64_t base_us)
{
    s->now_us += base_us + rnd(s) % (base_us / 4 + 1);
}

static int capture(struct sim *s, int stack)
{
    struct capture c = {stack, GM_PICKLE_NO_MEMO};
    PUSH(s, caps, c);
    return s->nomem ? 0 : (int)s->caps.n - 1;
}

static void event(struct sim *s, enum action a, uint64_t addr, uint64_t size, int cap)
{
    struct event e = {a, addr, size, s->now_us, cap};
    PUSH(s, events, e);
}

static void annotate(struct sim *s, const char *name, bool start)
{
    struct annotation a = {name, start, s->now_us};
    PUSH(s, anns, a);
    tick(s, 20);
}

/* A phase of gpumem.torch.record() (a record_function range "gpumem.phase:<name>"). */
static void user_phase(struct sim *s, const char *name, bool start)
{
    if (s->phases)
        annotate(s, name, start);
}

/* The device: segments one after the other from s->next_addr, each range a whole number of
 * 2 MiB pages, never given back (the script never empties the cache). */
static enum gm_status dev_seg_alloc(void *ctx, uint64_t size, uint64_t *addr, struct gm_error *err)
{
    struct sim *s = ctx;
    (void)err;
    *addr = s->next_addr;
    s->next_addr += (size + GM_ALLOC_ROUND_LARGE - 1) / GM_ALLOC_ROUND_LARGE * GM_ALLOC_ROUND_LARGE;
    return GM_OK;
}

static void dev_seg_free(void *ctx, uint64_t addr, uint64_t size)
{
    (void)ctx;
    (void)addr;
    (void)size;
}

static const struct gm_alloc_device_ops dev_ops = {dev_seg_alloc, dev_seg_free, NULL,
                                                   NULL,          NULL,         NULL};

/* A segment the model asked the device for: the trace's segment_alloc, under the traceback
 * of the request that needed it. */
static void on_device_event(void *ctx, enum gm_alloc_event_kind kind, uint64_t addr, uint64_t size,
                            int64_t stream)
{
    struct sim *s = ctx;
    (void)stream;
    if (kind != GM_ALLOC_EV_SEGMENT_ALLOC)
        return;
    event(s, A_SEG_ALLOC, addr, size, s->capture_now);
    if (!gm_map_put(&s->seg_capture, addr, (uint64_t)s->capture_now))
        s->nomem = true;
}

/* torch.empty(nbytes) on the default stream; returns the tensor's handle. */
static int t_alloc(struct sim *s, uint64_t nbytes, int stack)
{
    int cap = capture(s, stack);
    struct tensor t = {0, nbytes, cap};

    tick(s, 700);
    if (s->nomem)
        return -1;
    s->capture_now = cap;
    if (gm_alloc_malloc(s->alloc, nbytes, 0, &t.addr, NULL) != GM_OK) {
        s->nomem = true; /* the device is unlimited: only the host can run out */
        return -1;
    }
    event(s, A_ALLOC, t.addr, nbytes, cap);
    PUSH(s, tensors, t);
    return s->nomem ? -1 : (int)s->tensors.n - 1;
}

/* The tensor 'h' dies; 'stack' is where (the free's traceback). */
static void t_free(struct sim *s, int h, int stack)
{
    int cap = capture(s, stack);
    struct tensor *t;
    tick(s, 90);
    if (s->nomem || h < 0)
        return;
    t = &s->tensors.v[h];
    event(s, A_FREE_REQ, t->addr, t->requested, cap);
    event(s, A_FREE_DONE, t->addr, t->requested, cap);
    if (gm_alloc_dealloc(s->alloc, t->addr, NULL) != GM_OK)
        s->nomem = true;
    t->addr = 0;
}

/* ---- the training script ------------------------------------------------------------------ */

#define VOCAB  32000u
#define HIDDEN 1024u
#define LAYERS 4
#define HEADS  16u
#define SEQ    512u
#define F32    4u

struct param {
    uint64_t bytes;
    int t, grad, exp_avg, exp_avg_sq;
};

enum {
    P_WTE,
    P_LAYER0, /* 12 per layer: ln1 w b, qkv w b, proj w b, ln2 w b, fc1 w b, fc2 w b */
    P_LNF_W = P_LAYER0 + 12 * LAYERS,
    P_LNF_B,
    P_HEAD,
    N_PARAMS
};

struct job {
    struct sim *s;
    struct param p[N_PARAMS];
    /* stacks */
    int st_module, st_main, st_train_step, st_bwd, st_zero, st_init, st_foreach;
};

static uint64_t pbytes(int i)
{
    static const uint64_t per_layer[12] = {
        HIDDEN, HIDDEN, 3ull * HIDDEN * HIDDEN, 3ull * HIDDEN, (uint64_t)HIDDEN * HIDDEN, HIDDEN,
        HIDDEN, HIDDEN, 4ull * HIDDEN * HIDDEN, 4ull * HIDDEN, 4ull * HIDDEN * HIDDEN,    HIDDEN};
    if (i == P_WTE || i == P_HEAD)
        return (uint64_t)VOCAB * HIDDEN * F32;
    if (i == P_LNF_W || i == P_LNF_B)
        return HIDDEN * F32;
    return per_layer[(i - P_LAYER0) % 12] * F32;
}

struct layer_acts {
    int x_in; /* block input, saved by ln_1 */
    int ln1, ln1_mean, ln1_rstd, qkv, att, lse, res1, ln2, ln2_mean, ln2_rstd, fc1, gelu;
};

struct fwd {
    struct layer_acts l[LAYERS];
    int head_in; /* output of the last block, saved by ln_f */
    int lnf, lnf_mean, lnf_rstd, logp, loss, total_weight;
};

/* A LayerNorm call: output plus the saved mean and rstd. */
static void layer_norm(struct sim *s, uint64_t tokens, int outer, int *out, int *mean, int *rstd)
{
    int st = STK(s, call(s, "forward", T_NORM, 217, outer), {"layer_norm", T_FUNC, 2910});
    *out = t_alloc(s, tokens * HIDDEN * F32, st);
    *mean = t_alloc(s, tokens * F32, st);
    *rstd = t_alloc(s, tokens * F32, st);
}

/* loss = model(x, y), called from the stack 'site' (train_step or evaluate). */
static void forward(struct sim *s, struct fwd *f, uint64_t batch, int site)
{
    uint64_t tok = batch * SEQ, a = tok * HIDDEN * F32;
    int gpt = call(s, "forward", U_MODEL, 95, site);
    int x =
        t_alloc(s, a, STK(s, call(s, "forward", T_SPARSE, 190, gpt), {"embedding", T_FUNC, 2551}));

    for (int l = 0; l < LAYERS; l++) {
        struct layer_acts *L = &f->l[l];
        int blk = call(s, "forward", U_MODEL, 97, site);
        int attn_site = call(s, "forward", U_MODEL, 60, blk);
        int mlp_site = call(s, "forward", U_MODEL, 61, blk);
        int res1_site = STK(s, blk, {"forward", U_MODEL, 60});
        int res2_site = STK(s, blk, {"forward", U_MODEL, 61});
        L->x_in = x;
        layer_norm(s, tok, attn_site, &L->ln1, &L->ln1_mean, &L->ln1_rstd);
        L->qkv =
            t_alloc(s, 3 * a,
                    call(s, "forward", T_LINEAR, 125, STK(s, attn_site, {"forward", U_MODEL, 35})));
        {
            int sdpa = STK(s, attn_site, {"forward", U_MODEL, 38});
            L->att = t_alloc(s, a, sdpa);
            L->lse = t_alloc(s, batch * HEADS * SEQ * F32, sdpa);
        }
        int proj = t_alloc(
            s, a, call(s, "forward", T_LINEAR, 125, STK(s, attn_site, {"forward", U_MODEL, 40})));
        L->res1 = t_alloc(s, a, res1_site);
        t_free(s, proj, res1_site);
        layer_norm(s, tok, mlp_site, &L->ln2, &L->ln2_mean, &L->ln2_rstd);
        L->fc1 =
            t_alloc(s, 4 * a,
                    call(s, "forward", T_LINEAR, 125, STK(s, mlp_site, {"forward", U_MODEL, 48})));
        L->gelu = t_alloc(
            s, 4 * a, call(s, "forward", T_ACTV, 734, STK(s, mlp_site, {"forward", U_MODEL, 49})));
        int fc2 = t_alloc(
            s, a, call(s, "forward", T_LINEAR, 125, STK(s, mlp_site, {"forward", U_MODEL, 50})));
        x = t_alloc(s, a, res2_site);
        t_free(s, fc2, res2_site);
    }
    f->head_in = x;
    layer_norm(s, tok, STK(s, site, {"forward", U_MODEL, 98}), &f->lnf, &f->lnf_mean, &f->lnf_rstd);
    {
        int logits =
            t_alloc(s, tok * VOCAB * F32,
                    call(s, "forward", T_LINEAR, 125, STK(s, site, {"forward", U_MODEL, 99})));
        int ce = STK(s, site, {"cross_entropy", T_FUNC, 3494}, {"forward", U_MODEL, 100});
        f->logp = t_alloc(s, tok * VOCAB * F32, ce);
        f->loss = t_alloc(s, F32, ce);
        f->total_weight = t_alloc(s, F32, ce);
        /* 'logits' is a local of GPT.forward: it dies when forward returns */
        t_free(s, logits, STK(s, site, {"forward", U_MODEL, 101}));
    }
}

/* A parameter's gradient, produced by the autograd engine (set_to_none: a new tensor). */
static void grad(struct job *j, int i)
{
    j->p[i].grad = t_alloc(j->s, j->p[i].bytes, j->st_bwd);
}

/* loss.backward(): activation gradients appear and die, saved activations are released,
 * parameter gradients appear and stay. */
static void backward(struct job *j, struct fwd *f)
{
    struct sim *s = j->s;
    const int B = j->st_bwd;
    uint64_t tok = s->batch * SEQ, a = tok * HIDDEN * F32;
    int g = t_alloc(s, F32, B); /* ones_like(loss) */
    int dlogp = t_alloc(s, tok * VOCAB * F32, B);
    t_free(s, g, B);
    t_free(s, f->total_weight, B);
    int dlogits = t_alloc(s, tok * VOCAB * F32, B);
    t_free(s, dlogp, B);
    t_free(s, f->logp, B);
    int dlnf = t_alloc(s, a, B);
    grad(j, P_HEAD);
    t_free(s, dlogits, B);
    t_free(s, f->lnf, B);
    int dx = t_alloc(s, a, B);
    grad(j, P_LNF_W);
    grad(j, P_LNF_B);
    t_free(s, dlnf, B);
    t_free(s, f->lnf_mean, B);
    t_free(s, f->lnf_rstd, B);
    t_free(s, f->head_in, B);
    for (int l = LAYERS - 1; l >= 0; l--) {
        struct layer_acts *L = &f->l[l];
        int p0 = P_LAYER0 + 12 * l;
        int dgelu = t_alloc(s, 4 * a, B);
        grad(j, p0 + 10);
        grad(j, p0 + 11);
        t_free(s, L->gelu, B);
        int dfc1 = t_alloc(s, 4 * a, B);
        t_free(s, dgelu, B);
        t_free(s, L->fc1, B);
        int dln2 = t_alloc(s, a, B);
        grad(j, p0 + 8);
        grad(j, p0 + 9);
        t_free(s, dfc1, B);
        t_free(s, L->ln2, B);
        int dres1 = t_alloc(s, a, B);
        grad(j, p0 + 6);
        grad(j, p0 + 7);
        t_free(s, dln2, B);
        t_free(s, L->ln2_mean, B);
        t_free(s, L->ln2_rstd, B);
        t_free(s, L->res1, B);
        t_free(s, dx, B); /* accumulated into dres1 */
        int datt = t_alloc(s, a, B);
        grad(j, p0 + 4);
        grad(j, p0 + 5);
        int dqkv = t_alloc(s, 3 * a, B);
        t_free(s, datt, B);
        t_free(s, L->att, B);
        t_free(s, L->lse, B);
        t_free(s, L->qkv, B);
        int dln1 = t_alloc(s, a, B);
        grad(j, p0 + 2);
        grad(j, p0 + 3);
        t_free(s, dqkv, B);
        t_free(s, L->ln1, B);
        int dxin = t_alloc(s, a, B);
        grad(j, p0 + 0);
        grad(j, p0 + 1);
        t_free(s, dln1, B);
        t_free(s, L->ln1_mean, B);
        t_free(s, L->ln1_rstd, B);
        t_free(s, L->x_in, B);
        t_free(s, dres1, B);
        dx = dxin;
    }
    grad(j, P_WTE);
    t_free(s, dx, B);
}

/* optimizer.step(): AdamW, foreach implementation. */
static void step(struct job *j, bool first)
{
    struct sim *s = j->s;
    annotate(s, "Optimizer.step#AdamW.step", true);
    if (first) {
        int ea = STK(s, j->st_init, {"_init_group", T_ADAMW, 120});
        int es = STK(s, j->st_init, {"_init_group", T_ADAMW, 124});
        for (int i = 0; i < N_PARAMS; i++) {
            j->p[i].exp_avg = t_alloc(s, j->p[i].bytes, ea);
            j->p[i].exp_avg_sq = t_alloc(s, j->p[i].bytes, es);
        }
    }
    {
        int tmp[N_PARAMS];
        int mk = STK(s, j->st_foreach, {"_multi_tensor_adamw", T_ADAMW, 598});
        int rel = STK(s, j->st_foreach, {"_multi_tensor_adamw", T_ADAMW, 614});
        for (int i = 0; i < N_PARAMS; i++)
            tmp[i] = t_alloc(s, j->p[i].bytes, mk);
        for (int i = 0; i < N_PARAMS; i++)
            t_free(s, tmp[i], rel);
    }
    annotate(s, "Optimizer.step#AdamW.step", false);
}

static void zero_grad(struct job *j)
{
    struct sim *s = j->s;
    annotate(s, "Optimizer.zero_grad#AdamW.zero_grad", true);
    for (int i = 0; i < N_PARAMS; i++) {
        t_free(s, j->p[i].grad, j->st_zero);
        j->p[i].grad = -1;
    }
    annotate(s, "Optimizer.zero_grad#AdamW.zero_grad", false);
}

/* x, y = get_batch(split): token ids and targets copied to the GPU (int64). */
static void get_batch(struct sim *s, uint64_t batch, int line, int *x, int *y)
{
    int st =
        STK(s, -1, {"get_batch", U_TRAIN, 41}, {"main", U_TRAIN, line}, {"<module>", U_TRAIN, 142});
    annotate(s, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", true);
    tick(s, 6000);
    annotate(s, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", false);
    *x = t_alloc(s, batch * SEQ * 8, st);
    *y = t_alloc(s, batch * SEQ * 8, st);
}

static void run_job(struct job *j, const struct gm_example_opts *o)
{
    struct sim *s = j->s;
    int x = -1, y = -1;

    j->st_module = STK(s, -1, {"<module>", U_TRAIN, 142});
    j->st_main = STK(s, j->st_module, {"main", U_TRAIN, 131});
    j->st_train_step =
        STK(s, -1, {"train_step", U_TRAIN, 58}, {"main", U_TRAIN, 131}, {"<module>", U_TRAIN, 142});
    j->st_bwd = STK(s, -1, {"_engine_run_backward", T_GRAPH, 829}, {"backward", T_AG, 353},
                    {"backward", T_TENSOR, 648}, {"train_step", U_TRAIN, 59},
                    {"main", U_TRAIN, 131}, {"<module>", U_TRAIN, 142});
    {
        int step_site = STK(s, -1, {"step", T_ADAMW, 209}, {"_use_grad", T_OPTIM, 91},
                            {"wrapper", T_OPTIM, 487}, {"train_step", U_TRAIN, 60},
                            {"main", U_TRAIN, 131}, {"<module>", U_TRAIN, 142});
        j->st_init = step_site;
        j->st_foreach =
            STK(s, -1, {"adamw", T_ADAMW, 335}, {"maybe_fallback", T_OPTIM, 154},
                {"step", T_ADAMW, 220}, {"_use_grad", T_OPTIM, 91}, {"wrapper", T_OPTIM, 487},
                {"train_step", U_TRAIN, 60}, {"main", U_TRAIN, 131}, {"<module>", U_TRAIN, 142});
    }
    j->st_zero = STK(s, -1, {"zero_grad", T_OPTIM, 1021}, {"train_step", U_TRAIN, 61},
                     {"main", U_TRAIN, 131}, {"<module>", U_TRAIN, 142});
    {
        /* main() at line 118: model = GPT(cfg).to(device) */
        int main118 = STK(s, j->st_module, {"main", U_TRAIN, 118});
        int to = STK(s, main118, {"to", T_MODULE, 1371});
        int root = STK(s, to, {"_apply", T_MODULE, 930});
        int list = STK(s, root, {"_apply", T_MODULE, 930});
        int block = STK(s, list, {"_apply", T_MODULE, 930});
        int leaf_in_block = STK(s, block, {"_apply", T_MODULE, 930});
        int leaf_top = STK(s, root, {"_apply", T_MODULE, 930});
        for (int i = 0; i < N_PARAMS; i++) {
            int outer = (i >= P_LAYER0 && i < P_LNF_W) ? leaf_in_block : leaf_top;
            int st = STK(s, outer, {"convert", T_MODULE, 1357}, {"_apply", T_MODULE, 957});
            j->p[i].bytes = pbytes(i);
            j->p[i].t = t_alloc(s, j->p[i].bytes, st);
            j->p[i].grad = j->p[i].exp_avg = j->p[i].exp_avg_sq = -1;
        }
    }
    tick(s, 60000);
    for (unsigned it = 0; it < o->iterations && !s->nomem; it++) {
        int nx, ny;
        struct fwd f;
        user_phase(s, "gpumem.phase:data", true);
        get_batch(s, s->batch, 127, &nx, &ny);
        if (x >= 0) {
            int rebind = STK(s, j->st_module, {"main", U_TRAIN, 127});
            t_free(s, x, rebind);
            t_free(s, y, rebind);
        }
        x = nx;
        y = ny;
        user_phase(s, "gpumem.phase:data", false);
        user_phase(s, "gpumem.phase:forward", true);
        forward(s, &f, s->batch, j->st_train_step);
        user_phase(s, "gpumem.phase:forward", false);
        tick(s, 3000);
        user_phase(s, "gpumem.phase:backward", true);
        backward(j, &f);
        user_phase(s, "gpumem.phase:backward", false);
        tick(s, 2000);
        user_phase(s, "gpumem.phase:optimizer", true);
        step(j, it == 0);
        zero_grad(j);
        user_phase(s, "gpumem.phase:optimizer", false);
        /* 'loss' is a local of train_step */
        t_free(s, f.loss, STK(s, j->st_module, {"main", U_TRAIN, 131}));
        if (o->leak) {
            /* val_losses.append(evaluate(model, xv, yv)) without torch.no_grad(): the loss
             * keeps its graph, and the graph keeps every saved activation */
            int xv, yv;
            struct fwd ev;
            user_phase(s, "gpumem.phase:evaluate", true);
            get_batch(s, 1, 132, &xv, &yv);
            forward(s, &ev, 1,
                    STK(s, -1, {"evaluate", U_TRAIN, 70}, {"main", U_TRAIN, 133},
                        {"<module>", U_TRAIN, 142}));
            user_phase(s, "gpumem.phase:evaluate", false);
        }
        tick(s, 25000);
    }
}

/* ---- pickle output ------------------------------------------------------------------------ */

struct keys {
    uint32_t device, address, total_size, allocated_size, active_size, requested_size, stream,
        segment_type, segment_pool_id, is_expandable, frames, blocks, size, state, action, addr,
        time_us, compile_context, name, filename, line;
    uint32_t v_large, v_small, v_active, v_inactive, v_action[4];
    uint32_t empty_list;
};

#define KEY(w, k, field, text) gm_pickle_str_shared((w), (text), &(k)->field)

static void write_capture(struct gm_pickle_writer *w, struct sim *s, struct keys *k, int cap)
{
    struct capture *c = &s->caps.v[cap];
    if (c->memo != GM_PICKLE_NO_MEMO) {
        gm_pickle_get(w, c->memo);
        return;
    }
    const struct stack *st = &s->stacks.v[c->stack];
    c->memo = gm_pickle_list_begin(w, (size_t)st->n);
    for (int i = 0; i < st->n; i++) {
        struct frame *f = &s->frames.v[st->f[i]];
        if (f->memo != GM_PICKLE_NO_MEMO) {
            gm_pickle_get(w, f->memo);
            continue;
        }
        f->memo = gm_pickle_dict_begin(w, 3);
        KEY(w, k, name, "name");
        gm_pickle_str(w, f->name);
        KEY(w, k, filename, "filename");
        gm_pickle_str(w, f->file);
        KEY(w, k, line, "line");
        gm_pickle_int(w, f->line);
        gm_pickle_dict_end(w);
    }
    gm_pickle_list_end(w);
}

/* What write_segment() needs beside the writer: the captures of the live blocks. */
struct seg_writer {
    struct gm_pickle_writer *w;
    struct sim *s;
    struct keys *k;
    const struct gm_map *block_capture; /* address of a live tensor -> its capture */
};

static int capture_at(const struct gm_map *m, uint64_t addr)
{
    uint64_t v;
    return gm_map_get(m, addr, &v) ? (int)v : -1;
}

static enum gm_status write_segment(void *ctx, const struct gm_alloc_segment_info *g,
                                    struct gm_error *err)
{
    struct seg_writer *sw = ctx;
    struct gm_pickle_writer *w = sw->w;
    struct sim *s = sw->s;
    struct keys *k = sw->k;
    uint64_t allocated = 0, requested = 0;
    (void)err;
    for (size_t b = 0; b < g->n_blocks; b++) {
        if (g->blocks[b].state == GM_ALLOC_BLOCK_ACTIVE_ALLOCATED) {
            allocated += g->blocks[b].size;
            requested += g->blocks[b].requested;
        }
    }
    gm_pickle_dict_begin(w, 12);
    KEY(w, k, device, "device");
    gm_pickle_int(w, s->device);
    KEY(w, k, address, "address");
    gm_pickle_uint(w, g->addr);
    KEY(w, k, total_size, "total_size");
    gm_pickle_uint(w, g->size);
    KEY(w, k, allocated_size, "allocated_size");
    gm_pickle_uint(w, allocated);
    KEY(w, k, active_size, "active_size");
    gm_pickle_uint(w, allocated);
    KEY(w, k, requested_size, "requested_size");
    gm_pickle_uint(w, requested);
    KEY(w, k, stream, "stream");
    gm_pickle_int(w, 0);
    KEY(w, k, segment_type, "segment_type");
    if (g->is_small)
        gm_pickle_str_shared(w, "small", &k->v_small);
    else
        gm_pickle_str_shared(w, "large", &k->v_large);
    KEY(w, k, segment_pool_id, "segment_pool_id");
    gm_pickle_tuple_begin(w, 2);
    gm_pickle_int(w, 0);
    gm_pickle_int(w, 0);
    gm_pickle_tuple_end(w);
    KEY(w, k, is_expandable, "is_expandable");
    gm_pickle_bool(w, false);
    KEY(w, k, frames, "frames");
    write_capture(w, s, k, capture_at(&s->seg_capture, g->addr));
    KEY(w, k, blocks, "blocks");
    gm_pickle_list_begin(w, g->n_blocks);
    for (size_t b = 0; b < g->n_blocks; b++) {
        const struct gm_alloc_block_info *bl = &g->blocks[b];
        bool live = bl->state == GM_ALLOC_BLOCK_ACTIVE_ALLOCATED;
        gm_pickle_dict_begin(w, 5);
        KEY(w, k, address, "address");
        gm_pickle_uint(w, bl->addr);
        KEY(w, k, size, "size");
        gm_pickle_uint(w, bl->size);
        KEY(w, k, requested_size, "requested_size");
        gm_pickle_uint(w, bl->requested);
        KEY(w, k, state, "state");
        if (live)
            gm_pickle_str_shared(w, "active_allocated", &k->v_active);
        else
            gm_pickle_str_shared(w, "inactive", &k->v_inactive);
        KEY(w, k, frames, "frames");
        if (live) {
            write_capture(w, s, k, capture_at(sw->block_capture, bl->addr));
        } else if (k->empty_list != GM_PICKLE_NO_MEMO) {
            gm_pickle_get(w, k->empty_list);
        } else {
            k->empty_list = gm_pickle_list_begin(w, 0);
            gm_pickle_list_end(w);
        }
        gm_pickle_dict_end(w);
    }
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
    return GM_OK;
}

static void write_event(struct gm_pickle_writer *w, struct sim *s, struct keys *k,
                        const struct event *e)
{
    static const char *const names[4] = {"alloc", "free_requested", "free_completed",
                                         "segment_alloc"};
    gm_pickle_dict_begin(w, 7);
    KEY(w, k, action, "action");
    gm_pickle_str_shared(w, names[e->action], &k->v_action[e->action]);
    KEY(w, k, addr, "addr");
    gm_pickle_uint(w, e->addr);
    KEY(w, k, size, "size");
    gm_pickle_uint(w, e->size);
    KEY(w, k, stream, "stream");
    gm_pickle_int(w, 0);
    KEY(w, k, time_us, "time_us");
    gm_pickle_uint(w, e->time_us);
    KEY(w, k, compile_context, "compile_context");
    gm_pickle_str(w, "N/A");
    KEY(w, k, frames, "frames");
    write_capture(w, s, k, e->capture);
    gm_pickle_dict_end(w);
}

static void write_settings(struct gm_pickle_writer *w)
{
    gm_pickle_dict_begin(w, 9);
    gm_pickle_str(w, "PYTORCH_CUDA_ALLOC_CONF");
    gm_pickle_str(w, "");
    gm_pickle_str(w, "max_split_size");
    gm_pickle_int(w, -1);
    gm_pickle_str(w, "garbage_collection_threshold");
    gm_pickle_float(w, 0.0);
    gm_pickle_str(w, "expandable_segments");
    gm_pickle_bool(w, false);
    gm_pickle_str(w, "pinned_num_register_threads");
    gm_pickle_int(w, 1);
    gm_pickle_str(w, "release_lock_on_cudamalloc");
    gm_pickle_bool(w, false);
    gm_pickle_str(w, "pinned_use_cuda_host_register");
    gm_pickle_bool(w, false);
    gm_pickle_str(w, "graph_capture_record_stream_reuse");
    gm_pickle_bool(w, false);
    gm_pickle_str(w, "roundup_power2_divisions");
    gm_pickle_dict_begin(w, 16);
    for (unsigned i = 0; i < 16; i++) {
        char key[8];
        snprintf(key, sizeof(key), "%u", 1u << i);
        gm_pickle_str(w, key);
        gm_pickle_int(w, 0);
    }
    gm_pickle_dict_end(w);
    gm_pickle_dict_end(w);
}

static enum gm_status write_snapshot(struct gm_pickle_writer *w, struct sim *s,
                                     struct gm_error *err)
{
    struct keys k;
    struct gm_map block_capture = GM_MAP_INIT;
    struct seg_writer sw = {w, s, &k, &block_capture};
    enum gm_status st;
    memset(&k, 0xff, sizeof(k)); /* every slot GM_PICKLE_NO_MEMO */

    for (size_t i = 0; i < s->tensors.n; i++)
        if (s->tensors.v[i].addr &&
            !gm_map_put(&block_capture, s->tensors.v[i].addr, (uint64_t)s->tensors.v[i].capture)) {
            gm_map_release(&block_capture);
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "example: out of memory");
        }
    gm_pickle_dict_begin(w, 4);
    gm_pickle_str(w, "segments");
    gm_pickle_list_begin(w, gm_alloc_segment_count(s->alloc));
    st = gm_alloc_segments(s->alloc, write_segment, &sw, err);
    gm_map_release(&block_capture);
    if (st != GM_OK)
        return st;
    gm_pickle_list_end(w);

    gm_pickle_str(w, "device_traces");
    gm_pickle_list_begin(w, (size_t)s->device + 1);
    /* a rank's snapshot has a list for every visible device, only its own filled */
    for (int d = 0; d < s->device; d++) {
        gm_pickle_list_begin(w, 0);
        gm_pickle_list_end(w);
    }
    gm_pickle_list_begin(w, s->events.n);
    for (size_t i = 0; i < s->events.n; i++)
        write_event(w, s, &k, &s->events.v[i]);
    gm_pickle_list_end(w);
    gm_pickle_list_end(w);

    gm_pickle_str(w, "allocator_settings");
    write_settings(w);

    gm_pickle_str(w, "external_annotations");
    gm_pickle_list_begin(w, s->anns.n);
    for (size_t i = 0; i < s->anns.n; i++) {
        const struct annotation *a = &s->anns.v[i];
        gm_pickle_dict_begin(w, 4);
        gm_pickle_str(w, "name");
        gm_pickle_str(w, a->name);
        gm_pickle_str(w, "stage");
        gm_pickle_str(w, a->start ? "START" : "END");
        KEY(w, &k, device, "device");
        gm_pickle_int(w, s->device);
        KEY(w, &k, time_us, "time_us");
        gm_pickle_uint(w, a->time_us);
        gm_pickle_dict_end(w);
    }
    gm_pickle_list_end(w);
    gm_pickle_dict_end(w);
    return GM_OK;
}

void gm_example_opts_init(struct gm_example_opts *o)
{
    o->iterations = 5;
    o->leak = true;
    o->protocol = 4;
    o->batch = 8;
    o->device = 0;
    o->phases = false;
    o->start_us = 1763974800000000ull; /* 2025-11-24 09:00:00 UTC */
}

static void sim_free(struct sim *s)
{
    gm_alloc_free(s->alloc);
    gm_map_release(&s->seg_capture);
    gm_free(s->frames.v);
    gm_free(s->stacks.v);
    gm_free(s->caps.v);
    gm_free(s->tensors.v);
    gm_free(s->events.v);
    gm_free(s->anns.v);
}

enum gm_status gm_example_write(FILE *f, const struct gm_example_opts *o, struct gm_error *err)
{
    struct sim s;
    struct job j;
    struct gm_pickle_writer *w = NULL;
    enum gm_status st;

    if (o->iterations < 1 || o->iterations > 1000)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "example: %u iterations: choose 1 to 1000", o->iterations);
    if (o->batch < 1 || o->batch > 64)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "example: batch %u: choose 1 to 64",
                       o->batch);
    if (o->device < 0 || o->device > 15)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "example: device %d: choose 0 to 15",
                       o->device);
    memset(&s, 0, sizeof(s));
    memset(&j, 0, sizeof(j));
    s.batch = o->batch;
    s.device = o->device;
    s.phases = o->phases;
    s.next_addr = 0x7f3a40000000ull;
    s.now_us = o->start_us;
    s.rng = 12345;
    j.s = &s;
    {
        /* PyTorch's default allocator settings on a device as large as the job needs */
        struct gm_alloc_conf conf;
        struct gm_alloc_device dev = {&dev_ops, &s, 80ull << 30};
        gm_alloc_conf_init(&conf);
        if ((st = gm_alloc_new(&conf, &dev, &s.alloc, err)) != GM_OK)
            return st;
        gm_alloc_set_event_hook(s.alloc, on_device_event, &s);
    }
    run_job(&j, o);
    if (s.nomem) {
        sim_free(&s);
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "example: out of memory");
    }
    st = gm_pickle_writer_new(f, o->protocol, &w, err);
    if (st == GM_OK && (st = write_snapshot(w, &s, err)) == GM_OK)
        st = gm_pickle_writer_finish(w, err);
    sim_free(&s);
    return st;
}

enum gm_status gm_example_json(FILE *f, const char *output, const struct gm_example_opts *o,
                               struct gm_error *err)
{
    struct gm_json w;
    gm_json_init(&w, f, GM_JSON_PRETTY);
    gm_json_begin_object(&w);
    gm_json_kv_str(&w, "schema", "gpumem.snapshot.example/1");
    gm_json_kv_str(&w, "gpumem_version", gm_version());
    gm_json_kv_str(&w, "output", output);
    gm_json_kv_u64(&w, "iterations", o->iterations);
    gm_json_kv_bool(&w, "leak", o->leak);
    gm_json_kv_u64(&w, "batch", o->batch);
    gm_json_kv_i64(&w, "device", o->device);
    gm_json_kv_bool(&w, "phases", o->phases);
    gm_json_kv_i64(&w, "protocol", o->protocol);
    gm_json_end_object(&w);
    if (!gm_json_finish(&w))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the example document failed");
    return GM_OK;
}
