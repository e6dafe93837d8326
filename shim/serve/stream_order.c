/* stream_order.c: the stream-ordered serving rules of stream_order.h. */
#include "serve/stream_order.h"

#include <cuda_runtime_api.h>
#include <stdatomic.h>

#include "state/capture.h"
#include "state/shim.h"

enum { STREAM_PER_THREAD = 0x2 };

/* Per device: the program made another pool current, or shared the default
 * pool's memory with other devices or processes: only CUDA can serve it. */
static atomic_bool replaced[CP_MAX_DEVICES], shared[CP_MAX_DEVICES];

uint64_t cp_stream_tag(uintptr_t stream, bool per_thread_api) {
  /* Thread keys are never reused and stream handles are addresses below
   * 2^63: the tags of per-thread streams meet neither. */
  if (stream == STREAM_PER_THREAD || (per_thread_api && stream == 0)) return (1ull << 63) | cp_thread_key();
  return stream == 0 ? CP_STREAM_TAG_LEGACY : (uint64_t)stream;
}

static bool default_pool_is(const cp_mempool_calls_t *layer, int device, uintptr_t pool) {
  cp_device_t *dev = cp_device(device);
  if (!pool || !dev) return false;
  unsigned epoch;
  uintptr_t def = cp_device_default_mempool(dev, &epoch);
  if (!def) {
    if (layer->default_pool(device, &def) != 0) return false;
    cp_device_note_default_mempool(dev, def, epoch);
  }
  return def == pool;
}

cp_alloc_verdict_t cp_serve_alloc_async(const cp_mempool_calls_t *layer, cp_device_t *dev, size_t size,
                                        uintptr_t stream, bool per_thread_api, bool from_pool, uintptr_t pool,
                                        uintptr_t *out) {
  if (!dev) return CP_FORWARD;
  int id = cp_device_id(dev);
  if (atomic_load_explicit(&shared[id], memory_order_relaxed)) return CP_FORWARD;
  if (from_pool ? !default_pool_is(layer, id, pool)
                : atomic_load_explicit(&replaced[id], memory_order_relaxed))
    return CP_FORWARD;
  if (!cp_serve_special_stream(stream) && !cp_device_stream_known(dev, (cudaStream_t)stream))
    return CP_FORWARD;
  uintptr_t named = per_thread_api && stream == 0 ? STREAM_PER_THREAD : stream;
  if (named == STREAM_PER_THREAD) cp_note_per_thread_stream();
  /* Every capture begins through a call the shim sees (at the driver layer
   * at least), so with none in progress no stream can be capturing. */
  if (cp_capture_count() > 0) {
    bool capturing = false;
    if (layer->capturing(named, &capturing) != 0 || capturing) return CP_FORWARD;
  }
  return cp_serve_alloc_for(dev, size, cp_stream_tag(stream, per_thread_api), CP_KEY_STREAM_ORDERED, out);
}

void cp_mempool_set_current(const cp_mempool_calls_t *layer, int device, uintptr_t pool) {
  cp_device_t *dev = cp_device(device);
  if (dev) atomic_store(&replaced[device], !default_pool_is(layer, device, pool));
}

/* The device whose default pool is pool and that has a pool of cudapool's. */
static cp_device_t *served_device_of(const cp_mempool_calls_t *layer, uintptr_t pool) {
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));)
    if (default_pool_is(layer, cp_device_id(dev), pool)) return dev;
  return NULL;
}

void cp_mempool_access_changed(const cp_mempool_calls_t *layer, uintptr_t pool) {
  int n = cp_device_count();
  for (int i = 0; i < n && i < CP_MAX_DEVICES; i++)
    if (default_pool_is(layer, i, pool)) atomic_store(&shared[i], true);
}

void cp_mempool_attribute(const cp_mempool_calls_t *layer, uintptr_t pool, int attr, void *value) {
  bool reserved = attr == cudaMemPoolAttrReservedMemCurrent || attr == cudaMemPoolAttrReservedMemHigh;
  bool used = attr == cudaMemPoolAttrUsedMemCurrent || attr == cudaMemPoolAttrUsedMemHigh;
  cp_device_t *dev = value && (reserved || used) ? served_device_of(layer, pool) : NULL;
  cp_pool_t *p = dev ? cp_device_pool_if_any(dev) : NULL;
  if (!p) return;
  cudapool_stats_t s;
  cp_get_stats(p, &s);
  const cudapool_gauge_t *g = reserved ? &s.reserved_bytes : &s.allocated_bytes;
  bool high = attr == cudaMemPoolAttrReservedMemHigh || attr == cudaMemPoolAttrUsedMemHigh;
  *(uint64_t *)value += (uint64_t)(high ? g->peak : g->current);
}

void cp_mempool_trimmed(const cp_mempool_calls_t *layer, uintptr_t pool, size_t keep) {
  cp_device_t *dev = served_device_of(layer, pool);
  cp_pool_t *p = dev ? cp_device_pool_if_any(dev) : NULL;
  if (!p) return;
  if (keep == 0) {
    cp_empty_cache(p);
    return;
  }
  cudapool_stats_t s;
  cp_get_stats(p, &s);
  size_t allocated = (size_t)s.allocated_bytes.current;
  cp_trim(p, keep > allocated ? keep - allocated : 0);
}
