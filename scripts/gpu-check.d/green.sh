# green.sh: the green section (scripts/gpu-check green): what cudapool's
# barriers do with a green context's stream (issue 31, item a;
# shim/entry/driver_stream.c knows it as a non-blocking stream of its
# device). Builds tests/gpu/probes/green_probe.c with the C compiler (libcuda
# opened at run time), runs it natively and under the shim: an event of the
# primary context recorded on the green stream, the legacy stream waiting on
# it, the green stream waiting on the legacy stream's event, and whether the
# legacy stream's later write really waits for the held green stream.
# SKIPs without a C compiler, green contexts or stream memory operations.
# shellcheck shell=bash
# shellcheck disable=SC2154 # OUT, WORK, SHIM are setup.sh's

section_green() {
  begin_section green green.log "green contexts"
  local bin=$WORK/green_probe cc=${CC:-cc} inc
  inc=$(dirname "$(dirname "$NVCC")")/include
  if ! command -v "$cc" >/dev/null 2>&1; then
    record SKIP "green build" "no C compiler ($cc)"
    return
  fi
  run "build green" 60 "$WORK/green-build.out" "$cc" -std=gnu11 -I"$inc" tests/gpu/probes/green_probe.c \
    -o "$bin" -ldl
  if [ "$rc" != 0 ]; then
    record SKIP "green build" "tests/gpu/probes/green_probe.c did not build (see $LOG)"
    return
  fi
  local how out
  for how in native shim; do
    out=$WORK/green-$how.out
    if [ "$how" = native ]; then
      run "green $how" 60 "$out" "$bin"
    else
      run "green $how" 60 "$out" env LD_PRELOAD="$SHIM" "$bin"
    fi
    if grep -q '^green: SKIP' "$out"; then
      record SKIP "green $how" "$(grep '^green: SKIP' "$out" | head -n 1)"
    elif [ "$rc" = 0 ] && grep -q '^green: record_primary_event_on_green rc=0' "$out" &&
      grep -q '^green: legacy_waits_green_event rc=0' "$out" &&
      grep -q '^green: green_waits_legacy_event rc=0' "$out" && grep -q '^green: ordered=1' "$out"; then
      record PASS "green $how" "a barrier's record and waits reach a green stream and order it"
    else
      record FAIL "green $how" "exit $rc; $(grep '^green:' "$out" | tr '\n' ' ' | head -c 300)"
    fi
  done
}
