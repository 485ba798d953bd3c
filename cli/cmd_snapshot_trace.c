/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_trace.c - gpumem snapshot trace FILE: one line per trace event with the
 * running allocated and reserved totals (--json: NDJSON, one object per line), written by
 * the library (gm_analysis_trace()). */
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"

#include "gpumem/analysis.h"

#include <inttypes.h>
#include <stdio.h>

int cmd_snapshot_trace(int argc, char **argv)
{
    bool json = false, from_seen = false, to_seen = false;
    uint64_t from = 0, to = UINT64_MAX, mem_limit = 0;
    const char *device = NULL;
    int32_t want = -1;
    int n_pos = 0, rc;
    struct gm_snapshot *snap;
    const struct opt opts[] = {
        OPT_STRING("device", 'd', &device, "N", "only this device (default: all)"),
        OPT_U64("from", 0, &from, "K", "first event index to print (default 0)", &from_seen),
        OPT_U64("to", 0, &to, "K", "last event index to print, inclusive (default: the last)",
                &to_seen),
        OPT_JSON(&json, "NDJSON, one gpumem.snapshot.trace/2 event per line, each stack's "
                        "frames once on a line before its first event"),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot trace [--device N] [--from K] [--to K] [--json] FILE",
        "Print every trace event: index, time since the first event, action, address, size, "
        "the allocated total after it (Active Memory Timeline semantics: requested bytes), "
        "the stream when not the default one, and the first user frame. --json writes NDJSON "
        "with allocated_bytes and reserved_bytes after each event and the event's stack id; "
        "the frames of a stack are written once, as {\"stack\", \"frames\"}, before the first "
        "event that has it.",
        "gpumem snapshot trace --device 0 --from 100 --to 200 profile.pkl"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    (void)from_seen;
    (void)to_seen;
    if (n_pos != 1)
        return cli_usage(argv[0], n_pos ? "expected one FILE" : "missing FILE");
    if ((rc = snapcli_device_arg(argv[0], device, &want)) != 0)
        return rc;
    if (from > to)
        return cli_usage(argv[0], "--from %" PRIu64 " is after --to %" PRIu64, from, to);
    struct snapcli_load_opts lo = {.memory_limit = mem_limit};
    if ((rc = snapcli_load(argv[0], argv[1], &lo, &snap)) != 0)
        return rc;
    if (want >= 0 && !gm_snapshot_device_by_index(snap, want)) {
        gm_snapshot_free(snap);
        cli_errorf(argv[0], "'%s' has no device %d", argv[1], want);
        return GM_EXIT_USAGE;
    }
    {
        struct gm_analysis_trace_opts to_opts = {want, from, to,
                                                 json ? GM_TRACE_NDJSON : GM_TRACE_TEXT};
        struct gm_error err;
        enum gm_status st = gm_analysis_trace(stdout, snap, &to_opts, &err);
        if (st == GM_ERR_IO && ferror(stdout))
            rc = GM_EXIT_IOERR; /* said once, with its errno, by cli_stdout_end() */
        else
            rc = st == GM_OK ? 0 : cli_fail(argv[0], &err);
    }
    gm_snapshot_free(snap);
    return rc;
}
