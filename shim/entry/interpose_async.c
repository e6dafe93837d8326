/* interpose_async.c: the runtime's stream-ordered allocations and the
 * memory-pool calls around them (cudaMallocAsync, cudaMallocFromPoolAsync
 * and their _ptsz twins, cudaDeviceSetMemPool, cudaMemPoolSetAccess,
 * cudaMemPoolGetAttribute, cudaMemPoolTrimTo), and PyTorch's pluggable
 * allocator entry points (cudapool_torch_alloc, cudapool_torch_free). The
 * frees are interpose.c's (cudaFreeAsync).
 *
 * The rules are stream_order.h's. As in interpose.c, a wrapper forwards
 * unchanged whatever the runtime layer does not serve, NULL outputs and
 * zero sizes; the pool calls are always the real ones, whose result the
 * shim only reads. */
#include <sys/types.h>

#include "state/entry_stats.h"
#include "backend/real.h"
#include "state/shim.h"
#include "serve/stream_order.h"

static int rt_default_pool(int device, uintptr_t *pool) {
  cudaMemPool_t p = NULL;
  cudaError_t rc = cp_real.cudaDeviceGetDefaultMemPool(&p, device);
  if (rc != cudaSuccess) cp_real.cudaGetLastError(); /* the shim's question, not the program's */
  *pool = (uintptr_t)p;
  return rc;
}

static const cp_mempool_calls_t runtime_pools = {.default_pool = rt_default_pool,
                                                 .capturing = cp_rt_capturing};

/* Whether the pool answered (its code in *rc); else the program's own call
 * is to be made. pool: the one named by a *FromPoolAsync call. */
static bool answered(cudaError_t *rc, void **devPtr, size_t size, cudaMemPool_t pool, cudaStream_t stream,
                     bool per_thread_api, bool from_pool) {
  if (!cp_shim_init() || !devPtr || size == 0 || (from_pool && !pool)) return false;
  uintptr_t p;
  cp_alloc_verdict_t v = cp_serve_alloc_async(&runtime_pools, cp_current_device(), size, (uintptr_t)stream,
                                              per_thread_api, from_pool, (uintptr_t)pool, &p);
  cp_entry_call(from_pool ? CP_ENTRY_cudaMallocFromPoolAsync : CP_ENTRY_cudaMallocAsync, v == CP_SERVED);
  if (v == CP_FORWARD) return false;
  if (v == CP_SERVED) {
    *devPtr = (void *)p;
    *rc = cudaSuccess;
    return true;
  }
  /* Over the limit: the runtime itself records the error, as natively. */
  void *never = NULL;
  cp_real.cudaMalloc(&never, (size_t)1 << 62);
  *rc = cudaErrorMemoryAllocation;
  return true;
}

/* pool: the one a *FromPoolAsync call names, else NULL. */
#define CP_MALLOC_ASYNC(name, per_thread, from_pool, pool, params, args)             \
  CP_EXPORT cudaError_t name params {                                                \
    cudaError_t rc;                                                                  \
    if (answered(&rc, devPtr, size, pool, stream, per_thread, from_pool)) return rc; \
    return cp_real.name args;                                                        \
  }

CP_AND_PTSZ(CP_MALLOC_ASYNC, cudaMallocAsync, false, NULL, (void **devPtr, size_t size, cudaStream_t stream),
            (devPtr, size, stream))
CP_AND_PTSZ(CP_MALLOC_ASYNC, cudaMallocFromPoolAsync, true, memPool,
            (void **devPtr, size_t size, cudaMemPool_t memPool, cudaStream_t stream),
            (devPtr, size, memPool, stream))
#undef CP_MALLOC_ASYNC

/* ---- memory pools ------------------------------------------------------------------ */

CP_EXPORT cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t memPool) {
  bool on = cp_shim_init();
  cudaError_t rc = cp_real.cudaDeviceSetMemPool(device, memPool);
  if (on && rc == cudaSuccess) cp_mempool_set_current(&runtime_pools, device, (uintptr_t)memPool);
  return rc;
}

CP_EXPORT cudaError_t cudaMemPoolSetAccess(cudaMemPool_t memPool, const struct cudaMemAccessDesc *descList,
                                           size_t count) {
  bool on = cp_shim_init();
  cudaError_t rc = cp_real.cudaMemPoolSetAccess(memPool, descList, count);
  if (on && rc == cudaSuccess) cp_mempool_access_changed(&runtime_pools, (uintptr_t)memPool);
  return rc;
}

CP_EXPORT cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t memPool, enum cudaMemPoolAttr attr, void *value) {
  bool on = cp_shim_init();
  cudaError_t rc = cp_real.cudaMemPoolGetAttribute(memPool, attr, value);
  if (on && rc == cudaSuccess) cp_mempool_attribute(&runtime_pools, (uintptr_t)memPool, (int)attr, value);
  return rc;
}

CP_EXPORT cudaError_t cudaMemPoolTrimTo(cudaMemPool_t memPool, size_t minBytesToKeep) {
  bool on = cp_shim_init();
  cudaError_t rc = cp_real.cudaMemPoolTrimTo(memPool, minBytesToKeep);
  if (on && rc == cudaSuccess) cp_mempool_trimmed(&runtime_pools, (uintptr_t)memPool, minBytesToKeep);
  return rc;
}

/* ---- PyTorch's CUDAPluggableAllocator ---------------------------------------------- */
/* torch.cuda.memory.CUDAPluggableAllocator(path, "cudapool_torch_alloc",
 * "cudapool_torch_free"): PyTorch hands every allocation its stream, so the
 * stream-ordered rules apply (a block freed on a stream is that stream's at
 * once). The library may be loaded by that call alone, without the preload:
 * then the shim saw no stream being created, and learns each stream the
 * first time PyTorch names it (a barrier must reach it). What the pool
 * cannot serve (a capturing stream, a device the program's default pool no
 * longer serves) is CUDA's own stream-ordered allocation, freed by CUDA. */

/* A stream PyTorch named that the shim has not seen created: learnt now. */
static void learn_stream(cp_device_t *dev, cudaStream_t stream) {
  if (cp_serve_special_stream((uintptr_t)stream) || cp_device_stream_known(dev, stream)) return;
  unsigned flags = 0;
  if (cp_real.cudaStreamGetFlags(stream, &flags) != cudaSuccess) {
    cp_real.cudaGetLastError();
    return;
  }
  cp_serve_stream_created(dev, (uintptr_t)stream, (flags & cudaStreamNonBlocking) != 0);
}

CP_EXPORT void *cudapool_torch_alloc(ssize_t size, int device, cudaStream_t stream) {
  if (size <= 0) return NULL;
  cp_device_t *dev = cp_shim_init() ? cp_device(device) : NULL;
  void *p = NULL;
  if (dev) {
    learn_stream(dev, stream);
    uintptr_t q;
    cp_alloc_verdict_t v =
        cp_serve_alloc_async(&runtime_pools, dev, (size_t)size, (uintptr_t)stream, false, false, 0, &q);
    cp_entry_call(CP_ENTRY_cudapool_torch_alloc, v == CP_SERVED);
    if (v == CP_SERVED) return (void *)q;
    if (v == CP_OUT_OF_MEMORY) return NULL;
  }
  if (cp_real.cudaMallocAsync(&p, (size_t)size, stream) != cudaSuccess) {
    cp_real.cudaGetLastError(); /* PyTorch reports NULL as out of memory itself */
    return NULL;
  }
  return p;
}

CP_EXPORT void cudapool_torch_free(void *ptr, ssize_t size, int device, cudaStream_t stream) {
  (void)size, (void)device;
  if (!ptr) return;
  if (cp_opts.verbose) cp_entry_call(CP_ENTRY_cudapool_torch_free, cp_serve_owned((uintptr_t)ptr));
  int rc = cp_hooking() ? cp_serve_free_async(cp_runtime_async, (uintptr_t)ptr, (uintptr_t)stream)
                        : (int)cp_real.cudaFreeAsync(ptr, stream);
  if (rc != cudaSuccess) cp_real.cudaGetLastError();
}
