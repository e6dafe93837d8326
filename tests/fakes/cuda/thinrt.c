/* thinrt.c: a thin CUDA runtime over the driver, built as
 * build/fakecuda/rt/libcudart.so.13. It reaches the driver as libcudart
 * does: dlopen("libcuda.so.1"), one dlsym of cuGetProcAddress_v2, then
 * cuGetProcAddress for every entry point, and maps each runtime call onto
 * the driver (cudaMalloc onto cuMemAlloc_v2, cudaStreamCreate onto
 * cuStreamCreate, ...). Under cudapool both layers are then interposed in
 * one process, which is what the tests of "one pool whichever layer" need:
 * the fake runtime (tests/fakes/cudart) does not call a driver at all.
 *
 * Only what those tests use is here. Errors: CUresult and cudaError_t share
 * their numbers for every code the fake driver returns; the last error is
 * per thread (cudaGetLastError returns it once), cudaErrorNotReady is not
 * recorded. The primary context of the thread's device is made current on
 * every call, retained once per device.
 *
 * Threads: the driver table is filled once (pthread_once); everything else
 * is per thread. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define D(X)                                                                                               \
  X(cuInit, 2000, 0)                                                                                       \
  X(cuDeviceGetCount, 2000, 0) X(cuCtxGetCurrent, 4000, 0) X(cuCtxGetDevice, 2000, 0)                      \
      X(cuCtxSetCurrent, 4000, 0) X(cuDevicePrimaryCtxRetain, 7000, 0)                                     \
          X(cuDevicePrimaryCtxReset_v2, 11000, 0) X(cuMemAlloc_v2, 3020, 0) X(cuMemAllocPitch_v2, 3020, 0) \
              X(cuMemFree_v2, 3020, 0) X(cuMemGetInfo_v2, 3020, 0) X(cuMemsetD8_v2, 3020, 0)               \
                  X(cuMemcpyHtoD_v2, 3020, 0) X(cuMemcpyDtoH_v2, 3020, 0) X(cuStreamCreate, 2000, 0)       \
                      X(cuStreamCreateWithPriority, 5050, 0) X(cuStreamDestroy_v2, 4000, 0)                \
                          X(cuStreamSynchronize, 2000, 0) X(cuCtxSynchronize, 2000, 0)                     \
                              X(cuStreamBeginCapture_v2, 10010, 0) X(cuStreamEndCapture, 10000, 0)         \
                                  X(cuEventCreate, 2000, 0) X(cuEventRecord, 2000, 0)                      \
                                      X(cuEventQuery, 2000, 0) X(cuEventSynchronize, 2000, 0)              \
                                          X(cuEventDestroy_v2, 4000, 0) X(cuStreamWaitEvent, 3020, 0)

static struct {
#define FIELD(name, version, flags) __typeof__(name) *name;
  D(FIELD)
#undef FIELD
} drv;

/* The base name cuGetProcAddress wants: without the _v2 suffix. */
static void base_name(const char *name, char *out, size_t cap) {
  snprintf(out, cap, "%s", name);
  char *v = strstr(out, "_v2");
  if (v && v[3] == '\0') *v = '\0';
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static atomic_bool loaded;

static void load(void) {
  void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  typedef __typeof__(cuGetProcAddress_v2) gpa_fn;
  gpa_fn *gpa = (gpa_fn *)dlsym(h, "cuGetProcAddress_v2");
  if (!gpa) return;
  char base[64];
  bool ok = true;
#define LOOKUP(name, version, flags)   \
  base_name(#name, base, sizeof base); \
  ok = ok && gpa(base, (void **)&drv.name, version, flags, NULL) == CUDA_SUCCESS && drv.name;
  D(LOOKUP)
#undef LOOKUP
  if (ok && drv.cuInit(0) == CUDA_SUCCESS) atomic_store(&loaded, true);
}

static __thread cudaError_t tl_last;
static __thread int tl_device;
static pthread_mutex_t retain_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primaries[16];

static cudaError_t note(CUresult rc) {
  cudaError_t e = (cudaError_t)rc;
  if (e != cudaSuccess && e != cudaErrorNotReady) tl_last = e;
  return e;
}

/* The driver loaded and the thread's device's primary context current. */
static CUresult ready(void) {
  pthread_once(&once, load);
  if (!atomic_load(&loaded)) return CUDA_ERROR_NOT_INITIALIZED;
  CUcontext cur = NULL;
  CUdevice dev = -1;
  if (drv.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur && drv.cuCtxGetDevice(&dev) == CUDA_SUCCESS &&
      dev == tl_device)
    return CUDA_SUCCESS;
  pthread_mutex_lock(&retain_lock);
  CUresult rc = CUDA_SUCCESS;
  if (!primaries[tl_device]) rc = drv.cuDevicePrimaryCtxRetain(&primaries[tl_device], tl_device);
  CUcontext want = primaries[tl_device];
  pthread_mutex_unlock(&retain_lock);
  return rc ? rc : drv.cuCtxSetCurrent(want);
}

#define CALL(expr)                         \
  do {                                     \
    CUresult ready_rc_ = ready();          \
    if (ready_rc_) return note(ready_rc_); \
    return note(expr);                     \
  } while (0)

cudaError_t cudaGetLastError(void) {
  cudaError_t e = tl_last;
  tl_last = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return tl_last; }

cudaError_t cudaGetDeviceCount(int *n) { CALL(drv.cuDeviceGetCount(n)); }

cudaError_t cudaGetDevice(int *dev) {
  if (!dev) return note(CUDA_ERROR_INVALID_VALUE);
  *dev = tl_device;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev) {
  int n = 0;
  pthread_once(&once, load);
  if (!atomic_load(&loaded)) return note(CUDA_ERROR_NOT_INITIALIZED);
  if (drv.cuDeviceGetCount(&n) != CUDA_SUCCESS || dev < 0 || dev >= n || dev >= 16)
    return note(CUDA_ERROR_INVALID_DEVICE);
  tl_device = dev;
  CALL(CUDA_SUCCESS);
}

cudaError_t cudaMalloc(void **p, size_t size) {
  if (p && size == 0) {
    *p = NULL;
    return cudaSuccess;
  }
  CALL(drv.cuMemAlloc_v2((CUdeviceptr *)p, size));
}

cudaError_t cudaMallocPitch(void **p, size_t *pitch, size_t width, size_t height) {
  CALL(drv.cuMemAllocPitch_v2((CUdeviceptr *)p, pitch, width, height, 16));
}

cudaError_t cudaFree(void *p) { CALL(drv.cuMemFree_v2((CUdeviceptr)(uintptr_t)p)); }

cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
  CALL(drv.cuMemGetInfo_v2(free_bytes, total));
}

cudaError_t cudaMemset(void *p, int value, size_t n) {
  CALL(drv.cuMemsetD8_v2((CUdeviceptr)(uintptr_t)p, (unsigned char)value, n));
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  if (kind == cudaMemcpyHostToDevice) CALL(drv.cuMemcpyHtoD_v2((CUdeviceptr)(uintptr_t)dst, src, n));
  if (kind == cudaMemcpyDeviceToHost) CALL(drv.cuMemcpyDtoH_v2(dst, (CUdeviceptr)(uintptr_t)src, n));
  return note(CUDA_ERROR_INVALID_VALUE);
}

cudaError_t cudaDeviceSynchronize(void) { CALL(drv.cuCtxSynchronize()); }
cudaError_t cudaDeviceReset(void) { CALL(drv.cuDevicePrimaryCtxReset_v2(tl_device)); }

cudaError_t cudaStreamCreate(cudaStream_t *s) { CALL(drv.cuStreamCreate(s, 0)); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
  CALL(drv.cuStreamCreate(s, flags));
}
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority) {
  CALL(drv.cuStreamCreateWithPriority(s, flags, priority));
}
cudaError_t cudaStreamDestroy(cudaStream_t s) { CALL(drv.cuStreamDestroy_v2(s)); }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { CALL(drv.cuStreamSynchronize(s)); }
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode) {
  CALL(drv.cuStreamBeginCapture_v2(s, (CUstreamCaptureMode)mode));
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) {
  CALL(drv.cuStreamEndCapture(s, (CUgraph *)g));
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
  CALL(drv.cuEventCreate(e, flags));
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { CALL(drv.cuEventRecord(e, s)); }
cudaError_t cudaEventQuery(cudaEvent_t e) { CALL(drv.cuEventQuery(e)); }
cudaError_t cudaEventSynchronize(cudaEvent_t e) { CALL(drv.cuEventSynchronize(e)); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { CALL(drv.cuEventDestroy_v2(e)); }
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
  CALL(drv.cuStreamWaitEvent(s, e, flags));
}
