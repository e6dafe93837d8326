#!/usr/bin/env python3
"""cnn_train.py: torchvision CNN training (issue 10): convnext_tiny,
densenet121, resnet50, efficientnet_b0 or vit_b_16 (--model), random initialisation (nothing is
downloaded), batch 64 x 3 x 224 x 224 of fixed random images and labels,
SGD with momentum 0.9, cross-entropy, float32, cuDNN with its default
(non-benchmark) algorithms.

Convolutional networks allocate differently from the transformers: cuDNN
workspaces of many sizes, and libraries that create streams of their own.
Run natively with PyTorch's caching allocator, with
PYTORCH_NO_CUDA_MEMORY_CACHING=1, and with that plus
LD_PRELOAD=build/libcudapool.so; scripts/gpu-check pytorch does all three.

Prints one JSON line on stdout (bench/pytorch/common.py: emit): median step
time, loss after the last step (full precision and float.hex), peak memory
as the allocator in charge sees it, and the process's device memory peak
sampled through NVML every 20 ms (common.DevicePeak).
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
    # resnet50's trace is /work/shared/traces/resnet50_live.csv.gz; efficientnet_b0 and vit_b_16
    # were chosen (issue 25) as workloads the allocator is not tuned on.
    ap.add_argument("--model", choices=["convnext_tiny", "densenet121", "resnet50", "efficientnet_b0", "vit_b_16"],
                    default="convnext_tiny")
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    started = time.perf_counter()

    if not torch.cuda.is_available():
        print("cnn_train: no CUDA device", file=sys.stderr)
        return 2
    peak = common.DevicePeak()
    common.configure_torch(torch, args.seed)
    import torchvision
    dev = torch.device("cuda")
    model = getattr(torchvision.models, args.model)(weights=None, num_classes=1000).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    gen = torch.Generator().manual_seed(args.seed)
    batches = [(torch.randn(args.batch, 3, 224, 224, generator=gen).to(dev),
                torch.randint(0, 1000, (args.batch,), generator=gen).to(dev))
               for _ in range(2)]

    def step(i):
        x, y = batches[i % len(batches)]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    model.train()
    times, loss = common.time_steps(torch, step, args.warmup, args.steps)
    common.emit(torch, args.model, args, times, loss.item(),
                extra={"batch": args.batch, "process_peak_bytes": peak.stop()},
                started=started)
    return 0


if __name__ == "__main__":
    sys.exit(main())
