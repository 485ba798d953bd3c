/* SPDX-License-Identifier: MIT */
/* test_model.c - config.json reading, exact parameter counts, the built-in catalog. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "gpumem/gpumem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The published exact counts of ../shared/testdata/configs (README.md there). */
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

static const char *shared_dir(void)
{
    const char *s = getenv("GM_SHARED");
    return s && *s ? s : "../shared";
}

static void test_config_counts(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++) {
        char path[1024];
        struct gm_model m;
        struct gm_param_counts pc;
        struct gm_error err;
        snprintf(path, sizeof(path), "%s/testdata/configs/%s", shared_dir(), configs[i].file);
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
    snprintf(path, sizeof(path), "%s/testdata/configs/gemma-7b.json", shared_dir());
    assert_int_equal(gm_model_load_hf_config(path, &m, &err), GM_OK);
    assert_int_equal(m.head_dim, 256); /* explicit, not 3072/16 */
    assert_true(m.tied_embeddings);    /* gemma default: key absent */
    assert_int_equal(m.arch, GM_ARCH_GEMMA);
    snprintf(path, sizeof(path), "%s/testdata/configs/Mistral-7B-v0.1.json", shared_dir());
    assert_int_equal(gm_model_load_hf_config(path, &m, &err), GM_OK);
    assert_int_equal(m.n_kv_heads, 8);
    assert_int_equal(m.sliding_window, 4096);
    assert_int_equal(m.n_sliding_layers, 32);
    snprintf(path, sizeof(path), "%s/testdata/configs/Qwen2.5-7B.json", shared_dir());
    assert_int_equal(gm_model_load_hf_config(path, &m, &err), GM_OK);
    assert_int_equal(m.sliding_window, 0); /* use_sliding_window: false */
    assert_true(m.qkv_bias);
    assert_false(m.out_bias);
    assert_int_equal(m.dtype, GM_DTYPE_BF16);
    snprintf(path, sizeof(path), "%s/testdata/configs/gpt2.json", shared_dir());
    assert_int_equal(gm_model_load_hf_config(path, &m, &err), GM_OK);
    assert_int_equal(m.intermediate, 4 * 768);
    assert_int_equal(m.n_positions_learned, 1024);
    assert_int_equal(m.act, GM_ACT_GELU_NEW);
    /* A directory without config.json: missing input. */
    snprintf(path, sizeof(path), "%s/testdata", shared_dir());
    assert_int_equal(gm_model_load_hf_config(path, &m, &err), GM_ERR_NOENT);
    /* A directory holding one works. */
    {
        char dir[] = "/tmp/gm-test-model-XXXXXX";
        FILE *f;
        assert_non_null(mkdtemp(dir));
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
        snprintf(path, sizeof(path), "%s/testdata/configs/%s", shared_dir(), pairs[i][0]);
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
    assert_null(gm_model_catalog_find("no-such-model"));
    assert_non_null(gm_model_catalog_find("someone/Llama-2-7b-hf"));
}

static enum gm_status parse(const char *json, struct gm_model *m, struct gm_error *err)
{
    return gm_model_parse_hf_config(json, strlen(json), m, err);
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
    assert_non_null(strstr(err.msg, "'mamba' is not an architecture gpumem knows (known: llama"));
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_counts),  cmocka_unit_test(test_config_fields),
        cmocka_unit_test(test_catalog_counts), cmocka_unit_test(test_catalog_matches_configs),
        cmocka_unit_test(test_bad_configs),    cmocka_unit_test(test_tiny_counts),
        cmocka_unit_test(test_dtypes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
