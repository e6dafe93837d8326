/* tcache.c: the per-thread thread cache (core/tcache.c) on the simulated
 * device: exact stats against the pool alone, every flush trigger, blocks
 * freed or taken back by other threads, the reuse rule kept. */
#include <pthread.h>
#include <sched.h>

#include "pool_internal.h" /* cp_tcaches_held; first: it sets uthash's hash function */
#include "core_fixture.h"

#define CHURN_CHECK(cond, ...)          \
  do {                                  \
    if (!(cond)) cr_fatal(__VA_ARGS__); \
  } while (0)
#include "core_churn.h"

static uintptr_t fr_alloc(size_t size, uint64_t key) {
  uintptr_t p = 0;
  int rc = cp_tcache_alloc(F.pool, size, CP_STREAM_DEVICE, key, &p);
  cr_assert(eq(int, rc, 0), "cp_tcache_alloc(%zu) failed with %d", size, rc);
  return p;
}

static void fr_free(uintptr_t p, uint64_t key) { cr_assert(eq(int, cp_tcache_free(F.pool, p, key, 0), 0)); }

static size_t held(void) { return cp_tcaches_held(F.pool); }

/* A pool whose device neither issues barriers nor completes fences: a
 * block freed without a key (or for another) is never reused. */
static void open_without_barriers_or_fences(void) {
  fx_open(GiB);
  F.sim.barrier_enabled = false;
  F.sim.fence_enabled = false;
}

/* One sequence through cp_alloc/cp_free or through the thread cache, with
 * the thread's key or without one (a program that created streams). */
static cudapool_stats_t run_sequence(bool tcache, uint64_t key) {
  fx_open(GiB);
  uintptr_t p[6];
#define A(i, size) p[i] = tcache ? fr_alloc(size, key) : fx_alloc_on(size, CP_STREAM_DEVICE, key)
#define R(i) (tcache ? fr_free(p[i], key) : fx_free(p[i], key))
  A(0, 4096); /* two frees in a row: the pending and cached peaks come from the cache's figures */
  A(1, 8192);
  R(0);
  R(1);
  A(0, 4096);
  R(0);
  A(0, 4096); /* the same block again, by key */
  A(1, 1 << 20);
  A(2, 3 << 20);
  R(2);
  A(3, 3 << 20);
  R(1);
  A(4, 5000);
  R(0);
  R(3);
  A(5, 12 << 20);
  R(4);
  R(5);
#undef A
#undef R
  cudapool_stats_t s = fx_stats();
  fx_close();
  return s;
}

static void expect_same_stats(const cudapool_stats_t *tcache, const cudapool_stats_t *plain) {
#define SAME_GAUGE(name, desc)                                         \
  cr_expect(eq(i64, tcache->name.current, plain->name.current), #name); \
  cr_expect(eq(i64, tcache->name.peak, plain->name.peak), #name " peak");
  CUDAPOOL_GAUGES(SAME_GAUGE)
#undef SAME_GAUGE
#define SAME_COUNTER(name, desc) cr_expect(eq(u64, tcache->name, plain->name), #name);
  CUDAPOOL_COUNTERS(SAME_COUNTER)
#undef SAME_COUNTER
  cr_expect(eq(u64, tcache->blocks, plain->blocks));
  cr_expect(eq(u64, tcache->free_blocks, plain->free_blocks));
}

Test(tcache, stats_equal_the_pool_alone_after_an_exact_sequence) {
  cudapool_stats_t plain = run_sequence(false, 1), tcache = run_sequence(true, 1);
  expect_same_stats(&tcache, &plain);
  cr_assert(eq(u64, tcache.num_immediate_reuse, 4));
}

/* Peaks reached only inside the cache (two frees into it, both taken back
 * before anything reads the stats) are the pool's peaks too. */
static cudapool_stats_t two_freed_and_taken_back(bool tcache) {
  fx_open(GiB);
  uintptr_t a = tcache ? fr_alloc(4096, 1) : fx_alloc_on(4096, CP_STREAM_DEVICE, 1);
  uintptr_t b = tcache ? fr_alloc(8192, 1) : fx_alloc_on(8192, CP_STREAM_DEVICE, 1);
  for (int round = 0; round < 2; round++) {
    if (tcache) {
      fr_free(a, 1);
      fr_free(b, 1);
      cr_assert(eq(u64, fr_alloc(4096, 1), a));
      cr_assert(eq(u64, fr_alloc(8192, 1), b));
    } else {
      fx_free(a, 1);
      fx_free(b, 1);
      cr_assert(eq(u64, fx_alloc_on(4096, CP_STREAM_DEVICE, 1), a));
      cr_assert(eq(u64, fx_alloc_on(8192, CP_STREAM_DEVICE, 1), b));
    }
  }
  cudapool_stats_t s = fx_stats();
  fx_close();
  return s;
}

Test(tcache, peaks_reached_inside_the_cache_are_the_pools) {
  cudapool_stats_t plain = two_freed_and_taken_back(false), tcache = two_freed_and_taken_back(true);
  expect_same_stats(&tcache, &plain);
  cr_assert(eq(i64, tcache.pending_bytes.peak, 4096 + 8192));
  cr_assert(eq(i64, tcache.cached_bytes.peak, 2 << 20), "the small segment, all of it cached at once");
  cr_assert(eq(i64, tcache.allocated_bytes.peak, 4096 + 8192));
  cr_assert(eq(i64, tcache.allocated_blocks.peak, 2));
  cr_assert(eq(u64, tcache.num_immediate_reuse, 4));
}

Test(tcache, stats_equal_the_pool_alone_after_an_exact_sequence_without_a_key) {
  cudapool_stats_t plain = run_sequence(false, 0), tcache = run_sequence(true, 0);
  expect_same_stats(&tcache, &plain);
  cr_assert(eq(u64, tcache.num_free, 9));
  cr_assert(eq(u64, tcache.num_immediate_reuse, 0));
}

Test(tcache, a_keyed_pair_is_served_without_the_pool) {
  fx_open(GiB);
  uintptr_t p = fr_alloc(4096, 1);
  fr_free(p, 1);
  cr_assert(eq(sz, held(), 1));
  cr_assert(eq(u64, fr_alloc(4000, 1), p), "the thread's own freed block, whole");
  cr_assert(eq(sz, held(), 0));
  fr_free(p, 1);
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_alloc, 2));
  cr_assert(eq(u64, s.num_free, 2));
  cr_assert(eq(u64, s.hits, 1));
  cr_assert(eq(u64, s.misses, 1));
  cr_assert(eq(u64, s.num_immediate_reuse, 1));
  cr_assert(eq(i64, s.allocated_bytes.current, 0));
  cr_assert(eq(i64, s.allocated_bytes.peak, 4096));
  cr_assert(eq(i64, s.requested_bytes.peak, 4096));
  cr_assert(eq(i64, s.pending_bytes.current, 4096));
  cr_assert(eq(u64, F.sim.barriers, 0));
  fx_close();
}

Test(tcache, another_key_gets_the_block_only_after_a_barrier) {
  open_without_barriers_or_fences();
  uintptr_t p = fr_alloc(2 << 20, 1); /* fills a 2 MiB small segment */
  fr_free(p, 1);
  uintptr_t q = fr_alloc(1 << 20, 2);
  cr_assert(not(eq(u64, q, p)), "key 2 may not take key 1's block without a barrier");
  fr_free(q, 2);
  F.sim.barrier_enabled = true;
  uintptr_t r = fr_alloc(2 << 20, 3);
  cr_assert(eq(u64, r, p), "after a barrier anyone may");
  cr_assert(eq(u64, F.sim.barriers, 1));
  fr_free(r, 3);
  fx_close();
}

Test(tcache, a_larger_block_is_reused_only_whole) {
  fx_open(GiB);
  uintptr_t p = fr_alloc(64 << 10, 1);
  fr_free(p, 1);
  uintptr_t q = fr_alloc(4096, 1); /* the pool would split the 64 KiB block: not from the cache */
  cr_assert(eq(sz, held(), 0), "the thread's next pool allocation flushed its cache");
  cr_assert(eq(u64, q, p), "the pool split the same block for its key");
  cr_assert(eq(sz, cp_block_size(F.pool, q), 4096));
  fr_free(q, 1);
  fx_close();
}

/* With no waste allowed on blocks at or over max_split, the block made for
 * a 40 MiB request (a segment of its own) may not serve 40 MiB again: the
 * cache, which hands a thread back the size it got a block for without
 * asking the rules, must know that from when it lent the block. */
Test(tcache, a_block_the_rules_would_not_hand_out_again_is_not_reused_for_its_size) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.max_split = 32 * MiB;
  cfg.oversize_waste = 0;
  fx_open_cfg(&cfg, GiB);
  uintptr_t p = fr_alloc(40 * MiB, 1);
  fr_free(p, 1);
  cr_assert(eq(sz, held(), 1));
  uintptr_t q = fr_alloc(40 * MiB, 1);
  cr_assert(not(eq(u64, q, p)), "no rule lets the pool hand the block out again for 40 MiB");
  cr_assert(eq(u64, fx_stats().num_immediate_reuse, 0));
  fr_free(q, 1);
  fx_close();
}

/* ---- every flush trigger ---------------------------------------------------------- */

static uintptr_t one_held(void) {
  uintptr_t p = fr_alloc(4096, 1);
  fr_free(p, 1);
  cr_assert(eq(sz, held(), 1));
  return p;
}

Test(tcache, flushed_by_empty_cache) {
  fx_open(GiB);
  one_held();
  cr_assert(eq(sz, cp_empty_cache(F.pool), 2 << 20), "the whole segment went back");
  cr_assert(eq(sz, held(), 0));
  fx_close();
}

Test(tcache, flushed_by_trim) {
  fx_open(GiB);
  one_held();
  cp_trim(F.pool, 0);
  cr_assert(eq(sz, held(), 0));
  fx_close();
}

Test(tcache, flushed_by_a_limit_change) {
  fx_open(GiB);
  one_held();
  cp_set_limit(F.pool, 64 << 20);
  cr_assert(eq(sz, held(), 0));
  fx_close();
}

Test(tcache, flushed_by_a_sync_mark_so_the_sync_covers_it) {
  fx_open(GiB);
  one_held();
  fx_sync_now();
  cr_assert(eq(sz, held(), 0));
  cr_assert(eq(i64, fx_stats().pending_bytes.current, 0), "the sync made it ready");
  fx_close();
}

Test(tcache, flushed_by_a_stats_read_and_a_check) {
  fx_open(GiB);
  one_held();
  fx_stats();
  cr_assert(eq(sz, held(), 0));
  one_held();
  fx_check();
  cr_assert(eq(sz, held(), 0));
  fx_close();
}

Test(tcache, flushed_by_an_observer_which_turns_it_off) {
  fx_open(GiB);
  one_held();
  cp_pool_set_observer(F.pool, NULL, NULL);
  cr_assert(eq(sz, held(), 0));
  fx_close();
}

static void observe_nothing(void *ctx, cp_observed_t what, uintptr_t addr, size_t size, uint64_t stream) {
  (void)what, (void)addr, (void)size, (void)stream;
  (*(int *)ctx)++;
}

Test(tcache, an_observer_sees_every_event) {
  fx_open(GiB);
  int seen = 0;
  cp_pool_set_observer(F.pool, observe_nothing, &seen);
  uintptr_t p = fr_alloc(4096, 1);
  fr_free(p, 1);
  cr_assert(eq(sz, held(), 0), "nothing is cached while observed");
  fr_free(fr_alloc(4096, 1), 1);
  cr_assert(eq(int, seen, 4));
  fx_close();
}

Test(tcache, flushed_when_the_budget_is_spent) {
  fx_open(GiB);
  uintptr_t p[40];
  for (int i = 0; i < 40; i++) p[i] = fr_alloc(4096, 1);
  for (int i = 0; i < 33; i++) fr_free(p[i], 1);
  cr_assert(eq(sz, held(), 17), "32 held, half went back, then one more");
  for (int i = 33; i < 40; i++) fr_free(p[i], 1);
  fx_close();
}

/* arg[0]: the key; arg[1]: the block this thread allocated and freed. */
static void *free_one_and_exit(void *arg) {
  uintptr_t *a = arg;
  a[1] = fr_alloc(4096, a[0]);
  fr_free(a[1], a[0]);
  return NULL;
}

/* Another thread allocates and frees one block with `key`, then leaves. */
static uintptr_t another_thread_frees_one_and_leaves(uint64_t key) {
  uintptr_t arg[2] = {key, 0};
  pthread_t t;
  pthread_create(&t, NULL, free_one_and_exit, arg);
  pthread_join(t, NULL);
  return arg[1];
}

Test(tcache, flushed_on_thread_exit) {
  fx_open(GiB);
  another_thread_frees_one_and_leaves(7);
  cr_assert(eq(sz, held(), 0));
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_free, 1));
  cr_assert(eq(i64, s.pending_bytes.current, 4096), "pending for its key, as the pool would keep it");
  fx_close();
}

static void *allocate_three_and_exit(void *arg) {
  uintptr_t *p = arg;
  for (int i = 0; i < 3; i++) p[i] = fr_alloc(4096 << i, 7); /* the newest is the cache's hot block */
  return NULL;
}

/* Blocks a thread left live when it ended (one its cache's hot block, two in
 * its address table) are the pool's alone: another thread frees each once
 * (under ASan, a block still naming the freed cache would be a use after
 * free), and a second free fails. */
Test(tcache, blocks_a_thread_left_live_are_freed_by_another) {
  fx_open(GiB);
  uintptr_t p[3];
  pthread_t t;
  pthread_create(&t, NULL, allocate_three_and_exit, p);
  pthread_join(t, NULL);
  for (int i = 0; i < 3; i++) cr_assert(eq(int, cp_tcache_free(F.pool, p[i], 9, 0), 0), "block %d", i);
  cr_assert(eq(int, cp_tcache_free(F.pool, p[2], 9, 0), EINVAL), "a second free fails");
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_free, 3));
  cr_assert(eq(i64, s.allocated_bytes.current, 0));
  cr_assert(eq(i64, s.allocated_blocks.current, 0));
  fx_close();
}

static void *hold_one(void *arg) {
  uintptr_t *p = arg;
  p[0] = fr_alloc(2 << 20, 7); /* a whole small segment */
  fr_free(p[0], 7);
  while (!__atomic_load_n(&p[1], __ATOMIC_ACQUIRE)) sched_yield(); /* stay alive until told */
  return NULL;
}

Test(tcache, flushed_before_the_pool_grows_and_before_running_out) {
  fx_open(2 << 20); /* room for one small segment */
  uintptr_t shared[2] = {0, 0};
  pthread_t t;
  pthread_create(&t, NULL, hold_one, shared);
  while (!cp_tcaches_held(F.pool)) sched_yield();
  /* Another key needs memory: the other thread's block goes back, a barrier makes it ready. */
  uintptr_t q = fr_alloc(2 << 20, 1);
  cr_assert(eq(u64, q, __atomic_load_n(&shared[0], __ATOMIC_ACQUIRE)));
  cr_assert(eq(sz, held(), 0));
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_ooms, 0));
  cr_assert(eq(u64, s.num_device_alloc, 1));
  __atomic_store_n(&shared[1], 1, __ATOMIC_RELEASE);
  pthread_join(t, NULL);
  fr_free(q, 1);
  fx_close();
}

/* ---- frees without a key: deferred to the pool ------------------------------------- */

static void *free_it(void *arg); /* another thread frees arg[0] with key 9: arg[1] = the result */

/* Keyed fast paths, then a free without a key: the pool counts the frees
 * in the program's order, so every peak is the pool's alone. */
static cudapool_stats_t keyed_then_unkeyed(bool tcache, bool reset_peak) {
  fx_open(GiB);
#define A(size, key) (tcache ? fr_alloc(size, key) : fx_alloc_on(size, CP_STREAM_DEVICE, key))
#define R(p, key) (tcache ? fr_free(p, key) : fx_free(p, key))
  uintptr_t u = A(reset_peak ? 4096 : 512, reset_peak ? 0 : 7), v = A(512, 7);
  R(v, 7);
  if (reset_peak) cp_reset_peak(F.pool);
  v = A(512, 7); /* a fast hit */
  R(u, 0);       /* deferred */
#undef A
#undef R
  cudapool_stats_t s = fx_stats();
  fx_close();
  return s;
}

Test(tcache, stats_equal_the_pool_alone_when_keyed_and_unkeyed_frees_mix) {
  for (int reset = 0; reset < 2; reset++) {
    cudapool_stats_t plain = keyed_then_unkeyed(false, reset), tcache = keyed_then_unkeyed(true, reset);
    expect_same_stats(&tcache, &plain);
  }
}

Test(tcache, frees_without_a_key_keep_to_max_cached) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.max_cached = 0;
  fx_open_cfg(&cfg, GiB);
  uintptr_t a = fr_alloc(12 * MiB, 0), b = fr_alloc(12 * MiB, 0);
  fr_free(a, 0);
  fr_free(b, 0);
  for (int i = 0; i < 100; i++) fr_free(fr_alloc(12 * MiB, 0), 0);
  cr_assert(eq(sz, F.sim.used, 12 * MiB), "the device's view, not a stats read (which would drain)");
  fx_close();
}

Test(tcache, a_pool_destroyed_with_deferred_frees_waits_before_it_unmaps) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.expandable = true;
  cp_sim_init(&F.sim, GiB);
  F.sim.vmm_page = 2 * MiB;
  F.be = cp_sim_backend(&F.sim);
  cr_assert(eq(int, cp_pool_create(&F.pool, 0, &cfg, &F.be), 0));
  fr_free(fr_alloc(4 * MiB, 0), 0);
  cp_pool_destroy(F.pool); /* no flush before it */
  F.pool = NULL;
  cr_assert(eq(u64, F.sim.fences_recorded, 1), "the free is waited for like any pending one");
  cr_assert(eq(u64, F.sim.fence_waits, 1));
  cr_assert(eq(sz, F.sim.used, 0));
  cp_sim_fini(&F.sim);
}

Test(tcache, a_free_without_a_key_waits_for_a_barrier) {
  open_without_barriers_or_fences();
  uintptr_t p = fr_alloc(20 << 20, 0); /* fills its segment */
  fr_free(p, 0);
  cp_block_t *deferred = atomic_load(&F.pool->deferred);
  cr_assert(ne(ptr, deferred, NULL), "handed to the pool without its lock");
  cr_assert(eq(u64, deferred->addr, p));
  cr_assert(eq(sz, held(), 0), "never held for reuse by the cache");
  uintptr_t q = fr_alloc(20 << 20, 0);
  cr_assert(eq(ptr, atomic_load(&F.pool->deferred), NULL), "taken by the pool's next allocation");
  cr_assert(not(eq(u64, q, p)), "no barrier, no reuse: a new segment");
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.pending_bytes.current, 20 << 20));
  cr_assert(eq(u64, s.num_free, 1));
  cr_assert(eq(u64, s.num_device_alloc, 2));
  F.sim.barrier_enabled = true;
  fr_free(q, 0);
  cr_assert(eq(u64, fr_alloc(20 << 20, 0), p), "after a barrier, the lowest exact fit");
  s = fx_stats();
  cr_assert(eq(u64, s.num_barriers, 1));
  cr_assert(eq(u64, s.num_device_alloc, 2));
  fx_close();
}

Test(tcache, a_block_lent_under_a_key_and_freed_without_one_is_nobodys) {
  open_without_barriers_or_fences();
  uintptr_t p = fr_alloc(4096, 1);
  fr_free(p, 0); /* the program created a stream meanwhile */
  cr_assert(not(eq(u64, fr_alloc(4096, 1), p)), "not even for the key it was lent under");
  fx_close();
}

Test(tcache, a_second_free_of_a_deferred_block_fails) {
  fx_open(GiB);
  F.sim.barrier_enabled = false;
  uintptr_t p = fr_alloc(4096, 0);
  fr_free(p, 0);
  cr_assert(eq(int, cp_tcache_free(F.pool, p, 0, 0), EINVAL), "the same thread's");
  cr_assert(eq(sz, cp_block_size(F.pool, p), 0), "no live block");
  uintptr_t q = fr_alloc(4096, 0);
  fr_free(q, 0);
  uintptr_t arg[2] = {q, 99};
  pthread_t t;
  pthread_create(&t, NULL, free_it, arg);
  pthread_join(t, NULL);
  cr_assert(eq(u64, arg[1], EINVAL), "another thread's, before the pool took it");
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_free, 2));
  cr_assert(eq(i64, s.pending_bytes.current, 8192));
  fx_close();
}

static void *free_it_without_a_key(void *arg) {
  uintptr_t *p = arg;
  p[1] = (uintptr_t)cp_tcache_free(F.pool, p[0], 0, 0);
  return NULL;
}

/* A block lent to this thread (key `key`) freed by another thread (through
 * `freer`): the free succeeds, the owner's second free fails. */
static void another_thread_frees_a_lent_block(uint64_t key, void *(*freer)(void *)) {
  fx_open(GiB);
  uintptr_t arg[2] = {fr_alloc(4096, key), 99};
  pthread_t t;
  pthread_create(&t, NULL, freer, arg);
  pthread_join(t, NULL);
  cr_assert(eq(u64, arg[1], 0));
  cr_assert(eq(int, cp_tcache_free(F.pool, arg[0], key, 0), EINVAL), "the owner's second free fails");
  cr_assert(eq(sz, held(), 0));
  cr_assert(eq(u64, fx_stats().num_free, 1));
  fx_close();
}

Test(tcache, another_thread_frees_a_block_lent_without_a_key) {
  another_thread_frees_a_lent_block(0, free_it_without_a_key);
}

Test(tcache, a_thread_leaving_after_a_free_without_a_key) {
  fx_open(GiB);
  uintptr_t p = another_thread_frees_one_and_leaves(0);
  cudapool_stats_t s = fx_stats(); /* its cache is gone; the pool holds the block */
  cr_assert(eq(u64, s.num_free, 1));
  cr_assert(eq(i64, s.pending_bytes.current, 4096));
  cr_assert(eq(i64, s.allocated_bytes.current, 0));
  cr_assert(eq(int, cp_tcache_free(F.pool, p, 0, 0), EINVAL));
  fx_close();
}

/* ---- other threads' frees ----------------------------------------------------------- */

static void *free_it(void *arg) {
  uintptr_t *p = arg;
  p[1] = (uintptr_t)cp_tcache_free(F.pool, p[0], 9, 0);
  return NULL;
}

Test(tcache, another_thread_frees_a_lent_block_and_a_second_free_fails) {
  another_thread_frees_a_lent_block(1, free_it);
}

Test(tcache, a_block_held_freed_is_no_live_block) {
  fx_open(GiB);
  uintptr_t p = one_held();
  cr_assert(eq(sz, cp_block_size(F.pool, p), 0));
  cp_block_info_t info;
  cr_assert(eq(int, cp_block_find(F.pool, p, &info), EINVAL), "inside a segment, no live block");
  cr_assert(eq(int, cp_record_stream(F.pool, p, 5), ENOENT));
  uintptr_t arg[2] = {p, 99};
  pthread_t t;
  pthread_create(&t, NULL, free_it, arg);
  pthread_join(t, NULL);
  cr_assert(eq(u64, arg[1], EINVAL), "another thread's second free fails");
  cr_assert(eq(int, cp_tcache_free(F.pool, p + 512, 1, 0), EINVAL), "an interior pointer fails");
  cr_assert(eq(int, cp_tcache_free(F.pool, 0x10, 1, 0), ENOENT), "a foreign pointer is not the pool's");
  fx_close();
}

Test(tcache, a_block_used_on_another_stream_is_never_cached) {
  open_without_barriers_or_fences();
  uintptr_t p = fr_alloc(4096, 1);
  cr_assert(eq(int, cp_record_stream(F.pool, p, 5), 0));
  fr_free(p, 1);
  cr_assert(eq(sz, held(), 0));
  cr_assert(not(eq(u64, fr_alloc(4096, 1), p)), "not even for its own key");
  fx_close();
}

Test(tcache, stream_and_key_must_match) {
  open_without_barriers_or_fences();
  uintptr_t p = one_held();
  uintptr_t q = 0;
  cr_assert(eq(int, cp_tcache_alloc(F.pool, 4096, 3, 1, &q), 0));
  cr_assert(not(eq(u64, q, p)), "another stream waits for a barrier");
  uintptr_t r = fr_alloc(4096, 0);
  cr_assert(not(eq(u64, r, p)), "no key: never the keyed block");
  fx_close();
}

/* ---- random sequences with threads ---------------------------------------------------- */

Test(tcache, eight_threads_through_their_caches_never_share_a_granule, .timeout = 300) {
  cudapool_stats_t s = churn_checked_stats(churn_run(true, false));
  cr_assert(gt(u64, s.num_immediate_reuse, 0));
  churn_close();
}

Test(tcache, eight_threads_without_keys_never_share_a_granule, .timeout = 300) {
  cudapool_stats_t s = churn_checked_stats(churn_run(true, true));
  cr_assert(eq(u64, s.num_immediate_reuse, 0));
  cr_assert(gt(u64, s.num_barriers, 0));
  churn_close();
}

/* Another thread's next pool allocation: every cache's freed blocks go back
 * first, so the pool decides as it would without caches: here, with a
 * barrier worth asking for once one block is pending, it serves the other
 * thread from the 4 MiB block this thread freed into its cache (after a
 * barrier, the key being another) rather than splitting the ready 8 MiB one. */
static void *alloc_4mib_key2(void *arg) {
  uintptr_t *p = arg;
  p[1] = (uintptr_t)(p[2] ? cp_tcache_alloc(F.pool, 4 << 20, CP_STREAM_DEVICE, 2, &p[0])
                          : cp_alloc(F.pool, 4 << 20, CP_STREAM_DEVICE, 2, &p[0]));
  return NULL;
}

static uintptr_t other_thread_after_a_cached_free(bool tcache, uintptr_t *freed) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.split_barrier_pending = 1;
  cfg.split_barrier_share = 0;
  fx_open_cfg(&cfg, GiB);
  uintptr_t a = tcache ? fr_alloc(4 << 20, 1) : fx_alloc_on(4 << 20, CP_STREAM_DEVICE, 1);
  uintptr_t x = tcache ? fr_alloc(8 << 20, 1) : fx_alloc_on(8 << 20, CP_STREAM_DEVICE, 1);
  cr_assert(eq(int, cp_free(F.pool, x, 1, CP_FREE_DEVICE_IDLE), 0), "x is ready at once");
  if (tcache) {
    fr_free(a, 1);
    cr_assert(eq(sz, held(), 1), "a waits in this thread's cache");
  } else {
    fx_free(a, 1);
  }
  uintptr_t arg[3] = {0, 99, tcache};
  pthread_t t;
  pthread_create(&t, NULL, alloc_4mib_key2, arg);
  pthread_join(t, NULL);
  cr_assert(eq(u64, arg[1], 0));
  *freed = a;
  cr_assert(eq(int, cp_free(F.pool, arg[0], 2, 0), 0));
  fx_close();
  return arg[0];
}

Test(tcache, another_threads_allocation_decides_as_without_caches) {
  uintptr_t a_plain, a_tcache;
  uintptr_t plain = other_thread_after_a_cached_free(false, &a_plain);
  uintptr_t tcache = other_thread_after_a_cached_free(true, &a_tcache);
  cr_assert(eq(u64, plain, a_plain), "the pool alone serves the freed block after a barrier");
  cr_assert(eq(u64, tcache, a_tcache), "so does the pool behind the caches");
}

/* A block allocated for stream 5 and freed in stream order on stream 9 is
 * stream 9's: the thread's next allocation for stream 5 must not get it back
 * at once (work on 9 may still use it), through the cache or the pool. */
Test(tcache, a_free_on_another_stream_is_that_streams) {
  open_without_barriers_or_fences();
  uintptr_t p = 0, q = 0;
  cr_assert(eq(int, cp_tcache_alloc(F.pool, 1024, 5, 7, &p), 0));
  cr_assert(eq(int, cp_tcache_free_on_stream(F.pool, p, 9, 7, 0), 0));
  cr_assert(eq(sz, held(), 0), "not cached as stream 5's");
  cr_assert(eq(int, cp_tcache_alloc(F.pool, 1024, 5, 7, &q), 0));
  cr_assert(not(eq(u64, q, p)), "stream 5 waits for a barrier");
  uintptr_t r = 0;
  cr_assert(eq(int, cp_tcache_alloc(F.pool, 1024, 9, 7, &r), 0));
  cr_assert(eq(u64, r, p), "stream 9 has it at once");
  cr_assert(eq(int, cp_tcache_free(F.pool, q, 7, 0), 0));
  cr_assert(eq(int, cp_tcache_free(F.pool, r, 7, 0), 0));
  fx_close();
}

/* After a device reset the pool is retired, not destroyed: a thread that
 * exits later with blocks in its cache must not make the pool give memory
 * back (the addresses may be the new context's by then). */
static void *cache_one_and_exit(void *arg) {
  (void)arg;
  uintptr_t p = fr_alloc(4 << 20, 1);
  fr_free(p, 1);
  cr_assert(eq(sz, held(), 1));
  return NULL;
}

Test(tcache, a_thread_leaving_a_retired_pool_gives_nothing_back) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.max_cached = 0; /* every settle trims what is free */
  fx_open_cfg(&cfg, GiB);
  cp_pool_retire(F.pool);
  pthread_t t;
  pthread_create(&t, NULL, cache_one_and_exit, NULL);
  pthread_join(t, NULL);
  fx_sync_now();
  cp_empty_cache(F.pool);
  cr_assert(eq(sz, cp_sim_live_count(&F.sim), 1), "the retired pool gave its segment back");
  cp_pool_drop(F.pool);
  F.pool = NULL;
  cp_sim_fini(&F.sim);
}
