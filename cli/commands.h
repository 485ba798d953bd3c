/* SPDX-License-Identifier: MIT */
/* commands.h - the entry point of each command (one file per command: cmd_<name>.c). */
#ifndef GM_CLI_COMMANDS_H
#define GM_CLI_COMMANDS_H

int cmd_version(int argc, char **argv);
int cmd_estimate(int argc, char **argv);

#endif
