/* stats.c: the pool's counters (the list is CUDAPOOL_GAUGES/COUNTERS in
 * cudapool.h). Gauges keep their peak; active and cached are derived from
 * allocated, pending and reserved after every change. */
#include <string.h>

#include "pool_internal.h"

void cp_stat_add(cudapool_gauge_t *g, int64_t delta) {
  g->current += delta;
  if (g->current > g->peak) g->peak = g->current;
}

static void stat_set(cudapool_gauge_t *g, int64_t value) { cp_stat_add(g, value - g->current); }

void cp_stats_refresh_derived(cp_pool_t *pool) {
  cudapool_stats_t *s = &pool->stats;
  stat_set(&s->active_bytes, s->allocated_bytes.current + s->pending_bytes.current);
  stat_set(&s->cached_bytes, s->reserved_bytes.current - s->allocated_bytes.current);
}

static size_t largest_ready(cp_pool_t *pool) {
  cp_block_t *a = cp_bins_largest(&pool->small.ready);
  cp_block_t *b = cp_bins_largest(&pool->large.ready);
  size_t x = a ? a->size : 0, y = b ? b->size : 0;
  return x > y ? x : y;
}

static void stats_one(cp_pool_t *pool, cudapool_stats_t *out) {
  pthread_mutex_lock(&pool->lock);
  cp_tcaches_flush_all(pool);
  *out = pool->stats;
  out->blocks = pool->block_count;
  out->free_blocks = pool->free_block_count;
  out->largest_free_block = largest_ready(pool);
  pthread_mutex_unlock(&pool->lock);
}

/* With arenas: their sums, the largest of their largest free blocks, the
 * reserved peak of them all (shared), and every other peak the sum of
 * theirs (an upper bound: they need not have peaked at once). */
void cp_get_stats(cp_pool_t *main, cudapool_stats_t *out) {
  stats_one(main, out);
  unsigned n = cp_arena_count(main);
  for (unsigned i = 1; i < n; i++) {
    cudapool_stats_t a;
    stats_one(cp_arena_at(main, i), &a);
#define ADD_GAUGE(name, desc)          \
  out->name.current += a.name.current; \
  out->name.peak += a.name.peak;
    CUDAPOOL_GAUGES(ADD_GAUGE)
#undef ADD_GAUGE
#define ADD_COUNTER(name, desc) out->name += a.name;
    CUDAPOOL_COUNTERS(ADD_COUNTER)
#undef ADD_COUNTER
    out->blocks += a.blocks;
    out->free_blocks += a.free_blocks;
    if (a.largest_free_block > out->largest_free_block) out->largest_free_block = a.largest_free_block;
  }
  if (n > 1) {
    int64_t peak = (int64_t)cp_budget_held_peak(main);
    out->reserved_bytes.peak = peak > out->reserved_bytes.current ? peak : out->reserved_bytes.current;
  }
  out->size = sizeof *out;
  out->version = CUDAPOOL_STATS_VERSION;
  out->device = main->device;
}

size_t cp_releasable_bytes(cp_pool_t *main) {
  size_t bytes = 0;
  cp_for_each_arena(pool, main) {
    pthread_mutex_lock(&pool->lock);
    /* Blocks in thread caches are the arena's free blocks, not yet merged. */
    cp_tcaches_flush_all(pool);
    for (cp_segment_t *seg = pool->oldest; seg; seg = seg->newer) {
      bool used = false;
      for (const cp_block_t *b = seg->first; b && !used; b = b->next) used = b->state == CP_BLOCK_ACTIVE;
      if (!used) bytes += seg->expandable ? seg->mapped_bytes : seg->size;
    }
    pthread_mutex_unlock(&pool->lock);
  }
  return bytes;
}

void cp_reset_peak(cp_pool_t *main) {
  cp_for_each_arena(pool, main) {
    pthread_mutex_lock(&pool->lock);
    cp_tcaches_fold_all(pool);
#define RESET_PEAK(name, desc) pool->stats.name.peak = pool->stats.name.current;
    CUDAPOOL_GAUGES(RESET_PEAK)
#undef RESET_PEAK
    pthread_mutex_unlock(&pool->lock);
  }
  cp_budget_reset_peak(main);
}
