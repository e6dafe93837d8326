/* driver_device.c: which device's pool a driver-layer call serves: the
 * device whose primary context is current on the calling thread, or none
 * (a context the program created itself is never pooled: its memory belongs
 * to it alone).
 *
 * The last answer of each thread is kept for the same context: a context's
 * device never changes, and whether it is a primary one changes only when a
 * primary is released or reset, which bumps cp_drv_primary_generation
 * (backend/driver_api.c). That saves a driver call on every driver-layer
 * allocation and free.
 *
 * Threads: the cache is thread-local; the generation is an atomic. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdatomic.h>

#include "backend/driver.h"
#include "state/device.h"

static __thread __attribute__((tls_model("initial-exec"))) struct {
  CUcontext ctx;
  cp_device_t *dev;
  unsigned generation;
} last;

cp_device_t *cp_drv_current_primary(void) {
  if (!cp_drv_ready()) return NULL;
  CUcontext cur = NULL;
  CUdevice dev = 0;
  if (cp_drv.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || !cur) return NULL;
  unsigned generation = atomic_load_explicit(&cp_drv_primary_generation, memory_order_acquire);
  if (cur == last.ctx && generation == last.generation) return last.dev;
  if (cp_drv.cuCtxGetDevice(&dev) != CUDA_SUCCESS) return NULL;
  cp_device_t *found = cp_drv_primary(dev) == cur ? cp_device(dev) : NULL;
  last.ctx = cur;
  last.dev = found;
  last.generation = generation;
  return found;
}
