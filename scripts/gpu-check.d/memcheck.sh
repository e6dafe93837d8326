# memcheck.sh: compute-sanitizer's memcheck for test.sh and driver.sh:
# finding the sanitizer, running a program under it (with the shim preloaded
# inside the target), its error summary, and whether a run was clean.
# shellcheck shell=bash

# find_sanitizer: san, compute-sanitizer's path; false when there is none.
find_sanitizer() {
  san=$(command -v compute-sanitizer 2>/dev/null || true)
  [ -n "$san" ] || [ ! -x /usr/local/cuda/bin/compute-sanitizer ] || san=/usr/local/cuda/bin/compute-sanitizer
  [ -n "$san" ]
}

# memcheck LABEL OUTFILE CMD...: run (120 s) of CMD under memcheck, which
# follows CMD's children.
memcheck() {
  local label=$1 outf=$2
  shift 2
  run "$label" 120 "$outf" "$san" --tool memcheck --target-processes all "$@"
}

# memcheck_in_target LABEL OUTFILE PROG ARGS...: PROG under memcheck and the
# shim. compute-sanitizer follows the target with its own LD_PRELOAD helpers,
# so the shim is added inside the target: a small sh wrapper appends it to
# whatever LD_PRELOAD the sanitizer gave the target, then execs PROG
# (--target-processes all follows the exec; the sanitizer's front end never
# loads the shim).
memcheck_in_target() {
  local label=$1 outf=$2
  shift 2
  # shellcheck disable=SC2016 # expanded by that sh, in the target
  memcheck "$label" "$outf" sh -c 'LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$0" exec "$@"' "$SHIM" "$@"
}

# summary_of OUTFILE: memcheck's "ERROR SUMMARY: N errors" line.
summary_of() { grep -h -o 'ERROR SUMMARY: [0-9]* errors*' "$1" "$1.err" 2>/dev/null | tail -n 1; }

# memcheck_clean OUTFILE SUMMARY RC: a run under memcheck and the shim was
# clean: 0 errors, exit 0, the shim active, at least one PASS.
memcheck_clean() {
  [ "$2" = "ERROR SUMMARY: 0 errors" ] && [ "$3" = 0 ] && grep -q 'allocator=pool' "$1" &&
    [ "$(npass "$1")" -gt 0 ]
}
