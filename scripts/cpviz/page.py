"""Writes the viewer: one self-contained HTML file (page.js and page.css
inlined, the data as JSON in a non-executed script element).

Invariants: the page loads nothing: its Content-Security-Policy allows no
source at all except the page's own inline script and style, named by their
SHA-256 (default-src 'none'), so even a URL inside a stack frame cannot be
fetched; the JSON cannot end its element early ("</" is written "<\\/").
"""
import base64
import hashlib
import html
import json
import os

from .recording import ALLOC, FREE, SEG_ALLOC, SEG_FREE
from .timeline import overview

HERE = os.path.dirname(os.path.abspath(__file__))


def _read(name):
    with open(os.path.join(HERE, name), encoding="utf-8") as f:
        return f.read()


def _sha(text):
    return "'sha256-%s'" % base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode()


def _deltas(values):
    out, prev = [], 0
    for v in values:
        out.append(v - prev)
        prev = v
    return out


def page_data(rec):
    """The page's data, made small to load fast (10^6 events in about 20 MB):
    times, addresses and first events as differences from the previous one,
    ends as lifetimes (f - a); requested sizes and states only where they
    differ from size and "allocated"; the events' kinds are not written at
    all: page.js rebuilds them from the blocks' and segments' [a, f)."""
    trace = rec.kind == "trace"
    assert ALLOC == 0 and FREE == 1 and SEG_ALLOC == 2 and SEG_FREE == 3  # page.js's codes
    same_req = rec.b_req == rec.b_size
    any_pending = any(s == "pending" for s in rec.b_state)
    return {
        "kind": rec.kind, "name": os.path.basename(rec.name), "info": rec.info,
        "series": rec.series, "sites": rec.sites, "hasSegments": rec.has_segments,
        "ooms": rec.ooms,
        "events": {"dt": _deltas(rec.ev_t)},
        "blocks": {"addr": _deltas(rec.b_addr), "size": rec.b_size,
                   "req": None if same_req else rec.b_req, "site": rec.b_site,
                   "series": rec.b_series, "stream": rec.b_stream, "a": _deltas(rec.b_a),
                   "life": [f - a for a, f in zip(rec.b_a, rec.b_f)],
                   "state": [1 if s == "pending" else 0 for s in rec.b_state] if any_pending else None},
        "segments": {"addr": rec.s_addr, "size": rec.s_size, "a": rec.s_a, "f": rec.s_f},
        "overview": overview(rec) if trace else None,
        "peak": rec.peak_moment() if trace and rec.n_events else None,
    }


def _info_line(rec):
    if rec.kind == "snapshot":
        i = rec.info
        devs = "; ".join("device %d: allocated %s, reserved %s, cached %s, pending %s"
                         % (d["device"], d["allocated"], d["reserved"], d["cached"], d["pending"])
                         for d in i["devices"])
        return "snapshot of pid %d (%s) at %.3f s: %s" % (i["pid"], i["reason"], i["time_s"], devs)
    return ", ".join("%s %s" % (k, v) for k, v in rec.info.items())


def render(rec):
    script, style = _read("page.js"), _read("page.css")
    data = json.dumps(page_data(rec), separators=(",", ":")).replace("</", "<\\/")
    csp = ("default-src 'none'; script-src %s; style-src %s; img-src 'none'; "
           "connect-src 'none'; base-uri 'none'; form-action 'none'" % (_sha(script), _sha(style)))
    title = html.escape("cudapool view: " + os.path.basename(rec.name))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<title>{title}</title>
<style>{style}</style>
</head><body>
<h1>{title}</h1>
<p class="info">{html.escape(_info_line(rec))}</p>
<p id="legend"></p>
<div id="tlbox">
<p class="hint">Allocated bytes stacked by call site (the line: reserved). Drag or wheel to zoom,
double-click or <button id="reset" type="button">reset</button> to see it all; click a moment to list its
blocks. Showing <span id="range"></span>.</p>
<canvas id="timeline" width="1200" height="320"></canvas>
<div id="selection"></div>
</div>
<p id="moment"></p>
<p class="hint">Segment map at that moment: segments end to end in address order, blocks coloured by call site
(dark grey: freed, device work pending), light grey: free holes.</p>
<canvas id="segmap" width="1200" height="240"></canvas>
<table><thead><tr><th>address</th><th>size</th><th>requested</th><th>state</th><th>stream</th>
<th>call site</th></tr></thead><tbody id="blockrows"></tbody></table>
<p id="more"></p>
<script type="application/json" id="cpdata">{data}</script>
<script>{script}</script>
</body></html>
"""
