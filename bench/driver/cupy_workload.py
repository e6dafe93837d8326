#!/usr/bin/env python3
"""cupy_workload.py: an allocation-heavy CuPy workload for scripts/gpu-check
driver, run with CuPy's own memory pool or with cupy.cuda.set_allocator(None)
(every array a cudaMalloc/cudaFree of CuPy's statically linked runtime, which
cudapool serves at the driver level when preloaded).

Each step builds matrices of a size from a fixed cycle, multiplies them
(cuBLAS), and runs a chain of element-wise operations and reductions, about
30 device allocations. Every value is a small integer, so every sum is exact
whatever the order of summation: the checksum must be identical under any
allocator. Prints one JSON line:
  {"workload": "cupy", "allocator": "none"|"cupy", "cudapool": bool,
   "step_ms_median": ms, "steps": n, "checksum": int, "cupy": version}

Usage: cupy_workload.py --allocator none|cupy [--steps N]
"""

import argparse
import ctypes
import json
import statistics
import time

import cupy as cp

SIZES = (64, 96, 128, 192, 256, 384, 512, 768)


def step(i):
    n = SIZES[i % len(SIZES)]
    x = (cp.arange(n * n, dtype=cp.float32) % 7).reshape(n, n) - 3
    y = (cp.arange(n * n, dtype=cp.float32) % 5).reshape(n, n) - 2
    z = x @ y  # |z| <= 6n: exact in float32
    acc = cp.zeros((n, n), dtype=cp.int64)
    for k in range(8):
        t = (z + k) * 2 - k
        acc += t.astype(cp.int64) % 11
    col = z.sum(axis=0, dtype=cp.float64)
    return int(acc.sum()) + int(col.astype(cp.int64).sum()) * 3 + i


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--allocator", choices=("none", "cupy"), required=True)
    p.add_argument("--steps", type=int, default=400)
    a = p.parse_args()
    if a.allocator == "none":
        cp.cuda.set_allocator(None)
    for i in range(len(SIZES) * 2):  # warm-up: kernels compiled, cuBLAS ready
        step(i)
    times, checksum = [], 0
    for i in range(a.steps):
        t0 = time.perf_counter()
        checksum = (checksum * 31 + step(i)) % (1 << 61)
        times.append((time.perf_counter() - t0) * 1e3)
    loaded = hasattr(ctypes.CDLL(None), "cudapool_version")
    print(json.dumps({"workload": "cupy", "allocator": a.allocator, "cudapool": loaded,
                      "step_ms_median": statistics.median(times), "steps": a.steps,
                      "checksum": checksum, "cupy": cp.__version__}))


if __name__ == "__main__":
    main()
