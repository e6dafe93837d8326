/* util.h: two small helpers the core, the shim and the tools share: emptying
 * a uthash table whose entries were malloc'ed, and the monotonic clock in
 * nanoseconds. Header-only; no state. */
#ifndef CUDAPOOL_CORE_UTIL_H
#define CUDAPOOL_CORE_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* Delete every entry of the uthash table `head` (handle `hh`) and free it. */
#define CP_HASH_FREE_ALL(head, type)       \
  do {                                     \
    type *cp_el_, *cp_tmp_;                \
    HASH_ITER(hh, head, cp_el_, cp_tmp_) { \
      HASH_DEL(head, cp_el_);              \
      free(cp_el_);                        \
    }                                      \
  } while (0)

static inline uint64_t cp_monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
