/* arenas.c: the arenas of a pool (core/arena.c) on the simulated device:
 * a thread that finds its arena's lock taken moves, blocks are found and
 * freed in whichever arena holds them, and what the arenas share holds for
 * them together: the free order (one sync mark), barriers, the limit, the
 * out-of-memory path, the stats.
 *
 * A thread is moved deterministically: it takes its arena's lock itself and
 * allocates; the allocation's try-lock fails, and with arena_move_after 1
 * the thread moves at once (to a free arena, else a new one). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "pool_internal.h" /* the pool's lock, cp_arena_count; first: it sets uthash's hash function */
#include "core_fixture.h"

static void open_arenas(size_t capacity, size_t limit) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.arenas = 4;
  cfg.arena_move_after = 1;
  if (limit) cfg.limit = limit;
  fx_open_cfg(&cfg, capacity);
}

static int fr_alloc_rc(size_t size, uint64_t key, uintptr_t *p) {
  return cp_tcache_alloc(F.pool, size, CP_STREAM_DEVICE, key, p);
}

static uintptr_t fr_alloc(size_t size, uint64_t key) {
  uintptr_t p = 0;
  int rc = fr_alloc_rc(size, key, &p);
  cr_assert(eq(int, rc, 0), "cp_tcache_alloc(%zu) failed with %d", size, rc);
  return p;
}

/* The calling thread's next allocation finds `arena` locked (by itself),
 * so it moves; returns that allocation. */
static uintptr_t alloc_moving_from(cp_pool_t *arena, size_t size, uint64_t key) {
  pthread_mutex_lock(&arena->lock);
  uintptr_t p = fr_alloc(size, key);
  pthread_mutex_unlock(&arena->lock);
  cr_assert(ne(ptr, cp_arena_home(F.pool), arena), "the thread did not move");
  return p;
}

static cp_pool_t *arena_holding(uintptr_t p) {
  for (unsigned i = 0; i < cp_arena_count(F.pool); i++) {
    cp_pool_t *a = cp_arena_at(F.pool, i);
    pthread_mutex_lock(&a->lock);
    bool here = cp_segment_containing(a, p) != NULL;
    pthread_mutex_unlock(&a->lock);
    if (here) return a;
  }
  return NULL;
}

/* One lookup: a free, a size or a find of a block goes to the arena that
 * owns it and takes no other arena's lock. The test holds the thread's
 * home arena's lock (arena 1): a path that tried it first would never
 * return (the timeout fails it). */
Test(arenas, a_free_goes_to_the_arena_owning_the_block_and_no_other, .timeout = 20) {
  open_arenas(GiB, 0);
  uintptr_t a = fr_alloc(4096, 1), c = fr_alloc(8192, 1);
  uintptr_t b = alloc_moving_from(F.pool, 4096, 1);
  cp_pool_t *home = cp_arena_at(F.pool, 1);
  cr_assert(eq(ptr, cp_arena_home(F.pool), home));
  cr_assert(eq(ptr, arena_holding(a), F.pool));
  cr_assert(eq(ptr, (void *)cp_owned_lookup(a), F.pool), "the owned table names the main pool");
  pthread_mutex_lock(&home->lock);
  cr_assert(eq(sz, cp_block_size(F.pool, a), 4096));
  cp_block_info_t info;
  cr_assert(eq(int, cp_block_find(F.pool, a + 100, &info), 0));
  cr_assert(eq(int, cp_record_stream(F.pool, c, 7), 0));
  cr_assert(eq(int, cp_tcache_free(F.pool, a, 1, CP_FREE_DEVICE_IDLE), 0)); /* under the main pool's lock */
  cr_assert(eq(int, cp_tcache_free(F.pool, a, 1, CP_FREE_DEVICE_IDLE), EINVAL), "a second free");
  cr_assert(eq(int, cp_free(F.pool, c, 1, 0), 0));
  pthread_mutex_unlock(&home->lock);
  fx_free(b, 1);
}

Test(arenas, a_thread_that_finds_its_arena_locked_moves_and_serves_from_new_segments) {
  open_arenas(GiB, 0);
  uintptr_t a = fr_alloc(4096, 1);
  cr_assert(eq(u32, cp_arena_count(F.pool), 1));
  uintptr_t b = alloc_moving_from(F.pool, 4096, 1);
  cr_assert(eq(u32, cp_arena_count(F.pool), 2));
  cr_assert(eq(ptr, arena_holding(a), F.pool));
  cr_assert(eq(ptr, arena_holding(b), cp_arena_at(F.pool, 1)));
  /* The thread stays in its new arena: its next block comes from there. */
  uintptr_t c = fr_alloc(4096, 1);
  cr_assert(eq(ptr, arena_holding(c), cp_arena_at(F.pool, 1)));

  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.allocated_bytes.current, 3 * 4096));
  cr_assert(eq(i64, s.allocated_blocks.current, 3));
  cr_assert(eq(i64, s.segments.current, 2));
  cr_assert(eq(i64, s.reserved_bytes.current, 4 * MiB));
  cr_assert(eq(i64, s.reserved_bytes.peak, 4 * MiB));
  cr_assert(eq(u64, s.num_alloc, 3));
  cr_assert(eq(u64, s.misses, 2));
  cr_assert(eq(u64, s.hits, 1));

  /* Frees find the block's arena whatever the thread's; the codes are
   * those of one pool. */
  cr_assert(eq(u64, cp_block_size(F.pool, a), 4096));
  cr_assert(eq(int, cp_tcache_free(F.pool, a, 1, 0), 0));
  cr_assert(eq(int, cp_tcache_free(F.pool, a, 1, 0), EINVAL));
  cr_assert(eq(int, cp_free(F.pool, b, 0, 0), 0));
  cr_assert(eq(int, cp_free(F.pool, b, 0, 0), EINVAL));
  cr_assert(eq(int, cp_tcache_free(F.pool, c + 512, 1, 0), EINVAL));
  cr_assert(eq(int, cp_tcache_free(F.pool, 0x1000, 1, 0), ENOENT));
  cr_assert(eq(int, cp_record_stream(F.pool, c, 7), 0));
  cp_block_info_t info;
  cr_assert(eq(int, cp_block_find(F.pool, c + 100, &info), 0));
  cr_assert(eq(u64, info.start, c));
  cr_assert(eq(int, cp_tcache_free(F.pool, c, 1, 0), 0));
  s = fx_stats();
  cr_assert(eq(i64, s.allocated_bytes.current, 0));
  cr_assert(eq(u64, s.num_free, 3));
  fx_close();
}

Test(arenas, a_thread_moves_to_a_free_arena_before_making_another) {
  open_arenas(GiB, 0);
  fr_alloc(512, 1);
  alloc_moving_from(F.pool, 512, 1); /* into arena 1 */
  cr_assert(eq(u32, cp_arena_count(F.pool), 2));
  alloc_moving_from(cp_arena_at(F.pool, 1), 512, 1); /* back to the main pool, whose lock is free */
  cr_assert(eq(ptr, cp_arena_home(F.pool), F.pool));
  cr_assert(eq(u32, cp_arena_count(F.pool), 2));
  cp_empty_cache(F.pool);
  fx_close(); /* three blocks still live: destroyed with the pool, every byte back */
}

Test(arenas, no_more_arenas_than_the_config_allows) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.arenas = 2;
  cfg.arena_move_after = 1;
  fx_open_cfg(&cfg, GiB);
  for (int i = 0; i < 4; i++) alloc_moving_from(cp_arena_home(F.pool), 512, 1);
  cr_assert(eq(u32, cp_arena_count(F.pool), 2));
  cr_assert(eq(ptr, cp_arena_home(F.pool), F.pool)); /* main, arena 1, main, arena 1, main */
  fx_close();
}

Test(arenas, a_pool_with_one_arena_never_makes_another) {
  fx_open(GiB); /* cfg.arenas 1 */
  uintptr_t p = fr_alloc(512, 1);
  cr_assert(eq(u32, cp_arena_count(F.pool), 1));
  cr_assert(eq(int, cp_tcache_free(F.pool, p, 1, 0), 0));
  fx_close();
}

/* Two live 20 MiB blocks, one segment each, after one barrier in all. */
static void close_after_one_barrier(uintptr_t x, uintptr_t y) {
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_barriers, 1));
  cr_assert(eq(i64, s.segments.current, 2));
  fx_free_idle(x);
  fx_free_idle(y);
  fx_close();
}

Test(arenas, one_barrier_readies_the_frees_of_every_arena) {
  open_arenas(GiB, 0);
  /* 20 MiB blocks fill their segments: a reuse needs a barrier. */
  uintptr_t a = fx_alloc(20 * MiB); /* cp_alloc: the main pool */
  fx_free(a, 0);                    /* pending, no key */
  uintptr_t c = alloc_moving_from(F.pool, 20 * MiB, 0);
  cr_assert(eq(int, cp_tcache_free(F.pool, c, 0, 0), 0));
  uintptr_t c2 = fr_alloc(20 * MiB, 0); /* arena 1's barrier, covering a too */
  cr_assert(eq(u64, c2, c));
  cr_assert(eq(u64, F.sim.barriers, 1));
  uintptr_t a2 = fx_alloc(20 * MiB); /* the main pool: no barrier of its own */
  cr_assert(eq(u64, a2, a));
  cr_assert(eq(u64, F.sim.barriers, 1));
  close_after_one_barrier(a2, c2);
}

/* Each arena numbers its own frees: a barrier's mark is a point in each
 * one's order. The main pool has freed 31 times, arena 1 once; arena 1's
 * barrier still covers the main pool's last free. */
Test(arenas, a_barrier_covers_each_arena_up_to_its_own_count_of_frees) {
  open_arenas(GiB, 0);
  uintptr_t a = fx_alloc(20 * MiB);
  for (int i = 0; i < 30; i++) fx_free(fx_alloc(4096), 0); /* pending, no barrier: too few bytes */
  fx_free(a, 0);                                           /* the main pool's 31st free */
  cr_assert(eq(u64, F.sim.barriers, 0));
  uintptr_t c = alloc_moving_from(F.pool, 20 * MiB, 0);
  cr_assert(eq(int, cp_tcache_free(F.pool, c, 0, 0), 0)); /* arena 1's first */
  uintptr_t c2 = fr_alloc(20 * MiB, 0);                  /* arena 1's barrier */
  cr_assert(eq(u64, c2, c));
  cr_assert(eq(u64, F.sim.barriers, 1));
  uintptr_t a2 = fx_alloc(20 * MiB); /* covered by it: no barrier of its own */
  cr_assert(eq(u64, a2, a));
  cr_assert(eq(u64, F.sim.barriers, 1));
  /* The other way: the main pool's barrier covers arena 1's second free
   * (through cp_free: a thread cache's deferred free would take its place
   * in the order only at arena 1's next flush). */
  fx_free(c2, 0);
  fx_free(a2, 0);
  cr_assert(eq(u64, fx_alloc(20 * MiB), a));
  cr_assert(eq(u64, F.sim.barriers, 2));
  cr_assert(eq(u64, fr_alloc(20 * MiB, 0), c));
  cr_assert(eq(u64, F.sim.barriers, 2));
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_barriers, 2));
  cr_assert(eq(i64, s.segments.current, 3)); /* the two 20 MiB blocks' and the small blocks' */
  fx_free_idle(a);
  fx_free_idle(c);
  fx_close();
}

Test(arenas, one_sync_mark_covers_the_frees_of_every_arena) {
  open_arenas(GiB, 0);
  F.sim.barrier_enabled = false;
  F.sim.fence_enabled = false;
  uintptr_t a = fx_alloc(20 * MiB);
  fx_free(a, 0);
  uintptr_t c = alloc_moving_from(F.pool, 20 * MiB, 0);
  cr_assert(eq(int, cp_tcache_free(F.pool, c, 0, 0), 0)); /* deferred: the mark takes it in */
  fx_sync_now();
  cr_assert(eq(u64, fr_alloc(20 * MiB, 0), c));
  cr_assert(eq(u64, fx_alloc(20 * MiB), a));
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_sync_points, 1));
  cr_assert(eq(i64, s.segments.current, 2));
  cr_assert(eq(i64, s.pending_bytes.current, 0));
  fx_sync_now();
  cr_assert(eq(int, cp_free(F.pool, a, 0, CP_FREE_DEVICE_IDLE), 0));
  cr_assert(eq(int, cp_free(F.pool, c, 0, CP_FREE_DEVICE_IDLE), 0));
  fx_close();
}

/* Arena 1 holds two live 20 MiB blocks, x and y, and nothing else is
 * reserved, never was more than 40 MiB. */
static void close_at_40m(uint64_t ooms, uintptr_t x, uintptr_t y) {
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.segments.current, 2));
  cr_assert(eq(i64, s.reserved_bytes.current, 40 * MiB));
  cr_assert(eq(i64, s.reserved_bytes.peak, 40 * MiB));
  cr_assert(eq(u64, s.num_ooms, ooms));
  fx_free_idle(x);
  fx_free_idle(y);
  fx_close();
}

Test(arenas, the_limit_holds_for_all_arenas_together_and_their_free_segments_go_back_first) {
  open_arenas(GiB, 40 * MiB);
  uintptr_t a = fx_alloc(20 * MiB);
  uintptr_t c = alloc_moving_from(F.pool, 20 * MiB, 0);
  uintptr_t p = 0;
  cr_assert(eq(int, fr_alloc_rc(20 * MiB, 0, &p), ENOMEM)); /* arena 1 alone has room, not both */
  cr_assert(eq(sz, F.sim.used, 40 * MiB));
  fx_free(a, 0); /* pending in the main pool: its segment goes back for arena 1 */
  cr_assert(eq(int, fr_alloc_rc(20 * MiB, 0, &p), 0));
  cr_assert(eq(ptr, arena_holding(p), cp_arena_at(F.pool, 1)));
  cr_assert(eq(sz, F.sim.used, 40 * MiB));
  close_at_40m(1, c, p);
}

Test(arenas, a_full_device_takes_back_the_other_arenas_free_segments) {
  open_arenas(40 * MiB, 0);
  uintptr_t a = fx_alloc(20 * MiB);
  fx_free_idle(a); /* free, cached in the main pool */
  uintptr_t c = alloc_moving_from(F.pool, 20 * MiB, 0);
  uintptr_t p = fr_alloc(20 * MiB, 0); /* the device is full: the main pool gives its segment back */
  cr_assert(eq(ptr, arena_holding(p), cp_arena_at(F.pool, 1)));
  cr_assert(eq(ptr, arena_holding(c), cp_arena_at(F.pool, 1)));
  close_at_40m(0, c, p);
}

Test(arenas, stats_trim_and_empty_cache_reach_every_arena) {
  open_arenas(GiB, 0);
  uintptr_t a = fx_alloc(4096);
  uintptr_t b = alloc_moving_from(F.pool, 30 * MiB, 0);
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.reserved_bytes.current, 32 * MiB));
  cr_assert(eq(i64, s.allocated_bytes.current, 4096 + 30 * MiB));
  cr_assert(eq(u64, s.largest_free_block, 2 * MiB - 4096));
  fx_free_idle(a);
  fx_free_idle(b);
  cr_assert(eq(sz, cp_trim(F.pool, 2 * MiB), 30 * MiB)); /* the arena's segment; the main pool's stays */
  cr_assert(eq(sz, F.sim.used, 2 * MiB));
  cp_reset_peak(F.pool);
  s = fx_stats();
  cr_assert(eq(i64, s.reserved_bytes.peak, 2 * MiB));
  cr_assert(eq(sz, cp_empty_cache(F.pool), 2 * MiB));
  cr_assert(eq(sz, F.sim.used, 0));
  fx_close();
}

Test(arenas, set_limit_applies_to_every_arena) {
  open_arenas(GiB, 0);
  uintptr_t a = fx_alloc(20 * MiB);
  uintptr_t b = alloc_moving_from(F.pool, 20 * MiB, 0);
  fx_free_idle(b);
  cp_set_limit(F.pool, 30 * MiB); /* over it: arena 1's free segment goes */
  cr_assert(eq(sz, F.sim.used, 20 * MiB));
  uintptr_t p = 0;
  cr_assert(eq(int, fr_alloc_rc(20 * MiB, 0, &p), ENOMEM));
  cp_set_limit(F.pool, 0);
  cr_assert(eq(int, fr_alloc_rc(20 * MiB, 0, &p), 0));
  fx_free_idle(a);
  fx_free_idle(p);
  fx_close();
}

/* The first barrier stays in flight until an arena waits for it, or until
 * another barrier is issued (then the test fails). */
static int (*sim_barrier)(void *ctx, int device);
static atomic_int barrier_calls;

static unsigned device_waiters(void) {
  pthread_mutex_lock(&F.pool->devpool->barrier_lock);
  unsigned n = F.pool->devpool->barrier_waiters;
  pthread_mutex_unlock(&F.pool->devpool->barrier_lock);
  return n;
}

static int held_barrier(void *ctx, int device) {
  if (atomic_fetch_add(&barrier_calls, 1) == 0)
    while (device_waiters() == 0 && atomic_load(&barrier_calls) == 1) sched_yield();
  return sim_barrier(ctx, device);
}

static void *alloc_20m_in_main(void *out) {
  cr_assert(eq(int, cp_alloc(F.pool, 20 * MiB, CP_STREAM_DEVICE, 0, out), 0));
  return NULL;
}

Test(arenas, an_arena_waits_for_the_barrier_in_flight_in_another_when_it_covers_its_frees) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.arenas = 4;
  cfg.arena_move_after = 1;
  cp_sim_init(&F.sim, GiB);
  F.be = cp_sim_backend(&F.sim);
  sim_barrier = F.be.barrier;
  F.be.barrier = held_barrier;
  F.cfg = cfg;
  cr_assert(eq(int, cp_pool_create(&F.pool, 0, &F.cfg, &F.be), 0));

  uintptr_t a = fx_alloc(20 * MiB);
  fx_free(a, 0);
  uintptr_t c = alloc_moving_from(F.pool, 20 * MiB, 0); /* this thread: arena 1 */
  cr_assert(eq(int, cp_free(F.pool, c, 0, 0), 0));      /* pending, after a in the free order */

  uintptr_t got_a = 0;
  pthread_t t;
  cr_assert(eq(int, pthread_create(&t, NULL, alloc_20m_in_main, &got_a), 0));
  while (atomic_load(&barrier_calls) == 0) sched_yield(); /* the main pool's barrier is in flight */
  uintptr_t got_c = fr_alloc(20 * MiB, 0);                /* arena 1 needs one too */
  pthread_join(t, NULL);

  cr_assert(eq(int, atomic_load(&barrier_calls), 1), "arena 1 issued a barrier of its own");
  cr_assert(eq(u64, got_a, a));
  cr_assert(eq(u64, got_c, c));
  close_after_one_barrier(got_a, got_c);
}

Test(arenas, the_cache_cap_is_split_between_the_arenas) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.arenas = 4;
  cfg.arena_move_after = 1;
  cfg.max_cached = 30 * MiB;
  fx_open_cfg(&cfg, GiB);
  uintptr_t a = fx_alloc(20 * MiB), small = fx_alloc(4096);
  fx_free_idle(a); /* 20 MiB cached: under the cap of one pool */
  cr_assert(eq(sz, F.sim.used, 22 * MiB));
  uintptr_t b = alloc_moving_from(F.pool, 4096, 1); /* two arenas: 15 MiB each */
  fx_free_idle(small);                              /* the main pool settles: over its share */
  cr_assert(eq(sz, F.sim.used, 4 * MiB));
  cr_assert(eq(int, cp_tcache_free(F.pool, b, 1, 0), 0));
  fx_close();
}

Test(arenas, mapped_pages_of_every_arena_count_against_the_limit_together) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.arenas = 4;
  cfg.arena_move_after = 1;
  cfg.expandable = true;
  cfg.expandable_size = GiB;
  cfg.limit = 40 * MiB;
  cp_sim_init(&F.sim, GiB);
  F.sim.vmm_page = 2 * MiB;
  F.sim.fence_auto_complete = true;
  F.be = cp_sim_backend(&F.sim);
  F.cfg = cfg;
  cr_assert(eq(int, cp_pool_create(&F.pool, 0, &F.cfg, &F.be), 0));
  uintptr_t a = fx_alloc(20 * MiB);
  uintptr_t c = alloc_moving_from(F.pool, 20 * MiB, 0);
  uintptr_t p = 0;
  cr_assert(eq(int, fr_alloc_rc(20 * MiB, 0, &p), ENOMEM));
  cr_assert(eq(sz, F.sim.mapped, 40 * MiB));
  fx_free_idle(a); /* its pages go back when arena 1 runs out */
  cr_assert(eq(int, fr_alloc_rc(20 * MiB, 0, &p), 0));
  cr_assert(eq(sz, F.sim.mapped, 40 * MiB));
  cr_assert(eq(u64, F.sim.bad_maps, 0));
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.segments.current, 1)); /* the main pool's range went back whole; arena 1's holds both */
  cr_assert(eq(i64, s.reserved_bytes.current, 40 * MiB));
  cr_assert(eq(i64, s.reserved_bytes.peak, 40 * MiB));
  cr_assert(eq(u64, s.num_ooms, 1));
  fx_free_idle(c);
  fx_free_idle(p);
  fx_close();
}

Test(arenas, a_lowered_limit_stops_every_arena_handing_out_its_cache) {
  open_arenas(GiB, 0);
  uintptr_t p[16];
  int n = 0;
  p[n++] = fx_alloc(4 * MiB);                     /* the main pool: a 20 MiB segment */
  p[n++] = alloc_moving_from(F.pool, 4 * MiB, 0); /* arena 1: another */
  cp_set_limit(F.pool, 20 * MiB);                 /* neither segment is wholly free: nothing goes */
  cr_assert(eq(sz, F.sim.used, 40 * MiB));
  for (int i = 0; i < 4; i++) {
    uintptr_t q;
    if (cp_alloc(F.pool, 4 * MiB, CP_STREAM_DEVICE, 0, &q) == 0) p[n++] = q;
    if (fr_alloc_rc(4 * MiB, 0, &q) == 0) p[n++] = q;
  }
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.allocated_bytes.current, 20 * MiB)); /* as one pool would stop: 5 blocks of 4 MiB */
  cr_assert(eq(int, n, 5));
  for (int i = 0; i < n; i++) cr_assert(eq(int, cp_free(F.pool, p[i], 0, CP_FREE_DEVICE_IDLE), 0));
  cp_set_limit(F.pool, 0);
  fx_close();
}

/* The same with blocks past the shared sum's slack (64 MiB an arena): the
 * sum, not only each arena's own figure, must stop them. Each arena holds a
 * 400 MiB segment with one 100 MiB block live and the rest cached. */
Test(arenas, a_lowered_limit_counts_every_arena_when_the_blocks_are_large) {
  open_arenas(GiB, 0);
  uintptr_t whole = fx_alloc(400 * MiB);
  fx_free_idle(whole);
  uintptr_t p[16];
  int n = 0;
  p[n++] = fx_alloc(100 * MiB);
  uintptr_t other = alloc_moving_from(F.pool, 400 * MiB, 0);
  cr_assert(eq(int, cp_free(F.pool, other, 0, CP_FREE_DEVICE_IDLE), 0));
  p[n++] = fr_alloc(100 * MiB, 0);
  cr_assert(eq(ptr, arena_holding(p[1]), cp_arena_at(F.pool, 1)));
  cp_set_limit(F.pool, 500 * MiB); /* neither segment is wholly free: nothing goes */
  cr_assert(eq(sz, F.sim.used, 800 * MiB));
  for (int i = 0; i < 4; i++) {
    uintptr_t q;
    if (fr_alloc_rc(100 * MiB, 0, &q) == 0) p[n++] = q; /* arena 1 */
    if (cp_alloc(F.pool, 100 * MiB, CP_STREAM_DEVICE, 0, &q) == 0) p[n++] = q;
  }
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.allocated_bytes.current, 500 * MiB));
  cr_assert(eq(int, n, 5));
  for (int i = 0; i < n; i++) cr_assert(eq(int, cp_free(F.pool, p[i], 0, CP_FREE_DEVICE_IDLE), 0));
  cp_set_limit(F.pool, 0);
  fx_close();
}

Test(arenas, a_request_past_the_limit_leaves_the_other_arenas_cache_alone) {
  open_arenas(GiB, 100 * MiB);
  fx_free_idle(fx_alloc(20 * MiB)); /* cached in the main pool */
  uintptr_t b = alloc_moving_from(F.pool, 4096, 1);
  uintptr_t q;
  cr_assert(eq(int, fr_alloc_rc(200 * MiB, 1, &q), ENOMEM));
  cr_assert(eq(sz, F.sim.used, 22 * MiB));
  cr_assert(eq(u64, fx_stats().num_ooms, 1));
  cr_assert(eq(int, cp_tcache_free(F.pool, b, 1, 0), 0));
  fx_close();
}
