#!/usr/bin/env python3
"""coop_pair.py: two PyTorch processes on one GPU (issue 26): the first
allocates as many 1 GiB tensors as fit in 3/4 of free memory, drops them and
idles; the second then asks for as many. Natively with PyTorch's caching
allocator the first process's cache keeps them (the second fails); with
caching off (PYTORCH_NO_CUDA_MEMORY_CACHING=1) natively, or under cudapool
with cooperation on, the second gets them all.

  coop_pair.py            runs the pair; prints
                          "take: ok=0|1 got=N of=M ms=T slowest_ms=S"
  coop_pair.py hog        (the child) prints its count, idles until stdin closes

Both processes inherit the environment (LD_PRELOAD, PYTORCH_* and CUDAPOOL_*).
"""

import subprocess
import sys
import time

import torch

GiB = 1 << 30


def hog():
    free, _ = torch.cuda.mem_get_info()
    n = int(free * 3 // 4 // GiB)
    blocks = [torch.empty(GiB, dtype=torch.uint8, device="cuda") for _ in range(n)]
    del blocks
    torch.cuda.synchronize()
    print(n, flush=True)
    sys.stdin.read()
    return 0


def pair():
    torch.cuda.init()
    child = subprocess.Popen([sys.executable, __file__, "hog"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    line = child.stdout.readline()
    if not line.strip().isdigit():
        print(f"coop_pair: the first process did not start (exit {child.wait()})", file=sys.stderr)
        return 1
    n = int(line)
    got, slowest, blocks = 0, 0.0, []
    start = time.perf_counter()
    while got < n:
        t = time.perf_counter()
        try:
            blocks.append(torch.empty(GiB, dtype=torch.uint8, device="cuda"))
        except torch.OutOfMemoryError:
            slowest = max(slowest, time.perf_counter() - t)
            break
        slowest = max(slowest, time.perf_counter() - t)
        got += 1
    total = time.perf_counter() - start
    del blocks
    print(f"take: ok={int(got == n)} got={got} of={n} ms={total * 1e3:.1f} slowest_ms={slowest * 1e3:.1f}",
          flush=True)
    child.stdin.close()
    return 0 if child.wait() == 0 else 1


if __name__ == "__main__":
    sys.exit(hog() if sys.argv[1:] == ["hog"] else pair())
