# SPDX-License-Identifier: MIT
"""A training loop on the fake torch (tests/python/fake_torch) measured with gpumem.torch,
for the tests of gpumem watch's phase metrics: weights of 256 MiB, then per step a forward
that keeps BATCH x 64 MiB of activations and a backward that frees them; the series goes to
$GPUMEM_TORCH_OUTPUT (gpumem watch sets it) and is saved to --copy too, for the test to
compare with.

usage: phases_fake.py --batch N --copy PATH [--steps 2]"""
import argparse

import torch

import gpumem.torch as gmt

MIB = 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--copy", required=True)
    ap.add_argument("--steps", type=int, default=2)
    a = ap.parse_args()
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
