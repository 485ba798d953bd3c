/* SPDX-License-Identifier: MIT */
/* job_settings.h - a job from settings typed as on the command line ("--train --batch 2"),
 * through gm_job_set(), for the estimator tests (test-only, header-only; include after
 * cmocka.h and gpumem/gpumem.h). */
#ifndef GM_TEST_JOB_SETTINGS_H
#define GM_TEST_JOB_SETTINGS_H

#include <stdio.h>
#include <string.h>

/* Apply every "--name [value]" of 'settings' to 'j'; an unknown or refused one fails the test. */
static void job_set_all(struct gm_job *j, const char *settings)
{
    char buf[512], *save = NULL;
    snprintf(buf, sizeof buf, "%s", settings);
    for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        struct gm_error err;
        const struct gm_job_setting *s = gm_job_setting_find(tok + 2);
        const char *value = NULL;
        if (!s)
            fail_msg("unknown setting %s", tok);
        if (s->type != GM_JOB_FLAG)
            value = strtok_r(NULL, " ", &save);
        if (gm_job_set(j, tok + 2, value, &err) != GM_OK)
            fail_msg("%s %s: %s", tok, value ? value : "", err.msg);
    }
}

/* A fresh job on the catalog model 'model' with 'settings' applied. */
static void job_make(const char *model, const char *settings, struct gm_job *j)
{
    gm_job_init(j);
    j->model.model = gm_model_catalog_find(model);
    assert_non_null(j->model.model);
    job_set_all(j, settings);
}

#endif
