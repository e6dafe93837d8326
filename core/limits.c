/* limits.c: what bounds a device pool's memory: the limit (checked against
 * every arena's allocated bytes, and claimed from the shared reserved count
 * before the backend is asked: the budget), the cache cap (max_cached, each
 * arena its share), and giving memory back (empty_cache, trim, a new limit,
 * the other arenas emptied on the out-of-memory path).
 *
 * Invariants: devpool->held = the arenas' reserved bytes; devpool->reserved =
 * held + claims in flight <= the limit; see arena.c for allocated_approx.
 *
 * Locking: the budget's words are atomics, read and written under any one
 * arena's lock or none; trim, empty_cache and set_limit take each arena's
 * lock in turn (set_limit under arenas_lock first). */
#include <stdlib.h>

#include "pool_internal.h"

/* ---- the budget: bytes reserved by every arena ---------------------------------- */

/* The limit as cp_set_limit last stored it: read without the lock by
 * cp_over_limit (tcache.c's slow path asks after unlocking), so both sides
 * access it atomically (relaxed: a limit one call late is a limit). */
static size_t limit_of(const cp_pool_t *pool) { return __atomic_load_n(&pool->cfg.limit, __ATOMIC_RELAXED); }

bool cp_budget_claim(cp_pool_t *pool, size_t bytes) {
  cp_device_pool_t *sh = pool->devpool;
  size_t limit = limit_of(pool);
  size_t now = atomic_load_explicit(&sh->reserved, memory_order_relaxed);
  do {
    if (limit != CP_NO_LIMIT && (bytes > limit || now > limit - bytes)) return false;
  } while (!atomic_compare_exchange_weak_explicit(&sh->reserved, &now, now + bytes, memory_order_relaxed,
                                                  memory_order_relaxed));
  return true;
}

/* The peak counts only what the backend gave: a claim whose call failed
 * (a full device) never held memory. */
void cp_budget_commit(cp_pool_t *pool, size_t bytes) {
  cp_device_pool_t *sh = pool->devpool;
  size_t held = atomic_fetch_add_explicit(&sh->held, bytes, memory_order_relaxed) + bytes;
  size_t peak = atomic_load_explicit(&sh->held_peak, memory_order_relaxed);
  while (held > peak && !atomic_compare_exchange_weak_explicit(&sh->held_peak, &peak, held,
                                                               memory_order_relaxed, memory_order_relaxed)) {
  }
}

void cp_budget_return(cp_pool_t *pool, size_t bytes) {
  atomic_fetch_sub_explicit(&pool->devpool->reserved, bytes, memory_order_relaxed);
}

void cp_budget_release(cp_pool_t *pool, size_t bytes) {
  atomic_fetch_sub_explicit(&pool->devpool->held, bytes, memory_order_relaxed);
  cp_budget_return(pool, bytes);
}

size_t cp_budget_reserved(const cp_pool_t *pool) {
  return atomic_load_explicit(&pool->devpool->reserved, memory_order_relaxed);
}

size_t cp_budget_held(const cp_pool_t *pool) {
  return atomic_load_explicit(&pool->devpool->held, memory_order_relaxed);
}

size_t cp_reserved_now(const cp_pool_t *pool) { return cp_budget_held(pool); }

size_t cp_budget_held_peak(const cp_pool_t *pool) {
  return atomic_load_explicit(&pool->devpool->held_peak, memory_order_relaxed);
}

void cp_budget_reset_peak(cp_pool_t *pool) {
  atomic_store_explicit(&pool->devpool->held_peak, cp_budget_held(pool), memory_order_relaxed);
}

/* ---- the limit and the cache cap ------------------------------------------------ */

/* Every arena's allocated bytes, read twice, each arena's lower reading
 * taken: a block freed in one arena and then allocated in another between
 * the two reads is not counted twice. */
static int64_t allocated_everywhere(cp_pool_t *pool, unsigned n) {
  int64_t first[CP_ARENAS_MAX], total = 0;
  for (unsigned i = 0; i < n; i++)
    first[i] = atomic_load_explicit(&cp_arena_at(pool, i)->allocated_now, memory_order_relaxed);
  for (unsigned i = 0; i < n; i++) {
    int64_t again = atomic_load_explicit(&cp_arena_at(pool, i)->allocated_now, memory_order_relaxed);
    total += again < first[i] ? again : first[i];
  }
  return total;
}

/* Every arena's allocated bytes: with one pool, its own; with arenas, the
 * shared sum while even its largest error leaves room, else the exact one. */
bool cp_over_limit_rounded(cp_pool_t *pool, size_t rsize) {
  size_t limit = limit_of(pool);
  if (limit == CP_NO_LIMIT) return false;
  if (rsize > limit) return true;
  unsigned n = cp_arena_count(pool);
  /* The published copy: cp_over_limit is asked without the lock too. */
  int64_t allocated = atomic_load_explicit(&pool->allocated_now, memory_order_relaxed);
  if (n > 1) {
    int64_t most = atomic_load_explicit(&pool->devpool->allocated_approx, memory_order_relaxed) +
                   (int64_t)n * CP_ALLOCATED_SLACK;
    if (most < 0 || (size_t)most <= limit - rsize) return false;
    allocated = allocated_everywhere(pool, n);
  }
  return (size_t)(allocated > 0 ? allocated : 0) > limit - rsize;
}

bool cp_over_limit(cp_pool_t *pool, size_t size) {
  size_t rsize = cp_round_size(&pool->cfg, size);
  return rsize == 0 || cp_over_limit_rounded(pool, rsize);
}

/* With arenas each keeps its share of the cap. */
static void trim_to_max_cached(cp_pool_t *pool) {
  if (pool->cfg.max_cached == CP_NO_LIMIT) return;
  size_t cap = pool->cfg.max_cached / cp_arena_count(pool);
  if ((size_t)pool->stats.cached_bytes.current > cap) cp_release_free_segments(pool, cap);
}

/* After blocks went back: the derived stats, the cache cap, then unlock. */
void cp_settle_and_unlock(cp_pool_t *pool) {
  cp_stats_refresh_derived(pool);
  trim_to_max_cached(pool);
  pthread_mutex_unlock(&pool->lock);
}

/* Every pending block made ready (by a barrier, else by waiting for the
 * fences), then every whole free segment released. */
static size_t empty_cache_locked(cp_pool_t *pool) {
  if (pool->fifo_head && !cp_try_barrier(pool)) cp_wait_fences(pool);
  /* Pages are unmapped only once the device is done with them. */
  if (pool->page) cp_complete_all(pool, true);
  return cp_release_free_segments(pool, 0);
}

size_t cp_empty_cache_one(cp_pool_t *pool) {
  pthread_mutex_lock(&pool->lock);
  cp_tcaches_flush_all(pool);
  size_t released = empty_cache_locked(pool);
  pthread_mutex_unlock(&pool->lock);
  return released;
}

size_t cp_empty_cache(cp_pool_t *main) {
  size_t released = 0;
  cp_for_each_arena(pool, main) released += cp_empty_cache_one(pool);
  return released;
}

static size_t cached_of(cp_pool_t *pool) {
  pthread_mutex_lock(&pool->lock);
  cp_tcaches_flush_all(pool);
  size_t cached = (size_t)pool->stats.cached_bytes.current;
  pthread_mutex_unlock(&pool->lock);
  return cached;
}

/* Newest arena first (the main pool's cache is the one a program without
 * contention has), each down to what leaves the total at the target. */
size_t cp_trim(cp_pool_t *main, size_t target_cached) {
  size_t total = 0, released = 0;
  cp_for_each_arena(pool, main) total += cached_of(pool);
  for (unsigned i = cp_arena_count(main); i-- > 0;) {
    cp_pool_t *pool = cp_arena_at(main, i);
    if (total <= target_cached) break;
    pthread_mutex_lock(&pool->lock);
    cp_tcaches_flush_all(pool);
    size_t mine = (size_t)pool->stats.cached_bytes.current, over = total - target_cached;
    size_t got = cp_release_free_segments(pool, mine > over ? mine - over : 0);
    pthread_mutex_unlock(&pool->lock);
    released += got;
    total -= got < total ? got : total;
  }
  return released;
}

void cp_set_limit(cp_pool_t *main, size_t limit) {
  pthread_mutex_lock(&main->devpool->arenas_lock);
  cp_for_each_arena(pool, main) {
    pthread_mutex_lock(&pool->lock);
    cp_tcaches_flush_all(pool);
    __atomic_store_n(&pool->cfg.limit, limit ? limit : CP_NO_LIMIT, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&pool->lock);
  }
  if (limit && cp_budget_reserved(main) > limit) cp_empty_cache(main);
  pthread_mutex_unlock(&main->devpool->arenas_lock);
}

size_t cp_arenas_reclaim(cp_pool_t *main, cp_pool_t *except) {
  size_t released = 0;
  cp_for_each_arena(a, main) if (a != except) released += cp_empty_cache_one(a);
  return released;
}
