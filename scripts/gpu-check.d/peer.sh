# peer.sh: the peer section (scripts/gpu-check peer; seconds; two GPUs):
# peer access against early reuse (issue 31, item d; docs/DESIGN.md, "Peer
# access"). tests/gpu/peer_race.cu: device 1 enables access to device 0, a
# kernel on device 1 reads and then writes a block of device 0, the program
# frees the block on device 0 while that kernel runs, allocates again there
# and overwrites it. Natively (an OBSERVED row: the native result is CUDA's,
# not cudapool's) it says whether cudaFree waited for the peer's kernel, and
# whether the reader and the new block stayed intact; under the shim, with
# the learned order on and off, every case must stay intact (PASS), whatever
# the native run showed: cudapool orders a peer's work before any reuse
# (shim/state/peers.c). SKIPs with fewer than two GPUs or no peer access.
# shellcheck shell=bash
# shellcheck disable=SC2154 # rc: run (common.sh); pool_env: setup.sh

section_peer() {
  begin_section peer tests.log "peer access"
  local nout=$WORK/test-peer-native.out waited
  run "peer native" 60 "$nout" "$TESTS/peer_race"
  if grep -q '^SKIP peer_race' "$nout"; then
    record SKIP "peer" "$(grep '^SKIP peer_race' "$nout" | head -n 1)"
    return
  fi
  waited=$(grep -o 'INFO peer_race: free_waited_for_peer=[0-9]*/[0-9]*' "$nout" | sed 's/.*=//')
  record OBSERVED "peer native" "cudaFree returned after the peer's kernel ended in ${waited:-?} frees; $(npass "$nout") of 4 cases intact, $(nfail "$nout") corrupted (exit $rc): $(grep '^FAIL' "$nout" | head -n 1 | head -c 200)"
  shim_built || { record FAIL "peer shim" "no shim to run under"; return; }
  local order out
  for order in 1 0; do
    out=$WORK/test-peer-pool-order$order.out
    run "peer under the shim, CUDAPOOL_LEARN_ORDER=$order" 60 "$out" "${pool_env[@]}" CUDAPOOL_LEARN_ORDER=$order \
      "$TESTS/peer_race"
    if [ "$rc" = 0 ] && [ "$(npass "$out")" = 4 ] && [ "$(nfail "$out")" = 0 ]; then
      record PASS "peer shim CUDAPOOL_LEARN_ORDER=$order" "4 of 4 cases intact: the peer's work is ordered before the reuse ($(grep -o 'reused=[0-9]*/[0-9]*' "$out" | tr '\n' ' '))"
    else
      record FAIL "peer shim CUDAPOOL_LEARN_ORDER=$order" "exit $rc; $(npass "$out") pass, $(nfail "$out") fail: $(grep '^FAIL' "$out" | head -n 1 | head -c 200)"
    fi
  done
}
