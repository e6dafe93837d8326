"""Reads a cudapool trace (RMM's logging-adaptor CSV, docs/REPLAY.md; plain
or gzip'd) into a Recording.

Owns the trace grammar as the viewer sees it: the header
Thread,Time,Action,Pointer,Size,Stream, optionally followed by one more
column holding the call site (any name; an empty value counts as none):
cudapool's recorder writes a stack id there (CUDAPOOL_STACKS) and the
stacks table beside the trace (stacks_table.py), which names the sites;
without that table a value is its own site;
times in seconds (or RMM's HH:MM:SS.us clock); pointers and streams in hex
or (nil). Lines of unknown actions (sync_stream, barrier, ...) are skipped;
a line that does not have the columns, or whose numbers do not parse, stops
the read with an InputError naming the file and line.
Invariants: events are in time order (the writer's chunks are only ordered
per thread, so lines are sorted by time, stably); a free of a pointer that is
not live (a trace started late) is ignored and counted in info; a second
allocate of a live pointer ends the first block there (its free was lost).
"""
import re

from . import stacks_table
from .recording import ALLOC, FREE, SEG_ALLOC, SEG_FREE, InputError, Recording, size_class_site

HEADER = ["Thread", "Time", "Action", "Pointer", "Size", "Stream"]
ACTIONS = {"allocate": ALLOC, "free": FREE, "deallocate": FREE,
           "segment_alloc": SEG_ALLOC, "segment_free": SEG_FREE}
FAILURES = ("allocate failure", "oom")
CLOCK = re.compile(r"^(\d+):(\d+):(\d+)[.:](\d+)$")


def looks_like_trace(first_line):
    return first_line.split(",")[:6] == HEADER


def _hex(text):
    if text == "(nil)" or not text.strip():
        return 0
    return int(text, 16)


def _seconds(text):
    try:
        return float(text)
    except ValueError:
        m = CLOCK.match(text.strip())
        if not m:
            raise
        h, mi, s, us = m.groups()
        return int(h) * 3600 + int(mi) * 60 + int(s) + int(us) / 10 ** len(us)


def read(name, lines):
    """lines: an iterator of text lines (newline-terminated or not)."""
    header = next(lines, "").rstrip("\r\n")
    cols = header.split(",")
    if cols[:6] != HEADER or len(cols) > 7:
        raise InputError("%s:1: not a trace: the header must be %s (and optionally a call-site column)"
                         % (name, ",".join(HEADER)))
    has_site = len(cols) == 7
    rows = []
    for n, line in enumerate(lines, start=2):
        line = line.rstrip("\r\n")
        if not line:
            continue
        f = line.split(",", 6)
        if len(f) < 6:
            raise InputError("%s:%d: bad trace line (expected %s): %.80r" % (name, n, ",".join(HEADER), line))
        action = f[2]
        kind = ACTIONS.get(action)
        if kind is None and action not in FAILURES:
            continue
        try:
            t = _seconds(f[1])
            ptr = _hex(f[3])
            size = int(f[4])
            stream = _hex(f[5])
        except ValueError:
            raise InputError("%s:%d: bad trace line (Time, Pointer, Size or Stream does not parse): %.80r"
                             % (name, n, line)) from None
        if size < 0:
            raise InputError("%s:%d: bad trace line (negative Size): %.80r" % (name, n, line))
        site = f[6].strip() if has_site and len(f) > 6 else ""
        rows.append((t, n, kind if kind is not None else -1, ptr, size, stream, site))
    # Usually in order already (one thread); a stable sort by time keeps it.
    if any(rows[k][0] > rows[k + 1][0] for k in range(len(rows) - 1)):
        rows.sort(key=lambda r: r[0])
    table = stacks_table.load_beside(name) if has_site else None
    return _build(name, rows, table)


def _site_of(rec, site, table):
    if table is not None:
        try:
            found = table.get(int(site))
        except ValueError:
            found = None
        if found is not None:
            key, label, frames = found
            return rec.site(key, label, frames)
    return rec.site(("site", site), "site " + site)


def _build(name, rows, table=None):
    rec = Recording("trace", name)
    t0 = rows[0][0] if rows else 0.0
    live = {}       # pointer -> block index
    segs = {}       # pointer -> segment index
    unknown_frees = 0
    for t, _n, kind, ptr, size, stream, site in rows:
        t_ns = int(round((t - t0) * 1e9))
        if kind == -1:
            rec.ooms.append(t_ns)
            continue
        i = len(rec.ev_t)
        if kind == ALLOC:
            if ptr == 0:
                continue    # cudaMalloc(&p, 0): NULL, nothing held
            old = live.pop(ptr, None)
            if old is not None:
                _event(rec, t_ns, FREE, old)
                rec.b_f[old] = i
                i += 1
            b = len(rec.b_a)
            live[ptr] = b
            rec.b_addr.append(ptr)
            rec.b_size.append(size)
            rec.b_req.append(size)
            rec.b_stream.append(stream)
            rec.b_state.append("allocated")
            rec.b_device.append(0)
            rec.b_site.append(_site_of(rec, site, table) if site else size_class_site(rec, size))
            rec.b_a.append(i)
            rec.b_f.append(None)
            ref = b
        elif kind == FREE:
            ref = live.pop(ptr, None)
            if ref is None:
                unknown_frees += 1
                continue
            rec.b_f[ref] = i
        elif kind == SEG_ALLOC:
            rec.has_segments = True
            old = segs.pop(ptr, None)
            if old is not None:
                _event(rec, t_ns, SEG_FREE, old)
                rec.s_f[old] = i
                i += 1
            ref = len(rec.s_a)
            segs[ptr] = ref
            rec.s_addr.append(ptr)
            rec.s_size.append(size)
            rec.s_stream.append(stream)
            rec.s_device.append(0)
            rec.s_a.append(i)
            rec.s_f.append(None)
        else:
            ref = segs.pop(ptr, None)
            if ref is None:
                continue
            rec.s_f[ref] = i
        _event(rec, t_ns, kind, ref)
    n = len(rec.ev_t)
    rec.b_f = [n if f is None else f for f in rec.b_f]
    rec.s_f = [n if f is None else f for f in rec.s_f]
    rec.info = {"events": n, "blocks": len(rec.b_a), "segments": len(rec.s_a),
                "frees of unknown pointers": unknown_frees, "allocation failures": len(rec.ooms)}
    rec.assign_series()
    return rec


def _event(rec, t_ns, kind, ref):
    rec.ev_t.append(t_ns)
    rec.ev_kind.append(kind)
    rec.ev_ref.append(ref)
