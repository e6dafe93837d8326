/* streams.c: the fake driver's streams, events, synchronisations and stream
 * capture. Work completes the moment it is submitted; what is modelled is
 * whether it is allowed, with the capture rules of
 * tests/fakes/cudart/capture.c (thread interaction mode always global):
 * 1. Calls unsafe during a capture (allocation, free, synchronisation, event
 *    query) fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED for a thread that
 *    has begun a non-relaxed capture, or while another thread has begun a
 *    global one; the captures that forbade it are invalidated.
 * 2. Work on a capturing stream is recorded, not run; on an invalidated
 *    capture it fails with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
 * 3. Work on the legacy stream while a blocking stream of its context is
 *    capturing fails with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT and
 *    invalidates that capture.
 * 4. An event recorded on a capturing stream is captured; a stream waiting
 *    on it joins the capture (the legacy stream cannot: IMPLICIT); a
 *    capturing stream waiting on an event that is not captured fails with
 *    CUDA_ERROR_STREAM_CAPTURE_ISOLATION; querying or synchronising a
 *    captured event or a capturing stream fails (UNSUPPORTED). All of these
 *    invalidate the capture.
 * 5. cuCtxSynchronize while a capture of the context runs fails
 *    (UNSUPPORTED) and invalidates it. */
#include "fk.h"

#include <stdlib.h>
#include <utlist.h>

static int blocking(const fk_stream *s) {
  return s->kind == FK_PER_THREAD || (s->kind == FK_CREATED && !(s->flags & CU_STREAM_NON_BLOCKING));
}

CUresult fk_stream_get(fk_ctx *ctx, CUstream h, int per_thread_api, fk_stream **out) {
  if (!h)
    *out = per_thread_api ? &ctx->per_thread : &ctx->legacy;
  else if (h == CU_STREAM_LEGACY)
    *out = &ctx->legacy;
  else if (h == CU_STREAM_PER_THREAD)
    *out = &ctx->per_thread;
  else {
    fk_stream *s;
    HASH_FIND_PTR(fk.streams, &h, s);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    *out = s;
  }
  return CUDA_SUCCESS;
}

CUresult fk_capture_unsafe(void) {
  unsigned me = fk_tid();
  CUresult rc = CUDA_SUCCESS;
  fk_capture *c;
  DL_FOREACH(fk.captures, c) {
    int own = c->owner == me && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED;
    int other = c->owner != me && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL;
    if (own || other) {
      c->invalidated = 1;
      rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  return rc;
}

static CUresult legacy_implicit(fk_ctx *ctx) {
  CUresult rc = CUDA_SUCCESS;
  fk_capture *c;
  DL_FOREACH(fk.captures, c) {
    fk_stream *s;
    for (s = fk.streams; s; s = s->hh.next)
      if (s->cap == c && s->ctx == ctx && blocking(s)) break;
    if (s || (c->origin->kind == FK_PER_THREAD && c->origin->ctx == ctx)) {
      c->invalidated = 1;
      rc = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
  }
  return rc;
}

CUresult fk_submit(fk_stream *s) {
  if (s->cap) return s->cap->invalidated ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
  return s->kind == FK_LEGACY ? legacy_implicit(s->ctx) : CUDA_SUCCESS;
}

static void capture_drop(fk_capture *c) {
  fk_stream *s;
  for (s = fk.streams; s; s = s->hh.next)
    if (s->cap == c) s->cap = NULL;
  c->origin->cap = NULL;
  fk_event *e;
  for (e = fk.events; e; e = e->hh.next)
    if (e->cap == c) e->cap = NULL;
  DL_DELETE(fk.captures, c);
  free(c);
}

void fk_streams_drop_ctx(fk_ctx *ctx) {
  fk_capture *c, *ctmp;
  DL_FOREACH_SAFE(fk.captures, c, ctmp)
  if (c->origin->ctx == ctx) capture_drop(c);
  fk_stream *s, *stmp;
  HASH_ITER(hh, fk.streams, s, stmp) {
    if (s->ctx != ctx) continue;
    HASH_DEL(fk.streams, s);
    free(s);
  }
  fk_event *e, *etmp;
  HASH_ITER(hh, fk.events, e, etmp) {
    if (e->ctx != ctx) continue;
    HASH_DEL(fk.events, e);
    free(e);
  }
}

#define ENTER() fk_enter(__func__)
#define READY(c)                     \
  fk_ctx *c;                         \
  CUresult ready_rc_ = fk_ready(&c); \
  if (ready_rc_) return fk_leave(ready_rc_)

static CUresult create(fk_ctx *ctx, CUstream *out, unsigned flags) {
  if (!out || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
  fk_stream *s = calloc(1, sizeof *s);
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  *s = (fk_stream){.handle = (CUstream)s, .ctx = ctx, .flags = flags, .kind = FK_CREATED};
  HASH_ADD_PTR(fk.streams, handle, s);
  *out = s->handle;
  return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) {
  ENTER();
  READY(c);
  return fk_leave(create(c, phStream, Flags));
}

CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority) {
  ENTER();
  READY(c);
  (void)priority;
  return fk_leave(create(c, phStream, flags));
}

CUresult cuStreamDestroy_v2(CUstream h) {
  ENTER();
  READY(c);
  (void)c;
  fk_stream *s = NULL;
  if (h) HASH_FIND_PTR(fk.streams, &h, s);
  if (!s) return fk_leave(CUDA_ERROR_INVALID_HANDLE);
  if (s->cap && s->cap->origin == s)
    capture_drop(s->cap);
  else if (s->cap)
    s->cap->invalidated = 1;
  HASH_DEL(fk.streams, s);
  free(s);
  return fk_leave(CUDA_SUCCESS);
}

static CUresult stream_sync(CUstream h, int per_thread_api) {
  fk_ctx *c;
  CUresult rc = fk_ready(&c);
  fk_stream *s;
  if (rc || (rc = fk_stream_get(c, h, per_thread_api, &s))) return rc;
  if (s->cap) {
    s->cap->invalidated = 1;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  if ((rc = fk_capture_unsafe())) return rc;
  return s->kind == FK_LEGACY ? legacy_implicit(c) : CUDA_SUCCESS;
}

CUresult cuStreamSynchronize(CUstream h) {
  ENTER();
  return fk_leave(stream_sync(h, 0));
}

CUresult cuStreamSynchronize_ptsz(CUstream h) {
  ENTER();
  return fk_leave(stream_sync(h, 1));
}

static CUresult ctx_sync(fk_ctx *c) {
  CUresult rc = fk_capture_unsafe();
  if (rc) return rc;
  fk_capture *cap;
  DL_FOREACH(fk.captures, cap) {
    if (cap->origin->ctx == c) {
      cap->invalidated = 1;
      rc = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
  }
  return rc;
}

CUresult cuCtxSynchronize(void) {
  ENTER();
  READY(c);
  return fk_leave(ctx_sync(c));
}

CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  ENTER();
  READY(c);
  return fk_leave(ctx_sync(ctx ? (fk_ctx *)ctx : c));
}

/* ---- events -------------------------------------------------------------------- */

static fk_event *event_find(CUevent h) {
  fk_event *e = NULL;
  if (h) HASH_FIND_PTR(fk.events, &h, e);
  return e;
}

CUresult cuEventCreate(CUevent *ph, unsigned int flags) {
  ENTER();
  READY(c);
  if (!ph || (flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)))
    return fk_leave(CUDA_ERROR_INVALID_VALUE);
  fk_event *e = calloc(1, sizeof *e);
  if (!e) return fk_leave(CUDA_ERROR_OUT_OF_MEMORY);
  *e = (fk_event){.handle = (CUevent)e, .ctx = c, .flags = flags};
  HASH_ADD_PTR(fk.events, handle, e);
  *ph = e->handle;
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuEventDestroy_v2(CUevent h) {
  ENTER();
  READY(c);
  (void)c;
  fk_event *e = event_find(h);
  if (!e) return fk_leave(CUDA_ERROR_INVALID_HANDLE);
  HASH_DEL(fk.events, e);
  free(e);
  return fk_leave(CUDA_SUCCESS);
}

static CUresult record(CUevent h, CUstream stream, int per_thread_api) {
  fk_ctx *c;
  CUresult rc = fk_ready(&c);
  if (rc) return rc;
  fk_event *e = event_find(h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  fk_stream *s;
  if ((rc = fk_stream_get(c, stream, per_thread_api, &s))) return rc;
  if ((rc = fk_submit(s))) return rc;
  e->cap = s->cap;
  return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent h, CUstream s) {
  ENTER();
  return fk_leave(record(h, s, 0));
}

CUresult cuEventRecord_ptsz(CUevent h, CUstream s) {
  ENTER();
  return fk_leave(record(h, s, 1));
}

static CUresult event_host(CUevent h) {
  fk_ctx *c;
  CUresult rc = fk_ready(&c);
  if (rc) return rc;
  fk_event *e = event_find(h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (e->cap) {
    e->cap->invalidated = 1;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return fk_capture_unsafe();
}

CUresult cuEventQuery(CUevent h) {
  ENTER();
  return fk_leave(event_host(h));
}

CUresult cuEventSynchronize(CUevent h) {
  ENTER();
  return fk_leave(event_host(h));
}

static CUresult wait_event(CUstream stream, CUevent h, unsigned flags, int per_thread_api) {
  fk_ctx *c;
  CUresult rc = fk_ready(&c);
  fk_stream *t;
  if (rc || (rc = fk_stream_get(c, stream, per_thread_api, &t))) return rc;
  fk_event *e = event_find(h);
  if (!e) return CUDA_ERROR_INVALID_HANDLE;
  if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
  if (t->cap && t->cap->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  if (e->cap) {
    if (t->cap == e->cap) return CUDA_SUCCESS;
    if (t->cap) {
      t->cap->invalidated = e->cap->invalidated = 1;
      return CUDA_ERROR_STREAM_CAPTURE_MERGE;
    }
    if (t->kind == FK_LEGACY) {
      e->cap->invalidated = 1;
      return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    t->cap = e->cap; /* a fork: the waiting stream joins the capture */
    return CUDA_SUCCESS;
  }
  if (t->cap) {
    if (flags & CU_EVENT_WAIT_EXTERNAL) return CUDA_SUCCESS;
    t->cap->invalidated = 1;
    return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
  }
  return fk_submit(t);
}

CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int flags) {
  ENTER();
  return fk_leave(wait_event(s, e, flags, 0));
}

CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int flags) {
  ENTER();
  return fk_leave(wait_event(s, e, flags, 1));
}

/* ---- capture ------------------------------------------------------------------- */

static CUresult begin(CUstream h, CUstreamCaptureMode mode, int per_thread_api) {
  fk_ctx *c;
  CUresult rc = fk_ready(&c);
  fk_stream *s;
  if (rc || (rc = fk_stream_get(c, h, per_thread_api, &s))) return rc;
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  if (s->kind == FK_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (s->cap) return CUDA_ERROR_ILLEGAL_STATE;
  fk_capture *cap = calloc(1, sizeof *cap);
  if (!cap) return CUDA_ERROR_OUT_OF_MEMORY;
  *cap = (fk_capture){.origin = s, .mode = mode, .owner = fk_tid()};
  DL_APPEND(fk.captures, cap);
  s->cap = cap;
  return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture(CUstream h) {
  ENTER();
  return fk_leave(begin(h, CU_STREAM_CAPTURE_MODE_GLOBAL, 0));
}
CUresult cuStreamBeginCapture_ptsz(CUstream h) {
  ENTER();
  return fk_leave(begin(h, CU_STREAM_CAPTURE_MODE_GLOBAL, 1));
}
CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode) {
  ENTER();
  return fk_leave(begin(h, mode, 0));
}
CUresult cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode mode) {
  ENTER();
  return fk_leave(begin(h, mode, 1));
}

/* The graph is an opaque token: nothing of the capture is kept. */
static char graph_token;

static CUresult end(CUstream h, CUgraph *graph, int per_thread_api) {
  fk_ctx *c;
  CUresult rc = fk_ready(&c);
  fk_stream *s;
  if (rc || (rc = fk_stream_get(c, h, per_thread_api, &s))) return rc;
  if (!graph) return CUDA_ERROR_INVALID_VALUE;
  fk_capture *cap = s->cap;
  if (!cap) return CUDA_ERROR_ILLEGAL_STATE;
  if (cap->origin != s) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
  if (cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED && cap->owner != fk_tid())
    return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  int bad = cap->invalidated;
  capture_drop(cap);
  *graph = bad ? NULL : (CUgraph)&graph_token;
  return bad ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream h, CUgraph *g) {
  ENTER();
  return fk_leave(end(h, g, 0));
}
CUresult cuStreamEndCapture_ptsz(CUstream h, CUgraph *g) {
  ENTER();
  return fk_leave(end(h, g, 1));
}
