/* SPDX-License-Identifier: MIT */
/* guard.c - SIGBUS on a mapped file turned into an error (see guard.h). */
#include "base/guard.h"

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

struct guard {
    sigjmp_buf jb;
    uintptr_t lo, hi;
};

/* The process-wide part (guard.h says why there is one). */
static pthread_mutex_t guard_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned guard_users;
static struct sigaction guard_prev;
static _Thread_local struct guard *guard_current;

static void on_bus(int sig, siginfo_t *si, void *uc)
{
    struct guard *g = guard_current;
    uintptr_t a = (uintptr_t)si->si_addr;
    if (g && a >= g->lo && a < g->hi)
        siglongjmp(g->jb, 1);
    /* not a read of a guarded mapping: what would have happened without us */
    if (guard_prev.sa_flags & SA_SIGINFO) {
        guard_prev.sa_sigaction(sig, si, uc);
    } else if (guard_prev.sa_handler != SIG_IGN && guard_prev.sa_handler != SIG_DFL) {
        guard_prev.sa_handler(sig);
    } else {
        /* the default: returning re-runs the faulting read, which then kills the process */
        signal(SIGBUS, SIG_DFL);
    }
}

static bool install(void)
{
    bool ok = true;
    pthread_mutex_lock(&guard_mu);
    if (guard_users == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_sigaction = on_bus;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        ok = sigaction(SIGBUS, &sa, &guard_prev) == 0;
    }
    if (ok)
        guard_users++;
    pthread_mutex_unlock(&guard_mu);
    return ok;
}

static void uninstall(void)
{
    pthread_mutex_lock(&guard_mu);
    if (--guard_users == 0)
        (void)sigaction(SIGBUS, &guard_prev, NULL);
    pthread_mutex_unlock(&guard_mu);
}

bool gm_guard_run(void (*fn)(void *ctx), void *ctx, const void *base, size_t len)
{
    /* volatile: read after a jump back into this frame */
    struct guard g;
    struct guard *volatile saved = guard_current;
    volatile bool faulted = false;
    if (!install()) {
        fn(ctx);
        return true;
    }
    g.lo = (uintptr_t)base;
    g.hi = (uintptr_t)base + len;
    if (sigsetjmp(g.jb, 1) == 0) {
        guard_current = &g;
        fn(ctx);
    } else {
        faulted = true;
    }
    guard_current = saved;
    uninstall();
    return !faulted;
}
