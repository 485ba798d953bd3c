/* SPDX-License-Identifier: MIT */
/* watch_render.c - the end-of-run report of gpumem watch.  Reads the record, computes
 * nothing but the chart's columns. */
#include "watch_render.h"

#include "gpumem/text.h"
#include "gpumem/units.h"

#include <inttypes.h>
#include <string.h>

#define CHART_COLS 60

char watch_output_kind(const char *path)
{
    size_t n = strlen(path);
    if (n > 4 && !strcmp(path + n - 4, ".csv"))
        return 'c';
    if (n > 5 && !strcmp(path + n - 5, ".json"))
        return 'j';
    return 0;
}

static const char *secs(char *out, size_t n, uint64_t ms)
{
    snprintf(out, n, "%" PRIu64 ".%02u s", ms / 1000, (unsigned)(ms % 1000) / 10);
    return out;
}

static const char *bytes(char *out, size_t n, struct gm_reading r)
{
    if (!r.valid)
        return "unknown";
    return gm_format_bytes(out, n, r.value, GM_UNITS_IEC);
}

void watch_chart(FILE *f, const uint64_t *v, size_t n, int height, uint64_t t_end_ms)
{
    uint64_t top = 0;
    char label[32], t[32];
    for (size_t k = 0; k < n; k++)
        if (v[k] > top)
            top = v[k];
    if (!top) {
        fprintf(f, "  (nothing to chart: 0 B throughout)\n");
        return;
    }
    gm_format_bytes(label, sizeof(label), top, GM_UNITS_IEC);
    for (int row = height; row >= 1; row--) {
        char line[256];
        size_t len = 0;
        for (size_t k = 0; k < n && k < sizeof(line) - 1; k++) {
            /* A column reaches 'row' when its value is at least row/height of the top
             * (rounded, so that any non-zero value shows at least one mark). */
            uint64_t need = gm_mul_div_u64(top, (uint64_t)row * 2 - 1, (uint64_t)height * 2);
            line[k] = v[k] >= need && v[k] > 0 ? '#' : ' ';
            if (line[k] == '#')
                len = k + 1;
        }
        line[len] = '\0';
        fprintf(f, "  %10s |%s\n", row == height ? label : "", line);
    }
    fprintf(f, "  %10s +", "0 B");
    for (size_t k = 0; k < n; k++)
        fputc('-', f);
    fprintf(f, "\n  %10s  0 s%*s\n", "", (int)(n > 4 ? n - 4 : 0) + 1,
            secs(t, sizeof(t), t_end_ms));
}

/* One column per time slice: the highest value whose sample falls in it; empty slices
 * repeat the previous column (the memory did not go away between two readings). */
static void columns(const struct gm_watch *w, bool by_process, uint32_t device, uint64_t *col)
{
    uint64_t span = w->end_t_ms ? w->end_t_ms : 1;
    bool have[CHART_COLS];
    memset(have, 0, sizeof(have));
    memset(col, 0, sizeof(uint64_t) * CHART_COLS);
    for (size_t k = 0; k < w->n_samples;) {
        const struct gm_watch_sample *s = &w->samples[k];
        uint64_t t = s->t_ms, sum = 0;
        size_t c;
        bool any = false;
        /* Process rows of one reading share t_ms: sum them across processes and devices. */
        for (; k < w->n_samples && w->samples[k].t_ms == t; k++) {
            const struct gm_watch_sample *q = &w->samples[k];
            if (!q->used.valid)
                continue;
            if (by_process && q->pid) {
                sum += q->used.value;
                any = true;
            } else if (!by_process && !q->pid && q->device == device) {
                sum = q->used.value;
                any = true;
            }
        }
        if (!any)
            continue;
        c = (size_t)gm_mul_div_u64(t, CHART_COLS - 1, span);
        if (c >= CHART_COLS)
            c = CHART_COLS - 1;
        if (!have[c] || sum > col[c])
            col[c] = sum;
        have[c] = true;
    }
    for (size_t c = 1; c < CHART_COLS; c++)
        if (!have[c])
            col[c] = col[c - 1];
}

/* "exited with status 3", "was killed by SIGSEGV (status 139)" */
static void outcome(FILE *f, const struct gm_watch_run *run)
{
    const char *sig = run->term_signal ? gm_signal_name(run->term_signal) : NULL;
    if (run->term_signal && sig)
        fprintf(f, "was killed by %s (status %d)", sig, run->exit_status);
    else if (run->term_signal)
        fprintf(f, "was killed by signal %d (status %d)", run->term_signal, run->exit_status);
    else
        fprintf(f, "exited with status %d", run->exit_status);
}

void watch_report(FILE *f, const struct gm_watch *w, const struct gm_watch_run *run, bool chart,
                  const char *written)
{
    char b1[32], b2[32], b3[32], t1[32], name[4 * 96];
    uint64_t col[CHART_COLS];

    fprintf(f, "\ngpumem watch: ");
    if (!run->command) {
        fprintf(f, "pid %" PRIu32 " %s", run->pid, run->interrupted ? "(detached)" : "ended");
    } else if (run->exit_status >= 0) {
        fprintf(f, "%s (pid %" PRIu32 ") ", gm_text_escape(name, sizeof(name), run->command[0]),
                run->pid);
        outcome(f, run);
    }
    fprintf(f, "%s after %s\n", run->interrupted ? ", interrupted," : "",
            secs(t1, sizeof(t1), w->end_t_ms));
    fprintf(f,
            "  %" PRIu64 " device readings every %" PRIu64 " ms, %" PRIu64
            " process readings every %" PRIu64 " ms",
            w->n_device_reads, run->interval_ms, w->n_process_reads, run->process_interval_ms);
    if (w->n_triggered_reads)
        fprintf(f, " (%" PRIu64 " of them at once after a device-level change)",
                w->n_triggered_reads);
    fputc('\n', f);
    if (w->samples_dropped)
        fprintf(f,
                "  samples: %zu stored; %" PRIu64 " later ones, from %s on, were not stored "
                "(--max-samples %zu): the peaks below include them, the chart and --output "
                "do not\n",
                w->n_samples, w->n_samples_dropped, secs(t1, sizeof(t1), w->first_dropped_t_ms),
                w->max_samples);
    if (w->cmd_seen) {
        fprintf(f, "  attribution: %s\n",
                (w->attr_seen & (1u << GM_WATCH_ATTR_NEW_PID))
                    ? "new GPU processes whose host PIDs are not visible here (PID namespace); "
                      "anything else starting on the GPU meanwhile is counted too"
                    : "NVML PIDs of the command and its children");
        fprintf(f, "  peak of the command: %s at %s (all its processes, all devices, %s)\n",
                gm_format_bytes(b1, sizeof(b1), w->cmd_peak, GM_UNITS_IEC),
                secs(t1, sizeof(t1), w->cmd_peak_t_ms),
                w->cmd_peak_source == GM_WATCH_SOURCE_DEVICE
                    ? "from device readings while no other process used the GPU"
                    : "NVML usedGpuMemory");
    } else {
        fprintf(f, "  attribution: no process of the command appeared in NVML's process list; "
                   "device delta below (valid only when nothing else used the GPU)\n");
    }

    fprintf(f, "\n  %-8s %-12s %-9s %-12s %-12s %s\n", "device", "peak used", "at", "baseline",
            "total", "name");
    for (uint32_t k = 0; k < w->n_dev; k++) {
        const struct gm_watch_device *d = &w->dev[k];
        fprintf(f, "  %-8s %-12s %-9s %-12s %-12s %s\n", d->label, bytes(b1, sizeof(b1), d->peak),
                d->peak.valid ? secs(t1, sizeof(t1), d->peak_t_ms) : "-",
                bytes(b2, sizeof(b2), d->baseline), bytes(b3, sizeof(b3), d->total),
                gm_text_escape(name, sizeof(name), d->name));
        if (!w->cmd_seen && d->peak.valid && d->baseline.valid)
            fprintf(f, "  %-8s device delta: %s\n", "",
                    gm_format_bytes(
                        b1, sizeof(b1),
                        d->peak.value > d->baseline.value ? d->peak.value - d->baseline.value : 0,
                        GM_UNITS_IEC));
    }
    for (uint32_t k = 0; w->cmd_seen && k < w->n_dev; k++) {
        uint64_t extra = gm_watch_unexplained_bytes(w, k);
        if (!extra)
            continue;
        fprintf(f, "  note: %s rose %s more than the command's peak there (%s) explains: %s\n",
                w->dev[k].label, gm_format_bytes(b1, sizeof(b1), extra, GM_UNITS_IEC),
                bytes(b2, sizeof(b2), w->dev[k].cmd_peak),
                w->dev[k].others_seen
                    ? "other processes used the device too (their memory is not the command's)"
                    : "a peak between two process readings? (use a shorter --process-interval)");
    }
    if (w->n_proc) {
        fprintf(f, "\n  %-10s %-8s %-12s %-9s %-9s %s\n", "pid", "device", "peak", "at", "seen",
                "name");
        for (uint32_t k = 0; k < w->n_proc; k++) {
            const struct gm_watch_proc *p = &w->proc[k];
            char seen[64], t2[32];
            snprintf(seen, sizeof(seen), "%s", secs(t2, sizeof(t2), p->first_t_ms));
            fprintf(f, "  %-10" PRIu32 " %-8s %-12s %-9s %-9s %s\n", p->pid,
                    w->dev[p->device].label, gm_format_bytes(b1, sizeof(b1), p->peak, GM_UNITS_IEC),
                    secs(t1, sizeof(t1), p->peak_t_ms), seen,
                    p->name[0] ? gm_text_escape(name, sizeof(name), p->name)
                               : "(not visible here)");
        }
    }
    if (w->n_after_exit) {
        fprintf(f,
                "\n  warning: %" PRIu32 " process%s of the command still hold%s GPU memory after "
                "it exited:\n",
                w->n_after_exit, w->n_after_exit == 1 ? "" : "es", w->n_after_exit == 1 ? "s" : "");
        for (uint32_t k = 0; k < w->n_proc; k++) {
            const struct gm_watch_proc *p = &w->proc[k];
            if (p->attr != GM_WATCH_ATTR_AFTER_EXIT)
                continue;
            fprintf(f, "    pid %" PRIu32 " (%s) %s on %s\n", p->pid,
                    p->name[0] ? gm_text_escape(name, sizeof(name), p->name) : "?",
                    gm_format_bytes(b1, sizeof(b1), p->last_used, GM_UNITS_IEC),
                    w->dev[p->device].label);
        }
    }
    if (chart && w->n_samples) {
        if (w->cmd_seen && w->cmd_peak_source == GM_WATCH_SOURCE_PROCESSES) {
            fprintf(f, "\n  GPU memory of the command (NVML usedGpuMemory, all devices)\n");
            columns(w, true, 0, col);
        } else {
            /* the device readings carry the peak: draw the device where it was highest */
            uint32_t best = 0;
            for (uint32_t k = 1; k < w->n_dev; k++)
                if (w->dev[k].cmd_peak.value > w->dev[best].cmd_peak.value)
                    best = k;
            fprintf(f, "\n  %s used (NVML)\n", w->dev[best].label);
            columns(w, false, best, col);
        }
        watch_chart(f, col, CHART_COLS, 8, w->end_t_ms);
    }
    if (written)
        fprintf(f, "samples written to %s\n", gm_text_escape(name, sizeof(name), written));
}
