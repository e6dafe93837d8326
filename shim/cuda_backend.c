/* cuda_backend.c: the core's backend table over the real CUDA runtime.
 *
 * alloc/free are cudaMalloc/cudaFree on the pool's device. The barrier is
 * the asynchronous device-wide ordering point of docs/DESIGN.md: an event
 * recorded on each live non-blocking stream, the legacy stream made to wait
 * on those, an event E recorded on the legacy stream, and each non-blocking
 * stream made to wait on E. The legacy stream already orders every blocking
 * stream (per-thread default streams included), so after it all future work
 * on every known stream runs after all past work: no host wait. A fence is
 * the same events, queried or waited on later. Neither is ever issued while
 * a capture is in progress on the device: it would join or break it.
 *
 * Called by the core with the pool lock held; takes the device lock. */
#include <errno.h>
#include <stdlib.h>

#include "device.h"
#include "real.h"

/* Errors the shim causes itself are cleared from the program's
 * cudaGetLastError() (cp_real.cudaGetLastError() after a failed call). */

static __thread __attribute__((tls_model("initial-exec"))) cudaError_t last_alloc_error;

cudaError_t cp_cuda_last_alloc_error(void) { return last_alloc_error; }

static int cuda_alloc(void *ctx, int device, size_t size, uintptr_t *out) {
  (void)device;
  cp_device_t *dev = ctx;
  int prev = cp_device_enter(dev);
  void *p = NULL;
  cudaError_t rc = cp_real.cudaMalloc(&p, size);
  cp_device_leave(prev);
  last_alloc_error = rc;
  if (rc != cudaSuccess) {
    /* The pool may still succeed (after releasing cached segments): the
     * program must not see this attempt's error then. The shim sets the
     * final error itself when the allocation fails for good. */
    cp_real.cudaGetLastError();
    return rc == cudaErrorMemoryAllocation ? ENOMEM : EIO;
  }
  *out = (uintptr_t)p;
  return 0;
}

static void cuda_free(void *ctx, int device, uintptr_t addr, size_t size) {
  (void)ctx, (void)device, (void)size;
  if (cp_real.cudaFree((void *)addr) != cudaSuccess) cp_real.cudaGetLastError();
}

static bool ensure_event(cudaEvent_t *ev) {
  return *ev || cp_real.cudaEventCreateWithFlags(ev, cudaEventDisableTiming) == cudaSuccess;
}

static int cuda_barrier(void *ctx, int device) {
  (void)device;
  cp_device_t *dev = ctx;
  if (!cp_capture_none_lock()) return -1;
  int prev = cp_device_enter(dev);
  pthread_mutex_lock(&dev->lock);
  bool ok = ensure_event(&dev->barrier_event);
  cp_stream_entry_t *s, *tmp;
  HASH_ITER(hh, dev->streams, s, tmp) {
    if (!ok || !s->nonblocking) continue;
    ok = s->event && cp_real.cudaEventRecord(s->event, s->stream) == cudaSuccess &&
         cp_real.cudaStreamWaitEvent(cudaStreamLegacy, s->event, 0) == cudaSuccess;
  }
  ok = ok && cp_real.cudaEventRecord(dev->barrier_event, cudaStreamLegacy) == cudaSuccess;
  HASH_ITER(hh, dev->streams, s, tmp) {
    if (ok && s->nonblocking) ok = cp_real.cudaStreamWaitEvent(s->stream, dev->barrier_event, 0) == cudaSuccess;
  }
  pthread_mutex_unlock(&dev->lock);
  cp_device_leave(prev);
  cp_capture_unlock();
  if (!ok) cp_real.cudaGetLastError();
  return ok ? 0 : -1;
}

static unsigned cuda_barrier_cost(void *ctx, int device) {
  (void)device;
  cp_device_t *dev = ctx;
  return 1u + (unsigned)atomic_load_explicit(&dev->live_nonblocking, memory_order_relaxed);
}

/* A fence: one event per live non-blocking stream plus one on the legacy
 * stream; complete when all are. */
typedef struct cuda_fence {
  int n;
  cudaEvent_t events[];
} cuda_fence_t;

static cudaEvent_t take_event(cp_device_t *dev) {
  if (dev->n_spare) return dev->spare_events[--dev->n_spare];
  cudaEvent_t ev = NULL;
  return ensure_event(&ev) ? ev : NULL;
}

static void give_event(cp_device_t *dev, cudaEvent_t ev) {
  if (dev->n_spare == dev->cap_spare) {
    int cap = dev->cap_spare ? dev->cap_spare * 2 : 16;
    cudaEvent_t *grown = realloc(dev->spare_events, (size_t)cap * sizeof *grown);
    if (!grown) {
      cp_real.cudaEventDestroy(ev);
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
  if (!cp_capture_none_lock()) return -1;
  int prev = cp_device_enter(dev);
  pthread_mutex_lock(&dev->lock);
  int n = atomic_load(&dev->live_nonblocking) + 1;
  cuda_fence_t *f = malloc(sizeof *f + (size_t)n * sizeof f->events[0]);
  bool ok = f != NULL;
  if (f) f->n = 0;
  cp_stream_entry_t *s, *tmp;
  HASH_ITER(hh, dev->streams, s, tmp) {
    if (!ok || !s->nonblocking || f->n == n - 1) continue;
    cudaEvent_t ev = take_event(dev);
    ok = ev && cp_real.cudaEventRecord(ev, s->stream) == cudaSuccess;
    if (ev) f->events[f->n++] = ev;
  }
  if (ok) {
    cudaEvent_t ev = take_event(dev);
    ok = ev && cp_real.cudaEventRecord(ev, cudaStreamLegacy) == cudaSuccess;
    if (ev) f->events[f->n++] = ev;
  }
  if (!ok && f) {
    for (int i = 0; i < f->n; i++) give_event(dev, f->events[i]);
    free(f);
    f = NULL;
  }
  pthread_mutex_unlock(&dev->lock);
  cp_device_leave(prev);
  cp_capture_unlock();
  if (!f) {
    cp_real.cudaGetLastError();
    return -1;
  }
  *out = f;
  return 0;
}

static int cuda_fence_query(void *ctx, int device, cp_fence_t fence) {
  (void)ctx, (void)device;
  cuda_fence_t *f = fence;
  for (int i = 0; i < f->n; i++) {
    cudaError_t rc = cp_real.cudaEventQuery(f->events[i]);
    if (rc != cudaSuccess) {
      if (rc != cudaErrorNotReady) cp_real.cudaGetLastError();
      return 0;
    }
  }
  return 1;
}

static int cuda_fence_wait(void *ctx, int device, cp_fence_t fence) {
  (void)ctx, (void)device;
  if (!cp_capture_none_lock()) return -1;
  cuda_fence_t *f = fence;
  int rc = 0;
  for (int i = 0; i < f->n && rc == 0; i++) {
    if (cp_real.cudaEventSynchronize(f->events[i]) != cudaSuccess) {
      cp_real.cudaGetLastError();
      rc = -1;
    }
  }
  cp_capture_unlock();
  return rc;
}

static void cuda_fence_release(void *ctx, int device, cp_fence_t fence) {
  (void)device;
  cp_device_t *dev = ctx;
  cuda_fence_t *f = fence;
  pthread_mutex_lock(&dev->lock);
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
  };
}
