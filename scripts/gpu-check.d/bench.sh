# bench.sh: the bench section (mode bench, part of all): alloc_bench,
# legacy_cg and the demo, natively and under the shim; bench/gpu/summary.py
# judges their output.
# shellcheck shell=bash

section_bench() {
  begin_section bench bench.log benchmarks
  bench_pair alloc 90 "$BENCH/alloc_bench"
  bench_pair cg 60 "$BENCH/legacy_cg"
  bench_pair demo 60 "$DEMO"
}

# bench_pair KEY LIMIT PROGRAM ARGS...: native and pool runs, judged by
# summary.py; only failures to run are recorded here.
bench_pair() {
  local key=$1 limit=$2
  shift 2
  pair_runs "$key" "$key" "$limit" "$@"
  echo "  ran $key"
}
