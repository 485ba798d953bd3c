/* SPDX-License-Identifier: MIT */
/* prom.h - the Prometheus text exposition format (version 0.0.4), written: the one writer
 * of every metrics family (the watch's, the account's).
 *
 * Layout: for each family "# HELP name text", "# TYPE name gauge|counter", then its samples
 * "name{label="value",...} number"; label values escape \\, " and newline. */
#ifndef GM_BASE_PROM_H
#define GM_BASE_PROM_H

#include <stdbool.h>
#include <stdio.h>

/* The HELP and TYPE lines of family 'name'. */
void gm_prom_family(FILE *f, const char *name, const char *type, const char *help);

/* One label of a sample: '{' before the first (*first true, then false), ',' before the
 * others.  A NULL value leaves the label out. */
void gm_prom_label(FILE *f, bool *first, const char *key, const char *value);

/* The '}' after a sample's labels, when it has any ('first' still true: none). */
void gm_prom_end_labels(FILE *f, bool first);

/* The labels of the job every series carries, as DCGM exporter names the host: Hostname,
 * job_id, rank (each NULL: left out). */
void gm_prom_job_labels(FILE *f, bool *first, const char *hostname, const char *job,
                        const char *rank);

#endif
