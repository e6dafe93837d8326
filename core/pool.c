/* pool.c: the pool's life cycle and its two hot paths, cp_alloc and cp_free.
 *
 * cp_alloc serves a request, in this order: the best-fitting ready block or
 * pending block of the caller's own (stream, key); a barrier if pending
 * blocks exist, then the same search; completed fences; a new segment; on
 * failure, wait for fences, release whole free segments, retry; release the
 * segments that hold no live block (their pending blocks with them: the
 * backend's free waits for the device), retry; then ENOMEM.
 * cp_free moves an ACTIVE block to PENDING (or READY when nothing can touch
 * it) and never calls the backend.
 *
 * Locking and ownership: see pool_internal.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#include "pool_internal.h"
#include "util.h"

#define MiB ((size_t)1 << 20)

void cp_config_default(cp_config_t *cfg) {
  *cfg = (cp_config_t){
      .round = 512,
      .small_max = 1 * MiB,
      .small_segment = 2 * MiB,
      .large_segment = 20 * MiB,
      .large_threshold = 10 * MiB,
      .segment_round = 2 * MiB,
      .large_split_remainder = 1 * MiB,
      .max_split = SIZE_MAX,
      .oversize_waste = 20 * MiB,
      .split_barrier_pending = 4,
      .split_barrier_share = 2,
      .split_barrier_bytes = 1,
      .limit = CP_NO_LIMIT,
      .max_cached = CP_NO_LIMIT,
      .reuse = CP_REUSE_DEFERRED,
      .expandable = false,
      .expandable_size = 0,
      .arenas = 1,
      .arena_move_after = 8,
  };
}

unsigned cp_barrier_cost(unsigned nonblocking) {
  return 1u + (unsigned)(31 - __builtin_clz(nonblocking + 1u));
}

static bool is_pow2(size_t x) { return x && !(x & (x - 1)); }

static bool config_valid(const cp_config_t *c) {
  return is_pow2(c->round) && is_pow2(c->segment_round) && c->small_max % c->round == 0 &&
         c->small_segment >= c->small_max && c->large_threshold <= c->large_segment &&
         c->large_segment % c->round == 0 && c->small_segment % c->round == 0 &&
         c->segment_round >= c->round && c->arenas <= CP_ARENAS_MAX; /* 0 means 1 */
}

size_t cp_round_size(const cp_config_t *cfg, size_t size) {
  if (size > SIZE_MAX - (cfg->round - 1)) return 0;
  return (size + cfg->round - 1) & ~(cfg->round - 1);
}

size_t cp_driver_alloc_size(const cp_config_t *cfg, size_t size) {
  size_t r = cp_round_size(cfg, size);
  if (r == 0) return 0;
  if (r <= cfg->small_max) return cfg->small_segment;
  if (r < cfg->large_threshold) return cfg->large_segment;
  if (r > SIZE_MAX - (cfg->segment_round - 1)) return 0;
  return (r + cfg->segment_round - 1) & ~(cfg->segment_round - 1);
}

/* One pool (the main pool when main is NULL, else an arena of it). */
static cp_pool_t *pool_new(int device, const cp_config_t *cfg, const cp_backend_t *backend, cp_pool_t *main) {
  cp_pool_t *pool = cp_zalloc_aligned(sizeof *pool, _Alignof(cp_pool_t));
  if (!pool) return NULL;
  pool->main = main ? main : pool;
  if (main)
    pool->shared = main->shared;
  else if (cp_shared_init(pool) != 0) {
    free(pool);
    return NULL;
  }
  /* Threads that find the lock taken spin a little before sleeping: its
   * holders keep it for pointer work, and a futex sleep and wake per
   * handoff cost more than that work (glibc's adaptive mutex). */
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
  pthread_mutex_init(&pool->lock, &attr);
  pthread_mutexattr_destroy(&attr);
  pthread_cond_init(&pool->barrier_done, NULL);
  pool->device = device;
  pool->cfg = *cfg;
  pool->be = *backend;
  /* Expandable segments need the whole page interface; without it (or a
   * page the rounding does not divide) the pool uses ordinary segments. */
  size_t page = cfg->expandable && backend->page_size && backend->reserve && backend->unreserve &&
                        backend->map && backend->unmap
                    ? backend->page_size(backend->ctx, device)
                    : 0;
  if (page && is_pow2(page) && page >= cfg->round) {
    pool->page = page;
    size_t va = cfg->expandable_size ? cfg->expandable_size : (size_t)64 << 30;
    pool->cfg.expandable_size = va > SIZE_MAX - page ? va : (va + page - 1) & ~(page - 1);
  } else {
    pool->cfg.expandable = false;
  }
  cp_bins_init(&pool->small.ready, cfg->round);
  cp_bins_init(&pool->large.ready, cfg->round);
  cp_segments_init(pool);
  pool->stats.device = device;
  cp_fronts_update_on(pool);
  /* uthash frees its table when the last entry goes and allocates it again
   * on the next add: with one live block (a cudaMalloc/cudaFree loop) that
   * is a malloc and a free per pair. A permanent entry at address 0, which
   * no allocation can have, keeps the table. */
  int hash_oom = 0;
#undef uthash_nonfatal_oom
#define uthash_nonfatal_oom(e) (hash_oom = 1)
  HASH_ADD_PTR(pool->active, addr, &pool->anchor);
  if (hash_oom) {
    pthread_cond_destroy(&pool->barrier_done);
    pthread_mutex_destroy(&pool->lock);
    if (!main) cp_shared_fini(pool);
    free(pool);
    return NULL;
  }
  return pool;
}

int cp_pool_create(cp_pool_t **out, int device, const cp_config_t *cfg, const cp_backend_t *backend) {
  if (!out || !cfg || !backend || !backend->alloc || !backend->free || !config_valid(cfg)) return EINVAL;
  cp_pool_t *pool = pool_new(device, cfg, backend, NULL);
  if (!pool) return ENOMEM;
  *out = pool;
  return 0;
}

cp_pool_t *cp_arena_new(cp_pool_t *main) { return pool_new(main->device, &main->cfg, &main->be, main); }

static void free_keyed(cp_subpool_t *sp) { CP_HASH_FREE_ALL(sp->keyed, cp_keyed_t); }

static void teardown_one(cp_pool_t *pool, bool give_back) {
  cp_fronts_orphan(pool);
  /* Pages are unmapped only once the device is done with them. */
  if (give_back && pool->page) cp_complete_all(pool, true);
  cp_drop_fences(pool, give_back);
  HASH_CLEAR(hh, pool->active);
  while (pool->oldest) {
    cp_segment_t *seg = pool->oldest;
    pool->oldest = seg->newer;
    cp_owned_remove(seg->base, seg->size);
    cp_block_t *b = seg->first;
    while (b) {
      cp_block_t *next = b->next;
      free(b->recorded);
      free(b);
      b = next;
    }
    if (give_back && seg->expandable)
      cp_segment_unreserve(pool, seg);
    else if (give_back)
      pool->be.free(pool->be.ctx, pool->device, seg->base, seg->size);
    free(seg->mapped);
    free(seg);
  }
  CP_LIST_FREE_ALL(pool->spare);
  free_keyed(&pool->small);
  free_keyed(&pool->large);
  free(pool->fences);
  pthread_cond_destroy(&pool->barrier_done);
  pthread_mutex_destroy(&pool->lock);
  if (pool->main == pool) cp_shared_fini(pool);
  free(pool);
}

/* The arenas first: the main pool holds what they share. */
static void teardown(cp_pool_t *pool, bool give_back) {
  if (!pool) return;
  for (unsigned i = cp_arena_count(pool); i-- > 1;) teardown_one(cp_arena_at(pool, i), give_back);
  teardown_one(pool, give_back);
}

void cp_pool_destroy(cp_pool_t *pool) { teardown(pool, true); }
void cp_pool_drop(cp_pool_t *pool) { teardown(pool, false); }

static void gone_free(void *ctx, int device, uintptr_t addr, size_t size) {
  (void)ctx, (void)device, (void)addr, (void)size;
}

void cp_pool_retire(cp_pool_t *pool) {
  /* A thread's exit still folds its cache into the pool (other threads may
   * be inside it: its caches stay), and the trim that may follow must not
   * cudaFree an address the new context may have handed out. */
  cp_shared_t *sh = pool->shared;
  pthread_mutex_lock(&sh->arenas_lock);
  sh->retired = true;
  for (unsigned i = 0; i < cp_arena_count(pool); i++) {
    cp_pool_t *a = cp_arena_at(pool, i);
    pthread_mutex_lock(&a->lock);
    a->be.free = gone_free;
    a->be.unmap = gone_free;
    a->be.unreserve = gone_free;
    pthread_mutex_unlock(&a->lock);
  }
  pthread_mutex_unlock(&sh->arenas_lock);
}

cp_block_t *cp_block_new(cp_pool_t *pool) {
  cp_block_t *b = pool->spare;
  if (b) {
    pool->spare = b->next;
    memset(b, 0, sizeof *b);
    return b;
  }
  return calloc(1, sizeof *b);
}

void cp_block_recycle(cp_pool_t *pool, cp_block_t *block) {
  free(block->recorded);
  block->recorded = NULL;
  block->next = pool->spare;
  pool->spare = block;
}

/* The live block at addr, never the map's anchor. */
static cp_block_t *find_active(cp_pool_t *pool, uintptr_t addr) {
  cp_block_t *b;
  HASH_FIND_PTR(pool->active, &addr, b);
  return b == &pool->anchor ? NULL : b;
}

/* Blocks at or over max_split are never split: a smaller request may not use
 * one, a larger one only if it wastes less than oversize_waste. Since `b` is
 * the best fit, a refusal holds for every larger block too. */
static cp_block_t *fit_allowed(const cp_config_t *cfg, cp_block_t *b, size_t rsize) {
  if (!b) return NULL;
  if (rsize < cfg->max_split && b->size >= cfg->max_split) return NULL;
  if (rsize >= cfg->max_split && b->size - rsize >= cfg->oversize_waste) return NULL;
  return b;
}

static bool better_fit(const cp_block_t *a, const cp_block_t *b) {
  return !b || a->size < b->size || (a->size == b->size && a->addr < b->addr);
}

/* The best cached block the request may use now: the best ready block, or
 * the best pending block of its own (stream, key). Left in its index. */
static cp_block_t *pick_cached(cp_pool_t *pool, cp_subpool_t *sp, size_t rsize, uint64_t stream, uint64_t key,
                               bool *immediate) {
  cp_block_t *best = fit_allowed(&pool->cfg, cp_bins_best_fit(&sp->ready, rsize), rsize);
  cp_block_t *own = key ? fit_allowed(&pool->cfg, cp_keyed_best_fit(sp, stream, key, rsize), rsize) : NULL;
  *immediate = own && better_fit(own, best);
  return *immediate ? own : best;
}

/* A picked READY block leaves the bins; a PENDING one stays in the FIFO
 * until carve() splits it. */
static cp_block_t *take_cached(cp_pool_t *pool, cp_subpool_t *sp, size_t rsize, uint64_t stream, uint64_t key,
                               bool *immediate) {
  cp_block_t *b = pick_cached(pool, sp, rsize, stream, key, immediate);
  if (b && !*immediate) cp_bins_remove(&sp->ready, b);
  return b;
}

static bool should_split(const cp_config_t *cfg, const cp_block_t *b, size_t rsize) {
  size_t rest = b->size - rsize;
  if (b->segment->small) return rest >= cfg->round;
  return rest > cfg->large_split_remainder && b->size < cfg->max_split;
}

bool cp_serves_whole(const cp_config_t *cfg, const cp_block_t *b, size_t rsize) {
  return b->size >= rsize && b->segment->small == (rsize <= cfg->small_max) &&
         fit_allowed(cfg, (cp_block_t *)b, rsize) && !should_split(cfg, b, rsize);
}

/* Cut `b` down to rsize; the rest keeps b's state (READY or PENDING). A
 * PENDING b is still in the FIFO and its keyed tree here, so the remainder
 * can take its place in the free order. Without memory for the remainder's
 * struct the block is simply handed out whole. */
static void carve(cp_pool_t *pool, cp_subpool_t *sp, cp_block_t *b, size_t rsize) {
  cp_block_t *rest = should_split(&pool->cfg, b, rsize) ? cp_block_new(pool) : NULL;
  if (rest)
    *rest = (cp_block_t){.addr = b->addr + rsize,
                         .size = b->size - rsize,
                         .segment = b->segment,
                         .state = b->state,
                         .stream = b->stream,
                         .free_seq = b->free_seq,
                         .done_seq = b->done_seq,
                         .prev = b,
                         .next = b->next};
  if (b->state == CP_BLOCK_PENDING) cp_pending_split(pool, b, rest);
  if (!rest) return;
  if (b->next) b->next->prev = rest;
  b->next = rest;
  b->size = rsize;
  pool->block_count++;
  pool->free_block_count++;
  if (rest->state == CP_BLOCK_READY) cp_bins_insert(&sp->ready, rest);
}

static int activate(cp_pool_t *pool, cp_block_t *b, size_t size, uint64_t stream) {
  int hash_oom = 0;
#undef uthash_nonfatal_oom
#define uthash_nonfatal_oom(e) (hash_oom = 1)
  b->state = CP_BLOCK_ACTIVE;
  b->stream = stream;
  b->requested = size;
  b->n_recorded = 0;
  HASH_ADD_PTR(pool->active, addr, b);
  if (hash_oom) return ENOMEM;
  b->free_seq = b->done_seq = 0; /* its frees are history: a new life */
  pool->free_block_count--;
  cp_allocated_add(pool, (int64_t)b->size);
  cp_stat_add(&pool->stats.allocated_blocks, 1);
  cp_stat_add(&pool->stats.requested_bytes, (int64_t)size);
  pool->stats.num_alloc++;
  return 0;
}

/* b's first rsize bytes get their pages when its segment is expandable;
 * mapping any counts as a miss. False (and *rc): b goes back to the bins
 * (a pending block of the caller's own never left its index). */
static bool claim_pages(cp_pool_t *pool, cp_subpool_t *sp, cp_block_t *b, size_t rsize, bool immediate,
                        bool *fresh, int *rc) {
  bool mapped = false;
  if (!b->segment->expandable || (*rc = cp_pages_claim(pool, b, rsize, &mapped)) == 0) {
    *fresh |= mapped;
    return true;
  }
  if (!immediate) cp_bins_insert(&sp->ready, b);
  return false;
}

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
static bool over_limit(cp_pool_t *pool, size_t rsize) {
  size_t limit = pool->cfg.limit;
  if (limit == CP_NO_LIMIT) return false;
  if (rsize > limit) return true;
  unsigned n = cp_arena_count(pool);
  /* The published copy: cp_over_limit is asked without the lock too. */
  int64_t allocated = atomic_load_explicit(&pool->allocated_now, memory_order_relaxed);
  if (n > 1) {
    int64_t most = atomic_load_explicit(&pool->shared->allocated_approx, memory_order_relaxed) +
                   (int64_t)n * CP_ALLOCATED_SLACK;
    if (most < 0 || (size_t)most <= limit - rsize) return false;
    allocated = allocated_everywhere(pool, n);
  }
  return (size_t)(allocated > 0 ? allocated : 0) > limit - rsize;
}

bool cp_over_limit(cp_pool_t *pool, size_t size) {
  size_t rsize = cp_round_size(&pool->cfg, size);
  return rsize == 0 || over_limit(pool, rsize);
}

/* Every way of finding cached memory, cheapest first. A barrier is issued
 * when pending blocks the request may not use yet exist and nothing usable
 * fits, or when what fits would have to be split and a few such pending
 * blocks (split_barrier_pending) have gathered: the barrier's coalescing may
 * then offer a better fit. On the PyTorch traces this keeps exactly the
 * memory of a best-fit allocator whose frees are reusable at once, with
 * about 50 barriers a training step (one event record each without
 * non-blocking streams); asking at every split would double that, waiting
 * for 8 already costs memory. A barrier that must reach many streams costs
 * more, and is asked for proportionally less often. In the small pool it
 * is not asked for either while the pending bytes are a small share of the
 * block to be split (split_barrier_share): splitting memory already
 * reserved costs none, and a few small blocks cannot coalesce into much; a
 * thread cycling 512-byte blocks with a stream live paid a barrier every 8
 * pairs for nothing (the three PyTorch traces replay to the same bytes with
 * and without it). Not in the large pool: there, splitting a big block
 * while smaller exact fits wait can leave a later big request nowhere to
 * go but a new segment, and a wrong guess costs far more than 2 MiB. In
 * an expandable segment a fit whose pages are not all mapped is a new
 * segment in all but name: a barrier is asked for as when nothing fits.
 * Fences are polled only when nothing fits. */
/* With arenas, a split that a barrier could spare does not wait for one
 * another arena has in flight: the barrier covers this arena's frees too,
 * and its next allocation finds them ready. Waiting made every arena's
 * thread queue behind each barrier of the device (16 threads on the H200:
 * docs/BENCHMARKS.md). */
static bool other_barrier_in_flight(cp_pool_t *pool) {
  return cp_arena_count(pool) > 1 &&
         atomic_load_explicit(&pool->shared->barrier_in_flight, memory_order_relaxed);
}

/* Whether the best usable fit b, which would have to be split, should wait
 * for a barrier first (`waiting`: pending blocks the caller may not use).
 * By count: split_barrier_pending times the barrier's cost, and in the
 * small pool enough bytes (split_barrier_share). By bytes, in the large
 * pool, for a caller without a key (split_barrier_bytes): when the pending
 * bytes are at least that many times the request. Without a key every
 * free waits for a barrier, the caller's own included, so those pending
 * bytes are what an allocator that reuses frees at once would have offered
 * it: PyTorch with its streams (32 non-blocking: cost 6, so 24 blocks)
 * seldom has 24 large blocks pending, but often hundreds of MiB in a few,
 * and splitting big ready blocks meanwhile stranded memory that later
 * requests (cuDNN workspaces of 300 MiB) could not use even after their
 * barrier: resnet50_live replayed to 7,340 MiB, with this rule to 6,834,
 * as with immediate reuse (docs/REPLAY.md). With a key the caller's own
 * frees are reusable at once already, and the rule is off: the three
 * keyed traces replay to the same bytes either way, and convnext_live with
 * expandable segments reserved 2 MiB more with it. */
static bool split_wants_barrier(cp_pool_t *pool, cp_subpool_t *sp, const cp_block_t *b, size_t rsize,
                                uint64_t key, size_t waiting) {
  if (!should_split(&pool->cfg, b, rsize) || other_barrier_in_flight(pool)) return false;
  size_t many = pool->cfg.split_barrier_bytes;
  if (sp == &pool->large && !key && many && sp->pending_bytes / many >= rsize) return true;
  unsigned cost = pool->be.barrier_cost ? pool->be.barrier_cost(pool->be.ctx, pool->device) : 1;
  size_t share = sp == &pool->small ? pool->cfg.split_barrier_share : 0;
  return waiting >= pool->cfg.split_barrier_pending * cost && (!share || sp->pending_bytes >= b->size / share);
}

static cp_block_t *find_cached(cp_pool_t *pool, cp_subpool_t *sp, size_t rsize, uint64_t stream, uint64_t key,
                               bool *immediate) {
  cp_block_t *b = pick_cached(pool, sp, rsize, stream, key, immediate);
  size_t waiting = cp_pending_not_usable(sp, stream, key);
  bool worth_a_barrier = waiting > 0;
  /* Mapping new pages is growing: pending blocks may serve instead. */
  if (b && worth_a_barrier && !cp_pages_mapped(pool, b, rsize)) {
  } else if (b && worth_a_barrier) {
    worth_a_barrier = split_wants_barrier(pool, sp, b, rsize, key, waiting);
  }
  if (worth_a_barrier) {
    cp_barrier_t got;
    do {
      got = cp_try_barrier(pool);
      if (got == CP_BARRIER_NONE && !b) cp_poll_fences(pool);
      /* The barrier ran without the lock: what fits now is looked up again. */
      b = pick_cached(pool, sp, rsize, stream, key, immediate);
      /* Another thread's barrier made this thread's frees ready, but a third
       * thread may have taken them before this one had the lock back: ask
       * again rather than grow (a barrier of its own ends it). */
    } while (!b && got == CP_BARRIER_SHARED && cp_pending_not_usable(sp, stream, key) > 0);
  }
  /* A barrier runs without the lock: other threads may have allocated up
   * to the limit meanwhile, and the check on entry no longer holds. */
  if (b && over_limit(pool, rsize)) return NULL;
  if (b && !*immediate) cp_bins_remove(&sp->ready, b);
  return b;
}

/* A block for the request from the cache (cached) or else from a new
 * segment, the pages of its first rsize bytes mapped when its segment is
 * expandable. NULL and *rc when neither gives one; a cached block whose
 * pages cannot be mapped goes back where it was. */
static cp_block_t *obtain(cp_pool_t *pool, cp_subpool_t *sp, bool small, size_t rsize, uint64_t stream,
                          uint64_t key, bool cached, bool *immediate, bool *fresh, int *rc) {
  cp_block_t *b = cached ? take_cached(pool, sp, rsize, stream, key, immediate) : NULL;
  *fresh = !b;
  if (!b) {
    *immediate = false;
    if ((*rc = cp_segment_grow(pool, small, rsize, &b)) != 0) return NULL;
  }
  return claim_pages(pool, sp, b, rsize, *immediate, fresh, rc) ? b : NULL;
}

/* An allocation that cannot be served: counted and reported (unless the
 * caller will try other arenas first: it calls cp_refused if they fail). */
void cp_refused(cp_pool_t *pool, size_t size, uint64_t stream) {
  pool->stats.num_ooms++;
  if (pool->observer) pool->observer(pool->observer_ctx, CP_OBSERVED_ALLOC_FAILED, 0, size, stream);
}

static __thread bool refusal_deferred, refusal_pending;

void cp_defer_refusal(bool on) {
  refusal_deferred = on;
  refusal_pending = false;
}

bool cp_refusal_pending(void) { return refusal_pending; }

static int refuse(cp_pool_t *pool, size_t size, uint64_t stream, int rc) {
  if (refusal_deferred)
    refusal_pending = true;
  else
    cp_refused(pool, size, stream);
  return rc;
}

int cp_alloc_locked(cp_pool_t *pool, size_t size, uint64_t stream, uint64_t key, cp_block_t **out) {
  cp_arena_catch_up(pool);
  size_t rsize = cp_round_size(&pool->cfg, size);
  bool small = rsize && rsize <= pool->cfg.small_max;
  /* A limit lowered at run time may leave more reserved than it allows:
   * memory already cached is not handed out past it either. Blocks the
   * thread caches hold count as allocated until they are folded back. */
  if (rsize && over_limit(pool, rsize)) cp_fronts_flush_all(pool);
  if (rsize == 0 || over_limit(pool, rsize)) return refuse(pool, size, stream, ENOMEM);
  cp_subpool_t *sp = cp_subpool_of(pool, small);
  bool immediate = false, fresh = false;
  int grow_rc = 0;
  cp_block_t *b = find_cached(pool, sp, rsize, stream, key, &immediate);
  /* Before reserving more, the blocks every thread cache holds go back. */
  if (!b && cp_fronts_flush_all(pool)) b = find_cached(pool, sp, rsize, stream, key, &immediate);
  if (b && !claim_pages(pool, sp, b, rsize, immediate, &fresh, &grow_rc)) b = NULL;
  /* A cached block whose pages could not be mapped: a new segment would
   * not map them either. */
  else if (!b)
    b = obtain(pool, sp, small, rsize, stream, key, false, &immediate, &fresh, &grow_rc);
  if (!b) {
    pool->stats.num_alloc_retries++;
    /* Pages are given back only once the device has finished with them. */
    bool waited = pool->page ? cp_complete_all(pool, true) : cp_wait_fences(pool);
    b = obtain(pool, sp, small, rsize, stream, key, waited, &immediate, &fresh, &grow_rc);
    if (!b && cp_release_free_segments(pool, 0) > 0)
      b = obtain(pool, sp, small, rsize, stream, key, pool->page != 0, &immediate, &fresh, &grow_rc);
    if (!b && cp_release_idle_segments(pool) > 0)
      b = obtain(pool, sp, small, rsize, stream, key, pool->page != 0, &immediate, &fresh, &grow_rc);
  }
  if (!b) return refuse(pool, size, stream, grow_rc && grow_rc != ENOMEM ? grow_rc : ENOMEM);
  carve(pool, sp, b, rsize);
  int rc = activate(pool, b, size, stream);
  if (rc) {
    cp_make_ready(pool, b);
    cp_stats_refresh_derived(pool);
    return rc;
  }
  if (fresh) {
    pool->stats.misses++;
  } else {
    pool->stats.hits++;
    if (immediate) pool->stats.num_immediate_reuse++;
  }
  cp_stats_refresh_derived(pool);
  *out = b;
  if (pool->observer) pool->observer(pool->observer_ctx, CP_OBSERVED_ALLOC, b->addr, size, stream);
  return 0;
}

int cp_alloc(cp_pool_t *pool, size_t size, uint64_t stream, uint64_t key, uintptr_t *out) {
  if (size == 0) return EINVAL;
  pthread_mutex_lock(&pool->lock);
  cp_block_t *b = NULL;
  int rc = cp_alloc_locked(pool, size, stream, key, &b);
  if (rc == 0) *out = b->addr;
  pthread_mutex_unlock(&pool->lock);
  return rc;
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

/* `b` leaves the program: ACTIVE to PENDING (or READY when nothing can
 * touch it). Stats are those of a free unless `counted` (a thread cache
 * already counted it when the program freed it). */
void cp_release_active(cp_pool_t *pool, cp_block_t *b, uint64_t key, unsigned flags, bool counted) {
  HASH_DEL(pool->active, b);
  pool->free_block_count++;
  if (counted) {
    /* The thread cache's folded figures already call it pending. */
    pool->stats.pending_bytes.current -= (int64_t)b->size;
  } else {
    cp_allocated_add(pool, -(int64_t)b->size);
    cp_stat_add(&pool->stats.allocated_blocks, -1);
    cp_stat_add(&pool->stats.requested_bytes, -(int64_t)b->requested);
    pool->stats.num_free++;
  }
  if (pool->cfg.reuse == CP_REUSE_IMMEDIATE || (flags & CP_FREE_DEVICE_IDLE)) {
    if (counted) pool->stats.pending_bytes.current += (int64_t)b->size;
    /* Reusable at once, but its pages wait for the device like any free's
     * (unless the caller synchronised). */
    if (!(flags & CP_FREE_DEVICE_IDLE)) b->free_seq = cp_seq_next(pool);
    cp_make_ready(pool, b);
    if (counted) pool->stats.pending_bytes.current -= (int64_t)b->size;
  } else {
    /* A block used on other streams too is ordered by nobody's own stream. */
    cp_pending_add(pool, b, b->n_recorded ? 0 : key);
  }
}

/* restream: the stream the block is freed on becomes its stream (NULL: it
 * keeps the one it was allocated for). */
int cp_free_locked(cp_pool_t *pool, uintptr_t addr, const uint64_t *restream, uint64_t key, unsigned flags) {
  cp_block_t *b = find_active(pool, addr);
  if (b && b->lent && !cp_front_take_back(pool, b)) b = NULL; /* free in a thread cache: a second free */
  if (!b) return cp_segment_containing(pool, addr) ? EINVAL : ENOENT;
  if (restream) b->stream = *restream;
  if (pool->observer) pool->observer(pool->observer_ctx, CP_OBSERVED_FREE, addr, b->size, b->stream);
  cp_release_active(pool, b, key, flags, false);
  return 0;
}

int cp_free_and_unlock(cp_pool_t *pool, uintptr_t addr, const uint64_t *restream, uint64_t key,
                       unsigned flags) {
  int rc = cp_free_locked(pool, addr, restream, key, flags);
  if (rc == 0)
    cp_settle_and_unlock(pool);
  else
    pthread_mutex_unlock(&pool->lock);
  return rc;
}

/* A block belongs to the arena one of whose segments holds it: the others
 * answer ENOENT and leave everything as it was. */
#define EACH_ARENA_UNTIL_FOUND(main, rc, call)                      \
  for (unsigned i_ = 0, n_ = cp_arena_count(main); i_ < n_; i_++) { \
    cp_pool_t *pool = cp_arena_at(main, i_);                        \
    rc = (call);                                                    \
    if (rc != ENOENT) break;                                        \
  }

int cp_free(cp_pool_t *main, uintptr_t addr, uint64_t key, unsigned flags) {
  int rc = ENOENT;
  EACH_ARENA_UNTIL_FOUND(main, rc,
                         (pthread_mutex_lock(&pool->lock), cp_free_and_unlock(pool, addr, NULL, key, flags)))
  return rc;
}

int cp_free_on_stream(cp_pool_t *main, uintptr_t addr, uint64_t stream, uint64_t key, unsigned flags) {
  int rc = ENOENT;
  EACH_ARENA_UNTIL_FOUND(
      main, rc, (pthread_mutex_lock(&pool->lock), cp_free_and_unlock(pool, addr, &stream, key, flags)))
  return rc;
}

/* The live block at addr: ACTIVE and not free in a thread cache. */
static cp_block_t *find_live(cp_pool_t *pool, uintptr_t addr) {
  cp_block_t *b = find_active(pool, addr);
  return b && b->lent && cp_front_holds_freed(b) ? NULL : b;
}

static size_t block_size_one(cp_pool_t *pool, uintptr_t addr) {
  pthread_mutex_lock(&pool->lock);
  cp_block_t *b = find_live(pool, addr);
  size_t size = b ? b->size : 0;
  pthread_mutex_unlock(&pool->lock);
  return size;
}

size_t cp_block_size(cp_pool_t *main, uintptr_t addr) {
  if (!cp_owned_maybe(addr)) return 0;
  size_t size = 0;
  for (unsigned i = 0, n = cp_arena_count(main); i < n && !size; i++)
    size = block_size_one(cp_arena_at(main, i), addr);
  return size;
}

static int block_find_one(cp_pool_t *pool, uintptr_t addr, cp_block_info_t *out) {
  pthread_mutex_lock(&pool->lock);
  cp_segment_t *seg = cp_segment_containing(pool, addr);
  cp_block_t *b = seg ? seg->first : NULL;
  while (b && addr - b->addr >= b->size) b = b->next;
  int rc = seg ? EINVAL : ENOENT;
  /* A thread cache gives a live block back first: its `requested` is then the pool's to read. */
  if (b && b->state == CP_BLOCK_ACTIVE && b->lent && !cp_front_take_back(pool, b)) b = NULL;
  if (b && b->state == CP_BLOCK_ACTIVE && addr - b->addr < b->requested) {
    *out = (cp_block_info_t){.start = b->addr,
                             .size = b->requested,
                             .segment_start = !seg->expandable && b->addr == seg->base,
                             .expandable = seg->expandable};
    rc = 0;
  }
  pthread_mutex_unlock(&pool->lock);
  return rc;
}

int cp_block_find(cp_pool_t *main, uintptr_t addr, cp_block_info_t *out) {
  if (!cp_owned_maybe(addr)) return ENOENT;
  int rc = ENOENT;
  EACH_ARENA_UNTIL_FOUND(main, rc, block_find_one(pool, addr, out))
  return rc;
}

static int record_stream_one(cp_pool_t *pool, uintptr_t addr, uint64_t stream) {
  pthread_mutex_lock(&pool->lock);
  cp_block_t *b = find_active(pool, addr);
  /* Used on another stream: never reused by key, so no thread cache keeps it. */
  if (b && b->lent && !cp_front_take_back(pool, b)) b = NULL;
  int rc = b ? 0 : ENOENT;
  if (b && stream != b->stream) {
    bool known = false;
    for (uint32_t i = 0; i < b->n_recorded; i++) known |= b->recorded[i] == stream;
    if (!known && b->n_recorded == b->cap_recorded) {
      uint32_t cap = b->cap_recorded ? b->cap_recorded * 2 : 4;
      uint64_t *grown = realloc(b->recorded, cap * sizeof *grown);
      if (grown) {
        b->recorded = grown;
        b->cap_recorded = cap;
      } else {
        rc = ENOMEM;
      }
    }
    if (!known && rc == 0) b->recorded[b->n_recorded++] = stream;
  }
  pthread_mutex_unlock(&pool->lock);
  return rc;
}

int cp_record_stream(cp_pool_t *main, uintptr_t addr, uint64_t stream) {
  if (!cp_owned_maybe(addr)) return ENOENT;
  int rc = ENOENT;
  EACH_ARENA_UNTIL_FOUND(main, rc, record_stream_one(pool, addr, stream))
  return rc;
}

void cp_sync_mark(cp_pool_t *main, cp_mark_t *out) {
  /* What thread caches hold was freed before the mark: the sync covers it. */
  out->n = cp_arena_count(main);
  for (unsigned i = 0; i < out->n; i++) {
    cp_pool_t *pool = cp_arena_at(main, i);
    pthread_mutex_lock(&pool->lock);
    cp_fronts_flush_all(pool);
    out->seq[i] = pool->free_seq;
    pthread_mutex_unlock(&pool->lock);
  }
}

/* Counted once, by the main pool. */
static void count_sync(cp_pool_t *pool) {
  if (pool->main == pool) pool->stats.num_sync_points++;
}

static void sync_device_one(cp_pool_t *pool, uint64_t mark) {
  pthread_mutex_lock(&pool->lock);
  count_sync(pool);
  cp_complete_upto(pool, mark);
  cp_retire_fences_upto(pool, mark);
  if (mark > pool->completed_seq) pool->completed_seq = mark;
  cp_settle_and_unlock(pool);
}

/* Arenas made after the mark had no frees before it. */
void cp_sync_device(cp_pool_t *main, const cp_mark_t *mark) {
  for (unsigned i = 0; i < mark->n; i++) sync_device_one(cp_arena_at(main, i), mark->seq[i]);
}

static void sync_stream_one(cp_pool_t *pool, uint64_t mark, uint64_t stream) {
  pthread_mutex_lock(&pool->lock);
  count_sync(pool);
  cp_block_t *b = pool->fifo_head;
  while (b && b->free_seq <= mark) {
    cp_block_t *next = b->fifo_next;
    if (b->stream == stream && b->n_recorded == 0) {
      cp_pending_remove(pool, b);
      b->free_seq = 0; /* its own work is done: the stream was idle */
      cp_make_ready(pool, b);
    }
    b = next;
  }
  cp_settle_and_unlock(pool);
}

void cp_sync_stream(cp_pool_t *main, const cp_mark_t *mark, uint64_t stream) {
  for (unsigned i = 0; i < mark->n; i++) sync_stream_one(cp_arena_at(main, i), mark->seq[i], stream);
}

void cp_synced_stream(cp_pool_t *pool, const cp_mark_t *mark, uint64_t stream, bool legacy,
                      bool nonblocking_live) {
  if (!legacy)
    cp_sync_stream(pool, mark, stream);
  else if (!nonblocking_live)
    cp_sync_device(pool, mark);
}

/* The arenas' settings change together, with no arena made meanwhile. */
void cp_pool_set_observer(cp_pool_t *main, cp_observer_fn *fn, void *ctx) {
  pthread_mutex_lock(&main->shared->arenas_lock);
  for (unsigned i = 0, n = cp_arena_count(main); i < n; i++) {
    cp_pool_t *pool = cp_arena_at(main, i);
    pthread_mutex_lock(&pool->lock);
    cp_fronts_flush_all(pool);
    pool->observer = fn;
    pool->observer_ctx = ctx;
    cp_fronts_update_on(pool);
    pthread_mutex_unlock(&pool->lock);
  }
  pthread_mutex_unlock(&main->shared->arenas_lock);
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
  cp_fronts_flush_all(pool);
  size_t released = empty_cache_locked(pool);
  pthread_mutex_unlock(&pool->lock);
  return released;
}

size_t cp_empty_cache(cp_pool_t *main) {
  size_t released = 0;
  for (unsigned i = 0, n = cp_arena_count(main); i < n; i++)
    released += cp_empty_cache_one(cp_arena_at(main, i));
  return released;
}

static size_t cached_of(cp_pool_t *pool) {
  pthread_mutex_lock(&pool->lock);
  cp_fronts_flush_all(pool);
  size_t cached = (size_t)pool->stats.cached_bytes.current;
  pthread_mutex_unlock(&pool->lock);
  return cached;
}

/* Newest arena first (the main pool's cache is the one a program without
 * contention has), each down to what leaves the total at the target. */
size_t cp_trim(cp_pool_t *main, size_t target_cached) {
  size_t total = 0, released = 0;
  for (unsigned i = 0, n = cp_arena_count(main); i < n; i++) total += cached_of(cp_arena_at(main, i));
  for (unsigned i = cp_arena_count(main); i-- > 0;) {
    cp_pool_t *pool = cp_arena_at(main, i);
    if (total <= target_cached) break;
    pthread_mutex_lock(&pool->lock);
    cp_fronts_flush_all(pool);
    size_t mine = (size_t)pool->stats.cached_bytes.current, over = total - target_cached;
    size_t got = cp_release_free_segments(pool, mine > over ? mine - over : 0);
    pthread_mutex_unlock(&pool->lock);
    released += got;
    total -= got < total ? got : total;
  }
  return released;
}

void cp_set_limit(cp_pool_t *main, size_t limit) {
  pthread_mutex_lock(&main->shared->arenas_lock);
  for (unsigned i = 0, n = cp_arena_count(main); i < n; i++) {
    cp_pool_t *pool = cp_arena_at(main, i);
    pthread_mutex_lock(&pool->lock);
    cp_fronts_flush_all(pool);
    pool->cfg.limit = limit ? limit : CP_NO_LIMIT;
    pthread_mutex_unlock(&pool->lock);
  }
  if (limit && cp_budget_reserved(main) > limit) cp_empty_cache(main);
  pthread_mutex_unlock(&main->shared->arenas_lock);
}

void cp_get_config(cp_pool_t *pool, cp_config_t *out) {
  pthread_mutex_lock(&pool->lock);
  *out = pool->cfg;
  pthread_mutex_unlock(&pool->lock);
}
