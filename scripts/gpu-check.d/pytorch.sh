# pytorch.sh: the pytorch section (mode pytorch, part of all): the
# bench/pytorch workloads with PyTorch's caching allocator, with caching off,
# with caching off under the shim, and under the shim with expandable
# segments (CUDAPOOL_EXPANDABLE=1); summary.py compares them.
# shellcheck shell=bash
# shellcheck disable=SC2154 # rc is set by run (common.sh), shim_vars by setup.sh

section_pytorch() {
  begin_section pytorch pytorch.log pytorch
  if ! python3 -c 'import torch' >/dev/null 2>&1; then
    record SKIP "pytorch" "python3 cannot import torch"
    return
  fi
  local wl alloc envs jf
  local -a cmd
  # GPU_CHECK_TORCH: the workloads to run (unset: all four; empty: none).
  for wl in ${GPU_CHECK_TORCH-transformer gpt2 convnext_tiny densenet121}; do
    case "$wl" in
      transformer) cmd=(bench/pytorch/transformer_step.py) ;;
      gpt2) cmd=(bench/pytorch/gpt2_varlen.py) ;;
      *) cmd=(bench/pytorch/cnn_train.py --model "$wl") ;;
    esac
    for alloc in caching off cudapool expandable; do
      envs=(env -u PYTORCH_NO_CUDA_MEMORY_CACHING PYTHONUNBUFFERED=1)
      case "$alloc" in
        off) envs+=(PYTORCH_NO_CUDA_MEMORY_CACHING=1) ;;
        cudapool)
          shim_built || { record FAIL "torch $wl cudapool run" "no shim"; continue; }
          envs+=(PYTORCH_NO_CUDA_MEMORY_CACHING=1 "${shim_vars[@]}") ;;
        expandable)
          shim_built || { record FAIL "torch $wl expandable run" "no shim"; continue; }
          envs+=(PYTORCH_NO_CUDA_MEMORY_CACHING=1 "${shim_vars[@]}" CUDAPOOL_EXPANDABLE=1) ;;
      esac
      jf=$WORK/torch-$wl-$alloc.json
      run "$wl $alloc" 150 "$jf.raw" "${envs[@]}" python3 "${cmd[@]}"
      grep '^{' "$jf.raw" | tail -n 1 >"$jf"
      if [ "$rc" != 0 ] || [ ! -s "$jf" ]; then
        record FAIL "torch $wl $alloc run" "$(why_failed "$jf.raw")"
      else
        echo "  ran $wl with $alloc"
      fi
    done
  done
}
