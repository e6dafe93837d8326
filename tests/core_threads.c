/* core_threads.c: eight threads allocate and free on one pool at once, each
 * with its own stream and key, some freeing blocks another thread allocated.
 * A shadow map of the simulated address space (one byte per 512-byte
 * granule, claimed with atomics) proves no two live blocks ever overlap.
 * Run under ThreadSanitizer too (make test-sanitize). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core_fixture.h"

#define THREADS 8
#define OPS 20000
#define SHADOW_BYTES (256 * MiB)
#define GRANULES (SHADOW_BYTES / 512)

static _Atomic unsigned char shadow[GRANULES];
static _Atomic uintptr_t handoff[THREADS]; /* a block passed to the next thread to free */

static size_t granule(uintptr_t addr) { return (addr - F.sim.base) / 512; }

static void claim(uintptr_t p, size_t size) {
  for (size_t g = granule(p); g < granule(p + size); g++)
    cr_assert(eq(int, atomic_exchange(&shadow[g], 1), 0), "granule %zu handed out twice", g);
}

static void release(uintptr_t p, size_t size) {
  for (size_t g = granule(p); g < granule(p + size); g++) atomic_store(&shadow[g], 0);
}

static void free_block(uintptr_t p, uint64_t key) {
  release(p, cp_block_size(F.pool, p));
  cr_assert(eq(int, cp_free(F.pool, p, key, 0), 0));
}

static void *churn(void *arg) {
  int id = (int)(intptr_t)arg;
  uint64_t rng = 0x9e3779b9u * (uint64_t)(id + 1), key = (uint64_t)id + 1;
  uintptr_t live[16] = {0};
  for (int i = 0; i < OPS; i++) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    int slot = (int)(rng % 16);
    if (live[slot]) {
      if (rng % 7 == 0) { /* pass it on: freed by another thread, key 0 */
        uintptr_t old = atomic_exchange(&handoff[(id + 1) % THREADS], live[slot]);
        if (old) free_block(old, 0);
      } else {
        free_block(live[slot], key);
      }
      live[slot] = 0;
    } else {
      size_t size = rng % 5 == 0 ? 1 * MiB + rng % (3 * MiB) : 1 + rng % (64 * KiB);
      uintptr_t p;
      if (cp_alloc(F.pool, size, (uint64_t)id, key, &p) != 0) continue;
      claim(p, cp_block_size(F.pool, p));
      live[slot] = p;
    }
    if (rng % 1024 == 0) cp_sync_device(F.pool, cp_sync_mark(F.pool));
  }
  for (int s = 0; s < 16; s++)
    if (live[s]) free_block(live[s], key);
  return NULL;
}

Test(threads, eight_threads_never_share_a_granule, .timeout = 300) {
  fx_open(SHADOW_BYTES);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, churn, (void *)(intptr_t)i);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < THREADS; i++) {
    uintptr_t p = atomic_exchange(&handoff[i], 0);
    if (p) free_block(p, 0);
  }
  cudapool_stats_t s = fx_stats();
  cr_assert(eq(i64, s.allocated_bytes.current, 0));
  cr_assert(eq(u64, s.num_alloc, s.num_free));
  cr_assert(gt(u64, s.num_alloc, THREADS * OPS / 4));
  cp_empty_cache(F.pool);
  fx_close();
}
