/* SPDX-License-Identifier: MIT */
/* snapshot_cli.h - what the `gpumem snapshot` sub-commands share: loading with progress
 * and error reporting, frame and time formatting. */
#ifndef GM_CLI_SNAPSHOT_CLI_H
#define GM_CLI_SNAPSHOT_CLI_H

#include "gpumem/analysis.h"
#include "gpumem/snapshot.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* How a command loads its snapshots. */
struct snapcli_load_opts {
    uint64_t memory_limit;      /* --memory-limit, bytes; 0: the library's (relative to the file) */
    bool drop_events;           /* only the snapshot state and the trace's counts are needed */
    struct gm_digest **digests; /* NULL: a digest is refused; else per file (of
                                 * snapcli_load_many()/_each()), the digest read in place of
                                 * a snapshot (the caller's to gm_digest_free(); 'work' is not
                                 * run on it and its snapshot is NULL) */
    const struct gm_category_rules *rules; /* --categories: analyses made by the loading
                                            * helpers apply them; NULL: none */
    bool timeline_only; /* only the timelines and the peaks are needed (no analysis) */
    /* work done on the events while they are read (gm_snapshot_opts.consumer), or NULL */
    const struct gm_snapshot_consumer *consumer;
    /* the consumer does the work and no event is kept (gm_snapshot_opts.consume_events): a
     * 'work' of snapcli_load_many()/_each() that fails on such a snapshot
     * (gm_snapshot.events_consumed) runs again on the file read with its events */
    bool consume_events;
};

/* --memory-limit SIZE, for the option table of every snapshot command. */
#define SNAPCLI_OPT_MEMORY(dest)                                                                   \
    OPT_SIZE("memory-limit", 0, dest, "SIZE",                                                      \
             "memory this command may use for one snapshot, and for all the files it reads at "    \
             "once (default: 256 MiB + 4 x the file size)",                                        \
             NULL)

/* --categories RULES, for the option table of every command that shows categories. */
#define SNAPCLI_OPT_CATEGORIES(dest)                                                               \
    OPT_STRING("categories", 0, dest, "RULES",                                                     \
               "your category rules, JSON or YAML (regular expressions on frames or annotations, " \
               "first match wins), tried before the built-in ones: docs/analysis.md")

/* Read the --categories file 'path' into *out (NULL, and nothing read, when 'path' is
 * NULL): 0, or the exit code after printing the error. */
int snapcli_rules_load(const char *cmd, const char *path, struct gm_category_rules **out);

/* Load 'path' (progress on stderr when it is a terminal and the file is large).  'o' may be
 * NULL.  Returns 0 with *out set, or the exit code after printing the error. */
int snapcli_load(const char *cmd, const char *path, const struct snapcli_load_opts *o,
                 struct gm_snapshot **out);

/* Work done on each snapshot in the thread that loaded it (an analysis): GM_OK, or a
 * failure with 'err' filled in (printed in argument order by snapcli_load_many()).  On a
 * snapshot whose events were consumed while loading (gm_snapshot.events_consumed), a work that
 * needs them fails (gm_analysis_run() does, gm_analysis_reads_trace() tells the rest): the
 * file is read again with its events and the work runs again, its result the one that
 * counts.  A work runs twice on one file only so, and sets for file i what it sets anew. */
typedef enum gm_status (*snapcli_work_fn)(void *ctx, size_t i, struct gm_snapshot *snap,
                                          struct gm_error *err);

/* Load the n files paths[] in parallel threads, as many at a time as there are cores and
 * as the memory limit allows (a file counts at half its size while it is read), running
 * 'work' (may be NULL) on each in its thread: out[i] is paths[i]'s snapshot.  The result is
 * that of reading them one at a time: 0, or the exit code of the first file (in argument
 * order) that failed, its error printed, every snapshot then freed. */
int snapcli_load_many(const char *cmd, char *const *paths, size_t n,
                      const struct snapcli_load_opts *o, snapcli_work_fn work, void *ctx,
                      struct gm_snapshot **out);

/* What is done with each snapshot in the calling thread, in argument order: 0, or an exit
 * code after printing the error (which stops at that file). */
typedef int (*snapcli_use_fn)(void *ctx, size_t i, struct gm_snapshot *snap);

/* snapcli_load_many() for outputs made file by file (report): each snapshot, once 'work'
 * is done with it in its thread, goes to 'use' in this thread in argument order and is
 * then freed, so that only the files being read or waiting their turn are in memory.  The
 * result is that of one file at a time: the files before a failing one are used, its error
 * printed and its exit code returned. */
int snapcli_load_each(const char *cmd, char *const *paths, size_t n,
                      const struct snapcli_load_opts *o, snapcli_work_fn work, snapcli_use_fn use,
                      void *ctx);

/* The files the n arguments args[] stand for as the ranks of one job (gm_rank_files_list():
 * a folder's rank files, in rank order when every name carries a rank).  0 with *out the
 * caller's (gm_rank_files_release()), or an exit code after printing the error. */
int snapcli_rank_files(const char *cmd, char *const *args, size_t n, struct gm_rank_files *out);

/* The arguments of a command that reads several files at once, as ranks. */
struct snapcli_rank_args {
    struct gm_rank_files files;
    char **argv; /* argv[0], then the files */
};

/* Replace *argv's arguments 1..*n_pos by the files they stand for (snapcli_rank_files()):
 * *argv then points into 'ra' (release it with snapcli_rank_argv_release() once *argv is
 * no longer used) and *n_pos counts the files.  0, or an exit code after printing the
 * error. */
int snapcli_rank_argv(char ***argv, int *n_pos, struct snapcli_rank_args *ra);
void snapcli_rank_argv_release(struct snapcli_rank_args *ra);

/* What a command that reads one file at a time does with it: 0, or an exit code after
 * printing the error. */
typedef int (*snapcli_file_fn)(void *ctx, char *path);

/* Run 'one' on each file the arguments stand for (snapcli_rank_files()), in that order,
 * until one fails.  In text, each file's output follows a line "==> PATH <== rank R (by
 * file name)" when its name carries a rank or there are several files (then "by argument
 * order" for a name without one); with --json ('json') several files make an array of
 * their documents. */
int snapcli_each_rank_file(const char *cmd, char *const *args, size_t n, bool json,
                           snapcli_file_fn one, void *ctx);

/* How a snapshot argument is named in output: the path, "standard input" for '-'. */
const char *snapcli_name(const char *path);

/* 's' with control characters (terminal escapes from a hostile file) replaced by '?',
 * truncated to fit 'buf'; returns buf. */
char *snapcli_safe(char *buf, size_t n, const char *s);

/* "2024-02-18 12:34:56.123456 UTC" into buf; returns buf. */
char *snapcli_time(char *buf, size_t n, int64_t time_us);

/* Print a stack folded as the library shows it (gm_snapshot_stack_view()): the user frame
 * first, then up to 'callers' of the user frames that called it ("<-"), the frame that tells
 * it apart from stacks listed with it that show alike ("from": 'apart' of
 * gm_snapshot_stacks_apart(), -1 none), the innermost frame ("via") and a count of the
 * folded frames.  'indent' spaces before each line after the first. */
void snapcli_print_stack(FILE *f, const struct gm_snapshot *snap, uint32_t stack, int callers,
                         long apart, int indent);

/* The same on one line: "gpt/model.py:100 forward via nn/functional.py:3494 cross_entropy,
 * from gpt/train.py:70 evaluate" (a C++-only stack: "operator < autograd node"). */
void snapcli_stack_line(char *buf, size_t n, const struct gm_snapshot *snap, uint32_t stack,
                        long apart);

/* A path shortened for one-line display: from "site-packages/" on, else the last 3
 * components. */
const char *snapcli_short_path(const char *path);

/* When the file holds out-of-memory events, one line that says so (the first oom of each
 * device: the bytes asked for, the event, what CUDA had free), for the first line of a
 * command's output; nothing otherwise. */
void snapcli_print_oom_banner(FILE *f, const struct gm_snapshot *snap, const char *path);

/* Parse a device option value ("all" or a number) into *dev (-1 = all); 0 or exit code. */
int snapcli_device_arg(const char *cmd, const char *s, int32_t *dev);

#endif
