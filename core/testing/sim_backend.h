/* sim_backend.h: a simulated device for tests, benchmarks and replay.
 *
 * It hands out addresses from a private address space (nothing is mapped:
 * the addresses are never dereferenced) with a fixed capacity, and can be
 * told to fail. Barriers and fences are simulated: a barrier succeeds when
 * enabled; fences complete only when the test says so (or at once in
 * auto-complete mode), which lets tests observe what the pool reuses while a
 * fence is still open.
 *
 * Expandable segments (off until vmm_page is set): reservations take
 * address space only; mapped pages count in `used` like allocations and
 * fail the same way (capacity, fail_after, fail_percent).
 *
 * Invariants: live allocations and reservations never overlap; used bytes =
 * sum of live sizes + mapped pages; freeing an address that is not a live
 * allocation (or a reservation with pages still mapped) is counted in
 * `bad_frees`, mapping a mapped page or unmapping one that is not, or any
 * page outside a reservation, in `bad_maps` (pool bugs), and otherwise
 * ignored.
 *
 * The table's entries take the device's own lock (the arenas of one pool
 * call it at once); a test reads and sets its fields between calls. */
#ifndef CUDAPOOL_CORE_SIM_BACKEND_H
#define CUDAPOOL_CORE_SIM_BACKEND_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

typedef struct cp_sim_range cp_sim_range_t;

typedef struct cp_sim {
  uintptr_t base;  /* first address handed out */
  size_t capacity; /* most bytes live at once */
  size_t used;     /* bytes live now */
  size_t peak_used;
  /* failure injection */
  long fail_after;       /* >= 0: this many more allocs succeed, then all fail */
  uint32_t fail_percent; /* 0..100: each alloc fails with this chance */
  uint64_t rng;          /* xorshift state for fail_percent */
  /* reuse mechanisms */
  bool barrier_enabled;
  unsigned barrier_cost; /* what the backend says a barrier costs (0 = 1) */
  /* Addresses to hand out, in order, before the simulated address space
   * (a replay gives the live run's segment addresses, so that best-fit
   * ties between segments break as they did live); NULL = none. */
  const uintptr_t *addresses;
  const size_t *address_sizes; /* the size each was for: a mismatch ends the list */
  size_t naddresses, next_address;
  bool fence_enabled;
  bool fence_auto_complete;  /* fences complete as soon as they are recorded */
  uint64_t fences_recorded;  /* ids are 1, 2, ...: id n is the n-th fence */
  uint64_t fences_completed; /* every fence with id <= this has completed */
  uint64_t fences_released;
  /* counters */
  uint64_t allocs, frees, failed_allocs, barriers, refused_barriers;
  uint64_t fence_queries, fence_waits, bad_frees;
  /* expandable segments */
  size_t vmm_page; /* page size; 0 = the device cannot (the pool falls back) */
  uint64_t reserves, unreserves, maps, unmaps, pages_mapped, pages_unmapped, bad_maps;
  size_t mapped; /* bytes in mapped pages now (part of used) */
  size_t peak_mapped;
  /* live allocations and free address ranges (internal) */
  cp_sim_range_t *live;         /* uthash by address */
  cp_sim_range_t *holes;        /* sorted list of free ranges */
  cp_sim_range_t *reservations; /* uthash by address */
  cp_sim_range_t *pages;        /* uthash by address: mapped pages */
  pthread_mutex_t lock;
} cp_sim_t;

/* A device of `capacity` bytes; barrier and fences enabled, fences manual. */
void cp_sim_init(cp_sim_t *sim, size_t capacity);
void cp_sim_fini(cp_sim_t *sim);
/* The backend table that drives this simulated device. */
cp_backend_t cp_sim_backend(cp_sim_t *sim);
/* Complete every fence with id <= upto (the simulated device caught up). */
void cp_sim_complete_fences(cp_sim_t *sim, uint64_t upto);
/* Number of live allocations. */
size_t cp_sim_live_count(const cp_sim_t *sim);

#endif
