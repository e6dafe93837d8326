/* driver_api.c: finding libcuda, the primary-context cache, and the driver
 * flavour of api.h (see driver.h and api.h).
 *
 * The pool serves only memory of a device's primary context: that is the
 * context the runtime (shared or static), CuPy and XLA use, and the only
 * one the shim can make current again for its own calls (a freed segment, a
 * barrier issued from another thread). Calls made in a context the program
 * created itself pass through.
 *
 * The primary handle of a device is cached once seen active; the reset and
 * release wrappers forget it (driver_stream.c). Finding it never creates a
 * context: an inactive primary context is reported as none.
 *
 * Threads: `lock` guards the lookup of libcuda; the cache is atomics. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "backend/api.h"
#include "backend/driver.h"

cp_drv_t cp_drv;

enum { DRV_UNKNOWN, DRV_READY, DRV_UNUSABLE };
static atomic_int state;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(CUcontext) primary[CP_MAX_DEVICES];
static void *_Atomic libcuda; /* the handle resolve() opened */

/* Resolved once libcuda is loaded; kept open so its functions stay valid. */
static void resolve(void) {
  void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return;
  atomic_store(&libcuda, h);
  bool ok = true;
/* Stored atomically: a wrapper may be reading its own field meanwhile. */
#define CP_DRV_RESOLVE(name) \
  __atomic_store_n(&cp_drv.name, (__typeof__(name) *)cp_real_dlsym(h, #name), __ATOMIC_RELEASE);
#define CP_DRV_RESOLVE2(name, needed) \
  CP_DRV_RESOLVE(name)                \
  if (needed && !cp_drv.name) ok = false;
  CP_DRV_SERVED(CP_DRV_RESOLVE)
  CP_DRV_OTHERS(CP_DRV_RESOLVE2)
#undef CP_DRV_RESOLVE
#undef CP_DRV_RESOLVE2
  ok = ok && cp_drv.cuMemAlloc_v2 && cp_drv.cuMemFree_v2 && cp_drv.cuMemGetInfo_v2 &&
       cp_drv.cuDevicePrimaryCtxRelease_v2 && cp_drv.cuStreamWaitEvent;
  atomic_store(&state, ok ? DRV_READY : DRV_UNUSABLE);
}

bool cp_drv_ready(void) {
  int s = atomic_load_explicit(&state, memory_order_acquire);
  if (s != DRV_UNKNOWN) return s == DRV_READY;
  pthread_mutex_lock(&lock);
  if (atomic_load(&state) == DRV_UNKNOWN) resolve();
  pthread_mutex_unlock(&lock);
  return atomic_load(&state) == DRV_READY;
}

void *cp_drv_handle(void) {
  cp_drv_ready();
  return atomic_load(&libcuda);
}

/* ---- primary contexts -------------------------------------------------------- */

CUcontext cp_drv_primary(int dev) {
  if (dev < 0 || dev >= CP_MAX_DEVICES || !cp_drv_ready()) return NULL;
  CUcontext ctx = atomic_load_explicit(&primary[dev], memory_order_acquire);
  if (ctx) return ctx;
  unsigned flags = 0;
  int active = 0;
  if (cp_drv.cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active) return NULL;
  /* Active, so retained by the program: this retain and release only read
   * the handle. */
  if (cp_drv.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS) return NULL;
  cp_drv.cuDevicePrimaryCtxRelease_v2(dev);
  atomic_store_explicit(&primary[dev], ctx, memory_order_release);
  return ctx;
}

/* Bumped whenever a primary handle is forgotten: it invalidates every
 * thread's cached answer (state/driver_device.c). */
atomic_uint cp_drv_primary_generation;

void cp_drv_forget_primary(int dev) {
  if (dev >= 0 && dev < CP_MAX_DEVICES) atomic_store(&primary[dev], NULL);
  atomic_fetch_add(&cp_drv_primary_generation, 1);
}

/* ---- the driver flavour of api.h ----------------------------------------------- */

static int ok(CUresult rc) { return rc == CUDA_SUCCESS ? 0 : -1; }

static int drv_current_device(int *dev) {
  CUdevice d = 0;
  if (cp_drv.cuCtxGetDevice(&d) != CUDA_SUCCESS) return -1;
  *dev = d;
  return 0;
}

static int drv_device_count(int *count) {
  return cp_drv.cuDeviceGetCount ? ok(cp_drv.cuDeviceGetCount(count)) : -1;
}

/* The token is the device whose primary context was pushed. */
static int drv_enter(int dev) {
  CUcontext want = cp_drv_primary(dev), cur = NULL;
  if (!want || (cp_drv.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == want)) return -1;
  return cp_drv.cuCtxPushCurrent_v2(want) == CUDA_SUCCESS ? dev : -1;
}

static void drv_leave(int token) {
  CUcontext popped;
  if (token >= 0) cp_drv.cuCtxPopCurrent_v2(&popped);
}

static int drv_mem_alloc(size_t size, uintptr_t *out) {
  CUdeviceptr p = 0;
  CUresult rc = cp_drv.cuMemAlloc_v2(&p, size);
  if (rc != CUDA_SUCCESS) return rc == CUDA_ERROR_OUT_OF_MEMORY ? ENOMEM : EIO;
  *out = (uintptr_t)p;
  return 0;
}

static int drv_mem_free(uintptr_t addr) { return cp_drv.cuMemFree_v2((CUdeviceptr)addr) == CUDA_SUCCESS ? 0 : -1; }

static int drv_mem_get_info(size_t *free_bytes, size_t *total_bytes) {
  return ok(cp_drv.cuMemGetInfo_v2(free_bytes, total_bytes));
}

static int drv_event_create(cudaEvent_t *ev) { return ok(cp_drv.cuEventCreate(ev, CU_EVENT_DISABLE_TIMING)); }
static void drv_event_destroy(cudaEvent_t ev) { cp_drv.cuEventDestroy_v2(ev); }
static int drv_event_record(cudaEvent_t ev, cudaStream_t s) { return ok(cp_drv.cuEventRecord(ev, s)); }
static int drv_event_query(cudaEvent_t ev) { return cp_drv.cuEventQuery(ev) == CUDA_SUCCESS; }
static int drv_event_sync(cudaEvent_t ev) { return ok(cp_drv.cuEventSynchronize(ev)); }
static int drv_stream_wait(cudaStream_t s, cudaEvent_t ev) { return ok(cp_drv.cuStreamWaitEvent(s, ev, 0)); }

static int drv_stream_idle(cudaStream_t s) {
  return cp_drv.cuStreamQuery && cp_drv.cuStreamQuery(s) == CUDA_SUCCESS;
}

static int drv_stream_capturing(cudaStream_t s) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (!cp_drv.cuStreamIsCapturing || cp_drv.cuStreamIsCapturing(s, &status) != CUDA_SUCCESS) return -1;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

static int drv_device_uuid(int dev, unsigned char *uuid) {
  CUuuid u;
  if (!cp_drv.cuDeviceGetUuid_v2 || cp_drv.cuDeviceGetUuid_v2(&u, dev) != CUDA_SUCCESS) return -1;
  memcpy(uuid, u.bytes, sizeof u.bytes);
  return 0;
}

#define DRV_OP(ret, op, params) .op = drv_##op,
const cp_api_t cp_api_driver = {.name = "driver", CP_API_OPS(DRV_OP)};
#undef DRV_OP
