/* pool.c: a device pool's life cycle: making it (and each of its arenas),
 * destroying, dropping or retiring it with every arena, the observer every
 * arena reports to, and the recycled block structs of an arena.
 *
 * Invariants: an arena is torn down only with its main pool, the arenas
 * first (the main pool holds what they share, cp_device_pool_t); the pointer map
 * never empties (its `anchor`); a retired pool never calls the backend to
 * give memory back.
 *
 * Locking: settings of all arenas (the observer, retirement) change under
 * the shared arenas_lock, then each arena's lock in turn; the teardown runs
 * when no other thread uses the pool. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define HASH_NONFATAL_OOM 1
#include "pool_internal.h"
#include "util.h"

/* One pool (the main pool when main is NULL, else an arena of it). */
static cp_pool_t *pool_new(int device, const cp_config_t *cfg, const cp_backend_t *backend, cp_pool_t *main) {
  cp_pool_t *pool = cp_zalloc_aligned(sizeof *pool, _Alignof(cp_pool_t));
  if (!pool) return NULL;
  pool->main = main ? main : pool;
  if (main)
    pool->devpool = main->devpool;
  else if (cp_device_pool_init(pool) != 0) {
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
  if (pool->cfg.max_split < cp_max_split_floor(cfg)) pool->cfg.max_split = cp_max_split_floor(cfg);
  pool->be = *backend;
  /* Expandable segments need the whole page interface; without it (or a
   * page the rounding does not divide) the pool uses ordinary segments. */
  size_t page = cfg->expandable && backend->page_size && backend->reserve && backend->unreserve &&
                        backend->map && backend->unmap
                    ? backend->page_size(backend->ctx, device)
                    : 0;
  if (page && cp_is_pow2(page) && page >= cfg->round) {
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
  cp_tcaches_update_on(pool);
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
    if (!main) cp_device_pool_fini(pool);
    free(pool);
    return NULL;
  }
  return pool;
}

int cp_pool_create(cp_pool_t **out, int device, const cp_config_t *cfg, const cp_backend_t *backend) {
  if (!out || !cfg || !backend || !backend->alloc || !backend->free || !cp_config_valid(cfg)) return EINVAL;
  cp_pool_t *pool = pool_new(device, cfg, backend, NULL);
  if (!pool) return ENOMEM;
  *out = pool;
  return 0;
}

cp_pool_t *cp_arena_new(cp_pool_t *main) { return pool_new(main->device, &main->cfg, &main->be, main); }

static void free_keyed(cp_subpool_t *sp) { CP_HASH_FREE_ALL(sp->keyed, cp_keyed_t); }

static void teardown_one(cp_pool_t *pool, bool give_back) {
  cp_tcaches_orphan(pool);
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
  if (pool->main == pool) cp_device_pool_fini(pool);
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
  cp_device_pool_t *sh = pool->devpool;
  pthread_mutex_lock(&sh->arenas_lock);
  sh->retired = true;
  cp_for_each_arena(a, pool) {
    pthread_mutex_lock(&a->lock);
    a->be.free = gone_free;
    a->be.unmap = gone_free;
    a->be.unreserve = gone_free;
    pthread_mutex_unlock(&a->lock);
  }
  pthread_mutex_unlock(&sh->arenas_lock);
}

/* The arenas' settings change together, with no arena made meanwhile. */
void cp_pool_set_observer(cp_pool_t *main, cp_observer_fn *fn, void *ctx) {
  pthread_mutex_lock(&main->devpool->arenas_lock);
  cp_for_each_arena(pool, main) {
    pthread_mutex_lock(&pool->lock);
    cp_tcaches_flush_all(pool);
    pool->observer = fn;
    pool->observer_ctx = ctx;
    cp_tcaches_update_on(pool);
    pthread_mutex_unlock(&pool->lock);
  }
  pthread_mutex_unlock(&main->devpool->arenas_lock);
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
