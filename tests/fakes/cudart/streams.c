/* streams.c: streams, events and the synchronisation calls.
 *
 * Work "completes" at once unless events are held (clock.c decides); the
 * capture rules of capture.c are applied before anything else. Stream and
 * event handles are looked up in fc.streams / fc.events, so a destroyed or
 * bogus handle gives cudaErrorInvalidResourceHandle. A capturing stream or a
 * captured event may not be queried or synchronised
 * (cudaErrorStreamCaptureUnsupported, the capture invalidated). */
#include "fake.h"

#include <stdlib.h>
#include <utlist.h>

#define ENTER() fc_enter(__func__)

static cudaError_t create_on(int dev, cudaStream_t *out, unsigned flags, int priority) {
  if (!out || (flags & ~(unsigned)cudaStreamNonBlocking)) return cudaErrorInvalidValue;
  fc_stream *s = calloc(1, sizeof *s);
  if (!s) return cudaErrorMemoryAllocation;
  fc_stream_link(s, FC_STREAM_CREATED, dev, flags);
  s->priority = priority > 0 ? 0 : priority < -5 ? -5 : priority;
  s->handle = (cudaStream_t)s;
  HASH_ADD(hh, fc.streams, handle, sizeof(cudaStream_t), s);
  *out = s->handle;
  return cudaSuccess;
}

static cudaError_t create(cudaStream_t *out, unsigned flags, int priority) {
  return create_on(fc_cur_device(), out, flags, priority);
}

/* A green context's stream (fakecuda.h): a created stream of its device. */
cudaError_t fc_stream_create_on(int dev, cudaStream_t *out, unsigned flags) {
  if (dev < 0 || dev >= fc.ndev) return cudaErrorInvalidDevice;
  return create_on(dev, out, flags, 0);
}

int fc_stream_device(cudaStream_t h) {
  fc_stream *s;
  return fc_stream_get(h, 0, &s) == cudaSuccess ? s->device : -1;
}

static void destroy(fc_stream *s) {
  if (s->cap && s->cap->origin == s)
    fc_capture_drop(s->cap);
  else if (s->cap)
    s->cap->invalidated = 1;
  HASH_DELETE(hh, fc.streams, s);
  fc_stream_unlink(s);
  free(s);
}

void fc_streams_drop_device(int dev) {
  fc_capture *c, *ctmp;
  DL_FOREACH_SAFE(fc.captures, c, ctmp)
  if (c->device == dev) fc_capture_drop(c);
  fc_stream *s, *tmp;
  HASH_ITER(hh, fc.streams, s, tmp)
  if (s->device == dev) destroy(s);
  fc_event *e, *etmp;
  HASH_ITER(hh, fc.events, e, etmp) {
    if (e->device != dev) continue;
    HASH_DELETE(hh, fc.events, e);
    fc_vc_free(&e->vc);
    free(e);
  }
}

cudaError_t cudaStreamCreate(cudaStream_t *s) {
  ENTER();
  return fc_leave(create(s, 0, 0));
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
  ENTER();
  return fc_leave(create(s, flags, 0));
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority) {
  ENTER();
  return fc_leave(create(s, flags, priority));
}

cudaError_t cudaStreamDestroy(cudaStream_t h) {
  ENTER();
  fc_stream *s;
  HASH_FIND(hh, fc.streams, &h, sizeof h, s);
  if (!s) return fc_leave(cudaErrorInvalidResourceHandle);
  destroy(s);
  return fc_leave(cudaSuccess);
}

static cudaError_t get_flags(cudaStream_t h, unsigned *flags, int ptsz) {
  fc_stream *s;
  cudaError_t err = fc_stream_get(h, ptsz, &s);
  if (err) return err;
  if (!flags) return cudaErrorInvalidValue;
  *flags = s->flags;
  return cudaSuccess;
}
cudaError_t cudaStreamGetFlags(cudaStream_t h, unsigned int *flags) {
  ENTER();
  return fc_leave(get_flags(h, flags, 0));
}
cudaError_t cudaStreamGetFlags_ptsz(cudaStream_t h, unsigned int *flags) {
  ENTER();
  return fc_leave(get_flags(h, flags, 1));
}

/* Query and synchronize share their checks; sync then makes the work known
 * complete, query only reports. */
static cudaError_t stream_wait_host(cudaStream_t h, int ptsz, int sync) {
  fc_stream *s;
  cudaError_t err = fc_stream_get(h, ptsz, &s);
  if (err) return err;
  if (s->cap) {
    s->cap->invalidated = 1;
    return cudaErrorStreamCaptureUnsupported;
  }
  if ((err = fc_capture_unsafe())) return err;
  if (s->kind == FC_STREAM_LEGACY && (err = fc_capture_legacy(s->device))) return err;
  if (sync) fc_clock_sync_stream(s);
  return fc_clock_stream_idle(s) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  ENTER();
  return fc_leave(stream_wait_host(s, 0, 1));
}
cudaError_t cudaStreamSynchronize_ptsz(cudaStream_t s) {
  ENTER();
  return fc_leave(stream_wait_host(s, 1, 1));
}
cudaError_t cudaStreamQuery(cudaStream_t s) {
  ENTER();
  return fc_leave(stream_wait_host(s, 0, 0));
}
cudaError_t cudaStreamQuery_ptsz(cudaStream_t s) {
  ENTER();
  return fc_leave(stream_wait_host(s, 1, 0));
}

cudaError_t cudaDeviceSynchronize(void) {
  ENTER();
  cudaError_t err = fc_capture_unsafe();
  if (err) return fc_leave(err);
  int dev = fc_cur_device();
  if (fc_capture_active_on(dev)) {
    fc_capture_invalidate_device(dev);
    return fc_leave(cudaErrorStreamCaptureUnsupported);
  }
  fc_clock_sync_device(dev);
  return fc_leave(cudaSuccess);
}

static fc_event *event_find(cudaEvent_t h) {
  fc_event *e;
  HASH_FIND(hh, fc.events, &h, sizeof h, e);
  return e;
}

static cudaError_t event_create(cudaEvent_t *out, unsigned flags) {
  if (!out || (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming | cudaEventInterprocess)))
    return cudaErrorInvalidValue;
  if ((flags & cudaEventInterprocess) && !(flags & cudaEventDisableTiming)) return cudaErrorInvalidValue;
  fc_event *e = calloc(1, sizeof *e);
  if (!e) return cudaErrorMemoryAllocation;
  e->device = fc_cur_device();
  e->flags = flags;
  e->handle = (cudaEvent_t)e;
  HASH_ADD(hh, fc.events, handle, sizeof(cudaEvent_t), e);
  *out = e->handle;
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) {
  ENTER();
  return fc_leave(event_create(e, 0));
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
  ENTER();
  return fc_leave(event_create(e, flags));
}

cudaError_t cudaEventDestroy(cudaEvent_t h) {
  ENTER();
  fc_event *e = event_find(h);
  if (!e) return fc_leave(cudaErrorInvalidResourceHandle);
  HASH_DELETE(hh, fc.events, e);
  fc_vc_free(&e->vc);
  free(e);
  return fc_leave(cudaSuccess);
}

static cudaError_t record(cudaEvent_t h, cudaStream_t stream, int ptsz) {
  fc_event *e = event_find(h);
  if (!e) return cudaErrorInvalidResourceHandle;
  fc_stream *s;
  cudaError_t err = fc_stream_get(stream, ptsz, &s);
  if (err) return err;
  if (s->device != e->device) return cudaErrorInvalidResourceHandle;
  int captured;
  if ((err = fc_submit(s, NULL, &captured))) return err;
  if (captured) {
    e->recorded = 1;
    e->cap = s->cap;
    return cudaSuccess;
  }
  fc_clock_record(e, s);
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
  ENTER();
  return fc_leave(record(e, s, 0));
}
cudaError_t cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s) {
  ENTER();
  return fc_leave(record(e, s, 1));
}
cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int flags) {
  ENTER();
  if (flags & ~(unsigned)cudaEventRecordExternal) return fc_leave(cudaErrorInvalidValue);
  return fc_leave(record(e, s, 0));
}
cudaError_t cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s, unsigned int flags) {
  ENTER();
  if (flags & ~(unsigned)cudaEventRecordExternal) return fc_leave(cudaErrorInvalidValue);
  return fc_leave(record(e, s, 1));
}

static cudaError_t wait_event(cudaStream_t stream, cudaEvent_t h, unsigned flags, int ptsz) {
  fc_stream *t;
  cudaError_t err = fc_stream_get(stream, ptsz, &t);
  if (err) return err;
  fc_event *e = event_find(h);
  if (!e) return cudaErrorInvalidResourceHandle;
  if (flags & ~(unsigned)cudaEventWaitExternal) return cudaErrorInvalidValue;
  if (t->cap && t->cap->invalidated) return cudaErrorStreamCaptureInvalidated;
  if (e->cap) {
    if (t->cap == e->cap) return cudaSuccess;
    if (t->cap) {
      t->cap->invalidated = e->cap->invalidated = 1;
      return cudaErrorStreamCaptureMerge;
    }
    if (t->kind == FC_STREAM_LEGACY) {
      e->cap->invalidated = 1;
      return cudaErrorStreamCaptureImplicit;
    }
    t->cap = e->cap; /* a fork: the waiting stream joins the capture */
    return cudaSuccess;
  }
  if (t->cap) {
    if (flags & cudaEventWaitExternal) return cudaSuccess;
    t->cap->invalidated = 1;
    return cudaErrorStreamCaptureIsolation;
  }
  int captured;
  return fc_submit(t, fc_clock_event_done(e) ? NULL : &e->vc, &captured);
}
/* The driver's cuStreamWaitEvent(_ptsz) of the fake libcuda beside the
 * runtime (fakecuda.h): the same wait, through no cuda* entry point. */
cudaError_t fc_stream_wait_event(cudaStream_t s, cudaEvent_t e, unsigned flags, int ptsz) {
  return wait_event(s, e, flags, ptsz);
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  ENTER();
  return fc_leave(wait_event(s, e, flags, 0));
}
cudaError_t cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  ENTER();
  return fc_leave(wait_event(s, e, flags, 1));
}

static cudaError_t event_wait_host(cudaEvent_t h, int sync) {
  fc_event *e = event_find(h);
  if (!e) return cudaErrorInvalidResourceHandle;
  if (e->cap) {
    e->cap->invalidated = 1;
    return cudaErrorStreamCaptureUnsupported;
  }
  cudaError_t err = fc_capture_unsafe();
  if (err) return err;
  if (sync) fc_clock_sync_event(e);
  return fc_clock_event_done(e) ? cudaSuccess : cudaErrorNotReady;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  ENTER();
  return fc_leave(event_wait_host(e, 0));
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  ENTER();
  return fc_leave(event_wait_host(e, 1));
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t stop) {
  ENTER();
  if (!ms) return fc_leave(cudaErrorInvalidValue);
  fc_event *a = event_find(start), *b = event_find(stop);
  if (!a || !b || !a->recorded || !b->recorded || a->cap || b->cap ||
      ((a->flags | b->flags) & cudaEventDisableTiming))
    return fc_leave(cudaErrorInvalidResourceHandle);
  if (!fc_clock_event_done(a) || !fc_clock_event_done(b)) return fc_leave(cudaErrorNotReady);
  *ms = (float)(b->ms - a->ms);
  return fc_leave(cudaSuccess);
}
