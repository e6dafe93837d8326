/* max_split.c: a small max_split never makes the rest of a new segment
 * unusable. Blocks at or over max_split are never split for a smaller
 * request; with max_split under a standard segment's size, the rest cut
 * from a new 2 MiB segment for 512 bytes was such a block (1,000 requests
 * of 512 B took 1,000 segments), and a new 20 MiB segment was not cut at
 * all for 2 MiB (200 of them reserved 4,000 MiB). The pool raises max_split
 * to cp_max_split_floor (21 MiB with the defaults): exact reserved figures
 * on the simulated device, equal to those with no max_split. */
#include "core_fixture.h"

#define PAGE (2 * MiB)

static uintptr_t live[1000];

static void open_split(size_t max_split, size_t limit) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.max_split = max_split;
  cfg.limit = limit;
  fx_open_cfg(&cfg, 64 * GiB);
}

/* n blocks of `size`: every one allocated; returns the bytes reserved. */
static int64_t reserved_for(size_t max_split, size_t n, size_t size) {
  open_split(max_split, 1 * GiB);
  for (size_t i = 0; i < n; i++) live[i] = fx_alloc(size);
  int64_t reserved = fx_stats().reserved_bytes.peak;
  for (size_t i = 0; i < n; i++) fx_free_idle(live[i]);
  fx_close();
  return reserved;
}

Test(max_split, the_floor_is_above_every_standard_segment) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cr_assert(eq(sz, cp_max_split_floor(&cfg), 21 * MiB));
  cfg.large_segment = 40 * MiB;
  cr_assert(eq(sz, cp_max_split_floor(&cfg), 41 * MiB));
  open_split(1 * MiB, CP_NO_LIMIT);
  cp_config_t got;
  cp_get_config(F.pool, &got);
  cr_assert(eq(sz, got.max_split, 21 * MiB), "raised to the floor");
  fx_close();
  open_split(21 * MiB, CP_NO_LIMIT);
  cp_get_config(F.pool, &got);
  cr_assert(eq(sz, got.max_split, 21 * MiB), "the floor itself is taken");
  fx_close();
}

/* The first case: 1 MiB, a 1 GiB limit, 1,000 x 512 B. */
Test(max_split, small_requests_share_one_segment_under_a_1_mib_max_split) {
  cr_assert(eq(i64, reserved_for(1 * MiB, 1000, 512), 2 * MiB));
  cr_assert(eq(i64, reserved_for(CP_NO_LIMIT, 1000, 512), 2 * MiB));
}

/* The second case: 200 x 2 MiB, ten to a 20 MiB segment. */
Test(max_split, requests_under_10_mib_share_20_mib_segments_under_any_small_max_split) {
  static const size_t splits[] = {2 * MiB, 4 * MiB, 10 * MiB, 19 * MiB, 20 * MiB, 21 * MiB};
  cr_assert(eq(i64, reserved_for(CP_NO_LIMIT, 200, 2 * MiB), 400 * MiB));
  for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++)
    cr_assert(eq(i64, reserved_for(splits[i], 200, 2 * MiB), 400 * MiB), "max_split %zu MiB",
              splits[i] / MiB);
}

/* Above the floor the rule holds: a request under max_split may not take a
 * block at or over it (rules.c, oversize_blocks_are_never_split, has more). */
Test(max_split, blocks_over_it_still_serve_no_smaller_request) {
  open_split(32 * MiB, CP_NO_LIMIT);
  uintptr_t big = fx_alloc(40 * MiB);
  fx_free_idle(big);
  uintptr_t small = fx_alloc(2 * MiB);
  cr_assert(ne(u64, small, big));
  cr_assert(eq(i64, fx_stats().reserved_bytes.current, 60 * MiB));
  fx_free_idle(small);
  fx_close();
}

/* Expandable segments: the range's free rest is address space, cut like
 * any other block; 100 x 30 MiB take one range and their pages alone. */
Test(max_split, an_expandable_range_serves_every_request_under_max_split) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.expandable = true;
  cfg.expandable_size = 8 * GiB;
  cfg.max_split = 256 * MiB;
  cp_sim_init(&F.sim, 64 * GiB);
  F.sim.vmm_page = PAGE;
  F.be = cp_sim_backend(&F.sim);
  F.cfg = cfg;
  cr_assert(eq(int, cp_pool_create(&F.pool, 0, &F.cfg, &F.be), 0));
  for (size_t i = 0; i < 100; i++) live[i] = fx_alloc(30 * MiB);
  cr_assert(eq(u64, F.sim.reserves, 1), "one range");
  cr_assert(eq(i64, fx_stats().reserved_bytes.current, 100 * 30 * MiB));
  cr_assert(eq(i64, fx_stats().allocated_bytes.current, 100 * 30 * MiB));
  for (size_t i = 0; i < 100; i++) fx_free_idle(live[i]);
  cr_assert(eq(u64, F.sim.bad_maps, 0));
  fx_close();
}
