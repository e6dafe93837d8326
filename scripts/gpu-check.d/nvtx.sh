# nvtx.sh: the nvtx section (mode nvtx): compute-sanitizer's memcheck with
# --nvtx yes on tests/gpu/planted.cu under the shim, where cudapool
# describes its segments as NVTX heaps and its blocks as regions
# (CUDAPOOL_NVTX, default auto: on when the sanitizer sets
# NVTX_INJECTION64_PATH). A planted overrun (past a block's request, inside
# its segment) and a planted use after free must be REPORTED (PASS), the
# clean mode must have 0 errors (PASS). The same with CUDAPOOL_NVTX=0 and
# natively are INFO rows: without NVTX the shim's segment hides both (not
# reported, as expected), natively memcheck reports both. SKIP without
# compute-sanitizer or when it cannot run the program natively.
# shellcheck shell=bash
# shellcheck disable=SC2154 # rc: run (common.sh); san: memcheck.sh; TESTS, SHIM: setup.sh

section_nvtx() {
  begin_section nvtx nvtx.log "memcheck with NVTX (CUDAPOOL_NVTX)"
  if ! find_sanitizer; then
    record SKIP "nvtx memcheck" "compute-sanitizer not found"
    return 0
  fi
  if [ ! -x "$TESTS/planted" ]; then
    record FAIL "nvtx memcheck" "$TESTS/planted was not built (make gpu)"
    return 0
  fi
  local mode
  for mode in overrun uaf clean; do
    nvtx_native_row "$mode" || return 0
    if ! shim_built; then
      record FAIL "nvtx memcheck $mode" "no shim to run under"
      continue
    fi
    nvtx_pool_row "$mode"
    nvtx_off_row "$mode"
  done
  nsys_row
  marks_row
}

# marks_row: planted marks under the shim with the recording NVTX tool.
marks_row() {
  local cc=${CC:-cc} lib=$WORK/libnvtx_inject.so out=$WORK/nvtx-marks.out log=$WORK/nvtx-marks.log inc
  inc=$(dirname "$(dirname "$NVCC")")/include
  run "build the recording NVTX tool" 60 "$WORK/nvtx-inject-build.out" "$cc" -std=gnu11 -O2 -shared -fPIC \
    -I"$inc" tests/fakes/nvtx/nvtx_inject.c -o "$lib" -lpthread
  if [ "$rc" != 0 ]; then
    record SKIP "nvtx marks" "tests/fakes/nvtx/nvtx_inject.c did not build (see $LOG)"
    return 0
  fi
  : >"$log"
  run "planted marks under the shim and the recording tool" 60 "$out" env NVTX_INJECTION64_PATH="$lib" \
    NVTX_FAKE_LOG="$log" CUDAPOOL_LEARN_ORDER=0 LD_PRELOAD="$SHIM" "$TESTS/planted" marks
  local barrier oom empty
  barrier=$(grep -c '^mark cudapool barrier' "$log")
  oom=$(grep -c '^mark cudapool out of memory' "$log")
  empty=$(grep -c '^push cudapool_empty_cache' "$log")
  cat "$log" >>"$LOG"
  if ! grep -q '^PLANTED marks: written' "$out"; then
    record FAIL "nvtx marks" "planted marks did not run (exit $rc: $(why_failed "$out"))"
  elif [ "$barrier" -gt 0 ] && [ "$oom" -gt 0 ] && [ "$empty" -gt 0 ]; then
    record PASS "nvtx marks" "an attached NVTX tool got barrier=$barrier oom=$oom empty_cache=$empty"
  else
    record FAIL "nvtx marks" "an attached NVTX tool got barrier=$barrier oom=$oom empty_cache=$empty"
  fi
}

# nsys_row: the shim's NVTX marks and ranges on an Nsight Systems timeline.
nsys_row() {
  local nsys rep=$WORK/nsys-marks out=$WORK/nsys-marks.out
  nsys=$(command -v nsys 2>/dev/null || true)
  local c
  for c in /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys; do
    [ -n "$nsys" ] || [ ! -x "$c" ] || nsys=$c
  done
  if [ -z "$nsys" ]; then
    record SKIP "nsys marks" "Nsight Systems (nsys) not found"
    return 0
  fi
  # shellcheck disable=SC2016 # expanded by that sh, in the target
  run "planted marks under nsys and the shim" 120 "$out" "$nsys" profile --trace=cuda,nvtx --sample=none \
    --cpuctxsw=none --force-overwrite=true -o "$rep" env CUDAPOOL_LEARN_ORDER=0 CUDAPOOL_VERBOSE=1 \
    sh -c 'LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$0" exec "$@"' "$SHIM" "$TESTS/planted" marks
  if ! grep -q '^PLANTED marks: written' "$out"; then
    record FAIL "nsys marks" "planted marks did not run under nsys (exit $rc: $(why_failed "$out"))"
    return 0
  fi
  run "nsys export" 120 "$WORK/nsys-export.out" "$nsys" export --type sqlite --force-overwrite=true \
    -o "$rep.sqlite" "$rep.nsys-rep"
  local counts
  counts=$(python3 - "$rep.sqlite" <<'PY' 2>&1
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
cols = [r[1] for r in db.execute("PRAGMA table_info(NVTX_EVENTS)")]
text = "COALESCE(e.text, s.value)" if "textId" in cols else "e.text"
join = "LEFT JOIN StringIds s ON s.id = e.textId" if "textId" in cols else ""
rows = db.execute(f"SELECT {text}, e.eventType, e.start, e.end FROM NVTX_EVENTS e {join}").fetchall()
def count(prefix):
    return sum(1 for t, _, _, _ in rows if t and t.startswith(prefix))
print(f"barrier={count('cudapool barrier')} oom={count('cudapool out of memory')} "
      f"empty_cache={count('cudapool_empty_cache')} domain={count('cudapool') - count('cudapool ') - count('cudapool_')}")
PY
)
  echo "nsys events: $counts" >>"$LOG"
  case "$counts" in
    *"barrier=0"* | *"oom=0"* | *"empty_cache=0"* | "" | *Error*)
      record FAIL "nsys marks" "not all on the timeline: ${counts:-no answer from the export}" ;;
    *) record PASS "nsys marks" "on the Nsight Systems timeline: $counts" ;;
  esac
}

# nvtx_memcheck LABEL OUTFILE [ENV=VALUE...] -- ARGS: planted ARGS under
# memcheck --nvtx yes (60 s), with the shim appended to the target's
# LD_PRELOAD when SHIM_IN is set (as memcheck_in_target does) and the
# settings on compute-sanitizer, which passes its environment to the target.
nvtx_memcheck() {
  local label=$1 outf=$2
  shift 2
  local vars=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    vars+=("$1")
    shift
  done
  shift
  if [ -n "${SHIM_IN:-}" ]; then
    # shellcheck disable=SC2016 # expanded by that sh, in the target
    run "$label" 60 "$outf" env ${vars[@]+"${vars[@]}"} "$san" --tool memcheck --nvtx yes \
      --target-processes all sh -c 'LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$0" exec "$@"' "$SHIM" \
      "$TESTS/planted" "$@"
  else
    run "$label" 60 "$outf" env ${vars[@]+"${vars[@]}"} "$san" --tool memcheck --nvtx yes \
      --target-processes all "$TESTS/planted" "$@"
  fi
}

# errors_of OUTFILE: memcheck's error count, empty without a summary.
errors_of() { summary_of "$1" | grep -o '[0-9][0-9]*' | head -n 1; }

# nvtx_line OUTFILE: the shim's CUDAPOOL_VERBOSE line saying whether NVTX is on.
nvtx_line() { grep -h -m 1 -o 'cudapool: NVTX [a-z]* ([^)]*)' "$1" "$1.err" 2>/dev/null | cut -c 11-; }

# nvtx_native_row MODE: the reference, natively. False (and a SKIP row)
# when memcheck cannot run the program here.
nvtx_native_row() {
  local mode=$1 out=$WORK/nvtx-$1-native.out n
  SHIM_IN="" nvtx_memcheck "planted $mode natively under memcheck" "$out" -- "$mode"
  n=$(errors_of "$out")
  if [ -z "$n" ]; then
    record SKIP "nvtx memcheck" "compute-sanitizer could not run planted $mode natively (exit $rc: $(why_failed "$out"))"
    return 1
  fi
  record INFO "nvtx memcheck $mode native" "$n errors natively (exit $rc)"
  return 0
}

# nvtx_pool_row MODE: under the shim, CUDAPOOL_NVTX at its default (auto).
nvtx_pool_row() {
  local mode=$1 out=$WORK/nvtx-$1-pool.out n
  SHIM_IN=1 nvtx_memcheck "planted $mode under memcheck and the shim" "$out" CUDAPOOL_VERBOSE=1 -- "$mode"
  n=$(errors_of "$out")
  local said
  said=$(nvtx_line "$out")
  local how="${said:-no NVTX line from the shim}; exit $rc"
  if ! grep -q 'allocator=pool' "$out"; then
    record FAIL "nvtx memcheck $mode" "the shim was not active ($how)"
  elif [ -z "$n" ]; then
    record FAIL "nvtx memcheck $mode" "no memcheck summary ($(why_failed "$out"))"
  elif [ "$mode" = clean ]; then
    if [ "$n" = 0 ] && [ "$rc" = 0 ] && [ "$(npass "$out")" -gt 0 ]; then
      record PASS "nvtx memcheck clean" "0 errors under the shim ($how)"
    else
      record FAIL "nvtx memcheck clean" "$n errors, $(npass "$out") pass ($how)"
    fi
  elif ! grep -q "^PLANTED $mode: written" "$out"; then
    record FAIL "nvtx memcheck $mode" "the planted write did not run ($how)"
  elif [ "$n" -gt 0 ]; then
    record PASS "nvtx memcheck $mode" "REPORTED under the shim: $n errors ($how)"
  else
    record FAIL "nvtx memcheck $mode" "NOT reported under the shim: 0 errors ($how)"
  fi
}

# nvtx_off_row MODE: under the shim with CUDAPOOL_NVTX=0: information only.
nvtx_off_row() {
  local mode=$1 out=$WORK/nvtx-$1-off.out n
  SHIM_IN=1 nvtx_memcheck "planted $mode under memcheck and the shim, CUDAPOOL_NVTX=0" "$out" \
    CUDAPOOL_NVTX=0 -- "$mode"
  n=$(errors_of "$out")
  local what
  case "$mode:${n:-none}" in
    clean:0) what="0 errors, as expected" ;;
    clean:*) what="$n errors (clean: none expected)" ;;
    *:none) what="no memcheck summary ($(why_failed "$out"))" ;;
    *:0) what="not reported (0 errors), as expected: the segment hides the block" ;;
    *) what="reported ($n errors): memcheck saw more than expected without NVTX" ;;
  esac
  record INFO "nvtx memcheck $mode CUDAPOOL_NVTX=0" "$what (exit $rc)"
}
