# shared.sh: the shared section (scripts/gpu-check shared, after coop.sh's
# section): a GPU shared by several processes (issue 26) as the issue shows
# it. Owns:
#   - the two-program scenario in 1 GiB blocks (tests/programs/runtime/coop.c
#     "chunks"): natively, under the shim with cooperation off and on; the
#     slowest allocation holds the give-back round trip;
#   - the same with two PyTorch processes (bench/pytorch/coop_pair.py):
#     PyTorch's own allocator (the second fails), caching off natively and
#     under the shim with cooperation on (it gets them all);
#   - four processes under CUDAPOOL_SHARED_LIMIT churning 256 MiB blocks
#     (tests/programs/runtime/shared.c churn), the device's used memory
#     sampled every 20 ms (bench/gpu/nvml_peak.py) less the four contexts
#     (a run of the same four that only hold their 512 MiB) against the limit;
#     ending together, and exiting one by one while the others churn
#     ("staggered", sampled every 5 ms: a dead worker's share must wait
#     until the driver has freed its memory, by NVML's word);
#   - how long the driver takes to free a dead process's memory
#     (bench/gpu/driver_free.py: a native process holding 4 GiB exits, or is
#     killed; NVML polled every millisecond), against CUDAPOOL_SHARED_GRACE's
#     default (2000 ms: what the shim waits where NVML cannot say);
#   - the same exit under the shim (bench/gpu/exit_share.py): whether the
#     exiting process's share leaves the budget before its memory leaves
#     the device (INFO with the figures when it does), and whether NVML
#     stops listing its pid before that (FAIL: the dead-share rule would
#     then be early);
#   - a single process's step time with the features on (live segment,
#     cooperation, idle release, a shared limit) against off, interleaved.
# shellcheck shell=bash
# shellcheck disable=SC2154 # rc, WORK, NVCC, SHIM, LOG are setup.sh's and common.sh's

section_shared() {
  begin_section shared shared.log "a GPU shared by processes"
  local coop=$WORK/coop_pair shared=$WORK/shared_churn group="gpu-check-shared-$$" common
  common=(-Iinclude -Icommon -Itests/support -Itests/programs/runtime -cudart shared -Xlinker --enable-new-dtags
    -Xlinker "-rpath=$(dirname "$NVCC")/../lib64" -ldl)
  run "build coop" 120 "$WORK/shared-build1.out" "$NVCC" tests/programs/runtime/coop.c -o "$coop" "${common[@]}"
  local built_coop=$rc
  run "build shared" 120 "$WORK/shared-build2.out" "$NVCC" tests/programs/runtime/shared.c -o "$shared" \
    "${common[@]}"
  local built_shared=$rc
  local -a shim=(env LD_PRELOAD="$SHIM" CUDAPOOL_SHARED_NAME="$group")
  if [ "$built_coop" = 0 ]; then
    local how line
    for how in native off on; do
      case $how in
        native) run "chunks native" 120 "$WORK/chunks-$how.out" "$coop" chunks ;;
        off) run "chunks off" 120 "$WORK/chunks-$how.out" "${shim[@]}" CUDAPOOL_COOP_WAIT=0 "$coop" chunks ;;
        on) run "chunks on" 120 "$WORK/chunks-$how.out" "${shim[@]}" CUDAPOOL_COOP_WAIT=2000 "$coop" chunks ;;
      esac
      line="$(grep -h '^take:' "$WORK/chunks-$how.out") $(grep -h '^info:' "$WORK/chunks-$how.out")"
      case "$how:$line" in
        native:*ok=1* | on:*ok=1*) record PASS "1 GiB blocks, $how" "$line" ;;
        off:*ok=0*) record PASS "1 GiB blocks, cooperation off" "$line (the first's idle cache keeps them)" ;;
        *) record FAIL "1 GiB blocks, $how" "exit $rc; $line $(head -c 200 "$WORK/chunks-$how.out.err")" ;;
      esac
    done
  else
    record SKIP "1 GiB blocks" "nvcc could not build coop.c (see $LOG)"
  fi
  if timeout 60 python3 -c 'import torch' >/dev/null 2>&1; then
    local -a py=(env -u PYTORCH_CUDA_ALLOC_CONF PYTHONUNBUFFERED=1)
    run "torch pair caching" 180 "$WORK/tpair-caching.out" env -u PYTORCH_NO_CUDA_MEMORY_CACHING "${py[@]:1}" \
      python3 bench/pytorch/coop_pair.py
    line=$(grep -h '^take:' "$WORK/tpair-caching.out")
    case $line in *ok=0*) record PASS "torch pair, PyTorch's allocator" "$line (fails, as the issue says)" ;;
      *) record INFO "torch pair, PyTorch's allocator" "exit $rc; ${line:-no take line}" ;; esac
    run "torch pair off" 180 "$WORK/tpair-off.out" "${py[@]}" PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
      python3 bench/pytorch/coop_pair.py
    line=$(grep -h '^take:' "$WORK/tpair-off.out")
    case $line in *ok=1*) record PASS "torch pair, caching off natively" "$line" ;;
      *) record FAIL "torch pair, caching off natively" "exit $rc; ${line:-no take line}" ;; esac
    run "torch pair cudapool" 180 "$WORK/tpair-pool.out" "${py[@]}" PYTORCH_NO_CUDA_MEMORY_CACHING=1 "${shim[@]}" \
      CUDAPOOL_COOP_WAIT=2000 python3 bench/pytorch/coop_pair.py
    line=$(grep -h '^take:' "$WORK/tpair-pool.out")
    case $line in *ok=1*) record PASS "torch pair, cudapool" "$line; $(grep -o 'asked 1 other.*' "$WORK/tpair-pool.out.err" | head -n 1)" ;;
      *) record FAIL "torch pair, cudapool" "exit $rc; ${line:-no take line} $(head -c 200 "$WORK/tpair-pool.out.err")" ;; esac
  else
    record SKIP "torch pair" "python3 cannot import torch"
  fi
  if [ "$built_shared" = 0 ]; then
    local limit_mib=3072 base peak ctx4 sum
    run "four hold" 120 "$WORK/four-hold.out" python3 bench/gpu/nvml_peak.py -- "${shim[@]}" \
      CUDAPOOL_SHARED_NAME="$group-hold" CUDAPOOL_SHARED_LIMIT=100G "$shared" churn 4 0
    base=$(sed -n 's/^nvml: peak_bytes=\([0-9]*\).*/\1/p' "$WORK/four-hold.out")
    run "four churn" 180 "$WORK/four-churn.out" python3 bench/gpu/nvml_peak.py -- "${shim[@]}" \
      CUDAPOOL_SHARED_LIMIT=${limit_mib}M CUDAPOOL_COOP_WAIT=50 "$shared" churn 4 400
    peak=$(sed -n 's/^nvml: peak_bytes=\([0-9]*\).*/\1/p' "$WORK/four-churn.out")
    local workers over
    workers=$(grep -c '^worker:' "$WORK/four-churn.out")
    over=$(grep -o 'over=[0-9]*' "$WORK/four-churn.out" | awk -F= '{s += $2} END {print s + 0}')
    if [ -n "$base" ] && [ -n "$peak" ] && [ "$workers" = 4 ]; then
      ctx4=$((base - 4 * 512 * 1048576))
      sum=$((peak - ctx4))
      local detail
      detail="sum of reserved at most $((sum / 1048576)) MiB (device peak $((peak / 1048576)) MiB less 4 contexts $((ctx4 / 1048576)) MiB) against the limit ${limit_mib} MiB; totals seen over the limit: ${over:-?}; $(grep -h '^worker:' "$WORK/four-churn.out" | tr '\n' ' ')"
      if [ "$sum" -le $((limit_mib * 1048576)) ] && [ "${over:-1}" = 0 ]; then
        record PASS "four processes under a shared limit" "$detail"
      else
        record FAIL "four processes under a shared limit" "$detail"
      fi
    else
      record FAIL "four processes under a shared limit" "exit $rc; $(head -c 300 "$WORK/four-churn.out.err")"
    fi
    run "four staggered" 180 "$WORK/four-stag.out" python3 bench/gpu/nvml_peak.py --period-ms 5 -- "${shim[@]}" \
      CUDAPOOL_SHARED_NAME="$group-stag" CUDAPOOL_SHARED_LIMIT=${limit_mib}M CUDAPOOL_COOP_WAIT=50 \
      "$shared" churn 4 400 staggered
    peak=$(sed -n 's/^nvml: peak_bytes=\([0-9]*\).*/\1/p' "$WORK/four-stag.out")
    workers=$(grep -c '^worker:' "$WORK/four-stag.out")
    over=$(grep -o 'over=[0-9]*' "$WORK/four-stag.out" | awk -F= '{s += $2} END {print s + 0}')
    if [ -n "$base" ] && [ -n "$peak" ] && [ "$workers" = 4 ]; then
      sum=$((peak - ctx4))
      detail="exiting one by one: sum of reserved at most $((sum / 1048576)) MiB (device peak $((peak / 1048576)) MiB less 4 contexts $((ctx4 / 1048576)) MiB) against the limit ${limit_mib} MiB; totals over the limit: ${over:-?}; dead shares $(grep -h '^taken:' "$WORK/four-stag.out" | sed 's/^taken: //'); $(grep -h '^worker:' "$WORK/four-stag.out" | tr '\n' ' ')"
      if [ "$sum" -le $((limit_mib * 1048576)) ] && [ "${over:-1}" = 0 ]; then
        record PASS "four processes exiting one by one under a shared limit" "$detail"
      else
        record FAIL "four processes exiting one by one under a shared limit" "$detail"
      fi
    else
      record FAIL "four processes exiting one by one under a shared limit" \
        "exit $rc; $(head -c 300 "$WORK/four-stag.out.err")"
    fi
    run "driver free" 120 "$WORK/driver-free.out" python3 bench/gpu/driver_free.py "$shared" 4096 3
    local worst freed
    worst=$(grep -h '^free: worst' "$WORK/driver-free.out")
    freed=$(sed -n 's/^free: worst.*freed_after_reap_ms=\([0-9]*\).*/\1/p' "$WORK/driver-free.out")
    detail="$(grep -h '^free: how' "$WORK/driver-free.out" | sed 's/^free: //' | tr '\n' ';') ${worst#free: }"
    if [ -z "$freed" ]; then
      record FAIL "the driver frees a dead process's memory" "exit $rc; $(head -c 300 "$WORK/driver-free.out.err")"
    elif [ "$freed" -lt 2000 ]; then
      record PASS "the driver frees a dead process's memory" "$detail (under CUDAPOOL_SHARED_GRACE's 2000 ms)"
    else
      record INFO "the driver frees a dead process's memory" "$detail: later than CUDAPOOL_SHARED_GRACE's 2000 ms default"
    fi
    # The same exit under the shim: does the share leave the budget before
    # the memory leaves the device (the runtime ending its context at exit)?
    run "exit share" 60 "$WORK/exit-share.out" python3 bench/gpu/exit_share.py "$shared" "$SHIM" 3
    local early unlisted
    early=$(sed -n 's/^exit_share: worst share_before_memory_ms=\([0-9.]*\).*/\1/p' "$WORK/exit-share.out")
    unlisted=$(sed -n 's/^exit_share: worst.* unlisted_before_memory_ms=\([0-9.]*\).*/\1/p' "$WORK/exit-share.out")
    detail="$(grep -h '^exit_share: run' "$WORK/exit-share.out" | sed 's/^exit_share: //' | tr '\n' ';')"
    if [ -z "$early" ] || [ -z "$unlisted" ]; then
      record FAIL "an exiting process's share against its memory" "exit $rc; $(head -c 300 "$WORK/exit-share.out.err")"
    elif [ "$unlisted" != 0.0 ]; then
      record FAIL "an exiting process's share against its memory" "$detail NVML stopped listing the pid up to ${unlisted} ms before the memory left the device: the dead-share rule would take it back early"
    elif [ "$early" = 0.0 ]; then
      record PASS "an exiting process's share against its memory" "$detail the share never left before the memory, nor did NVML unlist the pid before it"
    else
      record INFO "an exiting process's share against its memory" "$detail the share left the budget up to ${early} ms before the memory left the device"
    fi
  else
    record SKIP "four processes under a shared limit" "nvcc could not build shared.c (see $LOG)"
  fi
  if timeout 60 python3 -c 'import torch' >/dev/null 2>&1; then
    local -a t=(env -u PYTORCH_CUDA_ALLOC_CONF PYTHONUNBUFFERED=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 LD_PRELOAD="$SHIM")
    local round cfg ms
    declare -A steps=()
    for round in 1 2; do
      for cfg in off on; do
        if [ $cfg = off ]; then
          run "step $cfg $round" 150 "$WORK/step-$cfg-$round.out" "${t[@]}" CUDAPOOL_LIVE=0 CUDAPOOL_COOP_WAIT=0 \
            python3 bench/pytorch/transformer_step.py --steps 30
        else
          run "step $cfg $round" 150 "$WORK/step-$cfg-$round.out" "${t[@]}" CUDAPOOL_SHARED_NAME="$group-step" \
            CUDAPOOL_SHARED_LIMIT=120G CUDAPOOL_RELEASE_IDLE=5 CUDAPOOL_COOP_WAIT=200 \
            python3 bench/pytorch/transformer_step.py --steps 30
        fi
        ms=$(grep '^{' "$WORK/step-$cfg-$round.out" | tail -n 1 |
          python3 -c 'import json,sys; print("%.2f" % json.load(sys.stdin)["step_ms_median"])' 2>/dev/null)
        steps[$cfg]="${steps[$cfg]:-} ${ms:-?}"
      done
    done
    record INFO "step time, features off / on" "transformer median ms, interleaved: off${steps[off]} | on (live, cooperation, RELEASE_IDLE=5, SHARED_LIMIT=120G)${steps[on]}"
  fi
}
