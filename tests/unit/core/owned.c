/* owned.c: the table of addresses pools own (core/owned.c): exact answers
 * at granule edges, granules two segments share (of one owner or two),
 * random segments of two owners against a model, and a pool's free of an
 * address no segment covers, which must take no pool lock. */
#include <pthread.h>

#include "pool_internal.h" /* the pool lock; first: it sets uthash's hash function */
#include "core_fixture.h"

#define GRANULE (2 * MiB)
/* Far from the simulated device's addresses (0x7f0000000000 up). */
#define AREA ((uintptr_t)0x100000000000ull)

/* Owners are arenas, 64-byte aligned; any such address stands for one. */
static _Alignas(64) char owner_a[64], owner_b[64];
#define A ((const void *)owner_a)
#define B ((const void *)owner_b)

Test(owned, answers_by_granule_and_forgets_a_removed_segment) {
  uintptr_t base = AREA + 10 * GRANULE;
  cr_assert(not(cp_owned_maybe(base)));
  cp_owned_add(base, 2 * GRANULE, A);
  cr_assert(cp_owned_maybe(base));
  cr_assert(cp_owned_maybe(base + 2 * GRANULE - 1));
  cr_assert(eq(ptr, (void *)cp_owned_lookup(base + GRANULE), (void *)A), "it names the owner");
  cr_assert(not(cp_owned_maybe(base + 2 * GRANULE)), "the next granule is no segment's");
  cr_assert(not(cp_owned_maybe(base - 1)), "nor the one before");
  cp_owned_remove(base, 2 * GRANULE);
  cr_assert(not(cp_owned_maybe(base)));
  cr_assert(not(cp_owned_maybe(base + GRANULE)));
}

Test(owned, a_granule_two_segments_share_stays_until_both_go) {
  uintptr_t g = AREA + 100 * GRANULE;
  cp_owned_add(g, MiB, A);           /* the granule's first half */
  cp_owned_add(g + MiB, 2 * MiB, A); /* its second half and the next granule's first */
  cr_assert(eq(ptr, (void *)cp_owned_lookup(g), (void *)A), "one owner's two segments name it");
  cp_owned_remove(g, MiB);
  cr_assert(cp_owned_maybe(g), "the second segment still overlaps the granule");
  cr_assert(cp_owned_maybe(g + GRANULE));
  cp_owned_remove(g + MiB, 2 * MiB);
  cr_assert(not(cp_owned_maybe(g)));
  cr_assert(not(cp_owned_maybe(g + GRANULE)));
}

Test(owned, a_granule_two_owners_share_names_any_until_both_go) {
  uintptr_t g = AREA + 200 * GRANULE;
  cp_owned_add(g, MiB, A);
  cp_owned_add(g + MiB, 2 * MiB, B);
  cr_assert(eq(ptr, (void *)cp_owned_lookup(g), (void *)CP_OWNED_ANY), "two owners: ask each");
  cr_assert(eq(ptr, (void *)cp_owned_lookup(g + GRANULE), (void *)B), "the next granule is B's alone");
  cp_owned_remove(g, MiB);
  cr_assert(eq(ptr, (void *)cp_owned_lookup(g), (void *)CP_OWNED_ANY), "still any until the count is 0");
  cp_owned_remove(g + MiB, 2 * MiB);
  cr_assert(eq(ptr, (void *)cp_owned_lookup(g), NULL));
  cp_owned_add(g, MiB, B);
  cr_assert(eq(ptr, (void *)cp_owned_lookup(g), (void *)B), "an emptied granule takes a new owner");
  cp_owned_remove(g, MiB);
}

Test(owned, addresses_past_48_bits_may_always_be_owned) {
  cr_assert(cp_owned_maybe((uintptr_t)1 << 48));
  cr_assert(cp_owned_maybe(UINTPTR_MAX));
  cr_assert(eq(ptr, (void *)cp_owned_lookup(UINTPTR_MAX), (void *)CP_OWNED_ANY));
  cr_assert(not(cp_owned_maybe(AREA)), "nothing turned the filter off");
}

/* Random segments of two owners over two leaves' ranges (64 GiB), added and
 * removed; after each change the table answers every granule as the model
 * does: no owner, the one owner, or any once two met there (until empty). */
Test(owned, random_segments_match_a_model) {
  enum { SEGMENTS = 64, GRANULES = 32768, ROUNDS = 2000 };
  static struct {
    uintptr_t base;
    size_t size;
    bool live;
  } seg[SEGMENTS];
  static unsigned cover[GRANULES];
  static const void *owner[GRANULES];
  uint64_t rng = 0x9e3779b97f4a7c15ull;
  for (int round = 0; round < ROUNDS; round++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    unsigned i = (unsigned)(rng >> 33) % SEGMENTS;
    if (seg[i].live) {
      cp_owned_remove(seg[i].base, seg[i].size);
    } else {
      uint64_t r = rng >> 20;
      seg[i].base = AREA + (r % (GRANULES - 64)) * GRANULE + ((r >> 20) % 4) * 512 * KiB;
      seg[i].size = (1 + (r >> 24) % (40 * 4)) * 512 * KiB;
      cp_owned_add(seg[i].base, seg[i].size, i % 2 ? A : B);
    }
    seg[i].live = !seg[i].live;
    uintptr_t first = (seg[i].base - AREA) / GRANULE, last = (seg[i].base + seg[i].size - 1 - AREA) / GRANULE;
    for (uintptr_t g = first; g <= last; g++) {
      const void *mine = i % 2 ? A : B;
      if (seg[i].live)
        owner[g] = cover[g]++ == 0 ? mine : owner[g] == mine ? mine : CP_OWNED_ANY;
      else if (--cover[g] == 0)
        owner[g] = NULL;
    }
    for (uintptr_t g = first > 0 ? first - 1 : 0; g <= last + 1 && g < GRANULES; g++) {
      cr_assert(eq(int, cp_owned_maybe(AREA + g * GRANULE + (g % 7) * 4096), cover[g] != 0),
                "round %d, granule %lu", round, (unsigned long)g);
      cr_assert(eq(ptr, (void *)cp_owned_lookup(AREA + g * GRANULE), (void *)owner[g]), "round %d, granule %lu",
                round, (unsigned long)g);
    }
  }
}

/* The caller holds the pool lock: a free that took it would never return
 * (the test's timeout fails it). */
Test(owned, a_free_of_no_segments_address_takes_no_pool_lock, .timeout = 20) {
  fx_open(GiB);
  uintptr_t p = 0; /* through the thread's cache, which a foreign address then misses */
  cr_assert(eq(int, cp_tcache_alloc(F.pool, 4096, CP_STREAM_DEVICE, 1, &p), 0));
  uintptr_t foreign = AREA + 12345 * 512;
  pthread_mutex_lock(&F.pool->lock);
  cr_assert(eq(int, cp_tcache_free(F.pool, foreign, 1, 0), ENOENT));
  cr_assert(eq(int, cp_tcache_free(F.pool, foreign, 0, 0), ENOENT));
  cr_assert(eq(sz, cp_block_size(F.pool, foreign), 0));
  cr_assert(eq(int, cp_record_stream(F.pool, foreign, 7), ENOENT));
  pthread_mutex_unlock(&F.pool->lock);
  cr_assert(eq(ptr, (void *)cp_owned_lookup(p), F.pool), "the pool's own segment is counted, as its");
  cr_assert(eq(int, cp_tcache_free(F.pool, p, 1, 0), 0));
  fx_close();
  cr_assert(not(cp_owned_maybe(p)), "and forgotten with the pool");
}

Test(owned, a_segment_given_back_is_forgotten_while_the_pool_lives) {
  fx_open(GiB);
  uintptr_t keep = fx_alloc(4096), p = fx_alloc(32 * MiB); /* a segment of its own */
  cr_assert(cp_owned_maybe(p));
  fx_free_idle(p);
  cr_assert(eq(sz, cp_empty_cache(F.pool), 32 * MiB));
  cr_assert(not(cp_owned_maybe(p)));
  cr_assert(not(cp_owned_maybe(p + 31 * MiB)));
  cr_assert(cp_owned_maybe(keep));
  fx_free_idle(keep);
  fx_close();
}
