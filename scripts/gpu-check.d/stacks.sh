# stacks.sh: the stacks section (mode stacks, not part of all): a small
# PyTorch training run (bench/pytorch/transformer_step.py) under the shim
# with PyTorch's caching off, once with CUDAPOOL_STACKS=1 and once without;
# rows: the Python lines that held the most bytes at the peak of reserved
# memory (the JSON report's call_sites), and the median step time with
# stacks on against off (the cost of a stack walk per allocation; the walker,
# libunwind or glibc, is the report's call_sites.walker).
# PyTorch releases the GIL around its operators: these lines are read from
# the allocating thread's frames without it (shim/state/pyframes_raw.c).
# SKIP when python3 cannot import torch; FAIL when a run fails, names no
# Python frame, when the top site at the peak is not a Python line or its
# stack does not pass through a line of transformer_step.py, or when the
# report says this Python's frames cannot be read without the GIL.
# shellcheck shell=bash
# shellcheck disable=SC2154 # rc is set by run (common.sh), shim_vars by setup.sh

section_stacks() {
  begin_section stacks stacks.log "call sites (CUDAPOOL_STACKS)"
  if ! timeout 60 python3 -c 'import torch' >/dev/null 2>&1; then
    record SKIP "stacks" "python3 cannot import torch"
    return
  fi
  shim_built || { record FAIL "stacks" "no shim to run under"; return; }
  local on off report=$WORK/stacks-report.json
  local -a envs=(env -u PYTORCH_CUDA_ALLOC_CONF PYTHONUNBUFFERED=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 "${shim_vars[@]}")
  # The walk dlopens libunwind.so.8: the carried copy where the machine has none.
  if ! ldconfig -p 2>/dev/null | grep -q 'libunwind.so.8 ' && [ -f .gpu-carry/lib/libunwind.so.8 ]; then
    envs+=(LD_LIBRARY_PATH="$PWD/.gpu-carry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
  fi
  off=$WORK/stacks-off.json
  run "stacks off" 150 "$off.raw" "${envs[@]}" python3 bench/pytorch/transformer_step.py
  grep '^{' "$off.raw" | tail -n 1 >"$off"
  if [ "$rc" != 0 ] || [ ! -s "$off" ]; then
    record FAIL "stacks off run" "$(why_failed "$off.raw")"
    return
  fi
  on=$WORK/stacks-on.json
  rm -f "$report"
  run "stacks on" 150 "$on.raw" "${envs[@]}" CUDAPOOL_STACKS=1 CUDAPOOL_STATS="$report" \
    CUDAPOOL_STATS_FORMAT=json python3 bench/pytorch/transformer_step.py
  grep '^{' "$on.raw" | tail -n 1 >"$on"
  if [ "$rc" != 0 ] || [ ! -s "$on" ] || [ ! -s "$report" ]; then
    record FAIL "stacks on run" "$(why_failed "$on.raw")"
    return
  fi
  local status name detail
  while IFS=$'\t' read -r status name detail; do
    record "$status" "$name" "$detail"
  done < <(timeout 60 python3 - "$off" "$on" "$report" <<'PY'
import json, sys
off, on, rep = (json.load(open(p)) for p in sys.argv[1:4])
a, b = off["step_ms_median"], on["step_ms_median"]
print(f"INFO\tstep time, stacks off\t{a:.2f} ms (median)")
print(f"INFO\tstep time, stacks on\t{b:.2f} ms (median), {100.0 * (b - a) / a:+.1f}%")
print(f"INFO\tstack walker\t{rep.get('call_sites', {}).get('walker', '?')}")
print(f"INFO\tPython\t{sys.version.split()[0]} ({sys.executable})")
calls = rep.get("call_sites", {})
sites = calls.get("at_peak", [])
def pyframes(s):
    return [f["python"] for f in s["frames"] if "python" in f]
def script_line(s):
    return next((f for f in pyframes(s) if "transformer_step.py:" in f), None)
python = [s for s in sites if pyframes(s)]
for s in sites:
    print(f"INFO\tsite at peak\t{s['bytes']} bytes, {s['blocks']} blocks, {100 * s['share']:.1f}% at {s['site']}"
          f" (script: {script_line(s) or '-'})")
print(("PASS" if python else "FAIL") + f"\tsites name Python lines\t{len(python)} of {len(sites)} top sites")
print(("FAIL" if "python_without_gil" in calls else "PASS") + "\tPython frames without the GIL\t"
      + calls.get("python_without_gil", "read"))
top = sites[0] if sites else None
top_py = bool(top and pyframes(top) and top["site"] == pyframes(top)[0])
print(("PASS" if top_py else "FAIL") + "\ttop site at peak is a Python line\t"
      + (f"{top['site']}, {100 * top['share']:.1f}% of the peak" if top else "no site"))
print(("PASS" if top_py and script_line(top) else "FAIL") + "\ttop site's stack reaches the script\t"
      + ((script_line(top) or "no transformer_step.py frame") if top else "no site"))
PY
)
}
