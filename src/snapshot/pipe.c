/* SPDX-License-Identifier: MIT */
/* pipe.c - the load's consumers (snapshot_int.h) fed inline or on one worker thread.
 *
 * Every consumer call of a load goes through here, as a job: a stream's consumers opened
 * (at its first record), a committed batch's events to every consumer in order (and to the
 * events kept aside, side.c), the consumers abandoned (a long batch, trace.c).  Inline, a
 * job runs at once on the loader's thread.  With a worker, the loader posts the jobs in the
 * same order into a ring of PIPE_SLOTS and the worker runs them one after the other while
 * the loader reads on: the consumers see the same calls in the same order, so every result
 * is the same, and on a machine with two CPUs their work (the timeline's fold, an
 * analysis's first pass) costs almost no wall time beyond the reading.
 *
 * What the two threads share, and why it is safe:
 * - A batch's events: the loader hands its buffer over (swapped with the slot's, no copy)
 *   and gets the slot's, which the worker finished with before the slot became free; the
 *   loader never writes a buffer a posted job holds.
 * - Everything a consumer touches (its state; the load's budget of the consumers,
 *   snap_impl.consumers, with the kept-aside events' budget drawing on it; stream.consumer[];
 *   stream.side; gm_snapshot_packed.fold/.consumed/.consumed_ops, which open() sets) is
 *   touched by jobs only, so by the worker alone while it runs; the loader reads none of it
 *   before snap_pipe_end(), whose join orders the worker's writes before its reads.  (The
 *   loader writes other members of the same structs meanwhile: distinct objects, no race.)
 * - The ring's indexes, under the mutex.
 * The consumers allocate with the gm_* wrappers (malloc, gm_big_*: thread-safe).  The
 * allocation-failure hook is per thread (arena.c): a load while it is armed runs inline,
 * so that a test fails the same allocation every time.  That is also why the fallbacks of
 * snap_pipe_start() (the pipe's calloc, a mutex, a condition or the thread that cannot be
 * made: the consumers then run inline) are reached by no test; each frees what it made. */
#include "snapshot/load_int.h"

#include "base/big.h"

#include "gpumem/arena.h"
#include "gpumem/device.h"

#include <pthread.h>
#include <string.h>

/* Jobs posted and not yet done at most, and how many wake a waiting worker.  A thread put
 * to sleep and woken for every batch costs more than the batch's work: on the build machine
 * (a virtual machine, 2 CPUs) waking the worker for each of the 1 GB snapshot's 12,000
 * batches took `peak` from 1.89 to 2.86 s of CPU, 17,700 voluntary context switches.  So the
 * worker sleeps until half the ring is full (or the load ends), and the loader waits only on
 * a full ring.  The buffers stay small: a batch is 1000 events of 40 bytes as writers write
 * it, at most FOLD_BATCH_MAX (trace.c). */
#define PIPE_SLOTS 32
#define PIPE_WAKE  (PIPE_SLOTS / 2)
/* No worker for an input smaller than this (bytes of pickle): its load takes milliseconds. */
#define PIPE_MIN_BYTES ((size_t)8 << 20)

enum pipe_kind {
    PIPE_OPEN,    /* open the stream's consumers */
    PIPE_EVENTS,  /* the batch ev[0..n) to them */
    PIPE_ABANDON, /* no more events for them */
};

struct pipe_job {
    enum pipe_kind kind;
    struct stream *str;
    uint32_t index;               /* the stream's device (PIPE_OPEN) */
    bool ooms;                    /* the batch holds out-of-memory events (PIPE_EVENTS) */
    struct gm_snapshot_event *ev; /* the batch's events (PIPE_EVENTS) */
    size_t n;                     /* events in ev */
    size_t cap_ev;                /* ev's capacity (the slot's own buffer between jobs) */
};

struct snap_pipe {
    pthread_mutex_t mu;               /* guards head, tail, stop and the *_waits */
    pthread_cond_t posted;            /* jobs were posted, or stop */
    pthread_cond_t done;              /* a job is done: its slot is free */
    struct pipe_job slot[PIPE_SLOTS]; /* the ring */
    size_t head;                      /* slot[head % PIPE_SLOTS]: the next job to run */
    size_t tail;                      /* jobs [head, tail) are posted */
    bool stop;                        /* no more jobs: the worker ends when the ring is empty */
    bool worker_waits;                /* the worker sleeps on 'posted' */
    bool loader_waits;                /* the loader sleeps on 'done' */
    pthread_t thread;                 /* the worker */
    struct builder *b;                /* the load */
};

static void run_job(struct builder *b, const struct pipe_job *j)
{
    struct stream *str = j->str;
    switch (j->kind) {
    case PIPE_OPEN:
        /* a consumer that cannot be made (out of memory) leaves its work to the stored trace */
        for (size_t i = 0; i < b->n_consumers; i++)
            str->consumer[i] = b->consumers[i].ops->open(b->consumers[i].ctx, j->index,
                                                         &b->impl->consumers, &str->w.pk);
        break;
    case PIPE_EVENTS:
        for (size_t i = 0; i < b->n_consumers; i++)
            if (str->consumer[i])
                b->consumers[i].ops->events(str->consumer[i], j->ev, j->n);
        if (b->consume)
            (void)snap_side_add(&str->side, j->ev, j->n, j->ooms);
        break;
    case PIPE_ABANDON:
        str->side.broken = true; /* the trace is kept instead */
        for (size_t i = 0; i < b->n_consumers; i++) {
            if (str->consumer[i])
                b->consumers[i].ops->abandon(str->consumer[i]);
            str->consumer[i] = NULL;
        }
        break;
    }
}

static void *worker(void *arg)
{
    struct snap_pipe *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (p->head == p->tail && !p->stop) {
            p->worker_waits = true;
            pthread_cond_wait(&p->posted, &p->mu);
            p->worker_waits = false;
        }
        if (p->head == p->tail)
            break; /* stopped, every job done */
        pthread_mutex_unlock(&p->mu);
        /* the slot is the worker's until head moves past it */
        run_job(p->b, &p->slot[p->head % PIPE_SLOTS]);
        pthread_mutex_lock(&p->mu);
        p->head++;
        if (p->loader_waits)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

/* Whether the load's consumers include more than the timeline's fold (the caller's, such
 * as an analysis's first pass). */
static bool beyond_fold(const struct builder *b)
{
    for (size_t i = 0; i < b->n_consumers; i++)
        if (b->consumers[i].ops != &snap_fold_consumer)
            return true;
    return false;
}

/* Auto (0) wants a consumer besides the fold: the fold alone is too little work to pay for
 * the hand-over.  Measured on the build machine (2 vCPUs, load 1.2-1.4, the 1 GB snapshot,
 * medians of 5 interleaved runs), a worker for the fold alone took `peak` from 1.51 to
 * 1.78 s of wall time and 1.50 to 1.86 s of CPU, while with an analysis's first pass it
 * took `report` from 2.33 to 2.15 s of wall time. */
bool snap_pipe_wanted(unsigned threads, size_t len, bool beyond_fold, unsigned cpus)
{
    if (threads == 1)
        return false;
    if (threads >= 2)
        return true;
    return len >= PIPE_MIN_BYTES && beyond_fold && cpus >= 2;
}

/* Whether this load gets a worker (never while the allocation-failure hook is armed). */
static bool wants_worker(const struct builder *b, unsigned threads, size_t len)
{
    if (gm_alloc_injecting() || threads == 1)
        return false;
    /* the CPUs this process may run on (taskset, cgroup cpusets), not those of the machine;
     * asked only when the load decides (auto) */
    return snap_pipe_wanted(threads, len, beyond_fold(b), threads ? 0 : gm_cpus_usable());
}

void snap_pipe_start(struct builder *b, unsigned threads, size_t len)
{
    struct snap_pipe *p;
    b->pipe = NULL;
    if (!b->n_consumers || !wants_worker(b, threads, len))
        return;
    /* what cannot be made leaves the consumers inline, as on one CPU */
    if (!(p = gm_calloc(1, sizeof(*p))))
        return;
    p->b = b;
    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        gm_free(p);
        return;
    }
    if (pthread_cond_init(&p->posted, NULL) != 0) {
        pthread_mutex_destroy(&p->mu);
        gm_free(p);
        return;
    }
    if (pthread_cond_init(&p->done, NULL) != 0) {
        pthread_cond_destroy(&p->posted);
        pthread_mutex_destroy(&p->mu);
        gm_free(p);
        return;
    }
    if (pthread_create(&p->thread, NULL, worker, p) != 0) {
        pthread_cond_destroy(&p->done);
        pthread_cond_destroy(&p->posted);
        pthread_mutex_destroy(&p->mu);
        gm_free(p);
        return;
    }
    b->pipe = p;
}

/* The next free slot, waited for (the loader's side). */
static struct pipe_job *slot_free(struct snap_pipe *p)
{
    struct pipe_job *j;
    pthread_mutex_lock(&p->mu);
    while (p->tail - p->head == PIPE_SLOTS) {
        p->loader_waits = true;
        pthread_cond_signal(&p->posted); /* (a full ring wakes the worker in any case) */
        pthread_cond_wait(&p->done, &p->mu);
        p->loader_waits = false;
    }
    j = &p->slot[p->tail % PIPE_SLOTS];
    pthread_mutex_unlock(&p->mu);
    return j; /* not in [head, tail): nobody else reads it */
}

static void post(struct snap_pipe *p)
{
    pthread_mutex_lock(&p->mu);
    p->tail++;
    if (p->worker_waits && p->tail - p->head >= PIPE_WAKE)
        pthread_cond_signal(&p->posted);
    pthread_mutex_unlock(&p->mu);
}

void snap_pipe_open(struct builder *b, struct stream *str, uint32_t index)
{
    struct pipe_job j = {PIPE_OPEN, str, index, false, NULL, 0, 0};
    struct pipe_job *s;
    if (!b->pipe) {
        run_job(b, &j);
        return;
    }
    s = slot_free(b->pipe);
    j.ev = s->ev; /* the slot keeps its buffer */
    j.cap_ev = s->cap_ev;
    *s = j;
    post(b->pipe);
}

void snap_pipe_events(struct builder *b, struct stream *str, bool ooms)
{
    struct pipe_job j = {PIPE_EVENTS, str, 0, ooms, str->prov_ev, str->prov, str->cap_prov_ev};
    struct pipe_job *s;
    /* abandoned, the job would find no consumer and the kept-aside events broken
     * (snap_side_add() returns at once): not posted, the worker is not woken for nothing */
    if (str->abandoned)
        return;
    if (!b->pipe) {
        run_job(b, &j);
        return;
    }
    s = slot_free(b->pipe);
    /* the batch's buffer goes with the job; the stream takes the slot's, done with */
    str->prov_ev = s->ev;
    str->cap_prov_ev = s->cap_ev;
    *s = j;
    post(b->pipe);
}

void snap_pipe_abandon(struct builder *b, struct stream *str)
{
    struct pipe_job j = {PIPE_ABANDON, str, 0, false, NULL, 0, 0};
    struct pipe_job *s;
    if (str->abandoned)
        return; /* once is enough */
    str->abandoned = true;
    if (!b->pipe) {
        run_job(b, &j);
        return;
    }
    s = slot_free(b->pipe);
    j.ev = s->ev;
    j.cap_ev = s->cap_ev;
    *s = j;
    post(b->pipe);
}

void snap_pipe_end(struct builder *b)
{
    struct snap_pipe *p = b->pipe;
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_signal(&p->posted);
    pthread_mutex_unlock(&p->mu);
    /* the worker runs what was posted, then ends: after the join its writes are seen */
    pthread_join(p->thread, NULL);
    for (size_t i = 0; i < PIPE_SLOTS; i++)
        gm_free(p->slot[i].ev);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->posted);
    pthread_mutex_destroy(&p->mu);
    gm_free(p);
    b->pipe = NULL;
}
