#!/usr/bin/env python3
"""rows.py: the table rows of `scripts/gpu-check driver` that need parsing.

Subcommands (WORK is gpu-check's work folder):
  stat FILE KEY      print KEY summed over the devices of a CUDAPOOL_STATS
                     JSON report (nothing when the file is missing or bad)
  python WORK NAME   rows for a Python workload (NAME cupy or jax) from
                     WORK/NAME-RUN.json, RUN one of the names below, and the
                     cudapool run's report WORK/NAME-cudapool.stats.json
  churn WORK         a row for the static-runtime alloc_bench runs
                     WORK/static-alloc-native.out, WORK/static-alloc-pool.out
Rows are printed as gpu-check's records.tsv lines:
  driver<TAB>STATUS<TAB>CHECK<TAB>RESULT
"""

import json
import os
import sys

RUNS = {
    "cupy": (("none", "set_allocator(None)"), ("cupy", "CuPy's pool"),
             ("cudapool", "set_allocator(None) under cudapool")),
    "jax": (("platform", "platform allocator"), ("bfc", "default BFC"),
            ("cudapool", "platform under cudapool")),
    # XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async: XLA's stream-ordered allocator.
    "jax-cuda_async": (("native", "cuda_async natively"), ("cudapool", "cuda_async under cudapool")),
}


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def stat(path, key):
    try:
        report = json.loads(read(path))
        return sum(d.get(key, 0) for d in report.get("devices", []))
    except (ValueError, AttributeError, TypeError):
        return None


def row(status, check, result):
    print("driver\t%s\t%s\t%s" % (status, check, result.replace("\t", " ").replace("\n", " ")))


def last_json(text):
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def python_rows(work, name):
    runs = {}
    for run, _ in RUNS[name]:
        runs[run] = last_json(read(os.path.join(work, "%s-%s.json" % (name, run))))
    missing = [run for run, _ in RUNS[name] if not runs[run]]
    if len(missing) == len(RUNS[name]):
        return  # gpu-check already said why (SKIP or a failed run)
    pool = runs.get("cudapool") or {}
    report = os.path.join(work, "%s-cudapool.stats.json" % name)
    hits, allocs = stat(report, "hits"), stat(report, "num_alloc")
    sums = {run: r.get("checksum") for run, r in runs.items() if r}
    same = not missing and len(set(sums.values())) == 1
    why = []
    if missing:
        why.append("no result from %s" % ", ".join(missing))
    if not same and not missing:
        why.append("checksums differ: %s" % ", ".join("%s %s" % kv for kv in sorted(sums.items())))
    if pool and not pool.get("cudapool"):
        why.append("cudapool was not loaded in the cudapool run")
    if not hits:
        why.append("the pool saw no hits (report: %s)" % ("missing" if hits is None else "0 hits"))
    detail = "checksum %s in all runs; pool %s allocations, %s hits" % (
        sums.get("cudapool", "-"), "-" if allocs is None else int(allocs), "-" if hits is None else int(hits))
    row("FAIL" if why else "PASS", "%s results and pool use" % name, "; ".join(why + [detail]))
    times = []
    for run, label in RUNS[name]:
        r = runs.get(run) or {}
        ms = r.get("step_ms_median")
        times.append("%s %s" % (label, "-" if ms is None else "%.3f ms" % ms))
    base = (runs.get(RUNS[name][0][0]) or {}).get("step_ms_median")
    own = (runs.get(RUNS[name][1][0]) or {}).get("step_ms_median") if len(RUNS[name]) > 2 else None
    ours = pool.get("step_ms_median")
    ratios = []
    if base and ours:
        ratios.append("%s/cudapool %.2fx" % (RUNS[name][0][0], base / ours))
    if own and ours:
        ratios.append("cudapool/%s %.2fx" % (RUNS[name][1][0], ours / own))
    framework = name.split("-")[0]
    version = pool.get(framework) or (runs.get(RUNS[name][0][0]) or {}).get(framework, "?")
    row("INFO", "%s step time (median)" % name,
        "; ".join(times) + ("; " + ", ".join(ratios) if ratios else "") + " (%s %s)" % (name, version))


def kv(text, head):
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == head:
            d = {}
            for p in parts[1:]:
                if "=" in p:
                    k, v = p.split("=", 1)
                    d[k] = v
            yield d


def churn_rows(work):
    nat = read(os.path.join(work, "static-alloc-native.out"))
    pool = read(os.path.join(work, "static-alloc-pool.out"))
    if not nat and not pool:
        return
    n = next(kv(nat, "churn"), {})
    p = next(kv(pool, "churn"), {})
    nns, pns = n.get("native_ns"), p.get("pool_ns")
    if not nns or not pns:
        row("FAIL", "static churn", "a run gave no churn line (native %s, pool %s)" % (nns, pns))
        return
    parts = ["churn 64 live: native %.1f us, cudapool %.0f ns (%.0fx)" % (
        float(nns) / 1e3, float(pns), float(nns) / float(pns))]
    pairs_n = {d.get("size"): d for d in kv(nat, "pair")}
    for d in kv(pool, "pair"):
        m = pairs_n.get(d.get("size"), {})
        if m.get("native_ns") and d.get("pool_ns"):
            parts.append("pair %s B: %.1f us vs %.0f ns" % (
                d["size"], float(m["native_ns"]) / 1e3, float(d["pool_ns"])))
    row("INFO", "static-runtime alloc_bench", "; ".join(parts[:4]))


def main(argv):
    if len(argv) >= 3 and argv[0] == "stat":
        v = stat(argv[1], argv[2])
        if v is not None:
            print(int(v))
        return 0
    if len(argv) == 3 and argv[0] == "python" and argv[2] in RUNS:
        python_rows(argv[1], argv[2])
        return 0
    if len(argv) == 2 and argv[0] == "churn":
        churn_rows(argv[1])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
