/* SPDX-License-Identifier: MIT */
/* modelfile_int.h - helpers shared by the safetensors and GGUF header readers
 * (library-internal). */
#ifndef GM_MODEL_MODELFILE_INT_H
#define GM_MODEL_MODELFILE_INT_H

#include "gpumem/modelfile.h"
#include "gpumem/units.h"

/* Index of the dtype named 'name' in m->dtypes, adding it when new; GM_ERR_LIMIT when the
 * table is full. */
enum gm_status gm_modelfile_dtype_index(struct gm_modelfile *m, const char *name, uint32_t *idx,
                                        struct gm_error *err);

/* Append one tensor (the name is copied, 'len' bytes) and add it to the totals. */
enum gm_status gm_modelfile_add_tensor(struct gm_modelfile *m,
                                       const struct gm_modelfile_limits *lim, const char *name,
                                       size_t len, uint32_t dtype, uint32_t n_dims,
                                       const uint64_t *shape, uint64_t n_elements, uint64_t n_bytes,
                                       uint64_t offset, struct gm_error *err);

/* gm_gguf_parse() on a prefix of the file: when the header runs past 'len' but not past
 * the file, fails with *need_more set so that the caller can read a longer prefix. */
enum gm_status gm_gguf_parse_prefix(const void *data, size_t len, uint64_t file_size,
                                    const struct gm_modelfile_limits *lim, struct gm_modelfile *m,
                                    bool *need_more, struct gm_error *err);

#endif
