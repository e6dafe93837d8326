"""Writes a Chrome/Perfetto trace (JSON, "traceEvents") of the counters:
allocated and reserved bytes over time, one counter event ("ph": "C") per
change, ts in microseconds since the trace's first event. Opens in
ui.perfetto.dev and chrome://tracing.
Invariants: counter values are exact byte counts; events are in time order;
a snapshot gives one counter event per device at ts 0 (its totals)."""
from .recording import ALLOC, FREE, SEG_ALLOC, SEG_FREE

NAME = "cudapool memory"


def trace_events(rec):
    meta = {"name": "process_name", "ph": "M", "pid": 1, "tid": 0,
            "args": {"name": "cudapool: " + rec.name}}
    out = [meta]
    if rec.kind == "snapshot":
        for d in rec.info["devices"]:
            out.append({"name": NAME, "ph": "C", "ts": 0, "pid": 1, "tid": 0, "id": d["device"],
                        "args": {"allocated": d["allocated"], "reserved": d["reserved"]}})
        return {"traceEvents": out, "displayTimeUnit": "ms"}
    alloc = reserved = 0
    for i in range(rec.n_events):
        k, ref = rec.ev_kind[i], rec.ev_ref[i]
        if k == ALLOC:
            alloc += rec.b_size[ref]
        elif k == FREE:
            alloc -= rec.b_size[ref]
        elif k == SEG_ALLOC:
            reserved += rec.s_size[ref]
        elif k == SEG_FREE:
            reserved -= rec.s_size[ref]
        args = {"allocated": alloc}
        if rec.has_segments:
            args["reserved"] = reserved
        out.append({"name": NAME, "ph": "C", "ts": rec.ev_t[i] / 1000.0, "pid": 1, "tid": 0,
                    "args": args})
    return {"traceEvents": out, "displayTimeUnit": "ms"}
