"""The layout of cudapool_stats_t (include/cudapool.h) as ctypes.

The header's X-macro lists CUDAPOOL_GAUGES, CUDAPOOL_COUNTERS and
CUDAPOOL_SNAPSHOT generate the C struct; they are read from the header when
this package sits in a source tree (python/cudapool/ next to include/), or
from $CUDAPOOL_HEADER, else the built-in copy below is used.
tests/python/test_cudapool.py requires the copy to equal the header, so a
counter added there fails the tests until it is added here too.
"""

import ctypes
import os
import re

# The lists of include/cudapool.h, as of CUDAPOOL_STATS_VERSION 1.
BUILTIN = {
    "version": 1,
    "GAUGES": ["allocated_bytes", "allocated_blocks", "requested_bytes", "active_bytes",
               "pending_bytes", "cached_bytes", "reserved_bytes", "segments"],
    "COUNTERS": ["num_alloc", "num_free", "hits", "misses", "num_immediate_reuse",
                 "num_device_alloc", "num_device_free", "num_barriers", "num_fences_recorded",
                 "num_fences_waited", "num_sync_points", "num_alloc_retries", "num_ooms"],
    "SNAPSHOT": ["blocks", "free_blocks", "largest_free_block"],
}


def header_path():
    """include/cudapool.h of the source tree this package is in, or
    $CUDAPOOL_HEADER; None when neither exists."""
    env = os.environ.get("CUDAPOOL_HEADER")
    if env:
        return env if os.path.isfile(env) else None
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "..", "include", "cudapool.h")
    return os.path.normpath(path) if os.path.isfile(path) else None


def parse_header(text):
    """The lists and CUDAPOOL_STATS_VERSION of a cudapool.h text, as BUILTIN;
    ValueError when one is missing."""
    lists = {}
    for kind in ("GAUGES", "COUNTERS", "SNAPSHOT"):
        m = re.search(r"#define CUDAPOOL_%s\(X\)((?:[^\n]*\\\n)+[^\n]*)" % kind, text)
        if not m:
            raise ValueError("no CUDAPOOL_%s list in the header" % kind)
        lists[kind] = re.findall(r"X\((\w+),", m.group(1))
    v = re.search(r"#define CUDAPOOL_STATS_VERSION (\d+)", text)
    if not v:
        raise ValueError("no CUDAPOOL_STATS_VERSION in the header")
    lists["version"] = int(v.group(1))
    return lists


def load():
    """(lists, source): the header's lists when it can be read, else BUILTIN."""
    path = header_path()
    if path:
        try:
            with open(path) as f:
                return parse_header(f.read()), path
        except (OSError, ValueError):
            pass
    return BUILTIN, "built-in"


class Gauge(ctypes.Structure):
    _fields_ = [("current", ctypes.c_int64), ("peak", ctypes.c_int64)]


def make_struct(lists):
    """The ctypes class of cudapool_stats_t for these lists."""
    fields = [("size", ctypes.c_uint32), ("version", ctypes.c_uint32),
              ("device", ctypes.c_int32), ("reserved0", ctypes.c_int32)]
    fields += [(n, Gauge) for n in lists["GAUGES"]]
    fields += [(n, ctypes.c_uint64) for n in lists["COUNTERS"] + lists["SNAPSHOT"]]
    return type("cudapool_stats_t", (ctypes.Structure,), {"_fields_": fields})
