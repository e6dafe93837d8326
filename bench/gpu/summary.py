#!/usr/bin/env python3
"""summary.py: the table scripts/gpu-check prints last.

Reads what gpu-check left in its work folder:
  meta.tsv          key<TAB>value (gpu, driver, commit, date, mode, out, host)
  records.tsv       section<TAB>status<TAB>name<TAB>detail, rows judged by the
                    script itself (builds, tests, memcheck)
  alloc-native.out, alloc-pool.out     bench/gpu/alloc_bench output
  cg-native.out, cg-pool.out           bench/gpu/legacy_cg output
  demo-native.out, demo-pool.out       demo/legacy_app output
  torch-WORKLOAD-ALLOC.json            bench/pytorch result lines
                                       (ALLOC: caching, off, cudapool, runtime,
                                       expandable (CUDAPOOL_EXPANDABLE=1),
                                       async, async-cudapool, pluggable)
merges the native and pool runs of each benchmark into one row with the
ratios, judges the goals of issue 5, prints the table, and writes
OUT/summary.txt (the table) and OUT/results.json (everything, parsed).

Table: one row per check, "STATUS  CHECK  RESULT", STATUS one of
  PASS / FAIL  correctness (tests, identical results, identical loss)
  MET / MISS   a performance goal of issue 5 (the RESULT says which)
  INFO         a measurement without a goal
  SKIP         not run (the RESULT says why)
and a closing count line.

Usage: summary.py WORK_DIR OUT_DIR
"""

import json
import os
import re
import sys

GOAL_PAIR_NS = 60.0        # cached pair at most 60 ns (issue 14)
GOAL_STREAM_PAIR_NS = 300.0  # the same with a stream live, hot block included: at most 300 ns (issue 14)
GOAL_VS_NATIVE = 300.0     # at least 300x faster than native
GOAL_VS_ASYNC = 10.0       # at least 10x faster than cudaMallocAsync (issue 14)
GOAL_DEFAULT_ASYNC = 4.0   # cudaMallocAsync pairs: at least 4x faster than CUDA's default pool
GOAL_THREADS = 6.0         # 16 threads: at least 6x the single-thread pairs/s (issue 14)
GOAL_TORCH_TIME = 1.03  # issue 10: step time within 3% of PyTorch's own allocator


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def kv_lines(text, head):
    """Lines 'head k=v k=v ...' as dicts."""
    rows = []
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0] != head:
            continue
        d = {}
        for p in parts[1:]:
            if "=" in p:
                k, v = p.split("=", 1)
                try:
                    d[k] = float(v)
                except ValueError:
                    d[k] = v
        rows.append(d)
    return rows


def fmt_size(n):
    n = int(n)
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def fmt_ns(x):
    if x is None:
        return "-"
    if x >= 1e6:
        return "%.2f ms" % (x / 1e6)
    if x >= 1e4:
        return "%.1f us" % (x / 1e3)
    return "%.0f ns" % x


def fmt_rate(x):
    if x is None:
        return "-"
    if x >= 1e6:
        return "%.2fM" % (x / 1e6)
    if x >= 1e3:
        return "%.1fk" % (x / 1e3)
    return "%.0f" % x


def fmt_bytes(n):
    if n is None:
        return "-"
    return "%.2f GiB" % (n / float(1 << 30))


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_x(r):
    return "-" if r is None else ("%.0fx" % r if r >= 100 else "%.1fx" % r)


SECTIONS = ("build", "test", "bench", "pytorch", "nvtx")


class Table:
    """Rows of the final table, kept in section order (build, test, bench,
    pytorch) whatever order they are added in."""

    def __init__(self):
        self.rows = []
        self.section = "bench"

    def add(self, status, name, detail, section=None):
        self.rows.append({"section": section or self.section, "status": status,
                          "check": name, "result": detail})

    def ordered(self):
        rank = lambda r: SECTIONS.index(r["section"]) if r["section"] in SECTIONS else 99  # noqa: E731
        return sorted(self.rows, key=rank)  # sorted() is stable


def bench_rows(work, table, results):
    nat = read(os.path.join(work, "alloc-native.out"))
    pool = read(os.path.join(work, "alloc-pool.out"))
    if not nat and not pool:
        return
    results["pairs"] = []
    npairs = {int(d["size"]): d for d in kv_lines(nat, "pair") if "size" in d}
    ppairs = {int(d["size"]): d for d in kv_lines(pool, "pair") if "size" in d}
    pool_active = "allocator=pool" in pool
    if pool and not pool_active:
        table.add("FAIL", "bench under the shim", "alloc_bench did not see cudapool loaded")
    for size in sorted(set(npairs) | set(ppairs)):
        n, p = npairs.get(size, {}), ppairs.get(size, {})
        native_ns = n.get("native_ns")
        pool_ns = p.get("pool_ns")
        async_ns = p.get("async_ns", n.get("async_ns"))
        r_native, r_async = ratio(native_ns, pool_ns), ratio(async_ns, pool_ns)
        rec = {"size": size, "native_ns": native_ns, "pool_ns": pool_ns, "async_ns": async_ns,
               "pool_stream_ns": p.get("pool_stream_ns"),
               "native_over_pool": r_native, "async_over_pool": r_async,
               "async_ns_native_run": n.get("async_ns")}
        results["pairs"].append(rec)
        detail = "native %s  pool %s  async %s  native/pool %s  async/pool %s  (pool with a stream live %s)" % (
            fmt_ns(native_ns), fmt_ns(pool_ns), fmt_ns(async_ns), fmt_x(r_native), fmt_x(r_async),
            fmt_ns(p.get("pool_stream_ns")))
        if pool_ns is None or native_ns is None:
            table.add("SKIP", "pair %s" % fmt_size(size), detail + "  (a run is missing)")
            continue
        missed = []
        if pool_ns > GOAL_PAIR_NS:
            missed.append("pool > %.0f ns" % GOAL_PAIR_NS)
        stream_ns = p.get("pool_stream_ns")
        if stream_ns is not None and stream_ns > GOAL_STREAM_PAIR_NS:
            missed.append("stream live > %.0f ns" % GOAL_STREAM_PAIR_NS)
        if r_native is not None and r_native < GOAL_VS_NATIVE:
            missed.append("< %.0fx native" % GOAL_VS_NATIVE)
        if r_async is not None and r_async < GOAL_VS_ASYNC:
            missed.append("< %.0fx async" % GOAL_VS_ASYNC)
        table.add("MISS" if missed else "MET", "pair %s" % fmt_size(size),
                  detail + ("  [missed: %s]" % ", ".join(missed) if missed else ""))

    nc, pc = kv_lines(nat, "churn"), kv_lines(pool, "churn")
    if nc or pc:
        n, p = (nc or [{}])[0], (pc or [{}])[0]
        native_ns, pool_ns = n.get("native_ns"), p.get("pool_ns")
        async_ns = p.get("async_ns", n.get("async_ns"))
        results["churn"] = {"native_ns": native_ns, "pool_ns": pool_ns, "async_ns": async_ns,
                            "live": p.get("live", n.get("live"))}
        table.add("INFO", "churn 64 live, 256 B-8 MiB",
                  "native %s  pool %s  async %s  native/pool %s  async/pool %s" % (
                      fmt_ns(native_ns), fmt_ns(pool_ns), fmt_ns(async_ns),
                      fmt_x(ratio(native_ns, pool_ns)), fmt_x(ratio(async_ns, pool_ns))))

    # cudaMallocAsync pairs on the default pool: served by cudapool under the
    # shim, by CUDA's default pool natively (issue 15: >= 4x faster).
    nd = {int(d["size"]): d for d in kv_lines(nat, "default_async") if "size" in d}
    pd = {int(d["size"]): d for d in kv_lines(pool, "default_async") if "size" in d}
    if nd or pd:
        results["default_async"] = []
    for size in sorted(set(nd) | set(pd)):
        native_ns, pool_ns = nd.get(size, {}).get("native_ns"), pd.get(size, {}).get("pool_ns")
        own_ns = pd.get(size, {}).get("async_ns", nd.get(size, {}).get("async_ns"))
        r = ratio(native_ns, pool_ns)
        results["default_async"].append({"size": size, "native_default_ns": native_ns, "pool_ns": pool_ns,
                                         "own_pool_ns": own_ns, "native_over_pool": r})
        detail = "cudaMallocAsync pair: CUDA default pool %s  cudapool %s  own pool %s  native/pool %s" % (
            fmt_ns(native_ns), fmt_ns(pool_ns), fmt_ns(own_ns), fmt_x(r))
        if r is None:
            table.add("SKIP", "default_async %s" % fmt_size(size), detail + "  (a run is missing)")
        else:
            table.add("MET" if r >= GOAL_DEFAULT_ASYNC else "MISS", "default_async %s" % fmt_size(size),
                      detail + ("" if r >= GOAL_DEFAULT_ASYNC else "  [missed: < %.0fx]" % GOAL_DEFAULT_ASYNC))

    for head in ("threads", "threads_legacy", "threads_work"):
        nt = {int(d["n"]): d for d in kv_lines(nat, head) if "n" in d}
        pt = {int(d["n"]): d for d in kv_lines(pool, head) if "n" in d}
        if not nt and not pt:
            continue
        counts = sorted(set(nt) | set(pt))
        rows = []
        for c in counts:
            rows.append({"threads": c,
                         "native_pairs_per_s": nt.get(c, {}).get("native_pairs_per_s"),
                         "pool_pairs_per_s": pt.get(c, {}).get("pool_pairs_per_s"),
                         "async_pairs_per_s": pt.get(c, {}).get(
                             "async_pairs_per_s", nt.get(c, {}).get("async_pairs_per_s"))})
        results[head] = rows
        joined = lambda key: "/".join(fmt_rate(r[key]) for r in rows)  # noqa: E731
        label = "/".join(str(c) for c in counts)
        detail = "pairs/s at %s threads: pool %s  native %s  async %s" % (
            label, joined("pool_pairs_per_s"), joined("native_pairs_per_s"),
            joined("async_pairs_per_s"))
        one = next((r["pool_pairs_per_s"] for r in rows if r["threads"] == 1), None)
        most = rows[-1]["pool_pairs_per_s"] if rows else None
        scale = ratio(most, one)
        detail += "  pool %dT/1T %s" % (counts[-1], fmt_x(scale))
        name = {"threads": "threads (pairs only)", "threads_legacy": "threads, no stream created",
                "threads_work": "threads + memset per pair"}[head]
        if head != "threads_work" and scale is not None:
            status = "MET" if scale >= GOAL_THREADS else "MISS"
            if status == "MISS":
                detail += "  [missed: < %.0fx]" % GOAL_THREADS
        else:
            status = "INFO" if scale is not None else "SKIP"
        table.add(status, name, detail)


def legacy_rows(work, table, results):
    for key, head, label in (("cg", "legacy_cg", "legacy_cg (CG solver)"),
                             ("demo", None, "demo legacy_app")):
        nat = read(os.path.join(work, "%s-native.out" % key))
        pool = read(os.path.join(work, "%s-pool.out" % key))
        if not nat and not pool:
            continue
        if head:
            n = (kv_lines(nat, head) or [{}])[0]
            p = (kv_lines(pool, head) or [{}])[0]
            nt, pt = n.get("total_ms"), p.get("total_ms")
            same = n.get("residual") is not None and n.get("residual") == p.get("residual")
            results[head] = {"native_ms": nt, "pool_ms": pt, "native_residual": n.get("residual"),
                             "pool_residual": p.get("residual")}
            detail = "native %s ms  pool %s ms  speed-up %s  residual %s" % (
                nt if nt is not None else "-", pt if pt is not None else "-",
                fmt_x(ratio(nt, pt)), "identical" if same else "DIFFERS (%s vs %s)" % (
                    n.get("residual"), p.get("residual")))
            table.add("PASS" if same and nt and pt else "FAIL", label, detail)
        else:
            def total(text):
                m = re.search(r"legacy_app: total ([0-9.]+) ms", text)
                return float(m.group(1)) if m else None
            nt, pt = total(nat), total(pool)
            ok = nt is not None and pt is not None and "WRONG" not in nat + pool
            results["demo"] = {"native_ms": nt, "pool_ms": pt}
            table.add("PASS" if ok else "FAIL", label,
                      "native %s ms  pool %s ms  speed-up %s%s" % (
                          nt if nt is not None else "-", pt if pt is not None else "-",
                          fmt_x(ratio(nt, pt)), "" if ok else "  (a run failed its check)"))


def torch_rows(work, table, results):
    base = ("caching", "off", "cudapool")
    # "runtime" is cudapool with CUDAPOOL_LAYER=runtime: the pool then holds
    # exactly what PyTorch's allocator holds (cuBLAS/cuDNN's driver-level
    # allocations stay native in both), so its peak reserved is the
    # like-for-like figure; the default-layer run's process peak is the real
    # cost. PyTorch's cudaMallocAsync backend natively and under cudapool, and
    # cudapool as PyTorch's pluggable allocator: extra rows when they ran.
    allocs = base + ("barriers", "runtime", "async", "async-cudapool", "pluggable")
    for wl in ("transformer", "gpt2", "convnext_tiny", "densenet121", "resnet50", "efficientnet_b0", "vit_b_16"):
        runs = {}
        for a in allocs:
            text = read(os.path.join(work, "torch-%s-%s.json" % (wl, a))).strip()
            if not text:
                continue
            try:
                runs[a] = json.loads(text.splitlines()[-1])
            except ValueError:
                runs[a] = {"error": "unparsable output"}
        if not runs:
            continue
        results.setdefault("pytorch", {})[wl] = runs
        parts = []
        for a in allocs:
            r = runs.get(a)
            if not r and a not in base:
                continue
            if not r or "step_ms_median" not in r:
                parts.append("%s -" % a)
                continue
            s = "%s %.1f ms" % (a, r["step_ms_median"]) if a != "runtime" else "runtime layer"
            if r.get("peak_reserved_bytes"):
                s += " %s" % fmt_bytes(r["peak_reserved_bytes"])
            if r.get("process_peak_bytes"):
                s += " (process %s)" % fmt_bytes(r["process_peak_bytes"])
            if a == "cudapool" and r.get("utilization"):
                s += " util %.2f" % r["utilization"]
            pool = r.get("cudapool") or {}
            if a == "cudapool" and "num_order_waits" in pool:
                s += " order: %s immediate, %s barriers, %s waits, %s recoveries" % (
                    pool.get("num_immediate_reuse"), pool.get("num_barriers"),
                    pool.get("num_order_waits"), pool.get("num_order_recoveries"))
            parts.append(s)
        losses = {a: runs[a].get("loss_hex") for a in allocs if a in runs}
        # "off" is optional (GPU_CHECK_TORCH_ALLOCS may leave it out).
        have_all = all(a in runs and runs[a].get("loss_hex") for a in ("caching", "cudapool"))
        same = have_all and len(set(losses.values())) == 1
        if same:
            loss_txt = "loss %r identical in all %d runs" % (runs["caching"]["loss"], len(losses))
        else:
            loss_txt = "loss " + ", ".join("%s %s" % (a, runs[a].get("loss", "-"))
                                            for a in allocs if a in runs)
        pool_run = runs.get("cudapool", {})
        if pool_run and pool_run.get("allocator") not in (None, "cudapool"):
            loss_txt += "  (the cudapool run saw allocator %s)" % pool_run.get("allocator")
            same = False
        table.add("PASS" if same else "FAIL", "torch %s loss" % wl, loss_txt)

        c, o, p = runs.get("caching", {}), runs.get("off", {}), runs.get("cudapool", {})
        ct, ot, pt = c.get("step_ms_median"), o.get("step_ms_median"), p.get("step_ms_median")
        detail = " | ".join(parts)
        if ct and pt:
            detail += " | cudapool/caching %.3f, off/cudapool %s" % (pt / ct, fmt_x(ratio(ot, pt)))
            missed = []
            if pt > GOAL_TORCH_TIME * ct:
                missed.append("step > %.2fx caching" % GOAL_TORCH_TIME)
            cr = c.get("peak_reserved_bytes")
            pr = runs.get("runtime", {}).get("peak_reserved_bytes") or p.get("peak_reserved_bytes")
            if cr and pr and pr > cr:
                missed.append("reserves more than caching (like for like)")
            cp_, pp = c.get("process_peak_bytes"), p.get("process_peak_bytes")
            if cp_ and pp and pp > cp_:
                missed.append("process peak above caching's")
            if missed:
                detail += "  [missed: %s]" % ", ".join(missed)
            table.add("MISS" if missed else "MET", "torch %s time/memory" % wl, detail)
        else:
            table.add("SKIP", "torch %s time/memory" % wl, detail + "  (a run is missing)")
        expandable_row(work, table, results, wl, c)


GOAL_EXPANDABLE_RESERVED = 0.90  # issue 11: at most 0.90x what PyTorch's allocator reserves
GOAL_EXPANDABLE_TIME = 1.03      # and a step within 3%


def expandable_row(work, table, results, wl, caching):
    """cudapool with expandable segments against PyTorch's own allocator:
    loss identical, peak reserved <= 0.90x, step time within 3%."""
    text = read(os.path.join(work, "torch-%s-expandable.json" % wl)).strip()
    if not text:
        return
    try:
        e = json.loads(text.splitlines()[-1])
    except ValueError:
        table.add("FAIL", "torch %s expandable" % wl, "unparsable output")
        return
    results.setdefault("pytorch", {}).setdefault(wl, {})["expandable"] = e
    ct, et = caching.get("step_ms_median"), e.get("step_ms_median")
    cr, er = caching.get("peak_reserved_bytes"), e.get("peak_reserved_bytes")
    if not (ct and et and cr and er):
        table.add("SKIP", "torch %s expandable" % wl, "a run is missing")
        return
    same = caching.get("loss_hex") and caching.get("loss_hex") == e.get("loss_hex")
    detail = "expandable %.1f ms %s util %s | reserved/caching %.3f, step/caching %.3f, loss %s" % (
        et, fmt_bytes(er), "%.3f" % e["utilization"] if e.get("utilization") else "-", er / cr, et / ct,
        "identical" if same else "%s vs %s" % (e.get("loss", "-"), caching.get("loss", "-")))
    missed = []
    if not same:
        missed.append("loss differs")
    if er > GOAL_EXPANDABLE_RESERVED * cr:
        missed.append("reserved > %.2fx caching" % GOAL_EXPANDABLE_RESERVED)
    if et > GOAL_EXPANDABLE_TIME * ct:
        missed.append("step > %.2fx caching" % GOAL_EXPANDABLE_TIME)
    if missed:
        detail += "  [missed: %s]" % ", ".join(missed)
    table.add("FAIL" if not same else "MISS" if missed else "MET", "torch %s expandable" % wl, detail)
    versus_pytorch_expandable(work, table, results, wl, e)


GOAL_VS_TORCH_EXPANDABLE = 0.97  # issue 25: at most 0.97x PyTorch's expandable_segments:True


def versus_pytorch_expandable(work, table, results, wl, ours):
    """cudapool's expandable run against PyTorch's own allocator with
    expandable_segments:True: process peak (nvidia-smi's view) <= 0.97x."""
    text = read(os.path.join(work, "torch-%s-caching-expandable.json" % wl)).strip()
    if not text:
        return
    try:
        theirs = json.loads(text.splitlines()[-1])
    except ValueError:
        table.add("FAIL", "torch %s vs expandable_segments" % wl, "unparsable output")
        return
    results.setdefault("pytorch", {}).setdefault(wl, {})["caching-expandable"] = theirs
    tp, op = theirs.get("process_peak_bytes"), ours.get("process_peak_bytes")
    tr, orr = theirs.get("peak_reserved_bytes"), ours.get("peak_reserved_bytes")
    tt, ot = theirs.get("step_ms_median"), ours.get("step_ms_median")
    if not (tp and op and tt and ot):
        table.add("SKIP", "torch %s vs expandable_segments" % wl, "a run is missing")
        return
    detail = "process %s vs PyTorch expandable %s (%.3f)" % (fmt_bytes(op), fmt_bytes(tp), op / tp)
    if tr and orr:
        detail += ", reserved %s vs %s (%.3f)" % (fmt_bytes(orr), fmt_bytes(tr), orr / tr)
    detail += ", step %.1f vs %.1f ms (%.3f)" % (ot, tt, ot / tt)
    missed = op > GOAL_VS_TORCH_EXPANDABLE * tp
    if missed:
        detail += "  [missed: process peak > %.2fx]" % GOAL_VS_TORCH_EXPANDABLE
    table.add("MISS" if missed else "MET", "torch %s vs expandable_segments" % wl, detail)


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    work, out = sys.argv[1], sys.argv[2]
    meta = {}
    for line in read(os.path.join(work, "meta.tsv")).splitlines():
        if "\t" in line:
            k, v = line.split("\t", 1)
            meta[k] = v
    table = Table()
    for line in read(os.path.join(work, "records.tsv")).splitlines():
        parts = line.split("\t")
        if len(parts) >= 4:
            table.add(parts[1], parts[2], parts[3], section=parts[0])
    results = {"meta": meta, "bench": {}}
    bench_rows(work, table, results["bench"])
    legacy_rows(work, table, results["bench"])
    table.section = "pytorch"
    torch_rows(work, table, results)
    results["rows"] = rows = table.ordered()

    width = max([len(r["check"]) for r in rows] + [5])
    lines = ["=" * 100,
             "cudapool gpu-check %s: %s, driver %s, commit %s, %s" % (
                 meta.get("mode", "?"), meta.get("gpu", "?"), meta.get("driver", "?"),
                 meta.get("commit", "?"), meta.get("date", "?")),
             "host: %s" % meta.get("host", "?"),
             "%-6s  %-*s  %s" % ("STATUS", width, "CHECK", "RESULT")]
    for r in rows:
        lines.append("%-6s  %-*s  %s" % (r["status"], width, r["check"], r["result"]))
    counts = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    lines.append("== %d PASS, %d FAIL, %d SKIP; goals %d MET, %d MISS; %d INFO; logs in %s" % (
        counts.get("PASS", 0), counts.get("FAIL", 0), counts.get("SKIP", 0),
        counts.get("MET", 0), counts.get("MISS", 0), counts.get("INFO", 0),
        meta.get("out", out)))
    results["counts"] = counts
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    try:
        with open(os.path.join(out, "summary.txt"), "w") as f:
            f.write(text)
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump(results, f, indent=1, sort_keys=True)
    except OSError as e:
        print("summary.py: cannot write to %s: %s" % (out, e), file=sys.stderr)
    return 1 if counts.get("FAIL", 0) else 0


if __name__ == "__main__":
    sys.exit(main())
