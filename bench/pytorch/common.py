"""common.py: shared by cudapool's PyTorch workloads (bench/pytorch).

Names the allocator behind the run (PyTorch's caching allocator, caching off,
or caching off with libcudapool.so preloaded), reads cudapool's statistics
through ctypes (cudapool_stats, found with dlsym in the process's global scope
when the shim is preloaded), times training steps (torch.cuda.synchronize
around each step, time.perf_counter, median after warm-up) and prints the one
JSON result line each workload ends with.

The layout of cudapool_stats_t is the preloaded library's own answer
(cudapool_stats_layout, read by python/cudapool/_layout.py), so a counter added
to include/cudapool.h needs no change here.
"""

import ctypes
import json
import os
import re
import statistics
import sys
import time

# The stats struct's layout comes from the Python package's one reader
# (python/cudapool/_layout.py: the preloaded library says it), not a copy.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from cudapool import _layout  # noqa: E402


def prepare_environment():
    """Settings that must be in place before torch initialises CUDA: cuBLAS
    deterministic workspaces, and no network for transformers."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def caching_off():
    value = os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", "")
    return value not in ("", "0")


def pluggable():
    """CUDAPOOL_TORCH_PLUGGABLE=1: PyTorch allocates through cudapool's
    CUDAPluggableAllocator entry points (python/cudapool/torch.py)."""
    return os.environ.get("CUDAPOOL_TORCH_PLUGGABLE", "") not in ("", "0")


def async_backend():
    return "backend:cudaMallocAsync" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")


def _stats_struct():
    lists, _source = _layout.load(ctypes.CDLL(None))
    return _layout.make_struct(lists), lists, lists["version"]


def cudapool_function(name):
    """A function of the preloaded libcudapool.so, or None without it."""
    try:
        return getattr(ctypes.CDLL(None), name)
    except AttributeError:
        return None


def cudapool_stats(device=0):
    """cudapool's statistics for a device as a dict, or None without the shim."""
    fn = cudapool_function("cudapool_stats")
    if fn is None:
        return None
    Stats, lists, version = _stats_struct()
    s = Stats()
    s.size = ctypes.sizeof(Stats)
    s.version = version
    rc = fn(ctypes.c_int(device), ctypes.byref(s))
    if rc != 0:
        return {"error": "cudapool_stats returned %d" % rc}
    out = {}
    for n in lists["GAUGES"]:
        g = getattr(s, n)
        out[n] = {"current": g.current, "peak": g.peak}
    for n in lists["COUNTERS"] + lists["SNAPSHOT"]:
        out[n] = getattr(s, n)
    return out


def allocator_label():
    pool = cudapool_function("cudapool_stats") is not None
    if pluggable():
        return "cudapool-pluggable"
    if async_backend():
        return "cudaMallocAsync+cudapool" if pool else "cudaMallocAsync"
    if caching_off():
        return "cudapool" if pool else "no-caching"
    return "torch-caching+cudapool" if pool else "torch-caching"


def configure_torch(torch, seed):
    if pluggable():  # before PyTorch's first CUDA allocation
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
        import cudapool.torch
        cudapool.torch.use_as_allocator()
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    # Same seed, same loss: deterministic kernels where PyTorch has them.
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:  # deterministic mode would also NaN-fill every torch.empty: not wanted
        torch.utils.deterministic.fill_uninitialized_memory = False
    except AttributeError:
        pass
    torch.backends.cudnn.benchmark = False


def time_steps(torch, step, warmup, steps):
    """Runs step(i) warmup+steps times; returns (per-step seconds of the
    timed steps, the last step's return value)."""
    result = None
    for i in range(warmup):
        result = step(i)
    torch.cuda.synchronize()
    times = []
    for i in range(warmup, warmup + steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        result = step(i)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times, result


def memory_report(torch):
    """Peak memory as the allocator in charge sees it."""
    pool = cudapool_stats(torch.cuda.current_device())
    rep = {"peak_reserved_bytes": None, "peak_allocated_bytes": None, "utilization": None,
           "peak_source": None, "cudapool": None}
    if pool and "error" not in pool:
        rep["cudapool"] = {k: pool[k] for k in ("hits", "misses", "num_device_alloc",
                                                "num_device_free", "num_alloc_retries",
                                                "num_ooms", "num_barriers", "num_fences_waited",
                                                "num_immediate_reuse", "num_order_waits",
                                                "num_order_recoveries")
                           if k in pool}
    if not caching_off() and not pluggable():
        rep["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        rep["peak_allocated_bytes"] = torch.cuda.max_memory_allocated()
        rep["peak_source"] = "torch"
    elif pool and "error" not in pool:
        rep["peak_reserved_bytes"] = pool["reserved_bytes"]["peak"]
        rep["peak_allocated_bytes"] = pool["allocated_bytes"]["peak"]
        rep["peak_source"] = "cudapool"
    elif pool:
        rep["cudapool"] = pool
    if rep["peak_reserved_bytes"]:
        rep["utilization"] = rep["peak_allocated_bytes"] / rep["peak_reserved_bytes"]
    return rep


def emit(torch, workload, args, times, loss, extra=None, started=None):
    """Prints the result line: one JSON object on stdout."""
    loss_value = float(loss)
    rec = {
        "workload": workload,
        "allocator": allocator_label(),
        "step_ms_median": statistics.median(times) * 1e3,
        "step_ms_mean": statistics.fmean(times) * 1e3,
        "step_ms_min": min(times) * 1e3,
        "steps": args.steps,
        "warmup": args.warmup,
        "seed": args.seed,
        "loss": loss_value,
        "loss_hex": loss_value.hex(),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
    }
    rec.update(memory_report(torch))
    if extra:
        rec.update(extra)
    if started is not None:
        rec["wall_s"] = time.perf_counter() - started
    print(json.dumps(rec), flush=True)


class DevicePeak:
    """The device's used memory, sampled through NVML (libnvidia-ml.so.1,
    through ctypes) every 20 ms on a thread, less what was used when it
    started: the process's peak when it is alone on the device, as
    nvidia-smi would show it. stop() returns the peak in bytes, or None
    when NVML cannot be had."""

    class _Memory(ctypes.Structure):
        _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                    ("used", ctypes.c_ulonglong)]

    def __init__(self, index=0, period_s=0.02):
        import threading
        self._peak = None
        self._stop = threading.Event()
        try:
            self._nvml = ctypes.CDLL("libnvidia-ml.so.1")
            if self._nvml.nvmlInit_v2() != 0:
                raise OSError("nvmlInit_v2 failed")
            self._handle = ctypes.c_void_p()
            if self._nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self._handle)) != 0:
                raise OSError("no NVML handle")
            self._base = self._used()
        except OSError:
            self._nvml = None
            return
        self._peak = 0
        self._thread = threading.Thread(target=self._run, args=(period_s,), daemon=True)
        self._thread.start()

    def _used(self):
        m = self._Memory()
        if self._nvml.nvmlDeviceGetMemoryInfo(self._handle, ctypes.byref(m)) != 0:
            return None
        return m.used

    def _run(self, period_s):
        while not self._stop.wait(period_s):
            used = self._used()
            if used is not None:
                self._peak = max(self._peak, used - self._base)

    def stop(self):
        if self._nvml is None:
            return None
        self._stop.set()
        self._thread.join()
        used = self._used()
        if used is not None:
            self._peak = max(self._peak, used - self._base)
        return self._peak


def log(msg):
    print(msg, file=sys.stderr, flush=True)
