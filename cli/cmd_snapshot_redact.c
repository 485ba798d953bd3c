/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_redact.c - gpumem snapshot redact IN -o OUT: a snapshot fit to attach to a
 * public issue, the program's text hashed (gpumem/redact.h). */
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"

#include "gpumem/redact.h"

#include <inttypes.h>
#include <stdio.h>

int cmd_snapshot_redact(int argc, char **argv)
{
    const char *out = NULL, *salt = NULL;
    bool force = false, keep = false;
    uint64_t mem_limit = 0;
    int n_pos = 0, rc;
    struct gm_redact_opts ro = {0};
    struct gm_redact_stats st;
    struct gm_error err;
    struct gm_output o;
    const struct opt opts[] = {
        OPT_STRING("output", 'o', &out, "OUT", "the redacted snapshot to write (required)"),
        OPT_FLAG("force", 0, &force, "replace OUT if it exists"),
        OPT_FLAG("keep-library-frames", 0, &keep,
                 "keep frames of torch, installed packages, the standard library and C++ as "
                 "they are (the analysis then finds modules, autograd and the optimizer)"),
        OPT_STRING("salt", 0, &salt, "TEXT",
                   "mixed into every hash, so that nobody can hash likely names to find yours "
                   "(the same salt gives the same hashes)"),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot redact IN -o OUT [--keep-library-frames] [--salt TEXT] [--force]",
        "Write a copy of the snapshot IN that can be shared: file paths, function names, "
        "record_function annotation names, compile contexts and user metadata are replaced by "
        "stable hashes (the same text, the same hash), and everything gpumem computes from is "
        "kept: sizes, addresses, times, streams, actions, segments, settings, and each stack's "
        "shape (frames, line numbers, which are Python). The copy gives the same peak, stats, "
        "replay and fragmentation figures; categories and phases need --keep-library-frames, "
        "since gpumem finds modules, autograd and the optimizer by torch's frames.",
        "gpumem snapshot redact train.pickle -o train.redacted.pickle\n"
        "gpumem snapshot redact --keep-library-frames train.pickle -o shared.pickle"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos != 1)
        return cli_usage(argv[0], n_pos ? "one IN at a time" : "missing IN");
    if (!out)
        return cli_usage(argv[0], "missing -o OUT");
    ro.flags = keep ? GM_REDACT_KEEP_LIBRARY_FRAMES : 0;
    ro.salt = salt;
    ro.memory_limit = mem_limit;
    if ((rc = cli_output_open(&o, argv[0], out, force)) != 0)
        return rc;
    if (gm_snapshot_redact(argv[1], o.f, &ro, &st, &err) != GM_OK)
        return cli_output_fail(&o, argv[0], &err);
    if ((rc = cli_output_commit(&o, argv[0])) != 0)
        return rc;
    printf("wrote %s: hashed %" PRIu64 " file paths, %" PRIu64 " function names, %" PRIu64
           " annotation names, %" PRIu64 " other texts%s\n",
           o.written, st.n_paths, st.n_functions, st.n_annotations, st.n_other,
           keep ? "; library frames kept" : "");
    return 0;
}
