# SPDX-License-Identifier: MIT
"""A training loop on the fake torch (tests/python/fake_torch) measured with gpumem.torch,
for the tests of gpumem watch's phase metrics: weights of 256 MiB, then per step a forward
that keeps BATCH x 64 MiB of activations and a backward that frees them; the series goes to
$GPUMEM_TORCH_OUTPUT (gpumem watch sets it) and is saved to --copy too, for the test to
compare with.

With --store FOLDER --rank R --world N it first joins a process group of N ranks over FOLDER
(the fake's torch.distributed), as a torchrun job does.

usage: phases_fake.py --batch N --copy PATH [--steps 2] [--store FOLDER --rank R --world N]"""
import argparse

import torch
import torch.distributed

import gpumem.torch as gmt

MIB = 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--copy", required=True)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--store")
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=1)
    a = ap.parse_args()
    if a.store:
        torch.distributed.init_process_group("nccl", init_method="file://" + a.store, rank=a.rank,
                                             world_size=a.world)
    torch.cuda.state.reset(capacity=8192 * MIB)
    s = gmt.series(batch=a.batch)
    s.save(a.copy)
    with gmt.phase("model_load"):
        torch.cuda.alloc(256 * MIB)
    for step in range(a.steps):
        with gmt.phase("forward", step=step):
            acts = [torch.cuda.alloc(64 * MIB) for _ in range(a.batch * (step + 1))]
        with gmt.phase("backward", step=step):
            for h in acts:
                torch.cuda.free(h)


if __name__ == "__main__":
    main()
