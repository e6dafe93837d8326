# common.sh: what every part of gpu-check uses: the time budget, sections and
# their table rows, running one program (run) and saying why it failed, a test
# program's verdict lines, and pairs of runs, natively and under the shim, with
# the row that compares them.
# shellcheck shell=bash
# shellcheck disable=SC2154 # pool_env is setup.sh's

# start_clock SECONDS: the run's budget starts now.
start_clock() {
  start_s=$(date +%s)
  budget_s=$1
}
time_left() { echo $((budget_s - ($(date +%s) - start_s))); }
elapsed() { echo $(($(date +%s) - start_s)); }

# begin_section NAME LOGFILE TITLE: rows from now on are NAME's and run logs to
# $OUT/LOGFILE; says so.
begin_section() {
  section=$1
  LOG=$OUT/$2
  echo "== $3 (log: $LOG)"
}

# record STATUS NAME DETAIL: one row of the final table (also shown now).
record() {
  printf '%s\t%s\t%s\t%s\n' "$section" "$1" "$2" "$3" >>"$RECORDS"
  printf '  %-5s %s: %s\n' "$1" "$2" "$3"
}

# run LABEL LIMIT OUTFILE CMD...: runs CMD with a timeout (cut to what is
# left of the budget), stdout to OUTFILE, stderr to OUTFILE.err; appends both
# to $LOG. Sets rc (124: timed out, 125: not run, out of time).
run() {
  local label=$1 limit=$2 outf=$3
  shift 3
  local left
  left=$(time_left)
  if [ "$left" -lt 25 ]; then
    echo "not run: the ${budget_s}s budget is spent" >"$outf.err"
    : >"$outf"
    echo "=== $label: NOT RUN (budget spent)" >>"$LOG"
    rc=125
    return
  fi
  [ "$limit" -le $((left - 15)) ] || limit=$((left - 15))
  local t0 t1
  t0=$(date +%s%N)
  timeout -k 10 "$limit" "$@" >"$outf" 2>"$outf.err"
  rc=$?
  t1=$(date +%s%N)
  {
    echo "=== $label: exit $rc in $(((t1 - t0) / 1000000)) ms (limit ${limit}s)"
    echo "\$ $*"
    cat "$outf"
    if [ -s "$outf.err" ]; then
      echo "--- stderr"
      cat "$outf.err"
    fi
    echo
  } >>"$LOG"
  [ "$rc" != 124 ] || echo "    ($label timed out after ${limit}s)"
}

# why_failed: a short reason after a run, from rc and the output's FAIL lines.
why_failed() {
  local outf=$1
  case "$rc" in
    124 | 137) echo "timed out" ;;
    125) echo "not run (out of time)" ;;
    *)
      local f
      f=$(grep -m 1 '^FAIL ' "$outf")
      [ -n "$f" ] || f=$(tail -n 1 "$outf.err" 2>/dev/null)
      echo "exit $rc${f:+: ${f:0:160}}" ;;
  esac
}

# A test program's verdict lines, which must match between runs.
verdicts() { grep -E '^(PASS|FAIL|OBSERVED) ' "$1" 2>/dev/null; }
npass() { grep -c '^PASS ' "$1" 2>/dev/null; }
nfail() { grep -c '^FAIL ' "$1" 2>/dev/null; }
# pair_counts NATIVE_OUT POOL_OUT: both runs' PASS and FAIL counts.
pair_counts() {
  echo "native $(npass "$1") pass/$(nfail "$1") fail, pool $(npass "$2") pass/$(nfail "$2") fail"
}

# same_verdicts NAME NATIVE_OUT NATIVE_RC POOL_OUT POOL_RC COUNTS [info]: true
# when the shim was active in the pool run, both exited 0, a case passed and
# the verdict lines are identical; otherwise records why as NAME's FAIL row
# (with "info", "no test case ran" quotes the native run's first INFO line).
same_verdicts() {
  local name=$1 nout=$2 nrc=$3 pout=$4 prc=$5 counts=$6 info=${7:-}
  if ! grep -q 'allocator=pool' "$pout"; then
    record FAIL "$name" "the shim was not active in the pool run (exit $prc); $counts"
  elif [ "$nrc" != 0 ] || [ "$prc" != 0 ]; then
    record FAIL "$name" "native exit $nrc, pool exit $prc; $counts; first failure: $(grep -h -m 1 '^FAIL ' "$nout" "$pout" | head -n 1 | cut -c 1-160)"
  elif [ "$(npass "$nout")" = 0 ]; then
    local why=""
    [ -z "$info" ] || why=": $(grep -h -m 1 '^INFO' "$nout" | cut -c 1-120)"
    record FAIL "$name" "no test case ran (exit $nrc)$why"
  elif ! diff <(verdicts "$nout") <(verdicts "$pout") >"$WORK/diff.txt"; then
    record FAIL "$name" "results differ: native '$(grep -m 1 '^<' "$WORK/diff.txt" | cut -c 3-140)' pool '$(grep -m 1 '^>' "$WORK/diff.txt" | cut -c 3-140)'; $counts"
  else
    return 0
  fi
  return 1
}

# compare NAME NATIVE_OUT NATIVE_RC POOL_OUT POOL_RC: one table row.
compare() {
  local name=$1 nout=$2 nrc=$3 pout=$4 prc=$5
  local counts
  counts=$(pair_counts "$nout" "$pout")
  if [ ! -s "$pout" ] && ! shim_built; then
    record FAIL "$name" "no shim to run under; $counts"
  elif same_verdicts "$name" "$nout" "$nrc" "$pout" "$prc" "$counts" info; then
    record PASS "$name" "$counts, identical"
  fi
}

# pair_runs KEY LABEL LIMIT CMD...: CMD natively and (when there is a shim)
# under the shim, output to WORK/KEY-native.out and WORK/KEY-pool.out for
# summary.py or rows.py to judge; only failures to run are recorded here.
pair_runs() {
  local key=$1 label=$2 limit=$3
  shift 3
  run "$label native" "$limit" "$WORK/$key-native.out" "$@"
  [ "$rc" = 0 ] || record FAIL "$label native run" "$(why_failed "$WORK/$key-native.out")"
  if shim_built; then
    run "$label under the shim" "$limit" "$WORK/$key-pool.out" "${pool_env[@]}" "$@"
    [ "$rc" = 0 ] || record FAIL "$label run under the shim" "$(why_failed "$WORK/$key-pool.out")"
  fi
}
