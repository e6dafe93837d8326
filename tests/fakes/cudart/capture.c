/* capture.c: stream capture, with the native rules the shim must not trip.
 *
 * Rules (CUDA programming guide, "prohibited and unhandled operations", and
 * ../../shared/GPU-FACTS.md):
 * 1. Unsafe calls (cudaMalloc and friends, cudaFree, event/stream queries and
 *    synchronisations, cudaDeviceSynchronize) are prohibited for a thread
 *    whose interaction mode (cudaThreadExchangeStreamCaptureMode, default
 *    global) is not relaxed when it has begun a capture that is not relaxed,
 *    or, in global interaction mode, when another thread has begun a global
 *    capture. A prohibited call fails with cudaErrorStreamCaptureUnsupported
 *    and invalidates the captures that prohibited it.
 * 2. Work on a stream taking part in a capture is recorded, not run (no
 *    memory is touched, no clock ticks); on an invalidated capture it fails
 *    with cudaErrorStreamCaptureInvalidated.
 * 3. Work on the legacy stream while a blocking stream of its device takes
 *    part in a capture fails with cudaErrorStreamCaptureImplicit and
 *    invalidates that capture (any mode: it is an implicit dependency).
 * 4. Events: a record on a capturing stream makes a captured event; a stream
 *    that waits on it joins the capture (the legacy stream cannot:
 *    cudaErrorStreamCaptureImplicit; a stream of another capture:
 *    cudaErrorStreamCaptureMerge); a capturing stream waiting on a
 *    non-captured event without cudaEventWaitExternal fails with
 *    cudaErrorStreamCaptureIsolation; querying or synchronising a captured
 *    event or a capturing stream fails with cudaErrorStreamCaptureUnsupported.
 *    All of these invalidate the capture.
 * 5. cudaDeviceSynchronize while any capture is active on the device fails
 *    with cudaErrorStreamCaptureUnsupported and invalidates them.
 * Not modelled: unjoined forks at EndCapture, the graph's contents. */
#include "fake.h"

#include <stdlib.h>
#include <utlist.h>

cudaError_t fc_capture_unsafe(void) {
  enum cudaStreamCaptureMode tm = fc_thread_mode();
  if (tm == cudaStreamCaptureModeRelaxed) return cudaSuccess;
  unsigned me = fc_tid();
  cudaError_t err = cudaSuccess;
  fc_capture *c;
  DL_FOREACH(fc.captures, c) {
    int own = c->owner == me && c->mode != cudaStreamCaptureModeRelaxed;
    int other = tm == cudaStreamCaptureModeGlobal && c->owner != me && c->mode == cudaStreamCaptureModeGlobal;
    if (own || other) {
      c->invalidated = 1;
      err = cudaErrorStreamCaptureUnsupported;
    }
  }
  return err;
}

cudaError_t fc_capture_legacy(int dev) {
  cudaError_t err = cudaSuccess;
  fc_stream *b;
  DL_FOREACH(fc.all, b) {
    if (b->device == dev && b->cap && fc_stream_blocking(b)) {
      b->cap->invalidated = 1;
      err = cudaErrorStreamCaptureImplicit;
    }
  }
  return err;
}

cudaError_t fc_submit(fc_stream *s, const fc_vc *extra, int *captured) {
  *captured = 0;
  if (s->cap) {
    if (s->cap->invalidated) return cudaErrorStreamCaptureInvalidated;
    *captured = 1;
    return cudaSuccess;
  }
  if (s->kind == FC_STREAM_LEGACY) {
    cudaError_t err = fc_capture_legacy(s->device);
    if (err) return err;
  }
  fc_clock_op(s, extra);
  return cudaSuccess;
}

int fc_capture_active_on(int dev) {
  fc_capture *c;
  DL_FOREACH(fc.captures, c)
  if (c->device == dev) return 1;
  return 0;
}

void fc_capture_invalidate_device(int dev) {
  fc_capture *c;
  DL_FOREACH(fc.captures, c)
  if (c->device == dev) c->invalidated = 1;
}

void fc_capture_drop(fc_capture *c) {
  fc_stream *s;
  DL_FOREACH(fc.all, s)
  if (s->cap == c) s->cap = NULL;
  fc_event *e, *tmp;
  HASH_ITER(hh, fc.events, e, tmp) {
    if (e->cap == c) {
      e->cap = NULL;
      e->recorded = 0;
    }
  }
  DL_DELETE(fc.captures, c);
  free(c);
}

static cudaError_t begin(cudaStream_t stream, enum cudaStreamCaptureMode mode, int ptsz) {
  fc_stream *s;
  cudaError_t err = fc_stream_get(stream, ptsz, &s);
  if (err) return err;
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal &&
      mode != cudaStreamCaptureModeRelaxed)
    return cudaErrorInvalidValue;
  if (s->kind == FC_STREAM_LEGACY) return cudaErrorStreamCaptureUnsupported;
  if (s->cap) return cudaErrorIllegalState;
  fc_capture *c = calloc(1, sizeof *c);
  if (!c) return cudaErrorMemoryAllocation;
  c->id = ++fc.next_capture_id;
  c->origin = s;
  c->mode = mode;
  c->owner = fc_tid();
  c->device = s->device;
  DL_APPEND(fc.captures, c);
  s->cap = c;
  return cudaSuccess;
}

/* The graph is an opaque token: nothing of the capture is kept. */
static cudaError_t end(cudaStream_t stream, cudaGraph_t *graph, int ptsz) {
  fc_stream *s;
  cudaError_t err = fc_stream_get(stream, ptsz, &s);
  if (err) return err;
  if (!graph) return cudaErrorInvalidValue;
  fc_capture *c = s->cap;
  if (!c) return cudaErrorIllegalState;
  if (c->origin != s) return cudaErrorStreamCaptureUnmatched;
  if (c->mode != cudaStreamCaptureModeRelaxed && c->owner != fc_tid())
    return cudaErrorStreamCaptureWrongThread;
  int bad = c->invalidated;
  fc_capture_drop(c);
  *graph = NULL;
  if (bad) return cudaErrorStreamCaptureInvalidated;
  *graph = (cudaGraph_t)malloc(64);
  return *graph ? cudaSuccess : cudaErrorMemoryAllocation;
}

static cudaError_t status_of(cudaStream_t stream, int ptsz, enum cudaStreamCaptureStatus *st,
                             fc_capture **cap) {
  fc_stream *s;
  cudaError_t err = fc_stream_get(stream, ptsz, &s);
  if (err) return err;
  if (!st) return cudaErrorInvalidValue;
  /* Asking about the legacy stream while a blocking stream is captured is
   * itself an implicit dependency natively; it does not invalidate. */
  if (s->kind == FC_STREAM_LEGACY) {
    fc_stream *b;
    DL_FOREACH(fc.all, b)
    if (b->device == s->device && b->cap && fc_stream_blocking(b)) return cudaErrorStreamCaptureImplicit;
  }
  *cap = s->cap;
  *st = !s->cap               ? cudaStreamCaptureStatusNone
        : s->cap->invalidated ? cudaStreamCaptureStatusInvalidated
                              : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

static cudaError_t info(cudaStream_t stream, enum cudaStreamCaptureStatus *st, unsigned long long *id,
                        cudaGraph_t *graph, const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                        size_t *ndeps, int ptsz) {
  fc_capture *c = NULL;
  cudaError_t err = status_of(stream, ptsz, st, &c);
  if (err) return err;
  if (id && c) *id = c->id;
  if (graph) *graph = NULL;
  if (deps) *deps = NULL;
  if (edges) *edges = NULL;
  if (ndeps) *ndeps = 0;
  return cudaSuccess;
}

#define ENTER() fc_enter(__func__)

cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
  ENTER();
  return fc_leave(begin(s, mode, 0));
}
cudaError_t cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode mode) {
  ENTER();
  return fc_leave(begin(s, mode, 1));
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
  ENTER();
  return fc_leave(end(s, g, 0));
}
cudaError_t cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g) {
  ENTER();
  return fc_leave(end(s, g, 1));
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st) {
  ENTER();
  fc_capture *c;
  return fc_leave(status_of(s, 0, st, &c));
}
cudaError_t cudaStreamIsCapturing_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st) {
  ENTER();
  fc_capture *c;
  return fc_leave(status_of(s, 1, st, &c));
}
cudaError_t cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *st, unsigned long long *id,
                                     cudaGraph_t *g, const cudaGraphNode_t **deps,
                                     const cudaGraphEdgeData **edges, size_t *ndeps) {
  ENTER();
  return fc_leave(info(s, st, id, g, deps, edges, ndeps, 0));
}
cudaError_t cudaStreamGetCaptureInfo_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st,
                                          unsigned long long *id, cudaGraph_t *g,
                                          const cudaGraphNode_t **deps, const cudaGraphEdgeData **edges,
                                          size_t *ndeps) {
  ENTER();
  return fc_leave(info(s, st, id, g, deps, edges, ndeps, 1));
}

cudaError_t cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *mode) {
  ENTER();
  if (!mode || (*mode != cudaStreamCaptureModeGlobal && *mode != cudaStreamCaptureModeThreadLocal &&
                *mode != cudaStreamCaptureModeRelaxed))
    return fc_leave(cudaErrorInvalidValue);
  enum cudaStreamCaptureMode old = fc_thread_mode();
  fc_set_thread_mode(*mode);
  *mode = old;
  return fc_leave(cudaSuccess);
}
