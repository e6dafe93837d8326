/* pool_probe.h: a test program's view of the pool, through
 * dlsym(RTLD_DEFAULT, "cudapool_stats") so that the same program runs
 * natively too. Shared by tests/programs/runtime and
 * tests/programs/driver. */
#ifndef CUDAPOOL_TESTS_POOL_PROBE_H
#define CUDAPOOL_TESTS_POOL_PROBE_H

#include <dlfcn.h>

#include "cudapool.h"

/* cudapool_stats' result, or -1 when no cudapool is loaded. */
static inline int pool_stats(int dev, cudapool_stats_t *out) {
  int (*f)(int, cudapool_stats_t *) = (int (*)(int, cudapool_stats_t *))dlsym(RTLD_DEFAULT, "cudapool_stats");
  if (!f) return -1;
  out->size = sizeof *out;
  out->version = CUDAPOOL_STATS_VERSION;
  return f(dev, out);
}

#endif
