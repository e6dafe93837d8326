/* block_table.c: the pool's uthash tables (the ACTIVE map by address, the
 * pending blocks by (stream, key)) keep growing with their entries, so that
 * an operation's cost does not grow with the blocks live. uthash stops
 * doubling a table for good after two doublings that left over half its
 * entries past their bucket's ideal length; a hash that kept addresses
 * 512 bytes apart in few buckets made it stop at 128 buckets (10^6 frees:
 * 191 s). Structural checks, not timings: bench/core_bench.c times it. */
#include "pool_internal.h" /* the tables; first: it sets uthash's hash function */

#include "core_fixture.h"

#define N_BLOCKS 100000

/* What a table's shape says about its lookups. */
typedef struct table_shape {
  unsigned buckets, longest, noexpand, ineff_expands;
} table_shape_t;

static table_shape_t shape_of(const UT_hash_table *tbl) {
  table_shape_t s = {tbl->num_buckets, 0, tbl->noexpand, tbl->ineff_expands};
  for (unsigned i = 0; i < tbl->num_buckets; i++)
    if (tbl->buckets[i].count > s.longest) s.longest = tbl->buckets[i].count;
  return s;
}

/* n live entries in a table that still grows: at most 10 a bucket on
 * average (uthash doubles at 10 in one bucket), none much longer. */
static void assert_spread(table_shape_t s, size_t n) {
  cr_assert(eq(u32, s.noexpand, 0), "uthash gave up growing the table at %u buckets", s.buckets);
  cr_assert(eq(u32, s.ineff_expands, 0));
  cr_assert(ge(sz, (size_t)s.buckets * 10, n), "%u buckets for %zu entries", s.buckets, n);
  cr_assert(le(u32, s.longest, 20), "a chain of %u in %u buckets", s.longest, s.buckets);
}

static uintptr_t live[N_BLOCKS];

static void active_table_spreads(size_t (*size_of)(size_t i), size_t n, size_t capacity) {
  fx_open(capacity);
  for (size_t i = 0; i < n; i++) live[i] = fx_alloc_on(size_of(i), 0, 1);
  assert_spread(shape_of(F.pool->active->hh.tbl), n + 1 /* the anchor */);
  for (size_t i = 0; i < n; i++) cr_assert(eq(int, cp_free(F.pool, live[i], 1, 0), 0));
  fx_close();
}

static size_t size_512(size_t i) { return (void)i, 512; }
static size_t size_512_to_896(size_t i) { return 512 + (i % 7) * 64; }
static size_t size_2m(size_t i) { return (void)i, 2 * MiB; }

Test(block_table, addresses_512_bytes_apart_keep_the_table_growing) {
  active_table_spreads(size_512, N_BLOCKS, 1 * GiB);
}

/* The probe: 512 + (i % 7) * 64 bytes. */
Test(block_table, mixed_small_blocks_keep_the_table_growing) {
  active_table_spreads(size_512_to_896, N_BLOCKS, 1 * GiB);
}

/* One block every 2 MiB: the same 512-byte slot of every 2 MiB region. */
Test(block_table, blocks_2_mib_apart_keep_the_table_growing) {
  active_table_spreads(size_2m, 20000, 64 * GiB);
}

/* Pending blocks of 10^4 (stream, key) pairs: one keyed tree each. */
Test(block_table, stream_key_pairs_keep_the_table_growing) {
  enum { PAIRS = 10000 };
  fx_open(1 * GiB);
  for (size_t i = 0; i < PAIRS; i++) live[i] = fx_alloc_on(512, i % 100, 1 + i / 100);
  for (size_t i = 0; i < PAIRS; i++) cr_assert(eq(int, cp_free(F.pool, live[i], 1 + i / 100, 0), 0));
  pthread_mutex_lock(&F.pool->lock);
  cr_assert(eq(sz, (size_t)HASH_COUNT(F.pool->small.keyed), PAIRS));
  table_shape_t s = shape_of(F.pool->small.keyed->hh.tbl);
  pthread_mutex_unlock(&F.pool->lock);
  assert_spread(s, PAIRS);
  fx_close();
}
