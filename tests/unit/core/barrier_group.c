/* barrier_group.c: a thread that needs a barrier while another thread's is
 * in flight waits for it instead of issuing its own (reuse.c, group commit),
 * and is served by it when it covers the thread's frees; threads cycling
 * unkeyed blocks then hold as many segments as blocks; what other threads
 * allocate while a barrier runs counts against the limit. */
#include "pool_internal.h" /* barrier_waiters; first: it sets uthash's hash function */

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "core_fixture.h"

#define BIG (20 * MiB) /* one block per segment */

static int (*sim_barrier)(void *ctx, int device);
static atomic_int barrier_calls;

static unsigned waiters(void) {
  pthread_mutex_lock(&F.pool->lock);
  unsigned n = F.pool->barrier_waiters;
  pthread_mutex_unlock(&F.pool->lock);
  return n;
}

/* The first barrier stays in flight until another thread waits for it, or
 * until that thread issues a barrier of its own (then the test fails). */
static int held_barrier(void *ctx, int device) {
  if (atomic_fetch_add(&barrier_calls, 1) == 0)
    while (waiters() == 0 && atomic_load(&barrier_calls) == 1) sched_yield();
  return sim_barrier(ctx, device);
}

static void open_with_barrier(int (*barrier)(void *, int)) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cp_sim_init(&F.sim, 4 * GiB);
  F.be = cp_sim_backend(&F.sim);
  sim_barrier = F.be.barrier;
  F.be.barrier = barrier;
  F.cfg = cfg;
  cr_assert(eq(int, cp_pool_create(&F.pool, 0, &F.cfg, &F.be), 0));
}

static void *alloc_big(void *out) {
  cr_assert(eq(int, cp_alloc(F.pool, BIG, CP_STREAM_DEVICE, 0, out), 0));
  return NULL;
}

Test(barrier_group, a_thread_waits_for_the_barrier_in_flight_that_covers_its_frees) {
  open_with_barrier(held_barrier);
  uintptr_t a = fx_alloc(BIG), b = fx_alloc(BIG);
  fx_free(a, 0);
  fx_free(b, 0);

  uintptr_t first = 0, second = 0;
  pthread_t t;
  cr_assert(eq(int, pthread_create(&t, NULL, alloc_big, &first), 0));
  while (atomic_load(&barrier_calls) == 0) sched_yield(); /* its barrier is in flight */
  cr_assert(eq(int, cp_alloc(F.pool, BIG, CP_STREAM_DEVICE, 0, &second), 0));
  pthread_join(t, NULL);

  cr_assert(eq(int, atomic_load(&barrier_calls), 1), "the second thread issued a barrier of its own");
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_barriers, 1));
  cr_assert(eq(u64, F.sim.barriers, 1));
  cr_assert(eq(u64, s.hits, 2));
  cr_assert(eq(u64, s.misses, 2));
  cr_assert(ne(u64, first, second));
  cr_assert(first == a || first == b);
  cr_assert(second == a || second == b);
  fx_free(first, 0);
  fx_free(second, 0);
  fx_close();
}

/* A barrier long enough for the other threads to want one meanwhile. */
static int slow_barrier(void *ctx, int device) {
  for (int i = 0; i < 64; i++) sched_yield();
  return sim_barrier(ctx, device);
}

#define CYCLERS 4
#define CYCLES 2000

static void *cycle_big(void *unused) {
  (void)unused;
  for (int i = 0; i < CYCLES; i++) {
    uintptr_t p = 0;
    cr_assert(eq(int, cp_alloc(F.pool, BIG, CP_STREAM_DEVICE, 0, &p), 0));
    cr_assert(eq(int, cp_free(F.pool, p, 0, 0), 0));
  }
  return NULL;
}

/* Each thread holds one block at a time, so the pool never needs more than
 * one segment a thread: a thread whose block a barrier in flight covers
 * waits for it rather than growing (without that, 20-37 segments). */
Test(barrier_group, threads_cycling_unkeyed_blocks_hold_a_segment_each) {
  open_with_barrier(slow_barrier);
  pthread_t t[CYCLERS];
  for (int i = 0; i < CYCLERS; i++) cr_assert(eq(int, pthread_create(&t[i], NULL, cycle_big, NULL), 0));
  for (int i = 0; i < CYCLERS; i++) pthread_join(t[i], NULL);
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(u64, s.num_alloc, CYCLERS * CYCLES));
  cr_assert(le(i64, s.segments.peak, CYCLERS), "%lld segments for %d blocks", (long long)s.segments.peak,
            CYCLERS);
  fx_close();
}

static atomic_bool main_allocated;

/* The first barrier stays in flight until the main thread has allocated. */
static int barrier_until_main_allocated(void *ctx, int device) {
  if (atomic_fetch_add(&barrier_calls, 1) == 0)
    while (!atomic_load(&main_allocated)) sched_yield();
  return sim_barrier(ctx, device);
}

static void *alloc_mib_expect_enomem(void *unused) {
  (void)unused;
  uintptr_t p = 0;
  cr_assert(eq(int, cp_alloc(F.pool, 1 * MiB, CP_STREAM_DEVICE, 0, &p), ENOMEM));
  return NULL;
}

/* One 2 MiB small segment: x (1 MiB, pending), w (512 KiB, live), z
 * (512 KiB, ready); limit 1.5 MiB. A thread asks for 1 MiB (0.5 + 1 <= 1.5)
 * and waits for a barrier to free x; meanwhile the main thread takes z
 * (0.5 + 0.5 <= 1.5). Once the barrier is done, x would make 2 MiB
 * allocated: refused. */
Test(barrier_group, what_others_allocate_during_a_barrier_counts_against_the_limit) {
  open_with_barrier(barrier_until_main_allocated);
  uintptr_t x = fx_alloc(1 * MiB), w = fx_alloc(512 * KiB), z = fx_alloc(512 * KiB);
  cr_assert(eq(u64, w, x + 1 * MiB));
  cr_assert(eq(u64, z, w + 512 * KiB));
  cp_set_limit(F.pool, 3 * MiB / 2); /* first: with a pending block it would issue a barrier */
  fx_free_idle(z);
  fx_free(x, 0);
  cp_reset_peak(F.pool);

  pthread_t t;
  cr_assert(eq(int, pthread_create(&t, NULL, alloc_mib_expect_enomem, NULL), 0));
  while (atomic_load(&barrier_calls) == 0) sched_yield(); /* its barrier is in flight */
  uintptr_t again = 0;
  cr_assert(eq(int, cp_alloc(F.pool, 512 * KiB, CP_STREAM_DEVICE, 0, &again), 0));
  cr_assert(eq(u64, again, z));
  atomic_store(&main_allocated, true);
  pthread_join(t, NULL);

  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.allocated_bytes.current, (int64_t)(1 * MiB)));
  cr_assert(le(i64, s.allocated_bytes.peak, (int64_t)(3 * MiB / 2)));
  fx_free(again, 0);
  fx_free(w, 0);
  fx_close();
}
