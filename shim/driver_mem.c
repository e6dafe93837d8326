/* driver_mem.c: the driver's memory entry points cudapool serves:
 * cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemFree_v2, cuMemGetInfo_v2.
 *
 * The rules of interpose.c, at the driver level. A call is served from the
 * pool of the current context's device only when the driver layer serves
 * (api.h: not a call the runtime layer is already making, CUDAPOOL_LAYER
 * allows it), the current context is that device's primary context, and no
 * strict capture is running; anything else, and whatever must fail or
 * succeed exactly as natively (NULL outputs, zero sizes), goes to the real
 * function with the program's own arguments. The driver keeps no sticky
 * error, so an error the shim causes never reaches the program.
 *
 * A free looks for its pointer in every pool whatever CUDAPOOL_LAYER says,
 * since a pool block may come from the other layer; an interior pointer or a
 * second free is handed to the driver as ptr|1 (never an allocation start,
 * inside the same segment), which fails exactly as natively.
 *
 * Pitched allocations: the pitch must be the driver's own. It is learnt once
 * per (device, width, element size) from a one-row real allocation, kept in a
 * small table; when the table is full the call passes through.
 *
 * Threads: the pitch table has its own mutex, taken before any pool lock. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <errno.h>
#include <pthread.h>

#include "driver.h"
#include "shim.h"
#include "trace.h"

enum { SERVED, FORWARD, FAILED };

/* Allocate size bytes for the program from dev's pool. SERVED (*out set),
 * FORWARD (the program's own call must be made: it fails or succeeds
 * natively), FAILED (over the limit: out of memory). */
static int serve_alloc(cp_device_t *dev, size_t size, uintptr_t *out) {
  cp_pool_t *pool = cp_device_pool(dev);
  if (!pool) return FORWARD;
  if (cp_alloc(pool, size, CP_STREAM_DEVICE, cp_device_reuse_key(dev), out) == 0) {
    if (cp_trace_enabled()) cp_trace_alloc(*out, size, 0);
    return SERVED;
  }
  if (cp_trace_enabled()) cp_trace_alloc_failure(size, 0);
  cp_config_t cfg;
  cp_get_config(pool, &cfg);
  cudaError_t why = cp_cuda_last_alloc_error();
  /* Without a limit the pool gave back all it could: the program's own
   * call, made now, fails (or succeeds) exactly as natively. */
  if (cfg.limit == CP_NO_LIMIT || (why != cudaSuccess && why != cudaErrorMemoryAllocation)) return FORWARD;
  return FAILED;
}

/* The device to serve an allocation for, or NULL to forward it. */
static cp_device_t *serving_device(void) {
  if (cp_inside || !cp_driver_serving() || cp_capture_strict_active()) return NULL;
  return cp_drv_current_primary();
}

CUresult cp_w_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  CP_DRV_REAL(cuMemAlloc_v2);
  if (!cp_drv.cuMemAlloc_v2) return CUDA_ERROR_NOT_INITIALIZED;
  cp_device_t *dev = dptr && bytesize ? serving_device() : NULL;
  if (!dev) return cp_drv.cuMemAlloc_v2(dptr, bytesize);
  uintptr_t p;
  switch (serve_alloc(dev, bytesize, &p)) {
  case SERVED: *dptr = (CUdeviceptr)p; return CUDA_SUCCESS;
  case FAILED: return CUDA_ERROR_OUT_OF_MEMORY;
  default: return cp_drv.cuMemAlloc_v2(dptr, bytesize);
  }
}

/* ---- pitched allocations ------------------------------------------------------ */

#define PITCH_SLOTS 64

typedef struct pitch_slot {
  int device;
  unsigned elem;
  size_t width, pitch;
} pitch_slot_t;

static pthread_mutex_t pitch_lock = PTHREAD_MUTEX_INITIALIZER;
static pitch_slot_t pitch_slots[PITCH_SLOTS];
static int pitch_used;

/* The driver's pitch for rows of width bytes on dev, 0 when unknown. */
static size_t driver_pitch(int dev, size_t width, unsigned elem) {
  size_t pitch = 0;
  pthread_mutex_lock(&pitch_lock);
  for (int i = 0; i < pitch_used && !pitch; i++)
    if (pitch_slots[i].device == dev && pitch_slots[i].width == width && pitch_slots[i].elem == elem)
      pitch = pitch_slots[i].pitch;
  if (!pitch && pitch_used < PITCH_SLOTS) {
    CUdeviceptr probe = 0;
    if (cp_drv.cuMemAllocPitch_v2(&probe, &pitch, width, 1, elem) == CUDA_SUCCESS) {
      cp_drv.cuMemFree_v2(probe);
      pitch_slots[pitch_used++] = (pitch_slot_t){.device = dev, .elem = elem, .width = width, .pitch = pitch};
    } else {
      pitch = 0;
    }
  }
  pthread_mutex_unlock(&pitch_lock);
  return pitch;
}

CUresult cp_w_cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                                 unsigned int ElementSizeBytes) {
  CP_DRV_REAL(cuMemAllocPitch_v2);
  if (!cp_drv.cuMemAllocPitch_v2) return CUDA_ERROR_NOT_INITIALIZED;
  bool plain = dptr && pPitch && WidthInBytes && Height &&
               (ElementSizeBytes == 4 || ElementSizeBytes == 8 || ElementSizeBytes == 16);
  cp_device_t *dev = plain ? serving_device() : NULL;
  size_t pitch = dev ? driver_pitch(dev->id, WidthInBytes, ElementSizeBytes) : 0;
  uintptr_t p;
  if (pitch && Height <= SIZE_MAX / pitch) {
    switch (serve_alloc(dev, pitch * Height, &p)) {
    case SERVED:
      *dptr = (CUdeviceptr)p;
      *pPitch = pitch;
      return CUDA_SUCCESS;
    case FAILED: return CUDA_ERROR_OUT_OF_MEMORY;
    default: break;
    }
  }
  return cp_drv.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
}

/* ---- frees --------------------------------------------------------------------- */

static bool owned_by_pool(uintptr_t p) {
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));) {
    cp_pool_t *pool = atomic_load(&dev->pool);
    if (pool && cp_block_size(pool, p)) return true;
  }
  return false;
}

CUresult cp_w_cuMemFree_v2(CUdeviceptr dptr) {
  CP_DRV_REAL(cuMemFree_v2);
  if (!cp_drv.cuMemFree_v2) return CUDA_ERROR_NOT_INITIALIZED;
  /* At depth > 0 this is the shim's own call: a whole segment going back, or
   * a pointer the runtime layer found foreign. */
  if (!dptr || cp_inside || !cp_drv_hooking()) return cp_drv.cuMemFree_v2(dptr);
  uintptr_t p = (uintptr_t)dptr;
  if (cp_capture_strict_active() && owned_by_pool(p)) {
    /* Natively this fails (and invalidates the capture) or succeeds
     * depending on the thread's capture mode: ptr|1 asks the driver the
     * same question without touching the segment; invalid-value means the
     * capture did not object. */
    CUresult rc = cp_drv.cuMemFree_v2(p | 1);
    if (rc != CUDA_ERROR_INVALID_VALUE) return rc;
  }
  unsigned flags = 0;
  if (cp_opts.mode == CP_MODE_SYNC && cp_drv.cuCtxSynchronize) {
    /* The program may use the free as a barrier for host reads. */
    CUresult rc = cp_drv.cuCtxSynchronize();
    if (rc != CUDA_SUCCESS) return rc;
    flags = CP_FREE_DEVICE_IDLE;
  }
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));) {
    cp_pool_t *pool = atomic_load(&dev->pool);
    if (!pool) continue;
    /* Recorded before the free: once freed, another thread may get the
     * block and record its allocation first. */
    size_t traced;
    if (cp_trace_enabled() && (traced = cp_block_size(pool, p))) cp_trace_free(p, traced, 0);
    int rc = cp_free(pool, p, cp_device_reuse_key(dev), flags);
    if (rc == 0) return CUDA_SUCCESS;
    if (rc == EINVAL) return cp_drv.cuMemFree_v2(p | 1);
  }
  return cp_drv.cuMemFree_v2(dptr);
}

CUresult cp_w_cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  CP_DRV_REAL(cuMemGetInfo_v2);
  if (!cp_drv.cuMemGetInfo_v2) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult rc = cp_drv.cuMemGetInfo_v2(free_bytes, total_bytes);
  if (rc != CUDA_SUCCESS || !free_bytes || !total_bytes || cp_inside || !cp_drv_hooking()) return rc;
  /* The pool (not yet any memory) is made here so that a limit shows
   * before the first allocation: frameworks size themselves from this.
   * Whichever layer serves, memory the pool caches is free to the program. */
  cp_device_t *dev = cp_drv_current_primary();
  cp_pool_t *pool = !dev ? NULL : cp_driver_serving() ? cp_device_pool(dev) : atomic_load(&dev->pool);
  if (pool) cp_device_adjust_meminfo(pool, free_bytes, total_bytes);
  return rc;
}

CP_DRV_EXPORT(cuMemAlloc_v2)
CP_DRV_EXPORT(cuMemAllocPitch_v2)
CP_DRV_EXPORT(cuMemFree_v2)
CP_DRV_EXPORT(cuMemGetInfo_v2)
