#!/usr/bin/env python3
"""gpt2_varlen.py: a GPT-2-style causal language model trained on random
token batches of varying length (issue 5, workload 3b): transformers'
GPT2Config with 6 layers, 768 wide, 12 heads, vocabulary 32000, random
initialisation (nothing is downloaded), AdamW, float32.

Every step draws its sequence length from a seeded generator (--min-len to
--max-len), so tensor sizes change from step to step: the allocation pattern
that exact-size caches handle badly. Run natively with PyTorch's caching
allocator, with PYTORCH_NO_CUDA_MEMORY_CACHING=1, and with that plus
LD_PRELOAD=build/libcudapool.so; scripts/gpu-check does all three.

Prints one JSON line on stdout (bench/pytorch/common.py: emit): median step
time, loss after the last step (full precision and float.hex), peak memory.
The same --seed gives the same loss: fixed data, deterministic algorithms,
and eager attention (--attn eager, the default).
"""

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

common.prepare_environment()
import torch  # noqa: E402


def build_model(args):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=args.vocab, n_positions=args.max_len, n_embd=768, n_layer=6,
                     n_head=12, attn_implementation=args.attn)
    try:
        cfg._attn_implementation = args.attn
    except Exception:  # older or newer config classes: the keyword above did it
        pass
    return GPT2LMHeadModel(cfg)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--min-len", type=int, default=64)
    ap.add_argument("--max-len", type=int, default=512)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--attn", choices=["eager", "sdpa"], default="eager",
                    help="attention implementation: eager (deterministic) or sdpa")
    args = ap.parse_args()
    started = time.perf_counter()

    if not torch.cuda.is_available():
        print("gpt2_varlen: no CUDA device", file=sys.stderr)
        return 2
    peak = common.DevicePeak()
    common.configure_torch(torch, args.seed)
    dev = torch.device("cuda")
    model = build_model(args).to(dev)  # initialised on the CPU from the seed
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)

    # All batches made up front from the seed: lengths vary per step.
    rnd = random.Random(args.seed)
    gen = torch.Generator().manual_seed(args.seed)
    n = args.warmup + args.steps
    lengths = [rnd.randint(args.min_len, args.max_len) for _ in range(n)]
    batches = [torch.randint(0, args.vocab, (args.batch, L), generator=gen).to(dev)
               for L in lengths]

    def step(i):
        ids = batches[i]
        opt.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        return loss.detach()

    times, loss = common.time_steps(torch, step, args.warmup, args.steps)
    attn = getattr(model.config, "_attn_implementation", args.attn)
    common.emit(torch, "gpt2", args, times, loss.item(),
                extra={"process_peak_bytes": peak.stop(), "attn": attn, "batch": args.batch,
                       "tokens_per_step_mean": args.batch * sum(lengths[args.warmup:]) / args.steps},
                started=started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
