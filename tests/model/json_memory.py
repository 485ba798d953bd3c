#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""json_memory.py GPUMEM WORKDIR - JSON inputs are parsed within a memory budget.

Hostile documents made of tiny objects take about 85 times their size once jansson has
built its tree.  Each is run under an address-space limit of 1 GiB (setrlimit RLIMIT_AS,
what `ulimit -v` sets) and must be refused with exit 65 and a message that says how much
it would have taken, with a peak RSS (ru_maxrss of the child) below 2 times the file size
plus 32 MiB, never a crash, exit 70 or an empty message.  The same for the four kinds of
document `gpumem sheet` reads (estimate, measure series, environment, sweep), and its
--memory-limit: a 600 kB document that fits the default budget is refused under a 1 MiB
limit, before its tree is built.  (That real headers stay within the budget is a unit
test: test_safetensors.c, test_large_real_header.)"""
import os
import resource
import struct
import subprocess
import sys

GPUMEM, WORK = sys.argv[1], sys.argv[2]
LIMIT = 1 << 30
fails = 0


def run(args):
    """Exit status, stderr and the peak RSS in bytes of one gpumem run."""
    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))
    p = subprocess.Popen([GPUMEM] + args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=limit)
    err = p.stderr.read().decode(errors="replace")
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, err, ru.ru_maxrss * 1024


def check(name, args, size, want_rc, want_text):
    global fails
    rc, err, rss = run(args)
    ratio = rss / size
    ok = rc == want_rc and want_text in err and rss < 2 * size + (32 << 20)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {rc}, peak RSS {rss >> 20} MiB for a "
          f"{size >> 20} MiB file (ratio {ratio:.2f}): {err.strip()[:160]}")
    if not ok:
        fails += 1


def safetensors(path, header, data=b""):
    h = header.encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)
    return 8 + len(h) + len(data)


os.makedirs(WORK, exist_ok=True)
# The files are written first and the text dropped before any run: the child's peak RSS
# counts the pages it shares with this process between fork and exec.
many = ",".join(["{}"] * 10_000_000)  # 30 MB of "{},"
meta = os.path.join(WORK, "meta.safetensors")
meta_size = safetensors(meta, '{"__metadata__":[' + many + ']}')
index_dir = os.path.join(WORK, "index")
os.makedirs(index_dir, exist_ok=True)
with open(os.path.join(index_dir, "model.safetensors.index.json"), "w") as f:
    f.write('{"metadata":[' + many + '],"weight_map":{"a":"a.safetensors"}}')
config_dir = os.path.join(WORK, "config")
os.makedirs(config_dir, exist_ok=True)
with open(os.path.join(config_dir, "config.json"), "w") as f:
    f.write('{"x":[' + many[: 3 * 5_000_000 - 1] + ']}')  # 15 MB, under the 16 MiB cap
sheet_docs = {}
for schema in ("gpumem.estimate/1", "gpumem.measure/1", "gpumem.environment/1",
               "gpumem.sweep/1"):
    path = os.path.join(WORK, schema.split(".")[1].split("/")[0] + ".json")
    with open(path, "w") as f:
        f.write('{"schema":"%s","x":[%s]}' % (schema, many))
    sheet_docs[schema] = path
small = os.path.join(WORK, "small_estimate.json")
with open(small, "w") as f:  # 600 kB of numbers: well within the default budget
    f.write('{"schema":"gpumem.estimate/1","x":[' + ",".join(["1234567"] * 75_000) + "]}")
del many

check("safetensors header of empty objects", ["estimate", meta], meta_size, 65,
      "over the budget")
check("index.json of empty objects", ["estimate", index_dir],
      os.path.getsize(os.path.join(index_dir, "model.safetensors.index.json")), 65,
      "over the budget")
check("config.json of empty objects", ["estimate", os.path.join(config_dir, "config.json")],
      os.path.getsize(os.path.join(config_dir, "config.json")), 65, "over the budget")

for schema, path in sheet_docs.items():
    check("sheet: %s of empty objects" % schema, ["sheet", path], os.path.getsize(path), 65,
          "over the budget")
check("sheet --memory-limit 1MiB: a 600 kB document", ["sheet", "--memory-limit", "1MiB", small],
      os.path.getsize(small), 65, "over the memory limit of 1.00 MiB")
rc, err, _ = run(["sheet", small])
if rc != 0:
    print("FAIL sheet of the 600 kB document without a limit: exit %d: %s" % (rc, err.strip()))
    fails += 1

for name in ("meta.safetensors", "index/model.safetensors.index.json",
             "config/config.json"):
    os.unlink(os.path.join(WORK, name))
for path in list(sheet_docs.values()) + [small]:
    os.unlink(path)
sys.exit(1 if fails else 0)
