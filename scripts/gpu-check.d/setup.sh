# setup.sh: what a run stands on: the GPU (need_gpu), the paths every part
# uses, a clean $OUT and work folder, the commit, the banner and
# WORK/meta.tsv (setup_run).
# shellcheck shell=bash

# need_gpu: prints nvidia-smi's first "name, driver, memory" line; says why
# and exits 2 when there is no GPU.
need_gpu() {
  local line
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "gpu-check: no GPU: nvidia-smi is not installed. This script runs on a GPU machine" >&2
    echo "  (scripts/gpu-check build only compiles; make demo runs on the simulated runtime)." >&2
    exit 2
  fi
  if ! line=$(timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total \
    --format=csv,noheader 2>&1) || [ -z "$line" ]; then
    echo "gpu-check: no GPU: nvidia-smi failed: ${line:-no output}" >&2
    echo "  (scripts/gpu-check build only compiles; make demo runs on the simulated runtime)." >&2
    exit 2
  fi
  head -n 1 <<<"$line"
}

# set_paths: where things go.
# shellcheck disable=SC2034 # read by the other parts
set_paths() {
  BUILD=build/gpu
  SHIM=$PWD/$BUILD/libcudapool.so
  TESTS=$BUILD/gpu/tests
  BENCH=$BUILD/gpu/bench
  DEMO=$BUILD/demo/legacy_app
  STATIC=$BUILD/gpu/static
  ROWS=bench/driver/rows.py
  WORK=$BUILD/check
  OUT=${OUT:-$BUILD/out}
  RECORDS=$WORK/records.tsv
  LOG=$OUT/build.log
  NVCC=${NVCC:-/usr/local/cuda/bin/nvcc}
  command -v "$NVCC" >/dev/null 2>&1 || NVCC=$(command -v nvcc 2>/dev/null || echo nvcc)
  # The settings of a run under the shim, and a command that runs under it.
  shim_vars=("LD_PRELOAD=$SHIM" CUDAPOOL_STATS=1)
  pool_env=(env "${shim_vars[@]}")
}

# host_cpu: the host's CPU model and its number of CPUs, one line.
host_cpu() {
  local model
  model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)
  echo "${model:-unknown CPU}, $(nproc 2>/dev/null || echo '?') CPUs"
}

# setup_run MODE GPU_LINE: the paths, fresh folders, the banner, meta.tsv.
setup_run() {
  local mode=$1 gpu_line=$2 gpu_name driver commit
  gpu_name=$(cut -d, -f1 <<<"$gpu_line" | sed 's/^ *//')
  driver=$(cut -d, -f2 <<<"$gpu_line" | sed 's/^ *//')
  set_paths
  mkdir -p "$OUT" || exit 2
  rm -rf "$WORK" && mkdir -p "$WORK" || exit 2
  rm -f "$OUT"/build.log "$OUT"/tests.log "$OUT"/bench.log "$OUT"/pytorch.log "$OUT"/driver.log "$OUT"/nvtx.log \
    "$OUT"/summary.txt "$OUT"/results.json
  : >"$RECORDS"
  # The device machine gets a copy of the tree without .git: GPU_CHECK_COMMIT
  # (set by whoever sends the run) names the commit then.
  if [ -n "${GPU_CHECK_COMMIT:-}" ]; then
    commit=$GPU_CHECK_COMMIT
  elif commit=$(git rev-parse --short HEAD 2>/dev/null); then
    git diff --quiet HEAD 2>/dev/null || commit="$commit+changes"
  else
    commit=unknown
  fi

  echo "== cudapool gpu-check $mode, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "GPU: ${gpu_name:-none}   driver: ${driver:--}   memory: $(cut -d, -f3 <<<"$gpu_line" | sed 's/^ *//')"
  echo "nvcc: $("$NVCC" --version 2>/dev/null | tail -n 1)   commit: $commit   logs: $OUT"
  # Host speed varies between lent machines (the same build's cache hit has
  # measured 144 and 315 ns): every figure is read against this line.
  echo "host: $(host_cpu)"
  {
    printf 'mode\t%s\ngpu\t%s\ndriver\t%s\ncommit\t%s\n' "$mode" "${gpu_name:-none}" "${driver:--}" "$commit"
    printf 'date\t%s\nout\t%s\nhost\t%s\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" "$OUT" "$(host_cpu)"
  } >"$WORK/meta.tsv"
}
