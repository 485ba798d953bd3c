/* SPDX-License-Identifier: MIT */
/* version.h - the library version. */
#ifndef GPUMEM_VERSION_H
#define GPUMEM_VERSION_H

#define GM_VERSION_MAJOR  0
#define GM_VERSION_MINOR  1
#define GM_VERSION_PATCH  0
#define GM_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the public API (gpumem.h) */

/* The version string of the library linked at run time; static storage. */
const char *gm_version(void);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif
#endif
