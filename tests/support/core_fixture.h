/* core_fixture.h: a pool on the simulated device, for the core tests.
 * fx_open() builds one from a config; fx_close() checks every invariant,
 * destroys the pool and checks the simulated device got every byte back. */
#ifndef CUDAPOOL_TESTS_CORE_FIXTURE_H
#define CUDAPOOL_TESTS_CORE_FIXTURE_H

#include <criterion/criterion.h>
#include <errno.h>
#include <criterion/new/assert.h>

#include "pool.h"
#include "testing/check.h"
#include "testing/sim_backend.h"
#include "bins.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

typedef struct fx {
  cp_sim_t sim;
  cp_backend_t be;
  cp_config_t cfg;
  cp_pool_t *pool;
} fx_t;

static fx_t F;

static inline void fx_check(void) {
  char why[256] = "";
  int rc = cp_pool_check(F.pool, why, sizeof why);
  cr_assert(eq(int, rc, 0), "pool invariant broken: %s", why);
}

static inline void fx_open_cfg(const cp_config_t *cfg, size_t capacity) {
  cp_sim_init(&F.sim, capacity);
  F.be = cp_sim_backend(&F.sim);
  F.cfg = *cfg;
  cr_assert(eq(int, cp_pool_create(&F.pool, 0, &F.cfg, &F.be), 0));
}

static inline void fx_open(size_t capacity) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  fx_open_cfg(&cfg, capacity);
}

static inline void fx_close(void) {
  fx_check();
  cp_pool_destroy(F.pool);
  F.pool = NULL;
  cr_assert(eq(sz, F.sim.used, 0), "simulated device leaked %zu bytes", F.sim.used);
  cr_assert(eq(u64, F.sim.bad_frees, 0));
  cp_sim_fini(&F.sim);
}

static inline uintptr_t fx_alloc_on(size_t size, uint64_t stream, uint64_t key) {
  uintptr_t p = 0;
  int rc = cp_alloc(F.pool, size, stream, key, &p);
  cr_assert(eq(int, rc, 0), "cp_alloc(%zu) failed with %d", size, rc);
  return p;
}

static inline uintptr_t fx_alloc(size_t size) { return fx_alloc_on(size, CP_STREAM_DEVICE, 0); }

/* Free so that the block is ready at once (as after a device sync). */
static inline void fx_free_idle(uintptr_t p) {
  cr_assert(eq(int, cp_free(F.pool, p, 0, CP_FREE_DEVICE_IDLE), 0));
}

/* The program synchronised the device: every free so far is complete. */
static inline void fx_sync_now(void) {
  cp_mark_t mark;
  cp_sync_mark(F.pool, &mark);
  cp_sync_device(F.pool, &mark);
}

static inline void fx_free(uintptr_t p, uint64_t key) { cr_assert(eq(int, cp_free(F.pool, p, key, 0), 0)); }

static inline cudapool_stats_t fx_stats(void) {
  cudapool_stats_t s;
  cp_get_stats(F.pool, &s);
  return s;
}

#endif
