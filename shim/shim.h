/* shim.h: the shim's global state: the options and the calling thread's
 * reuse key. The options are set once by cp_options_start() (init.c) and
 * read-only afterwards. */
#ifndef CUDAPOOL_SHIM_SHIM_H
#define CUDAPOOL_SHIM_SHIM_H

#include <stdbool.h>
#include <stdint.h>

#include "layer.h"
#include "options.h"

#define CP_EXPORT __attribute__((visibility("default")))

extern cp_options_t cp_opts;

/* Load the options (and open the trace), once; safe to race. Whether and
 * where the pool serves is layer.h's. */
void cp_options_start(void);

/* A non-zero number unique to the calling thread. */
uint64_t cp_thread_key(void);

#endif
