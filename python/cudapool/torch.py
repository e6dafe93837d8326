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
"""

import os

__all__ = ["library_path", "use_as_allocator", "ALLOC", "FREE"]

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


def library_path():
    """The library to hand PyTorch: the one preloaded into this process,
    else $CUDAPOOL_LIBRARY, else build/libcudapool.so of the source tree this
    module sits in, else the installed lib/libcudapool.so next to a
    `cudapool` launcher on PATH. Raises FileNotFoundError naming what it
    tried, or naming CUDAPOOL_LIBRARY when that names no file (never a
    silent fall back to another library than the one asked for)."""
    preloaded = _preloaded()
    if preloaded:
        return os.path.normpath(preloaded)
    asked = os.environ.get("CUDAPOOL_LIBRARY")
    if asked:
        if not os.path.isfile(asked):
            raise FileNotFoundError("CUDAPOOL_LIBRARY=%s: no such file; point it at libcudapool.so, or "
                                    "unset it to use the preloaded or the built one" % asked)
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
    raise FileNotFoundError("cannot find libcudapool.so (tried: %s); set CUDAPOOL_LIBRARY"
                            % (", ".join(tried) or "nothing"))


def use_as_allocator(path=None):
    """Make cudapool PyTorch's CUDA allocator; returns the
    CUDAPluggableAllocator. Must run before PyTorch allocates CUDA memory
    (PyTorch refuses to change an allocator already in use)."""
    import torch  # the real PyTorch: this module is cudapool.torch

    allocator = torch.cuda.memory.CUDAPluggableAllocator(path or library_path(), ALLOC, FREE)
    torch.cuda.memory.change_current_allocator(allocator)
    return allocator
