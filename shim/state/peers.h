/* peers.h: peer access as the reuse contract sees it (issue 31, item d;
 * docs/DESIGN.md, "Peer access").
 *
 * A device P given access to device D's memory (cudaDeviceEnablePeerAccess
 * with P current naming D, or cuCtxEnablePeerAccess in P's primary context
 * naming D's) may run work on its own streams that reads and writes D's
 * blocks: work that D's streams, D's barriers and D's synchronisations do not
 * order. From the first such enable, for good (a disable does not stop work
 * already queued; a reset of either device keeps it, which only costs
 * barriers), P is one of D's peers (cp_device_t.peers, bit P) and:
 *  - D's same-thread reuse keys are off (cp_device_reuse_key counts a peer
 *    as a live stream; the learned order already hands nothing out with
 *    pools on several devices, and work on a device without a pool makes the
 *    pooled ones MIXED);
 *  - D's barriers and fences reach every peer's streams too: each busy
 *    non-blocking stream of P and P's legacy stream (which covers P's
 *    blocking and per-thread streams, and P's orphan events once it waited
 *    on them) get an event recorded, D's legacy stream waits on those before
 *    its own record, and a barrier then makes P's non-blocking streams and
 *    P's legacy stream wait on E;
 *  - a synchronisation of D (the device, or its legacy stream) completes no
 *    free made with cudaFree/cuMemFree: it does not wait for P's work.
 * Streams of contexts the program created itself stay unknown (the pool
 * never serves them); an enable from or to one is not seen.
 *
 * Locks: a barrier or fence of D holds the device locks of D and of every
 * peer, taken in device order (cp_peers_lock), so that two devices that are
 * each other's peers cannot deadlock; the capture lock before them. */
#ifndef CUDAPOOL_SHIM_PEERS_H
#define CUDAPOOL_SHIM_PEERS_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/api.h"
#include "state/device.h"

/* Device accessor may access device owner's memory (the enable succeeded,
 * or was done already). Ids outside the table are ignored. */
void cp_peers_enabled(int accessor, int owner);
/* The peers of dev (bit i: device i), 0 for none. */
static inline uint64_t cp_device_peers(const cp_device_t *dev) {
  return atomic_load_explicit(&((cp_device_t *)dev)->peers, memory_order_acquire);
}
/* Whether any device has a peer: programs without peer access pay nothing. */
extern atomic_bool cp_peers_seen;

/* The device locks of dev and of the devices in peers, in device order. */
void cp_peers_lock(cp_device_t *dev, uint64_t peers);
void cp_peers_unlock(cp_device_t *dev, uint64_t peers);
/* With the locks held, while a capture runs: whether a known stream of a
 * peer has joined one (a record or wait on it would join the capture or
 * break it). */
bool cp_peers_joined(const cp_api_t *api, uint64_t peers);
/* With the locks held and dev's context entered: dev's legacy stream made
 * to wait for the work of every peer's streams so far (events recorded on
 * the busy ones). Clears *all_idle when one was busy. False on a failure. */
bool cp_peers_order_before(const cp_api_t *api, cp_device_t *dev, uint64_t peers, bool *all_idle);
/* With the locks held: every peer's non-blocking streams and legacy stream
 * wait on ev (dev's barrier event E, recorded on dev's legacy stream). */
bool cp_peers_wait_on(const cp_api_t *api, uint64_t peers, cudaEvent_t ev);

#endif
