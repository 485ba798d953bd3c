/* SPDX-License-Identifier: MIT */
/* command.c - a serving engine's own command line, both ways: the plan that serves a job as
 * it was estimated (gm_estimate_plan()), and a command line read as the job it runs
 * (gm_job_read_command()), so that users paste what they run and run what they are shown.
 *
 * One table names every flag once: the engine, its spellings (the plan writes the first),
 * and the job setting it is.  Reading a plan back gives the same job, hence the same
 * estimate.  The engines' flags, as their own argument parsers take them:
 *   vLLM       vllm serve MODEL (or python -m vllm.entrypoints.openai.api_server --model
 *              MODEL): --tensor-parallel-size/-tp, --pipeline-parallel-size/-pp,
 *              --data-parallel-size/-dp, --max-model-len, --gpu-memory-utilization,
 *              --kv-cache-memory-bytes, --max-num-seqs, --max-num-batched-tokens, --block-size,
 *              --kv-cache-dtype (fp8, fp8_e4m3, fp8_e5m2), --quantization/-q, --enforce-eager
 *   SGLang     python -m sglang.launch_server --model-path MODEL: --tp/--tp-size/
 *              --tensor-parallel-size, --dp/--dp-size, --context-length,
 *              --mem-fraction-static, --max-running-requests, --chunked-prefill-size,
 *              --kv-cache-dtype (fp8_e4m3, fp8_e5m2), --quantization
 *   llama.cpp  llama-server -m MODEL (or -hf REPO): -c/--ctx-size (all slots' cells),
 *              -np/--parallel (slots: the sequences), -ngl/--gpu-layers/--n-gpu-layers,
 *              -ub/--ubatch-size, -fa/--flash-attn [on|off|auto] (a bare -fa before
 *              2025), -ctk/--cache-type-k, -ctv/--cache-type-v, -ncmoe/--n-cpu-moe,
 *              --cpu-moe, -ot/--override-tensor when it moves routed experts to the CPU
 *              (all of them, or those of blocks 0..N-1: what --n-cpu-moe N writes)
 * Flags no setting reads (ports, hosts, sampling) are listed in the note the estimate
 * states; the workload (--batch, --context for vLLM and SGLang) and the GPU stay gpumem's
 * options. */
#include "estimate/estimate_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum flag_kind {
    F_SETTING,  /* the value is the setting's */
    F_SWITCH,   /* no value: sets the flag setting */
    F_KV,       /* a KV cache type of the engine's spelling */
    F_QUANT,    /* a weight format of the engine's spelling */
    F_FA,       /* llama.cpp -fa [on|off|auto] */
    F_CTX,      /* llama.cpp -c: cells of every slot */
    F_SLOTS,    /* llama.cpp -np: slots */
    F_LAYERS,   /* llama.cpp -ngl N, or all / auto */
    F_CPU_MOE,  /* llama.cpp --cpu-moe: every layer's experts in host memory */
    F_OVERRIDE, /* llama.cpp -ot PATTERN=BUFFER,...: read when it moves experts to the CPU */
    F_MODEL,    /* the model */
    F_REVISION, /* the model's revision */
};

struct flag {
    enum gm_engine engine;
    const char *names[4]; /* the plan writes names[0] */
    enum flag_kind kind;
    enum est_setting id;
};

static const struct flag flags[] = {
    {GM_ENGINE_VLLM, {"--model"}, F_MODEL, EST_SET__COUNT},
    {GM_ENGINE_VLLM, {"--revision"}, F_REVISION, EST_SET__COUNT},
    {GM_ENGINE_VLLM, {"--tensor-parallel-size", "-tp"}, F_SETTING, EST_SET_TP},
    {GM_ENGINE_VLLM, {"--pipeline-parallel-size", "-pp"}, F_SETTING, EST_SET_PP},
    {GM_ENGINE_VLLM, {"--data-parallel-size", "-dp"}, F_SETTING, EST_SET_REPLICAS},
    {GM_ENGINE_VLLM, {"--max-model-len"}, F_SETTING, EST_SET_MAX_MODEL_LEN},
    {GM_ENGINE_VLLM, {"--gpu-memory-utilization"}, F_SETTING, EST_SET_GPU_MEMORY_UTILIZATION},
    {GM_ENGINE_VLLM, {"--kv-cache-memory-bytes"}, F_SETTING, EST_SET_KV_CACHE_MEMORY_BYTES},
    {GM_ENGINE_VLLM, {"--max-num-seqs"}, F_SETTING, EST_SET_MAX_NUM_SEQS},
    {GM_ENGINE_VLLM, {"--max-num-batched-tokens"}, F_SETTING, EST_SET_MAX_NUM_BATCHED_TOKENS},
    {GM_ENGINE_VLLM, {"--block-size"}, F_SETTING, EST_SET_BLOCK_SIZE},
    {GM_ENGINE_VLLM, {"--kv-cache-dtype"}, F_KV, EST_SET_KV_DTYPE},
    {GM_ENGINE_VLLM, {"--quantization", "-q"}, F_QUANT, EST_SET_QUANT},
    {GM_ENGINE_VLLM, {"--enforce-eager"}, F_SWITCH, EST_SET_ENFORCE_EAGER},
    {GM_ENGINE_SGLANG, {"--model-path", "--model"}, F_MODEL, EST_SET__COUNT},
    {GM_ENGINE_SGLANG, {"--revision"}, F_REVISION, EST_SET__COUNT},
    {GM_ENGINE_SGLANG, {"--tp", "--tp-size", "--tensor-parallel-size"}, F_SETTING, EST_SET_TP},
    {GM_ENGINE_SGLANG, {"--dp", "--dp-size", "--data-parallel-size"}, F_SETTING, EST_SET_REPLICAS},
    {GM_ENGINE_SGLANG, {"--context-length"}, F_SETTING, EST_SET_CONTEXT_LENGTH},
    {GM_ENGINE_SGLANG, {"--mem-fraction-static"}, F_SETTING, EST_SET_MEM_FRACTION_STATIC},
    {GM_ENGINE_SGLANG, {"--max-running-requests"}, F_SETTING, EST_SET_MAX_RUNNING_REQUESTS},
    {GM_ENGINE_SGLANG, {"--chunked-prefill-size"}, F_SETTING, EST_SET_CHUNKED_PREFILL_SIZE},
    {GM_ENGINE_SGLANG, {"--kv-cache-dtype"}, F_KV, EST_SET_KV_DTYPE},
    {GM_ENGINE_SGLANG, {"--quantization"}, F_QUANT, EST_SET_QUANT},
    {GM_ENGINE_LLAMACPP, {"-m", "--model", "-hf", "--hf-repo"}, F_MODEL, EST_SET__COUNT},
    {GM_ENGINE_LLAMACPP, {"-c", "--ctx-size"}, F_CTX, EST_SET_CONTEXT},
    {GM_ENGINE_LLAMACPP, {"-np", "--parallel"}, F_SLOTS, EST_SET_BATCH},
    {GM_ENGINE_LLAMACPP,
     {"-ngl", "--gpu-layers", "--n-gpu-layers"},
     F_LAYERS,
     EST_SET_N_GPU_LAYERS},
    {GM_ENGINE_LLAMACPP, {"-ub", "--ubatch-size"}, F_SETTING, EST_SET_UBATCH},
    {GM_ENGINE_LLAMACPP, {"-fa", "--flash-attn"}, F_FA, EST_SET_FLASH_ATTN},
    {GM_ENGINE_LLAMACPP, {"-ctk", "--cache-type-k"}, F_KV, EST_SET_KV_DTYPE},
    {GM_ENGINE_LLAMACPP, {"-ctv", "--cache-type-v"}, F_KV, EST_SET_KV_DTYPE},
    {GM_ENGINE_LLAMACPP, {"--n-cpu-moe", "-ncmoe"}, F_SETTING, EST_SET_N_CPU_MOE},
    {GM_ENGINE_LLAMACPP, {"--cpu-moe", "-cmoe"}, F_CPU_MOE, EST_SET_N_CPU_MOE},
    {GM_ENGINE_LLAMACPP, {"--override-tensor", "-ot"}, F_OVERRIDE, EST_SET_N_CPU_MOE},
};

#define N_FLAGS (sizeof flags / sizeof flags[0])

/* The KV cache types and weight formats in each engine's spelling, and gpumem's. */
static const struct {
    const char *engine;
    const char *gpumem; /* the --kv-dtype or --quant choice; NULL: the default */
} kv_names[] =
    {
        {"auto", NULL},      {"fp8", "fp8"},   {"fp8_e4m3", "fp8"},
        {"fp8_e5m2", "fp8"}, {"f16", "fp16"},  {"bf16", "bf16"},
        {"f32", "fp32"},     {"q8_0", "int8"}, {"q4_0", "int4"},
},
  quant_names[] = {
      {"fp8", "fp8"},
      {"awq", "awq"},
      {"gptq", "gptq"},
      {"bitsandbytes", "nf4"},
};

static const struct flag *find_flag(enum gm_engine engine, const char *name, size_t len)
{
    for (size_t i = 0; i < N_FLAGS; i++) {
        if (flags[i].engine != engine)
            continue;
        for (size_t k = 0; k < 4 && flags[i].names[k]; k++)
            if (strlen(flags[i].names[k]) == len && !strncmp(flags[i].names[k], name, len))
                return &flags[i];
    }
    return NULL;
}

/* ---- reading ---- */

#define MAX_WORDS 128

/* Split 'command' into words as a shell would for plain arguments: blanks separate,
 * single quotes keep everything, double quotes and backslashes keep the next character;
 * a backslash-newline joins lines.  The words live in buf[n]. */
static enum gm_status split_words(const char *command, char *buf, size_t n, char **words,
                                  size_t *n_words, struct gm_error *err)
{
    size_t len = 0, w = 0;
    const char *p = command;
    while (*p) {
        bool in_word = false;
        while (*p == ' ' || *p == '\t' || *p == '\n' || (*p == '\\' && p[1] == '\n'))
            p += *p == '\\' ? 2 : 1;
        if (!*p)
            break;
        if (w == MAX_WORDS)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--from: more than %d words",
                           MAX_WORDS);
        words[w++] = buf + len;
        while (*p && (in_word || !(*p == ' ' || *p == '\t' || *p == '\n'))) {
            char c = *p++;
            if (c == '\'') {
                while (*p && *p != '\'' && len + 1 < n)
                    buf[len++] = *p++;
                if (*p != '\'')
                    return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--from: an open quote");
                p++;
                continue;
            }
            if (c == '"') {
                while (*p && *p != '"' && len + 1 < n) {
                    if (*p == '\\' && p[1])
                        p++;
                    buf[len++] = *p++;
                }
                if (*p != '"')
                    return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--from: an open quote");
                p++;
                continue;
            }
            if (c == '\\' && *p) {
                if (*p == '\n') {
                    p++;
                    continue;
                }
                c = *p++;
            }
            if (len + 1 >= n)
                return gm_fail(err, GM_ERR_LIMIT, GM_NO_OFFSET, "--from: the command is too long");
            buf[len++] = c;
        }
        buf[len++] = '\0';
    }
    *n_words = w;
    return GM_OK;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The engine a command runs and the index of its first argument; GM_ENGINE_NONE when it is
 * not one of theirs.  Leading VAR=value assignments and a Python interpreter are skipped. */
static enum gm_engine which_engine(char **w, size_t n, size_t *first)
{
    size_t i = 0;
    while (i < n && strchr(w[i], '=') && w[i][0] != '-')
        i++;
    if (i < n && !strncmp(base_name(w[i]), "python", 6)) {
        i++;
        if (i + 1 < n && !strcmp(w[i], "-m")) {
            const char *mod = w[i + 1];
            *first = i + 2;
            if (!strncmp(mod, "vllm.", 5))
                return GM_ENGINE_VLLM;
            if (!strncmp(mod, "sglang.", 7))
                return GM_ENGINE_SGLANG;
        }
        return GM_ENGINE_NONE;
    }
    if (i < n && !strcmp(base_name(w[i]), "vllm") && i + 1 < n && !strcmp(w[i + 1], "serve")) {
        *first = i + 2;
        return GM_ENGINE_VLLM;
    }
    if (i < n &&
        (!strcmp(base_name(w[i]), "llama-server") || !strcmp(base_name(w[i]), "llama-cli"))) {
        *first = i + 1;
        return GM_ENGINE_LLAMACPP;
    }
    return GM_ENGINE_NONE;
}

static void note_word(char *note, size_t n, const char *word)
{
    size_t len = strlen(note);
    if (len + strlen(word) + 2 < n)
        snprintf(note + len, n - len, "%s%s", len ? " " : "", word);
}

static const char *map_name(const char *name, enum flag_kind kind, bool *known)
{
    size_t n = kind == F_KV ? sizeof kv_names / sizeof kv_names[0]
                            : sizeof quant_names / sizeof quant_names[0];
    for (size_t i = 0; i < n; i++) {
        const char *e = kind == F_KV ? kv_names[i].engine : quant_names[i].engine;
        if (!strcmp(e, name)) {
            *known = true;
            return kind == F_KV ? kv_names[i].gpumem : quant_names[i].gpumem;
        }
    }
    *known = false;
    return NULL;
}

/* What the -ot flags of a command move to the CPU: the routed experts of every block, or of
 * the blocks in 'blocks' (0..255). */
struct overrides {
    bool all;
    uint64_t blocks[4];
};

/* The blocks a pattern names: "blk\.N\." or "blk\.(N|M|...)\." (what --n-cpu-moe
 * writes, and what users write by hand), or none for every block; false for any other
 * form (character classes, ranges). */
static bool pattern_blocks(const char *pat, struct overrides *ot)
{
    const char *b = strstr(pat, "blk");
    bool group;
    if (!b) {
        ot->all = true;
        return true;
    }
    b += 3;
    b += !strncmp(b, "\\.", 2) ? 2 : *b == '.' ? 1 : 0; /* the dot, escaped or not */
    group = *b == '(';
    b += group;
    for (;;) {
        char *end;
        unsigned long v = strtoul(b, &end, 10);
        if (end == b || v > 255)
            return false;
        ot->blocks[v / 64] |= 1ull << (v % 64);
        b = end;
        if (group && *b == '|') {
            b++;
            continue;
        }
        if (group && *b++ != ')')
            return false;
        return !strncmp(b, "\\.", 2) || *b == '.';
    }
}

/* One -ot value ("PATTERN=BUFFER,..."): read into 'ot' when every entry moves routed experts
 * ("_exps") to the CPU; false when it does anything else (gpumem does not model it). */
static bool read_override(const char *value, struct overrides *ot)
{
    char entry[256];
    struct overrides got = *ot;
    while (*value) {
        size_t len = strcspn(value, ",");
        char *eq;
        if (len >= sizeof entry)
            return false;
        memcpy(entry, value, len);
        entry[len] = '\0';
        value += len + (value[len] == ',');
        eq = strrchr(entry, '=');
        if (!eq || strcasecmp(eq + 1, "CPU"))
            return false;
        *eq = '\0';
        if (!strstr(entry, "_exps") || !pattern_blocks(entry, &got))
            return false;
    }
    *ot = got;
    return true;
}

/* The -ot flags as --n-cpu-moe: every block, or blocks 0..N-1; false for another set. */
static bool override_count(const struct overrides *ot, uint64_t *n)
{
    uint64_t k = 0;
    if (ot->all) {
        *n = 100000;
        return true;
    }
    while (k < 256 && (ot->blocks[k / 64] >> (k % 64) & 1))
        k++;
    for (uint64_t i = k; i < 256; i++)
        if (ot->blocks[i / 64] >> (i % 64) & 1)
            return false;
    *n = k;
    return k > 0;
}

/* One flag's value into the job. */
static enum gm_status read_flag(struct gm_job *job, const struct flag *f, const char *value,
                                uint64_t *cells, uint64_t *slots, struct overrides *ot, char *model,
                                size_t n_model, char *revision, size_t n_rev, char *note,
                                size_t n_note, struct gm_error *err)
{
    bool known;
    const char *to;
    switch (f->kind) {
    case F_MODEL:
        snprintf(model, n_model, "%s", value);
        return GM_OK;
    case F_REVISION:
        snprintf(revision, n_rev, "%s", value);
        return GM_OK;
    case F_SETTING:
        return est_job_set(job, f->id, value, err);
    case F_SWITCH:
    case F_CPU_MOE:
        return est_job_set(job, f->id, f->kind == F_CPU_MOE ? "100000" : NULL, err);
    case F_FA:
        return !value || strcmp(value, "off") ? est_job_set(job, f->id, NULL, err) : GM_OK;
    case F_OVERRIDE:
        if (!read_override(value, ot)) {
            note_word(note, n_note, f->names[1]);
            note_word(note, n_note, value);
        }
        return GM_OK;
    case F_LAYERS:
        return est_job_set(job, f->id,
                           strcmp(value, "all") && strcmp(value, "auto") ? value : "999", err);
    case F_CTX:
    case F_SLOTS: {
        uint64_t v;
        if (gm_parse_u64(value, &v, err) != GM_OK)
            return gm_error_prefix(err, "--from: %s", f->names[0]);
        *(f->kind == F_CTX ? cells : slots) = v;
        return GM_OK;
    }
    case F_KV:
    case F_QUANT:
        to = map_name(value, f->kind, &known);
        if (!known) {
            note_word(note, n_note, f->names[0]);
            note_word(note, n_note, value);
            return GM_OK;
        }
        return to ? est_job_set(job, f->id, to, err) : GM_OK;
    }
    return GM_OK;
}

enum gm_status gm_job_read_command(struct gm_job *job, const char *command, char *model,
                                   size_t n_model, char *note, size_t n_note, struct gm_error *err)
{
    char buf[4096], *w[MAX_WORDS], revision[128] = "";
    size_t n = 0, first = 0;
    uint64_t cells = 0, slots = 0, moe;
    struct overrides ot = {false, {0}};
    enum gm_engine engine;
    enum gm_status st;

    model[0] = '\0';
    note[0] = '\0';
    if ((st = split_words(command, buf, sizeof buf, w, &n, err)) != GM_OK)
        return st;
    engine = which_engine(w, n, &first);
    if (engine == GM_ENGINE_NONE)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET,
                       "--from: not a serving command gpumem reads (vllm serve MODEL ..., "
                       "python -m sglang.launch_server --model-path MODEL ..., llama-server -m "
                       "MODEL ...)");
    if ((st = est_job_set(job, EST_SET_INFER, NULL, err)) != GM_OK ||
        (st = est_job_set(job, EST_SET_ENGINE, gm_engine_name(engine), err)) != GM_OK)
        return st;
    for (size_t i = first; i < n; i++) {
        const char *word = w[i], *eq = strchr(word, '='), *value = NULL;
        size_t len = eq ? (size_t)(eq - word) : strlen(word);
        const struct flag *f;
        if (word[0] != '-') {
            if (engine == GM_ENGINE_VLLM && !model[0]) /* vllm serve MODEL */
                snprintf(model, n_model, "%s", word);
            else
                note_word(note, n_note, word);
            continue;
        }
        f = find_flag(engine, word, len);
        if (eq)
            value = eq + 1;
        else if (f && f->kind != F_SWITCH && f->kind != F_CPU_MOE &&
                 !(f->kind == F_FA &&
                   (i + 1 >= n || (strcmp(w[i + 1], "on") && strcmp(w[i + 1], "off") &&
                                   strcmp(w[i + 1], "auto")))))
            value = i + 1 < n ? w[++i] : NULL;
        if (!f) {
            /* not read: the flag, and its value when the next word is not a flag */
            note_word(note, n_note, word);
            if (!eq && i + 1 < n && w[i + 1][0] != '-')
                note_word(note, n_note, w[++i]);
            continue;
        }
        if (!value && f->kind != F_SWITCH && f->kind != F_CPU_MOE && f->kind != F_FA)
            return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--from: %s needs a value",
                           f->names[0]);
        if ((st = read_flag(job, f, value, &cells, &slots, &ot, model, n_model, revision,
                            sizeof revision, note, n_note, err)) != GM_OK)
            return gm_error_prefix(err, "--from '%s'", f->names[0]);
    }
    if (engine == GM_ENGINE_LLAMACPP && (cells || slots)) {
        /* -c counts the cells of every slot; -np slots each hold a sequence */
        char v[32];
        uint64_t seqs = slots ? slots : 1;
        snprintf(v, sizeof v, "%llu", (unsigned long long)seqs);
        if ((st = est_job_set(job, EST_SET_BATCH, v, err)) != GM_OK)
            return st;
        if (cells) {
            snprintf(v, sizeof v, "%llu", (unsigned long long)(cells / seqs));
            if ((st = est_job_set(job, EST_SET_CONTEXT, v, err)) != GM_OK)
                return st;
        }
    }
    if (ot.all || ot.blocks[0] || ot.blocks[1] || ot.blocks[2] || ot.blocks[3]) {
        char v[32];
        if (!override_count(&ot, &moe)) {
            note_word(note, n_note,
                      "-ot (blocks other than 0..N-1: gpumem moves the experts of "
                      "the first N, --n-cpu-moe N)");
        } else {
            snprintf(v, sizeof v, "%llu", (unsigned long long)moe);
            if ((st = est_job_set(job, EST_SET_N_CPU_MOE, v, err)) != GM_OK)
                return st;
        }
    }
    if (revision[0] && model[0] && !strchr(model, '@')) {
        size_t len = strlen(model);
        snprintf(model + len, n_model - len, "@%s", revision);
    }
    if (!model[0])
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "--from: the command names no model");
    return GM_OK;
}

/* ---- writing ---- */

/* 'word' as one shell word into out[n]: as it is when it needs no quoting, else in single
 * quotes (a quote inside as '\'', as split_words() reads it back). */
static void shell_word(const char *word, char *out, size_t n)
{
    size_t len = 0;
    if (word[0] && strspn(word, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                                "._/@:+-=,") == strlen(word)) {
        snprintf(out, n, "%s", word);
        return;
    }
    if (n < 3) {
        out[0] = '\0';
        return;
    }
    out[len++] = '\'';
    for (const char *p = word; *p && len + 6 < n; p++) {
        if (*p == '\'') {
            memcpy(out + len, "'\\''", 4);
            len += 4;
        } else {
            out[len++] = *p;
        }
    }
    out[len++] = '\'';
    out[len] = '\0';
}

static void add(char *out, size_t n, const char *flag, const char *value)
{
    size_t len = strlen(out);
    snprintf(out + len, n - len, " %s%s%s", flag, value ? " " : "", value ? value : "");
}

/* The plan's spelling of the flag that sets 'id' for 'engine'. */
static const char *flag_of(enum gm_engine engine, enum est_setting id, enum flag_kind kind)
{
    for (size_t i = 0; i < N_FLAGS; i++)
        if (flags[i].engine == engine && flags[i].id == id && flags[i].kind == kind)
            return flags[i].names[0];
    return "?";
}

static void add_u64(char *out, size_t n, enum gm_engine engine, enum est_setting id, uint64_t v)
{
    char b[24];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    add(out, n, flag_of(engine, id, F_SETTING), b);
}

static void add_number(char *out, size_t n, enum gm_engine engine, enum est_setting id, double v)
{
    char b[32];
    snprintf(b, sizeof b, "%g", v);
    add(out, n, flag_of(engine, id, F_SETTING), b);
}

/* The engine's spelling of the job's KV cache type; NULL for its default. */
static const char *kv_spelling(enum gm_engine engine, enum gm_dtype t)
{
    if (engine == GM_ENGINE_LLAMACPP) {
        switch (t) {
        case GM_DTYPE_F32:
            return "f32";
        case GM_DTYPE_BF16:
            return "bf16";
        case GM_DTYPE_I8:
            return "q8_0";
        case GM_DTYPE_INT4:
            return "q4_0";
        default:
            return NULL;
        }
    }
    if (t == GM_DTYPE_F8_E4M3)
        return engine == GM_ENGINE_VLLM ? "fp8" : "fp8_e4m3";
    return NULL;
}

/* The engine's spelling of a weight format it quantises to at load time; NULL otherwise (a
 * checkpoint's own format is read from it). */
static const char *quant_spelling(const struct gm_job *j)
{
    if (j->numerics.weight_format != GM_WEIGHTS_QUANT)
        return NULL;
    switch (j->numerics.quant.method) {
    case GM_QUANT_FP8:
        return "fp8";
    case GM_QUANT_AWQ:
        return "awq";
    case GM_QUANT_GPTQ:
        return "gptq";
    case GM_QUANT_BNB_NF4:
        return "bitsandbytes";
    default:
        return NULL;
    }
}

enum gm_status gm_estimate_plan(const struct gm_job *job, const struct gm_estimate *e, char *out,
                                size_t n, struct gm_error *err)
{
    struct gm_job j = *job;
    const char *ref, *kv, *q, *rev = NULL;
    char model[1100];
    struct gm_hf_id id;
    enum gm_engine engine;

    out[0] = '\0';
    est_job_resolve(&j);
    engine = j.engine.kind;
    if (j.mode != GM_EST_INFER ||
        (engine != GM_ENGINE_VLLM && engine != GM_ENGINE_SGLANG && engine != GM_ENGINE_LLAMACPP))
        return GM_OK;
    ref = j.model.ref ? j.model.ref : j.model.model ? j.model.model->name : NULL;
    if (!ref || !*ref)
        return gm_fail(err, GM_ERR_INVALID, GM_NO_OFFSET, "no model to name in the plan");
    /* a Hub id's revision is a flag of its own (llama.cpp's -hf takes the id as it is) */
    if (engine != GM_ENGINE_LLAMACPP && gm_hf_id_parse(ref, &id) && id.revision[0]) {
        char bare[200];
        snprintf(bare, sizeof bare, "%s%s%s", id.org, id.org[0] ? "/" : "", id.name);
        shell_word(bare, model, sizeof model);
        rev = strchr(ref, '@') + 1;
    } else {
        shell_word(ref, model, sizeof model);
    }
    kv = kv_spelling(engine, j.numerics.kv_dtype);
    q = quant_spelling(&j);
    switch (engine) {
    case GM_ENGINE_VLLM:
        snprintf(out, n, "vllm serve %s", model);
        if (rev)
            add(out, n, "--revision", rev);
        add_u64(out, n, engine, EST_SET_TP, j.parallel.tp);
        if (j.parallel.pp > 1)
            add_u64(out, n, engine, EST_SET_PP, j.parallel.pp);
        if (est_data_parallel(&j) > 1)
            add_u64(out, n, engine, EST_SET_REPLICAS, est_data_parallel(&j));
        add_u64(out, n, engine, EST_SET_MAX_MODEL_LEN, e->serving.max_model_len);
        add_number(out, n, engine, EST_SET_GPU_MEMORY_UTILIZATION,
                   j.engine.vllm.gpu_memory_utilization);
        if (j.engine.vllm.kv_cache_memory_bytes)
            add_u64(out, n, engine, EST_SET_KV_CACHE_MEMORY_BYTES,
                    j.engine.vllm.kv_cache_memory_bytes);
        /* the max_num_seqs estimated with, so the plan read back is the same job */
        add_u64(out, n, engine, EST_SET_MAX_NUM_SEQS,
                e->serving.max_num_seqs ? e->serving.max_num_seqs : j.engine.vllm.max_num_seqs);
        if (j.engine.vllm.max_num_batched_tokens)
            add_u64(out, n, engine, EST_SET_MAX_NUM_BATCHED_TOKENS,
                    j.engine.vllm.max_num_batched_tokens);
        if (j.engine.vllm.block_size != 16)
            add_u64(out, n, engine, EST_SET_BLOCK_SIZE, j.engine.vllm.block_size);
        if (kv)
            add(out, n, flag_of(engine, EST_SET_KV_DTYPE, F_KV), kv);
        if (q && (!strcmp(q, "fp8") || !strcmp(q, "bitsandbytes")))
            add(out, n, flag_of(engine, EST_SET_QUANT, F_QUANT), q);
        if (j.engine.vllm.enforce_eager)
            add(out, n, flag_of(engine, EST_SET_ENFORCE_EAGER, F_SWITCH), NULL);
        break;
    case GM_ENGINE_SGLANG:
        snprintf(out, n, "python -m sglang.launch_server --model-path %s", model);
        if (rev)
            add(out, n, "--revision", rev);
        add_u64(out, n, engine, EST_SET_TP, j.parallel.tp);
        if (est_data_parallel(&j) > 1)
            add_u64(out, n, engine, EST_SET_REPLICAS, est_data_parallel(&j));
        add_u64(out, n, engine, EST_SET_CONTEXT_LENGTH, e->serving.max_model_len);
        add_number(out, n, engine, EST_SET_MEM_FRACTION_STATIC, e->serving.static_fraction);
        if (j.engine.sglang.max_running_requests)
            add_u64(out, n, engine, EST_SET_MAX_RUNNING_REQUESTS,
                    j.engine.sglang.max_running_requests);
        if (j.engine.sglang.chunked_prefill_size)
            add_u64(out, n, engine, EST_SET_CHUNKED_PREFILL_SIZE,
                    j.engine.sglang.chunked_prefill_size);
        if (kv)
            add(out, n, flag_of(engine, EST_SET_KV_DTYPE, F_KV), kv);
        if (q && !strcmp(q, "fp8"))
            add(out, n, flag_of(engine, EST_SET_QUANT, F_QUANT), q);
        break;
    case GM_ENGINE_LLAMACPP: {
        char b[24];
        bool gguf = strlen(model) > 5 && !strcmp(model + strlen(model) - 5, ".gguf");
        snprintf(out, n, "llama-server %s %s", gguf ? "-m" : "-hf", model);
        snprintf(b, sizeof b, "%llu", (unsigned long long)e->serving.n_ctx);
        add(out, n, flag_of(engine, EST_SET_CONTEXT, F_CTX), b);
        snprintf(b, sizeof b, "%llu", (unsigned long long)j.workload.batch);
        add(out, n, flag_of(engine, EST_SET_BATCH, F_SLOTS), b);
        snprintf(b, sizeof b, "%llu", (unsigned long long)j.engine.llamacpp.n_gpu_layers);
        add(out, n, flag_of(engine, EST_SET_N_GPU_LAYERS, F_LAYERS), b);
        add_u64(out, n, engine, EST_SET_UBATCH, j.engine.llamacpp.n_ubatch);
        if (j.engine.llamacpp.flash_attn)
            add(out, n, flag_of(engine, EST_SET_FLASH_ATTN, F_FA), "on");
        if (kv) {
            add(out, n, "-ctk", kv);
            add(out, n, "-ctv", kv);
        }
        if (j.model.model && j.engine.llamacpp.n_cpu_moe >= j.model.model->n_layers)
            add(out, n, flag_of(engine, EST_SET_N_CPU_MOE, F_CPU_MOE), NULL);
        else if (j.engine.llamacpp.n_cpu_moe)
            add_u64(out, n, engine, EST_SET_N_CPU_MOE, j.engine.llamacpp.n_cpu_moe);
        break;
    }
    default:
        break;
    }
    return GM_OK;
}
