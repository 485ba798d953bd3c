# SPDX-License-Identifier: MIT
"""A training job on the fake torch (tests/python/fake_torch), instrumented with gpumem.torch,
for the tests of gpumem sweep: weights of 256 MiB, then per step a forward that keeps
BATCH x 64 MiB of activations, a backward that makes 256 MiB of gradients (once) and frees the
activations, and an optimizer step that makes 512 MiB of state (once).

usage: train_fake.py --batch N [--steps 2] [--capacity-mib 4096] [--bug-at N]
--bug-at N raises a ValueError in forward when the batch is N or more (a bug, not an OOM).
The series goes to $GPUMEM_TORCH_OUTPUT (gpumem sweep sets it)."""
import argparse

import torch

import gpumem.torch as gmt

MIB = 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--capacity-mib", type=int, default=4096)
    ap.add_argument("--bug-at", type=int, default=0)
    a = ap.parse_args()
    torch.cuda.state.reset(capacity=a.capacity_mib * MIB)
    gmt.series(batch=a.batch, steps=a.steps)
    with gmt.phase("model_load"):
        torch.cuda.alloc(256 * MIB)
    grads = state = None
    for step in range(a.steps):
        with gmt.phase("forward", step=step):
            if a.bug_at and a.batch >= a.bug_at:
                raise ValueError("shapes do not match at batch %d" % a.batch)
            acts = [torch.cuda.alloc(64 * MIB) for _ in range(a.batch)]
        with gmt.phase("backward", step=step):
            if grads is None:
                grads = torch.cuda.alloc(256 * MIB)
            for h in acts:
                torch.cuda.free(h)
        with gmt.phase("optimizer_step", step=step):
            if state is None:
                state = torch.cuda.alloc(512 * MIB)
    print("trained %d steps at batch %d" % (a.steps, a.batch))


if __name__ == "__main__":
    main()
