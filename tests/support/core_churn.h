/* core_churn.h: eight threads allocate and free on one pool at once, each
 * with its own stream and key (or, unkeyed, with none: every reuse waits
 * for a barrier, many of them shared between threads, reuse.c), some
 * freeing blocks another thread allocated.
 * A shadow map of the simulated address space (one byte per 512-byte
 * granule, claimed with atomics) proves no two live blocks ever overlap.
 * The map spans four times the device's capacity: the simulated device
 * places segments first fit, so with holes between them an address can lie
 * past base + capacity even though no more than capacity is in use.
 * Shared by the Criterion test (tests/unit/core/threads.c) and the
 * standalone program that runs it under ThreadSanitizer
 * (tests/unit/core/threads_tsan.c), where Criterion cannot start. The
 * includer defines CHURN_CHECK(cond, fmt, ...). */
#ifndef CUDAPOOL_TESTS_CORE_CHURN_H
#define CUDAPOOL_TESTS_CORE_CHURN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "pool_internal.h" /* the pool's lock, to make threads move arenas */
#include "testing/check.h"
#include "testing/sim_backend.h"

#define CHURN_THREADS 8
#define CHURN_OPS 20000
#define CHURN_SPACE ((size_t)256 << 20)
#define CHURN_SHADOW_SPAN (4 * CHURN_SPACE)
#define CHURN_GRANULES (CHURN_SHADOW_SPAN / 512)

typedef struct churn {
  cp_sim_t sim;
  cp_backend_t be;
  cp_pool_t *pool;
  _Atomic unsigned char shadow[CHURN_GRANULES];
  _Atomic uintptr_t handoff[CHURN_THREADS]; /* a block passed to the next thread to free */
  _Atomic int failures;
  bool
      tcache; /* through the threads' thread caches (cp_tcache_alloc/free), stats read and caches emptied meanwhile */
  bool unkeyed; /* every thread's key 0, as in a program that created streams */
  bool arenas;  /* through the thread caches, up to 4 arenas; odd threads start in new ones */
} churn_t;

static churn_t churn_state;

static size_t churn_granule(uintptr_t addr) { return (addr - churn_state.sim.base) / 512; }

static void churn_claim(uintptr_t p, size_t size) {
  CHURN_CHECK(p >= churn_state.sim.base && p + size <= churn_state.sim.base + CHURN_SHADOW_SPAN,
              "block %#lx+%zu lies outside the shadowed span", (unsigned long)p, size);
  for (size_t g = churn_granule(p); g < churn_granule(p + size); g++)
    if (atomic_exchange(&churn_state.shadow[g], 1) != 0) {
      atomic_fetch_add(&churn_state.failures, 1);
      CHURN_CHECK(0, "granule %zu handed out twice", g);
    }
}

static void churn_release(uintptr_t p, size_t size) {
  for (size_t g = churn_granule(p); g < churn_granule(p + size); g++) atomic_store(&churn_state.shadow[g], 0);
}

static void churn_free(uintptr_t p, uint64_t key) {
  churn_release(p, cp_block_size(churn_state.pool, p));
  int rc =
      churn_state.tcache ? cp_tcache_free(churn_state.pool, p, key, 0) : cp_free(churn_state.pool, p, key, 0);
  CHURN_CHECK(rc == 0, "cp_free failed with %d", rc);
}

/* An allocation that finds the main pool's lock taken (by this thread):
 * with arena_move_after 1 the thread moves to another arena at once. */
static void churn_move_arena(int id) {
  uintptr_t p;
  pthread_mutex_lock(&churn_state.pool->lock);
  int rc = cp_tcache_alloc(churn_state.pool, 512, (uint64_t)id, 0, &p);
  pthread_mutex_unlock(&churn_state.pool->lock);
  CHURN_CHECK(rc == 0, "cp_tcache_alloc in another arena failed with %d", rc);
  CHURN_CHECK(cp_tcache_free(churn_state.pool, p, 0, 0) == 0, "free in another arena failed");
}

static void *churn_thread(void *arg) {
  int id = (int)(intptr_t)arg;
  uint64_t rng = 0x9e3779b9u * (uint64_t)(id + 1), key = churn_state.unkeyed ? 0 : (uint64_t)id + 1;
  uintptr_t live[16] = {0};
  if (churn_state.arenas && id % 2) churn_move_arena(id);
  for (int i = 0; i < CHURN_OPS; i++) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    int slot = (int)(rng % 16);
    if (live[slot]) {
      if (rng % 7 == 0) {
        uintptr_t old = atomic_exchange(&churn_state.handoff[(id + 1) % CHURN_THREADS], live[slot]);
        if (old) churn_free(old, 0);
      } else {
        churn_free(live[slot], key);
      }
      live[slot] = 0;
    } else {
      size_t size = rng % 5 == 0 ? ((size_t)1 << 20) + rng % (3u << 20) : 1 + rng % (64u << 10);
      uintptr_t p;
      int rc = churn_state.tcache ? cp_tcache_alloc(churn_state.pool, size, (uint64_t)id, key, &p)
                                 : cp_alloc(churn_state.pool, size, (uint64_t)id, key, &p);
      if (rc != 0) continue;
      churn_claim(p, cp_block_size(churn_state.pool, p));
      live[slot] = p;
    }
    if (rng % 1024 == 0) {
      cp_mark_t mark;
      cp_sync_mark(churn_state.pool, &mark);
      cp_sync_device(churn_state.pool, &mark);
    }
    if (churn_state.tcache && id == 0 && rng % 512 == 1) {
      cudapool_stats_t s;
      cp_get_stats(churn_state.pool, &s); /* flushes every thread's cache */
    }
    if (churn_state.tcache && id == 1 && rng % 2048 == 2) cp_empty_cache(churn_state.pool);
  }
  for (int s = 0; s < 16; s++)
    if (live[s]) churn_free(live[s], key);
  return NULL;
}

/* Runs the churn on a fresh pool; returns the pool (the caller checks it
 * and calls churn_close). */
static cp_pool_t *churn_run_with(bool tcache, bool unkeyed, bool arenas) {
  churn_state.tcache = tcache || arenas;
  churn_state.unkeyed = unkeyed;
  churn_state.arenas = arenas;
  cp_config_t cfg;
  cp_config_default(&cfg);
  if (arenas) {
    /* churn_move_arena holds the main pool's lock while it allocates: with
     * a cap below one arena per thread plus the main pool, a thread finding
     * every other arena's lock taken and no room for a new one would wait
     * for the lock it holds itself. */
    cfg.arenas = CHURN_THREADS + 1;
    cfg.arena_move_after = 1;
  }
  cp_sim_init(&churn_state.sim, CHURN_SPACE);
  churn_state.be = cp_sim_backend(&churn_state.sim);
  int rc = cp_pool_create(&churn_state.pool, 0, &cfg, &churn_state.be);
  CHURN_CHECK(rc == 0, "cp_pool_create failed with %d", rc);
  pthread_t t[CHURN_THREADS];
  for (int i = 0; i < CHURN_THREADS; i++) pthread_create(&t[i], NULL, churn_thread, (void *)(intptr_t)i);
  for (int i = 0; i < CHURN_THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < CHURN_THREADS; i++) {
    uintptr_t p = atomic_exchange(&churn_state.handoff[i], 0);
    if (p) churn_free(p, 0);
  }
  return churn_state.pool;
}

static cp_pool_t *churn_run(bool tcache, bool unkeyed) { return churn_run_with(tcache, unkeyed, false); }

/* What every churn must leave: nothing allocated, as many frees as
 * allocations, the pool's invariants whole. Returns its stats. */
static cudapool_stats_t churn_checked_stats(cp_pool_t *pool) {
  cudapool_stats_t s;
  cp_get_stats(pool, &s);
  char why[256] = "";
  CHURN_CHECK(cp_pool_check(pool, why, sizeof why) == 0, "%s", why);
  CHURN_CHECK(s.allocated_bytes.current == 0, "%lld bytes still allocated",
              (long long)s.allocated_bytes.current);
  CHURN_CHECK(s.num_alloc == s.num_free, "%llu allocs, %llu frees", (unsigned long long)s.num_alloc,
              (unsigned long long)s.num_free);
  return s;
}

static void churn_close(void) {
  cp_empty_cache(churn_state.pool);
  cp_pool_destroy(churn_state.pool);
  CHURN_CHECK(churn_state.sim.used == 0, "simulated device leaked %zu bytes", churn_state.sim.used);
  cp_sim_fini(&churn_state.sim);
}

#endif
