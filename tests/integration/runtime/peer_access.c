/* peer_access.c: blocks of device 0 written by device 1 through peer access
 * and freed with cudaFree (issue 31, item d; tests/programs/runtime/
 * peer_access.c, two fake devices, device work held in flight). The fake's
 * cudaFree waits for the freeing device's work only, so natively the program
 * races (races=1): whether a real cudaFree waits for a peer's kernel is what
 * tests/gpu/peer_race.cu measures (scripts/gpu-check peer). Under cudapool
 * the peer's work is ordered before any reuse (shim/state/peers.c): races=0
 * in every case, with the learned order on (the default) and off. Without
 * the hook of cudaDeviceEnablePeerAccess every case raced (races=1): the
 * freeing thread took the block back by its key, device 0's barriers did not
 * reach device 1's streams, and device 0's synchronisations made the blocks
 * ready. */
#include "it_check.h"

static void ordered(const char *what, const char *reader, const char *order) {
  const char *const env[] = {"FAKECUDA_DEVICES=2", order, NULL};
  char tag[64], native[128], want[128];
  snprintf(tag, sizeof tag, "peer_%s_%s", what, reader);
  snprintf(native, sizeof native, "%s: errors=0 enable=0 races=1 last=0", tag);
  snprintf(want, sizeof want, "%s: errors=0 enable=0 races=0 last=0", tag);
  it_result n, s;
  it_run_ok(&n, IT_NATIVE, env, "peer_access", IT_ARGS(what, reader));
  it_run_ok(&s, IT_SHIM, env, "peer_access", IT_ARGS(what, reader));
  cr_assert(eq(str, (char *)it_line(&n, tag), native), "%s", n.out);
  cr_assert(eq(str, (char *)it_line(&s, tag), want), "%s (%s)\n%s", s.out, order, s.err);
  /* The peer's work was ordered, not avoided: the block came back. */
  cr_assert(eq(long, it_val(&s, "info", "reused", -1), 1), "%s", s.out);
  it_free(&n);
  it_free(&s);
}

static void every_reader(const char *what) {
  static const char *const readers[] = {"legacy", "nonblocking"};
  static const char *const orders[] = {"CUDAPOOL_LEARN_ORDER=1", "CUDAPOOL_LEARN_ORDER=0"};
  for (int r = 0; r < 2; r++)
    for (int o = 0; o < 2; o++) ordered(what, readers[r], orders[o]);
}

/* No stream on device 0: the freeing thread's key would hand the block
 * back at once; a peer turns device 0's keys off, and the barrier then
 * records on device 1's streams. */
Test(shim_it_peer, the_freeing_threads_reuse_waits_for_a_peers_work) { every_reader("same_thread"); }

/* A stream on device 0: device 0's barrier makes its legacy stream wait for
 * device 1's streams before its record, and device 1's streams wait on it. */
Test(shim_it_peer, a_barrier_orders_a_peers_work_before_the_reuse) { every_reader("barrier"); }

/* cudaDeviceSynchronize and cudaStreamSynchronize(0) on device 0 do not wait
 * for device 1: with a peer they make no free ready. */
Test(shim_it_peer, a_synchronisation_of_the_device_does_not_cover_its_peers) {
  every_reader("device_sync");
  every_reader("legacy_sync");
}
