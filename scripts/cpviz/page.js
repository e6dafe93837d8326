// page.js: the viewer page's behaviour, inlined by page.py into the one HTML
// file (no library, no network). Reads the JSON in #cpdata (page.py's
// layout), draws the timeline stacked by series on #timeline, and, for the
// chosen moment, the segment map (#segmap: blocks coloured by series, free
// holes light) and the live blocks (#blocks).
// Invariants: a moment is an event index; its live blocks are those with
// a <= i < f, the same rule as recording.py; text from the data is only
// ever set with textContent.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("cpdata").textContent);
  const COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                  "#edc948", "#b07aa1", "#ff9da7", "#9c755f"];
  const NSER = Math.max(D.series.length, 1);
  const B = decodeBlocks(D.blocks), S = D.segments, EV = decodeEvents(D.events, B, S);
  const NEV = EV.t.length, END = NEV ? EV.t[NEV - 1] : 0;
  const tl = document.getElementById("timeline"), seg = document.getElementById("segmap");
  let view = [0, Math.max(END, 1)], cols = [], moment = -1;

  // page.py's compact columns back to plain ones (see its page_data).
  function undelta(d, Arr) {
    const out = new Arr(d.length);
    let v = 0;
    for (let k = 0; k < d.length; k++) { v += d[k]; out[k] = v; }
    return out;
  }
  function decodeBlocks(b) {
    const n = b.size.length, a = undelta(b.a, Int32Array), f = new Int32Array(n);
    for (let k = 0; k < n; k++) f[k] = a[k] + b.life[k];
    return {addr: undelta(b.addr, Float64Array), size: b.size, req: b.req || b.size, site: b.site,
            series: b.series, stream: b.stream, a: a, f: f, state: b.state || new Int8Array(n)};
  }
  // Event i's code: 4 * (block or segment) + kind (0 allocate, 1 free,
  // 2 segment allocate, 3 segment free), from who starts or ends there.
  function decodeEvents(e, b, s) {
    const t = undelta(e.dt, Float64Array), n = t.length, c = new Int32Array(n);
    if (D.kind !== "trace") return {t: t, c: c};
    for (let k = 0; k < b.a.length; k++) {
      c[b.a[k]] = 4 * k;
      if (b.f[k] < n) c[b.f[k]] = 4 * k + 1;
    }
    for (let k = 0; k < s.a.length; k++) {
      c[s.a[k]] = 4 * k + 2;
      if (s.f[k] < n) c[s.f[k]] = 4 * k + 3;
    }
    return {t: t, c: c};
  }

  function fmt(n) {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let k = 0, v = n;
    while (Math.abs(v) >= 1024 && k < u.length - 1) { v /= 1024; k++; }
    return (k ? v.toFixed(2) : String(v)) + " " + u[k];
  }
  function exact(n) { return n.toLocaleString("en-US") + " B (" + fmt(n) + ")"; }
  function secs(ns) { return (ns / 1e9).toFixed(6) + " s"; }
  function color(s) { return COLORS[s % COLORS.length]; }
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  // Columns of the timeline: one per pixel, each {i, v[series], r}: the
  // moment of highest allocated bytes in it (or the last before it).
  function columnsFromPoints(t, idx, series, reserved, W) {
    const out = new Array(W);
    const span = Math.max(view[1] - view[0], 1);
    let p = 0, last = null;
    for (let x = 0; x < W; x++) {
      const end = view[0] + span * (x + 1) / W;
      let best = null;
      while (p < t.length && t[p] < end) {
        const v = series.map(c => c[p]);
        const c = {i: idx[p], v: v, tot: v.reduce((a, b) => a + b, 0), r: reserved[p]};
        if (t[p] >= view[0] - span / W && (!best || c.tot > best.tot)) best = {...c, r: Math.max(c.r, best ? best.r : 0)};
        last = c;
        p++;
      }
      out[x] = best || last;
    }
    return out;
  }
  function columnsFromEvents(W) {
    // Replays every event: 10^6 of them take a few ms.
    const t = [], idx = [], series = [], reserved = [];
    for (let s = 0; s < NSER; s++) series.push([]);
    const cur = new Array(NSER).fill(0);
    let r = 0;
    const span = Math.max(view[1] - view[0], 1);
    let lastBin = -2, binBest = -1;
    for (let i = 0; i < NEV; i++) {
      const code = EV.c[i], kind = code & 3, ref = code >> 2;
      if (kind === 0) cur[B.series[ref]] += B.size[ref];
      else if (kind === 1) cur[B.series[ref]] -= B.size[ref];
      else if (kind === 2) r += S.size[ref];
      else r -= S.size[ref];
      const ti = EV.t[i];
      if (ti > view[1]) break;
      const bin = ti < view[0] ? -1 : Math.min(Math.floor((ti - view[0]) * W / span), W - 1);
      const tot = cur.reduce((a, b) => a + b, 0);
      if (bin !== lastBin || bin === -1) {
        if (bin !== -1 || lastBin !== -1 || t.length === 0) {
          t.push(ti); idx.push(i); reserved.push(r);
          for (let s = 0; s < NSER; s++) series[s].push(cur[s]);
        } else {
          t[t.length - 1] = ti; idx[idx.length - 1] = i; reserved[reserved.length - 1] = r;
          for (let s = 0; s < NSER; s++) series[s][series[s].length - 1] = cur[s];
        }
        lastBin = bin; binBest = tot;
      } else {
        const k = t.length - 1;
        if (r > reserved[k]) reserved[k] = r;
        if (tot > binBest) {
          binBest = tot; t[k] = ti; idx[k] = i;
          for (let s = 0; s < NSER; s++) series[s][k] = cur[s];
        }
      }
    }
    return columnsFromPoints(t, idx, series, reserved, W);
  }

  function drawTimeline() {
    const W = tl.width, H = tl.height, ctx = tl.getContext("2d");
    const full = view[0] <= 0 && view[1] >= END;
    cols = full && D.overview ? columnsFromPoints(D.overview.t, D.overview.i, D.overview.series,
                                                  D.overview.reserved, W)
                              : columnsFromEvents(W);
    let top = 1;
    for (const c of cols) if (c) top = Math.max(top, c.tot, D.hasSegments ? c.r : 0);
    ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, W, H);
    const pad = 14, h = H - pad;
    for (let x = 0; x < W; x++) {
      const c = cols[x];
      if (!c) continue;
      let y = H;
      for (let s = 0; s < NSER; s++) {
        const dh = c.v[s] * h / top;
        ctx.fillStyle = color(s);
        ctx.fillRect(x, y - dh, 1, dh);
        y -= dh;
      }
      if (D.hasSegments) { ctx.fillStyle = "#000000"; ctx.fillRect(x, H - c.r * h / top - 1, 1, 2); }
    }
    ctx.fillStyle = "#c00000";
    for (const t of D.ooms) {
      const x = (t - view[0]) * W / Math.max(view[1] - view[0], 1);
      if (x >= 0 && x < W) ctx.fillRect(x, 0, 1, H);
    }
    if (moment >= 0 && NEV) {
      const x = (EV.t[moment] - view[0]) * W / Math.max(view[1] - view[0], 1);
      ctx.fillStyle = "#000000"; ctx.fillRect(x, 0, 1, H);
    }
    ctx.fillStyle = "#333333"; ctx.font = "11px sans-serif";
    ctx.fillText("top " + fmt(top) + "   " + secs(view[0]) + " .. " + secs(view[1]), 4, 11);
    document.getElementById("range").textContent = secs(view[0]) + " .. " + secs(view[1]);
  }

  function live(i) {
    const blocks = [], segs = [];
    for (let b = 0; b < B.size.length; b++) if (B.a[b] <= i && i < B.f[b]) blocks.push(b);
    for (let s = 0; s < S.size.length; s++) if (S.a[s] <= i && i < S.f[s]) segs.push(s);
    blocks.sort((x, y) => B.addr[x] - B.addr[y]);
    segs.sort((x, y) => S.addr[x] - S.addr[y]);
    return {blocks, segs};
  }

  // Bytes of the map: the live segments (or, without segments, the live
  // blocks) laid end to end across rows of the canvas.
  function drawSegmap(L) {
    const W = seg.width, H = seg.height, ctx = seg.getContext("2d"), ROW = 12, rows = Math.floor(H / ROW);
    ctx.fillStyle = "#ffffff"; ctx.fillRect(0, 0, W, H);
    const spans = D.hasSegments ? L.segs.map(s => [S.addr[s], S.size[s]]) : L.blocks.map(b => [B.addr[b], B.size[b]]);
    let total = 0;
    for (const sp of spans) total += sp[1];
    const per = Math.max(total / (W * rows), 1e-9);
    function paint(off, len, style) {
      let p0 = off / per, p1 = (off + len) / per;
      if (p1 - p0 < 1) p1 = p0 + 1;
      ctx.fillStyle = style;
      while (p0 < p1) {
        const row = Math.floor(p0 / W), x = p0 - row * W, w = Math.min(p1 - p0, W - x);
        ctx.fillRect(x, row * ROW, w, ROW - 2);
        p0 += w;
      }
    }
    let off = 0, bi = 0;
    const holes = {count: 0, bytes: 0, largest: 0};
    for (const [addr, size] of spans) {
      paint(off, size, "#e8e8e8");
      let cursor = addr;
      while (bi < L.blocks.length && B.addr[L.blocks[bi]] < addr + size) {
        const b = L.blocks[bi++];
        if (B.addr[b] < addr) continue;
        if (B.addr[b] > cursor) noteHole(holes, B.addr[b] - cursor);
        paint(off + B.addr[b] - addr, B.size[b], B.state[b] === 1 ? "#555555" : color(B.series[b]));
        cursor = Math.max(cursor, B.addr[b] + B.size[b]);
      }
      if (D.hasSegments && addr + size > cursor) noteHole(holes, addr + size - cursor);
      paint(off, 0, "#000000");
      off += size;
    }
    return holes;
  }
  function noteHole(h, n) { h.count++; h.bytes += n; h.largest = Math.max(h.largest, n); }

  function select(i) {
    moment = i;
    const L = live(i);
    let alloc = 0, reserved = 0;
    for (const b of L.blocks) alloc += B.size[b];
    for (const s of L.segs) reserved += S.size[s];
    const holes = drawSegmap(L);
    const m = document.getElementById("moment");
    m.textContent = "";
    m.appendChild(el("span", (D.kind === "trace" ? "moment " + i + " at " + secs(NEV ? EV.t[i] : 0) + ": " : "snapshot: ")));
    m.appendChild(el("span", "allocated " + exact(alloc), "total"));
    m.appendChild(el("span", D.hasSegments ? ", reserved " + exact(reserved) : ", reserved: not in the trace (no segment events)"));
    m.appendChild(el("span", ", " + L.blocks.length + " live blocks"));
    if (D.hasSegments)
      m.appendChild(el("span", ", free in segments " + exact(holes.bytes) + " in " + holes.count +
                       " holes (largest " + fmt(holes.largest) + ")"));
    m.dataset.allocated = alloc; m.dataset.reserved = reserved; m.dataset.blocks = L.blocks.length;
    listBlocks(L.blocks);
    if (D.kind === "trace") drawTimeline();
  }

  function listBlocks(blocks) {
    const body = document.getElementById("blockrows");
    body.textContent = "";
    const order = blocks.slice().sort((x, y) => B.size[y] - B.size[x]);
    const LIMIT = 500;
    for (const b of order.slice(0, LIMIT)) {
      const tr = el("tr");
      tr.appendChild(el("td", "0x" + B.addr[b].toString(16)));
      tr.appendChild(el("td", B.size[b].toLocaleString("en-US"), "num"));
      tr.appendChild(el("td", B.req[b].toLocaleString("en-US"), "num"));
      tr.appendChild(el("td", B.state[b] === 1 ? "pending" : "allocated"));
      tr.appendChild(el("td", String(B.stream[b])));
      const site = D.sites[B.site[b]], td = el("td");
      const sw = el("span", "\u25a0 "); sw.style.color = color(B.series[b]); td.appendChild(sw);
      if (site.frames.length) {
        const d = el("details"); d.appendChild(el("summary", site.label));
        const pre = el("pre", site.frames.join("\n")); d.appendChild(pre); td.appendChild(d);
      } else td.appendChild(el("span", site.label));
      tr.appendChild(td);
      body.appendChild(tr);
    }
    const more = document.getElementById("more");
    more.textContent = order.length > LIMIT ? "... and " + (order.length - LIMIT) + " smaller blocks" : "";
  }

  function legend() {
    const lg = document.getElementById("legend");
    D.series.forEach((s, k) => {
      const e = el("span", "\u25a0 ", "key"); e.style.color = color(k);
      lg.appendChild(e); lg.appendChild(el("span", s + "   "));
    });
    if (D.hasSegments) lg.appendChild(el("span", "\u2014 reserved   "));
    if (D.ooms.length) { const e = el("span", "| allocation failure", "oom"); lg.appendChild(e); }
  }

  function xToTime(x) { return view[0] + (view[1] - view[0]) * x / tl.width; }
  function canvasX(ev) { const r = tl.getBoundingClientRect(); return (ev.clientX - r.left) * tl.width / r.width; }
  function momentAtX(x) {
    const c = cols[Math.max(0, Math.min(cols.length - 1, Math.floor(x)))];
    if (c) return c.i;
    const t = xToTime(x);
    let lo = 0, hi = NEV;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (EV.t[mid] <= t) lo = mid + 1; else hi = mid; }
    return Math.max(lo - 1, 0);
  }
  function setView(a, b) {
    const minSpan = 1000;
    a = Math.max(0, a); b = Math.min(Math.max(END, 1), b);
    if (b - a < minSpan) { const m = (a + b) / 2; a = Math.max(0, m - minSpan / 2); b = a + minSpan; }
    view = [a, b];
    drawTimeline();
  }

  let dragFrom = null;
  const sel = document.getElementById("selection");
  tl.addEventListener("mousedown", ev => { dragFrom = canvasX(ev); });
  tl.addEventListener("mousemove", ev => {
    if (dragFrom === null) return;
    const x = canvasX(ev), r = tl.getBoundingClientRect(), k = r.width / tl.width;
    sel.style.display = "block";
    sel.style.left = (tl.offsetLeft + Math.min(x, dragFrom) * k) + "px";
    sel.style.top = tl.offsetTop + "px";
    sel.style.width = (Math.abs(x - dragFrom) * k) + "px";
    sel.style.height = r.height + "px";
  });
  window.addEventListener("mouseup", ev => {
    if (dragFrom === null) return;
    const x = canvasX(ev), from = dragFrom;
    dragFrom = null; sel.style.display = "none";
    if (Math.abs(x - from) > 4) setView(xToTime(Math.min(x, from)), xToTime(Math.max(x, from)));
    else if (ev.target === tl) select(momentAtX(x));
  });
  tl.addEventListener("wheel", ev => {
    ev.preventDefault();
    const t = xToTime(canvasX(ev)), f = ev.deltaY > 0 ? 1.25 : 0.8;
    setView(t - (t - view[0]) * f, t + (view[1] - t) * f);
  }, {passive: false});
  tl.addEventListener("dblclick", () => setView(0, END));
  document.getElementById("reset").addEventListener("click", () => setView(0, END));

  legend();
  if (D.kind === "snapshot") {
    document.getElementById("tlbox").style.display = "none";
    select(0);
  } else {
    drawTimeline();
    if (D.peak !== null) select(D.peak);
  }
  // bench/viewer reads how long the page took to be usable.
  document.body.dataset.readyMs = String(Math.round(performance.now()));
  document.body.dataset.ready = "1";
})();
