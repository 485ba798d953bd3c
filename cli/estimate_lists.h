/* SPDX-License-Identifier: MIT */
/* estimate_lists.h - the catalogs `gpumem estimate` lists (--list-models, --list-archs,
 * --list-gpus), as text or as JSON documents; each returns the command's exit code. */
#ifndef GM_CLI_ESTIMATE_LISTS_H
#define GM_CLI_ESTIMATE_LISTS_H

#include <stdbool.h>

/* The built-in models whose name or Hub id holds 'filter' (any case; NULL: all).  1 when
 * the filter matches none (with the name it is likely a slip for on stderr). */
int est_list_models(const char *filter, bool json);
int est_list_archs(bool json);
int est_list_gpus(bool json);

#endif
