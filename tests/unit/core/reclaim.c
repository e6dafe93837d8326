/* reclaim.c: the background reclaimer's pass (core/reclaim.c, cp_reclaim)
 * and its wake-up (backend.h, `freed`), on the simulated device: exact
 * counts after exact sequences.
 *   - the wake-up fires on a pool's transition from nothing freed waiting
 *     to something (pool free, a cache's first freed block, the first
 *     deferred free), not on every free, never on an allocation;
 *   - a pass makes pending blocks ready (barrier; else fences, never a host
 *     wait) and trims to max_cached; busy while something is left;
 *   - the idle release gives back a whole free segment unused for idle_ns
 *     (its stamp cleared by an allocation from it), says when the next is
 *     due, and nothing is given back when release_begin refuses. */
#include "core_fixture.h"

static int freed_pending, freed_ready;

static void count_freed(void *ctx, int device, bool pending) {
  (void)ctx, (void)device;
  if (pending)
    freed_pending++;
  else
    freed_ready++;
}

static void open_hooked(cp_config_t *cfg, size_t capacity) {
  freed_pending = freed_ready = 0;
  cp_sim_init(&F.sim, capacity);
  F.be = cp_sim_backend(&F.sim);
  F.be.freed = count_freed;
  F.cfg = *cfg;
  cr_assert(eq(int, cp_pool_create(&F.pool, 0, &F.cfg, &F.be), 0));
}

static void open_default(size_t capacity) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  open_hooked(&cfg, capacity);
}

static cp_reclaim_result_t pass(uint64_t now, uint64_t idle) {
  cp_reclaim_args_t a = {.now_ns = now, .idle_ns = idle};
  cp_reclaim_result_t r;
  cp_reclaim(F.pool, &a, &r);
  return r;
}

Test(reclaim_wakeup, only_when_something_freed_starts_to_wait) {
  open_default(1 * GiB);
  uintptr_t a = fx_alloc(4 * MiB), b = fx_alloc(4 * MiB), c = fx_alloc(4 * MiB);
  cr_assert(eq(int, freed_pending + freed_ready, 0), "allocations never wake it");
  fx_free(a, 0);
  fx_free(b, 0);
  cr_assert(eq(int, freed_pending, 1), "the first pending block only");
  fx_sync_now();
  fx_free(c, 0);
  cr_assert(eq(int, freed_pending, 2), "nothing waited again before c");
  fx_sync_now();
  /* Through a thread cache: the first keyed free into it, then none. */
  uintptr_t p[4];
  for (int i = 0; i < 4; i++) cr_assert(eq(int, cp_tcache_alloc(F.pool, 1 * MiB, 0, 9, &p[i]), 0));
  for (int i = 0; i < 4; i++) cr_assert(eq(int, cp_tcache_free(F.pool, p[i], 9, 0), 0));
  cr_assert(eq(int, freed_pending, 3), "the cache's first free");
  /* A cached cycle (alloc and free from the cache) wakes nothing more. */
  uintptr_t q;
  cr_assert(eq(int, cp_tcache_alloc(F.pool, 1 * MiB, 0, 9, &q), 0));
  cr_assert(eq(int, cp_tcache_free(F.pool, q, 9, 0), 0));
  cr_assert(eq(int, freed_pending, 3));
  /* A pass flushes the cache (the pool's list was empty: one more) and
   * makes everything ready; the next free into the cache is a first again. */
  cr_assert(not(pass(1, 0).busy));
  cr_assert(eq(int, freed_pending, 4));
  cr_assert(eq(i64, fx_stats().pending_bytes.current, 0));
  cr_assert(eq(int, cp_tcache_alloc(F.pool, 1 * MiB, 0, 9, &q), 0));
  cr_assert(eq(int, cp_tcache_free(F.pool, q, 9, 0), 0));
  cr_assert(eq(int, freed_pending, 5));
  /* Without a key a lent block goes onto the deferred stack: its first wakes. */
  fx_sync_now();
  cr_assert(eq(int, cp_tcache_alloc(F.pool, 1 * MiB, 0, 0, &q), 0));
  freed_pending = 0;
  cr_assert(eq(int, cp_tcache_free(F.pool, q, 0, 0), 0));
  cr_assert(eq(int, freed_pending, 1), "the first deferred free");
  /* Freed straight to ready (a synchronised free): said as such. */
  uintptr_t r = fx_alloc(4 * MiB);
  fx_free_idle(r);
  cr_assert(eq(int, freed_ready, 1));
  fx_sync_now();
  fx_close();
}

Test(reclaim_pass, makes_frees_ready_and_holds_max_cached) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.max_cached = 100 * MiB;
  open_hooked(&cfg, 2 * GiB);
  uintptr_t p[10];
  for (int i = 0; i < 10; i++) p[i] = fx_alloc(100 * MiB);
  for (int i = 0; i < 10; i++) fx_free(p[i], 0);
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.reserved_bytes.current, (int64_t)(1000 * MiB)), "pending: the cap cannot hold yet");
  cr_assert(eq(i64, s.pending_bytes.current, (int64_t)(1000 * MiB)));
  cr_assert(not(pass(1, 0).busy));
  s = fx_stats();
  cr_assert(eq(i64, s.pending_bytes.current, 0));
  cr_assert(eq(i64, s.reserved_bytes.current, (int64_t)(100 * MiB)));
  cr_assert(eq(u64, s.num_device_free, 9));
  cr_assert(eq(u64, s.num_barriers, 1));
  cr_assert(eq(u64, s.num_reclaims, 1));
  cr_assert(eq(u64, s.num_fences_waited, 0));
  fx_close();
}

Test(reclaim_pass, without_a_barrier_polls_fences_and_stays_busy_until_done) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.max_cached = 0;
  open_hooked(&cfg, 1 * GiB);
  F.sim.barrier_enabled = false;
  uintptr_t a = fx_alloc(20 * MiB), b = fx_alloc(20 * MiB);
  fx_free(a, 0);
  fx_free(b, 0);
  cr_assert(pass(1, 0).busy, "a fence recorded, not yet complete");
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.pending_bytes.current, (int64_t)(40 * MiB)));
  cr_assert(eq(u64, s.num_fences_recorded, 1));
  cr_assert(eq(u64, s.num_fences_waited, 0), "never a host wait");
  cp_sim_complete_fences(&F.sim, 1);
  cr_assert(not(pass(2, 0).busy));
  s = fx_stats();
  cr_assert(eq(i64, s.pending_bytes.current, 0));
  cr_assert(eq(i64, s.reserved_bytes.current, 0), "max_cached 0: everything back");
  cr_assert(eq(u64, s.num_reclaims, 2));
  fx_close();
}

Test(reclaim_idle, a_segment_unused_for_idle_goes_back) {
  open_default(1 * GiB);
  uintptr_t a = fx_alloc(20 * MiB), b = fx_alloc(20 * MiB);
  fx_free_idle(a);
  cp_reclaim_result_t r = pass(1000, 500);
  cr_assert(not(r.busy));
  cr_assert(eq(u64, r.due_ns, 1500), "stamped by the first pass that saw it free");
  cr_assert(eq(i64, fx_stats().segments.current, 2));
  r = pass(1499, 500);
  cr_assert(eq(u64, r.due_ns, 1500));
  cr_assert(eq(i64, fx_stats().segments.current, 2));
  r = pass(1500, 500);
  cr_assert(eq(u64, r.due_ns, 0), "nothing else is free");
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.segments.current, 1), "b's stays: in use");
  cr_assert(eq(u64, s.num_idle_releases, 1));
  cr_assert(eq(i64, s.reserved_bytes.current, (int64_t)(20 * MiB)));
  /* Used again after its stamp: the idle time starts again. */
  fx_free_idle(b);
  pass(2000, 500);
  uintptr_t again = fx_alloc(20 * MiB);
  cr_assert(eq(u64, again, b));
  fx_free_idle(again);
  r = pass(2600, 500);
  cr_assert(eq(i64, fx_stats().segments.current, 1), "used at 2000-2600: not idle since 2000");
  cr_assert(eq(u64, r.due_ns, 3100));
  fx_close();
}

static bool refuse(void *ctx) {
  (*(int *)ctx)++;
  return false;
}

Test(reclaim_idle, nothing_goes_back_while_release_begin_refuses) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.max_cached = 0;
  open_hooked(&cfg, 1 * GiB);
  uintptr_t a = fx_alloc(20 * MiB);
  fx_free(a, 0);
  int asked = 0;
  cp_reclaim_args_t args = {.now_ns = 1, .idle_ns = 1, .release_begin = refuse, .ctx = &asked};
  cp_reclaim_result_t r;
  cp_reclaim(F.pool, &args, &r);
  cr_assert(r.busy, "put off: a later pass tries again");
  cr_assert(eq(int, asked, 1));
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.pending_bytes.current, 0), "made ready all the same");
  cr_assert(eq(i64, s.reserved_bytes.current, (int64_t)(20 * MiB)));
  cr_assert(not(pass(2, 0).busy));
  cr_assert(eq(i64, fx_stats().reserved_bytes.current, 0));
  fx_close();
}
