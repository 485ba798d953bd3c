/* SPDX-License-Identifier: MIT */
/* analysis_common.h - what the snapshot analysis commands (categories, leaks, diff, oom)
 * share: loading and analysing a file, printing stacks and byte figures, JSON frames. */
#ifndef GM_CLI_ANALYSIS_COMMON_H
#define GM_CLI_ANALYSIS_COMMON_H

#include "gpumem/analysis.h"
#include "gpumem/snapshot.h"

#include <stdint.h>
#include <stdio.h>

#include "snapshot_cli.h"

/* Load and analyse the n files paths[] (in parallel: snapcli_load_many()) into snaps[i] and
 * ans[i]; on failure prints the error of the first failing file and returns its exit code
 * (0 on success).  'o' may be NULL.  Release with ana_cli_close_many(). */
int ana_cli_open_many(const char *cmd, char *const *paths, size_t n,
                      const struct snapcli_load_opts *o, struct gm_snapshot **snaps,
                      struct gm_analysis **ans);
void ana_cli_close_many(struct gm_snapshot **snaps, struct gm_analysis **ans, size_t n);

/* ana_cli_open_many() for a command that shows no series (gm_analysis_run_figures()). */
int ana_cli_open_figures(const char *cmd, char *const *paths, size_t n,
                         const struct snapcli_load_opts *o, struct gm_snapshot **snaps,
                         struct gm_analysis **ans);

/* ana_cli_open_many() of the two files of a diff, each analysed only for the comparison
 * (gm_analysis_diff_prepare()). */
int ana_cli_open_diff(const char *cmd, char *const *paths, const struct snapcli_load_opts *o,
                      struct gm_snapshot **snaps, struct gm_analysis **ans);

/* ana_cli_open_many() of one file; release with ana_cli_close(). */
int ana_cli_open(const char *cmd, char *path, const struct snapcli_load_opts *o,
                 struct gm_snapshot **snap, struct gm_analysis **an);
void ana_cli_close(struct gm_snapshot *snap, struct gm_analysis *an);

/* How a command that shows one analysed file at a time prints it as text. */
typedef void (*ana_cli_text_fn)(const void *ctx, const struct gm_analysis *an);

/* Load and analyse 'path' as 'lo' says (without the series when 'figures':
 * gm_analysis_run_figures()), then write the document 'doc' of it (its kind and options;
 * the file is filled in) when 'json', else print it with 'text'.  0, or an exit code after
 * printing the error. */
int ana_cli_show(const char *cmd, char *path, const struct snapcli_load_opts *lo, bool figures,
                 bool json, const struct gm_analysis_doc *doc, ana_cli_text_fn text,
                 const void *ctx);

/* The device of 'an' a command about one device shows: 'want' (NULL when the file has no
 * such device), or with 'want' -1 the first with trace events (NULL when none has). */
const struct gm_analysis_device *ana_cli_device(const struct gm_analysis *an, int32_t want);

/* "40.74 MiB (42715148 B)" into buf (>= 64 bytes). */
const char *ana_cli_bytes(char *buf, size_t n, uint64_t bytes);
/* "40.74 MiB" (IEC units only). */
const char *ana_cli_short(char *buf, size_t n, uint64_t bytes);
/* "+1.50 MiB" / "-512 B" for b - a. */
const char *ana_cli_delta(char *buf, size_t n, uint64_t a, uint64_t b);

#endif
