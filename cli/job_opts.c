/* SPDX-License-Identifier: MIT */
/* job_opts.c - job settings as command-line options (job_opts.h). */
#include "job_opts.h"

#include "cli.h"

#include <string.h>

void job_opts_add(struct opt *opts, size_t *n, struct job_opts *c)
{
    size_t n_set;
    const struct gm_job_setting *s = gm_job_settings(&n_set);
    memset(c, 0, sizeof(*c));
    for (size_t i = 0; i < n_set; i++) {
        struct opt o = {s[i].name,    0,         OPT_T_STRING, &c->text[i],
                        s[i].argname, s[i].help, NULL,         &c->seen[i]};
        if (s[i].type == GM_JOB_FLAG) {
            o.type = OPT_T_FLAG;
            o.dest = &c->flag[i];
        } else if (s[i].type == GM_JOB_CHOICE) {
            o.type = OPT_T_CHOICE;
            o.dest = &c->choice[i];
            o.choices = s[i].choices;
        }
        opts[(*n)++] = o;
    }
}

int job_opts_fill(const char *cmd, const struct job_opts *c, struct gm_job *job)
{
    size_t n_set;
    const struct gm_job_setting *s = gm_job_settings(&n_set);
    struct gm_error err;
    for (size_t i = 0; i < n_set; i++) {
        const char *value = c->text[i];
        if (!c->seen[i])
            continue;
        if (s[i].type == GM_JOB_FLAG)
            value = NULL;
        else if (s[i].type == GM_JOB_CHOICE)
            value = s[i].choices[c->choice[i]];
        if (gm_job_set(job, s[i].name, value, &err) != GM_OK) {
            char tail[80];
            cli_errorf(cmd, "%s%s", err.msg, cli_setting_tail(tail, sizeof(tail), &err));
            return GM_EXIT_USAGE;
        }
    }
    if (gm_job_check(job, &err) != GM_OK) {
        char tail[80];
        return cli_usage(cmd, "%s%s", err.msg, cli_setting_tail(tail, sizeof(tail), &err));
    }
    return 0;
}
