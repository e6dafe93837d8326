# test.sh: the test section (mode test, part of all): every tests/gpu program
# natively and under the shim, with CUDAPOOL_LIMIT, CUDAPOOL_MODE and
# CUDAPOOL_EXPANDABLE variants, and memcheck of the stress test natively and
# under the shim (also with expandable segments).
# shellcheck shell=bash
# shellcheck disable=SC2154 # rc: run (common.sh); pool_env: setup.sh; san: memcheck.sh

section_test() {
  begin_section test tests.log tests
  test_pair "test errors" 45 -- errors
  test_pair "test race" 60 -- race
  test_pair "test async_race" 90 -- async_race
  # Per-thread default streams from two threads, no stream created (issue 31).
  test_pair "test ptds_race" 60 -- ptds_race
  # Destroy during a capture, fork/join captures (issue 31).
  test_pair "test capture_race" 90 -- capture_race
  test_pair "test stress" 90 -- stress
  test_pair "test fill" 60 -- fill
  test_pair "test fill CUDAPOOL_LIMIT=16G" 60 CUDAPOOL_LIMIT=16G -- fill
  test_pair "test race CUDAPOOL_MODE=sync" 60 CUDAPOOL_MODE=sync -- race
  # Expandable segments: blocks in pages mapped on demand, unmapped under a
  # limit (fill runs into it) once the device finished with them.
  test_pair "test race CUDAPOOL_EXPANDABLE=1" 60 CUDAPOOL_EXPANDABLE=1 -- race
  test_pair "test stress CUDAPOOL_EXPANDABLE=1" 90 CUDAPOOL_EXPANDABLE=1 -- stress
  test_pair "test errors CUDAPOOL_EXPANDABLE=1" 45 CUDAPOOL_EXPANDABLE=1 -- errors
  test_pair "test fill CUDAPOOL_EXPANDABLE=1" 60 CUDAPOOL_EXPANDABLE=1 -- fill
  test_pair "test fill CUDAPOOL_LIMIT=16G CUDAPOOL_EXPANDABLE=1" 60 CUDAPOOL_LIMIT=16G CUDAPOOL_EXPANDABLE=1 -- fill

  # unsafe-immediate skips the reuse fence: expected to break some cases.
  if shim_built; then
    local uout=$WORK/test-race-unsafe.out
    run "race under CUDAPOOL_MODE=unsafe-immediate" 60 "$uout" \
      "${pool_env[@]}" CUDAPOOL_MODE=unsafe-immediate "$TESTS/race"
    record INFO "race CUDAPOOL_MODE=unsafe-immediate" \
      "$(nfail "$uout") of $(($(npass "$uout") + $(nfail "$uout"))) cases corrupted (exit $rc; this mode skips the reuse fence, so failures are expected)"
  fi
  test_memcheck
  test_memcheck_expandable
}

# test_memcheck_expandable: memcheck of the stress test under the shim with
# CUDAPOOL_EXPANDABLE=1 (the native run is test_memcheck's). A page touched
# before it is mapped, or after it is unmapped, is an invalid access there.
test_memcheck_expandable() {
  local sargs=(--iters 150 --threads 4 --legacy-threads 2) mp=$WORK/memcheck-pool-expandable.out ps
  find_sanitizer && shim_built || return 0
  [ -n "$(summary_of "$WORK/memcheck-native.out")" ] || return 0
  CUDAPOOL_EXPANDABLE=1 memcheck_in_target "memcheck stress under the shim, CUDAPOOL_EXPANDABLE=1" "$mp" \
    "$TESTS/stress" "${sargs[@]}"
  ps=$(summary_of "$mp")
  if memcheck_clean "$mp" "$ps" "$rc"; then
    record PASS "memcheck stress CUDAPOOL_EXPANDABLE=1" "under the shim: 0 errors, $(npass "$mp") pass"
  else
    record FAIL "memcheck stress CUDAPOOL_EXPANDABLE=1" "under the shim: ${ps:-no summary} (exit $rc, $(nfail "$mp") FAIL)"
  fi
}

# test_pair NAME LIMIT [ENV=VALUE...] -- ARGS: native run, then under the shim
# with the extra variables; the native run is reused when it exists already.
test_pair() {
  local name=$1 limit=$2
  shift 2
  local extra=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    extra+=("$1")
    shift
  done
  shift
  local prog=$1
  shift
  local tag
  tag=$(tr -c 'A-Za-z0-9_\n-' '_' <<<"$name")
  local nout="$WORK/test-$prog-native.out"
  if [ ! -f "$nout" ]; then
    run "$prog native" "$limit" "$nout" "$TESTS/$prog" "$@"
    echo "$rc" >"$nout.rc"
  fi
  local nrc
  nrc=$(cat "$nout.rc")
  local pout="$WORK/test-$tag-pool.out"
  if shim_built; then
    run "$name under the shim" "$limit" "$pout" "${pool_env[@]}" ${extra[@]+"${extra[@]}"} "$TESTS/$prog" "$@"
  else
    : >"$pout"
    rc=125
  fi
  compare "$name" "$nout" "$nrc" "$pout" "$rc"
}

# test_memcheck: memcheck of the stress test natively, then under the shim:
# the preload set in the target; should that show no shim or no summary, set
# on compute-sanitizer itself, which passes its environment on to the target.
# SKIP where the sanitizer cannot run the test natively.
test_memcheck() {
  local sargs=(--iters 150 --threads 4 --legacy-threads 2)
  if ! find_sanitizer; then
    record SKIP "memcheck stress" "compute-sanitizer not found"
    return
  fi
  local mn=$WORK/memcheck-native.out mp=$WORK/memcheck-pool.out
  memcheck "memcheck stress native" "$mn" "$TESTS/stress" "${sargs[@]}"
  local mnrc=$rc ns ps mprc how
  ns=$(summary_of "$mn")
  if [ -z "$ns" ] || [ "$(npass "$mn")" = 0 ] || grep -q -i 'not supported' "$mn" "$mn.err"; then
    # As seen on gVisor machines: "Device not supported", then error 999.
    local why
    why=$(grep -h -m 1 -i -E 'not supported|error|fail' "$mn.err" "$mn" 2>/dev/null | head -n 1 | cut -c 1-120)
    record SKIP "memcheck stress" "compute-sanitizer could not run the test natively here (exit $mnrc: ${why:-no summary})"
    return
  fi
  if ! shim_built; then
    record FAIL "memcheck stress" "no shim to run under; natively: $ns"
    return
  fi
  memcheck_in_target "memcheck stress under the shim (preload set in the target)" "$mp" \
    "$TESTS/stress" "${sargs[@]}"
  mprc=$rc
  ps=$(summary_of "$mp")
  how="preload set in the target"
  if [ -z "$ps" ] || ! grep -q 'allocator=pool' "$mp"; then
    run "memcheck stress under the shim (preload set on compute-sanitizer)" 120 "$mp" \
      env "LD_PRELOAD=$SHIM" "$san" --tool memcheck --target-processes all \
      "$TESTS/stress" "${sargs[@]}"
    mprc=$rc
    ps=$(summary_of "$mp")
    how="preload set on compute-sanitizer"
  fi
  if memcheck_clean "$mp" "$ps" "$mprc"; then
    record PASS "memcheck stress" "under the shim: 0 errors, $(npass "$mp") pass ($how); natively: $ns"
  elif ! grep -q 'allocator=pool' "$mp"; then
    record FAIL "memcheck stress" "the shim was not active under compute-sanitizer (exit $mprc, ${ps:-no summary}); natively: $ns"
  else
    record FAIL "memcheck stress" "under the shim: ${ps:-no summary} (exit $mprc, $(nfail "$mp") FAIL, $how); natively: $ns (exit $mnrc)"
  fi
}
