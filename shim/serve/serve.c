/* serve.c: the serving rules of serve.h. */
#include "serve/serve.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "state/capture.h"
#include "state/coop.h"
#include "state/entry_stats.h"
#include "state/live.h"
#include "state/nvtx.h"
#include "state/peers.h"
#include "state/reclaim.h"
#include "state/shared_limit.h"
#include "state/shim.h"
#include "state/snapshot.h"
#include "state/regions.h"
#include "state/stacks.h"
#include "serve/stream_order.h"
#include "parse.h"
#include "trace.h"
#include "util.h"

/* cudaStreamLegacy / CU_STREAM_LEGACY and cudaStreamPerThread /
 * CU_STREAM_PER_THREAD: the same handles at both layers. */
enum { STREAM_LEGACY = 0x1, STREAM_PER_THREAD = 0x2 };

/* ---- pools ----------------------------------------------------------------------- */

static void warn_percent_once(const char *what) {
  static atomic_bool said;
  if (!atomic_exchange(&said, true))
    fprintf(stderr,
            "cudapool: warning: cannot read the device's memory size, so %s given as a "
            "percentage is ignored\n",
            what);
}

static size_t resolve_size(const cp_size_opt_t *opt, size_t total, const char *what) {
  if (opt->percent > 0 && total == 0) {
    warn_percent_once(what);
    return 0;
  }
  return (size_t)cp_size_opt_resolve(opt, total);
}

/* The pool falls back to ordinary segments where CUDA's virtual memory
 * management is not there: said once per process. */
static void warn_if_not_expandable(cp_pool_t *pool, int device) {
  cp_config_t got;
  cp_get_config(pool, &got);
  static atomic_bool said;
  if (!got.expandable && !atomic_exchange(&said, true))
    fprintf(stderr,
            "cudapool: warning: CUDAPOOL_EXPANDABLE=1, but device %d or its driver has no virtual memory "
            "management (cuMemCreate, cuMemMap); using ordinary segments\n",
            device);
}

/* Called by the pool under its lock: the trace sees a free before the block
 * can be handed to anyone else. */
static void trace_observer(void *ctx, cp_observed_t what, uintptr_t addr, size_t size, uint64_t stream) {
  (void)ctx;
  if (!cp_trace_enabled()) return;
  switch (what) {
    case CP_OBSERVED_ALLOC: cp_trace_alloc_at(addr, size, stream, cp_stacks_on ? cp_stacks_captured_id() : -1); break;
    case CP_OBSERVED_FREE: cp_trace_free(addr, size, stream); break;
    case CP_OBSERVED_ALLOC_FAILED: cp_trace_alloc_failure(size, stream); break;
  }
}

/* Likewise for NVIDIA's tools: a block's region is gone before the block can
 * be handed out again (state/nvtx.h). */
static void nvtx_observer(cp_observed_t what, uintptr_t addr, size_t size) {
  switch (what) {
    case CP_OBSERVED_ALLOC: cp_nvtx_block_handed_out(addr, size); break;
    case CP_OBSERVED_FREE: cp_nvtx_block_freed(addr); break;
    case CP_OBSERVED_ALLOC_FAILED: cp_nvtx_mark_out_of_memory(size); break;
  }
}

/* The pool has one observer: this one hands each report to those that are on. */
static void both_observers(void *ctx, cp_observed_t what, uintptr_t addr, size_t size, uint64_t stream) {
  trace_observer(ctx, what, addr, size, stream);
  nvtx_observer(what, addr, size);
}

static void only_nvtx_observer(void *ctx, cp_observed_t what, uintptr_t addr, size_t size, uint64_t stream) {
  (void)ctx, (void)stream;
  nvtx_observer(what, addr, size);
}

/* CUDAPOOL_ARENAS=auto: one arena per CPU the process may run on, so that
 * every thread that runs at once can have its own (16 threads shared 8
 * arenas on the H200 at half the pairs/s: docs/BENCHMARKS.md). Arenas are
 * made only for threads that contend, so a program whose threads take
 * turns still has one pool. */
static unsigned arenas_auto(void) {
  cpu_set_t set;
  int n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : n > CP_ARENAS_MAX ? CP_ARENAS_MAX : (unsigned)n;
}

static cp_pool_t *create_pool(cp_device_t *dev) {
  const cp_api_t *api = cp_api();
  if (!api) return NULL;
  size_t free_bytes = 0, total = 0;
  if (api->mem_get_info(&free_bytes, &total) != 0) total = 0;
  cp_config_t cfg;
  cp_config_default(&cfg);
  size_t limit = resolve_size(&cp_opts.limit, total, "CUDAPOOL_LIMIT");
  size_t max_cached = resolve_size(&cp_opts.max_cached, total, "CUDAPOOL_MAX_CACHED");
  if (limit) cfg.limit = limit;
  cp_shared_attach(cp_device_id(dev), resolve_size(&cp_opts.shared_limit, total, "CUDAPOOL_SHARED_LIMIT"));
  cp_live_note_device(cp_device_id(dev)); /* peers may now ask it for this device (coop.h) */
  if (cp_opts.max_cached.bytes || cp_opts.max_cached.percent > 0) cfg.max_cached = max_cached;
  if (cp_opts.max_split) cfg.max_split = (size_t)cp_opts.max_split;
  if (cp_opts.mode == CP_MODE_UNSAFE_IMMEDIATE) cfg.reuse = CP_REUSE_IMMEDIATE;
  cfg.expandable = cp_opts.expandable;
  cfg.arenas = cp_opts.arenas ? cp_opts.arenas : arenas_auto();
  cfg.expandable_size = total; /* a range as large as the device: one is enough */
  cp_reclaim_start();          /* before the backend, which then carries its wake-up */
  if (cp_nvtx_on()) cp_nvtx_prepare(); /* loads the tool's library: before the pool lock exists */
  cp_backend_t be = cp_cuda_backend(dev);
  cp_pool_t *pool = NULL;
  if (cp_pool_create(&pool, cp_device_id(dev), &cfg, &be) != 0) return NULL;
  if (cfg.expandable) warn_if_not_expandable(pool, cp_device_id(dev));
  /* No observer unless one is wanted: with one, the pool serves without its
   * thread caches (pool.h). */
  if (cp_opts.trace[0] && cp_nvtx_on())
    cp_pool_set_observer(pool, both_observers, NULL);
  else if (cp_opts.trace[0])
    cp_pool_set_observer(pool, trace_observer, NULL);
  else if (cp_nvtx_on())
    cp_pool_set_observer(pool, only_nvtx_observer, NULL);
  return pool;
}

cp_pool_t *cp_serve_pool(cp_device_t *dev) { return cp_device_pool_or_create(dev, create_pool); }

/* ---- allocations and frees ------------------------------------------------------- */

/* The clause the out-of-memory lines end with: what the other cudapool
 * processes gave back (coop.h), or why they were not asked. */
static void say_cooperation(const cp_coop_result_t *co) {
  if (!cp_coop_wanted()) return;
  if (!cp_coop_on()) {
    fputs("; other cudapool processes not asked to give back: CUDAPOOL_COOP_WAIT needs CUDAPOOL_LIVE", stderr);
    return;
  }
  if (!co) return; /* not asked: the process's own limit */
  char back[32];
  cp_format_size_human(co->released, back, sizeof back);
  fprintf(stderr, "; asked %u other cudapool processes to give back: %u answered, %s came back", co->asked,
          co->answered, back);
}

/* The clause of an out-of-memory that the shared limit refused: what it
 * is and what the group holds of it. */
static void say_shared_limit(int device) {
  cp_shared_usage_t u;
  if (!cp_shared_usage(device, &u)) return;
  char limit[32], total[32];
  cp_format_size_human(u.limit, limit, sizeof limit);
  cp_format_size_human(u.total, total, sizeof total);
  if (u.alone)
    fprintf(stderr, "; shared limit %s reached (CUDAPOOL_SHARED_LIMIT, this process alone)", limit);
  else
    fprintf(stderr, "; shared limit %s reached (CUDAPOOL_SHARED_LIMIT): %u cudapool processes%s%s hold %s", limit,
            u.processes, cp_opts.shared_name[0] ? " of group " : "", cp_opts.shared_name, total);
  if (u.dying) {
    char dying[32];
    cp_format_size_human(u.dying_bytes, dying, sizeof dying);
    fprintf(stderr, " (%s of it %u exited processes' memory the driver has not freed yet)", dying, u.dying);
  }
}

/* One line on stderr for a request the pool could not serve, as PyTorch's
 * out-of-memory message gives: what was asked, allocated, reserved, cached
 * and the largest free block, what the other cudapool processes gave back
 * (co), and the snapshot file when one was written (NULL: none). At most one
 * a second; the next line counts those left out. Only on the failure path. */
static void say_out_of_memory(cp_pool_t *pool, int device, size_t size, bool shared, const cp_coop_result_t *co,
                              const char *snapshot) {
  static _Atomic uint64_t last_ns, unsaid;
  uint64_t now = cp_monotonic_ns(), last = atomic_load(&last_ns);
  if ((last && now - last < 1000000000u) || !atomic_compare_exchange_strong(&last_ns, &last, now)) {
    atomic_fetch_add(&unsaid, 1);
    return;
  }
  cudapool_stats_t s = {.size = sizeof s, .version = CUDAPOOL_STATS_VERSION};
  cp_get_stats(pool, &s);
  cp_config_t cfg;
  cp_get_config(pool, &cfg);
  char asked[32], allocated[32], reserved[32], cached[32], largest[32], limit[32] = "none";
  cp_format_size_human(size, asked, sizeof asked);
  cp_format_size_human((uint64_t)s.allocated_bytes.current, allocated, sizeof allocated);
  cp_format_size_human((uint64_t)s.reserved_bytes.current, reserved, sizeof reserved);
  cp_format_size_human((uint64_t)s.cached_bytes.current, cached, sizeof cached);
  cp_format_size_human(s.largest_free_block, largest, sizeof largest);
  if (cfg.limit != CP_NO_LIMIT) cp_format_size_human(cfg.limit, limit, sizeof limit);
  uint64_t skipped = atomic_exchange(&unsaid, 0);
  fprintf(stderr,
          "cudapool: out of memory on device %d: asked %s; allocated %s, reserved %s, cached %s "
          "(largest free block %s), limit %s",
          device, asked, allocated, reserved, cached, largest, limit);
  if (shared) say_shared_limit(device);
  say_cooperation(co);
  if (skipped) fprintf(stderr, " (%llu more since the last such line)", (unsigned long long)skipped);
  if (snapshot) fprintf(stderr, "; snapshot written to %s", snapshot);
  fputc('\n', stderr);
}

/* Served after the other processes gave back: said each time (each cost
 * every peer a cache flush, so these are rare). */
static void say_avoided(int device, size_t size, const cp_coop_result_t *co) {
  char asked[32];
  cp_format_size_human(size, asked, sizeof asked);
  fprintf(stderr, "cudapool: out of memory on device %d avoided: asked %s", device, asked);
  say_cooperation(co);
  fputc('\n', stderr);
}

/* Whether the request failed on this process's own CUDAPOOL_LIMIT, which
 * no other process's memory would change. */
static bool over_own_limit(cp_pool_t *pool, size_t size) {
  cp_config_t cfg;
  cp_get_config(pool, &cfg);
  if (cfg.limit == CP_NO_LIMIT) return false;
  cudapool_stats_t s = {.size = sizeof s, .version = CUDAPOOL_STATS_VERSION};
  cp_get_stats(pool, &s);
  return (uint64_t)s.reserved_bytes.current + size > cfg.limit;
}

/* The pool could not serve: rc is cp_tcache_alloc's. Out of memory, the
 * other cudapool processes are asked to give back (coop.h) and the
 * allocation is tried once more. */
static __attribute__((noinline)) cp_alloc_verdict_t not_served(cp_pool_t *pool, cp_device_t *dev, size_t size,
                                                               uint64_t stream, uint64_t key, uintptr_t *out,
                                                               int rc) {
  cp_coop_result_t co = {0};
  /* The pool's last attempt was refused by CUDAPOOL_SHARED_LIMIT (then it
   * fails as under CUDAPOOL_LIMIT, never forwarded to CUDA unpooled). */
  bool shared = rc == ENOMEM && cp_shared_refused();
  /* Dead processes' shares the driver still holds come back first: that
   * costs no peer anything. Each success emptied a slot: bounded. */
  while (shared && cp_shared_wait_dead(cp_device_id(dev))) {
    rc = cp_tcache_alloc(pool, size, stream, key, out);
    if (rc == 0) return CP_SERVED;
    shared = rc == ENOMEM && cp_shared_refused();
  }
  bool asked = rc == ENOMEM && cp_coop_on() && !over_own_limit(pool, size);
  if (asked) {
    cp_coop_ask(cp_device_id(dev), size, &co);
    /* Tried again once anyone answered, not only when its own answer counted
     * bytes: a peer that emptied its cache for another asker first answers
     * this one with 0, and the memory is free all the same. */
    if (co.answered) {
      rc = cp_tcache_alloc(pool, size, stream, key, out);
      shared = rc == ENOMEM && cp_shared_refused();
    }
    if (rc == 0) {
      say_avoided(cp_device_id(dev), size, &co);
      return CP_SERVED;
    }
  }
  if (rc == ENOMEM)
    say_out_of_memory(pool, cp_device_id(dev), size, shared, asked ? &co : NULL, cp_snapshot_after_oom());
  cp_config_t cfg;
  cp_get_config(pool, &cfg);
  /* Without a limit the pool gave back all it could, and a failure other
   * than out-of-memory is the device's to report: the program's own call,
   * made now, fails (or succeeds) exactly as natively. */
  if ((cfg.limit == CP_NO_LIMIT && !shared) || rc != ENOMEM) return CP_FORWARD;
  return CP_OUT_OF_MEMORY;
}

/* Served with CUDAPOOL_STACKS on: the call site is recorded, with the
 * reserved bytes of every device (the peak the report names). */
static __attribute__((noinline)) void record_site(uintptr_t addr, size_t size) {
  size_t reserved = 0;
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));) {
    cp_pool_t *pool = cp_device_pool_if_any(dev);
    if (pool) reserved += cp_reserved_now(pool);
  }
  cp_stacks_served(addr, size, reserved);
}

/* Inlined into both callers: cudaMalloc's path is one call shorter. */
static inline __attribute__((always_inline)) cp_alloc_verdict_t
alloc_for(cp_device_t *dev, size_t size, uint64_t stream, uint64_t key, uintptr_t *out) {
  /* During a strict capture the program's call must fail or succeed (and
   * invalidate the capture or not) exactly as natively. */
  if (!dev || cp_capture_strict_active()) return CP_FORWARD;
  cp_pool_t *pool = cp_device_pool_if_any(dev);
  if (!pool) pool = cp_serve_pool(dev);
  if (!pool) return CP_FORWARD;
  /* Walked before the pool is asked: the trace's allocate line, written
   * under the pool's lock, names the stack. */
  if (__builtin_expect(cp_stacks_on, 0)) cp_stacks_capture();
  int rc = cp_tcache_alloc(pool, size, stream, key, out);
  if (rc != 0) {
    cp_alloc_verdict_t verdict = not_served(pool, dev, size, stream, key, out, rc);
    if (verdict != CP_SERVED) {
      if (__builtin_expect(cp_stacks_on, 0)) cp_stacks_not_served();
      return verdict;
    }
  }
  if (__builtin_expect(cp_stacks_on, 0)) record_site(*out, size);
  if (__builtin_expect(atomic_load_explicit(&cp_regions_on, memory_order_relaxed), 0)) cp_regions_served(*out, size);
  return CP_SERVED;
}

cp_alloc_verdict_t cp_serve_alloc(cp_device_t *dev, size_t size, uintptr_t *out) {
  return dev ? alloc_for(dev, size, CP_STREAM_DEVICE, cp_device_reuse_key(dev), out) : CP_FORWARD;
}

cp_alloc_verdict_t cp_serve_alloc_for(cp_device_t *dev, size_t size, uint64_t stream, uint64_t key,
                                      uintptr_t *out) {
  return alloc_for(dev, size, stream, key, out);
}

/* The device whose pool owns p, or NULL. A pointer-map lookup: cheaper
 * than cp_serve_block_of's segment walk. */
static cp_device_t *owner_of(uintptr_t p) {
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));) {
    cp_pool_t *pool = cp_device_pool_if_any(dev);
    if (pool && cp_block_size(pool, p)) return dev;
  }
  return NULL;
}

bool cp_serve_owned(uintptr_t p) { return owner_of(p) != NULL; }

static inline __attribute__((always_inline)) int free_in_device_pool(cp_device_t *dev, uintptr_t p,
                                                                     uint64_t stream, unsigned flags) {
  cp_pool_t *pool = cp_device_pool_if_any(dev);
  uint64_t key = stream == CP_STREAM_DEVICE ? cp_device_reuse_key(dev) : CP_KEY_STREAM_ORDERED;
  return pool ? cp_tcache_free_on_stream(pool, p, stream, key, flags) : ENOENT;
}

/* free_in_pools with several devices' pools. */
static __attribute__((noinline)) int free_in_every_pool(uintptr_t p, uint64_t stream, unsigned flags) {
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));) {
    int rc = free_in_device_pool(dev, p, stream, flags);
    if (rc != ENOENT) return rc;
  }
  return ENOENT;
}

/* Frees p in whichever pool holds it: 0, EINVAL (inside a segment but not a
 * live block's start) or ENOENT (no pool's). stream: the pool's tag of the
 * stream the free is ordered on (stream_order.h), or CP_STREAM_DEVICE for a
 * free ordered on none, which the thread may reuse at once where the reuse
 * rules allow; a stream-ordered free is reusable at once on its stream. */
static inline int free_in_pools(uintptr_t p, uint64_t stream, unsigned flags) {
  if (__builtin_expect(cp_stacks_on, 0)) cp_stacks_freeing(p);
  if (__builtin_expect(atomic_load_explicit(&cp_regions_on, memory_order_relaxed), 0)) cp_regions_freeing(p);
  /* One device with a pool (nearly every program): no walk. */
  cp_device_t *sole = cp_sole_device_with_pool();
  return sole ? free_in_device_pool(sole, p, stream, flags) : free_in_every_pool(p, stream, flags);
}

int cp_serve_free(const cp_layer_calls_t *layer, uintptr_t p) {
  if (cp_capture_strict_active() && cp_serve_owned(p)) {
    int rc = layer->capture_probe(p);
    if (rc != 0) return rc;
  }
  unsigned flags = 0;
  if (cp_opts.mode == CP_MODE_SYNC) {
    /* The program may use the free as a barrier for host reads. It waits
     * for the current device only, not for peers (state/peers.h): with
     * peer access the block stays pending. */
    int rc = layer->synchronize();
    if (rc != 0) return rc;
    if (!atomic_load_explicit(&cp_peers_seen, memory_order_acquire)) flags = CP_FREE_DEVICE_IDLE;
  }
  int rc = free_in_pools(p, CP_STREAM_DEVICE, flags);
  return rc == 0 ? 0 : layer->real_free(rc == EINVAL ? p | 1 : p);
}

/* A special handle, or a stream some device's table holds. */
static bool stream_known(uintptr_t stream) {
  if (cp_serve_special_stream(stream)) return true;
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));)
    if (cp_device_stream_known(dev, (cudaStream_t)stream)) return true;
  return false;
}

/* Whether p is a pool block and the stream may be of another device than its own: a
 * barrier reaches only the streams of the block's own device. With one
 * visible device never; else a special handle is the current device's, a
 * created stream is known on its device's table, and a stream the shim does
 * not know may be anyone's. */
static bool stream_of_another_device(uintptr_t p, uintptr_t stream) {
  /* Asked of the flavour in use (a driver-level program has no runtime to
   * ask), once it has answered. */
  static atomic_int devices;
  int n = atomic_load_explicit(&devices, memory_order_relaxed);
  if (n == 0 && (n = cp_device_count()) > 0) atomic_store_explicit(&devices, n, memory_order_relaxed);
  if (n == 1) return false;
  cp_device_t *owner = owner_of(p);
  if (!owner) return false; /* no pool's: CUDA's call */
  if (cp_serve_special_stream(stream)) {
    const cp_api_t *api = cp_api();
    int current = -1;
    return !api || api->current_device(&current) != 0 || current != cp_device_id(owner);
  }
  return !cp_device_stream_known(owner, (cudaStream_t)stream);
}

int cp_serve_free_async(const cp_async_calls_t *layer, uintptr_t p, uintptr_t stream) {
  uintptr_t asked = layer->per_thread && stream == 0 ? STREAM_PER_THREAD : stream;
  /* Every capture begins through a call the shim sees, so with none in
   * progress a stream the shim knows is not capturing; CUDA is asked
   * otherwise (it also judges a stream the shim does not know). */
  if ((cp_capture_count() > 0 || !stream_known(stream)) && cp_serve_owned(p)) {
    /* A bad stream fails as natively, and the block stays the program's. */
    bool capturing = false;
    int rc = layer->capturing(asked, &capturing);
    if (rc != 0 || capturing) return rc;
  }
  uint64_t tag = cp_stream_tag(stream, layer->per_thread);
  unsigned flags = 0;
  if (stream_of_another_device(p, stream)) {
    /* No barrier of the block's device orders that stream's work: the free
     * waits for the stream, and every use the program ordered before it is
     * then done. During a strict capture the wait could break it: the block
     * stays the program's, as on a capturing stream (DESIGN.md). */
    if (cp_capture_strict_active()) return 0;
    int rc = layer->synchronize(asked);
    if (rc != 0) return rc;
    tag = CP_STREAM_DEVICE;
    flags = CP_FREE_DEVICE_IDLE;
  }
  int rc = free_in_pools(p, tag, flags);
  return rc == 0 ? 0 : layer->free_async(rc == EINVAL ? p | 1 : p, stream);
}

int cp_serve_block_of(uintptr_t p, cp_block_info_t *out) {
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));) {
    cp_pool_t *pool = cp_device_pool_if_any(dev);
    int rc = pool ? cp_block_find(pool, p, out) : ENOENT;
    if (rc != ENOENT) return rc;
  }
  return ENOENT;
}

bool cp_serve_ipc_exportable(uintptr_t p) {
  cp_block_info_t b;
  int rc = cp_serve_block_of(p, &b);
  /* Pool memory no live block holds (freed, past a block's request) is no
   * allocation of the program's: the export fails as natively, no word. */
  if (rc != 0) return rc == ENOENT;
  if (b.segment_start) return true;
  static atomic_bool said;
  if (b.expandable && !atomic_exchange(&said, true))
    fprintf(stderr,
            "cudapool: warning: cannot export %#lx through CUDA IPC: it is in an expandable segment "
            "(CUDAPOOL_EXPANDABLE=1), virtual memory that CUDA IPC cannot export; the call fails (run "
            "this program without CUDAPOOL_EXPANDABLE to use IPC)\n",
            (unsigned long)p);
  else if (!atomic_exchange(&said, true))
    fprintf(stderr,
            "cudapool: warning: cannot export %#lx through CUDA IPC: it is part of a pooled "
            "segment, so the peer would see other memory; the call fails (run this program "
            "with CUDAPOOL_DISABLE=1 to use IPC)\n",
            (unsigned long)p);
  return false;
}

/* ---- synchronisations ------------------------------------------------------------ */

cp_sync_t cp_serve_sync_begin(cp_device_t *dev) {
  cp_sync_t s = {.dev = dev, .pool = dev ? cp_device_pool_if_any(dev) : NULL};
  if (s.pool) cp_sync_mark(s.pool, &s.mark);
  return s;
}

void cp_serve_synced_stream(const cp_sync_t *s, bool ok, uintptr_t stream, bool per_thread_api) {
  if (stream == STREAM_PER_THREAD || (per_thread_api && stream == 0)) cp_note_per_thread_stream();
  if (s->dev && cp_trace_enabled()) cp_trace_sync_stream((uint64_t)stream);
  if (!ok || !s->pool) return;
  uint64_t tag = cp_stream_tag(stream, per_thread_api);
  bool legacy = tag == CP_STREAM_TAG_LEGACY, nonblocking_live = cp_device_nonblocking_live(s->dev);
  cp_synced_stream(s->pool, &s->mark, tag, legacy, nonblocking_live);
  /* The legacy stream's own stream-ordered frees, when it covered less. */
  if (legacy && nonblocking_live) cp_sync_stream(s->pool, &s->mark, tag);
}

void cp_serve_synced_device(const cp_sync_t *s, bool ok) {
  if (s->dev && cp_trace_enabled()) cp_trace_sync_device();
  /* A device with peers (state/peers.h): its synchronisation does not wait
   * for their work on its blocks, so it completes nothing. */
  if (ok && s->pool && !cp_device_peers(s->dev)) cp_sync_device(s->pool, &s->mark);
}

/* ---- streams --------------------------------------------------------------------- */

bool cp_serve_special_stream(uintptr_t stream) {
  return stream == 0 || stream == STREAM_LEGACY || stream == STREAM_PER_THREAD;
}

void cp_serve_stream_created(cp_device_t *dev, uintptr_t stream, bool nonblocking) {
  if (cp_trace_enabled()) cp_trace_extra(CP_TRACE_STREAM_CREATE, 0, nonblocking, stream);
  cp_device_stream_created(dev, (cudaStream_t)stream, nonblocking);
}

void cp_serve_stream_destroying(uintptr_t stream) {
  if (cp_trace_enabled()) cp_trace_extra(CP_TRACE_STREAM_DESTROY, 0, 0, stream);
  cp_stream_destroying((cudaStream_t)stream);
}

/* A capture dies with the stream that began it. */
void cp_serve_stream_destroyed(uintptr_t stream, bool ok) {
  if (ok) cp_capture_forget_stream(stream);
}

void cp_serve_capture_ended(bool over, uintptr_t stream) {
  cp_capture_end_done(over, stream);
  if (over) cp_stream_after_barriers((cudaStream_t)stream);
}

/* ---- memory info ----------------------------------------------------------------- */

void cp_serve_meminfo(cp_device_t *dev, bool create, size_t *free_bytes, size_t *total_bytes) {
  cp_pool_t *pool = !dev ? NULL : create ? cp_serve_pool(dev) : cp_device_pool_if_any(dev);
  if (!pool) return;
  cudapool_stats_t s;
  cp_get_stats(pool, &s);
  cp_config_t cfg;
  cp_get_config(pool, &cfg);
  size_t cached = (size_t)s.cached_bytes.current, allocated = (size_t)s.allocated_bytes.current;
  size_t free_now = *free_bytes + cached; /* cached memory is free to the program */
  if (cfg.limit != CP_NO_LIMIT) {
    size_t under_limit = cfg.limit > allocated ? cfg.limit - allocated : 0;
    if (free_now > under_limit) free_now = under_limit;
    if (*total_bytes > cfg.limit) *total_bytes = cfg.limit;
  }
  cp_shared_usage_t u;
  if (cp_shared_usage(cp_device_id(dev), &u)) {
    /* What the others hold is gone; this process's own cache is free to it
     * (as under CUDAPOOL_LIMIT). */
    uint64_t others = u.total > u.mine ? u.total - u.mine : 0, taken = others + allocated;
    uint64_t room = u.limit > taken ? u.limit - taken : 0;
    if (free_now > room) free_now = (size_t)room;
    if (*total_bytes > u.limit) *total_bytes = (size_t)u.limit;
  }
  *free_bytes = free_now < *total_bytes ? free_now : *total_bytes;
}
