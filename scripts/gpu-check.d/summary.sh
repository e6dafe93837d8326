# summary.sh: the end of a run: the table of bench/gpu/summary.py, printed
# LAST, and the exit status.
# shellcheck shell=bash

# finish: the run's time, the table (the raw rows where summary.py cannot
# run), and exit 0 when no row FAILs, 1 otherwise.
finish() {
  echo "== done in $(elapsed) s"
  if command -v python3 >/dev/null 2>&1 && python3 bench/gpu/summary.py "$WORK" "$OUT"; then
    exit 0
  elif [ -s "$OUT/summary.txt" ]; then
    exit 1
  else
    # summary.py could not run: the raw rows, still last.
    echo "STATUS  CHECK  RESULT"
    cut -f 2- "$RECORDS" | tr '\t' ' '
    grep -q "$(printf '^[^\t]*\tFAIL')" "$RECORDS" && exit 1
    exit 0
  fi
}

# finish_compile_only: a mode that only compiles: the table at once, and
# summary.py's exit status.
finish_compile_only() {
  python3 bench/gpu/summary.py "$WORK" "$OUT"
  exit $?
}
