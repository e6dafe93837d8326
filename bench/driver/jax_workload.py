#!/usr/bin/env python3
"""jax_workload.py: an allocation-heavy JAX workload for scripts/gpu-check
driver. The allocator is chosen by the environment, as JAX users do:
XLA_PYTHON_CLIENT_ALLOCATOR=platform makes every buffer a cuMemAlloc/cuMemFree
of XLA's StreamExecutor (cudapool serves them at the driver level when
preloaded); unset, JAX uses its preallocated BFC allocator.

Each step makes fresh inputs of a size from a fixed cycle and runs a few
jitted functions (a matmul, element-wise chains, reductions). Values are
small integers and the reductions integer, so the checksum must be identical
under any allocator. Prints one JSON line:
  {"workload": "jax", "allocator": "platform"|"bfc"|..., "cudapool": bool,
   "step_ms_median": ms, "steps": n, "checksum": int, "jax": version}

Usage: jax_workload.py [--steps N]
"""

import argparse
import ctypes
import json
import os
import statistics
import time

import jax
import jax.numpy as jnp

SIZES = (64, 96, 128, 192, 256, 384, 512)


@jax.jit
def matmul(x, y):
    return x @ y  # |z| <= 6n: exact in float32


@jax.jit
def chain(z, k):
    t = (z + k) * 2 - k
    return (t.astype(jnp.int32) % 11).sum()


@jax.jit
def columns(z):
    return z.astype(jnp.int32).sum(axis=0).sum()


def step(i):
    n = SIZES[i % len(SIZES)]
    x = (jnp.arange(n * n, dtype=jnp.float32) % 7).reshape(n, n) - 3
    y = (jnp.arange(n * n, dtype=jnp.float32) % 5).reshape(n, n) - 2
    z = matmul(x, y)
    acc = [chain(z, jnp.float32(k)) for k in range(6)]
    total = columns(z)
    return int(sum(int(a) for a in acc)) + int(total) * 3 + i


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=300)
    a = p.parse_args()
    for i in range(len(SIZES) * 2):  # warm-up: every shape compiled
        step(i)
    times, checksum = [], 0
    for i in range(a.steps):
        t0 = time.perf_counter()
        checksum = (checksum * 31 + step(i)) % (1 << 61)
        times.append((time.perf_counter() - t0) * 1e3)
    loaded = hasattr(ctypes.CDLL(None), "cudapool_version")
    allocator = os.environ.get("XLA_PYTHON_CLIENT_ALLOCATOR", "bfc") or "bfc"
    print(json.dumps({"workload": "jax", "allocator": allocator, "cudapool": loaded,
                      "step_ms_median": statistics.median(times), "steps": a.steps,
                      "checksum": checksum, "jax": jax.__version__,
                      "backend": jax.default_backend()}))


if __name__ == "__main__":
    main()
