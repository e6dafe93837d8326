"""The layout of cudapool_stats_t (include/cudapool.h) as ctypes.

The header's X-macro lists CUDAPOOL_GAUGES, CUDAPOOL_COUNTERS and
CUDAPOOL_SNAPSHOT generate the C struct. There is no copy of them here: the
loaded library says its own layout (cudapool_stats_layout(), generated from
the same lists), so the struct always matches the library in the process;
a library too old to say it is read through include/cudapool.h of the source
tree this package sits in, or $CUDAPOOL_HEADER.
"""

import ctypes
import os
import re

KINDS = ("GAUGES", "COUNTERS", "SNAPSHOT")


class LayoutError(RuntimeError):
    """cudapool_stats_t's layout could not be learned."""


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
    """The lists and CUDAPOOL_STATS_VERSION of a cudapool.h text:
    {"version": V, "GAUGES": [...], "COUNTERS": [...], "SNAPSHOT": [...]};
    ValueError when one is missing."""
    lists = {}
    for kind in KINDS:
        m = re.search(r"#define CUDAPOOL_%s\(X\)((?:[^\n]*\\\n)+[^\n]*)" % kind, text)
        if not m:
            raise ValueError("no CUDAPOOL_%s list in the header" % kind)
        lists[kind] = re.findall(r"X\((\w+),", m.group(1))
    v = re.search(r"#define CUDAPOOL_STATS_VERSION (\d+)", text)
    if not v:
        raise ValueError("no CUDAPOOL_STATS_VERSION in the header")
    lists["version"] = int(v.group(1))
    return lists


def parse_library(text):
    """The same from cudapool_stats_layout()'s answer,
    "version=V;gauges NAME ...;counters NAME ...;snapshot NAME ..."."""
    parts = text.split(";")
    if len(parts) != 4 or not parts[0].startswith("version=") or not parts[0][8:].isdigit():
        raise ValueError("not a cudapool_stats_layout() answer: %r" % text)
    lists = {"version": int(parts[0][8:])}
    for kind, part in zip(KINDS, parts[1:]):
        words = part.split()
        if not words or words[0] != kind.lower():
            raise ValueError("not a cudapool_stats_layout() answer: %r" % text)
        lists[kind] = words[1:]
    return lists


def load(lib=None):
    """(lists, source): from the library `lib` (a ctypes.CDLL) when it
    exports cudapool_stats_layout, else from the header; LayoutError when
    neither can be read."""
    fn = getattr(lib, "cudapool_stats_layout", None) if lib is not None else None
    if fn is not None:
        fn.argtypes = []
        fn.restype = ctypes.c_char_p
        return parse_library(fn().decode()), "library"
    path = header_path()
    if path:
        try:
            with open(path) as f:
                return parse_header(f.read()), path
        except (OSError, ValueError) as e:
            raise LayoutError("cannot read cudapool_stats_t's layout from %s: %s" % (path, e))
    raise LayoutError("cannot learn cudapool_stats_t's layout: the loaded library has no "
                      "cudapool_stats_layout() and no include/cudapool.h was found "
                      "(set CUDAPOOL_HEADER to its path)")


class Gauge(ctypes.Structure):
    _fields_ = [("current", ctypes.c_int64), ("peak", ctypes.c_int64)]


def make_struct(lists):
    """The ctypes class of cudapool_stats_t for these lists."""
    fields = [("size", ctypes.c_uint32), ("version", ctypes.c_uint32),
              ("device", ctypes.c_int32), ("reserved0", ctypes.c_int32)]
    fields += [(n, Gauge) for n in lists["GAUGES"]]
    fields += [(n, ctypes.c_uint64) for n in lists["COUNTERS"] + lists["SNAPSHOT"]]
    return type("cudapool_stats_t", (ctypes.Structure,), {"_fields_": fields})
