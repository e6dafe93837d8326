/* driver_stream.c: the driver's stream, capture, synchronisation and
 * primary-context entry points, wrapped for the bookkeeping a safe barrier
 * needs (device.h): cuStreamCreate(WithPriority), cuStreamDestroy_v2, the
 * capture begin/end calls, cuStreamSynchronize(_ptsz), cuCtxSynchronize(_v2),
 * cuDevicePrimaryCtxReset and cuDevicePrimaryCtxRelease (both variants),
 * cuGreenCtxStreamCreate (a green context's stream: a non-blocking stream of
 * its device, whatever context is current), cuStreamWaitEvent(_ptsz) (a
 * wait that may join the stream to a capture), cuCtxEnablePeerAccess (a
 * device given access to another's memory, state/peers.h).
 *
 * Each one makes the real call with the program's arguments and returns its
 * result unchanged; around it serve.c and capture.c record what the call
 * did, as for the runtime's twins (interpose.c). At depth > 0 (api.h) the runtime
 * layer is making the call and keeps the books itself: the wrappers pass it
 * through, except where the driver's state itself changed under the shim (a
 * context reset or released, a stream destroyed while capturing), which is
 * recorded whoever asked. Only the primary context's streams and
 * synchronisations count: the pool holds only its memory.
 *
 * Threads: begin/end hold the capture lock for writing across the real call
 * (device.c), so that no barrier is being issued while a capture starts. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "state/capture.h"
#include "backend/driver.h"
#include "serve/serve.h"
#include "state/peers.h"
#include "state/shim.h"

static bool keeping_books(void) { return cp_inside == 0 && cp_hooking(); }

/* ---- synchronisations ---------------------------------------------------------- */

static CUresult sync_stream(CUresult (*real)(CUstream), CUstream stream, bool per_thread_api) {
  if (!keeping_books()) return real(stream);
  cp_sync_t sync = cp_serve_sync_begin(cp_drv_current_primary());
  CUresult rc = real(stream);
  cp_serve_synced_stream(&sync, rc == CUDA_SUCCESS, (uintptr_t)stream, per_thread_api);
  return rc;
}

CUresult cp_w_cuStreamSynchronize(CUstream hStream) {
  CP_DRV_NEED(cuStreamSynchronize);
  return sync_stream(cp_drv.cuStreamSynchronize, hStream, false);
}

CUresult cp_w_cuStreamSynchronize_ptsz(CUstream hStream) {
  CP_DRV_NEED(cuStreamSynchronize_ptsz);
  return sync_stream(cp_drv.cuStreamSynchronize_ptsz, hStream, true);
}

/* The device whose primary context is ctx (NULL: the current context). */
static cp_device_t *device_of_context(CUcontext ctx) {
  if (!ctx) return cp_drv_current_primary();
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));)
    if (cp_drv_primary(cp_device_id(dev)) == ctx) return dev;
  return NULL;
}

static CUresult sync_context(CUcontext ctx, bool v2) {
  cp_sync_t sync = cp_serve_sync_begin(keeping_books() ? device_of_context(ctx) : NULL);
  CUresult rc = v2 ? cp_drv.cuCtxSynchronize_v2(ctx) : cp_drv.cuCtxSynchronize();
  cp_serve_synced_device(&sync, rc == CUDA_SUCCESS);
  return rc;
}

CUresult cp_w_cuCtxSynchronize(void) {
  CP_DRV_NEED(cuCtxSynchronize);
  return sync_context(NULL, false);
}

CUresult cp_w_cuCtxSynchronize_v2(CUcontext ctx) {
  CP_DRV_NEED(cuCtxSynchronize_v2);
  return sync_context(ctx, true);
}

/* ---- streams ------------------------------------------------------------------- */

static CUresult stream_created(CUresult rc, const CUstream *stream, unsigned flags) {
  cp_device_t *dev = rc == CUDA_SUCCESS && stream && keeping_books() ? cp_drv_current_primary() : NULL;
  if (dev) cp_serve_stream_created(dev, (uintptr_t)*stream, (flags & CU_STREAM_NON_BLOCKING) != 0);
  return rc;
}

CUresult cp_w_cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  CP_DRV_NEED(cuStreamCreate);
  return stream_created(cp_drv.cuStreamCreate(phStream, Flags), phStream, Flags);
}

CUresult cp_w_cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority) {
  CP_DRV_NEED(cuStreamCreateWithPriority);
  return stream_created(cp_drv.cuStreamCreateWithPriority(phStream, flags, priority), phStream, flags);
}

CUresult cp_w_cuStreamDestroy_v2(CUstream hStream) {
  CP_DRV_NEED(cuStreamDestroy_v2);
  uintptr_t stream = (uintptr_t)hStream;
  if (cp_serve_special_stream(stream) || !cp_hooking()) return cp_drv.cuStreamDestroy_v2(hStream);
  if (keeping_books()) cp_serve_stream_destroying(stream);
  CUresult rc = cp_drv.cuStreamDestroy_v2(hStream);
  /* Whoever destroyed it: a capture dies with its stream. */
  cp_serve_stream_destroyed(stream, rc == CUDA_SUCCESS);
  return rc;
}

/* A green context's stream runs on its device beside the primary context's
 * streams and may touch the pool's blocks (one address space), but no
 * legacy-stream work orders it (it must be CU_STREAM_NON_BLOCKING): the
 * device's barriers must reach it as a non-blocking stream of theirs. The
 * call ignores the current context, so the device is the stream's own
 * (cuStreamGetDevice, CUDA 12.8; an older driver leaves it unknown, as
 * before). Known whatever layer serves: runtime programs call it too. */
CUresult cp_w_cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx, unsigned int flags, int priority) {
  CP_DRV_NEED(cuGreenCtxStreamCreate);
  CUresult rc = cp_drv.cuGreenCtxStreamCreate(phStream, greenCtx, flags, priority);
  CUdevice id = -1;
  cp_device_t *dev = rc == CUDA_SUCCESS && phStream && keeping_books() && cp_drv.cuStreamGetDevice &&
                             cp_drv.cuStreamGetDevice(*phStream, &id) == CUDA_SUCCESS
                         ? cp_device(id)
                         : NULL;
  if (dev) {
    /* Its events are the device's (primary context), whatever is current:
     * the green context itself, or another device. */
    int token = cp_device_enter(dev);
    cp_serve_stream_created(dev, (uintptr_t)*phStream, true);
    cp_device_leave(token);
  }
  return rc;
}

/* A wait on an event recorded in a capture joins the stream to it (the fork
 * of a fork/join capture), and a destroy while joined may record nothing on
 * it: as the runtime's cudaStreamWaitEvent (per_thread.c), the stream's
 * event is recorded first while any capture runs (cp_stream_may_join), so
 * its work from before the join stays ordered. The _ptsz twin's 0 is the
 * per-thread stream, which is in no stream table: nothing to do for it. */
CUresult cp_w_cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  CP_DRV_NEED(cuStreamWaitEvent);
  if (keeping_books()) cp_stream_may_join((cudaStream_t)hStream);
  return cp_drv.cuStreamWaitEvent(hStream, hEvent, Flags);
}

CUresult cp_w_cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags) {
  CP_DRV_NEED(cuStreamWaitEvent_ptsz);
  if (keeping_books()) cp_stream_may_join((cudaStream_t)hStream);
  return cp_drv.cuStreamWaitEvent_ptsz(hStream, hEvent, Flags);
}

/* ---- captures ------------------------------------------------------------------ */

/* Begin: the real call under the capture lock; on success the capture is
 * recorded (strict unless relaxed; the legacy v1 calls have no mode and
 * count as strict, the safe side). Each call and its _ptsz twin (the
 * per-thread default stream) come from one line. */
#define CP_BEGIN_ONE(name, per_thread, mode_expr, params, args)           \
  CUresult cp_w_##name params {                                           \
    CP_DRV_NEED(name);                                                    \
    if (!keeping_books()) return cp_drv.name args;                        \
    if (per_thread) cp_note_per_thread_stream();                          \
    cp_capture_begin_lock((uintptr_t)hStream);                            \
    CUresult rc = cp_drv.name args;                                       \
    cp_capture_begin_done(rc == CUDA_SUCCESS, (uintptr_t)hStream,         \
                          (mode_expr) != CU_STREAM_CAPTURE_MODE_RELAXED); \
    return rc;                                                            \
  }
#define CP_BEGIN(name, mode_expr, params, args) CP_AND_PTSZ(CP_BEGIN_ONE, name, mode_expr, params, args)

CP_BEGIN(cuStreamBeginCapture, CU_STREAM_CAPTURE_MODE_GLOBAL, (CUstream hStream), (hStream))
CP_BEGIN(cuStreamBeginCapture_v2, mode, (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))
CP_BEGIN(cuStreamBeginCaptureToGraph, mode,
         (CUstream hStream, CUgraph hGraph, const CUgraphNode *dependencies,
          const CUgraphEdgeData *dependencyData, size_t numDependencies, CUstreamCaptureMode mode),
         (hStream, hGraph, dependencies, dependencyData, numDependencies, mode))
#undef CP_BEGIN
#undef CP_BEGIN_ONE

/* End: invalidated captures end too; other errors leave it running. */
#define CP_END(name)                                                                          \
  CUresult cp_w_##name(CUstream hStream, CUgraph *phGraph) {                                  \
    CP_DRV_NEED(name);                                                                        \
    if (!keeping_books()) return cp_drv.name(hStream, phGraph);                               \
    cp_capture_end_lock();                                                                    \
    CUresult rc = cp_drv.name(hStream, phGraph);                                              \
    cp_serve_capture_ended(rc == CUDA_SUCCESS || rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, \
                           (uintptr_t)hStream);                                               \
    return rc;                                                                                \
  }

CP_END(cuStreamEndCapture)
CP_END(cuStreamEndCapture_ptsz)
#undef CP_END

/* ---- peer access ------------------------------------------------------------------ */

/* The device whose primary context is ctx, NULL for none (a context the
 * program created). */
static int device_of_primary(CUcontext ctx) {
  int n = cp_device_count();
  for (int i = 0; i < n && i < CP_MAX_DEVICES; i++)
    if (cp_drv_primary(i) == ctx) return i;
  return -1;
}

/* The current context's device may now touch peerContext's device's blocks
 * with work its barriers must reach. Only primary contexts count: the pool
 * serves no other, and knows no other's streams (state/peers.h). Seen
 * whoever asks: the runtime's own enable reaches here too. */
CUresult cp_w_cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags) {
  CP_DRV_NEED(cuCtxEnablePeerAccess);
  CUresult rc = cp_drv.cuCtxEnablePeerAccess(peerContext, Flags);
  if ((rc != CUDA_SUCCESS && rc != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) || !cp_hooking()) return rc;
  cp_device_t *accessor = cp_drv_current_primary();
  int owner = accessor ? device_of_primary(peerContext) : -1;
  if (owner >= 0) cp_peers_enabled(cp_device_id(accessor), owner);
  return rc;
}

/* ---- primary contexts ------------------------------------------------------------ */

/* The context and all its memory are gone: the pool is dropped, not freed. */
static void context_gone(CUdevice dev) {
  cp_drv_forget_primary(dev);
  cp_device_t *d = cp_hooking() ? cp_device(dev) : NULL;
  if (d) cp_device_reset(d);
}

/* Reset destroys the primary context; the last release does too. The
 * runtime asks for the first variants (CUDA 7.0) of reset and release,
 * libraries for the second (11.0): both are served alike. */
static bool primary_gone_after_release(CUdevice dev) {
  unsigned flags = 0;
  int active = 1;
  return cp_drv.cuDevicePrimaryCtxGetState &&
         cp_drv.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && !active;
}

#define CP_CTX_END(name, gone)                           \
  CUresult cp_w_##name(CUdevice dev) {                   \
    CP_DRV_NEED(name);                                   \
    CUresult rc = cp_drv.name(dev);                      \
    if (rc == CUDA_SUCCESS && (gone)) context_gone(dev); \
    return rc;                                           \
  }

CP_CTX_END(cuDevicePrimaryCtxReset, true)
CP_CTX_END(cuDevicePrimaryCtxReset_v2, true)
CP_CTX_END(cuDevicePrimaryCtxRelease, primary_gone_after_release(dev))
CP_CTX_END(cuDevicePrimaryCtxRelease_v2, primary_gone_after_release(dev))
#undef CP_CTX_END

CP_DRV_EXPORT(cuStreamSynchronize)
CP_DRV_EXPORT(cuStreamSynchronize_ptsz)
CP_DRV_EXPORT(cuCtxSynchronize)
CP_DRV_EXPORT(cuCtxSynchronize_v2)
CP_DRV_EXPORT(cuStreamCreate)
CP_DRV_EXPORT(cuStreamCreateWithPriority)
CP_DRV_EXPORT(cuStreamDestroy_v2)
CP_DRV_EXPORT(cuStreamBeginCapture)
CP_DRV_EXPORT(cuStreamBeginCapture_ptsz)
CP_DRV_EXPORT(cuStreamBeginCapture_v2)
CP_DRV_EXPORT(cuStreamBeginCapture_v2_ptsz)
CP_DRV_EXPORT(cuStreamBeginCaptureToGraph)
CP_DRV_EXPORT(cuStreamBeginCaptureToGraph_ptsz)
CP_DRV_EXPORT(cuStreamEndCapture)
CP_DRV_EXPORT(cuStreamEndCapture_ptsz)
CP_DRV_EXPORT(cuDevicePrimaryCtxReset)
CP_DRV_EXPORT(cuDevicePrimaryCtxReset_v2)
CP_DRV_EXPORT(cuDevicePrimaryCtxRelease)
CP_DRV_EXPORT(cuDevicePrimaryCtxRelease_v2)
CP_DRV_EXPORT(cuGreenCtxStreamCreate)
CP_DRV_EXPORT(cuStreamWaitEvent)
CP_DRV_EXPORT(cuStreamWaitEvent_ptsz)
CP_DRV_EXPORT(cuCtxEnablePeerAccess)
