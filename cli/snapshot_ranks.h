/* SPDX-License-Identifier: MIT */
/* snapshot_ranks.h - several snapshot files as the ranks of one job (gm_analysis_ranks()):
 * the per-rank rows, the spread over the ranks and the imbalance as text (their JSON is the
 * library's, gm_analysis_json()), for `stats`, `peak` and `categories` with several files. */
#ifndef GM_CLI_SNAPSHOT_RANKS_H
#define GM_CLI_SNAPSHOT_RANKS_H

#include "gpumem/analysis.h"

#include <stddef.h>
#include <stdio.h>

/* The ranks of files paths[] as collected file by file (gm_analysis_rank()): one at most
 * per file. */
struct rank_list {
    struct gm_rank *v; /* room for every file, from the first rank on */
    size_t n;
};

/* Add the rank of file 'file' ('path') of 'n_files' once analysed (nothing when it has no
 * device).  0, or an exit code after printing the error. */
int ranks_add(struct rank_list *l, const char *cmd, const struct gm_analysis *an, size_t file,
              const char *path, size_t n_files);

/* The same for a rank read from its digest 'd' (file 'path'). */
int ranks_add_digest(struct rank_list *l, const char *cmd, const struct gm_digest *d, size_t file,
                     const char *path, size_t n_files);

/* What a digest holds, in a few lines, where a command shows a snapshot's own figures. */
void ranks_print_digest(FILE *f, const char *path, const struct gm_digest *d);

/* The rows, the spread and the imbalance (two ranks or more) as text. */
void ranks_print(FILE *f, const struct rank_list *l, char *const *paths);

void ranks_release(struct rank_list *l);

#endif
