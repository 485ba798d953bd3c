/* SPDX-License-Identifier: MIT */
/* commands.h - the entry point of each command (one file per command: cmd_<name>.c). */
#ifndef GM_CLI_COMMANDS_H
#define GM_CLI_COMMANDS_H

int cmd_version(int argc, char **argv);
int cmd_estimate(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
int cmd_environment(int argc, char **argv);
int cmd_watch(int argc, char **argv);
int cmd_account(int argc, char **argv);
int cmd_measure(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_sheet(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);

/* gpumem snapshot <sub-command>: the table is in cmd_snapshot.c, one line each. */
int cmd_snapshot_info(int argc, char **argv);
int cmd_snapshot_stats(int argc, char **argv);
int cmd_snapshot_trace(int argc, char **argv);
int cmd_snapshot_peak(int argc, char **argv);
int cmd_snapshot_categories(int argc, char **argv);
int cmd_snapshot_leaks(int argc, char **argv);
int cmd_snapshot_diff(int argc, char **argv);
int cmd_snapshot_oom(int argc, char **argv);
int cmd_snapshot_replay(int argc, char **argv);
int cmd_snapshot_example(int argc, char **argv);
int cmd_snapshot_export(int argc, char **argv);
int cmd_snapshot_redact(int argc, char **argv);
int cmd_snapshot_report(int argc, char **argv);
int cmd_snapshot_digest(int argc, char **argv);
int cmd_snapshot_plot(int argc, char **argv);
int cmd_snapshot_regions(int argc, char **argv);
int cmd_snapshot_window(int argc, char **argv);
int cmd_snapshot_files(int argc, char **argv);

#endif
