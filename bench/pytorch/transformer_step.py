#!/usr/bin/env python3
"""transformer_step.py: a 6-layer transformer encoder training step (issue 5,
workload 3a): d_model 512, 8 heads, feed-forward 2048, batch 32 x 256, AdamW,
float32, dropout 0.1, MSE loss against a random target.

Run it three ways and compare (scripts/gpu-check does):
  python3 transformer_step.py                                   PyTorch's caching allocator
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 python3 transformer_step.py  caching off
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 LD_PRELOAD=build/libcudapool.so python3 transformer_step.py

Prints one JSON line on stdout (bench/pytorch/common.py: emit): median step
time over --steps steps after --warmup, the loss after the last step (full
precision, and as float.hex), and peak memory: torch.cuda.max_memory_reserved
with caching on, cudapool's reserved peak when caching is off under the shim.
The same --seed gives the same loss whatever the allocator: the inputs are
fixed, deterministic algorithms are requested, and attention uses PyTorch's
math kernel (--sdpa math, the default) whose backward has no atomics.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

common.prepare_environment()
import torch  # noqa: E402
from torch import nn  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--sdpa", choices=["math", "default"], default="math",
                    help="attention kernel: math (deterministic) or PyTorch's choice")
    args = ap.parse_args()
    started = time.perf_counter()

    if not torch.cuda.is_available():
        print("transformer_step: no CUDA device", file=sys.stderr)
        return 2
    peak = common.DevicePeak()
    common.configure_torch(torch, args.seed)
    dev = torch.device("cuda")
    d_model, heads, ff, layers = 512, 8, 2048, 6

    layer = nn.TransformerEncoderLayer(d_model, heads, ff, dropout=0.1, batch_first=True)
    model = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    # A few fixed batches, made on the CPU from the seed, rotated.
    gen = torch.Generator().manual_seed(args.seed)
    batches = [(torch.randn(args.batch, args.seq, d_model, generator=gen).to(dev),
                torch.randn(args.batch, args.seq, d_model, generator=gen).to(dev))
               for _ in range(4)]

    def step(i):
        x, target = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = nn.functional.mse_loss(out, target)
        loss.backward()
        opt.step()
        return loss.detach()

    model.train()
    if args.sdpa == "math":
        from torch.nn.attention import SDPBackend, sdpa_kernel
        with sdpa_kernel(SDPBackend.MATH):
            times, loss = common.time_steps(torch, step, args.warmup, args.steps)
    else:
        times, loss = common.time_steps(torch, step, args.warmup, args.steps)
    common.emit(torch, "transformer", args, times, loss.item(),
                extra={"process_peak_bytes": peak.stop(), "sdpa": args.sdpa, "batch": args.batch, "seq": args.seq},
                started=started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
