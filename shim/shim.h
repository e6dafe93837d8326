/* shim.h: the shim's global state: options, whether pooling is on, the
 * calling thread's reuse key. Set once by cp_shim_init() (init.c), which
 * every interposed entry point calls first; read-only afterwards. */
#ifndef CUDAPOOL_SHIM_SHIM_H
#define CUDAPOOL_SHIM_SHIM_H

#include <stdbool.h>
#include <stdint.h>

#include "options.h"

#define CP_EXPORT __attribute__((visibility("default")))

extern cp_options_t cp_opts;

/* Load options and resolve the runtime, once. Returns whether runtime-level
 * calls go through the pool (false: CUDAPOOL_DISABLE, the runtime is
 * missing, or CUDAPOOL_LAYER=driver, where the driver layer serves them). */
bool cp_shim_init(void);

/* A non-zero number unique to the calling thread. */
uint64_t cp_thread_key(void);

#endif
