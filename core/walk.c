/* walk.c: every segment and block of a device pool, for a snapshot (pool.h,
 * cp_walk). Owns no state. Each arena is walked under its own lock, so one
 * arena's figures are consistent; arenas are walked one after another. The
 * segments of an arena are listed in creation order (oldest/newer) and
 * sorted by base, so the walk needs no access to segment.c's tree. */
#include <errno.h>
#include <stdlib.h>

#include "pool_internal.h"

static int by_base(const void *a, const void *b) {
  uintptr_t x = (*(cp_segment_t *const *)a)->base, y = (*(cp_segment_t *const *)b)->base;
  return x < y ? -1 : x > y;
}

static cp_walk_state_t state_of(const cp_block_t *b) {
  switch (b->state) {
    case CP_BLOCK_ACTIVE: return b->lent && cp_tcache_holds_freed((cp_block_t *)b) ? CP_WALK_PENDING : CP_WALK_ALLOCATED;
    case CP_BLOCK_READY: return CP_WALK_FREE;
    case CP_BLOCK_PENDING: return CP_WALK_PENDING;
  }
  return CP_WALK_FREE;
}

/* Lock held. */
static int walk_arena(cp_pool_t *pool, const cp_walker_t *w) {
  size_t n = 0;
  for (cp_segment_t *s = pool->oldest; s; s = s->newer) n++;
  cp_segment_t **order = malloc((n ? n : 1) * sizeof *order);
  if (!order) return ENOMEM;
  n = 0;
  for (cp_segment_t *s = pool->oldest; s; s = s->newer) order[n++] = s;
  qsort(order, n, sizeof *order, by_base);
  for (size_t i = 0; i < n; i++) {
    const cp_segment_t *s = order[i];
    cp_walk_segment_t seg = {.addr = s->base, .size = s->size, .stream = s->first->stream, .expandable = s->expandable};
    if (w->segment) w->segment(w->ctx, &seg);
    for (const cp_block_t *b = s->first; b; b = b->next) {
      cp_walk_state_t st = state_of(b);
      cp_walk_block_t blk = {.addr = b->addr,
                             .size = b->size,
                             .requested = st == CP_WALK_ALLOCATED ? b->requested : 0,
                             .state = st,
                             .stream = b->stream};
      if (w->block) w->block(w->ctx, &blk);
    }
  }
  free(order);
  return 0;
}

int cp_walk(cp_pool_t *pool, const cp_walker_t *walker) {
  int rc = 0;
  cp_for_each_arena(a, pool->main) {
    pthread_mutex_lock(&a->lock);
    rc = walk_arena(a, walker);
    pthread_mutex_unlock(&a->lock);
    if (rc) break;
  }
  return rc;
}
