/* SPDX-License-Identifier: MIT */
/* test_model.c - config.json reading, exact parameter counts, the built-in catalog. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumem/gpumem.h"
#include "testdata.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The published exact counts of the real config.json files (third-party data). */
static const struct {
    const char *file;
    uint64_t params;
} configs[] = {
    {"Llama-2-7b-hf.json", 6738415616ull},
    {"Meta-Llama-3-8B.json", 8030261248ull},
    {"Meta-Llama-3-70B.json", 70553706496ull},
    {"Qwen2.5-0.5B.json", 494032768ull},
    {"Qwen2.5-1.5B.json", 1543714304ull},
    {"Qwen2.5-7B.json", 7615616512ull},
    {"Mistral-7B-v0.1.json", 7241732096ull},
    {"gpt2.json", 124439808ull},
    {"phi-2.json", 2779683840ull},
    {"gemma-2b.json", 2506172416ull},
    {"gemma-7b.json", 8537680896ull},
};

static uint64_t ipow10(unsigned e)
{
    uint64_t v = 1;
    while (e--)
        v *= 10;
    return v;
}

static void test_config_counts(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++) {
        char path[1024];
        struct gm_model m;
        struct gm_param_counts pc;
        struct gm_error err;
        gm_testdata_path(path, sizeof(path), "configs", configs[i].file);
        if (gm_model_load_hf_config(path, &m, &err) != GM_OK)
            fail_msg("%s: %s", configs[i].file, err.msg);
        assert_int_equal(gm_model_count_params(&m, &pc, &err), GM_OK);
        if (pc.total != configs[i].params)
            fail_msg("%s: counted %llu, published %llu", configs[i].file,
                     (unsigned long long)pc.total, (unsigned long long)configs[i].params);
    }
}

static void test_config_fields(void **state)
{
    char path[1024];
    struct gm_model m;
    struct gm_error err;
    (void)state;
    gm_testdata_path(path, sizeof(path), "configs", "gemma-7b.json");
    assert_int_equal(gm_model_load_hf_config(path, &m, &err), GM_OK);
    assert_int_equal(m.head_dim, 256); /* explicit, not 3072/16 */
    assert_true(m.tied_embeddings);    /* gemma default: key absent */
    assert_int_equal(m.arch, GM_ARCH_GEMMA);
    gm_testdata_path(path, sizeof(path), "configs", "Mistral-7B-v0.1.json");
    assert_int_equal(gm_model_load_hf_config(path, &m, &err), GM_OK);
    assert_int_equal(m.n_kv_heads, 8);
    assert_int_equal(m.sliding_window, 4096);
    assert_int_equal(m.n_sliding_layers, 32);
    gm_testdata_path(path, sizeof(path), "configs", "Qwen2.5-7B.json");
    assert_int_equal(gm_model_load_hf_config(path, &m, &err), GM_OK);
    assert_int_equal(m.sliding_window, 0); /* use_sliding_window: false */
    assert_true(m.qkv_bias);
    assert_false(m.out_bias);
    assert_int_equal(m.dtype, GM_DTYPE_BF16);
    gm_testdata_path(path, sizeof(path), "configs", "gpt2.json");
    assert_int_equal(gm_model_load_hf_config(path, &m, &err), GM_OK);
    assert_int_equal(m.intermediate, 4 * 768);
    assert_int_equal(m.n_positions_learned, 1024);
    assert_int_equal(m.act, GM_ACT_GELU_NEW);
}

/* A directory is read through the config.json it holds; without one it is missing input. */
static void test_config_dir(void **state)
{
    char dir[] = "/tmp/gm-test-model-XXXXXX";
    char path[1024];
    struct gm_model m;
    struct gm_error err;
    FILE *f;
    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_int_equal(gm_model_load_hf_config(dir, &m, &err), GM_ERR_NOENT);
    snprintf(path, sizeof(path), "%s/config.json", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"model_type\": \"gpt2\", \"n_embd\": 768, \"n_layer\": 12, \"n_head\": 12, "
          "\"n_positions\": 1024, \"vocab_size\": 50257}",
          f);
    fclose(f);
    assert_int_equal(gm_model_load_hf_config(dir, &m, &err), GM_OK);
    assert_int_equal(m.n_positions_learned, 1024);
    remove(path);
    rmdir(dir);
}

/* Every catalog model against its published exact count. */
static const struct {
    const char *name;
    uint64_t params;
} published[] = {
    {"llama-2-7b", 6738415616ull},        {"llama-2-13b", 13015864320ull},
    {"llama-2-70b", 68976648192ull},      {"llama-3-8b", 8030261248ull},
    {"llama-3-70b", 70553706496ull},      {"llama-3.1-8b", 8030261248ull},
    {"llama-3.1-70b", 70553706496ull},    {"llama-3.1-405b", 405853388800ull},
    {"llama-3.2-1b", 1235814400ull},      {"llama-3.2-3b", 3212749824ull},
    {"mistral-7b", 7241732096ull},        {"mixtral-8x7b", 46702792704ull},
    {"qwen2.5-0.5b", 494032768ull},       {"qwen2.5-1.5b", 1543714304ull},
    {"qwen2.5-3b", 3085938688ull},        {"qwen2.5-7b", 7615616512ull},
    {"qwen2.5-14b", 14770033664ull},      {"qwen2.5-32b", 32763876352ull},
    {"qwen2.5-72b", 72706203648ull},      {"gemma-2b", 2506172416ull},
    {"gemma-7b", 8537680896ull},          {"gemma-2-9b", 9241705984ull},
    {"gemma-2-27b", 27227128320ull},      {"phi-2", 2779683840ull},
    {"phi-3-mini", 3821079552ull},        {"gpt2", 124439808ull},
    {"pythia-160m", 162322944ull},        {"pythia-1b", 1011781632ull},
    {"pythia-1.4b", 1414647808ull},       {"pythia-2.8b", 2775208960ull},
    {"pythia-6.9b", 6857302016ull},       {"pythia-12b", 11846072320ull},
    {"gpt-neox-20b", 20554567680ull},     {"bert-base-uncased", 109482240ull},
    {"bert-large-uncased", 335141888ull}, {"qwen3-0.6b", 596049920ull},
    {"qwen3-8b", 8190735360ull},
};

static void test_catalog_counts(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(published) / sizeof(published[0]); i++) {
        const struct gm_model *m = gm_model_catalog_find(published[i].name);
        struct gm_param_counts pc;
        struct gm_error err;
        if (!m)
            fail_msg("catalog lacks %s", published[i].name);
        assert_int_equal(gm_model_count_params(m, &pc, &err), GM_OK);
        if (pc.total != published[i].params)
            fail_msg("%s: counted %llu, published %llu", published[i].name,
                     (unsigned long long)pc.total, (unsigned long long)published[i].params);
    }
    /* Every catalog entry validates. */
    for (size_t i = 0; i < gm_model_catalog_count(); i++) {
        struct gm_error err;
        if (gm_model_validate(gm_model_catalog_get(i), &err) != GM_OK)
            fail_msg("%s: %s", gm_model_catalog_get(i)->name, err.msg);
    }
}

/* ---- encoders, encoder-decoders and the other non-Llama layouts ----
 * Published parameter counts and where they are published ('digits' 0: exact; else the
 * figure as published, rounded to that many significant digits).  Sources:
 *   kh    keras-team/keras-hub keras_hub/src/models/<model>/<model>_presets.py (71453d0),
 *         "params" of the preset converted from the Hub checkpoint
 *   hf    the Hugging Face model API safetensors.total of the checkpoint
 *   am    transformers AutoModel.from_pretrained(id).num_parameters() as printed in public
 *         scripts (BertModel / RobertaModel / BartModel with pooler, where they have one)
 *   ds    DeepSpeed docs/code-docs/source/memory.rst (t5-3b "2851598336 params")
 *   file  the fp32 checkpoint's size as the Hub file listing shows it (3 significant
 *         digits): 4 bytes per parameter; these rows hold bytes, not parameters */
static const struct {
    const char *name;
    uint64_t params;
    unsigned digits;
    const char *source;
} published_layouts[] = {
    {"roberta-base", 124645632ull, 0, "am"},
    {"roberta-large", 355359744ull, 0, "am"},
    {"xlm-roberta-base", 278043648ull, 0, "am"},
    {"xlm-roberta-large", 559890432ull, 0, "am"},
    {"distilbert-base-uncased", 66362880ull, 0, "kh distil_bert_base_en_uncased"},
    {"deberta-v3-base", 183831552ull, 0, "kh deberta_v3_base_en"},
    {"deberta-v3-large", 434012160ull, 0, "kh deberta_v3_large_en"},
    {"modernbert-base", 149014272ull, 0, "kh modern_bert base"},
    {"t5-small", 60506624ull, 0, "kh t5_small_multi"},
    {"t5-base", 222903552ull, 0, "kh t5_base_multi"},
    {"t5-large", 737668096ull, 0, "kh t5_large_multi"},
    {"t5-3b", 2851598336ull, 0, "ds"},
    {"flan-t5-small", 76961152ull, 0, "kh flan_small_multi"},
    {"flan-t5-base", 247577856ull, 0, "kh flan_base_multi"},
    {"flan-t5-large", 783150080ull, 0, "kh flan_large_multi"},
    {"flan-t5-xl", 2849757184ull, 0, "kh t5_1.1_xl"},
    {"flan-t5-xxl", 11135332352ull, 0, "kh t5_1.1_xxl"},
    {"bart-base", 139420416ull, 0, "am"},
    {"bart-large", 406291456ull, 0, "am"},
    {"starcoderbase-1b", 1137207296ull, 0, "hf"},
    {"starcoder", 15517456384ull, 0, "hf"},
    {"starcoder2-3b", 12100000000ull, 3, "file: model.safetensors 12.1 GB, fp32"},
    {"starcoder2-15b", 63800000000ull, 3, "file: 14 shards, 63.8 GB, fp32"},
    {"falcon-rw-1b", 1311625216ull, 0, "kh falcon_refinedweb_1b_en"},
    {"gemma-3-270m", 268098176ull, 0, "kh gemma3_270m"},
    {"gemma-3-1b", 999885952ull, 0, "kh gemma3_1b; hf"},
    {"olmo-1b", 1176764416ull, 0, "hf"},
    {"olmo-7b", 6888095744ull, 0, "hf"},
    {"olmo-2-7b", 7298617344ull, 0, "hf"},
    {"olmo-2-13b", 13716198400ull, 0, "hf"},
    {"mixtral-8x22b", 140620634112ull, 0, "hf"},
    {"qwen1.5-moe-a2.7b", 14315784192ull, 0, "kh qwen1.5_moe_2.7b_en"},
    {"qwen3-30b-a3b", 30532122624ull, 0, "kh qwen3_moe_30b_a3b_en; hf"},
    {"qwen3-235b-a22b", 235093634560ull, 0, "kh qwen3_moe_235b_a22b_en; hf"},
    {"deepseek-v2-lite", 15706484224ull, 0, "hf"},
    {"deepseek-v2", 235741434880ull, 0, "hf"},
    {"deepseek-v3", 671026419200ull, 0, "main model of the checkpoint (DeepSeek: 671B)"},
    {"gpt-oss-20b", 20910000000ull, 4, "gpt-oss model card (arXiv 2508.10925) table 1: 20.91B"},
    {"gpt-oss-120b", 116830000000ull, 5, "gpt-oss model card table 1: 116.83B"},
    {"phi-4", 14659507200ull, 0, "hf"},
    {"deepseek-coder-6.7b", 6740512768ull, 0, "hf"},
};

/* 'v' rounded to 'digits' significant digits. */
static uint64_t round_sig(uint64_t v, unsigned digits)
{
    uint64_t scale = 1;
    while (v / scale >= 10 * ipow10(digits - 1))
        scale *= 10;
    return (v + scale / 2) / scale * scale;
}

static void check_published(const char *name, uint64_t counted, uint64_t want, unsigned digits,
                            const char *source)
{
    uint64_t got = digits ? round_sig(counted, digits) : counted;
    if (got != want)
        fail_msg("%s: counted %llu (%llu at %u digits), published %llu (%s)", name,
                 (unsigned long long)counted, (unsigned long long)got, digits,
                 (unsigned long long)want, source);
}

static void test_catalog_counts_published(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(published_layouts) / sizeof(published_layouts[0]); i++) {
        const struct gm_model *m = gm_model_catalog_find(published_layouts[i].name);
        struct gm_param_counts pc;
        struct gm_error err;
        if (!m)
            fail_msg("catalog lacks %s", published_layouts[i].name);
        assert_int_equal(gm_model_count_params(m, &pc, &err), GM_OK);
        check_published(published_layouts[i].name,
                        strncmp(published_layouts[i].source, "file", 4) ? pc.total : 4 * pc.total,
                        published_layouts[i].params, published_layouts[i].digits,
                        published_layouts[i].source);
    }
}

/* Counts that are published for a checkpoint which stores more (or less) than the model
 * holds in memory: each difference is one tensor, stated here. */
static void test_catalog_counts_published_differences(void **state)
{
    static const struct {
        const char *name;
        uint64_t published;
        const char *why;
    } rows[] = {
        /* Falcon is tied (FalconConfig's default), but its checkpoint stores lm_head.weight
         * too (hf 179522565120), which tie_weights() replaces */
        {"falcon-180b", 179522565120ull, "stored lm_head"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct gm_model *m = gm_model_catalog_find(rows[i].name);
        struct gm_param_counts pc;
        struct gm_error err;
        assert_non_null(m);
        assert_int_equal(gm_model_count_params(m, &pc, &err), GM_OK);
        check_published(rows[i].name, pc.total + m->vocab * m->hidden, rows[i].published, 0,
                        rows[i].why);
    }
    /* Gemma-3 4B / 12B / 27B: keras-hub's text presets (3880099328, 11765788416,
     * 27009002240) use a 262144-row embedding; the Hub checkpoints' text model has 262208
     * rows (64 more image-token rows). */
    {
        static const struct {
            const char *name;
            uint64_t keras;
        } g3[] = {{"gemma-3-4b", 3880099328ull},
                  {"gemma-3-12b", 11765788416ull},
                  {"gemma-3-27b", 27009002240ull}};
        for (size_t i = 0; i < sizeof(g3) / sizeof(g3[0]); i++) {
            const struct gm_model *m = gm_model_catalog_find(g3[i].name);
            struct gm_param_counts pc;
            struct gm_error err;
            assert_non_null(m);
            assert_int_equal(gm_model_count_params(m, &pc, &err), GM_OK);
            check_published(g3[i].name, pc.total - 64 * m->hidden, g3[i].keras, 0, "kh text");
        }
    }
}

static const char *data_dir(void)
{
    const char *s = getenv("GM_SOURCE_DIR");
    return s && *s ? s : ".";
}

/* tests/data/configs: config.json fields of published models, written from the published
 * values; each must parse to the published count and, where the catalog has the model, to
 * its catalog entry. */
static void test_config_fixtures(void **state)
{
    static const struct {
        const char *file;
        uint64_t params;
        const char *catalog;
        enum gm_arch arch;
        enum gm_head head;
    } rows[] = {
        {"roberta-base.json", 124645632ull, "roberta-base", GM_ARCH_ROBERTA, GM_HEAD_ENCODER},
        /* DistilBertForSequenceClassification: 66362880 + pre_classifier 590592 + classifier
         * 1538, as the Keras summary of the transformers TF model prints it */
        {"distilbert-sst2.json", 66955010ull, NULL, GM_ARCH_DISTILBERT, GM_HEAD_ENCODER},
        {"deberta-v3-base.json", 183831552ull, "deberta-v3-base", GM_ARCH_DEBERTA_V2,
         GM_HEAD_ENCODER},
        {"modernbert-base.json", 149014272ull, "modernbert-base", GM_ARCH_MODERNBERT,
         GM_HEAD_ENCODER},
        {"t5-small.json", 60506624ull, "t5-small", GM_ARCH_T5, GM_HEAD_SEQ2SEQ_LM},
        {"flan-t5-base.json", 247577856ull, "flan-t5-base", GM_ARCH_T5, GM_HEAD_SEQ2SEQ_LM},
        {"bart-base.json", 139420416ull, "bart-base", GM_ARCH_BART, GM_HEAD_SEQ2SEQ_LM},
        {"starcoderbase-1b.json", 1137207296ull, "starcoderbase-1b", GM_ARCH_GPT_BIGCODE,
         GM_HEAD_CAUSAL_LM},
        {"falcon-rw-1b.json", 1311625216ull, "falcon-rw-1b", GM_ARCH_FALCON, GM_HEAD_CAUSAL_LM},
        {"falcon-180B.json", 179522565120ull - 65024ull * 14848, "falcon-180b", GM_ARCH_FALCON,
         GM_HEAD_CAUSAL_LM},
        {"c4ai-command-r-v01.json", 34980831232ull, "command-r", GM_ARCH_COHERE, GM_HEAD_CAUSAL_LM},
        {"gemma-3-1b-pt.json", 999885952ull, "gemma-3-1b", GM_ARCH_GEMMA3, GM_HEAD_CAUSAL_LM},
        {"gemma-3-4b-it.json", 3880099328ull + 64 * 2560, "gemma-3-4b", GM_ARCH_GEMMA3,
         GM_HEAD_CAUSAL_LM},
        {"starcoder2-15b.json", 15957889024ull, "starcoder2-15b", GM_ARCH_STARCODER2,
         GM_HEAD_CAUSAL_LM},
        {"olmo-1b-hf.json", 1176764416ull, "olmo-1b", GM_ARCH_OLMO, GM_HEAD_CAUSAL_LM},
        {"olmo-2-1124-7b.json", 7298617344ull, "olmo-2-7b", GM_ARCH_OLMO2, GM_HEAD_CAUSAL_LM},
        {"qwen1.5-moe-a2.7b.json", 14315784192ull, "qwen1.5-moe-a2.7b", GM_ARCH_QWEN2_MOE,
         GM_HEAD_CAUSAL_LM},
        {"qwen3-30b-a3b.json", 30532122624ull, "qwen3-30b-a3b", GM_ARCH_QWEN3_MOE,
         GM_HEAD_CAUSAL_LM},
        {"deepseek-v2-lite.json", 15706484224ull, "deepseek-v2-lite", GM_ARCH_DEEPSEEK_V2,
         GM_HEAD_CAUSAL_LM},
        {"deepseek-v3.json", 671026419200ull, "deepseek-v3", GM_ARCH_DEEPSEEK_V3,
         GM_HEAD_CAUSAL_LM},
        /* V3 + 61 indexers of 13,959,424 (test_deepseek_v32_indexer) */
        {"deepseek-v3.2-exp.json", 671877944064ull, "deepseek-v3.2", GM_ARCH_DEEPSEEK_V3,
         GM_HEAD_CAUSAL_LM},
        {"gpt-oss-20b.json", 20914757184ull, "gpt-oss-20b", GM_ARCH_GPT_OSS, GM_HEAD_CAUSAL_LM},
        /* the language model of Llama4ForConditionalGeneration: llama4_layers() below */
        {"llama-4-scout-17b-16e.json", 107769861120ull, "llama-4-scout", GM_ARCH_LLAMA4,
         GM_HEAD_CAUSAL_LM},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char path[1024];
        struct gm_model m;
        struct gm_param_counts pc, pk;
        struct gm_error err;
        snprintf(path, sizeof(path), "%s/tests/data/configs/%s", data_dir(), rows[i].file);
        if (gm_model_load_hf_config(path, &m, &err) != GM_OK)
            fail_msg("%s: %s", rows[i].file, err.msg);
        assert_int_equal(m.arch, rows[i].arch);
        assert_int_equal(m.head, rows[i].head);
        assert_int_equal(gm_model_count_params(&m, &pc, &err), GM_OK);
        if (pc.total != rows[i].params)
            fail_msg("%s: counted %llu, published %llu", rows[i].file, (unsigned long long)pc.total,
                     (unsigned long long)rows[i].params);
        if (rows[i].catalog) {
            const struct gm_model *c = gm_model_catalog_find(rows[i].catalog);
            assert_non_null(c);
            assert_int_equal(gm_model_count_params(c, &pk, &err), GM_OK);
            if (pk.total != pc.total || c->n_kv_heads != m.n_kv_heads ||
                c->head_dim != m.head_dim || c->sliding_window != m.sliding_window ||
                c->n_sliding_layers != m.n_sliding_layers || c->kv_lora_rank != m.kv_lora_rank ||
                c->n_dense_layers != m.n_dense_layers || c->norm != m.norm ||
                c->tied_embeddings != m.tied_embeddings)
                fail_msg("%s: differs from the catalog's %s", rows[i].file, rows[i].catalog);
        }
    }
}

/* What the counts rest on, checked field by field where a wrong one would still count
 * right by accident. */
static void test_config_fixture_fields(void **state)
{
    char path[1024];
    struct gm_model m;
    struct gm_param_counts pc;
    struct gm_error err;
    (void)state;
#define LOAD(f)                                                                                    \
    do {                                                                                           \
        snprintf(path, sizeof(path), "%s/tests/data/configs/%s", data_dir(), f);                   \
        if (gm_model_load_hf_config(path, &m, &err) != GM_OK)                                      \
            fail_msg("%s: %s", f, err.msg);                                                        \
    } while (0)
    LOAD("deepseek-v3.json");
    assert_int_equal(m.head_dim, 192); /* qk_nope 128 + rope 64 */
    assert_int_equal(m.head_dim_v, 128);
    assert_int_equal(m.kv_lora_rank, 512);
    assert_int_equal(m.n_dense_layers, 3);
    assert_true(m.router_bias);
    assert_int_equal(m.quant.method, GM_QUANT_FP8);
    assert_int_equal(m.quant.scale, GM_SCALE_BLOCK);
    assert_int_equal(m.quant.block_rows, 128);
    assert_int_equal(gm_model_count_params(&m, &pc, &err), GM_OK);
    /* DeepSeek-V3: 37B activated per token (model card); routed experts x 8 of 256 */
    assert_true(pc.active > 37000000000ull && pc.active < 38000000000ull);
    LOAD("deepseek-v2-lite.json");
    assert_int_equal(m.q_lora_rank, 0);
    assert_false(m.router_bias);
    LOAD("gemma-3-1b-pt.json");
    assert_int_equal(m.sliding_window, 512);
    assert_int_equal(m.n_sliding_layers, 22); /* 26 layers, every 6th global */
    assert_true(m.qk_norm);
    LOAD("gemma-3-4b-it.json"); /* the class defaults fill what the text_config leaves out */
    assert_int_equal(m.n_heads, 8);
    assert_int_equal(m.n_kv_heads, 4);
    assert_int_equal(m.head_dim, 256);
    assert_int_equal(m.vocab, 262208);
    assert_int_equal(m.sliding_window, 1024);
    assert_int_equal(m.n_sliding_layers, 34 - 5);
    LOAD("starcoderbase-1b.json");
    assert_int_equal(m.n_kv_heads, 1); /* multi_query */
    LOAD("falcon-180B.json");
    assert_int_equal(m.n_kv_heads, 8);
    assert_int_equal(m.norms_per_layer, 2); /* ln_attn + ln_mlp */
    assert_true(m.tied_embeddings);
    LOAD("falcon-rw-1b.json");
    assert_int_equal(m.n_kv_heads, 32); /* multi_query false */
    LOAD("t5-small.json");
    assert_int_equal(m.n_decoder_layers, 6);
    assert_true(m.tied_embeddings);
    assert_false(m.gated_mlp);
    LOAD("flan-t5-base.json");
    assert_true(m.gated_mlp);
    assert_false(m.tied_embeddings);
    LOAD("distilbert-sst2.json");
    assert_int_equal(m.n_labels, 2);
    assert_true(m.cls_dense);
    assert_false(m.pooler);
    LOAD("roberta-base.json");
    assert_true(m.pooler);
    assert_int_equal(m.n_labels, 0);
    LOAD("qwen1.5-moe-a2.7b.json");
    assert_int_equal(m.n_dense_layers, 0);
    assert_int_equal(m.shared_intermediate, 5632);
    LOAD("starcoder2-15b.json");
    assert_int_equal(m.sliding_window, 4096);
    assert_int_equal(m.n_sliding_layers, 40);
    LOAD("gpt-oss-20b.json");
    assert_int_equal(m.sliding_window, 128);
    assert_int_equal(m.n_sliding_layers, 12); /* layer_types: sliding, full, ... */
    assert_false(m.chunked_attention);
    assert_true(m.attn_sinks);
    assert_int_equal(m.quant.method, GM_QUANT_MXFP4);
    assert_int_equal(m.quant.group_size, 32);
    LOAD("llama-4-scout-17b-16e.json");
    assert_true(m.text_only);
    assert_true(m.chunked_attention);
    assert_int_equal(m.sliding_window, 8192);   /* attention_chunk_size */
    assert_int_equal(m.n_sliding_layers, 36);   /* no_rope_layers: 1 on the RoPE layers */
    assert_int_equal(m.n_dense_layers, 0);      /* interleave_moe_layer_step 1 */
    assert_int_equal(m.intermediate, 16384);    /* intermediate_size_mlp */
    assert_int_equal(m.moe_intermediate, 8192); /* intermediate_size: experts, shared expert */
#undef LOAD
}

/* Vision-language configs as their checkpoints publish them: llava-hf/llava-1.5-7b-hf's
 * text_config names only model_type, vocab_size and positions (LlamaConfig's defaults fill
 * the rest) beside a CLIP ViT-L/14-336 vision_config; Qwen2.5-VL-7B-Instruct keeps its
 * language model at the top with a vision_config.  Counted with the tower and projector
 * they give the Hub's totals (7.06B, 8.29B); the image tokens follow each processor
 * (CLIP: 24 x 24 = 576 whatever the size; Qwen: smart_resize to multiples of 28, one token
 * per 2 x 2 patches of 14). */
static void test_vision_language_configs(void **state)
{
    static const char llava[] =
        "{\"model_type\": \"llava\", \"architectures\": [\"LlavaForConditionalGeneration\"], "
        "\"text_config\": {\"model_type\": \"llama\", \"vocab_size\": 32064, "
        "\"max_position_embeddings\": 4096}, \"vision_config\": {\"hidden_size\": 1024, "
        "\"image_size\": 336, \"intermediate_size\": 4096, \"model_type\": \"clip_vision_model\", "
        "\"num_attention_heads\": 16, \"num_hidden_layers\": 24, \"patch_size\": 14}}";
    static const char qwen[] =
        "{\"model_type\": \"qwen2_5_vl\", \"hidden_size\": 3584, \"num_hidden_layers\": 28, "
        "\"num_attention_heads\": 28, \"num_key_value_heads\": 4, \"intermediate_size\": 18944, "
        "\"vocab_size\": 152064, \"tie_word_embeddings\": false, \"vision_config\": "
        "{\"depth\": 32, \"hidden_size\": 1280, \"intermediate_size\": 3420, \"num_heads\": 16, "
        "\"out_hidden_size\": 3584, \"patch_size\": 14, \"spatial_merge_size\": 2, "
        "\"temporal_patch_size\": 2}}";
    struct gm_model m;
    struct gm_param_counts pc, pk;
    struct gm_error err;
    uint64_t patches = 0;
    (void)state;
    assert_int_equal(gm_model_parse_hf_config(llava, strlen(llava), &m, &err), GM_OK);
    assert_int_equal(m.vision.kind, GM_VISION_CLIP);
    assert_false(m.text_only);
    assert_int_equal(m.hidden, 4096); /* LlamaConfig default */
    assert_int_equal(gm_model_count_params(&m, &pc, &err), GM_OK);
    assert_int_equal(gm_model_count_params(gm_model_catalog_find("llava-1.5-7b"), &pk, &err),
                     GM_OK);
    assert_int_equal(pc.total, pk.total);
    check_published("llava-1.5-7b", pc.total, 7060000000ull, 3, "Hub: 7.06B params");
    /* CLIPVisionModel ViT-L/14-336 alone: 303,507,456 (keras-hub / transformers) + the
     * projector 1024 x 4096 + 4096 x 4096 with biases */
    assert_int_equal(pc.other, 303507456ull + 4096 * 1024 + 4096 + 4096 * 4096 + 4096);
    assert_int_equal(gm_model_image_tokens(&m, 1920, 1080, &patches), 576);
    assert_int_equal(patches, 577);

    assert_int_equal(gm_model_parse_hf_config(qwen, strlen(qwen), &m, &err), GM_OK);
    assert_int_equal(m.vision.kind, GM_VISION_QWEN_VL);
    assert_int_equal(gm_model_count_params(&m, &pc, &err), GM_OK);
    assert_int_equal(gm_model_count_params(gm_model_catalog_find("qwen2.5-vl-7b"), &pk, &err),
                     GM_OK);
    assert_int_equal(pc.total, pk.total);
    check_published("qwen2.5-vl-7b", pc.total, 8290000000ull, 3, "Hub: 8.29B params");
    assert_int_equal(gm_model_image_tokens(&m, 1280, 720, &patches), 46 * 26);
    assert_int_equal(patches, 4 * 46 * 26);
    assert_int_equal(gm_model_image_tokens(&m, 1920, 1080, NULL), 69 * 39);
    assert_int_equal(gm_model_image_tokens(&m, 20, 20, NULL), 4);             /* min_pixels */
    assert_int_equal(gm_model_image_tokens(&m, 8000, 8000, NULL), 128 * 128); /* max_pixels */
}

/* gpt-oss and Llama-4 counted from the parameter shapes their transformers modules declare
 * (modeling_gpt_oss.py at ede92a8: GptOssAttention q/k/v/o with biases and sinks (heads),
 * GptOssExperts gate_up_proj (E, h, 2I) + bias (E, 2I), down_proj (E, I, h) + bias (E, h),
 * GptOssTopKRouter weight (E, h) + bias (E); modeling_llama4.py at 63210d0: Llama4TextExperts
 * gate_up_proj (E, h, 2I), down_proj (E, I, h), Llama4Router (E, h) without bias, a shared
 * Llama4TextMLP of I, dense layers Llama4TextMLP of intermediate_size_mlp, L2 q/k norms
 * without weights), summed here independently of the counting code. */
static void test_moe_layouts_from_module_shapes(void **state)
{
    static const char gpt_oss[] =
        "{\"model_type\": \"gpt_oss\", \"hidden_size\": 2880, \"num_hidden_layers\": 4, "
        "\"num_attention_heads\": 64, \"num_key_value_heads\": 8, \"head_dim\": 64, "
        "\"intermediate_size\": 2880, \"num_local_experts\": 32, \"experts_per_token\": 4, "
        "\"vocab_size\": 201088, \"sliding_window\": 128, \"tie_word_embeddings\": false}";
    static const char maverick[] =
        "{\"model_type\": \"llama4\", \"text_config\": {\"model_type\": \"llama4_text\", "
        "\"hidden_size\": 5120, \"num_hidden_layers\": 8, \"num_attention_heads\": 40, "
        "\"num_key_value_heads\": 8, \"head_dim\": 128, \"intermediate_size\": 8192, "
        "\"intermediate_size_mlp\": 16384, \"num_local_experts\": 128, "
        "\"interleave_moe_layer_step\": 2, \"use_qk_norm\": false, \"vocab_size\": 202048}}";
    struct gm_model m;
    struct gm_param_counts pc;
    struct gm_error err;
    uint64_t h = 2880, I = 2880, E = 32, L = 4, V = 201088, q = 64 * 64, kv = 8 * 64, want;
    (void)state;
    assert_int_equal(gm_model_parse_hf_config(gpt_oss, strlen(gpt_oss), &m, &err), GM_OK);
    assert_int_equal(m.arch, GM_ARCH_GPT_OSS);
    assert_int_equal(m.n_experts_active, 4); /* experts_per_token */
    assert_int_equal(m.n_sliding_layers, 2); /* GptOssConfig default: even layers slide */
    assert_int_equal(gm_model_count_params(&m, &pc, &err), GM_OK);
    want = 2 * V * h + h +                                      /* embed, lm_head, norm */
           L * (2 * h +                                         /* two RMSNorms */
                (h * q + q) + 2 * (h * kv + kv) + (q * h + h) + /* q, k, v, o with biases */
                64 +                                            /* sinks */
                E * (h * 2 * I + 2 * I + I * h + h) +           /* experts with biases */
                E * h + E);                                     /* router with bias */
    assert_int_equal(pc.total, want);

    h = 5120;
    L = 8;
    V = 202048;
    E = 128;
    q = 40 * 128;
    kv = 8 * 128;
    assert_int_equal(gm_model_parse_hf_config(maverick, strlen(maverick), &m, &err), GM_OK);
    assert_int_equal(m.arch, GM_ARCH_LLAMA4);
    assert_int_equal(m.n_dense_layers, 4);   /* moe_layers 1, 3, 5, 7 */
    assert_int_equal(m.n_sliding_layers, 6); /* NoPE layers 3 and 7 attend globally */
    assert_int_equal(gm_model_count_params(&m, &pc, &err), GM_OK);
    want = 2 * V * h + h + L * (2 * h + h * q + 2 * h * kv + q * h) +
           (L / 2) * (E * (h * 2 * 8192 + 8192 * h) + 3 * h * 8192 + E * h) + /* MoE layers */
           (L / 2) * 3 * h * 16384;                                           /* dense layers */
    assert_int_equal(pc.total, want);
}

static void test_catalog_matches_configs(void **state)
{
    /* The catalog's copy of each test model equals what its config.json gives. */
    static const char *const pairs[][2] = {
        {"Llama-2-7b-hf.json", "meta-llama/Llama-2-7b-hf"},
        {"Meta-Llama-3-8B.json", "Meta-Llama-3-8B"},
        {"Qwen2.5-1.5B.json", "qwen2.5-1.5b"},
        {"gemma-7b.json", "GEMMA-7B"},
        {"phi-2.json", "microsoft/phi-2"},
        {"gpt2.json", "gpt2"},
        {"Mistral-7B-v0.1.json", "mistral-7b"},
    };
    (void)state;
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
        char path[1024];
        struct gm_model a;
        const struct gm_model *b = gm_model_catalog_find(pairs[i][1]);
        struct gm_error err;
        gm_testdata_path(path, sizeof(path), "configs", pairs[i][0]);
        assert_int_equal(gm_model_load_hf_config(path, &a, &err), GM_OK);
        assert_non_null(b);
        assert_int_equal(a.hidden, b->hidden);
        assert_int_equal(a.n_kv_heads, b->n_kv_heads);
        assert_int_equal(a.head_dim, b->head_dim);
        assert_int_equal(a.sliding_window, b->sliding_window);
        assert_int_equal(a.tied_embeddings, b->tied_embeddings);
        assert_int_equal(a.act, b->act);
        assert_int_equal(a.norms_per_layer, b->norms_per_layer);
    }
}

static void test_catalog_lookup_and_names(void **state)
{
    (void)state;
    assert_null(gm_model_catalog_find("no-such-model"));
    assert_non_null(gm_model_catalog_find("someone/Llama-2-7b-hf"));
}

static enum gm_status parse(const char *json, struct gm_model *m, struct gm_error *err)
{
    return gm_model_parse_hf_config(json, strlen(json), m, err);
}

/* rope_scaling as config.json gives it: the type under "rope_type" or the older "type", its
 * factor and original_max_position_embeddings; null means none; a factor that is not a
 * positive number is refused. */
static void test_rope_scaling(void **state)
{
    static const char *const head = "{\"model_type\": \"llama\", \"hidden_size\": 64, "
                                    "\"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
                                    "\"vocab_size\": 10, \"intermediate_size\": 8, "
                                    "\"max_position_embeddings\": 16384, \"rope_scaling\": ";
    static const struct {
        const char *block;
        enum gm_rope_scaling kind;
        double factor;
        uint64_t original;
    } cases[] = {
        {"null}", GM_ROPE_NONE, 0, 0},
        {"{\"factor\": 4.0, \"type\": \"linear\"}}", GM_ROPE_LINEAR, 4.0, 0},
        {"{\"rope_type\": \"dynamic\", \"factor\": 2}}", GM_ROPE_DYNAMIC, 2.0, 0},
        {"{\"rope_type\": \"yarn\", \"factor\": 40, \"original_max_position_embeddings\": "
         "4096}}",
         GM_ROPE_YARN, 40.0, 4096},
        {"{\"rope_type\": \"llama3\", \"factor\": 8.0}}", GM_ROPE_LLAMA3, 8.0, 0},
        {"{\"type\": \"su\"}}", GM_ROPE_LONGROPE, 0, 0},
        {"{\"type\": \"mrope\", \"mrope_section\": [16, 24, 24]}}", GM_ROPE_OTHER, 0, 0},
        {"{\"rope_type\": \"default\"}}", GM_ROPE_NONE, 0, 0},
    };
    struct gm_model m;
    struct gm_error err;
    char json[512];
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(json, sizeof json, "%s%s", head, cases[i].block);
        assert_int_equal(parse(json, &m, &err), GM_OK);
        assert_int_equal(m.rope_scaling, cases[i].kind);
        assert_true(m.rope_factor == cases[i].factor);
        assert_int_equal(m.rope_original_positions, cases[i].original);
        assert_int_equal(m.max_positions, 16384);
    }
    snprintf(json, sizeof json, "%s%s", head, "{\"type\": \"linear\", \"factor\": \"4\"}}");
    assert_int_equal(parse(json, &m, &err), GM_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "rope_scaling.factor"));
    snprintf(json, sizeof json, "%s%s", head, "{\"type\": \"linear\", \"factor\": -1}}");
    assert_int_equal(parse(json, &m, &err), GM_ERR_FORMAT);
}

/* transformers v5's rope_parameters (vllm/config/model.py @ 0052a5b: "rope_parameters could be
 * TypedDict or dict[str, TypedDict]"): the flat block as rope_scaling, and one block per layer
 * type, where the block that scales the positions is taken (not llama3's, not "default"). */
static void test_rope_parameters(void **state)
{
    static const char *const head = "{\"model_type\": \"llama\", \"hidden_size\": 64, "
                                    "\"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
                                    "\"vocab_size\": 10, \"intermediate_size\": 8, "
                                    "\"max_position_embeddings\": 16384, ";
    static const struct {
        const char *block;
        enum gm_rope_scaling kind;
        double factor;
        uint64_t original;
    } cases[] = {
        {"\"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000.0}}",
         GM_ROPE_NONE, 0, 0},
        {"\"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 4.0, "
         "\"rope_theta\": 100000}}",
         GM_ROPE_LINEAR, 4.0, 0},
        {"\"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4, "
         "\"original_max_position_embeddings\": 32768}}",
         GM_ROPE_YARN, 4.0, 32768},
        /* per layer type: the sliding layers' default, the full layers' linear x8 */
        {"\"rope_parameters\": {\"sliding_attention\": {\"rope_type\": \"default\"}, "
         "\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0}}}",
         GM_ROPE_LINEAR, 8.0, 0},
        {"\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"default\"}}}", GM_ROPE_NONE,
         0, 0},
        /* rope_scaling wins where both are given */
        {"\"rope_scaling\": {\"type\": \"dynamic\", \"factor\": 2}, \"rope_parameters\": "
         "{\"rope_type\": \"linear\", \"factor\": 4}}",
         GM_ROPE_DYNAMIC, 2.0, 0},
    };
    struct gm_model m;
    struct gm_error err;
    char json[768];
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(json, sizeof json, "%s%s", head, cases[i].block);
        assert_int_equal(parse(json, &m, &err), GM_OK);
        assert_int_equal(m.rope_scaling, cases[i].kind);
        assert_true(m.rope_factor == cases[i].factor);
        assert_int_equal(m.rope_original_positions, cases[i].original);
    }
    /* a bad factor in a nested block names the key */
    snprintf(json, sizeof json, "%s%s", head,
             "\"rope_parameters\": {\"full_attention\": {\"rope_type\": \"linear\", "
             "\"factor\": \"8\"}}}");
    assert_int_equal(parse(json, &m, &err), GM_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "rope_parameters.factor"));
}

static void test_bad_configs(void **state)
{
    struct gm_model m;
    struct gm_error err;
    (void)state;
    assert_int_equal(parse("{\"model_type\": \"llama\",", &m, &err), GM_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "invalid JSON"));
    assert_int_equal(err.offset, 23);
    assert_int_equal(parse("[1, 2]", &m, &err), GM_ERR_FORMAT);
    assert_int_equal(parse("{\"model_type\": \"llama\", \"hidden_size\": 4096}", &m, &err),
                     GM_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "missing fields: num_hidden_layers, num_attention_heads, "
                                    "vocab_size, intermediate_size"));
    assert_int_equal(parse("{\"model_type\": \"llama\", \"hidden_size\": -1, "
                           "\"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
                           "\"vocab_size\": 10, \"intermediate_size\": 8}",
                           &m, &err),
                     GM_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "'hidden_size' is negative"));
    assert_int_equal(parse("{\"model_type\": \"llama\", \"hidden_size\": \"big\", "
                           "\"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
                           "\"vocab_size\": 10, \"intermediate_size\": 8}",
                           &m, &err),
                     GM_ERR_FORMAT);
    assert_int_equal(parse("{\"model_type\": \"llama\", \"hidden_size\": 1e300, "
                           "\"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
                           "\"vocab_size\": 10, \"intermediate_size\": 8}",
                           &m, &err),
                     GM_ERR_FORMAT);
    /* Absurd but well-formed values are rejected, never wrapped around. */
    assert_int_equal(parse("{\"model_type\": \"llama\", \"hidden_size\": 9223372036854775807, "
                           "\"num_hidden_layers\": 2, \"num_attention_heads\": 2, "
                           "\"vocab_size\": 10, \"intermediate_size\": 8}",
                           &m, &err),
                     GM_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "absurd"));
    /* heads not a multiple of KV heads */
    assert_int_equal(parse("{\"model_type\": \"llama\", \"hidden_size\": 64, "
                           "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                           "\"num_key_value_heads\": 3, \"vocab_size\": 10, "
                           "\"intermediate_size\": 8}",
                           &m, &err),
                     GM_ERR_FORMAT);
    /* Unknown family without the common fields: said to be unknown, with the known ones
     * (not a list of "missing" keys that its own layout names differently). */
    assert_int_equal(parse("{\"model_type\": \"mamba\", \"hidden_size\": 64}", &m, &err),
                     GM_ERR_UNSUPPORTED);
    assert_non_null(
        strstr(err.msg, "'mamba' is not an architecture gpumem knows (the 36 it knows"));
    assert_int_equal(parse("{\"model_type\": \"fancy\", \"hidden_size\": 64, "
                           "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                           "\"vocab_size\": 10, \"intermediate_size\": 8}",
                           &m, &err),
                     GM_OK);
    {
        struct gm_param_counts pc;
        assert_int_equal(gm_model_count_params(&m, &pc, &err), GM_ERR_UNSUPPORTED);
        assert_non_null(strstr(err.msg, "'fancy'"));
    }
    /* model_type missing: the architectures entry decides. */
    assert_int_equal(parse("{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 64, "
                           "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                           "\"vocab_size\": 10, \"intermediate_size\": 8}",
                           &m, &err),
                     GM_OK);
    assert_int_equal(m.arch, GM_ARCH_LLAMA);
    /* Multimodal wrapper: the text model is sized. */
    assert_int_equal(parse("{\"model_type\": \"llava\", \"vision_config\": {}, \"text_config\": "
                           "{\"model_type\": \"mistral\", \"hidden_size\": 64, "
                           "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, "
                           "\"vocab_size\": 10, \"intermediate_size\": 8}}",
                           &m, &err),
                     GM_OK);
    assert_int_equal(m.arch, GM_ARCH_MISTRAL);
}

static void test_tiny_counts(void **state)
{
    /* A hand-countable llama: h=4, 1 layer, 2 heads (dim 2), 1 KV head, I=8, V=10, untied.
     * embed 40 + q 16 + k 8 + v 8 + o 16 + mlp 3*32 + norms 2*4 + final 4 + lm_head 40 */
    struct gm_model m;
    struct gm_param_counts pc;
    struct gm_error err;
    (void)state;
    assert_int_equal(parse("{\"model_type\": \"llama\", \"hidden_size\": 4, "
                           "\"num_hidden_layers\": 1, \"num_attention_heads\": 2, "
                           "\"num_key_value_heads\": 1, \"vocab_size\": 10, "
                           "\"intermediate_size\": 8, \"tie_word_embeddings\": false}",
                           &m, &err),
                     GM_OK);
    assert_int_equal(gm_model_count_params(&m, &pc, &err), GM_OK);
    assert_int_equal(pc.total, 40 + 16 + 8 + 8 + 16 + 96 + 8 + 4 + 40);
    assert_int_equal(pc.embedding, 40);
    assert_int_equal(pc.lm_head, 40);
    assert_int_equal(pc.largest_tensor, 40);
    /* no "use_cache" key: transformers' default, true */
    assert_false(m.use_cache_off);
    assert_int_equal(pc.matmul, 16 + 8 + 8 + 16 + 96 + 40);
    /* Tied: the lm_head disappears. */
    m.tied_embeddings = true;
    assert_int_equal(gm_model_count_params(&m, &pc, &err), GM_OK);
    assert_int_equal(pc.total, 40 + 16 + 8 + 8 + 16 + 96 + 8 + 4);
    /* MoE with 4 experts, top-2: 4 MLPs + router (4 x 4). */
    m.n_experts = 4;
    m.n_experts_active = 2;
    assert_int_equal(gm_model_count_params(&m, &pc, &err), GM_OK);
    assert_int_equal(pc.total, 40 + 16 + 8 + 8 + 16 + 4 * 96 + 16 + 8 + 4);
    assert_int_equal(pc.active, 40 + 16 + 8 + 8 + 16 + 2 * 96 + 16 + 8 + 4);
    /* a config that turns the cache off says so */
    assert_int_equal(parse("{\"model_type\": \"gpt_bigcode\", \"n_embd\": 4, \"n_layer\": 1, "
                           "\"n_head\": 2, \"vocab_size\": 10, \"use_cache\": false}",
                           &m, &err),
                     GM_OK);
    assert_true(m.use_cache_off);
}

static void test_dtypes(void **state)
{
    (void)state;
    assert_int_equal(gm_dtype_parse("bfloat16"), GM_DTYPE_BF16);
    assert_int_equal(gm_dtype_parse("torch.float16"), GM_DTYPE_F16);
    assert_int_equal(gm_dtype_parse("F32"), GM_DTYPE_F32);
    assert_int_equal(gm_dtype_parse("fp8"), GM_DTYPE_F8_E4M3);
    assert_int_equal(gm_dtype_parse("nope"), GM_DTYPE_UNKNOWN);
    assert_int_equal(gm_dtype_bits(GM_DTYPE_NF4), 4);
    assert_string_equal(gm_dtype_name(GM_DTYPE_BF16), "bf16");
    assert_string_equal(gm_arch_name(GM_ARCH_GPT_NEOX), "gpt_neox");
}

/* Names as people type them: variants and kin share an entry's architecture and say so;
 * a slip gets the name it is likely for. */
static void test_catalog_names(void **state)
{
    const struct gm_model *base = gm_model_catalog_find("llama-3.1-8b");
    size_t idx;
    bool kin = true;
    (void)state;
    assert_non_null(base);
    assert_ptr_equal(gm_model_catalog_match("meta-llama/Llama-3.1-8B", &idx, &kin), base);
    assert_false(kin);
    assert_string_equal(gm_model_catalog_hub_id(idx), "meta-llama/Llama-3.1-8B");
    assert_ptr_equal(gm_model_catalog_match("meta-llama/Llama-3.1-8B-Instruct", NULL, &kin), base);
    assert_true(kin);
    assert_ptr_equal(gm_model_catalog_match("Meta-Llama-3.1-8B-Instruct", NULL, NULL), base);
    assert_ptr_equal(gm_model_catalog_match("llama-3.3-70b", NULL, &kin),
                     gm_model_catalog_find("llama-3.1-70b"));
    assert_true(kin);
    assert_ptr_equal(gm_model_catalog_match("google/gemma-2-9b-it", NULL, NULL),
                     gm_model_catalog_find("gemma-2-9b"));
    assert_ptr_equal(gm_model_catalog_match("Llama-2-7b-chat-hf", NULL, NULL),
                     gm_model_catalog_find("llama-2-7b"));
    /* a variant word is a word: "instructions" or a leading "it" are not one */
    assert_null(gm_model_catalog_match("llama-3.1-8b-instructions", NULL, NULL));
    assert_null(gm_model_catalog_match("it-llama-3.1-8b", NULL, NULL));
    assert_null(gm_model_catalog_find("llama-3.1-8b-instruct")); /* find is exact */
    assert_string_equal(gm_model_catalog_closest("lama-3.1-8b"), "Llama-3.1-8B");
    assert_string_equal(gm_model_catalog_closest("meta-llama/Lama-3.1-8B"),
                        "meta-llama/Llama-3.1-8B");
    assert_null(gm_model_catalog_closest("something-else-entirely"));
}

static char *fake_env(const char *name)
{
    static char hf_home[] = "/data/hf", home[] = "/home/u";
    if (!strcmp(name, "HF_HOME"))
        return hf_home;
    if (!strcmp(name, "HOME"))
        return home;
    return NULL;
}

static char *home_only(const char *name)
{
    static char home[] = "/home/u";
    return !strcmp(name, "HOME") ? home : NULL;
}

/* Hub ids parsed as names, never paths; the cache folder as huggingface_hub finds it. */
static void test_hf_ids(void **state)
{
    struct gm_hf_id id;
    char dir[256];
    (void)state;
    assert_true(gm_hf_id_parse("meta-llama/Llama-3.1-8B", &id));
    assert_string_equal(id.org, "meta-llama");
    assert_string_equal(id.name, "Llama-3.1-8B");
    assert_string_equal(id.revision, "");
    assert_true(gm_hf_id_parse("Qwen/Qwen2.5-7B@v1.0", &id));
    assert_string_equal(id.revision, "v1.0");
    assert_true(gm_hf_id_parse("gpt2", &id));
    assert_string_equal(id.org, "");
    assert_false(gm_hf_id_parse("../etc/passwd", &id));
    assert_false(gm_hf_id_parse("a/b/c", &id));
    assert_false(gm_hf_id_parse("org/..", &id));
    assert_false(gm_hf_id_parse("org/name@../x", &id));
    assert_false(gm_hf_id_parse("/abs/path", &id));
    assert_false(gm_hf_id_parse("org/", &id));
    assert_true(gm_hf_hub_cache(fake_env, dir, sizeof dir));
    assert_string_equal(dir, "/data/hf/hub");
    assert_true(gm_hf_hub_cache(home_only, dir, sizeof dir));
    assert_string_equal(dir, "/home/u/.cache/huggingface/hub");
    assert_false(gm_hf_hub_cache(home_only, dir, 8)); /* does not fit */
    assert_true(gm_hf_id_parse("acme/none", &id));
    assert_int_equal(gm_hf_hub_snapshot("/nonexistent-hub", &id, dir, sizeof dir, NULL, NULL),
                     GM_ERR_NOENT);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_config_dir),
    cmocka_unit_test(test_catalog_counts),
    cmocka_unit_test(test_catalog_lookup_and_names),
    cmocka_unit_test(test_bad_configs),
    cmocka_unit_test(test_tiny_counts),
    cmocka_unit_test(test_dtypes),
    cmocka_unit_test(test_catalog_names),
    cmocka_unit_test(test_hf_ids),
    cmocka_unit_test(test_catalog_counts_published),
    cmocka_unit_test(test_catalog_counts_published_differences),
    cmocka_unit_test(test_config_fixtures),
    cmocka_unit_test(test_config_fixture_fields),
    cmocka_unit_test(test_moe_layouts_from_module_shapes),
    cmocka_unit_test(test_vision_language_configs),
    cmocka_unit_test(test_rope_scaling),
    cmocka_unit_test(test_rope_parameters),
};

/* the real config.json files */
static const struct CMUnitTest third_party_tests[] = {
    cmocka_unit_test(test_config_counts),
    cmocka_unit_test(test_config_fields),
    cmocka_unit_test(test_catalog_matches_configs),
};

GM_TEST_MAIN(tests, third_party_tests)
