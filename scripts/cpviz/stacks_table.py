"""Reads the stacks table cudapool writes beside a trace recorded with
CUDAPOOL_STACKS (TRACE.stacks.json: {"version":1,"stacks":[{"id":N,
"frames":[FRAME...]}...]}, frames as in a snapshot's "stacks") into the
call sites the trace's Stack column names.

Owns the choice of a stack's call site, as the exit report makes it: its
innermost Python frame, else its innermost native frame outside cudapool,
the CUDA runtime and driver, libc, the loader and the sanitizers' runtimes,
else its innermost frame. Invariants: stacks with the same site share one
key, so the timeline stacks by call site, not by path; a malformed table is
one InputError naming the file and the JSON path."""
import json
import os

from .recording import InputError
from .snapshot import frame_text

SYSTEM_OBJECTS = ("libcudapool", "libcudart", "libcuda", "libc.so", "libc-", "ld-linux", "ld.so", "libasan",
                  "libubsan", "libtsan", "liblsan", "libclang_rt")


def path_beside(trace_path):
    return trace_path + ".stacks.json"


def _fail(name, path, what):
    raise InputError("%s: bad stacks table: %s: %s" % (name, path, what))


def _site_frame(frames):
    for f in frames:
        if "python" in f:
            return f
    for f in frames:
        if not str(f.get("object") or "?").startswith(SYSTEM_OBJECTS):
            return f
    return frames[0] if frames else None


def load_beside(trace_path):
    """{stack id: (site key, label, [frame text...])}, or None when the trace
    has no table beside it."""
    name = path_beside(trace_path)
    if not os.path.isfile(name):
        return None
    try:
        with open(name, encoding="utf-8", errors="replace") as f:
            doc = json.load(f)
    except ValueError as e:
        raise InputError("%s: bad stacks table: not JSON (%s)" % (name, e)) from None
    except OSError as e:
        raise InputError("%s: cannot read: %s" % (name, e.strerror or e)) from None
    if not isinstance(doc, dict) or doc.get("version") != 1:
        _fail(name, "version", "expected 1")
    stacks = doc.get("stacks")
    if not isinstance(stacks, list):
        _fail(name, "stacks", "expected a list")
    table = {}
    for k, st in enumerate(stacks):
        path = "stacks[%d]" % k
        if not isinstance(st, dict) or not isinstance(st.get("id"), int) or isinstance(st.get("id"), bool):
            _fail(name, path + ".id", "expected an integer")
        frames = st.get("frames")
        if not isinstance(frames, list) or not all(isinstance(f, dict) for f in frames):
            _fail(name, path + ".frames", "expected a list of objects")
        site = _site_frame(frames)
        text = frame_text(site) if site is not None else None
        if site is not None and "python" not in site:
            # One site per code location: the pc, not the object's name alone.
            text = "%s+%s (%s)" % (site.get("symbol") or "?", site.get("offset"), site.get("object") or "?")
        key = ("site", text) if text else ("stack", st["id"])
        label = ("site: " + text) if text else "unknown site"
        table[st["id"]] = (key, label, [frame_text(f) for f in frames])
    return table
