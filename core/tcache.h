/* tcache.h: a thread cache's layout and its pointer work, for tcache.c
 * (the thread's side: the calls, a thread's caches) and tcache_flush.c (the
 * pool's side: folding, flushing, taking blocks back). tcache.c's header
 * comment says what a cache owns, its rules and its locking.
 *
 * Inline: the cached pair (cp_tcache_alloc + cp_tcache_free of a cached
 * block) runs on these alone, and the GPU host's gcc has no LTO. */
#ifndef CUDAPOOL_CORE_TCACHE_H
#define CUDAPOOL_CORE_TCACHE_H

#include <pthread.h>
#include <sched.h>

#include "pool_internal.h"

#define FREE_MAX 32                /* freed blocks a cache holds before it spills half */

#define TABLE_SLOTS 256            /* address table (live lent blocks), a power of two */

#define LENT_MAX (TABLE_SLOTS / 2) /* lent blocks, live or freed: keeps probes short */

#define TLS_TCACHES 16              /* pools one thread caches for: arenas of several devices */

typedef struct cp_tcache {
  atomic_flag busy;
  cp_pool_t *pool;              /* NULL once the pool is destroyed (under tcaches_lock) */
  struct cp_tcache *prev, *next; /* pool->tcaches, under the pool lock */
  uint64_t stream, key;         /* of every block in free_ */
  unsigned n_free, n_lent;
  cp_block_t *free_[FREE_MAX];
  /* The live lent blocks: the newest in `hot` (a thread that frees what it
   * just allocated finds it with one compare), the others in `slot`. */
  uintptr_t hot_addr; /* hot's address (0: none), so a free compares without loading the block */
  cp_block_t *hot;
  struct {
    uintptr_t addr;
    cp_block_t *block;
  } slot[TABLE_SLOTS];
  /* The fast paths' change to the gauges since the last fold, with the
   * highest (and for bytes the lowest) each reached: a block moving between
   * the program and the cache changes allocated bytes by its size and
   * pending and cached bytes by the opposite, so one figure serves three. */
  int64_t bytes, bytes_max, bytes_min, blocks, blocks_max, requested, requested_max;
  uint64_t n_alloc, n_freed; /* fast allocations (all hits by key) and frees since the last fold */
  /* Whether a flush has anything to do (freed blocks, or figures to fold):
   * written under the cache's lock, read without it by flush(), so that the
   * other threads' idle caches cost a load each, not a lock. A flush that
   * misses a store racing with it is one that ran just before that fast
   * path; one the program ordered after it sees it (happens-before). */
  atomic_bool dirty;
} cp_tcache_t;

typedef struct tls_tcache {
  cp_pool_t *pool;
  uint64_t uid;
  cp_tcache_t *tcache;
  unsigned forks; /* tcache.c's `forks` when it was made: older ones are a parent's copies */
} tls_tcache_t;

/* Taken before any pool lock and a cache's: a thread leaving, a pool destroyed. */
extern pthread_mutex_t cp_tcaches_lock;

static inline void tcache_lock(cp_tcache_t *f) {
  while (atomic_flag_test_and_set_explicit(&f->busy, memory_order_acquire)) sched_yield();
}

static inline void tcache_unlock(cp_tcache_t *f) { atomic_flag_clear_explicit(&f->busy, memory_order_release); }

/* ---- the address table: linear probing, backward-shift deletion ------------------ */

static inline unsigned home(uintptr_t addr) {
  return (unsigned)(((uint64_t)(addr >> 9) * 0x9e3779b97f4a7c15ull) >> 56) & (TABLE_SLOTS - 1);
}

/* Out of line: the hot block's compare comes first, and inlined, the
 * compiler hashed every freed address before it. */
static __attribute__((noinline, unused)) int table_find(const cp_tcache_t *f, uintptr_t addr) {
  for (unsigned i = home(addr);; i = (i + 1) & (TABLE_SLOTS - 1)) {
    if (f->slot[i].addr == addr) return (int)i;
    if (!f->slot[i].addr) return -1;
  }
}

/* There is always room: n_lent <= LENT_MAX. */
static inline void table_insert(cp_tcache_t *f, cp_block_t *b) {
  unsigned i = home(b->addr);
  while (f->slot[i].addr) i = (i + 1) & (TABLE_SLOTS - 1);
  f->slot[i].addr = b->addr;
  f->slot[i].block = b;
}

static inline void table_remove_at(cp_tcache_t *f, unsigned i) {
  for (unsigned j = i;;) {
    f->slot[i].addr = 0;
    for (;;) {
      j = (j + 1) & (TABLE_SLOTS - 1);
      if (!f->slot[j].addr) return;
      unsigned k = home(f->slot[j].addr);
      /* The entry at j may stay unless its home lies cyclically outside (i, j]. */
      bool stays = i < j ? (k > i && k <= j) : (k > i || k <= j);
      if (!stays) break;
    }
    f->slot[i] = f->slot[j];
    i = j;
  }
}

/* ---- the live lent blocks: `hot`, then the table ---------------------------------- */

enum { LENT_HOT = TABLE_SLOTS }; /* lent_find's answer for the hot block; -1: none */

static inline int lent_find(const cp_tcache_t *f, uintptr_t addr) {
  return f->hot_addr == addr ? LENT_HOT : table_find(f, addr);
}

static inline cp_block_t *lent_at(const cp_tcache_t *f, int i) {
  return i == LENT_HOT ? f->hot : f->slot[i].block;
}

static inline void lent_remove_at(cp_tcache_t *f, int i) {
  if (i == LENT_HOT) {
    f->hot_addr = 0;
    f->hot = NULL;
  } else {
    table_remove_at(f, (unsigned)i);
  }
}

static inline void lent_insert(cp_tcache_t *f, cp_block_t *b) {
  if (f->hot) table_insert(f, f->hot);
  f->hot = b;
  f->hot_addr = b->addr;
}

/* ---- figures ---------------------------------------------------------------------- */

/* The program got b back from the cache. */
static inline void count_lend(cp_tcache_t *f, const cp_block_t *b) {
  f->bytes += (int64_t)b->size;
  if (f->bytes > f->bytes_max) f->bytes_max = f->bytes;
  if (++f->blocks > f->blocks_max) f->blocks_max = f->blocks;
  f->requested += (int64_t)b->requested;
  if (f->requested > f->requested_max) f->requested_max = f->requested;
}

/* The program freed b into the cache. */
static inline void count_return(cp_tcache_t *f, const cp_block_t *b) {
  f->bytes -= (int64_t)b->size;
  if (f->bytes < f->bytes_min) f->bytes_min = f->bytes;
  f->blocks--;
  f->requested -= (int64_t)b->requested;
}

/* Cache lock held. */
static inline void note_dirty(cp_tcache_t *f) {
  atomic_store_explicit(&f->dirty, f->n_free != 0 || f->n_alloc != 0 || f->n_freed != 0,
                        memory_order_relaxed);
}

/* ---- tcache_flush.c: with the pool lock held --------------------------------------- */

/* Pool lock and cache lock held: the cache's figures go into the pool's stats. */
void cp_tcache_fold(cp_pool_t *pool, cp_tcache_t *f);
/* Pool lock and cache lock held, figures folded: the first n freed blocks
 * go back to the pool as keyed pending blocks. */
void cp_tcache_spill(cp_pool_t *pool, cp_tcache_t *f, unsigned n);
/* Every deferred free becomes pending, in free order; whether there were any. */
bool cp_tcache_drain_deferred(cp_pool_t *pool);
/* The cache leaves the pool; live blocks become the pool's alone. */
void cp_tcache_detach(cp_pool_t *pool, cp_tcache_t *f);

#endif
