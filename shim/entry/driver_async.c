/* driver_async.c: the driver's stream-ordered allocations and the memory-pool
 * calls around them: cuMemAllocAsync, cuMemAllocFromPoolAsync (and their
 * _ptsz twins), cuDeviceSetMemPool, cuMemPoolSetAccess,
 * cuMemPoolGetAttribute, cuMemPoolTrimTo. The frees are driver_mem.c's
 * (cuMemFreeAsync).
 *
 * The rules are stream_order.h's; here is what is the driver's own: an
 * allocation is offered to the pool of the current context's device only
 * when the driver layer serves and that context is the device's primary
 * one, as for cuMemAlloc (driver_mem.c); anything else, NULL outputs and
 * zero sizes reach the real function with the program's arguments. The
 * pool calls are always the real ones, with the program's arguments and
 * result; the shim only reads what they did. */
#define __CUDA_API_VERSION_INTERNAL 1
#include "backend/driver.h"
#include "state/entry_stats.h"
#include "state/shim.h"
#include "serve/stream_order.h"

static int drv_default_pool(int device, uintptr_t *pool) {
  CUmemoryPool p = NULL;
  if (!cp_drv.cuDeviceGetDefaultMemPool) return CUDA_ERROR_NOT_SUPPORTED;
  CUresult rc = cp_drv.cuDeviceGetDefaultMemPool(&p, device);
  *pool = (uintptr_t)p;
  return rc;
}

static const cp_mempool_calls_t driver_pools = {.default_pool = drv_default_pool,
                                                .capturing = cp_drv_capturing};

static bool keeping_books(void) { return cp_inside == 0 && cp_hooking(); }

/* Whether the pool answered the allocation (its code in *rc); else the
 * program's own call is to be made. from_pool: a *FromPoolAsync call. */
static bool answered(CUresult *rc, CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream stream,
                     bool per_thread_api, bool from_pool) {
  if (cp_inside) return false;
  bool ours = dptr && bytesize && (pool || !from_pool) && cp_driver_serving();
  cp_device_t *dev = ours ? cp_drv_current_primary() : NULL;
  uintptr_t p;
  cp_alloc_verdict_t v = cp_serve_alloc_async(&driver_pools, dev, bytesize, (uintptr_t)stream, per_thread_api,
                                              from_pool, (uintptr_t)pool, &p);
  cp_entry_call(from_pool ? CP_ENTRY_cuMemAllocFromPoolAsync : CP_ENTRY_cuMemAllocAsync, v == CP_SERVED);
  if (v == CP_SERVED) *dptr = (CUdeviceptr)p;
  *rc = v == CP_SERVED ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  return v != CP_FORWARD;
}

/* pool: the one a *FromPoolAsync call names, else NULL. */
#define CP_ALLOC_ASYNC(name, per_thread, from_pool, pool, params, args)                 \
  CUresult cp_w_##name params {                                                         \
    CP_DRV_NEED(name);                                                                  \
    CUresult rc;                                                                        \
    if (answered(&rc, dptr, bytesize, pool, hStream, per_thread, from_pool)) return rc; \
    return cp_drv.name args;                                                            \
  }

CP_AND_PTSZ(CP_ALLOC_ASYNC, cuMemAllocAsync, false, NULL,
            (CUdeviceptr * dptr, size_t bytesize, CUstream hStream), (dptr, bytesize, hStream))
CP_AND_PTSZ(CP_ALLOC_ASYNC, cuMemAllocFromPoolAsync, true, pool,
            (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),
            (dptr, bytesize, pool, hStream))
#undef CP_ALLOC_ASYNC

CUresult cp_w_cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  CP_DRV_NEED(cuDeviceSetMemPool);
  CUresult rc = cp_drv.cuDeviceSetMemPool(dev, pool);
  if (rc == CUDA_SUCCESS && keeping_books()) cp_mempool_set_current(&driver_pools, dev, (uintptr_t)pool);
  return rc;
}

CUresult cp_w_cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count) {
  CP_DRV_NEED(cuMemPoolSetAccess);
  CUresult rc = cp_drv.cuMemPoolSetAccess(pool, map, count);
  if (rc == CUDA_SUCCESS && keeping_books()) cp_mempool_access_changed(&driver_pools, (uintptr_t)pool);
  return rc;
}

CUresult cp_w_cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  CP_DRV_NEED(cuMemPoolGetAttribute);
  CUresult rc = cp_drv.cuMemPoolGetAttribute(pool, attr, value);
  if (rc == CUDA_SUCCESS && keeping_books())
    cp_mempool_attribute(&driver_pools, (uintptr_t)pool, (int)attr, value);
  return rc;
}

CUresult cp_w_cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  CP_DRV_NEED(cuMemPoolTrimTo);
  CUresult rc = cp_drv.cuMemPoolTrimTo(pool, minBytesToKeep);
  if (rc == CUDA_SUCCESS && keeping_books())
    cp_mempool_trimmed(&driver_pools, (uintptr_t)pool, minBytesToKeep);
  return rc;
}

CP_DRV_EXPORT(cuMemAllocAsync)
CP_DRV_EXPORT(cuMemAllocAsync_ptsz)
CP_DRV_EXPORT(cuMemAllocFromPoolAsync)
CP_DRV_EXPORT(cuMemAllocFromPoolAsync_ptsz)
CP_DRV_EXPORT(cuDeviceSetMemPool)
CP_DRV_EXPORT(cuMemPoolSetAccess)
CP_DRV_EXPORT(cuMemPoolGetAttribute)
CP_DRV_EXPORT(cuMemPoolTrimTo)
