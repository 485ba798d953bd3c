/* SPDX-License-Identifier: MIT */
/* cmd_version.c - gpumem version / gpumem --version: version and compiled-in features.
 * Never probes the GPU. */
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include "gpumem/version.h"

#include <stdio.h>

int cmd_version(int argc, char **argv)
{
    bool json = false;
    int n_pos = 0;
    const struct opt opts[] = {
        OPT_JSON(&json, "gpumem.version/1"),
        OPT_END,
    };
    const struct opt_usage usage = {"gpumem version [--json]",
                                    "Print the version and the compiled-in features.", NULL};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos)
        return cli_usage(argv[0], "unexpected argument '%s'", argv[1]);
    if (json) {
        struct gm_json w;
        cli_json_begin(&w, stdout, "version");
        gm_json_kv_str(&w, "version", gm_version());
        gm_json_key(&w, "features");
        gm_json_begin_array(&w);
        gm_json_str(&w, "jansson");
        gm_json_str(&w, "zlib");
        gm_json_str(&w, "dlopen-nvml");
        gm_json_str(&w, "dlopen-cuda");
        gm_json_end_array(&w);
        return cli_json_end(&w, argv[0]);
    }
    printf("gpumem %s\n", gm_version());
    printf("features: jansson zlib dlopen-nvml dlopen-cuda\n");
    return 0;
}
