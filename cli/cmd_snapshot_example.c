/* SPDX-License-Identifier: MIT */
/* cmd_snapshot_example.c - gpumem snapshot example -o FILE: write gpumem's own example
 * snapshot (a simulated GPT training job with a deliberate leak) to try the other
 * snapshot commands on. */
#include "cli.h"
#include "commands.h"
#include "opts.h"

#include "gpumem/example.h"

int cmd_snapshot_example(int argc, char **argv)
{
    const char *out = NULL;
    bool force = false, no_leak = false, phases = false, json = false;
    uint64_t iterations = 5, protocol = 4, batch = 8, device = 0;
    int n_pos = 0, rc;
    struct gm_example_opts eo;
    struct gm_error err;
    struct gm_output o;
    const struct opt opts[] = {
        OPT_STRING("output", 'o', &out, "FILE", "pickle to write (required)"),
        OPT_FLAG("force", 0, &force, "replace FILE if it exists"),
        OPT_U64("iterations", 0, &iterations, "N", "training iterations (default 5)", NULL),
        OPT_FLAG("no-leak", 0, &no_leak, "leave out the evaluation leak"),
        OPT_U64("protocol", 0, &protocol, "N", "pickle protocol 2 to 5 (default 4)", NULL),
        OPT_U64("batch", 0, &batch, "N", "sequences per training batch, 1 to 64 (default 8)", NULL),
        OPT_U64("device", 0, &device, "N",
                "run the job on cuda:N, 0 to 15 (default 0): the snapshot of one rank of a "
                "torchrun job",
                NULL),
        OPT_FLAG("phases", 0, &phases,
                 "mark the steps' phases as gpumem.torch.record() does (gpumem.phase:<name>)"),
        OPT_JSON(&json, "gpumem.snapshot.example/1"),
        OPT_END,
    };
    const struct opt_usage usage = {
        "gpumem snapshot example -o FILE [--iterations N] [--no-leak] [--batch N] [--device N] "
        "[--phases] [--force] [--json]",
        "Write gpumem's example snapshot: the pickle torch.cuda.memory._dump_snapshot() would "
        "write for a small GPT (4 layers, hidden 1024, batch 8x512, fp32) trained with AdamW. "
        "Each iteration copies a batch, runs forward, backward, optimizer.step() and "
        "zero_grad(); unless --no-leak, it also evaluates without torch.no_grad() and keeps "
        "the loss, so every iteration's graph stays alive. Allocations go through a model of "
        "the CUDA caching allocator, so the trace and the segments agree.",
        "gpumem snapshot example -o train_leak.pickle\n"
        "gpumem snapshot report train_leak.pickle -o report.html\n"
        "gpumem snapshot example -o rank1.pickle --device 1 --batch 12   # a second rank"};

    int prc = opts_parse_cmd(argc, argv, opts, &usage, false, &n_pos);
    if (prc >= 0)
        return prc;
    if (n_pos)
        return cli_usage(argv[0], "unexpected argument '%s'", argv[1]);
    if (!out)
        return cli_usage(argv[0], "missing -o FILE");
    if (iterations < 1 || iterations > 1000)
        return cli_usage(argv[0], "--iterations: choose 1 to 1000");
    if (protocol < 2 || protocol > 5)
        return cli_usage(argv[0], "--protocol: choose 2 to 5");
    if (batch < 1 || batch > 64)
        return cli_usage(argv[0], "--batch: choose 1 to 64");
    if (device > 15)
        return cli_usage(argv[0], "--device: choose 0 to 15");
    gm_example_opts_init(&eo);
    eo.iterations = (unsigned)iterations;
    eo.leak = !no_leak;
    eo.protocol = (int)protocol;
    eo.batch = (unsigned)batch;
    eo.device = (int)device;
    eo.phases = phases;
    rc = cli_output_open(&o, argv[0], out, force);
    if (rc)
        return rc;
    if (gm_example_write(o.f, &eo, &err) != GM_OK)
        return cli_output_fail(&o, argv[0], &err);
    if ((rc = cli_output_commit(&o, argv[0])) != 0 || !json)
        return rc;
    {
        struct gm_json w;
        cli_json_begin(&w, stdout, "snapshot.example");
        gm_json_kv_str(&w, "output", o.written);
        gm_json_kv_u64(&w, "iterations", eo.iterations);
        gm_json_kv_bool(&w, "leak", eo.leak);
        gm_json_kv_u64(&w, "batch", eo.batch);
        gm_json_kv_i64(&w, "device", eo.device);
        gm_json_kv_bool(&w, "phases", eo.phases);
        gm_json_kv_i64(&w, "protocol", eo.protocol);
        return cli_json_end(&w, argv[0]);
    }
}
