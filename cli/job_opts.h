/* SPDX-License-Identifier: MIT */
/* job_opts.h - the estimator's job settings (gm_job_settings()) as command-line options,
 * for every command that describes a job (estimate, calibrate): one option per setting,
 * then the collected values handed to the job in table order. */
#ifndef GM_CLI_JOB_OPTS_H
#define GM_CLI_JOB_OPTS_H

#include "opts.h"

#include "gpumem/estimate.h"

#include <stdbool.h>
#include <stddef.h>

/* What the option parser collected for each job setting. */
struct job_opts {
    const char *text[GM_JOB_MAX_SETTINGS];
    bool flag[GM_JOB_MAX_SETTINGS];
    int choice[GM_JOB_MAX_SETTINGS];
    bool seen[GM_JOB_MAX_SETTINGS];
};

/* Room a command's option table needs for the job settings. */
#define JOB_OPTS_MAX GM_JOB_MAX_SETTINGS

/* Append one option per job setting to 'opts' from opts[*n] on (room for JOB_OPTS_MAX),
 * collecting into 'c' (zeroed here). */
void job_opts_add(struct opt *opts, size_t *n, struct job_opts *c);

/* Hand every setting given to 'job', in table order, then check the job as a whole
 * (gm_job_check()).  0, or 64 after printing the library's message (a bad value as it
 * is, a bad combination with the pointer to --help). */
int job_opts_fill(const char *cmd, const struct job_opts *c, struct gm_job *job);

#endif
