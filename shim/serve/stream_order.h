/* stream_order.h: stream-ordered allocations served from the pool
 * (cudaMallocAsync, cudaMallocFromPoolAsync, cuMemAllocAsync,
 * cuMemAllocFromPoolAsync, their per-thread-stream twins, and PyTorch's
 * pluggable-allocator entry points), once for both layers.
 *
 * The rule (docs/DESIGN.md, "Stream-ordered allocations"): a block freed in
 * stream order on stream S is S's: an allocation on S may take it at once,
 * since CUDA runs S's work in order; an allocation on any other stream only
 * once a barrier, fence or synchronisation covers the work queued before the
 * free, as for a cudaFree. The pool knows a stream by a tag: the handle of a
 * created stream, CP_STREAM_TAG_LEGACY for the legacy default stream, and a
 * tag of the calling thread for its per-thread default stream. Blocks
 * allocated or freed with cudaMalloc/cudaFree have the device-wide tag
 * (CP_STREAM_DEVICE) and the thread's reuse key (device.h).
 *
 * Served only where the native call would use the device's default memory
 * pool: cudaMallocAsync while the program has not made another pool the
 * device's current one (cudaDeviceSetMemPool, cuDeviceSetMemPool), and
 * *FromPoolAsync when the pool named is the device's default. Pools the
 * program creates, and a default pool whose access it changed, are CUDA's:
 * every call on them passes through. So does an allocation on a stream the
 * shim does not know (it may belong to another device or context), and one
 * on a stream that is capturing (a graph allocation: its free must reach
 * CUDA too, and does, since the pointer is not the pool's).
 *
 * Threads: every function may be called from any thread; the per-device
 * flags are atomics. */
#ifndef CUDAPOOL_SHIM_STREAM_ORDER_H
#define CUDAPOOL_SHIM_STREAM_ORDER_H

#include <stdbool.h>
#include <stdint.h>

#include "serve/serve.h"

/* The reuse key of every stream-ordered free: no thread's key (init.c hands
 * those out counting up from 1). */
#define CP_KEY_STREAM_ORDERED UINT64_MAX
/* cudaStreamLegacy / CU_STREAM_LEGACY, the same handle at both layers. */
#define CP_STREAM_TAG_LEGACY ((uint64_t)0x1)

/* The pool's tag of stream as the program named it; per_thread_api: the
 * call was a _ptsz variant (stream 0 is then the per-thread stream). */
uint64_t cp_stream_tag(uintptr_t stream, bool per_thread_api);

/* A layer's memory-pool calls, each returning that layer's native code. */
typedef struct cp_mempool_calls {
  int (*default_pool)(int device, uintptr_t *pool);
  /* Whether stream is capturing, as CUDA says (see cp_async_calls_t). */
  int (*capturing)(uintptr_t stream, bool *capturing);
} cp_mempool_calls_t;

/* A stream-ordered allocation of size (> 0) bytes on stream for dev.
 * from_pool: the program named a pool, pool (a *FromPoolAsync call); else
 * the device's current pool is meant. CP_FORWARD: make the program's own
 * call. */
cp_alloc_verdict_t cp_serve_alloc_async(const cp_mempool_calls_t *layer, cp_device_t *dev, size_t size,
                                        uintptr_t stream, bool per_thread_api, bool from_pool, uintptr_t pool,
                                        uintptr_t *out);

/* After the program's real call succeeded: it made pool the current pool of
 * device (cudaDeviceSetMemPool), or changed who may access pool's memory
 * (cudaMemPoolSetAccess): stream-ordered calls that use a device's default
 * pool pass through from then on when pool is not it, or is it but now
 * shared. */
void cp_mempool_set_current(const cp_mempool_calls_t *layer, int device, uintptr_t pool);
void cp_mempool_access_changed(const cp_mempool_calls_t *layer, uintptr_t pool);

/* cudaMemPoolGetAttribute's answer for pool, after the real call: used and
 * reserved memory (current and high) of a default pool the shim serves
 * include the pool's figures. attr is the runtime's cudaMemPoolAttr, the
 * same numbers as the driver's CUmemPool_attribute. */
void cp_mempool_attribute(const cp_mempool_calls_t *layer, uintptr_t pool, int attr, void *value);
/* cudaMemPoolTrimTo(pool, keep) after the real call: a default pool the
 * shim serves trims its cache so that it reserves at most keep bytes where
 * it can (everything it can when keep is 0, as torch.cuda.empty_cache
 * asks). */
void cp_mempool_trimmed(const cp_mempool_calls_t *layer, uintptr_t pool, size_t keep);

#endif
