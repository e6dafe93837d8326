/* query.c: what the shim asks about an address: the live block's size
 * (cp_block_size), the block any address lies in as the program sees it
 * (cp_block_find), and the streams a block is used on (cp_record_stream).
 *
 * One lookup: the owned table names the arena whose segment holds the
 * address (cp_arenas_owning); only that arena's lock is taken.
 *
 * Locking: each call takes that arena's lock; a block lent to a thread
 * cache is taken back from it (its lock, under the arena's) when the answer
 * needs the pool's view of it. */
#include <errno.h>
#include <stdlib.h>

#include "pool_internal.h"

/* The live block at addr: ACTIVE and not free in a thread cache. */
static cp_block_t *find_live(cp_pool_t *pool, uintptr_t addr) {
  cp_block_t *b = cp_find_active(pool, addr);
  return b && b->lent && cp_tcache_holds_freed(b) ? NULL : b;
}

static size_t block_size_one(cp_pool_t *pool, uintptr_t addr) {
  pthread_mutex_lock(&pool->lock);
  cp_block_t *b = find_live(pool, addr);
  size_t size = b ? b->size : 0;
  pthread_mutex_unlock(&pool->lock);
  return size;
}

size_t cp_block_size(cp_pool_t *main, uintptr_t addr) {
  size_t size = 0;
  cp_for_each_arena_owning(pool, main, addr) if ((size = block_size_one(pool, addr))) break;
  return size;
}

static int block_find_one(cp_pool_t *pool, uintptr_t addr, cp_block_info_t *out) {
  pthread_mutex_lock(&pool->lock);
  cp_segment_t *seg = cp_segment_containing(pool, addr);
  cp_block_t *b = seg ? seg->first : NULL;
  while (b && addr - b->addr >= b->size) b = b->next;
  int rc = seg ? EINVAL : ENOENT;
  /* A thread cache gives a live block back first: its `requested` is then the pool's to read. */
  if (b && b->state == CP_BLOCK_ACTIVE && b->lent && !cp_tcache_take_back(pool, b)) b = NULL;
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
  int rc = ENOENT;
  cp_for_each_arena_owning(pool, main, addr) if ((rc = block_find_one(pool, addr, out)) != ENOENT) break;
  return rc;
}

static int record_stream_one(cp_pool_t *pool, uintptr_t addr, uint64_t stream) {
  pthread_mutex_lock(&pool->lock);
  cp_block_t *b = cp_find_active(pool, addr);
  /* Used on another stream: never reused by key, so no thread cache keeps it. */
  if (b && b->lent && !cp_tcache_take_back(pool, b)) b = NULL;
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
  int rc = ENOENT;
  cp_for_each_arena_owning(pool, main, addr) if ((rc = record_stream_one(pool, addr, stream)) != ENOENT) break;
  return rc;
}
