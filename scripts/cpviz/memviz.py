"""Writes PyTorch's memory snapshot (what torch.cuda.memory._dump_snapshot
pickles; torch/cuda/_memory_viz.py and pytorch.org/memory_viz read it) from
a Recording, so PyTorch's own viewer opens cudapool's data.

Layout: {"segments": [{device, address, total_size, allocated_size,
active_size, requested_size, stream, segment_type, segment_pool_id,
is_expandable, frames, blocks: [{address, size, requested_size, state,
frames}]}], "device_traces": [[{action, addr, size, stream, time_us,
frames}] per device]}. Frames are {filename, line, name}.
Invariants: a segment's blocks tile it in address order (the gaps between
live blocks are "inactive" blocks), as PyTorch's do; a trace's segments are
those live at its end (a trace without segment events: every live block is
its own segment, as under cudaMalloc); a free is a "free_requested" followed
by a "free_completed" at the same time (the trace does not say when the
device work ended).
"""
import re

from .recording import ALLOC, FREE, SEG_ALLOC, SEG_FREE

SMALL_SEGMENT = 2 << 20     # PyTorch's small pool's segment size
PYFRAME = re.compile(r"^(.*):(\d+):([^:]*)$")
STATE = {"allocated": "active_allocated", "pending": "active_pending_free"}


def torch_frames(rec, site):
    out = []
    for text in rec.sites[site]["frames"]:
        m = PYFRAME.match(text)
        if m:
            out.append({"filename": m.group(1), "line": int(m.group(2)), "name": m.group(3)})
        else:
            out.append({"filename": "??", "line": 0, "name": text})
    if not out and rec.sites[site]["label"].startswith("site "):
        out.append({"filename": "??", "line": 0, "name": rec.sites[site]["label"][5:]})
    return out


def _segment(rec, device, addr, size, stream, blocks, frames_of):
    out, cursor = [], addr
    allocated = active = requested = 0
    for b in blocks:
        if rec.b_addr[b] > cursor:
            out.append({"address": cursor, "size": rec.b_addr[b] - cursor, "requested_size": 0,
                        "state": "inactive", "frames": []})
        state = STATE[rec.b_state[b]]
        out.append({"address": rec.b_addr[b], "size": rec.b_size[b], "requested_size": rec.b_req[b],
                    "state": state, "frames": frames_of(rec.b_site[b])})
        active += rec.b_size[b]
        if state == "active_allocated":
            allocated += rec.b_size[b]
            requested += rec.b_req[b]
        cursor = rec.b_addr[b] + rec.b_size[b]
    if addr + size > cursor:
        out.append({"address": cursor, "size": addr + size - cursor, "requested_size": 0,
                    "state": "inactive", "frames": []})
    return {"device": device, "address": addr, "total_size": size, "allocated_size": allocated,
            "active_size": active, "requested_size": requested, "stream": stream,
            "segment_type": "small" if size <= SMALL_SEGMENT else "large",
            "segment_pool_id": (0, 0), "is_expandable": False, "frames": [], "blocks": out}


def snapshot(rec):
    cache = {}

    def frames_of(site):
        if site not in cache:
            cache[site] = torch_frames(rec, site)
        return cache[site]

    last = max(rec.n_events - 1, 0)
    blocks = sorted(rec.live_blocks(last), key=lambda b: rec.b_addr[b])
    segments = []
    if rec.has_segments:
        bi = 0
        for s in sorted(rec.live_segments(last), key=lambda s: rec.s_addr[s]):
            lo, hi = rec.s_addr[s], rec.s_addr[s] + rec.s_size[s]
            while bi < len(blocks) and rec.b_addr[blocks[bi]] < lo:
                bi += 1     # a block outside every segment: PyTorch has no place for it
            mine = []
            while bi < len(blocks) and rec.b_addr[blocks[bi]] < hi:
                mine.append(blocks[bi])
                bi += 1
            segments.append(_segment(rec, rec.s_device[s], lo, rec.s_size[s], rec.s_stream[s], mine,
                                     frames_of))
    else:
        for b in blocks:
            segments.append(_segment(rec, rec.b_device[b], rec.b_addr[b], rec.b_size[b],
                                     rec.b_stream[b], [b], frames_of))
    ndev = max([s["device"] for s in segments] + [0]) + 1
    traces = [[] for _ in range(ndev)]
    if rec.kind == "trace":
        entries = traces[0]
        for i in range(rec.n_events):
            k, ref, us = rec.ev_kind[i], rec.ev_ref[i], rec.ev_t[i] / 1000.0
            if k in (ALLOC, FREE):
                e = {"addr": rec.b_addr[ref], "size": rec.b_size[ref], "stream": rec.b_stream[ref],
                     "time_us": us, "frames": frames_of(rec.b_site[ref])}
                if k == ALLOC:
                    entries.append(dict(e, action="alloc"))
                else:
                    entries.append(dict(e, action="free_requested"))
                    entries.append(dict(e, action="free_completed"))
            elif k in (SEG_ALLOC, SEG_FREE):
                entries.append({"action": "segment_alloc" if k == SEG_ALLOC else "segment_free",
                                "addr": rec.s_addr[ref], "size": rec.s_size[ref],
                                "stream": rec.s_stream[ref], "time_us": us, "frames": []})
    return {"segments": segments, "device_traces": traces}
