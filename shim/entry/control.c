/* control.c: the cudapool_* API of cudapool.h, exported so that a program
 * can reach it with dlsym(RTLD_DEFAULT, ...) without linking cudapool.
 * Each call returns 0 or an errno and never blocks on the device, except
 * cudapool_empty_cache, which may wait for fences. */
#include <errno.h>
#include <string.h>

#include "backend/api.h"
#include "state/device.h"
#include "state/nvtx.h"
#include "state/outputs.h"
#include "state/regions.h"
#include "backend/real.h"
#include "report.h"
#include "serve/serve.h"
#include "state/shim.h"

CP_EXPORT int cudapool_version(void) { return CUDAPOOL_VERSION; }

#define CP_LAYOUT_NAME(name, description) " " #name
CP_EXPORT const char *cudapool_stats_layout(void) {
  return "version=" CP_STR(CUDAPOOL_STATS_VERSION) ";gauges" CUDAPOOL_GAUGES(CP_LAYOUT_NAME) ";counters" CUDAPOOL_COUNTERS(
      CP_LAYOUT_NAME) ";snapshot" CUDAPOOL_SNAPSHOT(CP_LAYOUT_NAME);
}

/* The version as text in the library file, what(1)-style: scripts/cudapool
 * --version reads it from the library it would preload, without loading it. */
__attribute__((used)) static const char version_tag[] = "@(#)cudapool " CP_VERSION_TEXT;

static cp_pool_t *pool_of(int device) {
  cp_device_t *dev = cp_device(device);
  return dev ? cp_device_pool_if_any(dev) : NULL;
}

/* Before the program's first CUDA call (the layers not decided yet)
 * cudapool asks CUDA nothing: which devices exist would be a CUDA call, and
 * deciding the layers now, before a framework has loaded the runtime, would
 * pass every later call through. Then every device number it could pool
 * reads as all zero, unless it is disabled. */
static bool undecided(void) {
  cp_options_start();
  return atomic_load_explicit(&cp_runtime_state, memory_order_acquire) == 0;
}

static bool device_exists(int device) {
  return device >= 0 && cp_device(device) && cp_pool_enabled() && device < cp_device_count();
}

CP_EXPORT int cudapool_stats(int device, cudapool_stats_t *out) {
  if (!out || out->size != sizeof *out || out->version != CUDAPOOL_STATS_VERSION) return EINVAL;
  cp_pool_t *pool = pool_of(device);
  if (pool) {
    cp_get_stats(pool, out);
    cp_device_order_stats(cp_device(device), out);
    return 0;
  }
  if (undecided() ? cp_opts.disable || !cp_device(device) : !device_exists(device)) return ENODEV;
  /* A device the program has not allocated on yet: all zero. */
  memset(out, 0, sizeof *out);
  out->size = sizeof *out;
  out->version = CUDAPOOL_STATS_VERSION;
  out->device = device;
  return 0;
}

/* Apply fn to one device's pool, or to every pool for device -1. */
static int each_pool(int device, void (*fn)(cp_pool_t *, size_t), size_t arg) {
  if (device >= 0) {
    cp_pool_t *pool = pool_of(device);
    if (!pool) return ENODEV;
    fn(pool, arg);
    return 0;
  }
  if (device != -1) return EINVAL;
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));) {
    cp_pool_t *pool = cp_device_pool_if_any(dev);
    if (pool) fn(pool, arg);
  }
  return 0;
}

static void do_empty(cp_pool_t *pool, size_t unused) {
  (void)unused;
  cp_empty_cache(pool);
}

static void do_reset_peak(cp_pool_t *pool, size_t unused) {
  (void)unused;
  cp_reset_peak(pool);
}

static void do_set_limit(cp_pool_t *pool, size_t limit) { cp_set_limit(pool, limit ? limit : CP_NO_LIMIT); }

CP_EXPORT int cudapool_empty_cache(int device) {
  /* Not asked while undecided (above): there is no pool yet. */
  if (!undecided() && !cp_pool_enabled()) return 0;
  cp_nvtx_range_push("cudapool_empty_cache");
  int rc = each_pool(device, do_empty, 0);
  cp_nvtx_range_pop();
  return rc;
}

CP_EXPORT int cudapool_reset_peak(int device) { return each_pool(device, do_reset_peak, 0); }

CP_EXPORT int cudapool_set_limit(int device, size_t bytes) {
  if (device < 0) return each_pool(device, do_set_limit, bytes);
  cp_device_t *dev = cp_device(device);
  if (!dev) return ENODEV;
  if (!cp_pool_enabled()) return ENOTSUP;
  cp_pool_t *pool = cp_device_pool_if_any(dev);
  if (!pool && !device_exists(device)) return ENODEV;
  if (!pool) {
    /* Setting a limit before the first allocation creates the pool, which
     * needs that device current. */
    int prev = cp_device_enter(dev);
    pool = cp_serve_pool(dev);
    cp_device_leave(prev);
  }
  if (!pool) return ENODEV;
  do_set_limit(pool, bytes);
  return 0;
}

CP_EXPORT int cudapool_record_stream(const void *ptr, cudaStream_t stream) {
  int next = 0;
  for (cp_device_t *dev; (dev = cp_next_device_with_pool(&next));) {
    cp_pool_t *pool = cp_device_pool_if_any(dev);
    int rc = pool ? cp_record_stream(pool, (uintptr_t)ptr, (uint64_t)(uintptr_t)stream) : ENOENT;
    if (rc != ENOENT) return rc;
  }
  return ENOENT;
}

CP_EXPORT int cudapool_print_stats(FILE *out, const char *format) {
  if (!out) return EINVAL;
  cp_format_t f = CP_FORMAT_TEXT;
  if (format && strcmp(format, "json") == 0)
    f = CP_FORMAT_JSON;
  else if (format && strcmp(format, "text") != 0)
    return EINVAL;
  cp_print_report(out, f, false);
  return 0;
}

CP_EXPORT int cudapool_push_tag(const char *name) {
  cp_options_start();
  return cp_regions_push(name);
}

CP_EXPORT int cudapool_pop_tag(void) { return cp_regions_pop(); }
