/* limits.c: the byte limit, the cache cap, empty_cache, the
 * out-of-memory retry order, and every counter after an exact sequence. */
#include <string.h>

#include "core_fixture.h"

#define BIG (20 * MiB)

static cp_config_t with_limit(size_t limit) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.limit = limit;
  return cfg;
}

Test(limits, a_3MiB_request_fits_a_4MiB_limit) {
  cp_config_t cfg = with_limit(4 * MiB);
  fx_open_cfg(&cfg, 1 * GiB);
  uintptr_t p = fx_alloc(3 * MiB);
  cr_assert(eq(i64, fx_stats().reserved_bytes.current, 3 * MiB), "own-size segment, not 20 MiB");
  uintptr_t q = 0;
  cr_assert(eq(int, cp_alloc(F.pool, 2 * MiB, 0, 0, &q), ENOMEM));
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_ooms, 1));
  cr_assert(eq(u64, s.num_alloc_retries, 0), "allocated + request over the limit: no retry can help");
  cr_assert(eq(u64, F.sim.failed_allocs, 0), "the limit fails before the backend is asked");
  fx_free_idle(p);
  fx_close();
}

Test(limits, standard_segment_falls_back_to_request_size) {
  cp_config_t cfg = with_limit(30 * MiB);
  fx_open_cfg(&cfg, 1 * GiB);
  fx_alloc(5 * MiB);  /* 20 MiB segment */
  fx_alloc(15 * MiB); /* fits in the rest */
  fx_alloc(8 * MiB);  /* 20 would cross 30: an 8 MiB segment */
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.reserved_bytes.current, 28 * MiB));
  cr_assert(eq(i64, s.segments.current, 2));
  fx_close();
}

Test(limits, set_limit_changes_it_live) {
  fx_open(1 * GiB);
  uintptr_t p = fx_alloc(BIG);
  fx_free_idle(p);
  cp_set_limit(F.pool, 10 * MiB);
  cr_assert(eq(i64, fx_stats().reserved_bytes.current, 0), "cached segments over the new limit released");
  uintptr_t q;
  cr_assert(eq(int, cp_alloc(F.pool, BIG, 0, 0, &q), ENOMEM));
  cp_set_limit(F.pool, 0);
  fx_alloc(BIG);
  fx_close();
}

Test(limits, oom_waits_for_fences_before_growing_again) {
  fx_open(40 * MiB);
  F.sim.barrier_enabled = false;
  uintptr_t a = fx_alloc(BIG), b = fx_alloc(BIG);
  (void)b;
  fx_free(a, 0);
  cr_assert(eq(u64, fx_alloc(BIG), a));
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_fences_recorded, 1));
  cr_assert(eq(u64, s.num_fences_waited, 1));
  cr_assert(eq(u64, s.num_alloc_retries, 1));
  cr_assert(eq(u64, s.num_ooms, 0));
  cr_assert(eq(u64, s.hits, 1));
  fx_close();
}

Test(limits, oom_releases_free_segments_then_grows) {
  fx_open(40 * MiB);
  uintptr_t a = fx_alloc(BIG);
  fx_free_idle(a);
  uintptr_t b = fx_alloc(30 * MiB);
  (void)b;
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_device_free, 1));
  cr_assert(eq(u64, s.num_alloc_retries, 1));
  cr_assert(eq(i64, s.reserved_bytes.current, 30 * MiB));
  cr_assert(eq(u64, s.misses, 2));
  fx_close();
}

Test(limits, true_oom_reports_and_changes_nothing) {
  fx_open(40 * MiB);
  uintptr_t p;
  cr_assert(eq(int, cp_alloc(F.pool, 50 * MiB, 0, 0, &p), ENOMEM));
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_ooms, 1));
  cr_assert(eq(i64, s.reserved_bytes.current, 0));
  cr_assert(eq(u64, s.num_alloc, 0));
  fx_close();
}

Test(limits, max_cached_releases_oldest_free_segments) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.max_cached = BIG;
  fx_open_cfg(&cfg, 1 * GiB);
  uintptr_t a = fx_alloc(BIG), b = fx_alloc(BIG);
  fx_free_idle(a);
  cr_assert(eq(i64, fx_stats().segments.current, 2));
  fx_free_idle(b);
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.segments.current, 1));
  cr_assert(eq(i64, s.cached_bytes.current, (int64_t)BIG));
  cr_assert(eq(u64, fx_alloc(BIG), b), "the older segment (a) went back");
  fx_close();
}

Test(limits, trim_releases_oldest_free_segments_down_to_a_target) {
  fx_open(1 * GiB);
  uintptr_t a = fx_alloc(BIG), b = fx_alloc(BIG), c = fx_alloc(BIG);
  fx_free_idle(a);
  fx_free_idle(b);
  cr_assert(eq(sz, cp_trim(F.pool, BIG), BIG), "one segment over the target: the oldest goes");
  cr_assert(eq(u64, fx_alloc(BIG), b));
  fx_free_idle(c);
  fx_close();
}

Test(limits, empty_cache_releases_whole_free_segments_only) {
  fx_open(1 * GiB);
  uintptr_t a = fx_alloc(BIG), b = fx_alloc(512), c = fx_alloc(BIG);
  (void)b;
  fx_free(a, 0);
  fx_free(c, 0);
  size_t released = cp_empty_cache(F.pool);
  cr_assert(eq(sz, released, 2 * BIG), "pending blocks first made ready by a barrier");
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.reserved_bytes.current, 2 * MiB), "the small segment is in use");
  cr_assert(eq(u64, s.num_barriers, 1));
  fx_close();
}

Test(limits, empty_cache_waits_fences_when_no_barrier) {
  fx_open(1 * GiB);
  F.sim.barrier_enabled = false;
  uintptr_t a = fx_alloc(BIG);
  fx_free(a, 0);
  cr_assert(eq(sz, cp_empty_cache(F.pool), BIG));
  cr_assert(eq(u64, fx_stats().num_fences_waited, 1));
  fx_close();
}

Test(limits, every_counter_after_an_exact_sequence) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.split_barrier_pending = 1; /* any pending block makes a split ask for a barrier */
  cfg.split_barrier_share = 0;
  fx_open_cfg(&cfg, 1 * GiB);
  uintptr_t a = fx_alloc(1000);    /* miss: 2 MiB small segment, block 1024 */
  uintptr_t b = fx_alloc(5 * MiB); /* miss: 20 MiB segment, split */
  fx_free(a, 0);                   /* pending */
  uintptr_t c = fx_alloc(1000);    /* the ready rest would need a split: barrier, a merges back */
  cr_assert(eq(u64, c, a));
  fx_free(b, 0);
  uintptr_t d = fx_alloc(5 * MiB); /* the same in the large pool */
  cr_assert(eq(u64, d, b));
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.allocated_bytes.current, 1024 + 5 * MiB));
  cr_assert(eq(i64, s.allocated_bytes.peak, 1024 + 5 * MiB));
  cr_assert(eq(i64, s.allocated_blocks.current, 2));
  cr_assert(eq(i64, s.allocated_blocks.peak, 2));
  cr_assert(eq(i64, s.requested_bytes.current, 1000 + 5 * MiB));
  cr_assert(eq(i64, s.pending_bytes.current, 0));
  cr_assert(eq(i64, s.pending_bytes.peak, 5 * MiB));
  cr_assert(eq(i64, s.active_bytes.current, 1024 + 5 * MiB));
  cr_assert(eq(i64, s.reserved_bytes.current, 22 * MiB));
  cr_assert(eq(i64, s.cached_bytes.current, 22 * MiB - 1024 - 5 * MiB));
  cr_assert(eq(i64, s.segments.current, 2));
  cr_assert(eq(u64, s.num_alloc, 4));
  cr_assert(eq(u64, s.num_free, 2));
  cr_assert(eq(u64, s.hits, 2));
  cr_assert(eq(u64, s.misses, 2));
  cr_assert(eq(u64, s.num_immediate_reuse, 0));
  cr_assert(eq(u64, s.num_device_alloc, 2));
  cr_assert(eq(u64, s.num_device_free, 0));
  cr_assert(eq(u64, s.num_barriers, 2));
  cr_assert(eq(u64, s.num_fences_recorded, 0));
  cr_assert(eq(u64, s.num_sync_points, 0));
  cr_assert(eq(u64, s.num_alloc_retries, 0));
  cr_assert(eq(u64, s.num_ooms, 0));
  cr_assert(eq(u64, s.blocks, 4));
  cr_assert(eq(u64, s.free_blocks, 2));
  cr_assert(eq(u64, s.largest_free_block, 15 * MiB));
  cr_assert(eq(sz, cp_empty_cache(F.pool), 0), "both segments are in use");
  cp_reset_peak(F.pool);
  s = fx_stats();
  cr_assert(eq(i64, s.pending_bytes.peak, 0));
  cr_assert(eq(i64, s.active_bytes.peak, s.active_bytes.current));
  fx_free(c, 0);
  fx_free(d, 0);
  cr_assert(eq(sz, cp_empty_cache(F.pool), 22 * MiB));
  s = fx_stats();
  cr_assert(eq(u64, s.num_barriers, 3));
  cr_assert(eq(u64, s.num_device_free, 2));
  cr_assert(eq(i64, s.reserved_bytes.current, 0));
  cr_assert(eq(i64, s.reserved_bytes.peak, 22 * MiB));
  fx_close();
}
