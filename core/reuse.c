/* reuse.c: when a freed block may be handed out again.
 *
 * Pending blocks sit in a FIFO in free order (free_seq grows by one per
 * free of this arena), so completing "everything freed up to seq" is a walk from the head.
 * Barriers complete every pending block at once. Fences are batched: one is
 * recorded only when pending blocks exist that no fence covers yet, and it
 * covers all of them; fences complete in the order they were recorded, since
 * each one covers all streams and is recorded after the previous one.
 * A pending block freed with a key also sits in the tree of its
 * (stream, key), where an allocation with the same pair may take it at once.
 *
 * Called with the pool lock held. */
#include <errno.h>
#include <stdlib.h>

#define HASH_NONFATAL_OOM 1
#include "pool_internal.h"
#include "util.h"

static cp_subpool_t *subpool_of_block(cp_pool_t *pool, const cp_block_t *b) {
  return cp_subpool_of(pool, b->segment->small);
}

/* `lower` takes in its address neighbour `upper`, which is in no index. */
static void join(cp_pool_t *pool, cp_block_t *lower, cp_block_t *upper) {
  lower->size += upper->size;
  if (upper->done_seq > lower->done_seq) lower->done_seq = upper->done_seq;
  lower->next = upper->next;
  if (upper->next) upper->next->prev = lower;
  cp_block_recycle(pool, upper);
  pool->block_count--;
  pool->free_block_count--;
}

/* b, in no index, joined with its address neighbour n (b->prev or b->next)
 * when n is READY: n leaves the ready bins. Returns the block b is now part of. */
static cp_block_t *join_if_ready(cp_pool_t *pool, cp_subpool_t *sp, cp_block_t *b, cp_block_t *n) {
  if (!n || n->state != CP_BLOCK_READY) return b;
  cp_bins_remove(&sp->ready, n);
  cp_block_t *lower = n == b->prev ? n : b;
  join(pool, lower, lower->next);
  return lower;
}

void cp_make_ready(cp_pool_t *pool, cp_block_t *b) {
  cp_subpool_t *sp = subpool_of_block(pool, b);
  if (b->free_seq > b->done_seq) b->done_seq = b->free_seq;
  b->state = CP_BLOCK_READY;
  b->keyed = NULL;
  b->n_recorded = 0;
  b = join_if_ready(pool, sp, b, b->prev);
  b = join_if_ready(pool, sp, b, b->next);
  cp_bins_insert(&sp->ready, b);
}

static cp_keyed_t *keyed_get(cp_subpool_t *sp, uint64_t stream, uint64_t key, bool create) {
  cp_keyed_t *k = sp->last_keyed;
  if (k && k->id.stream == stream && k->id.key == key) return k;
  cp_keyed_t probe = {.id = {stream, key}};
  HASH_FIND(hh, sp->keyed, &probe.id, sizeof probe.id, k);
  if (k) sp->last_keyed = k;
  if (k || !create) return k;
  /* Threads come and go: drop empty trees before the table grows large. */
  if (HASH_COUNT(sp->keyed) >= 64) {
    cp_keyed_t *it, *tmp;
    sp->last_keyed = NULL;
    HASH_ITER(hh, sp->keyed, it, tmp) {
      if (it->count == 0) {
        HASH_DEL(sp->keyed, it);
        free(it);
      }
    }
  }
  k = calloc(1, sizeof *k);
  if (!k) return NULL;
  k->id = probe.id;
  RB_INIT(&k->tree);
  int hash_oom = 0;
#undef uthash_nonfatal_oom
#define uthash_nonfatal_oom(e) (hash_oom = 1)
  HASH_ADD(hh, sp->keyed, id, sizeof k->id, k);
  if (hash_oom) {
    free(k);
    return NULL;
  }
  sp->last_keyed = k;
  return k;
}

cp_block_t *cp_keyed_best_fit(cp_subpool_t *sp, uint64_t stream, uint64_t key, size_t size) {
  if (!sp->keyed) return NULL;
  cp_keyed_t *k = keyed_get(sp, stream, key, false);
  return k && k->count ? cp_tree_best_fit(&k->tree, size) : NULL;
}

size_t cp_pending_not_usable(cp_subpool_t *sp, uint64_t stream, uint64_t key) {
  cp_keyed_t *own = key && sp->keyed ? keyed_get(sp, stream, key, false) : NULL;
  return sp->pending_count - (own ? own->count : 0);
}

static void pending_account(cp_pool_t *pool, cp_block_t *b, int sign) {
  cp_subpool_t *sp = subpool_of_block(pool, b);
  sp->pending_bytes += sign > 0 ? b->size : -b->size;
  sp->pending_count += sign > 0 ? 1 : (size_t)-1;
  cp_stat_add(&pool->stats.pending_bytes, sign * (int64_t)b->size);
}

static void keyed_insert(cp_keyed_t *k, cp_block_t *b) {
  b->keyed = k;
  if (!k) return;
  cp_tree_insert(&k->tree, b);
  k->count++;
}

/* Whether a free with key tree k may absorb neighbour n: what that key may
 * already use, its own pending blocks and, in the large pool, ready ones. A
 * small-pool block left apart from the ready rest of its 2 MiB segment is
 * reused whole by the next same-size request of the thread instead of being
 * merged and split again on every cudaMalloc/cudaFree pair (a third of a
 * cached pair's cost); on the PyTorch traces it costs no memory. */
static bool joinable(const cp_block_t *n, const cp_keyed_t *k) {
  return n && ((n->state == CP_BLOCK_READY && !n->segment->small) ||
               (n->state == CP_BLOCK_PENDING && n->keyed == k));
}

static void detach_free(cp_pool_t *pool, cp_block_t *n) {
  if (n->state == CP_BLOCK_READY)
    cp_bins_remove(&subpool_of_block(pool, n)->ready, n);
  else
    cp_pending_remove(pool, n);
}

/* A keyed free coalesces at once with what its key may use: the result is
 * pending for that key, so other keys wait for the next barrier for memory
 * they could have had at once, but a single-threaded program's frees merge
 * as eagerly as in a plain caching allocator and fragment no more. */
static cp_block_t *coalesce_for_key(cp_pool_t *pool, cp_block_t *b, const cp_keyed_t *k) {
  if (joinable(b->prev, k)) {
    cp_block_t *prev = b->prev;
    detach_free(pool, prev);
    prev->stream = b->stream;
    join(pool, prev, b);
    b = prev;
  }
  if (joinable(b->next, k)) {
    cp_block_t *next = b->next;
    detach_free(pool, next);
    join(pool, b, next);
  }
  return b;
}

/* Into the free-order list after prev (NULL: at the head). */
static void fifo_insert_after(cp_pool_t *pool, cp_block_t *prev, cp_block_t *b) {
  CP_LIST_INSERT_AFTER(pool->fifo_head, pool->fifo_tail, prev, b, fifo_prev, fifo_next);
}

void cp_pending_add(cp_pool_t *pool, cp_block_t *b, uint64_t key) {
  if (!pool->fifo_head) cp_note_freed(pool, true); /* the first to wait */
  cp_keyed_t *k = key ? keyed_get(subpool_of_block(pool, b), b->stream, key, true) : NULL;
  if (k) b = coalesce_for_key(pool, b, k);
  b->state = CP_BLOCK_PENDING;
  b->free_seq = cp_seq_next(pool);
  fifo_insert_after(pool, pool->fifo_tail, b);
  keyed_insert(k, b);
  pending_account(pool, b, +1);
}

static void fifo_unlink(cp_pool_t *pool, cp_block_t *b) {
  CP_LIST_UNLINK(pool->fifo_head, pool->fifo_tail, b, fifo_prev, fifo_next);
  b->fifo_prev = b->fifo_next = NULL;
}

static void keyed_unlink(cp_block_t *b) {
  if (!b->keyed) return;
  cp_tree_remove(&b->keyed->tree, b);
  b->keyed->count--;
}

void cp_pending_remove(cp_pool_t *pool, cp_block_t *b) {
  fifo_unlink(pool, b);
  keyed_unlink(b);
  b->keyed = NULL;
  pending_account(pool, b, -1);
}

/* The rest is counted after b leaves: the pending peak never sees the
 * bytes twice. */
void cp_pending_split(cp_pool_t *pool, cp_block_t *b, cp_block_t *rest) {
  if (rest) {
    fifo_insert_after(pool, b, rest);
    keyed_insert(b->keyed, rest);
  }
  cp_pending_remove(pool, b);
  if (rest) pending_account(pool, rest, +1);
}

void cp_complete_upto(cp_pool_t *pool, uint64_t seq) {
  while (pool->fifo_head && pool->fifo_head->free_seq <= seq) {
    cp_block_t *b = pool->fifo_head;
    cp_pending_remove(pool, b);
    cp_make_ready(pool, b);
  }
}

static cp_fence_rec_t *fence_front(cp_pool_t *pool) { return &pool->fences[pool->fence_head]; }

static void fence_pop(cp_pool_t *pool, bool release) {
  cp_fence_rec_t *rec = fence_front(pool);
  if (release && pool->be.fence_release) pool->be.fence_release(pool->be.ctx, pool->device, rec->fence);
  pool->fence_head = (pool->fence_head + 1) % pool->fence_cap;
  pool->fence_count--;
}

void cp_drop_fences(cp_pool_t *pool, bool release) {
  while (pool->fence_count) fence_pop(pool, release);
}

/* The backend's barrier runs without the pool lock (other threads go on
 * meanwhile; with an observer it keeps it, see below); it covers every
 * block freed before it began, up to `mark`. Blocks freed while it ran wait
 * for the next one.
 *
 * One barrier at a time is in flight, and a thread that needs one meanwhile
 * waits for it (group commit): when it covers every free up to that
 * thread's call it serves that thread too, else one of the waiters issues
 * the next, for all that gathered. Without this, threads whose blocks are
 * all pending (keys off: a program that created streams) each issued their
 * own, and one that lost the race for the blocks a barrier freed grew a new
 * segment: two threads cycling one 20 MiB block each held 20 segments. */
/* The device-wide half of a barrier, the pool lock released: waits while
 * another arena's barrier is in flight; returns true when one covered every
 * free up to `want`, else issues one itself (*rc, *mark: what it covered). */
static bool device_barrier(cp_pool_t *pool, uint64_t want, int *rc, uint64_t *mark) {
  cp_shared_t *sh = pool->shared;
  pthread_mutex_lock(&sh->barrier_lock);
  for (;;) {
    if (atomic_load_explicit(&pool->covered_pub, memory_order_acquire) >= want) {
      pthread_mutex_unlock(&sh->barrier_lock);
      return true;
    }
    if (!sh->barrier_in_flight) break;
    sh->barrier_waiters++;
    pthread_cond_wait(&sh->barrier_done, &sh->barrier_lock);
    sh->barrier_waiters--;
  }
  sh->barrier_in_flight = true;
  /* Every arena's frees so far, not only this one's: the barrier covers
   * them all (it orders all past work on every stream). */
  cp_mark_t marks;
  cp_arena_marks(pool, &marks);
  *mark = marks.seq[pool->arena_index];
  pthread_mutex_unlock(&sh->barrier_lock);
  *rc = pool->be.barrier(pool->be.ctx, pool->device);
  pthread_mutex_lock(&sh->barrier_lock);
  sh->barrier_in_flight = false;
  if (*rc == 0) cp_arena_publish_barrier(pool, &marks);
  pthread_cond_broadcast(&sh->barrier_done);
  pthread_mutex_unlock(&sh->barrier_lock);
  return false;
}

cp_barrier_t cp_try_barrier(cp_pool_t *pool) {
  if (!pool->be.barrier) return CP_BARRIER_NONE;
  /* With an observer (a trace) the barrier keeps the lock: a free by
   * another thread while it ran would be left out of it, an interleaving
   * the trace does not record, and its replay must take the same decisions. */
  bool unlock = !pool->observer;
  uint64_t want = pool->free_seq;
  /* Another arena's barrier may already cover every free here. */
  cp_arena_catch_up(pool);
  if (want && pool->barrier_covered >= want) return CP_BARRIER_SHARED;
  while (unlock && pool->barrier_in_flight) {
    pool->barrier_waiters++;
    pthread_cond_wait(&pool->barrier_done, &pool->lock);
    pool->barrier_waiters--;
    if (pool->barrier_covered >= want) return CP_BARRIER_SHARED;
  }
  int rc = -1;
  uint64_t mark = 0;
  bool covered = false;
  if (unlock) {
    pool->barrier_in_flight = true;
    pthread_mutex_unlock(&pool->lock);
    covered = device_barrier(pool, want, &rc, &mark);
    pthread_mutex_lock(&pool->lock);
    pool->barrier_in_flight = false;
    pthread_cond_broadcast(&pool->barrier_done);
  } else {
    cp_mark_t marks;
    cp_arena_marks(pool, &marks);
    mark = marks.seq[pool->arena_index];
    rc = pool->be.barrier(pool->be.ctx, pool->device);
    if (rc == 0) cp_arena_publish_barrier(pool, &marks);
  }
  if (covered) {
    cp_arena_catch_up(pool);
    return CP_BARRIER_SHARED;
  }
  if (rc != 0) return CP_BARRIER_NONE;
  pool->stats.num_barriers++;
  if (pool->barrier_covered < mark) pool->barrier_covered = mark;
  cp_complete_upto(pool, mark);
  /* A barrier orders, it does not complete: expandable segments keep the
   * fences, which say when pages may be unmapped. */
  if (!pool->page) cp_retire_fences_upto(pool, mark);
  if (pool->fenced_upto < mark) pool->fenced_upto = mark;
  return CP_BARRIER_OWN;
}

static bool fence_push(cp_pool_t *pool, cp_fence_t fence, uint64_t covers) {
  if (pool->fence_count == pool->fence_cap) {
    size_t cap = pool->fence_cap ? pool->fence_cap * 2 : 16;
    cp_fence_rec_t *ring = malloc(cap * sizeof *ring);
    if (!ring) return false;
    for (size_t i = 0; i < pool->fence_count; i++)
      ring[i] = pool->fences[(pool->fence_head + i) % pool->fence_cap];
    free(pool->fences);
    pool->fences = ring;
    pool->fence_cap = cap;
    pool->fence_head = 0;
  }
  pool->fences[(pool->fence_head + pool->fence_count) % pool->fence_cap] = (cp_fence_rec_t){fence, covers};
  pool->fence_count++;
  return true;
}

/* One fence for every pending block no fence covers yet. */
static void fence_new_frees(cp_pool_t *pool) {
  if (!pool->be.fence_record || !pool->fifo_tail || pool->fifo_tail->free_seq <= pool->fenced_upto) return;
  cp_fence_t fence;
  if (pool->be.fence_record(pool->be.ctx, pool->device, &fence) != 0) return;
  if (!fence_push(pool, fence, pool->free_seq)) {
    if (pool->be.fence_release) pool->be.fence_release(pool->be.ctx, pool->device, fence);
    return;
  }
  pool->fenced_upto = pool->free_seq;
  pool->stats.num_fences_recorded++;
}

/* Retire fences oldest first while each has completed (wait: after waiting
 * for it; stops at one the backend will not wait for). */
static bool retire_fences(cp_pool_t *pool, bool wait) {
  fence_new_frees(pool);
  bool progress = false;
  while (pool->fence_count) {
    cp_fence_t f = fence_front(pool)->fence;
    if (wait ? pool->be.fence_wait(pool->be.ctx, pool->device, f) != 0
             : pool->be.fence_query(pool->be.ctx, pool->device, f) != 1)
      break;
    if (wait) pool->stats.num_fences_waited++;
    cp_complete_upto(pool, fence_front(pool)->covers);
    if (fence_front(pool)->covers > pool->completed_seq) pool->completed_seq = fence_front(pool)->covers;
    fence_pop(pool, true);
    progress = true;
  }
  return progress;
}

bool cp_fence_everything(cp_pool_t *pool) {
  if (pool->fence_count &&
      pool->fences[(pool->fence_head + pool->fence_count - 1) % pool->fence_cap].covers >= pool->free_seq)
    return true;
  cp_fence_t fence;
  if (!pool->be.fence_record || pool->be.fence_record(pool->be.ctx, pool->device, &fence) != 0) return false;
  if (!fence_push(pool, fence, pool->free_seq)) {
    if (pool->be.fence_release) pool->be.fence_release(pool->be.ctx, pool->device, fence);
    return false;
  }
  pool->fenced_upto = pool->free_seq;
  pool->stats.num_fences_recorded++;
  return true;
}

bool cp_poll_fences(cp_pool_t *pool) { return retire_fences(pool, false); }
bool cp_wait_fences(cp_pool_t *pool) { return retire_fences(pool, true); }

void cp_retire_fences_upto(cp_pool_t *pool, uint64_t seq) {
  while (pool->fence_count && fence_front(pool)->covers <= seq) fence_pop(pool, true);
}
