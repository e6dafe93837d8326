"""Reads a cudapool snapshot (the JSON the shim writes on OOM, on a signal,
on request (`cudapool snapshot PID`) or at exit; version 1) into a Recording
of one moment.

Owns the snapshot's schema check: every field the viewer uses is checked for
presence and type, and the first one wrong stops the read with an InputError
naming its path (devices[0].segments[2].blocks[1].size). Free blocks are the
holes of their segment and are not kept as blocks; pending blocks are kept
(state "pending": freed, but device work may still touch them).
Invariants: the Recording has one pseudo event (index 0); every block and
segment is live over [0, 1).
"""
import json

from .recording import InputError, Recording

REASONS = ("oom", "signal", "exit", "request")
STATES = ("allocated", "free", "pending")


class _Checker:
    def __init__(self, name):
        self.name = name

    def fail(self, path, what):
        raise InputError("%s: bad snapshot: %s: %s" % (self.name, path, what))

    def get(self, obj, key, types, path, optional=False):
        if not isinstance(obj, dict):
            self.fail(path, "expected an object")
        if key not in obj:
            if optional:
                return None
            self.fail(path, "missing \"%s\"" % key)
        v = obj[key]
        ok = isinstance(v, types) and not (isinstance(v, bool) and bool not in _tuple(types))
        if not ok:
            self.fail("%s.%s" % (path, key) if path else key,
                      "expected %s, got %s" % (_names(types), json.dumps(v)[:40]))
        return v

    def addr(self, obj, path):
        v = self.get(obj, "address", str, path)
        try:
            if v[:2].lower() == "0x":
                return int(v, 16)
        except ValueError:
            pass
        self.fail(path + ".address", "expected a hex address like \"0x7f0000000000\", got %r" % v[:40])


def _tuple(t):
    return t if isinstance(t, tuple) else (t,)


def _names(types):
    names = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
             list: "a list", dict: "an object", type(None): "null"}
    return " or ".join(names[t] for t in _tuple(types))


def frame_text(frame):
    if "python" in frame:
        return str(frame["python"])
    sym = frame.get("symbol") or "?"
    obj = frame.get("object") or "?"
    off = frame.get("offset")
    return "%s+%s (%s) %s" % (sym, off if off is not None else "?", obj, frame.get("pc", ""))


def read(name, text):
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise InputError("%s: bad snapshot: not JSON (%s)" % (name, e)) from None
    c = _Checker(name)
    version = c.get(doc, "version", int, "")
    if version != 1:
        c.fail("version", "cannot read version %d (this viewer reads version 1)" % version)
    pid = c.get(doc, "pid", int, "")
    reason = c.get(doc, "reason", str, "")
    if reason not in REASONS:
        c.fail("reason", "expected one of %s, got %r" % ("/".join(REASONS), reason[:40]))
    time_s = c.get(doc, "time_s", (int, float), "")
    rec = Recording("snapshot", name)
    stacks = {}
    for k, st in enumerate(c.get(doc, "stacks", list, "")):
        path = "stacks[%d]" % k
        sid = c.get(st, "id", int, path)
        frames = []
        for j, fr in enumerate(c.get(st, "frames", list, path)):
            fpath = "%s.frames[%d]" % (path, j)
            if not isinstance(fr, dict):
                c.fail(fpath, "expected an object")
            if "python" in fr:
                c.get(fr, "python", str, fpath)
            else:
                c.get(fr, "pc", str, fpath)
            frames.append(frame_text(fr))
        stacks[sid] = frames
    rec.ev_t, rec.ev_kind, rec.ev_ref = [0], [-1], [0]
    totals = []
    for d, dev in enumerate(c.get(doc, "devices", list, "")):
        dpath = "devices[%d]" % d
        device = c.get(dev, "device", int, dpath)
        t = c.get(dev, "totals", dict, dpath)
        totals.append({"device": device, **{k: c.get(t, k, int, dpath + ".totals")
                                            for k in ("allocated", "reserved", "cached", "pending")}})
        for s, seg in enumerate(c.get(dev, "segments", list, dpath)):
            spath = "%s.segments[%d]" % (dpath, s)
            rec.s_addr.append(c.addr(seg, spath))
            rec.s_size.append(c.get(seg, "size", int, spath))
            rec.s_stream.append(c.get(seg, "stream", int, spath))
            c.get(seg, "expandable", bool, spath)
            rec.s_device.append(device)
            rec.s_a.append(0)
            rec.s_f.append(1)
            for b, blk in enumerate(c.get(seg, "blocks", list, spath)):
                bpath = "%s.blocks[%d]" % (spath, b)
                addr = c.addr(blk, bpath)
                size = c.get(blk, "size", int, bpath)
                req = c.get(blk, "requested", int, bpath)
                state = c.get(blk, "state", str, bpath)
                if state not in STATES:
                    c.fail(bpath + ".state", "expected one of %s, got %r" % ("/".join(STATES), state[:40]))
                stream = c.get(blk, "stream", int, bpath)
                stack = c.get(blk, "stack", (int, type(None)), bpath)
                if stack is not None and stack not in stacks:
                    c.fail(bpath + ".stack", "stack %d is not in \"stacks\"" % stack)
                if state == "free":
                    continue
                frames = stacks.get(stack, [])
                label = ("site: " + frames[0]) if frames else "unknown site"
                rec.b_site.append(rec.site(stack, label, frames))
                rec.b_addr.append(addr)
                rec.b_size.append(size)
                rec.b_req.append(req)
                rec.b_state.append(state)
                rec.b_stream.append(stream)
                rec.b_device.append(device)
                rec.b_a.append(0)
                rec.b_f.append(1)
    rec.has_segments = True
    rec.info = {"pid": pid, "reason": reason, "time_s": time_s, "devices": totals,
                "blocks": len(rec.b_a), "segments": len(rec.s_a)}
    rec.assign_series()
    return rec
