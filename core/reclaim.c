/* reclaim.c: a background reclaimer's pass over a device's pool (pool.h,
 * cp_reclaim), so that freed memory becomes reusable, and CUDAPOOL_MAX_CACHED
 * and the idle release hold, while the program makes no call.
 *
 * What it owns: the idle stamp of each segment (segment->free_since: when a
 * pass first saw the segment wholly free; hand_out() in alloc.c clears it)
 * and the decision which memory a pass gives back. Everything else is the
 * pool's own machinery, called as a program's thread would: caches flushed
 * as by a stats read, cp_try_barrier (which issues the barrier with the
 * lock released, or shares one in flight), cp_poll_fences (a fence
 * recorded for new frees and queried: never a host wait), the release of
 * whole free segments as the max_cached trim does it, pages of expandable
 * segments only once their device work has completed.
 *
 * Locking: each arena's lock in turn, as any caller; the backend is called
 * with it held (fences, cudaFree of a segment) except for the barrier, as
 * everywhere in the core. The caller's release_begin/end run under it too.
 * Nothing here waits for the device but a cudaFree, as the trim does. */
#include <stdlib.h>

#include "pool_internal.h"

static bool releasing(const cp_pool_t *pool, const cp_reclaim_args_t *a) {
  return pool->cfg.max_cached != CP_NO_LIMIT || a->idle_ns != 0;
}

/* Whole free segments unused for idle_ns go back; the others say when
 * they fall due. */
static void release_idle(cp_pool_t *pool, const cp_reclaim_args_t *a, cp_reclaim_result_t *out) {
  for (cp_segment_t *seg = pool->oldest, *newer; seg; seg = newer) {
    newer = seg->newer;
    if (!cp_segment_is_free(seg)) {
      seg->free_since = 0;
      continue;
    }
    if (!seg->free_since) seg->free_since = a->now_ns;
    uint64_t due = seg->free_since + a->idle_ns;
    if (a->now_ns < due) {
      if (!out->due_ns || due < out->due_ns) out->due_ns = due;
      continue;
    }
    /* Pages go back only once the device has finished with them. */
    if (seg->expandable && !cp_pages_release_segment(pool, seg)) {
      out->busy = true;
      continue;
    }
    cp_segment_release(pool, seg);
    pool->stats.num_idle_releases++;
  }
}

static void pass_one(cp_pool_t *pool, const cp_reclaim_args_t *a, cp_reclaim_result_t *out) {
  pthread_mutex_lock(&pool->lock);
  if (pool->main == pool) pool->stats.num_reclaims++;
  cp_tcaches_flush_all(pool);
  if (pool->fifo_head && cp_try_barrier(pool) == CP_BARRIER_NONE) cp_poll_fences(pool);
  bool release = releasing(pool, a);
  /* Pages are unmapped only once their work has completed: a fence now, found done by a later pass. */
  if (release && pool->page) cp_complete_all(pool, false);
  if (release && (!a->release_begin || a->release_begin(a->ctx))) {
    size_t cap = pool->cfg.max_cached / cp_arena_count(pool); /* each arena its share, as the trim */
    if (pool->cfg.max_cached != CP_NO_LIMIT && (size_t)pool->stats.cached_bytes.current > cap)
      cp_release_free_segments(pool, cap);
    if (a->idle_ns) release_idle(pool, a, out);
    if (a->release_end) a->release_end(a->ctx);
  } else if (release) {
    out->busy = true;
  }
  if (pool->fifo_head || (release && pool->page && pool->completed_seq < pool->free_seq)) out->busy = true;
  cp_stats_refresh_derived(pool);
  pthread_mutex_unlock(&pool->lock);
}

void cp_reclaim(cp_pool_t *main, const cp_reclaim_args_t *args, cp_reclaim_result_t *out) {
  *out = (cp_reclaim_result_t){0};
  for (unsigned i = 0, n = cp_arena_count(main); i < n; i++) pass_one(cp_arena_at(main, i), args, out);
}

bool cp_reclaim_waiting(cp_pool_t *main) {
  bool waiting = false;
  for (unsigned i = 0, n = cp_arena_count(main); i < n && !waiting; i++) {
    cp_pool_t *pool = cp_arena_at(main, i);
    pthread_mutex_lock(&pool->lock);
    cp_tcaches_flush_all(pool);
    waiting = pool->fifo_head != NULL;
    pthread_mutex_unlock(&pool->lock);
  }
  return waiting;
}
