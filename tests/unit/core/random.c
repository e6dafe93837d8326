/* random.c: a million seeded random operations against the simulated
 * device, checking after each step that live blocks never overlap, every
 * byte of every segment is in exactly one block (cp_pool_check), the stats
 * equal a plain model's, and no block is handed out while device work that
 * its free must wait for may still touch it. Then the same with a backend
 * that fails at random: consistent, and nothing leaks. */
#include <stdlib.h>
#include <string.h>

#include "core_fixture.h"

#define MAX_LIVE 64
#define MAX_DIRTY 4096

typedef struct live {
  uintptr_t addr;
  size_t size, requested;
  uint64_t stream, key;
  bool recorded;
} live_t;

/* A freed range the device may still touch, and what made it safe since. */
typedef struct dirty {
  uintptr_t addr;
  size_t size;
  uint64_t stream, key;
  bool recorded;
  uint64_t barriers, fences_recorded, syncs, stream_syncs;
} dirty_t;

typedef struct model {
  live_t live[MAX_LIVE];
  int nlive;
  dirty_t dirty[MAX_DIRTY];
  int ndirty;
  uint64_t syncs;           /* device syncs reported so far */
  uint64_t stream_syncs[4]; /* syncs reported per stream */
  int64_t allocated, requested;
  uint64_t rng;
} model_t;

static uint64_t rnd(model_t *m) {
  m->rng ^= m->rng << 13;
  m->rng ^= m->rng >> 7;
  m->rng ^= m->rng << 17;
  return m->rng;
}

static size_t random_size(model_t *m) {
  uint64_t r = rnd(m) % 100;
  if (r < 60) return 1 + rnd(m) % (64 * KiB);
  if (r < 85) return 1 + rnd(m) % (1 * MiB);
  if (r < 98) return 1 * MiB + rnd(m) % (24 * MiB);
  return 24 * MiB + rnd(m) % (80 * MiB);
}

static bool safe_now(const model_t *m, const dirty_t *d) {
  return F.sim.barriers > d->barriers || F.sim.fences_completed > d->fences_recorded || m->syncs > d->syncs ||
         (!d->recorded && m->stream_syncs[d->stream] > d->stream_syncs);
}

static void forget_safe(model_t *m) {
  int kept = 0;
  for (int i = 0; i < m->ndirty; i++)
    if (!safe_now(m, &m->dirty[i])) m->dirty[kept++] = m->dirty[i];
  m->ndirty = kept;
}

static void check_new_block(model_t *m, uintptr_t p, size_t size, uint64_t stream, uint64_t key) {
  for (int i = 0; i < m->nlive; i++) {
    const live_t *l = &m->live[i];
    cr_assert(p + size <= l->addr || l->addr + l->size <= p, "block %#lx overlaps live %#lx", p, l->addr);
  }
  forget_safe(m);
  for (int i = 0; i < m->ndirty; i++) {
    const dirty_t *d = &m->dirty[i];
    if (p + size <= d->addr || d->addr + d->size <= p) continue;
    bool own = key && d->key == key && d->stream == stream && !d->recorded;
    cr_assert(own, "block %#lx reused while its free (%#lx) is still open", p, d->addr);
  }
}

static void do_alloc(model_t *m) {
  if (m->nlive == MAX_LIVE) return;
  size_t size = random_size(m);
  uint64_t stream = rnd(m) % 4, key = rnd(m) % 3; /* key 0: never at once */
  uintptr_t p;
  int rc = cp_alloc(F.pool, size, stream, key, &p);
  if (rc == ENOMEM) return;
  cr_assert(eq(int, rc, 0));
  size_t bsize = cp_block_size(F.pool, p);
  cr_assert(bsize >= size && bsize - size < 21 * MiB);
  check_new_block(m, p, bsize, stream, key);
  m->live[m->nlive++] = (live_t){p, bsize, size, stream, key, false};
  m->allocated += (int64_t)bsize;
  m->requested += (int64_t)size;
}

static void do_free(model_t *m) {
  if (!m->nlive) return;
  int i = (int)(rnd(m) % (uint64_t)m->nlive);
  live_t l = m->live[i];
  m->live[i] = m->live[--m->nlive];
  uint64_t key = rnd(m) % 2 ? l.key : 0;
  cr_assert(eq(int, cp_free(F.pool, l.addr, key, 0), 0));
  m->allocated -= (int64_t)l.size;
  m->requested -= (int64_t)l.requested;
  if (m->ndirty == MAX_DIRTY) forget_safe(m);
  cr_assert(m->ndirty < MAX_DIRTY);
  m->dirty[m->ndirty++] = (dirty_t){l.addr,
                                    l.size,
                                    l.stream,
                                    key,
                                    l.recorded,
                                    F.sim.barriers,
                                    F.sim.fences_recorded,
                                    m->syncs,
                                    m->stream_syncs[l.stream]};
}

static void do_other(model_t *m) {
  switch (rnd(m) % 8) {
    case 0:
      if (m->nlive) {
        live_t *l = &m->live[rnd(m) % (uint64_t)m->nlive];
        uint64_t s = rnd(m) % 4;
        cr_assert(eq(int, cp_record_stream(F.pool, l->addr, s), 0));
        l->recorded |= s != l->stream;
      }
      break;
    case 1: cp_sim_complete_fences(&F.sim, F.sim.fences_recorded - rnd(m) % 2); break;
    case 2: {
      cp_mark_t mark;
      cp_sync_mark(F.pool, &mark);
      cp_sync_device(F.pool, &mark);
      m->syncs++;
      break;
    }
    case 3: {
      uint64_t s = rnd(m) % 4;
      cp_mark_t mark;
      cp_sync_mark(F.pool, &mark);
      cp_sync_stream(F.pool, &mark, s);
      m->stream_syncs[s]++;
      break;
    }
    case 4:
      if (rnd(m) % 16 == 0) cp_empty_cache(F.pool);
      break;
    case 5: F.sim.barrier_enabled = rnd(m) % 4 == 0; break;
    default: break;
  }
}

static void check_model(const model_t *m) {
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.allocated_bytes.current, m->allocated));
  cr_assert(eq(i64, s.requested_bytes.current, m->requested));
  cr_assert(eq(i64, s.allocated_blocks.current, m->nlive));
  cr_assert(eq(i64, s.reserved_bytes.current, (int64_t)F.sim.used));
  cr_assert(eq(i64, s.segments.current, (int64_t)cp_sim_live_count(&F.sim)));
  cr_assert(eq(u64, s.num_device_alloc, F.sim.allocs));
  cr_assert(eq(u64, s.num_device_free, F.sim.frees));
  cr_assert(eq(u64, s.num_barriers, F.sim.barriers));
  cr_assert(eq(u64, s.num_fences_recorded, F.sim.fences_recorded));
  cr_assert(eq(u64, s.hits + s.misses, s.num_alloc));
}

static void run(uint64_t seed, long steps, size_t capacity) {
  static model_t m;
  memset(&m, 0, sizeof m);
  m.rng = seed;
  for (long i = 0; i < steps; i++) {
    uint64_t r = rnd(&m) % 100;
    if (r < 45)
      do_alloc(&m);
    else if (r < 88)
      do_free(&m);
    else
      do_other(&m);
    fx_check();
    check_model(&m);
  }
  while (m.nlive) {
    live_t l = m.live[--m.nlive];
    cr_assert(eq(int, cp_free(F.pool, l.addr, 0, 0), 0));
  }
  (void)capacity;
}

Test(random, million_operations, .timeout = 600) {
  fx_open(512 * MiB);
  run(0x1234567u, 1000000, 512 * MiB);
  cp_empty_cache(F.pool);
  cr_assert(eq(i64, fx_stats().reserved_bytes.current, 0));
  fx_close();
}

Test(random, backend_failing_at_random_leaks_nothing, .timeout = 300) {
  fx_open(256 * MiB);
  F.sim.fail_percent = 20;
  run(0xfeedbeefu, 100000, 256 * MiB);
  F.sim.fail_percent = 0;
  cp_empty_cache(F.pool);
  cr_assert(eq(sz, F.sim.used, 0));
  cr_assert(F.sim.failed_allocs > 1000, "failures were injected: %lu", (unsigned long)F.sim.failed_allocs);
  fx_close();
}

Test(random, bins_best_fit_matches_brute_force) {
  enum { N = 20000 };
  static cp_block_t blocks[N];
  static cp_bins_t bins;
  cp_bins_init(&bins, 512);
  model_t m = {.rng = 42};
  for (int i = 0; i < N; i++) {
    blocks[i] = (cp_block_t){.addr = 0x1000000 + (uintptr_t)i * 512, .size = 512 * (1 + rnd(&m) % 40000)};
    cp_bins_insert(&bins, &blocks[i]);
  }
  for (int q = 0; q < 2000; q++) {
    size_t want = 512 * (1 + rnd(&m) % 41000);
    const cp_block_t *best = NULL;
    for (int i = 0; i < N; i++)
      if (blocks[i].size >= want && (!best || blocks[i].size < best->size ||
                                     (blocks[i].size == best->size && blocks[i].addr < best->addr)))
        best = &blocks[i];
    cr_assert(eq(ptr, (void *)cp_bins_best_fit(&bins, want), (void *)best), "size %zu", want);
  }
}
