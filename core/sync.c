/* sync.c: what makes pending blocks ready (the reuse contract, pool.h):
 * barriers, fences, and the synchronisations the program made.
 *
 * Barriers complete every pending block at once; one is in flight per
 * device at a time (group commit), issued with the arena's lock released.
 * Fences are batched: one is recorded only when pending blocks exist that
 * no fence covers yet, and it covers all of them; fences complete in the
 * order they were recorded, since each one covers all streams and is
 * recorded after the previous one. A synchronisation is a mark taken before
 * the program's call (a point in each arena's free order, cp_mark_t) and
 * reported after it (cp_sync_device, cp_sync_stream).
 *
 * Locking: the arena's lock is held (cp_sync_* take each arena's in turn);
 * cp_try_barrier releases it while the backend issues the barrier, under
 * the device's barrier_lock (cp_device_pool_t). */
#include <errno.h>
#include <stdlib.h>

#include "pool_internal.h"
#include "util.h"

static cp_fence_rec_t *fence_tcache(cp_pool_t *pool) { return &pool->fences[pool->fence_head]; }

static void fence_pop(cp_pool_t *pool, bool release) {
  cp_fence_rec_t *rec = fence_tcache(pool);
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
  cp_device_pool_t *sh = pool->devpool;
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
    cp_fence_t f = fence_tcache(pool)->fence;
    if (wait ? pool->be.fence_wait(pool->be.ctx, pool->device, f) != 0
             : pool->be.fence_query(pool->be.ctx, pool->device, f) != 1)
      break;
    if (wait) pool->stats.num_fences_waited++;
    cp_complete_upto(pool, fence_tcache(pool)->covers);
    if (fence_tcache(pool)->covers > pool->completed_seq) pool->completed_seq = fence_tcache(pool)->covers;
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
  while (pool->fence_count && fence_tcache(pool)->covers <= seq) fence_pop(pool, true);
}

void cp_sync_mark(cp_pool_t *main, cp_mark_t *out) {
  /* What thread caches hold was freed before the mark: the sync covers it. */
  out->n = 0;
  cp_for_each_arena(pool, main) {
    pthread_mutex_lock(&pool->lock);
    cp_tcaches_flush_all(pool);
    out->seq[out->n++] = pool->free_seq;
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
