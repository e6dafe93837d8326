/* device.h: what the shim knows about each device.
 *
 * Per device: its pool (made by serve.c on the first need), the live
 * streams the program created through the runtime or the driver (a barrier
 * must reach every non-blocking one; a stream is known once, by handle,
 * whichever layer reports it), and the events the CUDA backend records.
 * CUDA is reached through cp_api() (api.h), the runtime or the driver
 * flavour. Only this file and cuda_backend.c (which issues the barriers over
 * the stream table, under `lock`) read the fields; everything else goes
 * through the functions below.
 *
 * Locking: `lock` guards streams, events and pool creation. The
 * pool's own lock may be held when the backend takes `lock` (pool, then
 * device); code holding `lock` never calls into the pool. The counters read
 * on hot paths are atomics. */
#ifndef CUDAPOOL_SHIM_DEVICE_H
#define CUDAPOOL_SHIM_DEVICE_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uthash.h>

#include "backend/api.h"
#include "pool.h"
#include "rules.h"
#include "state/order.h"
#include "state/shim.h"

typedef struct cp_stream_entry {
  cudaStream_t stream;
  cudaEvent_t event; /* recorded on it by barriers and fences, and by its destroy */
  bool nonblocking;
  bool dirty;           /* it got work this window of the learned order (order.h) */
  uint64_t owed_window; /* the window whose owed ordering it has waited on */
  /* `event` was recorded on it just before it waited on an event while a
   * capture ran (cp_stream_may_join): it covers its work from before it
   * joined a capture, if that wait joined one. */
  bool pre_join;
  UT_hash_handle hh;
} cp_stream_entry_t;

typedef struct cp_device {
  int id;
  _Atomic(cp_pool_t *) pool;
  _Atomic(cp_pool_t *) last_retired; /* the pool before the last reset */
  pthread_mutex_t lock;
  cp_stream_entry_t *streams; /* live created streams, by handle */
  atomic_int live_streams;    /* any kind */
  atomic_int live_nonblocking;
  cudaEvent_t barrier_event; /* E, recorded on the legacy stream */
  cudaEvent_t *spare_events; /* for fences */
  int n_spare, cap_spare;
  /* Work of streams destroyed while a capture ran (no legacy-stream wait
   * could be issued then): an event recorded on each, or the pre-capture
   * event of a capture the stream began. The next barrier or fence makes
   * the legacy stream wait on them (or finds them complete) and drops them. */
  cudaEvent_t *orphan_events;
  atomic_int n_orphans; /* written under `lock`; read without it by cp_device_nonblocking_live */
  int cap_orphans;
  _Atomic uintptr_t default_mempool; /* its default memory pool once asked, else 0 */
  atomic_uint resets;                /* cudaDeviceReset and primary-context releases seen */
  cp_order_t order;                  /* the stream order learned from submitted work (order.h) */
  /* Bit i: device i may access this device's memory (peers.h). Set once,
   * never cleared. */
  _Atomic uint64_t peers;
  /* This device's context's event recorded on its legacy stream by the
   * barriers and fences of a device it may access (peers.c). */
  cudaEvent_t peer_event;
} cp_device_t;

/* The device table; entries exist for ids 0..CP_MAX_DEVICES-1. */
cp_device_t *cp_device(int id);
int cp_device_id(const cp_device_t *dev);
/* What the inline accessors below read (device.c writes them): the table;
 * bit i of cp_pool_mask: cp_devices[i] may have a pool (i < 64); the number
 * of visible devices, -1 until known, published after the table is made.
 * Inline because every allocation and free asks, and a build without
 * link-time optimisation would make each a call. */
extern cp_device_t cp_devices[CP_MAX_DEVICES];
extern _Atomic uint64_t cp_pool_mask;
extern atomic_int cp_visible_devices;

/* The device current on this thread for the runtime, or NULL when none can
 * be had (runtime wrappers only). With a single visible device it is always
 * device 0, and cudaGetDevice (a good part of a cache hit's cost) is
 * skipped. */
cp_device_t *cp_current_device_asked(void);
static inline cp_device_t *cp_current_device(void) {
  return atomic_load_explicit(&cp_visible_devices, memory_order_acquire) == 1 ? &cp_devices[0]
                                                                              : cp_current_device_asked();
}
/* The number of devices, 0 when it cannot be had (the flavour in use). */
int cp_device_count(void);
/* Its pool, or NULL while it has none. */
static inline cp_pool_t *cp_device_pool_if_any(const cp_device_t *dev) {
  return atomic_load_explicit(&((cp_device_t *)dev)->pool, memory_order_acquire);
}
/* Its pool, made by create(dev) under the device lock if it has none yet;
 * NULL if that failed (serve.c owns how pools are made). */
cp_pool_t *cp_device_pool_or_create(cp_device_t *dev, cp_pool_t *(*create)(cp_device_t *dev));
/* The first device at or after index *next whose pool exists, or NULL;
 * advances *next past it. For walking every pool. */
cp_device_t *cp_next_device_with_pool(int *next);
/* The device whose pool may exist when only one may (the common case: a
 * free's fast path), else NULL. Its pool may still be NULL. */
static inline cp_device_t *cp_sole_device_with_pool(void) {
  uint64_t mask = atomic_load_explicit(&cp_pool_mask, memory_order_acquire);
  return mask && !(mask & (mask - 1)) ? &cp_devices[__builtin_ctzll(mask)] : NULL;
}
/* Its default memory pool as last asked (0: not yet, or reset since), and
 * the answer to keep: asking is a CUDA call, and every *FromPoolAsync
 * needs it. *epoch, from the first, goes to the second: an answer asked
 * before a reset (which makes a new context, and a new default pool) is
 * not kept. */
uintptr_t cp_device_default_mempool(const cp_device_t *dev, unsigned *epoch);
void cp_device_note_default_mempool(cp_device_t *dev, uintptr_t pool, unsigned epoch);
/* Forget the device's pool without freeing it in CUDA (cudaDeviceReset);
 * threads still using it may finish their call on it. */
void cp_device_reset(cp_device_t *dev);
/* Whether work a legacy-stream synchronisation does not wait for may be
 * queued on it: a non-blocking stream the program created is live, or a
 * stream destroyed while a capture ran left an orphan event the legacy
 * stream has not been made to wait on yet, or another device may access
 * its memory (peers.h). */
bool cp_device_nonblocking_live(const cp_device_t *dev);
/* With the device lock held and its context entered: the legacy stream made
 * to wait for the work of streams destroyed while a capture ran, unless it
 * is done; each event is dropped once waited on or found complete. False
 * when a wait failed (those events are kept). Clears *all_idle when one was
 * waited on. cuda_backend.c. */
bool cp_device_order_orphans(const cp_api_t *api, cp_device_t *dev, bool *all_idle);
/* Stream bookkeeping, called after the real call succeeded. Reporting a
 * known handle again updates it (a stream one layer created and the other
 * saw, or a handle reused after a destroy the shim missed). */
void cp_device_stream_created(cp_device_t *dev, cudaStream_t stream, bool nonblocking);
/* Bumped whenever a stream is created, destroyed or forgotten: a handle may
 * come back for a new stream, so an answer cached by handle is valid only
 * for the generation it was taken in. */
extern atomic_uint cp_stream_generation;
/* Whether the program created stream on dev and has not destroyed it (a
 * stream the shim does not know may belong to another device). */
bool cp_device_stream_known(cp_device_t *dev, cudaStream_t stream);
/* Before the real cudaStreamDestroy: orders its pending work before later
 * legacy-stream work, so a barrier issued after it still covers that work:
 * at once when no capture runs, else through the device's orphan events. */
void cp_stream_destroying(cudaStream_t stream);
/* Before the program makes stream wait on an event while a capture runs
 * (the wait may join the stream to the capture: the fork/join pattern): a
 * known stream that is not capturing gets its event recorded first, which
 * then covers its work from before the join. A destroy while it is joined,
 * when nothing may be recorded on it, keeps that event for the next barrier
 * (cp_stream_destroying). No capture running: nothing (one atomic load). */
void cp_stream_may_join(cudaStream_t stream);
/* The stream (known on some device) waits for the last barrier issued there:
 * a stream that was capturing was left out of the barriers meanwhile. */
void cp_stream_after_barriers(cudaStream_t stream);
/* Key for reuse at once on this device now, 0 when it would be unsafe: the
 * learned order's key while all work since its window began went to one
 * stream (order.h: any thread may then take the block back at once), else
 * the calling thread's, only while the program has created no streams on
 * the device and uses no per-thread default stream, so all of a thread's
 * work is ordered by its own order. Inline: every allocation and free asks. */
extern atomic_bool cp_per_thread_stream_seen;
static inline uint64_t cp_device_reuse_key(cp_device_t *dev) {
  /* With pools on several devices a stream of one may touch another's
   * memory (peer access), which that device's order never sees. */
  uint64_t order_key = cp_sole_device_with_pool() ? cp_order_key(&dev->order) : 0;
  if (order_key) return order_key;
  unsigned live = (unsigned)atomic_load_explicit(&dev->live_streams, memory_order_relaxed);
  /* A peer's streams are live streams of this device's memory (peers.h). */
  live += atomic_load_explicit(&dev->peers, memory_order_relaxed) != 0;
  bool per_thread = atomic_load_explicit(&cp_per_thread_stream_seen, memory_order_relaxed);
  return cp_rule_same_thread_keys(live, per_thread) ? cp_thread_key() : 0;
}
/* The program used the per-thread default stream: same-thread reuse is off
 * from now on. */
void cp_note_per_thread_stream(void);
/* The backend table that drives CUDA for this device (cuda_backend.c). */
cp_backend_t cp_cuda_backend(cp_device_t *dev);
/* Make CUDA calls act on `dev` (cp_api()->enter): switches the current
 * device (runtime) or pushes its primary context (driver) when needed.
 * Returns a token for cp_device_leave, -1 when nothing changed. */
int cp_device_enter(const cp_device_t *dev);
void cp_device_leave(int token);
/* The learned order's counters (order.h) into out, which cp_get_stats
 * filled from dev's pool (the pool knows nothing of them). */
void cp_device_order_stats(const cp_device_t *dev, cudapool_stats_t *out);
/* A snapshot of each device that has a pool, or had one before a reset
 * (for reports), into out[0..cap); returns how many (out may be NULL). */
int cp_device_stats_all(cudapool_stats_t *out, int cap);

/* The device whose primary context is current on this thread, NULL when
 * none is (no context, or a context the program created itself: those are
 * never pooled, their memory belongs to them alone). driver_device.c. */
cp_device_t *cp_drv_current_primary(void);

#endif
