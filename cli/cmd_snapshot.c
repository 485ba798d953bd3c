/* SPDX-License-Identifier: MIT */
/* cmd_snapshot.c - gpumem snapshot <sub-command>: read PyTorch CUDA memory snapshots.
 * The sub-command table: one line per sub-command, each in cli/cmd_snapshot_<name>.c. */
#include "cli.h"
#include "commands.h"

static const struct cli_command snapshot_commands[] = {
    {"info", cmd_snapshot_info, "generation, protocol, devices, counts, time span, settings"},
    {"stats", cmd_snapshot_stats, "reserved/allocated/active/requested/free per device and pool"},
    {"trace", cmd_snapshot_trace, "one line per trace event, with running totals"},
    {"peak", cmd_snapshot_peak, "the peak per device and the allocations alive at it"},
    {"categories", cmd_snapshot_categories, "parameters, activations, gradients, ... at the peak"},
    {"leaks", cmd_snapshot_leaks, "training iterations and memory that grows between them"},
    {"diff", cmd_snapshot_diff, "compare two snapshots: peak, categories, allocation sites"},
    {"oom", cmd_snapshot_oom, "fragmentation at the peak and at out-of-memory events"},
    {"regions", cmd_snapshot_regions, "memory at the start, end and peak of each annotation"},
    {"window", cmd_snapshot_window, "the peak in a window of the trace, or at one allocation"},
    {"files", cmd_snapshot_files, "memory by source file, or by function of one file; compare"},
    {"replay", cmd_snapshot_replay,
     "replay the trace through the allocator model; what-if settings"},
    {"digest", cmd_snapshot_digest, "one rank's results in a small file, for the job's commands"},
    {"report", cmd_snapshot_report, "self-contained HTML report (timeline, categories, peak)"},
    {"plot", cmd_snapshot_plot, "terminal chart of allocated and reserved over time"},
    {"export", cmd_snapshot_export, "Perfetto, speedscope, pprof or SQLite for other tools"},
    {"redact", cmd_snapshot_redact, "a copy to share: paths, names, annotations hashed"},
    {"example", cmd_snapshot_example, "write gpumem's example snapshot (training with a leak)"},
    {NULL, NULL, NULL},
};

int cmd_snapshot(int argc, char **argv)
{
    return cli_dispatch(snapshot_commands, "gpumem snapshot", argc, argv);
}
