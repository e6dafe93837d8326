/* cuda_backend.c: the core's backend table over CUDA, the runtime's or the
 * driver's (whichever flavour cp_api() picked, api.h).
 *
 * alloc/free are cudaMalloc/cudaFree (cuMemAlloc/cuMemFree) on the pool's
 * device (its primary context, for the driver). The barrier is
 * the asynchronous device-wide ordering point of docs/DESIGN.md: an event
 * recorded on each live non-blocking stream, the legacy stream made to wait
 * on those, an event E recorded on the legacy stream, and each non-blocking
 * stream made to wait on E. The legacy stream already orders every blocking
 * stream (per-thread default streams included), so after it all future work
 * on every known stream runs after all past work: no host wait. A stream
 * whose work has all completed (a query, cheaper than the record and the
 * wait: the many streams cuDNN creates are mostly idle) needs no event: its
 * past work can no longer touch anything; it still waits on E, since its
 * future work must follow everyone else's past work, unless the legacy
 * stream is idle as well (its query reports the work of blocking and
 * per-thread default streams too: docs/DESIGN.md): then nothing from before the barrier is
 * left running, and the queries are the whole barrier. A fence is the same
 * events, queried or waited on later. Neither may touch a capturing
 * stream (it would join or break the capture), nor the legacy stream while
 * a blocking stream captures. So during captures they are issued only when
 * every capture is relaxed and on a non-blocking stream of this device: the
 * capturing stream is then represented by the event recorded on it just
 * before its capture began (capture.h), and waits for the last barrier when
 * its capture ends; and no stream has joined a capture through an event
 * wait (captures_allow_ordering). Otherwise they are refused, and the pool
 * falls back on releasing segments that hold no live block. Work of streams
 * destroyed while a capture ran is ordered through the device's orphan
 * events (device.h), which the legacy stream waits on before its record.
 *
 * The page entries, for expandable segments, are the driver's virtual
 * memory calls whatever the flavour (cuda_vmm.c).
 *
 * Under CUDAPOOL_SHARED_LIMIT (shared_limit.h) every segment and every
 * mapped run of pages is claimed from the shared budget before CUDA is
 * asked for it, and released once CUDA took it back: a refused claim is an
 * ENOMEM like a full device's, so the pool's own retries (its cache
 * released) come first.
 *
 * With peer access (peers.h) the barriers and fences of a device reach its
 * peers' streams too: their work is ordered before the legacy stream's
 * record, and a barrier makes them wait on E.
 *
 * Called by the core with the pool lock held; takes the device lock (and
 * its peers', in device order). */
#include <errno.h>
#include <stdlib.h>

#include "state/capture.h"
#include "backend/cuda_vmm.h"
#include "state/device.h"
#include "state/nvtx.h"
#include "state/peers.h"
#include "state/reclaim.h"
#include "state/shared_limit.h"
#include "trace.h"

/* The flavour cannot change once a pool exists (cp_api() picks once). */
#define API() cp_api()

static int cuda_alloc(void *ctx, int device, size_t size, uintptr_t *out) {
  (void)device;
  cp_device_t *dev = ctx;
  if (!cp_shared_claim(cp_device_id(dev), size)) return ENOMEM;
  int token = cp_device_enter(dev);
  int rc = API()->mem_alloc(size, out);
  cp_device_leave(token);
  if (rc != 0) cp_shared_release(cp_device_id(dev), size);
  /* Replay hands the same addresses out: best-fit ties break by address. */
  if (rc == 0 && cp_trace_enabled()) cp_trace_extra(CP_TRACE_SEGMENT_ALLOC, *out, size, 0);
  if (rc == 0 && cp_nvtx_on())
    cp_nvtx_segment_added(cp_device_id(dev), atomic_load_explicit(&dev->resets, memory_order_acquire), *out, size);
  return rc;
}

static void cuda_free(void *ctx, int device, uintptr_t addr, size_t size) {
  (void)device;
  if (cp_nvtx_on()) cp_nvtx_segment_removed(addr);
  int token = cp_device_enter(ctx);
  int rc = API()->mem_free(addr);
  cp_device_leave(token);
  /* A free CUDA refused (at exit, once the runtime or the driver is torn
   * down: cudaErrorCudartUnloading, CUDA_ERROR_DEINITIALIZED) left the
   * memory where it was: it stays this process's share until the process
   * is gone (shared_limit.h: a dead process's share waits for NVML). */
  if (rc == 0) cp_shared_release(cp_device_id(ctx), size);
}

/* An expandable segment is no NVTX heap: compute-sanitizer refuses a heap
 * over reserved, partly unmapped addresses ("nvtxMemHeapRegister failed:
 * one or more of the parameters is invalid", then every region in it,
 * measured on the H100), so its blocks are left to what the tool sees of
 * the mapped pages. */
static int cuda_reserve(void *ctx, int device, size_t size, uintptr_t *out) {
  return cp_vmm_reserve(ctx, device, size, out);
}

static void cuda_unreserve(void *ctx, int device, uintptr_t addr, size_t size) {
  cp_vmm_unreserve(ctx, device, addr, size);
}

static int cuda_map(void *ctx, int device, uintptr_t addr, size_t size) {
  int id = cp_device_id(ctx);
  if (!cp_shared_claim(id, size)) return ENOMEM;
  int rc = cp_vmm_map(ctx, device, addr, size);
  if (rc != 0) cp_shared_release(id, size);
  return rc;
}

static void cuda_unmap(void *ctx, int device, uintptr_t addr, size_t size) {
  /* Pages the driver refused to unmap stay this process's share (as a
   * refused free: cuda_free). */
  cp_shared_release(cp_device_id(ctx), cp_vmm_unmap(ctx, device, addr, size));
}

static bool ensure_event(const cp_api_t *api, cudaEvent_t *ev) { return *ev || api->event_create(ev) == 0; }

/* With the device lock held: whether stream s is capturing, and the event
 * that covers its work from before the capture. */
static bool capturing(const cp_stream_entry_t *s, void **pre_event) {
  return cp_capture_count() && cp_capture_of((uintptr_t)s->stream, pre_event);
}

/* Ordering work may go on while captures run if every one is relaxed, on a
 * non-blocking stream of this device, with its pre-capture event, and no
 * other stream the shim knows has joined one (by waiting on an event
 * recorded in a capture: CUDA says so, asked of each stream, only while a
 * capture runs): then the legacy stream is free to use (it covers no
 * capturing stream), and the capturing streams are left alone, their
 * earlier work covered by their pre-capture events. A joined stream has no
 * such event standing in for it (the shim sees its wait, but only CUDA
 * knows whether the wait joined a capture), and a record or wait on it would
 * join the barrier to the capture or break it: ordering waits for its
 * capture to end. */
static bool captures_allow_ordering(cp_device_t *dev, uint64_t peers) {
  unsigned n = (unsigned)cp_capture_count(), covered = 0;
  bool joined = false;
  if (n == 0) return cp_rule_ordering_allowed(0, 0, false);
  /* A capture on a peer's stream is not covered (it counts in n); a peer's
   * stream that joined one would be recorded on and waited on. */
  if (peers && cp_peers_joined(API(), peers)) return cp_rule_ordering_allowed(n, covered, true);
  cp_stream_entry_t *s, *tmp;
  void *pre;
  HASH_ITER(hh, dev->streams, s, tmp) {
    if (capturing(s, &pre))
      covered += s->nonblocking;
    else if (API()->stream_capturing(s->stream) == 1)
      joined = true;
    if (joined) break;
  }
  return cp_rule_ordering_allowed(n, covered, joined);
}

bool cp_device_order_orphans(const cp_api_t *api, cp_device_t *dev, bool *all_idle) {
  bool ok = true;
  int kept = 0;
  for (int i = 0; i < dev->n_orphans; i++) {
    cudaEvent_t ev = dev->orphan_events[i];
    if (!api->event_query(ev)) {
      *all_idle = false;
      if (!ok || api->stream_wait(cudaStreamLegacy, ev) != 0) {
        ok = false;
        dev->orphan_events[kept++] = ev;
        continue;
      }
    }
    api->event_destroy(ev);
  }
  dev->n_orphans = kept;
  return ok;
}

/* Ordering work (barriers, fences) is issued in the device's context, under
 * the device lock and its peers' (peers.h: *peers, read once here), and only
 * where captures allow it (false: not now). */
static bool ordering_begin(cp_device_t *dev, int *token, uint64_t *peers) {
  if (!cp_capture_relaxed_lock()) return false;
  *peers = cp_device_peers(dev);
  *token = cp_device_enter(dev);
  cp_peers_lock(dev, *peers);
  if (captures_allow_ordering(dev, *peers)) return true;
  cp_peers_unlock(dev, *peers);
  cp_device_leave(*token);
  cp_capture_unlock();
  return false;
}

static void ordering_end(cp_device_t *dev, int token, uint64_t peers) {
  cp_peers_unlock(dev, peers);
  cp_device_leave(token);
  cp_capture_unlock();
}

static int cuda_barrier(void *ctx, int device) {
  (void)device;
  cp_device_t *dev = ctx;
  /* All work since the order's window began on one stream: nothing to
   * record or wait on now, the other streams are ordered at their first
   * work (order.h). */
  if (cp_order_virtual_barrier(dev)) {
    if (cp_nvtx_on()) cp_nvtx_mark_barrier(); /* the moment pending blocks became reusable */
    return 0;
  }
  int token;
  uint64_t peers;
  if (!ordering_begin(dev, &token, &peers)) return -1;
  const cp_api_t *api = API();
  bool ok = ensure_event(api, &dev->barrier_event);
  bool all_idle = ok; /* every non-blocking stream's past work is done */
  cp_stream_entry_t *s, *tmp;
  void *pre;
  HASH_ITER(hh, dev->streams, s, tmp) {
    if (!ok || !s->nonblocking) continue;
    if (capturing(s, &pre)) {
      all_idle = false;
      ok = api->stream_wait(cudaStreamLegacy, pre) == 0;
    } else if (!api->stream_idle(s->stream)) {
      all_idle = false;
      ok = s->event && api->event_record(s->event, s->stream) == 0 &&
           api->stream_wait(cudaStreamLegacy, s->event) == 0;
    }
  }
  ok = ok && cp_device_order_orphans(api, dev, &all_idle);
  ok = ok && (!peers || cp_peers_order_before(api, dev, peers, &all_idle));
  /* The legacy stream idle too: no work from before the barrier is left to
   * order anything after. Only with non-blocking streams (or peers) live,
   * where the query saves a record and a wait per stream (half the
   * barrier's cost on the H200, docs/BENCHMARKS.md); without them the
   * barrier is one record. */
  if (ok && all_idle && (atomic_load_explicit(&dev->live_nonblocking, memory_order_relaxed) > 0 || peers) &&
      api->stream_idle(cudaStreamLegacy)) {
    ordering_end(dev, token, peers);
    return 0;
  }
  ok = ok && api->event_record(dev->barrier_event, cudaStreamLegacy) == 0;
  /* A capturing stream waits when its capture ends (cp_stream_after_barriers). */
  HASH_ITER(hh, dev->streams, s, tmp) {
    if (ok && s->nonblocking && !capturing(s, &pre))
      ok = api->stream_wait(s->stream, dev->barrier_event) == 0;
  }
  /* A peer's later work may touch a block handed out again too. */
  ok = ok && (!peers || cp_peers_wait_on(api, peers, dev->barrier_event));
  ordering_end(dev, token, peers);
  if (ok && cp_nvtx_on()) cp_nvtx_mark_barrier();
  return ok ? 0 : -1;
}

static unsigned cuda_barrier_cost(void *ctx, int device) {
  (void)device;
  cp_device_t *dev = ctx;
  if (cp_rule_order_reuses_at_once(cp_order_learning() && cp_sole_device_with_pool(),
                                   CP_ORDER_MODE(atomic_load_explicit(&dev->order.state, memory_order_relaxed)),
                                   (unsigned)atomic_load_explicit(&cp_order_captures, memory_order_relaxed)))
    return 1;
  return cp_rule_barrier_cost((unsigned)atomic_load_explicit(&dev->live_nonblocking, memory_order_relaxed));
}

/* A fence: one event per live non-blocking stream plus one on the legacy
 * stream; complete when all are. `resets` is the device's reset count when
 * it was recorded: a fence of a context that is gone (cudaDeviceReset, a
 * primary context reset or released: cp_device_reset) belongs to the
 * retired pool of that context, and its events died with it. A thread that
 * was inside the old pool at the reset may still query, wait for or
 * release it: it is then complete (nothing of that context runs any more),
 * and its handles never reach the new context's spare events, where they
 * could name an event the new context made meanwhile (two owners of one
 * event: a fence recorded on one stream, then re-recorded on another, would
 * no longer cover the first). */
typedef struct cuda_fence {
  unsigned resets;
  int n;
  cudaEvent_t events[];
} cuda_fence_t;

static bool fence_stale(cp_device_t *dev, const cuda_fence_t *f) {
  return atomic_load_explicit(&dev->resets, memory_order_acquire) != f->resets;
}

static cudaEvent_t take_event(cp_device_t *dev) {
  if (dev->n_spare) return dev->spare_events[--dev->n_spare];
  cudaEvent_t ev = NULL;
  return ensure_event(API(), &ev) ? ev : NULL;
}

static void give_event(cp_device_t *dev, cudaEvent_t ev) {
  if (dev->n_spare == dev->cap_spare) {
    int cap = dev->cap_spare ? dev->cap_spare * 2 : 16;
    cudaEvent_t *grown = realloc(dev->spare_events, (size_t)cap * sizeof *grown);
    if (!grown) {
      API()->event_destroy(ev);
      return;
    }
    dev->spare_events = grown;
    dev->cap_spare = cap;
  }
  dev->spare_events[dev->n_spare++] = ev;
}

static int cuda_fence_record(void *ctx, int device, cp_fence_t *out) {
  (void)device;
  cp_device_t *dev = ctx;
  const cp_api_t *api = API();
  int token;
  uint64_t peers;
  if (!ordering_begin(dev, &token, &peers)) return -1;
  int n = atomic_load(&dev->live_nonblocking) + 1;
  cuda_fence_t *f = malloc(sizeof *f + (size_t)n * sizeof f->events[0]);
  bool ok = f != NULL;
  if (f) {
    f->n = 0;
    f->resets = atomic_load_explicit(&dev->resets, memory_order_relaxed); /* under dev->lock, as the reset */
  }
  cp_stream_entry_t *s, *tmp;
  void *pre;
  HASH_ITER(hh, dev->streams, s, tmp) {
    if (!ok || !s->nonblocking || f->n == n - 1) continue;
    /* The legacy event recorded below then covers the pre-capture work. */
    if (capturing(s, &pre)) {
      ok = api->stream_wait(cudaStreamLegacy, pre) == 0;
      continue;
    }
    if (api->stream_idle(s->stream)) continue;
    cudaEvent_t ev = take_event(dev);
    ok = ev && api->event_record(ev, s->stream) == 0;
    if (ev) f->events[f->n++] = ev;
  }
  bool all_idle = true; /* a fence records on the legacy stream whatever it says */
  ok = ok && cp_device_order_orphans(api, dev, &all_idle);
  /* The legacy event recorded below then covers the peers' work. */
  ok = ok && (!peers || cp_peers_order_before(api, dev, peers, &all_idle));
  if (ok) {
    cudaEvent_t ev = take_event(dev);
    ok = ev && api->event_record(ev, cudaStreamLegacy) == 0;
    if (ev) f->events[f->n++] = ev;
  }
  if (!ok && f) {
    for (int i = 0; i < f->n; i++) give_event(dev, f->events[i]);
    free(f);
    f = NULL;
  }
  ordering_end(dev, token, peers);
  if (!f) return -1;
  *out = f;
  return 0;
}

/* Events are queried and waited for in their device's context: the driver
 * flavour needs one current, and the calling thread may have none. */
static int cuda_fence_query(void *ctx, int device, cp_fence_t fence) {
  (void)device;
  const cp_api_t *api = API();
  cuda_fence_t *f = fence;
  if (fence_stale(ctx, f)) return 1;
  int token = cp_device_enter(ctx), done = 1;
  for (int i = 0; i < f->n && done; i++) done = api->event_query(f->events[i]);
  cp_device_leave(token);
  return done;
}

static int cuda_fence_wait(void *ctx, int device, cp_fence_t fence) {
  (void)device;
  const cp_api_t *api = API();
  cuda_fence_t *f = fence;
  if (fence_stale(ctx, f)) return 0;
  if (!cp_capture_relaxed_lock()) return -1;
  int token = cp_device_enter(ctx), rc = 0;
  for (int i = 0; i < f->n && rc == 0; i++) rc = api->event_sync(f->events[i]);
  cp_device_leave(token);
  cp_capture_unlock();
  return rc;
}

static void cuda_fence_release(void *ctx, int device, cp_fence_t fence) {
  (void)device;
  cp_device_t *dev = ctx;
  cuda_fence_t *f = fence;
  pthread_mutex_lock(&dev->lock); /* cp_device_reset's: stale or not, not between */
  if (!fence_stale(dev, f))
    for (int i = 0; i < f->n; i++) give_event(dev, f->events[i]);
  pthread_mutex_unlock(&dev->lock);
  free(f);
}

cp_backend_t cp_cuda_backend(cp_device_t *dev) {
  return (cp_backend_t){
      .ctx = dev,
      .alloc = cuda_alloc,
      .free = cuda_free,
      .barrier = cuda_barrier,
      .barrier_cost = cuda_barrier_cost,
      .fence_record = cuda_fence_record,
      .fence_query = cuda_fence_query,
      .fence_wait = cuda_fence_wait,
      .fence_release = cuda_fence_release,
      .page_size = cp_vmm_page_size,
      .reserve = cuda_reserve,
      .unreserve = cuda_unreserve,
      .map = cuda_map,
      .unmap = cuda_unmap,
      .freed = cp_reclaim_on() ? cp_reclaim_freed : NULL,
  };
}
