# order.sh: the order section (mode order, part of all; under a minute): the
# learned stream order's early reuse against the early-reuse race (issue 25,
# tests/gpu/order_race.cu), one process per case: natively and under the
# shim (identical PASS lines, and the block handed straight back under the
# shim), then under the shim with the owed wait dropped
# (CUDAPOOL_TEST_SKIP_ORDER_WAITS=1): every case that needs the wait must
# then FAIL, which shows the test can see what the wait prevents.
# shellcheck shell=bash
# shellcheck disable=SC2154 # rc: run (common.sh); pool_env: setup.sh

section_order() {
  begin_section order tests.log order
  local c out reused broken=0 caught=0
  for c in $("$TESTS/order_race" --list); do
    local nout=$WORK/test-order-$c-native.out pout=$WORK/test-order-$c-pool.out nrc
    run "order $c native" 30 "$nout" "$TESTS/order_race" "$c"
    nrc=$rc
    shim_built || { record FAIL "order $c" "no shim to run under"; continue; }
    run "order $c under the shim" 30 "$pout" "${pool_env[@]}" "$TESTS/order_race" "$c"
    compare "order $c" "$nout" "$nrc" "$pout" "$rc"
    reused=$(grep -o 'reused=[01]' "$pout" 2>/dev/null | tail -n 1)
    record INFO "order $c reuse" "under the shim: ${reused:-no INFO line} (1: the freed block came back at once)"
    # A stream made after the free waits for the legacy stream when it is
    # made: ordered without the owed wait too.
    [ "$c" = legacy_to_stream_made_after ] && continue
    out=$WORK/test-order-$c-skip.out
    run "order $c without the owed wait" 30 "$out" "${pool_env[@]}" CUDAPOOL_TEST_SKIP_ORDER_WAITS=1 \
      "$TESTS/order_race" "$c"
    broken=$((broken + 1))
    if [ "$(nfail "$out")" -gt 0 ]; then caught=$((caught + 1)); fi
  done
  shim_built || return
  if [ "$caught" = "$broken" ] && [ "$broken" -gt 0 ]; then
    record PASS "order race without the owed wait" "all $broken cases corrupted with the wait dropped: the test sees the race"
  else
    record FAIL "order race without the owed wait" "$caught of $broken cases corrupted with the wait dropped (each should)"
  fi
}
