/* work.c: the fake driver's work on a stream, as far as cudapool's tests of
 * the work entry points need it (shim/entry/driver_work.c): a kernel launch
 * (no kernel runs: the launch is checked against its stream and the capture
 * rules, as any work is), an asynchronous memset and a host-to-device copy,
 * each with its per-thread twin (and the copy's first, 32-bit variant), and
 * cuFutureLaunch, an entry point no
 * cuda.h declares (proc.c hands it out), standing for one from a driver
 * newer than cudapool's build.
 *
 * Work completes at once (fk.h), so the asynchronous calls write their
 * memory before they return. */
#include "fk.h"

#include <string.h>

#define ENTER() fk_enter(__func__)

/* The stream's work may run: a live context, a known stream, no capture
 * rule broken. */
static CUresult on_stream(CUstream h, int per_thread_api) {
  fk_ctx *c;
  fk_stream *s;
  CUresult rc = fk_ready(&c);
  if (rc || (rc = fk_stream_get(c, h, per_thread_api, &s))) return rc;
  return fk_submit(s);
}

static CUresult launch(CUfunction f, CUstream h, int per_thread_api) {
  if (!f) return CUDA_ERROR_INVALID_HANDLE;
  return on_stream(h, per_thread_api);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int shared, CUstream h, void **params,
                        void **extra) {
  ENTER();
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)params, (void)extra;
  return fk_leave(launch(f, h, 0));
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                             unsigned int by, unsigned int bz, unsigned int shared, CUstream h, void **params,
                             void **extra) {
  ENTER();
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)params, (void)extra;
  return fk_leave(launch(f, h, 1));
}

static int device_range(CUdeviceptr p, size_t n) {
  return !n || fk_alloc_containing((uintptr_t)p, n) || fk_vmm_accessible((uintptr_t)p, n);
}

static CUresult memset_async(CUdeviceptr dst, unsigned char value, size_t n, CUstream h, int per_thread_api) {
  CUresult rc = on_stream(h, per_thread_api);
  if (rc) return rc;
  if (!device_range(dst, n)) return CUDA_ERROR_INVALID_VALUE;
  if (n) memset((void *)(uintptr_t)dst, value, n);
  return CUDA_SUCCESS;
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream h) {
  ENTER();
  return fk_leave(memset_async(dst, value, n, h, 0));
}

CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char value, size_t n, CUstream h) {
  ENTER();
  return fk_leave(memset_async(dst, value, n, h, 1));
}

static CUresult copy_async(CUdeviceptr dst, const void *src, size_t n, CUstream h, int per_thread_api) {
  CUresult rc = on_stream(h, per_thread_api);
  if (rc) return rc;
  if (n && (!src || !device_range(dst, n))) return CUDA_ERROR_INVALID_VALUE;
  if (n) memcpy((void *)(uintptr_t)dst, src, n);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream h) {
  ENTER();
  return fk_leave(copy_async(dst, src, n, h, 0));
}

/* The first variant (CUDA 2.0): 32-bit device pointers, which no
 * allocation here has; it answers as the driver does for such an address. */
CUresult cuMemcpyHtoDAsync(CUdeviceptr_v1 dst, const void *src, unsigned int n, CUstream h) {
  ENTER();
  return fk_leave(copy_async((CUdeviceptr)dst, src, n, h, 0));
}

CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream h) {
  ENTER();
  return fk_leave(copy_async(dst, src, n, h, 1));
}

CUresult fk_future_launch(CUstream h) {
  ENTER();
  return fk_leave(on_stream(h, 0));
}
