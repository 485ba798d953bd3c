/* SPDX-License-Identifier: MIT */
/* snapshot_cli.h - what the `gpumem snapshot` sub-commands share: loading with progress
 * and error reporting, frame and time formatting. */
#ifndef GM_CLI_SNAPSHOT_CLI_H
#define GM_CLI_SNAPSHOT_CLI_H

#include "gpumem/json.h"
#include "gpumem/snapshot.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Load 'path' (progress on stderr when it is a terminal and the file is large).  Returns 0
 * with *out set, or the exit code after printing the error. */
int snapcli_load(const char *cmd, const char *path, struct gm_snapshot **out);

/* 's' with control characters (terminal escapes from a hostile file) replaced by '?',
 * truncated to fit 'buf'; returns buf. */
char *snapcli_safe(char *buf, size_t n, const char *s);

/* "name (file:line)" of a frame into buf, control characters replaced; returns buf. */
char *snapcli_frame(char *buf, size_t n, const struct gm_snapshot_frame *f);

/* "2024-02-18 12:34:56.123456 UTC" into buf; returns buf. */
char *snapcli_time(char *buf, size_t n, int64_t time_us);

/* A stack as a JSON array of {filename, line, name}, noise frames left out unless 'all'. */
void snapcli_json_stack(struct gm_json *w, const struct gm_snapshot *snap, uint32_t stack, int all);

/* Print a stack folded: the user frame first, then up to 'callers' non-noise callers, and
 * a count of the folded frames.  'indent' spaces before each line after the first. */
void snapcli_print_stack(FILE *f, const struct gm_snapshot *snap, uint32_t stack, int callers,
                         int indent);

/* Parse a device option value ("all" or a number) into *dev (-1 = all); 0 or exit code. */
int snapcli_device_arg(const char *cmd, const char *s, int32_t *dev);

#endif
