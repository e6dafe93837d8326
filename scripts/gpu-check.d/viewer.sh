# viewer.sh: the viewer section (mode viewer; not part of all): does
# PyTorch's memory viewer (torch.cuda._memory_viz: trace_plot, segment_plot,
# segsum) read what `cudapool export --memory-viz` writes? First for the
# shared transformer trace in traces/, then for a trace cudapool records live
# under a small PyTorch training loop (bench/pytorch/transformer_step.py,
# caching off, under the shim, CUDAPOOL_TRACE), which `cudapool view` must
# also turn into a page. Rows come from bench/viewer/memviz_check.py's
# PASS/FAIL lines; SKIP where python3 cannot import torch.
# shellcheck shell=bash
# shellcheck disable=SC2154 # rc is set by run (common.sh), shim_vars by setup.sh

section_viewer() {
  begin_section viewer viewer.log "viewer exports"
  : >"$LOG"
  if ! timeout 60 python3 -c 'import torch' >/dev/null 2>&1; then
    record SKIP "viewer" "python3 cannot import torch"
    return
  fi
  viewer_check shared traces/transformer.csv.gz
  if ! shim_built; then
    record FAIL "viewer live trace" "no shim to run under"
    return
  fi
  local live=$WORK/viewer-live.csv.gz
  run "viewer live trace" 150 "$WORK/viewer-live.out" env PYTHONUNBUFFERED=1 PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
    "${shim_vars[@]}" CUDAPOOL_TRACE="$live" python3 bench/pytorch/transformer_step.py
  if [ "$rc" != 0 ] || [ ! -s "$live" ]; then
    record FAIL "viewer live trace" "$(why_failed "$WORK/viewer-live.out")"
    return
  fi
  run "viewer page" 120 "$WORK/viewer-page.out" scripts/cudapool view "$live" -o "$WORK/viewer-live.html"
  if [ "$rc" = 0 ] && [ -s "$WORK/viewer-live.html" ]; then
    record PASS "viewer page of a live trace" "$(tail -n 1 "$WORK/viewer-page.out.err")"
  else
    record FAIL "viewer page of a live trace" "$(why_failed "$WORK/viewer-page.out")"
  fi
  viewer_check live "$live"
}

# viewer_check NAME TRACE: exports TRACE for memory_viz and records one row
# per check of memviz_check.py.
viewer_check() {
  local name=$1 trace=$2 pk=$WORK/viewer-$1.pickle line
  run "export $name" 120 "$WORK/viewer-export-$name.out" scripts/cudapool export "$trace" \
    --memory-viz "$pk" --perfetto "$WORK/viewer-$name.perfetto.json"
  if [ "$rc" != 0 ]; then
    record FAIL "viewer export $name" "$(why_failed "$WORK/viewer-export-$name.out")"
    return
  fi
  run "memory_viz $name" 180 "$WORK/viewer-memviz-$name.out" python3 bench/viewer/memviz_check.py "$pk"
  if [ "$rc" = 124 ] || [ "$rc" = 125 ] || ! grep -qE '^(PASS|FAIL) ' "$WORK/viewer-memviz-$name.out"; then
    record FAIL "viewer memory_viz $name" "$(why_failed "$WORK/viewer-memviz-$name.out")"
    return
  fi
  while IFS= read -r line; do
    record "${line%% *}" "viewer memory_viz $name ${line#* }" ""
  done < <(grep -E '^(PASS|FAIL) ' "$WORK/viewer-memviz-$name.out")
}
