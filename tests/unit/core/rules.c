/* rules.c: the pool's sizing rules, one exact test per rule: rounding,
 * pool choice, segment sizes, splitting, coalescing, oversize blocks, best
 * fit, and the error results of cp_alloc/cp_free. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "core_fixture.h"
/* after criterion.h: included first, it breaks the Test macro */
#include <criterion/parameterized.h>

typedef struct size_case {
  size_t request, expected;
} size_case_t;

ParameterizedTestParameters(rules, rounding) {
  static size_case_t cases[] = {
      {1, 512},
      {511, 512},
      {512, 512},
      {513, 1024},
      {1 * MiB, 1 * MiB},
      {1 * MiB + 1, 1 * MiB + 512},
      {SIZE_MAX - 510, 0},
      {SIZE_MAX, 0},
  };
  return cr_make_param_array(size_case_t, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(size_case_t *c, rules, rounding) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cr_assert(eq(sz, cp_round_size(&cfg, c->request), c->expected), "round(%zu)", c->request);
}

ParameterizedTestParameters(rules, driver_alloc_size) {
  static size_case_t cases[] = {
      {1, 2 * MiB},
      {1 * MiB, 2 * MiB},
      {1 * MiB + 1, 20 * MiB},
      {10 * MiB - 512, 20 * MiB},
      {10 * MiB, 10 * MiB},
      {10 * MiB + 1, 12 * MiB},
      {21 * MiB, 22 * MiB},
      {1 * GiB + 1, 1 * GiB + 2 * MiB},
  };
  return cr_make_param_array(size_case_t, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(size_case_t *c, rules, driver_alloc_size) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cr_assert(eq(sz, cp_driver_alloc_size(&cfg, c->request), c->expected), "driver_alloc_size(%zu)",
            c->request);
}

Test(rules, small_and_large_pool_choice) {
  fx_open(1 * GiB);
  fx_alloc(1 * MiB);
  cr_assert(eq(i64, fx_stats().reserved_bytes.current, 2 * MiB));
  fx_alloc(1 * MiB + 1);
  cr_assert(eq(i64, fx_stats().reserved_bytes.current, 22 * MiB));
  fx_alloc(10 * MiB); /* fits in the rest of the 20 MiB segment */
  cr_assert(eq(i64, fx_stats().reserved_bytes.current, 22 * MiB));
  fx_alloc(10 * MiB); /* does not: its own 10 MiB segment */
  cr_assert(eq(i64, fx_stats().reserved_bytes.current, 32 * MiB));
  cr_assert(eq(i64, fx_stats().segments.current, 3));
  /* A small request never takes large-pool memory: the 20 MiB segment has
   * 9 MiB free, yet 1 MiB comes from the small segment and 512 bytes more
   * from a new small one. */
  fx_alloc(1 * MiB);
  cr_assert(eq(i64, fx_stats().segments.current, 3));
  fx_alloc(512);
  cr_assert(eq(i64, fx_stats().segments.current, 4));
  fx_close();
}

Test(rules, small_split_and_exact_fit) {
  fx_open(1 * GiB);
  uintptr_t a = fx_alloc(512);
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(sz, cp_block_size(F.pool, a), 512));
  cr_assert(eq(u64, s.blocks, 2));
  cr_assert(eq(u64, s.free_blocks, 1));
  cr_assert(eq(u64, s.largest_free_block, 2 * MiB - 512));
  fx_close();
  fx_open(1 * GiB);
  uintptr_t x = fx_alloc(1 * MiB), y = fx_alloc(1 * MiB);
  cr_assert(eq(u64, y, x + 1 * MiB));
  s = fx_stats();
  cr_assert(eq(u64, s.blocks, 2));
  cr_assert(eq(u64, s.free_blocks, 0));
  cr_assert(eq(i64, s.segments.current, 1));
  fx_close();
}

typedef struct split_case {
  size_t request, block, reserved;
} split_case_t;

ParameterizedTestParameters(rules, large_split) {
  static split_case_t cases[] = {
      {5 * MiB, 5 * MiB, 20 * MiB},               /* remainder 15 MiB: split */
      {19 * MiB, 20 * MiB, 20 * MiB},             /* remainder exactly 1 MiB: no split */
      {19 * MiB + 512 * KiB, 20 * MiB, 20 * MiB}, /* remainder under 1 MiB */
      {12 * MiB, 12 * MiB, 12 * MiB},             /* own-size segment, exact */
      {11 * MiB, 12 * MiB, 12 * MiB},             /* remainder 1 MiB: no split */
  };
  return cr_make_param_array(split_case_t, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(split_case_t *c, rules, large_split) {
  fx_open(1 * GiB);
  uintptr_t p = fx_alloc(c->request);
  cr_assert(eq(sz, cp_block_size(F.pool, p), c->block));
  cr_assert(eq(i64, fx_stats().allocated_bytes.current, (int64_t)c->block));
  cr_assert(eq(i64, fx_stats().requested_bytes.current, (int64_t)c->request));
  cr_assert(eq(i64, fx_stats().reserved_bytes.current, (int64_t)c->reserved));
  fx_close();
}

Test(rules, coalescing_every_neighbour_combination) {
  fx_open(1 * GiB);
  uintptr_t a = fx_alloc(512 * KiB), b = fx_alloc(512 * KiB), c = fx_alloc(512 * KiB),
            d = fx_alloc(512 * KiB);
  cr_assert(eq(u64, fx_stats().blocks, 4));
  fx_free_idle(b); /* neighbours active on both sides: no merge */
  cr_assert(eq(u64, fx_stats().blocks, 4));
  cr_assert(eq(u64, fx_stats().free_blocks, 1));
  fx_free_idle(a); /* free block after it: merges forward */
  cr_assert(eq(u64, fx_stats().blocks, 3));
  cr_assert(eq(u64, fx_stats().largest_free_block, 1 * MiB));
  fx_free_idle(d); /* active before, segment end after: no merge */
  cr_assert(eq(u64, fx_stats().blocks, 3));
  cr_assert(eq(u64, fx_stats().free_blocks, 2));
  fx_free_idle(c); /* free on both sides: all one block again */
  cr_assert(eq(u64, fx_stats().blocks, 1));
  cr_assert(eq(u64, fx_stats().largest_free_block, 2 * MiB));
  fx_check();
  uintptr_t e = fx_alloc(512 * KiB), f = fx_alloc(512 * KiB);
  (void)f;
  fx_free_idle(e);
  uintptr_t g = fx_alloc(256 * KiB);
  cr_assert(eq(u64, g, a), "best fit reuses the lowest free block");
  fx_free_idle(g); /* merges with the 256 KiB rest before f: backward merge */
  cr_assert(eq(u64, fx_stats().blocks, 3));
  fx_close();
}

Test(rules, pending_blocks_do_not_coalesce_until_ready) {
  fx_open(1 * GiB);
  F.sim.barrier_enabled = false;
  uintptr_t a = fx_alloc(1 * MiB), b = fx_alloc(1 * MiB);
  (void)b;
  fx_free(a, 0);
  cr_assert(eq(u64, fx_stats().blocks, 2));
  cr_assert(eq(u64, fx_stats().largest_free_block, 0));
  fx_sync_now();
  cr_assert(eq(u64, fx_stats().largest_free_block, 1 * MiB));
  fx_free_idle(b);
  cr_assert(eq(u64, fx_stats().blocks, 1));
  fx_close();
}

Test(rules, best_fit_smallest_then_lowest_address) {
  fx_open(1 * GiB);
  uintptr_t a = fx_alloc(1024), b = fx_alloc(512), c = fx_alloc(2048), d = fx_alloc(512), e = fx_alloc(2048),
            f = fx_alloc(512);
  (void)b, (void)d, (void)f;
  fx_free_idle(e);
  fx_free_idle(c);
  fx_free_idle(a);
  cr_assert(eq(u64, fx_alloc(1536), c), "2 KiB at c beats 2 KiB at e and the big rest");
  cr_assert(eq(u64, fx_alloc(1536), e));
  cr_assert(eq(u64, fx_alloc(1024), a));
  fx_close();
}

Test(rules, oversize_blocks_are_never_split) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.max_split = 32 * MiB;
  fx_open_cfg(&cfg, 1 * GiB);
  uintptr_t big = fx_alloc(40 * MiB);
  fx_free_idle(big);
  /* A request under max_split may not take an oversize block. */
  uintptr_t small = fx_alloc(30 * MiB);
  cr_assert(ne(u64, small, big));
  cr_assert(eq(u64, fx_stats().misses, 2));
  /* An oversize request takes it whole when it wastes under 20 MiB. */
  uintptr_t p = fx_alloc(33 * MiB);
  cr_assert(eq(u64, p, big));
  cr_assert(eq(sz, cp_block_size(F.pool, p), 40 * MiB));
  fx_free_idle(p);
  fx_free_idle(small);
  /* 60 MiB block, 36 MiB request: 24 MiB waste, refused. */
  cp_empty_cache(F.pool);
  uintptr_t sixty = fx_alloc(60 * MiB);
  fx_free_idle(sixty);
  uintptr_t q = fx_alloc(36 * MiB);
  cr_assert(ne(u64, q, sixty));
  cr_assert(eq(sz, cp_block_size(F.pool, q), 36 * MiB));
  fx_close();
}

Test(rules, errors_leave_the_pool_untouched) {
  fx_open(1 * GiB);
  uintptr_t p = fx_alloc(4096), out = 0;
  cudapool_stats_t before = fx_stats();
  cr_assert(eq(int, cp_alloc(F.pool, 0, 0, 0, &out), EINVAL));
  cr_assert(eq(int, cp_free(F.pool, p + 512, 0, 0), EINVAL), "interior pointer");
  cr_assert(eq(int, cp_free(F.pool, p + 8192, 0, 0), EINVAL), "free space inside a segment");
  cr_assert(eq(int, cp_free(F.pool, 0x1234, 0, 0), ENOENT), "foreign pointer");
  cudapool_stats_t after = fx_stats();
  cr_assert(eq(int, memcmp(&before, &after, sizeof before), 0));
  fx_free(p, 0);
  cr_assert(eq(int, cp_free(F.pool, p, 0, 0), EINVAL), "double free");
  cr_assert(eq(int, cp_alloc(F.pool, SIZE_MAX, 0, 0, &out), ENOMEM));
  cr_assert(eq(u64, fx_stats().num_ooms, 1));
  fx_close();
}

Test(rules, drop_forgets_without_calling_the_backend) {
  fx_open(1 * GiB);
  fx_alloc(4096);
  fx_alloc(64 * MiB);
  cp_pool_drop(F.pool);
  cr_assert(eq(u64, F.sim.frees, 0));
  cr_assert(eq(sz, cp_sim_live_count(&F.sim), 2));
  cp_sim_fini(&F.sim);
}
