/* tcache_flush.c: the pool's side of its thread caches (tcache.c says what a
 * cache owns and why): folding a cache's figures into the pool's stats,
 * flushing its freed blocks back as keyed pending blocks (all of them, or
 * half when it is full), making the frees its thread deferred pending,
 * taking a lent block back for another thread's free or a query, and a
 * cache leaving its pool (its thread's exit, the pool's destruction).
 *
 * Invariants: after a fold the pool's stats are those of the pool without
 * the cache; the deferred stack is drained before the pool decides
 * anything, so the pool counts a thread's frees in their program order.
 *
 * Locking: the pool lock, then the cache's (tcache_lock); cp_tcaches_lock
 * before both. */
#include <errno.h>
#include <stdlib.h>

#include "tcache.h"

pthread_mutex_t cp_tcaches_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t cp_tcaches_next_uid = 1;

static void gauge_add(cudapool_gauge_t *g, int64_t delta, int64_t delta_max) {
  if (g->current + delta_max > g->peak) g->peak = g->current + delta_max;
  g->current += delta;
}

/* Pool lock and cache lock held. */
void cp_tcache_fold(cp_pool_t *pool, cp_tcache_t *f) {
  cudapool_stats_t *s = &pool->stats;
  gauge_add(&s->allocated_bytes, f->bytes, f->bytes_max);
  gauge_add(&s->allocated_blocks, f->blocks, f->blocks_max);
  gauge_add(&s->requested_bytes, f->requested, f->requested_max);
  gauge_add(&s->pending_bytes, -f->bytes, -f->bytes_min);
  gauge_add(&s->cached_bytes, -f->bytes, -f->bytes_min);
  f->bytes = f->bytes_max = f->bytes_min = f->blocks = f->blocks_max = f->requested = f->requested_max = 0;
  s->num_alloc += f->n_alloc;
  s->hits += f->n_alloc;
  s->num_immediate_reuse += f->n_alloc;
  s->num_free += f->n_freed;
  f->n_alloc = f->n_freed = 0;
  note_dirty(f);
  cp_allocated_publish(pool);
  cp_stats_refresh_derived(pool);
}

/* The first n freed blocks go back to the pool as keyed pending blocks.
 * Pool lock and cache lock held, figures folded. */
void cp_tcache_spill(cp_pool_t *pool, cp_tcache_t *f, unsigned n) {
  for (unsigned i = 0; i < n; i++) {
    cp_block_t *b = f->free_[i];
    b->lent = NULL;
    b->tc_free = false;
    cp_release_active(pool, b, f->key, 0, true);
  }
  for (unsigned i = n; i < f->n_free; i++) f->free_[i - n] = f->free_[i];
  f->n_free -= n;
  f->n_lent -= n;
  note_dirty(f);
  cp_stats_refresh_derived(pool); /* a keyed free may have merged ready neighbours into pending */
}

/* Returns how many freed blocks went back. */
static unsigned flush(cp_pool_t *pool, cp_tcache_t *f) {
  /* An idle cache (every other thread's, at each slow-path allocation) has
   * nothing to fold: only its fast paths count, and they make it dirty. */
  if (!atomic_load_explicit(&f->dirty, memory_order_relaxed)) return 0;
  tcache_lock(f);
  cp_tcache_fold(pool, f);
  unsigned n = f->n_free;
  cp_tcache_spill(pool, f, n);
  tcache_unlock(f);
  return n;
}

/* Pool lock held (or the pool being destroyed): every deferred free
 * becomes pending, in free order, before the pool does anything else with
 * its lock, so that the pool counts the frees in the program's order and a
 * free's place in the free order is never earlier than the free. Returns
 * whether there were any. */
bool cp_tcache_drain_deferred(cp_pool_t *pool) {
  if (!atomic_load_explicit(&pool->deferred, memory_order_relaxed)) return false;
  cp_block_t *newest = atomic_exchange_explicit(&pool->deferred, NULL, memory_order_acquire), *oldest = NULL;
  while (newest) {
    cp_block_t *b = newest;
    newest = b->deferred_next;
    b->deferred_next = oldest;
    oldest = b;
  }
  while (oldest) {
    cp_block_t *b = oldest;
    oldest = b->deferred_next;
    b->deferred_next = NULL;
    b->lent = NULL;
    b->tc_free = false;
    cp_release_active(pool, b, 0, 0, false);
  }
  cp_stats_refresh_derived(pool);
  return true;
}

/* ---- pool_internal.h's, with the pool lock held ---------------------------------- */

bool cp_tcaches_flush_all(cp_pool_t *pool) {
  bool any = cp_tcache_drain_deferred(pool);
  for (cp_tcache_t *f = pool->tcaches; f; f = f->next) any |= flush(pool, f) > 0;
  return any;
}

void cp_tcaches_fold_all(cp_pool_t *pool) {
  cp_tcache_drain_deferred(pool);
  for (cp_tcache_t *f = pool->tcaches; f; f = f->next) {
    tcache_lock(f);
    cp_tcache_fold(pool, f);
    tcache_unlock(f);
  }
}

bool cp_tcache_take_back(cp_pool_t *pool, cp_block_t *b) {
  (void)pool;
  cp_tcache_t *f = b->lent;
  tcache_lock(f);
  bool live = !b->tc_free;
  if (live) {
    int i = lent_find(f, b->addr);
    if (i >= 0) lent_remove_at(f, i);
    f->n_lent--;
    b->lent = NULL;
  }
  tcache_unlock(f);
  return live;
}

bool cp_tcache_holds_freed(cp_block_t *b) {
  cp_tcache_t *f = b->lent;
  tcache_lock(f);
  bool freed = b->tc_free;
  tcache_unlock(f);
  return freed;
}

size_t cp_tcaches_held(cp_pool_t *main) {
  size_t n = 0;
  cp_for_each_arena(pool, main) {
    pthread_mutex_lock(&pool->lock);
    for (cp_tcache_t *f = pool->tcaches; f; f = f->next) {
      tcache_lock(f);
      n += f->n_free;
      tcache_unlock(f);
    }
    pthread_mutex_unlock(&pool->lock);
  }
  return n;
}

void cp_tcaches_update_on(cp_pool_t *pool) {
  if (!pool->uid) pool->uid = atomic_fetch_add(&cp_tcaches_next_uid, 1);
  atomic_store(&pool->tcache_on, pool->observer == NULL && pool->cfg.reuse == CP_REUSE_DEFERRED);
}

void cp_tcaches_orphan(cp_pool_t *pool) {
  /* Deferred frees take their place in the free order first: the teardown
   * then waits for the device before it unmaps their pages. */
  cp_tcache_drain_deferred(pool);
  pthread_mutex_lock(&cp_tcaches_lock);
  for (cp_tcache_t *f = pool->tcaches; f; f = f->next) {
    tcache_lock(f);
    f->pool = NULL; /* its thread frees it */
    tcache_unlock(f);
  }
  pool->tcaches = NULL;
  pthread_mutex_unlock(&cp_tcaches_lock);
}

/* Pool lock held: the cache leaves the pool; live blocks become the pool's alone. */
void cp_tcache_detach(cp_pool_t *pool, cp_tcache_t *f) {
  cp_tcache_drain_deferred(pool); /* its deferred blocks name the cache */
  tcache_lock(f);
  cp_tcache_fold(pool, f);
  cp_tcache_spill(pool, f, f->n_free);
  for (unsigned i = 0; i < TABLE_SLOTS; i++)
    if (f->slot[i].addr) f->slot[i].block->lent = NULL;
  if (f->hot) f->hot->lent = NULL;
  tcache_unlock(f);
  if (f->prev)
    f->prev->next = f->next;
  else
    pool->tcaches = f->next;
  if (f->next) f->next->prev = f->prev;
}
