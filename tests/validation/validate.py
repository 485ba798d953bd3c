#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""validate.py - hold `gpumem estimate` against public GPU-memory measurements.

usage: validate.py [--check] [--rows] [--gaps] [--beyond-replay] [--stream-floor] [--by-setup]
                   [--implied-non-torch] [--sample N]
                   GPUMEM DATA_DIR

DATA_DIR holds one CSV per source (tests/data/validation/*.csv): comment lines starting with
'#' describe the source, its setup and its counters; then a header and one row per
measurement with the source repository, path and commit, the counter the run measured
(allocated: torch.cuda.max_memory_allocated(), reserved: max_memory_reserved(), device:
nvidia-smi; or what a serving engine printed at start-up, per GPU: weights, non_torch,
activation, kv_cache, kv_blocks, kv_tokens, max_concurrency, cuda_graphs, compute_buffer; and
worker_activation, worker_kv_cache: what a vLLM V0 worker that does not sample printed), the
measured value (bytes; a count for kv_blocks and kv_tokens; the printed ratio, such as 5.59, for
max_concurrency), what is expected (value, or does_not_fit for runs
that ran out of memory), the gpumem feature a row still needs (such rows are listed as skipped,
with the reason, never silently) and the `gpumem estimate` arguments of the setup.

For every row it runs `GPUMEM estimate ARGS --json` (once per distinct ARGS, on every CPU the
process may use) and prints per source and counter the number of rows, the median |error|, the
share within 10% and the 90th percentile of |error| (for an engine's byte counters also the
median |difference| in MiB and the share within 64 MiB); for does_not_fit rows the verdicts (does not fit, borderline, fits).
A table's "# fit: ID ... -- what" comment lines name its fit rows, the rows a constant of gpumem
was set from: a counter holding any is summarised again over its judged rows alone, and --rows
marks them.
With --check it exits 1 when the median |error| over the judged peak rows (allocated, reserved,
device) or over the judged engine rows is above 10%, when a fit row names no row of its table, when a llama.cpp buffer (weights, KV cache,
compute buffer) is more than 64 MiB off, when
gpumem fails on a row, when a row has a counter or an expectation it does not know, or when
the rows it skips are not exactly EXPECTED_SKIPS (a row whose feature gpumem has gained must
run, and a new skip must be declared here).
--rows prints every row.  --gaps prints, for every run measured on both max_memory_allocated
and nvidia-smi (rows of one source with the same source_row and args), the gap device minus
allocated, measured and predicted, in GiB: what lives beside the allocated peak (the
allocator's cache and fragmentation, the CUDA context, NCCL), apart from the error of the
allocated figure itself; per source the median |error| of the gap and how many gaps gpumem
predicts too small.  --beyond-replay prints, for every nvidia-smi row of a training run that gpumem
replays through its caching-allocator model, the measured figure minus the replay's own device
figure (the replay's reserved peak plus the same CUDA context, workspaces and NCCL), in GiB and in
fp32 copies of the per-GPU logits (4 B x the loss's tokens on one GPU x the vocabulary of one GPU's
logits, both read from the estimate: --tokens-per-batch, an encoder-decoder's target tokens and
tensor parallelism's vocabulary shard as gpumem counts them), with the loss form, and per
source the median and range of those copies by loss form and by one GPU or several: how much of
what the replay misses goes with the logits.  --stream-floor prints, for every
max_memory_reserved row whose training step gpumem replays (without running out of memory or
freeing the cache), the floor: the sum over the streams of each stream's largest sum of live
tensors in the replay (replay.live_peak_by_stream_bytes), the least that PyTorch's allocator,
which caches blocks and maps pages per stream, reserves for those tensors; then the replay's
reserved peak above the floor (the allocator model's own share) and the measured figure minus
the floor (below zero: the run reserved less than the replayed tensors need on their streams, so
the error is in the tensors, whatever the allocator does); per source and allocator setting, the
median of each and how many rows were measured below the floor.  --by-setup groups the
nvidia-smi rows of training runs that gpumem replays (and that fit) by setup, read from the
estimate's inputs (full, lora, qlora or gptq-lora; the loss form; one GPU or several) and
prints per source and setup the rows, the estimate's median |error|, its share within 10% and
its median signed error beside the median signed error of the replay's own device figure (the
replay's reserved peak plus the same overheads), and in how many rows the HF stack's floor
decided: which setups miss, and whether the replay or the floor is what misses there.
--implied-non-torch prints, for every vLLM run whose printed KV memory is a row (and whose pool
is not given outright), the non-torch figure gpumem charges to vLLM's budget beside the one the
printed KV memory implies (gpumem's figure plus gpumem's pool less the printed one, plus gpumem's
weights and profile peak less the printed ones where the run prints them; from 0.21 it holds
the CUDA-graph estimate's error too) and the printed non-torch figure where there is one, in
MiB; then per engine generation (V0, V1 0.8-0.10, V1 0.11+) and tp 1 / tp >= 2 the median of
implied less charged: what the budget misses beside the weights and the profile peak where the
log prints no non-torch line.
--sample N runs only every
Nth distinct argument list and checks only that gpumem answers each of them (the
sanitizer build's run: the figures are the same as in
the plain build, what it adds is memory and undefined-behaviour checking of every code path
the rows reach).  The script writes nothing."""

import concurrent.futures
import csv
import json
import os
import shlex
import statistics
import subprocess
import sys

COUNTER_KEY = {"allocated": "allocated_bytes", "reserved": "reserved_bytes",
               "device": "device_bytes"}
# What a serving engine prints at start-up, per GPU: the counter, where `estimate --json` has
# gpumem's figure of it, and whether it is bytes (else a count).  vLLM: "model weights take" /
# "Model loading took", non_torch_memory, "PyTorch activation peak memory", "Available KV cache
# memory", "# GPU blocks", "GPU KV cache size: N tokens", "Maximum concurrency for N tokens
# per request: X" (a ratio, measured as printed), "Graph capturing finished ..., took"; the
# activation peak and available KV memory a V0 worker other than rank 0 printed (it does not
# sample, so it prints more than the pool, which is rank 0's);
# llama.cpp: the model, KV and compute buffer sizes of the GPU.
ENGINE_COUNTERS = {
    "weights": True, "non_torch": True, "activation": True, "kv_cache": True,
    "worker_activation": True, "worker_kv_cache": True,
    "kv_blocks": False, "kv_tokens": False, "max_concurrency": False, "cuda_graphs": True,
    "compute_buffer": True,
}
# The counters measured as a ratio, not a whole number of bytes or of blocks or tokens.
RATIO_COUNTERS = ("max_concurrency",)
LIMIT = 0.10
# llama.cpp's buffers as it prints them, each held to within 64 MiB by --check
LLAMACPP_BUFFERS = ("weights", "kv_cache", "compute_buffer")
GIB = float(1 << 30)
MIB = float(1 << 20)

# The rows a source may skip, by the reason its `needs` column gives, with their number:
# what gpumem does not model.  Anything else skipped fails --check.
EXPECTED_SKIPS = {
    ("torchtitan_llama3_h100",
     "pipeline parallelism with FSDP under AsyncTP: not validated"): 6,
    ("torchtitan_nvfp4_doc", "NVFP4 training"): 4,
    ("vllm_startup_logs", "gpu_memory_utilization the source does not give"): 1,
}


def load(path):
    with open(path, newline="") as f:
        lines = [l for l in f if not l.startswith("#")]
    return list(csv.DictReader(lines))


def print_judged(source, counter, errs, judged):
    """The summary line of the judged rows alone (errs less the fit rows), where both kinds are
    in errs: what a constant fitted on some rows is judged by."""
    n_fit = len(errs) - len(judged)
    if n_fit and judged:
        print("%-26s %-17s %5d  %s  (judged: %d fit row%s left out)" %
              (source, counter, len(judged), summary(judged), n_fit, "" if n_fit == 1 else "s"))


def fit_rows(path):
    """The ids a table's "# fit: ID ... -- what was set from them" comment lines name: the rows a
    constant of gpumem was set from, which judge nothing."""
    ids = set()
    with open(path, newline="") as f:
        for line in f:
            if line.startswith("# fit:"):
                ids.update(line[len("# fit:"):].split("--", 1)[0].split())
    return ids


def estimate(gpumem, args):
    r = subprocess.run([gpumem, "estimate"] + shlex.split(args) + ["--json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip() or "exit %d" % r.returncode
    return json.loads(r.stdout), None


def estimate_all(gpumem, args):
    """{args: estimate(gpumem, args)} for every distinct argument string, run on every CPU this
    process may use (the runs of a table measured on two counters share their arguments)."""
    uniq = sorted(set(args))
    jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs or 1)) as pool:
        return dict(zip(uniq, pool.map(lambda a: estimate(gpumem, a), uniq)))


def usable(row):
    """Whether a row runs: no feature it still needs, an expectation and a counter known."""
    return (not row["needs"] and row["expect"] in ("value", "does_not_fit") and
            (row["counter"] in COUNTER_KEY or row["counter"] in ENGINE_COUNTERS))


def component_bytes(doc, kind, name=None):
    """The bytes of the components of one kind (and name), or None when there are none."""
    found = [c["bytes"] for c in doc["components"]
             if c["kind"] == kind and (name is None or c["name"] == name)]
    return sum(found) if found else None


def predicted(doc, counter):
    """gpumem's figure for a counter, from `estimate --json`; None when it gives none."""
    if counter in COUNTER_KEY:
        return doc["peak"][COUNTER_KEY[counter]]
    serving = doc.get("serving") or {}
    if counter == "weights":
        return component_bytes(doc, "weights")
    if counter == "kv_cache":
        if "kv_pool_bytes" in serving:
            return serving["kv_pool_bytes"]
        return component_bytes(doc, "kv_cache")
    if counter == "kv_tokens" and "kv_tokens_logged" in serving:
        return serving["kv_tokens_logged"]
    if counter == "cuda_graphs":
        return component_bytes(doc, "engine_pool", "cuda_graphs") or 0
    key = {"non_torch": "non_torch_logged_bytes", "activation": "activation_peak_bytes",
           "worker_activation": "worker_activation_peak_bytes",
           "worker_kv_cache": "worker_kv_available_bytes",
           "kv_blocks": "kv_blocks", "kv_tokens": "kv_tokens",
           "max_concurrency": "max_concurrency", "compute_buffer": "compute_buffer_bytes"}[counter]
    return serving.get(key)


def pct(x):
    return "%5.1f%%" % (100.0 * x)


def p90(values):
    """The 90th percentile of 'values', linearly interpolated between the closest ranks (as
    numpy's default and statistics.quantiles(method='inclusive') give it)."""
    v = sorted(values)
    k = (len(v) - 1) * 0.9
    lo = int(k)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def summary(errs, diffs=None):
    """Median |relative error|, share within 10% and the 90th percentile of |error|; with
    'diffs' (predicted minus measured, bytes) also the median |difference| in MiB and the share
    within 64 MiB."""
    if not errs:
        return "      -             -"
    med = statistics.median(abs(e) for e in errs)
    within = sum(abs(e) <= LIMIT for e in errs) / len(errs)
    line = "%s  %s within 10%%" % (pct(med), pct(within))
    if diffs:
        line += "  %8.0f MiB  %s within 64 MiB" % (
            statistics.median(abs(d) for d in diffs) / MIB,
            pct(sum(abs(d) <= 64 * MIB for d in diffs) / len(diffs)))
    return line + "  p90 %s" % pct(p90(abs(e) for e in errs)).strip()


def gap_lines(runs):
    """The gap lines of one source: 'runs' maps (source_row, args) to {counter: (id, measured,
    predicted)}; returns the lines, per run measured on allocated and device, and a summary."""
    lines, errs = [], []
    for key in sorted(runs, key=lambda k: min(v[0] for v in runs[k].values())):
        c = runs[key]
        if "allocated" not in c or "device" not in c:
            continue
        (aid, ma, pa), (did, md, pd) = c["allocated"], c["device"]
        rid = os.path.commonprefix([aid, did]).rstrip("-_") or aid
        gm, gp = (md - ma) / GIB, (pd - pa) / GIB
        errs.append(gp - gm)
        lines.append("  %-28s allocated %+6.1f%%  device %+6.1f%%  gap measured %6.2f predicted "
                     "%6.2f GiB (%+.2f)" % (rid, 100 * (pa / ma - 1), 100 * (pd / md - 1), gm, gp,
                                            gp - gm))
    if errs:
        lines.append("  gap: %d runs, median |error| %.2f GiB, predicted too small in %d" %
                     (len(errs), statistics.median(abs(e) for e in errs),
                      sum(e < 0 for e in errs)))
    return lines


def gpu_count(doc):
    """The GPUs of an estimate: the devices of all its roles, one when it names none."""
    return sum(d.get("count", 1) for d in doc.get("devices") or []) or 1


def replayed_device(row, doc):
    """The replay's own device figure (bytes) of a device row whose step the estimate replayed:
    the estimate's device figure with the replay's reserved peak in place of its own; None when
    the row is not a device row, the step was not replayed, or the replay ran out of memory
    (then its figure is not what a run that fit held)."""
    replay = doc.get("replay")
    if row["counter"] != "device" or not replay or replay.get("oom"):
        return None
    peak = doc["peak"]
    return peak["device_bytes"] - peak["reserved_bytes"] + replay["reserved_peak_bytes"]


def beyond_replay(row, doc):
    """(GiB, fp32 logits copies, loss form, GPUs, whether the replay emptied its cache) of a
    device row beyond the replay's own device figure, or None when the estimate did not replay
    the step (or the replay ran out of memory: then its figure is not what a run that fit held)."""
    replayed = replayed_device(row, doc)
    if replayed is None:
        return None
    # the fp32 logits of one GPU as the estimate counts them: the loss's tokens there and the
    # vocabulary its logits hold (V / tp)
    copy = 4 * doc["phases"]["loss_tokens"] * doc["phases"]["loss_vocab"]
    if not copy:
        return None
    beyond = int(row["measured"]) - replayed
    return (beyond / GIB, beyond / float(copy), doc["inputs"]["loss"], gpu_count(doc),
            doc["replay"].get("oom_retries", 0) > 0)


def beyond_replay_lines(source, found):
    """The --beyond-replay lines of one source: 'found' lists (id, beyond_replay(...)); the
    runs whose replay emptied its cache (at the card's capacity) are summed up apart."""
    lines, groups = [], {}
    for rid, (gib, copies, loss, gpus, emptied) in found:
        where = "1 GPU" if gpus == 1 else "%d GPUs" % gpus
        lines.append("  %-28s device beyond the replay %+7.2f GiB = %+5.2f fp32 logits copies "
                     "(loss %s, %s%s)" % (rid, gib, copies, loss, where,
                                          ", replay emptied its cache" if emptied else ""))
        key = (loss, "1 GPU" if gpus == 1 else "several GPUs",
               " (replay emptied its cache)" if emptied else "")
        groups.setdefault(key, []).append(copies)
    for (loss, where, emptied), copies in sorted(groups.items()):
        lines.append("%-26s beyond replay  %5d  loss %s, %s%s: median %+.2f fp32 logits copies "
                     "(%+.2f to %+.2f)" % (source, len(copies), loss, where, emptied,
                                           statistics.median(copies), min(copies), max(copies)))
    return lines


def setup_of(doc):
    """The setup a device row is grouped by in --by-setup, from the estimate's typed inputs:
    what is trained (full, lora, qlora, or lora on a quantised base such as gptq-lora), the
    loss form, one GPU or several."""
    lora = (doc.get("setup") or {}).get("lora", "none")
    quant = doc["inputs"].get("quant")
    what = "full" if lora == "none" else ("%s-lora" % quant if quant and lora == "lora" else lora)
    return (what, doc["inputs"]["loss"], "1 GPU" if gpu_count(doc) == 1 else "several GPUs")


def by_setup(row, doc):
    """(setup, error of the estimate, error of the replay's own device figure, whether the
    HF stack's floor decided) of a device row whose step the estimate replayed, or None (not
    replayed, or the replay ran out of memory)."""
    replayed = replayed_device(row, doc)
    if replayed is None:
        return None
    measured = int(row["measured"])
    return (setup_of(doc), doc["peak"]["device_bytes"] / measured - 1.0,
            replayed / measured - 1.0, bool(doc["replay"].get("floor_decides")))


def by_setup_lines(source, found):
    """The --by-setup lines of one source: 'found' lists by_setup(...) results; per setup the
    rows, the estimate's median |error| and share within 10%, its median signed error, the
    replay's own median signed error, and in how many rows the floor decided."""
    groups, lines = {}, []
    for setup, est, rep, floor in found:
        groups.setdefault(setup, []).append((est, rep, floor))
    for (what, loss, where), v in sorted(groups.items()):
        est = [e for e, _, _ in v]
        lines.append("%-26s by setup %5d  %s, loss %s, %s: median |error| %.1f%%, %.0f%% "
                     "within 10%%, median %+.1f%%; replay alone median %+.1f%%; floor decides "
                     "%d" % (source, len(v), what, loss, where,
                             100 * statistics.median(abs(e) for e in est),
                             100 * sum(abs(e) <= LIMIT for e in est) / len(est),
                             100 * statistics.median(est),
                             100 * statistics.median(r for _, r, _ in v),
                             sum(f for _, _, f in v)))
    return lines


def stream_floor(row, doc):
    """(floor, replay above it, measured minus it, in GiB; expandable segments) of a reserved
    row whose step the estimate replayed, or None (not replayed, out of memory, or the cache
    freed on the way: then a stream's reservation can fall below its live peak)."""
    replay = doc.get("replay")
    if (row["counter"] != "reserved" or not replay or replay.get("oom") or
            doc["replay"].get("oom_retries", 0) > 0):
        return None
    floor = sum(replay["live_peak_by_stream_bytes"].values())
    return (floor / GIB, (replay["reserved_peak_bytes"] - floor) / GIB,
            (int(row["measured"]) - floor) / GIB, replay["expandable_segments"])


def stream_floor_lines(source, found):
    """The --stream-floor lines of one source: 'found' lists (id, stream_floor(...)), summed
    up per allocator setting."""
    lines, groups = [], {}
    for rid, (floor, above, measured, expandable) in found:
        conf = "expandable segments" if expandable else "default allocator"
        lines.append("  %-28s stream floor %7.2f GiB: replay above it %+6.2f, measured %+6.2f "
                     "(%s)" % (rid, floor, above, measured, conf))
        groups.setdefault(conf, []).append((above, measured))
    for conf, v in sorted(groups.items()):
        lines.append("%-26s stream floor  %5d  %s: replay above it median %+.2f GiB, measured "
                     "median %+.2f GiB, below the floor in %d" %
                     (source, len(v), conf, statistics.median(a for a, _ in v),
                      statistics.median(m for _, m in v), sum(m < 0 for _, m in v)))
    return lines


def vllm_generation(doc):
    """The vLLM engine generation of an estimate, for grouping: V0 before 0.8, V1 0.8 to 0.10,
    V1 from 0.11 (and the current release)."""
    v = (doc.get("inputs") or {}).get("vllm_version", "current")
    if v == "current":
        return "V1 0.11+"
    parts = tuple(int(x) for x in v.split(".")[:2])
    return "V0" if parts < (0, 8) else "V1 0.8-0.10" if parts < (0, 11) else "V1 0.11+"


def implied_non_torch(counters, args, doc):
    """(predicted, implied, printed) non-torch bytes of a vLLM run whose printed KV memory is a
    row ('counters' maps the run's counters to (id, measured, predicted)).  vLLM sizes its KV
    pool as budget - weights - profile peak - non-torch (from 0.21 also - its CUDA-graph
    estimate; docs/estimate.md, "vLLM's budget by version"), so the printed KV memory implies
    the non-torch figure the version charged: gpumem's charged figure, plus gpumem's KV pool less
    the printed one, plus gpumem's weights and profile peak less the printed ones where the run
    prints them.  gpumem's pool is whole blocks, so the implied figure is low by less than one
    block.  printed: the run's non_torch row, or None.  None where the run has no kv_cache row,
    is not vLLM's, or is given its pool (--kv-cache-memory-bytes: no budget sizes it)."""
    serving = doc.get("serving") or {}
    if ("kv_cache" not in counters or serving.get("engine") != "vllm" or
            "--kv-cache-memory-bytes" in shlex.split(args)):
        return None
    pred = serving["non_torch_logged_bytes"]
    implied = pred + counters["kv_cache"][2] - counters["kv_cache"][1]
    for counter in ("weights", "activation"):
        if counter in counters:
            implied += counters[counter][2] - counters[counter][1]
    printed = counters["non_torch"][1] if "non_torch" in counters else None
    return pred, implied, printed


def implied_non_torch_lines(source, runs, results):
    """The --implied-non-torch lines of one source: per vLLM run with a printed KV memory, the
    non-torch figure gpumem charges, the one the printed KV memory implies and the printed one,
    in MiB, with the engine generation, the tensor parallelism and whether the estimate puts
    NCCL buffers on the device; then per generation and tp = 1 / tp >= 2 the median of implied
    less charged."""
    lines, groups = [], {}
    for (source_row, args), counters in sorted(runs.items(),
                                               key=lambda kv: min(v[0] for v in kv[1].values())):
        doc = results[args][0]
        found = implied_non_torch(counters, args, doc) if doc else None
        if found is None:
            continue
        pred, implied, printed = found
        gen = vllm_generation(doc)
        tp = (doc.get("setup") or {}).get("tp", 1)
        nccl = (doc.get("overheads") or {}).get("nccl_bytes", 0) > 0
        rid = counters["kv_cache"][0].rsplit("-kv-cache", 1)[0]
        groups.setdefault((gen, "tp 1" if tp == 1 else "tp >= 2"), []).append(implied - pred)
        lines.append("  %-12s %-11s tp %d%s  non-torch charged %7.0f implied %7.0f MiB (%+6.0f)%s"
                     % (rid, gen, tp, " nccl" if nccl else "     ", pred / MIB, implied / MIB,
                        (implied - pred) / MIB,
                        "  printed %.0f" % (printed / MIB) if printed is not None else ""))
    for key in sorted(groups):
        d = groups[key]
        lines.append("%-26s implied non-torch %-11s %-7s %3d runs, median implied - charged "
                     "%+6.0f MiB, charged too much in %d" %
                     (source, key[0], key[1], len(d), statistics.median(d) / MIB,
                      sum(x < 0 for x in d)))
    return lines


def run_sample(gpumem, tables, step):
    """Every step-th distinct argument list of the usable rows, each of which must succeed."""
    distinct = sorted({r["args"] for t in tables.values() for r in t
                       if usable(r) and not r["needs"]})
    chosen = distinct[::max(step, 1)]
    results = estimate_all(gpumem, chosen)
    failures = ["%s: %s" % (a, results[a][1]) for a in chosen if results[a][0] is None]
    for f in failures:
        print("FAIL: " + f)
    print("%d of %d distinct runs (every %d), %d failed" %
          (len(chosen), len(distinct), step, len(failures)))
    return 1 if failures else 0


def main(argv):
    check = "--check" in argv
    rows_out = "--rows" in argv
    gaps_out = "--gaps" in argv
    beyond_out = "--beyond-replay" in argv
    floor_out = "--stream-floor" in argv
    setup_out = "--by-setup" in argv
    implied_out = "--implied-non-torch" in argv
    pos = [a for a in argv if not a.startswith("--")]
    if len(pos) != 2:
        sys.stderr.write(__doc__)
        return 64
    gpumem, data = pos
    files = sorted(f for f in os.listdir(data) if f.endswith(".csv"))
    tables = {name: load(os.path.join(data, name)) for name in files}
    fits = {name: fit_rows(os.path.join(data, name)) for name in files}
    sample = [a for a in argv if a.startswith("--sample=")]
    if sample:
        return run_sample(gpumem, tables, int(sample[0].split("=", 1)[1]))
    results = estimate_all(gpumem, [r["args"] for t in tables.values() for r in t if usable(r)])
    failures = []
    skips = {}
    by_counter = {}
    all_errs = []
    engine_errs = []
    judged_all = []
    judged_engine = []
    judged_by_counter = {}
    by_diff = {}
    print("%-26s %-17s %5s  %-32s" % ("source", "counter", "rows", "median |error|"))
    for name in files:
        source = name[:-4]
        errs = {}
        judged = {}
        diffs = {}
        ids = {row["id"] for row in tables[name]}
        for fid in sorted(fits[name] - ids):
            failures.append("%s: fit row '%s' is no row of the table" % (source, fid))
        verdicts = {"does_not_fit": 0, "borderline": 0, "fits": 0}
        skipped = {}
        runs = {}
        beyond = []
        floors = []
        setups = []
        for row in tables[name]:
            if row["needs"]:
                skipped[row["needs"]] = skipped.get(row["needs"], 0) + 1
                skips[(source, row["needs"])] = skips.get((source, row["needs"]), 0) + 1
                continue
            if not usable(row):
                failures.append("%s: unknown expect '%s' or counter '%s'" %
                                (row["id"], row["expect"], row["counter"]))
                continue
            doc, err = results[row["args"]]
            if doc is None:
                failures.append("%s: %s" % (row["id"], err))
                continue
            if row["expect"] == "does_not_fit":
                v = doc["fit"]["verdict"]
                verdicts[v] = verdicts.get(v, 0) + 1
                if rows_out:
                    print("  %-28s verdict %s (expected does_not_fit)" % (row["id"], v))
                continue
            ratio = row["counter"] in RATIO_COUNTERS
            measured = float(row["measured"]) if ratio else int(row["measured"])
            pred = predicted(doc, row["counter"])
            if pred is None or measured <= 0:
                failures.append("%s: no figure for '%s' (measured %s)" %
                                (row["id"], row["counter"], measured))
                continue
            e = pred / measured - 1.0
            if (doc.get("serving", {}).get("engine") == "llama.cpp" and
                    row["counter"] in LLAMACPP_BUFFERS and abs(pred - measured) > 64 * MIB):
                failures.append("%s: llama.cpp %s %+.2f MiB off (the goal: within 64 MiB)" %
                                (row["id"], row["counter"], (pred - measured) / MIB))
            errs.setdefault(row["counter"], []).append(e)
            fit = row["id"] in fits[name]
            if not fit:
                judged.setdefault(row["counter"], []).append(e)
                judged_by_counter.setdefault(row["counter"], []).append(e)
                (judged_engine if row["counter"] in ENGINE_COUNTERS else judged_all).append(e)
            if ENGINE_COUNTERS.get(row["counter"]):
                diffs.setdefault(row["counter"], []).append(pred - measured)
                by_diff.setdefault(row["counter"], []).append(pred - measured)
            runs.setdefault((row["source_row"], row["args"]), {})[row["counter"]] = (
                row["id"], measured, pred)
            found = beyond_replay(row, doc) if beyond_out else None
            if found is not None:
                beyond.append((row["id"], found))
            found = stream_floor(row, doc) if floor_out else None
            if found is not None:
                floors.append((row["id"], found))
            found = by_setup(row, doc) if setup_out else None
            if found is not None:
                setups.append(found)
            by_counter.setdefault(row["counter"], []).append(e)
            (engine_errs if row["counter"] in ENGINE_COUNTERS else all_errs).append(e)
            if rows_out:
                fmt = "%15.2f" if ratio else "%15d"
                print(("  %-28s %-17s measured " + fmt + " predicted " + fmt + " %+6.1f%%%s") %
                      (row["id"], row["counter"], measured, pred, 100 * e,
                       "  (fit row)" if fit else ""))
        for counter in sorted(errs):
            print("%-26s %-17s %5d  %s" % (source, counter, len(errs[counter]),
                                            summary(errs[counter], diffs.get(counter))))
            print_judged(source, counter, errs[counter], judged.get(counter, []))
        n_verdict = sum(verdicts.values())
        if n_verdict:
            print("%-26s %-17s %5d  out-of-memory runs: %d does not fit, %d borderline, %d fits" %
                  (source, "verdict", n_verdict, verdicts["does_not_fit"],
                   verdicts["borderline"], verdicts["fits"]))
        for reason, n in sorted(skipped.items()):
            print("%-26s %-17s %5d  skipped: needs %s" % (source, "-", n, reason))
        if gaps_out:
            for line in gap_lines(runs):
                print(line)
        for line in beyond_replay_lines(source, beyond):
            print(line)
        for line in stream_floor_lines(source, floors):
            print(line)
        for line in by_setup_lines(source, setups):
            print(line)
        if implied_out:
            for line in implied_non_torch_lines(source, runs, results):
                print(line)
    print()
    for counter in sorted(by_counter):
        print("%-26s %-17s %5d  %s" % ("all sources", counter, len(by_counter[counter]),
                                        summary(by_counter[counter], by_diff.get(counter))))
        print_judged("all sources", counter, by_counter[counter],
                     judged_by_counter.get(counter, []))
    print("%-26s %-17s %5d  %s" % ("all sources", "all peaks", len(all_errs), summary(all_errs)))
    print_judged("all sources", "all peaks", all_errs, judged_all)
    if engine_errs:
        print("%-26s %-17s %5d  %s" % ("all sources", "all engine", len(engine_errs),
                                        summary(engine_errs)))
        print_judged("all sources", "all engine", engine_errs, judged_engine)
    # the declared skips of the sources in DATA_DIR (another folder holds other tables)
    present = {name[:-4] for name in files}
    for key in sorted(set(skips) | {k for k in EXPECTED_SKIPS if k[0] in present}):
        if skips.get(key, 0) != EXPECTED_SKIPS.get(key, 0):
            failures.append("%s: %d rows skipped as needing '%s', %d expected" %
                            (key[0], skips.get(key, 0), key[1], EXPECTED_SKIPS.get(key, 0)))
    for f in failures:
        print("FAIL: " + f)
    if check:
        if failures:
            return 1
        if not all_errs:
            print("no measured rows")
            return 1
        # the rows a constant was set from judge nothing: the medians are the judged rows'
        for what, errs in (("peak", judged_all), ("engine", judged_engine)):
            med = statistics.median(abs(e) for e in errs) if errs else 0.0
            if med > LIMIT:
                print("FAIL: median |error| of the %s rows %s is above 10%%" %
                      (what, pct(med).strip()))
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
