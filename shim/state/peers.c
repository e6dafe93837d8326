/* peers.c: peer access in the device's ordering (see peers.h): who may
 * access whose memory, the device locks of a device and its peers, and the
 * records and waits a barrier or fence makes on the peers' streams.
 *
 * A peer's events are its own context's: each stream's event (recorded on it
 * by its own device's barriers too) and the device's peer_event, recorded on
 * its legacy stream; they are recorded with the peer's context entered and
 * waited on from the barrier's device (a stream may wait on another device's
 * event). Everything below runs under the locks cp_peers_lock took. */
#include "state/peers.h"

#include <stdlib.h>

atomic_bool cp_peers_seen; /* peers.h */

void cp_peers_enabled(int accessor, int owner) {
  if (accessor == owner || accessor < 0 || owner < 0 || accessor >= CP_MAX_DEVICES || owner >= CP_MAX_DEVICES)
    return;
  cp_device_t *dev = cp_device(owner);
  /* Before the flag: a reader that sees the flag sees the bit. */
  atomic_fetch_or_explicit(&dev->peers, 1ull << accessor, memory_order_seq_cst);
  atomic_store_explicit(&cp_peers_seen, true, memory_order_seq_cst);
}

void cp_peers_lock(cp_device_t *dev, uint64_t peers) {
  uint64_t all = peers | 1ull << cp_device_id(dev);
  for (uint64_t m = all; m; m &= m - 1) pthread_mutex_lock(&cp_devices[__builtin_ctzll(m)].lock);
}

void cp_peers_unlock(cp_device_t *dev, uint64_t peers) {
  uint64_t all = peers | 1ull << cp_device_id(dev);
  for (int i = CP_MAX_DEVICES - 1; i >= 0; i--)
    if (all & 1ull << i) pthread_mutex_unlock(&cp_devices[i].lock);
}

bool cp_peers_joined(const cp_api_t *api, uint64_t peers) {
  for (uint64_t m = peers; m; m &= m - 1) {
    cp_stream_entry_t *s, *tmp;
    HASH_ITER(hh, cp_devices[__builtin_ctzll(m)].streams, s, tmp)
    if (api->stream_capturing(s->stream) == 1) return true;
  }
  return false;
}

/* With p's context entered: events recorded on p's busy streams into ev[]
 * (at most cap), its orphans first ordered before its legacy stream. Returns
 * how many, -1 on a failure. */
static int record_on_peer(const cp_api_t *api, cp_device_t *p, cudaEvent_t *ev, int cap) {
  bool idle = true;
  if (!cp_device_order_orphans(api, p, &idle)) return -1;
  int n = 0;
  cp_stream_entry_t *s, *tmp;
  HASH_ITER(hh, p->streams, s, tmp) {
    if (!s->nonblocking || api->stream_idle(s->stream)) continue;
    if (n == cap - 1 || !s->event || api->event_record(s->event, s->stream) != 0) return -1;
    ev[n++] = s->event;
  }
  /* The legacy stream's query answers for blocking and per-thread streams. */
  if (!idle || !api->stream_idle(cudaStreamLegacy)) {
    if (!p->peer_event && api->event_create(&p->peer_event) != 0) {
      p->peer_event = NULL;
      return -1;
    }
    if (api->event_record(p->peer_event, cudaStreamLegacy) != 0) return -1;
    ev[n++] = p->peer_event;
  }
  return n;
}

bool cp_peers_order_before(const cp_api_t *api, cp_device_t *dev, uint64_t peers, bool *all_idle) {
  (void)dev; /* its context is the current one, and stays so */
  for (uint64_t m = peers; m; m &= m - 1) {
    cp_device_t *p = &cp_devices[__builtin_ctzll(m)];
    int cap = atomic_load_explicit(&p->live_nonblocking, memory_order_relaxed) + 1;
    cudaEvent_t *ev = malloc((size_t)cap * sizeof *ev);
    if (!ev) return false;
    int token = cp_device_enter(p);
    int n = record_on_peer(api, p, ev, cap);
    cp_device_leave(token);
    bool ok = n >= 0;
    for (int i = 0; ok && i < n; i++) ok = api->stream_wait(cudaStreamLegacy, ev[i]) == 0;
    free(ev);
    if (!ok) return false;
    if (n > 0) *all_idle = false;
  }
  return true;
}

bool cp_peers_wait_on(const cp_api_t *api, uint64_t peers, cudaEvent_t e) {
  bool ok = true;
  for (uint64_t m = peers; ok && m; m &= m - 1) {
    cp_device_t *p = &cp_devices[__builtin_ctzll(m)];
    int token = cp_device_enter(p);
    cp_stream_entry_t *s, *tmp;
    HASH_ITER(hh, p->streams, s, tmp) {
      if (ok && s->nonblocking) ok = api->stream_wait(s->stream, e) == 0;
    }
    ok = ok && api->stream_wait(cudaStreamLegacy, e) == 0;
    cp_device_leave(token);
  }
  return ok;
}
