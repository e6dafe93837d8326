# pytorch.sh: the pytorch section (mode pytorch, part of all): the
# bench/pytorch workloads with PyTorch's caching allocator, with caching off,
# and with caching off under the shim (default layers, and runtime layer only:
# the like-for-like reserved figure, since then cuBLAS/cuDNN's own driver
# allocations stay outside the pool as they stay outside PyTorch's count);
# under the shim with expandable segments (CUDAPOOL_EXPANDABLE=1); with
# PyTorch's cudaMallocAsync backend natively and under the shim (which then
# serves its stream-ordered calls); and with cudapool as PyTorch's pluggable
# allocator (python/cudapool/torch.py); PyTorch's own allocator with
# expandable_segments:True (caching-expandable), the figure cudapool's
# expandable run is held to; "barriers" (not in the default list) is the
# shim with CUDAPOOL_LEARN_ORDER=0, what the learned stream order brings. GPU_CHECK_TORCH_ALLOCS picks the runs (default:
# all nine). summary.py compares them. GPU_CHECK_TORCH may also name
# resnet50, efficientnet_b0 and vit_b_16 (bench/pytorch/cnn_train.py).
# shellcheck shell=bash
# shellcheck disable=SC2154 # rc is set by run (common.sh), shim_vars by setup.sh

section_pytorch() {
  begin_section pytorch pytorch.log pytorch
  if ! python3 -c 'import torch' >/dev/null 2>&1; then
    record SKIP "pytorch" "python3 cannot import torch"
    return
  fi
  # GPU_CHECK_TORCH: the workloads to run (unset: all four; empty: none).
  local wl alloc
  local workloads=${GPU_CHECK_TORCH-transformer gpt2 convnext_tiny densenet121}
  local allocs=${GPU_CHECK_TORCH_ALLOCS-caching off cudapool runtime expandable caching-expandable async async-cudapool pluggable}
  # Every workload's headline pair (PyTorch's allocator, cudapool) first,
  # then the other runs: a budget spent on a slow host loses extra runs,
  # never a workload's comparison.
  for wl in $workloads; do
    for alloc in $allocs; do
      case "$alloc" in caching | cudapool | caching-expandable | expandable) torch_run "$wl" "$alloc" ;; esac
    done
  done
  for wl in $workloads; do
    for alloc in $allocs; do
      case "$alloc" in caching | cudapool | caching-expandable | expandable) ;; *) torch_run "$wl" "$alloc" ;; esac
    done
  done
}

# torch_run WORKLOAD ALLOC: one run, its JSON line in $WORK/torch-WORKLOAD-ALLOC.json.
torch_run() {
  local wl=$1 alloc=$2 jf
  local -a cmd envs
  case "$wl" in
    transformer) cmd=(bench/pytorch/transformer_step.py) ;;
    gpt2) cmd=(bench/pytorch/gpt2_varlen.py) ;;
    *) cmd=(bench/pytorch/cnn_train.py --model "$wl") ;;
  esac
  envs=(env -u PYTORCH_NO_CUDA_MEMORY_CACHING PYTHONUNBUFFERED=1)
  case "$alloc" in
    off) envs+=(PYTORCH_NO_CUDA_MEMORY_CACHING=1) ;;
    cudapool)
      shim_built || { record FAIL "torch $wl cudapool run" "no shim"; return; }
      envs+=(PYTORCH_NO_CUDA_MEMORY_CACHING=1 "${shim_vars[@]}") ;;
    runtime)
      shim_built || return
      envs+=(PYTORCH_NO_CUDA_MEMORY_CACHING=1 "${shim_vars[@]}" CUDAPOOL_LAYER=runtime) ;;
    barriers)
      # The learned stream order off (issue 25): what it brings, in the same run.
      shim_built || return
      envs+=(PYTORCH_NO_CUDA_MEMORY_CACHING=1 "${shim_vars[@]}" CUDAPOOL_LEARN_ORDER=0) ;;
    expandable)
      shim_built || { record FAIL "torch $wl expandable run" "no shim"; return; }
      envs+=(PYTORCH_NO_CUDA_MEMORY_CACHING=1 "${shim_vars[@]}" CUDAPOOL_EXPANDABLE=1) ;;
    async) envs+=(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync) ;;
    caching-expandable) envs+=(PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) ;;
    async-cudapool | pluggable)
      shim_built || { record FAIL "torch $wl $alloc run" "no shim"; return; }
      if [ "$alloc" = pluggable ]; then
        envs+=(CUDAPOOL_TORCH_PLUGGABLE=1 "${shim_vars[@]}")
      else
        envs+=(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "${shim_vars[@]}")
      fi ;;
  esac
  jf=$WORK/torch-$wl-$alloc.json
  run "$wl $alloc" 150 "$jf.raw" "${envs[@]}" python3 "${cmd[@]}"
  grep '^{' "$jf.raw" | tail -n 1 >"$jf"
  if [ "$rc" != 0 ] || [ ! -s "$jf" ]; then
    record FAIL "torch $wl $alloc run" "$(why_failed "$jf.raw")"
  else
    echo "  ran $wl with $alloc"
  fi
}
