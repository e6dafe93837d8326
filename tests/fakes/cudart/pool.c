/* pool.c: the stream-ordered allocator of the fake runtime: memory pools
 * (each device's default pool, pools the program creates, the device's
 * current pool), cudaMallocAsync and cudaMallocFromPoolAsync (and their
 * per-thread-stream variants), and the pool calls a shim reads or passes
 * through: cudaDeviceGetDefaultMemPool, cudaDeviceGetMemPool,
 * cudaDeviceSetMemPool, cudaMemPoolCreate, cudaMemPoolDestroy,
 * cudaMemPoolSetAccess, cudaMemPoolGetAttribute, cudaMemPoolSetAttribute,
 * cudaMemPoolTrimTo. Frees are ptr.c's (cudaFreeAsync) and mem.c's
 * (cudaFree), which tell this file through fc_mempool_released.
 *
 * Model: an allocation is a device allocation of its own, made when the
 * call is made (work on the stream may use it once the stream gets there;
 * nothing earlier on the stream can). Pools cache nothing: reserved memory
 * is used memory, and the high-water marks follow it; setting a high
 * attribute to 0 resets it to the current figure, as natively. On a
 * capturing stream the allocation is a graph allocation: made at once here
 * (graphs are not modelled), and it stays live until freed. Handles are
 * addresses of records, looked up before use (cudaErrorInvalidValue when
 * bogus). */
#include "fake.h"

#include <stdlib.h>

#define MAX_POOLS 64

typedef struct fc_mempool {
  int device, live, created;
  size_t used, used_high, reserved_high;
  uint64_t release_threshold;
} fc_mempool;

static fc_mempool defaults[FC_MAX_DEVICES], *created[MAX_POOLS];
static fc_mempool *current[FC_MAX_DEVICES];

static fc_mempool *default_of(int dev) {
  fc_mempool *p = &defaults[dev];
  if (!p->live) *p = (fc_mempool){.device = dev, .live = 1};
  return p;
}

static fc_mempool *pool_get(cudaMemPool_t h) {
  fc_mempool *p = (fc_mempool *)h;
  for (int d = 0; d < FC_MAX_DEVICES; d++)
    if (p == &defaults[d]) return default_of(d);
  for (int i = 0; i < MAX_POOLS; i++)
    if (created[i] && created[i] == p) return p;
  return NULL;
}

void fc_mempool_released(fc_alloc *a) { a->pool->used -= a->charged; }

static cudaError_t alloc_from(fc_mempool *pool, void **p, size_t size, cudaStream_t stream, int ptsz) {
  if (!p || !pool) return cudaErrorInvalidValue;
  fc_stream *s;
  cudaError_t err = fc_stream_get(stream, ptsz, &s);
  if (err) return err;
  if (size == 0) return cudaErrorInvalidValue;
  int captured;
  if ((err = fc_submit(s, NULL, &captured))) return err;
  if ((err = fc_alloc_new(size, FC_DEVICE, pool->device, p))) return err;
  fc_alloc *a = fc_alloc_exact(*p);
  a->pool = pool;
  pool->used += a->charged;
  if (pool->used > pool->used_high) pool->used_high = pool->used;
  if (pool->used > pool->reserved_high) pool->reserved_high = pool->used;
  return cudaSuccess;
}

static fc_mempool *current_of(int dev) { return current[dev] ? current[dev] : default_of(dev); }

#define ENTER() fc_enter(__func__)

cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t stream);
cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t size, cudaMemPool_t pool, cudaStream_t stream);

cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t stream) {
  ENTER();
  return fc_leave(alloc_from(current_of(fc_cur_device()), p, size, stream, 0));
}

cudaError_t cudaMallocAsync_ptsz(void **p, size_t size, cudaStream_t stream) {
  ENTER();
  return fc_leave(alloc_from(current_of(fc_cur_device()), p, size, stream, 1));
}

cudaError_t cudaMallocFromPoolAsync(void **p, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
  ENTER();
  return fc_leave(alloc_from(pool_get(pool), p, size, stream, 0));
}

cudaError_t cudaMallocFromPoolAsync_ptsz(void **p, size_t size, cudaMemPool_t pool, cudaStream_t stream) {
  ENTER();
  return fc_leave(alloc_from(pool_get(pool), p, size, stream, 1));
}

cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device) {
  ENTER();
  if (!pool || device < 0 || device >= fc.ndev) return fc_leave(cudaErrorInvalidValue);
  *pool = (cudaMemPool_t)default_of(device);
  return fc_leave(cudaSuccess);
}

cudaError_t cudaDeviceGetMemPool(cudaMemPool_t *pool, int device) {
  ENTER();
  if (!pool || device < 0 || device >= fc.ndev) return fc_leave(cudaErrorInvalidValue);
  *pool = (cudaMemPool_t)current_of(device);
  return fc_leave(cudaSuccess);
}

cudaError_t cudaDeviceSetMemPool(int device, cudaMemPool_t pool) {
  ENTER();
  fc_mempool *p = pool_get(pool);
  if (!p || device < 0 || device >= fc.ndev || p->device != device) return fc_leave(cudaErrorInvalidValue);
  current[device] = p;
  return fc_leave(cudaSuccess);
}

cudaError_t cudaMemPoolCreate(cudaMemPool_t *pool, const struct cudaMemPoolProps *props) {
  ENTER();
  if (!pool || !props || props->location.type != cudaMemLocationTypeDevice || props->location.id < 0 ||
      props->location.id >= fc.ndev)
    return fc_leave(cudaErrorInvalidValue);
  for (int i = 0; i < MAX_POOLS; i++) {
    if (created[i]) continue;
    if (!(created[i] = calloc(1, sizeof *created[i]))) return fc_leave(cudaErrorMemoryAllocation);
    *created[i] = (fc_mempool){.device = props->location.id, .live = 1, .created = 1};
    *pool = (cudaMemPool_t)created[i];
    return fc_leave(cudaSuccess);
  }
  return fc_leave(cudaErrorMemoryAllocation);
}

/* Its allocations stay usable until freed, as the pool's memory is freed
 * natively only once they are. */
cudaError_t cudaMemPoolDestroy(cudaMemPool_t pool) {
  ENTER();
  fc_mempool *p = pool_get(pool);
  if (!p || !p->created) return fc_leave(cudaErrorInvalidValue);
  for (int d = 0; d < FC_MAX_DEVICES; d++)
    if (current[d] == p) current[d] = NULL;
  for (int i = 0; i < MAX_POOLS; i++)
    if (created[i] == p) created[i] = NULL;
  for (size_t i = 0; i < fc.nallocs; i++)
    if (fc.allocs[i].pool == p) fc.allocs[i].pool = NULL;
  free(p);
  return fc_leave(cudaSuccess);
}

cudaError_t cudaMemPoolSetAccess(cudaMemPool_t pool, const struct cudaMemAccessDesc *desc, size_t count) {
  ENTER();
  if (!pool_get(pool) || (count && !desc)) return fc_leave(cudaErrorInvalidValue);
  return fc_leave(cudaSuccess);
}

cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value) {
  ENTER();
  fc_mempool *p = pool_get(pool);
  if (!p || !value) return fc_leave(cudaErrorInvalidValue);
  uint64_t *v = value;
  switch (attr) {
    case cudaMemPoolAttrReservedMemCurrent:
    case cudaMemPoolAttrUsedMemCurrent: *v = p->used; break;
    case cudaMemPoolAttrReservedMemHigh: *v = p->reserved_high; break;
    case cudaMemPoolAttrUsedMemHigh: *v = p->used_high; break;
    case cudaMemPoolAttrReleaseThreshold: *v = p->release_threshold; break;
    default: return fc_leave(cudaErrorInvalidValue);
  }
  return fc_leave(cudaSuccess);
}

cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, enum cudaMemPoolAttr attr, void *value) {
  ENTER();
  fc_mempool *p = pool_get(pool);
  if (!p || !value) return fc_leave(cudaErrorInvalidValue);
  uint64_t v = *(uint64_t *)value;
  switch (attr) {
    case cudaMemPoolAttrReservedMemHigh:
      if (v) return fc_leave(cudaErrorInvalidValue);
      p->reserved_high = p->used;
      break;
    case cudaMemPoolAttrUsedMemHigh:
      if (v) return fc_leave(cudaErrorInvalidValue);
      p->used_high = p->used;
      break;
    case cudaMemPoolAttrReleaseThreshold: p->release_threshold = v; break;
    default: return fc_leave(cudaErrorInvalidValue);
  }
  return fc_leave(cudaSuccess);
}

cudaError_t cudaMemPoolTrimTo(cudaMemPool_t pool, size_t keep) {
  ENTER();
  (void)keep;
  return fc_leave(pool_get(pool) ? cudaSuccess : cudaErrorInvalidValue);
}
