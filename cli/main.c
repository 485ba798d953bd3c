/* SPDX-License-Identifier: MIT */
/* main.c - the command table of the gpumem CLI. */
#include "cli.h"
#include "commands.h"

#include <string.h>

static const struct cli_command commands[] = {
    {"version", cmd_version, "print the version and compiled-in features"},
    {"estimate", cmd_estimate, "predict peak GPU memory of a training or inference job"},
    {NULL, NULL, NULL},
};

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        static char name[] = "gpumem version";
        char *args[] = {name, NULL};
        return cmd_version(1, args);
    }
    return cli_dispatch(commands, "gpumem", argc, argv);
}
