/* SPDX-License-Identifier: MIT */
/* prom.c - the Prometheus text exposition format, written (prom.h). */
#include "base/prom.h"

static void put_value(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        if (*s == '\\' || *s == '"')
            fputc('\\', f);
        if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

void gm_prom_label(FILE *f, bool *first, const char *key, const char *value)
{
    if (!value)
        return;
    fputs(*first ? "{" : ",", f);
    *first = false;
    fputs(key, f);
    fputc('=', f);
    put_value(f, value);
}

void gm_prom_end_labels(FILE *f, bool first)
{
    if (!first)
        fputc('}', f);
}

void gm_prom_family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void gm_prom_job_labels(FILE *f, bool *first, const char *hostname, const char *job,
                        const char *rank)
{
    gm_prom_label(f, first, "Hostname", hostname);
    gm_prom_label(f, first, "job_id", job);
    gm_prom_label(f, first, "rank", rank);
}
