/* tcache.c: the per-thread thread cache of a pool (cp_tcache_alloc/free).
 *
 * What it owns. Each thread has, per pool it used, a cp_tcache_t: blocks the
 * pool LENT it (ACTIVE in the pool, block->lent == the cache) are either
 * live in the program (the newest in `hot`, the others in the cache's
 * address table) or freed into it (in `free_`, tc_free set). A free of a
 * live lent block and the allocation of a freed one take no pool lock, only
 * the cache's own lock, which another thread takes only to flush it or take
 * a block back (rarely).
 *
 * Reuse rule: the cache holds only blocks freed with a non-zero reuse key,
 * all with its own (stream, key); it hands one out again only to an
 * allocation with that same (stream, key), and only a block the pool itself
 * would hand out whole for that request. That is the pool's rule for keyed
 * pending blocks (pool.h: the caller's own submission order protects that
 * reuse), so the cache never hands out what the pool would not. Blocks freed
 * with flags or used on other streams (cp_record_stream) never enter it.
 *
 * Frees without a key (a program that created streams) of a block lent to
 * the thread are validated by its address table and pushed onto the pool's
 * `deferred` stack without the pool lock; the next flush (every pool
 * allocation starts with one) makes them pending with no key, as the
 * pool's own free would have, only later in the free order, so a barrier
 * covers them only if it began after that: never earlier than their free.
 * A thread cycling blocks then takes the pool lock once a pair, not twice.
 * Every pool operation of tcache.c drains the stack before anything else
 * (then folds), so the pool counts a thread's frees in its program order:
 * a free is deferred only while its cache has no fast-path figures left to
 * fold.
 *
 * Flushes (freed blocks go back to the pool as keyed pending blocks, which
 * keeps the key's right to them): every cache at any thread's next pool
 * allocation (the pool then decides as if there were no caches);
 * half of it when `free_` is full; every cache before the pool reserves a
 * new segment, on a limit refusal, on empty_cache, trim, set_limit, a sync
 * mark, a stats read or check, a new observer; the thread's exit.
 *
 * Stats stay exact: a cache counts what its fast paths did as deltas of the
 * gauges (with the highest each reached since the last fold) and counters;
 * a fold (pool lock + cache lock) adds them to the pool's stats, the peak
 * from current + the highest delta. The owner folds before each of its pool
 * operations, so for one thread the peaks are exactly those of the pool
 * without a cache; with threads a peak is bounded by the sum of theirs.
 *
 * Arenas (arena.c): the public calls take the device's main pool; an
 * allocation goes to the thread's arena (cp_arena_lock may move the thread),
 * a free to the thread's arena first, then to whichever holds the block. A
 * cache belongs to one thread and one arena. An allocation that fails in
 * its arena empties the others and tries once more before it is refused.
 *
 * Locking: pool lock, then a cache's lock (a spin flag: held for pointer
 * work only). `cp_tcaches_lock` (a thread leaving, a pool destroyed) comes
 * before both. In the child of a fork() a thread's exit takes none of them
 * for the caches it inherited (`forks`): they are the parent's copies.
 * block->lent is written under the pool lock; tc_free,
 * requested and the cache's fields under the cache lock; a deferred block's
 * fields, by its thread before the push and under the pool lock after it
 * (the push releases, the pool's exchange acquires). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "tcache.h"

/* One thread-local block, so that the hint and its entry cost one address. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
  unsigned hint; /* the entry found last */
  tls_tcache_t at[TLS_TCACHES];
} my;

static pthread_key_t exit_key;

static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

/* Forks this process descends from since its first cache (counted in the
 * child). A cache made before the last one is a copy of the parent's: its
 * pool's lock, and cp_tcaches_lock, may have been held by a thread the child
 * does not have, so the thread's exit forgets it rather than lock them
 * (it stays reachable through its pool's list). Taking every pool lock
 * around fork() instead would make a fork wait for every pool and arena. */
static atomic_uint forks;

static void thread_exit(void *unused) {
  (void)unused;
  unsigned now = atomic_load_explicit(&forks, memory_order_relaxed);
  for (int i = 0; i < TLS_TCACHES; i++) {
    cp_tcache_t *f = my.at[i].tcache;
    if (!f) continue;
    if (my.at[i].forks != now) { /* a fork's copy: see `forks` */
      my.at[i] = (tls_tcache_t){0};
      continue;
    }
    pthread_mutex_lock(&cp_tcaches_lock);
    cp_pool_t *pool = f->pool;
    if (pool) {
      pthread_mutex_lock(&pool->lock);
      cp_tcache_detach(pool, f);
      cp_settle_and_unlock(pool);
    }
    pthread_mutex_unlock(&cp_tcaches_lock);
    free(f);
    my.at[i] = (tls_tcache_t){0};
  }
}

static void forked_child(void) { atomic_fetch_add_explicit(&forks, 1, memory_order_relaxed); }

static void exit_key_init(void) {
  pthread_key_create(&exit_key, thread_exit);
  pthread_atfork(NULL, NULL, forked_child);
}

/* This thread's cache of the pool, or NULL. A cache left over from a
 * destroyed pool at the same address is freed here. */
static __attribute__((noinline)) cp_tcache_t *tcache_search(cp_pool_t *pool) {
  for (unsigned i = 0; i < TLS_TCACHES; i++) {
    if (my.at[i].pool != pool) continue;
    if (my.at[i].uid == pool->uid) {
      my.hint = i;
      return my.at[i].tcache;
    }
    free(my.at[i].tcache); /* orphaned: its pool is gone */
    my.at[i] = (tls_tcache_t){0};
  }
  return NULL;
}

static inline cp_tcache_t *tcache_find(cp_pool_t *pool) {
  const tls_tcache_t *t = &my.at[my.hint];
  return t->pool == pool && t->uid == pool->uid ? t->tcache : tcache_search(pool);
}

/* Pool lock held. NULL when the thread caches too many pools or no memory. */
static cp_tcache_t *tcache_create(cp_pool_t *pool) {
  for (int i = 0; i < TLS_TCACHES; i++) {
    if (my.at[i].tcache) continue;
    pthread_once(&exit_once, exit_key_init);
    cp_tcache_t *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    atomic_flag_clear(&f->busy);
    f->pool = pool;
    f->next = pool->tcaches;
    if (f->next) f->next->prev = f;
    pool->tcaches = f;
    my.at[i] = (tls_tcache_t){pool, pool->uid, f, atomic_load_explicit(&forks, memory_order_relaxed)};
    pthread_setspecific(exit_key, f);
    return f;
  }
  return NULL;
}

/* The smallest freed block the pool would hand out whole for rsize. */
static int best_whole(cp_pool_t *pool, const cp_tcache_t *f, size_t rsize) {
  int best = -1;
  for (unsigned i = 0; i < f->n_free; i++) {
    const cp_block_t *b = f->free_[i];
    if (!cp_serves_whole(&pool->cfg, b, rsize)) continue;
    const cp_block_t *o = best >= 0 ? f->free_[best] : NULL;
    if (!o || b->size < o->size || (b->size == o->size && b->addr < o->addr)) best = (int)i;
  }
  return best;
}

/* Pool lock held, nothing freed in the cache (only its owner, here, frees
 * into it): the owner's latest (stream, key) becomes the cache's, and b, if
 * any, just allocated, is lent to it. */
static void own(cp_pool_t *pool, cp_tcache_t *f, uint64_t stream, uint64_t key, cp_block_t *b) {
  /* Not always so: a split the pool could not make hands a block out whole. */
  bool whole = b && cp_serves_whole(&pool->cfg, b, cp_round_size(&pool->cfg, b->requested));
  tcache_lock(f);
  f->stream = stream;
  f->key = key;
  if (b) {
    lent_insert(f, b);
    f->n_lent++;
    b->lent = f;
    b->tc_free = false;
    b->whole_for_requested = whole;
  }
  tcache_unlock(f);
}

static __attribute__((noinline)) int alloc_slow(cp_pool_t *main, cp_pool_t *home, cp_tcache_t *f, size_t size,
                                                uint64_t stream, uint64_t key, uintptr_t *out) {
  cp_pool_t *pool = cp_arena_lock(main, home);
  if (pool != home) f = tcache_find(pool); /* the thread moved */
  bool lend = atomic_load_explicit(&pool->tcache_on, memory_order_relaxed);
  if (!f && lend) f = tcache_create(pool);
  /* What every cache holds freed goes back first: the pool's best fit sees
   * it all, so its choices, and the memory it reserves, are those of a pool
   * without caches (a block left in another thread's cache made the pool
   * split or grow for requests it could have served: +3% reserved on a
   * PyTorch transformer, whose backward pass runs on its own thread). */
  bool freed = cp_tcaches_flush_all(pool);
  cp_block_t *b = NULL;
  /* With arenas, a refusal is the program's only once the others have
   * given back what they cache (below). */
  bool others = cp_arena_count(main) > 1;
  cp_defer_refusal(others);
  int rc = cp_alloc_locked(pool, size, stream, key, &b);
  bool refused = cp_refusal_pending();
  cp_defer_refusal(false);
  if (rc == 0) *out = b->addr;
  if (f) own(pool, f, stream, key, rc == 0 && lend && f->n_lent < LENT_MAX ? b : NULL);
  if (freed)
    cp_settle_and_unlock(pool); /* the frees it took in may take the cache over max_cached */
  else
    pthread_mutex_unlock(&pool->lock);
  /* Other arenas' cached memory (and their share of the limit) goes back
   * before this one gives up. */
  if (refused) {
    /* Past the limit by what is allocated, no arena's cache can help. */
    bool again = rc == ENOMEM && !cp_over_limit(pool, size) && cp_arenas_reclaim(main, pool) > 0;
    pthread_mutex_lock(&pool->lock);
    if (again) {
      cp_tcaches_flush_all(pool);
      rc = cp_alloc_locked(pool, size, stream, key, &b);
      if (rc == 0) *out = b->addr;
    } else {
      cp_refused(pool, size, stream);
    }
    cp_settle_and_unlock(pool);
  }
  return rc;
}

int cp_tcache_alloc(cp_pool_t *main, size_t size, uint64_t stream, uint64_t key, uintptr_t *out) {
  if (size == 0) return EINVAL;
  cp_pool_t *pool = cp_arena_home(main);
  cp_tcache_t *f = tcache_find(pool);
  if (f && key) {
    tcache_lock(f);
    if (f->key == key && f->stream == stream && f->n_free) {
      /* A thread cycling one block asks for the size it got it for. */
      cp_block_t *only = f->free_[0];
      size_t rsize;
      int i = f->n_free == 1 && only->requested == size && only->whole_for_requested ? 0
              : (rsize = cp_round_size(&pool->cfg, size)) ? best_whole(pool, f, rsize)
                                                          : -1;
      if (i >= 0) {
        cp_block_t *b = f->free_[i];
        f->free_[i] = f->free_[--f->n_free];
        b->tc_free = false;
        b->whole_for_requested = true;
        b->requested = size;
        lent_insert(f, b);
        count_lend(f, b);
        f->n_alloc++;
        atomic_store_explicit(&f->dirty, true, memory_order_relaxed);
        tcache_unlock(f);
        *out = b->addr;
        return 0;
      }
    }
    tcache_unlock(f);
  }
  return alloc_slow(main, pool, f, size, stream, key, out);
}

/* Half the freed blocks go back to the pool: the cache is full. */
static __attribute__((noinline)) void spill_half(cp_pool_t *pool, cp_tcache_t *f) {
  pthread_mutex_lock(&pool->lock);
  cp_tcache_drain_deferred(pool);
  tcache_lock(f);
  cp_tcache_fold(pool, f);
  cp_tcache_spill(pool, f, f->n_free / 2);
  tcache_unlock(f);
  cp_settle_and_unlock(pool);
}

/* The free under the lock of the arena that owns addr (f: the thread's
 * cache of it, or NULL). */
static __attribute__((noinline)) int free_slow(cp_pool_t *pool, cp_tcache_t *f, uintptr_t addr,
                                               const uint64_t *restream, uint64_t key, unsigned flags) {
  pthread_mutex_lock(&pool->lock);
  cp_tcache_drain_deferred(pool); /* frees this thread deferred came first */
  if (f) {
    tcache_lock(f);
    cp_tcache_fold(pool, f);
    tcache_unlock(f);
  }
  return cp_free_and_unlock(pool, addr, restream, key, flags);
}

/* ---- frees without a key ---------------------------------------------------------- */

/* Cache lock held, b found at lent index i: the program freed b without a
 * key; it leaves the cache for the pool's deferred stack. */
static void defer(cp_pool_t *pool, cp_tcache_t *f, cp_block_t *b, int i) {
  lent_remove_at(f, i);
  f->n_lent--;
  b->tc_free = true; /* a second free finds it freed (cp_tcache_take_back) */
  /* Counted by the pool when it takes it, before any decision or read:
   * the cache stays clean, so other threads' flushes pass it by. */
  cp_block_t *head = atomic_load_explicit(&pool->deferred, memory_order_relaxed);
  do b->deferred_next = head;
  while (!atomic_compare_exchange_weak_explicit(&pool->deferred, &head, b, memory_order_release,
                                                memory_order_relaxed));
  if (!head) cp_note_freed(pool, true); /* the first to wait */
}

enum { NOT_LENT = -1 }; /* tcache_free's answer for a block its cache did not lend */

/* The free of a block the thread's cache f of `pool` lent: into the cache
 * (same key), onto the pool's deferred stack (no key), or to the pool's
 * lock. NOT_LENT when the cache did not lend it (or may not serve: flags,
 * caches off). restream as cp_free_locked's: a block that changes stream
 * takes the slow path. */
static inline __attribute__((always_inline)) int tcache_free(cp_pool_t *pool, cp_tcache_t *f, uintptr_t addr,
                                                            const uint64_t *restream, uint64_t key,
                                                            unsigned flags) {
  if (!f || flags || !atomic_load_explicit(&pool->tcache_on, memory_order_relaxed)) return NOT_LENT;
  for (;;) {
    tcache_lock(f);
    int i = lent_find(f, addr);
    cp_block_t *b = i >= 0 ? lent_at(f, i) : NULL;
    if (!b) {
      tcache_unlock(f);
      return NOT_LENT;
    }
    bool same_stream = !restream || *restream == b->stream;
    /* Deferred only while nothing of the cache's fast paths waits to be
     * folded: the pool then counts this free after everything before it. */
    if (same_stream && !key && !f->n_alloc && !f->n_freed) {
      defer(pool, f, b, i);
      tcache_unlock(f);
      return 0;
    }
    if (!same_stream || !key || key != f->key || b->stream != f->stream) {
      tcache_unlock(f);
      return free_slow(pool, f, addr, restream, key, flags);
    }
    if (f->n_free < FREE_MAX) {
      lent_remove_at(f, i);
      b->tc_free = true;
      f->free_[f->n_free++] = b;
      count_return(f, b);
      /* The cache's first free since it was flushed: the reclaimer (which
       * flushes every cache before it sleeps) may be asleep. */
      bool first = f->n_freed++ == 0;
      if (__builtin_expect(first, 0)) cp_note_freed(pool, true);
      atomic_store_explicit(&f->dirty, true, memory_order_relaxed);
      tcache_unlock(f);
      return 0;
    }
    tcache_unlock(f);
    spill_half(pool, f);
  }
}

/* A free the thread's home cache (`checked`) did not take: one lookup in
 * the owned table names the arena whose segment holds addr, and the free
 * goes there (that arena's cache of this thread, if it lent the block, else
 * its pool). No arena's segment: ENOENT with no lock taken. Only when the
 * table cannot tell (a granule two arenas share) is each arena asked in
 * turn, and those that do not hold it answer ENOENT untouched. */
static __attribute__((noinline)) int free_in_owner(cp_pool_t *main, const cp_tcache_t *checked, uintptr_t addr,
                                                   const uint64_t *restream, uint64_t key, unsigned flags) {
  int rc = ENOENT;
  cp_for_each_arena_owning(pool, main, addr) {
    cp_tcache_t *f = tcache_find(pool);
    rc = f == checked ? NOT_LENT : tcache_free(pool, f, addr, restream, key, flags);
    if (rc == NOT_LENT) rc = free_slow(pool, f, addr, restream, key, flags);
    if (rc != ENOENT) break;
  }
  return rc;
}

/* The thread's own arena's cache first: where it allocates, and so mostly
 * frees, without a lookup. */
static inline __attribute__((always_inline)) int
arenas_free(cp_pool_t *main, uintptr_t addr, const uint64_t *restream, uint64_t key, unsigned flags) {
  cp_pool_t *home = cp_arena_home(main);
  cp_tcache_t *f = tcache_find(home);
  int rc = tcache_free(home, f, addr, restream, key, flags);
  return rc != NOT_LENT ? rc : free_in_owner(main, f, addr, restream, key, flags);
}

int cp_tcache_free(cp_pool_t *main, uintptr_t addr, uint64_t key, unsigned flags) {
  return arenas_free(main, addr, NULL, key, flags);
}

int cp_tcache_free_on_stream(cp_pool_t *main, uintptr_t addr, uint64_t stream, uint64_t key, unsigned flags) {
  return arenas_free(main, addr, &stream, key, flags);
}
