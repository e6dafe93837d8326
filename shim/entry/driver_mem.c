/* driver_mem.c: the driver's memory entry points cudapool serves:
 * cuMemAlloc_v2, cuMemAllocPitch_v2, cuMemFree_v2, cuMemGetInfo_v2.
 *
 * The serving rules are serve.c's; here is what is the driver's own. An
 * allocation is offered to the pool of the current context's device only
 * when the driver layer serves (layer.h; not a call the runtime layer is
 * already making) and the current context is that device's primary context;
 * NULL outputs and zero sizes go to the real function with the program's
 * own arguments. The driver keeps no sticky error, so an error the shim
 * causes never reaches the program. A free is offered to every pool whatever
 * CUDAPOOL_LAYER says, since a pool block may come from the other layer.
 *
 * Pitched allocations: the pitch must be the driver's own. It is learnt once
 * per (device, width, element size) from a one-row real allocation, kept in a
 * small table; when the table is full the call passes through.
 *
 * Threads: the pitch table has its own mutex, taken before any pool lock. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <pthread.h>

#include "state/capture.h"
#include "backend/driver.h"
#include "state/entry_stats.h"
#include "serve/serve.h"
#include "state/shim.h"

/* The device to serve an allocation for, or NULL to forward it. */
static cp_device_t *serving_device(void) {
  if (cp_inside || !cp_driver_serving()) return NULL;
  return cp_drv_current_primary();
}

CUresult cp_w_cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
  CP_DRV_NEED(cuMemAlloc_v2);
  cp_device_t *dev = dptr && bytesize ? serving_device() : NULL;
  uintptr_t p;
  cp_alloc_verdict_t v = cp_serve_alloc(dev, bytesize, &p);
  if (!cp_inside) cp_entry_call(CP_ENTRY_cuMemAlloc, v == CP_SERVED);
  switch (v) {
    case CP_SERVED: *dptr = (CUdeviceptr)p; return CUDA_SUCCESS;
    case CP_OUT_OF_MEMORY: return CUDA_ERROR_OUT_OF_MEMORY;
    case CP_FORWARD: break;
  }
  return cp_drv.cuMemAlloc_v2(dptr, bytesize);
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
  CP_DRV_NEED(cuMemAllocPitch_v2);
  bool plain = dptr && pPitch && WidthInBytes && Height &&
               (ElementSizeBytes == 4 || ElementSizeBytes == 8 || ElementSizeBytes == 16);
  cp_device_t *dev = plain ? serving_device() : NULL;
  size_t pitch = dev ? driver_pitch(cp_device_id(dev), WidthInBytes, ElementSizeBytes) : 0;
  uintptr_t p;
  if (pitch && Height <= SIZE_MAX / pitch) {
    switch (cp_serve_alloc(dev, pitch * Height, &p)) {
      case CP_SERVED:
        *dptr = (CUdeviceptr)p;
        *pPitch = pitch;
        return CUDA_SUCCESS;
      case CP_OUT_OF_MEMORY: return CUDA_ERROR_OUT_OF_MEMORY;
      case CP_FORWARD: break;
    }
  }
  return cp_drv.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
}

/* ---- frees --------------------------------------------------------------------- */

static int drv_free(uintptr_t p) { return cp_drv.cuMemFree_v2((CUdeviceptr)p); }

/* Natively a free during a strict capture fails (and invalidates the
 * capture) or succeeds depending on the thread's capture mode: p|1 asks the
 * driver the same question without touching the segment; invalid-value
 * means the capture did not object. */
static int drv_capture_probe(uintptr_t p) {
  CUresult rc = cp_drv.cuMemFree_v2((CUdeviceptr)(p | 1));
  return rc == CUDA_ERROR_INVALID_VALUE ? 0 : (int)rc;
}

static int drv_synchronize(void) {
  return cp_drv.cuCtxSynchronize ? cp_drv.cuCtxSynchronize() : CUDA_SUCCESS;
}

static const cp_layer_calls_t driver_calls = {
    .real_free = drv_free, .capture_probe = drv_capture_probe, .synchronize = drv_synchronize};

CUresult cp_w_cuMemFree_v2(CUdeviceptr dptr) {
  CP_DRV_NEED(cuMemFree_v2);
  /* At depth > 0 this is the shim's own call: a whole segment going back, or
   * a pointer the runtime layer found foreign. */
  if (!dptr || cp_inside || !cp_hooking()) return cp_drv.cuMemFree_v2(dptr);
  if (cp_opts.verbose) cp_entry_call(CP_ENTRY_cuMemFree, cp_serve_owned((uintptr_t)dptr));
  return (CUresult)cp_serve_free(&driver_calls, (uintptr_t)dptr);
}

CUresult cp_w_cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes) {
  CP_DRV_NEED(cuMemGetInfo_v2);
  CUresult rc = cp_drv.cuMemGetInfo_v2(free_bytes, total_bytes);
  if (rc != CUDA_SUCCESS || !free_bytes || !total_bytes || cp_inside || !cp_hooking()) return rc;
  /* Whichever layer serves, memory the pool caches is free to the program. */
  cp_serve_meminfo(cp_drv_current_primary(), cp_driver_serving(), free_bytes, total_bytes);
  return rc;
}

/* ---- stream-ordered frees -------------------------------------------------------- */

/* A driver without cuStreamIsCapturing: the shim's own records decide. */
int cp_drv_capturing(uintptr_t stream, bool *capturing) {
  if (!cp_drv.cuStreamIsCapturing) {
    *capturing = cp_capture_stream_capturing(stream);
    return CUDA_SUCCESS;
  }
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult rc = cp_drv.cuStreamIsCapturing((CUstream)stream, &status);
  *capturing = rc == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
  return rc;
}

static int drv_stream_sync(uintptr_t stream) {
  return cp_drv.cuStreamSynchronize ? cp_drv.cuStreamSynchronize((CUstream)stream) : CUDA_ERROR_NOT_SUPPORTED;
}

/* The plain and the per-thread-default-stream variant alike. */
#define CP_FREE_ASYNC(name, ptsz)                                                             \
  static int real_##name(uintptr_t p, uintptr_t stream) {                                     \
    return cp_drv.name((CUdeviceptr)p, (CUstream)stream);                                     \
  }                                                                                           \
  static const cp_async_calls_t calls_##name = {.free_async = real_##name,                    \
                                                .capturing = cp_drv_capturing,                \
                                                .synchronize = drv_stream_sync,               \
                                                .per_thread = ptsz};                          \
  CUresult cp_w_##name(CUdeviceptr dptr, CUstream hStream) {                                  \
    CP_DRV_NEED(name);                                                                        \
    if (!dptr || cp_inside || !cp_hooking()) return cp_drv.name(dptr, hStream);               \
    if (cp_opts.verbose) cp_entry_call(CP_ENTRY_cuMemFreeAsync, cp_serve_owned(dptr));        \
    return (CUresult)cp_serve_free_async(&calls_##name, (uintptr_t)dptr, (uintptr_t)hStream); \
  }
CP_FREE_ASYNC(cuMemFreeAsync, false)
CP_FREE_ASYNC(cuMemFreeAsync_ptsz, true)
#undef CP_FREE_ASYNC

/* ---- calls that describe an allocation ---------------------------------------- */
/* Natively they describe the allocation a pointer lies in; a pool block is
 * the program's allocation, not the segment it was carved from. */

static bool describes_pool_block(CUdeviceptr ptr, cp_block_info_t *b) {
  return ptr && cp_inside == 0 && cp_hooking() && cp_serve_block_of((uintptr_t)ptr, b) == 0;
}

CUresult cp_w_cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
  CP_DRV_NEED(cuMemGetAddressRange_v2);
  CUresult rc = cp_drv.cuMemGetAddressRange_v2(pbase, psize, dptr);
  cp_block_info_t b;
  if (rc == CUDA_SUCCESS && describes_pool_block(dptr, &b)) {
    if (pbase) *pbase = (CUdeviceptr)b.start;
    if (psize) *psize = b.size;
  }
  return rc;
}

static void describe_range(CUpointer_attribute attribute, void *data, const cp_block_info_t *b) {
  if (!data) return;
  if (attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) *(CUdeviceptr *)data = (CUdeviceptr)b->start;
  if (attribute == CU_POINTER_ATTRIBUTE_RANGE_SIZE) *(size_t *)data = b->size;
}

CUresult cp_w_cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  CP_DRV_NEED(cuPointerGetAttribute);
  CUresult rc = cp_drv.cuPointerGetAttribute(data, attribute, ptr);
  cp_block_info_t b;
  if (rc == CUDA_SUCCESS && describes_pool_block(ptr, &b)) describe_range(attribute, data, &b);
  return rc;
}

CUresult cp_w_cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                     CUdeviceptr ptr) {
  CP_DRV_NEED(cuPointerGetAttributes);
  CUresult rc = cp_drv.cuPointerGetAttributes(numAttributes, attributes, data, ptr);
  cp_block_info_t b;
  if (rc == CUDA_SUCCESS && attributes && data && describes_pool_block(ptr, &b))
    for (unsigned i = 0; i < numAttributes; i++) describe_range(attributes[i], data[i], &b);
  return rc;
}

/* A pool block that cannot be exported fails as an invalid pointer does. */
CUresult cp_w_cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr) {
  CP_DRV_NEED(cuIpcGetMemHandle);
  if (dptr && cp_inside == 0 && cp_hooking() && !cp_serve_ipc_exportable((uintptr_t)dptr))
    return cp_drv.cuIpcGetMemHandle(pHandle, 0);
  return cp_drv.cuIpcGetMemHandle(pHandle, dptr);
}

CP_DRV_EXPORT(cuMemFreeAsync)
CP_DRV_EXPORT(cuMemFreeAsync_ptsz)
CP_DRV_EXPORT(cuMemGetAddressRange_v2)
CP_DRV_EXPORT(cuPointerGetAttribute)
CP_DRV_EXPORT(cuPointerGetAttributes)
CP_DRV_EXPORT(cuIpcGetMemHandle)
CP_DRV_EXPORT(cuMemAlloc_v2)
CP_DRV_EXPORT(cuMemAllocPitch_v2)
CP_DRV_EXPORT(cuMemFree_v2)
CP_DRV_EXPORT(cuMemGetInfo_v2)
