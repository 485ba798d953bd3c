/* SPDX-License-Identifier: MIT */
/* modelfile.h - what a model's weight files say about it, read from their headers only.
 *
 * safetensors (one file, a folder of shards, or a model.safetensors.index.json) and GGUF
 * (versions 2 and 3) are read up to the end of their headers; the tensor data is never
 * read, so a 140 GB checkpoint is summarised from a few megabytes.  The summary gives the
 * exact number of parameters and of bytes per stored dtype (ggml quantisation types
 * included), the largest module (what DeepSpeed ZeRO-3 gathers), and for GGUF the
 * architecture keys of its metadata.  For safetensors the architecture comes from the
 * config.json beside the weights (its path is in config_path).
 *
 * Every count, length and offset read from a file is checked against the bytes that are
 * really there and against struct gm_modelfile_limits before anything is allocated. */
#ifndef GPUMEM_MODELFILE_H
#define GPUMEM_MODELFILE_H

#include "gpumem/arena.h"
#include "gpumem/error.h"
#include "gpumem/model.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum gm_modelfile_format { GM_MODELFILE_NONE = 0, GM_MODELFILE_SAFETENSORS, GM_MODELFILE_GGUF };

/* Caps on what a header may make the reader do; gm_modelfile_limits_default() fills
 * generous values that every real checkpoint stays far below. */
struct gm_modelfile_limits {
    uint64_t max_header_bytes; /* bytes of one file's header (safetensors JSON, GGUF KV+infos) */
    uint64_t max_tensors;      /* tensors over all files */
    uint64_t max_files;        /* shards */
    uint64_t max_string;       /* bytes of one GGUF string */
    uint64_t max_array;        /* elements of one GGUF array */
};

#define GM_MODELFILE_MAX_DTYPES 48
#define GM_MODELFILE_MAX_DIMS   8

/* Totals of one stored element type ("BF16", "F8_E4M3", "Q4_K"). */
struct gm_modelfile_dtype {
    char name[16];
    uint64_t n_tensors;
    uint64_t n_elements;
    uint64_t n_bytes; /* bytes of tensor data */
};

struct gm_modelfile_tensor {
    const char *name; /* owned by the gm_modelfile */
    uint32_t dtype;   /* index into gm_modelfile.dtypes */
    uint32_t n_dims;
    uint64_t shape[GM_MODELFILE_MAX_DIMS]; /* safetensors order (outermost first); GGUF ne[] */
    uint64_t n_elements;
    uint64_t n_bytes;
};

/* Architecture facts found in the file itself (GGUF metadata).  0 means "not given". */
struct gm_modelfile_arch {
    char name[64];           /* general.architecture ("llama") */
    uint64_t n_layers;       /* <arch>.block_count */
    uint64_t hidden;         /* <arch>.embedding_length */
    uint64_t ffn;            /* <arch>.feed_forward_length (largest when per layer) */
    uint64_t n_heads;        /* <arch>.attention.head_count */
    uint64_t n_kv_heads;     /* <arch>.attention.head_count_kv (largest when per layer) */
    uint64_t head_dim;       /* <arch>.attention.key_length */
    uint64_t head_dim_v;     /* <arch>.attention.value_length */
    uint64_t context_length; /* <arch>.context_length, tokens */
    uint64_t vocab;          /* <arch>.vocab_size, else tokenizer.ggml.tokens length */
    uint64_t n_experts;      /* <arch>.expert_count */
    uint64_t n_experts_used; /* <arch>.expert_used_count */
    uint64_t expert_ffn;     /* <arch>.expert_feed_forward_length */
    uint64_t sliding_window; /* <arch>.attention.sliding_window, tokens */
    /* ---- deepseek2 (MLA) and MoE keys ---- */
    uint64_t q_lora_rank;       /* <arch>.attention.q_lora_rank */
    uint64_t kv_lora_rank;      /* <arch>.attention.kv_lora_rank */
    uint64_t head_dim_mla;      /* <arch>.attention.key_length_mla (key_length: the latent) */
    uint64_t head_dim_v_mla;    /* <arch>.attention.value_length_mla */
    uint64_t rope_dims;         /* <arch>.rope.dimension_count */
    uint64_t n_shared_experts;  /* <arch>.expert_shared_count */
    uint64_t n_dense_layers;    /* <arch>.leading_dense_block_count */
    uint64_t shared_expert_ffn; /* <arch>.expert_shared_feed_forward_length */
};

struct gm_modelfile {
    enum gm_modelfile_format format;
    uint32_t gguf_version;   /* 2 or 3 for GGUF */
    uint64_t gguf_file_type; /* general.file_type (llama_ftype), UINT64_MAX if absent */
    char model_name[128];    /* general.name, or "" */
    uint64_t n_files;
    uint64_t file_bytes;   /* sum of the sizes of the files read */
    uint64_t header_bytes; /* sum of header sizes (what was really read) */
    uint64_t n_params;     /* elements over all tensors */
    uint64_t n_bytes;      /* tensor-data bytes over all tensors */
    uint64_t n_tensors;
    uint64_t index_total_size; /* metadata.total_size of an index.json, 0 if none */
    size_t n_dtypes;
    struct gm_modelfile_dtype dtypes[GM_MODELFILE_MAX_DTYPES];
    /* The module (tensor name up to its last '.') with the most parameters: the layer that
     * DeepSpeed ZeRO-3 gathers whole.  Tied weights stored once count once. */
    char largest_module[160];
    uint64_t largest_module_params;
    struct gm_modelfile_arch arch;
    bool has_arch;          /* GGUF metadata named an architecture */
    char config_path[4096]; /* safetensors: the config.json beside the weights, "" if none */
    struct gm_modelfile_tensor *tensors; /* n_tensors entries, in file order */
    /* private */
    size_t tensors_cap;
    struct gm_arena arena; /* tensor names */
};

/* Generous default limits: 100 MB header (the safetensors reference cap), 4 M tensors,
 * 16384 shards, 64 MiB strings, 2^26 array elements. */
void gm_modelfile_limits_default(struct gm_modelfile_limits *lim);

/* Prepare an empty summary; allocates nothing. */
void gm_modelfile_init(struct gm_modelfile *m);

/* Free what a load allocated; 'm' may be reused after gm_modelfile_init().  NULL is fine. */
void gm_modelfile_release(struct gm_modelfile *m);

/* Summarise the weights at 'path': a .safetensors file, a model.safetensors.index.json, a
 * .gguf file, or a folder holding an index, shards or one GGUF file.  'lim' may be NULL
 * (defaults).  On success 'out' (initialised by the caller) holds the summary; on failure
 * it is left released.  Errors: GM_ERR_NOENT (missing file or shard), GM_ERR_IO,
 * GM_ERR_FORMAT (malformed header, with the byte offset), GM_ERR_LIMIT, GM_ERR_UNSUPPORTED
 * (an unknown dtype or GGUF version), GM_ERR_NOMEM. */
enum gm_status gm_modelfile_load(const char *path, const struct gm_modelfile_limits *lim,
                                 struct gm_modelfile *out, struct gm_error *err);

/* Whether 'path' looks like weights that gm_modelfile_load() reads (by its name, or a folder
 * holding *.safetensors / *.gguf).  Reads no file content. */
bool gm_modelfile_is_weights(const char *path);

/* Parse one safetensors file from memory: 'data' holds its first 'len' bytes (at least the
 * 8-byte length and the header), 'file_size' is the size of the whole file.  The tensors
 * are added to 'm' (several shards accumulate); call gm_modelfile_finish() at the end. */
enum gm_status gm_safetensors_parse(const void *data, size_t len, uint64_t file_size,
                                    const struct gm_modelfile_limits *lim, struct gm_modelfile *m,
                                    struct gm_error *err);

/* Parse one GGUF file from memory, as above.  GM_ERR_FORMAT "truncated" when 'len' ends
 * inside the header: gm_modelfile_load() then retries with a longer prefix. */
enum gm_status gm_gguf_parse(const void *data, size_t len, uint64_t file_size,
                             const struct gm_modelfile_limits *lim, struct gm_modelfile *m,
                             struct gm_error *err);

/* Compute the derived fields (largest module) once every file is parsed. */
enum gm_status gm_modelfile_finish(struct gm_modelfile *m, struct gm_error *err);

/* Bytes of 'n_elements' elements of ggml type 'type' (block size and type size of ggml's
 * type table); false for an unknown or removed type, or when n_elements is not a whole
 * number of blocks.  'name' (may be NULL) receives the type's name, static storage. */
bool gm_ggml_type_bytes(uint32_t type, uint64_t n_elements, uint64_t *bytes, const char **name);

/* Fill a struct gm_model from a loaded summary.  GGUF: from the architecture keys of its
 * metadata and the tensor names (tied output, gated MLP, q/k/v biases).  safetensors: from
 * the config.json beside the weights (GM_ERR_NOENT with a hint when there is none).  Either
 * way n_params_file and weight_bytes_file carry the exact figures of the file, and dtype
 * its dominant stored type when it is a plain float type. */
enum gm_status gm_modelfile_to_model(const struct gm_modelfile *mf, struct gm_model *out,
                                     struct gm_error *err);

/* The dtype holding the most bytes (index into mf->dtypes), or -1 when there are none. */
int gm_modelfile_dominant_dtype(const struct gm_modelfile *mf);

/* Whether a tensor with this exact name exists. */
bool gm_modelfile_has_tensor(const struct gm_modelfile *mf, const char *name);

/* The tensor with this exact name, or NULL. */
const struct gm_modelfile_tensor *gm_modelfile_find_tensor(const struct gm_modelfile *mf,
                                                           const char *name);

/* Bits per element of a safetensors dtype name ("BF16" -> 16, "F4" -> 4); 0 if unknown. */
unsigned gm_safetensors_dtype_bits(const char *name);

#ifdef __cplusplus
}
#endif
#endif
