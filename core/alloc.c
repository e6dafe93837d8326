/* alloc.c: an allocation under an arena's lock (cp_alloc_locked, cp_alloc):
 * the request, which block serves it, carving it, handing it out.
 *
 * A request (cp_request_t) is served in this order: the best-fitting ready
 * block or pending block of the caller's own (stream, key); a barrier if
 * pending blocks exist, then the same search; completed fences; a new
 * segment; on failure, wait for fences, release whole free segments, retry;
 * release the segments that hold no live block (their pending blocks with
 * them: the backend's free waits for the device), retry; then ENOMEM. The
 * fit rules (fit_allowed, should_split, cp_serves_whole) are the thread
 * caches' too (tcache.c).
 *
 * Refusals: counted and reported to the observer here, unless the thread
 * asked to defer them (cp_defer_refusal: tcache.c first tries the other
 * arenas).
 *
 * Locking: the arena's lock is held throughout, except while a barrier is
 * issued (sync.c: cp_try_barrier releases it), after which the search and
 * the limit check are made again. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#include "pool_internal.h"
#include "util.h"

/* One allocation request, carried from cp_alloc_locked to the block that
 * serves it (PyTorch's AllocParams): what was asked, where it may be
 * served from, and what the search found so far. */
typedef struct cp_request {
  size_t size;          /* bytes asked for */
  size_t rsize;         /* rounded: the least a block may have */
  uint64_t stream, key; /* the pending blocks of this pair are the caller's at once */
  bool small;           /* the small pool's request */
  cp_subpool_t *sp;     /* the subpool it is served from */
  /* Found: */
  bool immediate; /* the block is a pending block of the request's own (stream, key) */
  bool fresh;     /* it took a new segment or new pages: a miss */
  int rc;         /* why nothing was found: ENOMEM or the backend's error */
} cp_request_t;

static cp_request_t request_of(cp_pool_t *pool, size_t size, uint64_t stream, uint64_t key) {
  size_t rsize = cp_round_size(&pool->cfg, size);
  bool small = rsize && rsize <= pool->cfg.small_max;
  return (cp_request_t){.size = size,
                        .rsize = rsize,
                        .stream = stream,
                        .key = key,
                        .small = small,
                        .sp = cp_subpool_of(pool, small)};
}

/* Blocks at or over max_split are never split: a smaller request may not use
 * one, a larger one only if it wastes less than oversize_waste. Since `b` is
 * the best fit, a refusal holds for every larger block too. Not in an
 * expandable segment: its free blocks are address space, whose pages are
 * mapped and given back one by one, and the rest of a new range is always
 * over max_split (each request reserved a range of its own). */
static cp_block_t *fit_allowed(const cp_config_t *cfg, cp_block_t *b, size_t rsize) {
  if (!b || b->segment->expandable) return b;
  if (rsize < cfg->max_split && b->size >= cfg->max_split) return NULL;
  if (rsize >= cfg->max_split && b->size - rsize >= cfg->oversize_waste) return NULL;
  return b;
}

static bool better_fit(const cp_block_t *a, const cp_block_t *b) {
  return !b || a->size < b->size || (a->size == b->size && a->addr < b->addr);
}

/* The best cached block the request may use now: the best ready block, or
 * the best pending block of its own (stream, key). Left in its index. */
static cp_block_t *pick_cached(cp_pool_t *pool, cp_request_t *req) {
  size_t rsize = req->rsize;
  cp_block_t *best = fit_allowed(&pool->cfg, cp_bins_best_fit(&req->sp->ready, rsize), rsize);
  cp_block_t *own =
      req->key ? fit_allowed(&pool->cfg, cp_keyed_best_fit(req->sp, req->stream, req->key, rsize), rsize) : NULL;
  req->immediate = own && better_fit(own, best);
  return req->immediate ? own : best;
}

/* A picked READY block leaves the bins; a PENDING one stays in the FIFO
 * until carve() splits it. */
static cp_block_t *take_cached(cp_pool_t *pool, cp_request_t *req) {
  cp_block_t *b = pick_cached(pool, req);
  if (b && !req->immediate) cp_bins_remove(&req->sp->ready, b);
  return b;
}

static bool should_split(const cp_config_t *cfg, const cp_block_t *b, size_t rsize) {
  size_t rest = b->size - rsize;
  if (b->segment->small) return rest >= cfg->round;
  return rest > cfg->large_split_remainder && (b->size < cfg->max_split || b->segment->expandable);
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

static int hand_out(cp_pool_t *pool, cp_block_t *b, size_t size, uint64_t stream) {
  int hash_oom = 0;
#undef uthash_nonfatal_oom
#define uthash_nonfatal_oom(e) (hash_oom = 1)
  b->state = CP_BLOCK_ACTIVE;
  b->stream = stream;
  b->requested = size;
  b->n_recorded = 0;
  HASH_ADD_PTR(pool->active, addr, b);
  if (hash_oom) return ENOMEM;
  /* Its frees are history, but not the device work they may still run: a
   * barrier handed it out, not the device's end of that work, so done_seq
   * stays for pages.c (a later free on an idle stream must not look done). */
  b->free_seq = 0;
  b->segment->free_since = 0; /* used: its idle time starts again (reclaim.c) */
  pool->free_block_count--;
  cp_allocated_add(pool, (int64_t)b->size);
  cp_stat_add(&pool->stats.allocated_blocks, 1);
  cp_stat_add(&pool->stats.requested_bytes, (int64_t)size);
  pool->stats.num_alloc++;
  return 0;
}

/* b's first rsize bytes get their pages when its segment is expandable;
 * mapping any counts as a miss. False (and req->rc): b goes back to the
 * bins (a pending block of the caller's own never left its index). */
static bool claim_pages(cp_pool_t *pool, cp_request_t *req, cp_block_t *b) {
  bool mapped = false;
  if (!b->segment->expandable || (req->rc = cp_pages_claim(pool, b, req->rsize, &mapped)) == 0) {
    req->fresh |= mapped;
    return true;
  }
  if (!req->immediate) cp_bins_insert(&req->sp->ready, b);
  return false;
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
         atomic_load_explicit(&pool->devpool->barrier_in_flight, memory_order_relaxed);
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

static cp_block_t *find_cached(cp_pool_t *pool, cp_request_t *req) {
  cp_subpool_t *sp = req->sp;
  size_t rsize = req->rsize;
  cp_block_t *b = pick_cached(pool, req);
  size_t waiting = cp_pending_not_usable(sp, req->stream, req->key);
  bool worth_a_barrier = waiting > 0;
  /* Mapping new pages is growing: pending blocks may serve instead. */
  if (b && worth_a_barrier && !cp_pages_mapped(pool, b, rsize)) {
  } else if (b && worth_a_barrier) {
    worth_a_barrier = split_wants_barrier(pool, sp, b, rsize, req->key, waiting);
  }
  if (worth_a_barrier) {
    cp_barrier_t got;
    do {
      got = cp_try_barrier(pool);
      if (got == CP_BARRIER_NONE && !b) cp_poll_fences(pool);
      /* The barrier ran without the lock: what fits now is looked up again. */
      b = pick_cached(pool, req);
      /* Another thread's barrier made this thread's frees ready, but a third
       * thread may have taken them before this one had the lock back: ask
       * again rather than grow (a barrier of its own ends it). */
    } while (!b && got == CP_BARRIER_SHARED && cp_pending_not_usable(sp, req->stream, req->key) > 0);
  }
  /* A barrier runs without the lock: other threads may have allocated up
   * to the limit meanwhile, and the check on entry no longer holds. */
  if (b && cp_over_limit_rounded(pool, rsize)) return NULL;
  if (b && !req->immediate) cp_bins_remove(&sp->ready, b);
  return b;
}

/* A block for the request from the cache (cached) or else from a new
 * segment, the pages of its first rsize bytes mapped when its segment is
 * expandable. NULL and req->rc when neither gives one; a cached block
 * whose pages cannot be mapped goes back where it was. */
static cp_block_t *obtain(cp_pool_t *pool, cp_request_t *req, bool cached) {
  cp_block_t *b = cached ? take_cached(pool, req) : NULL;
  req->fresh = !b;
  if (!b) {
    req->immediate = false;
    if ((req->rc = cp_segment_grow(pool, req->small, req->rsize, &b)) != 0) return NULL;
  }
  return claim_pages(pool, req, b) ? b : NULL;
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

static int refuse(cp_pool_t *pool, const cp_request_t *req, int rc) {
  if (refusal_deferred)
    refusal_pending = true;
  else
    cp_refused(pool, req->size, req->stream);
  return rc;
}

int cp_alloc_locked(cp_pool_t *pool, size_t size, uint64_t stream, uint64_t key, cp_block_t **out) {
  cp_arena_catch_up(pool);
  cp_request_t req = request_of(pool, size, stream, key);
  size_t rsize = req.rsize;
  /* A limit lowered at run time may leave more reserved than it allows:
   * memory already cached is not handed out past it either. Blocks the
   * thread caches hold count as allocated until they are folded back. */
  if (rsize && cp_over_limit_rounded(pool, rsize)) cp_tcaches_flush_all(pool);
  if (rsize == 0 || cp_over_limit_rounded(pool, rsize)) return refuse(pool, &req, ENOMEM);
  cp_block_t *b = find_cached(pool, &req);
  /* Before reserving more, the blocks every thread cache holds go back. */
  if (!b && cp_tcaches_flush_all(pool)) b = find_cached(pool, &req);
  if (b && !claim_pages(pool, &req, b)) b = NULL;
  /* A cached block whose pages could not be mapped: a new segment would
   * not map them either. */
  else if (!b)
    b = obtain(pool, &req, false);
  if (!b) {
    pool->stats.num_alloc_retries++;
    /* Pages are given back only once the device has finished with them. */
    bool waited = pool->page ? cp_complete_all(pool, true) : cp_wait_fences(pool);
    b = obtain(pool, &req, waited);
    if (!b && cp_release_free_segments(pool, 0) > 0) b = obtain(pool, &req, pool->page != 0);
    if (!b && cp_release_idle_segments(pool) > 0) b = obtain(pool, &req, pool->page != 0);
  }
  if (!b) return refuse(pool, &req, req.rc && req.rc != ENOMEM ? req.rc : ENOMEM);
  carve(pool, req.sp, b, rsize);
  int rc = hand_out(pool, b, size, stream);
  if (rc) {
    cp_make_ready(pool, b);
    cp_stats_refresh_derived(pool);
    return rc;
  }
  if (req.fresh) {
    pool->stats.misses++;
  } else {
    pool->stats.hits++;
    if (req.immediate) pool->stats.num_immediate_reuse++;
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
