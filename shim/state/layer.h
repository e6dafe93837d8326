/* layer.h: whether cudapool is on, and which API layer serves allocations.
 *
 * One place decides, from the options (CUDAPOOL_DISABLE, CUDAPOOL_LAYER) and
 * what the process has loaded:
 *   hooking          options loaded and pooling not disabled: the wrappers
 *                    keep their books (streams, captures, syncs) and frees of
 *                    pool blocks are served at both layers.
 *   runtime serves   hooking, libcudart found whole, CUDAPOOL_LAYER not
 *                    "driver": cudaMalloc is served; the real runtime calls
 *                    the shim makes count in cp_inside (api.h).
 *   driver serves    hooking, libcuda found, CUDAPOOL_LAYER not "runtime":
 *                    cuMemAlloc is served when the runtime layer is not
 *                    already making the call.
 *   flavour          which CUDA the pool's own calls use (api.h): the
 *                    runtime when it serves, else the driver; picked once.
 * The runtime answer is final once known (cp_shim_init); the driver's is
 * asked again until libcuda is there.
 *
 * Threads: every function is safe to race; answers are atomics. */
#ifndef CUDAPOOL_SHIM_LAYER_H
#define CUDAPOOL_SHIM_LAYER_H

#include <stdatomic.h>
#include <stdbool.h>

#include "backend/api.h"
#include "backend/real.h"

/* Load the options (once) and decide the runtime layer. Every runtime
 * wrapper calls it first; true when the runtime layer serves. Inline: the
 * answer is one load once known. */
bool cp_shim_init_first(void);
static inline bool cp_shim_init(void) {
  int s = atomic_load_explicit(&cp_runtime_state, memory_order_acquire);
  return s ? s == 2 : cp_shim_init_first();
}
bool cp_hooking(void);
bool cp_driver_serving(void);
/* For the control API: hooking, and a flavour can be had. */
bool cp_pool_enabled(void);
/* This process has made a CUDA call through the shim (its trace is open,
 * and it reports at exit). */
bool cp_shim_active(void);
/* From the constructor: the fork handler. */
void cp_layer_at_load(void);

/* The flavour of backend/api.h in use; NULL while neither can work (then
 * nothing is pooled). Picked once, here: the runtime when it serves, else
 * the driver when libcuda is loaded. */
const cp_api_t *cp_api(void);

#endif
