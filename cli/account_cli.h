/* SPDX-License-Identifier: MIT */
/* account_cli.h - what `gpumem account` and `gpumem watch --account` share: running a
 * command under the interposer (its folder of files, its environment), reading the files
 * back, and the report: one equation per process and device, with every term's source. */
#ifndef GM_CLI_ACCOUNT_CLI_H
#define GM_CLI_ACCOUNT_CLI_H

#include "gpumem/account.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

struct account_cli {
    char dir[PATH_MAX]; /* where each process writes its file */
    bool temporary;     /* made here: removed at the end unless kept */
    bool keep;
    char **env; /* the command's environment (gm_free()) */
};

/* Find the interposer and make the folder ('dir', or a new temporary one) and the
 * environment.  0, or the exit code after saying why (70: the interposer is missing). */
int account_cli_begin(const char *cmd, struct account_cli *ac, const char *dir, bool keep,
                      uint64_t interval_ms, uint64_t stacks);

/* Read the files of the run into *out (gm_account_free()).  0; 1 with a word on 'cmd' when
 * no process of the command left a file; or the exit code of a bad file. */
int account_cli_read(const char *cmd, struct account_cli *ac, struct gm_account **out);

/* Write the files of the run merged into 'output' (a JSON-lines timeline).  0 or an exit
 * code. */
int account_cli_merge(const char *cmd, struct account_cli *ac, const char *output, bool force);

/* Remove a temporary folder (unless kept), saying where kept files are; free the env. */
void account_cli_end(const char *cmd, struct account_cli *ac);

/* The report: per process and device, the equation at the peak and at the end, its terms
 * with their sources, what lies beside it (managed, reserved address space, pinned host
 * memory), and (with 'stacks') the largest allocations with their native stacks. */
void account_report(FILE *f, const struct gm_account *a, bool stacks);

#endif
