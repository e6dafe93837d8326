"""The one in-memory form of a trace or a snapshot that every writer reads.

A Recording is columns, not objects, so that 10^6 events fit and load fast:
events (time in ns since the first event, kind, index of the block or segment
it concerns), blocks and segments, each live over the event indices [a, f):
created by event a, gone from event f on (f = number of events when never
freed). "Moment i" is the state right after event i.
Invariants: every block's and segment's a < f; event times never decrease;
block.series indexes series, block.site indexes sites; a snapshot is one
moment (one pseudo event, index 0, everything live over [0, 1)).
"""

ALLOC, FREE, SEG_ALLOC, SEG_FREE = 0, 1, 2, 3

# Shown when a trace line carries no call site: group by size class instead.
SIZE_CLASSES = [(64 << 10, "< 64 KiB"), (1 << 20, "64 KiB - 1 MiB"), (16 << 20, "1 - 16 MiB"),
                (256 << 20, "16 - 256 MiB"), (None, ">= 256 MiB")]
MAX_SERIES = 8   # call sites drawn on their own; the rest stack as "other sites"


class InputError(Exception):
    """A malformed trace or snapshot: the message is the one line the user sees."""


class Recording:
    def __init__(self, kind, name):
        self.kind = kind            # "trace" or "snapshot"
        self.name = name
        self.ev_t, self.ev_kind, self.ev_ref = [], [], []
        self.b_addr, self.b_size, self.b_req, self.b_site = [], [], [], []
        self.b_stream, self.b_a, self.b_f, self.b_state = [], [], [], []
        self.s_addr, self.s_size, self.s_stream, self.s_a, self.s_f = [], [], [], [], []
        self.s_device, self.b_device = [], []
        self.sites = []             # [{"label": str, "frames": [str]}]
        self.site_index = {}
        self.ooms = []              # event-time (ns) of allocation failures
        self.has_segments = False
        self.info = {}              # what the page's header says (pid, reason, ...)
        self.b_series = []
        self.series = []            # labels, the last one may be "other sites"

    def site(self, key, label, frames=()):
        i = self.site_index.get(key)
        if i is None:
            i = self.site_index[key] = len(self.sites)
            self.sites.append({"label": label, "frames": list(frames)})
        return i

    @property
    def n_events(self):
        return len(self.ev_t)

    def live_blocks(self, i):
        return [b for b in range(len(self.b_a)) if self.b_a[b] <= i < self.b_f[b]]

    def live_segments(self, i):
        return [s for s in range(len(self.s_a)) if self.s_a[s] <= i < self.s_f[s]]

    def totals(self, i):
        """Bytes allocated (blocks not free, pending included) and reserved
        (segments; None when the recording has none) at moment i."""
        alloc = sum(self.b_size[b] for b in self.live_blocks(i))
        reserved = sum(self.s_size[s] for s in self.live_segments(i)) if self.has_segments else None
        return alloc, reserved

    def moment_at(self, t_ns):
        """The last event at or before t_ns (0 when t_ns is before the first)."""
        lo, hi = 0, len(self.ev_t)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.ev_t[mid] <= t_ns:
                lo = mid + 1
            else:
                hi = mid
        return max(lo - 1, 0)

    def assign_series(self):
        """The MAX_SERIES sites holding the most bytes at the peak of allocated
        memory get a series each; the others share the last one."""
        peak_i = self.peak_moment()
        held = {}
        for b in self.live_blocks(peak_i):
            held[self.b_site[b]] = held.get(self.b_site[b], 0) + self.b_size[b]
        # Sites absent at the peak rank after those present, by total size.
        total = {}
        for b, s in enumerate(self.b_site):
            total[s] = total.get(s, 0) + self.b_size[b]
        order = sorted(total, key=lambda s: (-held.get(s, 0), -total[s], s))
        chosen = order[:MAX_SERIES]
        index = {s: k for k, s in enumerate(chosen)}
        self.series = [self.sites[s]["label"] for s in chosen]
        other = len(chosen)
        if len(order) > len(chosen):
            self.series.append("other sites")
        self.b_series = [index.get(s, other) for s in self.b_site]

    def peak_moment(self):
        """The first moment at which allocated bytes are highest."""
        size = self.b_size
        cur = best = 0
        best_i = 0
        for i in range(len(self.ev_t)):
            k = self.ev_kind[i]
            if k == ALLOC:
                cur += size[self.ev_ref[i]]
            elif k == FREE:
                cur -= size[self.ev_ref[i]]
            else:
                continue
            if cur > best:
                best, best_i = cur, i
        return best_i


def size_class_site(rec, size):
    for k, (limit, label) in enumerate(SIZE_CLASSES):
        if limit is None or size < limit:
            return rec.site(("class", k), "unknown site, " + label)
    raise AssertionError("SIZE_CLASSES ends with an open class")
