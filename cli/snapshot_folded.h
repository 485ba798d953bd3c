/* SPDX-License-Identifier: MIT */
/* snapshot_folded.h - what is alive at a moment as folded stacks (`snapshot peak --folded`):
 * one line per stack, "cuda:0;outermost frame;...;innermost frame BYTES", which
 * flamegraph.pl and speedscope read. */
#ifndef GM_CLI_SNAPSHOT_FOLDED_H
#define GM_CLI_SNAPSHOT_FOLDED_H

#include "gpumem/snapshot.h"

#include <stddef.h>
#include <stdio.h>

/* One line per group of device 'device' (groups by stack, as gm_snapshot_group_live()
 * makes them): the device, then the stack's frames worth listing (gm_snapshot_stack_frames())
 * outermost first, each named "function (file:line)" with the path shortened (a C++ frame by
 * its name), then the bytes.  ';' inside a name becomes ',' and control characters are
 * escaped, so that a line always has the shape the readers expect. */
void folded_write(FILE *f, const struct gm_snapshot *snap, int32_t device,
                  const struct gm_snapshot_live_group *g, size_t n);

#endif
