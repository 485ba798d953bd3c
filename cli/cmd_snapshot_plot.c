/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_plot.c - gpumem snapshot plot FILE: allocated and reserved over time as a
 * terminal chart that fits the terminal's width. */
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"

#include "gpumem/analysis.h"
#include "gpumem/report.h"
#include "gpumem/snapshot.h"

#include <stdlib.h>
#include <sys/ioctl.h>
#include <unistd.h>

static unsigned term_width(void)
{
    struct winsize ws;
    const char *cols = getenv("COLUMNS");
    if (isatty(1) == 1 && ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 40)
        return ws.ws_col;
    if (cols) {
        char *end;
        unsigned long v = strtoul(cols, &end, 10);
        if (*end == 0 && v >= 40 && v <= 1000) /* anything else falls back to 80 */
            return (unsigned)v;
    }
    return 80;
}

int cmd_snapshot_plot(int argc, char **argv)
{
    bool ascii = false, category = false, dev_seen = false;
    int color = CLI_COLOR_AUTO, device = 0, n_pos = 0, rc = 0;
    uint64_t width = 0, height = 16, mem_limit = 0;
    struct gm_snapshot *snap = NULL;
    struct gm_analysis *an = NULL;
    struct gm_plot_opts po;
    struct gm_error err;
    const struct opt opts[] = {
        OPT_INT("device", 'd', &device, "N", "device index (default: the one with most events)",
                &dev_seen),
        OPT_FLAG("category", 0, &category, "stack the allocated area by category"),
        OPT_FLAG("ascii", 0, &ascii, "plain ASCII characters only"),
        OPT_U64("width", 'w', &width, "N", "columns (default: the terminal's width, or 80)", NULL),
        OPT_U64("height", 0, &height, "N", "rows of the plot area (default 16)", NULL),
        OPT_COLOR(&color),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot plot FILE [--device N] [--category] [--ascii] [--width N]",
        "Draw allocated bytes (blocks) and reserved bytes (line) over the trace of one device, "
        "with the peak marked. The x axis is time when the trace has time_us, else the event "
        "index. Colour only on a terminal without NO_COLOR (or --color=always).",
        "gpumem snapshot plot profile.pickle\ngpumem snapshot plot profile.pickle --category"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos != 1)
        return cli_usage(argv[0], n_pos ? "give one snapshot file" : "missing snapshot FILE");
    if (width && (width < 40 || width > 1000))
        return cli_usage(argv[0], "--width: choose 40 to 1000");
    if (height < 4 || height > 200)
        return cli_usage(argv[0], "--height: choose 4 to 200");
    struct snapcli_load_opts lo = {.memory_limit = mem_limit};
    rc = snapcli_load(argv[0], argv[1], &lo, &snap);
    if (rc)
        return rc;
    if (!snap->n_devices) {
        gm_snapshot_free(snap);
        cli_errorf(argv[0], "'%s' has no device: nothing to plot", argv[1]);
        return GM_EXIT_DATAERR;
    }
    if (!dev_seen) {
        size_t best = 0;
        for (size_t i = 1; i < snap->n_devices; i++)
            if (snap->devices[i].n_events > snap->devices[best].n_events)
                best = i;
        device = snap->devices[best].index;
    }
    if (!gm_snapshot_device_by_index(snap, device)) {
        gm_snapshot_free(snap);
        return cli_usage(argv[0], "device %d is not in '%s'", device, argv[1]);
    }
    po.width = width ? (unsigned)width : term_width();
    po.height = (unsigned)height;
    if (category) {
        /* the series in the plot's columns: each column's categories at its maximum */
        struct gm_analysis_opts ao = {.max_points = 3 * gm_report_plot_columns(&po) + 2};
        if (gm_analysis_run(snap, &ao, &an, &err) != GM_OK) {
            gm_snapshot_free(snap);
            return cli_fail(argv[0], &err);
        }
    }
    po.flags = (ascii ? GM_PLOT_ASCII : 0u) | (category ? GM_PLOT_CATEGORIES : 0u) |
               (cli_use_color((enum cli_color)color, stdout) ? GM_PLOT_COLOR : 0u);
    if (gm_report_plot(stdout, snap, an, device, &po, &err) != GM_OK)
        rc = cli_fail(argv[0], &err);
    else if (fflush(stdout) != 0)
        rc = GM_EXIT_IOERR;
    gm_analysis_free(an);
    gm_snapshot_free(snap);
    return rc;
}
