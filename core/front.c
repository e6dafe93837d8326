/* front.c: the per-thread front cache of a pool (cp_front_alloc/free).
 *
 * What it owns. Each thread has, per pool it used, a cp_front_t: blocks the
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
 * Every pool operation of front.c drains the stack before anything else
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
 * work only). `fronts_lock` (a thread leaving, a pool destroyed) comes
 * before both. block->lent is written under the pool lock; tc_free,
 * requested and the cache's fields under the cache lock; a deferred block's
 * fields, by its thread before the push and under the pool lock after it
 * (the push releases, the pool's exchange acquires). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "pool_internal.h"

#define FREE_MAX 32                /* freed blocks a cache holds before it spills half */
#define TABLE_SLOTS 256            /* address table (live lent blocks), a power of two */
#define LENT_MAX (TABLE_SLOTS / 2) /* lent blocks, live or freed: keeps probes short */
#define TLS_FRONTS 16              /* pools one thread caches for: arenas of several devices */

typedef struct cp_front {
  atomic_flag busy;
  cp_pool_t *pool;              /* NULL once the pool is destroyed (under fronts_lock) */
  struct cp_front *prev, *next; /* pool->fronts, under the pool lock */
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
} cp_front_t;

typedef struct tls_front {
  cp_pool_t *pool;
  uint64_t uid;
  cp_front_t *front;
} tls_front_t;

/* One thread-local block, so that the hint and its entry cost one address. */
static __thread __attribute__((tls_model("initial-exec"))) struct {
  unsigned hint; /* the entry found last */
  tls_front_t at[TLS_FRONTS];
} my;
static pthread_mutex_t fronts_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
static _Atomic uint64_t next_uid = 1;

static void front_lock(cp_front_t *f) {
  while (atomic_flag_test_and_set_explicit(&f->busy, memory_order_acquire)) sched_yield();
}

static void front_unlock(cp_front_t *f) { atomic_flag_clear_explicit(&f->busy, memory_order_release); }

/* ---- the address table: linear probing, backward-shift deletion ------------------ */

static unsigned home(uintptr_t addr) {
  return (unsigned)(((uint64_t)(addr >> 9) * 0x9e3779b97f4a7c15ull) >> 56) & (TABLE_SLOTS - 1);
}

/* Out of line: the hot block's compare comes first, and inlined, the
 * compiler hashed every freed address before it. */
static __attribute__((noinline)) int table_find(const cp_front_t *f, uintptr_t addr) {
  for (unsigned i = home(addr);; i = (i + 1) & (TABLE_SLOTS - 1)) {
    if (f->slot[i].addr == addr) return (int)i;
    if (!f->slot[i].addr) return -1;
  }
}

/* There is always room: n_lent <= LENT_MAX. */
static void table_insert(cp_front_t *f, cp_block_t *b) {
  unsigned i = home(b->addr);
  while (f->slot[i].addr) i = (i + 1) & (TABLE_SLOTS - 1);
  f->slot[i].addr = b->addr;
  f->slot[i].block = b;
}

static void table_remove_at(cp_front_t *f, unsigned i) {
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

static inline int lent_find(const cp_front_t *f, uintptr_t addr) {
  return f->hot_addr == addr ? LENT_HOT : table_find(f, addr);
}

static inline cp_block_t *lent_at(const cp_front_t *f, int i) {
  return i == LENT_HOT ? f->hot : f->slot[i].block;
}

static inline void lent_remove_at(cp_front_t *f, int i) {
  if (i == LENT_HOT) {
    f->hot_addr = 0;
    f->hot = NULL;
  } else {
    table_remove_at(f, (unsigned)i);
  }
}

static inline void lent_insert(cp_front_t *f, cp_block_t *b) {
  if (f->hot) table_insert(f, f->hot);
  f->hot = b;
  f->hot_addr = b->addr;
}

/* ---- figures ---------------------------------------------------------------------- */

/* The program got b back from the cache. */
static inline void count_lend(cp_front_t *f, const cp_block_t *b) {
  f->bytes += (int64_t)b->size;
  if (f->bytes > f->bytes_max) f->bytes_max = f->bytes;
  if (++f->blocks > f->blocks_max) f->blocks_max = f->blocks;
  f->requested += (int64_t)b->requested;
  if (f->requested > f->requested_max) f->requested_max = f->requested;
}

/* The program freed b into the cache. */
static inline void count_return(cp_front_t *f, const cp_block_t *b) {
  f->bytes -= (int64_t)b->size;
  if (f->bytes < f->bytes_min) f->bytes_min = f->bytes;
  f->blocks--;
  f->requested -= (int64_t)b->requested;
}

/* Cache lock held. */
static void note_dirty(cp_front_t *f) {
  atomic_store_explicit(&f->dirty, f->n_free != 0 || f->n_alloc != 0 || f->n_freed != 0,
                        memory_order_relaxed);
}

static void gauge_add(cudapool_gauge_t *g, int64_t delta, int64_t delta_max) {
  if (g->current + delta_max > g->peak) g->peak = g->current + delta_max;
  g->current += delta;
}

/* Pool lock and cache lock held. */
static void fold(cp_pool_t *pool, cp_front_t *f) {
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
static void spill(cp_pool_t *pool, cp_front_t *f, unsigned n) {
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
static unsigned flush(cp_pool_t *pool, cp_front_t *f) {
  /* An idle cache (every other thread's, at each slow-path allocation) has
   * nothing to fold: only its fast paths count, and they make it dirty. */
  if (!atomic_load_explicit(&f->dirty, memory_order_relaxed)) return 0;
  front_lock(f);
  fold(pool, f);
  unsigned n = f->n_free;
  spill(pool, f, n);
  front_unlock(f);
  return n;
}

/* ---- frees without a key ---------------------------------------------------------- */

/* Cache lock held, b found at lent index i: the program freed b without a
 * key; it leaves the cache for the pool's deferred stack. */
static void defer(cp_pool_t *pool, cp_front_t *f, cp_block_t *b, int i) {
  lent_remove_at(f, i);
  f->n_lent--;
  b->tc_free = true; /* a second free finds it freed (cp_front_take_back) */
  /* Counted by the pool when it takes it, before any decision or read:
   * the cache stays clean, so other threads' flushes pass it by. */
  cp_block_t *head = atomic_load_explicit(&pool->deferred, memory_order_relaxed);
  do b->deferred_next = head;
  while (!atomic_compare_exchange_weak_explicit(&pool->deferred, &head, b, memory_order_release,
                                                memory_order_relaxed));
  if (!head) cp_note_freed(pool, true); /* the first to wait */
}

/* Pool lock held (or the pool being destroyed): every deferred free
 * becomes pending, in free order, before the pool does anything else with
 * its lock, so that the pool counts the frees in the program's order and a
 * free's place in the free order is never earlier than the free. Returns
 * whether there were any. */
static bool drain_deferred(cp_pool_t *pool) {
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

/* ---- with the pool lock held (pool_internal.h) ------------------------------------ */

bool cp_fronts_flush_all(cp_pool_t *pool) {
  bool any = drain_deferred(pool);
  for (cp_front_t *f = pool->fronts; f; f = f->next) any |= flush(pool, f) > 0;
  return any;
}

void cp_fronts_fold_all(cp_pool_t *pool) {
  drain_deferred(pool);
  for (cp_front_t *f = pool->fronts; f; f = f->next) {
    front_lock(f);
    fold(pool, f);
    front_unlock(f);
  }
}

bool cp_front_take_back(cp_pool_t *pool, cp_block_t *b) {
  (void)pool;
  cp_front_t *f = b->lent;
  front_lock(f);
  bool live = !b->tc_free;
  if (live) {
    int i = lent_find(f, b->addr);
    if (i >= 0) lent_remove_at(f, i);
    f->n_lent--;
    b->lent = NULL;
  }
  front_unlock(f);
  return live;
}

bool cp_front_holds_freed(cp_block_t *b) {
  cp_front_t *f = b->lent;
  front_lock(f);
  bool freed = b->tc_free;
  front_unlock(f);
  return freed;
}

size_t cp_fronts_held(cp_pool_t *main) {
  size_t n = 0;
  for (unsigned i = 0; i < cp_arena_count(main); i++) {
    cp_pool_t *pool = cp_arena_at(main, i);
    pthread_mutex_lock(&pool->lock);
    for (cp_front_t *f = pool->fronts; f; f = f->next) {
      front_lock(f);
      n += f->n_free;
      front_unlock(f);
    }
    pthread_mutex_unlock(&pool->lock);
  }
  return n;
}

void cp_fronts_update_on(cp_pool_t *pool) {
  if (!pool->uid) pool->uid = atomic_fetch_add(&next_uid, 1);
  atomic_store(&pool->front_on, pool->observer == NULL && pool->cfg.reuse == CP_REUSE_DEFERRED);
}

void cp_fronts_orphan(cp_pool_t *pool) {
  /* Deferred frees take their place in the free order first: the teardown
   * then waits for the device before it unmaps their pages. */
  drain_deferred(pool);
  pthread_mutex_lock(&fronts_lock);
  for (cp_front_t *f = pool->fronts; f; f = f->next) {
    front_lock(f);
    f->pool = NULL; /* its thread frees it */
    front_unlock(f);
  }
  pool->fronts = NULL;
  pthread_mutex_unlock(&fronts_lock);
}

/* ---- the thread's caches ---------------------------------------------------------- */

/* Pool lock held: the cache leaves the pool; live blocks become the pool's alone. */
static void detach(cp_pool_t *pool, cp_front_t *f) {
  drain_deferred(pool); /* its deferred blocks name the cache */
  front_lock(f);
  fold(pool, f);
  spill(pool, f, f->n_free);
  for (unsigned i = 0; i < TABLE_SLOTS; i++)
    if (f->slot[i].addr) f->slot[i].block->lent = NULL;
  if (f->hot) f->hot->lent = NULL;
  front_unlock(f);
  if (f->prev)
    f->prev->next = f->next;
  else
    pool->fronts = f->next;
  if (f->next) f->next->prev = f->prev;
}

static void thread_exit(void *unused) {
  (void)unused;
  for (int i = 0; i < TLS_FRONTS; i++) {
    cp_front_t *f = my.at[i].front;
    if (!f) continue;
    pthread_mutex_lock(&fronts_lock);
    cp_pool_t *pool = f->pool;
    if (pool) {
      pthread_mutex_lock(&pool->lock);
      detach(pool, f);
      cp_settle_and_unlock(pool);
    }
    pthread_mutex_unlock(&fronts_lock);
    free(f);
    my.at[i] = (tls_front_t){0};
  }
}

static void exit_key_init(void) { pthread_key_create(&exit_key, thread_exit); }

/* This thread's cache of the pool, or NULL. A cache left over from a
 * destroyed pool at the same address is freed here. */
static __attribute__((noinline)) cp_front_t *front_search(cp_pool_t *pool) {
  for (unsigned i = 0; i < TLS_FRONTS; i++) {
    if (my.at[i].pool != pool) continue;
    if (my.at[i].uid == pool->uid) {
      my.hint = i;
      return my.at[i].front;
    }
    free(my.at[i].front); /* orphaned: its pool is gone */
    my.at[i] = (tls_front_t){0};
  }
  return NULL;
}

static inline cp_front_t *front_find(cp_pool_t *pool) {
  const tls_front_t *t = &my.at[my.hint];
  return t->pool == pool && t->uid == pool->uid ? t->front : front_search(pool);
}

/* Pool lock held. NULL when the thread caches too many pools or no memory. */
static cp_front_t *front_create(cp_pool_t *pool) {
  for (int i = 0; i < TLS_FRONTS; i++) {
    if (my.at[i].front) continue;
    pthread_once(&exit_once, exit_key_init);
    cp_front_t *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    atomic_flag_clear(&f->busy);
    f->pool = pool;
    f->next = pool->fronts;
    if (f->next) f->next->prev = f;
    pool->fronts = f;
    my.at[i] = (tls_front_t){pool, pool->uid, f};
    pthread_setspecific(exit_key, f);
    return f;
  }
  return NULL;
}

/* The smallest freed block the pool would hand out whole for rsize. */
static int best_whole(cp_pool_t *pool, const cp_front_t *f, size_t rsize) {
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
static void own(cp_pool_t *pool, cp_front_t *f, uint64_t stream, uint64_t key, cp_block_t *b) {
  /* Not always so: a split the pool could not make hands a block out whole. */
  bool whole = b && cp_serves_whole(&pool->cfg, b, cp_round_size(&pool->cfg, b->requested));
  front_lock(f);
  f->stream = stream;
  f->key = key;
  if (b) {
    lent_insert(f, b);
    f->n_lent++;
    b->lent = f;
    b->tc_free = false;
    b->whole_for_requested = whole;
  }
  front_unlock(f);
}

static __attribute__((noinline)) int alloc_slow(cp_pool_t *main, cp_pool_t *home, cp_front_t *f, size_t size,
                                                uint64_t stream, uint64_t key, uintptr_t *out) {
  cp_pool_t *pool = cp_arena_lock(main, home);
  if (pool != home) f = front_find(pool); /* the thread moved */
  bool lend = atomic_load_explicit(&pool->front_on, memory_order_relaxed);
  if (!f && lend) f = front_create(pool);
  /* What every cache holds freed goes back first: the pool's best fit sees
   * it all, so its choices, and the memory it reserves, are those of a pool
   * without caches (a block left in another thread's cache made the pool
   * split or grow for requests it could have served: +3% reserved on a
   * PyTorch transformer, whose backward pass runs on its own thread). */
  bool freed = cp_fronts_flush_all(pool);
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
      cp_fronts_flush_all(pool);
      rc = cp_alloc_locked(pool, size, stream, key, &b);
      if (rc == 0) *out = b->addr;
    } else {
      cp_refused(pool, size, stream);
    }
    cp_settle_and_unlock(pool);
  }
  return rc;
}

int cp_front_alloc(cp_pool_t *main, size_t size, uint64_t stream, uint64_t key, uintptr_t *out) {
  if (size == 0) return EINVAL;
  cp_pool_t *pool = cp_arena_home(main);
  cp_front_t *f = front_find(pool);
  if (f && key) {
    front_lock(f);
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
        front_unlock(f);
        *out = b->addr;
        return 0;
      }
    }
    front_unlock(f);
  }
  return alloc_slow(main, pool, f, size, stream, key, out);
}

/* Half the freed blocks go back to the pool: the cache is full. */
static __attribute__((noinline)) void spill_half(cp_pool_t *pool, cp_front_t *f) {
  pthread_mutex_lock(&pool->lock);
  drain_deferred(pool);
  front_lock(f);
  fold(pool, f);
  spill(pool, f, f->n_free / 2);
  front_unlock(f);
  cp_settle_and_unlock(pool);
}

static __attribute__((noinline)) int free_slow(cp_pool_t *pool, cp_front_t *f, uintptr_t addr,
                                               const uint64_t *restream, uint64_t key, unsigned flags) {
  if (!cp_owned_maybe(addr)) return ENOENT; /* no pool's: no lock for each arena */
  pthread_mutex_lock(&pool->lock);
  drain_deferred(pool); /* frees this thread deferred came first */
  if (f) {
    front_lock(f);
    fold(pool, f);
    front_unlock(f);
  }
  return cp_free_and_unlock(pool, addr, restream, key, flags);
}

/* restream as cp_free_locked's: a block that changes stream takes the slow path. */
static inline __attribute__((always_inline)) int
front_free(cp_pool_t *pool, uintptr_t addr, const uint64_t *restream, uint64_t key, unsigned flags) {
  cp_front_t *f = front_find(pool);
  if (!f || flags || !atomic_load_explicit(&pool->front_on, memory_order_relaxed))
    return free_slow(pool, f, addr, restream, key, flags);
  for (;;) {
    front_lock(f);
    int i = lent_find(f, addr);
    cp_block_t *b = i >= 0 ? lent_at(f, i) : NULL;
    bool same_stream = b && (!restream || *restream == b->stream);
    /* Deferred only while nothing of the cache's fast paths waits to be
     * folded: the pool then counts this free after everything before it. */
    if (same_stream && !key && !f->n_alloc && !f->n_freed) {
      defer(pool, f, b, i);
      front_unlock(f);
      return 0;
    }
    if (!same_stream || !key || key != f->key || b->stream != f->stream) {
      front_unlock(f);
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
      atomic_store_explicit(&f->dirty, true, memory_order_relaxed);
      front_unlock(f);
      if (__builtin_expect(first, 0)) cp_note_freed(pool, true);
      return 0;
    }
    front_unlock(f);
    spill_half(pool, f);
  }
}

/* The thread's own arena first (where it allocates, and so mostly frees),
 * then the others: a block belongs to the arena whose segment holds it. */
static __attribute__((noinline)) int free_in_other_arenas(cp_pool_t *main, cp_pool_t *home, uintptr_t addr,
                                                          const uint64_t *restream, uint64_t key,
                                                          unsigned flags) {
  if (!cp_owned_maybe(addr)) return ENOENT; /* no arena's: not even their caches' locks */
  int rc = ENOENT;
  for (unsigned i = 0, n = cp_arena_count(main); rc == ENOENT && i < n; i++) {
    cp_pool_t *a = cp_arena_at(main, i);
    if (a != home) rc = front_free(a, addr, restream, key, flags);
  }
  return rc;
}

static inline __attribute__((always_inline)) int
arenas_free(cp_pool_t *main, uintptr_t addr, const uint64_t *restream, uint64_t key, unsigned flags) {
  cp_pool_t *home = cp_arena_home(main);
  int rc = front_free(home, addr, restream, key, flags);
  if (rc == ENOENT && atomic_load_explicit(&main->has_arenas, memory_order_relaxed))
    rc = free_in_other_arenas(main, home, addr, restream, key, flags);
  return rc;
}

int cp_front_free(cp_pool_t *main, uintptr_t addr, uint64_t key, unsigned flags) {
  return arenas_free(main, addr, NULL, key, flags);
}

int cp_front_free_on_stream(cp_pool_t *main, uintptr_t addr, uint64_t stream, uint64_t key, unsigned flags) {
  return arenas_free(main, addr, &stream, key, flags);
}
