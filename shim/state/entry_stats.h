/* entry_stats.h: which allocation entry points the program reached, and
 * how: a diagnostic for programs that allocate through a door cudapool may
 * not serve (JAX, XLA, CuPy). With CUDAPOOL_VERBOSE=1 the exit report ends
 * with one line per entry point the process touched: how often its address
 * was looked up through dlsym and through cuGetProcAddress (or
 * cudaGetDriverEntryPoint, which asks the driver's), how many calls reached
 * cudapool's wrapper, and how many of those the pool served; entry points
 * cudapool does not wrap (cuMemCreate, cuMemAllocManaged, ...) show their
 * lookups only.
 *
 * Counting costs a relaxed atomic add; calls are counted only while
 * CUDAPOOL_VERBOSE is set. Lookups are counted always (they are rare), from
 * the lookup wrappers, never from the dlsym router itself (which must stay
 * uninstrumented).
 *
 * Threads: counters are atomics; the report reads them once at exit. */
#ifndef CUDAPOOL_SHIM_ENTRY_STATS_H
#define CUDAPOOL_SHIM_ENTRY_STATS_H

#include <stdbool.h>
#include <stdio.h>

#include "state/shim.h"

/* X(name): the base names (no _v2, _ptsz suffix) watched. The wrapped
 * ones first. */
#define CP_ENTRY_LIST(X)       \
  X(cudaMalloc)                \
  X(cudaFree)                  \
  X(cudaMallocAsync)           \
  X(cudaMallocFromPoolAsync)   \
  X(cudaFreeAsync)             \
  X(cudapool_torch_alloc)      \
  X(cudapool_torch_free)       \
  X(cuMemAlloc)                \
  X(cuMemAllocPitch)           \
  X(cuMemFree)                 \
  X(cuMemAllocAsync)           \
  X(cuMemAllocFromPoolAsync)   \
  X(cuMemFreeAsync)            \
  X(cuMemAllocManaged)         \
  X(cuMemAllocHost)            \
  X(cuMemHostAlloc)            \
  X(cuMemCreate)               \
  X(cuMemMap)                  \
  X(cuMemAddressReserve)       \
  X(cuMemPoolCreate)           \
  X(cuDeviceSetMemPool)        \
  X(cuDeviceGetDefaultMemPool) \
  X(cuMemPoolGetAttribute)     \
  X(cuMemPoolTrimTo)           \
  X(cuMemGetInfo)

typedef enum cp_entry {
#define CP_ENTRY_ENUM(name) CP_ENTRY_##name,
  CP_ENTRY_LIST(CP_ENTRY_ENUM)
#undef CP_ENTRY_ENUM
      CP_ENTRY_COUNT
} cp_entry_t;

typedef enum cp_entry_door { CP_DOOR_DLSYM, CP_DOOR_PROC_ADDRESS } cp_entry_door_t;

/* A lookup of name (exported name or base name) through door; names not
 * watched are ignored. */
void cp_entry_lookup(const char *name, cp_entry_door_t door);
/* A program's call reached the wrapper of e; served: the pool answered it.
 * Counted only with CUDAPOOL_VERBOSE, which the inline check reads without
 * a call (every allocation passes here). */
void cp_entry_count(cp_entry_t e, bool served);
static inline void cp_entry_call(cp_entry_t e, bool served) {
  if (cp_opts.verbose) cp_entry_count(e, served);
}
/* The lines of the report (nothing when no entry point was touched). */
void cp_entry_report(FILE *out);

#endif
