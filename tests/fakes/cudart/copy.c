/* copy.c: cudaMemcpy/cudaMemset and their async and per-thread-stream
 * variants. Device-side ranges must lie inside one live allocation, or the
 * call fails with cudaErrorInvalidValue and touches nothing; then the bytes
 * are moved on host memory at once and the access is recorded for the race
 * detector (clock.c). Work on a capturing stream is recorded into the
 * capture, not run (capture.c). Synchronous cudaMemcpy waits for its stream,
 * except device-to-device copies, which are asynchronous natively too. */
#include "fake.h"

#include <string.h>

static int range_ok(const void *p, size_t n) {
  fc_alloc *a = fc_alloc_containing(p);
  return a && n <= a->size - (size_t)((const char *)p - a->base);
}

static cudaError_t copy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t stream,
                        int ptsz, int sync) {
  int dd, sd;
  switch (kind) {
    case cudaMemcpyHostToHost:
      dd = 0;
      sd = 0;
      break;
    case cudaMemcpyHostToDevice:
      dd = 1;
      sd = 0;
      break;
    case cudaMemcpyDeviceToHost:
      dd = 0;
      sd = 1;
      break;
    case cudaMemcpyDeviceToDevice:
      dd = 1;
      sd = 1;
      break;
    case cudaMemcpyDefault:
      dd = fc_alloc_containing(dst) != NULL;
      sd = fc_alloc_containing(src) != NULL;
      break;
    default: return cudaErrorInvalidMemcpyDirection;
  }
  fc_stream *s;
  cudaError_t err = fc_stream_get(stream, ptsz, &s);
  if (err) return err;
  if (n == 0) return cudaSuccess;
  if ((dd && !range_ok(dst, n)) || (sd && !range_ok(src, n)) || !dst || !src) return cudaErrorInvalidValue;
  int captured;
  err = fc_submit(s, NULL, &captured);
  if (err || captured) return err;
  memmove(dst, src, n);
  if (sd) fc_clock_access(s, src, n, 0);
  if (dd) fc_clock_access(s, dst, n, 1);
  if (sync && !(dd && sd)) fc_clock_sync_stream(s);
  return cudaSuccess;
}

static cudaError_t set(void *p, int value, size_t n, cudaStream_t stream, int ptsz) {
  fc_stream *s;
  cudaError_t err = fc_stream_get(stream, ptsz, &s);
  if (err) return err;
  if (n == 0) return cudaSuccess;
  if (!range_ok(p, n)) return cudaErrorInvalidValue;
  int captured;
  err = fc_submit(s, NULL, &captured);
  if (err || captured) return err;
  memset(p, value, n);
  fc_clock_access(s, p, n, 1);
  return cudaSuccess;
}

#define ENTER() fc_enter(__func__)

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  ENTER();
  return fc_leave(copy(dst, src, n, kind, NULL, 0, 1));
}
cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  ENTER();
  return fc_leave(copy(dst, src, n, kind, NULL, 1, 1));
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) {
  ENTER();
  return fc_leave(copy(dst, src, n, kind, s, 0, 0));
}
cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                                 cudaStream_t s) {
  ENTER();
  return fc_leave(copy(dst, src, n, kind, s, 1, 0));
}
cudaError_t cudaMemset(void *p, int value, size_t n) {
  ENTER();
  return fc_leave(set(p, value, n, NULL, 0));
}
cudaError_t cudaMemset_ptds(void *p, int value, size_t n) {
  ENTER();
  return fc_leave(set(p, value, n, NULL, 1));
}
cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s) {
  ENTER();
  return fc_leave(set(p, value, n, s, 0));
}
cudaError_t cudaMemsetAsync_ptsz(void *p, int value, size_t n, cudaStream_t s) {
  ENTER();
  return fc_leave(set(p, value, n, s, 1));
}
