# bench.sh: the bench section (mode bench, part of all): alloc_bench,
# legacy_cg and the demo, natively and under the shim; bench/gpu/summary.py
# judges their output.
# shellcheck shell=bash

section_bench() {
  begin_section bench bench.log benchmarks
  bench_pair alloc 90 "$BENCH/alloc_bench"
  bench_one_pool
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

# The threads case again with one pool per device (CUDAPOOL_ARENAS=1): what
# the arenas (core/arena.c) bring, measured beside them in the same run.
bench_one_pool() {
  shim_built || return 0
  local out=$WORK/alloc-one-pool.out
  run "alloc threads, one pool (CUDAPOOL_ARENAS=1)" 40 "$out" \
    "${pool_env[@]}" CUDAPOOL_ARENAS=1 "$BENCH/alloc_bench" threads
  [ "$rc" = 0 ] || { record FAIL "alloc threads, one pool" "$(why_failed "$out")"; return 0; }
  record INFO "threads, one pool (pairs/s, n=1/4/16)" \
    "$(awk '$1 == "threads" { split($3, v, "="); printf "%s%s", sep, v[2]; sep = " / " }' "$out")"
}
