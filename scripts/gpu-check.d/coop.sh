# coop.sh: the coop section (scripts/gpu-check coop): cooperation between
# processes on one real GPU (shim/state/coop.c). Builds
# tests/programs/runtime/coop.c with nvcc against the real runtime, then runs
# its pair (a child fills 3/4 of the free memory and frees it; the parent
# asks for as much): natively (must succeed), under the shim with
# CUDAPOOL_COOP_WAIT=0 (must fail: the child's cache holds the memory) and
# with cooperation on (must succeed, with the "avoided" line on stderr).
# Then (issue 26, items 4 and 5): a flood of 300 give-back requests into a
# working peer with CUDAPOOL_COOP_INTERVAL=60000 (exactly 1 round, 300
# limited), and `cudapool-stats --all` while the pair runs (a table per GPU
# with both processes; SKIP when build/cudapool-stats is not built).
# SKIPs when nvcc cannot build the program.
# shellcheck shell=bash
# shellcheck disable=SC2154 # OUT, WORK, NVCC, SHIM are setup.sh's

section_coop() {
  begin_section coop coop.log "cooperation between processes"
  local bin=$WORK/coop_pair group="gpu-check-$$"
  # The shared runtime, as the tests/gpu programs (mk/gpu.mk): the shim
  # serves cudaMalloc at the runtime layer.
  run "build coop" 120 "$WORK/coop-build.out" "$NVCC" -Iinclude -Icommon -Itests/support -Itests/programs/runtime \
    tests/programs/runtime/coop.c -o "$bin" -cudart shared -Xlinker --enable-new-dtags \
    -Xlinker "-rpath=$(dirname "$NVCC")/../lib64" -ldl
  if [ "$rc" != 0 ]; then
    record SKIP "coop build" "nvcc could not build tests/programs/runtime/coop.c (see $LOG)"
    return
  fi
  run "coop native" 60 "$WORK/coop-native.out" "$bin" pair
  if grep -q '^take: ok=1' "$WORK/coop-native.out"; then
    record PASS "coop native" "the second process gets the memory the first freed"
  else
    record FAIL "coop native" "exit $rc; $(head -c 200 "$WORK/coop-native.out.err")"
  fi
  run "coop off" 60 "$WORK/coop-off.out" env LD_PRELOAD="$SHIM" CUDAPOOL_COOP_WAIT=0 \
    CUDAPOOL_SHARED_NAME="$group" "$bin" pair
  if grep -q '^take: ok=0' "$WORK/coop-off.out"; then
    record PASS "coop off" "the first process's idle cache keeps the memory"
  else
    record FAIL "coop off" "exit $rc; expected take: ok=0"
  fi
  run "coop on" 60 "$WORK/coop-on.out" env LD_PRELOAD="$SHIM" CUDAPOOL_COOP_WAIT=2000 \
    CUDAPOOL_SHARED_NAME="$group" "$bin" pair
  if grep -q '^take: ok=1' "$WORK/coop-on.out" && grep -q 'avoided: .* 1 answered' "$WORK/coop-on.out.err"; then
    record PASS "coop on" "$(grep -o 'asked 1 other.*' "$WORK/coop-on.out.err" | head -n 1)"
  else
    record FAIL "coop on" "exit $rc; $(head -c 300 "$WORK/coop-on.out.err")"
  fi
  run "coop stopped" 60 "$WORK/coop-stop.out" env LD_PRELOAD="$SHIM" CUDAPOOL_COOP_WAIT=200 \
    CUDAPOOL_SHARED_NAME="$group" "$bin" pair stop
  if grep -q '^take: ok=0' "$WORK/coop-stop.out" && grep -q '0 answered' "$WORK/coop-stop.out.err"; then
    record PASS "coop stopped peer" "the wait ends; 0 answered"
  else
    record FAIL "coop stopped peer" "exit $rc; $(head -c 300 "$WORK/coop-stop.out.err")"
  fi
  run "coop flood" 120 "$WORK/coop-flood.out" env LD_PRELOAD="$SHIM" CUDAPOOL_COOP_WAIT=2000 \
    CUDAPOOL_COOP_INTERVAL=60000 CUDAPOOL_SHARED_NAME="$group" "$bin" flood 300
  if grep -q '^flood: answered=300 asked=301 rounds=1 limited=300 ' "$WORK/coop-flood.out" &&
    grep -q '^work: failed=0' "$WORK/coop-flood.out"; then
    record PASS "coop flood" "$(grep '^flood:' "$WORK/coop-flood.out")"
  else
    record FAIL "coop flood" "exit $rc; $(grep -E '^(flood|take|work):' "$WORK/coop-flood.out" | tr '\n' ' ')"
  fi
  local reader=build/cudapool-stats
  if [ ! -x "$reader" ]; then
    record SKIP "coop stats --all" "$reader is not built (make)"
    return
  fi
  run "coop stats --all" 60 "$WORK/coop-all.out" env LD_PRELOAD="$SHIM" CUDAPOOL_COOP_WAIT=2000 \
    CUDAPOOL_SHARED_NAME="$group" "$bin" all "$reader" "$WORK/coop-all.txt"
  cat "$WORK/coop-all.txt" >>"$LOG" 2>/dev/null
  if grep -q '^reader: status=0' "$WORK/coop-all.out" && grep -q '^device uuid-' "$WORK/coop-all.txt" &&
    [ "$(grep -c ' GiB .* coop' "$WORK/coop-all.txt")" -ge 2 ]; then
    record PASS "coop stats --all" "$(grep -c '^device ' "$WORK/coop-all.txt") device table(s), both processes shown"
  else
    record FAIL "coop stats --all" "exit $rc; $(head -c 300 "$WORK/coop-all.txt" 2>/dev/null)"
  fi
}
