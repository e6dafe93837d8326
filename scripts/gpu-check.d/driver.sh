# driver.sh: the driver section (mode driver, issue 6): the programs built
# with nvcc's default static runtime, natively and under the shim: the tests
# (with pool hits from the JSON exit report), a cuBLAS program, CuPy and JAX
# (driver-python.sh), memcheck of the stress test, and alloc_bench.
# shellcheck shell=bash
# shellcheck disable=SC2154 # rc is set by run (common.sh)

section_driver() {
  begin_section driver driver.log "driver layer"
  static_pair "static errors" 45 errors
  static_pair "static race" 60 race --loops 2
  static_pair "static async_race" 90 async_race --loops 2
  static_pair "static capture_race" 90 capture_race --loops 2
  static_pair "static stress" 60 stress --iters 1000
  static_pair "static fill" 60 fill
  if shim_built; then
    cublas_workspace
  fi
  driver_python
  static_memcheck
  pair_runs static-alloc "static alloc_bench" 60 "$STATIC/bench/alloc_bench" --quick pairs churn default
  rows churn "$WORK"
}

# stats_env REPORT: stats_vars, the settings of a run under the shim whose
# exit report (JSON) goes to REPORT, which is removed now.
stats_env() {
  rm -f "$1"
  stats_vars=("LD_PRELOAD=$SHIM" "CUDAPOOL_STATS=$1" CUDAPOOL_STATS_FORMAT=json)
}

# rows ARGS...: rows.py's rows into the table, and shown now as record does.
rows() {
  python3 "$ROWS" "$@" | tee -a "$RECORDS" | awk -F '\t' '{ printf "  %-5s %s: %s\n", $2, $3, $4 }'
}

# static_pair NAME LIMIT PROG ARGS...: a static-runtime test natively and
# under the shim: identical verdicts, the shim active, pool hits > 0.
static_pair() {
  local name=$1 limit=$2 prog=$3
  shift 3
  local nout=$WORK/static-$prog-native.out pout=$WORK/static-$prog-pool.out rep=$WORK/static-$prog.stats.json
  run "$prog (static) native" "$limit" "$nout" "$STATIC/tests/$prog" "$@"
  local nrc=$rc
  if ! shim_built; then
    record FAIL "$name" "no shim to run under"
    return
  fi
  stats_env "$rep"
  run "$prog (static) under the shim" "$limit" "$pout" env "${stats_vars[@]}" "$STATIC/tests/$prog" "$@"
  local prc=$rc hits counts
  hits=$(python3 "$ROWS" stat "$rep" hits)
  counts="$(pair_counts "$nout" "$pout"), pool hits ${hits:-none}"
  if ! same_verdicts "$name" "$nout" "$nrc" "$pout" "$prc" "$counts"; then
    return
  elif [ "${hits:-0}" -le 0 ]; then
    record FAIL "$name" "identical, but the pool served nothing from cache: $counts"
  else
    record PASS "$name" "$counts, identical"
  fi
}

# cublas_workspace: cuBLAS allocates its workspace through its own copy of
# the runtime; under the shim those allocations must be in the pool's counts.
cublas_workspace() {
  local cn=$WORK/cublas-native.out cp_=$WORK/cublas-pool.out crep=$WORK/cublas.stats.json
  run "cublas_ws native" 60 "$cn" "$STATIC/tests/cublas_ws"
  local cnrc=$rc cprc own nalloc same detail
  stats_env "$crep"
  run "cublas_ws under the shim" 60 "$cp_" env "${stats_vars[@]}" "$STATIC/tests/cublas_ws"
  cprc=$rc
  own=$(sed -n 's/^INFO own_allocs=\([0-9]*\).*/\1/p' "$cp_" | tail -n 1)
  nalloc=$(python3 "$ROWS" stat "$crep" num_alloc)
  same=0
  diff <(verdicts "$cn") <(verdicts "$cp_") >/dev/null && same=1
  detail="native exit $cnrc, pool exit $cprc, $(npass "$cp_") pass; pool served ${nalloc:-?} allocations, the program made ${own:-?}"
  if [ "$cnrc" = 0 ] && [ "$cprc" = 0 ] && [ "$same" = 1 ] && [ -n "$nalloc" ] && [ -n "$own" ] &&
    [ "$nalloc" -gt "$own" ]; then
    record PASS "cublas workspace in the pool" "$detail: cuBLAS's $((nalloc - own)) in the pool; results identical"
  else
    record FAIL "cublas workspace in the pool" "$detail; results $([ "$same" = 1 ] && echo identical || echo DIFFER)"
  fi
}

# static_memcheck: memcheck of the static stress test under the shim (the
# preload set inside the target, as in test.sh).
static_memcheck() {
  if ! find_sanitizer; then
    record SKIP "static memcheck stress" "compute-sanitizer not found"
    return
  fi
  shim_built || return 0
  local mp=$WORK/static-memcheck-pool.out ps
  memcheck_in_target "memcheck static stress under the shim" "$mp" "$STATIC/tests/stress" \
    --iters 100 --threads 4 --legacy-threads 2
  ps=$(summary_of "$mp")
  if memcheck_clean "$mp" "$ps" "$rc"; then
    record PASS "static memcheck stress" "under the shim: 0 errors, $(npass "$mp") pass"
  elif grep -q -i 'not supported' "$mp" "$mp.err"; then
    record SKIP "static memcheck stress" "compute-sanitizer cannot run here: $(grep -h -m 1 -i 'not supported' "$mp.err" "$mp" | cut -c 1-120)"
  else
    record FAIL "static memcheck stress" "under the shim: ${ps:-no summary} (exit $rc, $(nfail "$mp") FAIL, allocator=pool seen: $(grep -c 'allocator=pool' "$mp"))"
  fi
}
