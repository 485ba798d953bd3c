/* SPDX-License-Identifier: MIT */
/* watch_render.h - the end-of-run report of gpumem watch (text and chart). */
#ifndef GM_CLI_WATCH_RENDER_H
#define GM_CLI_WATCH_RENDER_H

#include "gpumem/watch.h"

#include <stdbool.h>
#include <stdio.h>

/* 'c' for a .csv path, 'j' for .json, 0 otherwise. */
char watch_output_kind(const char *path);

/* Peaks per device and per process with their times and where they come from, the
 * attribution method, samples not stored, processes still running after the command,
 * (with 'chart') a chart of the command's memory over time, and the file the samples were
 * written to ('written', NULL for none). */
void watch_report(FILE *f, const struct gm_watch *w, const struct gm_watch_run *run, bool chart,
                  const char *written);

/* Draw values v[0..n) (bytes, already one per column) as a chart 'height' rows high. */
void watch_chart(FILE *f, const uint64_t *v, size_t n, int height, uint64_t t_end_ms);

#endif
