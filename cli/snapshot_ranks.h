/* SPDX-License-Identifier: MIT */
/* snapshot_ranks.h - `gpumem snapshot stats rank*.pickle`: one row per file (rank) and device
 * with the peak, reserved and allocated bytes, and the spread over the files. */
#ifndef GM_CLI_SNAPSHOT_RANKS_H
#define GM_CLI_SNAPSHOT_RANKS_H

#include "gpumem/json.h"
#include "gpumem/snapshot.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct rank_row {
    const char *file; /* borrowed (argv) */
    int32_t device;
    uint64_t peak;          /* timeline peak (requested bytes) */
    uint64_t peak_reserved; /* max reserved over the trace */
    uint64_t reserved;      /* at snapshot time */
    uint64_t allocated;     /* at snapshot time */
};

struct rank_table {
    struct rank_row *rows;
    size_t n, cap;
};

/* Add the rows of one loaded file (devices with segments or events).  0, or an exit code
 * after printing the error. */
int ranks_add(struct rank_table *t, const char *cmd, const char *file,
              const struct gm_snapshot *snap, const struct gm_snapshot_stats *st);
/* The table and, per device index present in two or more files, the spread. */
void ranks_print(const struct rank_table *t, FILE *f);
/* "ranks": [{file, device, peak_bytes, ...}], "spread": [{device, peak_bytes: {min, max,
 * spread, max_file, min_file}, ...}] as keys of the current object. */
void ranks_json(const struct rank_table *t, struct gm_json *w);
void ranks_release(struct rank_table *t);

#endif
