# regions.sh: the regions section (mode regions, not part of all; about a
# minute): a small PyTorch training loop under the shim with PyTorch's
# caching off, whose phases are marked the two ways a program does it:
# torch.cuda.nvtx.range_push/pop ("forward", "backward": PyTorch's own NVTX
# client, which must load cudapool as its NVTX tool) and cudapool.tag
# ("optimizer": the Python package). Mid-run the program asks for its own
# `cudapool stats PID --json` and `cudapool snapshot PID -o FILE`
# (cudapool-stats, built here). Rows: each region in the exit report's JSON
# with bytes allocated and a peak; the live stats naming the regions; the
# snapshot written and opened by `cudapool view`. SKIP when python3 cannot
# import torch; FAIL when a run fails or a region is missing.
# shellcheck shell=bash
# shellcheck disable=SC2154 # rc is set by run (common.sh), shim_vars by setup.sh

section_regions() {
  begin_section regions regions.log "regions (cudapool_push_tag, NVTX ranges)"
  if ! timeout 60 python3 -c 'import torch' >/dev/null 2>&1; then
    record SKIP "regions" "python3 cannot import torch"
    return
  fi
  shim_built || { record FAIL "regions" "no shim to run under"; return; }
  run "build cudapool-stats" 120 "$WORK/build-stats.out" \
    make -j16 BUILD="$BUILD" DEPS_STAMP= EXTRA_CFLAGS="-isystem .gpu-carry/include" "$BUILD/cudapool-stats"
  if [ "$rc" != 0 ] || [ ! -x "$BUILD/cudapool-stats" ]; then
    record FAIL "build cudapool-stats" "$(why_failed "$WORK/build-stats.out")"
    return
  fi
  local report=$WORK/regions-report.json out=$WORK/regions.out snap=$WORK/regions-snap.json
  rm -f "$report" "$snap" "$snap.html"
  run "regions run" 180 "$out" env -u PYTORCH_CUDA_ALLOC_CONF -u NVTX_INJECTION64_PATH PYTHONUNBUFFERED=1 \
    PYTORCH_NO_CUDA_MEMORY_CACHING=1 PYTHONPATH="$PWD/python" "${shim_vars[@]}" CUDAPOOL_STATS="$report" \
    CUDAPOOL_STATS_FORMAT=json REGIONS_STATS="$PWD/$BUILD/cudapool-stats" REGIONS_SNAP="$PWD/$snap" \
    python3 - <<'PY'
import json, os, subprocess, sys
import torch
import cudapool
from torch import nn
dev = torch.device("cuda")
model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
x, y = torch.randn(256, 1024, device=dev), torch.randn(256, 1024, device=dev)
asked = {}
for step in range(8):
    torch.cuda.nvtx.range_push("forward")
    loss = nn.functional.mse_loss(model(x), y)
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("backward")
    loss.backward()
    torch.cuda.nvtx.range_pop()
    with cudapool.tag("optimizer"):
        opt.step()
        opt.zero_grad(set_to_none=True)
    if step == 4:
        tool, pid = os.environ["REGIONS_STATS"], str(os.getpid())
        s = subprocess.run([tool, pid, "--json", "--timeout", "30"], stdout=subprocess.PIPE, timeout=60)
        asked["stats_rc"] = s.returncode
        asked["stats_regions"] = [r["name"] for r in json.loads(s.stdout).get("regions", [])] if s.returncode == 0 else []
        n = subprocess.run([tool, "--snapshot", pid, "-o", os.environ["REGIONS_SNAP"], "--timeout", "30"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
        asked["snap_rc"], asked["snap_said"] = n.returncode, n.stdout.strip()
torch.cuda.synchronize()
print(json.dumps(asked))
PY
  if [ "$rc" != 0 ] || [ ! -s "$report" ]; then
    record FAIL "regions run" "$(why_failed "$out")"
    return
  fi
  local status name detail
  while IFS=$'\t' read -r status name detail; do
    record "$status" "$name" "$detail"
  done < <(timeout 60 python3 - "$report" "$out" <<'PY'
import json, sys
rep = json.load(open(sys.argv[1]))
asked = json.loads([l for l in open(sys.argv[2]) if l.startswith("{")][-1])
regions = {r["name"]: r for r in rep.get("regions", [])}
for name, how in (("forward", "NVTX"), ("backward", "NVTX"), ("optimizer", "cudapool.tag")):
    r = regions.get(name)
    if r is None:
        print(f"FAIL\tregion {name} ({how})\tnot in the exit report: {sorted(regions)}")
        continue
    ok = r["allocated_bytes"] > 0 and r["peak_bytes"] > 0 and r["entries"] == 8
    print(("PASS" if ok else "FAIL") + f"\tregion {name} ({how})\tpeak {r['peak_bytes']} bytes, "
          f"{r['allocated_bytes']} bytes in {r['allocations']} allocations, entered {r['entries']} times")
live = asked.get("stats_regions", [])
ok = asked.get("stats_rc") == 0 and {"forward", "backward", "optimizer"} <= set(live)
print(("PASS" if ok else "FAIL") + f"\tcudapool stats PID regions\texit {asked.get('stats_rc')}, {live}")
print(("PASS" if asked.get("snap_rc") == 0 else "FAIL") + f"\tcudapool snapshot PID\t{asked.get('snap_said')}")
PY
)
  if [ -s "$snap" ]; then
    run "view snapshot" 60 "$WORK/regions-view.out" scripts/cudapool view "$snap" -o "$snap.html"
    if [ "$rc" = 0 ] && [ -s "$snap.html" ]; then
      record PASS "cudapool view of the snapshot" "$snap.html"
    else
      record FAIL "cudapool view of the snapshot" "$(why_failed "$WORK/regions-view.out")"
    fi
  fi
}
