/* config.c: the pool's configuration: its defaults (PyTorch's), what makes
 * one valid, and the sizes it derives (rounding, segment sizes, the cost of
 * a barrier). Pure functions of cp_config_t; no state, no lock but
 * cp_get_config's (the arena's, since cp_set_limit changes cfg.limit). */
#include <stdlib.h>

#include "pool_internal.h"

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
      .split_barrier_bytes = 0,
      .limit = CP_NO_LIMIT,
      .max_cached = CP_NO_LIMIT,
      .reuse = CP_REUSE_DEFERRED,
      .expandable = false,
      .expandable_size = 0,
      .arenas = 1,
      .arena_move_after = 8,
  };
}

bool cp_config_valid(const cp_config_t *c) {
  return cp_is_pow2(c->round) && cp_is_pow2(c->segment_round) && c->small_max % c->round == 0 &&
         c->small_segment >= c->small_max && c->large_threshold <= c->large_segment &&
         c->large_segment % c->round == 0 && c->small_segment % c->round == 0 &&
         c->segment_round >= c->round && c->arenas <= CP_ARENAS_MAX; /* 0 means 1 */
}

size_t cp_max_split_floor(const cp_config_t *cfg) {
  size_t biggest = cfg->small_segment > cfg->large_segment ? cfg->small_segment : cfg->large_segment;
  return biggest > SIZE_MAX - MiB ? SIZE_MAX : biggest + MiB;
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

void cp_get_config(cp_pool_t *pool, cp_config_t *out) {
  pthread_mutex_lock(&pool->lock);
  *out = pool->cfg;
  pthread_mutex_unlock(&pool->lock);
}
