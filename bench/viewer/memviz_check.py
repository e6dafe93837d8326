#!/usr/bin/env python3
"""bench/viewer/memviz_check.py PICKLE: does PyTorch's own memory viewer read
what `cudapool export --memory-viz` wrote? Loads the pickle, runs
torch.cuda._memory_viz's trace_plot and segment_plot on it (each must return
an HTML page embedding the data) and its segsum text summary, and checks the
active bytes it reports against the pickle's own. One line per check:
PASS/FAIL NAME: detail. Exit 0 when all pass, 1 otherwise, 3 when torch
cannot be imported (scripts/gpu-check.d/viewer.sh records a SKIP)."""
import pickle
import sys


def main(path):
    try:
        from torch.cuda import _memory_viz as mv
    except ImportError as e:
        print("SKIP torch: %s" % e)
        return 3
    with open(path, "rb") as f:
        data = pickle.load(f)
    ok = True

    def check(name, fn):
        nonlocal ok
        try:
            detail = fn()
            print("PASS %s: %s" % (name, detail))
        except Exception as e:  # a check's failure is a row, not a crash
            ok = False
            print("FAIL %s: %s: %s" % (name, type(e).__name__, str(e)[:200]))

    def plot(fn):
        def go():
            page = fn(data)
            if not isinstance(page, str) or len(page) < 1000:
                raise ValueError("returned %r..." % str(page)[:80])
            return "%d bytes of HTML" % len(page)
        return go

    def segsum():
        text = mv.segsum(data)
        active = sum(b["size"] for s in data["segments"] for b in s["blocks"] if b["state"] != "inactive")
        return "%d segments, %d active bytes; %s" % (len(data["segments"]), active, text.splitlines()[0][:80])

    events = sum(len(t) for t in data["device_traces"])
    if events:
        check("trace_plot", plot(mv.trace_plot))
    check("segment_plot", plot(mv.segment_plot))
    check("segsum", segsum)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
