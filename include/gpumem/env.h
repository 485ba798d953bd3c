/* SPDX-License-Identifier: MIT */
/* env.h - how the library reads environment variables: never by itself.
 *
 * A function that needs a variable (a driver library's path override, CUDA_VISIBLE_DEVICES,
 * the Hugging Face cache, the allocator settings to report) takes a gm_env_fn from its
 * caller: the CLI and the Python module pass getenv, a test passes its own table.  NULL is
 * an empty environment. */
#ifndef GPUMEM_ENV_H
#define GPUMEM_ENV_H

#ifdef __cplusplus
extern "C" {
#endif

/* An environment lookup with getenv's contract: the value, or NULL when 'name' is unset. */
typedef char *(*gm_env_fn)(const char *name);

#ifdef __cplusplus
}
#endif

#endif
