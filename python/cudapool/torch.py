"""PyTorch's allocations through cudapool, as a pluggable allocator.

    import cudapool.torch
    cudapool.torch.use_as_allocator()      # before PyTorch's first CUDA allocation

routes every tensor allocation of PyTorch through cudapool's pool with the
stream PyTorch names (torch.cuda.memory.CUDAPluggableAllocator over the
library's cudapool_torch_alloc / cudapool_torch_free), keeping cudapool's
limit, statistics, exit report and trace. The library need not be preloaded
(then PyTorch's own cudaMalloc calls elsewhere are not pooled, and no exit
report is printed unless CUDAPOOL_STATS is set). torch.cuda.empty_cache()
then asks nothing of cudapool (PyTorch keeps no cache of its own in this
mode); use cudapool.empty_cache() to give cached segments back.

PyTorch's own counters (torch.cuda.memory_allocated, memory_reserved,
max_memory_allocated, max_memory_reserved, memory_stats, memory_summary,
reset_peak_memory_stats) are not served through the pluggable interface
(PyTorch's CUDAPluggableAllocator raises for them), and with the preload and
PYTORCH_NO_CUDA_MEMORY_CACHING=1 they read 0. use_as_allocator() therefore
installs cudapool's answers in their place, in torch.cuda and
torch.cuda.memory (use_counters() does the same for the preload route): the
same figures as cudapool.stats(), under PyTorch's names
("allocated_bytes.all.current", "reserved_bytes.all.peak", "num_ooms", ...).
Code that took a reference to one of them before (`from torch.cuda import
memory_allocated`) keeps PyTorch's own.

Without PyTorch installed, use_as_allocator() and use_counters() raise
ImportError saying so in one line.
"""

import collections
import ctypes
import os
import warnings

from . import _layout

__all__ = ["library_path", "use_as_allocator", "use_counters", "memory_stats", "ALLOC", "FREE"]

ALLOC = "cudapool_torch_alloc"
FREE = "cudapool_torch_free"


def _preloaded():
    """The path of the libcudapool.so mapped into this process, or None."""
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split(None, 5)[-1].strip() if len(line.split()) >= 6 else ""
                if os.path.basename(path).startswith("libcudapool.so"):
                    return path
    except OSError:
        pass
    return None


def _asked_library():
    """(variable, path) the user named for the library: CUDAPOOL_LIB, the
    one variable the launcher reads too; else the deprecated CUDAPOOL_LIBRARY
    with one warning; else (None, None)."""
    if os.environ.get("CUDAPOOL_LIB"):
        return "CUDAPOOL_LIB", os.environ["CUDAPOOL_LIB"]
    if os.environ.get("CUDAPOOL_LIBRARY"):
        warnings.warn("CUDAPOOL_LIBRARY is deprecated: set CUDAPOOL_LIB, which the launcher reads too",
                      DeprecationWarning, stacklevel=3)
        return "CUDAPOOL_LIBRARY", os.environ["CUDAPOOL_LIBRARY"]
    return None, None


def library_path():
    """The library to hand PyTorch: the one preloaded into this process,
    else $CUDAPOOL_LIB (the launcher's variable; the older CUDAPOOL_LIBRARY
    is read too, with a deprecation warning), else build/libcudapool.so of the source tree this
    module sits in, else the installed lib/libcudapool.so next to a
    `cudapool` launcher on PATH. Raises FileNotFoundError naming what it
    tried, or naming CUDAPOOL_LIB when that names no file (never a
    silent fall back to another library than the one asked for)."""
    preloaded = _preloaded()
    if preloaded:
        return os.path.normpath(preloaded)
    name, asked = _asked_library()
    if asked:
        if not os.path.isfile(asked):
            raise FileNotFoundError("%s=%s: no such file; point it at libcudapool.so, or "
                                    "unset it to use the preloaded or the built one" % (name, asked))
        return os.path.normpath(asked)
    tried = []
    for candidate in (os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build",
                                   "libcudapool.so"),):
        if candidate:
            tried.append(candidate)
            if os.path.isfile(candidate):
                return os.path.normpath(candidate)
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if d and os.path.isfile(os.path.join(d, "cudapool")):
            candidate = os.path.join(d, "..", "lib", "libcudapool.so")
            tried.append(candidate)
            if os.path.isfile(candidate):
                return os.path.normpath(candidate)
    raise FileNotFoundError("cannot find libcudapool.so (tried: %s); set CUDAPOOL_LIB"
                            % (", ".join(tried) or "nothing"))


def _torch():
    try:
        import torch  # the real PyTorch: this module is cudapool.torch
    except ImportError as e:
        raise ImportError("cudapool.torch needs PyTorch, which is not installed in this Python (%s); "
                          "the rest of cudapool works without it" % e) from None
    return torch


def use_as_allocator(path=None):
    """Make cudapool PyTorch's CUDA allocator; returns the
    CUDAPluggableAllocator. Must run before PyTorch allocates CUDA memory
    (PyTorch refuses to change an allocator already in use). PyTorch's
    memory counters then answer from cudapool (use_counters)."""
    torch = _torch()
    path = path or library_path()
    allocator = torch.cuda.memory.CUDAPluggableAllocator(path, ALLOC, FREE)
    torch.cuda.memory.change_current_allocator(allocator)
    use_counters(path)
    return allocator


_counters_lib = None


def _stats_of(device):
    """cudapool_stats of one device as {name: value or (current, peak)}."""
    lib = _counters_lib
    lists, _source = _layout.load(lib)
    Stats = _layout.make_struct(lists)
    s = Stats()
    s.size = ctypes.sizeof(Stats)
    s.version = lists["version"]
    fn = lib.cudapool_stats
    fn.argtypes = [ctypes.c_int, ctypes.c_void_p]
    fn.restype = ctypes.c_int
    rc = fn(device, ctypes.byref(s))
    if rc != 0:
        raise OSError(rc, "cudapool_stats(device=%d) failed: %s" % (device, os.strerror(rc)))
    out = {n: (getattr(s, n).current, getattr(s, n).peak) for n in lists["GAUGES"]}
    out.update({n: getattr(s, n) for n in lists["COUNTERS"] + lists["SNAPSHOT"]})
    return out


def _device_index(device):
    """PyTorch's ways of naming a device (None: the current one, an int,
    "cuda:1", torch.device) as an index."""
    torch = _torch()
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, bool):
        raise TypeError("device must be an int, a string or a torch.device, not a bool")
    if isinstance(device, int):
        return device
    if isinstance(device, str):
        device = torch.device(device)
    index = getattr(device, "index", None)
    return torch.cuda.current_device() if index is None else index


# PyTorch's names for cudapool's gauges ("<name>.all.current/peak").
_GAUGE_NAMES = {"allocated_bytes": "allocated_bytes", "reserved_bytes": "reserved_bytes",
                "active_bytes": "active_bytes", "requested_bytes": "requested_bytes",
                "allocated_blocks": "allocation", "segments": "segment"}


def memory_stats(device=None):
    """torch.cuda.memory_stats's dict, from cudapool's counters: for each of
    allocated_bytes, reserved_bytes, active_bytes, requested_bytes,
    allocation (blocks) and segment, "<name>.all.current" and
    "<name>.all.peak"; "inactive_split_bytes.all.current" (cached bytes);
    num_alloc_retries, num_ooms, num_device_alloc, num_device_free. Sorted
    by key, as PyTorch's is."""
    s = _stats_of(_device_index(device))
    out = {}
    for ours, theirs in _GAUGE_NAMES.items():
        if ours in s:
            out[theirs + ".all.current"], out[theirs + ".all.peak"] = s[ours]
    if "cached_bytes" in s:
        out["inactive_split_bytes.all.current"], out["inactive_split_bytes.all.peak"] = s["cached_bytes"]
    for n in ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"):
        if n in s:
            out[n] = s[n]
    return collections.OrderedDict(sorted(out.items()))


def _memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.current", 0)


def _max_memory_allocated(device=None):
    return memory_stats(device).get("allocated_bytes.all.peak", 0)


def _memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.current", 0)


def _max_memory_reserved(device=None):
    return memory_stats(device).get("reserved_bytes.all.peak", 0)


def _reset_peak_memory_stats(device=None):
    fn = _counters_lib.cudapool_reset_peak
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    index = _device_index(device)
    rc = fn(index)
    if rc != 0:
        raise OSError(rc, "cudapool_reset_peak(device=%d) failed: %s" % (index, os.strerror(rc)))


def _memory_summary(device=None, abbreviated=False):
    s = memory_stats(device)
    lines = ["cudapool memory summary, device %d" % _device_index(device)]
    for key, value in s.items():
        lines.append("  %-36s %d" % (key, value))
    return "\n".join(lines) + "\n"


_REPLACEMENTS = {
    "memory_stats": memory_stats, "memory_allocated": _memory_allocated,
    "max_memory_allocated": _max_memory_allocated, "memory_reserved": _memory_reserved,
    "max_memory_reserved": _max_memory_reserved, "reset_peak_memory_stats": _reset_peak_memory_stats,
    "memory_summary": _memory_summary,
}


def use_counters(path=None):
    """PyTorch's memory counters answer from cudapool from now on: each of
    torch.cuda.{memory_stats, memory_allocated, max_memory_allocated,
    memory_reserved, max_memory_reserved, reset_peak_memory_stats,
    memory_summary} (and the same in torch.cuda.memory) is replaced. For the
    preload route (PYTORCH_NO_CUDA_MEMORY_CACHING=1 under the launcher),
    where PyTorch's own read 0; use_as_allocator() calls it. The library is
    the preloaded one, else `path`, else library_path()'s."""
    global _counters_lib
    torch = _torch()
    glob = ctypes.CDLL(None)
    _counters_lib = glob if hasattr(glob, "cudapool_stats") else ctypes.CDLL(path or library_path())
    for name, fn in _REPLACEMENTS.items():
        for module in (torch.cuda, torch.cuda.memory):
            if hasattr(module, name) or module is torch.cuda.memory:
                setattr(module, name, fn)
