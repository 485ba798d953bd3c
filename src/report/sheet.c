/* SPDX-License-Identifier: MIT */
/* sheet.c - gpumem sheet: the one-page record (sheet.h) from gpumem's JSON documents.
 *
 * Reading: a document's "schema" picks its reader: gpumem.measure/1 and gpumem.environment/1
 * go to the series reader (measure.h), gpumem.sweep/1 to the sweep reader (sweep.h), a
 * gpumem.account/1 timeline (JSON lines) to the account reader (account.h), and
 * gpumem.estimate/1 is read here, member by member, since only the sheet needs it.
 *
 * Writing: the page is described once, by the section functions below, through a small
 * writer (heading, paragraph, list item, table) with two back ends, Markdown and HTML; the
 * HTML page takes the snapshot report's style sheet, so the two look alike.  The sections,
 * in order: environment (observed), settings chosen, computed (the estimates), observed
 * (largest load tested, phases, computed against observed), assumed (what is not checked). */
#include "gpumem/sheet.h"

#include "gpumem/account.h"
#include "gpumem/arena.h"
#include "gpumem/estimate.h"
#include "gpumem/measure.h"
#include "gpumem/sweep.h"
#include "gpumem/units.h"
#include "gpumem/version.h"

#include "base/buf.h"
#include "base/json_in.h"
#include "base/json_load.h"
#include "report_assets.h" /* the report's style sheet, reused (only that part of it) */

#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_DOC_BYTES (64u << 20)
#define MAX_LIST      256 /* assumptions, inputs of one estimate */

struct kv {
    const char *key;
    const char *value;
};

#define MAX_SUGGESTIONS 16 /* GM_EST_MAX_SUGGESTIONS */
#define MAX_KINDS       32

/* A change that would make an estimated job fit (the estimate's "suggestions"). */
struct suggestion {
    const char *change; /* the settings, as the CLI spells them */
    const char *cost;   /* "speed", "numerics", ... */
    const char *trade;  /* what it costs, a phrase */
    struct gm_reading device;
    bool fits;
};

/* Component bytes of one kind (the estimate's typed "kind"), summed. */
struct kind_bytes {
    const char *kind;
    uint64_t bytes;
    size_t n;
};

/* What the sheet takes from a gpumem.estimate/1 document. */
struct estimate {
    const char *name;  /* as given to gm_sheet_add() */
    const char *mode;  /* "train", "infer", "weights" */
    const char *model; /* NULL: parameters only */
    struct gm_reading parameters;
    struct gm_reading weights;
    struct gm_reading peak_allocated;
    struct gm_reading peak_reserved;
    struct gm_reading peak_device;
    const char *peak_phase;
    struct kind_bytes kinds[MAX_KINDS]; /* inside the caching allocator, first-seen order */
    size_t n_kinds;
    /* the fit verdict (with a GPU) */
    bool has_fit;
    bool fits;
    const char *gpu;
    struct gm_reading capacity;
    const char *fit_reason;  /* "fits", "device_over", "engine_would_not_start", ... */
    const char *fit_message; /* the verdict as a sentence */
    bool nothing_fits;       /* no change, combination or catalog GPU fits */
    struct suggestion sugg[MAX_SUGGESTIONS]; /* fitting first, cheapest first */
    size_t n_sugg;
    const char *fits_on[MAX_LIST]; /* without a GPU: catalog GPUs it fits on */
    size_t n_fits_on;
    bool has_fits_on;
    /* a serving engine's own accounting */
    const char *engine;
    struct gm_reading kv_pool;
    struct gm_reading kv_tokens;
    struct gm_reading max_model_len;
    double max_concurrency; /* sequences of max_model_len the pool holds */
    bool starts_known;
    bool starts;
    struct gm_reading overheads[GM_KIND__COUNT]; /* by kind, those outside the allocator */
    struct kv inputs[MAX_LIST];                  /* settings chosen (members that are not null) */
    size_t n_inputs;
    const char *assumptions[MAX_LIST];
    size_t n_assumptions;
};

/* The estimate's "overheads" hold "<kind>_bytes" for every kind outside the allocator
 * (gm_est_kind_outside_allocator(), estimate_json.c); the sheet's words for them, the kind's
 * name where it has none. */
static const char *const overhead_words[GM_KIND__COUNT] = {
    [GM_KIND_CUDA_CONTEXT] = "CUDA context and modules",
    [GM_KIND_WORKSPACE] = "library workspaces",
    [GM_KIND_NCCL] = "NCCL buffers",
    [GM_KIND_NON_TORCH] = "vLLM's non-torch memory",
    [GM_KIND_RESERVE] = "a flat reserve",
    [GM_KIND_MANAGED] = "managed (paged) memory",
    [GM_KIND_SYMM_MEM] = "AsyncTP symmetric memory",
};

struct named_series {
    const char *name;
    struct gm_measure_series *s;
};

struct named_sweep {
    const char *name;
    struct gm_sweep *s;
};

struct named_account {
    const char *name;
    struct gm_account *a;
};

struct gm_sheet {
    struct gm_arena arena;
    bool nomem;
    uint64_t memory_limit; /* bytes to read and parse one document, 0: the JSON budget */
    struct estimate est[GM_SHEET_MAX_DOCS];
    size_t n_est;
    struct named_series series[GM_SHEET_MAX_DOCS];
    size_t n_series;
    struct named_sweep sweeps[GM_SHEET_MAX_DOCS];
    size_t n_sweeps;
    struct named_series envs[GM_SHEET_MAX_DOCS]; /* environments alone (series of no phase) */
    size_t n_envs;
    struct named_account accounts[GM_SHEET_MAX_DOCS];
    size_t n_accounts;
};

enum gm_status gm_sheet_new(struct gm_sheet **out, struct gm_error *err)
{
    struct gm_sheet *sh = gm_calloc(1, sizeof(*sh));
    if (!sh)
        return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "sheet: out of memory");
    gm_arena_init(&sh->arena, 0);
    *out = sh;
    return GM_OK;
}

void gm_sheet_set_memory_limit(struct gm_sheet *sh, uint64_t bytes)
{
    sh->memory_limit = bytes;
}

void gm_sheet_free(struct gm_sheet *sh)
{
    if (!sh)
        return;
    for (size_t i = 0; i < sh->n_series; i++)
        gm_measure_series_free(sh->series[i].s);
    for (size_t i = 0; i < sh->n_envs; i++)
        gm_measure_series_free(sh->envs[i].s);
    for (size_t i = 0; i < sh->n_sweeps; i++)
        gm_free(sh->sweeps[i].s);
    for (size_t i = 0; i < sh->n_accounts; i++)
        gm_account_free(sh->accounts[i].a);
    gm_arena_release(&sh->arena);
    gm_free(sh);
}

static const char *dup(struct gm_sheet *sh, const char *s)
{
    char *c;
    if (!s)
        return NULL;
    c = gm_arena_strndup(&sh->arena, s, strlen(s));
    if (!c)
        sh->nomem = true;
    return c;
}

/* ------------------------------------------------------------------------------------ */
/* Reading */

static void read_kinds(struct gm_sheet *sh, const json_t *components, struct estimate *e)
{
    for (size_t i = 0; i < json_array_size(components); i++) {
        const json_t *c = json_array_get(components, i);
        const char *kind = gm_jin_str(c, "kind");
        struct gm_reading b = gm_jin_reading(c, "bytes");
        size_t k = 0;
        if (!kind || !b.valid)
            continue;
        while (k < e->n_kinds && strcmp(e->kinds[k].kind, kind) != 0)
            k++;
        if (k == e->n_kinds) {
            if (k == MAX_KINDS || !(e->kinds[k].kind = dup(sh, kind)))
                continue;
            e->n_kinds++;
        }
        e->kinds[k].bytes = gm_add_sat(e->kinds[k].bytes, b.value);
        e->kinds[k].n++;
    }
}

static void read_fit(struct gm_sheet *sh, const json_t *root, struct estimate *e)
{
    const json_t *fit = gm_jin_object(root, "fit");
    const json_t *fits_on = gm_jin_array(root, "fits_on");
    const json_t *sugg = gm_jin_array(root, "suggestions");
    e->has_fit = fit != NULL && json_is_boolean(json_object_get(fit, "fits"));
    e->fits = gm_jin_bool(fit, "fits", false);
    e->gpu = dup(sh, gm_jin_str(fit, "gpu"));
    e->capacity = gm_jin_reading(fit, "capacity_bytes");
    e->fit_reason = dup(sh, gm_jin_str(fit, "reason"));
    e->fit_message = dup(sh, gm_jin_str(fit, "message"));
    e->nothing_fits = gm_jin_bool(fit, "nothing_fits", false);
    e->has_fits_on = fits_on != NULL;
    for (size_t i = 0; i < json_array_size(fits_on) && e->n_fits_on < MAX_LIST; i++)
        if (json_is_string(json_array_get(fits_on, i)))
            e->fits_on[e->n_fits_on++] = dup(sh, json_string_value(json_array_get(fits_on, i)));
    for (size_t i = 0; i < json_array_size(sugg) && e->n_sugg < MAX_SUGGESTIONS; i++) {
        const json_t *j = json_array_get(sugg, i);
        struct suggestion *x = &e->sugg[e->n_sugg];
        if (!gm_jin_str(j, "change"))
            continue;
        x->change = dup(sh, gm_jin_str(j, "change"));
        x->cost = dup(sh, gm_jin_str(j, "cost"));
        x->trade = dup(sh, gm_jin_str(j, "trade"));
        x->device = gm_jin_reading(j, "device_bytes");
        x->fits = gm_jin_bool(j, "fits", false);
        e->n_sugg++;
    }
}

static void read_estimate(struct gm_sheet *sh, const json_t *root, struct estimate *e)
{
    json_t *inputs = gm_jin_object(root, "inputs");
    const json_t *peak = gm_jin_object(root, "peak");
    const json_t *over = gm_jin_object(root, "overheads");
    const json_t *serving = gm_jin_object(root, "serving");
    const json_t *assumptions = gm_jin_array(root, "assumptions");
    const char *key;
    json_t *v;
    char text[1024];

    e->mode = dup(sh, gm_jin_str(inputs, "mode"));
    e->model = dup(sh, gm_jin_str(inputs, "model"));
    e->parameters = gm_jin_reading(root, "parameters");
    e->weights = gm_jin_reading(root, "weights_bytes");
    e->peak_allocated = gm_jin_reading(peak, "allocated_bytes");
    e->peak_reserved = gm_jin_reading(peak, "reserved_bytes");
    e->peak_device = gm_jin_reading(peak, "device_bytes");
    e->peak_phase = dup(sh, gm_jin_str(peak, "phase"));
    read_kinds(sh, gm_jin_array(root, "components"), e);
    read_fit(sh, root, e);
    e->engine = dup(sh, gm_jin_str(serving, "engine"));
    e->kv_pool = gm_jin_reading(serving, "kv_pool_bytes");
    e->kv_tokens = gm_jin_reading(serving, "kv_tokens");
    e->max_model_len = gm_jin_reading(serving, "max_model_len");
    e->max_concurrency = json_number_value(json_object_get(serving, "max_concurrency"));
    e->starts_known = json_is_boolean(json_object_get(serving, "starts"));
    e->starts = gm_jin_bool(serving, "starts", false);
    for (unsigned k = 0; k < GM_KIND__COUNT; k++) {
        char name[64];
        if (!gm_est_kind_outside_allocator((enum gm_est_kind)k))
            continue;
        snprintf(name, sizeof name, "%s_bytes", gm_est_kind_name((enum gm_est_kind)k));
        e->overheads[k] = gm_jin_reading(over, name);
    }
    if (inputs)
        json_object_foreach(inputs, key, v)
        {
            if (json_is_null(v) || e->n_inputs == MAX_LIST)
                continue;
            e->inputs[e->n_inputs].key = dup(sh, key);
            e->inputs[e->n_inputs++].value = dup(sh, gm_jin_text(v, text, sizeof(text)));
        }
    for (size_t i = 0; assumptions && i < json_array_size(assumptions) && i < MAX_LIST; i++)
        if (json_is_string(json_array_get(assumptions, i)))
            e->assumptions[e->n_assumptions++] =
                dup(sh, json_string_value(json_array_get(assumptions, i)));
}

/* 'st' with the document's name before the message in 'err' (which may be NULL). */
static enum gm_status named(struct gm_error *err, enum gm_status st, const char *name)
{
    if (err)
        gm_error_prefix(err, "'%s'", name);
    return st;
}

enum gm_status gm_sheet_add(struct gm_sheet *sh, const char *name, const void *data, size_t len,
                            struct gm_error *err)
{
    json_t *root;
    const char *schema;
    enum gm_status st = GM_OK;
    char kind[64];

    if (len > MAX_DOC_BYTES)
        return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "'%s': over %u MiB", name,
                       MAX_DOC_BYTES >> 20);
    if (gm_account_is_account_data(data, len)) {
        struct named_account *slot = &sh->accounts[sh->n_accounts];
        if (sh->n_accounts == GM_SHEET_MAX_DOCS)
            return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "more than %d accounts",
                           GM_SHEET_MAX_DOCS);
        if ((st = gm_account_new(&slot->a, err)) != GM_OK)
            return st;
        if ((st = gm_account_add_data(slot->a, name, data, len, err)) != GM_OK) {
            gm_account_free(slot->a);
            return st;
        }
        slot->name = dup(sh, name);
        sh->n_accounts++;
        return sh->nomem ? gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "sheet: out of memory") : GM_OK;
    }
    if ((st = gm_json_load_limit(data, len, 0, sh->memory_limit, &root, err)) != GM_OK)
        return named(err, st, name);
    schema = gm_jin_str(root, "schema");
    snprintf(kind, sizeof(kind), "%s", schema ? schema : "");
    if (!strcmp(kind, "gpumem.estimate/1")) {
        if (sh->n_est == GM_SHEET_MAX_DOCS)
            st = gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "more than %d estimates",
                         GM_SHEET_MAX_DOCS);
        else {
            struct estimate *e = &sh->est[sh->n_est++];
            memset(e, 0, sizeof(*e));
            e->name = dup(sh, name);
            read_estimate(sh, root, e);
        }
        json_decref(root);
        if (st == GM_OK && sh->nomem)
            st = gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "sheet: out of memory");
        return st;
    }
    json_decref(root); /* the other kinds have their own readers */
    bool env = !strcmp(kind, "gpumem.environment/1");
    if (env || !strcmp(kind, "gpumem.measure/1")) {
        struct named_series *slot = env ? &sh->envs[sh->n_envs] : &sh->series[sh->n_series];
        if ((env ? sh->n_envs : sh->n_series) == GM_SHEET_MAX_DOCS)
            return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "more than %d documents of %s",
                           GM_SHEET_MAX_DOCS, kind);
        st = env ? gm_measure_env_load_mem(data, len, sh->memory_limit, &slot->s, err)
                 : gm_measure_series_load_mem(data, len, sh->memory_limit, &slot->s, err);
        if (st != GM_OK)
            return named(err, st, name);
        slot->name = dup(sh, name);
        if (env)
            sh->n_envs++;
        else
            sh->n_series++;
    } else if (!strcmp(kind, "gpumem.sweep/1")) {
        struct named_sweep *slot = &sh->sweeps[sh->n_sweeps];
        if (sh->n_sweeps == GM_SHEET_MAX_DOCS)
            return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "more than %d sweeps",
                           GM_SHEET_MAX_DOCS);
        slot->s = gm_malloc(sizeof(*slot->s));
        if (!slot->s)
            return gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "sheet: out of memory");
        st = gm_sweep_load_mem(slot->s, data, len, sh->memory_limit, err);
        if (st != GM_OK) {
            gm_free(slot->s);
            return named(err, st, name);
        }
        slot->name = dup(sh, name);
        sh->n_sweeps++;
    } else {
        return gm_fail(err, GM_ERR_FORMAT, GM_NO_OFFSET,
                       "'%s': schema '%s' is not one the sheet reads (gpumem.estimate/1, "
                       "gpumem.measure/1, gpumem.sweep/1, gpumem.environment/1, "
                       "gpumem.account/1)",
                       name, kind);
    }
    return sh->nomem ? gm_fail(err, GM_ERR_NOMEM, GM_NO_OFFSET, "sheet: out of memory") : GM_OK;
}

enum gm_status gm_sheet_add_file(struct gm_sheet *sh, const char *path, struct gm_error *err)
{
    struct gm_buf b;
    enum gm_status st;
    gm_buf_init(&b, sh->memory_limit && sh->memory_limit < MAX_DOC_BYTES ? sh->memory_limit
                                                                         : MAX_DOC_BYTES);
    st = gm_buf_read_file(&b, path, err);
    if (st == GM_OK)
        st = gm_sheet_add(sh, path, b.data ? b.data : "", b.len, err);
    gm_buf_release(&b);
    return st;
}

/* ------------------------------------------------------------------------------------ */
/* The writer: Markdown or HTML from the same calls */

struct out {
    FILE *f;
    bool html;
    bool in_list;
    int n_cols; /* of the open table, 0 when none */
};

static void esc(struct out *o, const char *s, bool cell)
{
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (o->html && c == '<')
            fputs("&lt;", o->f);
        else if (o->html && c == '>')
            fputs("&gt;", o->f);
        else if (o->html && c == '&')
            fputs("&amp;", o->f);
        else if (o->html && c == '"')
            fputs("&quot;", o->f);
        else if (!o->html && cell && c == '|')
            fputs("\\|", o->f);
        else if (c == '\n' || c == '\r' || (c < 0x20 && c != '\t'))
            fputc(' ', o->f);
        else
            fputc(c, o->f);
    }
}

static void end_list(struct out *o)
{
    if (o->in_list) {
        fputs(o->html ? "</ul>\n" : "\n", o->f);
        o->in_list = false;
    }
}

static void heading(struct out *o, int level, const char *text)
{
    end_list(o);
    if (o->html) {
        if (level == 2)
            fputs("</section>\n<section>\n", o->f);
        fprintf(o->f, "<h%d>", level);
        esc(o, text, false);
        fprintf(o->f, "</h%d>\n", level);
    } else {
        fprintf(o->f, "%.*s ", level, "####");
        esc(o, text, false);
        fputs("\n\n", o->f);
    }
}

static void vtext(struct out *o, const char *open, const char *close, const char *fmt, va_list ap)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 0)))
#endif
    ;
static void vtext(struct out *o, const char *open, const char *close, const char *fmt, va_list ap)
{
    char buf[2048];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    fputs(open, o->f);
    esc(o, buf, false);
    fputs(close, o->f);
}

static void para(struct out *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void para(struct out *o, const char *fmt, ...)
{
    va_list ap;
    end_list(o);
    va_start(ap, fmt);
    vtext(o, o->html ? "<p>" : "", o->html ? "</p>\n" : "\n\n", fmt, ap);
    va_end(ap);
}

static void item(struct out *o, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void item(struct out *o, const char *fmt, ...)
{
    va_list ap;
    if (!o->in_list) {
        if (o->html)
            fputs("<ul>\n", o->f);
        o->in_list = true;
    }
    va_start(ap, fmt);
    vtext(o, o->html ? "<li>" : "- ", o->html ? "</li>\n" : "\n", fmt, ap);
    va_end(ap);
}

/* A row of 'n' cells; the first row of a table is its head. */
static void row(struct out *o, int n, const char *const *cells)
{
    bool head = o->n_cols == 0;
    end_list(o);
    if (head) {
        o->n_cols = n;
        if (o->html)
            fputs("<table>\n", o->f);
    }
    fputs(o->html ? "<tr>" : "|", o->f);
    for (int i = 0; i < n; i++) {
        if (o->html)
            fputs(head ? "<th>" : "<td>", o->f);
        else
            fputc(' ', o->f);
        esc(o, cells[i] ? cells[i] : "", true);
        fputs(o->html ? (head ? "</th>" : "</td>") : " |", o->f);
    }
    fputs(o->html ? "</tr>\n" : "\n", o->f);
    if (head && !o->html) {
        fputc('|', o->f);
        for (int i = 0; i < n; i++)
            fputs("---|", o->f);
        fputc('\n', o->f);
    }
}

static void table_end(struct out *o)
{
    if (o->n_cols)
        fputs(o->html ? "</table>\n" : "\n", o->f);
    o->n_cols = 0;
}

/* ------------------------------------------------------------------------------------ */
/* Figures */

struct figure {
    char s[80];
};

/* "12.34 GiB" (the unit by magnitude, powers of 2), or "unknown". */
static struct figure bytes(struct gm_reading r)
{
    struct figure f = {{0}};
    if (r.valid)
        gm_format_bytes(f.s, sizeof(f.s), r.value, GM_UNITS_IEC);
    else
        snprintf(f.s, sizeof(f.s), "unknown");
    return f;
}

/* "12.34 GiB (13249974272 B)", or "unknown". */
static struct figure bytes_exact(struct gm_reading r)
{
    struct figure f = bytes(r);
    if (r.valid) {
        size_t n = strlen(f.s);
        snprintf(f.s + n, sizeof(f.s) - n, " (%" PRIu64 " B)", r.value);
    }
    return f;
}

/* A count as a plain number, or "unknown". */
static struct figure count_text(struct gm_reading r)
{
    struct figure f = {{0}};
    if (r.valid)
        snprintf(f.s, sizeof(f.s), "%" PRIu64, r.value);
    else
        snprintf(f.s, sizeof(f.s), "unknown");
    return f;
}

static const char *known(const char *s)
{
    return s && *s ? s : "unknown";
}

/* ------------------------------------------------------------------------------------ */
/* Sections */

/* The environment, member by member from the first document that has it: those of
 * `gpumem environment` first, then the series (only they know PyTorch).  from[n] gets the
 * names of the documents used. */
static struct gm_measure_env environment(const struct gm_sheet *sh, char *from, size_t from_n)
{
    struct gm_measure_env e;
    const struct gm_measure_env *all[2 * GM_SHEET_MAX_DOCS];
    const char *names[2 * GM_SHEET_MAX_DOCS];
    size_t n = 0;
    size_t at = 0;
    memset(&e, 0, sizeof(e));
    from[0] = '\0';
    for (size_t i = 0; i < sh->n_envs; i++, n++) {
        all[n] = &sh->envs[i].s->env;
        names[n] = sh->envs[i].name;
    }
    for (size_t i = 0; i < sh->n_series; i++, n++) {
        all[n] = &sh->series[i].s->env;
        names[n] = sh->series[i].name;
    }
    for (size_t i = 0; i < n; i++) {
        const struct gm_measure_env *x = all[i];
        bool used = false;
#define TAKE(field)                                                                                \
    if (!e.field && x->field) {                                                                    \
        e.field = x->field;                                                                        \
        used = true;                                                                               \
    }
        TAKE(gpu)
        TAKE(driver)
        TAKE(cuda_driver)
        TAKE(torch)
        TAKE(torch_cuda)
        TAKE(torch_hip)
        TAKE(allocator_backend)
        TAKE(alloc_conf)
#undef TAKE
        if (!e.gpu_total.valid && x->gpu_total.valid) {
            e.gpu_total = x->gpu_total;
            used = true;
        }
        if (used && at < from_n) {
            int w = snprintf(from + at, from_n - at, "%s%s", at ? ", " : "", names[i]);
            at = w < 0 ? from_n : at + (size_t)w;
        }
    }
    return e;
}

static void section_environment(struct out *o, const struct gm_sheet *sh)
{
    char from[1024], torch[256];
    struct gm_measure_env env = environment(sh, from, sizeof(from));
    const struct gm_measure_env *e = &env;
    heading(o, 2, "Environment (observed)");
    if (!from[0]) {
        para(o, "No environment was recorded (add `gpumem environment --json` or a measured "
                "series).");
        return;
    }
    snprintf(torch, sizeof(torch), "%s%s%s%s", known(e->torch),
             e->torch_hip    ? ", HIP "
             : e->torch_cuda ? ", CUDA "
                             : "",
             e->torch_hip    ? e->torch_hip
             : e->torch_cuda ? e->torch_cuda
                             : "",
             e->torch_hip ? " (ROCm build)" : "");
    struct figure total = bytes_exact(e->gpu_total);
    const char *rows[][2] = {
        {"item", "value"},
        {"GPU", known(e->gpu)},
        {"GPU memory (NVML total)", total.s},
        {"NVIDIA driver", known(e->driver)},
        {"CUDA (driver API)", known(e->cuda_driver)},
        {"PyTorch", e->torch ? torch : "not recorded"},
        {"allocator backend", e->allocator_backend ? e->allocator_backend
                              : e->torch           ? "unknown"
                                                   : "not recorded"},
        {"PYTORCH_CUDA_ALLOC_CONF", e->alloc_conf ? e->alloc_conf : "(unset)"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        row(o, 2, rows[i]);
    table_end(o);
    para(o, "Recorded in %s (each item from the first of them that has it).", from);
}

static void section_settings(struct out *o, const struct gm_sheet *sh)
{
    const char *head[] = {"setting", "value", "chosen in"};
    char values[1024];
    heading(o, 2, "Settings chosen");
    if (!sh->n_est && !sh->n_series && !sh->n_sweeps) {
        para(o, "No setting was recorded.");
        return;
    }
    row(o, 3, head);
    for (size_t i = 0; i < sh->n_est; i++)
        for (size_t k = 0; k < sh->est[i].n_inputs; k++) {
            const char *r[] = {sh->est[i].inputs[k].key, sh->est[i].inputs[k].value,
                               sh->est[i].name};
            row(o, 3, r);
        }
    for (size_t i = 0; i < sh->n_series; i++) {
        const struct gm_measure_series *s = sh->series[i].s;
        for (size_t k = 0; k < s->n_dimensions; k++) {
            const char *r[] = {s->dimensions[k].key, s->dimensions[k].value, sh->series[i].name};
            row(o, 3, r);
        }
        for (size_t k = 0; k < s->n_settings; k++) {
            const char *r[] = {s->settings[k].key, s->settings[k].value, sh->series[i].name};
            row(o, 3, r);
        }
    }
    for (size_t i = 0; i < sh->n_sweeps; i++) {
        const struct gm_sweep *w = sh->sweeps[i].s;
        size_t at = 0;
        values[0] = '\0';
        for (size_t k = 0; k < w->n_values && at < sizeof(values); k++) {
            int n = snprintf(values + at, sizeof(values) - at, "%s%" PRIu64, k ? ", " : "",
                             w->values[k]);
            at = n < 0 ? sizeof(values) : at + (size_t)n;
        }
        const char *r1[] = {"swept parameter", w->param, sh->sweeps[i].name};
        const char *r2[] = {"values given", values, sh->sweeps[i].name};
        const char *r3[] = {"command", w->command, sh->sweeps[i].name};
        row(o, 3, r1);
        row(o, 3, r2);
        row(o, 3, r3);
    }
    table_end(o);
}

/* The components by kind, as one list item. */
static void kinds_item(struct out *o, const struct estimate *e)
{
    char list[1024];
    size_t at = 0;
    list[0] = '\0';
    for (size_t k = 0; k < e->n_kinds && at < sizeof(list); k++) {
        struct gm_reading r = {e->kinds[k].bytes, true};
        int n = snprintf(list + at, sizeof(list) - at, "%s%s %s", k ? ", " : "", e->kinds[k].kind,
                         bytes(r).s);
        at = n < 0 ? sizeof(list) : at + (size_t)n;
    }
    if (e->n_kinds)
        item(o, "predicted components by kind (one device; not all live at once): %s", list);
    at = 0;
    list[0] = '\0';
    for (unsigned k = 0; k < GM_KIND__COUNT && at < sizeof(list); k++) {
        int n;
        if (!e->overheads[k].valid || !e->overheads[k].value)
            continue;
        n = snprintf(list + at, sizeof(list) - at, "%s%s %s", at ? ", " : "",
                     overhead_words[k] ? overhead_words[k] : gm_est_kind_name((enum gm_est_kind)k),
                     bytes(e->overheads[k]).s);
        at = n < 0 ? sizeof(list) : at + (size_t)n;
    }
    if (at)
        item(o, "outside the caching allocator (in device used only): %s", list);
}

static void fit_items(struct out *o, const struct estimate *e)
{
    size_t shown = 0;
    if (!e->has_fit) {
        char list[1024];
        size_t at = 0;
        list[0] = '\0';
        for (size_t i = 0; i < e->n_fits_on && at < sizeof(list); i++) {
            int n = snprintf(list + at, sizeof(list) - at, "%s%s", i ? ", " : "", e->fits_on[i]);
            at = n < 0 ? sizeof(list) : at + (size_t)n;
        }
        if (e->has_fits_on)
            item(o, "no GPU given; fits on %s", e->n_fits_on ? list : "no GPU of gpumem's catalog");
        return;
    }
    item(o, "fit on %s (%s): %s%s%s%s%s%s", known(e->gpu), bytes(e->capacity).s,
         e->fits ? "fits" : "does NOT fit", e->fit_message ? ", " : "",
         e->fit_message ? e->fit_message : "", e->fit_reason ? " (" : "",
         e->fit_reason ? e->fit_reason : "", e->fit_reason ? ")" : "");
    if (e->fits)
        return;
    for (size_t i = 0; i < e->n_sugg && shown < 5; i++) {
        const struct suggestion *x = &e->sugg[i];
        if (!x->fits)
            continue;
        item(o, "would fit with %s: %s on the device (costs %s: %s)", x->change, bytes(x->device).s,
             known(x->cost), known(x->trade));
        shown++;
    }
    if (!shown)
        item(o, "%s",
             e->nothing_fits ? "no change, combination or GPU of gpumem's catalog makes it fit"
                             : "no single change listed makes it fit");
}

static void serving_item(struct out *o, const struct estimate *e)
{
    if (!e->engine || !e->kv_pool.valid)
        return;
    item(o, "%s: KV pool %s, %s tokens; max_model_len %s, max concurrency %.2f%s", e->engine,
         bytes(e->kv_pool).s, count_text(e->kv_tokens).s, count_text(e->max_model_len).s,
         e->max_concurrency,
         !e->starts_known ? ""
         : e->starts      ? ""
                          : " (would not start: the pool holds less than one sequence)");
}

static void section_computed(struct out *o, const struct gm_sheet *sh)
{
    heading(o, 2, "Computed (gpumem estimate)");
    if (!sh->n_est) {
        para(o, "No estimate (add `gpumem estimate ... --json`).");
        return;
    }
    for (size_t i = 0; i < sh->n_est; i++) {
        const struct estimate *e = &sh->est[i];
        char params[64] = "";
        if (e->parameters.valid)
            snprintf(params, sizeof(params), ", %" PRIu64 " parameters", e->parameters.value);
        item(o, "%s: %s%s (%s)", e->name, known(e->model ? e->model : "a parameter count"), params,
             known(e->mode));
        item(o, "weights: %s", bytes_exact(e->weights).s);
        item(o, "predicted peak allocated (torch max_memory_allocated): %s",
             bytes_exact(e->peak_allocated).s);
        item(o, "predicted peak reserved (torch max_memory_reserved): %s",
             bytes_exact(e->peak_reserved).s);
        item(o, "predicted device used (nvidia-smi): %s%s%s", bytes_exact(e->peak_device).s,
             e->peak_phase ? ", peak in " : "", e->peak_phase ? e->peak_phase : "");
        kinds_item(o, e);
        serving_item(o, e);
        fit_items(o, e);
    }
}

static void largest_load(struct out *o, const struct gm_sheet *sh)
{
    heading(o, 3, "Largest load tested");
    if (!sh->n_sweeps && !sh->n_series) {
        para(o, "Nothing was run.");
        return;
    }
    for (size_t i = 0; i < sh->n_sweeps; i++) {
        const struct gm_sweep *w = sh->sweeps[i].s;
        const struct gm_sweep_run *f = gm_sweep_failed_run(w);
        char why[400] = "";
        if (f)
            gm_sweep_describe_run(f, why, sizeof(why));
        switch (gm_sweep_end(w)) {
        case GM_SWEEP_END_BOUNDARY:
            item(o,
                 "%s: %s=%" PRIu64 " fits, %s=%" PRIu64 " fails (%s); %zu runs, each a fresh "
                 "process",
                 sh->sweeps[i].name, w->param, w->fit, w->param, w->fail, why, w->n_runs);
            break;
        case GM_SWEEP_END_ALL_FIT:
            item(o, "%s: every value fits, up to %s=%" PRIu64 " (the boundary is above)",
                 sh->sweeps[i].name, w->param, w->fit);
            break;
        case GM_SWEEP_END_FIRST_FAILS:
            item(o, "%s: even the smallest value fails, %s=%" PRIu64 " (%s)", sh->sweeps[i].name,
                 w->param, w->fail, why);
            break;
        default:
            item(o, "%s: %s=%" PRIu64 " fits, %s=%" PRIu64 " fails (%s); not narrowed further (%s)",
                 sh->sweeps[i].name, w->param, w->fit, w->param, w->fail, why,
                 gm_sweep_end_name(gm_sweep_end(w)));
            break;
        }
    }
    for (size_t i = 0; i < sh->n_series; i++) {
        const struct gm_measure_series *s = sh->series[i].s;
        char dims[1024] = "";
        size_t at = 0, ran = 0, failed = 0;
        for (size_t k = 0; k < s->n_dimensions && at < sizeof(dims); k++) {
            int n = snprintf(dims + at, sizeof(dims) - at, "%s%s=%s", k ? " " : "",
                             s->dimensions[k].key, s->dimensions[k].value);
            at = n < 0 ? sizeof(dims) : at + (size_t)n;
        }
        for (size_t k = 0; k < s->n_phases; k++) {
            ran += s->phases[k].ran;
            failed += s->phases[k].ran && !s->phases[k].ok;
        }
        item(o, "%s: %s, %zu phases run, %zu failed", sh->series[i].name,
             dims[0] ? dims : "(no dimensions recorded)", ran, failed);
    }
}

static void phases_table(struct out *o, const char *name, const struct gm_measure_series *s)
{
    const char *head[] = {"phase",          "pass",           "result",        "allocated (end)",
                          "peak allocated", "reserved (end)", "peak reserved", "device used (end)"};
    char title[512];
    snprintf(title, sizeof(title), "Phases of %s (%s)", name,
             s->source == GM_MEASURE_SOURCE_TORCH ? "gpumem.torch: your job"
             : s->source == GM_MEASURE_SOURCE_LAB ? "gpumem measure: gpumem's test network"
                                                  : "a gpumem.measure/1 series");
    heading(o, 3, title);
    if (!s->n_phases) {
        para(o, "No phase was recorded.");
        return;
    }
    row(o, 8, head);
    for (size_t k = 0; k < s->n_phases; k++) {
        const struct gm_measure_series_phase *p = &s->phases[k];
        char pass[32], result[400], req[32];
        struct figure ae = bytes(p->allocated.end), ap = bytes(p->allocated.peak),
                      re = bytes(p->reserved.end), rp = bytes(p->reserved.peak),
                      ue = bytes(p->used_end);
        if (p->occurrence)
            snprintf(pass, sizeof(pass), "%s %" PRIu32, p->warm ? "warm" : "first", p->occurrence);
        else
            snprintf(pass, sizeof(pass), "%s", p->warm ? "warm" : "");
        if (!p->ran)
            snprintf(result, sizeof(result), "skipped");
        else if (p->ok)
            snprintf(result, sizeof(result), "ok");
        else if (p->oom)
            snprintf(result, sizeof(result), "FAILED: out of memory%s%s%s",
                     p->requested.valid ? " (tried " : "",
                     p->requested.valid
                         ? gm_format_bytes(req, sizeof(req), p->requested.value, GM_UNITS_IEC)
                         : "",
                     p->requested.valid ? ")" : "");
        else
            snprintf(result, sizeof(result), "FAILED: %s", known(p->error));
        const char *r[] = {p->name, pass, result, ae.s, ap.s, re.s, rp.s, ue.s};
        row(o, 8, r);
    }
    table_end(o);
    para(o,
         "Peaks over the phases: allocated %s, reserved %s. Each phase's peaks are since its "
         "own reset; \"unknown\" is a reading that was not taken.",
         bytes_exact(s->peak_allocated).s, bytes_exact(s->peak_reserved).s);
}

static void computed_vs_observed(struct out *o, const struct gm_sheet *sh)
{
    const struct estimate *e = sh->n_est ? &sh->est[0] : NULL;
    const struct gm_measure_series *s = NULL;
    const char *head[] = {"", "computed", "observed", "observed - computed"};
    for (size_t i = 0; i < sh->n_series && !s; i++)
        if (sh->series[i].s->source != GM_MEASURE_SOURCE_LAB)
            s = sh->series[i].s;
    if (!e || !s)
        return;
    heading(o, 3, "Computed against observed");
    row(o, 4, head);
    for (int k = 0; k < 2; k++) {
        struct gm_reading c = k ? e->peak_reserved : e->peak_allocated;
        struct gm_reading m = k ? s->peak_reserved : s->peak_allocated;
        char diff[64] = "unknown";
        if (c.valid && m.valid && c.value) {
            double d = ((double)m.value - (double)c.value) / (double)c.value * 100.0;
            snprintf(diff, sizeof(diff), "%+.1f%%", d);
        }
        struct figure cf = bytes(c), mf = bytes(m);
        const char *r[] = {k ? "peak reserved" : "peak allocated", cf.s, mf.s, diff};
        row(o, 4, r);
    }
    table_end(o);
    para(o,
         "The estimate (%s) is held against the first series of the user's job; check that "
         "both describe the same job and settings.",
         e->name);
}

/* One equation of an account as a table: each term, its bytes, where they come from. */
static void balance_table(struct out *o, const struct gm_account_balance *b)
{
    static const char *const head[3] = {"term", "bytes", "source"};
    char src[256];
    row(o, 3, head);
    if (b->used_valid) {
        struct figure f = bytes_exact((struct gm_reading){b->used, true});
        const char *r[3] = {"device used (NVML)", f.s,
                            b->used_source == GM_ACCOUNT_READING_NVML_PROCESS
                                ? "NVML, this process"
                                : "NVML, the device less what was used before"};
        row(o, 3, r);
    }
    for (size_t k = 0; k < b->n_terms; k++) {
        const struct gm_account_term *t = &b->terms[k];
        uint64_t mag = t->bytes < 0 ? (uint64_t) - (t->bytes + 1) + 1 : (uint64_t)t->bytes;
        struct figure f = bytes_exact((struct gm_reading){mag, true});
        char text[96];
        const char *r[3] = {gm_account_term_title(t), text, src};
        snprintf(text, sizeof(text), "%s%s", t->bytes < 0 ? "-" : "", f.s);
        gm_account_term_source(t, b, src, sizeof(src));
        row(o, 3, r);
    }
    table_end(o);
}

/* Where the device memory went, per process and device, at the peak (gpumem account). */
static void accounts(struct out *o, const struct gm_sheet *sh)
{
    for (size_t i = 0; i < sh->n_accounts; i++) {
        const struct gm_account *a = sh->accounts[i].a;
        for (size_t k = 0; k < gm_account_n_processes(a); k++) {
            const struct gm_account_process *p = gm_account_process(a, k);
            for (size_t d = 0; d < p->n_devices; d++) {
                const struct gm_account_device *dev = &p->devices[d];
                char title[512], rank[32] = "";
                if (!dev->peak.valid)
                    continue;
                if (p->rank >= 0)
                    snprintf(rank, sizeof(rank), " (rank %d)", (int)p->rank);
                snprintf(title, sizeof(title),
                         "Where the device memory went: process %u%s, cuda:%d at its peak (%s)",
                         (unsigned)p->pid, rank, (int)dev->cuda, sh->accounts[i].name);
                heading(o, 3, title);
                balance_table(o, &dev->peak);
                if (p->disabled)
                    para(o,
                         "The interposer stopped accounting in this process (%s): the figures "
                         "after that moment are incomplete.",
                         p->disabled_reason);
            }
        }
    }
}

static void section_observed(struct out *o, const struct gm_sheet *sh)
{
    heading(o, 2, "Observed");
    largest_load(o, sh);
    for (size_t i = 0; i < sh->n_series; i++)
        phases_table(o, sh->series[i].name, sh->series[i].s);
    accounts(o, sh);
    computed_vs_observed(o, sh);
}

static void section_assumed(struct out *o, const struct gm_sheet *sh)
{
    heading(o, 2, "Assumed (not checked yet)");
    for (size_t i = 0; i < sh->n_est; i++) {
        const struct estimate *e = &sh->est[i];
        for (size_t k = 0; k < e->n_assumptions; k++)
            item(o, "%s: %s", e->name, e->assumptions[k]);
    }
    for (size_t i = 0; i < sh->n_series; i++) {
        const struct gm_measure_series *s = sh->series[i].s;
        for (size_t k = 0; k < s->n_caveats; k++)
            item(o, "%s: %s", sh->series[i].name, s->caveats[k]);
        if (s->source == GM_MEASURE_SOURCE_LAB)
            item(o,
                 "%s measured gpumem's own test network, not the job: it checks the method "
                 "and the device, not the model's figures",
                 sh->series[i].name);
    }
    if (!sh->n_series)
        item(o, "nothing was measured on a GPU: every figure under Computed is a prediction");
    if (!sh->n_sweeps)
        item(o, "the largest load that fits was not searched (gpumem sweep)");
    if (o->in_list)
        end_list(o);
    else
        para(o, "Nothing.");
}

static void sources(struct out *o, const struct gm_sheet *sh)
{
    char list[2048];
    size_t at = 0;
    const struct {
        const char *kind;
        size_t n;
        bool est, series, sweep;
    } kinds[] = {
        {"estimate", sh->n_est, true, false, false},
        {"series", sh->n_series, false, true, false},
        {"sweep", sh->n_sweeps, false, false, true},
        {"environment", sh->n_envs, false, false, false},
        {"account", sh->n_accounts, false, false, false},
    };
    list[0] = '\0';
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
        for (size_t i = 0; i < kinds[k].n && at < sizeof(list); i++) {
            const char *name = kinds[k].est      ? sh->est[i].name
                               : kinds[k].series ? sh->series[i].name
                               : kinds[k].sweep  ? sh->sweeps[i].name
                               : k == 4          ? sh->accounts[i].name
                                                 : sh->envs[i].name;
            int n = snprintf(list + at, sizeof(list) - at, "%s%s (%s)", at ? ", " : "", name,
                             kinds[k].kind);
            at = n < 0 ? sizeof(list) : at + (size_t)n;
        }
    para(o,
         "Made by gpumem %s from %s. KiB, MiB, GiB are powers of 2 (GiB = 2^30 bytes); "
         "exact bytes in parentheses.",
         gm_version(), list);
}

enum gm_status gm_sheet_write(const struct gm_sheet *sh, enum gm_sheet_format format, FILE *f,
                              struct gm_error *err)
{
    struct out o = {f, format == GM_SHEET_HTML, false, 0};
    if (!sh->n_est && !sh->n_series && !sh->n_sweeps && !sh->n_envs && !sh->n_accounts)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "the sheet has no document");
    if (o.html) {
        fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
              "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
              "<title>GPU memory sheet</title>\n<style>\n",
              f);
        for (const char *const *c = gm_report_css; *c; c++)
            fputs(*c, f);
        fputs("</style>\n</head>\n<body>\n<header><h1>GPU memory sheet <small>the one-page "
              "record</small></h1></header>\n<main>\n<section>\n",
              f);
    } else {
        fputs("# GPU memory sheet\n\n", f);
    }
    sources(&o, sh);
    section_environment(&o, sh);
    section_settings(&o, sh);
    section_computed(&o, sh);
    section_observed(&o, sh);
    section_assumed(&o, sh);
    end_list(&o);
    if (o.html)
        fputs("</section>\n</main>\n</body>\n</html>\n", f);
    if (fflush(f) != 0 || ferror(f))
        return gm_fail(err, GM_ERR_IO, GM_NO_OFFSET, "writing the sheet failed");
    return GM_OK;
}
