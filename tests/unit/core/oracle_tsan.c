/* oracle_tsan.c: the coverage oracle of issue 31. Six threads make 40,000
 * random operations each on one pool over the simulated device, through
 * their thread caches (keyed frees, deferred unkeyed frees), across six
 * arenas, with blocks handed to other threads to free, stream-ordered
 * allocations and frees on each thread's per-thread stream (a stream tag of
 * its own, reuse key UINT64_MAX as the shim gives them), synchronisations
 * of the device and of single streams, empty_cache and trims, on
 * expandable segments (pages mapped and unmapped). A plain program (it
 * runs under ThreadSanitizer too; Criterion cannot start there): prints
 * "core_oracle_tsan: N passed, N failed".
 *
 * The oracle watches the pool from outside, through a ticket clock and the
 * backend table it wraps:
 *   - every free takes a ticket before it is made and writes it, with the
 *     block's stream and key, into each of the block's 512-byte granules;
 *   - a barrier takes a ticket before it is issued; once it succeeded, the
 *     frees with an earlier ticket are ordered before all later work;
 *     a device synchronisation or a completed fence likewise completes
 *     them; a synchronisation of one stream completes that stream's;
 *   - a block handed out again is checked granule by granule: reused by the
 *     same (stream, non-zero key) it was freed with, or freed before a
 *     barrier, completion or its stream's synchronisation began. Anything
 *     else is a block handed to another stream or key too early;
 *   - pages unmapped are checked likewise against completions only (a
 *     barrier orders, it does not finish the work), including the frees of
 *     earlier lives of the bytes that were handed across streams or keys.
 * Only the necessary side is checked (a free that began before a barrier
 * need not be covered by it), so the oracle never accuses a correct pool;
 * the pool reading a barrier's mark after the barrier instead of before, or
 * forgetting earlier frees' work when a block is made ready by a stream
 * synchronisation, each give thousands of violations. */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "pool_internal.h"
#include "testing/check.h"
#include "testing/sim_backend.h"

#define THREADS 6
#ifdef __SANITIZE_THREAD__
#define OPS 10000 /* ThreadSanitizer: a few seconds too */
#else
#define OPS 40000
#endif
#define SPACE ((size_t)512 << 20)
#define GRANULES (SPACE / 512)
#define PAGE ((size_t)2 << 20)
#define ORDERED UINT64_MAX /* the shim's stream-ordered reuse key */
#define FENCE_SLOTS (1u << 16)

/* A granule's last free: ticket (40 bits), stream code (12), key code (12). */
typedef uint64_t rec_t;
#define REC(t, s, k) (((uint64_t)(t) << 24) | ((uint64_t)(s) << 12) | (uint64_t)(k))
#define REC_TICKET(r) ((r) >> 24)
#define REC_STREAM(r) (((r) >> 12) & 0xfff)
#define REC_KEY(r) ((r)&0xfff)

static struct {
  cp_sim_t sim;
  cp_backend_t sim_be, be;
  cp_pool_t *pool;
  _Atomic uint64_t clock;
  _Atomic uint64_t ordered;   /* frees with a ticket below it are ordered before later work */
  _Atomic uint64_t completed; /* ... and their device work has completed */
  _Atomic uint64_t stream_synced[2 * THREADS + 1]; /* per stream code: its frees below it completed */
  _Atomic rec_t last[GRANULES];
  _Atomic uint64_t uncompleted[GRANULES]; /* earlier lives' frees handed across, not known complete */
  _Atomic uint64_t fence_ticket[FENCE_SLOTS];
  _Atomic uint64_t fences_seen;
  _Atomic uintptr_t handoff[THREADS];
  _Atomic long violations, page_violations, failures;
} O;

static uint64_t tick(void) { return atomic_fetch_add(&O.clock, 1) + 1; }

static void raise_to(_Atomic uint64_t *w, uint64_t v) {
  uint64_t seen = atomic_load(w);
  while (seen < v && !atomic_compare_exchange_weak(w, &seen, v)) {
  }
}

/* Stream codes: 0 the device-wide tag, 1 + id a thread's own stream, 1 +
 * THREADS + id its per-thread default stream. Key codes: 0 none, 1 + id,
 * 0xfff ordered. */
static uint64_t stream_tag(unsigned code) { return code == 0 ? CP_STREAM_DEVICE : 0x1000 + code; }
static unsigned key_code(uint64_t key) { return key == ORDERED ? 0xfff : (unsigned)key; }

static size_t granule(uintptr_t addr) { return (addr - O.sim.base) / 512; }

static bool rec_completed(rec_t r) {
  uint64_t t = REC_TICKET(r);
  return t < atomic_load(&O.completed) || t < atomic_load(&O.stream_synced[REC_STREAM(r)]);
}

/* The bytes change hands at a free: the previous free's work, unless the
 * same (stream, key) took the block back (its own order covers it) or it is
 * known complete, stays something the pages must wait for. */
static void record_free(uintptr_t p, size_t size, unsigned stream, uint64_t key) {
  uint64_t t = tick();
  rec_t r = REC(t, stream, key_code(key));
  for (size_t g = granule(p); g < granule(p + size); g++) {
    rec_t old = atomic_exchange(&O.last[g], r);
    if (old && !rec_completed(old) && (REC_STREAM(old) != stream || REC_KEY(old) != key_code(key) || !key))
      raise_to(&O.uncompleted[g], REC_TICKET(old));
  }
}

static void check_handout(uintptr_t p, size_t size, unsigned stream, uint64_t key) {
  for (size_t g = granule(p); g < granule(p + size); g++) {
    rec_t r = atomic_load(&O.last[g]);
    if (!r) continue;
    if (key && REC_STREAM(r) == stream && REC_KEY(r) == key_code(key)) continue;
    uint64_t t = REC_TICKET(r);
    if (t < atomic_load(&O.ordered) || t < atomic_load(&O.completed) ||
        t < atomic_load(&O.stream_synced[REC_STREAM(r)]))
      continue;
    atomic_fetch_add(&O.violations, 1);
    return;
  }
}

/* ---- the backend, watched -------------------------------------------------------- */

static int o_barrier(void *ctx, int device) {
  uint64_t begin = tick();
  /* A real barrier takes 0.5-1.4 us of CUDA calls, during which other
   * threads free and flush: give them the processor as it would. */
  sched_yield();
  int rc = O.sim_be.barrier(ctx, device);
  if (rc == 0) raise_to(&O.ordered, begin);
  return rc;
}

static int o_fence_record(void *ctx, int device, cp_fence_t *out) {
  uint64_t begin = tick();
  int rc = O.sim_be.fence_record(ctx, device, out);
  if (rc == 0) {
    uint64_t id = (uint64_t)(uintptr_t)*out;
    atomic_store(&O.fence_ticket[id % FENCE_SLOTS], begin);
    raise_to(&O.fences_seen, id);
  }
  return rc;
}

static void fence_done(cp_fence_t fence) {
  uint64_t begin = atomic_load(&O.fence_ticket[(uint64_t)(uintptr_t)fence % FENCE_SLOTS]);
  raise_to(&O.completed, begin);
  raise_to(&O.ordered, begin);
}

static int o_fence_query(void *ctx, int device, cp_fence_t fence) {
  int done = O.sim_be.fence_query(ctx, device, fence);
  if (done == 1) fence_done(fence);
  return done;
}

static int o_fence_wait(void *ctx, int device, cp_fence_t fence) {
  int rc = O.sim_be.fence_wait(ctx, device, fence);
  if (rc == 0) fence_done(fence);
  return rc;
}

static void forget(uintptr_t addr, size_t size) {
  for (size_t g = granule(addr); g < granule(addr + size); g++) {
    atomic_store(&O.last[g], 0);
    atomic_store(&O.uncompleted[g], 0);
  }
}

/* The backend's free waits for the device (cudaFree): the bytes start over. */
static void o_free(void *ctx, int device, uintptr_t addr, size_t size) {
  O.sim_be.free(ctx, device, addr, size);
  forget(addr, size);
}

static void o_unmap(void *ctx, int device, uintptr_t addr, size_t size) {
  uint64_t completed = atomic_load(&O.completed);
  for (size_t g = granule(addr); g < granule(addr + size); g++) {
    rec_t r = atomic_load(&O.last[g]);
    uint64_t earlier = atomic_load(&O.uncompleted[g]);
    if ((r && !rec_completed(r)) || (earlier && earlier >= completed)) {
      if (atomic_fetch_add(&O.page_violations, 1) == 0)
        fprintf(stderr, "core_oracle_tsan: unmapped [%#lx, +%zu): granule %zu freed at %llu on stream %u key %u, earlier %llu; completed %llu, its stream synced %llu\n",
                (unsigned long)addr, size, g, (unsigned long long)REC_TICKET(r), (unsigned)REC_STREAM(r), (unsigned)REC_KEY(r),
                (unsigned long long)earlier, (unsigned long long)completed,
                (unsigned long long)atomic_load(&O.stream_synced[REC_STREAM(r)]));
      break;
    }
  }
  O.sim_be.unmap(ctx, device, addr, size);
  forget(addr, size);
}

/* ---- the threads ------------------------------------------------------------------ */

typedef struct {
  uintptr_t p;
  unsigned stream; /* the block's stream code, as the pool knows it */
} live_t;

static void fail(const char *what, int rc) {
  fprintf(stderr, "core_oracle_tsan: %s failed with %d\n", what, rc);
  atomic_fetch_add(&O.failures, 1);
}

/* A free as the pool sees it: on `stream_code` (stream-ordered) or keeping the block's own stream. */
static void do_free(live_t b, uint64_t key, bool on_stream, unsigned stream_code) {
  size_t size = cp_block_size(O.pool, b.p);
  unsigned s = on_stream ? stream_code : b.stream;
  record_free(b.p, size, s, key);
  int rc = on_stream ? cp_tcache_free_on_stream(O.pool, b.p, stream_tag(stream_code), key, 0)
                     : cp_tcache_free(O.pool, b.p, key, 0);
  if (rc) fail("free", rc);
}

static void *thread_main(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  uint64_t rng = 0x9e3779b97f4a7c15ull * (id + 1);
  live_t live[16] = {{0}};
  unsigned own = 1 + id, per_thread = 1 + THREADS + id;
  for (int i = 0; i < OPS; i++) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    unsigned slot = (unsigned)(rng % 16), kind = (unsigned)(rng >> 8) % 4;
    /* kinds: 0 keyed on the thread's stream, 1 unkeyed (streams created), 2
     * stream-ordered on its per-thread stream, 3 device-wide (cudaMalloc) */
    if (live[slot].p) {
      live_t b = live[slot];
      live[slot].p = 0;
      if ((rng >> 20) % 8 == 0) { /* to the next thread, which frees it unkeyed */
        uintptr_t old = atomic_exchange(&O.handoff[(id + 1) % THREADS], b.p | b.stream);
        if (old) do_free((live_t){old & ~(uintptr_t)511, (unsigned)(old & 511)}, 0, false, 0);
      } else if (b.stream == per_thread) {
        do_free(b, ORDERED, true, per_thread);
      } else {
        do_free(b, kind == 1 ? 0 : id + 1, false, 0);
      }
    } else {
      size_t size = (rng >> 24) % 8 == 0 ? ((size_t)1 << 20) + (rng >> 32) % (3u << 20) : 1 + (rng >> 32) % (64u << 10);
      unsigned stream = kind == 2 ? per_thread : kind == 3 ? 0 : own;
      uint64_t key = kind == 2 ? ORDERED : kind == 1 ? 0 : id + 1;
      uintptr_t p;
      int rc = cp_tcache_alloc(O.pool, size, stream_tag(stream), key, &p);
      if (rc == ENOMEM) continue;
      if (rc) {
        fail("alloc", rc);
        continue;
      }
      check_handout(p, cp_block_size(O.pool, p), stream, key);
      live[slot] = (live_t){p, stream};
    }
    unsigned what = (unsigned)((rng >> 40) % 4096);
    cp_mark_t mark;
    if (what < 4) { /* the program synchronised the device */
      cp_sync_mark(O.pool, &mark);
      /* The real synchronisation runs here, between the mark and its
       * report: every free before it is complete. Said before the pool can
       * act on it. */
      uint64_t begin = tick();
      raise_to(&O.completed, begin);
      raise_to(&O.ordered, begin);
      cp_sync_device(O.pool, &mark);
    } else if (what < 40) { /* ... or its per-thread stream */
      cp_sync_mark(O.pool, &mark);
      uint64_t begin = tick();
      raise_to(&O.stream_synced[per_thread], begin);
      cp_sync_stream(O.pool, &mark, stream_tag(per_thread));
    } else if (what < 44) {
      cp_empty_cache(O.pool);
    } else if (what < 60) {
      cp_trim(O.pool, 0);
    } else if (what < 64) { /* the device caught up with the fences recorded so far */
      cp_sim_complete_fences(&O.sim, atomic_load(&O.fences_seen));
    }
  }
  for (int s = 0; s < 16; s++)
    if (live[s].p) do_free(live[s], 0, false, 0);
  return NULL;
}

int main(void) {
  cp_config_t cfg;
  cp_config_default(&cfg);
  cfg.expandable = true;
  cfg.expandable_size = 64u << 20;
  cfg.arenas = THREADS;
  cfg.arena_move_after = 1;
  cp_sim_init(&O.sim, SPACE);
  O.sim.vmm_page = PAGE;
  O.sim_be = cp_sim_backend(&O.sim);
  O.be = O.sim_be;
  O.be.barrier = o_barrier;
  O.be.fence_record = o_fence_record;
  O.be.fence_query = o_fence_query;
  O.be.fence_wait = o_fence_wait;
  O.be.free = o_free;
  O.be.unmap = o_unmap;
  int rc = cp_pool_create(&O.pool, 0, &cfg, &O.be);
  if (rc) {
    fail("cp_pool_create", rc);
    printf("core_oracle_tsan: 0 passed, 1 failed\n");
    return 1;
  }
  pthread_t t[THREADS];
  for (unsigned i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, thread_main, (void *)(uintptr_t)i);
  for (unsigned i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (unsigned i = 0; i < THREADS; i++) {
    uintptr_t old = atomic_exchange(&O.handoff[i], 0);
    if (old) do_free((live_t){old & ~(uintptr_t)511, (unsigned)(old & 511)}, 0, false, 0);
  }
  cudapool_stats_t s;
  cp_get_stats(O.pool, &s);
  char why[256] = "";
  int passed = 0, failed = 0;
#define EXPECT(cond, ...)                                \
  do {                                                   \
    if (cond) {                                          \
      passed++;                                          \
    } else {                                             \
      failed++;                                          \
      fprintf(stderr, "core_oracle_tsan: " __VA_ARGS__); \
      fprintf(stderr, "\n");                             \
    }                                                    \
  } while (0)
  EXPECT(atomic_load(&O.violations) == 0, "%ld blocks handed to another stream or key before a barrier covered them",
         atomic_load(&O.violations));
  EXPECT(atomic_load(&O.page_violations) == 0, "%ld page runs unmapped before their work completed",
         atomic_load(&O.page_violations));
  EXPECT(atomic_load(&O.failures) == 0, "%ld calls failed", atomic_load(&O.failures));
  EXPECT(cp_pool_check(O.pool, why, sizeof why) == 0, "%s", why);
  EXPECT(s.allocated_bytes.current == 0 && s.num_alloc == s.num_free, "%lld bytes left allocated",
         (long long)s.allocated_bytes.current);
  /* The oracle saw every path it watches: otherwise it proved nothing. */
  EXPECT(O.sim.barriers > 0 && O.sim.pages_unmapped > 0 && cp_arena_count(O.pool) > 1,
         "barriers %llu, pages unmapped %llu, arenas %u: a path went unexercised",
         (unsigned long long)O.sim.barriers, (unsigned long long)O.sim.pages_unmapped, cp_arena_count(O.pool));
  fprintf(stderr, "core_oracle_tsan: %llu barriers, %llu pages unmapped, %u arenas, %ld violations\n",
          (unsigned long long)O.sim.barriers, (unsigned long long)O.sim.pages_unmapped, cp_arena_count(O.pool),
          atomic_load(&O.violations) + atomic_load(&O.page_violations));
  cp_empty_cache(O.pool);
  cp_pool_destroy(O.pool);
  EXPECT(O.sim.used == 0 && O.sim.bad_frees == 0 && O.sim.bad_maps == 0,
         "the device: %zu bytes leaked, %llu bad frees, %llu bad maps", O.sim.used,
         (unsigned long long)O.sim.bad_frees, (unsigned long long)O.sim.bad_maps);
  cp_sim_fini(&O.sim);
  printf("core_oracle_tsan: %d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
