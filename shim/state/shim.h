/* shim.h: the shim's global state: the options and the calling thread's
 * reuse key. The options are set once by cp_options_start() (init.c) and
 * read-only afterwards. */
#ifndef CUDAPOOL_SHIM_SHIM_H
#define CUDAPOOL_SHIM_SHIM_H

#include <stdbool.h>
#include <stdint.h>

#include "state/layer.h"
#include "options.h"

#define CP_EXPORT __attribute__((visibility("default")))

/* A wrapper and its _ptsz twin (the same call on the per-thread default
 * stream) from one line: ONE(name, per_thread, ...) for both. */
#define CP_AND_PTSZ(ONE, name, ...) ONE(name, false, __VA_ARGS__) ONE(name##_ptsz, true, __VA_ARGS__)

extern cp_options_t cp_opts;

/* Load the options (and open the trace), once; safe to race. Whether and
 * where the pool serves is layer.h's. */
void cp_options_start(void);

/* A non-zero number unique to the calling thread. Inline: it is on every
 * allocation's and free's path. */
extern __thread __attribute__((tls_model("initial-exec"))) uint64_t cp_thread_key_value;
uint64_t cp_thread_key_first(void); /* this thread's first call */
static inline uint64_t cp_thread_key(void) {
  uint64_t key = cp_thread_key_value;
  return key ? key : cp_thread_key_first();
}

#endif
