/* device.c: the device table, each device's pool pointer, and the stream
 * bookkeeping a safe barrier needs (see device.h). Every CUDA call goes
 * through cp_api(). */
#include "state/device.h"

#include <stdlib.h>

#include "state/capture.h"
#include "state/nvtx.h"
#include "state/shared_limit.h"
#include "state/regions.h"
#include "state/stacks.h"
#include "backend/real.h"
#include "state/shim.h"
#include "trace.h"
#include "util.h"

cp_device_t cp_devices[CP_MAX_DEVICES]; /* device.h */
static pthread_once_t table_once = PTHREAD_ONCE_INIT;
atomic_bool cp_per_thread_stream_seen; /* device.h */
/* Bumped whenever a stream is created, destroyed or forgotten: it
 * invalidates every thread's cached answer of cp_device_stream_known. */
atomic_uint cp_stream_generation; /* device.h */
_Atomic uint64_t cp_pool_mask; /* device.h */

static void table_init(void) {
  for (int i = 0; i < CP_MAX_DEVICES; i++) {
    cp_devices[i].id = i;
    pthread_mutex_init(&cp_devices[i].lock, NULL);
    cp_order_init(&cp_devices[i].order);
  }
}

cp_device_t *cp_device(int id) {
  pthread_once(&table_once, table_init);
  return id >= 0 && id < CP_MAX_DEVICES ? &cp_devices[id] : NULL;
}

atomic_int cp_visible_devices = -1; /* device.h */

/* The table is made before the count is published: a thread that reads a
 * count of 1 may use cp_devices[0] without pthread_once (it is on every
 * allocation's path). */
static int visible_devices(void) {
  int n = atomic_load_explicit(&cp_visible_devices, memory_order_acquire);
  if (n >= 0) return n;
  n = 0;
  if (!cp_real.cudaGetDeviceCount || cp_real.cudaGetDeviceCount(&n) != cudaSuccess) {
    cp_real.cudaGetLastError();
    return 0; /* unknown: ask every time, and ask again later */
  }
  pthread_once(&table_once, table_init);
  atomic_store_explicit(&cp_visible_devices, n, memory_order_release);
  return n;
}

cp_device_t *cp_current_device_asked(void) {
  if (visible_devices() == 1) return &cp_devices[0];
  int id = 0;
  if (cp_real.cudaGetDevice(&id) != cudaSuccess) return NULL;
  return cp_device(id);
}

int cp_device_count(void) {
  const cp_api_t *api = cp_api();
  int n = 0;
  return api && api->device_count(&n) == 0 ? n : 0;
}

int cp_device_enter(const cp_device_t *dev) {
  const cp_api_t *api = cp_api();
  return api ? api->enter(dev->id) : -1;
}

void cp_device_leave(int token) {
  const cp_api_t *api = cp_api();
  if (api && token >= 0) api->leave(token);
}

cp_pool_t *cp_device_pool_or_create(cp_device_t *dev, cp_pool_t *(*create)(cp_device_t *dev)) {
  cp_pool_t *pool = atomic_load_explicit(&dev->pool, memory_order_acquire);
  if (pool) return pool;
  pthread_mutex_lock(&dev->lock);
  pool = atomic_load_explicit(&dev->pool, memory_order_relaxed);
  if (!pool) {
    pool = create(dev);
    atomic_store_explicit(&dev->pool, pool, memory_order_release);
    if (pool) atomic_fetch_or(&cp_pool_mask, 1ull << dev->id);
  }
  pthread_mutex_unlock(&dev->lock);
  return pool;
}

bool cp_device_nonblocking_live(const cp_device_t *dev) {
  cp_device_t *d = (cp_device_t *)dev;
  /* A peer's streams are not ordered by this device's legacy stream. */
  unsigned peers = atomic_load(&d->peers) != 0;
  return !cp_rule_legacy_sync_covers_device((unsigned)atomic_load(&d->live_nonblocking) + peers,
                                            (unsigned)atomic_load(&d->n_orphans));
}

int cp_device_id(const cp_device_t *dev) { return dev->id; }

cp_device_t *cp_next_device_with_pool(int *next) {
  uint64_t mask =
      *next >= CP_MAX_DEVICES ? 0 : atomic_load_explicit(&cp_pool_mask, memory_order_acquire) >> *next;
  while (mask) {
    int i = *next + __builtin_ctzll(mask);
    if (atomic_load_explicit(&cp_devices[i].pool, memory_order_acquire)) {
      *next = i + 1;
      return &cp_devices[i];
    }
    mask &= mask - 1;
  }
  *next = CP_MAX_DEVICES;
  return NULL;
}

/* Pools of reset devices. Other threads may still be inside one (a reset
 * while they allocate), so it is never freed: its device memory went with
 * the context, and what stays is its bookkeeping, kept reachable here. */
typedef struct retired_pool {
  cp_pool_t *pool;
  struct retired_pool *next;
} retired_pool_t;
static retired_pool_t *retired_pools;
static pthread_mutex_t retired_lock = PTHREAD_MUTEX_INITIALIZER;

static void retire(cp_pool_t *pool) {
  retired_pool_t *r = malloc(sizeof *r);
  if (!r) return; /* unreachable then, still never freed */
  pthread_mutex_lock(&retired_lock);
  *r = (retired_pool_t){.pool = pool, .next = retired_pools};
  retired_pools = r;
  pthread_mutex_unlock(&retired_lock);
}

uintptr_t cp_device_default_mempool(const cp_device_t *dev, unsigned *epoch) {
  cp_device_t *d = (cp_device_t *)dev;
  *epoch = atomic_load_explicit(&d->resets, memory_order_acquire);
  return atomic_load_explicit(&d->default_mempool, memory_order_relaxed);
}

void cp_device_note_default_mempool(cp_device_t *dev, uintptr_t pool, unsigned epoch) {
  pthread_mutex_lock(&dev->lock); /* cp_device_reset's: no reset between the check and the store */
  if (atomic_load_explicit(&dev->resets, memory_order_relaxed) == epoch)
    atomic_store_explicit(&dev->default_mempool, pool, memory_order_relaxed);
  pthread_mutex_unlock(&dev->lock);
}

/* A reset drops the blocks in use with the context: their call sites go
 * (else the report calls them never freed). Under the arena's lock: the
 * stacks lock comes after it. */
static void forget_site(void *ctx, const cp_walk_block_t *b) {
  (void)ctx;
  if (b->state == CP_WALK_ALLOCATED) cp_stacks_freeing(b->addr);
}

/* The blocks in use a reset dropped, for the regions' live bytes: gathered
 * under the arena's lock, given to regions.c after it (the regions lock
 * comes before the arena's: regions.h). */
typedef struct dropped {
  uintptr_t *addr;
  size_t n, cap;
} dropped_t;

static void gather_dropped(void *ctx, const cp_walk_block_t *b) {
  dropped_t *d = ctx;
  if (b->state != CP_WALK_ALLOCATED) return;
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 64;
    uintptr_t *grown = realloc(d->addr, cap * sizeof *grown);
    if (!grown) return; /* its bytes stay counted live: a record lost, not a block */
    d->addr = grown, d->cap = cap;
  }
  d->addr[d->n++] = b->addr;
}

static void forget_regions(cp_pool_t *pool) {
  dropped_t d = {0};
  cp_walk(pool, &(cp_walker_t){.block = gather_dropped, .ctx = &d});
  for (size_t i = 0; i < d.n; i++) cp_regions_freeing(d.addr[i]);
  free(d.addr);
}

void cp_device_reset(cp_device_t *dev) {
  pthread_mutex_lock(&dev->lock);
  cp_pool_t *pool = atomic_exchange(&dev->pool, NULL);
  /* The reset destroyed the device's streams and events with it. */
  CP_HASH_FREE_ALL(dev->streams, cp_stream_entry_t);
  atomic_fetch_add_explicit(&cp_stream_generation, 1, memory_order_release);
  atomic_store(&dev->live_streams, 0);
  atomic_store(&dev->live_nonblocking, 0);
  dev->barrier_event = NULL;
  dev->peer_event = NULL; /* its peers bits stay: peers.h */
  dev->n_spare = 0;
  dev->n_orphans = 0; /* gone with the context, as their streams */
  atomic_store(&dev->default_mempool, 0); /* the new context has its own */
  unsigned epoch = atomic_fetch_add_explicit(&dev->resets, 1, memory_order_release);
  pthread_mutex_unlock(&dev->lock);
  cp_order_reset(&dev->order);
  if (pool && cp_stacks_on) cp_walk(pool, &(cp_walker_t){.block = forget_site});
  if (pool && atomic_load(&cp_regions_on)) forget_regions(pool);
  if (pool) {
    cp_pool_retire(pool);
    /* Its memory went with the context, and its frees are no-ops now. */
    cp_shared_release(cp_device_id(dev), cp_reserved_now(pool));
    retire(pool);
    atomic_store_explicit(&dev->last_retired, pool, memory_order_release);
  }
  /* Its segments went with the context. A pool made since (the lock is
   * free) registers its heaps in the new epoch, which this leaves alone. */
  cp_nvtx_device_reset(cp_device_id(dev), epoch);
}

/* A new non-blocking stream is ordered after nothing, yet may be handed
 * blocks that a barrier or same-thread order made ready: make it wait for
 * everything submitted so far (an event recorded on the legacy stream, which
 * covers every blocking stream). During a capture no legacy-stream work may
 * be issued: it waits on the last barrier's event instead, which covers
 * every block a barrier made ready (a barrier that found every stream idle
 * records nothing: the work before it had completed). Called with dev->lock
 * held, and the capture lock when no_capture. */
static void order_after_past_work(const cp_api_t *api, cp_device_t *dev, cudaStream_t stream,
                                  bool no_capture) {
  if (!dev->barrier_event && api->event_create(&dev->barrier_event) != 0) {
    dev->barrier_event = NULL;
    return;
  }
  if (!no_capture || api->event_record(dev->barrier_event, cudaStreamLegacy) == 0)
    api->stream_wait(stream, dev->barrier_event);
}

void cp_device_stream_created(cp_device_t *dev, cudaStream_t stream, bool nonblocking) {
  const cp_api_t *api = cp_api();
  bool no_capture = cp_capture_none_lock(); /* lock order: capture, device */
  pthread_mutex_lock(&dev->lock);
  cp_stream_entry_t *s;
  HASH_FIND_PTR(dev->streams, &stream, s);
  if (!s && (s = calloc(1, sizeof *s))) {
    s->stream = stream;
    HASH_ADD_PTR(dev->streams, stream, s);
    atomic_fetch_add(&dev->live_streams, 1);
  } else if (s && s->nonblocking) {
    atomic_fetch_sub(&dev->live_nonblocking, 1);
  }
  atomic_fetch_add_explicit(&cp_stream_generation, 1, memory_order_release);
  if (s) {
    s->nonblocking = nonblocking;
    /* Without an event no barrier can reach a non-blocking stream (same-thread
     * reuse is already off: a stream is live; barriers fall back to fences),
     * and a destroy during a capture could not order a stream's work (none
     * may be made then: stream_destroying_on). */
    if (!s->event && (!api || api->event_create(&s->event) != 0)) s->event = NULL;
    if (nonblocking) {
      atomic_fetch_add(&dev->live_nonblocking, 1);
      if (api) order_after_past_work(api, dev, stream, no_capture);
    }
  }
  pthread_mutex_unlock(&dev->lock);
  if (no_capture) cp_capture_unlock();
}

/* The last answer of this thread: a stream-ordered program names the same
 * stream call after call, and the lock would cost a good part of a hit. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
  const cp_device_t *dev;
  cudaStream_t stream;
  unsigned generation;
  bool known;
} last_known;

bool cp_device_stream_known(cp_device_t *dev, cudaStream_t stream) {
  if (!atomic_load_explicit(&dev->live_streams, memory_order_relaxed)) return false;
  unsigned generation = atomic_load_explicit(&cp_stream_generation, memory_order_acquire);
  if (last_known.dev == dev && last_known.stream == stream && last_known.generation == generation)
    return last_known.known;
  pthread_mutex_lock(&dev->lock);
  cp_stream_entry_t *s;
  HASH_FIND_PTR(dev->streams, &stream, s);
  pthread_mutex_unlock(&dev->lock);
  last_known.dev = dev;
  last_known.stream = stream;
  last_known.generation = generation;
  last_known.known = s != NULL;
  return s != NULL;
}

/* With the device lock held: keeps ev for the next barrier or fence to
 * order before the legacy stream's work (device.h). */
static bool keep_orphan(cp_device_t *dev, cudaEvent_t ev) {
  if (dev->n_orphans == dev->cap_orphans) {
    int cap = dev->cap_orphans ? dev->cap_orphans * 2 : 8;
    cudaEvent_t *grown = realloc(dev->orphan_events, (size_t)cap * sizeof *grown);
    if (!grown) return false;
    dev->orphan_events = grown;
    dev->cap_orphans = cap;
  }
  dev->orphan_events[dev->n_orphans++] = ev;
  return true;
}

/* The legacy stream waits only for live blocking streams: work still queued
 * on a destroyed one, blocking or not, must precede the legacy stream's next
 * work, so that later barriers cover it. With no capture running the legacy
 * stream is made to wait now. While one runs no legacy-stream work may be
 * issued (a blocking stream may be capturing), so the event recorded on the
 * stream goes to the device's orphans, which the next barrier or fence
 * orders (cuda_backend.c); a stream that began a capture cannot be recorded
 * on, and its pre-capture event, which covers its work from before the
 * capture, goes there instead. Device lock held, the capture lock for
 * writing when captures. */
static void order_destroyed_stream(const cp_api_t *api, cp_device_t *dev, cp_stream_entry_t *s,
                                   bool captures) {
  cudaEvent_t ev = s->event;
  if (!captures) {
    if (!ev && api->event_create(&ev) != 0) ev = NULL;
    if (ev && api->event_record(ev, s->stream) == 0) api->stream_wait(cudaStreamLegacy, ev);
    if (ev) api->event_destroy(ev);
    return;
  }
  cudaEvent_t pre = cp_capture_take_pre_event((uintptr_t)s->stream);
  if (pre) {
    if (ev) api->event_destroy(ev);
    ev = pre;
  } else if (ev && api->stream_capturing(s->stream) == 1) {
    /* Joined to a capture (natively the destroy invalidates it): nothing may
     * be recorded on it now; its work from before the join is covered by
     * the event recorded just before its wait (cp_stream_may_join). A join
     * the shim did not see (an entry point it does not wrap) leaves none. */
    if (!s->pre_join) {
      api->event_destroy(ev);
      return;
    }
  } else if (!ev || api->event_record(ev, s->stream) != 0) {
    if (ev) api->event_destroy(ev);
    return;
  }
  if (!keep_orphan(dev, ev)) api->event_destroy(ev);
}

/* Forget the stream on whichever device knows it; true if one did. */
static bool stream_destroying_on(const cp_api_t *api, cp_device_t *dev, cudaStream_t stream, bool captures) {
  pthread_mutex_lock(&dev->order.lock); /* lock order: order, device */
  pthread_mutex_lock(&dev->lock);
  cp_stream_entry_t *s;
  HASH_FIND_PTR(dev->streams, &stream, s);
  if (s) {
    atomic_fetch_add_explicit(&cp_stream_generation, 1, memory_order_release);
    HASH_DEL(dev->streams, s);
    /* Ordered first, counted gone after: a legacy synchronisation that then
     * finds no non-blocking stream live (serve.c) was called after the
     * legacy stream's wait on the stream's work, or sees the orphan. */
    if (api) order_destroyed_stream(api, dev, s, captures);
    cp_order_stream_destroying(dev, s, captures);
    atomic_fetch_sub(&dev->live_streams, 1);
    if (s->nonblocking) atomic_fetch_sub(&dev->live_nonblocking, 1);
    free(s);
  }
  pthread_mutex_unlock(&dev->lock);
  pthread_mutex_unlock(&dev->order.lock);
  return s != NULL;
}

void cp_stream_destroying(cudaStream_t stream) {
  const cp_api_t *api = cp_api();
  bool captures = !cp_capture_none_lock(); /* lock order: capture, device */
  if (captures) cp_capture_write_lock();   /* a capture's pre-capture event may be taken */
  for (int i = 0; i < CP_MAX_DEVICES; i++) {
    cp_device_t *dev = cp_device(i);
    if (atomic_load(&dev->live_streams) && stream_destroying_on(api, dev, stream, captures)) break;
  }
  cp_capture_unlock();
}

/* Under the capture lock for reading, so that no capture begins or ends
 * across the record (the stream's own capture state is asked of CUDA: it
 * may have joined one already, and a record would then join the capture). */
void cp_stream_may_join(cudaStream_t stream) {
  if (!cp_capture_count()) return;
  const cp_api_t *api = cp_api();
  if (!api || (uintptr_t)stream <= 2) return; /* 0, legacy, per-thread: never in the table */
  cp_capture_read_lock(); /* lock order: capture, device */
  void *pre;
  for (int i = 0; i < CP_MAX_DEVICES && cp_capture_count() && !cp_capture_of((uintptr_t)stream, &pre); i++) {
    cp_device_t *dev = cp_device(i);
    if (!atomic_load(&dev->live_streams)) continue;
    pthread_mutex_lock(&dev->lock);
    cp_stream_entry_t *s;
    HASH_FIND_PTR(dev->streams, &stream, s);
    if (s && s->event && api->stream_capturing(stream) == 0 && api->event_record(s->event, stream) == 0)
      s->pre_join = true;
    pthread_mutex_unlock(&dev->lock);
    if (s) break;
  }
  cp_capture_unlock();
}

/* Whatever other captures run (a strict one included): the wait touches
 * only this stream, whose capture is over, and an event recorded on the
 * legacy stream, which no capture holds. The read lock keeps captures from
 * beginning or ending across it; a capture begun on the stream again
 * meanwhile waits when that one ends. */
void cp_stream_after_barriers(cudaStream_t stream) {
  const cp_api_t *api = cp_api();
  if (!api) return;
  cp_capture_read_lock(); /* lock order: capture, device */
  void *pre;
  for (int i = 0; i < CP_MAX_DEVICES && !cp_capture_of((uintptr_t)stream, &pre); i++) {
    cp_device_t *dev = cp_device(i);
    if (!atomic_load(&dev->live_streams)) continue;
    pthread_mutex_lock(&dev->lock);
    cp_stream_entry_t *s;
    HASH_FIND_PTR(dev->streams, &stream, s);
    if (s && dev->barrier_event) api->stream_wait(stream, dev->barrier_event);
    pthread_mutex_unlock(&dev->lock);
    if (s) break;
  }
  cp_capture_unlock();
}

void cp_note_per_thread_stream(void) {
  if (atomic_load_explicit(&cp_per_thread_stream_seen, memory_order_relaxed)) return;
  if (!atomic_exchange(&cp_per_thread_stream_seen, true) && cp_trace_enabled())
    cp_trace_extra(CP_TRACE_PER_THREAD_STREAM, 0, 0, 0);
}

void cp_device_order_stats(const cp_device_t *dev, cudapool_stats_t *out) {
  cp_device_t *d = (cp_device_t *)dev;
  out->num_order_waits = atomic_load_explicit(&d->order.waits, memory_order_relaxed);
  out->num_order_recoveries = atomic_load_explicit(&d->order.recoveries, memory_order_relaxed);
}

/* A device reset (a context released at exit, often) leaves its last pool
 * to report. */
int cp_device_stats_all(cudapool_stats_t *out, int cap) {
  pthread_once(&table_once, table_init);
  int n = 0;
  for (int i = 0; i < CP_MAX_DEVICES; i++) {
    cp_pool_t *pool = atomic_load_explicit(&cp_devices[i].pool, memory_order_acquire);
    if (!pool) pool = atomic_load_explicit(&cp_devices[i].last_retired, memory_order_acquire);
    if (!pool) continue;
    if (n < cap) {
      cp_get_stats(pool, &out[n]);
      cp_device_order_stats(&cp_devices[i], &out[n]);
    }
    n++;
  }
  return out && n > cap ? cap : n;
}
