"""The overview timeline drawn when the page opens, computed here so that a
trace of 10^6 events draws at once: at most BINS points over the trace's
time, each the moment of highest allocated bytes inside its bin (so no peak
is lost), with every series' bytes at that moment and the highest reserved
bytes in the bin. Zooming in recomputes finer points in the page from the
events themselves.
Invariants: points are in time order; a point's series sum is the allocated
total at its moment exactly."""
from .recording import ALLOC, FREE, SEG_ALLOC, SEG_FREE

BINS = 1500


def overview(rec, bins=BINS):
    n = rec.n_events
    nser = max(len(rec.series), 1)
    span = max(rec.ev_t[-1] if n else 0, 1)
    cur = [0] * nser
    total = reserved = 0
    out_t, out_i, out_s, out_r = [], [], [], []
    bin_of_last = -1
    best = -1
    size, bser, ssize = rec.b_size, rec.b_series, rec.s_size
    ev_t, last_bin = rec.ev_t, bins - 1
    for i, (k, ref) in enumerate(zip(rec.ev_kind, rec.ev_ref)):
        if k == ALLOC:
            cur[bser[ref]] += size[ref]
            total += size[ref]
        elif k == FREE:
            cur[bser[ref]] -= size[ref]
            total -= size[ref]
        elif k == SEG_ALLOC:
            reserved += ssize[ref]
        elif k == SEG_FREE:
            reserved -= ssize[ref]
        b = ev_t[i] * bins // span
        if b > last_bin:
            b = last_bin
        if b != bin_of_last:
            bin_of_last = b
            out_t.append(ev_t[i])
            out_i.append(i)
            out_s.append(list(cur))
            out_r.append(reserved)
            best = total
        else:
            if total > best:
                best = total
                out_t[-1], out_i[-1], out_s[-1] = ev_t[i], i, list(cur)
            if reserved > out_r[-1]:
                out_r[-1] = reserved
    # Columns per series: the page stacks them without transposing.
    cols = [[p[s] for p in out_s] for s in range(nser)]
    return {"t": out_t, "i": out_i, "series": cols, "reserved": out_r}
