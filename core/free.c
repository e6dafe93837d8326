/* free.c: a free under an arena's lock (cp_free_locked, cp_free,
 * cp_free_on_stream): ACTIVE to PENDING, or READY when nothing can touch
 * the block; it never calls the backend. The free of a thread cache's
 * blocks (tcache.c) ends here too, through cp_release_active.
 *
 * A free goes to the one arena whose segment holds the address: the owned
 * table names it (cp_arenas_owning, owned.c); the others are not asked.
 * Errors leave the pool untouched: ENOENT, no segment of the pool holds the
 * address; EINVAL, one does but no live block starts there.
 *
 * Locking: the arena's lock (cp_free_locked expects it held). */
#include <errno.h>
#include <stdlib.h>

#include "pool_internal.h"
#include "util.h"

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
    cp_note_freed(pool, false);
    if (counted) pool->stats.pending_bytes.current -= (int64_t)b->size;
  } else {
    /* A block used on other streams too is ordered by nobody's own stream. */
    cp_pending_add(pool, b, b->n_recorded ? 0 : key);
  }
}

/* restream: the stream the block is freed on becomes its stream (NULL: it
 * keeps the one it was allocated for). */
int cp_free_locked(cp_pool_t *pool, uintptr_t addr, const uint64_t *restream, uint64_t key, unsigned flags) {
  cp_block_t *b = cp_find_active(pool, addr);
  if (b && b->lent && !cp_tcache_take_back(pool, b)) b = NULL; /* free in a thread cache: a second free */
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

/* The arena whose segment holds addr (the owned table names it; when it
 * cannot, each in turn answers ENOENT, leaving everything as it was). */
static int free_in_owner(cp_pool_t *main, uintptr_t addr, const uint64_t *restream, uint64_t key,
                         unsigned flags) {
  int rc = ENOENT;
  cp_for_each_arena_owning(pool, main, addr) {
    pthread_mutex_lock(&pool->lock);
    if ((rc = cp_free_and_unlock(pool, addr, restream, key, flags)) != ENOENT) break;
  }
  return rc;
}

int cp_free(cp_pool_t *main, uintptr_t addr, uint64_t key, unsigned flags) {
  return free_in_owner(main, addr, NULL, key, flags);
}

int cp_free_on_stream(cp_pool_t *main, uintptr_t addr, uint64_t stream, uint64_t key, unsigned flags) {
  return free_in_owner(main, addr, &stream, key, flags);
}
