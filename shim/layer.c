/* layer.c: the one decision of layer.h, and the flavour pick. */
#include "layer.h"

#include <stdatomic.h>

#include "real.h"
#include "shim.h"

/* 0 until the first call has loaded the options and looked for the runtime,
 * then 1 (pass through) or 2 (the runtime layer serves). */
static atomic_int runtime_state;

bool cp_shim_init(void) {
  int s = atomic_load_explicit(&runtime_state, memory_order_acquire);
  if (s) return s == 2;
  cp_options_start();
  /* Looked for on every path: a disabled shim still forwards. */
  bool on = cp_real_complete() && !cp_opts.disable && cp_opts.layer != CP_LAYER_DRIVER;
  atomic_store_explicit(&runtime_state, on ? 2 : 1, memory_order_release);
  return on;
}

bool cp_runtime_serving(void) {
  return atomic_load_explicit(&runtime_state, memory_order_relaxed) == 2;
}

/* Decides the runtime layer too, so that the flavour pick below never
 * sees an undecided runtime. */
bool cp_hooking(void) {
  (void)cp_shim_init();
  return !cp_opts.disable;
}

bool cp_driver_serving(void) { return cp_hooking() && cp_opts.layer != CP_LAYER_RUNTIME && cp_drv_ready(); }

bool cp_pool_enabled(void) { return cp_hooking() && (cp_shim_init() || cp_drv_ready()); }

static _Atomic(const cp_api_t *) api_in_use;

const cp_api_t *cp_api(void) {
  const cp_api_t *api = atomic_load_explicit(&api_in_use, memory_order_acquire);
  if (api) return api;
  const cp_api_t *pick = cp_runtime_serving() ? &cp_api_runtime : cp_drv_ready() ? &cp_api_driver : NULL;
  if (pick && !atomic_compare_exchange_strong(&api_in_use, &api, pick)) return api;
  return pick;
}
