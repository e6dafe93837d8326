/* interpose.c: the CUDA runtime entry points cudapool replaces.
 *
 * Each wrapper initialises the shim on first use, then either serves the
 * call from the pool or forwards it to the real runtime unchanged. The rule
 * for forwarding: whatever the pool does not own, and whatever must fail or
 * succeed exactly as natively (NULL arguments, zero sizes, calls during a
 * strict stream capture), goes to the real function with the program's own
 * arguments, so return codes and cudaGetLastError() are native.
 *
 * The synchronisation wrappers tell the pool what a completed
 * synchronisation covered (mark before the real call, report after). The
 * stream and capture wrappers keep device.c's bookkeeping. */
#include <errno.h>
#include <string.h>

#include "device.h"
#include "real.h"
#include "shim.h"
#include "trace.h"

/* cudaStreamLegacy and cudaStreamPerThread are handles 0x1 and 0x2; 0 is
 * the legacy stream in a program built without per-thread default streams. */
static bool is_legacy(cudaStream_t s) { return s == 0 || s == cudaStreamLegacy; }

static cudaError_t pooled_malloc(void **out, size_t size) {
  cp_device_t *dev = cp_current_device();
  cp_pool_t *pool = dev ? cp_device_pool(dev) : NULL;
  if (!pool) return cp_real.cudaMalloc(out, size);
  uintptr_t p;
  if (cp_alloc(pool, size, CP_STREAM_DEVICE, cp_device_reuse_key(dev), &p) == 0) {
    *out = (void *)p;
    if (cp_trace_enabled()) cp_trace_alloc(p, size, 0);
    return cudaSuccess;
  }
  if (cp_trace_enabled()) cp_trace_alloc_failure(size, 0);
  cp_config_t cfg;
  cp_get_config(pool, &cfg);
  cudaError_t why = cp_cuda_last_alloc_error();
  if (cfg.limit == CP_NO_LIMIT || (why != cudaSuccess && why != cudaErrorMemoryAllocation)) {
    /* Without a limit the pool gave back all it could: the program's own
     * call, made now, fails (or succeeds) exactly as natively. */
    return cp_real.cudaMalloc(out, size);
  }
  /* Over the limit: an impossible request makes the runtime itself record
   * cudaErrorMemoryAllocation for cudaGetLastError(), as a native OOM does. */
  void *never = NULL;
  cp_real.cudaMalloc(&never, (size_t)1 << 62);
  return cudaErrorMemoryAllocation;
}

CP_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size) {
  if (!cp_shim_init() || !devPtr || size == 0 || cp_capture_strict_active())
    return cp_real.cudaMalloc(devPtr, size);
  return pooled_malloc(devPtr, size);
}

/* The pool refused the pointer as interior or already freed: let the real
 * runtime report it. ptr|1 lies inside the same pool segment and is never
 * an allocation start, so the real call fails exactly as natively and can
 * never release the segment (ptr itself may be a segment's base). */
static cudaError_t native_invalid_free(void *ptr) {
  return cp_real.cudaFree((void *)((uintptr_t)ptr | 1));
}

static cudaError_t pooled_free(void *ptr) {
  unsigned flags = 0;
  if (cp_opts.mode == CP_MODE_SYNC) {
    /* The program may use cudaFree as a barrier for host reads. */
    cudaError_t rc = cp_real.cudaDeviceSynchronize ? cp_real.cudaDeviceSynchronize() : cudaSuccess;
    if (rc != cudaSuccess) return rc;
    flags = CP_FREE_DEVICE_IDLE;
  }
  size_t traced = 0;
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));) {
    cp_pool_t *pool = atomic_load(&dev->pool);
    if (!pool) continue;
    /* Recorded before the free: once freed, another thread may get the
     * block and record its allocation first. */
    if (cp_trace_enabled() && (traced = cp_block_size(pool, (uintptr_t)ptr)))
      cp_trace_free((uintptr_t)ptr, traced, 0);
    int rc = cp_free(pool, (uintptr_t)ptr, cp_device_reuse_key(dev), flags);
    if (rc == 0) return cudaSuccess;
    if (rc == EINVAL) return native_invalid_free(ptr);
  }
  return cp_real.cudaFree(ptr);
}

static bool owned_by_pool(const void *ptr) {
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));) {
    cp_pool_t *pool = atomic_load(&dev->pool);
    if (pool && cp_block_size(pool, (uintptr_t)ptr)) return true;
  }
  return false;
}

CP_EXPORT cudaError_t cudaFree(void *devPtr) {
  if (!cp_shim_init() || !devPtr) return cp_real.cudaFree(devPtr);
  if (cp_capture_strict_active() && owned_by_pool(devPtr)) {
    /* Natively this call fails (and invalidates the capture) or succeeds
     * depending on the thread's capture mode: cudaFree(NULL) answers the
     * same question without touching our segment. */
    cudaError_t rc = cp_real.cudaFree(NULL);
    if (rc != cudaSuccess) return rc;
  }
  return pooled_free(devPtr);
}

static cudaError_t synchronize_stream(__typeof__(cudaStreamSynchronize) *real, cudaStream_t stream,
                                      bool per_thread_build) {
  if (!cp_shim_init() || !real) return real ? real(stream) : cudaErrorNotSupported;
  bool legacy = !per_thread_build && is_legacy(stream);
  if (stream == cudaStreamPerThread || (per_thread_build && stream == 0)) cp_note_per_thread_stream();
  cp_device_t *dev = cp_current_device();
  cp_pool_t *pool = dev ? atomic_load(&dev->pool) : NULL;
  uint64_t mark = pool ? cp_sync_mark(pool) : 0;
  cudaError_t rc = real(stream);
  if (cp_trace_enabled()) cp_trace_sync_stream((uint64_t)(uintptr_t)stream);
  /* The legacy stream waits for every blocking stream, but not for
   * non-blocking ones: only without those is it the whole device. */
  if (rc == cudaSuccess && pool && legacy && atomic_load(&dev->live_nonblocking) == 0)
    cp_sync_device(pool, mark);
  return rc;
}

CP_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  cp_real_init();
  return synchronize_stream(cp_real.cudaStreamSynchronize, stream, false);
}

CP_EXPORT cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t stream) {
  cp_real_init();
  return synchronize_stream(cp_real.cudaStreamSynchronize_ptsz, stream, true);
}

CP_EXPORT cudaError_t cudaDeviceSynchronize(void) {
  if (!cp_shim_init()) return cp_real.cudaDeviceSynchronize();
  cp_device_t *dev = cp_current_device();
  cp_pool_t *pool = dev ? atomic_load(&dev->pool) : NULL;
  uint64_t mark = pool ? cp_sync_mark(pool) : 0;
  cudaError_t rc = cp_real.cudaDeviceSynchronize();
  if (cp_trace_enabled()) cp_trace_sync_device();
  if (rc == cudaSuccess && pool) cp_sync_device(pool, mark);
  return rc;
}

static void stream_created(cudaError_t rc, cudaStream_t *stream, unsigned flags) {
  if (rc != cudaSuccess || !stream) return;
  cp_device_t *dev = cp_current_device();
  if (dev) cp_device_stream_created(dev, *stream, (flags & cudaStreamNonBlocking) != 0);
}

CP_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream) {
  bool on = cp_shim_init();
  cudaError_t rc = cp_real.cudaStreamCreate(pStream);
  if (on) stream_created(rc, pStream, cudaStreamDefault);
  return rc;
}

CP_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
  bool on = cp_shim_init();
  cudaError_t rc = cp_real.cudaStreamCreateWithFlags(pStream, flags);
  if (on) stream_created(rc, pStream, flags);
  return rc;
}

CP_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority) {
  bool on = cp_shim_init();
  cudaError_t rc = cp_real.cudaStreamCreateWithPriority(pStream, flags, priority);
  if (on) stream_created(rc, pStream, flags);
  return rc;
}

CP_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (cp_shim_init() && stream && stream != cudaStreamLegacy && stream != cudaStreamPerThread)
    cp_stream_destroying(stream);
  return cp_real.cudaStreamDestroy(stream);
}

CP_EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  bool on = cp_shim_init();
  cudaError_t rc = cp_real.cudaMemGetInfo(free_bytes, total_bytes);
  if (!on || rc != cudaSuccess || !free_bytes || !total_bytes) return rc;
  /* The pool (not yet any memory) is made here so that a limit shows
   * before the first allocation: frameworks size themselves from this. */
  cp_device_t *dev = cp_current_device();
  cp_pool_t *pool = dev ? cp_device_pool(dev) : NULL;
  if (!pool) return rc;
  cp_device_adjust_meminfo(pool, free_bytes, total_bytes);
  return rc;
}

CP_EXPORT cudaError_t cudaDeviceReset(void) {
  bool on = cp_shim_init();
  cp_device_t *dev = on ? cp_current_device() : NULL;
  cudaError_t rc = cp_real.cudaDeviceReset();
  if (rc == cudaSuccess && dev) cp_device_reset(dev);
  return rc;
}

CP_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  if (!cp_shim_init()) return cp_real.cudaStreamBeginCapture(stream, mode);
  return cp_capture_begin(cp_real.cudaStreamBeginCapture, stream, mode);
}

CP_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  cp_real_init();
  if (!cp_real.cudaStreamBeginCapture_ptsz) return cudaErrorNotSupported;
  if (!cp_shim_init()) return cp_real.cudaStreamBeginCapture_ptsz(stream, mode);
  cp_note_per_thread_stream();
  return cp_capture_begin(cp_real.cudaStreamBeginCapture_ptsz, stream, mode);
}

CP_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
  if (!cp_shim_init()) return cp_real.cudaStreamEndCapture(stream, pGraph);
  return cp_capture_end(cp_real.cudaStreamEndCapture, stream, pGraph);
}

CP_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph) {
  cp_real_init();
  if (!cp_real.cudaStreamEndCapture_ptsz) return cudaErrorNotSupported;
  if (!cp_shim_init()) return cp_real.cudaStreamEndCapture_ptsz(stream, pGraph);
  return cp_capture_end(cp_real.cudaStreamEndCapture_ptsz, stream, pGraph);
}
