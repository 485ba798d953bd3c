#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scale.py GPUMEM WORK_DIR - a job of 256 ranks, simulated: one synthetic snapshot a rank
(../shared/tools/synth-snapshot, $GM_SYNTH, one seed a rank; rank 137 skewed with four times
the batch), named as torchtitan names them, generated once into WORK_DIR (the build tree).

Checks that every rank is digested, that the job's commands read the 256 digests, the 256
snapshots and the two mixed alike (ranks numbered by the file names, the same figures), that
the skewed rank holds the job's peak and is the one outlier, and that the report page over
the digests carries the job's peak, its rank and the outlier."""
import json
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

N_RANKS = 256
SKEWED = 137

gpumem, work = sys.argv[1], sys.argv[2]
synth = os.environ["GM_SYNTH"]
snaps = os.path.join(work, "memory_snapshot", "iteration_2")
digests = os.path.join(work, "digests")
os.makedirs(snaps, exist_ok=True)
os.makedirs(digests, exist_ok=True)
failures = 0


def check(ok, what):
    global failures
    print(("ok    " if ok else "FAIL  ") + what)
    failures += 0 if ok else 1


def snapshot(r):
    path = os.path.join(snaps, "rank%d_memory_snapshot.pickle" % r)
    if not os.path.exists(path):
        batch = "8" if r == SKEWED else "2"
        subprocess.run([synth, "-o", path + ".tmp", "--layers", "2", "--hidden", "128",
                        "--seq", "64", "--vocab", "1000", "--iterations", "2", "--batch", batch,
                        "--seed", str(r + 1), "--quiet"], check=True)
        os.rename(path + ".tmp", path)
    return path


def digest(r):
    out = os.path.join(digests, "rank%d.digest" % r)
    subprocess.run([gpumem, "snapshot", "digest", snapshot(r), "-o", out, "--force",
                    "--host", "node%d" % (r // 8)], check=True)
    return out


def run_json(args):
    return json.loads(subprocess.run([gpumem, "snapshot"] + args, check=True,
                                     capture_output=True, text=True).stdout)


t0 = time.monotonic()
with ThreadPoolExecutor(max_workers=2) as ex:
    paths = list(ex.map(digest, range(N_RANKS)))
print("      %d ranks generated and digested in %.1f s" % (N_RANKS, time.monotonic() - t0))
sizes = [os.path.getsize(p) for p in paths]
check(max(sizes) < 64 * 1024, "every digest is small (at most %d bytes)" % max(sizes))

# the folder of digests, the folder of snapshots (torchtitan's layout), and the two mixed
from_digests = run_json(["stats", "--json", digests])
from_snaps = run_json(["stats", "--json", os.path.join(work, "memory_snapshot")])
mixed_args = [p if r % 2 else os.path.join(snaps, "rank%d_memory_snapshot.pickle" % r)
              for r, p in enumerate(paths)]
mixed_args.reverse()  # the order of the arguments does not matter: the names number the ranks
mixed = run_json(["stats", "--json"] + mixed_args)


def figures(doc):
    return [{k: v for k, v in r.items() if k != "file"} for r in doc["ranks"]]


check(len(from_digests["ranks"]) == N_RANKS, "%d ranks read from the digests" % len(from_digests["ranks"]))
check([r["rank"] for r in from_digests["ranks"]] == list(range(N_RANKS)) and
      all(r["rank_from"] == "file name" for r in from_digests["ranks"]),
      "ranks 0..255 in order, numbered by their file names")
check(figures(from_digests) == figures(from_snaps), "the digests give the snapshots' figures, rank by rank")
check(figures(mixed) == figures(from_snaps), "digests and snapshots mixed (in reverse order) give them too")
imb = from_digests["imbalance"]
check(imb["max_rank"] == SKEWED, "the skewed rank holds the job's peak (rank %d)" % imb["max_rank"])

text = subprocess.run([gpumem, "snapshot", "stats", digests], check=True, capture_output=True,
                      text=True).stdout
m = re.search(r"^outliers.*$", text, re.M)
check(m is not None and ("rank %d " % SKEWED) in m.group(0) and m.group(0).count("rank ") == 1,
      "the text names the skewed rank as the one outlier: %s" % (m.group(0) if m else None))

html = os.path.join(work, "job.html")
t0 = time.monotonic()
subprocess.run([gpumem, "snapshot", "report", digests, "-o", html, "--force"], check=True)
print("      report over %d digests in %.2f s" % (N_RANKS, time.monotonic() - t0))
page = open(html, encoding="utf-8").read()
data = json.loads(re.search(r'<script type="application/json" id="gm-data">(.*?)</script>',
                            page, re.S).group(1))
job = data["job"]
check(job["rank_ids"][job["peak_rank"]] == SKEWED,
      "the page's header data: the job's peak on rank %d" % job["rank_ids"][job["peak_rank"]])
check(job["peak"] == from_digests["spread"][0]["peak_bytes"]["max"], "the job's peak is the largest rank peak")
check([job["rank_ids"][i] for i in job["outliers"]] == [SKEWED], "the page lists the skewed rank as the outlier")
check(all(len(r["digest"]["series"]) > 0 for r in data["ranks"]), "every rank brings its series for the heatmap")
sys.exit(1 if failures else 0)
