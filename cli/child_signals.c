/* SPDX-License-Identifier: MIT */
/* child_signals.c - the signals of a command that runs a child (see cli.h). */
#include "cli.h"

#include <string.h>

struct cli_child_signals cli_child;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    cli_child.signal = sig;
    if (cli_child.stop)
        cli_child.kill = 1;
    else if (cli_child.child > 0 && si->si_code <= 0) /* SI_USER, SI_QUEUE: sent by kill() */
        kill(cli_child.child, sig);
    cli_child.stop = 1;
}

void cli_child_signals_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}
