"""cudapool from Python: the control API of libcudapool.so through ctypes.

cudapool is an LD_PRELOAD library, so it must be in the process from its
start; this module finds its functions in the process's global scope
(ctypes.CDLL(None), dlsym(RTLD_DEFAULT) in C) and loads nothing itself.
Run Python under it with the launcher:

    python -m cudapool --stats -- python train.py
    LD_PRELOAD=/path/to/libcudapool.so python train.py

is_loaded() and version() work either way (False / None without cudapool);
every other function raises RuntimeError without it, and OSError (errno set,
its name in the message) when the C call returns an errno.
"""

import ctypes
import errno as _errno
import os
import re

from . import _layout

__all__ = ["is_loaded", "version", "stats", "empty_cache", "set_limit", "reset_peak",
           "memory_summary", "parse_size", "NotLoadedError", "push_tag", "pop_tag", "tag"]
__version__ = "0.1.0"


class NotLoadedError(RuntimeError):
    """libcudapool.so is not preloaded into this process."""


_NOT_LOADED = ("cudapool is not loaded in this process: libcudapool.so must be preloaded when the "
               "process starts. Run it as `python -m cudapool [options] -- python ...`, "
               "`cudapool -- python ...` or `LD_PRELOAD=/path/to/libcudapool.so python ...` "
               "(cudapool.is_loaded() tells whether it is)")

_lib = None
_struct = None


def _symbols():
    """The process's global scope when cudapool is in it, else None."""
    global _lib
    if _lib is None:
        lib = ctypes.CDLL(None)
        if not hasattr(lib, "cudapool_version"):
            return None
        lib.cudapool_version.argtypes = []
        lib.cudapool_version.restype = ctypes.c_int
        lib.cudapool_stats.argtypes = [ctypes.c_int, ctypes.c_void_p]
        lib.cudapool_stats.restype = ctypes.c_int
        for name in ("cudapool_empty_cache", "cudapool_reset_peak"):
            getattr(lib, name).argtypes = [ctypes.c_int]
            getattr(lib, name).restype = ctypes.c_int
        lib.cudapool_set_limit.argtypes = [ctypes.c_int, ctypes.c_size_t]
        lib.cudapool_set_limit.restype = ctypes.c_int
        _lib = lib
    return _lib


def _need():
    lib = _symbols()
    if lib is None:
        raise NotLoadedError(_NOT_LOADED)
    return lib


def _check(rc, call):
    if rc != 0:
        name = _errno.errorcode.get(rc, "errno %d" % rc)
        raise OSError(rc, "%s failed: %s (%s)" % (call, name, os.strerror(rc)))


_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


def _device(device):
    # The library judges the number (ENODEV, EINVAL); this only keeps ctypes
    # from cutting it to a C int: a non-int, or an int outside the C int's
    # range, whose low 32 bits would name another device (2**32 would be
    # device 0, 2**32 - 1 would be -1, every device).
    if isinstance(device, bool) or not isinstance(device, int):
        raise TypeError("device must be an int, not %r" % (device,))
    if not _INT_MIN <= device <= _INT_MAX:
        raise ValueError("device %d is out of range (a device number, or -1 for every device)" % device)
    return device


def is_loaded():
    """True when libcudapool.so is in this process (preloaded)."""
    return _symbols() is not None


def version():
    """The loaded library's version as "X.Y.Z", or None without it."""
    lib = _symbols()
    if lib is None:
        return None
    v = lib.cudapool_version()
    return "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100)


def _stats_struct():
    global _struct
    if _struct is None:
        lists, _source = _layout.load(_need())
        _struct = (_layout.make_struct(lists), lists)
    return _struct


def stats(device=0):
    """The counters of one device as a dict with the exit report's names
    (CUDAPOOL_STATS_FORMAT=json): every gauge as {"current", "peak"}, every
    counter and snapshot value, and "utilization" (peak allocated / peak
    reserved, 4 decimals). All zero for a device not allocated on yet, and,
    before the process's first CUDA call, for any device number below 64
    (cudapool asks CUDA nothing before the program does)."""
    lib = _need()
    device = _device(device)
    Stats, lists = _stats_struct()
    s = Stats()
    s.size = ctypes.sizeof(Stats)
    s.version = lists["version"]
    _check(lib.cudapool_stats(device, ctypes.byref(s)), "cudapool_stats(device=%d)" % device)
    out = {"device": s.device}
    for n in lists["GAUGES"]:
        g = getattr(s, n)
        out[n] = {"current": g.current, "peak": g.peak}
    for n in lists["COUNTERS"] + lists["SNAPSHOT"]:
        out[n] = getattr(s, n)
    alloc = max(s.allocated_bytes.peak, 0) if "allocated_bytes" in lists["GAUGES"] else 0
    reserved = max(s.reserved_bytes.peak, 0) if "reserved_bytes" in lists["GAUGES"] else 0
    out["utilization"] = round(alloc / reserved, 4) if reserved else 0.0
    return out


def _tag_calls(lib):
    if not hasattr(lib, "cudapool_push_tag"):
        raise RuntimeError("the loaded libcudapool.so (%s) has no regions: cudapool_push_tag is missing"
                           % version())
    lib.cudapool_push_tag.argtypes = [ctypes.c_char_p]
    lib.cudapool_push_tag.restype = ctypes.c_int
    lib.cudapool_pop_tag.argtypes = []
    lib.cudapool_pop_tag.restype = ctypes.c_int
    return lib


def push_tag(name):
    """Open region `name` (str or bytes) on this thread; regions nest. The
    exit report and `cudapool stats PID` show per region the most bytes
    allocated while it was open and the bytes allocated in it."""
    lib = _tag_calls(_need())
    if isinstance(name, str):
        name = name.encode("utf-8")
    if not isinstance(name, bytes):
        raise TypeError("a region's name is a str or bytes, not %r" % (name,))
    if b"\0" in name:
        raise ValueError("a region's name holds no NUL byte: %r" % (name,))
    _check(lib.cudapool_push_tag(name), "cudapool_push_tag(%r)" % (name,))


def pop_tag():
    """Close this thread's innermost region (OSError EINVAL when none is open)."""
    lib = _tag_calls(_need())
    _check(lib.cudapool_pop_tag(), "cudapool_pop_tag()")


class tag(object):
    """`with cudapool.tag("forward"):` opens region "forward" for the block.
    Without cudapool in the process it does nothing, so that it can stay in
    code that also runs without it."""

    def __init__(self, name):
        self.name = name
        self._pushed = False

    def __enter__(self):
        if is_loaded():
            push_tag(self.name)
            self._pushed = True
        return self

    def __exit__(self, *exc):
        if self._pushed:
            self._pushed = False
            pop_tag()
        return False


def empty_cache(device=-1):
    """Give every whole free segment back to the driver (-1: every device)."""
    lib = _need()
    device = _device(device)
    _check(lib.cudapool_empty_cache(device), "cudapool_empty_cache(device=%d)" % device)


def reset_peak(device=-1):
    """Every peak := its current value (-1: every device)."""
    lib = _need()
    device = _device(device)
    _check(lib.cudapool_reset_peak(device), "cudapool_reset_peak(device=%d)" % device)


_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE_RE = re.compile(r"^([0-9]+)(\.[0-9]+)?(([KkMmGgTt])([Ii]?[Bb])?|[Bb])?$")


def parse_size(value):
    """Bytes from an int or a size string in the library's grammar
    (docs/OPTIONS.md, "size"): 512, 64K, 1.5G, 8GiB, 2tb; units are powers
    of 1024, a fraction needs a unit and rounds down. ValueError otherwise
    (a percentage too: the C call takes bytes)."""
    if isinstance(value, bool):
        raise TypeError("a size must be an int or a string, not a bool")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str):
        v = value.strip(" \t\n\v\f\r")
        m = _SIZE_RE.match(v)
        if not m or (m.group(2) and not m.group(4)):
            raise ValueError("%r is not a size (accepted: bytes with optional K/M/G/T suffix, "
                             "powers of 1024: 8G, 8GiB, 1.5G, 512)" % value)
        unit = _UNITS[(m.group(4) or "").lower()]
        frac = m.group(2) or ""
        digits = int(m.group(1) + frac[1:])
        n = digits * unit // (10 ** max(len(frac) - 1, 0))
    else:
        raise TypeError("a size must be an int or a string, not %s" % type(value).__name__)
    if n < 0 or n > (1 << 64) - 1:
        raise ValueError("%r is out of range (0 to 2^64 - 1 bytes)" % (value,))
    return n


def set_limit(limit, device=-1):
    """Most bytes the pool may reserve on device (-1: every device with a
    pool); an int or a string such as "8G"; 0 = no limit."""
    lib = _need()
    n = parse_size(limit)
    if n > (1 << (8 * ctypes.sizeof(ctypes.c_size_t))) - 1:
        raise ValueError("%r does not fit in a size_t" % (limit,))
    device = _device(device)
    _check(lib.cudapool_set_limit(device, n), "cudapool_set_limit(device=%d, bytes=%d)" % (device, n))


def _human(n):
    n = max(int(n), 0)
    units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
    if n < 1024:
        return "%d B" % n
    u = 0
    x = float(n)
    while x >= 1024 and u < len(units) - 1:
        x /= 1024
        u += 1
    return "%.2f %s" % (x, units[u])


def memory_summary(device=0):
    """A readable table of one device's memory, like
    torch.cuda.memory_summary: allocated, active, reserved and cached bytes
    (current and peak), hits and misses, barriers, OOMs, largest free block."""
    s = stats(device)
    width = 76
    rule = "|" + "=" * (width - 2) + "|"
    thin = "|" + "-" * (width - 2) + "|"

    def row(name, cur, peak):
        return "| %-30s | %18s | %18s |" % (name, cur, peak)

    def gauge(name, key, human=True):
        g = s[key]
        f = _human if human else str
        return row(name, f(g["current"]), f(g["peak"]))

    def value(name, v):
        return "| %-30s | %39s |" % (name, v)

    title = "cudapool memory summary, device %d (cudapool %s)" % (s["device"], version())
    lines = [rule, "| %-*s |" % (width - 4, title), thin,
             row("metric", "current", "peak"), thin,
             gauge("Allocated memory", "allocated_bytes"),
             gauge("Requested memory", "requested_bytes"),
             gauge("Active memory", "active_bytes"),
             gauge("Pending memory", "pending_bytes"),
             gauge("Reserved memory", "reserved_bytes"),
             gauge("Cached memory", "cached_bytes"),
             gauge("Allocated blocks", "allocated_blocks", False),
             gauge("Segments", "segments", False), thin]
    hits, misses = s["hits"], s["misses"]
    total = hits + misses
    rate = "%.1f%%" % (int(hits * 1000 // total) / 10) if total else "-"
    lines += [value("Allocations / frees", "%d / %d" % (s["num_alloc"], s["num_free"])),
              value("Cache hits / misses", "%d / %d" % (hits, misses)),
              value("Hit rate", rate),
              value("Driver allocs / frees", "%d / %d" % (s["num_device_alloc"], s["num_device_free"])),
              value("Barriers", str(s["num_barriers"])),
              value("Alloc retries", str(s["num_alloc_retries"])),
              value("OOMs", str(s["num_ooms"])),
              value("Largest free block", _human(s["largest_free_block"])),
              value("Utilization (peak alloc/res)", "%.1f%%" % (s["utilization"] * 100)),
              rule]
    return "\n".join(lines) + "\n"
