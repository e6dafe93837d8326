/* pool_internal.h: the pool's state, shared by the core's .c files only.
 *
 * Two levels. A device pool is what the program's calls name (pool.h's
 * cp_pool_t *, its main pool): the configuration, the observer, its arenas
 * and what they share (cp_device_pool_t: barriers in flight, the budget, the
 * arena table). An arena (struct cp_pool) is one lock with what it guards:
 * the two subpools, the segments, the pointer map, the free order and
 * fences, the thread caches. The main pool is the device pool's first
 * arena; cp_for_each_arena visits them all, cp_for_each_arena_owning only
 * the one the owned table names for an address.
 *
 * Why the configuration, backend and observer are copied into every arena
 * instead of living in cp_device_pool_t alone: an allocation reads them on
 * every call under its arena's lock; a copy on the arena's own cache lines
 * costs nothing to read, a pointer to the device pool's would put a shared
 * line on every thread's hot path. They are written only while no arena
 * serves (creation, cp_pool_set_observer under every arena's lock).
 *
 * Locking: an arena's `lock` guards its fields. Public functions (pool.h)
 * take it; functions declared below expect it held unless they say not.
 *
 * Ownership: the arena owns its segments, blocks and keyed trees. Block
 * structs are recycled through `spare` so that splitting never calls malloc
 * on the hot path once the pool is warm.
 *
 * Where each verb lives: config.c (defaults, rounding), pool.c (life cycle,
 * observer), alloc.c (a request to a block), free.c (a free), query.c
 * (what a pointer is), reuse.c (pending and ready blocks), sync.c
 * (barriers, fences, synchronisations), limits.c (limit, budget, trim),
 * segment.c and pages.c (backend memory), tcache.c and tcache_flush.c (thread
 * caches), arena.c (a thread's arena, the shared free order), stats.c,
 * owned.c (which arena owns an address, without a lock). */
#ifndef CUDAPOOL_CORE_POOL_INTERNAL_H
#define CUDAPOOL_CORE_POOL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* uthash's default (Jenkins) costs more than the rest of a cache hit; the
 * keys here are whole 64-bit words: block addresses (the ACTIVE map) and
 * (stream, key) pairs. The bucket is the hash's low bits, and uthash stops
 * doubling its table for good after two doublings that leave over half the
 * entries past their bucket's ideal length (ineff_expands, noexpand): a
 * single multiply and shift left 10^5 addresses 512 bytes apart in 128
 * buckets, chains 7,853 long, every free O(live blocks). So every bit of a
 * key must reach the low bits: splitmix64's finalizer (Stafford's mix13).
 * An address is hashed as its 2 MiB region (mixed) XOR its 512-byte slot
 * in that region: blocks of one region never share a bucket once the table
 * has 4096 buckets (before that they fill each bucket equally), regions
 * land at random, and blocks freed in address order touch neighbouring
 * buckets (a million frees in allocation order cost half the time of a
 * fully mixed address: bench/core_bench.c, free_with_N_live). */
static inline uint64_t cp_mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

static inline unsigned cp_hash_words(const void *key, size_t len) {
  uint64_t w, h = 0x9e3779b97f4a7c15ull;
  if (len == 8) {
    memcpy(&w, key, 8);
    return (unsigned)(cp_mix64(w >> 21) ^ ((w >> 9) & 0xfff));
  }
  for (size_t i = 0; i + 8 <= len; i += 8) {
    memcpy(&w, (const char *)key + i, 8);
    h = cp_mix64(h ^ w);
  }
  return (unsigned)h;
}
#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = cp_hash_words((keyptr), (keylen)))

#include "bins.h"
#include "owned.h"
#include "pool.h"

typedef struct cp_device_pool cp_device_pool_t;

/* Pending blocks that one (stream, key) may reuse at once. */
typedef struct cp_keyed {
  struct {
    uint64_t stream, key;
  } id;
  struct cp_size_tree tree;
  size_t count;
  UT_hash_handle hh;
} cp_keyed_t;

typedef struct cp_subpool {
  cp_bins_t ready;
  cp_keyed_t *keyed;      /* uthash by id */
  cp_keyed_t *last_keyed; /* the one looked up last: usually the next too */
  size_t pending_bytes;
  size_t pending_count;
} cp_subpool_t;

typedef struct cp_fence_rec {
  cp_fence_t fence;
  uint64_t covers; /* completes every block with free_seq <= covers */
} cp_fence_rec_t;

/* The device pool: what the arenas of one device share (arena.c); owned
 * by the main pool.
 * The atomics live on their own cache lines: every arena writes them (the
 * free order and barrier coverage are each arena's own: cp_pool). */
typedef struct cp_device_pool {
  /* One barrier in flight on the device at a time (sync.c): an arena that
   * needs one meanwhile waits for it, and issues the next only if it did
   * not cover its frees. Barriers reach every stream: issued one after
   * another by each arena, they queued behind each other in the driver. */
  pthread_mutex_t barrier_lock;
  pthread_cond_t barrier_done;
  atomic_bool barrier_in_flight; /* written under barrier_lock */
  unsigned barrier_waiters;      /* under barrier_lock: arenas waiting for it (tests read it) */
  /* Bytes reserved by every arena, claimed before the backend call so that
   * arenas growing at once stay under the limit together; `held`, of them,
   * those the backend gave (no claim in flight), and its peak. */
  _Alignas(64) _Atomic size_t reserved;
  _Atomic size_t held, held_peak;
  /* The bytes allocated in every arena, each arena's last changes short of
   * CP_ALLOCATED_SLACK left out (an arena adds its change here once that
   * much has gathered): a limit check far from the limit reads this word
   * alone, one near it adds up every arena's exact allocated_now. Written
   * once per 64 MiB of change, where a total written at every allocation
   * and free made every arena's threads write one cache line. */
  _Alignas(64) _Atomic int64_t allocated_approx;
  _Alignas(64) pthread_mutex_t arenas_lock; /* making arenas; the config of all */
  _Atomic unsigned n_arenas;                /* arenas[0] is the main pool */
  cp_pool_t *arenas[CP_ARENAS_MAX];
  bool retired; /* no new arenas after cp_pool_retire */
} cp_device_pool_t;

struct cp_pool {
  pthread_mutex_t lock;
  int device;
  cp_config_t cfg;
  cp_backend_t be;
  cp_observer_fn *observer; /* NULL: nobody watches */
  void *observer_ctx;
  cp_subpool_t small, large;
  cp_block_t *active;                /* uthash: addr -> ACTIVE block, plus `anchor` */
  cp_block_t anchor;                 /* keeps the map from emptying (see pool.c) */
  struct cp_segment_tree segments;   /* by base address */
  cp_segment_t *oldest, *newest;     /* creation order */
  cp_block_t *fifo_head, *fifo_tail; /* PENDING blocks in free order */
  uint64_t free_seq;                 /* last sequence number handed out (this arena's own order) */
  uint64_t fenced_upto;              /* newest free_seq a fence covers */
  uint64_t completed_seq;            /* the device work of every free up to it has completed */
  /* Barriers in flight (sync.c, cp_try_barrier): one at a time is issued
   * without the lock; threads that need one meanwhile wait for it. */
  pthread_cond_t barrier_done; /* broadcast when the barrier in flight returns */
  bool barrier_in_flight;
  uint64_t barrier_covered; /* newest mark a barrier covered (its own, or another arena's applied) */
  unsigned barrier_waiters; /* threads waiting for the barrier in flight (tests read it) */
  size_t page;              /* expandable segments' page size; 0 = none are made */
  cp_fence_rec_t *fences;   /* ring of outstanding fences */
  size_t fence_head, fence_count, fence_cap;
  cp_block_t *spare;       /* recycled block structs (via next) */
  uint64_t uid;            /* never reused: tells a thread's cache of a destroyed pool from this one's */
  atomic_bool has_arenas;  /* main pool: it has made an arena (beside uid: read on every allocation) */
  struct cp_tcache *tcaches; /* the thread caches of this pool (tcache.c) */
  /* Lent blocks their threads freed without a key (tcache.c): pushed without
   * the lock, made pending at the next flush, before any decision. */
  _Atomic(cp_block_t *) deferred;
  atomic_bool tcache_on; /* thread caches may serve (no observer, deferred reuse) */
  size_t block_count, free_block_count;
  cudapool_stats_t stats;
  /* stats.allocated_bytes.current for other arenas' limit checks, and what
   * of it this arena has added to devpool->allocated_approx (lock held). */
  _Atomic int64_t allocated_now;
  int64_t allocated_added;
  /* Arenas (arena.c): the pool the program sees (`main`, itself for it)
   * and the arenas its threads moved to when its lock was contended. */
  cp_pool_t *main;
  cp_device_pool_t *devpool; /* main's, for every arena */
  unsigned arena_index; /* in devpool->arenas */
  /* Each arena numbers its own frees: a barrier or a sync takes a mark in
   * every arena's order (cp_mark_t). One counter for all made every free
   * of every thread write one cache line. seq_pub: free_seq, published
   * (release) for a barrier's mark; covered_pub: the newest mark in this
   * arena's order that a completed barrier of any arena covered. */
  _Alignas(64) _Atomic uint64_t seq_pub;
  _Atomic uint64_t covered_pub;
};

static inline bool cp_is_pow2(size_t x) { return x && !(x & (x - 1)); }

/* ---- config.c --------------------------------------------------------------------- */

bool cp_config_valid(const cp_config_t *cfg);

/* Tell the backend that something was freed (backend.h, `freed`): the
 * reclaimer's wake-up. Only on transitions (see its callers), so that a
 * free pays for it rarely. */
static inline void cp_note_freed(const cp_pool_t *pool, bool pending) {
  if (pool->be.freed) pool->be.freed(pool->be.ctx, pool->device, pending);
}

/* ---- pool.c: block structs -------------------------------------------------------- */

cp_block_t *cp_block_new(cp_pool_t *pool);
void cp_block_recycle(cp_pool_t *pool, cp_block_t *block);

/* ---- segment.c ---------------------------------------------------------------------- */

int cp_segment_grow(cp_pool_t *pool, bool small, size_t rsize, cp_block_t **out);
void cp_segment_release(cp_pool_t *pool, cp_segment_t *seg);
/* Unmap what is still mapped of an expandable segment (teardown) and give
 * its range back; no stats are kept. */
void cp_segment_unreserve(cp_pool_t *pool, cp_segment_t *seg);
size_t cp_release_free_segments(cp_pool_t *pool, size_t target_cached);
size_t cp_release_idle_segments(cp_pool_t *pool);
cp_segment_t *cp_segment_containing(cp_pool_t *pool, uintptr_t addr);
void cp_segments_init(cp_pool_t *pool);

/* ---- pages.c: expandable segments ------------------------------------------------ */

/* Map the pages of [b->addr, b->addr+size) that are not mapped yet (b is in
 * an expandable segment), within the limit; *mapped says whether any was.
 * 0, ENOMEM (the limit, or the device is full) or the backend's error. */
int cp_pages_claim(cp_pool_t *pool, cp_block_t *b, size_t size, bool *mapped);
/* Whether the pages of [b->addr, b->addr+size) are all mapped (true for an
 * ordinary segment). */
bool cp_pages_mapped(const cp_pool_t *pool, const cp_block_t *b, size_t size);
/* Unmap mapped pages that READY blocks cover whole and that no device work
 * can touch any more, until `want` bytes are unmapped (SIZE_MAX: all);
 * never the pages of `keep`. Returns the bytes unmapped. */
size_t cp_pages_release(cp_pool_t *pool, size_t want, const cp_block_t *keep);
/* Have the device work of every free so far completed: true when it has
 * (a completed fence or a synchronisation says so). wait: block the host on
 * a fence for it; else only record one, for a later call to find done. */
bool cp_complete_all(cp_pool_t *pool, bool wait);
/* Unmap every page of a wholly free expandable segment, when its work has
 * completed; true when none is left mapped. */
bool cp_pages_release_segment(cp_pool_t *pool, cp_segment_t *seg);

/* ---- reuse.c: pending and ready blocks -------------------------------------------- */

void cp_make_ready(cp_pool_t *pool, cp_block_t *block);
void cp_pending_add(cp_pool_t *pool, cp_block_t *block, uint64_t key);
void cp_pending_remove(cp_pool_t *pool, cp_block_t *block);
/* `block` leaves the pending indexes; `rest` (may be NULL), cut from it, takes
 * its place in the free order and in its keyed tree. */
void cp_pending_split(cp_pool_t *pool, cp_block_t *block, cp_block_t *rest);
void cp_complete_upto(cp_pool_t *pool, uint64_t seq);
/* Pending blocks of the subpool that (stream, key) may not take at once. */
size_t cp_pending_not_usable(cp_subpool_t *sp, uint64_t stream, uint64_t key);
cp_block_t *cp_keyed_best_fit(cp_subpool_t *sp, uint64_t stream, uint64_t key, size_t size);

/* ---- sync.c: barriers and fences ---------------------------------------------------- */

/* What cp_try_barrier did: nothing (no barrier, or it failed), waited for
 * another thread's that covered every free before the call (the blocks it
 * made ready may have been taken since), or issued its own (what it made
 * ready is still there: the lock came back before anyone could take it). */
typedef enum { CP_BARRIER_NONE = 0, CP_BARRIER_SHARED, CP_BARRIER_OWN } cp_barrier_t;
cp_barrier_t cp_try_barrier(cp_pool_t *pool);
bool cp_poll_fences(cp_pool_t *pool);
bool cp_wait_fences(cp_pool_t *pool);
void cp_drop_fences(cp_pool_t *pool, bool release);
/* Forget fences whose blocks a synchronisation already completed. */
void cp_retire_fences_upto(cp_pool_t *pool, uint64_t seq);
/* Record one fence covering every free so far, if none does yet. */
bool cp_fence_everything(cp_pool_t *pool);

/* ---- alloc.c, with the lock held ------------------------------------------------- */

int cp_alloc_locked(cp_pool_t *pool, size_t size, uint64_t stream, uint64_t key, cp_block_t **out);
/* An allocation refused: counted, and reported to the observer. */
void cp_refused(cp_pool_t *pool, size_t size, uint64_t stream);
/* While on, this thread's cp_alloc_locked leaves a refusal to its caller,
 * who tries the other arenas first (tcache.c) and calls cp_refused if they
 * fail. Per thread: a barrier releases the pool lock mid-allocation. */
void cp_defer_refusal(bool on);
/* Whether this thread's last cp_alloc_locked under cp_defer_refusal(true)
 * refused (rather than failing otherwise, as on no memory for its index). */
bool cp_refusal_pending(void);
/* Whether the pool would hand `b` out whole for a request of rsize bytes
 * (same subpool, allowed by max_split, no split). */
bool cp_serves_whole(const cp_config_t *cfg, const cp_block_t *b, size_t rsize);

/* ---- free.c, with the lock held --------------------------------------------------- */

int cp_free_locked(cp_pool_t *pool, uintptr_t addr, const uint64_t *restream, uint64_t key, unsigned flags);
/* cp_free_locked, then the lock released (settled first if the block went back). */
int cp_free_and_unlock(cp_pool_t *pool, uintptr_t addr, const uint64_t *restream, uint64_t key,
                       unsigned flags);
void cp_release_active(cp_pool_t *pool, cp_block_t *b, uint64_t key, unsigned flags, bool counted);
/* The live block at addr in the arena's pointer map (ACTIVE: maybe lent to
 * a thread cache, maybe freed there), never the map's anchor. */
static inline cp_block_t *cp_find_active(cp_pool_t *pool, uintptr_t addr) {
  cp_block_t *b;
  HASH_FIND_PTR(pool->active, &addr, b);
  return b == &pool->anchor ? NULL : b;
}

/* ---- limits.c ---------------------------------------------------------------------- */

/* After blocks went back: the derived stats, the cache cap, then unlock. */
void cp_settle_and_unlock(cp_pool_t *pool);

/* ---- tcache_flush.c: thread caches, with the pool lock held ------------------------ */

/* Fold every cache's figures into the stats and give back every block they
 * hold freed; true if any was given back. */
bool cp_tcaches_flush_all(cp_pool_t *pool);
/* Fold every cache's figures into the stats (peaks exact for one thread). */
void cp_tcaches_fold_all(cp_pool_t *pool);
/* A block lent to a thread cache comes back to the pool: true if it was
 * live (now the pool's alone), false if the cache holds it freed. */
bool cp_tcache_take_back(cp_pool_t *pool, cp_block_t *b);
/* Whether the thread cache lending b holds it freed. */
bool cp_tcache_holds_freed(cp_block_t *b);
/* Blocks every thread cache holds freed (for tests). Takes the pool lock. */
size_t cp_tcaches_held(cp_pool_t *pool);
void cp_tcaches_update_on(cp_pool_t *pool);
/* The pool goes away: its caches are left to their threads, empty. */
void cp_tcaches_orphan(cp_pool_t *pool);

/* ---- the arenas of a device pool --------------------------------------------------- */

/* The next pending block's place in this arena's free order. Published
 * with release: a barrier whose mark reads it covers the free. */
static inline uint64_t cp_seq_next(cp_pool_t *pool) {
  pool->free_seq++;
  atomic_store_explicit(&pool->seq_pub, pool->free_seq, memory_order_release);
  return pool->free_seq;
}
static inline unsigned cp_arena_count(const cp_pool_t *pool) {
  return atomic_load_explicit(&pool->devpool->n_arenas, memory_order_acquire);
}
static inline cp_pool_t *cp_arena_at(const cp_pool_t *pool, unsigned i) { return pool->devpool->arenas[i]; }

/* Every arena of the device pool `main`, the main pool first, as a range
 * of its arena table: [returned, *end). Arenas made later are not in it. */
static inline cp_pool_t *const *cp_arenas_all(const cp_pool_t *main, cp_pool_t *const **end) {
  cp_pool_t *const *first = main->devpool->arenas;
  *end = first + cp_arena_count(main);
  return first;
}
/* The arenas of main that may own addr, the same way: the one the owned
 * table names, every arena when it cannot tell (a granule two arenas'
 * segments share), none when no segment of main covers addr. No lock. */
static inline cp_pool_t *const *cp_arenas_owning(const cp_pool_t *main, uintptr_t addr,
                                                 cp_pool_t *const **end) {
  const void *owner = cp_owned_lookup(addr);
  cp_pool_t *const *at = cp_arenas_all(main, end);
  if (owner == CP_OWNED_ANY) return at;
  /* The owner's address is compared, never read: it may be another
   * device's pool. */
  for (; owner && at < *end; at++)
    if (*at == owner) {
      *end = at + 1;
      return at;
    }
  *end = at;
  return at;
}
#define CP_ARENA_RANGE_LOOP(a, range)                                                               \
  for (cp_pool_t *a = NULL, *const *a##_end_ = NULL, *const *a##_at_ = (range); a##_at_ < a##_end_; \
       a##_at_++)                                                                                   \
    if ((a = *a##_at_), false) {                                                                    \
    } else
/* for (cp_pool_t *a: every arena of main) */
#define cp_for_each_arena(a, main) CP_ARENA_RANGE_LOOP(a, cp_arenas_all((main), &a##_end_))
/* for (cp_pool_t *a: the arenas of main that may own addr); usually one, or none. */
#define cp_for_each_arena_owning(a, main, addr) \
  CP_ARENA_RANGE_LOOP(a, cp_arenas_owning((main), (addr), &a##_end_))

/* ---- stats.c ------------------------------------------------------------------------ */

void cp_stat_add(cudapool_gauge_t *g, int64_t delta);
void cp_stats_refresh_derived(cp_pool_t *pool);

/* ---- limits.c: the budget, the limit, the cache cap ------------------------------- */

/* Claim `bytes` of reserved memory for this arena's next backend call:
 * false when that would pass the limit. Then cp_budget_commit when the
 * backend gave them, else cp_budget_return; cp_budget_release when they go
 * back to the backend (a released segment, unmapped pages). */
bool cp_budget_claim(cp_pool_t *pool, size_t bytes);
void cp_budget_commit(cp_pool_t *pool, size_t bytes);
void cp_budget_return(cp_pool_t *pool, size_t bytes);
void cp_budget_release(cp_pool_t *pool, size_t bytes);
/* Bytes every arena has reserved, claims in flight included. */
size_t cp_budget_reserved(const cp_pool_t *pool);
/* Bytes the backend gave every arena, and their highest. */
size_t cp_budget_held(const cp_pool_t *pool);
size_t cp_budget_held_peak(const cp_pool_t *pool);
void cp_budget_reset_peak(cp_pool_t *pool);
#define CP_ALLOCATED_SLACK ((int64_t)64 << 20)
/* allocated_bytes of this arena changed: what the other arenas read. */
static inline void cp_allocated_publish(cp_pool_t *pool) {
  int64_t now = pool->stats.allocated_bytes.current, change = now - pool->allocated_added;
  atomic_store_explicit(&pool->allocated_now, now, memory_order_relaxed);
  if (change >= CP_ALLOCATED_SLACK || change <= -CP_ALLOCATED_SLACK) {
    atomic_fetch_add_explicit(&pool->devpool->allocated_approx, change, memory_order_relaxed);
    pool->allocated_added = now;
  }
}
static inline void cp_allocated_add(cp_pool_t *pool, int64_t delta) {
  cp_stat_add(&pool->stats.allocated_bytes, delta);
  cp_allocated_publish(pool);
}
/* Whether a request of `size` bytes would take every arena's allocated
 * bytes past the limit (then no memory, cached or new, may serve it);
 * cp_over_limit_rounded for a size already rounded. No lock needed. */
bool cp_over_limit(cp_pool_t *pool, size_t size);
bool cp_over_limit_rounded(cp_pool_t *pool, size_t rsize);
/* Empty every arena but `except` (the out-of-memory path): bytes released. */
size_t cp_arenas_reclaim(cp_pool_t *main, cp_pool_t *except);
/* cp_empty_cache of one arena. */
size_t cp_empty_cache_one(cp_pool_t *pool);

/* ---- arena.c: arenas ---------------------------------------------------------------- */

/* Pool lock held: what other arenas' barriers made ready here, made ready. */
void cp_arena_catch_up(cp_pool_t *pool);
/* Every arena's frees so far (their published seq): what a barrier issued
 * now covers. */
void cp_arena_marks(cp_pool_t *pool, cp_mark_t *out);
/* A barrier covered every arena's frees up to its mark: they learn it. */
void cp_arena_publish_barrier(cp_pool_t *pool, const cp_mark_t *mark);
int cp_device_pool_init(cp_pool_t *pool);
void cp_device_pool_fini(cp_pool_t *pool);
/* A new arena of main (pool.c), or NULL. */
cp_pool_t *cp_arena_new(cp_pool_t *main);
/* The calling thread's arena of main. Inline: every allocation and free
 * asks, and most pools never make an arena. */
cp_pool_t *cp_arena_home_of_thread(cp_pool_t *main);
static inline cp_pool_t *cp_arena_home(cp_pool_t *main) {
  return atomic_load_explicit(&main->has_arenas, memory_order_relaxed) ? cp_arena_home_of_thread(main) : main;
}
/* Lock the thread's arena `pool` of main, or, when it keeps finding that
 * lock taken, another (the thread moves): returns the arena locked. */
cp_pool_t *cp_arena_lock(cp_pool_t *main, cp_pool_t *pool);

static inline cp_subpool_t *cp_subpool_of(cp_pool_t *pool, bool small) {
  return small ? &pool->small : &pool->large;
}

#endif
