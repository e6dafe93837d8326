/* layer.c: the one decision of layer.h, the flavour pick, and when the
 * shim becomes active: at the first CUDA call it intercepts (not at load:
 * a process that never uses CUDA, a shell under the launcher, gets no
 * trace and no report), and never again in the child of a fork() made after
 * that (the child passes everything through: the parent's pools, streams
 * and files are not its own, and CUDA cannot be used there anyway). */
#include "state/layer.h"

#include <pthread.h>
#include <stdatomic.h>

#include "state/outputs.h"

#include "backend/real.h"
#include "state/shim.h"

static atomic_bool activated, fork_passthrough;
static pthread_once_t outputs_once = PTHREAD_ONCE_INIT;

static void start_outputs(void) {
  cp_outputs_start();
  atomic_store(&activated, true);
}

bool cp_shim_active(void) { return atomic_load(&activated); }

static void child_after_fork(void) {
  if (!atomic_load(&activated)) return; /* nothing happened yet: a fresh start */
  atomic_store(&fork_passthrough, true);
  atomic_store(&activated, false);
  atomic_store(&cp_runtime_state, 1);
}

void cp_layer_at_load(void) { pthread_atfork(NULL, NULL, child_after_fork); }

bool cp_shim_init_first(void) {
  cp_options_start();
  pthread_once(&outputs_once, start_outputs);
  /* Looked for on every path: a disabled shim still forwards. */
  bool on = !atomic_load(&fork_passthrough) && cp_real_complete() && !cp_opts.disable &&
            cp_opts.layer != CP_LAYER_DRIVER;
  atomic_store_explicit(&cp_runtime_state, on ? 2 : 1, memory_order_release);
  return on;
}


/* Decides the runtime layer too, so that the flavour pick below never
 * sees an undecided runtime. */
bool cp_hooking(void) {
  (void)cp_shim_init();
  return !cp_opts.disable && !atomic_load_explicit(&fork_passthrough, memory_order_relaxed);
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
