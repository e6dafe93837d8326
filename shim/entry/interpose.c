/* interpose.c: the CUDA runtime entry points cudapool replaces.
 *
 * Each wrapper makes sure the options are loaded (cp_shim_init), then either
 * hands the call to the serving rules of serve.c or forwards it to the real
 * runtime unchanged; it only translates arguments and results. Forwarded
 * unchanged: everything while the runtime layer does not serve (layer.h),
 * NULL arguments and zero sizes (they fail or succeed exactly as natively),
 * and whatever serve.c answers CP_FORWARD for. Return codes and
 * cudaGetLastError() are therefore native. */
#include <string.h>

#include "state/capture.h"
#include "state/entry_stats.h"
#include "state/peers.h"
#include "backend/real.h"
#include "serve/serve.h"
#include "state/shim.h"

/* ---- allocations and frees ------------------------------------------------------- */

CP_EXPORT cudaError_t cudaMalloc(void **devPtr, size_t size) {
  if (!cp_shim_init() || !devPtr || size == 0) return cp_real.cudaMalloc(devPtr, size);
  uintptr_t p;
  cp_alloc_verdict_t v = cp_serve_alloc(cp_current_device(), size, &p);
  cp_entry_call(CP_ENTRY_cudaMalloc, v == CP_SERVED);
  switch (v) {
    case CP_SERVED: *devPtr = (void *)p; return cudaSuccess;
    case CP_FORWARD: return cp_real.cudaMalloc(devPtr, size);
    case CP_OUT_OF_MEMORY: break;
  }
  /* Over the limit: an impossible request makes the runtime itself record
   * cudaErrorMemoryAllocation for cudaGetLastError(), as a native OOM does. */
  void *never = NULL;
  cp_real.cudaMalloc(&never, (size_t)1 << 62);
  return cudaErrorMemoryAllocation;
}

static int rt_free(uintptr_t p) { return cp_real.cudaFree((void *)p); }

/* Natively a free during a strict capture fails (and invalidates the
 * capture) or succeeds depending on the thread's capture mode: cudaFree(NULL)
 * answers the same question without touching a pool segment. */
static int rt_capture_probe(uintptr_t p) {
  (void)p;
  return cp_real.cudaFree(NULL);
}

static int rt_synchronize(void) { return cp_real.cudaDeviceSynchronize(); }

static const cp_layer_calls_t runtime_calls = {
    .real_free = rt_free, .capture_probe = rt_capture_probe, .synchronize = rt_synchronize};

CP_EXPORT cudaError_t cudaFree(void *devPtr) {
  if (!cp_shim_init() || !devPtr) return cp_real.cudaFree(devPtr);
  if (cp_opts.verbose) cp_entry_call(CP_ENTRY_cudaFree, cp_serve_owned((uintptr_t)devPtr));
  return (cudaError_t)cp_serve_free(&runtime_calls, (uintptr_t)devPtr);
}

int cp_rt_capturing(uintptr_t stream, bool *capturing) {
  enum cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaError_t rc = cp_real.cudaStreamIsCapturing((cudaStream_t)stream, &status);
  *capturing = rc == cudaSuccess && status != cudaStreamCaptureStatusNone;
  return rc;
}

static int rt_stream_sync(uintptr_t stream) { return cp_real.cudaStreamSynchronize((cudaStream_t)stream); }

/* entry: what the entry counts show it as (the twin is counted with the plain call). */
#define CP_FREE_ASYNC(name, ptsz, entry)                                                           \
  static int real_##name(uintptr_t p, uintptr_t stream) {                                          \
    return cp_real.name((void *)p, (cudaStream_t)stream);                                          \
  }                                                                                                \
  static const cp_async_calls_t calls_##name = {.free_async = real_##name,                         \
                                                .capturing = cp_rt_capturing,                      \
                                                .synchronize = rt_stream_sync,                     \
                                                .per_thread = ptsz};                               \
  CP_EXPORT cudaError_t name(void *devPtr, cudaStream_t hStream) {                                 \
    if (!cp_shim_init() || !devPtr) return cp_real.name(devPtr, hStream);                          \
    if (cp_opts.verbose) cp_entry_call(entry, cp_serve_owned((uintptr_t)devPtr));                  \
    return (cudaError_t)cp_serve_free_async(&calls_##name, (uintptr_t)devPtr, (uintptr_t)hStream); \
  }
CP_AND_PTSZ(CP_FREE_ASYNC, cudaFreeAsync, CP_ENTRY_cudaFreeAsync)
#undef CP_FREE_ASYNC

const cp_async_calls_t *const cp_runtime_async = &calls_cudaFreeAsync;

/* A pool block that cannot be exported fails as an invalid pointer does, so
 * the runtime records the error for cudaGetLastError() too. */
CP_EXPORT cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr) {
  if (cp_shim_init() && devPtr && !cp_serve_ipc_exportable((uintptr_t)devPtr))
    return cp_real.cudaIpcGetMemHandle(handle, NULL);
  return cp_real.cudaIpcGetMemHandle(handle, devPtr);
}

CP_EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes) {
  bool on = cp_shim_init();
  cudaError_t rc = cp_real.cudaMemGetInfo(free_bytes, total_bytes);
  if (on && rc == cudaSuccess && free_bytes && total_bytes)
    cp_serve_meminfo(cp_current_device(), true, free_bytes, total_bytes);
  return rc;
}

/* ---- synchronisations ------------------------------------------------------------ */

static cudaError_t synchronize_stream(__typeof__(cudaStreamSynchronize) *real, cudaStream_t stream,
                                      bool per_thread_api) {
  if (!real) return cudaErrorNotSupported;
  if (!cp_shim_init()) return real(stream);
  cp_sync_t sync = cp_serve_sync_begin(cp_current_device());
  cudaError_t rc = real(stream);
  cp_serve_synced_stream(&sync, rc == cudaSuccess, (uintptr_t)stream, per_thread_api);
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
  cp_sync_t sync = cp_serve_sync_begin(cp_current_device());
  cudaError_t rc = cp_real.cudaDeviceSynchronize();
  cp_serve_synced_device(&sync, rc == cudaSuccess);
  return rc;
}

/* ---- streams and devices --------------------------------------------------------- */

static cudaError_t stream_created(cudaError_t rc, const cudaStream_t *stream, unsigned flags) {
  cp_device_t *dev = rc == cudaSuccess && stream ? cp_current_device() : NULL;
  if (dev) cp_serve_stream_created(dev, (uintptr_t)*stream, (flags & cudaStreamNonBlocking) != 0);
  return rc;
}

CP_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *pStream) {
  if (!cp_shim_init()) return cp_real.cudaStreamCreate(pStream);
  return stream_created(cp_real.cudaStreamCreate(pStream), pStream, cudaStreamDefault);
}

CP_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *pStream, unsigned int flags) {
  if (!cp_shim_init()) return cp_real.cudaStreamCreateWithFlags(pStream, flags);
  return stream_created(cp_real.cudaStreamCreateWithFlags(pStream, flags), pStream, flags);
}

CP_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *pStream, unsigned int flags, int priority) {
  if (!cp_shim_init()) return cp_real.cudaStreamCreateWithPriority(pStream, flags, priority);
  return stream_created(cp_real.cudaStreamCreateWithPriority(pStream, flags, priority), pStream, flags);
}

CP_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!cp_shim_init() || cp_serve_special_stream((uintptr_t)stream)) return cp_real.cudaStreamDestroy(stream);
  cp_serve_stream_destroying((uintptr_t)stream);
  cudaError_t rc = cp_real.cudaStreamDestroy(stream);
  cp_serve_stream_destroyed((uintptr_t)stream, rc == cudaSuccess);
  return rc;
}

/* From now on the current device may touch peerDevice's blocks with work
 * that peerDevice's barriers must reach (state/peers.h). Already enabled:
 * the same. */
CP_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peerDevice, unsigned int flags) {
  if (!cp_shim_init()) return cp_real.cudaDeviceEnablePeerAccess(peerDevice, flags);
  cudaError_t rc = cp_real.cudaDeviceEnablePeerAccess(peerDevice, flags);
  int current = -1;
  if ((rc == cudaSuccess || rc == cudaErrorPeerAccessAlreadyEnabled) && cp_real.cudaGetDevice(&current) == cudaSuccess)
    cp_peers_enabled(current, peerDevice);
  return rc;
}

CP_EXPORT cudaError_t cudaDeviceReset(void) {
  cp_device_t *dev = cp_shim_init() ? cp_current_device() : NULL;
  cudaError_t rc = cp_real.cudaDeviceReset();
  if (rc == cudaSuccess && dev) cp_device_reset(dev);
  return rc;
}

/* ---- captures -------------------------------------------------------------------- */

static cudaError_t begin_capture(__typeof__(cudaStreamBeginCapture) *real, cudaStream_t stream,
                                 enum cudaStreamCaptureMode mode) {
  cp_capture_begin_lock((uintptr_t)stream);
  cudaError_t rc = real(stream, mode);
  cp_capture_begin_done(rc == cudaSuccess, (uintptr_t)stream, mode != cudaStreamCaptureModeRelaxed);
  return rc;
}

/* Invalidated captures end too; other errors leave the capture running. */
static cudaError_t end_capture(__typeof__(cudaStreamEndCapture) *real, cudaStream_t stream,
                               cudaGraph_t *graph) {
  cp_capture_end_lock();
  cudaError_t rc = real(stream, graph);
  cp_serve_capture_ended(rc == cudaSuccess || rc == cudaErrorStreamCaptureInvalidated, (uintptr_t)stream);
  return rc;
}

CP_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  if (!cp_shim_init()) return cp_real.cudaStreamBeginCapture(stream, mode);
  return begin_capture(cp_real.cudaStreamBeginCapture, stream, mode);
}

CP_EXPORT cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
  cp_real_init();
  if (!cp_real.cudaStreamBeginCapture_ptsz) return cudaErrorNotSupported;
  if (!cp_shim_init()) return cp_real.cudaStreamBeginCapture_ptsz(stream, mode);
  cp_note_per_thread_stream();
  return begin_capture(cp_real.cudaStreamBeginCapture_ptsz, stream, mode);
}

CP_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
  if (!cp_shim_init()) return cp_real.cudaStreamEndCapture(stream, pGraph);
  return end_capture(cp_real.cudaStreamEndCapture, stream, pGraph);
}

CP_EXPORT cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph) {
  cp_real_init();
  if (!cp_real.cudaStreamEndCapture_ptsz) return cudaErrorNotSupported;
  if (!cp_shim_init()) return cp_real.cudaStreamEndCapture_ptsz(stream, pGraph);
  return end_capture(cp_real.cudaStreamEndCapture_ptsz, stream, pGraph);
}
