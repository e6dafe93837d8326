# driver-python.sh: the driver section's CuPy and JAX runs (driver_python):
# each framework's own allocator natively against the platform allocator
# under the shim, via bench/driver/NAME_workload.py; rows.py judges them.
# shellcheck shell=bash
# shellcheck disable=SC2154 # rc is set by run (common.sh), stats_vars by stats_env (driver.sh)

driver_python() {
  if py_ready cupy cupy; then
    py_run cupy none 90 -- --allocator none
    py_run cupy cupy 90 -- --allocator cupy
    stats_env "$WORK/cupy-cudapool.stats.json"
    py_run cupy cudapool 90 CUDAPOOL_VERBOSE=1 "${stats_vars[@]}" -- --allocator none
    entry_rows cupy "$WORK/cupy-cudapool.raw.err"
    rows python "$WORK" cupy
  fi
  if py_ready jax jax; then
    py_run jax platform 120 XLA_PYTHON_CLIENT_ALLOCATOR=platform
    py_run jax bfc 120 -u XLA_PYTHON_CLIENT_ALLOCATOR
    stats_env "$WORK/jax-cudapool.stats.json"
    py_run jax cudapool 120 XLA_PYTHON_CLIENT_ALLOCATOR=platform CUDAPOOL_VERBOSE=1 "${stats_vars[@]}"
    entry_rows "jax platform" "$WORK/jax-cudapool.raw.err"
    # XLA's stream-ordered allocator (cuMemAllocFromPoolAsync on the default
    # pool), natively and served by cudapool.
    py_run jax cuda_async-native 120 XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async
    stats_env "$WORK/jax-cuda_async-cudapool.stats.json"
    py_run jax cuda_async-cudapool 120 XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async CUDAPOOL_VERBOSE=1 "${stats_vars[@]}"
    entry_rows "jax cuda_async" "$WORK/jax-cuda_async-cudapool.raw.err"
    rows python "$WORK" jax
    rows python "$WORK" jax-cuda_async
  fi
}

# entry_rows NAME STDERR: one INFO row per allocation entry point the run
# reached (CUDAPOOL_VERBOSE's exit lines, shim/state/entry_stats.h): how it was
# looked up (dlsym, cuGetProcAddress) and how many calls were served.
entry_rows() {
  local name=$1 errf=$2 line
  if ! grep -q '^cudapool: entry ' "$errf" 2>/dev/null; then
    record INFO "$name entry points" "no entry-point lines in $errf"
    return
  fi
  while IFS= read -r line; do
    line=${line#cudapool: entry }
    record INFO "$name entry ${line%% *}" "$(sed 's/^[^ ]* *//' <<<"$line")"
  done < <(grep '^cudapool: entry ' "$errf")
}

# py_ready NAME IMPORT: whether NAME's runs can be made: python3 imports
# IMPORT (else a SKIP row) and there is a shim (else a FAIL row).
py_ready() {
  local name=$1
  if ! timeout 60 python3 -c "import $2" >/dev/null 2>&1; then
    record SKIP "$name" "python3 cannot import $2"
    return 1
  fi
  if ! shim_built; then
    record FAIL "$name" "no shim to run under"
    return 1
  fi
  return 0
}

# py_run NAME RUN LIMIT [ENV words for env(1)] -- [ARGS]: one run of
# bench/driver/NAME_workload.py, its JSON line to WORK/NAME-RUN.json.
py_run() {
  local name=$1 runname=$2 limit=$3
  shift 3
  local envs=() raw=$WORK/$name-$runname.raw
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    envs+=("$1")
    shift
  done
  [ $# -gt 0 ] && shift
  run "$name $runname" "$limit" "$raw" env ${envs[@]+"${envs[@]}"} PYTHONUNBUFFERED=1 \
    python3 "bench/driver/${name}_workload.py" "$@"
  grep '^{' "$raw" | tail -n 1 >"$WORK/$name-$runname.json"
  if [ "$rc" != 0 ] || [ ! -s "$WORK/$name-$runname.json" ]; then
    record FAIL "$name $runname run" "$(why_failed "$raw")"
  fi
}
