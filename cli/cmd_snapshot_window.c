/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_window.c - gpumem snapshot window FILE --from A --to B | --at-alloc ADDR[#N]:
 * the peak inside a window of the trace (by event or by time) and what is alive there, or
 * the memory and the live stacks when one named allocation was made. */
#include "analysis_common.h"
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include "gpumem/arena.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct window_job {
    const char *cmd;
    bool json, has_window, has_alloc;
    int32_t device;
    uint64_t top, mem_limit;
    struct gm_analysis_window win;
    uint64_t addr;
    uint32_t nth;
};

/* A window bound: an event index ("120"), or a time since the trace's first event with its
 * unit ("1.5s", "250ms", "800us").  *by_time says which; 0 or -1 when it is neither. */
static int parse_bound(const char *s, int64_t *v, bool *by_time)
{
    char *end;
    errno = 0;
    if (!s || !*s)
        return -1;
    double d = strtod(s, &end);
    if (errno || end == s || !isfinite(d) || d < 0)
        return -1;
    double scale = 0;
    if (!*end) {
        if (strspn(s, "0123456789") != strlen(s))
            return -1; /* an event is a whole number */
        *by_time = false;
        *v = (int64_t)d;
        return d < 9e15 ? 0 : -1;
    }
    if (!strcmp(end, "s"))
        scale = 1e6;
    else if (!strcmp(end, "ms"))
        scale = 1e3;
    else if (!strcmp(end, "us"))
        scale = 1;
    else
        return -1;
    if (d * scale >= 9e15)
        return -1;
    *by_time = true;
    *v = (int64_t)llround(d * scale);
    return 0;
}

/* "0x7f3a00000000" or "0x7f3a00000000#2" (the second allocation made at that address). */
static int parse_alloc(const char *s, uint64_t *addr, uint32_t *nth)
{
    char *end;
    errno = 0;
    *addr = strtoull(s, &end, 0);
    if (errno || end == s)
        return -1;
    *nth = 1;
    if (*end == '#') {
        char *e2;
        unsigned long n = strtoul(end + 1, &e2, 10);
        if (e2 == end + 1 || *e2 || n < 1 || n > UINT32_MAX)
            return -1;
        *nth = (uint32_t)n;
        return 0;
    }
    return *end ? -1 : 0;
}

static void print_live(const struct gm_snapshot *snap, const struct gm_snapshot_live_group *g,
                       size_t n, uint64_t top)
{
    char b1[64];
    for (size_t i = 0; i < n && (!top || i < top); i++) {
        printf("    %12s %6" PRIu64 "x  ", ana_cli_short(b1, sizeof(b1), g[i].bytes), g[i].count);
        snapcli_print_stack(stdout, snap, g[i].stack, 2, -1, 26);
    }
    if (top && n > top)
        printf("    ... %zu more stacks (--top 0: all)\n", n - (size_t)top);
}

static int window_device(const struct window_job *j, const char *path, const struct gm_analysis *an,
                         const struct gm_analysis_device *dev)
{
    struct gm_analysis_region r;
    struct gm_snapshot_live_group *live = NULL;
    size_t n_live = 0, ai = 0;
    const struct gm_analysis_alloc *a = NULL;
    struct gm_error err;
    int64_t event;
    uint64_t allocated = 0;
    char b1[64], b2[64], b3[64], t1[64];

    if (j->has_window) {
        if (gm_analysis_window_region(an, dev, &j->win, &r, &err) != GM_OK)
            return cli_usage(j->cmd, "%s", err.msg);
        event = r.peak_event;
    } else {
        if (gm_analysis_alloc_at_address(dev, j->addr, j->nth, &ai, &err) != GM_OK)
            return cli_usage(j->cmd, "%s", err.msg);
        a = &dev->allocs[ai];
        event = a->alloc_event;
    }
    if (gm_analysis_group_live_at(an, dev, event, &live, &n_live, &err) != GM_OK)
        return cli_fail(j->cmd, &err);
    for (size_t i = 0; i < n_live; i++)
        allocated += live[i].bytes;
    if (j->json) {
        int rc = cli_json_status(
            j->cmd,
            gm_analysis_window_json(stdout, path, an, dev, j->has_window ? &r : NULL, a, j->nth,
                                    event, allocated, live, n_live, (size_t)j->top, &err),
            &err);
        gm_free(live);
        return rc;
    }
    printf("device %d: ", (int)dev->device);
    if (j->has_window) {
        if (r.first_event > r.last_event)
            printf("no event in the window");
        else
            printf("events %" PRId64 " to %" PRId64, r.first_event, r.last_event);
        if (r.has_time)
            printf(" (%s, %.3f s long)", snapcli_time(t1, sizeof(t1), r.start_us),
                   (double)(r.end_us - r.start_us) / 1e6);
        printf("\n  at its start %s, at its end %s\n", ana_cli_short(b1, sizeof(b1), r.start_bytes),
               ana_cli_short(b2, sizeof(b2), r.end_bytes));
        printf("  peak inside %s ", ana_cli_bytes(b3, sizeof(b3), r.peak_bytes));
        if (event < r.first_event)
            printf("at its start");
        else
            printf("after event %" PRId64, event);
        printf(" (the device's peak: %s%s)\n", ana_cli_short(b1, sizeof(b1), dev->peak_bytes),
               r.peak_bytes == dev->peak_bytes ? ", this one" : "");
    } else {
        printf("allocation #%u of 0x%" PRIx64 ": %s (%s), ", j->nth, a->addr,
               ana_cli_bytes(b1, sizeof(b1), a->bytes),
               gm_category_name((enum gm_category)a->category));
        if (a->alloc_event < 0)
            printf("alive from before the trace");
        else
            printf("made by event %d", (int)a->alloc_event);
        if (a->free_event < 0)
            printf(", never freed\n");
        else
            printf(", freed by event %d\n", (int)a->free_event);
        printf("  its stack: ");
        snapcli_print_stack(stdout, an->snap, a->stack, 2, -1, 13);
        printf("  allocated %s then\n", ana_cli_bytes(b2, sizeof(b2), allocated));
    }
    printf("  alive then, by stack (largest first):\n");
    print_live(an->snap, live, n_live, j->top);
    gm_free(live);
    return 0;
}

static int window_one(void *ctx, char *path)
{
    const struct window_job *j = ctx;
    struct snapcli_load_opts lo = {.memory_limit = j->mem_limit};
    struct gm_snapshot *snap;
    struct gm_analysis *an;
    const struct gm_analysis_device *dev = NULL;
    int rc = ana_cli_open(j->cmd, path, &lo, &snap, &an);
    if (rc)
        return rc;
    dev = ana_cli_device(an, j->device);
    if (!dev && j->device >= 0)
        rc = cli_usage(j->cmd, "%s has no device %d", snapcli_name(path), (int)j->device);
    else if (!dev)
        rc = cli_usage(j->cmd, "%s has no trace events", snapcli_name(path));
    if (rc == 0)
        rc = window_device(j, path, an, dev);
    ana_cli_close(snap, an);
    return rc;
}

int cmd_snapshot_window(int argc, char **argv)
{
    bool json = false;
    uint64_t top = 10, mem_limit = 0;
    int device = -1, n_pos = 0;
    const char *from = NULL, *to = NULL, *at_alloc = NULL;
    const struct opt opts[] = {
        OPT_STRING("from", 0, &from, "WHEN",
                   "the window's first event: an event index, or a time since the trace's "
                   "first event (1.5s, 250ms, 800us)"),
        OPT_STRING("to", 0, &to, "WHEN", "the window's last event, as --from (inclusive)"),
        OPT_STRING("at-alloc", 0, &at_alloc, "ADDR[#N]",
                   "the moment allocation N (default 1: the first) of address ADDR was made"),
        OPT_INT("device", 'd', &device, "N", "this CUDA device (default: the first with a trace)",
                NULL),
        OPT_U64("top", 'n', &top, "N", "stacks to show (10; 0: all)", NULL),
        OPT_JSON(&json, "gpumem.snapshot.window/1"),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot window --from WHEN --to WHEN [--device N] [--top N] [--json] FILE\n"
        "       gpumem snapshot window --at-alloc ADDR[#N] [--device N] [--top N] [--json] FILE",
        "The peak inside a window of a PyTorch memory snapshot's trace, given by event indexes "
        "or by times since the trace's first event: the allocated bytes at the window's start, "
        "at its end and the most inside it, and the allocations alive at that most, grouped "
        "by stack, largest first. Or, with --at-alloc, one allocation named by its address "
        "and which allocation of that address it was (#2: the second made there; addresses "
        "are reused): its size, category, events and stack, the memory allocated once it "
        "was made and the stacks alive then. Sizes are the trace's requested bytes, as peak "
        "counts them.",
        "gpumem snapshot window --from 1000 --to 2000 snapshot.pickle\n"
        "gpumem snapshot window --from 0.5s --to 1.2s snapshot.pickle\n"
        "gpumem snapshot window --at-alloc 0x7f2a40000000#2 snapshot.pickle"};
    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos != 1)
        return cli_usage(argv[0], n_pos ? "give one snapshot FILE" : "missing snapshot FILE");
    struct window_job j = {argv[0], json,      false,         false, device,
                           top,     mem_limit, {false, 0, 0}, 0,     1};
    if (at_alloc && (from || to))
        return cli_usage(argv[0], "--at-alloc or --from/--to: choose one");
    if (at_alloc) {
        if (parse_alloc(at_alloc, &j.addr, &j.nth))
            return cli_usage(argv[0],
                             "--at-alloc: expected ADDR or ADDR#N (0x7f2a40000000#2), "
                             "not '%s'",
                             at_alloc);
        j.has_alloc = true;
    } else {
        bool t1 = false, t2 = false;
        if (!from || !to)
            return cli_usage(argv[0], "give --from and --to, or --at-alloc");
        if (parse_bound(from, &j.win.from, &t1) || parse_bound(to, &j.win.to, &t2))
            return cli_usage(argv[0], "--from/--to: expected an event index (1200) or a time "
                                      "with its unit (1.5s, 250ms, 800us)");
        if (t1 != t2)
            return cli_usage(argv[0], "--from and --to: both events or both times");
        j.win.by_time = t1;
        j.has_window = true;
    }
    return window_one(&j, argv[1]);
}
