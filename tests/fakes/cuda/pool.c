/* pool.c: the fake driver's stream-ordered allocator, the same model as the
 * fake runtime's (tests/fakes/cudart/pool.c): each device's default pool,
 * pools the program creates, the device's current pool; cuMemAllocAsync and
 * cuMemAllocFromPoolAsync (and _ptsz) make an allocation of their own in the
 * current context when called, on a capturing stream too (a graph
 * allocation; graphs are not modelled); pools cache nothing, so reserved
 * memory is used memory. cuMemFreeAsync and cuMemFree are ptr.c's and
 * mem.c's, which tell this file through fk_mempool_released. Pool handles
 * are addresses of records, looked up before use. */
#include "fk.h"

#include <stdlib.h>

#define MAX_POOLS 64

typedef struct fk_mempool {
  int device, live, created;
  size_t used, used_high;
} fk_mempool;

static fk_mempool defaults[FK_MAX_DEVICES], *created[MAX_POOLS], *current[FK_MAX_DEVICES];

static fk_mempool *default_of(int dev) {
  if (!defaults[dev].live) defaults[dev] = (fk_mempool){.device = dev, .live = 1};
  return &defaults[dev];
}

static fk_mempool *pool_get(CUmemoryPool h) {
  fk_mempool *p = (fk_mempool *)h;
  for (int d = 0; d < FK_MAX_DEVICES; d++)
    if (p == &defaults[d]) return default_of(d);
  for (int i = 0; i < MAX_POOLS; i++)
    if (p && created[i] == p) return p;
  return NULL;
}

void fk_mempool_released(fk_alloc *a) { a->pool->used -= a->charged; }

static CUresult alloc_from(fk_mempool *pool, CUdeviceptr *dptr, size_t size, CUstream h, int per_thread_api) {
  fk_ctx *c;
  fk_stream *s;
  CUresult rc = fk_ready(&c);
  if (rc || (rc = fk_stream_get(c, h, per_thread_api, &s))) return rc;
  if (!dptr || !pool || size == 0 || pool->device != c->device) return CUDA_ERROR_INVALID_VALUE;
  if ((rc = fk_submit(s)) || (rc = fk_alloc_new(c, size, dptr))) return rc;
  fk_alloc *a = fk_alloc_exact((uintptr_t)*dptr);
  a->pool = pool;
  pool->used += a->charged;
  if (pool->used > pool->used_high) pool->used_high = pool->used;
  return CUDA_SUCCESS;
}

static fk_mempool *current_pool(void) {
  fk_ctx *c = fk_current();
  if (!c) return NULL;
  return current[c->device] ? current[c->device] : default_of(c->device);
}

#define ENTER() fk_enter(__func__)

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  ENTER();
  return fk_leave(alloc_from(current_pool(), dptr, bytesize, hStream, 0));
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
  ENTER();
  return fk_leave(alloc_from(current_pool(), dptr, bytesize, hStream, 1));
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream) {
  ENTER();
  return fk_leave(alloc_from(pool_get(pool), dptr, bytesize, hStream, 0));
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream) {
  ENTER();
  return fk_leave(alloc_from(pool_get(pool), dptr, bytesize, hStream, 1));
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) {
  ENTER();
  if (!fk.initialized) return fk_leave(CUDA_ERROR_NOT_INITIALIZED);
  if (!pool || dev < 0 || dev >= fk.ndev) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  *pool = (CUmemoryPool)default_of(dev);
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
  ENTER();
  if (!pool || dev < 0 || dev >= fk.ndev) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  *pool = (CUmemoryPool)(current[dev] ? current[dev] : default_of(dev));
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  ENTER();
  fk_mempool *p = pool_get(pool);
  if (!p || dev < 0 || dev >= fk.ndev || p->device != dev) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  current[dev] = p;
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *props) {
  ENTER();
  if (!pool || !props || props->location.type != CU_MEM_LOCATION_TYPE_DEVICE || props->location.id < 0 ||
      props->location.id >= fk.ndev)
    return fk_leave(CUDA_ERROR_INVALID_VALUE);
  for (int i = 0; i < MAX_POOLS; i++) {
    if (created[i]) continue;
    if (!(created[i] = calloc(1, sizeof *created[i]))) return fk_leave(CUDA_ERROR_OUT_OF_MEMORY);
    *created[i] = (fk_mempool){.device = props->location.id, .live = 1, .created = 1};
    *pool = (CUmemoryPool)created[i];
    return fk_leave(CUDA_SUCCESS);
  }
  return fk_leave(CUDA_ERROR_OUT_OF_MEMORY);
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  ENTER();
  fk_mempool *p = pool_get(pool);
  if (!p || !p->created) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  for (int d = 0; d < FK_MAX_DEVICES; d++)
    if (current[d] == p) current[d] = NULL;
  for (int i = 0; i < MAX_POOLS; i++)
    if (created[i] == p) created[i] = NULL;
  for (size_t i = 0; i < fk.nallocs; i++)
    if (fk.allocs[i].pool == p) fk.allocs[i].pool = NULL;
  free(p);
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map, size_t count) {
  ENTER();
  return fk_leave(!pool_get(pool) || (count && !map) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value) {
  ENTER();
  fk_mempool *p = pool_get(pool);
  if (!p || !value) return fk_leave(CUDA_ERROR_INVALID_VALUE);
  cuuint64_t *v = value;
  switch (attr) {
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *v = p->used; break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *v = p->used_high; break;
    default: return fk_leave(CUDA_ERROR_INVALID_VALUE);
  }
  return fk_leave(CUDA_SUCCESS);
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep) {
  ENTER();
  (void)keep;
  return fk_leave(pool_get(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}
