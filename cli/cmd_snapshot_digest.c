/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_digest.c - gpumem snapshot digest FILE -o OUT: one rank's results in a few
 * kilobytes (the library's GM_DOC_DIGEST document), written where the snapshot is, for the
 * job's commands to read in its place. */
#include "analysis_common.h"
#include "cli.h"
#include "commands.h"
#include "opts.h"
#include "snapshot_cli.h"

#include "gpumem/analysis.h"
#include "gpumem/output.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

int cmd_snapshot_digest(int argc, char **argv)
{
    const char *out = NULL, *host = NULL;
    bool force = false;
    uint64_t mem_limit = 0;
    int n_pos = 0, rc;
    char hostname[256];
    const char *rules_path = NULL;
    struct gm_category_rules *rules;
    const struct opt opts[] = {
        OPT_STRING("output", 'o', &out, "FILE", "the digest to write (required)"),
        OPT_FLAG("force", 0, &force, "replace FILE if it exists"),
        OPT_STRING("host", 0, &host, "NAME",
                   "the machine the rank ran on (default: this machine's host name)"),
        SNAPCLI_OPT_CATEGORIES(&rules_path),
        SNAPCLI_OPT_MEMORY(&mem_limit),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot digest FILE -o OUT [--host NAME]",
        "Sum up one rank's snapshot in a small versioned JSON file (schema "
        "gpumem.snapshot.digest/1): the rank's peak and what was alive at it by category and "
        "by allocation site, the category series at most 256 points, iterations, leaks, "
        "out-of-memory events, fragmentation, allocator settings, host and rank (from the "
        "file name). Run it where the snapshot was written (srun on each node), then give "
        "the digests to stats, peak, categories or report in place of the snapshots: they "
        "show the same rank figures from either, and digests and snapshots mix.",
        "gpumem snapshot digest rank3_memory_snapshot.pickle -o rank3.digest\n"
        "srun gpumem snapshot digest snapshot_${SLURM_PROCID}.pickle -o rank${SLURM_PROCID}.digest"};
    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos != 1)
        return cli_usage(argv[0], n_pos ? "give one snapshot FILE" : "missing snapshot FILE");
    if (!out)
        return cli_usage(argv[0], "missing -o FILE");
    if (!host && gethostname(hostname, sizeof(hostname)) == 0) {
        hostname[sizeof(hostname) - 1] = '\0';
        host = hostname;
    }
    if ((rc = cli_output_check(argv[0], out, force)) != 0)
        return rc;
    struct gm_snapshot *snap;
    struct gm_analysis *an;
    if ((rc = snapcli_rules_load(argv[0], rules_path, &rules)) != 0)
        return rc;
    struct snapcli_load_opts lo = {.memory_limit = mem_limit, .rules = rules};
    rc = ana_cli_open(argv[0], argv[1], &lo, &snap, &an);
    gm_category_rules_free(rules); /* the analysis is made */
    if (rc)
        return rc;
    {
        struct gm_output o;
        struct gm_error err;
        struct gm_analysis_doc_file file = {.path = argv[1], .an = an};
        struct gm_analysis_doc doc = {.kind = GM_DOC_DIGEST,
                                      .files = &file,
                                      .n_files = 1,
                                      .top = gm_analysis_doc_top(GM_DOC_DIGEST),
                                      .host = host};
        if ((rc = cli_output_open(&o, argv[0], out, force)) == 0) {
            if (gm_analysis_json(o.f, &doc, &err) != GM_OK)
                rc = cli_output_fail(&o, argv[0], &err);
            else
                rc = cli_output_commit(&o, argv[0]);
        }
    }
    ana_cli_close(snap, an);
    return rc;
}
